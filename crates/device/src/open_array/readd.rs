//! md's `--re-add`: a former member taken back into the slot it held, rebuilt only where the
//! write-intent bitmap says it missed writes, or refused with the reason, nothing written to it.
//!
//! Three callers: `add` takes a former member back this way when it can (else rebuilds it in
//! full as a new member), `ctl re-add` asks for exactly this and fails otherwise (as mdadm's
//! `--re-add` does), and a running array takes back by itself a member it lost for being
//! unreachable once that member answers again ([`ReaddMode::Returning`]): then, on an array
//! without a bitmap, it is rebuilt in full in its old slot.

use uraid_engine::SlotState;
use uraid_md::assemble::MemberVerdict;
use uraid_md_format::{MemberInfo, Role};

use super::md::{md_device, read_bitmap_header, OpenMember};
use super::{OpenArray, OpenError};
use crate::member::MemberDevice;
use crate::probe::{probe, Probed};

/// How a re-add may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaddMode {
    /// md's `--re-add`: a bitmap-guided rebuild, or refused.
    BitmapOnly,
    /// A member the running array lost for being unreachable answers again: bitmap-guided
    /// where the array keeps a bitmap (refused if it cannot vouch for what the member missed),
    /// rebuilt in full in its old slot where it keeps none.
    Returning,
}

/// What a re-add did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readded {
    pub slot: usize,
    /// Only what the bitmap marks is rebuilt (else everything).
    pub bitmap_guided: bool,
}

/// Why a device was not re-added. Nothing was written to it.
#[derive(Debug, thiserror::Error)]
pub enum ReaddRefusal {
    #[error("{device}: carries no md superblock, so it is no former member of this array; not re-added")]
    NoSuperblock { device: String },
    #[error("{device}: carries an md superblock of another array ({uuid}, events {events}); not re-added")]
    OtherArray { device: String, uuid: String, events: u64 },
    #[error("{device}: its superblock shows another device of this array (device number {found}, not {expected}); not re-added")]
    OtherDevice { device: String, found: u32, expected: u32 },
    #[error("{device}: its superblock says it was {role} of this array, not an active member; only active members are re-added (`add` takes it as a new one)")]
    NotActive { device: String, role: String },
    #[error("{device}: slot {slot}, which it held, is taken now; not re-added")]
    SlotTaken { device: String, slot: usize },
    #[error("{device}: already a working member or spare of this array")]
    AlreadyMember { device: String },
    #[error("{device}: the array keeps no write-intent bitmap to say what it missed, so it cannot be re-added (`add` rebuilds it in full)")]
    NoBitmap { device: String },
    #[error("{device}: the write-intent bitmap cannot say what it missed ({why}), so it cannot be re-added (`add` rebuilds it in full)")]
    BitmapCannotVouch { device: String, why: &'static str },
    #[error("{device}: a member failure is still being recorded; try again once it is")]
    FailureNotRecorded { device: String },
    #[error(transparent)]
    Array(#[from] OpenError),
}

impl ReaddRefusal {
    /// Whether the device can never be taken back into this array as things stand (its slot is
    /// gone, or it is not what was lost), rather than perhaps later.
    pub fn slot_gone(&self) -> bool {
        matches!(self, ReaddRefusal::SlotTaken { .. } | ReaddRefusal::AlreadyMember { .. })
    }
}

fn role_words(role: Role) -> String {
    match role {
        Role::Active(slot) => format!("active in slot {slot}"),
        Role::Spare => "a spare".into(),
        Role::Faulty => "faulty".into(),
        Role::Journal => "its journal".into(),
        Role::Replacement(slot) => format!("the replacement being built for slot {slot}"),
    }
}

impl OpenArray {
    /// The slot a former member may be re-added to with a bitmap-guided rebuild (md's
    /// `--re-add`): it was active in a slot that is free now, the bitmap has kept every region
    /// written since it left (bits are never cleared while degraded; `events_cleared` is not
    /// past its events), and it was not itself half rebuilt. raid10's bitmap covers the array,
    /// not members, so raid10 members are rebuilt in full. No member failure is waiting to be
    /// recorded (its slot would not be free on the members yet).
    pub(super) fn readd_slot(&self, device: &str, info: &MemberInfo) -> Result<usize, ReaddRefusal> {
        let slot = self.former_slot(device, info)?;
        let device = device.to_string();
        let Some(bits) = self.mdp().meta.write_intent() else { return Err(ReaddRefusal::NoBitmap { device }) };
        let cannot = |why| Err(ReaddRefusal::BitmapCannotVouch { device: device.clone(), why });
        if bits.all_dirty {
            return cannot("it marks the whole array");
        }
        if self.mdp().plan.level == uraid_layout::Level::Raid10 {
            return cannot("raid10's bitmap covers the array, not each member");
        }
        if info.events < bits.events_cleared {
            return cannot("bits were cleared after it left");
        }
        if info.recovery_offset.is_some() {
            return cannot("it was itself being rebuilt when it left");
        }
        if info.data_offset != self.mdp().members[self.mdp().plan.reference].info.data_offset {
            return cannot("its data starts elsewhere than the array's");
        }
        Ok(slot)
    }

    /// The slot `info` says its device held, if that slot is free for it now.
    fn former_slot(&self, device: &str, info: &MemberInfo) -> Result<usize, ReaddRefusal> {
        let Role::Active(slot) = info.role else {
            return Err(ReaddRefusal::NotActive { device: device.to_string(), role: role_words(info.role) });
        };
        let slot = slot as usize;
        let free = self.array.slot_states().get(slot).is_some_and(|s| s.is_vacant());
        if !free {
            return Err(ReaddRefusal::SlotTaken { device: device.to_string(), slot });
        }
        if self.array.log_held() {
            return Err(ReaddRefusal::FailureNotRecorded { device: device.to_string() });
        }
        Ok(slot)
    }

    /// Take `dev` back as the former member it is (see [`ReaddMode`]). `found` is its
    /// superblock when the caller read it already (off the thread that runs the array); else it
    /// is read here. The checks all come before anything is written; refused, the device is
    /// left as it was.
    pub fn readd_member(
        &mut self,
        dev: Box<dyn MemberDevice>,
        found: Option<Probed>,
        mode: ReaddMode,
    ) -> Result<Readded, ReaddRefusal> {
        self.require_md("re-adding a member")?;
        if !self.writable {
            return Err(OpenError::ReadOnly.into());
        }
        let device = dev.name().to_string();
        // Its entry, if the array still has one: failed in its slot, or removed.
        let mut failed_in_place = false;
        let reuse = match self.find_member(&device) {
            Some((idx, MemberVerdict::Active { slot })) if self.mdp().plan.slots[slot] == Some(idx) => {
                if self.array.slot_states()[slot] != SlotState::Faulty {
                    return Err(ReaddRefusal::AlreadyMember { device });
                }
                failed_in_place = true;
                Some(idx)
            }
            Some((_, MemberVerdict::Spare)) => return Err(ReaddRefusal::AlreadyMember { device }),
            Some((idx, _)) => Some(idx),
            None => None,
        };
        let found = match found {
            Some(f) => f,
            None => probe(dev.as_ref())
                .map_err(OpenError::from)?
                .ok_or_else(|| ReaddRefusal::NoSuperblock { device: device.clone() })?,
        };
        let info = found.superblock.info();
        if info.array_uuid != self.mdp().plan.array_uuid {
            return Err(ReaddRefusal::OtherArray {
                device,
                uuid: uraid_md_format::uuid::format_md(&info.array_uuid),
                events: info.events,
            });
        }
        if let Some(idx) = reuse {
            let expected = self.mdp().members[idx].info.dev_number;
            if info.dev_number != expected {
                return Err(ReaddRefusal::OtherDevice { device, found: info.dev_number, expected });
            }
        }
        match self.readd_slot(&device, &info) {
            Ok(slot) => {
                let slot = self.readd(dev, found, slot, reuse)?;
                Ok(Readded { slot, bitmap_guided: true })
            }
            Err(ReaddRefusal::NoBitmap { .. }) if mode == ReaddMode::Returning => {
                let slot = self.former_slot(&device, &info)?;
                // md's hot-add of a device that was failed in place: it is removed first.
                if failed_in_place {
                    self.remove_member(&device)?;
                }
                let slot = self.add_md_member_into(dev, Some(slot))?;
                Ok(Readded { slot: slot.expect("a free slot was asked for"), bitmap_guided: false })
            }
            Err(e) => Err(e),
        }
    }

    /// Put former member `dev` back into `slot` to be rebuilt there where the bitmap says
    /// (`reuse`: its entry in the member list, if it still has one).
    pub(super) fn readd(
        &mut self,
        dev: Box<dyn MemberDevice>,
        found: Probed,
        slot: usize,
        reuse: Option<usize>,
    ) -> Result<usize, OpenError> {
        let mut sb = found.superblock;
        // Until the rebuild is done it is not in sync: if we stop first, it starts over in full.
        let info = sb.info();
        sb.set_rebuilding(info.dev_number, slot as u32);
        let offset = found.offset;
        let info = sb.info();
        let idx = self.place_member(
            OpenMember { dev: std::sync::Arc::from(dev), probed: Probed { superblock: sb, offset }, info },
            reuse,
        );
        let reference_bitmap = read_bitmap_header(&self.mdp().members[self.mdp().plan.reference])?;
        let device = md_device(&self.mdp().members[idx], reference_bitmap.as_deref())?;
        self.join(idx, device, Vec::new())?;
        self.take_slot(idx, slot, true)?;
        self.roles_moved();
        self.record_roles()?;
        Ok(slot)
    }
}
