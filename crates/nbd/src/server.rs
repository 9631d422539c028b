//! The server: the accept loop, stopping, and a thread per connection with its closing log line.
//! Its configuration ([`ServerConfig`]) and what a connection reports ([`ConnStats`],
//! [`EndReason`]) are defined beside it and re-exported here.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::addr::{Accepted, Listener, SocketFileGuard};
use crate::budget::ServerBudget;
use crate::config::{valid_preferred, Settings};
use crate::conn::{self, ConnControl};
use crate::export::Export;
use crate::log::log;
use crate::stream::Stream;

pub use crate::config::{ServerConfig, DEFAULT_MAX_PAYLOAD, MAX_PAYLOAD_CEILING};
pub use crate::outcome::{ConnStats, EndReason};

/// An NBD server for one export. Clones share everything, so one clone can run the accept loop
/// while another calls [`Server::stop`].
#[derive(Clone)]
pub struct Server {
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
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
        let preferred = valid_preferred(export.preferred_block_size());
        config.max_payload = config.max_payload.clamp(preferred.min(MAX_PAYLOAD_CEILING), MAX_PAYLOAD_CEILING);
        config.max_inflight_requests = config.max_inflight_requests.max(1);
        Server {
            inner: Arc::new(Inner {
                settings: Settings {
                    budget: Arc::new(ServerBudget::new(config.max_server_inflight_bytes)),
                    export,
                    config,
                },
                stopping: AtomicBool::new(false),
                connections: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
                accepted: AtomicU64::new(1),
            }),
        }
    }

    /// The configuration in effect, after the adjustments [`Server::new`] makes.
    pub fn config(&self) -> &ServerConfig {
        &self.inner.settings.config
    }

    /// Serves one already-accepted connection until the client disconnects or the server stops.
    /// Only failing to set the socket up is an error; how the connection ended is in the stats.
    pub fn serve_connection<S: Stream>(&self, stream: S, peer: String) -> io::Result<ConnStats> {
        stream.prepare()?;
        let control = stream.try_clone()?;
        let writer = stream.try_clone()?;
        let conn = Arc::new(conn::Conn::new(Box::new(control), Arc::clone(&self.inner.settings.budget)));
        let _registration = self.register(conn.clone());
        let stats = conn::serve(&self.inner.settings, &conn, stream, writer, &peer);
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
