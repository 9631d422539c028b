//! Members on other hosts, made real on one machine: network namespaces joined to this one by
//! veth pairs, each running one member's NBD server (nbdkit, qemu-nbd, or another `uraid serve`)
//! on its own address. The array runs here and reaches its members over those links. The test
//! kills a host's server with SIGKILL in the middle of writes, takes a link down and up, runs a
//! host on a link that delays and loses frames, and restarts a server from its file; it checks that every flushed write reads back, that
//! the array stays up while within its redundancy, that a member that returns is taken back by
//! itself and resynced from the bitmap only, and that the members check clean afterwards.
//!
//! Namespaces need root (CAP_NET_ADMIN) and iproute2; without them, or without nbdkit,
//! qemu-nbd or nbdcopy, the test says so and passes without running. The delay and loss are
//! made in user space (`common/lossy_link.rs`, two TAP devices and a thread per direction), not
//! by netem, which kernels built without `sch_netem` lack.
//!
//! `URAID_KEEP_MEMBERS=DIR` leaves the member images and the array's sha256 in DIR, for
//! `scripts/oracle/kernel-check-hosts.sh` to hand to the kernel's md.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::sleep;
use std::time::Duration;

use common::lossy_link::{Impairment, LossyLink};
use common::serve::Serve;
use common::{image, installed, ok, text, wait_until, with};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tempfile::TempDir;
use uraid_nbd::client::{ClientConfig, NbdClient, NbdUri};

const MIB: u64 = 1 << 20;
const PORT: u16 = 10809;

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap_or_else(|e| panic!("run {program}: {e}"))
}

fn must(program: &str, args: &[&str]) {
    let o = run(program, args);
    assert!(o.status.success(), "{program} {args:?} failed\n{}", text(&o));
}

/// Whether this machine can run the test; says why not when it cannot.
fn can_run() -> bool {
    if !["nbdkit", "qemu-nbd", "nbdcopy"].into_iter().all(installed) {
        return false;
    }
    if !Path::new("/dev/net/tun").exists() {
        eprintln!("skipped: no /dev/net/tun for the link with delay and loss");
        return false;
    }
    let probe = format!("uraid-probe-{}", std::process::id());
    let o = run("ip", &["netns", "add", &probe]);
    if !o.status.success() {
        eprintln!("skipped: cannot make a network namespace: {}", String::from_utf8_lossy(&o.stderr).trim());
        return false;
    }
    let _ = run("ip", &["netns", "del", &probe]);
    true
}

/// Each network gets its own names and subnet, so tests and test processes do not meet.
static NETWORKS: AtomicU32 = AtomicU32::new(0);

/// One member host: a namespace, the link joining it to this one (a veth pair, or a link with
/// delay and loss carried in user space), and its server.
struct Host {
    namespace: String,
    /// This side of the link (in the test's namespace).
    link: String,
    /// The host's address, inside its namespace.
    addr: String,
    server: Option<Child>,
    impaired: Option<LossyLink>,
}

impl Host {
    /// Host `index` of `network`, on a veth pair, or on a link with `impairment`.
    fn new(network: u32, index: u32, impairment: Option<Impairment>) -> Host {
        let pid = std::process::id();
        let tag = format!("u{}n{network}h{index}", pid % 10_000);
        let namespace = format!("uraid-{tag}");
        let (link, inner) = (format!("{tag}a"), format!("{tag}b"));
        let net = format!("10.{}.{}", 64 + pid % 128, (network * 8 + index) % 256);
        must("ip", &["netns", "add", &namespace]);
        let mut host = Host { namespace, link, addr: format!("{net}.2"), server: None, impaired: None };
        let (outer_addr, inner_addr) = (format!("{net}.1/24"), format!("{}/24", host.addr));
        match impairment {
            Some(how) => {
                let made = LossyLink::new(&tag, &host.namespace, &outer_addr, &inner_addr, how);
                host.impaired = Some(made.unwrap_or_else(|e| panic!("a link with delay and loss: {e}")));
            }
            None => {
                must(
                    "ip",
                    &["link", "add", &host.link, "type", "veth", "peer", "name", &inner, "netns", &host.namespace],
                );
                must("ip", &["addr", "add", &outer_addr, "dev", &host.link]);
                must("ip", &["link", "set", &host.link, "up"]);
                host.inside("ip", &["addr", "add", &inner_addr, "dev", &inner]);
                host.inside("ip", &["link", "set", &inner, "up"]);
            }
        }
        host.inside("ip", &["link", "set", "lo", "up"]);
        host
    }

    fn inside(&self, program: &str, args: &[&str]) {
        let all: Vec<&str> =
            ["netns", "exec", &self.namespace, program].into_iter().chain(args.iter().copied()).collect();
        must("ip", &all);
    }

    fn uri(&self) -> String {
        format!("nbd://{}:{PORT}/", self.addr)
    }

    /// Run `program args` in the namespace as this host's server and wait until it answers on
    /// the host's address. `ip netns exec` execs the program, so killing the child kills it.
    fn start(&mut self, program: &str, args: &[String], log: &Path) {
        assert!(self.server.is_none(), "{} already runs a server", self.namespace);
        let child = Command::new("ip")
            .args(["netns", "exec", &self.namespace, program])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(log).unwrap()))
            .spawn()
            .unwrap();
        self.server = Some(child);
        let at: SocketAddr = format!("{}:{PORT}", self.addr).parse().unwrap();
        wait_until(&format!("{program} on {at}"), Duration::from_secs(15), || {
            TcpStream::connect_timeout(&at, Duration::from_millis(200)).is_ok()
        });
    }

    /// SIGKILL, as a host that dies does not say goodbye.
    fn kill_server(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn set_link(&self, up: bool) {
        must("ip", &["link", "set", &self.link, if up { "up" } else { "down" }]);
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.kill_server();
        self.impaired.take();
        // Deleting the namespace deletes its end of the pair, and with it this end.
        let _ = run("ip", &["link", "del", &self.link]);
        let _ = run("ip", &["netns", "del", &self.namespace]);
    }
}

fn uraid_bin() -> String {
    env!("CARGO_BIN_EXE_uraid").to_string()
}

/// The array as a client sees it, and what it must hold: every write that a flush has
/// covered is in `model`.
struct Writer {
    client: NbdClient,
    model: Vec<u8>,
}

impl Writer {
    fn connect(socket: &Path) -> Writer {
        let uri = NbdUri::parse(&format!("nbd+unix:///?socket={}", socket.display())).unwrap();
        let client = NbdClient::connect(&uri, ClientConfig::default()).expect("connect to the array");
        let size = client.info().size as usize;
        Writer { client, model: vec![0; size] }
    }

    /// `count` writes of 256 KiB at pseudo-random places in the array's `region` (MiB), a flush
    /// after every eighth; every one must succeed.
    fn writes(&mut self, region: std::ops::Range<u64>, count: u64, seed: u64) {
        self.writes_until(region, seed, &|done| done >= count);
    }

    /// Writes as [`Writer::writes`] until `enough(writes done)`, checked after every flush;
    /// how many were done.
    fn writes_until(&mut self, region: std::ops::Range<u64>, seed: u64, enough: &dyn Fn(u64) -> bool) -> u64 {
        const LEN: u64 = 256 << 10;
        let end = region.end.saturating_mul(MIB).min(self.model.len() as u64);
        let (first, slots) = (region.start * MIB / LEN, (end - region.start * MIB) / LEN);
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut done = 0;
        while !enough(done) {
            for _ in 0..8 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let offset = (first + x % slots) * LEN;
                let data = uraid_testkit::random_bytes(LEN, x);
                self.client.write(offset, &[&data], false).unwrap_or_else(|e| panic!("write {done} at {offset}: {e}"));
                self.model[offset as usize..(offset + LEN) as usize].copy_from_slice(&data);
                done += 1;
            }
            self.client.flush().expect("flush");
        }
        done
    }

    /// Every byte of the array against the model.
    fn verify(&self, when: &str) {
        const STEP: usize = 4 << 20;
        let mut buf = vec![0u8; STEP];
        for at in (0..self.model.len()).step_by(STEP) {
            let len = STEP.min(self.model.len() - at);
            self.client.read(at as u64, &mut buf[..len]).unwrap_or_else(|e| panic!("{when}: read at {at}: {e}"));
            if buf[..len] != self.model[at..at + len] {
                let first = (0..len).find(|&i| buf[i] != self.model[at + i]).unwrap();
                panic!("{when}: the array differs from what was written at byte {}", at + first);
            }
        }
    }
}

/// The state of the member in `slot` (status names NBD members by their URI in its normal form,
/// the default port left out).
fn state_of(serve: &Serve, slot: usize) -> String {
    let status = serve.status();
    let member = status["members"].as_array().unwrap().iter().find(|m| m["slot"] == slot);
    member.unwrap_or_else(|| panic!("no member in slot {slot}: {status:#}"))["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Write into `region` on another thread while `fault` happens here, `delay` after the writes
/// began; the writes go on until 64 more have been done after the fault. Every one must succeed.
fn writing_through(
    writer: &mut Writer,
    region: std::ops::Range<u64>,
    seed: u64,
    delay: Duration,
    fault: impl FnOnce(),
) {
    let faulted_at = std::sync::atomic::AtomicU64::new(u64::MAX);
    let done_so_far = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        let running = s.spawn(|| {
            writer.writes_until(region, seed, &|done| {
                done_so_far.store(done, Ordering::SeqCst);
                done >= faulted_at.load(Ordering::SeqCst).saturating_add(64)
            })
        });
        sleep(delay);
        if done_so_far.load(Ordering::SeqCst) == 0 {
            // Let the writer end before failing, or the scope would wait for it forever.
            faulted_at.store(0, Ordering::SeqCst);
            panic!("no write was done before the fault");
        }
        fault();
        faulted_at.store(done_so_far.load(Ordering::SeqCst), Ordering::SeqCst);
        running.join().expect("the writes failed");
    });
}

/// How many bytes the last rebuild wrote, from `uraid ctl NAME wait --json`.
fn rebuilt_bytes(serve: &Serve) -> u64 {
    let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    assert_eq!(waited["degraded"], 0, "{waited:#}");
    waited["last_sync_bytes"].as_u64().unwrap_or_else(|| panic!("no last_sync_bytes: {waited:#}"))
}

/// The member in `slot` can be reached again: the array takes it back by itself (md's re-add,
/// retried while the slot is free) and rebuilds only what the bitmap marks, far less than the
/// whole member.
fn taken_back(serve: &Serve, slot: usize, member_size: u64) -> u64 {
    wait_until("the member to be taken back and in sync", Duration::from_secs(120), || {
        state_of(serve, slot) == "in_sync" && serve.status()["degraded"] == 0
    });
    let rebuilt = rebuilt_bytes(serve);
    let log = std::fs::read_to_string(serve.control.with_file_name("serve.log")).unwrap_or_default();
    assert!(
        rebuilt > 0 && rebuilt < member_size / 4,
        "slot {slot} came back and {rebuilt} bytes were rebuilt; the array said:\n{log}"
    );
    rebuilt
}

#[test]
fn raid5_across_three_hosts_outlives_a_killed_server_a_cut_link_and_a_lossy_one() {
    if !can_run() {
        return;
    }
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let network = NETWORKS.fetch_add(1, Ordering::Relaxed);
    // Host 2 is far and on a poor network: 3 ms each way, and 1 frame in 100 lost each way.
    let poor = Impairment { delay: Duration::from_millis(3), loss_ppm: 10_000 };
    let mut hosts: Vec<Host> = (0..3).map(|i| Host::new(network, i, (i == 2).then_some(poor))).collect();
    let size = 64 * MIB;

    // Host 0: nbdkit on a file, writes slowed so that a kill lands among them.
    let a = image(d, "a.img", size);
    let nbdkit = |addr: &str, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["-f", "-i", addr, "-p", &PORT.to_string()].iter().map(|s| s.to_string()).collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v.extend(["file".to_string(), a.clone()]);
        v
    };
    let args = nbdkit(&hosts[0].addr.clone(), &["--filter=delay"]);
    let args: Vec<String> = args.into_iter().chain(["wdelay=3ms".to_string()]).collect();
    hosts[0].start("nbdkit", &args, &d.join("h0.log"));
    // Host 1: qemu-nbd on a file.
    let b = image(d, "b.img", size);
    let qemu_args: Vec<String> = ["--persistent", "--shared=8", "--format=raw", "--bind", &hosts[1].addr, "--port"]
        .iter()
        .map(|s| s.to_string())
        .chain([PORT.to_string(), b.clone()])
        .collect();
    hosts[1].start("qemu-nbd", &qemu_args, &d.join("h1.log"));
    // Host 2: another uraid serving its own raid1 of two files.
    let lower: Vec<String> = (0..2).map(|i| image(d, &format!("c{i}.img"), size + MIB)).collect();
    ok(&with(&["create", "--level=1", "--raid-devices=2", "--assume-clean"], &lower));
    let serve_args: Vec<String> =
        ["serve".to_string(), format!("--listen=tcp:{}:{PORT}", hosts[2].addr), "--allow-remote".into()]
            .into_iter()
            .chain(lower.iter().cloned())
            .collect();
    hosts[2].start(&uraid_bin(), &serve_args, &d.join("h2.log"));

    let uris: Vec<String> = hosts.iter().map(Host::uri).collect();
    ok(&with(
        &["create", "--level=5", "--raid-devices=3", "--chunk=64K", "--bitmap=internal", "--bitmap-chunk=1M"],
        &uris,
    ));
    let here = d.join("array");
    std::fs::create_dir(&here).unwrap();
    let serve = Serve::start(&here, &uris, &[]);
    // A lost host must be given up in seconds, not after the default 30 s per request.
    let limits = serve.ctl(&["member-limits", "--timeout=2s", "--reconnect-attempts=2"]);
    assert!(limits.status.success(), "{}", text(&limits));
    // And tried again often once lost, so that a return is noticed within a second.
    let limits = serve.ctl(&["member-limits", "--readd-first=200ms", "--readd-max=1s"]);
    assert!(limits.status.success(), "{}", text(&limits));
    ok(&["ctl", &serve.control.display().to_string(), "wait"]);
    let mut writer = Writer::connect(&here.join("nbd.sock"));
    writer.writes(0..u64::MAX, 32, 1);
    // The bitmap's bits clear once their regions have been idle for 5 s (md's bitmap daemon):
    // after that, only what is written while a member is away is marked for it.
    const BITS_CLEAR: Duration = Duration::from_secs(7);
    sleep(BITS_CLEAR);

    // A host dies in the middle of writes: they all succeed, the array goes on degraded.
    writing_through(&mut writer, 0..16, 2, Duration::from_millis(1500), || hosts[0].kill_server());
    wait_until("host 0's member to be failed", Duration::from_secs(30), || state_of(&serve, 0) == "faulty");
    assert_eq!(serve.status()["degraded"], 1);
    writer.verify("with host 0 dead");
    writer.writes(0..16, 16, 3);
    // It comes back from its file; only what changed meanwhile is rebuilt.
    let args = nbdkit(&hosts[0].addr.clone(), &[]);
    hosts[0].start("nbdkit", &args, &d.join("h0-again.log"));
    let rebuilt = taken_back(&serve, 0, size);
    eprintln!("host 0 returned: {rebuilt} bytes rebuilt");
    writer.verify("after host 0 came back");

    // A link goes down under writes: the member times out and fails, the writes go on.
    sleep(BITS_CLEAR);
    writing_through(&mut writer, 32..48, 4, Duration::from_millis(1500), || hosts[1].set_link(false));
    wait_until("host 1's member to be failed", Duration::from_secs(30), || state_of(&serve, 1) == "faulty");
    writer.verify("with host 1 cut off");
    hosts[1].set_link(true);
    let rebuilt = taken_back(&serve, 1, size);
    eprintln!("host 1's link came back: {rebuilt} bytes rebuilt");

    // All along, host 2's link lost frames and delayed the rest: TCP retransmitted, and the
    // array never failed that member.
    writer.writes(0..u64::MAX, 32, 5);
    assert_eq!(serve.status()["degraded"], 0);
    writer.verify("at the end");
    let link = hosts[2].impaired.as_ref().unwrap();
    let (carried, dropped) = (link.carried.load(Ordering::Relaxed), link.dropped.load(Ordering::Relaxed));
    eprintln!("host 2's link carried {carried} frames and dropped {dropped}");
    assert!(dropped > 0 && carried > 100 * dropped / 2, "carried {carried}, dropped {dropped}");
    let model = std::mem::take(&mut writer.model);
    drop(writer);
    serve.stop(libc::SIGTERM);

    // Stopped: the members, read again through their hosts, check clean and hold the data.
    let o = ok(&with(&["check"], &uris));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.lines().any(|l| l.trim() == "mismatch_cnt 0"), "{}", text(&o));
    let mut read = vec![0u8; model.len()];
    let whole = ok(&with(&["cat"], &uris)).stdout;
    read.copy_from_slice(&whole[..model.len()]);
    assert!(read == model, "the stopped array does not hold what was written");

    if let Some(keep) = std::env::var_os("URAID_KEEP_MEMBERS") {
        // Host 2's member is its raid1's content: read it through that array, stopped.
        hosts[2].kill_server();
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&a, keep.join("m0.img")).unwrap();
        std::fs::copy(&b, keep.join("m1.img")).unwrap();
        std::fs::write(keep.join("m2.img"), ok(&with(&["cat"], &lower)).stdout).unwrap();
        let sha: String = Sha256::digest(&model).iter().map(|b| format!("{b:02x}")).collect();
        std::fs::write(keep.join("array.sha256"), format!("{sha}\n")).unwrap();
    }
}
