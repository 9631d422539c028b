//! The engine's outputs: member I/Os scheduled on the simulated devices and completed at their
//! latencies, engine events, and finished requests judged against the model.

use uraid_engine::array::{Completion, IoId, IoResult, MemberIo, MemberIoError, MemberOp, RequestId, SlotState};
use uraid_engine::EngineError;

use crate::disk::SECTOR;
use crate::member_device::device_id;
use crate::model::Mismatch;

use super::{op_len, op_name, result_name, Failure, Flight, Invariant, Mode, Pending, Queued, Sim};

impl Sim {
    /// Hand every member I/O the engine has to the scheduler and every finished request to the
    /// checker, until the engine has nothing more to say.
    pub(super) fn pump(&mut self) -> Result<(), Failure> {
        loop {
            let mut progressed = false;
            // As the service does whenever its queue is empty: writes the engine keeps held
            // for a stream go once nothing else is in flight.
            self.open.engine_mut().unplug();
            while let Some(io) = self.open.engine_mut().next_io() {
                self.schedule(io)?;
                progressed = true;
            }
            self.pump_events()?;
            let (steps, jobs) = (self.meta.steps.clone(), self.meta_ios.len());
            self.drive_policy()?;
            // A new pass step or metadata job: take what it gives out too.
            progressed |= self.meta.steps != steps || self.meta_ios.len() != jobs;
            while let Some((rid, result)) = self.open.engine_mut().next_completion() {
                self.on_completion(rid, result)?;
                progressed = true;
                if self.ended.is_some() {
                    return Ok(());
                }
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    fn schedule(&mut self, io: MemberIo) -> Result<(), Failure> {
        let len = op_len(&io.op);
        let Some(dev) = self.slot_dev.get(io.slot).copied().flatten() else {
            return Err(self.fail(
                Invariant::Protocol,
                format!(
                    "member {} of slot {} at {}+{len}, but the slot holds no device",
                    op_name(&io.op),
                    io.slot,
                    io.offset
                ),
            ));
        };
        // Where it lands on the device, checked against the member's areas by the code the
        // service uses.
        let placed = self.targets[io.slot].as_ref().map(|t| t.placement(&io));
        let at = match placed {
            Some(Ok(p)) if self.devices[dev].in_range(p.at, len) => p.at,
            Some(Ok(p)) => {
                return Err(self.fail(
                    Invariant::Protocol,
                    format!(
                        "member {} of slot {} at device byte {}+{len} goes past the device's end",
                        op_name(&io.op),
                        io.slot,
                        p.at
                    ),
                ))
            }
            Some(Err(e)) => return Err(self.fail(Invariant::Protocol, e.to_string())),
            None => return Err(self.fail(Invariant::Protocol, format!("slot {} has no member target", io.slot))),
        };
        if matches!(io.op, MemberOp::Read { .. })
            && self.open.engine().slot_states()[io.slot] == SlotState::Recovering
            && !self.open.engine().may_read(io.slot)
        {
            return Err(self.fail(
                Invariant::Protocol,
                format!(
                    "member read of slot {} at {}+{len}, which is recovering and must not be read",
                    io.slot, io.offset
                ),
            ));
        }
        let base = self.latency[dev];
        let mut latency = match io.op {
            MemberOp::Flush => base * 2 + self.rng.between(0, base * 3),
            _ => base / 2 + self.rng.between(0, base) + len * 2,
        };
        if self.rng.chance(1, 50) {
            latency *= 10;
        }
        let done_at = self.now + latency;
        self.queue.insert((done_at, self.seq), Queued::Engine(io.id));
        self.seq += 1;
        let mark = matches!(io.op, MemberOp::Flush).then(|| self.devices[dev].flush_mark());
        trace!(
            self,
            "  io {} issue {} slot {} (d{dev}) {}+{len}, done at {:.3} ms",
            io.id,
            op_name(&io.op),
            io.slot,
            io.offset,
            done_at as f64 / 1e6
        );
        self.fingerprint(io.id ^ (io.slot as u64) << 56 ^ io.offset << 8 ^ len << 32 ^ done_at);
        self.ios.insert(io.id, Flight { io, dev, at, mark });
        Ok(())
    }

    pub(super) fn complete_member_io(&mut self, id: IoId) -> Result<(), Failure> {
        let f = self.ios.remove(&id).expect("a scheduled I/O");
        let destage = self.destage && self.frng.chance(1, 16);
        let destage_count = self.frng.between(1, 4) as usize;
        let had_bad = self.devices[f.dev].has_bad_sectors();
        let d = &mut self.devices[f.dev];
        let off = f.at;
        let result = if d.dead {
            IoResult::Failed(MemberIoError::other("member is dead"))
        } else {
            match &f.io.op {
                MemberOp::Read { len } => match d.read(off, *len) {
                    Ok(data) => IoResult::Read(data.into()),
                    Err(e) => IoResult::Failed(MemberIoError::other(e)),
                },
                MemberOp::Write { data } => match d.write(off, &data.to_vec()) {
                    Ok(()) => IoResult::Done,
                    Err(e) => IoResult::Failed(MemberIoError::other(e)),
                },
                MemberOp::Flush => {
                    d.flush_done(f.mark.expect("flushes carry a mark"));
                    IoResult::Done
                }
                MemberOp::Discard { len } => match d.discard(off, *len) {
                    Ok(()) => IoResult::Done,
                    Err(e) => IoResult::Failed(MemberIoError::other(e)),
                },
                MemberOp::LogWrite { data } => match d.write_fua(off, data) {
                    Ok(()) => IoResult::Done,
                    Err(e) => IoResult::Failed(MemberIoError::other(e)),
                },
                // The run performs the policy's metadata jobs itself (see `metadata.rs`).
                MemberOp::MetadataWrite { .. } => unreachable!("the engine never emits metadata writes"),
            }
        };
        if destage && !d.dead {
            d.destage(destage_count);
        }
        if had_bad && !d.has_bad_sectors() {
            self.cleared_while[f.dev] = Some(self.last_rid);
        }
        let outcome = match &result {
            IoResult::Read(_) | IoResult::Done | IoResult::Written(_) => "ok".to_string(),
            IoResult::Failed(e) => format!("FAILED: {e}"),
        };
        trace!(
            self,
            "  io {id} done {} slot {} (d{}) {}+{}: {outcome}",
            op_name(&f.io.op),
            f.io.slot,
            f.dev,
            off,
            op_len(&f.io.op)
        );
        self.fingerprint(id.wrapping_mul(31) ^ u64::from(matches!(result, IoResult::Failed(_))));
        self.report.member_ios += 1;
        self.open.engine_mut().complete_io(id, result);
        Ok(())
    }

    /// Take the engine's events through the array (which remembers failed members for its
    /// metadata) and record failures in the survivors' superblocks.
    pub(super) fn pump_events(&mut self) -> Result<(), Failure> {
        let failed = self.open.note_events();
        for (name, offset, len) in self.open.take_corrected_read_errors() {
            trace!(self, "event: {name}: read error at {offset}+{len} corrected");
            self.report.read_errors_corrected += 1;
        }
        if failed.is_empty() {
            return Ok(());
        }
        for (name, reason) in &failed {
            trace!(self, "event: {name} failed: {reason}");
            self.report.members_failed += 1;
            if reason.contains("covers only part of unreadable sector") {
                self.report.partial_sector_kicks += 1;
            }
            // md names a member by its device; a Vinum volume "subdisk NAME on DEVICE".
            let device = name.rsplit(" on ").next().unwrap_or(name);
            let explained = device_id(device).is_some_and(|d| self.devices[d].faulted || self.plex_mate_faulted(d));
            if !explained {
                return Err(self.fail(
                    Invariant::Protocol,
                    format!("the engine failed {name}, whose device had no fault injected: {reason}"),
                ));
            }
        }
        let now = self.clock();
        self.policy.members_failed(&mut self.open, now);
        Ok(())
    }

    /// Whether device `d` holds a member of a plex of a mirror of arrays that another member
    /// took out of service, on a faulted device or left out at open (a plex serves whole or not
    /// at all: its other members stop getting writes, and are failed with it).
    fn plex_mate_faulted(&self, d: usize) -> bool {
        let Some(nested) = self.open.engine().geometry().nested() else { return false };
        let Some(slot) = self.slot_dev.iter().position(|&dev| dev == Some(d)) else { return false };
        let (plex, _) = nested.plex_of(slot);
        let states = self.open.engine().slot_states();
        nested.plex_slots(plex).filter(|&s| s != slot).any(|s| match self.slot_dev[s] {
            // Left out when the volume was opened (its drive absent, or stale and not revived).
            None => true,
            Some(dev) => self.devices[dev].faulted || states[s] == SlotState::Missing,
        })
    }

    pub(super) fn request_error(&mut self, what: String, e: EngineError) -> Result<(), Failure> {
        self.request_failed(what, e.to_string())
    }

    pub(super) fn request_failed(&mut self, what: String, why: String) -> Result<(), Failure> {
        self.report.requests_failed += 1;
        trace!(self, "{what} failed: {why}");
        if self.mode == Mode::Normal {
            return Err(self.fail(
                Invariant::RequestFailed,
                format!("{what} failed ({why}) although the injected failures stay within the level's redundancy"),
            ));
        }
        Ok(())
    }

    pub(super) fn mismatch_failure(&self, m: Mismatch, what: &str) -> Failure {
        let invariant = if m.lost_durable.is_some() { Invariant::LostDurableWrite } else { Invariant::WrongData };
        self.fail(invariant, format!("{what}: {}\n  {}", m.describe(), self.locate(m.offset)))
    }

    /// Where logical byte `logical` lives, and the first bytes of its sector on each copy.
    fn locate(&self, logical: u64) -> String {
        let sector = logical / SECTOR * SECTOR;
        let places = self.geometry.runs(sector, 1)[0].copies.to_vec();
        let shown: Vec<String> = places
            .iter()
            .map(|&(slot, off)| match self.slot_dev[slot] {
                None => format!("slot {slot} at {off}: no device"),
                Some(d) => {
                    let base = self.targets[slot].as_ref().map_or(0, |t| t.base);
                    let bytes = self.devices[d].peek(base + off, 8);
                    format!("slot {slot} (d{d}) at member byte {off}: {bytes:02x?}")
                }
            })
            .collect();
        format!("the sector's copies: {}", shown.join("; "))
    }

    fn on_completion(&mut self, rid: RequestId, result: Result<Completion, EngineError>) -> Result<(), Failure> {
        let Some(p) = self.reqs.remove(&rid) else {
            return Err(self.fail(Invariant::Protocol, format!("completion of request #{rid}, which is not in flight")));
        };
        trace!(self, "request #{rid} done: {}", result_name(&result));
        self.fingerprint(rid.rotate_left(17) ^ u64::from(result.is_err()));
        if p.is_client() {
            self.client_inflight -= 1;
        }
        match p {
            Pending::Read { expect, prior } => match result {
                Ok(Completion::Read(data)) => {
                    let data = data.into_vec();
                    let what = format!("read #{rid} of {}+{}", expect.offset, expect.len);
                    if data.len() as u64 != expect.len {
                        return Err(self.fail(Invariant::WrongData, format!("{what} returned {} bytes", data.len())));
                    }
                    let masked: Vec<(u64, u64)> =
                        prior.iter().filter(|&&w| self.model.failed(w)).map(|&w| self.model.range(w)).collect();
                    if let Err(m) = self.model.check(&expect, &data, &masked) {
                        return Err(self.mismatch_failure(m, &what));
                    }
                }
                Ok(other) => return Err(self.fail(Invariant::Protocol, format!("read #{rid} completed as {other:?}"))),
                Err(e) => self.request_error(format!("read #{rid} of {}+{}", expect.offset, expect.len), e)?,
            },
            Pending::Write { wid } => {
                self.inflight_writes.remove(&wid);
                match result {
                    Ok(Completion::Written) => {
                        self.write_answered(wid);
                        self.write_ended(wid)?;
                    }
                    Ok(other) => {
                        return Err(self.fail(Invariant::Protocol, format!("write #{rid} completed as {other:?}")))
                    }
                    Err(e) => {
                        self.model.write_failed(wid);
                        self.write_ended(wid)?;
                        let (a, b) = self.model.range(wid);
                        self.request_error(format!("write #{rid} of {a}+{}", b - a), e)?;
                    }
                }
            }
            Pending::Flush { token } => match result {
                Ok(Completion::Flushed) => self.flush_answered(rid, token),
                Ok(other) => return Err(self.fail(Invariant::Protocol, format!("flush #{rid} completed as {other:?}"))),
                Err(e) => self.request_error(format!("flush #{rid}"), e)?,
            },
            Pending::Scrub => match result {
                Ok(Completion::Synced { mismatch_sectors: 0 }) => {}
                Ok(Completion::Synced { mismatch_sectors }) => {
                    if self.mode == Mode::Normal && !self.needs_resync {
                        return Err(self.fail(
                            Invariant::Inconsistent,
                            format!("check #{rid} found {mismatch_sectors} mismatched sectors on an array that needs no resync"),
                        ));
                    }
                }
                Ok(other) => return Err(self.fail(Invariant::Protocol, format!("check #{rid} completed as {other:?}"))),
                // A member failed while the check ran.
                Err(EngineError::DegradedCheck) if self.open.engine().degraded() => {}
                Err(e) => self.request_error(format!("check #{rid}"), e)?,
            },
            Pending::Step => self.pass_step_done(rid, result)?,
            Pending::Internal => self.internal = Some(result),
        }
        Ok(())
    }
}
