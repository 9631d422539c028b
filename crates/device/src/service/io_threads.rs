//! Member I/O on threads: a queue of one member's I/O and the threads that perform it with the
//! blocking calls of [`MemberTarget::perform`], answering the engine thread through its inbox.
//! The members without a ring use them, and a ring hands them what it cannot do itself.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use uraid_engine::array::{IoResult, MemberIo, MemberIoError};

use super::messages::Msg;
use super::notifier::Inbox;
use crate::target::MemberTarget;

/// Start the I/O threads of one member; returns the queue that feeds them.
pub(super) fn spawn_member_workers(
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
            Ok(Err(e)) => IoResult::Failed(e),
            Err(_) => IoResult::Failed(MemberIoError::other(format!(
                "internal error on {} (see the panic message above)",
                target.dev.name()
            ))),
        };
        if back.send(Msg::IoDone(io.id, result.handing_back(io.op))).is_err() {
            break;
        }
    }
}
