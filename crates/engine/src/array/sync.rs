//! Consistency checks and repairs (`Request::Sync`, md's `check` / `repair` / resync): mirrors
//! compared, parity recomputed, mismatches counted per 4 KiB row, and what disagrees rewritten.

use super::emit::{IoTag, Outcome};
use super::parity::{compute_parity_into, reconstruct};
use super::rows::row_pieces;
use super::{Array, RequestId};
use crate::error::EngineError;
use crate::geometry::{Redundancy, SECTOR_BYTES};
use crate::member_io::MemberOp;
use crate::slot::SlotState;
use bytes::Bytes;

#[derive(Debug)]
pub(super) struct SyncOp {
    offset: u64,
    len: u64,
    repair: bool,
    units: Vec<SyncUnit>,
    remaining: usize,
    pub(super) mismatch_sectors: u64,
    pub(super) error: Option<EngineError>,
    /// Which slots were in sync when the check started: losing one of them fails the check,
    /// losing a recovering one does not.
    in_sync_at_start: Vec<bool>,
}

impl SyncOp {
    pub(super) fn new(offset: u64, len: u64, repair: bool) -> SyncOp {
        SyncOp {
            offset,
            len,
            repair,
            units: Vec::new(),
            remaining: 0,
            mismatch_sectors: 0,
            error: None,
            in_sync_at_start: Vec::new(),
        }
    }
}

/// One stripe (parity layouts) or one run with copies (mirrored layouts) of a check.
#[derive(Debug)]
struct SyncUnit {
    /// The stripe, for parity layouts.
    stripe: Option<u64>,
    /// `(slot, member offset)` of every member block compared: all members of the stripe, or
    /// every copy of the run.
    copies: Vec<(usize, u64)>,
    len: u64,
    /// Indexed by slot.
    /// The member reads' own buffers, not copies.
    blocks: Vec<Option<Bytes>>,
    /// In-sync members whose read failed: rebuilt and written back.
    bad: Vec<usize>,
    pending: usize,
    writing: bool,
}

impl SyncUnit {
    fn new(stripe: Option<u64>, copies: Vec<(usize, u64)>, len: u64, slots: usize) -> SyncUnit {
        SyncUnit { stripe, copies, len, blocks: vec![None; slots], bad: Vec::new(), pending: 0, writing: false }
    }
}

impl Array {
    pub(super) fn start_sync(&mut self, rid: RequestId, s: &mut SyncOp) -> Option<Result<(), EngineError>> {
        // A recovering member is simply left out of the comparison. On parity levels a missing
        // or faulty one takes away what parity could be checked against, except on raid6 short
        // of one member: the member is rebuilt from P and Q is checked against it (or, where it
        // is P or Q, the other syndrome against the data). Mirrors compare the copies that are
        // there (md's raid1/raid10 resync does the same), and a chunk left with one copy has
        // nothing to disagree with.
        let lost = self.slots.iter().filter(|st| st.is_vacant()).count();
        if self.geometry.is_parity() && lost > 0 && lost + 1 > self.geometry.max_degraded() {
            return Some(Err(EngineError::DegradedCheck));
        }
        let n = self.slots.len();
        s.in_sync_at_start = (0..n).map(|slot| self.in_sync(slot)).collect();
        match self.geometry.redundancy() {
            // Nothing to compare.
            Redundancy::None => return Some(Ok(())),
            Redundancy::Parity { .. } => {
                let width = self.geometry.stripe_data_bytes().expect("parity geometry");
                let chunk = self.geometry.chunk_bytes();
                let first = s.offset / width;
                let last = (s.offset + s.len).div_ceil(width);
                for stripe in first..last {
                    let copies = (0..n).map(|slot| (slot, stripe * chunk)).collect();
                    s.units.push(SyncUnit::new(Some(stripe), copies, chunk, n));
                }
            }
            Redundancy::Copies => {
                // Whole rows, so a copy whose read fails is rewritten in whole rows of the
                // reference copy, and repairs too.
                let (offset, len) = self.mirror_rows(s.offset, s.len, self.size_bytes());
                // Copies it rewrites take the reference copy's bytes, which need not be the
                // ones read ahead.
                self.readahead_forget(offset, len);
                for run in self.geometry.runs(offset, len) {
                    s.units.push(SyncUnit::new(None, run.copies.into_vec(), run.len, n));
                }
            }
        }
        s.remaining = s.units.len();
        for part in 0..s.units.len() {
            if self.start_sync_unit(rid, s, part) {
                s.remaining -= 1;
            }
        }
        (s.remaining == 0).then_some(Ok(()))
    }

    /// Read every in-sync member block of a check unit. Returns true when the unit is finished.
    fn start_sync_unit(&mut self, rid: RequestId, s: &mut SyncOp, part: usize) -> bool {
        let unit = &mut s.units[part];
        let count = |state: SlotState| unit.copies.iter().filter(|&&(slot, _)| self.slots[slot] == state).count();
        if unit.stripe.is_none() && count(SlotState::InSync) < 2 && !(s.repair && count(SlotState::Recovering) > 0) {
            // A mirror chunk with a single good copy and nothing to fill: nothing to compare.
            return true;
        }
        for &(slot, off) in &unit.copies {
            if self.in_sync(slot) {
                unit.pending += 1;
                self.emit(rid, IoTag { part, slot }, off, MemberOp::Read { len: unit.len });
            }
        }
        unit.pending == 0 && self.sync_unit_read(rid, s, part)
    }

    /// A read error hit a check unit spanning several 4 KiB rows: replace it by one unit per
    /// row (see `split_read_part`) and check those afresh. The old one is finished.
    fn split_sync_unit(&mut self, rid: RequestId, s: &mut SyncOp, part: usize) {
        let unit = &s.units[part];
        let n = self.slots.len();
        let pieces: Vec<SyncUnit> = row_pieces(unit.copies[0].1, unit.len, self.geometry.row_bytes())
            .into_iter()
            .map(|(delta, len)| {
                let copies = unit.copies.iter().map(|&(slot, off)| (slot, off + delta)).collect();
                SyncUnit::new(unit.stripe, copies, len, n)
            })
            .collect();
        let first = s.units.len();
        s.remaining += pieces.len();
        s.units.extend(pieces);
        for piece in first..s.units.len() {
            if self.start_sync_unit(rid, s, piece) {
                s.remaining -= 1;
            }
        }
        s.remaining -= 1;
    }

    pub(super) fn sync_io_done(&mut self, rid: RequestId, s: &mut SyncOp, tag: IoTag, outcome: Outcome) -> bool {
        let unit = &mut s.units[tag.part];
        unit.pending -= 1;
        match outcome {
            Outcome::Data(data) if !unit.writing => unit.blocks[tag.slot] = Some(data),
            Outcome::ReadError => unit.bad.push(tag.slot),
            // A member that was in sync when the check began failed, or was failed, under it:
            // the array is degraded and the check cannot vouch for anything.
            Outcome::Lost if s.in_sync_at_start[tag.slot] => {
                s.error.get_or_insert(EngineError::DegradedCheck);
            }
            _ => {}
        }
        if unit.pending > 0 {
            return false;
        }
        if !unit.writing
            && s.error.is_none()
            && !unit.bad.is_empty()
            && row_pieces(unit.copies[0].1, unit.len, self.geometry.row_bytes()).len() > 1
        {
            self.split_sync_unit(rid, s, tag.part);
            return s.remaining == 0;
        }
        if unit.writing || s.error.is_some() || self.sync_unit_read(rid, s, tag.part) {
            s.remaining -= 1;
        }
        s.remaining == 0
    }

    /// Every read of a check unit is in: compare, count, and issue corrections and repairs.
    /// Returns true when the unit is finished (nothing to write).
    fn sync_unit_read(&mut self, rid: RequestId, s: &mut SyncOp, part: usize) -> bool {
        let row_bytes = self.geometry.row_bytes();
        let unit = &mut s.units[part];
        let len = unit.len as usize;
        // Rows to write: (slot, member offset, bytes, whether it corrects a failed read).
        let mut writes: Vec<(usize, u64, Bytes, bool)> = Vec::new();
        let was_read: Vec<bool> = unit.blocks.iter().map(Option::is_some).collect();
        let recovering: Vec<usize> =
            unit.copies.iter().map(|c| c.0).filter(|&slot| self.slots[slot] == SlotState::Recovering).collect();
        match unit.stripe {
            Some(stripe) => {
                if !unit.bad.is_empty() && !self.parity_trusted_for_rebuilds() {
                    // Parity is not trusted to rebuild the row whose read failed: left alone,
                    // for the caller to rebuild from another copy (see
                    // `Array::set_rebuild_from_unchecked_parity`).
                    unit.blocks.iter_mut().for_each(|b| *b = None);
                    return true;
                }
                let roles = self.geometry.stripe_roles(stripe);
                let missing: Vec<usize> = (0..was_read.len()).filter(|&slot| !was_read[slot]).collect();
                if missing.len() > 1 + usize::from(roles.q.is_some()) {
                    s.error.get_or_insert(match unit.bad.first() {
                        Some(&slot) => EngineError::UnrecoverableRead { slot, offset: unit.copies[0].1, len: unit.len },
                        None => EngineError::ArrayFailed,
                    });
                    return true;
                }
                // Members not read (recovering, or whose read failed) are rebuilt first: for
                // raid6 with one of them a data member, Q can still be checked.
                reconstruct(&roles, &mut unit.blocks, &missing, len);
                let data: Vec<&[u8]> =
                    roles.data.iter().map(|&d| unit.blocks[d].as_deref().expect("rebuilt")).collect();
                // Recomputed parity in blocks of the array's pool: a check of a consistent
                // stripe, the usual case, gives them back and allocates nothing.
                let mut p = self.parity_blocks.take(len);
                let mut q = roles.q.map(|_| self.parity_blocks.take(len));
                let zeros = if roles.syndrome_disks > data.len() { self.parity_blocks.zeros(len) } else { &[] };
                compute_parity_into(&roles, &data, zeros, &mut p, q.as_deref_mut());
                let mut wanted = vec![(roles.p, p)];
                if let (Some(qs), Some(q)) = (roles.q, q) {
                    wanted.push((qs, q));
                }
                // Rows that disagree, counted one by one as md's mismatch_cnt; rewritten in runs
                // of rows that follow one another, one write per run and parity member.
                let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
                for row in (0..unit.len).step_by(row_bytes as usize) {
                    let r = row as usize..(row + row_bytes).min(unit.len) as usize;
                    let bad = wanted
                        .iter()
                        .filter(|(slot, _)| was_read[*slot])
                        .any(|(slot, want)| want[r.clone()] != unit.blocks[*slot].as_ref().expect("read")[r.clone()]);
                    if bad {
                        s.mismatch_sectors += (r.end - r.start) as u64 / SECTOR_BYTES;
                        match runs.last_mut() {
                            Some(run) if run.end == r.start => run.end = r.end,
                            _ => runs.push(r),
                        }
                    }
                }
                let rewrites =
                    (s.repair && !runs.is_empty()) || !unit.bad.is_empty() || (s.repair && !recovering.is_empty());
                // Shared by the rewrites that take slices of it (no copies); back to the pool
                // when nothing is rewritten.
                let targets: Vec<(usize, Bytes)> = if rewrites {
                    wanted.into_iter().map(|(slot, b)| (slot, Bytes::from(b))).collect()
                } else {
                    for (_, block) in wanted {
                        self.parity_blocks.put(block);
                    }
                    Vec::new()
                };
                // The unit may be one row cut out of its stripe after a read error: its own
                // offset, not the stripe's start, is where its rows are.
                let base = unit.copies[0].1;
                if s.repair {
                    for run in &runs {
                        for (slot, want) in targets.iter().filter(|(slot, _)| was_read[*slot]) {
                            writes.push((*slot, base + run.start as u64, want.slice(run.clone()), false));
                        }
                    }
                }
                // The right contents of a member: recomputed parity, or its (rebuilt) data.
                let correct = |slot: usize| match targets.iter().find(|(t, _)| *t == slot) {
                    Some((_, want)) => want.clone(),
                    None => unit.blocks[slot].clone().expect("rebuilt"),
                };
                for &slot in &unit.bad {
                    writes.push((slot, base, correct(slot), true));
                }
                if s.repair {
                    for &slot in &recovering {
                        writes.push((slot, base, correct(slot), false));
                    }
                }
            }
            None => {
                // md compares every copy against the first one read.
                let Some(&(first, _)) = unit.copies.iter().find(|c| was_read[c.0]) else {
                    s.error.get_or_insert(match unit.bad.first() {
                        Some(&slot) => {
                            let offset = unit.copies.iter().find(|c| c.0 == slot).expect("a copy").1;
                            EngineError::UnrecoverableRead { slot, offset, len: unit.len }
                        }
                        None => EngineError::ArrayFailed,
                    });
                    return true;
                };
                let reference = unit.blocks[first].take().expect("read");
                let rows: Vec<std::ops::Range<usize>> = (0..unit.len)
                    .step_by(row_bytes as usize)
                    .map(|row| row as usize..(row + row_bytes).min(unit.len) as usize)
                    .collect();
                let mut differs = vec![false; rows.len()];
                for &(slot, off) in &unit.copies {
                    let Some(other) = unit.blocks[slot].as_ref() else { continue };
                    // Rows that differ one after another are rewritten as one write, a slice
                    // of the reference copy (a copy that disagrees everywhere is rewritten in
                    // writes as large as the unit, not row by row).
                    let mut run: Option<usize> = None;
                    for (i, r) in rows.iter().enumerate() {
                        let bad = other[r.clone()] != reference[r.clone()];
                        differs[i] |= bad;
                        match (bad, run) {
                            (true, None) => run = Some(r.start),
                            (false, Some(start)) => {
                                if s.repair {
                                    writes.push((slot, off + start as u64, reference.slice(start..r.start), false));
                                }
                                run = None;
                            }
                            _ => {}
                        }
                    }
                    if let (Some(start), true) = (run, s.repair) {
                        writes.push((slot, off + start as u64, reference.slice(start..), false));
                    }
                }
                for (r, _) in rows.iter().zip(&differs).filter(|(_, d)| **d) {
                    s.mismatch_sectors += (r.end - r.start) as u64 / SECTOR_BYTES;
                }
                for &(slot, off) in &unit.copies {
                    let fix = unit.bad.contains(&slot);
                    if fix || (s.repair && recovering.contains(&slot)) {
                        writes.push((slot, off, reference.clone(), fix));
                    }
                }
            }
        }
        unit.blocks.iter_mut().for_each(|b| *b = None);
        unit.writing = true;
        for (slot, off, data, correction) in writes {
            if !self.writable(slot) || (correction && !self.in_sync(slot)) {
                continue;
            }
            unit.pending += 1;
            let tag = IoTag { part, slot };
            if correction {
                self.emit_correction(rid, tag, off, data.into());
            } else {
                self.emit(rid, tag, off, MemberOp::Write { data: data.into() });
            }
        }
        unit.pending == 0
    }
}
