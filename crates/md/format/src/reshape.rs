//! md's record of a reshape in progress: the fields `super_1_validate` and `super_90_validate`
//! take into `mddev` when the superblock says one runs (1.x `MD_FEATURE_RESHAPE_ACTIVE`, 0.90
//! minor version 91).
//!
//! While a reshape runs, md keeps the array's old shape in `level`, `layout` and `chunk` and the
//! new one in `new_level`, `new_layout` and `new_chunk`; `raid_disks` already counts the new
//! members, and `delta_disks` says how many more than before. `reshape_position` is the array
//! sector the reshape has reached: below it (above it, for a reshape that runs backwards) the
//! data is in the new shape, the rest still in the old one.

use crate::SECTOR;

/// A reshape recorded in a superblock, in md's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reshape {
    /// The array sector the reshape has reached (`reshape_position`).
    pub position: u64,
    /// How many members the array gains (negative: loses); `raid_disks` is the new count.
    pub delta_disks: i32,
    /// The level the array is reshaped to.
    pub new_level: i32,
    /// The layout it is reshaped to.
    pub new_layout: i32,
    /// The chunk size it is reshaped to, in sectors.
    pub new_chunk_sectors: u32,
    /// The reshape runs from the end of the array to its start (md's `reshape_backwards`): data
    /// above `position` is in the new shape.
    pub backwards: bool,
    /// Where data starts on this member in the new shape, relative to its current data offset
    /// (1.x `new_offset` with `MD_FEATURE_NEW_OFFSET`, in sectors); 0 when it does not move.
    pub new_offset: i64,
}

impl Reshape {
    /// md's `reshape_backwards` as `super_1_validate` derives it: a reshape that removes members
    /// runs backwards, and so does one that keeps their number and says so.
    pub fn is_backwards(delta_disks: i32, backwards_flag: bool) -> bool {
        delta_disks < 0 || (delta_disks == 0 && backwards_flag)
    }

    /// The number of members before the reshape, given the superblock's `raid_disks`.
    pub fn old_raid_disks(&self, raid_disks: u32) -> u32 {
        (i64::from(raid_disks) - i64::from(self.delta_disks)).max(0) as u32
    }

    /// The position in bytes of the array.
    pub fn position_bytes(&self) -> u64 {
        self.position.saturating_mul(SECTOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direction_follows_super_1_validate() {
        assert!(!Reshape::is_backwards(1, false));
        assert!(!Reshape::is_backwards(1, true), "a growing reshape runs forwards whatever the flag");
        assert!(Reshape::is_backwards(-1, false), "a shrinking one runs backwards");
        assert!(Reshape::is_backwards(0, true));
        assert!(!Reshape::is_backwards(0, false));
    }

    #[test]
    fn old_member_count() {
        let r = Reshape {
            position: 6144,
            delta_disks: 1,
            new_level: 5,
            new_layout: 2,
            new_chunk_sectors: 128,
            backwards: false,
            new_offset: -256,
        };
        assert_eq!(r.old_raid_disks(5), 4);
        assert_eq!(r.position_bytes(), 6144 * 512);
        assert_eq!(Reshape { delta_disks: -1, ..r }.old_raid_disks(4), 5);
    }
}
