//! Accepting requests and running them in order: the range checks, the logical byte ranges each
//! request locks (whole stripes on parity levels), starting every request that no earlier one
//! conflicts with, and finishing them.

use bytes::Bytes;
use smallvec::{smallvec, SmallVec};

use super::copy_write::CopyWriteOp;
use super::discard::DiscardOp;
use super::emit::IoTag;
use super::parity_write::ParityWriteOp;
use super::read::ReadOp;
use super::recover::RecoverOp;
use super::sync::SyncOp;
use super::write_data::WriteData;
use super::write_gather::HeldWrite;
use super::{Array, Completion, Request, RequestId};
use crate::error::EngineError;
use crate::geometry::Redundancy;
use crate::member_io::MemberOp;
use crate::slot::SlotState;

/// A logical byte range `[start, end)` an op holds, and whether it holds it exclusively (writes).
type Lock = (u64, u64, bool);

/// A request's locks: one range but for recovery, held inline so that submitting does not
/// allocate.
pub(super) type Locks = SmallVec<[Lock; 1]>;

#[derive(Debug)]
pub(super) struct Op {
    pub(super) kind: OpKind,
    /// Logical byte ranges this op must not share with a conflicting op.
    locks: Locks,
}

// A read is the largest kind (its first part and pieces are inline); boxing it would put back
// the allocation per request the inline lists save.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum OpKind {
    Read(ReadOp),
    Write(CopyWriteOp),
    ParityWrite(ParityWriteOp),
    Flush { pending: usize, ok: usize },
    Sync(SyncOp),
    Discard(DiscardOp),
    Recover(RecoverOp),
}

impl Array {
    /// Accept a request. Errors at once for a range outside the array (outside the members'
    /// data for `Recover`), and for a `Recover` that has nothing to do. A request may finish
    /// before this returns, without any member I/O (a read served from what the `split` policy
    /// read ahead, an empty read): drivers look at [`Array::next_completion`] after submitting,
    /// not only after completing member I/O.
    pub fn submit(&mut self, request: Request) -> Result<RequestId, EngineError> {
        let request = match request {
            Request::Write { offset, data } if self.should_hold(offset, data.len() as u64) => {
                check_range(offset, data.len() as u64, self.size_bytes())?;
                let id = self.next_request;
                self.next_request += 1;
                self.hold(HeldWrite { id, offset, data });
                return Ok(id);
            }
            other => other,
        };
        // Held writes go in before anything that came after them.
        self.release_held();
        let size = self.size_bytes();
        let locks: Locks = match &request {
            Request::Read { offset, len } => {
                check_range(*offset, *len, size)?;
                // A read error on a mirror is corrected in whole rows, which no write may change
                // meanwhile.
                let (start, wide) = self.mirror_rows(*offset, *len, size);
                smallvec![(start, start + wide, false)]
            }
            Request::Write { offset, data } => {
                check_range(*offset, data.len() as u64, size)?;
                smallvec![(*offset, offset + data.len() as u64, true)]
            }
            Request::Sync { offset, len, .. } => {
                check_range(*offset, *len, size)?;
                let (start, wide) = self.mirror_rows(*offset, *len, size);
                smallvec![(start, start + wide, true)]
            }
            Request::Discard { offset, len } => {
                check_range(*offset, *len, size)?;
                if self.log.is_some() {
                    return Err(EngineError::DiscardWithLog);
                }
                if let Some(width) = self.geometry.stripe_data_bytes() {
                    if offset % width != 0 || len % width != 0 {
                        return Err(EngineError::Unaligned { offset: *offset, len: *len, granularity: width });
                    }
                }
                smallvec![(*offset, offset + len, true)]
            }
            Request::Recover { offset, len } => {
                if self.geometry.max_degraded() == 0 {
                    return Err(EngineError::NoRedundancy { level: self.geometry.name().to_string() });
                }
                check_range(*offset, *len, self.geometry.member_data_bytes())?;
                if !self.slots.contains(&SlotState::Recovering) {
                    return Err(EngineError::NothingToRecover);
                }
                let (start, wide) = self.mirror_rows(*offset, *len, self.geometry.member_data_bytes());
                self.recover_locks(start, wide).into()
            }
            Request::Flush => Locks::new(),
        };
        let id = self.next_request;
        self.next_request += 1;
        let kind = match request {
            Request::Read { offset, len } => OpKind::Read(ReadOp::new(offset, len)),
            Request::Write { offset, data } => self.write_op(offset, data),
            Request::Flush => OpKind::Flush { pending: 0, ok: 0 },
            Request::Sync { offset, len, repair } => OpKind::Sync(SyncOp::new(offset, len, repair)),
            Request::Discard { offset, len } => {
                OpKind::Discard(DiscardOp { offset, len, pending: 0, parts: Vec::new() })
            }
            Request::Recover { offset, len } => {
                OpKind::Recover(RecoverOp { offset, len, units: Vec::new(), remaining: 0, error: None })
            }
        };
        self.enqueue(id, kind, locks);
        Ok(id)
    }

    /// Put in a parity write under `id` (already numbered: writes held while plugged,
    /// released).
    pub(super) fn enqueue_parity_write(&mut self, id: RequestId, offset: u64, data: WriteData) {
        let locks = smallvec![(offset, offset + data.len() as u64, true)];
        self.enqueue(id, OpKind::ParityWrite(ParityWriteOp::new(offset, data)), locks);
    }

    fn write_op(&self, offset: u64, data: Bytes) -> OpKind {
        if self.geometry.is_parity() {
            OpKind::ParityWrite(ParityWriteOp::new(offset, WriteData::from(data)))
        } else {
            OpKind::Write(CopyWriteOp {
                offset,
                data,
                parts: SmallVec::new(),
                pending: 0,
                error: None,
                groups: Vec::new(),
            })
        }
    }

    /// Queue request `id` behind every earlier one it conflicts with, and start what can start.
    fn enqueue(&mut self, id: RequestId, kind: OpKind, locks: Locks) {
        // Parity is shared by a whole stripe: lock whole stripes.
        let stripe_data_bytes = self.geometry.stripe_data_bytes();
        let locks = locks
            .into_iter()
            .map(|(s, e, w)| match stripe_data_bytes {
                Some(width) => (s / width * width, e.div_ceil(width) * width, w),
                None => (s, e, w),
            })
            .collect();
        self.ops.insert(id, Op { kind, locks });
        self.waiting.push_back(id);
        self.start_ready();
        self.admit_waiting();
    }

    /// Start every waiting request that no earlier request conflicts with, in arrival order.
    fn start_ready(&mut self) {
        if self.starting {
            self.rescan = true;
            return;
        }
        self.starting = true;
        loop {
            self.rescan = false;
            // Each request waiting now is looked at once; those that must wait on go to the
            // back, in their order (the deque keeps its buffer: no allocation per request).
            let mut blocked: Vec<Lock> = Vec::new();
            for _ in 0..self.waiting.len() {
                let rid = self.waiting.pop_front().expect("counted");
                let locks = self.ops[&rid].locks.clone();
                let conflicts = |other: &Lock| locks.iter().any(|l| (l.2 || other.2) && l.0 < other.1 && other.0 < l.1);
                let busy =
                    self.running.iter().any(|(_, held)| held.iter().any(conflicts)) || blocked.iter().any(conflicts);
                if busy {
                    blocked.extend(locks.iter().copied());
                    self.waiting.push_back(rid);
                    continue;
                }
                if !locks.is_empty() {
                    self.running.push((rid, locks));
                }
                self.start(rid);
            }
            if !self.rescan {
                break;
            }
        }
        self.starting = false;
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
                        if self.writable(slot) {
                            *pending += 1;
                            self.emit(rid, IoTag { part: 0, slot }, 0, MemberOp::Flush);
                        }
                    }
                    (*pending == 0).then_some(Ok(()))
                }
                OpKind::Sync(s) => self.start_sync(rid, s),
                OpKind::Discard(d) => self.start_discard(rid, d),
                OpKind::Recover(r) => self.start_recover(rid, r),
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

    pub(super) fn finish(&mut self, rid: RequestId, op: Op) {
        let result = match op.kind {
            OpKind::Read(r) => match r.error {
                Some(e) => Err(e),
                None => Ok(Completion::Read(r.assembly.finish())),
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
            // As for writes: a part none of whose in-sync copies was zeroed is lost.
            OpKind::Discard(d) => {
                if d.parts.contains(&0) || !self.readable() {
                    Err(EngineError::ArrayFailed)
                } else {
                    Ok(Completion::Written)
                }
            }
            OpKind::Recover(r) => match r.error {
                Some(e) => Err(e),
                None => Ok(Completion::Recovered),
            },
        };
        self.finish_result(rid, result);
    }

    fn finish_result(&mut self, rid: RequestId, result: Result<Completion, EngineError>) {
        self.finish_riders(rid, &result);
        self.finished.push_back((rid, result));
        self.running.retain(|(r, _)| *r != rid);
        self.start_ready();
    }

    /// Locks for rebuilding member bytes `[offset, offset+len)`: the logical ranges stored
    /// there, as exclusive locks, so foreground writes and the rebuild never interleave.
    fn recover_locks(&self, offset: u64, len: u64) -> Vec<Lock> {
        let end = offset + len;
        match self.geometry.redundancy() {
            // Stripe s occupies member bytes [s*chunk, (s+1)*chunk) on every member.
            Redundancy::Parity { .. } => {
                let chunk = self.geometry.chunk_bytes();
                let width = self.geometry.stripe_data_bytes().expect("parity geometry");
                vec![(offset / chunk * width, end.div_ceil(chunk) * width, true)]
            }
            // The logical data of a member range may be scattered (raid10's far copies, near
            // copies on other members). Which slots the request rebuilds is decided when it
            // starts, so lock what the range holds on every slot: correct whatever is
            // recovering by then.
            Redundancy::Copies => {
                let mut ranges: Vec<(u64, u64)> = Vec::new();
                for slot in 0..self.slots.len() {
                    for (_, run) in self.geometry.member_runs(slot, offset, len) {
                        ranges.push((run.logical, run.logical + run.len));
                    }
                }
                ranges.sort_unstable();
                let mut merged: Vec<Lock> = Vec::new();
                for (s, e) in ranges {
                    match merged.last_mut() {
                        Some(last) if s <= last.1 => last.1 = last.1.max(e),
                        _ => merged.push((s, e, true)),
                    }
                }
                merged
            }
            Redundancy::None => Vec::new(),
        }
    }
}

pub(crate) fn check_range(offset: u64, len: u64, size: u64) -> Result<(), EngineError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(EngineError::OutOfRange { offset, len, size }),
    }
}
