//! One connection in the transmission phase: requests written by whichever thread makes them,
//! replies read by one reader thread that hands each to its request by handle, so any number of
//! requests are in flight at once.
//!
//! A connection is either up or broken for good. It breaks when the stream ends or fails, when a
//! reply breaks the protocol, or when a request gets no answer within its timeout (its fate is
//! unknown then, and so is the stream's position); every request still waiting fails with the
//! reason, and the client above opens a new connection.

use std::collections::HashMap;
use std::io::{self, BufReader, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::handshake::{greet, negotiate, start_tls, ExportInfo, HandshakeError};
use super::reply::{read_body, read_header, InFlight, Outcome, ReplyError, ServerError};
use super::socket::Socket;
use super::uri::NbdUri;
use crate::proto::*;
use crate::tls::{ClientTls, TlsError};

/// Payloads up to this size go out in the same write as their header (one packet for small
/// writes); larger ones follow it piece by piece, uncopied.
const COALESCE_LIMIT: usize = 16 << 10;

/// The reader's buffer: reply headers are small, and a read's data goes through it in large
/// pieces anyway.
const READ_BUFFER: usize = 256 << 10;

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot connect: {0}")]
    Connect(io::Error),
    #[error(transparent)]
    Handshake(#[from] HandshakeError),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Why a request made on a connection did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The connection broke before the reply came; the request may or may not have been done.
    #[error("connection lost: {0}")]
    Lost(String),
    /// No reply within the timeout: this request's, or another's on the same connection (the
    /// server stopped answering), which ended the connection.
    #[error("no reply within {0:?}")]
    TimedOut(Duration),
    #[error(transparent)]
    Server(#[from] ServerError),
}

/// Why a connection ended, as the requests still waiting on it hear it.
#[derive(Debug, Clone)]
struct Broken {
    reason: String,
    /// The server stopped answering (a request timed out): the others waiting on it would
    /// not be answered either.
    silent: Option<Duration>,
}

type ReplySender = mpsc::SyncSender<Result<Outcome, Broken>>;

struct Waiting {
    /// `None` while the reader is filling it in from a reply.
    req: Option<InFlight>,
    reply: ReplySender,
}

#[derive(Default)]
struct State {
    waiting: HashMap<u64, Waiting>,
    broken: Option<Broken>,
}

/// What the requesting threads and the reader thread share.
struct Shared {
    state: Mutex<State>,
    /// A clone of the socket, to shut it down from any thread.
    socket: Socket,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves nothing half-done that the map cannot show.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Breaks the connection for `reason` (the first reason given stays): every waiting request
    /// fails with it and the socket is shut down, which ends the reader.
    fn break_with(&self, reason: String) {
        self.end(Broken { reason, silent: None });
    }

    /// As [`Shared::break_with`], for a server that stopped answering within `timeout`.
    fn break_silent(&self, reason: String, timeout: Duration) {
        self.end(Broken { reason, silent: Some(timeout) });
    }

    fn end(&self, why: Broken) {
        let mut st = self.state();
        let why = st.broken.get_or_insert(why).clone();
        for (_, w) in st.waiting.drain() {
            let _ = w.reply.try_send(Err(why.clone()));
        }
        drop(st);
        self.socket.shutdown();
    }
}

/// An open connection to one export.
pub struct Connection {
    info: ExportInfo,
    writer: Mutex<Socket>,
    shared: Arc<Shared>,
    next_handle: AtomicU64,
    reader: Option<JoinHandle<()>>,
}

impl Connection {
    /// Connects to `uri`'s server and negotiates its export, over TLS when `tls` is given
    /// (`NBD_OPT_STARTTLS` first, and no going on in plain text if it is refused); `timeout`
    /// bounds the connection and each step of the handshake, and later every write of a request.
    pub fn open(uri: &NbdUri, tls: Option<&ClientTls>, timeout: Duration) -> Result<Connection, ConnectError> {
        let mut socket = Socket::connect(&uri.endpoint, timeout).map_err(ConnectError::Connect)?;
        socket.set_timeouts(Some(timeout)).map_err(ConnectError::Connect)?;
        let greeting = greet(&mut socket)?;
        let mut relay_failure = None;
        if let Some(tls) = tls {
            start_tls(&mut socket)?;
            // From here the relay thread owns the network socket and the TLS session; this
            // connection speaks plain NBD to its end of a socket pair. The relay ends by itself
            // once that end is closed (what is left gets `timeout` to go out).
            let relay = tls.connect(socket, timeout)?;
            relay_failure = Some(relay.failure);
            socket = Socket::Unix(relay.local);
            socket.set_timeouts(Some(timeout)).map_err(ConnectError::Connect)?;
        }
        let info = match negotiate(&mut socket, &uri.export, greeting) {
            Ok(info) => info,
            Err(HandshakeError::Io(e)) => {
                // The relay knows whether the server refused the TLS session (a client
                // certificate checked after the handshake), which reads here as a closed socket.
                let refused = relay_failure.and_then(|f| f.reason()).zip(tls);
                return Err(match refused {
                    Some((reason, tls)) => tls.ended_after_handshake(reason).into(),
                    None => HandshakeError::Io(e).into(),
                });
            }
            Err(e) => return Err(e.into()),
        };
        // Replies may be far apart when idle: the reader waits without bound (the requests
        // have their own timeouts); a write still gives up if the server stops reading.
        socket.set_timeouts(None).map_err(ConnectError::Connect)?;
        socket.set_write_timeout(Some(timeout)).map_err(ConnectError::Connect)?;
        let shared =
            Arc::new(Shared { state: Mutex::default(), socket: socket.try_clone().map_err(ConnectError::Connect)? });
        let reader_socket = socket.try_clone().map_err(ConnectError::Connect)?;
        let reader_shared = Arc::clone(&shared);
        let structured = info.structured;
        let reader = std::thread::Builder::new()
            .name("nbd-reader".into())
            .spawn(move || read_replies(reader_socket, structured, &reader_shared))
            .map_err(ConnectError::Connect)?;
        Ok(Connection {
            info,
            writer: Mutex::new(socket),
            shared,
            next_handle: AtomicU64::new(1),
            reader: Some(reader),
        })
    }

    pub fn info(&self) -> &ExportInfo {
        &self.info
    }

    /// Why the connection broke, if it did.
    pub fn broken(&self) -> Option<String> {
        self.shared.state().broken.as_ref().map(|b| b.reason.clone())
    }

    /// Sends one request (a write's payload given in pieces) and waits up to `timeout` for its
    /// reply: a read's data, or an empty vector.
    pub fn call(
        &self,
        kind: u16,
        flags: u16,
        offset: u64,
        len: u32,
        payload: &[&[u8]],
        timeout: Duration,
    ) -> Result<Vec<u8>, CallError> {
        let handle = self.next_handle.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = mpsc::sync_channel(1);
        {
            let mut st = self.shared.state();
            if let Some(b) = &st.broken {
                return Err(CallError::Lost(b.reason.clone()));
            }
            st.waiting.insert(handle, Waiting { req: Some(InFlight::new(kind, offset, len)), reply });
        }
        if let Err(e) = self.send(&RequestHeader { flags, kind, handle, offset, len }, payload) {
            self.shared.break_with(format!("sending {}: {e}", command_name(kind)));
        }
        let settled = |r: Result<Outcome, Broken>| match r {
            Ok(Ok(data)) => Ok(data),
            Ok(Err(e)) => Err(CallError::Server(e)),
            Err(Broken { silent: Some(t), .. }) => Err(CallError::TimedOut(t)),
            Err(Broken { reason, silent: None }) => Err(CallError::Lost(reason)),
        };
        match answer.recv_timeout(timeout) {
            Ok(r) => settled(r),
            Err(RecvTimeoutError::Timeout) => {
                self.shared.break_silent(format!("{} got no reply within {timeout:?}", command_name(kind)), timeout);
                // The reply may have come in the meantime; then it counts.
                match answer.try_recv() {
                    Ok(Ok(r)) => settled(Ok(r)),
                    _ => Err(CallError::TimedOut(timeout)),
                }
            }
            Err(RecvTimeoutError::Disconnected) => Err(CallError::Lost("the reply reader stopped".into())),
        }
    }

    fn send(&self, header: &RequestHeader, payload: &[&[u8]]) -> io::Result<()> {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let small: usize = payload.iter().map(|p| p.len()).sum();
        let mut first = header.encode().to_vec();
        if small <= COALESCE_LIMIT {
            for p in payload {
                first.extend_from_slice(p);
            }
            return w.write_all(&first);
        }
        w.write_all(&first)?;
        for p in payload {
            w.write_all(p)?;
        }
        Ok(())
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if self.broken().is_none() {
            // A polite goodbye (NBD_CMD_DISC); nothing is in flight once the last user is gone.
            let disc = RequestHeader { flags: 0, kind: CMD_DISC, handle: 0, offset: 0, len: 0 };
            let _ = self.send(&disc, &[]);
        }
        self.shared.break_with("connection closed".into());
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// The reader thread: reads replies until the connection ends, handing each request its outcome.
fn read_replies(socket: Socket, structured: bool, shared: &Shared) {
    let mut r = BufReader::with_capacity(READ_BUFFER, socket);
    let reason = loop {
        let header = match read_header(&mut r, structured) {
            Ok(h) => h,
            Err(e) => break describe(e),
        };
        let handle = header.handle();
        let taken = shared.state().waiting.get_mut(&handle).and_then(|w| w.req.take());
        let Some(mut req) = taken else {
            break describe(ReplyError::UnknownHandle(handle));
        };
        match read_body(&mut r, &header, &mut req) {
            Ok(true) => {
                if let Some(w) = shared.state().waiting.remove(&handle) {
                    let _ = w.reply.try_send(Ok(req.outcome()));
                }
            }
            Ok(false) => {
                if let Some(w) = shared.state().waiting.get_mut(&handle) {
                    w.req = Some(req);
                }
            }
            Err(e) => break describe(e),
        }
    };
    shared.break_with(reason);
}

fn describe(e: ReplyError) -> String {
    match e {
        ReplyError::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => "the server closed the connection".into(),
        e => e.to_string(),
    }
}
