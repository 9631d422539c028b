//! `uraid examine`: print each member's md superblock, as `mdadm --examine` does, the header
//! and subdisks of a gvinum drive, or a RAIDframe component's label as `raidctl -g` does.
//!
//! Every member is reported; a member without a superblock, or with a damaged one, is an error
//! for that member (named in the message) and makes the command exit non-zero after printing the
//! others. With `--scan` (`--brief`), one mdadm.conf ARRAY line per md array found instead.

use serde_json::Value;
use uraid_device::raidframe_components::read_label;
use uraid_device::vinum_drives::{read_drive, VinumDriveError};
use uraid_device::MemberDevice;

use super::raidframe_describe::examine_component;
use super::vinum::describe::examine_drive;
use super::{emit, files_under, open_and_probe, CliError, CliResult};
use crate::array_lines::examine_scan;
use crate::report::{examine_json, examine_text};
use crate::ExamineArgs;

pub fn run(args: &ExamineArgs) -> CliResult {
    if args.scan || args.brief {
        return scan(args);
    }
    let mut json: Vec<Value> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for path in &args.members {
        let name = path.display().to_string();
        match open_and_probe(path) {
            Ok((dev, Some(probed))) => {
                let info = probed.superblock.info();
                if args.json {
                    json.push(examine_json(&name, &info, dev.size()));
                } else {
                    emit(&format!("{}\n", examine_text(&name, &info)))?;
                }
            }
            Ok((dev, None)) if read_label(&dev as &dyn MemberDevice).is_ok() => {
                let label = read_label(&dev as &dyn MemberDevice).expect("checked");
                let (text, value) = examine_component(&name, &label);
                if args.json {
                    json.push(value);
                } else {
                    emit(&format!("{text}\n"))?;
                }
            }
            Ok((dev, None)) => match read_drive(&dev as &dyn MemberDevice) {
                Ok(drive) => {
                    let (text, value) = examine_drive(&name, dev.size(), &drive);
                    if args.json {
                        json.push(value);
                    } else {
                        emit(&format!("{text}\n"))?;
                    }
                }
                Err(VinumDriveError::NoHeader { .. }) => match read_label(&dev as &dyn MemberDevice) {
                    // A RAIDframe version word with fields the kernel refuses: say what is wrong.
                    Err(e) if e.is_damage() => failures.push(e.to_string()),
                    _ => failures.push(format!(
                        "{}; no gvinum drive header or RAIDframe component label either",
                        uraid_device::probe::no_superblock(&dev as &dyn MemberDevice)
                    )),
                },
                Err(e) => failures.push(e.to_string()),
            },
            Err(e) => failures.push(e.0),
        }
    }
    if args.json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&json).expect("JSON")))?;
    }
    if failures.len() == 1 {
        return Err(CliError(failures.remove(0)));
    }
    for f in &failures {
        eprintln!("uraid: {f}");
    }
    match failures.len() {
        0 => Ok(()),
        n => Err(CliError(format!("{n} of {} members could not be examined", args.members.len()))),
    }
}

/// `--scan`: mdadm.conf's ARRAY lines of the md arrays among the devices given (a folder
/// standing for everything under it). As in mdadm, devices without an md superblock are no
/// error here: a scan meets them.
fn scan(args: &ExamineArgs) -> CliResult {
    let mut paths = Vec::new();
    for p in &args.members {
        if p.is_dir() {
            paths.extend(files_under(p)?);
        } else {
            paths.push(p.clone());
        }
    }
    let mut found = Vec::new();
    for path in &paths {
        match open_and_probe(path) {
            Ok((_, Some(probed))) => found.push((path.display().to_string(), probed.superblock.info())),
            Ok((_, None)) => {}
            Err(e) => eprintln!("uraid: skipping {}", e.0),
        }
    }
    if found.is_empty() {
        eprintln!("uraid: no md superblock on any of the {} devices", paths.len());
    }
    emit(&examine_scan(&found, args.verbose))
}
