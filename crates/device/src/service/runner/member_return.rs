//! Members lost for being unreachable, brought back while the array runs (md's `--re-add`, made
//! by the array itself): which failures count, starting the attempts the schedule says are due
//! (`array_policy::MemberReturns`; each made off this thread by `service::reopen`), and taking
//! back a member that answers, or leaving it out and saying why. Also `ctl re-add`, the same
//! re-add asked for by hand.
//!
//! Only members reached over a network (NBD exports) whose I/O failed for want of an answer
//! (a request timed out, the connection could not be opened again) are tried: a local file that
//! vanished, a member that answered with an error, or one failed by hand stays out until the
//! operator acts. A member that answers is taken back only as the former member it is (the
//! array's UUID, its own device number, its slot still free, and a bitmap that covers what it
//! missed, or no bitmap at all, which means a full rebuild); otherwise nothing is written to it.

use std::path::Path;

use uraid_md::assemble::MemberVerdict;

use super::{log, Runner};
use crate::array_policy::AttemptFailure;
use crate::open_array::{ReaddMode, ReaddRefusal, Readded};
use crate::open_member::Member;
use crate::service::reopen::ReopenAnswer;
use crate::service::ManageError;

impl Runner {
    /// `device` failed and is out of the array: if it failed for being unreachable and is
    /// reached over a network, it is tried again from now on.
    pub(super) fn member_lost(&mut self, device: &str) {
        // The engine says whether it failed the member for not answering or for its answer.
        let unreachable = self.array.take_unreachable_failure(device);
        let Some((_, MemberVerdict::Active { slot })) = self.array.find_member(device) else { return };
        if !unreachable || !Member::is_uri(Path::new(device)) || self.array.md().is_none() || self.info.read_only {
            return;
        }
        let now = self.now();
        self.returns.lost(device, slot, now);
        let backoff = self.returns.backoff();
        if backoff.enabled {
            log(&format!(
                "{device} is unreachable; it is tried again in {:?}, then up to every {:?}, and re-added if it comes back as it left",
                backoff.first, backoff.max
            ));
        }
    }

    /// Start the attempts that are due; members whose slot was taken meanwhile are no longer
    /// tried.
    pub(super) fn start_return_attempts(&mut self) {
        let now = self.now();
        for (device, slot) in self.returns.due(now) {
            if !self.slot_free_for(&device, slot) {
                self.returns.forget(&device);
                log(&format!("{device} is no longer tried: slot {slot}, which it held, is taken"));
                continue;
            }
            let limits = self.array.devices().iter().find(|d| d.name() == device).and_then(|d| d.remote_limits());
            if let Err(e) = self.reopen.attempt(device.clone(), limits) {
                let how = AttemptFailure::Unreachable(format!("no thread for the attempt: {e}"));
                self.returns.attempt_failed(&device, now, how);
            }
        }
    }

    /// Whether `slot` is still free for `device` (empty, or failed with `device` or nothing
    /// else in it).
    fn slot_free_for(&self, device: &str, slot: usize) -> bool {
        let free = self.array.engine().slot_states().get(slot).is_some_and(|s| s.is_vacant());
        free && self.array.slot_device_name(slot).is_none_or(|held| held == device)
    }

    /// An attempt answered: take the member back, or note why not (said in the log when that is
    /// news: the first time, or a reason different from the last).
    pub(super) fn return_attempt_answered(&mut self, answer: ReopenAnswer) {
        let ReopenAnswer { device, outcome } = answer;
        let Some(slot) = self.returns.find(&device).map(|m| m.slot) else { return };
        let now = self.now();
        let (dev, found) = match outcome {
            Ok(opened) => opened,
            Err(why) => {
                if self.returns.attempt_failed(&device, now, AttemptFailure::Unreachable(why.clone())) {
                    log(&format!("{device} is still unreachable: {why}"));
                }
                return;
            }
        };
        if !self.slot_free_for(&device, slot) {
            self.returns.forget(&device);
            log(&format!("{device} answers again, but slot {slot}, which it held, is taken: not re-added"));
            return;
        }
        // Its superblock was read off this thread; a device without one is no former member.
        let Some(found) = found else {
            let refusal = ReaddRefusal::NoSuperblock { device: device.clone() };
            self.readd_refused(&device, &refusal);
            return;
        };
        match self.array.readd_member(Box::new(dev), Some(found), ReaddMode::Returning) {
            Ok(done) => {
                self.returns.forget(&device);
                self.readded += 1;
                self.member_back(&device, done);
            }
            Err(refusal) => {
                if refusal.slot_gone() {
                    self.returns.forget(&device);
                }
                self.readd_refused(&device, &refusal);
            }
        }
    }

    fn readd_refused(&mut self, device: &str, refusal: &ReaddRefusal) {
        let now = self.now();
        let why = refusal.to_string();
        let tried = self.returns.find(device).is_some();
        if !tried || self.returns.attempt_failed(device, now, AttemptFailure::Refused(why.clone())) {
            // The reason names the device.
            log(&format!("a lost member answers again and is left out, nothing written to it: {why}"));
        }
    }

    /// A former member took its slot back: its I/O starts, the rebuild starts (or restarts to
    /// cover it), and its new role goes out to the members.
    fn member_back(&mut self, device: &str, done: Readded) {
        self.attach_slot(done.slot);
        self.restart_recovery_for_new_slot();
        let how = if done.bitmap_guided {
            "rebuilding only the regions the write-intent bitmap marks"
        } else {
            "rebuilding it in full (the array keeps no write-intent bitmap)"
        };
        log(&format!("{device} is back: re-added to slot {}; {how}", done.slot));
        self.update_inline();
        self.policy.membership_changed(&self.array);
        self.dispatch_metadata();
    }

    /// `ctl re-add`: md's `--re-add` by hand. The device is opened (and its superblock read) on
    /// this thread, as `ctl add` does.
    pub(super) fn readd_by_hand(&mut self, path: std::path::PathBuf) -> Result<String, ManageError> {
        let dev = match Member::open(&path, true) {
            Ok(dev) => dev,
            Err(source) => return Err(ManageError::Open { path, source }),
        };
        let done = self.array.readd_member(Box::new(dev), None, ReaddMode::BitmapOnly)?;
        let device = path.display().to_string();
        // A member tried by the array itself and re-added by hand first is no longer tried.
        let names = self.array.slot_device_name(done.slot).map(str::to_string);
        if let Some(name) = names {
            self.returns.forget(&name);
        }
        self.attach_slot(done.slot);
        self.restart_recovery_for_new_slot();
        log(&format!("re-added {device} to slot {}; rebuilding only what the write-intent bitmap marks", done.slot));
        Ok(format!("re-added {device} to slot {}; rebuilding only what the write-intent bitmap marks", done.slot))
    }
}
