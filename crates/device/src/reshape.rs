//! Reshaping a stopped md raid4/5/6 (onto more or fewer members, to another chunk size or
//! layout), or a raid10 in a near layout (onto more or fewer members), through the engine:
//! md's reshape, run in the foreground over the member devices (`uraid grow`).
//!
//! [`Grow::start_reshape`] records the reshape in every superblock (a new member in its slot, the
//! data offset to move down, position 0; or, onto fewer members, the data offset to move up and
//! the position at the end of the smaller array), as `mdadm --grow --raid-devices` has md record it;
//! from then on the array is what the kernel calls mid-reshape, and [`Grow::resume`] takes it
//! up from its superblocks, whoever left it so (uraid cut short, or the kernel). Each step reads
//! one new stripe's worth of data through an engine array over the old shape and writes it as
//! a whole stripe (parity computed by the engine) through an engine array over the new shape;
//! which stripe may go next, and when the position must be recorded first, is
//! [`uraid_md::reshape::GrowWindow`]'s decision. Members are flushed before any record, so a
//! recorded position never runs ahead of the data, and nothing is written past what the
//! records allow: a crash (SIGKILL included) at any point leaves an array the kernel, and
//! [`Grow::resume`], continue from the last record.
//!
//! Where the data offset cannot move (0.90 metadata, 1.0, or no room before the data), a grow
//! onto more members runs in place, its critical section backed up on the added members in
//! mdadm's format first (`critical`); the members carry either metadata (`member`).
//!
//! A member that fails part-way does not stop the reshape while the array can spare it, as md
//! goes on degraded: the engine reads round it (from parity) and writes without it, and the
//! other members' superblocks record it faulty before the reshape goes on, so it is never read
//! again, by uraid or the kernel. A reshape left degraded (a missing slot) is taken up the same
//! way.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use uraid_engine::array::{Array, Completion, IoResult, MemberIo, Request};
use uraid_engine::blocking::execute;
use uraid_engine::{EngineError, Geometry, SlotState, SECTOR_BYTES};
use uraid_md::assemble::{self, Candidate, MemberVerdict};
use uraid_md::reshape::{choose_new_offset, runs_backwards, GrowStep, GrowWindow, NewShape, ReshapeError};
use uraid_md_format::{Role, Superblock};

use crate::member::MemberDevice;
use crate::open_member::Member;
use crate::probe::{no_superblock, probe};
use crate::target::MemberTarget;
use crate::OpenError;

mod critical;
mod io;
mod member;
mod restripe;
mod shrink;

use member::GrowMember;

/// Why a grow could not start or go on. Nothing is written before a refusal.
#[derive(Debug, thiserror::Error)]
pub enum GrowError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Reshape(#[from] ReshapeError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The request is not one this grow does, or the array is not in a state to grow.
    #[error("{0}")]
    Refused(String),
    /// The start of the reshape is recorded in the superblocks, but it could not be taken up:
    /// nothing more is written, and the next assembly (or the kernel) continues it.
    #[error("the reshape was recorded but could not be taken up: {0}")]
    NotTakenUp(Box<GrowError>),
    /// A reshape onto fewer members would make the array smaller (`now` to `after` bytes, each
    /// member giving up `component_cut` bytes to make room to move the data up), and the new
    /// size was not given back as the word that the rest may go.
    #[error(
        "this change will reduce the size of the array from {}K to {}K{}: shrink the file system on it to at most {}K first, then give --array-size={}K to say the rest may go (mdadm: use --grow --array-size first to truncate array)",
        now / 1024,
        after / 1024,
        if *component_cut > 0 { format!(" (each member gives {}K less, to make room after its data to move the data up by a chunk)", component_cut / 1024) } else { String::new() },
        after / 1024,
        after / 1024
    )]
    Shrinks { now: u64, after: u64, component_cut: u64 },
    /// A client's request goes past the end of the array as it is served while reshaped.
    #[error("{len} bytes at offset {offset} go past the end of the array ({size} bytes while it is reshaped)")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    /// A member I/O failed where the array could not spare the member (or recording its
    /// failure failed): the reshape stops where its last record is.
    #[error("{0}; the reshape stopped at its last recorded position")]
    Member(String),
}

impl From<uraid_md_format::FormatError> for GrowError {
    fn from(e: uraid_md_format::FormatError) -> GrowError {
        GrowError::Refused(e.to_string())
    }
}

/// A reshape in progress on a stopped array, driven one step at a time.
pub struct Grow {
    members: Vec<GrowMember>,
    old: Array,
    new: Array,
    /// Per slot, where each shape's member I/O goes (none for a slot no member fills).
    old_targets: Vec<Option<MemberTarget>>,
    new_targets: Vec<Option<MemberTarget>>,
    window: GrowWindow,
    /// The logical byte the reshape has reached (md's `reshape_progress`): bytes below it are
    /// reshaped, or, for a reshape run backwards, bytes from it on.
    position: u64,
    /// The position the superblocks hold, in logical bytes.
    recorded: u64,
    /// The events the superblocks hold (each record adds one).
    events: u64,
    /// The array's name, else its UUID, for messages.
    name: String,
    /// Members before the reshape.
    old_raid_disks: u32,
    /// The shapes before and after (members, layout, chunk), for messages.
    shapes: (NewShape, NewShape),
    level: uraid_layout::Level,
    /// Per slot of the new shape, the index of its member in `members` (none: missing).
    slot_member: Vec<Option<usize>>,
    /// The superblocks say dirty (client writes while serving, or found so).
    dirty: bool,
    /// Found dirty when the reshape was taken up: a resync is owed, so no stop marks it clean.
    owes_resync: bool,
    /// Where the added members hold the backup of a reshape in place's critical section, while
    /// it is needed (see `critical`).
    backup: Vec<critical::BackupPlace>,
}

fn now_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn io_error(dev: &dyn MemberDevice, what: &str, e: std::io::Error) -> GrowError {
    GrowError::Member(format!("{}: {what}: {e}", dev.name()))
}

/// Open `paths` writable.
fn open_paths(paths: &[PathBuf]) -> Result<Vec<Arc<dyn MemberDevice>>, GrowError> {
    let mut out: Vec<Arc<dyn MemberDevice>> = Vec::new();
    for p in paths {
        let dev = Member::open(p, true).map_err(|source| OpenError::Open { path: p.display().to_string(), source })?;
        out.push(Arc::new(dev));
    }
    Ok(out)
}

/// Read the superblocks of `devs`.
fn read_members(devs: Vec<Arc<dyn MemberDevice>>) -> Result<Vec<GrowMember>, GrowError> {
    let mut out = Vec::new();
    for dev in devs {
        let probed = probe(dev.as_ref()).map_err(OpenError::from)?;
        let Some(probed) = probed else {
            return Err(OpenError::BadMember(no_superblock(dev.as_ref()).to_string()).into());
        };
        out.push(GrowMember { dev, sb: probed.superblock, failed: None });
    }
    Ok(out)
}

/// What a reshape is asked to change: the number of members, the layout (md's number), the
/// chunk size (sectors). What is not given stays as it is. `array_size` (bytes) is the user's
/// word that the array may shrink to that size (mdadm's `--array-size`, which it wants set
/// before a reshape onto fewer members): refused when absent or different.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReshapeRequest {
    pub raid_devices: Option<u32>,
    pub layout: Option<i32>,
    pub chunk_sectors: Option<u32>,
    pub array_size: Option<u64>,
}

impl Grow {
    /// Record in every superblock the reshape `request` asks for (more or fewer members, the
    /// new ones taken from `added`, another layout, another chunk size, or several at once), as
    /// md records its start: refused unless the array is a whole, clean raid4/5/6 with 1.x
    /// metadata and room to move its data by a step (before it, or after it for a reshape run
    /// backwards). Checks everything before writing.
    pub fn start_reshape(paths: &[PathBuf], added: &[PathBuf], request: ReshapeRequest) -> Result<(), GrowError> {
        Grow::start_reshape_on(open_paths(paths)?, open_paths(added)?, request).map(drop)
    }

    /// [`Grow::start_reshape`] on devices already open; the reshape, taken up at position 0
    /// from the superblocks as written (not read back).
    pub fn start_reshape_on(
        devs: Vec<Arc<dyn MemberDevice>>,
        added: Vec<Arc<dyn MemberDevice>>,
        request: ReshapeRequest,
    ) -> Result<Grow, GrowError> {
        let mut members = read_members(devs)?;
        let candidates: Vec<Candidate> =
            members.iter().map(|m| Candidate { name: m.dev.name().to_string(), info: m.sb.info() }).collect();
        let plan = assemble::plan(&candidates)?;
        if let Some(r) = plan.reshape {
            return Err(GrowError::Refused(format!(
                "a reshape is already in progress (reshape position {}K); continue it with uraid grow --continue",
                r.position / 2
            )));
        }
        if !plan.level.is_parity() && plan.level != uraid_layout::Level::Raid10 {
            return Err(GrowError::Refused(format!(
                "uraid grows raid4, raid5, raid6 and raid10 arrays only; this one is {}",
                plan.level
            )));
        }
        let reference = members[plan.reference].sb.info();
        let old = plan.raid_disks as u32;
        let to = restripe::new_shape(plan.level, &reference, old, &request)?;
        if added.len() as u32 != to.raid_disks.saturating_sub(old) {
            return Err(GrowError::Refused(if to.raid_disks <= old {
                format!(
                    "--add takes new devices for more members; the array goes from {old} to {} devices (give --raid-devices)",
                    to.raid_disks
                )
            } else {
                format!(
                    "growing from {old} to {} devices needs {} new device(s) (--add); {} given",
                    to.raid_disks,
                    to.raid_disks - old,
                    added.len()
                )
            }));
        }
        if plan.degraded() {
            return Err(GrowError::Refused("the array is degraded: rebuild it before growing it".into()));
        }
        if !plan.clean {
            return Err(GrowError::Refused(
                "the array was not shut down cleanly: resync it (uraid resync) before growing it".into(),
            ));
        }
        let delta = to.raid_disks as i32 - old as i32;
        // A raid10 moves by whole steps of a row per copy (md wants at least a chunk).
        let copies = uraid_layout::Raid10Format::near_copies(reference.layout)
            .filter(|_| plan.level == uraid_layout::Level::Raid10)
            .unwrap_or(1);
        // Without room to move the data, a raid4/5/6 grows onto more members in place, its
        // critical section backed up on the added members (as mdadm's, to the spares it adds).
        let in_place = delta > 0 && plan.level.is_parity();
        let step_sectors = to.chunk_sectors * copies;
        let (component, backwards, moved) = match &members[plan.reference].sb {
            Superblock::V1(sb) => {
                let backwards = runs_backwards(sb, delta);
                let component = shrink::component_size(sb, to, backwards, copies);
                let reference = uraid_md_format::Superblock1 { size: component, ..sb.clone() };
                (component, backwards, choose_new_offset(&reference, step_sectors, backwards, in_place)?)
            }
            // 0.90 records no data offset: it grows in place, onto more members only.
            Superblock::V090(_) if in_place => (reference.component_sectors, false, 0),
            Superblock::V090(_) => {
                return Err(GrowError::Refused(
                    "0.90 metadata records no data offset to move, so uraid reshapes a 0.90 array onto more devices only (in place, its critical section backed up on the added devices, as mdadm does); fewer devices, or another chunk size or layout on the same devices, need mdadm's backup file, which uraid does not take".into(),
                ))
            }
        };
        shrink::check_array_size(plan.level, &reference, old, to, component, copies, request.array_size)?;
        // Every member must have that room; they were made together, so they normally agree.
        for m in &mut members {
            m.set_component_sectors(component);
            let own = match &m.sb {
                Superblock::V1(sb) => choose_new_offset(sb, step_sectors, backwards, in_place)?,
                Superblock::V090(_) => 0,
            };
            if own.abs() < moved.abs() || m.data_offset() != reference.data_offset {
                return Err(GrowError::Refused(format!(
                    "{}: its data offset ({} sectors) differs from the other members' ({} sectors)",
                    m.dev.name(),
                    m.data_offset(),
                    reference.data_offset
                )));
            }
        }
        let mut in_use: Vec<u32> = members.iter().map(|m| m.sb.info().dev_number).collect();
        let mut new_members = Vec::new();
        for (i, dev) in added.into_iter().enumerate() {
            if probe(dev.as_ref()).map_err(OpenError::from)?.is_some() {
                return Err(GrowError::Refused(format!(
                    "{}: carries an md superblock; it may hold data, so it is not added (wipe it with uraid zero-superblock if it is free)",
                    dev.name()
                )));
            }
            let template = &members[plan.reference].sb;
            let number = template.new_member_number(&in_use)?;
            in_use.push(number);
            let mut uuid = [0u8; 16];
            crate::open_array::fill_random(&mut uuid);
            let sb = template.for_new_member(number, uuid, dev.size())?;
            new_members.push((dev, sb, number, old + i as u32));
        }
        let events = members.iter().map(|m| m.sb.info().events).max().unwrap_or(0) + 1;
        let utime = now_seconds();
        let mut all = members;
        for (dev, sb, _, _) in &new_members {
            all.push(GrowMember { dev: Arc::clone(dev), sb: sb.clone(), failed: None });
        }
        for m in &mut all {
            for (_, _, number, slot) in &new_members {
                m.sb.set_role(*number, Role::Active(*slot));
            }
            m.begin_reshape(to, moved);
            m.stamp(events, utime);
        }
        if moved != 0 {
            write_first_superblocks(&all)?;
            return Grow::take_up(all).map_err(|e| GrowError::NotTakenUp(Box::new(e)));
        }
        // In place: taken up from the superblocks not yet written, so the critical section is
        // backed up (read through the old shape) before any superblock says a reshape runs;
        // a crash before the superblocks leaves the array as it was.
        let mut grow = Grow::take_up(all)?;
        let critical = grow.window.critical_section();
        grow.back_up(0..critical)?;
        write_first_superblocks(&grow.members)?;
        grow.through_critical_section().map_err(|e| GrowError::NotTakenUp(Box::new(e)))?;
        Ok(grow)
    }

    /// Take up the reshape recorded in the superblocks of `paths`, from its recorded position.
    pub fn resume(paths: &[PathBuf]) -> Result<Grow, GrowError> {
        Grow::resume_on(open_paths(paths)?)
    }

    /// [`Grow::resume`] on devices already open. A reshape in place cut short inside its
    /// critical section is first mended from its backup, then taken past that section.
    pub fn resume_on(devs: Vec<Arc<dyn MemberDevice>>) -> Result<Grow, GrowError> {
        let mut grow = Grow::take_up(read_members(devs)?)?;
        grow.restore_backup()?;
        grow.through_critical_section()?;
        Ok(grow)
    }

    /// Take up the reshape the superblocks of `opened` record.
    fn take_up(opened: Vec<GrowMember>) -> Result<Grow, GrowError> {
        let candidates: Vec<Candidate> =
            opened.iter().map(|m| Candidate { name: m.dev.name().to_string(), info: m.sb.info() }).collect();
        let plan = assemble::plan(&candidates)?;
        let Some(reshape) = plan.reshape else {
            return Err(GrowError::Refused("no reshape is in progress on this array".into()));
        };
        // Found dirty (a crash while a server wrote during the reshape), the array is reshaped
        // all the same: the reshape reads data only and computes every new stripe's parity, and
        // the dirty mark stays until the resync after it, which sets right any stripe a crash
        // cut a write short in.
        let refi = &candidates[plan.reference].info;
        if reshape.new_level != refi.level {
            return Err(GrowError::Refused(
                "uraid continues reshapes that keep the level only: more or fewer members, another layout or chunk size".into(),
            ));
        }
        let shifts: Vec<i64> =
            plan.slots.iter().flatten().map(|&i| candidates[i].info.reshape.map_or(0, |r| r.new_offset)).collect();
        let shift = shifts[0];
        // The data moves down for a reshape run forwards, up for one run backwards; or stays
        // for a raid4/5/6 grown onto more members in place (with a critical section backup).
        let in_place = shift == 0 && !reshape.backwards && reshape.delta_disks > 0 && plan.level.is_parity();
        let wrong_way = if reshape.backwards { shift <= 0 } else { shift >= 0 && !in_place };
        if wrong_way || shifts.iter().any(|&s| s != shift) {
            return Err(GrowError::Refused(format!(
                "uraid continues reshapes whose data offset moves {} by the same amount on every member only (md moves it so for a reshape run {}), or stays for one onto more members of a raid4/5/6",
                if reshape.backwards { "up" } else { "down" },
                if reshape.backwards { "backwards" } else { "forwards" }
            )));
        }
        let (old_geometry, new_geometry) =
            assemble::reshape_shapes(plan.level, refi, &reshape, &plan.slots, &candidates)?;
        let old_raid_disks = reshape.old_raid_disks(plan.raid_disks as u32);
        // raid4/5/6 step by data members, a raid10 by members and copies (see GrowWindow).
        let (parity, copies) = match plan.level {
            uraid_layout::Level::Raid6 => (2, 1),
            uraid_layout::Level::Raid10 => match uraid_layout::Raid10Format::near_copies(refi.layout) {
                Some(copies) if refi.layout == reshape.new_layout => (0, u64::from(copies)),
                _ => {
                    return Err(GrowError::Refused(
                        "uraid continues a raid10 reshape onto more or fewer devices in the same near layout only"
                            .into(),
                    ))
                }
            },
            _ => (1, 1),
        };
        let window = GrowWindow {
            old_chunk: u64::from(refi.chunk_sectors) * SECTOR_BYTES,
            new_chunk: u64::from(reshape.new_chunk_sectors) * SECTOR_BYTES,
            old_data_disks: u64::from(old_raid_disks) - parity,
            new_data_disks: plan.raid_disks as u64 - parity,
            copies,
            shift: shift.unsigned_abs() * SECTOR_BYTES,
            member_bytes: new_geometry.member_data_bytes(),
            backwards: reshape.backwards,
            backed_up: 0,
        };
        if old_geometry.array_bytes() != window.old_size() || new_geometry.array_bytes() != window.new_size() {
            return Err(GrowError::Refused("the two shapes of the reshape do not agree on the members' size".into()));
        }
        let mut members: Vec<GrowMember> = Vec::new();
        // Every slot of both shapes (the old one has more onto fewer members).
        // A slot no member fills is missing in both shapes (a member missing from the old
        // shape's slot is missing from the new shape's slot of the same number).
        let mut slot_member: Vec<Option<usize>> = vec![None; plan.slots.len()];
        for (i, m) in opened.into_iter().enumerate() {
            match plan.verdicts[i] {
                MemberVerdict::Active { slot } => slot_member[slot] = Some(members.len()),
                MemberVerdict::Spare => {}
                ref other => return Err(GrowError::Refused(format!("{}: {other}", m.dev.name()))),
            }
            members.push(m);
        }
        let targets = |geometry: &Geometry, moved: bool| -> Vec<Option<MemberTarget>> {
            (0..geometry.raid_disks())
                .map(|slot| {
                    let m = &members[slot_member[slot]?];
                    let offset = if moved { m.data_offset().saturating_add_signed(shift) } else { m.data_offset() };
                    Some(MemberTarget {
                        dev: Arc::clone(&m.dev),
                        base: offset * SECTOR_BYTES,
                        data_bytes: geometry.member_data_bytes(),
                        log_area: None,
                    })
                })
                .collect()
        };
        let (old_targets, new_targets) = (targets(&old_geometry, false), targets(&new_geometry, true));
        for (geometry, shape) in [(&old_geometry, "old"), (&new_geometry, "new")] {
            if !geometry.is_readable(&|slot| slot_member[slot].is_some()) {
                return Err(GrowError::Refused(format!(
                    "the array misses more members than its {shape} shape can spare: it cannot be reshaped"
                )));
            }
        }
        let states = |geometry: &Geometry| -> Vec<SlotState> {
            (0..geometry.raid_disks())
                .map(|slot| if slot_member[slot].is_some() { SlotState::InSync } else { SlotState::Missing })
                .collect()
        };
        let old = Array::new(old_geometry.clone(), states(&old_geometry))?;
        let new = Array::new(new_geometry.clone(), states(&new_geometry))?;
        let position = reshape.position_bytes();
        if reshape.backwards && position > window.start() {
            return Err(GrowError::Refused(format!(
                "the reshape position ({} sectors) is past the end of the array it shrinks to ({} sectors)",
                reshape.position,
                window.start() / SECTOR_BYTES
            )));
        }
        let name = plan.name.rsplit(':').next().unwrap_or_default().to_string();
        let mut grow = Grow {
            events: plan.events,
            members,
            old,
            new,
            old_targets,
            new_targets,
            window,
            position,
            recorded: position,
            name: if name.is_empty() { plan.uuid_string() } else { name },
            old_raid_disks,
            shapes: (
                NewShape { raid_disks: old_raid_disks, layout: refi.layout, chunk_sectors: refi.chunk_sectors },
                NewShape {
                    raid_disks: plan.raid_disks as u32,
                    layout: reshape.new_layout,
                    chunk_sectors: reshape.new_chunk_sectors,
                },
            ),
            level: plan.level,
            slot_member,
            dirty: !plan.clean,
            owes_resync: !plan.clean,
            backup: Vec::new(),
        };
        grow.align_superblocks(reshape.position)?;
        Ok(grow)
    }

    /// A crash among the superblock writes of a record leaves some members one event behind
    /// (md takes them: they are not stale). Before the next record bumps the events again, they
    /// are brought level with the freshest, at its events and position, so that no later cut
    /// can leave a member two events behind (stale, and out of the array).
    fn align_superblocks(&mut self, position: u64) -> Result<(), GrowError> {
        let events = self.events;
        let level = |m: &GrowMember| {
            let info = m.sb.info();
            info.events == events && info.reshape.is_some_and(|r| r.position == position)
        };
        if self.members.iter().all(level) {
            return Ok(());
        }
        for m in &mut self.members {
            m.record_position(position);
            m.sb.set_events(events);
        }
        self.write_superblocks().map_err(|(_, why)| GrowError::Member(why))
    }

    /// Write every working member's superblock as it stands, then flush them; else which
    /// member failed, and how.
    fn write_superblocks(&self) -> Result<(), (usize, String)> {
        let working = || self.members.iter().enumerate().filter(|(_, m)| m.failed.is_none());
        for (i, m) in working() {
            m.write_superblock().map_err(|e| (i, e.to_string()))?;
        }
        for (i, m) in working() {
            m.dev.flush().map_err(|e| (i, io_error(m.dev.as_ref(), "flushing the superblock", e).to_string()))?;
        }
        Ok(())
    }

    /// [`Grow::settle_end`] on the devices at `paths`.
    pub fn settle_end_at(paths: &[PathBuf]) -> Result<bool, GrowError> {
        Grow::settle_end(open_paths(paths)?)
    }

    /// After a crash among the writes of the final superblocks, record the end on the members
    /// that missed it (one event behind, their reshape at its end), as the others have it, so
    /// that every member says the same to the kernel too. True if any was behind.
    pub fn settle_end(devs: Vec<Arc<dyn MemberDevice>>) -> Result<bool, GrowError> {
        let mut members = read_members(devs)?;
        let candidates: Vec<Candidate> =
            members.iter().map(|m| Candidate { name: m.dev.name().to_string(), info: m.sb.info() }).collect();
        let plan = assemble::plan(&candidates)?;
        if plan.reshape.is_some() {
            return Ok(false);
        }
        let reference = candidates[plan.reference].info.clone();
        let mut settled = false;
        for (m, c) in members.iter_mut().zip(&candidates) {
            let behind = c.info.reshape.is_some() && plan.missed_only_the_end(&c.info);
            if behind {
                m.finish_reshape();
                m.stamp(reference.events, reference.utime);
                m.write_superblock()?;
                m.dev.flush().map_err(|e| io_error(m.dev.as_ref(), "flushing the superblock", e))?;
                settled = true;
            }
        }
        Ok(settled)
    }

    /// Every device taking part (the added ones included), as read at the start, but those
    /// that failed part-way.
    pub fn devices(&self) -> Vec<Arc<dyn MemberDevice>> {
        self.working().map(|m| Arc::clone(&m.dev)).collect()
    }

    /// The members that failed part-way, by name, with why.
    pub fn failures(&self) -> Vec<(String, String)> {
        self.members.iter().filter_map(|m| Some((m.dev.name().to_string(), m.failed.clone()?))).collect()
    }

    /// The shape the array is reshaped from.
    pub fn old_geometry(&self) -> &Geometry {
        self.old.geometry()
    }

    /// Each slot of the new shape: the device in it, by name, and its state (missing, or
    /// faulty once its member failed part-way).
    pub fn slots(&self) -> Vec<(Option<String>, SlotState)> {
        self.slot_member
            .iter()
            .zip(self.new.slot_states())
            .map(|(m, &state)| (m.map(|i| self.members[i].dev.name().to_string()), state))
            .collect()
    }

    /// The array's name (else its UUID), for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Members before and after.
    pub fn raid_disks(&self) -> (u32, u32) {
        (self.old_raid_disks, self.members.iter().map(|m| m.sb.info().raid_disks).max().unwrap_or(0))
    }

    /// What differs between the two shapes: (what, old, new, unit). The member count is listed
    /// when it changes, or when nothing else does.
    fn differences(&self) -> Vec<(&'static str, String, String, &'static str)> {
        let (from, to) = self.shapes;
        let mut found = Vec::new();
        let restripe = from.chunk_sectors != to.chunk_sectors || from.layout != to.layout;
        if from.raid_disks != to.raid_disks || !restripe {
            found.push(("", from.raid_disks.to_string(), to.raid_disks.to_string(), " devices"));
        }
        if from.chunk_sectors != to.chunk_sectors {
            let k = |sectors: u32| format!("{}K", sectors / 2);
            found.push(("chunk ", k(from.chunk_sectors), k(to.chunk_sectors), ""));
        }
        if from.layout != to.layout {
            found.push(("layout ", self.layout_name(from.layout), self.layout_name(to.layout), ""));
        }
        found
    }

    /// What the reshape changes, in words: "from 4 to 5 devices", "from chunk 64K to 128K",
    /// "from layout left-symmetric to right-asymmetric", joined.
    pub fn change(&self) -> String {
        let parts: Vec<String> = self
            .differences()
            .into_iter()
            .map(|(what, old, new, unit)| format!("from {what}{old} to {new}{unit}"))
            .collect();
        parts.join(", ")
    }

    /// The shape reached, in words: "5 devices (from 4)", "chunk 128K (from 64K)", "layout
    /// right-asymmetric (from left-symmetric)", joined.
    pub fn outcome(&self) -> String {
        let parts: Vec<String> = self
            .differences()
            .into_iter()
            .map(|(what, old, new, unit)| format!("{what}{new}{unit} (from {old})"))
            .collect();
        parts.join(", ")
    }

    fn layout_name(&self, layout: i32) -> String {
        uraid_md::layout_name(self.level, layout).unwrap_or_else(|| layout.to_string())
    }

    /// Logical bytes reshaped so far, and how many there are to reshape (the array's size once
    /// reshaped, or, onto fewer members, the size it shrinks to).
    pub fn progress(&self) -> (u64, u64) {
        (self.window.done(self.position), self.window.done(self.window.end()))
    }

    /// The position the superblocks hold, in bytes.
    pub fn recorded(&self) -> u64 {
        self.recorded
    }

    /// Logical bytes reshaped as of the last record.
    pub fn recorded_progress(&self) -> u64 {
        self.window.done(self.recorded)
    }

    /// Do the next step: reshape one stripe, or record the position first when the next stripe
    /// needs it, or, once every stripe is done, record the end. True when the reshape is over.
    pub fn step(&mut self) -> Result<bool, GrowError> {
        match self.window.next(self.position, self.recorded)? {
            GrowStep::Stripe { logical, .. } => {
                let next = if self.window.backwards { logical.start } else { logical.end };
                let old_size = self.window.old_size();
                let mut data = vec![0u8; (logical.end - logical.start) as usize];
                if logical.start < old_size {
                    let len = logical.end.min(old_size) - logical.start;
                    let read = self.perform(Shape::Old, Request::Read { offset: logical.start, len })?;
                    let Completion::Read(bytes) = read else { unreachable!("a read answers with bytes") };
                    bytes.copy_to(&mut data[..len as usize]);
                }
                self.perform(Shape::New, Request::Write { offset: logical.start, data: Bytes::from(data) })?;
                self.position = next;
                Ok(false)
            }
            GrowStep::Record { at } => {
                self.record(at)?;
                Ok(false)
            }
            GrowStep::Finished => {
                self.finish()?;
                Ok(true)
            }
        }
    }

    /// Record the position reached (after a flush), if it moved on since the last record: what
    /// a stop does, and what is done every few seconds so a crash loses little.
    pub fn checkpoint(&mut self) -> Result<(), GrowError> {
        if self.window.moved_on(self.position, self.recorded) && self.position != self.window.end() {
            self.record(self.position)?;
        }
        Ok(())
    }

    /// Flush every working member, then write every working member's superblock with `edit`
    /// applied and the events one up (md's `md_update_sb`), then flush them.
    /// A member that fails a flush or its superblock write is failed as md fails it (recorded
    /// faulty in the others', the update made again without it), where the array can spare it.
    fn update_superblocks(&mut self, edit: impl Fn(&mut GrowMember)) -> Result<(), GrowError> {
        loop {
            let flushed = self.members.iter().enumerate().filter(|(_, m)| m.failed.is_none()).try_for_each(|(i, m)| {
                m.dev.flush().map_err(|e| (i, io_error(m.dev.as_ref(), "flushing", e).to_string()))
            });
            let written = flushed.and_then(|()| {
                self.events += 1;
                let utime = now_seconds();
                for m in self.members.iter_mut().filter(|m| m.failed.is_none()) {
                    edit(m);
                    m.stamp(self.events, utime);
                }
                self.write_superblocks()
            });
            match written {
                Ok(()) => return Ok(()),
                Err((i, why)) => self.mark_failed(i, why)?,
            }
        }
    }

    /// The members that have not failed.
    fn working(&self) -> impl Iterator<Item = &GrowMember> {
        self.members.iter().filter(|m| m.failed.is_none())
    }

    /// Run `request` on one shape. A member I/O that fails is the engine's to go round, as it
    /// does when serving; the member is then failed in the other shape too, and recorded
    /// faulty in the other members' superblocks before anything more is done, so a crash
    /// never leaves it counted in sync beside data written without it. Where the array cannot
    /// spare it, the request fails and the reshape stops at its last record.
    fn perform(&mut self, shape: Shape, request: Request) -> Result<Completion, GrowError> {
        let (array, targets) = match shape {
            Shape::Old => (&mut self.old, &self.old_targets),
            Shape::New => (&mut self.new, &self.new_targets),
        };
        let (done, failed) = run(array, targets, request);
        for (slot, why) in failed {
            self.fail_member(slot, why)?;
        }
        done
    }

    /// Record the member in `slot` faulty (it failed: `why`), in both shapes and in the other
    /// members' superblocks.
    fn fail_member(&mut self, slot: usize, why: String) -> Result<(), GrowError> {
        let Some(i) = self.slot_member[slot] else { return Ok(()) };
        if self.members[i].failed.is_some() {
            return Ok(());
        }
        self.mark_failed(i, why)?;
        self.update_superblocks(|_| {})
    }

    /// Fail member `i` (`why`) in both shapes and mark it faulty in the working members'
    /// superblocks, to be written by the next update; refused, nothing marked, where a shape
    /// cannot spare it (md would fail the array: the reshape stops at its last record).
    fn mark_failed(&mut self, i: usize, why: String) -> Result<(), GrowError> {
        if let Some(slot) = self.slot_member.iter().position(|&m| m == Some(i)) {
            for array in [&self.old, &self.new] {
                let states = array.slot_states();
                let others_read = |s: usize| s != slot && states[s] == SlotState::InSync;
                if slot < states.len() && !array.geometry().is_readable(&others_read) {
                    return Err(GrowError::Member(why));
                }
            }
            for array in [&mut self.old, &mut self.new] {
                if array.slot_states().get(slot) == Some(&SlotState::InSync) {
                    array.set_slot_state(slot, SlotState::Faulty, true)?;
                }
            }
        }
        let dev_number = self.members[i].sb.info().dev_number;
        self.members[i].failed = Some(why);
        for m in self.members.iter_mut().filter(|m| m.failed.is_none()) {
            m.sb.set_role(dev_number, Role::Faulty);
        }
        Ok(())
    }

    fn record(&mut self, at: u64) -> Result<(), GrowError> {
        self.update_superblocks(|m| m.record_position(at / SECTOR_BYTES))?;
        self.recorded = at;
        Ok(())
    }

    /// Record the end, then write the final superblocks: a crash among the final writes leaves
    /// members that say the reshape reached the end, which assembly reads at their new offset.
    /// The array is recorded clean there too, as a stop records it, unless it owes a resync
    /// (found dirty when taken up): the writes made while it was reshaped are all done and
    /// flushed (the update flushes first), and nothing was cut short. (A degraded array left
    /// dirty could not be started again: it has no resync to make it right.)
    fn finish(&mut self) -> Result<(), GrowError> {
        let end = self.window.end();
        if self.recorded != end {
            self.record(end)?;
        }
        let clean = !self.owes_resync;
        self.update_superblocks(|m| {
            m.finish_reshape();
            if clean {
                m.sb.set_clean(true);
            }
        })?;
        self.recorded = end;
        self.dirty = !clean;
        Ok(())
    }
}

/// Write the superblocks that start a reshape, last member first, so the new ones hold their
/// superblocks before any old member names them; then flush them.
fn write_first_superblocks(members: &[GrowMember]) -> Result<(), GrowError> {
    for m in members.iter().rev() {
        m.write_superblock()?;
    }
    for m in members {
        m.dev.flush().map_err(|e| io_error(m.dev.as_ref(), "flushing the superblock", e))?;
    }
    Ok(())
}

/// One of the two shapes of a reshape.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Old,
    New,
}

/// Run one request on `array`, its member I/O performed on `targets`: its outcome (a request
/// the array could not serve without the members that failed is an error), and the slots
/// whose member I/O failed, with why.
fn run(
    array: &mut Array,
    targets: &[Option<MemberTarget>],
    request: Request,
) -> (Result<Completion, GrowError>, Vec<(usize, String)>) {
    let mut failed: Vec<(usize, String)> = Vec::new();
    let mut exec = |io: &MemberIo| -> IoResult {
        let Some(target) = &targets[io.slot] else {
            unreachable!("the engine sends no I/O to slot {}, which no member fills", io.slot)
        };
        match target.perform(io) {
            Ok(r) => r,
            Err(e) => {
                if !failed.iter().any(|(slot, _)| *slot == io.slot) {
                    failed.push((io.slot, e.to_string()));
                }
                IoResult::Failed(e)
            }
        }
    };
    let done = execute(array, request, &mut exec).map_err(|e| match failed.first() {
        Some((_, why)) => GrowError::Member(format!("{why}: {e}")),
        None => GrowError::Engine(e),
    });
    (done, failed)
}
