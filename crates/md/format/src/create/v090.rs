//! The superblocks of a new array with 0.90 metadata, as mdadm writes them (`super0.c`:
//! `validate_geometry0`, `avail_size0`, `init_super0`, `add_internal_bitmap0`,
//! `write_init_super0`) and as md's `super_90_sync` rewrites them once it runs the array.
//!
//! 0.90's limits, as mdadm enforces them:
//! - at most 27 devices, spares included (`MD_SB_DISKS`);
//! - the data starts at sector 0 and ends before the superblock, which sits 64-128 KiB from
//!   the end (64 KiB aligned): no `--data-offset`;
//! - `size` is a 32-bit count of KiB, so levels that use it (raid1 and up) can use at most
//!   4 TiB of each member (mdadm's `validate_geometry0` on Linux 3.1 and later; before, a
//!   kernel bug made it 2 TiB). Linear and raid0 use everything before the superblock;
//! - no raid0 layout can be recorded, so raid0 members must hold the same number of chunks
//!   (mdadm 4.2 refused every 0.90 raid0; later mdadm allows the single-zone ones, whose
//!   layout does not matter, and so does uraid);
//! - the internal bitmap follows the superblock 4 KiB after its start and must fit in the
//!   remaining 60 KiB, bits chosen as `add_internal_bitmap0` does.
//!
//! Descriptors are written the way md numbers them after it has run the array (the layout
//! every later superblock update keeps, see [`Superblock090::sync_descriptors`]): an active
//! device at its slot's descriptor, spares after the slots, a missing slot's descriptor removed
//! and faulty. mdadm's raid4/5 recovery trick changes nothing here: md gives the rebuilt device
//! its slot's descriptor once it is in sync.

use super::{
    bitmap_chunk, choose_size_kib, fail, round_to_chunk, CreatePlan, CreateSpec, MemberLayout, NewMember, Shape,
};
use crate::bitmap::{self, BitmapSuper};
use crate::sb090::{self, Superblock090};
use crate::{FormatError, Role, Superblock, SECTOR};

/// Sectors a level that records `size` may use on a 0.90 member: `size` is a 32-bit KiB count
/// (mdadm refuses sizes from 4 TiB up).
pub const MAX_SIZE_SECTORS: u64 = 1 << 33;

/// Bytes the internal bitmap may take after the superblock (`add_internal_bitmap0`: 60 KiB).
const BITMAP_ROOM: u64 = 60 * 1024;

pub(super) fn plan(spec: &CreateSpec, shape: &Shape, members: &[NewMember]) -> Result<CreatePlan, FormatError> {
    let (level, chunk_kib, rd) = (shape.level, shape.chunk_kib, shape.raid_disks);
    if spec.data_offset.is_some() {
        return fail("0.90 metadata has no data offset: its data always starts at sector 0");
    }
    if rd > sb090::SB_DISKS {
        return fail(format!("0.90 metadata supports at most {} devices per array, not {rd}", sb090::SB_DISKS));
    }
    if members.len() > sb090::SB_DISKS {
        return fail(format!(
            "too many devices for 0.90 metadata: {rd} raid devices + {} spares > {}",
            members.len() - rd,
            sb090::SB_DISKS
        ));
    }
    if level == 0 && spec.layout != -1 {
        return fail("0.90 metadata does not support layouts for RAID0 (it has nowhere to record one)");
    }
    // The devices of the list, by position, with where their superblock goes.
    let mut present: Vec<(usize, u64, u64)> = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let NewMember::Device { bytes, .. } = *m else { continue };
        let Some(start) = sb090::sb_start(bytes / SECTOR) else {
            return fail(format!(
                "device {i} ({bytes} bytes) is too small for 0.90 metadata (its superblock takes the last 64-128 KiB)"
            ));
        };
        present.push((i, bytes, start));
    }
    let chunk_sectors = (chunk_kib * 2) as u32;
    if level == 0 {
        // write_init_super0: without a layout, md only builds a raid0 whose members hold the
        // same number of chunks (a single zone); several zones need a layout 0.90 cannot hold.
        let chunks = |start: u64| start / u64::from(chunk_sectors.max(1));
        if let Some(&(i, bytes, start)) = present.iter().find(|p| chunks(p.2) != chunks(present[0].2)) {
            return fail(format!(
                "raid0 with 0.90 metadata needs members of the same size: device {i} ({bytes} bytes) holds {} chunks, device {} holds {}; md would need a layout, which 0.90 cannot record (use 1.x metadata)",
                chunks(start),
                present[0].0,
                chunks(present[0].2)
            ));
        }
    }
    let room_kib: Vec<(usize, u64)> =
        present.iter().map(|&(i, _, start)| (i, round_to_chunk(start / 2, chunk_kib))).collect();
    let size_kib = choose_size_kib(&room_kib, shape.size_kib, level)?;
    let size_sectors = size_kib * 2;
    if level >= 1 && size_sectors >= MAX_SIZE_SECTORS {
        return fail(format!(
            "0.90 metadata supports at most 4 TiB per device: each member would hold {size_kib}K of data; give --size below 4T, or use 1.x metadata"
        ));
    }
    let Ok(size_field) = u32::try_from(size_kib) else {
        return fail(format!("size {size_kib}K does not fit 0.90 metadata's 32-bit KiB count"));
    };

    // Create.c: a raid10 bitmap covers the array, other levels one member.
    let bitmap = if shape.policy == super::ConsistencyPolicy::Bitmap {
        let bitmap_sectors = if level == 10 {
            let copies = (((shape.layout >> 8) & 255) * (shape.layout & 255)) as u64;
            size_kib * rd as u64 / copies * 2
        } else {
            size_sectors
        };
        Some(bitmap_header(spec, bitmap_sectors)?)
    } else {
        None
    };

    let mut sb = Superblock090::blank(0);
    sb.set_uuid(&spec.array_uuid);
    sb.ctime = spec.ctime as u32;
    sb.utime = spec.ctime as u32;
    sb.level = level;
    sb.size = size_field;
    sb.raid_disks = rd as u32;
    // write_init_super0: a raid0 whose members are alike records layout 0.
    sb.layout = if level == 0 { 0 } else { shape.layout };
    sb.chunk_size = chunk_sectors * SECTOR as u32;
    if bitmap.is_some() {
        sb.state |= sb090::state::BITMAP_PRESENT;
    }
    // init_super0 starts the event count at 1.
    sb.set_events(1);
    sb.set_clean(shape.starts_in_sync());

    // md's numbering: a device in slot s holds descriptor s, spares follow the slots.
    let mut spares = 0;
    let numbered: Vec<(usize, u32, Role)> = present
        .iter()
        .map(|&(i, _, _)| {
            if i < rd {
                (i, i as u32, Role::Active(i as u32))
            } else {
                spares += 1;
                (i, (rd + spares - 1) as u32, Role::Spare)
            }
        })
        .collect();
    let live: Vec<(u32, Role)> = numbered.iter().map(|&(_, d, r)| (d, r)).collect();
    sb.sync_descriptors(&live);

    let mut superblocks = Vec::with_capacity(present.len());
    let mut layouts = Vec::with_capacity(present.len());
    for (&(_, _, start), &(_, dev_number, _)) in present.iter().zip(&numbered) {
        let mut own = sb.clone();
        own.sb_start = start;
        own.this_disk = own.disks[dev_number as usize];
        own.sb_csum = sb090::checksum(&own.to_bytes());
        let bitmap_at = start * SECTOR + sb090::SB_BYTES as u64;
        layouts.push(MemberLayout {
            dev_number,
            super_byte_offset: start * SECTOR,
            data_offset: 0,
            data_size: if level >= 1 { size_sectors } else { start },
            bitmap: bitmap.as_ref().map(|bms| (bitmap_at, bms.space_bytes(4096) as usize)),
            bad_block_log: None,
            ppl: None,
        });
        superblocks.push(Superblock::V090(own));
    }
    let bitmap = bitmap.map(|bms| {
        let rest = bms.space_bytes(4096) as usize - bitmap::HEADER_BYTES;
        let offset = layouts[0].bitmap.map_or(0, |b| b.0);
        (bms, offset, rest)
    });
    Ok(CreatePlan {
        superblocks,
        component_sectors: if level >= 1 { size_sectors } else { 0 },
        bitmap,
        members: layouts,
        layout: shape.layout,
        chunk_sectors,
        starts_in_sync: shape.starts_in_sync(),
        missing_slots: shape.missing.clone(),
    })
}

/// The bitmap header `add_internal_bitmap0` makes for `bitmap_sectors` sectors: the smallest
/// chunk of at least 4 KiB whose bits fit in 60 KiB, and at least 64 MiB unless one is given.
/// Its UUID is the array's as md holds it for 0.90 (the four words as stored).
fn bitmap_header(spec: &CreateSpec, bitmap_sectors: u64) -> Result<BitmapSuper, FormatError> {
    let chunk32 = bitmap_chunk(spec.bitmap_chunk, bitmap_sectors, BITMAP_ROOM, "0.90's 60 KiB")?;
    let mut sb = Superblock090::blank(0);
    sb.set_uuid(&spec.array_uuid);
    Ok(BitmapSuper::new(sb.md_uuid(), bitmap_sectors, chunk32))
}

#[cfg(test)]
mod tests {
    use super::super::{plan_members, ConsistencyPolicy};
    use super::*;
    use crate::sb090::disk_state::{ACTIVE, FAULTY, REMOVED, SYNC};
    use crate::{MetadataVersion, MAX_SECTOR, MD_SB_MAGIC};

    const UUID: [u8; 16] = [0x6d, 0x64, 0x6f, 0x72, 0x61, 0x63, 0x6c, 0x65, 0, 0, 0, 0, 0, 0, 0, 0x4a];

    fn spec(level: i32, raid_disks: u32) -> CreateSpec {
        CreateSpec {
            version: MetadataVersion::V0_90,
            level,
            layout: -1,
            chunk_sectors: if level == 1 || level == -1 { 0 } else { 128 },
            raid_disks,
            array_uuid: UUID,
            name: String::new(),
            ctime: 1_795_294_667,
            component_sectors: None,
            bitmap: false,
            data_offset: None,
            bitmap_chunk: None,
        }
    }

    fn members(words: &str, bytes: u64) -> Vec<NewMember> {
        words
            .split_whitespace()
            .map(|w| if w == "missing" { NewMember::Missing } else { NewMember::Device { bytes, uuid: [0; 16] } })
            .collect()
    }

    fn planned(spec: &CreateSpec, words: &str, bytes: u64) -> Result<CreatePlan, FormatError> {
        let policy = if spec.bitmap { ConsistencyPolicy::Bitmap } else { ConsistencyPolicy::Resync };
        plan_members(spec, policy, &members(words, bytes))
    }

    fn sb(p: &CreatePlan, i: usize) -> &Superblock090 {
        match &p.superblocks[i] {
            Superblock::V090(sb) => sb,
            other => panic!("not 0.90: {other:?}"),
        }
    }

    /// (number, raid_disk, state) of the first `n` descriptors.
    fn descriptors(sb: &Superblock090, n: usize) -> Vec<(u32, u32, u32)> {
        sb.disks[..n].iter().map(|d| (d.number, d.raid_disk, d.state)).collect()
    }

    #[test]
    fn raid5_is_what_md_writes_for_mdadm() {
        // raid5-3-ls-64k-0.90 on 4 MiB members: superblock at sector 8064, 4032K used.
        let p = planned(&spec(5, 3), "d d d", 4 << 20).unwrap();
        assert_eq!(p.component_sectors, 8064);
        for i in 0..3 {
            let s = sb(&p, i);
            assert_eq!((s.md_magic, s.major_version, s.minor_version, s.patch_version), (MD_SB_MAGIC, 0, 90, 0));
            assert_eq!(s.uuid(), UUID);
            assert_eq!((s.set_uuid0, s.set_uuid3), (0x6d64_6f72, 0x4a));
            assert_eq!((s.level, s.size, s.raid_disks, s.nr_disks, s.md_minor), (5, 4032, 3, 3, 0));
            assert_eq!((s.layout, s.chunk_size), (2, 65536));
            assert_eq!((s.active_disks, s.working_disks, s.failed_disks, s.spare_disks), (3, 3, 0, 0));
            assert_eq!(
                descriptors(s, 4),
                [(0, 0, ACTIVE | SYNC), (1, 1, ACTIVE | SYNC), (2, 2, ACTIVE | SYNC), (0, 0, 0)]
            );
            assert_eq!(s.this_disk, s.disks[i]);
            assert_eq!(s.events(), 1);
            assert_eq!(p.members[i].super_byte_offset, 8064 * 512);
            assert_eq!((p.members[i].data_offset, p.members[i].data_size), (0, 8064));
            // Parses where it goes, with the same meaning.
            let back = Superblock::parse(MetadataVersion::V0_90, &s.to_bytes(), 4 << 20).unwrap();
            assert_eq!(back, p.superblocks[i]);
        }
        assert!(!p.starts_in_sync);
        assert_eq!(p.superblocks[0].info().resync_offset, 0, "a resync is owed until the writer syncs");
    }

    #[test]
    fn missing_slots_are_removed_and_spares_follow_the_slots() {
        // raid5 of 4 with slot 2 missing and a spare: the kernel's super_90_sync layout.
        let p = planned(&spec(5, 4), "d d missing d d", 4 << 20).unwrap();
        assert_eq!(p.superblocks.len(), 4);
        assert_eq!(p.members.iter().map(|m| m.dev_number).collect::<Vec<_>>(), [0, 1, 3, 4]);
        let s = sb(&p, 3);
        assert_eq!(
            descriptors(s, 5),
            [(0, 0, ACTIVE | SYNC), (1, 1, ACTIVE | SYNC), (2, 2, REMOVED | FAULTY), (3, 3, ACTIVE | SYNC), (4, 4, 0)]
        );
        assert_eq!((s.nr_disks, s.active_disks, s.working_disks, s.failed_disks, s.spare_disks), (4, 3, 4, 1, 1));
        assert_eq!(s.this_disk.number, 4);
        let info = p.superblocks[3].info();
        assert_eq!(info.role, Role::Spare);
        assert_eq!(info.roles[2], Role::Faulty);
        // Nothing left to resync: clean from the start.
        assert!(p.starts_in_sync);
        assert_eq!(info.resync_offset, MAX_SECTOR);
        assert!(info.state_clean);
        // md leaves a missing first slot's descriptor removed only (it cannot tell it apart
        // from an unused one).
        let p = planned(&spec(1, 2), "missing d", 4 << 20).unwrap();
        assert_eq!(descriptors(sb(&p, 0), 2), [(0, 0, REMOVED), (1, 1, ACTIVE | SYNC)]);
        assert_eq!(sb(&p, 0).failed_disks, 0);
    }

    #[test]
    fn linear_and_raid0_use_everything_before_the_superblock() {
        let p = planned(&spec(-1, 3), "d d d", 4 << 20).unwrap();
        let s = sb(&p, 0);
        assert_eq!((s.level, s.size, s.chunk_size, s.layout), (-1, 0, 0, 0));
        assert!(p.starts_in_sync && s.state & sb090::state::CLEAN != 0);
        assert_eq!(p.superblocks[0].info().usable_sectors, 8064);
        let p = planned(&spec(0, 2), "d d", 4 << 20).unwrap();
        assert_eq!((sb(&p, 1).level, sb(&p, 1).layout, sb(&p, 1).chunk_size), (0, 0, 65536));
        assert_eq!(p.superblocks[1].info().layout, -1, "0.90 records no raid0 layout");
    }

    #[test]
    fn limits_of_090_are_refused() {
        let err = |s: &CreateSpec, words: &str, bytes: u64| planned(s, words, bytes).unwrap_err().to_string();
        let many = vec!["d"; 28].join(" ");
        assert!(err(&spec(1, 28), &many, 4 << 20).contains("at most 27 devices"));
        assert!(err(&spec(1, 26), &many, 4 << 20).contains("26 raid devices + 2 spares > 27"));
        assert!(planned(&spec(5, 27), &vec!["d"; 27].join(" "), 4 << 20).is_ok());
        assert!(err(&spec(1, 2), "d d", 60 << 10).contains("too small for 0.90"));
        assert!(err(&spec(1, 2), "d d", 100 << 10).contains("no free space"), "all of it is metadata");
        // 4 TiB of data per member is one KiB too many for the 32-bit size.
        let big = (4u64 << 40) + (1 << 20);
        assert!(err(&spec(1, 2), "d d", big).contains("at most 4 TiB per device"));
        let mut under = spec(1, 2);
        under.component_sectors = Some((4u64 << 31) - 2048);
        assert!(planned(&under, "d d", big).is_ok());
        // Linear and raid0 record no size: any member size goes.
        assert!(planned(&spec(-1, 2), "d d", 5 << 40).is_ok());
        assert!(planned(&spec(0, 2), "d d", 5 << 40).is_ok());
        let unequal = plan_members(
            &spec(0, 2),
            ConsistencyPolicy::Resync,
            &[NewMember::Device { bytes: 4 << 20, uuid: [0; 16] }, NewMember::Device { bytes: 8 << 20, uuid: [0; 16] }],
        );
        assert!(unequal.unwrap_err().to_string().contains("same size"));
        let mut layout = spec(0, 2);
        layout.layout = 2;
        assert!(err(&layout, "d d", 4 << 20).contains("does not support layouts for RAID0"));
        let mut offset = spec(1, 2);
        offset.data_offset = Some(2048);
        assert!(err(&offset, "d d", 4 << 20).contains("no data offset"));
        assert!(err(&spec(5, 3), "d missing missing", 4 << 20).contains("too many missing devices"));
    }

    #[test]
    fn the_bitmap_follows_the_superblock_within_60k() {
        let mut s = spec(1, 2);
        s.bitmap = true;
        let p = planned(&s, "d d", 8 << 20).unwrap();
        let (bms, at, rest) = p.bitmap.clone().unwrap();
        let start = sb090::sb_start((8 << 20) / 512).unwrap();
        assert_eq!(at, start * 512 + 4096);
        assert_eq!(p.members[1].bitmap.unwrap().0, at);
        assert_eq!(bms.chunksize, 64 << 20);
        assert_eq!(bms.sync_size, p.component_sectors);
        assert_eq!(bms.uuid, sb(&p, 0).md_uuid(), "the words as stored, not as mdadm displays them");
        assert_eq!(&bms.uuid[..4], &[0x72, 0x6f, 0x64, 0x6d]);
        assert!(256 + rest <= 60 * 1024);
        assert_eq!(p.superblocks[0].info().bitmap_offset, Some(8));
        assert!(sb(&p, 0).state & sb090::state::BITMAP_PRESENT != 0);
        // 3 TiB members with a 4 KiB chunk asked for: too many bits for 60 KiB.
        s.bitmap_chunk = Some(4096);
        assert!(planned(&s, "d d", 3 << 40).unwrap_err().to_string().contains("60 KiB"));
        s.bitmap_chunk = None;
        let big = planned(&s, "d d", 3 << 40).unwrap();
        let (bms, _, rest) = big.bitmap.unwrap();
        assert!(256 + rest <= 60 * 1024, "{rest}");
        assert!(bms.chunksize >= 64 << 20);
    }
}
