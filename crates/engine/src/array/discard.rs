//! Discards: the member ranges under a logical range zeroed (deallocated where the members can).

use super::emit::IoTag;
use super::{Array, RequestId};
use crate::error::EngineError;
use crate::member_io::MemberOp;

#[derive(Debug)]
pub(super) struct DiscardOp {
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) pending: usize,
    /// Per part, how many in-sync copies were zeroed.
    pub(super) parts: Vec<usize>,
}

impl Array {
    pub(super) fn start_discard(&mut self, rid: RequestId, d: &mut DiscardOp) -> Option<Result<(), EngineError>> {
        if d.len == 0 {
            return Some(Ok(()));
        }
        self.readahead_forget(d.offset, d.len);
        match self.geometry.stripe_data_bytes() {
            // Whole stripes (checked at submit) occupy the same member range on every slot, data
            // and parity alike: one discard per live member.
            Some(width) => {
                let chunk = self.geometry.chunk_bytes();
                let first = d.offset / width;
                let stripes = d.len / width;
                d.parts.push(0);
                for slot in 0..self.slots.len() {
                    if self.writable(slot) {
                        d.pending += 1;
                        self.emit(
                            rid,
                            IoTag { part: 0, slot },
                            first * chunk,
                            MemberOp::Discard { len: stripes * chunk },
                        );
                    }
                }
            }
            None => {
                for (part, run) in self.geometry.runs(d.offset, d.len).into_iter().enumerate() {
                    d.parts.push(0);
                    for &(slot, off) in &run.copies {
                        if self.writable(slot) {
                            d.pending += 1;
                            self.emit(rid, IoTag { part, slot }, off, MemberOp::Discard { len: run.len });
                        }
                    }
                }
            }
        }
        (d.pending == 0).then_some(Err(EngineError::ArrayFailed))
    }
}
