//! The md write-intent bitmap superblock (`bitmap_super_t`, 256 bytes, little-endian) from
//! the kernel's `drivers/md/md-bitmap.h`, and helpers for the bits that follow it.
//!
//! On disk the 256-byte header is followed by one bit per chunk (`chunksize` bytes of each
//! member, or of the array for raid10), bit `i` being bit `i % 8` of byte `i / 8`.

use crate::bytes::{array, le_u32, le_u64, put_u32, put_u64};
use crate::FormatError;

/// `BITMAP_MAGIC`, "bitm" read as a little-endian u32.
pub const MAGIC: u32 = 0x6d74_6962;
/// Size of the header.
pub const HEADER_BYTES: usize = 256;
/// Host-endian bits (old format).
pub const VERSION_LO: u32 = 3;
/// Little-endian bits; what mdadm writes for a plain internal bitmap.
pub const VERSION_HI: u32 = 4;
/// Clustered md.
pub const VERSION_CLUSTERED: u32 = 5;
/// mdadm's default `--delay` (seconds between bitmap flushes).
pub const DEFAULT_DAEMON_SLEEP: u32 = 5;
/// Largest `write_behind` the kernel accepts (`COUNTER_MAX`).
pub const MAX_WRITE_BEHIND: u32 = 16383;

/// `state` bits (`BITMAP_*` in md-bitmap.h).
pub mod state {
    /// The bitmap is out of date: everything must be resynced.
    pub const STALE: u32 = 1 << 1;
    /// A bitmap write failed.
    pub const WRITE_ERROR: u32 = 1 << 2;
    /// Bits are in host order (`BITMAP_HOSTENDIAN`).
    pub const HOSTENDIAN: u32 = 1 << 15;
}

/// Every field of the bitmap superblock by name (byte offsets in the comments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitmapSuper {
    /// 4: [`VERSION_LO`], [`VERSION_HI`] or [`VERSION_CLUSTERED`].
    pub version: u32,
    /// 8: must equal the array UUID (1.x `set_uuid` bytes).
    pub uuid: [u8; 16],
    /// 24: event count when the bitmap was last written.
    pub events: u64,
    /// 32: events when bits were last cleared (on a non-degraded array).
    pub events_cleared: u64,
    /// 40: sectors covered: per member for raid1/4/5/6, the array size for raid10.
    pub sync_size: u64,
    /// 48: [`state`] bits.
    pub state: u32,
    /// 52: bytes per bit, a power of two.
    pub chunksize: u32,
    /// 56: seconds between flushes.
    pub daemon_sleep: u32,
    /// 60: outstanding writes allowed to write-mostly members.
    pub write_behind: u32,
    /// 64: sectors reserved for the bitmap (0: unknown).
    pub sectors_reserved: u32,
    /// 68: cluster nodes (each has its own bitmap).
    pub nodes: u32,
    /// 72: cluster name, NUL padded.
    pub cluster_name: [u8; 64],
    /// 136-255: padding, kept as read.
    pub pad: [u8; 120],
}

impl BitmapSuper {
    /// Parse and check a bitmap header as `md_bitmap_read_sb` does: magic, version, a
    /// power-of-two chunk size of at least 512 bytes, a daemon sleep of at least one second,
    /// and `write_behind` within `COUNTER_MAX`.
    pub fn parse(bytes: &[u8]) -> Result<Self, FormatError> {
        if bytes.len() < HEADER_BYTES {
            return Err(FormatError::Truncated { needed: HEADER_BYTES, got: bytes.len() });
        }
        let magic = le_u32(bytes, 0);
        if magic != MAGIC {
            return Err(FormatError::BadBitmap(format!("magic 0x{magic:08x}, expected 0x{MAGIC:08x}")));
        }
        let b = BitmapSuper {
            version: le_u32(bytes, 4),
            uuid: array(bytes, 8),
            events: le_u64(bytes, 24),
            events_cleared: le_u64(bytes, 32),
            sync_size: le_u64(bytes, 40),
            state: le_u32(bytes, 48),
            chunksize: le_u32(bytes, 52),
            daemon_sleep: le_u32(bytes, 56),
            write_behind: le_u32(bytes, 60),
            sectors_reserved: le_u32(bytes, 64),
            nodes: le_u32(bytes, 68),
            cluster_name: array(bytes, 72),
            pad: array(bytes, 136),
        };
        if !(VERSION_LO..=VERSION_CLUSTERED).contains(&b.version) {
            return Err(FormatError::BadBitmap(format!("unsupported version {}", b.version)));
        }
        if b.chunksize < 512 || !b.chunksize.is_power_of_two() {
            return Err(FormatError::BadBitmap(format!("chunk size {} is not a power of two >= 512", b.chunksize)));
        }
        if b.daemon_sleep < 1 {
            return Err(FormatError::BadBitmap("daemon sleep period 0".into()));
        }
        if b.write_behind > MAX_WRITE_BEHIND {
            return Err(FormatError::BadBitmap(format!(
                "write-behind {} exceeds {}",
                b.write_behind, MAX_WRITE_BEHIND
            )));
        }
        Ok(b)
    }

    /// A fresh header as mdadm's `add_internal_bitmap1` fills it.
    pub fn new(uuid: [u8; 16], sync_size: u64, chunksize: u32) -> Self {
        BitmapSuper {
            version: VERSION_HI,
            uuid,
            events: 0,
            events_cleared: 0,
            sync_size,
            state: 0,
            chunksize,
            daemon_sleep: DEFAULT_DAEMON_SLEEP,
            write_behind: 0,
            sectors_reserved: 0,
            nodes: 0,
            cluster_name: [0; 64],
            pad: [0; 120],
        }
    }

    pub fn to_bytes(&self) -> [u8; 256] {
        let mut b = [0u8; HEADER_BYTES];
        put_u32(&mut b, 0, MAGIC);
        put_u32(&mut b, 4, self.version);
        b[8..24].copy_from_slice(&self.uuid);
        put_u64(&mut b, 24, self.events);
        put_u64(&mut b, 32, self.events_cleared);
        put_u64(&mut b, 40, self.sync_size);
        put_u32(&mut b, 48, self.state);
        put_u32(&mut b, 52, self.chunksize);
        put_u32(&mut b, 56, self.daemon_sleep);
        put_u32(&mut b, 60, self.write_behind);
        put_u32(&mut b, 64, self.sectors_reserved);
        put_u32(&mut b, 68, self.nodes);
        b[72..136].copy_from_slice(&self.cluster_name);
        b[136..256].copy_from_slice(&self.pad);
        b
    }

    /// Number of bits: `sync_size` sectors in chunks of `chunksize` bytes, rounded up (the
    /// kernel's `chunks`, mdadm's `bitmap_bits`).
    pub fn chunks(&self) -> u64 {
        chunks(self.sync_size, self.chunksize)
    }

    /// Bytes of bits after the header.
    pub fn bits_bytes(&self) -> usize {
        self.chunks().div_ceil(8) as usize
    }

    /// Header plus bits rounded up to `boundary` bytes (mdadm's `calc_bitmap_size`): the space
    /// one node's bitmap takes on a member.
    pub fn space_bytes(&self, boundary: u64) -> u64 {
        (self.bits_bytes() as u64 + HEADER_BYTES as u64).div_ceil(boundary) * boundary
    }

    /// Sectors covered by one bit.
    pub fn chunk_sectors(&self) -> u64 {
        u64::from(self.chunksize) / 512
    }

    /// Whether the bitmap is stale (must be ignored and everything resynced).
    pub fn is_stale(&self) -> bool {
        self.state & state::STALE != 0
    }
}

/// Bits needed for `sync_size` sectors in chunks of `chunksize` bytes.
pub fn chunks(sync_size: u64, chunksize: u32) -> u64 {
    if chunksize == 0 {
        return 0;
    }
    (sync_size * 512).div_ceil(u64::from(chunksize))
}

/// Number of set bits among the first `chunks` bits of `bits` (bits beyond the slice count as
/// clear).
pub fn count_dirty(bits: &[u8], chunks: u64) -> u64 {
    let full = (chunks / 8) as usize;
    let mut n: u64 = bits.iter().take(full).map(|b| u64::from(b.count_ones())).sum();
    let rest = (chunks % 8) as u32;
    if rest != 0 {
        if let Some(b) = bits.get(full) {
            n += u64::from((b & ((1u8 << rest) - 1)).count_ones());
        }
    }
    n
}

/// Whether bit `chunk` is set.
pub fn is_dirty(bits: &[u8], chunk: u64) -> bool {
    bits.get((chunk / 8) as usize).is_some_and(|b| b & (1 << (chunk % 8)) != 0)
}

/// Set or clear bit `chunk` (ignored beyond the slice).
pub fn set_dirty(bits: &mut [u8], chunk: u64, dirty: bool) {
    if let Some(b) = bits.get_mut((chunk / 8) as usize) {
        let mask = 1u8 << (chunk % 8);
        if dirty {
            *b |= mask;
        } else {
            *b &= !mask;
        }
    }
}
