//! md's levels as [`Layout`]s: the layout crate's sector maps (the kernel's own arithmetic)
//! turned into the engine's byte answers. Nothing here places a sector; it only converts units
//! and says which family each level is.

use uraid_layout::{Extent, LinearLayout, ParityLayout, Raid0Layout, Raid10Layout, Raid1Layout, StripeRoles};

use super::layout::{CopyPlacement, Layout, MemberExtent, Redundancy};
use super::{Copies, ParityRun, SECTOR_BYTES};

/// Pushes `extent`, which holds logical byte `offset`, onto `copies`; returns its bytes from
/// `offset` on.
#[inline]
fn push_extent(copies: &mut Copies, extent: Extent, offset: u64) -> u64 {
    let within = offset % SECTOR_BYTES;
    copies.push((extent.member, extent.sector * SECTOR_BYTES + within));
    extent.sectors * SECTOR_BYTES - within
}

/// What member byte `offset` holds, given the array sector at its sector (`logical`) and the
/// bytes from `offset` to the next boundary the logical data may jump at.
fn extent(logical: Option<u64>, offset: u64, piece: u64) -> MemberExtent {
    let within = offset % SECTOR_BYTES;
    MemberExtent { logical: logical.map(|l| l * SECTOR_BYTES + within), len: piece.max(1) }
}

/// Bytes from `offset` to the end of its chunk.
fn chunk_rest(chunk_sectors: u32, offset: u64) -> u64 {
    let chunk = u64::from(chunk_sectors) * SECTOR_BYTES;
    chunk - offset % chunk
}

/// Bytes from `offset` to `end`, or to any length past it (nothing there holds data).
fn rest_of(end: u64, offset: u64) -> u64 {
    if offset < end {
        end - offset
    } else {
        u64::MAX - offset
    }
}

impl Layout for LinearLayout {
    fn name(&self) -> &str {
        "linear"
    }

    #[inline]
    fn raid_disks(&self) -> usize {
        LinearLayout::raid_disks(self)
    }

    #[inline]
    fn array_bytes(&self) -> u64 {
        self.array_sectors() * SECTOR_BYTES
    }

    fn member_data_bytes(&self) -> u64 {
        (0..self.raid_disks()).map(|m| self.member_used_sectors(m)).max().unwrap_or(0) * SECTOR_BYTES
    }

    #[inline]
    fn chunk_bytes(&self) -> u64 {
        u64::from(self.chunk_sectors()) * SECTOR_BYTES
    }

    #[inline]
    fn redundancy(&self) -> Redundancy {
        Redundancy::None
    }

    fn max_degraded(&self) -> usize {
        0
    }

    fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        (0..self.raid_disks()).all(alive)
    }

    #[inline]
    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        push_extent(copies, LinearLayout::map(self, offset / SECTOR_BYTES), offset)
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        // A member's used part is one contiguous piece of the array.
        let used = self.member_used_sectors(slot) * SECTOR_BYTES;
        extent(self.logical(slot, offset / SECTOR_BYTES), offset, rest_of(used, offset))
    }
}

impl Layout for Raid0Layout {
    fn name(&self) -> &str {
        "raid0"
    }

    #[inline]
    fn raid_disks(&self) -> usize {
        Raid0Layout::raid_disks(self)
    }

    #[inline]
    fn array_bytes(&self) -> u64 {
        self.array_sectors() * SECTOR_BYTES
    }

    fn member_data_bytes(&self) -> u64 {
        (0..self.raid_disks()).map(|m| self.member_used_sectors(m)).max().unwrap_or(0) * SECTOR_BYTES
    }

    #[inline]
    fn chunk_bytes(&self) -> u64 {
        u64::from(self.chunk_sectors()) * SECTOR_BYTES
    }

    #[inline]
    fn redundancy(&self) -> Redundancy {
        Redundancy::None
    }

    fn max_degraded(&self) -> usize {
        0
    }

    fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        (0..self.raid_disks()).all(alive)
    }

    #[inline]
    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        push_extent(copies, Raid0Layout::map(self, offset / SECTOR_BYTES), offset)
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        let logical = self.logical(slot, offset / SECTOR_BYTES);
        extent(logical, offset, chunk_rest(self.chunk_sectors(), offset))
    }
}

impl Layout for Raid1Layout {
    fn name(&self) -> &str {
        "raid1"
    }

    #[inline]
    fn raid_disks(&self) -> usize {
        Raid1Layout::raid_disks(self)
    }

    #[inline]
    fn array_bytes(&self) -> u64 {
        self.array_sectors() * SECTOR_BYTES
    }

    fn member_data_bytes(&self) -> u64 {
        self.array_sectors() * SECTOR_BYTES
    }

    #[inline]
    fn chunk_bytes(&self) -> u64 {
        0
    }

    #[inline]
    fn redundancy(&self) -> Redundancy {
        Redundancy::Copies
    }

    fn max_degraded(&self) -> usize {
        self.raid_disks() - 1
    }

    fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        (0..self.raid_disks()).any(alive)
    }

    #[inline]
    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        let mut len = 0;
        self.map_each(offset / SECTOR_BYTES, |e| len = push_extent(copies, e, offset));
        len
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        // Every member holds the array at its own offsets: one piece to the end.
        let logical = self.logical(slot, offset / SECTOR_BYTES);
        extent(logical, offset, rest_of(self.member_data_bytes(), offset))
    }

    fn copy_placement(&self) -> CopyPlacement {
        CopyPlacement::Images { same_slots: true }
    }
}

impl Layout for Raid10Layout {
    fn name(&self) -> &str {
        "raid10"
    }

    #[inline]
    fn raid_disks(&self) -> usize {
        Raid10Layout::raid_disks(self)
    }

    #[inline]
    fn array_bytes(&self) -> u64 {
        self.array_sectors() * SECTOR_BYTES
    }

    fn member_data_bytes(&self) -> u64 {
        self.dev_sectors() * SECTOR_BYTES
    }

    #[inline]
    fn chunk_bytes(&self) -> u64 {
        u64::from(self.chunk_sectors()) * SECTOR_BYTES
    }

    #[inline]
    fn redundancy(&self) -> Redundancy {
        Redundancy::Copies
    }

    fn max_degraded(&self) -> usize {
        self.raid_disks() - 1
    }

    fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        // The copy pattern repeats with a period of at most raid_disks chunks per band;
        // checking every chunk of the first `raid_disks * copies` covers every distinct
        // placement of a copy set.
        let chunk = u64::from(self.chunk_sectors());
        let total = self.array_sectors() / chunk;
        let probe = total.min((self.raid_disks() as u64) * u64::from(self.format().copies()) * 2);
        (0..probe).all(|c| Raid10Layout::map(self, c * chunk).iter().any(|e| alive(e.member)))
    }

    #[inline]
    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        let mut len = 0;
        self.map_each(offset / SECTOR_BYTES, |e| len = push_extent(copies, e, offset));
        len
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        let logical = self.logical(slot, offset / SECTOR_BYTES);
        extent(logical, offset, chunk_rest(self.chunk_sectors(), offset))
    }

    fn copy_placement(&self) -> CopyPlacement {
        let format = self.format();
        CopyPlacement::Chunks { near: format.near, far: format.far }
    }
}

impl Layout for ParityLayout {
    fn name(&self) -> &str {
        self.level().name()
    }

    #[inline]
    fn raid_disks(&self) -> usize {
        ParityLayout::raid_disks(self)
    }

    #[inline]
    fn array_bytes(&self) -> u64 {
        self.array_sectors() * SECTOR_BYTES
    }

    fn member_data_bytes(&self) -> u64 {
        self.dev_sectors() * SECTOR_BYTES
    }

    #[inline]
    fn chunk_bytes(&self) -> u64 {
        u64::from(self.chunk_sectors()) * SECTOR_BYTES
    }

    #[inline]
    fn redundancy(&self) -> Redundancy {
        Redundancy::Parity { data_disks: self.data_disks() }
    }

    fn max_degraded(&self) -> usize {
        self.raid_disks() - self.data_disks()
    }

    #[inline]
    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        let m = ParityLayout::map(self, offset / SECTOR_BYTES);
        push_extent(copies, Extent { member: m.member, sector: m.sector, sectors: m.sectors }, offset)
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        let logical = self.logical(slot, offset / SECTOR_BYTES);
        extent(logical, offset, chunk_rest(self.chunk_sectors(), offset))
    }

    #[inline]
    fn parity_run(&self, offset: u64) -> ParityRun {
        let m = ParityLayout::map(self, offset / SECTOR_BYTES);
        let chunk = self.chunk_bytes();
        let chunk_offset = (m.sector * SECTOR_BYTES + offset % SECTOR_BYTES) % chunk;
        ParityRun {
            logical: offset,
            len: chunk - chunk_offset,
            stripe: m.stripe,
            data_index: m.data_index,
            slot: m.member,
            chunk_offset,
        }
    }

    fn stripe_roles(&self, stripe: u64) -> StripeRoles {
        self.stripe(stripe)
    }
}
