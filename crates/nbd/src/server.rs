//! The server: configuration, the accept loop, stopping, and the per-connection log lines.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::addr::{Accepted, Listener, SocketFileGuard};
use crate::conn::{self, ConnControl};
use crate::export::Export;
use crate::stream::Stream;

/// Default largest READ/WRITE payload: 2^25, the size the spec says clients may always use.
pub const DEFAULT_MAX_PAYLOAD: u32 = 32 << 20;

/// Largest `max_payload` accepted; bigger values are lowered to it so that a read reply always fits
/// one structured chunk (whose length field must also hold the 8-byte offset).
pub const MAX_PAYLOAD_CEILING: u32 = 1 << 30;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The export's name. Clients may also ask for "" (the default export) and get this one.
    pub export_name: String,
    /// Shown by `NBD_OPT_LIST` and `NBD_INFO_DESCRIPTION`.
    pub description: Option<String>,
    /// Largest READ/WRITE length, advertised as the maximum block size.
    pub max_payload: u32,
    /// Per connection, the reader stops taking requests while the reads and writes it has
    /// submitted but not yet answered add up to more than this (one request is always allowed).
    pub max_inflight_bytes: u64,
    /// Per connection, the most requests submitted but not yet answered.
    pub max_inflight_requests: usize,
    /// When a connection is closing and its replies have not moved for this long because the
    /// client stopped reading them, the socket is shut down instead of waiting forever.
    pub stalled_client_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            export_name: String::new(),
            description: None,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_inflight_bytes: 64 << 20,
            max_inflight_requests: 512,
            stalled_client_timeout: Duration::from_secs(30),
        }
    }
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndReason {
    /// EOF or a reset from the client without `NBD_CMD_DISC`.
    ClientDisconnected,
    /// The client sent `NBD_CMD_DISC`.
    Disconnect,
    /// The client sent `NBD_OPT_ABORT` during the handshake.
    Aborted,
    /// The client broke the protocol; the text says how.
    ProtocolError(String),
    /// The server refused what the client asked for in a way the protocol can only answer by
    /// closing (an unknown name in `NBD_OPT_EXPORT_NAME`).
    Refused(String),
    /// [`Server::stop`] was called.
    ServerStop,
    /// A socket error other than the client going away.
    Io(String),
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndReason::ClientDisconnected => f.write_str("client disconnected"),
            EndReason::Disconnect => f.write_str("client sent NBD_CMD_DISC"),
            EndReason::Aborted => f.write_str("client sent NBD_OPT_ABORT"),
            EndReason::ProtocolError(m) => write!(f, "protocol error: {m}"),
            EndReason::Refused(m) => write!(f, "refused: {m}"),
            EndReason::ServerStop => f.write_str("server stopping"),
            EndReason::Io(m) => write!(f, "I/O error: {m}"),
        }
    }
}

/// What one connection did, returned when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnStats {
    /// The export name the client asked for, if it got as far as choosing one.
    pub export: Option<String>,
    pub structured_replies: bool,
    /// Requests answered (every reply written, errors included).
    pub requests: u64,
    /// Bytes of read data sent to the client.
    pub bytes_read: u64,
    /// Bytes of write data the export accepted.
    pub bytes_written: u64,
    pub reason: EndReason,
}

/// An NBD server for one export. Clones share everything, so one clone can run the accept loop
/// while another calls [`Server::stop`].
#[derive(Clone)]
pub struct Server {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub export: Arc<dyn Export>,
    pub config: ServerConfig,
    /// The export's preferred block size made valid for `NBD_INFO_BLOCK_SIZE`.
    pub preferred_block_size: u32,
    stopping: AtomicBool,
    connections: Mutex<HashMap<u64, Arc<dyn ConnControl>>>,
    next_id: AtomicU64,
    /// Numbers accepted Unix connections, whose peers have no address to log.
    accepted: AtomicU64,
}

impl Server {
    /// Values the protocol cannot carry are adjusted rather than refused: the preferred block size
    /// is raised to a power of two of at least 512, and `max_payload` is kept between that and
    /// [`MAX_PAYLOAD_CEILING`] (the spec wants the maximum block size no smaller than the
    /// preferred one).
    pub fn new(export: Arc<dyn Export>, mut config: ServerConfig) -> Server {
        let preferred = export.preferred_block_size().max(512).checked_next_power_of_two().unwrap_or(1 << 31);
        config.max_payload = config.max_payload.clamp(preferred.min(MAX_PAYLOAD_CEILING), MAX_PAYLOAD_CEILING);
        config.max_inflight_requests = config.max_inflight_requests.max(1);
        Server {
            inner: Arc::new(Inner {
                export,
                config,
                preferred_block_size: preferred,
                stopping: AtomicBool::new(false),
                connections: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
                accepted: AtomicU64::new(1),
            }),
        }
    }

    /// The configuration in effect, after the adjustments [`Server::new`] makes.
    pub fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

    /// Serves one already-accepted connection until the client disconnects or the server stops.
    /// Only failing to set the socket up is an error; how the connection ended is in the stats.
    pub fn serve_connection<S: Stream>(&self, stream: S, peer: String) -> io::Result<ConnStats> {
        stream.prepare()?;
        let control = stream.try_clone()?;
        let writer = stream.try_clone()?;
        let conn = Arc::new(conn::Conn::new(control));
        let _registration = self.register(conn.clone());
        let stats = conn::serve(&self.inner, &conn, stream, writer, &peer);
        log(format_args!(
            "{peer}: closed ({}): {} requests, {} bytes read, {} bytes written",
            stats.reason, stats.requests, stats.bytes_read, stats.bytes_written
        ));
        Ok(stats)
    }

    /// Accepts connections on `listener`, each served on its own thread, until [`Server::stop`];
    /// then stops accepting, lets every connection answer the requests it has already read, closes
    /// them, removes the Unix socket file, and returns.
    pub fn run(&self, listener: Listener) -> io::Result<()> {
        let _socket_file = SocketFileGuard::new(&listener);
        // Non-blocking so that a connection that vanishes between poll and accept cannot wedge
        // the loop; poll's timeout is what notices stop().
        listener.set_nonblocking(true)?;
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        let mut accept_error_logged = false;
        while !self.is_stopping() {
            if !wait_readable(&listener, Duration::from_millis(100))? {
                continue;
            }
            match listener.accept() {
                Ok(accepted) => {
                    accept_error_logged = false;
                    threads.retain(|t| !t.is_finished());
                    if let Some(t) = self.spawn_connection(accepted) {
                        threads.push(t);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors or memory, or a connection reset before it was accepted:
                    // none of these should end the server, but retrying at once would spin.
                    if !accept_error_logged {
                        log(format_args!("accept failed: {e} (retrying)"));
                        accept_error_logged = true;
                    }
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
        drop(listener);
        // Connections accepted just before the flag was seen may have registered after stop()
        // walked the list; a second pass reaches them.
        self.stop();
        for t in threads {
            if t.join().is_err() {
                log(format_args!("a connection thread panicked"));
            }
        }
        Ok(())
    }

    /// Asks the server to stop: [`Server::run`] stops accepting, and every connection stops
    /// reading requests, answers the ones already read, and closes. Returns at once; `run`
    /// returns when all that is done. Stopping is permanent.
    pub fn stop(&self) {
        self.inner.stopping.store(true, Ordering::SeqCst);
        let connections: Vec<_> = self.inner.connections.lock().unwrap().values().cloned().collect();
        for c in connections {
            c.stop();
        }
    }

    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::SeqCst)
    }

    /// Connections currently being served (handshake or transmission).
    pub fn active_connections(&self) -> usize {
        self.inner.connections.lock().unwrap().len()
    }

    fn register(&self, conn: Arc<dyn ConnControl>) -> Registration<'_> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let mut connections = self.inner.connections.lock().unwrap();
        connections.insert(id, conn.clone());
        // stop() sets the flag before taking the lock, so a connection registered after stop()
        // walked the list sees the flag here.
        if self.is_stopping() {
            conn.stop();
        }
        Registration { server: self, id }
    }

    fn spawn_connection(&self, accepted: Accepted) -> Option<JoinHandle<()>> {
        let server = self.clone();
        let id = self.inner.accepted.fetch_add(1, Ordering::Relaxed);
        let spawned = thread::Builder::new().name(format!("nbd-conn-{id}")).spawn(move || {
            let result = match accepted {
                Accepted::Unix(s) => server.serve_connection(s, format!("unix client {id}")),
                Accepted::Tcp(s, peer) => server.serve_connection(s, peer.to_string()),
            };
            if let Err(e) = result {
                log(format_args!("could not set up a connection: {e}"));
            }
        });
        match spawned {
            Ok(t) => Some(t),
            Err(e) => {
                log(format_args!("could not start a connection thread: {e}"));
                None
            }
        }
    }
}

struct Registration<'a> {
    server: &'a Server,
    id: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.server.inner.connections.lock().unwrap().remove(&self.id);
    }
}

/// Waits until the listener has a connection to accept or `timeout` passes.
fn wait_readable(listener: &Listener, timeout: Duration) -> io::Result<bool> {
    let mut fd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, and the descriptor stays open for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, timeout.as_millis() as libc::c_int) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(n > 0)
}

/// Every line the server prints goes through here, so that sending them elsewhere (syslog, a
/// file, a test's capture) is a change in one place.
pub(crate) fn log(line: fmt::Arguments<'_>) {
    eprintln!("uraid-nbd: {line}");
}
