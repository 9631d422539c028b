//! Spares: after a loss, a new, zeroed device is added to the empty slots (as `mdadm --add`,
//! through the array, which writes its superblock), and the policy rebuilds it. A RAIDframe set
//! takes one at a time, reconstructed into a failed column (`raidctl -a` then `-F`); its label
//! is written once it is in sync.

use uraid_engine::array::SlotState;

use crate::member_device::SimMember;

use super::{Failure, Invariant, Mode, Sim, SimFormat};

impl Sim {
    /// Add spares to empty slots a little while after a loss, in the runs that have spares.
    pub(super) fn drive_spares(&mut self) -> Result<(), Failure> {
        if !self.spares || self.mode != Mode::Normal {
            return Ok(());
        }
        let states = self.open.engine().slot_states().to_vec();
        let empty: Vec<usize> = (0..states.len()).filter(|&s| states[s].is_vacant()).collect();
        if empty.is_empty() {
            self.spare_countdown = None;
            return Ok(());
        }
        if !self.waiting_spares.is_empty() {
            return Ok(()); // they take the empty slots once the failure is recorded
        }
        let one_at_a_time = self.format == SimFormat::Raidframe;
        if one_at_a_time && states.contains(&SlotState::Recovering) {
            return Ok(()); // RAIDframe reconstructs one column at a time
        }
        match self.spare_countdown {
            None => self.spare_countdown = Some(self.frng.between(2, 80)),
            Some(0) => {
                self.spare_countdown = None;
                self.add_spares(if one_at_a_time { 1 } else { empty.len() })?;
            }
            Some(_) => {}
        }
        Ok(())
    }

    fn add_spares(&mut self, count: usize) -> Result<(), Failure> {
        for _ in 0..count {
            let d = self.new_device();
            let view = SimMember::of(&self.devices[d]);
            let added = self.open.add_member(Box::new(view.clone()));
            // Adding only probes the new device; its superblock goes out as metadata steps.
            if !view.take_writes().is_empty() {
                return Err(self.fail(Invariant::Protocol, format!("adding d{d} wrote to it outside the run")));
            }
            match added {
                Ok(Some(s)) => {
                    trace!(self, "spare d{d} added in slot {s}");
                    self.joined.push(d);
                    self.spare_devs.insert(d);
                    self.rebuilding.insert(d);
                    self.report.spares_added += 1;
                }
                // md's order: a slot emptied by a failure not yet recorded is not given away.
                Ok(None) if self.open.engine().log_held() => {
                    trace!(self, "spare d{d} added; waits for the failure record");
                    self.joined.push(d);
                    self.waiting_spares.push(d);
                    self.report.spares_added += 1;
                }
                Ok(None) => return Err(self.fail(Invariant::Protocol, format!("spare d{d} found no empty slot"))),
                Err(e) => return Err(self.fail(Invariant::Protocol, format!("adding spare d{d} was refused: {e}"))),
            }
        }
        self.refresh_slots();
        // Answers wait for the new membership's record; a rebuild under way starts again to
        // cover the new members too.
        let now = self.clock();
        self.policy.membership_changed(&self.open);
        self.policy.interrupt_pass(&mut self.open, now);
        self.policy_events()
    }

    /// The failures that held the log are recorded: the waiting spares take the empty slots.
    pub(super) fn spares_join(&mut self) -> Result<(), Failure> {
        if self.waiting_spares.is_empty() {
            return Ok(());
        }
        let mut joined = false;
        loop {
            match self.open.activate_spare() {
                Ok(Some(slot)) => {
                    self.refresh_slots();
                    let d = self.slot_dev[slot].expect("a spare took the slot");
                    trace!(self, "spare d{d} takes slot {slot}");
                    self.waiting_spares.retain(|&w| w != d);
                    self.rebuilding.insert(d);
                    joined = true;
                }
                Ok(None) => break,
                Err(e) => return Err(self.fail(Invariant::Protocol, format!("a spare could not take its slot: {e}"))),
            }
        }
        self.waiting_spares.clear();
        if joined {
            let now = self.clock();
            self.policy.membership_changed(&self.open);
            self.policy.interrupt_pass(&mut self.open, now);
        }
        Ok(())
    }
}
