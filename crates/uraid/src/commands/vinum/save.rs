//! `saveconfig` and `resetconfig`.
//!
//! `saveconfig` saves the configuration the drives make together to every one of them again,
//! as the kernel's `gv_save_config` does: its lists in the kernel's order (which, as in the
//! kernel after it tasted the drives, is the reverse of the order on disk), one new
//! `last_update` on all.
//!
//! `resetconfig` writes what the kernel's `gv_resetconfig` writes (see
//! [`uraid_device::vinum_drives::prepare_reset`]): every drive's header marked removed
//! (`VINUM--`), so gvinum finds no drive there any more. As gvinum, it asks for the words
//! "NO FUTURE" first; without a terminal to ask on, `-f` is needed.

use std::io::{BufRead, IsTerminal};

use uraid_device::vinum_drives::{prepare_reset, prepare_save, DriveToWrite};
use uraid_device::Member;

use super::super::{emit, err, CliResult};
use super::drives::{now, DriveSet};
use super::{DrivesArgs, ResetArgs};

/// The drives found, opened for writing, in the kernel's list order; an error when there are
/// none or one is damaged.
fn writable_drives(set: &DriveSet) -> CliResult<Vec<Member>> {
    set.report_skipped(true)?;
    if set.startup.drives.is_empty() {
        return err("no gvinum drives found (give the devices that hold them, or --scan DIR)");
    }
    set.startup.drives.iter().map(|d| set.writable(d)).collect()
}

fn to_write<'a>(set: &DriveSet, devices: &'a [Member]) -> Vec<DriveToWrite<'a>> {
    set.startup
        .drives
        .iter()
        .zip(devices)
        .map(|(d, dev)| DriveToWrite { device: dev, header: d.drive.header.clone() })
        .collect()
}

pub fn saveconfig(args: &DrivesArgs) -> CliResult {
    let set = DriveSet::start(&args.devices, &args.search, &[])?;
    let devices = writable_drives(&set)?;
    let plan = prepare_save(to_write(&set, &devices), &set.config(), now())?;
    plan.run()?;
    Ok(())
}

pub fn resetconfig(args: &ResetArgs) -> CliResult {
    let set = DriveSet::start(&args.devices, &args.search, &[])?;
    let devices = writable_drives(&set)?;
    let plan = prepare_reset(to_write(&set, &devices), &set.config(), now())?;
    if !args.force {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return err(format!(
                "resetconfig wipes the gvinum configuration off {} drive(s); with no terminal to ask on, give -f",
                devices.len()
            ));
        }
        let names: Vec<String> = set.startup.drives.iter().map(|d| set.path_of(d).display().to_string()).collect();
        emit(&format!(
            " WARNING!  This command will completely wipe out the gvinum configuration\n \
             on {}.\n All data will be lost.  If you really want to do this, enter the text\n\n NO FUTURE\n Enter text -> ",
            names.join(", ")
        ))?;
        let mut reply = String::new();
        stdin.lock().read_line(&mut reply)?;
        // As gvinum: only the words themselves go on; anything else changes nothing.
        if reply.trim_end_matches(['\n', '\r']) != "NO FUTURE" {
            return emit("\n No change\n");
        }
    }
    plan.run()?;
    emit("gvinum configuration obliterated\n")
}
