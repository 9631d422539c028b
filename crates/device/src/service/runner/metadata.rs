//! The array's metadata while serving, without the engine thread waiting on it.
//!
//! The array records every change (dirty before the first write, clean once idle, bitmap bits,
//! failed and rebuilt members, rebuild checkpoints) in its metadata, which queues the writes that
//! make it durable ([`OpenArray::defer_metadata`](crate::open_array::OpenArray::defer_metadata));
//! they go to the metadata I/O thread one step at a time (`service::metadata_io`). What must wait
//! for them waits here instead of blocking the thread:
//!
//! - a write whose array was just recorded dirty, or whose bitmap bits were just set, is parked
//!   until the update is durable, as md holds writes until the superblock and bitmap are written
//!   (`md_write_start`, `md_bitmap_startwrite` with `bitmap_unplug`); parked writes are released
//!   in arrival order, and so is a pass's writing step;
//! - the answer to a write that completed while a member's failure was being recorded is held
//!   until that record is durable, as md holds such bios while `MD_SB_CHANGE_PENDING` is set, so
//!   no client is told "written" while the superblocks still count the failed member in;
//! - what may only be recorded once the data before it is on the members (the clean mark, the
//!   clearing of bitmap bits, a rebuild's checkpoint and its end) comes after a flush of the
//!   members, done on the metadata thread too. md gets the same from the `REQ_PREFLUSH` of its
//!   superblock writes.

use std::collections::VecDeque;
use std::time::Instant;

use uraid_engine::array::Request;
use uraid_engine::metadata::{MetaChange, MetaError, Ticket};
use uraid_engine::SlotState;

use uraid_engine::idmap::IdMap;

use super::{log, Runner};
use crate::service::metadata_io::MetaJob;
use crate::service::{BlockReply, Done, MetadataError, ServiceError};

/// What is recorded once the members have been flushed.
pub(super) enum AfterFlush {
    /// The array is clean, if no write came since `last_write` (as it was then).
    Clean { last_write: Instant },
    /// These bitmap chunks are clear, those still idle since before `started`.
    IntentClear { started: Instant, chunks: Vec<u64> },
    /// The members rebuilding in `slots` are good up to member sector `sectors`.
    Checkpoint { slots: Vec<usize>, sectors: u64 },
    /// A resync has made everything below `array_bytes` consistent.
    ResyncCheckpoint { array_bytes: u64 },
    /// The members rebuilding in `slots` (slot, device name) are rebuilt.
    Rebuilt { slots: Vec<(usize, String)> },
}

/// What the metadata thread is doing for the engine thread.
pub(super) enum MetaOut {
    /// A step of queued metadata writes.
    Step,
    /// A flush of the members, then this.
    Flush(AfterFlush),
}

/// A client job whose engine requests wait for a metadata update.
pub(super) struct Parked {
    pub(super) job: u64,
    pub(super) requests: Vec<Request>,
    pub(super) until: Ticket,
}

/// Metadata bookkeeping of the engine thread.
#[derive(Default)]
pub(super) struct MetaState {
    pub(super) out: Option<MetaOut>,
    /// Flushes waiting for the metadata thread, each with what it is for; they go after the
    /// queued metadata steps.
    pub(super) flushes: VecDeque<AfterFlush>,
    pub(super) parked: VecDeque<Parked>,
    /// A pass's writing step waiting for its bitmap bits (or the dirty mark) to be durable.
    pub(super) sync_parked: Option<(Request, Ticket)>,
    /// The last dirty mark recorded, and per bitmap chunk the record that last set its bit: a
    /// write waits for those of them it needs and are not yet durable, not for everything
    /// recorded before it.
    pub(super) dirty_ticket: Option<Ticket>,
    pub(super) chunk_ticket: IdMap<u64, Ticket>,
    /// Answers to writes held until the failure record `roles` is durable.
    pub(super) held: Vec<(Done, Result<BlockReply, ServiceError>)>,
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

impl Runner {
    /// Whether the metadata thread has work out or waiting, or writes or answers wait on
    /// metadata: a stop waits for all of it.
    pub(super) fn metadata_busy(&self) -> bool {
        self.meta.out.is_some()
            || !self.meta.flushes.is_empty()
            || !self.meta.parked.is_empty()
            || self.meta.sync_parked.is_some()
            || !self.meta.held.is_empty()
            || self.array.metadata_pending().is_some()
    }

    /// Record `change`; its writes are queued and go out from [`Runner::dispatch_metadata`].
    /// Returns the ticket they complete, if it queued any.
    pub(super) fn record_metadata(&mut self, change: MetaChange) -> Result<Option<Ticket>, MetadataError> {
        let ticket = self.array.record_change(change)?;
        self.dispatch_metadata();
        Ok(ticket)
    }

    /// What a write (or a pass's writing step) over bitmap `chunks` must wait for: the dirty
    /// mark and the bits of its chunks, those not yet durable; `None` if all are.
    pub(super) fn ticket_needed(&self, chunks: Option<&std::ops::Range<u64>>) -> Option<Ticket> {
        let pending = |t: &Ticket| !self.array.metadata_durable(*t);
        let chunk_tickets = chunks.into_iter().flat_map(|r| r.clone()).filter_map(|c| self.meta.chunk_ticket.get(&c));
        self.meta.dirty_ticket.iter().chain(chunk_tickets).filter(|t| pending(t)).max().copied()
    }

    /// Hand the metadata thread its next job if it is free: the next queued metadata step, or
    /// else the next flush.
    pub(super) fn dispatch_metadata(&mut self) {
        // Without the thread (at the end) the flushes wait for `finish_metadata`.
        if self.meta.out.is_some() || self.meta_io.is_none() {
            return;
        }
        if let Some(ops) = self.array.next_metadata_step() {
            self.send_metadata_job(MetaJob { ops }, MetaOut::Step);
        } else if let Some(after) = self.meta.flushes.pop_front() {
            let ops = self.array.live_flushes();
            self.send_metadata_job(MetaJob { ops }, MetaOut::Flush(after));
        }
    }

    /// Queue a flush of the members, then `after`.
    pub(super) fn flush_then(&mut self, after: AfterFlush) {
        self.meta.flushes.push_back(after);
        self.dispatch_metadata();
    }

    fn send_metadata_job(&mut self, job: MetaJob, out: MetaOut) {
        let Some(io) = &self.meta_io else { return };
        // The queue holds one job and only one is ever out, so this does not block.
        if io.jobs.send(job).is_ok() {
            self.meta.out = Some(out);
            return;
        }
        // The thread is gone (it panicked): nothing it was to write is durable, and what waits
        // on it must hear so rather than wait forever.
        self.meta.out = Some(out);
        self.metadata_done(Err(MetaError::Format("the metadata I/O thread has ended".into())));
    }

    /// Park a client job's engine requests until the records it needs (its dirty mark and
    /// bitmap bits over `chunks`) are durable; `false` (and nothing parked) if they are. If they
    /// never can be (a metadata write failed), the job fails instead: it must not go out
    /// unrecorded.
    pub(super) fn park_until_durable(
        &mut self,
        job: u64,
        chunks: Option<&std::ops::Range<u64>>,
        requests: &mut Vec<Request>,
    ) -> bool {
        let Some(until) = self.ticket_needed(chunks) else { return false };
        if let Some(e) = self.array.metadata_failed() {
            requests.clear();
            if let Some(j) = self.jobs.get_mut(&job) {
                j.fail(ServiceError::Metadata(e.into()));
            }
            self.maybe_finish(job);
            return true;
        }
        self.meta.parked.push_back(Parked { job, requests: std::mem::take(requests), until });
        true
    }

    /// The metadata thread finished its job.
    pub(super) fn metadata_done(&mut self, result: Result<(), MetaError>) {
        match self.meta.out.take() {
            Some(MetaOut::Step) => {
                if let Err(e) = self.array.metadata_step_done(result) {
                    log(&format!("writing the array's metadata failed: {e}"));
                    self.fail_parked(e.into());
                }
                // A member whose metadata could not be written is failed (as md does), and the
                // survivors record it.
                self.note_failures();
            }
            Some(MetaOut::Flush(after)) => match result {
                Ok(()) => self.after_flush(after),
                Err(e) => self.flush_failed(after, &e),
            },
            None => {}
        }
        self.release_parked();
        self.release_held();
        self.dispatch_metadata();
    }

    fn after_flush(&mut self, after: AfterFlush) {
        let recorded = match after {
            AfterFlush::Clean { last_write } => {
                let still_idle = self.writing_jobs == 0 && self.last_write == last_write;
                if still_idle && self.array.is_dirty() && !self.array.needs_resync() {
                    self.record_metadata(MetaChange::Clean)
                        .map(|_| ())
                        .map_err(|e| format!("marking the array clean failed: {e}"))
                } else {
                    Ok(())
                }
            }
            AfterFlush::IntentClear { started, chunks } => self.clear_flushed_intent(started, chunks),
            AfterFlush::Checkpoint { slots, sectors } => {
                for &slot in &slots {
                    self.array.set_recovery_checkpoint(slot, sectors);
                }
                self.record_metadata(MetaChange::Roles)
                    .map(|_| ())
                    .map_err(|e| format!("recording rebuild progress failed: {e}"))
            }
            AfterFlush::ResyncCheckpoint { array_bytes } => {
                // Written with the next update made while no write is in flight (md writes
                // `resync_offset` only while the array is in sync): now, if idle.
                let idle = self.writing_jobs == 0;
                self.record_metadata(MetaChange::ResyncCheckpoint { array_bytes })
                    .and_then(|_| if idle { self.record_metadata(MetaChange::Clean).map(|_| ()) } else { Ok(()) })
                    .map_err(|e| format!("recording resync progress failed: {e}"))
            }
            AfterFlush::Rebuilt { slots } => {
                let mut result = Ok(());
                for (slot, name) in slots {
                    // Not if the member failed (or another took its place) meanwhile.
                    let same = self.array.slot_device_name(slot) == Some(name.as_str());
                    if !same || self.array.engine().slot_states()[slot] != SlotState::Recovering {
                        continue;
                    }
                    if let Err(e) = self.array.recovery_done(slot) {
                        result = Err(format!("marking slot {slot} rebuilt failed: {e}"));
                    }
                }
                // A finished rebuild may allow inline requests again, and ends the pass for
                // those who waited for it.
                self.update_inline();
                self.notify_idle_waiters();
                result
            }
        };
        if let Err(e) = recorded {
            log(&e);
        }
    }

    fn flush_failed(&mut self, after: AfterFlush, e: &MetaError) {
        let e = self.array.metadata_error(e.clone());
        match after {
            AfterFlush::Clean { .. } => {
                log(&format!("flushing before marking the array clean failed: {e}"));
                // Try again after another delay rather than spinning.
                self.last_write = Instant::now();
            }
            AfterFlush::IntentClear { .. } => log(&format!("flushing before clearing bitmap bits failed: {e}")),
            AfterFlush::Checkpoint { .. } | AfterFlush::ResyncCheckpoint { .. } => {
                log(&format!("flushing before recording a pass's progress failed: {e}"))
            }
            AfterFlush::Rebuilt { .. } => {
                log(&format!("flushing after the rebuild failed; the members stay marked as rebuilding: {e}"))
            }
        }
    }

    /// At the end, with the metadata thread gone and metadata written on this thread again:
    /// the flushes still waiting, and what they were for.
    pub(super) fn finish_metadata(&mut self) {
        while let Some(after) = self.meta.flushes.pop_front() {
            // The same members the thread would flush, rebuilding ones included.
            let job = MetaJob { ops: self.array.live_flushes() };
            match crate::service::metadata_io::perform(&job) {
                Ok(()) => self.after_flush(after),
                Err(e) => self.flush_failed(after, &e),
            }
        }
    }

    /// Start the parked jobs (and the parked pass step) whose update is durable, in arrival
    /// order.
    fn release_parked(&mut self) {
        // Writes that overlap share a bitmap chunk, hence a ticket, and so go out in the order
        // they came; others need not wait for one another.
        let (ready, waiting): (VecDeque<Parked>, VecDeque<Parked>) =
            std::mem::take(&mut self.meta.parked).into_iter().partition(|p| self.array.metadata_durable(p.until));
        self.meta.parked = waiting;
        for p in ready {
            for request in p.requests {
                self.submit_engine(p.job, request);
            }
            self.refill_zeros(p.job);
            self.maybe_finish(p.job);
        }
        let durable = |t: &Ticket| self.array.metadata_durable(*t);
        if self.meta.dirty_ticket.as_ref().is_some_and(durable) {
            self.meta.dirty_ticket = None;
        }
        let settled: Vec<u64> = self.meta.chunk_ticket.iter().filter(|(_, t)| durable(t)).map(|(c, _)| *c).collect();
        for c in settled {
            self.meta.chunk_ticket.remove(&c);
        }
        if let Some((_, until)) = &self.meta.sync_parked {
            if self.array.metadata_durable(*until) {
                let (request, _) = self.meta.sync_parked.take().expect("looked at");
                self.submit_sync_step(request);
            }
        }
    }

    /// The metadata could not be written: the parked writes fail rather than go out unrecorded,
    /// and so does a parked pass step.
    fn fail_parked(&mut self, why: MetadataError) {
        while let Some(p) = self.meta.parked.pop_front() {
            if let Some(job) = self.jobs.get_mut(&p.job) {
                job.fail(ServiceError::Metadata(why.clone()));
            }
            self.maybe_finish(p.job);
        }
        if self.meta.sync_parked.take().is_some() {
            self.sync_step_failed(&format!("metadata: {why}"));
        }
    }

    /// Whether a member failure is being recorded: not yet durable, and still may be (after a
    /// failed metadata write, which is logged, answers are not held forever).
    fn failure_being_recorded(&self) -> bool {
        self.meta.roles.is_some_and(|t| !self.array.metadata_durable(t)) && self.array.metadata_pending().is_some()
    }

    /// Hold a write's answer while a member failure is being recorded; else answer now.
    pub(super) fn answer_write(&mut self, done: Done, result: Result<BlockReply, ServiceError>) {
        if self.failure_being_recorded() {
            self.meta.held.push((done, result));
        } else {
            done(result);
        }
    }

    /// Answer the held writes once the failure record is durable, or can no longer be.
    fn release_held(&mut self) {
        if self.failure_being_recorded() {
            return;
        }
        self.meta.roles = None;
        for (done, result) in std::mem::take(&mut self.meta.held) {
            done(result);
        }
    }
}
