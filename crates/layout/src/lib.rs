//! Where Linux md puts each sector of an array: pure address arithmetic, no I/O.
//!
//! Every function here maps a logical array sector to the member sectors that hold it, exactly as
//! the kernel's md personalities do (`drivers/md/linear.c`, `raid0.c`, `raid1.c`, `raid10.c`,
//! `raid5.c`), so member images written through these maps are readable by the kernel and the
//! other way round.
//!
//! Conventions shared by every module:
//! - All addresses and lengths are 512-byte sectors.
//! - A "member sector" is relative to the member's data start; adding the member's data offset
//!   (from its superblock) is the caller's business.
//! - Members are numbered by raid slot (`rdev->raid_disk`), `0..raid_disks`.
//! - A `map` returns the longest run that stays contiguous on the member(s) it names, so a caller
//!   can loop `map`, do the I/O, advance by `sectors`. Runs never cross the end of the array.
//! - Asking `map` for a sector at or past `array_sectors()` is a caller bug and panics.
//! - Constructors validate the geometry the way md does at assembly (and mdadm at creation) and
//!   return a [`LayoutError`] that says what is wrong in plain words.
//!
//! Modules: [`level`] (RAID level names and numbers), [`linear`], [`raid0`], [`raid1`],
//! [`raid10`], [`parity`] (raid4, raid5, raid6 and the RAID-6 Q-syndrome slot order).

pub mod level;
pub mod linear;
pub mod parity;
pub mod raid0;
pub mod raid1;
pub mod raid10;

pub use level::Level;
pub use linear::LinearLayout;
pub use parity::{MemberList, ParityAlgorithm, ParityLayout, ParityMap, StripeRoles};
pub use raid0::{Raid0Layout, Raid0Zone, Raid0ZoneLayout};
pub use raid1::Raid1Layout;
pub use raid10::{Raid10Format, Raid10Layout};

/// A run of sectors on one member: `sectors` sectors starting at member sector `sector` of
/// member (raid slot) `member`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Extent {
    pub member: usize,
    pub sector: u64,
    pub sectors: u64,
}

/// Smallest chunk md's striped-with-redundancy personalities accept: one page (4 KiB).
/// raid10 `setup_geo` and raid5 `setup_conf` both refuse anything smaller.
pub(crate) const PAGE_SECTORS: u32 = 8;

/// Why a geometry or a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("md level {0} is not supported (supported: linear, raid0, raid1, raid4, raid5, raid6, raid10)")]
    UnsupportedLevel(i32),

    #[error("\"{0}\" is not a RAID level uraid knows (expected linear, raid0/stripe, raid1/mirror, raid4, raid5, raid6 or raid10)")]
    UnknownLevelName(String),

    #[error("{level} needs at least {min} member devices, but {got} were given")]
    TooFewDevices { level: Level, min: usize, got: usize },

    #[error("{level} needs a chunk size, but none (0) was given")]
    ChunkMissing { level: Level },

    #[error("chunk size {} is not a power of two ({level} needs one)", SizeText(*.chunk_sectors as u64))]
    ChunkNotPowerOfTwo { level: Level, chunk_sectors: u32 },

    #[error("chunk size {} is smaller than 4 KiB, the smallest chunk {level} accepts", SizeText(*.chunk_sectors as u64))]
    ChunkTooSmall { level: Level, chunk_sectors: u32 },

    #[error("raid0 members of different sizes need a stored layout (original or alternate), but this array has none; the kernel refuses to guess (it would need the raid0.default_layout module parameter)")]
    Raid0LayoutUnset,

    #[error("raid10 layout number {layout:#x} is not valid: {reason}")]
    InvalidRaid10Layout { layout: u32, reason: &'static str },

    #[error("\"{0}\" is not a raid10 layout (expected e.g. n2, f2, o2, near=2, far=2, offset=2 or n2f2)")]
    UnknownRaid10Layout(String),

    #[error("raid10 layout {format} keeps {copies} copies, which needs at least {copies} member devices, but the array has {raid_disks}")]
    Raid10TooFewDevices { format: Raid10Format, copies: u32, raid_disks: usize },

    #[error("{level} has no parity layout (only raid4, raid5 and raid6 do)")]
    NotParityLevel { level: Level },

    #[error("{level} layout number {number} is not one md supports")]
    UnknownParityAlgorithm { level: Level, number: u32 },

    #[error("\"{name}\" is not a {level} layout (expected e.g. left-symmetric, right-asymmetric, parity-first, la, ls, ra, rs or default)")]
    UnknownParityAlgorithmName { level: Level, name: String },

    #[error("layout {} is only valid for raid6, not {level}", .algorithm.name())]
    AlgorithmNeedsRaid6 { level: Level, algorithm: ParityAlgorithm },

    #[error("the array would be larger than 2^64 sectors")]
    TooLarge,
}

/// Formats a sector count for people: "64 KiB", "12 KiB", or "3 sectors" when it is not a whole
/// number of KiB.
pub(crate) struct SizeText(pub u64);

impl std::fmt::Display for SizeText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sectors = self.0;
        if sectors & 1 != 0 {
            return write!(f, "{sectors} sectors");
        }
        let kib = sectors / 2;
        if kib != 0 && kib & 1023 == 0 {
            write!(f, "{} MiB", kib / 1024)
        } else {
            write!(f, "{kib} KiB")
        }
    }
}

/// Panics with a uniform message when `logical` is outside an array of `array_sectors`.
#[track_caller]
pub(crate) fn check_in_array(logical: u64, array_sectors: u64) {
    assert!(logical < array_sectors, "logical sector {logical} is outside the array ({array_sectors} sectors)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_sentences() {
        let e = LayoutError::ChunkNotPowerOfTwo { level: Level::Raid5, chunk_sectors: 24 };
        assert_eq!(e.to_string(), "chunk size 12 KiB is not a power of two (raid5 needs one)");
        let e = LayoutError::ChunkTooSmall { level: Level::Raid10, chunk_sectors: 3 };
        assert_eq!(e.to_string(), "chunk size 3 sectors is smaller than 4 KiB, the smallest chunk raid10 accepts");
        assert_eq!(SizeText(1024).to_string(), "512 KiB");
        assert_eq!(SizeText(8192).to_string(), "4 MiB");
    }
}
