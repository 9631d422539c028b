//! Which of a volume's subdisks serve, from the configuration the drives hold and which drives
//! were found: the part of Vinum's startup that decides states, as the kernel does
//! (`gv_update_sd_state`), and what uraid then does with each subdisk.
//!
//! - An `up` subdisk on a drive found serves.
//! - A subdisk whose drive was not found is `down` and its slot is empty.
//! - A subdisk on a drive found but not `up` (`stale`, `down`, `reviving`, `initializing`) holds
//!   out-of-date contents: it is neither read nor written until it is revived (rebuilt from the
//!   other plexes, or from parity), which uraid does when it runs the volume writable, as
//!   `gvinum start` does on FreeBSD.
//!
//! A volume that cannot be read whole with the subdisks that serve is refused, naming what is
//! missing.

use thiserror::Error;
use uraid_engine::geometry::Layout;
use uraid_engine::SlotState;
use uraid_vinum_format::{SubdiskState, VinumConfig};

use crate::metadata::refresh_states;
use crate::volume_layout::{SlotSubdisk, VolumeLayout, VolumeLayoutError};

/// What a slot starts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotStart {
    /// Its subdisk is up and its drive found: it serves.
    Serves,
    /// Its drive was found but its subdisk is not up: revived before it serves.
    Stale,
    /// Its drive was not found.
    Absent,
}

/// A volume ready to run.
#[derive(Debug, Clone)]
pub struct VolumePlan {
    pub layout: VolumeLayout,
    /// Per slot: its subdisk, the index of its drive among those found, and how it starts.
    pub slots: Vec<(SlotSubdisk, Option<usize>, SlotStart)>,
    /// The configuration with the states the kernel would give it now (subdisks on drives not
    /// found are down; plexes and volumes follow).
    pub config: VinumConfig,
}

/// Why a volume cannot run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VolumePlanError {
    #[error(transparent)]
    Layout(#[from] VolumeLayoutError),
    #[error("volume {volume:?} cannot be read: {why}")]
    Down { volume: String, why: String },
}

impl VolumePlan {
    /// Plan `volume` of `config` with the drives named in `found` (in the order of the driver's
    /// drives).
    pub fn new(config: &VinumConfig, volume: &str, found: &[String]) -> Result<VolumePlan, VolumePlanError> {
        let layout = VolumeLayout::new(config, volume)?;
        let mut config = config.clone();
        let mut slots = Vec::new();
        for sd in layout.slot_subdisks() {
            let drive = found.iter().position(|d| *d == sd.drive);
            let state = config.subdisk(&sd.subdisk).map(|s| s.state);
            let start = match (drive, state) {
                (None, _) => SlotStart::Absent,
                (Some(_), Some(SubdiskState::Up)) => SlotStart::Serves,
                (Some(_), _) => SlotStart::Stale,
            };
            if start == SlotStart::Absent {
                if let Some(s) = config.subdisks.iter_mut().find(|s| s.name == sd.subdisk) {
                    s.state = SubdiskState::Down;
                }
            }
            slots.push((sd, drive, start));
        }
        refresh_states(&mut config);
        let plan = VolumePlan { layout, slots, config };
        let serves = |slot: usize| plan.slots[slot].2 == SlotStart::Serves;
        if !plan.layout.is_readable(&serves) {
            let out: Vec<String> = plan
                .slots
                .iter()
                .filter(|(_, _, start)| *start != SlotStart::Serves)
                .map(|(sd, _, start)| match start {
                    SlotStart::Absent => format!("{} (drive {} not found)", sd.subdisk, sd.drive),
                    _ => format!(
                        "{} ({})",
                        sd.subdisk,
                        config_state(&plan.config, &sd.subdisk).map_or("unknown".into(), |s| s.to_string())
                    ),
                })
                .collect();
            return Err(VolumePlanError::Down {
                volume: volume.to_string(),
                why: format!("no copy of some of its data is up; not serving: {}", out.join(", ")),
            });
        }
        Ok(plan)
    }

    /// `volume` about to be initialised (`gvinum start` of a raid5 plex that is down: every
    /// subdisk is zero-filled, which makes every row's parity right): every subdisk serves
    /// whatever its state, so every drive must have been found. Only a volume of one raid5
    /// plex is initialised.
    pub fn initialising(config: &VinumConfig, volume: &str, found: &[String]) -> Result<VolumePlan, VolumePlanError> {
        let layout = VolumeLayout::new(config, volume)?;
        if !matches!(layout.redundancy(), uraid_engine::geometry::Redundancy::Parity { .. }) {
            return Err(VolumePlanError::Down {
                volume: volume.to_string(),
                why: format!("only a raid5 plex is initialised, and this is a {}", layout.summary()),
            });
        }
        let mut slots = Vec::new();
        for sd in layout.slot_subdisks() {
            let Some(drive) = found.iter().position(|d| *d == sd.drive) else {
                return Err(VolumePlanError::Down {
                    volume: volume.to_string(),
                    why: format!("cannot initialise: drive {} of subdisk {} was not found", sd.drive, sd.subdisk),
                });
            };
            slots.push((sd, Some(drive), SlotStart::Serves));
        }
        Ok(VolumePlan { layout, slots, config: config.clone() })
    }

    /// The engine's state for each slot: serving subdisks in sync, stale ones to be rebuilt
    /// (`revive`) or failed, absent ones missing.
    pub fn slot_states(&self, revive: bool) -> Vec<SlotState> {
        self.slots
            .iter()
            .map(|(_, _, start)| match start {
                SlotStart::Serves => SlotState::InSync,
                SlotStart::Stale if revive => SlotState::Recovering,
                SlotStart::Stale => SlotState::Faulty,
                SlotStart::Absent => SlotState::Missing,
            })
            .collect()
    }
}

fn config_state(config: &VinumConfig, subdisk: &str) -> Option<SubdiskState> {
    config.subdisk(subdisk).map(|s| s.state)
}

#[cfg(test)]
mod tests;
