//! `Geometry`: one array's data layout as the engine sees it, in bytes.
//!
//! The layout crate speaks md's language (512-byte sectors, per-level types). The engine wants one
//! question answered for every level: "this logical byte range, where is it?". This module turns a
//! level's layout into that answer, and owns nothing else: no member state, no I/O.

use smallvec::SmallVec;
use uraid_layout::{Extent, Level, LinearLayout, ParityLayout, Raid0Layout, Raid10Layout, Raid1Layout, StripeRoles};

/// Bytes per md sector.
pub const SECTOR_BYTES: u64 = 512;

/// An array's layout, whatever its level.
#[derive(Debug, Clone)]
pub enum Geometry {
    Linear(LinearLayout),
    Raid0(Raid0Layout),
    Raid1(Raid1Layout),
    Raid10(Raid10Layout),
    /// RAID-4, RAID-5 and RAID-6.
    Parity(ParityLayout),
}

/// Where one logical run of bytes lives: every copy of it (one for linear, raid0 and the data
/// chunk of a parity stripe; all mirrors for raid1/raid10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedRun {
    /// Logical byte offset of the run.
    pub logical: u64,
    /// Length of the run in bytes (never crosses a chunk or member boundary).
    pub len: u64,
    /// `(slot, member byte offset from the data start)` of each copy, in md's copy order.
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

impl Geometry {
    /// The md level this geometry implements.
    pub fn level(&self) -> Level {
        match self {
            Geometry::Linear(_) => Level::Linear,
            Geometry::Raid0(_) => Level::Raid0,
            Geometry::Raid1(_) => Level::Raid1,
            Geometry::Raid10(_) => Level::Raid10,
            Geometry::Parity(p) => p.level(),
        }
    }

    /// Number of member slots.
    pub fn raid_disks(&self) -> usize {
        match self {
            Geometry::Linear(l) => l.raid_disks(),
            Geometry::Raid0(l) => l.raid_disks(),
            Geometry::Raid1(l) => l.raid_disks(),
            Geometry::Raid10(l) => l.raid_disks(),
            Geometry::Parity(l) => l.raid_disks(),
        }
    }

    /// Logical size of the array in bytes.
    pub fn array_bytes(&self) -> u64 {
        let sectors = match self {
            Geometry::Linear(l) => l.array_sectors(),
            Geometry::Raid0(l) => l.array_sectors(),
            Geometry::Raid1(l) => l.array_sectors(),
            Geometry::Raid10(l) => l.array_sectors(),
            Geometry::Parity(l) => l.array_sectors(),
        };
        sectors * SECTOR_BYTES
    }

    /// How many slots may be lost before data is lost, in the best case for raid10 (the
    /// per-chunk check is `is_readable`).
    /// Whether the layout keeps whole copies of the data (raid1, raid10), rather than none
    /// (linear, raid0) or parity (raid4/5/6). Code that treats mirrors differently asks this,
    /// not the level, so a mirrored layout of another format is one more case here.
    pub fn is_mirrored(&self) -> bool {
        matches!(self, Geometry::Raid1(_) | Geometry::Raid10(_))
    }

    pub fn max_degraded(&self) -> usize {
        match self {
            Geometry::Linear(_) | Geometry::Raid0(_) => 0,
            Geometry::Raid1(l) => l.raid_disks() - 1,
            Geometry::Raid10(l) => l.raid_disks() - 1,
            Geometry::Parity(l) => l.raid_disks() - l.data_disks(),
        }
    }

    /// Whether every logical byte still has at least one copy (or can be rebuilt from parity)
    /// when only the slots for which `alive(slot)` holds are usable.
    pub fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        let disks = self.raid_disks();
        let dead = (0..disks).filter(|&s| !alive(s)).count();
        if dead == 0 {
            // The engine asks before every request; a whole array needs no mapping.
            return true;
        }
        match self {
            Geometry::Linear(_) | Geometry::Raid0(_) => false,
            Geometry::Raid1(_) => dead < disks,
            Geometry::Parity(l) => dead <= l.raid_disks() - l.data_disks(),
            Geometry::Raid10(l) => {
                // The copy pattern repeats with a period of at most raid_disks chunks per band;
                // checking every chunk of the first `raid_disks * copies` covers every distinct
                // placement of a copy set.
                let chunk = u64::from(l.chunk_sectors());
                let total = l.array_sectors() / chunk;
                let probe = total.min((disks as u64) * u64::from(l.format().copies()) * 2);
                (0..probe).all(|c| l.map(c * chunk).iter().any(|e| alive(e.member)))
            }
        }
    }

    /// Bytes of array data on each member slot, from its data start: the component size the
    /// layout uses (md's `dev_sectors`: trimmed to whole chunks for raid4/5/6 and raid10). Every
    /// slot of a redundant level holds the same amount; for linear and raid0, whose members may
    /// differ, the largest.
    pub fn member_data_bytes(&self) -> u64 {
        let sectors = match self {
            Geometry::Linear(l) => (0..l.raid_disks()).map(|m| l.member_used_sectors(m)).max().unwrap_or(0),
            Geometry::Raid0(l) => (0..l.raid_disks()).map(|m| l.member_used_sectors(m)).max().unwrap_or(0),
            Geometry::Raid1(l) => l.array_sectors(),
            Geometry::Raid10(l) => l.dev_sectors(),
            Geometry::Parity(l) => l.dev_sectors(),
        };
        sectors * SECTOR_BYTES
    }

    /// The logical byte stored at byte `offset` (from the data start) of member `slot`: the
    /// inverse of [`Geometry::runs`] / [`Geometry::parity_runs`]. `None` where the member holds
    /// no array data there (P and Q chunks, space past the used part of the member).
    pub fn logical(&self, slot: usize, offset: u64) -> Option<u64> {
        let sector = offset / SECTOR_BYTES;
        let logical = match self {
            Geometry::Linear(l) => l.logical(slot, sector),
            Geometry::Raid0(l) => l.logical(slot, sector),
            Geometry::Raid1(l) => l.logical(slot, sector),
            Geometry::Raid10(l) => l.logical(slot, sector),
            Geometry::Parity(l) => l.logical(slot, sector),
        }?;
        Some(logical * SECTOR_BYTES + offset % SECTOR_BYTES)
    }

    /// Chunk size in bytes (0 for a linear array without chunks).
    pub fn chunk_bytes(&self) -> u64 {
        let sectors = match self {
            Geometry::Linear(l) => l.chunk_sectors(),
            Geometry::Raid0(l) => l.chunk_sectors(),
            Geometry::Raid1(_) => 0,
            Geometry::Raid10(l) => l.chunk_sectors(),
            Geometry::Parity(l) => l.chunk_sectors(),
        };
        u64::from(sectors) * SECTOR_BYTES
    }

    /// Bytes of data in one full stripe (parity levels); the lock granularity of writes.
    pub fn stripe_data_bytes(&self) -> Option<u64> {
        match self {
            Geometry::Parity(l) => Some(l.data_disks() as u64 * u64::from(l.chunk_sectors()) * SECTOR_BYTES),
            _ => None,
        }
    }

    /// Split `[offset, offset+len)` into runs that each lie in one chunk of one member (for every
    /// copy). Not for parity arrays: use [`Geometry::parity_runs`].
    pub fn runs(&self, offset: u64, len: u64) -> MappedRuns {
        let mut out = MappedRuns::new();
        let mut pos = offset;
        let end = offset + len;
        while pos < end {
            let sector = pos / SECTOR_BYTES;
            let within = pos % SECTOR_BYTES;
            let copy = |e: &Extent| (e.member, e.sector * SECTOR_BYTES + within);
            // The copies go straight into an inline list: mapping a request does not allocate
            // (every read and write of the copy levels comes through here).
            let mut copies = Copies::new();
            let mut first_sectors = 0;
            let mut each = |e: Extent| {
                if copies.is_empty() {
                    first_sectors = e.sectors;
                }
                copies.push(copy(&e));
            };
            match self {
                Geometry::Linear(l) => each(l.map(sector)),
                Geometry::Raid0(l) => each(l.map(sector)),
                Geometry::Raid1(l) => l.map_each(sector, each),
                Geometry::Raid10(l) => l.map_each(sector, each),
                Geometry::Parity(_) => panic!("runs() called on a parity geometry"),
            }
            assert!(!copies.is_empty(), "layout returned no extent");
            // Raid1 maps a whole member; cap runs so a single buffer stays bounded.
            let avail = (first_sectors * SECTOR_BYTES - within).min(MAX_RUN_BYTES);
            let run = avail.min(end - pos);
            debug_assert!(run > 0);
            out.push(MappedRun { logical: pos, len: run, copies });
            pos += run;
        }
        out
    }

    /// For levels that keep every byte of data in exactly one place (linear, raid0, and the data
    /// chunks of raid4/5/6 while no member is missing), call `each(slot, member_offset, len)` for
    /// the pieces of `[offset, offset+len)` in order, a piece never crossing a chunk or member
    /// boundary. Returns false, having called nothing, for mirrored levels (raid1, raid10), where
    /// a read has a copy to choose. The caller checks the range against the array's size.
    ///
    /// This is the whole of a read on those levels when nothing is degraded, which is what lets
    /// such reads bypass the engine (see `uraid_device::service`'s inline reads).
    pub fn each_data_piece(&self, offset: u64, len: u64, mut each: impl FnMut(usize, u64, u64)) -> bool {
        if self.is_mirrored() {
            return false;
        }
        let end = offset + len;
        let mut pos = offset;
        while pos < end {
            let sector = pos / SECTOR_BYTES;
            let within = pos % SECTOR_BYTES;
            let (slot, member_sector, sectors) = match self {
                Geometry::Linear(l) => {
                    let e = l.map(sector);
                    (e.member, e.sector, e.sectors)
                }
                Geometry::Raid0(l) => {
                    let e = l.map(sector);
                    (e.member, e.sector, e.sectors)
                }
                Geometry::Parity(l) => {
                    let m = l.map(sector);
                    (m.member, m.sector, m.sectors)
                }
                Geometry::Raid1(_) | Geometry::Raid10(_) => unreachable!("refused above"),
            };
            let run = (sectors * SECTOR_BYTES - within).min(end - pos);
            each(slot, member_sector * SECTOR_BYTES + within, run);
            pos += run;
        }
        true
    }

    /// Split `[offset, offset+len)` of a parity array into runs, each inside one data chunk.
    pub fn parity_runs(&self, offset: u64, len: u64) -> ParityRuns {
        let Geometry::Parity(l) = self else {
            panic!("parity_runs() called on a non-parity geometry");
        };
        let chunk_bytes = u64::from(l.chunk_sectors()) * SECTOR_BYTES;
        let mut out = ParityRuns::new();
        let mut pos = offset;
        let end = offset + len;
        while pos < end {
            let map = l.map(pos / SECTOR_BYTES);
            let chunk_offset = (map.sector * SECTOR_BYTES + pos % SECTOR_BYTES) % chunk_bytes;
            let run = (chunk_bytes - chunk_offset).min(end - pos);
            out.push(ParityRun {
                logical: pos,
                len: run,
                stripe: map.stripe,
                data_index: map.data_index,
                slot: map.member,
                chunk_offset,
            });
            pos += run;
        }
        out
    }

    /// The parity layout, for parity levels.
    pub fn parity(&self) -> Option<&ParityLayout> {
        match self {
            Geometry::Parity(l) => Some(l),
            _ => None,
        }
    }

    /// Roles of every slot in `stripe` (parity levels).
    pub fn stripe_roles(&self, stripe: u64) -> StripeRoles {
        self.parity().expect("stripe_roles on a non-parity geometry").stripe(stripe)
    }
}

/// Largest single member I/O the engine emits for one run; keeps buffers bounded for raid1,
/// whose "chunk" is the whole member.
pub const MAX_RUN_BYTES: u64 = 1 << 20;
