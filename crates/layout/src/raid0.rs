//! RAID-0 striping, including md's multi-zone arrays of unequal members.
//!
//! Follows `create_strip_zones`, `find_zone`, `map_sector` and `raid0_size` in
//! `drivers/md/raid0.c`:
//! - Each member's size is rounded down to a whole number of chunks.
//! - Zone 0 stripes over every member up to the smallest member's size. Each further zone starts
//!   where the previous smallest member ended and stripes over the members (in raid-slot order)
//!   that are still longer, up to the next smallest size. There is one zone per distinct size.
//! - Inside a zone a chunk goes to member `chunk % nb_dev` of the zone and to chunk row
//!   `zone_chunk / nb_dev` past the zone's `dev_start` on that member. Which chunk number picks
//!   the member is what the two multi-zone layouts disagree on: the original layout (1, used up
//!   to Linux 3.13) counts chunks from the start of the array, the alternate layout (2, what Linux
//!   3.14..5.3 did by accident) counts from the start of the zone. Zone 0 starts at 0, so the
//!   layouts only differ from zone 1 on, and not at all when zone 1 has a single member.
//! - The chunk need not be a power of two (`map_sector` has a division path for that).

use crate::{check_in_array, Extent, LayoutError, Level};

/// md's multi-zone raid0 layout (superblock `layout`, meaningful only with feature bit
/// `RAID0_LAYOUT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raid0ZoneLayout {
    /// `RAID0_ORIG_LAYOUT` (1): members chosen by array-relative chunk number.
    Original,
    /// `RAID0_ALT_MULTIZONE_LAYOUT` (2): members chosen by zone-relative chunk number.
    Alternate,
    /// No layout stored (md reads -1; mdadm's `--layout=dangerous` stores 0).
    Unset,
}

impl Raid0ZoneLayout {
    /// Reads md's layout number: 1 original, 2 alternate, anything else unset (as
    /// `create_strip_zones` treats it).
    pub fn from_md(layout: i32) -> Raid0ZoneLayout {
        match layout {
            1 => Raid0ZoneLayout::Original,
            2 => Raid0ZoneLayout::Alternate,
            _ => Raid0ZoneLayout::Unset,
        }
    }

    /// md's layout number; -1 for unset.
    pub fn to_md(self) -> i32 {
        match self {
            Raid0ZoneLayout::Original => 1,
            Raid0ZoneLayout::Alternate => 2,
            Raid0ZoneLayout::Unset => -1,
        }
    }

    /// The name mdadm prints and accepts: "original", "alternate", "-unknown-" for unset.
    pub fn name(self) -> &'static str {
        match self {
            Raid0ZoneLayout::Original => "original",
            Raid0ZoneLayout::Alternate => "alternate",
            Raid0ZoneLayout::Unset => "-unknown-",
        }
    }
}

/// One raid0 zone, as `create_strip_zones` builds it (and the kernel log's zone dump shows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raid0Zone {
    /// First array sector of the zone.
    pub start: u64,
    /// Array sectors in the zone (a multiple of `chunk * members.len()`).
    pub sectors: u64,
    /// Member sector where the zone begins on each of its members.
    pub dev_start: u64,
    /// The zone's members (raid slots), in striping order.
    pub members: Vec<usize>,
}

impl Raid0Zone {
    /// Sectors the zone occupies on each of its members.
    pub fn member_sectors(&self) -> u64 {
        self.sectors / self.members.len() as u64
    }
}

/// A raid0 array's zones and chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raid0Layout {
    zones: Vec<Raid0Zone>,
    chunk_sectors: u64,
    array_sectors: u64,
    /// The layout actually used for mapping (original when the layouts coincide).
    effective: Raid0ZoneLayout,
    used: Vec<u64>,
}

impl Raid0Layout {
    /// `member_sectors` is the kernel's `rdev->sectors` per member in raid order (1.x: the
    /// superblock's `data_size`; 0.90: device size rounded down to 64 KiB, minus 64 KiB).
    /// `chunk_sectors` may be any non-zero number of sectors.
    ///
    /// A multi-zone array with [`Raid0ZoneLayout::Unset`] is refused as the kernel refuses it,
    /// except when zone 1 has one member (e.g. any two-member array), where both layouts give the
    /// same map and `create_strip_zones` accepts it.
    pub fn new(member_sectors: &[u64], chunk_sectors: u32, zone_layout: Raid0ZoneLayout) -> Result<Self, LayoutError> {
        if member_sectors.is_empty() {
            return Err(LayoutError::TooFewDevices { level: Level::Raid0, min: 1, got: 0 });
        }
        if chunk_sectors == 0 {
            return Err(LayoutError::ChunkMissing { level: Level::Raid0 });
        }
        let chunk = u64::from(chunk_sectors);
        let used: Vec<u64> = member_sectors.iter().map(|&s| s - s % chunk).collect();

        let mut zones = Vec::new();
        let mut dev_start = 0u64;
        let mut start = 0u64;
        loop {
            let members: Vec<usize> = (0..used.len()).filter(|&m| zones.is_empty() || used[m] > dev_start).collect();
            if members.is_empty() {
                break;
            }
            let smallest = members.iter().map(|&m| used[m]).min().expect("non-empty zone");
            let sectors = (smallest - dev_start).checked_mul(members.len() as u64).ok_or(LayoutError::TooLarge)?;
            zones.push(Raid0Zone { start, sectors, dev_start, members });
            start = start.checked_add(sectors).ok_or(LayoutError::TooLarge)?;
            dev_start = smallest;
        }

        // create_strip_zones: the layouts coincide with one zone or when zone 1 has one member.
        let layouts_coincide = zones.len() == 1 || zones[1].members.len() == 1;
        let effective = match zone_layout {
            _ if layouts_coincide => Raid0ZoneLayout::Original,
            Raid0ZoneLayout::Unset => return Err(LayoutError::Raid0LayoutUnset),
            chosen => chosen,
        };

        // raid0_size masks each (already chunk-rounded) size with `chunk - 1`, which only equals
        // chunk rounding for power-of-two chunks; the kernel's array size is what it is, so the
        // same mask is applied here.
        let mut array_sectors = 0u64;
        for &s in &used {
            array_sectors = array_sectors.checked_add(s & !(chunk - 1)).ok_or(LayoutError::TooLarge)?;
        }
        Ok(Raid0Layout { zones, chunk_sectors: chunk, array_sectors, effective, used })
    }

    /// The array size as `raid0_size` computes it.
    pub fn array_sectors(&self) -> u64 {
        self.array_sectors
    }

    /// The chunk size in sectors.
    pub fn chunk_sectors(&self) -> u32 {
        self.chunk_sectors as u32
    }

    /// Number of members.
    pub fn raid_disks(&self) -> usize {
        self.used.len()
    }

    /// Sectors of `member` that hold array data (its size rounded down to the chunk).
    pub fn member_used_sectors(&self, member: usize) -> u64 {
        self.used[member]
    }

    /// The layout used for mapping: the requested one, or `Original` where the layouts coincide.
    pub fn effective_zone_layout(&self) -> Raid0ZoneLayout {
        self.effective
    }

    /// The zones, first to last.
    pub fn zones(&self) -> &[Raid0Zone] {
        &self.zones
    }

    /// The member and member sector holding `logical`, and the run to the end of its chunk.
    pub fn map(&self, logical: u64) -> Extent {
        check_in_array(logical, self.array_sectors);
        let chunk = self.chunk_sectors;
        // find_zone: the first zone ending past `logical`.
        let zone_index = self.zones.partition_point(|z| z.start + z.sectors <= logical);
        let zone = &self.zones[zone_index];
        let nb_dev = zone.members.len() as u64;
        let in_zone = logical - zone.start;
        let in_chunk = logical % chunk;
        // map_sector: which chunk number selects the member depends on the layout.
        let selector = match self.effective {
            Raid0ZoneLayout::Alternate => in_zone / chunk,
            _ => logical / chunk,
        };
        let member = zone.members[(selector % nb_dev) as usize];
        let row = in_zone / (chunk * nb_dev);
        let sectors = (chunk - in_chunk).min(self.array_sectors - logical);
        Extent { member, sector: zone.dev_start + row * chunk + in_chunk, sectors }
    }

    /// The array sector stored at `sector` of `member`, or `None` if that sector holds no data.
    pub fn logical(&self, member: usize, sector: u64) -> Option<u64> {
        let chunk = self.chunk_sectors;
        let zone = self.zones.iter().find(|z| {
            z.members.contains(&member) && sector >= z.dev_start && sector < z.dev_start + z.member_sectors()
        })?;
        let nb_dev = zone.members.len() as u64;
        let position = zone.members.iter().position(|&m| m == member)? as u64;
        let row = (sector - zone.dev_start) / chunk;
        let in_chunk = (sector - zone.dev_start) % chunk;
        // Invert the member selection: find the zone chunk in `row` whose selector lands on
        // `position`.
        let column = match self.effective {
            Raid0ZoneLayout::Alternate => position,
            _ => (position + nb_dev - (zone.start / chunk) % nb_dev) % nb_dev,
        };
        let logical = zone.start + (row * nb_dev + column) * chunk + in_chunk;
        (logical < self.array_sectors).then_some(logical)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_unequal_members_make_three_zones() {
        // The shape of the kernel fixture raid0-3-64k-zones-orig: 3, 5 and 7 MiB of data.
        let layout = Raid0Layout::new(&[6144, 10240, 14336], 128, Raid0ZoneLayout::Original).unwrap();
        let zones = layout.zones();
        assert_eq!(zones.len(), 3);
        assert_eq!((zones[0].start, zones[0].sectors, zones[0].dev_start), (0, 18432, 0));
        assert_eq!(zones[0].members, vec![0, 1, 2]);
        assert_eq!((zones[1].start, zones[1].sectors, zones[1].dev_start), (18432, 8192, 6144));
        assert_eq!(zones[1].members, vec![1, 2]);
        assert_eq!((zones[2].start, zones[2].sectors, zones[2].dev_start), (26624, 4096, 10240));
        assert_eq!(zones[2].members, vec![2]);
        assert_eq!(layout.array_sectors(), 30720);
        // Zone 1 starts at array chunk 144 (even): original layout puts it on the zone's first
        // member. Array chunk 145 goes to the second.
        assert_eq!(layout.map(18432), Extent { member: 1, sector: 6144, sectors: 128 });
        assert_eq!(layout.map(18432 + 128), Extent { member: 2, sector: 6144, sectors: 128 });
    }

    #[test]
    fn original_and_alternate_differ_when_zone_start_is_odd() {
        // Zone 0 is 3 members x 1 chunk = 3 chunks, so zone 1 starts at the odd chunk 3.
        let sizes = [8, 24, 24];
        let orig = Raid0Layout::new(&sizes, 8, Raid0ZoneLayout::Original).unwrap();
        let alt = Raid0Layout::new(&sizes, 8, Raid0ZoneLayout::Alternate).unwrap();
        assert_eq!(orig.map(24).member, 2);
        assert_eq!(alt.map(24).member, 1);
        assert_eq!(orig.logical(2, 8), Some(24));
        assert_eq!(alt.logical(1, 8), Some(24));
        assert_eq!(Raid0Layout::new(&sizes, 8, Raid0ZoneLayout::Unset), Err(LayoutError::Raid0LayoutUnset));
    }

    #[test]
    fn unset_layout_is_fine_when_layouts_coincide() {
        assert!(Raid0Layout::new(&[16, 16], 8, Raid0ZoneLayout::Unset).is_ok());
        // Two members of different sizes: zone 1 has one member.
        let two = Raid0Layout::new(&[16, 40], 8, Raid0ZoneLayout::Unset).unwrap();
        assert_eq!(two.zones().len(), 2);
        assert_eq!(two.map(32), Extent { member: 1, sector: 16, sectors: 8 });
    }

    #[test]
    fn non_power_of_two_chunk() {
        // 12 KiB chunks, as mdadm allows for raid0.
        let layout = Raid0Layout::new(&[6144, 6144], 24, Raid0ZoneLayout::Unset).unwrap();
        assert_eq!(layout.array_sectors(), 12288);
        assert_eq!(layout.map(24 + 5), Extent { member: 1, sector: 5, sectors: 19 });
        assert_eq!(layout.map(48), Extent { member: 0, sector: 24, sectors: 24 });
    }
}
