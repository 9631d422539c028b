//! Which array a command runs: an md array of the members given (or found under `--scan`), or
//! with `--volume` a gvinum volume of the drives given or found. What assembly decided is said
//! on stderr.

use std::path::{Path, PathBuf};

use uraid_device::OpenArray;

use super::vinum::drives::{DriveSet, Search};
use super::{assemble_for_service, err, select_members, CliResult};
use crate::ArraySource;

/// Open the array a command names: an md array of the members given (or found under `--scan`),
/// or with `--volume` a gvinum volume of the drives given or found. Tells the user on stderr
/// what assembly decided, as [`assemble_for_service`] does.
pub fn open_source(source: &ArraySource, writable: bool) -> CliResult<OpenArray> {
    let Some(volume) = &source.volume else {
        if source.scan.is_some() && !source.members.is_empty() {
            return err("give the members or --scan DIR, not both");
        }
        let paths = select_members(&source.members, source.scan.as_deref(), source.uuid.as_deref())?;
        return assemble_for_service(&paths, writable);
    };
    open_volume(&source.members, source.scan.as_deref(), volume, writable)
}

/// Open gvinum volume `volume` of the drives among `given` and under `scan`, found by the names
/// in their headers as Vinum's startup finds them, and say on stderr which of its subdisks do
/// not serve and why. Opened writable, a damaged drive anywhere among them is refused: the
/// volume's state changes are saved to every drive, and one read wrong would keep an old
/// configuration.
pub fn open_volume(given: &[PathBuf], scan: Option<&Path>, volume: &str, writable: bool) -> CliResult<OpenArray> {
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
    let array = OpenArray::open_volume_paths(&drive_paths, volume, writable)?;
    let v = array.vinum().expect("a vinum volume was opened");
    for (subdisk, drive) in v.absent_subdisks() {
        eprintln!("uraid: subdisk {subdisk} is down: its drive {drive} was not found");
    }
    let stale = v.stale_subdisks();
    if !stale.is_empty() {
        let what = if writable { "revived (rebuilt from the rest of the volume)" } else { "left out" };
        eprintln!("uraid: subdisk(s) {} not up (stale): {what}", stale.join(", "));
    }
    Ok(array)
}
