//! `Geometry`: one array's data layout as the engine sees it, in bytes.
//!
//! The engine asks a layout a handful of questions ("this logical byte range, where is every
//! copy of it?", "which slots hold stripe 7's data and parity?", "can the array still be read
//! without slots 1 and 3?", "what do member bytes hold?") and nothing else; code outside this
//! module never asks which level an array is. The questions are the [`Layout`] trait; each
//! layout answers them, and the methods here build the engine's runs from those answers once for
//! every layout. This module owns no member state and no I/O.
//!
//! How a layout comes in:
//!
//! - md's levels are variants of the [`Geometry`] enum, holding the layout crate's types, which
//!   implement [`Layout`] in `md.rs`. Every method here matches the variant and calls a generic
//!   function with the concrete type, so the compiler sees md's arithmetic directly and a 4 KiB
//!   request is mapped without an indirect call (it is the engine's hottest path).
//! - Any other format's layout (a Vinum plex, a RAIDframe level) implements [`Layout`] in its own
//!   crate and becomes [`Geometry::Custom`] through [`Geometry::custom`]: a trait object behind
//!   an `Arc`, so a geometry stays cheap to clone and can be shared with the threads that serve
//!   reads beside the engine. Its questions cost one indirect call each; adding it changes
//!   nothing in the engine. A trait object rather than a new variant per format keeps the
//!   engine from depending on every format crate.
//!
//! The engine handles a layout by its family ([`Redundancy`]), not by level: copies are written
//! to every copy and compared by a check; parity stripes are planned as md plans them.

mod layout;
mod md;
mod nested;
mod reshaping;

use std::sync::Arc;

use smallvec::SmallVec;
use uraid_layout::{LinearLayout, ParityLayout, Raid0Layout, Raid10Layout, Raid1Layout};

pub use layout::{CopyPlacement, Layout, MemberExtent, Redundancy, DEFAULT_ROW_BYTES};
pub use nested::NestedLayout;
pub use reshaping::{ReshapingLayout, Shape};
pub use uraid_layout::{MemberList, StripeRoles};

/// Bytes per md sector.
pub const SECTOR_BYTES: u64 = 512;

/// An array's layout, whatever its level or format.
#[derive(Debug, Clone)]
pub enum Geometry {
    Linear(LinearLayout),
    Raid0(Raid0Layout),
    Raid1(Raid1Layout),
    Raid10(Raid10Layout),
    /// RAID-4, RAID-5 and RAID-6.
    Parity(ParityLayout),
    /// A layout defined outside the engine (another format's); see [`Geometry::custom`].
    Custom(Arc<dyn Layout>),
}

/// Where one logical run of bytes lives: every copy of it (one for linear, raid0 and the data
/// chunk of a parity stripe; all mirrors for raid1/raid10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedRun {
    /// Logical byte offset of the run.
    pub logical: u64,
    /// Length of the run in bytes (never crosses a chunk or member boundary).
    pub len: u64,
    /// `(slot, member byte offset from the data start)` of each copy, in the layout's copy order
    /// (md's, for md's levels).
    pub copies: Copies,
}

/// The copies of a run, `(slot, member byte offset)`: held inline up to four (every linear and
/// raid0 run, and mirrors of up to four ways), so that mapping a request does not allocate.
pub type Copies = SmallVec<[(usize, u64); 4]>;

/// The runs of a parity-level request, inline up to two.
pub type ParityRuns = SmallVec<[ParityRun; 2]>;

/// The runs of a request, inline up to two (a small request crosses at most one chunk
/// boundary).
pub type MappedRuns = SmallVec<[MappedRun; 2]>;

/// Where one logical run of a parity array lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParityRun {
    pub logical: u64,
    pub len: u64,
    pub stripe: u64,
    pub data_index: usize,
    pub slot: usize,
    /// Byte offset of the run inside its chunk.
    pub chunk_offset: u64,
}

/// Calls `$body` with `$layout` bound to the geometry's layout: the concrete md type for md's
/// levels (static calls), the trait object for a custom one.
macro_rules! with_layout {
    ($geometry:expr, $layout:ident => $body:expr) => {
        match $geometry {
            Geometry::Linear($layout) => $body,
            Geometry::Raid0($layout) => $body,
            Geometry::Raid1($layout) => $body,
            Geometry::Raid10($layout) => $body,
            Geometry::Parity($layout) => $body,
            Geometry::Custom(custom) => {
                let $layout: &dyn Layout = custom.as_ref();
                $body
            }
        }
    };
}

impl Geometry {
    /// A geometry over a layout defined outside the engine.
    pub fn custom(layout: impl Layout + 'static) -> Geometry {
        Geometry::Custom(Arc::new(layout))
    }

    /// What the layout is, for messages: md's level name ("raid5"), or what a custom layout
    /// calls itself.
    pub fn name(&self) -> &str {
        with_layout!(self, l => l.name())
    }

    /// Number of member slots.
    #[inline]
    pub fn raid_disks(&self) -> usize {
        with_layout!(self, l => l.raid_disks())
    }

    /// Logical size of the array in bytes.
    #[inline]
    pub fn array_bytes(&self) -> u64 {
        with_layout!(self, l => l.array_bytes())
    }

    /// The layout's family: how the engine writes, rebuilds and checks it.
    #[inline]
    pub fn redundancy(&self) -> Redundancy {
        with_layout!(self, l => l.redundancy())
    }

    /// Whether the layout keeps whole copies of the data (raid1, raid10), rather than none
    /// (linear, raid0) or parity (raid4/5/6). Code that treats mirrors differently asks this,
    /// not the level.
    #[inline]
    pub fn is_mirrored(&self) -> bool {
        self.redundancy() == Redundancy::Copies
    }

    /// Whether the layout keeps parity stripes (raid4/5/6): writes, rebuilds and checks then
    /// go stripe by stripe ([`Geometry::parity_runs`], [`Geometry::stripe_roles`]).
    #[inline]
    pub fn is_parity(&self) -> bool {
        matches!(self.redundancy(), Redundancy::Parity { .. })
    }

    /// How many slots may be lost before data is lost, in the best case for raid10 (the
    /// per-chunk check is `is_readable`).
    pub fn max_degraded(&self) -> usize {
        with_layout!(self, l => l.max_degraded())
    }

    /// Whether every logical byte still has at least one copy (or can be rebuilt from parity)
    /// when only the slots for which `alive(slot)` holds are usable.
    pub fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        if (0..self.raid_disks()).all(alive) {
            // The engine asks before every request; a whole array needs no mapping.
            return true;
        }
        with_layout!(self, l => l.is_readable(alive))
    }

    /// Bytes of array data on each member slot, from its data start: the component size the
    /// layout uses (md's `dev_sectors`: trimmed to whole chunks for raid4/5/6 and raid10). Every
    /// slot of a redundant md level holds the same amount; for linear and raid0, whose members
    /// may differ, the largest.
    pub fn member_data_bytes(&self) -> u64 {
        with_layout!(self, l => l.member_data_bytes())
    }

    /// The logical byte stored at byte `offset` (from the data start) of member `slot`: the
    /// inverse of [`Geometry::runs`]. `None` where the member holds no array data there (P and
    /// Q chunks, space past the used part of the member).
    pub fn logical(&self, slot: usize, offset: u64) -> Option<u64> {
        with_layout!(self, l => l.member_extent(slot, offset).logical)
    }

    /// Chunk size in bytes (0 for a layout without chunks: raid1, a linear array without one).
    #[inline]
    pub fn chunk_bytes(&self) -> u64 {
        with_layout!(self, l => l.chunk_bytes())
    }

    /// Bytes of data in one full stripe (parity levels); the lock granularity of writes.
    #[inline]
    pub fn stripe_data_bytes(&self) -> Option<u64> {
        with_layout!(self, l => match l.redundancy() {
            Redundancy::Parity { data_disks } => Some(data_disks as u64 * l.chunk_bytes()),
            Redundancy::None | Redundancy::Copies => None,
        })
    }

    /// The smallest range a [`crate::Request::Discard`] may cover, and what its offset and
    /// length are whole multiples of: whole stripes on parity layouts (a part-zeroed stripe's
    /// parity would be wrong), whole stripes of every parity plex of a nested mirror; `None`
    /// where any whole sectors do.
    pub fn discard_granularity(&self) -> Option<u64> {
        match self.nested() {
            Some(nested) => nested.discard_granularity(),
            None => self.stripe_data_bytes(),
        }
    }

    /// The two levels of a mirror of arrays, if the layout is one (see [`NestedLayout`]).
    pub fn nested(&self) -> Option<&NestedLayout> {
        match self {
            Geometry::Custom(custom) => custom.nested(),
            _ => None,
        }
    }

    /// Where logical byte `offset` is stored (see [`Layout::map`]): every copy pushed onto
    /// `copies`; returns the bytes from `offset` that stay contiguous on every copy.
    pub fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        with_layout!(self, l => Layout::map(l, offset, copies))
    }

    /// What member bytes from `offset` of `slot` hold (see [`Layout::member_extent`]).
    pub fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        with_layout!(self, l => Layout::member_extent(l, slot, offset))
    }

    /// The row redundancy is checked, repaired and rebuilt in (see [`Layout::row_bytes`]).
    #[inline]
    pub fn row_bytes(&self) -> u64 {
        with_layout!(self, l => l.row_bytes())
    }

    /// How the copies of a mirrored layout are placed, for read balancing.
    pub fn copy_placement(&self) -> CopyPlacement {
        with_layout!(self, l => l.copy_placement())
    }

    /// Split `[offset, offset+len)` into runs that each lie in one chunk of one member (for every
    /// copy). On parity layouts each run names the data chunk only (writes and degraded reads
    /// there go by [`Geometry::parity_runs`]).
    pub fn runs(&self, offset: u64, len: u64) -> MappedRuns {
        with_layout!(self, l => runs(l, offset, len))
    }

    /// For layouts that keep every byte of data in exactly one place (linear, raid0, and the
    /// data chunks of raid4/5/6 while no member is missing), call `each(slot, member_offset,
    /// len)` for the pieces of `[offset, offset+len)` in order, a piece never crossing a chunk or
    /// member boundary. Returns false, having called nothing, for mirrored layouts (raid1,
    /// raid10), where a read has a copy to choose. The caller checks the range against the
    /// array's size.
    ///
    /// This is the whole of a read on those layouts when nothing is degraded, which is what lets
    /// such reads bypass the engine (see `uraid_device::service`'s inline reads).
    pub fn each_data_piece(&self, offset: u64, len: u64, each: impl FnMut(usize, u64, u64)) -> bool {
        if self.is_mirrored() {
            return false;
        }
        with_layout!(self, l => each_data_piece(l, offset, len, each));
        true
    }

    /// Split `[offset, offset+len)` of a parity array into runs, each inside one data chunk.
    pub fn parity_runs(&self, offset: u64, len: u64) -> ParityRuns {
        with_layout!(self, l => parity_runs(l, offset, len))
    }

    /// Roles of every slot in `stripe` (parity levels).
    pub fn stripe_roles(&self, stripe: u64) -> StripeRoles {
        with_layout!(self, l => l.stripe_roles(stripe))
    }

    /// The runs that member bytes `[offset, offset+len)` of `slot` hold, in member order, each
    /// with every copy and with the member offset of the copy on `slot` itself: where a
    /// recovery of the slot reads its bytes from, on layouts with copies. Member bytes holding
    /// no array data are left out.
    pub fn member_runs(&self, slot: usize, offset: u64, len: u64) -> Vec<(u64, MappedRun)> {
        let end = offset + len;
        let mut out = Vec::new();
        let mut pos = offset;
        while pos < end {
            let extent = with_layout!(self, l => l.member_extent(slot, pos));
            let piece = extent.len.min(end - pos);
            if let Some(logical) = extent.logical {
                for run in self.runs(logical, piece) {
                    let at = pos + (run.logical - logical);
                    debug_assert!(run.copies.contains(&(slot, at)), "the inverse map disagrees with the map");
                    out.push((at, run));
                }
            }
            pos += piece;
        }
        out
    }
}

/// Largest single member I/O the engine emits for one run; keeps buffers bounded for raid1,
/// whose "chunk" is the whole member.
pub const MAX_RUN_BYTES: u64 = 1 << 20;

/// [`Geometry::runs`] over one layout.
fn runs<L: Layout + ?Sized>(layout: &L, offset: u64, len: u64) -> MappedRuns {
    let mut out = MappedRuns::new();
    let mut pos = offset;
    let end = offset + len;
    while pos < end {
        // The copies go straight into an inline list: mapping a request does not allocate
        // (every read and write of the copy levels comes through here).
        let mut copies = Copies::new();
        let avail = layout.map(pos, &mut copies);
        assert!(!copies.is_empty(), "layout returned no copy");
        // Raid1 maps a whole member; cap runs so a single buffer stays bounded.
        let run = avail.min(MAX_RUN_BYTES).min(end - pos);
        debug_assert!(run > 0);
        out.push(MappedRun { logical: pos, len: run, copies });
        pos += run;
    }
    out
}

/// [`Geometry::each_data_piece`] over one layout without copies.
fn each_data_piece<L: Layout + ?Sized>(layout: &L, offset: u64, len: u64, mut each: impl FnMut(usize, u64, u64)) {
    let end = offset + len;
    let mut pos = offset;
    while pos < end {
        let mut copies = Copies::new();
        let avail = layout.map(pos, &mut copies);
        let (slot, at) = copies[0];
        let run = avail.min(end - pos);
        each(slot, at, run);
        pos += run;
    }
}

/// [`Geometry::parity_runs`] over one parity layout.
fn parity_runs<L: Layout + ?Sized>(layout: &L, offset: u64, len: u64) -> ParityRuns {
    let mut out = ParityRuns::new();
    let mut pos = offset;
    let end = offset + len;
    while pos < end {
        let mut run = layout.parity_run(pos);
        run.len = run.len.min(end - pos);
        pos += run.len;
        out.push(run);
    }
    out
}
