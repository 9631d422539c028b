//! NBD over TLS: uraid's client against uraid's server, and against nbdkit and qemu-nbd (GnuTLS),
//! with pre-shared keys and with X.509 certificates; and what must fail, and how it says so: a
//! wrong key, an unknown user, an untrusted or misnamed server certificate, a missing client
//! certificate, a plain client at a server that requires TLS, a TLS client at a server without
//! it, and the server's answers to options sent before TLS.
//!
//! Credentials are made at test time with the `openssl` command. A test whose peer (nbdkit,
//! qemu-nbd, openssl) is not installed says so and passes without running.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{pattern, temp_dir, EXPORT_NAME};
use openssl::ssl::{SslConnector, SslMethod, SslStream};
use uraid_nbd::client::{ClientConfig, ClientError, ConnectError, HandshakeError, NbdClient, NbdUri};
use uraid_nbd::proto::*;
use uraid_nbd::testing::{MemExport, TestClient};
use uraid_nbd::tls::{ServerCredentials, ServerTls, TlsError, TlsMode};
use uraid_nbd::{ConnStats, EndReason, Server, ServerConfig, MAX_OPTION_DATA};
use uraid_testkit::tls_creds::{make_pki, openssl_installed, write_psk_file, Pki};

const MIB: usize = 1 << 20;

fn installed(program: &str) -> bool {
    let found = Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !found {
        eprintln!("skipped: {program} is not installed");
    }
    found
}

fn quick() -> ClientConfig {
    ClientConfig {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
        reconnect_attempts: 2,
        reconnect_first_delay: Duration::from_millis(20),
        reconnect_max_delay: Duration::from_millis(100),
        reconnect_budget: Duration::from_secs(1),
        multi_conn: 4,
    }
}

/// A PSK file for `alice`, and a second one giving her another key.
fn psk_files(dir: &Path) -> (PathBuf, PathBuf) {
    let good = dir.join("keys.psk");
    let wrong = dir.join("wrong.psk");
    write_psk_file(&good, "alice");
    write_psk_file(&wrong, "alice");
    (good, wrong)
}

/// A server on a Unix socket that reports how each of its connections ended.
struct Recorded {
    path: PathBuf,
    ended: Receiver<ConnStats>,
}

impl Recorded {
    fn connect(&self) -> TestClient<UnixStream> {
        let s = UnixStream::connect(&self.path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        TestClient::start_default(s).unwrap()
    }

    /// Waits for a connection to end in a way `want` accepts (others are passed over).
    fn wait_ended(&self, want: impl Fn(&EndReason) -> bool) -> EndReason {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.ended.recv_timeout(left) {
                Ok(stats) if want(&stats.reason) => return stats.reason,
                Ok(stats) => seen.push(stats.reason),
                Err(_) => break,
            }
        }
        panic!("no connection ended as expected; seen: {seen:?}");
    }
}

/// Serves `export` with `tls` (none: TLS off); the accepting thread lives as long as the tests.
fn serve(export: Arc<MemExport>, tls: Option<ServerTls>) -> Recorded {
    let path = temp_dir("tls-srv").join("nbd.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = Server::new(export, ServerConfig { tls, ..common::config() });
    let (tx, ended) = mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (server, tx) = (server.clone(), tx.clone());
            thread::spawn(move || {
                if let Ok(stats) = server.serve_connection(stream, "test client".into()) {
                    let _ = tx.send(stats);
                }
            });
        }
    });
    Recorded { path, ended }
}

fn tls_server(export: Arc<MemExport>, mode: TlsMode, credentials: ServerCredentials) -> Recorded {
    serve(export, Some(ServerTls::new(mode, &credentials).expect("server credentials")))
}

/// A server of `export` with X.509 credentials made in a fresh folder (see [`make_pki`]), checking
/// client certificates if `verify_peer`; `None` (the test is skipped) without the openssl command.
fn x509_server(tag: &str, export: Arc<MemExport>, mode: TlsMode, verify_peer: bool) -> Option<(Pki, Recorded)> {
    if !openssl_installed() {
        return None;
    }
    let pki = make_pki(&temp_dir(tag));
    let running = tls_server(export, mode, ServerCredentials::X509 { dir: pki.server_dir.clone(), verify_peer });
    Some((pki, running))
}

fn uri(text: &str) -> NbdUri {
    NbdUri::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Writes a pattern with FUA and without, flushes, and reads it back through `client`.
fn round_trip(client: &NbdClient, seed: u8) {
    let data = pattern(MIB, seed);
    client.write(0, &[&data[..MIB / 2]], true).unwrap();
    client.write((MIB / 2) as u64, &[&data[MIB / 2..]], false).unwrap();
    client.flush().unwrap();
    let mut back = vec![0u8; MIB];
    client.read(0, &mut back).unwrap();
    assert!(back == data, "data read back over TLS differs from what was written");
}

fn connect_error(r: Result<NbdClient, ClientError>) -> ConnectError {
    match r {
        Ok(_) => panic!("the connection was expected to fail"),
        Err(ClientError::Connect { source }) => source,
        Err(e) => panic!("expected a connection error, got {e}"),
    }
}

// ---- uraid's client against uraid's server -----------------------------------------------------

#[test]
fn psk_round_trip_and_refusals() {
    if !openssl_installed() {
        return;
    }
    let dir = temp_dir("tls-psk");
    let (good, wrong) = psk_files(&dir);
    let export = MemExport::builder(4 * MIB).multi_conn(true).build();
    let running = tls_server(export.clone(), TlsMode::Require, ServerCredentials::Psk { file: good.clone() });
    let socket = running.path.display().to_string();

    let client = NbdClient::connect(
        &uri(&format!("nbds+unix://alice@/{EXPORT_NAME}?socket={socket}&tls-psk-file={}", good.display())),
        quick(),
    )
    .unwrap();
    assert_eq!(client.connections(), 4, "every multi-conn connection runs its own TLS session");
    round_trip(&client, 1);
    assert_eq!(&export.contents()[..MIB], &pattern(MIB, 1)[..]);
    drop(client);

    // The user name from tls-username= works as USER@ does.
    let client = NbdClient::connect(
        &uri(&format!("nbds+unix:///?socket={socket}&tls-psk-file={}&tls-username=alice", good.display())),
        quick(),
    )
    .unwrap();
    let mut back = vec![0u8; 4096];
    client.read(0, &mut back).unwrap();
    assert_eq!(back, pattern(MIB, 1)[..4096]);
    drop(client);

    // Another key for alice: the handshake fails, and says what to check.
    let e = connect_error(NbdClient::connect(
        &uri(&format!("nbds+unix://alice@/?socket={socket}&tls-psk-file={}", wrong.display())),
        quick(),
    ));
    assert!(matches!(e, ConnectError::Tls(TlsError::Handshake { .. })), "{e}");
    let text = e.to_string();
    assert!(text.contains("TLS handshake failed") && text.contains("\"alice\""), "{text}");
    // The server's log says which kind of credentials failed.
    running.wait_ended(|r| matches!(r, EndReason::Tls(m) if m.contains("PSK authentication")));

    // A user the file does not have is refused before connecting.
    let e = connect_error(NbdClient::connect(
        &uri(&format!("nbds+unix://bob@/?socket={socket}&tls-psk-file={}", good.display())),
        quick(),
    ));
    assert!(matches!(e, ConnectError::Tls(TlsError::UnknownUser { .. })), "{e}");

    // A plain client is told to use nbds://, and the server logs it as refused.
    let e = connect_error(NbdClient::connect(&uri(&format!("nbd+unix:///?socket={socket}")), quick()));
    assert!(matches!(e, ConnectError::Handshake(HandshakeError::TlsRequired { .. })), "{e}");
    assert!(e.to_string().contains("nbds://"), "{e}");
    running.wait_ended(|r| matches!(r, EndReason::Refused(m) if m.contains("requires TLS")));
}

#[test]
fn x509_round_trip_and_certificate_checks() {
    let export = MemExport::builder(4 * MIB).build();
    let Some((pki, running)) = x509_server("tls-x509", export.clone(), TlsMode::Require, true) else { return };
    let socket = running.path.display().to_string();
    let with = |certs: &Path, extra: &str| {
        uri(&format!("nbds+unix:///?socket={socket}&tls-certificates={}{extra}", certs.display()))
    };

    // Over a Unix socket the chain is checked; with tls-hostname the name too.
    let client = NbdClient::connect(&with(&pki.client_dir, "&tls-hostname=localhost"), quick()).unwrap();
    round_trip(&client, 2);
    drop(client);

    let e = connect_error(NbdClient::connect(&with(&pki.client_dir, "&tls-hostname=elsewhere.example"), quick()));
    assert!(e.to_string().contains("certificate verify failed"), "{e}");
    assert!(e.to_string().contains("elsewhere.example"), "the hint names what was expected: {e}");

    let e = connect_error(NbdClient::connect(&with(&pki.other_ca_dir, ""), quick()));
    assert!(matches!(e, ConnectError::Tls(TlsError::Handshake { .. })), "{e}");
    assert!(e.to_string().contains("certificate verify failed"), "{e}");

    // The server checks clients (verify_peer): one without a certificate is turned away. In TLS
    // 1.3 that comes after the client's side of the handshake, as an alert the relay reads.
    let e = connect_error(NbdClient::connect(&with(&pki.ca_only_dir, ""), quick()));
    assert!(matches!(e, ConnectError::Tls(TlsError::EndedAfterHandshake { .. })), "{e}");
    assert!(e.to_string().contains("certificate required") && e.to_string().contains("client-cert.pem"), "{e}");
    running.wait_ended(|r| matches!(r, EndReason::Tls(m) if m.contains("certificate") && m.contains("X.509")));
}

#[test]
fn verify_peer_false_accepts_an_untrusted_server_and_on_mode_serves_both() {
    let Some((pki, running)) = x509_server("tls-on", MemExport::builder(2 * MIB).build(), TlsMode::On, false) else {
        return;
    };
    let socket = running.path.display().to_string();
    let untrusted =
        format!("nbds+unix:///?socket={socket}&tls-certificates={}&tls-verify-peer=false", pki.other_ca_dir.display());
    round_trip(&NbdClient::connect(&uri(&untrusted), quick()).unwrap(), 3);
    // TLS offered, not required: a plain client is served too, and sees the same data.
    let plain = NbdClient::connect(&uri(&format!("nbd+unix:///?socket={socket}")), quick()).unwrap();
    let mut back = vec![0u8; MIB];
    plain.read(0, &mut back).unwrap();
    assert_eq!(back, pattern(MIB, 3));
}

#[test]
fn an_nbds_uri_never_falls_back_to_plain_text() {
    let export = MemExport::builder(MIB).build();
    let running = serve(export.clone(), None);
    let dir = temp_dir("tls-none");
    let psk = dir.join("keys.psk");
    std::fs::write(&psk, "alice:00112233445566778899aabbccddeeff\n").unwrap();
    let e = connect_error(NbdClient::connect(
        &uri(&format!("nbds+unix://alice@/?socket={}&tls-psk-file={}", running.path.display(), psk.display())),
        quick(),
    ));
    assert!(matches!(e, ConnectError::Handshake(HandshakeError::TlsRefused { .. })), "{e}");
    assert!(e.to_string().contains("never served in plain text"), "{e}");
    assert_eq!(export.submitted(), 0, "nothing was sent in the clear");
}

#[test]
fn options_before_tls_are_answered_tls_required() {
    if !openssl_installed() {
        return;
    }
    let dir = temp_dir("tls-options");
    let (good, _) = psk_files(&dir);
    let running = tls_server(MemExport::builder(MIB).build(), TlsMode::Require, ServerCredentials::Psk { file: good });

    let mut c = running.connect();
    for option in [OPT_LIST, OPT_STRUCTURED_REPLY, OPT_INFO, OPT_GO, 42] {
        let data = if option == OPT_INFO || option == OPT_GO {
            InfoRequest { name: EXPORT_NAME.as_bytes().to_vec(), requests: vec![] }.encode()
        } else {
            Vec::new()
        };
        let replies = c.option(option, &data).unwrap();
        assert_eq!(replies.len(), 1, "{}", option_name(option));
        assert_eq!(replies[0].reply_type, REP_ERR_TLS_REQD, "{}", option_name(option));
        assert!(String::from_utf8_lossy(&replies[0].data).contains("requires TLS"));
    }
    // However long the option.
    let replies = c.option(OPT_LIST, &vec![0; MAX_OPTION_DATA + 1]).unwrap();
    assert_eq!(replies[0].reply_type, REP_ERR_TLS_REQD, "an oversized option before TLS");
    // STARTTLS carries no data.
    let replies = c.option(OPT_STARTTLS, b"x").unwrap();
    assert_eq!(replies[0].reply_type, REP_ERR_INVALID);
    // ABORT is still answered.
    assert_eq!(c.option(OPT_ABORT, &[]).unwrap()[0].reply_type, REP_ACK);

    // NBD_OPT_EXPORT_NAME cannot be refused with an error: the server closes.
    let mut c = running.connect();
    assert!(c.export_name(EXPORT_NAME).is_err(), "the server must close rather than serve in plain text");
    running.wait_ended(|r| matches!(r, EndReason::Refused(m) if m.contains("NBD_OPT_EXPORT_NAME")));

    // STARTTLS is acknowledged; then the server waits for a TLS handshake.
    let mut c = running.connect();
    let replies = c.option(OPT_STARTTLS, &[]).unwrap();
    assert_eq!((replies[0].reply_type, replies[0].data.len()), (REP_ACK, 0));
}

#[test]
fn bytes_after_starttls_before_the_acknowledgement_end_the_connection() {
    if !openssl_installed() {
        return;
    }
    let dir = temp_dir("tls-inject");
    let (good, _) = psk_files(&dir);
    let running = tls_server(MemExport::builder(MIB).build(), TlsMode::Require, ServerCredentials::Psk { file: good });
    let mut c = running.connect();
    // STARTTLS and one more byte in one write, so both are in the server's buffer when it reads
    // the option: a byte there would be plaintext injected ahead of the TLS session (the attack
    // of nbdkit's CVE-2021-3716).
    let mut b = OptionHeader { option: OPT_STARTTLS, len: 0 }.encode().to_vec();
    b.push(0x16);
    c.stream().write_all(&b).unwrap();
    let reason = running.wait_ended(|r| matches!(r, EndReason::ProtocolError(_)));
    let EndReason::ProtocolError(message) = reason else { unreachable!() };
    assert!(message.contains("after NBD_OPT_STARTTLS"), "{message}");
}

#[test]
fn starttls_inside_tls_is_refused_and_the_session_goes_on() {
    let Some((pki, running)) = x509_server("tls-again", MemExport::builder(MIB).build(), TlsMode::Require, false)
    else {
        return;
    };
    let mut c = running.connect();
    assert_eq!(c.option(OPT_STARTTLS, &[]).unwrap()[0].reply_type, REP_ACK);
    let mut connector = SslConnector::builder(SslMethod::tls_client()).unwrap();
    connector.set_ca_file(pki.client_dir.join("ca-cert.pem")).unwrap();
    let mut tls = connector.build().connect("localhost", c.into_stream()).expect("TLS handshake");
    let ask = |tls: &mut SslStream<UnixStream>, option: u32| -> (u32, Vec<u8>) {
        tls.write_all(&OptionHeader { option, len: 0 }.encode()).unwrap();
        let mut h = [0u8; OPTION_REPLY_HEADER_LEN];
        tls.read_exact(&mut h).unwrap();
        let h = OptionReplyHeader::decode(&h).unwrap();
        assert_eq!(h.option, option);
        let mut data = vec![0; h.len as usize];
        tls.read_exact(&mut data).unwrap();
        (h.reply_type, data)
    };
    let (reply_type, data) = ask(&mut tls, OPT_STARTTLS);
    assert_eq!(reply_type, REP_ERR_INVALID, "a second NBD_OPT_STARTTLS");
    assert!(String::from_utf8_lossy(&data).contains("already in use"), "{}", String::from_utf8_lossy(&data));
    // The session is still good: options are answered inside TLS.
    let (reply_type, _) = ask(&mut tls, OPT_STRUCTURED_REPLY);
    assert_eq!(reply_type, REP_ACK);
}

/// A copy of the folder `from` at `to`, but for the files `leave_out`.
fn copy_folder(from: &Path, to: &Path, leave_out: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if !leave_out.iter().any(|name| entry.file_name() == *name) {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

fn server_credentials_error(dir: &Path) -> TlsError {
    match ServerTls::new(TlsMode::Require, &ServerCredentials::X509 { dir: dir.to_path_buf(), verify_peer: true }) {
        Ok(_) => panic!("the server credentials in {} were expected to be refused", dir.display()),
        Err(e) => e,
    }
}

#[test]
fn certificate_folders_that_cannot_work_are_refused_naming_the_file() {
    if !openssl_installed() {
        return;
    }
    let dir = temp_dir("tls-folders");
    let pki = make_pki(&dir);

    // A revocation list uraid cannot check: refused on both sides rather than ignored.
    let with_crl = dir.join("server-with-crl");
    copy_folder(&pki.server_dir, &with_crl, &[]);
    std::fs::write(with_crl.join("ca-crl.pem"), "").unwrap();
    let e = server_credentials_error(&with_crl);
    assert!(matches!(e, TlsError::Credentials { .. }), "{e}");
    assert!(
        e.to_string().contains("ca-crl.pem") && e.to_string().contains("revocation lists are not supported"),
        "{e}"
    );
    let client_with_crl = dir.join("client-with-crl");
    copy_folder(&pki.client_dir, &client_with_crl, &[]);
    std::fs::write(client_with_crl.join("ca-crl.pem"), "").unwrap();
    let e = connect_error(NbdClient::connect(
        &uri(&format!("nbds+unix:///?socket=/nonexistent&tls-certificates={}", client_with_crl.display())),
        quick(),
    ));
    assert!(matches!(e, ConnectError::Tls(TlsError::Credentials { .. })), "{e}");
    assert!(e.to_string().contains("ca-crl.pem"), "{e}");

    // A client certificate without its key.
    let no_key = dir.join("client-without-key");
    copy_folder(&pki.client_dir, &no_key, &["client-key.pem"]);
    let e = connect_error(NbdClient::connect(
        &uri(&format!("nbds+unix:///?socket=/nonexistent&tls-certificates={}", no_key.display())),
        quick(),
    ));
    assert!(matches!(e, ConnectError::Tls(TlsError::HalfKeyPair { .. })), "{e}");
    let expected = format!("client-cert.pem without client-key.pem in {}", no_key.display());
    assert!(e.to_string().contains(&expected), "{e}");

    // A server key that is not the certificate's (the client's key in its place).
    let mismatched = dir.join("server-wrong-key");
    copy_folder(&pki.server_dir, &mismatched, &["server-key.pem"]);
    std::fs::copy(pki.client_dir.join("client-key.pem"), mismatched.join("server-key.pem")).unwrap();
    let e = server_credentials_error(&mismatched);
    assert!(matches!(e, TlsError::Credentials { .. }), "{e}");
    assert!(e.to_string().contains("server-key.pem"), "{e}");
}

#[test]
fn starttls_at_a_server_without_tls_is_unsupported_and_the_session_goes_on() {
    let running = serve(MemExport::builder(MIB).build(), None);
    let mut c = running.connect();
    let replies = c.option(OPT_STARTTLS, &[]).unwrap();
    assert_eq!(replies[0].reply_type, REP_ERR_UNSUP);
    c.go(EXPORT_NAME, &[]).unwrap();
    assert_eq!(c.read(0, 512).unwrap().error, 0);
}

// ---- uraid's client against nbdkit and qemu-nbd ------------------------------------------------

/// A server process, killed on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_socket(socket: &Path, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the server exited early: {status}");
        }
        assert!(Instant::now() < deadline, "timed out waiting for {}", socket.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `nbdkit --tls=require TLS_ARGS memory 64M` on a Unix socket in `dir`.
fn nbdkit(dir: &Path, tls_args: &[String]) -> (Daemon, PathBuf) {
    let socket = dir.join("nbdkit.sock");
    let mut child = Command::new("nbdkit")
        .args(["-f", "-U"])
        .arg(&socket)
        .arg("--tls=require")
        .args(tls_args)
        .args(["memory", "64M"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run nbdkit");
    wait_for_socket(&socket, &mut child);
    (Daemon(child), socket)
}

/// `qemu-nbd` serving a 64 MiB file with the TLS object `object` (whose id is tls0).
fn qemu_nbd(dir: &Path, object: &str) -> (Daemon, PathBuf) {
    let socket = dir.join("qemu.sock");
    let image = dir.join("q.img");
    std::fs::File::create(&image).unwrap().set_len(64 << 20).unwrap();
    let mut child = Command::new("qemu-nbd")
        .args(["--persistent", "--shared=8", "-f", "raw", "-k"])
        .arg(&socket)
        .args(["--object", object, "--tls-creds", "tls0"])
        .arg(&image)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run qemu-nbd");
    wait_for_socket(&socket, &mut child);
    (Daemon(child), socket)
}

fn peers_ready(peer: &str) -> Option<(PathBuf, PathBuf, PathBuf, Pki)> {
    if !installed(peer) {
        return None;
    }
    if !openssl_installed() {
        return None;
    }
    let dir = temp_dir(&format!("tls-{peer}"));
    let (good, wrong) = psk_files(&dir);
    let pki = make_pki(&dir);
    Some((dir, good, wrong, pki))
}

#[test]
fn nbdkit_with_psk_and_with_certificates() {
    let Some((dir, good, wrong, pki)) = peers_ready("nbdkit") else { return };
    let psk_dir = dir.join("psk");
    std::fs::create_dir_all(&psk_dir).unwrap();
    let (_nbdkit, socket) = nbdkit(&psk_dir, &[format!("--tls-psk={}", good.display())]);
    let s = socket.display();
    let client =
        NbdClient::connect(&uri(&format!("nbds+unix://alice@/?socket={s}&tls-psk-file={}", good.display())), quick())
            .unwrap();
    round_trip(&client, 4);
    drop(client);
    let e = connect_error(NbdClient::connect(
        &uri(&format!("nbds+unix://alice@/?socket={s}&tls-psk-file={}", wrong.display())),
        quick(),
    ));
    assert!(e.to_string().contains("TLS handshake failed"), "{e}");
    let e = connect_error(NbdClient::connect(&uri(&format!("nbd+unix:///?socket={s}")), quick()));
    assert!(matches!(e, ConnectError::Handshake(HandshakeError::TlsRequired { .. })), "{e}");
    assert!(e.to_string().contains("nbds://"), "{e}");

    let x509_dir = dir.join("x509");
    std::fs::create_dir_all(&x509_dir).unwrap();
    let (_nbdkit, socket) =
        nbdkit(&x509_dir, &[format!("--tls-certificates={}", pki.server_dir.display()), "--tls-verify-peer".into()]);
    let s = socket.display();
    let certs = |d: &Path| format!("nbds+unix:///?socket={s}&tls-hostname=localhost&tls-certificates={}", d.display());
    round_trip(&NbdClient::connect(&uri(&certs(&pki.client_dir)), quick()).unwrap(), 5);
    let e = connect_error(NbdClient::connect(&uri(&certs(&pki.other_ca_dir)), quick()));
    assert!(e.to_string().contains("certificate verify failed"), "{e}");
}

#[test]
fn nbdkit_over_tcp_checks_the_host_name() {
    let Some((dir, _, _, pki)) = peers_ready("nbdkit") else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new("nbdkit")
        .args(["-f", "-i", "127.0.0.1", "-p", &port.to_string(), "--tls=require"])
        .arg(format!("--tls-certificates={}", pki.server_dir.display()))
        .args(["memory", "64M"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run nbdkit");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "nbdkit exited early");
        assert!(Instant::now() < deadline, "timed out waiting for nbdkit's port");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _nbdkit = Daemon(child);
    let _ = dir;
    let ca = pki.ca_only_dir.display();
    // The certificate names localhost and 127.0.0.1; both work as the URI's host.
    for host in ["localhost", "127.0.0.1"] {
        round_trip(
            &NbdClient::connect(&uri(&format!("nbds://{host}:{port}/?tls-certificates={ca}")), quick()).unwrap(),
            6,
        );
    }
    let e = connect_error(NbdClient::connect(
        &uri(&format!("nbds://127.0.0.1:{port}/?tls-certificates={ca}&tls-hostname=not-this-one")),
        quick(),
    ));
    assert!(e.to_string().contains("certificate verify failed"), "{e}");
}

#[test]
fn qemu_nbd_with_psk_and_with_certificates() {
    let Some((dir, good, wrong, pki)) = peers_ready("qemu-nbd") else { return };
    // qemu reads its PSK file as DIR/keys.psk.
    let psk_dir = dir.join("qemu-psk");
    std::fs::create_dir_all(&psk_dir).unwrap();
    std::fs::copy(&good, psk_dir.join("keys.psk")).unwrap();
    let (_qemu, socket) =
        qemu_nbd(&psk_dir, &format!("tls-creds-psk,id=tls0,endpoint=server,dir={}", psk_dir.display()));
    let s = socket.display();
    round_trip(
        &NbdClient::connect(&uri(&format!("nbds+unix://alice@/?socket={s}&tls-psk-file={}", good.display())), quick())
            .unwrap(),
        7,
    );
    let e = connect_error(NbdClient::connect(
        &uri(&format!("nbds+unix://alice@/?socket={s}&tls-psk-file={}", wrong.display())),
        quick(),
    ));
    assert!(e.to_string().contains("TLS handshake failed"), "{e}");
    let e = connect_error(NbdClient::connect(&uri(&format!("nbd+unix:///?socket={s}")), quick()));
    assert!(matches!(e, ConnectError::Handshake(HandshakeError::TlsRequired { .. })), "{e}");

    // qemu's X.509 server checks client certificates by default (verify-peer=on).
    let x509_dir = dir.join("qemu-x509");
    std::fs::create_dir_all(&x509_dir).unwrap();
    let (_qemu, socket) =
        qemu_nbd(&x509_dir, &format!("tls-creds-x509,id=tls0,endpoint=server,dir={}", pki.server_dir.display()));
    let s = socket.display();
    let certs = |d: &Path| format!("nbds+unix:///?socket={s}&tls-hostname=localhost&tls-certificates={}", d.display());
    round_trip(&NbdClient::connect(&uri(&certs(&pki.client_dir)), quick()).unwrap(), 8);
    let e = connect_error(NbdClient::connect(&uri(&certs(&pki.ca_only_dir)), quick()));
    assert!(matches!(e, ConnectError::Tls(TlsError::EndedAfterHandshake { .. })), "without a client certificate: {e}");
}
