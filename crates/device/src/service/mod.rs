//! `ArrayService`: one assembled array served to many clients at once.
//!
//! The NBD server and the FUSE file both sit on this. It runs the sans-I/O engine on one thread
//! (the engine thread) and performs member I/O on a small pool of threads per member, so many
//! block requests, and many member I/Os per request, are in flight together; requests complete
//! in whatever order their member I/O finishes. Clients submit [`BlockOp`]s from any thread and
//! get the result through a callback, called exactly once, on the engine thread.
//!
//! Superblock bookkeeping follows md:
//! - the array is marked dirty before the first write is let through (the write waits for it);
//! - once no write has been in flight for [`ServiceConfig::clean_delay`], the members are
//!   flushed and the array is marked clean again (md's `safe_mode_delay`), so a crash while idle
//!   needs no resync;
//! - a member whose I/O fails is dropped from the array and the survivors' superblocks record it
//!   at once, so a later assembly leaves the stale member out;
//! - [`ArrayService::stop`] lets every accepted request finish, flushes, and marks clean.
//!
//! Only the engine thread touches the engine and the superblocks; workers only do member I/O.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use uraid_engine::array::{Completion, IoId, IoResult, MemberIo, Request, RequestId};
use uraid_engine::EngineError;
use uraid_layout::Level;

use crate::open_array::{MemberTarget, OpenArray};

/// A block request from a client.
#[derive(Debug, Clone)]
pub enum BlockOp {
    Read { offset: u64, len: u64 },
    /// With `fua`, the write is durable on the members when it completes.
    Write { offset: u64, data: Vec<u8>, fua: bool },
    /// Every write completed before the flush was submitted is durable when it completes.
    Flush,
    /// Advisory: release space inside the range where that is safe (whole stripes on parity
    /// levels; anything on the others). What the range reads afterwards is unspecified.
    Trim { offset: u64, len: u64 },
    /// The range reads back as zeros afterwards; with `may_deallocate`, by releasing space where
    /// possible (NBD's WRITE_ZEROES without NO_HOLE, fallocate's PUNCH_HOLE).
    Zero { offset: u64, len: u64, may_deallocate: bool, fua: bool },
}

impl BlockOp {
    fn writes(&self) -> bool {
        matches!(self, BlockOp::Write { .. } | BlockOp::Trim { .. } | BlockOp::Zero { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockReply {
    Data(Vec<u8>),
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("array is read-only")]
    ReadOnly,
    #[error("array is stopping")]
    Stopping,
    /// Writing the superblocks failed; the write was not let through.
    #[error("updating the superblocks failed: {0}")]
    Metadata(String),
}

/// Called once with a request's outcome.
pub type Done = Box<dyn FnOnce(Result<BlockReply, ServiceError>) + Send>;

#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// Threads doing member I/O per member: the number of member I/Os in flight on one member.
    pub workers_per_member: usize,
    /// How long the array stays marked dirty after the last write (md's `safe_mode_delay`).
    pub clean_delay: Duration,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        // md's safe_mode_delay is 200 ms; a little longer here, since every clean/dirty round
        // trip costs a flush of every member plus two superblock writes.
        ServiceConfig { workers_per_member: 4, clean_delay: Duration::from_millis(500) }
    }
}

/// Facts about the served array that front ends advertise.
#[derive(Debug, Clone)]
pub struct ServiceInfo {
    pub size: u64,
    pub read_only: bool,
    pub level: Level,
    /// Chunk size in bytes (0 where the level has none).
    pub chunk_bytes: u64,
    /// Data bytes in a full stripe, for parity levels: writes of whole stripes need no reads.
    pub stripe_data_bytes: Option<u64>,
    /// Every member releases discarded space cheaply (files): advisory trims are passed on.
    /// Otherwise a trim does nothing, since zeroing a block device can mean writing every byte.
    pub cheap_discard: bool,
}

impl ServiceInfo {
    /// The I/O size (a power of two) that avoids read-modify-write and splitting: the full
    /// stripe when that is a power of two, else the chunk; 4 KiB where there are no chunks.
    pub fn preferred_block_size(&self) -> u64 {
        let candidate = match self.stripe_data_bytes {
            Some(w) if w.is_power_of_two() => w,
            _ => self.chunk_bytes,
        };
        if candidate.is_power_of_two() && candidate >= 4096 {
            candidate
        } else {
            4096
        }
    }
}

/// What the service did over its life, reported when it stops.
#[derive(Debug, Clone, Default)]
pub struct StopReport {
    pub requests: u64,
    /// Whether the superblocks say clean at the end. False when the array was opened read-only
    /// over a dirty array, or still needs a resync (found dirty at assembly).
    pub clean: bool,
    /// The array was found dirty at assembly and has not been resynced.
    pub resync_needed: bool,
    /// Members that failed while serving, with the reason.
    pub failed_members: Vec<(String, String)>,
}

enum Msg {
    Submit(BlockOp, Done),
    IoDone(IoId, IoResult),
    Stop(Sender<Result<StopReport, String>>),
}

/// A handle for submitting requests; cheap to clone and send to other threads.
#[derive(Clone)]
pub struct ServiceHandle {
    tx: Sender<Msg>,
    info: Arc<ServiceInfo>,
}

impl ServiceHandle {
    pub fn info(&self) -> &ServiceInfo {
        &self.info
    }

    /// Submit `op`; `done` is called once with its outcome.
    pub fn submit(&self, op: BlockOp, done: Done) {
        if let Err(crossbeam_channel::SendError(Msg::Submit(_, done))) = self.tx.send(Msg::Submit(op, done)) {
            done(Err(ServiceError::Stopping));
        }
    }

    /// Submit `op` and wait for its outcome.
    pub fn call(&self, op: BlockOp) -> Result<BlockReply, ServiceError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.submit(
            op,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or(Err(ServiceError::Stopping))
    }
}

/// The running service: the engine thread and its member workers.
pub struct ArrayService {
    handle: ServiceHandle,
    engine_thread: Option<JoinHandle<()>>,
}

impl ArrayService {
    /// Start serving `array`.
    pub fn start(array: OpenArray, config: ServiceConfig) -> ArrayService {
        let geometry = array.engine().geometry().clone();
        let targets = array.member_targets();
        let cheap_discard = targets.iter().flatten().all(|t| t.dev.discard_is_cheap());
        let info = Arc::new(ServiceInfo {
            cheap_discard,
            size: array.size(),
            read_only: !array.writable(),
            level: geometry.level(),
            chunk_bytes: geometry.chunk_bytes(),
            stripe_data_bytes: geometry.stripe_data_bytes(),
        });
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut queues = Vec::new();
        let mut workers = Vec::new();
        for (slot, target) in targets.into_iter().enumerate() {
            let Some(target) = target else {
                queues.push(None);
                continue;
            };
            let (qtx, qrx) = crossbeam_channel::unbounded::<MemberIo>();
            for n in 0..config.workers_per_member.max(1) {
                let (qrx, back, target) = (qrx.clone(), tx.clone(), target.clone());
                let worker = std::thread::Builder::new()
                    .name(format!("member{slot}-io{n}"))
                    .spawn(move || member_worker(qrx, target, back))
                    .expect("spawning a member I/O thread");
                workers.push(worker);
            }
            queues.push(Some(qtx));
        }
        let runner = Runner {
            array,
            config,
            info: Arc::clone(&info),
            queues,
            workers,
            jobs: HashMap::new(),
            owner: HashMap::new(),
            next_job: 1,
            writing_jobs: 0,
            last_write: Instant::now(),
            report: StopReport::default(),
        };
        let engine_thread = std::thread::Builder::new()
            .name("engine".into())
            .spawn(move || runner.run(rx))
            .expect("spawning the engine thread");
        ArrayService { handle: ServiceHandle { tx, info }, engine_thread: Some(engine_thread) }
    }

    pub fn handle(&self) -> ServiceHandle {
        self.handle.clone()
    }

    /// Refuse new requests, finish every accepted one, flush the members and mark the array
    /// clean. Returns what happened while serving, or why the final update failed.
    pub fn stop(mut self) -> Result<StopReport, String> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let result = match self.handle.tx.send(Msg::Stop(tx)) {
            Ok(()) => rx.recv().unwrap_or_else(|_| Err("engine thread ended without a report".into())),
            Err(_) => Err("engine thread already ended".into()),
        };
        if let Some(t) = self.engine_thread.take() {
            if t.join().is_err() {
                return Err("engine thread panicked".into());
            }
        }
        result
    }
}

fn member_worker(queue: Receiver<MemberIo>, target: MemberTarget, back: Sender<Msg>) {
    for io in queue {
        // A panic here (perform refuses I/O outside the data area with one) must still answer
        // the engine, or the request would wait forever; the member is failed instead, which
        // stops further I/O to it.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.perform(&io)));
        let result = match outcome {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => IoResult::Failed(e.to_string()),
            Err(_) => IoResult::Failed(format!("internal error on {} (see the panic message above)", target.dev.name())),
        };
        if back.send(Msg::IoDone(io.id, result)).is_err() {
            break;
        }
    }
}

/// Largest zero-write the service puts in one engine request, and how many of them one zeroing
/// request keeps in flight: bounds the memory a huge WRITE_ZEROES can take.
const ZERO_PIECE: u64 = 1 << 20;
const ZERO_PIECES_IN_FLIGHT: usize = 8;

/// One client request, possibly several engine requests.
struct Job {
    done: Option<Done>,
    /// Engine requests outstanding.
    outstanding: usize,
    data: Option<Vec<u8>>,
    error: Option<ServiceError>,
    /// Flush after the writes complete (FUA).
    then_flush: bool,
    writes: bool,
    /// Zeros still to be written, as plain writes: `[next, end)`.
    zero_cursor: Option<(u64, u64)>,
}

struct Runner {
    array: OpenArray,
    config: ServiceConfig,
    info: Arc<ServiceInfo>,
    queues: Vec<Option<Sender<MemberIo>>>,
    workers: Vec<JoinHandle<()>>,
    jobs: HashMap<u64, Job>,
    owner: HashMap<RequestId, u64>,
    next_job: u64,
    writing_jobs: usize,
    last_write: Instant,
    report: StopReport,
}

impl Runner {
    fn run(mut self, rx: Receiver<Msg>) {
        let mut stopping: Option<Sender<Result<StopReport, String>>> = None;
        loop {
            if let Some(ack) = &stopping {
                if self.jobs.is_empty() {
                    let result = self.finish();
                    let _ = ack.send(result);
                    return;
                }
            }
            let idle_clean_due =
                self.array.is_dirty() && !self.array.needs_resync() && self.writing_jobs == 0 && stopping.is_none();
            let msg = if idle_clean_due {
                let deadline = self.last_write + self.config.clean_delay;
                match rx.recv_deadline(deadline) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => {
                        if let Err(e) = self.array.flush_and_mark_clean() {
                            log(&format!("marking the array clean failed: {e}"));
                            // Try again after another delay rather than spinning.
                            self.last_write = Instant::now();
                        }
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            } else {
                match rx.recv() {
                    Ok(m) => m,
                    Err(_) => return,
                }
            };
            match msg {
                Msg::Submit(op, done) => {
                    if stopping.is_some() {
                        done(Err(ServiceError::Stopping));
                    } else {
                        self.report.requests += 1;
                        self.accept(op, done);
                    }
                }
                Msg::IoDone(id, result) => {
                    self.array.engine_mut().complete_io(id, result);
                    self.after_completions();
                }
                Msg::Stop(ack) => stopping = Some(ack),
            }
            self.pump();
        }
    }

    fn accept(&mut self, op: BlockOp, done: Done) {
        if op.writes() {
            if self.info.read_only {
                return done(Err(ServiceError::ReadOnly));
            }
            if !self.array.is_dirty() {
                if let Err(e) = self.array.mark_dirty() {
                    return done(Err(ServiceError::Metadata(e.to_string())));
                }
            }
        }
        let size = self.info.size;
        let range_ok = |offset: u64, len: u64| match offset.checked_add(len) {
            Some(end) if end <= size => Ok(()),
            _ => Err(ServiceError::Engine(EngineError::OutOfRange { offset, len, size })),
        };
        let id = self.next_job;
        self.next_job += 1;
        let writes = op.writes();
        let mut job = Job {
            done: Some(done),
            outstanding: 0,
            data: None,
            error: None,
            then_flush: false,
            writes,
            zero_cursor: None,
        };
        let mut requests = Vec::new();
        match op {
            BlockOp::Read { offset, len } => requests.push(Request::Read { offset, len }),
            BlockOp::Write { offset, data, fua } => {
                job.then_flush = fua;
                requests.push(Request::Write { offset, data });
            }
            BlockOp::Flush => requests.push(Request::Flush),
            BlockOp::Trim { offset, len } => {
                if let Err(e) = range_ok(offset, len) {
                    return (job.done.take().expect("fresh job"))(Err(e));
                }
                let (lo, hi) = self.discardable(offset, len);
                if hi > lo && self.info.cheap_discard {
                    requests.push(Request::Discard { offset: lo, len: hi - lo });
                }
            }
            BlockOp::Zero { offset, len, may_deallocate, fua } => {
                if let Err(e) = range_ok(offset, len) {
                    return (job.done.take().expect("fresh job"))(Err(e));
                }
                job.then_flush = fua;
                if may_deallocate {
                    let (lo, hi) = self.discardable(offset, len);
                    if hi > lo {
                        requests.push(Request::Discard { offset: lo, len: hi - lo });
                        // The edges of a part-stripe range are written as zeros, the head now
                        // and the tail through the cursor.
                        if lo > offset {
                            requests.push(Request::Write { offset, data: vec![0; (lo - offset) as usize] });
                        }
                        if offset + len > hi {
                            job.zero_cursor = Some((hi, offset + len));
                        }
                    } else {
                        job.zero_cursor = Some((offset, offset + len));
                    }
                } else {
                    job.zero_cursor = Some((offset, offset + len));
                }
            }
        }
        if writes {
            self.writing_jobs += 1;
        }
        self.jobs.insert(id, job);
        for request in requests {
            self.submit_engine(id, request);
        }
        self.refill_zeros(id);
        self.maybe_finish(id);
    }

    /// The part of `[offset, offset+len)` the engine can discard: whole stripes on parity
    /// levels, all of it elsewhere.
    fn discardable(&self, offset: u64, len: u64) -> (u64, u64) {
        match self.info.stripe_data_bytes {
            Some(w) => {
                let lo = offset.div_ceil(w) * w;
                let hi = (offset + len) / w * w;
                if hi > lo {
                    (lo, hi)
                } else {
                    (0, 0)
                }
            }
            None => (offset, offset + len),
        }
    }

    fn submit_engine(&mut self, job_id: u64, request: Request) {
        match self.array.engine_mut().submit(request) {
            Ok(rid) => {
                self.owner.insert(rid, job_id);
                self.jobs.get_mut(&job_id).expect("live job").outstanding += 1;
            }
            Err(e) => {
                let job = self.jobs.get_mut(&job_id).expect("live job");
                job.error.get_or_insert(ServiceError::Engine(e));
            }
        }
    }

    /// Keep a zeroing job's plain zero-writes flowing, a bounded number at a time.
    fn refill_zeros(&mut self, job_id: u64) {
        loop {
            let Some(job) = self.jobs.get_mut(&job_id) else { return };
            if job.error.is_some() || job.outstanding >= ZERO_PIECES_IN_FLIGHT {
                return;
            }
            let Some((next, end)) = job.zero_cursor else { return };
            let n = ZERO_PIECE.min(end - next);
            job.zero_cursor = (next + n < end).then_some((next + n, end));
            self.submit_engine(job_id, Request::Write { offset: next, data: vec![0; n as usize] });
        }
    }

    /// Route finished engine requests to their jobs and record member failures.
    fn after_completions(&mut self) {
        while let Some((rid, result)) = self.array.engine_mut().next_completion() {
            let job_id = self.owner.remove(&rid).expect("completion of an unknown engine request");
            let job = self.jobs.get_mut(&job_id).expect("live job");
            job.outstanding -= 1;
            match result {
                Ok(Completion::Read(d)) => job.data = Some(d),
                Ok(_) => {}
                Err(e) => {
                    job.error.get_or_insert(ServiceError::Engine(e));
                }
            }
            self.refill_zeros(job_id);
            self.maybe_finish(job_id);
        }
        let failed = self.array.note_events();
        if !failed.is_empty() {
            for (name, reason) in &failed {
                log(&format!("member {name} failed and is out of the array: {reason}"));
            }
            self.report.failed_members.extend(failed);
            if let Err(e) = self.array.record_roles() {
                log(&format!("recording the failed member in the superblocks failed: {e}"));
            }
        }
    }

    fn maybe_finish(&mut self, job_id: u64) {
        let job = self.jobs.get_mut(&job_id).expect("live job");
        if job.outstanding > 0 || (job.zero_cursor.is_some() && job.error.is_none()) {
            return;
        }
        if job.then_flush && job.error.is_none() {
            job.then_flush = false;
            self.submit_engine(job_id, Request::Flush);
            if self.jobs[&job_id].outstanding > 0 {
                return;
            }
        }
        let mut job = self.jobs.remove(&job_id).expect("live job");
        if job.writes {
            self.writing_jobs -= 1;
            self.last_write = Instant::now();
        }
        let result = match (job.error.take(), job.data.take()) {
            (Some(e), _) => Err(e),
            (None, Some(d)) => Ok(BlockReply::Data(d)),
            (None, None) => Ok(BlockReply::Done),
        };
        (job.done.take().expect("job finished once"))(result);
    }

    /// Hand the engine's member I/O to the workers.
    fn pump(&mut self) {
        while let Some(io) = self.array.engine_mut().next_io() {
            let queue = self.queues[io.slot].as_ref().expect("engine used an empty slot");
            if let Err(crossbeam_channel::SendError(io)) = queue.send(io) {
                // The workers are gone (only at the very end); fail the I/O so nothing waits.
                self.array.engine_mut().complete_io(io.id, IoResult::Failed("member I/O threads stopped".into()));
                self.after_completions();
            }
        }
    }

    /// Everything accepted is done: stop the workers, flush, mark clean.
    fn finish(mut self) -> Result<StopReport, String> {
        self.queues.clear();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        if self.array.writable() && (self.array.is_dirty() || self.array.roles_changed()) {
            self.array.flush_and_mark_clean().map_err(|e| e.to_string())?;
        }
        self.report.clean = !self.array.is_dirty();
        self.report.resync_needed = self.array.needs_resync();
        Ok(self.report)
    }
}

/// Service messages go to standard error, one line each.
fn log(line: &str) {
    eprintln!("uraid: {line}");
}
