//! Background jobs: recovery onto spares and resync after a crash, stepped in random windows
//! while the workload goes on, and what their completion records.

use uraid_engine::array::{Request, SlotState};
use uraid_engine::metadata::MetaChange;

use crate::disk::SECTOR;
use crate::member_device::SimMember;

use super::metadata::AfterFlush;
use super::{Failure, Invariant, Job, JobKind, Mode, Pending, Sim, Verify};

impl Sim {
    pub(super) fn drive_jobs(&mut self) -> Result<(), Failure> {
        let states = self.open.engine().slot_states().to_vec();
        if let Some(job) = &self.recovery {
            if job.inflight.is_none()
                && !job.flushing
                && !job.targets.iter().any(|&t| states[t] == SlotState::Recovering)
            {
                trace!(self, "recovery abandoned: no target is recovering any more");
                self.recovery = None;
            }
        }
        if self.spares && self.mode == Mode::Normal && self.recovery.is_none() && self.resync.is_none() {
            let empty: Vec<usize> =
                (0..states.len()).filter(|&s| matches!(states[s], SlotState::Faulty | SlotState::Missing)).collect();
            if !empty.is_empty() {
                match self.spare_countdown {
                    None => self.spare_countdown = Some(self.frng.between(2, 80)),
                    Some(0) => {
                        self.spare_countdown = None;
                        self.start_recovery(empty)?;
                    }
                    Some(_) => {}
                }
            }
        }
        let whole = self.open.engine().slot_states().iter().all(|s| *s == SlotState::InSync);
        if whole {
            self.resync_refused = false;
        }
        // Mirrors may resync what is left while degraded (md does; an engine that refuses says
        // DegradedCheck and the resync waits until the array is whole). A parity array is
        // degraded here only with a partial parity log (else a crash while degraded ends the
        // run), and then only raid6 short of one member owes a resync.
        let mirror = self.geometry.is_mirrored();
        // raid6 short of one member resyncs too (P and Q made to agree around it).
        let lost = self
            .open
            .engine()
            .slot_states()
            .iter()
            .filter(|s| matches!(s, SlotState::Missing | SlotState::Faulty))
            .count();
        let short_raid6 = self.parity && self.geometry.max_degraded() > 1 && lost == 1;
        let resync_ending = self.meta.flushing(|a| matches!(a, AfterFlush::ResyncDone));
        if self.needs_resync
            && !resync_ending
            && self.resync.is_none()
            && self.recovery.is_none()
            && (whole
                || ((mirror || short_raid6)
                    && !self.resync_refused
                    && !self.open.engine().slot_states().contains(&SlotState::Recovering)))
        {
            // A resync cut short resumes from its checkpoint in the superblocks.
            let from = self.open.resync_checkpoint().min(self.model.size());
            trace!(self, "resync starts at byte {from}");
            self.resync = Some(Job {
                kind: JobKind::Resync,
                pos: from,
                end: self.model.size(),
                inflight: None,
                flushing: false,
                targets: Vec::new(),
            });
        }
        self.advance_job(JobKind::Recovery)?;
        self.advance_job(JobKind::Resync)?;
        self.maybe_mark_clean();
        Ok(())
    }

    /// No client write in flight or waiting and the array recorded dirty: flush the members and
    /// record it clean, if no write came meanwhile (md's safe mode, after a random idle spell).
    fn maybe_mark_clean(&mut self) {
        let idle = self.inflight_writes.is_empty() && !self.meta.has_parked();
        if !idle || !self.open.is_dirty() || self.open.needs_resync() || self.resync.is_some() {
            return;
        }
        if self.meta.flushing(|a| matches!(a, AfterFlush::Clean { .. })) || !self.rng.chance(1, 4) {
            return;
        }
        self.flush_then(AfterFlush::Clean { writes: self.meta.writes });
    }

    /// Add a new, zeroed device for each empty slot, as `mdadm --add` (through the array, which
    /// writes its superblock), and rebuild them.
    fn start_recovery(&mut self, empty: Vec<usize>) -> Result<(), Failure> {
        let mut slots = Vec::new();
        for _ in &empty {
            let d = self.new_device();
            let view = SimMember::of(&self.devices[d]);
            let added = self.open.add_member(Box::new(view.clone()));
            // Adding only probes the new device; its superblock goes out as metadata steps.
            if !view.take_writes().is_empty() {
                return Err(self.fail(Invariant::Protocol, format!("adding d{d} wrote to it outside the run")));
            }
            match added {
                Ok(Some(s)) => {
                    trace!(self, "spare d{d} added in slot {s}");
                    self.joined.push(d);
                    slots.push(s);
                    self.report.spares_added += 1;
                }
                Ok(None) => {
                    return Err(self.fail(Invariant::Protocol, format!("spare d{d} found no empty slot")));
                }
                Err(e) => return Err(self.fail(Invariant::Protocol, format!("adding spare d{d} was refused: {e}"))),
            }
        }
        self.refresh_slots();
        self.start_recovery_job(slots);
        Ok(())
    }

    /// Rebuild `slots` from the lowest checkpoint among them.
    pub(super) fn start_recovery_job(&mut self, slots: Vec<usize>) {
        let from = slots.iter().filter_map(|&s| self.open.recovery_checkpoint(s)).min().unwrap_or(0) * SECTOR;
        trace!(self, "recovery of slots {slots:?} starts at member byte {from}");
        self.recovery = Some(Job {
            kind: JobKind::Recovery,
            pos: from.min(self.geometry.member_data_bytes()),
            end: self.geometry.member_data_bytes(),
            inflight: None,
            flushing: false,
            targets: slots,
        });
    }

    pub(super) fn job_slot(&mut self, kind: JobKind) -> &mut Option<Job> {
        match kind {
            JobKind::Recovery => &mut self.recovery,
            JobKind::Resync => &mut self.resync,
        }
    }

    pub(super) fn job_mut(&mut self, kind: JobKind) -> Option<&mut Job> {
        self.job_slot(kind).as_mut()
    }

    fn advance_job(&mut self, kind: JobKind) -> Result<(), Failure> {
        let taken = match kind {
            JobKind::Recovery => self.recovery.take(),
            JobKind::Resync => self.resync.take(),
        };
        let Some(mut job) = taken else { return Ok(()) };
        let result = self.advance(&mut job);
        match kind {
            JobKind::Recovery => self.recovery = Some(job),
            JobKind::Resync => self.resync = Some(job),
        }
        result
    }

    fn advance(&mut self, job: &mut Job) -> Result<(), Failure> {
        if job.inflight.is_some() || job.flushing {
            return Ok(());
        }
        if job.pos < job.end {
            let left = job.end - job.pos;
            // Windows are whole sectors, as any driver's (md's are pages). On raid1/raid10 the
            // engine widens them to whole 4 KiB rows anyway, so that no sector is built from two
            // copies that disagree after a crash.
            let len = (SECTOR * self.rng.between(1, 128)).min(left);
            let offset = job.pos;
            let request = match job.kind {
                JobKind::Recovery => Request::Recover { offset, len },
                JobKind::Resync => Request::Sync { offset, len, repair: true },
            };
            let rid = self.submit(request, Pending::Step { job: job.kind, offset, len })?;
            job.inflight = Some(rid);
        } else {
            // Done: the members are flushed before the end is recorded, so the superblocks never
            // say more than the members hold.
            job.flushing = true;
            match job.kind {
                JobKind::Recovery => {
                    let slots = job.targets.iter().filter_map(|&t| self.slot_dev[t].map(|d| (t, d))).collect();
                    self.flush_then(AfterFlush::Rebuilt { slots });
                }
                JobKind::Resync => self.flush_then(AfterFlush::ResyncDone),
            }
        }
        Ok(())
    }

    /// A step of a job completed up to `pos`: now and then, record how far it has come.
    pub(super) fn job_progress(&mut self, kind: JobKind, pos: u64) {
        if !self.rng.chance(1, 4) {
            return;
        }
        match kind {
            JobKind::Recovery => {
                let Some(job) = &self.recovery else { return };
                let slots = job.targets.clone();
                self.flush_then(AfterFlush::Checkpoint { slots, bytes: pos });
            }
            JobKind::Resync => self.flush_then(AfterFlush::ResyncCheckpoint { array_bytes: pos }),
        }
    }

    /// The resync has covered the array and its writes are flushed: recorded, and the array
    /// may be marked clean once idle.
    pub(super) fn resync_done(&mut self) -> Result<(), Failure> {
        if self.resync.take().is_none() {
            return Ok(());
        }
        self.open.resync_done();
        self.needs_resync = false;
        if self.inflight_writes.is_empty() && !self.meta.has_parked() {
            self.record(MetaChange::Clean)?;
        }
        self.report.resyncs += 1;
        trace!(self, "resync done");
        self.verify.push(Verify::AfterResync);
        Ok(())
    }
}
