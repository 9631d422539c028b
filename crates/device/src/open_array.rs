//! `OpenArray`: an array assembled from member devices, driven synchronously.
//!
//! It owns the bridge between the engine's member slots and real devices (adding each member's
//! data offset, and refusing any member I/O that would leave the data area, so a bug can never
//! overwrite a superblock), and md's superblock bookkeeping around writes:
//!
//! - before the first write the array is marked dirty (events + 1, resync needed), so a crash
//!   mid-write is seen by the next assembly, by uraid or by the kernel;
//! - after the last write and a flush it is marked clean again; as md's `md_update_sb` does, a pure
//!   clean/dirty round trip on a whole array rolls the event count back, while a degraded array or
//!   a change of members always moves it forward;
//! - absent and failed members are recorded as faulty in the survivors' role tables, so a later
//!   assembly leaves a stale member out.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use uraid_engine::array::{Array, Completion, IoResult, MemberIo, MemberIoError, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::metadata::{ArrayMetadata, DeviceRole, MetaChange, MetaError, MetaOp, Ticket, UnixSeconds};
use uraid_engine::ppl::PplConfig;
use uraid_engine::{EngineError, EngineEvent, SECTOR_BYTES};
use uraid_md::assemble::{self, AssemblyPlan, Candidate, MemberVerdict};
use uraid_md::metadata::{bitmap_byte_offset, MdDevice, MdMetadata, MdStart};
pub use uraid_md::WriteIntentBits;
use uraid_md_format::bitmap::{self, BitmapSuper};

use uraid_md_format::{MemberInfo, Role, MAX_SECTOR};

pub use crate::error::OpenError;
use crate::member::{FileDevice, MemberDevice};
use crate::ppl::LogReplay;
use crate::probe::{no_superblock, probe, Probed};
pub use crate::target::{MemberTarget, Placement, PlacementError};

/// One device given for assembly, with what was found on it.
pub struct OpenMember {
    pub dev: Arc<dyn MemberDevice>,
    pub probed: Probed,
    pub info: MemberInfo,
}

impl OpenMember {
    /// Byte offset and length of the member's partial parity log area, if its superblock has one.
    fn log_area(&self) -> Option<(u64, u64)> {
        crate::ppl::log_area_of(&self.probed.superblock)
    }
}

/// An assembled array over real devices.
pub struct OpenArray {
    pub plan: AssemblyPlan,
    pub members: Vec<OpenMember>,
    array: Array,
    writable: bool,
    /// The superblocks and bitmap as md keeps them: every change to them is recorded there and
    /// written by [`OpenArray::write_metadata`]. Found dirty at assembly on a level with
    /// redundancy, it owes a resync: parity or copies may disagree until then, so the array is
    /// not recorded clean before one (md keeps `resync_offset` short of the end until its
    /// resync finishes).
    meta: MdMetadata,
    /// Set when member roles changed since the last superblock update.
    devs_changed: bool,
    /// The driver performs the queued metadata writes itself (see [`OpenArray::defer_metadata`]).
    deferred: bool,
    /// [`OpenArray::write`] wrote something: [`OpenArray::close`] flushes the members then, on
    /// linear and raid0 too, which are never marked dirty.
    written: bool,
    /// Member failures seen while running, for the caller to report.
    pub failures: Vec<(String, String)>,
    /// Members failed because their metadata could not be written, not yet reported by
    /// [`OpenArray::note_events`].
    metadata_failures: Vec<(String, String)>,
    corrected_read_errors: Vec<(String, u64, u64)>,
    /// Per slot: its rebuilding member was re-added, so only bitmap-marked regions need it.
    readded: Vec<bool>,
    /// The partial parity log, when the array has one (md's consistency policy `ppl`).
    ppl: Option<PplConfig>,
    /// What replaying the log did at assembly, if it was replayed.
    pub log_replay: Option<LogReplay>,
    /// A dirty degraded array with a log, opened read-only: the log is not replayed, so data
    /// rebuilt from parity could be wrong and is not read.
    unreplayed: bool,
}

impl OpenArray {
    /// Open the files or block devices at `paths` and assemble them.
    pub fn open_paths(paths: &[impl AsRef<Path>], writable: bool) -> Result<OpenArray, OpenError> {
        let mut devs: Vec<Box<dyn MemberDevice>> = Vec::new();
        for p in paths {
            let p = p.as_ref();
            let dev = FileDevice::open(p, writable)
                .map_err(|source| OpenError::Open { path: p.display().to_string(), source })?;
            devs.push(Box::new(dev));
        }
        OpenArray::assemble(devs, writable)
    }

    /// Assemble from opened devices. Every device must carry an md superblock.
    pub fn assemble(devs: Vec<Box<dyn MemberDevice>>, writable: bool) -> Result<OpenArray, OpenError> {
        OpenArray::assemble_with(devs, writable, assemble::AssemblyRules::default())
    }

    /// [`OpenArray::assemble`] under `rules`: md's unless a checker plants a departure from
    /// them (mutation testing, see [`assemble::AssemblyRules`]).
    pub fn assemble_with(
        devs: Vec<Box<dyn MemberDevice>>,
        writable: bool,
        rules: assemble::AssemblyRules,
    ) -> Result<OpenArray, OpenError> {
        let mut members = Vec::new();
        for dev in devs {
            let probed = match probe(dev.as_ref())? {
                Some(p) => p,
                None => return Err(OpenError::BadMember(no_superblock(dev.as_ref()).to_string())),
            };
            let info = probed.superblock.info();
            members.push(OpenMember { dev: Arc::from(dev), probed, info });
        }
        let candidates: Vec<Candidate> =
            members.iter().map(|m| Candidate { name: m.dev.name().to_string(), info: m.info.clone() }).collect();
        let mut plan = assemble::plan_with(&candidates, rules)?;
        // A rebuild resumes from its checkpoint after a clean stop. After an unclean one, the
        // part already rebuilt may disagree with the rest of its stripes or copies wherever a
        // write was cut short (it went to the rebuilding member as well). On a mirror the
        // resync owed sets that right, as md's does: it runs after the rebuild, once the member
        // is in sync, and makes every copy alike (the policy holds it back until then). On a
        // parity array neither a log replay nor a resync would (md refuses such an array unless
        // it has a log): the rebuild starts again from the beginning.
        if !plan.clean && plan.geometry.is_parity() {
            for checkpoint in plan.recovering.iter_mut().flatten() {
                *checkpoint = 0;
            }
        }
        // A member must be big enough for the data the array expects on it.
        for (slot, idx) in plan.slots.iter().enumerate() {
            let Some(idx) = *idx else { continue };
            let m = &members[idx];
            let need = (m.info.data_offset + data_sectors(&plan, &m.info)) * SECTOR_BYTES;
            if m.dev.size() < need {
                return Err(OpenError::BadMember(format!(
                    "{}: device is {} bytes but slot {slot} needs {need} (truncated image?)",
                    m.dev.name(),
                    m.dev.size()
                )));
            }
        }
        let slots: Vec<SlotState> = plan
            .slots
            .iter()
            .zip(&plan.recovering)
            .map(|(s, rec)| match (s, rec) {
                (None, _) => SlotState::Missing,
                (Some(_), Some(_)) => SlotState::Recovering,
                (Some(_), None) => SlotState::InSync,
            })
            .collect();
        let ppl = ppl_config(&members, &plan)?;
        // md refuses to start a degraded parity array after an unclean shutdown: a stripe whose
        // write was cut short has parity that no longer matches its data, and rebuilding the
        // missing member from it would return wrong data with no error. A partial parity log
        // makes parity right again first (md: "starting dirty degraded array with PPL").
        // Opened read-only, the log cannot be replayed: such an array can be described, but its
        // data is not read (see `read`).
        if plan.geometry.is_parity() && plan.degraded() && !plan.clean && ppl.is_none() && !rules.start_dirty_degraded {
            return Err(OpenError::DirtyDegraded { missing: plan.missing_slots().len() });
        }
        let bitmap = load_bitmap(&members[plan.reference], plan.events)?;
        let reference_bitmap = read_bitmap_header(&members[plan.reference])?;
        let mut devices = Vec::with_capacity(members.len());
        for m in &members {
            devices.push(md_device(m, reference_bitmap.as_deref())?);
        }
        let raid_disks = plan.raid_disks;
        let mut array = Array::new(plan.geometry.clone(), slots)?;
        let mut needs_resync = !plan.clean && plan.geometry.max_degraded() > 0;
        let mut log_replay = None;
        let unreplayed = ppl.is_some() && !writable && !plan.clean && plan.degraded();
        if let (Some(config), true) = (&ppl, writable) {
            let targets = member_targets_of(&plan, &members);
            if !plan.clean && plan.geometry.is_parity() {
                let r = crate::ppl::replay_logs(&plan.geometry, array.slot_states(), &targets, config)?;
                // Every log read and applied: parity matches data wherever a write was in
                // flight, and nowhere else could it differ, so no resync is owed (md marks the
                // array clean after a clean PPL recovery). A degraded raid6 is no exception: each
                // entry was logged on both parity members, so a missing member took none with it
                // that an in-sync one does not hold as well.
                // With as many members out as the level has syndromes (raid4/5 short of one,
                // raid6 short of two), nothing is left to disagree: parity is what defines the
                // missing member, and a rebuild recomputes it from the rest. A resync could do
                // nothing, whatever the replay could not use (md's raid5 resync skips such an
                // array and marks it in sync). An entry the replay could not use is a log write
                // the crash cut short, whose stripes were therefore never written.
                let out_of_sync = array.slot_states().iter().filter(|s| **s != SlotState::InSync).count();
                let no_redundancy_left = out_of_sync >= plan.geometry.max_degraded();
                if r.complete() || no_redundancy_left {
                    needs_resync = false;
                }
                log_replay = Some(r);
            }
            crate::ppl::reset_logs(&targets, config)?;
            array.enable_ppl(config.clone());
        }
        array.set_resync_pending(needs_resync);
        // A resync cut short resumes where the freshest superblock says it got to, as md takes
        // `recovery_cp` from it (`super_1_validate`); a crash with writes in flight left 0.
        let resync_from = if needs_resync {
            Some(members[plan.reference].info.resync_offset).filter(|s| *s < MAX_SECTOR).unwrap_or(0)
        } else {
            0
        };
        let meta = MdMetadata::new(MdStart {
            devices,
            reference: plan.reference,
            raid_disks,
            events: plan.events,
            clean: plan.clean,
            needs_resync,
            resync_from,
            bitmap,
            writable,
        });
        Ok(OpenArray {
            plan,
            members,
            array,
            writable,
            meta,
            devs_changed: false,
            deferred: false,
            written: false,
            failures: Vec::new(),
            metadata_failures: Vec::new(),
            corrected_read_errors: Vec::new(),
            readded: vec![false; raid_disks],
            ppl,
            log_replay,
            unreplayed,
        })
    }

    pub fn size(&self) -> u64 {
        self.array.size_bytes()
    }

    pub fn engine(&self) -> &Array {
        &self.array
    }

    /// Read `len` bytes at logical `offset`.
    pub fn read(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, OpenError> {
        if self.unreplayed {
            return Err(OpenError::DirtyDegradedReadOnly { missing: self.plan.missing_slots().len() });
        }
        match self.run(Request::Read { offset, len })? {
            Completion::Read(d) => Ok(d.into_vec()),
            other => unreachable!("read completed as {other:?}"),
        }
    }

    /// Write `data` at logical `offset`, marking the array dirty first if it is not yet.
    pub fn write(&mut self, offset: u64, data: Vec<u8>) -> Result<(), OpenError> {
        if !self.writable {
            return Err(OpenError::ReadOnly);
        }
        self.written = true;
        // Like md (and the array service), only levels with redundancy are marked dirty:
        // linear and raid0 have nothing a crash could leave inconsistent.
        if !self.meta.writes_recorded() && self.array.geometry().max_degraded() > 0 {
            // One request at a time, no lazy clearing here: cover everything, as before a crash
            // anywhere in this run would need.
            self.meta.set_all_intent();
            self.record(MetaChange::Dirty)?;
        }
        self.run(Request::Write { offset, data: data.into() }).map(|_| ())
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

    /// Flush and, if anything was written, mark the array clean again (unless it still needs a
    /// resync: then it stays dirty, with any member changes recorded). Returns whether the
    /// superblocks now say clean.
    pub fn close(mut self) -> Result<bool, OpenError> {
        let dirty = self.meta.is_dirty();
        if self.writable && (dirty || self.devs_changed || self.written) {
            self.flush()?;
        }
        if self.writable && (dirty || self.devs_changed) {
            self.settle()?;
        }
        Ok(!self.meta.is_dirty())
    }

    /// Mark the whole array clean after the caller has made it consistent (create's initial
    /// sync, a full resync), whatever the superblocks said before.
    pub fn mark_clean_now(&mut self) -> Result<(), OpenError> {
        self.resync_done();
        self.flush()?;
        self.settle()
    }

    /// A full resync (or repair) has made redundancy consistent: the array may be marked clean
    /// again once idle, and writes may use read-modify-write again.
    pub fn resync_done(&mut self) {
        self.array.set_resync_pending(false);
        // Recording that a resync is done writes nothing by itself.
        let _ = self.record(MetaChange::ResyncDone);
    }

    /// Where a resync owed may resume, in array bytes (0: from the start).
    pub fn resync_checkpoint(&self) -> u64 {
        self.meta.resync_checkpoint()
    }

    /// Whether a member of the array (in a slot, or a spare) carries an older event count than
    /// the array's: its last superblock update was lost (md accepts one behind at assembly).
    pub fn members_behind(&self) -> bool {
        let events = self.meta.events();
        (0..self.members.len()).any(|i| self.holds_place(i) && self.members[i].info.events < events)
    }

    /// The name of the device in `slot`, if one fills it.
    pub fn slot_device_name(&self, slot: usize) -> Option<&str> {
        self.plan.slots.get(slot).copied().flatten().map(|i| self.members[i].dev.name())
    }

    /// Whether the array was found dirty and has not been resynced since.
    pub fn needs_resync(&self) -> bool {
        self.meta.needs_resync()
    }

    /// After a flush: mark clean if that is true, else record member changes keeping it dirty.
    fn settle(&mut self) -> Result<(), OpenError> {
        self.record(MetaChange::Clean)
    }

    fn run(&mut self, request: Request) -> Result<Completion, OpenError> {
        let targets = self.member_targets();
        let mut io_error: Option<MemberIoError> = None;
        let result = execute(&mut self.array, request, &mut |io: &MemberIo| {
            let target = targets[io.slot].as_ref().expect("engine used an empty slot");
            match target.perform(io) {
                Ok(r) => r,
                Err(e) => {
                    io_error.get_or_insert_with(|| e.clone());
                    IoResult::Failed(e)
                }
            }
        });
        self.note_events();
        match result {
            Ok(c) => Ok(c),
            Err(EngineError::ArrayFailed) if io_error.is_some() => Err(io_error.expect("checked").into()),
            Err(e) => Err(e.into()),
        }
    }

    /// The engine, for drivers that run it themselves (with [`OpenArray::member_targets`] doing
    /// the member I/O and [`OpenArray::note_events`] after completions).
    pub fn engine_mut(&mut self) -> &mut Array {
        &mut self.array
    }

    /// Per slot, where its member I/O goes (`None` for an empty slot). Targets can be moved to
    /// other threads; they share the devices with this array.
    pub fn member_targets(&self) -> Vec<Option<MemberTarget>> {
        member_targets_of(&self.plan, &self.members)
    }

    /// A dirty degraded array with a log opened read-only: its data must not be served (the
    /// log, which would make parity right, was not replayed).
    pub fn log_unreplayed(&self) -> bool {
        self.unreplayed
    }

    /// The partial parity log's settings, when the array keeps one.
    pub fn ppl(&self) -> Option<&PplConfig> {
        self.ppl.as_ref()
    }

    /// Take the engine's events (members that failed), remember them for the next superblock
    /// update, and return them as (device name, reason).
    pub fn note_events(&mut self) -> Vec<(String, String)> {
        // A member failed for its metadata is failed in the engine too, which reports it again
        // ("failed by request"); the reason given here is the one that says why.
        let mut out = std::mem::take(&mut self.metadata_failures);
        self.failures.extend(out.iter().cloned());
        let already: Vec<String> = out.iter().map(|(name, _)| name.clone()).collect();
        for event in self.array.take_events() {
            match event {
                EngineEvent::MemberFailed { slot, reason } => {
                    let name = self.slot_device_name(slot).unwrap_or_default().to_string();
                    if already.contains(&name) {
                        continue;
                    }
                    self.failures.push((name.clone(), reason.clone()));
                    out.push((name, reason));
                    self.roles_moved();
                }
                EngineEvent::ReadErrorCorrected { slot, offset, len } => {
                    let name = self.slot_device_name(slot).unwrap_or_default().to_string();
                    self.corrected_read_errors.push((name, offset, len));
                }
            }
        }
        out
    }

    /// Read errors rebuilt from redundancy and rewritten in place since the last call, as
    /// (device, member byte offset from the data start, length); the member stayed in sync.
    pub fn take_corrected_read_errors(&mut self) -> Vec<(String, u64, u64)> {
        std::mem::take(&mut self.corrected_read_errors)
    }

    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Whether the superblocks say "dirty" (written since the last clean mark).
    pub fn is_dirty(&self) -> bool {
        self.meta.is_dirty()
    }

    /// Whether the superblocks say writes may be in flight, so that a write needs no dirty mark
    /// recorded first (see [`ArrayMetadata::writes_recorded`]).
    pub fn writes_recorded(&self) -> bool {
        self.meta.writes_recorded()
    }

    /// Whether member roles changed (a failure) since the superblocks were last written.
    pub fn roles_changed(&self) -> bool {
        self.devs_changed
    }

    /// Mark the superblocks dirty; a driver calls this before it lets the first write through.
    pub fn mark_dirty(&mut self) -> Result<(), OpenError> {
        if !self.writable {
            return Err(OpenError::ReadOnly);
        }
        self.record(MetaChange::Dirty)
    }

    /// Flush every live member directly and mark the superblocks clean, unless the array still
    /// needs a resync (then only member changes are recorded); a driver calls this when no write
    /// is in flight. Returns whether the superblocks now say clean.
    pub fn flush_and_mark_clean(&mut self) -> Result<bool, OpenError> {
        self.flush_members()?;
        self.settle()?;
        Ok(!self.meta.is_dirty())
    }

    /// Record member role changes in the superblocks without changing the clean state.
    pub fn record_roles(&mut self) -> Result<(), OpenError> {
        self.record(MetaChange::Roles)
    }

    /// Add `dev` to the array (md's `--add`): it takes the first missing or failed slot and is
    /// rebuilt there (returned as `Some(slot)`), or becomes a spare when every slot is filled.
    /// A device that already carries an md superblock is refused, whatever array it names: it
    /// may hold someone's data.
    pub fn add_member(&mut self, dev: Box<dyn MemberDevice>) -> Result<Option<usize>, OpenError> {
        if !self.writable {
            return Err(OpenError::ReadOnly);
        }
        // An entry for this device that holds nothing (it failed, or was removed) is reused.
        let reuse = match self.find_member(dev.name()) {
            Some((idx, _)) if self.holds_place(idx) => {
                return Err(OpenError::BadMember(format!("{}: already part of this array", dev.name())));
            }
            Some((idx, _)) => Some(idx),
            None => None,
        };
        if let Some(found) = probe(dev.as_ref())? {
            let info = found.superblock.info();
            if info.array_uuid != self.plan.array_uuid {
                return Err(OpenError::BadMember(format!(
                    "{}: carries an md superblock of array {} (events {}); it may hold data, so it is not added. Wipe it first if it is free",
                    dev.name(),
                    uraid_md_format::uuid::format_md(&info.array_uuid),
                    info.events
                )));
            }
            if let Some(slot) = self.readd_slot(&info) {
                return self.readd(dev, found, slot, reuse).map(Some);
            }
            // A former member the bitmap cannot vouch for: it is rebuilt in full like a new one.
        }
        let reference = &self.members[self.plan.reference];
        let dev_number = self
            .members
            .iter()
            .map(|m| m.info.dev_number + 1)
            .chain(std::iter::once(reference.info.roles.len() as u32))
            .max()
            .unwrap_or(0);
        let mut uuid = [0u8; 16];
        fill_random(&mut uuid);
        let mut sb = reference
            .probed
            .superblock
            .for_new_member(dev_number, uuid, dev.size())
            .map_err(|e| OpenError::BadMember(format!("{}: {e}", dev.name())))?;
        let states = self.array.slot_states().to_vec();
        let slot = states.iter().position(|s| matches!(s, SlotState::Missing | SlotState::Faulty));
        sb.set_role(dev_number, slot.map_or(Role::Spare, |s| Role::Active(s as u32)));
        sb.set_recovery_offset(slot.map(|_| 0));
        let offset = sb.byte_offset();
        // Its partial parity log starts empty (md's `ppl_modify_log`), before it is a member.
        let mut areas = Vec::new();
        if let Some(config) = &self.ppl {
            let (at, len) = crate::ppl::log_area_of(&sb)
                .ok_or_else(|| OpenError::BadMember(format!("{}: no room for the partial parity log", dev.name())))?;
            areas.push((at, crate::ppl::empty_log(config, len).into()));
        }
        let info = sb.info();
        let probed = Probed { superblock: sb, offset };
        let idx = self.place_member(OpenMember { dev: Arc::from(dev), probed, info }, reuse);
        // The write-intent bitmap is copied from the reference member's, so the new member's
        // bitmap header matches the array's.
        let device = MdDevice { superblock: self.members[idx].probed.superblock.clone(), offset, bitmap: None };
        self.join(idx, device, areas)?;
        match slot {
            Some(s) => self.take_slot(idx, s, false)?,
            None => self.plan.verdicts[idx] = MemberVerdict::Spare,
        }
        self.roles_moved();
        self.record_roles()?;
        Ok(slot)
    }

    /// Whether member `idx` holds a slot or is a spare (rather than failed or removed).
    fn holds_place(&self, idx: usize) -> bool {
        match self.plan.verdicts[idx] {
            MemberVerdict::Active { slot } => self.plan.slots[slot] == Some(idx),
            MemberVerdict::Spare => true,
            _ => false,
        }
    }

    /// Put `m` at index `reuse` (an entry of the same device that holds nothing) or at the end.
    fn place_member(&mut self, m: OpenMember, reuse: Option<usize>) -> usize {
        match reuse {
            Some(idx) => {
                self.members[idx] = m;
                idx
            }
            None => {
                self.members.push(m);
                self.plan.verdicts.push(MemberVerdict::Faulty);
                self.members.len() - 1
            }
        }
    }

    /// Member `idx` takes `slot` to be rebuilt there (`readded`: only where the bitmap says).
    fn take_slot(&mut self, idx: usize, slot: usize, readded: bool) -> Result<(), OpenError> {
        if let Some(old) = self.plan.slots[slot] {
            if old != idx {
                self.plan.verdicts[old] = MemberVerdict::Faulty;
            }
        }
        self.plan.verdicts[idx] = MemberVerdict::Active { slot };
        self.plan.slots[slot] = Some(idx);
        self.plan.recovering[slot] = Some(0);
        self.readded[slot] = readded;
        self.array.set_slot_state(slot, SlotState::Recovering, false)?;
        Ok(())
    }

    /// The slot a former member may be re-added to with a bitmap-guided rebuild (md's
    /// `--re-add`): it was active in a slot that is free now, the bitmap has kept every region
    /// written since it left (bits are never cleared while degraded; `events_cleared` is not
    /// past its events), and it was not itself half rebuilt. raid10's bitmap covers the array,
    /// not members, so raid10 members are rebuilt in full.
    fn readd_slot(&self, info: &MemberInfo) -> Option<usize> {
        let bits = self.meta.write_intent().filter(|b| !b.all_dirty)?;
        let Role::Active(slot) = info.role else { return None };
        let slot = slot as usize;
        let free =
            self.array.slot_states().get(slot).is_some_and(|s| matches!(s, SlotState::Missing | SlotState::Faulty));
        let ok = free
            && info.events >= bits.events_cleared
            && info.recovery_offset.is_none()
            && self.plan.level != uraid_layout::Level::Raid10
            && info.data_offset == self.members[self.plan.reference].info.data_offset;
        ok.then_some(slot)
    }

    fn readd(
        &mut self,
        dev: Box<dyn MemberDevice>,
        found: Probed,
        slot: usize,
        reuse: Option<usize>,
    ) -> Result<usize, OpenError> {
        let mut sb = found.superblock;
        // Until the rebuild is done it is not in sync: if we stop first, it starts over in full.
        sb.set_recovery_offset(Some(0));
        let info = sb.info();
        sb.set_role(info.dev_number, Role::Active(slot as u32));
        let offset = found.offset;
        let info = sb.info();
        let idx = self
            .place_member(OpenMember { dev: Arc::from(dev), probed: Probed { superblock: sb, offset }, info }, reuse);
        let reference_bitmap = read_bitmap_header(&self.members[self.plan.reference])?;
        let device = md_device(&self.members[idx], reference_bitmap.as_deref())?;
        self.join(idx, device, Vec::new())?;
        self.take_slot(idx, slot, true)?;
        self.roles_moved();
        self.record_roles()?;
        Ok(slot)
    }

    /// Whether the member rebuilding in `slot` came back with a bitmap-guided rebuild.
    pub fn is_readded(&self, slot: usize) -> bool {
        self.readded.get(slot).copied().unwrap_or(false)
    }

    /// Put a spare into the first missing or failed slot to be rebuilt there, as md does when
    /// a member fails and a spare is at hand. Returns the slot, if a spare was used.
    pub fn activate_spare(&mut self) -> Result<Option<usize>, OpenError> {
        if !self.writable {
            return Ok(None);
        }
        let Some(spare) = self.plan.verdicts.iter().position(|v| matches!(v, MemberVerdict::Spare)) else {
            return Ok(None);
        };
        let states = self.array.slot_states().to_vec();
        let Some(slot) = states.iter().position(|s| matches!(s, SlotState::Missing | SlotState::Faulty)) else {
            return Ok(None);
        };
        self.take_slot(spare, slot, false)?;
        self.roles_moved();
        self.record_roles()?;
        Ok(Some(slot))
    }

    /// The write-intent bitmap, if the array has one.
    pub fn write_intent(&self) -> Option<&WriteIntentBits> {
        self.meta.write_intent()
    }

    /// Set (`dirty`) or clear the bits of `chunks` and write the bitmap to every live member if
    /// that changed anything. Setting must complete before the covered writes are let through.
    /// Returns the ticket of the bitmap writes it queued, if it changed anything.
    pub fn set_write_intent(&mut self, chunks: std::ops::Range<u64>, dirty: bool) -> Result<Option<Ticket>, OpenError> {
        let change = if dirty { MetaChange::IntentSet(chunks) } else { MetaChange::IntentClear(chunks) };
        let ticket = self.meta.record(change, &self.device_roles(), unix_now()).map_err(|e| self.metadata_error(e))?;
        self.write_metadata()?;
        Ok(ticket)
    }

    /// Record that the member rebuilding in `slot` is good up to member sector `sectors`
    /// (written with the next superblock update).
    pub fn set_recovery_checkpoint(&mut self, slot: usize, sectors: u64) {
        if self.plan.recovering[slot].is_some() {
            self.plan.recovering[slot] = Some(sectors);
            self.roles_moved();
        }
    }

    /// Where the rebuild of `slot` may resume (member sector), if it is rebuilding.
    pub fn recovery_checkpoint(&self, slot: usize) -> Option<u64> {
        self.plan.recovering[slot]
    }

    /// The member in `slot` is rebuilt: it is in sync from now on.
    pub fn recovery_done(&mut self, slot: usize) -> Result<(), OpenError> {
        self.array.set_slot_state(slot, SlotState::InSync, false)?;
        self.plan.recovering[slot] = None;
        self.readded[slot] = false;
        self.roles_moved();
        self.record_roles()
    }

    /// The slot a member (by device name) holds, or what it is if it holds none.
    pub fn find_member(&self, name: &str) -> Option<(usize, MemberVerdict)> {
        let matching = || (0..self.members.len()).filter(|&i| self.members[i].dev.name() == name);
        matching()
            .find(|&i| self.holds_place(i))
            .or_else(|| matching().next())
            .map(|i| (i, self.plan.verdicts[i].clone()))
    }

    /// Fail the member `name` (md's `--fail`). Refused when that would lose data, unless
    /// `force`. Returns its slot.
    pub fn fail_member(&mut self, name: &str, force: bool) -> Result<usize, OpenError> {
        let Some((idx, verdict)) = self.find_member(name) else {
            return Err(OpenError::BadMember(format!("{name}: not a member of this array")));
        };
        match verdict {
            MemberVerdict::Active { slot } if self.plan.slots[slot] == Some(idx) => {
                if self.array.slot_states()[slot] == SlotState::Faulty {
                    return Err(OpenError::BadMember(format!("{name}: already faulty")));
                }
                self.array.set_slot_state(slot, SlotState::Faulty, force)?;
                self.plan.recovering[slot] = None;
                self.roles_moved();
                self.record_roles()?;
                Ok(slot)
            }
            other => Err(OpenError::BadMember(format!("{name}: not an active member ({other})"))),
        }
    }

    /// Remove a failed member or a spare from the array (md's `--remove`); an active member
    /// must be failed first, as in md.
    pub fn remove_member(&mut self, name: &str) -> Result<(), OpenError> {
        let Some((idx, verdict)) = self.find_member(name) else {
            return Err(OpenError::BadMember(format!("{name}: not a member of this array")));
        };
        match verdict {
            MemberVerdict::Active { slot } if self.plan.slots[slot] == Some(idx) => {
                if self.array.slot_states()[slot] != SlotState::Faulty {
                    return Err(OpenError::BadMember(format!(
                        "{name}: is an active member of slot {slot}; fail it first (md refuses to remove it too)"
                    )));
                }
                self.array.set_slot_state(slot, SlotState::Missing, false)?;
                self.plan.slots[slot] = None;
            }
            MemberVerdict::Spare => {}
            other => return Err(OpenError::BadMember(format!("{name}: not in the array ({other})"))),
        }
        self.plan.verdicts[idx] = MemberVerdict::Faulty;
        self.roles_moved();
        self.record_roles()
    }

    /// Flush the data of every live member directly (not through the engine).
    pub fn flush_members(&self) -> Result<(), OpenError> {
        for (slot, idx) in self.plan.slots.iter().enumerate() {
            let Some(i) = idx else { continue };
            if self.array.slot_states()[slot] != SlotState::InSync {
                continue;
            }
            let dev = &self.members[*i].dev;
            dev.flush().map_err(|source| OpenError::Io { device: dev.name().to_string(), what: "flush", source })?;
        }
        Ok(())
    }

    /// Membership changed: the next superblock update records it as such.
    fn roles_moved(&mut self) {
        self.devs_changed = true;
        self.meta.membership_changed();
    }

    /// What each device is to the array now, in `members` order, for the metadata.
    fn device_roles(&self) -> Vec<DeviceRole> {
        let states = self.array.slot_states();
        (0..self.members.len())
            .map(|idx| match self.plan.verdicts[idx] {
                MemberVerdict::Active { slot } if self.plan.slots[slot] == Some(idx) => DeviceRole::Slot {
                    slot,
                    state: states[slot],
                    rebuilt: self.plan.recovering[slot].unwrap_or(0) * SECTOR_BYTES,
                },
                MemberVerdict::Spare => DeviceRole::Spare,
                _ => DeviceRole::Out,
            })
            .collect()
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
        let ticket = self.meta.record(change, &self.device_roles(), unix_now()).map_err(|e| self.metadata_error(e))?;
        self.write_metadata()?;
        if roles {
            self.devs_changed = false;
        }
        Ok(ticket)
    }

    /// From now on (`on`), recording a change only queues its writes: the driver takes them
    /// with [`OpenArray::next_metadata_step`], performs them where it likes (the service, on a
    /// thread of its own) and reports with [`OpenArray::metadata_step_done`]; until then the
    /// change is recorded but not durable ([`OpenArray::metadata_pending`]). Off again, the
    /// next change writes everything still queued, on the calling thread.
    pub fn defer_metadata(&mut self, on: bool) {
        self.deferred = on;
    }

    /// The next metadata step to perform, with each op's device; `None` while one is out or
    /// none is queued.
    pub fn next_metadata_step(&mut self) -> Option<Vec<(Arc<dyn MemberDevice>, MetaOp)>> {
        let step = self.meta.next_step()?;
        Some(step.ops.into_iter().map(|op| (Arc::clone(&self.members[op.device()].dev), op)).collect())
    }

    /// The step handed out last is done (or failed: then no later metadata is written, and
    /// the error names the device).
    pub fn metadata_step_done(&mut self, result: Result<(), MetaError>) -> Result<(), OpenError> {
        if let Err(MetaError::Io { device, what, reason }) = &result {
            if self.fail_for_metadata(*device, &format!("{what} failed: {reason}")) {
                self.meta.step_failed_on(*device);
                return Ok(());
            }
        }
        let failed = result.clone().err();
        self.meta.step_done(result);
        if let Some(e) = failed {
            return Err(self.metadata_error(e));
        }
        self.refresh_member_views();
        Ok(())
    }

    /// A metadata write or flush to device `idx` failed: fail that member, as md does when a
    /// superblock write (with its preflush) fails (`super_written` calls `md_error`), if the
    /// array can do without it. Reported
    /// by the next [`OpenArray::note_events`], whose caller records the new membership. False
    /// when failing it would fail the array: then the metadata cannot be written at all.
    pub fn fail_for_metadata(&mut self, idx: usize, why: &str) -> bool {
        let Some(name) = self.members.get(idx).map(|m| m.dev.name().to_string()) else { return false };
        match self.plan.verdicts[idx] {
            MemberVerdict::Active { slot } if self.plan.slots[slot] == Some(idx) => {
                let state = self.array.slot_states()[slot];
                if state == SlotState::Faulty || state == SlotState::Missing {
                    return true;
                }
                if self.array.set_slot_state(slot, SlotState::Faulty, false).is_err() {
                    return false;
                }
                self.plan.recovering[slot] = None;
            }
            MemberVerdict::Spare => self.plan.verdicts[idx] = MemberVerdict::Faulty,
            _ => {}
        }
        self.metadata_failures.push((name, format!("its metadata could not be written: {why}")));
        self.roles_moved();
        true
    }

    /// Whether the metadata update `ticket` is on the members.
    pub fn metadata_durable(&self, ticket: Ticket) -> bool {
        self.meta.durable(ticket)
    }

    /// Why the metadata can no longer be written, once one of its writes failed (in the terms of
    /// this driver: the device named).
    pub fn metadata_failed(&self) -> Option<OpenError> {
        self.meta.failed().cloned().map(|e| self.metadata_error(e))
    }

    /// The newest metadata update recorded, if it is not yet durable and still may be (no
    /// metadata write has failed).
    pub fn metadata_pending(&self) -> Option<Ticket> {
        if self.meta.failed().is_some() {
            return None;
        }
        self.meta.newest().filter(|t| !self.meta.durable(*t))
    }

    /// A flush of every live member (in a slot, in sync or rebuilding), each op with its device,
    /// as [`OpenArray::next_metadata_step`] gives them: what must precede recording the array
    /// clean, clearing bitmap bits or recording a rebuild checkpoint.
    pub fn live_flushes(&self) -> Vec<(Arc<dyn MemberDevice>, MetaOp)> {
        let states = self.array.slot_states();
        self.plan
            .slots
            .iter()
            .enumerate()
            .filter(|(slot, _)| matches!(states[*slot], SlotState::InSync | SlotState::Recovering))
            .filter_map(|(_, idx)| *idx)
            .map(|idx| (Arc::clone(&self.members[idx].dev), MetaOp::Flush { device: idx }))
            .collect()
    }

    /// Device `idx` joins the array with the superblock in its entry (see [`MdMetadata::join`]).
    fn join(&mut self, idx: usize, device: MdDevice, areas: Vec<(u64, bytes::Bytes)>) -> Result<(), OpenError> {
        let index = (idx < self.meta.devices().len()).then_some(idx);
        let (at, _) = self.meta.join(index, device, areas);
        debug_assert_eq!(at, idx, "metadata devices follow the members' order");
        self.write_metadata()
    }

    /// Perform the metadata's queued writes and flushes, step by step, on this thread; then
    /// refresh each member's view of its superblock. Deferred, the driver performs them.
    fn write_metadata(&mut self) -> Result<(), OpenError> {
        if self.deferred {
            return Ok(());
        }
        while let Some(step) = self.meta.next_step() {
            let mut result = Ok(());
            for op in &step.ops {
                let dev = &self.members[op.device()].dev;
                let done = match op {
                    MetaOp::Write { offset, data, what, .. } => {
                        dev.write_at(*offset, data).map_err(|e| (what.to_string(), e))
                    }
                    MetaOp::Flush { .. } => dev.flush().map_err(|e| ("flushing metadata".to_string(), e)),
                };
                if let Err((what, e)) = done {
                    result = Err(MetaError::Io { device: op.device(), what, reason: e.to_string() });
                    break;
                }
            }
            self.metadata_step_done(result)?;
        }
        Ok(())
    }

    /// Each member's superblock and its summary as the metadata last wrote them.
    fn refresh_member_views(&mut self) {
        for (m, d) in self.members.iter_mut().zip(self.meta.devices()) {
            if m.probed.superblock != d.superblock {
                m.probed.superblock = d.superblock.clone();
                m.info = d.superblock.info();
            }
        }
    }

    /// A metadata error in the terms of this driver: an I/O error names the device.
    pub fn metadata_error(&self, e: MetaError) -> OpenError {
        match e {
            MetaError::ReadOnly => OpenError::ReadOnly,
            MetaError::Io { device, what, reason } => OpenError::Metadata {
                device: self
                    .members
                    .get(device)
                    .map_or_else(|| format!("device {device}"), |m| m.dev.name().to_string()),
                what,
                reason,
            },
            MetaError::Format(text) => OpenError::BadMember(text),
        }
    }
}

/// Seconds since the Unix epoch, for the superblocks' update time.
fn unix_now() -> UnixSeconds {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The bitmap header bytes of member `m`, when its superblock names a bitmap.
fn read_bitmap_header(m: &OpenMember) -> Result<Option<Vec<u8>>, OpenError> {
    let Some(sectors) = m.info.bitmap_offset else { return Ok(None) };
    let at = bitmap_byte_offset(m.probed.offset, sectors);
    let mut header = vec![0u8; bitmap::HEADER_BYTES];
    m.dev.read_at(at, &mut header).map_err(|source| OpenError::Io {
        device: m.dev.name().to_string(),
        what: "reading bitmap",
        source,
    })?;
    Ok(Some(header))
}

/// A member's md metadata as assembly found it: its superblock and, when the array keeps a
/// bitmap, the bitmap header read from the device. A member whose own header does not parse
/// (torn, overwritten) gets the reference member's: the next update writes it whole, as md
/// rewrites every member's bitmap from the one it loaded.
fn md_device(m: &OpenMember, reference_bitmap: Option<&[u8]>) -> Result<MdDevice, OpenError> {
    let own = read_bitmap_header(m)?;
    let header = match (own.as_deref(), reference_bitmap) {
        (Some(h), Some(r)) if BitmapSuper::parse(h).is_err() => Some(r),
        (h, _) => h,
    };
    MdDevice::new(m.probed.superblock.clone(), m.probed.offset, header)
        .map_err(|e| OpenError::BadMember(format!("{}: {e}", m.dev.name())))
}

/// Random bytes for a new device UUID (from the kernel's generator).
fn fill_random(buf: &mut [u8]) {
    use std::io::Read;
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(buf).is_ok() {
            return;
        }
    }
    // No /dev/urandom: time and address bits still make a collision unlikely.
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0) ^ (buf.as_ptr() as u128);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (seed >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(151);
    }
}

/// Read the reference member's bitmap. One that is older than the superblock (md's
/// `events < sb events` check) or marked stale cannot say which regions are clean.
fn load_bitmap(m: &OpenMember, sb_events: u64) -> Result<Option<WriteIntentBits>, OpenError> {
    let Some(off) = m.info.bitmap_offset else { return Ok(None) };
    let at = (m.probed.offset as i64 + i64::from(off) * 512) as u64;
    let io_err = |source| OpenError::Io { device: m.dev.name().to_string(), what: "reading bitmap", source };
    let mut header = vec![0u8; bitmap::HEADER_BYTES];
    m.dev.read_at(at, &mut header).map_err(io_err)?;
    let bms = BitmapSuper::parse(&header)
        .map_err(|e| OpenError::BadMember(format!("{}: bitmap at byte {at}: {e}", m.dev.name())))?;
    let mut bits = vec![0u8; bms.bits_bytes()];
    m.dev.read_at(at + bitmap::HEADER_BYTES as u64, &mut bits).map_err(io_err)?;
    Ok(Some(WriteIntentBits::load(&bms, bits, sb_events)))
}

/// Sectors of data the array keeps on a member: the common component size for redundant levels,
/// the member's own usable size for linear and raid0.
fn data_sectors(plan: &AssemblyPlan, info: &MemberInfo) -> u64 {
    match plan.level {
        uraid_layout::Level::Linear | uraid_layout::Level::Raid0 => info.usable_sectors,
        _ => plan.component_sectors,
    }
}

/// Per slot, where its member I/O goes (`None` for an empty slot).
fn member_targets_of(plan: &AssemblyPlan, members: &[OpenMember]) -> Vec<Option<MemberTarget>> {
    plan.slots
        .iter()
        .map(|idx| {
            idx.map(|i| {
                let m = &members[i];
                MemberTarget {
                    dev: Arc::clone(&m.dev),
                    base: m.info.data_offset * SECTOR_BYTES,
                    data_bytes: data_sectors(plan, &m.info) * SECTOR_BYTES,
                    log_area: m.log_area(),
                }
            })
        })
        .collect()
}

/// The partial parity log of an array whose members all keep one; an error if only some do.
fn ppl_config(members: &[OpenMember], plan: &AssemblyPlan) -> Result<Option<PplConfig>, OpenError> {
    let used: Vec<&OpenMember> = plan.slots.iter().flatten().map(|&i| &members[i]).collect();
    let areas: Vec<Option<(u64, u64)>> = used.iter().map(|m| m.log_area()).collect();
    if areas.iter().all(Option::is_none) {
        return Ok(None);
    }
    if let Some(i) = areas.iter().position(Option::is_none) {
        return Err(OpenError::BadMember(format!(
            "{}: has no partial parity log while other members of the array have one",
            used[i].dev.name()
        )));
    }
    if !plan.geometry.is_parity() {
        return Err(OpenError::BadMember(format!(
            "{}: a partial parity log on a {} array (it needs raid4, raid5 or raid6)",
            used[0].dev.name(),
            plan.level
        )));
    }
    let area_bytes = areas.iter().flatten().map(|a| a.1).min().expect("some area");
    let config = PplConfig { signature: uraid_md_format::ppl::signature(&plan.array_uuid), area_bytes };
    if config.space() < uraid_engine::ppl::pp_per_row(&plan.geometry) {
        return Err(OpenError::BadMember(format!(
            "{}: the partial parity log area ({area_bytes} bytes) holds no partial parity",
            used[0].dev.name()
        )));
    }
    Ok(Some(config))
}
