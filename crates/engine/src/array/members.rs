//! Member slots: which can be read and written, and how their states change, by the driver's
//! decision or because a member failed under I/O.

use super::{Array, EngineEvent};
use crate::error::EngineError;
use crate::slot::SlotState;
use crate::slot_change::driver_change;

impl Array {
    /// Change a slot's membership, as the driver decides it:
    /// - `Missing`/`Faulty` → `Recovering`: a spare was added in the slot;
    /// - `Recovering` → `InSync`: its recovery finished;
    /// - `InSync`/`Recovering` → `Faulty`: an operator failed it (a `MemberFailed` event with
    ///   reason "failed by request" follows);
    /// - `Faulty` → `Missing`: the failed device was removed.
    ///
    /// Failing an in-sync member beyond the level's redundancy is refused unless `force`.
    /// Member I/O already issued to a slot that leaves its device behind still completes, and
    /// its result is ignored. Nothing changes when an error is returned.
    pub fn set_slot_state(&mut self, slot: usize, state: SlotState, force: bool) -> Result<(), EngineError> {
        use SlotState::*;
        let Some(from) = driver_change(&self.slots, slot, state)? else { return Ok(()) };
        if from == InSync && !force {
            let slots = &self.slots;
            if !self.geometry.is_readable(&|s| s != slot && slots[s] == InSync) {
                return Err(EngineError::WouldFailArray { slot });
            }
        }
        if state == Faulty {
            self.fail_slot(slot, "failed by request", false);
        } else {
            self.change_state(slot, state);
        }
        self.log_maintenance();
        self.admit_waiting();
        Ok(())
    }

    /// Whether every byte can be read from in-sync members (recovering ones do not count).
    pub(super) fn readable(&self) -> bool {
        let slots = &self.slots;
        self.geometry.is_readable(&|s| slots[s] == SlotState::InSync)
    }

    /// Whether every byte can still be read with `slot` out as well.
    pub(super) fn can_lose(&self, slot: usize) -> bool {
        let slots = &self.slots;
        self.geometry.is_readable(&|s| s != slot && slots[s] == SlotState::InSync)
    }

    pub(super) fn in_sync(&self, slot: usize) -> bool {
        self.slots[slot] == SlotState::InSync
    }

    /// Whether writes go to the slot: in-sync and recovering members.
    pub(super) fn writable(&self, slot: usize) -> bool {
        matches!(self.slots[slot], SlotState::InSync | SlotState::Recovering)
    }

    fn change_state(&mut self, slot: usize, state: SlotState) {
        // A recovering member that turns in sync is the same device; anything else means the
        // device held so far is no longer trusted.
        if !(self.slots[slot] == SlotState::Recovering && state == SlotState::InSync) {
            self.generation[slot] += 1;
        }
        self.slots[slot] = state;
    }

    pub(super) fn fail_slot(&mut self, slot: usize, reason: &str, unreachable: bool) {
        if self.writable(slot) {
            self.change_state(slot, SlotState::Faulty);
            self.events.push(EngineEvent::MemberFailed { slot, reason: reason.to_string(), unreachable });
            self.hold_log_for_failure();
        }
    }
}
