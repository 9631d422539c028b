//! Inline reads (and, on linear and raid0, writes): small requests answered on the thread that
//! submits them, without the engine thread or a member I/O thread.
//!
//! Why: a 4 KiB read that crosses the client's thread, the engine thread and a member I/O
//! thread and back spends most of its time in those hand-offs (about a quarter of the samples
//! of 4 KiB random reads in `perf`, plus the channel and allocation work around them). md does
//! not hand such reads on either: raid0 and linear map a bio in the submitter's context and
//! pass it straight down, and raid5 sends a read inside one chunk straight to its member,
//! around the stripe cache (`chunk_aligned_read`), while the array is not degraded. nbdkit's
//! file plugin answers each read with one `pread` on the thread that read the request.
//!
//! A read is answered inline when all of this holds, and goes to the engine otherwise, exactly
//! as before (trying inline first changes nothing that the engine then sees):
//! - no slot is missing, faulty or recovering;
//! - on mirrors (raid1, raid10), no resync is owed: until one has run, copies may disagree, and
//!   md reads the first copy only (as the engine does then). Otherwise a read of cached data
//!   moves no disk head, so it has no copy to choose: each piece comes from the first copy, in
//!   md's order, whose pages hold it ([`Geometry::runs`]), and read balancing is left to the
//!   reads that reach the disks. Copies are asked whether they hold the bytes
//!   ([`MemberDevice::read_if_cached`]), which starts no device read when they do not: Linux
//!   starts reading in the pages an `RWF_NOWAIT` read misses, so trying each copy that way cost
//!   a 4-way mirror four device reads per cache miss where the read policy wanted one (and a
//!   third of raid0's 4 KiB random reads from files not in memory). While reads keep
//!   finding their data, the first copy is read straight away ([`PROBE_AFTER_MISS`]). Linear,
//!   raid0 and raid4/5/6 keep one copy of every byte ([`Geometry::each_data_piece`]), and the
//!   read-in a miss starts there is the read the engine makes next;
//! - the read is at most [`ServiceConfig::inline_max`] bytes: larger reads gain
//!   more from the member I/O threads copying in parallel than they lose in hand-offs;
//! - every member it touches can answer without waiting for a device
//!   ([`MemberDevice::read_now`]: a page-cache hit, a file on tmpfs). A miss, a short read
//!   or an error sends the whole read to the engine, which does the error handling.
//!
//! Two rules keep inline reads from returning stale data:
//! - Members whose writes go to an `O_DIRECT` descriptor (the io_uring backend on a file system
//!   that allows it) are never read inline: a buffered read that races a direct write can leave
//!   old data in the page cache (see `uring.rs`).
//! - The engine thread turns inline reads off, and waits for those in flight to finish (the
//!   write side of a lock every inline read holds for reading), before it answers any request
//!   after a slot leaves the in-sync state. So once a client has seen a write complete, no
//!   inline read can reach a member that missed it (one whose write failed is failed out of
//!   the array). It turns them on again when the array is whole.
//!
//!
//! Writes on linear and raid0 are answered inline under the same conditions, with
//! [`MemberDevice::write_now`] (a file on tmpfs; file systems that take buffered `RWF_NOWAIT`
//! writes), unless they ask for FUA. Those levels have nothing to keep consistent between
//! members: no parity, no copies, no write-intent bitmap, and md never marks them dirty (its
//! raid0 and linear never call `md_write_start`, the call that does, and `md_allow_write`
//! returns at once for a personality without `sync_request`), so neither does the service. A member that refuses or fails sends the whole
//! write to the engine, which writes it again and handles the error. A flush covers inline
//! writes as any others: they completed before it was submitted, and it syncs every member.
//! The engine thread takes the lock for writing before its final flush at stop, so every
//! inline write is on the members before they are flushed and marked clean.
//!
//! [`ServiceConfig::inline_max`]: super::ServiceConfig::inline_max
//! [`MemberDevice::write_now`]: crate::member::MemberDevice::write_now
//! [`MemberDevice::read_now`]: crate::member::MemberDevice::read_now
//! [`MemberDevice::read_if_cached`]: crate::member::MemberDevice::read_if_cached

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use uraid_engine::geometry::Geometry;
use uraid_engine::PoolBuf;

use crate::splice::{pages_spanned, PipePool, PipedRead, PIPE_BYTES, PIPE_SLOTS};
use crate::target::MemberTarget;

/// How many mirrored inline reads after one that found no copy in memory ask every copy with
/// [`MemberDevice::read_if_cached`], which starts no device read on a miss but costs a
/// `cachestat(2)` call before each read of a page-cache file (about half a 4 KiB `preadv2` of
/// cached data more). While reads keep finding their data, the first copy is read with
/// [`MemberDevice::read_now`] alone, and a miss there costs at most one read-in the read policy
/// may not use; then the next reads probe again. 64 probes cost some 100 µs of system calls,
/// about what that one wasted disk read costs.
///
/// [`MemberDevice::read_if_cached`]: crate::member::MemberDevice::read_if_cached
/// [`MemberDevice::read_now`]: crate::member::MemberDevice::read_now
const PROBE_AFTER_MISS: u32 = 64;

/// What inline reads use while they are on: the layout and the members, as the engine thread
/// last saw them whole.
pub(super) struct InlineMap {
    geometry: Geometry,
    size: u64,
    /// Per slot, the member if it may be used inline.
    members: Vec<Option<MemberTarget>>,
    /// Whether writes may be done inline too (linear and raid0, writable).
    writes: bool,
}

impl InlineMap {
    pub(super) fn new(geometry: Geometry, size: u64, members: Vec<Option<MemberTarget>>, writes: bool) -> InlineMap {
        InlineMap { geometry, size, members, writes }
    }

    /// `slot`'s member, if it may be used inline for `len` bytes at `at` of its data.
    fn member(&self, slot: usize, at: u64, len: usize) -> Option<&MemberTarget> {
        let m = self.members.get(slot)?.as_ref()?;
        at.checked_add(len as u64).is_some_and(|end| end <= m.data_bytes).then_some(m)
    }

    /// `piece` read from `at` of `slot`'s data, if that member may be used inline and has it in
    /// memory. On a miss the member may start reading it in: the engine reads it from there next.
    fn read_now(&self, slot: usize, at: u64, piece: &mut [std::mem::MaybeUninit<u8>]) -> bool {
        self.member(slot, at, piece.len()).is_some_and(|m| matches!(m.dev.read_now(m.base + at, piece), Ok(true)))
    }

    /// As [`Self::read_now`] for one copy of mirrored data: a miss starts no device read, since
    /// the read policy, not the order copies are tried in, decides which copy the engine reads.
    fn read_copy_if_cached(&self, slot: usize, at: u64, piece: &mut [std::mem::MaybeUninit<u8>]) -> bool {
        self.member(slot, at, piece.len()).is_some_and(|m| matches!(m.dev.read_if_cached(m.base + at, piece), Ok(true)))
    }

    /// The pipe slots `len` bytes at `at` of `slot`'s data take when spliced (they depend on
    /// where the bytes sit in the member's pages).
    fn slots(&self, slot: usize, at: u64, len: u64) -> u64 {
        let base = self.members.get(slot).and_then(|m| m.as_ref()).map_or(0, |m| m.base);
        pages_spanned(base + at, len)
    }

    /// `len` bytes from `at` of `slot`'s data spliced into `pipe`: `Some(true)` done,
    /// `Some(false)` not possible without waiting (nothing was put in the pipe), `None` failed
    /// part way (the pipe may hold some of the bytes).
    fn splice_now(&self, slot: usize, at: u64, len: u64, pipe: BorrowedFd<'_>) -> Option<bool> {
        let Some(m) = self.member(slot, at, len as usize) else { return Some(false) };
        m.dev.splice_now(m.base + at, len as usize, pipe).ok()
    }

    /// `piece` written at `at` of `slot`'s data, if that member may be used inline and takes it
    /// without waiting.
    fn write_now(&self, slot: usize, at: u64, piece: &[u8]) -> bool {
        self.member(slot, at, piece.len()).is_some_and(|m| matches!(m.dev.write_now(m.base + at, piece), Ok(true)))
    }
}

/// Shared by the service's handles (which read and write through it) and its engine thread
/// (which turns it on and off).
pub(super) struct InlineIo {
    map: RwLock<Option<InlineMap>>,
    max: u64,
    /// Reads and writes answered inline, for the stop report; `spliced` of the reads as pipes.
    reads: AtomicU64,
    writes: AtomicU64,
    spliced: AtomicU64,
    /// Mirrored reads left that ask every copy with `read_if_cached` (see [`PROBE_AFTER_MISS`]);
    /// at zero the first copy is read with `read_now`.
    probing: AtomicU32,
    pipes: Arc<PipePool>,
}

impl InlineIo {
    /// Off until the engine thread turns it on; requests of at most `max` bytes.
    pub(super) fn new(max: u64) -> InlineIo {
        InlineIo {
            map: RwLock::new(None),
            max,
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            spliced: AtomicU64::new(0),
            // Nothing is known of the cache yet.
            probing: AtomicU32::new(PROBE_AFTER_MISS),
            pipes: Arc::new(PipePool::default()),
        }
    }

    /// Whether anything is ever tried inline.
    pub(super) fn enabled(&self) -> bool {
        self.max > 0
    }

    /// Turn inline requests on with `map`, or off with `None`. Turning them off waits for the
    /// inline requests in flight to finish.
    pub(super) fn set(&self, map: Option<InlineMap>) {
        *self.map.write().unwrap_or_else(|e| e.into_inner()) = map;
    }

    /// Reads and writes answered inline so far, and of the reads those answered as pipes.
    pub(super) fn served(&self) -> (u64, u64, u64) {
        (self.reads.load(Ordering::Relaxed), self.writes.load(Ordering::Relaxed), self.spliced.load(Ordering::Relaxed))
    }

    /// `[offset, offset+len)` read inline, or `None` to send the read to the engine.
    pub(super) fn try_read(&self, offset: u64, len: u64) -> Option<Bytes> {
        if len == 0 || len > self.max {
            return None;
        }
        // A poisoned lock means a panic while it was held for writing: leave reads to the engine.
        let guard = self.map.read().ok()?;
        let map = guard.as_ref()?;
        if offset.checked_add(len)? > map.size {
            return None;
        }
        let len = usize::try_from(len).ok()?;
        let mut buf = PoolBuf::new(len);
        let room = buf.spare(len);
        let mut filled = 0usize;
        let mut ok = true;
        let single_copy = map.geometry.each_data_piece(offset, len as u64, |slot, at, n| {
            if !ok {
                return;
            }
            let piece = &mut room[filled..filled + n as usize];
            filled += n as usize;
            ok = map.read_now(slot, at, piece);
        });
        if !single_copy {
            // Mirrors: each run from the first copy (in md's order) that has it in memory, so
            // one copy's pages serve the reads that keep hitting the cache.
            let probing = self.probing.load(Ordering::Relaxed) > 0;
            for run in map.geometry.runs(offset, len as u64) {
                let piece = &mut room[filled..filled + run.len as usize];
                filled += run.len as usize;
                let found = run.copies.iter().enumerate().any(|(i, &(slot, at))| {
                    if i == 0 && !probing {
                        map.read_now(slot, at, piece)
                    } else {
                        map.read_copy_if_cached(slot, at, piece)
                    }
                });
                if !found {
                    ok = false;
                    break;
                }
            }
            // Approximate under concurrency, which costs at most a few reads in the wrong mode.
            if !ok {
                self.probing.store(PROBE_AFTER_MISS, Ordering::Relaxed);
            } else if probing {
                self.probing.store(self.probing.load(Ordering::Relaxed).saturating_sub(1), Ordering::Relaxed);
            }
        }
        if !ok || filled != len {
            return None;
        }
        // SAFETY: every piece of the read wrote its bytes, and the pieces cover the `len` bytes
        // back to back (`filled == len`).
        unsafe { buf.set_len(len) };
        drop(guard);
        self.reads.fetch_add(1, Ordering::Relaxed);
        Some(buf.into_bytes())
    }

    /// `[offset, offset+len)` read inline into a pipe of page references (see
    /// [`crate::splice`]), or `None` to read it another way. The same rules as [`Self::try_read`]
    /// decide, except the size: as nothing is copied, a read of up to a pipe's
    /// [`PIPE_BYTES`] is cheaper here than with the member I/O threads, and `max` only turns
    /// this on or off.
    pub(super) fn try_splice(&self, offset: u64, len: u64) -> Option<PipedRead> {
        if len == 0 || len > PIPE_BYTES as u64 || !self.enabled() {
            return None;
        }
        let guard = self.map.read().ok()?;
        let map = guard.as_ref()?;
        if offset.checked_add(len)? > map.size {
            return None;
        }
        // A read the pipe cannot hold is found out before anything is spliced.
        let mut slots = 0;
        let single_copy = map.geometry.each_data_piece(offset, len, |slot, at, n| slots += map.slots(slot, at, n));
        let runs = if single_copy { Default::default() } else { map.geometry.runs(offset, len) };
        for run in &runs {
            slots += run.copies.iter().map(|&(slot, at)| map.slots(slot, at, run.len)).max().unwrap_or(0);
        }
        if slots > PIPE_SLOTS {
            return None;
        }
        let pipe = self.pipes.take().ok()?;
        // Bytes put in the pipe, and whether a piece would have waited (`Some(false)`) or
        // failed part way (`None`).
        let mut filled = 0u64;
        let mut stop = Some(true);
        map.geometry.each_data_piece(offset, len, |slot, at, n| {
            if stop == Some(true) {
                stop = map.splice_now(slot, at, n, pipe.write_end());
                filled += if stop == Some(true) { n } else { 0 };
            }
        });
        for run in &runs {
            // Each run from the first copy that has it in memory (see `try_read`).
            stop = Some(false);
            for &(slot, at) in &run.copies {
                stop = map.splice_now(slot, at, run.len, pipe.write_end());
                if stop != Some(false) {
                    break;
                }
            }
            if stop != Some(true) {
                break;
            }
            filled += run.len;
        }
        drop(guard);
        if stop != Some(true) || filled != len {
            // A pipe that holds part of the read is closed rather than drained.
            if filled == 0 && stop == Some(false) {
                self.pipes.give_back(pipe);
            }
            return None;
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.spliced.fetch_add(1, Ordering::Relaxed);
        Some(PipedRead::new(pipe, len as usize, Arc::clone(&self.pipes)))
    }

    /// Write `data` at `offset` inline; false to send the write to the engine (which writes all
    /// of it, whatever was written here).
    pub(super) fn try_write(&self, offset: u64, data: &Bytes) -> bool {
        let len = data.len() as u64;
        if len == 0 || len > self.max.min(super::INLINE_WRITE_MAX) {
            return false;
        }
        let Ok(guard) = self.map.read() else { return false };
        let Some(map) = guard.as_ref().filter(|m| m.writes) else { return false };
        if offset.checked_add(len).is_none_or(|end| end > map.size) {
            return false;
        }
        let mut done = 0usize;
        let mut ok = true;
        map.geometry.each_data_piece(offset, len, |slot, at, n| {
            if !ok {
                return;
            }
            let piece = &data[done..done + n as usize];
            done += n as usize;
            ok = map.write_now(slot, at, piece);
        });
        drop(guard);
        if ok && done == data.len() {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        ok && done == data.len()
    }
}
