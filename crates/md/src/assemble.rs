//! Assembly decisions: which members form an array, in which slot, and which are left out.
//!
//! This is mdadm's `--assemble` logic as a pure function of the superblocks found. It owns the
//! freshness rule (a member more than one event behind the freshest is stale, as md's
//! `super_1_validate` and mdadm's assemble decide), slot assignment, and the "can this array run at
//! all" check. It does no I/O; the caller reads superblocks and hands them in.

use std::fmt;

use uraid_engine::{EngineError, Geometry};
use uraid_layout::{
    Level, LinearLayout, ParityAlgorithm, ParityLayout, Raid0Layout, Raid0ZoneLayout, Raid10Format, Raid10Layout,
    Raid1Layout,
};
use uraid_md_format::{uuid::format_md, MemberInfo, MetadataVersion, Role};

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
}

impl AssemblyPlan {
    /// Slots with no member.
    pub fn missing_slots(&self) -> Vec<usize> {
        (0..self.raid_disks).filter(|&s| self.slots[s].is_none()).collect()
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
    for c in candidates {
        let i = &c.info;
        if i.level != refi.level
            || i.raid_disks != refi.raid_disks
            || i.chunk_sectors != refi.chunk_sectors
            || i.layout != refi.layout
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

    let mut verdicts = Vec::with_capacity(candidates.len());
    let mut slots: Vec<Option<usize>> = vec![None; raid_disks];
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
            (Role::Active(slot), Role::Active(_)) if (slot as usize) < raid_disks => {
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
    let geometry = build_geometry(level, refi, &slots, candidates).map_err(|e| match e {
        EngineError::Layout { source, .. } => {
            EngineError::Layout { member: candidates[reference].name.clone(), source }
        }
        other => other,
    })?;
    // A partly rebuilt member holds no data that can be trusted yet.
    let alive = |s: usize| slots[s].is_some() && recovering[s].is_none();
    if !geometry.is_readable(&alive) {
        let missing: Vec<String> = (0..raid_disks)
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
            raid_disks,
            present: raid_disks - missing.len(),
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
    })
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
