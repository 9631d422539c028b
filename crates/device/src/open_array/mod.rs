//! `OpenArray`: an array assembled from member devices, driven synchronously, whatever on-disk
//! format it came in.
//!
//! It owns the bridge between the engine's member slots and real devices (adding each slot's
//! data offset, and refusing any member I/O that would leave the data area, so a bug can never
//! overwrite metadata), and drives the format's metadata ([`ArrayMetadata`]) around writes and
//! membership changes:
//!
//! - before the first write an array with redundancy is recorded dirty, so a crash mid-write is
//!   seen by the next assembly, by uraid or by the format's own kernel driver;
//! - after the last write and a flush it is recorded clean again;
//! - absent and failed members are recorded, so a later assembly leaves a stale one out.
//!
//! Each format has a file: `md.rs` (Linux md: superblocks, events, bitmap, partial parity log,
//! adding members; `readd.rs`: taking former members back, md's `--re-add`), `vinum.rs` (FreeBSD gvinum: a volume's subdisks on drives,
//! configuration saves) and `raidframe.rs` (NetBSD RAIDframe: a set's components, component
//! labels and parity map). This file holds what they share: requests, the metadata's steps, and
//! failures.

mod md;
mod raidframe;
mod readd;
mod vinum;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use uraid_engine::array::{Completion, IoResult, MemberIoError, Request};
use uraid_engine::metadata::{ArrayMetadata, DeviceRole, MetaChange, MetaError, MetaOp, Ticket, UnixSeconds};
use uraid_engine::ppl::PplConfig;
use uraid_engine::Engine;
use uraid_engine::{EngineError, EngineEvent, SlotState};

pub(crate) use self::md::fill_random;
use self::md::MetadataFailure;
pub use self::md::{MdArray, OpenMember};
pub use self::raidframe::{RaidframeSet, RebuildOnto, SetOpenError, SetSource};
pub use self::readd::{ReaddMode, ReaddRefusal, Readded};
pub use self::vinum::{VinumVolume, VolumeOpenError};
pub use crate::error::{OpenError, ReshapeRefusal};
use crate::member::MemberDevice;
pub use crate::target::{MemberTarget, Placement, PlacementError};
pub use uraid_engine::metadata::WriteIntentBits;

/// What the array is on disk, with what only that format keeps.
enum Format {
    Md(Box<MdArray>),
    Vinum(Box<VinumVolume>),
    Raidframe(Box<RaidframeSet>),
}

/// An assembled array over real devices.
pub struct OpenArray {
    format: Format,
    array: Engine,
    writable: bool,
    /// Set when member roles changed since the metadata last recorded them.
    devs_changed: bool,
    /// The driver performs the queued metadata writes itself (see [`OpenArray::defer_metadata`]).
    deferred: bool,
    /// [`OpenArray::write`] wrote something: [`OpenArray::close`] flushes the members then, on
    /// layouts without redundancy too, which are never recorded dirty.
    written: bool,
    /// Member failures seen while running, for the caller to report.
    pub failures: Vec<(String, String)>,
    /// Members failed because their metadata could not be written, not yet reported by
    /// [`OpenArray::note_events`].
    metadata_failures: Vec<(String, String)>,
    /// Members the engine failed for being unreachable (see `EngineEvent::MemberFailed`), by
    /// name, until the driver asks ([`OpenArray::take_unreachable_failure`]).
    unreachable_failures: Vec<String>,
    /// The devices the metadata I/O handed out last (a step, or the live members' flushes)
    /// went to, by metadata device index.
    step_devices: Vec<(usize, Arc<dyn MemberDevice>)>,
    corrected_read_errors: Vec<(String, u64, u64)>,
}

impl OpenArray {
    fn with_format(format: Format, mut array: Engine, writable: bool) -> OpenArray {
        // A member failure holds a partial parity log until the failure is recorded: `run`, and
        // drivers running the engine themselves, record it and release the log.
        if let Some(array) = array.as_array_mut() {
            array.set_log_hold_on_failure(writable);
        }
        OpenArray {
            format,
            array,
            writable,
            devs_changed: false,
            deferred: false,
            written: false,
            failures: Vec::new(),
            metadata_failures: Vec::new(),
            unreachable_failures: Vec::new(),
            step_devices: Vec::new(),
            corrected_read_errors: Vec::new(),
        }
    }

    /// The md parts of an md array (its assembly plan, members, log replay); `None` for
    /// another format.
    pub fn md(&self) -> Option<&MdArray> {
        match &self.format {
            Format::Md(md) => Some(md),
            Format::Vinum(_) | Format::Raidframe(_) => None,
        }
    }

    /// The gvinum parts of a Vinum volume; `None` for another format.
    pub fn vinum(&self) -> Option<&VinumVolume> {
        match &self.format {
            Format::Vinum(v) => Some(v),
            Format::Md(_) | Format::Raidframe(_) => None,
        }
    }

    /// The RAIDframe parts of a RAIDframe set; `None` for another format.
    pub fn raidframe(&self) -> Option<&RaidframeSet> {
        match &self.format {
            Format::Raidframe(r) => Some(r),
            Format::Md(_) | Format::Vinum(_) => None,
        }
    }

    /// What the array is, for messages: "raid5 array 1234abcd:…" or "vinum volume v (…)".
    pub fn describe(&self) -> String {
        match &self.format {
            Format::Md(md) => format!("{} array {}", md.plan.level.name(), md.plan.uuid_string()),
            Format::Vinum(v) => format!("vinum volume {} ({})", v.volume, v.plan.layout.summary()),
            Format::Raidframe(r) => format!("RAIDframe set {} ({})", r.serial_number(), r.plan.layout),
        }
    }

    /// The array's identity for status reports: md's array UUID, or the Vinum volume's name.
    pub fn identity(&self) -> String {
        match &self.format {
            Format::Md(md) => md.plan.uuid_string(),
            Format::Vinum(v) => format!("vinum:{}", v.volume),
            Format::Raidframe(r) => format!("raidframe:{}", r.serial_number()),
        }
    }

    /// The names of the array's devices: md's members, or the drives a Vinum volume found.
    pub fn device_names(&self) -> Vec<String> {
        match &self.format {
            Format::Md(md) => md.members.iter().map(|m| m.dev.name().to_string()).collect(),
            Format::Vinum(v) => v.drives.iter().map(|(_, d)| d.name().to_string()).collect(),
            Format::Raidframe(r) => r.device_names(),
        }
    }

    /// The array's devices, in the order of [`OpenArray::device_names`].
    pub fn devices(&self) -> Vec<Arc<dyn MemberDevice>> {
        match &self.format {
            Format::Md(md) => md.members.iter().map(|m| Arc::clone(&m.dev)).collect(),
            Format::Vinum(v) => v.drives.iter().map(|(_, d)| Arc::clone(d)).collect(),
            Format::Raidframe(r) => r.devices(),
        }
    }

    /// [`OpenArray::devices`] without those removed from the array (md members failed out of
    /// their slot or removed; a failed member still in its slot stays): what a change written
    /// as on a stopped array, and the array served again, are to be made of.
    pub fn devices_in_place(&self) -> Vec<Arc<dyn MemberDevice>> {
        match &self.format {
            Format::Md(md) => {
                (0..md.members.len()).filter(|&i| md.holds_place(i)).map(|i| Arc::clone(&md.members[i].dev)).collect()
            }
            _ => self.devices(),
        }
    }

    /// The name of metadata device `idx` (the device a [`MetaOp`]'s index stands for): md's
    /// member `idx`; for a Vinum volume, the drive of that device (several may be one drive).
    pub fn metadata_device_name(&self, idx: usize) -> Option<&str> {
        self.meta_device(idx).map(|d| d.name())
    }

    /// Slots no device fills.
    pub fn missing_slots(&self) -> Vec<usize> {
        (0..self.array.slot_states().len()).filter(|&s| self.slot_device(s).is_none()).collect()
    }

    pub fn size(&self) -> u64 {
        self.array.size_bytes()
    }

    pub fn engine(&self) -> &Engine {
        &self.array
    }

    /// Read `len` bytes at logical `offset`.
    pub fn read(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, OpenError> {
        if self.log_unreplayed() {
            return Err(OpenError::DirtyDegradedReadOnly { missing: self.missing_slots().len() });
        }
        match self.run(Request::Read { offset, len })? {
            Completion::Read(d) => Ok(d.into_vec()),
            other => unreachable!("read completed as {other:?}"),
        }
    }

    /// Write `data` at logical `offset`, recording the array dirty first if it is not yet.
    pub fn write(&mut self, offset: u64, data: Vec<u8>) -> Result<(), OpenError> {
        if !self.writable {
            return Err(OpenError::ReadOnly);
        }
        self.written = true;
        // Like md (and the array service), only layouts with redundancy are recorded dirty:
        // the others have nothing a crash could leave inconsistent.
        if !self.meta().writes_recorded() && self.array.geometry().max_degraded() > 0 {
            // One request at a time, no lazy clearing here: cover everything, as before a crash
            // anywhere in this run would need.
            if let Format::Md(md) = &mut self.format {
                md.set_all_intent();
            }
            self.record(MetaChange::Dirty)?;
        }
        // A format that marks regions apart from its dirty record (RAIDframe's parity map) marks
        // this write's before it goes out, when they are not marked yet (md's bits are all set
        // above).
        if let Some(regions) = self.intent_regions(offset, data.len() as u64) {
            let unmarked = self.write_intent().is_some_and(|bits| regions.clone().any(|c| !bits.is_dirty(c)));
            if unmarked {
                self.set_write_intent(regions, true)?;
            }
        }
        self.run(Request::Write { offset, data: data.into() }).map(|_| ())
    }

    /// Make `[offset, offset+len)` read back as zeros (whole stripes on parity layouts; see
    /// `Request::Discard`).
    pub fn discard(&mut self, offset: u64, len: u64) -> Result<(), OpenError> {
        if !self.writable {
            return Err(OpenError::ReadOnly);
        }
        self.written = true;
        self.run(Request::Discard { offset, len }).map(|_| ())
    }

    /// Flush every member.
    pub fn flush(&mut self) -> Result<(), OpenError> {
        self.run(Request::Flush).map(|_| ())
    }

    /// Check (and with `repair`, fix) redundancy over `[offset, offset+len)`; returns mismatched
    /// sectors.
    pub fn sync(&mut self, offset: u64, len: u64, repair: bool) -> Result<u64, OpenError> {
        if repair && !self.writable {
            return Err(OpenError::ReadOnly);
        }
        match self.run(Request::Sync { offset, len, repair })? {
            Completion::Synced { mismatch_sectors } => Ok(mismatch_sectors),
            other => unreachable!("sync completed as {other:?}"),
        }
    }

    /// Check (or, with `repair`, rewrite) the parity of plex `plex` (its index among the
    /// volume's plexes) of a mirror of arrays alone, over the mirror's bytes
    /// `[offset, offset+len)`; returns mismatched sectors.
    pub fn sync_plex(&mut self, plex: usize, offset: u64, len: u64, repair: bool) -> Result<u64, OpenError> {
        if repair && !self.writable {
            return Err(OpenError::ReadOnly);
        }
        match self.run_with(|engine| engine.submit_plex_sync(plex, offset, len, repair))? {
            Completion::Synced { mismatch_sectors } => Ok(mismatch_sectors),
            other => unreachable!("sync completed as {other:?}"),
        }
    }

    /// Flush and, if anything was written, record the array clean again (unless it still needs
    /// a resync: then it stays dirty, with any member changes recorded). Returns whether the
    /// metadata now says clean.
    pub fn close(mut self) -> Result<bool, OpenError> {
        let dirty = self.meta().is_dirty();
        if self.writable && (dirty || self.devs_changed || self.written) {
            self.flush()?;
        }
        if self.writable && (dirty || self.devs_changed) {
            self.settle()?;
        }
        Ok(!self.meta().is_dirty())
    }

    /// Record the whole array clean after the caller has made it consistent (create's initial
    /// sync, a full resync), whatever the metadata said before.
    pub fn mark_clean_now(&mut self) -> Result<(), OpenError> {
        self.resync_done();
        self.flush()?;
        self.settle()
    }

    /// A full resync (or repair) has made redundancy consistent: the array may be recorded
    /// clean again once idle, and writes may use read-modify-write again.
    pub fn resync_done(&mut self) {
        self.array.set_resync_pending(false);
        // Recording that a resync is done writes nothing by itself.
        let _ = self.record(MetaChange::ResyncDone);
    }

    /// Where a resync owed may resume, in array bytes (0: from the start).
    pub fn resync_checkpoint(&self) -> u64 {
        self.meta().resync_checkpoint()
    }

    /// Whether a member of the array carries metadata older than the array's: its last update
    /// was lost (md accepts one event behind at assembly). gvinum has no such notion.
    pub fn members_behind(&self) -> bool {
        match &self.format {
            Format::Md(md) => md.members_behind(),
            // A RAIDframe component behind the set is stale, and left out at opening.
            Format::Vinum(_) | Format::Raidframe(_) => false,
        }
    }

    /// The name of the device in `slot`, if one fills it.
    pub fn slot_device_name(&self, slot: usize) -> Option<&str> {
        self.slot_device(slot).and_then(|i| self.meta_device(i)).map(|d| d.name())
    }

    /// Whether the array was found dirty and has not been resynced since.
    pub fn needs_resync(&self) -> bool {
        self.meta().needs_resync()
    }

    /// After a flush: record clean if that is true, else record member changes keeping it
    /// dirty.
    fn settle(&mut self) -> Result<(), OpenError> {
        self.record(MetaChange::Clean)
    }

    /// Run one request to its end, performing its member I/O on this thread. A member failure
    /// that holds the log (see [`Array::set_log_hold_on_failure`]) is recorded on the spot,
    /// then the log released.
    fn run(&mut self, request: Request) -> Result<Completion, OpenError> {
        self.run_with(|engine| engine.submit(request))
    }

    /// [`OpenArray::run`] for a request `submit` hands the engine.
    fn run_with(
        &mut self,
        submit: impl FnOnce(&mut Engine) -> Result<uraid_engine::RequestId, EngineError>,
    ) -> Result<Completion, OpenError> {
        let targets = self.member_targets();
        let mut io_error: Option<MemberIoError> = None;
        let mut meta_error: Option<OpenError> = None;
        let id = submit(&mut self.array).map_err(OpenError::from)?;
        let result = 'run: loop {
            while let Some((done, result)) = self.array.next_completion() {
                if done == id {
                    break 'run result;
                }
            }
            if let Some(io) = self.array.next_io() {
                let target = targets[io.slot].as_ref().expect("engine used an empty slot");
                let result = target.perform(&io).unwrap_or_else(|e| {
                    io_error.get_or_insert_with(|| e.clone());
                    IoResult::Failed(e)
                });
                self.array.complete_io(io.id, result.handing_back(io.op));
            } else if self.array.log_held() {
                self.note_events();
                // A record that failed is reported once the request is over; the log goes on
                // either way (as the service's does once the record can no longer be made).
                if let Err(e) = self.record(MetaChange::Roles) {
                    meta_error.get_or_insert(e);
                }
                self.array.release_log_hold();
            } else {
                panic!("engine stalled: request {id} unfinished and no member I/O to do");
            }
        };
        self.note_events();
        if let Some(e) = meta_error {
            return Err(e);
        }
        match result {
            Ok(c) => Ok(c),
            Err(EngineError::ArrayFailed) if io_error.is_some() => Err(io_error.expect("checked").into()),
            Err(e) => Err(e.into()),
        }
    }

    /// The engine, for drivers that run it themselves (with [`OpenArray::member_targets`] doing
    /// the member I/O and [`OpenArray::note_events`] after completions).
    pub fn engine_mut(&mut self) -> &mut Engine {
        &mut self.array
    }

    /// Per slot, where its member I/O goes (`None` for an empty slot). Targets can be moved to
    /// other threads; they share the devices with this array.
    pub fn member_targets(&self) -> Vec<Option<MemberTarget>> {
        match &self.format {
            Format::Md(md) => md.member_targets(),
            Format::Vinum(v) => v.member_targets(),
            Format::Raidframe(r) => r.member_targets(),
        }
    }

    /// A dirty degraded md array with a log opened read-only: its data must not be served (the
    /// log, which would make parity right, was not replayed).
    pub fn log_unreplayed(&self) -> bool {
        self.md().is_some_and(|md| md.unreplayed)
    }

    /// The partial parity log's settings, when the array keeps one.
    pub fn ppl(&self) -> Option<&PplConfig> {
        self.md().and_then(|md| md.ppl.as_ref())
    }

    /// Take the engine's events (members that failed), remember them for the next metadata
    /// update, and return them as (device name, reason).
    pub fn note_events(&mut self) -> Vec<(String, String)> {
        // A member failed for its metadata is failed in the engine too, which reports it again
        // ("failed by request"); the reason given here is the one that says why.
        let mut out = std::mem::take(&mut self.metadata_failures);
        self.failures.extend(out.iter().cloned());
        let already: Vec<String> = out.iter().map(|(name, _)| name.clone()).collect();
        for event in self.array.take_events() {
            match event {
                EngineEvent::MemberFailed { slot, reason, unreachable } => {
                    let name = self.slot_member_name(slot);
                    if already.contains(&name) {
                        continue;
                    }
                    if unreachable {
                        self.unreachable_failures.push(name.clone());
                    }
                    self.failures.push((name.clone(), reason.clone()));
                    out.push((name, reason));
                    self.roles_moved();
                }
                EngineEvent::ReadErrorCorrected { slot, offset, len } => {
                    let name = self.slot_member_name(slot);
                    self.corrected_read_errors.push((name, offset, len));
                }
            }
        }
        // Asked of right after (`take_unreachable_failure`); what a driver did not ask of goes.
        self.unreachable_failures.retain(|n| out.iter().any(|(m, _)| m == n));
        out
    }

    /// Whether the member `name` was failed by the engine for being unreachable (once: the
    /// answer is taken).
    pub fn take_unreachable_failure(&mut self, name: &str) -> bool {
        let before = self.unreachable_failures.len();
        self.unreachable_failures.retain(|n| n != name);
        self.unreachable_failures.len() != before
    }

    /// How messages name the member in `slot`: md's device, or a Vinum subdisk with its drive's
    /// device.
    fn slot_member_name(&self, slot: usize) -> String {
        match &self.format {
            Format::Md(_) => self.slot_device_name(slot).unwrap_or_default().to_string(),
            Format::Vinum(v) => v.slot_member_name(slot),
            Format::Raidframe(r) => r.slot_member_name(slot),
        }
    }

    /// Read errors rebuilt from redundancy and rewritten in place since the last call, as
    /// (member, member byte offset from the data start, length); the member stayed in sync.
    pub fn take_corrected_read_errors(&mut self) -> Vec<(String, u64, u64)> {
        std::mem::take(&mut self.corrected_read_errors)
    }

    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Whether the metadata says "dirty" (written since the last clean mark).
    pub fn is_dirty(&self) -> bool {
        self.meta().is_dirty()
    }

    /// Whether the metadata says writes may be in flight, so that a write needs no dirty mark
    /// recorded first (see [`ArrayMetadata::writes_recorded`]).
    pub fn writes_recorded(&self) -> bool {
        self.meta().writes_recorded()
    }

    /// Whether member roles changed (a failure) since the metadata last recorded them.
    pub fn roles_changed(&self) -> bool {
        self.devs_changed
    }

    /// Record the array dirty; a driver calls this before it lets the first write through.
    pub fn mark_dirty(&mut self) -> Result<(), OpenError> {
        if !self.writable {
            return Err(OpenError::ReadOnly);
        }
        self.record(MetaChange::Dirty)
    }

    /// Flush every live member directly and record the array clean, unless it still needs a
    /// resync (then only member changes are recorded); a driver calls this when no write is in
    /// flight. Returns whether the metadata now says clean.
    pub fn flush_and_mark_clean(&mut self) -> Result<bool, OpenError> {
        self.flush_members()?;
        self.settle()?;
        Ok(!self.meta().is_dirty())
    }

    /// Record member role changes without changing the clean state.
    pub fn record_roles(&mut self) -> Result<(), OpenError> {
        self.record(MetaChange::Roles)
    }

    /// Add `dev` to the running array: md's `--add` (it takes the first missing or failed slot
    /// and is rebuilt there, returned as `Some(slot)`, or becomes a spare when every slot is
    /// filled); on a RAIDframe set, a hot spare reconstructed at once into the first failed
    /// column (`raidctl -a` then `-F`, [`OpenArray::reconstruct_onto`]). A device that may hold
    /// someone's data is refused.
    pub fn add_member(&mut self, dev: Box<dyn MemberDevice>) -> Result<Option<usize>, OpenError> {
        match self.format {
            Format::Raidframe(_) => self.reconstruct_onto(Arc::from(dev)),
            _ => self.add_md_member(dev),
        }
    }

    /// Fail the member `name` (md's `--fail`; on a RAIDframe set `raidctl -f` of the component
    /// by that name). Refused when that would lose data, unless `force`. Returns its slot.
    pub fn fail_member(&mut self, name: &str, force: bool) -> Result<usize, OpenError> {
        match self.format {
            Format::Raidframe(_) => self.fail_component(name, force),
            _ => self.fail_md_member(name, force),
        }
    }

    /// The write-intent log (md's bitmap, RAIDframe's parity map), if the array keeps one.
    pub fn write_intent(&self) -> Option<&WriteIntentBits> {
        self.meta().write_intent()
    }

    /// The write-intent regions a logical range touches: per member on layouts with parity (a
    /// parity write touches whole stripes) and on mirrors whose copies sit at their logical
    /// offsets, of the array for md's raid10 (see [`WriteIntentBits::chunk_bytes`]). `None`
    /// without a write-intent log.
    pub fn intent_regions(&self, offset: u64, len: u64) -> Option<std::ops::Range<u64>> {
        let bits = self.write_intent()?;
        if len == 0 || bits.chunk_bytes == 0 {
            return None;
        }
        let g = self.array.geometry();
        let (start, end) = match g.stripe_data_bytes() {
            Some(width) => {
                let chunk = g.chunk_bytes();
                (offset / width * chunk, (offset + len).div_ceil(width) * chunk)
            }
            None => (offset, offset + len),
        };
        Some(start / bits.chunk_bytes..end.div_ceil(bits.chunk_bytes))
    }

    /// The logical offset where write-intent region `region` begins.
    pub fn intent_region_start(&self, region: u64) -> u64 {
        let bytes = self.write_intent().map_or(0, |b| b.chunk_bytes) * region;
        let g = self.array.geometry();
        match g.stripe_data_bytes() {
            Some(width) => bytes / g.chunk_bytes() * width,
            None => bytes,
        }
    }

    /// Set (`dirty`) or clear the write-intent regions `chunks` and write the intent log to
    /// every live member if that changed anything. Setting must complete before the covered
    /// writes are let through. Returns the ticket of the writes it queued, if it changed
    /// anything (a format without an intent log never does).
    pub fn set_write_intent(&mut self, chunks: std::ops::Range<u64>, dirty: bool) -> Result<Option<Ticket>, OpenError> {
        let change = if dirty { MetaChange::IntentSet(chunks) } else { MetaChange::IntentClear(chunks) };
        let roles = self.device_roles();
        let ticket = self.meta_mut().record(change, &roles, unix_now()).map_err(|e| self.metadata_error(e))?;
        self.write_metadata()?;
        Ok(ticket)
    }

    /// Record that the member rebuilding in `slot` is good up to member sector `sectors`
    /// (written with the next metadata update, where the format keeps it).
    pub fn set_recovery_checkpoint(&mut self, slot: usize, sectors: u64) {
        if self.recovering()[slot].is_some() {
            self.recovering_mut()[slot] = Some(sectors);
            self.roles_moved();
        }
    }

    /// Where the rebuild of `slot` may resume (member sector), if it is rebuilding.
    pub fn recovery_checkpoint(&self, slot: usize) -> Option<u64> {
        self.recovering()[slot]
    }

    /// The member in `slot` is rebuilt: it is in sync from now on.
    pub fn recovery_done(&mut self, slot: usize) -> Result<(), OpenError> {
        self.array.set_slot_state(slot, SlotState::InSync, false)?;
        self.recovering_mut()[slot] = None;
        if let Format::Md(md) = &mut self.format {
            md.readded[slot] = false;
        }
        self.roles_moved();
        self.record_roles()
    }

    /// Flush the data of every live member directly (not through the engine).
    pub fn flush_members(&self) -> Result<(), OpenError> {
        let mut flushed: Vec<usize> = Vec::new();
        for slot in 0..self.array.slot_states().len() {
            let Some(i) = self.slot_device(slot) else { continue };
            if self.array.slot_states()[slot] != SlotState::InSync {
                continue;
            }
            let dev = self.meta_device(i).expect("a slot's device");
            // Several Vinum subdisks may share a drive: flush it once.
            let drive = self.device_key(i);
            if flushed.contains(&drive) {
                continue;
            }
            flushed.push(drive);
            dev.flush().map_err(|source| OpenError::Io { device: dev.name().to_string(), what: "flush", source })?;
        }
        Ok(())
    }

    /// Membership changed: the next metadata update records it as such.
    pub(super) fn roles_moved(&mut self) {
        self.devs_changed = true;
        self.meta_mut().membership_changed();
    }

    /// What each device is to the array now, in the format's device order, for the metadata.
    fn device_roles(&self) -> Vec<DeviceRole> {
        let states = self.array.slot_states();
        match &self.format {
            Format::Md(md) => md.device_roles(states),
            Format::Vinum(v) => v.device_roles(states),
            Format::Raidframe(r) => r.device_roles(states),
        }
    }

    /// Record `change` in the metadata and write what it queued.
    fn record(&mut self, change: MetaChange) -> Result<(), OpenError> {
        self.record_change(change).map(|_| ())
    }

    /// Record `change` and write what it queued, unless deferred (see
    /// [`OpenArray::defer_metadata`]); the ticket of its writes, if it queued any (durable at
    /// once when not deferred).
    pub fn record_change(&mut self, change: MetaChange) -> Result<Option<Ticket>, OpenError> {
        if !self.writable {
            return Err(OpenError::ReadOnly);
        }
        let roles = matches!(change, MetaChange::Dirty | MetaChange::Clean | MetaChange::Roles);
        let devices = self.device_roles();
        let ticket = self.meta_mut().record(change, &devices, unix_now()).map_err(|e| self.metadata_error(e))?;
        self.write_metadata()?;
        if roles {
            self.devs_changed = false;
        }
        Ok(ticket)
    }

    /// From now on (`on`), recording a change only queues its writes: the driver takes them
    /// with [`OpenArray::next_metadata_step`], performs them where it likes (the service, down
    /// the members' own I/O paths) and reports with [`OpenArray::metadata_step_done`]; until
    /// then the change is recorded but not durable ([`OpenArray::metadata_pending`]). Off again,
    /// the next change writes everything still queued, on the calling thread.
    pub fn defer_metadata(&mut self, on: bool) {
        self.deferred = on;
    }

    /// The next metadata step to perform, with each op's device; `None` while one is out or
    /// none is queued.
    pub fn next_metadata_step(&mut self) -> Option<Vec<(Arc<dyn MemberDevice>, MetaOp)>> {
        let step = self.meta_mut().next_step()?;
        let ops: Vec<(Arc<dyn MemberDevice>, MetaOp)> = step
            .ops
            .into_iter()
            .map(|op| (Arc::clone(self.meta_device(op.device()).expect("a metadata device")), op))
            .collect();
        self.step_devices = ops.iter().map(|(dev, op)| (op.device(), Arc::clone(dev))).collect();
        Some(ops)
    }

    /// The step handed out last is done (or failed: then no later metadata is written, and
    /// the error names the device).
    pub fn metadata_step_done(&mut self, result: Result<(), MetaError>) -> Result<(), OpenError> {
        if let Err(MetaError::Io { device, what, reason, unreachable }) = &result {
            if self.fail_for_metadata(*device, &format!("{what} failed: {reason}"), *unreachable) {
                self.meta_mut().step_failed_on(*device);
                return Ok(());
            }
        }
        let failed = result.clone().err();
        self.meta_mut().step_done(result);
        if let Some(e) = failed {
            return Err(self.metadata_error(e));
        }
        if let Format::Md(md) = &mut self.format {
            md.refresh_member_views();
        }
        Ok(())
    }

    /// A metadata write or flush to device `idx` failed: fail what that device holds, as md
    /// does when a superblock write (with its preflush) fails (`super_written` calls
    /// `md_error`), if the array can do without it. Reported by the next
    /// [`OpenArray::note_events`], whose caller records the new membership. False when failing
    /// it would fail the array: then the metadata cannot be written at all.
    pub fn fail_for_metadata(&mut self, idx: usize, why: &str, unreachable: bool) -> bool {
        // The device that failed may have left its place while the metadata I/O was out (a
        // spare took its RAIDframe column over): it is out already, and the device that holds
        // the place now is not to blame.
        let replaced = self
            .step_devices
            .iter()
            .any(|(i, dev)| *i == idx && self.meta_device(idx).is_none_or(|now| !Arc::ptr_eq(dev, now)));
        if replaced {
            return true;
        }
        let Some(name) = self.meta_device(idx).map(|d| d.name().to_string()) else { return false };
        let outcome = match &mut self.format {
            Format::Md(md) => md.fail_for_metadata(&mut self.array, idx),
            Format::Vinum(v) => v.fail_for_metadata(&mut self.array, idx),
            Format::Raidframe(r) => r.fail_for_metadata(&mut self.array, idx),
        };
        match outcome {
            MetadataFailure::Failed => {}
            MetadataFailure::AlreadyOut => return true,
            MetadataFailure::Refused => return false,
        }
        if unreachable {
            self.unreachable_failures.push(name.clone());
        }
        self.metadata_failures.push((name, format!("its metadata could not be written: {why}")));
        self.roles_moved();
        true
    }

    /// Whether the metadata update `ticket` is on the members.
    pub fn metadata_durable(&self, ticket: Ticket) -> bool {
        self.meta().durable(ticket)
    }

    /// Why the metadata can no longer be written, once one of its writes failed (in the terms of
    /// this driver: the device named).
    pub fn metadata_failed(&self) -> Option<OpenError> {
        self.meta_failure().map(|e| self.metadata_error(e))
    }

    /// The newest metadata update recorded, if it is not yet durable and still may be (no
    /// metadata write has failed).
    pub fn metadata_pending(&self) -> Option<Ticket> {
        if self.meta_failure().is_some() {
            return None;
        }
        let newest = match &self.format {
            Format::Md(md) => md.meta.newest(),
            Format::Vinum(v) => v.meta.newest(),
            Format::Raidframe(r) => r.meta.newest(),
        };
        newest.filter(|t| !self.meta().durable(*t))
    }

    fn meta_failure(&self) -> Option<MetaError> {
        match &self.format {
            Format::Md(md) => md.meta.failed().cloned(),
            Format::Vinum(v) => v.meta.failed().cloned(),
            Format::Raidframe(r) => r.meta.failed().cloned(),
        }
    }

    /// A flush of every live member (in a slot, in sync or rebuilding), each op with its device,
    /// as [`OpenArray::next_metadata_step`] gives them: what must precede recording the array
    /// clean, clearing intent bits or recording a rebuild checkpoint.
    pub fn live_flushes(&mut self) -> Vec<(Arc<dyn MemberDevice>, MetaOp)> {
        let states = self.array.slot_states();
        let mut out: Vec<(Arc<dyn MemberDevice>, MetaOp)> = Vec::new();
        let mut seen: Vec<usize> = Vec::new();
        for (slot, state) in states.iter().enumerate() {
            if !matches!(state, SlotState::InSync | SlotState::Recovering) {
                continue;
            }
            let Some(idx) = self.slot_device(slot) else { continue };
            let key = self.device_key(idx);
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            out.push((Arc::clone(self.meta_device(idx).expect("a slot's device")), MetaOp::Flush { device: idx }));
        }
        self.step_devices = out.iter().map(|(dev, op)| (op.device(), Arc::clone(dev))).collect();
        out
    }

    /// Perform the metadata's queued writes and flushes, step by step, on this thread; then
    /// refresh each member's view of its metadata. Deferred, the driver performs them.
    fn write_metadata(&mut self) -> Result<(), OpenError> {
        if self.deferred {
            return Ok(());
        }
        while let Some(step) = self.meta_mut().next_step() {
            let mut result = Ok(());
            for op in &step.ops {
                let dev = self.meta_device(op.device()).expect("a metadata device");
                let done = match op {
                    MetaOp::Write { offset, data, what, .. } => {
                        dev.write_at(*offset, data).map_err(|e| (what.to_string(), e))
                    }
                    MetaOp::Flush { .. } => dev.flush().map_err(|e| ("flushing metadata".to_string(), e)),
                };
                if let Err((what, e)) = done {
                    let unreachable = uraid_engine::array::unreachable_kind(e.kind());
                    result = Err(MetaError::Io { device: op.device(), what, reason: e.to_string(), unreachable });
                    break;
                }
            }
            self.metadata_step_done(result)?;
        }
        Ok(())
    }

    /// A metadata error in the terms of this driver: an I/O error names the device.
    pub fn metadata_error(&self, e: MetaError) -> OpenError {
        match e {
            MetaError::ReadOnly => OpenError::ReadOnly,
            MetaError::Io { device, what, reason, .. } => OpenError::Metadata {
                device: self.meta_device(device).map_or_else(|| format!("device {device}"), |d| d.name().to_string()),
                what,
                reason,
            },
            MetaError::Format(text) => OpenError::BadMember(text),
        }
    }

    fn meta(&self) -> &dyn ArrayMetadata {
        match &self.format {
            Format::Md(md) => &md.meta,
            Format::Vinum(v) => &v.meta,
            Format::Raidframe(r) => &r.meta,
        }
    }

    fn meta_mut(&mut self) -> &mut dyn ArrayMetadata {
        match &mut self.format {
            Format::Md(md) => &mut md.meta,
            Format::Vinum(v) => &mut v.meta,
            Format::Raidframe(r) => &mut r.meta,
        }
    }

    /// Device `idx` in the metadata's device order: md's members, or the devices of a Vinum
    /// volume's subdisks and other drives.
    fn meta_device(&self, idx: usize) -> Option<&Arc<dyn MemberDevice>> {
        match &self.format {
            Format::Md(md) => md.members.get(idx).map(|m| &m.dev),
            Format::Vinum(v) => v.meta_device(idx),
            Format::Raidframe(r) => r.meta_device(idx),
        }
    }

    /// What tells devices apart for flushing: several Vinum devices may be one drive.
    fn device_key(&self, idx: usize) -> usize {
        match &self.format {
            Format::Md(_) | Format::Raidframe(_) => idx,
            Format::Vinum(v) => v.drive_of_device(idx),
        }
    }

    /// The metadata device holding `slot`, if one does.
    fn slot_device(&self, slot: usize) -> Option<usize> {
        match &self.format {
            Format::Md(md) => md.plan.slots.get(slot).copied().flatten(),
            Format::Vinum(v) => v.slot_device(slot),
            Format::Raidframe(r) => r.slot_device(slot),
        }
    }

    fn recovering(&self) -> &[Option<u64>] {
        match &self.format {
            Format::Md(md) => &md.plan.recovering,
            Format::Vinum(v) => &v.recovering,
            Format::Raidframe(r) => &r.recovering,
        }
    }

    fn recovering_mut(&mut self) -> &mut [Option<u64>] {
        match &mut self.format {
            Format::Md(md) => &mut md.plan.recovering,
            Format::Vinum(v) => &mut v.recovering,
            Format::Raidframe(r) => &mut r.recovering,
        }
    }
}

/// Seconds since the Unix epoch, for the metadata's update time.
fn unix_now() -> UnixSeconds {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
