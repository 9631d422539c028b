//! Reads: a request split into parts per member, the parts one member holds merged into one
//! member read, the copy each part is read from, and the degraded paths (another copy, or a
//! rebuild from the stripe's other members) with the write-back of bytes whose read failed.

use std::collections::BTreeSet;

use smallvec::SmallVec;

use super::assembly::ReadAssembly;
use super::copy_unit::CopyUnit;
use super::emit::{IoTag, Outcome};
use super::rows::{row_pieces, Rows};
use super::{Array, RequestId, MAX_MERGE_BYTES};
use crate::error::EngineError;
use crate::geometry::{Copies, ParityRun};
use crate::member_io::MemberOp;
use crate::slot::SlotState;

#[derive(Debug)]
pub(super) struct ReadOp {
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) assembly: ReadAssembly,
    /// Inline for one part: a small read on one member does not allocate.
    pub(super) parts: SmallVec<[ReadPart; 1]>,
    pub(super) remaining: usize,
    pub(super) error: Option<EngineError>,
}

impl ReadOp {
    pub(super) fn new(offset: u64, len: u64) -> ReadOp {
        ReadOp {
            offset,
            len,
            assembly: ReadAssembly::new(len as usize),
            parts: SmallVec::new(),
            remaining: 0,
            error: None,
        }
    }

    /// Account for a part that finished (`Some`), with its error if any.
    pub(super) fn settle(&mut self, step: Option<Result<(), EngineError>>) {
        if let Some(result) = step {
            if let Err(e) = result {
                self.error.get_or_insert(e);
            }
            self.remaining -= 1;
        }
    }
}

#[derive(Debug)]
pub(super) enum ReadPart {
    Copies {
        logical: u64,
        unit: CopyUnit,
    },
    Parity {
        run: ParityRun,
        phase: ParityRead,
    },
    /// One member read standing for several parts on that member (see
    /// [`Array::merge_read_parts`]); those parts are started only if it fails.
    Merged(MergedRead),
    /// Bytes the `split` policy read ahead (entry `entry` of `array/readahead.rs`); read from
    /// the members instead if that read ahead goes stale or fails.
    Cached {
        logical: u64,
        len: u64,
        entry: u64,
    },
}

#[derive(Debug, Clone)]
pub(super) struct MergedRead {
    slot: usize,
    offset: u64,
    len: u64,
    /// `(piece, offset of its bytes in the member read)`, by member offset.
    pieces: Vec<(Piece, u64)>,
}

/// A member read a degraded parity part is rebuilt from: `(slot, member offset, len, part)`.
type RowRead = (usize, u64, u64, usize);

/// What a member read (merged or not) of a fresh request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Piece {
    /// The bytes of read part `part`, from the member that holds them.
    Part(usize),
    /// This member's rows of the stripe that parity part `part` is rebuilt from (its member
    /// is not in sync).
    Rows(usize),
}

#[derive(Debug)]
pub(super) enum ParityRead {
    /// Reading the run from the member that holds it.
    Direct,
    /// Rebuilding it from the same rows of the stripe's other members.
    Rebuild(Rows),
    /// The run is known; rewriting the rows whose read failed.
    Rewriting { pending: usize },
}

impl Array {
    pub(super) fn start_read(&mut self, rid: RequestId, r: &mut ReadOp) -> Option<Result<(), EngineError>> {
        let mut stream = None;
        if self.geometry.is_parity() {
            for run in self.geometry.parity_runs(r.offset, r.len) {
                r.parts.push(ReadPart::Parity { run, phase: ParityRead::Direct });
            }
        } else if self.split_reads() {
            stream = self.plan_split_read(r);
        } else {
            self.balance.begin_request();
            for run in self.geometry.runs(r.offset, r.len) {
                // A policy may send parts of one run to different copies (md-1998 moves a
                // sequential run to the next disk every 64 KiB).
                let mut at = 0;
                while at < run.len {
                    let copies: Copies = run.copies.iter().map(|&(s, o)| (s, o + at)).collect();
                    let len = self.balance.piece_len(&copies, run.len - at).max(1);
                    let mut unit = CopyUnit::new(copies, len, Vec::new());
                    unit.first = self.choose_copy(&unit.copies, unit.len);
                    r.parts.push(ReadPart::Copies { logical: run.logical + at, unit });
                    at += len;
                }
            }
        }
        let rebuilds = self.plan_rebuild_rows(r);
        let (groups, lone_rows) = self.merge_read_parts(r, &rebuilds);
        let held: BTreeSet<usize> = groups
            .iter()
            .flat_map(|g| g.pieces.iter())
            .filter_map(|&(piece, _)| match piece {
                Piece::Part(p) => Some(p),
                Piece::Rows(_) => None,
            })
            .chain(rebuilds.iter().map(|&(_, _, _, part)| part))
            .collect();
        let first_merged = r.parts.len();
        r.remaining = r.parts.len() + groups.len();
        for part in 0..first_merged {
            if !held.contains(&part) {
                let step = self.start_read_part(rid, r, part);
                r.settle(step);
            }
        }
        for (slot, offset, len, part) in lone_rows {
            self.emit(rid, IoTag { part, slot }, offset, MemberOp::Read { len });
        }
        for g in groups {
            let part = r.parts.len();
            self.emit(rid, IoTag { part, slot: g.slot }, g.offset, MemberOp::Read { len: g.len });
            r.parts.push(ReadPart::Merged(g));
        }
        if let Some(stream) = stream {
            self.read_ahead(stream);
        }
        (r.remaining == 0).then_some(Ok(()))
    }

    /// Where a read part would be read directly, before any error: `(slot, member offset,
    /// length)` of the in-sync member holding it (the first in-sync copy from the chosen one,
    /// as [`Array::issue_copy_read`] picks). `None` for a parity run whose member is not in
    /// sync (it is rebuilt from its stripe).
    fn direct_location(&self, part: &ReadPart) -> Option<(usize, u64, u64)> {
        match part {
            ReadPart::Copies { unit, .. } => {
                let n = unit.copies.len();
                (0..n)
                    .map(|k| unit.copies[(unit.first + k) % n])
                    .find(|&(slot, _)| self.in_sync(slot))
                    .map(|(slot, off)| (slot, off, unit.len))
            }
            ReadPart::Parity { run, .. } => self
                .in_sync(run.slot)
                .then(|| (run.slot, run.stripe * self.geometry.chunk_bytes() + run.chunk_offset, run.len)),
            ReadPart::Merged(_) | ReadPart::Cached { .. } => None,
        }
    }

    /// The copy (an index into `copies`) a read of `len` bytes should read first: read
    /// balancing's choice among the in-sync copies, or md's first in-sync copy while a resync
    /// is owed (copies may disagree until it is done, and md then reads the first so that
    /// reading a block twice gives the same answer). 0 if no copy is in sync (the read then
    /// fails through the usual path).
    pub(super) fn choose_copy(&mut self, copies: &[(usize, u64)], len: u64) -> usize {
        let slots = &self.slots;
        let in_sync = |slot: usize| slots[slot] == SlotState::InSync;
        let chosen = if self.resync_pending {
            self.balance.choose_first(copies, len, in_sync)
        } else {
            self.balance.choose(copies, len, in_sync)
        };
        chosen.unwrap_or(0)
    }

    /// Group the parts of a fresh read that go to the same member into one member read each:
    /// pieces that are contiguous on the member, or separated by at most one chunk. On a
    /// rotating-parity layout the pieces one member holds of consecutive stripes sit a stripe
    /// row apart, with at most the parity chunk (or a data chunk the request does not want)
    /// between them; reading that one chunk and dropping it costs far less than a second seek
    /// and request, and a gap of one chunk is all the layouts ever put between a member's
    /// pieces of one request, so the rule never reads more than one chunk per merge. Groups
    /// of one piece are left out (the part is read as before).
    ///
    /// Under the `split` policy only contiguous pieces merge: a gap there is what another copy
    /// reads.
    ///
    /// The rows a degraded parity part is rebuilt from (`rebuilds`, from
    /// [`Array::plan_rebuild_rows`]) take part too, so a read across several stripes of a
    /// degraded array reads each surviving member once rather than once per stripe. Returned:
    /// the merged reads, and the rebuild rows left on their own, `(slot, offset, len, part)`,
    /// to be read as they are.
    fn merge_read_parts(&self, r: &ReadOp, rebuilds: &[RowRead]) -> (Vec<MergedRead>, Vec<RowRead>) {
        if r.parts.len() < 2 {
            // Nothing to merge (most small reads): no lists to build.
            return (Vec::new(), rebuilds.to_vec());
        }
        let gap = if self.split_reads() { 0 } else { self.geometry.chunk_bytes() };
        let mut located: Vec<(usize, u64, u64, Piece)> = r
            .parts
            .iter()
            .enumerate()
            .filter_map(|(part, p)| self.direct_location(p).map(|(slot, off, len)| (slot, off, len, Piece::Part(part))))
            .chain(rebuilds.iter().map(|&(slot, off, len, part)| (slot, off, len, Piece::Rows(part))))
            .collect();
        located.sort_unstable();
        let mut groups: Vec<MergedRead> = Vec::new();
        let mut lone_rows = Vec::new();
        let mut close = |g: MergedRead, groups: &mut Vec<MergedRead>| match g.pieces[..] {
            [(Piece::Rows(part), _)] => lone_rows.push((g.slot, g.offset, g.len, part)),
            [(Piece::Part(_), _)] => {}
            _ => groups.push(g),
        };
        let mut current: Option<MergedRead> = None;
        for (slot, off, len, piece) in located {
            if let Some(g) = current.as_mut() {
                let end = g.offset + g.len;
                // Pieces may overlap: a survivor's rows for a rebuild can be the very bytes it
                // holds of the request itself.
                let new_end = end.max(off + len);
                if g.slot == slot && off <= end + gap && new_end - g.offset <= MAX_MERGE_BYTES {
                    g.pieces.push((piece, off - g.offset));
                    g.len = new_end - g.offset;
                    continue;
                }
            }
            if let Some(g) = current.take() {
                close(g, &mut groups);
            }
            current = Some(MergedRead { slot, offset: off, len, pieces: vec![(piece, 0)] });
        }
        if let Some(g) = current.take() {
            close(g, &mut groups);
        }
        (groups, lone_rows)
    }

    /// For each parity part of a fresh read whose member is not in sync: its phase set to a
    /// rebuild awaiting one read per in-sync member of the same rows, and those reads, `(slot,
    /// member offset, len, part)`, returned for [`Array::merge_read_parts`] to issue. A part
    /// with no in-sync member to rebuild from is left to [`Array::start_read_part`], which
    /// fails it.
    fn plan_rebuild_rows(&self, r: &mut ReadOp) -> Vec<RowRead> {
        let mut reads = Vec::new();
        for (part, p) in r.parts.iter_mut().enumerate() {
            let ReadPart::Parity { run, phase } = p else { continue };
            if self.in_sync(run.slot) {
                continue;
            }
            let offset = run.stripe * self.geometry.chunk_bytes() + run.chunk_offset;
            let sources: Vec<usize> =
                (0..self.slots.len()).filter(|&slot| slot != run.slot && self.in_sync(slot)).collect();
            if sources.is_empty() {
                continue;
            }
            let mut rows = Rows::new(offset, run.len, self.slots.len(), Vec::new());
            rows.pending = sources.len();
            *phase = ParityRead::Rebuild(rows);
            reads.extend(sources.into_iter().map(|slot| (slot, offset, run.len, part)));
        }
        reads
    }

    /// A merged member read completed. With its data every piece is handed out; otherwise each
    /// piece starts afresh on its own, as if it had never been merged, so a read error is
    /// narrowed to the pieces (and then rows) it really hits and corrected as usual, and a
    /// member that failed meanwhile sends its pieces to another copy or to a rebuild.
    fn merged_read_done(&mut self, rid: RequestId, r: &mut ReadOp, part: usize, outcome: Outcome) {
        let ReadPart::Merged(g) = &r.parts[part] else { unreachable!("a merged read part") };
        let (slot, pieces) = (g.slot, g.pieces.clone());
        let rows_len = |r: &ReadOp, p: usize| match &r.parts[p] {
            ReadPart::Parity { run, .. } => run.len,
            _ => unreachable!("rebuild rows belong to a parity part"),
        };
        match outcome {
            Outcome::Data(data) => {
                for (piece, at) in pieces {
                    let p = match piece {
                        Piece::Part(p) => p,
                        Piece::Rows(p) => {
                            let len = rows_len(r, p);
                            let rows = data.slice(at as usize..(at + len) as usize);
                            self.read_io_done(rid, r, IoTag { part: p, slot }, Outcome::Data(rows));
                            continue;
                        }
                    };
                    let (logical, len) = match &r.parts[p] {
                        ReadPart::Copies { logical, unit } => (*logical, unit.len),
                        ReadPart::Parity { run, .. } => (run.logical, run.len),
                        ReadPart::Merged(_) => unreachable!("merged reads do not nest"),
                        ReadPart::Cached { .. } => unreachable!("cached parts are not merged"),
                    };
                    let to = (logical - r.offset) as usize;
                    r.assembly.put(to, data.slice(at as usize..(at + len) as usize));
                    r.settle(Some(Ok(())));
                }
            }
            Outcome::ReadError | Outcome::Done | Outcome::Lost => {
                let group_offset = g.offset;
                for (piece, at) in pieces {
                    match piece {
                        Piece::Part(p) => {
                            let step = self.start_read_part(rid, r, p);
                            r.settle(step);
                        }
                        // A read error may lie in another piece's bytes: read these rows alone.
                        Piece::Rows(p) if matches!(outcome, Outcome::ReadError) => {
                            let len = rows_len(r, p);
                            self.emit(rid, IoTag { part: p, slot }, group_offset + at, MemberOp::Read { len });
                        }
                        // The member is gone: the rebuild goes on without it.
                        Piece::Rows(p) => {
                            self.read_io_done(rid, r, IoTag { part: p, slot }, Outcome::Lost);
                        }
                    }
                }
            }
        }
        r.settle(Some(Ok(())));
    }

    /// Issue the first member reads of one part of a read. `Some` when the part is finished.
    pub(super) fn start_read_part(
        &mut self,
        rid: RequestId,
        r: &mut ReadOp,
        part: usize,
    ) -> Option<Result<(), EngineError>> {
        if matches!(r.parts[part], ReadPart::Cached { .. }) {
            return self.start_cached_part(rid, r, part);
        }
        match &mut r.parts[part] {
            ReadPart::Copies { unit, .. } => self.issue_copy_read(rid, part, unit),
            ReadPart::Merged(_) => unreachable!("merged reads start with their request"),
            ReadPart::Cached { .. } => unreachable!("handled above"),
            ReadPart::Parity { run, phase } => {
                if self.in_sync(run.slot) {
                    let off = run.stripe * self.geometry.chunk_bytes() + run.chunk_offset;
                    self.emit(rid, IoTag { part, slot: run.slot }, off, MemberOp::Read { len: run.len });
                    None
                } else {
                    let at = (run.logical - r.offset) as usize;
                    let sink = r.assembly.sink(at, run.len as usize);
                    self.start_parity_rebuild(rid, part, run, phase, Vec::new(), sink)
                }
            }
        }
    }

    /// A read error hit a part spanning several rows (the layout's, 4 KiB unless it says): replace it by one part per row and
    /// start those afresh, so an error costs only its own rows and errors on different members
    /// in different rows never add up (md works in 4 KiB stripe pages, and raid1's
    /// `fix_read_error` page by page, for the same reason). The old part is finished.
    fn split_read_part(&mut self, rid: RequestId, r: &mut ReadOp, part: usize) {
        let row = self.geometry.row_bytes();
        let pieces: Vec<ReadPart> = match &r.parts[part] {
            ReadPart::Copies { logical, unit } => unit
                .row_pieces(row)
                .into_iter()
                .map(|(delta, len)| ReadPart::Copies { logical: logical + delta, unit: unit.piece(delta, len) })
                .collect(),
            ReadPart::Parity { run, .. } => row_pieces(run.chunk_offset, run.len, row)
                .into_iter()
                .map(|(delta, len)| ReadPart::Parity {
                    run: ParityRun {
                        logical: run.logical + delta,
                        len,
                        chunk_offset: run.chunk_offset + delta,
                        ..run.clone()
                    },
                    phase: ParityRead::Direct,
                })
                .collect(),
            ReadPart::Merged(_) => unreachable!("a merged read is never split"),
            ReadPart::Cached { .. } => unreachable!("a cached part has no member read to fail"),
        };
        let first = r.parts.len();
        r.remaining += pieces.len();
        r.parts.extend(pieces);
        for piece in first..r.parts.len() {
            let step = self.start_read_part(rid, r, piece);
            r.settle(step);
        }
        r.settle(Some(Ok(())));
    }

    /// Rebuild a parity run from the same rows of the stripe's other members. `bad` lists
    /// members whose read of those rows already failed.
    fn start_parity_rebuild(
        &mut self,
        rid: RequestId,
        part: usize,
        run: &ParityRun,
        phase: &mut ParityRead,
        bad: Vec<usize>,
        sink: &mut [u8],
    ) -> Option<Result<(), EngineError>> {
        let offset = run.stripe * self.geometry.chunk_bytes() + run.chunk_offset;
        let mut rows = Rows::new(offset, run.len, self.slots.len(), bad);
        self.read_rows(rid, part, &mut rows, Some(run.slot));
        if rows.pending == 0 {
            return self.parity_read_rebuilt(rid, part, run, phase, rows, sink);
        }
        *phase = ParityRead::Rebuild(rows);
        None
    }

    /// Every read of a parity rebuild is in: rebuild, hand out the run, rewrite failed rows.
    fn parity_read_rebuilt(
        &mut self,
        rid: RequestId,
        part: usize,
        run: &ParityRun,
        phase: &mut ParityRead,
        mut rows: Rows,
        sink: &mut [u8],
    ) -> Option<Result<(), EngineError>> {
        let roles = self.geometry.stripe_roles(run.stripe);
        if let Err(e) = rows.rebuild(&roles) {
            return Some(Err(e));
        }
        sink.copy_from_slice(rows.blocks[run.slot].as_deref().expect("rebuilt block"));
        let pending = self.rewrite_bad_rows(rid, part, &rows);
        if pending == 0 {
            return Some(Ok(()));
        }
        *phase = ParityRead::Rewriting { pending };
        None
    }

    pub(super) fn read_io_done(&mut self, rid: RequestId, r: &mut ReadOp, tag: IoTag, outcome: Outcome) -> bool {
        let part = tag.part;
        if matches!(r.parts[part], ReadPart::Merged(_)) {
            self.merged_read_done(rid, r, part, outcome);
            return r.remaining == 0;
        }
        let row = self.geometry.row_bytes();
        let split = matches!(outcome, Outcome::ReadError)
            && match &r.parts[part] {
                ReadPart::Copies { unit, .. } => {
                    !unit.writing && unit.copies.len() > 1 && unit.row_pieces(row).len() > 1
                }
                ReadPart::Parity { run, phase } => {
                    matches!(phase, ParityRead::Direct) && row_pieces(run.chunk_offset, run.len, row).len() > 1
                }
                ReadPart::Merged(_) | ReadPart::Cached { .. } => false,
            };
        if split {
            self.split_read_part(rid, r, part);
            return r.remaining == 0;
        }
        let step = match &mut r.parts[part] {
            ReadPart::Copies { logical, unit } => {
                let at = (*logical - r.offset) as usize;
                self.copy_unit_step(rid, part, unit, tag.slot, outcome, Some((&mut r.assembly, at)))
            }
            ReadPart::Merged(_) => unreachable!("handled above"),
            ReadPart::Cached { .. } => unreachable!("read-ahead completions are filed under their own id"),
            ReadPart::Parity { run, phase } => {
                let at = (run.logical - r.offset) as usize;
                if let ParityRead::Direct = phase {
                    if let Outcome::Data(data) = outcome {
                        // Moved, not cloned: cloning a `Bytes` made from a `Vec` allocates.
                        r.assembly.put(at, data);
                        r.settle(Some(Ok(())));
                        return r.remaining == 0;
                    }
                }
                let sink = r.assembly.sink(at, run.len as usize);
                match phase {
                    ParityRead::Direct => match outcome {
                        Outcome::Data(_) => unreachable!("handled above"),
                        Outcome::ReadError if !self.parity_trusted_for_rebuilds() => {
                            let offset = run.stripe * self.geometry.chunk_bytes() + run.chunk_offset;
                            Some(Err(EngineError::UnrecoverableRead { slot: run.slot, offset, len: run.len }))
                        }
                        Outcome::ReadError => self.start_parity_rebuild(rid, part, run, phase, vec![run.slot], sink),
                        Outcome::Done | Outcome::Lost => {
                            self.start_parity_rebuild(rid, part, run, phase, Vec::new(), sink)
                        }
                    },
                    ParityRead::Rebuild(rows) => {
                        rows.absorb(tag.slot, outcome);
                        if rows.pending > 0 {
                            None
                        } else if !rows.bad.is_empty()
                            && row_pieces(run.chunk_offset, run.len, self.geometry.row_bytes()).len() > 1
                        {
                            self.split_read_part(rid, r, part);
                            return r.remaining == 0;
                        } else {
                            let ParityRead::Rebuild(rows) = std::mem::replace(phase, ParityRead::Direct) else {
                                unreachable!("phase checked above")
                            };
                            self.parity_read_rebuilt(rid, part, run, phase, rows, sink)
                        }
                    }
                    ParityRead::Rewriting { pending } => {
                        *pending -= 1;
                        (*pending == 0).then_some(Ok(()))
                    }
                }
            }
        };
        r.settle(step);
        r.remaining == 0
    }
}
