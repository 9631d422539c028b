//! `move|mv -f DRIVE SUBDISK...`: `gv_move`, `gv_move_sd` (`geom_vinum_move.c`).
//!
//! Each subdisk is made again on the destination drive: same name, length, plex and plex
//! offset, in the first free extent of the drive that holds it (`gv_sd_to_drive` with no
//! drive offset), state stale; its old extent becomes free. Its data is not copied: gvinum
//! says the move destroys it and leaves the plex to be synced or rebuilt; `uraid vinum start`
//! revives stale subdisks from the volume's other plexes or from parity (so does running the
//! volume writable).
//! A subdisk of a volume with no other copy of its bytes loses them, as in gvinum ("perhaps a
//! bug to permit this", gvinum.8), so `-f` is required for every move. The kernel puts the new
//! subdisk at the head of its list, so the next save writes it first.
//!
//! Refused: a destination that is not a drive, or a drive that was not found (the kernel
//! would give the subdisk no drive offset at all); an object that is not a subdisk; a
//! subdisk already on the drive or in no plex; a drive without room.

use crate::objects::{ObjectKind, SubdiskState};
use crate::placement::free_list::Refusal;
use crate::placement::{Extent, FreeList};

use super::{EditError, Edited, Workspace};

/// Move `subdisks` to `drive`, in order (see the module documentation).
pub fn move_subdisks(ws: &Workspace, drive: &str, subdisks: &[String], force: bool) -> Result<Edited, EditError> {
    let mut e = Edited::new(ws);
    if e.kind_of(drive) != Some(ObjectKind::Drive) {
        return Err(EditError::NotADrive { name: drive.to_string() });
    }
    for name in subdisks {
        if e.kind_of(name) != Some(ObjectKind::Subdisk) {
            return Err(EditError::NotASubdisk { name: name.clone() });
        }
        if !force {
            return Err(EditError::MoveNeedsForce);
        }
        let Some(media_size) = e.drive(drive).and_then(|d| d.media_size) else {
            return Err(EditError::DriveNotFound { drive: drive.to_string(), why: "no space can be allocated on it" });
        };
        let s = e.config.subdisk(name).expect("looked up").clone();
        if s.drive == drive {
            return Err(EditError::AlreadyOnDrive { subdisk: name.clone(), drive: drive.to_string() });
        }
        let Some(plex) = s.plex().filter(|p| e.config.plex(p).is_some()).map(str::to_string) else {
            return Err(EditError::NotInPlex { subdisk: name.clone() });
        };
        let mut free = FreeList::empty_drive(media_size);
        for other in e.config.subdisks.iter().filter(|o| o.drive == drive) {
            free.occupy(Extent { offset: other.drive_offset, length: other.length });
        }
        let place = free.choose(Some(s.length), None).map_err(|refusal| EditError::NoSpace {
            drive: drive.to_string(),
            subdisk: name.clone(),
            length: s.length,
            largest: match refusal {
                Refusal::NoneLargeEnough { largest } => largest,
                _ => 0,
            },
        })?;
        let before = e.config.clone();
        let at = e.config.subdisks.iter().position(|o| &o.name == name).expect("looked up");
        let mut moved = e.config.subdisks.remove(at);
        moved.drive = drive.to_string();
        moved.drive_offset = place.offset;
        moved.state = SubdiskState::Stale;
        e.config.subdisks.insert(0, moved);
        e.no_new_problems(&before, || format!("sd '{name}' cannot move to drive '{drive}'"))?;
        e.refresh_plex(&plex);
    }
    Ok(e)
}
