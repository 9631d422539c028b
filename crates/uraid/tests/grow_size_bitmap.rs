//! `uraid grow --size` and `uraid grow --bitmap` through the real binary: arrays made on part
//! of their members grow into the rest with their data intact and the new space, and only it,
//! owed a resync; bitmaps come and go; every refusal says why and leaves the members as they
//! were, byte for byte.

use std::path::Path;

use serde_json::Value;
use uraid_testkit::sha256_hex;

mod common;
use common::{image, nbd_export, ok, text, uraid, uraid_in, uraid_stdin, with};

const MIB: u64 = 1 << 20;

/// `n` members of 12 MiB in `dir`, an array of `flags` made on 4 MiB of each, filled with
/// data; the members and the data.
fn array(dir: &Path, flags: &[&str], n: usize) -> (Vec<String>, Vec<u8>) {
    let members: Vec<String> = (0..n).map(|i| image(dir, &format!("d{i}.img"), 12 * MIB)).collect();
    let raid_devices = format!("--raid-devices={n}");
    let head: Vec<&str> =
        ["create", "--size=4M", raid_devices.as_str()].iter().copied().chain(flags.iter().copied()).collect();
    ok(&with(&head, &members));
    let bytes = detail(&members)["array_size_bytes"].as_u64().unwrap();
    let data: Vec<u8> = (0..bytes).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let o = uraid_stdin(&with(&["write", "--offset=0"], &members), &data);
    assert!(o.status.success(), "{}", text(&o));
    (members, data)
}

fn examine(member: &str) -> Value {
    let o = ok(&["examine", "--json", member]);
    serde_json::from_slice::<Value>(&o.stdout).unwrap()[0].clone()
}

fn detail(members: &[String]) -> Value {
    let o = ok(&with(&["detail", "--json"], members));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn read(members: &[String], len: usize) -> Vec<u8> {
    let o = ok(&with(&["cat"], members));
    o.stdout[..len].to_vec()
}

fn hashes(members: &[String]) -> Vec<String> {
    members.iter().map(|m| sha256_hex(&std::fs::read(m).unwrap())).collect()
}

#[test]
fn size_max_grows_into_the_members_and_owes_a_resync_of_the_new_space_only() {
    let dir = tempfile::tempdir().unwrap();
    let (members, data) = array(dir.path(), &["--level=5", "--chunk=64K"], 3);
    let o = ok(&with(&["grow", "--size=max"], &members));
    assert!(text(&o).contains("component size has been set to 11264K"), "{}", text(&o));
    for m in &members {
        let e = examine(m);
        assert_eq!(e["component_size_kib"], 11264);
        assert_eq!(e["resync_offset"], 8192, "resynced from the old end, 4 MiB of each member");
        assert_eq!(e["avail_dev_sectors"], 22528, "data_size reaches the member's end, as md records it");
    }
    let d = detail(&members);
    assert_eq!(d["array_size_bytes"], 2 * 11264 * 1024);
    assert_eq!(d["clean"], false);
    assert_eq!(read(&members, data.len()), data, "the data before the grow reads back");

    // While the resync is owed, md changes neither size nor bitmap.
    refused(&["grow", "--bitmap=internal"], &members, "owes a resync");
    refused(&["grow", "--size=max"], &members, "resync it first (uraid resync)");

    // The resync covers exactly the new space: from the old end of the array to the new one.
    let o = ok(&with(&["resync"], &members));
    assert!(text(&o).contains(&format!("resuming from byte {} of {}", 8 * MIB, 2 * 11264 * 1024)), "{}", text(&o));
    assert_eq!(examine(&members[0])["resync_offset"], Value::Null, "clean once resynced");
    let o = ok(&with(&["check"], &members));
    assert!(text(&o).contains("mismatch_cnt 0"), "{}", text(&o));
    assert_eq!(read(&members, data.len()), data);

    // Asking again changes nothing and says so.
    let before = hashes(&members);
    let o = ok(&with(&["grow", "--size=max"], &members));
    assert!(text(&o).contains("unchanged at 11264K"), "{}", text(&o));
    assert_eq!(hashes(&members), before);
}

#[test]
fn every_redundant_level_and_metadata_grows_to_a_size() {
    for metadata in ["1.2", "1.0", "0.90"] {
        // The resync point md records (member sectors, array sectors for raid10) and the byte
        // of the array it stands for (the old array's end).
        for (level, n, resync_from, old_end) in
            [("1", 2, 8192, 4 * MIB), ("6", 4, 8192, 8 * MIB), ("10", 4, 16384, 8 * MIB)]
        {
            let dir = tempfile::tempdir().unwrap();
            let md = format!("--metadata={metadata}");
            let lv = format!("--level={level}");
            let (members, data) = array(dir.path(), &[&md, &lv], n);
            ok(&with(&["grow", "--size=8M"], &members));
            let e = examine(&members[0]);
            let what = format!("raid{level} {metadata}");
            assert_eq!(e["component_size_kib"], 8192, "{what}");
            // raid10 resyncs by array sectors, as md's raid10_resize records it.
            assert_eq!(e["resync_offset"], resync_from, "{what}");
            assert_eq!(read(&members, data.len()), data, "{what}");
            let o = ok(&with(&["resync"], &members));
            assert!(text(&o).contains(&format!("resuming from byte {old_end} ")), "{what}: {}", text(&o));
            let o = ok(&with(&["check"], &members));
            assert!(text(&o).contains("mismatch_cnt 0"), "{what}: {}", text(&o));
        }
    }
}

#[test]
fn assume_clean_records_no_resync() {
    let dir = tempfile::tempdir().unwrap();
    let (members, data) = array(dir.path(), &["--level=1"], 2);
    let o = ok(&with(&["grow", "--size=6M", "--assume-clean"], &members));
    assert!(text(&o).contains("recorded in sync"), "{}", text(&o));
    let e = examine(&members[0]);
    assert_eq!((e["component_size_kib"].as_u64(), e["resync_offset"].clone()), (Some(6144), Value::Null));
    assert_eq!(detail(&members)["clean"], true);
    assert_eq!(read(&members, data.len()), data);
}

#[test]
fn a_bitmap_comes_and_goes_and_follows_a_grow() {
    let dir = tempfile::tempdir().unwrap();
    let (members, data) = array(dir.path(), &["--level=5", "--chunk=64K"], 3);
    let o = ok(&with(&["grow", "--bitmap=internal", "--bitmap-chunk=4K"], &members));
    assert!(text(&o).contains("internal bitmap added, 4K of each member per bit"), "{}", text(&o));
    for m in &members {
        let e = examine(m);
        assert_eq!((e["bitmap_offset_sectors"].as_i64(), e["consistency_policy"].as_str()), (Some(8), Some("bitmap")));
    }
    let o = ok(&["examine", &members[0]]);
    assert!(text(&o).contains("Internal Bitmap : 8 sectors from superblock"), "{}", text(&o));
    assert_eq!(detail(&members)["clean"], true, "a clean array stays clean: nothing to resync");
    assert_eq!(read(&members, data.len()), data);

    // The bitmap follows the grow (its chunk doubled: 11 MiB in 4 KiB chunks no longer fits
    // the sector it took), and its new bits send the resync over the new space.
    ok(&with(&["grow", "--size=max"], &members));
    let o = ok(&with(&["resync"], &members));
    assert!(text(&o).contains(&format!("resuming from byte {}", 8 * MIB)), "{}", text(&o));
    let o = ok(&with(&["check"], &members));
    assert!(text(&o).contains("mismatch_cnt 0"), "{}", text(&o));

    let o = ok(&with(&["grow", "--bitmap=none"], &members));
    assert!(text(&o).contains("internal bitmap removed"), "{}", text(&o));
    let e = examine(&members[0]);
    assert_eq!((e["bitmap_offset_sectors"].clone(), e["consistency_policy"].as_str()), (Value::Null, Some("resync")));
    assert_eq!(read(&members, data.len()), data);
}

/// `uraid grow ARGS MEMBERS` must fail saying `says`, and leave every member as it was.
fn refused(args: &[&str], members: &[String], says: &str) {
    let before = hashes(members);
    let o = uraid(&with(args, members));
    assert!(!o.status.success(), "uraid {args:?} should have failed\n{}", text(&o));
    assert!(text(&o).contains(says), "uraid {args:?} does not say {says:?}\n{}", text(&o));
    assert_eq!(hashes(members), before, "uraid {args:?} changed a member");
}

#[test]
fn refusals_say_why_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (raid0, _) = array(dir.path(), &["--level=0"], 2);
    refused(&["grow", "--size=max"], &raid0, "md cannot change the component size of a raid0 array");
    refused(&["grow", "--bitmap=internal"], &raid0, "bitmaps are not meaningful with raid0");

    let dir = tempfile::tempdir().unwrap();
    let (members, _) = array(dir.path(), &["--level=5", "--chunk=64K"], 3);
    refused(&["grow", "--size=2M"], &members, "cannot shrink the component size from 4096K to 2048K");
    refused(&["grow", "--size=100M"], &members, "has room for 11264K of data per device; --size asks for 102400K");
    refused(&["grow", "--size=1000"], &members, "cannot shrink");
    refused(&["grow", "--size=3.5K"], &members, "--size=3.5K");
    refused(&["grow", "--bitmap=none"], &members, "no bitmap found");
    refused(&["grow", "--bitmap=/tmp/file"], &members, "only internal and none are supported");
    refused(
        &["grow", "--size=max", "--bitmap=internal"],
        &members,
        "--bitmap changes cannot be used with other changes",
    );
    refused(
        &["grow", "--bitmap=internal", "--bitmap-chunk=1K"],
        &members,
        "bitmap chunk 1024 bytes is not a power of two of at least 4096",
    );
    refused(&["grow", "--array-size=1M"], &members, "--array-size goes with --raid-devices onto fewer devices");
    ok(&with(&["grow", "--bitmap=internal"], &members));
    refused(&["grow", "--bitmap=internal"], &members, "a bitmap is already present");

    // Not the whole array: one member left out of a size change (md resyncs the new space
    // over every member), a member of another array given in.
    refused(&["grow", "--size=max"], &members[..2], "the member in slot 2 was not given");
    refused(&["grow", "--bitmap=none"], &members[1..], "the member in slot 0 was not given");
    let other = tempfile::tempdir().unwrap();
    let (foreign, _) = array(other.path(), &["--level=1"], 2);
    let mixed = vec![members[0].clone(), members[1].clone(), foreign[0].clone()];
    let before = hashes(&foreign);
    refused(&["grow", "--size=max"], &mixed, "");
    assert_eq!(hashes(&foreign), before);

    // A 0.90 array cannot record 4 TiB per member.
    let dir = tempfile::tempdir().unwrap();
    let (v090, _) = array(dir.path(), &["--level=1", "--metadata=0.90"], 2);
    refused(&["grow", "--size=5T"], &v090, "0.90 metadata records at most 4 TiB");

    // raid10 far copies stay where md put them.
    let dir = tempfile::tempdir().unwrap();
    let (far, _) = array(dir.path(), &["--level=10", "--layout=f2"], 2);
    refused(&["grow", "--size=max"], &far, "far layout");
}

/// A running array takes a bitmap and more space from its server: it winds down, writes the
/// change as on a stopped array and is served again, the new space resynced at once and
/// served to new connections; the data stays, and the kernel's kind of check finds parity
/// right.
#[test]
fn a_running_array_changes_its_bitmap_and_size_through_its_server() {
    let dir = tempfile::tempdir().unwrap();
    let (members, data) = array(dir.path(), &["--level=5", "--chunk=64K", "--name=busy"], 3);
    let run = dir.path().join("run");
    let _stop = common::StopAll(run.clone());
    let uraid_in = |args: &[&str]| uraid_in(&run, args);
    let status =
        || -> Value { serde_json::from_slice(&uraid_in(&["ctl", "busy", "status", "--json"]).stdout).unwrap() };
    let o = uraid_in(&with(&["assemble"], &members));
    assert!(o.status.success(), "{}", text(&o));
    let size = status()["size_bytes"].as_u64().unwrap();

    let o = uraid_in(&with(&["grow", "--bitmap=internal", "--bitmap-chunk=64K"], &members));
    assert!(o.status.success() && text(&o).contains("internal bitmap added, 64K"), "{}", text(&o));
    let o = uraid_in(&["ctl", "busy", "grow", "--size=max"]);
    assert!(o.status.success() && text(&o).contains("component size has been set to"), "{}", text(&o));
    assert!(text(&o).contains("new connections are served the new size"), "{}", text(&o));
    let o = uraid_in(&["ctl", "busy", "grow", "--bitmap=sideways"]);
    assert!(!o.status.success() && text(&o).contains("only internal and none"), "{}", text(&o));
    let o = uraid_in(&["ctl", "busy", "wait"]);
    assert!(o.status.success(), "{}", text(&o));
    let now = status();
    let grown = now["size_bytes"].as_u64().unwrap();
    assert!(grown > size, "served at the new size: {now:#}");
    assert_eq!(
        nbd_export(&run.join("busy/nbd.sock"))["export-size"].as_u64(),
        Some(grown),
        "a new connection is told it"
    );
    assert_eq!(now["resync_needed"], false, "the new space was resynced: {now:#}");
    let o = uraid_in(&["stop", "busy"]);
    assert!(o.status.success(), "{}", text(&o));

    let e = examine(&members[0]);
    assert!(e["component_size_kib"].as_u64().unwrap() > 4096, "{e:#}");
    assert_eq!((e["consistency_policy"].as_str(), e["resync_offset"].clone()), (Some("bitmap"), Value::Null));
    assert_eq!(read(&members, data.len()), data);
    let o = ok(&with(&["check"], &members));
    assert!(text(&o).contains("mismatch_cnt 0"), "{}", text(&o));
    let o = uraid_in(&with(&["assemble"], &members));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(status()["size_bytes"].as_u64(), Some(grown), "started again, at the same size");
    let o = uraid_in(&["ctl", "busy", "grow", "--bitmap=none"]);
    assert!(o.status.success() && text(&o).contains("internal bitmap removed"), "{}", text(&o));
    let o = uraid_in(&["stop", "busy"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(examine(&members[0])["consistency_policy"], "resync");
}

/// A running array that owes a resync (here of the space a grow added, the resync stopped with
/// idle) is refused a size or bitmap change at once, as md refuses it: clients are not made to
/// wait for a wind-down that ends in the same refusal, and the resync stays owed.
#[test]
fn a_running_array_owing_a_resync_is_refused_a_change_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (members, data) = array(dir.path(), &["--level=5", "--chunk=64K", "--name=owing"], 3);
    let run = dir.path().join("run");
    let _stop = common::StopAll(run.clone());
    let uraid_in = |args: &[&str]| uraid_in(&run, args);
    let o = uraid_in(&with(&["assemble"], &members));
    assert!(o.status.success(), "{}", text(&o));
    // Slow enough that the resync of the new space is still running when stopped.
    let o = uraid_in(&["ctl", "owing", "speed-limit", "--min=16K", "--max=16K"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = uraid_in(&["ctl", "owing", "grow", "--size=max"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = uraid_in(&["ctl", "owing", "grow", "--bitmap=internal"]);
    assert!(!o.status.success() && text(&o).contains("resync is running"), "{}", text(&o));
    let o = uraid_in(&["ctl", "owing", "idle"]);
    assert!(o.status.success(), "{}", text(&o));
    for change in ["--bitmap=internal", "--size=4M"] {
        let o = uraid_in(&["ctl", "owing", "grow", change]);
        assert!(!o.status.success() && text(&o).contains("owes a resync"), "{change}: {}", text(&o));
    }
    let log = std::fs::read_to_string(run.join("owing/log")).unwrap();
    // The size grow's own wind-down only: the refused changes were refused before one.
    assert_eq!(log.matches("finishing the requests in flight").count(), 1, "{log}");
    let o = uraid_in(&["stop", "owing"]);
    assert!(o.status.success(), "{}", text(&o));
    let e = examine(&members[0]);
    assert_eq!(e["consistency_policy"], "resync", "{e:#}");
    assert!(e["resync_offset"].as_u64().is_some(), "the resync is still owed: {e:#}");
    assert_eq!(read(&members, data.len()), data);
}

#[test]
fn a_degraded_array_gains_a_bitmap_and_rebuilds_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let members: Vec<String> = (0..3).map(|i| image(dir.path(), &format!("d{i}.img"), 12 * MIB)).collect();
    let list = vec![members[0].clone(), members[1].clone(), "missing".to_string()];
    ok(&with(&["create", "--level=1", "--raid-devices=3", "--size=4M"], &list));
    let present = members[..2].to_vec();
    let data: Vec<u8> = (0..4 * MIB).map(|i| (i.wrapping_mul(40_503) >> 7) as u8).collect();
    let o = uraid_stdin(&with(&["write", "--offset=0"], &present), &data);
    assert!(o.status.success(), "{}", text(&o));
    // md adds a bitmap to a degraded array while no recovery runs; its every bit set, the
    // member that comes is rebuilt in full, not by the bitmap.
    ok(&with(&["grow", "--bitmap=internal"], &present));
    // Its size waits for the rebuild: the new space is resynced over every member.
    refused(&["grow", "--size=max"], &present, "the array is degraded (1 of 3 slots empty or rebuilding)");
    let o = ok(&with(&["add", "--device", &members[2]], &present));
    assert!(text(&o).contains("rebuilding"), "{}", text(&o));
    assert!(!text(&o).contains("guided by the write-intent bitmap"), "{}", text(&o));
    let d = detail(&members);
    assert_eq!((d["degraded"].as_bool(), d["consistency_policy"].as_str()), (Some(false), Some("bitmap")));
    let o = ok(&with(&["check"], &members));
    assert!(text(&o).contains("mismatch_cnt 0"), "{}", text(&o));
    assert_eq!(read(&members, data.len()), data);
}
