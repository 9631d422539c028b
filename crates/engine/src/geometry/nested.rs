//! `NestedLayout`: a mirror whose copies are arrays of their own (a Vinum volume that mirrors a
//! raid5 plex with other plexes).
//!
//! A copy that keeps parity cannot be written as a run of member bytes: a write to it is a
//! stripe update of its own. So such a mirror is two levels of engine arrays
//! ([`crate::nested::NestedArray`]): an outer mirror whose members are the copies ("plexes"),
//! each addressed at the mirror's own logical offsets, and one inner array per plex over its
//! members. This type describes both levels, and answers the [`Layout`] questions for the whole
//! (its slots are every plex's slots, plex after plex), so that drivers, status reports and the
//! simulator's checks see one layout with one slot per member device.
//!
//! The whole is never run by [`crate::Array`] itself (its member I/O would bypass the plexes'
//! parity); [`Layout::nested`] says so, and [`crate::Engine::new`] builds the two levels.

use uraid_layout::Raid1Layout;

use super::layout::{CopyPlacement, Layout, MemberExtent, Redundancy};
use super::{Copies, Geometry, SECTOR_BYTES};

/// A mirror of arrays: plex `p`'s slots are the whole layout's slots
/// `first_slot(p)..first_slot(p) + plexes[p].raid_disks()`.
#[derive(Debug, Clone)]
pub struct NestedLayout {
    name: String,
    plexes: Vec<Geometry>,
    first_slot: Vec<usize>,
    raid_disks: usize,
    /// The smallest plex: the mirror's size.
    size: u64,
    /// The outer mirror: one slot per plex, each holding the mirror's bytes at their own
    /// offsets.
    outer: Geometry,
}

impl NestedLayout {
    /// A mirror of `plexes` (at least one, each at least a sector), as large as the smallest,
    /// in whole sectors.
    pub fn new(name: impl Into<String>, plexes: Vec<Geometry>) -> NestedLayout {
        assert!(!plexes.is_empty(), "a mirror of no plexes");
        let size = plexes.iter().map(Geometry::array_bytes).min().expect("a plex") / SECTOR_BYTES * SECTOR_BYTES;
        assert!(size > 0, "a plex without a whole sector");
        let mut first_slot = Vec::with_capacity(plexes.len());
        let mut raid_disks = 0;
        for plex in &plexes {
            first_slot.push(raid_disks);
            raid_disks += plex.raid_disks();
        }
        let outer = Geometry::Raid1(Raid1Layout::new(plexes.len(), size / SECTOR_BYTES).expect("at least one plex"));
        NestedLayout { name: name.into(), plexes, first_slot, raid_disks, size, outer }
    }

    /// The plexes' own layouts, in plex order.
    pub fn plexes(&self) -> &[Geometry] {
        &self.plexes
    }

    /// The outer mirror, one slot per plex.
    pub fn outer(&self) -> &Geometry {
        &self.outer
    }

    /// The first slot of plex `plex` in the whole layout.
    pub fn first_slot(&self, plex: usize) -> usize {
        self.first_slot[plex]
    }

    /// The whole layout's slots of plex `plex`.
    pub fn plex_slots(&self, plex: usize) -> std::ops::Range<usize> {
        self.first_slot[plex]..self.first_slot[plex] + self.plexes[plex].raid_disks()
    }

    /// Plex and slot within it of the whole layout's `slot`.
    pub fn plex_of(&self, slot: usize) -> (usize, usize) {
        let plex = self.first_slot.partition_point(|&first| first <= slot) - 1;
        (plex, slot - self.first_slot[plex])
    }

    /// Whether plex `plex` can be read whole when only the whole layout's slots for which
    /// `alive` holds are usable.
    pub fn plex_readable(&self, plex: usize, alive: &dyn Fn(usize) -> bool) -> bool {
        let first = self.first_slot[plex];
        self.plexes[plex].is_readable(&|s| alive(first + s))
    }

    /// The smallest range a discard may cover on every plex: whole stripes of every plex that
    /// keeps parity (their least common multiple), `None` when no plex has stripes.
    pub fn discard_granularity(&self) -> Option<u64> {
        self.plexes.iter().filter_map(Geometry::discard_granularity).reduce(lcm)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    (a / gcd(a, b)).saturating_mul(b)
}

impl Layout for NestedLayout {
    fn name(&self) -> &str {
        &self.name
    }

    fn raid_disks(&self) -> usize {
        self.raid_disks
    }

    fn array_bytes(&self) -> u64 {
        self.size
    }

    /// The mirror's size or the largest plex member, whichever is larger: a recovery walks
    /// member offsets of both levels at once (the outer mirror's members are the plexes, each
    /// as large as the mirror).
    fn member_data_bytes(&self) -> u64 {
        self.plexes.iter().map(Geometry::member_data_bytes).max().unwrap_or(0).max(self.size)
    }

    fn chunk_bytes(&self) -> u64 {
        0
    }

    fn redundancy(&self) -> Redundancy {
        Redundancy::Copies
    }

    fn max_degraded(&self) -> usize {
        // Every plex but one lost, each taking its members with it, and what each remaining
        // plex can lose of its own.
        let keep = (0..self.plexes.len())
            .map(|p| self.plexes[p].raid_disks() - self.plexes[p].max_degraded())
            .min()
            .unwrap_or(0);
        self.raid_disks - keep
    }

    /// Readable while one plex is readable whole: a plex that cannot serve every byte is taken
    /// out as a whole ([`crate::nested::NestedArray`] keeps plexes whole or out).
    fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        (0..self.plexes.len()).any(|p| self.plex_readable(p, alive))
    }

    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        let mut run = self.size - offset;
        for (p, plex) in self.plexes.iter().enumerate() {
            let mut own = Copies::new();
            run = run.min(plex.map(offset, &mut own));
            copies.extend(own.into_iter().map(|(slot, at)| (self.first_slot[p] + slot, at)));
        }
        run
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        let (plex, own) = self.plex_of(slot);
        let extent = self.plexes[plex].member_extent(own, offset);
        match extent.logical {
            Some(logical) if logical >= self.size => MemberExtent { logical: None, len: extent.len },
            Some(logical) => MemberExtent { logical: Some(logical), len: extent.len.min(self.size - logical) },
            None => extent,
        }
    }

    fn copy_placement(&self) -> CopyPlacement {
        CopyPlacement::Images { same_slots: false }
    }

    fn nested(&self) -> Option<&NestedLayout> {
        Some(self)
    }
}
