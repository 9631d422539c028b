//! Placement: a create description, the drives' sizes and the configuration gvinum already
//! has, turned into the complete configuration the kernel would build from them
//! (`gv_create` in `geom_vinum.c`; `gv_create_drive`, `gv_create_volume`, `gv_create_plex`,
//! `gv_create_sd` in `geom_vinum_create.c`; `gv_sd_to_drive`, `gv_sd_to_plex`,
//! `gv_update_plex_config`, `gv_setup_objects` in `geom_vinum_subr.c`).
//!
//! The kernel creates the new drives, then the volumes, then the plexes, then the
//! subdisks, each kind in the order of the description. Each subdisk first goes onto its
//! drive ([`FreeList`]): without a length (or with 0 or less) it takes the drive's largest
//! free extent, without a drive offset the first free extent that holds it, with one the
//! free extent there. Then it joins its plex: a striped or raid5 subdisk is cut to whole
//! stripes and to the length of the plex's other subdisks (or, in a plex created now, cuts
//! them down to its own length), and without a plex offset it goes to the next column, or
//! after the last subdisk of a concat plex. Bytes cut off a subdisk go back to its drive's
//! free list at once, so later subdisks of the same create can use them. At the end every
//! striped and raid5 subdisk is cut to whole stripes and the states are set: new subdisks
//! and plexes up, and a plex added to a volume that existed before down with its subdisks
//! stale (raid5: up) until `start` syncs it.
//!
//! Those cuts are the only adjustments: they are the kernel's own. Everything else the
//! kernel would do differently from what the description says is refused with a
//! [`PlacementError`] naming the object and drive, and so is whatever the kernel would
//! create but could not bring up (a plex with too few subdisks, a subdisk with no whole
//! stripe, anything [`VinumConfig::problems_on_drives`] reports). The kernel creates what
//! it can and logs the rest; placement is all or nothing.
//!
//! The result lists objects as the kernel's lists hold them: each new object is inserted at
//! the head, so the new ones come first, latest first, then the present ones in the order
//! given. Given the present objects in the kernel's order, [`crate::format_config`] of the
//! result is the text the kernel saves.

pub(crate) mod free_list;
pub(crate) mod plex_rules;
mod shortcuts;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

use crate::create_description::{CreateDescription, SubdiskRequest};
use crate::drive_layout::{DATA_START, SECTOR_SIZE};
use crate::objects::{
    check_name, ConfigProblem, Drive, NameProblem, ObjectKind, Plex, PlexMembership, PlexOrganization, PlexState,
    Subdisk, SubdiskState, VinumConfig, Volume,
};

pub use free_list::{data_area_end, Extent, FreeList};
pub use plex_rules::{plex_state, volume_state};
pub use shortcuts::{concat, mirror, raid5, stripe, ShortcutCommand};

use free_list::Refusal;
use plex_rules::{JoinRefusal, StripedJoin};

/// Largest stripe size: the kernel keeps it in an `int` (`struct gv_plex`), in whole
/// sectors here.
pub const MAX_STRIPE_SIZE: u64 = i32::MAX as u64 / SECTOR_SIZE * SECTOR_SIZE;

/// A gvinum drive with the size of the media it lives on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SizedDrive {
    /// The drive's name.
    pub name: String,
    /// Its device, without `/dev/`.
    pub device: String,
    /// Bytes on the device (its media size); subdisks may use [`DATA_START`] up to
    /// [`data_area_end`] of it.
    pub media_size: u64,
}

/// What gvinum has before the create. Every drive listed is taken to be up: placement only
/// puts subdisks on drives whose size it knows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Present {
    /// The objects, best in the kernel's list order (see the module documentation).
    pub config: VinumConfig,
    /// The drives.
    pub drives: Vec<SizedDrive>,
}

/// A drive after placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedDrive {
    /// The drive.
    pub drive: SizedDrive,
    /// Its free extents, lowest offset first.
    pub free: Vec<Extent>,
}

/// The outcome of a create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// New and present objects, in the kernel's list order.
    pub config: VinumConfig,
    /// New and present drives, new ones first (latest first), as the kernel lists them.
    pub drives: Vec<PlacedDrive>,
}

/// Why a create cannot be placed as the kernel would place it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlacementError {
    /// The present configuration itself would not come up as written.
    #[error("the present configuration has problems: {}", list(problems))]
    PresentUnsound { problems: Vec<ConfigProblem> },
    /// Two present drives of one name, or two on one device.
    #[error("present drive {drive:?} is listed twice (by name or device)")]
    PresentDriveListedTwice { drive: String },
    /// A name that cannot be written into the configuration text.
    #[error("{kind} name {name:?} {problem}")]
    BadName { kind: ObjectKind, name: String, problem: NameProblem },
    /// An object whose name gvinum already has (the kernel refuses the create; with `-f` it
    /// skips the object).
    #[error("{kind} {name:?} already exists")]
    AlreadyExists { kind: ObjectKind, name: String },
    /// Two new objects of one kind and name (the kernel would create both).
    #[error("{kind} {name:?} is described twice")]
    DescribedTwice { kind: ObjectKind, name: String },
    /// A new drive without a device.
    #[error("drive {drive:?} names no device")]
    MissingDevice { drive: String },
    /// A new drive on a device that already holds a gvinum drive.
    #[error("drive {drive:?}: device {device:?} is already gvinum drive {holder:?}")]
    DeviceInUse { drive: String, device: String, holder: String },
    /// A new drive on a device whose size was not given.
    #[error("drive {drive:?}: the size of device {device:?} is not known")]
    UnknownDeviceSize { drive: String, device: String },
    /// A plex naming no volume.
    #[error("plex {plex:?} belongs to no volume")]
    PlexWithoutVolume { plex: String },
    /// A plex naming a volume gvinum does not have.
    #[error("plex {plex:?} names volume {volume:?}, which does not exist")]
    UnknownVolume { plex: String, volume: String },
    /// A subdisk naming no plex.
    #[error("sd {subdisk:?} on drive {drive:?} belongs to no plex")]
    SubdiskWithoutPlex { subdisk: String, drive: String },
    /// A subdisk naming a plex gvinum does not have.
    #[error("sd {subdisk:?} on drive {drive:?} names plex {plex:?}, which does not exist")]
    UnknownPlex { subdisk: String, drive: String, plex: String },
    /// A subdisk on a drive that is neither present (with a size) nor created.
    #[error("sd {subdisk:?} is on drive {drive:?}, which does not exist or whose size is not known")]
    UnknownDrive { subdisk: String, drive: String },
    /// A striped or raid5 plex with stripe size 0 (the kernel would divide by it).
    #[error("plex {plex:?} has stripe size 0")]
    ZeroStripeSize { plex: String },
    /// A stripe size the configuration text cannot hold (it counts sectors).
    #[error("plex {plex:?}: stripe size {stripe_size} is not a whole number of 512-byte sectors")]
    StripeSizeNotWholeSectors { plex: String, stripe_size: u64 },
    /// A stripe size larger than the kernel's `int` holds.
    #[error("plex {plex:?}: stripe size {stripe_size} is larger than gvinum can hold ({MAX_STRIPE_SIZE})")]
    StripeSizeTooLarge { plex: String, stripe_size: u64 },
    /// A subdisk length or offset the configuration text cannot hold.
    #[error("sd {subdisk:?} on drive {drive:?}: {what} {value} is not a whole number of 512-byte sectors")]
    NotWholeSectors { subdisk: String, drive: String, what: &'static str, value: u64 },
    /// A drive with no free space left.
    #[error("sd {subdisk:?}: drive {drive:?} has no free space")]
    NoFreeSpace { subdisk: String, drive: String },
    /// No free extent long enough.
    #[error("sd {subdisk:?}: no free extent of {length} bytes on drive {drive:?} (the longest has {largest})")]
    NoExtentLargeEnough { subdisk: String, drive: String, length: u64, largest: u64 },
    /// A drive offset inside the header and configuration copies.
    #[error("sd {subdisk:?}: drive offset {drive_offset} on drive {drive:?} is inside gvinum's metadata (data starts at {DATA_START})")]
    OffsetInMetadata { subdisk: String, drive: String, drive_offset: u64 },
    /// A subdisk reaching past the end of its drive's data area.
    #[error("sd {subdisk:?} would end at byte {end}, past the end of drive {drive:?} (data area ends at {data_end})")]
    PastDriveEnd { subdisk: String, drive: String, end: u128, data_end: u64 },
    /// A subdisk over another one.
    #[error("sd {subdisk:?} at drive bytes {drive_offset}..{end} of drive {drive:?} overlaps sd {other:?}")]
    OverlapsSubdisk { subdisk: String, drive: String, other: String, drive_offset: u64, end: u128 },
    /// A drive offset and length that are not free, inside the data area and over no
    /// subdisk (not expected: the free list is the complement of the subdisks; reported
    /// rather than assumed).
    #[error("sd {subdisk:?}: drive bytes {drive_offset} (+{length}) of drive {drive:?} are not free")]
    NotFree { subdisk: String, drive: String, drive_offset: u64, length: u64 },
    /// An autosized subdisk with a drive offset where its drive's largest free extent does
    /// not start: the kernel would ignore the offset.
    #[error("sd {subdisk:?} takes the largest free extent of drive {drive:?}, at byte {chosen}, not the drive offset {given} given")]
    AutosizeElsewhere { subdisk: String, drive: String, given: u64, chosen: u64 },
    /// A striped or raid5 subdisk shorter than one stripe.
    #[error(
        "sd {subdisk:?} on drive {drive:?} ({length} bytes) holds no whole stripe of plex {plex:?} ({stripe_size})"
    )]
    NoWholeStripe { subdisk: String, drive: String, plex: String, length: u64, stripe_size: u64 },
    /// A subdisk shorter than the columns of a striped or raid5 plex that existed before.
    #[error("sd {subdisk:?} on drive {drive:?} has {length} bytes of whole stripes; plex {plex:?} has columns of {column_length}")]
    ShorterThanColumns { subdisk: String, drive: String, plex: String, length: u64, column_length: u64 },
    /// Two subdisks at one plex offset.
    #[error("sd {subdisk:?} on drive {drive:?} would be at plex offset {plex_offset} of plex {plex:?}, where sd {other:?} is")]
    PlexOffsetTaken { subdisk: String, drive: String, plex: String, plex_offset: u64, other: String },
    /// A plex left with fewer subdisks than its organization needs (the kernel keeps it
    /// down).
    #[error("{organization} plex {plex:?} would have {found} subdisks; it needs at least {needed}")]
    TooFewSubdisks { plex: String, organization: PlexOrganization, found: usize, needed: usize },
    /// A shortcut command given too few drives.
    #[error("{command} volume {volume:?} needs at least {needed} drives, got {found}")]
    TooFewDrives { command: ShortcutCommand, volume: String, found: usize, needed: usize },
    /// `mirror` given an odd number of drives.
    #[error("mirror volume {volume:?} needs an even number of drives, got {found}")]
    OddDriveCount { volume: String, found: usize },
    /// Anything else that would keep the result from coming up as written.
    #[error("the result would not come up as written: {}", list(problems))]
    Unsound { problems: Vec<ConfigProblem> },
}

/// The problems that stop a create. A detached plex or subdisk is none: it is what gvinum's
/// `detach` leaves, kept as it is until attached or removed (the kernel drops it only when it
/// next tastes the drives), and a create's own plexes and subdisks always have a parent.
fn blocking(problems: Vec<ConfigProblem>) -> Vec<ConfigProblem> {
    problems
        .into_iter()
        .filter(|p| !matches!(p, ConfigProblem::PlexWithoutVolume { .. } | ConfigProblem::SubdiskWithoutPlex { .. }))
        .collect()
}

fn list(problems: &[ConfigProblem]) -> String {
    problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// Place a create description: `present` is what gvinum has, `device_sizes` the media size
/// of each device the description creates a drive on (by device name, without `/dev/`).
pub fn place(
    description: &CreateDescription,
    present: &Present,
    device_sizes: &BTreeMap<String, u64>,
) -> Result<Placement, PlacementError> {
    let mut builder = Builder::with_present(present)?;
    for drive in &description.drives {
        builder.add_drive(drive, device_sizes)?;
    }
    for volume in &description.volumes {
        builder.add_volume(volume)?;
    }
    for plex in &description.plexes {
        builder.add_plex(plex)?;
    }
    for request in &description.subdisks {
        builder.add_subdisk(request)?;
    }
    builder.finish()
}

struct DriveRecord {
    drive: SizedDrive,
    free: FreeList,
    new: bool,
}

struct VolumeRecord {
    volume: Volume,
    new: bool,
}

struct PlexRecord {
    plex: Plex,
    new: bool,
    /// New in a volume that was there before (`GV_PLEX_ADDED`).
    added: bool,
    /// Subdisk indices in plex-offset order.
    members: Vec<usize>,
    gained_members: bool,
}

struct SubdiskRecord {
    subdisk: Subdisk,
    new: bool,
    /// Joined a running striped or raid5 plex to grow it (`GV_SD_GROW`).
    grows: bool,
}

impl SubdiskRecord {
    fn plex_offset(&self) -> u64 {
        self.subdisk.membership.as_ref().map_or(0, |m| m.plex_offset)
    }

    fn end(&self) -> u64 {
        self.subdisk.drive_offset + self.subdisk.length
    }
}

/// The objects as the kernel holds them during the create.
struct Builder {
    drives: Vec<DriveRecord>,
    volumes: Vec<VolumeRecord>,
    plexes: Vec<PlexRecord>,
    subdisks: Vec<SubdiskRecord>,
    drive_index: BTreeMap<String, usize>,
    volume_index: BTreeMap<String, usize>,
    plex_index: BTreeMap<String, usize>,
    subdisk_index: BTreeMap<String, usize>,
    /// Drive names the present subdisks refer to: the kernel has a drive of each name, if
    /// only a placeholder for one it has not seen.
    referenced_drives: BTreeSet<String>,
}

impl Builder {
    fn with_present(present: &Present) -> Result<Self, PlacementError> {
        let mut builder = Builder {
            drives: Vec::new(),
            volumes: Vec::new(),
            plexes: Vec::new(),
            subdisks: Vec::new(),
            drive_index: BTreeMap::new(),
            volume_index: BTreeMap::new(),
            plex_index: BTreeMap::new(),
            subdisk_index: BTreeMap::new(),
            referenced_drives: present.config.subdisks.iter().map(|s| s.drive.clone()).collect(),
        };
        for drive in &present.drives {
            if builder.drive_index.contains_key(&drive.name) || builder.drive_on_device(&drive.device).is_some() {
                return Err(PlacementError::PresentDriveListedTwice { drive: drive.name.clone() });
            }
            builder.drive_index.insert(drive.name.clone(), builder.drives.len());
            builder.drives.push(DriveRecord {
                drive: drive.clone(),
                free: FreeList::empty_drive(drive.media_size),
                new: false,
            });
        }
        let problems = blocking(present.config.problems_on_drives(&builder.media_sizes()));
        if !problems.is_empty() {
            return Err(PlacementError::PresentUnsound { problems });
        }
        for volume in &present.config.volumes {
            builder.volume_index.insert(volume.name.clone(), builder.volumes.len());
            builder.volumes.push(VolumeRecord { volume: volume.clone(), new: false });
        }
        for plex in &present.config.plexes {
            builder.plex_index.insert(plex.name.clone(), builder.plexes.len());
            builder.plexes.push(PlexRecord {
                plex: plex.clone(),
                new: false,
                added: false,
                members: Vec::new(),
                gained_members: false,
            });
        }
        for subdisk in &present.config.subdisks {
            let index = builder.subdisks.len();
            if let Some(&d) = builder.drive_index.get(&subdisk.drive) {
                // Whole sectors, inside the media, past the metadata, not overlapping: so
                // inside the data area and inside one free extent.
                let occupied =
                    builder.drives[d].free.occupy(Extent { offset: subdisk.drive_offset, length: subdisk.length });
                debug_assert!(occupied, "a sound present subdisk lies in free space");
            }
            let plex = subdisk.plex().and_then(|p| builder.plex_index.get(p)).copied();
            builder.subdisk_index.insert(subdisk.name.clone(), index);
            builder.subdisks.push(SubdiskRecord { subdisk: subdisk.clone(), new: false, grows: false });
            if let Some(p) = plex {
                builder.insert_member(p, index);
            }
        }
        Ok(builder)
    }

    fn media_sizes(&self) -> BTreeMap<String, u64> {
        self.drives.iter().map(|d| (d.drive.name.clone(), d.drive.media_size)).collect()
    }

    fn drive_on_device(&self, device: &str) -> Option<&DriveRecord> {
        self.drives.iter().find(|d| d.drive.device == device)
    }

    /// Refuse a name gvinum has, or one described before.
    fn check_new_name(&self, kind: ObjectKind, name: &str) -> Result<(), PlacementError> {
        check_name(kind, name).map_err(|problem| PlacementError::BadName { kind, name: name.to_string(), problem })?;
        let existing = match kind {
            ObjectKind::Drive => self
                .drive_index
                .get(name)
                .map(|&i| self.drives[i].new)
                .or_else(|| self.referenced_drives.contains(name).then_some(false)),
            ObjectKind::Volume => self.volume_index.get(name).map(|&i| self.volumes[i].new),
            ObjectKind::Plex => self.plex_index.get(name).map(|&i| self.plexes[i].new),
            ObjectKind::Subdisk => self.subdisk_index.get(name).map(|&i| self.subdisks[i].new),
        };
        match existing {
            None => Ok(()),
            Some(true) => Err(PlacementError::DescribedTwice { kind, name: name.to_string() }),
            Some(false) => Err(PlacementError::AlreadyExists { kind, name: name.to_string() }),
        }
    }

    /// `gv_create` checks the name and device, `gv_create_drive` starts the free list.
    fn add_drive(&mut self, drive: &Drive, device_sizes: &BTreeMap<String, u64>) -> Result<(), PlacementError> {
        self.check_new_name(ObjectKind::Drive, &drive.name)?;
        let device = drive.device.clone().ok_or(PlacementError::MissingDevice { drive: drive.name.clone() })?;
        if let Some(holder) = self.drive_on_device(&device) {
            return Err(PlacementError::DeviceInUse {
                drive: drive.name.clone(),
                device,
                holder: holder.drive.name.clone(),
            });
        }
        let &media_size = device_sizes
            .get(&device)
            .ok_or_else(|| PlacementError::UnknownDeviceSize { drive: drive.name.clone(), device: device.clone() })?;
        self.drive_index.insert(drive.name.clone(), self.drives.len());
        self.drives.push(DriveRecord {
            drive: SizedDrive { name: drive.name.clone(), device, media_size },
            free: FreeList::empty_drive(media_size),
            new: true,
        });
        Ok(())
    }

    fn add_volume(&mut self, volume: &Volume) -> Result<(), PlacementError> {
        self.check_new_name(ObjectKind::Volume, &volume.name)?;
        self.volume_index.insert(volume.name.clone(), self.volumes.len());
        self.volumes.push(VolumeRecord { volume: volume.clone(), new: true });
        Ok(())
    }

    /// `gv_create_plex`: the volume must exist; a plex for a volume that was there before is
    /// `GV_PLEX_ADDED`.
    fn add_plex(&mut self, plex: &Plex) -> Result<(), PlacementError> {
        self.check_new_name(ObjectKind::Plex, &plex.name)?;
        let name = || plex.name.clone();
        if let Some(stripe_size) = plex.organization.stripe_size() {
            if stripe_size == 0 {
                return Err(PlacementError::ZeroStripeSize { plex: name() });
            }
            if !stripe_size.is_multiple_of(SECTOR_SIZE) {
                return Err(PlacementError::StripeSizeNotWholeSectors { plex: name(), stripe_size });
            }
            if stripe_size > MAX_STRIPE_SIZE {
                return Err(PlacementError::StripeSizeTooLarge { plex: name(), stripe_size });
            }
        }
        let volume = plex.volume.as_ref().ok_or_else(|| PlacementError::PlexWithoutVolume { plex: name() })?;
        let &v = self
            .volume_index
            .get(volume)
            .ok_or_else(|| PlacementError::UnknownVolume { plex: name(), volume: volume.clone() })?;
        self.plex_index.insert(plex.name.clone(), self.plexes.len());
        self.plexes.push(PlexRecord {
            plex: plex.clone(),
            new: true,
            added: !self.volumes[v].new,
            members: Vec::new(),
            gained_members: false,
        });
        Ok(())
    }

    /// `gv_create_sd`: onto the drive (`gv_sd_to_drive`), then into the plex
    /// (`gv_sd_to_plex`).
    fn add_subdisk(&mut self, request: &SubdiskRequest) -> Result<(), PlacementError> {
        self.check_new_name(ObjectKind::Subdisk, &request.name)?;
        let subdisk = || request.name.clone();
        let drive = || request.drive.clone();
        let plex_name = request
            .plex
            .as_ref()
            .ok_or_else(|| PlacementError::SubdiskWithoutPlex { subdisk: subdisk(), drive: drive() })?;
        let &p = self.plex_index.get(plex_name).ok_or_else(|| PlacementError::UnknownPlex {
            subdisk: subdisk(),
            drive: drive(),
            plex: plex_name.clone(),
        })?;
        let &d = self
            .drive_index
            .get(&request.drive)
            .ok_or_else(|| PlacementError::UnknownDrive { subdisk: subdisk(), drive: drive() })?;
        // A length of 0 asks for autosize, as the kernel reads `len 0` (`gv_new_sd`).
        let length = request.length.filter(|&l| l > 0);
        let given = [("length", length), ("drive offset", request.drive_offset), ("plex offset", request.plex_offset)];
        for (what, value) in given {
            if let Some(value) = value.filter(|v| !v.is_multiple_of(SECTOR_SIZE)) {
                return Err(PlacementError::NotWholeSectors { subdisk: subdisk(), drive: drive(), what, value });
            }
        }
        if let Some(drive_offset) = request.drive_offset.filter(|&o| o < DATA_START) {
            return Err(PlacementError::OffsetInMetadata { subdisk: subdisk(), drive: drive(), drive_offset });
        }
        let extent = self.drives[d].free.choose(length, request.drive_offset).map_err(|refusal| {
            self.explain_refusal(refusal, request, d, length.unwrap_or(0), request.drive_offset.unwrap_or(0))
        })?;
        let occupied = self.drives[d].free.occupy(extent);
        debug_assert!(occupied, "the free list chose an extent it holds");
        let index = self.subdisks.len();
        self.subdisk_index.insert(request.name.clone(), index);
        self.subdisks.push(SubdiskRecord {
            subdisk: Subdisk {
                name: request.name.clone(),
                drive: request.drive.clone(),
                length: extent.length,
                drive_offset: extent.offset,
                membership: None,
                state: SubdiskState::Up,
            },
            new: true,
            grows: false,
        });
        self.join_plex(index, p, request.plex_offset)
    }

    fn explain_refusal(
        &self,
        refusal: Refusal,
        request: &SubdiskRequest,
        d: usize,
        length: u64,
        drive_offset: u64,
    ) -> PlacementError {
        let subdisk = request.name.clone();
        let drive = request.drive.clone();
        match refusal {
            Refusal::Full => PlacementError::NoFreeSpace { subdisk, drive },
            Refusal::NoneLargeEnough { largest } => {
                PlacementError::NoExtentLargeEnough { subdisk, drive, length, largest }
            }
            Refusal::AutosizeElsewhere { chosen } => {
                PlacementError::AutosizeElsewhere { subdisk, drive, given: drive_offset, chosen }
            }
            Refusal::NotFreeAt => {
                let end = u128::from(drive_offset) + u128::from(length);
                let data_end = data_area_end(self.drives[d].drive.media_size);
                if end > u128::from(data_end) {
                    return PlacementError::PastDriveEnd { subdisk, drive, end, data_end };
                }
                let overlapping = self.subdisks.iter().find(|s| {
                    s.subdisk.drive == drive
                        && u128::from(s.subdisk.drive_offset) < end
                        && s.end() > drive_offset
                        && s.subdisk.length > 0
                });
                match overlapping {
                    Some(other) => PlacementError::OverlapsSubdisk {
                        subdisk,
                        drive,
                        other: other.subdisk.name.clone(),
                        drive_offset,
                        end,
                    },
                    None => PlacementError::NotFree { subdisk, drive, drive_offset, length },
                }
            }
        }
    }

    /// `gv_sd_to_plex`: cut a striped or raid5 subdisk to the plex, find its plex offset,
    /// insert it in plex-offset order.
    fn join_plex(&mut self, sd: usize, p: usize, given_plex_offset: Option<u64>) -> Result<(), PlacementError> {
        let organization = self.plexes[p].plex.organization;
        let members = self.plexes[p].members.clone();
        if let (Some(stripe_size), Some(shortest)) =
            (organization.stripe_size(), members.iter().map(|&m| self.subdisks[m].subdisk.length).min())
        {
            let length = self.subdisks[sd].subdisk.length;
            match plex_rules::join_striped(length, stripe_size, shortest, self.plexes[p].new) {
                Ok(StripedJoin { trim_joining, trim_each_member }) => {
                    self.trim(sd, trim_joining);
                    for &m in &members {
                        self.trim(m, trim_each_member);
                    }
                }
                Err(JoinRefusal::NoWholeStripe) => return Err(self.no_whole_stripe(sd, p, length, stripe_size)),
                Err(JoinRefusal::ShorterThanColumns { column_length }) => {
                    let s = &self.subdisks[sd].subdisk;
                    return Err(PlacementError::ShorterThanColumns {
                        subdisk: s.name.clone(),
                        drive: s.drive.clone(),
                        plex: self.plexes[p].plex.name.clone(),
                        length: plex_rules::whole_stripes(length, stripe_size),
                        column_length,
                    });
                }
            }
        }
        let placed: Vec<(u64, u64)> =
            members.iter().map(|&m| (self.subdisks[m].plex_offset(), self.subdisks[m].subdisk.length)).collect();
        let plex_offset = given_plex_offset.unwrap_or_else(|| plex_rules::default_plex_offset(organization, &placed));
        if let Some(&other) = members.iter().find(|&&m| self.subdisks[m].plex_offset() == plex_offset) {
            let s = &self.subdisks[sd].subdisk;
            return Err(PlacementError::PlexOffsetTaken {
                subdisk: s.name.clone(),
                drive: s.drive.clone(),
                plex: self.plexes[p].plex.name.clone(),
                plex_offset,
                other: self.subdisks[other].subdisk.name.clone(),
            });
        }
        let plex = &mut self.plexes[p];
        // A subdisk added to a running striped or raid5 plex makes it growable: `start`
        // restripes the plex onto it.
        self.subdisks[sd].grows = organization.stripe_size().is_some() && !plex.new && plex.plex.state == PlexState::Up;
        self.subdisks[sd].subdisk.membership = Some(PlexMembership { plex: plex.plex.name.clone(), plex_offset });
        plex.gained_members = true;
        self.insert_member(p, sd);
        Ok(())
    }

    /// Insert after the members at lower or equal plex offsets, as the kernel does.
    fn insert_member(&mut self, p: usize, sd: usize) {
        let offset = self.subdisks[sd].plex_offset();
        let subdisks = &self.subdisks;
        let members = &mut self.plexes[p].members;
        let at = members.partition_point(|&m| subdisks[m].plex_offset() <= offset);
        members.insert(at, sd);
    }

    /// Give back the last `amount` bytes of a subdisk (`gv_adjust_freespace`).
    fn trim(&mut self, sd: usize, amount: u64) {
        if amount == 0 {
            return;
        }
        let record = &mut self.subdisks[sd];
        if let Some(&d) = self.drive_index.get(&record.subdisk.drive) {
            self.drives[d].free.release_tail(record.end(), amount);
        }
        record.subdisk.length -= amount;
    }

    fn no_whole_stripe(&self, sd: usize, p: usize, length: u64, stripe_size: u64) -> PlacementError {
        let s = &self.subdisks[sd].subdisk;
        PlacementError::NoWholeStripe {
            subdisk: s.name.clone(),
            drive: s.drive.clone(),
            plex: self.plexes[p].plex.name.clone(),
            length,
            stripe_size,
        }
    }

    /// `gv_setup_objects`: cut striped and raid5 subdisks to whole stripes
    /// (`gv_update_plex_config`), check the plexes can come up, set the states.
    fn finish(mut self) -> Result<Placement, PlacementError> {
        for p in 0..self.plexes.len() {
            let plex = &self.plexes[p];
            if !plex.new && !plex.gained_members {
                continue;
            }
            if let Some(stripe_size) = plex.plex.organization.stripe_size() {
                for m in plex.members.clone() {
                    let length = self.subdisks[m].subdisk.length;
                    let whole = plex_rules::whole_stripes(length, stripe_size);
                    if whole == 0 {
                        return Err(self.no_whole_stripe(m, p, length, stripe_size));
                    }
                    self.trim(m, length - whole);
                }
            }
            let plex = &self.plexes[p];
            let needed = plex.plex.organization.minimum_subdisks();
            if plex.members.len() < needed {
                return Err(PlacementError::TooFewSubdisks {
                    plex: plex.plex.name.clone(),
                    organization: plex.plex.organization,
                    found: plex.members.len(),
                    needed,
                });
            }
        }
        self.set_states();
        let config = self.config_in_kernel_order();
        let problems = blocking(config.problems_on_drives(&self.media_sizes()));
        if !problems.is_empty() {
            return Err(PlacementError::Unsound { problems });
        }
        let (new, present): (Vec<_>, Vec<_>) = self.drives.into_iter().partition(|d| d.new);
        let drives = new
            .into_iter()
            .rev()
            .chain(present)
            .map(|d| PlacedDrive { drive: d.drive, free: d.free.extents().to_vec() })
            .collect();
        Ok(Placement { config, drives })
    }

    /// New subdisks come up (their drives are up); a new plex comes up from its subdisks,
    /// unless it was added to a volume that was there before: then it is down and its
    /// subdisks stale, except that a raid5 plex's subdisks stay up (it is initialised, not
    /// synced). A plex that gained subdisks and the volumes of changed plexes are worked
    /// out again. Present objects otherwise keep their states.
    fn set_states(&mut self) {
        let mut changed_volumes = BTreeSet::new();
        for p in 0..self.plexes.len() {
            let plex = &self.plexes[p];
            if !plex.new && !plex.gained_members {
                continue;
            }
            let raid5 = matches!(plex.plex.organization, PlexOrganization::Raid5 { .. });
            let state = if plex.added {
                let members_state = if raid5 { SubdiskState::Up } else { SubdiskState::Stale };
                for &m in &plex.members {
                    self.subdisks[m].subdisk.state = members_state;
                }
                PlexState::Down
            } else {
                let states: Vec<SubdiskState> = plex.members.iter().map(|&m| self.subdisks[m].subdisk.state).collect();
                let grows = plex.members.iter().any(|&m| self.subdisks[m].grows);
                plex_rules::plex_state(plex.plex.organization, &states, grows)
            };
            self.plexes[p].plex.state = state;
            changed_volumes.extend(self.plexes[p].plex.volume.clone());
        }
        for volume in &mut self.volumes {
            if !volume.new && !changed_volumes.contains(&volume.volume.name) {
                continue;
            }
            let plexes: Vec<(PlexOrganization, PlexState)> = self
                .plexes
                .iter()
                .filter(|p| p.plex.volume.as_deref() == Some(volume.volume.name.as_str()))
                .map(|p| (p.plex.organization, p.plex.state))
                .collect();
            volume.volume.state = plex_rules::volume_state(&plexes);
        }
    }

    fn config_in_kernel_order(&self) -> VinumConfig {
        fn ordered<R, T: Clone>(records: &[R], new: impl Fn(&R) -> bool, object: impl Fn(&R) -> &T) -> Vec<T> {
            let fresh = records.iter().filter(|r| new(r)).rev();
            let present = records.iter().filter(|r| !new(r));
            fresh.chain(present).map(|r| object(r).clone()).collect()
        }
        VinumConfig {
            volumes: ordered(&self.volumes, |r| r.new, |r| &r.volume),
            plexes: ordered(&self.plexes, |r| r.new, |r| &r.plex),
            subdisks: ordered(&self.subdisks, |r| r.new, |r| &r.subdisk),
        }
    }
}
