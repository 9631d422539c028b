//! Which array a command runs: an md array of the members given (or found under `--scan`),
//! with `--volume` a gvinum volume of the drives given or found, or a NetBSD RAIDframe set:
//! with `--raidframe CONFIG` the one a raidctl configuration file describes, else the one
//! autoconfiguration finds among the devices given or found when they carry RAIDframe labels
//! and no md superblock. What assembly decided is said on stderr.

use std::path::{Path, PathBuf};

use uraid_device::raidframe_components::read_label;
use uraid_device::{Member, MemberDevice, OpenArray};
use uraid_raidframe_format::config_file::{RaidConfig, ABSENT};

use super::vinum::drives::{DriveSet, Search};
use super::{assemble_for_service, err, files_under, open_and_probe, scan_groups, select_members, CliError, CliResult};
use crate::ArraySource;

/// Open the array a command names (see the module documentation). Tells the user on stderr
/// what assembly decided, as [`assemble_for_service`] does.
pub fn open_source(source: &ArraySource, writable: bool) -> CliResult<OpenArray> {
    if let Some(config) = &source.raidframe {
        if !source.members.is_empty() {
            return err("--raidframe CONFIG takes its components from the file; give no members");
        }
        return open_raidframe_config(config, writable);
    }
    if let Some(volume) = &source.volume {
        if let Some(plex) = &source.plex {
            if writable {
                return err(format!(
                    "--plex {plex} reads one plex of volume {volume} on its own, read-only; a write would miss the volume's other plexes (serve it with --read-only, or use cat)"
                ));
            }
            return open_volume_plex(&source.members, source.scan.as_deref(), volume, plex);
        }
        return open_volume(&source.members, source.scan.as_deref(), volume, writable);
    }
    if source.scan.is_some() && !source.members.is_empty() {
        return err("give the members or --scan DIR, not both");
    }
    if let Some(paths) = raidframe_candidates(&source.members, source.scan.as_deref(), source.serial)? {
        return open_raidframe_found(&paths, source.serial, writable);
    }
    let paths = select_members(&source.members, source.scan.as_deref(), source.uuid.as_deref())?;
    assemble_for_service(&paths, writable)
}

/// The devices to look for a RAIDframe set among, when the command names one: `--serial` was
/// given, or the members given carry no md superblock and at least one RAIDframe label, or
/// `--scan DIR` holds no md member but RAIDframe components. `None`: an md array.
pub fn raidframe_candidates(
    members: &[PathBuf],
    scan: Option<&Path>,
    serial: Option<u32>,
) -> CliResult<Option<Vec<PathBuf>>> {
    let paths = match scan {
        Some(dir) if serial.is_some() || scan_groups(dir)?.is_empty() => files_under(dir)?,
        Some(_) => return Ok(None),
        None => members.to_vec(),
    };
    if serial.is_some() {
        return Ok(Some(paths));
    }
    let mut labelled = false;
    for p in &paths {
        let Ok((dev, probed)) = open_and_probe(p) else { continue };
        if probed.is_some() {
            return Ok(None);
        }
        // A damaged label counts: the set's plan says why that component is left out.
        labelled |= match read_label(&dev as &dyn MemberDevice) {
            Ok(_) => true,
            Err(e) => e.is_damage(),
        };
    }
    Ok(labelled.then_some(paths))
}

/// Open the RAIDframe set autoconfiguration finds among `paths` (by serial number when given).
pub fn open_raidframe_found(paths: &[PathBuf], serial: Option<u32>, writable: bool) -> CliResult<OpenArray> {
    let array = OpenArray::open_raidframe_paths(paths, serial.map(|s| s as i32), writable)?;
    report_raidframe(&array, writable);
    Ok(array)
}

/// Open the RAIDframe set the raidctl configuration file at `path` describes.
pub fn open_raidframe_config(path: &Path, writable: bool) -> CliResult<OpenArray> {
    let (_, resolved) = read_raidframe_config(path)?;
    open_raidframe_resolved(&resolved, writable)
}

/// Read the raidctl configuration file at `path`: as written, and with every relative
/// component or spare path taken relative to the file's folder (raidctl would take them
/// relative to where it runs; a file that travels with its images is more useful). An NBD URI
/// is no path and stays as written.
pub fn read_raidframe_config(path: &Path) -> CliResult<(RaidConfig, RaidConfig)> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    let config = RaidConfig::parse(&text).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    let folder = path.parent().unwrap_or(Path::new(""));
    let resolve = |name: &String| {
        if name == ABSENT || Path::new(name).is_absolute() || Member::is_uri(Path::new(name)) {
            name.clone()
        } else {
            folder.join(name).display().to_string()
        }
    };
    let mut resolved = config.clone();
    resolved.disks = config.disks.iter().map(resolve).collect();
    resolved.spares = config.spares.iter().map(resolve).collect();
    Ok((config, resolved))
}

/// Open the set a configuration file describes, its component paths already resolved.
pub fn open_raidframe_resolved(config: &RaidConfig, writable: bool) -> CliResult<OpenArray> {
    let array = OpenArray::open_raidframe_config(config, writable)?;
    report_raidframe(&array, writable);
    Ok(array)
}

/// Say on stderr which components were left out and why, which columns are missing, and
/// whether the set's parity is owed a rewrite.
fn report_raidframe(array: &OpenArray, writable: bool) {
    let set = array.raidframe().expect("a RAIDframe set was opened");
    for why in &set.skipped {
        eprintln!("uraid: {why}");
    }
    let missing = array.missing_slots();
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|c| c.to_string()).collect();
        eprintln!(
            "uraid: RAIDframe set {} is degraded: column(s) {} failed; reads of them are rebuilt from redundancy",
            set.serial_number(),
            list.join(", ")
        );
    }
    if array.needs_resync() && !missing.is_empty() && array.engine().geometry().is_parity() {
        eprintln!(
            "uraid: RAIDframe set {} was not shut down cleanly and is degraded: its parity is not known good, so data of column(s) {} rebuilt in stripes written just before the stop may be wrong; served read-only as it is (NetBSD reads it the same way)",
            set.serial_number(),
            missing.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
        );
    } else if array.needs_resync() {
        let what = if writable { "writes use reconstruct-write meanwhile" } else { "reads are served as they are" };
        eprintln!(
            "uraid: RAIDframe set {} was not shut down cleanly (dirty labels or parity map regions); its parity is owed a rewrite ({what})",
            set.serial_number()
        );
    }
}

/// Open gvinum volume `volume` of the drives among `given` and under `scan`, found by the names
/// in their headers as Vinum's startup finds them, and say on stderr which of its subdisks do
/// not serve and why. Opened writable, a damaged drive anywhere among them is refused: the
/// volume's state changes are saved to every drive, and one read wrong would keep an old
/// configuration.
pub fn open_volume(given: &[PathBuf], scan: Option<&Path>, volume: &str, writable: bool) -> CliResult<OpenArray> {
    let drive_paths = volume_drives(given, scan, writable)?;
    let array = OpenArray::open_volume_paths(&drive_paths, volume, writable)?;
    report_volume(&array, writable);
    Ok(array)
}

/// Open one plex of a gvinum volume on its own, read-only (see `OpenArray::open_volume_plex`).
pub fn open_volume_plex(given: &[PathBuf], scan: Option<&Path>, volume: &str, plex: &str) -> CliResult<OpenArray> {
    let drive_paths = volume_drives(given, scan, false)?;
    let mut devs: Vec<Box<dyn MemberDevice>> = Vec::new();
    for p in &drive_paths {
        devs.push(Box::new(super::open_member(p, false)?));
    }
    let array = OpenArray::open_volume_plex(devs, volume, plex)?;
    eprintln!("uraid: reading plex {plex} of volume {volume} on its own (read-only)");
    report_volume(&array, false);
    Ok(array)
}

/// The paths of the gvinum drives among those given or found under `scan`.
fn volume_drives(given: &[PathBuf], scan: Option<&Path>, writable: bool) -> CliResult<Vec<PathBuf>> {
    let search = Search { scan: scan.map(Path::to_path_buf) };
    let drive_paths: Vec<PathBuf> = {
        let set = DriveSet::start(given, &search, &[])?;
        set.report_skipped(writable)?;
        set.startup.drives.iter().map(|d| set.path_of(d).to_path_buf()).collect()
    };
    if drive_paths.is_empty() {
        return err(match scan {
            Some(dir) => format!("no gvinum drives among the devices given or under {}", dir.display()),
            None => "no gvinum drives among the devices given".to_string(),
        });
    }
    Ok(drive_paths)
}

/// Say on stderr which subdisks a volume runs without, and what becomes of them.
fn report_volume(array: &OpenArray, writable: bool) {
    let v = array.vinum().expect("a vinum volume was opened");
    for (subdisk, drive) in v.absent_subdisks() {
        eprintln!("uraid: subdisk {subdisk} is down: its drive {drive} was not found");
    }
    let stale = v.stale_subdisks();
    if !stale.is_empty() {
        let what = if writable { "revived (rebuilt from the rest of the volume)" } else { "left out" };
        eprintln!("uraid: subdisk(s) {} not up (stale): {what}", stale.join(", "));
    }
}
