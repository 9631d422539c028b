//! A running gvinum volume's metadata: subdisk, plex and volume states, recorded as gvinum
//! records them, by saving the whole configuration to every up drive (`gv_save_config`), as
//! ordered writes and flushes behind the engine's [`ArrayMetadata`].
//!
//! What is recorded, and when:
//!
//! - **Membership.** A subdisk whose member fails, or falls behind (its drive gone, a rebuild
//!   not finished), is recorded `stale`: its contents are out of date, and gvinum's `start`, or
//!   uraid when it next runs the volume writable, revives it. A subdisk whose drive was not
//!   found is `down`, as the kernel has it (`gv_update_sd_state`). Plex and volume states
//!   follow from their subdisks by the kernel's rules (`gv_update_plex_state`,
//!   `gv_update_vol_state`).
//! - **Clean and dirty.** gvinum keeps no clean flag: after a crash FreeBSD runs a mirrored
//!   volume whose plexes may disagree wherever a write was cut short, and a raid5 plex whose
//!   parity may disagree with its data. gvinum's configuration has no state for either (and
//!   rejects any keyword it does not know), so uraid records a volume with redundancy dirty in
//!   the one place FreeBSD does not look: the save before its first write carries the unclean
//!   mark in its time stamp (`Timeval::save_stamp`), and the save once it is idle and flushed
//!   does not. Found marked, the volume owes a resync (a mirror's plexes made alike, a raid5
//!   plex's parity rewritten from its data) before it is saved clean; a raid5 plex found marked
//!   with a subdisk not up is refused (the write hole), a mirror runs on its whole plexes. (An
//!   earlier scheme saved every plex but the first stale while dirty: a crash after the first
//!   plex's drives died then left no plex up, though the others held every write.) A volume of
//!   one concat or striped plex has nothing a crash could leave disagreeing and is never
//!   recorded dirty. Before its first write every volume saves its states if they changed
//!   since they were read (a subdisk whose drive was not found is saved down), so that the
//!   subdisk, which misses the writes, is not read as up once its drive is back.
//!
//! A save writes, on every up drive, configuration copy 2, then copy 1, then the header with
//! the save's time, each group flushed before the next starts. gvinum writes the same bytes
//! header first, without flushes; the order here means a crash inside a save leaves every
//! drive with a configuration that reads whole: the header, which says how new the drive's
//! configuration is, moves on only once both copies hold the new text (the kernel reads copy
//! 1; a copy torn mid-write is caught by the other).

use bytes::Bytes;
use uraid_engine::metadata::{
    ArrayMetadata, DeviceRole, MetaChange, MetaError, MetaOp, MetaStep, MetaWhat, StepQueue, Ticket, UnixSeconds,
};
use uraid_engine::SlotState;
use uraid_vinum_format::drive_layout::{config_area_bytes, CONFIG_LEN, CONFIG_OFFSET};
use uraid_vinum_format::header::HEADER_OFFSET;
use uraid_vinum_format::placement::{plex_state, volume_state};
use uraid_vinum_format::{format_config, DriveHeader, SubdiskState, Timeval, VinumConfig};

/// A drive the configuration is saved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaveDrive {
    /// Its header as read (the save keeps its name, host name, birth and size).
    pub header: DriveHeader,
    /// Whether saves still go to it: a drive whose metadata write failed is left out, as
    /// `gv_save_config` leaves a drive that is not up.
    pub up: bool,
}

/// What a running volume's metadata starts from.
#[derive(Debug, Clone)]
pub struct VinumStart {
    /// The whole configuration, every volume, plex and subdisk the drives hold, in the kernel's
    /// list order (the order a save writes), with the states the volume starts with.
    pub config: VinumConfig,
    /// The configuration as the drives hold it: a save that would write the same text is not
    /// made.
    pub on_disk: VinumConfig,
    /// Per slot of the volume's layout, its subdisk's name.
    pub slot_subdisks: Vec<String>,
    /// The drives found, in the kernel's list order: every one of them gets every save.
    pub drives: Vec<SaveDrive>,
    /// The driver's devices, in its order, as drive indexes. Each device is one drive; a drive
    /// may appear more than once (once per subdisk of the volume on it). Ops for a drive go to
    /// its first device.
    pub devices: Vec<usize>,
    /// Opened for writing.
    pub writable: bool,
    /// The volume keeps redundancy (several plexes, or a raid5 plex): it is recorded dirty by
    /// the unclean mark in the saves' time stamps (`Timeval::save_stamp`).
    pub redundant: bool,
    /// The newest drive's stamp carries the unclean mark: a volume with redundancy owes a
    /// resync before it is saved clean.
    pub unclean: bool,
}

/// The volume's metadata as gvinum keeps it; see the module documentation.
#[derive(Debug)]
pub struct VinumMetadata {
    config: VinumConfig,
    slot_subdisks: Vec<String>,
    drives: Vec<SaveDrive>,
    devices: Vec<usize>,
    writable: bool,
    redundant: bool,
    /// Recorded dirty: saved with the unclean mark.
    dirty: bool,
    /// A resync is owed before the volume may be saved clean (found with the unclean mark).
    needs_resync: bool,
    /// Whether the last save (or the drives as read) carried the unclean mark.
    saved_unclean: bool,
    /// Membership changed since the last save.
    roles_changed: bool,
    /// A write was let through: a volume of one plex has recorded what its subdisks are (it
    /// records nothing else before writes).
    writes_seen: bool,
    /// The configuration text the drives hold, as read or as the last save wrote it.
    last_saved: Option<String>,
    steps: StepQueue,
}

impl VinumMetadata {
    pub fn new(start: VinumStart) -> VinumMetadata {
        VinumMetadata {
            config: start.config,
            slot_subdisks: start.slot_subdisks,
            drives: start.drives,
            devices: start.devices,
            writable: start.writable,
            redundant: start.redundant,
            dirty: start.redundant && start.unclean,
            needs_resync: start.redundant && start.unclean,
            saved_unclean: start.unclean,
            roles_changed: false,
            writes_seen: false,
            last_saved: format_config(&start.on_disk).ok(),
            steps: StepQueue::new(),
        }
    }

    /// The configuration as it stands in memory, states as the running volume has them.
    pub fn config(&self) -> &VinumConfig {
        &self.config
    }

    /// The drives saves go to, with their headers as last written.
    pub fn drives(&self) -> &[SaveDrive] {
        &self.drives
    }

    /// Why no more metadata can be written, once a write failed with no drive to leave out.
    pub fn failed(&self) -> Option<&MetaError> {
        self.steps.failed()
    }

    /// The newest update recorded, if any.
    pub fn newest(&self) -> Option<Ticket> {
        self.steps.newest()
    }

    /// Set each of the volume's subdisks to the state its slot has now, then the plexes and
    /// the volume by the kernel's rules.
    fn take_roles(&mut self, devices: &[DeviceRole]) {
        for role in devices {
            let DeviceRole::Slot { slot, state, .. } = *role else { continue };
            let sd_state = match state {
                SlotState::InSync => SubdiskState::Up,
                // Behind, failed or being rebuilt: its contents are out of date until revived.
                SlotState::Recovering | SlotState::Faulty | SlotState::Missing => SubdiskState::Stale,
            };
            let name = &self.slot_subdisks[slot];
            if let Some(sd) = self.config.subdisks.iter_mut().find(|s| &s.name == name) {
                sd.state = sd_state;
            }
        }
        // A slot that lost its device entirely (the driver lists it as out) fell behind too.
        let held: Vec<usize> = devices
            .iter()
            .filter_map(|r| match r {
                DeviceRole::Slot { slot, .. } => Some(*slot),
                _ => None,
            })
            .collect();
        for (slot, name) in self.slot_subdisks.iter().enumerate() {
            if held.contains(&slot) {
                continue;
            }
            if let Some(sd) = self.config.subdisks.iter_mut().find(|s| &s.name == name) {
                if sd.state == SubdiskState::Up {
                    sd.state = SubdiskState::Stale;
                }
            }
        }
        refresh_states(&mut self.config);
    }

    /// Queue a save of the configuration to every up drive, unless it would write the text the
    /// drives already hold from the last save. Returns its ticket.
    fn save(&mut self, now: UnixSeconds) -> Result<Option<Ticket>, MetaError> {
        let text = format_config(&self.config).map_err(|e| MetaError::Format(format!("configuration save: {e}")))?;
        let unclean = self.dirty;
        if self.last_saved.as_deref() == Some(text.as_str()) && self.saved_unclean == unclean {
            return Ok(None);
        }
        let area =
            Bytes::from(config_area_bytes(&text).map_err(|e| MetaError::Format(format!("configuration save: {e}")))?);
        // Which drive's configuration wins is decided by `last_update` alone: a save must be
        // newer than anything on the drives, even with the clock in whole seconds and a drive
        // saved earlier in the same second (gvinum's own saves carry microseconds).
        let newest = self.drives.iter().map(|d| d.header.label.last_update).max().unwrap_or_default();
        let stamp = Timeval::save_stamp(Timeval::new(now, 0), newest, unclean);
        let targets: Vec<(usize, usize)> = (0..self.drives.len())
            .filter(|&d| self.drives[d].up)
            .filter_map(|d| self.devices.iter().position(|&x| x == d).map(|device| (d, device)))
            .collect();
        if targets.is_empty() {
            return Err(MetaError::Format("no up drive is left to save the configuration to".into()));
        }
        let flushes =
            || MetaStep { ops: targets.iter().map(|&(_, device)| MetaOp::Flush { device }).collect(), completes: None };
        let writes = |offset: u64, data: &Bytes| MetaStep {
            ops: targets
                .iter()
                .map(|&(_, device)| MetaOp::Write { device, offset, data: data.clone(), what: MetaWhat::Label })
                .collect(),
            completes: None,
        };
        let mut headers = Vec::new();
        for &(d, device) in &targets {
            let header = self.drives[d].header.saved_at(stamp);
            let bytes =
                header.to_bytes().map_err(|e| MetaError::Format(format!("drive {}: {e}", header.label.name)))?;
            headers.push(MetaOp::Write {
                device,
                offset: HEADER_OFFSET,
                data: Bytes::copy_from_slice(&bytes),
                what: MetaWhat::Label,
            });
            self.drives[d].header = header;
        }
        let ticket = self.steps.push(vec![
            writes(CONFIG_OFFSET + CONFIG_LEN as u64, &area),
            flushes(),
            writes(CONFIG_OFFSET, &area),
            flushes(),
            MetaStep { ops: headers, completes: None },
            flushes(),
        ]);
        self.last_saved = Some(text);
        self.saved_unclean = unclean;
        self.roles_changed = false;
        Ok(ticket)
    }
}

/// Every plex's and volume's state from their subdisks', by the kernel's rules.
pub fn refresh_states(config: &mut VinumConfig) {
    for p in 0..config.plexes.len() {
        let name = config.plexes[p].name.clone();
        let states: Vec<SubdiskState> = config.subdisks_of(&name).iter().map(|s| s.state).collect();
        let grows = config.plexes[p].state == uraid_vinum_format::PlexState::Growable;
        config.plexes[p].state = plex_state(config.plexes[p].organization, &states, grows);
    }
    for v in 0..config.volumes.len() {
        let name = config.volumes[v].name.clone();
        let plexes: Vec<_> = config.plexes_of(&name).iter().map(|p| (p.organization, p.state)).collect();
        config.volumes[v].state = volume_state(&plexes);
    }
}

impl ArrayMetadata for VinumMetadata {
    fn record(
        &mut self,
        change: MetaChange,
        devices: &[DeviceRole],
        now: UnixSeconds,
    ) -> Result<Option<Ticket>, MetaError> {
        self.steps.admit(self.writable, devices.len(), self.devices.len())?;
        match change {
            MetaChange::Dirty => {
                if self.writes_recorded() {
                    return Ok(None);
                }
                // Whatever else, the states the volume runs with are on every drive before it
                // is written: a subdisk left out (its drive not found) must not be read again
                // as up once its drive is back.
                self.take_roles(devices);
                self.writes_seen = true;
                self.dirty = self.redundant;
                self.save(now)
            }
            MetaChange::Clean => {
                if self.needs_resync {
                    // Still owed its resync: only membership changes are saved, still marked.
                    if !self.roles_changed {
                        return Ok(None);
                    }
                    self.take_roles(devices);
                    return self.save(now);
                }
                if !self.dirty && !self.roles_changed {
                    return Ok(None);
                }
                self.take_roles(devices);
                self.dirty = false;
                self.save(now)
            }
            MetaChange::Roles => {
                self.take_roles(devices);
                self.save(now)
            }
            MetaChange::ResyncDone => {
                // Saved clean by the next `Clean` (the volume stays recorded dirty until then).
                self.needs_resync = false;
                Ok(None)
            }
            // gvinum's configuration has nowhere to keep a resync's progress: one cut short
            // starts over.
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
        // As `gv_save_config` skips a drive that is not up: the drive is left out of this save
        // and every later one; the other drives still get every step.
        let drive = self.devices[device];
        self.drives[drive].up = false;
        let devices = &self.devices;
        self.steps.without(|op| devices[op.device()] == drive);
        self.roles_changed = true;
    }

    fn durable(&self, ticket: Ticket) -> bool {
        self.steps.durable(ticket)
    }

    fn is_dirty(&self) -> bool {
        self.dirty
    }

    fn writes_recorded(&self) -> bool {
        // A volume of one concat or striped plex is never recorded dirty: once its states are
        // saved, its writes wait for nothing.
        self.dirty || (self.writes_seen && !self.redundant)
    }

    fn needs_resync(&self) -> bool {
        // Found with the unclean mark: a mirror's plexes are made alike, a raid5 plex's parity
        // rewritten. (Subdisks saved stale come back as slots to rebuild, not as a resync.)
        self.needs_resync
    }
}

#[cfg(test)]
mod tests;
