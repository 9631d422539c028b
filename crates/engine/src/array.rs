//! `Array`: the sans-I/O engine for one assembled array.
//!
//! A driver feeds it block requests ([`Request`]) and member completions ([`IoResult`]); it emits
//! member I/Os ([`MemberIo`]) and request completions. It never touches the OS, so the same code
//! runs over real files (the synchronous driver in `uraid-device`) and over simulated disks.
//!
//! What it owns:
//! - splitting a logical request into member I/Os per level ([`Geometry`]);
//! - degraded reads (another mirror, or reconstruction from parity) and the choice between
//!   read-modify-write and reconstruct-write for parity levels, done per stripe as md's
//!   `handle_stripe_dirtying` does: the fewer member reads wins, ties go to reconstruct-write;
//! - marking members faulty when their I/O fails and carrying on while redundancy allows;
//! - ordering: a write waits for every earlier request it overlaps (whole stripes for parity
//!   levels, since a stripe's parity covers all of it), so concurrent requests never interleave
//!   inside a stripe;
//! - consistency checks (`Request::Sync`): compare mirrors or recompute parity, count mismatches
//!   like md's `mismatch_cnt` (in 512-byte sectors, per 4 KiB row), and optionally repair.

use std::collections::{HashMap, VecDeque};

use uraid_layout::StripeRoles;

use crate::geometry::{Geometry, ParityRun, SECTOR_BYTES};
use crate::EngineError;

/// Identifies a submitted request.
pub type RequestId = u64;
/// Identifies an emitted member I/O.
pub type IoId = u64;

/// The granularity of mismatch counting and repair, as md's stripe pages (4 KiB).
pub const CHECK_ROW_BYTES: u64 = 4096;

/// A block request against the array.
#[derive(Debug, Clone)]
pub enum Request {
    /// Read `len` bytes at logical byte `offset`.
    Read { offset: u64, len: u64 },
    /// Write `data` at logical byte `offset`.
    Write { offset: u64, data: Vec<u8> },
    /// Make every completed write durable on every member.
    Flush,
    /// Check redundancy over `[offset, offset+len)` (widened to whole stripes); with `repair`,
    /// rewrite parity or copies that disagree (md's `check` / `repair` / initial resync).
    Sync { offset: u64, len: u64, repair: bool },
    /// Make `[offset, offset+len)` read back as zeros, deallocating member space where the
    /// members can (TRIM, WRITE_ZEROES, punch-hole). Parity arrays take whole stripes only: a
    /// stripe whose data and parity are all zero is consistent, a part-zeroed one is not (md
    /// discards whole stripes on raid5 for the same reason); callers write zeros at the edges.
    Discard { offset: u64, len: u64 },
}

/// What a finished request returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    Read(Vec<u8>),
    Written,
    Flushed,
    /// Mismatched sectors found (and repaired, if asked).
    Synced { mismatch_sectors: u64 },
}

/// A member I/O for the driver to perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberIo {
    pub id: IoId,
    pub slot: usize,
    /// Byte offset from the member's data start (the driver adds the data offset).
    pub offset: u64,
    pub op: MemberOp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberOp {
    Read { len: u64 },
    Write { data: Vec<u8> },
    Flush,
    /// Zero `len` bytes, deallocating if the member can; afterwards they must read as zeros.
    Discard { len: u64 },
}

/// The driver's answer for one member I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IoResult {
    Read(Vec<u8>),
    Done,
    /// The I/O failed; the text says how (it ends up in the member-failed event).
    Failed(String),
}

/// The state of one member slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    InSync,
    /// No device fills the slot.
    Missing,
    /// The device failed during service; it is no longer used.
    Faulty,
}

/// Something the driver should know about (and usually record in the superblocks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineEvent {
    MemberFailed { slot: usize, reason: String },
}

#[derive(Debug)]
struct Op {
    kind: OpKind,
    /// Logical byte range this op must not share with a conflicting op, and whether it writes.
    lock: Option<(u64, u64, bool)>,
}

#[derive(Debug)]
enum OpKind {
    Read(ReadOp),
    Write(CopyWriteOp),
    ParityWrite(ParityWriteOp),
    Flush { pending: usize, ok: usize },
    Sync(SyncOp),
    Discard(DiscardOp),
}

/// Sub-identifier of an I/O inside its op: which part, and which slot.
#[derive(Debug, Clone, Copy)]
struct IoTag {
    part: usize,
    slot: usize,
}

/// The engine for one array.
#[derive(Debug)]
pub struct Array {
    geometry: Geometry,
    slots: Vec<SlotState>,
    next_request: RequestId,
    next_io: IoId,
    ops: HashMap<RequestId, Op>,
    io_owner: HashMap<IoId, (RequestId, IoTag)>,
    outbox: VecDeque<MemberIo>,
    finished: VecDeque<(RequestId, Result<Completion, EngineError>)>,
    events: Vec<EngineEvent>,
    /// Requests waiting for a conflicting earlier request, in arrival order.
    waiting: VecDeque<RequestId>,
    /// Requests started and not finished, with their lock ranges.
    running: Vec<(RequestId, (u64, u64, bool))>,
    /// Parity may be inconsistent (unclean shutdown, resync not done): read-modify-write would
    /// carry old errors into new parity, so only reconstruct-write is used (as md does while
    /// `recovery_cp` is short of the end).
    resync_pending: bool,
}

impl Array {
    /// An engine over `geometry` with the given slot states.
    pub fn new(geometry: Geometry, slots: Vec<SlotState>) -> Result<Array, EngineError> {
        assert_eq!(slots.len(), geometry.raid_disks(), "one state per slot");
        let array = Array {
            geometry,
            slots,
            next_request: 1,
            next_io: 1,
            ops: HashMap::new(),
            io_owner: HashMap::new(),
            outbox: VecDeque::new(),
            finished: VecDeque::new(),
            events: Vec::new(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            resync_pending: false,
        };
        if !array.readable() {
            return Err(EngineError::ArrayFailed);
        }
        Ok(array)
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub fn size_bytes(&self) -> u64 {
        self.geometry.array_bytes()
    }

    pub fn slot_states(&self) -> &[SlotState] {
        &self.slots
    }

    /// Say whether parity may be inconsistent (see the field's comment).
    pub fn set_resync_pending(&mut self, pending: bool) {
        self.resync_pending = pending;
    }

    pub fn degraded(&self) -> bool {
        self.slots.iter().any(|s| *s != SlotState::InSync)
    }

    /// Number of requests submitted and not yet returned by [`Array::next_completion`].
    pub fn in_flight(&self) -> usize {
        self.ops.len() + self.finished.len()
    }

    /// Accept a request. Errors at once for a range outside the array.
    pub fn submit(&mut self, request: Request) -> Result<RequestId, EngineError> {
        let size = self.size_bytes();
        let lock = match &request {
            Request::Read { offset, len } => {
                check_range(*offset, *len, size)?;
                Some((*offset, offset + len, false))
            }
            Request::Write { offset, data } => {
                check_range(*offset, data.len() as u64, size)?;
                Some((*offset, offset + data.len() as u64, true))
            }
            Request::Sync { offset, len, .. } => {
                check_range(*offset, *len, size)?;
                Some((*offset, offset + len, true))
            }
            Request::Discard { offset, len } => {
                check_range(*offset, *len, size)?;
                if let Some(width) = self.geometry.stripe_data_bytes() {
                    if offset % width != 0 || len % width != 0 {
                        return Err(EngineError::Unaligned { offset: *offset, len: *len, granularity: width });
                    }
                }
                Some((*offset, offset + len, true))
            }
            Request::Flush => None,
        };
        // Parity is shared by a whole stripe: lock whole stripes.
        let lock = lock.map(|(s, e, w)| match self.geometry.stripe_data_bytes() {
            Some(width) => (s / width * width, e.div_ceil(width) * width, w),
            None => (s, e, w),
        });
        let id = self.next_request;
        self.next_request += 1;
        let kind = match request {
            Request::Read { offset, len } => OpKind::Read(ReadOp::new(offset, len)),
            Request::Write { offset, data } => {
                if self.geometry.parity().is_some() {
                    OpKind::ParityWrite(ParityWriteOp { offset, data, stripes: Vec::new(), remaining: 0, error: None })
                } else {
                    OpKind::Write(CopyWriteOp { offset, data, parts: Vec::new(), pending: 0, error: None })
                }
            }
            Request::Flush => OpKind::Flush { pending: 0, ok: 0 },
            Request::Sync { offset, len, repair } => OpKind::Sync(SyncOp::new(offset, len, repair)),
            Request::Discard { offset, len } => OpKind::Discard(DiscardOp { offset, len, pending: 0, parts: Vec::new() }),
        };
        self.ops.insert(id, Op { kind, lock });
        self.waiting.push_back(id);
        self.start_ready();
        Ok(id)
    }

    /// The next member I/O to perform, if any.
    pub fn next_io(&mut self) -> Option<MemberIo> {
        self.outbox.pop_front()
    }

    /// The next finished request, if any.
    pub fn next_completion(&mut self) -> Option<(RequestId, Result<Completion, EngineError>)> {
        self.finished.pop_front()
    }

    /// Events since the last call (members that failed).
    pub fn take_events(&mut self) -> Vec<EngineEvent> {
        std::mem::take(&mut self.events)
    }

    /// Report the outcome of member I/O `id`.
    pub fn complete_io(&mut self, id: IoId, result: IoResult) {
        let (rid, tag) = self.io_owner.remove(&id).expect("completion for an unknown member I/O");
        let mut op = self.ops.remove(&rid).expect("member I/O of a finished request");
        if let IoResult::Failed(reason) = &result {
            self.fail_slot(tag.slot, reason);
        }
        let done = match &mut op.kind {
            OpKind::Read(r) => self.read_io_done(rid, r, tag, result),
            OpKind::Write(w) => self.copy_write_io_done(w, tag, result),
            OpKind::ParityWrite(w) => self.parity_write_io_done(rid, w, tag, result),
            OpKind::Flush { pending, ok } => {
                *pending -= 1;
                if !matches!(result, IoResult::Failed(_)) {
                    *ok += 1;
                }
                *pending == 0
            }
            OpKind::Sync(s) => self.sync_io_done(rid, s, tag, result),
            OpKind::Discard(d) => {
                d.pending -= 1;
                if !matches!(result, IoResult::Failed(_)) {
                    d.parts[tag.part] += 1;
                }
                d.pending == 0
            }
        };
        if done {
            self.finish(rid, op);
        } else {
            self.ops.insert(rid, op);
        }
    }

    fn readable(&self) -> bool {
        let slots = &self.slots;
        self.geometry.is_readable(&|s| slots[s] == SlotState::InSync)
    }

    fn in_sync(&self, slot: usize) -> bool {
        self.slots[slot] == SlotState::InSync
    }

    fn fail_slot(&mut self, slot: usize, reason: &str) {
        if self.slots[slot] == SlotState::InSync {
            self.slots[slot] = SlotState::Faulty;
            self.events.push(EngineEvent::MemberFailed { slot, reason: reason.to_string() });
        }
    }

    fn emit(&mut self, rid: RequestId, tag: IoTag, offset: u64, op: MemberOp) {
        let id = self.next_io;
        self.next_io += 1;
        self.io_owner.insert(id, (rid, tag));
        self.outbox.push_back(MemberIo { id, slot: tag.slot, offset, op });
    }

    /// Start every waiting request that no earlier request conflicts with, in arrival order.
    fn start_ready(&mut self) {
        let mut still_waiting = VecDeque::new();
        let mut blocked: Vec<(u64, u64, bool)> = Vec::new();
        while let Some(rid) = self.waiting.pop_front() {
            let lock = self.ops[&rid].lock;
            let conflicts = |other: &(u64, u64, bool)| match lock {
                None => false,
                Some((s, e, w)) => (w || other.2) && s < other.1 && other.0 < e,
            };
            let busy = self.running.iter().any(|(_, l)| conflicts(l)) || blocked.iter().any(conflicts);
            if busy {
                if let Some(l) = lock {
                    blocked.push(l);
                }
                still_waiting.push_back(rid);
                continue;
            }
            if let Some(l) = lock {
                self.running.push((rid, l));
            }
            self.start(rid);
        }
        self.waiting = still_waiting;
    }

    fn start(&mut self, rid: RequestId) {
        let mut op = self.ops.remove(&rid).expect("starting a known request");
        let done = if !self.readable() {
            Some(Err(EngineError::ArrayFailed))
        } else {
            match &mut op.kind {
                OpKind::Read(r) => self.start_read(rid, r),
                OpKind::Write(w) => self.start_copy_write(rid, w),
                OpKind::ParityWrite(w) => self.start_parity_write(rid, w),
                OpKind::Flush { pending, .. } => {
                    for slot in 0..self.slots.len() {
                        if self.in_sync(slot) {
                            *pending += 1;
                            self.emit(rid, IoTag { part: 0, slot }, 0, MemberOp::Flush);
                        }
                    }
                    (*pending == 0).then_some(Ok(()))
                }
                OpKind::Sync(s) => self.start_sync(rid, s),
                OpKind::Discard(d) => self.start_discard(rid, d),
            }
        };
        match done {
            Some(Ok(())) => self.finish(rid, op),
            Some(Err(e)) => self.finish_result(rid, Err(e)),
            None => {
                self.ops.insert(rid, op);
            }
        }
    }

    fn finish(&mut self, rid: RequestId, op: Op) {
        let result = match op.kind {
            OpKind::Read(r) => match r.error {
                Some(e) => Err(e),
                None => Ok(Completion::Read(r.buf)),
            },
            OpKind::Write(w) => match w.error {
                Some(e) => Err(e),
                None => Ok(Completion::Written),
            },
            OpKind::ParityWrite(w) => match w.error {
                Some(e) => Err(e),
                None => Ok(Completion::Written),
            },
            OpKind::Flush { ok, .. } => {
                if ok > 0 || self.slots.iter().all(|s| *s != SlotState::InSync) {
                    Ok(Completion::Flushed)
                } else {
                    Err(EngineError::ArrayFailed)
                }
            }
            OpKind::Sync(s) => match s.error {
                Some(e) => Err(e),
                None => Ok(Completion::Synced { mismatch_sectors: s.mismatch_sectors }),
            },
            // As for writes: a part none of whose copies was zeroed is lost.
            OpKind::Discard(d) => {
                if d.parts.contains(&0) || !self.readable() {
                    Err(EngineError::ArrayFailed)
                } else {
                    Ok(Completion::Written)
                }
            }
        };
        self.finish_result(rid, result);
    }

    fn finish_result(&mut self, rid: RequestId, result: Result<Completion, EngineError>) {
        self.finished.push_back((rid, result));
        self.running.retain(|(r, _)| *r != rid);
        self.start_ready();
    }

    // ----- reads -------------------------------------------------------------------------------

    fn start_read(&mut self, rid: RequestId, r: &mut ReadOp) -> Option<Result<(), EngineError>> {
        if self.geometry.parity().is_some() {
            for run in self.geometry.parity_runs(r.offset, r.len) {
                r.parts.push(ReadPart::Parity { run, recon: None });
            }
        } else {
            for run in self.geometry.runs(r.offset, r.len) {
                r.parts.push(ReadPart::Copies { logical: run.logical, len: run.len, copies: run.copies, tried: 0 });
            }
        }
        r.remaining = r.parts.len();
        for part in 0..r.parts.len() {
            if let Err(e) = self.issue_read_part(rid, r, part) {
                r.error.get_or_insert(e);
                r.remaining -= 1;
            }
        }
        (r.remaining == 0).then_some(Ok(()))
    }

    /// Issue (or re-issue after a failure) the member reads for one part of a read.
    fn issue_read_part(&mut self, rid: RequestId, r: &mut ReadOp, part: usize) -> Result<(), EngineError> {
        match &mut r.parts[part] {
            ReadPart::Copies { len, copies, tried, .. } => {
                let len = *len;
                // md's read_balance proper arrives with the policies; for now the first
                // in-sync copy in md's copy order.
                while *tried < copies.len() {
                    let (slot, off) = copies[*tried];
                    *tried += 1;
                    if self.slots[slot] == SlotState::InSync {
                        self.emit(rid, IoTag { part, slot }, off, MemberOp::Read { len });
                        return Ok(());
                    }
                }
                Err(EngineError::ArrayFailed)
            }
            ReadPart::Parity { run, recon } => {
                let run = run.clone();
                let chunk = self.geometry.chunk_bytes();
                let member_off = run.stripe * chunk + run.chunk_offset;
                if recon.is_none() && self.in_sync(run.slot) {
                    self.emit(rid, IoTag { part, slot: run.slot }, member_off, MemberOp::Read { len: run.len });
                    return Ok(());
                }
                if !self.readable() {
                    return Err(EngineError::ArrayFailed);
                }
                // Reconstruct: read the same rows of every other usable member of the stripe.
                let n = self.slots.len();
                let blocks = vec![None; n];
                let mut pending = 0;
                for slot in 0..n {
                    if slot != run.slot && self.in_sync(slot) {
                        pending += 1;
                        self.emit(rid, IoTag { part, slot }, member_off, MemberOp::Read { len: run.len });
                    }
                }
                *recon = Some(Recon { blocks, pending, failed: false });
                Ok(())
            }
        }
    }

    fn read_io_done(&mut self, rid: RequestId, r: &mut ReadOp, tag: IoTag, result: IoResult) -> bool {
        let part = tag.part;
        let mut part_done = false;
        let mut retry = false;
        match &mut r.parts[part] {
            ReadPart::Copies { logical, len, .. } => {
                if let IoResult::Read(data) = result {
                    let at = (*logical - r.offset) as usize;
                    r.buf[at..at + *len as usize].copy_from_slice(&data);
                    part_done = true;
                } else {
                    retry = true;
                }
            }
            ReadPart::Parity { run, recon } => match recon {
                None => {
                    if let IoResult::Read(data) = result {
                        let at = (run.logical - r.offset) as usize;
                        r.buf[at..at + run.len as usize].copy_from_slice(&data);
                        part_done = true;
                    } else {
                        retry = true;
                    }
                }
                Some(rc) => {
                    rc.pending -= 1;
                    match result {
                        IoResult::Read(data) => rc.blocks[tag.slot] = Some(data),
                        _ => rc.failed = true,
                    }
                    if rc.pending == 0 {
                        if rc.failed {
                            retry = true;
                        } else {
                            let roles = self.geometry.stripe_roles(run.stripe);
                            let missing: Vec<usize> = (0..rc.blocks.len()).filter(|&s| rc.blocks[s].is_none()).collect();
                            let mut blocks = std::mem::take(&mut rc.blocks);
                            reconstruct(&roles, &mut blocks, &missing, run.len as usize);
                            let at = (run.logical - r.offset) as usize;
                            let data = blocks[run.slot].as_ref().expect("reconstructed block");
                            r.buf[at..at + run.len as usize].copy_from_slice(data);
                            part_done = true;
                        }
                    }
                }
            },
        }
        if retry {
            // Go (back) to reconstruction with whatever members are still usable; the failed
            // member is faulty now, so issue_read_part will not pick it again.
            if let ReadPart::Parity { recon, .. } = &mut r.parts[part] {
                *recon = None;
            }
            if let Err(e) = self.issue_read_part(rid, r, part) {
                r.error.get_or_insert(e);
                part_done = true;
            }
        }
        if part_done {
            r.remaining -= 1;
        }
        r.remaining == 0
    }

    // ----- writes: linear, raid0, raid1, raid10 ------------------------------------------------

    fn start_copy_write(&mut self, rid: RequestId, w: &mut CopyWriteOp) -> Option<Result<(), EngineError>> {
        let runs = self.geometry.runs(w.offset, w.data.len() as u64);
        for (part, run) in runs.into_iter().enumerate() {
            let at = (run.logical - w.offset) as usize;
            let bytes = &w.data[at..at + run.len as usize];
            let mut targets = 0;
            for &(slot, off) in &run.copies {
                if self.in_sync(slot) {
                    targets += 1;
                    w.pending += 1;
                    self.emit(rid, IoTag { part, slot }, off, MemberOp::Write { data: bytes.to_vec() });
                }
            }
            w.parts.push(CopyWritePart { written: 0 });
            if targets == 0 {
                w.error.get_or_insert(EngineError::ArrayFailed);
            }
        }
        (w.pending == 0).then_some(Ok(()))
    }

    fn copy_write_io_done(&mut self, w: &mut CopyWriteOp, tag: IoTag, result: IoResult) -> bool {
        w.pending -= 1;
        if !matches!(result, IoResult::Failed(_)) {
            w.parts[tag.part].written += 1;
        }
        if w.pending == 0 {
            // A part whose every copy failed is lost; otherwise the failed copies are faulty now
            // and the array carries on degraded, as md does.
            if w.parts.iter().any(|p| p.written == 0) || !self.readable() {
                w.error.get_or_insert(EngineError::ArrayFailed);
            }
            return true;
        }
        false
    }

    // ----- discards ------------------------------------------------------------------------------

    fn start_discard(&mut self, rid: RequestId, d: &mut DiscardOp) -> Option<Result<(), EngineError>> {
        if d.len == 0 {
            return Some(Ok(()));
        }
        match self.geometry.stripe_data_bytes() {
            // Whole stripes (checked at submit) occupy the same member range on every slot, data
            // and parity alike: one discard per live member.
            Some(width) => {
                let chunk = self.geometry.chunk_bytes();
                let first = d.offset / width;
                let stripes = d.len / width;
                d.parts.push(0);
                for slot in 0..self.slots.len() {
                    if self.in_sync(slot) {
                        d.pending += 1;
                        self.emit(rid, IoTag { part: 0, slot }, first * chunk, MemberOp::Discard { len: stripes * chunk });
                    }
                }
            }
            None => {
                for (part, run) in self.geometry.runs(d.offset, d.len).into_iter().enumerate() {
                    d.parts.push(0);
                    for &(slot, off) in &run.copies {
                        if self.in_sync(slot) {
                            d.pending += 1;
                            self.emit(rid, IoTag { part, slot }, off, MemberOp::Discard { len: run.len });
                        }
                    }
                }
            }
        }
        (d.pending == 0).then_some(Err(EngineError::ArrayFailed))
    }

    // ----- writes: raid4/5/6 ---------------------------------------------------------------------

    fn start_parity_write(&mut self, rid: RequestId, w: &mut ParityWriteOp) -> Option<Result<(), EngineError>> {
        let runs = self.geometry.parity_runs(w.offset, w.data.len() as u64);
        let mut by_stripe: Vec<StripeWrite> = Vec::new();
        for run in runs {
            match by_stripe.last_mut() {
                Some(sw) if sw.stripe == run.stripe => sw.runs.push(run),
                _ => by_stripe.push(StripeWrite::new(run)),
            }
        }
        w.stripes = by_stripe;
        w.remaining = w.stripes.len();
        for part in 0..w.stripes.len() {
            if self.plan_stripe_write(rid, w, part) {
                w.remaining -= 1;
            }
        }
        (w.remaining == 0).then_some(Ok(()))
    }

    /// Choose a strategy for one stripe and issue its reads (or, with nothing to read, its
    /// writes). Returns true when the stripe is already finished (failed).
    fn plan_stripe_write(&mut self, rid: RequestId, w: &mut ParityWriteOp, part: usize) -> bool {
        if !self.readable() {
            w.error.get_or_insert(EngineError::ArrayFailed);
            return true;
        }
        let sw = &mut w.stripes[part];
        let roles = self.geometry.stripe_roles(sw.stripe);
        let lo = sw.runs.iter().map(|r| r.chunk_offset).min().expect("a stripe write has runs");
        let hi = sw.runs.iter().map(|r| r.chunk_offset + r.len).max().expect("a stripe write has runs");
        sw.lo = lo;
        sw.hi = hi;
        let parity_slots: Vec<usize> = std::iter::once(roles.p).chain(roles.q).collect();
        let touched: Vec<usize> = sw.runs.iter().map(|r| r.slot).collect();
        let fully_covered = |slot: usize| sw.runs.iter().any(|r| r.slot == slot && r.chunk_offset == lo && r.len == hi - lo);
        let slots = &self.slots;
        let ok = |s: usize| slots[s] == SlotState::InSync;
        let live_parity: Vec<usize> = parity_slots.iter().copied().filter(|&s| ok(s)).collect();

        let strategy = if live_parity.is_empty() {
            // No parity left to maintain: plain data writes.
            Strategy::DataOnly
        } else {
            let rmw_possible = !self.resync_pending && touched.iter().all(|&s| ok(s));
            let rcw_needs: Vec<usize> = roles.data.iter().copied().filter(|&s| !fully_covered(s)).collect();
            let rcw_possible = rcw_needs.iter().all(|&s| ok(s));
            let rmw_reads = touched.len() + live_parity.len();
            let rcw_reads = rcw_needs.len();
            match (rmw_possible, rcw_possible) {
                (true, true) if rmw_reads < rcw_reads => Strategy::ReadModifyWrite,
                (_, true) => Strategy::ReconstructWrite,
                (true, false) => Strategy::ReadModifyWrite,
                (false, false) => Strategy::Degraded,
            }
        };
        let reads: Vec<usize> = match strategy {
            Strategy::DataOnly => Vec::new(),
            Strategy::ReadModifyWrite => touched.iter().copied().chain(live_parity.iter().copied()).collect(),
            Strategy::ReconstructWrite => roles.data.iter().copied().filter(|&s| !fully_covered(s)).collect(),
            Strategy::Degraded => (0..self.slots.len()).filter(|&s| ok(s)).collect(),
        };
        sw.strategy = strategy;
        sw.blocks = vec![None; self.slots.len()];
        sw.failed_read = false;
        sw.pending = reads.len();
        let chunk = self.geometry.chunk_bytes();
        let base = sw.stripe * chunk;
        if reads.is_empty() {
            return self.write_stripe(rid, w, part, &roles);
        }
        for slot in reads {
            self.emit(rid, IoTag { part, slot }, base + lo, MemberOp::Read { len: hi - lo });
        }
        false
    }

    /// All reads of a stripe are in: compute the new parity and issue the writes.
    /// Returns true when the stripe is finished (nothing was left to write).
    fn write_stripe(&mut self, rid: RequestId, w: &mut ParityWriteOp, part: usize, roles: &StripeRoles) -> bool {
        let sw = &mut w.stripes[part];
        let (lo, hi) = (sw.lo, sw.hi);
        let len = (hi - lo) as usize;
        let n = self.slots.len();
        let ok: Vec<bool> = (0..n).map(|s| self.slots[s] == SlotState::InSync).collect();
        // New contents of each touched member over [lo, hi) where known.
        let overlay = |block: &mut [u8], slot: usize| {
            for r in sw.runs.iter().filter(|r| r.slot == slot) {
                let at = (r.chunk_offset - lo) as usize;
                let src = (r.logical - w.offset) as usize;
                block[at..at + r.len as usize].copy_from_slice(&w.data[src..src + r.len as usize]);
            }
        };
        let mut parity: Vec<(usize, Vec<u8>)> = Vec::new();
        match sw.strategy {
            Strategy::DataOnly => {}
            Strategy::ReadModifyWrite => {
                let mut p = sw.blocks[roles.p].take();
                let mut q = roles.q.and_then(|q| sw.blocks[q].take());
                for &slot in sw.runs.iter().map(|r| &r.slot).collect::<std::collections::BTreeSet<_>>() {
                    let old = sw.blocks[slot].take().expect("RMW read the old data");
                    let mut new = old.clone();
                    overlay(&mut new, slot);
                    let qslot = roles.syndrome_slot[slot].unwrap_or(0);
                    match (&mut p, &mut q) {
                        (Some(p), q) => uraid_parity::update_pq(p, q.as_deref_mut(), qslot, &old, &new),
                        (None, Some(q)) => {
                            let mut scratch = vec![0u8; len];
                            uraid_parity::update_pq(&mut scratch, Some(q), qslot, &old, &new);
                        }
                        (None, None) => unreachable!("RMW is chosen only with live parity"),
                    }
                }
                if let Some(p) = p {
                    parity.push((roles.p, p));
                }
                if let (Some(qs), Some(q)) = (roles.q, q) {
                    parity.push((qs, q));
                }
            }
            Strategy::ReconstructWrite | Strategy::Degraded => {
                let mut blocks = std::mem::take(&mut sw.blocks);
                if sw.strategy == Strategy::Degraded {
                    // Rebuild the missing members' old contents first.
                    let missing: Vec<usize> = (0..n).filter(|&s| !ok[s]).collect();
                    reconstruct(roles, &mut blocks, &missing, len);
                }
                let mut data: Vec<Vec<u8>> = Vec::with_capacity(roles.data.len());
                for &slot in &roles.data {
                    let mut b = blocks[slot].take().unwrap_or_else(|| vec![0u8; len]);
                    overlay(&mut b, slot);
                    data.push(b);
                }
                let (p, q) = compute_parity(roles, &data, len);
                parity.push((roles.p, p));
                if let (Some(qs), Some(q)) = (roles.q, q) {
                    parity.push((qs, q));
                }
            }
        }
        let chunk = self.geometry.chunk_bytes();
        let base = sw.stripe * chunk;
        let mut writes: Vec<(usize, u64, Vec<u8>)> = Vec::new();
        for r in &sw.runs {
            if ok[r.slot] {
                let src = (r.logical - w.offset) as usize;
                writes.push((r.slot, base + r.chunk_offset, w.data[src..src + r.len as usize].to_vec()));
            }
        }
        for (slot, block) in parity {
            if ok[slot] {
                writes.push((slot, base + lo, block));
            }
        }
        sw.blocks = vec![None; n];
        sw.writing = true;
        sw.pending = writes.len();
        if writes.is_empty() {
            return true;
        }
        for (slot, off, data) in writes {
            self.emit(rid, IoTag { part, slot }, off, MemberOp::Write { data });
        }
        false
    }

    fn parity_write_io_done(&mut self, rid: RequestId, w: &mut ParityWriteOp, tag: IoTag, result: IoResult) -> bool {
        let part = tag.part;
        let sw = &mut w.stripes[part];
        sw.pending -= 1;
        let mut stripe_done = false;
        if sw.writing {
            if sw.pending == 0 {
                stripe_done = true;
                // Failed writes made members faulty; the data is still there if the array is
                // within its redundancy.
                if !self.readable() {
                    w.error.get_or_insert(EngineError::ArrayFailed);
                }
            }
        } else {
            match result {
                IoResult::Read(data) => sw.blocks[tag.slot] = Some(data),
                _ => sw.failed_read = true,
            }
            if sw.pending == 0 {
                if sw.failed_read {
                    // A member failed under us: plan again with the members left.
                    stripe_done = self.plan_stripe_write(rid, w, part);
                } else {
                    let roles = self.geometry.stripe_roles(w.stripes[part].stripe);
                    stripe_done = self.write_stripe(rid, w, part, &roles);
                }
            }
        }
        if stripe_done {
            w.remaining -= 1;
        }
        w.remaining == 0
    }

    // ----- consistency check / repair ------------------------------------------------------------

    fn start_sync(&mut self, rid: RequestId, s: &mut SyncOp) -> Option<Result<(), EngineError>> {
        if self.degraded() {
            return Some(Err(EngineError::DegradedCheck));
        }
        match &self.geometry {
            Geometry::Linear(_) | Geometry::Raid0(_) => return Some(Ok(())),
            Geometry::Parity(l) => {
                let width = self.geometry.stripe_data_bytes().expect("parity geometry");
                let first = s.offset / width;
                let last = (s.offset + s.len).div_ceil(width);
                let n = l.raid_disks();
                for stripe in first..last {
                    s.units.push(SyncUnit { target: SyncTarget::Stripe(stripe), blocks: vec![None; n], pending: 0, writing: false });
                }
            }
            Geometry::Raid1(_) | Geometry::Raid10(_) => {
                for run in self.geometry.runs(s.offset, s.len) {
                    let n = self.slots.len();
                    s.units.push(SyncUnit { target: SyncTarget::Copies(run.copies, run.len), blocks: vec![None; n], pending: 0, writing: false });
                }
            }
        }
        let chunk = self.geometry.chunk_bytes();
        for part in 0..s.units.len() {
            let unit = &mut s.units[part];
            let reads: Vec<(usize, u64, u64)> = match &unit.target {
                SyncTarget::Stripe(stripe) => (0..self.slots.len()).map(|slot| (slot, stripe * chunk, chunk)).collect(),
                SyncTarget::Copies(copies, len) => copies.iter().map(|&(slot, off)| (slot, off, *len)).collect(),
            };
            unit.pending = reads.len();
            for (slot, off, len) in reads {
                self.emit(rid, IoTag { part, slot }, off, MemberOp::Read { len });
            }
        }
        s.remaining = s.units.len();
        (s.remaining == 0).then_some(Ok(()))
    }

    fn sync_io_done(&mut self, rid: RequestId, s: &mut SyncOp, tag: IoTag, result: IoResult) -> bool {
        let unit = &mut s.units[tag.part];
        unit.pending -= 1;
        match result {
            IoResult::Read(data) => unit.blocks[tag.slot] = Some(data),
            IoResult::Done => {}
            IoResult::Failed(_) => {
                s.error.get_or_insert(EngineError::DegradedCheck);
            }
        }
        if unit.pending > 0 {
            return false;
        }
        if unit.writing || s.error.is_some() {
            s.remaining -= 1;
            return s.remaining == 0;
        }
        let mut writes: Vec<(usize, u64, Vec<u8>)> = Vec::new();
        let chunk = self.geometry.chunk_bytes();
        match &unit.target {
            SyncTarget::Stripe(stripe) => {
                let roles = self.geometry.stripe_roles(*stripe);
                let data: Vec<Vec<u8>> = roles.data.iter().map(|&d| unit.blocks[d].take().expect("read")).collect();
                let len = chunk as usize;
                let (p, q) = compute_parity(&roles, &data, len);
                let mut targets = vec![(roles.p, p)];
                if let (Some(qs), Some(q)) = (roles.q, q) {
                    targets.push((qs, q));
                }
                let stored: Vec<Vec<u8>> = targets.iter().map(|(slot, _)| unit.blocks[*slot].take().expect("read")).collect();
                for row in (0..chunk).step_by(CHECK_ROW_BYTES as usize) {
                    let r = row as usize..(row + CHECK_ROW_BYTES).min(chunk) as usize;
                    let bad = targets.iter().zip(&stored).any(|((_, want), have)| want[r.clone()] != have[r.clone()]);
                    if bad {
                        s.mismatch_sectors += (r.end - r.start) as u64 / SECTOR_BYTES;
                        if s.repair {
                            for (slot, want) in &targets {
                                writes.push((*slot, stripe * chunk + row, want[r.clone()].to_vec()));
                            }
                        }
                    }
                }
            }
            SyncTarget::Copies(copies, len) => {
                let first = unit.blocks[copies[0].0].take().expect("read");
                for row in (0..*len).step_by(CHECK_ROW_BYTES as usize) {
                    let r = row as usize..(row + CHECK_ROW_BYTES).min(*len) as usize;
                    let mut bad = false;
                    for &(slot, off) in &copies[1..] {
                        let other = unit.blocks[slot].as_ref().expect("read");
                        if other[r.clone()] != first[r.clone()] {
                            bad = true;
                            if s.repair {
                                writes.push((slot, off + row, first[r.clone()].to_vec()));
                            }
                        }
                    }
                    if bad {
                        s.mismatch_sectors += (r.end - r.start) as u64 / SECTOR_BYTES;
                    }
                }
            }
        }
        unit.blocks.iter_mut().for_each(|b| *b = None);
        if writes.is_empty() {
            s.remaining -= 1;
            return s.remaining == 0;
        }
        unit.writing = true;
        unit.pending = writes.len();
        for (slot, off, data) in writes {
            self.emit(rid, IoTag { part: tag.part, slot }, off, MemberOp::Write { data });
        }
        false
    }
}

fn check_range(offset: u64, len: u64, size: u64) -> Result<(), EngineError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(EngineError::OutOfRange { offset, len, size }),
    }
}

/// P (and Q) over the data blocks of a stripe, given in data-index order.
pub fn compute_parity(roles: &StripeRoles, data: &[Vec<u8>], len: usize) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut p = vec![0u8; len];
    match roles.q {
        None => {
            let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            uraid_parity::gen_p(&mut p, &refs);
            (p, None)
        }
        Some(_) => {
            let zero = vec![0u8; len];
            let mut by_slot: Vec<&[u8]> = vec![&zero; roles.syndrome_disks];
            for (i, &member) in roles.data.iter().enumerate() {
                let slot = roles.syndrome_slot[member].expect("data member has a syndrome slot");
                by_slot[slot] = &data[i];
            }
            let mut q = vec![0u8; len];
            uraid_parity::gen_pq(&mut p, &mut q, &by_slot);
            (p, Some(q))
        }
    }
}

/// Fill in `blocks[m]` for every member `m` in `missing` (at most the level's redundancy),
/// from the others. `blocks` is indexed by member slot.
pub fn reconstruct(roles: &StripeRoles, blocks: &mut [Option<Vec<u8>>], missing: &[usize], len: usize) {
    if missing.is_empty() {
        return;
    }
    match roles.q {
        None => {
            assert_eq!(missing.len(), 1, "raid4/5 can rebuild one member");
            let m = missing[0];
            let mut out = vec![0u8; len];
            for (slot, b) in blocks.iter().enumerate() {
                if slot != m {
                    uraid_parity::xor_into(&mut out, b.as_ref().expect("surviving member was read"));
                }
            }
            blocks[m] = Some(out);
        }
        Some(q) => {
            assert!(missing.len() <= 2, "raid6 can rebuild two members");
            let n = roles.syndrome_disks;
            // Arrange as the parity crate wants: data by syndrome slot, then P, then Q.
            let mut arranged: Vec<Vec<u8>> = vec![vec![0u8; len]; n + 2];
            let index_of = |member: usize| -> usize {
                if member == roles.p {
                    n
                } else if member == q {
                    n + 1
                } else {
                    roles.syndrome_slot[member].expect("data member has a syndrome slot")
                }
            };
            for (member, b) in blocks.iter().enumerate() {
                if let Some(b) = b {
                    arranged[index_of(member)].copy_from_slice(b);
                }
            }
            let lost: Vec<usize> = missing.iter().map(|&m| index_of(m)).collect();
            let mut refs: Vec<&mut [u8]> = arranged.iter_mut().map(Vec::as_mut_slice).collect();
            uraid_parity::raid6_recover(&mut refs, &lost);
            for &m in missing {
                blocks[m] = Some(arranged[index_of(m)].clone());
            }
        }
    }
}

#[derive(Debug)]
struct ReadOp {
    offset: u64,
    len: u64,
    buf: Vec<u8>,
    parts: Vec<ReadPart>,
    remaining: usize,
    error: Option<EngineError>,
}

impl ReadOp {
    fn new(offset: u64, len: u64) -> ReadOp {
        ReadOp { offset, len, buf: vec![0u8; len as usize], parts: Vec::new(), remaining: 0, error: None }
    }
}

#[derive(Debug)]
enum ReadPart {
    Copies { logical: u64, len: u64, copies: Vec<(usize, u64)>, tried: usize },
    Parity { run: ParityRun, recon: Option<Recon> },
}

#[derive(Debug)]
struct Recon {
    blocks: Vec<Option<Vec<u8>>>,
    pending: usize,
    failed: bool,
}

#[derive(Debug)]
struct DiscardOp {
    offset: u64,
    len: u64,
    pending: usize,
    /// Per part, how many copies were zeroed.
    parts: Vec<usize>,
}

#[derive(Debug)]
struct CopyWriteOp {
    offset: u64,
    data: Vec<u8>,
    parts: Vec<CopyWritePart>,
    pending: usize,
    error: Option<EngineError>,
}

#[derive(Debug)]
struct CopyWritePart {
    /// Copies of this part written successfully.
    written: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// Every parity member is gone: just write the data.
    DataOnly,
    /// Read old data and parity, apply the difference (md's rmw).
    ReadModifyWrite,
    /// Read the data not being overwritten, compute parity afresh (md's rcw).
    ReconstructWrite,
    /// A member we need is missing: read every survivor, rebuild, then write.
    Degraded,
}

#[derive(Debug)]
struct ParityWriteOp {
    offset: u64,
    data: Vec<u8>,
    stripes: Vec<StripeWrite>,
    remaining: usize,
    error: Option<EngineError>,
}

#[derive(Debug)]
struct StripeWrite {
    stripe: u64,
    runs: Vec<ParityRun>,
    lo: u64,
    hi: u64,
    strategy: Strategy,
    blocks: Vec<Option<Vec<u8>>>,
    pending: usize,
    failed_read: bool,
    writing: bool,
}

impl StripeWrite {
    fn new(run: ParityRun) -> StripeWrite {
        StripeWrite {
            stripe: run.stripe,
            runs: vec![run],
            lo: 0,
            hi: 0,
            strategy: Strategy::DataOnly,
            blocks: Vec::new(),
            pending: 0,
            failed_read: false,
            writing: false,
        }
    }
}

#[derive(Debug)]
struct SyncOp {
    offset: u64,
    len: u64,
    repair: bool,
    units: Vec<SyncUnit>,
    remaining: usize,
    mismatch_sectors: u64,
    error: Option<EngineError>,
}

impl SyncOp {
    fn new(offset: u64, len: u64, repair: bool) -> SyncOp {
        SyncOp { offset, len, repair, units: Vec::new(), remaining: 0, mismatch_sectors: 0, error: None }
    }
}

#[derive(Debug)]
struct SyncUnit {
    target: SyncTarget,
    blocks: Vec<Option<Vec<u8>>>,
    pending: usize,
    writing: bool,
}

#[derive(Debug)]
enum SyncTarget {
    Stripe(u64),
    Copies(Vec<(usize, u64)>, u64),
}
