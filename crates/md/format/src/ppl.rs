//! md's Partial Parity Log (PPL) header (`struct ppl_header` in the kernel's md_p.h), the on-disk
//! record raid5 uses to close the write hole without a bitmap or a journal.
//!
//! Every member holds a PPL area (its place is in the superblock: [`crate::Superblock1::ppl`]).
//! md writes there, before each stripe update whose parity lives on that member, a 4 KiB
//! header listing the stripes being written ([`PplEntry`]) followed by their partial parity:
//! the XOR of the data chunks the write does not change. After a crash, parity of the listed
//! stripes is recomputed from the written data and the partial parity
//! (`drivers/md/raid5-ppl.c`: `ppl_recover_entry`).
//!
//! Layout of the 4096-byte header, all little-endian:
//!
//! | bytes      | field                                                  |
//! |------------|--------------------------------------------------------|
//! | 0..512     | reserved, filled with 0xff                             |
//! | 512..516   | signature: `~crc32c(~0, array uuid)` for native md     |
//! | 516..520   | padding (0)                                            |
//! | 520..528   | generation: sequence number of this log write          |
//! | 528..532   | entries_count (at most [`MAX_ENTRIES`])                |
//! | 532..536   | checksum: `~crc32c(~0, header with this field 0)`      |
//! | 536..4088  | 148 entries of 24 bytes (unused ones are zero)         |
//! | 4088..4096 | unused (0)                                             |
//!
//! An entry: `data_sector` (u64, first array sector written, in 512-byte sectors for native
//! metadata), `pp_size` (u32, bytes of partial parity following the header for this entry, 0
//! for a full-stripe write), `data_size` (u32, bytes of data written), `parity_disk` (u32, the
//! raid slot holding parity), `checksum` (u32, `~crc32c(~0, partial parity)`).
//!
//! All crc32c values here are the standard CRC-32C (Castagnoli) of the bytes: the kernel's
//! `~crc32c_le(~0, ...)` is the initial and final inversion that the standard form includes.
use crate::bytes::{le_u32, le_u64, put_u32, put_u64};
use crate::FormatError;

/// Bytes of a PPL header (`PPL_HEADER_SIZE`).
pub const HEADER_BYTES: usize = 4096;
/// Entries that fit in a header (`PPL_HDR_MAX_ENTRIES`).
pub const MAX_ENTRIES: usize = 148;
/// Bytes at the start of the header that md fills with 0xff (`PPL_HDR_RESERVED`).
pub const RESERVED_BYTES: usize = 512;
/// Bytes of one entry (`struct ppl_header_entry`).
pub const ENTRY_BYTES: usize = 24;

const SIGNATURE_AT: usize = RESERVED_BYTES;
const PADDING_AT: usize = RESERVED_BYTES + 4;
const GENERATION_AT: usize = RESERVED_BYTES + 8;
const COUNT_AT: usize = RESERVED_BYTES + 16;
const CHECKSUM_AT: usize = RESERVED_BYTES + 20;
const ENTRIES_AT: usize = RESERVED_BYTES + 24;

// md_p.h: PPL_HDR_MAX_ENTRIES = PPL_HDR_ENTRY_SPACE / 24, PPL_HDR_ENTRY_SPACE = 4096 - 512 - 4*4 - 8.
const _: () = assert!((HEADER_BYTES - RESERVED_BYTES - 4 * 4 - 8) / ENTRY_BYTES == MAX_ENTRIES);
const _: () = assert!(ENTRIES_AT + MAX_ENTRIES * ENTRY_BYTES <= HEADER_BYTES);

/// One logged write (`struct ppl_header_entry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PplEntry {
    /// First array sector of the modified data (512-byte sectors for native metadata).
    pub data_sector: u64,
    /// Bytes of partial parity stored for this entry after the header (0: full-stripe write).
    pub pp_size: u32,
    /// Bytes of data written by the stripes of this entry (over all modified data disks).
    pub data_size: u32,
    /// Raid slot of the stripe's parity.
    pub parity_disk: u32,
    /// [`pp_checksum`] of this entry's partial parity.
    pub checksum: u32,
}

/// A PPL header (`struct ppl_header`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PplHeader {
    /// Array identifier: [`signature`] of the array UUID for native metadata.
    pub signature: u32,
    /// Sequence number of the log write; md's latest header has the highest.
    pub generation: u64,
    /// The logged writes, at most [`MAX_ENTRIES`].
    pub entries: Vec<PplEntry>,
}

impl PplHeader {
    /// Parse and verify (length, header checksum, entries_count <= MAX_ENTRIES). Errors are
    /// FormatError variants with the stored and computed values.
    pub fn parse(bytes: &[u8]) -> Result<PplHeader, FormatError> {
        if bytes.len() < HEADER_BYTES {
            return Err(FormatError::Truncated { needed: HEADER_BYTES, got: bytes.len() });
        }
        let bytes = &bytes[..HEADER_BYTES];
        let stored = le_u32(bytes, CHECKSUM_AT);
        let computed = header_checksum(bytes);
        if stored != computed {
            return Err(FormatError::BadPplChecksum { stored, computed });
        }
        let count = le_u32(bytes, COUNT_AT);
        if count as usize > MAX_ENTRIES {
            return Err(FormatError::BadPplEntryCount { count, max: MAX_ENTRIES as u32 });
        }
        let entries = (0..count as usize)
            .map(|i| {
                let at = ENTRIES_AT + i * ENTRY_BYTES;
                PplEntry {
                    data_sector: le_u64(bytes, at),
                    pp_size: le_u32(bytes, at + 8),
                    data_size: le_u32(bytes, at + 12),
                    parity_disk: le_u32(bytes, at + 16),
                    checksum: le_u32(bytes, at + 20),
                }
            })
            .collect();
        Ok(PplHeader { signature: le_u32(bytes, SIGNATURE_AT), generation: le_u64(bytes, GENERATION_AT), entries })
    }

    /// The 4096 bytes md writes: reserved 0xff, padding 0, unused entries zero, checksum computed.
    ///
    /// At most [`MAX_ENTRIES`] entries are written (and counted); a header never holds more.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_BYTES];
        b[..RESERVED_BYTES].fill(0xff);
        put_u32(&mut b, SIGNATURE_AT, self.signature);
        put_u32(&mut b, PADDING_AT, 0);
        put_u64(&mut b, GENERATION_AT, self.generation);
        let entries = &self.entries[..self.entries.len().min(MAX_ENTRIES)];
        put_u32(&mut b, COUNT_AT, entries.len() as u32);
        for (i, e) in entries.iter().enumerate() {
            let at = ENTRIES_AT + i * ENTRY_BYTES;
            put_u64(&mut b, at, e.data_sector);
            put_u32(&mut b, at + 8, e.pp_size);
            put_u32(&mut b, at + 12, e.data_size);
            put_u32(&mut b, at + 16, e.parity_disk);
            put_u32(&mut b, at + 20, e.checksum);
        }
        let csum = header_checksum(&b);
        put_u32(&mut b, CHECKSUM_AT, csum);
        b
    }

    /// What md writes when it starts an array: no entries, generation 0.
    pub fn empty(signature: u32) -> PplHeader {
        PplHeader { signature, generation: 0, entries: Vec::new() }
    }

    /// Bytes of partial parity that follow this header (the sum of the entries' `pp_size`).
    pub fn pp_bytes(&self) -> u64 {
        self.entries.iter().map(|e| u64::from(e.pp_size)).sum()
    }
}

/// md's PPL signature for a native-metadata array.
pub fn signature(array_uuid: &[u8; 16]) -> u32 {
    crc32c::crc32c(array_uuid)
}

/// The value md stores in `PplEntry::checksum` for these partial-parity bytes.
pub fn pp_checksum(pp: &[u8]) -> u32 {
    crc32c::crc32c(pp)
}

/// The header checksum of a 4096-byte header: the CRC-32C of the header with the checksum
/// field counted as zero.
fn header_checksum(header: &[u8]) -> u32 {
    let before = crc32c::crc32c(&header[..CHECKSUM_AT]);
    let zeroed = crc32c::crc32c_append(before, &[0; 4]);
    crc32c::crc32c_append(zeroed, &header[CHECKSUM_AT + 4..HEADER_BYTES])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> PplHeader {
        PplHeader {
            signature: 0xc790_5c5a,
            generation: 208,
            entries: vec![
                PplEntry { data_sector: 12000, pp_size: 4096, data_size: 4096, parity_disk: 0, checksum: 0x131e_8fa2 },
                PplEntry { data_sector: 101_120, pp_size: 0, data_size: 196_608, parity_disk: 0, checksum: 0 },
            ],
        }
    }

    #[test]
    fn layout_matches_md_p_h() {
        let h = sample();
        let b = h.to_bytes();
        assert_eq!(b.len(), HEADER_BYTES);
        assert!(b[..512].iter().all(|&x| x == 0xff));
        assert_eq!(le_u32(&b, 512), h.signature);
        assert_eq!(le_u32(&b, 516), 0);
        assert_eq!(le_u64(&b, 520), 208);
        assert_eq!(le_u32(&b, 528), 2);
        assert_eq!(le_u64(&b, 536), 12000);
        assert_eq!(le_u32(&b, 536 + 8), 4096);
        assert_eq!(le_u64(&b, 560), 101_120);
        assert_eq!(le_u32(&b, 560 + 12), 196_608);
        assert!(b[584..].iter().all(|&x| x == 0), "unused entries and the tail are zero");
        assert_eq!(PplHeader::parse(&b).unwrap(), h);
    }

    #[test]
    fn crc32c_is_the_castagnoli_crc() {
        // The CRC-32C check value (RFC 3720 / the "123456789" test vector).
        assert_eq!(pp_checksum(b"123456789"), 0xe306_9283);
        // A full-stripe entry has no partial parity: md's ~crc of nothing is 0.
        assert_eq!(pp_checksum(&[]), 0);
    }

    #[test]
    fn signature_of_an_oracle_array() {
        // The array made by scripts/oracle/make-ppl-samples.sh, case raid5-4-ppl-1.2: md wrote
        // headers with this signature (crates/md/format/tests/ppl.rs checks the real bytes).
        let uuid = crate::uuid::parse_md("6d646f72:61636c65:00000000:000003eb").unwrap();
        assert_eq!(signature(&uuid), 0xc790_5c5a);
    }

    #[test]
    fn empty_header_is_what_md_writes_at_start() {
        let h = PplHeader::empty(0x1234_5678);
        assert_eq!(h.generation, 0);
        assert!(h.entries.is_empty());
        let b = h.to_bytes();
        assert_eq!(le_u32(&b, 528), 0);
        assert!(b[536..].iter().all(|&x| x == 0));
        assert_eq!(PplHeader::parse(&b).unwrap(), h);
        assert_eq!(h.pp_bytes(), 0);
        assert_eq!(sample().pp_bytes(), 4096);
    }

    #[test]
    fn every_corrupted_byte_is_caught() {
        let good = sample().to_bytes();
        for at in [0, 511, 512, 516, 520, 528, 533, 536, 560, 1000, 4095] {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            match PplHeader::parse(&bad) {
                Err(FormatError::BadPplChecksum { stored, computed }) => {
                    assert_ne!(stored, computed, "byte {at}");
                    if !(532..536).contains(&at) {
                        assert_eq!(stored, le_u32(&good, CHECKSUM_AT), "byte {at}: stored value reported");
                    }
                }
                other => panic!("byte {at}: corruption not caught: {other:?}"),
            }
        }
    }

    #[test]
    fn short_input_and_too_many_entries_are_refused() {
        let b = sample().to_bytes();
        assert_eq!(PplHeader::parse(&b[..4095]), Err(FormatError::Truncated { needed: 4096, got: 4095 }));
        // A count beyond the table, with a valid checksum.
        let mut bad = b.clone();
        put_u32(&mut bad, COUNT_AT, 149);
        let csum = header_checksum(&bad);
        put_u32(&mut bad, CHECKSUM_AT, csum);
        assert_eq!(PplHeader::parse(&bad), Err(FormatError::BadPplEntryCount { count: 149, max: 148 }));
        // Longer input: only the first 4096 bytes are the header.
        let mut long = b.clone();
        long.extend_from_slice(&[0xab; 100]);
        assert_eq!(PplHeader::parse(&long).unwrap(), sample());
    }

    fn entry() -> impl Strategy<Value = PplEntry> {
        (any::<u64>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
            |(data_sector, pp_size, data_size, parity_disk, checksum)| PplEntry {
                data_sector,
                pp_size,
                data_size,
                parity_disk,
                checksum,
            },
        )
    }

    proptest! {
        #[test]
        fn headers_round_trip(
            signature in any::<u32>(),
            generation in any::<u64>(),
            entries in proptest::collection::vec(entry(), 0..=MAX_ENTRIES),
        ) {
            let h = PplHeader { signature, generation, entries };
            let b = h.to_bytes();
            prop_assert_eq!(b.len(), HEADER_BYTES);
            let back = PplHeader::parse(&b).unwrap();
            prop_assert_eq!(&back, &h);
            prop_assert_eq!(back.to_bytes(), b);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
            let _ = PplHeader::parse(&bytes);
        }
    }
}
