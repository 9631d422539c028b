//! md's level changes that move no data (its "takeover", each personality's `takeover`
//! function) and raid1's change of its number of copies (`raid1_reshape`), as pure decisions:
//! given what the array is now and what `mdadm --grow` is asked, the new shape (level, layout,
//! chunk, raid-devices, component size), where each slot's device goes, and which new slots
//! start empty (to be rebuilt onto devices added with the change, or left missing).
//!
//! The forms and their limits are md's and mdadm 4.x's (`analyse_change` and `Grow_reshape` in
//! mdadm's Grow.c; `raid5_takeover_raid1`, `raid45_takeover_raid0`, `raid6_takeover`,
//! `raid5_takeover_raid6`, `raid0_takeover_raid45`, `raid10_takeover_raid0`,
//! `raid0_takeover_raid10`, `raid0_takeover_raid1`, `raid4_takeover`, `raid5_takeover` of a
//! raid4, `raid1_takeover` and `raid1_reshape` in the kernel).
//!
//! Where md takes a level over only from one layout, mdadm restripes around the takeover, and
//! so does a caller that asks with `restripe` (a stopped array's `uraid grow`):
//! - before it, to the layout the takeover needs ([`restripe_first`]): a normal raid6 to the
//!   -6 form of the raid5 layout wanted, a raid5 to parity-last for raid0 or raid4;
//! - after it, to the layout asked for ([`Takeover::restripe_to`]): raid5 to a normal raid6,
//!   raid0 or raid4 to a raid5 other than parity-last.
//!
//! Without `--layout`, raid0 → raid5 and raid5 → raid6 keep the data in place (mdadm's
//! `--layout=preserve`) and [`Takeover::note`] says how to reach mdadm's default. A caller that
//! does not restripe (a running array's server) is refused a change that needs one, with the
//! two steps that make it.

use uraid_layout::{Level, ParityAlgorithm, Raid10Format};

/// What the array is now, as its superblocks and assembly say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentArray {
    pub level: Level,
    /// md's layout number as stored.
    pub layout: i32,
    pub chunk_sectors: u32,
    /// Per slot: a working device, in sync, fills it.
    pub in_sync: Vec<bool>,
    /// Per slot: a device holds it (in sync, or still being rebuilt).
    pub occupied: Vec<bool>,
    /// md's `dev_sectors`: the sectors of each member the array uses.
    pub dev_sectors: u64,
    /// For raid0: the sectors each member gives to its one zone, or `None` when the members
    /// differ in size and the array has more than one zone.
    pub raid0_single_zone: Option<u64>,
    /// Hot spares the array has.
    pub spares: u32,
}

impl CurrentArray {
    pub fn raid_disks(&self) -> u32 {
        self.in_sync.len() as u32
    }
}

/// What `uraid grow` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TakeoverRequest {
    /// `--level`, if given.
    pub level: Option<Level>,
    /// `--raid-devices`, if given.
    pub raid_devices: Option<u32>,
    /// `--layout`, if given (a layout name, or `preserve`).
    pub layout: Option<String>,
    /// How many devices `--add` gives.
    pub added: u32,
    /// `--force`: leave new slots missing where mdadm asks for enough spares.
    pub force: bool,
    /// The caller restripes the array after the takeover where the layout asked for needs it
    /// (raid5 to a normal raid6 layout, as mdadm's default does): see [`Takeover::restripe_to`].
    /// Without it such a layout is refused.
    pub restripe: bool,
}

/// What happens to a device whose slot the new shape does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Failed and removed, as mdadm does before raid4/5 → raid0 and raid10 → raid0: the others'
    /// role tables mark it faulty, and its own superblock is left as it was.
    Removed,
    /// Kept as a hot spare, as md's `level_store` leaves raid6's Q device after raid6 → raid5.
    Spare,
}

/// The array after the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takeover {
    pub level: Level,
    /// md's layout number to store.
    pub layout: i32,
    pub chunk_sectors: u32,
    pub raid_disks: u32,
    /// md's `dev_sectors` after the change (the superblocks' `size`).
    pub dev_sectors: u64,
    /// For each slot now, its slot after the change (`None`: dropped, see `dropped`).
    pub slot_map: Vec<Option<u32>>,
    /// New slots no device fills after the change, in order: devices added with it take the
    /// first ones and are rebuilt there; the rest stay missing.
    pub empty_slots: Vec<u32>,
    pub dropped: Dropped,
    /// What differs from mdadm's default, said in the message (the layout kept, the restripe
    /// not done).
    pub note: Option<String>,
    /// The layout (md's number) to restripe to once the new slots are rebuilt, where the
    /// layout asked for is not the one the takeover gives (asked with `restripe`).
    pub restripe_to: Option<i32>,
}

/// Why a change is refused, in mdadm's and md's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TakeoverError {
    #[error("{0}")]
    Refused(String),
}

fn refuse<T>(message: impl Into<String>) -> Result<T, TakeoverError> {
    Err(TakeoverError::Refused(message.into()))
}

/// The layout a raid5 keeps as raid6 with Q on a new last device (`raid6_takeover`), or
/// `None` for a layout md cannot take over.
pub fn raid6_layout_for(raid5: ParityAlgorithm) -> Option<ParityAlgorithm> {
    use ParityAlgorithm as A;
    Some(match raid5 {
        A::LeftAsymmetric => A::LeftAsymmetric6,
        A::RightAsymmetric => A::RightAsymmetric6,
        A::LeftSymmetric => A::LeftSymmetric6,
        A::RightSymmetric => A::RightSymmetric6,
        A::ParityFirst => A::ParityFirst6,
        A::ParityLast => A::ParityLast,
        _ => return None,
    })
}

/// The raid5 layout a raid6 becomes when its last device (Q) is dropped
/// (`raid5_takeover_raid6`), or `None` when Q is not on the last device.
pub fn raid5_layout_for(raid6: ParityAlgorithm) -> Option<ParityAlgorithm> {
    use ParityAlgorithm as A;
    Some(match raid6 {
        A::LeftAsymmetric6 => A::LeftAsymmetric,
        A::RightAsymmetric6 => A::RightAsymmetric,
        A::LeftSymmetric6 => A::LeftSymmetric,
        A::RightSymmetric6 => A::RightSymmetric,
        A::ParityFirst6 => A::ParityFirst,
        A::ParityLast => A::ParityLast,
        _ => return None,
    })
}

/// Whether `request` asks for a change this module makes (a level change, or raid1's number of
/// devices), rather than the restripe of a raid4/5/6 onto more devices.
pub fn is_takeover(current_level: Level, request: &TakeoverRequest) -> bool {
    match request.level {
        Some(level) => level != current_level || current_level == Level::Raid1,
        None => current_level == Level::Raid1 && request.raid_devices.is_some(),
    }
}

/// The change `request` asks of `current`, or md's and mdadm's reason to refuse it.
pub fn plan(current: &CurrentArray, request: &TakeoverRequest) -> Result<Takeover, TakeoverError> {
    let level = request.level.unwrap_or(current.level);
    let mut change = match (current.level, level) {
        (Level::Raid1, Level::Raid1) => raid1_devices(current, request)?,
        (Level::Raid1, Level::Raid5) => raid1_to_raid5(current, request)?,
        (Level::Raid1, Level::Raid0) => raid1_to_raid0(current, request)?,
        (Level::Raid1, _) => {
            return refuse(format!(
                "impossible level change request for RAID1: a raid1 changes its number of devices, becomes a raid5 when it has 2, or a raid0 of one of its devices (not {level})"
            ))
        }
        (Level::Raid5, Level::Raid1) => raid5_to_raid1(current, request)?,
        (Level::Raid0, Level::Raid4 | Level::Raid5) => raid0_to_parity(current, request, level)?,
        (Level::Raid4 | Level::Raid5, Level::Raid0) => parity_to_raid0(current, request)?,
        (Level::Raid4, Level::Raid5) | (Level::Raid5, Level::Raid4) => raid4_and_raid5(current, request, level)?,
        (Level::Raid5, Level::Raid6) => raid5_to_raid6(current, request)?,
        (Level::Raid6, Level::Raid5) => raid6_to_raid5(current, request)?,
        (Level::Raid0, Level::Raid10) => raid0_to_raid10(current, request)?,
        (Level::Raid10, Level::Raid0) => raid10_to_raid0(current, request)?,
        (Level::Raid10, _) => return refuse("RAID10 can only be changed to RAID0"),
        (Level::Linear, _) => {
            return refuse("no level change is possible for a linear array (md grows linear arrays with --add only)")
        }
        (from, to) if from == to => return refuse(format!("the array is already {to}: no change requested")),
        (from, _) => {
            return refuse(format!(
                "impossible level change requested: md takes {from} over to {} only; other levels are reached in several changes, one level at a time",
                takeover_targets(from)
            ))
        }
    };
    change.empty_slots = empty_slots(current, &change);
    let empty = change.empty_slots.len() as u32;
    if change.restripe_to.is_some() && empty > request.added + current.spares {
        return refuse(format!(
            "the restripe to the layout asked for needs every slot filled first, and {empty} would be left without a device: give it with --add (or take the layout that keeps the data in place, --layout=preserve)"
        ));
    }
    if request.added > empty {
        return refuse(format!(
            "{} device(s) given with --add, but the change leaves {empty} slot(s) to fill",
            request.added
        ));
    }
    Ok(change)
}

/// The layout (at the array's own level) a stopped array must be restriped to before the
/// takeover `request` asks for can be made, as mdadm restripes first: a raid6 becomes raid5
/// only from the -6 form of the raid5 layout wanted (Q alone on the last device), and a raid5
/// becomes raid0 or raid4 only from parity-last. `None` when the takeover can be made as the
/// array is, or when the caller does not restripe (`request.restripe` unset: [`plan`] then
/// refuses, saying how). The takeover that follows the restripe is checked here too, so that
/// nothing is restriped for a change that would then be refused.
pub fn restripe_first(
    current: &CurrentArray,
    request: &TakeoverRequest,
) -> Result<Option<ParityAlgorithm>, TakeoverError> {
    if !request.restripe {
        return Ok(None);
    }
    let first = match (current.level, request.level) {
        (Level::Raid6, Some(Level::Raid5)) => {
            let raid6 = ParityAlgorithm::from_md(Level::Raid6, current.layout as u32)
                .map_err(|_| TakeoverError::Refused(format!("raid6 layout {} is not one md knows", current.layout)))?;
            let raid5 = match request.layout.as_deref() {
                Some(name) => ParityAlgorithm::parse(Level::Raid5, name)
                    .map_err(|e| TakeoverError::Refused(format!("--layout={name}: {e}")))?,
                None => match raid5_layout_for(raid6).or_else(|| raid5_namesake(raid6)) {
                    Some(raid5) => raid5,
                    None => {
                        return refuse(format!(
                            "this raid6 ({}) has no raid5 layout of the same name: give the raid5 layout wanted with --layout",
                            raid6.name()
                        ))
                    }
                },
            };
            let Some(wanted) = raid6_layout_for(raid5) else {
                return refuse(format!("md cannot take a raid5 with layout {} over from a raid6", raid5.name()));
            };
            (wanted != raid6).then_some(wanted)
        }
        (Level::Raid5, Some(Level::Raid0 | Level::Raid4)) => {
            let parity_last = ParityAlgorithm::ParityLast;
            (current.layout != parity_last.to_md() as i32).then_some(parity_last)
        }
        _ => None,
    };
    if let Some(layout) = first {
        // The takeover that follows, as it will be asked of the restriped array.
        let restriped = CurrentArray { layout: layout.to_md() as i32, ..current.clone() };
        plan(&restriped, request)?;
    }
    Ok(first)
}

/// The raid5 layout named as a normal raid6 layout is (left-symmetric for left-symmetric):
/// the one mdadm keeps when a raid6 is turned into a raid5 without `--layout`.
fn raid5_namesake(raid6: ParityAlgorithm) -> Option<ParityAlgorithm> {
    use ParityAlgorithm as A;
    match raid6 {
        A::LeftAsymmetric | A::RightAsymmetric | A::LeftSymmetric | A::RightSymmetric | A::ParityFirst => Some(raid6),
        _ => None,
    }
}

/// The levels md takes `level` over to, for messages.
fn takeover_targets(level: Level) -> &'static str {
    match level {
        Level::Raid0 => "raid4, raid5 (parity-last) and raid10 (near 2)",
        Level::Raid4 => "raid0 and raid5 (parity-last)",
        Level::Raid5 => "raid0 and raid4 (from parity-last), raid1 (2 devices) and raid6 (the -6 layouts)",
        Level::Raid6 => "raid5 (from the -6 layouts)",
        _ => "no other level",
    }
}

/// New slots that no device of `current` lands in.
fn empty_slots(current: &CurrentArray, change: &Takeover) -> Vec<u32> {
    let filled: Vec<u32> = change
        .slot_map
        .iter()
        .zip(&current.occupied)
        .filter(|(_, occupied)| **occupied)
        .filter_map(|(to, _)| *to)
        .collect();
    (0..change.raid_disks).filter(|s| !filled.contains(s)).collect()
}

/// `--raid-devices`, if given, must be `want`: `message` says why otherwise.
fn devices_must_be(request: &TakeoverRequest, want: u32, message: &str) -> Result<(), TakeoverError> {
    match request.raid_devices {
        Some(n) if n != want => refuse(format!("{message} (--raid-devices={n}; the change gives {want})")),
        _ => Ok(()),
    }
}

/// mdadm's check before adding slots to a redundant array: enough devices to fill them.
fn enough_spares(current: &CurrentArray, request: &TakeoverRequest, needed: u32) -> Result<(), TakeoverError> {
    let have = current.spares + request.added;
    if needed > have && !request.force {
        return refuse(format!(
            "Need {needed} spare{} to avoid degraded array, and only have {have}. Use --force to over-ride this check.",
            if needed == 1 { "" } else { "s" }
        ));
    }
    Ok(())
}

fn raid1_devices(current: &CurrentArray, request: &TakeoverRequest) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    let Some(want) = request.raid_devices else {
        return refuse("no change requested for Growing RAID1 (give --raid-devices=N)");
    };
    if request.layout.is_some() {
        return refuse("layout not meaningful with this level (raid1)");
    }
    if want == 0 {
        return refuse("a raid1 needs at least 1 device");
    }
    let same = |slot_map| Takeover {
        level: Level::Raid1,
        layout: 0,
        chunk_sectors: 0,
        raid_disks: want,
        dev_sectors: current.dev_sectors,
        slot_map,
        empty_slots: Vec::new(),
        dropped: Dropped::Removed,
        note: None,
        restripe_to: None,
    };
    if want == n {
        return refuse(format!("the raid1 already has {n} devices: no change requested"));
    }
    if want > n {
        enough_spares(current, request, want - n)?;
        return Ok(same((0..n).map(Some).collect()));
    }
    // raid1_reshape: fewer slots only when the devices fit in them (else EBUSY); the devices
    // move down into the first slots, in order.
    let held = current.occupied.iter().filter(|o| **o).count() as u32;
    if held > want {
        return refuse(format!(
            "cannot reduce the raid1 from {n} to {want} devices: {held} slots hold a device, and md drops only empty slots (its raid1_reshape answers Device or resource busy); fail and remove {} device(s) first",
            held - want
        ));
    }
    let mut next = 0;
    let map = current
        .occupied
        .iter()
        .map(|&occupied| {
            occupied.then(|| {
                next += 1;
                next - 1
            })
        })
        .collect();
    Ok(same(map))
}

/// The chunk `raid5_takeover_raid1` picks: the largest power of two up to 64 KiB that divides
/// the array.
fn raid1_takeover_chunk(array_sectors: u64) -> u32 {
    let mut chunk = 128u32;
    while chunk > 1 && !array_sectors.is_multiple_of(u64::from(chunk)) {
        chunk >>= 1;
    }
    chunk
}

fn raid1_to_raid5(current: &CurrentArray, request: &TakeoverRequest) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    if n != 2 {
        return refuse(format!("Can only convert a 2-device array to RAID5 (this raid1 has {n})"));
    }
    devices_must_be(request, 2, "uraid converts a raid1 to a 2-device raid5 only; grow it after the change")?;
    if !current.dev_sectors.is_multiple_of(8) {
        return refuse("Cannot convert RAID1 of this size - reduce size to multiple of 4K first.");
    }
    // With one data chunk per stripe every raid5 layout mirrors; md picks left-symmetric.
    let layout = match &request.layout {
        None => ParityAlgorithm::LeftSymmetric,
        Some(name) => match ParityAlgorithm::parse(Level::Raid5, name) {
            Ok(algorithm) => algorithm,
            Err(_) => return refuse(format!("layout {name} not understood for this level")),
        },
    };
    if !current.in_sync.iter().any(|s| *s) {
        return refuse("the raid1 has no device in sync");
    }
    Ok(Takeover {
        level: Level::Raid5,
        layout: layout.to_md() as i32,
        chunk_sectors: raid1_takeover_chunk(current.dev_sectors),
        raid_disks: 2,
        dev_sectors: current.dev_sectors,
        slot_map: vec![Some(0), Some(1)],
        empty_slots: Vec::new(),
        dropped: Dropped::Removed,
        note: None,
        restripe_to: None,
    })
}

/// `raid0_takeover_raid1`, after mdadm's `remove_disks_for_takeover` has failed and removed
/// every device but the first in sync: a raid0 of that one device.
fn raid1_to_raid0(current: &CurrentArray, request: &TakeoverRequest) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    if matches!(request.raid_devices, Some(d) if d != n) {
        return refuse("Cannot change number of disks with RAID1->RAID0 conversion");
    }
    if request.layout.is_some() {
        return refuse("layout not meaningful with this level (raid0)");
    }
    if !current.dev_sectors.is_multiple_of(8) {
        return refuse("the raid1's size does not allow a chunk of 4K or more: md cannot take raid0 over from it");
    }
    let Some(keep) = current.in_sync.iter().position(|s| *s) else {
        return refuse("the raid1 has no device in sync");
    };
    Ok(Takeover {
        level: Level::Raid0,
        layout: 0,
        chunk_sectors: raid1_takeover_chunk(current.dev_sectors),
        raid_disks: 1,
        dev_sectors: current.dev_sectors,
        slot_map: (0..n as usize).map(|s| (s == keep).then_some(0)).collect(),
        empty_slots: Vec::new(),
        dropped: Dropped::Removed,
        note: None,
        restripe_to: None,
    })
}

fn raid5_to_raid1(current: &CurrentArray, request: &TakeoverRequest) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    if n != 2 {
        return refuse(format!("Can only convert a 2-device array to RAID1 (this raid5 has {n})"));
    }
    if matches!(request.raid_devices, Some(d) if d != 2) {
        return refuse("Cannot set raid_disk when converting RAID5->RAID1");
    }
    if request.layout.is_some() {
        return refuse("layout not meaningful with this level (raid1)");
    }
    let chunk = u64::from(current.chunk_sectors.max(1));
    Ok(Takeover {
        level: Level::Raid1,
        layout: 0,
        chunk_sectors: 0,
        raid_disks: 2,
        // raid5 uses whole chunks of each member only; so does the raid1 it becomes.
        dev_sectors: current.dev_sectors / chunk * chunk,
        slot_map: vec![Some(0), Some(1)],
        empty_slots: Vec::new(),
        dropped: Dropped::Removed,
        note: None,
        restripe_to: None,
    })
}

fn raid0_to_parity(current: &CurrentArray, request: &TakeoverRequest, level: Level) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    let Some(zone_sectors) = current.raid0_single_zone else {
        return refuse(format!(
            "cannot takeover raid0 with more than one zone (its members differ in size): md turns only a one-zone raid0 into {level}"
        ));
    };
    devices_must_be(request, n + 1, &format!("{level} from raid0 adds one device, for parity"))?;
    let mut restripe_to = None;
    let note = if level == Level::Raid5 {
        match request.layout.as_deref() {
            None if request.restripe => Some(
                "layout parity-last (md's ALGORITHM_PARITY_N): the data stays in place, as mdadm --layout=parity-last keeps it; for mdadm's default, left-symmetric, give --layout=left-symmetric (the array is then restriped once parity is built)"
                    .to_string(),
            ),
            None => Some(
                "layout parity-last (md's ALGORITHM_PARITY_N): the data stays in place, as mdadm --layout=parity-last keeps it; for mdadm's default, restripe it once parity is built (uraid ctl NAME wait, then uraid ctl NAME grow --layout=left-symmetric)"
                    .to_string(),
            ),
            Some("preserve") => None,
            Some(name) => {
                let (to, note) = restripe_from_parity_last(request, name, Level::Raid0, "once parity is built")?;
                restripe_to = to;
                note
            }
        }
    } else {
        if request.layout.is_some() {
            return refuse("layout not meaningful with this level (raid4: parity on the last device)");
        }
        None
    };
    Ok(Takeover {
        level,
        // raid45_takeover_raid0 sets ALGORITHM_PARITY_N for raid4 too (raid4 ignores it).
        layout: ParityAlgorithm::ParityLast.to_md() as i32,
        chunk_sectors: current.chunk_sectors,
        raid_disks: n + 1,
        dev_sectors: zone_sectors,
        slot_map: (0..n).map(Some).collect(),
        empty_slots: Vec::new(),
        dropped: Dropped::Removed,
        note,
        restripe_to,
    })
}

/// The raid5 layout `name` asked of a takeover that gives parity-last (from raid0 or raid4,
/// `from`): none to restripe to for parity-last itself; else, for a caller that restripes after,
/// the layout (md's number) and the note saying so, `when` saying when the restripe starts;
/// else refused with the steps.
fn restripe_from_parity_last(
    request: &TakeoverRequest,
    name: &str,
    from: Level,
    when: &str,
) -> Result<(Option<i32>, Option<String>), TakeoverError> {
    match ParityAlgorithm::parse(Level::Raid5, name) {
        Ok(ParityAlgorithm::ParityLast) => Ok((None, None)),
        Ok(normal) if request.restripe => Ok((
            Some(normal.to_md() as i32),
            Some(format!(
                "layout parity-last first (md's ALGORITHM_PARITY_N: the {from}'s data stays in place, parity on the last device); {when} the array is restriped to {}, as mdadm does",
                normal.name()
            )),
        )),
        Ok(_) => refuse(format!(
            "{from} becomes raid5 with layout parity-last (md's ALGORITHM_PARITY_N); layout {name} needs a restripe after it: {when} (uraid ctl NAME wait), uraid ctl NAME grow --layout={name} restripes it"
        )),
        Err(e) => refuse(format!("--layout={name}: {e}")),
    }
}

/// The refusal of a takeover md makes only from parity-last, where the caller does not
/// restripe first: how to do it in two steps on a running array.
fn refuse_until_parity_last<T>(current: &CurrentArray, to: Level) -> Result<T, TakeoverError> {
    let name = ParityAlgorithm::from_md(Level::Raid5, current.layout as u32).map_or("unknown", |a| a.name());
    refuse(format!(
        "md takes {to} over from a raid5 with layout parity-last (ALGORITHM_PARITY_N) only; this one is {name}: restripe it first, as mdadm does (uraid ctl NAME grow --layout=parity-last, uraid ctl NAME wait), then change the level (a stopped array is restriped and changed by one uraid grow --level={})",
        to.to_md()
    ))
}

fn parity_to_raid0(current: &CurrentArray, request: &TakeoverRequest) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    if current.level == Level::Raid5 && current.layout != ParityAlgorithm::ParityLast.to_md() as i32 {
        return refuse_until_parity_last(current, Level::Raid0);
    }
    devices_must_be(request, n - 1, "raid0 from raid4/5 drops the parity device only")?;
    if request.layout.is_some() {
        return refuse("layout not meaningful with this level (raid0)");
    }
    if let Some(slot) = (0..n as usize - 1).find(|&s| !current.in_sync[s]) {
        return refuse(format!(
            "slot {slot} holds data and has no working device in sync: md turns a raid4/5 into raid0 only when every data device is there (the parity device alone may be missing)"
        ));
    }
    let mut slot_map: Vec<Option<u32>> = (0..n - 1).map(Some).collect();
    slot_map.push(None);
    Ok(Takeover {
        level: Level::Raid0,
        layout: 0,
        chunk_sectors: current.chunk_sectors,
        raid_disks: n - 1,
        dev_sectors: current.dev_sectors,
        slot_map,
        empty_slots: Vec::new(),
        dropped: Dropped::Removed,
        note: None,
        restripe_to: None,
    })
}

/// raid4 and a parity-last raid5 place data and parity alike (`raid5_takeover` of a raid4,
/// `raid4_takeover`): only the level changes.
fn raid4_and_raid5(current: &CurrentArray, request: &TakeoverRequest, level: Level) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    let parity_last = ParityAlgorithm::ParityLast.to_md() as i32;
    if current.level == Level::Raid5 && current.layout != parity_last {
        return refuse_until_parity_last(current, Level::Raid4);
    }
    devices_must_be(request, n, &format!("{level} from {} keeps every device", current.level))?;
    let (restripe_to, note) = match request.layout.as_deref() {
        None | Some("preserve") => (None, None),
        Some(name) if level == Level::Raid4 => {
            return refuse(format!(
                "layout not meaningful with this level (raid4: parity on the last device), not {name}"
            ))
        }
        Some(name) => restripe_from_parity_last(request, name, Level::Raid4, "once the level has changed")?,
    };
    Ok(Takeover {
        level,
        // raid4_takeover stores layout 0 (raid4 ignores it), raid5_takeover ALGORITHM_PARITY_N.
        layout: if level == Level::Raid4 { 0 } else { parity_last },
        chunk_sectors: current.chunk_sectors,
        raid_disks: n,
        dev_sectors: current.dev_sectors,
        slot_map: (0..n).map(Some).collect(),
        empty_slots: Vec::new(),
        dropped: Dropped::Removed,
        note,
        restripe_to,
    })
}

fn raid5_to_raid6(current: &CurrentArray, request: &TakeoverRequest) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    if n < 3 {
        return refuse(format!("md takes a raid6 over from a raid5 of at least 3 devices (this one has {n})"));
    }
    if n + 1 > 254 {
        return refuse("md takes a raid6 over from a raid5 of at most 253 devices");
    }
    let missing = current.in_sync.iter().filter(|s| !**s).count();
    if missing > 1 {
        return refuse("the raid5 is missing more than one device");
    }
    devices_must_be(request, n + 1, "raid6 from raid5 adds one device, for Q")?;
    let raid5 = ParityAlgorithm::from_md(Level::Raid5, current.layout as u32)
        .map_err(|_| TakeoverError::Refused(format!("raid5 layout {} is not one md knows", current.layout)))?;
    let Some(raid6) = raid6_layout_for(raid5) else {
        return refuse("Cannot convert an array with this layout");
    };
    let mut restripe_to = None;
    let note = match request.layout.as_deref() {
        // How to reach mdadm's default, a normal raid6 layout: asked with the layout where the
        // caller restripes after (a stopped array), else a restripe once Q is rebuilt.
        None if request.restripe => Some(format!(
            "layout {} (Q on the new last device): the data stays in place, as with mdadm --layout=preserve; for mdadm's default, a normal raid6 layout, give --layout={} (the array is then restriped once Q is rebuilt)",
            raid6.name(),
            raid5.name()
        )),
        None => Some(format!(
            "layout {} (Q on the new last device): the data stays in place, as with mdadm --layout=preserve; for mdadm's default, a normal raid6 layout, restripe it once Q is rebuilt (uraid ctl NAME wait, then uraid ctl NAME grow --layout={})",
            raid6.name(),
            raid5.name()
        )),
        Some("preserve") => None,
        Some(name) if ParityAlgorithm::parse(Level::Raid6, name) == Ok(raid6) => None,
        Some(name) => match ParityAlgorithm::parse(Level::Raid6, name) {
            Ok(normal) if request.restripe => {
                restripe_to = Some(normal.to_md() as i32);
                Some(format!(
                    "layout {} first (Q on the new last device); once Q is rebuilt the array is restriped to {}, as mdadm does",
                    raid6.name(),
                    normal.name()
                ))
            }
            Ok(_) => {
                return refuse(format!(
                    "raid5 ({}) becomes raid6 with layout {} (use --layout=preserve); layout {name} needs a restripe after it: once Q is rebuilt (uraid ctl NAME wait), uraid ctl NAME grow --layout={name} restripes it",
                    raid5.name(),
                    raid6.name()
                ))
            }
            Err(e) => return refuse(format!("--layout={name}: {e}")),
        },
    };
    enough_spares(current, request, 1)?;
    Ok(Takeover {
        level: Level::Raid6,
        layout: raid6.to_md() as i32,
        chunk_sectors: current.chunk_sectors,
        raid_disks: n + 1,
        dev_sectors: current.dev_sectors,
        slot_map: (0..n).map(Some).collect(),
        empty_slots: Vec::new(),
        dropped: Dropped::Removed,
        note,
        restripe_to,
    })
}

fn raid6_to_raid5(current: &CurrentArray, request: &TakeoverRequest) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    let raid6 = ParityAlgorithm::from_md(Level::Raid6, current.layout as u32)
        .map_err(|_| TakeoverError::Refused(format!("raid6 layout {} is not one md knows", current.layout)))?;
    // A stopped array is restriped before (`restripe_first`); a running one is told how.
    let Some(raid5) = raid5_layout_for(raid6) else {
        let wanted = match request.layout.as_deref() {
            Some(name) => format!("{name}-6"),
            None => raid5_namesake(raid6)
                .map_or("the -6 form of the raid5 layout wanted".into(), |a| format!("{}-6", a.name())),
        };
        return refuse(format!(
            "md takes a raid5 over from a raid6 whose Q is on the last device only (the -6 layouts, or parity-last); this one is {}: restripe it first, as mdadm does (uraid ctl NAME grow --layout={wanted}, uraid ctl NAME wait), then change the level (a stopped array is restriped and changed by one uraid grow --level=5)",
            raid6.name()
        ));
    };
    devices_must_be(request, n - 1, "raid5 from raid6 drops the Q device only")?;
    match request.layout.as_deref() {
        None => {}
        Some(name) if ParityAlgorithm::parse(Level::Raid5, name) == Ok(raid5) => {}
        Some(name) => {
            return refuse(format!(
                "this raid6 ({}) becomes raid5 with layout {}; for layout {name} restripe it first (uraid ctl NAME grow --layout={name}-6, uraid ctl NAME wait), then change the level (a stopped array is restriped and changed by one uraid grow --level=5 --layout={name})",
                raid6.name(),
                raid5.name()
            ))
        }
    }
    let missing = current.in_sync[..n as usize - 1].iter().filter(|s| !**s).count();
    if missing > 1 {
        return refuse("without its Q device the array would miss more than one device: a raid5 cannot run so");
    }
    let mut slot_map: Vec<Option<u32>> = (0..n - 1).map(Some).collect();
    slot_map.push(None);
    Ok(Takeover {
        level: Level::Raid5,
        layout: raid5.to_md() as i32,
        chunk_sectors: current.chunk_sectors,
        raid_disks: n - 1,
        dev_sectors: current.dev_sectors,
        slot_map,
        empty_slots: Vec::new(),
        dropped: Dropped::Spare,
        note: None,
        restripe_to: None,
    })
}

fn raid0_to_raid10(current: &CurrentArray, request: &TakeoverRequest) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    let Some(zone_sectors) = current.raid0_single_zone else {
        return refuse(
            "cannot takeover raid 0 with more than one zone (its members differ in size): md turns only a one-zone raid0 into raid10",
        );
    };
    if matches!(request.raid_devices, Some(d) if d != 2 * n) {
        return refuse(format!(
            "Impossible number of devices for RAID0->RAID10 (md makes a raid10 of {} from a raid0 of {n})",
            2 * n
        ));
    }
    if let Some(name) = &request.layout {
        if Raid10Format::parse(name).ok() != Some(Raid10Format::NEAR2) {
            return refuse(format!(
                "New layout impossible for RAID0->RAID10: md takes raid10 over with layout n2 only, not {name}"
            ));
        }
    }
    Ok(Takeover {
        level: Level::Raid10,
        layout: Raid10Format::NEAR2.to_md() as i32,
        chunk_sectors: current.chunk_sectors,
        raid_disks: 2 * n,
        dev_sectors: zone_sectors,
        slot_map: (0..n).map(|s| Some(2 * s)).collect(),
        empty_slots: Vec::new(),
        dropped: Dropped::Removed,
        note: None,
        restripe_to: None,
    })
}

fn raid10_to_raid0(current: &CurrentArray, request: &TakeoverRequest) -> Result<Takeover, TakeoverError> {
    let n = current.raid_disks();
    if current.layout != Raid10Format::NEAR2.to_md() as i32 {
        return refuse(format!(
            "Cannot Grow RAID10 with far/offset layout: md takes raid0 over from a raid10 with layout n2 only (this one is {:#x})",
            current.layout
        ));
    }
    if !n.is_multiple_of(2) {
        return refuse("RAID10 layout too complex for Grow operation: md takes raid0 over from a raid10 of an even number of devices only");
    }
    if matches!(request.raid_devices, Some(d) if d != n / 2) {
        return refuse(format!(
            "New number of raid-devices impossible for RAID10 (raid0 from a raid10 of {n} has {})",
            n / 2
        ));
    }
    if request.layout.is_some() {
        return refuse("layout not meaningful with this level (raid0)");
    }
    // remove_disks_for_takeover: of each mirror pair, the first working device in sync stays.
    let mut slot_map = vec![None; n as usize];
    for pair in 0..n / 2 {
        let Some(keep) = (2 * pair..2 * pair + 2).find(|&s| current.in_sync[s as usize]) else {
            return refuse(format!(
                "slots {} and {} (a mirror pair) have no working device in sync: every pair must keep one copy for raid0",
                2 * pair,
                2 * pair + 1
            ));
        };
        slot_map[keep as usize] = Some(pair);
    }
    Ok(Takeover {
        level: Level::Raid0,
        layout: 0,
        chunk_sectors: current.chunk_sectors,
        raid_disks: n / 2,
        dev_sectors: current.dev_sectors,
        slot_map,
        empty_slots: Vec::new(),
        dropped: Dropped::Removed,
        note: None,
        restripe_to: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(level: Level, layout: i32, slots: usize) -> CurrentArray {
        CurrentArray {
            level,
            layout,
            chunk_sectors: 128,
            in_sync: vec![true; slots],
            occupied: vec![true; slots],
            dev_sectors: 8192,
            raid0_single_zone: (level == Level::Raid0).then_some(8192),
            spares: 0,
        }
    }

    fn ask(level: Option<Level>, raid_devices: Option<u32>, added: u32) -> TakeoverRequest {
        TakeoverRequest { level, raid_devices, added, ..TakeoverRequest::default() }
    }

    fn refused(result: Result<Takeover, TakeoverError>) -> String {
        match result {
            Err(TakeoverError::Refused(m)) => m,
            Ok(t) => panic!("not refused: {t:?}"),
        }
    }

    #[test]
    fn raid1_grows_with_added_devices_and_missing_only_when_forced() {
        let now = array(Level::Raid1, 0, 2);
        let t = plan(&now, &ask(None, Some(4), 2)).unwrap();
        assert_eq!((t.raid_disks, t.empty_slots.clone()), (4, vec![2, 3]));
        assert!(refused(plan(&now, &ask(None, Some(4), 1)))
            .starts_with("Need 2 spares to avoid degraded array, and only have 1."));
        let forced = TakeoverRequest { force: true, ..ask(None, Some(4), 1) };
        assert_eq!(plan(&now, &forced).unwrap().empty_slots, vec![2, 3]);
        assert!(refused(plan(&now, &ask(None, Some(3), 2))).contains("2 device(s) given with --add"));
    }

    #[test]
    fn raid1_shrinks_only_into_the_devices_it_has_and_moves_them_down() {
        let mut now = array(Level::Raid1, 0, 3);
        assert!(refused(plan(&now, &ask(None, Some(2), 0))).contains("3 slots hold a device"));
        now.in_sync[1] = false;
        now.occupied[1] = false;
        let t = plan(&now, &ask(None, Some(2), 0)).unwrap();
        assert_eq!(t.slot_map, vec![Some(0), None, Some(1)]);
        assert!(t.empty_slots.is_empty());
    }

    #[test]
    fn raid1_of_two_becomes_raid5_with_the_chunk_md_picks() {
        let mut now = array(Level::Raid1, 0, 2);
        now.dev_sectors = 3 * 32;
        let t = plan(&now, &ask(Some(Level::Raid5), None, 0)).unwrap();
        assert_eq!((t.level, t.layout, t.chunk_sectors), (Level::Raid5, 2, 32));
        assert!(refused(plan(&array(Level::Raid1, 0, 3), &ask(Some(Level::Raid5), None, 0)))
            .starts_with("Can only convert a 2-device array to RAID5"));
        now.dev_sectors = 4097;
        assert!(refused(plan(&now, &ask(Some(Level::Raid5), None, 0))).contains("multiple of 4K"));
    }

    #[test]
    fn raid1_keeps_its_first_device_in_sync_as_a_raid0_of_one() {
        let mut now = array(Level::Raid1, 0, 3);
        now.in_sync[0] = false;
        let t = plan(&now, &ask(Some(Level::Raid0), None, 0)).unwrap();
        assert_eq!((t.raid_disks, t.chunk_sectors, t.slot_map.clone()), (1, 128, vec![None, Some(0), None]));
        assert!(refused(plan(&now, &ask(Some(Level::Raid0), Some(1), 0))).contains("Cannot change number of disks"));
    }

    #[test]
    fn raid5_of_two_becomes_raid1_of_whole_chunks() {
        let mut now = array(Level::Raid5, 0, 2);
        now.dev_sectors = 1000;
        let t = plan(&now, &ask(Some(Level::Raid1), None, 0)).unwrap();
        assert_eq!((t.level, t.chunk_sectors, t.dev_sectors), (Level::Raid1, 0, 896));
    }

    #[test]
    fn raid0_takes_parity_on_a_new_last_slot_in_parity_last() {
        let now = array(Level::Raid0, -1, 3);
        let t = plan(&now, &ask(Some(Level::Raid5), None, 1)).unwrap();
        assert_eq!((t.raid_disks, t.layout, t.empty_slots.clone()), (4, 5, vec![3]));
        assert!(t.note.unwrap().contains("parity-last"));
        let mut zoned = now.clone();
        zoned.raid0_single_zone = None;
        assert!(refused(plan(&zoned, &ask(Some(Level::Raid5), None, 1))).contains("more than one zone"));
        let restripe = TakeoverRequest { layout: Some("left-symmetric".into()), ..ask(Some(Level::Raid5), None, 1) };
        assert!(refused(plan(&now, &restripe)).contains("restripe"));
    }

    #[test]
    fn parity_last_raid5_drops_its_parity_device_for_raid0() {
        let mut now = array(Level::Raid5, 5, 4);
        now.in_sync[3] = false;
        let t = plan(&now, &ask(Some(Level::Raid0), None, 0)).unwrap();
        assert_eq!(
            (t.raid_disks, t.slot_map.clone(), t.dropped),
            (3, vec![Some(0), Some(1), Some(2), None], Dropped::Removed)
        );
        assert!(refused(plan(&array(Level::Raid5, 2, 4), &ask(Some(Level::Raid0), None, 0))).contains("parity-last"));
        now.in_sync[1] = false;
        assert!(refused(plan(&now, &ask(Some(Level::Raid0), None, 0))).contains("slot 1"));
    }

    #[test]
    fn raid4_and_parity_last_raid5_change_level_only() {
        let t = plan(&array(Level::Raid4, 0, 4), &ask(Some(Level::Raid5), None, 0)).unwrap();
        assert_eq!((t.level, t.layout, t.raid_disks), (Level::Raid5, 5, 4));
        let back = plan(&array(Level::Raid5, 5, 4), &ask(Some(Level::Raid4), None, 0)).unwrap();
        assert_eq!((back.level, back.slot_map.clone()), (Level::Raid4, vec![Some(0), Some(1), Some(2), Some(3)]));
        assert!(refused(plan(&array(Level::Raid5, 2, 4), &ask(Some(Level::Raid4), None, 0))).contains("parity-last"));
    }

    #[test]
    fn raid5_and_raid6_trade_q_in_the_six_layouts() {
        let now = array(Level::Raid5, 2, 4);
        let t = plan(&now, &ask(Some(Level::Raid6), None, 1)).unwrap();
        assert_eq!((t.raid_disks, t.layout), (5, 18));
        assert!(t.note.as_deref().unwrap_or("").contains("uraid ctl NAME grow --layout=left-symmetric"));
        let stopped = plan(&now, &TakeoverRequest { restripe: true, ..ask(Some(Level::Raid6), None, 1) }).unwrap();
        assert!(stopped.note.unwrap().contains("give --layout=left-symmetric"));
        assert!(refused(plan(&now, &ask(Some(Level::Raid6), None, 0))).starts_with("Need 1 spare"));
        let back = plan(&array(Level::Raid6, 18, 5), &ask(Some(Level::Raid5), None, 0)).unwrap();
        assert_eq!((back.raid_disks, back.layout, back.dropped), (4, 2, Dropped::Spare));
        assert!(refused(plan(&array(Level::Raid6, 2, 5), &ask(Some(Level::Raid5), None, 0))).contains("restripe"));
        let normal = TakeoverRequest { layout: Some("left-symmetric".into()), ..ask(Some(Level::Raid6), None, 1) };
        assert!(refused(plan(&now, &normal)).contains("preserve"));
        assert_eq!(t.restripe_to, None);
        // A caller that restripes after: the -6 layout first, then the one asked for.
        let then = plan(&now, &TakeoverRequest { restripe: true, ..normal }).unwrap();
        assert_eq!((then.layout, then.restripe_to), (18, Some(2)));
        assert!(then.note.unwrap().contains("restriped to left-symmetric"));
        let unknown =
            TakeoverRequest { layout: Some("sideways".into()), restripe: true, ..ask(Some(Level::Raid6), None, 1) };
        assert!(refused(plan(&now, &unknown)).contains("--layout=sideways"));
    }

    /// A takeover asked of a stopped array, whose caller restripes before or after it.
    fn stopped(level: Level, layout: Option<&str>, added: u32) -> TakeoverRequest {
        TakeoverRequest { layout: layout.map(Into::into), restripe: true, ..ask(Some(level), None, added) }
    }

    #[test]
    fn a_stopped_array_is_restriped_first_where_md_takes_over_from_another_layout() {
        use ParityAlgorithm as A;
        let r6 = array(Level::Raid6, 2, 5);
        assert_eq!(restripe_first(&r6, &stopped(Level::Raid5, None, 0)), Ok(Some(A::LeftSymmetric6)));
        assert_eq!(
            restripe_first(&r6, &stopped(Level::Raid5, Some("right-asymmetric"), 0)),
            Ok(Some(A::RightAsymmetric6))
        );
        let six = array(Level::Raid6, 18, 5);
        assert_eq!(restripe_first(&six, &stopped(Level::Raid5, None, 0)), Ok(None));
        assert_eq!(restripe_first(&six, &stopped(Level::Raid5, Some("ra"), 0)), Ok(Some(A::RightAsymmetric6)));
        // The takeover after the restripe is checked before it.
        let wrong = TakeoverRequest { raid_devices: Some(5), ..stopped(Level::Raid5, None, 0) };
        assert!(
            matches!(restripe_first(&r6, &wrong), Err(TakeoverError::Refused(m)) if m.contains("drops the Q device"))
        );
        let ddf = array(Level::Raid6, 10, 5);
        assert!(
            matches!(restripe_first(&ddf, &stopped(Level::Raid5, None, 0)), Err(TakeoverError::Refused(m)) if m.contains("--layout"))
        );

        let r5 = array(Level::Raid5, 2, 4);
        assert_eq!(restripe_first(&r5, &stopped(Level::Raid0, None, 0)), Ok(Some(A::ParityLast)));
        assert_eq!(restripe_first(&r5, &stopped(Level::Raid4, None, 0)), Ok(Some(A::ParityLast)));
        assert_eq!(restripe_first(&array(Level::Raid5, 5, 4), &stopped(Level::Raid0, None, 0)), Ok(None));
        assert_eq!(restripe_first(&r5, &stopped(Level::Raid6, None, 1)), Ok(None));
        // A running array's caller does not restripe: it is told the two steps.
        assert_eq!(restripe_first(&r5, &ask(Some(Level::Raid0), None, 0)), Ok(None));
        assert!(
            refused(plan(&r5, &ask(Some(Level::Raid0), None, 0))).contains("uraid ctl NAME grow --layout=parity-last")
        );
        assert!(refused(plan(&r6, &ask(Some(Level::Raid5), None, 0))).contains("--layout=left-symmetric-6"));
    }

    #[test]
    fn raid0_and_raid4_become_a_normal_raid5_by_a_restripe_after() {
        let r0 = array(Level::Raid0, -1, 3);
        let t = plan(&r0, &stopped(Level::Raid5, Some("left-symmetric"), 1)).unwrap();
        assert_eq!((t.layout, t.restripe_to, t.empty_slots), (5, Some(2), vec![3]));
        assert!(t.note.unwrap().contains("restriped to left-symmetric"));
        // Without a device for parity the restripe could not start.
        assert!(refused(plan(&r0, &stopped(Level::Raid5, Some("left-symmetric"), 0))).contains("--add"));
        let r4 = array(Level::Raid4, 0, 4);
        let t = plan(&r4, &stopped(Level::Raid5, Some("ls"), 0)).unwrap();
        assert_eq!((t.layout, t.restripe_to), (5, Some(2)));
        assert_eq!(plan(&r4, &stopped(Level::Raid5, Some("parity-last"), 0)).unwrap().restripe_to, None);
        let running = TakeoverRequest { layout: Some("ls".into()), ..ask(Some(Level::Raid5), None, 0) };
        assert!(refused(plan(&r4, &running)).contains("uraid ctl NAME grow --layout=ls"));
    }

    #[test]
    fn raid0_and_raid10_near2_trade_mirrors() {
        let now = array(Level::Raid0, -1, 2);
        let t = plan(&now, &ask(Some(Level::Raid10), None, 1)).unwrap();
        assert_eq!((t.raid_disks, t.slot_map.clone(), t.empty_slots.clone()), (4, vec![Some(0), Some(2)], vec![1, 3]));
        let mut r10 = array(Level::Raid10, 0x102, 4);
        r10.in_sync[0] = false;
        let back = plan(&r10, &ask(Some(Level::Raid0), None, 0)).unwrap();
        assert_eq!(back.slot_map, vec![None, Some(0), Some(1), None]);
        r10.in_sync[1] = false;
        assert!(refused(plan(&r10, &ask(Some(Level::Raid0), None, 0))).contains("slots 0 and 1"));
        assert!(
            refused(plan(&array(Level::Raid10, 0x201, 4), &ask(Some(Level::Raid0), None, 0))).contains("far/offset")
        );
    }

    #[test]
    fn same_level_other_than_raid1_is_left_to_the_restripe() {
        assert!(!is_takeover(Level::Raid5, &ask(Some(Level::Raid5), Some(5), 1)));
        assert!(is_takeover(Level::Raid1, &ask(None, Some(3), 1)));
        assert!(is_takeover(Level::Raid0, &ask(Some(Level::Raid5), None, 0)));
    }
}
