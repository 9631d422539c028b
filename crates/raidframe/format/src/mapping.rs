//! RAIDframe's address mapping for RAID 0, 1, 4 and 5: RAID (array) sector to column and
//! sector within that component's data area. Add [`crate::layout::PROTECTED_SECTORS`] for
//! the component's own sector number.
//!
//! With `SU` sectors per stripe unit, `N` columns, `SUID = r / SU` and `o = r % SU` for RAID
//! sector `r` (the `rf_MapSector*`/`rf_MapParity*` functions of `rf_raid0.c`, `rf_raid1.c`,
//! `rf_raid4.c`, `rf_raid5.c`):
//!
//! | level | data column | sector | redundancy |
//! |---|---|---|---|
//! | 0 | `SUID % N` | `(SUID / N)·SU + o` | none |
//! | 1 | `2·(SUID % (N/2))` | `(SUID / (N/2))·SU + o` | mirror on the next column, same sector |
//! | 4 | `SUID % (N-1)` | `(SUID / (N-1))·SU + o` | parity on column `N-1`, same sector |
//! | 5 | `SUID % N` | `(SUID / (N-1))·SU + o` | parity on column `(N-1) - (SUID / (N-1)) % N`, same sector |
//!
//! RAID 5's data column is `SUID % N` whatever the stripe, and the parity column starts on
//! the last column and moves one to the left per stripe: the data of a stripe starts just
//! after the parity column and wraps around, which is the left-symmetric layout. These
//! formulas are checked against images the NetBSD driver wrote (tests/real_images.rs).
//!
//! Capacity: every component holds `numBlocks / SU` whole stripe units (the rest is never
//! used) and the array has that many stripes; RAID 0 has `N`, RAID 1 `N/2`, RAID 4 and 5
//! `N-1` data units per stripe.

use thiserror::Error;

/// The RAID levels mapped here, as `parityConfig` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// `'0'`: striping without redundancy.
    Raid0,
    /// `'1'`: mirrored pairs of columns.
    Raid1,
    /// `'4'`: parity on the last column.
    Raid4,
    /// `'5'`: rotating parity, left-symmetric.
    Raid5,
}

impl Level {
    /// The level for a `parityConfig` character.
    pub fn from_char(c: char) -> Option<Self> {
        Some(match c {
            '0' => Level::Raid0,
            '1' => Level::Raid1,
            '4' => Level::Raid4,
            '5' => Level::Raid5,
            _ => return None,
        })
    }

    /// The `parityConfig` character.
    pub fn as_char(self) -> char {
        match self {
            Level::Raid0 => '0',
            Level::Raid1 => '1',
            Level::Raid4 => '4',
            Level::Raid5 => '5',
        }
    }

    /// Columns that can be lost without losing data (`faultsTolerated`).
    pub fn faults_tolerated(self) -> u32 {
        match self {
            Level::Raid0 => 0,
            _ => 1,
        }
    }
}

/// A geometry RAIDframe would refuse, or an address outside the array.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MappingError {
    /// Stripe units of zero sectors.
    #[error("sectors per stripe unit must be positive")]
    ZeroStripeUnit,
    /// Too few columns for the level (RAID 0 needs 1, RAID 1 needs 2, RAID 4 and 5 need 2).
    #[error("RAID level {level} needs at least {min} columns, got {columns}")]
    TooFewColumns {
        /// The level's character.
        level: char,
        /// Columns required.
        min: u32,
        /// Columns given.
        columns: u32,
    },
    /// RAID 1 with an odd number of columns (`rf_ConfigureRAID1` requires pairs).
    #[error("RAID 1 needs an even number of columns, got {columns}")]
    OddMirror {
        /// Columns given.
        columns: u32,
    },
    /// A component smaller than one stripe unit.
    #[error("components of {sectors} data sectors hold no whole stripe unit of {sect_per_su} sectors")]
    NoStripeUnits {
        /// Usable sectors per component.
        sectors: u64,
        /// Sectors per stripe unit.
        sect_per_su: u64,
    },
    /// A RAID sector at or past the end of the array.
    #[error("RAID sector {sector} is past the end of the array ({total} sectors)")]
    OutOfRange {
        /// The sector asked for.
        sector: u64,
        /// The array's size in sectors.
        total: u64,
    },
}

/// The shape of a set: what the label or config file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// RAID level.
    pub level: Level,
    /// Number of columns (components).
    pub columns: u32,
    /// Sectors per stripe unit (`sectPerSU`).
    pub sect_per_su: u64,
    /// Usable sectors per component (`numBlocks`).
    pub sectors_per_disk: u64,
}

/// A place on one component: column, and sector counted from the component's data area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    /// Column (component index).
    pub column: u32,
    /// Sector within the component's data area (add 64 for the component sector).
    pub sector: u64,
}

/// Where a RAID sector lives: its data, and for redundant levels its mirror copy or the
/// parity sector of its stripe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mapped {
    /// The data sector.
    pub data: Location,
    /// RAID 1: the mirror copy; RAID 4 and 5: the parity sector; RAID 0: none.
    pub redundancy: Option<Location>,
}

impl Geometry {
    /// Checks the geometry as RAIDframe's configure functions would.
    pub fn new(level: Level, columns: u32, sect_per_su: u64, sectors_per_disk: u64) -> Result<Self, MappingError> {
        if sect_per_su == 0 {
            return Err(MappingError::ZeroStripeUnit);
        }
        let min = match level {
            Level::Raid0 => 1,
            _ => 2,
        };
        if columns < min {
            return Err(MappingError::TooFewColumns { level: level.as_char(), min, columns });
        }
        if level == Level::Raid1 && !columns.is_multiple_of(2) {
            return Err(MappingError::OddMirror { columns });
        }
        if sectors_per_disk < sect_per_su {
            return Err(MappingError::NoStripeUnits { sectors: sectors_per_disk, sect_per_su });
        }
        Ok(Geometry { level, columns, sect_per_su, sectors_per_disk })
    }

    /// Whole stripe units per component (`stripeUnitsPerDisk`), which is also the number
    /// of stripes.
    pub fn stripe_units_per_disk(&self) -> u64 {
        self.sectors_per_disk / self.sect_per_su
    }

    /// Data stripe units per stripe (`numDataCol`; RAID 1 counts pairs).
    pub fn data_columns(&self) -> u64 {
        let n = u64::from(self.columns);
        match self.level {
            Level::Raid0 => n,
            Level::Raid1 => n / 2,
            Level::Raid4 | Level::Raid5 => n - 1,
        }
    }

    /// Data sectors in one stripe (`dataSectorsPerStripe`).
    pub fn data_sectors_per_stripe(&self) -> u64 {
        self.data_columns() * self.sect_per_su
    }

    /// Size of the array in sectors (`totalSectors`).
    pub fn total_sectors(&self) -> u64 {
        self.stripe_units_per_disk() * self.data_sectors_per_stripe()
    }

    /// Maps a RAID sector.
    pub fn map(&self, raid_sector: u64) -> Result<Mapped, MappingError> {
        let total = self.total_sectors();
        if raid_sector >= total {
            return Err(MappingError::OutOfRange { sector: raid_sector, total });
        }
        let su = self.sect_per_su;
        let suid = raid_sector / su;
        let offset = raid_sector % su;
        let n = u64::from(self.columns);
        let d = self.data_columns();
        let sector = (suid / d) * su + offset;
        let at = |column: u64| Location { column: column as u32, sector };
        Ok(match self.level {
            Level::Raid0 => Mapped { data: at(suid % n), redundancy: None },
            Level::Raid1 => {
                let pair = suid % d;
                Mapped { data: at(2 * pair), redundancy: Some(at(2 * pair + 1)) }
            }
            Level::Raid4 => Mapped { data: at(suid % d), redundancy: Some(at(d)) },
            Level::Raid5 => Mapped { data: at(suid % n), redundancy: Some(at(d - (suid / d) % n)) },
        })
    }

    /// The parity (RAID 4, 5) or mirror (RAID 1) column of stripe `stripe`; `None` for RAID 0.
    pub fn redundancy_column(&self, stripe: u64) -> Option<u32> {
        let n = u64::from(self.columns);
        let d = self.data_columns();
        match self.level {
            Level::Raid0 | Level::Raid1 => None,
            Level::Raid4 => Some(d as u32),
            Level::Raid5 => Some((d - stripe % n) as u32),
        }
    }

    /// The inverse of [`Geometry::map`] for data: which RAID sector a component sector holds,
    /// or `None` if it holds parity, a mirror copy, or lies past the last whole stripe unit.
    pub fn raid_sector_of(&self, location: Location) -> Option<u64> {
        let su = self.sect_per_su;
        let n = u64::from(self.columns);
        let column = u64::from(location.column);
        if column >= n || location.sector >= self.stripe_units_per_disk() * su {
            return None;
        }
        let stripe = location.sector / su;
        let offset = location.sector % su;
        let d = self.data_columns();
        let index_in_stripe = match self.level {
            Level::Raid0 => column,
            Level::Raid1 => {
                if column % 2 != 0 {
                    return None;
                }
                column / 2
            }
            Level::Raid4 => {
                if column == d {
                    return None;
                }
                column
            }
            Level::Raid5 => {
                if Some(column as u32) == self.redundancy_column(stripe) {
                    return None;
                }
                // SUID = stripe·d + k with SUID % n == column: k is the unique value in 0..d.
                let base = stripe * d;
                (0..d).find(|k| (base + k) % n == column)?
            }
        };
        Some((stripe * d + index_in_stripe) * su + offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(level: Level, columns: u32, su: u64) -> Geometry {
        Geometry::new(level, columns, su, 1984).unwrap()
    }

    #[test]
    fn raid5_is_left_symmetric() {
        let g = geo(Level::Raid5, 4, 1);
        // Stripe 0: parity on 3, data 0 1 2 on columns 0 1 2.
        // Stripe 1: parity on 2, data 3 4 5 on columns 3 0 1.
        // Stripe 2: parity on 1, data 6 7 8 on columns 2 3 0.
        let cols: Vec<(u32, u32)> = (0..9)
            .map(|r| {
                let m = g.map(r).unwrap();
                (m.data.column, m.redundancy.unwrap().column)
            })
            .collect();
        assert_eq!(cols, vec![(0, 3), (1, 3), (2, 3), (3, 2), (0, 2), (1, 2), (2, 1), (3, 1), (0, 1)]);
        assert_eq!(g.map(5).unwrap().data.sector, 1);
    }

    #[test]
    fn raid0_raid1_raid4() {
        let g = geo(Level::Raid0, 3, 8);
        assert_eq!(g.map(8 * 4 + 3).unwrap().data, Location { column: 1, sector: 8 + 3 });
        assert_eq!(g.total_sectors(), 1984 * 3);
        let g = geo(Level::Raid1, 4, 8);
        let m = g.map(8 * 3 + 1).unwrap();
        assert_eq!(m.data, Location { column: 2, sector: 9 });
        assert_eq!(m.redundancy, Some(Location { column: 3, sector: 9 }));
        assert_eq!(g.total_sectors(), 1984 * 2);
        let g = geo(Level::Raid4, 3, 4);
        let m = g.map(4 * 5).unwrap();
        assert_eq!(m.data, Location { column: 1, sector: 8 });
        assert_eq!(m.redundancy, Some(Location { column: 2, sector: 8 }));
    }

    #[test]
    fn inverse_agrees_everywhere() {
        for level in [Level::Raid0, Level::Raid1, Level::Raid4, Level::Raid5] {
            for columns in [2u32, 3, 4, 5, 6] {
                let Ok(g) = Geometry::new(level, columns, 4, 130) else { continue };
                for r in 0..g.total_sectors() {
                    let m = g.map(r).unwrap();
                    assert_eq!(g.raid_sector_of(m.data), Some(r), "{level:?} {columns} {r}");
                    if let Some(red) = m.redundancy {
                        assert_eq!(g.raid_sector_of(red), None);
                    }
                }
                assert!(g.map(g.total_sectors()).is_err());
            }
        }
    }

    #[test]
    fn bad_geometries() {
        assert_eq!(Geometry::new(Level::Raid0, 2, 0, 10), Err(MappingError::ZeroStripeUnit));
        assert_eq!(Geometry::new(Level::Raid1, 3, 8, 100), Err(MappingError::OddMirror { columns: 3 }));
        assert!(matches!(Geometry::new(Level::Raid5, 1, 8, 100), Err(MappingError::TooFewColumns { .. })));
        assert!(matches!(Geometry::new(Level::Raid5, 3, 8, 7), Err(MappingError::NoStripeUnits { .. })));
    }
}
