//! The crate against component images NetBSD's RAIDframe driver wrote (tests/data).

mod common;

use common::{pattern_sector, set, text, SECTOR, SETS, SPARE_SETS, ZERO_SETS};
use uraid_raidframe_format::freshness::{assess_all, ColumnState};
use uraid_raidframe_format::label::{ComponentLabel, LABEL_STRUCT_SIZE, PMLABEL_VALID, PMLABEL_WASUSED};
use uraid_raidframe_format::layout::{
    self, data_offset, label_area_size, parity_map_area_size, parity_map_offset, parity_map_verdict, ParityMap,
    ParityMapVerdict,
};
use uraid_raidframe_format::mapping::{Geometry, Level, Location};
use uraid_raidframe_format::{check_labels, ByteOrder, ConfigureCheck, DiskStatus, RaidConfig};

const S: u64 = SECTOR as u64;

fn label_of(image: &[u8]) -> ComponentLabel {
    let at = layout::LABEL_OFFSET as usize;
    ComponentLabel::parse(&image[at..at + label_area_size(S) as usize]).unwrap()
}

fn map_of(image: &[u8]) -> ParityMap {
    let at = parity_map_offset(S) as usize;
    ParityMap::parse(&image[at..at + parity_map_area_size(S) as usize]).unwrap()
}

fn geometry(label: &ComponentLabel) -> Geometry {
    let level = Level::from_char(label.level_char().unwrap()).unwrap();
    Geometry::new(level, label.num_columns as u32, label.sect_per_su as u64, label.num_blocks).unwrap()
}

fn data_sector(image: &[u8], sector: u64) -> &[u8] {
    let at = (data_offset(S) + sector * S) as usize;
    &image[at..at + SECTOR]
}

#[test]
fn labels_and_maps_round_trip_byte_for_byte() {
    for name in SETS.iter().map(|s| s.0).chain(ZERO_SETS).chain(SPARE_SETS) {
        for (i, image) in set(name).iter().enumerate() {
            let at = layout::LABEL_OFFSET as usize;
            let area = &image[at..at + label_area_size(S) as usize];
            let label = label_of(image);
            assert_eq!(label.byte_order, ByteOrder::Little);
            assert_eq!(&label.to_bytes()[..], &area[..LABEL_STRUCT_SIZE], "{name} c{i}");
            assert_eq!(label.to_area(area.len()), area, "{name} c{i}");
            let map_at = parity_map_offset(S) as usize;
            let map_area = &image[map_at..map_at + parity_map_area_size(S) as usize];
            assert_eq!(map_of(image).to_area(map_area.len()), map_area, "{name} c{i}");
            // Nothing else in the protected area: bytes 0..16384 and past the map are zero.
            assert!(image[..at].iter().all(|&b| b == 0), "{name} c{i}");
            assert!(image[map_at + map_area.len()..data_offset(S) as usize].iter().all(|&b| b == 0), "{name} c{i}");
        }
    }
}

#[test]
fn label_fields_are_what_the_driver_was_told() {
    let expect = [
        ("raid0", '0', 1000, 16, 2048u64),
        ("raid1", '1', 1001, 8, 2048),
        ("raid4", '4', 1004, 4, 2048),
        ("raid5", '5', 1005, 8, 2048),
        ("dirty5", '5', 1006, 32, 32768),
        ("fail5", '5', 1007, 8, 2048),
        ("new5", '5', 1008, 8, 2048),
    ];
    for (name, level, serial, su, partition) in expect {
        let images = set(name);
        for (i, image) in images.iter().enumerate() {
            let l = label_of(image);
            assert_eq!(l.version, 2);
            assert_eq!(l.serial_number, serial);
            assert_eq!((l.row, l.column, l.num_rows, l.num_columns), (0, i as i32, 1, images.len() as i32));
            assert_eq!(l.level_char(), Some(level));
            assert_eq!((l.sect_per_su, l.sus_per_pu, l.sus_per_ru), (su, 1, 1));
            assert_eq!(l.max_outstanding, 100);
            assert_eq!(l.block_size, 512);
            assert_eq!(l.partition_size, partition);
            assert_eq!(l.partition_size, image.len() as u64 / S);
            assert_eq!(Some(l.num_blocks), layout::usable_sectors(partition));
            assert_eq!(l.disk_status(), Some(DiskStatus::Optimal));
            assert_eq!(l.autoconfigure, i32::from(name == "raid1"));
            assert_eq!((l.root_partition, l.last_unit, l.config_order), (0, 0, 0));
            assert_eq!(l.parity_map_modcount, l.mod_counter);
            assert!(l.future_use.iter().chain(l.future_use2.iter()).all(|&w| w == 0));
            assert!(l.check_reasonable(Some(image.len() as u64 / S)).is_ok());
            if level == '0' {
                // No redundancy, no parity map: the fields stay zero and no map is written.
                assert_eq!((l.parity_map_flags, l.parity_map_regions), (0, 0));
            } else {
                assert_eq!(l.parity_map_flags, PMLABEL_VALID | PMLABEL_WASUSED);
                assert_eq!(
                    (l.parity_map_tickms, l.parity_map_ntick),
                    (layout::DEFAULT_TICKMS, layout::DEFAULT_COOLDOWN)
                );
                assert_eq!(l.parity_map_regions, layout::default_region_count(l.num_blocks, S));
            }
        }
    }
}

#[test]
fn clean_dirty_and_failed_sets_are_judged_as_the_kernel_would() {
    for name in ["raid0", "raid1", "raid4", "raid5"] {
        let labels: Vec<_> = set(name).iter().map(|i| label_of(i)).collect();
        assert!(labels.iter().all(|l| l.is_clean() && l.mod_counter == labels[0].mod_counter), "{name}");
        let sets = assess_all(&labels);
        assert_eq!(sets.len(), 1);
        let a = &sets[0].1;
        assert!(a.configurable && a.clean && a.stale.is_empty(), "{name}");
        assert!(set(name).iter().all(|i| map_of(i).dirty_regions().next().is_none()), "{name}");
        if name != "raid0" {
            assert_eq!(parity_map_verdict(&labels), ParityMapVerdict::Use { regions: 1, tickms: 40000, ntick: 8 });
        }
    }

    // Killed while configured, after the parity rewrite: with a parity map the driver keeps
    // the labels clean and tracks writes in the map instead; the written region is marked.
    let images = set("dirty5");
    let labels: Vec<_> = images.iter().map(|i| label_of(i)).collect();
    assert!(labels.iter().all(|l| l.is_clean()));
    let a = &assess_all(&labels)[0].1;
    assert!(a.configurable && a.clean);
    assert_eq!(parity_map_verdict(&labels), ParityMapVerdict::Use { regions: 1, tickms: 40000, ntick: 8 });
    let mut merged = ParityMap::clean();
    for image in &images {
        assert_eq!(map_of(image).dirty_regions().collect::<Vec<_>>(), vec![0]);
        merged.merge(&map_of(image));
    }
    assert_eq!(merged.dirty_regions().collect::<Vec<_>>(), vec![0]);

    // Killed before parity was ever rewritten: labels dirty, and the map `raidctl -C`
    // invalidated has every one of its 4096 bits set.
    let images = set("new5");
    let labels: Vec<_> = images.iter().map(|i| label_of(i)).collect();
    assert!(labels.iter().all(|l| !l.is_clean()));
    let a = &assess_all(&labels)[0].1;
    assert!(a.configurable && !a.clean);
    for image in &images {
        assert_eq!(map_of(image), ParityMap::all_dirty());
    }

    // Column 1 failed with -f: its label was left behind, the others moved on and are clean.
    let images = set("fail5");
    let labels: Vec<_> = images.iter().map(|i| label_of(i)).collect();
    assert!(labels[1].mod_counter < labels[0].mod_counter);
    assert_eq!(labels[0].mod_counter, labels[2].mod_counter);
    let sets = assess_all(&labels);
    assert_eq!(sets.len(), 1, "mod_counter and clean do not split a set");
    let a = &sets[0].1;
    assert_eq!(a.columns, vec![ColumnState::Fresh(0), ColumnState::Missing, ColumnState::Fresh(2)]);
    assert_eq!(a.stale, vec![1]);
    assert_eq!(a.mod_counter, labels[0].mod_counter);
    assert!(a.configurable);
    // The stale label's parity map (from before the failure) is never read; the live ones are clean.
    assert!(map_of(&images[0]).dirty_regions().next().is_none());
    // The stale label's modcount equals its own counter, so the verdict over the fresh
    // columns trusts the map.
    let fresh: Vec<_> = [0, 2].iter().map(|&i| labels[i].clone()).collect();
    assert!(matches!(parity_map_verdict(&fresh), ParityMapVerdict::Use { .. }));
    // `raidctl -c` with these three fails the stale one and keeps the others' counter.
    let given: Vec<_> = labels.iter().map(Some).collect();
    assert_eq!(
        check_labels('5', 3, &given),
        ConfigureCheck::Configures {
            serial_number: 1007,
            mod_counter: labels[0].mod_counter,
            failed: vec![1],
            parity_good: true
        }
    );
}

#[test]
fn mapping_finds_every_written_sector_where_the_driver_put_it() {
    for (name, bytes) in SETS {
        let images = set(name);
        let g = geometry(&label_of(&images[0]));
        let sectors = bytes / S;
        for r in 0..sectors {
            let m = g.map(r).unwrap();
            let want = pattern_sector(name, r);
            let image = &images[m.data.column as usize];
            // fail5's column 1 was failed after the data went in, so it still holds it.
            assert_eq!(data_sector(image, m.data.sector), &want[..], "{name}: RAID sector {r} at {:?}", m.data);
            if g.level == Level::Raid1 {
                let mirror = m.redundancy.unwrap();
                assert_eq!(data_sector(&images[mirror.column as usize], mirror.sector), &want[..], "{name} mirror {r}");
            }
        }
    }
}

#[test]
fn every_non_zero_component_sector_is_accounted_for() {
    // The converse: each non-zero data-area sector is a pattern sector the mapping puts
    // there, a mirror copy, or the parity of its stripe.
    for (name, bytes) in SETS {
        let images = set(name);
        let g = geometry(&label_of(&images[0]));
        let su = g.sect_per_su;
        for (column, image) in images.iter().enumerate() {
            for sector in 0..g.sectors_per_disk {
                let got = data_sector(image, sector);
                if got.iter().all(|&b| b == 0) {
                    continue;
                }
                let here = Location { column: column as u32, sector };
                if let Some(r) = g.raid_sector_of(here) {
                    assert!(r < bytes / S, "{name}: data past what was written at {here:?}");
                    assert_eq!(got, &pattern_sector(name, r)[..], "{name} {here:?}");
                    continue;
                }
                let stripe = sector / su;
                match g.level {
                    Level::Raid1 => {
                        let twin = data_sector(&images[column - 1], sector);
                        assert_eq!(got, twin, "{name}: mirror {here:?}");
                    }
                    Level::Raid4 | Level::Raid5 => {
                        assert_eq!(g.redundancy_column(stripe), Some(column as u32), "{name} {here:?}");
                        let mut xor = vec![0u8; SECTOR];
                        for (c, other) in images.iter().enumerate() {
                            if c != column {
                                for (x, b) in xor.iter_mut().zip(data_sector(other, sector)) {
                                    *x ^= b;
                                }
                            }
                        }
                        assert_eq!(got, &xor[..], "{name}: parity {here:?}");
                    }
                    Level::Raid0 => panic!("{name}: unexplained sector {here:?}"),
                }
            }
        }
    }
}

#[test]
fn raid5_parity_rotates_left_from_the_last_column() {
    let images = set("raid5");
    let g = geometry(&label_of(&images[0]));
    // 49152 bytes = 6 stripes of 2 × 8 sectors; the driver's parity sits on 2, 1, 0, 2, 1, 0.
    let parity_columns: Vec<u32> = (0..6u64)
        .map(|stripe| {
            let sector = stripe * g.sect_per_su;
            let holders: Vec<u32> = (0..3u32)
                .filter(|&c| {
                    let s = data_sector(&images[c as usize], sector);
                    !s.starts_with(b"raid5 s")
                })
                .collect();
            assert_eq!(holders.len(), 1, "stripe {stripe}");
            holders[0]
        })
        .collect();
    assert_eq!(parity_columns, vec![2, 1, 0, 2, 1, 0]);
    assert_eq!(parity_columns, (0..6).map(|s| g.redundancy_column(s).unwrap()).collect::<Vec<_>>());
}

#[test]
fn parity_map_regions_are_as_large_as_the_driver_makes_them() {
    // Eight regions set with `raidctl -M set 8 40000 8`; 497 sectors of zeros written, then
    // killed. 248 stripes of 16 data sectors make regions of 31 stripes, 496 sectors, so the
    // write ends one sector into region 1. (The same run writing 496 sectors marked region 0
    // alone, byte 0x01.)
    let images = set("regions5");
    let label = label_of(&images[0]);
    assert_eq!(label.parity_map_regions, 8);
    let g = geometry(&label);
    let size = layout::region_size_sectors(g.stripe_units_per_disk(), 8, g.data_sectors_per_stripe());
    assert_eq!(size, 496);
    let written = 254464 / S;
    let last_region = (written - 1) / size;
    for image in &images {
        let map = map_of(image);
        assert_eq!(map.bits[0], 0x03, "bit i is 1 << (i % 8) of byte i / 8");
        assert_eq!(map.dirty_regions().collect::<Vec<_>>(), (0..=last_region as usize).collect::<Vec<_>>());
    }
    assert!(assess_all(&images.iter().map(|i| label_of(i)).collect::<Vec<_>>())[0].1.clean);
    assert_eq!(
        parity_map_verdict(&images.iter().map(|i| label_of(i)).collect::<Vec<_>>()),
        ParityMapVerdict::Use { regions: 8, tickms: 40000, ntick: 8 }
    );
}

#[test]
fn a_rebuilt_hot_spare_takes_over_its_column() {
    // Column 1 failed and rebuilt onto the hot spare /disk3 with `raidctl -F`, then `-u`.
    let images = set("spare5");
    let labels: Vec<_> = images.iter().map(|i| label_of(i)).collect();
    let spare = &labels[3];
    assert_eq!((spare.column, spare.disk_status(), spare.is_clean()), (1, Some(DiskStatus::Optimal), true));
    assert_eq!(spare.mod_counter, labels[0].mod_counter);
    assert!(labels[1].mod_counter < labels[0].mod_counter);
    let sets = assess_all(&labels);
    assert_eq!(sets.len(), 1);
    let a = &sets[0].1;
    assert_eq!(a.columns, vec![ColumnState::Fresh(0), ColumnState::Fresh(3), ColumnState::Fresh(2)]);
    assert_eq!(a.stale, vec![1]);
    assert!(a.configurable && a.clean);
    // The rebuild recreated column 1 (data and parity) on the spare, sector for sector.
    let g = geometry(spare);
    for sector in 0..g.sectors_per_disk {
        assert_eq!(data_sector(&images[3], sector), data_sector(&images[1], sector), "sector {sector}");
    }
    let m = g.map(8).unwrap();
    assert_eq!(m.data.column, 1);
    assert_eq!(data_sector(&images[3], m.data.sector), &pattern_sector("spare5", 8)[..]);
}

#[test]
fn config_files_parse_and_raidctl_g_output_prints_back_exactly() {
    for name in SETS.iter().map(|s| s.0).chain(ZERO_SETS).chain(SPARE_SETS) {
        let given = RaidConfig::parse(&text(&format!("{name}.conf"))).unwrap();
        let printed_by_raidctl = text(&format!("{name}.raidctl-G.txt"));
        let read_back = RaidConfig::parse(&printed_by_raidctl).unwrap();
        assert_eq!(read_back, given, "{name}");
        assert_eq!(given.to_text(Some("/dev/rraid0d")), printed_by_raidctl, "{name}");
        let label = label_of(&set(name)[0]);
        assert_eq!(given.num_columns, label.num_columns);
        assert_eq!(given.layout.sect_per_su, label.sect_per_su);
        assert_eq!(given.layout.level.as_char(), label.level_char().unwrap());
        assert_eq!(given.queue.max_outstanding, label.max_outstanding);
    }
}
