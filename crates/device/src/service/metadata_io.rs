//! The metadata I/O thread: performs the metadata ops (superblock and bitmap writes and their
//! flushes, see `uraid_engine::metadata`) for devices that have no I/O path of their own, which
//! are spares: the ops for members in a slot go down those members' own paths, beside their data
//! (see `runner::metadata`). Either way the engine thread never waits on a metadata `pwrite` or
//! `fsync`.
//!
//! The engine thread hands it at most one job at a time and waits for the answer before the
//! next, because each metadata step must be complete before the one after it starts; its queue
//! and its channel of answers therefore hold at most one each, and neither side ever waits for
//! room. The ops of one job are independent of each other and run in order on this thread.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use uraid_engine::metadata::{MetaError, MetaOp};

use super::notifier::{AnswerSender, Notifier};
use crate::member::MemberDevice;

/// One job for the metadata thread: each op with the device it goes to.
pub(super) struct MetaJob {
    pub(super) ops: Vec<(Arc<dyn MemberDevice>, MetaOp)>,
}

/// The metadata thread, as the engine thread holds it: the queue of its jobs, the channel of its
/// answers (each waking the engine thread through its notifier), and the thread, which ends when
/// the queue is dropped.
pub(super) struct MetadataIo {
    pub(super) jobs: Sender<MetaJob>,
    pub(super) answers: Receiver<Result<(), MetaError>>,
    pub(super) thread: JoinHandle<()>,
}

/// Start the metadata thread.
pub(super) fn spawn_metadata_io(notifier: &Arc<Notifier>) -> MetadataIo {
    // One job out at a time (see above): a queue of one, and a channel of one answer, never fill.
    let (jobs, rx) = crossbeam_channel::bounded::<MetaJob>(1);
    let (back, answers) = AnswerSender::channel(1, Arc::clone(notifier));
    let thread = std::thread::Builder::new()
        .name("metadata-io".into())
        .spawn(move || metadata_io(rx, back))
        .expect("spawning the metadata I/O thread");
    MetadataIo { jobs, answers, thread }
}

fn metadata_io(jobs: Receiver<MetaJob>, back: AnswerSender<Result<(), MetaError>>) {
    for job in jobs {
        if back.send(perform(&job)).is_err() {
            break;
        }
    }
}

/// Perform every op of a job, stopping at the first failure.
pub(super) fn perform(job: &MetaJob) -> Result<(), MetaError> {
    for (dev, op) in &job.ops {
        let done = match op {
            // The error names the device by its index; `OpenArray::metadata_error` names it.
            MetaOp::Write { offset, data, what, .. } => dev.write_at(*offset, data).map_err(|e| (what.to_string(), e)),
            MetaOp::Flush { .. } => dev.flush().map_err(|e| ("flushing".to_string(), e)),
        };
        if let Err((what, e)) = done {
            let unreachable = uraid_engine::array::unreachable_kind(e.kind());
            return Err(MetaError::Io { device: op.device(), what, reason: e.to_string(), unreachable });
        }
    }
    Ok(())
}
