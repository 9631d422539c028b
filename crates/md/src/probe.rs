//! Finding md's superblock on a device, without doing any I/O.
//!
//! md keeps its superblock in one of four places depending on the metadata version (1.2: 4 KiB
//! from the start, 1.1: at the start, 1.0: 8-12 KiB from the end, 0.90: 64-128 KiB from the end).
//! We look in all of them. Finding md's magic and then failing to parse is an error (a torn or
//! corrupt superblock must be reported, not mistaken for a blank device); finding no magic at all
//! means "no superblock".
//!
//! The caller supplies the device's size and a reader, `read_at(offset, len)`, giving `len` bytes
//! of the device at byte `offset`; a driver adapts its own device type to that (the member
//! devices of `uraid-device`, an image in memory in tests).

use std::fmt;

use uraid_md_format::{FindError, FormatError, MetadataVersion, Superblock, MD_SB_MAGIC, SECTOR};

/// A superblock found on a device.
#[derive(Debug, Clone)]
pub struct Probed {
    pub superblock: Superblock,
    /// Byte offset it was read from.
    pub offset: u64,
}

/// Look for md's superblock on a device of `device_bytes` bytes. `Ok(None)` when there is none.
///
/// When more than one location holds a valid superblock (an old array's leftovers), the one
/// updated last wins, as mdadm's `guess_super` prefers the newest (see [`Superblock::find`]).
pub fn probe<E, F>(device_bytes: u64, read_at: F) -> Result<Option<Probed>, FindError<E>>
where
    F: FnMut(u64, usize) -> Result<Vec<u8>, E>,
{
    Ok(Superblock::find(device_bytes, read_at)?
        .map(|superblock| Probed { offset: superblock.byte_offset(), superblock }))
}

/// Every superblock location on a device of `device_bytes` bytes that starts with md's magic,
/// valid or not: what a create with `--force` must wipe so no leftover is ever taken for a member.
pub fn magic_offsets<E, F>(device_bytes: u64, mut read_at: F) -> Result<Vec<u64>, E>
where
    F: FnMut(u64, usize) -> Result<Vec<u8>, E>,
{
    let mut out = Vec::new();
    for version in MetadataVersion::all() {
        let Some(offset) = version.superblock_offset(device_bytes) else { continue };
        let magic = read_at(offset, 4)?;
        let has_magic = magic.get(..4).is_some_and(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]) == MD_SB_MAGIC);
        if has_magic && !out.contains(&offset) {
            out.push(offset);
        }
    }
    Ok(out)
}

/// An md superblock at its version's location, as `mdadm --zero-superblock` finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnDevice {
    pub version: MetadataVersion,
    /// Byte offset of the superblock.
    pub offset: u64,
    /// Bytes that erasing it overwrites with zeros: what mdadm writes over it (a zeroed
    /// superblock: the 4 KiB of a 0.90 one; one sector, its fixed part, of a 1.x one, whose
    /// role table is no longer anyone's once the magic is gone).
    pub erase_len: usize,
    /// Why it does not parse, when it holds md's magic and version but is damaged.
    pub damage: Option<FormatError>,
}

/// Every md superblock on a device of `device_bytes` bytes, one per version's location (a
/// device can hold the leftovers of arrays of other versions): those that parse, and those
/// with md's magic and the location's major version that do not (`damage`). A location with
/// md's magic and another major version holds no superblock of its own version and is left
/// out (a 1.0 superblock read at the 0.90 location, say).
pub fn superblocks_on_device<E, F>(device_bytes: u64, mut read_at: F) -> Result<Vec<OnDevice>, E>
where
    F: FnMut(u64, usize) -> Result<Vec<u8>, E>,
{
    let mut out = Vec::new();
    for version in MetadataVersion::all() {
        let Some(offset) = version.superblock_offset(device_bytes) else { continue };
        let len = (device_bytes - offset).min(4096) as usize;
        let bytes = read_at(offset, len)?;
        let word = |at: usize| bytes.get(at..at + 4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
        if word(0) != Some(MD_SB_MAGIC) || word(4) != Some(version.major()) {
            continue;
        }
        let damage = Superblock::parse(version, &bytes, device_bytes).err();
        let erase_len = match version {
            MetadataVersion::V0_90 => uraid_md_format::sb090::SB_BYTES,
            _ => SECTOR as usize,
        };
        out.push(OnDevice { version, offset, erase_len: erase_len.min(len), damage });
    }
    Ok(out)
}

/// Why a device holds no usable superblock, for "not an md member" messages.
#[derive(Debug, Clone)]
pub struct NoSuperblock {
    pub device: String,
    pub size: u64,
}

impl fmt::Display for NoSuperblock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.size < 64 * 1024 {
            write!(f, "{}: no md superblock (device is only {} bytes: truncated?)", self.device, self.size)
        } else {
            write!(f, "{}: no md superblock found (tried 1.2, 1.1, 1.0 and 0.90 locations)", self.device)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uraid_md_format::create::{plan, CreateSpec};

    const DEVICE_BYTES: u64 = 4 << 20;

    /// A member image of a new raid1 with `version` metadata, as mdadm would write it.
    fn image(version: MetadataVersion) -> Vec<u8> {
        let spec = CreateSpec {
            version,
            level: 1,
            layout: -1,
            chunk_sectors: 0,
            raid_disks: 2,
            array_uuid: [7; 16],
            name: "test:md".into(),
            ctime: 1_700_000_000,
            component_sectors: None,
            bitmap: false,
            data_offset: None,
            bitmap_chunk: None,
        };
        let p = plan(&spec, &[DEVICE_BYTES; 2], &[[1; 16], [2; 16]]).expect("plan");
        let mut img = vec![0u8; DEVICE_BYTES as usize];
        let sb = p.superblocks[0].to_bytes();
        let at = p.members[0].super_byte_offset as usize;
        img[at..at + sb.len()].copy_from_slice(&sb);
        img
    }

    fn reader(img: &[u8]) -> impl FnMut(u64, usize) -> Result<Vec<u8>, ()> + '_ {
        |offset, len| Ok(img[offset as usize..offset as usize + len].to_vec())
    }

    #[test]
    fn finds_each_version_where_md_puts_it() {
        for version in [MetadataVersion::V1_0, MetadataVersion::V1_1, MetadataVersion::V1_2] {
            let img = image(version);
            let found = probe(DEVICE_BYTES, reader(&img)).expect("readable").expect("a superblock");
            assert_eq!(found.superblock.version(), version);
            assert_eq!(Some(found.offset), version.superblock_offset(DEVICE_BYTES), "{version}");
            assert_eq!(magic_offsets(DEVICE_BYTES, reader(&img)), Ok(vec![found.offset]), "{version}");
        }
    }

    #[test]
    fn a_blank_device_has_none() {
        let img = vec![0u8; DEVICE_BYTES as usize];
        assert!(probe(DEVICE_BYTES, reader(&img)).expect("readable").is_none());
        assert_eq!(magic_offsets(DEVICE_BYTES, reader(&img)), Ok(vec![]));
    }

    #[test]
    fn a_damaged_superblock_is_an_error_and_its_magic_is_still_found() {
        let mut img = image(MetadataVersion::V1_2);
        let at = MetadataVersion::V1_2.superblock_offset(DEVICE_BYTES).unwrap();
        img[at as usize + 40] ^= 0x5a; // a byte of the name: only the checksum covers it
        match probe(DEVICE_BYTES, reader(&img)) {
            Err(FindError::Format(FormatError::BadChecksum { .. })) => {}
            other => panic!("expected a checksum error, got {other:?}"),
        }
        assert_eq!(magic_offsets(DEVICE_BYTES, reader(&img)), Ok(vec![at]));
    }

    #[test]
    fn read_errors_are_passed_on() {
        let failing = |_: u64, _: usize| Err::<Vec<u8>, _>("unreadable");
        assert!(matches!(probe(DEVICE_BYTES, failing), Err(FindError::Read { source: "unreadable", .. })));
        assert_eq!(magic_offsets(DEVICE_BYTES, failing), Err("unreadable"));
    }

    #[test]
    fn a_bad_sector_where_other_versions_would_live_does_not_hide_a_1_2_superblock() {
        // The 1.0 and 0.90 locations lie in a 1.2 member's data area, near its end.
        let img = image(MetadataVersion::V1_2);
        let at = MetadataVersion::V1_2.superblock_offset(DEVICE_BYTES).unwrap();
        let bad_end = |offset: u64, len: usize| {
            if offset == at {
                Ok(img[offset as usize..offset as usize + len].to_vec())
            } else {
                Err("medium error")
            }
        };
        let found = probe(DEVICE_BYTES, bad_end).expect("the 1.2 superblock is readable").expect("found");
        assert_eq!(found.superblock.version(), MetadataVersion::V1_2);
    }

    #[test]
    fn a_damaged_superblock_is_reported_before_an_unreadable_location() {
        let mut img = image(MetadataVersion::V1_2);
        let at = MetadataVersion::V1_2.superblock_offset(DEVICE_BYTES).unwrap();
        img[at as usize + 40] ^= 0x5a;
        let bad_end = |offset: u64, len: usize| {
            if offset == at {
                Ok(img[offset as usize..offset as usize + len].to_vec())
            } else {
                Err("medium error")
            }
        };
        match probe(DEVICE_BYTES, bad_end) {
            Err(FindError::Format(FormatError::BadChecksum { .. })) => {}
            other => panic!("expected the damaged superblock, got {other:?}"),
        }
    }

    #[test]
    fn every_version_left_on_a_device_is_found_for_erasing() {
        // A 1.2 member that was a 1.0 member, and a 0.90 one before that: all three are there.
        let mut img = image(MetadataVersion::V1_2);
        let mut older = Vec::new();
        for version in [MetadataVersion::V0_90, MetadataVersion::V1_0] {
            let at = version.superblock_offset(DEVICE_BYTES).unwrap() as usize;
            img[at..at + 4096].copy_from_slice(&image(version)[at..at + 4096]);
            older.push(at as u64);
        }
        let found = superblocks_on_device(DEVICE_BYTES, reader(&img)).unwrap();
        let kinds: Vec<(MetadataVersion, u64, usize, bool)> =
            found.iter().map(|f| (f.version, f.offset, f.erase_len, f.damage.is_some())).collect();
        assert_eq!(
            kinds,
            [
                (MetadataVersion::V0_90, older[0], 4096, false),
                (MetadataVersion::V1_0, older[1], 512, false),
                (MetadataVersion::V1_2, 4096, 512, false)
            ]
        );
        // Damaged: still found, with why.
        img[4096 + 40] ^= 1;
        let found = superblocks_on_device(DEVICE_BYTES, reader(&img)).unwrap();
        assert!(matches!(found[2].damage, Some(FormatError::BadChecksum { .. })), "{found:?}");
        // Blank: nothing.
        assert!(superblocks_on_device(DEVICE_BYTES, reader(&vec![0u8; DEVICE_BYTES as usize])).unwrap().is_empty());
        assert_eq!(superblocks_on_device(DEVICE_BYTES, |_, _| Err::<Vec<u8>, _>("eio")), Err("eio"));
    }

    #[test]
    fn no_superblock_says_why() {
        let small = NoSuperblock { device: "d0".into(), size: 4096 };
        assert_eq!(small.to_string(), "d0: no md superblock (device is only 4096 bytes: truncated?)");
        let big = NoSuperblock { device: "d0".into(), size: DEVICE_BYTES };
        assert_eq!(big.to_string(), "d0: no md superblock found (tried 1.2, 1.1, 1.0 and 0.90 locations)");
    }
}
