//! Gathering writes into whole stripes while the driver is plugged.
//!
//! A parity write that covers part of a stripe costs member reads (read-modify-write or
//! reconstruct-write), and the next write, which often covers the rest of that stripe, must
//! wait for it (both lock the stripe). md avoids both for sequential writes: its stripe cache
//! holds a stripe's pending writes while the submitter is plugged, so writes that arrive
//! together fill whole stripes before parity is computed. Here the driver says when requests
//! arrive together: between [`Array::plug`] and [`Array::unplug`], parity writes that leave a
//! stripe partly written are held; at the unplug, or as soon as any other request comes, they
//! are released in arrival order, and writes that continue one another are merged into one
//! write (one request, the first one's, carries the merged data; the others ride on it and
//! finish with it, with its result).
//!
//! A sequential stream often arrives one request per batch (a client with a queue depth sends
//! the next write as an earlier one completes). So at the unplug the last run of held writes
//! may stay held: when it ends part-way into a stripe, continues a stream (it is several
//! writes, or starts where a recent write ended), and other requests are in flight, whose
//! completions bring the next unplug (and likely the write that fills the stripe). Random
//! writes continue nothing and go at the unplug; with nothing else in flight, everything goes.
//!
//! What this keeps: every request still starts in arrival order relative to every other (a
//! held write is released before anything submitted after it, and only the last run stays
//! held), and each write still reaches the members whole or fails whole. A driver that plugs
//! must unplug before it waits for completions, and again after completions: a held write has
//! no member I/O until released.

use std::collections::HashMap;

use bytes::Bytes;
use smallvec::SmallVec;

use super::write_data::WriteData;
use super::{Array, Completion, RequestId};
use crate::error::EngineError;

/// Most bytes one merged write carries: bounds the copy a merge makes and the stripe memory
/// one request asks for at once.
pub(super) const MAX_GATHER_BYTES: usize = 16 << 20;

/// A write held while plugged.
#[derive(Debug)]
pub(super) struct HeldWrite {
    pub(super) id: RequestId,
    pub(super) offset: u64,
    pub(super) data: Bytes,
}

/// A run of held writes that continue one another, released as one write under the first's
/// id.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Merged {
    pub(super) id: RequestId,
    pub(super) offset: u64,
    pub(super) data: WriteData,
    /// The other requests it carries, in order.
    pub(super) riders: SmallVec<[RequestId; 4]>,
}

/// The driver's plug and what it holds.
#[derive(Debug)]
pub(super) struct WriteGather {
    plugged: bool,
    held: Vec<HeldWrite>,
    /// Requests carried by a merged write in flight, by the id of the request carrying them.
    riders: HashMap<RequestId, SmallVec<[RequestId; 4]>>,
    /// Where the most recent released writes ended (a write starting at one continues a
    /// stream), oldest overwritten first.
    recent_ends: [u64; RECENT_ENDS],
    next_end: usize,
    /// Requests that have ridden on another's write so far.
    gathered: u64,
}

/// How many stream ends are remembered: about as many sequential streams as are told apart.
const RECENT_ENDS: usize = 8;

impl Default for WriteGather {
    fn default() -> WriteGather {
        WriteGather {
            plugged: false,
            held: Vec::new(),
            riders: HashMap::new(),
            // No write has ended anywhere yet (0 would make every write at 0 a stream's).
            recent_ends: [u64::MAX; RECENT_ENDS],
            next_end: 0,
            gathered: 0,
        }
    }
}

impl WriteGather {
    /// Requests submitted and not yet finished that are not ops of their own: held, or riding.
    pub(super) fn outstanding(&self) -> usize {
        self.held.len() + self.riders.values().map(SmallVec::len).sum::<usize>()
    }
}

impl Array {
    /// Requests from here on arrive together (a batch the driver has taken from its queue):
    /// parity writes that leave a stripe partly written are held, to be merged with the writes
    /// that continue them (see the module's comment). Call [`Array::unplug`] when the batch is
    /// over, before waiting for completions.
    pub fn plug(&mut self) {
        self.gather.plugged = true;
    }

    /// The batch is over: release the held writes, merged with those that continue them; the
    /// last run may stay held while other requests are in flight (see the module's comment).
    pub fn unplug(&mut self) {
        self.gather.plugged = false;
        if self.gather.held.is_empty() {
            return;
        }
        let mut runs = gather_runs(std::mem::take(&mut self.gather.held), MAX_GATHER_BYTES);
        let last = runs.pop().expect("held writes make a run");
        for run in runs {
            self.release_run(run);
        }
        if self.keeps(&last) {
            self.gather.held = last;
        } else {
            self.release_run(last);
        }
    }

    /// Whether the last run of held writes stays held at an unplug.
    fn keeps(&self, run: &[HeldWrite]) -> bool {
        let (Some(first), Some(last), Some(width)) = (run.first(), run.last(), self.geometry.stripe_data_bytes())
        else {
            return false;
        };
        let end = last.offset + last.data.len() as u64;
        let bytes: usize = run.iter().map(|w| w.data.len()).sum();
        let continues = run.len() > 1 || self.gather.recent_ends.contains(&first.offset);
        !end.is_multiple_of(width) && continues && bytes < MAX_GATHER_BYTES && !self.ops.is_empty()
    }

    /// How many write requests have ridden on another's write so far (merged into it).
    pub fn writes_gathered(&self) -> u64 {
        self.gather.gathered
    }

    /// Whether `submit` should hold this write: plugged, a parity layout, and not whole
    /// stripes.
    pub(super) fn should_hold(&self, offset: u64, len: u64) -> bool {
        if !self.gather.plugged || len == 0 {
            return false;
        }
        match self.geometry.stripe_data_bytes() {
            Some(width) if self.geometry.is_parity() => !offset.is_multiple_of(width) || !len.is_multiple_of(width),
            _ => false,
        }
    }

    pub(super) fn hold(&mut self, write: HeldWrite) {
        self.gather.held.push(write);
    }

    /// Put every held write in as a request, merged where they continue one another; before
    /// anything else is submitted, so order is kept.
    pub(super) fn release_held(&mut self) {
        if self.gather.held.is_empty() {
            return;
        }
        let held = std::mem::take(&mut self.gather.held);
        for run in gather_runs(held, MAX_GATHER_BYTES) {
            self.release_run(run);
        }
    }

    /// Put in one run of held writes as one write.
    fn release_run(&mut self, run: Vec<HeldWrite>) {
        let merged = join_run(run);
        if !merged.riders.is_empty() {
            self.gather.gathered += merged.riders.len() as u64;
            self.gather.riders.insert(merged.id, merged.riders);
        }
        let g = &mut self.gather;
        g.recent_ends[g.next_end] = merged.offset + merged.data.len() as u64;
        g.next_end = (g.next_end + 1) % RECENT_ENDS;
        self.enqueue_parity_write(merged.id, merged.offset, merged.data);
    }

    /// A request finished: the requests riding on it finish with it, with its result.
    pub(super) fn finish_riders(&mut self, rid: RequestId, result: &Result<Completion, EngineError>) {
        let Some(riders) = self.gather.riders.remove(&rid) else { return };
        for rider in riders {
            let same = match result {
                Ok(_) => Ok(Completion::Written),
                Err(e) => Err(e.clone()),
            };
            self.finished.push_back((rider, same));
        }
    }
}

/// Held writes, in arrival order, cut into runs of writes that continue one another (each
/// starts where the one before it ends), each run at most `max` bytes (a longer write stands
/// alone).
pub(super) fn gather_runs(held: Vec<HeldWrite>, max: usize) -> Vec<Vec<HeldWrite>> {
    let mut runs: Vec<Vec<HeldWrite>> = Vec::new();
    let mut bytes = 0usize;
    for w in held {
        let joins = runs
            .last()
            .and_then(|run| run.last())
            .is_some_and(|last| last.offset + last.data.len() as u64 == w.offset && bytes + w.data.len() <= max);
        if joins {
            bytes += w.data.len();
            runs.last_mut().expect("checked").push(w);
        } else {
            bytes = w.data.len();
            runs.push(vec![w]);
        }
    }
    runs
}

/// One run as one write under its first request's id, the others riding on it; their buffers
/// are kept as they are, one after another (nothing is copied).
pub(super) fn join_run(run: Vec<HeldWrite>) -> Merged {
    let (id, offset) = (run[0].id, run[0].offset);
    let riders = run[1..].iter().map(|w| w.id).collect();
    Merged { id, offset, data: WriteData::joined(run.into_iter().map(|w| w.data)), riders }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(id: RequestId, offset: u64, len: usize) -> HeldWrite {
        HeldWrite { id, offset, data: Bytes::from(vec![id as u8; len]) }
    }

    fn merge_held(held: Vec<HeldWrite>, max: usize) -> Vec<Merged> {
        gather_runs(held, max).into_iter().map(join_run).collect()
    }

    #[test]
    fn writes_that_continue_one_another_merge_in_order() {
        let out = merge_held(vec![w(1, 0, 10), w(2, 10, 5), w(3, 15, 1)], 100);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id, 1);
        assert_eq!(out[0].offset, 0);
        assert_eq!(out[0].riders.as_slice(), &[2, 3]);
        let mut want = vec![1u8; 10];
        want.extend([2u8; 5]);
        want.push(3);
        assert_eq!(out[0].data.slice(0, 16).to_vec(), want);
    }

    #[test]
    fn a_gap_an_overlap_or_a_step_back_starts_a_new_write() {
        let out = merge_held(vec![w(1, 0, 10), w(2, 11, 5), w(3, 12, 4), w(4, 0, 2)], 100);
        let starts: Vec<(RequestId, u64, usize)> = out.iter().map(|m| (m.id, m.offset, m.data.len())).collect();
        assert_eq!(starts, vec![(1, 0, 10), (2, 11, 5), (3, 12, 4), (4, 0, 2)]);
        assert!(out.iter().all(|m| m.riders.is_empty()));
    }

    #[test]
    fn a_run_stops_at_the_size_bound() {
        let out = merge_held(vec![w(1, 0, 40), w(2, 40, 40), w(3, 80, 40), w(4, 120, 40)], 100);
        let shape: Vec<(RequestId, u64, usize, usize)> =
            out.iter().map(|m| (m.id, m.offset, m.data.len(), m.riders.len())).collect();
        assert_eq!(shape, vec![(1, 0, 80, 1), (3, 80, 80, 1)]);
    }

    #[test]
    fn a_lone_write_keeps_its_buffer() {
        let one = w(7, 5, 3);
        let ptr = one.data.as_ptr();
        let out = merge_held(vec![one], 100);
        assert_eq!(out[0].data.contiguous(0, 3).unwrap().as_ptr(), ptr);
    }
}
