//! Inline reads: small reads answered on the thread that submits them, without the engine
//! thread or a member I/O thread.
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
//! - the level keeps one copy of every byte: linear, raid0, raid4/5/6
//!   ([`Geometry::each_data_piece`]); mirrors have a copy to choose, which is the read
//!   policy's job;
//! - no slot is missing, faulty or recovering;
//! - the read is at most [`ServiceConfig::inline_read_max`] bytes: larger reads gain
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
//! [`ServiceConfig::inline_read_max`]: super::ServiceConfig::inline_read_max
//! [`MemberDevice::read_now`]: crate::member::MemberDevice::read_now

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use bytes::Bytes;
use uraid_engine::geometry::Geometry;
use uraid_engine::PoolBuf;

use crate::open_array::MemberTarget;

/// What inline reads use while they are on: the layout and the members, as the engine thread
/// last saw them whole.
pub(super) struct InlineMap {
    geometry: Geometry,
    size: u64,
    /// Per slot, the member if it may be read inline.
    members: Vec<Option<MemberTarget>>,
}

impl InlineMap {
    pub(super) fn new(geometry: Geometry, size: u64, members: Vec<Option<MemberTarget>>) -> InlineMap {
        InlineMap { geometry, size, members }
    }
}

/// Shared by the service's handles (which read) and its engine thread (which turns reads on
/// and off).
pub(super) struct InlineReads {
    map: RwLock<Option<InlineMap>>,
    max: u64,
    /// Reads answered inline, for the stop report.
    served: AtomicU64,
}

impl InlineReads {
    /// Off until the engine thread turns them on; reads of at most `max` bytes.
    pub(super) fn new(max: u64) -> InlineReads {
        InlineReads { map: RwLock::new(None), max, served: AtomicU64::new(0) }
    }

    /// Whether reads of this size are ever tried inline.
    pub(super) fn enabled(&self) -> bool {
        self.max > 0
    }

    /// Turn inline reads on with `map`, or off with `None`. Turning them off waits for the
    /// inline reads in flight to finish.
    pub(super) fn set(&self, map: Option<InlineMap>) {
        *self.map.write().unwrap_or_else(|e| e.into_inner()) = map;
    }

    pub(super) fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
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
        map.geometry.each_data_piece(offset, len as u64, |slot, at, n| {
            if !ok {
                return;
            }
            let piece = &mut room[filled..filled + n as usize];
            filled += n as usize;
            ok = match map.members.get(slot).and_then(Option::as_ref) {
                Some(m) => at.checked_add(n).is_some_and(|end| end <= m.data_bytes)
                    && matches!(m.dev.read_now(m.base + at, piece), Ok(true)),
                None => false,
            };
        });
        if !ok || filled != len {
            return None;
        }
        // SAFETY: every piece of the read wrote its bytes, and the pieces cover the `len` bytes
        // back to back (`filled == len`).
        unsafe { buf.set_len(len) };
        drop(guard);
        self.served.fetch_add(1, Ordering::Relaxed);
        Some(buf.into_bytes())
    }
}
