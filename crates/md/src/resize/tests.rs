use uraid_md_format::bitmap::{self, BitmapSuper};
use uraid_md_format::create::{self, CreateSpec};
use uraid_md_format::{MetadataVersion, Superblock, MAX_SECTOR};

use super::*;
use crate::bitmap_change::{self, BitmapChangeError, BitmapNow};
use crate::offline_change::StoppedMember;

const MIB: u64 = 1 << 20;

fn members(
    version: MetadataVersion,
    level: i32,
    layout: i32,
    n: usize,
    size: Option<u64>,
    bitmap: bool,
) -> Vec<StoppedMember> {
    members_of(16 * MIB, version, level, layout, n, size, bitmap)
}

fn members_of(
    device_bytes: u64,
    version: MetadataVersion,
    level: i32,
    layout: i32,
    n: usize,
    size: Option<u64>,
    bitmap: bool,
) -> Vec<StoppedMember> {
    let spec = CreateSpec {
        version,
        level,
        layout,
        chunk_sectors: if level == 1 { 0 } else { 128 },
        raid_disks: n as u32,
        array_uuid: [7; 16],
        name: "h:grow".into(),
        ctime: 1_700_000_000,
        component_sectors: size,
        bitmap,
        data_offset: None,
        bitmap_chunk: if bitmap { Some(MIB) } else { None },
    };
    let made = create::plan(&spec, &vec![device_bytes; n], &vec![[1; 16]; n]).unwrap();
    made.superblocks
        .into_iter()
        .enumerate()
        .map(|(i, mut sb)| {
            sb.set_clean(true);
            StoppedMember { name: format!("d{i}"), superblock: sb, device_sectors: device_bytes / 512 }
        })
        .collect()
}

#[test]
fn max_takes_what_every_member_allows_and_resyncs_from_the_old_end() {
    let ms = members(MetadataVersion::V1_2, 5, -1, 3, Some(8192), false);
    let p = plan(&ms, None, SizeRequest::Max, false, 5).unwrap();
    let data_offset = ms[0].superblock.info().data_offset;
    let most = 16 * MIB / 512 - data_offset;
    assert_eq!((p.old_sectors, p.new_sectors), (8192, most / 128 * 128));
    assert_eq!(p.resync_from, Some(8192));
    let change = p.change.unwrap();
    for sb in &change.superblocks {
        let i = sb.info();
        assert_eq!((i.component_sectors, i.avail_sectors, i.resync_offset), (most / 128 * 128, most, 8192));
        assert_eq!(i.events, ms[0].superblock.info().events + 1);
    }
    // The same size again changes nothing; with --assume-clean nothing is owed.
    let same = plan(&ms, None, SizeRequest::Sectors(8192), false, 5).unwrap();
    assert!(same.change.is_none());
    let clean = plan(&ms, None, SizeRequest::Sectors(10240), true, 5).unwrap();
    assert_eq!(clean.resync_from, None);
    assert_eq!(clean.change.unwrap().superblocks[0].info().resync_offset, MAX_SECTOR);
}

#[test]
fn raid10_resyncs_in_array_sectors_and_rounds_as_calc_sectors() {
    let ms = members(MetadataVersion::V1_2, 10, 0x102, 3, Some(8192), false);
    let p = plan(&ms, None, SizeRequest::Sectors(12416), false, 5).unwrap();
    // 12416 sectors = 97 chunks: 97 * 3 / 2 = 145 array chunks, 290 copies over 3 members.
    assert_eq!(p.new_sectors, 290u64.div_ceil(3) * 128);
    assert_eq!(p.resync_from, Some(8192 / 128 * 3 / 2 * 128));
    let far = members(MetadataVersion::V1_2, 10, 0x201, 2, Some(8192), false);
    assert_eq!(plan(&far, None, SizeRequest::Max, false, 5).unwrap_err(), ResizeError::FarLayout);
}

#[test]
fn refusals_name_their_reason() {
    let raid0 = members(MetadataVersion::V1_2, 0, -1, 2, None, false);
    assert!(
        matches!(plan(&raid0, None, SizeRequest::Max, false, 5), Err(ResizeError::NoComponentSize(l)) if l == "raid0")
    );
    let ms = members(MetadataVersion::V1_2, 1, -1, 2, Some(8192), false);
    assert_eq!(
        plan(&ms, None, SizeRequest::Sectors(4096), false, 5).unwrap_err(),
        ResizeError::Shrink { from: 4096, to: 2048 }
    );
    let too_big = plan(&ms, None, SizeRequest::Sectors(64 * MIB / 512), false, 5).unwrap_err();
    assert!(
        matches!(too_big, ResizeError::NoRoom { ref device, wanted, .. } if device == "d0" && wanted == 65536),
        "{too_big:?}"
    );
}

#[test]
fn v090_records_the_resync_point_at_its_own_events() {
    let ms = members(MetadataVersion::V0_90, 1, -1, 2, Some(8192), false);
    let p = plan(&ms, None, SizeRequest::Max, false, 5).unwrap();
    let sb_start = ms[0].superblock.info().super_offset;
    assert_eq!(p.new_sectors, sb_start);
    for sb in &p.change.unwrap().superblocks {
        let i = sb.info();
        assert_eq!((i.component_sectors, i.resync_offset, i.state_clean), (sb_start, 8192, false));
        let Superblock::V090(sb0) = sb else { panic!() };
        assert_eq!((sb0.cp_events_lo, sb0.recovery_cp), (sb0.events_lo, 8192));
    }
}

#[test]
fn v090_stops_below_4_tib() {
    let ms = members_of(5 << 40, MetadataVersion::V0_90, 1, -1, 2, Some(8192), false);
    // super_90_load caps what a member gives at 4 TiB less 1 KiB: the most 0.90 can record.
    let p = plan(&ms, None, SizeRequest::Max, false, 5).unwrap();
    assert_eq!(p.new_sectors, (1 << 33) - 2);
    assert_eq!(p.change.unwrap().superblocks[0].info().component_sectors, (1 << 33) - 2);
    assert_eq!(
        plan(&ms, None, SizeRequest::Sectors(1 << 33), false, 5).unwrap_err(),
        ResizeError::TooLargeFor090(1 << 32)
    );
}

#[test]
fn v10_without_a_bitmap_reaches_up_to_its_bitmap_space() {
    let ms = members(MetadataVersion::V1_0, 1, -1, 2, Some(8192), false);
    let p = plan(&ms, None, SizeRequest::Max, false, 5).unwrap();
    let i = ms[0].superblock.info();
    assert_eq!(p.new_sectors, i.super_offset - 8 - 8);
}

fn bitmap_of(ms: &[StoppedMember], bits: Vec<u8>) -> BitmapNow {
    let i = ms[0].superblock.info();
    let mut header = BitmapSuper::new(i.array_uuid, i.component_sectors, MIB as u32);
    header.events = i.events;
    BitmapNow { header, bits }
}

#[test]
fn the_bitmap_follows_the_new_size() {
    let ms = members(MetadataVersion::V1_2, 1, -1, 2, Some(8192), true);
    // 4 MiB in 1 MiB chunks: chunk 1 dirty.
    let now = bitmap_of(&ms, vec![0b0010]);
    let p = plan(&ms, Some(&now), SizeRequest::Sectors(16384), false, 5).unwrap();
    let change = p.change.unwrap();
    let image = &change.areas[0][0].bytes;
    let header = BitmapSuper::parse(image).unwrap();
    // 4 KiB of room md does not know of: the space is what the bitmap took, one sector, and
    // 8 chunks of 1 MiB still fit it.
    assert_eq!((header.chunksize, header.sync_size, header.sectors_reserved), (MIB as u32, 16384, 1));
    let bits = &image[bitmap::HEADER_BYTES..];
    assert_eq!(bits[0], 0b1111_0010, "chunk 1 kept, chunks 4..8 (the new space) set");
    assert_eq!(header.events, ms[0].superblock.info().events + 1);
    assert!(!header.is_stale());
}

#[test]
fn a_bitmap_that_no_longer_fits_doubles_its_chunk() {
    let ms = members(MetadataVersion::V1_2, 1, -1, 2, Some(8192), true);
    let mut now = bitmap_of(&ms, vec![0b1000]);
    now.header.chunksize = 4096;
    now.header.sectors_reserved = 0;
    // 4 MiB in 4 KiB chunks: 1024 bits, 128 bytes + header: one sector of space, 2048 bits
    // beside the header. 32 MiB takes 16 KiB chunks to fit, and old chunk 3 is in new chunk 0.
    let (header, image) =
        bitmap_change::resize(&now, &ms[0].superblock, 8192, 65536, true, now.header.events, 9).unwrap();
    assert_eq!((header.chunksize, header.sectors_reserved), (16384, 1));
    assert_eq!(image.len(), 512);
    let bits = &image[bitmap::HEADER_BYTES..];
    assert_eq!(bits[0] & 1, 1);
    assert_eq!(bitmap::count_dirty(bits, header.chunks()), 1 + (2048 - 256));
}

#[test]
fn a_bitmap_is_added_where_mdadm_puts_it_and_removed() {
    for (version, offset) in [(MetadataVersion::V1_2, 8), (MetadataVersion::V1_0, -16), (MetadataVersion::V0_90, 8)] {
        let ms = members(version, 5, -1, 3, Some(8192), false);
        let change = bitmap_change::add(&ms, 8192, None, 5).unwrap();
        let i = change.superblocks[0].info();
        assert_eq!(i.bitmap_offset, Some(offset), "{version}");
        let area = &change.areas[0][0];
        assert_eq!(area.offset, (i.super_offset as i64 + i64::from(offset)) as u64 * 512, "{version}");
        let header = BitmapSuper::parse(&area.bytes).unwrap();
        assert_eq!((header.chunksize, header.sync_size, header.events), (64 << 20, 8192, 0), "{version}");
        assert_eq!(area.bytes[bitmap::HEADER_BYTES], 0xff, "every bit set, as mdadm writes them");
        let uuid = match &ms[0].superblock {
            Superblock::V090(sb0) => sb0.md_uuid(),
            Superblock::V1(sb1) => sb1.set_uuid,
        };
        assert_eq!(header.uuid, uuid, "the UUID md compares, {version}");
        let members_with: Vec<StoppedMember> = ms
            .iter()
            .zip(&change.superblocks)
            .map(|(m, sb)| StoppedMember { superblock: sb.clone(), ..m.clone() })
            .collect();
        assert_eq!(bitmap_change::add(&members_with, 8192, None, 5).unwrap_err(), BitmapChangeError::AlreadyPresent);
        let removed = bitmap_change::remove(&members_with, 6).unwrap();
        assert_eq!(removed.superblocks[0].info().bitmap_offset, None);
        assert_eq!(bitmap_change::remove(&ms, 6).unwrap_err(), BitmapChangeError::Absent);
    }
    let raid0 = members(MetadataVersion::V1_2, 0, -1, 2, None, false);
    assert!(matches!(bitmap_change::add(&raid0, 8192, None, 5), Err(BitmapChangeError::Level(_))));
    // A chunk too small for the 4 KiB a 1.2 member of this size has.
    let ms = members(MetadataVersion::V1_2, 1, -1, 2, None, false);
    assert!(matches!(bitmap_change::add(&ms, 400_000, Some(4096), 5), Err(BitmapChangeError::Chunk(_))));
}
