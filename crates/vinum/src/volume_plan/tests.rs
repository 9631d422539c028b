use uraid_engine::SlotState;
use uraid_vinum_format::{parse_config, PlexState, SubdiskState, VolumeState};

use super::{SlotStart, VolumePlan, VolumePlanError};

/// A volume of two concat plexes of one subdisk each, s1 stale, and a raid5 volume.
const CONFIG: &str = "\
volume m state up
volume r state up
plex name m.p0 org concat vol m state up
plex name m.p1 org concat vol m state down
plex name r.p0 org raid5 16s vol r state up
sd name m.p0.s0 drive a len 1024s driveoffset 265s plex m.p0 plexoffset 0s state up
sd name m.p1.s0 drive b len 1024s driveoffset 265s plex m.p1 plexoffset 0s state stale
sd name r.p0.s0 drive a len 512s driveoffset 1289s plex r.p0 plexoffset 0s state up
sd name r.p0.s1 drive b len 512s driveoffset 1289s plex r.p0 plexoffset 16s state up
sd name r.p0.s2 drive c len 512s driveoffset 265s plex r.p0 plexoffset 32s state up
";

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_stale_subdisk_is_rebuilt_when_writable_and_left_out_when_not() {
    let config = parse_config(CONFIG).unwrap();
    let plan = VolumePlan::new(&config, "m", &names(&["b", "a"])).unwrap();
    assert_eq!(plan.slots[0].1, Some(1), "drive a is the second found");
    assert_eq!(plan.slots[1].2, SlotStart::Stale);
    assert_eq!(plan.slot_states(true), vec![SlotState::InSync, SlotState::Recovering]);
    assert_eq!(plan.slot_states(false), vec![SlotState::InSync, SlotState::Faulty]);
}

#[test]
fn a_missing_drive_takes_its_subdisks_down_and_the_plex_states_follow() {
    let config = parse_config(CONFIG).unwrap();
    let plan = VolumePlan::new(&config, "r", &names(&["a", "b"])).unwrap();
    assert_eq!(plan.slot_states(true), vec![SlotState::InSync, SlotState::InSync, SlotState::Missing]);
    assert_eq!(plan.config.subdisk("r.p0.s2").unwrap().state, SubdiskState::Down);
    assert_eq!(plan.config.plex("r.p0").unwrap().state, PlexState::Degraded);
    assert_eq!(plan.config.volume("r").unwrap().state, VolumeState::Up);
}

#[test]
fn a_volume_missing_data_is_refused_naming_what_is_out() {
    let config = parse_config(CONFIG).unwrap();
    let err = VolumePlan::new(&config, "r", &names(&["a"])).unwrap_err();
    let VolumePlanError::Down { volume, why } = &err else { panic!("{err:?}") };
    assert_eq!(volume, "r");
    assert!(why.contains("r.p0.s1 (drive b not found)") && why.contains("r.p0.s2 (drive c not found)"), "{why}");
    // The mirror without its only up plex: the stale copy does not count.
    let err = VolumePlan::new(&config, "m", &names(&["b"])).unwrap_err().to_string();
    assert!(err.contains("m.p0.s0 (drive a not found)") && err.contains("m.p1.s0 (stale)"), "{err}");
}
