//! A running RAIDframe set's metadata: its component labels and its parity map, updated as
//! NetBSD's driver updates them (`rf_netbsdkintf.c`), as ordered writes and flushes behind the
//! engine's [`ArrayMetadata`].
//!
//! Every label write carries the set's mod_counter, bumped once per update as the kernel bumps
//! `raidPtr->mod_counter` before writing the labels (`raidflush_component_label` also sets
//! `parity_map_modcount` to it), and goes only to the columns that are still live: the kernel
//! never touches a failed component (`RF_DEAD_DISK`), so a component that failed keeps its old
//! mod_counter and the next configuration finds it stale.
//!
//! - **Dirty**, before the first write of a set with redundancy: `rf_markalldirty` (the
//!   kernel's first open): mod_counter + 1, every live label `clean = 0`.
//! - **Clean**, once idle and flushed (and resynced, if found dirty): the last close's
//!   `rf_update_component_labels(RF_FINAL_COMPONENT_UPDATE)`: mod_counter + 1, every live label
//!   status optimal and `clean = 1`.
//! - **A component failed** (or was left out): `rf_FailDisk`'s
//!   `rf_update_component_labels(RF_NORMAL_COMPONENT_UPDATE)`: mod_counter + 1, the live labels
//!   rewritten (status optimal, the clean flag as it stands). No label names the failed column:
//!   the survivors' newer mod_counter is the record.
//! - **A column rebuilt** (reconstruction in place or onto a hot spare): nothing is written to
//!   the component while it is rebuilt (the kernel keeps its status `reconstructing` in memory
//!   only), so a rebuild cut short leaves it blank or stale and the next configuration does not
//!   trust it. Once it is in sync, the next update writes its label (the set's, its own column)
//!   with the others': mod_counter + 1, status optimal.
//!
//! The parity map, when the set uses one, is kept coarsely: the whole map is written dirty with
//! the dirty labels, and clean with the clean labels. NetBSD marks only the regions a write
//! touches and clears them after a cooldown (`rf_paritymap_begin`, `rf_paritymap_checkwork`);
//! marking every region is what the kernel itself does to a map it cannot trust, and it keeps
//! the one rule that matters after a crash: no write reaches a region the map on disk calls
//! clean. The labels' parity map fields are written as `rf_paritymap_attach` writes them at
//! configure (VALID and WASUSED, or VALID and DISABLE, with the agreed tick, cooldown and
//! region count), so the kernel trusts the map uraid wrote.
//!
//! Labels and map of one update go out together and are flushed before the update counts as
//! durable; a write to the set waits for that (the engine's driver holds writes until the
//! dirty update is durable).

use bytes::Bytes;
use uraid_engine::metadata::{
    ArrayMetadata, DeviceRole, MetaChange, MetaError, MetaOp, MetaStep, MetaWhat, StepQueue, Ticket, UnixSeconds,
};
use uraid_engine::SlotState;
use uraid_raidframe_format::label::{ComponentLabel, DiskStatus, RAID_CLEAN, RAID_DIRTY};
use uraid_raidframe_format::layout::{
    label_area_size, parity_map_area_size, parity_map_offset, ParityMap, LABEL_OFFSET,
};

use crate::set_plan::{map_fields_at_configure, MapStart};

/// What a running set's metadata starts from.
#[derive(Debug, Clone)]
pub struct RaidframeStart {
    /// Per column, the label of the fresh component serving it, as read (`None`: missing).
    pub labels: Vec<Option<ComponentLabel>>,
    /// Per driver device, the column it serves (the fresh components, one device each, and
    /// the components being rebuilt).
    pub device_columns: Vec<usize>,
    /// Columns being rebuilt onto their device: their label in `labels` is the one they get
    /// once in sync; until then nothing is written to them.
    pub rebuilding: Vec<usize>,
    /// The set's mod_counter, as its fresh labels carry it.
    pub mod_counter: i32,
    /// Bytes per sector of the components.
    pub sector_bytes: u64,
    /// Usable sectors per component (`numBlocks`), for the default region count.
    pub sectors_per_disk: u64,
    /// Opened for writing.
    pub writable: bool,
    /// RAID 1, 4 or 5: recorded dirty around writes.
    pub redundant: bool,
    /// Every fresh label says clean.
    pub labels_clean: bool,
    /// Parity (or the mirror) may disagree with the data: a resync is owed before the set is
    /// recorded clean.
    pub needs_resync: bool,
    /// The parity map as found.
    pub parity_map: MapStart,
}

/// The parity map while the set runs.
#[derive(Debug, Clone)]
struct MapState {
    /// What the live components hold, when known.
    on_disk: Option<ParityMap>,
    regions: u32,
    tickms: u32,
    ntick: u32,
}

/// The set's labels and parity map as NetBSD keeps them; see the module documentation.
#[derive(Debug)]
pub struct RaidframeMetadata {
    /// Per column, its label as last written (or read).
    labels: Vec<Option<ComponentLabel>>,
    /// Per column, whether it is live (`rf_ds_optimal`): its label takes updates.
    live: Vec<bool>,
    /// Per column, whether it is being rebuilt: it becomes live once its slot is in sync.
    rebuilding: Vec<bool>,
    /// Per column, its driver device.
    column_device: Vec<Option<usize>>,
    device_columns: Vec<usize>,
    mod_counter: i32,
    sector_bytes: u64,
    writable: bool,
    redundant: bool,
    /// The `clean` word the live labels carry.
    labels_clean: bool,
    /// Recorded dirty: labels dirty and, with a map, every region dirty on disk.
    dirty: bool,
    needs_resync: bool,
    /// `None` for RAID 0 and for a set whose map is disabled.
    map: Option<MapState>,
    /// The labels' parity map fields as the kernel writes them at configure; `None` for RAID 0.
    map_fields: Option<(u32, u32, u32, u32)>,
    roles_changed: bool,
    /// A write was let through (RAID 0 records nothing else before writes).
    writes_seen: bool,
    steps: StepQueue,
}

impl RaidframeMetadata {
    pub fn new(start: RaidframeStart) -> RaidframeMetadata {
        let columns = start.labels.len();
        let mut column_device = vec![None; columns];
        for (device, &column) in start.device_columns.iter().enumerate() {
            column_device[column] = Some(device);
        }
        let rebuilding: Vec<bool> = (0..columns).map(|c| start.rebuilding.contains(&c)).collect();
        let live =
            (0..columns).map(|c| column_device[c].is_some() && start.labels[c].is_some() && !rebuilding[c]).collect();
        let first = start.labels.iter().flatten().next();
        let map_fields = map_fields_at_configure(&start.parity_map, first, start.sectors_per_disk, start.sector_bytes);
        let map = match (start.parity_map, map_fields) {
            (MapStart::InUse { on_disk, tickms, ntick, .. }, Some((_, _, _, regions))) => {
                Some(MapState { on_disk: on_disk.map(|m| *m), regions, tickms, ntick })
            }
            _ => None,
        };
        let map_all_dirty = map.as_ref().is_none_or(|m| m.on_disk.as_ref() == Some(&ParityMap::all_dirty()));
        RaidframeMetadata {
            labels: start.labels,
            live,
            rebuilding,
            column_device,
            device_columns: start.device_columns,
            mod_counter: start.mod_counter,
            sector_bytes: start.sector_bytes,
            writable: start.writable,
            redundant: start.redundant,
            labels_clean: start.labels_clean,
            dirty: start.redundant && !start.labels_clean && map_all_dirty,
            needs_resync: start.redundant && start.needs_resync,
            map,
            map_fields,
            roles_changed: false,
            writes_seen: false,
            steps: StepQueue::new(),
        }
    }

    /// The set's mod_counter as last written.
    pub fn mod_counter(&self) -> i32 {
        self.mod_counter
    }

    /// Per column, its label as last written (or read); `None` for a missing column.
    pub fn labels(&self) -> &[Option<ComponentLabel>] {
        &self.labels
    }

    /// Per column, whether it still takes label updates.
    pub fn live_columns(&self) -> &[bool] {
        &self.live
    }

    /// Why no more metadata can be written, once a write failed with no component to leave out.
    pub fn failed(&self) -> Option<&MetaError> {
        self.steps.failed()
    }

    /// The newest update recorded, if any.
    pub fn newest(&self) -> Option<Ticket> {
        self.steps.newest()
    }

    /// Columns live from now on: those whose slot is in sync (a component failed, left out or
    /// being rebuilt is not `rf_ds_optimal`, and the kernel writes no label to it). A column
    /// being rebuilt comes to life once in sync; one that failed never does.
    fn take_roles(&mut self, devices: &[DeviceRole]) {
        for (device, role) in devices.iter().enumerate() {
            let column = self.device_columns[device];
            let in_sync = matches!(role, DeviceRole::Slot { slot, state: SlotState::InSync, .. } if *slot == column);
            let rebuilding =
                matches!(role, DeviceRole::Slot { slot, state: SlotState::Recovering, .. } if *slot == column);
            if self.rebuilding[column] {
                if in_sync {
                    self.rebuilding[column] = false;
                    self.live[column] = self.labels[column].is_some();
                } else if !rebuilding {
                    // The rebuild target failed: it never joins.
                    self.rebuilding[column] = false;
                }
                continue;
            }
            self.live[column] &= in_sync;
        }
    }

    /// Queue a label update to every live column (mod_counter + 1, status optimal, `clean` as
    /// given), with `map` written beside the labels when given; then a flush of each.
    fn write_labels(&mut self, clean: bool, map: Option<ParityMap>) -> Result<Option<Ticket>, MetaError> {
        let targets: Vec<(usize, usize)> = (0..self.live.len())
            .filter(|&c| self.live[c])
            .filter_map(|c| self.column_device[c].map(|d| (c, d)))
            .collect();
        if targets.is_empty() {
            // Every component failed: the set is lost, and there is nowhere to record anything
            // (md and gvinum likewise write nothing then). Asking again must not fail forever.
            self.labels_clean = clean;
            self.roles_changed = false;
            return Ok(None);
        }
        let mod_counter = self
            .mod_counter
            .checked_add(1)
            .ok_or_else(|| MetaError::Format("the set's mod_counter cannot grow past 2^31 - 1".into()))?;
        let label_area = label_area_size(self.sector_bytes) as usize;
        let map_bytes = map.as_ref().map(|m| Bytes::from(m.to_area(parity_map_area_size(self.sector_bytes) as usize)));
        let mut writes = Vec::new();
        for &(column, device) in &targets {
            let label = self.labels[column].as_mut().expect("a live column has a label");
            label.mod_counter = mod_counter;
            label.parity_map_modcount = mod_counter;
            label.status = DiskStatus::Optimal.raw();
            label.clean = if clean { RAID_CLEAN } else { RAID_DIRTY };
            if let Some((flags, tickms, ntick, regions)) = self.map_fields {
                label.parity_map_flags = flags;
                label.parity_map_tickms = tickms;
                label.parity_map_ntick = ntick;
                label.parity_map_regions = regions;
            }
            if let Some(data) = &map_bytes {
                let offset = parity_map_offset(self.sector_bytes);
                writes.push(MetaOp::Write { device, offset, data: data.clone(), what: MetaWhat::Bitmap });
            }
            let data = Bytes::from(label.to_area(label_area));
            writes.push(MetaOp::Write { device, offset: LABEL_OFFSET, data, what: MetaWhat::Label });
        }
        let flushes = targets.iter().map(|&(_, device)| MetaOp::Flush { device }).collect();
        let ticket = self
            .steps
            .push(vec![MetaStep { ops: writes, completes: None }, MetaStep { ops: flushes, completes: None }]);
        self.mod_counter = mod_counter;
        self.labels_clean = clean;
        if let (Some(state), Some(m)) = (self.map.as_mut(), map) {
            state.on_disk = Some(m);
        }
        self.roles_changed = false;
        Ok(ticket)
    }

    /// The map to write with an update that leaves every region `dirty` (or clean), unless the
    /// components hold it already; `None` without a map.
    fn map_to_write(&self, dirty: bool) -> Option<ParityMap> {
        let state = self.map.as_ref()?;
        let want = if dirty { ParityMap::all_dirty() } else { ParityMap::clean() };
        (state.on_disk.as_ref() != Some(&want)).then_some(want)
    }

    /// The parity map's region count, tick and cooldown as the labels record them (`None`
    /// when the set keeps no map).
    pub fn parity_map_params(&self) -> Option<(u32, u32, u32)> {
        self.map.as_ref().map(|m| (m.regions, m.tickms, m.ntick))
    }
}

impl ArrayMetadata for RaidframeMetadata {
    fn record(
        &mut self,
        change: MetaChange,
        devices: &[DeviceRole],
        _now: UnixSeconds,
    ) -> Result<Option<Ticket>, MetaError> {
        self.steps.admit(self.writable, devices.len(), self.device_columns.len())?;
        match change {
            MetaChange::Dirty => {
                if self.writes_recorded() {
                    return Ok(None);
                }
                self.take_roles(devices);
                self.writes_seen = true;
                if !self.redundant {
                    // RAID 0 has nothing a crash could leave disagreeing; only a membership
                    // change is written before its writes.
                    if !self.roles_changed {
                        return Ok(None);
                    }
                    let clean = self.labels_clean;
                    return self.write_labels(clean, None);
                }
                let map = self.map_to_write(true);
                let ticket = self.write_labels(false, map)?;
                self.dirty = true;
                Ok(ticket)
            }
            MetaChange::Clean => {
                if self.needs_resync {
                    // Still owed its resync: only membership changes are written, still dirty.
                    if !self.roles_changed {
                        return Ok(None);
                    }
                    self.take_roles(devices);
                    let clean = self.labels_clean;
                    return self.write_labels(clean, None);
                }
                if !self.dirty && !self.roles_changed {
                    return Ok(None);
                }
                self.take_roles(devices);
                let map = self.map_to_write(false);
                let ticket = self.write_labels(true, map)?;
                self.dirty = false;
                Ok(ticket)
            }
            MetaChange::Roles => {
                self.take_roles(devices);
                let clean = self.labels_clean;
                self.write_labels(clean, None)
            }
            MetaChange::ResyncDone => {
                // Written clean by the next `Clean` (the set stays recorded dirty until then).
                self.needs_resync = false;
                Ok(None)
            }
            // The map is kept whole (see the module documentation), and RAIDframe's labels have
            // nowhere to keep a resync's progress: a parity rewrite cut short starts over.
            MetaChange::IntentSet(_) | MetaChange::IntentClear(_) | MetaChange::ResyncCheckpoint { .. } => Ok(None),
        }
    }

    fn next_step(&mut self) -> Option<MetaStep> {
        self.steps.next_step()
    }

    fn step_done(&mut self, result: Result<(), MetaError>) {
        self.steps.step_done(result);
    }

    fn membership_changed(&mut self) {
        self.roles_changed = true;
    }

    fn step_failed_on(&mut self, device: usize) {
        // As the kernel stops writing a component it has failed: this update and every later
        // one go to the other columns.
        let column = self.device_columns[device];
        self.live[column] = false;
        self.steps.without(|op| op.device() == device);
        self.roles_changed = true;
    }

    fn durable(&self, ticket: Ticket) -> bool {
        self.steps.durable(ticket)
    }

    fn is_dirty(&self) -> bool {
        self.dirty
    }

    fn writes_recorded(&self) -> bool {
        self.dirty || (self.writes_seen && !self.redundant)
    }

    fn needs_resync(&self) -> bool {
        self.needs_resync
    }
}

#[cfg(test)]
mod tests;
