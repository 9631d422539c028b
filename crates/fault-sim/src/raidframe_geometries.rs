//! Named NetBSD RAIDframe sets the simulation runs: `raidframe-raid1-2`, `raidframe-raid1-4`
//! (mirrored pairs), `raidframe-raid4-N` and `raidframe-raid5-N` (N columns), each component a
//! simulated device `dI` holding column I. The seed picks the stripe unit and the component
//! size. The sets start as NetBSD leaves a new set once it is initialised (`raidctl -C`, `-I`,
//! `-i`, `-u`): zero-filled (parity of zeros is zero), labels clean, parity maps clear.

use uraid_raidframe_format::{Level, NewSet};

use crate::rng::SimRng;

/// The RAIDframe geometries a RAIDframe campaign covers.
pub const ALL: &[&str] = &[
    "raidframe-raid1-2",
    "raidframe-raid1-4",
    "raidframe-raid4-3",
    "raidframe-raid4-4",
    "raidframe-raid5-3",
    "raidframe-raid5-4",
    "raidframe-raid5-5",
];

/// Whether a geometry name is a RAIDframe set's.
pub fn is_raidframe(name: &str) -> bool {
    name.starts_with("raidframe-")
}

/// The serial number every simulated set carries.
pub const SERIAL: i32 = 2026;

/// A RAIDframe set built for one run.
#[derive(Debug, Clone)]
pub struct RaidframeBuilt {
    pub set: NewSet,
    /// The sizes the seed chose, for the trace.
    pub summary: String,
}

/// Build RAIDframe geometry `name` with sizes drawn from `rng`.
pub fn build(name: &str, rng: &mut SimRng) -> Result<RaidframeBuilt, String> {
    let bad = || format!("unknown RAIDframe geometry {name:?} (examples: {})", ALL[..3].join(", "));
    let rest = name.strip_prefix("raidframe-raid").ok_or_else(bad)?;
    let (level, columns) = rest.split_once('-').ok_or_else(bad)?;
    let columns: u32 = columns.parse().map_err(|_| bad())?;
    let level = match level {
        "1" if (2..=8).contains(&columns) && columns.is_multiple_of(2) => Level::Raid1,
        "4" if (3..=8).contains(&columns) => Level::Raid4,
        "5" if (3..=8).contains(&columns) => Level::Raid5,
        _ => return Err(bad()),
    };
    // Stripe units of 4 to 32 KiB; 256 to 512 KiB of data per component, whole units.
    let sect_per_su = rng.pick(&[8u32, 16, 32, 64]);
    let units = rng.between(512 / u64::from(sect_per_su), 1024 / u64::from(sect_per_su));
    let data_sectors = units * u64::from(sect_per_su);
    let set = NewSet {
        serial_number: SERIAL,
        level,
        num_columns: columns,
        sect_per_su,
        max_outstanding: 100,
        sector_bytes: 512,
        partition_sectors: uraid_raidframe_format::layout::PROTECTED_SECTORS + data_sectors,
    };
    let summary = format!(
        "{name}: RAID {} over {columns} components of {} KiB of data, stripe units of {} KiB",
        level.as_char(),
        data_sectors / 2,
        sect_per_su / 2
    );
    Ok(RaidframeBuilt { set, summary })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_geometry_builds_labels_netbsd_would_take() {
        for name in ALL {
            for seed in 0..10 {
                let b = build(name, &mut SimRng::new(seed)).unwrap_or_else(|e| panic!("{e}"));
                for column in 0..b.set.num_columns {
                    let label = b.set.label(column, 9, true).expect("room for data");
                    label.check_reasonable(Some(b.set.partition_sectors)).unwrap();
                }
            }
        }
        assert!(build("raidframe-raid1-3", &mut SimRng::new(1)).is_err(), "RAID 1 is pairs");
        assert!(build("raidframe-raid5-2", &mut SimRng::new(1)).is_err());
        assert!(build("raid5-4-ls", &mut SimRng::new(1)).is_err());
    }
}
