//! Membership changes while serving (md's `--add`, `--fail`, `--remove`), bringing in spares, and
//! starting the member I/O of a slot whose device changed.

use uraid_engine::EngineError;
use uraid_md::assemble::MemberVerdict;

use super::{log, Runner};
use crate::error::OpenError;
use crate::service::workers::spawn_member_io;
use crate::service::{ManageError, ManageOp};

impl Runner {
    /// Start the member I/O of a slot whose device changed.
    pub(super) fn attach_slot(&mut self, slot: usize) {
        if let Some(target) = self.array.member_targets()[slot].clone() {
            let members = self.queues.len();
            let path = spawn_member_io(slot, members, target, &self.config, &self.back.notifier);
            self.set_path(slot, Some(path));
        }
    }

    /// A member failed or was failed: bring in a spare if there is one.
    pub(super) fn use_spare(&mut self) {
        match self.array.activate_spare() {
            Ok(Some(slot)) => {
                log(&format!(
                    "spare {} takes slot {slot}; rebuilding",
                    self.array.slot_device_name(slot).unwrap_or("?")
                ));
                self.attach_slot(slot);
                self.restart_recovery_for_new_slot();
            }
            Ok(None) => {}
            Err(e) => log(&format!("bringing in a spare failed: {e}")),
        }
    }

    /// A rebuild already running does not cover a slot that joined after it started: cut it
    /// short (its checkpoint is kept) so a new pass covering every slot starts at once.
    pub(super) fn restart_recovery_for_new_slot(&mut self) {
        let now = self.now();
        self.policy.interrupt_pass(&mut self.array, now);
        self.policy_events();
    }

    pub(super) fn manage(&mut self, op: ManageOp) -> Result<String, ManageError> {
        if self.info.read_only {
            return Err(ManageError::ReadOnly);
        }
        match op {
            ManageOp::Add(path) => {
                let dev = match crate::open_member::Member::open(&path, true) {
                    Ok(dev) => dev,
                    Err(source) => return Err(ManageError::Open { path, source }),
                };
                match self.array.add_member(Box::new(dev))? {
                    Some(slot) => {
                        self.attach_slot(slot);
                        self.restart_recovery_for_new_slot();
                        log(&format!("added {} to slot {slot}; rebuilding", path.display()));
                        Ok(format!("added {} to slot {slot}; rebuilding", path.display()))
                    }
                    None => {
                        log(&format!("added {} as a spare", path.display()));
                        Ok(format!("added {} as a spare", path.display()))
                    }
                }
            }
            ManageOp::Fail { member, force } => {
                let name = self.resolve_member(&member)?;
                let slot = self.array.fail_member(&name, force).map_err(|e| match e {
                    OpenError::Engine(EngineError::WouldFailArray { .. }) => {
                        ManageError::WouldLoseData { member: member.clone() }
                    }
                    other => other.into(),
                })?;
                self.after_completions();
                // A check or resync cannot go on degraded.
                let now = self.now();
                self.policy.member_left(&mut self.array, now);
                self.policy_events();
                self.use_spare();
                Ok(format!("{member} (slot {slot}) marked faulty"))
            }
            ManageOp::ReAdd(path) => self.readd_by_hand(path),
            ManageOp::Remove(member) => {
                let name = self.resolve_member(&member)?;
                // Removed by hand: no longer taken back by the array itself.
                self.returns.forget(&name);
                if let Some((_, MemberVerdict::Active { slot })) = self.array.find_member(&name) {
                    self.array.remove_member(&name)?;
                    self.drain_path(slot);
                    self.queues[slot] = None;
                } else {
                    self.array.remove_member(&name)?;
                }
                log(&format!("removed {member}"));
                Ok(format!("{member} removed"))
            }
        }
    }

    /// The member name as the array knows it, for a path as the user gave it (an NBD URI in
    /// any spelling that writes back the same, as the member's name is that form).
    pub(super) fn resolve_member(&self, given: &str) -> Result<String, ManageError> {
        if let Ok(uri) = uraid_nbd::client::NbdUri::parse(given) {
            let shown = uri.to_string();
            return self
                .array
                .device_names()
                .into_iter()
                .find(|name| *name == shown)
                .ok_or_else(|| ManageError::NotAMember { given: given.to_string() });
        }
        let canon = |p: &str| std::fs::canonicalize(p).ok();
        let want = canon(given);
        self.array
            .device_names()
            .into_iter()
            .find(|name| name == given || (want.is_some() && canon(name) == want))
            .ok_or_else(|| ManageError::NotAMember { given: given.to_string() })
    }
}
