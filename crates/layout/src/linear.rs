//! Linear (append) arrays: the members are concatenated in raid-slot order.
//!
//! Follows `linear_conf` in `drivers/md/linear.c`: each member contributes its `rdev->sectors`;
//! when the array has a chunk size (md calls it the rounding unit for linear), each member's size
//! is first rounded down to a multiple of it. The array size is the sum.

use crate::{check_in_array, Extent, LayoutError, Level};

/// Where each member's part of a linear array begins and ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinearLayout {
    /// Array sector just past the end of each member's part (`dev_info.end_sector`).
    ends: Vec<u64>,
    /// Sectors each member contributes, after chunk rounding.
    used: Vec<u64>,
    /// The rounding unit, 0 for none.
    chunk_sectors: u32,
}

impl LinearLayout {
    /// `member_sectors` is the kernel's `rdev->sectors` for each member in raid order (for 1.x
    /// superblocks the `data_size` field, for 0.90 the device size rounded down to 64 KiB minus
    /// 64 KiB). `chunk_sectors` is 0 for no rounding.
    pub fn new(member_sectors: &[u64], chunk_sectors: u32) -> Result<Self, LayoutError> {
        if member_sectors.is_empty() {
            return Err(LayoutError::TooFewDevices { level: Level::Linear, min: 1, got: 0 });
        }
        let mut ends = Vec::with_capacity(member_sectors.len());
        let mut used = Vec::with_capacity(member_sectors.len());
        let mut end = 0u64;
        for &sectors in member_sectors {
            // linear_conf: rdev->sectors is rounded down to the chunk when a chunk is set.
            let sectors = if chunk_sectors == 0 { sectors } else { sectors - sectors % u64::from(chunk_sectors) };
            end = end.checked_add(sectors).ok_or(LayoutError::TooLarge)?;
            used.push(sectors);
            ends.push(end);
        }
        Ok(LinearLayout { ends, used, chunk_sectors })
    }

    /// The array size: the sum of the (rounded) member sizes.
    pub fn array_sectors(&self) -> u64 {
        *self.ends.last().expect("at least one member")
    }

    /// Number of members.
    pub fn raid_disks(&self) -> usize {
        self.ends.len()
    }

    /// The rounding unit given to [`LinearLayout::new`] (0 for none); linear does not stripe.
    pub fn chunk_sectors(&self) -> u32 {
        self.chunk_sectors
    }

    /// Sectors of member `member` that hold array data.
    pub fn member_used_sectors(&self, member: usize) -> u64 {
        self.used[member]
    }

    /// The member holding `logical` and the run from there to the end of that member's part.
    pub fn map(&self, logical: u64) -> Extent {
        check_in_array(logical, self.array_sectors());
        // Members with zero sectors own no range; the first end past `logical` is the owner.
        let member = self.ends.partition_point(|&end| end <= logical);
        let start = self.ends[member] - self.used[member];
        Extent { member, sector: logical - start, sectors: self.ends[member] - logical }
    }

    /// The array sector stored at `sector` of `member`, or `None` past that member's part.
    pub fn logical(&self, member: usize, sector: u64) -> Option<u64> {
        let used = *self.used.get(member)?;
        (sector < used).then(|| self.ends[member] - used + sector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_concatenated_after_rounding() {
        let layout = LinearLayout::new(&[100, 0, 250], 64).unwrap();
        assert_eq!(layout.array_sectors(), 64 + 192);
        assert_eq!(layout.map(0), Extent { member: 0, sector: 0, sectors: 64 });
        assert_eq!(layout.map(63), Extent { member: 0, sector: 63, sectors: 1 });
        assert_eq!(layout.map(64), Extent { member: 2, sector: 0, sectors: 192 });
        assert_eq!(layout.logical(2, 191), Some(255));
        assert_eq!(layout.logical(2, 192), None);
        assert_eq!(layout.logical(1, 0), None);
    }

    #[test]
    fn no_chunk_means_no_rounding() {
        let layout = LinearLayout::new(&[6144, 10240], 0).unwrap();
        assert_eq!(layout.array_sectors(), 16384);
        assert_eq!(layout.map(6144), Extent { member: 1, sector: 0, sectors: 10240 });
    }
}
