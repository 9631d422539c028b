//! The policy's outputs on the engine thread: its metadata I/O handed to the metadata thread one
//! job at a time (and performed here at the very end, once that thread is gone), and its events
//! carried out: parked writes sent to the engine or failed, held answers given, passes' ends
//! told to those waiting, notices logged.

use uraid_engine::metadata::MetaError;

use super::{log, Runner};
use crate::array_policy::{PolicyEvent, WriteId};
use crate::service::metadata_io::{perform, MetaJob};
use crate::service::{BlockReply, Done, ServiceError};

impl Runner {
    /// Hand the metadata thread the policy's next job, if it has one and none is out.
    pub(super) fn dispatch_metadata(&mut self) {
        // Without the thread (at the end) what is left waits for `finish_metadata`.
        let Some(io) = &self.meta_io else { return };
        let Some(job) = self.policy.next_metadata_io(&mut self.array) else { return };
        // The queue holds one job and only one is ever out, so this does not block.
        if io.jobs.send(MetaJob { ops: job.ops }).is_err() {
            // The thread is gone (it panicked): nothing it was to write is durable, and what
            // waits on it must hear so rather than wait forever.
            self.metadata_done(Err(MetaError::Format("the metadata I/O thread has ended".into())));
        }
    }

    /// The metadata thread finished its job.
    pub(super) fn metadata_done(&mut self, result: Result<(), MetaError>) {
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
