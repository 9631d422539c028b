//! RAID-1 mirroring: every member holds the whole array at the same member sector.
//!
//! `raid1_size` in `drivers/md/raid1.c` makes the array exactly as large as the component size
//! (`mddev->dev_sectors`, the superblock's `size`); there is no chunk.

use crate::{check_in_array, Extent, LayoutError, Level};

/// A raid1 array of `raid_disks` mirrors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raid1Layout {
    raid_disks: usize,
    component_sectors: u64,
}

impl Raid1Layout {
    /// `component_sectors` is the used size per member (the superblock's `size`). md accepts a
    /// single-member raid1.
    pub fn new(raid_disks: usize, component_sectors: u64) -> Result<Self, LayoutError> {
        if raid_disks == 0 {
            return Err(LayoutError::TooFewDevices { level: Level::Raid1, min: 1, got: 0 });
        }
        Ok(Raid1Layout { raid_disks, component_sectors })
    }

    /// The array size: one component.
    pub fn array_sectors(&self) -> u64 {
        self.component_sectors
    }

    /// Number of mirrors (raid slots).
    pub fn raid_disks(&self) -> usize {
        self.raid_disks
    }

    /// One extent per mirror, in slot order, each running to the end of the array.
    pub fn map(&self, logical: u64) -> Vec<Extent> {
        let mut out = Vec::with_capacity(self.raid_disks);
        self.map_each(logical, |e| out.push(e));
        out
    }

    /// [`Raid1Layout::map`]'s extents handed to `each` in the same order, without a list.
    pub fn map_each(&self, logical: u64, mut each: impl FnMut(Extent)) {
        check_in_array(logical, self.component_sectors);
        let sectors = self.component_sectors - logical;
        for member in 0..self.raid_disks {
            each(Extent { member, sector: logical, sectors });
        }
    }

    /// The array sector stored at `sector` of `member`: the same number, inside the component.
    pub fn logical(&self, member: usize, sector: u64) -> Option<u64> {
        (member < self.raid_disks && sector < self.component_sectors).then_some(sector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mirror_holds_the_same_sector() {
        let layout = Raid1Layout::new(3, 1000).unwrap();
        let extents = layout.map(10);
        assert_eq!(extents.len(), 3);
        assert!(extents.iter().enumerate().all(|(i, e)| e.member == i && e.sector == 10));
        assert_eq!(extents[0].sectors, 990);
        assert_eq!(layout.logical(2, 999), Some(999));
        assert_eq!(layout.logical(3, 0), None);
    }
}
