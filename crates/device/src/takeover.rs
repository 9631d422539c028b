//! md's level changes that move no data, and raid1's change of its number of devices, on a
//! stopped array (`uraid grow --level`, `uraid grow --raid-devices` on a raid1): every member's
//! superblock rewritten as md leaves them after its takeover, nothing else.
//!
//! [`take_over`] reads the members' superblocks, asks [`uraid_md::takeover::plan`] for the new
//! shape, checks the devices to add, builds every superblock and assembles the result on paper
//! before anything is written; only then are the superblocks written (the added devices' first)
//! and flushed. New slots that get a device record it as being rebuilt from its start (1.x
//! `recovery_offset` 0 in an active role), so that the next assembly, uraid's or the kernel's,
//! rebuilds it; hot spares take the new slots left over, as md's recovery takes them at once;
//! new slots without a device are missing. A device the new shape has no slot for is
//! either failed and removed (marked faulty in the others' role tables, its own superblock left
//! as it was, as md leaves a removed device) or kept as a spare (raid6's Q after raid6 → raid5,
//! as md's `level_store` leaves it).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use uraid_engine::{EngineError, Geometry, SECTOR_BYTES};
use uraid_layout::Level;
use uraid_md::assemble::{self, Candidate, MemberVerdict};
use uraid_md::takeover::{self, CurrentArray, Dropped, Takeover, TakeoverRequest};
use uraid_md_format::sb1::{feature, TIME_SECONDS_MASK};
use uraid_md_format::{Role, Superblock, Superblock1, MAX_SECTOR};

use crate::member::MemberDevice;
use crate::open_member::Member;
use crate::probe::{no_superblock, probe};
use crate::OpenError;

/// Why a takeover was refused or did not complete. Refusals come before anything is written.
#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// md's or mdadm's reason to refuse the change.
    #[error(transparent)]
    Rules(#[from] takeover::TakeoverError),
    /// The array or a device is not in a state for the change.
    #[error("{0}")]
    Refused(String),
    /// Writing the superblocks failed part-way: the members may disagree; the message says which.
    #[error("{0}")]
    Member(String),
}

/// What changed, for the command's message.
#[derive(Debug, Clone)]
pub struct TakeoverDone {
    /// The array's name (without `host:`), else its UUID.
    pub name: String,
    pub from_level: Level,
    pub from_raid_disks: u32,
    pub change: Takeover,
    /// Added devices and the slot each is to be rebuilt into.
    pub rebuilding: Vec<(String, u32)>,
    /// New slots left missing.
    pub missing: Vec<u32>,
    /// Devices without a slot in the new shape, and what became of them.
    pub dropped: Vec<String>,
}

impl TakeoverDone {
    /// What changed, and what is left to do, a line each in md's terms: the new shape (its
    /// layout and chunk where it has them), md's note, the devices dropped, the slots left
    /// missing, the devices to be rebuilt.
    pub fn lines(&self) -> Vec<String> {
        let c = &self.change;
        let mut shape = format!("{} devices", c.raid_disks);
        if let Some(layout) = uraid_md::layout_name(c.level, c.layout) {
            shape.push_str(&format!(", layout {layout}"));
        }
        if c.chunk_sectors > 0 {
            shape.push_str(&format!(", chunk {}K", c.chunk_sectors / 2));
        }
        let mut lines = vec![if self.from_level == c.level {
            format!("{}: {} of {} devices is now of {shape}", self.name, c.level, self.from_raid_disks)
        } else {
            format!(
                "{}: {} of {} devices is now {} ({shape}); no data moved",
                self.name, self.from_level, self.from_raid_disks, c.level
            )
        }];
        lines.extend(c.note.clone());
        lines.extend(self.dropped.iter().cloned());
        lines.extend(self.missing.iter().map(|slot| format!("slot {slot} is missing (no device was added for it)")));
        if !self.rebuilding.is_empty() {
            let list: Vec<String> =
                self.rebuilding.iter().map(|(dev, slot)| format!("{dev} into slot {slot}")).collect();
            lines.push(format!("to be rebuilt: {}", list.join(", ")));
        }
        lines
    }
}

/// A member with its superblock as read.
struct Found {
    dev: Arc<dyn MemberDevice>,
    sb: Superblock1,
}

fn open_paths(paths: &[PathBuf], writable: bool) -> Result<Vec<Arc<dyn MemberDevice>>, TakeoverError> {
    let mut out: Vec<Arc<dyn MemberDevice>> = Vec::new();
    for p in paths {
        let dev =
            Member::open(p, writable).map_err(|source| OpenError::Open { path: p.display().to_string(), source })?;
        out.push(Arc::new(dev));
    }
    Ok(out)
}

fn read_superblocks(devs: Vec<Arc<dyn MemberDevice>>) -> Result<Vec<Found>, TakeoverError> {
    let mut out = Vec::new();
    for dev in devs {
        let Some(probed) = probe(dev.as_ref()).map_err(OpenError::from)? else {
            return Err(OpenError::BadMember(no_superblock(dev.as_ref()).to_string()).into());
        };
        let Superblock::V1(sb) = probed.superblock else {
            return Err(TakeoverError::Refused(format!(
                "{}: has 0.90 metadata; uraid changes the level or raid1 device count of arrays with 1.x metadata only",
                dev.name()
            )));
        };
        out.push(Found { dev, sb });
    }
    Ok(out)
}

/// The level the array of `paths` has now, from the first member's superblock.
pub fn current_level(paths: &[PathBuf]) -> Result<Level, TakeoverError> {
    let devs = open_paths(&paths[..paths.len().min(1)], false)?;
    let Some(dev) = devs.into_iter().next() else {
        return Err(TakeoverError::Refused("no members given".into()));
    };
    let Some(probed) = probe(dev.as_ref()).map_err(OpenError::from)? else {
        return Err(OpenError::BadMember(no_superblock(dev.as_ref()).to_string()).into());
    };
    Level::from_md(probed.superblock.info().level).map_err(|e| TakeoverError::Refused(format!("{}: {e}", dev.name())))
}

fn now_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Change the array of `paths` as `request` asks, the devices of `added` taking the new slots
/// in order. Everything is checked before anything is written.
pub fn take_over(
    paths: &[PathBuf],
    added: &[PathBuf],
    request: &TakeoverRequest,
) -> Result<TakeoverDone, TakeoverError> {
    take_over_on(open_paths(paths, true)?, open_paths(added, true)?, request).map(|(done, _)| done)
}

/// [`take_over`] on devices already open (a running array's, wound down): also the devices
/// that carry the new shape's superblocks, to serve the array from (a device failed and
/// removed by the change is not among them).
pub fn take_over_on(
    members: Vec<Arc<dyn MemberDevice>>,
    added: Vec<Arc<dyn MemberDevice>>,
    request: &TakeoverRequest,
) -> Result<(TakeoverDone, Vec<Arc<dyn MemberDevice>>), TakeoverError> {
    let Surveyed { members, plan, name } = survey(members)?;
    let reference = &members[plan.reference].sb;
    let current = current_array(&plan, reference);
    let change = takeover::plan(&current, &TakeoverRequest { added: added.len() as u32, ..request.clone() })?;

    // The superblocks after the change, every one built before any is written.
    let utime = now_seconds() & TIME_SECONDS_MASK;
    let events = plan.events + 1;
    let reshaped = |sb: &Superblock1| -> Superblock1 {
        let mut sb = sb.clone();
        sb.level = change.level.to_md();
        sb.layout = change.layout;
        sb.chunksize = change.chunk_sectors;
        sb.raid_disks = change.raid_disks;
        sb.size = change.dev_sectors;
        // A raid0 zone layout means nothing to other levels, nor to a one-zone raid0.
        sb.feature_map &= !feature::RAID0_LAYOUT;
        sb.events = events;
        sb.utime = utime;
        sb.resync_offset = MAX_SECTOR;
        sb
    };
    // Device numbers and their roles after the change (md's super_1_sync: every other entry of
    // the table is faulty).
    let mut live: Vec<(u32, Role)> = Vec::new();
    let mut written: Vec<Found> = Vec::new();
    let mut dropped = Vec::new();
    let mut rebuilding = Vec::new();
    // The added devices take the first empty slots; hot spares the rest, as md's recovery
    // puts a spare into an empty slot at once.
    let mut for_spares = change.empty_slots.iter().skip(added.len()).copied();
    for (i, m) in members.iter().enumerate() {
        let role = match plan.verdicts[i] {
            MemberVerdict::Active { slot } => match change.slot_map[slot] {
                Some(to) => Role::Active(to),
                None if change.dropped == Dropped::Spare => {
                    dropped.push(format!("{} (slot {slot}) is now a spare, as md leaves it", m.dev.name()));
                    Role::Spare
                }
                None => {
                    dropped.push(format!(
                        "{} (slot {slot}) is failed and removed, as mdadm removes it; its superblock is left as it was (uraid zero-superblock frees it)",
                        m.dev.name()
                    ));
                    continue;
                }
            },
            _ => match for_spares.next() {
                Some(slot) => {
                    rebuilding.push((format!("{} (a spare until now)", m.dev.name()), slot));
                    Role::Active(slot)
                }
                // raid0 has no use for a spare: mdadm removes every one before the change
                // (`impose_level`), and md leaves a removed device's superblock as it was.
                None if change.level == uraid_layout::Level::Raid0 => {
                    dropped.push(format!(
                        "{} (a spare) is removed, as mdadm removes spares before a change to raid0; its superblock is left as it was (uraid zero-superblock frees it)",
                        m.dev.name()
                    ));
                    continue;
                }
                None => Role::Spare,
            },
        };
        let mut sb = reshaped(&m.sb);
        match role {
            // A spare taking a slot is rebuilt from its start.
            Role::Active(_) if matches!(plan.verdicts[i], MemberVerdict::Spare) => sb.set_recovery_offset(Some(0)),
            // A spare records no rebuild, as super_1_sync writes one.
            Role::Spare => sb.set_recovery_offset(None),
            _ => {}
        }
        live.push((m.sb.dev_number, role));
        written.push(Found { dev: Arc::clone(&m.dev), sb });
    }
    let missing: Vec<u32> = for_spares.collect();
    let mut in_use: Vec<u32> = members.iter().map(|m| m.sb.dev_number).collect();
    let base = reshaped(reference);
    let mut new_members = Vec::new();
    for (dev, &slot) in added.iter().zip(&change.empty_slots) {
        if probe(dev.as_ref()).map_err(OpenError::from)?.is_some() {
            return Err(TakeoverError::Refused(format!(
                "{}: carries an md superblock; it may hold data, so it is not added (wipe it with uraid zero-superblock if it is free)",
                dev.name()
            )));
        }
        let number = Superblock::V1(base.clone())
            .new_member_number(&in_use)
            .map_err(|e| TakeoverError::Refused(e.to_string()))?;
        in_use.push(number);
        let mut uuid = [0u8; 16];
        crate::open_array::fill_random(&mut uuid);
        let mut sb = base
            .for_new_member(number, uuid, dev.size())
            .map_err(|e| TakeoverError::Refused(format!("{}: {e}", dev.name())))?;
        sb.set_recovery_offset(Some(0));
        live.push((number, Role::Active(slot)));
        rebuilding.push((dev.name().to_string(), slot));
        new_members.push(Found { dev: Arc::clone(dev), sb });
    }
    let mut all: Vec<Found> = new_members;
    all.extend(written);
    let table_len = all.iter().map(|m| m.sb.max_dev).chain(in_use.iter().map(|n| n + 1)).max().unwrap_or(0);
    for m in &mut all {
        let mut sb = Superblock::V1(m.sb.clone());
        sb.sync_roles(&live, table_len as usize);
        let Superblock::V1(sb) = sb else { unreachable!("built as 1.x") };
        m.sb = sb;
    }
    check_on_paper(&all, &plan.geometry, &change)?;

    // Written new devices first, so that they hold their superblocks before any member names
    // them; then every member is flushed.
    for m in &all {
        m.dev.write_at(m.sb.super_offset * SECTOR_BYTES, &m.sb.to_bytes()).map_err(|e| {
            TakeoverError::Member(format!(
                "{}: writing the superblock: {e}; the members written before it carry the new shape, the others the old one",
                m.dev.name()
            ))
        })?;
    }
    for m in &all {
        m.dev.flush().map_err(|e| TakeoverError::Member(format!("{}: flushing the superblock: {e}", m.dev.name())))?;
    }
    let done = TakeoverDone {
        name,
        from_level: plan.level,
        from_raid_disks: plan.raid_disks as u32,
        change,
        rebuilding,
        missing,
        dropped,
    };
    Ok((done, all.into_iter().map(|m| m.dev).collect()))
}

/// The array of `devs`, read and found fit for a change of shape: its superblocks, how they
/// assemble, and its name for messages.
struct Surveyed {
    members: Vec<Found>,
    plan: assemble::AssemblyPlan,
    name: String,
}

fn survey(devs: Vec<Arc<dyn MemberDevice>>) -> Result<Surveyed, TakeoverError> {
    let members = read_superblocks(devs)?;
    let candidates: Vec<Candidate> =
        members.iter().map(|m| Candidate { name: m.dev.name().to_string(), info: m.sb.info() }).collect();
    let plan = assemble::plan(&candidates)?;
    let name = match plan.name.rsplit(':').next() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => plan.uuid_string(),
    };
    if let Some(r) = plan.reshape {
        return Err(TakeoverError::Refused(format!(
            "array {name} is part-way through a reshape (reshape position {}K): finish it first (uraid grow --continue)",
            r.position / 2
        )));
    }
    if !plan.clean {
        return Err(TakeoverError::Refused(format!(
            "array {name} was not shut down cleanly: resync it first (uraid resync)"
        )));
    }
    let reference = &members[plan.reference].sb;
    if reference.feature_map & feature::BITMAP_OFFSET != 0 {
        return Err(TakeoverError::Refused(format!(
            "array {name} has a write-intent bitmap: uraid changes the shape of arrays without one only (mdadm: Bitmap must be removed before shape can be changed)"
        )));
    }
    if reference.ppl_area().is_some() {
        return Err(TakeoverError::Refused(format!(
            "array {name} has a partial parity log: uraid changes the shape of arrays without one only"
        )));
    }
    for (i, verdict) in plan.verdicts.iter().enumerate() {
        if !matches!(verdict, MemberVerdict::Active { .. } | MemberVerdict::Spare) {
            return Err(TakeoverError::Refused(format!(
                "{}: {verdict}; leave it out (or add it back and let it rebuild) before changing the array",
                candidates[i].name
            )));
        }
    }
    Ok(Surveyed { members, plan, name })
}

/// The layout (md's number) the stopped array of `paths` is first restriped to, where md takes
/// the level `request` asks for over only from another layout (see
/// [`uraid_md::takeover::restripe_first`]); the takeover that follows is checked too. Reads
/// only.
pub fn restripe_first(paths: &[PathBuf], request: &TakeoverRequest) -> Result<Option<i32>, TakeoverError> {
    restripe_first_on(open_paths(paths, false)?, request)
}

/// [`restripe_first`] on devices already open (a running array's, wound down).
pub fn restripe_first_on(
    devs: Vec<Arc<dyn MemberDevice>>,
    request: &TakeoverRequest,
) -> Result<Option<i32>, TakeoverError> {
    let Surveyed { members, plan, .. } = survey(devs)?;
    let current = current_array(&plan, &members[plan.reference].sb);
    Ok(takeover::restripe_first(&current, request)?.map(|layout| layout.to_md() as i32))
}

/// The array as the takeover rules see it.
fn current_array(plan: &assemble::AssemblyPlan, reference: &Superblock1) -> CurrentArray {
    let raid0_single_zone = match &plan.geometry {
        Geometry::Raid0(layout) => match layout.zones() {
            [zone] => Some(zone.sectors / zone.members.len() as u64),
            _ => None,
        },
        _ => None,
    };
    CurrentArray {
        level: plan.level,
        layout: reference.layout,
        chunk_sectors: plan.chunk_sectors,
        in_sync: (0..plan.raid_disks).map(|s| plan.slots[s].is_some() && plan.recovering[s].is_none()).collect(),
        occupied: plan.slots.iter().map(Option::is_some).collect(),
        dev_sectors: plan.component_sectors,
        raid0_single_zone,
        spares: plan.verdicts.iter().filter(|v| matches!(v, MemberVerdict::Spare)).count() as u32,
    }
}

/// Assemble the superblocks about to be written, as the next start will: they must make the
/// new array, with room for every byte the old one held.
fn check_on_paper(all: &[Found], old: &Geometry, change: &Takeover) -> Result<(), TakeoverError> {
    let candidates: Vec<Candidate> =
        all.iter().map(|m| Candidate { name: m.dev.name().to_string(), info: m.sb.info() }).collect();
    let plan = assemble::plan(&candidates).map_err(|e| {
        TakeoverError::Refused(format!("the changed superblocks would not assemble ({e}); nothing was written"))
    })?;
    if plan.level != change.level || plan.raid_disks as u32 != change.raid_disks {
        return Err(TakeoverError::Refused(format!(
            "the changed superblocks would assemble as {} of {} devices, not {} of {}; nothing was written",
            plan.level, plan.raid_disks, change.level, change.raid_disks
        )));
    }
    if plan.geometry.array_bytes() < old.array_bytes() {
        return Err(TakeoverError::Refused(format!(
            "the changed array would hold {} bytes, fewer than the {} it holds now; nothing was written",
            plan.geometry.array_bytes(),
            old.array_bytes()
        )));
    }
    Ok(())
}
