//! The engine thread while the array is reshaped (md's reshape, `sync_action` "reshape"): a
//! [`Grow`] moves the data one new stripe at a time, and client requests are served between
//! its steps, through the new shape below the position it has reached and the old one above
//! (see `crate::reshape`'s `io` module). Requests come first: at most [`REQUESTS_PER_STEP`]
//! are taken between two steps, and the steps keep to the speed limits' maximum, so the reshape
//! neither starves clients nor is starved by them.
//!
//! Every request is done in full before the next step, on this thread, so none overlaps the
//! stripe being moved: md blocks such I/O until the stripe is moved, which here cannot arise.
//! The position is recorded every [`RECORD_EVERY`] as well as when the reshape needs it, so a
//! crash repeats little; a stop records it, and the next assembly goes on from there.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use uraid_engine::{EngineError, SlotState};

use super::follow_up::FollowUp;
use super::messages::Msg;
use super::notifier;
use super::{
    log, ArrayStatus, BlockOp, BlockReply, Done, ManageError, RemoteLimitsError, ReshapeProgress, ServiceConfig,
    ServiceError, ServiceInfo, SlotReport, StopError, StopReport, SyncError,
};
use crate::array_policy::{throttle_delay, SpeedWindow};
use crate::member::MemberDevice;
use crate::reshape::{Grow, GrowError};

/// Client requests taken between two reshape steps, at most.
const REQUESTS_PER_STEP: usize = 16;

/// How often the position reached is recorded besides when the reshape needs it.
const RECORD_EVERY: Duration = Duration::from_secs(2);

/// Zeroing requests are written in pieces of this size...
const ZERO_PIECE: u64 = 1 << 20;

/// ...each a slice of these zeros, shared by every request (zero-filled: no room in the binary).
static ZEROS: [u8; ZERO_PIECE as usize] = [0; ZERO_PIECE as usize];

/// What one phase of the engine thread hands the next: the report so far, the callers waiting
/// for the array to be idle, and requests taken and not yet served, in order.
pub(super) struct CarriedOver {
    pub report: StopReport,
    pub idle_waiters: Vec<Sender<ArrayStatus>>,
    pub requests: Vec<(BlockOp, Done)>,
    /// The change to make once the array is idle again, if this phase is a step of a chain.
    pub follow_up: Option<FollowUp>,
}

/// A reshape finished: every stripe moved and the end recorded. The array is to be served in
/// its new shape, with these devices.
pub(super) struct Finished {
    pub devices: Vec<Arc<dyn MemberDevice>>,
    pub config: ServiceConfig,
    pub carried: CarriedOver,
}

/// How the reshape phase ended.
pub(super) enum ReshapeEnd {
    Finished(Box<Finished>),
    /// Stopped (the position recorded), or every sender gone.
    Stopped,
}

/// The reshape phase's state.
pub(super) struct Reshaping {
    grow: Grow,
    config: ServiceConfig,
    info: Arc<ServiceInfo>,
    uuid: String,
    md_shape: Option<String>,
    report: StopReport,
    idle_waiters: Vec<Sender<ArrayStatus>>,
    /// Requests to serve before any new message.
    queued: VecDeque<(BlockOp, Done)>,
    /// When the phase began: the speed window's times are measured from it.
    began: Instant,
    /// The position over the last few seconds: the speed shown, and held to the limits.
    speed: SpeedWindow,
    last_record: Instant,
    /// The reshape stopped on a failure: nothing more is done until the array is stopped.
    failed: Option<String>,
    /// How many of the members that failed part-way (the reshape going on without them) have
    /// been logged and reported.
    reported_failures: usize,
    /// The change to make once the reshape has ended and the array is idle (the takeover a
    /// restripe makes possible).
    follow_up: Option<FollowUp>,
}

impl Reshaping {
    pub(super) fn new(
        grow: Grow,
        config: ServiceConfig,
        info: Arc<ServiceInfo>,
        uuid: String,
        md_shape: Option<String>,
        carried: CarriedOver,
    ) -> Reshaping {
        let CarriedOver { report, idle_waiters, requests, follow_up } = carried;
        let now = Instant::now();
        let (done, total) = grow.progress();
        log(&format!(
            "reshape of {} {} {} at {}K of {}K",
            grow.name(),
            grow.change(),
            if done == 0 { "starting" } else { "continuing" },
            done / 1024,
            total / 1024
        ));
        Reshaping {
            grow,
            config,
            info,
            uuid,
            md_shape,
            report,
            idle_waiters,
            queued: requests.into(),
            began: now,
            speed: SpeedWindow::new(Duration::ZERO, done),
            last_record: now,
            failed: None,
            reported_failures: 0,
            follow_up,
        }
    }

    /// Run the reshape to its end, serving requests meanwhile, or until stopped.
    pub(super) fn serve(mut self, rx: &Receiver<Msg>) -> ReshapeEnd {
        loop {
            let mut taken = 0;
            while taken < REQUESTS_PER_STEP {
                if let Some((op, done)) = self.queued.pop_front() {
                    self.serve_request(op, done);
                    taken += 1;
                    continue;
                }
                let Some(msg) = notifier::take_looped_back().or_else(|| rx.try_recv().ok()) else { break };
                if let Some(end) = self.take(msg) {
                    return end;
                }
                taken += 1;
            }
            let wait = self.pace_wait(rx);
            if self.failed.is_none() && !wait.is_zero() && !self.queued.is_empty() {
                // Held back, with requests already taken: serve those rather than wait for more.
                continue;
            }
            if self.failed.is_some() || !wait.is_zero() {
                // Nothing to do until a message comes (or the pace allows the next step).
                let timeout = if self.failed.is_some() { Duration::from_secs(3600) } else { wait };
                match rx.recv_timeout(timeout) {
                    Ok(msg) => {
                        if let Some(end) = self.take(msg) {
                            return end;
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return self.stop(None),
                }
                continue;
            }
            let stepped = self.grow.step();
            self.note_failures();
            match stepped {
                Ok(true) => return self.finished(),
                Ok(false) => {}
                Err(e) => self.fail(format!("{e}")),
            }
            self.speed.mark(self.began.elapsed(), self.grow.progress().0);
            if self.failed.is_none() && self.last_record.elapsed() >= RECORD_EVERY {
                if let Err(e) = self.grow.checkpoint() {
                    self.fail(format!("{e}"));
                }
                self.last_record = Instant::now();
            }
        }
    }

    /// Take one message; `Some` when the phase ends with it.
    fn take(&mut self, msg: Msg) -> Option<ReshapeEnd> {
        match msg {
            Msg::Submit(op, pending) => {
                self.report.requests += 1;
                self.serve_request(op, pending.take());
            }
            Msg::Stop(ack) => return Some(self.stop(Some(ack))),
            Msg::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Msg::StartSync(action, reply) => {
                let _ = reply.send(Err(SyncError::Reshaping(action)));
            }
            // The reshape is not a pass `idle` stops: md's `idle` does not stop a reshape either
            // (it is restarted at once); `uraid stop` records where it got to.
            Msg::Idle(reply) => {
                let _ = reply.send(());
            }
            Msg::WaitIdle(reply) => self.idle_waiters.push(reply),
            Msg::Manage(_, reply) => {
                let _ = reply.send(Err(ManageError::Reshaping));
            }
            Msg::Grow { reply, .. } | Msg::Change { reply, .. } | Msg::Takeover { reply, .. } => {
                let _ = reply.send(Err(ManageError::Reshaping));
            }
            Msg::SpeedLimits { min, max, reply } => {
                let result = self.config.speed.with(min, max).inspect(|&limits| {
                    self.config.speed = limits;
                    self.speed.restart(self.began.elapsed(), self.grow.progress().0);
                });
                let _ = reply.send(result);
            }
            Msg::RemoteLimits { reply, .. } => {
                let _ = reply.send(Err(RemoteLimitsError::Member(ManageError::Reshaping)));
            }
            Msg::ReturnBackoff { reply, .. } => {
                let _ = reply.send(Err(crate::array_policy::ReturnBackoffError::Reshaping));
            }
        }
        None
    }

    /// How long to wait before the next step to keep to the speed limits, as a pass keeps to
    /// them: clients waiting count as foreground I/O. Capped, so a message is looked at soon.
    fn pace_wait(&self, rx: &Receiver<Msg>) -> Duration {
        let (done, elapsed) = self.speed.window(self.began.elapsed(), self.grow.progress().0);
        let clients_waiting = !self.queued.is_empty() || !rx.is_empty();
        throttle_delay(done, elapsed, clients_waiting, self.config.speed).min(Duration::from_millis(200))
    }

    fn serve_request(&mut self, op: BlockOp, done: Done) {
        if let Some(why) = &self.failed {
            return done(Err(ServiceError::Reshape(format!("the reshape stopped: {why}"))));
        }
        let result = match op {
            BlockOp::Read { offset, len } => self.grow.read(offset, len).map(BlockReply::Data),
            BlockOp::Write { offset, data, fua } => self
                .grow
                .write(offset, data)
                .and_then(|()| if fua { self.grow.flush() } else { Ok(()) })
                .map(|()| BlockReply::Done),
            BlockOp::Flush => self.grow.flush().map(|()| BlockReply::Done),
            // Advisory, and a discard would have to keep each shape's parity: not passed on
            // (refused all the same past the end, as the runner refuses it).
            BlockOp::Trim { offset, len } => self.grow.check_range(offset, len).map(|()| BlockReply::Done),
            BlockOp::Zero { offset, len, fua, .. } => self.zero(offset, len, fua).map(|()| BlockReply::Done),
        };
        self.note_failures();
        done(result.map_err(|e| {
            if let GrowError::OutOfRange { offset, len, size } = e {
                // The client's mistake, answered as the runner answers it.
                return ServiceError::Engine(EngineError::OutOfRange { offset, len, size });
            }
            let text = e.to_string();
            if matches!(e, GrowError::Member(_) | GrowError::Engine(_)) {
                self.fail(text.clone());
            }
            ServiceError::Reshape(text)
        }))
    }

    fn zero(&mut self, offset: u64, len: u64, fua: bool) -> Result<(), GrowError> {
        // The whole range first: a refusal at a later piece would leave the first ones written.
        self.grow.check_range(offset, len)?;
        let zeros = Bytes::from_static(&ZEROS);
        let mut at = offset;
        while at < offset + len {
            let piece = ZERO_PIECE.min(offset + len - at);
            self.grow.write(at, zeros.slice(..piece as usize))?;
            at += piece;
        }
        if fua {
            self.grow.flush()?;
        }
        Ok(())
    }

    /// Say which members failed since last looked at: the reshape goes on without them (md
    /// goes on degraded), and the stop report lists them.
    fn note_failures(&mut self) {
        let failures = self.grow.failures();
        if failures.len() == self.reported_failures {
            return;
        }
        for (name, why) in failures.into_iter().skip(self.reported_failures) {
            log(&format!(
                "member {name} failed during the reshape of {} ({why}): recorded faulty, the reshape goes on degraded",
                self.grow.name()
            ));
            self.report.failed_members.push((name, why));
            self.reported_failures += 1;
        }
    }

    fn fail(&mut self, why: String) {
        log(&format!(
            "reshape of {} stopped: {why}; stop the array, and assemble it again to continue",
            self.grow.name()
        ));
        self.failed.get_or_insert(why);
    }

    /// Record where the reshape got to (unless it failed: its last record stands) and end.
    fn stop(&mut self, ack: Option<Sender<Result<StopReport, StopError>>>) -> ReshapeEnd {
        super::types::answer_stopping(self.queued.drain(..));
        let result = match &self.failed {
            Some(why) => Err(StopError::Reshape(why.clone())),
            None => match self.grow.stop() {
                Ok(()) => {
                    let (done, total) = self.grow.progress();
                    log(&format!(
                        "reshape of {} stopped at {}K of {}K; assembling the array again continues it",
                        self.grow.name(),
                        done / 1024,
                        total / 1024
                    ));
                    self.report.clean = !self.grow.dirty();
                    self.report.resync_needed = self.grow.dirty();
                    Ok(self.report.clone())
                }
                Err(e) => Err(StopError::Reshape(e.to_string())),
            },
        };
        let status = ArrayStatus { reshape: None, ..self.status() };
        for w in self.idle_waiters.drain(..) {
            let _ = w.send(status.clone());
        }
        if let Some(ack) = ack {
            let _ = ack.send(result);
        }
        ReshapeEnd::Stopped
    }

    fn finished(self) -> ReshapeEnd {
        let (_, total) = self.grow.progress();
        log(&format!(
            "reshape of {} finished: {}, array size {}K (new connections are told it; connected clients keep the size they were told)",
            self.grow.name(),
            self.grow.outcome(),
            total / 1024
        ));
        ReshapeEnd::Finished(Box::new(Finished {
            devices: self.grow.devices(),
            config: self.config,
            carried: CarriedOver {
                report: self.report,
                idle_waiters: self.idle_waiters,
                requests: self.queued.into(),
                follow_up: self.follow_up,
            },
        }))
    }

    fn status(&self) -> ArrayStatus {
        let (done, total) = self.grow.progress();
        let (from, to) = self.grow.raid_disks();
        let bytes_per_sec = self.speed.bytes_per_sec(self.began.elapsed(), done);
        let slots: Vec<SlotReport> = self
            .grow
            .slots()
            .into_iter()
            .enumerate()
            .map(|(slot, (device, state))| SlotReport { slot, device, state })
            .collect();
        ArrayStatus {
            degraded: slots.iter().filter(|s| s.state != SlotState::InSync).count(),
            dirty: self.grow.dirty(),
            needs_resync: self.grow.owes_resync(),
            reshape: Some(ReshapeProgress {
                from_disks: from,
                to_disks: to,
                done_bytes: done,
                total_bytes: total,
                bytes_per_sec,
                eta_secs: (bytes_per_sec > 0).then(|| (total - done) / bytes_per_sec),
            }),
            requests: self.report.requests,
            ..ArrayStatus::of(&self.info, self.uuid.clone(), self.md_shape.clone(), slots, self.config.speed)
        }
    }
}
