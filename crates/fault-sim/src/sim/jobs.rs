//! Background jobs: recovery onto spares and resync after a crash, stepped in random windows
//! while the workload goes on, and what their completion records.

use uraid_engine::array::{Request, SlotState};

use crate::disk::SECTOR;

use super::{Failure, Invariant, Job, JobKind, Mode, Pending, Sim, Verify};

impl Sim {
    pub(super) fn drive_jobs(&mut self) -> Result<(), Failure> {
        let states = self.array.slot_states().to_vec();
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
        let whole = self.array.slot_states().iter().all(|s| *s == SlotState::InSync);
        if whole {
            self.resync_refused = false;
        }
        // Mirrors may resync what is left while degraded (md does; an engine that refuses says
        // DegradedCheck and the resync waits until the array is whole). A parity array is
        // degraded here only with a partial parity log (else a crash while degraded ends the
        // run), and owes a resync only after a log replay that could not use all of the log;
        // raid6 short of one member can run it.
        let mirror = self.geometry.is_mirrored();
        // raid6 short of one member resyncs too (P and Q made to agree around it).
        let lost =
            self.array.slot_states().iter().filter(|s| matches!(s, SlotState::Missing | SlotState::Faulty)).count();
        let short_raid6 = self.parity && self.geometry.max_degraded() > 1 && lost == 1;
        if self.needs_resync
            && self.resync.is_none()
            && self.recovery.is_none()
            && (whole
                || ((mirror || short_raid6)
                    && !self.resync_refused
                    && !self.array.slot_states().contains(&SlotState::Recovering)))
        {
            trace!(self, "resync starts");
            self.resync = Some(Job {
                kind: JobKind::Resync,
                pos: 0,
                end: self.model.size(),
                inflight: None,
                flushing: false,
                targets: Vec::new(),
            });
        }
        self.advance_job(JobKind::Recovery)?;
        self.advance_job(JobKind::Resync)
    }

    fn start_recovery(&mut self, slots: Vec<usize>) -> Result<(), Failure> {
        for &s in &slots {
            let d = self.new_device();
            self.devices[d].unsynced_spare = true;
            self.slot_dev[s] = Some(d);
            self.trusted[s] = false;
            trace!(self, "spare d{d} added in slot {s}");
            if let Err(e) = self.array.set_slot_state(s, SlotState::Recovering, false) {
                return Err(self.fail(Invariant::Protocol, format!("adding a spare in slot {s} was refused: {e}")));
            }
            self.report.spares_added += 1;
        }
        self.recovery = Some(Job {
            kind: JobKind::Recovery,
            pos: 0,
            end: self.geometry.member_data_bytes(),
            inflight: None,
            flushing: false,
            targets: slots,
        });
        Ok(())
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
            // Done: flush what the job wrote before recording it (md's superblock update after
            // recovery or resync is a flush + FUA write).
            let token = self.model.flush_submitted();
            self.submit(Request::Flush, Pending::Flush { token, job: Some(job.kind) })?;
            job.flushing = true;
        }
        Ok(())
    }

    pub(super) fn recovery_done(&mut self) -> Result<(), Failure> {
        let Some(job) = self.recovery.take() else { return Ok(()) };
        for &t in &job.targets {
            if self.array.slot_states()[t] != SlotState::Recovering {
                continue;
            }
            if let Err(e) = self.array.set_slot_state(t, SlotState::InSync, false) {
                return Err(
                    self.fail(Invariant::Protocol, format!("marking rebuilt slot {t} in sync was refused: {e}"))
                );
            }
            self.trusted[t] = true;
            let d = self.slot_dev[t].expect("a spare");
            self.devices[d].unsynced_spare = false;
            trace!(self, "slot {t} (d{d}) rebuilt and in sync");
        }
        self.report.rebuilds += 1;
        self.verify.push(Verify::AfterRebuild);
        Ok(())
    }

    pub(super) fn resync_done(&mut self) {
        self.resync = None;
        self.needs_resync = false;
        self.array.set_resync_pending(false);
        self.report.resyncs += 1;
        trace!(self, "resync done");
        self.verify.push(Verify::AfterResync);
    }
}
