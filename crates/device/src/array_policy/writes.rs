//! Client writes under the policy: the dirty mark and bitmap bits each needs, parking it until
//! they are durable, counting it while in flight, and holding its answer while a member failure
//! is being recorded.

use std::time::Duration;

use uraid_engine::metadata::MetaChange;

use super::{ArrayPolicy, MetadataError, PolicyEvent, PolicyMutation, WriteId};
use crate::open_array::OpenArray;

/// What to do with a write that has just started ([`ArrayPolicy::write_starts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteStart {
    /// Its records are durable: its engine requests may go out now.
    Go,
    /// It waits for its records: its engine requests go out on
    /// [`PolicyEvent::WriteReleased`], or it fails on [`PolicyEvent::WriteFailed`].
    Parked,
    /// Its records can never be durable (a metadata write failed): it fails with this error
    /// without going out, and is ended ([`ArrayPolicy::write_ends`]) as any other.
    Fail(MetadataError),
}

impl ArrayPolicy {
    /// A client write (a write, a discard or zeroing) of logical bytes `range` starts. The array
    /// is recorded dirty first if it is clean (on levels with redundancy; linear and raid0, as in
    /// md, never are), and the bitmap bits of its chunks are set; it is counted in flight until
    /// [`ArrayPolicy::write_ends`]. An error means it was refused before it started (nothing to
    /// end): the dirty mark or the bits could not be recorded.
    pub fn write_starts(
        &mut self,
        array: &mut OpenArray,
        id: WriteId,
        range: std::ops::Range<u64>,
    ) -> Result<WriteStart, MetadataError> {
        if !array.writes_recorded() && self.shape.max_degraded > 0 {
            let ticket = self.record(array, MetaChange::Dirty)?;
            self.meta.dirty_ticket = ticket.or(self.meta.dirty_ticket);
        }
        let chunks = array.intent_regions(range.start, range.end - range.start);
        if let Some(chunks) = &chunks {
            self.hold_intent(array, chunks.clone()).map_err(MetadataError::from)?;
        }
        let until = self.ticket_needed(array, chunks.as_ref());
        self.writes.insert(id, chunks);
        let Some(until) = until else { return Ok(WriteStart::Go) };
        if self.config.mutation == PolicyMutation::DataBeforeBitmap {
            // The planted bug: out before its records are durable.
            return Ok(WriteStart::Go);
        }
        // If its records never can be durable (a metadata write failed), it must not go out
        // unrecorded.
        if let Some(e) = array.metadata_failed() {
            return Ok(WriteStart::Fail(e.into()));
        }
        self.meta.parked.push_back((id, until));
        Ok(WriteStart::Parked)
    }

    /// The write `id` has ended (answered or failed, its engine requests all done): it no longer
    /// holds its bitmap chunks, and the clean delay starts again from `now`.
    pub fn write_ends(&mut self, id: WriteId, now: Duration) {
        let Some(chunks) = self.writes.remove(&id) else { return };
        self.note_write_ended(now);
        if let Some(chunks) = chunks {
            self.release_intent(chunks, now);
        }
    }

    /// Whether the answer to write `id` must wait: a member failure is being recorded, and a
    /// write that completed without that member must not be acknowledged before the record is
    /// durable. If so, the policy says when with [`PolicyEvent::AnswerReleased`].
    pub fn hold_answer(&mut self, array: &OpenArray, id: WriteId) -> bool {
        if !self.failure_being_recorded(array) {
            return false;
        }
        self.meta.held.push(id);
        true
    }

    /// Membership changed (a member failed, was failed, added or removed) and the array has
    /// recorded it: answers to writes are held until that record is durable.
    pub fn membership_changed(&mut self, array: &OpenArray) {
        self.meta.roles = array.metadata_pending().or(self.meta.roles);
    }

    /// Members the engine found failing have left the array: their absence is recorded (a later
    /// assembly must leave them out), answers to writes wait for that record, and a check, repair
    /// or resync stops (they cannot go on degraded; a rebuild goes on).
    pub fn members_failed(&mut self, array: &mut OpenArray, now: Duration) {
        match self.record(array, MetaChange::Roles) {
            Ok(_) => self.membership_changed(array),
            Err(e) => self.notice(format!("recording the failed member in the superblocks failed: {e}")),
        }
        // Written at once by an array that does not defer its metadata, or not at all after a
        // failure: then the log goes on now.
        self.release_held(array);
        self.member_left(array, now);
    }

    /// Whether a member failure is being recorded: not yet durable, and still may be (after a
    /// failed metadata write, which is noticed, answers are not held forever).
    pub fn failure_being_recorded(&self, array: &OpenArray) -> bool {
        self.meta.roles.is_some_and(|t| !array.metadata_durable(t)) && array.metadata_pending().is_some()
    }

    /// Release the held answers, and a partial parity log the failure holds (see
    /// `Array::set_log_hold_on_failure`), once the failure record is durable, or can no longer
    /// be.
    pub(super) fn release_held(&mut self, array: &mut OpenArray) {
        if self.failure_being_recorded(array) {
            return;
        }
        self.meta.roles = None;
        self.events.extend(self.meta.held.drain(..).map(PolicyEvent::AnswerReleased));
        // A failure whose event the driver has not taken yet is not recorded at all.
        if array.engine().log_held() && !array.engine().failure_untaken() {
            array.engine_mut().release_log_hold();
            self.events.push_back(PolicyEvent::FailuresRecorded);
        }
    }
}
