//! The bound on stripe buffers that parity writes hold (md's stripe cache size): a write plans a
//! stripe only once its buffers fit, and waits in line for memory otherwise.

use super::parity_write::{ParityWriteOp, StripeWrite};
use super::requests::OpKind;
use super::write_merge::PartWrites;
use super::{Array, RequestId};

impl Array {
    /// Bound the bytes of stripe buffers held by parity writes in progress (md's stripe cache
    /// size): a write waits for memory before planning a stripe that would exceed it (see
    /// `admit_stripes`). Default [`DEFAULT_STRIPE_MEMORY`](super::DEFAULT_STRIPE_MEMORY).
    pub fn set_stripe_memory_limit(&mut self, bytes: u64) {
        self.stripe_memory_limit = bytes;
        self.admit_waiting();
    }

    pub fn stripe_memory_limit(&self) -> u64 {
        self.stripe_memory_limit
    }

    /// Bytes of stripe buffers held by parity writes in progress now (as charged by the limit).
    pub fn stripe_memory_in_use(&self) -> u64 {
        self.stripe_memory
    }

    /// The most [`Array::stripe_memory_in_use`] has been since the last call (or since the
    /// start); the count starts afresh from what is in use now.
    pub fn take_stripe_memory_peak(&mut self) -> u64 {
        std::mem::replace(&mut self.stripe_memory_peak, self.stripe_memory)
    }

    /// Upper bound of the stripe buffers one stripe write holds while in progress: the old
    /// contents of every member it may read, and the new contents and parity it writes, over
    /// the member rows it spans (the request's own data is the caller's and not counted).
    pub(super) fn stripe_charge(&self, sw: &StripeWrite) -> u64 {
        let mut lo = sw.runs.iter().map(|r| r.chunk_offset).min().expect("a stripe write has runs");
        let mut hi = sw.runs.iter().map(|r| r.chunk_offset + r.len).max().expect("a stripe write has runs");
        if self.log.is_some() {
            lo = lo / crate::ppl::ROW_BYTES * crate::ppl::ROW_BYTES;
            hi = hi.div_ceil(crate::ppl::ROW_BYTES) * crate::ppl::ROW_BYTES;
        }
        2 * self.slots.len() as u64 * (hi - lo)
    }

    /// Plan the stripes of `w` not planned yet, in order, while the stripe memory allows. A
    /// stripe whose charge alone exceeds the limit is planned when nothing else holds memory
    /// (requests are never refused, and a stripe cannot be cut further than its rows; writes
    /// bigger than the limit are cut into stripes anyway, so a limit of a few stripes bounds
    /// everything). Without a log, the member writes of the stripes planned together that need
    /// no reads (full stripes) are merged per member: on every member, a stripe's chunk follows
    /// the previous stripe's, data and parity alike. With a log each stripe's writes wait for
    /// its own log write and are released stripe by stripe (`release_logged`), so they are not
    /// merged.
    pub(super) fn admit_stripes(&mut self, rid: RequestId, w: &mut ParityWriteOp) {
        let merging = self.log.is_none();
        let outer = if merging { self.write_batch.replace(PartWrites::new()) } else { None };
        while let Some(part) = w.unplanned.clone().next() {
            let charge = self.stripe_charge(&w.stripes[part]);
            if self.stripe_memory > 0 && self.stripe_memory + charge > self.stripe_memory_limit {
                break;
            }
            w.unplanned.start += 1;
            w.stripes[part].charge = charge;
            self.stripe_memory += charge;
            self.stripe_memory_peak = self.stripe_memory_peak.max(self.stripe_memory);
            if self.plan_stripe_write(rid, w, part) {
                self.stripe_finished(w, part);
            }
        }
        if merging {
            let batch = std::mem::replace(&mut self.write_batch, outer).unwrap_or_default();
            self.emit_merged_writes(rid, &mut w.groups, batch);
        }
    }

    /// A stripe write is finished: its memory goes back.
    pub(super) fn stripe_finished(&mut self, w: &mut ParityWriteOp, part: usize) {
        w.remaining -= 1;
        self.stripe_memory -= std::mem::take(&mut w.stripes[part].charge);
    }

    /// Let requests waiting for stripe memory plan more stripes, oldest first. Called where
    /// every request is in `ops`.
    pub(super) fn admit_waiting(&mut self) {
        if self.admitting {
            return;
        }
        self.admitting = true;
        while let Some(&rid) = self.memory_waiters.front() {
            let mut op = self.ops.remove(&rid).expect("a request waiting for memory is open");
            let OpKind::ParityWrite(w) = &mut op.kind else { unreachable!("only parity writes wait for memory") };
            self.admit_stripes(rid, w);
            let left = w.unplanned.len();
            if left == 0 {
                self.memory_waiters.pop_front();
            }
            if w.remaining == 0 {
                self.finish(rid, op);
            } else {
                self.ops.insert(rid, op);
            }
            if left > 0 {
                break;
            }
        }
        self.admitting = false;
    }
}
