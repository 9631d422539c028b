//! `ArrayService`: one assembled array served to many clients at once.
//!
//! The NBD server and the FUSE file both sit on this. It runs the sans-I/O engine on one thread
//! (the engine thread) and performs member I/O with one io_uring per member ([`uring`]), or on a
//! small pool of threads per member ([`IoBackend::Threads`], and always for devices without a
//! file descriptor), so many block requests, and many member I/Os per request, are in flight
//! together; requests complete in whatever order their member I/O finishes. Clients submit [`BlockOp`]s from any thread and
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
//!
//! Background passes (md's `sync_action`: resync, check, repair) run on the same engine thread
//! in steps of about a megabyte, interleaved with client requests and throttled as md throttles
//! them (see [`sync`]). A resync starts by itself when an array found dirty is opened writable;
//! once it has covered the whole array, the array may be marked clean again.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use uraid_engine::array::{Completion, IoId, IoResult, MemberIo, Request, RequestId};
use uraid_engine::geometry::Geometry;
use uraid_engine::idmap::IdMap;
use uraid_engine::{EngineError, IoBuf, ReadPolicy, SplitTuning};
use uraid_layout::Level;

use crate::open_array::{MemberTarget, OpenArray, OpenError};
use crate::splice::PipedRead;
use uraid_engine::MemberVerdict;

mod inline;
pub mod sync;
pub mod uring;
pub use sync::{SpeedLimits, SyncAction, SyncRun};
use uraid_engine::SlotState;

/// A block request from a client.
#[derive(Debug, Clone)]
pub enum BlockOp {
    Read {
        offset: u64,
        len: u64,
    },
    /// With `fua`, the write is durable on the members when it completes. The data is
    /// passed to the engine as it is (see `Request::Write`).
    Write {
        offset: u64,
        data: Bytes,
        fua: bool,
    },
    /// Every write completed before the flush was submitted is durable when it completes.
    Flush,
    /// Advisory: release space inside the range where that is safe (whole stripes on parity
    /// levels; anything on the others). What the range reads afterwards is unspecified.
    Trim {
        offset: u64,
        len: u64,
    },
    /// The range reads back as zeros afterwards; with `may_deallocate`, by releasing space where
    /// possible (NBD's WRITE_ZEROES without NO_HOLE, fallocate's PUNCH_HOLE).
    Zero {
        offset: u64,
        len: u64,
        may_deallocate: bool,
        fua: bool,
    },
}

impl BlockOp {
    fn writes(&self) -> bool {
        matches!(self, BlockOp::Write { .. } | BlockOp::Trim { .. } | BlockOp::Zero { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockReply {
    /// The bytes read, possibly in several pieces (see [`IoBuf`]): write them out vectored.
    Data(IoBuf),
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

/// How member I/O is performed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoBackend {
    /// One io_uring per member, on a thread of its own, with up to
    /// [`ServiceConfig::queue_depth`] I/Os in flight, `O_DIRECT` where the file system allows
    /// it. Devices without a file descriptor, and kernels without io_uring, use threads.
    #[default]
    Uring,
    /// [`ServiceConfig::workers_per_member`] threads per member, each doing one blocking I/O at
    /// a time through the page cache.
    Threads,
}

impl std::str::FromStr for IoBackend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uring" | "io_uring" => Ok(IoBackend::Uring),
            "threads" => Ok(IoBackend::Threads),
            other => Err(format!("unknown I/O backend {other:?} (uring or threads)")),
        }
    }
}

impl std::fmt::Display for IoBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IoBackend::Uring => "uring",
            IoBackend::Threads => "threads",
        })
    }
}

#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// How member I/O is performed.
    pub io: IoBackend,
    /// With [`IoBackend::Uring`]: member I/Os in flight on one member.
    pub queue_depth: usize,
    /// With [`IoBackend::Threads`] (or a device without a file descriptor): threads doing
    /// member I/O per member, the number of member I/Os in flight on one member.
    pub workers_per_member: usize,
    /// How long the array stays marked dirty after the last write (md's `safe_mode_delay`).
    pub clean_delay: Duration,
    /// Background pass speed limits (md's `speed_limit_min` / `speed_limit_max`).
    pub speed: SpeedLimits,
    /// Start a resync by itself when the array was found dirty (md does).
    pub auto_resync: bool,
    /// How long a write-intent bitmap region stays marked after its last write (md's bitmap
    /// `daemon_sleep`, 5 s by default).
    pub bitmap_clear_delay: Duration,
    /// Bound on the stripe buffers parity writes in progress hold (md's stripe cache); see the
    /// engine's `Array::set_stripe_memory_limit`.
    pub stripe_cache_bytes: u64,
    /// How reads of mirrored data (raid1, raid10) choose a copy; see the engine's
    /// `read_balance`. md keeps no such setting in its superblock: it is a run-time choice.
    pub read_policy: ReadPolicy,
    /// The `split` policy's knobs (window, read-ahead bound, division threshold).
    pub split_tuning: SplitTuning,
    /// Reads (and, on linear and raid0, writes without FUA, up to [`INLINE_WRITE_MAX`]) of at
    /// most this many bytes are answered on the submitting thread when the array is whole and
    /// the members can do them without waiting for a device (see the `inline` module); 0 turns that off.
    pub inline_max: u64,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        // md's safe_mode_delay is 200 ms; a little longer here, since every clean/dirty round
        // trip costs a flush of every member plus two superblock writes.
        ServiceConfig {
            // Measured faster on this project's machines so far (see BENCHMARKS.md): on tmpfs
            // io_uring hands every I/O to the kernel's worker threads, a hand-off like an I/O
            // thread's, and buffered reads through the threads find the page cache.
            io: IoBackend::Threads,
            queue_depth: 32,
            workers_per_member: 4,
            clean_delay: Duration::from_millis(500),
            speed: SpeedLimits::default(),
            auto_resync: true,
            bitmap_clear_delay: Duration::from_secs(5),
            stripe_cache_bytes: uraid_engine::array::DEFAULT_STRIPE_MEMORY,
            read_policy: ReadPolicy::Md,
            split_tuning: SplitTuning::default(),
            inline_max: DEFAULT_INLINE_MAX,
        }
    }
}

/// Requests up to this size are tried inline by default: above it, member I/O threads copying in
/// parallel gain more than the hand-offs cost (see BENCHMARKS.md, section 2).
pub const DEFAULT_INLINE_MAX: u64 = 256 << 10;

/// The inline limit `uraid serve` uses by default. Over NBD, reads of 512 KiB done on the
/// connection's thread beat the hand-offs to the engine and member threads (`nbdcopy` and fio's
/// random reads, BENCHMARKS.md section 3), where in process, one thread submitting everything,
/// the member threads copying in parallel win; 1 MiB reads lost over NBD too.
pub const SERVE_INLINE_MAX: u64 = 512 << 10;

/// Writes are never done inline above this size, whatever [`ServiceConfig::inline_max`] says:
/// larger ones went slower on the submitting thread than through the member threads, over NBD
/// too (fio's 1 MiB random writes, BENCHMARKS.md, section 3). At 512 KiB inline still won
/// over NBD (`nbdcopy` writes and fio's 512 KiB random writes, section 3).
pub const INLINE_WRITE_MAX: u64 = 512 << 10;

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
    /// The engine takes discards at all: not with a partial parity log, where zeroes are
    /// written instead and trims do nothing (md's raid5 likewise ignores discards unless told
    /// the members zero them safely).
    pub discards: bool,
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
    /// Of `requests`, the reads and writes answered on the submitting thread (see the `inline` module).
    pub inline_reads: u64,
    pub inline_writes: u64,
    /// Of `inline_reads`, those handed over as pipes ([`ServiceHandle::read_spliced`]).
    pub spliced_reads: u64,
    /// Whether the superblocks say clean at the end. False when the array was opened read-only
    /// over a dirty array, or still needs a resync (found dirty at assembly).
    pub clean: bool,
    /// The array was found dirty at assembly and has not been resynced.
    pub resync_needed: bool,
    /// Members that failed while serving, with the reason.
    pub failed_members: Vec<(String, String)>,
}

/// One slot as reported by [`ServiceHandle::status`].
#[derive(Debug, Clone)]
pub struct SlotReport {
    pub slot: usize,
    /// The device filling the slot, if any.
    pub device: Option<String>,
    pub state: SlotState,
}

/// A running pass, as /proc/mdstat shows it.
#[derive(Debug, Clone)]
pub struct SyncProgress {
    pub action: SyncAction,
    pub done_bytes: u64,
    pub total_bytes: u64,
    pub bytes_per_sec: u64,
    pub eta_secs: Option<u64>,
}

/// What `uraid ctl status` shows.
#[derive(Debug, Clone)]
pub struct ArrayStatus {
    pub uuid: String,
    pub level: Level,
    pub size: u64,
    pub chunk_bytes: u64,
    pub slots: Vec<SlotReport>,
    pub read_only: bool,
    /// The superblocks say dirty.
    pub dirty: bool,
    /// Found dirty at assembly and not resynced yet.
    pub needs_resync: bool,
    /// Slots not in sync.
    pub degraded: usize,
    pub sync: Option<SyncProgress>,
    /// Sectors found inconsistent by the last check or repair (md's `mismatch_cnt`).
    pub mismatch_sectors: u64,
    /// How the last pass ended, in words (e.g. "check completed: 0 mismatched sectors").
    pub last_sync: Option<String>,
    pub requests: u64,
}

/// A request's callback while the request waits in the engine thread's inbox. Dropped without
/// being taken, as the requests still in the inbox are when the engine thread ends after a
/// stop, it answers "stopping": no caller is left waiting for an answer that never comes.
struct Pending(Option<Done>);

impl Pending {
    fn take(mut self) -> Done {
        self.0.take().expect("a pending request's callback is taken once")
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            done(Err(ServiceError::Stopping));
        }
    }
}

enum Msg {
    Submit(BlockOp, Pending),
    IoDone(IoId, IoResult),
    Stop(Sender<Result<StopReport, String>>),
    Status(Sender<ArrayStatus>),
    StartSync(SyncAction, Sender<Result<(), String>>),
    /// Stop the running pass (md's `idle`).
    Idle(Sender<()>),
    /// Answer once no pass is running.
    WaitIdle(Sender<ArrayStatus>),
    Manage(ManageOp, Sender<Result<String, String>>),
}

/// Membership changes, as md's `--add`, `--fail` and `--remove`.
#[derive(Debug, Clone)]
pub enum ManageOp {
    /// Add a device: it is rebuilt into a missing or failed slot, or kept as a spare.
    Add(std::path::PathBuf),
    /// Fail a member; refused when that would lose data, unless `force`.
    Fail { member: String, force: bool },
    /// Remove a failed member or a spare.
    Remove(String),
}

/// A handle for submitting requests; cheap to clone and send to other threads.
#[derive(Clone)]
pub struct ServiceHandle {
    inbox: Inbox,
    info: Arc<ServiceInfo>,
    inline: Arc<inline::InlineIo>,
}

impl ServiceHandle {
    pub fn info(&self) -> &ServiceInfo {
        &self.info
    }

    /// Submit `op`; `done` is called once with its outcome: on the engine thread, or, for a
    /// request answered inline (see the `inline` module), on this thread before `submit` returns.
    pub fn submit(&self, op: BlockOp, done: Done) {
        match &op {
            BlockOp::Read { offset, len } => {
                if let Some(data) = self.inline.try_read(*offset, *len) {
                    return done(Ok(BlockReply::Data(IoBuf::from(data))));
                }
            }
            BlockOp::Write { offset, data, fua: false } if self.inline.try_write(*offset, data) => {
                return done(Ok(BlockReply::Done));
            }
            _ => {}
        }
        // Refused (the engine thread has ended), the request is dropped here, which answers it.
        let _ = self.inbox.send(Msg::Submit(op, Pending(Some(done))));
    }

    /// `[offset, offset+len)` read on this thread into a pipe of references to the members'
    /// pages, for a caller that sends it on to a socket with `splice(2)` (see
    /// [`crate::splice`]); `None` if that cannot be done now, and the read is then submitted
    /// as usual. The conditions are those of inline reads (see the `inline` module), up to
    /// [`crate::splice::PIPE_BYTES`] whatever the inline limit, as long as it is not 0.
    pub fn read_spliced(&self, offset: u64, len: u64) -> Option<PipedRead> {
        self.inline.try_splice(offset, len)
    }

    /// The array's state, members and any running pass.
    pub fn status(&self) -> Result<ArrayStatus, ServiceError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::Status(tx)).map_err(|_| ServiceError::Stopping)?;
        rx.recv().map_err(|_| ServiceError::Stopping)
    }

    /// Start a check, repair or resync over the whole array.
    pub fn start_sync(&self, action: SyncAction) -> Result<(), String> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::StartSync(action, tx)).map_err(|_| "array is stopping".to_string())?;
        rx.recv().map_err(|_| "array is stopping".to_string())?
    }

    /// Interrupt the running pass, if any (a resync interrupted is still needed).
    pub fn idle(&self) -> Result<(), ServiceError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::Idle(tx)).map_err(|_| ServiceError::Stopping)?;
        rx.recv().map_err(|_| ServiceError::Stopping)
    }

    /// Block until no pass is running (like `mdadm --wait`); returns the state then.
    pub fn wait_idle(&self) -> Result<ArrayStatus, ServiceError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::WaitIdle(tx)).map_err(|_| ServiceError::Stopping)?;
        rx.recv().map_err(|_| ServiceError::Stopping)
    }

    /// Change membership; returns what was done, in words.
    pub fn manage(&self, op: ManageOp) -> Result<String, String> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::Manage(op, tx)).map_err(|_| "array is stopping".to_string())?;
        rx.recv().map_err(|_| "array is stopping".to_string())?
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
    pub fn start(mut array: OpenArray, config: ServiceConfig) -> ArrayService {
        array.engine_mut().set_stripe_memory_limit(config.stripe_cache_bytes);
        array.engine_mut().set_read_policy(config.read_policy);
        array.engine_mut().set_split_tuning(config.split_tuning);
        let geometry = array.engine().geometry().clone();
        let targets = array.member_targets();
        let discards = !array.engine().ppl_enabled();
        let cheap_discard = discards && targets.iter().flatten().all(|t| t.dev.discard_is_cheap());
        let info = Arc::new(ServiceInfo {
            cheap_discard,
            discards,
            size: array.size(),
            read_only: !array.writable(),
            level: geometry.level(),
            chunk_bytes: geometry.chunk_bytes(),
            stripe_data_bytes: geometry.stripe_data_bytes(),
        });
        let (tx, rx) = crossbeam_channel::unbounded();
        let inline = Arc::new(inline::InlineIo::new(config.inline_max));
        let notifier = Arc::new(Notifier::new().expect("creating the engine thread's eventfd"));
        let inbox = Inbox { tx, notifier };
        let mut config = config;
        if config.io == IoBackend::Uring {
            if let Err(e) = uring::available() {
                log(&format!("io_uring is not available ({e}); member I/O uses threads"));
                config.io = IoBackend::Threads;
            }
        }
        let mut queues = Vec::new();
        let members = targets.len();
        let mut workers = Vec::new();
        for (slot, target) in targets.into_iter().enumerate() {
            queues.push(target.map(|t| spawn_member_io(slot, members, t, &config, &inbox, &mut workers)));
        }
        let runner = Runner {
            array,
            config,
            info: Arc::clone(&info),
            queues,
            workers,
            jobs: IdMap::default(),
            owner: IdMap::default(),
            next_job: 1,
            writing_jobs: 0,
            last_write: Instant::now(),
            report: StopReport::default(),
            sync: None,
            sync_request: None,
            mismatch_sectors: 0,
            last_sync: None,
            sync_failure: None,
            idle_waiters: Vec::new(),
            back: inbox.clone(),
            batch: 0,
            ring_done: Vec::new(),
            last_checkpoint: Instant::now(),
            intent_users: IdMap::default(),
            intent_idle: IdMap::default(),
            sync_intent: None,
            resync_bits: None,
            recover_bits: None,
            inline: Arc::clone(&inline),
            inline_on: false,
        };
        let mut runner = runner;
        runner.update_inline();
        if runner.config.auto_resync && runner.array.writable() && runner.array.needs_resync() {
            if let Err(e) = runner.start_sync(SyncAction::Resync) {
                log(&format!("resync not started: {e}"));
            }
        }
        let engine_thread = std::thread::Builder::new()
            .name("engine".into())
            .spawn(move || runner.run(rx))
            .expect("spawning the engine thread");
        ArrayService { handle: ServiceHandle { inbox, info, inline }, engine_thread: Some(engine_thread) }
    }

    pub fn handle(&self) -> ServiceHandle {
        self.handle.clone()
    }

    /// Refuse new requests, finish every accepted one, flush the members and mark the array
    /// clean. Returns what happened while serving, or why the final update failed.
    pub fn stop(mut self) -> Result<StopReport, String> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let result = match self.handle.inbox.send(Msg::Stop(tx)) {
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

/// How one member's I/O is performed: by I/O threads fed from a queue (dropping it ends them
/// once they have answered everything queued), or through a ring the engine thread drives.
enum MemberPath {
    Threads(Sender<MemberIo>),
    Ring(Box<uring::MemberRing>),
}

/// Set up what performs one member's I/O: a ring where the backend and the device allow it, else
/// I/O threads.
fn spawn_member_io(
    slot: usize,
    members: usize,
    target: MemberTarget,
    config: &ServiceConfig,
    back: &Inbox,
    workers: &mut Vec<JoinHandle<()>>,
) -> MemberPath {
    let handle = if config.io == IoBackend::Uring { target.dev.io_handle() } else { None };
    if let Some(handle) = handle {
        let name = target.dev.name().to_string();
        if let Err(why) = &handle.direct {
            log(&format!("{name}: O_DIRECT not supported by its file system ({why}); using buffered I/O"));
        }
        match uring::member_ring(
            slot,
            target.clone(),
            handle,
            config.queue_depth,
            members,
            &back.notifier,
            back.clone(),
        ) {
            Ok(ring) => return MemberPath::Ring(Box::new(ring)),
            Err(e) => log(&format!("{name}: setting up io_uring failed ({e}); using I/O threads")),
        }
    }
    MemberPath::Threads(spawn_member_workers(slot, target, config.workers_per_member, back, workers))
}

/// Start the I/O threads of one member; returns the queue that feeds them.
fn spawn_member_workers(
    slot: usize,
    target: MemberTarget,
    threads: usize,
    back: &Inbox,
    workers: &mut Vec<JoinHandle<()>>,
) -> Sender<MemberIo> {
    let (qtx, qrx) = crossbeam_channel::unbounded::<MemberIo>();
    for n in 0..threads.max(1) {
        let (qrx, back, target) = (qrx.clone(), back.clone(), target.clone());
        let worker = std::thread::Builder::new()
            .name(format!("member{slot}-io{n}"))
            .spawn(move || member_worker(qrx, target, back))
            .expect("spawning a member I/O thread");
        workers.push(worker);
    }
    qtx
}

fn member_worker(queue: Receiver<MemberIo>, target: MemberTarget, back: Inbox) {
    for io in queue {
        // A panic here (perform refuses I/O outside the data area with one) must still answer
        // the engine, or the request would wait forever; the member is failed instead, which
        // stops further I/O to it.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.perform(&io)));
        let result = match outcome {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => IoResult::Failed(e.to_string()),
            Err(_) => {
                IoResult::Failed(format!("internal error on {} (see the panic message above)", target.dev.name()))
            }
        };
        if back.send(Msg::IoDone(io.id, result.handing_back(io.op))).is_err() {
            break;
        }
    }
}

/// Messages the engine thread takes before it submits the member I/O they made.
const MESSAGE_BATCH: usize = 32;

/// What [`Runner::next_msg`] found.
enum Next {
    Msg(Msg),
    /// The deadline passed with nothing to do.
    Timeout,
    /// Ring completions were handed to the engine (nothing else came).
    Progress,
    /// Every sender is gone.
    Closed,
}

/// What the engine thread sleeps on when it has nothing to do: an eventfd that senders of
/// messages write (only when the engine said it is about to sleep, so a busy engine costs them no
/// system call) and that the members' rings signal when an I/O completes after its submission.
pub(super) struct Notifier {
    efd: OwnedFd,
    /// Set by the engine thread just before it sleeps.
    sleeping: AtomicBool,
}

impl Notifier {
    fn new() -> io::Result<Notifier> {
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Notifier { efd: unsafe { OwnedFd::from_raw_fd(fd) }, sleeping: AtomicBool::new(false) })
    }

    pub(super) fn fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }

    /// After sending a message: wake the engine thread if it is (about to be) asleep.
    fn notify(&self) {
        // Orders the sending before the look at the flag (the engine orders its setting of the
        // flag before its look at the channel the same way), so one of the two sees the other.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            let one: u64 = 1;
            // SAFETY: an 8-byte write to our eventfd. It can only fail if the counter would
            // overflow, and then a wake-up is pending anyway.
            unsafe { libc::write(self.efd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }

    /// Sleep until the eventfd is signalled or `deadline` passes.
    fn wait(&self, deadline: Option<Instant>) {
        let timeout_ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                // Rounded up, so the engine does not wake just before its deadline and spin.
                i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
            }
        };
        let mut pfd = libc::pollfd { fd: self.efd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd. EINTR or a timeout just returns: the caller looks again.
        unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    }

    /// Reset the eventfd after waking.
    fn drain(&self) {
        let mut count: u64 = 0;
        // SAFETY: an 8-byte read from our non-blocking eventfd into a u64.
        unsafe { libc::read(self.efd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
    }
}

/// The engine thread's message channel, with the notifier its senders wake it by.
#[derive(Clone)]
pub(super) struct Inbox {
    tx: Sender<Msg>,
    notifier: Arc<Notifier>,
}

impl Inbox {
    fn send(&self, msg: Msg) -> Result<(), crossbeam_channel::SendError<Msg>> {
        self.tx.send(msg)?;
        self.notifier.notify();
        Ok(())
    }
}

/// How often a running rebuild writes its position to the superblocks.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(2);

/// Largest zero-write the service puts in one engine request, and how many of them one zeroing
/// request keeps in flight: bounds the memory a huge WRITE_ZEROES can take.
const ZERO_PIECE: u64 = 1 << 20;
const ZERO_PIECES_IN_FLIGHT: usize = 8;

/// One client request, possibly several engine requests.
struct Job {
    done: Option<Done>,
    /// Engine requests outstanding.
    outstanding: usize,
    data: Option<IoBuf>,
    error: Option<ServiceError>,
    /// Flush after the writes complete (FUA).
    then_flush: bool,
    writes: bool,
    /// Zeros still to be written, as plain writes: `[next, end)`.
    zero_cursor: Option<(u64, u64)>,
    /// Write-intent bitmap chunks this job holds marked.
    intent: Option<std::ops::Range<u64>>,
}

struct Runner {
    array: OpenArray,
    config: ServiceConfig,
    info: Arc<ServiceInfo>,
    queues: Vec<Option<MemberPath>>,
    workers: Vec<JoinHandle<()>>,
    jobs: IdMap<u64, Job>,
    owner: IdMap<RequestId, u64>,
    next_job: u64,
    writing_jobs: usize,
    last_write: Instant,
    report: StopReport,
    sync: Option<SyncRun>,
    /// The engine request of the pass's step in flight.
    sync_request: Option<RequestId>,
    mismatch_sectors: u64,
    last_sync: Option<String>,
    /// Why the running pass stopped early, if it failed.
    sync_failure: Option<String>,
    idle_waiters: Vec<Sender<ArrayStatus>>,
    /// For workers started later (a member added while serving); its notifier is what the
    /// engine thread sleeps on: messages and ring completions wake it.
    back: Inbox,
    /// Messages taken since the rings were last driven.
    batch: usize,
    /// Ring answers being handed to the engine (kept for its allocation).
    ring_done: Vec<(IoId, IoResult)>,
    /// When the rebuild progress was last written to the superblocks.
    last_checkpoint: Instant,
    /// Writes in flight per write-intent bitmap chunk.
    intent_users: IdMap<u64, u32>,
    /// Chunks with no write in flight, and since when: cleared after `bitmap_clear_delay`.
    intent_idle: IdMap<u64, Instant>,
    /// Bitmap chunks the pass's step in flight holds.
    sync_intent: Option<std::ops::Range<u64>>,
    /// The bitmap as it was when the running resync started, if it can be trusted.
    resync_bits: Option<crate::open_array::WriteIntentBits>,
    /// For a rebuild of re-added members only: the bitmap's marks when it started.
    recover_bits: Option<crate::open_array::WriteIntentBits>,
    /// Requests the handles answer themselves (see the `inline` module), and whether that is on.
    inline: Arc<inline::InlineIo>,
    inline_on: bool,
}

impl Runner {
    fn run(mut self, rx: Receiver<Msg>) {
        let mut stopping: Option<Sender<Result<StopReport, String>>> = None;
        loop {
            // Every turn, so a slot that leaves the array and comes back (failed, replaced,
            // rebuilt) is seen out of it at least once, and the map is made anew.
            self.update_inline();
            if let Some(ack) = &stopping {
                if self.jobs.is_empty() && self.sync_request.is_none() {
                    let result = self.finish();
                    let _ = ack.send(result);
                    return;
                }
            }
            self.drive_sync(stopping.is_none());
            // Skipping clean bitmap regions can take a pass to its end without any step.
            self.finish_sync_if_done();
            self.after_completions();
            self.pump();
            let pass_writes = self.sync.as_ref().is_some_and(|r| r.action != SyncAction::Check);
            let idle_clean_due = self.array.is_dirty()
                && !self.array.needs_resync()
                && self.writing_jobs == 0
                && !pass_writes
                && stopping.is_none();
            let clean_at = idle_clean_due.then(|| self.last_write + self.config.clean_delay);
            let step_at = self.sync.as_ref().filter(|r| !r.in_flight && !r.finished()).map(|r| r.next_at);
            let intent_at =
                if self.array.engine().degraded() || self.array.needs_resync() { None } else { self.intent_clear_at() };
            let deadline = [clean_at, step_at, intent_at].into_iter().flatten().min();
            let msg = match self.next_msg(&rx, deadline) {
                Next::Msg(m) => m,
                Next::Timeout => {
                    if intent_at.is_some_and(|at| Instant::now() >= at) {
                        self.clear_idle_intent();
                    }
                    if clean_at.is_some_and(|at| Instant::now() >= at) {
                        if let Err(e) = self.array.flush_and_mark_clean() {
                            log(&format!("marking the array clean failed: {e}"));
                            // Try again after another delay rather than spinning.
                            self.last_write = Instant::now();
                        }
                    }
                    continue;
                }
                Next::Closed => return,
                // Member I/O completed: a pass may take its next step, a stop may finish, and
                // the deadlines change.
                Next::Progress => continue,
            };
            match msg {
                Msg::Submit(op, pending) => {
                    let done = pending.take();
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
                Msg::Stop(ack) => {
                    // A pass is cut short at its current step; a resync cut short is still
                    // needed, and the array stays dirty.
                    if let Some(run) = &mut self.sync {
                        run.interrupted = true;
                    }
                    stopping = Some(ack);
                }
                Msg::Status(reply) => {
                    let _ = reply.send(self.status());
                }
                Msg::StartSync(action, reply) => {
                    let _ = reply.send(if stopping.is_some() {
                        Err("array is stopping".into())
                    } else {
                        self.start_sync(action)
                    });
                }
                Msg::Idle(reply) => {
                    if let Some(run) = &mut self.sync {
                        run.interrupted = true;
                    }
                    let _ = reply.send(());
                }
                Msg::Manage(op, reply) => {
                    let result = if stopping.is_some() { Err("array is stopping".into()) } else { self.manage(op) };
                    // A failed or removed member is not read inline once the caller is told.
                    self.update_inline();
                    let _ = reply.send(result);
                }
                Msg::WaitIdle(reply) => {
                    if self.sync.is_none() {
                        let _ = reply.send(self.status());
                    } else {
                        self.idle_waiters.push(reply);
                    }
                }
            }
            // A request can finish as it is submitted, without member I/O (a read served from
            // what the engine read ahead): nothing else would hand it to its job.
            self.after_completions();
            self.finish_sync_if_done();
            self.pump();
        }
    }

    // ----- background passes ---------------------------------------------------------------

    fn start_sync(&mut self, action: SyncAction) -> Result<(), String> {
        if let Some(run) = &self.sync {
            return Err(format!("a {} is already running; stop it first (idle)", run.action));
        }
        let geometry = self.array.engine().geometry();
        if geometry.max_degraded() == 0 {
            return Err(format!("{} has no redundancy to {action}", self.info.level.name()));
        }
        if action != SyncAction::Check && self.info.read_only {
            return Err(format!("array is read-only: cannot {action}"));
        }
        if action == SyncAction::Recover {
            return self.start_recovery();
        }
        let lost = self
            .array
            .engine()
            .slot_states()
            .iter()
            .filter(|s| matches!(s, SlotState::Missing | SlotState::Faulty))
            .count();
        if lost > 0 && self.info.stripe_data_bytes.is_some() && lost + 1 > geometry.max_degraded() {
            return Err(format!("array is degraded: cannot {action} parity without every member (md cannot either; uraid can for raid6 short of one member)"));
        }
        // Steps of whole stripes, about a megabyte each.
        let step = match self.info.stripe_data_bytes {
            Some(w) => w * (1u64 << 20).div_ceil(w).max(1),
            None => 1 << 20,
        };
        if action != SyncAction::Check && !self.array.is_dirty() {
            // Repair and resync write; the array must say dirty while they do.
            self.array.mark_dirty().map_err(|e| e.to_string())?;
        }
        log(&format!("{action} started"));
        self.sync_failure = None;
        self.resync_bits = if action == SyncAction::Resync {
            self.array.write_intent().filter(|b| !b.all_dirty).cloned()
        } else {
            None
        };
        self.sync = Some(SyncRun::new(action, 0, self.info.size, step, Instant::now()));
        Ok(())
    }

    // ----- write-intent bitmap ---------------------------------------------------------------

    /// The bitmap chunks a logical range touches: per member for raid1/4/5/6 (a parity write
    /// touches whole stripes), of the array for raid10. `None` without a bitmap.
    fn intent_chunks(&self, offset: u64, len: u64) -> Option<std::ops::Range<u64>> {
        let bits = self.array.write_intent()?;
        if len == 0 || bits.chunk_bytes == 0 {
            return None;
        }
        let (start, end) = match self.info.stripe_data_bytes {
            Some(width) => {
                let chunk = self.info.chunk_bytes;
                (offset / width * chunk, (offset + len).div_ceil(width) * chunk)
            }
            None => (offset, offset + len),
        };
        Some(start / bits.chunk_bytes..end.div_ceil(bits.chunk_bytes))
    }

    /// The logical offset where bitmap chunk `c` begins.
    fn intent_chunk_start(&self, c: u64) -> u64 {
        let bytes = self.array.write_intent().map_or(0, |b| b.chunk_bytes) * c;
        match self.info.stripe_data_bytes {
            Some(width) => bytes / self.info.chunk_bytes * width,
            None => bytes,
        }
    }

    /// Mark `chunks` in the bitmap (on disk before returning, if they were clear) and count
    /// this user.
    fn hold_intent(&mut self, chunks: std::ops::Range<u64>) -> Result<(), OpenError> {
        for c in chunks.clone() {
            *self.intent_users.entry(c).or_insert(0) += 1;
            self.intent_idle.remove(&c);
        }
        self.array.set_write_intent(chunks, true).map(|_| ())
    }

    fn release_intent(&mut self, chunks: std::ops::Range<u64>) {
        let now = Instant::now();
        for c in chunks {
            let users = self.intent_users.get_mut(&c).expect("released chunk was held");
            *users -= 1;
            if *users == 0 {
                self.intent_users.remove(&c);
                self.intent_idle.insert(c, now);
            }
        }
    }

    /// When the next bitmap chunk may be cleared.
    fn intent_clear_at(&self) -> Option<Instant> {
        self.intent_idle.values().min().map(|t| *t + self.config.bitmap_clear_delay)
    }

    /// Clear the bits of chunks idle for long enough, as md's bitmap daemon does. Not while
    /// degraded (a member coming back needs them) or while a resync is owed.
    fn clear_idle_intent(&mut self) {
        if self.array.engine().degraded() || self.array.needs_resync() {
            return;
        }
        let now = Instant::now();
        let delay = self.config.bitmap_clear_delay;
        let due: Vec<u64> = self.intent_idle.iter().filter(|(_, t)| now >= **t + delay).map(|(c, _)| *c).collect();
        if due.is_empty() {
            return;
        }
        // The data of those regions must be on the members before their bits go.
        if let Err(e) = self.array.flush_members() {
            log(&format!("flushing before clearing bitmap bits failed: {e}"));
            return;
        }
        for c in &due {
            self.intent_idle.remove(c);
            if let Err(e) = self.array.set_write_intent(*c..*c + 1, false) {
                log(&format!("clearing bitmap bits failed: {e}"));
                return;
            }
        }
    }

    fn recovering_slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.array
            .engine()
            .slot_states()
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == SlotState::Recovering)
            .map(|(i, _)| i)
    }

    /// Rebuild every recovering slot, from the lowest checkpoint among them.
    fn start_recovery(&mut self) -> Result<(), String> {
        let slots: Vec<usize> = self.recovering_slots().collect();
        if slots.is_empty() {
            return Err("no member is waiting to be rebuilt".into());
        }
        let end = self.array.engine().geometry().member_data_bytes();
        let from = slots.iter().filter_map(|&s| self.array.recovery_checkpoint(s)).min().unwrap_or(0) * 512;
        let chunk = self.info.chunk_bytes.max(4096);
        let step = chunk * (1u64 << 20).div_ceil(chunk);
        let names: Vec<String> =
            slots.iter().map(|&s| self.array.slot_device_name(s).unwrap_or("?").to_string()).collect();
        log(&format!("recover started: rebuilding {} from byte {from} of {end}", names.join(", ")));
        // Re-added members missed only what the bitmap marks (bits stay set while degraded).
        self.recover_bits = if slots.iter().all(|&s| self.array.is_readded(s)) {
            self.array.write_intent().filter(|b| !b.all_dirty).cloned()
        } else {
            None
        };
        if self.recover_bits.is_some() {
            log("rebuild guided by the write-intent bitmap: only regions written while the members were away");
        }
        let mut run = SyncRun::new(SyncAction::Recover, from.min(end), end, step, Instant::now());
        run.slots = slots;
        self.sync_failure = None;
        self.last_checkpoint = Instant::now();
        self.sync = Some(run);
        Ok(())
    }

    /// Write how far the running rebuild has got into the superblocks.
    fn checkpoint_recovery(&mut self) {
        let Some(run) = &self.sync else { return };
        if run.action != SyncAction::Recover {
            return;
        }
        let sectors = run.pos / 512;
        for slot in run.slots.clone() {
            self.array.set_recovery_checkpoint(slot, sectors);
        }
        self.last_checkpoint = Instant::now();
        if let Err(e) = self.array.record_roles() {
            log(&format!("recording rebuild progress failed: {e}"));
        }
    }

    /// Start I/O threads for a slot whose device changed.
    fn attach_slot(&mut self, slot: usize) {
        if let Some(target) = self.array.member_targets()[slot].clone() {
            let members = self.queues.len();
            let queue = spawn_member_io(slot, members, target, &self.config, &self.back, &mut self.workers);
            self.queues[slot] = Some(queue);
        }
    }

    /// A member failed or was failed: bring in a spare if there is one.
    fn use_spare(&mut self) {
        match self.array.activate_spare() {
            Ok(Some(slot)) => {
                log(&format!(
                    "spare {} takes slot {slot}; rebuilding",
                    self.array.slot_device_name(slot).unwrap_or("?")
                ));
                self.attach_slot(slot);
                self.restart_recovery_for_new_slot();
            }
            Ok(None) => {}
            Err(e) => log(&format!("bringing in a spare failed: {e}")),
        }
    }

    /// A rebuild already running does not cover a slot that joined after it started: cut it
    /// short (its checkpoint is kept) so a new pass covering every slot starts at once.
    fn restart_recovery_for_new_slot(&mut self) {
        if let Some(run) = &mut self.sync {
            run.interrupted = true;
        }
    }

    fn manage(&mut self, op: ManageOp) -> Result<String, String> {
        if self.info.read_only {
            return Err("array is read-only: membership cannot change".into());
        }
        match op {
            ManageOp::Add(path) => {
                let dev =
                    crate::member::FileDevice::open(&path, true).map_err(|e| format!("{}: {e}", path.display()))?;
                match self.array.add_member(Box::new(dev)).map_err(|e| e.to_string())? {
                    Some(slot) => {
                        self.attach_slot(slot);
                        self.restart_recovery_for_new_slot();
                        log(&format!("added {} to slot {slot}; rebuilding", path.display()));
                        Ok(format!("added {} to slot {slot}; rebuilding", path.display()))
                    }
                    None => {
                        log(&format!("added {} as a spare", path.display()));
                        Ok(format!("added {} as a spare", path.display()))
                    }
                }
            }
            ManageOp::Fail { member, force } => {
                let name = self.resolve_member(&member)?;
                let slot = self.array.fail_member(&name, force).map_err(|e| match e {
                    OpenError::Engine(EngineError::WouldFailArray { .. }) => format!(
                        "{member}: failing it would lose data (no redundancy left for its slot); use --force to fail it anyway"
                    ),
                    other => other.to_string(),
                })?;
                self.after_completions();
                if self.sync.as_ref().is_some_and(|r| r.action != SyncAction::Recover) {
                    // A check or resync cannot go on degraded.
                    if let Some(run) = &mut self.sync {
                        run.interrupted = true;
                    }
                }
                self.use_spare();
                Ok(format!("{member} (slot {slot}) marked faulty"))
            }
            ManageOp::Remove(member) => {
                let name = self.resolve_member(&member)?;
                if let Some((_, MemberVerdict::Active { slot })) = self.array.find_member(&name) {
                    self.array.remove_member(&name).map_err(|e| e.to_string())?;
                    self.drain_ring(slot);
                    self.queues[slot] = None;
                } else {
                    self.array.remove_member(&name).map_err(|e| e.to_string())?;
                }
                log(&format!("removed {member}"));
                Ok(format!("{member} removed"))
            }
        }
    }

    /// The member name as the array knows it, for a path as the user gave it.
    fn resolve_member(&self, given: &str) -> Result<String, String> {
        let canon = |p: &str| std::fs::canonicalize(p).ok();
        let want = canon(given);
        self.array
            .members
            .iter()
            .map(|m| m.dev.name().to_string())
            .find(|name| name == given || (want.is_some() && canon(name) == want))
            .ok_or_else(|| format!("{given}: not a member of this array"))
    }

    /// Submit the pass's next step if one is due.
    fn drive_sync(&mut self, may_start: bool) {
        if may_start && self.sync.is_none() && !self.info.read_only && self.recovering_slots().next().is_some() {
            // md starts recovery by itself whenever a slot has a member to rebuild.
            if let Err(e) = self.start_recovery() {
                log(&format!("recovery not started: {e}"));
            }
        }
        // A rebuild of re-added members visits only the bitmap's marked regions; positions are
        // member bytes, and so are the bitmap's chunks (raid10 is never re-added this way).
        if let (Some(run), Some(bits)) = (&self.sync, &self.recover_bits) {
            if run.action == SyncAction::Recover && !run.in_flight && run.pos < run.end {
                let cb = bits.chunk_bytes.max(1);
                let mut pos = run.pos;
                while pos < run.end && !bits.is_dirty(pos / cb) {
                    pos = (pos / cb + 1) * cb;
                }
                let run = self.sync.as_mut().expect("checked");
                let pos = pos.min(run.end);
                run.skipped += pos - run.pos;
                run.pos = pos;
            }
        }
        // A resync with a trusted bitmap visits only the regions marked when it started (the
        // live bits also carry the marks of the resync's own writes).
        if let Some(run) = &self.sync {
            if run.action == SyncAction::Resync && !run.in_flight && run.pos < run.end {
                if let Some(bits) = self.resync_bits.clone() {
                    let mut pos = run.pos;
                    while pos < run.end {
                        let c = self.intent_chunks(pos, 1).map_or(0, |r| r.start);
                        if bits.is_dirty(c) {
                            break;
                        }
                        pos = self.intent_chunk_start(c + 1).max(pos + 1);
                    }
                    let run = self.sync.as_mut().expect("checked");
                    let pos = pos.min(run.end);
                    run.skipped += pos - run.pos;
                    run.pos = pos;
                }
            }
        }
        let Some(run) = &mut self.sync else { return };
        let Some((offset, len)) = run.next_step(Instant::now()) else { return };
        let writes = !matches!(run.action, SyncAction::Check | SyncAction::Recover);
        let request = match run.action {
            SyncAction::Recover => Request::Recover { offset, len },
            SyncAction::Check => Request::Sync { offset, len, repair: false },
            SyncAction::Resync | SyncAction::Repair => Request::Sync { offset, len, repair: true },
        };
        let intent = if writes { self.intent_chunks(offset, len) } else { None };
        if let Some(chunks) = &intent {
            if let Err(e) = self.hold_intent(chunks.clone()) {
                let run = self.sync.as_mut().expect("running");
                run.in_flight = false;
                run.interrupted = true;
                self.sync_failure = Some(format!("{} failed at byte {offset}: bitmap: {e}", run.action));
                return;
            }
        }
        self.sync_intent = intent;
        let run = self.sync.as_mut().expect("running");
        match self.array.engine_mut().submit(request) {
            Ok(rid) => self.sync_request = Some(rid),
            Err(e) => {
                run.in_flight = false;
                run.interrupted = true;
                self.sync_failure = Some(format!("{} failed at byte {offset}: {e}", run.action));
            }
        }
    }

    fn sync_step_done(&mut self, result: Result<Completion, EngineError>) {
        self.sync_request = None;
        if let Some(chunks) = self.sync_intent.take() {
            self.release_intent(chunks);
        }
        let foreground_busy = !self.jobs.is_empty();
        let limits = self.config.speed;
        let Some(run) = &mut self.sync else { return };
        let len = run.step.min(run.end - run.pos);
        match result {
            Ok(Completion::Synced { mismatch_sectors }) => {
                run.step_done(len, mismatch_sectors, Instant::now(), foreground_busy, limits)
            }
            Ok(Completion::Recovered) => {
                run.step_done(len, 0, Instant::now(), foreground_busy, limits);
                // md writes the rebuild position to the superblocks now and then, so a restart
                // resumes there instead of starting over.
                if self.last_checkpoint.elapsed() >= CHECKPOINT_EVERY {
                    self.checkpoint_recovery();
                }
            }
            Ok(other) => unreachable!("sync step completed as {other:?}"),
            Err(e) => {
                run.in_flight = false;
                run.interrupted = true;
                self.sync_failure = Some(format!("{} failed at byte {}: {e}", run.action, run.pos));
            }
        }
    }

    /// Close a pass that has covered the array or was interrupted, and tell the waiters.
    fn finish_sync_if_done(&mut self) {
        if !self.sync.as_ref().is_some_and(|r| r.finished()) {
            return;
        }
        let run = self.sync.take().expect("checked");
        if run.action != SyncAction::Check {
            self.last_write = Instant::now();
        }
        let secs = run.started.elapsed().as_secs_f64();
        let complete = run.pos >= run.end;
        if run.action.counts_mismatches() {
            self.mismatch_sectors = run.mismatch_sectors;
        }
        if run.action == SyncAction::Recover {
            // The rebuilt data must be on the new members before their superblocks say so.
            if complete && self.array.flush_members().is_err() {
                log("flushing after the rebuild failed; the members stay marked as rebuilding");
            } else if complete {
                for slot in run.slots.clone() {
                    if let Err(e) = self.array.recovery_done(slot) {
                        log(&format!("marking slot {slot} rebuilt failed: {e}"));
                    }
                }
            } else {
                // Cut short (stop, idle, a new spare): record how far it got.
                for &slot in &run.slots {
                    self.array.set_recovery_checkpoint(slot, run.pos / 512);
                }
                if let Err(e) = self.array.record_roles() {
                    log(&format!("recording rebuild progress failed: {e}"));
                }
            }
        }
        let summary = if complete {
            if matches!(run.action, SyncAction::Resync | SyncAction::Repair) {
                // Every stripe/copy has been made consistent: what a resync promises.
                self.array.resync_done();
            }
            let skipped = if run.skipped > 0 {
                format!(" ({} bytes skipped as clean in the write-intent bitmap)", run.skipped)
            } else {
                String::new()
            };
            format!(
                "{} completed: {} bytes in {secs:.1} s{skipped}, {} mismatched sectors",
                run.action,
                run.done_bytes() - run.skipped,
                run.mismatch_sectors
            )
        } else {
            self.sync_failure
                .take()
                .unwrap_or_else(|| format!("{} interrupted at byte {} of {}", run.action, run.pos, run.end))
        };
        log(&summary);
        self.last_sync = Some(summary);
        // A finished resync or rebuild may allow inline requests again: a caller that waited for
        // the pass gets them from its next request on.
        self.update_inline();
        let status = self.status();
        for w in self.idle_waiters.drain(..) {
            let _ = w.send(status.clone());
        }
    }

    fn status(&self) -> ArrayStatus {
        let now = Instant::now();
        let states = self.array.engine().slot_states();
        let slots = states
            .iter()
            .enumerate()
            .map(|(slot, &state)| SlotReport {
                slot,
                device: self.array.slot_device_name(slot).map(str::to_string),
                state,
            })
            .collect();
        ArrayStatus {
            uuid: self.array.plan.uuid_string(),
            level: self.info.level,
            size: self.info.size,
            chunk_bytes: self.info.chunk_bytes,
            slots,
            read_only: self.info.read_only,
            dirty: self.array.is_dirty(),
            needs_resync: self.array.needs_resync(),
            degraded: states.iter().filter(|s| **s != SlotState::InSync).count(),
            sync: self.sync.as_ref().map(|r| SyncProgress {
                action: r.action,
                done_bytes: r.done_bytes(),
                total_bytes: r.end - r.start,
                bytes_per_sec: r.bytes_per_sec(now),
                eta_secs: r.eta_secs(now),
            }),
            mismatch_sectors: self.mismatch_sectors,
            last_sync: self.last_sync.clone(),
            requests: {
                let (reads, writes, _) = self.inline.served();
                self.report.requests + reads + writes
            },
        }
    }

    fn accept(&mut self, op: BlockOp, done: Done) {
        if op.writes() {
            if self.info.read_only {
                return done(Err(ServiceError::ReadOnly));
            }
            // Like md, only levels with redundancy are marked dirty: linear and raid0 have
            // nothing a crash could leave inconsistent (and writes to them may be done inline,
            // without the engine thread; see [`inline`]).
            if !self.array.is_dirty() && self.array.engine().geometry().max_degraded() > 0 {
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
            intent: None,
        };
        let job_range = match &op {
            BlockOp::Write { offset, data, .. } => (*offset, offset.saturating_add(data.len() as u64).min(size)),
            BlockOp::Trim { offset, len } | BlockOp::Zero { offset, len, .. } => {
                (*offset, offset.saturating_add(*len).min(size))
            }
            _ => (0, 0),
        };
        let job_range = (job_range.0.min(job_range.1), job_range.1);
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
                            requests.push(Request::Write { offset, data: (vec![0; (lo - offset) as usize]).into() });
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
            let (lo, hi) = job_range;
            if let Some(chunks) = self.intent_chunks(lo, hi - lo) {
                if let Err(e) = self.hold_intent(chunks.clone()) {
                    self.writing_jobs -= 1;
                    return (job.done.take().expect("fresh job"))(Err(ServiceError::Metadata(e.to_string())));
                }
                job.intent = Some(chunks);
            }
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
        if !self.info.discards {
            return (0, 0);
        }
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
            self.submit_engine(job_id, Request::Write { offset: next, data: (vec![0; n as usize]).into() });
        }
    }

    /// Route finished engine requests to their jobs and record member failures.
    fn after_completions(&mut self) {
        while let Some((rid, result)) = self.array.engine_mut().next_completion() {
            if self.sync_request == Some(rid) {
                self.sync_step_done(result);
                continue;
            }
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
        for (name, offset, len) in self.array.take_corrected_read_errors() {
            log(&format!("member {name}: read error at byte {offset}+{len} of its data area, rebuilt from redundancy and rewritten"));
        }
        if !failed.is_empty() {
            for (name, reason) in &failed {
                log(&format!("member {name} failed and is out of the array: {reason}"));
            }
            self.report.failed_members.extend(failed);
            if let Err(e) = self.array.record_roles() {
                log(&format!("recording the failed member in the superblocks failed: {e}"));
            }
            if self.sync.as_ref().is_some_and(|r| r.action != SyncAction::Recover) {
                if let Some(run) = &mut self.sync {
                    run.interrupted = true;
                }
            }
            self.use_spare();
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
        if let Some(chunks) = job.intent.take() {
            self.release_intent(chunks);
        }
        let result = match (job.error.take(), job.data.take()) {
            (Some(e), _) => Err(e),
            (None, Some(d)) => Ok(BlockReply::Data(d)),
            (None, None) => Ok(BlockReply::Done),
        };
        // Before the client hears of it: a write that completed on fewer members than before
        // must not be followed by an inline read of the member that missed it.
        self.update_inline();
        (job.done.take().expect("job finished once"))(result);
    }

    /// Hand the engine's member I/O to the workers, or put it in the members' rings (submitted
    /// by [`Runner::drive_rings`], so a batch of requests costs one submission per ring).
    fn pump(&mut self) {
        while let Some(io) = self.array.engine_mut().next_io() {
            match self.queues[io.slot].as_mut().expect("engine used an empty slot") {
                MemberPath::Ring(ring) => ring.queue(io),
                MemberPath::Threads(queue) => {
                    if let Err(crossbeam_channel::SendError(io)) = queue.send(io) {
                        // The workers are gone (only at the very end); fail the I/O so nothing
                        // waits.
                        self.array
                            .engine_mut()
                            .complete_io(io.id, IoResult::Failed("member I/O threads stopped".into()));
                        self.after_completions();
                    }
                }
            }
        }
    }

    /// Submit what the rings hold and hand their completions to the engine, until they have
    /// none ready. Whether any completed.
    fn drive_rings(&mut self) -> bool {
        let mut any = false;
        // Reused across calls: this runs for every batch of requests.
        let mut done = std::mem::take(&mut self.ring_done);
        loop {
            for path in self.queues.iter_mut().flatten() {
                if let MemberPath::Ring(ring) = path {
                    ring.submit();
                    ring.reap();
                    done.extend(ring.take_done());
                }
            }
            if done.is_empty() {
                self.ring_done = done;
                return any;
            }
            any = true;
            for (id, result) in done.drain(..) {
                self.array.engine_mut().complete_io(id, result);
            }
            self.after_completions();
            self.finish_sync_if_done();
            self.pump();
        }
    }

    fn rings_have_completions(&mut self) -> bool {
        self.queues.iter_mut().flatten().any(|p| match p {
            MemberPath::Ring(r) => r.has_completions(),
            MemberPath::Threads(_) => false,
        })
    }

    /// Finish what a member's ring holds (it is being removed, or the service stops): wait for
    /// it, and hand the answers to the engine.
    fn drain_ring(&mut self, slot: usize) {
        if let Some(MemberPath::Ring(ring)) = self.queues[slot].as_mut() {
            ring.drain();
            let done: Vec<_> = ring.take_done().collect();
            for (id, result) in done {
                self.array.engine_mut().complete_io(id, result);
            }
            self.after_completions();
        }
    }

    /// The next message, driving the rings meanwhile; `Timeout` once `deadline` passes with
    /// nothing to do. Queued messages are taken in batches of [`MESSAGE_BATCH`] between
    /// submissions, so the I/O of many requests goes to the kernel together.
    fn next_msg(&mut self, rx: &Receiver<Msg>, deadline: Option<Instant>) -> Next {
        loop {
            match rx.try_recv() {
                Ok(m) => {
                    self.batch += 1;
                    if self.batch >= MESSAGE_BATCH {
                        self.batch = 0;
                        self.drive_rings();
                    }
                    return Next::Msg(m);
                }
                Err(TryRecvError::Disconnected) => return Next::Closed,
                Err(TryRecvError::Empty) => {}
            }
            self.batch = 0;
            if self.drive_rings() {
                // Back to the run loop, which alone starts a pass's next step and finishes a
                // stop: looping here on completions alone left both waiting for a message
                // that might never come.
                return Next::Progress;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Next::Timeout;
            }
            // Say we are going to sleep, then look once more: a message sent before the flag
            // was seen is found here; one sent after it writes the eventfd. Ring completions
            // from now on signal the eventfd themselves.
            self.back.notifier.sleeping.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            if rx.is_empty() && !self.rings_have_completions() {
                self.back.notifier.wait(deadline);
            }
            self.back.notifier.sleeping.store(false, Ordering::SeqCst);
            self.back.notifier.drain();
        }
    }

    /// Inline requests on while the array is whole, off otherwise (see the `inline` module); called
    /// before any request is answered and on every turn of the engine loop. Turning them off
    /// waits for the inline requests in flight.
    fn update_inline(&mut self) {
        if !self.inline.enabled() {
            return;
        }
        let geometry = self.array.engine().geometry();
        let mirrored = matches!(geometry, Geometry::Raid1(_) | Geometry::Raid10(_));
        // Mirrors owing a resync read md's first copy only, which the engine does.
        let copies_may_differ = mirrored && self.array.needs_resync();
        let want = !self.array.engine().degraded() && !copies_may_differ;
        if want == self.inline_on {
            return;
        }
        self.inline_on = want;
        let map = want.then(|| {
            let members = self
                .array
                .member_targets()
                .into_iter()
                .enumerate()
                .map(|(slot, target)| {
                    let direct_writes =
                        matches!(self.queues.get(slot), Some(Some(MemberPath::Ring(r))) if r.writes_direct());
                    target.filter(|_| !direct_writes)
                })
                .collect();
            // A write-intent bitmap (which md refuses on these levels, but a superblock may
            // still claim) would have to be marked first: such arrays write through the engine.
            let writes = !self.info.read_only && geometry.max_degraded() == 0 && self.array.write_intent().is_none();
            inline::InlineMap::new(geometry.clone(), self.info.size, members, writes)
        });
        self.inline.set(map);
    }

    /// Everything accepted is done: stop the workers, flush, mark clean.
    fn finish(mut self) -> Result<StopReport, String> {
        self.inline.set(None);
        self.inline_on = false;
        (self.report.inline_reads, self.report.inline_writes, self.report.spliced_reads) = self.inline.served();
        self.report.requests += self.report.inline_reads + self.report.inline_writes;
        self.finish_sync_if_done();
        let status = ArrayStatus { sync: None, ..self.status() };
        for w in self.idle_waiters.drain(..) {
            let _ = w.send(status.clone());
        }
        for slot in 0..self.queues.len() {
            self.drain_ring(slot);
        }
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
