//! `attach PLEX VOLUME [rename]`, `attach SUBDISK PLEX [OFFSET] [rename]` and
//! `detach [-f] PLEX|SUBDISK`: `gv_attach` and `gv_detach` (`geom_vinum.c`), `gv_attach_plex`,
//! `gv_attach_sd`, `gv_detach_plex`, `gv_detach_sd` (`geom_vinum_subr.c`).
//!
//! Attaching a plex to a volume makes its subdisks stale: the plex is down until its data is
//! synced from the volume's other plexes (`uraid vinum start` revives stale subdisks, and so
//! does running the volume writable). With `rename` it is called `<volume>.p<N>`, N the number of plexes the volume
//! has with it; its subdisks keep their names and follow it (the kernel leaves them naming the
//! old plex, which loses them when the drives are next read).
//!
//! Attaching a subdisk to a plex makes it stale. Without an offset it goes to the next column
//! of a striped or raid5 plex, or after the last subdisk of a concat plex (`gv_sd_to_plex`);
//! an offset must be free in the plex and, in a striped or raid5 plex, a whole number of
//! stripes (the kernel divides by the stripe size, so for a concat plex it would divide by 0;
//! here a concat offset may leave no hole or overlap in the plex that was not there). A striped or raid5
//! subdisk is cut to whole stripes and to the plex's columns, and refused if shorter. With
//! `rename` it is called `<plex>.s<N>`, N the number of subdisks the plex has with it. The
//! kernel makes a striped or raid5 plex of a volume that gains a subdisk growable, for
//! `start` to restripe the volume's data over one column more; uraid has no restripe and
//! would read that data in the new column count, so it refuses (an empty plex, or one in no
//! volume, takes subdisks).
//!
//! Detaching a plex that is up, or a subdisk of a plex that is up or growable (or degraded
//! with this subdisk up), needs `-f`. So does, here, any subdisk of a striped or raid5 plex in
//! a volume: without it the plex's data is read in one column fewer. Detaching what is not
//! attached changes nothing (the kernel says so and returns success).
//!
//! Detached plexes and subdisks are saved in gvinum's form (`plex name P org ORG  state S`,
//! `sd name S drive D len … driveoffset …`). The kernel drops them when it next reads the
//! drives; uraid keeps them (see `newest::merge_newest_first_keeping_detached`), so that they
//! can be attached or removed by later commands, as they can until gvinum restarts.

use crate::drive_layout::SECTOR_SIZE;
use crate::objects::{check_name, plex_name, subdisk_name, ObjectKind, PlexMembership, PlexState, SubdiskState};
use crate::placement::plex_rules::{default_plex_offset, join_striped};

use super::{EditError, Edited, Workspace};

/// Attach `child` (a plex or a subdisk) to `parent` (a volume or a plex), see the module
/// documentation.
pub fn attach(
    ws: &Workspace,
    child: &str,
    parent: &str,
    offset: Option<u64>,
    rename: bool,
) -> Result<Edited, EditError> {
    let mut e = Edited::new(ws);
    let parent_kind = e.kind_of(parent);
    match e.kind_of(child) {
        None => Err(EditError::UnknownObject { name: child.to_string() }),
        Some(ObjectKind::Plex) => {
            if parent_kind != Some(ObjectKind::Volume) {
                return Err(EditError::NoParent { wanted: ObjectKind::Volume, name: parent.to_string() });
            }
            if offset.is_some() {
                return Err(EditError::OffsetForPlex { plex: child.to_string(), volume: parent.to_string() });
            }
            e.attach_plex(child, parent, rename)?;
            Ok(e)
        }
        Some(ObjectKind::Subdisk) => {
            if parent_kind != Some(ObjectKind::Plex) {
                return Err(EditError::NoParent { wanted: ObjectKind::Plex, name: parent.to_string() });
            }
            e.attach_subdisk(ws, child, parent, offset, rename)?;
            Ok(e)
        }
        Some(kind) => Err(EditError::NotPlexOrSubdisk { name: child.to_string(), kind }),
    }
}

/// Detach `object` (a plex or a subdisk) from its volume or plex, see the module
/// documentation.
pub fn detach(ws: &Workspace, object: &str, force: bool) -> Result<Edited, EditError> {
    let mut e = Edited::new(ws);
    match e.kind_of(object) {
        None => return Err(EditError::UnknownObject { name: object.to_string() }),
        Some(ObjectKind::Plex) => e.detach_plex(object, force)?,
        Some(ObjectKind::Subdisk) => e.detach_subdisk(object, force)?,
        Some(kind) => return Err(EditError::NotPlexOrSubdisk { name: object.to_string(), kind }),
    }
    Ok(e)
}

impl Edited {
    fn attach_plex(&mut self, plex: &str, volume: &str, rename: bool) -> Result<(), EditError> {
        if let Some(attached) = self.config.plex(plex).and_then(|p| p.volume.clone()) {
            return Err(EditError::AlreadyAttached {
                kind: ObjectKind::Plex,
                name: plex.to_string(),
                parent: attached,
            });
        }
        let members: Vec<String> = self.config.subdisks_of(plex).iter().map(|s| s.name.clone()).collect();
        for name in &members {
            self.subdisk_mut(name).state = SubdiskState::Stale;
        }
        self.plex_mut(plex).volume = Some(volume.to_string());
        let mut name = plex.to_string();
        if rename {
            // gv_attach_plex: "%s.p%d" with the volume's plex count after the attach.
            let renamed = plex_name(volume, self.config.plexes_of(volume).len());
            if renamed != plex {
                if self.kind_of(&renamed).is_some() {
                    return Err(EditError::NameTaken { kind: ObjectKind::Plex, name: renamed });
                }
                check_name(ObjectKind::Plex, &renamed).map_err(|problem| EditError::BadName {
                    kind: ObjectKind::Plex,
                    name: renamed.clone(),
                    problem,
                })?;
                self.plex_mut(plex).name = renamed.clone();
                for member in &members {
                    if let Some(m) = self.subdisk_mut(member).membership.as_mut() {
                        m.plex = renamed.clone();
                    }
                }
                name = renamed;
            }
        }
        self.refresh_plex(&name);
        Ok(())
    }

    fn attach_subdisk(
        &mut self,
        ws: &Workspace,
        subdisk: &str,
        plex: &str,
        offset: Option<u64>,
        rename: bool,
    ) -> Result<(), EditError> {
        let s = self.config.subdisk(subdisk).expect("looked up").clone();
        if let Some(attached) = s.plex() {
            return Err(EditError::AlreadyAttached {
                kind: ObjectKind::Subdisk,
                name: subdisk.to_string(),
                parent: attached.to_string(),
            });
        }
        let p = self.config.plex(plex).expect("looked up").clone();
        let members: Vec<(String, u64, u64)> = self
            .config
            .subdisks_of(plex)
            .iter()
            .map(|m| (m.name.clone(), m.membership.as_ref().map_or(0, |x| x.plex_offset), m.length))
            .collect();
        let bad_offset = |offset: u64, reason: String| EditError::BadOffset {
            subdisk: subdisk.to_string(),
            plex: plex.to_string(),
            offset,
            reason,
        };
        if let Some(offset) = offset {
            if !offset.is_multiple_of(SECTOR_SIZE) {
                return Err(bad_offset(offset, "not a whole number of 512-byte sectors".into()));
            }
            if let Some(stripe) = p.organization.stripe_size() {
                if stripe != 0 && !offset.is_multiple_of(stripe) {
                    return Err(bad_offset(offset, format!("not a multiple of the stripe size {stripe}")));
                }
            }
            if let Some((other, ..)) = members.iter().find(|m| m.1 == offset) {
                return Err(bad_offset(offset, format!("sd '{other}' is there already")));
            }
        }
        let mut length = s.length;
        if let (Some(stripe), false) = (p.organization.stripe_size(), members.is_empty()) {
            if let Some(volume) = &p.volume {
                return Err(EditError::GrowUnsupported {
                    plex: plex.to_string(),
                    volume: volume.clone(),
                    columns: members.len(),
                });
            }
            let shortest = members.iter().map(|m| m.2).min().unwrap_or(0);
            // A plex that was there before this command is never "newborn": a shorter
            // subdisk is refused rather than cutting the others.
            let join = join_striped(length, stripe, shortest, false).map_err(|_| EditError::TooSmall {
                subdisk: subdisk.to_string(),
                plex: plex.to_string(),
                length: length - length % stripe,
                column: shortest,
            })?;
            length -= join.trim_joining;
        }
        let offsets: Vec<(u64, u64)> = members.iter().map(|m| (m.1, m.2)).collect();
        let plex_offset = offset.unwrap_or_else(|| default_plex_offset(p.organization, &offsets));
        {
            let target = self.subdisk_mut(subdisk);
            target.length = length;
            target.membership = Some(PlexMembership { plex: plex.to_string(), plex_offset });
            target.state = SubdiskState::Stale;
        }
        if rename {
            // gv_attach_sd: "%s.s%d" with the plex's subdisk count after the attach.
            let renamed = subdisk_name(plex, members.len() + 1);
            if renamed != subdisk {
                if self.kind_of(&renamed).is_some() {
                    return Err(EditError::NameTaken { kind: ObjectKind::Subdisk, name: renamed });
                }
                check_name(ObjectKind::Subdisk, &renamed).map_err(|problem| EditError::BadName {
                    kind: ObjectKind::Subdisk,
                    name: renamed.clone(),
                    problem,
                })?;
                self.subdisk_mut(subdisk).name = renamed;
            }
        }
        self.no_new_problems(&ws.config, || {
            format!("sd '{subdisk}' cannot join plex '{plex}' at offset {plex_offset}")
        })?;
        self.refresh_plex(plex);
        Ok(())
    }

    fn detach_plex(&mut self, plex: &str, force: bool) -> Result<(), EditError> {
        let p = self.config.plex(plex).expect("looked up").clone();
        let Some(volume) = p.volume else {
            self.notes.push(format!("plex '{plex}' is not attached to a volume: nothing to do"));
            return Ok(());
        };
        if p.state == PlexState::Up && !force {
            return Err(EditError::Busy {
                kind: ObjectKind::Plex,
                name: plex.to_string(),
                reason: format!("it is up in volume '{volume}'"),
            });
        }
        self.plex_mut(plex).volume = None;
        self.refresh_volume(&volume);
        Ok(())
    }

    fn detach_subdisk(&mut self, subdisk: &str, force: bool) -> Result<(), EditError> {
        let s = self.config.subdisk(subdisk).expect("looked up").clone();
        let Some(plex) = s.plex().map(str::to_string) else {
            self.notes.push(format!("sd '{subdisk}' is not attached to a plex: nothing to do"));
            return Ok(());
        };
        let p = self.config.plex(&plex).expect("a subdisk's plex is known").clone();
        if !force {
            let busy = p.state > PlexState::Degraded || (p.state == PlexState::Degraded && s.state == SubdiskState::Up);
            let busy_reason =
                |why: String| EditError::Busy { kind: ObjectKind::Subdisk, name: subdisk.to_string(), reason: why };
            if busy {
                return Err(busy_reason(format!("its plex '{plex}' is {}", p.state)));
            }
            if let (Some(_), Some(volume)) = (p.organization.stripe_size(), &p.volume) {
                return Err(busy_reason(format!(
                    "it is a column of {} plex '{plex}' of volume '{volume}', which without it reads its data in one column fewer",
                    p.organization
                )));
            }
        }
        self.subdisk_mut(subdisk).membership = None;
        self.refresh_plex(&plex);
        Ok(())
    }
}
