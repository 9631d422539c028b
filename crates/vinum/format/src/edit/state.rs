//! `setstate [-f] STATE OBJECT`: `gv_setstate`, `gv_set_vol_state`, `gv_set_plex_state`,
//! `gv_set_sd_state`, `gv_set_drive_state` (`geom_vinum_state.c`).
//!
//! The command takes `up`, `down` and `stale` only (gvinum.c), and each kind only the states
//! it has (no stale volume, plex or drive). Setting the state an object has already changes
//! nothing. Otherwise, without `-f` (the kernel's `GV_SETSTATE_FORCE`):
//!
//! - **subdisk down**: refused while it is in a plex.
//! - **subdisk up** (never on a drive that was not found, `-f` or not): from reviving or
//!   initializing; from down when not in a raid5 plex (in one it becomes stale instead, to be
//!   rebuilt from parity, and the command says so); from stale when in no plex, or in a concat
//!   or striped plex that is its volume's only plex; otherwise it has to be revived.
//! - **subdisk stale**: refused (the kernel's "other state transitions are only possible with
//!   force").
//! - **plex up**: only if its subdisks bring it up (`gv_update_plex_state`).
//! - **plex down**: refused for the only plex of its volume that is not down.
//! - **volume up**: only if a plex makes it up (`gv_update_vol_state`).
//! - **volume down**: refused. The kernel's check reads "if the volume is not open and the
//!   state is not forced, fail" (its comment says the opposite), and no volume is open
//!   between uraid's commands.
//! - **drive down**: its subdisks go down; the save leaves the drive out, as `gv_save_config`
//!   writes only drives that are up. The drive's own state is not on disk: the next command
//!   finds it up again, with its subdisks down.
//! - **drive up**: a drive that was found is up; one that was not found cannot be.
//!
//! With `-f` the state is set whatever the rules say, except as noted. A subdisk's change
//! works out its plex's state again and the plex its volume's; a plex's, its volume's. The
//! kernel keeps the change in memory until its next save; uraid has no memory between
//! commands, so the change is saved at once.

use crate::objects::{ObjectKind, PlexOrganization, PlexState, SubdiskState, VolumeState};
use crate::placement::volume_state;

use super::{EditError, Edited, Workspace};

/// The states the command takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wanted {
    Up,
    Down,
    Stale,
}

impl Wanted {
    fn name(self) -> &'static str {
        match self {
            Wanted::Up => "up",
            Wanted::Down => "down",
            Wanted::Stale => "stale",
        }
    }
}

/// Set `object`'s state to `state` (see the module documentation).
pub fn set_state(ws: &Workspace, state: &str, object: &str, force: bool) -> Result<Edited, EditError> {
    let wanted = match state {
        "up" => Wanted::Up,
        "down" => Wanted::Down,
        "stale" => Wanted::Stale,
        _ => return Err(EditError::InvalidState { state: state.to_string() }),
    };
    let mut e = Edited::new(ws);
    let kind = e.kind_of(object).ok_or_else(|| EditError::UnknownObject { name: object.to_string() })?;
    if wanted == Wanted::Stale && kind != ObjectKind::Subdisk {
        return Err(EditError::InvalidStateFor { kind, state: state.to_string() });
    }
    let refuse =
        |reason: String| EditError::StateRefused { kind, name: object.to_string(), state: wanted.name(), reason };
    match kind {
        ObjectKind::Volume => e.set_volume(object, wanted, force, refuse)?,
        ObjectKind::Plex => e.set_plex(object, wanted, force, refuse)?,
        ObjectKind::Subdisk => e.set_subdisk(object, wanted, force, refuse)?,
        ObjectKind::Drive => e.set_drive(object, wanted, refuse)?,
    }
    Ok(e)
}

impl Edited {
    fn set_volume(
        &mut self,
        volume: &str,
        wanted: Wanted,
        force: bool,
        refuse: impl Fn(String) -> EditError,
    ) -> Result<(), EditError> {
        let new = if wanted == Wanted::Up { VolumeState::Up } else { VolumeState::Down };
        if self.config.volume(volume).is_some_and(|v| v.state == new) {
            return Ok(());
        }
        if !force {
            match new {
                VolumeState::Up => {
                    let plexes: Vec<_> =
                        self.config.plexes_of(volume).iter().map(|p| (p.organization, p.state)).collect();
                    if volume_state(&plexes) != VolumeState::Up {
                        return Err(refuse("none of its plexes is usable (-f forces it)".into()));
                    }
                }
                VolumeState::Down => {
                    return Err(refuse("gvinum sets a volume that is not open down only with -f".into()));
                }
            }
        }
        self.volume_mut(volume).state = new;
        Ok(())
    }

    fn set_plex(
        &mut self,
        plex: &str,
        wanted: Wanted,
        force: bool,
        refuse: impl Fn(String) -> EditError,
    ) -> Result<(), EditError> {
        let new = if wanted == Wanted::Up { PlexState::Up } else { PlexState::Down };
        let p = self.config.plex(plex).expect("looked up").clone();
        if p.state == new {
            return Ok(());
        }
        if new == PlexState::Up {
            // "Let update_plex handle if the plex can come up."
            let mut worked_out = self.clone();
            worked_out.refresh_plex(plex);
            let computed = worked_out.config.plex(plex).map(|p| p.state);
            if computed != Some(PlexState::Up) && !force {
                let is = computed.map_or("down", |s| s.name());
                return Err(refuse(format!("its subdisks make it {is}, not up (-f forces it)")));
            }
        } else if let (Some(volume), false) = (&p.volume, force) {
            let plexes = self.config.plexes_of(volume);
            let not_down = plexes.iter().filter(|q| q.state != PlexState::Down).count();
            if plexes.len() == 1 || not_down == 1 {
                return Err(refuse(format!(
                    "it is the only plex of volume '{volume}' that is not down (-f forces it)"
                )));
            }
        }
        self.plex_mut(plex).state = new;
        if let Some(volume) = &p.volume {
            self.refresh_volume(volume);
        }
        Ok(())
    }

    fn set_subdisk(
        &mut self,
        subdisk: &str,
        wanted: Wanted,
        force: bool,
        refuse: impl Fn(String) -> EditError,
    ) -> Result<(), EditError> {
        let s = self.config.subdisk(subdisk).expect("looked up").clone();
        let plex = s.plex().and_then(|p| self.config.plex(p)).cloned();
        let mut new = match wanted {
            Wanted::Up => SubdiskState::Up,
            Wanted::Down => SubdiskState::Down,
            Wanted::Stale => SubdiskState::Stale,
        };
        if s.state == new {
            return Ok(());
        }
        match new {
            SubdiskState::Down => {
                if let (Some(p), false) = (&plex, force) {
                    return Err(refuse(format!("it is attached to plex '{}' (-f forces it)", p.name)));
                }
            }
            SubdiskState::Up => {
                if !self.drive(&s.drive).is_some_and(|d| d.is_up()) {
                    return Err(refuse(format!("its drive '{}' is not up", s.drive)));
                }
                let raid5 = plex.as_ref().is_some_and(|p| matches!(p.organization, PlexOrganization::Raid5 { .. }));
                match s.state {
                    SubdiskState::Reviving | SubdiskState::Initializing => {}
                    SubdiskState::Down => {
                        if raid5 && !force {
                            // The kernel makes it stale and reports the refusal.
                            new = SubdiskState::Stale;
                            self.notes.push(format!(
                                "sd '{subdisk}' of raid5 plex '{}' was down: it is now stale and must be rebuilt \
                                 from parity (uraid vinum start does); -f sets it up",
                                plex.as_ref().map_or("", |p| p.name.as_str())
                            ));
                        }
                    }
                    SubdiskState::Stale => {
                        if let (Some(p), false) = (&plex, force) {
                            let only_copy =
                                !raid5 && p.volume.as_deref().is_some_and(|v| self.config.plexes_of(v).len() == 1);
                            if !only_copy {
                                let why = if raid5 {
                                    format!("it is stale in raid5 plex '{}'", p.name)
                                } else if p.volume.is_none() {
                                    format!("it is stale in plex '{}', which is in no volume", p.name)
                                } else {
                                    format!("it is stale in plex '{}', which another plex mirrors", p.name)
                                };
                                return Err(refuse(format!(
                                    "{why}: it must be revived (uraid vinum start does; -f forces it up)"
                                )));
                            }
                        }
                    }
                    SubdiskState::Up => unreachable!("equal states return early"),
                }
            }
            _ => {
                if !force {
                    return Err(refuse("the kernel makes other state changes only with -f".into()));
                }
            }
        }
        self.subdisk_mut(subdisk).state = new;
        if let Some(p) = &plex {
            self.refresh_plex(&p.name);
        }
        Ok(())
    }

    fn set_drive(
        &mut self,
        drive: &str,
        wanted: Wanted,
        refuse: impl Fn(String) -> EditError,
    ) -> Result<(), EditError> {
        let up = self.drive(drive).is_some_and(|d| d.is_up());
        match (wanted, up) {
            (Wanted::Up, true) | (Wanted::Down, false) => Ok(()),
            (Wanted::Up, false) => Err(refuse("it was not found on any device given".into())),
            _ => {
                self.down_drives.push(drive.to_string());
                if let Some(d) = self.drives.iter_mut().find(|d| d.name == drive) {
                    d.media_size = None;
                }
                // gv_update_sd_state: a subdisk on a drive that is not up is down.
                let on_drive: Vec<String> =
                    self.config.subdisks.iter().filter(|s| s.drive == drive).map(|s| s.name.clone()).collect();
                for name in &on_drive {
                    self.subdisk_mut(name).state = SubdiskState::Down;
                    if let Some(plex) = self.config.subdisk(name).and_then(|s| s.plex()).map(str::to_string) {
                        self.refresh_plex(&plex);
                    }
                }
                Ok(())
            }
        }
    }
}
