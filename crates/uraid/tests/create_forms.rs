//! `uraid create` the ways mdadm creates: with `missing` members (degraded from the start), with
//! hot spares (`--spare-devices`), with 0.90 metadata; then the other commands on what it made
//! (`detail`, `examine`, `write`, `cat`, `check`, `add`, `serve` with `ctl fail`). Every bad
//! request is refused with one clear line, a non-zero exit, and the members left as they were.

use std::path::Path;

use serde_json::Value;
use uraid_testkit::sha256_hex;

mod common;
use common::serve::Serve;
use common::{ok, text, uraid, uraid_stdin, with};

/// Files `d0.img`.. of `bytes` bytes; names[i] is "missing" where `words[i]` is.
fn member_list(dir: &Path, words: &str, bytes: u64) -> Vec<String> {
    words
        .split_whitespace()
        .enumerate()
        .map(|(i, w)| {
            if w == "missing" {
                return "missing".to_string();
            }
            let p = dir.join(format!("d{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(bytes).unwrap();
            p.display().to_string()
        })
        .collect()
}

fn present(list: &[String]) -> Vec<String> {
    list.iter().filter(|m| *m != "missing").cloned().collect()
}

fn detail(members: &[String]) -> Value {
    serde_json::from_slice(&ok(&with(&["detail", "--json"], members)).stdout).unwrap()
}

fn examine(path: &str) -> Value {
    let v: Value = serde_json::from_slice(&ok(&["examine", "--json", path]).stdout).unwrap();
    v[0].clone()
}

fn cat(members: &[String]) -> Vec<u8> {
    ok(&with(&["cat"], members)).stdout
}

fn fill(members: &[String], seed: u64) -> Vec<u8> {
    let size = detail(members)["array_size_bytes"].as_u64().unwrap() as usize;
    let data = uraid_testkit::noise(seed, size);
    let o = uraid_stdin(&with(&["write", "--offset=0"], members), &data);
    assert!(o.status.success(), "write\n{}", text(&o));
    data
}

fn mismatch_cnt(members: &[String]) -> u64 {
    let o = ok(&with(&["check"], members));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    out.lines().find_map(|l| l.strip_prefix("mismatch_cnt ")).expect("mismatch_cnt").trim().parse().unwrap()
}

fn hashes(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| sha256_hex(&std::fs::read(p).unwrap())).collect()
}

/// Junk in every member's data area, so that a sync shows up as changed bytes.
fn junk(members: &[String], from: u64) {
    for (i, m) in members.iter().enumerate() {
        let mut bytes = std::fs::read(m).unwrap();
        let n = bytes.len() - from as usize - (256 << 10);
        bytes[from as usize..from as usize + n].copy_from_slice(&uraid_testkit::noise(100 + i as u64, n));
        std::fs::write(m, bytes).unwrap();
    }
}

fn data_area(path: &str, from: u64, len: u64) -> Vec<u8> {
    std::fs::read(path).unwrap()[from as usize..(from + len) as usize].to_vec()
}

/// raid5 with one member missing: degraded from the start, nothing synced (there is nothing
/// to sync), readable and writable; `uraid add` fills the slot and the array is whole.
#[test]
fn a_missing_member_makes_a_degraded_array_that_add_fills() {
    let tmp = tempfile::tempdir().unwrap();
    let list = member_list(tmp.path(), "d d missing d", 8 << 20);
    let live = present(&list);
    junk(&live, 2 << 20);
    let before: Vec<Vec<u8>> = live.iter().map(|m| data_area(m, 2 << 20, 4 << 20)).collect();
    let o = ok(&with(&["create", "-l5", "-n4", "--chunk=64K"], &list));
    assert!(String::from_utf8_lossy(&o.stdout).contains("slot(s) 2 missing"), "{}", text(&o));
    let after: Vec<Vec<u8>> = live.iter().map(|m| data_area(m, 2 << 20, 4 << 20)).collect();
    assert!(before == after, "md does not resync a raid5 missing a member, and neither does uraid");
    let d = detail(&live);
    assert_eq!(d["degraded"], true);
    assert_eq!(d["missing_slots"], serde_json::json!([2]));
    assert_eq!(d["state"], "clean, degraded");
    let e = examine(&live[2]);
    assert_eq!(e["array_state"], "AA.A");
    assert_eq!(e["examine_device_role"], "Active device 3");
    assert_eq!(e["dev_number"], 3, "missing uses up its descriptor number, as in mdadm");
    assert_eq!(e["resync_offset"], Value::Null, "clean from the start");

    let data = fill(&live, 1);
    assert!(cat(&live) == data);
    let new = tmp.path().join("new.img");
    std::fs::File::create(&new).unwrap().set_len(8 << 20).unwrap();
    let new = new.display().to_string();
    ok(&with(&["add", "--device", &new], &live));
    let whole = vec![live[0].clone(), live[1].clone(), new.clone(), live[2].clone()];
    let d = detail(&whole);
    assert_eq!((d["degraded"].clone(), d["state"].clone()), (Value::Bool(false), Value::from("clean")));
    assert_eq!(examine(&new)["examine_device_role"], "Active device 2");
    assert!(cat(&whole) == data);
    assert_eq!(mismatch_cnt(&whole), 0);
    // The rebuilt member alone with two others is enough: it holds the right data.
    assert!(cat(&[live[0].clone(), new, live[2].clone()]) == data);
}

/// raid1 and raid10 with missing copies resync the copies that are there; raid6 missing one
/// member has parity made consistent; raid6 missing two is left alone, like raid5 missing one.
#[test]
fn degraded_arrays_with_redundancy_left_are_made_consistent() {
    for (flags, words) in [
        (vec!["-l1", "-n3"], "d missing d"),
        (vec!["-l10", "-n4", "--chunk=64K"], "missing d d d"),
        (vec!["-l10", "-n4", "--chunk=64K", "--layout=f2"], "missing d missing d"),
        (vec!["-l6", "-n5", "--chunk=64K"], "d d missing d d"),
        (vec!["-l6", "-n5", "--chunk=64K"], "missing d d missing d"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let list = member_list(tmp.path(), words, 8 << 20);
        let live = present(&list);
        junk(&live, 2 << 20);
        let mut args = vec!["create"];
        args.extend(flags.iter().copied());
        ok(&with(&args, &list));
        let d = detail(&live);
        assert_eq!(d["state"], "clean, degraded", "{flags:?} {words}");
        if words != "missing d d missing d" {
            assert_eq!(mismatch_cnt(&live), 0, "{flags:?} {words}: consistent after create");
        }
        let data = fill(&live, 2);
        assert!(cat(&live) == data, "{flags:?} {words}");
    }
}

/// Spares are recorded as md records them (1.x role 0xffff: "spare"), are not written by the
/// initial sync, and take over a member failed while the array is served.
#[test]
fn spares_are_recorded_and_take_over_a_failed_member() {
    for metadata in ["1.2", "0.90"] {
        let tmp = tempfile::tempdir().unwrap();
        let list = member_list(tmp.path(), "d d d d d", 8 << 20);
        let meta = format!("--metadata={metadata}");
        let o = ok(&with(&["create", "-l5", "-n4", "-x1", "--chunk=64K", &meta], &list));
        assert!(String::from_utf8_lossy(&o.stdout).contains("d4.img (spare)"), "{}", text(&o));
        let e = examine(&list[4]);
        assert_eq!(e["examine_device_role"], "spare", "{metadata}");
        assert_eq!(e["metadata"], metadata);
        let d = detail(&list);
        assert_eq!(d["members"][4]["state"], "spare", "{metadata}: {d:#}");
        assert_eq!(d["degraded"], false);
        let data = fill(&list, 3);

        let serve = Serve::start(tmp.path(), &list, &[]);
        assert!(serve.ctl(&["fail", &list[1]]).status.success());
        let waited: Value = serde_json::from_slice(&serve.ctl(&["wait", "--json"]).stdout).unwrap();
        assert_eq!(waited["degraded"], 0, "{metadata}: {waited:#}");
        assert_eq!(waited["members"][1]["path"], list[4].as_str(), "{metadata}: the spare took slot 1");
        serve.stop(libc::SIGTERM);
        let now = vec![list[0].clone(), list[4].clone(), list[2].clone(), list[3].clone()];
        assert!(cat(&now) == data, "{metadata}");
        assert_eq!(mismatch_cnt(&now), 0, "{metadata}");
        // The failed member missed the array's last updates: given back, it is left out.
        let d = detail(&list);
        assert_eq!(d["members"][1]["fresh"], false, "{metadata}: {d:#}");
        assert_eq!(d["members"][4]["slot"], 1, "{metadata}: {d:#}");
        assert_eq!(
            examine(&list[4])["examine_device_role"],
            if metadata == "1.2" { "Active device 1" } else { "slot 1, active sync" }
        );
    }
}

/// A spare given with a missing member is rebuilt into the empty slot by create, as md starts
/// recovering onto it as soon as mdadm runs the array.
#[test]
fn a_spare_fills_a_missing_slot_at_create() {
    for metadata in ["1.2", "0.90"] {
        let tmp = tempfile::tempdir().unwrap();
        let list = member_list(tmp.path(), "d missing d d", 8 << 20);
        let live = present(&list);
        let meta = format!("--metadata={metadata}");
        let o = ok(&with(&["create", "-l5", "-n3", "-x1", "--chunk=64K", &meta], &list));
        assert!(String::from_utf8_lossy(&o.stderr).contains("spare"), "{}", text(&o));
        let d = detail(&live);
        assert_eq!(d["degraded"], false, "{metadata}: {d:#}");
        assert_eq!(d["members"][2]["slot"], 1, "{metadata}: the spare holds slot 1");
        assert_eq!(mismatch_cnt(&live), 0, "{metadata}");
        let data = fill(&live, 6);
        // Each member alone may go: the rebuilt one holds its share.
        for gone in 0..3 {
            let rest: Vec<String> = (0..3).filter(|&i| i != gone).map(|i| live[i].clone()).collect();
            assert!(cat(&rest) == data, "{metadata}: without {gone}");
        }
    }
}

/// 0.90 metadata: superblock at the end, data from sector 0, for every level; a missing member
/// can be added back, and the aliases mdadm takes for the version work.
#[test]
fn metadata_090_arrays_work_with_every_command() {
    for (level, n, alias) in
        [("linear", 3, "0.90"), ("0", 3, "0.9"), ("1", 2, "0"), ("5", 3, "0.90"), ("10", 4, "0.90")]
    {
        let tmp = tempfile::tempdir().unwrap();
        let list = member_list(tmp.path(), &vec!["d"; n].join(" "), 4 << 20);
        let lvl = format!("--level={level}");
        let nn = format!("--raid-devices={n}");
        let meta = format!("--metadata={alias}");
        ok(&with(
            &["create", &lvl, &nn, &meta, "--chunk=64K"][..if level == "1" || level == "linear" { 4 } else { 5 }],
            &list,
        ));
        let e = examine(&list[0]);
        assert_eq!(e["metadata"], "0.90", "{level}");
        assert_eq!(e["super_offset_sectors"], 8064, "{level}: 64-128 KiB from the end");
        assert_eq!(e["data_offset_sectors"], 0);
        let d = detail(&list);
        assert_eq!(d["state"], "clean", "{level}");
        let data = fill(&list, 4);
        assert!(cat(&list) == data, "{level}");
        if level != "linear" && level != "0" {
            assert_eq!(mismatch_cnt(&list), 0, "{level}");
        }
    }
    // A degraded 0.90 raid5, then the missing slot added.
    let tmp = tempfile::tempdir().unwrap();
    let list = member_list(tmp.path(), "missing d d d", 4 << 20);
    let live = present(&list);
    ok(&with(&["create", "-e", "0.90", "-l5", "-n4", "--chunk=64K"], &list));
    assert_eq!(examine(&live[0])["array_state"], ".AAA");
    let data = fill(&live, 5);
    let new = tmp.path().join("new.img");
    std::fs::File::create(&new).unwrap().set_len(4 << 20).unwrap();
    let new = new.display().to_string();
    ok(&with(&["add", "--device", &new], &live));
    let whole = [vec![new.clone()], live.clone()].concat();
    assert_eq!(detail(&whole)["degraded"], false);
    assert!(cat(&whole) == data);
    assert_eq!(mismatch_cnt(&whole), 0);
    assert_eq!(examine(&new)["examine_device_role"], "slot 0, active sync");
    // "default" is still 1.2.
    let tmp = tempfile::tempdir().unwrap();
    let list = member_list(tmp.path(), "d d", 4 << 20);
    ok(&with(&["create", "-l1", "-n2", "--metadata=default"], &list));
    assert_eq!(examine(&list[0])["metadata"], "1.2");
}

/// Each bad request: one line naming what is wrong, exit status non-zero, members unchanged.
#[test]
fn bad_create_requests_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let refused = |args: &[&str], files: &[String], expect: &[&str]| {
        let before = hashes(files);
        let o = uraid(args);
        assert!(!o.status.success(), "{args:?} must fail\n{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        for e in expect {
            assert!(err.contains(e), "{args:?}: {e:?} not in: {err}");
        }
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert_eq!(hashes(files), before, "{args:?} wrote to a member");
    };
    let list = member_list(dir, "d d missing missing", 4 << 20);
    refused(
        &with(&["create", "-l5", "-n4"], &list),
        &present(&list),
        &["too many missing devices", "slot(s) 2, 3", "raid5 can lose one member"],
    );
    refused(&with(&["create", "-l6", "-n5"], &list), &present(&list), &["You haven't given enough devices"]);
    let four = member_list(dir, "d d d d", 4 << 20);
    refused(
        &with(&["create", "-l5", "-n4", "-x1"], &four),
        &four,
        &["You haven't given enough devices (real or missing)", "4 given"],
    );
    refused(
        &with(&["create", "-l5", "-n3"], &four),
        &four,
        &["You have listed more devices (4) than are in the array(3)"],
    );
    refused(&with(&["create", "-l0", "-n3", "-x1"], &four), &four, &["raid0 is incompatible with spare-devices"]);
    refused(
        &with(&["create", "-l1", "-n3", "-x1"], &[four[..3].to_vec(), vec!["missing".into()]].concat()),
        &four,
        &["is 'missing' but is a spare"],
    );
    refused(
        &with(&["create", "-llinear", "-n4"], &[four[..3].to_vec(), vec!["missing".into()]].concat()),
        &four,
        &["does not support missing devices", "slot 3"],
    );
    refused(&["create", "-l1", "-n2", "missing", "MISSING"], &[], &["every raid slot is missing"]);
    refused(&with(&["create", "-l1", "-n4", "--metadata=2.0"], &four), &four, &["unknown metadata version \"2.0\""]);
    refused(&with(&["create", "-l1", "-n4", "--metadata=imsm"], &four), &four, &["unknown metadata version"]);
    // raid10 n2 keeps both copies of a chunk on slots 0 and 1.
    refused(
        &with(&["create", "-l10", "-n4"], &["missing".to_string(), "missing".into(), four[2].clone(), four[3].clone()]),
        &four,
        &["too many missing devices", "raid10"],
    );

    // 0.90's limits: 27 devices, 4 TiB used per member, single-zone raid0.
    let many: Vec<String> = (0..28)
        .map(|i| {
            let p = dir.join(format!("m{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(1 << 20).unwrap();
            p.display().to_string()
        })
        .collect();
    refused(&with(&["create", "-e0.90", "-l1", "-n28"], &many), &many, &["0.90 metadata supports at most 27 devices"]);
    refused(&with(&["create", "-e0.90", "-l1", "-n26", "-x2"], &many), &many, &["26 raid devices + 2 spares > 27"]);
    let big: Vec<String> = (0..2)
        .map(|i| {
            let p = dir.join(format!("big{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(5 << 40).unwrap();
            p.display().to_string()
        })
        .collect();
    refused(&with(&["create", "-e0.90", "-l1", "-n2"], &big), &[], &["at most 4 TiB per device"]);
    let uneven = vec![four[0].clone(), {
        let p = dir.join("eight.img");
        std::fs::File::create(&p).unwrap().set_len(8 << 20).unwrap();
        p.display().to_string()
    }];
    refused(
        &with(&["create", "-e0.90", "-l0", "-n2"], &uneven),
        &uneven,
        &["needs members of the same size", "eight.img"],
    );
    refused(
        &with(&["create", "-e0.90", "-l0", "-n2", "--layout=original"], &four[..2]),
        &four,
        &["does not support layouts for RAID0"],
    );
    refused(&with(&["create", "-e0.90", "-l5", "-n4", "--consistency-policy=ppl"], &four), &four, &["ppl", "0.90"]);
    // The same sizes are fine with 1.x, and linear/raid0 take big members under 0.90.
    assert!(uraid(&with(&["create", "-e0.90", "-l0", "-n2"], &big)).status.success());
}
