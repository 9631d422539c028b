//! One connection: the handshake, then the transmission phase with a reader thread (the caller's)
//! that parses and submits requests and a writer thread that sends replies as they complete.
//!
//! Replies go through a channel to the writer rather than being written by whichever thread
//! completes the request: completions arrive on the export's threads, which must never block on
//! a slow or stuck client. The single writer is also what keeps each reply's header and data
//! together on the wire.
//!
//! An export may complete a request on the reader's own thread, inside `submit` (uraid answers
//! reads, and writes on some levels, that way). Those replies are held by the reader and sent
//! together, as one message, when it is about to wait (for the client's next bytes, or for
//! in-flight room) or holds [`HELD_MAX`] of them: a client's burst of requests then wakes the
//! writer once rather than once per reply, and the writer flushes them in one write.

use std::io::{self, BufReader, BufWriter, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use uraid_engine::IoBuf;

use crate::budget::ServerBudget;
use crate::client_io::{discard, read_exact_or_eof, read_payload, write_failed, ReadEnd};
use crate::config::Settings;
use crate::export::{Errno, ExportCommand, ExportError, ExportReply, SplicedData};
use crate::handshake::{greet, haggle, Greeted, Haggled, Negotiated};
use crate::log::log;
use crate::outcome::{ConnStats, EndReason};
use crate::proto::*;
use crate::stream::{ShutdownHandle, Stream};

/// Write payloads up to this size are read and thrown away when the write is refused, so the
/// client gets an error and the stream stays in step; larger ones end the connection. The spec
/// says lengths below 2^25 should not be treated as a denial of service.
const MIN_DISCARD_LIMIT: u64 = 1 << 25;

/// Most replies the reader holds before sending them on (see the module comment).
const HELD_MAX: usize = 64;

/// Replies completed on a reader's own thread and not sent yet, with the connection they belong
/// to. Only a reader thread sets it (for the life of its loop); on every other thread it stays
/// `None` and replies go straight to their writer.
struct Held {
    conn: usize,
    tx: Sender<Outgoing>,
    replies: Vec<Reply>,
}

thread_local! {
    static HELD: std::cell::RefCell<Option<Held>> = const { std::cell::RefCell::new(None) };
}

/// Send the replies this thread holds, if any; whether there were any.
fn send_held() -> bool {
    HELD.with(|h| match h.borrow_mut().as_mut() {
        Some(held) if !held.replies.is_empty() => {
            let batch = std::mem::replace(&mut held.replies, Vec::with_capacity(HELD_MAX));
            // The writer outlives every counted request, so this only fails if it panicked.
            let _ = held.tx.send(Outgoing::Replies(batch));
            true
        }
        _ => false,
    })
}

/// What the server may do to a connection from another thread.
pub(crate) trait ConnControl: Send + Sync {
    /// Stop reading requests; the connection then finishes what it has and closes.
    fn stop(&self);
}

/// State shared by a connection's reader, its writer, the export's completions and `stop()`.
pub(crate) struct Conn {
    /// A clone of the socket used only to shut it down: the client's socket, or after
    /// `NBD_OPT_STARTTLS` the local end of the TLS relay.
    control: Mutex<Box<dyn ShutdownHandle>>,
    stop_requested: AtomicBool,
    inflight: Mutex<Inflight>,
    inflight_changed: Condvar,
    /// The server's room for requests in flight across connections.
    budget: Arc<ServerBudget>,
    /// True while the writer holds bytes the client has not accepted yet.
    writer_busy: AtomicBool,
    requests: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

#[derive(Default)]
struct Inflight {
    requests: usize,
    bytes: u64,
    /// Threads waiting on `inflight_changed`: `release` wakes them only if there are any (a
    /// wake is a system call per reply otherwise).
    waiters: usize,
    /// Counts answered requests, so a waiter can tell a stall from slow progress.
    answered: u64,
}

impl ConnControl for Conn {
    fn stop(&self) {
        self.stop_requested.store(true, Ordering::SeqCst);
        // Wakes a reader blocked in read() (it sees EOF) without touching the write side, so
        // replies to requests already read still go out.
        self.shutdown(Shutdown::Read);
        // Wakes a reader waiting for in-flight room.
        let _guard = self.inflight.lock().unwrap();
        self.inflight_changed.notify_all();
        self.budget.wake_all();
    }
}

impl Conn {
    pub(crate) fn new(control: Box<dyn ShutdownHandle>, budget: Arc<ServerBudget>) -> Self {
        Conn {
            control: Mutex::new(control),
            stop_requested: AtomicBool::new(false),
            inflight: Mutex::new(Inflight::default()),
            inflight_changed: Condvar::new(),
            budget,
            writer_busy: AtomicBool::new(false),
            requests: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
        }
    }

    fn stopping(&self) -> bool {
        self.stop_requested.load(Ordering::SeqCst)
    }

    fn shutdown(&self, how: Shutdown) {
        // Already shut down, or the client is gone: either way there is nothing left to wake.
        let _ = self.control.lock().unwrap().shut(how);
    }

    /// The connection now runs over `control`'s socket (the TLS relay's end). A stop asked for
    /// while the old one was in place is applied to it too.
    fn replace_control(&self, control: Box<dyn ShutdownHandle>) {
        *self.control.lock().unwrap() = control;
        if self.stopping() {
            self.shutdown(Shutdown::Read);
        }
    }

    /// Waits until a request costing `cost` bytes fits the in-flight limits, then counts it.
    /// Returns false (counting nothing) if the connection is told to stop meanwhile. Before
    /// waiting, the replies the calling reader holds are sent: the room it waits for may be
    /// theirs.
    fn acquire(&self, cost: u64, max_bytes: u64, max_requests: usize) -> bool {
        let mut inflight = self.inflight.lock().unwrap();
        loop {
            if self.stopping() {
                return false;
            }
            // A lone request is always let through, however big, or it could never run.
            let fits = inflight.requests == 0
                || (inflight.requests < max_requests && inflight.bytes.saturating_add(cost) <= max_bytes);
            // Then the server's room; a connection with nothing in flight always gets it.
            if fits && self.budget.try_take(cost, inflight.requests == 0) {
                inflight.requests += 1;
                inflight.bytes += cost;
                return true;
            }
            // Sending never blocks (nor takes this lock): the writer frees their room as it
            // sends them, and the loop looks again.
            if send_held() {
                continue;
            }
            if fits {
                // Only the server is full: its room comes back from other connections.
                drop(inflight);
                self.budget.wait_for_room(cost, || self.stopping());
                inflight = self.inflight.lock().unwrap();
                continue;
            }
            inflight.waiters += 1;
            inflight = self.inflight_changed.wait(inflight).unwrap();
            inflight.waiters -= 1;
        }
    }

    fn release(&self, cost: u64) {
        let mut inflight = self.inflight.lock().unwrap();
        inflight.requests -= 1;
        inflight.bytes -= cost;
        inflight.answered += 1;
        if inflight.waiters > 0 {
            self.inflight_changed.notify_all();
        }
        drop(inflight);
        self.budget.give(cost);
    }

    /// Waits until every counted request has been answered. The export must complete what it was
    /// given, so there is no limit on that; but if the writer sits on unsent replies for
    /// `stall_timeout` without progress, the client has stopped reading, and the socket is shut
    /// down so the writer fails and discards the rest.
    fn wait_answered(&self, stall_timeout: Duration) {
        let mut inflight = self.inflight.lock().unwrap();
        let mut last_answered = inflight.answered;
        let mut last_progress = Instant::now();
        let mut forced = false;
        while inflight.requests > 0 {
            inflight.waiters += 1;
            inflight = self.inflight_changed.wait_timeout(inflight, Duration::from_millis(100)).unwrap().0;
            inflight.waiters -= 1;
            if inflight.answered != last_answered {
                last_answered = inflight.answered;
                last_progress = Instant::now();
            } else if !forced && self.writer_busy.load(Ordering::SeqCst) && last_progress.elapsed() >= stall_timeout {
                forced = true;
                self.shutdown(Shutdown::Both);
            }
        }
    }
}

/// Runs a whole connection and reports how it went. The socket is shut down on return.
pub(crate) fn serve<S: Stream>(server: &Settings, conn: &Arc<Conn>, stream: S, writer: S, peer: &str) -> ConnStats {
    let mut reader = BufReader::with_capacity(64 << 10, stream);
    let mut handshake_writer = BufWriter::with_capacity(4 << 10, writer);
    let stopping = || conn.stopping();
    let mut stats = ConnStats {
        export: None,
        structured_replies: false,
        requests: 0,
        bytes_read: 0,
        bytes_written: 0,
        reason: EndReason::ClientDisconnected,
    };
    stats.reason = match greet(&stopping, &mut reader, &mut handshake_writer) {
        Err(reason) => reason,
        Ok(greeted) => {
            match negotiate_and_transmit(server, conn, reader, handshake_writer, greeted, false, peer, &mut stats) {
                Session::Ended(reason) => reason,
                Session::StartTls(raw) => serve_tls(server, conn, raw, greeted, peer, &mut stats),
            }
        }
    };
    conn.shutdown(Shutdown::Both);
    stats.requests = conn.requests.load(Ordering::SeqCst);
    stats.bytes_read = conn.bytes_read.load(Ordering::SeqCst);
    stats.bytes_written = conn.bytes_written.load(Ordering::SeqCst);
    stats
}

/// How a stretch of a connection on one socket ended.
enum Session<S> {
    Ended(EndReason),
    /// `NBD_OPT_STARTTLS` was acknowledged; the client's socket, for the TLS handshake.
    StartTls(S),
}

/// Option haggling, then the transmission phase, on one socket.
#[allow(clippy::too_many_arguments)]
fn negotiate_and_transmit<S: Stream>(
    server: &Settings,
    conn: &Arc<Conn>,
    mut reader: BufReader<S>,
    mut handshake_writer: BufWriter<S>,
    greeted: Greeted,
    tls_active: bool,
    peer: &str,
    stats: &mut ConnStats,
) -> Session<S> {
    let stopping = || conn.stopping();
    match haggle(server, &stopping, greeted, tls_active, &mut reader, &mut handshake_writer) {
        Err(reason) => Session::Ended(reason),
        Ok(Haggled::StartTls) => {
            if !reader.buffer().is_empty() {
                // The client must wait for the acknowledgement before starting TLS; bytes
                // already here were sent in plain text where TLS records belong.
                return Session::Ended(EndReason::ProtocolError(
                    "the client sent more data after NBD_OPT_STARTTLS before the server acknowledged it".into(),
                ));
            }
            // The handshake writer was flushed before the acknowledgement returned.
            drop(handshake_writer);
            Session::StartTls(reader.into_inner())
        }
        Ok(Haggled::Go(negotiated)) => {
            log(format_args!(
                "{peer}: serving export {:?} ({} bytes{}, {} replies{})",
                negotiated.export_name,
                negotiated.size,
                if negotiated.read_only { ", read-only" } else { "" },
                if negotiated.structured { "structured" } else { "simple" },
                if tls_active { ", over TLS" } else { "" }
            ));
            stats.export = Some(negotiated.export_name.clone());
            stats.structured_replies = negotiated.structured;
            // Everything the handshake wrote was flushed before it returned.
            match handshake_writer.into_inner() {
                Ok(writer) => Session::Ended(transmission(server, conn, reader, writer, &negotiated)),
                Err(e) => Session::Ended(write_failed(e.into_error(), conn.stopping())),
            }
        }
    }
}

/// After an acknowledged `NBD_OPT_STARTTLS`: the TLS handshake on the client's socket, then the
/// rest of the connection over the relay's local end, and the relay's end.
fn serve_tls<S: Stream>(
    server: &Settings,
    conn: &Arc<Conn>,
    raw: S,
    greeted: Greeted,
    peer: &str,
    stats: &mut ConnStats,
) -> EndReason {
    let Some(tls) = &server.config.tls else {
        unreachable!("NBD_OPT_STARTTLS is only acknowledged by a server with TLS");
    };
    let (relay, summary) = match tls.accept(raw, server.config.stalled_client_timeout) {
        Ok(accepted) => accepted,
        Err(e) => return if conn.stopping() { EndReason::ServerStop } else { EndReason::Tls(e.to_string()) },
    };
    log(format_args!("{peer}: {summary}"));
    let local = relay.local;
    let clones = local.try_clone().and_then(|control| Ok((control, local.try_clone()?)));
    let reason = match clones {
        Err(e) => EndReason::Io(format!("setting up the TLS relay's socket: {e}")),
        Ok((control, writer)) => {
            conn.replace_control(Box::new(control));
            let reader = BufReader::with_capacity(64 << 10, local);
            let writer = BufWriter::with_capacity(4 << 10, writer);
            match negotiate_and_transmit(server, conn, reader, writer, greeted, true, peer, stats) {
                Session::Ended(reason) => reason,
                Session::StartTls(_) => unreachable!("NBD_OPT_STARTTLS is refused once TLS is in use"),
            }
        }
    };
    // The relay sends what is left and ends once its local end is closed.
    conn.shutdown(Shutdown::Both);
    if relay.thread.join().is_err() {
        log(format_args!("{peer}: the TLS relay thread panicked"));
    }
    reason
}

enum Outgoing {
    Reply(Reply),
    /// Replies the reader completed itself (see [`HELD`]).
    Replies(Vec<Reply>),
    /// Every request has been answered: flush and exit.
    Finish,
}

/// A completed request on its way to the writer.
struct Reply {
    handle: u64,
    /// Offset of a read, for the structured data chunk.
    read_offset: Option<u64>,
    /// Read data on success (`None` for commands without data).
    result: Result<Option<Payload>, ExportError>,
    /// What this request counts against the in-flight byte limit.
    cost: u64,
    /// Write bytes to add to the statistics if the write succeeded.
    write_len: u64,
}

/// A read's data as the export answered it.
enum Payload {
    Bytes(IoBuf),
    Spliced(Box<dyn SplicedData>),
}

impl Payload {
    fn len(&self) -> usize {
        match self {
            Payload::Bytes(b) => b.len(),
            Payload::Spliced(s) => s.len(),
        }
    }
}

/// Hands a request's completion to the writer exactly once: either through
/// [`ReplySender::complete`], or, if the export drops the callback unused, as an EIO error from
/// `Drop`, so that a buggy export cannot leave a request (and a waiting shutdown) hanging forever.
struct ReplySender {
    tx: Option<Sender<Outgoing>>,
    /// The connection (its `Conn`'s address), to tell its reader's held replies from others'.
    conn: usize,
    handle: u64,
    /// Offset and length of a read.
    read: Option<(u64, u32)>,
    cost: u64,
    write_len: u64,
}

impl ReplySender {
    fn complete(mut self, result: Result<ExportReply, ExportError>) {
        let result = match (self.read, result) {
            (_, Err(e)) => Err(e),
            (Some((_, len)), Ok(ExportReply::Data(d))) => whole(Payload::Bytes(d), len),
            (Some((_, len)), Ok(ExportReply::Spliced(s))) => whole(Payload::Spliced(s), len),
            (Some(_), Ok(ExportReply::Done)) => {
                Err(ExportError::new(Errno::Io, "internal error: the export returned no data for a read"))
            }
            (None, Ok(_)) => Ok(None),
        };
        self.send(result);
    }

    fn send(&mut self, result: Result<Option<Payload>, ExportError>) {
        if let Some(tx) = self.tx.take() {
            let reply = Reply {
                handle: self.handle,
                read_offset: self.read.map(|(offset, _)| offset),
                result,
                cost: self.cost,
                write_len: self.write_len,
            };
            // On this connection's reader thread: held, and sent with the others.
            let reply = HELD.with(|h| match h.borrow_mut().as_mut() {
                Some(held) if held.conn == self.conn => {
                    held.replies.push(reply);
                    None
                }
                _ => Some(reply),
            });
            match reply {
                // The writer outlives every counted request, so this only fails if it panicked.
                Some(reply) => _ = tx.send(Outgoing::Reply(reply)),
                None => {
                    if HELD.with(|h| h.borrow().as_ref().is_some_and(|held| held.replies.len() >= HELD_MAX)) {
                        send_held();
                    }
                }
            }
        }
    }
}

/// `data` if it is a read's whole `len` bytes. A short read sent as success would desynchronize
/// a simple-reply client, so a mistake in the export becomes an error here.
fn whole(data: Payload, len: u32) -> Result<Option<Payload>, ExportError> {
    if data.len() == len as usize {
        return Ok(Some(data));
    }
    Err(ExportError::new(
        Errno::Io,
        format!("internal error: the export returned {} bytes for a {len}-byte read", data.len()),
    ))
}

impl Drop for ReplySender {
    fn drop(&mut self) {
        self.send(Err(ExportError::new(
            Errno::Io,
            "internal error: the export dropped the request without completing it",
        )));
    }
}

/// Request limits fixed for the connection by the handshake.
pub(crate) struct Limits {
    pub size: u64,
    pub read_only: bool,
    pub structured: bool,
    pub max_payload: u32,
}

/// What to do with a well-formed request.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Hand it to the export (a write's data is still to be read into it).
    Submit(ExportCommand),
    /// Nothing to do but report success (a zero-length range).
    Succeed,
}

/// Checks a request (other than `NBD_CMD_DISC`) against the protocol and the export, in this
/// order: command type, flags, read-only, payload size, range. The order decides which error a
/// request with several faults gets; the spec does not rank them.
pub(crate) fn validate(req: &RequestHeader, limits: &Limits) -> Result<Verdict, ExportError> {
    let name = command_name(req.kind);
    let allowed_flags = match req.kind {
        CMD_READ if limits.structured => CMD_FLAG_FUA | CMD_FLAG_DF,
        CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM | CMD_CACHE => CMD_FLAG_FUA,
        CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
        CMD_BLOCK_STATUS => {
            return Err(ExportError::new(
                Errno::Inval,
                "NBD_CMD_BLOCK_STATUS needs a metadata context; this server offers none",
            ))
        }
        _ => return Err(ExportError::new(Errno::Inval, format!("{name} is not supported by this server"))),
    };
    let unknown_flags = req.flags & !allowed_flags;
    if unknown_flags != 0 {
        return Err(ExportError::new(
            Errno::Inval,
            format!("command flags {unknown_flags:#x} are not valid for {name}"),
        ));
    }
    let fua = req.flags & CMD_FLAG_FUA != 0;
    let (offset, len) = (req.offset, req.len);
    if limits.read_only && matches!(req.kind, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES) {
        return Err(ExportError::new(Errno::Perm, format!("{name} refused: the export is read-only")));
    }
    if matches!(req.kind, CMD_READ | CMD_WRITE) && len > limits.max_payload {
        return Err(ExportError::new(
            Errno::Inval,
            format!("{name} of {len} bytes exceeds the maximum of {} bytes", limits.max_payload),
        ));
    }
    if req.kind == CMD_FLUSH {
        // Offset and length are reserved for a flush; nothing is gained by refusing a client
        // that fills them in.
        return Ok(Verdict::Submit(ExportCommand::Flush));
    }
    let in_range = matches!(offset.checked_add(len.into()), Some(end) if end <= limits.size);
    if !in_range {
        // The spec asks for ENOSPC when a write goes past the end and EINVAL for the others.
        let errno = if matches!(req.kind, CMD_WRITE | CMD_WRITE_ZEROES) { Errno::NoSpc } else { Errno::Inval };
        return Err(ExportError::new(
            errno,
            format!("{name} of {len} bytes at offset {offset} goes past the end of the {}-byte export", limits.size),
        ));
    }
    if len == 0 {
        return Ok(Verdict::Succeed);
    }
    Ok(Verdict::Submit(match req.kind {
        CMD_READ => ExportCommand::Read { offset, len },
        CMD_WRITE => ExportCommand::Write { offset, data: Vec::new().into(), fua },
        CMD_TRIM => ExportCommand::Trim { offset, len, fua },
        CMD_WRITE_ZEROES => {
            ExportCommand::WriteZeroes { offset, len, may_trim: req.flags & CMD_FLAG_NO_HOLE == 0, fua }
        }
        CMD_CACHE => ExportCommand::Cache { offset, len },
        _ => unreachable!("command types were filtered above"),
    }))
}

fn transmission<S: Stream>(
    server: &Settings,
    conn: &Arc<Conn>,
    reader: BufReader<S>,
    writer: S,
    negotiated: &Negotiated,
) -> EndReason {
    // Unbounded in type, bounded by construction: a reply is sent only for a request the reader
    // admitted, and it admits no more than the connection's in-flight limits (`Inflight`, at most
    // `max_requests` and `max_bytes`). A bounded channel would instead let a client that stops
    // reading its replies block the sender, which is the array's engine thread.
    let (tx, rx) = mpsc::channel();
    let writer_conn = conn.clone();
    let structured = negotiated.structured;
    let writer_thread = match thread::Builder::new()
        .name("nbd-writer".into())
        .spawn(move || write_replies(writer, rx, &writer_conn, structured))
    {
        Ok(t) => t,
        Err(e) => return EndReason::Io(format!("could not start the reply writer thread: {e}")),
    };
    let id = Arc::as_ptr(conn) as usize;
    HELD.with(|h| *h.borrow_mut() = Some(Held { conn: id, tx: tx.clone(), replies: Vec::with_capacity(HELD_MAX) }));
    let reason = read_requests(server, conn, reader, &tx, negotiated);
    send_held();
    HELD.with(|h| *h.borrow_mut() = None);
    conn.wait_answered(server.config.stalled_client_timeout);
    let _ = tx.send(Outgoing::Finish);
    drop(tx);
    match writer_thread.join() {
        // The reader only saw the socket close; the writer knows whether that was the client
        // leaving or something worse.
        Ok(Some(e)) if reason == EndReason::ClientDisconnected => write_failed(e, conn.stopping()),
        Ok(_) => reason,
        Err(_) => EndReason::Io("the reply writer thread panicked".into()),
    }
}

/// The reader: parses requests and submits them until the client disconnects, breaks the
/// protocol, or the connection is told to stop.
fn read_requests<S: Stream>(
    server: &Settings,
    conn: &Conn,
    mut reader: BufReader<S>,
    tx: &Sender<Outgoing>,
    negotiated: &Negotiated,
) -> EndReason {
    let config = &server.config;
    let limits = Limits {
        size: negotiated.size,
        read_only: negotiated.read_only,
        structured: negotiated.structured,
        max_payload: config.max_payload,
    };
    let discard_limit = u64::from(config.max_payload).max(MIN_DISCARD_LIMIT);
    let acquire = |cost: u64| conn.acquire(cost, config.max_inflight_bytes, config.max_inflight_requests);
    let read_end = |e: ReadEnd| e.reason(conn.stopping());
    let id = conn as *const Conn as usize;
    let sender = |handle: u64, read: Option<(u64, u32)>, cost: u64, write_len: u64| ReplySender {
        tx: Some(tx.clone()),
        conn: id,
        handle,
        read,
        cost,
        write_len,
    };

    loop {
        // Requests already buffered are not started once a stop is asked for.
        if conn.stopping() {
            return EndReason::ServerStop;
        }
        let mut raw = [0u8; REQUEST_HEADER_LEN];
        if reader.buffer().len() < REQUEST_HEADER_LEN {
            // The next header is not all here yet: reading may wait for the client.
            send_held();
        }
        if let Err(e) = read_exact_or_eof(&mut reader, &mut raw, "a request header") {
            return read_end(e);
        }
        let req = match RequestHeader::decode(&raw) {
            Ok(req) => req,
            Err(e) => return EndReason::ProtocolError(e.to_string()),
        };
        if req.kind == CMD_DISC {
            // No reply; its offset, length and flags are meaningless, so they are not checked.
            return EndReason::Disconnect;
        }
        let read = (req.kind == CMD_READ).then_some((req.offset, req.len));
        let verdict = validate(&req, &limits);

        if req.kind == CMD_WRITE && req.len > 0 {
            let len = u64::from(req.len);
            if verdict.is_err() && len > discard_limit {
                return EndReason::ProtocolError(format!(
                    "NBD_CMD_WRITE announces {len} bytes of data, more than the {discard_limit} bytes the server will read to skip it"
                ));
            }
            if let Ok(Verdict::Submit(ExportCommand::Write { offset, fua, .. })) = verdict {
                // Room is reserved before the data is read, which is what bounds the memory a
                // connection's queued writes can take.
                if !acquire(len) {
                    return EndReason::ServerStop;
                }
                if reader.buffer().len() < req.len as usize {
                    send_held();
                }
                let data = match read_payload(&mut reader, req.len as usize, "write data") {
                    Ok(data) => data,
                    Err(e) => {
                        // The connection is going away with this request half-read: there is
                        // nothing to answer, only room to give back.
                        conn.release(len);
                        return read_end(e);
                    }
                };
                let reply = sender(req.handle, None, len, len);
                server.export.submit(ExportCommand::Write { offset, data, fua }, Box::new(move |r| reply.complete(r)));
                continue;
            }
            send_held();
            if let Err(e) = discard(&mut reader, len, "write data") {
                return read_end(e);
            }
        }

        match verdict {
            Ok(Verdict::Submit(cmd)) => {
                let cost = read.map_or(0, |(_, len)| u64::from(len));
                if !acquire(cost) {
                    return EndReason::ServerStop;
                }
                let reply = sender(req.handle, read, cost, 0);
                server.export.submit(cmd, Box::new(move |r| reply.complete(r)));
            }
            Ok(Verdict::Succeed) => {
                if !acquire(0) {
                    return EndReason::ServerStop;
                }
                let done = if read.is_some() { ExportReply::Data(IoBuf::new()) } else { ExportReply::Done };
                sender(req.handle, read, 0, 0).complete(Ok(done));
            }
            Err(e) => {
                if !acquire(0) {
                    return EndReason::ServerStop;
                }
                sender(req.handle, read, 0, 0).complete(Err(e));
            }
        }
    }
}

/// The writer: sends replies in completion order, batching whatever is queued into one flush.
/// Returns the write error that ended sending, if any; after one, replies are still taken from
/// the channel (and their room released) but dropped.
fn write_replies<S: Stream>(stream: S, rx: Receiver<Outgoing>, conn: &Conn, structured: bool) -> Option<io::Error> {
    let mut w = BufWriter::with_capacity(64 << 10, stream);
    let mut failure: Option<io::Error> = None;
    fn fail<S: Stream>(e: io::Error, failure: &mut Option<io::Error>, w: &BufWriter<S>) {
        if failure.is_none() {
            // Whatever the reader is blocked on, the client is gone; make it notice.
            let _ = w.get_ref().shutdown(Shutdown::Both);
            *failure = Some(e);
        }
    }
    let mut queue = std::collections::VecDeque::new();
    loop {
        let Some(mut reply) = queue.pop_front() else {
            // Nothing left to write: take the next message, flushing first if none is waiting.
            let msg = match rx.try_recv() {
                Ok(m) => Some(m),
                Err(TryRecvError::Empty) => {
                    if failure.is_none() {
                        if let Err(e) = w.flush() {
                            fail(e, &mut failure, &w);
                        }
                    }
                    conn.writer_busy.store(false, Ordering::SeqCst);
                    rx.recv().ok()
                }
                Err(TryRecvError::Disconnected) => None,
            };
            match msg {
                Some(Outgoing::Reply(reply)) => queue.push_back(reply),
                Some(Outgoing::Replies(replies)) => queue.extend(replies),
                Some(Outgoing::Finish) | None => break,
            }
            continue;
        };
        if failure.is_none() {
            conn.writer_busy.store(true, Ordering::SeqCst);
            // Counted before: sending drains spliced data.
            let read_len = reply.result.as_ref().ok().and_then(|d| d.as_ref()).map(|d| d.len() as u64);
            match write_reply(&mut w, &mut reply, structured) {
                Ok(()) => {
                    conn.requests.fetch_add(1, Ordering::Relaxed);
                    match read_len {
                        Some(len) => {
                            conn.bytes_read.fetch_add(len, Ordering::Relaxed);
                        }
                        None if reply.result.is_ok() => {
                            conn.bytes_written.fetch_add(reply.write_len, Ordering::Relaxed);
                        }
                        None => {}
                    }
                }
                Err(e) => fail(e, &mut failure, &w),
            }
        }
        conn.release(reply.cost);
    }
    if failure.is_none() {
        if let Err(e) = w.flush() {
            fail(e, &mut failure, &w);
        }
    }
    conn.writer_busy.store(false, Ordering::SeqCst);
    failure
}

/// A read's data after its header. Through the connection's `BufWriter`, small pieces are
/// gathered with other replies and large ones go straight to the socket, uncopied. Spliced data
/// goes to the socket's descriptor once what is buffered before it (its header) is written.
fn write_payload<S: Stream>(w: &mut BufWriter<S>, data: &mut Payload) -> io::Result<()> {
    match data {
        Payload::Bytes(b) => {
            for piece in b.pieces() {
                w.write_all(piece)?;
            }
            Ok(())
        }
        Payload::Spliced(s) => {
            w.flush()?;
            s.splice_to(w.get_ref().as_fd())
        }
    }
}

fn write_reply<S: Stream>(w: &mut BufWriter<S>, reply: &mut Reply, structured: bool) -> io::Result<()> {
    let handle = reply.handle;
    if !structured {
        let error = reply.result.as_ref().err().map_or(0, |e| e.errno.code());
        w.write_all(&SimpleReplyHeader { error, handle }.encode())?;
        if let Ok(Some(data)) = &mut reply.result {
            write_payload(w, data)?;
        }
        return Ok(());
    }
    let chunk = |chunk_type: u16, len: usize| {
        ChunkHeader { flags: REPLY_FLAG_DONE, chunk_type, handle, len: len as u32 }.encode()
    };
    match &mut reply.result {
        Ok(Some(data)) if data.len() > 0 => {
            // The whole read is in memory (or in a pipe) before this chunk starts, so no error
            // can follow it and it can carry the DONE flag itself.
            w.write_all(&chunk(REPLY_TYPE_OFFSET_DATA, 8 + data.len()))?;
            w.write_all(&reply.read_offset.unwrap_or(0).to_be_bytes())?;
            write_payload(w, data)
        }
        Ok(_) => w.write_all(&chunk(REPLY_TYPE_NONE, 0)),
        Err(e) => {
            let payload = error_chunk_payload(e.errno.code(), &e.message);
            w.write_all(&chunk(REPLY_TYPE_ERROR, payload.len()))?;
            w.write_all(&payload)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(read_only: bool, structured: bool) -> Limits {
        Limits { size: 1 << 20, read_only, structured, max_payload: 1 << 16 }
    }

    fn req(kind: u16, flags: u16, offset: u64, len: u32) -> RequestHeader {
        RequestHeader { flags, kind, handle: 1, offset, len }
    }

    fn errno(r: Result<Verdict, ExportError>) -> Option<Errno> {
        r.err().map(|e| e.errno)
    }

    #[test]
    fn unknown_commands_and_flags_are_einval() {
        let l = limits(false, false);
        assert_eq!(errno(validate(&req(CMD_BLOCK_STATUS, 0, 0, 512), &l)), Some(Errno::Inval));
        assert_eq!(errno(validate(&req(CMD_RESIZE, 0, 0, 0), &l)), Some(Errno::Inval));
        assert_eq!(errno(validate(&req(99, 0, 0, 512), &l)), Some(Errno::Inval));
        assert_eq!(errno(validate(&req(CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 0, 512), &l)), Some(Errno::Inval));
        assert_eq!(errno(validate(&req(CMD_WRITE, CMD_FLAG_NO_HOLE, 0, 512), &l)), Some(Errno::Inval));
        assert_eq!(errno(validate(&req(CMD_READ, 1 << 9, 0, 512), &l)), Some(Errno::Inval));
        // DF exists only with structured replies.
        assert_eq!(errno(validate(&req(CMD_READ, CMD_FLAG_DF, 0, 512), &l)), Some(Errno::Inval));
        assert!(validate(&req(CMD_READ, CMD_FLAG_DF, 0, 512), &limits(false, true)).is_ok());
        // FUA is valid on every command.
        for kind in [CMD_READ, CMD_WRITE, CMD_FLUSH, CMD_TRIM, CMD_CACHE, CMD_WRITE_ZEROES] {
            assert!(validate(&req(kind, CMD_FLAG_FUA, 0, 512), &l).is_ok(), "{}", command_name(kind));
        }
    }

    #[test]
    fn range_errors_follow_the_spec() {
        let l = limits(false, false);
        let end = 1 << 20;
        for kind in [CMD_READ, CMD_TRIM, CMD_CACHE] {
            assert_eq!(errno(validate(&req(kind, 0, end - 511, 512), &l)), Some(Errno::Inval));
            assert_eq!(errno(validate(&req(kind, 0, u64::MAX, 1), &l)), Some(Errno::Inval));
        }
        for kind in [CMD_WRITE, CMD_WRITE_ZEROES] {
            assert_eq!(errno(validate(&req(kind, 0, end - 511, 512), &l)), Some(Errno::NoSpc));
            assert_eq!(errno(validate(&req(kind, 0, u64::MAX - 10, 512), &l)), Some(Errno::NoSpc));
        }
        assert!(matches!(validate(&req(CMD_READ, 0, end - 512, 512), &l), Ok(Verdict::Submit(_))));
        // Zero-length ranges succeed without reaching the export, even at the very end.
        assert!(matches!(validate(&req(CMD_READ, 0, end, 0), &l), Ok(Verdict::Succeed)));
        assert_eq!(errno(validate(&req(CMD_READ, 0, end + 1, 0), &l)), Some(Errno::Inval));
        // Flush ignores its reserved fields.
        assert!(matches!(validate(&req(CMD_FLUSH, 0, u64::MAX, 7), &l), Ok(Verdict::Submit(ExportCommand::Flush))));
    }

    #[test]
    fn payload_limit_applies_to_read_and_write_only() {
        let l = limits(false, false);
        let big = (1 << 16) + 1;
        assert_eq!(errno(validate(&req(CMD_READ, 0, 0, big), &l)), Some(Errno::Inval));
        assert_eq!(errno(validate(&req(CMD_WRITE, 0, 0, big), &l)), Some(Errno::Inval));
        assert!(validate(&req(CMD_TRIM, 0, 0, big), &l).is_ok());
        assert!(validate(&req(CMD_WRITE_ZEROES, 0, 0, big), &l).is_ok());
        assert!(validate(&req(CMD_CACHE, 0, 0, big), &l).is_ok());
    }

    #[test]
    fn read_only_refuses_writes_with_eperm_first() {
        let l = limits(true, false);
        for kind in [CMD_WRITE, CMD_TRIM, CMD_WRITE_ZEROES] {
            // Even out of range: the export cannot be written at all.
            assert_eq!(errno(validate(&req(kind, 0, u64::MAX, 512), &l)), Some(Errno::Perm));
        }
        for kind in [CMD_READ, CMD_FLUSH, CMD_CACHE] {
            assert!(validate(&req(kind, 0, 0, 512), &l).is_ok());
        }
    }

    #[test]
    fn write_zeroes_maps_no_hole_to_may_trim() {
        let l = limits(false, false);
        let cmd = |flags| match validate(&req(CMD_WRITE_ZEROES, flags, 512, 1024), &l) {
            Ok(Verdict::Submit(ExportCommand::WriteZeroes { may_trim, fua, .. })) => (may_trim, fua),
            other => panic!("{other:?}"),
        };
        assert_eq!(cmd(0), (true, false));
        assert_eq!(cmd(CMD_FLAG_NO_HOLE), (false, false));
        assert_eq!(cmd(CMD_FLAG_NO_HOLE | CMD_FLAG_FUA), (false, true));
    }
}
