//! `rm`, `rename`, `setstate`, `attach`, `detach` and `move`/`mv`: gvinum's verbs that change
//! objects and states.
//!
//! Each finds the drives, applies the change to the configuration they make together
//! (`uraid_vinum_format::edit`, which follows the kernel's rules and refusals), and saves the
//! result to every drive as gvinum does after the change; `rm` of a drive first marks that
//! drive's header removed, as `gv_rm_drive` does. Everything is checked and every write
//! planned before the first one is made; a refusal writes nothing, and so does a change that
//! changes nothing.
//!
//! As with the listings, arguments that are existing files or block devices are the devices
//! to look at; the others are the verb's own words (object names, states, an offset).

use std::path::PathBuf;

use uraid_device::vinum_drives::{prepare_remove, DriveToWrite};
use uraid_device::Member;
use uraid_vinum_format::edit::{self, EditDrive, EditError, Edited, Workspace};
use uraid_vinum_format::tokens::parse_size;

use super::super::{err, CliResult};
use super::drives::{now, DriveSet};
use super::{AttachArgs, DetachArgs, MoveArgs, RenameArgs, RmArgs, Search, SetstateArgs};

/// Split arguments into devices (existing files and block devices, NBD URIs) and words.
fn split(args: &[String]) -> (Vec<PathBuf>, Vec<String>) {
    let (devices, words): (Vec<&String>, Vec<&String>) =
        args.iter().partition(|a| super::drives::is_device_argument(a));
    (devices.into_iter().map(PathBuf::from).collect(), words.into_iter().cloned().collect())
}

/// What gvinum holds: the merged configuration in the kernel's order and its drive list, each
/// drive with the size of the device it was found on.
fn workspace(set: &DriveSet) -> Workspace {
    Workspace {
        config: set.config(),
        drives: set
            .startup
            .merged
            .drive_list
            .iter()
            .map(|name| EditDrive { name: name.clone(), media_size: set.startup.drive(name).map(|d| d.media_size) })
            .collect(),
    }
}

/// Find the drives, make the edit, and save what it changed.
fn apply(
    devices: &[PathBuf],
    search: &Search,
    make: impl FnOnce(&Workspace) -> Result<Edited, EditError>,
) -> CliResult {
    let set = DriveSet::start(devices, search, &[])?;
    set.report_skipped(true)?;
    if set.startup.drives.is_empty() {
        return err("no gvinum drives found (give the devices that hold them, or --scan DIR)");
    }
    let before = workspace(&set);
    let edited = make(&before)?;
    for note in &edited.notes {
        eprintln!("uraid: {note}");
    }
    if !edited.changes(&before) {
        return Ok(());
    }
    // Removed drives take the removed magic; drives set down take no save (gv_save_config
    // writes drives that are up); the others take the save.
    let mut written = Vec::new();
    for d in &set.startup.drives {
        let name = &d.drive.header.label.name;
        let removed = edited.removed_drives.contains(name);
        if removed || !edited.down_drives.contains(name) {
            written.push((d, removed));
        }
    }
    if !written.iter().any(|(_, removed)| !removed) && edited.removed_drives.is_empty() {
        return err(format!(
            "no drive would record the change: {} taken down, no other drive was found; nothing was written",
            edited.down_drives.join(", ")
        ));
    }
    let files: Vec<Member> = written.iter().map(|(d, _)| set.writable(d)).collect::<CliResult<_>>()?;
    let mut kept = Vec::new();
    let mut removed = Vec::new();
    for ((d, is_removed), file) in written.iter().zip(&files) {
        let mut header = d.drive.header.clone();
        if let Some((_, new)) = edited.renamed_drives.iter().find(|(old, _)| *old == header.label.name) {
            header.label.name = new.clone();
        }
        let to_write = DriveToWrite { device: file, header };
        if *is_removed {
            removed.push(to_write);
        } else {
            kept.push(to_write);
        }
    }
    let plan = prepare_remove(kept, removed, &edited.config, now())?;
    plan.run()?;
    Ok(())
}

pub fn rm(args: &RmArgs) -> CliResult {
    let (devices, names) = split(&args.args);
    if names.is_empty() {
        return err("no object to remove specified");
    }
    apply(&devices, &args.search, |ws| edit::remove(ws, &names, args.r))
}

pub fn rename(args: &RenameArgs) -> CliResult {
    let (devices, words) = split(&args.args);
    match words.len() {
        0 => err("no object to rename specified"),
        1 => err("no new name specified"),
        2 => apply(&devices, &args.search, |ws| edit::rename(ws, &words[0], &words[1], args.r)),
        _ => err("more than one new name specified"),
    }
}

pub fn setstate(args: &SetstateArgs) -> CliResult {
    let (devices, words) = split(&args.args);
    if words.len() != 2 {
        return err("usage: setstate [-f] STATE OBJECT (STATE: up, down or stale)");
    }
    apply(&devices, &args.search, |ws| edit::set_state(ws, &words[0], &words[1], args.force))
}

pub fn attach(args: &AttachArgs) -> CliResult {
    let (devices, words) = split(&args.args);
    let usage = "usage: attach PLEX VOLUME [rename] | attach SUBDISK PLEX [OFFSET] [rename]";
    if !(2..=4).contains(&words.len()) {
        return err(usage);
    }
    // gvinum.c takes "rename" and an offset after the two names; either order is taken here.
    let mut rename = false;
    let mut offset = None;
    for word in &words[2..] {
        if word == "rename" && !rename {
            rename = true;
        } else if offset.is_none() {
            match parse_size(word) {
                Ok(bytes) if bytes >= 0 => offset = Some(bytes as u64),
                _ => return err(format!("offset '{word}' is not a size (bytes, or a number with s, k, m or g)")),
            }
        } else {
            return err(usage);
        }
    }
    apply(&devices, &args.search, |ws| edit::attach(ws, &words[0], &words[1], offset, rename))
}

pub fn detach(args: &DetachArgs) -> CliResult {
    let (devices, words) = split(&args.args);
    if words.len() != 1 {
        return err("usage: detach [-f] PLEX|SUBDISK");
    }
    apply(&devices, &args.search, |ws| edit::detach(ws, &words[0], args.force))
}

pub fn move_subdisks(args: &MoveArgs) -> CliResult {
    let (devices, words) = split(&args.args);
    match words.len() {
        0 => err("no destination or object(s) to move specified"),
        1 => err("no object(s) to move specified"),
        _ => apply(&devices, &args.search, |ws| edit::move_subdisks(ws, &words[0], &words[1..], args.force)),
    }
}
