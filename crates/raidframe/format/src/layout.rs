//! Where RAIDframe puts things on a component, and the on-disk parity map.
//!
//! Byte offsets from the start of the component (partition, wedge or raw disk), for a
//! component of `s`-byte sectors:
//!
//! | what | offset | size |
//! |---|---|---|
//! | left alone (disklabel, boot blocks) | 0 | 16384 |
//! | component label ([`crate::label`]) | [`LABEL_OFFSET`] = 16384 | max(1024, s) |
//! | parity map ([`ParityMap`]) | 16384 + max(1024, s) | max(512, s) |
//! | RAID data | 64 sectors ([`PROTECTED_SECTORS`]) | `numBlocks` sectors |
//!
//! On 512-byte media that is the label at 16384, the map at 17408 and data at 32768. The
//! kernel adds the 64 protected sectors to every component I/O (`rf_protectedSectors`), so
//! a component's usable size is its partition size less 64 sectors (`rf_getdisksize`).
//!
//! The parity map (`rf_paritymap.h`, `rf_paritymap.c`) is a 4096-bit bitmap, one bit per
//! region of the RAID address space, bit `i` being bit `i % 8` (least significant first) of
//! byte `i / 8`; a set bit means the region's parity may be out of date. The same map goes
//! to every live component; reading merges them with OR. Levels without redundancy (RAID 0)
//! never write a map.

use thiserror::Error;

use crate::label::{ComponentLabel, PMLABEL_DISABLE, PMLABEL_VALID, PMLABEL_WASUSED};

/// Byte offset of the component label (`RF_COMPONENT_INFO_OFFSET`).
pub const LABEL_OFFSET: u64 = 16384;
/// Minimum size of the label area (`RF_COMPONENT_INFO_SIZE`).
pub const LABEL_AREA_MIN: u64 = 1024;
/// Sectors reserved at the start of every component before RAID data (`RF_PROTECTED_SECTORS`).
pub const PROTECTED_SECTORS: u64 = 64;
/// Number of parity map regions the on-disk bitmap holds (`RF_PARITYMAP_NREG`).
pub const PARITY_MAP_REGIONS: usize = 4096;
/// Size of the on-disk bitmap in bytes (`RF_PARITYMAP_NBYTE`).
pub const PARITY_MAP_BYTES: usize = PARITY_MAP_REGIONS / 8;
/// Smallest region the kernel chooses by default: 25 MiB of each component (`REGION_MINSIZE`).
pub const REGION_MIN_BYTES: u64 = 25 << 20;
/// Default cooldown tick, in milliseconds (`DFL_TICKMS`).
pub const DEFAULT_TICKMS: u32 = 40000;
/// Default cooldown in ticks (`DFL_COOLDOWN`).
pub const DEFAULT_COOLDOWN: u32 = 8;

/// Bytes the label area takes on a component of `sector_size`-byte sectors.
pub fn label_area_size(sector_size: u64) -> u64 {
    LABEL_AREA_MIN.max(sector_size)
}

/// Byte offset of the parity map (`rf_parity_map_offset`).
pub fn parity_map_offset(sector_size: u64) -> u64 {
    LABEL_OFFSET + label_area_size(sector_size)
}

/// Bytes the parity map area takes (`rf_parity_map_size`).
pub fn parity_map_area_size(sector_size: u64) -> u64 {
    (PARITY_MAP_BYTES as u64).max(sector_size)
}

/// Byte offset of RAID data sector 0 of the component.
pub fn data_offset(sector_size: u64) -> u64 {
    PROTECTED_SECTORS * sector_size
}

/// Usable sectors of a component of `partition_sectors` sectors (what the label's
/// `numBlocks` says), or `None` if the partition is not larger than the protected area.
pub fn usable_sectors(partition_sectors: u64) -> Option<u64> {
    partition_sectors.checked_sub(PROTECTED_SECTORS).filter(|&n| n > 0)
}

/// Component byte offset of component data-area sector `sector`.
pub fn component_byte_offset(sector: u64, sector_size: u64) -> u64 {
    (PROTECTED_SECTORS + sector) * sector_size
}

/// A parity map area that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParityMapError {
    /// Fewer than the 512 bytes of the bitmap.
    #[error("parity map needs {PARITY_MAP_BYTES} bytes, got {len}")]
    TooShort {
        /// Bytes handed in.
        len: usize,
    },
    /// Bytes after the bitmap in a larger-than-512-byte area are not zero.
    #[error(
        "parity map area has non-zero byte {value:#04x} at offset {offset}, past the {PARITY_MAP_BYTES}-byte bitmap"
    )]
    TrailingBytes {
        /// Offset inside the area.
        offset: usize,
        /// The byte found.
        value: u8,
    },
}

/// The on-disk parity map (`struct rf_paritymap_ondisk`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ParityMap {
    /// The bitmap, bit `i % 8` of byte `i / 8` for region `i`.
    pub bits: [u8; PARITY_MAP_BYTES],
}

impl std::fmt::Debug for ParityMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dirty: Vec<usize> = self.dirty_regions().collect();
        f.debug_struct("ParityMap").field("dirty_regions", &dirty).finish()
    }
}

impl Default for ParityMap {
    fn default() -> Self {
        Self::clean()
    }
}

impl ParityMap {
    /// Every region clean (`rf_paritymap_forceclean`).
    pub fn clean() -> Self {
        ParityMap { bits: [0; PARITY_MAP_BYTES] }
    }

    /// Every region dirty (`rf_paritymap_invalidate`).
    pub fn all_dirty() -> Self {
        ParityMap { bits: [0xff; PARITY_MAP_BYTES] }
    }

    /// Reads the map from the start of its area. A larger area (sectors above 512 bytes)
    /// must be zero after the bitmap.
    pub fn parse(bytes: &[u8]) -> Result<Self, ParityMapError> {
        if bytes.len() < PARITY_MAP_BYTES {
            return Err(ParityMapError::TooShort { len: bytes.len() });
        }
        if let Some((i, &value)) = bytes.iter().enumerate().skip(PARITY_MAP_BYTES).find(|(_, &b)| b != 0) {
            return Err(ParityMapError::TrailingBytes { offset: i, value });
        }
        let mut bits = [0u8; PARITY_MAP_BYTES];
        bits.copy_from_slice(&bytes[..PARITY_MAP_BYTES]);
        Ok(ParityMap { bits })
    }

    /// The map as written to an area of `area_len` bytes (zero after the bitmap).
    pub fn to_area(&self, area_len: usize) -> Vec<u8> {
        let mut out = vec![0u8; area_len.max(PARITY_MAP_BYTES)];
        out[..PARITY_MAP_BYTES].copy_from_slice(&self.bits);
        out
    }

    /// True if region `region` may have stale parity. Regions past 4095 are never dirty.
    pub fn is_dirty(&self, region: usize) -> bool {
        region < PARITY_MAP_REGIONS && self.bits[region / 8] & (1 << (region % 8)) != 0
    }

    /// Marks a region dirty or clean. Regions past 4095 are ignored.
    pub fn set_dirty(&mut self, region: usize, dirty: bool) {
        if region >= PARITY_MAP_REGIONS {
            return;
        }
        let mask = 1u8 << (region % 8);
        if dirty {
            self.bits[region / 8] |= mask;
        } else {
            self.bits[region / 8] &= !mask;
        }
    }

    /// Indices of the dirty regions, ascending.
    pub fn dirty_regions(&self) -> impl Iterator<Item = usize> + '_ {
        (0..PARITY_MAP_REGIONS).filter(|&r| self.is_dirty(r))
    }

    /// ORs `other` into `self` (`rf_paritymap_merge`); returns true if the two differed.
    pub fn merge(&mut self, other: &ParityMap) -> bool {
        let mut differ = false;
        for (a, b) in self.bits.iter_mut().zip(other.bits.iter()) {
            differ |= *a != *b;
            *a |= *b;
        }
        differ
    }
}

/// The region count the kernel picks when no label sets one (`rf_paritymap_nreg`): one
/// region per 25 MiB of a component, at most 4096. NetBSD's first version returned 0 for
/// components under 25 MiB; the driver this crate was checked against records 1, so the
/// count is at least 1 here.
pub fn default_region_count(sectors_per_disk: u64, sector_size: u64) -> u32 {
    let bytes = sectors_per_disk.saturating_mul(sector_size);
    (bytes / REGION_MIN_BYTES).clamp(1, PARITY_MAP_REGIONS as u64) as u32
}

/// Size of one region in RAID (array) sectors (`rf_paritymap_init`): the stripes divided
/// over the regions, rounded up, times the data sectors of a stripe.
pub fn region_size_sectors(num_stripes: u64, regions: u32, data_sectors_per_stripe: u64) -> u64 {
    let regions = u64::from(regions.max(1));
    num_stripes.div_ceil(regions) * data_sectors_per_stripe
}

/// What `rf_paritymap_attach` does with the maps of a set being configured (levels with
/// redundancy only; RAID 0 has no map).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParityMapVerdict {
    /// Some label asks for no map: parity is handled the old way (a full rewrite if dirty).
    Disabled,
    /// The on-disk maps are trusted; only their dirty regions need a parity rewrite.
    Use {
        /// Region count the labels agree on (0 if none recorded: the kernel picks a default).
        regions: u32,
        /// Cooldown tick in milliseconds.
        tickms: u32,
        /// Cooldown ticks.
        ntick: u32,
    },
    /// The on-disk maps are not trusted: the kernel replaces them, with all regions clean if
    /// the set's parity is known good and all dirty otherwise.
    Discard {
        /// Region count to use (0: the kernel's default).
        regions: u32,
        /// Cooldown tick in milliseconds.
        tickms: u32,
        /// Cooldown ticks.
        ntick: u32,
    },
}

/// Decides, from the labels of a set's components, whether the kernel will trust the
/// on-disk parity maps at a normal configure (not `raidctl -C`, which always discards).
/// A map is discarded if any label lacks VALID, lacks WASUSED or has a
/// `parity_map_modcount` other than its `mod_counter` (written by a kernel without parity
/// maps), or if the labels disagree on the region count. Any VALID label with DISABLE turns
/// the map off.
pub fn parity_map_verdict<'a>(labels: impl IntoIterator<Item = &'a ComponentLabel>) -> ParityMapVerdict {
    let (mut use_map, mut zap) = (true, false);
    let (mut tickms, mut ntick, mut regions) = (DEFAULT_TICKMS, DEFAULT_COOLDOWN, 0u32);
    for label in labels {
        let mut flags = label.parity_map_flags;
        if label.parity_map_modcount != label.mod_counter {
            flags &= !PMLABEL_WASUSED;
        }
        if flags & PMLABEL_VALID == 0 {
            zap = true;
            continue;
        }
        tickms = label.parity_map_tickms;
        ntick = label.parity_map_ntick;
        if regions == 0 {
            regions = label.parity_map_regions;
        } else if regions != label.parity_map_regions {
            zap = true;
        }
        if flags & PMLABEL_DISABLE != 0 {
            use_map = false;
        }
        if flags & PMLABEL_WASUSED == 0 {
            zap = true;
        }
    }
    match (use_map, zap) {
        (false, _) => ParityMapVerdict::Disabled,
        (true, false) => ParityMapVerdict::Use { regions, tickms, ntick },
        (true, true) => ParityMapVerdict::Discard { regions, tickms, ntick },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_on_512_and_4096_byte_sectors() {
        assert_eq!(parity_map_offset(512), 17408);
        assert_eq!(parity_map_area_size(512), 512);
        assert_eq!(data_offset(512), 32768);
        assert_eq!(parity_map_offset(4096), 16384 + 4096);
        assert_eq!(parity_map_area_size(4096), 4096);
        assert_eq!(data_offset(4096), 262144);
        assert_eq!(usable_sectors(2048), Some(1984));
        assert_eq!(usable_sectors(64), None);
        assert_eq!(component_byte_offset(3, 512), 32768 + 1536);
    }

    #[test]
    fn bit_order_is_least_significant_first() {
        let mut map = ParityMap::clean();
        map.set_dirty(0, true);
        map.set_dirty(9, true);
        assert_eq!(map.bits[0], 0x01);
        assert_eq!(map.bits[1], 0x02);
        assert_eq!(map.dirty_regions().collect::<Vec<_>>(), vec![0, 9]);
        map.set_dirty(9, false);
        assert!(!map.is_dirty(9));
        assert!(!map.is_dirty(5000));
    }

    #[test]
    fn parse_merge_and_area() {
        let mut area = vec![0u8; 4096];
        area[1] = 0x80;
        let mut map = ParityMap::parse(&area).unwrap();
        assert!(map.is_dirty(15));
        assert_eq!(map.to_area(4096), area);
        area[600] = 1;
        assert_eq!(ParityMap::parse(&area), Err(ParityMapError::TrailingBytes { offset: 600, value: 1 }));
        assert_eq!(ParityMap::parse(&area[..10]), Err(ParityMapError::TooShort { len: 10 }));
        let mut other = ParityMap::clean();
        other.set_dirty(3, true);
        assert!(map.merge(&other));
        assert_eq!(map.dirty_regions().collect::<Vec<_>>(), vec![3, 15]);
        assert!(!map.clone().merge(&map));
    }

    #[test]
    fn region_counts() {
        assert_eq!(default_region_count(1984, 512), 1);
        assert_eq!(default_region_count(100 << 11, 512), 4);
        assert_eq!(default_region_count(u64::MAX / 512, 512), 4096);
        assert_eq!(region_size_sectors(248, 1, 16), 3968);
        assert_eq!(region_size_sectors(10, 3, 4), 16);
    }

    #[test]
    fn verdicts() {
        let good = ComponentLabel {
            mod_counter: 5,
            parity_map_modcount: 5,
            parity_map_flags: PMLABEL_VALID | PMLABEL_WASUSED,
            parity_map_tickms: 40000,
            parity_map_ntick: 8,
            parity_map_regions: 1,
            ..ComponentLabel::default()
        };
        let use_it = ParityMapVerdict::Use { regions: 1, tickms: 40000, ntick: 8 };
        assert_eq!(parity_map_verdict([&good, &good]), use_it);
        let old_kernel = ComponentLabel { parity_map_modcount: 4, ..good.clone() };
        assert!(matches!(parity_map_verdict([&good, &old_kernel]), ParityMapVerdict::Discard { .. }));
        let other_regions = ComponentLabel { parity_map_regions: 2, ..good.clone() };
        assert!(matches!(parity_map_verdict([&good, &other_regions]), ParityMapVerdict::Discard { .. }));
        let disabled = ComponentLabel { parity_map_flags: PMLABEL_VALID | PMLABEL_DISABLE, ..good.clone() };
        assert_eq!(parity_map_verdict([&good, &disabled]), ParityMapVerdict::Disabled);
        let never = ComponentLabel::default();
        assert!(matches!(parity_map_verdict([&never]), ParityMapVerdict::Discard { regions: 0, .. }));
    }
}
