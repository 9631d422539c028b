//! `-R COMPONENT` (reconstruct in place) and `-F COMPONENT` (fail it, and reconstruct its column
//! onto a hot spare): the column is rebuilt from the others by the array service, the rebuild
//! `uraid serve` runs, with its progress on a terminal; then the labels NetBSD leaves after
//! `raidctl -c; -R (or -F); -u` are written.
//!
//! Nothing is written to the component being rebuilt until it is in sync, and the survivors'
//! labels are moved on before the rebuild starts, so a crash part way leaves it blank or stale:
//! the next configuration (uraid's or NetBSD's) does not trust it. The rebuilt column's label
//! is the set's, with its own column (see `uraid_raidframe::raidctl_session`).

use uraid_device::open_array::RebuildOnto;
use uraid_device::service::{ArrayService, ServiceConfig};
use uraid_device::OpenArray;
use uraid_raidframe::raidctl_session::LabelChange;

use super::super::{emit, err, report_stop, CliError, CliResult};
use super::session::Configured;
use super::target::Target;
use crate::control::status_json;

/// `raidctl -R COMPONENT`: rebuild its column onto it. A live component is failed first, as
/// raidctl's `-R` does.
pub fn in_place(target: &Target, component: &str, verbose: bool) -> CliResult {
    let column = target.column_of(component)?;
    refuse_without_redundancy(target)?;
    let target = &target.placing(column, component);
    let array = target.open_rebuilding(column, RebuildOnto::InPlace)?;
    let configured = Configured::of(&array);
    rebuild(target, array, component, verbose)?;
    configured.unconfigure(LabelChange::Reconstructed(column))?;
    eprintln!("uraid: {component} (column {column}) reconstructed in place");
    Ok(())
}

/// `raidctl -F COMPONENT`: fail it (if it is not failed already) and rebuild its column onto
/// the first hot spare of the configuration file that is free; the spare's label then takes
/// the column, and the failed component is left behind, stale.
pub fn to_spare(target: &Target, component: &str, verbose: bool) -> CliResult {
    let column = target.column_of(component)?;
    refuse_without_redundancy(target)?;
    // The labels as configured, the failing component's included.
    let configured_array = target.open(true)?;
    let set = configured_array.raidframe().expect("a RAIDframe set");
    if set.used_spares.iter().any(|&(_, c)| c == column) {
        return err(format!("{component}: column {column} is already served by a hot spare (copy it back with -B)"));
    }
    let missing = configured_array.missing_slots();
    let alive = |c: usize| c != column && !missing.contains(&c);
    if !missing.contains(&column) && !configured_array.engine().geometry().is_readable(&alive) {
        return err(format!(
            "{component}: failing column {column} would leave {} without its data (no redundancy left): refused, nothing written",
            target.name
        ));
    }
    let in_use: Vec<usize> = set.used_spares.iter().map(|&(k, _)| k).collect();
    let mut configured = Configured::of(&configured_array);
    configured_array.close()?;
    let Some(spare) = (0..target.resolved.spares.len()).find(|k| !in_use.contains(k)) else {
        return err(format!(
            "{component}: {} has no free hot spare (add one to its configuration file's START spare section); nothing written",
            target.name
        ));
    };
    let array = target.open_rebuilding(column, RebuildOnto::Spare(spare))?;
    let set = array.raidframe().expect("a RAIDframe set");
    let spare_dev = set.components[target.resolved.disks.len() + spare].clone().expect("the spare was opened");
    let spare_sectors = spare_dev.size() / set.plan.layout.sector_bytes();
    configured.with_spare(spare_dev, None);
    let spare_name = target.shown.spares[spare].clone();
    rebuild(target, array, &spare_name, verbose)?;
    configured.unconfigure(LabelChange::Spared { column, spare_sectors })?;
    eprintln!("uraid: {component} (column {column}) failed; reconstructed onto hot spare {spare_name}");
    Ok(())
}

/// RAID 0 has nothing to rebuild from (NetBSD's `-R` and `-F` fail on it too).
fn refuse_without_redundancy(target: &Target) -> CliResult {
    if target.resolved.layout.level == uraid_raidframe_format::mapping::Level::Raid0 {
        return err(format!("{}: a RAID 0 set has no redundancy to reconstruct from; nothing written", target.name));
    }
    Ok(())
}

/// Rebuild the recovering column through the array service, following its progress; the set is
/// closed (labels flushed clean) when it ends.
fn rebuild(target: &Target, mut array: OpenArray, onto: &str, verbose: bool) -> CliResult {
    // The survivors move on first: the component being rebuilt is stale from here on.
    array.record_roles()?;
    if verbose {
        emit("Reconstruction status:\n")?;
    }
    let service = ArrayService::start(array, ServiceConfig::default());
    let handle = service.handle();
    let last = crate::progress::follow(
        || handle.status().map(|s| status_json(&s)).map_err(|e| CliError(e.to_string())),
        || handle.wait_idle().map(|s| status_json(&s)).map_err(|e| CliError(e.to_string())),
    )?;
    let report = service.stop().map_err(|e| CliError(format!("stopping {}: {e}", target.name)))?;
    report_stop(&report, false, "reconstruction done");
    let outcome = last["last_sync"].as_str().unwrap_or("no result").to_string();
    if !outcome.contains("completed") || !report.failed_members.is_empty() {
        return err(format!(
            "{}: reconstructing onto {onto} did not complete ({outcome}); it is left stale, and the labels say so",
            target.name
        ));
    }
    Ok(())
}
