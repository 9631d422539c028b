//! The write-intent bitmap while serving: which chunks a write touches, holding them marked (on
//! disk before the write goes out) while writes are in flight, and clearing them once idle for
//! long enough, as md's bitmap daemon does.

use std::time::Instant;

use super::metadata::AfterFlush;
use super::Runner;
use crate::error::OpenError;
use uraid_engine::metadata::MetaChange;

impl Runner {
    /// The bitmap chunks a logical range touches: per member for raid1/4/5/6 (a parity write
    /// touches whole stripes), of the array for raid10. `None` without a bitmap.
    pub(super) fn intent_chunks(&self, offset: u64, len: u64) -> Option<std::ops::Range<u64>> {
        let bits = self.array.write_intent()?;
        if len == 0 || bits.chunk_bytes == 0 {
            return None;
        }
        let (start, end) = match self.info.stripe_data_bytes {
            Some(width) => {
                let chunk = self.info.chunk_bytes;
                (offset / width * chunk, (offset + len).div_ceil(width) * chunk)
            }
            None => (offset, offset + len),
        };
        Some(start / bits.chunk_bytes..end.div_ceil(bits.chunk_bytes))
    }

    /// The logical offset where bitmap chunk `c` begins.
    pub(super) fn intent_chunk_start(&self, c: u64) -> u64 {
        let bytes = self.array.write_intent().map_or(0, |b| b.chunk_bytes) * c;
        match self.info.stripe_data_bytes {
            Some(width) => bytes / self.info.chunk_bytes * width,
            None => bytes,
        }
    }

    /// Mark `chunks` in the bitmap and count this user. While serving, the bits are only
    /// recorded: the writes they cover wait until they are durable (see `metadata`).
    pub(super) fn hold_intent(&mut self, chunks: std::ops::Range<u64>) -> Result<(), OpenError> {
        for c in chunks.clone() {
            *self.intent_users.entry(c).or_insert(0) += 1;
            self.intent_idle.remove(&c);
        }
        if let Some(ticket) = self.array.set_write_intent(chunks.clone(), true)? {
            for c in chunks {
                self.meta.chunk_ticket.insert(c, ticket);
            }
        }
        Ok(())
    }

    pub(super) fn release_intent(&mut self, chunks: std::ops::Range<u64>) {
        let now = Instant::now();
        for c in chunks {
            let users = self.intent_users.get_mut(&c).expect("released chunk was held");
            *users -= 1;
            if *users == 0 {
                self.intent_users.remove(&c);
                self.intent_idle.insert(c, now);
            }
        }
    }

    /// When the next bitmap chunk may be cleared.
    pub(super) fn intent_clear_at(&self) -> Option<Instant> {
        if self.meta.clearing_intent() {
            return None;
        }
        self.intent_idle.values().min().map(|t| *t + self.config.bitmap_clear_delay)
    }

    /// Clear the bits of chunks idle for long enough, as md's bitmap daemon does: the members
    /// are flushed first (on the metadata thread), so the data of those regions is on them
    /// before their bits go. Not while degraded (a member coming back needs them) or while a
    /// resync is owed.
    pub(super) fn clear_idle_intent(&mut self) {
        if self.array.engine().degraded() || self.array.needs_resync() || self.meta.clearing_intent() {
            return;
        }
        let now = Instant::now();
        let delay = self.config.bitmap_clear_delay;
        let due: Vec<u64> = self.intent_idle.iter().filter(|(_, t)| now >= **t + delay).map(|(c, _)| *c).collect();
        if !due.is_empty() {
            self.flush_then(AfterFlush::IntentClear { started: now, chunks: due });
        }
    }

    /// The members were flushed from `started` on: clear the bits of `chunks` that no write
    /// has touched since before then.
    pub(super) fn clear_flushed_intent(&mut self, started: Instant, chunks: Vec<u64>) -> Result<(), String> {
        if self.array.engine().degraded() || self.array.needs_resync() {
            return Ok(());
        }
        for c in chunks {
            if self.intent_idle.get(&c).is_some_and(|since| *since <= started) {
                self.intent_idle.remove(&c);
                self.record_metadata(MetaChange::IntentClear(c..c + 1))
                    .map(|_| ())
                    .map_err(|e| format!("clearing bitmap bits failed: {e}"))?;
            }
        }
        Ok(())
    }
}
