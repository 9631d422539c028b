//! `rm [-r] OBJECT...`: `gv_remove`, `gv_rm_vol`, `gv_rm_plex`, `gv_rm_sd`, `gv_rm_drive`
//! (`geom_vinum_rm.c`).
//!
//! - A volume with plexes, or a plex with subdisks, needs `-r`; then its plexes and their
//!   subdisks go with it.
//! - A plex that is its volume's only plex is refused, `-r` or not (remove the volume).
//! - A subdisk in a plex is refused, `-r` or not (detach it first).
//! - A drive is removed whatever it holds: its header is marked removed. With `-r` every
//!   volume that has a subdisk on it goes too, whole. Subdisks left on it (without `-r`, or
//!   not in a volume) stay in the configuration, down, on a drive the kernel no longer has
//!   (its "referenced" placeholder), and their plexes and volumes lose them.
//!
//! gvinum's `-f` lets a drive that is open be removed; no drive is open between uraid's
//! commands, so it changes nothing here and the command line accepts it for that.

use crate::objects::{ObjectKind, SubdiskState};

use super::{EditError, Edited, Workspace};

/// Remove the objects named, in order (see the module documentation).
pub fn remove(ws: &Workspace, names: &[String], recursive: bool) -> Result<Edited, EditError> {
    let mut e = Edited::new(ws);
    for name in names {
        match e.kind_of(name) {
            None => return Err(EditError::UnknownObject { name: name.clone() }),
            Some(ObjectKind::Volume) => {
                if !e.config.plexes_of(name).is_empty() && !recursive {
                    return Err(EditError::NeedsRecursive {
                        kind: ObjectKind::Volume,
                        name: name.clone(),
                        children: "plexes",
                    });
                }
                e.remove_volume(name);
            }
            Some(ObjectKind::Plex) => {
                if !e.config.subdisks_of(name).is_empty() && !recursive {
                    return Err(EditError::NeedsRecursive {
                        kind: ObjectKind::Plex,
                        name: name.clone(),
                        children: "subdisks",
                    });
                }
                let volume = e.config.plex(name).and_then(|p| p.volume.clone());
                if let Some(volume) = &volume {
                    if e.config.plexes_of(volume).len() == 1 {
                        return Err(EditError::OnlyPlex { plex: name.clone(), volume: volume.clone() });
                    }
                }
                e.remove_plex(name);
                if let Some(volume) = volume {
                    e.refresh_volume(&volume);
                }
            }
            Some(ObjectKind::Subdisk) => {
                if let Some(plex) = e.config.subdisk(name).and_then(|s| s.plex()) {
                    return Err(EditError::SubdiskAttached { subdisk: name.clone(), plex: plex.to_string() });
                }
                e.config.subdisks.retain(|s| &s.name != name);
            }
            Some(ObjectKind::Drive) => e.remove_drive(name, recursive),
        }
    }
    Ok(e)
}

impl Edited {
    /// `gv_rm_vol`: the volume, its plexes and their subdisks.
    fn remove_volume(&mut self, volume: &str) {
        let plexes: Vec<String> = self.config.plexes_of(volume).iter().map(|p| p.name.clone()).collect();
        for plex in &plexes {
            self.remove_plex(plex);
        }
        self.config.volumes.retain(|v| v.name != volume);
    }

    /// `gv_rm_plex`: the plex and its subdisks.
    fn remove_plex(&mut self, plex: &str) {
        self.config.subdisks.retain(|s| s.plex() != Some(plex));
        self.config.plexes.retain(|p| p.name != plex);
    }

    /// `gv_rm_drive`.
    fn remove_drive(&mut self, drive: &str, recursive: bool) {
        if self.drive(drive).is_some_and(|d| d.is_up()) && !self.removed_drives.iter().any(|d| d == drive) {
            self.removed_drives.push(drive.to_string());
        }
        if recursive {
            // The kernel walks the drive's subdisks (by drive offset) and removes the volume
            // of each that is in one.
            let mut on_drive: Vec<_> = self.config.subdisks.iter().filter(|s| s.drive == drive).collect();
            on_drive.sort_by_key(|s| s.drive_offset);
            let mut volumes: Vec<String> = Vec::new();
            for s in on_drive {
                let volume = s.plex().and_then(|p| self.config.plex(p)).and_then(|p| p.volume.clone());
                if let Some(volume) = volume.filter(|v| !volumes.contains(v)) {
                    volumes.push(volume);
                }
            }
            for volume in &volumes {
                self.remove_volume(volume);
            }
        }
        let left: Vec<String> =
            self.config.subdisks.iter().filter(|s| s.drive == drive).map(|s| s.name.clone()).collect();
        if left.is_empty() {
            self.drives.retain(|d| d.name != drive);
            return;
        }
        // "Put ourself into referenced state if we have subdisks": the drive stays as a
        // placeholder and its subdisks go down (forced), which their plexes feel.
        if let Some(d) = self.drives.iter_mut().find(|d| d.name == drive) {
            d.media_size = None;
        }
        for name in &left {
            self.subdisk_mut(name).state = SubdiskState::Down;
            if let Some(plex) = self.config.subdisk(name).and_then(|s| s.plex()).map(str::to_string) {
                self.refresh_plex(&plex);
            }
        }
    }
}
