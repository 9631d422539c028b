//! The policy's outputs on the engine thread: its metadata I/O sent down the members' own I/O
//! paths (their rings or I/O threads, beside their data), one job at a time, and performed here
//! at the very end once the paths are gone; and its events carried out: parked writes sent to
//! the engine or failed, held answers given, passes' ends told to those waiting, notices logged.

use std::sync::Arc;

use uraid_engine::array::{IoId, IoResult, MemberIo, MemberOp};
use uraid_engine::metadata::{MetaError, MetaOp};

use super::{log, Runner};
use crate::array_policy::{PolicyEvent, WriteId};
use crate::member::MemberDevice;
use crate::service::metadata_io::{perform, MetaJob};
use crate::service::{BlockReply, Done, ServiceError};

/// I/O ids of metadata ops on the members' paths have this bit set; the engine's never do (it
/// counts its own from 0), so each answer finds its way back.
const METADATA_IO: IoId = 1 << 63;

/// Whether the answer with this id is for a metadata op.
pub(super) fn is_metadata_io(id: IoId) -> bool {
    id & METADATA_IO != 0
}

/// A metadata job out: how many of its parts have not answered (an op on a member's path each,
/// and the ops for the metadata thread together), and its first failure.
pub(super) struct JobOut {
    left: usize,
    error: Option<MetaError>,
}

fn same_device(a: &Arc<dyn MemberDevice>, b: &Arc<dyn MemberDevice>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

impl Runner {
    /// Send the policy's next metadata job out, if it has one and none is out: each op to the
    /// I/O path of the slot its device holds, where it queues with that member's data I/O (a
    /// device with no path, a spare, has its ops done by the metadata thread). The ops of a job
    /// may run in any order or at once; the job is done when all have answered.
    pub(super) fn dispatch_metadata(&mut self) {
        // Without the thread (at the end) what is left waits for `finish_metadata`.
        if self.meta_io.is_none() || self.meta_job.is_some() {
            return;
        }
        let Some(job) = self.policy.next_metadata_io(&mut self.array) else { return };
        let targets = self.array.member_targets();
        let mut out = JobOut { left: 0, error: None };
        let mut for_thread = Vec::new();
        for (dev, op) in job.ops {
            let slot = targets.iter().position(|t| t.as_ref().is_some_and(|t| same_device(&t.dev, &dev)));
            let Some((slot, path)) = slot.and_then(|s| self.queues[s].as_mut().map(|p| (s, p))) else {
                for_thread.push((dev, op));
                continue;
            };
            let id = METADATA_IO | self.next_meta_io;
            self.next_meta_io += 1;
            let (offset, member_op, what) = match &op {
                MetaOp::Write { offset, data, what, .. } => {
                    (*offset, MemberOp::MetadataWrite { data: data.clone() }, what.to_string())
                }
                MetaOp::Flush { .. } => (0, MemberOp::Flush, "flushing metadata".to_string()),
            };
            self.meta_flight.insert(id, (op.device(), what));
            // Ahead of the data waiting for room: writes parked for their records wait on it.
            path.queue_first(MemberIo { id, slot, offset, op: member_op });
            out.left += 1;
            self.report.metadata_ios_on_member_paths += 1;
        }
        if !for_thread.is_empty() {
            self.report.metadata_ios_on_thread += for_thread.len() as u64;
            let io = self.meta_io.as_ref().expect("checked");
            // The queue holds one job and only one is ever out, so this does not block.
            if io.jobs.send(MetaJob { ops: for_thread }).is_ok() {
                out.left += 1;
            } else {
                // The thread is gone (it panicked): nothing it was to write is durable, and
                // what waits on it must hear so rather than wait forever.
                out.error = Some(MetaError::Format("the metadata I/O thread has ended".into()));
            }
        }
        self.meta_job = Some(out);
        // Nothing went out (every op was refused): the job is done now.
        self.metadata_part_done(Ok(()));
    }

    /// A metadata op on a member's path answered.
    pub(super) fn metadata_io_answered(&mut self, id: IoId, result: IoResult) {
        let Some((device, what)) = self.meta_flight.remove(&id) else { return };
        let result = match result {
            IoResult::Failed(e) => {
                Err(MetaError::Io { device, what, reason: e.to_string(), unreachable: e.member_unreachable() })
            }
            _ => Ok(()),
        };
        if let Some(out) = &mut self.meta_job {
            out.left = out.left.saturating_sub(1);
        }
        self.metadata_part_done(result);
    }

    /// The metadata thread did its part of the job out.
    pub(super) fn metadata_thread_answered(&mut self, result: Result<(), MetaError>) {
        if let Some(out) = &mut self.meta_job {
            out.left = out.left.saturating_sub(1);
        }
        self.metadata_part_done(result);
    }

    /// A part of the metadata job out is done with `result` (a part that was never sent comes
    /// as `Ok` with nothing left to count): once no part is left, the job is.
    fn metadata_part_done(&mut self, result: Result<(), MetaError>) {
        let Some(out) = &mut self.meta_job else { return };
        if let Err(e) = result {
            out.error.get_or_insert(e);
        }
        if out.left > 0 {
            return;
        }
        let out = self.meta_job.take().expect("looked at");
        self.metadata_done(out.error.map_or(Ok(()), Err));
    }

    /// The metadata job out finished.
    fn metadata_done(&mut self, result: Result<(), MetaError>) {
        let now = self.now();
        self.policy.metadata_io_done(&mut self.array, now, result);
        // A member whose metadata could not be written is failed (as md does), and the
        // survivors record it.
        self.note_failures();
        self.policy_events();
        self.dispatch_metadata();
    }

    /// At the end, with the metadata thread gone and metadata written on this thread again:
    /// the flushes still waiting, and what they were for.
    pub(super) fn finish_metadata(&mut self) {
        while let Some(job) = self.policy.next_metadata_io(&mut self.array) {
            let result = perform(&MetaJob { ops: job.ops });
            let now = self.now();
            self.policy.metadata_io_done(&mut self.array, now, result);
            self.policy_events();
        }
    }

    /// Carry out what the policy decided, in its order.
    pub(super) fn policy_events(&mut self) {
        while let Some(event) = self.policy.take_event() {
            match event {
                PolicyEvent::WriteReleased(WriteId(job)) => {
                    let requests = self.jobs.get_mut(&job).map(|j| std::mem::take(&mut j.parked)).unwrap_or_default();
                    for request in requests {
                        self.submit_engine(job, request);
                    }
                    self.refill_zeros(job);
                    self.maybe_finish(job);
                }
                PolicyEvent::WriteFailed(WriteId(job), why) => {
                    if let Some(j) = self.jobs.get_mut(&job) {
                        j.parked.clear();
                        j.fail(ServiceError::Metadata(why));
                    }
                    self.maybe_finish(job);
                }
                PolicyEvent::AnswerReleased(WriteId(job)) => {
                    if let Some((done, result)) = self.held.remove(&job) {
                        done(result);
                    }
                }
                // A finished pass or rebuild may allow inline requests again: a caller that
                // waited for it gets them from its next request on.
                PolicyEvent::PassEnded { summary } => {
                    log(&summary);
                    self.update_inline();
                    self.notify_idle_waiters();
                }
                PolicyEvent::RebuildRecorded => {
                    self.update_inline();
                    self.notify_idle_waiters();
                }
                PolicyEvent::Notice(line) => log(&line),
                PolicyEvent::FailuresRecorded => self.use_spare(),
            }
        }
    }

    /// Answer a client write or flush, unless the policy holds the answer (a member failure is being
    /// recorded): then it is given on [`PolicyEvent::AnswerReleased`].
    pub(super) fn answer_write(&mut self, job: u64, done: Done, result: Result<BlockReply, ServiceError>) {
        if self.policy.hold_answer(&self.array, WriteId(job)) {
            self.held.insert(job, (done, result));
        } else {
            done(result);
        }
    }
}
