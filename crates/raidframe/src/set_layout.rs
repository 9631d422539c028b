//! A RAIDframe set as one engine layout: its slots are its columns, member offsets count from
//! each component's data area (after the 64 protected sectors; the driver adds them), and every
//! address goes through RAIDframe's own mapping (`uraid_raidframe_format::mapping`), with the
//! stripe unit (`sectPerSU`) as the chunk.
//!
//! - RAID 0 keeps every byte once ([`Redundancy::None`]).
//! - RAID 1 keeps mirrored pairs of columns, 2k and 2k+1, the copy at the same sector
//!   (`rf_raid1.c`; `rf_ConfigureRAID1` refuses an odd number of columns). Over two columns a
//!   pair is a whole image of the set (md's raid1); over more, consecutive stripe units go to
//!   consecutive pairs, which is md's raid10 with two near copies. Both are
//!   [`Redundancy::Copies`], and the copies of a byte sit at the same member offset, so they
//!   line up in the engine's 4 KiB rows whatever the stripe unit.
//! - RAID 4 keeps parity on the last column, RAID 5 rotates it left-symmetrically from the last
//!   column down (`rf_raid4.c`, `rf_raid5.c`); both are [`Redundancy::Parity`] with the stripe
//!   unit as chunk: data unit `k` of stripe `s` is stripe unit `s·(N−1)+k` of the set.
//!
//! Each component holds `numBlocks / sectPerSU` whole stripe units (the rest is never used),
//! and the set has that many stripes.

use std::fmt;

use thiserror::Error;
use uraid_engine::geometry::{Copies, CopyPlacement, Geometry, Layout, MemberExtent, Redundancy, StripeRoles};
use uraid_raidframe_format::mapping::{self, Level, Location};

/// The sector the engine counts in; RAIDframe sectors must be whole multiples of it.
const ENGINE_SECTOR: u64 = 512;

/// Why a set's geometry cannot run on the engine.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SetLayoutError {
    #[error(
        "components of {bytes}-byte sectors: uraid runs RAIDframe sets on sectors of a whole multiple of 512 bytes"
    )]
    SectorSize { bytes: u64 },
}

/// A RAIDframe set as an engine layout.
#[derive(Debug, Clone)]
pub struct SetLayout {
    /// "raidframe-raid5", as status reports give it.
    name: String,
    geometry: mapping::Geometry,
    /// Bytes per RAIDframe sector (`blockSize`).
    sector_bytes: u64,
}

impl SetLayout {
    /// The layout of a set of `geometry` on components of `sector_bytes`-byte sectors.
    pub fn new(geometry: mapping::Geometry, sector_bytes: u64) -> Result<SetLayout, SetLayoutError> {
        if sector_bytes == 0 || !sector_bytes.is_multiple_of(ENGINE_SECTOR) {
            return Err(SetLayoutError::SectorSize { bytes: sector_bytes });
        }
        let level = match geometry.level {
            Level::Raid0 => "raid0",
            Level::Raid1 => "raid1",
            Level::Raid4 => "raid4",
            Level::Raid5 => "raid5",
        };
        Ok(SetLayout { name: format!("raidframe-{level}"), geometry, sector_bytes })
    }

    /// The layout as the engine takes it.
    pub fn geometry(geometry: mapping::Geometry, sector_bytes: u64) -> Result<Geometry, SetLayoutError> {
        Ok(Geometry::custom(SetLayout::new(geometry, sector_bytes)?))
    }

    /// The set's RAIDframe geometry.
    pub fn raid_geometry(&self) -> &mapping::Geometry {
        &self.geometry
    }

    /// Bytes per sector.
    pub fn sector_bytes(&self) -> u64 {
        self.sector_bytes
    }

    fn su_bytes(&self) -> u64 {
        self.geometry.sect_per_su * self.sector_bytes
    }

    fn columns(&self) -> usize {
        self.geometry.columns as usize
    }

    /// The column of data unit `k` of stripe `stripe` (RAID 4 and 5).
    fn data_column(&self, stripe: u64, k: u64) -> usize {
        let d = self.geometry.data_columns();
        let raid_sector = (stripe * d + k) * self.geometry.sect_per_su;
        self.geometry.map(raid_sector).expect("a stripe of the set").data.column as usize
    }
}

impl fmt::Display for SetLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl Layout for SetLayout {
    fn name(&self) -> &str {
        &self.name
    }

    fn raid_disks(&self) -> usize {
        self.columns()
    }

    fn array_bytes(&self) -> u64 {
        self.geometry.total_sectors() * self.sector_bytes
    }

    fn member_data_bytes(&self) -> u64 {
        self.geometry.stripe_units_per_disk() * self.su_bytes()
    }

    fn chunk_bytes(&self) -> u64 {
        self.su_bytes()
    }

    fn redundancy(&self) -> Redundancy {
        match self.geometry.level {
            Level::Raid0 => Redundancy::None,
            Level::Raid1 => Redundancy::Copies,
            Level::Raid4 | Level::Raid5 => Redundancy::Parity { data_disks: self.geometry.data_columns() as usize },
        }
    }

    fn max_degraded(&self) -> usize {
        match self.geometry.level {
            Level::Raid0 => 0,
            // Best case: one of every pair.
            Level::Raid1 => self.columns() / 2,
            Level::Raid4 | Level::Raid5 => 1,
        }
    }

    fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        let dead = (0..self.columns()).filter(|&c| !alive(c)).count();
        match self.geometry.level {
            Level::Raid0 => dead == 0,
            // Every pair keeps a column (`rf_have_enough_components` asks the same).
            Level::Raid1 => (0..self.columns() / 2).all(|p| alive(2 * p) || alive(2 * p + 1)),
            Level::Raid4 | Level::Raid5 => dead <= 1,
        }
    }

    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        let sector = offset / self.sector_bytes;
        let in_sector = offset % self.sector_bytes;
        let mapped = self.geometry.map(sector).expect("an offset inside the set");
        let member = |at: Location| (at.column as usize, at.sector * self.sector_bytes + in_sector);
        copies.push(member(mapped.data));
        if self.geometry.level == Level::Raid1 {
            copies.push(member(mapped.redundancy.expect("a mirror copy")));
        }
        let left = self.array_bytes() - offset;
        // RAID 0 over one column and RAID 1 over one pair put every stripe unit on the same
        // column(s), one after the other. (Parity levels keep to their chunks: the engine's
        // parity paths work a chunk at a time.)
        let one_unit_per_stripe = self.geometry.data_columns() == 1;
        if one_unit_per_stripe && matches!(self.geometry.level, Level::Raid0 | Level::Raid1) {
            return left;
        }
        let su = self.su_bytes();
        (su - offset % su).min(left)
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        let su = self.su_bytes();
        if offset >= self.member_data_bytes() {
            return MemberExtent { logical: None, len: u64::MAX - offset };
        }
        let len = su - offset % su;
        // A RAID 1 mirror column holds the same bytes as its pair's data column.
        let column = match self.geometry.level {
            Level::Raid1 => slot & !1,
            _ => slot,
        };
        let at = Location { column: column as u32, sector: offset / self.sector_bytes };
        let logical = self.geometry.raid_sector_of(at).map(|r| r * self.sector_bytes + offset % self.sector_bytes);
        MemberExtent { logical, len }
    }

    fn stripe_roles(&self, stripe: u64) -> StripeRoles {
        let p = self.geometry.redundancy_column(stripe).expect("a parity level") as usize;
        let d = self.geometry.data_columns();
        StripeRoles {
            p,
            q: None,
            data: (0..d).map(|k| self.data_column(stripe, k)).collect(),
            syndrome_slot: (0..self.columns()).map(|_| None).collect(),
            syndrome_disks: 0,
        }
    }

    fn copy_placement(&self) -> CopyPlacement {
        match self.columns() {
            2 => CopyPlacement::Images { same_slots: true },
            _ => CopyPlacement::Chunks { near: 2, far: 1 },
        }
    }
}

#[cfg(test)]
mod tests;
