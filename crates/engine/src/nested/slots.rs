//! Member states of a mirror of arrays, plex failures and revivals, and the events the driver
//! hears, all in the whole layout's slots (see the module's documentation for the rules).

use super::NestedArray;
use crate::array::{Array, EngineEvent};
use crate::error::EngineError;
use crate::slot::SlotState;
use crate::slot_change::driver_change;

impl NestedArray {
    /// Each plex's array from its members' states at open: whole plexes serve, plexes with every
    /// member there but not readable whole are revived whole, the others are out (their members
    /// reported failed). Returns the outer mirror's states.
    pub(super) fn open_plexes(&mut self) -> Vec<SlotState> {
        let mut outer = Vec::with_capacity(self.plexes.len());
        for p in 0..self.plexes.len() {
            let range = self.layout.plex_slots(p);
            let states = self.slots[range.clone()].to_vec();
            let geometry = self.layout.plexes()[p].clone();
            if let Ok(array) = self.plex_array(&geometry, states.clone()) {
                self.plexes[p] = Some(array);
                outer.push(SlotState::InSync);
            } else if states.iter().all(|s| matches!(s, SlotState::InSync | SlotState::Recovering)) {
                self.plexes[p] = Some(self.reviving_plex_array(p));
                outer.push(SlotState::Recovering);
            } else {
                // Out from the start: its members' states say so (the driver records them from
                // the states), and no event is raised for what nothing did while running.
                self.mark_plex_out(p);
                outer.push(if states.contains(&SlotState::Missing) { SlotState::Missing } else { SlotState::Faulty });
            }
        }
        outer
    }

    /// A fresh array for plex `p`, to be revived whole: every member taken as writable, writes
    /// by reconstruct-write until the revival ends.
    fn reviving_plex_array(&self, p: usize) -> Array {
        let geometry = &self.layout.plexes()[p];
        let mut array = self
            .plex_array(geometry, vec![SlotState::InSync; geometry.raid_disks()])
            .expect("a plex with every member in sync is readable");
        array.set_resync_pending(true);
        array
    }

    /// Plex `p` no longer gets writes: every member of it still counted in sync or recovering is
    /// stale from now on, and the driver hears of each.
    fn take_plex_out(&mut self, p: usize, reason: &str) {
        for g in self.mark_plex_out(p) {
            self.events.push(EngineEvent::MemberFailed { slot: g, reason: reason.to_string(), unreachable: false });
        }
    }

    /// Mark every member of plex `p` still counted in sync or recovering faulty; returns them.
    fn mark_plex_out(&mut self, p: usize) -> Vec<usize> {
        let live: Vec<usize> = self
            .layout
            .plex_slots(p)
            .filter(|&g| matches!(self.slots[g], SlotState::InSync | SlotState::Recovering))
            .collect();
        for &g in &live {
            self.slots[g] = SlotState::Faulty;
        }
        live
    }

    /// Change a member's state as the driver decides it (the transitions of
    /// [`Array::set_slot_state`]). A member of a whole plex changes inside its plex's array where
    /// the plex can stay whole; failing a member that leaves its plex unable to give every byte
    /// takes the plex out; a member of a plex out of service turning recovering revives the plex
    /// once every member of it is back; turning in sync ends that revival once all are.
    pub fn set_slot_state(&mut self, slot: usize, state: SlotState, force: bool) -> Result<(), EngineError> {
        use SlotState::*;
        if driver_change(&self.slots, slot, state)?.is_none() {
            return Ok(());
        }
        let (p, own) = self.layout.plex_of(slot);
        let plex_state = self.outer.slot_states()[p];
        match (state, plex_state) {
            (Faulty, InSync) if !self.stays_whole_without(p, own) => {
                self.outer.set_slot_state(p, Faulty, force).map_err(|e| match e {
                    EngineError::WouldFailArray { .. } => EngineError::WouldFailArray { slot },
                    e => e,
                })?;
                self.slots[slot] = Faulty;
                self.events.push(EngineEvent::MemberFailed {
                    slot,
                    reason: "failed by request".to_string(),
                    unreachable: false,
                });
            }
            (_, InSync) => {
                let array = self.plexes[p].as_mut().expect("a whole plex has its array");
                array.set_slot_state(own, state, force)?;
                if state != Faulty {
                    // A failure comes back as the plex array's event, with its reason.
                    self.slots[slot] = state;
                }
            }
            (Faulty, Recovering) => {
                self.slots[slot] = Faulty;
                self.events.push(EngineEvent::MemberFailed {
                    slot,
                    reason: "failed by request".to_string(),
                    unreachable: false,
                });
                self.outer.set_slot_state(p, Faulty, true)?;
            }
            (Recovering, _) => {
                self.slots[slot] = Recovering;
                self.revive_if_complete(p)?;
            }
            (InSync, Recovering) => {
                self.slots[slot] = InSync;
                if self.layout.plex_slots(p).all(|g| self.slots[g] == InSync) {
                    self.outer.set_slot_state(p, InSync, false)?;
                    let pending = self.resync_pending;
                    self.plexes[p].as_mut().expect("a revived plex has its array").set_resync_pending(pending);
                }
            }
            (InSync, _) => {
                let waiting = self.layout.plex_slots(p).find(|&g| self.slots[g] != Recovering && g != slot);
                return Err(EngineError::PlexNotRevived { slot, waiting: waiting.unwrap_or(slot) });
            }
            (Faulty | Missing, _) => self.slots[slot] = state,
        }
        self.pump();
        Ok(())
    }

    /// Whether plex `p` can still give every byte without its member `own` (and those already
    /// out).
    fn stays_whole_without(&self, p: usize, own: usize) -> bool {
        let Some(array) = self.plexes[p].as_ref() else { return false };
        let states = array.slot_states();
        array.geometry().is_readable(&|s| s != own && states[s] == SlotState::InSync)
    }

    /// Plex `p`, out of service, is revived whole once none of its members is missing or
    /// failed.
    fn revive_if_complete(&mut self, p: usize) -> Result<(), EngineError> {
        if self.layout.plex_slots(p).any(|g| self.slots[g].is_vacant()) {
            return Ok(());
        }
        self.abandon_plex(p);
        self.plexes[p] = Some(self.reviving_plex_array(p));
        self.outer.set_slot_state(p, SlotState::Recovering, false)
    }

    /// Events of plex `p`'s array, into the whole layout's slots; a plex that can no longer give
    /// every byte is taken out.
    pub(super) fn plex_events(&mut self, p: usize, events: Vec<EngineEvent>) {
        let first = self.layout.first_slot(p);
        for event in events {
            self.events.push(match event {
                EngineEvent::MemberFailed { slot, reason, unreachable } => {
                    self.slots[first + slot] = SlotState::Faulty;
                    EngineEvent::MemberFailed { slot: first + slot, reason, unreachable }
                }
                EngineEvent::ReadErrorCorrected { slot, offset, len } => {
                    EngineEvent::ReadErrorCorrected { slot: first + slot, offset, len }
                }
            });
        }
        let serving = matches!(self.outer.slot_states()[p], SlotState::InSync | SlotState::Recovering);
        let readable = self.plexes[p].as_ref().is_some_and(|a| {
            let states = a.slot_states();
            a.geometry().is_readable(&|s| states[s] == SlotState::InSync)
        });
        // A raid5 plex degraded while its parity is owed a resync would rebuild the lost
        // member's bytes from that parity: not trusted, as at open, while another plex serves
        // whole (the last one goes on degraded, as md's raid5 would).
        let another = (0..self.plexes.len()).any(|q| q != p && self.outer.slot_states()[q] == SlotState::InSync);
        let untrusted = self.resync_pending
            && another
            && self.plexes[p].as_ref().is_some_and(|a| a.geometry().is_parity() && a.degraded());
        if serving && (!readable || untrusted) {
            // Forced: a plex that lost its data is out whatever the mirror has left.
            let _ = self.outer.set_slot_state(p, SlotState::Faulty, true);
        }
    }

    /// Events of the outer mirror: a plex failed takes its members with it; a read error it
    /// corrected by rewriting a plex is reported on the members that plex's bytes live on.
    pub(super) fn outer_events(&mut self, events: Vec<EngineEvent>) {
        for event in events {
            match event {
                EngineEvent::MemberFailed { slot: p, reason, .. } => {
                    self.take_plex_out(p, &format!("its plex is out of service: {reason}"));
                }
                EngineEvent::ReadErrorCorrected { slot: p, offset, len } => {
                    let first = self.layout.first_slot(p);
                    for run in self.layout.plexes()[p].runs(offset, len) {
                        let (own, at) = run.copies[0];
                        self.events.push(EngineEvent::ReadErrorCorrected {
                            slot: first + own,
                            offset: at,
                            len: run.len,
                        });
                    }
                }
            }
        }
    }
}
