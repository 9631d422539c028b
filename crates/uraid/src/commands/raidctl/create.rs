//! `-C` and `-I SERIAL`: a new set on blank components, labelled as NetBSD's `raidctl -C CONF`
//! (then `-I SERIAL`) and `-u` leave it (`uraid_raidframe::new_set`): dirty, every parity map
//! region dirty, the data areas untouched; its parity is then written with `-i`. `-I` on the
//! components of an existing set gives it a new serial number, as `-c; -I; -u` does.
//!
//! A component that carries anything uraid knows (an md superblock, a gvinum drive, a RAIDframe
//! label) is not labelled anew: every component is checked before any is written.

use std::sync::Arc;

use uraid_device::raidframe_components::{read_label, write_component, ComponentError};
use uraid_device::vinum_drives::read_drive;
use uraid_device::{probe, Member, MemberDevice};
use uraid_raidframe::new_set::{new_labels, SECTOR_BYTES};
use uraid_raidframe::raidctl_session::LabelChange;
use uraid_raidframe_format::config_file::ABSENT;
use uraid_raidframe_format::layout::ParityMap;
use uraid_raidframe_format::mapping::Level;

use super::super::{err, CliError, CliResult};
use super::session::Configured;
use super::target::Target;

/// What a component listed in the file holds.
enum Found {
    Absent,
    Blank(Arc<dyn MemberDevice>),
    Labelled,
}

pub fn run(target: &Target, serial: Option<i32>) -> CliResult {
    let mut found = Vec::new();
    for (shown, path) in target.shown.disks.iter().zip(&target.resolved.disks) {
        if path == ABSENT {
            found.push(Found::Absent);
            continue;
        }
        let dev = Member::open(std::path::Path::new(path), true).map_err(|e| CliError(format!("{shown}: {e}")))?;
        if probe(&dev as &dyn MemberDevice)?.is_some() {
            return err(format!("{shown}: carries an md superblock: not labelled as a RAIDframe component"));
        }
        if read_drive(&dev as &dyn MemberDevice).is_ok() {
            return err(format!("{shown}: is a gvinum drive: not labelled as a RAIDframe component"));
        }
        found.push(match read_label(&dev as &dyn MemberDevice) {
            Err(ComponentError::NoLabel { .. }) => Found::Blank(Arc::new(dev)),
            _ => Found::Labelled,
        });
    }
    let labelled = found.iter().filter(|f| matches!(f, Found::Labelled)).count();
    let blank = found.iter().filter(|f| matches!(f, Found::Blank(_))).count();
    match (serial, labelled, blank) {
        (Some(serial), _, 0) if labelled > 0 => return reserial(target, serial),
        (_, 0, _) => {}
        (None, _, _) => {
            return err(format!(
                "{}: {labelled} component(s) carry RAIDframe labels already: -C labels new sets on blank components only (configure an existing set with -c, or give it a new serial with -I)",
                target.name
            ))
        }
        (Some(_), _, _) => {
            return err(format!(
                "{}: {labelled} component(s) carry RAIDframe labels and {blank} do not: -I initialises a new set (every component blank) or an existing one (every component labelled)",
                target.name
            ))
        }
    }
    let sizes: Vec<Option<u64>> = found
        .iter()
        .map(|f| match f {
            Found::Blank(dev) => Some(dev.size() / SECTOR_BYTES),
            _ => None,
        })
        .collect();
    let labels = new_labels(&target.resolved, &sizes, serial).map_err(|e| CliError(format!("{}: {e}", target.name)))?;
    let map = (target.resolved.layout.level != Level::Raid0).then(ParityMap::all_dirty);
    for (f, label) in found.iter().zip(&labels) {
        if let (Found::Blank(dev), Some(label)) = (f, label) {
            write_component(dev.as_ref(), label, map.as_ref())?;
        }
    }
    eprintln!(
        "uraid: {}: new RAIDframe set labelled on {blank} component(s), serial number {}; its parity is not written yet: run `uraid raidctl -i` on it{}",
        target.name,
        serial.unwrap_or(0),
        if serial.is_none() { " (and give it a serial number with -I first)" } else { "" }
    );
    Ok(())
}

/// `-I SERIAL` on a configured set.
fn reserial(target: &Target, serial: i32) -> CliResult {
    let array = target.open(true)?;
    let configured = Configured::of(&array);
    array.close()?;
    configured.unconfigure(LabelChange::Serial(serial))
}
