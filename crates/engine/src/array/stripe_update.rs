//! A stripe write once its reads are in: the new data and parity (read-modify-write, or
//! reconstruct-write over rebuilt blocks), partial parity logged first where the array keeps a
//! log, then the member writes.

use smallvec::{smallvec, SmallVec};
use uraid_layout::StripeRoles;

use super::emit::IoTag;
use super::logging;
use super::parity::{compute_parity_into, reconstruct};
use super::parity_write::{ParityWriteOp, Slots, Strategy, StripeBlocks, StripeMemberWrites, StripeWrite};
use super::{Array, RequestId};
use crate::iobuf::IoBuf;
use crate::member_io::MemberOp;
use uraid_md_format::ppl::PplEntry;

impl Array {
    /// All reads of a stripe are in: compute the new parity and issue the writes.
    /// Returns true when the stripe is finished (nothing was left to write).
    pub(super) fn write_stripe(
        &mut self,
        rid: RequestId,
        w: &mut ParityWriteOp,
        part: usize,
        roles: &StripeRoles,
    ) -> bool {
        let sw = &mut w.stripes[part];
        let (lo, hi) = (sw.lo, sw.hi);
        let len = (hi - lo) as usize;
        // New contents of each touched member over [lo, hi) where known.
        let overlay = |block: &mut [u8], slot: usize| {
            for r in sw.runs.iter().filter(|r| r.slot == slot) {
                let at = (r.chunk_offset - lo) as usize;
                let src = (r.logical - w.offset) as usize;
                w.data.copy_to(src, &mut block[at..at + r.len as usize]);
            }
        };
        // The request's bytes for `slot`, when one run writes all of its rows [lo, hi) and one
        // of the request's buffers holds them (gathered writes straddle buffers).
        let request_rows = |slot: usize| -> Option<&[u8]> {
            let r = sw.runs.iter().find(|r| r.slot == slot && r.chunk_offset == lo && r.len == hi - lo)?;
            let src = (r.logical - w.offset) as usize;
            w.data.contiguous(src, len)
        };
        // Members written over the whole of [lo, hi): parity, and data members whose read failed
        // (their rows are rewritten in full, which is the correction).
        let mut whole: SmallVec<[(usize, Vec<u8>); 2]> = SmallVec::new();
        // New contents over [lo, hi) of the data members the write touches, by slot, kept for
        // the partial parity log.
        let logging = self.log.is_some() && sw.strategy != Strategy::DataOnly;
        let mut new_blocks: StripeBlocks =
            if logging { smallvec![None; self.slots.len()] } else { StripeBlocks::new() };
        match sw.strategy {
            Strategy::DataOnly => {}
            Strategy::ReadModifyWrite => {
                let mut p = sw.blocks[roles.p].take();
                let mut q = roles.q.and_then(|q| sw.blocks[q].take());
                let mut touched: Slots = sw.runs.iter().map(|r| r.slot).collect();
                touched.sort_unstable();
                touched.dedup();
                for slot in touched {
                    let old = sw.blocks[slot].take().expect("RMW read the old data");
                    // A member written over all of [lo, hi) takes its new contents straight
                    // from the request; only a partly written one needs a merged copy.
                    let mut merged = None;
                    let new: &[u8] = match request_rows(slot) {
                        Some(rows) => rows,
                        None => {
                            let mut block = self.parity_blocks.take(len);
                            block.copy_from_slice(&old);
                            overlay(&mut block, slot);
                            &*merged.insert(block)
                        }
                    };
                    let qslot = roles.syndrome_slot[slot].unwrap_or(0);
                    match (&mut p, &mut q) {
                        (Some(p), q) => uraid_parity::update_pq(p, q.as_deref_mut(), qslot, &old, new),
                        (None, Some(q)) => {
                            let mut scratch = vec![0u8; len];
                            uraid_parity::update_pq(&mut scratch, Some(q), qslot, &old, new);
                        }
                        (None, None) => unreachable!("RMW is chosen only with live parity"),
                    }
                    if logging {
                        new_blocks[slot] = Some(new.to_vec());
                    }
                    if let Some(block) = merged {
                        self.parity_blocks.put(block);
                    }
                }
                if let Some(p) = p {
                    whole.push((roles.p, p));
                }
                if let (Some(qs), Some(q)) = (roles.q, q) {
                    whole.push((qs, q));
                }
            }
            Strategy::ReconstructWrite | Strategy::Degraded => {
                let mut blocks = std::mem::take(&mut sw.blocks);
                if sw.strategy == Strategy::Degraded {
                    // Rebuild the old contents of every member not read first.
                    let missing: Vec<usize> = (0..blocks.len()).filter(|&s| blocks[s].is_none()).collect();
                    reconstruct(roles, &mut blocks, &missing, len);
                }
                // New contents per data member: merged into its old rows where it has them,
                // else straight from the request when it writes them all (no copy), else
                // the request's pieces over zeros.
                for &slot in &roles.data {
                    match blocks[slot].as_mut() {
                        Some(b) => overlay(b, slot),
                        None if request_rows(slot).is_some() => {}
                        None => {
                            let mut b = vec![0u8; len];
                            overlay(&mut b, slot);
                            blocks[slot] = Some(b);
                        }
                    }
                }
                let new_data = |slot: usize| -> &[u8] {
                    blocks[slot]
                        .as_deref()
                        .or_else(|| request_rows(slot))
                        .expect("every data member's new rows are known")
                };
                for &slot in &roles.data {
                    if sw.bad.contains(&slot) {
                        whole.push((slot, new_data(slot).to_vec()));
                    }
                    if logging && sw.runs.iter().any(|r| r.slot == slot) {
                        new_blocks[slot] = Some(new_data(slot).to_vec());
                    }
                }
                let data: SmallVec<[&[u8]; 16]> = roles.data.iter().map(|&slot| new_data(slot)).collect();
                let mut p = self.parity_blocks.take(len);
                let mut q = roles.q.map(|_| self.parity_blocks.take(len));
                let zeros = if roles.syndrome_disks > data.len() { self.parity_blocks.zeros(len) } else { &[] };
                compute_parity_into(roles, &data, zeros, &mut p, q.as_deref_mut());
                whole.push((roles.p, p));
                if let (Some(qs), Some(q)) = (roles.q, q) {
                    whole.push((qs, q));
                }
            }
        }
        // Partial parity for the log, from the new parity and data before the writes take them.
        let logged = if logging { self.stripe_log_entries(sw, roles, lo, hi, &whole, &new_blocks) } else { None };
        let chunk = self.geometry.chunk_bytes();
        let base = sw.stripe * chunk;
        let mut writes = StripeMemberWrites::new();
        for r in &sw.runs {
            if self.writable(r.slot) && !whole.iter().any(|(s, _)| *s == r.slot) {
                let src = (r.logical - w.offset) as usize;
                writes.push((r.slot, base + r.chunk_offset, w.data.slice(src, r.len as usize), false));
            }
        }
        for (slot, block) in whole {
            if self.writable(slot) {
                let correction = sw.bad.contains(&slot) && self.in_sync(slot);
                writes.push((slot, base + lo, IoBuf::from(block), correction));
            }
        }
        sw.blocks = smallvec![None; self.slots.len()];
        sw.writing = true;
        sw.pending = writes.len();
        if writes.is_empty() {
            return true;
        }
        if let Some((log_slots, entries, pp)) = logged {
            // Hold the writes back until partial parity for these rows is durable.
            sw.pending = 0;
            sw.deferred = writes;
            sw.logged = true;
            self.log_enqueue(&log_slots, logging::Logged { rid, part, entries, pp });
            return false;
        }
        if self.park_while_held(rid, part) {
            sw.pending = 0;
            sw.deferred = writes;
            return false;
        }
        self.emit_stripe_writes(rid, part, writes);
        false
    }

    /// The partial parity log's entries and partial parity for a stripe write, and the members
    /// whose logs take them; `None` when there is nothing to log (no parity member is left, or
    /// no row has partial parity or entries). `whole` holds the new parity, `new_blocks` the new
    /// contents of the data members written, both over the rows `[lo, hi)`.
    fn stripe_log_entries(
        &self,
        sw: &StripeWrite,
        roles: &StripeRoles,
        lo: u64,
        hi: u64,
        whole: &[(usize, Vec<u8>)],
        new_blocks: &StripeBlocks,
    ) -> Option<(logging::LogSlots, Vec<PplEntry>, Vec<u8>)> {
        let log_slots = self.log_slots_for(roles.p, roles.q);
        if log_slots.is_empty() {
            return None;
        }
        let block = |slot: usize| whole.iter().find(|(s, _)| *s == slot).map(|(_, b)| b.as_slice());
        let rows = (hi - lo) / crate::ppl::ROW_BYTES;
        let modified: Vec<Vec<bool>> = roles
            .data
            .iter()
            .map(|&slot| {
                (0..rows)
                    .map(|row| {
                        let (start, end) = (lo + row * crate::ppl::ROW_BYTES, lo + (row + 1) * crate::ppl::ROW_BYTES);
                        sw.runs.iter().any(|r| r.slot == slot && r.chunk_offset < end && start < r.chunk_offset + r.len)
                    })
                    .collect()
            })
            .collect();
        let new_data: Vec<Option<&[u8]>> = roles.data.iter().map(|&slot| new_blocks[slot].as_deref()).collect();
        let change = crate::ppl::StripeChange {
            stripe: sw.stripe,
            lo,
            hi,
            modified: &modified,
            new_data: &new_data,
            p: block(roles.p).expect("a logged write computes P"),
            q: roles.q.and_then(block),
        };
        let (entries, pp) = crate::ppl::stripe_entries(&self.geometry, &change);
        (!entries.is_empty()).then_some((log_slots, entries, pp))
    }

    /// Send a stripe's member writes: `(slot, offset, bytes, is a correction)`.
    pub(super) fn emit_stripe_writes(&mut self, rid: RequestId, part: usize, writes: StripeMemberWrites) {
        for (slot, off, data, correction) in writes {
            let tag = IoTag { part, slot };
            // Writes wait for the log: by now the slot may hold another device, which gets the
            // block as a plain write.
            if correction && self.in_sync(slot) {
                self.emit_correction(rid, tag, off, data);
            } else if let Some(batch) = self.write_batch.as_mut() {
                // Merged with the other stripes planned with it (see `admit_stripes`).
                batch.push((part, slot, off, data));
            } else {
                self.emit(rid, tag, off, MemberOp::Write { data });
            }
        }
    }
}
