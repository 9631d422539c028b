//! Test support: [`MemExport`], an in-memory export that completes requests on its own threads
//! after random delays (so completions come back in a different order than they went in), and
//! [`TestClient`], a small NBD client that checks what it receives as strictly as it can.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::export::{Completion, Errno, Export, ExportCommand, ExportError, ExportReply, SplicedData};
use crate::proto::*;

/// Builds a [`MemExport`].
pub struct MemExportBuilder {
    data: Vec<u8>,
    read_only: bool,
    preferred_block_size: u32,
    multi_conn: bool,
    max_delay: Duration,
    workers: usize,
    record_history: bool,
    seed: u64,
    inline: bool,
    spliced_reads: bool,
}

impl MemExportBuilder {
    /// Answer reads with [`ExportReply::Spliced`]: the writer then sends the reply header and
    /// hands the socket's descriptor to the export's data, as it does for uraid's spliced reads.
    pub fn spliced_reads(mut self, spliced: bool) -> Self {
        self.spliced_reads = spliced;
        self
    }
    /// Complete every request inside `submit`, on the submitting thread (no delay, no worker).
    pub fn inline(mut self, inline: bool) -> Self {
        self.inline = inline;
        self
    }
    pub fn data(mut self, data: Vec<u8>) -> Self {
        self.data = data;
        self
    }
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }
    pub fn preferred_block_size(mut self, size: u32) -> Self {
        self.preferred_block_size = size;
        self
    }
    pub fn multi_conn(mut self, multi_conn: bool) -> Self {
        self.multi_conn = multi_conn;
        self
    }
    /// Each request completes after a random delay in `0..=max_delay`.
    pub fn max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }
    /// Keep every executed command (writes with their data) for [`MemExport::take_history`].
    pub fn record_history(mut self, record: bool) -> Self {
        self.record_history = record;
        self
    }
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn build(self) -> Arc<MemExport> {
        let shared = Arc::new(Shared {
            data: Mutex::new(self.data),
            queue: Mutex::new(Queue {
                jobs: BinaryHeap::new(),
                held: false,
                shutdown: false,
                next_seq: 0,
                rng: self.seed | 1,
            }),
            queue_changed: Condvar::new(),
            history: Mutex::new(Vec::new()),
            record_history: self.record_history,
            spliced_reads: self.spliced_reads,
            fail_range: Mutex::new(None),
            drop_range: Mutex::new(None),
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            max_pending: AtomicUsize::new(0),
        });
        for i in 0..self.workers {
            let shared = shared.clone();
            thread::Builder::new()
                .name(format!("mem-export-{i}"))
                .spawn(move || shared.work())
                .expect("spawning a MemExport worker");
        }
        Arc::new(MemExport {
            shared,
            read_only: self.read_only,
            preferred_block_size: AtomicU32::new(self.preferred_block_size),
            multi_conn: self.multi_conn,
            max_delay: self.max_delay,
            inline: self.inline,
        })
    }
}

/// An export kept in memory. Commands take effect when they complete, not when they are
/// submitted, exactly as on a real device with a queue.
pub struct MemExport {
    shared: Arc<Shared>,
    read_only: bool,
    /// Changeable while served, as a device that changes shape does.
    preferred_block_size: AtomicU32,
    multi_conn: bool,
    max_delay: Duration,
    inline: bool,
}

struct Shared {
    data: Mutex<Vec<u8>>,
    queue: Mutex<Queue>,
    queue_changed: Condvar,
    history: Mutex<Vec<ExportCommand>>,
    record_history: bool,
    spliced_reads: bool,
    fail_range: Mutex<Option<(u64, u64)>>,
    drop_range: Mutex<Option<(u64, u64)>>,
    submitted: AtomicU64,
    completed: AtomicU64,
    pending: AtomicUsize,
    max_pending: AtomicUsize,
}

struct Queue {
    jobs: BinaryHeap<Job>,
    held: bool,
    shutdown: bool,
    next_seq: u64,
    rng: u64,
}

struct Job {
    due: Instant,
    seq: u64,
    cmd: ExportCommand,
    done: Completion,
}

// Earliest due first (BinaryHeap is a max-heap, so the comparison is reversed).
impl Ord for Job {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}
impl PartialOrd for Job {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Job {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}
impl Eq for Job {}

fn overlaps(range: Option<(u64, u64)>, window: Option<(u64, u64)>) -> bool {
    match (range, window) {
        (Some((offset, len)), Some((start, end))) => offset < end && start < offset + len,
        _ => false,
    }
}

impl Shared {
    fn work(&self) {
        loop {
            let job = {
                let mut q = self.queue.lock().unwrap();
                loop {
                    if q.shutdown && q.jobs.is_empty() {
                        return;
                    }
                    if (q.held && !q.shutdown) || q.jobs.is_empty() {
                        q = self.queue_changed.wait(q).unwrap();
                        continue;
                    }
                    let now = Instant::now();
                    let due = q.jobs.peek().unwrap().due;
                    if due <= now || q.shutdown {
                        break q.jobs.pop().unwrap();
                    }
                    q = self.queue_changed.wait_timeout(q, due - now).unwrap().0;
                }
            };
            let range = job.cmd.range();
            if overlaps(range, *self.drop_range.lock().unwrap()) {
                // Simulates a buggy export: the callback is dropped without being called.
                self.pending.fetch_sub(1, Ordering::SeqCst);
                self.completed.fetch_add(1, Ordering::SeqCst);
                drop(job.done);
                continue;
            }
            let result = if overlaps(range, *self.fail_range.lock().unwrap()) {
                Err(ExportError::new(Errno::Io, format!("injected failure at {range:?}")))
            } else {
                Ok(self.execute(&job.cmd))
            };
            if self.record_history && result.is_ok() {
                self.history.lock().unwrap().push(job.cmd);
            }
            self.pending.fetch_sub(1, Ordering::SeqCst);
            self.completed.fetch_add(1, Ordering::SeqCst);
            (job.done)(result);
        }
    }

    fn execute(&self, cmd: &ExportCommand) -> ExportReply {
        let mut data = self.data.lock().unwrap();
        match *cmd {
            ExportCommand::Read { offset, len } => {
                let o = offset as usize;
                let bytes = data[o..o + len as usize].to_vec();
                if self.spliced_reads {
                    ExportReply::Spliced(Box::new(DescriptorData(bytes)))
                } else {
                    ExportReply::Data(bytes.into())
                }
            }
            ExportCommand::Write { offset, data: ref d, .. } => {
                let o = offset as usize;
                data[o..o + d.len()].copy_from_slice(d);
                ExportReply::Done
            }
            // Trimmed contents are unspecified; zeros are as good as anything.
            ExportCommand::Trim { offset, len, .. } | ExportCommand::WriteZeroes { offset, len, .. } => {
                let o = offset as usize;
                data[o..o + len as usize].fill(0);
                ExportReply::Done
            }
            ExportCommand::Flush | ExportCommand::Cache { .. } => ExportReply::Done,
        }
    }
}

impl MemExport {
    pub fn builder(size: usize) -> MemExportBuilder {
        MemExportBuilder {
            data: vec![0; size],
            read_only: false,
            preferred_block_size: 4096,
            multi_conn: true,
            max_delay: Duration::from_millis(2),
            workers: 2,
            record_history: false,
            seed: 0x9e37_79b9_7f4a_7c15,
            inline: false,
            spliced_reads: false,
        }
    }

    pub fn contents(&self) -> Vec<u8> {
        self.shared.data.lock().unwrap().clone()
    }

    pub fn set_contents(&self, data: &[u8]) {
        self.shared.data.lock().unwrap().copy_from_slice(data);
    }

    /// Stops completing requests (they queue up) until [`MemExport::release`].
    pub fn hold(&self) {
        self.shared.queue.lock().unwrap().held = true;
    }

    pub fn release(&self) {
        self.shared.queue.lock().unwrap().held = false;
        self.shared.queue_changed.notify_all();
    }

    /// Commands touching `[start, end)` fail with EIO.
    pub fn fail_range(&self, range: Option<(u64, u64)>) {
        *self.shared.fail_range.lock().unwrap() = range;
    }

    /// Commands touching `[start, end)` have their completion dropped without being called.
    pub fn drop_range(&self, range: Option<(u64, u64)>) {
        *self.shared.drop_range.lock().unwrap() = range;
    }

    /// The successful commands executed since the last call, in execution order.
    pub fn take_history(&self) -> Vec<ExportCommand> {
        std::mem::take(&mut *self.shared.history.lock().unwrap())
    }

    pub fn submitted(&self) -> u64 {
        self.shared.submitted.load(Ordering::SeqCst)
    }

    pub fn completed(&self) -> u64 {
        self.shared.completed.load(Ordering::SeqCst)
    }

    /// Submitted but not yet completed.
    pub fn pending(&self) -> usize {
        self.shared.pending.load(Ordering::SeqCst)
    }

    /// The most requests that were pending at once.
    pub fn max_pending(&self) -> usize {
        self.shared.max_pending.load(Ordering::SeqCst)
    }
}

impl Drop for MemExport {
    fn drop(&mut self) {
        self.shared.queue.lock().unwrap().shutdown = true;
        self.shared.queue_changed.notify_all();
    }
}

impl MemExport {
    /// Change the preferred block size the export gives (connections made from now on are
    /// told it).
    pub fn set_preferred_block_size(&self, size: u32) {
        self.preferred_block_size.store(size, Ordering::Relaxed);
    }
}

impl Export for MemExport {
    fn size(&self) -> u64 {
        self.shared.data.lock().unwrap().len() as u64
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    fn preferred_block_size(&self) -> u32 {
        self.preferred_block_size.load(Ordering::Relaxed)
    }
    fn multi_conn_safe(&self) -> bool {
        self.multi_conn
    }
    fn submit(&self, cmd: ExportCommand, done: Completion) {
        if let Some((offset, len)) = cmd.range() {
            let size = self.size();
            assert!(len > 0 && offset + len <= size, "server submitted {cmd:?} outside a {size}-byte export");
        }
        if self.read_only {
            assert!(
                !matches!(
                    cmd,
                    ExportCommand::Write { .. } | ExportCommand::Trim { .. } | ExportCommand::WriteZeroes { .. }
                ),
                "server submitted {cmd:?} to a read-only export"
            );
        }
        self.shared.submitted.fetch_add(1, Ordering::SeqCst);
        if self.inline {
            let result = self.shared.execute(&cmd);
            if self.shared.record_history {
                self.shared.history.lock().unwrap().push(cmd);
            }
            self.shared.completed.fetch_add(1, Ordering::SeqCst);
            return done(Ok(result));
        }
        let pending = self.shared.pending.fetch_add(1, Ordering::SeqCst) + 1;
        self.shared.max_pending.fetch_max(pending, Ordering::SeqCst);
        let mut q = self.shared.queue.lock().unwrap();
        // xorshift64: good enough to scatter completion times, and needs no dependency.
        q.rng ^= q.rng << 13;
        q.rng ^= q.rng >> 7;
        q.rng ^= q.rng << 17;
        let nanos = self.max_delay.as_nanos() as u64;
        let delay = if nanos == 0 { 0 } else { q.rng % (nanos + 1) };
        let seq = q.next_seq;
        q.next_seq += 1;
        q.jobs.push(Job { due: Instant::now() + Duration::from_nanos(delay), seq, cmd, done });
        self.shared.queue_changed.notify_all();
    }
}

/// A spliced reply's data as [`MemExport`] gives it: written with `write(2)` straight to the
/// descriptor the server hands over, which is the contract a real pipe's `splice(2)` relies on.
struct DescriptorData(Vec<u8>);

impl SplicedData for DescriptorData {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn splice_to(&mut self, out: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
        std::fs::File::from(out.try_clone_to_owned()?).write_all(&self.0)?;
        // Sent bytes leave a pipe: so do they here.
        self.0.clear();
        Ok(())
    }
}

/// One option reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionReply {
    pub option: u32,
    pub reply_type: u32,
    pub data: Vec<u8>,
}

/// The complete reply to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub handle: u64,
    /// 0 on success.
    pub error: u32,
    /// Read data (empty for other commands and on error).
    pub data: Vec<u8>,
    /// The error chunk's message (structured replies only).
    pub message: Option<String>,
    /// Chunks received (0 for a simple reply).
    pub chunks: usize,
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

struct PendingRequest {
    kind: u16,
    offset: u64,
    len: u32,
}

/// Partially received structured reply.
#[derive(Default)]
struct Partial {
    data: Vec<u8>,
    covered: u64,
    error: u32,
    message: Option<String>,
    chunks: usize,
}

/// A minimal NBD client for tests. Anything it receives that the protocol does not allow is an
/// `InvalidData` error.
pub struct TestClient<S> {
    stream: S,
    pub handshake_flags: u16,
    pub client_flags: u32,
    pub structured: bool,
    pub size: u64,
    pub transmission_flags: u16,
    next_handle: u64,
    pending: HashMap<u64, PendingRequest>,
    partial: HashMap<u64, Partial>,
}

impl<S: Read + Write> TestClient<S> {
    /// Reads the greeting and answers with `client_flags`.
    pub fn start(mut stream: S, client_flags: u32) -> io::Result<Self> {
        let mut greeting = [0u8; GREETING_LEN];
        stream.read_exact(&mut greeting)?;
        let handshake_flags = decode_greeting(&greeting).map_err(|e| invalid(e.to_string()))?;
        stream.write_all(&client_flags.to_be_bytes())?;
        Ok(TestClient {
            stream,
            handshake_flags,
            client_flags,
            structured: false,
            size: 0,
            transmission_flags: 0,
            next_handle: 1,
            pending: HashMap::new(),
            partial: HashMap::new(),
        })
    }

    /// Greeting with both client flags set, as a modern client would.
    pub fn start_default(stream: S) -> io::Result<Self> {
        Self::start(stream, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES)
    }

    pub fn stream(&mut self) -> &mut S {
        &mut self.stream
    }

    pub fn into_stream(self) -> S {
        self.stream
    }

    pub fn send_option(&mut self, option: u32, data: &[u8]) -> io::Result<()> {
        let mut b = OptionHeader { option, len: data.len() as u32 }.encode().to_vec();
        b.extend_from_slice(data);
        self.stream.write_all(&b)
    }

    pub fn read_option_reply(&mut self) -> io::Result<OptionReply> {
        let mut h = [0u8; OPTION_REPLY_HEADER_LEN];
        self.stream.read_exact(&mut h)?;
        let h = OptionReplyHeader::decode(&h).map_err(|e| invalid(e.to_string()))?;
        if h.len > 1 << 20 {
            return Err(invalid(format!("option reply of {} bytes", h.len)));
        }
        let mut data = vec![0; h.len as usize];
        self.stream.read_exact(&mut data)?;
        Ok(OptionReply { option: h.option, reply_type: h.reply_type, data })
    }

    /// Sends an option and reads replies up to the final one (an ACK or an error).
    pub fn option(&mut self, option: u32, data: &[u8]) -> io::Result<Vec<OptionReply>> {
        self.send_option(option, data)?;
        let mut replies = Vec::new();
        loop {
            let r = self.read_option_reply()?;
            if r.option != option {
                return Err(invalid(format!("reply for option {} to option {option}", r.option)));
            }
            let last = r.reply_type == REP_ACK || r.reply_type & REP_ERR_BIT != 0;
            replies.push(r);
            if last {
                return Ok(replies);
            }
        }
    }

    /// `NBD_OPT_STRUCTURED_REPLY`, expecting an ACK.
    pub fn negotiate_structured(&mut self) -> io::Result<()> {
        let replies = self.option(OPT_STRUCTURED_REPLY, &[])?;
        if replies.len() != 1 || replies[0].reply_type != REP_ACK {
            return Err(invalid(format!("structured reply refused: {replies:?}")));
        }
        self.structured = true;
        Ok(())
    }

    /// `NBD_OPT_INFO` or `NBD_OPT_GO`; on success the size and transmission flags are taken from
    /// `NBD_INFO_EXPORT`. Returns all replies, the final one last.
    pub fn info_or_go(&mut self, option: u32, name: &str, info: &[u16]) -> io::Result<Vec<OptionReply>> {
        let request = InfoRequest { name: name.as_bytes().to_vec(), requests: info.to_vec() };
        let replies = self.option(option, &request.encode())?;
        let last = replies.last().unwrap();
        if last.reply_type == REP_ACK {
            let export = replies
                .iter()
                .find(|r| r.reply_type == REP_INFO && r.data.len() >= 2 && r.data[..2] == INFO_EXPORT.to_be_bytes())
                .ok_or_else(|| invalid("success without NBD_INFO_EXPORT"))?;
            if export.data.len() != 12 {
                return Err(invalid(format!("NBD_INFO_EXPORT of {} bytes", export.data.len())));
            }
            self.size = u64::from_be_bytes(export.data[2..10].try_into().unwrap());
            self.transmission_flags = u16::from_be_bytes([export.data[10], export.data[11]]);
        }
        Ok(replies)
    }

    /// `NBD_OPT_GO`, expecting success.
    pub fn go(&mut self, name: &str, info: &[u16]) -> io::Result<Vec<OptionReply>> {
        let replies = self.info_or_go(OPT_GO, name, info)?;
        if replies.last().unwrap().reply_type != REP_ACK {
            return Err(invalid(format!("NBD_OPT_GO failed: {replies:?}")));
        }
        Ok(replies)
    }

    /// `NBD_OPT_EXPORT_NAME`, reading the size and flags (and the zeroes, unless NO_ZEROES).
    pub fn export_name(&mut self, name: &str) -> io::Result<()> {
        self.send_option(OPT_EXPORT_NAME, name.as_bytes())?;
        let mut b = [0u8; 10];
        self.stream.read_exact(&mut b)?;
        self.size = u64::from_be_bytes(b[..8].try_into().unwrap());
        self.transmission_flags = u16::from_be_bytes([b[8], b[9]]);
        if self.client_flags & FLAG_C_NO_ZEROES == 0 {
            let mut zeroes = [0u8; EXPORT_NAME_ZEROES];
            self.stream.read_exact(&mut zeroes)?;
            if zeroes.iter().any(|&z| z != 0) {
                return Err(invalid("nonzero reserved bytes after the export name reply"));
            }
        }
        Ok(())
    }

    /// Sends a request with a fresh handle; `payload` follows the header as is (so a test can
    /// send a WRITE whose payload disagrees with its length).
    pub fn send_request(&mut self, flags: u16, kind: u16, offset: u64, len: u32, payload: &[u8]) -> io::Result<u64> {
        let handle = self.next_handle;
        self.next_handle += 1;
        self.send_with_handle(RequestHeader { flags, kind, handle, offset, len }, payload)?;
        Ok(handle)
    }

    pub fn send_with_handle(&mut self, header: RequestHeader, payload: &[u8]) -> io::Result<()> {
        if header.kind != CMD_DISC {
            self.pending
                .insert(header.handle, PendingRequest { kind: header.kind, offset: header.offset, len: header.len });
        }
        let mut b = header.encode().to_vec();
        b.extend_from_slice(payload);
        self.stream.write_all(&b)
    }

    /// Receives the next complete reply (of whichever request finishes first).
    pub fn recv(&mut self) -> io::Result<Reply> {
        loop {
            let mut magic = [0u8; 4];
            self.stream.read_exact(&mut magic)?;
            match u32::from_be_bytes(magic) {
                SIMPLE_REPLY_MAGIC => return self.recv_simple(magic),
                STRUCTURED_REPLY_MAGIC if self.structured => {
                    if let Some(reply) = self.recv_chunk(magic)? {
                        return Ok(reply);
                    }
                }
                other => return Err(invalid(format!("bad reply magic {other:#x}"))),
            }
        }
    }

    fn recv_simple(&mut self, magic: [u8; 4]) -> io::Result<Reply> {
        let mut h = [0u8; SIMPLE_REPLY_HEADER_LEN];
        h[..4].copy_from_slice(&magic);
        self.stream.read_exact(&mut h[4..])?;
        let h = SimpleReplyHeader::decode(&h).unwrap();
        let req =
            self.pending.remove(&h.handle).ok_or_else(|| invalid(format!("reply to unknown handle {}", h.handle)))?;
        if self.structured && req.kind == CMD_READ {
            return Err(invalid("simple reply to a read after structured replies were negotiated"));
        }
        let mut data = Vec::new();
        if req.kind == CMD_READ && h.error == 0 {
            data = vec![0; req.len as usize];
            self.stream.read_exact(&mut data)?;
        }
        Ok(Reply { handle: h.handle, error: h.error, data, message: None, chunks: 0 })
    }

    fn recv_chunk(&mut self, magic: [u8; 4]) -> io::Result<Option<Reply>> {
        let mut h = [0u8; STRUCTURED_REPLY_HEADER_LEN];
        h[..4].copy_from_slice(&magic);
        self.stream.read_exact(&mut h[4..])?;
        let h = ChunkHeader::decode(&h).unwrap();
        let req =
            self.pending.get(&h.handle).ok_or_else(|| invalid(format!("chunk for unknown handle {}", h.handle)))?;
        if h.len > (1 << 30) + 8 {
            return Err(invalid(format!("chunk of {} bytes", h.len)));
        }
        let mut payload = vec![0; h.len as usize];
        self.stream.read_exact(&mut payload)?;
        let (kind, req_offset, req_len) = (req.kind, req.offset, req.len);
        let partial = self.partial.entry(h.handle).or_default();
        if partial.chunks == 0 && kind == CMD_READ {
            partial.data = vec![0; req_len as usize];
        }
        partial.chunks += 1;
        match h.chunk_type {
            REPLY_TYPE_NONE => {
                if h.len != 0 || h.flags & REPLY_FLAG_DONE == 0 {
                    return Err(invalid("NBD_REPLY_TYPE_NONE with a payload or without DONE"));
                }
            }
            REPLY_TYPE_OFFSET_DATA => {
                if kind != CMD_READ || h.len < 9 {
                    return Err(invalid("bad NBD_REPLY_TYPE_OFFSET_DATA"));
                }
                let offset = u64::from_be_bytes(payload[..8].try_into().unwrap());
                let data = &payload[8..];
                let start = offset.checked_sub(req_offset).ok_or_else(|| invalid("data chunk before the request"))?;
                if start + data.len() as u64 > u64::from(req_len) {
                    return Err(invalid("data chunk past the request"));
                }
                partial.data[start as usize..start as usize + data.len()].copy_from_slice(data);
                partial.covered += data.len() as u64;
            }
            t if t & REPLY_TYPE_ERR_BIT != 0 => {
                let (error, message) = decode_error_chunk(&payload).ok_or_else(|| invalid("malformed error chunk"))?;
                if error == 0 {
                    return Err(invalid("error chunk with error 0"));
                }
                partial.error = error;
                partial.message = Some(message);
            }
            t => return Err(invalid(format!("unexpected chunk type {t}"))),
        }
        if h.flags & REPLY_FLAG_DONE == 0 {
            return Ok(None);
        }
        let partial = self.partial.remove(&h.handle).unwrap();
        self.pending.remove(&h.handle);
        if partial.error == 0 && kind == CMD_READ && partial.covered != u64::from(req_len) {
            return Err(invalid(format!("read of {req_len} bytes answered with {} bytes", partial.covered)));
        }
        let data = if partial.error == 0 { partial.data } else { Vec::new() };
        Ok(Some(Reply {
            handle: h.handle,
            error: partial.error,
            data,
            message: partial.message,
            chunks: partial.chunks,
        }))
    }

    /// Sends one request and waits for its reply (nothing else may be in flight).
    pub fn request(&mut self, flags: u16, kind: u16, offset: u64, len: u32, payload: &[u8]) -> io::Result<Reply> {
        let handle = self.send_request(flags, kind, offset, len, payload)?;
        let reply = self.recv()?;
        if reply.handle != handle {
            return Err(invalid(format!("expected the reply to {handle}, got {}", reply.handle)));
        }
        Ok(reply)
    }

    pub fn read(&mut self, offset: u64, len: u32) -> io::Result<Reply> {
        self.request(0, CMD_READ, offset, len, &[])
    }

    pub fn write(&mut self, offset: u64, data: &[u8], flags: u16) -> io::Result<Reply> {
        self.request(flags, CMD_WRITE, offset, data.len() as u32, data)
    }

    /// Sends `NBD_CMD_DISC` and waits for the server to close the connection; returns anything
    /// received in between (which should be nothing).
    pub fn disconnect(mut self) -> io::Result<Vec<u8>> {
        let handle = self.next_handle;
        self.send_with_handle(RequestHeader { flags: 0, kind: CMD_DISC, handle, offset: 0, len: 0 }, &[])?;
        let mut rest = Vec::new();
        self.stream.read_to_end(&mut rest)?;
        Ok(rest)
    }
}
