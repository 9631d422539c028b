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
//! The parity map, when the set uses one, is kept as NetBSD keeps it (`rf_paritymap.c`): a
//! region is marked on every live component, and the mark flushed, before the first write to
//! it goes out (`rf_paritymap_begin`, through [`MetaChange::IntentSet`]); it is cleared once no
//! write has touched it for a while and the members were flushed (the cooldown of
//! `rf_paritymap_checkwork`, through [`MetaChange::IntentClear`]); the whole map is written
//! clean with the clean labels (`rf_paritymap_detach` at unconfigure). After a crash only the
//! regions marked are resynced, as `rf_paritymap_rewrite` rewrites only those. A map the kernel
//! would not trust (`rf_paritymap_attach`'s zap) counts as wholly dirty when the set needs a
//! resync, and is replaced by a clean one before the first mark when it does not. The labels'
//! parity map fields are written as `rf_paritymap_attach` writes them at configure (VALID and
//! WASUSED, or VALID and DISABLE, with the agreed tick, cooldown and region count), so the
//! kernel trusts the map uraid wrote. A region covers whole stripes: the same member bytes on
//! every component (`rf_paritymap_init`'s region size, in stripes).
//!
//! Labels and map of one update go out together and are flushed before the update counts as
//! durable; a write to the set waits for that (the engine's driver holds writes until the
//! dirty update is durable).

use bytes::Bytes;
use uraid_engine::metadata::{
    ArrayMetadata, DeviceRole, MetaChange, MetaError, MetaOp, MetaStep, MetaWhat, StepQueue, Ticket, UnixSeconds,
    WriteIntentBits,
};
use uraid_engine::SlotState;
use uraid_raidframe_format::label::{ComponentLabel, DiskStatus, RAID_CLEAN, RAID_DIRTY};
use uraid_raidframe_format::layout::{
    label_area_size, parity_map_area_size, parity_map_offset, ParityMap, LABEL_OFFSET, PARITY_MAP_BYTES,
};
use uraid_raidframe_format::mapping::Geometry as RaidGeometry;
use uraid_raidframe_format::Level;

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
    /// The set's level and geometry, for the parity map's region count and size.
    pub geometry: RaidGeometry,
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
    /// What the live components hold, when known (`None`: a map the kernel would not trust,
    /// to be replaced before it is relied on).
    on_disk: Option<ParityMap>,
    tickms: u32,
    ntick: u32,
    /// The regions as the driver sees them: marked before the writes they cover, cleared once
    /// idle, all dirty while an untrusted map owes a full resync.
    intent: WriteIntentBits,
}

impl MapState {
    /// The map the regions in `intent` make, as written to disk.
    fn as_written(&self) -> ParityMap {
        if self.intent.all_dirty {
            return ParityMap::all_dirty();
        }
        let mut map = ParityMap::clean();
        map.bits.copy_from_slice(&self.intent.bits);
        map
    }
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
    /// Recorded dirty: labels dirty (and, with a map, a map on disk the kernel trusts).
    dirty: bool,
    needs_resync: bool,
    /// `None` for RAID 0 and for a set whose map is disabled.
    map: Option<MapState>,
    /// The labels' parity map fields as the kernel writes them at configure; `None` for RAID 0.
    map_fields: Option<(u32, u32, u32, u32)>,
    roles_changed: bool,
    /// A column came to life since the last update: the map goes to it with its label.
    joined: bool,
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
        let map_fields =
            map_fields_at_configure(&start.parity_map, first, start.geometry.sectors_per_disk, start.sector_bytes);
        let redundant = start.redundant;
        let needs_resync = redundant && start.needs_resync;
        let map = match (start.parity_map, map_fields) {
            (MapStart::InUse { on_disk, tickms, ntick, .. }, Some((_, _, _, regions))) => {
                let on_disk = on_disk.map(|m| *m);
                let chunk_bytes = region_bytes(&start.geometry, regions, start.sector_bytes);
                let intent = WriteIntentBits {
                    chunk_bytes,
                    chunks: u64::from(regions),
                    bits: on_disk.as_ref().map_or(vec![0; PARITY_MAP_BYTES], |m| m.bits.to_vec()),
                    // An untrusted map tells nothing: everything, if the labels owe a resync
                    // (the kernel's invalidate), nothing otherwise (its forceclean).
                    all_dirty: on_disk.is_none() && needs_resync,
                    events_cleared: 0,
                };
                Some(MapState { on_disk, tickms, ntick, intent })
            }
            _ => None,
        };
        // Labels found dirty stand for writes already recorded, once the map on disk can be
        // relied on (an untrusted one is replaced with the first dirty record).
        let dirty = redundant && !start.labels_clean && map.as_ref().is_none_or(|m| m.on_disk.is_some());
        RaidframeMetadata {
            labels: start.labels,
            live,
            rebuilding,
            column_device,
            device_columns: start.device_columns,
            mod_counter: start.mod_counter,
            sector_bytes: start.sector_bytes,
            writable: start.writable,
            redundant,
            labels_clean: start.labels_clean,
            dirty,
            needs_resync,
            map,
            map_fields,
            roles_changed: false,
            joined: false,
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
                    self.joined |= self.live[column];
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
        // A column that came to life takes the map with its label, as the others hold it.
        let map = map.or_else(|| if self.joined { self.map.as_ref().and_then(|m| m.on_disk.clone()) } else { None });
        self.joined = false;
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

    /// Queue the parity map as the regions now stand to every live column, then a flush of
    /// each (`rf_paritymap_write_locked`: a mark is on disk before the writes it covers).
    /// The labels are not touched.
    fn write_map(&mut self) -> Result<Option<Ticket>, MetaError> {
        let Some(state) = self.map.as_mut() else { return Ok(None) };
        let map = state.as_written();
        let targets: Vec<usize> =
            (0..self.live.len()).filter(|&c| self.live[c]).filter_map(|c| self.column_device[c]).collect();
        if targets.is_empty() {
            return Ok(None);
        }
        let data = Bytes::from(map.to_area(parity_map_area_size(self.sector_bytes) as usize));
        let offset = parity_map_offset(self.sector_bytes);
        let writes = targets
            .iter()
            .map(|&device| MetaOp::Write { device, offset, data: data.clone(), what: MetaWhat::Bitmap })
            .collect();
        let flushes = targets.iter().map(|&device| MetaOp::Flush { device }).collect();
        state.on_disk = Some(map);
        Ok(self.steps.push(vec![MetaStep { ops: writes, completes: None }, MetaStep { ops: flushes, completes: None }]))
    }

    /// Mark (`dirty`) or clear `regions` in memory; whether the map changed, or was never
    /// written since the set was opened with a map the kernel would not trust.
    fn mark_regions(&mut self, regions: std::ops::Range<u64>, dirty: bool) -> bool {
        let Some(state) = self.map.as_mut() else { return false };
        if state.intent.all_dirty {
            // Every region counts as dirty until the full resync is recorded clean.
            return false;
        }
        let end = regions.end.min(state.intent.chunks);
        let mut changed = false;
        for region in regions.start..end {
            if state.intent.is_dirty(region) != dirty {
                state.intent.set(region, dirty);
                changed = true;
            }
        }
        changed || state.on_disk.is_none()
    }

    /// The map to write beside the dirty labels: an untrusted map is replaced (wholly dirty if
    /// a full resync is owed, else as the regions stand), since the labels written now tell the
    /// kernel to trust it; a trusted one is already right.
    fn map_for_dirty_labels(&self) -> Option<ParityMap> {
        let state = self.map.as_ref()?;
        let want = state.as_written();
        (state.on_disk.as_ref() != Some(&want) && (state.on_disk.is_none() || state.intent.all_dirty)).then_some(want)
    }

    /// Every region clean in memory, and the clean map to write unless the components hold it.
    fn clean_map(&mut self) -> Option<ParityMap> {
        let state = self.map.as_mut()?;
        state.intent.all_dirty = false;
        state.intent.bits.fill(0);
        let want = ParityMap::clean();
        (state.on_disk.as_ref() != Some(&want)).then_some(want)
    }

    /// Column `column` is being rebuilt onto a new component, whose label once in sync is
    /// `label`: nothing is written to it until then (see the module documentation). Returns the
    /// driver device index the new component takes, when the column had none; otherwise the
    /// column's device keeps its index and now stands for the new component.
    pub fn begin_rebuild(&mut self, column: usize, label: ComponentLabel) -> Option<usize> {
        self.labels[column] = Some(label);
        self.live[column] = false;
        self.rebuilding[column] = true;
        if self.column_device[column].is_some() {
            return None;
        }
        let device = self.device_columns.len();
        self.device_columns.push(column);
        self.column_device[column] = Some(device);
        Some(device)
    }

    /// The parity map's region count, tick and cooldown as the labels record them (`None`
    /// when the set keeps no map).
    pub fn parity_map_params(&self) -> Option<(u32, u32, u32)> {
        self.map.as_ref().map(|m| (m.intent.chunks as u32, m.tickms, m.ntick))
    }
}

/// Bytes of one parity map region as the driver counts intent regions
/// ([`WriteIntentBits::chunk_bytes`]). `rf_paritymap_init` gives each region the stripes divided
/// over the regions, rounded up; a stripe is one stripe unit of every component, so a region is
/// the same member bytes on each. RAID 4 and 5 count them per member, as parity layouts do;
/// RAID 1 counts them in the array's bytes, as mirrors do (its stripe holds one unit per pair).
fn region_bytes(geometry: &RaidGeometry, regions: u32, sector_bytes: u64) -> u64 {
    let stripes = geometry.stripe_units_per_disk().div_ceil(u64::from(regions.max(1)));
    let units = if geometry.level == Level::Raid1 { geometry.data_columns() } else { 1 };
    stripes * units * geometry.sect_per_su * sector_bytes
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
                let map = self.map_for_dirty_labels();
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
                // Idle and flushed: no region holds a write in flight (as the kernel's map is
                // clean once detached at unconfigure).
                let map = self.clean_map();
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
            MetaChange::IntentSet(regions) => {
                if !self.mark_regions(regions, true) {
                    return Ok(None);
                }
                self.write_map()
            }
            MetaChange::IntentClear(regions) => {
                if !self.mark_regions(regions, false) {
                    return Ok(None);
                }
                self.write_map()
            }
            // RAIDframe's labels have nowhere to keep a resync's progress: a parity rewrite cut
            // short starts over (over the regions the map still marks).
            MetaChange::ResyncCheckpoint { .. } => Ok(None),
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

    fn write_intent(&self) -> Option<&WriteIntentBits> {
        self.map.as_ref().map(|m| &m.intent)
    }
}

#[cfg(test)]
mod tests;
