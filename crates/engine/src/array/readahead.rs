//! The `split` read policy's side of a read: dividing it over the copies, and reading ahead of
//! sequential streams on the copies their reader is not using.
//!
//! A hard disk gives a mirror's single sequential reader nothing by alternating small pieces
//! between the copies: each disk still turns under the pieces it skips. What helps is giving
//! each disk long runs of its own. So a followed stream ([`crate::read_balance::Balancer::track`])
//! is cut into aligned windows of [`SplitTuning::window_bytes`], consecutive windows go to
//! different copies (the stream's lanes), and the engine reads the next windows ahead of the
//! reader, so that every copy has its own window queued while the reader is still busy with an
//! earlier one. Without reading ahead, a reader with one or two requests in flight can never
//! keep two disks busy, however its requests are placed.
//!
//! Read-ahead is an engine-side cache of member reads, so it must never return bytes a later
//! write changed. The rules:
//! - a piece read ahead is `Entry`: one member read of one run, in flight or arrived;
//! - a read request takes the bytes of arrived entries at once, and waits on entries still in
//!   flight (it holds its lock meanwhile, so no overlapping write starts before it is served);
//! - a write that starts copies its bytes into arrived entries it overlaps, and marks entries
//!   still in flight stale (their bytes may predate it): a stale entry serves nobody, and the
//!   readers waiting on it read from the members instead once its read is back; a discard or a
//!   repairing check drops what it overlaps likewise;
//! - nothing is read ahead over a range a running write holds, nor while a resync is owed
//!   (reads then take md's first copy only), nor from a member that is not in sync;
//! - a read ahead that fails (a read error, a member that failed meanwhile) is simply dropped:
//!   the readers waiting on it read from the members, where the usual error handling rebuilds
//!   and rewrites what cannot be read;
//! - memory is bounded by [`SplitTuning::readahead_bytes`]; an entry goes once a reader took its
//!   last byte, or once its stream is gone (evicted from the stream table, or idle when memory
//!   is short).

use super::copy_unit::CopyUnit;
use super::emit::{IoTag, Outcome};
use super::read::{ReadOp, ReadPart};
use super::requests::OpKind;
use super::{Array, RequestId};
use crate::error::EngineError;
use crate::geometry::{Copies, CopyPlacement, MAX_RUN_BYTES};
use crate::member_io::MemberOp;
use crate::read_balance::{ReadPolicy, SplitTuning, Tracked};
use crate::slot::SlotState;

/// The request id read-ahead I/O is filed under (requests count from 1, the log's is 0); the
/// tag's part is the entry's id.
pub(super) const READAHEAD_RID: RequestId = RequestId::MAX;

/// Copies a divided read may use at most (raid1 arrays with more mirrors use their first idle
/// ones).
const MAX_DIVIDE: usize = 16;

/// What was read ahead, in flight or arrived.
#[derive(Debug, Default)]
pub(super) struct ReadAhead {
    entries: Vec<Entry>,
    /// Bytes of every entry, arrived or not.
    bytes: u64,
    next_id: u64,
}

/// One member read made ahead of a stream: `len` logical bytes from `logical`.
#[derive(Debug)]
struct Entry {
    id: u64,
    logical: u64,
    len: u64,
    /// The stream it was read for.
    stream: u64,
    /// The bytes, once arrived.
    data: Option<Vec<u8>>,
    /// A write changed (part of) the range after the read went out: the bytes are not to be
    /// used.
    stale: bool,
    /// Logical byte just past the furthest a reader took.
    taken: u64,
    /// Read parts `(request, part)` waiting for the bytes.
    waiters: Vec<(RequestId, usize)>,
}

impl Entry {
    fn end(&self) -> u64 {
        self.logical + self.len
    }

    fn overlaps(&self, offset: u64, end: u64) -> bool {
        self.logical < end && offset < self.end()
    }
}

impl ReadAhead {
    /// The usable entry holding logical byte `pos`, or else the start of the first usable one
    /// after it and before `end`: `Ok(entry id, entry end)` or `Err(Some(start))`.
    fn lookup(&self, pos: u64, end: u64) -> Result<(u64, u64), Option<u64>> {
        let mut next: Option<u64> = None;
        for e in self.entries.iter().filter(|e| !e.stale) {
            if e.logical <= pos && pos < e.end() {
                return Ok((e.id, e.end()));
            }
            if e.logical > pos && e.logical < end && next.is_none_or(|n| e.logical < n) {
                next = Some(e.logical);
            }
        }
        Err(next)
    }

    fn index(&self, id: u64) -> Option<usize> {
        self.entries.iter().position(|e| e.id == id)
    }

    fn remove(&mut self, index: usize) {
        let e = self.entries.swap_remove(index);
        self.bytes -= e.len;
    }

    /// Drop every arrived entry `drop` selects, and mark every such entry in flight stale.
    fn discard_where(&mut self, drop: impl Fn(&Entry) -> bool) {
        let mut i = 0;
        while i < self.entries.len() {
            if drop(&self.entries[i]) {
                if self.entries[i].data.is_some() {
                    self.remove(i);
                    continue;
                }
                self.entries[i].stale = true;
            }
            i += 1;
        }
    }
}

/// How a cached part stands.
enum Cached {
    /// The bytes were copied into the request's buffer.
    Served,
    /// Its entry is still in flight; the part is registered as waiting.
    Waiting,
    /// The entry is gone or stale: the part must be read from the members.
    Gone,
}

impl Array {
    /// Whether reads go through the `split` policy's planning (mirrored levels only).
    pub(super) fn split_reads(&self) -> bool {
        self.balance.policy() == ReadPolicy::Split && self.geometry.is_mirrored()
    }

    /// The `split` policy's knobs.
    pub fn split_tuning(&self) -> SplitTuning {
        self.balance.tuning()
    }

    /// Set the `split` policy's knobs (see [`SplitTuning`]); a read-ahead bound of 0 turns read
    /// ahead off.
    pub fn set_split_tuning(&mut self, tuning: SplitTuning) {
        self.balance.set_tuning(tuning);
    }

    /// Bytes read ahead for sequential streams and held (or in flight) now.
    pub fn readahead_in_use(&self) -> u64 {
        self.readahead.bytes
    }

    /// Forget the streams and everything read ahead (what is in flight is dropped when it
    /// arrives; readers waiting on it read from the members then).
    pub(super) fn readahead_reset(&mut self) {
        self.balance.forget_streams();
        self.readahead.discard_where(|_| true);
    }

    /// Plan the parts of a read under `split`: bytes already read ahead come from there, a
    /// stream's other bytes from the copies its windows belong to, a large read outside any
    /// stream is divided over the idle copies, and the rest goes where `split` sends single
    /// reads. Returns the stream the read continues, to be read further ahead (see
    /// [`Array::read_ahead`]) once the read's own member reads went out: they come first.
    pub(super) fn plan_split_read(&mut self, r: &mut ReadOp) -> Option<usize> {
        self.balance.begin_request();
        let mut tracked = if self.resync_pending { Tracked::default() } else { self.balance.track(r.offset, r.len) };
        if let Some(id) = tracked.evicted {
            self.readahead.discard_where(|e| e.stream == id && e.waiters.is_empty());
        }
        // A stream that is written back behind its reader reads like random reads: no
        // read-ahead on lanes far from where every head must return to write. Its reads are
        // still divided over the idle copies, down to two of the smallest pieces a division
        // makes: each read then takes half the time, the parallelism such a pass can use
        // (md-1998 got it by moving to the next disk every 64 KiB).
        let mut divide_at = self.balance.tuning().divide_bytes;
        if tracked.stream.is_some_and(|i| self.balance.stream(i).rewritten) {
            tracked.stream = None;
            divide_at = 2 * self.balance.tuning().min_divided_piece();
        }
        let end = r.offset + r.len;
        let mut pos = r.offset;
        while pos < end {
            match self.readahead.lookup(pos, end) {
                Ok((entry, stop)) => {
                    let stop = stop.min(end);
                    r.parts.push(ReadPart::Cached { logical: pos, len: stop - pos, entry });
                    pos = stop;
                }
                Err(next) => {
                    let stop = next.unwrap_or(end);
                    self.push_member_parts(r, pos, stop, tracked.stream, divide_at);
                    pos = stop;
                }
            }
        }
        tracked.stream
    }

    /// Parts for `[from, to)` of a read, from the members.
    fn push_member_parts(&mut self, r: &mut ReadOp, from: u64, to: u64, stream: Option<usize>, divide_at: u64) {
        let runs = self.geometry.runs(from, to - from);
        if self.resync_pending {
            for run in runs {
                let mut unit = CopyUnit::new(run.copies, run.len, Vec::new());
                unit.first = self.choose_copy(&unit.copies, unit.len);
                r.parts.push(ReadPart::Copies { logical: run.logical, unit });
            }
            return;
        }
        if let Some(stream) = stream {
            // The bytes of a stream's window come from the copy the window belongs to, as its
            // read-ahead does.
            let w = self.balance.tuning().window_bytes;
            for run in runs {
                let mut at = 0;
                while at < run.len {
                    let logical = run.logical + at;
                    let window = logical / w;
                    let len = ((window + 1) * w - logical).min(run.len - at);
                    let copies: Copies = run.copies.iter().map(|&(s, o)| (s, o + at)).collect();
                    let readable = copies.iter().filter(|c| self.in_sync(c.0)).count();
                    let lane = self.balance.stream_lane(stream, window, readable);
                    let slots = &self.slots;
                    let first = self.balance.lane_copy(&copies, lane, |s| slots[s] == SlotState::InSync);
                    let mut unit = CopyUnit::new(copies, len, Vec::new());
                    if let Some(first) = first {
                        self.balance.chose(&unit.copies, first, len);
                        unit.first = first;
                    }
                    r.parts.push(ReadPart::Copies { logical, unit });
                    at += len;
                }
            }
            let s = self.balance.stream_mut(stream);
            s.ahead = s.ahead.max(to);
            return;
        }
        if to - from >= divide_at && self.geometry.copy_placement() == (CopyPlacement::Images { same_slots: true }) {
            let mut idle = [0usize; MAX_DIVIDE];
            let slots = &self.slots;
            let n = self.balance.idle_copies(&runs[0].copies, |s| slots[s] == SlotState::InSync, &mut idle);
            let n = n.min(((to - from) / self.balance.tuning().min_divided_piece()).max(1) as usize);
            if n >= 2 {
                // The copies of every run sit on the same slots in the same order (raid1), so a
                // copy index means the same member all along the read.
                let total = to - from;
                let piece = total.div_ceil(n as u64).div_ceil(4096) * 4096;
                let mut at = from;
                for &copy in &idle[..n] {
                    if at >= to {
                        break;
                    }
                    let stop = (at + piece).min(to);
                    for run in self.geometry.runs(at, stop - at) {
                        let mut unit = CopyUnit::new(run.copies, run.len, Vec::new());
                        self.balance.chose(&unit.copies, copy, run.len);
                        unit.first = copy;
                        r.parts.push(ReadPart::Copies { logical: run.logical, unit });
                    }
                    at = stop;
                }
                return;
            }
        }
        for run in runs {
            let mut unit = CopyUnit::new(run.copies, run.len, Vec::new());
            unit.first = self.choose_copy(&unit.copies, unit.len);
            r.parts.push(ReadPart::Copies { logical: run.logical, unit });
        }
    }

    /// Read stream `index` further ahead: up to its depth past its reader, one run at a time,
    /// each window from its lane's copy.
    pub(super) fn read_ahead(&mut self, index: usize) {
        let tuning = self.balance.tuning();
        if tuning.readahead_bytes == 0 || self.resync_pending {
            return;
        }
        let size = self.size_bytes();
        let w = tuning.window_bytes;
        loop {
            let s = *self.balance.stream(index);
            if s.ahead >= size {
                return;
            }
            let probe = self.geometry.runs(s.ahead, 1);
            let copies = probe[0].copies.iter().filter(|c| self.in_sync(c.0)).count();
            let depth = self.balance.readahead_depth(index, copies);
            let limit = (s.next + depth).min(size);
            if s.ahead >= limit {
                return;
            }
            if self.readahead.bytes >= tuning.readahead_bytes && !self.readahead_evict() {
                return;
            }
            let start = s.ahead;
            let window = start / w;
            // Whole units (a run, not past the window), so the members see few large reads; a
            // part of one once at least half the depth is free (while the depth is still small).
            let mut stop = ((window + 1) * w).min(start + MAX_RUN_BYTES).min(size);
            if stop > limit {
                if limit - start < depth / 2 {
                    return;
                }
                stop = limit;
            }
            match self.readahead.lookup(start, stop) {
                Ok((_, covered)) => {
                    // Read ahead already (for another stream reading the same bytes).
                    self.balance.stream_mut(index).ahead = covered;
                    continue;
                }
                Err(Some(next)) => stop = next,
                Err(None) => {}
            }
            if self.written_now(start, stop) {
                return;
            }
            for run in self.geometry.runs(start, stop - start) {
                let readable = run.copies.iter().filter(|c| self.in_sync(c.0)).count();
                let lane = self.balance.stream_lane(index, window, readable);
                let slots = &self.slots;
                let Some(copy) = self.balance.lane_copy(&run.copies, lane, |s| slots[s] == SlotState::InSync) else {
                    return;
                };
                self.balance.chose(&run.copies, copy, run.len);
                let (slot, offset) = run.copies[copy];
                let id = self.readahead.next_id;
                self.readahead.next_id += 1;
                self.readahead.entries.push(Entry {
                    id,
                    logical: run.logical,
                    len: run.len,
                    stream: s.id,
                    data: None,
                    stale: false,
                    taken: run.logical,
                    waiters: Vec::new(),
                });
                self.readahead.bytes += run.len;
                self.emit(READAHEAD_RID, IoTag { part: id as usize, slot }, offset, MemberOp::Read { len: run.len });
            }
            self.balance.stream_mut(index).ahead = stop;
        }
    }

    /// Make room: drop arrived entries nobody waits on whose stream is gone or idle, or whose
    /// reader has moved past them. Whether anything was dropped.
    fn readahead_evict(&mut self) -> bool {
        let before = self.readahead.bytes;
        let mut i = 0;
        while i < self.readahead.entries.len() {
            let e = &self.readahead.entries[i];
            let passed = self.balance.stream_position(e.stream).is_some_and(|next| e.end() <= next);
            if e.data.is_some() && e.waiters.is_empty() && (passed || !self.balance.stream_active(e.stream)) {
                self.readahead.remove(i);
            } else {
                i += 1;
            }
        }
        self.readahead.bytes < before
    }

    /// Whether a running request holds `[start, end)` for writing.
    fn written_now(&self, start: u64, end: u64) -> bool {
        self.running.iter().any(|(_, locks)| locks.iter().any(|&(s, e, write)| write && s < end && start < e))
    }

    /// A write of `data` at logical `offset` starts: arrived entries take its bytes, entries in
    /// flight go stale.
    pub(super) fn readahead_write(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        self.balance.note_write(offset, data.len() as u64);
        for e in self.readahead.entries.iter_mut().filter(|e| e.overlaps(offset, end)) {
            let (start, stop) = (e.logical, e.end());
            match &mut e.data {
                Some(bytes) => {
                    let from = offset.max(start);
                    let to = end.min(stop);
                    bytes[(from - start) as usize..(to - start) as usize]
                        .copy_from_slice(&data[(from - offset) as usize..(to - offset) as usize]);
                }
                None => e.stale = true,
            }
        }
    }

    /// `[offset, offset+len)` changes in a way the engine does not copy (a discard, a repair):
    /// drop what was read ahead over it.
    pub(super) fn readahead_forget(&mut self, offset: u64, len: u64) {
        let end = offset + len;
        self.readahead.discard_where(|e| e.overlaps(offset, end));
    }

    /// Serve a cached part from its entry if it arrived, or wait for it.
    fn take_cached(&mut self, rid: RequestId, r: &mut ReadOp, part: usize, may_wait: bool) -> Cached {
        let ReadPart::Cached { logical, len, entry } = r.parts[part] else { unreachable!("a cached read part") };
        let Some(i) = self.readahead.index(entry) else { return Cached::Gone };
        let e = &mut self.readahead.entries[i];
        if e.stale {
            return Cached::Gone;
        }
        match &e.data {
            Some(bytes) => {
                let from = (logical - e.logical) as usize;
                let to = (logical - r.offset) as usize;
                // A copy: the entry stays, and later writes change it in place.
                r.assembly.put(to, bytes::Bytes::copy_from_slice(&bytes[from..from + len as usize]));
                e.taken = e.taken.max(logical + len);
                Cached::Served
            }
            None if may_wait => {
                e.waiters.push((rid, part));
                Cached::Waiting
            }
            None => Cached::Gone,
        }
    }

    /// Start a cached part: `Some` when finished (served).
    pub(super) fn start_cached_part(
        &mut self,
        rid: RequestId,
        r: &mut ReadOp,
        part: usize,
    ) -> Option<Result<(), EngineError>> {
        match self.take_cached(rid, r, part, true) {
            Cached::Served => {
                let ReadPart::Cached { entry, .. } = r.parts[part] else { unreachable!("a cached read part") };
                self.release_if_taken(entry);
                Some(Ok(()))
            }
            Cached::Waiting => None,
            Cached::Gone => {
                self.cached_part_from_members(rid, r, part);
                None
            }
        }
    }

    /// Drop entry `id` once a reader took its last byte and nobody waits on it.
    fn release_if_taken(&mut self, id: u64) {
        if let Some(i) = self.readahead.index(id) {
            let e = &self.readahead.entries[i];
            if e.taken >= e.end() && e.waiters.is_empty() {
                self.readahead.remove(i);
            }
        }
    }

    /// A cached part whose entry will not serve it: read its bytes from the members as new
    /// parts (the usual error handling applies to them), and finish the cached part.
    fn cached_part_from_members(&mut self, rid: RequestId, r: &mut ReadOp, part: usize) {
        let ReadPart::Cached { logical, len, .. } = r.parts[part] else { unreachable!("a cached read part") };
        let first = r.parts.len();
        for run in self.geometry.runs(logical, len) {
            let mut unit = CopyUnit::new(run.copies, run.len, Vec::new());
            unit.first = self.choose_copy(&unit.copies, unit.len);
            r.parts.push(ReadPart::Copies { logical: run.logical, unit });
        }
        r.remaining += r.parts.len() - first;
        for piece in first..r.parts.len() {
            let step = self.start_read_part(rid, r, piece);
            r.settle(step);
        }
        r.settle(Some(Ok(())));
    }

    /// A read-ahead member read completed: keep its bytes (unless they went stale or did not
    /// come), and serve the parts waiting for them.
    pub(super) fn readahead_io_done(&mut self, tag: IoTag, outcome: Outcome) {
        let id = tag.part as u64;
        let Some(i) = self.readahead.index(id) else { return };
        let e = &mut self.readahead.entries[i];
        let waiters = std::mem::take(&mut e.waiters);
        match outcome {
            Outcome::Data(data) if !e.stale => e.data = Some(data.into()),
            _ => self.readahead.remove(i),
        }
        for (rid, part) in waiters {
            let Some(mut op) = self.ops.remove(&rid) else { continue };
            let OpKind::Read(r) = &mut op.kind else { unreachable!("only reads wait on read-ahead") };
            match self.take_cached(rid, r, part, false) {
                Cached::Served => r.settle(Some(Ok(()))),
                Cached::Waiting => unreachable!("arrived or gone"),
                Cached::Gone => self.cached_part_from_members(rid, r, part),
            }
            if r.remaining == 0 {
                self.finish(rid, op);
            } else {
                self.ops.insert(rid, op);
            }
        }
        self.release_if_taken(id);
    }
}
