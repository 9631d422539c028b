//! `uraid examine`: print each member's md superblock, as `mdadm --examine` does, or the header
//! and subdisks of a gvinum drive.
//!
//! Every member is reported; a member without a superblock, or with a damaged one, is an error
//! for that member (named in the message) and makes the command exit non-zero after printing the
//! others.

use serde_json::Value;
use uraid_device::vinum_drives::{read_drive, VinumDriveError};
use uraid_device::MemberDevice;

use super::vinum::describe::examine_drive;
use super::{emit, open_and_probe, CliError, CliResult};
use crate::report::{examine_json, examine_text};
use crate::ExamineArgs;

pub fn run(args: &ExamineArgs) -> CliResult {
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
            Ok((dev, None)) => match read_drive(&dev as &dyn MemberDevice) {
                Ok(drive) => {
                    let (text, value) = examine_drive(&name, dev.size(), &drive);
                    if args.json {
                        json.push(value);
                    } else {
                        emit(&format!("{text}\n"))?;
                    }
                }
                Err(VinumDriveError::NoHeader { .. }) => failures.push(format!(
                    "{}; no gvinum drive header either",
                    uraid_device::probe::no_superblock(&dev as &dyn MemberDevice)
                )),
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
