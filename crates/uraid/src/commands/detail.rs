//! `uraid detail`: assemble read-only and describe the array (`mdadm --detail`), from the given
//! members or from every member found under a folder (`--scan DIR`), grouped by array UUID; or
//! a gvinum volume (`--volume`), or a RAIDframe set (`--raidframe CONFIG`, or components given).
//!
//! An md array is described in full, or as mdadm.conf's `ARRAY` line (`--brief`, and `--scan`
//! unless `-vv`, as mdadm's `--scan` implies `--brief`), or as `--export`'s shell variables.

use std::path::PathBuf;

use serde_json::Value;
use uraid_device::OpenArray;

use super::raidframe_describe::detail_set;
use super::source::{open_raidframe_config, open_raidframe_found, open_volume, raidframe_candidates};
use super::vinum::describe::detail_volume;
use super::{emit, err, scan_groups, CliResult};
use crate::array_lines::{detail_line, export_variables};
use crate::report::{detail_json, detail_text};
use crate::DetailArgs;

/// How an md array is described.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Full,
    /// mdadm.conf's ARRAY line; `true`: with level, raid devices and member devices.
    Brief(bool),
    Export,
}

pub fn run(args: &DetailArgs) -> CliResult {
    let form = if args.export {
        Form::Export
    } else if args.brief || (args.scan.is_some() && !args.json && args.verbose < 2) {
        Form::Brief(args.verbose > 0)
    } else {
        Form::Full
    };
    if form != Form::Full && (args.raidframe.is_some() || args.volume.is_some()) {
        return err("--brief, --export and the ARRAY lines of --scan describe md arrays; give md members");
    }
    let raidframe = match &args.raidframe {
        Some(config) => Some(open_raidframe_config(config, false)?),
        None => match raidframe_candidates(&args.members, None, args.serial)? {
            Some(paths) if args.volume.is_none() => Some(open_raidframe_found(&paths, args.serial, false)?),
            _ => None,
        },
    };
    if let Some(array) = raidframe {
        let (text, value) = detail_set(&array);
        if args.json {
            emit(&format!("{}\n", serde_json::to_string_pretty(&value).expect("JSON")))?;
        } else {
            emit(&text)?;
        }
        return Ok(());
    }
    if let Some(volume) = &args.volume {
        let array = open_volume(&args.members, args.scan.as_deref(), volume, false)?;
        let (text, value) = detail_volume(&array);
        if args.json {
            emit(&format!("{}\n", serde_json::to_string_pretty(&value).expect("JSON")))?;
        } else {
            emit(&text)?;
        }
        return Ok(());
    }
    let groups: Vec<Vec<PathBuf>> = match &args.scan {
        None => vec![args.members.clone()],
        Some(dir) => scan_groups(dir)?.into_iter().map(|(_, g)| g).collect(),
    };
    if groups.is_empty() {
        return err(format!("{}: no md members found", args.scan.as_ref().expect("scan").display()));
    }
    let mut json: Vec<Value> = Vec::new();
    let mut failed = 0;
    for group in &groups {
        match describe(group, form) {
            Ok((text, value)) => {
                if args.json {
                    json.push(value);
                } else {
                    emit(&text)?;
                }
            }
            Err(e) if groups.len() == 1 => return Err(e),
            Err(e) => {
                failed += 1;
                eprintln!("uraid: {e}");
            }
        }
    }
    if args.json {
        // One array: an object; a scan: a list, one per array.
        let out = if args.scan.is_none() { json.pop().unwrap_or(Value::Null) } else { Value::Array(json) };
        emit(&format!("{}\n", serde_json::to_string_pretty(&out).expect("JSON")))?;
    }
    if failed > 0 {
        return err(format!("{failed} of {} arrays could not be assembled", groups.len()));
    }
    Ok(())
}

/// The array of `paths` described as `form` asks, and as JSON.
fn describe(paths: &[PathBuf], form: Form) -> CliResult<(String, Value)> {
    let array = OpenArray::open_paths(paths, false)?;
    let size = array.size();
    let md = array.md().expect("an md array was assembled");
    let infos: Vec<_> = md.members.iter().map(|m| m.info.clone()).collect();
    let names: Vec<String> = md.members.iter().map(|m| m.dev.name().to_string()).collect();
    let text = match form {
        Form::Full => format!("{}:\n{}\n", md.plan.uuid_string(), detail_text(&md.plan, &infos, &names, size)),
        Form::Brief(verbose) => detail_line(&md.plan, &infos, &names, verbose),
        Form::Export => export_variables(&md.plan, &infos, &names),
    };
    Ok((text, detail_json(&md.plan, &infos, &names, size)))
}
