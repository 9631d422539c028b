//! Layouts defined outside the engine: FreeBSD gvinum's plexes, mapped by `uraid_vinum_format` (the
//! kernel's `gv_plex_offset` and `gv_raid5_offset`), and handed to the engine as a format crate
//! would hand them, through `Geometry::custom`. The engine's source names none of them.
//!
//! - [`VinumRaid5Plex`]: a raid5 plex, one slot per subdisk;
//! - [`VinumConcatPlex`]: a concatenated plex of subdisks of any lengths, one slot per subdisk;
//! - [`VinumMirroredVolume`]: a volume of several concatenated plexes, each a whole copy of the
//!   volume, one slot per drive; its subdisks sit anywhere on the drives.

use uraid_engine::geometry::{Copies, CopyPlacement, Geometry, Layout, MemberExtent, Redundancy, StripeRoles};
use uraid_vinum_format::drive_layout::DATA_START;
use uraid_vinum_format::mapping::Column;
use uraid_vinum_format::{parse_config, PlexLayout, PlexOrganization, SubdiskState, VinumConfig};

/// The configuration in `text` (gvinum's configuration text).
pub fn config(text: &str) -> VinumConfig {
    parse_config(text).expect("a valid gvinum configuration")
}

/// Whether a subdisk holds its plex's data now (up), rather than being stale or down.
pub fn subdisk_is_up(config: &VinumConfig, plex: &str, column: usize) -> bool {
    config.subdisks_of(plex)[column].state == SubdiskState::Up
}

/// A gvinum raid5 plex. Slot `c` is the plex's column (subdisk) `c` in plex-offset order; member
/// offsets count from the subdisk's start (its drive offset is the driver's business, as a
/// member's data offset is for md).
#[derive(Debug)]
pub struct VinumRaid5Plex {
    plex: PlexLayout,
    stripe: u64,
}

impl VinumRaid5Plex {
    pub fn new(config: &VinumConfig, plex: &str) -> VinumRaid5Plex {
        let plex = PlexLayout::from_config(config, plex).expect("a mappable plex");
        let PlexOrganization::Raid5 { stripe_size } = plex.organization() else {
            panic!("{:?} is not a raid5 plex", plex.organization())
        };
        VinumRaid5Plex { plex, stripe: stripe_size }
    }

    pub fn geometry(config: &VinumConfig, plex: &str) -> Geometry {
        Geometry::custom(VinumRaid5Plex::new(config, plex))
    }

    fn columns(&self) -> usize {
        self.plex.columns().len()
    }
}

impl Layout for VinumRaid5Plex {
    fn name(&self) -> &str {
        "vinum raid5 plex"
    }

    fn raid_disks(&self) -> usize {
        self.columns()
    }

    fn array_bytes(&self) -> u64 {
        self.plex.size()
    }

    fn member_data_bytes(&self) -> u64 {
        self.plex.size() / (self.columns() as u64 - 1)
    }

    fn chunk_bytes(&self) -> u64 {
        self.stripe
    }

    fn redundancy(&self) -> Redundancy {
        Redundancy::Parity { data_disks: self.columns() - 1 }
    }

    fn max_degraded(&self) -> usize {
        1
    }

    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        let at = self.plex.locate(offset).expect("an offset inside the plex");
        copies.push((at.column, at.offset));
        at.run.min(self.plex.size() - offset)
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        if offset >= self.member_data_bytes() {
            return MemberExtent { logical: None, len: u64::MAX - offset };
        }
        let row = offset / self.stripe;
        let within = offset % self.stripe;
        let parity = self.plex.parity_column(row).expect("a raid5 plex");
        // Data units fill the row's columns in order, skipping the parity column.
        let logical = (slot != parity).then(|| {
            let unit = if slot > parity { slot - 1 } else { slot };
            (row * (self.columns() as u64 - 1) + unit as u64) * self.stripe + within
        });
        MemberExtent { logical, len: self.stripe - within }
    }

    fn stripe_roles(&self, stripe: u64) -> StripeRoles {
        let p = self.plex.parity_column(stripe).expect("a raid5 plex");
        let n = self.columns();
        StripeRoles {
            p,
            q: None,
            data: (0..n).filter(|&c| c != p).collect(),
            syndrome_slot: (0..n).map(|_| None).collect(),
            syndrome_disks: 0,
        }
    }
}

/// A gvinum concatenated plex: its subdisks one after the other, of whatever lengths. Slot `c`
/// is column `c`, member offsets from the subdisk's start.
#[derive(Debug)]
pub struct VinumConcatPlex {
    plex: PlexLayout,
}

impl VinumConcatPlex {
    pub fn new(config: &VinumConfig, plex: &str) -> VinumConcatPlex {
        let plex = PlexLayout::from_config(config, plex).expect("a mappable plex");
        assert_eq!(plex.organization(), PlexOrganization::Concat);
        VinumConcatPlex { plex }
    }

    pub fn geometry(config: &VinumConfig, plex: &str) -> Geometry {
        Geometry::custom(VinumConcatPlex::new(config, plex))
    }
}

impl Layout for VinumConcatPlex {
    fn name(&self) -> &str {
        "vinum concat plex"
    }

    fn raid_disks(&self) -> usize {
        self.plex.columns().len()
    }

    fn array_bytes(&self) -> u64 {
        self.plex.size()
    }

    fn member_data_bytes(&self) -> u64 {
        self.plex.columns().iter().map(|c| c.length).max().unwrap_or(0)
    }

    fn chunk_bytes(&self) -> u64 {
        0
    }

    fn redundancy(&self) -> Redundancy {
        Redundancy::None
    }

    fn max_degraded(&self) -> usize {
        0
    }

    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        let at = self.plex.locate(offset).expect("an offset inside the plex");
        copies.push((at.column, at.offset));
        at.run
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        let column = &self.plex.columns()[slot];
        if offset < column.length {
            MemberExtent { logical: Some(column.plex_offset + offset), len: column.length - offset }
        } else {
            MemberExtent { logical: None, len: u64::MAX - offset }
        }
    }
}

/// A gvinum volume of concatenated plexes, each holding the whole volume: copies, as md's
/// raid1 keeps them, but each copy is spread over the subdisks of its plex, which may cut it
/// at different places and sit anywhere on their drives. Slot `d` is drive `d` (by name);
/// member offsets count from the drive's data start (`DATA_START`, where gvinum's first
/// subdisk goes).
///
/// The engine checks and corrects copies in 4 KiB rows, so every copy of a byte must sit at
/// the same offset within a row: subdisk lengths and drive offsets are whole 4 KiB here.
#[derive(Debug)]
pub struct VinumMirroredVolume {
    /// Each plex's layout, and the slot (drive) of each of its columns.
    plexes: Vec<(PlexLayout, Vec<usize>)>,
    drives: usize,
}

impl VinumMirroredVolume {
    pub fn new(config: &VinumConfig, volume: &str) -> VinumMirroredVolume {
        let drive_names = config.drive_names();
        let plexes: Vec<(PlexLayout, Vec<usize>)> = config
            .plexes_of(volume)
            .into_iter()
            .map(|p| {
                let plex = PlexLayout::from_config(config, &p.name).expect("a mappable plex");
                assert_eq!(plex.organization(), PlexOrganization::Concat);
                let slots = plex
                    .columns()
                    .iter()
                    .map(|c| drive_names.iter().position(|d| *d == c.drive).expect("a known drive"))
                    .collect();
                (plex, slots)
            })
            .collect();
        assert!(plexes.len() >= 2, "a mirrored volume has plexes to mirror");
        let size = plexes[0].0.size();
        assert!(plexes.iter().all(|(p, _)| p.size() == size), "plexes of one size");
        for (plex, _) in &plexes {
            for c in plex.columns() {
                assert!(
                    c.length.is_multiple_of(4096) && (c.drive_offset - DATA_START).is_multiple_of(4096),
                    "{c:?}: whole rows"
                );
            }
        }
        VinumMirroredVolume { plexes, drives: drive_names.len() }
    }

    pub fn geometry(config: &VinumConfig, volume: &str) -> Geometry {
        Geometry::custom(VinumMirroredVolume::new(config, volume))
    }

    /// Every subdisk with its slot and plex offset.
    fn subdisks(&self) -> impl Iterator<Item = (usize, &Column)> {
        self.plexes.iter().flat_map(|(plex, slots)| slots.iter().copied().zip(plex.columns()))
    }
}

impl Layout for VinumMirroredVolume {
    fn name(&self) -> &str {
        "vinum volume of concat plexes"
    }

    fn raid_disks(&self) -> usize {
        self.drives
    }

    fn array_bytes(&self) -> u64 {
        self.plexes[0].0.size()
    }

    fn member_data_bytes(&self) -> u64 {
        self.subdisks().map(|(_, c)| c.drive_offset - DATA_START + c.length).max().unwrap_or(0)
    }

    fn chunk_bytes(&self) -> u64 {
        0
    }

    fn redundancy(&self) -> Redundancy {
        Redundancy::Copies
    }

    fn max_degraded(&self) -> usize {
        // Best case: every drive but those of the plex on the fewest drives.
        let fewest = self
            .plexes
            .iter()
            .map(|(_, slots)| {
                let mut drives = slots.clone();
                drives.sort_unstable();
                drives.dedup();
                drives.len()
            })
            .min()
            .unwrap_or(self.drives);
        self.drives - fewest
    }

    // `is_readable` is the trait's: it walks the volume's runs, a handful here.

    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        let mut run = u64::MAX;
        for (plex, slots) in &self.plexes {
            let at = plex.locate(offset).expect("an offset inside the plex");
            let column = &plex.columns()[at.column];
            copies.push((slots[at.column], column.drive_offset - DATA_START + at.offset));
            run = run.min(at.run);
        }
        run
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        let byte = DATA_START + offset;
        let on_drive = || self.subdisks().filter(move |(s, _)| *s == slot).map(|(_, c)| c);
        if let Some(c) = on_drive().find(|c| c.drive_offset <= byte && byte < c.drive_offset + c.length) {
            let within = byte - c.drive_offset;
            return MemberExtent { logical: Some(c.plex_offset + within), len: c.length - within };
        }
        // Nothing here: up to the next subdisk on the drive.
        let next = on_drive().map(|c| c.drive_offset).filter(|&start| start > byte).min();
        MemberExtent { logical: None, len: next.map_or(u64::MAX - offset, |start| start - byte) }
    }

    fn copy_placement(&self) -> CopyPlacement {
        CopyPlacement::Images { same_slots: false }
    }
}

/// A raid5 plex of four 192 KiB subdisks with 4 KiB stripes: md's raid5-4-la, as gvinum lays
/// it out.
pub const RAID5_PLEX: &str = "\
volume v5 state up
plex name v5.p0 org raid5 8s vol v5 state up
sd name v5.p0.s0 drive d0 len 384s driveoffset 265s plex v5.p0 plexoffset 0s state up
sd name v5.p0.s1 drive d1 len 384s driveoffset 265s plex v5.p0 plexoffset 8s state up
sd name v5.p0.s2 drive d2 len 384s driveoffset 265s plex v5.p0 plexoffset 16s state up
sd name v5.p0.s3 drive d3 len 384s driveoffset 265s plex v5.p0 plexoffset 24s state up
";

/// A concatenated plex of three subdisks of unequal lengths (whole 4 KiB, so that a 4 KiB
/// request, as the allocation tests make, never spans two of them).
pub const CONCAT_PLEX: &str = "\
volume vc state up
plex name vc.p0 org concat vol vc state up
sd name vc.p0.s0 drive d0 len 384s driveoffset 265s plex vc.p0 plexoffset 0s state up
sd name vc.p0.s1 drive d1 len 200s driveoffset 265s plex vc.p0 plexoffset 384s state up
sd name vc.p0.s2 drive d2 len 296s driveoffset 265s plex vc.p0 plexoffset 584s state up
";

/// A volume of two concatenated plexes over four drives, cut at different places: p0 is d0
/// then d1 (which starts 16 KiB into its drive), p1 is d2, d3, then d2 again right after its
/// first subdisk, so drive d2 holds two pieces of p1 that are far apart in the volume.
pub const MIRRORED_VOLUME: &str = "\
volume vm state up
plex name vm.p0 org concat vol vm state up
sd name vm.p0.s0 drive d0 len 256s driveoffset 265s plex vm.p0 plexoffset 0s state up
sd name vm.p0.s1 drive d1 len 320s driveoffset 297s plex vm.p0 plexoffset 256s state up
plex name vm.p1 org concat vol vm state up
sd name vm.p1.s0 drive d2 len 128s driveoffset 265s plex vm.p1 plexoffset 0s state up
sd name vm.p1.s1 drive d3 len 384s driveoffset 265s plex vm.p1 plexoffset 128s state up
sd name vm.p1.s2 drive d2 len 64s driveoffset 393s plex vm.p1 plexoffset 512s state up
";

/// The gvinum layouts the engine's tests run beside md's levels (members of 192 KiB).
pub fn geometries() -> Vec<(String, Geometry)> {
    vec![
        ("vinum-raid5-4".into(), VinumRaid5Plex::geometry(&config(RAID5_PLEX), "v5.p0")),
        ("vinum-concat-3".into(), VinumConcatPlex::geometry(&config(CONCAT_PLEX), "vc.p0")),
        ("vinum-mirror-4".into(), VinumMirroredVolume::geometry(&config(MIRRORED_VOLUME), "vm")),
    ]
}
