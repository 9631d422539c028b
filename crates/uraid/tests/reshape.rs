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
use common::{ok, text, uraid_stdin, with};

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

fn hashes(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| sha256_hex(&std::fs::read(p).unwrap())).collect()
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
    assert!(members.len() >= 5, "{name}: members");
    KernelSample {
        dir,
        members,
        sha256: field("sha256"),
        sha256_mid: field("sha256-mid-reshape"),
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
        assert_eq!(s.sha256, s.sha256_mid, "{name}: the kernel read the same bytes before and during the reshape");
        let json: Value = serde_json::from_slice(&ok(&["examine", "--json", &s.members[0]]).stdout).unwrap();
        assert_eq!(json[0]["reshape"]["position_sectors"], s.position, "{name}: {}", s.dir.display());
        assert!(s.position > 0, "{name}: the kernel had started");
        let got = ok(&with(&["cat"], &s.members)).stdout;
        assert_eq!(sha256_hex(&got), s.sha256, "{name}: uraid cat of the array mid-reshape");
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
