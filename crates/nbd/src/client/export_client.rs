//! `NbdClient`: one export, reached over one or several connections, with byte-range reads and
//! writes fitted to the server's block size constraints, and connections opened again when they
//! break.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use thiserror::Error;

use super::blocks::{aligned, narrow, split, sub_pieces, widen};
use super::config::ClientConfig;
use super::connection::{CallError, ConnectError, Connection};
use super::handshake::ExportInfo;
use super::reply::ServerError;
use super::uri::NbdUri;
use crate::proto::*;
use crate::tls::ClientTls;

/// How many times a read is sent again after its connection broke under it (each time on a
/// connection opened again, within the reconnection limits). Only reads: a write, zeroing or
/// trim may still be carried out by the server from the broken connection after its resent copy
/// and a later write to the same bytes completed, undoing that later write; and a flush on a new
/// connection would not cover writes acknowledged on the old one. Those fail instead, and the
/// array decides (md fails the member).
const READ_RESENDS: u32 = 2;

/// Largest length of one `NBD_CMD_TRIM` or `NBD_CMD_WRITE_ZEROES`: no data travels, but a
/// server may still refuse lengths far beyond its maximum payload, and 1 GiB is what servers
/// commonly take.
const MAX_EFFECT_LEN: u64 = 1 << 30;

/// What went wrong with a request to the export. Messages do not name the export: whoever
/// reports them does (the URI, [`NbdClient::uri`]), as for a file's I/O errors.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error("{source}")]
    Connect { source: ConnectError },
    #[error("the export is gone: {reason} ({attempts} reconnection attempt(s) over {elapsed:.1?} failed)")]
    Gone { attempts: usize, elapsed: Duration, reason: String },
    #[error("{command} got no reply within {timeout:?}")]
    TimedOut { command: String, timeout: Duration },
    #[error("{command} at byte {offset}: {source}")]
    Server { command: String, offset: u64, source: ServerError },
    #[error("{command} failed: connection lost ({reason})")]
    Lost { command: String, reason: String },
    #[error("the export is read-only")]
    ReadOnly,
    #[error("access {offset}+{len} beyond the export's end ({size} bytes)")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    #[error("the export changed on reconnection (size {was} -> {now} bytes, flags {was_flags:#x} -> {now_flags:#x})")]
    Changed { was: u64, now: u64, was_flags: u16, now_flags: u16 },
}

impl From<ClientError> for io::Error {
    fn from(e: ClientError) -> io::Error {
        let kind = match &e {
            ClientError::Connect { .. } | ClientError::Gone { .. } | ClientError::Lost { .. } => {
                io::ErrorKind::NotConnected
            }
            ClientError::TimedOut { .. } => io::ErrorKind::TimedOut,
            ClientError::Server { source, .. } => source.to_io().kind(),
            ClientError::ReadOnly => io::ErrorKind::PermissionDenied,
            ClientError::OutOfRange { .. } => io::ErrorKind::UnexpectedEof,
            ClientError::Changed { .. } => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

/// A client of one NBD export.
pub struct NbdClient {
    uri: NbdUri,
    shown: String,
    /// For an `nbds` URI: its credentials, read once and used by every connection.
    tls: Option<ClientTls>,
    /// The limits in force; the connection count was fixed at connect time, the rest may be
    /// changed while the client runs ([`NbdClient::set_config`]).
    config: RwLock<ClientConfig>,
    info: ExportInfo,
    /// One slot per connection; `None` once broken, until a request opens it again.
    slots: Vec<Mutex<Option<Arc<Connection>>>>,
    next_slot: AtomicUsize,
    /// Set when reconnection gave up: every later request fails at once with it.
    gone: Mutex<Option<ClientError>>,
    /// Held by writes that are not block-aligned while they read, patch and write their edge
    /// blocks, so two of them sharing a block cannot undo each other. (An array never writes
    /// the same member bytes from two requests at once, so aligned writes need no lock.)
    edge_blocks: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl NbdClient {
    /// Connects to `uri`, negotiates its export, and opens the further connections the server
    /// allows. A failure here is not retried: a URI that does not work at first is reported.
    pub fn connect(uri: &NbdUri, config: ClientConfig) -> Result<NbdClient, ClientError> {
        let shown = uri.to_string();
        let connect_error = |source| ClientError::Connect { source };
        let tls = match &uri.tls {
            Some(params) => Some(ClientTls::new(params, &uri.endpoint).map_err(|e| connect_error(e.into()))?),
            None => None,
        };
        let first = Connection::open(uri, tls.as_ref(), config.connect_timeout).map_err(connect_error)?;
        let info = *first.info();
        let count = if info.has(FLAG_CAN_MULTI_CONN) { config.multi_conn.max(1) } else { 1 };
        let mut slots = vec![Mutex::new(Some(Arc::new(first)))];
        for _ in 1..count {
            // A further connection that fails now is opened again when its turn comes.
            let more = Connection::open(uri, tls.as_ref(), config.connect_timeout).ok().map(Arc::new);
            slots.push(Mutex::new(more));
        }
        Ok(NbdClient {
            uri: uri.clone(),
            shown,
            tls,
            config: RwLock::new(config),
            info,
            slots,
            next_slot: AtomicUsize::new(0),
            gone: Mutex::new(None),
            edge_blocks: Mutex::new(()),
        })
    }

    pub fn info(&self) -> &ExportInfo {
        &self.info
    }

    /// The URI as shown in messages (no user name).
    pub fn uri(&self) -> &str {
        &self.shown
    }

    /// How many connections the client spreads requests over.
    pub fn connections(&self) -> usize {
        self.slots.len()
    }

    /// The limits in force.
    pub fn config(&self) -> ClientConfig {
        self.config.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Changes the limits for requests and reconnections from now on (requests already waiting
    /// keep the timeout they started with; the connection count stays what it is).
    pub fn set_config(&self, config: ClientConfig) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), ClientError> {
        let len = buf.len() as u64;
        self.check_range(offset, len)?;
        let (start, end) = widen(offset, len, self.info.min_block, self.info.size);
        let mut whole = Vec::new();
        let mut at = start;
        for (o, l) in split(start, end - start, self.info.max_payload) {
            let data = self.request(CMD_READ, 0, o, l, &[])?;
            if start == offset && end == offset + len {
                let rel = (o - offset) as usize;
                buf[rel..rel + data.len()].copy_from_slice(&data);
            } else {
                whole.extend_from_slice(&data);
            }
            at += u64::from(l);
        }
        debug_assert_eq!(at, end);
        if !whole.is_empty() {
            let rel = (offset - start) as usize;
            buf.copy_from_slice(&whole[rel..rel + buf.len()]);
        }
        Ok(())
    }

    /// Writes `pieces` back to back from `offset`; with `fua`, each request is durable when it
    /// completes (`NBD_CMD_FLAG_FUA`, where the server offers it; otherwise a flush follows).
    pub fn write(&self, offset: u64, pieces: &[&[u8]], fua: bool) -> Result<(), ClientError> {
        let len: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        self.check_writable()?;
        self.check_range(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        if aligned(offset, len, self.info.min_block) {
            return self.write_aligned(offset, pieces, fua);
        }
        let _edges = lock(&self.edge_blocks);
        let (start, end) = widen(offset, len, self.info.min_block, self.info.size);
        let min = u64::from(self.info.min_block);
        let mut block = vec![0u8; (end - start) as usize];
        if start < offset {
            let head = min.min(end - start) as usize;
            self.read(start, &mut block[..head])?;
        }
        if offset + len < end {
            let tail_start = (end - min).max(start);
            let rel = (tail_start - start) as usize;
            self.read(tail_start, &mut block[rel..])?;
        }
        let mut at = (offset - start) as usize;
        for p in pieces {
            block[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        self.write_aligned(start, &[&block], fua)
    }

    fn write_aligned(&self, offset: u64, pieces: &[&[u8]], fua: bool) -> Result<(), ClientError> {
        let len: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        let fua_flag = if fua && self.info.has(FLAG_SEND_FUA) { CMD_FLAG_FUA } else { 0 };
        for (o, l) in split(offset, len, self.info.max_payload) {
            let part = sub_pieces(pieces, (o - offset) as usize, l as usize);
            self.request(CMD_WRITE, fua_flag, o, l, &part)?;
        }
        if fua && fua_flag == 0 {
            self.flush()?;
        }
        Ok(())
    }

    /// Makes completed writes durable (`NBD_CMD_FLUSH`). A server that does not offer flush has
    /// no write cache to empty, so there is nothing to do.
    pub fn flush(&self) -> Result<(), ClientError> {
        if self.info.has(FLAG_SEND_FLUSH) {
            self.request(CMD_FLUSH, 0, 0, 0, &[])?;
        }
        Ok(())
    }

    /// Whether the server zeroes ranges without the zeros being sent (`NBD_CMD_WRITE_ZEROES`).
    pub fn can_write_zeroes(&self) -> bool {
        self.info.has(FLAG_SEND_WRITE_ZEROES) && !self.info.read_only()
    }

    /// Makes `[offset, offset+len)` read as zeros: with `NBD_CMD_WRITE_ZEROES` where offered
    /// (without `NBD_CMD_FLAG_NO_HOLE`, so the server may deallocate), the unaligned edges and
    /// everything on a server without it by writing zeros.
    pub fn write_zeroes(&self, offset: u64, len: u64) -> Result<(), ClientError> {
        self.check_writable()?;
        self.check_range(offset, len)?;
        let middle = if self.can_write_zeroes() { narrow(offset, len, self.info.min_block) } else { None };
        let Some((start, end)) = middle else {
            return self.write_zero_data(offset, len);
        };
        self.write_zero_data(offset, start - offset)?;
        for (o, l) in split(start, end - start, (MAX_EFFECT_LEN as u32) / self.info.min_block * self.info.min_block) {
            self.request(CMD_WRITE_ZEROES, 0, o, l, &[])?;
        }
        self.write_zero_data(end, offset + len - end)
    }

    fn write_zero_data(&self, offset: u64, len: u64) -> Result<(), ClientError> {
        if len == 0 {
            return Ok(());
        }
        let zeros = vec![0u8; len.min(u64::from(self.info.max_payload)) as usize];
        for (o, l) in split(offset, len, zeros.len() as u32) {
            self.write(o, &[&zeros[..l as usize]], false)?;
        }
        Ok(())
    }

    /// Tells the server `[offset, offset+len)` is no longer needed (`NBD_CMD_TRIM`, the whole
    /// blocks inside the range). Advisory: what the range reads afterwards is not promised, and
    /// a server without trim is not asked.
    pub fn trim(&self, offset: u64, len: u64) -> Result<(), ClientError> {
        self.check_writable()?;
        self.check_range(offset, len)?;
        if !self.info.has(FLAG_SEND_TRIM) {
            return Ok(());
        }
        if let Some((start, end)) = narrow(offset, len, self.info.min_block) {
            for (o, l) in split(start, end - start, (MAX_EFFECT_LEN as u32) / self.info.min_block * self.info.min_block)
            {
                self.request(CMD_TRIM, 0, o, l, &[])?;
            }
        }
        Ok(())
    }

    fn check_range(&self, offset: u64, len: u64) -> Result<(), ClientError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.info.size => Ok(()),
            _ => Err(ClientError::OutOfRange { offset, len, size: self.info.size }),
        }
    }

    fn check_writable(&self) -> Result<(), ClientError> {
        if self.info.read_only() {
            return Err(ClientError::ReadOnly);
        }
        Ok(())
    }

    /// Sends one request on the next connection in turn; a read whose connection broke under it
    /// is sent again on a fresh one (see [`READ_RESENDS`]). A timeout is not retried: a silent
    /// server would make the array wait many times over.
    fn request(&self, kind: u16, flags: u16, offset: u64, len: u32, payload: &[&[u8]]) -> Result<Vec<u8>, ClientError> {
        let mut resends = 0;
        // A resent read goes to the same slot, whose connection is known broken by then and is
        // opened again: the next slot's may be broken too without anyone having seen it yet.
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        loop {
            let conn = self.connection(slot)?;
            let timeout = self.config().request_timeout;
            match conn.call(kind, flags, offset, len, payload, timeout) {
                Ok(data) => return Ok(data),
                Err(CallError::Server(source)) => {
                    return Err(ClientError::Server { command: command_name(kind), offset, source })
                }
                Err(CallError::TimedOut(timeout)) => {
                    return Err(ClientError::TimedOut { command: command_name(kind), timeout })
                }
                Err(CallError::Lost(reason)) if kind != CMD_READ || resends >= READ_RESENDS => {
                    return Err(ClientError::Lost { command: command_name(kind), reason })
                }
                Err(CallError::Lost(_)) => resends += 1,
            }
        }
    }

    /// The connection of slot `i`, opened again first if it broke.
    fn connection(&self, i: usize) -> Result<Arc<Connection>, ClientError> {
        let mut slot = lock(&self.slots[i]);
        if let Some(gone) = self.gone_error() {
            return Err(gone);
        }
        if let Some(c) = slot.as_ref() {
            if c.broken().is_none() {
                return Ok(Arc::clone(c));
            }
        }
        let broke = slot.take().and_then(|c| c.broken()).unwrap_or_else(|| "not connected".into());
        match self.reconnect(&broke) {
            Ok(c) => {
                let c = Arc::new(c);
                *slot = Some(Arc::clone(&c));
                Ok(c)
            }
            Err(e) => {
                let shown = self.gone_error_from(&e);
                lock(&self.gone).get_or_insert(e);
                Err(shown)
            }
        }
    }

    fn gone_error(&self) -> Option<ClientError> {
        lock(&self.gone).as_ref().map(|e| self.gone_error_from(e))
    }

    /// A copy of the error that ended the export, for one more request.
    fn gone_error_from(&self, e: &ClientError) -> ClientError {
        match e {
            ClientError::Gone { attempts, elapsed, reason } => {
                ClientError::Gone { attempts: *attempts, elapsed: *elapsed, reason: reason.clone() }
            }
            other => ClientError::Gone { attempts: 0, elapsed: Duration::ZERO, reason: other.to_string() },
        }
    }

    /// Opens a connection again after one broke (`broke` says why), waiting between attempts as
    /// [`ClientConfig::reconnect_delays`] says. The export must be the same as before.
    fn reconnect(&self, broke: &str) -> Result<Connection, ClientError> {
        let started = Instant::now();
        let config = self.config();
        let delays = config.reconnect_delays();
        let mut reason = broke.to_string();
        for (attempt, delay) in delays.iter().enumerate() {
            std::thread::sleep(*delay);
            match Connection::open(&self.uri, self.tls.as_ref(), config.connect_timeout) {
                Ok(c) => {
                    let now = *c.info();
                    if now.size != self.info.size || now.read_only() != self.info.read_only() {
                        return Err(ClientError::Changed {
                            was: self.info.size,
                            now: now.size,
                            was_flags: self.info.flags,
                            now_flags: now.flags,
                        });
                    }
                    return Ok(c);
                }
                Err(e) => reason = format!("{broke}; attempt {}: {e}", attempt + 1),
            }
        }
        Err(ClientError::Gone { attempts: delays.len(), elapsed: started.elapsed(), reason })
    }
}
