//! The slot changes a driver may make, checked the same way by both shapes of engine.

use crate::error::EngineError;
use crate::slot::SlotState;

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
