//! A running md array's superblocks and write-intent bitmap, as a sans-I/O state machine.
//!
//! [`MdMetadata`] holds every member's superblock and bitmap header in memory, as they are (or
//! are about to be) on disk, and turns the engine's state changes into md's writes:
//!
//! - **Events**, as `md_update_sb` moves them: every update adds one, except that a pure
//!   dirty-to-clean step on a whole array with no membership change takes back the one its
//!   clean-to-dirty step added (`can_decrease_events`), so an idle array's count does not climb.
//! - **Roles**, as `super_1_sync` writes them: every role-table entry not held by a live member
//!   (a slot in sync or being rebuilt, or a spare) is recorded faulty, so a member that left is
//!   not taken back as fresh; a rebuilding member records its progress in its own
//!   `recovery_offset`.
//! - **Clean and dirty**: 1.x `resync_offset` (`MaxSector` clean, 0 dirty, or the point a
//!   stopped resync reached), 0.90's clean bit.
//! - **The bitmap**: bits are set and made durable before the writes they cover go out, and
//!   cleared lazily; its header's events follow the superblock's, and `events_cleared` moves
//!   only when bits are cleared on a whole array (a member that left earlier can then no longer
//!   be re-added by the bitmap alone).
//!
//! Order on disk: within one update every member's bitmap is written and flushed before any
//! superblock is written, as md's `md_bitmap_update_sb` completes before `md_update_sb` writes
//! the superblocks, so a bitmap's events are never behind its superblock's after a crash.

use bytes::Bytes;
use uraid_engine::array::SlotState;
use uraid_engine::metadata::{
    ArrayMetadata, DeviceRole, MetaChange, MetaError, MetaOp, MetaStep, MetaWhat, StepQueue, Ticket, UnixSeconds,
    WriteIntentBits,
};
use uraid_engine::SECTOR_BYTES;
use uraid_md_format::bitmap::{self, BitmapSuper};
use uraid_md_format::{MetadataVersion, Role, Superblock};

/// One member device's md metadata, as it is on the device.
#[derive(Debug, Clone)]
pub struct MdDevice {
    pub superblock: Superblock,
    /// Byte offset of the superblock on the device.
    pub offset: u64,
    /// The bitmap header and its byte offset on the device, when the array keeps a bitmap.
    pub bitmap: Option<(u64, BitmapSuper)>,
}

impl MdDevice {
    /// A device's metadata from its superblock, with the bitmap header read from it (`header`:
    /// the bytes at the bitmap's offset, when the superblock names one).
    pub fn new(superblock: Superblock, offset: u64, header: Option<&[u8]>) -> Result<MdDevice, MetaError> {
        let bitmap = match (superblock.info().bitmap_offset, header) {
            (Some(sectors), Some(bytes)) => {
                let at = bitmap_byte_offset(offset, sectors);
                let bms =
                    BitmapSuper::parse(bytes).map_err(|e| MetaError::Format(format!("bitmap at byte {at}: {e}")))?;
                Some((at, bms))
            }
            (Some(_), None) => return Err(MetaError::Format("the superblock names a bitmap but none was read".into())),
            (None, _) => None,
        };
        Ok(MdDevice { superblock, offset, bitmap })
    }
}

/// Byte offset on the device of a bitmap `sectors` (signed) from the superblock at `sb_offset`.
pub fn bitmap_byte_offset(sb_offset: u64, sectors: i32) -> u64 {
    (sb_offset as i64 + i64::from(sectors) * SECTOR_BYTES as i64) as u64
}

/// md's write-intent bitmap as the reference member holds it (`header` parsed, `bits` read after
/// it), held in memory and written to every member. A set bit says "writes may have been in
/// flight in this region": an unclean stop resyncs only those regions. Bits are set before a
/// write is let through and cleared lazily. One older than the superblock (md's `events < sb
/// events` check) or marked stale cannot say which regions are clean.
pub fn load_write_intent(header: &BitmapSuper, bits: Vec<u8>, sb_events: u64) -> WriteIntentBits {
    let all_dirty = header.events < sb_events.saturating_sub(1) || header.state & bitmap::state::STALE != 0;
    WriteIntentBits {
        chunk_bytes: u64::from(header.chunksize),
        chunks: header.chunks(),
        bits,
        all_dirty,
        events_cleared: header.events_cleared,
    }
}

/// What assembly found, to start the state machine from.
#[derive(Debug, Clone)]
pub struct MdStart {
    /// Every device the driver holds, in its order.
    pub devices: Vec<MdDevice>,
    /// The device whose superblock assembly took as the reference (the freshest).
    pub reference: usize,
    /// Slots of the array.
    pub raid_disks: usize,
    /// The highest event count among the members taken.
    pub events: u64,
    /// Every member taken says the array was shut down cleanly.
    pub clean: bool,
    /// A resync is owed before the array may be recorded clean.
    pub needs_resync: bool,
    /// Where a resync may resume, as the superblocks hold it (md's `resync_offset`, in the
    /// level's own units, see [`MdMetadata::resync_checkpoint`]; 0: from the start).
    pub resync_from: u64,
    pub bitmap: Option<WriteIntentBits>,
    pub writable: bool,
}

/// A running md array's metadata.
#[derive(Debug)]
pub struct MdMetadata {
    devices: Vec<MdDevice>,
    reference: usize,
    raid_disks: usize,
    writable: bool,
    /// The superblocks say dirty (or will once the queued update lands).
    dirty: bool,
    needs_resync: bool,
    /// Where a resync owed has made redundancy consistent up to, in md's units (member sectors
    /// for raid1/4/5/6, array sectors for raid10).
    resync_from: u64,
    /// The resync point the superblocks hold (0 when they say plain dirty).
    resync_recorded: u64,
    events: u64,
    /// md's `can_decrease_events`: the last update was a clean->dirty step that may be undone.
    can_decrease_events: bool,
    /// Membership changed since the last superblock update.
    devs_changed: bool,
    bitmap: Option<WriteIntentBits>,
    steps: StepQueue,
    /// The event count of each superblock step still queued, in order.
    queued_events: std::collections::VecDeque<u64>,
    /// The event count of the newest superblock step handed out: the newest any member may
    /// hold. An update that supersedes queued superblock steps counts on from it, since theirs
    /// never reached a member (md bumps the count once per superblock write, and a member one
    /// update behind is taken back at assembly while one two behind is not).
    events_written: u64,
    /// Queued steps at the head of the queue that no later update may supersede: a superblock
    /// write put back to be written again after a member failed under it (md's
    /// `MD_SB_NEED_REWRITE`), and the flush after it. Its members may hold the update already,
    /// undurably; md has every update durable on the members left before the next goes out.
    pinned: usize,
}

impl MdMetadata {
    pub fn new(start: MdStart) -> MdMetadata {
        MdMetadata {
            devices: start.devices,
            reference: start.reference,
            raid_disks: start.raid_disks,
            writable: start.writable,
            dirty: !start.clean,
            needs_resync: start.needs_resync,
            resync_from: start.resync_from,
            resync_recorded: start.resync_from,
            events: start.events,
            can_decrease_events: false,
            devs_changed: false,
            bitmap: start.bitmap,
            steps: StepQueue::new(),
            queued_events: std::collections::VecDeque::new(),
            events_written: start.events,
            pinned: 0,
        }
    }

    /// The event count of the last update recorded.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Every device's superblock as the last update recorded it.
    pub fn devices(&self) -> &[MdDevice] {
        &self.devices
    }

    /// The write-intent bitmap, if the array keeps one.
    pub fn write_intent(&self) -> Option<&WriteIntentBits> {
        self.bitmap.as_ref()
    }

    /// Why the metadata can no longer be written, once a step failed.
    pub fn failed(&self) -> Option<&MetaError> {
        self.steps.failed()
    }

    /// md's resync position for "consistent below `array_bytes`": raid1/4/5/6 resync walks the
    /// members (`resync_max_sectors` is `dev_sectors`), so the position is a member sector, of
    /// the last whole stripe below; raid10's walks the array (`resync_max_sectors` is the array
    /// size).
    fn resync_sectors(&self, array_bytes: u64) -> u64 {
        match self.parity_stripe() {
            Some((chunk, data_disks)) => array_bytes / (chunk * data_disks) * chunk / SECTOR_BYTES,
            None => array_bytes / SECTOR_BYTES,
        }
    }

    /// The array offset md's resync position `sectors` stands for (see `resync_sectors`),
    /// rounded down to a whole stripe.
    fn resync_array_bytes(&self, sectors: u64) -> u64 {
        match self.parity_stripe() {
            Some((chunk, data_disks)) => sectors * SECTOR_BYTES / chunk * chunk * data_disks,
            None => sectors * SECTOR_BYTES,
        }
    }

    /// For raid4/5/6: the chunk bytes and the data chunks of a stripe.
    fn parity_stripe(&self) -> Option<(u64, u64)> {
        let info = self.devices[self.reference].superblock.info();
        let chunk = u64::from(info.chunk_sectors) * SECTOR_BYTES;
        let data_disks = match info.level {
            4 | 5 => u64::from(info.raid_disks).saturating_sub(1),
            6 => u64::from(info.raid_disks).saturating_sub(2),
            _ => 0,
        };
        (data_disks > 0 && chunk > 0).then_some((chunk, data_disks))
    }

    /// The newest update recorded, if any.
    pub fn newest(&self) -> Option<Ticket> {
        self.steps.newest()
    }

    /// A device joins the driver's list (a new member or spare, whose own superblock the driver
    /// wrote when it added it). Returns its index.
    pub fn add_device(&mut self, device: MdDevice) -> usize {
        self.devices.push(device);
        self.devices.len() - 1
    }

    /// Device `index` is replaced by another device (the same entry reused for a device that
    /// comes back).
    pub fn replace_device(&mut self, index: usize, device: MdDevice) {
        self.devices[index] = device;
    }

    /// Device `index` (or a new one, `None`) joins the array with the superblock the driver
    /// made for it (a new member or spare, or a former member coming back): its write-intent
    /// bitmap is copied from the reference member's, as it is in memory, and `areas` (for
    /// example an empty partial parity log) are written before its superblock, all durably.
    /// Returns its index and the ticket of those writes.
    pub fn join(
        &mut self,
        index: Option<usize>,
        mut device: MdDevice,
        areas: Vec<(u64, Bytes)>,
    ) -> (usize, Option<Ticket>) {
        let mut before = MetaStep::default();
        for (offset, data) in areas {
            before.ops.push(MetaOp::Write { device: usize::MAX, offset, data, what: MetaWhat::Log });
        }
        if let (Some(sectors), Some((_, header)), Some(b)) =
            (device.superblock.info().bitmap_offset, &self.devices[self.reference].bitmap, &self.bitmap)
        {
            let at = bitmap_byte_offset(device.offset, sectors);
            let mut image = header.to_bytes().to_vec();
            image.extend_from_slice(&b.bits[..header.bits_bytes().min(b.bits.len())]);
            before.ops.push(MetaOp::Write {
                device: usize::MAX,
                offset: at,
                data: Bytes::from(image),
                what: MetaWhat::Bitmap,
            });
            device.bitmap = Some((at, header.clone()));
        }
        let label = MetaOp::Write {
            device: usize::MAX,
            offset: device.offset,
            data: Bytes::from(device.superblock.to_bytes()),
            what: MetaWhat::Label,
        };
        let index = match index {
            Some(i) => {
                self.devices[i] = device;
                i
            }
            None => self.add_device(device),
        };
        let mut steps = vec![before, MetaStep { ops: vec![MetaOp::Flush { device: index }], completes: None }];
        if steps[0].ops.is_empty() {
            steps.clear();
        }
        steps.push(MetaStep { ops: vec![label], completes: None });
        steps.push(MetaStep { ops: vec![MetaOp::Flush { device: index }], completes: None });
        for step in &mut steps {
            for op in &mut step.ops {
                if let MetaOp::Write { device, .. } = op {
                    *device = index;
                }
            }
        }
        self.devs_changed = true;
        (index, self.queue_steps(steps))
    }

    /// Every region counts as written (a driver that does not track regions one by one sets
    /// them all before its first write).
    pub fn set_all_intent(&mut self) {
        if let Some(b) = &mut self.bitmap {
            b.bits.iter_mut().for_each(|x| *x = 0xff);
        }
    }

    /// Queue `steps`, the last of which completes a new ticket.
    fn queue_steps(&mut self, steps: Vec<MetaStep>) -> Option<Ticket> {
        self.steps.push(steps)
    }

    fn slot_states(&self, devices: &[DeviceRole]) -> Vec<SlotState> {
        let mut states = vec![SlotState::Missing; self.raid_disks];
        for d in devices {
            if let DeviceRole::Slot { slot, state, .. } = *d {
                if slot < states.len() && states[slot] != SlotState::InSync {
                    states[slot] = state;
                }
            }
        }
        states
    }

    /// Bitmap writes (header with `events`, then bits) to every device that takes part, then
    /// their flushes: two steps.
    fn bitmap_steps(&self, takes_part: &[bool], cleared: bool) -> Vec<MetaStep> {
        let Some(b) = &self.bitmap else { return Vec::new() };
        let mut writes = MetaStep::default();
        let mut flushes = MetaStep::default();
        for (i, d) in self.devices.iter().enumerate() {
            let (Some((at, header)), true) = (&d.bitmap, takes_part.get(i).copied().unwrap_or(false)) else {
                continue;
            };
            let mut bms = header.clone();
            bms.events = self.events;
            if cleared {
                bms.events_cleared = self.events;
            }
            bms.state &= !bitmap::state::STALE;
            let mut image = bms.to_bytes().to_vec();
            image.extend_from_slice(&b.bits[..bms.bits_bytes().min(b.bits.len())]);
            writes.ops.push(MetaOp::Write { device: i, offset: *at, data: Bytes::from(image), what: MetaWhat::Bitmap });
            flushes.ops.push(MetaOp::Flush { device: i });
        }
        vec![writes, flushes]
    }

    /// Keep the in-memory bitmap headers in step with what `bitmap_steps` wrote.
    fn note_bitmap_written(&mut self, takes_part: &[bool], cleared: bool) {
        let events = self.events;
        for (i, d) in self.devices.iter_mut().enumerate() {
            if let (Some((_, bms)), true) = (&mut d.bitmap, takes_part.get(i).copied().unwrap_or(false)) {
                bms.events = events;
                if cleared {
                    bms.events_cleared = events;
                }
                bms.state &= !bitmap::state::STALE;
            }
        }
    }

    /// Write every live member's superblock with the array recorded clean or dirty, following
    /// md_update_sb's event rules. `idle`: no write is in flight, so a resync still owed may
    /// record how far it has come (md's `recovery_cp` in `resync_offset`, which `super_1_sync`
    /// writes only while the array is in sync); with writes in flight it records 0, since they
    /// may leave stripes below that point inconsistent.
    fn update(&mut self, clean: bool, idle: bool, devices: &[DeviceRole], now: UnixSeconds) -> Option<Ticket> {
        let states = self.slot_states(devices);
        let degraded = states.iter().any(|s| *s != SlotState::InSync);
        let nospares = !self.devs_changed && !degraded;
        // A member holds its slot while it is in sync or being rebuilt (md writes a rebuilding
        // member's slot as its role, with its progress in its own recovery_offset). 0.90 has no
        // recovery offset: md writes a member not yet in sync as a spare there, so that a crash
        // never leaves a half-rebuilt member looking whole.
        let v090 = self.devices[self.reference].superblock.version() == MetadataVersion::V0_90;
        let live_role = |d: &DeviceRole| match *d {
            DeviceRole::Slot { slot, state: SlotState::InSync, .. } => Some(Role::Active(slot as u32)),
            DeviceRole::Slot { state: SlotState::Recovering, .. } if v090 => Some(Role::Spare),
            DeviceRole::Slot { slot, state: SlotState::Recovering, .. } => Some(Role::Active(slot as u32)),
            DeviceRole::Spare => Some(Role::Spare),
            _ => None,
        };
        let takes_part: Vec<bool> =
            (0..self.devices.len()).map(|i| devices.get(i).and_then(live_role).is_some()).collect();
        // Superblock steps still queued are superseded by this update, which writes every live
        // member (below), and never reach a member: count on from what members may hold.
        if !self.queued_events.is_empty() && takes_part.iter().any(|t| *t) {
            self.events = self.events_written;
            self.can_decrease_events = false;
        }
        if nospares && clean && self.can_decrease_events && self.events != 1 {
            self.events -= 1;
            self.can_decrease_events = false;
        } else {
            self.events += 1;
            self.can_decrease_events = nospares;
        }
        let live: Vec<(u32, Role)> = self
            .devices
            .iter()
            .zip(devices)
            .filter_map(|(m, d)| live_role(d).map(|r| (m.superblock.info().dev_number, r)))
            .collect();
        let table_len = self.devices[self.reference]
            .superblock
            .info()
            .roles
            .len()
            .max(self.devices.iter().map(|m| m.superblock.info().dev_number as usize + 1).max().unwrap_or(0));
        // Clean on a whole array: nothing is in flight and everything is consistent, so every
        // bit is cleared. While degraded they stay, for the member that will come back.
        let cleared = clean && !degraded;
        if clean && !degraded && !self.needs_resync {
            if let Some(b) = &mut self.bitmap {
                b.bits.iter_mut().for_each(|x| *x = 0);
                b.all_dirty = false;
                b.events_cleared = self.events;
            }
        }
        let mut steps = self.bitmap_steps(&takes_part, cleared);
        self.note_bitmap_written(&takes_part, cleared);
        let mut writes = MetaStep::default();
        let mut flushes = MetaStep::default();
        let resync_from = self.resync_from;
        let needs_resync = self.needs_resync;
        for (i, m) in self.devices.iter_mut().enumerate() {
            if !takes_part[i] {
                continue;
            }
            let progress = match devices[i] {
                DeviceRole::Slot { state: SlotState::Recovering, rebuilt, .. } => Some(rebuilt / SECTOR_BYTES),
                _ => None,
            };
            let sb = &mut m.superblock;
            sb.set_recovery_offset(progress);
            // As super_1_sync does: every entry not held by a live member is faulty (0.90:
            // super_90_sync's descriptors, missing slots removed and faulty).
            sb.sync_roles(&live, table_len);
            sb.set_events(self.events);
            sb.set_utime(now);
            sb.set_clean(clean);
            if !clean && idle && needs_resync {
                sb.set_resync_offset(resync_from);
            }
            writes.ops.push(MetaOp::Write {
                device: i,
                offset: m.offset,
                data: Bytes::from(sb.to_bytes()),
                what: MetaWhat::Label,
            });
            flushes.ops.push(MetaOp::Flush { device: i });
        }
        steps.push(writes);
        steps.push(flushes);
        self.dirty = !clean;
        self.devs_changed = false;
        self.resync_recorded = if idle && needs_resync { resync_from } else { 0 };
        // This update writes the whole bitmap and every live superblock as they are now, so the
        // steps still queued behind the one out (older copies of the same bytes, as superblock
        // and bitmap writes always hold the whole) are superseded: dropped, their tickets
        // completing with this one's. Without that, a member failure would be recorded only
        // after every bitmap update queued before it, while the array goes on degraded with the
        // failed member still in sync on disk; md writes its superblocks promptly too. Only an
        // update that writes something supersedes (with no live member left, the queued steps
        // must still run, or fail, for their tickets to end); a log header write is kept.
        //
        // A flush step at the head of the queue is kept: the writes before it are out already,
        // and md has every superblock update durable before the next is written (it waits for
        // its superblock writes, which carry a preflush and FUA). Dropping it would let a
        // member lose two updates to one crash, and assembly leaves a member two events behind.
        if steps.iter().any(|step| !step.ops.is_empty()) {
            let mut front = true;
            let mut pinned = self.pinned;
            let mut pinned_events = 0;
            self.steps.retain_queued(|step| {
                let pending_flush =
                    front && !step.ops.is_empty() && step.ops.iter().all(|op| matches!(op, MetaOp::Flush { .. }));
                front = false;
                let pin = pinned > 0;
                pinned = pinned.saturating_sub(1);
                if pin && is_superblock_step(step) {
                    pinned_events += 1;
                }
                pin || pending_flush
                    || step.ops.iter().any(|op| matches!(op, MetaOp::Write { what: MetaWhat::Log, .. }))
            });
            self.queued_events.truncate(pinned_events);
        }
        if steps.iter().any(is_superblock_step) {
            self.queued_events.push_back(self.events);
        }
        self.queue_steps(steps)
    }

    /// Set (`dirty`) or clear the bits of `chunks`; write the bitmap to every live member if
    /// that changed anything.
    fn set_intent(&mut self, chunks: std::ops::Range<u64>, dirty: bool, devices: &[DeviceRole]) -> Option<Ticket> {
        let b = self.bitmap.as_mut()?;
        let mut changed = false;
        for c in chunks.start..chunks.end.min(b.chunks) {
            if bitmap::is_dirty(&b.bits, c) != dirty {
                bitmap::set_dirty(&mut b.bits, c, dirty);
                changed = true;
            }
        }
        if !changed {
            return None;
        }
        // Clearing forgets writes: a member that left before now is behind events_cleared and
        // can no longer be re-added by the bitmap alone.
        if !dirty {
            b.events_cleared = self.events;
        }
        let takes_part: Vec<bool> = (0..self.devices.len())
            .map(|i| {
                matches!(
                    devices.get(i),
                    Some(DeviceRole::Slot { state: SlotState::InSync | SlotState::Recovering, .. })
                )
            })
            .collect();
        let steps = self.bitmap_steps(&takes_part, !dirty);
        self.note_bitmap_written(&takes_part, !dirty);
        self.queue_steps(steps)
    }
}

impl ArrayMetadata for MdMetadata {
    fn record(
        &mut self,
        change: MetaChange,
        devices: &[DeviceRole],
        now: UnixSeconds,
    ) -> Result<Option<Ticket>, MetaError> {
        self.steps.admit(self.writable, devices.len(), self.devices.len())?;
        Ok(match change {
            MetaChange::Dirty => self.update(false, false, devices, now),
            MetaChange::Clean => {
                if !self.needs_resync {
                    self.update(true, true, devices, now)
                } else if self.devs_changed || self.resync_from != self.resync_recorded {
                    // Still owed a resync: recorded dirty, with how far the resync has come.
                    self.update(false, true, devices, now)
                } else {
                    None
                }
            }
            MetaChange::Roles => {
                self.devs_changed = true;
                let clean = !self.dirty;
                self.update(clean, clean, devices, now)
            }
            MetaChange::IntentSet(chunks) => self.set_intent(chunks, true, devices),
            MetaChange::IntentClear(chunks) => self.set_intent(chunks, false, devices),
            MetaChange::ResyncCheckpoint { array_bytes } => {
                self.resync_from = self.resync_from.max(self.resync_sectors(array_bytes));
                None
            }
            MetaChange::ResyncDone => {
                self.needs_resync = false;
                self.resync_from = 0;
                if let Some(b) = &mut self.bitmap {
                    b.all_dirty = false;
                }
                None
            }
        })
    }

    fn next_step(&mut self) -> Option<MetaStep> {
        let step = self.steps.next_step()?;
        self.pinned = self.pinned.saturating_sub(1);
        if is_superblock_step(&step) {
            if let Some(events) = self.queued_events.pop_front() {
                self.events_written = self.events_written.max(events);
            }
        }
        Some(step)
    }

    fn step_done(&mut self, result: Result<(), MetaError>) {
        self.steps.step_done(result);
    }

    fn membership_changed(&mut self) {
        self.devs_changed = true;
    }

    fn step_failed_on(&mut self, device: usize) {
        // md (`super_written`): a member whose superblock write fails is failed, and the update
        // is written again to the others (`MD_SB_NEED_REWRITE`), with the event count it had.
        if self.steps.out().is_some_and(is_superblock_step) {
            self.queued_events.push_front(self.events_written);
            // The write put back and the flush after it.
            self.pinned = 2;
        }
        self.steps.without(|op| op.device() == device);
        self.devs_changed = true;
    }

    fn durable(&self, ticket: Ticket) -> bool {
        self.steps.durable(ticket)
    }

    fn is_dirty(&self) -> bool {
        self.dirty
    }

    fn writes_recorded(&self) -> bool {
        // Superblocks that record how far a resync owed has come say the array was idle then
        // (md's `in_sync` with `recovery_cp` short of the end): the next write must record it
        // dirty again, resync point 0, before it goes out, or a crash would resume the resync
        // past stripes that write left inconsistent.
        self.dirty && self.resync_recorded == 0
    }

    fn needs_resync(&self) -> bool {
        self.needs_resync
    }

    fn resync_checkpoint(&self) -> u64 {
        self.resync_array_bytes(self.resync_from)
    }

    fn write_intent(&self) -> Option<&WriteIntentBits> {
        self.bitmap.as_ref()
    }
}

/// Whether a step writes superblocks.
fn is_superblock_step(step: &MetaStep) -> bool {
    step.ops.iter().any(|op| matches!(op, MetaOp::Write { what: MetaWhat::Label, .. }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uraid_md_format::create::{plan, CreateSpec};
    use uraid_md_format::{MetadataVersion, MAX_SECTOR};

    const DEVICE_BYTES: u64 = 64 << 20;

    /// Member images of a new 4-member raid5 with a bitmap, as mdadm would write them.
    fn raid5_images(bitmap: bool) -> Vec<Vec<u8>> {
        raid5_images_of(MetadataVersion::V1_2, bitmap)
    }

    fn raid5_images_of(version: MetadataVersion, bitmap: bool) -> Vec<Vec<u8>> {
        let spec = CreateSpec {
            version,
            level: 5,
            layout: -1,
            chunk_sectors: 128,
            raid_disks: 4,
            array_uuid: [7; 16],
            name: "test:md".into(),
            ctime: 1_700_000_000,
            component_sectors: None,
            bitmap,
            data_offset: None,
            bitmap_chunk: Some(1 << 20),
        };
        let uuids: Vec<[u8; 16]> = (0..4).map(|i| [i as u8 + 1; 16]).collect();
        let p = plan(&spec, &[DEVICE_BYTES; 4], &uuids).expect("plan");
        (0..4)
            .map(|m| {
                let mut img = vec![0u8; DEVICE_BYTES as usize];
                for area in p.areas_for(m) {
                    img[area.offset as usize..area.offset as usize + area.bytes.len()].copy_from_slice(&area.bytes);
                }
                let sb = p.superblocks[m].to_bytes();
                let at = p.members[m].super_byte_offset as usize;
                img[at..at + sb.len()].copy_from_slice(&sb);
                img
            })
            .collect()
    }

    fn superblock(img: &[u8]) -> Superblock {
        Superblock::find(img.len() as u64, |off, len| Ok::<_, ()>(img[off as usize..off as usize + len].to_vec()))
            .expect("readable")
            .expect("a superblock")
    }

    fn bitmap_at(img: &[u8], sb: &Superblock) -> Option<(u64, BitmapSuper)> {
        let at = bitmap_byte_offset(sb.byte_offset(), sb.info().bitmap_offset?);
        let header = &img[at as usize..at as usize + bitmap::HEADER_BYTES];
        Some((at, BitmapSuper::parse(header).expect("bitmap header")))
    }

    fn start(images: &[Vec<u8>]) -> MdMetadata {
        let devices: Vec<MdDevice> = images
            .iter()
            .map(|img| {
                let sb = superblock(img);
                let offset = sb.byte_offset();
                let header = sb.info().bitmap_offset.map(|s| {
                    let at = bitmap_byte_offset(offset, s) as usize;
                    &img[at..at + bitmap::HEADER_BYTES]
                });
                MdDevice::new(sb, offset, header).expect("device")
            })
            .collect();
        let events = devices[0].superblock.info().events;
        let bitmap = devices[0].bitmap.as_ref().map(|(at, h)| {
            let from = *at as usize + bitmap::HEADER_BYTES;
            load_write_intent(h, images[0][from..from + h.bits_bytes()].to_vec(), events)
        });
        MdMetadata::new(MdStart {
            devices,
            reference: 0,
            raid_disks: 4,
            events,
            clean: true,
            needs_resync: false,
            resync_from: 0,
            bitmap,
            writable: true,
        })
    }

    fn whole() -> Vec<DeviceRole> {
        (0..4).map(|slot| DeviceRole::Slot { slot, state: SlotState::InSync, rebuilt: 0 }).collect()
    }

    /// Perform every queued step on the images; returns what each write was, in order.
    fn run(meta: &mut MdMetadata, images: &mut [Vec<u8>]) -> Vec<(usize, MetaWhat)> {
        let mut order = Vec::new();
        while let Some(step) = meta.next_step() {
            for op in &step.ops {
                if let MetaOp::Write { device, offset, data, what } = op {
                    images[*device][*offset as usize..*offset as usize + data.len()].copy_from_slice(data);
                    order.push((*device, *what));
                }
            }
            meta.step_done(Ok(()));
        }
        order
    }

    #[test]
    fn a_dirty_clean_round_trip_on_a_whole_array_takes_its_event_back() {
        let mut images = raid5_images(true);
        let mut meta = start(&images);
        // A new array's events are 0: md never takes a count back to 1 or below, so go past it
        // (each update written before the next is recorded: one recorded while another waits
        // supersedes it, see below).
        meta.record(MetaChange::Dirty, &whole(), 98).unwrap();
        run(&mut meta, &mut images);
        meta.record(MetaChange::Clean, &whole(), 99).unwrap();
        run(&mut meta, &mut images);
        let before = superblock(&images[0]).info().events;
        assert_eq!(before, 2);
        let t = meta.record(MetaChange::Dirty, &whole(), 100).unwrap().expect("writes");
        assert!(!meta.durable(t));
        let order = run(&mut meta, &mut images);
        assert!(meta.durable(t));
        // Every bitmap lands before any superblock.
        let first_label = order.iter().position(|(_, w)| *w == MetaWhat::Label).expect("superblocks written");
        assert!(order[first_label..].iter().all(|(_, w)| *w == MetaWhat::Label), "{order:?}");
        for img in &images {
            let info = superblock(img).info();
            assert_eq!(info.events, before + 1);
            assert_eq!(info.resync_offset, 0, "dirty");
            assert_eq!(info.utime, 100);
            let (_, bms) = bitmap_at(img, &superblock(img)).unwrap();
            assert_eq!(bms.events, before + 1);
        }
        meta.record(MetaChange::Clean, &whole(), 101).unwrap().expect("writes");
        run(&mut meta, &mut images);
        for img in &images {
            let sb = superblock(img);
            assert_eq!(sb.info().events, before, "md_update_sb takes the dirty step's event back");
            assert_eq!(sb.info().resync_offset, MAX_SECTOR);
            let (_, bms) = bitmap_at(img, &sb).unwrap();
            assert_eq!(bms.events_cleared, before);
        }
        assert!(!meta.is_dirty());
    }

    #[test]
    fn an_update_that_supersedes_one_never_written_takes_its_event_number() {
        // Dirty and clean recorded while nothing was written: the clean update supersedes the
        // dirty one, whose superblocks never reach a member, so the members go from what they
        // hold straight to the next count. Were the skipped count used, a member that lost
        // this one update to a crash would be two behind, and assembly would leave it out.
        let mut images = raid5_images(false);
        let mut meta = start(&images);
        let before = meta.events();
        let mut roles = whole();
        roles[2] = DeviceRole::Out;
        meta.record(MetaChange::Dirty, &roles, 5).unwrap();
        meta.record(MetaChange::Clean, &roles, 6).unwrap();
        run(&mut meta, &mut images);
        assert_eq!(superblock(&images[0]).info().events, before + 1);
        // Once written, the next update counts on from it.
        meta.record(MetaChange::Dirty, &roles, 7).unwrap();
        run(&mut meta, &mut images);
        assert_eq!(superblock(&images[0]).info().events, before + 2);
    }

    #[test]
    fn a_superblock_write_put_back_is_durable_before_the_update_that_records_its_failure() {
        // A member's superblock write fails while the others' went out: md writes the update
        // again to the others and waits for it (MD_SB_NEED_REWRITE) before the update that
        // records the failure. Superseding the rewrite would let a member that had the first
        // update only in its cache lose both to one crash, two events behind.
        let mut images = raid5_images(false);
        let mut meta = start(&images);
        let before = meta.events();
        meta.record(MetaChange::Dirty, &whole(), 5).unwrap();
        let writes = meta.next_step().expect("superblock writes");
        assert!(is_superblock_step(&writes));
        meta.step_failed_on(3);
        let mut roles = whole();
        roles[3] = DeviceRole::Out;
        let failure = meta.record(MetaChange::Roles, &roles, 6).unwrap().expect("writes");
        // The rewrite (the first update's count, to the three left) and its flush come first.
        let rewrite = meta.next_step().expect("the rewrite");
        let devices: Vec<usize> = rewrite.ops.iter().map(MetaOp::device).collect();
        assert_eq!(devices, [0, 1, 2]);
        for op in &rewrite.ops {
            let MetaOp::Write { data, .. } = op else { panic!("a write: {op:?}") };
            assert_eq!(superblock(&pad(data)).info().events, before + 1);
        }
        meta.step_done(Ok(()));
        let flush = meta.next_step().expect("its flush");
        assert!(flush.ops.iter().all(|op| matches!(op, MetaOp::Flush { .. })), "{flush:?}");
        meta.step_done(Ok(()));
        assert!(!meta.durable(failure));
        run(&mut meta, &mut images);
        assert!(meta.durable(failure));
        for img in &images[..3] {
            assert_eq!(superblock(img).info().events, before + 2);
        }
    }

    /// A superblock write's bytes, placed where `superblock` finds them in an image.
    fn pad(data: &[u8]) -> Vec<u8> {
        let mut img = raid5_images(false).swap_remove(0);
        let at = superblock(&img).byte_offset() as usize;
        img[at..at + data.len()].copy_from_slice(data);
        img
    }

    #[test]
    fn a_missing_member_is_recorded_faulty_and_events_only_climb() {
        let mut images = raid5_images(false);
        let mut meta = start(&images);
        let before = meta.events();
        let mut roles = whole();
        roles[2] = DeviceRole::Out;
        meta.record(MetaChange::Dirty, &roles, 5).unwrap();
        let mut order = run(&mut meta, &mut images);
        meta.record(MetaChange::Clean, &roles, 6).unwrap();
        order.extend(run(&mut meta, &mut images));
        assert!(order.iter().all(|(d, _)| *d != 2), "the member that left is not written: {order:?}");
        let info = superblock(&images[0]).info();
        assert_eq!(info.events, before + 2, "a degraded array never takes an event back");
        assert_eq!(info.roles[2], Role::Faulty);
        assert_eq!(superblock(&images[2]).info().events, before, "untouched");
    }

    #[test]
    fn a_rebuilding_member_records_its_progress() {
        let mut images = raid5_images(false);
        let mut meta = start(&images);
        let mut roles = whole();
        roles[1] = DeviceRole::Slot { slot: 1, state: SlotState::Recovering, rebuilt: 3 << 20 };
        meta.record(MetaChange::Roles, &roles, 9).unwrap();
        run(&mut meta, &mut images);
        assert_eq!(superblock(&images[1]).info().recovery_offset, Some((3 << 20) / 512));
        assert_eq!(superblock(&images[0]).info().recovery_offset, None);
        assert_eq!(superblock(&images[0]).info().roles[1], Role::Active(1));
    }

    #[test]
    fn a_rebuilding_090_member_stays_a_spare_until_whole() {
        // 0.90 has no recovery offset: md writes a member not yet in sync as a spare, so a
        // crash mid-rebuild cannot bring it back as if it were whole.
        let mut images = raid5_images_of(MetadataVersion::V0_90, false);
        let mut meta = start(&images);
        let mut roles = whole();
        roles[1] = DeviceRole::Slot { slot: 1, state: SlotState::Recovering, rebuilt: 3 << 20 };
        meta.record(MetaChange::Roles, &roles, 9).unwrap();
        run(&mut meta, &mut images);
        let info = superblock(&images[1]).info();
        assert_eq!(info.role, Role::Spare);
        assert_eq!(info.recovery_offset, None);
        // Everyone's table says the same: descriptor 1 is a spare, not slot 1 in sync.
        let Superblock::V090(sb) = superblock(&images[0]) else { panic!("0.90") };
        let d = sb.disks[1];
        assert_eq!((d.number, d.raid_disk, d.state), (1, 1, 0));
        assert_eq!(sb.info().roles[1], Role::Spare);
        assert_eq!((sb.active_disks, sb.spare_disks, sb.working_disks), (3, 1, 4));
        // Once rebuilt it is active in its slot; nothing past the slots is marked.
        meta.record(MetaChange::Roles, &whole(), 10).unwrap();
        run(&mut meta, &mut images);
        let Superblock::V090(sb) = superblock(&images[2]) else { panic!("0.90") };
        assert_eq!(sb.info().roles[..4], [Role::Active(0), Role::Active(1), Role::Active(2), Role::Active(3)]);
        assert!(sb.disks[4..].iter().all(|d| d.state == 0), "unused descriptors stay unused");
        assert_eq!((sb.active_disks, sb.failed_disks, sb.spare_disks), (4, 0, 0));
        // A member that is gone leaves its slot removed and faulty.
        let mut roles = whole();
        roles[3] = DeviceRole::Out;
        meta.record(MetaChange::Roles, &roles, 11).unwrap();
        run(&mut meta, &mut images);
        let Superblock::V090(sb) = superblock(&images[0]) else { panic!("0.90") };
        let removed = uraid_md_format::sb090::disk_state::REMOVED | uraid_md_format::sb090::disk_state::FAULTY;
        assert_eq!(sb.disks[3].state, removed);
        assert_eq!(sb.failed_disks, 1);
    }

    #[test]
    fn intent_bits_are_on_disk_when_their_ticket_is_durable() {
        let mut images = raid5_images(true);
        let mut meta = start(&images);
        // Start from a clean bitmap, as after a first clean mark.
        meta.record(MetaChange::Dirty, &whole(), 1).unwrap();
        meta.record(MetaChange::Clean, &whole(), 2).unwrap();
        run(&mut meta, &mut images);
        let t = meta.record(MetaChange::IntentSet(3..5), &whole(), 3).unwrap().expect("bits changed");
        assert!(meta.record(MetaChange::IntentSet(3..4), &whole(), 3).unwrap().is_none(), "already set");
        let order = run(&mut meta, &mut images);
        assert!(meta.durable(t));
        assert!(order.iter().all(|(_, w)| *w == MetaWhat::Bitmap));
        for img in &images {
            let (at, bms) = bitmap_at(img, &superblock(img)).unwrap();
            let from = at as usize + bitmap::HEADER_BYTES;
            let bits = &img[from..from + bms.bits_bytes()];
            assert!(bitmap::is_dirty(bits, 3) && bitmap::is_dirty(bits, 4) && !bitmap::is_dirty(bits, 5));
        }
        let intent = ArrayMetadata::write_intent(&meta).expect("a bitmap");
        assert!(intent.is_dirty(4) && !intent.is_dirty(5));
        meta.record(MetaChange::IntentClear(3..5), &whole(), 4).unwrap().expect("bits changed");
        run(&mut meta, &mut images);
        let (at, bms) = bitmap_at(&images[0], &superblock(&images[0])).unwrap();
        let from = at as usize + bitmap::HEADER_BYTES;
        assert_eq!(bitmap::count_dirty(&images[0][from..from + bms.bits_bytes()], bms.chunks()), 0);
        assert_eq!(bms.events_cleared, meta.events());
    }

    /// A member failure recorded while bitmap updates are queued is not held up behind them:
    /// the update that records it writes the whole bitmap and every superblock as they are now,
    /// supersedes the queued steps (their tickets complete with it), and its superblocks go out
    /// after one bitmap step, with every queued bit on the members.
    #[test]
    fn a_failure_record_supersedes_the_queued_bitmap_updates() {
        let mut images = raid5_images(true);
        let mut meta = start(&images);
        meta.record(MetaChange::Dirty, &whole(), 1).unwrap();
        meta.record(MetaChange::Clean, &whole(), 2).unwrap();
        run(&mut meta, &mut images);
        // One bitmap update out, three queued behind it.
        meta.record(MetaChange::IntentSet(1..2), &whole(), 3).unwrap().expect("bits changed");
        let out = meta.next_step().expect("the first bitmap step");
        let queued: Vec<Ticket> = [2..3, 3..4, 4..5]
            .into_iter()
            .map(|c| meta.record(MetaChange::IntentSet(c), &whole(), 3).unwrap().expect("bits changed"))
            .collect();
        let mut failed = whole();
        failed[2] = DeviceRole::Slot { slot: 2, state: SlotState::Faulty, rebuilt: 0 };
        let recorded = meta.record(MetaChange::Roles, &failed, 4).unwrap().expect("the failure is recorded");
        // The step out finishes (on the members too); then the failure's own steps come next.
        for op in &out.ops {
            if let MetaOp::Write { device, offset, data, .. } = op {
                images[*device][*offset as usize..*offset as usize + data.len()].copy_from_slice(data);
            }
        }
        meta.step_done(Ok(()));
        let order = run(&mut meta, &mut images);
        let bitmap_writes = order.iter().filter(|(_, w)| *w == MetaWhat::Bitmap).count();
        assert_eq!(bitmap_writes, 3, "one bitmap write per live member, not one per queued update: {order:?}");
        assert!(order.iter().any(|(_, w)| *w == MetaWhat::Label));
        assert!(queued.iter().chain([&recorded]).all(|t| meta.durable(*t)));
        for (i, img) in images.iter().enumerate() {
            let (at, bms) = bitmap_at(img, &superblock(img)).unwrap();
            let from = at as usize + bitmap::HEADER_BYTES;
            let bits = &img[from..from + bms.bits_bytes()];
            let all = (1..5).all(|c| bitmap::is_dirty(bits, c));
            assert_eq!(all, i != 2, "member {i}: every queued bit is on the live members");
            if i != 2 {
                assert_eq!(superblock(img).info().roles[2], Role::Faulty, "member {i} records the failure");
            }
        }
    }

    #[test]
    fn a_resync_owed_records_its_checkpoint_only_while_idle() {
        let mut images = raid5_images(false);
        let mut meta = start(&images);
        meta.needs_resync = true;
        meta.dirty = true;
        meta.record(MetaChange::ResyncCheckpoint { array_bytes: 8 << 20 }, &whole(), 1).unwrap();
        meta.record(MetaChange::Clean, &whole(), 2).unwrap().expect("the checkpoint is recorded");
        run(&mut meta, &mut images);
        // raid5 keeps the position in member sectors, of the last whole stripe below: 42
        // stripes of 3 x 64 KiB lie below 8 MiB of the array.
        assert_eq!(superblock(&images[0]).info().resync_offset, 42 * 128);
        assert_eq!(meta.resync_checkpoint(), 42 * 3 * (64 << 10));
        assert!(meta.record(MetaChange::Clean, &whole(), 3).unwrap().is_none(), "nothing new to record");
        // The superblocks say idle now: a driver asks before a write, and must record it dirty.
        assert!(
            meta.is_dirty() && !meta.writes_recorded(),
            "a recorded resync point must be taken back before the next write"
        );
        meta.record(MetaChange::Dirty, &whole(), 4).unwrap();
        assert!(meta.writes_recorded());
        run(&mut meta, &mut images);
        assert_eq!(superblock(&images[0]).info().resync_offset, 0, "writes in flight: resync from the start");
        meta.record(MetaChange::ResyncDone, &whole(), 5).unwrap();
        meta.record(MetaChange::Clean, &whole(), 6).unwrap();
        run(&mut meta, &mut images);
        assert_eq!(superblock(&images[0]).info().resync_offset, MAX_SECTOR);
    }

    #[test]
    fn a_failed_metadata_write_stops_every_later_update() {
        let images = raid5_images(false);
        let mut meta = start(&images);
        let t = meta.record(MetaChange::Dirty, &whole(), 1).unwrap().unwrap();
        let step = meta.next_step().expect("a step");
        assert!(meta.next_step().is_none(), "one step out at a time");
        assert!(!step.ops.is_empty());
        meta.step_done(Err(MetaError::Io {
            device: 0,
            what: "writing superblock".into(),
            reason: "EIO".into(),
            unreachable: false,
        }));
        assert!(!meta.durable(t));
        assert!(meta.next_step().is_none());
        assert!(matches!(meta.record(MetaChange::Clean, &whole(), 2), Err(MetaError::Io { .. })));
    }

    #[test]
    fn a_read_only_array_records_nothing() {
        let images = raid5_images(false);
        let mut meta = start(&images);
        meta.writable = false;
        assert_eq!(meta.record(MetaChange::Dirty, &whole(), 1), Err(MetaError::ReadOnly));
        assert!(meta.next_step().is_none());
    }
}
