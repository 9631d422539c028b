//! Crash and reassembly: what the members' caches keep, the array assembled again as mdadm
//! would, the partial parity logs replayed, and the write-hole scenario's judgement.

use std::collections::{BTreeMap, BTreeSet};

use uraid_engine::array::{Array, Completion, MemberIoError, MemberOp, Request, SlotState};
use uraid_engine::ppl::{latest_header, replay, MemberLog, PplConfig, ReplayIo};
use uraid_md_format::ppl::PplHeader;

use crate::disk::{SimDisk, SECTOR};
use crate::model::Mismatch;

use super::{configure_reads, empty_log, result_name, Failure, Invariant, Job, JobKind, Mode, Scenario, Sim};

/// Log replay over the simulated members.
struct SimReplayIo<'a> {
    devices: &'a mut [SimDisk],
    slot_dev: &'a [Option<usize>],
}

impl ReplayIo for SimReplayIo<'_> {
    fn read(&mut self, slot: usize, offset: u64, len: u64) -> Result<Vec<u8>, MemberIoError> {
        let d = self.slot_dev[slot].ok_or_else(|| MemberIoError::other("empty slot"))?;
        self.devices[d].read(offset, len).map_err(MemberIoError::other)
    }

    fn write(&mut self, slot: usize, offset: u64, data: &[u8]) -> Result<(), MemberIoError> {
        let d = self.slot_dev[slot].ok_or_else(|| MemberIoError::other("empty slot"))?;
        self.devices[d].write(offset, data).map_err(MemberIoError::other)
    }
}

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
        let mut inflight: BTreeMap<usize, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
        let mut inflight_log: Vec<(usize, u64, Vec<u8>)> = Vec::new();
        for f in self.ios.values() {
            match &f.io.op {
                MemberOp::LogWrite { data } => inflight_log.push((f.dev, f.io.offset, data.clone())),
                MemberOp::Write { data } => inflight.entry(f.dev).or_default().push((f.io.offset, data.to_vec())),
                MemberOp::Discard { len } => {
                    inflight.entry(f.dev).or_default().push((f.io.offset, vec![0; *len as usize]))
                }
                _ => {}
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
        for (d, offset, data) in inflight_log {
            if !self.devices[d].dead {
                self.devices[d].crash_log(&mut self.crng, offset, &data);
            }
        }
        self.ios.clear();
        self.queue.clear();
        self.reqs.clear();
        self.inflight_writes.clear();
        self.client_inflight = 0;
        self.internal = None;
        self.model.crash();
        self.recovery = None;
        self.resync = None;
        self.needs_resync = true;
        self.verify.clear();
        self.spare_countdown = None;
        // Assemble as mdadm would from the superblocks: trusted live members are in sync; dead
        // devices and members recorded faulty are missing; a spare whose recovery had not been
        // completed starts it again from 0.
        let n = self.slot_dev.len();
        let mut states = vec![SlotState::Missing; n];
        let mut respare = Vec::new();
        for (s, state) in states.iter_mut().enumerate() {
            let Some(d) = self.slot_dev[s] else { continue };
            let dev = &self.devices[d];
            if dev.dead {
                continue;
            }
            if dev.unsynced_spare {
                respare.push(s);
            } else if self.trusted[s] {
                *state = SlotState::InSync;
            }
        }
        let degraded = states.iter().any(|s| *s != SlotState::InSync);
        trace!(self, "reassembly: slots {states:?}, spares to recover again {respare:?}");
        let mut log_complete = false;
        if let Some(config) = self.ppl.clone() {
            log_complete = self.replay_logs(&config, &states)?;
        }
        if self.parity && degraded && self.cfg.scenario == Scenario::Standard && self.ppl.is_none() {
            self.report.refused = true;
            self.end(
                "crash while a parity array was degraded: md refuses to assemble a dirty degraded raid4/5/6 (write hole), and so does the simulation"
                    .into(),
            );
            return Ok(());
        }
        self.array = match Array::new(self.geometry.clone(), states) {
            Ok(mut a) => {
                configure_reads(&mut a, self.cfg.read_policy());
                a
            }
            Err(e) => {
                if self.mode == Mode::Normal {
                    return Err(self.fail(
                        Invariant::RequestFailed,
                        format!("the array cannot be assembled after the crash: {e}"),
                    ));
                }
                self.end(format!("the array cannot be assembled after the crash: {e}"));
                return Ok(());
            }
        };
        if let Some(config) = &self.ppl {
            self.array.enable_ppl(config.clone());
            if degraded {
                // No log short of a data journal keeps a sector that was being written on a
                // member that is gone: it reads back rebuilt from parity that matches neither
                // version. Everything else is kept (that is the write hole the log closes).
                let states = self.array.slot_states().to_vec();
                for &(a, b) in &exposed {
                    let mut pos = a / SECTOR * SECTOR;
                    while pos < b {
                        if self
                            .geometry
                            .parity_runs(pos, 1)
                            .first()
                            .is_some_and(|r| states[r.slot] != SlotState::InSync)
                        {
                            self.model.forget_sectors(pos, SECTOR);
                        }
                        pos += SECTOR;
                    }
                }
            }
        }
        // A complete log replay leaves parity matching data: no resync (md marks it clean, and
        // so does `uraid` assembly). Not even on a degraded raid6: a member that went missing
        // took no log entry with it that the other parity member's log does not hold too.
        self.needs_resync = !log_complete;
        self.array.set_resync_pending(self.needs_resync);
        if self.cfg.scenario == Scenario::WriteHole {
            return self.write_hole_check(&exposed);
        }
        if !respare.is_empty() {
            for &s in &respare {
                if let Err(e) = self.array.set_slot_state(s, SlotState::Recovering, false) {
                    return Err(self.fail(Invariant::Protocol, format!("re-adding spare in slot {s} refused: {e}")));
                }
            }
            self.recovery = Some(Job {
                kind: JobKind::Recovery,
                pos: 0,
                end: self.geometry.member_data_bytes(),
                inflight: None,
                flushing: false,
                targets: respare,
            });
        }
        self.w.next_arrival = self.now + self.gap();
        Ok(())
    }

    /// Replay every in-sync member's partial parity log as assembly does, then start the logs
    /// empty. True if every log was valid and applied in full.
    fn replay_logs(&mut self, config: &PplConfig, states: &[SlotState]) -> Result<bool, Failure> {
        let mut complete = true;
        let mut found: Vec<(usize, PplHeader, Vec<u8>)> = Vec::new();
        for (slot, state) in states.iter().enumerate() {
            if *state != SlotState::InSync {
                continue;
            }
            let d = self.slot_dev[slot].expect("an in-sync slot has a device");
            let Some((at, header)) = latest_header(&self.devices[d].ppl_area, config.signature) else {
                trace!(self, "  log of slot {slot} (d{d}): no valid header");
                complete = false;
                continue;
            };
            trace!(
                self,
                "  log of slot {slot} (d{d}), generation {}: {} entries",
                header.generation,
                header.entries.len()
            );
            for e in &header.entries {
                let ext = uraid_engine::ppl::entry_extent(&self.geometry, e);
                trace!(self, "    entry {e:?}: {ext:?}");
            }
            let pp = self.devices[d].ppl_area[at + uraid_md_format::ppl::HEADER_BYTES..].to_vec();
            found.push((slot, header, pp));
        }
        let logs: Vec<MemberLog> =
            found.iter().map(|(slot, header, pp)| MemberLog { slot: *slot, header, pp }).collect();
        let mut io = SimReplayIo { devices: &mut self.devices, slot_dev: &self.slot_dev };
        let r = match replay(&self.geometry, states, &logs, &mut io) {
            Ok(r) => r,
            Err(e) => return Err(self.fail(Invariant::RequestFailed, format!("replaying the logs: {e}"))),
        };
        trace!(
            self,
            "  replay: {} recovered, {} rebuilt, {} skipped, {} bad, {} duplicates",
            r.recovered,
            r.rebuilt,
            r.skipped,
            r.bad,
            r.duplicates
        );
        complete &= r.bad == 0;
        // Replay writes go straight to the media (the driver flushes after replay).
        for d in self.slot_dev.iter().flatten().copied().collect::<Vec<_>>() {
            if !self.devices[d].dead {
                let mark = self.devices[d].flush_mark();
                self.devices[d].flush_done(mark);
                self.devices[d].ppl_area = empty_log(config);
            }
        }
        self.report.log_entries_replayed += (r.recovered + r.rebuilt) as u64;
        Ok(complete)
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
            let states = self.array.slot_states().to_vec();
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
