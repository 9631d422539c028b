use super::*;
use crate::config_text::{format_config, parse_config};
use crate::drive_layout::DATA_START;
use crate::objects::{ObjectKind, PlexState, SubdiskState, VolumeState};

const MIB: u64 = 1 << 20;
/// Media of every test drive: 8 MiB of data area after the metadata.
const MEDIA: u64 = DATA_START + 8 * MIB;

/// A two-plex concat mirror `m` on drives a and b, a raid5 volume `r` on c, d and e (one
/// subdisk each), all up. Subdisks are 2 MiB (4096 sectors) at the data start.
const CONFIG: &str = "\
volume r state up
volume m state up
plex name r.p0 org raid5 128s vol r state up
plex name m.p1 org concat vol m state up
plex name m.p0 org concat vol m state up
sd name r.p0.s2 drive e len 4096s driveoffset 265s plex r.p0 plexoffset 256s state up
sd name r.p0.s1 drive d len 4096s driveoffset 265s plex r.p0 plexoffset 128s state up
sd name r.p0.s0 drive c len 4096s driveoffset 265s plex r.p0 plexoffset 0s state up
sd name m.p1.s0 drive b len 4096s driveoffset 265s plex m.p1 plexoffset 0s state up
sd name m.p0.s0 drive a len 4096s driveoffset 265s plex m.p0 plexoffset 0s state up
";

fn ws_from(text: &str, drives: &[&str]) -> Workspace {
    Workspace {
        config: parse_config(text).unwrap(),
        drives: drives.iter().map(|d| EditDrive { name: d.to_string(), media_size: Some(MEDIA) }).collect(),
    }
}

fn ws() -> Workspace {
    ws_from(CONFIG, &["a", "b", "c", "d", "e", "f"])
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn sd_state(e: &Edited, name: &str) -> SubdiskState {
    e.config.subdisk(name).unwrap().state
}

fn plex_state_of(e: &Edited, name: &str) -> PlexState {
    e.config.plex(name).unwrap().state
}

fn volume_state_of(e: &Edited, name: &str) -> VolumeState {
    e.config.volume(name).unwrap().state
}

// ---- rm ----

#[test]
fn rm_needs_r_for_children_and_removes_them_with_it() {
    let ws = ws();
    assert_eq!(
        remove(&ws, &names(&["m"]), false).unwrap_err(),
        EditError::NeedsRecursive { kind: ObjectKind::Volume, name: "m".into(), children: "plexes" }
    );
    assert_eq!(
        remove(&ws, &names(&["m.p1"]), false).unwrap_err().to_string(),
        "plex 'm.p1' has attached subdisks - need recursive removal"
    );
    let e = remove(&ws, &names(&["m"]), true).unwrap();
    assert!(e.config.volume("m").is_none() && e.config.plex("m.p0").is_none() && e.config.subdisk("m.p1.s0").is_none());
    assert!(e.config.volume("r").is_some());
    assert!(e.removed_drives.is_empty());
    // A mirror's plex goes with -r; the volume stays up on the other plex.
    let e = remove(&ws, &names(&["m.p1"]), true).unwrap();
    assert!(e.config.plex("m.p1").is_none() && e.config.subdisk("m.p1.s0").is_none());
    assert_eq!(volume_state_of(&e, "m"), VolumeState::Up);
}

#[test]
fn rm_refuses_a_volumes_only_plex_and_an_attached_subdisk_even_with_r() {
    let ws = ws();
    // Removing m.p1 first leaves m.p0 the only plex: refused, and nothing changes.
    assert_eq!(
        remove(&ws, &names(&["m.p1", "m.p0"]), true).unwrap_err(),
        EditError::OnlyPlex { plex: "m.p0".into(), volume: "m".into() }
    );
    assert_eq!(
        remove(&ws, &names(&["r.p0.s1"]), true).unwrap_err(),
        EditError::SubdiskAttached { subdisk: "r.p0.s1".into(), plex: "r.p0".into() }
    );
    assert_eq!(remove(&ws, &names(&["nosuch"]), true).unwrap_err().to_string(), "unknown object 'nosuch'");
}

#[test]
fn rm_drive_without_r_leaves_its_subdisks_down_on_a_placeholder() {
    let e = remove(&ws(), &names(&["c"]), false).unwrap();
    assert_eq!(e.removed_drives, ["c"]);
    assert_eq!(sd_state(&e, "r.p0.s0"), SubdiskState::Down);
    assert_eq!(plex_state_of(&e, "r.p0"), PlexState::Degraded);
    assert_eq!(volume_state_of(&e, "r"), VolumeState::Up);
    let c = e.drives.iter().find(|d| d.name == "c").unwrap();
    assert_eq!(c.media_size, None, "the drive stays as a placeholder for its subdisk");
    // A drive with nothing on it just goes.
    let e = remove(&ws(), &names(&["f"]), false).unwrap();
    assert_eq!(e.removed_drives, ["f"]);
    assert!(e.drives.iter().all(|d| d.name != "f"));
    assert_eq!(e.config, ws().config);
}

#[test]
fn rm_r_drive_removes_every_volume_with_a_subdisk_on_it() {
    let e = remove(&ws(), &names(&["a"]), true).unwrap();
    assert_eq!(e.removed_drives, ["a"]);
    assert!(e.config.volume("m").is_none() && e.config.subdisk("m.p1.s0").is_none());
    assert!(e.config.volume("r").is_some());
    assert!(e.drives.iter().all(|d| d.name != "a"));
}

#[test]
fn rm_of_a_detached_subdisk_frees_it() {
    let text = CONFIG.to_string() + "sd name loose.s0 drive f len 64s driveoffset 265s state down\n";
    let e = remove(&ws_from(&text, &["a", "b", "c", "d", "e", "f"]), &names(&["loose.s0"]), false).unwrap();
    assert!(e.config.subdisk("loose.s0").is_none());
}

// ---- rename ----

#[test]
fn rename_r_renames_the_children_after_their_last_dot() {
    let e = rename(&ws(), "m", "mirror", true).unwrap();
    assert!(e.config.volume("mirror").is_some() && e.config.volume("m").is_none());
    assert_eq!(e.config.plex("mirror.p0").unwrap().volume.as_deref(), Some("mirror"));
    let s = e.config.subdisk("mirror.p1.s0").unwrap();
    assert_eq!(s.plex(), Some("mirror.p1"));
    assert!(e.config.problems().is_empty(), "{:?}", e.config.problems());
    // Without -r only the references follow.
    let e = rename(&ws(), "m", "mirror", false).unwrap();
    assert_eq!(e.config.plex("m.p0").unwrap().volume.as_deref(), Some("mirror"));
    assert_eq!(e.config.subdisk("m.p0.s0").unwrap().plex(), Some("m.p0"));
}

#[test]
fn rename_follows_the_kernels_name_rules() {
    let ws = ws();
    assert_eq!(
        rename(&ws, "m", "r", false).unwrap_err(),
        EditError::NameTaken { kind: ObjectKind::Volume, name: "r".into() }
    );
    // Names are one namespace: a plex may not take a drive's name.
    assert_eq!(
        rename(&ws, "m.p0", "a", false).unwrap_err(),
        EditError::NameTaken { kind: ObjectKind::Plex, name: "a".into() }
    );
    assert_eq!(rename(&ws, "m.p0", "plain", false).unwrap_err(), EditError::NotPlexName { name: "plain".into() });
    assert_eq!(rename(&ws, "m.p0.s0", "x.s0", false).unwrap_err(), EditError::NotSubdiskName { name: "x.s0".into() });
    assert!(matches!(rename(&ws, "m", "has space", false).unwrap_err(), EditError::BadName { .. }));
    assert!(matches!(rename(&ws, "a", &"d".repeat(32), false).unwrap_err(), EditError::BadName { .. }));
    // -r meets a name in use half way: nothing is renamed.
    let text = CONFIG.to_string() + "sd name n.p1.s0 drive f len 64s driveoffset 265s state down\n";
    let ws = ws_from(&text, &["a", "b", "c", "d", "e", "f"]);
    assert_eq!(
        rename(&ws, "m", "n", true).unwrap_err(),
        EditError::NameTaken { kind: ObjectKind::Subdisk, name: "n.p1.s0".into() }
    );
    let e = rename(&ws, "m.p0.s0", "m.p0.s9", false).unwrap();
    assert!(e.config.subdisk("m.p0.s9").is_some());
}

#[test]
fn rename_drive_moves_its_subdisks_and_header() {
    let e = rename(&ws(), "a", "newa", false).unwrap();
    assert_eq!(e.config.subdisk("m.p0.s0").unwrap().drive, "newa");
    assert_eq!(e.renamed_drives, [("a".to_string(), "newa".to_string())]);
    let mut ws = ws();
    ws.drives[0].media_size = None;
    assert!(matches!(rename(&ws, "a", "newa", false).unwrap_err(), EditError::DriveNotFound { .. }));
}

// ---- setstate ----

#[test]
fn setstate_takes_up_down_stale_only_and_each_kind_its_own() {
    let ws = ws();
    assert_eq!(
        set_state(&ws, "degraded", "r.p0", true).unwrap_err(),
        EditError::InvalidState { state: "degraded".into() }
    );
    assert_eq!(set_state(&ws, "stale", "r.p0", true).unwrap_err().to_string(), "invalid plex state 'stale'");
    assert_eq!(
        set_state(&ws, "stale", "a", true).unwrap_err(),
        EditError::InvalidStateFor { kind: ObjectKind::Drive, state: "stale".into() }
    );
    assert!(!set_state(&ws, "up", "r", false).unwrap().changes(&ws), "up already");
}

#[test]
fn setstate_subdisk_rules() {
    let ws = ws();
    // Down while in a plex needs -f; stale always does.
    assert!(matches!(set_state(&ws, "down", "r.p0.s1", false).unwrap_err(), EditError::StateRefused { .. }));
    assert!(matches!(set_state(&ws, "stale", "m.p1.s0", false).unwrap_err(), EditError::StateRefused { .. }));
    let e = set_state(&ws, "stale", "m.p1.s0", true).unwrap();
    assert_eq!(sd_state(&e, "m.p1.s0"), SubdiskState::Stale);
    assert_eq!(plex_state_of(&e, "m.p1"), PlexState::Down);
    assert_eq!(volume_state_of(&e, "m"), VolumeState::Up);
    let e = set_state(&ws, "down", "r.p0.s1", true).unwrap();
    assert_eq!(plex_state_of(&e, "r.p0"), PlexState::Degraded);

    // Stale in a mirrored plex, or a raid5 plex, must be revived; -f forces it.
    let stale =
        ws_from(&CONFIG.replace("plexoffset 0s state up\n", "plexoffset 0s state stale\n"), &["a", "b", "c", "d", "e"]);
    let refused = set_state(&stale, "up", "m.p0.s0", false).unwrap_err().to_string();
    assert!(refused.contains("which another plex mirrors"), "{refused}");
    assert!(set_state(&stale, "up", "r.p0.s0", false).is_err());
    let e = set_state(&stale, "up", "m.p0.s0", true).unwrap();
    assert_eq!(plex_state_of(&e, "m.p0"), PlexState::Up);

    // In the only plex of a concat volume a stale subdisk comes up without -f.
    let single = "volume c state down\nplex name c.p0 org concat vol c state down\n\
                  sd name c.p0.s0 drive a len 64s driveoffset 265s plex c.p0 plexoffset 0s state stale\n";
    let e = set_state(&ws_from(single, &["a"]), "up", "c.p0.s0", false).unwrap();
    assert_eq!((plex_state_of(&e, "c.p0"), volume_state_of(&e, "c")), (PlexState::Up, VolumeState::Up));

    // Down to up in a raid5 plex: stale instead, said in a note.
    let down = ws_from(
        &CONFIG.replace(
            "driveoffset 265s plex r.p0 plexoffset 0s state up",
            "driveoffset 265s plex r.p0 plexoffset 0s state down",
        ),
        &["a", "b", "c", "d", "e"],
    );
    let e = set_state(&down, "up", "r.p0.s0", false).unwrap();
    assert_eq!(sd_state(&e, "r.p0.s0"), SubdiskState::Stale);
    assert_eq!(e.notes.len(), 1);
    assert_eq!(sd_state(&set_state(&down, "up", "r.p0.s0", true).unwrap(), "r.p0.s0"), SubdiskState::Up);

    // Never up on a drive that was not found.
    let mut missing = down.clone();
    missing.drives.retain(|d| d.name != "c");
    assert!(set_state(&missing, "up", "r.p0.s0", true).is_err());
}

#[test]
fn setstate_plex_and_volume_rules() {
    let ws = ws();
    // The last plex of a volume that is not down stays up without -f.
    let one_down = set_state(&ws, "down", "m.p1", false).unwrap();
    assert_eq!(plex_state_of(&one_down, "m.p1"), PlexState::Down);
    assert_eq!(volume_state_of(&one_down, "m"), VolumeState::Up);
    let after = Workspace { config: one_down.config.clone(), drives: ws.drives.clone() };
    assert!(matches!(set_state(&after, "down", "m.p0", false).unwrap_err(), EditError::StateRefused { .. }));
    let e = set_state(&after, "down", "m.p0", true).unwrap();
    assert_eq!(volume_state_of(&e, "m"), VolumeState::Down);
    // Up only if the subdisks make it up.
    let e = set_state(&after, "up", "m.p1", false).unwrap();
    assert_eq!(plex_state_of(&e, "m.p1"), PlexState::Up);
    let stale = ws_from(
        &CONFIG.replace("plex m.p1 plexoffset 0s state up", "plex m.p1 plexoffset 0s state stale"),
        &["a", "b"],
    );
    let stale_down = set_state(&stale, "down", "m.p1", false).unwrap();
    let stale_down = Workspace { config: stale_down.config, drives: stale.drives.clone() };
    assert!(set_state(&stale_down, "up", "m.p1", false).is_err());
    // A volume goes down only with -f; up only with a usable plex.
    assert!(set_state(&ws, "down", "m", false).is_err());
    let e = set_state(&ws, "down", "m", true).unwrap();
    assert_eq!(volume_state_of(&e, "m"), VolumeState::Down);
    let down = Workspace { config: e.config.clone(), drives: ws.drives.clone() };
    assert_eq!(volume_state_of(&set_state(&down, "up", "m", false).unwrap(), "m"), VolumeState::Up);
}

#[test]
fn setstate_drive_down_takes_its_subdisks_down_and_is_left_out_of_the_save() {
    let e = set_state(&ws(), "down", "d", false).unwrap();
    assert_eq!(e.down_drives, ["d"]);
    assert_eq!(sd_state(&e, "r.p0.s1"), SubdiskState::Down);
    assert_eq!(plex_state_of(&e, "r.p0"), PlexState::Degraded);
    let mut missing = ws();
    missing.drives[0].media_size = None;
    assert!(set_state(&missing, "up", "a", false).is_err());
}

// ---- attach / detach ----

#[test]
fn detach_and_attach_a_mirror_plex() {
    let ws = ws();
    assert_eq!(
        detach(&ws, "m.p1", false).unwrap_err().to_string(),
        "plex 'm.p1' is busy: it is up in volume 'm' (-f detaches it anyway)"
    );
    let e = detach(&ws, "m.p1", true).unwrap();
    assert_eq!(e.config.plex("m.p1").unwrap().volume, None);
    assert_eq!(e.config.plexes_of("m").len(), 1);
    // Saved as gvinum saves a detached plex, and read back the same.
    let text = format_config(&e.config).unwrap();
    assert!(text.contains("plex name m.p1 org concat  state up\n"), "{text}");
    assert_eq!(parse_config(&text).unwrap(), e.config);

    let detached = Workspace { config: e.config, drives: ws.drives.clone() };
    assert!(!detach(&detached, "m.p1", false).unwrap().changes(&detached), "not attached: nothing to do");
    let e = attach(&detached, "m.p1", "m", None, true).unwrap();
    // Renamed after the volume's plex count with it (2), its subdisk following it.
    let p = e.config.plex("m.p2").unwrap();
    assert_eq!((p.volume.as_deref(), p.state), (Some("m"), PlexState::Down));
    let s = e.config.subdisk("m.p1.s0").unwrap();
    assert_eq!((s.plex(), s.state), (Some("m.p2"), SubdiskState::Stale));
    assert_eq!(volume_state_of(&e, "m"), VolumeState::Up);
    assert!(e.config.problems().is_empty());

    assert_eq!(
        attach(&ws, "m.p1", "r", None, false).unwrap_err(),
        EditError::AlreadyAttached { kind: ObjectKind::Plex, name: "m.p1".into(), parent: "m".into() }
    );
    assert_eq!(
        attach(&detached, "m.p1", "r.p0", None, false).unwrap_err(),
        EditError::NoParent { wanted: ObjectKind::Volume, name: "r.p0".into() }
    );
    assert!(matches!(attach(&detached, "m.p1", "m", Some(0), false).unwrap_err(), EditError::OffsetForPlex { .. }));
    assert!(matches!(attach(&detached, "m", "r", None, false).unwrap_err(), EditError::NotPlexOrSubdisk { .. }));
}

#[test]
fn detach_and_attach_a_concat_subdisk() {
    let ws = ws();
    assert!(matches!(detach(&ws, "m.p0.s0", false).unwrap_err(), EditError::Busy { .. }));
    let e = detach(&ws, "m.p0.s0", true).unwrap();
    assert_eq!(e.config.subdisk("m.p0.s0").unwrap().membership, None);
    assert_eq!(plex_state_of(&e, "m.p0"), PlexState::Down, "a concat plex without subdisks");
    assert_eq!(volume_state_of(&e, "m"), VolumeState::Up);
    let detached = Workspace { config: e.config, drives: ws.drives.clone() };

    let e = attach(&detached, "m.p0.s0", "m.p0", None, false).unwrap();
    let s = e.config.subdisk("m.p0.s0").unwrap();
    assert_eq!(s.membership.as_ref().map(|m| m.plex_offset), Some(0));
    assert_eq!(s.state, SubdiskState::Stale);
    assert_eq!(plex_state_of(&e, "m.p0"), PlexState::Down);
    // With rename: <plex>.s<count with it>.
    let e = attach(&detached, "m.p0.s0", "m.p0", None, true).unwrap();
    assert!(e.config.subdisk("m.p0.s1").is_some());
    // Appended to a concat plex that has one: after it. A concat offset that leaves a hole
    // or overlaps is refused.
    let e = attach(&detached, "m.p0.s0", "m.p1", None, false).unwrap();
    assert_eq!(e.config.subdisk("m.p0.s0").unwrap().membership.as_ref().unwrap().plex_offset, 2 * MIB);
    assert!(matches!(
        attach(&detached, "m.p0.s0", "m.p1", Some(3 * MIB), false).unwrap_err(),
        EditError::WouldBreak { .. }
    ));
    assert!(matches!(attach(&detached, "m.p0.s0", "m.p1", Some(0), false).unwrap_err(), EditError::BadOffset { .. }));
    assert!(matches!(
        attach(&detached, "m.p0.s0", "m.p1", Some(1000), false).unwrap_err(),
        EditError::BadOffset { .. }
    ));
}

#[test]
fn striped_and_raid5_columns_are_guarded() {
    let ws = ws();
    // A raid5 column leaves only with -f, whatever the plex's state.
    let degraded = CONFIG
        .replace("plexoffset 0s state up\nsd name m.p1", "plexoffset 0s state stale\nsd name m.p1")
        .replace("vol r state up", "vol r state degraded");
    let degraded = ws_from(&degraded, &["a", "b", "c", "d", "e"]);
    let refused = detach(&degraded, "r.p0.s0", false).unwrap_err().to_string();
    assert!(refused.contains("one column fewer"), "{refused}");
    let e = detach(&ws, "r.p0.s2", true).unwrap();
    assert_eq!(plex_state_of(&e, "r.p0"), PlexState::Down, "raid5 with 2 subdisks");
    // And a new column is not taken into a plex that holds a volume.
    let detached = Workspace { config: e.config, drives: ws.drives.clone() };
    assert_eq!(
        attach(&detached, "r.p0.s2", "r.p0", None, false).unwrap_err(),
        EditError::GrowUnsupported { plex: "r.p0".into(), volume: "r".into(), columns: 2 }
    );
}

#[test]
fn a_plex_in_no_volume_takes_columns_cut_to_its_own() {
    // A detached striped plex with one 2 MiB column; a 3 MiB subdisk is cut to it, a 1 MiB
    // one refused, an offset off the stripe refused.
    let text = "plex name s.p0 org striped 128s  state down\n\
                sd name s.p0.s0 drive a len 4096s driveoffset 265s plex s.p0 plexoffset 0s state up\n\
                sd name big drive b len 6144s driveoffset 265s state up\n\
                sd name small drive c len 2048s driveoffset 265s state up\n";
    let ws = ws_from(text, &["a", "b", "c"]);
    let e = attach(&ws, "big", "s.p0", None, false).unwrap();
    let big = e.config.subdisk("big").unwrap();
    assert_eq!((big.length, big.membership.as_ref().unwrap().plex_offset), (2 * MIB, 65_536));
    assert_eq!(
        attach(&ws, "small", "s.p0", None, false).unwrap_err(),
        EditError::TooSmall { subdisk: "small".into(), plex: "s.p0".into(), length: MIB, column: 2 * MIB }
    );
    assert!(matches!(attach(&ws, "big", "s.p0", Some(32_768), false).unwrap_err(), EditError::BadOffset { .. }));
}

// ---- move ----

#[test]
fn move_puts_the_subdisk_in_the_first_free_extent_stale() {
    let ws = ws();
    assert_eq!(move_subdisks(&ws, "f", &names(&["r.p0.s1"]), false).unwrap_err(), EditError::MoveNeedsForce);
    let e = move_subdisks(&ws, "f", &names(&["r.p0.s1"]), true).unwrap();
    let s = &e.config.subdisks[0];
    assert_eq!((s.name.as_str(), s.drive.as_str(), s.drive_offset), ("r.p0.s1", "f", DATA_START));
    assert_eq!(s.state, SubdiskState::Stale);
    assert_eq!(plex_state_of(&e, "r.p0"), PlexState::Degraded);
    assert_eq!(volume_state_of(&e, "r"), VolumeState::Up);
    // A second one on the same drive goes after the first.
    let e = move_subdisks(&ws, "f", &names(&["r.p0.s1", "m.p1.s0"]), true).unwrap();
    let s = e.config.subdisk("m.p1.s0").unwrap();
    assert_eq!((s.drive.as_str(), s.drive_offset), ("f", DATA_START + 2 * MIB));
    assert!(e.config.problems().is_empty());
}

#[test]
fn move_refusals() {
    let ws = ws();
    assert_eq!(
        move_subdisks(&ws, "m", &names(&["r.p0.s1"]), true).unwrap_err().to_string(),
        "destination 'm' is not a drive"
    );
    assert_eq!(
        move_subdisks(&ws, "f", &names(&["r.p0"]), true).unwrap_err(),
        EditError::NotASubdisk { name: "r.p0".into() }
    );
    assert_eq!(
        move_subdisks(&ws, "d", &names(&["r.p0.s1"]), true).unwrap_err(),
        EditError::AlreadyOnDrive { subdisk: "r.p0.s1".into(), drive: "d".into() }
    );
    // d holds a subdisk already and 6 MiB are free after it: three 2 MiB subdisks fit, not four.
    let e = move_subdisks(&ws, "d", &names(&["r.p0.s0", "m.p0.s0", "m.p1.s0"]), true).unwrap();
    assert_eq!(e.config.subdisks.iter().filter(|s| s.drive == "d").count(), 4);
    assert_eq!(
        move_subdisks(&ws, "d", &names(&["r.p0.s0", "m.p0.s0", "m.p1.s0", "r.p0.s2"]), true).unwrap_err(),
        EditError::NoSpace { drive: "d".into(), subdisk: "r.p0.s2".into(), length: 2 * MIB, largest: 0 }
    );
    let mut missing = ws.clone();
    missing.drives.retain(|d| d.name != "f");
    missing.config.subdisks[0].drive = "f".into();
    assert!(matches!(
        move_subdisks(&missing, "f", &names(&["r.p0.s1"]), true).unwrap_err(),
        EditError::DriveNotFound { .. }
    ));
    let text = CONFIG.to_string() + "sd name loose.s0 drive f len 64s driveoffset 265s state down\n";
    assert_eq!(
        move_subdisks(&ws_from(&text, &["a", "b", "c", "d", "e", "f"]), "a", &names(&["loose.s0"]), true).unwrap_err(),
        EditError::NotInPlex { subdisk: "loose.s0".into() }
    );
}
