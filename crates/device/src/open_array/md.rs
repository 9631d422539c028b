//! Linux md arrays: assembly from superblocks (which member is fresh, which is stale, where a
//! rebuild resumes), md's metadata (`MdMetadata`: superblocks, events, write-intent bitmap,
//! partial parity log), and what only md does with members: adding, re-adding with a
//! bitmap-guided rebuild, spares, failing and removing by device name.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use uraid_engine::array::Array;
use uraid_engine::metadata::DeviceRole;
use uraid_engine::metadata::WriteIntentBits;
use uraid_engine::ppl::PplConfig;
use uraid_engine::Engine;
use uraid_engine::{SlotState, SECTOR_BYTES};
use uraid_md::assemble::{self, AssemblyPlan, Candidate, MemberVerdict};
use uraid_md::metadata::{bitmap_byte_offset, MdDevice, MdMetadata, MdStart};
use uraid_md_format::bitmap::{self, BitmapSuper};
use uraid_md_format::{MemberInfo, Reshape, Role, MAX_SECTOR};

use super::{Format, OpenArray, OpenError};
use crate::error::ReshapeRefusal;
use crate::member::MemberDevice;
use crate::open_member::Member;
use crate::ppl::LogReplay;
use crate::probe::{no_superblock, probe, Probed};
use crate::target::MemberTarget;

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

/// What only an md array has: its assembly, its members and md's metadata.
pub struct MdArray {
    pub plan: AssemblyPlan,
    pub members: Vec<OpenMember>,
    /// The superblocks and bitmap as md keeps them: every change to them is recorded there and
    /// written by the driver. Found dirty at assembly on a level with redundancy, it owes a
    /// resync: parity or copies may disagree until then, so the array is not recorded clean
    /// before one (md keeps `resync_offset` short of the end until its resync finishes).
    pub(super) meta: MdMetadata,
    /// Per slot: its rebuilding member was re-added, so only bitmap-marked regions need it.
    pub(super) readded: Vec<bool>,
    /// The partial parity log, when the array has one (md's consistency policy `ppl`).
    pub(super) ppl: Option<PplConfig>,
    /// What replaying the log did at assembly, if it was replayed.
    pub log_replay: Option<LogReplay>,
    /// A dirty degraded array with a log, opened read-only: the log is not replayed, so data
    /// rebuilt from parity could be wrong and is not read.
    pub(super) unreplayed: bool,
}

/// What failing a device for its metadata did.
pub(super) enum MetadataFailure {
    /// The device held a slot or was a spare, and is failed now.
    Failed,
    /// It was out already.
    AlreadyOut,
    /// Failing it would fail the array.
    Refused,
}

impl MdArray {
    /// Whether a member of the array (in a slot, or a spare) carries an older event count than
    /// the array's: its last superblock update was lost (md accepts one behind at assembly).
    pub(super) fn members_behind(&self) -> bool {
        let events = self.meta.events();
        (0..self.members.len()).any(|i| self.holds_place(i) && self.members[i].info.events < events)
    }

    /// Whether member `idx` holds a slot or is a spare (rather than failed or removed).
    pub(super) fn holds_place(&self, idx: usize) -> bool {
        match self.plan.verdicts[idx] {
            MemberVerdict::Active { slot } => self.plan.slots[slot] == Some(idx),
            MemberVerdict::Spare => true,
            _ => false,
        }
    }

    pub(super) fn member_targets(&self) -> Vec<Option<MemberTarget>> {
        member_targets_of(&self.plan, &self.members)
    }

    /// Cover everything in the bitmap (a writer that does not clear bits lazily).
    pub(super) fn set_all_intent(&mut self) {
        self.meta.set_all_intent();
    }

    /// What each device is to the array now, in `members` order, for the metadata.
    pub(super) fn device_roles(&self, states: &[SlotState]) -> Vec<DeviceRole> {
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

    /// A metadata write or flush to member `idx` failed: fail that member, as md does when a
    /// superblock write (with its preflush) fails (`super_written` calls `md_error`), if the
    /// array can do without it.
    pub(super) fn fail_for_metadata(&mut self, array: &mut Engine, idx: usize) -> MetadataFailure {
        match self.plan.verdicts[idx] {
            MemberVerdict::Active { slot } if self.plan.slots[slot] == Some(idx) => {
                let state = array.slot_states()[slot];
                if state == SlotState::Faulty || state == SlotState::Missing {
                    return MetadataFailure::AlreadyOut;
                }
                if array.set_slot_state(slot, SlotState::Faulty, false).is_err() {
                    return MetadataFailure::Refused;
                }
                self.plan.recovering[slot] = None;
            }
            MemberVerdict::Spare => self.plan.verdicts[idx] = MemberVerdict::Faulty,
            _ => {}
        }
        MetadataFailure::Failed
    }

    /// Each member's superblock and its summary as the metadata last wrote them.
    pub(super) fn refresh_member_views(&mut self) {
        for (m, d) in self.members.iter_mut().zip(self.meta.devices()) {
            if m.probed.superblock != d.superblock {
                m.probed.superblock = d.superblock.clone();
                m.info = d.superblock.info();
            }
        }
    }
}

impl OpenArray {
    /// Open the files or block devices at `paths` and assemble them.
    pub fn open_paths(paths: &[impl AsRef<Path>], writable: bool) -> Result<OpenArray, OpenError> {
        let mut devs: Vec<Box<dyn MemberDevice>> = Vec::new();
        for p in paths {
            let p = p.as_ref();
            let dev = Member::open(p, writable)
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
        // Part-way through a reshape, the array is read through both shapes, but nothing may be
        // written: a write would have to keep each shape's parity, and the reshape itself is
        // not continued here. Refused before anything is written to a member.
        if let (Some(reshape), true) = (&plan.reshape, writable) {
            return Err(OpenError::Reshaping(reshape_refusal(&plan, reshape)));
        }
        if plan.reshape.is_some() && plan.degraded() {
            return Err(OpenError::ReshapingDegraded { missing: plan.missing_slots().len() });
        }
        if let Some(why) = assemble::unmended_critical_section(&plan, &candidates) {
            return Err(OpenError::CriticalSection(why));
        }
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
            let need = (plan.data_start(&m.info) + plan.data_area_sectors(&m.info, data_sectors(&plan, &m.info)))
                * SECTOR_BYTES;
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
        let md = MdArray { plan, members, meta, readded: vec![false; raid_disks], ppl, log_replay, unreplayed };
        Ok(OpenArray::with_format(Format::Md(Box::new(md)), Engine::Array(array), writable))
    }

    /// md's `--add` (see [`OpenArray::add_member`]): `dev` takes the first missing or failed
    /// slot and is rebuilt there (returned as `Some(slot)`), or becomes a spare when every slot
    /// is filled. A device that already carries an md superblock is refused, whatever array it
    /// names: it may hold someone's data.
    pub(super) fn add_md_member(&mut self, dev: Box<dyn MemberDevice>) -> Result<Option<usize>, OpenError> {
        self.add_md_member_into(dev, None)
    }

    /// [`OpenArray::add_md_member`], into `slot` when that is one of the free slots.
    pub(super) fn add_md_member_into(
        &mut self,
        dev: Box<dyn MemberDevice>,
        slot: Option<usize>,
    ) -> Result<Option<usize>, OpenError> {
        let wanted = slot;
        self.require_md("adding a member")?;
        if !self.writable {
            return Err(OpenError::ReadOnly);
        }
        // An entry for this device that holds nothing (it failed, or was removed) is reused.
        let reuse = match self.find_member(dev.name()) {
            Some((idx, _)) if self.mdp().holds_place(idx) => {
                return Err(OpenError::BadMember(format!("{}: already part of this array", dev.name())));
            }
            Some((idx, _)) => Some(idx),
            None => None,
        };
        if let Some(found) = probe(dev.as_ref())? {
            let info = found.superblock.info();
            if info.array_uuid != self.mdp().plan.array_uuid {
                return Err(OpenError::BadMember(format!(
                    "{}: carries an md superblock of array {} (events {}); it may hold data, so it is not added. Wipe it first if it is free",
                    dev.name(),
                    uraid_md_format::uuid::format_md(&info.array_uuid),
                    info.events
                )));
            }
            if let Ok(slot) = self.readd_slot(dev.name(), &info) {
                return self.readd(dev, found, slot, reuse).map(Some);
            }
            // A former member the bitmap cannot vouch for: it is rebuilt in full like a new one.
        }
        let reference = &self.mdp().members[self.mdp().plan.reference];
        let in_use: Vec<u32> = self.mdp().members.iter().map(|m| m.info.dev_number).collect();
        let dev_number = reference
            .probed
            .superblock
            .new_member_number(&in_use)
            .map_err(|e| OpenError::BadMember(format!("{}: {e}", dev.name())))?;
        let mut uuid = [0u8; 16];
        fill_random(&mut uuid);
        let mut sb = reference
            .probed
            .superblock
            .for_new_member(dev_number, uuid, dev.size())
            .map_err(|e| OpenError::BadMember(format!("{}: {e}", dev.name())))?;
        let states = self.array.slot_states().to_vec();
        // While a member failure holds the log it is not yet recorded: the device waits as a
        // spare (see `activate_spare`).
        let free = |s: &SlotState| s.is_vacant();
        let slot = wanted
            .filter(|&s| states.get(s).is_some_and(free))
            .or_else(|| states.iter().position(free))
            .filter(|_| !self.array.log_held());
        match slot {
            Some(s) => sb.set_rebuilding(dev_number, s as u32),
            None => sb.set_role(dev_number, Role::Spare),
        }
        let offset = sb.byte_offset();
        // Its partial parity log starts empty (md's `ppl_modify_log`), before it is a member.
        let mut areas = Vec::new();
        if let Some(config) = &self.mdp().ppl {
            let (at, len) = crate::ppl::log_area_of(&sb)
                .ok_or_else(|| OpenError::BadMember(format!("{}: no room for the partial parity log", dev.name())))?;
            areas.push((at, crate::ppl::empty_log(config, len).into()));
        }
        let info = sb.info();
        let probed = Probed { superblock: sb, offset };
        let idx = self.place_member(OpenMember { dev: Arc::from(dev), probed, info }, reuse);
        // The write-intent bitmap is copied from the reference member's, so the new member's
        // bitmap header matches the array's.
        let device = MdDevice { superblock: self.mdp().members[idx].probed.superblock.clone(), offset, bitmap: None };
        self.join(idx, device, areas)?;
        match slot {
            Some(s) => self.take_slot(idx, s, false)?,
            None => self.mdp_mut().plan.verdicts[idx] = MemberVerdict::Spare,
        }
        self.roles_moved();
        self.record_roles()?;
        Ok(slot)
    }

    /// Put `m` at index `reuse` (an entry of the same device that holds nothing) or at the end.
    pub(super) fn place_member(&mut self, m: OpenMember, reuse: Option<usize>) -> usize {
        match reuse {
            Some(idx) => {
                self.mdp_mut().members[idx] = m;
                idx
            }
            None => {
                self.mdp_mut().members.push(m);
                self.mdp_mut().plan.verdicts.push(MemberVerdict::Faulty);
                self.mdp().members.len() - 1
            }
        }
    }

    /// Member `idx` takes `slot` to be rebuilt there (`readded`: only where the bitmap says).
    pub(super) fn take_slot(&mut self, idx: usize, slot: usize, readded: bool) -> Result<(), OpenError> {
        if let Some(old) = self.mdp().plan.slots[slot] {
            if old != idx {
                self.mdp_mut().plan.verdicts[old] = MemberVerdict::Faulty;
            }
        }
        self.mdp_mut().plan.verdicts[idx] = MemberVerdict::Active { slot };
        self.mdp_mut().plan.slots[slot] = Some(idx);
        self.mdp_mut().plan.recovering[slot] = Some(0);
        self.mdp_mut().readded[slot] = readded;
        self.array.set_slot_state(slot, SlotState::Recovering, false)?;
        Ok(())
    }

    /// Whether the member rebuilding in `slot` came back with a bitmap-guided rebuild.
    pub fn is_readded(&self, slot: usize) -> bool {
        let Some(md) = self.md() else { return false };
        md.readded.get(slot).copied().unwrap_or(false)
    }

    /// The devices kept as spares (md's role 0xffff), by name.
    pub fn spare_names(&self) -> Vec<String> {
        let Some(md) = self.md() else { return Vec::new() };
        (md.members.iter().zip(&md.plan.verdicts))
            .filter(|(_, v)| matches!(v, MemberVerdict::Spare))
            .map(|(m, _)| m.dev.name().to_string())
            .collect()
    }

    /// What /proc/mdstat says of the array's shape after its size (`super 1.2 level 5, 512k
    /// chunk, algorithm 2`); `None` for another format.
    pub fn mdstat_shape(&self) -> Option<String> {
        let plan = &self.md()?.plan;
        Some(uraid_md::mdstat::shape_text(plan.version, plan.level, plan.layout, plan.chunk_sectors, plan.raid_disks))
    }

    /// Put a spare into the first missing or failed slot to be rebuilt there, as md does when
    /// a member fails and a spare is at hand. Returns the slot, if a spare was used.
    pub fn activate_spare(&mut self) -> Result<Option<usize>, OpenError> {
        // Only md keeps spares. A slot is not given away while the failure that emptied it holds
        // the partial parity log (not yet recorded): a crash now would bring the failed member
        // back in that slot, and the stripes logged on the spare would be lost with it (md
        // writes the superblocks before `remove_and_add_spares` too).
        if !self.writable || self.md().is_none() || self.array.log_held() {
            return Ok(None);
        }
        let Some(spare) = self.mdp().plan.verdicts.iter().position(|v| matches!(v, MemberVerdict::Spare)) else {
            return Ok(None);
        };
        let states = self.array.slot_states().to_vec();
        let Some(slot) = states.iter().position(|s| s.is_vacant()) else {
            return Ok(None);
        };
        self.take_slot(spare, slot, false)?;
        self.roles_moved();
        self.record_roles()?;
        Ok(Some(slot))
    }

    /// The slot a member (by device name) holds, or what it is if it holds none.
    pub fn find_member(&self, name: &str) -> Option<(usize, MemberVerdict)> {
        self.md()?;
        let matching = || (0..self.mdp().members.len()).filter(|&i| self.mdp().members[i].dev.name() == name);
        matching()
            .find(|&i| self.mdp().holds_place(i))
            .or_else(|| matching().next())
            .map(|i| (i, self.mdp().plan.verdicts[i].clone()))
    }

    /// md's `--fail` (see [`OpenArray::fail_member`]).
    pub(super) fn fail_md_member(&mut self, name: &str, force: bool) -> Result<usize, OpenError> {
        self.require_md("failing a member by name")?;
        let Some((idx, verdict)) = self.find_member(name) else {
            return Err(OpenError::BadMember(format!("{name}: not a member of this array")));
        };
        match verdict {
            MemberVerdict::Active { slot } if self.mdp().plan.slots[slot] == Some(idx) => {
                if self.array.slot_states()[slot] == SlotState::Faulty {
                    return Err(OpenError::BadMember(format!("{name}: already faulty")));
                }
                self.array.set_slot_state(slot, SlotState::Faulty, force)?;
                self.mdp_mut().plan.recovering[slot] = None;
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
        self.require_md("removing a member")?;
        let Some((idx, verdict)) = self.find_member(name) else {
            return Err(OpenError::BadMember(format!("{name}: not a member of this array")));
        };
        match verdict {
            MemberVerdict::Active { slot } if self.mdp().plan.slots[slot] == Some(idx) => {
                if self.array.slot_states()[slot] != SlotState::Faulty {
                    return Err(OpenError::BadMember(format!(
                        "{name}: is an active member of slot {slot}; fail it first (md refuses to remove it too)"
                    )));
                }
                self.array.set_slot_state(slot, SlotState::Missing, false)?;
                self.mdp_mut().plan.slots[slot] = None;
            }
            MemberVerdict::Spare => {}
            other => return Err(OpenError::BadMember(format!("{name}: not in the array ({other})"))),
        }
        self.mdp_mut().plan.verdicts[idx] = MemberVerdict::Faulty;
        self.roles_moved();
        self.record_roles()
    }

    /// Device `idx` joins the array with the superblock in its entry (see [`MdMetadata::join`]).
    pub(super) fn join(
        &mut self,
        idx: usize,
        device: MdDevice,
        areas: Vec<(u64, bytes::Bytes)>,
    ) -> Result<(), OpenError> {
        let index = (idx < self.mdp().meta.devices().len()).then_some(idx);
        let (at, _) = self.mdp_mut().meta.join(index, device, areas);
        debug_assert_eq!(at, idx, "metadata devices follow the members' order");
        self.write_metadata()
    }

    /// The md parts, for the md-only operations below (each checks the format first).
    pub(super) fn mdp(&self) -> &MdArray {
        self.md().expect("an md-only operation checked the format")
    }

    pub(super) fn mdp_mut(&mut self) -> &mut MdArray {
        match &mut self.format {
            Format::Md(md) => md,
            Format::Vinum(_) | Format::Raidframe(_) => panic!("an md-only operation checked the format"),
        }
    }

    /// Refuse an md-only operation on another format.
    pub(super) fn require_md(&self, what: &str) -> Result<(), OpenError> {
        match &self.format {
            Format::Md(_) => Ok(()),
            Format::Vinum(_) | Format::Raidframe(_) => Err(OpenError::Unsupported(format!(
                "{what} is an md operation; {} is not an md array",
                self.describe()
            ))),
        }
    }
}

/// The bitmap header bytes of member `m`, when its superblock names a bitmap.
pub(super) fn read_bitmap_header(m: &OpenMember) -> Result<Option<Vec<u8>>, OpenError> {
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
pub(super) fn md_device(m: &OpenMember, reference_bitmap: Option<&[u8]>) -> Result<MdDevice, OpenError> {
    let own = read_bitmap_header(m)?;
    let header = match (own.as_deref(), reference_bitmap) {
        (Some(h), Some(r)) if BitmapSuper::parse(h).is_err() => Some(r),
        (h, _) => h,
    };
    MdDevice::new(m.probed.superblock.clone(), m.probed.offset, header)
        .map_err(|e| OpenError::BadMember(format!("{}: {e}", m.dev.name())))
}

/// Random bytes for a new device UUID (from the kernel's generator).
pub(crate) fn fill_random(buf: &mut [u8]) {
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
    Ok(Some(uraid_md::load_write_intent(&bms, bits, sb_events)))
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
                    base: plan.data_start(&m.info) * SECTOR_BYTES,
                    data_bytes: plan.data_area_sectors(&m.info, data_sectors(plan, &m.info)) * SECTOR_BYTES,
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

/// What to tell whoever tried to open an array mid-reshape for writing.
fn reshape_refusal(plan: &AssemblyPlan, reshape: &Reshape) -> ReshapeRefusal {
    // The name as mdadm's /dev/md/NAME has it: without the host it was made on.
    let name = plan.name.rsplit(':').next().unwrap_or_default();
    let array = if name.is_empty() { plan.uuid_string() } else { name.to_string() };
    let mut changes = Vec::new();
    let old_disks = reshape.old_raid_disks(plan.raid_disks as u32);
    if reshape.delta_disks != 0 {
        changes.push(format!("{old_disks}->{} devices", plan.raid_disks));
    }
    if reshape.new_level != plan.level.to_md() {
        changes.push(format!("level {} -> {}", plan.level, reshape.new_level));
    }
    if reshape.new_layout != plan.layout {
        changes.push(format!("layout {} -> {}", plan.layout, reshape.new_layout));
    }
    if reshape.new_chunk_sectors != plan.chunk_sectors {
        changes.push(format!("chunk {}K -> {}K", plan.chunk_sectors / 2, reshape.new_chunk_sectors / 2));
    }
    if changes.is_empty() {
        changes.push("the same shape".to_string());
    }
    ReshapeRefusal {
        array,
        change: changes.join(", "),
        position_kib: reshape.position / 2,
        array_kib: plan.geometry.array_bytes() / 1024,
    }
}
