//! The real binary against the real client programs a user would point at it: `uraid serve` with
//! nbdinfo, nbdcopy, qemu-img, qemu-io, fio and a hand-written NBD client sending bad traffic;
//! `uraid mount` with losetup, mkfs.ext4, mount and e2fsck, healthy and degraded; and what a clean
//! stop, a crash (`kill -9`) and refused options leave on the members.
//!
//! Every test has its own temporary folder, socket and loop device, so they run in parallel.
//! Servers, mounts and loop devices are owned by guards that tear them down on drop: a failed
//! assertion must not leave a process, a mount or a loop device behind.
//!
//! Needs root, /dev/fuse, /dev/loop-control and the Debian packages libnbd-bin, qemu-utils, fio,
//! fuse3, e2fsprogs and util-linux. A missing program fails the test with the package to install.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read, Seek, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;
use uraid_testkit::sha256_hex;

const MIB: u64 = 1 << 20;
/// The region each client test fills with random data and then hands to fio.
const FILLED: u64 = 64 * MIB;
/// Longest any single client command may take before the test fails instead of hanging.
const COMMAND_LIMIT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------------
// Running programs

/// A client program's path. A missing client fails the test, naming the package: a suite that
/// skips what it cannot run would pass without testing anything.
fn tool(name: &str, package: &str) -> Command {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from));
    for dir in dirs {
        let p = dir.join(name);
        if p.is_file() {
            let mut c = Command::new(p);
            c.stdin(Stdio::null());
            return c;
        }
    }
    panic!("{name} not found: install the Debian package {package} (apt-get install {package})");
}

fn uraid() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_uraid"));
    c.stdin(Stdio::null());
    c
}

struct Ran {
    line: String,
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
}

impl Ran {
    fn text(&self) -> String {
        format!("{}{}", String::from_utf8_lossy(&self.stdout), self.stderr)
    }

    fn describe(&self) -> String {
        let out = String::from_utf8_lossy(&self.stdout);
        let out: String = out.chars().take(4000).collect();
        format!("{}: {}\n--- stdout\n{out}\n--- stderr\n{}", self.line, self.status, self.stderr)
    }
}

/// Runs to completion with output in files (a pipe could fill and stall a big `uraid cat`), and
/// kills the program if it outlives `limit`, so a hung client fails the test instead of the CI run.
fn run_limited(cmd: &mut Command, limit: Duration) -> Ran {
    let line = format!("{cmd:?}");
    let mut out = tempfile::tempfile().unwrap();
    let mut err = tempfile::tempfile().unwrap();
    let mut child = cmd
        .stdout(out.try_clone().unwrap())
        .stderr(err.try_clone().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{line}: still running after {limit:?}; killed");
        }
        sleep(Duration::from_millis(10));
    };
    let (mut stdout, mut stderr) = (Vec::new(), String::new());
    out.rewind().unwrap();
    out.read_to_end(&mut stdout).unwrap();
    err.rewind().unwrap();
    err.read_to_string(&mut stderr).unwrap();
    Ran { line, status, stdout, stderr }
}

fn run(cmd: &mut Command) -> Ran {
    run_limited(cmd, COMMAND_LIMIT)
}

fn run_ok(cmd: &mut Command) -> Ran {
    let r = run(cmd);
    assert!(r.status.success(), "{}", r.describe());
    r
}

static LOG_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A background process (a `uraid serve` or `mount`, or a client load), killed with SIGKILL on
/// drop unless it was stopped on purpose.
struct Daemon {
    child: Option<Child>,
    log: PathBuf,
    line: String,
}

impl Daemon {
    fn spawn(cmd: &mut Command, dir: &Path, name: &str) -> Daemon {
        let log = dir.join(format!("{name}-{}.log", LOG_COUNTER.fetch_add(1, Ordering::SeqCst)));
        let f = File::create(&log).unwrap();
        let line = format!("{cmd:?}");
        let child = cmd.stdout(f.try_clone().unwrap()).stderr(f).spawn().unwrap_or_else(|e| panic!("{line}: {e}"));
        Daemon { child: Some(child), log, line }
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    /// Panics with the log if the process has already ended: it was meant to keep running.
    fn assert_running(&mut self, what: &str) {
        if let Some(status) = self.child.as_mut().expect("running").try_wait().unwrap() {
            self.child = None;
            panic!("{what}: {} exited early with {status}\n{}", self.line, self.log());
        }
    }

    fn wait_for_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.as_mut().expect("running").try_wait().unwrap() {
                self.child = None;
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then wait: this is how a user stops a server, and the only stop that may mark
    /// the array clean.
    fn stop(mut self) -> (ExitStatus, String) {
        // SAFETY: kill(2) on a child we have not reaped yet.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        match self.wait_for_exit(Duration::from_secs(60)) {
            Some(s) => (s, self.log()),
            None => panic!("{} did not exit within 60 s of SIGTERM\n{}", self.line, self.log()),
        }
    }

    fn kill9(mut self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.pid(), libc::SIGKILL) };
        self.wait_for_exit(Duration::from_secs(30)).expect("SIGKILL ends any process");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn poll_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// Arrays and their contents

fn scratch() -> TempDir {
    tempfile::Builder::new().prefix("uraid-clients-").tempdir().unwrap()
}

/// Sparse member files, created as a user would with `truncate -s`.
fn member_files(dir: &Path, n: usize, size: u64) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let p = dir.join(format!("m{i}.img"));
            File::create(&p).unwrap().set_len(size).unwrap();
            p
        })
        .collect()
}

fn create(members: &[PathBuf], opts: &[&str]) {
    run_ok(uraid().arg("create").args(opts).args(members));
}

fn try_detail(members: &[PathBuf]) -> Option<Value> {
    let r = run(uraid().args(["detail", "--json"]).args(members));
    r.status.success().then(|| serde_json::from_slice(&r.stdout).expect("detail --json prints JSON"))
}

fn detail(members: &[PathBuf]) -> Value {
    try_detail(members).unwrap_or_else(|| panic!("uraid detail failed on {members:?}"))
}

fn array_size(members: &[PathBuf]) -> u64 {
    detail(members)["array_size_bytes"].as_u64().expect("array_size_bytes")
}

fn is_clean(members: &[PathBuf]) -> bool {
    detail(members)["clean"].as_bool().expect("clean is a bool")
}

fn cat(members: &[PathBuf]) -> Vec<u8> {
    run_ok(uraid().arg("cat").args(members)).stdout
}

fn write_array(members: &[PathBuf], offset: u64, data_file: &Path) {
    run_ok(
        uraid().args(["write", "--offset", &offset.to_string()]).args(members).stdin(File::open(data_file).unwrap()),
    );
}

fn file_hashes(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| sha256_hex(&fs::read(p).unwrap())).collect()
}

/// Deterministic noise (xorshift), so a failure can be replayed from the seed.
fn random_bytes(len: u64, seed: u64) -> Vec<u8> {
    uraid_testkit::noise(seed, len as usize)
}

fn random_file(path: &Path, len: u64, seed: u64) -> Vec<u8> {
    let data = random_bytes(len, seed);
    fs::write(path, &data).unwrap();
    data
}

/// Equality with the first differing offset in the message; a 100 MiB assert_eq! dump helps nobody.
fn assert_same(what: &str, got: &[u8], want: &[u8]) {
    if got == want {
        return;
    }
    let first = got.iter().zip(want).position(|(a, b)| a != b);
    match first {
        Some(i) => panic!("{what}: first difference at byte {i} (got {:#04x}, want {:#04x})", got[i], want[i]),
        None => panic!("{what}: lengths differ: got {}, want {}", got.len(), want.len()),
    }
}

// ---------------------------------------------------------------------------------------------
// uraid serve

/// A running `uraid serve` on a Unix socket in the test's folder.
struct Server {
    daemon: Daemon,
    sock: PathBuf,
}

impl Server {
    fn start(dir: &Path, members: &[PathBuf], extra: &[&str]) -> Server {
        let sock = dir.join("nbd.sock");
        let _ = fs::remove_file(&sock);
        let mut daemon = Daemon::spawn(
            uraid().arg("serve").arg(format!("--listen=unix:{}", sock.display())).args(extra).args(members),
            dir,
            "serve",
        );
        poll_until(Duration::from_secs(10), "the server's socket", || {
            daemon.assert_running("uraid serve");
            sock.exists()
        });
        Server { daemon, sock }
    }

    fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.sock.display())
    }

    fn assert_running(&mut self) {
        self.daemon.assert_running("uraid serve");
    }

    /// SIGTERM; the server must exit 0 (it flushes and marks the array clean on the way out).
    fn stop(self) -> String {
        let (status, log) = self.daemon.stop();
        assert!(status.success(), "uraid serve exited {status} after SIGTERM\n{log}");
        log
    }
}

/// nbdinfo must see the array's size and the capabilities a server over a consistent, flushable
/// array can promise.
fn check_nbdinfo(uri: &str, size: u64, read_only: bool) {
    let r = run_ok(tool("nbdinfo", "libnbd-bin").arg("--json").arg(uri));
    let v: Value =
        serde_json::from_slice(&r.stdout).unwrap_or_else(|e| panic!("nbdinfo --json: {e}\n{}", r.describe()));
    let e = &v["exports"][0];
    assert_eq!(e["export-size"].as_u64(), Some(size), "export-size\n{e:#}");
    assert_eq!(e["is_read_only"].as_bool(), Some(read_only), "is_read_only\n{e:#}");
    for key in ["can_flush", "can_fua", "can_multi_conn"] {
        assert_eq!(e[key].as_bool(), Some(true), "{key}\n{e:#}");
    }
    // A read-only export has nothing to trim or zero, so it does not offer them.
    for key in ["can_trim", "can_zero"] {
        assert_eq!(e[key].as_bool(), Some(!read_only), "{key}\n{e:#}");
    }
}

fn nbdcopy(from: &str, to: &str) {
    run_ok(tool("nbdcopy", "libnbd-bin").args([from, to]));
}

/// The whole export as a client sees it.
fn copy_out(uri: &str, dir: &Path, name: &str) -> Vec<u8> {
    let path = dir.join(name);
    nbdcopy(uri, path.to_str().unwrap());
    let data = fs::read(&path).unwrap();
    fs::remove_file(&path).unwrap();
    data
}

// ---------------------------------------------------------------------------------------------
// qemu-io scripts checked against a model of the export

enum IoOp {
    Write {
        pattern: u8,
        offset: u64,
        len: u64,
        fua: bool,
    },
    Zero {
        offset: u64,
        len: u64,
    },
    /// Reads back what the model says the range holds (it must be one byte value).
    Read {
        offset: u64,
        len: u64,
    },
    Discard {
        offset: u64,
        len: u64,
    },
    Flush,
}

/// Turns the ops into qemu-io `-c` arguments and applies them to `model`, so the script's reads
/// always expect what earlier writes left there.
fn qemu_io_script(ops: &[IoOp], model: &mut [u8]) -> Vec<String> {
    let mut args = Vec::new();
    for op in ops {
        let c = match *op {
            IoOp::Write { pattern, offset, len, fua } => {
                model[offset as usize..(offset + len) as usize].fill(pattern);
                format!("write {}-P {pattern:#04x} {offset} {len}", if fua { "-f " } else { "" })
            }
            IoOp::Zero { offset, len } => {
                model[offset as usize..(offset + len) as usize].fill(0);
                format!("write -z {offset} {len}")
            }
            IoOp::Read { offset, len } => {
                let range = &model[offset as usize..(offset + len) as usize];
                assert!(
                    range.iter().all(|b| *b == range[0]),
                    "test script bug: read {offset}+{len} is not one pattern"
                );
                format!("read -P {:#04x} {offset} {len}", range[0])
            }
            IoOp::Discard { offset, len } => format!("discard {offset} {len}"),
            IoOp::Flush => "flush".to_string(),
        };
        args.push("-c".to_string());
        args.push(c);
    }
    args
}

/// Runs a qemu-io script; every command must report success and every pattern must verify.
fn qemu_io_ok(uri: &str, ops: &[IoOp], model: &mut [u8]) {
    let script = qemu_io_script(ops, model);
    let r = run(tool("qemu-io", "qemu-utils").args(["-f", "raw", uri]).args(&script));
    let text = r.text();
    assert!(r.status.success(), "{}", r.describe());
    for bad in ["Pattern verification failed", "failed", "error", "Error"] {
        assert!(!text.contains(bad), "qemu-io printed {bad:?}\n{}", r.describe());
    }
    // One result line per command but flush: a command qemu-io skipped would otherwise go unseen.
    let results =
        text.lines().filter(|l| l.starts_with("wrote ") || l.starts_with("read ") || l.starts_with("discard ")).count();
    let expected = ops.iter().filter(|o| !matches!(o, IoOp::Flush)).count();
    assert_eq!(results, expected, "qemu-io result lines\n{}", r.describe());
}

// ---------------------------------------------------------------------------------------------
// 1. Every level served over NBD to nbdinfo, nbdcopy, qemu-img, qemu-io and fio

fn clients_against(name: &str, create_opts: &[&str], n: usize, member_size: u64, seed: u64) {
    let tmp = scratch();
    let dir = tmp.path();
    let members = member_files(dir, n, member_size);
    create(&members, create_opts);
    let size = array_size(&members);
    assert!(size >= FILLED + 16 * MIB, "{name}: array of {size} bytes is too small for this test");
    let mut server = Server::start(dir, &members, &[]);
    let uri = server.uri();

    check_nbdinfo(&uri, size, false);

    // nbdcopy in and out: the random region comes back, and the rest is still the zeros create
    // left on the zeroed members.
    let src = dir.join("random64");
    let random = random_file(&src, FILLED, seed);
    nbdcopy(src.to_str().unwrap(), &uri);
    let mut model = copy_out(&uri, dir, "out1");
    assert_eq!(model.len() as u64, size, "{name}: nbdcopy out length");
    assert_same(&format!("{name}: nbdcopy round trip"), &model[..FILLED as usize], &random);
    assert!(model[FILLED as usize..].iter().all(|b| *b == 0), "{name}: a freshly created array must read as zeros");

    // qemu-img into the start of the export, then the whole export out again.
    let src8 = dir.join("random8");
    let random8 = random_file(&src8, 8 * MIB, seed + 1);
    run_ok(tool("qemu-img", "qemu-utils").args(["convert", "-n", "-f", "raw", "-O", "raw"]).arg(&src8).arg(&uri));
    model[..random8.len()].copy_from_slice(&random8);
    let qout = dir.join("qemu-out.img");
    run_ok(tool("qemu-img", "qemu-utils").args(["convert", "-f", "raw", "-O", "raw"]).arg(&uri).arg(&qout));
    assert_same(&format!("{name}: qemu-img convert out"), &fs::read(&qout).unwrap(), &model);
    fs::remove_file(&qout).unwrap();

    // Unaligned writes, zeroes, FUA and trims across chunk and stripe boundaries, some inside the
    // region fio overwrites next (checked only by qemu-io's own reads), some after it (checked
    // again at the end against the model).
    let f = FILLED;
    let b = f + 3 * 65536 - 700;
    let ops = [
        IoOp::Write { pattern: 0xab, offset: 1000, len: 70000, fua: false },
        IoOp::Read { offset: 1000, len: 70000 },
        IoOp::Zero { offset: 5000, len: 9000 },
        IoOp::Read { offset: 5000, len: 9000 },
        IoOp::Read { offset: 1000, len: 4000 },
        IoOp::Read { offset: 14000, len: 57000 },
        IoOp::Write { pattern: 0x5a, offset: 2 * MIB + 1, len: 3 * MIB + 5, fua: false },
        IoOp::Read { offset: 2 * MIB + 1, len: 3 * MIB + 5 },
        IoOp::Discard { offset: 8 * MIB, len: MIB },
        IoOp::Write { pattern: 0x3c, offset: b, len: 1500, fua: false },
        IoOp::Zero { offset: b + 100, len: 200 },
        IoOp::Read { offset: b, len: 100 },
        IoOp::Read { offset: b + 100, len: 200 },
        IoOp::Read { offset: b + 300, len: 1200 },
        IoOp::Write { pattern: 0x99, offset: f + 12345, len: 4096, fua: true },
        IoOp::Read { offset: f + 12345, len: 4096 },
        IoOp::Write { pattern: 0x21, offset: size - MIB - 333, len: 777_777, fua: false },
        IoOp::Write { pattern: 0x77, offset: size - 5000, len: 5000, fua: false },
        IoOp::Flush,
        IoOp::Read { offset: size - MIB - 333, len: 777_777 },
        IoOp::Read { offset: size - 5000, len: 5000 },
    ];
    qemu_io_ok(&uri, &ops, &mut model);
    // The checks above only mean something if a wrong pattern is caught.
    let wrong = run(tool("qemu-io", "qemu-utils").args(["-f", "raw", &uri, "-c", "read -P 0x11 1000 100"]));
    assert!(
        wrong.text().contains("Pattern verification failed"),
        "qemu-io did not catch a wrong pattern\n{}",
        wrong.describe()
    );

    // fio: four jobs on disjoint 16 MiB regions, 4 KiB random writes 16 deep, every block read
    // back and checked.
    // In the test's folder, without a verify state file: fio would otherwise leave one per job
    // in the working directory, which is the source tree.
    let fio = run(tool("fio", "fio").current_dir(dir).args([
        "--verify_state_save=0",
        "--name=verify",
        "--ioengine=nbd",
        &format!("--uri={uri}"),
        "--rw=randwrite",
        "--bs=4k",
        "--iodepth=16",
        "--numjobs=4",
        "--size=16M",
        "--offset_increment=16M",
        "--verify=crc32c",
        "--do_verify=1",
        "--verify_fatal=1",
        "--group_reporting",
    ]));
    let text = fio.text();
    assert!(fio.status.success(), "{name}: fio failed\n{}", fio.describe());
    assert!(text.contains("err= 0"), "{name}: fio reported an error\n{}", fio.describe());
    assert!(
        !text.lines().any(|l| l.contains("verify") && (l.contains("fail") || l.contains("bad"))),
        "{name}: fio verify errors\n{}",
        fio.describe()
    );
    // 64 MiB in 4 KiB blocks written, and all read back by the verify phase.
    assert!(
        text.contains("total=16384,16384,"),
        "{name}: fio did not write and verify every block\n{}",
        fio.describe()
    );

    let last = copy_out(&uri, dir, "out-last");
    assert_same(
        &format!("{name}: after fio, outside fio's region"),
        &last[FILLED as usize..],
        &model[FILLED as usize..],
    );
    server.assert_running();

    let log = server.stop();
    let d = detail(&members);
    assert_eq!(d["clean"], Value::Bool(true), "{name}: not clean after SIGTERM\n{d:#}\n{log}");
    assert_eq!(d["state"], "clean", "{name}: {d:#}");
    assert_same(&format!("{name}: uraid cat after stop vs the export's last contents"), &cat(&members), &last);
}

#[test]
fn clients_raid0() {
    clients_against("raid0", &["-l", "0", "-n", "4", "-c", "64K"], 4, 32 * MIB, 10);
}

#[test]
fn clients_raid1() {
    clients_against("raid1", &["-l", "1", "-n", "2"], 2, 100 * MIB, 11);
}

#[test]
fn clients_raid5() {
    clients_against("raid5", &["-l", "5", "-n", "4", "-c", "64K"], 4, 48 * MIB, 12);
}

#[test]
fn clients_raid6() {
    clients_against("raid6", &["-l", "6", "-n", "5", "-c", "128K"], 5, 48 * MIB, 13);
}

#[test]
fn clients_raid10_near() {
    clients_against("raid10-n2", &["-l", "10", "-n", "4"], 4, 64 * MIB, 14);
}

#[test]
fn clients_raid10_far() {
    clients_against("raid10-f2", &["-l", "10", "-n", "4", "-p", "f2", "-c", "64K"], 4, 64 * MIB, 15);
}

/// Reads of 64 KiB to 1 MiB from members held in memory are spliced from the members' pages to
/// the socket: files on tmpfs, and files on a disk file system whose pages are cached (with
/// `--io=threads`, whose buffered writes leave them there). Clients read the same bytes as with
/// `--no-splice`, across chunk, page and pattern boundaries, on the single-copy levels and on
/// mirrors; a read the pipe cannot hold (1 MiB over many unaligned pieces) is answered the usual
/// way; and the stop line counts the spliced reads.
#[test]
fn large_reads_are_spliced_from_memory() {
    /// Name, `create` options, members, whether they live on tmpfs, `serve` options.
    type Case<'a> = (&'a str, &'a [&'a str], usize, bool, &'a [&'a str]);
    let cases: [Case; 5] = [
        ("raid0 on tmpfs", &["--level=0", "--chunk=64"], 4, true, &[]),
        ("linear on tmpfs", &["--level=linear"], 3, true, &[]),
        ("raid5 on tmpfs", &["--level=5", "--chunk=64"], 4, true, &[]),
        ("raid10 f2 on tmpfs", &["--level=10", "--layout=f2", "--chunk=64", "--assume-clean"], 4, true, &[]),
        ("raid1 cached, threads", &["--level=1", "--assume-clean"], 2, false, &["--io=threads"]),
    ];
    for (name, create_opts, n, on_tmpfs, serve_opts) in cases {
        let tmp = if on_tmpfs {
            tempfile::Builder::new()
                .prefix("uraid-splice-")
                .tempdir_in("/dev/shm")
                .expect("a folder on /dev/shm (tmpfs)")
        } else {
            scratch()
        };
        let dir = tmp.path();
        let members = member_files(dir, n, 24 * MIB);
        create(&members, &[&["--raid-devices", &n.to_string()], create_opts].concat());
        let src = dir.join("random");
        let random = random_file(&src, 8 * MIB, 77);
        for splice in [true, false] {
            let extra = [serve_opts, if splice { &[][..] } else { &["--no-splice"][..] }].concat();
            let server = Server::start(dir, &members, &extra);
            let uri = server.uri();
            // nbdcopy's 512 KiB reads: random bytes, page-aligned.
            nbdcopy(src.to_str().unwrap(), &uri);
            let out = copy_out(&uri, dir, "out");
            assert_same(&format!("{name}, splice {splice}: nbdcopy round trip"), &out[..random.len()], &random);
            // Unaligned reads that end or start exactly at a change of pattern.
            let edge = 3 * MIB + 777;
            let ops = [
                IoOp::Write { pattern: 0x11, offset: 0, len: edge, fua: false },
                IoOp::Write { pattern: 0x22, offset: edge, len: 6 * MIB - edge, fua: false },
                IoOp::Read { offset: 513, len: 1_000_000 },
                IoOp::Read { offset: edge - 700_000, len: 700_000 },
                IoOp::Read { offset: edge, len: 999_999 },
                IoOp::Read { offset: edge + 4096, len: 65536 },
                IoOp::Read { offset: 2 * MIB + 1, len: MIB },
            ];
            let mut model = vec![0u8; (6 * MIB) as usize];
            qemu_io_ok(&uri, &ops, &mut model);
            let log = server.stop();
            let spliced = log
                .lines()
                .find_map(|l| l.split(" of them spliced").next().filter(|_| l.contains(" of them spliced")))
                .and_then(|head| head.rsplit(' ').next())
                .and_then(|count| count.parse::<u64>().ok());
            if splice {
                // 16 of nbdcopy's reads of the 8 MiB written, at least, and the unaligned reads.
                assert!(spliced.is_some_and(|c| c >= 16), "{name}: too few reads spliced\n{log}");
            } else {
                assert_eq!(spliced, None, "{name}: --no-splice spliced reads\n{log}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 2. ext4 on raid5 through uraid mount + a loop device, healthy and then degraded

/// A running `uraid mount` with what is stacked on it: a loop device and a mounted file system.
/// Dropping it takes the stack down top first, so a failed test leaves nothing mounted.
struct Mounted {
    daemon: Option<Daemon>,
    file: PathBuf,
    loop_dev: Option<String>,
    fs_mount: Option<PathBuf>,
}

impl Mounted {
    fn start(dir: &Path, members: &[PathBuf], size: u64) -> Mounted {
        let args: Vec<&std::ffi::OsStr> = members.iter().map(|m| m.as_os_str()).collect();
        Mounted::start_with(dir, &args, size)
    }

    /// `uraid mount ARGS... FILE`: members, or `--raidframe CONFIG`.
    fn start_with(dir: &Path, args: &[&std::ffi::OsStr], size: u64) -> Mounted {
        let file = dir.join("array");
        let mut daemon = Daemon::spawn(uraid().arg("mount").args(args).arg(&file), dir, "mount");
        // Until FUSE is mounted, the file is the empty one uraid created.
        poll_until(Duration::from_secs(10), "the FUSE file to show the array's size", || {
            daemon.assert_running("uraid mount");
            fs::metadata(&file).map(|m| m.len() == size).unwrap_or(false)
        });
        Mounted { daemon: Some(daemon), file, loop_dev: None, fs_mount: None }
    }

    fn attach_loop(&mut self) -> String {
        let r = run_ok(tool("losetup", "mount").args(["-f", "--show"]).arg(&self.file));
        let dev = String::from_utf8(r.stdout).unwrap().trim().to_string();
        assert!(dev.starts_with("/dev/loop"), "losetup printed {dev:?}");
        self.loop_dev = Some(dev.clone());
        dev
    }

    fn mount_fs(&mut self, at: &Path) {
        fs::create_dir_all(at).unwrap();
        let dev = self.loop_dev.clone().expect("attached");
        run_ok(tool("mount", "mount").args(["-t", "ext4", &dev]).arg(at));
        self.fs_mount = Some(at.to_path_buf());
    }

    fn unmount_fs(&mut self) {
        let at = self.fs_mount.take().expect("mounted");
        run_ok(tool("umount", "mount").arg(&at));
    }

    fn detach_loop(&mut self) {
        let dev = self.loop_dev.take().expect("attached");
        run_ok(tool("losetup", "mount").args(["-d", &dev]));
    }

    /// SIGTERM: uraid unmounts, flushes and marks clean; it must exit 0.
    fn stop(mut self) -> String {
        let (status, log) = self.daemon.take().expect("running").stop();
        assert!(status.success(), "uraid mount exited {status} after SIGTERM\n{log}");
        log
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(at) = self.fs_mount.take() {
            let _ = Command::new("umount").arg("-l").arg(at).status();
        }
        if let Some(dev) = self.loop_dev.take() {
            let _ = Command::new("losetup").args(["-d", &dev]).status();
        }
        if let Some(mut d) = self.daemon.take() {
            // SAFETY: kill(2) on our unreaped child.
            unsafe { libc::kill(d.pid(), libc::SIGTERM) };
            if d.wait_for_exit(Duration::from_secs(10)).is_none() {
                drop(d);
                // A killed FUSE server leaves a dead mount on the file.
                let _ = Command::new("umount").arg("-l").arg(&self.file).status();
            }
        }
    }
}

/// sha256 of every regular file under `root`, by path relative to it.
fn tree_hashes(root: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                walk(root, &e.path(), out);
            } else if t.is_file() {
                out.insert(
                    e.path().strip_prefix(root).unwrap().to_path_buf(),
                    sha256_hex(&fs::read(e.path()).unwrap()),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn e2fsck_clean(target: &str) {
    let r = run(tool("e2fsck", "e2fsprogs").args(["-fn", target]));
    assert_eq!(r.status.code(), Some(0), "e2fsck -fn {target} found problems\n{}", r.describe());
}

/// Checks an image taken with `uraid cat`, without a loop device: e2fsck, then debugfs copies
/// every file out, and the files must be exactly the ones written through the mount.
fn check_image(dir: &Path, img: &Path, want: &BTreeMap<PathBuf, String>) {
    e2fsck_clean(img.to_str().unwrap());
    let dump = dir.join(format!("dump-{}", img.file_name().unwrap().to_string_lossy()));
    fs::create_dir_all(&dump).unwrap();
    run_ok(tool("debugfs", "e2fsprogs").arg("-R").arg(format!("rdump / {}", dump.display())).arg(img));
    let got = tree_hashes(&dump);
    assert_eq!(got.len(), want.len(), "files in {}", img.display());
    assert!(got == *want, "file contents in {} differ from what was written", img.display());
    fs::remove_dir_all(&dump).unwrap();
}

fn copy_tree_and_files(into: &Path, seed: u64) {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    run_ok(tool("cp", "coreutils").arg("-a").arg(&crates).arg(into.join("src-tree")));
    let data = into.join("data");
    fs::create_dir_all(&data).unwrap();
    // Sizes that are not multiples of a block or a stripe.
    for (i, len) in [5 * MIB + 17, 13 * MIB, 777].into_iter().enumerate() {
        random_file(&data.join(format!("r{i}")), len, seed + i as u64);
    }
    run_ok(tool("sync", "coreutils").arg("-f").arg(into));
}

#[test]
fn ext4_on_raid5_mount_healthy_then_degraded() {
    // SAFETY: geteuid cannot fail.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root: it attaches loop devices and mounts ext4");
    let tmp = scratch();
    let dir = tmp.path();
    let members = member_files(dir, 4, 48 * MIB);
    create(&members, &["-l", "5", "-n", "4", "-c", "64K"]);
    let size = array_size(&members);

    // Healthy: mkfs and fill through uraid mount + loop.
    let mnt = dir.join("mnt");
    let mut m = Mounted::start(dir, &members, size);
    let dev = m.attach_loop();
    run_ok(tool("mkfs.ext4", "e2fsprogs").args(["-q", &dev]));
    m.mount_fs(&mnt);
    fs::create_dir(mnt.join("one")).unwrap();
    copy_tree_and_files(&mnt.join("one"), 100);
    let written1 = tree_hashes(&mnt);
    assert!(written1.len() > 50, "the copied tree is too small to mean anything: {} files", written1.len());
    m.unmount_fs();
    e2fsck_clean(&dev);
    m.detach_loop();
    m.stop();
    let d = detail(&members);
    assert_eq!(d["state"], "clean", "after a healthy unmount\n{d:#}");

    let img1 = dir.join("healthy.img");
    fs::write(&img1, cat(&members)).unwrap();
    check_image(dir, &img1, &written1);
    fs::remove_file(&img1).unwrap();

    // Degraded: the last member left out; read what is there, add more.
    let three = &members[..3];
    let mut m = Mounted::start(dir, three, size);
    assert!(m.daemon.as_ref().unwrap().log().contains("degraded"), "uraid mount should say it runs degraded");
    let dev = m.attach_loop();
    m.mount_fs(&mnt);
    assert!(tree_hashes(&mnt) == written1, "files read back degraded differ from those written healthy");
    fs::create_dir(mnt.join("two")).unwrap();
    copy_tree_and_files(&mnt.join("two"), 200);
    let written2 = tree_hashes(&mnt);
    assert!(written2.len() > written1.len());
    m.unmount_fs();
    e2fsck_clean(&dev);
    m.detach_loop();
    m.stop();

    // The left-out member is stale now: md (and uraid) must leave it out even when it is given.
    let d = detail(&members);
    assert_eq!(d["clean"], Value::Bool(true), "{d:#}");
    assert_eq!(d["degraded"], Value::Bool(true), "{d:#}");
    assert_eq!(d["members"][3]["state"], "stale", "the member left out must be stale\n{d:#}");
    let with_all = cat(&members);
    assert_same("cat with the stale member given vs without it", &with_all, &cat(three));
    let img2 = dir.join("degraded.img");
    fs::write(&img2, with_all).unwrap();
    check_image(dir, &img2, &written2);
}

// ---------------------------------------------------------------------------------------------
// 3. Clean and unclean stop

/// What a crash leaves: a raid5 array whose first half was written and flushed by nbdcopy, and
/// whose server was killed with SIGKILL while fio was writing the second half.
struct Crashed {
    tmp: TempDir,
    members: Vec<PathBuf>,
    size: u64,
    first_half: Vec<u8>,
}

impl Crashed {
    fn half(&self) -> u64 {
        self.first_half.len() as u64
    }
}

fn crash_raid5_under_fio(seed: u64) -> Crashed {
    let tmp = scratch();
    let dir = tmp.path();
    let members = member_files(dir, 4, 48 * MIB);
    create(&members, &["-l", "5", "-n", "4", "-c", "64K"]);
    let size = array_size(&members);
    let half = size / 2 / MIB * MIB;

    let server = Server::start(dir, &members, &[]);
    let uri = server.uri();
    let src = dir.join("first-half");
    let first_half = random_file(&src, half, seed);
    nbdcopy(src.to_str().unwrap(), &uri);
    // Idle after its last write, the server marks the array clean by itself (md's safe mode),
    // so a crash while idle needs no resync.
    poll_until(Duration::from_secs(10), "the idle array to be marked clean", || {
        try_detail(&members).and_then(|d| d["clean"].as_bool()) == Some(true)
    });

    let mut fio = Daemon::spawn(
        tool("fio", "fio").current_dir(dir).args([
            "--name=load",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--rw=randwrite",
            "--bs=64k",
            "--iodepth=8",
            &format!("--offset={half}"),
            &format!("--size={}", size - half),
            "--time_based",
            "--runtime=60",
        ]),
        dir,
        "fio",
    );
    // The superblocks say dirty once fio's writes are going in: kill the server then.
    poll_until(Duration::from_secs(15), "fio's writes to mark the array dirty", || {
        fio.assert_running("fio");
        try_detail(&members).and_then(|d| d["clean"].as_bool()) == Some(false)
    });
    sleep(Duration::from_millis(300));
    fio.assert_running("fio");
    server.daemon.kill9();
    // fio fails once its server is gone; how is not this test's business.
    let _ = fio.wait_for_exit(Duration::from_secs(30));
    Crashed { tmp, members, size, first_half }
}

#[test]
fn kill9_leaves_array_dirty_with_flushed_data_intact() {
    let c = crash_raid5_under_fio(30);
    let dir = c.tmp.path();

    let d = detail(&c.members);
    assert_eq!(d["clean"], Value::Bool(false), "after kill -9 mid-write the array must not be clean\n{d:#}");
    assert_ne!(d["state"], "clean", "{d:#}");
    assert!(d["state"].as_str().unwrap().contains("resync"), "state should say a resync is needed\n{d:#}");

    // What nbdcopy wrote and flushed is there, and the whole array still reads.
    let whole = cat(&c.members);
    assert_eq!(whole.len() as u64, c.size);
    assert_same("first half after the crash", &whole[..c.half() as usize], &c.first_half);

    // md refuses to run a parity array that is both dirty and degraded: rebuilt data could be
    // wrong. Refusing must not touch the members.
    let before = file_hashes(&c.members);
    let sock = dir.join("degraded.sock");
    let r = run_limited(
        uraid().arg("serve").arg(format!("--listen=unix:{}", sock.display())).args(&c.members[..3]),
        Duration::from_secs(20),
    );
    assert!(!r.status.success(), "serving a dirty degraded raid5 must be refused\n{}", r.describe());
    assert!(r.stderr.contains("not shut down cleanly"), "{}", r.describe());
    assert_eq!(file_hashes(&c.members), before, "a refused serve changed a member");

    // With every member it assembles again, says why it is careful, and serves the same data.
    let server = Server::start(dir, &c.members, &[]);
    assert!(server.daemon.log().contains("not shut down cleanly"), "{}", server.daemon.log());
    let again = copy_out(&server.uri(), dir, "again");
    assert_same("the export after the crash vs uraid cat", &again, &whole);
    server.stop();
    assert_same("contents after a clean restart", &cat(&c.members), &whole);
    // Whether that stop may call the array clean again is what the two tests below ask.
}

/// After a crash the array needs a resync; a server starts it by itself (md does), and once it
/// has covered the array, a stop leaves the array clean with parity consistent.
#[test]
fn restart_after_kill9_resyncs_and_ends_clean() {
    let c = crash_raid5_under_fio(31);
    let server = Server::start(c.tmp.path(), &c.members, &[]);
    let uri = server.uri();
    poll_until(Duration::from_secs(60), "the resync to finish", || server.daemon.log().contains("resync completed"));
    // The data is what it was before the resync.
    let _ = copy_out(&uri, c.tmp.path(), "after-resync");
    let log = server.stop();
    let d = detail(&c.members);
    assert_eq!(d["clean"], Value::Bool(true), "{d:#}\n{log}");
    assert!(log.contains("marked clean"), "{log}");
    assert_parity_consistent(&c.members);
}

/// A crash can leave a stripe torn: data on one member written, parity not. Until a resync has
/// rewritten parity the array must not be called clean, because a later degraded read rebuilds
/// from that parity; a resync cut short by a stop leaves it dirty, a finished one repairs the
/// stripe. The torn stripe is made by hand so the outcome does not depend on where SIGKILL landed.
#[test]
fn no_clean_mark_over_unresynced_parity() {
    let c = crash_raid5_under_fio(32);
    let dir = c.tmp.path();
    let data_offset = run_ok(uraid().args(["examine", "--json"]).arg(&c.members[0])).stdout;
    let data_offset: Value = serde_json::from_slice(&data_offset).unwrap();
    let data_offset = data_offset[0]["data_offset_sectors"].as_u64().expect("data_offset_sectors") * 512;
    // Member 0's first chunk holds data (left-symmetric, the default, puts stripe 0's parity
    // on the last member).
    let mut f = fs::OpenOptions::new().write(true).open(&c.members[0]).unwrap();
    f.seek(io::SeekFrom::Start(data_offset)).unwrap();
    f.write_all(&[0xee; 4096]).unwrap();
    drop(f);
    let whole = cat(&c.members);

    // A resync held to 64 KiB/s cannot finish before the stop.
    let server = Server::start(dir, &c.members, &["--speed-limit-max=64K"]);
    let uri = server.uri();
    // One small write far from the torn stripe, then enough idle time for a clean mark.
    let r = run(tool("qemu-io", "qemu-utils").args([
        "-f",
        "raw",
        &uri,
        "-c",
        &format!("write -P 0x42 {} 4096", c.size - 4096),
    ]));
    assert!(r.status.success(), "{}", r.describe());
    sleep(Duration::from_secs(2));
    let log = server.stop();
    assert!(!is_clean(&c.members), "array marked clean over parity that was never resynced\n{log}");
    assert!(log.contains("stays marked dirty"), "{log}");

    // Unthrottled, the resync finishes and rewrites the torn stripe's parity.
    let server = Server::start(dir, &c.members, &[]);
    poll_until(Duration::from_secs(60), "the resync to finish", || server.daemon.log().contains("resync completed"));
    server.stop();
    assert!(is_clean(&c.members));
    let mut want = whole;
    let end = want.len();
    want[end - 4096..].fill(0x42);
    assert_same("contents after the resync", &cat(&c.members), &want);
    assert_parity_consistent(&c.members);
}

/// Every member left out in turn must read the same as all of them: what a clean raid5 promises.
fn assert_parity_consistent(members: &[PathBuf]) {
    let whole = cat(members);
    for skip in 0..members.len() {
        let rest: Vec<PathBuf> =
            members.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, p)| p.clone()).collect();
        assert_same(&format!("clean array read without member {skip}"), &cat(&rest), &whole);
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Bad traffic from a hand-written NBD client

const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
const REQUEST_MAGIC: u32 = 0x2560_9513;
const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
const FLAG_FIXED_NEWSTYLE: u16 = 1;
const CLIENT_FLAGS: u32 = 1 | 2; // fixed newstyle, no zeroes
const OPT_STARTTLS: u32 = 5;
const OPT_GO: u32 = 7;
const REP_ACK: u32 = 1;
const REP_INFO: u32 = 3;
const REP_ERR_UNSUP: u32 = 0x8000_0001;
const REP_ERR_INVALID: u32 = 0x8000_0003;
const REP_ERR_UNKNOWN: u32 = 0x8000_0006;
const REP_ERR_TOO_BIG: u32 = 0x8000_0009;
const CMD_READ: u16 = 0;
const CMD_WRITE: u16 = 1;
const CMD_DISC: u16 = 2;
const CMD_WRITE_ZEROES: u16 = 6;
const EPERM: u32 = 1;
const EINVAL: u32 = 22;
const ENOSPC: u32 = 28;

/// The client side of the NBD wire protocol, byte by byte, so it can also say what no real
/// client would. Simple replies only (no structured replies are negotiated).
struct RawNbd {
    s: UnixStream,
}

impl RawNbd {
    /// Connects and reads the greeting, but sends nothing yet.
    fn greeted(sock: &Path) -> RawNbd {
        let s = UnixStream::connect(sock).unwrap_or_else(|e| panic!("connect {}: {e}", sock.display()));
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut c = RawNbd { s };
        assert_eq!(c.u64(), NBDMAGIC, "greeting magic");
        assert_eq!(c.u64(), IHAVEOPT, "greeting: not newstyle");
        assert_ne!(c.u16() & FLAG_FIXED_NEWSTYLE, 0, "server must offer fixed newstyle");
        c
    }

    fn haggling(sock: &Path) -> RawNbd {
        let mut c = RawNbd::greeted(sock);
        c.put(&CLIENT_FLAGS.to_be_bytes()).unwrap();
        c
    }

    /// Through NBD_OPT_GO for the default export; returns the connection and the export size.
    fn transmitting(sock: &Path) -> (RawNbd, u64, u16) {
        let mut c = RawNbd::haggling(sock);
        let (size, flags) = c.go();
        (c, size, flags)
    }

    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.s.write_all(b)
    }

    fn get(&mut self, n: usize) -> io::Result<Vec<u8>> {
        let mut b = vec![0; n];
        self.s.read_exact(&mut b)?;
        Ok(b)
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.get(2).unwrap().try_into().unwrap())
    }

    fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.get(4).unwrap().try_into().unwrap())
    }

    fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.get(8).unwrap().try_into().unwrap())
    }

    fn option(&mut self, option: u32, data: &[u8]) {
        let mut b = IHAVEOPT.to_be_bytes().to_vec();
        b.extend_from_slice(&option.to_be_bytes());
        b.extend_from_slice(&(data.len() as u32).to_be_bytes());
        b.extend_from_slice(data);
        self.put(&b).unwrap();
    }

    /// One option reply: (reply type, data). Checks magic and that it answers `option`.
    fn option_reply(&mut self, option: u32) -> (u32, Vec<u8>) {
        assert_eq!(self.u64(), OPTION_REPLY_MAGIC, "option reply magic");
        assert_eq!(self.u32(), option, "option reply for another option");
        let kind = self.u32();
        let len = self.u32() as usize;
        (kind, self.get(len).unwrap())
    }

    fn go_data(name: &[u8]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name);
        d.extend_from_slice(&0u16.to_be_bytes()); // no information requests
        d
    }

    fn go(&mut self) -> (u64, u16) {
        self.option(OPT_GO, &RawNbd::go_data(b""));
        let mut export = None;
        loop {
            let (kind, data) = self.option_reply(OPT_GO);
            match kind {
                REP_INFO if data[..2] == [0, 0] => {
                    let size = u64::from_be_bytes(data[2..10].try_into().unwrap());
                    let flags = u16::from_be_bytes(data[10..12].try_into().unwrap());
                    export = Some((size, flags));
                }
                REP_INFO => {}
                REP_ACK => return export.expect("NBD_OPT_GO acknowledged without NBD_INFO_EXPORT"),
                other => panic!("NBD_OPT_GO answered with {other:#x}: {}", String::from_utf8_lossy(&data)),
            }
        }
    }

    fn request(&mut self, kind: u16, flags: u16, handle: u64, offset: u64, len: u32) -> io::Result<()> {
        let mut b = REQUEST_MAGIC.to_be_bytes().to_vec();
        b.extend_from_slice(&flags.to_be_bytes());
        b.extend_from_slice(&kind.to_be_bytes());
        b.extend_from_slice(&handle.to_be_bytes());
        b.extend_from_slice(&offset.to_be_bytes());
        b.extend_from_slice(&len.to_be_bytes());
        self.put(&b)
    }

    /// A simple reply's (error, handle).
    fn reply(&mut self) -> io::Result<(u32, u64)> {
        let h = self.get(16)?;
        assert_eq!(u32::from_be_bytes(h[..4].try_into().unwrap()), SIMPLE_REPLY_MAGIC, "reply magic");
        Ok((u32::from_be_bytes(h[4..8].try_into().unwrap()), u64::from_be_bytes(h[8..].try_into().unwrap())))
    }

    /// Sends a request and returns the error the server answered with (0 for success).
    fn errno_of(&mut self, kind: u16, flags: u16, offset: u64, len: u32, payload: &[u8]) -> u32 {
        let handle = 0x1000 + u64::from(kind);
        self.request(kind, flags, handle, offset, len).unwrap();
        self.put(payload).unwrap();
        let (error, h) = self.reply().unwrap();
        assert_eq!(h, handle, "reply for another request");
        error
    }

    fn read_at(&mut self, offset: u64, len: u32) -> Vec<u8> {
        assert_eq!(self.errno_of(CMD_READ, 0, offset, len, &[]), 0, "read of {len} at {offset}");
        self.get(len as usize).unwrap()
    }

    fn disconnect(mut self) {
        let _ = self.request(CMD_DISC, 0, 0, 0, 0);
    }

    /// Whether the server closed the connection (rather than waiting for more).
    fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.s.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe),
        }
    }
}

/// A fresh, well-behaved connection still gets the array's data.
fn assert_still_serving(server: &mut Server, reference: &[u8], after: &str) {
    server.assert_running();
    let (mut c, _, _) = RawNbd::transmitting(&server.sock);
    assert_same(&format!("healthy read after {after}"), &c.read_at(0, reference.len() as u32), reference);
    c.disconnect();
}

#[test]
fn bad_nbd_traffic_is_refused_and_changes_nothing() {
    let tmp = scratch();
    let dir = tmp.path();
    let members = member_files(dir, 4, 24 * MIB);
    create(&members, &["-l", "5", "-n", "4", "-c", "64K"]);
    let size = array_size(&members);
    let src = dir.join("content");
    let content = random_file(&src, 4 * MIB, 40);
    write_array(&members, 0, &src);
    let before = sha256_hex(&cat(&members));
    let reference = content[..MIB as usize].to_vec();

    let mut server = Server::start(dir, &members, &[]);
    let sock = server.sock.clone();
    assert_still_serving(&mut server, &reference, "nothing");

    // Junk where the client flags belong: the server hangs up.
    let mut c = RawNbd::greeted(&sock);
    c.put(&[0xff; 4]).unwrap();
    assert!(c.closed_by_server(), "unknown client flags must end the connection");
    assert_still_serving(&mut server, &reference, "junk client flags");

    // An option header with a wrong magic: nothing can be trusted after it.
    let mut c = RawNbd::haggling(&sock);
    let _ = c.put(&[0x55; 16]);
    assert!(c.closed_by_server(), "a bad option magic must end the connection");
    assert_still_serving(&mut server, &reference, "a bad option magic");

    // Options the server must refuse while staying in step, then a GO on the same connection.
    let mut c = RawNbd::haggling(&sock);
    c.option(0x7777, b"whatever");
    assert_eq!(c.option_reply(0x7777).0, REP_ERR_UNSUP, "unknown option");
    c.option(OPT_STARTTLS, &[]);
    assert_eq!(c.option_reply(OPT_STARTTLS).0, REP_ERR_UNSUP, "STARTTLS without TLS");
    c.option(OPT_GO, &[0, 0, 0, 9, b'x']);
    assert_eq!(c.option_reply(OPT_GO).0, REP_ERR_INVALID, "GO whose name length overruns its data");
    c.option(OPT_GO, &RawNbd::go_data(b"no-such-export"));
    assert_eq!(c.option_reply(OPT_GO).0, REP_ERR_UNKNOWN, "GO for an unknown export");
    c.option(0x7778, &vec![0xaa; 100 << 10]);
    assert_eq!(c.option_reply(0x7778).0, REP_ERR_TOO_BIG, "100 KiB of option data");
    let (got_size, _) = c.go();
    assert_eq!(got_size, size);
    assert_same("read after refused options", &c.read_at(0, MIB as u32), &reference);

    // Requests the server must refuse on a connection that stays usable.
    let junk = vec![0xcc; 4096];
    assert_eq!(c.errno_of(0x42, 0, 0, 512, &[]), EINVAL, "unknown command type");
    assert_eq!(c.errno_of(CMD_READ, 0x8000, 0, 512, &[]), EINVAL, "unknown command flag");
    assert_eq!(c.errno_of(CMD_READ, 0, size - 512, 1024, &[]), EINVAL, "read past the end");
    assert_eq!(c.errno_of(CMD_READ, 0, u64::MAX - 511, 1024, &[]), EINVAL, "read whose end overflows");
    assert_eq!(c.errno_of(CMD_WRITE, 0, size - 512, 4096, &junk), ENOSPC, "write past the end");
    assert_eq!(c.errno_of(CMD_WRITE_ZEROES, 0, size, 512, &[]), ENOSPC, "write-zeroes past the end");
    assert_same("read after refused requests", &c.read_at(0, MIB as u32), &reference);
    c.disconnect();
    assert_still_serving(&mut server, &reference, "refused requests");

    // A bad request magic ends the connection.
    let (mut c, _, _) = RawNbd::transmitting(&sock);
    let _ = c.put(&[0x77; 28]);
    assert!(c.closed_by_server(), "a bad request magic must end the connection");
    assert_still_serving(&mut server, &reference, "a bad request magic");

    // A write longer than 32 MiB: an error reply or a hang-up, the server's choice; only the
    // header is sent, so the server must not wait for the data.
    let (mut c, _, _) = RawNbd::transmitting(&sock);
    c.request(CMD_WRITE, 0, 7, 0, (32 << 20) + 4096).unwrap();
    match c.reply() {
        Ok((error, handle)) => assert!(error != 0 && handle == 7, "over-long write answered {error} for {handle}"),
        Err(e) => assert!(
            matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset),
            "over-long write: {e}"
        ),
    }
    drop(c);
    assert_still_serving(&mut server, &reference, "an over-long write");

    // Hanging up in the middle of a write's payload: the partial write must not land.
    let (mut c, _, _) = RawNbd::transmitting(&sock);
    c.request(CMD_WRITE, 0, 8, 0, MIB as u32).unwrap();
    c.put(&vec![0xee; 300 << 10]).unwrap();
    drop(c);
    assert_still_serving(&mut server, &reference, "a write cut short");

    // Clients that send requests and leave without reading the replies.
    for i in 0..16u64 {
        let (mut c, _, _) = RawNbd::transmitting(&sock);
        for j in 0..8 {
            c.request(CMD_READ, 0, j, (i * 8 + j) * 65536 % size, 65536).unwrap();
        }
    }
    assert_still_serving(&mut server, &reference, "abandoned connections");
    check_nbdinfo(&server.uri(), size, false);

    // The members' pages are cached, so the 64 KiB and 1 MiB reads above went out spliced,
    // the replies to the connections abandoned with reads in flight among them.
    let log = server.stop();
    assert!(log.contains("of them spliced"), "no read was spliced\n{log}");
    assert_eq!(sha256_hex(&cat(&members)), before, "the bad traffic changed the array");
}

// ---------------------------------------------------------------------------------------------
// 5. Refused options and read-only serving leave the members alone

#[test]
fn non_loopback_listen_is_refused_and_read_only_never_writes() {
    let tmp = scratch();
    let dir = tmp.path();
    let members = member_files(dir, 2, 24 * MIB);
    create(&members, &["-l", "1", "-n", "2"]);
    let size = array_size(&members);
    let src = dir.join("content");
    let content = random_file(&src, MIB, 50);
    write_array(&members, 0, &src);
    let before = file_hashes(&members);

    // NBD has no authentication: a wildcard address needs --allow-remote, and the refusal comes
    // before any member is opened for writing.
    for listen in ["tcp:0.0.0.0:10899", "tcp:[::]:10899"] {
        let r = run_limited(uraid().args(["serve", "--listen", listen]).args(&members), Duration::from_secs(20));
        assert!(!r.status.success(), "{listen} without --allow-remote must be refused\n{}", r.describe());
        assert!(r.stderr.contains("--allow-remote"), "the refusal should name --allow-remote\n{}", r.describe());
    }
    assert_eq!(file_hashes(&members), before, "a refused serve changed a member");

    let mut server = Server::start(dir, &members, &["--read-only"]);
    let uri = server.uri();
    check_nbdinfo(&uri, size, true);
    let r = run(tool("qemu-io", "qemu-utils").args(["-f", "raw", &uri, "-c", "write 0 512"]));
    assert!(!r.status.success(), "qemu-io wrote to a read-only export\n{}", r.describe());
    let r = run(tool("qemu-io", "qemu-utils").args(["-r", "-f", "raw", &uri, "-c", "read 0 512"]));
    assert!(r.status.success() && r.text().contains("read 512/512"), "{}", r.describe());
    // qemu-io refuses by itself; the server must refuse a client that tries anyway.
    let (mut c, _, flags) = RawNbd::transmitting(&server.sock);
    assert_ne!(flags & 2, 0, "NBD_FLAG_READ_ONLY must be set");
    assert_eq!(c.errno_of(CMD_WRITE, 0, 0, 512, &[0x11; 512]), EPERM, "write to a read-only export");
    assert_eq!(c.errno_of(CMD_WRITE_ZEROES, 0, 0, 512, &[]), EPERM, "write-zeroes to a read-only export");
    assert_same("read-only export's data", &c.read_at(0, MIB as u32), &content);
    c.disconnect();
    server.assert_running();
    server.stop();
    assert_eq!(file_hashes(&members), before, "a read-only serve changed a member");
}

/// `--scan DIR --uuid` finds the members of one array among several; without `--uuid` the choice
/// is ambiguous and refused, naming the arrays found.
#[test]
fn serve_by_scan_and_uuid() {
    let tmp = scratch();
    let dir = tmp.path();
    let disks = dir.join("disks");
    fs::create_dir(&disks).unwrap();
    let r5 = member_files(&disks, 3, 16 * MIB);
    create(&r5, &["--level=5", "--raid-devices=3"]);
    let mirror: Vec<PathBuf> = (0..2).map(|i| disks.join(format!("mirror{i}.img"))).collect();
    for m in &mirror {
        File::create(m).unwrap().set_len(16 * MIB).unwrap();
    }
    create(&mirror, &["--level=1", "--raid-devices=2"]);
    let uuid = detail(&r5)["array_uuid"].as_str().expect("array_uuid in detail --json").to_string();
    let scan = disks.display().to_string();

    let r = run(uraid().args(["serve", "--listen=unix:/nonexistent/never", "--scan", &scan]));
    assert!(
        !r.status.success() && r.stderr.contains("choose one with --uuid") && r.stderr.contains(&uuid),
        "{}",
        r.describe()
    );

    let server = Server::start(dir, &[], &["--scan", &scan, "--uuid", &uuid]);
    let size = run_ok(tool("nbdinfo", "libnbd-bin").arg("--size").arg(server.uri())).stdout;
    assert_eq!(String::from_utf8_lossy(&size).trim(), array_size(&r5).to_string());
    server.stop();
}

/// A NetBSD RAIDframe RAID 5 set made with `uraid raidctl`, mounted by its configuration file:
/// ext4 made and filled through it, then read back with a component missing.
#[test]
fn ext4_on_a_raidframe_set_mounted_by_its_configuration_file() {
    // SAFETY: geteuid cannot fail.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root: it attaches loop devices and mounts ext4");
    let tmp = scratch();
    let dir = tmp.path();
    let members = member_files(dir, 3, 32 * MIB);
    let conf = dir.join("raid0.conf");
    fs::write(&conf, "START array\n1 3 0\nSTART disks\nm0\nm1\nm2\nSTART layout\n64 1 1 5\nSTART queue\nfifo 100\n")
        .unwrap();
    for (i, m) in members.iter().enumerate() {
        fs::rename(m, dir.join(format!("m{i}"))).unwrap();
    }
    run_ok(uraid().args(["raidctl", "-I", "2026"]).arg(&conf));
    run_ok(uraid().args(["raidctl", "-i"]).arg(&conf));
    // Two data columns of 32 MiB less the 64 protected sectors, in whole 32 KiB stripe units.
    let size = 2 * ((32 * MIB - 32 * 1024) / (32 * 1024) * (32 * 1024));
    let mnt = dir.join("mnt");
    let mut m = Mounted::start_with(dir, &["--raidframe".as_ref(), conf.as_os_str()], size);
    let dev = m.attach_loop();
    run_ok(tool("mkfs.ext4", "e2fsprogs").args(["-q", &dev]));
    m.mount_fs(&mnt);
    copy_tree_and_files(&mnt, 300);
    let written = tree_hashes(&mnt);
    assert!(written.len() > 50, "too few files to mean anything: {}", written.len());
    m.unmount_fs();
    e2fsck_clean(&dev);
    m.detach_loop();
    m.stop();
    let parity = run_ok(uraid().args(["raidctl", "-p"]).arg(&conf));
    assert!(String::from_utf8_lossy(&parity.stdout).contains("Parity status: clean"), "clean after the unmount");

    // Column 1 failed: the files read back rebuilt from parity.
    run_ok(uraid().args(["raidctl", "-f"]).arg(dir.join("m1")).arg(&conf));
    let mut m = Mounted::start_with(dir, &["--raidframe".as_ref(), conf.as_os_str()], size);
    m.attach_loop();
    m.mount_fs(&mnt);
    assert!(tree_hashes(&mnt) == written, "files read back degraded differ from those written");
    m.unmount_fs();
    m.detach_loop();
    m.stop();
}
