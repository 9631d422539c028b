//! `rename [-r] OBJECT NEWNAME`: `gv_rename`, `gv_rename_vol`, `gv_rename_plex`,
//! `gv_rename_sd`, `gv_rename_drive` (`geom_vinum_rename.c`).
//!
//! A new name must be free among all objects, of every kind. References follow: a volume's
//! plexes name the new volume, a plex's subdisks the new plex, a drive's subdisks the new
//! drive (and the drive's header carries the new name from the next save on). A plex name
//! must contain a dot, a subdisk name two (the kernel's checks, which assume `v.pN` and
//! `v.pN.sM`).
//!
//! With `-r` a volume's plexes are renamed `<new>.<what followed the last dot>`, and their
//! subdisks likewise after their plex: `v.p0.s1` becomes `new.p0.s1`; a plex's subdisks
//! likewise. `-r` changes nothing for subdisks and drives. A child with no dot in its name is
//! refused (the kernel would dereference a null pointer). The kernel renames one object after
//! the other and stops at the first refusal; here any refusal renames nothing.
//!
//! A drive that was not found is refused: its header could not carry the new name, and the
//! device, when found again, would still be the old drive.

use crate::objects::{check_name, ObjectKind};

use super::{EditError, Edited, Workspace};

/// Rename `object` to `new_name` (see the module documentation).
pub fn rename(ws: &Workspace, object: &str, new_name: &str, recursive: bool) -> Result<Edited, EditError> {
    let mut e = Edited::new(ws);
    match e.kind_of(object) {
        None => return Err(EditError::UnknownObject { name: object.to_string() }),
        Some(ObjectKind::Volume) => e.rename_volume(object, new_name, recursive)?,
        Some(ObjectKind::Plex) => e.rename_plex(object, new_name, recursive)?,
        Some(ObjectKind::Subdisk) => e.rename_subdisk(object, new_name)?,
        Some(ObjectKind::Drive) => e.rename_drive(object, new_name)?,
    }
    Ok(e)
}

/// What follows the last dot of a child's name, which `-r` keeps.
fn number(kind: ObjectKind, name: &str) -> Result<&str, EditError> {
    name.rsplit_once('.').map(|(_, tail)| tail).ok_or_else(|| EditError::NoNumber { kind, name: name.to_string() })
}

impl Edited {
    fn check_new_name(&self, kind: ObjectKind, name: &str) -> Result<(), EditError> {
        if self.kind_of(name).is_some() {
            return Err(EditError::NameTaken { kind, name: name.to_string() });
        }
        check_name(kind, name).map_err(|problem| EditError::BadName { kind, name: name.to_string(), problem })
    }

    fn rename_volume(&mut self, old: &str, new: &str, recursive: bool) -> Result<(), EditError> {
        self.check_new_name(ObjectKind::Volume, new)?;
        let plexes: Vec<String> = self.config.plexes_of(old).iter().map(|p| p.name.clone()).collect();
        self.volume_mut(old).name = new.to_string();
        for plex in &plexes {
            self.plex_mut(plex).volume = Some(new.to_string());
            if recursive {
                let renamed = format!("{new}.{}", number(ObjectKind::Plex, plex)?);
                self.rename_plex(plex, &renamed, recursive)?;
            }
        }
        Ok(())
    }

    pub(super) fn rename_plex(&mut self, old: &str, new: &str, recursive: bool) -> Result<(), EditError> {
        self.check_new_name(ObjectKind::Plex, new)?;
        if !new.contains('.') {
            return Err(EditError::NotPlexName { name: new.to_string() });
        }
        let subdisks: Vec<String> = self.config.subdisks_of(old).iter().map(|s| s.name.clone()).collect();
        self.plex_mut(old).name = new.to_string();
        for subdisk in &subdisks {
            if let Some(m) = self.subdisk_mut(subdisk).membership.as_mut() {
                m.plex = new.to_string();
            }
            if recursive {
                let renamed = format!("{new}.{}", number(ObjectKind::Subdisk, subdisk)?);
                self.rename_subdisk(subdisk, &renamed)?;
            }
        }
        Ok(())
    }

    fn rename_subdisk(&mut self, old: &str, new: &str) -> Result<(), EditError> {
        self.check_new_name(ObjectKind::Subdisk, new)?;
        // The kernel looks for a first dot and another one after it.
        let two_dots = new.split_once('.').is_some_and(|(_, rest)| rest.contains('.'));
        if !two_dots {
            return Err(EditError::NotSubdiskName { name: new.to_string() });
        }
        self.subdisk_mut(old).name = new.to_string();
        Ok(())
    }

    fn rename_drive(&mut self, old: &str, new: &str) -> Result<(), EditError> {
        if !self.drive(old).is_some_and(|d| d.is_up()) {
            return Err(EditError::DriveNotFound { drive: old.to_string(), why: "its header cannot carry a new name" });
        }
        self.check_new_name(ObjectKind::Drive, new)?;
        for s in self.config.subdisks.iter_mut().filter(|s| s.drive == old) {
            s.drive = new.to_string();
        }
        if let Some(d) = self.drives.iter_mut().find(|d| d.name == old) {
            d.name = new.to_string();
        }
        self.renamed_drives.push((old.to_string(), new.to_string()));
        Ok(())
    }
}
