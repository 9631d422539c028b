//! The state of one member slot, as the engine, the partial parity log and the metadata formats
//! all see it.

use std::fmt;

use crate::error::EngineError;

/// The state of one member slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    InSync,
    /// No device fills the slot.
    Missing,
    /// The device failed during service; it is no longer used.
    Faulty,
    /// A device fills the slot but its contents are not trusted yet (a spare being rebuilt):
    /// every write lands on it too, no read ever uses it.
    Recovering,
}

impl fmt::Display for SlotState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SlotState::InSync => "in sync",
            SlotState::Missing => "missing",
            SlotState::Faulty => "faulty",
            SlotState::Recovering => "recovering",
        })
    }
}

/// The state `slot` of `slots` leaves for `to` when a driver changes it: the changes a driver
/// may make are missing or faulty to recovering (a device added), recovering to in sync (its
/// rebuild done), in sync or recovering to faulty (failed by request), and faulty to missing
/// (the failed device removed). `Ok(None)` when the slot is there already.
pub(crate) fn driver_change(slots: &[SlotState], slot: usize, to: SlotState) -> Result<Option<SlotState>, EngineError> {
    use SlotState::*;
    let raid_disks = slots.len();
    let from = *slots.get(slot).ok_or(EngineError::NoSuchSlot { slot, raid_disks })?;
    if from == to {
        return Ok(None);
    }
    let allowed = matches!(
        (from, to),
        (Missing | Faulty, Recovering) | (Recovering, InSync) | (InSync | Recovering, Faulty) | (Faulty, Missing)
    );
    if !allowed {
        return Err(EngineError::InvalidSlotChange { slot, from, to });
    }
    Ok(Some(from))
}
