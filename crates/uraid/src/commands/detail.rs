//! `uraid detail`: assemble read-only and describe the array (`mdadm --detail`), from the given
//! members or from every member found under a folder (`--scan DIR`), grouped by array UUID.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use uraid_device::OpenArray;

use super::{err, open_and_probe, CliError, CliResult};
use crate::report::{detail_json, detail_text};
use crate::DetailArgs;

pub fn run(args: &DetailArgs) -> CliResult {
    let groups: Vec<Vec<PathBuf>> = match &args.scan {
        None => vec![args.members.clone()],
        Some(dir) => scan(dir)?,
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
                    println!("{text}");
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
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON"));
    }
    if failed > 0 {
        return err(format!("{failed} of {} arrays could not be assembled", groups.len()));
    }
    Ok(())
}

fn describe(paths: &[PathBuf]) -> CliResult<(String, Value)> {
    let array = OpenArray::open_paths(paths, false)?;
    let infos: Vec<_> = array.members.iter().map(|m| m.info.clone()).collect();
    let names: Vec<String> = array.members.iter().map(|m| m.dev.name().to_string()).collect();
    let size = array.size();
    let text = format!("{}:\n{}", array.plan.uuid_string(), detail_text(&array.plan, &infos, &names, size));
    Ok((text, detail_json(&array.plan, &infos, &names, size)))
}

/// Every regular file or block device under `dir` (recursively) that carries an md superblock,
/// grouped by array UUID. Damaged superblocks are reported and skipped.
fn scan(dir: &Path) -> CliResult<Vec<Vec<PathBuf>>> {
    let mut files = Vec::new();
    walk(dir, &mut files).map_err(|e| CliError(format!("{}: {e}", dir.display())))?;
    files.sort();
    let mut groups: BTreeMap<[u8; 16], Vec<PathBuf>> = BTreeMap::new();
    for f in files {
        match open_and_probe(&f) {
            Ok((_, Some(p))) => groups.entry(p.superblock.info().array_uuid).or_default().push(f),
            Ok((_, None)) => {}
            Err(e) => eprintln!("uraid: skipping {}", e.0),
        }
    }
    Ok(groups.into_values().collect())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let ft = entry.file_type()?;
        let path = entry.path();
        if ft.is_dir() {
            walk(&path, out)?;
        } else {
            use std::os::unix::fs::FileTypeExt;
            if ft.is_file() || ft.is_block_device() {
                out.push(path);
            }
        }
    }
    Ok(())
}
