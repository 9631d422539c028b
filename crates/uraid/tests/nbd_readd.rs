//! A lost host degrades the array; its return is taken back by the array itself (md's
//! `--re-add`), through the real binary with nbdkit exporting files, so a member killed with
//! SIGKILL comes back on the same bytes:
//!
//! - with a write-intent bitmap only the regions written while it was away are rebuilt;
//! - without one it is rebuilt in full, and `ctl re-add` (bitmap-guided only) refuses it;
//! - another array's member appearing at its address is left out and not written.
//!
//! nbdkit is needed; without it the tests say so and pass without running.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::nbdkit::FileExport;
use common::serve::Serve;
use common::{installed, wait_until};
use common::{ok, text, with};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uraid_nbd::client::{ClientConfig, NbdClient, NbdUri};

const MIB: u64 = 1 << 20;
/// Each member's size; the array is twice that (raid5 over three).
const MEMBER: u64 = 64 * MIB;
/// Array bytes the writer goes over again and again while the member is lost.
const BUSY: u64 = 8 * MIB;
/// Where more is written once the member is out, and how much.
const LATER_AT: u64 = 64 * MIB;
const LATER: u64 = 2 * MIB;
/// The bitmap's chunk.
const BITMAP_CHUNK: u64 = MIB;

fn image(dir: &Path, name: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::File::create(&path).unwrap().set_len(MEMBER).unwrap();
    path
}

fn sha(path: &Path) -> String {
    format!("{:x}", Sha256::digest(std::fs::read(path).unwrap()))
}

fn mismatch_cnt(out: &[u8]) -> u64 {
    let out = String::from_utf8_lossy(out);
    out.lines().find_map(|l| l.strip_prefix("mismatch_cnt ")).expect("mismatch_cnt line").trim().parse().unwrap()
}

fn member_state(status: &Value, path: &str) -> String {
    let members = status["members"].as_array().unwrap();
    let m = members.iter().find(|m| m["path"] == path);
    m.map_or("absent".to_string(), |m| m["state"].as_str().unwrap_or("?").to_string())
}

/// The served array, as a client writes and reads it.
fn client(dir: &Path) -> NbdClient {
    let uri = NbdUri::parse(&format!("nbd+unix:///?socket={}", dir.join("nbd.sock").display())).unwrap();
    NbdClient::connect(&uri, ClientConfig::default()).unwrap()
}

fn piece(round: u64, index: u64) -> Vec<u8> {
    uraid_testkit::random_bytes(MIB, round * 1000 + index)
}

/// A raid5 over two nbdkit file exports (`a`, `b`) and a local file, served; `b` is killed
/// while a writer goes over [`BUSY`] bytes, the array must go on degraded (every write
/// answered), and [`LATER`] bytes are written at [`LATER_AT`] once `b` is out. Returns the
/// server, the exports, the local member, and what the array must read at 0 and `LATER_AT`.
struct Lost {
    /// Until stopped.
    serve: Option<Serve>,
    a: FileExport,
    b: FileExport,
    c: String,
    busy: Vec<u8>,
    later: Vec<u8>,
}

fn lose_a_member_while_writing(dir: &Path, bitmap: bool) -> Lost {
    let a = FileExport::start(&dir.join("a.sock"), &image(dir, "a.img"));
    let mut b = FileExport::start(&dir.join("b.sock"), &image(dir, "b.img"));
    let c = image(dir, "c.img").display().to_string();
    let members = vec![a.uri(), b.uri(), c.clone()];
    let mut create = vec!["create", "--level=5", "--raid-devices=3", "--chunk=64K", "--assume-clean"];
    if bitmap {
        create.extend(["--bitmap=internal", "--bitmap-chunk=1M"]);
    }
    ok(&with(&create, &members));
    let serve = Serve::start(dir, &members, &[]);
    // Tried again quickly, so the test is short.
    let set = serve.ctl(&["member-limits", "--readd-first=200ms", "--readd-max=1s"]);
    assert!(set.status.success(), "{}", text(&set));
    assert!(String::from_utf8_lossy(&set.stdout).contains("auto-readd on readd-first 200ms readd-max 1000ms"));

    // The writer goes over the busy region until told to stop; every write must be answered.
    let nbd = Arc::new(client(dir));
    let stop = Arc::new(AtomicBool::new(false));
    let last = Arc::new(Mutex::new(vec![0u64; (BUSY / MIB) as usize]));
    let writer = {
        let (nbd, stop, last) = (Arc::clone(&nbd), Arc::clone(&stop), Arc::clone(&last));
        std::thread::spawn(move || {
            let mut round = 1;
            while !stop.load(Ordering::SeqCst) {
                for i in 0..BUSY / MIB {
                    nbd.write(i * MIB, &[&piece(round, i)], false).expect("a write while a member is lost");
                    last.lock().unwrap()[i as usize] = round;
                }
                round += 1;
            }
        })
    };
    wait_until("the writer's first round", Duration::from_secs(30), || last.lock().unwrap().iter().all(|&r| r > 0));
    b.kill();
    wait_until("the lost member to be failed", Duration::from_secs(30), || {
        member_state(&serve.status(), &members[1]) == "faulty"
    });
    // The others' superblocks record it, as md's do: the local member's, read directly.
    wait_until("the failure recorded on the others", Duration::from_secs(30), || {
        String::from_utf8_lossy(&ok(&["examine", &c]).stdout).contains("Array State : A.A")
    });
    // Some writes after the failure too.
    let rounds_then = last.lock().unwrap()[0];
    wait_until("writes to go on degraded", Duration::from_secs(30), || last.lock().unwrap()[0] > rounds_then + 1);
    stop.store(true, Ordering::SeqCst);
    writer.join().expect("the writer");
    let later = uraid_testkit::random_bytes(LATER, 77);
    nbd.write(LATER_AT, &[&later], false).unwrap();
    nbd.flush().unwrap();
    let status = serve.status();
    assert_eq!(status["degraded"], 1, "{status:#}");
    let busy: Vec<u8> = {
        let last = last.lock().unwrap();
        (0..BUSY / MIB).flat_map(|i| piece(last[i as usize], i)).collect()
    };
    Lost { serve: Some(serve), a, b, c, busy, later }
}

impl Lost {
    fn serve(&self) -> &Serve {
        self.serve.as_ref().expect("the array is served")
    }

    fn stop(&mut self) {
        self.serve.take().expect("the array is served").stop(libc::SIGTERM);
    }
}

/// Everything written reads back, through the server and with each member left out.
fn data_intact(dir: &Path, lost: &Lost) {
    let nbd = client(dir);
    let mut got = vec![0u8; BUSY as usize];
    nbd.read(0, &mut got).unwrap();
    assert!(got == lost.busy, "the busy region reads back wrong");
    let mut got = vec![0u8; LATER as usize];
    nbd.read(LATER_AT, &mut got).unwrap();
    assert!(got == lost.later, "the region written while the member was away reads back wrong");
}

/// Offline, once the server stopped: `uraid check` finds nothing, and each member left out in
/// turn the array still reads what was written.
fn consistent_offline(lost: &Lost) {
    let members = vec![lost.a.uri(), lost.b.uri(), lost.c.clone()];
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &members)).stdout), 0);
    for skip in 0..3 {
        let rest: Vec<String> =
            members.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, m)| m.clone()).collect();
        let read = |offset: u64, len: u64| {
            ok(&with(&["cat", &format!("--offset={offset}"), &format!("--length={len}")], &rest)).stdout
        };
        assert!(read(0, BUSY) == lost.busy, "reading without member {skip} differs");
        assert!(read(LATER_AT, LATER) == lost.later, "reading without member {skip} differs");
    }
}

fn wait_for_readd(serve: &Serve, b: &str) -> Value {
    wait_until("the returning member to be re-added", Duration::from_secs(60), || serve.status()["readded"] == 1);
    let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
    assert_eq!(waited["degraded"], 0, "{waited:#}");
    assert_eq!(member_state(&waited, b), "in_sync", "{waited:#}");
    assert_eq!(waited["returning"].as_array().unwrap().len(), 0, "{waited:#}");
    waited
}

#[test]
fn a_returning_host_is_readded_and_only_what_changed_is_rebuilt() {
    if !installed("nbdkit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut lost = lose_a_member_while_writing(dir.path(), true);
    let b_uri = lost.b.uri();
    let status = lost.serve().status();
    let returning = &status["returning"][0];
    assert_eq!(returning["path"], b_uri.as_str(), "{status:#}");
    assert_eq!(returning["slot"], 1, "{status:#}");

    // The host comes back with the same bytes.
    lost.b = FileExport::start(&lost.b.socket.clone(), &lost.b.file.clone());
    let waited = wait_for_readd(lost.serve(), &b_uri);
    let last = waited["last_sync"].as_str().unwrap_or_default();
    assert!(last.starts_with("recover completed"), "{last}");
    let rebuilt = waited["last_sync_bytes"].as_u64().unwrap();
    // What was written while it was away, in member bytes (raid5 over three: half the array
    // bytes on each member), rounded out to whole bitmap chunks.
    let chunks = |array_at: u64, len: u64| {
        let (from, to) = (array_at / 2, (array_at + len).div_ceil(2));
        to.div_ceil(BITMAP_CHUNK) - from / BITMAP_CHUNK
    };
    let bound = (chunks(0, BUSY) + chunks(LATER_AT, LATER)) * BITMAP_CHUNK;
    eprintln!("rebuilt {rebuilt} bytes of a {MEMBER}-byte member; written while away: at most {bound} bytes in bitmap chunks; {last}");
    assert!(rebuilt > 0 && rebuilt <= bound, "rebuilt {rebuilt} bytes, more than the {bound} bytes written while away");
    assert!(rebuilt * 8 < MEMBER, "rebuilt {rebuilt} of {MEMBER} bytes");
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(log.contains(&format!("{b_uri} is back: re-added to slot 1")), "{log}");

    data_intact(dir.path(), &lost);
    lost.stop();
    consistent_offline(&lost);
}

#[test]
fn without_a_bitmap_the_returning_host_is_rebuilt_in_full_and_re_add_refuses() {
    if !installed("nbdkit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut lost = lose_a_member_while_writing(dir.path(), false);
    let b_uri = lost.b.uri();
    // Not by itself for now: `re-add` by hand first, which a bitmap-less array cannot do.
    let off = lost.serve().ctl(&["member-limits", "--auto-readd=off"]);
    assert!(String::from_utf8_lossy(&off.stdout).contains("auto-readd off"), "{}", text(&off));
    lost.b = FileExport::start(&lost.b.socket.clone(), &lost.b.file.clone());
    let before = sha(&lost.b.file);
    let refused = lost.serve().ctl(&["re-add", &b_uri]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("keeps no write-intent bitmap"), "{}", text(&refused));
    assert_eq!(sha(&lost.b.file), before, "a refused re-add wrote to the member");
    assert_eq!(member_state(&lost.serve().status(), &b_uri), "faulty");

    let on = lost.serve().ctl(&["member-limits", "--auto-readd=on"]);
    assert!(on.status.success(), "{}", text(&on));
    let waited = wait_for_readd(lost.serve(), &b_uri);
    let rebuilt = waited["last_sync_bytes"].as_u64().unwrap();
    eprintln!("rebuilt {rebuilt} bytes of a {MEMBER}-byte member without a bitmap");
    assert!(rebuilt >= MEMBER - 4 * MIB, "a member back without a bitmap must be rebuilt in full: {waited:#}");
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(log.contains("rebuilding it in full"), "{log}");

    data_intact(dir.path(), &lost);
    lost.stop();
    consistent_offline(&lost);
}

#[test]
fn another_arrays_member_at_the_address_is_left_alone() {
    if !installed("nbdkit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut lost = lose_a_member_while_writing(dir.path(), true);
    let b_uri = lost.b.uri();
    // Another array's member is served where b was.
    let other: Vec<String> = ["x0.img", "x1.img"].iter().map(|n| image(dir.path(), n).display().to_string()).collect();
    ok(&with(&["create", "--level=1", "--raid-devices=2", "--bitmap=internal"], &other));
    let before = sha(Path::new(&other[0]));
    let socket = lost.b.socket.clone();
    lost.b.kill();
    let stranger = FileExport::start(&socket, Path::new(&other[0]));
    wait_until("the stranger to be refused", Duration::from_secs(30), || {
        let s = lost.serve().status();
        s["returning"][0]["refused"] == true
    });
    let status = lost.serve().status();
    let why = status["returning"][0]["last_failure"].as_str().unwrap().to_string();
    assert!(why.contains("another array"), "{why}");
    assert_eq!(member_state(&status, &b_uri), "faulty", "{status:#}");
    assert_eq!(status["readded"], 0);
    let shown = String::from_utf8(lost.serve().ctl(&["status"]).stdout).unwrap();
    assert!(shown.contains(&format!("lost: {b_uri} (slot 1)")) && shown.contains("left out: "), "{shown}");
    let by_hand = lost.serve().ctl(&["re-add", &b_uri]);
    assert!(!by_hand.status.success() && String::from_utf8_lossy(&by_hand.stderr).contains("another array"));
    // Tried again (and refused again) a few times: reported once in the log.
    let attempts = status["returning"][0]["attempts"].as_u64().unwrap();
    wait_until("more attempts", Duration::from_secs(30), || {
        lost.serve().status()["returning"][0]["attempts"].as_u64().unwrap() >= attempts + 2
    });
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert_eq!(log.matches("is left out, nothing written to it").count(), 1, "{log}");
    data_intact(dir.path(), &lost);
    lost.stop();
    drop(stranger);
    assert_eq!(sha(Path::new(&other[0])), before, "the other array's member was written");
    let examined = String::from_utf8(ok(&["examine", &other[0]]).stdout).unwrap();
    assert!(examined.contains("Raid Level : raid1"), "{examined}");
}

/// A member that stops answering writes (nbdkit's pause filter holds every request) is failed
/// once a write's request timeout passes, as when its host is lost, and writes go on degraded.
/// Answering again, it is taken back with a bitmap-guided rebuild.
#[test]
fn a_silent_member_is_failed_on_writes_and_taken_back() {
    if !installed("nbdkit") {
        return;
    }
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let a = FileExport::start(&dir.path().join("a.sock"), &image(dir.path(), "a.img"));
    let socket = dir.path().join("b.sock");
    let pause = dir.path().join("pause.sock");
    let b_file = image(dir.path(), "b.img");
    let _b = Command::new("nbdkit")
        .args(["-f", "-U"])
        .arg(&socket)
        .arg("--filter=pause")
        .arg("file")
        .arg(format!("file={}", b_file.display()))
        .arg(format!("pause-control={}", pause.display()))
        .stdout(Stdio::null())
        .spawn()
        .map(|c| ChildGuard(Some(c)))
        .expect("run nbdkit");
    wait_until("nbdkit's socket", Duration::from_secs(10), || std::os::unix::net::UnixStream::connect(&socket).is_ok());
    let b_uri = format!("nbd+unix:///?socket={}", socket.display());
    let c = image(dir.path(), "c.img").display().to_string();
    let members = vec![a.uri(), b_uri.clone(), c];
    ok(&with(
        &[
            "create",
            "--level=5",
            "--raid-devices=3",
            "--chunk=64K",
            "--assume-clean",
            "--bitmap=internal",
            "--bitmap-chunk=1M",
        ],
        &members,
    ));
    let serve = Serve::start(dir.path(), &members, &[]);
    let set = serve.ctl(&["member-limits", &b_uri, "--timeout=1s", "--readd-first=200ms", "--readd-max=1s"]);
    assert!(set.status.success(), "{}", text(&set));
    let nbd = client(dir.path());
    nbd.write(0, &[&piece(1, 0)], false).unwrap();

    let mut control = std::os::unix::net::UnixStream::connect(&pause).unwrap();
    control.write_all(b"p").unwrap();
    let mut answer = [0u8; 1];
    control.read_exact(&mut answer).unwrap();
    let started = std::time::Instant::now();
    let data = piece(2, 3);
    nbd.write(3 * MIB, &[&data], false).expect("a write with a member silent");
    nbd.flush().unwrap();
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    let status = serve.status();
    assert_eq!(member_state(&status, &b_uri), "faulty", "{status:#}");
    assert_eq!(status["returning"][0]["path"], b_uri.as_str(), "{status:#}");

    // It answers again: the paused requests go out, and the array takes it back.
    control.write_all(b"r").unwrap();
    let waited = wait_for_readd(&serve, &b_uri);
    let rebuilt = waited["last_sync_bytes"].as_u64().unwrap();
    assert!(rebuilt > 0 && rebuilt <= 2 * BITMAP_CHUNK, "{waited:#}");
    let mut got = vec![0u8; MIB as usize];
    nbd.read(3 * MIB, &mut got).unwrap();
    assert!(got == data);
    serve.stop(libc::SIGTERM);
    assert_eq!(mismatch_cnt(&ok(&with(&["check"], &members)).stdout), 0);
}

/// A child process killed on drop.
struct ChildGuard(Option<std::process::Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
