//! `uraid raidctl`, the real binary on component files: a set made from scratch as a new user
//! makes one (configuration file with relative paths, `-C`, `-I`, `-i`, then the set used
//! through `--raidframe`), the JSON reports, and refusals that name what is wrong and write
//! nothing. What the labels hold after each verb is judged against NetBSD's driver in
//! `raidctl_peer.rs`.

use std::path::{Path, PathBuf};
use std::process::Output;

use tempfile::TempDir;
use uraid_testkit::scratch_dir;

mod common;
use common::{uraid, uraid_stdin};

#[track_caller]
fn ok(o: Output) -> String {
    assert!(o.status.success(), "exit {:?}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[track_caller]
fn refused(o: Output) -> String {
    assert!(!o.status.success(), "expected a refusal: {}", String::from_utf8_lossy(&o.stdout));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `count` blank 4 MiB components and a configuration file naming them by relative path.
fn blank_set(dir: &Path, level: char, columns: usize) -> (PathBuf, Vec<PathBuf>) {
    let files: Vec<PathBuf> = (0..columns).map(|i| dir.join(format!("d{i}.img"))).collect();
    for f in &files {
        std::fs::File::create(f).unwrap().set_len(4 << 20).unwrap();
    }
    let names: Vec<String> = (0..columns).map(|i| format!("d{i}.img")).collect();
    let conf = dir.join("raid0.conf");
    std::fs::write(
        &conf,
        format!(
            "START array\n1 {columns} 0\n\nSTART disks\n{}\n\nSTART layout\n32 1 1 {level}\n\nSTART queue\nfifo 100\n",
            names.join("\n")
        ),
    )
    .unwrap();
    (conf, files)
}

fn contents(files: &[PathBuf]) -> Vec<Vec<u8>> {
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

#[test]
fn a_new_user_makes_a_set_from_scratch_and_uses_it() {
    let tmp = TempDir::new_in(scratch_dir("raidctl")).unwrap();
    let (conf, _) = blank_set(tmp.path(), '5', 3);
    let c = conf.to_str().unwrap();
    ok(uraid(&["raidctl", "-C", c]));
    ok(uraid(&["raidctl", "-I", "2026", c]));
    assert!(refused(uraid(&["raidctl", "-p", c])).contains("parity is DIRTY"));
    let out = ok(uraid(&["raidctl", "-i", c]));
    assert_eq!(out, "Initiating re-write of parity\n");
    assert_eq!(ok(uraid(&["raidctl", "-p", c])), "/dev/rraid0d: Parity status: clean\n");
    assert_eq!(ok(uraid(&["raidctl", "-P", c])), "/dev/rraid0d: Parity status: clean\n");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    ok(uraid_stdin(&["write", "--raidframe", c, "--offset", "4096"], &data));
    let back = uraid(&["cat", "--raidframe", c, "--offset", "4096", "--length", &data.len().to_string()]);
    assert!(back.status.success() && back.stdout == data);
    let status = ok(uraid(&["raidctl", "-s", c]));
    assert!(status.starts_with("Components:\n              d0.img: optimal\n"), "{status}");
    assert!(status.contains("No spares.\n") && status.contains("Parity status: clean\n"), "{status}");
}

#[test]
fn reports_come_as_json() {
    let tmp = TempDir::new_in(scratch_dir("raidctl")).unwrap();
    let (conf, _) = blank_set(tmp.path(), '1', 2);
    let c = conf.to_str().unwrap();
    ok(uraid(&["raidctl", "-I", "9", c]));
    ok(uraid(&["raidctl", "-i", c]));
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["raidctl", "--json"];
        all.extend_from_slice(args);
        all.push(c);
        serde_json::from_str(&ok(uraid(&all))).unwrap()
    };
    let s = json(&["-s"]);
    assert_eq!(s["serial_number"], 9);
    assert_eq!(s["parity"], "clean");
    assert_eq!(s["components"][1]["status"], "optimal");
    assert_eq!(s["components"][1]["label"]["column"], 1);
    assert_eq!(json(&["-p"])["parity"], "clean");
    assert_eq!(json(&["-m"])["dirty_regions"], serde_json::json!([]));
    assert_eq!(json(&["-g", "d0.img"])["mod_counter"], 14);
}

#[test]
fn a_set_found_by_scanning_takes_the_same_verbs() {
    let tmp = TempDir::new_in(scratch_dir("raidctl")).unwrap();
    let (conf, _) = blank_set(tmp.path(), '5', 3);
    ok(uraid(&["raidctl", "-I", "31", conf.to_str().unwrap()]));
    std::fs::remove_file(&conf).unwrap();
    let dir = tmp.path().to_str().unwrap();
    ok(uraid(&["raidctl", "-i", "--scan", dir]));
    let printed = ok(uraid(&["raidctl", "-G", "--scan", dir, "--serial", "31"]));
    assert!(printed.contains("START disks\n") && printed.contains("d2.img\n") && printed.contains("32 1 1 5\n"));
    // A component failed, then rebuilt in place: found by its own (stale) label's column.
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 13 % 253) as u8).collect();
    let d1 = tmp.path().join("d1.img").display().to_string();
    ok(uraid(&["raidctl", "-f", &d1, "--scan", dir]));
    ok(uraid_stdin(&["write", "--scan", dir, "--offset", "512"], &data));
    let e = refused(uraid(&["raidctl", "-F", &d1, "--scan", dir]));
    assert!(e.contains("configuration file"), "{e}");
    ok(uraid(&["raidctl", "-R", &d1, "--scan", dir]));
    let status = ok(uraid(&["raidctl", "-s", "--scan", dir]));
    assert_eq!(status.matches(": optimal").count(), 3, "{status}");
    // Column 1 holds its data again: read without column 2 (emptied, so no longer found).
    std::fs::File::create(tmp.path().join("d2.img")).unwrap();
    let back = uraid(&["cat", "--scan", dir, "--offset", "512", "--length", &data.len().to_string()]);
    assert!(back.status.success() && back.stdout == data, "{}", String::from_utf8_lossy(&back.stderr));
}

#[test]
fn bad_requests_are_refused_and_nothing_is_written() {
    let tmp = TempDir::new_in(scratch_dir("raidctl")).unwrap();
    let (conf, files) = blank_set(tmp.path(), '5', 3);
    let c = conf.to_str().unwrap();
    ok(uraid(&["raidctl", "-I", "4", c]));
    ok(uraid(&["raidctl", "-i", c]));
    let before = contents(&files);
    assert!(refused(uraid(&["raidctl", "-C", c])).contains("carry RAIDframe labels already"));
    assert!(refused(uraid(&["raidctl", "-A", "maybe", c])).contains("-A maybe"));
    assert!(refused(uraid(&["raidctl", "-M", "perhaps", c])).contains("-M perhaps"));
    assert!(refused(uraid(&["raidctl", "-f", "nosuch.img", c])).contains("nosuch.img is not a component"));
    assert!(refused(uraid(&["raidctl", "-s", "-p", c])).contains("cannot be used with"));
    assert!(refused(uraid(&["raidctl", "--json", "-G", c])).contains("--json goes with"));
    assert!(contents(&files) == before, "a refusal wrote to a component");

    // One failure is survived; a second would lose data and is refused.
    ok(uraid(&["raidctl", "-f", "d1.img", c]));
    let after_fail = contents(&files);
    assert!(refused(uraid(&["raidctl", "-f", "d1.img", c])).contains("has failed already"));
    assert!(refused(uraid(&["raidctl", "-f", "d0.img", c])).contains("without its data"));
    assert!(refused(uraid(&["raidctl", "-i", c])).contains("degraded"));
    assert!(contents(&files) == after_fail);

    // RAID 0 cannot lose a component.
    let tmp0 = TempDir::new_in(scratch_dir("raidctl")).unwrap();
    let (conf0, files0) = blank_set(tmp0.path(), '0', 2);
    let c0 = conf0.to_str().unwrap();
    ok(uraid(&["raidctl", "-I", "5", c0]));
    let before0 = contents(&files0);
    assert!(refused(uraid(&["raidctl", "-f", "d0.img", c0])).contains("without its data"));
    assert!(refused(uraid(&["raidctl", "-M", "no", c0])).contains("has no parity"));
    assert!(contents(&files0) == before0);
}
