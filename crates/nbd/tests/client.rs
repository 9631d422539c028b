//! The NBD client against servers: uraid's own (out-of-order completions, multi-conn, an unknown
//! export, a restart under the client, a server that stops answering) and nbdkit (structured
//! replies from another implementation, block size constraints enforced by its
//! blocksize-policy filter). The nbdkit cases are skipped, saying so, where nbdkit is missing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{pattern, start, temp_dir, wait_for, EXPORT_NAME};
use uraid_nbd::client::{ClientConfig, ClientError, ConnectError, HandshakeError, NbdClient, NbdUri};
use uraid_nbd::proto::FLAG_CAN_MULTI_CONN;
use uraid_nbd::testing::MemExport;
use uraid_nbd::ServerConfig;

fn unix_uri(socket: &Path, export: &str) -> NbdUri {
    NbdUri::parse(&format!("nbd+unix:///{export}?socket={}", socket.display())).unwrap()
}

fn quick() -> ClientConfig {
    ClientConfig {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
        reconnect_attempts: 4,
        reconnect_first_delay: Duration::from_millis(20),
        reconnect_max_delay: Duration::from_millis(200),
        reconnect_budget: Duration::from_secs(2),
        multi_conn: 4,
    }
}

#[test]
fn many_requests_in_flight_over_multi_conn_come_back_right() {
    for multi_conn in [false, true] {
        let export = MemExport::builder(1 << 20).multi_conn(multi_conn).max_delay(Duration::from_millis(2)).build();
        let running = start(export.clone(), common::config());
        let client = Arc::new(NbdClient::connect(&unix_uri(&running.path, EXPORT_NAME), quick()).unwrap());
        assert_eq!(client.info().size, 1 << 20);
        assert_eq!(client.info().has(FLAG_CAN_MULTI_CONN), multi_conn);
        assert_eq!(client.connections(), if multi_conn { 4 } else { 1 });
        // Eight threads, each writing and reading back its own 128 KiB, in odd-sized pieces.
        let workers: Vec<_> = (0..8u8)
            .map(|t| {
                let client = Arc::clone(&client);
                thread::spawn(move || {
                    let base = u64::from(t) * (128 << 10);
                    let data = pattern(128 << 10, t);
                    for (i, piece) in data.chunks(12_345).enumerate() {
                        let at = base + (i * 12_345) as u64;
                        client.write(at, &[&piece[..100], &piece[100..]], i % 2 == 0).unwrap();
                    }
                    let mut back = vec![0u8; data.len()];
                    client.read(base, &mut back).unwrap();
                    assert_eq!(back, data, "thread {t}");
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        client.flush().unwrap();
        let contents = export.contents();
        for t in 0..8u8 {
            let base = usize::from(t) * (128 << 10);
            assert_eq!(&contents[base..base + (128 << 10)], &pattern(128 << 10, t)[..]);
        }
        // Zeroing a range reads back as zeros, edges included.
        client.write_zeroes(1000, 70_000).unwrap();
        let mut back = vec![1u8; 72_000];
        client.read(0, &mut back).unwrap();
        assert!(back[1000..71_000].iter().all(|&b| b == 0));
        assert_eq!(&back[..1000], &pattern(128 << 10, 0)[..1000]);
        assert_eq!(&back[71_000..], &pattern(128 << 10, 0)[71_000..72_000]);
        // Past the end is refused before anything is sent.
        assert!(matches!(client.read((1 << 20) - 10, &mut [0; 20]), Err(ClientError::OutOfRange { .. })));
    }
}

#[test]
fn an_unknown_export_is_named_in_the_refusal() {
    let running = start(MemExport::builder(1 << 16).build(), common::config());
    let err = NbdClient::connect(&unix_uri(&running.path, "nosuch"), quick()).err().unwrap();
    assert!(
        matches!(&err, ClientError::Connect { source: ConnectError::Handshake(HandshakeError::UnknownExport { name, .. }), .. } if name == "nosuch"),
        "{err}"
    );
    assert!(err.to_string().contains("no export named \"nosuch\""), "{err}");
}

#[test]
fn nothing_listening_is_a_connect_error() {
    let dir = temp_dir("none");
    let err = NbdClient::connect(&unix_uri(&dir.join("absent.sock"), ""), quick()).err().unwrap();
    assert!(matches!(err, ClientError::Connect { source: ConnectError::Connect(_), .. }), "{err}");
    assert!(err.to_string().starts_with("cannot connect: "), "{err}");
}

#[test]
fn a_restarted_server_is_reconnected_and_a_vanished_one_is_gone() {
    let export = MemExport::builder(1 << 16).build();
    let mut running = start(export.clone(), common::config());
    let path = running.path.clone();
    let client = NbdClient::connect(&unix_uri(&path, EXPORT_NAME), quick()).unwrap();
    client.write(0, &[b"before"], false).unwrap();
    running.stop();
    drop(running);
    // A new server on the same socket path, serving the same bytes.
    let again = MemExport::builder(1 << 16).build();
    again.set_contents(&export.contents());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let listener = uraid_nbd::ListenAddr::Unix(path.clone()).bind().unwrap();
    let server = uraid_nbd::Server::new(again.clone(), common::config());
    let runner = server.clone();
    let run = thread::spawn(move || runner.run(listener));
    let mut back = [0u8; 6];
    client.read(0, &mut back).unwrap();
    assert_eq!(&back, b"before");
    client.write(6, &[b"after"], false).unwrap();
    assert_eq!(&again.contents()[..11], b"beforeafter");
    server.stop();
    run.join().unwrap().unwrap();
    let _ = std::fs::remove_file(&path);
    // Nobody listens now: the client tries a bounded number of times, then the export is gone,
    // and later requests fail at once.
    let started = Instant::now();
    let err = client.read(0, &mut back).unwrap_err();
    assert!(matches!(err, ClientError::Gone { attempts: 4, .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let started = Instant::now();
    assert!(matches!(client.read(0, &mut back), Err(ClientError::Gone { .. })));
    assert!(started.elapsed() < Duration::from_millis(100));
}

#[test]
fn a_silent_server_times_out() {
    let export = MemExport::builder(1 << 16).build();
    let running = start(export.clone(), common::config());
    let config = ClientConfig { request_timeout: Duration::from_millis(300), ..quick() };
    let client = NbdClient::connect(&unix_uri(&running.path, EXPORT_NAME), config).unwrap();
    export.hold();
    let started = Instant::now();
    let err = client.read(0, &mut [0u8; 512]).unwrap_err();
    assert!(matches!(err, ClientError::TimedOut { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));
    export.release();
    // The next request opens a new connection and works.
    client.write(0, &[b"x"], false).unwrap();
    assert!(wait_for(Duration::from_secs(5), || export.contents()[0] == b'x'));
}

#[test]
fn server_errors_reach_the_request_and_keep_the_connection() {
    let export = MemExport::builder(1 << 16).build();
    let running = start(export.clone(), ServerConfig { ..common::config() });
    let client = NbdClient::connect(&unix_uri(&running.path, EXPORT_NAME), quick()).unwrap();
    export.fail_range(Some((4096, 8192)));
    let err = client.read(4096, &mut [0u8; 100]).unwrap_err();
    assert!(matches!(err, ClientError::Server { .. }), "{err}");
    export.fail_range(None);
    client.read(4096, &mut [0u8; 100]).unwrap();
}

// ---- nbdkit ------------------------------------------------------------------------------------

struct Nbdkit {
    child: Child,
    socket: PathBuf,
}

impl Nbdkit {
    fn start(args: &[&str]) -> Option<Nbdkit> {
        if Command::new("nbdkit").arg("--version").output().is_err() {
            eprintln!("skipped: nbdkit is not installed");
            return None;
        }
        let socket = temp_dir("nbdkit").join("nbd.sock");
        let child = Command::new("nbdkit")
            .args(["-f", "-U"])
            .arg(&socket)
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("run nbdkit");
        // nbdkit listens as soon as the socket exists (a probing connection would only make
        // it log a broken handshake).
        assert!(wait_for(Duration::from_secs(10), || socket.exists()));
        Some(Nbdkit { child, socket })
    }
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn nbdkit_with_block_size_constraints_sees_only_aligned_requests() {
    // blocksize-error-policy=error makes nbdkit fail any request that breaks the constraints.
    let Some(kit) = Nbdkit::start(&[
        "--filter=blocksize-policy",
        "memory",
        "1M",
        "blocksize-minimum=4096",
        "blocksize-preferred=4096",
        "blocksize-maximum=65536",
        "blocksize-error-policy=error",
    ]) else {
        return;
    };
    let client = NbdClient::connect(&unix_uri(&kit.socket, ""), quick()).unwrap();
    let info = *client.info();
    assert_eq!((info.min_block, info.preferred_block, info.max_payload), (4096, 4096, 65536));
    assert!(info.structured);
    let data = pattern(300_000, 7);
    client.write(1234, &[&data[..5], &data[5..]], false).unwrap();
    client.write(0, &[b"head"], true).unwrap();
    let mut back = vec![0u8; 302_000];
    client.read(0, &mut back).unwrap();
    assert_eq!(&back[..4], b"head");
    assert!(back[4..1234].iter().all(|&b| b == 0));
    assert_eq!(&back[1234..301_234], &data[..]);
    client.write_zeroes(5000, 10_000).unwrap();
    client.trim(600_000, 9000).unwrap();
    client.flush().unwrap();
    let mut back = vec![0u8; 12_000];
    client.read(4000, &mut back).unwrap();
    assert_eq!(&back[..1000], &data[4000 - 1234..5000 - 1234]);
    assert!(back[1000..11_000].iter().all(|&b| b == 0));
    assert_eq!(&back[11_000..], &data[15_000 - 1234..16_000 - 1234]);
}

#[test]
fn nbdkit_killed_under_the_client_leaves_it_gone() {
    let Some(mut kit) = Nbdkit::start(&["memory", "1M"]) else { return };
    let client = NbdClient::connect(&unix_uri(&kit.socket, ""), quick()).unwrap();
    assert_eq!(client.connections(), 4, "nbdkit's memory plugin allows multi-conn");
    client.write(0, &[&[1u8; 4096]], false).unwrap();
    kit.child.kill().unwrap();
    kit.child.wait().unwrap();
    // The write fails: either the connection was already seen broken and reopening it failed,
    // or the write was sent on it and lost (writes are not sent again).
    let err = client.write(0, &[&[2u8; 4096]], false).unwrap_err();
    assert!(matches!(err, ClientError::Gone { .. } | ClientError::Lost { .. }), "{err}");
    let err = client.read(0, &mut [0u8; 4096]).unwrap_err();
    assert!(matches!(err, ClientError::Gone { .. }), "{err}");
    assert!(err.to_string().contains("the export is gone"), "{err}");
}

/// A fake server: a correct handshake, then `garbage` in answer to the first request, on every
/// connection it accepts (up to 16).
fn garbage_server(socket: &Path, garbage: &'static [u8]) -> thread::JoinHandle<()> {
    use std::io::{Read, Write};
    use uraid_nbd::proto::*;
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    thread::spawn(move || {
        for conn in listener.incoming().take(16) {
            let Ok(mut s) = conn else { return };
            let reply = |option, reply_type, data: &[u8]| {
                let mut b = OptionReplyHeader { option, reply_type, len: data.len() as u32 }.encode().to_vec();
                b.extend_from_slice(data);
                b
            };
            let mut b = [0u8; 4096];
            let _ = s.write_all(&encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES));
            let _ = s.read_exact(&mut b[..4]);
            let _ = s.read_exact(&mut b[..16]);
            let _ = s.write_all(&reply(OPT_STRUCTURED_REPLY, REP_ACK, &[]));
            let _ = s.read_exact(&mut b[..16]);
            let len = u32::from_be_bytes(b[12..16].try_into().unwrap()) as usize;
            let _ = s.read_exact(&mut b[..len]);
            let _ = s.write_all(&reply(OPT_GO, REP_INFO, &info_export(1 << 20, FLAG_HAS_FLAGS)));
            let _ = s.write_all(&reply(OPT_GO, REP_ACK, &[]));
            let _ = s.read_exact(&mut b[..REQUEST_HEADER_LEN]);
            let _ = s.write_all(garbage);
        }
    })
}

#[test]
fn a_server_sending_garbage_fails_the_request_cleanly() {
    let dir = temp_dir("garbage");
    let socket = dir.join("fake.sock");
    let _server = garbage_server(&socket, b"\x67\x44\x66\x98\0\0\0\0\xde\xad\xbe\xef\0\0\0\x01this is not a reply");
    let client = NbdClient::connect(&unix_uri(&socket, ""), quick()).unwrap();
    let started = Instant::now();
    let err = client.read(0, &mut [0u8; 4096]).unwrap_err();
    assert!(matches!(err, ClientError::Lost { .. }), "{err}");
    assert!(err.to_string().contains("no request in flight"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn nbdkit_without_structured_replies_is_read_through_simple_replies() {
    let Some(kit) = Nbdkit::start(&["--no-sr", "memory", "1M"]) else { return };
    let client = NbdClient::connect(&unix_uri(&kit.socket, ""), quick()).unwrap();
    assert!(!client.info().structured);
    let data = pattern(200_000, 9);
    client.write(777, &[&data], true).unwrap();
    let mut back = vec![0u8; data.len()];
    client.read(777, &mut back).unwrap();
    assert_eq!(back, data);
}
