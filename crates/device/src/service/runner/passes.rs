//! Background passes (check, repair, resync) and rebuilds on the engine thread: starting them,
//! submitting their steps (skipping what the write-intent bitmap says is clean), taking the steps'
//! answers, checkpointing a rebuild's progress, and closing a pass when it ends.

use std::time::{Duration, Instant};

use uraid_engine::array::{Completion, Request};
use uraid_engine::{EngineError, SlotState};

use super::metadata::AfterFlush;
use super::{log, Runner, SyncAction, SyncError, SyncRun};
use uraid_engine::metadata::MetaChange;

/// How often a running rebuild or resync writes its position to the superblocks.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(2);

impl Runner {
    pub(super) fn start_sync(&mut self, action: SyncAction) -> Result<(), SyncError> {
        if let Some(run) = &self.sync {
            return Err(SyncError::AlreadyRunning(run.action));
        }
        let geometry = self.array.engine().geometry();
        if geometry.max_degraded() == 0 {
            return Err(SyncError::NoRedundancy { level: self.info.level, action });
        }
        if action != SyncAction::Check && self.info.read_only {
            return Err(SyncError::ReadOnly(action));
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
            return Err(SyncError::Degraded(action));
        }
        // Steps of whole stripes, about a megabyte each.
        let step = match self.info.stripe_data_bytes {
            Some(w) => w * (1u64 << 20).div_ceil(w).max(1),
            None => 1 << 20,
        };
        if action != SyncAction::Check && !self.array.is_dirty() {
            // Repair and resync write; the array must say dirty while they do.
            // Its writing steps wait until that is durable (see `metadata`).
            let ticket = self.record_metadata(MetaChange::Dirty).map_err(SyncError::Metadata)?;
            self.meta.dirty_ticket = ticket.or(self.meta.dirty_ticket);
        }
        // A resync cut short (stopped, or a crash after an idle checkpoint) resumes where it got
        // to, as md's does from `resync_offset`.
        let from = if action == SyncAction::Resync { self.array.resync_checkpoint().min(self.info.size) } else { 0 };
        if from > 0 {
            log(&format!("{action} started, resuming from byte {from} of {}", self.info.size));
        } else {
            log(&format!("{action} started"));
        }
        self.sync_failure = None;
        self.last_checkpoint = Instant::now();
        self.resync_bits = if action == SyncAction::Resync {
            self.array.write_intent().filter(|b| !b.all_dirty).cloned()
        } else {
            None
        };
        self.sync = Some(SyncRun::new(action, from, self.info.size, step, Instant::now()));
        Ok(())
    }

    pub(super) fn recovering_slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.array
            .engine()
            .slot_states()
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == SlotState::Recovering)
            .map(|(i, _)| i)
    }

    /// Rebuild every recovering slot, from the lowest checkpoint among them.
    pub(super) fn start_recovery(&mut self) -> Result<(), SyncError> {
        let slots: Vec<usize> = self.recovering_slots().collect();
        if slots.is_empty() {
            return Err(SyncError::NothingToRebuild);
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

    /// Record how far the running rebuild or resync has got, once what it wrote so far is
    /// flushed: a checkpoint never runs ahead of the data on the members.
    pub(super) fn checkpoint_pass(&mut self) {
        let Some(run) = &self.sync else { return };
        let after = match run.action {
            SyncAction::Recover => AfterFlush::Checkpoint { slots: run.slots.clone(), sectors: run.pos / 512 },
            SyncAction::Resync => AfterFlush::ResyncCheckpoint { array_bytes: run.pos },
            SyncAction::Check | SyncAction::Repair => return,
        };
        self.last_checkpoint = Instant::now();
        self.flush_then(after);
    }

    /// Submit the pass's next step if one is due.
    pub(super) fn drive_sync(&mut self, may_start: bool) {
        if may_start
            && self.sync.is_none()
            && !self.info.read_only
            && !self.meta.recording_rebuilt()
            && self.recovering_slots().next().is_some()
        {
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
        // A writing step waits until its bitmap bits (and the dirty mark) are durable.
        if let Some(until) = self.ticket_needed(self.sync_intent.as_ref()).filter(|_| writes) {
            match self.array.metadata_failed() {
                // It could never be durable: the step fails rather than write unrecorded.
                Some(e) => self.sync_step_failed(&format!("metadata: {e}")),
                None => self.meta.sync_parked = Some((request, until)),
            }
            return;
        }
        self.submit_sync_step(request);
    }

    /// Hand a pass's step to the engine.
    pub(super) fn submit_sync_step(&mut self, request: Request) {
        match self.array.engine_mut().submit(request) {
            Ok(rid) => self.sync_request = Some(rid),
            Err(e) => self.sync_step_failed(&e.to_string()),
        }
    }

    /// The pass's step could not be done: the pass stops there, saying why.
    pub(super) fn sync_step_failed(&mut self, why: &str) {
        if let Some(chunks) = self.sync_intent.take() {
            self.release_intent(chunks);
        }
        let Some(run) = self.sync.as_mut() else { return };
        run.in_flight = false;
        run.interrupted = true;
        self.sync_failure = Some(format!("{} failed at byte {}: {why}", run.action, run.pos));
    }

    pub(super) fn sync_step_done(&mut self, result: Result<Completion, EngineError>) {
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
                run.step_done(len, mismatch_sectors, Instant::now(), foreground_busy, limits);
                if self.last_checkpoint.elapsed() >= CHECKPOINT_EVERY {
                    self.checkpoint_pass();
                }
            }
            Ok(Completion::Recovered) => {
                run.step_done(len, 0, Instant::now(), foreground_busy, limits);
                // md writes the rebuild position to the superblocks now and then, so a restart
                // resumes there instead of starting over.
                if self.last_checkpoint.elapsed() >= CHECKPOINT_EVERY {
                    self.checkpoint_pass();
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
    pub(super) fn finish_sync_if_done(&mut self) {
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
            // The rebuilt data must be on the new members before their superblocks say so
            // (see `metadata`).
            if complete {
                let slots = run
                    .slots
                    .iter()
                    .filter_map(|&s| self.array.slot_device_name(s).map(|name| (s, name.to_string())))
                    .collect();
                self.flush_then(AfterFlush::Rebuilt { slots });
            } else {
                // Cut short (stop, idle, a new spare): record how far it got.
                self.flush_then(AfterFlush::Checkpoint { slots: run.slots.clone(), sectors: run.pos / 512 });
            }
        }
        if run.action == SyncAction::Resync && !complete {
            // Likewise a resync, which resumes there.
            self.flush_then(AfterFlush::ResyncCheckpoint { array_bytes: run.pos });
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
        self.notify_idle_waiters();
    }

    /// Whether no pass runs, none is about to (a member waits to be rebuilt, and `drive_sync`
    /// starts that by itself, as between a rebuild cut short for a new member and the one that
    /// covers it), and no rebuild's end is still being recorded.
    pub(super) fn pass_idle(&self) -> bool {
        let rebuild_due = !self.info.read_only && self.recovering_slots().next().is_some();
        self.sync.is_none() && !self.meta.recording_rebuilt() && !rebuild_due
    }

    /// Tell those waiting for the end of the pass, once it has ended (a rebuild's end recorded).
    pub(super) fn notify_idle_waiters(&mut self) {
        if !self.pass_idle() {
            return;
        }
        let status = self.status();
        for w in self.idle_waiters.drain(..) {
            let _ = w.send(status.clone());
        }
    }
}
