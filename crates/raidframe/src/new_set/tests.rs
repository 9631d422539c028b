use uraid_raidframe_format::config_file::RaidConfig;
use uraid_raidframe_format::label::{PMLABEL_VALID, PMLABEL_WASUSED, RAID_DIRTY};

use super::*;

fn config(level: char, columns: usize) -> RaidConfig {
    let disks: Vec<String> = (0..columns).map(|c| format!("/disk{c}")).collect();
    RaidConfig::parse(&format!(
        "START array\n1 {columns} 0\nSTART disks\n{}\nSTART layout\n32 1 1 {level}\nSTART queue\nfifo 100\n",
        disks.join("\n")
    ))
    .unwrap()
}

#[test]
fn labels_are_what_c_i_u_leave_on_the_driver() {
    // The driver's labels after `-C; -I 2026; -u` on three 4 MiB components (RAID 5).
    let labels = new_labels(&config('5', 3), &[Some(8192); 3], Some(2026)).unwrap();
    for (column, label) in labels.iter().enumerate() {
        let l = label.as_ref().unwrap();
        assert_eq!((l.serial_number, l.mod_counter, l.parity_map_modcount), (2026, 7, 7));
        assert_eq!((l.column, l.num_columns, l.row, l.num_rows), (column as i32, 3, 0, 1));
        assert_eq!((l.clean, l.status, l.num_blocks, l.partition_size), (RAID_DIRTY, 0, 8128, 8192));
        assert_eq!((l.sect_per_su, l.sus_per_pu, l.sus_per_ru, l.parity_config), (32, 1, 1, '5' as i32));
        assert_eq!(
            (l.parity_map_flags, l.parity_map_tickms, l.parity_map_ntick, l.parity_map_regions),
            (PMLABEL_VALID | PMLABEL_WASUSED, 40000, 8, 1)
        );
        assert_eq!((l.max_outstanding, l.autoconfigure, l.last_unit), (100, 0, 0));
    }
    // `-C; -u` alone: serial 0, counter 5.
    let l = new_labels(&config('5', 3), &[Some(8192); 3], None).unwrap()[0].clone().unwrap();
    assert_eq!((l.serial_number, l.mod_counter), (0, 5));
}

#[test]
fn raid0_has_no_map_fields_but_the_modcount() {
    let l = new_labels(&config('0', 2), &[Some(8192); 2], Some(5)).unwrap()[1].clone().unwrap();
    assert_eq!((l.mod_counter, l.parity_map_modcount, l.parity_map_flags, l.parity_map_regions), (7, 7, 0, 0));
}

#[test]
fn the_smallest_component_sets_num_blocks_and_absent_columns_get_none() {
    let labels = new_labels(&config('1', 2), &[Some(3000), None], Some(1)).unwrap();
    assert_eq!(labels[0].as_ref().unwrap().num_blocks, 2936);
    assert!(labels[1].is_none());
    let labels = new_labels(&config('5', 3), &[Some(4000), Some(3000), Some(5000)], None).unwrap();
    assert!(labels.iter().all(|l| l.as_ref().unwrap().num_blocks == 2936));
    assert_eq!(labels[2].as_ref().unwrap().partition_size, 5000);
}

#[test]
fn impossible_sets_are_refused() {
    assert_eq!(new_labels(&config('5', 3), &[None; 3], None), Err(NewSetError::NoComponents));
    assert_eq!(
        new_labels(&config('5', 3), &[Some(8192), Some(64), Some(8192)], None),
        Err(NewSetError::TooSmall { column: 1, sectors: 64 })
    );
    assert!(matches!(new_labels(&config('5', 3), &[Some(8192); 2], None), Err(NewSetError::ColumnCount { .. })));
}
