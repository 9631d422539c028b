use uraid_engine::metadata::{ArrayMetadata, DeviceRole, MetaChange, MetaOp, Ticket};
use uraid_engine::SlotState;
use uraid_vinum_format::drive_layout::{read_config_copy, ConfigCopy, DATA_START};
use uraid_vinum_format::header::HEADER_OFFSET;
use uraid_vinum_format::{
    parse_config, DriveHeader, DriveMetadata, PlexState, SubdiskState, Timeval, VinumConfig, VolumeState,
};

use super::{SaveDrive, VinumMetadata, VinumStart};

/// Volume m: two concat plexes (a, b); volume r: a raid5 plex over a, b, c; volume c: one
/// concat plex on d. Drive d holds nothing of m or r.
const CONFIG: &str = "\
volume m state up
volume r state up
volume c state up
plex name m.p0 org concat vol m state up
plex name m.p1 org concat vol m state up
plex name r.p0 org raid5 16s vol r state up
plex name c.p0 org concat vol c state up
sd name m.p0.s0 drive a len 1024s driveoffset 265s plex m.p0 plexoffset 0s state up
sd name m.p1.s0 drive b len 1024s driveoffset 265s plex m.p1 plexoffset 0s state up
sd name r.p0.s0 drive a len 512s driveoffset 1289s plex r.p0 plexoffset 0s state up
sd name r.p0.s1 drive b len 512s driveoffset 1289s plex r.p0 plexoffset 16s state up
sd name r.p0.s2 drive c len 512s driveoffset 265s plex r.p0 plexoffset 32s state up
sd name c.p0.s0 drive d len 512s driveoffset 265s plex c.p0 plexoffset 0s state up
";

const NOW: u64 = 1_800_000_000;

fn drives() -> Vec<SaveDrive> {
    ["a", "b", "c", "d"]
        .iter()
        .map(|n| SaveDrive { header: DriveHeader::new(n, "host", Timeval::new(1_700_000_000, 5)), up: true })
        .collect()
}

/// Volume m's metadata: its two slots on drives a and b (devices 0, 1), then drives c and d
/// as devices holding no slot of it.
fn mirror() -> VinumMetadata {
    VinumMetadata::new(VinumStart {
        config: parse_config(CONFIG).unwrap(),
        on_disk: parse_config(CONFIG).unwrap(),
        slot_subdisks: vec!["m.p0.s0".into(), "m.p1.s0".into()],
        drives: drives(),
        devices: vec![0, 1, 2, 3],
        writable: true,
        redundant: true,
        unclean: false,
    })
}

/// Volume c's metadata: its one slot on drive d (device 0), then drives a, b, c.
fn concat() -> VinumMetadata {
    VinumMetadata::new(VinumStart {
        config: parse_config(CONFIG).unwrap(),
        on_disk: parse_config(CONFIG).unwrap(),
        slot_subdisks: vec!["c.p0.s0".into()],
        drives: drives(),
        devices: vec![3, 0, 1, 2],
        writable: true,
        redundant: false,
        unclean: false,
    })
}

fn raid5() -> VinumMetadata {
    VinumMetadata::new(VinumStart {
        config: parse_config(CONFIG).unwrap(),
        on_disk: parse_config(CONFIG).unwrap(),
        slot_subdisks: vec!["r.p0.s0".into(), "r.p0.s1".into(), "r.p0.s2".into()],
        drives: drives(),
        devices: vec![0, 1, 2, 3],
        writable: true,
        redundant: true,
        unclean: false,
    })
}

fn slot(slot: usize, state: SlotState) -> DeviceRole {
    DeviceRole::Slot { slot, state, rebuilt: 0 }
}

fn mirror_roles(p1: SlotState) -> Vec<DeviceRole> {
    vec![slot(0, SlotState::InSync), slot(1, p1), DeviceRole::Spare, DeviceRole::Spare]
}

/// Perform every queued step on drive images (one per device), checking the order of the
/// groups; returns the images.
fn perform(meta: &mut VinumMetadata, images: &mut [Vec<u8>]) -> Vec<Vec<(usize, Option<u64>)>> {
    let mut outline = Vec::new();
    while let Some(step) = meta.next_step() {
        let mut ops = Vec::new();
        for op in &step.ops {
            match op {
                MetaOp::Write { device, offset, data, .. } => {
                    images[*device][*offset as usize..*offset as usize + data.len()].copy_from_slice(data);
                    ops.push((*device, Some(*offset)));
                }
                MetaOp::Flush { device } => ops.push((*device, None)),
            }
        }
        outline.push(ops);
        meta.step_done(Ok(()));
    }
    outline
}

fn images() -> Vec<Vec<u8>> {
    vec![vec![0u8; DATA_START as usize]; 4]
}

fn saved(image: &[u8]) -> (DriveHeader, VinumConfig) {
    let m = DriveMetadata::parse(image).expect("a whole drive");
    assert_eq!(read_config_copy(image, ConfigCopy::Second).unwrap(), m.config_text, "both copies alike");
    (m.header, parse_config(&m.config_text).unwrap())
}

#[test]
fn a_failed_subdisk_is_saved_stale_to_every_drive_copies_first_header_last() {
    let mut meta = raid5();
    let roles =
        vec![slot(0, SlotState::InSync), slot(1, SlotState::Faulty), slot(2, SlotState::InSync), DeviceRole::Spare];
    let ticket = meta.record(MetaChange::Roles, &roles, NOW).unwrap().expect("a save");
    let mut imgs = images();
    let outline = perform(&mut meta, &mut imgs);
    let copy2 = DATA_START - 65536;
    let writes = |at: u64| (0..4).map(|d| (d, Some(at))).collect::<Vec<_>>();
    let flushes = (0..4).map(|d| (d, None)).collect::<Vec<_>>();
    assert_eq!(
        outline,
        vec![writes(copy2), flushes.clone(), writes(4608), flushes.clone(), writes(HEADER_OFFSET), flushes]
    );
    assert!(meta.durable(ticket));
    for img in &imgs {
        let (header, config) = saved(img);
        assert_eq!(header.label.last_update, Timeval::new(NOW, 0), "one last_update for the save");
        assert_eq!(header.label.date_of_birth, Timeval::new(1_700_000_000, 5), "birth kept");
        assert_eq!(config.subdisk("r.p0.s1").unwrap().state, SubdiskState::Stale);
        assert_eq!(config.plex("r.p0").unwrap().state, PlexState::Degraded);
        assert_eq!(config.volume("r").unwrap().state, VolumeState::Up);
        // The other volume is saved as it was.
        assert_eq!(config.plex("m.p1").unwrap().state, PlexState::Up);
    }
    // Nothing changed: nothing to save.
    assert_eq!(meta.record(MetaChange::Roles, &roles, NOW + 1).unwrap(), None);
}

#[test]
fn a_mirror_is_saved_dirty_with_the_unclean_mark_and_every_plex_up() {
    let mut meta = mirror();
    assert!(!meta.writes_recorded());
    let roles = mirror_roles(SlotState::InSync);
    meta.record(MetaChange::Dirty, &roles, NOW).unwrap().expect("a save");
    assert!(meta.writes_recorded() && meta.is_dirty());
    let mut imgs = images();
    perform(&mut meta, &mut imgs);
    let (header, dirty) = saved(&imgs[2]);
    assert!(header.label.last_update.marks_unclean());
    // Every plex stays up: after a crash any whole plex serves (the others are made alike
    // with it), even if the first plex's drives are gone.
    assert_eq!(dirty.subdisk("m.p0.s0").unwrap().state, SubdiskState::Up);
    assert_eq!(dirty.subdisk("m.p1.s0").unwrap().state, SubdiskState::Up);
    assert_eq!(meta.record(MetaChange::Dirty, &roles, NOW).unwrap(), None);
    meta.record(MetaChange::Clean, &roles, NOW + 5).unwrap().expect("a save");
    perform(&mut meta, &mut imgs);
    let (header, clean) = saved(&imgs[3]);
    assert_eq!(clean.subdisk("m.p1.s0").unwrap().state, SubdiskState::Up);
    assert_eq!(header.label.last_update.seconds, NOW + 5);
    assert!(!header.label.last_update.marks_unclean());
    assert!(!meta.is_dirty());
}

#[test]
fn a_mirror_found_unclean_owes_a_resync_and_runs_on_the_plexes_it_has() {
    let mut meta = VinumMetadata::new(VinumStart { unclean: true, ..start_of(mirror()) });
    assert!(meta.needs_resync() && meta.is_dirty());
    let roles = vec![slot(0, SlotState::Faulty), slot(1, SlotState::InSync), DeviceRole::Spare, DeviceRole::Spare];
    meta.membership_changed();
    meta.record(MetaChange::Clean, &roles, NOW).unwrap().expect("the missing plex saved");
    let mut imgs = images();
    perform(&mut meta, &mut imgs);
    let (header, config) = saved(&imgs[1]);
    assert!(header.label.last_update.marks_unclean(), "still owed its resync");
    assert_eq!(config.subdisk("m.p0.s0").unwrap().state, SubdiskState::Stale);
    meta.record(MetaChange::ResyncDone, &roles, NOW).unwrap();
    meta.record(MetaChange::Clean, &roles, NOW).unwrap().expect("saved clean");
    perform(&mut meta, &mut imgs);
    assert!(!saved(&imgs[1]).0.label.last_update.marks_unclean());
}

#[test]
fn a_volume_of_one_concat_plex_is_never_recorded_dirty() {
    let mut meta = concat();
    assert!(!meta.writes_recorded(), "its states are checked before the first write");
    let roles = vec![slot(0, SlotState::InSync), DeviceRole::Spare, DeviceRole::Spare, DeviceRole::Spare];
    assert_eq!(meta.record(MetaChange::Dirty, &roles, NOW).unwrap(), None, "the drives hold these states");
    assert!(!meta.is_dirty() && meta.writes_recorded());
    assert_eq!(meta.record(MetaChange::Clean, &roles, NOW).unwrap(), None);
    assert_eq!(meta.next_step(), None);
}

fn raid5_whole() -> Vec<DeviceRole> {
    vec![slot(0, SlotState::InSync), slot(1, SlotState::InSync), slot(2, SlotState::InSync), DeviceRole::Spare]
}

#[test]
fn a_raid5_volume_is_saved_with_the_unclean_mark_before_writes_and_without_it_once_clean() {
    let mut meta = raid5();
    let mut imgs = images();
    let dirty = meta.record(MetaChange::Dirty, &raid5_whole(), NOW).unwrap().expect("a save");
    assert!(meta.is_dirty() && meta.writes_recorded());
    perform(&mut meta, &mut imgs);
    assert!(meta.durable(dirty));
    let (header, config) = saved(&imgs[0]);
    assert!(header.label.last_update.marks_unclean(), "{:?}", header.label.last_update);
    assert_eq!(config.subdisk("r.p0.s1").unwrap().state, SubdiskState::Up, "the states are as they were");
    assert_eq!(meta.record(MetaChange::Dirty, &raid5_whole(), NOW).unwrap(), None, "recorded already");
    meta.record(MetaChange::Clean, &raid5_whole(), NOW).unwrap().expect("a save");
    perform(&mut meta, &mut imgs);
    let (clean, _) = saved(&imgs[0]);
    assert!(!clean.label.last_update.marks_unclean() && clean.label.last_update > header.label.last_update);
    assert!(!meta.is_dirty() && !meta.writes_recorded());
}

#[test]
fn a_raid5_volume_found_unclean_is_saved_clean_only_after_its_resync() {
    let mut meta = VinumMetadata::new(VinumStart { unclean: true, ..start_of(raid5()) });
    let mut imgs = images();
    assert!(meta.needs_resync() && meta.is_dirty() && meta.writes_recorded());
    assert_eq!(meta.record(MetaChange::Clean, &raid5_whole(), NOW).unwrap(), None, "still owed its resync");
    // A member failure meanwhile is saved, still marked.
    let mut roles = raid5_whole();
    roles[1] = slot(1, SlotState::Faulty);
    meta.membership_changed();
    meta.record(MetaChange::Clean, &roles, NOW).unwrap().expect("the failure saved");
    perform(&mut meta, &mut imgs);
    let (header, config) = saved(&imgs[0]);
    assert!(header.label.last_update.marks_unclean());
    assert_eq!(config.subdisk("r.p0.s1").unwrap().state, SubdiskState::Stale);
    assert_eq!(meta.record(MetaChange::ResyncDone, &roles, NOW).unwrap(), None);
    assert!(!meta.needs_resync());
    meta.record(MetaChange::Clean, &roles, NOW).unwrap().expect("saved clean");
    perform(&mut meta, &mut imgs);
    assert!(!saved(&imgs[0]).0.label.last_update.marks_unclean());
}

#[test]
fn a_subdisk_that_misses_writes_is_saved_before_the_first_write() {
    // Drive c was not found: its subdisk has no device, and is down in the states run with.
    let mut start = start_of(raid5());
    start.config.subdisks.iter_mut().find(|s| s.name == "r.p0.s2").unwrap().state = SubdiskState::Down;
    start.devices = vec![0, 1, 3];
    let mut meta = VinumMetadata::new(start);
    let roles = vec![slot(0, SlotState::InSync), slot(1, SlotState::InSync), DeviceRole::Spare];
    let ticket = meta.record(MetaChange::Dirty, &roles, NOW).unwrap().expect("the down subdisk saved");
    let mut imgs = images();
    perform(&mut meta, &mut imgs);
    assert!(meta.durable(ticket) && meta.is_dirty() && meta.writes_recorded());
    let (header, config) = saved(&imgs[0]);
    assert!(header.label.last_update.marks_unclean(), "the same save records the volume dirty");
    assert_eq!(config.subdisk("r.p0.s2").unwrap().state, SubdiskState::Down);
    assert_eq!(config.plex("r.p0").unwrap().state, PlexState::Degraded);
}

#[test]
fn a_drive_whose_save_fails_is_left_out_of_this_save_and_the_next() {
    let mut meta = raid5();
    let roles =
        vec![slot(0, SlotState::InSync), slot(1, SlotState::Faulty), slot(2, SlotState::InSync), DeviceRole::Spare];
    let ticket = meta.record(MetaChange::Roles, &roles, NOW).unwrap().unwrap();
    let first = meta.next_step().unwrap();
    assert_eq!(first.ops.len(), 4);
    meta.step_failed_on(1);
    let mut imgs = images();
    perform(&mut meta, &mut imgs);
    assert!(meta.durable(ticket));
    assert!(imgs[1].iter().all(|&b| b == 0), "drive b never written");
    assert!(!meta.drives()[1].up);
    let roles =
        vec![slot(0, SlotState::InSync), slot(1, SlotState::Faulty), slot(2, SlotState::Faulty), DeviceRole::Spare];
    meta.record(MetaChange::Roles, &roles, NOW + 1).unwrap().unwrap();
    let outline = perform(&mut meta, &mut imgs);
    assert!(outline.iter().flatten().all(|(d, _)| *d != 1), "{outline:?}");
}

#[test]
fn nothing_is_recorded_read_only_or_after_a_failure() {
    let mut meta = VinumMetadata::new(VinumStart { writable: false, ..start_of(raid5()) });
    let roles =
        vec![slot(0, SlotState::InSync), slot(1, SlotState::InSync), slot(2, SlotState::InSync), DeviceRole::Spare];
    assert!(meta.record(MetaChange::Roles, &roles, NOW).is_err());
    let mut meta = raid5();
    assert!(meta.record(MetaChange::Roles, &roles[..2], NOW).is_err(), "roles for every device");
    let roles =
        vec![slot(0, SlotState::InSync), slot(1, SlotState::Faulty), slot(2, SlotState::InSync), DeviceRole::Spare];
    meta.record(MetaChange::Roles, &roles, NOW).unwrap().expect("a save");
    meta.next_step().unwrap();
    meta.step_done(Err(uraid_engine::metadata::MetaError::Format("gone".into())));
    assert!(meta.failed().is_some());
    assert!(!meta.durable(Ticket(1)));
    assert!(meta.record(MetaChange::Roles, &roles, NOW).is_err());
}

fn start_of(meta: VinumMetadata) -> VinumStart {
    VinumStart {
        config: meta.config.clone(),
        on_disk: meta.config,
        slot_subdisks: meta.slot_subdisks,
        drives: meta.drives,
        devices: meta.devices,
        writable: meta.writable,
        redundant: meta.redundant,
        unclean: false,
    }
}

#[test]
fn a_save_is_newer_than_every_drive_even_within_one_second() {
    // The drives were saved half a second into NOW; the clock says NOW, in whole seconds.
    let mut start = start_of(raid5());
    for d in &mut start.drives {
        d.header.label.last_update = Timeval::new(NOW, 500_000);
    }
    start.drives[2].header.label.last_update = Timeval::new(NOW, 999_999);
    let mut meta = VinumMetadata::new(start);
    let roles =
        vec![slot(0, SlotState::InSync), slot(1, SlotState::Faulty), slot(2, SlotState::InSync), DeviceRole::Spare];
    meta.record(MetaChange::Roles, &roles, NOW).unwrap().unwrap();
    let mut imgs = images();
    perform(&mut meta, &mut imgs);
    let (header, _) = saved(&imgs[0]);
    assert_eq!(header.label.last_update, Timeval::new(NOW + 1, 0));
}
