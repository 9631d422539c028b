//! Writes on raid4/5/6, planned stripe by stripe: per stripe the choice between read-modify-write
//! and reconstruct-write (md's `handle_stripe_dirtying`: fewer member reads wins), the reads it
//! needs, and what to do when a read fails or a member goes away meanwhile.

use smallvec::{smallvec, SmallVec};

use super::emit::{IoTag, Outcome};
use super::rows::row_pieces;
use super::write_data::WriteData;
use super::write_merge::{GroupParts, GROUP_PART};
use super::{Array, ParityWriteChoice, RequestId};
use crate::error::EngineError;
use crate::geometry::ParityRun;
use crate::iobuf::IoBuf;
use crate::member_io::MemberOp;
use crate::slot::SlotState;

/// A stripe's member write: `(slot, member offset, bytes, is a correction)`.
type StripeMemberWrite = (usize, u64, IoBuf, bool);

/// A stripe's member writes, inline for a small write (data, P and Q).
pub(super) type StripeMemberWrites = SmallVec<[StripeMemberWrite; 4]>;

/// Per member slot, a stripe's old (then new) contents over its rows, where known.
pub(super) type StripeBlocks = SmallVec<[Option<Vec<u8>>; 8]>;

/// Member slots, inline for arrays of up to 16 members.
pub(super) type Slots = SmallVec<[usize; 16]>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strategy {
    /// Every parity member is gone: just write the data.
    DataOnly,
    /// Read old data and parity, apply the difference (md's rmw).
    ReadModifyWrite,
    /// Read the data not being overwritten, compute parity afresh (md's rcw).
    ReconstructWrite,
    /// A member we need cannot be read: read every readable member, rebuild, then write.
    Degraded,
}

#[derive(Debug)]
pub(super) struct ParityWriteOp {
    pub(super) offset: u64,
    pub(super) data: WriteData,
    /// Inline for the usual one stripe.
    pub(super) stripes: SmallVec<[StripeWrite; 1]>,
    pub(super) remaining: usize,
    pub(super) error: Option<EngineError>,
    /// Stripes waiting for stripe memory before they are planned, in order.
    pub(super) unplanned: std::ops::Range<usize>,
    /// The stripes each merged member write covers (tag part `GROUP_PART + index`).
    pub(super) groups: Vec<GroupParts>,
}

#[derive(Debug)]
pub(super) struct StripeWrite {
    pub(super) stripe: u64,
    /// Inline for the usual one run (a stripe's part of a small write).
    pub(super) runs: SmallVec<[ParityRun; 1]>,
    pub(super) lo: u64,
    pub(super) hi: u64,
    pub(super) strategy: Strategy,
    pub(super) blocks: StripeBlocks,
    /// In-sync members whose read of `[lo, hi)` failed: rebuilt and rewritten in full.
    pub(super) bad: Vec<usize>,
    pub(super) pending: usize,
    failed_read: bool,
    pub(super) writing: bool,
    /// Member writes held back until the log writes covering the stripe are durable:
    /// `(slot, offset, bytes, is a correction)`.
    pub(super) deferred: StripeMemberWrites,
    /// Whether a log covers this stripe's writes in flight.
    pub(super) logged: bool,
    /// Stripe memory held for it (see `Array::stripe_charge`); 0 once finished.
    pub(super) charge: u64,
}

impl ParityWriteOp {
    pub(super) fn new(offset: u64, data: WriteData) -> ParityWriteOp {
        ParityWriteOp {
            offset,
            data,
            stripes: SmallVec::new(),
            remaining: 0,
            error: None,
            unplanned: 0..0,
            groups: Vec::new(),
        }
    }
}

impl StripeWrite {
    fn new(run: ParityRun) -> StripeWrite {
        StripeWrite {
            stripe: run.stripe,
            runs: smallvec![run],
            lo: 0,
            hi: 0,
            strategy: Strategy::DataOnly,
            blocks: StripeBlocks::new(),
            bad: Vec::new(),
            pending: 0,
            failed_read: false,
            writing: false,
            deferred: StripeMemberWrites::new(),
            logged: false,
            charge: 0,
        }
    }
}

impl Array {
    pub(super) fn start_parity_write(
        &mut self,
        rid: RequestId,
        w: &mut ParityWriteOp,
    ) -> Option<Result<(), EngineError>> {
        let runs = self.geometry.parity_runs(w.offset, w.data.len() as u64);
        let mut by_stripe: SmallVec<[StripeWrite; 1]> = SmallVec::new();
        for run in runs {
            match by_stripe.last_mut() {
                Some(sw) if sw.stripe == run.stripe => sw.runs.push(run),
                _ => by_stripe.push(StripeWrite::new(run)),
            }
        }
        if let Some(max) = self.log_max_rows() {
            // Partial parity of one stripe write must fit one log write (md logs 4 KiB rows).
            by_stripe = by_stripe
                .into_iter()
                .flat_map(|sw| {
                    let lo = sw.runs.iter().map(|r| r.chunk_offset).min().expect("runs") / max * max;
                    let hi = sw.runs.iter().map(|r| r.chunk_offset + r.len).max().expect("runs");
                    if hi - lo <= max {
                        return smallvec![sw];
                    }
                    let bounds: Vec<(u64, u64)> =
                        (lo..hi).step_by(max as usize).map(|s| (s, (s + max).min(hi))).collect();
                    stripe_pieces(&sw, &bounds)
                })
                .collect();
        }
        w.stripes = by_stripe;
        w.remaining = w.stripes.len();
        w.unplanned = 0..w.stripes.len();
        // Requests already waiting for stripe memory go first.
        if self.memory_waiters.is_empty() {
            self.admit_stripes(rid, w);
        }
        if !w.unplanned.is_empty() {
            self.memory_waiters.push_back(rid);
        }
        (w.remaining == 0).then_some(Ok(()))
    }

    /// Choose a strategy for one stripe and issue its reads (or, with nothing to read, its
    /// writes). Returns true when the stripe is already finished (failed).
    pub(super) fn plan_stripe_write(&mut self, rid: RequestId, w: &mut ParityWriteOp, part: usize) -> bool {
        if !self.readable() {
            w.error.get_or_insert(EngineError::ArrayFailed);
            return true;
        }
        let n = self.slots.len();
        let sw = &mut w.stripes[part];
        let roles = self.geometry.stripe_roles(sw.stripe);
        let mut lo = sw.runs.iter().map(|r| r.chunk_offset).min().expect("a stripe write has runs");
        let mut hi = sw.runs.iter().map(|r| r.chunk_offset + r.len).max().expect("a stripe write has runs");
        if self.log.is_some() {
            // Partial parity is logged in whole sectors, so the rows are read and parity
            // written whole.
            lo = lo / crate::ppl::ROW_BYTES * crate::ppl::ROW_BYTES;
            hi = hi.div_ceil(crate::ppl::ROW_BYTES) * crate::ppl::ROW_BYTES;
        }
        sw.lo = lo;
        sw.hi = hi;
        let parity_slots: Slots = std::iter::once(roles.p).chain(roles.q).collect();
        let touched: Slots = sw.runs.iter().map(|r| r.slot).collect();
        let fully_covered =
            |slot: usize| sw.runs.iter().any(|r| r.slot == slot && r.chunk_offset == lo && r.len == hi - lo);
        let slots = &self.slots;
        let bad = &sw.bad;
        // Old contents come from in-sync members only, and not from one whose read just failed.
        let readable = |s: usize| slots[s] == SlotState::InSync && !bad.contains(&s);
        let writable = |s: usize| matches!(slots[s], SlotState::InSync | SlotState::Recovering);
        let kept_parity: Slots = parity_slots.iter().copied().filter(|&s| writable(s)).collect();

        let strategy = if kept_parity.is_empty() {
            // No parity left to maintain: plain data writes.
            Strategy::DataOnly
        } else if !bad.is_empty() {
            // A read failed: rebuild every member's rows, so the failed ones can be rewritten.
            Strategy::Degraded
        } else {
            // Read-modify-write needs the old contents of every parity block it writes, so a
            // recovering parity member (or touched data member) rules it out.
            // With a partial parity log every syndrome must be known afresh (partial parity is
            // derived from it), so a parity member that cannot be read rules it out too.
            let logged = self.log.is_some();
            let rmw_possible = !self.resync_pending
                && touched.iter().all(|&s| readable(s))
                && kept_parity.iter().all(|&s| readable(s))
                && (!logged || parity_slots.iter().all(|&s| readable(s)));
            let rcw_needs: Slots = roles.data.iter().copied().filter(|&s| !fully_covered(s)).collect();
            let rcw_possible = rcw_needs.iter().all(|&s| readable(s));
            let rmw_reads = touched.len() + kept_parity.len();
            let rcw_reads = rcw_needs.len();
            let prefer_rmw = match self.parity_write_choice {
                ParityWriteChoice::FewestReads => rmw_reads < rcw_reads,
                ParityWriteChoice::StripeUnits => {
                    let mut units = touched.clone();
                    units.sort_unstable();
                    units.dedup();
                    units.len() <= roles.data.len() / 2
                }
            };
            match (rmw_possible, rcw_possible) {
                (true, true) if prefer_rmw => Strategy::ReadModifyWrite,
                (_, true) => Strategy::ReconstructWrite,
                (true, false) => Strategy::ReadModifyWrite,
                (false, false) => Strategy::Degraded,
            }
        };
        let reads: Slots = match strategy {
            Strategy::DataOnly => Slots::new(),
            Strategy::ReadModifyWrite => touched.iter().copied().chain(kept_parity.iter().copied()).collect(),
            Strategy::ReconstructWrite => roles.data.iter().copied().filter(|&s| !fully_covered(s)).collect(),
            Strategy::Degraded => (0..n).filter(|&s| readable(s)).collect(),
        };
        let chunk = self.geometry.chunk_bytes();
        let base = sw.stripe * chunk;
        if strategy == Strategy::Degraded && n - reads.len() > parity_slots.len() {
            w.error.get_or_insert(match sw.bad.first() {
                Some(&slot) => EngineError::UnrecoverableRead { slot, offset: base + lo, len: hi - lo },
                None => EngineError::ArrayFailed,
            });
            return true;
        }
        sw.strategy = strategy;
        sw.blocks = smallvec![None; n];
        sw.failed_read = false;
        sw.pending = reads.len();
        if reads.is_empty() {
            return self.write_stripe(rid, w, part, &roles);
        }
        for slot in reads {
            self.emit(rid, IoTag { part, slot }, base + lo, MemberOp::Read { len: hi - lo });
        }
        false
    }

    pub(super) fn parity_write_io_done(
        &mut self,
        rid: RequestId,
        w: &mut ParityWriteOp,
        tag: IoTag,
        outcome: Outcome,
    ) -> bool {
        if tag.part >= GROUP_PART {
            // A merged write: every stripe it covers has one write fewer to wait for (its
            // outcome does not matter to a stripe that is writing: a failure made the member
            // faulty).
            let mut done = false;
            for part in w.groups[tag.part - GROUP_PART].clone() {
                done = self.parity_write_io_done(rid, w, IoTag { part, slot: tag.slot }, Outcome::Done);
            }
            return done;
        }
        let part = tag.part;
        let sw = &mut w.stripes[part];
        sw.pending -= 1;
        let mut stripe_done = false;
        if sw.writing {
            if sw.pending == 0 {
                stripe_done = true;
                if std::mem::take(&mut sw.logged) {
                    self.log_stripe_done(rid, part);
                }
                // Failed writes made members faulty; the data is still there if the array is
                // within its redundancy.
                if !self.readable() {
                    w.error.get_or_insert(EngineError::ArrayFailed);
                }
            }
        } else {
            match outcome {
                Outcome::Data(data) => sw.blocks[tag.slot] = Some(data.into()),
                Outcome::ReadError => {
                    sw.bad.push(tag.slot);
                    sw.failed_read = true;
                }
                Outcome::Done | Outcome::Lost => sw.failed_read = true,
            }
            if sw.pending == 0 {
                if !sw.bad.is_empty() && row_pieces(sw.lo, sw.hi - sw.lo, self.geometry.row_bytes()).len() > 1 {
                    self.split_stripe_write(rid, w, part);
                    return w.remaining == 0;
                } else if !sw.bad.is_empty() && !self.parity_trusted_for_rebuilds() {
                    // The unreadable row is not rebuilt from parity owed a resync (see
                    // `Array::set_rebuild_from_unchecked_parity`): the write fails, and its
                    // caller, who has another copy, takes it from there.
                    let chunk = self.geometry.chunk_bytes();
                    let slot = sw.bad[0];
                    let offset = sw.stripe * chunk + sw.lo;
                    w.error.get_or_insert(EngineError::UnrecoverableRead { slot, offset, len: sw.hi - sw.lo });
                    stripe_done = true;
                } else if sw.failed_read {
                    // A member failed under us (or a read failed): plan again without it.
                    stripe_done = self.plan_stripe_write(rid, w, part);
                } else {
                    let roles = self.geometry.stripe_roles(w.stripes[part].stripe);
                    stripe_done = self.write_stripe(rid, w, part, &roles);
                }
            }
        }
        if stripe_done {
            self.stripe_finished(w, part);
        }
        w.remaining == 0
    }

    /// A read error hit a stripe write spanning several rows: replace it by one stripe
    /// write per row (see `split_read_part`) and plan those afresh. The old one is finished.
    fn split_stripe_write(&mut self, rid: RequestId, w: &mut ParityWriteOp, part: usize) {
        let sw = &w.stripes[part];
        let bounds: Vec<(u64, u64)> = row_pieces(sw.lo, sw.hi - sw.lo, self.geometry.row_bytes())
            .into_iter()
            .map(|(delta, len)| (sw.lo + delta, sw.lo + delta + len))
            .collect();
        let mut pieces = stripe_pieces(sw, &bounds);
        // The pieces take over the stripe's memory: they span its rows, so no more.
        self.stripe_memory -= std::mem::take(&mut w.stripes[part].charge);
        for piece in &mut pieces {
            piece.charge = self.stripe_charge(piece);
            self.stripe_memory += piece.charge;
        }
        let first = w.stripes.len();
        w.remaining += pieces.len();
        w.stripes.extend(pieces);
        for piece in first..w.stripes.len() {
            if self.plan_stripe_write(rid, w, piece) {
                self.stripe_finished(w, piece);
            }
        }
        self.stripe_finished(w, part);
    }
}

/// The parts of a stripe write inside each member row range of `bounds` (ranges holding none
/// of it, between the runs of a write that wraps into the next chunk, give no piece).
fn stripe_pieces(sw: &StripeWrite, bounds: &[(u64, u64)]) -> SmallVec<[StripeWrite; 1]> {
    let mut pieces = SmallVec::new();
    for &(row_start, row_end) in bounds {
        let runs: SmallVec<[ParityRun; 1]> = sw
            .runs
            .iter()
            .filter_map(|r| {
                let start = r.chunk_offset.max(row_start);
                let end = (r.chunk_offset + r.len).min(row_end);
                (start < end).then(|| ParityRun {
                    logical: r.logical + (start - r.chunk_offset),
                    len: end - start,
                    chunk_offset: start,
                    ..r.clone()
                })
            })
            .collect();
        if let Some(first) = runs.first() {
            let mut piece = StripeWrite::new(first.clone());
            piece.runs = runs;
            pieces.push(piece);
        }
    }
    pieces
}
