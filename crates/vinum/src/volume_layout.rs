//! A gvinum volume as one engine layout: its slots are the subdisks of its plexes, in plex order
//! and, within a plex, in plex-offset order (the plex's columns).
//!
//! - A volume of one plex is that plex: a concatenated or striped plex keeps every byte in one
//!   place ([`Redundancy::None`]), a raid5 plex keeps parity ([`Redundancy::Parity`], gvinum's
//!   left-asymmetric rotation, whole-sector stripes of any size).
//! - A volume of several concatenated or striped plexes keeps a whole copy of the volume in each
//!   ([`Redundancy::Copies`], one copy per plex, in plex order). The engine checks and repairs
//!   copies in rows of member bytes, and every copy of a byte must sit at the same offset within
//!   its row: in 4 KiB rows when every subdisk starts at a whole 4 KiB of its plex and stripes
//!   are whole 4 KiB (gvinum's own `mirror`, `mirror -s`, and `create` with sizes in whole KiB
//!   of 4), in 512-byte rows otherwise (a volume cut at odd sectors: gvinum's offsets and
//!   stripes are always whole sectors).
//! - A volume with a raid5 plex beside other plexes is a mirror whose copies are arrays of their
//!   own ([`NestedLayout`]): each plex is laid out as the volume of that one plex, and the
//!   engine runs the two levels ([`uraid_engine::nested::NestedArray`]). The slots stay the
//!   subdisks in the same order; the layout's answers are the nested layout's.
//!
//! Member offsets count from each subdisk's start; the driver adds the subdisk's drive offset.
//! The volume is as long as its smallest plex (`gv_vol_size`).

use std::fmt;

use thiserror::Error;
use uraid_engine::geometry::{
    Copies, CopyPlacement, Geometry, Layout, MemberExtent, NestedLayout, Redundancy, StripeRoles,
};
use uraid_vinum_format::mapping::{Column, MappingError};
use uraid_vinum_format::{PlexLayout, PlexOrganization, VinumConfig};

/// The row the engine checks and repairs copies in when the plexes line up in it (md's).
const ROW_BYTES: u64 = uraid_engine::geometry::DEFAULT_ROW_BYTES;

/// The row when they line up only in whole sectors.
const SECTOR_ROW_BYTES: u64 = 512;

/// Why a volume cannot be run on the engine.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VolumeLayoutError {
    #[error("no volume named {volume:?} in the configuration")]
    UnknownVolume { volume: String },
    #[error("volume {volume:?} has no plexes")]
    NoPlexes { volume: String },
    #[error("volume {volume:?}: {source}")]
    Plex { volume: String, source: MappingError },
    #[error("volume {volume:?} is empty: plex {plex:?} holds no bytes")]
    Empty { volume: String, plex: String },
}

/// One slot of a volume: a subdisk, where it lives and how much of it the volume uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotSubdisk {
    /// The subdisk's name.
    pub subdisk: String,
    /// The plex it belongs to.
    pub plex: String,
    /// The drive it lives on.
    pub drive: String,
    /// Where it starts on its drive, in bytes.
    pub drive_offset: u64,
    /// Bytes of it the plex uses (striped and raid5 plexes use whole stripes).
    pub used_bytes: u64,
}

/// A gvinum volume as an engine layout.
#[derive(Debug, Clone)]
pub struct VolumeLayout {
    /// The layout's kind, as status reports give it ("vinum-raid5", "vinum-mirror").
    name: String,
    plexes: Vec<PlexLayout>,
    /// Per slot: its plex and its column in that plex.
    slots: Vec<(usize, usize)>,
    /// Per plex: its first slot.
    first_slot: Vec<usize>,
    /// Per plex: bytes each column uses (striped and raid5: whole stripes; concat: unused).
    column_bytes: Vec<u64>,
    size: u64,
    /// The row copies are checked and repaired in (see [`Layout::row_bytes`]).
    row_bytes: u64,
    /// For a raid5 plex mirrored with others: the two levels the engine runs, which answer
    /// every layout question.
    nested: Option<NestedLayout>,
}

impl VolumeLayout {
    /// The layout of `volume` in `config`.
    pub fn new(config: &VinumConfig, volume: &str) -> Result<VolumeLayout, VolumeLayoutError> {
        if config.volume(volume).is_none() {
            return Err(VolumeLayoutError::UnknownVolume { volume: volume.to_string() });
        }
        let plexes = config
            .plexes_of(volume)
            .iter()
            .map(|p| {
                PlexLayout::from_config(config, &p.name)
                    .map_err(|source| VolumeLayoutError::Plex { volume: volume.to_string(), source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if plexes.is_empty() {
            return Err(VolumeLayoutError::NoPlexes { volume: volume.to_string() });
        }
        if let Some(p) = plexes.iter().find(|p| p.size() == 0) {
            return Err(VolumeLayoutError::Empty { volume: volume.to_string(), plex: plex_name(p) });
        }
        Ok(VolumeLayout::of_plexes(plexes))
    }

    /// The layout of a volume of `plexes` (at least one, none empty).
    fn of_plexes(plexes: Vec<PlexLayout>) -> VolumeLayout {
        let row_bytes =
            if plexes.len() > 1 && !plexes.iter().all(lines_up_in_rows) { SECTOR_ROW_BYTES } else { ROW_BYTES };
        let mut slots = Vec::new();
        let mut first_slot = Vec::new();
        let mut column_bytes = Vec::new();
        for (p, plex) in plexes.iter().enumerate() {
            first_slot.push(slots.len());
            slots.extend((0..plex.columns().len()).map(|c| (p, c)));
            let n = plex.columns().len() as u64;
            column_bytes.push(match plex.organization() {
                PlexOrganization::Concat => 0,
                PlexOrganization::Striped { .. } => plex.size() / n,
                PlexOrganization::Raid5 { .. } => plex.size() / (n - 1),
            });
        }
        let size = plexes.iter().map(PlexLayout::size).min().expect("a plex");
        let name = match plexes.as_slice() {
            [one] => format!("vinum-{}", one.organization().name()),
            _ => "vinum-mirror".to_string(),
        };
        // A raid5 plex cannot be written as a copy: each plex becomes an array of its own.
        let nested = (plexes.len() > 1 && plexes.iter().any(is_raid5)).then(|| {
            let each = plexes.iter().map(|p| Geometry::custom(VolumeLayout::of_plexes(vec![p.clone()])));
            NestedLayout::new(name.clone(), each.collect())
        });
        VolumeLayout { name, plexes, slots, first_slot, column_bytes, size, row_bytes, nested }
    }

    /// The layout as the engine takes it.
    pub fn geometry(config: &VinumConfig, volume: &str) -> Result<Geometry, VolumeLayoutError> {
        Ok(Geometry::custom(VolumeLayout::new(config, volume)?))
    }

    /// What the volume is made of, for messages: "raid5 plex", "2 plexes: concat, striped".
    pub fn summary(&self) -> String {
        let orgs: Vec<&str> = self.plexes.iter().map(|p| p.organization().name()).collect();
        match orgs.as_slice() {
            [one] => format!("{one} plex"),
            many => format!("{} plexes: {}", many.len(), many.join(", ")),
        }
    }

    /// Each slot's subdisk, in slot order.
    pub fn slot_subdisks(&self) -> Vec<SlotSubdisk> {
        self.slots
            .iter()
            .map(|&(p, c)| {
                let plex = &self.plexes[p];
                let column = &plex.columns()[c];
                SlotSubdisk {
                    subdisk: column.subdisk.clone(),
                    plex: plex_name(plex),
                    drive: column.drive.clone(),
                    drive_offset: column.drive_offset,
                    used_bytes: self.used_bytes(p, column),
                }
            })
            .collect()
    }

    /// The slots of each plex, in plex order.
    pub fn plex_slots(&self) -> Vec<std::ops::Range<usize>> {
        (0..self.plexes.len())
            .map(|p| self.first_slot[p]..self.first_slot[p] + self.plexes[p].columns().len())
            .collect()
    }

    fn used_bytes(&self, plex: usize, column: &Column) -> u64 {
        match self.plexes[plex].organization() {
            PlexOrganization::Concat => column.length,
            _ => self.column_bytes[plex],
        }
    }

    fn single(&self) -> Option<&PlexLayout> {
        match self.plexes.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }
}

fn plex_name(plex: &PlexLayout) -> String {
    plex.name().to_string()
}

fn is_raid5(plex: &PlexLayout) -> bool {
    matches!(plex.organization(), PlexOrganization::Raid5 { .. })
}

/// Whether a plex keeps every byte at the same offset within its 4 KiB row as its volume
/// offset: subdisks start at whole 4 KiB of the plex, stripes are whole 4 KiB.
fn lines_up_in_rows(plex: &PlexLayout) -> bool {
    match plex.organization() {
        PlexOrganization::Striped { stripe_size } => stripe_size.is_multiple_of(ROW_BYTES),
        PlexOrganization::Concat => plex.columns().iter().all(|c| c.plex_offset.is_multiple_of(ROW_BYTES)),
        PlexOrganization::Raid5 { .. } => true,
    }
}

impl fmt::Display for VolumeLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl Layout for VolumeLayout {
    fn name(&self) -> &str {
        &self.name
    }

    fn raid_disks(&self) -> usize {
        self.slots.len()
    }

    fn array_bytes(&self) -> u64 {
        self.size
    }

    fn member_data_bytes(&self) -> u64 {
        if let Some(nested) = &self.nested {
            return nested.member_data_bytes();
        }
        self.slots.iter().map(|&(p, c)| self.used_bytes(p, &self.plexes[p].columns()[c])).max().unwrap_or(0)
    }

    fn chunk_bytes(&self) -> u64 {
        self.single().and_then(|p| p.organization().stripe_size()).unwrap_or(0)
    }

    fn redundancy(&self) -> Redundancy {
        match self.single() {
            Some(p) => match p.organization() {
                PlexOrganization::Raid5 { .. } => Redundancy::Parity { data_disks: p.columns().len() - 1 },
                PlexOrganization::Concat | PlexOrganization::Striped { .. } => Redundancy::None,
            },
            None => Redundancy::Copies,
        }
    }

    fn max_degraded(&self) -> usize {
        if let Some(nested) = &self.nested {
            return nested.max_degraded();
        }
        match self.redundancy() {
            Redundancy::None => 0,
            Redundancy::Parity { .. } => 1,
            // Best case: every subdisk but those of the plex with the fewest.
            Redundancy::Copies => self.slots.len() - self.plexes.iter().map(|p| p.columns().len()).min().unwrap_or(0),
        }
    }

    fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        if let Some(nested) = &self.nested {
            return nested.is_readable(alive);
        }
        let plex_alive = |p: usize| (0..self.plexes[p].columns().len()).all(|c| alive(self.first_slot[p] + c));
        match self.redundancy() {
            Redundancy::None => plex_alive(0),
            Redundancy::Parity { .. } => (0..self.slots.len()).filter(|&s| !alive(s)).count() <= 1,
            // A whole plex up answers every byte; otherwise walk the runs (a handful per plex).
            Redundancy::Copies => {
                if (0..self.plexes.len()).any(plex_alive) {
                    return true;
                }
                let mut pos = 0;
                let mut copies = Copies::new();
                while pos < self.size {
                    copies.clear();
                    let run = self.map(pos, &mut copies);
                    if !copies.iter().any(|&(slot, _)| alive(slot)) {
                        return false;
                    }
                    pos += run;
                }
                true
            }
        }
    }

    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        if let Some(nested) = &self.nested {
            return nested.map(offset, copies);
        }
        let mut run = self.size - offset;
        for (p, plex) in self.plexes.iter().enumerate() {
            let at = plex.locate(offset).expect("an offset inside every plex of the volume");
            copies.push((self.first_slot[p] + at.column, at.offset));
            run = run.min(at.run);
        }
        run
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        if let Some(nested) = &self.nested {
            return nested.member_extent(slot, offset);
        }
        let (p, c) = self.slots[slot];
        let plex = &self.plexes[p];
        let column = &plex.columns()[c];
        let used = self.used_bytes(p, column);
        if offset >= used {
            return MemberExtent { logical: None, len: u64::MAX - offset };
        }
        let (logical, len) = match plex.organization() {
            PlexOrganization::Concat => (Some(column.plex_offset + offset), used - offset),
            PlexOrganization::Striped { stripe_size } => {
                let n = plex.columns().len() as u64;
                let (row, within) = (offset / stripe_size, offset % stripe_size);
                (Some((row * n + c as u64) * stripe_size + within), stripe_size - within)
            }
            PlexOrganization::Raid5 { stripe_size } => {
                let n = plex.columns().len() as u64;
                let (row, within) = (offset / stripe_size, offset % stripe_size);
                let parity = plex.parity_column(row).expect("a raid5 plex");
                // Data units fill the row's columns in order, skipping the parity column.
                let logical = (c != parity).then(|| {
                    let unit = if c > parity { c - 1 } else { c } as u64;
                    (row * (n - 1) + unit) * stripe_size + within
                });
                (logical, stripe_size - within)
            }
        };
        match logical {
            // Bytes past the volume's end (a plex longer than the smallest) hold no volume data.
            Some(l) if l >= self.size => MemberExtent { logical: None, len },
            Some(l) => MemberExtent { logical: Some(l), len: len.min(self.size - l) },
            None => MemberExtent { logical: None, len },
        }
    }

    fn stripe_roles(&self, stripe: u64) -> StripeRoles {
        let plex = self.single().expect("a raid5 volume has one plex");
        let p = plex.parity_column(stripe).expect("a raid5 plex");
        let n = plex.columns().len();
        StripeRoles {
            p,
            q: None,
            data: (0..n).filter(|&c| c != p).collect(),
            syndrome_slot: (0..n).map(|_| None).collect(),
            syndrome_disks: 0,
        }
    }

    fn row_bytes(&self) -> u64 {
        match &self.nested {
            Some(nested) => nested.row_bytes(),
            None => self.row_bytes,
        }
    }

    fn copy_placement(&self) -> CopyPlacement {
        CopyPlacement::Images { same_slots: false }
    }

    fn nested(&self) -> Option<&NestedLayout> {
        self.nested.as_ref()
    }
}

#[cfg(test)]
mod tests;
