//! The component labels of a new set, as NetBSD leaves them once `raidctl -C`, `-I SERIAL` and a
//! parity rewrite (`-i`) are done and the set is unconfigured (`-u`): the set's shape from the
//! configuration, the serial number, one column per component, clean, and on levels with
//! redundancy a parity map in use (valid and used, NetBSD's default cooldown, one region per
//! 25 MiB of component). The caller picks the modification counter.

use crate::label::{ComponentLabel, PMLABEL_VALID, PMLABEL_WASUSED, RAID_CLEAN, RAID_DIRTY};
use crate::layout::{default_region_count, usable_sectors, DEFAULT_COOLDOWN, DEFAULT_TICKMS};
use crate::mapping::Level;

/// The shape of a new set, as its configuration file gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSet {
    pub serial_number: i32,
    pub level: Level,
    pub num_columns: u32,
    /// Sectors per stripe unit (`START layout`'s first number).
    pub sect_per_su: u32,
    /// `START queue`'s number.
    pub max_outstanding: i32,
    /// The components' sector size in bytes.
    pub sector_bytes: u32,
    /// Sectors of each component (its partition); the set uses all but the 64 protected ones.
    pub partition_sectors: u64,
}

impl NewSet {
    /// The label of `column`, with `mod_counter` (the parity map's count follows it), clean or
    /// dirty. `None` when the components are too small to hold any data.
    pub fn label(&self, column: u32, mod_counter: i32, clean: bool) -> Option<ComponentLabel> {
        let num_blocks = usable_sectors(self.partition_sectors)?;
        let redundant = self.level.faults_tolerated() > 0;
        Some(ComponentLabel {
            serial_number: self.serial_number,
            mod_counter,
            column: column as i32,
            num_columns: self.num_columns as i32,
            clean: if clean { RAID_CLEAN } else { RAID_DIRTY },
            sect_per_su: self.sect_per_su as i32,
            parity_config: self.level.as_char() as i32,
            max_outstanding: self.max_outstanding,
            block_size: self.sector_bytes as i32,
            num_blocks,
            partition_size: self.partition_sectors,
            parity_map_modcount: mod_counter,
            parity_map_flags: if redundant { PMLABEL_VALID | PMLABEL_WASUSED } else { 0 },
            parity_map_tickms: if redundant { DEFAULT_TICKMS } else { 0 },
            parity_map_ntick: if redundant { DEFAULT_COOLDOWN } else { 0 },
            parity_map_regions: if redundant {
                default_region_count(num_blocks, u64::from(self.sector_bytes))
            } else {
                0
            },
            ..ComponentLabel::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(level: Level) -> NewSet {
        NewSet {
            serial_number: 2026,
            level,
            num_columns: 3,
            sect_per_su: 32,
            max_outstanding: 100,
            sector_bytes: 512,
            partition_sectors: 2048,
        }
    }

    #[test]
    fn a_new_label_is_reasonable_and_says_its_column_and_shape() {
        for level in [Level::Raid0, Level::Raid1, Level::Raid4, Level::Raid5] {
            let mut s = set(level);
            if level == Level::Raid1 {
                s.num_columns = 2;
            }
            let label = s.label(1, 9, true).unwrap();
            label.check_reasonable(Some(2048)).unwrap();
            assert_eq!((label.column, label.num_columns, label.mod_counter), (1, s.num_columns as i32, 9));
            assert_eq!(label.num_blocks, 2048 - 64);
            assert_eq!(label.level_char(), Some(level.as_char()));
            assert!(label.is_clean());
            assert_eq!(label.parity_map_regions > 0, level != Level::Raid0, "{level:?}");
            let bytes = label.to_bytes();
            assert_eq!(ComponentLabel::parse(&bytes).unwrap(), label);
        }
        assert!(!set(Level::Raid5).label(0, 1, false).unwrap().is_clean());
        assert!(NewSet { partition_sectors: 64, ..set(Level::Raid5) }.label(0, 1, true).is_none());
    }
}
