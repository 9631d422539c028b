//! The component labels NetBSD leaves after one raidctl verb on a set that is configured for
//! it and unconfigured after it: `raidctl -c CONF raid0; raidctl VERB raid0; raidctl -u raid0`.
//!
//! uraid has no kernel holding a set between commands, so each `uraid raidctl` command is such
//! a session, and what it writes is what NetBSD's driver writes over the three steps. The
//! counts below were measured on NetBSD's own driver (the raidframe oracle) and follow from
//! `rf_netbsdkintf.c`:
//!
//! - **configure** (`-c`, `-C`): the labels end [`CONFIGURE_BUMPS`] above the set's counter
//!   (`rf_markalldirty` after `rf_Configure`, then the final update at raidctl's close);
//! - **each raidctl verb** on the configured set opens and closes the raid device:
//!   [`VERB_BUMPS`] (`rf_markalldirty` at the first open, the final update at the last close);
//! - **unconfigure** (`-u`): [`UNCONFIGURE_BUMPS`] (its own open, then the shutdown's updates);
//! - **fail** (`-f`): `rf_FailDisk` updates the survivors' labels [`FAIL_BUMPS`] more times; the
//!   failed component's label stops at the counter of the verb's open plus one
//!   ([`FAILED_LABEL_BUMPS`] above the set's counter), and keeps everything else. These two
//!   vary with the driver's parity map state (survivors 8 or 10 above, the failed label 3 or 4,
//!   on sets of the same shape); the larger, first measured, are used. Either way the failed
//!   component is behind the survivors and the next configuration fails it.
//!
//! - **reconstruct in place** (`-R`): one update more than a verb ([`RECONSTRUCT_BUMPS`]: the
//!   labels rewritten when the reconstruction ends); the rebuilt component's label is the set's
//!   (`raid_init_component_label`), its own column, at the survivors' counter. Nothing is written
//!   to it while it is rebuilt: its status `reconstructing` is kept in memory only (the
//!   driver's labels go to optimal components and used spares), so a reconstruction cut short
//!   leaves it blank or stale. Its partition size is recorded as its size when it had a label at
//!   configure, and as 0 when it had none (a new blank component), as the driver records it.
//! - **fail and reconstruct onto a hot spare** (`-F`): [`SPARE_BUMPS`] more than a verb; the
//!   failed component's label stops at the verb's open ([`SPARED_LABEL_BUMPS`] above the set's
//!   counter) and is left dirty, as that open marked it; the spare's label is a survivor's with
//!   the failed column's number, status optimal, at the survivors' counter. That label is all
//!   that records the spare's use: autoconfiguration then finds the spare fresh in that column
//!   and the failed component stale.
//! - **copyback** (`-B`): [`COPYBACK_BUMPS`] more than a verb; the column's own component gets
//!   the set's label, as after `-R`, and the spare's label stops at the verb's open
//!   ([`SPARED_LABEL_BUMPS`]), dirty, still naming the column: stale from then on.
//!
//! So a session that changes something leaves every live label at the set's counter plus
//! [`SESSION_BUMPS`] (plus the verb's own updates above). The clean flag at the unconfigure is
//! the set's parity status: clean if its parity was known good (or was just rewritten).

use uraid_raidframe_format::label::{ComponentLabel, DiskStatus, PMLABEL_DISABLE, RAID_CLEAN, RAID_DIRTY};

/// Counter bumps of configuring a set (`raidctl -c` or `-C`).
pub const CONFIGURE_BUMPS: i32 = 2;
/// Counter bumps of one raidctl verb on a configured set (open and close of the raid device).
pub const VERB_BUMPS: i32 = 2;
/// Counter bumps of unconfiguring (`raidctl -u`).
pub const UNCONFIGURE_BUMPS: i32 = 3;
/// Configure, one verb, unconfigure.
pub const SESSION_BUMPS: i32 = CONFIGURE_BUMPS + VERB_BUMPS + UNCONFIGURE_BUMPS;
/// The survivors' extra updates when a component is failed (`rf_FailDisk`).
pub const FAIL_BUMPS: i32 = 3;
/// How far above the set's counter the label of a component failed by `-f` ends.
pub const FAILED_LABEL_BUMPS: i32 = CONFIGURE_BUMPS + VERB_BUMPS;
/// The extra update of a reconstruction in place (`-R`): the labels rewritten at its end.
pub const RECONSTRUCT_BUMPS: i32 = 1;
/// The extra updates of `-F`: the column failed, then the labels rewritten when the spare is
/// rebuilt.
pub const SPARE_BUMPS: i32 = 2;
/// The extra update of a copyback (`-B`): the labels rewritten at its end.
pub const COPYBACK_BUMPS: i32 = 1;
/// How far above the set's counter a label left behind by `-F` (the failed component's) or
/// `-B` (the spare's) ends: written last by the verb's open (`rf_markalldirty`), dirty.
pub const SPARED_LABEL_BUMPS: i32 = CONFIGURE_BUMPS + 1;

/// What `raidctl -A` records: whether the set configures itself at boot, and as root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Autoconfig {
    /// `-A no`.
    No,
    /// `-A yes`.
    Yes,
    /// `-A forceroot` (older raidctl: `-A root`): autoconfigured, always the root file system.
    ForceRoot,
    /// `-A softroot`: autoconfigured, root when booted from one of its components.
    SoftRoot,
}

impl Autoconfig {
    /// Read raidctl's word as `raidctl.c` reads it (case-insensitive prefixes).
    pub fn parse(word: &str) -> Option<Autoconfig> {
        let w = word.to_ascii_lowercase();
        if w.starts_with("force") || w.starts_with("root") {
            Some(Autoconfig::ForceRoot)
        } else if w.starts_with("soft") {
            Some(Autoconfig::SoftRoot)
        } else if w.starts_with("yes") {
            Some(Autoconfig::Yes)
        } else if w.starts_with("no") {
            Some(Autoconfig::No)
        } else {
            None
        }
    }

    /// The label's `autoconfigure` and `root_partition` words.
    pub fn words(self) -> (i32, i32) {
        match self {
            Autoconfig::No => (0, 0),
            Autoconfig::Yes => (1, 0),
            Autoconfig::ForceRoot => (1, 1),
            Autoconfig::SoftRoot => (1, 2),
        }
    }
}

/// The verb of a session that changes labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelChange {
    /// Nothing but the counters (a verb NetBSD runs through its open and close).
    None,
    /// `-i` or `-P`: parity rewritten, so the set is recorded clean.
    ParityRewritten,
    /// `-I SERIAL`: a new serial number on every live label, which are initialised anew: not
    /// autoconfigured, and with a disabled parity map no map fields.
    Serial(i32),
    /// `-A`.
    Autoconfig(Autoconfig),
    /// `-M yes` (true) or `-M no`: the map is used, or not, from the next configure on.
    ParityMap(bool),
    /// `-f`: the column fails.
    Fail(usize),
    /// `-R`: the column was reconstructed in place; its label (given in the session, the
    /// set's with its column and partition size) is written with the others.
    Reconstructed(usize),
    /// `-F`: the column failed and was reconstructed onto a hot spare of `spare_sectors`
    /// sectors, which takes the column.
    Spared { column: usize, spare_sectors: u64 },
    /// `-B`: the column's data was copied back from the spare serving it to its own
    /// component (its label given in the session, as for `Reconstructed`); the spare keeps a
    /// label left behind.
    CopiedBack(usize),
}

/// A configured set, as a session sees it.
#[derive(Debug, Clone)]
pub struct Session {
    /// Per column, the label of the component serving it as configured (`None`: the column
    /// has failed or is absent; its component is not written).
    pub labels: Vec<Option<ComponentLabel>>,
    /// The set's counter at configure (its fresh labels').
    pub mod_counter: i32,
    /// The set's parity is known good (`parity_good` at configure).
    pub parity_good: bool,
    /// The labels' parity map fields as the configure writes them (`rf_paritymap_attach`):
    /// flags, tick, cooldown, regions; `None` for RAID 0, whose fields stay as they are.
    pub map_fields: Option<(u32, u32, u32, u32)>,
    /// The label of a hot spare serving a column at configure (for `-B`), as read.
    pub spare_served: Option<ComponentLabel>,
}

impl Session {
    /// Per column, the label to write at the end of the session (`None`: write nothing there).
    /// Fails when the counter cannot grow that far.
    pub fn final_labels(&self, change: LabelChange) -> Result<Vec<Option<ComponentLabel>>, SessionError> {
        let bump = |by: i32| self.mod_counter.checked_add(by).ok_or(SessionError::CounterOverflow(self.mod_counter));
        let extra = match change {
            LabelChange::Fail(_) => FAIL_BUMPS,
            LabelChange::Reconstructed(_) => RECONSTRUCT_BUMPS,
            LabelChange::Spared { .. } => SPARE_BUMPS,
            LabelChange::CopiedBack(_) => COPYBACK_BUMPS,
            _ => 0,
        };
        let survivors_at = bump(SESSION_BUMPS + extra)?;
        let parity_good = self.parity_good || change == LabelChange::ParityRewritten;
        let mut out = Vec::with_capacity(self.labels.len());
        for (column, label) in self.labels.iter().enumerate() {
            let Some(label) = label else {
                out.push(None);
                continue;
            };
            let mut label = label.clone();
            if let Some((flags, tickms, ntick, regions)) = self.map_fields {
                label.parity_map_flags = flags;
                label.parity_map_tickms = tickms;
                label.parity_map_ntick = ntick;
                label.parity_map_regions = regions;
            }
            label.status = DiskStatus::Optimal.raw();
            if change == LabelChange::Fail(column) {
                // Written last at the fail's own open, before the column was failed.
                let at = bump(FAILED_LABEL_BUMPS)?;
                label.mod_counter = at;
                label.parity_map_modcount = at;
                out.push(Some(label));
                continue;
            }
            if matches!(change, LabelChange::Spared { column: c, .. } if c == column) {
                // Written last by the verb's open, which marked it dirty; failed after that.
                let at = bump(SPARED_LABEL_BUMPS)?;
                label.mod_counter = at;
                label.parity_map_modcount = at;
                label.clean = RAID_DIRTY;
                out.push(Some(label));
                continue;
            }
            label.mod_counter = survivors_at;
            label.parity_map_modcount = survivors_at;
            label.clean = if parity_good { RAID_CLEAN } else { RAID_DIRTY };
            match change {
                LabelChange::Serial(serial) => {
                    // `raid_init_component_label` starts the labels afresh: the set configured
                    // by raidctl is not autoconfigured, and a disabled map leaves its fields 0.
                    label.serial_number = serial;
                    (label.autoconfigure, label.root_partition) = Autoconfig::No.words();
                    if self.map_fields.is_some_and(|(flags, ..)| flags & PMLABEL_DISABLE != 0) {
                        label.parity_map_flags = 0;
                        label.parity_map_tickms = 0;
                        label.parity_map_ntick = 0;
                        label.parity_map_regions = 0;
                    }
                }
                LabelChange::Autoconfig(a) => (label.autoconfigure, label.root_partition) = a.words(),
                LabelChange::ParityMap(on) if self.map_fields.is_some() => {
                    if on {
                        label.parity_map_flags &= !PMLABEL_DISABLE;
                    } else {
                        label.parity_map_flags |= PMLABEL_DISABLE;
                    }
                }
                _ => {}
            }
            out.push(Some(label));
        }
        Ok(out)
    }

    /// The label to write to the hot spare a session used (`None`: no spare is written).
    /// `-F`: a survivor's final label with the failed column's number (its partition size the
    /// spare's). `-B`: the label the spare served the column with, left at the verb's open,
    /// dirty.
    pub fn spare_label(&self, change: LabelChange) -> Result<Option<ComponentLabel>, SessionError> {
        match change {
            LabelChange::Spared { column, spare_sectors } => {
                let labels = self.final_labels(change)?;
                let survivor = (0..labels.len()).filter(|&c| c != column).find_map(|c| labels[c].clone());
                Ok(survivor.map(|mut label| {
                    label.column = i32::try_from(column).unwrap_or(i32::MAX);
                    label.partition_size = spare_sectors;
                    label
                }))
            }
            LabelChange::CopiedBack(column) => {
                let Some(mut label) = self.spare_served.clone() else { return Ok(None) };
                let at = self
                    .mod_counter
                    .checked_add(SPARED_LABEL_BUMPS)
                    .ok_or(SessionError::CounterOverflow(self.mod_counter))?;
                label.column = i32::try_from(column).unwrap_or(i32::MAX);
                label.mod_counter = at;
                label.parity_map_modcount = at;
                label.clean = RAID_DIRTY;
                label.status = DiskStatus::Optimal.raw();
                if let Some((flags, tickms, ntick, regions)) = self.map_fields {
                    label.parity_map_flags = flags;
                    label.parity_map_tickms = tickms;
                    label.parity_map_ntick = ntick;
                    label.parity_map_regions = regions;
                }
                Ok(Some(label))
            }
            _ => Ok(None),
        }
    }
}

/// The label a set gives a component that joins it in `column` (`raid_init_component_label`
/// after a reconstruction or copyback): `set_label`'s (any live component's), with its own
/// column and partition size. `partition_sectors` is `None` for a component that carried no
/// label when the set was configured: the driver then records a partition size of 0.
pub fn joining_label(set_label: &ComponentLabel, column: usize, partition_sectors: Option<u64>) -> ComponentLabel {
    let mut label = set_label.clone();
    label.column = i32::try_from(column).unwrap_or(i32::MAX);
    label.partition_size = partition_sectors.unwrap_or(0);
    label.status = DiskStatus::Optimal.raw();
    label
}

/// Why a session's labels cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("the set's mod_counter {0} cannot grow past 2^31 - 1")]
    CounterOverflow(i32),
}

#[cfg(test)]
mod tests;
