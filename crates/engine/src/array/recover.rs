//! Recovery (`Request::Recover`): the bytes of recovering members rebuilt from the in-sync ones,
//! copied on mirrors and reconstructed from parity on raid4/5/6, one member range at a time.

use super::copy_unit::CopyUnit;
use super::emit::{IoTag, Outcome};
use super::rows::{row_pieces, Rows};
use super::{Array, RequestId};
use crate::error::EngineError;
use crate::geometry::Redundancy;
use crate::member_io::MemberOp;
use crate::slot::SlotState;

#[derive(Debug)]
pub(super) struct RecoverOp {
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) units: Vec<RecoverUnit>,
    pub(super) remaining: usize,
    pub(super) error: Option<EngineError>,
}

impl RecoverOp {
    /// Account for a unit that finished (`Some`), with its error if any.
    fn settle(&mut self, step: Option<Result<(), EngineError>>) {
        if let Some(result) = step {
            if let Err(e) = result {
                self.error.get_or_insert(e);
            }
            self.remaining -= 1;
        }
    }
}

#[derive(Debug)]
pub(super) enum RecoverUnit {
    /// Layouts with copies: one run, read from an in-sync copy, written to the recovering copies.
    Copies(CopyUnit),
    /// Parity layouts: the same rows of every member of a stripe, rebuilt for `targets`.
    Stripe { stripe: u64, rows: Rows, targets: Vec<usize>, writing: bool },
}

impl Array {
    pub(super) fn start_recover(&mut self, rid: RequestId, r: &mut RecoverOp) -> Option<Result<(), EngineError>> {
        let targets: Vec<usize> = (0..self.slots.len()).filter(|&s| self.slots[s] == SlotState::Recovering).collect();
        if targets.is_empty() {
            // Whatever was recovering finished or failed since the request was submitted.
            return Some(Ok(()));
        }
        let n = self.slots.len();
        let end = r.offset + r.len;
        // Mirrors rebuild whole rows, so a copy whose read fails is rewritten in whole rows.
        let (rows_offset, rows_len) = self.mirror_rows(r.offset, r.len, self.geometry.member_data_bytes());
        match self.geometry.redundancy() {
            Redundancy::None => {
                return Some(Err(EngineError::NoRedundancy { level: self.geometry.name().to_string() }));
            }
            Redundancy::Parity { .. } => {
                let chunk = self.geometry.chunk_bytes();
                let mut pos = r.offset;
                while pos < end {
                    let stripe = pos / chunk;
                    let rows_end = ((stripe + 1) * chunk).min(end);
                    let rows = Rows::new(pos, rows_end - pos, n, Vec::new());
                    r.units.push(RecoverUnit::Stripe { stripe, rows, targets: targets.clone(), writing: false });
                    pos = rows_end;
                }
            }
            Redundancy::Copies => {
                // For each run a recovering member holds, its copies; a run that another
                // recovering member also holds shares one read. Member bytes past the last
                // whole array chunk hold nothing (md's recovery skips them too).
                for &target in &targets {
                    for (at, run) in self.geometry.member_runs(target, rows_offset, rows_len) {
                        let same = r.units.iter_mut().find_map(|u| match u {
                            RecoverUnit::Copies(c) if c.copies == run.copies && c.len == run.len => Some(c),
                            _ => None,
                        });
                        match same {
                            Some(unit) => unit.targets.push((target, at)),
                            None => r.units.push(RecoverUnit::Copies(CopyUnit::new(
                                run.copies,
                                run.len,
                                vec![(target, at)],
                            ))),
                        }
                    }
                }
            }
        }
        r.remaining = r.units.len();
        for part in 0..r.units.len() {
            let step = self.start_recover_unit(rid, r, part);
            r.settle(step);
        }
        (r.remaining == 0).then_some(Ok(()))
    }

    /// Issue the reads of one recovery unit. `Some` when the unit is finished.
    fn start_recover_unit(
        &mut self,
        rid: RequestId,
        r: &mut RecoverOp,
        part: usize,
    ) -> Option<Result<(), EngineError>> {
        match &mut r.units[part] {
            RecoverUnit::Copies(unit) => self.issue_copy_read(rid, part, unit),
            RecoverUnit::Stripe { rows, .. } => {
                self.read_rows(rid, part, rows, None);
                if rows.pending == 0 {
                    self.recover_stripe_read(rid, r, part)
                } else {
                    None
                }
            }
        }
    }

    /// A read error hit a recovery unit spanning several 4 KiB rows: replace it by one unit per
    /// row (see `split_read_part`) and start those afresh. The old one is finished.
    fn split_recover_unit(&mut self, rid: RequestId, r: &mut RecoverOp, part: usize) {
        let n = self.slots.len();
        let pieces: Vec<RecoverUnit> = match &r.units[part] {
            RecoverUnit::Copies(unit) => unit
                .row_pieces(self.geometry.row_bytes())
                .into_iter()
                .map(|(delta, len)| RecoverUnit::Copies(unit.piece(delta, len)))
                .collect(),
            RecoverUnit::Stripe { stripe, rows, targets, .. } => {
                row_pieces(rows.offset, rows.len, self.geometry.row_bytes())
                    .into_iter()
                    .map(|(delta, len)| RecoverUnit::Stripe {
                        stripe: *stripe,
                        rows: Rows::new(rows.offset + delta, len, n, Vec::new()),
                        targets: targets.clone(),
                        writing: false,
                    })
                    .collect()
            }
        };
        let first = r.units.len();
        r.remaining += pieces.len();
        r.units.extend(pieces);
        for piece in first..r.units.len() {
            let step = self.start_recover_unit(rid, r, piece);
            r.settle(step);
        }
        r.settle(Some(Ok(())));
    }

    /// Every read of a stripe's rows is in: rebuild the recovering members' rows (and those
    /// whose read failed) and write them. `Some` when the unit is finished.
    fn recover_stripe_read(
        &mut self,
        rid: RequestId,
        r: &mut RecoverOp,
        part: usize,
    ) -> Option<Result<(), EngineError>> {
        let RecoverUnit::Stripe { stripe, rows, targets, writing } = &mut r.units[part] else {
            unreachable!("a stripe unit")
        };
        let roles = self.geometry.stripe_roles(*stripe);
        if let Err(e) = rows.rebuild(&roles) {
            return Some(Err(e));
        }
        *writing = true;
        let mut issued = self.rewrite_bad_rows(rid, part, rows);
        for &slot in targets.iter() {
            if self.writable(slot) && !rows.bad.contains(&slot) {
                // Nothing reads the rebuilt block after its write: handed over, not copied.
                let data = rows.blocks[slot].take().expect("rebuilt");
                self.emit(rid, IoTag { part, slot }, rows.offset, MemberOp::Write { data: data.into() });
                issued += 1;
            }
        }
        rows.pending = issued;
        (issued == 0).then_some(Ok(()))
    }

    pub(super) fn recover_io_done(&mut self, rid: RequestId, r: &mut RecoverOp, tag: IoTag, outcome: Outcome) -> bool {
        let part = tag.part;
        let step = match &mut r.units[part] {
            RecoverUnit::Copies(unit) => {
                if matches!(outcome, Outcome::ReadError)
                    && !unit.writing
                    && unit.row_pieces(self.geometry.row_bytes()).len() > 1
                {
                    self.split_recover_unit(rid, r, part);
                    return r.remaining == 0;
                }
                self.copy_unit_step(rid, part, unit, tag.slot, outcome, None)
            }
            RecoverUnit::Stripe { rows, writing, .. } => {
                if *writing {
                    rows.pending -= 1;
                    (rows.pending == 0).then_some(Ok(()))
                } else {
                    rows.absorb(tag.slot, outcome);
                    if rows.pending > 0 {
                        None
                    } else if !rows.bad.is_empty()
                        && row_pieces(rows.offset, rows.len, self.geometry.row_bytes()).len() > 1
                    {
                        self.split_recover_unit(rid, r, part);
                        return r.remaining == 0;
                    } else {
                        self.recover_stripe_read(rid, r, part)
                    }
                }
            }
        };
        r.settle(step);
        r.remaining == 0
    }
}
