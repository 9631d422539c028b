//! mdadm's backup of a reshape's critical section (`struct mdp_backup_super` in mdadm's
//! `Grow.c`), as mdadm writes it to the devices a reshape adds, and reads it back when it
//! assembles an array a crash left inside that section (`Grow_restart`).
//!
//! A reshape onto more members that cannot move the data offset (0.90 and 1.0 metadata, or no
//! room before the data) writes its first new stripes over old stripes it has not finished
//! reading: a crash there would lose both. mdadm first copies that part of the array (its
//! logical bytes, in order) to the end of each added device's data area, with a 512-byte
//! header before it and after it, and on assembly writes it back in the new shape and moves
//! `reshape_position` past it. The kernel refuses to start such an array otherwise ("reshape
//! position too early for auto-recovery").
//!
//! Placement on a device (`reshape_prepare_fdlist`, `grow_backup`, `Grow_restart`), in
//! sectors: the data at `devstart = data_offset + component_size - 8 - length`, a copy of the
//! header 4 KiB before it, and the header itself right after it, at
//! `data_offset + component_size - 8`, where `Grow_restart` looks first.
//!
//! The header is little-endian. Its checksums are mdadm's `bsb_csum`, which sums the first
//! byte of the buffer over and over rather than each byte in turn (so it depends only on the
//! magic's first byte and the length): kept as mdadm computes it, since mdadm checks it.

use crate::bytes::{array, le_u32, le_u64, put_u32, put_u64};

/// Bytes of the header.
pub const HEADER_BYTES: usize = 512;
/// The magic of a header with one section.
pub const MAGIC_ONE: &[u8; 16] = b"md_backup_data-1";
/// The magic of a header with two sections.
pub const MAGIC_TWO: &[u8; 16] = b"md_backup_data-2";
/// Sectors from the header's place back to the end of the backed-up data (the header's own 4
/// KiB): the header sits at `data_offset + component_size - TRAILER_SECTORS`.
pub const TRAILER_SECTORS: u64 = 8;

const OFF_UUID: usize = 16;
const OFF_MTIME: usize = 32;
const OFF_DEVSTART: usize = 40;
const OFF_ARRAYSTART: usize = 48;
const OFF_LENGTH: usize = 56;
const OFF_CSUM: usize = 64;
const OFF_DEVSTART2: usize = 72;
const OFF_ARRAYSTART2: usize = 80;
const OFF_LENGTH2: usize = 88;
const OFF_CSUM2: usize = 96;

/// Why bytes are not a backup header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackupError {
    #[error("a backup header is {HEADER_BYTES} bytes; {0} given")]
    Short(usize),
    #[error("no backup header (magic is not md_backup_data-1 or -2)")]
    Magic,
    #[error("the backup header's checksum is wrong (torn or stale)")]
    Checksum,
    #[error("the backup header's second checksum is wrong (torn or stale)")]
    SecondChecksum,
}

/// A backup header, in sectors. The first section is `length` sectors of the array from
/// `arraystart`, held on the device at `devstart`; a header with two sections (magic `-2`)
/// holds `length2` more from `arraystart2`, at `devstart2` sectors past `devstart`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackupHeader {
    pub set_uuid: [u8; 16],
    /// When it was written (Unix seconds); mdadm takes it only near the superblocks' `utime`.
    pub mtime: u64,
    pub devstart: u64,
    pub arraystart: u64,
    pub length: u64,
    /// Magic `-2`: the second section is in use.
    pub two_sections: bool,
    pub devstart2: u64,
    pub arraystart2: u64,
    pub length2: u64,
}

/// mdadm's `bsb_csum` over `len` bytes of `buf`: the first byte (a C `char`, signed), added
/// after a shift by 3, `len` times, in 32-bit wrapping arithmetic.
fn bsb_csum(buf: &[u8], len: usize) -> u32 {
    let first = i32::from(buf[0] as i8);
    (0..len).fold(0i32, |csum, _| csum.wrapping_shl(3).wrapping_add(first)) as u32
}

impl BackupHeader {
    /// The array sectors the backup holds, as one range (mdadm's `lo`/`hi` in `Grow_restart`):
    /// none when both sections are empty.
    pub fn covers(&self) -> Option<std::ops::Range<u64>> {
        let first = (self.length > 0).then(|| self.arraystart..self.arraystart + self.length);
        let second = (self.two_sections && self.length2 > 0).then(|| self.arraystart2..self.arraystart2 + self.length2);
        match (first, second) {
            (Some(a), Some(b)) => Some(a.start.min(b.start)..a.end.max(b.end)),
            (a, b) => a.or(b),
        }
    }

    /// The header's bytes, checksums included.
    pub fn to_bytes(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[..16].copy_from_slice(if self.two_sections { MAGIC_TWO } else { MAGIC_ONE });
        b[OFF_UUID..OFF_UUID + 16].copy_from_slice(&self.set_uuid);
        put_u64(&mut b, OFF_MTIME, self.mtime);
        put_u64(&mut b, OFF_DEVSTART, self.devstart);
        put_u64(&mut b, OFF_ARRAYSTART, self.arraystart);
        put_u64(&mut b, OFF_LENGTH, self.length);
        put_u64(&mut b, OFF_DEVSTART2, self.devstart2);
        put_u64(&mut b, OFF_ARRAYSTART2, self.arraystart2);
        put_u64(&mut b, OFF_LENGTH2, self.length2);
        let csum = bsb_csum(&b, OFF_CSUM);
        put_u32(&mut b, OFF_CSUM, csum);
        if self.two_sections {
            let csum2 = bsb_csum(&b, OFF_CSUM2);
            put_u32(&mut b, OFF_CSUM2, csum2);
        }
        b
    }

    /// Parse a header, as `Grow_restart` checks it: its magic and its checksums.
    pub fn parse(bytes: &[u8]) -> Result<BackupHeader, BackupError> {
        if bytes.len() < HEADER_BYTES {
            return Err(BackupError::Short(bytes.len()));
        }
        let two_sections = match &bytes[..16] {
            m if m == MAGIC_ONE => false,
            m if m == MAGIC_TWO => true,
            _ => return Err(BackupError::Magic),
        };
        if le_u32(bytes, OFF_CSUM) != bsb_csum(bytes, OFF_CSUM) {
            return Err(BackupError::Checksum);
        }
        if two_sections && le_u32(bytes, OFF_CSUM2) != bsb_csum(bytes, OFF_CSUM2) {
            return Err(BackupError::SecondChecksum);
        }
        Ok(BackupHeader {
            set_uuid: array(bytes, OFF_UUID),
            mtime: le_u64(bytes, OFF_MTIME),
            devstart: le_u64(bytes, OFF_DEVSTART),
            arraystart: le_u64(bytes, OFF_ARRAYSTART),
            length: le_u64(bytes, OFF_LENGTH),
            two_sections,
            devstart2: le_u64(bytes, OFF_DEVSTART2),
            arraystart2: le_u64(bytes, OFF_ARRAYSTART2),
            length2: le_u64(bytes, OFF_LENGTH2),
        })
    }

    /// The bytes `Grow_restart` compares between the header after the data and its copy
    /// before it: up to `pad1` for one section, up to `pad` (both checksums) for two.
    pub fn compared_bytes(&self) -> usize {
        if self.two_sections {
            OFF_CSUM2 + 4
        } else {
            OFF_CSUM + 4
        }
    }
}

/// The sector where a device's backup header is (after the backed-up data): the last 4 KiB of
/// the part of its data area the array uses.
pub fn header_sector(data_offset: u64, component_size: u64) -> Option<u64> {
    (data_offset + component_size).checked_sub(TRAILER_SECTORS)
}

/// The sector where `length` sectors of backed-up data start on a device, so that they end
/// where the header after them is (mdadm's `offsets[d]` in `reshape_prepare_fdlist`).
pub fn data_sector(data_offset: u64, component_size: u64, length: u64) -> Option<u64> {
    header_sector(data_offset, component_size)?.checked_sub(length)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> BackupHeader {
        BackupHeader {
            set_uuid: *b"0123456789abcdef",
            mtime: 1_790_000_000,
            devstart: 1_000,
            arraystart: 0,
            length: 768,
            two_sections: false,
            devstart2: 768,
            arraystart2: 0,
            length2: 0,
        }
    }

    #[test]
    fn the_layout_is_mdadms() {
        let b = sample().to_bytes();
        assert_eq!(&b[..16], b"md_backup_data-1");
        assert_eq!(&b[16..32], b"0123456789abcdef");
        assert_eq!(u64::from_le_bytes(b[40..48].try_into().unwrap()), 1_000);
        assert_eq!(u64::from_le_bytes(b[56..64].try_into().unwrap()), 768);
        assert_eq!(u64::from_le_bytes(b[72..80].try_into().unwrap()), 768);
        // bsb_csum: 'm' (109) shifted in 64 times; only the last 11 additions survive the
        // shifts out of 32 bits, whatever the rest of the header holds.
        let mut expect = 0i32;
        for _ in 0..64 {
            expect = expect.wrapping_shl(3).wrapping_add(109);
        }
        assert_eq!(u32::from_le_bytes(b[64..68].try_into().unwrap()), expect as u32);
        assert_eq!(&b[96..100], &[0, 0, 0, 0], "no second checksum on a one-section header");
        assert!(b[100..].iter().all(|&x| x == 0));
    }

    #[test]
    fn headers_round_trip_and_torn_ones_are_refused() {
        let one = sample();
        assert_eq!(BackupHeader::parse(&one.to_bytes()), Ok(one));
        let two = BackupHeader { two_sections: true, arraystart2: 768, length2: 768, ..one };
        assert_eq!(BackupHeader::parse(&two.to_bytes()), Ok(two));
        assert_eq!(two.covers(), Some(0..1536));
        assert_eq!(BackupHeader { length: 0, ..one }.covers(), None);

        let mut bad = one.to_bytes();
        bad[15] = b'3';
        assert_eq!(BackupHeader::parse(&bad), Err(BackupError::Magic));
        let mut bad = one.to_bytes();
        bad[65] ^= 1;
        assert_eq!(BackupHeader::parse(&bad), Err(BackupError::Checksum));
        let mut bad = two.to_bytes();
        bad[97] ^= 1;
        assert_eq!(BackupHeader::parse(&bad), Err(BackupError::SecondChecksum));
        assert_eq!(BackupHeader::parse(&[0u8; 100]), Err(BackupError::Short(100)));
    }

    #[test]
    fn the_data_ends_where_the_header_after_it_is() {
        assert_eq!(header_sector(0, 2048), Some(2040));
        assert_eq!(data_sector(0, 2048, 768), Some(1272));
        assert_eq!(data_sector(2048, 4096, 768), Some(2048 + 4096 - 8 - 768));
        assert_eq!(data_sector(0, 100, 768), None);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1100)) {
            let _ = BackupHeader::parse(&bytes);
        }

        #[test]
        fn any_header_round_trips(
            uuid in any::<[u8; 16]>(), mtime in any::<u64>(), devstart in any::<u64>(),
            arraystart in any::<u64>(), length in any::<u64>(), two in any::<bool>(),
            devstart2 in any::<u64>(), arraystart2 in any::<u64>(), length2 in any::<u64>(),
        ) {
            let h = BackupHeader { set_uuid: uuid, mtime, devstart, arraystart, length, two_sections: two, devstart2, arraystart2, length2 };
            prop_assert_eq!(BackupHeader::parse(&h.to_bytes()), Ok(h));
        }
    }
}
