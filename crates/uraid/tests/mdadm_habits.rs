//! The README's script of an mdadm user's habits (`scripts/mdadm-habits.sh`), run against this
//! build: create with a missing member and a spare, assemble by scan, fail, remove and add,
//! grow by one disk while a client writes, stop, assemble again with the data checked, and
//! zero the superblocks. The script checks every step itself and exits non-zero at the first
//! that did not do what mdadm would have done.

use std::process::Command;

#[test]
fn the_mdadm_habits_script_runs_through() {
    if Command::new("nbdcopy").arg("--version").output().is_err() {
        eprintln!("skipped: nbdcopy is not installed");
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/mdadm-habits.sh");
    let out = Command::new("bash").arg(script).env("URAID", env!("CARGO_BIN_EXE_uraid")).output().unwrap();
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("All 7 steps did what mdadm would have done."), "{text}");
}
