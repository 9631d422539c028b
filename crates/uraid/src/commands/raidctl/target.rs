//! The set a `uraid raidctl` command works on: the one its configuration file names, or the one
//! autoconfiguration finds under `--scan DIR` (then described as a configuration file whose
//! components are the paths found, as `raidctl -G` would print it).

use std::path::{Path, PathBuf};

use uraid_device::open_array::RebuildOnto;
use uraid_device::raidframe_components::read_component;
use uraid_device::{Member, OpenArray};
use uraid_raidframe_format::config_file::{QueueLine, RaidConfig, ABSENT};

use super::super::source::{open_raidframe_found, open_raidframe_resolved, read_raidframe_config};
use super::super::{err, files_under, CliResult};
use super::RaidctlArgs;

/// A set named by a configuration file.
#[derive(Clone)]
pub struct Target {
    /// The configuration with the component names as the user wrote them (these are the names
    /// `-s` prints and `-g`, `-f` take).
    pub shown: RaidConfig,
    /// The same with relative paths resolved: what is opened.
    pub resolved: RaidConfig,
    /// How to name the set in messages: the configuration file, or the scanned folder.
    pub name: String,
    /// Found with `--scan` rather than named by a configuration file.
    pub scanned: bool,
    /// The folder relative component paths are taken from (the configuration file's).
    pub folder: PathBuf,
    /// Found with `--scan`: the set's serial number, which its stale components carry too.
    pub serial: Option<i32>,
}

impl Target {
    pub fn from_args(args: &RaidctlArgs) -> CliResult<Target> {
        if let Some(path) = &args.config {
            let (shown, resolved) = read_raidframe_config(path)?;
            let folder = path.parent().map_or_else(PathBuf::new, Path::to_path_buf);
            return Ok(Target {
                shown,
                resolved,
                name: path.display().to_string(),
                scanned: false,
                folder,
                serial: None,
            });
        }
        let Some(dir) = &args.scan else {
            return err("name the set's configuration file, or give --scan DIR");
        };
        let files = files_under(dir)?;
        let array = open_raidframe_found(&files, args.serial, false)?;
        let set = array.raidframe().expect("a RAIDframe set was opened");
        let labels = set.metadata().labels();
        let first = labels.iter().flatten().next().expect("an opened set has a fresh label");
        let g = set.plan.layout.raid_geometry();
        let disks = (0..g.columns as usize)
            .map(|c| array.slot_device_name(c).map_or_else(|| ABSENT.to_string(), str::to_string))
            .collect();
        let config = RaidConfig {
            num_rows: 1,
            num_columns: g.columns as i32,
            disks,
            spares: vec![],
            layout: uraid_raidframe_format::config_file::LayoutLine {
                sect_per_su: first.sect_per_su,
                sus_per_pu: first.sus_per_pu,
                sus_per_ru: first.sus_per_ru,
                level: g.level,
            },
            queue: QueueLine { queue_type: "fifo".into(), max_outstanding: first.max_outstanding },
            debug: vec![],
        };
        Ok(Target {
            shown: config.clone(),
            resolved: config,
            name: dir.display().to_string(),
            scanned: true,
            folder: dir.clone(),
            serial: Some(set.serial_number()),
        })
    }

    /// Configure the set as `raidctl -c` does; what was decided is said on stderr.
    pub fn open(&self, writable: bool) -> CliResult<OpenArray> {
        open_raidframe_resolved(&self.resolved, writable)
    }

    /// Configure the set to rebuild `column` onto `onto` (writable; the column's slot
    /// recovering). Onto a hot spare needs a configuration file (the spares are named there);
    /// in place, a set found with `--scan` takes the component given (see [`Target::placing`]).
    pub fn open_rebuilding(&self, column: usize, onto: RebuildOnto) -> CliResult<OpenArray> {
        if self.scanned && onto != RebuildOnto::InPlace {
            return err("reconstruction onto a hot spare and copyback need the set's configuration file (its hot spares are named there), not --scan");
        }
        Ok(OpenArray::open_raidframe_config_rebuilding(&self.resolved, column, onto)?)
    }

    /// The column whose component the file names `component`: as written in the file (as
    /// raidctl matches it), or the same file by another path. Refused as raidctl refuses a name
    /// that is not one of the set's.
    pub fn column_of(&self, component: &str) -> CliResult<usize> {
        let canon = |p: &str| std::fs::canonicalize(p).ok();
        let given = canon(component);
        let same_file = |c: usize| given.is_some() && canon(&self.resolved.disks[c]) == given;
        let written = self.shown.disks.iter().position(|d| d == component && d != ABSENT);
        let found =
            written.or_else(|| (0..self.shown.disks.len()).find(|&c| self.shown.disks[c] != ABSENT && same_file(c)));
        match found.or_else(|| self.absent_column_for(component)) {
            Some(c) => Ok(c),
            None if self.shown.spares.iter().any(|s| s == component) => {
                err(format!("{component} is a hot spare of {}, not a column", self.name))
            }
            None => err(format!(
                "{component} is not a component of {} (its components: {})",
                self.name,
                self.shown.disks.join(", ")
            )),
        }
    }
}

impl Target {
    /// With `--scan`, a component the set does not use (stale, or blank) has no place in the
    /// description found: its own label names its column when it is this set's; a blank one
    /// takes the first column without a component. Another set's component, or one whose label
    /// is damaged, takes none.
    fn absent_column_for(&self, component: &str) -> Option<usize> {
        if !self.scanned {
            return None;
        }
        let absent: Vec<usize> = (0..self.shown.disks.len()).filter(|&c| self.shown.disks[c] == ABSENT).collect();
        let dev = Member::open(Path::new(component), false).ok()?;
        match read_component(&dev) {
            Ok(found) if Some(found.label.serial_number) == self.serial => {
                usize::try_from(found.label.column).ok().filter(|c| absent.contains(c))
            }
            Ok(_) => None,
            Err(e) if e.is_damage() => None,
            Err(_) => absent.first().copied(),
        }
    }

    /// The set with `component` in `column`, for a set found with `--scan` whose column has no
    /// component (what a configuration file would have named there); a file's set as it is.
    pub fn placing(&self, column: usize, component: &str) -> Target {
        let mut placed = self.clone();
        if self.scanned && self.shown.disks.get(column).is_some_and(|d| d == ABSENT) {
            placed.shown.disks[column] = component.to_string();
            placed.resolved.disks[column] = component.to_string();
        }
        placed
    }
}

/// The unit the set was last configured as (`raidN`), from its labels.
pub fn unit(array: &OpenArray) -> i32 {
    let set = array.raidframe().expect("a RAIDframe set");
    set.metadata().labels().iter().flatten().next().map_or(0, |l| l.last_unit)
}

/// Whether the set's parity is known good, as `raidctl -p` reports it: every fresh label clean
/// and, with a parity map in use, no region dirty (RAID 0 has only the clean flags).
pub fn parity_clean(array: &OpenArray) -> bool {
    let set = array.raidframe().expect("a RAIDframe set");
    set.plan.labels_clean && !array.needs_resync()
}
