//! gvinum's verbs that change objects and states, as pure transformations of a configuration:
//! `rm`, `rename`, `setstate`, `attach`, `detach` and `move`.
//!
//! The specification is the kernel side of each verb: `gv_remove` and `gv_rm_*`
//! (`geom_vinum_rm.c`), `gv_rename` and `gv_rename_*` (`geom_vinum_rename.c`), `gv_setstate`
//! and `gv_set_*_state` (`geom_vinum_state.c`), `gv_attach`, `gv_detach` (`geom_vinum.c`) with
//! `gv_attach_plex`, `gv_attach_sd`, `gv_detach_plex`, `gv_detach_sd` (`geom_vinum_subr.c`),
//! and `gv_move`, `gv_move_sd` (`geom_vinum_move.c`); the command side is `sbin/gvinum/gvinum.c`.
//! Their refusals are kept, with gvinum's wording where it has any.
//!
//! Where this differs from the kernel:
//!
//! - **All or nothing.** The kernel queues one event per object and carries out those it can,
//!   logging the failures; its verbs can stop half way (a `rename -r` that meets a name in use
//!   has renamed the objects before it). Here every object is checked, in the order given and
//!   against the configuration the earlier ones left, and any refusal changes nothing.
//! - **Refusals are errors.** The kernel logs most refusals of `setstate`, `rename`, `attach`,
//!   `detach` and `move` on its console and the command exits quietly; here they are errors
//!   naming the object.
//! - **States.** Where an edit changes what a plex or volume is made of, its state is worked
//!   out again by the kernel's rules (`gv_update_plex_state`, `gv_update_vol_state`,
//!   `gv_update_plex_config`), as the kernel finds it the next time it reads the drives. The
//!   kernel sometimes leaves a state it would not compute (a concat plex that gains a stale
//!   subdisk stays up until the next start).
//! - **Names** are checked as everywhere in this crate (`objects::check_name`): the kernel cuts
//!   long names silently and never checks a name `attach … rename` makes.
//! - Cases where the kernel would crash or corrupt are refused; each is said at its verb.

mod attach;
mod relocate;
mod remove;
mod rename;
mod state;
#[cfg(test)]
mod tests;

use std::collections::HashSet;

use thiserror::Error;

pub use attach::{attach, detach};
pub use relocate::move_subdisks;
pub use remove::remove;
pub use rename::rename;
pub use state::set_state;

use crate::objects::{
    ConfigProblem, NameProblem, ObjectKind, Plex, PlexState, Subdisk, SubdiskState, VinumConfig, Volume,
};
use crate::placement::{plex_state, volume_state};

/// A drive as an edit sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EditDrive {
    /// The drive's name.
    pub name: String,
    /// The size of the media it was found on; `None` for a drive only named by subdisks and
    /// not found (the kernel's "referenced" placeholder, which is down).
    pub media_size: Option<u64>,
}

impl EditDrive {
    /// Found on a device, so up.
    pub fn is_up(&self) -> bool {
        self.media_size.is_some()
    }
}

/// What gvinum holds before an edit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Workspace {
    /// The objects, in the kernel's list order (the order the next save writes).
    pub config: VinumConfig,
    /// The drives, in the kernel's list order, placeholders included.
    pub drives: Vec<EditDrive>,
}

/// The outcome of an edit: the configuration to save, and what the drives themselves need.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Edited {
    /// The objects after the edit, in the kernel's list order.
    pub config: VinumConfig,
    /// The drives after the edit (a removed drive that still holds subdisks stays, as a
    /// placeholder).
    pub drives: Vec<EditDrive>,
    /// Found drives whose headers are to be marked removed (`gv_rm_drive` writes the removed
    /// magic to them); they take no save.
    pub removed_drives: Vec<String>,
    /// Drives renamed, `(old, new)`: their headers carry the new name from the save on.
    pub renamed_drives: Vec<(String, String)>,
    /// Drives set down: a save leaves them out, as `gv_save_config` skips a drive that is
    /// not up.
    pub down_drives: Vec<String>,
    /// What was done or left alone that is worth saying but is no error.
    pub notes: Vec<String>,
}

/// Why an edit is refused. Nothing is changed when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EditError {
    /// No object of that name.
    #[error("unknown object '{name}'")]
    UnknownObject { name: String },
    /// A volume with plexes or a plex with subdisks, removed without `-r`.
    #[error("{kind} '{name}' has attached {children} - need recursive removal")]
    NeedsRecursive { kind: ObjectKind, name: String, children: &'static str },
    /// The only plex of a volume (`gv_remove` refuses it even with `-r`).
    #[error("plex '{plex}' is still attached to volume '{volume}' (it is the volume's only plex; remove the volume)")]
    OnlyPlex { plex: String, volume: String },
    /// A subdisk still in a plex (`gv_remove` refuses it even with `-r`).
    #[error("subdisk '{subdisk}' is still attached to plex '{plex}' (detach it first)")]
    SubdiskAttached { subdisk: String, plex: String },
    /// The new name belongs to an object already (of any kind).
    #[error("{kind} name '{name}' already in use")]
    NameTaken { kind: ObjectKind, name: String },
    /// A new name that cannot be written into the configuration.
    #[error("'{name}' cannot name a {kind}: it {problem}")]
    BadName { kind: ObjectKind, name: String, problem: NameProblem },
    /// `gv_rename_plex`: a plex name needs a dot before its number.
    #[error("proposed plex name '{name}' is not a valid plex name (it needs a '.')")]
    NotPlexName { name: String },
    /// `gv_rename_sd`: a subdisk name needs two dots.
    #[error("proposed sd name '{name}' is not a valid sd name (it needs two '.')")]
    NotSubdiskName { name: String },
    /// `rename -r` takes a child's number from after the last dot of its name.
    #[error("{kind} '{name}' has no '.' in its name, so rename -r cannot tell its number")]
    NoNumber { kind: ObjectKind, name: String },
    /// A drive that was not found, where the verb needs it.
    #[error("drive '{drive}' was not found: {why}")]
    DriveNotFound { drive: String, why: &'static str },
    /// `setstate` takes up, down and stale only (gvinum.c).
    #[error("invalid state '{state}' (setstate takes up, down or stale)")]
    InvalidState { state: String },
    /// A state that objects of this kind do not have.
    #[error("invalid {kind} state '{state}'")]
    InvalidStateFor { kind: ObjectKind, state: String },
    /// A state change the kernel's rules refuse.
    #[error("{kind} '{name}' cannot be set {state}: {reason}")]
    StateRefused { kind: ObjectKind, name: String, state: &'static str, reason: String },
    /// `attach` of an object that is attached already.
    #[error("{kind} '{name}' is already attached to '{parent}'")]
    AlreadyAttached { kind: ObjectKind, name: String, parent: String },
    /// `attach` to an object that is not of the kind the child attaches to.
    #[error("no such {wanted} to attach to: '{name}'")]
    NoParent { wanted: ObjectKind, name: String },
    /// `attach` and `detach` take plexes and subdisks only.
    #[error("'{name}' is a {kind}; only plexes and subdisks are attached and detached")]
    NotPlexOrSubdisk { name: String, kind: ObjectKind },
    /// An offset given for a plex, which attaches to a volume without one.
    #[error("plex '{plex}' attaches to volume '{volume}' without an offset")]
    OffsetForPlex { plex: String, volume: String },
    /// A plex offset the subdisk cannot take.
    #[error("offset {offset} for sd '{subdisk}' in plex '{plex}': {reason}")]
    BadOffset { subdisk: String, plex: String, offset: u64, reason: String },
    /// `gv_sd_to_plex`: shorter than the columns of a striped or raid5 plex.
    #[error("sd '{subdisk}' ({length} bytes in whole stripes) is too small for plex '{plex}', whose subdisks are {column} bytes")]
    TooSmall { subdisk: String, plex: String, length: u64, column: u64 },
    /// A subdisk added to a striped or raid5 plex that holds a volume's data: the kernel
    /// makes the plex growable and `start` restripes it, which is not done here.
    #[error("plex '{plex}' holds volume '{volume}' in {columns} columns; a new column needs gvinum start to restripe the data, which uraid does not do")]
    GrowUnsupported { plex: String, volume: String, columns: usize },
    /// `detach` of something in use, without `-f`.
    #[error("{kind} '{name}' is busy: {reason} (-f detaches it anyway)")]
    Busy { kind: ObjectKind, name: String, reason: String },
    /// `move` without `-f` (gv_move_sd).
    #[error("-f flag not passed; move would be destructive")]
    MoveNeedsForce,
    /// `move` to something that is not a drive.
    #[error("destination '{name}' is not a drive")]
    NotADrive { name: String },
    /// `move` of something that is not a subdisk.
    #[error("you can only move subdisks; '{name}' isn't one")]
    NotASubdisk { name: String },
    /// `move` of a subdisk to its own drive.
    #[error("subdisk '{subdisk}' already on drive '{drive}'")]
    AlreadyOnDrive { subdisk: String, drive: String },
    /// `move` of a subdisk in no plex.
    #[error("subdisk '{subdisk}' is not part of a plex")]
    NotInPlex { subdisk: String },
    /// No free extent on the drive holds the subdisk.
    #[error(
        "not enough space on '{drive}' for '{subdisk}': it needs {length} bytes, the largest free extent is {largest}"
    )]
    NoSpace { drive: String, subdisk: String, length: u64, largest: u64 },
    /// The edit would leave a configuration that does not come up as written.
    #[error("{what}: {problem}")]
    WouldBreak { what: String, problem: Box<ConfigProblem> },
}

impl Edited {
    fn new(ws: &Workspace) -> Self {
        Edited { config: ws.config.clone(), drives: ws.drives.clone(), ..Edited::default() }
    }

    /// Whether the edit changed anything that has to be written.
    pub fn changes(&self, before: &Workspace) -> bool {
        self.config != before.config
            || !self.removed_drives.is_empty()
            || !self.renamed_drives.is_empty()
            || !self.down_drives.is_empty()
    }

    /// The kind of the object of that name, looked up as `gv_object_type` does: volumes,
    /// then plexes, then subdisks, then drives (a drive only named by subdisks counts).
    fn kind_of(&self, name: &str) -> Option<ObjectKind> {
        if self.config.volume(name).is_some() {
            Some(ObjectKind::Volume)
        } else if self.config.plex(name).is_some() {
            Some(ObjectKind::Plex)
        } else if self.config.subdisk(name).is_some() {
            Some(ObjectKind::Subdisk)
        } else if self.drives.iter().any(|d| d.name == name) || self.config.subdisks.iter().any(|s| s.drive == name) {
            Some(ObjectKind::Drive)
        } else {
            None
        }
    }

    fn drive(&self, name: &str) -> Option<&EditDrive> {
        self.drives.iter().find(|d| d.name == name)
    }

    fn volume_mut(&mut self, name: &str) -> &mut Volume {
        self.config.volumes.iter_mut().find(|v| v.name == name).expect("volume looked up before")
    }

    fn plex_mut(&mut self, name: &str) -> &mut Plex {
        self.config.plexes.iter_mut().find(|p| p.name == name).expect("plex looked up before")
    }

    fn subdisk_mut(&mut self, name: &str) -> &mut Subdisk {
        self.config.subdisks.iter_mut().find(|s| s.name == name).expect("subdisk looked up before")
    }

    /// Work a plex's state out again from its subdisks, then its volume's: what the kernel
    /// finds the next time it reads the drives (`gv_update_sd_state` calling
    /// `gv_update_plex_state`, then `gv_update_plex_config`, which keeps a striped or raid5
    /// plex down with too few subdisks or subdisks of different lengths). A growable plex
    /// whose subdisks are all up stays growable: the kernel's grow flags are not on disk.
    fn refresh_plex(&mut self, plex: &str) {
        let Some(p) = self.config.plex(plex) else { return };
        let organization = p.organization;
        let members = self.config.subdisks_of(plex);
        let states: Vec<SubdiskState> = members.iter().map(|s| s.state).collect();
        let unequal =
            organization.stripe_size().is_some() && members.windows(2).any(|pair| pair[0].length != pair[1].length);
        let state = if members.len() < organization.minimum_subdisks() || unequal {
            PlexState::Down
        } else {
            plex_state(organization, &states, p.state == PlexState::Growable)
        };
        let volume = p.volume.clone();
        self.plex_mut(plex).state = state;
        if let Some(volume) = volume {
            self.refresh_volume(&volume);
        }
    }

    /// Work a volume's state out again from its plexes (`gv_update_vol_state`).
    fn refresh_volume(&mut self, volume: &str) {
        if self.config.volume(volume).is_none() {
            return;
        }
        let plexes: Vec<_> = self.config.plexes_of(volume).iter().map(|p| (p.organization, p.state)).collect();
        self.volume_mut(volume).state = volume_state(&plexes);
    }

    /// Refuse the edit if it leaves a problem the configuration did not have before. Detached
    /// plexes and subdisks are no problem here: they are what `detach` makes.
    fn no_new_problems(&self, before: &VinumConfig, what: impl Fn() -> String) -> Result<(), EditError> {
        let known: HashSet<ConfigProblem> = before.problems().into_iter().collect();
        for problem in self.config.problems() {
            let detached =
                matches!(problem, ConfigProblem::PlexWithoutVolume { .. } | ConfigProblem::SubdiskWithoutPlex { .. });
            if !detached && !known.contains(&problem) {
                return Err(EditError::WouldBreak { what: what(), problem: Box::new(problem) });
            }
        }
        Ok(())
    }
}
