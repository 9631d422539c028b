//! What a metadata change to a stopped array writes: per member, the areas beside the
//! superblock (a bitmap) and then the superblock itself, every superblock one event further on,
//! as md's next superblock update after such a change would leave them.

use uraid_md_format::{Superblock, SECTOR};

/// A member of a stopped array, as a change to its metadata sees it.
#[derive(Debug, Clone)]
pub struct StoppedMember {
    /// The device's name, for messages.
    pub name: String,
    pub superblock: Superblock,
    /// The device's size in sectors.
    pub device_sectors: u64,
}

/// Bytes to write at a byte offset of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AreaWrite {
    pub offset: u64,
    pub bytes: Vec<u8>,
    /// What the bytes are ("bitmap"), for messages.
    pub what: &'static str,
}

/// The writes of one change, member by member in the order given.
#[derive(Debug, Clone)]
pub struct OfflineChange {
    /// Per member: areas to write before any superblock (written and flushed on every member
    /// first, as md writes its bitmap before the superblocks that name it).
    pub areas: Vec<Vec<AreaWrite>>,
    /// Per member: the new superblock, written at its own offset once every area is down.
    pub superblocks: Vec<Superblock>,
}

impl OfflineChange {
    /// Byte offset of member `i`'s superblock.
    pub fn superblock_offset(&self, i: usize) -> u64 {
        self.superblocks[i].info().super_offset * SECTOR
    }
}

/// Every member's superblock as the change finds it, one event further on (md counts every
/// superblock update) and updated at `utime`.
pub fn stamped(members: &[StoppedMember], utime: u64) -> Vec<Superblock> {
    let events = next_events(members);
    members
        .iter()
        .map(|m| {
            let mut sb = m.superblock.clone();
            sb.set_events(events);
            sb.set_utime(utime);
            sb
        })
        .collect()
}

/// The event count a change records: one past the highest any member holds.
pub fn next_events(members: &[StoppedMember]) -> u64 {
    members.iter().map(|m| m.superblock.info().events).max().unwrap_or(0) + 1
}
