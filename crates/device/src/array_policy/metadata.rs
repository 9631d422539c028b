//! The metadata I/O the policy hands out, one job at a time, and what it records once a job is
//! done: queued metadata steps first, then member flushes, each flush with what it is for.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use uraid_engine::array::Request;
use uraid_engine::idmap::IdMap;
use uraid_engine::metadata::{MetaChange, MetaError, MetaOp, Ticket};
use uraid_engine::SlotState;

use super::{ArrayPolicy, MetadataError, PolicyEvent, WriteId};
use crate::member::MemberDevice;
use crate::open_array::OpenArray;

/// What is recorded once the members have been flushed.
#[derive(Debug)]
pub(super) enum AfterFlush {
    /// The array is clean, if no write ended since `writes_ended` (as it was then) and none is
    /// in flight.
    Clean { writes_ended: u64 },
    /// These bitmap chunks are clear, those still idle since before the flush was queued (they
    /// went idle no later than the `idle_order`-th chunk to go idle).
    IntentClear { idle_order: u64, chunks: Vec<u64> },
    /// The members rebuilding in `slots` are good up to member sector `sectors`.
    /// Each slot with the device that held it when the checkpoint was taken: one that another
    /// device holds by the time the flush is done is left alone.
    Checkpoint { slots: Vec<(usize, String)>, sectors: u64 },
    /// A resync has made everything below `array_bytes` consistent.
    /// `writes_ended` as when the flush was queued: the position is written as an idle record
    /// only if no write ended since (one that did may not be on the members yet).
    ResyncCheckpoint { array_bytes: u64, writes_ended: u64 },
    /// The members rebuilding in `slots` (slot, device name) are rebuilt.
    Rebuilt { slots: Vec<(usize, String)> },
}

/// What kind of job [`ArrayPolicy::next_metadata_io`] handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataIoKind {
    /// A step of the array's queued metadata writes (superblocks, bitmap, and the flushes the
    /// format orders between them).
    Step,
    /// A flush of every live member, which something the policy records waits for.
    MemberFlush,
}

/// One metadata job for the caller to perform: its ops may run in any order or at once, each on
/// the device it names; the job is done when all are (or failed at the first that fails).
pub struct MetadataIo {
    pub kind: MetadataIoKind,
    pub ops: Vec<(Arc<dyn MemberDevice>, MetaOp)>,
}

/// What the metadata job out is.
enum MetaOut {
    Step,
    Flush(AfterFlush),
}

/// Metadata I/O out and queued, and what waits on it.
#[derive(Default)]
pub(super) struct MetaState {
    out: Option<MetaOut>,
    /// Flushes waiting to be handed out, each with what it is for; they go after the queued
    /// metadata steps.
    flushes: VecDeque<AfterFlush>,
    /// Writes waiting for their records, in arrival order, each with the ticket it needs.
    pub(super) parked: VecDeque<(WriteId, Ticket)>,
    /// A pass's writing step waiting for its bitmap bits (or the dirty mark) to be durable.
    pub(super) parked_step: Option<(Request, Ticket)>,
    /// The last dirty mark recorded, and per bitmap chunk the record that last set its bit: a
    /// write waits for those of them it needs and are not yet durable, not for everything
    /// recorded before it.
    pub(super) dirty_ticket: Option<Ticket>,
    pub(super) chunk_ticket: IdMap<u64, Ticket>,
    /// Answers to writes held until the failure record `roles` is durable.
    pub(super) held: Vec<WriteId>,
    pub(super) roles: Option<Ticket>,
}

impl MetaState {
    /// Whether a flush for `what` is out or waiting.
    fn flushing(&self, what: impl Fn(&AfterFlush) -> bool) -> bool {
        matches!(&self.out, Some(MetaOut::Flush(a)) if what(a)) || self.flushes.iter().any(what)
    }

    /// Whether a rebuild's end is being recorded (its members are not to be rebuilt again).
    pub(super) fn recording_rebuilt(&self) -> bool {
        self.flushing(|a| matches!(a, AfterFlush::Rebuilt { .. }))
    }

    /// Whether a clean mark is on its way (no second one is started meanwhile).
    pub(super) fn cleaning(&self) -> bool {
        self.flushing(|a| matches!(a, AfterFlush::Clean { .. }))
    }

    /// Whether bitmap bits are on their way to being cleared.
    pub(super) fn clearing_intent(&self) -> bool {
        self.flushing(|a| matches!(a, AfterFlush::IntentClear { .. }))
    }
}

impl ArrayPolicy {
    /// Whether metadata I/O is out or waiting, or writes, a pass step or answers wait on
    /// metadata.
    pub(super) fn metadata_busy(&self, array: &OpenArray) -> bool {
        self.meta.out.is_some()
            || !self.meta.flushes.is_empty()
            || !self.meta.parked.is_empty()
            || self.meta.parked_step.is_some()
            || !self.meta.held.is_empty()
            || array.metadata_pending().is_some()
    }

    /// The next metadata job to perform, if none is out: the next queued metadata step, or else
    /// the next member flush. Report it with [`ArrayPolicy::metadata_io_done`] before asking
    /// again; each must be complete before the next starts.
    pub fn next_metadata_io(&mut self, array: &mut OpenArray) -> Option<MetadataIo> {
        if self.meta.out.is_some() {
            return None;
        }
        if let Some(ops) = array.next_metadata_step() {
            self.meta.out = Some(MetaOut::Step);
            return Some(MetadataIo { kind: MetadataIoKind::Step, ops });
        }
        let after = self.meta.flushes.pop_front()?;
        self.meta.out = Some(MetaOut::Flush(after));
        Some(MetadataIo { kind: MetadataIoKind::MemberFlush, ops: array.live_flushes() })
    }

    /// The metadata job handed out last is done, or failed (`result` names the device by its
    /// index, as the ops do). Parked writes and held answers that can go now are released.
    pub fn metadata_io_done(&mut self, array: &mut OpenArray, now: Duration, result: Result<(), MetaError>) {
        match self.meta.out.take() {
            Some(MetaOut::Step) => {
                if let Err(e) = array.metadata_step_done(result) {
                    self.notice(format!("writing the array's metadata failed: {e}"));
                    self.fail_parked(array, now, e.into());
                }
            }
            Some(MetaOut::Flush(after)) => match result {
                Ok(()) => self.after_flush(array, after),
                Err(e) => self.flush_failed(array, now, after, e),
            },
            None => {}
        }
        self.release_parked(array);
        self.release_held(array);
    }

    /// Record `change`; its writes are queued for [`ArrayPolicy::next_metadata_io`] (or written
    /// at once by an array that does not defer them). The ticket they complete, if any.
    pub(super) fn record(
        &mut self,
        array: &mut OpenArray,
        change: MetaChange,
    ) -> Result<Option<Ticket>, MetadataError> {
        array.record_change(change).map_err(MetadataError::from)
    }

    /// Queue a flush of the members, then `after`.
    pub(super) fn flush_then(&mut self, after: AfterFlush) {
        self.meta.flushes.push_back(after);
    }

    fn after_flush(&mut self, array: &mut OpenArray, after: AfterFlush) {
        let recorded = match after {
            AfterFlush::Clean { writes_ended } => {
                let still_idle = self.writes.is_empty() && self.writes_ended == writes_ended;
                if still_idle && array.is_dirty() && !array.needs_resync() {
                    self.record(array, MetaChange::Clean)
                        .map(|_| ())
                        .map_err(|e| format!("marking the array clean failed: {e}"))
                } else {
                    Ok(())
                }
            }
            AfterFlush::IntentClear { idle_order, chunks } => self.clear_flushed_intent(array, idle_order, chunks),
            AfterFlush::Checkpoint { slots, sectors } => {
                let same: Vec<usize> = slots
                    .into_iter()
                    .filter(|(slot, name)| array.slot_device_name(*slot) == Some(name.as_str()))
                    .map(|(slot, _)| slot)
                    .collect();
                self.record_rebuild_checkpoint(array, &same, sectors)
            }
            AfterFlush::ResyncCheckpoint { array_bytes, writes_ended } => {
                // Written with the next update made while no write is in flight (md writes
                // `resync_offset` only while the array is in sync): now, if idle. Only while the
                // resync is still owed: once it has finished, a clean mark now would be a real
                // one, ahead of the resync's last writes, which this flush did not cover (the
                // clean timer marks the array clean after a flush of its own).
                let idle = self.writes.is_empty() && writes_ended == self.writes_ended && array.needs_resync();
                self.record(array, MetaChange::ResyncCheckpoint { array_bytes })
                    .and_then(|_| if idle { self.record(array, MetaChange::Clean).map(|_| ()) } else { Ok(()) })
                    .map_err(|e| format!("recording resync progress failed: {e}"))
            }
            AfterFlush::Rebuilt { slots } => {
                let mut result = Ok(());
                for (slot, name) in slots {
                    // Not if the member failed (or another took its place) meanwhile.
                    let same = array.slot_device_name(slot) == Some(name.as_str());
                    if !same || array.engine().slot_states()[slot] != SlotState::Recovering {
                        continue;
                    }
                    if let Err(e) = array.recovery_done(slot) {
                        result = Err(format!("marking slot {slot} rebuilt failed: {e}"));
                    }
                }
                // A resync the rebuild cut short (or that could not run degraded) goes on once
                // the array is whole, as md's `md_check_recovery` resumes it.
                self.resync_due = self.config.auto_resync && array.needs_resync();
                // A finished rebuild may allow inline requests again, and ends the pass for
                // those who waited for it.
                self.events.push_back(PolicyEvent::RebuildRecorded);
                result
            }
        };
        if let Err(e) = recorded {
            self.notice(e);
        }
    }

    /// Record that the members rebuilding in `slots` are good up to member sector `sectors`.
    pub(super) fn record_rebuild_checkpoint(
        &mut self,
        array: &mut OpenArray,
        slots: &[usize],
        sectors: u64,
    ) -> Result<(), String> {
        for &slot in slots {
            array.set_recovery_checkpoint(slot, sectors);
        }
        self.record(array, MetaChange::Roles).map(|_| ()).map_err(|e| format!("recording rebuild progress failed: {e}"))
    }

    fn flush_failed(&mut self, array: &mut OpenArray, now: Duration, after: AfterFlush, e: MetaError) {
        // A member that cannot flush is failed, as md fails one whose superblock write (and its
        // preflush) fails; the flush goes again to the others.
        if let MetaError::Io { device, what, reason, unreachable } = &e {
            if array.fail_for_metadata(*device, &format!("{what} failed: {reason}"), *unreachable) {
                self.meta.flushes.push_front(after);
                return;
            }
        }
        let e = array.metadata_error(e);
        let line = match after {
            AfterFlush::Clean { .. } => {
                // Try again after another delay, twice as long each time in a row (a member
                // that cannot flush and cannot be failed either: the array is broken).
                self.last_write = now;
                self.clean_failures = (self.clean_failures + 1).min(16);
                format!("flushing before marking the array clean failed: {e}")
            }
            AfterFlush::IntentClear { .. } => format!("flushing before clearing bitmap bits failed: {e}"),
            AfterFlush::Checkpoint { .. } | AfterFlush::ResyncCheckpoint { .. } => {
                format!("flushing before recording a pass's progress failed: {e}")
            }
            AfterFlush::Rebuilt { .. } => {
                format!("flushing after the rebuild failed; the members stay marked as rebuilding: {e}")
            }
        };
        self.notice(line);
    }

    /// What a write (or a pass's writing step) over bitmap `chunks` must wait for: the dirty
    /// mark and the bits of its chunks, those not yet durable; `None` if all are.
    pub(super) fn ticket_needed(&self, array: &OpenArray, chunks: Option<&std::ops::Range<u64>>) -> Option<Ticket> {
        let pending = |t: &Ticket| !array.metadata_durable(*t);
        let chunk_tickets = chunks.into_iter().flat_map(|r| r.clone()).filter_map(|c| self.meta.chunk_ticket.get(&c));
        self.meta.dirty_ticket.iter().chain(chunk_tickets).filter(|t| pending(t)).max().copied()
    }

    /// Release the parked writes whose records are durable, in arrival order. (The parked pass
    /// step goes out from [`ArrayPolicy::next_pass_step`].)
    fn release_parked(&mut self, array: &OpenArray) {
        // Writes that overlap share a bitmap chunk, hence a ticket, and so go out in the order
        // they came; others need not wait for one another.
        let (ready, waiting): (VecDeque<_>, VecDeque<_>) =
            std::mem::take(&mut self.meta.parked).into_iter().partition(|(_, until)| array.metadata_durable(*until));
        self.meta.parked = waiting;
        self.events.extend(ready.into_iter().map(|(id, _)| PolicyEvent::WriteReleased(id)));
        let durable = |t: &Ticket| array.metadata_durable(*t);
        if self.meta.dirty_ticket.as_ref().is_some_and(durable) {
            self.meta.dirty_ticket = None;
        }
        self.meta.chunk_ticket.retain(|_, t| !durable(t));
    }

    /// The metadata could not be written: the parked writes fail rather than go out unrecorded,
    /// and so does a parked pass step.
    fn fail_parked(&mut self, array: &mut OpenArray, now: Duration, why: MetadataError) {
        while let Some((id, _)) = self.meta.parked.pop_front() {
            self.events.push_back(PolicyEvent::WriteFailed(id, why.clone()));
        }
        if self.meta.parked_step.take().is_some() {
            self.pass_step_failed(array, now, &format!("metadata: {why}"));
        }
    }
}
