//! `uraid grow --chunk` and `--layout`: a raid4/5/6 restriped on its own members (or onto more
//! with `--raid-devices`), as md's reshape does it. The data written before reads back after,
//! `examine` and `detail` show the new shape, parity checks clean, a run killed part-way is
//! finished by `--continue`, and refusals leave every member byte for byte as it was.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::restripe::{blank_members, filled_with, mismatch_cnt, reshape_position};
use common::{detail, hashes};
use common::{ok, text, uraid_in, uraid_stdin, with};

/// Restripe the array `create` makes over the first `old` of `count` members with `grow` (the
/// rest added), then check what it must be: chunks of `chunk_bytes`, and the layout named
/// `layout` (raid4 has no layout name).
fn restripe(create: &[&str], old: usize, count: usize, grow: &[&str], chunk_bytes: u64, layout: Option<&str>) {
    let what = format!("{create:?} then {grow:?}");
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), count, 12 << 20);
    let data = filled_with(create, &members[..old]);
    let mut args = vec!["grow"];
    args.extend_from_slice(grow);
    args.extend(members[..old].iter().map(String::as_str));
    for added in &members[old..] {
        args.extend(["--add", added.as_str()]);
    }
    let o = ok(&args);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("starting at 0K") && said.contains("finished"), "{what}: {said}");
    let d = detail(&members);
    assert_eq!(d["reshape"], serde_json::Value::Null, "{what}");
    assert_eq!(d["chunk_bytes"], chunk_bytes, "{what}: {d:#}");
    assert_eq!(d["layout"].as_str(), layout, "{what}: {d:#}");
    assert_eq!(d["raid_devices"], count as u64, "{what}");
    let examined = String::from_utf8(ok(&["examine", &members[0]]).stdout).unwrap();
    let chunk_line = format!("Chunk Size : {}K", chunk_bytes / 1024);
    assert!(examined.contains(&chunk_line) && examined.contains(layout.unwrap_or("")), "{what}:\n{examined}");
    let got = ok(&with(&["cat"], &members)).stdout;
    assert!(got[..data.len()] == data[..], "{what}: the data moved intact");
    assert!(got[data.len()..].iter().all(|&b| b == 0), "{what}: new space reads as zeros");
    assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0", "{what}: parity right everywhere");
}

#[test]
fn a_chunk_change_keeps_the_data_and_the_size() {
    restripe(&["-l5", "-n4", "--chunk=64K"], 4, 4, &["--chunk=128K"], 128 << 10, Some("left-symmetric"));
    restripe(&["-l6", "-n5", "--chunk=64K"], 5, 5, &["--chunk=32"], 32 << 10, Some("left-symmetric"));
    restripe(&["-l4", "-n3", "--chunk=32K"], 3, 3, &["-c", "64K"], 64 << 10, None);
}

#[test]
fn a_layout_change_keeps_the_data_and_the_size() {
    restripe(&["-l5", "-n4", "--chunk=64K"], 4, 4, &["--layout=right-asymmetric"], 64 << 10, Some("right-asymmetric"));
    restripe(&["-l6", "-n5", "--chunk=64K"], 5, 5, &["--layout=parity-first-6"], 64 << 10, Some("parity-first-6"));
}

#[test]
fn chunk_layout_and_more_members_at_once() {
    restripe(
        &["-l5", "-n4", "--chunk=64K", "--layout=left-asymmetric"],
        4,
        4,
        &["--chunk=32K", "--layout=ls"],
        32 << 10,
        Some("left-symmetric"),
    );
    restripe(&["-l5", "-n3", "--chunk=64K"], 3, 4, &["-n4", "--chunk=128K"], 128 << 10, Some("left-symmetric"));
}

#[test]
fn a_chunk_change_killed_part_way_is_continued_from_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 4, 48 << 20);
    let data = filled_with(&["-l5", "-n4", "--chunk=64K"], &members);
    grow_killed_part_way(&["--chunk=128K", "--layout=right-symmetric"], &members);
    let at = reshape_position(&members[0]).expect("still mid-reshape after the kill");
    assert!(at > 0 && at * 512 < data.len() as u64, "killed part-way: {at}");
    let examined = String::from_utf8(ok(&["examine", &members[0]]).stdout).unwrap();
    assert!(
        examined.contains("New Chunksize : 128K") && examined.contains("New Layout : right-symmetric"),
        "{examined}"
    );
    let got = ok(&with(&["cat"], &members)).stdout;
    assert!(got == data, "mid-reshape, uraid cat reads the data through both shapes");
    let o = ok(&with(&["grow", "--continue"], &members));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("from chunk 64K to 128K") && said.contains("continuing at"), "{said}");
    assert_eq!(reshape_position(&members[0]), None, "finished");
    let d = detail(&members);
    assert_eq!((d["chunk_bytes"].as_u64(), d["layout"].as_str()), (Some(128 << 10), Some("right-symmetric")));
    assert!(ok(&with(&["cat"], &members)).stdout == data, "the data survived the kill");
    assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0");
}

#[test]
fn restripes_it_does_not_do_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 5, 8 << 20);
    filled_with(&["-l5", "-n4", "--chunk=64K"], &members[..4]);
    std::fs::create_dir(dir.path().join("r4")).unwrap();
    let raid4 = blank_members(&dir.path().join("r4"), 3, 8 << 20);
    filled_with(&["-l4", "-n3", "--chunk=64K"], &raid4);
    let old = &members[..4];
    let untouched = (hashes(&members), hashes(&raid4));
    for (args, on, says) in [
        (vec!["grow", "--chunk=96K"], old, "not a power of two"),
        (vec!["grow", "--chunk=2K"], old, "positive multiple of 4K"),
        (vec!["grow", "--chunk=64K"], old, "nothing to change"),
        (vec!["grow", "--layout=left-symmetric"], old, "nothing to change"),
        (vec!["grow", "--layout=sideways"], old, "sideways"),
        (vec!["grow", "--layout=left-symmetric-6"], old, "left-symmetric-6"),
        (vec!["grow", "--chunk=16M"], old, "does not evenly divide device size"),
        (vec!["grow", "--chunk=128K", "--add", &members[4]], old, "--add takes new devices"),
        (vec!["grow", "--chunk=128K", "--continue"], old, "not both"),
        (vec!["grow", "--layout=left-symmetric"], &raid4[..], "raid4 keeps parity on the last member"),
    ] {
        let all: Vec<&str> = args.iter().copied().chain(on.iter().map(String::as_str)).collect();
        let o = uraid_stdin(&all, b"");
        assert!(!o.status.success(), "{all:?}\n{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{all:?}: expected {says:?}\n{}", text(&o));
        assert_eq!((hashes(&members), hashes(&raid4)), untouched, "{all:?} wrote something");
    }
}

/// A running array is restriped by its server, in the background, while it is served: asked
/// with `uraid grow --chunk` given its members, and with `uraid ctl NAME grow --layout` (names
/// read at the array's level); one found part-way (here a killed `uraid grow --chunk`) is
/// continued by its server as a grow is.
#[test]
fn a_served_array_is_restriped_online_and_continues_one_found_part_way() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 4, 48 << 20);
    let data = filled_with(&["-l5", "-n4", "--chunk=64K"], &members);
    let runtime = dir.path().join("run");
    let _stop = common::StopAll(runtime.clone());
    std::fs::create_dir(&runtime).unwrap();
    let run = |args: &[&str]| uraid_in(&runtime, args);
    let finished = |what: &str| {
        let o = run(&["ctl", "grown", "wait"]);
        assert!(o.status.success(), "{what}: {}", text(&o));
        let o = run(&["stop", "grown"]);
        assert!(o.status.success(), "{what}: {}", text(&o));
        assert_eq!(reshape_position(&members[0]), None, "{what}: finished by the server");
        assert!(ok(&with(&["cat"], &members)).stdout == data, "{what}: the data, restriped by the server");
        assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0", "{what}");
        let o = run(&with(&["assemble"], &members));
        assert!(o.status.success(), "{what}: {}", text(&o));
    };
    let o = run(&with(&["assemble"], &members));
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&with(&["grow", "--chunk=128K"], &members));
    assert!(o.status.success() && text(&o).contains("from chunk 64K to 128K started"), "{}", text(&o));
    finished("--chunk given the members");
    assert_eq!(detail(&members)["chunk_bytes"], 128 << 10);
    let o = run(&["ctl", "grown", "grow", "--layout=sideways"]);
    assert!(!o.status.success() && text(&o).contains("sideways"), "{}", text(&o));
    let o = run(&["ctl", "grown", "grow", "--layout=right-asymmetric"]);
    assert!(o.status.success() && text(&o).contains("to right-asymmetric started"), "{}", text(&o));
    finished("ctl grow --layout");
    assert_eq!(detail(&members)["layout"], "right-asymmetric");
    let o = run(&["stop", "grown"]);
    assert!(o.status.success(), "{}", text(&o));

    grow_killed_part_way(&["--chunk=64K"], &members);
    assert!(reshape_position(&members[0]).is_some(), "killed part-way");
    let o = run(&with(&["assemble"], &members));
    assert!(o.status.success(), "{}", text(&o));
    finished("found part-way");
    assert_eq!(detail(&members)["chunk_bytes"], 64 << 10);
    let o = run(&["stop", "grown"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// `uraid grow CHANGE --speed-limit-max=16M MEMBERS`, killed with SIGKILL once it has recorded
/// a reshape position past 0.
fn grow_killed_part_way(change: &[&str], members: &[String]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .arg("grow")
        .args(change)
        .arg("--speed-limit-max=16M")
        .args(members)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while reshape_position(&members[0]).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "no position recorded");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
