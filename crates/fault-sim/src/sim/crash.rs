//! Crash and reassembly: what the members' caches keep, the array assembled again as mdadm
//! would, the partial parity logs replayed, and the write-hole scenario's judgement.

use std::collections::{BTreeMap, BTreeSet};

use uraid_device::array_policy::ArrayPolicy;
use uraid_device::OpenError;
use uraid_engine::array::{Completion, MemberOp, Request, SlotState};
use uraid_engine::metadata::MetaOp;

use crate::disk::SECTOR;
use crate::model::Mismatch;

use super::{
    configure_reads, md_members, raidframe_members, result_name, vinum_members, Failure, Invariant, Mode, Scenario,
    Sim, SimFormat,
};

impl Sim {
    pub(super) fn crash(&mut self) -> Result<(), Failure> {
        self.report.crashes += 1;
        trace!(
            self,
            "CRASH: {} requests and {} member I/Os in flight are dropped; {} sectors uncertain before",
            self.reqs.len(),
            self.ios.len(),
            self.model.uncertain_sectors()
        );
        let exposed = self.model.unflushed_ranges(self.last_flush);
        let in_metadata = !self.meta_ios.is_empty() || self.open.metadata_pending().is_some();
        if in_metadata {
            self.report.crashes_in_metadata_writes += 1;
        }
        let mut inflight: BTreeMap<usize, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
        let mut inflight_log: Vec<(usize, u64, Vec<u8>)> = Vec::new();
        for f in self.ios.values() {
            match &f.io.op {
                MemberOp::LogWrite { data } => inflight_log.push((f.dev, f.at, data.clone())),
                MemberOp::Write { data } => inflight.entry(f.dev).or_default().push((f.at, data.to_vec())),
                MemberOp::Discard { len } => inflight.entry(f.dev).or_default().push((f.at, vec![0; *len as usize])),
                _ => {}
            }
        }
        // Superblock, bitmap and log-header writes in flight may have reached the drive too.
        for f in self.meta_ios.values() {
            if let MetaOp::Write { offset, data, .. } = &f.op {
                inflight.entry(f.dev).or_default().push((*offset, data.to_vec()));
            }
        }
        for (d, offset, data) in inflight_log {
            if !self.devices[d].dead {
                self.devices[d].crash_fua(&mut self.crng, offset, &data);
            }
        }
        for d in 0..self.devices.len() {
            if self.devices[d].dead {
                continue;
            }
            let volatile = self.devices[d].volatile_writes();
            let writes = inflight.remove(&d).unwrap_or_default();
            let o = self.devices[d].crash(&mut self.crng, &writes);
            trace!(
                self,
                "  d{d}: {volatile} cached + {} in-flight writes: {} kept, {} lost, {} torn",
                writes.len(),
                o.kept,
                o.lost,
                o.torn
            );
        }
        self.reassemble(&exposed)
    }

    /// Drop everything the running array held and assemble it again from what the members hold
    /// now (after a crash, or a raidctl verb done with the set not running); `exposed` are the
    /// logical ranges written since the last flush the client saw.
    pub(super) fn reassemble(&mut self, exposed: &[(u64, u64)]) -> Result<(), Failure> {
        // The members the array held when it stopped: only their superblock updates can have
        // been lost to a crash (a member the array had failed is behind by design).
        let live_at_crash: Vec<usize> = self.slot_dev.iter().flatten().copied().collect();
        self.ios.clear();
        self.meta_ios.clear();
        self.meta = Default::default();
        self.queue.clear();
        self.reqs.clear();
        self.inflight_writes.clear();
        self.client_inflight = 0;
        self.internal = None;
        self.model.crash();
        self.needs_resync = true;
        self.verify.clear();
        self.spare_countdown = None;
        // A spare still waiting is assembled as a spare; new ones are added for empty slots.
        self.waiting_spares.clear();
        // Assemble from what the members hold now, by the code `uraid` assembles with: it reads
        // every superblock, decides which members are fresh and in which role (events, roles,
        // recovery offsets), replays the partial parity logs and says whether a resync is owed.
        let offered: Vec<usize> = self.joined.iter().copied().filter(|&d| !self.devices[d].dead).collect();
        trace!(self, "reassembly from devices {offered:?}");
        let rules = self.assembly_rules();
        let mut damaged = Vec::new();
        let assembled = match self.format {
            // gvinum's startup: drives found by their headers, the newest configuration wins.
            SimFormat::Vinum => vinum_members::open(&mut self.devices, &offered),
            // RAIDframe's autoconfiguration: the labels' freshest modification counter wins.
            SimFormat::Raidframe => raidframe_members::open(&mut self.devices, &offered),
            SimFormat::Md => md_members::assemble(&mut self.devices, &offered, rules, &mut damaged),
        };
        if let Some(v) = assembled.as_ref().ok().and_then(|o| o.vinum()) {
            for skipped in &v.skipped {
                trace!(self, "drive left out at startup: {skipped}");
            }
        }
        if !damaged.is_empty() {
            trace!(self, "superblocks torn by the crash on {damaged:?}: those members are left out");
            self.report.torn_superblocks += damaged.len() as u32;
        }
        let open = match assembled {
            Ok(open) => open,
            Err(OpenError::DirtyDegraded { missing }) if self.cfg.scenario == Scenario::Standard => {
                self.report.refused = true;
                self.end(format!(
                    "crash while a parity array was degraded ({missing} missing): md refuses to assemble a dirty degraded raid4/5/6 (write hole), and so does uraid"
                ));
                return Ok(());
            }
            Err(e) => {
                // A superblock the crash tore takes its member out as surely as a dead drive,
                // and so do superblock updates a crash lost twice over on a member that never
                // failed (a very slow one): md takes a member two events behind for stale, and
                // only `mdadm --assemble --force` takes it back. Beyond the redundancy, not a
                // failure of the code.
                let lost_updates = self.members_left_behind(&offered, &live_at_crash);
                if !lost_updates.is_empty() {
                    trace!(self, "members whose superblock updates the crashes lost: {lost_updates:?}");
                }
                if self.mode == Mode::Normal && damaged.is_empty() && lost_updates.is_empty() {
                    return Err(self.fail(
                        Invariant::RequestFailed,
                        format!("the array cannot be assembled after the crash: {e}"),
                    ));
                }
                self.end(format!("the array cannot be assembled after the crash: {e}"));
                return Ok(());
            }
        };
        self.report.writes_gathered += self.open.engine().writes_gathered();
        self.open = open;
        // A Vinum volume's slots follow its plexes in the order the drives list them now,
        // which a save may have changed (md's slots never move).
        self.geometry = self.open.engine().geometry().clone();
        configure_reads(self.open.engine_mut(), self.cfg.read_policy());
        self.refresh_slots();
        let states = self.open.engine().slot_states();
        self.rebuilding = (0..states.len())
            .filter(|&s| states[s] == SlotState::Recovering)
            .filter_map(|s| self.slot_dev[s])
            .collect();
        self.rebuilt_unrecorded = None;
        // A superblock the crash tore takes its member out, and with it whatever that
        // superblock alone recorded (a member failed, a spare's place): md then assembles from
        // what is left, which may take back a member the array had failed. That is two faults
        // at once, beyond what the fault plan budgets and beyond what md's metadata survives:
        // the run ends there.
        if !damaged.is_empty() {
            self.end(format!(
                "a superblock torn by the crash (on {damaged:?}) left md's metadata unable to vouch for the rest"
            ));
            return Ok(());
        }
        let states = self.open.engine().slot_states().to_vec();
        let degraded = states.iter().any(|s| *s != SlotState::InSync);
        trace!(self, "assembled: slots {states:?}, devices {:?}", self.slot_dev);
        // A member that never failed but whose superblock updates two crashes lost is two
        // events behind: md assembles without it (only `mdadm --assemble --force` takes it
        // back). That is a member lost to the crashes, which the fault plan never budgeted for;
        // what the array survives after that says nothing about the code. The run ends there.
        if self.mode == Mode::Normal {
            let lost_updates: Vec<usize> = self
                .members_left_behind(&offered, &live_at_crash)
                .into_iter()
                .filter(|d| !self.slot_dev.contains(&Some(*d)))
                .collect();
            if !lost_updates.is_empty() {
                self.end(format!(
                    "members {lost_updates:?} are two events behind (their superblock updates lost in crashes): md assembles without them, beyond the fault plan"
                ));
                return Ok(());
            }
        }
        if let Some(r) = self.open.md().and_then(|md| md.log_replay.as_ref()) {
            self.report.log_entries_replayed += (r.report.recovered + r.report.rebuilt) as u64;
            trace!(self, "log replay: {:?}", r);
        }
        if self.ppl.is_some() && degraded {
            // No log short of a data journal keeps a sector that was being written on a
            // member that is gone: it reads back rebuilt from parity that matches neither
            // version. Everything else is kept (that is the write hole the log closes).
            for &(a, b) in exposed {
                let mut pos = a / SECTOR * SECTOR;
                while pos < b {
                    if self.geometry.parity_runs(pos, 1).first().is_some_and(|r| states[r.slot] != SlotState::InSync) {
                        self.model.forget_sectors(pos, SECTOR);
                    }
                    pos += SECTOR;
                }
            }
        }
        self.needs_resync = self.open.needs_resync();
        // The service's policy starts afresh on the assembled array: a resync owed starts (from
        // the superblocks' checkpoint), and so does a rebuild cut short (from its checkpoint).
        let now = self.clock();
        self.policy = ArrayPolicy::new(&mut self.open, self.policy_config.clone(), now);
        if self.cfg.scenario == Scenario::WriteHole {
            return self.write_hole_check(exposed);
        }
        self.policy_events()?;
        self.w.next_arrival = self.now + self.gap();
        Ok(())
    }

    /// Devices among `offered` that the array held when the crash hit (`live`) but whose
    /// superblock is two or more events behind the freshest: their updates were lost in crashes.
    /// A member with latent sector errors the array never failed counts: its superblock writes
    /// are as exposed to a crash as any other member's.
    fn members_left_behind(&self, offered: &[usize], live: &[usize]) -> Vec<usize> {
        match self.format {
            // gvinum keeps no event counts: a drive whose saves a crash lost holds an older
            // configuration, which the newest simply outvotes.
            SimFormat::Vinum => return Vec::new(),
            SimFormat::Raidframe => return self.components_left_behind(offered, live),
            SimFormat::Md => {}
        }
        let events: Vec<(usize, u64)> = offered
            .iter()
            .filter_map(|&d| {
                let view = crate::member_device::SimMember::of(&self.devices[d]);
                let found = uraid_device::probe(&view).ok().flatten();
                view.take_writes();
                found.map(|p| (d, p.superblock.info().events))
            })
            .collect();
        let newest = events.iter().map(|e| e.1).max().unwrap_or(0);
        events.into_iter().filter(|&(d, ev)| ev + 1 < newest && live.contains(&d)).map(|(d, _)| d).collect()
    }

    /// RAIDframe's counterpart of [`Sim::members_left_behind`]: components among `offered` that
    /// the set held when the crash hit (`live`) but whose label is older than the freshest (a
    /// crash lost its last update). NetBSD takes any such component for stale, so a crash inside
    /// a label update can cost a column by itself; past the redundancy that is the fault plan's
    /// doing, not the code's.
    fn components_left_behind(&self, offered: &[usize], live: &[usize]) -> Vec<usize> {
        let counters: Vec<(usize, i32)> = offered
            .iter()
            .filter_map(|&d| {
                let view = crate::member_device::SimMember::of(&self.devices[d]);
                let found = uraid_device::raidframe_components::read_component(&view).ok();
                view.take_writes();
                found.map(|c| (d, c.label.mod_counter))
            })
            .collect();
        let newest = counters.iter().map(|c| c.1).max().unwrap_or(0);
        counters.into_iter().filter(|&(d, m)| m < newest && live.contains(&d)).map(|(d, _)| d).collect()
    }

    /// The write-hole scenario after its crash: read the degraded array and say what is wrong.
    fn write_hole_check(&mut self, exposed: &[(u64, u64)]) -> Result<(), Failure> {
        let size = self.model.size();
        let width = self.geometry.stripe_data_bytes().expect("parity geometry");
        let exposed_stripes: BTreeSet<u64> = exposed.iter().flat_map(|&(a, b)| a / width..b.div_ceil(width)).collect();
        let data = match self.run_sync(Request::Read { offset: 0, len: size })? {
            Ok(Completion::Read(d)) => d.into_vec(),
            other => {
                return Err(self.fail(
                    Invariant::RequestFailed,
                    format!("reading the degraded array failed: {}", result_name(&other)),
                ))
            }
        };
        // Every wrong sector, one by one.
        let mut wrong: Vec<Mismatch> = Vec::new();
        let mut pos = 0;
        while pos < size {
            let len = SECTOR.min(size - pos);
            let e = self.model.expect(pos, len);
            if let Err(m) = self.model.check(&e, &data[pos as usize..(pos + len) as usize], &[]) {
                wrong.push(m);
            }
            pos += len;
        }
        if self.ppl.is_some() {
            // With the log, only a sector that was being written and lives on a member that is
            // gone may come back as neither version: no log short of a data journal keeps it.
            let states = self.open.engine().slot_states().to_vec();
            let being_written = |pos: u64| exposed.iter().any(|&(a, b)| a < pos + SECTOR && pos < b);
            let on_missing = |pos: u64| {
                self.geometry.parity_runs(pos, 1).first().is_some_and(|r| states[r.slot] != SlotState::InSync)
            };
            let (allowed, unexplained): (Vec<&Mismatch>, Vec<&Mismatch>) =
                wrong.iter().partition(|m| being_written(m.offset) && on_missing(m.offset));
            if unexplained.is_empty() {
                self.end(format!(
                    "write hole closed by the log: the degraded array read back right, but for {} sector(s) written in flight on the missing member",
                    allowed.len()
                ));
                return Ok(());
            }
            return Err(self.fail(
                Invariant::WrongData,
                format!(
                    "after a crash while degraded and a log replay, {} sector(s) read wrong that were not being written on a missing member; first: {}",
                    unexplained.len(),
                    unexplained[0].describe()
                ),
            ));
        }
        if wrong.is_empty() {
            self.end("write hole: the degraded array read back correctly this time".into());
            return Ok(());
        }
        let outside: Vec<&Mismatch> = wrong.iter().filter(|m| !exposed_stripes.contains(&(m.offset / width))).collect();
        let first = &wrong[0];
        let mut f = self.fail(
            Invariant::WrongData,
            format!(
                "after a crash while degraded (assembled anyway, as md's start_dirty_degraded), {} sector(s) read wrong; first: {}. {}",
                wrong.len(),
                first.describe(),
                if outside.is_empty() {
                    format!(
                        "All lie in stripes whose writes were not yet flushed at the crash ({} such stripes): the RAID-5/6 write hole, which a journal or PPL closes",
                        exposed_stripes.len()
                    )
                } else {
                    format!(
                        "{} lie in stripes with no unflushed write: NOT explained by the write hole (first: {})",
                        outside.len(),
                        outside[0].describe()
                    )
                }
            ),
        );
        f.explained_by_write_hole = outside.is_empty();
        Err(f)
    }
}
