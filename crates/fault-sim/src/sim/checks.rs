//! Checks at quiet points: a full read against the model, a consistency check, and reads
//! through fresh arrays over every survivable subset of the members.

use std::collections::BTreeSet;

use uraid_engine::array::{Completion, IoResult, MemberIo, MemberIoError, MemberOp, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::Engine;
use uraid_engine::EngineError;

use super::{configure_reads, op_name, result_name, Failure, Invariant, Mode, Pending, Sim, Verify};

impl Sim {
    /// Let every request in flight finish (no arrivals, faults or job steps meanwhile).
    pub(super) fn quiesce(&mut self) -> Result<(), Failure> {
        loop {
            self.pump()?;
            if (self.reqs.is_empty() && !self.meta.has_parked()) || self.ended.is_some() {
                return Ok(());
            }
            let Some(((t, _), q)) = self.queue.pop_first() else { return Err(self.stalled()) };
            self.now = t;
            self.complete(q)?;
        }
    }

    /// Run one request to completion on a quiet array, through the scheduler.
    pub(super) fn run_sync(&mut self, request: Request) -> Result<Result<Completion, EngineError>, Failure> {
        self.internal = None;
        self.submit(request, Pending::Internal)?;
        loop {
            self.pump()?;
            if let Some(r) = self.internal.take() {
                return Ok(r);
            }
            let Some(((t, _), q)) = self.queue.pop_first() else { return Err(self.stalled()) };
            self.now = t;
            self.complete(q)?;
        }
    }

    pub(super) fn do_verify(&mut self, v: Verify) -> Result<(), Failure> {
        if self.ended.is_some() {
            return Ok(());
        }
        trace!(self, "verify {v:?}");
        match v {
            Verify::AfterResync => {
                self.verify_read_all(true, "full read after the resync that followed a crash")?;
                self.verify_check("check after the resync")?;
                self.verify_subsets("after the resync")?;
            }
            Verify::AfterRebuild => {
                self.verify_check("check after the rebuild")?;
                self.verify_subsets("after the rebuild")?;
            }
        }
        Ok(())
    }

    pub(super) fn final_checks(&mut self) -> Result<(), Failure> {
        self.quiesce()?;
        trace!(self, "final checks");
        self.verify_read_all(false, "final full read")?;
        self.verify_check("final check")?;
        self.verify_subsets("at the end")
    }

    fn verify_read_all(&mut self, pin: bool, what: &str) -> Result<(), Failure> {
        let size = self.model.size();
        let expect = self.model.expect(0, size);
        match self.run_sync(Request::Read { offset: 0, len: size })? {
            Ok(Completion::Read(data)) => {
                let data = data.into_vec();
                if let Err(m) = self.model.check(&expect, &data, &[]) {
                    return Err(self.mismatch_failure(m, what));
                }
                if pin {
                    self.model.pin(&data);
                }
            }
            Ok(other) => return Err(self.fail(Invariant::Protocol, format!("{what} completed as {other:?}"))),
            Err(e) => self.request_error(what.to_string(), e)?,
        }
        Ok(())
    }

    /// Invariant (3): a whole array that needs no resync has consistent redundancy.
    fn verify_check(&mut self, what: &str) -> Result<(), Failure> {
        if !self.redundant || self.needs_resync || self.open.engine().degraded() || self.mode == Mode::Overload {
            return Ok(());
        }
        let size = self.model.size();
        match self.run_sync(Request::Sync { offset: 0, len: size, repair: false })? {
            Ok(Completion::Synced { mismatch_sectors: 0 }) => Ok(()),
            Ok(Completion::Synced { mismatch_sectors }) => {
                Err(self.fail(Invariant::Inconsistent, format!("{what}: {mismatch_sectors} mismatched sectors")))
            }
            Ok(other) => Err(self.fail(Invariant::Protocol, format!("{what} completed as {other:?}"))),
            Err(EngineError::DegradedCheck) if self.open.engine().degraded() => Ok(()),
            Err(e) => self.request_error(what.to_string(), e),
        }
    }

    /// Invariant (4): every survivable set of missing members still reads the model, through a
    /// fresh engine over the member contents as they are.
    fn verify_subsets(&mut self, what: &str) -> Result<(), Failure> {
        // Parity owed a resync (after a crash, without a log or with a log that could not all be
        // used) may not match the data yet: reads through it are judged after the resync.
        if !self.redundant || (self.parity && self.needs_resync) {
            return Ok(());
        }
        let n = self.slot_dev.len();
        let states = self.open.engine().slot_states().to_vec();
        let base: Vec<bool> = (0..n)
            .map(|s| {
                states[s] != SlotState::InSync
                    || self.slot_dev[s].is_none_or(|d| self.devices[d].dead || self.devices[d].has_bad_sectors())
            })
            .collect();
        let size = self.model.size();
        let expect = self.model.expect(0, size);
        let mut seen: BTreeSet<Vec<bool>> = BTreeSet::new();
        let mut sets: Vec<Vec<usize>> = vec![vec![]];
        for a in 0..n {
            sets.push(vec![a]);
            for b in a + 1..n {
                sets.push(vec![a, b]);
            }
        }
        for set in sets {
            let mut out = base.clone();
            for &s in &set {
                out[s] = true;
            }
            if set.is_empty() || !self.geometry.is_readable(&|s| !out[s]) || !seen.insert(out.clone()) {
                continue;
            }
            let slots: Vec<SlotState> =
                out.iter().map(|&o| if o { SlotState::Missing } else { SlotState::InSync }).collect();
            let mut fresh = match Engine::new(self.geometry.clone(), slots) {
                Ok(mut a) => {
                    configure_reads(&mut a, self.cfg.read_policy());
                    a
                }
                Err(e) => return Err(self.fail(Invariant::Protocol, format!("a readable subset was refused: {e}"))),
            };
            let mut wrote = None;
            let devices = &self.devices;
            let slot_dev = &self.slot_dev;
            let targets = &self.targets;
            let result =
                execute(&mut fresh, Request::Read { offset: 0, len: size }, &mut |io: &MemberIo| match &io.op {
                    MemberOp::Read { len } => {
                        let d = &devices[slot_dev[io.slot].expect("a device")];
                        let base = targets[io.slot].as_ref().expect("a device").base;
                        match d.read(base + io.offset, *len) {
                            Ok(data) => IoResult::Read(data.into()),
                            Err(e) => IoResult::Failed(MemberIoError::other(e)),
                        }
                    }
                    other => {
                        wrote = Some(format!("{} of slot {} at {}", op_name(other), io.slot, io.offset));
                        IoResult::Failed(MemberIoError::other("verification arrays are read-only"))
                    }
                });
            self.report.subset_reads += 1;
            let missing: Vec<usize> = (0..n).filter(|&s| out[s]).collect();
            if let Some(w) = wrote {
                return Err(self.fail(
                    Invariant::Protocol,
                    format!("{what}: a plain read without slots {missing:?} issued a member {w}"),
                ));
            }
            match result {
                Ok(Completion::Read(data)) => {
                    let data = data.into_vec();
                    if let Err(m) = self.model.check(&expect, &data, &[]) {
                        let mut f =
                            self.mismatch_failure(m, &format!("{what}, reading with slots {missing:?} missing"));
                        f.invariant = Invariant::DegradedReadDiffers;
                        return Err(f);
                    }
                }
                other => {
                    if self.mode == Mode::Normal {
                        return Err(self.fail(
                            Invariant::DegradedReadDiffers,
                            format!("{what}, reading with slots {missing:?} missing: {}", result_name(&other)),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
