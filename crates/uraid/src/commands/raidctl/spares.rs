//! `-a COMPONENT` and `-r COMPONENT`: add and remove a hot spare.
//!
//! NetBSD adds a hot spare to the configured set in the kernel's memory only: it writes nothing
//! to the spare, and the spare is gone at the next configure unless the configuration file's
//! `START spare` section names it. uraid keeps no set configured between commands, so its hot
//! spares are exactly the file's: these verbs check the component and say what to change in
//! the file; they write nothing, to the file or to any component.

use std::path::Path;

use uraid_device::raidframe_components::read_label;
use uraid_device::{Member, MemberDevice};
use uraid_raidframe_format::layout::data_offset;

use super::super::{emit, err, CliResult};
use super::target::Target;

/// `-a COMPONENT`: it must open, be large enough for a column of the set, and be neither a
/// component nor a spare of it already; a component carrying the set's current label (one
/// serving it) is refused.
pub fn add(target: &Target, component: &str) -> CliResult {
    if target.shown.disks.iter().any(|d| d == component) {
        return err(format!("{component} is already a component of {}", target.name));
    }
    if target.shown.spares.iter().any(|s| s == component) {
        return err(format!("{component} is already a hot spare of {}", target.name));
    }
    let keep = Path::new(component).is_absolute() || Member::is_uri(Path::new(component));
    let path = if keep { component.into() } else { target.folder.join(component) };
    let dev = Member::open(&path, false).map_err(|e| super::super::CliError(format!("{component}: {e}")))?;
    let array = target.open(false)?;
    let set = array.raidframe().expect("a RAIDframe set");
    let need = data_offset(set.plan.layout.sector_bytes()) + array.engine().geometry().member_data_bytes();
    if dev.size() < need {
        return err(format!("{component}: holds {} bytes; a hot spare of {} needs {need}", dev.size(), target.name));
    }
    if let Ok(label) = read_label(&dev) {
        if label.serial_number == set.serial_number() && label.mod_counter == set.plan.mod_counter {
            return err(format!(
                "{component}: carries the current label of {}'s column {}: it serves the set, it cannot be a spare",
                target.name, label.column
            ));
        }
    }
    emit(&format!(
        "{component} can be a hot spare of {name}. uraid's hot spares are its configuration file's: add the line\n    {component}\nto its START spare section and count it in START array's third number (numSpare, now {spares}). Nothing was written.\n",
        name = target.name,
        spares = target.shown.spares.len()
    ))
}

/// `-r COMPONENT`: it must be one of the file's hot spares, and not one serving a column (copy
/// that back with `-B` first).
pub fn remove(target: &Target, component: &str) -> CliResult {
    let Some(spare) = target.shown.spares.iter().position(|s| s == component) else {
        return err(format!(
            "{component} is not a hot spare of {} (its spares: {})",
            target.name,
            if target.shown.spares.is_empty() { "none".to_string() } else { target.shown.spares.join(", ") }
        ));
    };
    let array = target.open(false)?;
    let set = array.raidframe().expect("a RAIDframe set");
    if let Some(&(_, column)) = set.used_spares.iter().find(|&&(k, _)| k == spare) {
        return err(format!(
            "{component} serves column {column} of {}: copy it back with -B before removing it; nothing written",
            target.name
        ));
    }
    emit(&format!(
        "{component} is a free hot spare of {name}. uraid's hot spares are its configuration file's: remove its line from the START spare section and lower START array's third number (numSpare, now {spares}). Nothing was written.\n",
        name = target.name,
        spares = target.shown.spares.len()
    ))
}
