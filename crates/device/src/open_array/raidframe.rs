//! NetBSD RAIDframe sets: the components found among the devices given (autoconfiguration) or
//! named by a raidctl configuration file (`raidctl -c`), run on the engine with its columns as
//! slots ([`uraid_raidframe::SetLayout`]), its labels and parity map updated as NetBSD updates
//! them ([`uraid_raidframe::RaidframeMetadata`]).
//!
//! Only fresh components are touched: a stale or foreign component, or one whose label cannot
//! be read, is left out (its column runs degraded) and never written. The metadata's devices
//! are the fresh components, in column order.

use std::path::Path;
use std::sync::Arc;

use thiserror::Error;
use uraid_engine::geometry::{Geometry, Layout};
use uraid_engine::metadata::DeviceRole;
use uraid_engine::Engine;
use uraid_engine::SlotState;
use uraid_raidframe::metadata::RaidframeStart;
use uraid_raidframe::raidctl_session::{joining_label, Session};
use uraid_raidframe::set_plan::{file_components, ColumnStart, LeftOut, ReadComponent};
use uraid_raidframe::{RaidframeMetadata, SetPlan, SetPlanError};
use uraid_raidframe_format::config_file::RaidConfig;
use uraid_raidframe_format::layout::data_offset;

use super::md::MetadataFailure;
use super::{Format, OpenArray};
use crate::error::OpenError;
use crate::member::MemberDevice;
use crate::open_member::Member;
use crate::raidframe_components::read_component;
use crate::target::MemberTarget;

/// Why a RAIDframe set could not be opened.
#[derive(Debug, Error)]
pub enum SetOpenError {
    #[error("{path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error("{0}")]
    Plan(#[from] SetPlanError),
    #[error(
        "{device}: column {column} needs {end} bytes (64 protected sectors and {data} bytes of data), but the device holds {size}"
    )]
    ComponentTooSmall { device: String, column: usize, size: u64, end: u64, data: u64 },
    #[error(
        "RAIDframe set {serial} (RAID {level}) is degraded ({missing} column(s) missing) and its parity is not known good (dirty labels or parity map): data rebuilt from it could be wrong; refusing to run it writable (read it read-only, or rewrite its parity with the missing component back)"
    )]
    DirtyDegraded { serial: i32, level: char, missing: usize },
    #[error("column {column}: {why}")]
    CannotRebuild { column: usize, why: String },
    #[error(transparent)]
    Engine(#[from] uraid_engine::EngineError),
}

/// Where a column is rebuilt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebuildOnto {
    /// Onto the component the configuration file names for the column (`raidctl -R`): the
    /// failed one, or the one that replaced it.
    InPlace,
    /// Onto the configuration file's hot spare `k` (`raidctl -F`).
    Spare(usize),
}

/// Which set to open.
#[derive(Debug, Clone)]
pub enum SetSource {
    /// The set found among the devices by autoconfiguration; by serial number when several.
    Autoconfigure { serial: Option<i32> },
    /// The set a raidctl configuration file describes; its devices are the file's.
    ConfigFile(RaidConfig),
}

/// What only a RAIDframe set has: its plan, its components and its labels.
pub struct RaidframeSet {
    pub plan: SetPlan,
    /// The components given, by index (the plan's), with their names; `None` where nothing
    /// could be opened (a config file's `absent`, or a device that cannot be read).
    pub components: Vec<Option<Arc<dyn MemberDevice>>>,
    /// Devices that were left out and why: no label, a damaged one, or one NetBSD would not
    /// take into this set (stale, another set's, a duplicate).
    pub skipped: Vec<String>,
    /// Per metadata device, its column.
    device_columns: Vec<usize>,
    pub(super) meta: RaidframeMetadata,
    /// Per slot: how far its rebuild has come (member sectors), while it is rebuilt.
    pub(super) recovering: Vec<Option<u64>>,
    /// The configuration file's hot spares serving a column, as (spare, column): put there by
    /// a reconstruction (see [`SetPlan::take_used_spares`]). The spare is component
    /// `columns + spare`.
    pub used_spares: Vec<(usize, usize)>,
    /// The column being rebuilt, if the set was opened to rebuild one.
    pub rebuilding: Option<usize>,
}

impl OpenArray {
    /// Find the RAIDframe components among the files or block devices at `paths` and open the
    /// set autoconfiguration picks (the one with `serial`, when given).
    pub fn open_raidframe_paths(
        paths: &[impl AsRef<Path>],
        serial: Option<i32>,
        writable: bool,
    ) -> Result<OpenArray, SetOpenError> {
        let mut devs: Vec<Option<Arc<dyn MemberDevice>>> = Vec::new();
        for p in paths {
            let p = p.as_ref();
            let dev = Member::open(p, writable)
                .map_err(|source| SetOpenError::Open { path: p.display().to_string(), source })?;
            devs.push(Some(Arc::new(dev)));
        }
        OpenArray::open_raidframe(devs, SetSource::Autoconfigure { serial }, writable)
    }

    /// Open the set a raidctl configuration file describes, on the devices its `START disks`
    /// section names. A device that cannot be opened fails its column, as `raidctl -c` does.
    pub fn open_raidframe_config(config: &RaidConfig, writable: bool) -> Result<OpenArray, SetOpenError> {
        OpenArray::open_raidframe_config_as(config, writable, None)
    }

    /// Open the set a configuration file describes, writable, to rebuild `column` onto `onto`
    /// through the engine: its slot is recovering (the array service rebuilds it from the other
    /// columns while the set serves), and nothing is written to its component until it is in
    /// sync (see [`uraid_raidframe::RaidframeMetadata`]). Rebuilding in place a column that is
    /// still live fails it first.
    pub fn open_raidframe_config_rebuilding(
        config: &RaidConfig,
        column: usize,
        onto: RebuildOnto,
    ) -> Result<OpenArray, SetOpenError> {
        OpenArray::open_raidframe_config_as(config, true, Some((column, onto)))
    }

    fn open_raidframe_config_as(
        config: &RaidConfig,
        writable: bool,
        rebuild: Option<(usize, RebuildOnto)>,
    ) -> Result<OpenArray, SetOpenError> {
        let mut devs: Vec<Option<Arc<dyn MemberDevice>>> = Vec::new();
        let mut unopened = Vec::new();
        let spares = config.spares.iter().map(|s| Some(s.as_str()));
        for path in file_components(config).into_iter().chain(spares) {
            devs.push(match path.map(|p| (p, Member::open(Path::new(p), writable))) {
                Some((_, Ok(dev))) => Some(Arc::new(dev)),
                Some((p, Err(e))) => {
                    unopened.push(format!("{p}: {e}"));
                    None
                }
                None => None,
            });
        }
        let mut array = OpenArray::open_raidframe_as(devs, SetSource::ConfigFile(config.clone()), writable, rebuild)?;
        if let Format::Raidframe(set) = &mut array.format {
            set.skipped.splice(0..0, unopened);
        }
        Ok(array)
    }

    /// Open a RAIDframe set of `devs` (for a configuration file, one per column, `None` where
    /// it has none, then one per hot spare).
    pub fn open_raidframe(
        devs: Vec<Option<Arc<dyn MemberDevice>>>,
        source: SetSource,
        writable: bool,
    ) -> Result<OpenArray, SetOpenError> {
        OpenArray::open_raidframe_as(devs, source, writable, None)
    }

    fn open_raidframe_as(
        devs: Vec<Option<Arc<dyn MemberDevice>>>,
        source: SetSource,
        writable: bool,
        rebuild: Option<(usize, RebuildOnto)>,
    ) -> Result<OpenArray, SetOpenError> {
        let mut skipped = Vec::new();
        let mut read: Vec<Option<ReadComponent>> = Vec::new();
        let disks = match &source {
            SetSource::ConfigFile(config) => config.disks.len(),
            SetSource::Autoconfigure { .. } => devs.len(),
        };
        for (i, dev) in devs.iter().enumerate() {
            read.push(match dev {
                Some(dev) => match read_component(dev.as_ref()) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        // Without a label, a device of a configuration file still fails its
                        // column; found by scanning, it is simply not a component; a hot spare
                        // is expected to have none.
                        if i < disks && (e.is_damage() || matches!(source, SetSource::ConfigFile(_))) {
                            skipped.push(e.to_string());
                        }
                        None
                    }
                },
                None => None,
            });
        }
        let mut used_spares = Vec::new();
        let mut plan = match &source {
            SetSource::ConfigFile(config) => {
                let mut plan = SetPlan::from_config_file(config, &read[..disks])?;
                used_spares = plan.take_used_spares(&read[disks..], disks);
                plan
            }
            SetSource::Autoconfigure { serial } => {
                let found: Vec<usize> = (0..read.len()).filter(|&i| read[i].is_some()).collect();
                let components: Vec<ReadComponent> = found.iter().map(|&i| read[i].clone().expect("found")).collect();
                let mut plan = SetPlan::autoconfigure(&components, *serial)?;
                // Back to the indexes of the devices given.
                for c in plan.columns.iter_mut() {
                    if let ColumnStart::Fresh(i) = c {
                        *i = found[*i];
                    }
                }
                for (i, _) in plan.left_out.iter_mut() {
                    *i = found[*i];
                }
                plan
            }
        };
        for (i, why) in &plan.left_out {
            let name = devs[*i].as_ref().map_or_else(|| format!("component {i}"), |d| d.name().to_string());
            skipped.push(match why {
                LeftOut::Stale { column, mod_counter, set_mod_counter } => format!(
                    "{name}: column {column} is stale (mod_counter {mod_counter}, the set's is {set_mod_counter}): left out, not written"
                ),
                LeftOut::Maverick { column } => format!(
                    "{name}: column {column} disagrees with the other labels (serial number or mod_counter): failed, as raidctl -c fails it, not written"
                ),
                LeftOut::Duplicate { column } => {
                    format!("{name}: column {column} is held by another fresh component: left out")
                }
                LeftOut::OtherSet { serial } => format!("{name}: belongs to RAIDframe set {serial}, not this one"),
            });
        }
        // The column to rebuild takes its new component; it counts as missing until rebuilt.
        let mut rebuilding = None;
        if let Some((column, onto)) = rebuild {
            let index = match onto {
                RebuildOnto::InPlace => column,
                RebuildOnto::Spare(k) => disks + k,
            };
            let cannot = |why: String| SetOpenError::CannotRebuild { column, why };
            if column >= plan.columns.len() {
                return Err(cannot("the set has no such column".into()));
            }
            if devs.get(index).and_then(|d| d.as_ref()).is_none() {
                return Err(cannot("its new component cannot be opened".into()));
            }
            match plan.component_of(column) {
                // Its own component still serves it: failed first (and rebuilt in place, or left
                // behind for the spare).
                Some(i) if i == index || (i == column && matches!(source, SetSource::ConfigFile(_))) => {}
                Some(_) => return Err(cannot("a hot spare serves it: copy it back first".into())),
                None => {}
            }
            if plan.columns.iter().enumerate().any(|(c, s)| c != column && *s == ColumnStart::Fresh(index)) {
                return Err(cannot("that hot spare already serves another column".into()));
            }
            let sector = plan.layout.sector_bytes();
            let dev = devs[index].as_ref().expect("checked");
            let had_label = read[index].is_some();
            plan.columns[column] = ColumnStart::Fresh(index);
            plan.left_out.retain(|(i, _)| *i != index);
            rebuilding = Some((column, had_label.then_some(dev.size() / sector)));
        }
        let layout = plan.layout.clone();
        let base = data_offset(layout.sector_bytes());
        let data = layout.member_data_bytes();
        let columns = plan.columns.len();
        let mut device_columns = Vec::new();
        let mut labels = Vec::new();
        for column in 0..columns {
            let Some(i) = plan.component_of(column) else {
                labels.push(None);
                continue;
            };
            let dev = devs[i].as_ref().expect("a fresh component was read from a device");
            if dev.size() < base + data {
                return Err(SetOpenError::ComponentTooSmall {
                    device: dev.name().to_string(),
                    column,
                    size: dev.size(),
                    end: base + data,
                    data,
                });
            }
            device_columns.push(column);
            labels.push(
                read[i].as_ref().map(|c| c.label.clone()).filter(|_| rebuilding.is_none_or(|(r, _)| r != column)),
            );
        }
        if let Some((column, partition)) = rebuilding {
            let set_label = (0..columns).filter(|&c| c != column).find_map(|c| labels[c].clone());
            let Some(set_label) = set_label else {
                return Err(SetOpenError::CannotRebuild { column, why: "no other column to rebuild it from".into() });
            };
            labels[column] = Some(joining_label(&set_label, column, partition));
        }
        let states: Vec<SlotState> = (0..columns)
            .map(|c| match plan.component_of(c) {
                Some(_) if rebuilding.is_some_and(|(r, _)| r == c) => SlotState::Recovering,
                Some(_) => SlotState::InSync,
                None => SlotState::Missing,
            })
            .collect();
        let mut array = Engine::new(Geometry::custom(layout.clone()), states)?;
        let redundant = array.geometry().max_degraded() > 0;
        let unclean = plan.needs_resync();
        let missing = plan.missing_columns().len() + usize::from(rebuilding.is_some());
        // md's rule: a dirty degraded set is not run, since data rebuilt from parity that may
        // be stale could be wrong and a resync cannot fix it. Read-only it is served as it is
        // (what NetBSD configures and reads after a crash in the middle of a reconstruction),
        // and the caller says so.
        if unclean && array.geometry().is_parity() && missing > 0 && writable {
            let level = layout.raid_geometry().level.as_char();
            return Err(SetOpenError::DirtyDegraded { serial: plan.serial_number, level, missing });
        }
        array.set_resync_pending(unclean);
        let meta = RaidframeMetadata::new(RaidframeStart {
            labels,
            device_columns: device_columns.clone(),
            mod_counter: plan.mod_counter,
            sector_bytes: layout.sector_bytes(),
            geometry: *layout.raid_geometry(),
            writable,
            redundant,
            labels_clean: plan.labels_clean,
            needs_resync: unclean,
            parity_map: plan.parity_map.clone(),
            rebuilding: rebuilding.map(|(c, _)| c).into_iter().collect(),
        });
        let recovering = (0..columns).map(|c| rebuilding.is_some_and(|(r, _)| r == c).then_some(0)).collect();
        let set = RaidframeSet {
            recovering,
            plan,
            components: devs,
            skipped,
            device_columns,
            meta,
            used_spares,
            rebuilding: rebuilding.map(|(c, _)| c),
        };
        Ok(OpenArray::with_format(Format::Raidframe(Box::new(set)), array, writable))
    }
}

impl OpenArray {
    /// Fail the component in `column` (`raidctl -f`): it leaves the set, and the next label
    /// update goes to the others only, so the component is stale from then on. Refused when the
    /// set cannot do without it, unless `force`.
    pub fn fail_column(&mut self, column: usize, force: bool) -> Result<(), OpenError> {
        let Format::Raidframe(set) = &mut self.format else {
            return Err(OpenError::Unsupported(format!(
                "failing a column is a RAIDframe operation; {}",
                self.describe()
            )));
        };
        let Some(state) = self.array.slot_states().get(column).copied() else {
            return Err(OpenError::BadMember(format!("column {column}: the set has no such column")));
        };
        if !matches!(state, SlotState::InSync | SlotState::Recovering) {
            return Err(OpenError::BadMember(format!("column {column}: already failed or missing")));
        }
        self.array.set_slot_state(column, SlotState::Faulty, force)?;
        set.recovering[column] = None;
        self.roles_moved();
        Ok(())
    }
}

impl OpenArray {
    /// `raidctl -f` of the component named `name` on the running set (see
    /// [`OpenArray::fail_member`]).
    pub(super) fn fail_component(&mut self, name: &str, force: bool) -> Result<usize, OpenError> {
        let columns = self.array.slot_states().len();
        let Some(column) = (0..columns).find(|&c| self.slot_device_name(c) == Some(name)) else {
            return Err(OpenError::BadMember(format!(
                "{name}: not a component serving this set (its components: {})",
                self.device_names().join(", ")
            )));
        };
        self.fail_column(column, force)?;
        self.record_roles()?;
        Ok(column)
    }

    /// Reconstruct the first failed or missing column onto `dev` while the set runs, as
    /// `raidctl -a DEV` then `raidctl -F` reconstruct onto a hot spare (or `-R` onto a
    /// replacement): the column's slot is recovering (the array service rebuilds it from the
    /// other columns while the set serves), nothing is written to `dev`'s label until it is in
    /// sync, and then its label joins the others'. Returns the column, or `None` when no column
    /// is missing. A device carrying a label of another RAIDframe set is refused: it may hold
    /// someone's data.
    pub fn reconstruct_onto(&mut self, dev: Arc<dyn MemberDevice>) -> Result<Option<usize>, OpenError> {
        if !self.writable {
            return Err(OpenError::ReadOnly);
        }
        let Format::Raidframe(set) = &mut self.format else {
            return Err(OpenError::Unsupported(format!(
                "reconstruction is a RAIDframe operation; {}",
                self.describe()
            )));
        };
        if let Some(column) = set.rebuilding.filter(|&c| self.array.slot_states()[c] == SlotState::Recovering) {
            return Err(OpenError::BadMember(format!(
                "{}: column {column} is being reconstructed already; one reconstruction at a time",
                dev.name()
            )));
        }
        let states = self.array.slot_states();
        let Some(column) = (0..states.len()).find(|&c| states[c].is_vacant()) else {
            return Ok(None);
        };
        let live_name = (0..states.len())
            .filter(|&c| states[c] != SlotState::Faulty && states[c] != SlotState::Missing)
            .find(|&c| set.column_device(c).is_some_and(|d| d.name() == dev.name()));
        if let Some(c) = live_name {
            return Err(OpenError::BadMember(format!("{}: already serves column {c} of this set", dev.name())));
        }
        if let Ok(found) = read_component(dev.as_ref()) {
            let fresh = found.label.serial_number == set.plan.serial_number
                && found.label.mod_counter == set.meta.mod_counter()
                && usize::try_from(found.label.column).is_ok_and(|c| c != column);
            if fresh {
                return Err(OpenError::BadMember(format!(
                    "{}: carries this set's current label for column {}: it is one of the set's components",
                    dev.name(),
                    found.label.column
                )));
            }
            if found.label.serial_number != set.plan.serial_number {
                return Err(OpenError::BadMember(format!(
                    "{}: carries the label of RAIDframe set {} (column {}); it may hold data, so it is not used. Wipe it first if it is free",
                    dev.name(),
                    found.label.serial_number,
                    found.label.column
                )));
            }
        }
        let sector = set.plan.layout.sector_bytes();
        let end = data_offset(sector) + set.plan.layout.member_data_bytes();
        if dev.size() < end {
            return Err(OpenError::BadMember(format!(
                "{}: {} bytes, column {column} needs {end}",
                dev.name(),
                dev.size()
            )));
        }
        let set_label = (0..states.len())
            .filter(|&c| c != column && states[c] == SlotState::InSync)
            .find_map(|c| set.meta.labels()[c].clone())
            .ok_or_else(|| OpenError::BadMember(format!("column {column}: no other column to rebuild it from")))?;
        let label = joining_label(&set_label, column, Some(dev.size() / sector));
        self.array.set_slot_state(column, SlotState::Recovering, false)?;
        set.components.push(Some(dev));
        set.plan.columns[column] = ColumnStart::Fresh(set.components.len() - 1);
        if let Some(device) = set.meta.begin_rebuild(column, label) {
            debug_assert_eq!(device, set.device_columns.len(), "the metadata's devices follow the set's");
            set.device_columns.push(column);
        }
        set.recovering[column] = Some(0);
        set.rebuilding = Some(column);
        Ok(Some(column))
    }
}

impl RaidframeSet {
    /// The set's serial number.
    pub fn serial_number(&self) -> i32 {
        self.plan.serial_number
    }

    /// The labels and parity map as they stand.
    pub fn metadata(&self) -> &RaidframeMetadata {
        &self.meta
    }

    /// The labels a raidctl verb starts from, for the labels NetBSD leaves after it
    /// ([`Session`]): the labels as they stand, at counter `mod_counter` (the set's at
    /// configure for a `uraid raidctl` command; the current one for a set that has been
    /// running), with the parity map fields its configure writes.
    pub fn session(&self, mod_counter: i32, parity_good: bool) -> Session {
        let labels = self.meta.labels().to_vec();
        let map_fields = self.plan.configured_map_fields(labels.iter().flatten().next());
        Session { labels, mod_counter, parity_good, map_fields, spare_served: None }
    }

    fn column_device(&self, column: usize) -> Option<&Arc<dyn MemberDevice>> {
        self.plan.component_of(column).and_then(|i| self.components[i].as_ref())
    }

    pub(super) fn member_targets(&self) -> Vec<Option<MemberTarget>> {
        let base = data_offset(self.plan.layout.sector_bytes());
        let data_bytes = self.plan.layout.member_data_bytes();
        (0..self.plan.columns.len())
            .map(|c| {
                self.column_device(c).map(|dev| MemberTarget { dev: Arc::clone(dev), base, data_bytes, log_area: None })
            })
            .collect()
    }

    pub(super) fn meta_device(&self, idx: usize) -> Option<&Arc<dyn MemberDevice>> {
        self.device_columns.get(idx).and_then(|&c| self.column_device(c))
    }

    pub(super) fn slot_device(&self, slot: usize) -> Option<usize> {
        self.device_columns.iter().position(|&c| c == slot)
    }

    /// "column 1 on DEVICE" (or "column 1 (missing)").
    pub(super) fn slot_member_name(&self, slot: usize) -> String {
        match self.column_device(slot) {
            Some(dev) => format!("column {slot} on {}", dev.name()),
            None => format!("column {slot} (missing)"),
        }
    }

    /// The names of the fresh components, in column order.
    pub(super) fn devices(&self) -> Vec<Arc<dyn MemberDevice>> {
        (0..self.device_columns.len()).filter_map(|i| self.meta_device(i).cloned()).collect()
    }

    pub(super) fn device_names(&self) -> Vec<String> {
        (0..self.device_columns.len()).filter_map(|i| self.meta_device(i).map(|d| d.name().to_string())).collect()
    }

    pub(super) fn device_roles(&self, states: &[SlotState]) -> Vec<DeviceRole> {
        self.device_columns
            .iter()
            .map(|&slot| DeviceRole::Slot {
                slot,
                state: states[slot],
                rebuilt: self.recovering[slot].unwrap_or(0) * uraid_engine::SECTOR_BYTES,
            })
            .collect()
    }

    /// A label write to device `idx` failed: fail its column, if the set can do without it (the
    /// kernel fails a component whose I/O fails while the set survives it).
    pub(super) fn fail_for_metadata(&mut self, array: &mut Engine, idx: usize) -> MetadataFailure {
        let Some(&slot) = self.device_columns.get(idx) else { return MetadataFailure::Refused };
        // Failed whether it is in sync or being reconstructed: a column being reconstructed is
        // written like the others, and taken as already out, its failed label flushes were
        // tried again for ever.
        if !matches!(array.slot_states()[slot], SlotState::InSync | SlotState::Recovering) {
            return MetadataFailure::AlreadyOut;
        }
        let states = array.slot_states().to_vec();
        let alive = |s: usize| states[s] == SlotState::InSync && s != slot;
        if !array.geometry().is_readable(&alive) || array.set_slot_state(slot, SlotState::Faulty, true).is_err() {
            return MetadataFailure::Refused;
        }
        self.recovering[slot] = None;
        MetadataFailure::Failed
    }
}

impl From<SetOpenError> for OpenError {
    fn from(e: SetOpenError) -> OpenError {
        match e {
            SetOpenError::Open { path, source } => OpenError::Open { path, source },
            SetOpenError::Engine(e) => OpenError::Engine(e),
            SetOpenError::DirtyDegraded { missing, .. } => OpenError::DirtyDegraded { missing },
            other => OpenError::BadMember(other.to_string()),
        }
    }
}
