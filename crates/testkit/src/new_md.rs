//! Member images of a new md array, as `mdadm --create` lays them out (`uraid_md_format::create`),
//! for tests that need real superblocks on devices in memory.

use uraid_md_format::create::{plan, CreateSpec};
use uraid_md_format::{bitmap, MetadataVersion};

/// A new 1.2 array: every member holds zeros (consistent at every level) and its superblock,
/// and an internal bitmap with no bit set when it has one.
#[derive(Debug, Clone)]
pub struct NewMdArray {
    /// md's level: -1 linear, 0, 1, 4, 5, 6, 10.
    pub level: i32,
    pub members: usize,
    pub member_bytes: u64,
    /// 0: mdadm's default (none for raid1).
    pub chunk_sectors: u32,
    /// Recorded clean (else dirty: a resync owed).
    pub clean: bool,
    /// An internal write-intent bitmap with chunks of this many bytes.
    pub bitmap_chunk: Option<u64>,
    /// The metadata version (1.2 unless said).
    pub version: MetadataVersion,
}

impl NewMdArray {
    /// `members` members of `member_bytes` at `level`, clean, with mdadm's default chunk and no
    /// bitmap.
    pub fn new(level: i32, members: usize, member_bytes: u64) -> NewMdArray {
        NewMdArray {
            level,
            members,
            member_bytes,
            chunk_sectors: 0,
            clean: true,
            bitmap_chunk: None,
            version: MetadataVersion::V1_2,
        }
    }

    /// One image per member, in slot order.
    pub fn images(&self) -> Vec<Vec<u8>> {
        let spec = CreateSpec {
            version: self.version,
            level: self.level,
            layout: -1,
            chunk_sectors: self.chunk_sectors,
            raid_disks: self.members as u32,
            array_uuid: [7; 16],
            name: "test:0".into(),
            ctime: 1_700_000_000,
            component_sectors: None,
            bitmap: self.bitmap_chunk.is_some(),
            data_offset: None,
            bitmap_chunk: self.bitmap_chunk,
        };
        let uuids: Vec<[u8; 16]> = (0..self.members).map(|i| [i as u8 + 1; 16]).collect();
        let made = plan(&spec, &vec![self.member_bytes; self.members], &uuids).expect("create plan");
        (0..self.members)
            .map(|i| {
                let mut img = vec![0u8; self.member_bytes as usize];
                let mut put =
                    |at: u64, bytes: &[u8]| img[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
                if let (Some(mut image), Some((at, _))) = (made.bitmap_image(), made.members[i].bitmap) {
                    // Zeros are consistent: no region needs a resync, so no bit is set.
                    image[bitmap::HEADER_BYTES..].fill(0);
                    put(at, &image);
                }
                let mut sb = made.superblocks[i].clone();
                sb.set_clean(self.clean);
                put(made.members[i].super_byte_offset, &sb.to_bytes());
                img
            })
            .collect()
    }
}
