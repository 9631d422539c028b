//! `Layout`: what a data layout answers for the engine, in bytes, whichever format defined it.
//!
//! md's levels answer it in `md.rs`; another format (Vinum's plexes of subdisks, RAIDframe's
//! levels) implements it for its own layout type and hands that to [`Geometry::custom`]. The
//! engine asks every question through [`Geometry`], never by level, so a new layout needs no
//! change to the engine.
//!
//! A layout belongs to one of three families ([`Redundancy`]), because the engine has one way of
//! doing each thing per family, not per level: runs with copies (written to every copy, read
//! from one, compared by a check, copied by a recovery) or stripes with parity (read-modify-write
//! or reconstruct-write, rebuilt from the other members, parity recomputed by a check).
//!
//! [`Geometry`]: super::Geometry
//! [`Geometry::custom`]: super::Geometry::custom

use std::fmt;

use uraid_layout::StripeRoles;

use super::{Copies, NestedLayout, ParityRun};

/// The row the engine checks, repairs and rebuilds redundancy in unless a layout says otherwise
/// ([`Layout::row_bytes`]): md's stripe pages, 4 KiB.
pub const DEFAULT_ROW_BYTES: u64 = 4096;

/// How a layout keeps its data safe, which decides how the engine writes, rebuilds and checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redundancy {
    /// Every byte in one place and nothing to rebuild it from (md's linear and raid0; Vinum's
    /// concatenated and striped plexes).
    None,
    /// Whole copies of the data on different members (md's raid1 and raid10; a Vinum volume of
    /// several plexes). The engine checks and corrects copies in rows of member bytes
    /// ([`Layout::row_bytes`], 4 KiB unless the layout says), so every copy of a byte must sit
    /// at the same offset within its row, and the copies of a run must go on together over
    /// whole rows (md's do: raid1's copies sit at their logical offsets, raid10's chunks are
    /// whole rows; Vinum plexes cut at odd sectors line up in 512-byte rows).
    Copies,
    /// Stripes of `data_disks` data chunks and their parity (md's raid4/5/6, Vinum's raid5
    /// plexes). The engine relies on the layout keeping this shape, as every one of those does:
    ///
    /// - stripe `s` is member bytes `[s * chunk, (s + 1) * chunk)` on every slot, data and
    ///   parity alike (`chunk` is [`Layout::chunk_bytes`]);
    /// - logical chunk `c` of the array is data chunk `c % data_disks` of stripe
    ///   `c / data_disks`, on slot `roles.data[c % data_disks]` of [`Layout::stripe_roles`];
    /// - P is on `roles.p` and, with two parity chunks, Q on `roles.q`, computed over the
    ///   syndrome slots `roles` gives.
    ///
    /// The chunk may be any number of bytes (gvinum's stripes are whole sectors, not powers of
    /// two); md's partial parity log, if one is kept, needs whole 4 KiB.
    Parity { data_disks: usize },
}

/// How a layout places the copies of its data, as read balancing needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyPlacement {
    /// Each copy is an image of the whole array, laid out on its members as a unit (md's raid1
    /// mirrors, Vinum's plexes): reads are balanced as md's raid1 balances them (a read that
    /// continues the last one on a disk stays there, else an idle disk, else the nearest head).
    /// `same_slots` when every run has its copies on the same slots in the same order (raid1),
    /// so that a large read can be divided among the copies by copy index.
    Images { same_slots: bool },
    /// md raid10's chunked copies: `near` copies of a chunk on neighbouring members, and each of
    /// those `far` times further down the members (offset layouts count as far). Reads are
    /// balanced by md raid10's distances, which depend on those two counts.
    Chunks { near: u32, far: u32 },
}

/// What member bytes hold from one offset on: the logical bytes stored there, for `len` bytes
/// that stay contiguous on the member and in the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberExtent {
    /// The logical byte stored at the offset asked about; `None` where the member holds no array
    /// data (parity, space past what the layout uses, a gap between subdisks).
    pub logical: Option<u64>,
    /// Bytes from the offset that hold the logical bytes following `logical` (or that hold no
    /// array data either). At least 1; it may run past the member's data, so callers clip it
    /// to the range they walk.
    pub len: u64,
}

/// A data layout, in bytes: member slots `0..raid_disks()`, member offsets from each member's
/// data start (where the member's own metadata ends; the driver adds that), logical offsets from
/// the start of the array.
///
/// `Send + Sync` because a geometry is shared with the threads that serve reads beside the
/// engine; `Debug` because the engine's state is.
pub trait Layout: fmt::Debug + Send + Sync {
    /// What the layout is, for messages ("raid5", "vinum raid5 plex").
    fn name(&self) -> &str;

    /// Number of member slots.
    fn raid_disks(&self) -> usize;

    /// Logical size of the array in bytes.
    fn array_bytes(&self) -> u64;

    /// Bytes of array data on each member slot, from its data start; where members differ, the
    /// largest. Recovery and checks walk members from 0 to this.
    fn member_data_bytes(&self) -> u64;

    /// The chunk (stripe unit) in bytes; 0 for a layout without one. A read that one member
    /// holds in pieces at most this far apart is read in one member I/O; parity layouts must
    /// have one (see [`Redundancy::Parity`]).
    fn chunk_bytes(&self) -> u64;

    /// The layout's family.
    fn redundancy(&self) -> Redundancy;

    /// How many slots may be lost before data is lost, in the best case (which slots they are
    /// is [`Layout::is_readable`]'s question); 0 without redundancy.
    fn max_degraded(&self) -> usize;

    /// Whether every logical byte still has a copy, or can be rebuilt from parity, when only
    /// the slots for which `alive(slot)` holds are usable. Asked before every request while a
    /// slot is out of sync, so layouts with copies should answer without walking the whole
    /// array where they can; the default does walk it for them.
    fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        let dead = (0..self.raid_disks()).filter(|&s| !alive(s)).count();
        match self.redundancy() {
            Redundancy::None => dead == 0,
            Redundancy::Parity { data_disks } => dead <= self.raid_disks() - data_disks,
            Redundancy::Copies => {
                let end = self.array_bytes();
                let mut pos = 0;
                let mut copies = Copies::new();
                while pos < end {
                    copies.clear();
                    let run = self.map(pos, &mut copies);
                    if !copies.iter().any(|&(slot, _)| alive(slot)) {
                        return false;
                    }
                    pos += run.max(1);
                }
                true
            }
        }
    }

    /// Where logical byte `offset` is stored: pushes `(slot, member offset)` of every copy onto
    /// `copies` (one for layouts without copies, and the data chunk's place for parity layouts),
    /// the copy reads should prefer first; returns how many bytes from `offset` stay contiguous
    /// on every copy (at least 1, never past the array's end). `offset` is inside the array.
    ///
    /// Every read and write maps through here, so it must not allocate: `copies` holds four
    /// inline.
    fn map(&self, offset: u64, copies: &mut Copies) -> u64;

    /// What member bytes from `offset` of `slot` hold (the inverse of [`Layout::map`]).
    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent;

    /// On a parity layout, the run from logical byte `offset` to the end of its data chunk,
    /// with the chunk's stripe and index in it. The default works it out from [`Layout::map`]
    /// and the shape of [`Redundancy::Parity`]; a layout whose own map already knows the
    /// stripe answers it without the divisions (every parity read and write comes here).
    fn parity_run(&self, offset: u64) -> ParityRun {
        let Redundancy::Parity { data_disks } = self.redundancy() else {
            panic!("{} has no parity stripes", self.name());
        };
        let chunk = self.chunk_bytes();
        let mut copies = Copies::new();
        self.map(offset, &mut copies);
        let (slot, member_offset) = copies[0];
        let chunk_offset = member_offset % chunk;
        ParityRun {
            logical: offset,
            len: chunk - chunk_offset,
            stripe: member_offset / chunk,
            data_index: ((offset / chunk) % data_disks as u64) as usize,
            slot,
            chunk_offset,
        }
    }

    /// The slots' roles in `stripe`: which hold its data chunks, in order, and which its parity.
    /// Asked only of parity layouts.
    fn stripe_roles(&self, stripe: u64) -> StripeRoles {
        panic!("stripe {stripe}: {} has no parity stripes", self.name())
    }

    /// The row, in bytes, the engine checks and repairs redundancy in, counts mismatches per
    /// and rewrites whole after a read error: [`DEFAULT_ROW_BYTES`], md's 4 KiB. A layout with
    /// copies needs every copy of a byte at the same offset within its row; one whose copies
    /// line up only in whole sectors (a Vinum mirror of plexes cut at odd sectors) says 512.
    fn row_bytes(&self) -> u64 {
        DEFAULT_ROW_BYTES
    }

    /// How the copies are placed, for read balancing (which has nothing to choose on layouts
    /// without copies).
    fn copy_placement(&self) -> CopyPlacement {
        CopyPlacement::Images { same_slots: false }
    }

    /// The two levels of a mirror whose copies are arrays of their own, for a layout that is
    /// one ([`NestedLayout`]); such a layout is run by [`crate::nested::NestedArray`], never by
    /// [`crate::Array`] directly.
    fn nested(&self) -> Option<&NestedLayout> {
        None
    }
}
