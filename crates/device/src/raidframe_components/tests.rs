use uraid_raidframe_format::label::{ComponentLabel, RAID_CLEAN};
use uraid_raidframe_format::layout::{ParityMap, LABEL_OFFSET};

use super::{read_component, write_component, ComponentError};
use crate::member::{MemberDevice, MemoryDevice};

fn label() -> ComponentLabel {
    ComponentLabel {
        serial_number: 5,
        mod_counter: 3,
        num_columns: 3,
        clean: RAID_CLEAN,
        sect_per_su: 32,
        parity_config: i32::from(b'5'),
        num_blocks: 1984,
        partition_size: 2048,
        ..ComponentLabel::default()
    }
}

fn device(label: &ComponentLabel, sectors: u64) -> MemoryDevice {
    let dev = MemoryDevice::new("c0", sectors * 512);
    dev.write_at(LABEL_OFFSET, &label.to_area(1024)).unwrap();
    dev
}

#[test]
fn a_component_reads_with_its_map() {
    let dev = device(&label(), 2048);
    let mut map = ParityMap::clean();
    map.set_dirty(3, true);
    dev.write_at(17408, &map.to_area(512)).unwrap();
    let read = read_component(&dev).unwrap();
    assert_eq!(read.label, label());
    assert_eq!(read.parity_map, Some(map));
}

#[test]
fn blank_damaged_and_truncated_components_are_told_apart() {
    let blank = MemoryDevice::new("blank", 2048 * 512);
    assert!(matches!(read_component(&blank), Err(ComponentError::NoLabel { .. })));
    assert!(!read_component(&blank).unwrap_err().is_damage());
    let torn = device(&ComponentLabel { clean: 7, ..label() }, 2048);
    let e = read_component(&torn).unwrap_err();
    assert!(matches!(e, ComponentError::Damaged { .. }) && e.is_damage(), "{e}");
    let short = device(&label(), 1500);
    let e = read_component(&short).unwrap_err();
    assert!(matches!(e, ComponentError::TooSmall { recorded: 2048, sectors: 1500, .. }), "{e}");
    assert!(e.to_string().starts_with("c0: "), "{e}");
}

#[test]
fn a_written_label_and_map_read_back_and_nothing_else_changes() {
    let dev = MemoryDevice::new("c0", 2048 * 512);
    dev.write_at(0, &[0xa5; 16384]).unwrap();
    let mut map = ParityMap::clean();
    map.set_dirty(3, true);
    write_component(&dev, &label(), Some(&map)).unwrap();
    let read = read_component(&dev).unwrap();
    assert_eq!((read.label, read.parity_map), (label(), Some(map)));
    let mut head = vec![0u8; 16384];
    dev.read_at(0, &mut head).unwrap();
    assert!(head.iter().all(|&b| b == 0xa5), "the 16 KiB before the label are NetBSD's to keep");
}
