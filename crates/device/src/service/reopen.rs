//! Attempts to reach again a member the array lost for being unreachable, made off the engine
//! thread: open the device (connect to its NBD export, with the limits the lost member had) and
//! read its superblock, the two steps that wait on the network. Each attempt runs on a thread of
//! its own and answers on a channel that wakes the engine thread, which decides whether the
//! member is taken back (`runner::member_return`). Nothing is written to the device here.
//!
//! When attempts are due is the array's policy's to say (`array_policy::MemberReturns`): at most
//! one per lost member is out at a time, so the channel's capacity, twice the slots, is never
//! reached by attempts the engine thread has yet to take.

use std::path::Path;
use std::sync::Arc;

use crossbeam_channel::Receiver;

use super::notifier::{AnswerSender, Notifier};
use crate::member::{MemberDevice, RemoteLimits};
use crate::open_member::Member;
use crate::probe::{probe, Probed};

/// How an attempt went.
pub(super) struct ReopenAnswer {
    /// The device as the array names it.
    pub(super) device: String,
    /// The opened device and its superblock, if it has one; or why it could not be reached.
    pub(super) outcome: Result<(Member, Option<Probed>), String>,
}

/// Where attempts are started, and their answers taken.
pub(super) struct Reopener {
    tx: AnswerSender<ReopenAnswer>,
    pub(super) answers: Receiver<ReopenAnswer>,
}

impl Reopener {
    /// For an array of `slots` slots, waking the engine thread through `notifier`.
    pub(super) fn new(slots: usize, notifier: &Arc<Notifier>) -> Reopener {
        let (tx, answers) = AnswerSender::channel(2 * slots.max(1), Arc::clone(notifier));
        Reopener { tx, answers }
    }

    /// Try to open `device` for writing, with `limits` if it is reached over a network, and read
    /// its superblock. Its answer comes on [`Reopener::answers`]; an error if no thread could be
    /// started for it.
    pub(super) fn attempt(&self, device: String, limits: Option<RemoteLimits>) -> std::io::Result<()> {
        let tx = self.tx.clone();
        std::thread::Builder::new().name("member-reopen".into()).spawn(move || {
            let outcome = reopen(&device, limits);
            // The engine thread is gone (the array stopped): the device is closed as dropped.
            let _ = tx.send(ReopenAnswer { device, outcome });
        })?;
        Ok(())
    }
}

fn reopen(device: &str, limits: Option<RemoteLimits>) -> Result<(Member, Option<Probed>), String> {
    let dev = Member::open(Path::new(device), true).map_err(|e| e.to_string())?;
    if let Some(limits) = limits {
        dev.set_remote_limits(limits);
    }
    let found = probe(&dev).map_err(|e| format!("reading its superblock: {e}"))?;
    Ok((dev, found))
}
