//! Assembly decisions: which members form an array, in which slot, and which are left out.
//!
//! This is mdadm's `--assemble` logic as a pure function of the superblocks found. It owns the
//! freshness rule (a member more than one event behind the freshest is stale, as md's
//! `super_1_validate` and mdadm's assemble decide), slot assignment, and the "can this array run at
//! all" check. It does no I/O; the caller reads superblocks and hands them in.

use std::fmt;

use uraid_engine::geometry::ReshapingLayout;
use uraid_engine::{EngineError, Geometry, SECTOR_BYTES};
use uraid_layout::{
    Level, LinearLayout, ParityAlgorithm, ParityLayout, Raid0Layout, Raid0ZoneLayout, Raid10Format, Raid10Layout,
    Raid1Layout,
};
use uraid_md_format::{uuid::format_md, MemberInfo, MetadataVersion, Reshape, Role};

/// md's feature bit saying the raid0 layout field is meaningful (`MD_FEATURE_RAID0_LAYOUT`).
const FEATURE_RAID0_LAYOUT: u32 = 4096;

/// What assembly concluded about one candidate member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberVerdict {
    /// Active in this slot, up to date.
    Active { slot: usize },
    /// A spare: part of the array, holds no data.
    Spare,
    /// Left out: its event count is behind the array's (it missed writes).
    Stale { events: u64, array_events: u64 },
    /// Left out: the freshest superblock records this device as faulty.
    Faulty,
    /// Left out: another, fresher member claims the same slot.
    Duplicate { slot: usize },
}

impl fmt::Display for MemberVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberVerdict::Active { slot } => write!(f, "active slot {slot}"),
            MemberVerdict::Spare => write!(f, "spare"),
            MemberVerdict::Stale { events, array_events } => {
                write!(f, "stale (events {events} < {array_events}), left out")
            }
            MemberVerdict::Faulty => write!(f, "faulty, left out"),
            MemberVerdict::Duplicate { slot } => write!(f, "duplicate of slot {slot}, left out"),
        }
    }
}

/// The state of an assembled array as md would report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayState {
    Clean,
    Degraded,
    /// An unclean shutdown left parity or mirrors possibly inconsistent.
    Resyncing,
    DegradedResyncing,
}

impl fmt::Display for ArrayState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArrayState::Clean => "clean",
            ArrayState::Degraded => "clean, degraded",
            ArrayState::Resyncing => "active, resync needed",
            ArrayState::DegradedResyncing => "active, degraded, resync needed",
        })
    }
}

/// The outcome of assembly: the array's shape and each candidate's fate.
#[derive(Debug, Clone)]
pub struct AssemblyPlan {
    pub array_uuid: [u8; 16],
    pub name: String,
    pub version: MetadataVersion,
    pub level: Level,
    /// md's layout number as stored.
    pub layout: i32,
    pub chunk_sectors: u32,
    pub raid_disks: usize,
    pub component_sectors: u64,
    /// The highest event count among the members taken.
    pub events: u64,
    /// For each candidate (same order as given), what assembly decided.
    pub verdicts: Vec<MemberVerdict>,
    /// For each slot, the index of the candidate that fills it.
    pub slots: Vec<Option<usize>>,
    /// Index of the candidate whose superblock is the reference (the freshest).
    pub reference: usize,
    /// Whether every member taken says the array was shut down cleanly.
    pub clean: bool,
    pub geometry: Geometry,
    /// For each slot, `Some(sectors)` when its member is only partly rebuilt (md's
    /// `MD_FEATURE_RECOVERY_OFFSET`): the member is written but not read, and recovery resumes
    /// at that member sector.
    pub recovering: Vec<Option<u64>>,
    /// The reshape the reference superblock records as running, if any: `geometry` is then a
    /// [`ReshapingLayout`] (old and new shapes, split at the position), `raid_disks` the new
    /// member count, and `level`, `layout` and `chunk_sectors` the old shape's.
    pub reshape: Option<Reshape>,
}

impl AssemblyPlan {
    /// Slots with no member.
    pub fn missing_slots(&self) -> Vec<usize> {
        (0..self.slots.len()).filter(|&s| self.slots[s].is_none()).collect()
    }

    pub fn degraded(&self) -> bool {
        self.slots.iter().any(Option::is_none) || self.recovering.iter().any(Option::is_some)
    }

    pub fn state(&self) -> ArrayState {
        match (self.degraded(), self.clean) {
            (false, true) => ArrayState::Clean,
            (true, true) => ArrayState::Degraded,
            (false, false) => ArrayState::Resyncing,
            (true, false) => ArrayState::DegradedResyncing,
        }
    }

    pub fn uuid_string(&self) -> String {
        format_md(&self.array_uuid)
    }

    /// The sector where a member's data area starts: its data offset, or, while a reshape
    /// moves the data offset, the lower of the old and the new one (the reshaping layout
    /// counts member offsets from there).
    ///
    /// A member that missed only the superblock update that ended a reshape (one event behind
    /// an array that records none, its own superblock showing the reshape at its end: the
    /// array's end, or its start for a reshape run backwards)
    /// holds its data where the reshape put it: at its new offset. The end is written member
    /// after member, so a crash among those writes leaves such members.
    pub fn data_start(&self, info: &MemberInfo) -> u64 {
        match &info.reshape {
            Some(r) if self.reshape.is_some() => info.data_offset.saturating_add_signed(r.new_offset.min(0)),
            Some(r) if self.missed_only_the_end(info) => info.data_offset.saturating_add_signed(r.new_offset),
            _ => info.data_offset,
        }
    }

    /// Whether a member missed only the superblock update that ended a reshape (see
    /// [`AssemblyPlan::data_start`]): one event behind an array that records no reshape, its
    /// own superblock showing one at its end, over as many members.
    pub fn missed_only_the_end(&self, info: &MemberInfo) -> bool {
        let Some(r) = &info.reshape else { return false };
        self.reshape.is_none()
            && info.events + 1 == self.events
            && (if r.backwards { r.position == 0 } else { r.position_bytes() >= self.geometry.array_bytes() })
            && info.raid_disks as usize == self.raid_disks
    }

    /// Sectors of a member's data area past [`AssemblyPlan::data_start`] that the array may
    /// use: `data_sectors` (its component or usable size), and while a reshape moves the data
    /// offset, as much more as the two starts are apart.
    pub fn data_area_sectors(&self, info: &MemberInfo, data_sectors: u64) -> u64 {
        match &info.reshape {
            Some(r) if self.reshape.is_some() => data_sectors + r.new_offset.unsigned_abs(),
            _ => data_sectors,
        }
    }
}

/// A member candidate: a name for messages and its parsed superblock.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub name: String,
    pub info: MemberInfo,
}

/// How assembly departs from md's defaults: [`AssemblyRules::default`] is md's behaviour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AssemblyRules {
    /// md's `start_dirty_degraded` module parameter: start a raid4/5/6 that stopped uncleanly
    /// while degraded, although a stripe whose write was cut short may then read back wrong
    /// (the write hole). Off by default, as in md.
    pub start_dirty_degraded: bool,
    /// For mutation testing only (a checker plants it to show that it notices): ignore event
    /// counts, so that the first member that is not a spare is the reference, whatever its
    /// events, and no member is left out as stale.
    pub ignore_events: bool,
}

/// Decide how `candidates` (all claiming to belong to one array) assemble.
///
/// Errors when they belong to different arrays, disagree on the array's shape, or too few are
/// usable for the array to run (with the reason spelled out).
pub fn plan(candidates: &[Candidate]) -> Result<AssemblyPlan, EngineError> {
    plan_with(candidates, AssemblyRules::default())
}

/// [`plan`] under `rules` (see [`AssemblyRules`]).
pub fn plan_with(candidates: &[Candidate], rules: AssemblyRules) -> Result<AssemblyPlan, EngineError> {
    let first = candidates.first().ok_or(EngineError::NoMembers)?;
    for c in &candidates[1..] {
        if c.info.array_uuid != first.info.array_uuid {
            return Err(EngineError::MixedArrays {
                first: first.name.clone(),
                first_uuid: format_md(&first.info.array_uuid),
                other: c.name.clone(),
                other_uuid: format_md(&c.info.array_uuid),
            });
        }
    }
    let is_spare = |c: &Candidate| matches!(c.info.role, Role::Spare);
    // The freshest non-spare superblock is the reference, as in md's analyze_sbs.
    let reference = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| !is_spare(c))
        .max_by_key(|(i, c)| if rules.ignore_events { candidates.len() - i } else { c.info.events as usize })
        .map(|(i, _)| i)
        .unwrap_or(0);
    let refi = &candidates[reference].info;
    // A member one event behind that missed the superblock ending a reshape (cut among those
    // writes) still names the old shape as its own and the one reached as the new one: it
    // agrees with the others (`data_start` reads it at its new offset).
    let missed_the_end = |i: &MemberInfo| match (&i.reshape, &refi.reshape) {
        (Some(r), None) => {
            i.events + 1 == refi.events
                && i.raid_disks == refi.raid_disks
                && (r.new_level, r.new_layout, r.new_chunk_sectors) == (refi.level, refi.layout, refi.chunk_sectors)
        }
        _ => false,
    };
    for c in candidates {
        let i = &c.info;
        if !missed_the_end(i)
            && (i.level != refi.level
                || i.raid_disks != refi.raid_disks
                || i.chunk_sectors != refi.chunk_sectors
                || i.layout != refi.layout)
        {
            return Err(EngineError::Inconsistent {
                member: c.name.clone(),
                detail: format!(
                    "level {} raid-devices {} chunk {} layout {} but {} says level {} raid-devices {} chunk {} layout {}",
                    i.level, i.raid_disks, i.chunk_sectors, i.layout,
                    candidates[reference].name, refi.level, refi.raid_disks, refi.chunk_sectors, refi.layout
                ),
            });
        }
    }
    let level = Level::from_md(refi.level)
        .map_err(|e| EngineError::Layout { member: candidates[reference].name.clone(), source: e })?;
    let raid_disks = refi.raid_disks as usize;
    let array_events = refi.events;
    // A reshape onto fewer members still reads the old shape's last slots until it ends (md's
    // raid5 `setup_conf` keeps `max(raid_disks, previous_raid_disks)` slots).
    let slot_count = refi.reshape.map_or(raid_disks, |r| raid_disks.max(r.old_raid_disks(refi.raid_disks) as usize));

    let mut verdicts = Vec::with_capacity(candidates.len());
    let mut slots: Vec<Option<usize>> = vec![None; slot_count];
    for (idx, c) in candidates.iter().enumerate() {
        let i = &c.info;
        // The freshest superblock's view of this device's role wins: a device the array has
        // since marked faulty must not come back, whatever its own superblock claims.
        let ref_role = refi.roles.get(i.dev_number as usize).copied().unwrap_or(i.role);
        let verdict = match (i.role, ref_role) {
            (Role::Spare, _) | (_, Role::Spare) => MemberVerdict::Spare,
            _ if i.events + 1 < array_events && !rules.ignore_events => {
                MemberVerdict::Stale { events: i.events, array_events }
            }
            (_, Role::Faulty) => MemberVerdict::Faulty,
            (Role::Active(slot), Role::Active(_)) if (slot as usize) < slot_count => {
                let slot = slot as usize;
                match slots[slot] {
                    None => {
                        slots[slot] = Some(idx);
                        MemberVerdict::Active { slot }
                    }
                    Some(prev) if candidates[prev].info.events < i.events && !rules.ignore_events => {
                        verdicts[prev] = MemberVerdict::Duplicate { slot };
                        slots[slot] = Some(idx);
                        MemberVerdict::Active { slot }
                    }
                    Some(_) => MemberVerdict::Duplicate { slot },
                }
            }
            _ => MemberVerdict::Faulty,
        };
        verdicts.push(verdict);
    }

    let recovering: Vec<Option<u64>> =
        slots.iter().map(|s| s.and_then(|i| candidates[i].info.recovery_offset)).collect();
    let taken: Vec<&MemberInfo> = slots.iter().flatten().map(|&i| &candidates[i].info).collect();
    let clean = taken.iter().all(|i| i.state_clean);
    let geometry = match &refi.reshape {
        None => build_geometry(level, refi, &slots, candidates),
        Some(reshape) => build_reshaping_geometry(level, refi, reshape, &slots, candidates),
    }
    .map_err(|e| match e {
        EngineError::Layout { source, .. } => {
            EngineError::Layout { member: candidates[reference].name.clone(), source }
        }
        EngineError::Unsupported { detail, .. } => {
            EngineError::Unsupported { member: candidates[reference].name.clone(), detail }
        }
        other => other,
    })?;
    // A partly rebuilt member holds no data that can be trusted yet.
    let alive = |s: usize| slots[s].is_some() && recovering[s].is_none();
    if !geometry.is_readable(&alive) {
        let missing: Vec<String> = (0..slot_count)
            .filter(|&s| !alive(s))
            .map(|s| if slots[s].is_some() { format!("{s} (only partly rebuilt)") } else { s.to_string() })
            .collect();
        let left_out: Vec<String> = candidates
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| !matches!(v, MemberVerdict::Active { .. } | MemberVerdict::Spare))
            .map(|(c, v)| format!("{}: {v}", c.name))
            .collect();
        return Err(EngineError::TooFewMembers {
            level: level.name().to_string(),
            raid_disks: slot_count,
            present: slot_count - missing.len(),
            missing: missing.join(", "),
            left_out: if left_out.is_empty() { String::new() } else { format!("; left out: {}", left_out.join("; ")) },
        });
    }
    Ok(AssemblyPlan {
        array_uuid: refi.array_uuid,
        name: refi.name.clone(),
        version: refi.version,
        level,
        layout: refi.layout,
        chunk_sectors: refi.chunk_sectors,
        raid_disks,
        component_sectors: refi.component_sectors,
        events: array_events,
        verdicts,
        slots,
        reference,
        clean,
        geometry,
        recovering,
        reshape: refi.reshape,
    })
}

/// The layout of an array part-way through a reshape: its two shapes ([`reshape_shapes`]) split
/// at the reshape position, each from its own data offset on each member (the new one
/// `new_offset` sectors from the old).
pub fn build_reshaping_geometry(
    level: Level,
    refi: &MemberInfo,
    reshape: &Reshape,
    slots: &[Option<usize>],
    candidates: &[Candidate],
) -> Result<Geometry, EngineError> {
    let (old, new) = reshape_shapes(level, refi, reshape, slots, candidates)?;
    // Per slot, each shape's data start from the lower of the two; a slot without a member
    // takes the reference's (it is never read).
    let (mut old_start, mut new_start) = (Vec::new(), Vec::new());
    for slot in slots {
        let info = slot.map_or(refi, |i| &candidates[i].info);
        let shift = info.reshape.map_or(0, |r| r.new_offset);
        old_start.push((-shift).max(0) as u64 * SECTOR_BYTES);
        new_start.push(shift.max(0) as u64 * SECTOR_BYTES);
    }
    Ok(Geometry::custom(ReshapingLayout::new(
        old,
        new,
        reshape.position_bytes(),
        reshape.backwards,
        old_start,
        new_start,
    )))
}

/// Why an array part-way through a reshape in place (onto more members of a raid4/5/6, no data
/// offset moved) cannot be read as its superblocks leave it: its recorded position is inside
/// the critical section, where stripes of both shapes may be torn and the data is whole only in
/// the backup on the added members, which taking the reshape up restores. `None` otherwise.
pub fn unmended_critical_section(plan: &AssemblyPlan, candidates: &[Candidate]) -> Option<String> {
    let reshape = plan.reshape?;
    let refi = &candidates[plan.reference].info;
    let moves = plan.slots.iter().flatten().any(|&i| candidates[i].info.reshape.is_some_and(|r| r.new_offset != 0));
    if moves || reshape.backwards || reshape.delta_disks <= 0 || !plan.level.is_parity() {
        return None;
    }
    let (old, new) = reshape_shapes(plan.level, refi, &reshape, &plan.slots, candidates).ok()?;
    let data_disks = |g: &Geometry, md_level: i32| g.raid_disks() as u64 - if md_level == 6 { 2 } else { 1 };
    let window = crate::reshape::GrowWindow {
        old_chunk: u64::from(refi.chunk_sectors) * SECTOR_BYTES,
        new_chunk: u64::from(reshape.new_chunk_sectors) * SECTOR_BYTES,
        old_data_disks: data_disks(&old, refi.level),
        new_data_disks: data_disks(&new, reshape.new_level),
        copies: 1,
        shift: 0,
        member_bytes: new.member_data_bytes(),
        backwards: false,
        backed_up: 0,
    };
    let critical = window.critical_section();
    (reshape.position_bytes() < critical).then(|| {
        format!(
            "the array was stopped part-way through the critical section of a reshape in place (at {}K of the first {}K, whose new stripes overwrite old ones), whose data is whole only in the backup on the added members: continue the reshape (uraid grow --continue, or serve the array writable), which restores it first, as mdadm --assemble does",
            reshape.position / 2,
            critical / 1024
        )
    })
}

/// The two shapes of a reshape, each from its own data start: the old one (the superblock's
/// level, layout and chunk over `raid_disks - delta_disks` members) and the new one (`new_*`
/// over `raid_disks`). raid4/5/6 to raid4/5/6, and a raid10 to a raid10 in a near layout (the
/// reshape uraid makes of one).
pub fn reshape_shapes(
    level: Level,
    refi: &MemberInfo,
    reshape: &Reshape,
    slots: &[Option<usize>],
    candidates: &[Candidate],
) -> Result<(Geometry, Geometry), EngineError> {
    let unsupported = |detail: String| EngineError::Unsupported { member: String::new(), detail };
    let new_level =
        Level::from_md(reshape.new_level).map_err(|source| EngineError::Layout { member: String::new(), source })?;
    let parity = |l: Level| matches!(l, Level::Raid4 | Level::Raid5 | Level::Raid6);
    let near = |layout: i32| Raid10Format::near_copies(layout).is_some();
    let raid10 = level == Level::Raid10 && new_level == Level::Raid10 && near(refi.layout) && near(reshape.new_layout);
    let both_parity = parity(level) && parity(new_level);
    if !both_parity && !raid10 {
        return Err(unsupported(format!(
            "the array is part-way through a reshape from {level} to {new_level} (reshape position {} sectors); uraid reads arrays mid-reshape between raid4, raid5 and raid6, and of a raid10 between near layouts, only",
            reshape.position
        )));
    }
    let old_disks = reshape.old_raid_disks(refi.raid_disks);
    if old_disks == 0 || reshape.new_chunk_sectors == 0 {
        return Err(unsupported(format!(
            "the reshape recorded is impossible ({old_disks} members before it, new chunk of {} sectors)",
            reshape.new_chunk_sectors
        )));
    }
    let old_info = MemberInfo { raid_disks: old_disks, reshape: None, ..refi.clone() };
    let new_info = MemberInfo {
        level: reshape.new_level,
        layout: reshape.new_layout,
        chunk_sectors: reshape.new_chunk_sectors,
        reshape: None,
        ..refi.clone()
    };
    let old = build_geometry(level, &old_info, &slots[..(old_disks as usize).min(slots.len())], candidates)?;
    let new = build_geometry(new_level, &new_info, &slots[..(refi.raid_disks as usize).min(slots.len())], candidates)?;
    Ok((old, new))
}

/// Build the data layout from the reference superblock (and, for linear/raid0, every member's
/// own size, which those levels use instead of a common component size).
pub fn build_geometry(
    level: Level,
    refi: &MemberInfo,
    slots: &[Option<usize>],
    candidates: &[Candidate],
) -> Result<Geometry, EngineError> {
    let layout_err = |source| EngineError::Layout { member: String::new(), source };
    let raid_disks = refi.raid_disks as usize;
    Ok(match level {
        Level::Linear | Level::Raid0 => {
            // Every member is needed; a missing one is reported by the readability check, so
            // give it size 0 here rather than failing with a less helpful message.
            let sizes: Vec<u64> =
                slots.iter().map(|s| s.map(|i| candidates[i].info.usable_sectors).unwrap_or(0)).collect();
            if sizes.contains(&0) {
                return Err(EngineError::TooFewMembers {
                    level: level.name().to_string(),
                    raid_disks,
                    present: slots.iter().flatten().count(),
                    missing: slots
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.is_none())
                        .map(|(i, _)| i.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    left_out: String::new(),
                });
            }
            if level == Level::Linear {
                Geometry::Linear(LinearLayout::new(&sizes, refi.chunk_sectors).map_err(layout_err)?)
            } else {
                let zone = if refi.feature_map & FEATURE_RAID0_LAYOUT != 0 {
                    match refi.layout {
                        1 => Raid0ZoneLayout::Original,
                        2 => Raid0ZoneLayout::Alternate,
                        _ => Raid0ZoneLayout::Unset,
                    }
                } else {
                    Raid0ZoneLayout::Unset
                };
                Geometry::Raid0(Raid0Layout::new(&sizes, refi.chunk_sectors, zone).map_err(layout_err)?)
            }
        }
        Level::Raid1 => Geometry::Raid1(Raid1Layout::new(raid_disks, refi.component_sectors).map_err(layout_err)?),
        Level::Raid10 => {
            let format = Raid10Format::from_md(refi.layout as u32).map_err(layout_err)?;
            Geometry::Raid10(
                Raid10Layout::new(raid_disks, refi.chunk_sectors, format, refi.component_sectors)
                    .map_err(layout_err)?,
            )
        }
        Level::Raid4 | Level::Raid5 | Level::Raid6 => {
            let algorithm = ParityAlgorithm::from_md(level, refi.layout as u32).map_err(layout_err)?;
            Geometry::Parity(
                ParityLayout::new(level, algorithm, raid_disks, refi.chunk_sectors, refi.component_sectors)
                    .map_err(layout_err)?,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use uraid_engine::geometry::Copies;
    use uraid_md_format::create::{plan as create_plan, CreateSpec};
    use uraid_md_format::sb1::feature;
    use uraid_md_format::{MetadataVersion, Superblock};

    use super::*;

    /// A raid5 of five 8 MiB members as mdadm would create it, recorded as growing from four,
    /// the new shape's data 256 sectors lower, `position` sectors done.
    fn growing_raid5(position: u64) -> Vec<Candidate> {
        let spec = CreateSpec {
            version: MetadataVersion::V1_2,
            level: 5,
            layout: -1,
            chunk_sectors: 128,
            raid_disks: 5,
            array_uuid: [7; 16],
            name: "h:r".into(),
            ctime: 1_700_000_000,
            component_sectors: None,
            bitmap: false,
            data_offset: None,
            bitmap_chunk: None,
        };
        let made = create_plan(&spec, &[8 << 20; 5], &[[1; 16]; 5]).unwrap();
        made.superblocks
            .into_iter()
            .enumerate()
            .map(|(i, sb)| {
                let Superblock::V1(mut sb) = sb else { unreachable!("1.2") };
                sb.feature_map |= feature::RESHAPE_ACTIVE | feature::NEW_OFFSET;
                sb.reshape_position = position;
                sb.delta_disks = 1;
                sb.new_level = 5;
                sb.new_layout = sb.layout;
                sb.new_chunk = sb.chunksize;
                sb.new_offset = -256;
                Candidate { name: format!("d{i}"), info: sb.info() }
            })
            .collect()
    }

    #[test]
    fn a_reshape_in_progress_maps_through_both_shapes() {
        let candidates = growing_raid5(3072);
        let plan = plan(&candidates).unwrap();
        assert_eq!(plan.reshape.map(|r| r.position), Some(3072));
        assert_eq!(plan.raid_disks, 5);
        let info = &candidates[0].info;
        // The data area starts at the new (lower) offset, and reaches as far as the old one did.
        assert_eq!(plan.data_start(info), info.data_offset - 256);
        assert_eq!(plan.data_area_sectors(info, 1000), 1256);
        let chunk = 64 * 1024;
        // The array keeps its old size: three data members of four.
        let component = info.component_sectors / 128 * 128 * 512;
        assert_eq!(plan.geometry.array_bytes(), 3 * component);
        // Logical byte 0 is in the new shape, on slot 0 at the new start.
        let mut copies = Copies::new();
        plan.geometry.map(0, &mut copies);
        assert_eq!(copies[0], (0, 0));
        // A chunk past the position is in the old shape: three data chunks per stripe, from the
        // old start 256 sectors on.
        let past = 3072 * 512 + chunk;
        let mut copies = Copies::new();
        plan.geometry.map(past, &mut copies);
        assert_eq!(copies[0].1, 256 * 512 + (past / chunk) / 3 * chunk);
    }

    #[test]
    fn reshapes_of_other_levels_are_refused_with_the_reason() {
        let mut candidates = growing_raid5(3072);
        for c in &mut candidates {
            if let Some(r) = &mut c.info.reshape {
                r.new_level = 1;
            }
        }
        let err = plan(&candidates).unwrap_err().to_string();
        assert!(err.contains("reshape from raid5 to raid1") && err.contains("3072"), "{err}");
    }
}
