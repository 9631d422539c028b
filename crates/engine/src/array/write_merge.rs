//! Merged member writes: the member writes of a request that continue one another on a member go
//! out as one vectored write, whose result is then counted for every part it covers.

use smallvec::{smallvec, SmallVec};

use super::emit::IoTag;
use super::{Array, RequestId, MAX_MERGE_BYTES};
use crate::iobuf::IoBuf;
use crate::member_io::MemberOp;

/// Tag parts from here on name a group of merged writes (`GROUP_PART + index`), not one part.
pub(super) const GROUP_PART: usize = usize::MAX / 2;

/// A member write of one part of a request, before merging: `(part, slot, member offset, bytes)`.
type PartWrite = (usize, usize, u64, IoBuf);

/// The member writes of a request, inline for a small one (one run, up to four copies).
pub(super) type PartWrites = SmallVec<[PartWrite; 4]>;

/// The parts one merged member write covers.
pub(super) type GroupParts = SmallVec<[usize; 2]>;

impl Array {
    /// Emit `writes` (of the request's parts) merged per member (see [`merge_writes`]): a write
    /// covering one part is tagged with it, one covering several with `GROUP_PART` plus its
    /// index in `groups`, where the parts it covers are recorded.
    pub(super) fn emit_merged_writes(&mut self, rid: RequestId, groups: &mut Vec<GroupParts>, writes: PartWrites) {
        for (slot, off, data, parts) in merge_writes(writes) {
            let part = match parts[..] {
                [part] => part,
                _ => {
                    groups.push(parts);
                    GROUP_PART + groups.len() - 1
                }
            };
            self.emit(rid, IoTag { part, slot }, off, MemberOp::Write { data });
        }
    }
}

/// Merge member writes `(part, slot, member offset, bytes)` that continue one another on the
/// same member into one write, up to [`MAX_MERGE_BYTES`]: `(slot, offset, bytes, parts)` with
/// the parts each write covers, in the order of the first write of each merged run.
fn merge_writes(mut writes: PartWrites) -> SmallVec<[(usize, u64, IoBuf, GroupParts); 4]> {
    let mut sorted: SmallVec<[(usize, u64, usize); 4]> =
        writes.iter().enumerate().map(|(i, w)| (w.1, w.2, i)).collect();
    sorted.sort_unstable();
    let mut out: SmallVec<[(usize, u64, IoBuf, GroupParts); 4]> = SmallVec::new();
    for (slot, off, i) in sorted {
        let (part, _, _, data) = std::mem::take(&mut writes[i]);
        if let Some(last) = out.last_mut() {
            let end = last.1 + last.2.len() as u64;
            if last.0 == slot && end == off && last.2.len() + data.len() <= MAX_MERGE_BYTES as usize {
                // A vectored write of the pieces where they are: no copy.
                for piece in data.into_pieces() {
                    last.2.push(piece);
                }
                last.3.push(part);
                continue;
            }
        }
        out.push((slot, off, data, smallvec![part]));
    }
    out
}
