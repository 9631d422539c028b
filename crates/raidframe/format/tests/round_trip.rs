//! Property tests: whatever the crate writes it reads back unchanged.

use proptest::prelude::*;
use uraid_raidframe_format::config_file::{LayoutLine, QueueLine, RaidConfig};
use uraid_raidframe_format::label::{ComponentLabel, FUTURE_USE2_WORDS, FUTURE_USE_WORDS, LABEL_STRUCT_SIZE};
use uraid_raidframe_format::layout::{ParityMap, PARITY_MAP_BYTES};
use uraid_raidframe_format::mapping::{Geometry, Level};
use uraid_raidframe_format::ByteOrder;

fn any_level() -> impl Strategy<Value = Level> {
    prop_oneof![Just(Level::Raid0), Just(Level::Raid1), Just(Level::Raid4), Just(Level::Raid5)]
}

prop_compose! {
    /// Any label with a version the parser knows, every other word arbitrary.
    fn any_label()(
        big in any::<bool>(),
        version in 1i32..=2,
        head in prop::array::uniform16(any::<i32>()),
        sizes in (any::<u64>(), any::<u64>()),
        pm in (any::<i32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
        future in prop::collection::vec(any::<i32>(), FUTURE_USE_WORDS),
        tail in prop::array::uniform4(any::<i32>()),
        future2 in prop::collection::vec(any::<i32>(), FUTURE_USE2_WORDS),
    ) -> ComponentLabel {
        ComponentLabel {
            byte_order: if big { ByteOrder::Big } else { ByteOrder::Little },
            version,
            serial_number: head[0],
            mod_counter: head[1],
            row: head[2],
            column: head[3],
            num_rows: head[4],
            num_columns: head[5],
            clean: head[6],
            status: head[7],
            sect_per_su: head[8],
            sus_per_pu: head[9],
            sus_per_ru: head[10],
            parity_config: head[11],
            max_outstanding: head[12],
            block_size: head[13],
            num_blocks: sizes.0,
            partition_size: sizes.1,
            parity_map_modcount: pm.0,
            parity_map_flags: pm.1,
            parity_map_tickms: pm.2,
            parity_map_ntick: pm.3,
            parity_map_regions: pm.4,
            future_use: future.try_into().unwrap(),
            autoconfigure: tail[0],
            root_partition: tail[1],
            last_unit: tail[2],
            config_order: tail[3],
            future_use2: future2.try_into().unwrap(),
        }
    }
}

prop_compose! {
    /// A label the kernel's sanity test accepts.
    fn reasonable_label()(label in any_label(), cols in 1i32..=40, col_seed in any::<u32>(), clean in 0i32..=1,
                          bs in 1i32..=65536, blocks in 1u64..=u64::MAX) -> ComponentLabel {
        ComponentLabel {
            row: 0,
            num_rows: 1,
            num_columns: cols,
            column: (col_seed % cols as u32) as i32,
            clean,
            block_size: bs,
            num_blocks: blocks,
            ..label
        }
    }
}

fn device() -> impl Strategy<Value = String> {
    prop_oneof![Just("absent".to_string()), "/dev/[a-z]{1,6}[0-9]{0,2}[a-p]?", "/disk[0-9]{1,2}"]
}

prop_compose! {
    fn any_config()(
        columns in 1usize..=8,
        spares in prop::collection::vec(device(), 0..=3),
        disks in prop::collection::vec(device(), 8),
        su in 1i32..=4096, pu in 1i32..=4, ru in 1i32..=4, level in any_level(),
        queue_type in prop_oneof![Just("fifo"), Just("cvscan"), Just("sstf"), Just("scan"), Just("cscan")],
        max_outstanding in 1i32..=1000,
        debug in prop::collection::vec("[a-zA-Z]{1,12} [0-9]{1,4}", 0..=3),
    ) -> RaidConfig {
        RaidConfig {
            num_rows: 1,
            num_columns: columns as i32,
            disks: disks[..columns].to_vec(),
            spares,
            layout: LayoutLine { sect_per_su: su, sus_per_pu: pu, sus_per_ru: ru, level },
            queue: QueueLine { queue_type: queue_type.to_string(), max_outstanding },
            debug,
        }
    }
}

proptest! {
    #[test]
    fn label_bytes_round_trip(label in any_label()) {
        let bytes = label.to_bytes();
        prop_assert_eq!(ComponentLabel::decode(&bytes).unwrap(), label.clone());
        prop_assert_eq!(&ComponentLabel::decode(&bytes).unwrap().to_bytes()[..], &bytes[..]);
        let area = label.to_area(1024);
        prop_assert_eq!(area.len(), 1024);
        prop_assert!(area[LABEL_STRUCT_SIZE..].iter().all(|&b| b == 0));
    }

    #[test]
    fn reasonable_labels_parse(label in reasonable_label()) {
        prop_assert_eq!(ComponentLabel::parse(&label.to_area(4096)).unwrap(), label);
    }

    #[test]
    fn parity_map_round_trip(bits in prop::collection::vec(any::<u8>(), PARITY_MAP_BYTES), extra in 0usize..4096) {
        let map = ParityMap { bits: bits.try_into().unwrap() };
        let area = map.to_area(PARITY_MAP_BYTES + extra);
        prop_assert_eq!(ParityMap::parse(&area).unwrap(), map.clone());
        let mut rebuilt = ParityMap::clean();
        for region in map.dirty_regions() {
            rebuilt.set_dirty(region, true);
        }
        prop_assert_eq!(rebuilt, map);
    }

    #[test]
    fn config_text_round_trip(config in any_config(), header in any::<bool>()) {
        let text = config.to_text(header.then_some("/dev/rraid0d"));
        prop_assert_eq!(RaidConfig::parse(&text).unwrap(), config.clone());
        // Printing what was read gives the same text again.
        prop_assert_eq!(RaidConfig::parse(&text).unwrap().to_text(header.then_some("/dev/rraid0d")), text);
    }

    #[test]
    fn mapping_is_a_bijection_onto_data_sectors(
        level in any_level(), columns in 1u32..=12, su in 1u64..=64, disk in 1u64..=4096, probe in any::<u64>()
    ) {
        let Ok(g) = Geometry::new(level, columns, su, disk) else { return Ok(()) };
        let total = g.total_sectors();
        prop_assert_eq!(total, disk / su * su * g.data_columns());
        let r = probe % total;
        let m = g.map(r).unwrap();
        prop_assert!(m.data.column < columns);
        prop_assert!(m.data.sector < disk);
        prop_assert_eq!(g.raid_sector_of(m.data), Some(r));
        if let Some(red) = m.redundancy {
            prop_assert_ne!(red.column, m.data.column);
            prop_assert_eq!(red.sector, m.data.sector);
            prop_assert_eq!(g.raid_sector_of(red), None);
            if level != Level::Raid1 {
                prop_assert_eq!(Some(red.column), g.redundancy_column(m.data.sector / su));
            }
        }
        prop_assert!(g.map(total + probe % 1000).is_err());
    }
}
