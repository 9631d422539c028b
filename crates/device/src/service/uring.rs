//! Member I/O through io_uring, driven by the engine thread itself.
//!
//! Each member has a ring of its own (`MemberRing`); the engine thread puts the engine's member
//! I/O in it, submits, and reaps the completions, with no thread in between. Reads of pages the
//! page cache holds complete while they are submitted, so a request can go from client to member
//! and back without waking any other thread. Every completion also signals the service's
//! notifier, an eventfd registered with every ring, on which the engine thread sleeps when it
//! has nothing else to do, so one that comes later (the device was slow) wakes it.
//!
//! Why a ring per member rather than one for all: a member's state (its descriptors, bounce
//! buffers, the I/Os waiting on a page conflict) stays in one place, and a member removed while
//! serving takes its ring with it. Submitting to four rings costs four system calls where one
//! would do; the engine submits once per batch of requests, so this is a few per batch.
//!
//! A ring keeps up to `depth` member I/Os in flight and queues the rest. Reads and writes of
//! whole pages (offset and length aligned to the page size and to the device's direct I/O
//! alignment) go to an `O_DIRECT` descriptor when the file system allows one; the rest go through
//! the page cache.
//!
//! Mixing the two on one file needs care: a direct write drops the pages it covers from the
//! page cache afterwards, and if a buffered write dirtied one of them meanwhile, the kernel can
//! neither drop it nor keep it right (stale data may be written back later; it records an I/O
//! error that the next `fsync` reports, and logs "Page cache invalidation failure on direct
//! I/O"). A buffered read racing a direct write can likewise cache the old data. So an I/O never
//! runs while one of the other kind is in flight on any of the same pages: it waits, in order,
//! until they are done (see `MemberRing::blocked`). Only I/Os that share a page wait, and
//! since direct I/O covers whole pages, only I/Os that overlap in bytes can (the engine issues
//! few). Where the engine's buffer (a read's new `Vec`, a write's single piece) satisfies the
//! file system's memory alignment it is used as it is; otherwise the data goes through an
//! aligned bounce buffer from a small pool reused across I/Os (one copy per direct I/O). A
//! buffered write of several pieces is one vectored write (joined beyond `IOV_MAX` pieces). Buffers are not registered with the ring
//! (`IORING_REGISTER_BUFFERS`): they change with every I/O.

use std::io;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use io_uring::{opcode, types, IoUring};
use uraid_engine::array::{IoId, IoResult, MemberIo, MemberIoError, MemberOp};
use uraid_engine::{IoBuf, PoolBuf};

use super::io_threads::MemberThreads;
use super::notifier::Notifier;
use crate::member::{check_bounds, AlignedBuf, DirectIo, IoHandle};
use crate::target::MemberTarget;

/// Whether this kernel lets us set up a ring (it may be too old, or `kernel.io_uring_disabled`
/// may forbid it); probed once per process.
pub fn available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(|| IoUring::new(2).map(drop).map_err(|e| e.to_string())).clone()
}

/// Set up the ring of one member. Fails (and the caller falls back to I/O threads) only if the
/// ring cannot be set up or told to signal the engine's notifier.
pub(super) fn member_ring(
    slot: usize,
    target: MemberTarget,
    handle: IoHandle,
    depth: usize,
    members: usize,
    notifier: &Arc<Notifier>,
) -> io::Result<MemberRing> {
    let depth = depth.clamp(1, 4096);
    // Each I/O has at most one entry in the ring at a time. Completions get twice as many
    // places by default, so none overflow.
    let ring = IoUring::new((depth as u32).next_power_of_two())?;
    // Every completion signals the notifier, so one that comes later (the device was slow)
    // wakes the engine thread if it sleeps. Not IORING_REGISTER_EVENTFD_ASYNC: it signals only
    // completions posted by the kernel's worker threads, and misses those a buffered read that
    // waited for the page cache posts through the engine thread's own task work; the engine
    // then slept forever.
    ring.submitter().register_eventfd(notifier.fd())?;
    // I/O that cannot complete during submission (every read and write on tmpfs, a buffered
    // read that misses the page cache) runs on the kernel's worker threads for this thread's
    // rings, and there are at most 32 of them by default: fewer than the I/Os the rings keep in
    // flight together, which then wait for a worker. Allow one worker per I/O in flight (raising
    // only; measured on tmpfs: 1.7x the 4 KiB random reads of the default).
    let mut limits = [0u32, 0];
    ring.submitter().register_iowq_max_workers(&mut limits)?;
    let want = u32::try_from(depth * members.max(1)).unwrap_or(u32::MAX);
    if limits[0] < want {
        ring.submitter().register_iowq_max_workers(&mut [want, 0])?;
    }
    Ok(MemberRing {
        ring,
        slots: (0..depth).map(|_| None).collect(),
        free: (0..depth).rev().collect(),
        in_flight: 0,
        waiting: std::collections::VecDeque::new(),
        next_seq: 0,
        // SAFETY: sysconf has no preconditions.
        page: u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096),
        pool: Vec::new(),
        slot,
        target,
        handle,
        queued: std::collections::VecDeque::new(),
        unsubmitted: 0,
        done: Vec::new(),
        notifier: Arc::clone(notifier),
        helper: None,
    })
}

/// Largest piece one read or write entry asks for (the kernel takes a u32 length).
const MAX_PIECE: usize = 1 << 30;
/// Bounce buffers are page aligned and at least this big, so most sizes share buffers.
const MIN_BOUNCE: usize = 4096;
/// Most bytes of free bounce buffers a ring keeps for reuse. One per place in the ring could be
/// 32 buffers of a MiB or more per member, memory held for a burst long past; this keeps enough
/// for the steady state of large direct I/Os (a few in flight per member) and frees the rest.
const POOL_BYTES: usize = 8 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    LogWrite,
    MetadataWrite,
    Flush,
    Discard,
}

impl Kind {
    fn what(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::LogWrite => "writing the partial parity log",
            Kind::MetadataWrite => "writing metadata",
            Kind::Flush => "flush",
            Kind::Discard => "discard",
        }
    }
}

/// The iovecs of a vectored write in flight.
struct IoVecs(Vec<libc::iovec>);

// SAFETY: the pointers only point into the `IoBuf` kept beside them in `Mem::Pieces`, whose
// pieces are immutable shared bytes; moving both to another thread moves nothing they point at.
unsafe impl Send for IoVecs {}

/// The memory an I/O reads into or writes from; it stays here until the kernel is done with it.
enum Mem {
    None,
    /// The buffer a read fills (room for `len`, length set once full).
    Read(PoolBuf),
    /// Write data shared with the engine; the kernel only reads it.
    Shared(Bytes),
    /// A write of several pieces through the page cache, written with one `IORING_OP_WRITEV`;
    /// the iovecs (for what is still to write) live here until the kernel is done with them.
    Pieces(IoBuf, IoVecs),
    /// An aligned bounce buffer from the pool; for a read, with the buffer (room for `len`) the
    /// data is copied into at the end.
    Bounce(AlignedBuf, Option<PoolBuf>),
}

impl Mem {
    fn ptr(&mut self) -> *mut u8 {
        match self {
            Mem::None => std::ptr::null_mut(),
            Mem::Read(v) => v.as_mut_ptr(),
            // Only ever the source of a write: the kernel reads through the pointer.
            Mem::Shared(b) => b.as_ptr() as *mut u8,
            Mem::Pieces(..) => unreachable!("a vectored write has no single buffer"),
            Mem::Bounce(b, _) => b.as_mut_ptr(),
        }
    }
}

/// One member I/O in flight.
struct Op {
    id: IoId,
    kind: Kind,
    /// Order of arrival, for I/Os waiting on a conflict.
    seq: u64,
    /// In the ring (or done with it), rather than waiting for a conflicting I/O to finish.
    submitted: bool,
    /// Goes through the `O_DIRECT` descriptor (decided once, for the whole I/O).
    direct: bool,
    /// Pages touched, `[first, end)`; empty for a flush.
    pages: (u64, u64),
    /// Offset from the member's data start, as the engine gave it (for a discard handed on).
    offset: u64,
    /// Absolute device offset and length.
    at: u64,
    len: usize,
    /// Bytes done so far (reads and writes may complete short and go on).
    done: usize,
    mem: Mem,
}

/// One member's ring, driven by the engine thread itself: it queues the engine's member I/O
/// ([`MemberRing::queue`]), submits ([`MemberRing::submit`]) and reaps ([`MemberRing::reap`]),
/// and the answers wait in [`MemberRing::take_done`] for the engine.
pub(super) struct MemberRing {
    // The ring is dropped first: nothing the kernel could still touch goes before it.
    ring: IoUring,
    /// I/Os in flight, indexed by `user_data`; `free` lists the empty places.
    slots: Vec<Option<Op>>,
    free: Vec<usize>,
    /// I/Os started and not answered yet (submitted or waiting).
    in_flight: usize,
    /// I/Os waiting for a conflicting I/O of the other kind to finish, in arrival order.
    waiting: std::collections::VecDeque<usize>,
    next_seq: u64,
    /// The page size: the unit in which the page cache and direct I/O meet.
    page: u64,
    /// Bounce buffers not in use.
    pool: Vec<AlignedBuf>,
    slot: usize,
    target: MemberTarget,
    handle: IoHandle,
    /// I/Os waiting for a free place in the ring.
    queued: std::collections::VecDeque<MemberIo>,
    /// Entries pushed since the last submission.
    unsubmitted: usize,
    /// Answers not taken by the engine yet.
    done: Vec<(IoId, IoResult)>,
    /// What the discard helper's answers wake.
    notifier: Arc<Notifier>,
    /// A thread for discards the ring cannot do (writing zeros where no hole can be punched),
    /// with at most the ring's depth of them handed to it at once; its answers join the ring's.
    helper: Option<MemberThreads>,
}

impl MemberRing {
    /// Whether writes of whole pages go to an `O_DIRECT` descriptor that bypasses a page cache
    /// (then the member's pages must not be read through that cache behind the ring's back). A
    /// file on tmpfs has no cache apart from itself.
    pub(super) fn writes_direct(&self) -> bool {
        self.handle.direct.is_ok() && !self.handle.in_memory
    }
}

impl Drop for MemberRing {
    fn drop(&mut self) {
        // Only reached with I/O in flight if the engine thread panicked: the kernel may still
        // write into those buffers after the ring goes, so they are leaked rather than freed.
        if self.in_flight > 0 {
            std::mem::forget(std::mem::take(&mut self.slots));
        }
    }
}

impl MemberRing {
    /// Take a member I/O: into the ring if it has room, else queued until it has.
    pub(super) fn queue(&mut self, io: MemberIo) {
        if self.handle.in_memory && matches!(io.op, MemberOp::Flush) {
            // A file on a memory file system: the writes completed before the flush are as
            // durable as it would make them.
            self.done.push((io.id, IoResult::Done));
        } else if self.in_flight < self.slots.len() {
            self.start(io);
        } else {
            self.queued.push_back(io);
        }
    }

    /// Take a member I/O ahead of those waiting for room (the array's metadata, which writes
    /// wait for): into the ring if it has room, else first in line.
    pub(super) fn queue_first(&mut self, io: MemberIo) {
        if self.in_flight < self.slots.len() {
            self.start(io);
        } else {
            self.queued.push_front(io);
        }
    }

    /// Hand what was put in the ring to the kernel, without waiting. Reads of cached pages are
    /// often complete when this returns.
    pub(super) fn submit(&mut self) {
        if self.unsubmitted > 0 {
            self.enter(0);
        }
    }

    /// Handle every completion available and start queued I/Os in the places they free.
    /// Whether anything completed.
    pub(super) fn reap(&mut self) -> bool {
        let mut any = false;
        loop {
            let Some(cqe) = self.ring.completion().next() else { break };
            any = true;
            self.completed(cqe.user_data() as usize, cqe.result());
        }
        while self.in_flight < self.slots.len() {
            let Some(io) = self.queued.pop_front() else { break };
            self.start(io);
        }
        if let Some(helper) = &mut self.helper {
            any |= helper.reap();
            self.done.extend(helper.take_done());
        }
        any
    }

    /// Wait for a completion, if any I/O is in flight.
    #[cfg(test)]
    fn wait(&mut self) {
        if self.in_flight > 0 {
            self.enter(1);
        }
    }

    /// Whether completions are waiting to be reaped.
    pub(super) fn has_completions(&mut self) -> bool {
        !self.done.is_empty()
            || !self.ring.completion().is_empty()
            || self.helper.as_ref().is_some_and(MemberThreads::has_answers)
    }

    /// The answers so far, for the engine.
    pub(super) fn take_done(&mut self) -> std::vec::Drain<'_, (IoId, IoResult)> {
        self.done.drain(..)
    }

    /// Finish everything queued and in flight, waiting for it, discards handed to the helper
    /// too; the answers are in [`MemberRing::take_done`].
    pub(super) fn drain(&mut self) {
        loop {
            self.submit();
            self.reap();
            if self.in_flight == 0 && self.queued.is_empty() {
                break;
            }
            self.enter(1);
        }
        if let Some(helper) = &mut self.helper {
            helper.drain();
            self.done.extend(helper.take_done());
        }
    }

    /// Whether nothing is queued, in flight or with the helper.
    pub(super) fn idle(&self) -> bool {
        self.in_flight == 0 && self.queued.is_empty() && self.helper.as_ref().is_none_or(MemberThreads::idle)
    }

    /// Submit what is in the ring and wait for `want` completions.
    fn enter(&mut self, want: usize) {
        self.unsubmitted = 0;
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => return,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                // The completion queue is full or the kernel is short of memory: reaping
                // completions makes room.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EAGAIN)) => return,
                Err(e) => panic!("io_uring_enter on {}: {e}", self.target.dev.name()),
            }
        }
    }

    fn push(&mut self, entry: &io_uring::squeue::Entry) {
        // SAFETY: every entry points only at memory held in `self.slots` (or at nothing) until
        // its completion is reaped.
        while unsafe { self.ring.submission().push(entry) }.is_err() {
            // Not expected (the ring has room for every I/O in flight), but submitting frees
            // the submission queue.
            self.enter(0);
        }
        self.unsubmitted += 1;
    }

    fn answer(&mut self, id: IoId, result: IoResult) {
        self.done.push((id, result));
    }

    /// Answer an I/O the OS failed: `kind` at byte `at` of the device.
    fn fail(&mut self, id: IoId, kind: Kind, at: u64, error: io::Error) {
        let at = (kind != Kind::Flush).then_some(at);
        self.answer(id, IoResult::Failed(self.target.failure(kind.what(), at, &error)));
    }

    /// Check one I/O and put it in the ring (or answer it at once).
    fn start(&mut self, io: MemberIo) {
        let place = match self.target.placement(&io) {
            Ok(p) => p,
            Err(e) => {
                // A bug upstream: refuse, and fail the member rather than write outside its area.
                eprintln!("uraid: {e}");
                let name = self.target.dev.name();
                self.answer(io.id, IoResult::Failed(MemberIoError::other(format!("internal error on {name}: {e}"))));
                return;
            }
        };
        let (mut kind, len, data) = match io.op {
            MemberOp::Read { len } => (Kind::Read, len as usize, None),
            MemberOp::Write { data } => (Kind::Write, data.len(), Some(data)),
            MemberOp::LogWrite { data } => (Kind::LogWrite, data.len(), Some(IoBuf::from(data))),
            MemberOp::MetadataWrite { data } => (Kind::MetadataWrite, data.len(), Some(IoBuf::from(data))),
            MemberOp::Flush => (Kind::Flush, 0, None),
            MemberOp::Discard { len } => (Kind::Discard, len as usize, None),
        };
        if kind != Kind::Flush {
            if let Err(e) = check_bounds(self.handle.size, place.at, len) {
                return self.fail(io.id, kind, place.at, e);
            }
        }
        if kind == Kind::LogWrite && len == 0 {
            // Nothing to write; still durable as the blocking path makes it (a flush).
            kind = Kind::Flush;
        }
        if len == 0 && kind != Kind::Flush {
            let result = if kind == Kind::Read { IoResult::Read(Bytes::new()) } else { IoResult::Done };
            return self.answer(io.id, result);
        }
        if kind == Kind::Discard && !self.handle.punch_hole {
            return self.hand_on_discard(io.id, io.offset, len as u64);
        }
        let direct = self.direct_for(place.at, len);
        let mem = match (kind, data) {
            (Kind::Read, _) => {
                let mut v = PoolBuf::new(len);
                match direct {
                    Some(d) if !aligned(v.as_mut_ptr() as u64, d.mem_align) => {
                        Mem::Bounce(self.bounce(len, d), Some(v))
                    }
                    _ => Mem::Read(v),
                }
            }
            (_, Some(data)) => {
                let single = data.as_single().map(|s| s.as_ptr() as u64);
                match (direct, single) {
                    (Some(d), first) if first.is_none_or(|at| !aligned(at, d.mem_align)) => {
                        let mut b = self.bounce(len, d);
                        data.copy_to(&mut b.as_mut_slice()[..len]);
                        Mem::Bounce(b, None)
                    }
                    // Beyond IOV_MAX pieces the kernel refuses a vectored write: joined then.
                    (None, None) if data.piece_count() <= crate::member::IOV_MAX => {
                        Mem::Pieces(data, IoVecs(Vec::new()))
                    }
                    _ => Mem::Shared(data.into_bytes()),
                }
            }
            _ => Mem::None,
        };
        let index = self.free.pop().expect("room was checked");
        let pages = if kind == Kind::Flush {
            (0, 0)
        } else {
            (place.at / self.page, (place.at + len as u64).div_ceil(self.page))
        };
        let direct = direct.is_some();
        let seq = self.next_seq;
        self.next_seq += 1;
        let op = Op {
            id: io.id,
            kind,
            seq,
            submitted: false,
            direct,
            pages,
            offset: io.offset,
            at: place.at,
            len,
            done: 0,
            mem,
        };
        self.slots[index] = Some(op);
        self.in_flight += 1;
        if self.blocked(index) {
            self.waiting.push_back(index);
        } else {
            self.submit_op(index);
        }
    }

    /// Whether the I/O at `index` must wait: an I/O of the other kind (direct or buffered) is
    /// in flight on one of its pages, or one that arrived earlier is waiting on one of them.
    fn blocked(&self, index: usize) -> bool {
        let op = self.slots[index].as_ref().expect("op");
        if op.pages.0 == op.pages.1 {
            return false;
        }
        self.slots.iter().enumerate().any(|(j, other)| {
            let Some(o) = other else { return false };
            j != index
                && o.pages.0 < op.pages.1
                && op.pages.0 < o.pages.1
                && if o.submitted { o.direct != op.direct } else { o.seq < op.seq }
        })
    }

    /// Submit the waiting I/Os no longer blocked, in order.
    fn release_waiting(&mut self) {
        let mut n = 0;
        while n < self.waiting.len() {
            let index = self.waiting[n];
            if self.blocked(index) {
                n += 1;
            } else {
                self.waiting.remove(n);
                self.submit_op(index);
            }
        }
    }

    /// The direct descriptor, if there is one and `[at, at+len)` is whole pages that suit it.
    /// Never for a file on a memory file system: there direct I/O is the same copy from the
    /// same pages as buffered I/O, and a bounce buffer would only add a second copy.
    fn direct_for(&self, at: u64, len: usize) -> Option<DirectIo> {
        if self.handle.in_memory {
            return None;
        }
        let d = self.handle.direct.as_ref().ok()?;
        let whole = |v: u64| aligned(v, d.offset_align) && v.is_multiple_of(self.page);
        (whole(at) && whole(len as u64)).then_some(*d)
    }

    fn bounce(&mut self, len: usize, d: DirectIo) -> AlignedBuf {
        // The smallest free buffer that fits, else a new one rounded up to a power of two.
        let best =
            (0..self.pool.len()).filter(|&i| self.pool[i].capacity() >= len).min_by_key(|&i| self.pool[i].capacity());
        match best {
            Some(i) => self.pool.swap_remove(i),
            None => AlignedBuf::new(len.next_power_of_two().max(MIN_BOUNCE), (d.mem_align as usize).max(4096)),
        }
    }

    fn recycle(&mut self, buf: AlignedBuf) {
        // One buffer per place in the ring is as many as can be in use at once.
        let pooled: usize = self.pool.iter().map(AlignedBuf::capacity).sum();
        if self.pool.len() < self.slots.len() && pooled + buf.capacity() <= POOL_BYTES {
            self.pool.push(buf);
        }
    }

    /// Put the (rest of the) I/O at `index` in the ring.
    fn submit_op(&mut self, index: usize) {
        let op = self.slots[index].as_mut().expect("op in flight");
        op.submitted = true;
        let user_data = index as u64;
        let entry = match op.kind {
            Kind::Flush => opcode::Fsync::new(types::Fd(self.handle.fd)).flags(types::FsyncFlags::DATASYNC).build(),
            Kind::Discard => {
                let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
                opcode::Fallocate::new(types::Fd(self.handle.fd), op.len as u64).offset(op.at).mode(mode).build()
            }
            Kind::Write if matches!(op.mem, Mem::Pieces(..)) => {
                let Mem::Pieces(data, iov) = &mut op.mem else { unreachable!("checked above") };
                iov.0 = data
                    .slice(op.done, op.len - op.done)
                    .pieces()
                    .map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() })
                    .collect();
                let fd = types::Fd(self.handle.fd);
                opcode::Writev::new(fd, iov.0.as_ptr(), iov.0.len() as u32).offset(op.at + op.done as u64).build()
            }
            Kind::Read | Kind::Write | Kind::LogWrite | Kind::MetadataWrite => {
                let at = op.at + op.done as u64;
                let piece = (op.len - op.done).min(MAX_PIECE);
                // SAFETY: `done < len` and the memory holds `len` bytes.
                let ptr = unsafe { op.mem.ptr().add(op.done) };
                // The rest of a short direct I/O stays direct where it can; a remainder that is
                // not aligned (a read reaching the end of the file) goes through the page cache.
                let fd = match self.handle.direct.as_ref() {
                    Ok(d)
                        if op.direct
                            && aligned(at, d.offset_align)
                            && aligned(piece as u64, d.offset_align)
                            && aligned(ptr as u64, d.mem_align) =>
                    {
                        d.fd
                    }
                    _ => self.handle.fd,
                };
                if op.kind == Kind::Read {
                    opcode::Read::new(types::Fd(fd), ptr, piece as u32).offset(at).build()
                } else {
                    // A log write is durable when it completes (RWF_DSYNC: md writes its log
                    // with FUA), so it needs no flush of its own.
                    let flags = if op.kind == Kind::LogWrite { libc::RWF_DSYNC } else { 0 };
                    opcode::Write::new(types::Fd(fd), ptr, piece as u32).offset(at).rw_flags(flags).build()
                }
            }
        };
        self.push(&entry.user_data(user_data));
    }

    fn completed(&mut self, index: usize, res: i32) {
        let op = self.slots[index].as_mut().expect("completion of an op in flight");
        if res < 0 {
            let err = -res;
            if op.kind == Kind::Discard && matches!(err, libc::EOPNOTSUPP | libc::EINVAL | libc::ENODEV) {
                // No hole can be punched here: the device's own discard writes zeros instead.
                let (id, offset, len) = (op.id, op.offset, op.len as u64);
                self.finish_failed(index);
                return self.hand_on_discard(id, offset, len);
            }
            let (id, kind, at) = (op.id, op.kind, op.at);
            self.finish_failed(index);
            return self.fail(id, kind, at, io::Error::from_raw_os_error(err));
        }
        if matches!(op.kind, Kind::Read | Kind::Write | Kind::LogWrite | Kind::MetadataWrite) {
            if res == 0 {
                let (id, kind, at, len, done) = (op.id, op.kind, op.at, op.len, op.done);
                self.finish_failed(index);
                let error = if kind == Kind::Read {
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the device ended {done} bytes into a {len}-byte read at byte {at}"),
                    )
                } else {
                    io::Error::new(io::ErrorKind::WriteZero, format!("wrote nothing at byte {}", at + done as u64))
                };
                return self.fail(id, kind, at, error);
            }
            op.done += res as usize;
            if op.done < op.len {
                // Short: go on with the rest.
                return self.submit_op(index);
            }
        }
        let op = self.finish(index);
        let result = match (op.kind, op.mem) {
            (Kind::Read, Mem::Read(mut v)) => {
                // SAFETY: the kernel filled all `len` bytes, which the buffer had room for.
                unsafe { v.set_len(op.len) };
                IoResult::Read(v.into_bytes())
            }
            (Kind::Read, Mem::Bounce(b, Some(mut v))) => {
                v.extend_from_slice(&b.as_slice()[..op.len]);
                self.recycle(b);
                IoResult::Read(v.into_bytes())
            }
            (_, Mem::Bounce(b, _)) => {
                self.recycle(b);
                IoResult::Done
            }
            // The bytes go back to the engine, which reuses the blocks it made.
            (Kind::Write, Mem::Shared(b)) => IoResult::Written(IoBuf::from(b)),
            (Kind::Write, Mem::Pieces(data, _)) => IoResult::Written(data),
            _ => IoResult::Done,
        };
        self.answer(op.id, result);
    }

    /// Take the op at `index` out of flight (its memory is the caller's now).
    fn finish(&mut self, index: usize) -> Op {
        let op = self.slots[index].take().expect("op in flight");
        self.free.push(index);
        self.in_flight -= 1;
        if !self.waiting.is_empty() {
            self.release_waiting();
        }
        op
    }

    /// Take a failed op out of flight, keeping its bounce buffer.
    fn finish_failed(&mut self, index: usize) -> Op {
        let mut op = self.finish(index);
        if let Mem::Bounce(b, _) = std::mem::replace(&mut op.mem, Mem::None) {
            self.recycle(b);
        }
        op
    }

    /// A discard the ring cannot do: the blocking path (`MemberTarget::perform`, which writes
    /// zeros where no hole can be punched) on a helper thread, whose answers [`MemberRing::reap`]
    /// takes.
    fn hand_on_discard(&mut self, id: IoId, offset: u64, len: u64) {
        let io = MemberIo { id, slot: self.slot, offset, op: MemberOp::Discard { len } };
        if self.helper.is_none() {
            let depth = self.slots.len();
            self.helper =
                Some(MemberThreads::spawn(self.slot, "zero", self.target.clone(), 1, depth, 0, &self.notifier));
        }
        self.helper.as_mut().expect("helper started").queue(io);
    }
}

fn aligned(value: u64, align: u32) -> bool {
    value.is_multiple_of(u64::from(align))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Duration;

    use uraid_engine::array::{IoResult, MemberIo, MemberOp};

    use super::super::messages::Msg;
    use super::super::notifier::{Inbox, Notifier};
    use super::MemberRing;
    use crate::member::{FileDevice, MemberDevice};
    use crate::target::MemberTarget;
    use bytes::Bytes;

    const BASE: u64 = 64 << 10;
    const DATA: u64 = 1 << 20;
    const LOG: u64 = 64 << 10;
    const FILE: u64 = BASE + DATA + LOG;

    /// A member file of `FILE` bytes filled with a pattern, in `dir`.
    fn member_file(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, uraid_testkit::noise(7, FILE as usize)).unwrap();
        path
    }

    fn scratch(name: &str) -> PathBuf {
        uraid_testkit::scratch_dir(&format!("uring-{name}"))
    }

    /// A member ring over `path` with its data area at `BASE` and a log area after it, driven
    /// here as the engine thread drives it.
    struct Rig {
        ring: MemberRing,
        answers: HashMap<u64, IoResult>,
        next: u64,
        dev: Arc<FileDevice>,
    }

    impl Rig {
        fn new(path: &Path, writable: bool, depth: usize) -> Rig {
            Rig::with_area(path, writable, depth, DATA)
        }

        fn with_area(path: &Path, writable: bool, depth: usize, data_bytes: u64) -> Rig {
            let dev = Arc::new(FileDevice::open(path, writable).unwrap());
            let handle = dev.io_handle().expect("a file has descriptors");
            if let Err(why) = &handle.direct {
                eprintln!("{}: no O_DIRECT ({why})", path.display());
            }
            let target = MemberTarget {
                dev: Arc::clone(&dev) as Arc<dyn MemberDevice>,
                base: BASE,
                data_bytes,
                log_area: Some((BASE + DATA, LOG)),
            };
            let notifier = Arc::new(Notifier::new().unwrap());
            let ring = super::member_ring(0, target, handle, depth, 1, &notifier).unwrap();
            Rig { ring, answers: HashMap::new(), next: 1, dev }
        }

        fn send(&mut self, offset: u64, op: MemberOp) -> u64 {
            let id = self.next;
            self.next += 1;
            self.ring.queue(MemberIo { id, slot: 0, offset, op });
            id
        }

        /// Drive the ring until `n` answers are in; returns them all.
        fn wait(&mut self, n: usize) -> HashMap<u64, IoResult> {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                self.ring.submit();
                self.ring.reap();
                self.answers.extend(self.ring.take_done());
                if self.answers.len() >= n {
                    return std::mem::take(&mut self.answers);
                }
                assert!(std::time::Instant::now() < deadline, "no answer in time");
                if self.ring.in_flight > 0 {
                    self.ring.wait();
                } else {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }

        fn one(&mut self, offset: u64, op: MemberOp) -> IoResult {
            let id = self.send(offset, op);
            self.wait(1).remove(&id).expect("answer for the I/O sent")
        }

        fn stop(mut self) {
            self.ring.drain();
            assert_eq!(self.ring.take_done().count(), 0, "nothing left unanswered");
        }
    }

    fn failed(r: &IoResult) -> String {
        match r {
            IoResult::Failed(why) => why.to_string(),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    /// Non-overlapping I/Os, half aligned to 4 KiB and half at odd offsets and lengths.
    fn layout() -> Vec<(u64, usize)> {
        (0..128u64)
            .map(|i| {
                let region = i * 8192;
                if i % 2 == 0 {
                    (region, if i % 4 == 0 { 4096 } else { 8192 })
                } else {
                    (region + (i % 7) * 3 + 1, 1000 + (i as usize * 37) % 7000)
                }
            })
            .collect()
    }

    fn write_then_read(dir: &Path) {
        let path = member_file(dir, "member");
        let mut rig = Rig::new(&path, true, 8);
        let ios = layout();
        let mut ids = Vec::new();
        for (n, &(offset, len)) in ios.iter().enumerate() {
            ids.push(rig.send(offset, MemberOp::Write { data: uraid_testkit::noise(100 + n as u64, len).into() }));
        }
        let done = rig.wait(ios.len());
        // A write gives its bytes back unless they went through a bounce buffer (copied).
        assert!(ids.iter().all(|id| matches!(done[id], IoResult::Done | IoResult::Written(_))), "{done:?}");
        let mut reads = Vec::new();
        for &(offset, len) in &ios {
            reads.push(rig.send(offset, MemberOp::Read { len: len as u64 }));
        }
        let got = rig.wait(ios.len());
        let image = std::fs::read(&path).unwrap();
        for (n, (&(offset, len), id)) in ios.iter().zip(&reads).enumerate() {
            let want = uraid_testkit::noise(100 + n as u64, len);
            assert_eq!(got[id], IoResult::Read(want.clone().into()), "read {n} at {offset}+{len}");
            let at = (BASE + offset) as usize;
            assert_eq!(&image[at..at + len], &want[..], "file bytes of write {n}");
        }
        // Untouched bytes around the writes are as they were.
        let original = uraid_testkit::noise(7, FILE as usize);
        assert_eq!(&image[..BASE as usize], &original[..BASE as usize]);
        assert_eq!(&image[(BASE + DATA) as usize..], &original[(BASE + DATA) as usize..]);
        rig.stop();
    }

    #[test]
    fn writes_and_reads_aligned_and_not_many_in_flight() {
        write_then_read(&scratch("rw"));
    }

    /// tmpfs takes O_DIRECT on recent kernels, but the ring goes through its pages directly
    /// (the same copy, without a bounce buffer); the members of a benchmark live there.
    #[test]
    fn writes_and_reads_on_tmpfs() {
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            eprintln!("no /dev/shm: skipped");
            return;
        }
        let dir = shm.join(format!("uraid-uring-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_then_read(&dir);
        let rig = Rig::new(&member_file(&dir, "member"), true, 8);
        assert!(rig.ring.handle.in_memory && rig.ring.direct_for(0, 1 << 20).is_none());
        rig.stop();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Free bounce buffers kept for reuse stay within `POOL_BYTES`, however many places the ring
    /// has.
    #[test]
    fn the_bounce_pool_is_bounded_in_bytes() {
        let mut rig = Rig::new(&member_file(&scratch("pool"), "member"), true, 32);
        for _ in 0..32 {
            rig.ring.recycle(crate::member::AlignedBuf::new(1 << 20, 4096));
        }
        let pooled: usize = rig.ring.pool.iter().map(crate::member::AlignedBuf::capacity).sum();
        assert!((super::POOL_BYTES - (1 << 20)..=super::POOL_BYTES).contains(&pooled), "{pooled}");
        rig.stop();
    }

    #[test]
    fn read_past_the_device_end_is_an_error() {
        let path = member_file(&scratch("short"), "member");
        // A data area said to reach past the file's end: refused before any I/O.
        let mut rig = Rig::with_area(&path, true, 4, DATA + LOG + 8192);
        let r = rig.one(DATA + LOG - 4096, MemberOp::Read { len: 8192 });
        assert!(failed(&r).contains("beyond the device end"), "{r:?}");
        // A file cut short after it was opened: the read comes back short, and is not zero
        // filled.
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(BASE + 4096 + 100).unwrap();
        let r = rig.one(4096, MemberOp::Read { len: 4096 });
        assert!(failed(&r).contains("read"), "{r:?}");
        let r = rig.one(0, MemberOp::Read { len: 4096 });
        assert!(matches!(r, IoResult::Read(ref d) if d.len() == 4096), "{r:?}");
        rig.stop();
    }

    #[test]
    fn flush_and_log_write() {
        let path = member_file(&scratch("log"), "member");
        let mut rig = Rig::new(&path, true, 4);
        assert!(matches!(
            rig.one(0, MemberOp::Write { data: vec![1; 4096].into() }),
            IoResult::Done | IoResult::Written(_)
        ));
        assert_eq!(rig.one(0, MemberOp::Flush), IoResult::Done);
        let entry = uraid_testkit::noise(9, 4096 + 512);
        assert_eq!(rig.one(8192, MemberOp::LogWrite { data: entry.clone() }), IoResult::Done);
        let unaligned = uraid_testkit::noise(10, 300);
        assert_eq!(rig.one(LOG - 300, MemberOp::LogWrite { data: unaligned.clone() }), IoResult::Done);
        let image = std::fs::read(&path).unwrap();
        let log = (BASE + DATA) as usize;
        assert_eq!(&image[log + 8192..log + 8192 + entry.len()], &entry[..]);
        assert_eq!(&image[log + LOG as usize - 300..], &unaligned[..]);
        assert_eq!(&image[BASE as usize..BASE as usize + 4096], &[1; 4096][..]);
        // Outside the log area: refused, nothing written.
        let r = rig.one(LOG - 100, MemberOp::LogWrite { data: vec![0xee; 200] });
        assert!(failed(&r).contains("outside the log area"), "{r:?}");
        assert_eq!(std::fs::read(&path).unwrap(), image);
        rig.stop();
    }

    #[test]
    fn io_outside_the_data_area_is_refused() {
        let path = member_file(&scratch("outside"), "member");
        let before = std::fs::read(&path).unwrap();
        let mut rig = Rig::new(&path, true, 4);
        let r = rig.one(DATA - 4096, MemberOp::Write { data: vec![0xee; 8192].into() });
        assert!(failed(&r).contains("outside the data area"), "{r:?}");
        let r = rig.one(u64::MAX - 10, MemberOp::Discard { len: 100 });
        assert!(failed(&r).contains("outside the data area"), "{r:?}");
        rig.stop();
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn write_to_a_read_only_member_fails() {
        let path = member_file(&scratch("ro"), "member");
        let mut rig = Rig::new(&path, false, 4);
        for (offset, len) in [(0, 4096), (5, 100)] {
            let r = rig.one(offset, MemberOp::Write { data: vec![3; len].into() });
            let why = failed(&r);
            assert!(why.starts_with(&format!("{}: write at byte {}: ", rig.dev.name(), BASE + offset)), "{why}");
            assert!(why.contains("Bad file descriptor"), "{why}");
            let IoResult::Failed(e) = &r else { unreachable!() };
            assert_eq!(e.errno(), Some(libc::EBADF), "{e:?}");
        }
        // The failure of one I/O does not stop the next.
        assert!(matches!(rig.one(0, MemberOp::Read { len: 4096 }), IoResult::Read(_)));
        rig.stop();
    }

    #[test]
    fn discard_reads_back_zeros() {
        let path = member_file(&scratch("discard"), "member");
        let mut rig = Rig::new(&path, true, 4);
        assert_eq!(rig.one(4096, MemberOp::Discard { len: 3 * 4096 }), IoResult::Done);
        assert_eq!(rig.one(100, MemberOp::Discard { len: 1000 }), IoResult::Done);
        assert_eq!(rig.one(0, MemberOp::Discard { len: 0 }), IoResult::Done);
        let r = rig.one(0, MemberOp::Read { len: 4 * 4096 });
        let IoResult::Read(d) = r else { panic!("{r:?}") };
        let original = uraid_testkit::noise(7, FILE as usize);
        assert_eq!(&d[..100], &original[BASE as usize..BASE as usize + 100]);
        assert!(d[100..1100].iter().all(|&b| b == 0));
        assert!(d[4096..].iter().all(|&b| b == 0));
        assert_eq!(&d[1100..4096], &original[BASE as usize + 1100..BASE as usize + 4096]);
        rig.stop();
    }

    /// Closing the queue with I/O in flight and queued: every I/O is answered, then the thread
    /// ends.
    #[test]
    fn draining_answers_everything_queued() {
        let path = member_file(&scratch("close"), "member");
        let mut rig = Rig::new(&path, true, 2);
        let mut ids = Vec::new();
        for i in 0..64u64 {
            ids.push(rig.send(i * 4096, MemberOp::Write { data: vec![i as u8; 4096].into() }));
            ids.push(rig.send(i * 4096 + 1, MemberOp::Read { len: 10 }));
        }
        ids.push(rig.send(0, MemberOp::Flush));
        rig.ring.drain();
        let mut answered: Vec<u64> = rig.ring.take_done().map(|(id, _)| id).collect();
        answered.sort_unstable();
        assert_eq!(answered, ids);
    }

    /// Writes of several pieces go out vectored (and joined beyond IOV_MAX pieces); either way
    /// the bytes land in order.
    #[test]
    fn writes_of_several_pieces() {
        let path = member_file(&scratch("pieces"), "member");
        let mut rig = Rig::new(&path, true, 4);
        for (at, count) in [(5u64, 3u32), (70_001, 1500)] {
            let mut data = uraid_engine::IoBuf::new();
            let mut expect = Vec::new();
            for i in 0..count {
                let piece = vec![(i % 253) as u8 ^ 0x5a; 1 + (i as usize * 13) % 40];
                expect.extend_from_slice(&piece);
                data.push(Bytes::from(piece));
            }
            match rig.one(at, MemberOp::Write { data }) {
                IoResult::Written(back) => assert_eq!(back.to_vec(), expect, "the bytes handed back"),
                other => assert_eq!(other, IoResult::Done),
            }
            let IoResult::Read(got) = rig.one(at, MemberOp::Read { len: expect.len() as u64 }) else {
                panic!("read failed")
            };
            assert_eq!(got, expect, "{count} pieces at {at}");
        }
        rig.stop();
    }

    /// Direct and buffered writes sharing pages at once (overlapping client writes): none runs
    /// while one of the other kind is in flight on its pages, so the page cache stays right and
    /// the flush after them does not report an I/O error.
    #[test]
    fn direct_and_buffered_io_on_the_same_pages() {
        let path = member_file(&scratch("mixed"), "member");
        let mut rig = Rig::new(&path, true, 32);
        for round in 0..20u8 {
            let mut ids = Vec::new();
            for page in 0..64u64 {
                let at = page * 4096;
                ids.push(rig.send(at, MemberOp::Write { data: vec![round; 8192].into() }));
                ids.push(rig.send(at + 100, MemberOp::Write { data: vec![round.wrapping_add(100); 10].into() }));
                ids.push(rig.send(at + 7, MemberOp::Read { len: 5000 }));
            }
            let done = rig.wait(ids.len());
            assert!(done.values().all(|r| !matches!(r, IoResult::Failed(_))), "{done:?}");
            assert_eq!(rig.one(0, MemberOp::Flush), IoResult::Done, "round {round}");
        }
        // Every page ends as one of the two writes left it, and reads agree with the file.
        let IoResult::Read(d) = rig.one(0, MemberOp::Read { len: 65 * 4096 }) else { panic!() };
        let image = std::fs::read(&path).unwrap();
        assert_eq!(&image[BASE as usize..BASE as usize + d.len()], &d[..]);
        assert!(d.iter().all(|&b| b == 19 || b == 119), "unexpected bytes");
        rig.stop();
    }

    /// A sleeping engine thread wakes for a new message without delay, and a busy one costs
    /// the sender no wake-up.
    #[test]
    fn a_sleeping_engine_wakes_for_a_message() {
        let notifier = Arc::new(Notifier::new().unwrap());
        let (inbox, rx) = Inbox::new(Arc::clone(&notifier));
        for _ in 0..20 {
            let sleeper = Arc::clone(&notifier);
            let t = std::thread::spawn(move || {
                sleeper.sleeping.store(true, std::sync::atomic::Ordering::SeqCst);
                let start = std::time::Instant::now();
                sleeper.wait(Some(start + Duration::from_secs(30)));
                sleeper.drain();
                start.elapsed()
            });
            // Send once the sleeper has said it sleeps (a loaded machine may not have run it yet;
            // a message sent before that is rightly not signalled). Whether it is already in
            // `wait` or about to be, the signal wakes it.
            while !notifier.sleeping.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            inbox.send(Msg::Idle(crossbeam_channel::bounded(1).0)).unwrap();
            let slept = t.join().unwrap();
            assert!(slept < Duration::from_secs(10), "woken only by the timeout: {slept:?}");
            assert!(rx.try_recv().is_ok());
        }
        // Not sleeping: the message is queued and the eventfd stays quiet.
        inbox.send(Msg::Idle(crossbeam_channel::bounded(1).0)).unwrap();
        let start = std::time::Instant::now();
        notifier.wait(Some(start + Duration::from_millis(50)));
        assert!(start.elapsed() >= Duration::from_millis(40), "a busy engine was signalled");
    }
}
