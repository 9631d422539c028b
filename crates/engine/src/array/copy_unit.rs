//! One run of bytes with copies on several members (raid1/raid10, and the single copy of
//! linear/raid0): read from an in-sync copy, tried in turn; the bytes go to the reader, to the
//! copies being recovered, and back to every copy whose read failed.

use super::assembly::ReadAssembly;
use super::emit::{IoTag, Outcome};
use super::rows::{row_pieces, widen};
use super::{Array, RequestId};
use crate::error::EngineError;
use crate::geometry::{Copies, SECTOR_BYTES};
use crate::member_io::MemberOp;

/// One run of bytes with copies on several members (raid1/raid10, or the single copy of
/// linear/raid0): read from the first in-sync copy that answers, then written to `targets` and
/// back to every copy whose read failed.
#[derive(Debug)]
pub(super) struct CopyUnit {
    pub(super) len: u64,
    /// Every copy as `(slot, member offset)`, in md's copy order.
    pub(super) copies: Copies,
    /// The index in `copies` of the copy to read first: the one read balancing chose (0, md's
    /// first copy, where nothing was chosen: recovery).
    pub(super) first: usize,
    /// Copies tried so far, in order from `first`.
    tried: usize,
    /// Copies whose read failed: they get the bytes back once a good copy was read.
    bad: Vec<(usize, u64)>,
    /// Copies on recovering members to fill (recovery only).
    pub(super) targets: Vec<(usize, u64)>,
    /// Once a copy's read failed, what is read from the others, as `(bytes before the unit,
    /// length)`: the unit's whole 4 KiB row (whole sectors if no copy can read the row). The
    /// failed copies get all of it back, one copy's version of every sector: while copies
    /// disagree (after a crash, before the resync has passed), rewriting just the unit's bytes
    /// would leave the sectors at its edges part one version, part another.
    wide: Option<(u64, u64)>,
    pub(super) writing: bool,
    /// Writes issued and not completed.
    pending: usize,
}

impl CopyUnit {
    pub(super) fn new(copies: Copies, len: u64, targets: Vec<(usize, u64)>) -> CopyUnit {
        CopyUnit { len, copies, first: 0, tried: 0, bad: Vec::new(), targets, wide: None, writing: false, pending: 0 }
    }

    /// The unit widened to whole `unit`s of bytes, not past member byte `limit`, as `(bytes
    /// before the unit, length)`. The same for every copy (see `row_pieces`).
    fn widened(&self, unit: u64, limit: u64) -> (u64, u64) {
        let offset = self.copies[0].1;
        let (start, len) = widen(offset, self.len, unit, limit);
        (offset - start, len)
    }

    /// The unit's 4 KiB member rows, as `(offset into the unit, length)`. Every copy sits at the
    /// same offset modulo the row size (raid1: the same offset; raid10: the same offset in a
    /// chunk of whole rows), so the first copy's rows are every copy's rows.
    pub(super) fn row_pieces(&self, row: u64) -> Vec<(u64, u64)> {
        row_pieces(self.copies[0].1, self.len, row)
    }

    /// A fresh unit for the bytes `[delta, delta+len)` of this one, read first from the same
    /// copy.
    pub(super) fn piece(&self, delta: u64, len: u64) -> CopyUnit {
        fn shift<C: FromIterator<(usize, u64)>>(v: &[(usize, u64)], delta: u64) -> C {
            v.iter().map(|&(slot, off)| (slot, off + delta)).collect()
        }
        let mut piece = CopyUnit::new(shift(&self.copies, delta), len, shift(&self.targets, delta));
        piece.first = self.first;
        piece
    }
}

impl Array {
    /// Read a copy unit from its next in-sync copy, starting with the one read balancing chose
    /// ([`CopyUnit::first`]), then on in md's copy order (over [`CopyUnit::wide`] once a copy
    /// failed). `Some` when the unit is finished: no copy is left to read (an error).
    pub(super) fn issue_copy_read(
        &mut self,
        rid: RequestId,
        part: usize,
        u: &mut CopyUnit,
    ) -> Option<Result<(), EngineError>> {
        loop {
            while u.tried < u.copies.len() {
                let (slot, off) = u.copies[(u.first + u.tried) % u.copies.len()];
                u.tried += 1;
                if self.in_sync(slot) && !u.bad.iter().any(|b| b.0 == slot) {
                    let (lead, len) = u.wide.unwrap_or((0, u.len));
                    self.emit(rid, IoTag { part, slot }, off - lead, MemberOp::Read { len });
                    return None;
                }
            }
            // No copy could read the whole row. Whole sectors are enough not to splice, and the
            // copies that failed after the first may have failed outside the unit's sectors: try
            // them again over those sectors alone (the first failed inside them).
            let sectors = u.widened(SECTOR_BYTES, self.geometry.member_data_bytes());
            if u.wide.is_none() || u.wide == Some(sectors) || u.bad.len() < 2 {
                break;
            }
            u.wide = Some(sectors);
            u.bad.truncate(1);
            u.tried = 0;
        }
        Some(Err(match u.bad.first() {
            Some(&(slot, offset)) => EngineError::UnrecoverableRead { slot, offset, len: u.len },
            None => EngineError::ArrayFailed,
        }))
    }

    /// Advance a copy unit after one of its I/Os completed; the data read goes to `sink` too
    /// (the read's assembly, at the unit's place in it). `Some` once the unit is finished.
    pub(super) fn copy_unit_step(
        &mut self,
        rid: RequestId,
        part: usize,
        u: &mut CopyUnit,
        slot: usize,
        outcome: Outcome,
        sink: Option<(&mut ReadAssembly, usize)>,
    ) -> Option<Result<(), EngineError>> {
        if u.writing {
            u.pending -= 1;
            return (u.pending == 0).then_some(Ok(()));
        }
        match outcome {
            Outcome::Data(data) => {
                // After a read error `data` is wider than the unit: the unit's own bytes go to
                // the reader and the targets, all of it to the copies whose read failed.
                let (lead, _) = u.wide.unwrap_or((0, u.len));
                // The common case hands the member's bytes on as they are: slicing or cloning a
                // `Bytes` made from a `Vec` allocates its shared header, so do neither when the
                // read is exactly the unit and nobody else needs it.
                let whole = lead == 0 && data.len() as u64 == u.len;
                let own = if whole && u.targets.is_empty() && u.bad.is_empty() {
                    if let Some((assembly, at)) = sink {
                        assembly.put(at, data);
                    }
                    u.writing = true;
                    return (u.pending == 0).then_some(Ok(()));
                } else if whole {
                    data.clone()
                } else {
                    data.slice(lead as usize..(lead + u.len) as usize)
                };
                if let Some((assembly, at)) = sink {
                    assembly.put(at, own.clone());
                }
                u.writing = true;
                for &(target, off) in &u.targets {
                    if self.writable(target) {
                        u.pending += 1;
                        self.emit(rid, IoTag { part, slot: target }, off, MemberOp::Write { data: own.clone().into() });
                    }
                }
                for &(bad, off) in &u.bad {
                    if self.in_sync(bad) {
                        u.pending += 1;
                        self.emit_correction(rid, IoTag { part, slot: bad }, off - lead, data.clone().into());
                    }
                }
                (u.pending == 0).then_some(Ok(()))
            }
            Outcome::ReadError => {
                let copy = *u.copies.iter().find(|c| c.0 == slot).expect("the failed read was one of the copies");
                u.bad.push(copy);
                if u.wide.is_none() {
                    u.wide = Some(u.widened(self.geometry.row_bytes(), self.geometry.member_data_bytes()));
                }
                self.issue_copy_read(rid, part, u)
            }
            Outcome::Done | Outcome::Lost => self.issue_copy_read(rid, part, u),
        }
    }
}
