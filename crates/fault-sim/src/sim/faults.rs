//! The fault injector: the redundancy budget, the planned faults (deaths, latent errors, write
//! errors, operator fails, corruption, crashes) fired on time, and the guards of known engine
//! bugs (`crate::KNOWN_BUGS`) when there are any.

use uraid_device::array_policy::SyncAction;
use uraid_engine::array::SlotState;

use crate::disk::SECTOR;

use super::{Failure, FaultKind, Invariant, Mode, Mutation, Scenario, Sim, SimFormat};

impl Sim {
    /// Slots that are not fully trustworthy right now: not in sync, without a live device, with
    /// latent errors, or with a write error waiting.
    pub(super) fn compromised(&self) -> Vec<bool> {
        let states = self.open.engine().slot_states();
        (0..states.len())
            .map(|s| {
                states[s] != SlotState::InSync
                    || match self.slot_dev[s] {
                        None => true,
                        Some(d) => {
                            let oldest = self.reqs.keys().next();
                            let recently_bad = self.cleared_while[d].is_some_and(|r| oldest.is_some_and(|o| *o <= r));
                            let unrecorded = self.rebuilding.contains(&d)
                                || self
                                    .rebuilt_unrecorded
                                    .as_ref()
                                    .is_some_and(|(t, devs)| devs.contains(&d) && !self.open.metadata_durable(*t));
                            let d = &self.devices[d];
                            unrecorded
                                || d.dead
                                || d.has_bad_sectors()
                                || d.fail_next_write
                                || recently_bad
                                || self.meta.failed_on(d.id)
                        }
                    }
            })
            .collect()
    }

    /// Whether every live member of the array reads and writes without error (no latent
    /// errors, no write error pending, none cleared under requests still running).
    fn live_members_sound(&self) -> bool {
        let oldest = self.reqs.keys().next();
        self.slot_dev.iter().flatten().all(|&d| {
            let dev = &self.devices[d];
            let recently_bad = self.cleared_while[d].is_some_and(|r| oldest.is_some_and(|o| *o <= r));
            dev.dead || !(dev.has_bad_sectors() || dev.fail_next_write || recently_bad)
        })
    }

    /// Whether compromising `slot` as well leaves every byte readable: with it every slot on
    /// the same device (a gvinum drive may hold several subdisks of the volume).
    pub(super) fn within_budget_with(&self, slot: usize) -> bool {
        let mut c = self.compromised();
        c[slot] = true;
        if let Some(d) = self.slot_dev[slot] {
            for (s, dev) in self.slot_dev.iter().enumerate() {
                if *dev == Some(d) {
                    c[s] = true;
                }
            }
        }
        let crash_ahead = self.needs_resync
            || self.plan.iter().any(|f| matches!(f.kind, FaultKind::Crash | FaultKind::CrashInRebuild));
        if crash_ahead {
            self.distrust_parity_plexes(&mut c);
        }
        self.geometry.is_readable(&|s| !c[s])
    }

    /// In a mirror of arrays, a raid5 plex short of a member is not trusted after an unclean
    /// stop (its parity may disagree with its data): with a crash to come, it counts as lost
    /// whole as soon as one of its members is compromised.
    fn distrust_parity_plexes(&self, c: &mut [bool]) {
        let Some(nested) = self.geometry.nested() else { return };
        for p in (0..nested.plexes().len()).filter(|&p| nested.plexes()[p].is_parity()) {
            if nested.plex_slots(p).any(|s| c[s]) {
                nested.plex_slots(p).for_each(|s| c[s] = true);
            }
        }
    }

    /// Whether the array as assembled after a crash now would miss a slot.
    fn degraded_for_assembly(&self) -> bool {
        (0..self.slot_dev.len()).any(|s| {
            self.open.engine().slot_states()[s] != SlotState::InSync
                || self.slot_dev[s].is_none_or(|d| self.devices[d].dead)
        })
    }

    pub(super) fn fire_faults(&mut self) -> Result<(), Failure> {
        for f in &mut self.plan {
            if f.at.is_none() && self.w.submitted >= f.at_op {
                f.at = Some(self.events + f.delay);
            }
        }
        while let Some(i) = self.plan.iter().position(|f| f.at.is_some_and(|at| at <= self.events)) {
            let mut f = self.plan.remove(i);
            let fired = self.fire(f.kind)?;
            // Hear what the engine says about it before anything else changes the slots.
            self.pump()?;
            if !fired {
                f.tries += 1;
                if f.tries < 30 {
                    f.at = Some(self.events + self.frng.between(5, 60));
                    self.plan.push(f);
                } else {
                    trace!(self, "fault {:?} dropped: its conditions never held", f.kind);
                }
            }
            if self.ended.is_some() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The workload is over and the array idle: fire what is left of the plan now, once each.
    pub(super) fn fire_leftover_faults(&mut self) -> Result<(), Failure> {
        for f in std::mem::take(&mut self.plan) {
            trace!(self, "leftover fault {:?} fires at the end", f.kind);
            if !self.fire(f.kind)? {
                trace!(self, "fault {:?} dropped: its conditions do not hold", f.kind);
            }
            self.pump()?;
            if self.ended.is_some() {
                break;
            }
        }
        Ok(())
    }

    /// Inject one fault; false to try again later.
    fn fire(&mut self, kind: FaultKind) -> Result<bool, Failure> {
        let n = self.slot_dev.len();
        let ignore_budget = self.mode == Mode::Overload || self.cfg.mutation == Some(Mutation::ExtraDeath);
        // A parity array whose parity may be stale (crash, resync not finished) must not lose a
        // member: that is the write hole, which md avoids by refusing such arrays.
        if self.parity && self.needs_resync && kind != FaultKind::Crash && self.cfg.scenario == Scenario::Standard {
            return Ok(false);
        }
        let live = |s: usize| self.slot_dev[s].is_some_and(|d| !self.devices[d].dead);
        let in_sync = |s: usize| self.open.engine().slot_states()[s] == SlotState::InSync;
        match kind {
            FaultKind::Death => {
                let cands: Vec<usize> =
                    (0..n).filter(|&s| live(s) && (ignore_budget || self.within_budget_with(s))).collect();
                if cands.is_empty() {
                    return Ok(false);
                }
                let s = self.frng.pick(&cands);
                let d = self.slot_dev[s].expect("live");
                trace!(self, "FAULT: device d{d} in slot {s} dies");
                self.devices[d].dead = true;
                self.devices[d].faulted = true;
                self.report.deaths += 1;
            }
            FaultKind::Latent | FaultKind::WriteError | FaultKind::OperatorFail => {
                let cands: Vec<usize> = (0..n)
                    .filter(|&s| live(s) && in_sync(s) && (ignore_budget || self.within_budget_with(s)))
                    .collect();
                if cands.is_empty() {
                    return Ok(false);
                }
                let s = self.frng.pick(&cands);
                let d = self.slot_dev[s].expect("live");
                match kind {
                    FaultKind::Latent => {
                        // In the data area: a member whose superblock cannot be read is one
                        // assembly leaves out, which this run does not model.
                        let target = self.targets[s].as_ref();
                        // A Vinum slot's subdisk has its own size; md's members all hold the
                        // geometry's member data.
                        let total = match target {
                            Some(t) if self.format == SimFormat::Vinum => t.data_bytes,
                            _ => self.geometry.member_data_bytes(),
                        } / SECTOR;
                        let count = self.frng.between(1, 8).min(total);
                        let base = target.map_or(0, |t| t.base) / SECTOR;
                        let first = base + self.frng.below(total - count + 1);
                        let bad = self.devices[d].add_latent(first, count, &mut self.frng);
                        if bad.is_empty() {
                            return Ok(false);
                        }
                        trace!(self, "FAULT: latent sector errors on d{d} (slot {s}) sectors {bad:?}");
                        self.devices[d].faulted = true;
                        self.report.latent_errors += 1;
                    }
                    FaultKind::WriteError => {
                        trace!(self, "FAULT: the next write to d{d} (slot {s}) fails");
                        self.devices[d].fail_next_write = true;
                        self.devices[d].faulted = true;
                        self.report.write_errors += 1;
                    }
                    _ => {
                        trace!(self, "FAULT: the operator fails slot {s} (d{d})");
                        self.devices[d].faulted = true;
                        self.report.operator_fails += 1;
                        // As `mdadm --fail`: through the array, which records it in the
                        // survivors' superblocks.
                        let name = crate::member_device::device_name(d);
                        let failed = match self.format {
                            // As `gvinum setstate -f stale` on the subdisk.
                            SimFormat::Vinum => self.open.fail_subdisk(s, false).map(|_| s),
                            // As `raidctl -f` on the component.
                            SimFormat::Raidframe => self.open.fail_column(s, false).map(|_| s),
                            SimFormat::Md => self.open.fail_member(&name, false),
                        };
                        if let Err(e) = failed {
                            return Err(self.fail(
                                Invariant::Protocol,
                                format!("failing slot {s} within redundancy was refused: {e}"),
                            ));
                        }
                        let now = self.clock();
                        self.policy.membership_changed(&self.open);
                        self.policy.member_left(&mut self.open, now);
                    }
                }
            }
            FaultKind::Corrupt => {
                let cands: Vec<usize> = (0..n).filter(|&s| live(s) && in_sync(s)).collect();
                if cands.is_empty() {
                    return Ok(false);
                }
                let s = self.frng.pick(&cands);
                let d = self.slot_dev[s].expect("live");
                // A byte that holds something: data, or parity (inside the member's data area).
                let mut offset = self.frng.below(self.geometry.member_data_bytes());
                for _ in 0..50 {
                    if self.geometry.is_parity()
                        || self.geometry.logical(s, offset).is_some_and(|l| l < self.model.size())
                    {
                        break;
                    }
                    offset = self.frng.below(self.geometry.member_data_bytes());
                }
                let xor = self.frng.next_u64() as u8;
                trace!(self, "FAULT: byte {offset} of d{d} (slot {s}) silently corrupted");
                let base = self.targets[s].as_ref().map_or(0, |t| t.base);
                self.devices[d].corrupt(base + offset, xor);
                self.report.corruptions += 1;
            }
            FaultKind::CrashInRebuild => {
                // While the array is recorded clean, too: a crash with writes in flight makes
                // the next assembly start the rebuild over, whatever its checkpoint says.
                let rebuilding = self.policy.pass().is_some_and(|p| p.action == SyncAction::Recover);
                if !rebuilding || self.open.metadata_pending().is_some() || self.open.is_dirty() {
                    return Ok(false);
                }
                self.crash()?;
            }
            FaultKind::Crash => {
                if self.cfg.scenario == Scenario::WriteHole {
                    if !self.degraded_for_assembly() {
                        return Ok(false);
                    }
                } else if self.parity && self.ppl.is_some() && self.live_members_sound() {
                    // The log makes parity match data again whatever was in flight: a crash
                    // while degraded is survivable, and nothing waits for a resync.
                } else if self.parity && self.compromised().contains(&true) {
                    // Latent errors or a pending write error would meet stale parity in the
                    // resync (the write hole again); wait until they are gone. A crash while
                    // degraded is sometimes let through: md refuses to assemble, the run ends.
                    // With the log the array is assembled, and a log replay that cannot read a
                    // member it needs leaves that stripe as it was: not simulated (docs/).
                    // The failure must be on the members, too: until then assembly takes the
                    // failed member back (latent errors and all), as md would.
                    // A mirror of arrays is assembled on the plexes it has: a crash is safe
                    // while a plex with nothing compromised (a raid5 plex counted lost whole if
                    // any member of it is) can serve every byte, and waits otherwise.
                    let recorded = self.open.metadata_pending().is_none();
                    if self.geometry.nested().is_some() {
                        let mut c = self.compromised();
                        self.distrust_parity_plexes(&mut c);
                        if !self.geometry.is_readable(&|s| !c[s]) {
                            return Ok(false);
                        }
                    } else if self.ppl.is_some()
                        || !(recorded && self.degraded_for_assembly() && self.frng.chance(1, 5))
                    {
                        return Ok(false);
                    }
                }
                self.crash()?;
            }
        }
        Ok(true)
    }
}
