//! Member rows: the rows (4 KiB, or the layout's `row_bytes`) that read errors, checks and recovery work in, and the same rows of
//! every member of a stripe, read to rebuild some of them from the others.

use bytes::Bytes;
use uraid_layout::StripeRoles;

use super::emit::{IoTag, Outcome};
use super::parity::reconstruct;
use super::{Array, RequestId};
use crate::error::EngineError;
use crate::member_io::MemberOp;

/// The same member rows (`[offset, offset+len)`) of every member of one stripe, read for a
/// rebuild.
#[derive(Debug)]
pub(super) struct Rows {
    pub(super) offset: u64,
    pub(super) len: u64,
    /// Indexed by slot; `None` where not read (yet). The reads' own buffers, not copies.
    pub(super) blocks: Vec<Option<Bytes>>,
    /// In-sync members whose read failed: rebuilt and written back.
    pub(super) bad: Vec<usize>,
    /// I/Os issued and not completed.
    pub(super) pending: usize,
}

impl Rows {
    pub(super) fn new(offset: u64, len: u64, slots: usize, bad: Vec<usize>) -> Rows {
        Rows { offset, len, blocks: vec![None; slots], bad, pending: 0 }
    }

    pub(super) fn absorb(&mut self, slot: usize, outcome: Outcome) {
        self.pending -= 1;
        match outcome {
            Outcome::Data(data) => self.blocks[slot] = Some(data),
            Outcome::ReadError => self.bad.push(slot),
            Outcome::Done | Outcome::Lost => {}
        }
    }

    /// Rebuild every block not read from the others; an error when more are missing than the
    /// level can rebuild.
    pub(super) fn rebuild(&mut self, roles: &StripeRoles) -> Result<(), EngineError> {
        let missing: Vec<usize> = (0..self.blocks.len()).filter(|&s| self.blocks[s].is_none()).collect();
        if missing.len() > 1 + usize::from(roles.q.is_some()) {
            return Err(match self.bad.first() {
                Some(&slot) => EngineError::UnrecoverableRead { slot, offset: self.offset, len: self.len },
                None => EngineError::ArrayFailed,
            });
        }
        reconstruct(roles, &mut self.blocks, &missing, self.len as usize);
        Ok(())
    }
}

impl Array {
    /// On raid1/raid10, `[offset, offset+len)` widened to whole rows (the layout's), the end clipped to
    /// `limit` (the array's end, or the members' for member ranges); other levels keep the range.
    /// A mirror corrects a read error by rewriting whole rows (see
    /// [`CopyUnit::wide`](super::copy_unit::CopyUnit::wide)), so the requests that may do so hold
    /// whole rows, and checks and recoveries work on whole rows.
    /// Logical and member rows coincide: raid1 copies sit at their logical offset, and raid10
    /// chunks are whole rows that keep their offset inside the chunk on every copy.
    pub(super) fn mirror_rows(&self, offset: u64, len: u64, limit: u64) -> (u64, u64) {
        if self.geometry.is_mirrored() {
            widen(offset, len, self.geometry.row_bytes(), limit)
        } else {
            (offset, len)
        }
    }

    /// Read `rows` from every in-sync member not known bad, except `skip`.
    pub(super) fn read_rows(&mut self, rid: RequestId, part: usize, rows: &mut Rows, skip: Option<usize>) {
        for slot in 0..self.slots.len() {
            if Some(slot) != skip && self.in_sync(slot) && !rows.bad.contains(&slot) {
                rows.pending += 1;
                self.emit(rid, IoTag { part, slot }, rows.offset, MemberOp::Read { len: rows.len });
            }
        }
    }

    /// Write the rebuilt rows back to the members whose read failed; how many writes went out.
    pub(super) fn rewrite_bad_rows(&mut self, rid: RequestId, part: usize, rows: &Rows) -> usize {
        let mut issued = 0;
        for &slot in &rows.bad {
            if self.in_sync(slot) {
                let data = rows.blocks[slot].clone().expect("rebuilt rows");
                self.emit_correction(rid, IoTag { part, slot }, rows.offset, data.into());
                issued += 1;
            }
        }
        issued
    }
}

/// Split member bytes `[offset, offset+len)` at boundaries of `row` bytes (the layout's row):
/// `(offset into the range, length)` per row.
pub(super) fn row_pieces(offset: u64, len: u64, row: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut pos = offset;
    let end = offset + len;
    while pos < end {
        let piece = (row - pos % row).min(end - pos);
        out.push((pos - offset, piece));
        pos += piece;
    }
    out
}

/// `[offset, offset+len)` widened to whole `unit`s of bytes (rows, sectors), the end clipped to
/// `limit`: `(start, length)`. An empty range stays empty.
pub(super) fn widen(offset: u64, len: u64, unit: u64, limit: u64) -> (u64, u64) {
    if len == 0 {
        return (offset, 0);
    }
    let start = offset / unit * unit;
    let end = ((offset + len).div_ceil(unit) * unit).min(limit);
    (start, end - start)
}
