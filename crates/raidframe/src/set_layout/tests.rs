use uraid_engine::geometry::{Copies, CopyPlacement, Layout, Redundancy};
use uraid_raidframe_format::mapping::{Geometry, Level};

use super::{SetLayout, SetLayoutError};

fn layout(level: Level, columns: u32, sect_per_su: u64, sectors: u64) -> SetLayout {
    SetLayout::new(Geometry::new(level, columns, sect_per_su, sectors).unwrap(), 512).unwrap()
}

/// A few geometries of every level: stripe units of 1, 8 and 32 sectors, components that end
/// inside a stripe unit, the smallest and odd column counts.
fn geometries() -> Vec<SetLayout> {
    let mut out = Vec::new();
    for (level, columns) in [
        (Level::Raid0, 1),
        (Level::Raid0, 3),
        (Level::Raid1, 2),
        (Level::Raid1, 6),
        (Level::Raid4, 2),
        (Level::Raid4, 4),
        (Level::Raid5, 2),
        (Level::Raid5, 3),
        (Level::Raid5, 5),
    ] {
        for (su, sectors) in [(1, 37), (8, 203), (32, 300)] {
            out.push(layout(level, columns, su, sectors));
        }
    }
    out
}

/// For every sector of the set: the layout's map is `Geometry::map` in bytes (the data copy
/// first, RAID 1's mirror second), and the inverse of each copy is that sector again.
#[test]
fn the_map_agrees_with_raidframes_mapping_for_every_sector() {
    for l in geometries() {
        let g = *l.raid_geometry();
        let mut copies = Copies::new();
        for sector in 0..g.total_sectors() {
            let m = g.map(sector).unwrap();
            copies.clear();
            let offset = sector * 512 + 100;
            let run = l.map(offset, &mut copies);
            let mut want = vec![(m.data.column as usize, m.data.sector * 512 + 100)];
            if g.level == Level::Raid1 {
                let mirror = m.redundancy.unwrap();
                want.push((mirror.column as usize, mirror.sector * 512 + 100));
            }
            assert_eq!(copies.as_slice(), want.as_slice(), "{l} {g:?} sector {sector}");
            assert!(run >= 412 && offset + run <= l.array_bytes(), "{l} {g:?} sector {sector}: run {run}");
            // The run stays on the same member bytes: its last sector maps where it should.
            let last = (offset + run - 1) / 512;
            let m_last = g.map(last).unwrap();
            assert_eq!(m_last.data.column, m.data.column, "{l} {g:?} sector {sector}: run {run}");
            assert_eq!(m_last.data.sector - m.data.sector, last - sector);
            for &(slot, at) in copies.iter() {
                assert_eq!(l.member_extent(slot, at).logical, Some(offset), "{l} {g:?} slot {slot} byte {at}");
            }
        }
    }
}

/// Every member byte that holds data maps back to a copy of itself, and parity and the tail
/// past the last whole stripe unit hold none.
#[test]
fn member_extents_invert_the_map() {
    for l in geometries() {
        let g = *l.raid_geometry();
        let mut held = 0;
        let mut copies = Copies::new();
        for slot in 0..l.raid_disks() {
            for sector in 0..g.sectors_per_disk + 3 {
                let e = l.member_extent(slot, sector * 512);
                let Some(logical) = e.logical else { continue };
                copies.clear();
                l.map(logical, &mut copies);
                assert!(copies.contains(&(slot, sector * 512)), "{l} {g:?} slot {slot} sector {sector}");
                held += 1;
            }
        }
        let copies_per_sector = if g.level == Level::Raid1 { 2 } else { 1 };
        assert_eq!(held, g.total_sectors() * copies_per_sector, "{l} {g:?}");
        assert_eq!(l.member_extent(0, l.member_data_bytes()).logical, None);
    }
}

/// What the engine relies on for parity layouts: logical chunk `c` is data chunk `c % d` of
/// stripe `c / d`, on slot `roles.data[c % d]`, at member bytes of stripe `c / d`; parity on
/// `roles.p`, the column `Geometry::redundancy_column` names.
#[test]
fn parity_stripes_have_the_shape_the_engine_needs() {
    for l in geometries().into_iter().filter(|l| l.raid_geometry().level.faults_tolerated() == 1) {
        let g = *l.raid_geometry();
        let Redundancy::Parity { data_disks } = l.redundancy() else { continue };
        let chunk = l.chunk_bytes();
        let mut copies = Copies::new();
        for c in 0..l.array_bytes() / chunk {
            let (stripe, k) = (c / data_disks as u64, (c % data_disks as u64) as usize);
            let roles = l.stripe_roles(stripe);
            assert_eq!(roles.p, g.redundancy_column(stripe).unwrap() as usize);
            assert!(!roles.data.contains(&roles.p));
            copies.clear();
            l.map(c * chunk, &mut copies);
            assert_eq!(copies.as_slice(), &[(roles.data[k], stripe * chunk)], "{l} {g:?} chunk {c}");
            let run = l.parity_run(c * chunk + 7);
            assert_eq!((run.stripe, run.data_index, run.slot, run.len), (stripe, k, roles.data[k], chunk - 7));
        }
    }
}

#[test]
fn raid5_parity_starts_on_the_last_column_and_moves_left() {
    let l = layout(Level::Raid5, 3, 32, 300);
    assert_eq!(l.name(), "raidframe-raid5");
    assert_eq!(l.redundancy(), Redundancy::Parity { data_disks: 2 });
    assert_eq!(l.chunk_bytes(), 16 << 10);
    // 300 sectors hold 9 stripe units of 32: 9 stripes of 2 data units.
    assert_eq!(l.member_data_bytes(), 9 * 32 * 512);
    assert_eq!(l.array_bytes(), 2 * 9 * 32 * 512);
    let parity: Vec<usize> = (0..6).map(|s| l.stripe_roles(s).p).collect();
    assert_eq!(parity, vec![2, 1, 0, 2, 1, 0]);
    // Left-symmetric: stripe 1's data starts on the column after its parity.
    assert_eq!(l.stripe_roles(1).data.as_slice(), &[2, 0]);
    let l4 = layout(Level::Raid4, 4, 8, 203);
    assert!((0..25).all(|s| l4.stripe_roles(s).p == 3 && l4.stripe_roles(s).data.as_slice() == [0, 1, 2]));
}

#[test]
fn raid1_is_mirrored_pairs() {
    let two = layout(Level::Raid1, 2, 32, 300);
    assert_eq!(two.redundancy(), Redundancy::Copies);
    assert_eq!(two.copy_placement(), CopyPlacement::Images { same_slots: true });
    let mut copies = Copies::new();
    // One pair: the whole set is one run on both columns.
    assert_eq!(two.map(0, &mut copies), two.array_bytes());
    assert_eq!(copies.as_slice(), &[(0, 0), (1, 0)]);
    let six = layout(Level::Raid1, 6, 8, 203);
    assert_eq!(six.copy_placement(), CopyPlacement::Chunks { near: 2, far: 1 });
    assert_eq!(six.max_degraded(), 3);
    assert!(six.is_readable(&|c| c % 2 == 1), "one column of every pair");
    assert!(!six.is_readable(&|c| c != 2 && c != 3), "pair 1 lost");
    copies.clear();
    // Stripe unit 4: pair 1, second row.
    six.map(4 * 8 * 512, &mut copies);
    assert_eq!(copies.as_slice(), &[(2, 8 * 512), (3, 8 * 512)]);
}

#[test]
fn readability_follows_the_level() {
    let r0 = layout(Level::Raid0, 3, 8, 203);
    assert_eq!((r0.redundancy(), r0.max_degraded()), (Redundancy::None, 0));
    assert!(!r0.is_readable(&|c| c != 1));
    let r5 = layout(Level::Raid5, 5, 8, 203);
    assert!(r5.is_readable(&|c| c != 4));
    assert!(!r5.is_readable(&|c| c > 1));
}

#[test]
fn sectors_must_be_whole_engine_sectors() {
    let g = Geometry::new(Level::Raid5, 3, 8, 203).unwrap();
    assert_eq!(SetLayout::new(g, 520).unwrap_err(), SetLayoutError::SectorSize { bytes: 520 });
    let big = SetLayout::new(g, 4096).unwrap();
    assert_eq!(big.chunk_bytes(), 8 * 4096);
    assert_eq!(big.array_bytes(), 2 * 25 * 8 * 4096);
}
