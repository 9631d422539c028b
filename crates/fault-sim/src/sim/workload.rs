//! The client workload: random, often unaligned reads, writes, flushes, discards and checks,
//! recorded in the model as they are submitted.

use uraid_engine::array::{Request, RequestId};

use crate::disk::SECTOR;
use crate::model::WriteId;

use super::{Failure, Invariant, Pending, Sim};

impl Sim {
    fn pick_range(&mut self, size: u64) -> (u64, u64) {
        let unit = self.geometry.chunk_bytes().max(4096);
        let r = &mut self.rng;
        let len = match r.below(10) {
            0..=2 => r.between(1, 600),
            3..=5 => 512 * r.between(1, 16),
            6 | 7 => unit * r.between(1, 4),
            8 => r.between(1, 65536),
            _ => r.between(1, size),
        }
        .clamp(1, size);
        let align = match r.below(10) {
            0..=3 => 1,
            4..=7 => 512,
            _ => unit,
        };
        let offset = r.between(0, size - len) / align * align;
        (offset, len)
    }

    /// Whether a write of `[start, end)` would share a 512-byte sector with a write in flight
    /// without overlapping it, so the engine would run both at once (see the model's rules).
    fn shares_sector_without_overlap(&self, start: u64, end: u64) -> bool {
        if self.geometry.is_parity() {
            // Any two writes sharing a sector share a stripe, which the engine serializes.
            return false;
        }
        let (s0, s1) = (start / SECTOR * SECTOR, end.div_ceil(SECTOR) * SECTOR);
        self.inflight_writes.values().any(|&(a, b)| {
            let share = a / SECTOR * SECTOR < s1 && s0 < b.div_ceil(SECTOR) * SECTOR;
            let overlap = a < end && start < b;
            share && !overlap
        })
    }

    pub(super) fn submit(&mut self, request: Request, pending: Pending) -> Result<RequestId, Failure> {
        let what = match &request {
            Request::Read { offset, len } => format!("read {offset}+{len}"),
            Request::Write { offset, data } => format!("write {offset}+{}", data.len()),
            Request::Flush => "flush".to_string(),
            Request::Sync { offset, len, repair } => {
                format!("{} {offset}+{len}", if *repair { "repair" } else { "check" })
            }
            Request::Discard { offset, len } => format!("discard {offset}+{len}"),
            Request::Recover { offset, len } => format!("recover member bytes {offset}+{len}"),
        };
        match self.open.engine_mut().submit(request) {
            Ok(rid) => {
                self.last_rid = rid;
                trace!(self, "request #{rid} submitted: {what}");
                if pending.is_client() {
                    self.client_inflight += 1;
                }
                self.reqs.insert(rid, pending);
                Ok(rid)
            }
            Err(e) => Err(self.fail(Invariant::Protocol, format!("the engine refused a valid request {what}: {e}"))),
        }
    }

    pub(super) fn submit_client_op(&mut self) -> Result<(), Failure> {
        self.w.submitted += 1;
        let size = self.model.size();
        let roll = self.rng.below(100);
        let w = &self.w;
        let kind = if roll < w.read {
            0
        } else if roll < w.read + w.write {
            1
        } else if roll < w.read + w.write + w.flush {
            2
        } else if roll < w.read + w.write + w.flush + w.discard {
            3
        } else {
            4
        };
        let whole = !self.open.engine().degraded();
        match kind {
            1 => {
                let (mut offset, mut len) = self.pick_range(size);
                if self.plugged_bursts && self.write_cursor < size && self.rng.chance(1, 2) {
                    // A stream: this write continues the previous one.
                    offset = self.write_cursor;
                    len = len.min(size - offset);
                }
                self.write_cursor = offset + len;
                if self.shares_sector_without_overlap(offset, offset + len) {
                    return self.submit_read(size);
                }
                let mut data = vec![0u8; len as usize];
                self.rng.fill(&mut data);
                let wid = self.model.write(offset, &data);
                self.inflight_writes.insert(wid, (offset, offset + len));
                self.submit_client(Request::Write { offset, data: data.into() }, Pending::Write { wid })?;
            }
            2 => {
                let token = self.model.flush_submitted();
                self.submit_client(Request::Flush, Pending::Flush { token })?;
            }
            3 => {
                let (offset, len) = match self.geometry.discard_granularity() {
                    Some(width) => {
                        let stripes = size / width;
                        let first = self.rng.below(stripes);
                        (first * width, self.rng.between(1, (stripes - first).min(4)) * width)
                    }
                    None => {
                        let sectors = size / SECTOR;
                        let first = self.rng.below(sectors);
                        (first * SECTOR, self.rng.between(1, (sectors - first).min(64)) * SECTOR)
                    }
                };
                if self.shares_sector_without_overlap(offset, offset + len) {
                    return self.submit_read(size);
                }
                let wid = self.model.write(offset, &vec![0u8; len as usize]);
                self.inflight_writes.insert(wid, (offset, offset + len));
                self.submit_client(Request::Discard { offset, len }, Pending::Write { wid })?;
            }
            4 if self.redundant && whole && !self.needs_resync => {
                let (offset, len) = self.pick_range(size);
                self.submit_client(Request::Sync { offset, len, repair: false }, Pending::Scrub)?;
            }
            _ => return self.submit_read(size),
        }
        Ok(())
    }

    fn submit_read(&mut self, size: u64) -> Result<(), Failure> {
        let (offset, len) = if self.sequential_reads && self.rng.chance(1, 2) {
            let offset = if self.read_cursor >= size { 0 } else { self.read_cursor };
            (offset, self.rng.between(1, 16384).min(size - offset))
        } else {
            self.pick_range(size)
        };
        self.read_cursor = offset + len;
        let expect = self.model.expect(offset, len);
        let prior: Vec<WriteId> = self
            .inflight_writes
            .iter()
            .filter(|(_, &(a, b))| a < offset + len && offset < b)
            .map(|(&w, _)| w)
            .collect();
        self.submit_client(Request::Read { offset, len }, Pending::Read { expect, prior })?;
        Ok(())
    }
}
