use uraid_engine::geometry::{Copies, Layout, Redundancy};
use uraid_vinum_format::parse_config;

use super::{VolumeLayout, VolumeLayoutError};

fn layout(text: &str, volume: &str) -> Result<VolumeLayout, VolumeLayoutError> {
    VolumeLayout::new(&parse_config(text).expect("a valid configuration"), volume)
}

/// gvinum(8)'s raid5 example: a stripe of 986 sectors, neither a power of two nor 4 KiB.
const RAID5: &str = "\
volume r state up
plex name r.p0 org raid5 986s vol r state up
sd name r.p0.s0 drive d0 len 32538s driveoffset 265s plex r.p0 plexoffset 0s state up
sd name r.p0.s1 drive d1 len 32538s driveoffset 265s plex r.p0 plexoffset 986s state up
sd name r.p0.s2 drive d2 len 32538s driveoffset 265s plex r.p0 plexoffset 1972s state up
";

/// Two plexes cut at different places: a concat plex of two subdisks and a striped plex of
/// three, the striped one shorter (the volume is as long as it).
const MIRROR: &str = "\
volume m state up
plex name m.p0 org concat vol m state up
sd name m.p0.s0 drive d0 len 1024s driveoffset 265s plex m.p0 plexoffset 0s state up
sd name m.p0.s1 drive d1 len 2048s driveoffset 265s plex m.p0 plexoffset 1024s state up
plex name m.p1 org striped 128s vol m state up
sd name m.p1.s0 drive d2 len 1000s driveoffset 265s plex m.p1 plexoffset 0s state up
sd name m.p1.s1 drive d3 len 1000s driveoffset 265s plex m.p1 plexoffset 128s state up
sd name m.p1.s2 drive d0 len 1000s driveoffset 1289s plex m.p1 plexoffset 256s state up
";

const CONCAT: &str = "\
volume c state up
plex name c.p0 org concat vol c state up
sd name c.p0.s0 drive d0 len 7s driveoffset 265s plex c.p0 plexoffset 0s state up
sd name c.p0.s1 drive d1 len 9s driveoffset 300s plex c.p0 plexoffset 7s state up
";

/// Every logical byte maps to member bytes whose inverse is that byte again, and every member
/// byte holding data maps back to a copy of it: the map and `member_extent` agree, byte by byte
/// at sector steps.
fn assert_inverse(l: &VolumeLayout) {
    let size = l.array_bytes();
    let mut copies = Copies::new();
    let mut offset = 0;
    while offset < size {
        copies.clear();
        let run = l.map(offset, &mut copies);
        assert!(run >= 1 && offset + run <= size, "{l}: run {run} at {offset}");
        for &(slot, at) in &copies {
            let e = l.member_extent(slot, at);
            assert_eq!(e.logical, Some(offset), "{l}: slot {slot} byte {at}");
            assert!(e.len >= run.min(512), "{l}: extent shorter than the run at {offset}");
        }
        offset += 512;
    }
    let mut data = 0;
    for slot in 0..l.raid_disks() {
        let mut at = 0;
        while at < l.member_data_bytes() {
            let e = l.member_extent(slot, at);
            if let Some(logical) = e.logical {
                copies.clear();
                l.map(logical, &mut copies);
                assert!(
                    copies.contains(&(slot, at)),
                    "{l}: slot {slot} byte {at} holds {logical}, which maps elsewhere"
                );
                data += 512;
            }
            at += 512;
        }
    }
    let copies_per_byte = match l.redundancy() {
        Redundancy::Copies => 2,
        _ => 1,
    };
    assert_eq!(data, size * copies_per_byte, "{l}: every byte held once per copy");
}

#[test]
fn a_raid5_plex_is_a_parity_layout_with_gvinum_rotation() {
    let l = layout(RAID5, "r").unwrap();
    assert_eq!(l.redundancy(), Redundancy::Parity { data_disks: 2 });
    assert_eq!(l.chunk_bytes(), 986 * 512);
    // 32538 sectors trimmed to whole stripes: 33 stripes of 986.
    assert_eq!(l.member_data_bytes(), 33 * 986 * 512);
    assert_eq!(l.array_bytes(), 2 * 33 * 986 * 512);
    // Parity starts on the last column and moves left.
    assert_eq!(l.stripe_roles(0).p, 2);
    assert_eq!(l.stripe_roles(1).p, 1);
    assert_eq!(l.stripe_roles(2).p, 0);
    assert_eq!(l.stripe_roles(1).data.as_slice(), &[0, 2]);
    assert_inverse(&l);
}

#[test]
fn plexes_of_different_kinds_mirror_each_other_and_the_smallest_sets_the_size() {
    let l = layout(MIRROR, "m").unwrap();
    assert_eq!(l.redundancy(), Redundancy::Copies);
    assert_eq!(l.raid_disks(), 5);
    // The striped plex: 1000 sectors trimmed to 7 stripes of 128, times 3 columns.
    assert_eq!(l.array_bytes(), 3 * 7 * 128 * 512);
    let subdisks = l.slot_subdisks();
    assert_eq!(subdisks[4].subdisk, "m.p1.s2");
    assert_eq!((subdisks[4].drive.as_str(), subdisks[4].drive_offset), ("d0", 1289 * 512));
    assert_eq!(l.plex_slots(), vec![0..2, 2..5]);
    // Byte 600 KiB: concat subdisk 1 (from 512 KiB) and striped unit 9 (column 0, row 3).
    let mut copies = Copies::new();
    let run = l.map(600 << 10, &mut copies);
    assert_eq!(copies.as_slice(), &[(1, 88 << 10), (2, (3 * 64 + 24) << 10)]);
    assert_eq!(run, 40 << 10);
    assert_inverse(&l);
    // The concat plex's bytes past the volume's end hold nothing of it.
    assert_eq!(l.member_extent(1, 2047 * 512).logical, None);
}

#[test]
fn a_mirror_is_readable_while_any_byte_has_a_copy() {
    let l = layout(MIRROR, "m").unwrap();
    assert!(l.is_readable(&|s| s >= 2), "the striped plex alone");
    assert!(l.is_readable(&|s| s < 2), "the concat plex alone");
    // Concat s0 (volume bytes below 512 KiB) with striped s1 and s2 still leaves holes:
    // striped units of column 0 below 512 KiB have only the concat copy.
    assert!(!l.is_readable(&|s| s != 0 && s != 2));
    assert_eq!(l.max_degraded(), 3);
}

#[test]
fn a_concat_plex_may_end_its_subdisks_anywhere() {
    let l = layout(CONCAT, "c").unwrap();
    assert_eq!(l.redundancy(), Redundancy::None);
    assert_eq!(l.array_bytes(), 16 * 512);
    assert_eq!(l.slot_subdisks()[1].used_bytes, 9 * 512);
    assert_inverse(&l);
}

/// Plexes cut at odd sectors (a subdisk at a plex offset, or stripes, not whole 4 KiB) line up
/// with the others in whole sectors only: the engine checks and repairs their copies in 512-byte
/// rows. Those that line up in 4 KiB keep md's rows.
#[test]
fn mirrors_cut_at_odd_sectors_are_checked_in_sector_rows() {
    assert_eq!(layout(MIRROR, "m").unwrap().row_bytes(), 4096);
    let misaligned = MIRROR
        .replace("len 1024s driveoffset 265s", "len 1020s driveoffset 265s")
        .replace("plexoffset 1024s", "plexoffset 1020s");
    let l = layout(&misaligned, "m").unwrap();
    assert_eq!((l.row_bytes(), l.redundancy()), (512, Redundancy::Copies));
    assert_inverse(&l);
    let odd_stripe = MIRROR.replace("org striped 128s", "org striped 100s");
    let l = layout(&odd_stripe, "m").unwrap();
    assert_eq!(l.row_bytes(), 512);
    assert_inverse(&l);
}

/// A raid5 plex mirrored with a concat plex: two levels, each plex its own layout, the slots
/// still the subdisks in plex order.
#[test]
fn a_raid5_plex_mirrored_with_another_is_a_mirror_of_arrays() {
    let mirrored_raid5 = format!("{RAID5}plex name r.p1 org concat vol r state up\nsd name r.p1.s0 drive d3 len 70000s driveoffset 265s plex r.p1 plexoffset 0s state up\n");
    let l = layout(&mirrored_raid5, "r").unwrap();
    let nested = l.nested().expect("two levels");
    assert_eq!(nested.plexes().len(), 2);
    assert_eq!(nested.plexes()[0].redundancy(), Redundancy::Parity { data_disks: 2 });
    assert_eq!(nested.plexes()[1].redundancy(), Redundancy::None);
    assert_eq!((l.raid_disks(), l.redundancy(), l.array_bytes()), (4, Redundancy::Copies, 2 * 32538 / 986 * 986 * 512));
    assert_eq!(l.slot_subdisks()[3].subdisk, "r.p1.s0");
    assert_inverse(&l);
    // Readable from the concat plex alone, or the raid5 plex short of one subdisk.
    assert!(l.is_readable(&|s| s == 3));
    assert!(l.is_readable(&|s| s == 0 || s == 2));
    assert!(!l.is_readable(&|s| s == 0));
    assert!(layout(RAID5, "r").unwrap().nested().is_none(), "one plex is one level");
}

#[test]
fn layouts_the_engine_cannot_run_are_refused_by_name() {
    assert_eq!(layout(RAID5, "nope").unwrap_err(), VolumeLayoutError::UnknownVolume { volume: "nope".into() });
    let no_plexes = "volume lonely state down\n";
    assert_eq!(layout(no_plexes, "lonely").unwrap_err(), VolumeLayoutError::NoPlexes { volume: "lonely".into() });
}
