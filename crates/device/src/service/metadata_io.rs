//! The metadata I/O thread: performs the array's metadata steps (superblock and bitmap writes
//! and their flushes, see `uraid_engine::metadata`) and the member flushes that must precede a
//! clean mark or the clearing of bitmap bits, so the engine thread never waits on a metadata
//! `pwrite` or `fsync`.
//!
//! The engine thread hands it one job at a time and waits for the answer (`Msg::MetaDone`) before
//! the next, because each metadata step must be complete before the one after it starts; its
//! queue therefore holds at most one job and never blocks the engine thread. The ops of one step
//! are independent of each other and run in order on this thread.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use uraid_engine::metadata::{MetaError, MetaOp};

use super::messages::Msg;
use super::notifier::Inbox;
use crate::member::MemberDevice;

/// One job for the metadata thread: each op with the device it goes to.
pub(super) struct MetaJob {
    pub(super) ops: Vec<(Arc<dyn MemberDevice>, MetaOp)>,
}

/// Start the metadata thread; it answers each job on `back` and ends when the sender is dropped.
pub(super) fn spawn_metadata_io(back: Inbox) -> (Sender<MetaJob>, JoinHandle<()>) {
    // One job out at a time (see above): a queue of one never fills.
    let (tx, rx) = crossbeam_channel::bounded::<MetaJob>(1);
    let thread = std::thread::Builder::new()
        .name("metadata-io".into())
        .spawn(move || metadata_io(rx, back))
        .expect("spawning the metadata I/O thread");
    (tx, thread)
}

fn metadata_io(jobs: Receiver<MetaJob>, back: Inbox) {
    for job in jobs {
        let result = perform(&job);
        if back.send(Msg::MetaDone(result)).is_err() {
            break;
        }
    }
}

/// Perform every op of a job, stopping at the first failure.
pub(super) fn perform(job: &MetaJob) -> Result<(), MetaError> {
    for (dev, op) in &job.ops {
        let done = match op {
            MetaOp::Write { offset, data, what, .. } => {
                dev.write_at(*offset, data).map_err(|e| (format!("{what} of {}", dev.name()), e))
            }
            MetaOp::Flush { .. } => dev.flush().map_err(|e| (format!("flushing {}", dev.name()), e)),
        };
        if let Err((what, e)) = done {
            return Err(MetaError::Io { device: op.device(), what, reason: e.to_string() });
        }
    }
    Ok(())
}
