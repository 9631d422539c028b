//! The array's metadata during the run. md's metadata (in `OpenArray`, deferred) queues its
//! superblock, bitmap and log-header writes as steps; the run performs them as simulated member
//! I/O with latencies, so a crash lands between and inside them like any other write, torn
//! sectors included. What must wait for them waits here:
//!
//! - a client write waits, parked, until the dirty mark and the bitmap bits it needs are durable
//!   (later client requests queue behind it, so the order the model assumes holds);
//! - the answer to a write that completed while a member's failure was being recorded counts
//!   as given only once that record is durable;
//! - the clean mark, a rebuild's checkpoints and its end, and a resync's end are recorded only
//!   after a flush of the members, so none runs ahead of the data.

use std::collections::{BTreeMap, VecDeque};

use uraid_engine::array::{Request, SlotState};
use uraid_engine::metadata::{MetaChange, MetaError, MetaOp, Ticket};

use crate::member_device::device_id;
use crate::model::WriteId;

use super::{Failure, Invariant, MetaFlight, Mode, Pending, Queued, Sim, Verify};

/// What is recorded once the members have been flushed.
#[derive(Debug, Clone)]
pub(super) enum AfterFlush {
    /// The array is clean, if no client write came since the flush started (`writes` then).
    Clean { writes: u64 },
    /// The members rebuilding in `slots` are good up to member byte `bytes`.
    Checkpoint { slots: Vec<usize>, bytes: u64 },
    /// The members rebuilding in `slots` (slot, device) are rebuilt.
    Rebuilt { slots: Vec<(usize, usize)> },
    /// A resync has made everything below `array_bytes` consistent.
    ResyncCheckpoint { array_bytes: u64 },
    /// The resync has covered the array.
    ResyncDone,
}

/// The step or flush out on the members.
struct Out {
    /// `None` for a metadata step, else the flush's purpose.
    after: Option<AfterFlush>,
    left: usize,
    error: Option<MetaError>,
}

/// The run's metadata bookkeeping.
#[derive(Default)]
pub(super) struct MetaRun {
    out: Option<Out>,
    flushes: VecDeque<AfterFlush>,
    /// Client requests waiting, in arrival order: a write until its ticket is durable, anything
    /// after it until it has gone.
    parked: VecDeque<(Option<Ticket>, Request, Pending)>,
    dirty_ticket: Option<Ticket>,
    chunk_ticket: BTreeMap<u64, Ticket>,
    /// Write answers given while a member failure is being recorded: they count once it is.
    held: Vec<WriteId>,
    roles: Option<Ticket>,
    next_id: u64,
    /// Client writes submitted so far (a clean mark is recorded only if none came meanwhile).
    pub(super) writes: u64,
    pub(super) steps: u64,
}

impl MetaRun {
    /// Forget everything in flight (a crash).
    pub(super) fn crash(&mut self) {
        *self = MetaRun { writes: self.writes, steps: self.steps, next_id: self.next_id, ..MetaRun::default() };
    }

    pub(super) fn flushing(&self, what: impl Fn(&AfterFlush) -> bool) -> bool {
        self.out.as_ref().and_then(|o| o.after.as_ref()).is_some_and(&what) || self.flushes.iter().any(what)
    }

    pub(super) fn has_parked(&self) -> bool {
        !self.parked.is_empty()
    }
}

impl Sim {
    /// Hand a client request to the engine, or park it behind the metadata it needs (see the
    /// module docs).
    pub(super) fn submit_client(&mut self, request: Request, pending: Pending) -> Result<(), Failure> {
        let mut needed = None;
        if matches!(pending, Pending::Write { .. }) {
            self.meta.writes += 1;
            match self.record_write_intent(&request) {
                Ok(t) => needed = t,
                // It must not go out unrecorded: it fails.
                Err(why) => return self.parked_failed(request, pending, why),
            }
        }
        if needed.is_some() || self.meta.has_parked() {
            trace!(self, "client request parked until {needed:?} is durable");
            self.client_inflight += 1;
            self.meta.parked.push_back((needed, request, pending));
            return Ok(());
        }
        self.submit(request, pending)?;
        Ok(())
    }

    /// Record what a write needs before it goes out (the dirty mark, its bitmap bits) and
    /// return the newest ticket of those not yet durable.
    fn record_write_intent(&mut self, request: &Request) -> Result<Option<Ticket>, String> {
        if !self.redundant {
            return Ok(None);
        }
        let (offset, len) = match request {
            Request::Write { offset, data } => (*offset, data.len() as u64),
            Request::Discard { offset, len } => (*offset, *len),
            _ => return Ok(None),
        };
        if !self.open.is_dirty() {
            match self.open.record_change(MetaChange::Dirty) {
                Ok(t) => self.meta.dirty_ticket = t.or(self.meta.dirty_ticket),
                Err(e) => return Err(format!("recording dirty failed: {e}")),
            }
        }
        if let Some(chunks) = self.intent_chunks(offset, len) {
            match self.open.set_write_intent(chunks.clone(), true) {
                Ok(Some(t)) => {
                    for c in chunks {
                        self.meta.chunk_ticket.insert(c, t);
                    }
                }
                Ok(None) => {}
                Err(e) => return Err(format!("setting bitmap bits failed: {e}")),
            }
        }
        let chunks = self.intent_chunks(offset, len);
        let pending = |t: &Ticket| !self.open.metadata_durable(*t);
        let bits = chunks.into_iter().flatten().filter_map(|c| self.meta.chunk_ticket.get(&c));
        let needed = self.meta.dirty_ticket.iter().chain(bits).filter(|t| pending(t)).max().copied();
        match (needed, self.open.metadata_failed()) {
            // It could never be durable.
            (Some(_), Some(e)) => Err(e.to_string()),
            _ => Ok(needed),
        }
    }

    /// The bitmap chunks a logical range touches: per member for raid1/4/5/6 (a parity write
    /// touches whole stripes), of the array for raid10. `None` without a bitmap.
    fn intent_chunks(&self, offset: u64, len: u64) -> Option<std::ops::Range<u64>> {
        let bits = self.open.write_intent()?;
        if len == 0 || bits.chunk_bytes == 0 {
            return None;
        }
        let (start, end) = match self.geometry.stripe_data_bytes() {
            Some(width) => {
                let chunk = self.geometry.chunk_bytes();
                (offset / width * chunk, (offset + len).div_ceil(width) * chunk)
            }
            None => (offset, offset + len),
        };
        Some(start / bits.chunk_bytes..end.div_ceil(bits.chunk_bytes))
    }

    /// Queue a flush of the members, then `after`.
    pub(super) fn flush_then(&mut self, after: AfterFlush) {
        trace!(self, "metadata: flush, then {after:?}");
        self.meta.flushes.push_back(after);
    }

    /// Record a change now (a membership change after a failure, a rebuild's end).
    /// Within the redundancy a metadata update must not fail; beyond it, it may.
    pub(super) fn record(&mut self, change: MetaChange) -> Result<Option<Ticket>, Failure> {
        match self.open.record_change(change.clone()) {
            Ok(t) => Ok(t),
            Err(e) if self.mode == Mode::Normal => {
                Err(self.fail(Invariant::RequestFailed, format!("recording {change:?} failed: {e}")))
            }
            Err(e) => {
                trace!(self, "recording {change:?} failed: {e}");
                self.report.requests_failed += 1;
                Ok(None)
            }
        }
    }

    /// Members the engine failed: the survivors' superblocks record it, and write answers
    /// count only once that is durable.
    pub(super) fn record_failures(&mut self) -> Result<(), Failure> {
        if let Some(t) = self.record(MetaChange::Roles)? {
            self.meta.roles = Some(t);
        }
        Ok(())
    }

    /// A member failure recorded outside [`Sim::record_failures`] (an operator's fail).
    pub(super) fn meta_roles_pending(&mut self, ticket: Ticket) {
        self.meta.roles = Some(ticket);
    }

    /// Whether a member failure is being recorded (and still may be).
    pub(super) fn failure_being_recorded(&self) -> bool {
        self.meta.roles.is_some_and(|t| !self.open.metadata_durable(t)) && self.open.metadata_failed().is_none()
    }

    /// A write's answer: given now, or held while a member failure is being recorded.
    pub(super) fn write_answered(&mut self, wid: WriteId) {
        if self.failure_being_recorded() {
            self.meta.held.push(wid);
        } else {
            self.model.write_acked(wid);
        }
    }

    /// Start the next metadata step, or the next flush, when none is out.
    pub(super) fn drive_metadata(&mut self) -> Result<(), Failure> {
        if self.meta.out.is_some() {
            return Ok(());
        }
        let (ops, after) = if let Some(step) = self.open.next_metadata_step() {
            (step.into_iter().map(|(_, op)| op).collect::<Vec<_>>(), None)
        } else if let Some(after) = self.meta.flushes.pop_front() {
            (self.open.live_flushes().into_iter().map(|(_, op)| op).collect(), Some(after))
        } else {
            return Ok(());
        };
        self.meta.steps += 1;
        self.meta.out = Some(Out { after, left: ops.len(), error: None });
        if ops.is_empty() {
            return self.metadata_out_done();
        }
        for op in ops {
            self.schedule_metadata(op)?;
        }
        Ok(())
    }

    fn schedule_metadata(&mut self, op: MetaOp) -> Result<(), Failure> {
        let idx = op.device();
        let name = self.open.members.get(idx).map(|m| m.dev.name().to_string()).unwrap_or_default();
        let Some(dev) = device_id(&name) else {
            return Err(self.fail(Invariant::Protocol, format!("a metadata op for device {idx} ({name:?}), unknown")));
        };
        let len = match &op {
            MetaOp::Write { data, offset, .. } => {
                if !self.devices[dev].in_range(*offset, data.len() as u64) {
                    return Err(self.fail(
                        Invariant::Protocol,
                        format!("a metadata write at {offset}+{} past the end of d{dev}", data.len()),
                    ));
                }
                data.len() as u64
            }
            MetaOp::Flush { .. } => 0,
        };
        let base = self.latency[dev];
        let latency = match op {
            MetaOp::Flush { .. } => base * 2 + self.rng.between(0, base * 3),
            MetaOp::Write { .. } => base / 2 + self.rng.between(0, base) + len * 2,
        };
        let id = self.meta.next_id;
        self.meta.next_id += 1;
        let done_at = self.now + latency;
        self.queue.insert((done_at, self.seq), Queued::Metadata(id));
        self.seq += 1;
        let mark = matches!(op, MetaOp::Flush { .. }).then(|| self.devices[dev].flush_mark());
        trace!(self, "  meta {id} issue {op_name} d{dev} +{len}", op_name = meta_op_name(&op));
        self.fingerprint(id.rotate_left(40) ^ dev as u64 ^ len << 20 ^ done_at);
        self.meta_ios.insert(id, MetaFlight { op, dev, mark });
        Ok(())
    }

    pub(super) fn complete_metadata_io(&mut self, id: u64) -> Result<(), Failure> {
        let f = self.meta_ios.remove(&id).expect("a scheduled metadata I/O");
        let d = &mut self.devices[f.dev];
        let result = if d.dead {
            Err("member is dead".to_string())
        } else {
            match &f.op {
                MetaOp::Write { offset, data, .. } => d.write(*offset, data),
                MetaOp::Flush { .. } => {
                    d.flush_done(f.mark.expect("flushes carry a mark"));
                    Ok(())
                }
            }
        };
        trace!(self, "  meta {id} done {} d{}: {result:?}", meta_op_name(&f.op), f.dev);
        self.report.metadata_ios += 1;
        let out = self.meta.out.as_mut().expect("a metadata I/O belongs to the step out");
        out.left -= 1;
        if let Err(reason) = result {
            let what = match &f.op {
                MetaOp::Write { what, .. } => what.to_string(),
                MetaOp::Flush { .. } => "flushing metadata".to_string(),
            };
            out.error.get_or_insert(MetaError::Io { device: f.op.device(), what, reason });
        }
        if out.left == 0 {
            self.metadata_out_done()?;
        }
        Ok(())
    }

    fn metadata_out_done(&mut self) -> Result<(), Failure> {
        let out = self.meta.out.take().expect("a step was out");
        let result = out.error.map_or(Ok(()), Err);
        match out.after {
            None => {
                if let Err(e) = self.open.metadata_step_done(result) {
                    trace!(self, "metadata: writing failed: {e}");
                }
                // A member whose metadata could not be written may have been failed for it.
                self.pump_events()?;
            }
            Some(after) => match result {
                Ok(()) => self.after_flush(after)?,
                Err(e) => {
                    trace!(self, "metadata: flush before {after:?} failed: {e}");
                    // The job's end is not recorded: it runs again.
                    match after {
                        AfterFlush::Rebuilt { .. } => self.recovery = None,
                        AfterFlush::ResyncDone => self.resync = None,
                        _ => {}
                    }
                }
            },
        }
        self.release_parked()?;
        if !self.failure_being_recorded() {
            self.meta.roles = None;
            for wid in std::mem::take(&mut self.meta.held) {
                self.model.write_acked(wid);
            }
        }
        Ok(())
    }

    fn after_flush(&mut self, after: AfterFlush) -> Result<(), Failure> {
        trace!(self, "metadata: members flushed for {after:?}");
        match after {
            AfterFlush::Clean { writes } => {
                let idle = writes == self.meta.writes && self.inflight_writes.is_empty() && !self.meta.has_parked();
                if idle && self.open.is_dirty() && !self.open.needs_resync() {
                    self.record(MetaChange::Clean)?;
                }
            }
            AfterFlush::Checkpoint { slots, bytes } => {
                for &slot in &slots {
                    self.open.set_recovery_checkpoint(slot, bytes / 512);
                }
                self.record(MetaChange::Roles)?;
            }
            AfterFlush::Rebuilt { slots } => self.rebuilt(slots)?,
            AfterFlush::ResyncCheckpoint { array_bytes } => {
                self.record(MetaChange::ResyncCheckpoint { array_bytes })?;
                if self.inflight_writes.is_empty() && !self.meta.has_parked() {
                    self.record(MetaChange::Clean)?;
                }
            }
            AfterFlush::ResyncDone => self.resync_done()?,
        }
        Ok(())
    }

    /// The members rebuilt in `slots` are in sync: recorded, unless one failed meanwhile.
    fn rebuilt(&mut self, slots: Vec<(usize, usize)>) -> Result<(), Failure> {
        for (slot, dev) in slots {
            let same = self.slot_dev[slot] == Some(dev);
            if !same || self.open.engine().slot_states()[slot] != SlotState::Recovering {
                continue;
            }
            if let Err(e) = self.open.recovery_done(slot) {
                return Err(self.fail(Invariant::Protocol, format!("marking rebuilt slot {slot} in sync failed: {e}")));
            }
            trace!(self, "slot {slot} (d{dev}) rebuilt and in sync");
        }
        self.recovery = None;
        self.report.rebuilds += 1;
        self.verify.push(Verify::AfterRebuild);
        Ok(())
    }

    /// Hand the parked requests whose metadata is durable to the engine, in order; fail them if
    /// it never can be.
    fn release_parked(&mut self) -> Result<(), Failure> {
        while let Some((needed, _, _)) = self.meta.parked.front() {
            if let Some(t) = needed {
                if !self.open.metadata_durable(*t) {
                    if let Some(e) = self.open.metadata_failed() {
                        let (_, request, pending) = self.meta.parked.pop_front().expect("looked at");
                        self.client_inflight -= 1;
                        self.parked_failed(request, pending, e.to_string())?;
                        continue;
                    }
                    return Ok(());
                }
            }
            let (_, request, pending) = self.meta.parked.pop_front().expect("looked at");
            self.client_inflight -= 1;
            self.submit(request, pending)?;
        }
        Ok(())
    }

    fn parked_failed(&mut self, request: Request, pending: Pending, why: String) -> Result<(), Failure> {
        if let Pending::Write { wid } = pending {
            self.inflight_writes.remove(&wid);
            self.model.write_failed(wid);
        }
        let what = match request {
            Request::Write { offset, data } => format!("write {offset}+{}", data.len()),
            other => format!("{other:?}"),
        };
        self.request_failed(format!("{what} (parked)"), why)
    }
}

fn meta_op_name(op: &MetaOp) -> String {
    match op {
        MetaOp::Write { what, .. } => what.to_string(),
        MetaOp::Flush { .. } => "flush".into(),
    }
}
