//! FreeBSD gvinum volumes: one volume of the drives found among the devices given, run on the
//! engine with its subdisks as slots ([`uraid_vinum::VolumeLayout`]), its states recorded by
//! configuration saves on every drive ([`uraid_vinum::VinumMetadata`]).
//!
//! The drives are found as Vinum's startup finds them, by the name in their headers, whatever
//! the order or paths given ([`crate::vinum_drives::startup`]). A subdisk's member target is
//! its drive at its drive offset, as long as the plex uses it: two subdisks on one drive are
//! two targets on one device.
//!
//! The metadata's devices are the devices of the volume's subdisks, slot by slot (a subdisk
//! whose drive was not found has none), then every other drive found, which holds nothing of
//! this volume but still gets every save, as gvinum saves to every up drive.

use std::sync::Arc;

use thiserror::Error;
use uraid_engine::geometry::{Geometry, NestedLayout};
use uraid_engine::metadata::DeviceRole;
use uraid_engine::SlotState;
use uraid_engine::{Engine, EngineError};
use uraid_vinum::metadata::{SaveDrive, VinumStart};
use uraid_vinum::volume_plan::SlotStart;
use uraid_vinum::{VinumMetadata, VolumePlan, VolumePlanError};

use super::md::MetadataFailure;
use super::{Format, OpenArray};
use crate::error::OpenError;
use crate::member::MemberDevice;
use crate::open_member::Member;
use crate::target::MemberTarget;
use crate::vinum_drives::{startup, StartupError, VinumDriveError};

/// Why a Vinum volume could not be opened.
#[derive(Debug, Error)]
pub enum VolumeOpenError {
    #[error("{path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error("no gvinum drives among the devices given")]
    NoDrives,
    #[error("{0}")]
    Plan(#[from] VolumePlanError),
    #[error(
        "{device}: drive {drive:?} is {size} bytes, but subdisk {subdisk:?} needs it to reach byte {end} (a truncated image?)"
    )]
    DriveTooSmall { device: String, drive: String, size: u64, subdisk: String, end: u64 },
    #[error(
        "volume {volume:?} is a raid5 plex with {missing} subdisk(s) not up, and was not stopped cleanly (its drives carry uraid's unclean mark): parity may not match the data, so data rebuilt from it could be wrong; refusing to run it (md refuses a dirty degraded array too)"
    )]
    DirtyDegraded { volume: String, missing: usize },
    #[error("volume {volume:?} has no plex {plex:?} (its plexes: {plexes})")]
    NoSuchPlex { volume: String, plex: String, plexes: String },
    #[error(transparent)]
    Engine(#[from] uraid_engine::EngineError),
}

/// How a volume is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VolumeStart {
    /// To run: subdisks that are not up are left out or revived.
    Run,
    /// To be initialised: every subdisk taken, to be zeroed.
    Initialise,
}

/// What only a Vinum volume has: its plan, the drives found and gvinum's metadata.
pub struct VinumVolume {
    /// The volume's name.
    pub volume: String,
    /// Its layout, subdisks and states as startup decided them.
    pub plan: VolumePlan,
    /// The drives found, in the kernel's list order, by name, with their devices.
    pub drives: Vec<(String, Arc<dyn MemberDevice>)>,
    /// Devices that were not read as drives, with why (not gvinum, removed, damaged).
    pub skipped: Vec<VinumDriveError>,
    /// Per metadata device, its drive (an index into `drives`).
    devices: Vec<usize>,
    /// Per slot, its metadata device.
    slot_device: Vec<Option<usize>>,
    /// Per metadata device, the slot it holds.
    device_slot: Vec<Option<usize>>,
    pub(super) meta: VinumMetadata,
    /// Per slot: how far its rebuild has come (member sectors), while it is rebuilt.
    pub(super) recovering: Vec<Option<u64>>,
}

impl OpenArray {
    /// Find the gvinum drives among the files or block devices at `paths` and open `volume`.
    pub fn open_volume_paths(
        paths: &[impl AsRef<std::path::Path>],
        volume: &str,
        writable: bool,
    ) -> Result<OpenArray, VolumeOpenError> {
        let mut devs: Vec<Box<dyn MemberDevice>> = Vec::new();
        for p in paths {
            let p = p.as_ref();
            let dev = Member::open(p, writable)
                .map_err(|source| VolumeOpenError::Open { path: p.display().to_string(), source })?;
            devs.push(Box::new(dev));
        }
        OpenArray::open_volume(devs, volume, writable)
    }

    /// Find the gvinum drives among `devs` and open `volume`. Opened writable, subdisks that
    /// are not up on drives that were found come back as slots to rebuild (revived, as
    /// `gvinum start` revives them); read-only, they are left out.
    pub fn open_volume(
        devs: Vec<Box<dyn MemberDevice>>,
        volume: &str,
        writable: bool,
    ) -> Result<OpenArray, VolumeOpenError> {
        OpenArray::open_volume_as(devs, volume, writable, VolumeStart::Run, None)
    }

    /// Find the gvinum drives among `devs` and open one plex of `volume`, read-only, as if it
    /// were the volume's only plex: a way to read a volume uraid cannot run whole (a raid5 plex
    /// mirrored with others), or one plex of a mirror on its own, without detaching anything.
    /// Nothing is ever written: the configuration it runs with leaves the other plexes out.
    pub fn open_volume_plex(
        devs: Vec<Box<dyn MemberDevice>>,
        volume: &str,
        plex: &str,
    ) -> Result<OpenArray, VolumeOpenError> {
        OpenArray::open_volume_as(devs, volume, false, VolumeStart::Run, Some(plex))
    }

    /// Find the gvinum drives at `paths` and open `volume`, a single raid5 plex, to be
    /// initialised: every subdisk taken as it is, whatever its state, for the caller to zero
    /// the whole volume through the engine and then record every subdisk up
    /// ([`uraid_vinum::VolumePlan::initialising`]).
    pub fn open_volume_to_initialise(
        paths: &[impl AsRef<std::path::Path>],
        volume: &str,
    ) -> Result<OpenArray, VolumeOpenError> {
        let mut devs: Vec<Box<dyn MemberDevice>> = Vec::new();
        for p in paths {
            let p = p.as_ref();
            let dev = Member::open(p, true)
                .map_err(|source| VolumeOpenError::Open { path: p.display().to_string(), source })?;
            devs.push(Box::new(dev));
        }
        OpenArray::open_volume_as(devs, volume, true, VolumeStart::Initialise, None)
    }

    fn open_volume_as(
        devs: Vec<Box<dyn MemberDevice>>,
        volume: &str,
        writable: bool,
        how: VolumeStart,
        only_plex: Option<&str>,
    ) -> Result<OpenArray, VolumeOpenError> {
        let devs: Vec<Arc<dyn MemberDevice>> = devs.into_iter().map(Arc::from).collect();
        let refs: Vec<&dyn MemberDevice> = devs.iter().map(|d| d.as_ref()).collect();
        let found = startup(&refs)?;
        if found.drives.is_empty() {
            return Err(VolumeOpenError::NoDrives);
        }
        let mut config = found.merged.config_in_kernel_list_order();
        if let Some(plex) = only_plex {
            assert!(!writable, "one plex of a volume is opened read-only");
            let of_volume = |p: &uraid_vinum_format::Plex| p.volume.as_deref() == Some(volume);
            if !config.plexes.iter().any(|p| p.name == plex && of_volume(p)) {
                let plexes: Vec<&str> =
                    config.plexes.iter().filter(|p| of_volume(p)).map(|p| p.name.as_str()).collect();
                return Err(VolumeOpenError::NoSuchPlex {
                    volume: volume.to_string(),
                    plex: plex.to_string(),
                    plexes: plexes.join(", "),
                });
            }
            // The others are taken as detached, in this run's view only (read-only: never saved).
            for p in config.plexes.iter_mut().filter(|p| p.name != plex && p.volume.as_deref() == Some(volume)) {
                p.volume = None;
            }
        }
        let names: Vec<String> = found.drives.iter().map(|d| d.drive.header.label.name.clone()).collect();
        let plan = match how {
            VolumeStart::Run => VolumePlan::new(&config, volume, &names)?,
            VolumeStart::Initialise => VolumePlan::initialising(&config, volume, &names)?,
        };
        for (sd, drive, _) in &plan.slots {
            let Some(d) = drive else { continue };
            let started = &found.drives[*d];
            let end = sd.drive_offset + sd.used_bytes;
            if started.media_size < end {
                return Err(VolumeOpenError::DriveTooSmall {
                    device: devs[started.index].name().to_string(),
                    drive: sd.drive.clone(),
                    size: started.media_size,
                    subdisk: sd.subdisk.clone(),
                    end,
                });
            }
        }
        let drives: Vec<(String, Arc<dyn MemberDevice>)> =
            found.drives.iter().map(|d| (d.drive.header.label.name.clone(), Arc::clone(&devs[d.index]))).collect();
        let mut devices = Vec::new();
        let mut device_slot = Vec::new();
        let mut slot_device = Vec::new();
        for (slot, (_, drive, _)) in plan.slots.iter().enumerate() {
            slot_device.push(drive.map(|d| {
                devices.push(d);
                device_slot.push(Some(slot));
                devices.len() - 1
            }));
        }
        for d in 0..drives.len() {
            if !devices.contains(&d) {
                devices.push(d);
                device_slot.push(None);
            }
        }
        let geometry = Geometry::custom(plan.layout.clone());
        // A volume saved while writes were in flight (the newest stamp carries uraid's unclean
        // mark) owes a resync. A raid5 plex's rows may have parity that disagrees with their
        // data: rebuilding a subdisk from such parity returns wrong data with no error, so, as
        // md refuses a dirty degraded array, such a plex is not run degraded. A volume of that
        // one plex is refused; in a mirror, the plex is left to be revived whole from the
        // others. A mirror runs on the plexes it has (md's raid1 does too).
        let redundant = geometry.max_degraded() > 0;
        let newest = found.drives.iter().map(|d| d.drive.header.label.last_update).max().unwrap_or_default();
        let unclean = redundant && newest.marks_unclean() && how == VolumeStart::Run;
        let mut states = plan.slot_states(writable);
        if unclean && geometry.is_parity() && states.iter().any(|s| *s != SlotState::InSync) {
            let missing = states.iter().filter(|s| **s != SlotState::InSync).count();
            return Err(VolumeOpenError::DirtyDegraded { volume: volume.to_string(), missing });
        }
        if let Some(nested) = geometry.nested().filter(|_| unclean) {
            distrust_degraded_parity_plexes(nested, &mut states, writable);
        }
        let recovering = states.iter().map(|s| (*s == SlotState::Recovering).then_some(0)).collect();
        let mut array = Engine::new(geometry, states).map_err(|e| match e {
            EngineError::ArrayFailed if unclean => VolumeOpenError::DirtyDegraded {
                volume: volume.to_string(),
                missing: plan.slot_states(writable).iter().filter(|s| **s != SlotState::InSync).count(),
            },
            e => e.into(),
        })?;
        array.set_resync_pending(unclean);
        let meta = VinumMetadata::new(VinumStart {
            config: plan.config.clone(),
            on_disk: config.clone(),
            slot_subdisks: plan.slots.iter().map(|(sd, _, _)| sd.subdisk.clone()).collect(),
            drives: found.drives.iter().map(|d| SaveDrive { header: d.drive.header.clone(), up: true }).collect(),
            devices: devices.clone(),
            writable,
            redundant,
            unclean,
        });
        let skipped = found.skipped.into_iter().map(|(_, e)| e).collect();
        let vinum = VinumVolume {
            volume: volume.to_string(),
            plan,
            drives,
            skipped,
            devices,
            slot_device,
            device_slot,
            meta,
            recovering,
        };
        Ok(OpenArray::with_format(Format::Vinum(Box::new(vinum)), array, writable))
    }
}

/// In a mirror found unclean, a raid5 plex short of a subdisk cannot be trusted to rebuild it
/// (its parity may disagree with its data): its other subdisks are not served either. Writable,
/// they are revived with the plex, whole, from the other plexes once the missing subdisk is
/// back; read-only, they are left out.
fn distrust_degraded_parity_plexes(nested: &NestedLayout, states: &mut [SlotState], writable: bool) {
    for p in 0..nested.plexes().len() {
        let slots = nested.plex_slots(p);
        if nested.plexes()[p].is_parity() && states[slots.clone()].iter().any(|s| *s != SlotState::InSync) {
            for s in &mut states[slots] {
                if *s == SlotState::InSync {
                    *s = if writable { SlotState::Recovering } else { SlotState::Missing };
                }
            }
        }
    }
}

impl OpenArray {
    /// Take the subdisk in `slot` out of the volume while it runs, as `gvinum setstate -f stale`
    /// does: its state is saved stale to every drive, and it is revived (rebuilt) when the
    /// volume is next started. Refused when that would lose data, unless `force`.
    pub fn fail_subdisk(&mut self, slot: usize, force: bool) -> Result<(), OpenError> {
        let Format::Vinum(v) = &mut self.format else {
            return Err(OpenError::Unsupported(format!("failing a subdisk is a Vinum operation; {}", self.describe())));
        };
        let Some((sd, _, _)) = v.plan.slots.get(slot) else {
            return Err(OpenError::BadMember(format!("slot {slot}: the volume has no such subdisk")));
        };
        if !matches!(self.array.slot_states()[slot], SlotState::InSync | SlotState::Recovering) {
            return Err(OpenError::BadMember(format!("subdisk {}: not up", sd.subdisk)));
        }
        self.array.set_slot_state(slot, SlotState::Faulty, force)?;
        v.recovering[slot] = None;
        self.roles_moved();
        self.record_roles()
    }
}

impl VinumVolume {
    /// The index of plex `name` among the volume's plexes, in slot order (the engine's).
    pub fn plex_index(&self, name: &str) -> Option<usize> {
        let mut plexes: Vec<&str> = Vec::new();
        for (sd, _, _) in &self.plan.slots {
            if plexes.last() != Some(&sd.plex.as_str()) {
                plexes.push(&sd.plex);
            }
        }
        plexes.iter().position(|p| *p == name)
    }

    /// Subdisks that are not up on drives that were found (revived when run writable).
    pub fn stale_subdisks(&self) -> Vec<&str> {
        self.plan
            .slots
            .iter()
            .filter(|(_, _, s)| *s == SlotStart::Stale)
            .map(|(sd, _, _)| sd.subdisk.as_str())
            .collect()
    }

    /// Subdisks whose drives were not found, with their drives' names.
    pub fn absent_subdisks(&self) -> Vec<(&str, &str)> {
        self.plan
            .slots
            .iter()
            .filter(|(_, _, s)| *s == SlotStart::Absent)
            .map(|(sd, _, _)| (sd.subdisk.as_str(), sd.drive.as_str()))
            .collect()
    }

    pub(super) fn member_targets(&self) -> Vec<Option<MemberTarget>> {
        self.plan
            .slots
            .iter()
            .map(|(sd, drive, _)| {
                drive.map(|d| MemberTarget {
                    dev: Arc::clone(&self.drives[d].1),
                    base: sd.drive_offset,
                    data_bytes: sd.used_bytes,
                    log_area: None,
                })
            })
            .collect()
    }

    pub(super) fn meta_device(&self, idx: usize) -> Option<&Arc<dyn MemberDevice>> {
        self.devices.get(idx).map(|&d| &self.drives[d].1)
    }

    pub(super) fn drive_of_device(&self, idx: usize) -> usize {
        self.devices[idx]
    }

    pub(super) fn slot_device(&self, slot: usize) -> Option<usize> {
        self.slot_device.get(slot).copied().flatten()
    }

    /// "subdisk v.p0.s1 on DEVICE" (or "on drive d2, not found").
    pub(super) fn slot_member_name(&self, slot: usize) -> String {
        let (sd, drive, _) = &self.plan.slots[slot];
        match drive {
            Some(d) => format!("subdisk {} on {}", sd.subdisk, self.drives[*d].1.name()),
            None => format!("subdisk {} on drive {} (not found)", sd.subdisk, sd.drive),
        }
    }

    pub(super) fn device_roles(&self, states: &[SlotState]) -> Vec<DeviceRole> {
        self.device_slot
            .iter()
            .map(|slot| match slot {
                Some(slot) => DeviceRole::Slot {
                    slot: *slot,
                    state: states[*slot],
                    rebuilt: self.recovering[*slot].unwrap_or(0) * uraid_engine::SECTOR_BYTES,
                },
                None => DeviceRole::Spare,
            })
            .collect()
    }

    /// A metadata write to device `idx` failed: its drive takes no more saves, and every
    /// subdisk of the volume on it is failed, if the volume can do without them (gvinum takes
    /// a drive whose I/O fails down, and its subdisks with it).
    pub(super) fn fail_for_metadata(&mut self, array: &mut Engine, idx: usize) -> MetadataFailure {
        let drive = self.devices[idx];
        let on_drive: Vec<usize> = (0..self.plan.slots.len())
            .filter(|&s| self.slot_device(s).is_some_and(|i| self.devices[i] == drive))
            .filter(|&s| matches!(array.slot_states()[s], SlotState::InSync | SlotState::Recovering))
            .collect();
        let states = array.slot_states().to_vec();
        let alive = |s: usize| states[s] == SlotState::InSync && !on_drive.contains(&s);
        if !on_drive.is_empty() && !array.geometry().is_readable(&alive) {
            return MetadataFailure::Refused;
        }
        for &slot in &on_drive {
            if array.set_slot_state(slot, SlotState::Faulty, true).is_err() {
                return MetadataFailure::Refused;
            }
            self.recovering[slot] = None;
        }
        MetadataFailure::Failed
    }
}

impl From<VolumeOpenError> for OpenError {
    fn from(e: VolumeOpenError) -> OpenError {
        match e {
            VolumeOpenError::Open { path, source } => OpenError::Open { path, source },
            VolumeOpenError::Engine(e) => OpenError::Engine(e),
            VolumeOpenError::DirtyDegraded { missing, .. } => OpenError::DirtyDegraded { missing },
            other => OpenError::BadMember(other.to_string()),
        }
    }
}
