//! `uraid grow --level` (md's takeovers, which move no data) and `uraid grow --raid-devices` on
//! a raid1: the data written before reads back after, `detail` and `examine` show the new
//! shape, a device added with the change is rebuilt in sync by `uraid add`, and a refused change
//! leaves every member byte for byte as it was.

use tempfile::tempdir;

mod common;
use common::takeover::{checks_clean, created_and_filled, disks, read, states};
use common::{detail, hashes, nbd_export};
use common::{ok, text, uraid, uraid_in, with};

/// `uraid grow` with `args`, which must be refused, leaving every file of `members` unchanged;
/// what it said.
fn refused(args: &[&str], members: &[String]) -> String {
    let before = hashes(members);
    let o = uraid(&[&["grow"][..], args].concat());
    assert!(!o.status.success(), "uraid grow {args:?} was not refused\n{}", text(&o));
    assert_eq!(hashes(members), before, "a refused grow wrote to a member");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn grow(args: &[&str]) -> String {
    String::from_utf8_lossy(&ok(&[&["grow"][..], args].concat()).stderr).into_owned()
}

#[test]
fn raid1_grows_onto_an_added_device_which_is_then_rebuilt_in_sync() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 3);
    let data = created_and_filled(&["-l1", "-n2"], &d[..2]);
    let said = grow(&["-n3", &d[0], &d[1], "--add", &d[2]]);
    assert!(said.contains("raid1 of 2 devices is now of 3 devices"), "{said}");
    assert!(said.contains("to be rebuilt"), "{said}");
    let examined = String::from_utf8(ok(&["examine", &d[2]]).stdout).unwrap();
    assert!(examined.contains("Recovery Offset : 0 sectors"), "{examined}");
    assert!(examined.contains("Raid Devices : 3"), "{examined}");
    assert_eq!(detail(&d)["raid_devices"], 3);
    assert_eq!(states(&d), ["active", "active", "rebuilding"]);
    // Counted as mdadm counts them: the copy being rebuilt is a working spare until in sync.
    let counts = |d: &[String]| {
        let text = String::from_utf8(ok(&with(&["detail"], d)).stdout).unwrap();
        ["Active Devices", "Working Devices", "Spare Devices"].map(|key| {
            let line = text.lines().find(|l| l.trim_start().starts_with(key)).unwrap_or_default();
            line.split(':').nth(1).unwrap_or_default().trim().to_string()
        })
    };
    assert_eq!(counts(&d), ["2", "3", "1"]);
    assert_eq!(read(&d, data.len()), data);
    ok(&with(&["add"], &d));
    assert_eq!(states(&d), ["active", "active", "active"]);
    assert_eq!(counts(&d), ["3", "3", "0"]);
    assert_eq!(read(&d[2..], data.len()), data, "the rebuilt copy alone holds the data");
    checks_clean(&d);
}

#[test]
fn raid1_leaves_new_slots_missing_only_when_forced() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 2);
    let data = created_and_filled(&["-l1", "-n2"], &d);
    let said = refused(&["-n4", &d[0], &d[1]], &d);
    assert!(said.contains("Need 2 spares to avoid degraded array, and only have 0"), "{said}");
    let said = grow(&["-n4", "--force", &d[0], &d[1]]);
    assert!(said.contains("slot 3 is missing"), "{said}");
    let json = detail(&d);
    assert_eq!((json["raid_devices"].as_u64(), json["degraded"].as_bool()), (Some(4), Some(true)));
    assert_eq!(read(&d, data.len()), data);
}

#[test]
fn raid1_puts_a_hot_spare_into_a_new_slot() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 3);
    let data = created_and_filled(&["-l1", "-n2", "-x1"], &d);
    let said = grow(&["-n3", &d[0], &d[1], &d[2]]);
    assert!(said.contains("(a spare until now) into slot 2"), "{said}");
    assert_eq!(states(&d), ["active", "active", "rebuilding"]);
    ok(&with(&["add"], &d));
    assert_eq!(states(&d), ["active", "active", "active"]);
    assert_eq!(read(&d[2..], data.len()), data);
}

#[test]
fn raid1_drops_only_empty_slots_and_moves_its_devices_down() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 3);
    let members = [d[0].clone(), "missing".into(), d[2].clone()];
    let data = created_and_filled(&["-l1", "-n3"], &members);
    let kept = [d[0].clone(), d[2].clone()];
    let said = refused(&["-n1", &d[0], &d[2]], &kept);
    assert!(said.contains("cannot reduce the raid1 from 3 to 1 devices: 2 slots hold a device"), "{said}");
    grow(&["-n2", &d[0], &d[2]]);
    let json = detail(&kept);
    assert_eq!((json["raid_devices"].as_u64(), json["degraded"].as_bool()), (Some(2), Some(false)));
    assert_eq!(states(&kept), ["active", "active"]);
    let examined = String::from_utf8(ok(&["examine", &d[2]]).stdout).unwrap();
    assert!(examined.contains("Device Role : Active device 1"), "{examined}");
    assert_eq!(read(&kept, data.len()), data);
}

#[test]
fn raid1_of_two_and_raid5_of_two_take_each_other_over() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 2);
    let data = created_and_filled(&["-l1", "-n2"], &d);
    let said = grow(&["--level=5", &d[0], &d[1]]);
    assert!(said.contains("raid1 of 2 devices is now raid5 (2 devices, layout left-symmetric, chunk 64K)"), "{said}");
    let json = detail(&d);
    assert_eq!((json["level"].as_str(), json["layout"].as_str()), (Some("raid5"), Some("left-symmetric")));
    assert_eq!(read(&d, data.len()), data);
    checks_clean(&d);
    grow(&["--level=1", &d[0], &d[1]]);
    assert_eq!(detail(&d)["level"], "raid1");
    assert_eq!(read(&d[1..], data.len()), data);
    checks_clean(&d);
}

#[test]
fn raid1_becomes_a_raid0_of_its_first_device_in_sync() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 2);
    let data = created_and_filled(&["-l1", "-n2"], &d);
    let said = grow(&["--level=0", &d[0], &d[1]]);
    assert!(said.contains("raid1 of 2 devices is now raid0 (1 devices, chunk 64K)"), "{said}");
    assert!(said.contains("(slot 1) is failed and removed"), "{said}");
    let json = detail(&d[..1]);
    assert_eq!((json["level"].as_str(), json["raid_devices"].as_u64()), (Some("raid0"), Some(1)));
    assert_eq!(read(&d[..1], data.len()), data);
}

#[test]
fn raid0_takes_parity_on_a_new_last_device_and_gives_it_back() {
    for level in ["5", "4"] {
        let dir = tempdir().unwrap();
        let d = disks(dir.path(), 4);
        let data = created_and_filled(&["-l0", "-n3", "--chunk=64K"], &d[..3]);
        let said = grow(&[&format!("--level={level}"), &d[0], &d[1], &d[2], "--add", &d[3]]);
        assert!(said.contains(&format!("raid0 of 3 devices is now raid{level} (4 devices")), "{said}");
        if level == "5" {
            assert!(said.contains("parity-last"), "{said}");
            assert_eq!(detail(&d)["layout"], "parity-last");
        }
        assert_eq!(states(&d), ["active", "active", "active", "rebuilding"]);
        ok(&with(&["add"], &d));
        assert_eq!(states(&d), ["active", "active", "active", "active"]);
        checks_clean(&d);
        assert_eq!(read(&[d[0].clone(), d[1].clone(), d[3].clone()], data.len()), data, "parity rebuilds slot 2");
        let said = grow(&["--level=0", &d[0], &d[1], &d[2], &d[3]]);
        assert!(said.contains("is failed and removed"), "{said}");
        let json = detail(&d[..3]);
        assert_eq!((json["level"].as_str(), json["raid_devices"].as_u64()), (Some("raid0"), Some(3)));
        assert_eq!(read(&d[..3], data.len()), data);
    }
}

/// A parity-last raid5 with a hot spare becomes raid0 as mdadm makes it (`impose_level`): the
/// spare removed first (raid0 has none; its superblock is left as it was), the parity device
/// failed and removed.
#[test]
fn a_hot_spare_is_removed_when_a_raid5_becomes_raid0() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 5);
    let data = created_and_filled(&["-l5", "-n4", "-x1", "--layout=parity-last", "--chunk=64K"], &d);
    let spares =
        |json: &serde_json::Value| json["members"].as_array().unwrap().iter().filter(|m| m["state"] == "spare").count();
    assert_eq!(spares(&detail(&d)), 1);
    let said = grow(&["--level=0", &d[0], &d[1], &d[2], &d[3], &d[4]]);
    assert!(said.contains("(a spare) is removed") && said.contains("is failed and removed"), "{said}");
    let json = detail(&d[..3]);
    assert_eq!((json["level"].as_str(), json["raid_devices"].as_u64()), (Some("raid0"), Some(3)), "{json:#}");
    assert_eq!(
        (json["members"].as_array().map(Vec::len), spares(&json)),
        (Some(3), 0),
        "no spare left in the raid0: {json:#}"
    );
    assert_eq!(read(&d[..3], data.len()), data);
}

#[test]
fn raid4_and_parity_last_raid5_change_level_in_place() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 4);
    let data = created_and_filled(&["-l4", "-n4", "--chunk=64K"], &d);
    grow(&["--level=5", &d[0], &d[1], &d[2], &d[3]]);
    let json = detail(&d);
    assert_eq!((json["level"].as_str(), json["layout"].as_str()), (Some("raid5"), Some("parity-last")));
    checks_clean(&d);
    assert_eq!(read(&d[1..], data.len()), data);
    grow(&["--level=4", &d[0], &d[1], &d[2], &d[3]]);
    assert_eq!(detail(&d)["level"], "raid4");
    checks_clean(&d);
    assert_eq!(read(&d, data.len()), data);
}

#[test]
fn raid5_takes_q_on_a_new_last_device_and_gives_it_back() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 5);
    let data = created_and_filled(&["-l5", "-n4", "--chunk=64K"], &d[..4]);
    let said = grow(&["--level=6", &d[0], &d[1], &d[2], &d[3], "--add", &d[4]]);
    assert!(said.contains("layout left-symmetric-6"), "{said}");
    assert!(said.contains("--layout=preserve"), "{said}");
    let json = detail(&d);
    assert_eq!((json["level"].as_str(), json["layout"].as_str()), (Some("raid6"), Some("left-symmetric-6")));
    ok(&with(&["add"], &d));
    assert_eq!(states(&d), ["active"; 5]);
    checks_clean(&d);
    assert_eq!(read(&d[2..], data.len()), data, "P and Q rebuild two missing devices");
    let said = grow(&["--level=5", &d[0], &d[1], &d[2], &d[3], &d[4]]);
    assert!(said.contains("is now a spare"), "{said}");
    let json = detail(&d);
    assert_eq!((json["level"].as_str(), json["raid_devices"].as_u64()), (Some("raid5"), Some(4)));
    assert_eq!(json["layout"], "left-symmetric");
    assert_eq!(read(&d, data.len()), data);
    checks_clean(&d);
}

/// mdadm's default raid5 → raid6: a normal raid6 layout asked for, the stopped array is taken
/// over (Q on the added device), Q rebuilt, and the array restriped to that layout, in one
/// `uraid grow`.
#[test]
fn raid5_becomes_a_normal_raid6_taken_over_rebuilt_and_restriped() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 5);
    let data = created_and_filled(&["-l5", "-n4", "--chunk=64K"], &d[..4]);
    let said = grow(&["--level=6", "--layout=left-symmetric", &d[0], &d[1], &d[2], &d[3], "--add", &d[4]]);
    assert!(said.contains("restriped to left-symmetric, as mdadm does"), "{said}");
    assert!(said.contains("recover completed") && said.contains("reshape of t finished"), "{said}");
    let json = detail(&d);
    assert_eq!((json["level"].as_str(), json["layout"].as_str()), (Some("raid6"), Some("left-symmetric")), "{json:#}");
    assert_eq!(json["reshape"], serde_json::Value::Null);
    assert_eq!(states(&d), ["active"; 5]);
    assert_eq!(read(&d, data.len()), data);
    checks_clean(&d);
    assert_eq!(read(&d[2..], data.len()), data, "P and Q of the new layout rebuild two missing devices");
}

#[test]
fn raid0_and_raid10_near2_trade_mirrors() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 4);
    let data = created_and_filled(&["-l0", "-n2", "--chunk=64K"], &d[..2]);
    let said = grow(&["--level=10", &d[0], &d[1], "--add", &d[2]]);
    assert!(said.contains("slot 3 is missing"), "{said}");
    let three = d[..3].to_vec();
    let json = detail(&three);
    assert_eq!((json["level"].as_str(), json["layout"].as_str()), (Some("raid10"), Some("near=2")));
    ok(&with(&["add", "--device", &d[3]], &three));
    assert_eq!(states(&d), ["active"; 4]);
    checks_clean(&d);
    // The copies added: slot 1 (d2) and slot 3 (d3) alone hold the data.
    assert_eq!(read(&[d[2].clone(), d[3].clone()], data.len()), data);
    grow(&["--level=0", &d[0], &d[1], &d[2], &d[3]]);
    let kept = [d[0].clone(), d[1].clone()];
    let json = detail(&kept);
    assert_eq!((json["level"].as_str(), json["raid_devices"].as_u64()), (Some("raid0"), Some(2)));
    assert_eq!(read(&kept, data.len()), data);
}

#[test]
fn changes_md_refuses_write_nothing() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 6);
    created_and_filled(&["-l5", "-n4", "--chunk=64K"], &d[..4]);
    let r5 = d[..4].to_vec();
    // Refused before the restripe to parity-last that raid0 would need first.
    let said = refused(&with(&["--level=0", "--raid-devices=4"], &r5), &r5);
    assert!(said.contains("raid0 from raid4/5 drops the parity device only"), "{said}");
    let said = refused(&[&with(&["--level=6", "--layout=sideways"], &r5)[..], &["--add", &d[4]]].concat(), &d[..5]);
    assert!(said.contains("--layout=sideways"), "{said}");
    let said = refused(&with(&["--level=6"], &r5), &r5);
    assert!(said.contains("Need 1 spare"), "{said}");
    let said = refused(&with(&["--level=1"], &r5), &r5);
    assert!(said.contains("Can only convert a 2-device array to RAID1"), "{said}");
    let said = refused(&with(&["--level=10"], &r5), &r5);
    assert!(said.contains("impossible level change requested"), "{said}");
    let said = refused(&with(&["--continue", "--level=0"], &r5), &r5);
    assert!(said.contains("give --level without it"), "{said}");
    // A device with a superblock is not added.
    ok(&["create", "-l1", "-n2", "--name=other", &d[4], &d[5]]);
    let said = refused(&[&with(&["--level=6"], &r5)[..], &["--add", &d[4]]].concat(), &d);
    assert!(said.contains("carries an md superblock"), "{said}");
}

#[test]
fn arrays_with_0_90_metadata_or_a_bitmap_are_refused() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 5);
    created_and_filled(&["-l1", "-n2", "--metadata=0.90"], &d[..2]);
    let said = refused(&["-n3", &d[0], &d[1], "--add", &d[2]], &d[..3]);
    assert!(said.contains("0.90 metadata"), "{said}");
    created_and_filled(&["-l1", "-n2", "--bitmap=internal"], &d[3..]);
    let said = refused(&["--level=5", &d[3], &d[4]], &d[3..]);
    assert!(said.contains("write-intent bitmap"), "{said}");
}

/// mdadm's raid6 → raid5 from a normal raid6 layout: the stopped array is restriped to the -6
/// form of the raid5 layout (Q alone on the last device), then gives Q up as a spare, in one
/// `uraid grow`; the takeover is checked before the restripe.
#[test]
fn a_normal_raid6_is_restriped_to_its_six_layout_then_gives_q_up() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 5);
    let data = created_and_filled(&["-l6", "-n5", "--chunk=64K"], &d);
    let said = refused(&with(&["--level=5", "--raid-devices=5"], &d), &d);
    assert!(said.contains("raid5 from raid6 drops the Q device only"), "{said}");
    let said = grow(&with(&["--level=5", "--layout=right-asymmetric"], &d));
    assert!(said.contains("to right-asymmetric-6 starting, before the level change"), "{said}");
    assert!(said.contains("is now a spare"), "{said}");
    let json = detail(&d);
    assert_eq!(
        (json["level"].as_str(), json["layout"].as_str(), json["raid_devices"].as_u64()),
        (Some("raid5"), Some("right-asymmetric"), Some(4)),
        "{json:#}"
    );
    assert_eq!(json["members"][4]["state"], "spare", "{json:#}");
    assert_eq!(read(&d[..4], data.len()), data);
    assert_eq!(read(&d[1..4], data.len()), data, "parity of the new layout rebuilds a missing device");
    checks_clean(&d[..4]);
}

/// A running array changes level as mdadm chains the steps on a running md array, its server
/// making the next step itself once the array is idle: raid5 to a normal raid6 (taken over, Q
/// rebuilt, restriped), back to raid5 in another layout (restriped to its -6 form, Q given
/// up), and to raid0 (restriped to parity-last, the parity device dropped). `ctl wait` returns
/// once the whole chain has run; new connections are told each new level.
#[test]
fn a_running_array_is_restriped_around_its_level_changes_as_mdadm_chains_them() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 5);
    let data = created_and_filled(&["-l5", "-n4", "--chunk=64K"], &d[..4]);
    let runtime = dir.path().join("run");
    let _stop = common::StopAll(runtime.clone());
    let ctl = |args: &[&str]| {
        let o = uraid_in(&runtime, &[&["ctl", "t"][..], args].concat());
        assert!(o.status.success(), "uraid ctl t {args:?}\n{}", text(&o));
        o
    };
    let status = || -> serde_json::Value { serde_json::from_slice(&ctl(&["status", "--json"]).stdout).unwrap() };
    let o = uraid_in(&runtime, &with(&["assemble"], &d[..4]));
    assert!(o.status.success(), "{}", text(&o));
    let said = text(&ctl(&["grow", "--level=6", "--layout=left-symmetric", "--add", &d[4]]));
    assert!(said.contains("restriped to left-symmetric, as mdadm does"), "{said}");
    ctl(&["wait"]);
    let socket = runtime.join("t").join("nbd.sock");
    let now = status();
    assert_eq!((now["level"].as_str(), now["sync_action"].as_str()), (Some("raid6"), Some("idle")), "{now:#}");
    assert!(now["md_shape"].as_str().unwrap_or("").ends_with("algorithm 2"), "left-symmetric: {now:#}");
    assert_eq!(nbd_export(&socket)["export-size"].as_u64(), Some(data.len() as u64));

    // A takeover that would be refused after the restripe is refused before it, nothing moved.
    let o = uraid_in(&runtime, &["ctl", "t", "grow", "--level=5", "--raid-devices=5"]);
    assert!(!o.status.success() && text(&o).contains("drops the Q device only"), "{}", text(&o));
    assert_eq!(status()["md_shape"], now["md_shape"]);
    let said = text(&ctl(&["grow", "--level=5", "--layout=right-asymmetric"]));
    assert!(said.contains("to right-asymmetric-6 started; the change to raid5 follows once it ends"), "{said}");
    ctl(&["wait"]);
    let said = text(&ctl(&["grow", "--level=0"]));
    assert!(said.contains("to parity-last started; the change to raid0 follows once it ends"), "{said}");
    ctl(&["wait"]);
    let now = status();
    assert_eq!(now["level"], "raid0", "{now:#}");
    ctl(&["stop"]);
    let kept = d[..3].to_vec();
    let json = detail(&kept);
    assert_eq!((json["level"].as_str(), json["raid_devices"].as_u64()), (Some("raid0"), Some(3)), "{json:#}");
    assert_eq!(read(&kept, data.len()), data);
}

/// mdadm's raid5 → raid0 and raid4 from a raid5 other than parity-last: the stopped array is
/// restriped to parity-last first, then changes level.
#[test]
fn a_raid5_is_restriped_to_parity_last_then_becomes_raid0_or_raid4() {
    for level in ["0", "4"] {
        let dir = tempdir().unwrap();
        let d = disks(dir.path(), 4);
        let data = created_and_filled(&["-l5", "-n4", "--chunk=64K"], &d);
        let said = grow(&with(&[&format!("--level={level}")], &d));
        assert!(said.contains("from layout left-symmetric to parity-last starting, before the level change"), "{said}");
        let kept = if level == "0" { d[..3].to_vec() } else { d.clone() };
        let json = detail(&kept);
        assert_eq!(json["level"], format!("raid{level}"), "{json:#}");
        assert_eq!(read(&kept, data.len()), data);
        if level == "4" {
            checks_clean(&d);
            assert_eq!(read(&d[1..], data.len()), data, "parity on the last device rebuilds the first");
        }
    }
}

/// raid0 and raid4 to a raid5 of another layout than parity-last, as mdadm's default does: the
/// takeover to parity-last, the new parity device rebuilt, then the restripe, in one `uraid
/// grow`; without a device for parity the restripe could not start, and it is refused.
#[test]
fn raid0_and_raid4_become_a_left_symmetric_raid5_by_a_restripe_after() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 4);
    let data = created_and_filled(&["-l0", "-n3", "--chunk=64K"], &d[..3]);
    let said = refused(&with(&["--level=5", "--layout=left-symmetric"], &d[..3]), &d);
    assert!(said.contains("give it with --add"), "{said}");
    let said = grow(&[&with(&["--level=5", "--layout=left-symmetric"], &d[..3])[..], &["--add", &d[3]]].concat());
    assert!(said.contains("recover completed") && said.contains("to left-symmetric starting"), "{said}");
    let json = detail(&d);
    assert_eq!((json["level"].as_str(), json["layout"].as_str()), (Some("raid5"), Some("left-symmetric")), "{json:#}");
    assert_eq!(states(&d), ["active"; 4]);
    assert_eq!(read(&d, data.len()), data);
    assert_eq!(read(&d[1..], data.len()), data, "parity of the new layout rebuilds a missing device");
    checks_clean(&d);

    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 4);
    let data = created_and_filled(&["-l4", "-n4", "--chunk=64K"], &d);
    let said = grow(&with(&["--level=5", "--layout=right-symmetric"], &d));
    assert!(said.contains("to right-symmetric starting"), "{said}");
    assert_eq!(detail(&d)["layout"], "right-symmetric");
    assert_eq!(read(&d, data.len()), data);
    checks_clean(&d);
}

#[test]
fn multi_zone_raid0_is_refused() {
    let dir = tempdir().unwrap();
    let small = common::image(dir.path(), "small.img", 8 << 20);
    let big = common::image(dir.path(), "big.img", 16 << 20);
    let extra = common::image(dir.path(), "extra.img", 16 << 20);
    let zoned = [small, big];
    created_and_filled(&["-l0", "-n2", "--chunk=64K"], &zoned);
    let all = [zoned[0].clone(), zoned[1].clone(), extra.clone()];
    let said = refused(&[&with(&["--level=5"], &zoned)[..], &["--add", &extra]].concat(), &all);
    assert!(said.contains("more than one zone"), "{said}");
}

/// A raid1 that `uraid assemble` runs changes its number of copies through its server, which
/// rebuilds the new one at once, from the copies it has; a copy failed and removed is then
/// dropped the same way, and with --force a new slot is left missing. Its level is changed
/// only once it is stopped.
#[test]
fn a_running_raid1_changes_its_copies() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 3);
    let data = created_and_filled(&["-l1", "-n2"], &d[..2]);
    let runtime = dir.path().join("run");
    let _stop = common::StopAll(runtime.clone());
    std::fs::create_dir(&runtime).unwrap();
    let run = |args: &[&str]| uraid_in(&runtime, args);
    let o = run(&with(&["assemble"], &d[..2]));
    assert!(o.status.success(), "{}", text(&o));
    let status =
        || -> serde_json::Value { serde_json::from_slice(&run(&["ctl", "t", "status", "--json"]).stdout).unwrap() };
    let size = status()["size_bytes"].as_u64().unwrap();
    // Members in sync, and how many the array misses.
    let in_sync = || {
        let now = status();
        let members = now["members"].as_array().unwrap().clone();
        let active = members.iter().filter(|m| m["role"].as_str().unwrap_or("").starts_with("active")).count();
        (active, now["degraded"].as_u64().unwrap())
    };
    assert_eq!(in_sync(), (2, 0));

    // Refused while running, and nothing written: a raid1's chunk, the count it has, too many
    // devices for the slots, --add with fewer.
    let blank = hashes(&d[2..]);
    let o = run(&["ctl", "t", "grow", "--chunk=64K"]);
    assert!(!o.status.success() && text(&o).contains("no chunk size or layout"), "{}", text(&o));
    let o = run(&["ctl", "t", "grow", "-n2"]);
    assert!(!o.status.success() && text(&o).contains("already has 2 devices"), "{}", text(&o));
    let o = run(&["ctl", "t", "grow", "-n4"]);
    assert!(!o.status.success() && text(&o).contains("Need 2 spares"), "{}", text(&o));
    let o = run(&["ctl", "t", "grow", "-n1", "--add", &d[2]]);
    assert!(!o.status.success() && text(&o).contains("--add goes with more devices"), "{}", text(&o));
    assert_eq!(hashes(&d[2..]), blank, "the device to add was written");
    assert_eq!(in_sync(), (2, 0), "refused, the array is served as it was");

    // One more copy, from `uraid grow` given the members: rebuilt in the background.
    let o = run(&["grow", "-n3", &d[0], &d[1], "--add", &d[2]]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("raid1 of 2 devices is now of 3 devices"), "{}", text(&o));
    assert!(text(&o).contains("to be rebuilt: ") && text(&o).contains("d2.img into slot 2"), "{}", text(&o));
    let o = run(&["ctl", "t", "wait"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(in_sync(), (3, 0));
    assert_eq!(status()["size_bytes"].as_u64(), Some(size));

    // Back to two: the copy must be failed and removed first, as md's raid1 drops empty
    // slots only.
    let o = run(&["ctl", "t", "grow", "-n2"]);
    assert!(!o.status.success() && text(&o).contains("3 slots hold a device"), "{}", text(&o));
    for op in ["fail", "remove"] {
        let o = run(&["ctl", "t", op, &d[0]]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = run(&["ctl", "t", "grow", "-n2"]);
    assert!(o.status.success() && text(&o).contains("raid1 of 3 devices is now of 2 devices"), "{}", text(&o));
    assert_eq!(in_sync(), (2, 0));
    let o = run(&["stop", "t"]);
    assert!(o.status.success(), "{}", text(&o));

    let kept = d[1..].to_vec();
    let json = detail(&kept);
    assert_eq!((json["raid_devices"].as_u64(), json["degraded"].as_bool()), (Some(2), Some(false)), "{json:#}");
    assert_eq!(states(&kept), ["active", "active"]);
    assert_eq!(read(&d[2..], data.len()), data, "the copy added while running alone holds the data");
    checks_clean(&kept);

    // One more slot and nothing to fill it: refused but with --force.
    let o = run(&with(&["assemble"], &kept));
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&["ctl", "t", "grow", "-n3", "--force"]);
    assert!(o.status.success() && text(&o).contains("slot 2 is missing"), "{}", text(&o));
    assert_eq!(in_sync(), (2, 1));
    // Not with a write-intent bitmap, as on a stopped array.
    let o = run(&["ctl", "t", "grow", "--bitmap=internal"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&["ctl", "t", "grow", "-n4", "--force"]);
    assert!(!o.status.success() && text(&o).contains("has a write-intent bitmap"), "{}", text(&o));
    let o = run(&["ctl", "t", "grow", "--bitmap=none"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&["stop", "t"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(detail(&kept)["raid_devices"], 3);
    assert_eq!(read(&kept, data.len()), data);
}

/// A running array changes its level through its server as a stopped one does (md's
/// takeovers), refusals changing nothing; new connections are told the new level's block
/// sizes, and the size stays.
#[test]
fn a_running_raid1_and_raid5_of_two_take_each_other_over() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 2);
    let data = created_and_filled(&["-l1", "-n2"], &d);
    let runtime = dir.path().join("run");
    let _stop = common::StopAll(runtime.clone());
    let run = |args: &[&str]| uraid_in(&runtime, args);
    let o = run(&with(&["assemble"], &d));
    assert!(o.status.success(), "{}", text(&o));
    let status =
        || -> serde_json::Value { serde_json::from_slice(&run(&["ctl", "t", "status", "--json"]).stdout).unwrap() };
    let socket = runtime.join("t/nbd.sock");
    let told = nbd_export(&socket);
    assert_eq!(told["block_size_preferred"], 4096, "a raid1 has no chunk: {told:#}");

    // Refused, nothing written, the array served as it was: no such takeover, a level given
    // with a chunk, a bitmap in the way.
    let before = hashes(&d);
    let o = run(&["ctl", "t", "grow", "--level=6"]);
    assert!(!o.status.success() && text(&o).contains("raid1"), "{}", text(&o));
    let o = run(&["ctl", "t", "grow", "--level=5", "--chunk=64K"]);
    assert!(!o.status.success() && text(&o).contains("cannot be used with"), "{}", text(&o));
    assert_eq!(hashes(&d), before, "a refused level change wrote to a member");
    assert_eq!(status()["level"], "raid1");
    let o = run(&["ctl", "t", "grow", "--bitmap=internal"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&["ctl", "t", "grow", "--level=5"]);
    assert!(!o.status.success() && text(&o).contains("has a write-intent bitmap"), "{}", text(&o));
    let o = run(&["ctl", "t", "grow", "--bitmap=none"]);
    assert!(o.status.success(), "{}", text(&o));

    // To raid5 through `uraid grow` given the members, and new connections see it.
    let o = run(&with(&["grow", "--level=5"], &d));
    assert!(o.status.success() && text(&o).contains("raid1 of 2 devices is now raid5"), "{}", text(&o));
    let now = status();
    assert_eq!((now["level"].as_str(), now["degraded"].as_u64()), (Some("raid5"), Some(0)), "{now:#}");
    let chunk = now["chunk_bytes"].as_u64().unwrap();
    assert!(chunk >= 4096, "{now:#}");
    let told_now = nbd_export(&socket);
    assert_eq!(told_now["block_size_preferred"].as_u64(), Some(chunk), "one data chunk a stripe: {told_now:#}");
    assert_eq!(told_now["export-size"], told["export-size"], "a takeover keeps the size");
    let o = run(&["ctl", "t", "check"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&["ctl", "t", "wait", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(status()["mismatch_cnt"], 0);

    // And back.
    let o = run(&["ctl", "t", "grow", "--level=1"]);
    assert!(o.status.success() && text(&o).contains("raid5 of 2 devices is now raid1"), "{}", text(&o));
    assert_eq!(status()["level"], "raid1");
    let o = run(&["stop", "t"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(detail(&d)["level"], "raid1");
    assert_eq!(read(&d, data.len()), data);
    checks_clean(&d);
}

/// A running raid5 takes Q on an added device, rebuilt in the background, and gives it back
/// as a hot spare, as md's raid6 → raid5 takeover leaves it.
#[test]
fn a_running_raid5_takes_q_on_an_added_device_and_gives_it_back() {
    let dir = tempdir().unwrap();
    let d = disks(dir.path(), 4);
    let data = created_and_filled(&["-l5", "-n3", "--chunk=64K"], &d[..3]);
    let runtime = dir.path().join("run");
    let _stop = common::StopAll(runtime.clone());
    let run = |args: &[&str]| uraid_in(&runtime, args);
    let o = run(&with(&["assemble"], &d[..3]));
    assert!(o.status.success(), "{}", text(&o));
    let status =
        || -> serde_json::Value { serde_json::from_slice(&run(&["ctl", "t", "status", "--json"]).stdout).unwrap() };
    let size = status()["size_bytes"].as_u64();

    let o = run(&["ctl", "t", "grow", "--level=6", "--add", &d[3]]);
    assert!(o.status.success() && text(&o).contains("is now raid6 (4 devices"), "{}", text(&o));
    assert!(text(&o).contains("d3.img into slot 3"), "{}", text(&o));
    let o = run(&["ctl", "t", "wait"]);
    assert!(o.status.success(), "{}", text(&o));
    let now = status();
    assert_eq!(
        (now["level"].as_str(), now["degraded"].as_u64(), now["size_bytes"].as_u64()),
        (Some("raid6"), Some(0), size)
    );
    // From raid6 only back to raid5: md has no raid6 → raid0 takeover.
    let o = run(&["ctl", "t", "grow", "--level=0"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!(status()["level"], "raid6", "refused, the array is served as it was");

    let o = run(&["ctl", "t", "grow", "--level=5"]);
    assert!(o.status.success() && text(&o).contains("is now a spare"), "{}", text(&o));
    let o = run(&["stop", "t"]);
    assert!(o.status.success(), "{}", text(&o));
    let json = detail(&d);
    assert_eq!((json["level"].as_str(), json["raid_devices"].as_u64()), (Some("raid5"), Some(3)), "{json:#}");
    assert_eq!(states(&d), ["active", "active", "active"]);
    assert_eq!(read(&d[..3], data.len()), data);
    checks_clean(&d[..3]);
}
