//! Crash consistency of `uraid serve`: SIGKILL at random moments under a verified write load.
//!
//! Each test creates one array (raid1, raid5, raid6, raid10, raid5 with a write-intent bitmap,
//! and degraded raid1/raid10), serves it, and then, round after round on the same members:
//!
//! 1. runs a load of its own over NBD (several connections, many requests in flight on each):
//!    random-offset, random-length writes (unaligned too, some FUA, some WRITE_ZEROES) whose bytes
//!    are a function of (array offset, generation), with FLUSHes mixed in, every request stamped
//!    on one logical clock when sent and when its reply arrived;
//! 2. kills the server with SIGKILL at a seeded random moment while requests are in flight;
//! 3. restarts it on the same members, waits for the resync it starts by itself (`ctl wait`),
//!    reads the whole array back over NBD and checks every byte against the model (below);
//! 4. stops it with SIGTERM, and checks that `detail --json` says clean, `uraid check` finds
//!    mismatch_cnt 0, and `uraid cat` reads what NBD read.
//!
//! Some rounds instead restart the server with a slow resync and run the next load (and kill)
//! during that resync, so two crashes' worth of writes are judged together; some let the server
//! go idle until it marks the array clean, and kill it then (every acknowledged write must be
//! there and no resync may be needed). The parity tests also try a degraded start after a dirty
//! kill and require md's refusal, with no member changed.
//!
//! The model (see [`Model::verify`]). A write is *durable* if its reply arrived before a FLUSH
//! was sent that was acknowledged by the same server process, or it had FUA and was
//! acknowledged. For each byte, let T be the latest send time of a durable write covering it.
//! The byte must hold the value of some write covering it that was not known complete before T
//! (its reply, or the crash that ended it, came after T was sent) — or, if no durable write
//! covers it, possibly the value it had when the model was last collapsed onto a verified read.
//! Writes cut short by a crash count as complete at the crash, may be applied in part, and are
//! judged per byte. Nothing else is allowed. After each verified read the model is collapsed:
//! what was read becomes the base of the next round.
//!
//! Degraded mirrors (raid1, raid10) crash and resync too, as md resyncs them from the copies
//! left; a dirty degraded raid5/6 is refused at assembly, as md refuses it.
//!
//! Seeded: every test prints its seed; `URAID_CRASH_SEED=N` replays it (the interleaving of
//! threads is not reproducible, the op streams, kill moments and round modes are).
//! `URAID_CRASH_ROUNDS=N` changes the number of kills per test.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, sleep};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uraid_layout::{Level, ParityAlgorithm, ParityLayout};

const MIB: u64 = 1 << 20;
/// Member file size: 4 MiB leaves 3 MiB of data per member after the 1 MiB data offset.
const MEMBER_BYTES: u64 = 4 * MIB;
/// NBD connections per load, and requests kept in flight on each.
const CONNECTIONS: usize = 3;
const DEPTH: usize = 8;
/// The longest any one uraid command may take before the test fails instead of hanging.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------------
// Seeds and the replay line

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn base_seed() -> u64 {
    match std::env::var("URAID_CRASH_SEED") {
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("URAID_CRASH_SEED={s:?} is not a u64")),
        Err(_) => {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
            splitmix(t.as_nanos() as u64 ^ u64::from(std::process::id())) % 1_000_000_000_000
        }
    }
}

fn rounds(default: usize) -> usize {
    std::env::var("URAID_CRASH_ROUNDS").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(default)
}

/// Prints the seed at the start, and on a panic the replay command, the server's log tail and
/// where the members were kept.
struct Guard {
    test: &'static str,
    seed: u64,
    tmp: Option<tempfile::TempDir>,
    started: Instant,
}

impl Guard {
    fn new(test: &'static str) -> Guard {
        let seed = base_seed();
        eprintln!("[{test}] seed {seed} (replay: {})", replay(test, seed));
        Guard { test, seed, tmp: Some(tempfile::tempdir().unwrap()), started: Instant::now() }
    }

    fn dir(&self) -> &Path {
        self.tmp.as_ref().unwrap().path()
    }

    /// The test's own random stream: the seed mixed with the test's name.
    fn rng(&self) -> StdRng {
        let name =
            self.test.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        StdRng::seed_from_u64(splitmix(self.seed ^ name))
    }
}

fn replay(test: &str, seed: u64) -> String {
    format!("URAID_CRASH_SEED={seed} cargo test -p uraid --test crash -- --exact {test} --nocapture")
}

impl Drop for Guard {
    fn drop(&mut self) {
        let tmp = self.tmp.take().unwrap();
        if thread::panicking() {
            let log = std::fs::read_to_string(tmp.path().join("serve.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect();
            let kept = tmp.keep();
            eprintln!(
                "\n[{}] FAILED with seed {}\n  replay: {}\n  members and serve.log kept in {}\n  last lines of serve.log:\n    {}\n",
                self.test,
                self.seed,
                replay(self.test, self.seed),
                kept.display(),
                tail.join("\n    ")
            );
        } else {
            eprintln!("[{}] passed in {:.1} s (seed {})", self.test, self.started.elapsed().as_secs_f64(), self.seed);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Running uraid

fn text(o: &Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout);
    let out: String = out.chars().take(4000).collect();
    format!("status {}\nstdout:\n{out}\nstderr:\n{}", o.status, String::from_utf8_lossy(&o.stderr))
}

/// Runs `uraid ARGS` with output in files (a pipe could fill on `cat`), killing it after `limit`.
fn uraid_limited(args: &[String], limit: Duration) -> Output {
    let mut out = tempfile::tempfile().unwrap();
    let mut err = tempfile::tempfile().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(err.try_clone().unwrap())
        .spawn()
        .expect("run uraid");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("uraid {args:?} still running after {limit:?}; killed");
        }
        sleep(Duration::from_millis(5));
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    out.rewind().unwrap();
    out.read_to_end(&mut stdout).unwrap();
    err.rewind().unwrap();
    err.read_to_end(&mut stderr).unwrap();
    Output { status, stdout, stderr }
}

fn uraid(head: &[&str], members: &[String]) -> Output {
    let args: Vec<String> = head.iter().map(|s| s.to_string()).chain(members.iter().cloned()).collect();
    uraid_limited(&args, COMMAND_LIMIT)
}

fn ok(head: &[&str], members: &[String]) -> Output {
    let o = uraid(head, members);
    assert!(o.status.success(), "uraid {head:?} {members:?} failed\n{}", text(&o));
    o
}

fn detail(members: &[String]) -> Value {
    serde_json::from_slice(&ok(&["detail", "--json"], members).stdout).expect("detail --json")
}

/// What the last server run said about its assembly and resync (its "uraid:" lines).
fn server_notes(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
    let last = log.rsplit("---- uraid serve").next().unwrap_or("");
    last.lines().filter(|l| l.starts_with("uraid:")).collect::<Vec<_>>().join(" | ")
}

fn notes_say(dir: &Path, what: &str) -> bool {
    server_notes(dir).contains(what)
}

fn hashes(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| format!("{:x}", Sha256::digest(std::fs::read(p).unwrap()))).collect()
}

/// A running `uraid serve`; killed with SIGKILL on drop unless stopped on purpose. Its stderr is
/// appended to `serve.log` in the test's folder.
struct Serve {
    child: Option<Child>,
    nbd: PathBuf,
    control: PathBuf,
}

impl Serve {
    /// Starts a server and waits for its sockets; if it exits first, returns its exit status
    /// and what it logged.
    fn try_start(dir: &Path, members: &[String], extra: &[&str]) -> Result<Serve, (std::process::ExitStatus, String)> {
        let nbd = dir.join("nbd.sock");
        let control = dir.join("ctl.sock");
        // A killed server leaves its sockets behind; wait for the new ones, not those.
        let _ = std::fs::remove_file(&nbd);
        let _ = std::fs::remove_file(&control);
        let log_path = dir.join("serve.log");
        let mut log = std::fs::OpenOptions::new().create(true).append(true).open(&log_path).unwrap();
        writeln!(log, "---- uraid serve {extra:?} {members:?}").unwrap();
        let start = log.metadata().unwrap().len();
        let mut args = vec![
            "serve".to_string(),
            format!("--listen=unix:{}", nbd.display()),
            format!("--control={}", control.display()),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(members.iter().cloned());
        let mut child = Command::new(env!("CARGO_BIN_EXE_uraid"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.try_clone().unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let all = std::fs::read(&log_path).unwrap();
                return Err((status, String::from_utf8_lossy(&all[start as usize..]).into_owned()));
            }
            // A socket file appears when bound, a moment before it listens: wait until the
            // control socket (bound after the NBD one) accepts, or a command sent at once may be
            // refused.
            if nbd.exists() && std::os::unix::net::UnixStream::connect(&control).is_ok() {
                return Ok(Serve { child: Some(child), nbd, control });
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("uraid serve {members:?}: sockets never appeared");
            }
            sleep(Duration::from_millis(5));
        }
    }

    fn start(dir: &Path, members: &[String], extra: &[&str]) -> Serve {
        Serve::try_start(dir, members, extra)
            .unwrap_or_else(|(status, log)| panic!("uraid serve {members:?} exited at once with {status}\n{log}"))
    }

    fn ctl_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["ctl".to_string(), self.control.display().to_string()];
        all.extend(args.iter().map(|s| s.to_string()));
        all.push("--json".into());
        let o = uraid_limited(&all, COMMAND_LIMIT);
        assert!(o.status.success(), "uraid {all:?} failed\n{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("uraid {all:?}: not JSON: {e}\n{}", text(&o)))
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    fn kill9(mut self) {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
    }

    fn term(mut self) {
        let mut child = self.child.take().unwrap();
        // SAFETY: as above.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "uraid serve exited {status} after SIGTERM (see serve.log)");
                return;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("uraid serve did not exit within 30 s of SIGTERM");
            }
            sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A minimal NBD client: fixed newstyle, NBD_OPT_EXPORT_NAME "", simple replies

const REQUEST_MAGIC: u32 = 0x2560_9513;
const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
const CMD_READ: u16 = 0;
const CMD_WRITE: u16 = 1;
const CMD_FLUSH: u16 = 3;
const CMD_WRITE_ZEROES: u16 = 6;
const CMD_FLAG_FUA: u16 = 1;
const CMD_FLAG_NO_HOLE: u16 = 2;
const FLAG_SEND_FLUSH: u16 = 1 << 2;
const FLAG_SEND_FUA: u16 = 1 << 3;
const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

struct Nbd {
    s: UnixStream,
    size: u64,
    flags: u16,
}

impl Nbd {
    fn connect(sock: &Path) -> std::io::Result<Nbd> {
        let mut s = UnixStream::connect(sock)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut greet = [0u8; 18];
        s.read_exact(&mut greet)?;
        assert_eq!(&greet[..8], b"NBDMAGIC", "not an NBD server");
        s.write_all(&3u32.to_be_bytes())?; // fixed newstyle + no zeroes
        s.write_all(&0x4948_4156_454f_5054u64.to_be_bytes())?;
        s.write_all(&1u32.to_be_bytes())?; // NBD_OPT_EXPORT_NAME
        s.write_all(&0u32.to_be_bytes())?; // ""
        let mut export = [0u8; 10];
        s.read_exact(&mut export)?;
        let size = u64::from_be_bytes(export[..8].try_into().unwrap());
        let flags = u16::from_be_bytes(export[8..].try_into().unwrap());
        Ok(Nbd { s, size, flags })
    }

    fn request(cmd: u16, flags: u16, handle: u64, offset: u64, len: u32, data: &[u8]) -> Vec<u8> {
        let mut req = Vec::with_capacity(28 + data.len());
        req.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        req.extend_from_slice(&flags.to_be_bytes());
        req.extend_from_slice(&cmd.to_be_bytes());
        req.extend_from_slice(&handle.to_be_bytes());
        req.extend_from_slice(&offset.to_be_bytes());
        req.extend_from_slice(&len.to_be_bytes());
        req.extend_from_slice(data);
        req
    }

    /// (handle, error) of the next simple reply.
    fn reply(&mut self) -> std::io::Result<(u64, u32)> {
        let mut r = [0u8; 16];
        self.s.read_exact(&mut r)?;
        let magic = u32::from_be_bytes(r[..4].try_into().unwrap());
        assert_eq!(magic, SIMPLE_REPLY_MAGIC, "bad NBD reply magic {magic:#x}");
        Ok((u64::from_be_bytes(r[8..].try_into().unwrap()), u32::from_be_bytes(r[4..8].try_into().unwrap())))
    }

    /// The whole export, in 1 MiB reads, a few in flight (answered in any order).
    fn read_all(&mut self) -> Vec<u8> {
        const STEP: u64 = MIB;
        let mut out = vec![0u8; self.size as usize];
        let mut next = 0u64;
        let mut pending: HashMap<u64, u64> = HashMap::new();
        while next < self.size || !pending.is_empty() {
            while next < self.size && pending.len() < 4 {
                let len = STEP.min(self.size - next);
                self.s.write_all(&Nbd::request(CMD_READ, 0, next, next, len as u32, &[])).unwrap();
                pending.insert(next, len);
                next += len;
            }
            let (offset, error) = self.reply().expect("reading the array back");
            let len = pending.remove(&offset).unwrap_or_else(|| panic!("reply to a read never sent: handle {offset}"));
            assert_eq!(error, 0, "NBD read at {offset} failed with error {error}");
            self.s.read_exact(&mut out[offset as usize..(offset + len) as usize]).unwrap();
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// The data and the model

/// The byte a write of generation `gen` puts at array offset `p`.
fn pattern(p: u64, gen: u64) -> u8 {
    let mut x = p.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ gen.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    (x >> 32) as u8
}

#[derive(Clone, Debug)]
struct WriteRec {
    offset: u64,
    len: u64,
    gen: u64,
    /// NBD_CMD_WRITE_ZEROES: the range reads as zeros.
    zero: bool,
    fua: bool,
    /// Which server process received it.
    epoch: u32,
    /// Logical time, taken before the request was sent.
    sent: u64,
    /// Logical time the write was known complete: its reply arrived (taken after reading it), or
    /// the server it was sent to was dead.
    done: Option<u64>,
    /// A successful reply arrived.
    acked: bool,
}

impl WriteRec {
    fn byte(&self, p: u64) -> u8 {
        if self.zero {
            0
        } else {
            pattern(p, self.gen)
        }
    }

    fn end(&self) -> u64 {
        self.offset + self.len
    }
}

#[derive(Default)]
struct Model {
    /// The array's contents at the last verified read.
    base: Vec<u8>,
    clock: u64,
    writes: Vec<WriteRec>,
    /// Per server process: the latest send time of a FLUSH it acknowledged (a durability point,
    /// also set when the server marked the array clean while idle).
    flush_mark: HashMap<u32, u64>,
    errors: Vec<String>,
    last_ack: Option<Instant>,
    flushes_acked: u64,
    /// 512-byte sectors that may hold anything: on a degraded parity array with a partial
    /// parity log, the sectors of writes not durable at a crash that live on the missing member
    /// (no log short of a data journal keeps them; the log keeps everything else).
    lost_sectors: std::collections::HashSet<u64>,
}

impl Model {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn durable(&self, w: &WriteRec) -> bool {
        w.acked && (w.fua || self.flush_mark.get(&w.epoch).is_some_and(|&f| w.done.unwrap() < f))
    }

    /// Record the sectors of writes not durable now that live on member `slot` (missing) of the
    /// array `spec` creates: see `lost_sectors`.
    fn lose_sectors_on(&mut self, slot: usize, spec: &Spec) {
        let level = if spec.level == "6" { Level::Raid6 } else { Level::Raid5 };
        // uraid create's defaults: left-symmetric, and the chunk run() asks for.
        let alg = ParityAlgorithm::from_md(level, 2).unwrap();
        let layout = ParityLayout::new(level, alg, spec.devices, 128, MEMBER_BYTES / 512).unwrap();
        let lost: Vec<u64> = self
            .writes
            .iter()
            .filter(|w| !self.durable(w))
            .flat_map(|w| w.offset / 512..w.end().div_ceil(512))
            .filter(|&sector| layout.map(sector).member == slot)
            .collect();
        self.lost_sectors.extend(lost);
    }

    /// Every write still unanswered when its server died is complete as of now (applied in
    /// full, in part or not at all).
    fn crash(&mut self, epoch: u32) -> usize {
        let t = self.tick();
        let mut n = 0;
        for w in self.writes.iter_mut().filter(|w| w.epoch == epoch && w.done.is_none()) {
            w.done = Some(t);
            n += 1;
        }
        n
    }

    /// Checks `actual` against the model; returns the statistics or a diagnosis.
    fn verify(&self, actual: &[u8]) -> Result<VerifyStats, String> {
        let size = self.base.len() as u64;
        assert_eq!(actual.len() as u64, size, "the array read back has the wrong size");
        let mut cuts: Vec<u64> = vec![0, size];
        for w in &self.writes {
            cuts.push(w.offset);
            cuts.push(w.end());
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut covering: Vec<Vec<usize>> = vec![Vec::new(); cuts.len() - 1];
        for (i, w) in self.writes.iter().enumerate() {
            let a = cuts.binary_search(&w.offset).unwrap();
            let b = cuts.binary_search(&w.end()).unwrap();
            for c in &mut covering[a..b] {
                c.push(i);
            }
        }
        let durable: Vec<bool> = self.writes.iter().map(|w| self.durable(w)).collect();
        let mut stats = VerifyStats::default();
        let mut bad: Vec<(u64, u64)> = Vec::new();
        for (k, list) in covering.iter().enumerate() {
            let (start, end) = (cuts[k], cuts[k + 1]);
            let t = list.iter().filter(|&&i| durable[i]).map(|&i| self.writes[i].sent).max();
            // Allowed writes, newest first (the likeliest match first).
            let mut allowed: Vec<usize> =
                list.iter().copied().filter(|&i| t.is_none_or(|t| self.writes[i].done.unwrap() >= t)).collect();
            allowed.sort_by_key(|&i| std::cmp::Reverse(self.writes[i].sent));
            let base_ok = t.is_none();
            for p in start..end {
                let v = actual[p as usize];
                let hit_base = base_ok && self.base[p as usize] == v;
                if !hit_base && !allowed.iter().any(|&i| self.writes[i].byte(p) == v) {
                    if self.lost_sectors.contains(&(p / 512)) {
                        stats.bytes_lost_on_missing += 1;
                        continue;
                    }
                    // Nearby bad bytes are one range (a bad range has chance matches in it).
                    match bad.last_mut() {
                        Some(r) if p - r.1 <= 64 => r.1 = p + 1,
                        _ => bad.push((p, p + 1)),
                    }
                    continue;
                }
                // Statistics: a byte whose value only a write without a durability guarantee
                // explains shows that such writes did reach the array.
                if !hit_base && !allowed.iter().any(|&i| durable[i] && self.writes[i].byte(p) == v) {
                    stats.bytes_from_unflushed += 1;
                }
            }
        }
        if bad.is_empty() {
            stats.writes = self.writes.len();
            stats.durable = durable.iter().filter(|&&d| d).count();
            stats.unacked = self.writes.iter().filter(|w| !w.acked).count();
            return Ok(stats);
        }
        let total: u64 = bad.iter().map(|(a, b)| b - a).sum();
        let mut msg =
            format!("{} range(s) spanning {total} byte(s) hold values the model does not allow:\n", bad.len());
        for &(a, b) in bad.iter().take(6) {
            msg += &self.diagnose(actual, a, b, &durable);
        }
        Err(msg)
    }

    /// Explains one bad range: what was allowed at its start and what it does hold.
    fn diagnose(&self, actual: &[u8], a: u64, b: u64, durable: &[bool]) -> String {
        let describe = |w: &WriteRec, i: usize| {
            format!(
                "{} gen {} [{}, {}) len {} epoch {} sent@{} done@{} {}{}{}",
                if w.zero { "write_zeroes" } else { "write" },
                w.gen,
                w.offset,
                w.end(),
                w.len,
                w.epoch,
                w.sent,
                w.done.unwrap(),
                if w.acked { "acked" } else { "unacked (crash)" },
                if w.fua { " FUA" } else { "" },
                if durable[i] { " DURABLE" } else { "" },
            )
        };
        let mut s = format!(
            "  bytes [{a}, {b}) ({} bytes): found {:02x?}\n",
            b - a,
            &actual[a as usize..(b.min(a + 16)) as usize]
        );
        let covering: Vec<usize> =
            (0..self.writes.len()).filter(|&i| self.writes[i].offset <= a && a < self.writes[i].end()).collect();
        let t = covering.iter().filter(|&&i| durable[i]).map(|&i| self.writes[i].sent).max();
        s += &format!(
            "    at byte {a}: latest durable write sent@{}; base {:02x}{}\n",
            t.map_or("none".into(), |t| t.to_string()),
            self.base[a as usize],
            if t.is_none() { " (allowed)" } else { " (not allowed: a durable write covers it)" }
        );
        if covering.len() > 10 {
            s += &format!("    ({} older writes covering it not shown)\n", covering.len() - 10);
        }
        for &i in covering.iter().rev().take(10).rev() {
            let w = &self.writes[i];
            let allowed = t.is_none_or(|t| w.done.unwrap() >= t);
            s += &format!(
                "    {} {} expects {:02x}\n",
                if allowed { "allowed:" } else { "superseded:" },
                describe(w, i),
                w.byte(a)
            );
        }
        // What does the bad range hold? Match whole runs, so a chance byte does not count.
        let probe_end = b.min(a + 4096);
        let frac = |f: &dyn Fn(u64) -> u8, lo: u64, hi: u64| {
            let n = (lo..hi).filter(|&p| f(p) == actual[p as usize]).count();
            n as f64 / (hi - lo).max(1) as f64
        };
        let mut holds = Vec::new();
        if frac(&|p| self.base[p as usize], a, probe_end) > 0.9 {
            holds.push("the previous verified contents (base)".to_string());
        }
        if frac(&|_| 0, a, probe_end) > 0.9 {
            holds.push("zeros".to_string());
        }
        for (i, w) in self.writes.iter().enumerate() {
            let (lo, hi) = (a.max(w.offset), probe_end.min(w.end()));
            if lo < hi && !w.zero && frac(&|p| w.byte(p), lo, hi) > 0.9 {
                holds.push(format!("[{lo}, {hi}) from {}", describe(w, i)));
            }
        }
        // A different array offset's pattern (misplaced data) is worth a look too.
        if holds.is_empty() {
            holds.push("nothing the test wrote there (misplaced or garbage data)".into());
        }
        s += &format!("    the range holds: {}\n", holds.join("; "));
        s
    }
}

#[derive(Default, Debug)]
struct VerifyStats {
    writes: usize,
    durable: usize,
    unacked: usize,
    bytes_from_unflushed: u64,
    /// Bytes in `Model::lost_sectors` that hold neither an old nor a new value.
    bytes_lost_on_missing: u64,
}

// ---------------------------------------------------------------------------------------------
// The load

struct Shared {
    model: Mutex<Model>,
    next_gen: AtomicU64,
    stop: AtomicBool,
    /// Requests sent and not yet answered, over all connections.
    inflight: AtomicUsize,
}

enum Pending {
    Write(usize),
    Flush(u64),
}

/// One connection's load: keeps `DEPTH` requests in flight until told to stop or the server
/// dies. Every request is entered in the model, stamped, before it is sent.
fn worker(sock: PathBuf, shared: Arc<Shared>, seed: u64, epoch: u32) {
    let Ok(mut nbd) = Nbd::connect(&sock) else { return };
    let need = FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_WRITE_ZEROES | FLAG_CAN_MULTI_CONN;
    assert_eq!(nbd.flags & need, need, "the export lacks FLUSH/FUA/WRITE_ZEROES/multi-conn: flags {:#x}", nbd.flags);
    let size = nbd.size;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut pending: HashMap<u64, Pending> = HashMap::new();
    let mut handle = 0u64;
    loop {
        let stopping = shared.stop.load(Ordering::SeqCst);
        if pending.len() < DEPTH && !stopping {
            handle += 1;
            let roll = rng.gen_range(0..100);
            let req = if roll < 7 {
                let sent = shared.model.lock().unwrap().tick();
                pending.insert(handle, Pending::Flush(sent));
                Nbd::request(CMD_FLUSH, 0, handle, 0, 0, &[])
            } else {
                let (offset, len) = pick_range(&mut rng, size);
                let zero = roll < 12;
                let fua = rng.gen_range(0..10) == 0;
                let gen = shared.next_gen.fetch_add(1, Ordering::SeqCst);
                let req = if zero {
                    let flags = if fua { CMD_FLAG_FUA } else { 0 } | if rng.gen() { CMD_FLAG_NO_HOLE } else { 0 };
                    Nbd::request(CMD_WRITE_ZEROES, flags, handle, offset, len as u32, &[])
                } else {
                    let data: Vec<u8> = (offset..offset + len).map(|p| pattern(p, gen)).collect();
                    Nbd::request(CMD_WRITE, if fua { CMD_FLAG_FUA } else { 0 }, handle, offset, len as u32, &data)
                };
                let mut m = shared.model.lock().unwrap();
                let sent = m.tick();
                m.writes.push(WriteRec { offset, len, gen, zero, fua, epoch, sent, done: None, acked: false });
                pending.insert(handle, Pending::Write(m.writes.len() - 1));
                req
            };
            shared.inflight.fetch_add(1, Ordering::SeqCst);
            if nbd.s.write_all(&req).is_err() {
                return; // the server is gone; the request stays unanswered
            }
        } else if pending.is_empty() {
            // Stopped and drained: hold the connection open until the server dies.
            let mut b = [0u8; 1];
            let _ = nbd.s.read(&mut b);
            return;
        } else {
            let Ok((h, error)) = nbd.reply() else { return };
            let p = pending.remove(&h).unwrap_or_else(|| panic!("reply for unknown handle {h}"));
            let mut m = shared.model.lock().unwrap();
            let now = m.tick();
            match p {
                Pending::Write(i) => {
                    let w = &mut m.writes[i];
                    w.done = Some(now);
                    w.acked = error == 0;
                    if error != 0 {
                        let e =
                            format!("write gen {} [{}, {}) failed with NBD error {error}", w.gen, w.offset, w.end());
                        m.errors.push(e);
                    }
                    m.last_ack = Some(Instant::now());
                }
                Pending::Flush(sent) if error == 0 => {
                    let mark = m.flush_mark.entry(epoch).or_insert(0);
                    *mark = (*mark).max(sent);
                    m.flushes_acked += 1;
                }
                Pending::Flush(_) => m.errors.push(format!("flush failed with NBD error {error}")),
            }
            drop(m);
            shared.inflight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A random range: small unaligned writes, sector-aligned ones, 4K-aligned ones up to 256 KiB,
/// and a few large unaligned ones across many stripes.
fn pick_range(rng: &mut StdRng, size: u64) -> (u64, u64) {
    let (offset, len) = match rng.gen_range(0..100) {
        0..=39 => (rng.gen_range(0..size), rng.gen_range(1..=4096)),
        40..=69 => (rng.gen_range(0..size / 512) * 512, rng.gen_range(1..=128) * 512),
        70..=94 => (rng.gen_range(0..size / 4096) * 4096, rng.gen_range(1..=64) * 4096),
        _ => (rng.gen_range(0..size), rng.gen_range(1..=MIB)),
    };
    let offset = offset.min(size - 1);
    (offset, len.min(size - offset))
}

struct KillReport {
    writes: usize,
    flushes_acked: u64,
    unanswered: usize,
    inflight_at_kill: usize,
    kill_ms: u64,
    /// An acknowledged write came within 250 ms of the kill: the array must have been dirty.
    recent_write: bool,
}

/// Runs the load on `serve`, kills it with SIGKILL after a seeded delay (or, `idle`, after the
/// load stopped and the server marked the array clean), and settles the model.
fn load_and_kill(
    serve: Serve,
    members: &[String],
    shared: &Arc<Shared>,
    epoch: u32,
    rng: &mut StdRng,
    idle: bool,
) -> KillReport {
    shared.stop.store(false, Ordering::SeqCst);
    let (before, flushes_before) = {
        let mut m = shared.model.lock().unwrap();
        m.last_ack = None;
        (m.writes.len(), m.flushes_acked)
    };
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let (sock, shared, seed) = (serve.nbd.clone(), Arc::clone(shared), rng.gen());
            thread::spawn(move || worker(sock, shared, seed, epoch))
        })
        .collect();
    // Now and then very early: while the first write waits for the superblocks to say dirty.
    let delay =
        Duration::from_millis(if rng.gen_range(0..10) == 0 { rng.gen_range(1..40) } else { rng.gen_range(40..=600) });
    let started = Instant::now();
    sleep(delay);
    if idle {
        shared.stop.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(20);
        while shared.inflight.load(Ordering::SeqCst) > 0 {
            assert!(Instant::now() < deadline, "the load's last requests were never answered");
            sleep(Duration::from_millis(5));
        }
        // md's safe mode: with no write for a while, the array is flushed and marked clean.
        let deadline = Instant::now() + Duration::from_secs(10);
        while detail(members)["clean"] != Value::Bool(true) {
            assert!(Instant::now() < deadline, "an idle server did not mark the array clean within 10 s");
            sleep(Duration::from_millis(50));
        }
        // Everything answered so far is on the members now, as after a flush.
        let mut m = shared.model.lock().unwrap();
        let t = m.tick();
        m.flush_mark.insert(epoch, t);
    }
    let inflight_at_kill = shared.inflight.load(Ordering::SeqCst);
    let kill_ms = started.elapsed().as_millis() as u64;
    let pid = serve.pid();
    serve.kill9();
    let killed_at = Instant::now();
    for w in workers {
        w.join().expect("a load thread panicked");
    }
    shared.inflight.store(0, Ordering::SeqCst);
    let mut m = shared.model.lock().unwrap();
    let unanswered = m.crash(epoch);
    assert!(m.errors.is_empty(), "requests failed while the server (pid {pid}) was up: {:?}", m.errors);
    KillReport {
        writes: m.writes.len() - before,
        flushes_acked: m.flushes_acked - flushes_before,
        unanswered,
        inflight_at_kill,
        kill_ms,
        recent_write: m.last_ack.is_some_and(|t| killed_at.duration_since(t) < Duration::from_millis(250)),
    }
}

// ---------------------------------------------------------------------------------------------
// The test driver

struct Spec {
    test: &'static str,
    level: &'static str,
    devices: usize,
    create: &'static [&'static str],
    /// Serve without one member (a seeded slot): the whole run is degraded.
    degraded: bool,
    /// After the first dirty kill, try a degraded start and require md's refusal.
    refuse_dirty_degraded: bool,
    /// Create with md's partial parity log: a dirty restart replays it and needs no resync, and
    /// a dirty degraded start is allowed.
    ppl: bool,
    rounds: usize,
    /// `uraid serve --io=` (member I/O backend): some specs run io_uring, so that both member
    /// I/O paths are killed mid-write.
    io: &'static str,
}

fn run(spec: Spec) {
    let guard = Guard::new(spec.test);
    let dir = guard.dir().to_path_buf();
    let mut rng = guard.rng();
    let rounds = rounds(spec.rounds);
    let members: Vec<String> = (0..spec.devices)
        .map(|i| {
            let p = dir.join(format!("d{i}.img"));
            File::create(&p).unwrap().set_len(MEMBER_BYTES).unwrap();
            p.display().to_string()
        })
        .collect();
    let level = format!("--level={}", spec.level);
    let n = format!("--raid-devices={}", spec.devices);
    let mut head = vec!["create", level.as_str(), n.as_str()];
    if spec.level != "1" {
        head.push("--chunk=64K");
    }
    head.extend_from_slice(spec.create);
    if spec.ppl {
        head.push("--consistency-policy=ppl");
    }
    ok(&head, &members);
    let missing = spec.degraded.then(|| rng.gen_range(0..spec.devices));
    let present: Vec<String> =
        members.iter().enumerate().filter(|(i, _)| Some(*i) != missing).map(|(_, m)| m.clone()).collect();
    if let Some(slot) = missing {
        eprintln!("[{}] serving degraded, without member {slot}", spec.test);
    }

    let io = format!("--io={}", spec.io);
    let mut serve = Serve::start(&dir, &present, &[&io]);
    serve.ctl_json(&["wait"]);
    let base = Nbd::connect(&serve.nbd).unwrap().read_all();
    assert!(base.iter().all(|&b| b == 0), "a new array over zeroed files does not read as zeros");
    let shared = Arc::new(Shared {
        model: Mutex::new(Model { base, ..Model::default() }),
        next_gen: AtomicU64::new(1),
        stop: AtomicBool::new(false),
        inflight: AtomicUsize::new(0),
    });
    let mut refused = false;
    let mut epoch = 0u32;
    let mut under_resync = false;
    for round in 1..=rounds {
        epoch += 1;
        let idle = !under_resync && rng.gen_range(0..100) < 15;
        let what = if under_resync {
            let s = serve.ctl_json(&["status"]);
            format!("during a resync (sync_action {})", s["sync_action"])
        } else if idle {
            "after the array went idle and clean".to_string()
        } else {
            "under load".to_string()
        };
        let k = load_and_kill(serve, &present, &shared, epoch, &mut rng, idle);
        if let (true, Some(slot)) = (spec.ppl, missing) {
            shared.model.lock().unwrap().lose_sectors_on(slot, &spec);
        }
        let d = detail(&present);
        let dirty = d["clean"] == Value::Bool(false);
        if idle {
            assert!(!dirty, "round {round}: killed while idle and marked clean, yet detail says dirty\n{d:#}");
        } else if k.recent_write {
            assert!(
                dirty,
                "round {round}: killed {} ms into a write load, yet the array is marked clean\n{d:#}",
                k.kill_ms
            );
        }
        eprintln!(
            "[{}] round {round}/{rounds}: SIGKILL {what} at {} ms: {} writes, {} flushes acked, {} in flight, {} unanswered; array {}",
            spec.test,
            k.kill_ms,
            k.writes,
            k.flushes_acked,
            k.inflight_at_kill,
            k.unanswered,
            if dirty { "dirty" } else { "clean" }
        );

        if spec.refuse_dirty_degraded && dirty && !refused {
            refused = true;
            let slot = rng.gen_range(0..spec.devices);
            let fewer: Vec<String> =
                present.iter().enumerate().filter(|(i, _)| *i != slot).map(|(_, m)| m.clone()).collect();
            let before = hashes(&members);
            match Serve::try_start(&dir, &fewer, &[]) {
                Ok(s) => {
                    s.kill9();
                    panic!(
                        "round {round}: a dirty {} array was served without member {slot}; md refuses that",
                        spec.level
                    );
                }
                Err((status, log)) => {
                    assert!(!status.success(), "{log}");
                    assert!(
                        log.contains("degraded") && log.contains("not shut down cleanly") && log.contains("refusing"),
                        "round {round}: the refusal of a dirty degraded start does not say why:\n{log}"
                    );
                }
            }
            assert_eq!(hashes(&members), before, "round {round}: the refused degraded start changed a member");
            eprintln!("[{}] round {round}: a start without member {slot} was refused, members unchanged", spec.test);
        }

        // Sometimes the next load runs (and is killed) during the resync this restart begins.
        under_resync = dirty && round < rounds && rng.gen_range(0..100) < 25;
        if under_resync {
            serve = Serve::start(&dir, &present, &["--speed-limit-max=1M", "--speed-limit-min=1M", &io]);
            continue;
        }

        serve = Serve::start(&dir, &present, &[&io]);
        let waited = serve.ctl_json(&["wait"]);
        let mut nbd = Nbd::connect(&serve.nbd).unwrap();
        let actual = nbd.read_all();
        let stats = {
            let m = shared.model.lock().unwrap();
            m.verify(&actual).unwrap_or_else(|e| {
                let epochs = m.writes.iter().map(|w| w.epoch).collect::<std::collections::BTreeSet<_>>().len();
                panic!(
                    "round {round} of {} ({epochs} server run(s) of writes since the last verified read): {e}",
                    spec.test
                )
            })
        };
        eprintln!(
            "[{}] round {round}: verified {} bytes against {} writes ({} durable, {} unanswered); {} bytes came from writes not yet flushed, {} being written on the missing member came back as neither version",
            spec.test,
            actual.len(),
            stats.writes,
            stats.durable,
            stats.unacked,
            stats.bytes_from_unflushed,
            stats.bytes_lost_on_missing
        );
        // Copies that disagree would show as data that changes from one read to the next.
        assert!(nbd.read_all() == actual, "round {round}: a second read of the array differs from the first");
        drop(nbd);
        assert_eq!(waited["sync_action"], "idle", "round {round}: {waited:#}");
        let last = waited["last_sync"].as_str().unwrap_or("");
        if dirty && spec.ppl {
            // The log was replayed at assembly: parity matches data without a resync, degraded
            // or not (raid6 keeps each entry on both parity members). Unless the replay could
            // not use part of it (a log write cut short by the kill: md then resyncs too).
            let notes = server_notes(&dir);
            let replay = notes.split(" | ").filter(|l| l.contains("partial parity log was replayed")).last();
            let replay =
                replay.unwrap_or_else(|| panic!("round {round}: the server did not say it replayed the log: {notes}"));
            let incomplete = !replay.contains(", 0 unusable") || replay.contains("no valid log");
            if incomplete && spec.level != "6" && missing.is_some() {
                // A raid4/5 short of a member has no redundancy left to disagree: parity is what
                // defines the missing member. No resync is owed for an entry the replay could not
                // use (a log write the kill cut short, so its stripes were never written), and
                // the server says why.
                assert!(
                    !last.starts_with("resync"),
                    "round {round}: a degraded raid{} was resynced: {waited:#}",
                    spec.level
                );
                assert!(
                    notes_say(&dir, "no resync is owed"),
                    "round {round}: the server did not say why no resync ran: {}",
                    server_notes(&dir)
                );
            } else if incomplete {
                assert!(last.starts_with("resync completed"), "round {round}: no resync after '{replay}': {waited:#}");
            } else {
                assert!(
                    !last.starts_with("resync"),
                    "round {round}: resynced after a complete log replay ('{replay}'): {waited:#}"
                );
            }
        } else if dirty {
            assert!(
                last.starts_with("resync completed"),
                "round {round}: a dirty raid{} array ({}) was restarted and no resync ran; its copies/parity may disagree \
                 (md resyncs a dirty raid1/raid10 with the copies it has, and refuses only dirty degraded raid4/5/6). \
                 The server said: {}\n{waited:#}",
                spec.level,
                if missing.is_some() { "degraded" } else { "all members present" },
                server_notes(&dir)
            );
        } else {
            assert!(!last.starts_with("resync"), "round {round}: a clean array was resynced: {waited:#}");
        }
        serve.term();
        let d = detail(&present);
        assert_eq!(d["clean"], Value::Bool(true), "round {round}: not clean after the resync and a SIGTERM\n{d:#}");
        let o = uraid(&["check"], &present);
        if missing.is_some() && !o.status.success() && text(&o).contains("degraded") {
            // uraid (like md, it says) does not check a degraded array; the reads without each
            // member below compare the copies instead.
        } else {
            assert!(o.status.success(), "uraid check failed\n{}", text(&o));
            let n = String::from_utf8_lossy(&o.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("mismatch_cnt ").map(|n| n.trim().to_string()));
            assert_eq!(n.as_deref(), Some("0"), "round {round}: uraid check after the resync\n{}", text(&o));
        }
        assert!(ok(&["cat"], &present).stdout == actual, "round {round}: uraid cat differs from what NBD read");
        // Every member that redundancy covers is consistent with the rest: read without it, the
        // array is the same (parity rebuilds it, or another copy serves it).
        for skip in 0..present.len() {
            let rest: Vec<String> =
                present.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, m)| m.clone()).collect();
            let o = uraid(&["cat"], &rest);
            if o.status.success() {
                assert!(
                    o.stdout == actual,
                    "round {round}: the array read without {} differs from the array read whole",
                    present[skip]
                );
            } else {
                assert!(
                    missing.is_some() || spec.level == "0",
                    "round {round}: cannot read the array without {}\n{}",
                    present[skip],
                    text(&o)
                );
            }
        }
        {
            let mut m = shared.model.lock().unwrap();
            m.base = actual;
            m.writes.clear();
            m.lost_sectors.clear();
        }
        if round < rounds {
            serve = Serve::start(&dir, &present, &[&io]);
        } else {
            // Ends the loop; `serve` is moved out on every path above.
            serve = Serve { child: None, nbd: PathBuf::new(), control: PathBuf::new() };
        }
    }
    drop(serve);
    assert!(
        refused || !spec.refuse_dirty_degraded,
        "no round left the array dirty, so the degraded start was never tried"
    );
    if missing.is_some() {
        // The member left out the whole time is stale: given back, it must not be read.
        let want = shared.model.lock().unwrap().base.clone();
        assert!(ok(&["cat"], &members).stdout == want, "with the stale member given back, the array reads differently");
    }
}

#[test]
fn crash_raid1() {
    run(Spec {
        test: "crash_raid1",
        level: "1",
        devices: 2,
        create: &[],
        degraded: false,
        refuse_dirty_degraded: false,
        ppl: false,
        rounds: 9,
        io: "uring",
    });
}

#[test]
fn crash_raid5() {
    run(Spec {
        test: "crash_raid5",
        level: "5",
        devices: 4,
        create: &[],
        degraded: false,
        refuse_dirty_degraded: true,
        ppl: false,
        rounds: 9,
        io: "threads",
    });
}

#[test]
fn crash_raid6() {
    run(Spec {
        test: "crash_raid6",
        level: "6",
        devices: 5,
        create: &[],
        degraded: false,
        refuse_dirty_degraded: true,
        ppl: false,
        rounds: 9,
        io: "uring",
    });
}

#[test]
fn crash_raid10() {
    run(Spec {
        test: "crash_raid10",
        level: "10",
        devices: 4,
        create: &[],
        degraded: false,
        refuse_dirty_degraded: false,
        ppl: false,
        rounds: 9,
        io: "threads",
    });
}

/// With a write-intent bitmap the resync after a crash covers only the regions the bitmap marks:
/// a bit cleared too early, or set too late, shows up as a mismatch or lost data.
#[test]
fn crash_raid5_bitmap() {
    run(Spec {
        test: "crash_raid5_bitmap",
        level: "5",
        devices: 4,
        create: &["--bitmap=internal"],
        degraded: false,
        refuse_dirty_degraded: false,
        ppl: false,
        rounds: 7,
        io: "uring",
    });
}

/// With md's partial parity log a dirty restart replays the log instead of resyncing.
#[test]
fn crash_raid5_ppl() {
    run(Spec {
        test: "crash_raid5_ppl",
        level: "5",
        devices: 4,
        create: &[],
        degraded: false,
        refuse_dirty_degraded: false,
        ppl: true,
        rounds: 7,
        io: "uring",
    });
}

/// The write hole, closed: a degraded raid5 with a log is killed under load again and again and
/// restarted degraded (md refuses that without a log); nothing but sectors being written on the
/// missing member may come back wrong.
#[test]
fn crash_raid5_ppl_degraded() {
    run(Spec {
        test: "crash_raid5_ppl_degraded",
        level: "5",
        devices: 4,
        create: &[],
        degraded: true,
        refuse_dirty_degraded: false,
        ppl: true,
        rounds: 6,
        io: "threads",
    });
}

/// raid6 with uraid's log (md has none for raid6), degraded by one member.
#[test]
fn crash_raid6_ppl_degraded() {
    run(Spec {
        test: "crash_raid6_ppl_degraded",
        level: "6",
        devices: 5,
        create: &[],
        degraded: true,
        refuse_dirty_degraded: false,
        ppl: true,
        rounds: 5,
        io: "threads",
    });
}

#[test]
fn crash_raid1_degraded() {
    run(Spec {
        test: "crash_raid1_degraded",
        level: "1",
        devices: 3,
        create: &[],
        degraded: true,
        refuse_dirty_degraded: false,
        ppl: false,
        rounds: 4,
        io: "threads",
    });
}

#[test]
fn crash_raid10_degraded() {
    run(Spec {
        test: "crash_raid10_degraded",
        level: "10",
        devices: 4,
        create: &[],
        degraded: true,
        refuse_dirty_degraded: false,
        ppl: false,
        rounds: 4,
        io: "threads",
    });
}

/// The oracle itself, on hand-made histories: what it must accept and what it must refuse.
#[test]
fn model_oracle() {
    let w = |gen, offset, len, epoch, sent, done, acked| WriteRec {
        offset,
        len,
        gen,
        zero: false,
        fua: false,
        epoch,
        sent,
        done: Some(done),
        acked,
    };
    let fill = |buf: &mut Vec<u8>, r: &WriteRec| (r.offset..r.end()).for_each(|p| buf[p as usize] = r.byte(p));
    let model = |writes: Vec<WriteRec>, flush: &[(u32, u64)]| Model {
        base: vec![7; 4096],
        writes,
        flush_mark: flush.iter().copied().collect(),
        ..Model::default()
    };
    // W1 is durable (acked at 2, flush sent at 3); W2 was acked after that flush; W3 never answered.
    let (w1, w2, w3) = (w(1, 0, 1000, 1, 1, 2, true), w(2, 500, 1000, 1, 4, 5, true), w(3, 2000, 100, 1, 6, 9, false));
    let m = model(vec![w1.clone(), w2.clone(), w3.clone()], &[(1, 3)]);
    let mut a = m.base.clone();
    fill(&mut a, &w1);
    assert!(m.verify(&a).is_ok(), "W2 and W3 may be lost");
    fill(&mut a, &w2);
    a[2000..2050].copy_from_slice(&(2000..2050).map(|p| pattern(p, 3)).collect::<Vec<_>>());
    assert!(m.verify(&a).is_ok(), "W2 and part of W3 may have landed");
    let mut lost = a.clone();
    lost[100..200].fill(7);
    let e = m.verify(&lost).unwrap_err();
    assert!(e.contains("[100, 200)") && e.contains("base"), "a lost durable write must be caught: {e}");
    let mut garbage = a.clone();
    garbage[3000] ^= 0xff;
    assert!(m.verify(&garbage).is_err(), "a changed byte nobody wrote must be caught");

    // W5 was sent after W4 was answered and is durable: W4's data may not reappear under it.
    let (w4, w5) = (w(4, 0, 100, 1, 1, 2, true), w(5, 50, 100, 1, 3, 4, true));
    let m = model(vec![w4.clone(), w5.clone()], &[(1, 5)]);
    let mut a = m.base.clone();
    fill(&mut a, &w5);
    (0..50).for_each(|p| a[p] = w4.byte(p as u64));
    assert!(m.verify(&a).is_ok());
    let mut stale = a.clone();
    (50..100).for_each(|p| stale[p] = w4.byte(p as u64));
    assert!(m.verify(&stale).is_err(), "an overwritten durable write must not come back");
    // Concurrent with W5 (answered after W5 was sent), W4 may win the overlap.
    let m = model(vec![w(4, 0, 100, 1, 1, 4, true), w(5, 50, 100, 1, 3, 5, true)], &[(1, 6)]);
    assert!(m.verify(&stale).is_ok());

    // A flush acknowledged by a later server run does not make an earlier run's writes durable.
    let (w6, w7) = (w(6, 0, 100, 1, 1, 2, true), w(7, 1000, 10, 2, 4, 5, true));
    let m = model(vec![w6.clone(), w7.clone()], &[(2, 6)]);
    let mut a = m.base.clone();
    fill(&mut a, &w7);
    assert!(m.verify(&a).is_ok(), "W6 was never flushed by its own server run");
    let mut a2 = m.base.clone();
    fill(&mut a2, &w6);
    assert!(m.verify(&a2).is_err(), "W7 was flushed and is missing");
}
