//! Arrays part-way through a reshape: described as mdadm describes them, read through both
//! shapes, and never written while uraid cannot continue the reshape.
//!
//! The arrays the real kernel left mid-reshape (`testdata/reshape`, made by
//! `scripts/oracle/make-reshape-samples.sh`) must read byte for byte what the kernel read from
//! them mid-reshape.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use uraid_md_format::sb1::feature;
use uraid_md_format::{MetadataVersion, Superblock1};
use uraid_testkit::sha256_hex;

mod common;
use common::hashes;
use common::restripe::{blank_members, mismatch_cnt, reshape_position};
use common::{ok, text, uraid_in, uraid_stdin, with};

/// Change the 1.2 superblock of every member with `edit`.
fn edit_superblocks(members: &[String], edit: impl Fn(&mut Superblock1)) {
    for m in members {
        let f = OpenOptions::new().read(true).write(true).open(m).unwrap();
        let size = f.metadata().unwrap().len();
        let mut buf = vec![0u8; 4096];
        f.read_exact_at(&mut buf, 4096).unwrap();
        let mut sb = Superblock1::parse(MetadataVersion::V1_2, &buf, size).unwrap();
        edit(&mut sb);
        f.write_all_at(&sb.to_bytes(), 4096).unwrap();
    }
}

/// A raid5 of four made and filled by uraid, then recorded as reshaping to the same shape
/// (so both shapes hold the same bytes): what every command must treat as mid-reshape.
fn recorded_mid_reshape(dir: &Path) -> (Vec<String>, Vec<u8>) {
    let members: Vec<String> = (0..4)
        .map(|i| {
            let p = dir.join(format!("d{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(8 << 20).unwrap();
            p.display().to_string()
        })
        .collect();
    ok(&with(&["create", "-l5", "-n4", "--chunk=64K", "--name=grown", "--assume-clean"], &members));
    let data: Vec<u8> = (0..(1u32 << 20)).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let w = uraid_stdin(&with(&["write", "--offset=0"], &members), &data);
    assert!(w.status.success(), "{}", text(&w));
    let before = ok(&with(&["cat"], &members)).stdout;
    edit_superblocks(&members, |sb| {
        sb.feature_map |= feature::RESHAPE_ACTIVE;
        sb.reshape_position = 1536;
        sb.new_level = sb.level;
        sb.new_layout = sb.layout;
        sb.new_chunk = sb.chunksize;
        sb.delta_disks = 0;
    });
    (members, before)
}

#[test]
fn a_reshape_in_progress_is_shown_as_mdadm_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let (members, _) = recorded_mid_reshape(dir.path());
    let out = String::from_utf8(ok(&["examine", &members[0]]).stdout).unwrap();
    assert!(out.contains("  Reshape pos'n : 768\n"), "{out}");
    let json: Value = serde_json::from_slice(&ok(&["examine", "--json", &members[0]]).stdout).unwrap();
    assert_eq!(json[0]["reshape"]["position_sectors"], 1536);
    let detail = String::from_utf8(ok(&with(&["detail"], &members)).stdout).unwrap();
    assert!(detail.contains("Reshape Status : "), "{detail}");
}

#[test]
fn an_array_mid_reshape_is_read_but_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let (members, before) = recorded_mid_reshape(dir.path());
    assert_eq!(ok(&with(&["cat"], &members)).stdout, before, "both shapes hold the same bytes here");
    let untouched = hashes(&members);
    for args in [
        with(&["write", "--offset=0"], &members),
        with(&["resync"], &members),
        with(&["serve", "--listen=unix:/nonexistent/none.sock"], &members),
    ] {
        let o = uraid_stdin(&args, b"new data");
        assert!(!o.status.success(), "{args:?} must be refused\n{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("array grown is part-way through a reshape") && err.contains("reshape position 768K"),
            "{args:?}: the refusal names the array and the position\n{}",
            text(&o)
        );
        assert_eq!(hashes(&members), untouched, "{args:?} wrote to a member");
    }
}

/// One array the kernel left mid-reshape: its folder and what its `case.txt` says.
struct KernelSample {
    dir: PathBuf,
    members: Vec<String>,
    sha256: String,
    sha256_mid: String,
    position: u64,
    /// The member count the reshape goes to.
    raid_devices: u64,
}

fn kernel_sample(name: &str, into: &Path) -> KernelSample {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/reshape").join(name);
    let case = std::fs::read_to_string(dir.join("case.txt")).unwrap();
    let field = |key: &str| {
        case.lines()
            .find_map(|l| l.strip_prefix(&format!("{key} ")))
            .unwrap_or_else(|| panic!("{key} in case.txt"))
            .to_string()
    };
    let mut members = Vec::new();
    for i in 0.. {
        let packed = dir.join(format!("disk{i}.img.zst"));
        if !packed.exists() {
            break;
        }
        let out = into.join(format!("{name}-disk{i}.img"));
        let z = Command::new("zstd").args(["-q", "-d", "-f", "-o"]).arg(&out).arg(&packed).status();
        assert!(
            z.is_ok_and(|s| s.success()),
            "zstd -d {} (zstd is needed to unpack the kernel's images)",
            packed.display()
        );
        members.push(out.display().to_string());
    }
    assert!(members.len() >= 4, "{name}: members");
    let sha256 = field("sha256");
    // A sample the kernel was not asked to read back mid-reshape (its reads of a read-only
    // array shrinking onto fewer members hang; make-reshape-samples.sh) is judged against the
    // data before the reshape.
    // The kernel's read-only reads of a raid10 mid-reshape differ from the data before; the
    // kernel finishing the reshape itself reads the data before (make-reshape-samples.sh), so a
    // raid10 sample is judged against that.
    let sha256_mid = Some(field("sha256-mid-reshape"))
        .filter(|s| s != "unread" && !name.starts_with("raid10"))
        .unwrap_or_else(|| sha256.clone());
    let examined: Value = serde_json::from_slice(&ok(&["examine", "--json", &members[0]]).stdout).unwrap();
    KernelSample {
        dir,
        raid_devices: examined[0]["raid_devices"].as_u64().unwrap(),
        members,
        sha256,
        sha256_mid,
        position: field("reshape_position").parse().unwrap(),
    }
}

fn kernel_samples() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/reshape");
    let mut names: Vec<String> =
        std::fs::read_dir(root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert!(names.len() >= 2, "the kernel's mid-reshape samples: {names:?}");
    names
}

#[test]
fn arrays_the_kernel_left_mid_reshape_read_as_the_kernel_read_them() {
    let tmp = tempfile::tempdir().unwrap();
    for name in kernel_samples() {
        let s = kernel_sample(&name, tmp.path());
        if !name.contains("chunk") && !name.contains("layout") {
            // The restripes on the same members read differently after the kernel stopped
            // them, for a reason not established (make-reshape-samples.sh); the grows do not.
            assert_eq!(s.sha256, s.sha256_mid, "{name}: the kernel read the same bytes before and during the reshape");
        }
        let json: Value = serde_json::from_slice(&ok(&["examine", "--json", &s.members[0]]).stdout).unwrap();
        assert_eq!(json[0]["reshape"]["position_sectors"], s.position, "{name}: {}", s.dir.display());
        assert!(s.position > 0, "{name}: the kernel had started");
        let got = ok(&with(&["cat"], &s.members)).stdout;
        assert_eq!(sha256_hex(&got), s.sha256_mid, "{name}: uraid cat of the array mid-reshape");
        let w = uraid_stdin(&with(&["write", "--offset=0"], &s.members), b"x");
        assert!(
            !w.status.success() && String::from_utf8_lossy(&w.stderr).contains("part-way through a reshape"),
            "{}",
            text(&w)
        );
    }
}

#[test]
fn examine_says_what_mdadm_says_of_a_reshape() {
    let tmp = tempfile::tempdir().unwrap();
    for name in kernel_samples() {
        let s = kernel_sample(&name, tmp.path());
        let case = std::fs::read_to_string(s.dir.join("case.txt")).unwrap();
        let ours = String::from_utf8(ok(&["examine", &s.members[0]]).stdout).unwrap();
        for key in ["Reshape pos'n", "Delta Devices", "New Offset", "New Level", "New Layout", "New Chunksize"] {
            // mdadm's lines for the first member (the case file lists every member's examine).
            let theirs = case.lines().find(|l| l.trim_start().starts_with(key) && l.contains(" : "));
            let mine = ours.lines().find(|l| l.trim_start().starts_with(key) && l.contains(" : "));
            if key == "New Offset" {
                // Each member moves by its own offset; compare the first member's.
                assert_eq!(mine.is_some(), theirs.is_some(), "{name}: {key}\nmdadm:\n{case}\nuraid:\n{ours}");
                continue;
            }
            assert_eq!(mine.map(str::trim), theirs.map(str::trim), "{name}: {key}\nmdadm:\n{case}\nuraid:\n{ours}");
        }
    }
}

/// An array of `level` over all but the last `added` of `members`, filled with random bytes
/// (returned).
fn filled(level: &str, members: &[String], added: usize) -> Vec<u8> {
    created_and_filled(&[level], &members[..members.len() - added])
}

/// An array `create` makes of `members` with `flags` (64K chunks, named grown), filled with
/// bytes of its own (returned).
fn created_and_filled(flags: &[&str], members: &[String]) -> Vec<u8> {
    let n = format!("-n{}", members.len());
    let args: Vec<&str> =
        ["create", n.as_str(), "--chunk=64K", "--name=grown"].into_iter().chain(flags.iter().copied()).collect();
    ok(&with(&args, members));
    let size: u64 = serde_json::from_slice::<Value>(&ok(&with(&["detail", "--json"], members)).stdout).unwrap()
        ["array_size_bytes"]
        .as_u64()
        .unwrap();
    let data: Vec<u8> = (0..size).map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 29) as u8).collect();
    let w = uraid_stdin(&with(&["write", "--offset=0"], members), &data);
    assert!(w.status.success(), "{}", text(&w));
    data
}

#[test]
fn grow_adds_members_keeping_the_data_and_parity() {
    for (level, old, added) in [("-l5", 4, 1), ("-l6", 5, 1), ("-l5", 3, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let members = blank_members(dir.path(), old + added, 12 << 20);
        let data = filled(level, &members, added);
        let (now, new) = members.split_at(old);
        let n = format!("--raid-devices={}", old + added);
        let mut args = vec!["grow", n.as_str()];
        args.extend(now.iter().map(String::as_str));
        for a in new {
            args.extend(["--add", a.as_str()]);
        }
        let o = ok(&args);
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(said.contains("uraid: added") && said.contains("finished"), "{said}");
        let detail: Value = serde_json::from_slice(&ok(&with(&["detail", "--json"], &members)).stdout).unwrap();
        assert_eq!(detail["raid_devices"], (old + added) as u64, "{level} {old}+{added}");
        assert_eq!(detail["reshape"], Value::Null);
        let grown = detail["array_size_bytes"].as_u64().unwrap();
        let parity = if level == "-l6" { 2 } else { 1 };
        assert_eq!(
            grown / (old + added - parity) as u64,
            data.len() as u64 / (old - parity) as u64,
            "{level}: every member's share kept"
        );
        let got = ok(&with(&["cat"], &members)).stdout;
        assert!(got[..data.len()] == data[..], "{level} {old}+{added}: the data moved intact");
        assert!(got[data.len()..].iter().all(|&b| b == 0), "{level}: the new space reads as zeros");
        assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0", "{level} {old}+{added}: parity right everywhere");
    }
}

/// An array with 1.0 metadata (its superblock at the end: no room before the data to move it
/// into) or 0.90 (no data offset recorded) grows onto more members in place, as mdadm grows one
/// with a backup on the added device: the data offset stays 0, the critical section is backed
/// up first and said so, and the data, the new space and parity come out as for a grow that
/// moves the data offset. A 0.90 shrink or restripe has nowhere to move the data and is
/// refused, nothing written.
#[test]
fn an_array_without_room_to_move_its_data_grows_in_place() {
    let cases = [
        ("1.0", "-l5", 4, 1),
        ("1.0", "-l6", 5, 1),
        ("1.0", "-l5", 3, 2),
        ("0.90", "-l5", 4, 1),
        ("0.90", "-l6", 4, 2),
    ];
    for (metadata, level, old, added) in cases {
        let dir = tempfile::tempdir().unwrap();
        let members = blank_members(dir.path(), old + added, 12 << 20);
        let metadata_flag = format!("--metadata={metadata}");
        let data = created_and_filled(&[level, &metadata_flag], &members[..old]);
        let n = format!("--raid-devices={}", old + added);
        let mut args = vec!["grow", n.as_str()];
        args.extend(members[..old].iter().map(String::as_str));
        for a in &members[old..] {
            args.extend(["--add", a.as_str()]);
        }
        let o = ok(&args);
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(
            said.contains("runs in place") && said.contains("critical section") && said.contains("finished"),
            "{said}"
        );
        let examined: Value = serde_json::from_slice(&ok(&with(&["examine", "--json"], &members)).stdout).unwrap();
        for m in examined.as_array().unwrap() {
            assert_eq!(m["data_offset_sectors"], 0, "{level} {old}+{added}: the data stayed where it was\n{m}");
        }
        let detail: Value = serde_json::from_slice(&ok(&with(&["detail", "--json"], &members)).stdout).unwrap();
        assert_eq!((detail["raid_devices"].as_u64(), &detail["reshape"]), (Some((old + added) as u64), &Value::Null));
        let got = ok(&with(&["cat"], &members)).stdout;
        assert!(got[..data.len()] == data[..], "{level} {old}+{added}: the data moved intact");
        assert!(got[data.len()..].iter().all(|&b| b == 0), "{level}: the new space reads as zeros");
        assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0", "{level} {old}+{added}: parity right everywhere");
    }
    for (metadata, change, says) in [
        // (1.0 shrinks the usual way, its members giving up a chunk to make room after the
        // data: first refused, naming the size.)
        ("1.0", "--raid-devices=4", "--array-size="),
        ("0.90", "--raid-devices=4", "backup file"),
        ("0.90", "--layout=right-asymmetric", "backup file"),
        // mdadm's habit: uraid keeps the backup on the added devices and says so.
        ("0.90", "--backup-file=md0.bak", "takes no backup file"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let members = blank_members(dir.path(), 5, 12 << 20);
        created_and_filled(&["-l5", &format!("--metadata={metadata}")], &members);
        let untouched = hashes(&members);
        let mut args = vec!["grow", change];
        args.extend(members.iter().map(String::as_str));
        let o = uraid_stdin(&args, b"");
        let said = text(&o);
        assert!(!o.status.success() && said.contains(says), "{metadata} {change}: {said}");
        assert_eq!(hashes(&members), untouched, "{metadata} {change}: a refusal wrote something");
    }
}

/// A grow in place killed inside its critical section (the added member slow, behind nbdkit's
/// delay filter, so the kill lands after a first new stripe and before the section's end is
/// recorded): reading the array is refused, naming the critical section; assembled again it is
/// mended from the backup on the added member (as mdadm --assemble does) and finished, the data
/// intact and parity right.
#[test]
fn a_grow_in_place_killed_inside_its_critical_section_is_mended_when_assembled() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 5, 12 << 20);
    let data = created_and_filled(&["-l5", "--metadata=1.0"], &members[..4]);
    let first_rows =
        || -> Vec<u8> { members[..4].iter().flat_map(|m| std::fs::read(m).unwrap()[..256 << 10].to_vec()).collect() };
    let before = first_rows();
    let socket = dir.path().join("slow.sock");
    let mut export = common::nbdkit::FileExport::start_with(&socket, Path::new(&members[4]), &["delay"], &["wdelay=1"]);
    let mut args = vec!["grow".to_string(), "--raid-devices=5".into(), "--add".into(), export.uri()];
    args.extend(members[..4].iter().cloned());
    let mut grow = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while first_rows() == before {
        assert!(std::time::Instant::now() < deadline, "no new stripe was written");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    grow.kill().unwrap();
    grow.wait().unwrap();
    export.kill();
    assert_eq!(reshape_position(&members[0]), Some(0), "killed before the section's end was recorded");
    let o = uraid_stdin(&with(&["cat"], &members), b"");
    assert!(!o.status.success() && text(&o).contains("critical section"), "{}", text(&o));

    let runtime = dir.path().join("run");
    let _stop = common::StopAll(runtime.clone());
    let o = uraid_in(&runtime, &with(&["assemble"], &members));
    assert!(o.status.success() && text(&o).contains("restored it from its backup"), "{}", text(&o));
    let o = uraid_in(&runtime, &["ctl", "grown", "wait"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = uraid_in(&runtime, &["stop", "grown"]);
    assert!(o.status.success(), "{}", text(&o));
    let got = ok(&with(&["cat"], &members)).stdout;
    assert!(got[..data.len()] == data[..], "the data, mended and reshaped");
    assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0");
}

/// A raid10 in a near layout grows onto more members as md's raid10 reshape does, odd counts
/// included: its copies kept, the data where it was, the new space zeros, and every copy
/// alike; and onto fewer on the word of its new size. A far layout, and fewer members without
/// that word, are refused, nothing written.
#[test]
fn a_raid10_grows_onto_more_members_keeping_its_data_and_copies() {
    for (layout, old, added) in [("n2", 4, 1), ("n2", 4, 2), ("n3", 3, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let members = blank_members(dir.path(), old + added, 12 << 20);
        let data = filled_raid10(layout, &members[..old]);
        let (now, new) = members.split_at(old);
        let n = format!("--raid-devices={}", old + added);
        let mut args = with(&["grow", &n], now);
        for a in new {
            args.extend(["--add", a.as_str()]);
        }
        let said = String::from_utf8_lossy(&ok(&args).stderr).into_owned();
        assert!(said.contains(&format!("from {old} to {} devices", old + added)), "{said}");
        let detail: Value = serde_json::from_slice(&ok(&with(&["detail", "--json"], &members)).stdout).unwrap();
        let what = format!("{layout} {old}+{added}");
        assert_eq!(
            (detail["raid_devices"].as_u64(), detail["reshape"].clone()),
            (Some((old + added) as u64), Value::Null),
            "{what}"
        );
        let copies: u64 = layout[1..].parse().unwrap();
        let chunks = detail["component_size_kib"].as_u64().unwrap() / 64;
        assert_eq!(
            detail["array_size_bytes"].as_u64(),
            Some(chunks * (old + added) as u64 / copies * (64 << 10)),
            "{what}"
        );
        let got = ok(&with(&["cat"], &members)).stdout;
        assert!(got[..data.len()] == data[..], "{what}: the data moved intact");
        assert!(got[data.len()..].iter().all(|&b| b == 0), "{what}: the new space reads as zeros");
        assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0", "{what}: every copy alike");
    }
    // Onto fewer members, on the word of the size it shrinks to, as for raid5.
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 5, 12 << 20);
    let data = filled_raid10("n2", &members);
    let o = uraid_stdin(&with(&["grow", "-n4"], &members), b"");
    assert!(!o.status.success() && text(&o).contains("will reduce the size of the array"), "{}", text(&o));
    let said = text(&o);
    let at = said.find("--array-size=").unwrap() + 13;
    let kib: u64 = said[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap();
    let word = format!("--array-size={kib}K");
    ok(&with(&["grow", "-n4", &word], &members));
    let detail: Value = serde_json::from_slice(&ok(&with(&["detail", "--json"], &members)).stdout).unwrap();
    assert_eq!((detail["raid_devices"].as_u64(), detail["array_size_bytes"].as_u64()), (Some(4), Some(kib * 1024)));
    let kept = &members[..4];
    let got = ok(&with(&["cat"], kept)).stdout;
    assert!(got[..] == data[..(kib * 1024) as usize], "n2 5 -> 4: what the array keeps moved intact");
    assert_eq!(mismatch_cnt(kept), "mismatch_cnt 0", "n2 5 -> 4: every copy alike");

    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 5, 12 << 20);
    for (layout, ask, says) in [("f2", "-n5", "far/offset"), ("n2", "-n3", "will reduce the size of the array")] {
        filled_raid10(layout, &members[..4]);
        let before = hashes(&members);
        let mut args = with(&["grow", ask], &members[..4]);
        if ask == "-n5" {
            args.extend(["--add", members[4].as_str()]);
        }
        let o = uraid_stdin(&args, b"");
        assert!(!o.status.success() && text(&o).contains(says), "{layout} {ask}: {}", text(&o));
        assert_eq!(hashes(&members), before, "{layout} {ask}: refused, yet written");
    }
}

/// A raid10 of `layout` over `members`, filled with bytes of its own (returned).
fn filled_raid10(layout: &str, members: &[String]) -> Vec<u8> {
    let l = format!("--layout={layout}");
    created_and_filled(&["-l10", &l, "--force"], members)
}

#[test]
fn a_grow_killed_part_way_is_continued_from_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 5, 48 << 20);
    let data = filled("-l5", &members, 1);
    let mut child = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["grow", "--raid-devices=5", "--speed-limit-max=16M", "--add", &members[4]])
        .args(&members[..4])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until a position past the start has been recorded, then kill it as a crash would.
    let position = |m: &str| -> Option<u64> {
        let v: Value = serde_json::from_slice(&ok(&["examine", "--json", m]).stdout).ok()?;
        v[0]["reshape"]["position_sectors"].as_u64()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while position(&members[0]).unwrap_or(0) == 0 {
        assert!(std::time::Instant::now() < deadline, "no position recorded");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let at = position(&members[0]).expect("still mid-reshape after the kill");
    assert!(at > 0 && at * 512 < data.len() as u64, "killed part-way: {at}");
    let got = ok(&with(&["cat"], &members)).stdout;
    assert!(got[..data.len()] == data[..], "mid-reshape, uraid cat reads the data through both shapes");
    let o = ok(&with(&["grow", "--continue"], &members));
    assert!(String::from_utf8_lossy(&o.stderr).contains("continuing at"), "{}", text(&o));
    assert_eq!(position(&members[0]), None, "finished");
    let got = ok(&with(&["cat"], &members)).stdout;
    assert!(got[..data.len()] == data[..], "the data survived the kill");
    assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0");
}

/// A member whose reads fail part-way through a grow (here cut short under it) does not stop
/// it: the grow goes on degraded, as md does, says so, and the grown array holds the data, is
/// rebuilt onto a new device by `uraid add`, and checks clean.
#[test]
fn a_member_failing_mid_grow_leaves_a_degraded_grown_array() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 6, 48 << 20);
    let data = filled("-l5", &members[..5], 1);
    let log = dir.path().join("grow.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["grow", "--raid-devices=5", "--speed-limit-max=16M", "--add", &members[4]])
        .args(&members[..4])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while reshape_position(&members[0]).unwrap_or(0) == 0 {
        assert!(std::time::Instant::now() < deadline, "no position recorded");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Its data area gone: every read past the first MiB fails.
    OpenOptions::new().write(true).open(&members[1]).unwrap().set_len(1 << 20).unwrap();
    let status = child.wait().unwrap();
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{said}");
    assert!(said.contains("d1.img failed") && said.contains("recorded faulty; the reshape goes on degraded"), "{said}");
    assert!(said.contains("finished: 5 devices (from 4)") && said.contains("the array is degraded"), "{said}");

    let survivors: Vec<String> = [0, 2, 3, 4].iter().map(|&i| members[i].clone()).collect();
    let detail: Value = serde_json::from_slice(&ok(&with(&["detail", "--json"], &survivors)).stdout).unwrap();
    assert_eq!((detail["raid_devices"].as_u64(), detail["degraded"].as_bool()), (Some(5), Some(true)), "{detail:#}");
    let got = ok(&with(&["cat"], &survivors)).stdout;
    assert!(got[..data.len()] == data[..], "the grown array holds the data, read round the dead member");
    let o = uraid_in(dir.path(), &with(&["add", "--device", &members[5]], &survivors));
    assert!(o.status.success(), "{}", text(&o));
    let mut all = survivors.clone();
    all.push(members[5].clone());
    let got = ok(&with(&["cat"], &all)).stdout;
    assert!(got[..data.len()] == data[..], "rebuilt, the data");
    assert_eq!(mismatch_cnt(&all), "mismatch_cnt 0");
}

#[test]
fn grow_refuses_what_it_does_not_do_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 5, 8 << 20);
    filled("-l5", &members, 1);
    let old = &members[..4];
    let untouched = hashes(&members);
    for (args, says) in [
        (vec!["grow", "--level=10", "--add", &members[4]], "impossible level change requested"),
        (vec!["grow", "--chunk=96"], "chunk size 96K is not a power of two"),
        (vec!["grow", "--raid-devices=3"], "will reduce the size of the array"),
        (vec!["grow", "--raid-devices=5"], "needs 1 new device(s) (--add); 0 given"),
        (vec!["grow", "--raid-devices=4"], "already has 4 devices"),
        (vec!["grow", "--raid-devices=5", "--add", &members[0]], "carries an md superblock"),
        (vec!["grow", "--continue"], "no reshape is in progress"),
        (vec!["grow"], "nothing to change"),
    ] {
        let all: Vec<&str> = args.iter().copied().chain(old.iter().map(String::as_str)).collect();
        let o = uraid_stdin(&all, b"");
        assert!(!o.status.success(), "{all:?}\n{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains(says), "{all:?}: expected {says:?}\n{}", text(&o));
        assert_eq!(hashes(&members), untouched, "{all:?} wrote something");
    }
}

#[test]
fn uraid_finishes_a_reshape_the_kernel_left_part_way() {
    let tmp = tempfile::tempdir().unwrap();
    for name in kernel_samples() {
        let s = kernel_sample(&name, tmp.path());
        let o = ok(&with(&["grow", "--continue"], &s.members));
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(said.contains("continuing at") && said.contains("finished"), "{name}: {said}");
        let detail: Value = serde_json::from_slice(&ok(&with(&["detail", "--json"], &s.members)).stdout).unwrap();
        assert_eq!(detail["reshape"], Value::Null, "{name}");
        assert_eq!(detail["raid_devices"], s.raid_devices, "{name}");
        let got = ok(&with(&["cat"], &s.members)).stdout;
        let before = std::fs::read_to_string(s.dir.join("case.txt")).unwrap();
        let bytes: usize = before.lines().find_map(|l| l.strip_prefix("bytes ")).unwrap().parse().unwrap();
        assert_eq!(sha256_hex(&got[..bytes]), s.sha256_mid, "{name}: the kernel's data, reshaped by uraid");
        assert!(got[bytes..].iter().all(|&b| b == 0), "{name}: the new space reads as zeros");
        assert_eq!(mismatch_cnt(&s.members), "mismatch_cnt 0", "{name}");
    }
}

/// `uraid grow` given the members of an array `uraid assemble` runs has the running server
/// grow it, in the background (a raid6 here: the online reshape is the same for both parity
/// levels); `--continue` is refused there, as the server continues its reshape itself.
#[test]
fn grow_given_the_members_of_a_running_array_grows_it_through_its_server() {
    let dir = tempfile::tempdir().unwrap();
    let members = blank_members(dir.path(), 6, 8 << 20);
    let data = filled("-l6", &members, 1);
    let runtime = dir.path().join("run");
    let _stop = common::StopAll(runtime.clone());
    std::fs::create_dir(&runtime).unwrap();
    let run = |args: &[&str]| uraid_in(&runtime, args);
    let o = run(&with(&["assemble"], &members[..5]));
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&with(&["grow", "-n6", "--add", &members[5]], &members[..5]));
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("reshape from 5 to 6 devices started"), "{}", text(&o));
    let waited = run(&["ctl", "grown", "wait", "--json"]);
    assert!(waited.status.success(), "{}", text(&waited));
    let waited: Value = serde_json::from_slice(&waited.stdout).unwrap();
    assert_eq!(waited["members"].as_array().unwrap().len(), 6, "{waited:#}");
    let o = run(&with(&["grow", "--continue"], &members));
    assert!(!o.status.success() && text(&o).contains("continues its reshape itself"), "{}", text(&o));
    let stop = run(&["stop", "grown"]);
    assert!(stop.status.success(), "{}", text(&stop));
    let detail: Value = serde_json::from_slice(&ok(&with(&["detail", "--json"], &members)).stdout).unwrap();
    assert_eq!(detail["raid_devices"], 6);
    assert_eq!(detail["reshape"], Value::Null);
    let got = ok(&with(&["cat"], &members)).stdout;
    assert!(got[..data.len()] == data[..], "the data, reshaped by the running server");
    assert_eq!(mismatch_cnt(&members), "mismatch_cnt 0");
}
