//! NBD over TLS through the real binary: `uraid serve --tls=require` with a PSK file and with
//! X.509 certificates, read and written by libnbd's nbdinfo and nbdcopy and by qemu-img (GnuTLS
//! clients), plain clients and wrong keys refused; an md raid5 whose members are `nbds` exports of
//! nbdkit and qemu-nbd (PSK and X.509), created, written and read back, then served over TLS
//! itself; and `serve`'s TLS options refused when they do not add up.
//!
//! Credentials are made at test time with the `openssl` command. A test whose peer program is not
//! installed says so and passes without running.

mod common;

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{image, installed, ok, text, uraid, uraid_stdin, with};
use tempfile::TempDir;
use uraid_testkit::tls_creds::{make_pki, openssl_installed, write_psk_file, Pki};

const MIB: u64 = 1 << 20;

fn all_installed(programs: &[&str]) -> bool {
    if !openssl_installed() {
        return false;
    }
    programs.iter().all(|p| installed(p))
}

/// A process killed on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_until(what: &str, child: &mut Child, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what}: the process exited first ({status})");
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        sleep(Duration::from_millis(20));
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `uraid serve --listen=LISTEN --control=DIR/ctl.sock EXTRA MEMBERS`, its messages in
/// DIR/serve.log; returned once the control socket answers (the NBD socket is bound before it).
fn serve(dir: &Path, listen: &str, extra: &[String], members: &[String]) -> Daemon {
    let control = dir.join("ctl.sock");
    let log = File::create(dir.join("serve.log")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .arg("serve")
        .arg(format!("--listen={listen}"))
        .arg(format!("--control={}", control.display()))
        .args(extra)
        .args(members)
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    wait_until("uraid serve", &mut child, || UnixStream::connect(&control).is_ok());
    Daemon(child)
}

fn serve_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default()
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap_or_else(|e| panic!("run {program}: {e}"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An md raid1 of two 32 MiB files in `dir`, to serve.
fn raid1(dir: &Path) -> Vec<String> {
    let members: Vec<String> = (0..2).map(|i| image(dir, &format!("m{i}.img"), 32 * MIB)).collect();
    ok(&with(&["create", "--level=1", "--raid-devices=2"], &members));
    members
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    uraid_testkit::random_bytes(len as u64, seed)
}

#[test]
fn serve_with_psk_to_nbdinfo_and_nbdcopy() {
    if !all_installed(&["nbdinfo", "nbdcopy"]) {
        return;
    }
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let keys = d.join("keys.psk");
    let wrong = d.join("wrong.psk");
    write_psk_file(&keys, "alice");
    write_psk_file(&wrong, "alice");
    let members = raid1(d);
    let socket = d.join("nbd.sock");
    let _served = serve(
        d,
        &format!("unix:{}", socket.display()),
        &["--tls=require".into(), format!("--tls-psk={}", keys.display())],
        &members,
    );
    let tls_uri =
        |file: &Path| format!("nbds+unix://alice@/?socket={}&tls-psk-file={}", socket.display(), file.display());

    let info = run("nbdinfo", &[&tls_uri(&keys)]);
    assert!(info.status.success(), "{}", stderr(&info));
    let shown = String::from_utf8_lossy(&info.stdout);
    assert!(shown.contains("with TLS") && shown.contains("raid1"), "{shown}");

    // Copied in and out over TLS.
    let data = pattern(4 * MIB as usize, 1);
    let input = d.join("in.raw");
    std::fs::write(&input, &data).unwrap();
    let o = run("nbdcopy", &[input.to_str().unwrap(), &tls_uri(&keys)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let output = d.join("out.raw");
    let o = run("nbdcopy", &[&tls_uri(&keys), output.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(&output).unwrap()[..data.len()] == data[..], "read back over TLS differs");

    // A plain client and a wrong key are refused, and the server says why.
    let plain = run("nbdinfo", &[&format!("nbd+unix:///?socket={}", socket.display())]);
    assert!(!plain.status.success(), "a plain client was served: {}", String::from_utf8_lossy(&plain.stdout));
    let o = run("nbdinfo", &[&tls_uri(&wrong)]);
    assert!(!o.status.success(), "a wrong key was accepted");
    let log = serve_log(d);
    assert!(log.contains("TLS (PSK, TLSv1.3") && log.contains("PSK user \"alice\""), "{log}");
    assert!(log.contains("refused: this server requires TLS"), "{log}");
    assert!(log.contains("TLS handshake failed"), "{log}");
}

#[test]
fn serve_with_certificates_to_nbdinfo_and_qemu_img() {
    if !all_installed(&["nbdinfo", "qemu-img"]) {
        return;
    }
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let pki = make_pki(&d.join("pki"));
    let members = raid1(d);
    let port = free_port();
    let _served = serve(
        d,
        &format!("tcp:127.0.0.1:{port}"),
        &[
            "--tls=require".into(),
            format!("--tls-certificates={}", pki.server_dir.display()),
            "--tls-verify-peer".into(),
        ],
        &members,
    );
    // The server's certificate names localhost and 127.0.0.1.
    let size =
        run("nbdinfo", &["--size", &format!("nbds://localhost:{port}/?tls-certificates={}", pki.client_dir.display())]);
    assert!(size.status.success(), "{}", stderr(&size));
    let bytes: u64 = String::from_utf8_lossy(&size.stdout).trim().parse().expect("nbdinfo --size prints a number");
    assert!(bytes > 30 * MIB && bytes <= 32 * MIB, "{bytes}");

    let qemu = |creds_dir: &Path| {
        run(
            "qemu-img",
            &[
                "info",
                "--object",
                &format!("tls-creds-x509,id=tls0,endpoint=client,dir={}", creds_dir.display()),
                "--image-opts",
                &format!("driver=nbd,host=127.0.0.1,port={port},tls-creds=tls0"),
            ],
        )
    };
    let o = qemu(&pki.client_dir);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("file format: nbd"), "{}", String::from_utf8_lossy(&o.stdout));
    // No client certificate: --tls-verify-peer turns it away. Nor is a plain client served.
    assert!(!qemu(&pki.ca_only_dir).status.success(), "a client without a certificate was served");
    let plain = run("qemu-img", &["info", &format!("nbd://127.0.0.1:{port}")]);
    assert!(!plain.status.success());
    assert!(stderr(&plain).contains("requires TLS"), "the server's refusal reaches qemu: {}", stderr(&plain));
    let log = serve_log(d);
    assert!(log.contains("client certificate CN=uraid test client"), "{log}");
    assert!(log.contains("peer did not return a certificate"), "{log}");
}

#[test]
fn serve_with_psk_to_qemu_img() {
    if !all_installed(&["qemu-img"]) {
        return;
    }
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    // qemu reads DIR/keys.psk.
    let qemu_dir = d.join("qemu");
    std::fs::create_dir(&qemu_dir).unwrap();
    let keys = qemu_dir.join("keys.psk");
    write_psk_file(&keys, "qemu");
    let members = raid1(d);
    let port = free_port();
    let _served = serve(
        d,
        &format!("tcp:127.0.0.1:{port}"),
        &["--tls=on".into(), format!("--tls-psk={}", keys.display())],
        &members,
    );
    let o = run(
        "qemu-img",
        &[
            "info",
            "--object",
            &format!("tls-creds-psk,id=tls0,endpoint=client,dir={},username=qemu", qemu_dir.display()),
            "--image-opts",
            &format!("driver=nbd,host=127.0.0.1,port={port},tls-creds=tls0"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // --tls=on: a plain client is served too.
    let plain = run("qemu-img", &["info", &format!("nbd://127.0.0.1:{port}")]);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let log = serve_log(d);
    assert!(log.contains("PSK user \"qemu\"") && log.contains("over TLS"), "{log}");
}

/// `nbdkit --tls=require ARGS memory SIZE` on a Unix socket; its process and socket.
fn nbdkit_unix(dir: &Path, name: &str, tls_args: &[String]) -> (Daemon, PathBuf) {
    let socket = dir.join(format!("{name}.sock"));
    let mut child = Command::new("nbdkit")
        .args(["-f", "-U"])
        .arg(&socket)
        .arg("--tls=require")
        .args(tls_args)
        .args(["memory", &(64 * MIB).to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run nbdkit");
    wait_until("nbdkit's socket", &mut child, || socket.exists());
    (Daemon(child), socket)
}

/// `nbdkit --tls=require --tls-certificates=DIR memory SIZE` on a loopback port.
fn nbdkit_tcp_x509(pki: &Pki) -> (Daemon, u16) {
    let port = free_port();
    let mut child = Command::new("nbdkit")
        .args(["-f", "-i", "127.0.0.1", "-p", &port.to_string(), "--tls=require"])
        .arg(format!("--tls-certificates={}", pki.server_dir.display()))
        .args(["memory", &(64 * MIB).to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run nbdkit");
    wait_until("nbdkit's port", &mut child, || TcpStream::connect(("127.0.0.1", port)).is_ok());
    (Daemon(child), port)
}

/// `qemu-nbd` with a PSK file (`DIR/keys.psk`) serving a 64 MiB file on a Unix socket.
fn qemu_nbd_psk(dir: &Path, keys: &Path) -> (Daemon, PathBuf) {
    let creds = dir.join("qemu-creds");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::copy(keys, creds.join("keys.psk")).unwrap();
    let socket = dir.join("qemu.sock");
    let backing = image(dir, "qemu-backing.img", 64 * MIB);
    let mut child = Command::new("qemu-nbd")
        .args(["--persistent", "--shared=8", "--format=raw", "--socket"])
        .arg(&socket)
        .args(["--object", &format!("tls-creds-psk,id=tls0,endpoint=server,dir={}", creds.display())])
        .args(["--tls-creds", "tls0"])
        .arg(&backing)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run qemu-nbd");
    wait_until("qemu-nbd's socket", &mut child, || socket.exists());
    (Daemon(child), socket)
}

#[test]
fn raid5_over_nbds_members_end_to_end() {
    if !all_installed(&["nbdkit", "qemu-nbd", "nbdcopy"]) {
        return;
    }
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let keys = d.join("keys.psk");
    write_psk_file(&keys, "alice");
    let pki = make_pki(&d.join("pki"));
    let (_a, a_socket) = nbdkit_unix(d, "a", &[format!("--tls-psk={}", keys.display())]);
    let (_b, b_port) = nbdkit_tcp_x509(&pki);
    let (_c, c_socket) = qemu_nbd_psk(d, &keys);
    let members = vec![
        format!("nbds+unix://alice@/?socket={}&tls-psk-file={}", a_socket.display(), keys.display()),
        format!("nbds://localhost:{b_port}/?tls-certificates={}", pki.ca_only_dir.display()),
        format!("nbds+unix:///?socket={}&tls-psk-file={}&tls-username=alice", c_socket.display(), keys.display()),
    ];
    ok(&with(&["create", "--level=5", "--raid-devices=3", "--chunk=64K"], &members));

    let data = pattern(3 * MIB as usize + 777, 5);
    let o = uraid_stdin(&with(&["write", "--offset=4096"], &members), &data);
    assert!(o.status.success(), "{}", text(&o));
    let cat = |ms: &[String]| {
        let args = ["cat", "--offset=4096", &format!("--length={}", data.len())];
        ok(&with(&args, ms)).stdout
    };
    assert!(cat(&members) == data, "read back through three TLS members");
    assert!(cat(&[members[0].clone(), members[2].clone()]) == data, "rebuilt without the X.509 member");
    let examined = String::from_utf8(ok(&["examine", &members[1]]).stdout).unwrap();
    assert!(examined.contains("Raid Level : raid5"), "{examined}");
    // Members are named without their credentials.
    let detail = String::from_utf8(ok(&with(&["detail"], &members)).stdout).unwrap();
    assert!(detail.contains(&format!("nbds://localhost:{b_port}/")) && !detail.contains("tls-"), "{detail}");

    // The array served over TLS in its turn, its members over TLS too.
    let served_dir = d.join("served");
    std::fs::create_dir(&served_dir).unwrap();
    let socket = served_dir.join("nbd.sock");
    let _served = serve(
        &served_dir,
        &format!("unix:{}", socket.display()),
        &["--tls=require".into(), format!("--tls-psk={}", keys.display())],
        &members,
    );
    let out = d.join("array.raw");
    let o = run(
        "nbdcopy",
        &[
            &format!("nbds+unix://alice@/?socket={}&tls-psk-file={}", socket.display(), keys.display()),
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(&out).unwrap()[4096..4096 + data.len()] == data[..]);
}

#[test]
fn tls_options_that_do_not_add_up_are_refused() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let members = raid1(d);
    let keys = d.join("keys.psk");
    std::fs::write(&keys, "alice:00112233\n").unwrap();
    let bad = d.join("bad.psk");
    std::fs::write(&bad, "alice:00112233\nbob\n").unwrap();
    let refused = |args: &[&str], says: &str| {
        let o = uraid(&with(&[&["serve", "--listen=unix:/nonexistent/never.sock"][..], args].concat(), &members));
        assert!(!o.status.success(), "{args:?} was accepted");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    };
    let psk = format!("--tls-psk={}", keys.display());
    refused(&["--tls=require"], "need --tls-psk=FILE or --tls-certificates=DIR");
    refused(&[&psk], "without --tls");
    refused(&["--tls=off", &psk], "TLS turned off");
    refused(&["--tls=on", &psk, "--tls-verify-peer"], "needs --tls-certificates");
    refused(&["--tls=on", &format!("--tls-psk={}", bad.display())], "line 2: expected USERNAME:HEXKEY");
    refused(&["--tls=on", "--tls-certificates=/nonexistent"], "/nonexistent: not a folder");
    // Nothing was written: the members are still a clean array nobody started.
    let examined = String::from_utf8(ok(&["examine", &members[0]]).stdout).unwrap();
    assert!(examined.contains("State : clean"), "{examined}");
}
