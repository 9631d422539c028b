//! `uraid detail`: assemble read-only and describe the array (`mdadm --detail`), from the given
//! members or from every member found under a folder (`--scan DIR`), grouped by array UUID; or
//! a gvinum volume (`--volume`), or a RAIDframe set (`--raidframe CONFIG`, or components given).

use std::path::PathBuf;

use serde_json::Value;
use uraid_device::OpenArray;

use super::raidframe_describe::detail_set;
use super::source::{open_raidframe_config, open_raidframe_found, open_volume, raidframe_candidates};
use super::vinum::describe::detail_volume;
use super::{emit, err, scan_groups, CliResult};
use crate::report::{detail_json, detail_text};
use crate::DetailArgs;

pub fn run(args: &DetailArgs) -> CliResult {
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
        match describe(group) {
            Ok((text, value)) => {
                if args.json {
                    json.push(value);
                } else {
                    emit(&format!("{text}\n"))?;
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

fn describe(paths: &[PathBuf]) -> CliResult<(String, Value)> {
    let array = OpenArray::open_paths(paths, false)?;
    let size = array.size();
    let md = array.md().expect("an md array was assembled");
    let infos: Vec<_> = md.members.iter().map(|m| m.info.clone()).collect();
    let names: Vec<String> = md.members.iter().map(|m| m.dev.name().to_string()).collect();
    let text = format!("{}:\n{}", md.plan.uuid_string(), detail_text(&md.plan, &infos, &names, size));
    Ok((text, detail_json(&md.plan, &infos, &names, size)))
}
