//! Member I/Os going out: the tag that routes each result back to the part of the request that
//! issued it, what the engine remembers of an I/O until its result is back, and that result as
//! the requests see it.

use bytes::Bytes;

use super::{Array, RequestId};
use crate::iobuf::IoBuf;
use crate::member_io::{MemberIo, MemberOp};
use crate::read_latency::ReadTiming;

/// Sub-identifier of an I/O inside its op: which part, and which slot.
#[derive(Debug, Clone, Copy)]
pub(super) struct IoTag {
    pub(super) part: usize,
    pub(super) slot: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IoKind {
    Read,
    Write,
    /// Writes back bytes whose read failed; once written they are read again ([`IoKind::Reread`]).
    Correction,
    /// Reads back what a correction wrote, as md's `fix_read_error` does: a sector that still
    /// cannot be read once rewritten (a drive that took the write but could not remap the
    /// sector) fails its member. The request waits for it as it did for the correction.
    Reread,
    Other,
}

/// What the engine remembers of an emitted member I/O.
#[derive(Debug, Clone, Copy)]
pub(super) struct Emitted {
    pub(super) rid: RequestId,
    pub(super) tag: IoTag,
    /// The slot's generation when the I/O was issued (see [`Array::generation`]).
    pub(super) generation: u64,
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) kind: IoKind,
    /// A data read, write or discard: where it ends is where the member's head will be.
    pub(super) moves_head: bool,
    /// A read, when the driver tells the time: when it went out, to measure its latency.
    pub(super) timing: Option<ReadTiming>,
}

/// A member I/O's result as the ops see it.
#[derive(Debug)]
pub(super) enum Outcome {
    Data(Bytes),
    Done,
    /// A read from an in-sync member failed. The member keeps its state: the op rebuilds the
    /// bytes from redundancy and writes them back.
    ReadError,
    /// The I/O failed (a write: the member is faulty now), or its slot changed state since it
    /// was issued: the result is not to be used.
    Lost,
}

impl Outcome {
    pub(super) fn succeeded(&self) -> bool {
        matches!(self, Outcome::Data(_) | Outcome::Done)
    }
}

impl Array {
    pub(super) fn emit_io(&mut self, rid: RequestId, tag: IoTag, offset: u64, op: MemberOp, kind: IoKind) {
        let id = self.next_io;
        self.next_io += 1;
        let len = match &op {
            MemberOp::Read { len } | MemberOp::Discard { len } => *len,
            MemberOp::Write { data } => data.len() as u64,
            MemberOp::LogWrite { data } => data.len() as u64,
            MemberOp::MetadataWrite { data } => data.len() as u64,
            MemberOp::Flush => 0,
        };
        // Log writes land in the log area, not at a data offset.
        let moves_head = matches!(op, MemberOp::Read { .. } | MemberOp::Write { .. } | MemberOp::Discard { .. });
        let timing = match op {
            MemberOp::Read { .. } => self.balance.read_started(tag.slot, len),
            _ => None,
        };
        self.balance.issued(tag.slot, offset, len, moves_head);
        let generation = self.generation[tag.slot];
        self.io_owner.insert(id, Emitted { rid, tag, generation, offset, len, kind, moves_head, timing });
        self.outbox.push_back(MemberIo { id, slot: tag.slot, offset, op });
    }

    pub(super) fn emit(&mut self, rid: RequestId, tag: IoTag, offset: u64, op: MemberOp) {
        let kind = match op {
            MemberOp::Read { .. } => IoKind::Read,
            MemberOp::Write { .. } => IoKind::Write,
            MemberOp::Flush | MemberOp::Discard { .. } | MemberOp::LogWrite { .. } | MemberOp::MetadataWrite { .. } => {
                IoKind::Other
            }
        };
        self.emit_io(rid, tag, offset, op, kind);
    }

    /// Write back bytes whose read from an in-sync member failed.
    pub(super) fn emit_correction(&mut self, rid: RequestId, tag: IoTag, offset: u64, data: IoBuf) {
        self.emit_io(rid, tag, offset, MemberOp::Write { data }, IoKind::Correction);
    }
}
