//! `uraid grow --raid-devices` onto fewer members of a raid4/5/6, and restripes run backwards:
//! md's reshape from the array's end, the data moving up on every member. A shrink is refused
//! until `--array-size` gives the size uraid names (mdadm wants the array truncated first), and
//! nothing is written before; then what the array keeps reads back, the member left out is a
//! spare, parity checks clean, and a run killed part-way is finished by `--continue`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::restripe::{blank_members, filled_with, mismatch_cnt, reshape_position};
use common::{detail, hashes, ok, text, uraid_in, uraid_stdin, with};

/// The `--array-size=NK` a refused shrink names, in bytes.
fn named_size(refusal: &str) -> u64 {
    let at = refusal.find("--array-size=").unwrap_or_else(|| panic!("no size named: {refusal}"));
    let digits: String = refusal[at + 13..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<u64>().unwrap() * 1024
}

/// Shrink the array `create` makes over `members` to `to` members: refused without the size,
/// members untouched, then made with it; checked as the module says.
fn shrink(create: &[&str], members: &[String], to: u32) -> (Vec<u8>, u64) {
    let data = filled_with(create, members);
    let before = hashes(members);
    let n = format!("-n{to}");
    let o = uraid_stdin(&with(&["grow", &n], members), b"");
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("will reduce the size of the array"), "{}", text(&o));
    assert_eq!(hashes(members), before, "a refused shrink wrote something");
    let size = named_size(&text(&o));
    assert!(size < data.len() as u64);
    let word = format!("--array-size={}K", size / 1024);
    let o = ok(&with(&["grow", &n, &word], members));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("starting at 0K") && said.contains("finished"), "{said}");
    let d = detail(members);
    assert_eq!(d["reshape"], Value::Null);
    assert_eq!((d["raid_devices"].as_u64(), d["array_size_bytes"].as_u64()), (Some(u64::from(to)), Some(size)));
    let spares = d["members"].as_array().unwrap().iter().filter(|m| m["state"] == "spare").count();
    assert_eq!(spares, members.len() - to as usize, "the members left out are spares: {d:#}");
    let got = ok(&with(&["cat"], members)).stdout;
    assert!(got[..] == data[..size as usize], "what the array keeps moved intact");
    assert_eq!(mismatch_cnt(members), "mismatch_cnt 0", "parity right everywhere");
    (data, size)
}

#[test]
fn full_members_give_up_a_chunk_to_shrink() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 5, 12 << 20);
    let (data, size) = shrink(&["-l5", "-n5", "--chunk=64K"], &members, 4);
    // Each member gives a chunk, so the array keeps a little less than 4/5 of its size.
    assert!(size < data.len() as u64 * 3 / 4 && size + 3 * (64 << 10) >= data.len() as u64 * 3 / 4, "{size}");
}

#[test]
fn members_with_room_after_the_data_keep_their_size() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 6, 12 << 20);
    let (data, size) = shrink(&["-l6", "-n6", "--chunk=64K", "--size=10M"], &members, 5);
    assert_eq!(size, data.len() as u64 * 3 / 4, "three data members of four, the component size kept");
}

#[test]
fn a_shrink_killed_part_way_is_continued_from_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 5, 48 << 20);
    let data = filled_with(&["-l5", "-n5", "--chunk=64K"], &members);
    let o = uraid_stdin(&with(&["grow", "-n4"], &members), b"");
    let size = named_size(&text(&o));
    let word = format!("--array-size={}K", size / 1024);
    let start = size / 512;
    let mut child = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["grow", "-n4", &word, "--speed-limit-max=16M"])
        .args(&members)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while reshape_position(&members[0]).is_none_or(|at| at >= start) {
        assert!(Instant::now() < deadline, "no position recorded below the end");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let at = reshape_position(&members[0]).expect("still mid-reshape after the kill");
    assert!(at > 0 && at < start, "killed part-way: {at} of {start}");
    let examined = String::from_utf8(ok(&["examine", &members[0]]).stdout).unwrap();
    assert!(examined.contains("Delta Devices : -1 (5->4)"), "{examined}");
    let got = ok(&with(&["cat"], &members)).stdout;
    assert!(got[..] == data[..size as usize], "mid-reshape, uraid cat reads the data through both shapes");
    let o = ok(&with(&["grow", "--continue"], &members));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("from 5 to 4 devices continuing at"), "{said}");
    assert_eq!(reshape_position(&members[0]), None, "finished");
    assert_eq!(detail(&members)["raid_devices"], 4);
    assert!(ok(&with(&["cat"], &members)).stdout[..] == data[..size as usize], "the data survived the kill");
    assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0");
}

/// 1.0 metadata keeps nothing before the data: a restripe moves it up instead, where the
/// members have room after it, and runs backwards.
#[test]
fn a_restripe_of_1_0_metadata_moves_the_data_up() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 4, 12 << 20);
    let data = filled_with(&["-l5", "-n4", "--chunk=64K", "--metadata=1.0", "--size=10M"], &members);
    let o = ok(&with(&["grow", "--chunk=32K"], &members));
    assert!(String::from_utf8_lossy(&o.stderr).contains("finished"), "{}", text(&o));
    let d = detail(&members);
    assert_eq!((d["chunk_bytes"].as_u64(), d["array_size_bytes"].as_u64()), (Some(32 << 10), Some(data.len() as u64)));
    let examined = String::from_utf8(ok(&["examine", &members[0]]).stdout).unwrap();
    assert!(!examined.contains("Data Offset : 0 sectors"), "the data moved up: {examined}");
    assert!(ok(&with(&["cat"], &members)).stdout == data);
    assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0");
}

#[test]
fn shrinks_it_does_not_do_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 5, 8 << 20);
    filled_with(&["-l5", "-n4", "--chunk=64K"], &members[..4]);
    let old = &members[..4];
    let untouched = hashes(&members);
    for (args, says) in [
        (vec!["grow", "-n1", "--array-size=1K"], "at least 2 devices"),
        (vec!["grow", "-n3", "--array-size=1024K"], "is not the size the array will have"),
        (vec!["grow", "-n3", "--array-size=1024K", "--add", &members[4]], "--add takes new devices"),
        (vec!["grow", "--chunk=128K", "--array-size=1024K"], "onto fewer devices"),
        (vec!["grow", "--array-size=1024K"], "goes with --raid-devices"),
    ] {
        let all: Vec<&str> = args.iter().copied().chain(old.iter().map(String::as_str)).collect();
        let o = uraid_stdin(&all, b"");
        assert!(!o.status.success(), "{all:?}\n{}", text(&o));
        assert!(text(&o).contains(says), "{all:?}: expected {says:?}\n{}", text(&o));
        assert_eq!(hashes(&members), untouched, "{all:?} wrote something");
    }
}

/// A running array is reshaped onto fewer devices by its server, as `uraid grow` given its
/// members asks: refused without the size it shrinks to (named) or with another, nothing
/// changed, then made with it; what the array keeps reads back once it is stopped.
#[test]
fn a_running_array_is_shrunk_by_its_server_on_the_word_of_its_new_size() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 4, 12 << 20);
    let data = filled_with(&["-l5", "-n4", "--chunk=64K"], &members);
    let runtime = dir.path().join("run");
    let _stop = common::StopAll(runtime.clone());
    std::fs::create_dir(&runtime).unwrap();
    let run = |args: &[&str]| uraid_in(&runtime, args);
    let o = run(&with(&["assemble"], &members));
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&with(&["grow", "-n3"], &members));
    assert!(!o.status.success() && text(&o).contains("will reduce the size of the array"), "{}", text(&o));
    let size = named_size(&text(&o));
    let o = run(&with(&["grow", "-n3", "--array-size=1024K"], &members));
    assert!(!o.status.success() && text(&o).contains("is not the size the array will have"), "{}", text(&o));
    let o = run(&["status", "--json"]);
    let status: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(status[0]["status"]["sync_action"], "idle", "{status:#}");
    let word = format!("--array-size={}K", size / 1024);
    let o = run(&with(&["grow", "-n3", &word], &members));
    assert!(o.status.success() && text(&o).contains("reshape from 4 to 3 devices started"), "{}", text(&o));
    let o = run(&["ctl", "grown", "wait"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&["stop", "grown"]);
    assert!(o.status.success(), "{}", text(&o));
    let d = detail(&members);
    assert_eq!((d["raid_devices"].as_u64(), d["array_size_bytes"].as_u64()), (Some(3), Some(size)), "{d:#}");
    assert_eq!(d["reshape"], Value::Null);
    let got = ok(&with(&["cat"], &members)).stdout;
    assert!(got[..] == data[..size as usize], "what the array keeps moved intact");
    assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0");
}
