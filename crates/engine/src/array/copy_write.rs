//! Writes on levels without parity (linear, raid0, raid1, raid10): every copy of every run
//! written, and a run lost when none of its in-sync copies took the write.

use bytes::Bytes;
use smallvec::SmallVec;

use super::emit::{IoTag, Outcome};
use super::write_merge::{GroupParts, PartWrites, GROUP_PART};
use super::{Array, RequestId};
use crate::error::EngineError;
use crate::iobuf::IoBuf;

#[derive(Debug)]
pub(super) struct CopyWriteOp {
    pub(super) offset: u64,
    pub(super) data: Bytes,
    /// Inline for a small write (one or two runs).
    pub(super) parts: SmallVec<[CopyWritePart; 2]>,
    /// Counted per part and copy, merged writes included.
    pub(super) pending: usize,
    pub(super) error: Option<EngineError>,
    /// The parts each merged member write covers (tag part `GROUP_PART + index`).
    pub(super) groups: Vec<GroupParts>,
}

#[derive(Debug)]
pub(super) struct CopyWritePart {
    /// In-sync copies of this part written successfully.
    written: usize,
}

impl Array {
    pub(super) fn start_copy_write(&mut self, rid: RequestId, w: &mut CopyWriteOp) -> Option<Result<(), EngineError>> {
        self.readahead_write(w.offset, &w.data);
        let runs = self.geometry.runs(w.offset, w.data.len() as u64);
        let mut writes = PartWrites::new();
        for (part, run) in runs.into_iter().enumerate() {
            let at = (run.logical - w.offset) as usize;
            let bytes = w.data.slice(at..at + run.len as usize);
            let mut in_sync_targets = 0;
            for &(slot, off) in &run.copies {
                if self.writable(slot) {
                    in_sync_targets += usize::from(self.in_sync(slot));
                    w.pending += 1;
                    writes.push((part, slot, off, IoBuf::from(bytes.clone())));
                }
            }
            w.parts.push(CopyWritePart { written: 0 });
            if in_sync_targets == 0 {
                w.error.get_or_insert(EngineError::ArrayFailed);
            }
        }
        // The runs one member holds of consecutive chunks (raid0's stripes, linear's spans,
        // raid10's copies) are often contiguous on it: one write each.
        self.emit_merged_writes(rid, &mut w.groups, writes);
        (w.pending == 0).then_some(Ok(()))
    }

    pub(super) fn copy_write_io_done(&mut self, w: &mut CopyWriteOp, tag: IoTag, outcome: Outcome) -> bool {
        if tag.part >= GROUP_PART {
            let ok = outcome.succeeded();
            let mut done = false;
            for part in w.groups[tag.part - GROUP_PART].clone() {
                let each = if ok { Outcome::Done } else { Outcome::Lost };
                done = self.copy_write_io_done(w, IoTag { part, slot: tag.slot }, each);
            }
            return done;
        }
        w.pending -= 1;
        // Only an in-sync copy holds the data for reads; a recovering one is a bonus.
        if outcome.succeeded() && self.in_sync(tag.slot) {
            w.parts[tag.part].written += 1;
        }
        if w.pending == 0 {
            // A part whose every in-sync copy failed is lost; otherwise the failed copies are
            // faulty now and the array carries on degraded, as md does.
            if w.parts.iter().any(|p| p.written == 0) || !self.readable() {
                w.error.get_or_insert(EngineError::ArrayFailed);
            }
            return true;
        }
        false
    }
}
