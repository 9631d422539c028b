//! How each member's I/O is performed: an io_uring the engine thread drives, or a small pool of
//! I/O threads fed from a queue, which answer the engine thread through its inbox.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use uraid_engine::array::{IoResult, MemberIo};

use super::messages::Msg;
use super::notifier::Inbox;
use super::{log, uring, IoBackend, ServiceConfig};
use crate::open_array::MemberTarget;

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

/// Start the I/O threads of one member; returns the queue that feeds them.
fn spawn_member_workers(
    slot: usize,
    target: MemberTarget,
    threads: usize,
    back: &Inbox,
    workers: &mut Vec<JoinHandle<()>>,
) -> Sender<MemberIo> {
    let (qtx, qrx) = crossbeam_channel::unbounded::<MemberIo>();
    for n in 0..threads.max(1) {
        let (qrx, back, target) = (qrx.clone(), back.clone(), target.clone());
        let worker = std::thread::Builder::new()
            .name(format!("member{slot}-io{n}"))
            .spawn(move || member_worker(qrx, target, back))
            .expect("spawning a member I/O thread");
        workers.push(worker);
    }
    qtx
}

pub(super) fn member_worker(queue: Receiver<MemberIo>, target: MemberTarget, back: Inbox) {
    for io in queue {
        // A panic here (perform refuses I/O outside the data area with one) must still answer
        // the engine, or the request would wait forever; the member is failed instead, which
        // stops further I/O to it.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.perform(&io)));
        let result = match outcome {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => IoResult::Failed(e.to_string()),
            Err(_) => {
                IoResult::Failed(format!("internal error on {} (see the panic message above)", target.dev.name()))
            }
        };
        if back.send(Msg::IoDone(io.id, result.handing_back(io.op))).is_err() {
            break;
        }
    }
}
