//! The write-intent bitmap while the array runs: which chunks a write touches, holding them
//! marked (on disk before the write goes out) while writes are in flight, and clearing them once
//! idle for long enough, as md's bitmap daemon does.

use std::time::Duration;

use uraid_engine::metadata::MetaChange;

use super::metadata::AfterFlush;
use super::ArrayPolicy;
use crate::error::OpenError;
use crate::open_array::OpenArray;

/// When a bitmap chunk's last write ended, and its place in the order chunks went idle.
#[derive(Debug, Clone, Copy)]
pub(super) struct IdleSince {
    at: Duration,
    order: u64,
}

impl ArrayPolicy {
    /// Mark `chunks` in the bitmap and count this user. The bits are only recorded: what they
    /// cover waits until they are durable (see `metadata`).
    pub(super) fn hold_intent(&mut self, array: &mut OpenArray, chunks: std::ops::Range<u64>) -> Result<(), OpenError> {
        let ticket = array.set_write_intent(chunks.clone(), true)?;
        for c in chunks {
            *self.intent_users.entry(c).or_insert(0) += 1;
            self.intent_idle.remove(&c);
            if let Some(ticket) = ticket {
                self.meta.chunk_ticket.insert(c, ticket);
            }
        }
        Ok(())
    }

    /// A user of `chunks` is done with them at `now`.
    pub(super) fn release_intent(&mut self, chunks: std::ops::Range<u64>, now: Duration) {
        for c in chunks {
            let users = self.intent_users.get_mut(&c).expect("released chunk was held");
            *users -= 1;
            if *users == 0 {
                self.intent_users.remove(&c);
                self.idle_order += 1;
                self.intent_idle.insert(c, IdleSince { at: now, order: self.idle_order });
            }
        }
    }

    /// When the next bitmap chunk may be cleared: never while degraded (a member coming back
    /// needs the bits), while a resync is owed, or while a clearing is on its way.
    pub(super) fn intent_clear_at(&self, array: &OpenArray) -> Option<Duration> {
        // Nothing can be recorded once a metadata write has failed for good: no attempts.
        if array.engine().degraded()
            || array.needs_resync()
            || self.meta.clearing_intent()
            || array.metadata_failed().is_some()
        {
            return None;
        }
        self.intent_idle.values().map(|i| i.at).min().map(|t| t + self.config.bitmap_clear_delay)
    }

    /// Clear the bits of chunks idle for long enough, as md's bitmap daemon does: the members
    /// are flushed first, so the data of those regions is on them before their bits go.
    pub(super) fn clear_idle_intent(&mut self, array: &OpenArray, now: Duration) {
        if array.engine().degraded() || array.needs_resync() || self.meta.clearing_intent() {
            return;
        }
        let delay = self.config.bitmap_clear_delay;
        let due: Vec<u64> = self.intent_idle.iter().filter(|(_, i)| now >= i.at + delay).map(|(c, _)| *c).collect();
        if !due.is_empty() {
            self.flush_then(AfterFlush::IntentClear { idle_order: self.idle_order, chunks: due });
        }
    }

    /// The members were flushed after the `idle_order`-th chunk went idle: clear the bits of
    /// `chunks` that no write has touched since before then.
    pub(super) fn clear_flushed_intent(
        &mut self,
        array: &mut OpenArray,
        idle_order: u64,
        chunks: Vec<u64>,
    ) -> Result<(), String> {
        if array.engine().degraded() || array.needs_resync() {
            return Ok(());
        }
        for c in chunks {
            if self.intent_idle.get(&c).is_some_and(|i| i.order <= idle_order) {
                self.intent_idle.remove(&c);
                self.record(array, MetaChange::IntentClear(c..c + 1))
                    .map(|_| ())
                    .map_err(|e| format!("clearing bitmap bits failed: {e}"))?;
            }
        }
        Ok(())
    }
}
