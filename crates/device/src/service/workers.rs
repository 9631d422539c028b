//! How each member's I/O is performed: an io_uring the engine thread drives ([`uring`]), or a
//! small pool of I/O threads fed from a queue, which answer the engine thread through its inbox
//! (`io_threads`).

use std::thread::JoinHandle;

use crossbeam_channel::Sender;
use uraid_engine::array::MemberIo;

use super::io_threads::spawn_member_workers;
use super::notifier::Inbox;
use super::{log, uring, IoBackend, ServiceConfig};
use crate::target::MemberTarget;

/// How one member's I/O is performed: by I/O threads fed from a queue (dropping it ends them
/// once they have answered everything queued), or through a ring the engine thread drives.
pub(super) enum MemberPath {
    Threads(Sender<MemberIo>),
    Ring(Box<uring::MemberRing>),
}

/// Set up what performs one member's I/O: a ring where the backend and the device allow it, else
/// I/O threads.
pub(super) fn spawn_member_io(
    slot: usize,
    members: usize,
    target: MemberTarget,
    config: &ServiceConfig,
    back: &Inbox,
    workers: &mut Vec<JoinHandle<()>>,
) -> MemberPath {
    let handle = if config.io == IoBackend::Uring { target.dev.io_handle() } else { None };
    if let Some(handle) = handle {
        let name = target.dev.name().to_string();
        if let Err(why) = &handle.direct {
            log(&format!("{name}: O_DIRECT not supported by its file system ({why}); using buffered I/O"));
        }
        match uring::member_ring(
            slot,
            target.clone(),
            handle,
            config.queue_depth,
            members,
            &back.notifier,
            back.clone(),
        ) {
            Ok(ring) => return MemberPath::Ring(Box::new(ring)),
            Err(e) => log(&format!("{name}: setting up io_uring failed ({e}); using I/O threads")),
        }
    }
    MemberPath::Threads(spawn_member_workers(slot, target, config.workers_per_member, back, workers))
}
