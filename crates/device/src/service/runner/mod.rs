//! The engine thread: `Runner` owns the array and its engine, takes the inbox's messages (client
//! requests, member I/O answers, management), and sleeps when there is nothing to do. What it does
//! with them lives in the submodules: client requests (`requests`), the write-intent bitmap
//! (`intent`), background passes and rebuilds (`passes`), membership changes (`manage`), the
//! hand-off of member I/O (`member_io`) and of metadata writes (`metadata`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use uraid_engine::array::{IoId, IoResult, RequestId};
use uraid_engine::idmap::IdMap;
use uraid_engine::SlotState;

use super::messages::Msg;
use super::metadata_io::{spawn_metadata_io, MetadataIo};
use super::notifier::{self, Inbox};
use super::workers::MemberPath;
use super::{inline, log, ArrayStatus, ManageError, ServiceConfig, ServiceError, ServiceInfo, SlotReport, StopError};
use super::{StopReport, SyncAction, SyncError, SyncProgress, SyncRun};
use crate::open_array::OpenArray;

mod intent;
mod manage;
mod member_io;
mod metadata;
mod passes;
mod requests;

use metadata::{AfterFlush, MetaState};

use requests::Job;

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

pub(in crate::service) struct Runner {
    array: OpenArray,
    config: ServiceConfig,
    info: Arc<ServiceInfo>,
    queues: Vec<Option<MemberPath>>,
    /// Member I/O paths that left their slot (its device was replaced) with I/O still in flight:
    /// driven like the others until their answers are all in, then dropped.
    retired: Vec<MemberPath>,
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
    /// Its notifier is what the engine thread sleeps on (messages, answers and ring completions
    /// wake it), and what member I/O started later (a member added while serving) wakes.
    back: Inbox,
    /// Messages taken since the rings were last driven.
    batch: usize,
    /// Member I/O answers being handed to the engine (kept for its allocation).
    io_done: Vec<(IoId, IoResult)>,
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
    /// Metadata writes in flight and what waits on them (see `metadata`).
    meta: MetaState,
    /// The metadata I/O thread: its queue, its answers, the thread.
    meta_io: Option<MetadataIo>,
}

impl Runner {
    /// The engine thread's state over `array`, with its member I/O paths set up; a resync is
    /// started if the array was found dirty and the config asks for it.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::service) fn new(
        array: OpenArray,
        config: ServiceConfig,
        info: Arc<ServiceInfo>,
        queues: Vec<Option<MemberPath>>,
        back: Inbox,
        inline: Arc<inline::InlineIo>,
    ) -> Runner {
        let mut array = array;
        array.defer_metadata(true);
        let meta_io = spawn_metadata_io(&back.notifier);
        let runner = Runner {
            array,
            config,
            info,
            queues,
            retired: Vec::new(),
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
            back,
            batch: 0,
            io_done: Vec::new(),
            last_checkpoint: Instant::now(),
            intent_users: IdMap::default(),
            intent_idle: IdMap::default(),
            sync_intent: None,
            resync_bits: None,
            recover_bits: None,
            inline,
            inline_on: false,
            meta: MetaState::default(),
            meta_io: Some(meta_io),
        };
        let mut runner = runner;
        runner.update_inline();
        if runner.config.auto_resync && runner.array.writable() && runner.array.needs_resync() {
            if let Err(e) = runner.start_sync(SyncAction::Resync) {
                log(&format!("resync not started: {e}"));
            }
        }
        runner
    }

    pub(in crate::service) fn run(self, rx: Receiver<Msg>) {
        let inbox = self.back.clone();
        notifier::engine_thread_starts(&inbox.notifier);
        self.serve(rx);
        inbox.close();
        notifier::engine_thread_ends();
    }

    fn serve(mut self, rx: Receiver<Msg>) {
        let mut stopping: Option<Sender<Result<StopReport, StopError>>> = None;
        loop {
            // Every turn, so a slot that leaves the array and comes back (failed, replaced,
            // rebuilt) is seen out of it at least once, and the map is made anew.
            self.update_inline();
            if let Some(ack) = &stopping {
                if self.jobs.is_empty() && self.sync_request.is_none() && !self.metadata_busy() {
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
                && !self.meta.cleaning()
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
                        // The members are flushed first; see `metadata`.
                        self.flush_then(AfterFlush::Clean { last_write: self.last_write });
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
                    let _ =
                        reply.send(if stopping.is_some() { Err(SyncError::Stopping) } else { self.start_sync(action) });
                }
                Msg::Idle(reply) => {
                    if let Some(run) = &mut self.sync {
                        run.interrupted = true;
                    }
                    let _ = reply.send(());
                }
                Msg::Manage(op, reply) => {
                    let result = if stopping.is_some() { Err(ManageError::Stopping) } else { self.manage(op) };
                    // A failed or removed member is not read inline once the caller is told,
                    // and writes are answered once its record is durable.
                    self.update_inline();
                    self.meta.roles = self.array.metadata_pending().or(self.meta.roles);
                    self.dispatch_metadata();
                    let _ = reply.send(result);
                }
                Msg::WaitIdle(reply) => {
                    if self.pass_idle() {
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

    /// The next message, driving member I/O and taking the metadata thread's answer meanwhile;
    /// `Timeout` once `deadline` passes with nothing to do. Queued messages are taken in batches
    /// of [`MESSAGE_BATCH`] between submissions, so the I/O of many requests goes to the kernel
    /// together.
    fn next_msg(&mut self, rx: &Receiver<Msg>, deadline: Option<Instant>) -> Next {
        // Metadata recorded on this turn (bitmap bits for a pass's step, a membership change)
        // goes out before the thread may sleep: what waits on it would otherwise wait for an
        // unrelated message.
        self.dispatch_metadata();
        loop {
            if let Some(result) = self.meta_io.as_ref().and_then(|m| m.answers.try_recv().ok()) {
                self.metadata_done(result);
                return Next::Progress;
            }
            if let Some(m) = notifier::take_looped_back() {
                return Next::Msg(m);
            }
            match rx.try_recv() {
                Ok(m) => {
                    self.batch += 1;
                    if self.batch >= MESSAGE_BATCH {
                        self.batch = 0;
                        self.drive_members();
                    }
                    return Next::Msg(m);
                }
                Err(TryRecvError::Disconnected) => return Next::Closed,
                Err(TryRecvError::Empty) => {}
            }
            self.batch = 0;
            if self.drive_members() {
                // Back to the run loop, which alone starts a pass's next step and finishes a
                // stop: looping here on completions alone left both waiting for a message
                // that might never come.
                return Next::Progress;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Next::Timeout;
            }
            // Say we are going to sleep, then look once more: a message or answer sent before
            // the flag was seen is found here; one sent after it writes the eventfd. Ring
            // completions from now on signal the eventfd themselves.
            self.back.notifier.sleeping.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            let meta_answered = self.meta_io.as_ref().is_some_and(|m| !m.answers.is_empty());
            if rx.is_empty() && !meta_answered && !notifier::has_looped_back() && !self.members_have_answers() {
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
        let mirrored = geometry.is_mirrored();
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

    /// Everything accepted is done: stop the member I/O threads, flush, mark clean.
    fn finish(mut self) -> Result<StopReport, StopError> {
        self.inline.set(None);
        self.inline_on = false;
        (self.report.inline_reads, self.report.inline_writes, self.report.spliced_reads) = self.inline.served();
        self.report.requests += self.report.inline_reads + self.report.inline_writes;
        // Nothing is out with the metadata thread (the stop waited for it): from here on the
        // metadata is written on this thread, as the engine is done.
        if let Some(MetadataIo { jobs, answers, thread }) = self.meta_io.take() {
            drop((jobs, answers));
            let _ = thread.join();
        }
        self.array.defer_metadata(false);
        self.finish_sync_if_done();
        let status = ArrayStatus { sync: None, ..self.status() };
        for w in self.idle_waiters.drain(..) {
            let _ = w.send(status.clone());
        }
        for slot in 0..self.queues.len() {
            self.drain_path(slot);
        }
        self.drain_retired();
        // Dropping the paths ends their threads, idle now.
        self.queues.clear();
        self.finish_metadata();
        if self.array.writable() && (self.array.is_dirty() || self.array.roles_changed()) {
            self.array.flush_and_mark_clean()?;
        }
        self.report.clean = !self.array.is_dirty();
        self.report.resync_needed = self.array.needs_resync();
        Ok(self.report)
    }
}
