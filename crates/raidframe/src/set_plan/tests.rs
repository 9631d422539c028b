use uraid_engine::geometry::Layout;
use uraid_raidframe_format::config_file::RaidConfig;
use uraid_raidframe_format::configure_check::Refusal;
use uraid_raidframe_format::label::{PMLABEL_DISABLE, PMLABEL_VALID};
use uraid_raidframe_format::layout::ParityMap;

use super::{ColumnStart, LeftOut, MapStart, ReadComponent, SetPlan, SetPlanError};

fn component(level: u8, columns: i32, column: i32, mod_counter: i32) -> ReadComponent {
    ReadComponent {
        label: crate::test_labels::label(level, columns, column, mod_counter),
        parity_map: Some(ParityMap::clean()),
    }
}

const RAID5_FILE: &str =
    "START array\n1 3 0\n\nSTART disks\n/d/c0\n/d/c1\n/d/c2\n\nSTART layout\n32 1 1 5\n\nSTART queue\nfifo 100\n";

#[test]
fn autoconfiguration_leaves_a_stale_component_out() {
    let set = vec![component(b'5', 3, 0, 20), component(b'5', 3, 1, 13), component(b'5', 3, 2, 20)];
    let plan = SetPlan::autoconfigure(&set, None).unwrap();
    assert_eq!(plan.columns, vec![ColumnStart::Fresh(0), ColumnStart::Missing, ColumnStart::Fresh(2)]);
    assert_eq!(plan.left_out, vec![(1, LeftOut::Stale { column: 1, mod_counter: 13, set_mod_counter: 20 })]);
    assert_eq!(plan.mod_counter, 20);
    assert!(!plan.needs_resync());
    // 1000 sectors: 31 stripe units of 32.
    assert_eq!(plan.layout.array_bytes(), 2 * 31 * 32 * 512);
}

#[test]
fn autoconfiguration_chooses_by_serial_and_refuses_what_netbsd_refuses() {
    let mut other = vec![component(b'1', 2, 0, 4), component(b'1', 2, 1, 4)];
    other.iter_mut().for_each(|c| c.label.serial_number = 99);
    let mut all = vec![component(b'5', 3, 0, 20), component(b'5', 3, 1, 20), component(b'5', 3, 2, 20)];
    all.extend(other);
    assert_eq!(SetPlan::autoconfigure(&all, None).unwrap_err(), SetPlanError::SeveralSets { serials: vec![77, 99] });
    let plan = SetPlan::autoconfigure(&all, Some(99)).unwrap();
    assert_eq!(plan.columns, vec![ColumnStart::Fresh(3), ColumnStart::Fresh(4)]);
    assert_eq!(plan.left_out.len(), 3);
    assert!(matches!(SetPlan::autoconfigure(&all, Some(5)), Err(SetPlanError::NoSuchSerial { serial: 5, .. })));
    let two_gone = vec![component(b'5', 3, 0, 20), component(b'5', 3, 1, 13)];
    assert_eq!(
        SetPlan::autoconfigure(&two_gone, None).unwrap_err(),
        SetPlanError::NotEnoughComponents { serial: 77, level: '5', missing: vec![1, 2], stale: vec![(1, 13, 20)] }
    );
    assert_eq!(SetPlan::autoconfigure(&[], None).unwrap_err(), SetPlanError::NoComponents);
    // Two sets under one serial (here RAID 5 and RAID 1): the kernel would run both.
    let mut same = vec![component(b'5', 3, 0, 20), component(b'5', 3, 1, 20), component(b'5', 3, 2, 20)];
    same.extend([component(b'1', 2, 0, 4), component(b'1', 2, 1, 4)]);
    assert_eq!(SetPlan::autoconfigure(&same, None).unwrap_err(), SetPlanError::SameSerial { serial: 77, sets: 2 });
}

/// A trusted map speaks for the set (NetBSD rewrites only the regions it marks); without one,
/// the labels' clean flag does.
#[test]
fn dirty_map_regions_or_dirty_labels_without_a_map_owe_a_resync() {
    let mut set = vec![component(b'5', 3, 0, 20), component(b'5', 3, 1, 20), component(b'5', 3, 2, 20)];
    let mut map = ParityMap::clean();
    map.set_dirty(0, true);
    set[1].parity_map = Some(map.clone());
    let plan = SetPlan::autoconfigure(&set, None).unwrap();
    assert!(matches!(&plan.parity_map, MapStart::InUse { on_disk: Some(m), .. } if **m == map));
    assert!(plan.needs_resync(), "clean labels, but a dirty region");
    set[1].parity_map = Some(ParityMap::clean());
    set[2].label.clean = 0;
    assert!(!SetPlan::autoconfigure(&set, None).unwrap().needs_resync(), "dirty labels, a trusted map marking nothing");
    set[2].label.parity_map_modcount = 19;
    assert!(
        SetPlan::autoconfigure(&set, None).unwrap().needs_resync(),
        "dirty labels, a map the kernel would not trust"
    );
    set[2].label.parity_map_modcount = 20;
    set.iter_mut().for_each(|c| c.label.parity_map_flags = PMLABEL_VALID | PMLABEL_DISABLE);
    let plan = SetPlan::autoconfigure(&set, None).unwrap();
    assert_eq!(plan.parity_map, MapStart::Disabled);
    assert!(plan.needs_resync());
}

#[test]
fn a_configuration_file_names_the_columns() {
    let config = RaidConfig::parse(RAID5_FILE).unwrap();
    let all: Vec<Option<ReadComponent>> = (0..3).map(|c| Some(component(b'5', 3, c, 20))).collect();
    let plan = SetPlan::from_config_file(&config, &all).unwrap();
    assert_eq!(plan.columns, vec![ColumnStart::Fresh(0), ColumnStart::Fresh(1), ColumnStart::Fresh(2)]);
    let mut stale = all.clone();
    stale[2].as_mut().unwrap().label.mod_counter = 19;
    let plan = SetPlan::from_config_file(&config, &stale).unwrap();
    assert_eq!(plan.missing_columns(), vec![2]);
    assert_eq!(plan.left_out, vec![(2, LeftOut::Maverick { column: 2 })]);
    let mut absent = all.clone();
    absent[0] = None;
    assert_eq!(SetPlan::from_config_file(&config, &absent).unwrap().missing_columns(), vec![0]);
    // Absent and stale: raidctl -c configures with both failed; RAID 5 cannot run on one.
    absent[2].as_mut().unwrap().label.mod_counter = 19;
    assert!(matches!(
        SetPlan::from_config_file(&config, &absent),
        Err(SetPlanError::NotEnoughComponents { missing, .. }) if missing == vec![0, 2]
    ));
    let mut split = all.clone();
    split[0].as_mut().unwrap().label.serial_number = 1;
    split[1].as_mut().unwrap().label.serial_number = 2;
    assert_eq!(SetPlan::from_config_file(&config, &split).unwrap_err(), SetPlanError::Refused(Refusal::TooManySerials));
}

#[test]
fn a_file_that_disagrees_with_the_labels_is_refused() {
    let config = RaidConfig::parse(&RAID5_FILE.replace("32 1 1 5", "64 1 1 5")).unwrap();
    let all: Vec<Option<ReadComponent>> = (0..3).map(|c| Some(component(b'5', 3, c, 20))).collect();
    assert_eq!(
        SetPlan::from_config_file(&config, &all).unwrap_err(),
        SetPlanError::FileDisagrees { column: 0, field: "sectPerSU", file: "64".into(), label: "32".into() }
    );
    let config = RaidConfig::parse(&RAID5_FILE.replace("32 1 1 5", "32 1 1 4")).unwrap();
    let e = SetPlan::from_config_file(&config, &all).unwrap_err();
    assert_eq!(e, SetPlanError::FileDisagrees { column: 0, field: "RAID level", file: "4".into(), label: "5".into() });
    assert!(e.to_string().contains("says RAID level 4"), "{e}");
}
