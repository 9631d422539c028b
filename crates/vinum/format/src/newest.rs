//! Which drive's configuration wins when drives disagree, as the kernel decides while it
//! tastes them (`gv_drive_tasted` in `geom_vinum_events.c`, `gv_parse_config` and
//! `gv_drive_is_newer` in `geom_vinum_subr.c`).
//!
//! Every drive carries the whole configuration. The kernel reads drives one at a time:
//!
//! - a drive whose header is not active is not read at all, and a drive whose name is
//!   already known is set aside;
//! - objects are merged by name: the first definition read creates the object, with its
//!   sizes, offsets, organization and membership;
//! - a later drive's definition of a known object changes only its state, and only if that
//!   drive is "newer": its `last_update` is later than that of at least one drive read
//!   before it (equal stamps, as one save writes to all drives, are not newer);
//! - a plex whose volume is not known yet, or a subdisk whose plex is not, is not created;
//! - a subdisk on a drive not read yet is kept; the drive is expected later.
//!
//! The result therefore depends on the order drives are read in, which the system decides.
//! [`merge_newest_first`] reads them newest first, so the newest drive's configuration wins
//! whole and older drives only add objects it lacks; [`merge_in_taste_order`] takes a given
//! order and reproduces the kernel for it. What the kernel does afterwards (placing subdisks
//! on drives, trimming striped subdisks, recomputing plex and volume states) is not done here.

use crate::header::{DriveHeader, Timeval};
use crate::objects::{ObjectKind, VinumConfig};

/// One drive's metadata as read: its header and its parsed configuration (copy 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TastedDrive {
    /// The drive's header.
    pub header: DriveHeader,
    /// The configuration its first copy holds.
    pub config: VinumConfig,
}

/// Why a drive's configuration was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IgnoreReason {
    /// The header marks the drive removed.
    Removed,
    /// A drive of the same name was read before.
    DuplicateName,
}

/// A drive whose configuration was not read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IgnoredDrive {
    /// Its index in the slice given.
    pub index: usize,
    /// Its name.
    pub name: String,
    /// Why.
    pub reason: IgnoreReason,
}

/// Why an object in a drive's configuration was not created.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// A plex naming no volume.
    NoVolume,
    /// A plex naming a volume not known at that point.
    UnknownVolume(String),
    /// A subdisk naming no plex.
    NoPlex,
    /// A subdisk naming a plex not known at that point.
    UnknownPlex(String),
}

/// An object the kernel would not create.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DroppedObject {
    /// The drive whose configuration defined it.
    pub drive: String,
    /// Plex or subdisk.
    pub kind: ObjectKind,
    /// Its name.
    pub name: String,
    /// Why.
    pub reason: DropReason,
}

/// A state taken from a newer drive for an object created from an earlier one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateUpdate {
    /// The newer drive.
    pub drive: String,
    /// The object's kind.
    pub kind: ObjectKind,
    /// The object's name.
    pub name: String,
    /// The state before.
    pub from: &'static str,
    /// The state taken.
    pub to: &'static str,
}

/// The configuration the kernel ends up with, and how it got there.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MergedConfig {
    /// The merged objects, each list in the order the objects were created.
    pub config: VinumConfig,
    /// Names of the drives read, in reading order.
    pub drives: Vec<String>,
    /// Drives not read.
    pub ignored: Vec<IgnoredDrive>,
    /// Objects not created.
    pub dropped: Vec<DroppedObject>,
    /// States taken from newer drives.
    pub state_updates: Vec<StateUpdate>,
    /// Drives that subdisks live on but that were not read (missing or not active).
    pub missing_drives: Vec<String>,
    /// Every drive the kernel holds afterwards, in its list order: a drive it tastes goes to
    /// the head of the list, unless a subdisk already named it; a subdisk line naming a drive
    /// the kernel does not hold yet makes a placeholder ("referenced") drive right after the
    /// head (`gv_create_sd`, `gv_create_drive`), which a drive of that name tasted later takes
    /// over in place. Placeholders never taken over are drives that were not read.
    pub drive_list: Vec<String>,
}

impl MergedConfig {
    /// The configuration in the kernel's list order: it inserts every new object at the
    /// head of its list, so each list is reversed, and that is the order the next save
    /// writes.
    pub fn config_in_kernel_list_order(&self) -> VinumConfig {
        let mut config = self.config.clone();
        config.volumes.reverse();
        config.plexes.reverse();
        config.subdisks.reverse();
        config
    }
}

/// The reading order [`merge_newest_first`] uses: latest `last_update` first, ties in the
/// order given.
pub fn newest_first_order(drives: &[TastedDrive]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..drives.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(drives[i].header.label.last_update));
    order
}

/// Merge the drives' configurations reading the newest drive first (see the module
/// documentation).
pub fn merge_newest_first(drives: &[TastedDrive]) -> MergedConfig {
    merge_in_order(drives, &newest_first_order(drives), false)
}

/// [`merge_newest_first`], but a detached plex (one naming no volume) or a detached subdisk
/// (naming no plex) is kept rather than dropped.
///
/// The kernel drops them when it tastes the drives, so what gvinum's `detach` leaves lasts
/// until gvinum is restarted, and can be attached or removed until then. uraid has no memory
/// between commands and tastes the drives for every one, so it keeps them to give `detach`
/// the same reach. Plexes and subdisks naming a volume or plex that is not there are still
/// dropped.
pub fn merge_newest_first_keeping_detached(drives: &[TastedDrive]) -> MergedConfig {
    merge_in_order(drives, &newest_first_order(drives), true)
}

/// Merge the drives' configurations reading them in the order given, as the kernel would.
pub fn merge_in_taste_order(drives: &[TastedDrive]) -> MergedConfig {
    let order: Vec<usize> = (0..drives.len()).collect();
    merge_in_order(drives, &order, false)
}

fn merge_in_order(drives: &[TastedDrive], order: &[usize], keep_detached: bool) -> MergedConfig {
    let mut merged = MergedConfig::default();
    let mut read_stamps: Vec<Timeval> = Vec::new();
    for &index in order {
        let drive = &drives[index];
        let name = drive.header.label.name.clone();
        if !drive.header.is_active() {
            merged.ignored.push(IgnoredDrive { index, name, reason: IgnoreReason::Removed });
            continue;
        }
        if merged.drives.contains(&name) {
            merged.ignored.push(IgnoredDrive { index, name, reason: IgnoreReason::DuplicateName });
            continue;
        }
        let stamp = drive.header.label.last_update;
        let is_newer = read_stamps.iter().any(|earlier| stamp > *earlier);
        if !merged.drive_list.contains(&name) {
            merged.drive_list.insert(0, name.clone());
        }
        for s in &drive.config.subdisks {
            let known = merged.config.subdisk(&s.name).is_some();
            if !known && !merged.drive_list.contains(&s.drive) {
                let at = merged.drive_list.len().min(1);
                merged.drive_list.insert(at, s.drive.clone());
            }
        }
        merge_one(&mut merged, &name, &drive.config, is_newer, keep_detached);
        read_stamps.push(stamp);
        merged.drives.push(name);
    }
    merged.missing_drives = merged
        .config
        .drive_names()
        .into_iter()
        .filter(|d| !merged.drives.iter().any(|read| read == d))
        .map(str::to_string)
        .collect();
    merged
}

fn merge_one(merged: &mut MergedConfig, drive: &str, config: &VinumConfig, is_newer: bool, keep_detached: bool) {
    let update = |kind: ObjectKind, name: &str, from: &'static str, to: &'static str| StateUpdate {
        drive: drive.to_string(),
        kind,
        name: name.to_string(),
        from,
        to,
    };
    for v in &config.volumes {
        match merged.config.volumes.iter_mut().find(|known| known.name == v.name) {
            Some(known) => {
                if is_newer && known.state != v.state {
                    merged.state_updates.push(update(ObjectKind::Volume, &v.name, known.state.name(), v.state.name()));
                    known.state = v.state;
                }
            }
            None => merged.config.volumes.push(v.clone()),
        }
    }
    for p in &config.plexes {
        if let Some(known) = merged.config.plexes.iter_mut().find(|known| known.name == p.name) {
            if is_newer && known.state != p.state {
                merged.state_updates.push(update(ObjectKind::Plex, &p.name, known.state.name(), p.state.name()));
                known.state = p.state;
            }
            continue;
        }
        let reason = match &p.volume {
            None if keep_detached => None,
            None => Some(DropReason::NoVolume),
            Some(v) if merged.config.volume(v).is_none() => Some(DropReason::UnknownVolume(v.clone())),
            Some(_) => None,
        };
        match reason {
            Some(reason) => merged.dropped.push(DroppedObject {
                drive: drive.to_string(),
                kind: ObjectKind::Plex,
                name: p.name.clone(),
                reason,
            }),
            None => merged.config.plexes.push(p.clone()),
        }
    }
    for s in &config.subdisks {
        if let Some(known) = merged.config.subdisks.iter_mut().find(|known| known.name == s.name) {
            if is_newer && known.state != s.state {
                merged.state_updates.push(update(ObjectKind::Subdisk, &s.name, known.state.name(), s.state.name()));
                known.state = s.state;
            }
            continue;
        }
        let reason = match s.plex() {
            None if keep_detached => None,
            None => Some(DropReason::NoPlex),
            Some(p) if merged.config.plex(p).is_none() => Some(DropReason::UnknownPlex(p.to_string())),
            Some(_) => None,
        };
        match reason {
            Some(reason) => merged.dropped.push(DroppedObject {
                drive: drive.to_string(),
                kind: ObjectKind::Subdisk,
                name: s.name.clone(),
                reason,
            }),
            None => merged.config.subdisks.push(s.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_text::parse_config;
    use crate::header::HeaderStatus;
    use crate::objects::{PlexState, SubdiskState};

    const CONFIG: &str = "\
volume v state up
plex name v.p0 org striped 512s vol v state up
sd name v.p0.s1 drive b len 2048s driveoffset 265s plex v.p0 plexoffset 512s state up
sd name v.p0.s0 drive a len 2048s driveoffset 265s plex v.p0 plexoffset 0s state up
";

    fn drive(name: &str, stamp: u64, text: &str) -> TastedDrive {
        let mut header = DriveHeader::new(name, "host", Timeval::new(1, 0));
        header.label.last_update = Timeval::new(stamp, 0);
        TastedDrive { header, config: parse_config(text).unwrap() }
    }

    /// The configuration after drive `a` failed: the surviving drive saved it with a later
    /// stamp, `a`'s subdisk stale and the striped plex down.
    fn after_failure() -> String {
        CONFIG
            .replace("plexoffset 0s state up", "plexoffset 0s state stale")
            .replace("vol v state up", "vol v state down")
    }

    #[test]
    fn identical_stamps_merge_without_updates() {
        let drives = [drive("a", 100, CONFIG), drive("b", 100, CONFIG)];
        let merged = merge_newest_first(&drives);
        assert_eq!(merged.config, parse_config(CONFIG).unwrap());
        assert_eq!(merged.drives, ["a", "b"]);
        assert!(merged.state_updates.is_empty() && merged.dropped.is_empty() && merged.missing_drives.is_empty());
    }

    #[test]
    fn newest_first_lets_the_newest_drive_win_whole() {
        let drives = [drive("a", 100, CONFIG), drive("b", 200, &after_failure())];
        let merged = merge_newest_first(&drives);
        assert_eq!(merged.drives, ["b", "a"]);
        assert_eq!(merged.config, parse_config(&after_failure()).unwrap());
        assert!(merged.state_updates.is_empty());
    }

    #[test]
    fn taste_order_takes_states_from_a_newer_later_drive() {
        let drives = [drive("a", 100, CONFIG), drive("b", 200, &after_failure())];
        let merged = merge_in_taste_order(&drives);
        assert_eq!(merged.config.plexes[0].state, PlexState::Down);
        assert_eq!(merged.config.subdisk("v.p0.s0").unwrap().state, SubdiskState::Stale);
        assert_eq!(merged.state_updates.len(), 2);
        assert_eq!(merged.state_updates[0].from, "up");
        assert_eq!(merged.state_updates[0].to, "down");
    }

    #[test]
    fn an_older_later_drive_changes_nothing() {
        let drives = [drive("b", 200, &after_failure()), drive("a", 100, CONFIG)];
        let merged = merge_in_taste_order(&drives);
        assert_eq!(merged.config, parse_config(&after_failure()).unwrap());
    }

    #[test]
    fn newer_than_any_one_earlier_drive_is_newer() {
        // c (150) is older than b (200) but newer than a (100): the kernel counts it newer.
        let third = CONFIG.replace("plexoffset 512s state up", "plexoffset 512s state reviving");
        let drives = [drive("a", 100, CONFIG), drive("b", 200, CONFIG), drive("c", 150, &third)];
        let merged = merge_in_taste_order(&drives);
        assert_eq!(merged.config.subdisk("v.p0.s1").unwrap().state, SubdiskState::Reviving);
    }

    #[test]
    fn the_drive_list_is_the_kernels() {
        // Tasting b first makes a placeholder for a (b's config names it) after b; a, tasted
        // next, takes the placeholder's place; c, named by no subdisk, goes to the head.
        let drives = [drive("b", 300, CONFIG), drive("a", 200, CONFIG), drive("c", 100, "volume w state up\n")];
        assert_eq!(merge_newest_first(&drives).drive_list, ["c", "b", "a"]);
        // Drives only named by subdisks stay in the list as placeholders.
        let text = CONFIG.replace("drive a", "drive x").replace("drive b", "drive y");
        let merged = merge_newest_first(&[drive("a", 1, &text)]);
        assert_eq!(merged.drive_list, ["a", "x", "y"]);
        assert_eq!(merged.missing_drives, ["x", "y"]);
    }

    #[test]
    fn removed_and_duplicate_drives_are_not_read() {
        let mut removed = drive("c", 900, "volume other state up\n");
        removed.header.status = HeaderStatus::Removed;
        let drives = [drive("a", 100, CONFIG), drive("a", 300, "volume dup state up\n"), removed];
        let merged = merge_in_taste_order(&drives);
        assert_eq!(merged.drives, ["a"]);
        assert_eq!(
            merged.ignored,
            vec![
                IgnoredDrive { index: 1, name: "a".into(), reason: IgnoreReason::DuplicateName },
                IgnoredDrive { index: 2, name: "c".into(), reason: IgnoreReason::Removed },
            ]
        );
        assert!(merged.config.volume("dup").is_none() && merged.config.volume("other").is_none());
        assert_eq!(merged.missing_drives, ["b"]);
    }

    #[test]
    fn orphans_are_dropped_and_objects_from_other_drives_added() {
        let orphans = "volume w state up\n\
                       plex name w.p0 org concat vol w state up\n\
                       plex name lost.p0 org concat vol lost state up\n\
                       plex name loose org concat  state up\n\
                       sd name w.p0.s0 drive b len 8s driveoffset 265s plex w.p0 plexoffset 0s state up\n\
                       sd name stray drive b len 8s driveoffset 273s plex lost.p0 plexoffset 0s state up\n\
                       sd name free drive b len 8s driveoffset 281s state up\n";
        let drives = [drive("a", 100, CONFIG), drive("b", 100, orphans)];
        let merged = merge_in_taste_order(&drives);
        let volumes: Vec<&str> = merged.config.volumes.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(volumes, ["v", "w"]);
        let dropped: Vec<(&str, &DropReason)> = merged.dropped.iter().map(|d| (d.name.as_str(), &d.reason)).collect();
        assert_eq!(
            dropped,
            [
                ("lost.p0", &DropReason::UnknownVolume("lost".into())),
                ("loose", &DropReason::NoVolume),
                ("stray", &DropReason::UnknownPlex("lost.p0".into())),
                ("free", &DropReason::NoPlex),
            ]
        );
        let order = merged.config_in_kernel_list_order();
        assert_eq!(order.volumes[0].name, "w");

        // Kept when asked: the detached ones only; broken references still go.
        let kept = merge_newest_first_keeping_detached(&drives);
        assert!(kept.config.plex("loose").is_some_and(|p| p.volume.is_none()));
        assert!(kept.config.subdisk("free").is_some_and(|s| s.membership.is_none()));
        let dropped: Vec<&str> = kept.dropped.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(dropped, ["lost.p0", "stray"]);
    }
}
