use uraid_engine::metadata::{ArrayMetadata, DeviceRole, MetaChange, MetaError, MetaOp, MetaWhat};
use uraid_engine::SlotState;
use uraid_raidframe_format::freshness::{assess_all, ColumnState};
use uraid_raidframe_format::label::{ComponentLabel, PMLABEL_DISABLE, PMLABEL_VALID, PMLABEL_WASUSED, RAID_CLEAN};
use uraid_raidframe_format::layout::{parity_map_offset, ParityMap, LABEL_OFFSET};

use uraid_raidframe_format::mapping::Geometry as RaidGeometry;
use uraid_raidframe_format::Level;

use super::{RaidframeMetadata, RaidframeStart};
use crate::set_plan::MapStart;

/// A label of the set these tests start from (mod_counter 20).
fn label(level: u8, columns: i32, column: i32) -> ComponentLabel {
    crate::test_labels::label(level, columns, column, 20)
}

fn start(level: u8, columns: usize, map: MapStart) -> RaidframeStart {
    RaidframeStart {
        labels: (0..columns).map(|c| Some(label(level, columns as i32, c as i32))).collect(),
        device_columns: (0..columns).collect(),
        mod_counter: 20,
        sector_bytes: 512,
        geometry: RaidGeometry::new(Level::from_char(level as char).unwrap(), columns as u32, 8, 1000).unwrap(),
        writable: true,
        redundant: level != b'0',
        labels_clean: true,
        needs_resync: false,
        parity_map: map,
        rebuilding: vec![],
    }
}

fn raid5() -> RaidframeMetadata {
    RaidframeMetadata::new(start(
        b'5',
        3,
        MapStart::InUse { on_disk: Some(Box::new(ParityMap::clean())), regions: 1, tickms: 40000, ntick: 8 },
    ))
}

fn whole(columns: usize) -> Vec<DeviceRole> {
    (0..columns).map(|slot| DeviceRole::Slot { slot, state: SlotState::InSync, rebuilt: 0 }).collect()
}

/// Perform every queued step on `disks` (one byte vector per device), as the driver would.
fn perform(meta: &mut RaidframeMetadata, disks: &mut [Vec<u8>]) -> Vec<Vec<MetaOp>> {
    let mut steps = Vec::new();
    while let Some(step) = meta.next_step() {
        for op in &step.ops {
            if let MetaOp::Write { device, offset, data, .. } = op {
                let at = *offset as usize;
                disks[*device][at..at + data.len()].copy_from_slice(data);
            }
        }
        steps.push(step.ops);
        meta.step_done(Ok(()));
    }
    steps
}

fn label_on(disk: &[u8]) -> ComponentLabel {
    ComponentLabel::parse(&disk[LABEL_OFFSET as usize..]).unwrap()
}

fn map_on(disk: &[u8]) -> ParityMap {
    ParityMap::parse(&disk[parity_map_offset(512) as usize..][..512]).unwrap()
}

fn bitmap_writes(steps: &[Vec<MetaOp>]) -> usize {
    steps.iter().flatten().filter(|op| matches!(op, MetaOp::Write { what: MetaWhat::Bitmap, .. })).count()
}

fn label_writes(steps: &[Vec<MetaOp>]) -> usize {
    steps.iter().flatten().filter(|op| matches!(op, MetaOp::Write { what: MetaWhat::Label, .. })).count()
}

#[test]
fn the_first_write_marks_every_label_dirty_and_the_close_marks_them_clean() {
    let mut meta = raid5();
    let mut disks = vec![vec![0u8; 32768]; 3];
    let t = meta.record(MetaChange::Dirty, &whole(3), 0).unwrap().expect("labels written");
    let steps = perform(&mut meta, &mut disks);
    assert!(meta.durable(t));
    // The labels, then a flush of each component; the trusted map is left as it is.
    assert_eq!(steps.len(), 2);
    assert_eq!((label_writes(&steps), bitmap_writes(&steps)), (3, 0));
    assert!(steps[1].iter().all(|op| matches!(op, MetaOp::Flush { .. })));
    for disk in &disks {
        let l = label_on(disk);
        assert_eq!((l.mod_counter, l.parity_map_modcount, l.clean), (21, 21, 0));
    }
    assert!(meta.is_dirty() && meta.writes_recorded());
    assert_eq!(meta.record(MetaChange::Dirty, &whole(3), 0).unwrap(), None, "recorded already");
    meta.record(MetaChange::IntentSet(0..1), &whole(3), 0).unwrap().expect("region marked");
    perform(&mut meta, &mut disks);
    meta.record(MetaChange::Clean, &whole(3), 0).unwrap().expect("labels written");
    perform(&mut meta, &mut disks);
    for (c, disk) in disks.iter().enumerate() {
        let l = label_on(disk);
        assert_eq!((l.mod_counter, l.clean, l.status, l.column), (22, RAID_CLEAN, 0, c as i32));
        assert_eq!(l.parity_map_flags, PMLABEL_VALID | PMLABEL_WASUSED);
        assert_eq!(map_on(disk), ParityMap::clean());
    }
    assert!(!meta.is_dirty());
    assert_eq!(meta.write_intent().unwrap().dirty_chunks(), 0);
    assert_eq!(meta.record(MetaChange::Clean, &whole(3), 0).unwrap(), None, "nothing changed");
}

/// RAID 1's regions count the array's bytes, as the engine's driver counts a mirror's: a stripe
/// holds one unit per pair of components.
#[test]
fn raid1_regions_count_the_array_bytes() {
    let map = MapStart::InUse { on_disk: Some(Box::new(ParityMap::clean())), regions: 4, tickms: 40000, ntick: 8 };
    for (columns, pairs) in [(2, 1), (4, 2)] {
        let meta = RaidframeMetadata::new(start(b'1', columns, map.clone()));
        assert_eq!(meta.write_intent().unwrap().chunk_bytes, 32 * 8 * 512 * pairs);
    }
}

fn raid5_regions(regions: u32, on_disk: Option<ParityMap>) -> RaidframeStart {
    start(b'5', 3, MapStart::InUse { on_disk: on_disk.map(Box::new), regions, tickms: 40000, ntick: 8 })
}

/// `rf_paritymap_begin`: a region is marked on every component and flushed before the write,
/// the labels untouched; marked already, nothing is written; cleared once idle, the map is
/// written again.
#[test]
fn a_write_marks_only_its_regions_in_the_map() {
    let mut meta = RaidframeMetadata::new(raid5_regions(4, Some(ParityMap::clean())));
    let mut disks = vec![vec![0u8; 32768]; 3];
    // 1000 sectors of 8-sector units: 125 stripes, 32 to a region, 128 KiB of each component.
    let intent = meta.write_intent().expect("a map in use");
    assert_eq!((intent.chunk_bytes, intent.chunks, intent.all_dirty), (32 * 8 * 512, 4, false));
    meta.record(MetaChange::Dirty, &whole(3), 0).unwrap();
    perform(&mut meta, &mut disks);
    let t = meta.record(MetaChange::IntentSet(1..3), &whole(3), 0).unwrap().expect("map written");
    let steps = perform(&mut meta, &mut disks);
    assert!(meta.durable(t));
    assert_eq!((label_writes(&steps), bitmap_writes(&steps)), (0, 3), "the map alone, on every component");
    assert!(steps[1].iter().all(|op| matches!(op, MetaOp::Flush { .. })), "flushed before the writes go out");
    for disk in &disks {
        assert_eq!(map_on(disk).dirty_regions().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(label_on(disk).mod_counter, 21, "the labels keep their counter");
    }
    assert_eq!(meta.record(MetaChange::IntentSet(2..3), &whole(3), 0).unwrap(), None, "marked already");
    // Regions past the map's count are fictional: never marked.
    assert_eq!(meta.record(MetaChange::IntentSet(4..9), &whole(3), 0).unwrap(), None);
    meta.record(MetaChange::IntentClear(1..2), &whole(3), 0).unwrap().expect("map written");
    perform(&mut meta, &mut disks);
    assert_eq!(map_on(&disks[0]).dirty_regions().collect::<Vec<_>>(), vec![2]);
    let intent = meta.write_intent().unwrap();
    assert!(intent.is_dirty(2) && !intent.is_dirty(1));
}

/// A set that crashed with regions marked: only those regions are owed a resync.
#[test]
fn a_crashed_set_owes_only_the_regions_its_map_marks() {
    let mut on_disk = ParityMap::clean();
    on_disk.set_dirty(3, true);
    let mut st = raid5_regions(4, Some(on_disk));
    st.needs_resync = true;
    let meta = RaidframeMetadata::new(st);
    let intent = meta.write_intent().unwrap();
    assert!(!intent.all_dirty);
    assert_eq!((0..4).filter(|&r| intent.is_dirty(r)).collect::<Vec<_>>(), vec![3]);
    assert!(meta.needs_resync());
}

/// A map the kernel would not trust: replaced with the first dirty labels, wholly dirty when a
/// resync is owed (the kernel's invalidate) and clean when not (its forceclean).
#[test]
fn an_untrusted_map_is_replaced_before_it_is_relied_on() {
    for owed in [false, true] {
        let mut st = raid5_regions(4, None);
        st.needs_resync = owed;
        st.labels_clean = !owed;
        let mut meta = RaidframeMetadata::new(st);
        let mut disks = vec![vec![0xaau8; 32768]; 3];
        assert_eq!(meta.write_intent().unwrap().all_dirty, owed);
        assert!(!meta.writes_recorded(), "the map on disk cannot be relied on yet");
        meta.record(MetaChange::Dirty, &whole(3), 0).unwrap().expect("labels and map written");
        let steps = perform(&mut meta, &mut disks);
        assert_eq!((label_writes(&steps), bitmap_writes(&steps)), (3, 3));
        let want = if owed { ParityMap::all_dirty() } else { ParityMap::clean() };
        assert!(disks.iter().all(|d| map_on(d) == want));
        let marked = meta.record(MetaChange::IntentSet(0..1), &whole(3), 0).unwrap();
        assert_eq!(marked.is_some(), !owed, "a wholly dirty map needs no more marks");
    }
}

#[test]
fn a_failed_component_is_left_behind_and_found_stale() {
    let mut meta = raid5();
    let mut disks = vec![vec![0u8; 32768]; 3];
    for (c, disk) in disks.iter_mut().enumerate() {
        let l = label(b'5', 3, c as i32);
        disk[LABEL_OFFSET as usize..][..1024].copy_from_slice(&l.to_area(1024));
    }
    meta.record(MetaChange::Dirty, &whole(3), 0).unwrap();
    perform(&mut meta, &mut disks);
    let mut roles = whole(3);
    roles[1] = DeviceRole::Slot { slot: 1, state: SlotState::Faulty, rebuilt: 0 };
    meta.membership_changed();
    meta.record(MetaChange::Roles, &roles, 0).unwrap().expect("labels written");
    let steps = perform(&mut meta, &mut disks);
    assert!(steps.iter().flatten().all(|op| op.device() != 1), "nothing written to the failed component");
    meta.record(MetaChange::Clean, &roles, 0).unwrap();
    perform(&mut meta, &mut disks);
    let labels: Vec<ComponentLabel> = disks.iter().map(|d| label_on(d)).collect();
    assert_eq!(labels.iter().map(|l| l.mod_counter).collect::<Vec<_>>(), vec![23, 21, 23]);
    assert_eq!(labels[0].status, 0, "the survivors record themselves optimal");
    let (_, set) = &assess_all(&labels)[0];
    assert_eq!(set.columns, vec![ColumnState::Fresh(0), ColumnState::Missing, ColumnState::Fresh(2)]);
    assert_eq!(set.stale, vec![1]);
    assert!(set.configurable && set.clean);
    assert_eq!(meta.live_columns(), &[true, false, true]);
}

#[test]
fn a_set_found_dirty_stays_dirty_until_resynced() {
    let mut s = start(b'1', 2, MapStart::Disabled);
    s.labels_clean = false;
    s.needs_resync = true;
    s.labels.iter_mut().flatten().for_each(|l| l.clean = 0);
    let mut meta = RaidframeMetadata::new(s);
    let mut disks = vec![vec![0u8; 32768]; 2];
    assert!(meta.writes_recorded(), "the labels say dirty already: writes need nothing first");
    assert_eq!(meta.record(MetaChange::Dirty, &whole(2), 0).unwrap(), None);
    assert_eq!(meta.record(MetaChange::Clean, &whole(2), 0).unwrap(), None, "a resync is owed");
    meta.record(MetaChange::ResyncDone, &whole(2), 0).unwrap();
    meta.record(MetaChange::Clean, &whole(2), 0).unwrap().expect("labels written");
    let steps = perform(&mut meta, &mut disks);
    assert!(steps.iter().flatten().all(|op| !matches!(op, MetaOp::Write { what: MetaWhat::Bitmap, .. })));
    let l = label_on(&disks[0]);
    assert_eq!((l.mod_counter, l.clean), (21, RAID_CLEAN));
    assert_eq!(l.parity_map_flags & PMLABEL_DISABLE, PMLABEL_DISABLE);
}

#[test]
fn raid0_writes_no_dirty_mark() {
    let mut meta = RaidframeMetadata::new(start(b'0', 2, MapStart::NoParity));
    assert_eq!(meta.record(MetaChange::Dirty, &whole(2), 0).unwrap(), None);
    assert!(meta.writes_recorded() && !meta.is_dirty());
    assert_eq!(meta.record(MetaChange::Clean, &whole(2), 0).unwrap(), None);
}

#[test]
fn a_component_whose_label_write_fails_takes_no_more_updates() {
    let mut meta = raid5();
    meta.record(MetaChange::Dirty, &whole(3), 0).unwrap();
    let step = meta.next_step().unwrap();
    assert!(step.ops.iter().any(|op| op.device() == 2));
    meta.step_failed_on(2);
    let again = meta.next_step().unwrap();
    assert!(again.ops.iter().all(|op| op.device() != 2));
    assert_eq!(meta.live_columns(), &[true, true, false]);
}

#[test]
fn read_only_sets_write_nothing() {
    let mut s = start(b'5', 3, MapStart::Disabled);
    s.writable = false;
    let mut meta = RaidframeMetadata::new(s);
    assert_eq!(meta.record(MetaChange::Dirty, &whole(3), 0), Err(MetaError::ReadOnly));
}

/// Column 1 rebuilt onto a blank component: at every point a crash could stop the sequence,
/// autoconfiguration trusts the component only once it is wholly rebuilt.
#[test]
fn a_rebuilt_column_is_written_only_once_in_sync() {
    let mut st = start(
        b'5',
        3,
        MapStart::InUse { on_disk: Some(Box::new(ParityMap::clean())), regions: 1, tickms: 40000, ntick: 8 },
    );
    st.rebuilding = vec![1];
    let mut meta = RaidframeMetadata::new(st);
    let mut disks = vec![vec![0u8; 32768]; 3];
    for c in [0, 2] {
        disks[c][LABEL_OFFSET as usize..][..1024].copy_from_slice(&label(b'5', 3, c as i32).to_area(1024));
    }
    let rebuilding = |state: SlotState| -> Vec<DeviceRole> {
        (0..3)
            .map(|slot| DeviceRole::Slot { slot, state: if slot == 1 { state } else { SlotState::InSync }, rebuilt: 0 })
            .collect()
    };
    let fresh_columns = |disks: &[Vec<u8>]| -> Vec<usize> {
        let labels: Vec<ComponentLabel> =
            disks.iter().filter_map(|d| ComponentLabel::parse(&d[LABEL_OFFSET as usize..]).ok()).collect();
        let (_, set) = assess_all(&labels).remove(0);
        (0..3).filter(|&c| set.columns[c] != ColumnState::Missing).collect()
    };
    // Before and while it is rebuilt: the survivors are written, the rebuilt component never.
    meta.record(MetaChange::Roles, &rebuilding(SlotState::Recovering), 0).unwrap();
    perform(&mut meta, &mut disks);
    meta.record(MetaChange::Dirty, &rebuilding(SlotState::Recovering), 0).unwrap();
    perform(&mut meta, &mut disks);
    assert!(disks[1].iter().all(|&b| b == 0), "nothing is written to a component being rebuilt");
    assert_eq!(fresh_columns(&disks), vec![0, 2]);
    // In sync: its label joins the others'.
    meta.record(MetaChange::Roles, &whole(3), 0).unwrap();
    perform(&mut meta, &mut disks);
    let l = label_on(&disks[1]);
    assert_eq!((l.column, l.status, l.mod_counter), (1, 0, label_on(&disks[0]).mod_counter));
    assert_eq!(fresh_columns(&disks), vec![0, 1, 2]);
}

/// A rebuild target that fails before it is in sync never joins.
#[test]
fn a_rebuild_target_that_fails_never_joins() {
    let mut st = start(b'5', 3, MapStart::Disabled);
    st.rebuilding = vec![2];
    let mut meta = RaidframeMetadata::new(st);
    let mut disks = vec![vec![0u8; 32768]; 3];
    let roles = |state: SlotState| -> Vec<DeviceRole> {
        (0..3)
            .map(|slot| DeviceRole::Slot { slot, state: if slot == 2 { state } else { SlotState::InSync }, rebuilt: 0 })
            .collect()
    };
    meta.record(MetaChange::Roles, &roles(SlotState::Faulty), 0).unwrap();
    meta.record(MetaChange::Roles, &roles(SlotState::InSync), 0).unwrap();
    perform(&mut meta, &mut disks);
    assert!(disks[2].iter().all(|&b| b == 0));
}
