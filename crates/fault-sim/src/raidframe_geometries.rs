//! Named NetBSD RAIDframe sets the simulation runs: `raidframe-raid1-2`, `raidframe-raid1-4`
//! (mirrored pairs), `raidframe-raid4-N` and `raidframe-raid5-N` (N columns), each component a
//! simulated device `dI` holding column I. The seed picks the stripe unit and the component
//! size. The sets start as `uraid raidctl -I` labels new components (the labels NetBSD's
//! `raidctl -C`, `-I` leave), then as a parity rewrite leaves them: zero-filled (parity of zeros
//! is zero), labels clean, parity maps clear.

use uraid_raidframe_format::config_file::{LayoutLine, QueueLine, RaidConfig};
use uraid_raidframe_format::label::{ComponentLabel, RAID_CLEAN};
use uraid_raidframe_format::Level;

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
    /// The set's configuration file, component `dI` in column I.
    pub config: RaidConfig,
    /// Sectors of each component.
    pub partition_sectors: u64,
    /// Parity map regions (as `raidctl -M set` records them), so that a resync after a crash
    /// covers only some of the set.
    pub map_regions: u32,
    /// The sizes the seed chose, for the trace.
    pub summary: String,
}

impl RaidframeBuilt {
    /// The components' labels once the set is initialised and its parity written: clean.
    pub fn labels(&self) -> Result<Vec<ComponentLabel>, String> {
        let sectors = vec![Some(self.partition_sectors); self.config.disks.len()];
        let labels = uraid_raidframe::new_set::new_labels(&self.config, &sectors, Some(SERIAL))
            .map_err(|e| format!("labelling the set: {e}"))?;
        let regions = self.map_regions;
        Ok(labels
            .into_iter()
            .flatten()
            .map(|label| {
                let parity_map_regions = if label.parity_map_regions > 0 { regions } else { 0 };
                ComponentLabel { clean: RAID_CLEAN, parity_map_regions, ..label }
            })
            .collect())
    }
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
    let config = RaidConfig {
        num_rows: 1,
        num_columns: columns as i32,
        disks: (0..columns).map(|c| format!("d{c}")).collect(),
        spares: Vec::new(),
        layout: LayoutLine { sect_per_su: sect_per_su as i32, sus_per_pu: 1, sus_per_ru: 1, level },
        queue: QueueLine { queue_type: "fifo".into(), max_outstanding: 100 },
        debug: Vec::new(),
    };
    // 1 to 32 parity map regions (components this small get 1 by default). Taken from the
    // units already drawn rather than drawn anew, so that every seed's later draws stay the same.
    let map_regions = 1u32 << (units % 6);
    let summary = format!(
        "{name}: RAID {} over {columns} components of {} KiB of data, stripe units of {} KiB, {map_regions} parity map regions",
        level.as_char(),
        data_sectors / 2,
        sect_per_su / 2
    );
    let partition_sectors = uraid_raidframe_format::layout::PROTECTED_SECTORS + data_sectors;
    Ok(RaidframeBuilt { config, partition_sectors, map_regions, summary })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_geometry_builds_labels_netbsd_would_take() {
        for name in ALL {
            for seed in 0..10 {
                let b = build(name, &mut SimRng::new(seed)).unwrap_or_else(|e| panic!("{e}"));
                let labels = b.labels().unwrap();
                assert_eq!(labels.len(), b.config.disks.len());
                for label in labels {
                    label.check_reasonable(Some(b.partition_sectors)).unwrap();
                    assert!(label.is_clean());
                }
            }
        }
        assert!(build("raidframe-raid1-3", &mut SimRng::new(1)).is_err(), "RAID 1 is pairs");
        assert!(build("raidframe-raid5-2", &mut SimRng::new(1)).is_err());
        assert!(build("raid5-4-ls", &mut SimRng::new(1)).is_err());
    }
}
