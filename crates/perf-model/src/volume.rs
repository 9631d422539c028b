//! A gvinum volume on simulated drives: the engine geometry `uraid_vinum::VolumeLayout` makes of
//! it, where each of its subdisks lives (which drive, at which drive offset), and how requests
//! are cut before they reach the engine.
//!
//! What it owns:
//!
//! - **Placement.** A volume is created from a `gvinum create` description laid out by
//!   `uraid_vinum_format::place`, as the kernel lays it out, on drives of the profile's size.
//!   Each drive of the description is one simulated disk; several subdisks may live on one
//!   drive (seed 004's "both plexes on the same disks"), and then they share that disk's queue,
//!   head and bus, as they did on Vinum's drives. Member I/Os are addressed from each
//!   subdisk's start; [`DriveVolume::place`] adds the subdisk's drive offset.
//! - **Request structure** ([`RequestStructure`]). uraid hands a volume request to the engine
//!   whole, and the engine merges the pieces that fall on one subdisk. Vinum does not: its
//!   plex code (`gv_plex_start` in FreeBSD's `geom_vinum_plex.c`) walks a request and cuts it
//!   at every stripe-unit boundary (`gv_plex_offset` for striped plexes, `gv_raid5_offset`
//!   for raid5 ones: each piece ends where its stripe unit ends) and issues every piece as a
//!   request of its own to its subdisk's drive; a raid5 write piece is read-modify-written on
//!   its own (`gv_raid5_request`). [`RequestStructure::Vinum`] models that by giving the
//!   engine one request per piece, the pieces being the engine geometry's own runs (each
//!   inside one stripe unit of one subdisk), all issued at once; the volume request finishes
//!   with its last piece. The seed's 32.5 kB example comes out at its 9 transfers that way,
//!   against the engine's 5.
//!
//! What the Vinum structure leaves out, so that the modelled Vinum is if anything faster than
//! Vinum was: gvinum writes a raid5 piece's new data and, only once that is done, its parity
//! (`gv_normal_parity`), where the engine writes both at once. Mirrored volumes are not cut:
//! Vinum chooses the plex once per volume request (`gv_volume_start`, round-robin), and cutting
//! before the engine would let the pieces of one request go to different plexes. For requests
//! of at most 32 KiB on four-subdisk plexes the two structures give the same member I/Os from
//! 11 KiB stripes up (a request must span more than a whole row to touch one subdisk twice).

use std::collections::BTreeMap;

use thiserror::Error;
use uraid_engine::Geometry;
use uraid_vinum::{VolumeLayout, VolumeLayoutError};
use uraid_vinum_format::{parse_create_description, place, CreateDescriptionError, PlacementError, Present};

/// How a volume request is cut before it reaches the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestStructure {
    /// uraid's: the whole request to the engine, which issues one member I/O per subdisk touched
    /// where the pieces on it are contiguous.
    Engine,
    /// Vinum's: one request per stripe-unit piece (see the module documentation).
    Vinum,
}

impl RequestStructure {
    /// The name used in figures and chart legends.
    pub fn name(&self) -> &'static str {
        match self {
            RequestStructure::Engine => "uraid",
            RequestStructure::Vinum => "Vinum",
        }
    }
}

/// Where one engine slot (one subdisk) lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotPlace {
    /// The subdisk's index in the description's subdisk lines.
    pub subdisk: usize,
    /// The simulated disk: the drive's index in the description's drive order.
    pub disk: usize,
    /// The subdisk's offset on that drive, in bytes.
    pub drive_offset: u64,
}

/// Why a volume could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VolumeError {
    #[error("create description: {0}")]
    Description(#[from] CreateDescriptionError),
    #[error("placement: {0}")]
    Placement(#[from] PlacementError),
    #[error("layout: {0}")]
    Layout(#[from] VolumeLayoutError),
    #[error("the description has no drive lines")]
    NoDrives,
    #[error("subdisk {subdisk:?} on drive {drive:?} is not one the description creates")]
    UnknownDrive { subdisk: String, drive: String },
}

/// A gvinum volume placed on simulated drives.
#[derive(Debug, Clone)]
pub struct DriveVolume {
    geometry: Geometry,
    slots: Vec<SlotPlace>,
    drives: usize,
    structure: RequestStructure,
}

impl DriveVolume {
    /// Volume `volume` of a `gvinum create` description whose `drive` lines each make a drive
    /// on a device of `media_bytes`, laid out as the kernel lays it out.
    pub fn create(description: &str, volume: &str, media_bytes: u64) -> Result<DriveVolume, VolumeError> {
        let description = parse_create_description(description)?;
        if description.drives.is_empty() {
            return Err(VolumeError::NoDrives);
        }
        let sizes: BTreeMap<String, u64> =
            description.drives.iter().filter_map(|d| d.device.clone()).map(|device| (device, media_bytes)).collect();
        let placed = place(&description, &Present::default(), &sizes)?;
        let layout = VolumeLayout::new(&placed.config, volume)?;
        let disk_of = |drive: &str| description.drives.iter().position(|d| d.name == drive);
        let line_of = |name: &str| description.subdisks.iter().position(|s| s.name == name);
        let slots = layout
            .slot_subdisks()
            .into_iter()
            .map(|s| match (disk_of(&s.drive), line_of(&s.subdisk)) {
                (Some(disk), Some(subdisk)) => Ok(SlotPlace { subdisk, disk, drive_offset: s.drive_offset }),
                _ => Err(VolumeError::UnknownDrive { subdisk: s.subdisk, drive: s.drive }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DriveVolume {
            geometry: Geometry::custom(layout),
            slots,
            drives: description.drives.len(),
            structure: RequestStructure::Engine,
        })
    }

    /// The same volume with requests cut as `structure` says.
    pub fn with_structure(self, structure: RequestStructure) -> DriveVolume {
        DriveVolume { structure, ..self }
    }

    /// The engine geometry (slots are subdisks, in plex order and then column order).
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Where each slot lives.
    pub fn slots(&self) -> &[SlotPlace] {
        &self.slots
    }

    /// How many drives (simulated disks) the volume's description creates.
    pub fn drives(&self) -> usize {
        self.drives
    }

    pub fn structure(&self) -> RequestStructure {
        self.structure
    }

    /// Bytes the volume holds.
    pub fn bytes(&self) -> u64 {
        self.geometry.array_bytes()
    }

    /// The simulated disk and the byte on it of member offset `offset` of `slot`.
    pub fn place(&self, slot: usize, offset: u64) -> (usize, u64) {
        let s = self.slots[slot];
        (s.disk, s.drive_offset + offset)
    }

    /// The requests `[offset, offset + len)` of the volume becomes before the engine:
    /// `(offset, len)` of each, in order.
    pub fn pieces(&self, offset: u64, len: u64) -> Vec<(u64, u64)> {
        match self.structure {
            RequestStructure::Vinum if !self.geometry.is_mirrored() => {
                self.geometry.runs(offset, len).iter().map(|r| (r.logical, r.len)).collect()
            }
            _ => vec![(offset, len)],
        }
    }

    /// How many subdisks the transfer `[offset, offset + len)` touches for its data (a raid5
    /// plex's parity not counted; on a mirror, those of one plex).
    pub fn data_subdisks_touched(&self, offset: u64, len: u64) -> usize {
        let mut slots: Vec<usize> = self.geometry.runs(offset, len).iter().map(|r| r.copies[0].0).collect();
        slots.sort_unstable();
        slots.dedup();
        slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// Two striped plexes over the same two drives, the second rotated by one drive (seed
    /// 004's "both plexes on the same disks").
    const SHARED: &str = "\
drive a device da0
drive b device da1
volume m
plex org striped 64k
sd length 4m drive a
sd length 4m drive b
plex org striped 64k
sd length 4m drive b
sd length 4m drive a
";

    #[test]
    fn subdisks_sharing_a_drive_are_placed_on_that_drive_one_after_the_other() {
        let v = DriveVolume::create(SHARED, "m", 16 * MIB).unwrap();
        assert_eq!(v.drives(), 2);
        assert_eq!(v.slots().len(), 4);
        // Plex 0's subdisks (lines 0 and 1) come first on each drive, plex 1's after them.
        let first = uraid_vinum_format::drive_layout::DATA_START;
        let mut places: Vec<SlotPlace> = v.slots().to_vec();
        places.sort_by_key(|p| p.subdisk);
        let at = |subdisk, disk, drive_offset| SlotPlace { subdisk, disk, drive_offset };
        assert_eq!(
            places,
            vec![at(0, 0, first), at(1, 1, first), at(2, 1, first + 4 * MIB), at(3, 0, first + 4 * MIB)]
        );
        let last = v.slots().iter().position(|p| p.subdisk == 3).unwrap();
        assert_eq!(v.place(last, 4096), (0, first + 4 * MIB + 4096));
        assert_eq!(v.bytes(), 8 * MIB);
    }

    #[test]
    fn vinum_cuts_a_striped_request_at_every_stripe_unit_and_uraid_does_not() {
        let text = "drive a device da0\ndrive b device da1\nvolume s\nplex org striped 4k\nsd length 1m drive a\nsd length 1m drive b\n";
        let v = DriveVolume::create(text, "s", 4 * MIB).unwrap();
        assert_eq!(v.pieces(2048, 12288), vec![(2048, 12288)]);
        let vinum = v.with_structure(RequestStructure::Vinum);
        assert_eq!(vinum.pieces(2048, 12288), vec![(2048, 2048), (4096, 4096), (8192, 4096), (12288, 2048)]);
        assert_eq!(vinum.data_subdisks_touched(2048, 12288), 2);
        assert_eq!(vinum.data_subdisks_touched(4096, 4096), 1);
    }

    #[test]
    fn mirrored_volumes_are_not_cut() {
        let v = DriveVolume::create(SHARED, "m", 16 * MIB).unwrap().with_structure(RequestStructure::Vinum);
        assert_eq!(v.pieces(0, 256 << 10), vec![(0, 256 << 10)]);
    }

    #[test]
    fn a_description_that_does_not_fit_its_drives_is_refused() {
        let err = DriveVolume::create(SHARED, "m", 6 * MIB).unwrap_err();
        assert!(matches!(err, VolumeError::Placement(_)), "{err}");
        let err = DriveVolume::create(SHARED, "nothing", 16 * MIB).unwrap_err();
        assert!(matches!(err, VolumeError::Layout(_)), "{err}");
    }
}
