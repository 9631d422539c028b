//! Members that are NBD exports, through the real binary: nbdkit's memory plugin over a Unix
//! socket and over TCP, qemu-nbd, and another `uraid serve` as members beside local files;
//! the array served again and read by nbdinfo and nbdcopy; and what goes wrong: nothing at the
//! socket, an export the server does not have, TLS settings on a plain URI or unreadable, a
//! server sending garbage, and a member's server killed in the middle of writes. (Members over
//! TLS: `nbd_tls.rs`.)
//!
//! The servers are nbdkit and qemu-nbd; a test that needs one that is not installed says so and
//! passes without running.

mod common;

use std::io::Write;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::serve::Serve;
use common::{image, installed, ok, text, uraid, uraid_stdin, wait_until, with};
use tempfile::TempDir;

const MIB: u64 = 1 << 20;

/// A server process, killed on drop.
struct Daemon(Child);

impl Daemon {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

fn unix_uri(socket: &Path, export: &str) -> String {
    format!("nbd+unix:///{export}?socket={}", socket.display())
}

/// `nbdkit memory SIZE` on a Unix socket in `dir` (with `filters` before the plugin and their
/// `params` after it); its URI.
fn nbdkit_unix(dir: &Path, name: &str, size: u64, filters: &[&str], params: &[&str]) -> (Daemon, String) {
    let socket = dir.join(format!("{name}.sock"));
    let child = Command::new("nbdkit")
        .args(["-f", "-U"])
        .arg(&socket)
        .args(filters)
        .args(["memory", &size.to_string()])
        .args(params)
        .stdout(Stdio::null())
        .spawn()
        .expect("run nbdkit");
    wait_until("nbdkit's socket", Duration::from_secs(10), || socket.exists());
    (Daemon(child), unix_uri(&socket, ""))
}

/// `nbdkit memory SIZE` on a loopback TCP port; its URI.
fn nbdkit_tcp(size: u64) -> (Daemon, String) {
    // A free port: bound and released, then taken by nbdkit (another process taking it in
    // between would make nbdkit fail to start, and the wait below say so).
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("nbdkit")
        .args(["-f", "-i", "127.0.0.1", "-p", &port.to_string(), "memory", &size.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .expect("run nbdkit");
    wait_until("nbdkit's port", Duration::from_secs(10), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    (Daemon(child), format!("nbd://127.0.0.1:{port}/"))
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    uraid_testkit::random_bytes(len as u64, seed)
}

fn cat(members: &[String], offset: u64, len: usize) -> Vec<u8> {
    let off = format!("--offset={offset}");
    let length = format!("--length={len}");
    ok(&with(&["cat", &off, &length], members)).stdout
}

fn write(members: &[String], offset: u64, data: &[u8]) {
    let off = format!("--offset={offset}");
    let o = uraid_stdin(&with(&["write", &off], members), data);
    assert!(o.status.success(), "uraid write failed\n{}", text(&o));
}

fn nbdcopy_out(uri: &str, to: &Path) {
    let o = Command::new("nbdcopy").arg(uri).arg(to).output().expect("run nbdcopy");
    assert!(o.status.success(), "nbdcopy {uri} failed: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn raid5_over_nbdkit_unix_and_tcp_and_a_file_then_served() {
    if !installed("nbdkit") {
        return;
    }
    let dir = TempDir::new().unwrap();
    let (_a, a) = nbdkit_unix(dir.path(), "a", 64 * MIB, &[], &[]);
    let (_b, b) = nbdkit_tcp(64 * MIB);
    let members = vec![a.clone(), b.clone(), image(dir.path(), "c.img", 64 * MIB)];
    ok(&with(&["create", "--level=5", "--raid-devices=3", "--chunk=64K"], &members));

    let data = pattern(3 * MIB as usize + 1234, 1);
    write(&members, 5000, &data);
    assert_eq!(cat(&members, 5000, data.len()), data);
    // Read again with the TCP member left out: rebuilt from the other two.
    assert_eq!(cat(&[a.clone(), members[2].clone()], 5000, data.len()), data);

    let examined = String::from_utf8(ok(&["examine", &b]).stdout).unwrap();
    assert!(
        examined.contains("Raid Level : raid5") && examined.contains("Device Role : Active device 1"),
        "{examined}"
    );
    let detail = String::from_utf8(ok(&with(&["detail"], &members)).stdout).unwrap();
    assert!(detail.contains(&a) && detail.contains(&b), "{detail}");

    // Served, the array reads the same through nbdinfo and nbdcopy.
    if !installed("nbdcopy") || !installed("nbdinfo") {
        return;
    }
    let serve = Serve::start(dir.path(), &members, &[]);
    let served = unix_uri(&dir.path().join("nbd.sock"), "");
    let size = Command::new("nbdinfo").args(["--size", &served]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&size.stdout).trim(), (126 * MIB).to_string());
    let out = dir.path().join("out.raw");
    nbdcopy_out(&served, &out);
    let got = std::fs::read(&out).unwrap();
    assert_eq!(&got[5000..5000 + data.len()], &data[..]);
    serve.stop(libc::SIGTERM);
}

#[test]
fn a_member_served_by_another_uraid() {
    let dir = TempDir::new().unwrap();
    // The lower array, a raid1 of two files, served on a Unix socket.
    let lower: Vec<String> = (0..2).map(|i| image(dir.path(), &format!("l{i}.img"), 32 * MIB)).collect();
    ok(&with(&["create", "--level=1", "--raid-devices=2"], &lower));
    let lower_dir = dir.path().join("lower");
    std::fs::create_dir(&lower_dir).unwrap();
    let serve = Serve::start(&lower_dir, &lower, &[]);
    let remote = unix_uri(&lower_dir.join("nbd.sock"), "");
    // The upper array mirrors it with a local file.
    let upper = vec![remote.clone(), image(dir.path(), "u1.img", 32 * MIB)];
    ok(&with(&["create", "--level=1", "--raid-devices=2", "--bitmap=internal"], &upper));
    let data = pattern(MIB as usize, 2);
    write(&upper, 4096, &data);
    assert_eq!(cat(&upper, 4096, data.len()), data);
    // Only the remote copy, read through both arrays.
    assert_eq!(cat(&[remote], 4096, data.len()), data);
    serve.stop(libc::SIGTERM);
    // The lower array's own members hold the upper array's superblock and data.
    let sb = String::from_utf8(ok(&["examine", &lower[0]]).stdout).unwrap();
    assert!(sb.contains("Raid Level : raid1"), "{sb}");
}

#[test]
fn a_qemu_nbd_member_is_the_same_array_as_its_file() {
    if !installed("qemu-nbd") {
        return;
    }
    let dir = TempDir::new().unwrap();
    let behind = image(dir.path(), "behind.img", 32 * MIB);
    let socket = dir.path().join("q.sock");
    let mut qemu = Daemon(
        Command::new("qemu-nbd")
            .args(["--persistent", "--shared=8", "--format=raw", "--socket"])
            .arg(&socket)
            .arg(&behind)
            .stdout(Stdio::null())
            .spawn()
            .expect("run qemu-nbd"),
    );
    wait_until("qemu-nbd's socket", Duration::from_secs(10), || socket.exists());
    let members = vec![unix_uri(&socket, ""), image(dir.path(), "local.img", 32 * MIB)];
    ok(&with(&["create", "--level=1", "--raid-devices=2"], &members));
    let data = pattern(2 * MIB as usize, 3);
    write(&members, 0, &data);
    assert_eq!(cat(&members, 0, data.len()), data);
    qemu.kill();
    // The file qemu-nbd exported is a member of the same array, read without NBD.
    assert_eq!(cat(&[behind], 0, data.len()), data);
}

#[test]
fn errors_name_the_member_and_what_is_wrong() {
    let dir = TempDir::new().unwrap();
    // Nothing listening.
    let absent = unix_uri(&dir.path().join("absent.sock"), "");
    let o = uraid(&["examine", &absent]);
    assert!(!o.status.success());
    let msg = String::from_utf8_lossy(&o.stderr);
    assert!(msg.contains(&absent) && msg.contains("cannot connect"), "{msg}");

    // TLS settings on a plain URI: refused, never tried in the clear.
    let o = uraid(&["examine", "nbd://127.0.0.1:1/x?tls-psk-file=k.psk"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("write nbds://"), "{}", text(&o));
    // TLS credentials that cannot be read: named before connecting.
    let o = uraid(&["examine", "nbds://127.0.0.1:1/x?tls-psk-file=/nonexistent/k.psk"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("PSK file /nonexistent/k.psk"), "{}", text(&o));

    // A malformed URI is the URI's error, not "no such file".
    let o = uraid(&["examine", "nbd+unix:///x"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs ?socket=PATH"), "{}", text(&o));

    // An export the server does not have: the server's refusal of NBD_OPT_GO, said so.
    let files: Vec<String> = (0..2).map(|i| image(dir.path(), &format!("f{i}.img"), 16 * MIB)).collect();
    ok(&with(&["create", "--level=1", "--raid-devices=2"], &files));
    let serve = Serve::start(dir.path(), &files, &["--export-name=disk"]);
    let wrong = unix_uri(&dir.path().join("nbd.sock"), "other");
    let o = uraid(&["examine", &wrong]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("the server has no export named \"other\""), "{}", text(&o));
    serve.stop(libc::SIGTERM);

    // A server that answers with garbage.
    let socket = dir.path().join("garbage.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let fake = std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\nthis is not NBD at all");
        }
    });
    let o = uraid(&["examine", &unix_uri(&socket, "")]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an NBD server"), "{}", text(&o));
    fake.join().unwrap();
}

#[test]
fn a_member_server_killed_mid_write_leaves_the_array_degraded_and_whole() {
    if !installed("nbdkit") || !installed("nbdcopy") {
        return;
    }
    let dir = TempDir::new().unwrap();
    let (_a, a) = nbdkit_unix(dir.path(), "a", 64 * MIB, &[], &[]);
    // Slow writes on this member, so the kill lands while writes are in flight.
    let (mut b, b_uri) = nbdkit_unix(dir.path(), "b", 64 * MIB, &["--filter=delay"], &["wdelay=20ms"]);
    let members = vec![a, b_uri.clone(), image(dir.path(), "c.img", 64 * MIB)];
    ok(&with(&["create", "--level=5", "--raid-devices=3", "--chunk=64K", "--bitmap=internal"], &members));
    let serve = Serve::start(dir.path(), &members, &[]);
    let served = unix_uri(&dir.path().join("nbd.sock"), "");
    let data = pattern(16 * MIB as usize, 4);
    let input = dir.path().join("in.raw");
    std::fs::write(&input, &data).unwrap();
    let mut copy = Command::new("nbdcopy").arg(&input).arg(&served).stderr(Stdio::piped()).spawn().unwrap();
    sleep(Duration::from_millis(300));
    assert!(copy.try_wait().unwrap().is_none(), "the copy should still be writing when the server is killed");
    b.kill();
    let copied = copy.wait().unwrap();
    assert!(copied.success(), "writes to a raid5 that lost one member go on");
    // The member is out of the array once its reconnection attempts are spent.
    wait_until("the member to be failed", Duration::from_secs(20), || {
        serve.status()["members"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["path"] == b_uri.as_str() && m["state"] == "faulty")
    });
    let status = serve.status();
    assert_eq!(status["degraded"], 1, "{status}");
    let out = dir.path().join("out.raw");
    nbdcopy_out(&served, &out);
    assert_eq!(&std::fs::read(&out).unwrap()[..data.len()], &data[..]);
    serve.stop(libc::SIGTERM);
    // What the surviving members say, read directly: the same bytes, one member faulty.
    assert_eq!(cat(&[members[0].clone(), members[2].clone()], 0, 4096), data[..4096]);
}

#[test]
fn gvinum_and_raidframe_verbs_take_nbd_members() {
    if !installed("nbdkit") {
        return;
    }
    let dir = TempDir::new().unwrap();
    // gvinum: a concatenated volume over an NBD drive and a file drive.
    let (_v0, v0) = nbdkit_unix(dir.path(), "v0", 16 * MIB, &[], &[]);
    let v1 = image(dir.path(), "v1.img", 16 * MIB);
    let description = format!(
        "drive d0 device {v0}\ndrive d1 device {v1}\nvolume v\nplex org concat\nsd length 4m drive d0\nsd length 4m drive d1\n"
    );
    let conf = dir.path().join("v.conf");
    std::fs::write(&conf, description).unwrap();
    ok(&["vinum", "create", &conf.display().to_string()]);
    let listed = String::from_utf8(ok(&["vinum", "list", &v0, &v1]).stdout).unwrap();
    assert!(listed.contains(&format!("State: up\t{v0}")), "{listed}");
    let drives = vec!["--volume".to_string(), "v".into(), v0, v1];
    let data = pattern(6 * MIB as usize, 5);
    write(&drives, 0, &data);
    assert_eq!(cat(&drives, 0, data.len()), data);

    // RAIDframe: a raidctl configuration naming an NBD component, kept as written (not taken
    // relative to the file's folder as paths are).
    let (_r0, r0) = nbdkit_unix(dir.path(), "r0", 16 * MIB, &[], &[]);
    image(dir.path(), "d1.img", 16 * MIB);
    image(dir.path(), "d2.img", 16 * MIB);
    let raid_conf = dir.path().join("raid.conf");
    std::fs::write(
        &raid_conf,
        format!("START array\n1 3 0\n\nSTART disks\n{r0}\nd1.img\nd2.img\n\nSTART layout\n32 1 1 5\n\nSTART queue\nfifo 100\n"),
    )
    .unwrap();
    let c = raid_conf.display().to_string();
    ok(&["raidctl", "-C", &c]);
    ok(&["raidctl", "-I", "2026", &c]);
    ok(&["raidctl", "-i", &c]);
    let status = String::from_utf8(ok(&["raidctl", "-s", &c]).stdout).unwrap();
    assert!(status.contains(&format!("{r0}: optimal")), "{status}");
    let set = vec!["--raidframe".to_string(), c];
    let data = pattern(100_000, 6);
    write(&set, 512, &data);
    assert_eq!(cat(&set, 512, data.len()), data);
}

#[test]
fn ctl_add_rebuilds_onto_an_nbd_member() {
    if !installed("nbdkit") {
        return;
    }
    let dir = TempDir::new().unwrap();
    let files: Vec<String> = (0..2).map(|i| image(dir.path(), &format!("m{i}.img"), 16 * MIB)).collect();
    let created = vec![files[0].clone(), "missing".into(), files[1].clone()];
    ok(&with(&["create", "--level=5", "--raid-devices=3", "--chunk=64K"], &created));
    let data = pattern(4 * MIB as usize, 7);
    write(&files, 0, &data);
    let (_n, nbd) = nbdkit_unix(dir.path(), "n", 16 * MIB, &[], &[]);
    let serve = Serve::start(dir.path(), &files, &[]);
    let added = serve.ctl(&["add", &nbd]);
    assert!(added.status.success(), "{}", text(&added));
    wait_until("the rebuild onto the NBD member", Duration::from_secs(60), || {
        let s = serve.status();
        s["degraded"] == 0 && s["members"].as_array().unwrap().iter().all(|m| m["state"] == "in_sync")
    });
    serve.stop(libc::SIGTERM);
    // The NBD member now holds its share: read with a file member left out.
    assert_eq!(cat(&[files[0].clone(), nbd], 0, data.len()), data);
}

#[test]
fn a_silent_member_fails_fast_under_limits_set_with_ctl() {
    if !installed("nbdkit") || !installed("nbdcopy") {
        return;
    }
    use std::io::Read;
    let dir = TempDir::new().unwrap();
    let (_a, a) = nbdkit_unix(dir.path(), "a", 32 * MIB, &[], &[]);
    // nbdkit's pause filter holds every request while paused: a member that stops answering.
    let pause = dir.path().join("pause.sock");
    let pause_param = format!("pause-control={}", pause.display());
    let (_b, b) = nbdkit_unix(dir.path(), "b", 32 * MIB, &["--filter=pause"], &[&pause_param]);
    let members = vec![a.clone(), b.clone(), image(dir.path(), "c.img", 32 * MIB)];
    ok(&with(&["create", "--level=5", "--raid-devices=3", "--chunk=64K", "--assume-clean"], &members));
    let data = pattern(2 * MIB as usize, 8);
    write(&members, 0, &data);
    let serve = Serve::start(dir.path(), &members, &[]);

    let shown = serve.ctl(&["member-limits"]);
    let listed = String::from_utf8_lossy(&shown.stdout);
    assert!(
        listed.contains(&format!("{b} timeout 30000ms reconnect-attempts 5 reconnect-budget 10000ms")),
        "{}",
        text(&shown)
    );
    let set = serve.ctl(&["member-limits", &b, "--timeout=500ms", "--reconnect-attempts=1"]);
    assert!(String::from_utf8_lossy(&set.stdout).contains("timeout 500ms reconnect-attempts 1"), "{}", text(&set));
    let local = serve.ctl(&["member-limits", &members[2]]);
    assert!(!local.status.success() && String::from_utf8_lossy(&local.stderr).contains("not reached over a network"));

    // Pause b, then read the whole array: b's reads go unanswered, fail after 500 ms, and the
    // array fails b and answers from the other two.
    let mut control = std::os::unix::net::UnixStream::connect(&pause).unwrap();
    control.write_all(b"p").unwrap();
    let mut answer = [0u8; 1];
    control.read_exact(&mut answer).unwrap();
    let started = Instant::now();
    let out = dir.path().join("out.raw");
    nbdcopy_out(&unix_uri(&dir.path().join("nbd.sock"), ""), &out);
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    assert_eq!(&std::fs::read(&out).unwrap()[..data.len()], &data[..]);
    let status = serve.status();
    let b_state =
        status["members"].as_array().unwrap().iter().find(|m| m["path"] == b.as_str()).unwrap()["state"].clone();
    assert_eq!(b_state, "faulty", "{status}");
    control.write_all(b"r").unwrap();
    serve.stop(libc::SIGTERM);
}
