//! Background passes (check, repair, resync) and rebuilds: which is owed and starting it, its
//! next step (skipping what the write-intent bitmap says is clean), the step's answer,
//! checkpointing the position, and closing a pass when it ends.

use std::time::Duration;

use uraid_engine::array::{Completion, Request, RequestId};
use uraid_engine::metadata::MetaChange;
use uraid_engine::{EngineError, SlotState};

use super::metadata::AfterFlush;
use super::{ArrayPolicy, PolicyEvent, PolicyMutation, SyncAction, SyncError, SyncRun};
use crate::open_array::OpenArray;

/// How often a running rebuild or resync writes its position to the superblocks.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(2);

/// A step of the running pass given out by [`ArrayPolicy::next_pass_step`].
#[derive(Debug, Clone)]
pub(super) struct PassStep {
    /// The engine's id for it, once submitted.
    rid: Option<RequestId>,
    offset: u64,
    /// Bitmap chunks it holds.
    intent: Option<std::ops::Range<u64>>,
}

impl ArrayPolicy {
    /// Start a pass over the whole array (a rebuild: over the members being rebuilt). Repair and
    /// resync write, so the array is recorded dirty first; their writing steps wait until that
    /// is durable. A resync resumes from the metadata's checkpoint.
    pub fn start_pass(&mut self, array: &mut OpenArray, action: SyncAction, now: Duration) -> Result<(), SyncError> {
        if self.stopping {
            return Err(SyncError::Stopping);
        }
        if let Some(run) = &self.pass {
            return Err(SyncError::AlreadyRunning(run.action));
        }
        if self.shape.max_degraded == 0 {
            return Err(SyncError::NoRedundancy { level: self.shape.level.clone(), action });
        }
        if action != SyncAction::Check && self.shape.read_only {
            return Err(SyncError::ReadOnly(action));
        }
        if action == SyncAction::Recover {
            return self.start_recovery(array, now);
        }
        let lost = array.engine().slot_states().iter().filter(|s| s.is_vacant()).count();
        if lost > 0 && self.shape.stripe_data_bytes.is_some() && lost + 1 > self.shape.max_degraded {
            return Err(SyncError::Degraded(action));
        }
        // Steps of whole stripes, about `pass_step_bytes` each.
        let target = self.config.pass_step_bytes.max(512);
        let step = match self.shape.stripe_data_bytes {
            Some(w) => w * target.div_ceil(w).max(1),
            None => target,
        };
        if action != SyncAction::Check && !array.is_dirty() {
            let ticket = self.record(array, MetaChange::Dirty).map_err(SyncError::Metadata)?;
            self.meta.dirty_ticket = ticket.or(self.meta.dirty_ticket);
        }
        // A resync cut short (stopped, or a crash after an idle checkpoint) resumes where it got
        // to, as md's does from `resync_offset`.
        let size = self.shape.size;
        let from = if action == SyncAction::Resync { array.resync_checkpoint().min(size) } else { 0 };
        if from > 0 {
            self.notice(format!("{action} started, resuming from byte {from} of {size}"));
        } else {
            self.notice(format!("{action} started"));
        }
        self.pass_failure = None;
        self.last_checkpoint = now;
        self.resync_bits =
            if action == SyncAction::Resync { array.write_intent().filter(|b| !b.all_dirty).cloned() } else { None };
        let mut run = SyncRun::new(action, from, size, step, now);
        (run.depth, run.limits) = (self.depth(), self.config.speed);
        self.pass = Some(run);
        Ok(())
    }

    /// Steps a pass may have in flight ([`PolicyConfig::pass_depth`]): overlapping them keeps
    /// every member busy, where one step at a time left the survivors idle while the spare was
    /// written and the other way round (BENCHMARKS.md, section 11).
    ///
    /// [`PolicyConfig::pass_depth`]: super::PolicyConfig::pass_depth
    fn depth(&self) -> usize {
        self.config.pass_depth.max(1)
    }

    pub(super) fn recovering_slots(array: &OpenArray) -> impl Iterator<Item = usize> + '_ {
        array.engine().slot_states().iter().enumerate().filter(|(_, s)| **s == SlotState::Recovering).map(|(i, _)| i)
    }

    /// The names of the members waiting to be rebuilt.
    fn recovering_devices(array: &OpenArray) -> Vec<String> {
        Self::recovering_slots(array).map(|s| array.slot_device_name(s).unwrap_or_default().to_string()).collect()
    }

    /// Whether a rebuild is owed and may start by itself: members wait to be rebuilt, the array
    /// is writable, and the rebuild of these same members has not already failed.
    fn rebuild_due(&self, array: &OpenArray) -> bool {
        if self.shape.read_only || Self::recovering_slots(array).next().is_none() {
            return false;
        }
        self.rebuild_blocked.as_ref().is_none_or(|blocked| *blocked != Self::recovering_devices(array))
    }

    /// Rebuild every recovering slot, from the lowest checkpoint among them.
    fn start_recovery(&mut self, array: &OpenArray, now: Duration) -> Result<(), SyncError> {
        let slots: Vec<usize> = Self::recovering_slots(array).collect();
        if slots.is_empty() {
            return Err(SyncError::NothingToRebuild);
        }
        let end = array.engine().geometry().member_data_bytes();
        let from = slots.iter().filter_map(|&s| array.recovery_checkpoint(s)).min().unwrap_or(0) * 512;
        let chunk = self.shape.chunk_bytes.max(4096);
        let step = chunk * self.config.pass_step_bytes.max(512).div_ceil(chunk).max(1);
        let names: Vec<String> = slots.iter().map(|&s| array.slot_device_name(s).unwrap_or("?").to_string()).collect();
        self.notice(format!("recover started: rebuilding {} from byte {from} of {end}", names.join(", ")));
        // Re-added members missed only what the bitmap marks (bits stay set while degraded).
        self.recover_bits = if slots.iter().all(|&s| array.is_readded(s)) {
            array.write_intent().filter(|b| !b.all_dirty).cloned()
        } else {
            None
        };
        if self.recover_bits.is_some() {
            self.notice(
                "rebuild guided by the write-intent bitmap: only regions written while the members were away".into(),
            );
        }
        let mut run = SyncRun::new(SyncAction::Recover, from.min(end), end, step, now);
        (run.depth, run.limits) = (self.depth(), self.config.speed);
        run.devices = slots.iter().map(|&s| array.slot_device_name(s).unwrap_or_default().to_string()).collect();
        run.slots = slots;
        self.pass_failure = None;
        self.last_checkpoint = now;
        self.pass = Some(run);
        Ok(())
    }

    /// The engine request of the running pass's next step, if one is to go out now: a writing
    /// step that was waiting for its records once they are durable, else the next step once due
    /// (see [`ArrayPolicy::next_deadline`]). A rebuild is started here by itself whenever a slot
    /// is recovering and no pass runs. The caller submits the request to the engine and reports
    /// with [`ArrayPolicy::pass_step_submitted`]; `None` until then.
    pub fn next_pass_step(&mut self, array: &mut OpenArray, now: Duration) -> Option<Request> {
        if let Some((_, until)) = &self.meta.parked_step {
            if !array.metadata_durable(*until) {
                return None;
            }
            let (request, _) = self.meta.parked_step.take().expect("looked at");
            return Some(request);
        }
        if !self.stopping && self.pass.is_none() && !self.meta.recording_rebuilt() && self.rebuild_due(array) {
            // md starts recovery by itself whenever a slot has a member to rebuild.
            if let Err(e) = self.start_recovery(array, now) {
                self.notice(format!("recovery not started: {e}"));
            }
        }
        if self.pass.is_none() && self.resync_will_start(array) {
            self.resync_due = false;
            if array.needs_resync() {
                if let Err(e) = self.start_pass(array, SyncAction::Resync, now) {
                    self.notice(format!("resync not resumed: {e}"));
                }
            }
        }
        self.skip_clean_regions(array);
        let next = self.pass.as_mut().and_then(|run| run.next_step(now));
        let Some((offset, len)) = next else {
            // Skipping clean bitmap regions can take a pass to its end without any step.
            self.close_pass_if_done(array, now);
            return None;
        };
        let run = self.pass.as_ref().expect("stepping");
        let writes = !matches!(run.action, SyncAction::Check | SyncAction::Recover);
        let request = match run.action {
            SyncAction::Recover => Request::Recover { offset, len },
            SyncAction::Check => Request::Sync { offset, len, repair: false },
            SyncAction::Resync | SyncAction::Repair => Request::Sync { offset, len, repair: true },
        };
        let intent = if writes { array.intent_regions(offset, len) } else { None };
        if let Some(chunks) = &intent {
            if let Err(e) = self.hold_intent(array, chunks.clone()) {
                self.steps.push(PassStep { rid: None, offset, intent: None });
                self.pass_step_failed(array, now, &format!("bitmap: {e}"));
                return None;
            }
        }
        // A writing step waits until its bitmap bits (and the dirty mark) are durable.
        let until = self.ticket_needed(array, intent.as_ref()).filter(|_| writes);
        self.steps.push(PassStep { rid: None, offset, intent });
        if let Some(until) = until.filter(|_| self.config.mutation != PolicyMutation::DataBeforeBitmap) {
            match array.metadata_failed() {
                // It could never be durable: the step fails rather than write unrecorded.
                Some(e) => self.pass_step_failed(array, now, &format!("metadata: {e}")),
                None => self.meta.parked_step = Some((request, until)),
            }
            return None;
        }
        Some(request)
    }

    /// Move the running pass past what the bitmap says is clean, where it can vouch for that.
    fn skip_clean_regions(&mut self, array: &OpenArray) {
        let Some(run) = &self.pass else { return };
        if run.pos >= run.end {
            return;
        }
        let pos = match (run.action, &self.recover_bits, &self.resync_bits) {
            // A rebuild of re-added members visits only the bitmap's marked regions; positions
            // are member bytes, and so are the bitmap's chunks (raid10 is never re-added so).
            (SyncAction::Recover, Some(bits), _) => {
                let cb = bits.chunk_bytes.max(1);
                let mut pos = run.pos;
                while pos < run.end && !bits.is_dirty(pos / cb) {
                    pos = (pos / cb + 1) * cb;
                }
                pos
            }
            // A resync with a trusted bitmap visits only the regions marked when it started (the
            // live bits also carry the marks of the resync's own writes).
            (SyncAction::Resync, _, Some(bits)) => {
                let mut pos = run.pos;
                while pos < run.end {
                    let c = array.intent_regions(pos, 1).map_or(0, |r| r.start);
                    if bits.is_dirty(c) {
                        break;
                    }
                    pos = array.intent_region_start(c + 1).max(pos + 1);
                }
                pos
            }
            _ => return,
        };
        self.pass.as_mut().expect("checked").skip_to(pos);
    }

    /// The caller submitted the request [`ArrayPolicy::next_pass_step`] gave: the engine took it
    /// as `submitted`, or refused it (the pass stops there).
    pub fn pass_step_submitted(
        &mut self,
        array: &mut OpenArray,
        now: Duration,
        submitted: Result<RequestId, EngineError>,
    ) {
        match submitted {
            Ok(rid) => {
                if let Some(step) = self.steps.iter_mut().find(|s| s.rid.is_none()) {
                    step.rid = Some(rid);
                }
                if self.config.mutation == PolicyMutation::CheckpointAhead {
                    self.checkpoint_ahead(array, now);
                }
            }
            Err(e) => self.pass_step_failed(array, now, &e.to_string()),
        }
    }

    /// Whether the engine request `rid` is the running pass's step (its completion goes to
    /// [`ArrayPolicy::pass_step_done`]).
    pub fn is_pass_step(&self, rid: RequestId) -> bool {
        self.steps.iter().any(|s| s.rid == Some(rid))
    }

    /// Take the step submitted as `rid` (`None`: the one given out and not yet submitted) off
    /// the list, releasing its bitmap chunks.
    fn take_step(&mut self, rid: Option<RequestId>, now: Duration) -> Option<u64> {
        let i = self.steps.iter().position(|s| s.rid == rid)?;
        let step = self.steps.remove(i);
        if let Some(chunks) = step.intent {
            self.release_intent(chunks, now);
        }
        Some(step.offset)
    }

    /// The pass's step given out and not yet submitted could not be done: the pass stops
    /// there, saying why.
    pub(super) fn pass_step_failed(&mut self, array: &mut OpenArray, now: Duration, why: &str) {
        let offset = self.take_step(None, now);
        let Some(run) = self.pass.as_mut() else { return };
        if let Some(offset) = offset {
            run.step_failed(offset);
            self.pass_failure.get_or_insert_with(|| format!("{} failed at byte {offset}: {why}", run.action));
        }
        self.close_pass_if_done(array, now);
    }

    /// The pass's step submitted as `rid` completed with `result`. `foreground_busy`: clients
    /// have requests in flight, which a pass above its minimum speed yields to.
    pub fn pass_step_done(
        &mut self,
        array: &mut OpenArray,
        now: Duration,
        rid: RequestId,
        result: Result<Completion, EngineError>,
        foreground_busy: bool,
    ) {
        let Some(offset) = self.take_step(Some(rid), now) else { return };
        let limits = self.config.speed;
        let Some(run) = &mut self.pass else { return };
        match result {
            // md writes the position to the superblocks now and then, so a restart resumes
            // there instead of starting over.
            Ok(Completion::Synced { mismatch_sectors }) => {
                run.step_done(offset, mismatch_sectors, now, foreground_busy, limits);
                self.checkpoint_if_due(array, now);
            }
            Ok(Completion::Recovered) => {
                run.step_done(offset, 0, now, foreground_busy, limits);
                self.checkpoint_if_due(array, now);
            }
            Ok(other) => unreachable!("pass step completed as {other:?}"),
            Err(e) => {
                run.step_failed(offset);
                self.pass_failure.get_or_insert_with(|| format!("{} failed at byte {offset}: {e}", run.action));
            }
        }
        self.close_pass_if_done(array, now);
    }

    /// Record how far the running rebuild or resync has got, every
    /// [`PolicyConfig::checkpoint_every`](super::PolicyConfig::checkpoint_every), once
    /// what it wrote so far is flushed: a checkpoint never runs ahead of the data on the members.
    fn checkpoint_if_due(&mut self, array: &OpenArray, now: Duration) {
        let Some(run) = &self.pass else { return };
        if now.saturating_sub(self.last_checkpoint) < self.config.checkpoint_every {
            return;
        }
        let after = match run.action {
            SyncAction::Recover if self.config.mutation == PolicyMutation::CheckpointAhead => return,
            SyncAction::Recover => {
                AfterFlush::Checkpoint { slots: run.rebuilt_devices(array), sectors: run.done_to() / 512 }
            }
            SyncAction::Resync => {
                AfterFlush::ResyncCheckpoint { array_bytes: run.done_to(), writes_ended: self.writes_ended }
            }
            SyncAction::Check | SyncAction::Repair => return,
        };
        self.last_checkpoint = now;
        self.flush_then(after);
    }

    /// The planted bug [`PolicyMutation::CheckpointAhead`]: a rebuild records, as soon as a step
    /// is submitted, that its members are good up to the end of that step, with no flush.
    fn checkpoint_ahead(&mut self, array: &mut OpenArray, now: Duration) {
        let Some(run) = &self.pass else { return };
        if run.action != SyncAction::Recover || now.saturating_sub(self.last_checkpoint) < self.config.checkpoint_every
        {
            return;
        }
        // The step just given out ends at `pos`.
        let (slots, sectors) = (run.rebuilt_slots(array), run.pos / 512);
        self.last_checkpoint = now;
        if let Err(e) = self.record_rebuild_checkpoint(array, &slots, sectors) {
            self.notice(e);
        }
    }

    /// Close a pass that has covered the array or was cut short: a rebuild records its end (or
    /// its position, if cut short) after a flush, a resync cut short its position likewise.
    pub(super) fn close_pass_if_done(&mut self, array: &mut OpenArray, now: Duration) {
        if !self.pass.as_ref().is_some_and(|r| r.finished()) {
            return;
        }
        let run = self.pass.take().expect("checked");
        if run.action != SyncAction::Check {
            self.note_write_ended(now);
        }
        let secs = now.saturating_sub(run.started).as_secs_f64();
        let complete = run.pos >= run.end;
        if run.action.counts_mismatches() {
            self.mismatch_sectors = run.mismatch_sectors;
        }
        if run.action == SyncAction::Recover {
            // The rebuilt data must be on the new members before their superblocks say so.
            if complete {
                let slots = run
                    .rebuilt_slots(array)
                    .into_iter()
                    .filter_map(|s| array.slot_device_name(s).map(|name| (s, name.to_string())))
                    .collect();
                self.flush_then(AfterFlush::Rebuilt { slots });
            } else if self.config.mutation == PolicyMutation::CheckpointAhead {
                if let Err(e) = self.record_rebuild_checkpoint(array, &run.rebuilt_slots(array), run.pos / 512) {
                    self.notice(e);
                }
            } else {
                // Cut short (stop, idle, a new spare): record how far it got.
                self.flush_then(AfterFlush::Checkpoint { slots: run.rebuilt_devices(array), sectors: run.pos / 512 });
            }
            if !complete && self.pass_failure.is_some() {
                let devices = Self::recovering_devices(array);
                if !devices.is_empty() {
                    self.notice(format!(
                        "the rebuild of {} is not retried by itself until a member is added or the array is assembled again",
                        devices.join(", ")
                    ));
                    self.rebuild_blocked = Some(devices);
                }
            }
        }
        if run.action == SyncAction::Resync && !complete {
            // Likewise a resync, which resumes there.
            self.flush_then(AfterFlush::ResyncCheckpoint { array_bytes: run.pos, writes_ended: self.writes_ended });
        }
        let summary = if complete {
            if matches!(run.action, SyncAction::Resync | SyncAction::Repair) {
                // Every stripe/copy has been made consistent: what a resync promises.
                array.resync_done();
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
            self.pass_failure
                .take()
                .unwrap_or_else(|| format!("{} interrupted at byte {} of {}", run.action, run.pos, run.end))
        };
        self.last_pass = Some(summary.clone());
        self.last_pass_bytes = Some(run.done_bytes().saturating_sub(run.skipped));
        self.passes_ended += 1;
        self.events.push_back(PolicyEvent::PassEnded { summary });
    }

    /// Cut the running pass short at its current step (the operator's idle, a stop, a new member
    /// to rebuild that the running rebuild does not cover). A rebuild or resync cut short keeps
    /// its checkpoint; a rebuild owed starts again by itself, covering every recovering slot.
    pub fn interrupt_pass(&mut self, array: &mut OpenArray, now: Duration) {
        if let Some(run) = &mut self.pass {
            run.interrupted = true;
        }
        self.close_pass_if_done(array, now);
    }

    /// A member left the array: a check, repair or resync stops (they cannot go on degraded);
    /// a rebuild goes on.
    pub fn member_left(&mut self, array: &mut OpenArray, now: Duration) {
        if self.pass.as_ref().is_some_and(|r| r.action != SyncAction::Recover) {
            self.interrupt_pass(array, now);
        }
    }

    /// Whether a resync owed (after a rebuild, or held back until one is done) starts with the
    /// next [`ArrayPolicy::next_pass_step`]: no member waits to be rebuilt any more.
    fn resync_will_start(&self, array: &OpenArray) -> bool {
        self.resync_due && !self.stopping && Self::recovering_slots(array).next().is_none()
    }

    /// Whether no pass runs, none is about to (a member waits to be rebuilt, and
    /// [`ArrayPolicy::next_pass_step`] starts that by itself, as between a rebuild cut short for
    /// a new member and the one that covers it, unless these members' rebuild already failed;
    /// or a resync owed starts once the rebuild is recorded), and no rebuild's end is still
    /// being recorded.
    pub fn pass_idle(&self, array: &OpenArray) -> bool {
        self.pass.is_none()
            && !self.meta.recording_rebuilt()
            && !self.rebuild_due(array)
            && !self.resync_will_start(array)
    }
}
