//! The engine thread: `Runner` owns the array and its engine, takes the inbox's messages (client
//! requests, member I/O answers, management), and sleeps when there is nothing to do. What to
//! record when, and which pass runs, is the array's policy ([`crate::array_policy`]), which the
//! runner feeds with the time and the outcomes of what it did; the runner does the I/O. What it
//! does with its messages lives in the submodules: client requests (`requests`), the passes'
//! steps and those waiting for their end (`passes`), membership changes (`manage`), the hand-off
//! of member I/O (`member_io`) and of metadata I/O, and the policy's other decisions (`metadata`),
//! and members lost for being unreachable tried again and re-added (`member_return`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use uraid_engine::array::{IoId, IoResult, RequestId};
use uraid_engine::idmap::IdMap;
use uraid_engine::SlotState;

use super::follow_up::FollowUp;
use super::messages::Msg;
use super::metadata_io::{spawn_metadata_io, MetadataIo};
use super::notifier::{self, Inbox};
use super::reopen::Reopener;
use super::reshaping::CarriedOver;
use super::workers::{spawn_member_io, MemberPath};
use super::{inline, log, ArrayStatus, ManageError, ServiceConfig, ServiceError, ServiceInfo, SlotReport, StopError};
use super::{BlockOp, BlockReply, Done, ReturningReport, StopReport, SyncProgress};
use crate::array_policy::{ArrayPolicy, AttemptFailure, MemberReturns, PolicyConfig, PolicyMutation, ReturnBackoff};
use crate::error::OpenError;
use crate::open_array::OpenArray;

mod grow;
mod manage;
mod member_io;
mod member_return;
mod metadata;
mod passes;
mod remote_limits;
mod requests;

pub(in crate::service) use grow::{Asked, Handoff};
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
    report: StopReport,
    idle_waiters: Vec<Sender<ArrayStatus>>,
    /// Its notifier is what the engine thread sleeps on (messages, answers and ring completions
    /// wake it), and what member I/O started later (a member added while serving) wakes.
    back: Inbox,
    /// Messages taken since the rings were last driven.
    batch: usize,
    /// Member I/O answers being handed to the engine (kept for its allocation).
    io_done: Vec<(IoId, IoResult)>,
    /// Requests the handles answer themselves (see the `inline` module), and whether that is on.
    inline: Arc<inline::InlineIo>,
    inline_on: bool,
    /// What to record when, and the passes: the array's policy, in the time since `started`.
    policy: ArrayPolicy,
    started: Instant,
    /// Answers to writes the policy holds (while a member failure is being recorded), by job.
    held: IdMap<u64, (Done, Result<BlockReply, ServiceError>)>,
    /// The metadata I/O thread, for devices with no I/O path of their own (spares): its queue,
    /// its answers, the thread. Gone once the runner is finishing.
    meta_io: Option<MetadataIo>,
    /// The policy's metadata job out, if one is.
    meta_job: Option<metadata::JobOut>,
    /// Its ops on the members' paths, by I/O id: the device index and what the op does.
    meta_flight: IdMap<IoId, (usize, String)>,
    next_meta_io: u64,
    /// Members lost for being unreachable, and when each is tried again.
    returns: MemberReturns,
    /// Where those attempts are made (off this thread) and answered.
    reopen: Reopener,
    /// Members taken back by the array itself.
    readded: u64,
    /// A grow asked for: the runner winds down to hand the array over to the reshape, and
    /// requests arriving meanwhile wait in `parked` for it.
    grow_ask: Option<grow::GrowAsk>,
    parked: Vec<(BlockOp, Done)>,
    /// The second step of a level change, asked once the array is idle and whole.
    follow_up: Option<FollowUp>,
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
        let policy_config = PolicyConfig {
            clean_delay: config.clean_delay,
            bitmap_clear_delay: config.bitmap_clear_delay,
            speed: config.speed,
            auto_resync: config.auto_resync,
            mutation: PolicyMutation::None,
            ..PolicyConfig::default()
        };
        // The policy's time starts here. A resync starts now if the array was found dirty (its
        // notice is the first event).
        let started = Instant::now();
        let policy = ArrayPolicy::new(&mut array, policy_config, Duration::ZERO);
        let slots = queues.len();
        let reopen = Reopener::new(slots, &back.notifier);
        let mut runner = Runner {
            array,
            config,
            info,
            queues,
            retired: Vec::new(),
            jobs: IdMap::default(),
            owner: IdMap::default(),
            next_job: 1,
            report: StopReport::default(),
            idle_waiters: Vec::new(),
            back,
            batch: 0,
            io_done: Vec::new(),
            inline,
            inline_on: false,
            policy,
            started,
            held: IdMap::default(),
            meta_io: Some(meta_io),
            meta_job: None,
            meta_flight: IdMap::default(),
            next_meta_io: 0,
            returns: MemberReturns::new(ReturnBackoff::default()),
            reopen,
            readded: 0,
            grow_ask: None,
            parked: Vec::new(),
            follow_up: None,
        };
        runner.update_inline();
        runner.policy_events();
        runner
    }

    /// [`Runner::new`] with the member I/O paths started for `array`'s members.
    pub(in crate::service) fn start(
        array: OpenArray,
        config: ServiceConfig,
        info: Arc<ServiceInfo>,
        back: Inbox,
        inline: Arc<inline::InlineIo>,
    ) -> Runner {
        let targets = array.member_targets();
        let members = targets.len();
        let queues = (targets.into_iter().enumerate())
            .map(|(slot, target)| target.map(|t| spawn_member_io(slot, members, t, &config, &back.notifier)))
            .collect();
        Runner::new(array, config, info, queues, back, inline)
    }

    /// Take over what the reshape before this runner leaves: its report, the callers waiting
    /// for the array to be idle, and requests it took and did not serve.
    pub(in crate::service) fn take_over(&mut self, carried: CarriedOver) {
        let CarriedOver { report, idle_waiters, requests, follow_up } = carried;
        self.report = report;
        self.follow_up = follow_up;
        for (op, done) in requests {
            self.accept(op, done);
        }
        // Waiting for the array to be idle: answered now unless a pass (the resync of an array
        // written during the reshape, the rebuild of a slot a takeover added) has started, or
        // the next step of a level change is asked now; else when they end.
        self.idle_waiters.extend(idle_waiters);
        self.notify_idle_waiters();
    }

    /// The policy's time: since the engine thread's state was made.
    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// Tell the engine the time before it issues or hears of member I/O: it measures each
    /// member's read latency by it (read balancing passes over far or slow members).
    fn tell_time(&mut self) {
        let now = self.now();
        self.array.engine_mut().set_now(now);
    }

    /// Serve until stopped (`None`), or until a grow or change asked for has wound the runner
    /// down: then the array goes, with what waits for it, to what was asked.
    pub(in crate::service) fn serve(mut self, rx: &Receiver<Msg>) -> Option<(Asked, Handoff)> {
        let mut stopping: Option<Sender<Result<StopReport, StopError>>> = None;
        loop {
            // Every turn, so a slot that leaves the array and comes back (failed, replaced,
            // rebuilt) is seen out of it at least once, and the map is made anew.
            self.update_inline();
            if let Some(ack) = &stopping {
                if self.jobs.is_empty() && self.policy.settled(&self.array) {
                    let result = self.finish();
                    let _ = ack.send(result);
                    return None;
                }
            }
            if self.grow_ask.is_some() && stopping.is_none() && self.jobs.is_empty() && self.policy.settled(&self.array)
            {
                return Some(self.hand_over());
            }
            self.drive_pass();
            self.after_completions();
            self.pump();
            if stopping.is_none() {
                self.start_return_attempts();
            }
            let policy_deadline = self.policy.next_deadline(&self.array);
            let deadline = match (policy_deadline, self.returns.next_deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .map(|d| self.started + d);
            let msg = match self.next_msg(rx, deadline) {
                Next::Msg(m) => m,
                Next::Timeout => {
                    // Clearing idle bitmap bits, the idle clean mark: each after a flush, which
                    // goes out down the members' paths from `next_msg`.
                    let now = self.now();
                    self.policy.run_timers(&mut self.array, now);
                    self.policy_events();
                    continue;
                }
                Next::Closed => return None,
                // Member I/O completed: a pass may take its next step, a stop may finish, and
                // the deadlines change.
                Next::Progress => continue,
            };
            match msg {
                Msg::Submit(op, pending) => {
                    let done = pending.take();
                    if stopping.is_some() {
                        done(Err(ServiceError::Stopping));
                    } else if self.grow_ask.is_some() {
                        self.parked.push((op, done));
                    } else {
                        self.report.requests += 1;
                        self.accept(op, done);
                    }
                }
                Msg::Stop(ack) => {
                    // A grow not yet handed over is dropped: the stop comes first.
                    if let Some(ask) = self.grow_ask.take() {
                        let _ = ask.reply.send(Err(ManageError::Stopping));
                    }
                    crate::service::types::answer_stopping(self.parked.drain(..));
                    // A pass is cut short at its current step; a resync cut short is still
                    // needed, and the array stays dirty.
                    let now = self.now();
                    self.policy.stop(&mut self.array, now);
                    self.policy_events();
                    // No member is taken back from now on; attempts out are ignored.
                    self.returns = MemberReturns::new(self.returns.backoff());
                    stopping = Some(ack);
                }
                Msg::Status(reply) => {
                    let _ = reply.send(self.status());
                }
                Msg::StartSync(action, reply) => {
                    // Refused once stopping (the policy knows).
                    let now = self.now();
                    let started = self.policy.start_pass(&mut self.array, action, now);
                    self.policy_events();
                    let _ = reply.send(started);
                }
                Msg::Idle(reply) => {
                    let now = self.now();
                    self.policy.interrupt_pass(&mut self.array, now);
                    self.policy_events();
                    let _ = reply.send(());
                }
                Msg::Manage(op, reply) => {
                    let result = if stopping.is_some() { Err(ManageError::Stopping) } else { self.manage(op) };
                    // A failed or removed member is not read inline once the caller is told,
                    // and writes are answered once its record is durable.
                    self.update_inline();
                    self.policy.membership_changed(&self.array);
                    self.dispatch_metadata();
                    let _ = reply.send(result);
                }
                Msg::Grow { request, add, force, reply } => {
                    if stopping.is_some() {
                        let _ = reply.send(Err(ManageError::Stopping));
                    } else {
                        self.ask_grow(request, add, force, reply);
                    }
                }
                Msg::Takeover { request, add, reply } => {
                    if stopping.is_some() {
                        let _ = reply.send(Err(ManageError::Stopping));
                    } else {
                        self.ask_takeover(request, add, reply);
                    }
                }
                Msg::Change { change, reply } => {
                    if stopping.is_some() {
                        let _ = reply.send(Err(ManageError::Stopping));
                    } else {
                        self.ask_change(change, reply);
                    }
                }
                Msg::SpeedLimits { min, max, reply } => {
                    let now = self.now();
                    let result = self.policy.speed_limits().with(min, max).inspect(|&limits| {
                        if limits != self.policy.speed_limits() {
                            log(&format!(
                                "speed limits: min {} bytes/s, max {} bytes/s",
                                limits.min_bytes_per_sec, limits.max_bytes_per_sec
                            ));
                        }
                        self.policy.set_speed_limits(limits, now);
                    });
                    let _ = reply.send(result);
                }
                Msg::RemoteLimits { member, change, reply } => {
                    let _ = reply.send(self.remote_limits(member.as_deref(), change));
                }
                Msg::ReturnBackoff { change, reply } => {
                    let result = change.apply(self.returns.backoff()).inspect(|&backoff| {
                        if backoff != self.returns.backoff() {
                            log(&format!(
                                "members lost for being unreachable: {}",
                                if backoff.enabled {
                                    format!("tried again after {:?}, then up to every {:?}", backoff.first, backoff.max)
                                } else {
                                    "not tried again".to_string()
                                }
                            ));
                        }
                        self.returns.set_backoff(backoff);
                    });
                    let _ = reply.send(result);
                }
                Msg::WaitIdle(reply) => {
                    // Winding down for a change (the next step of a level change among them):
                    // answered once that has run.
                    if self.policy.pass_idle(&self.array) && self.grow_ask.is_none() {
                        let _ = reply.send(self.status());
                    } else {
                        self.idle_waiters.push(reply);
                    }
                }
            }
            // A request can finish as it is submitted, without member I/O (a read served from
            // what the engine read ahead): nothing else would hand it to its job.
            self.after_completions();
            self.pump();
        }
    }

    fn status(&self) -> ArrayStatus {
        let now = self.now();
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
            spares: self.array.spare_names(),
            dirty: self.array.is_dirty(),
            needs_resync: self.array.needs_resync(),
            degraded: states.iter().filter(|s| **s != SlotState::InSync).count(),
            sync: self.policy.pass().map(|r| SyncProgress {
                action: r.action,
                done_bytes: r.done_bytes(),
                total_bytes: r.end - r.start,
                bytes_per_sec: r.bytes_per_sec(now),
                eta_secs: r.eta_secs(now),
            }),
            mismatch_sectors: self.policy.mismatch_sectors(),
            last_sync: self.policy.last_pass().map(str::to_string),
            last_sync_bytes: self.policy.last_pass_bytes(),
            passes_ended: self.policy.passes_ended(),
            requests: {
                let (reads, writes, _) = self.inline.served();
                self.report.requests + reads + writes
            },
            returning: self
                .returns
                .members()
                .iter()
                .map(|m| ReturningReport {
                    device: m.device.clone(),
                    slot: m.slot,
                    attempts: m.attempts,
                    next_attempt_in: if m.in_flight { Duration::ZERO } else { m.next_attempt.saturating_sub(now) },
                    last_failure: m.last_failure.as_ref().map(|f| f.text().to_string()),
                    refused: matches!(m.last_failure, Some(AttemptFailure::Refused(_))),
                })
                .collect(),
            readded: self.readded,
            ..ArrayStatus::of(
                &self.info,
                self.array.identity(),
                self.array.mdstat_shape(),
                slots,
                self.policy.speed_limits(),
            )
        }
    }

    /// The next message, driving member I/O (metadata ops included) and taking the metadata
    /// thread's answer meanwhile;
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
                self.metadata_thread_answered(result);
                return Next::Progress;
            }
            if let Ok(answer) = self.reopen.answers.try_recv() {
                self.return_attempt_answered(answer);
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
                        self.unplug();
                        self.drive_members();
                    }
                    // Requests taken from the queue together are submitted plugged, so
                    // sequential parity writes gather into whole stripes (see the engine's
                    // `write_gather`); the plug is pulled before the thread drives the members
                    // on its own or sleeps.
                    self.array.engine_mut().plug();
                    return Next::Msg(m);
                }
                Err(TryRecvError::Disconnected) => {
                    self.unplug();
                    return Next::Closed;
                }
                Err(TryRecvError::Empty) => {}
            }
            self.unplug();
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
            let reopen_answered = !self.reopen.answers.is_empty();
            if rx.is_empty()
                && !meta_answered
                && !reopen_answered
                && !notifier::has_looped_back()
                && !self.members_have_answers()
            {
                self.back.notifier.wait(deadline);
            }
            self.back.notifier.sleeping.store(false, Ordering::SeqCst);
            self.back.notifier.drain();
        }
    }

    /// The batch of requests is over: the engine releases the writes it held (see `next_msg`),
    /// and their member I/O goes to the members' paths.
    fn unplug(&mut self) {
        self.array.engine_mut().unplug();
        self.pump();
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
        self.wind_down()?;
        Ok(self.report)
    }

    /// What a stop does once everything accepted is done (see [`Runner::finish`]), the array
    /// left to the caller.
    fn wind_down(&mut self) -> Result<(), OpenError> {
        self.inline.set(None);
        self.inline_on = false;
        (self.report.inline_reads, self.report.inline_writes, self.report.spliced_reads) = self.inline.served();
        self.report.requests += self.report.inline_reads + self.report.inline_writes;
        // No metadata job is out (the stop waited for it): from here on the metadata is written
        // on this thread, as the engine is done.
        if let Some(MetadataIo { jobs, answers, thread }) = self.meta_io.take() {
            drop((jobs, answers));
            let _ = thread.join();
        }
        self.array.defer_metadata(false);
        // The stop cut the pass short, and the policy closed it once its last step was in;
        // closing is asked again in case nothing since did.
        let now = self.now();
        self.policy.interrupt_pass(&mut self.array, now);
        self.policy_events();
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
        Ok(())
    }
}
