//! The engine's errors, in words for the person running uraid.

use crate::slot::SlotState;

/// What went wrong, in words for the person running uraid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("no members given")]
    NoMembers,
    #[error("{first} belongs to array {first_uuid} but {other} belongs to array {other_uuid}: members of two different arrays")]
    MixedArrays { first: String, first_uuid: String, other: String, other_uuid: String },
    #[error("{member}: superblock disagrees with the array: {detail}")]
    Inconsistent { member: String, detail: String },
    /// The members describe an array in a state uraid cannot run (yet), said in `detail`.
    #[error("{member}: {detail}")]
    Unsupported { member: String, detail: String },
    #[error("{member}: {source}")]
    Layout { member: String, source: uraid_layout::LayoutError },
    #[error("too few members to run this {level} array: {present} of {raid_disks} slots filled (missing slot {missing}){left_out}")]
    TooFewMembers { level: String, raid_disks: usize, present: usize, missing: String, left_out: String },
    #[error("range {offset}+{len} is outside the array (size {size} bytes)")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    #[error("range {offset}+{len} is not aligned to whole stripes of {granularity} bytes")]
    Unaligned { offset: u64, len: u64, granularity: u64 },
    #[error("array has failed: too many members lost to serve this request")]
    ArrayFailed,
    #[error("cannot check redundancy of a degraded array")]
    DegradedCheck,
    #[error("discard is not passed to the members of an array with a partial parity log (md's raid5 ignores discards too unless the members promise zeroes)")]
    DiscardWithLog,
    #[error("slot {slot}: reading {len} bytes at member offset {offset} failed, and no other copy or redundancy is left to rebuild them")]
    UnrecoverableRead { slot: usize, offset: u64, len: u64 },
    #[error("there is no slot {slot}: the array has {raid_disks} slots")]
    NoSuchSlot { slot: usize, raid_disks: usize },
    #[error("slot {slot} cannot go from {from} to {to} (allowed: missing/faulty to recovering, recovering to in sync, in sync/recovering to faulty, faulty to missing)")]
    InvalidSlotChange { slot: usize, from: SlotState, to: SlotState },
    #[error("failing slot {slot} would leave data that no remaining in-sync member holds; refused unless forced")]
    WouldFailArray { slot: usize },
    #[error("slot {slot} cannot be in sync before its plex is rebuilt, and the plex is rebuilt only once every member of it is back (slot {waiting} is not)")]
    PlexNotRevived { slot: usize, waiting: usize },
    #[error("plex {plex} keeps no parity of its own, or there is no such plex (the array has {plexes} plexes)")]
    NoParityPlex { plex: usize, plexes: usize },
    #[error("no slot is recovering: there is nothing to rebuild")]
    NothingToRecover,
    #[error("a {level} array has no redundancy to rebuild a member from")]
    NoRedundancy { level: String },
}
