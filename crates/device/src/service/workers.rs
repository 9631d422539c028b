//! How each member's I/O is performed: an io_uring the engine thread drives ([`uring`]), or a
//! small pool of I/O threads fed from a queue (`io_threads`). Either way the engine thread hands
//! I/O over without waiting and collects the answers itself, with the same calls.

use std::sync::Arc;

use uraid_engine::array::{IoId, IoResult, MemberIo};

use super::io_threads::{MemberThreads, ENGINE_IO_MAX};
use super::notifier::Notifier;
use super::{log, uring, IoBackend, ServiceConfig};
use crate::target::MemberTarget;

/// How one member's I/O is performed: by I/O threads, or through a ring the engine thread
/// drives.
pub(super) enum MemberPath {
    Threads(MemberThreads),
    Ring(Box<uring::MemberRing>),
}

/// Set up what performs one member's I/O: a ring where the backend and the device allow it, else
/// I/O threads. Either keeps up to [`ServiceConfig::queue_depth`] I/Os in flight (the threads at
/// least one per thread).
pub(super) fn spawn_member_io(
    slot: usize,
    members: usize,
    target: MemberTarget,
    config: &ServiceConfig,
    notifier: &Arc<Notifier>,
) -> MemberPath {
    let handle = if config.io == IoBackend::Uring { target.dev.io_handle() } else { None };
    if let Some(handle) = handle {
        let name = target.dev.name().to_string();
        if let Err(why) = &handle.direct {
            log(&format!("{name}: O_DIRECT not supported by its file system ({why}); using buffered I/O"));
        }
        match uring::member_ring(slot, target.clone(), handle, config.queue_depth, members, notifier) {
            Ok(ring) => return MemberPath::Ring(Box::new(ring)),
            Err(e) => log(&format!("{name}: setting up io_uring failed ({e}); using I/O threads")),
        }
    }
    let threads = config.workers_per_member.max(1);
    // `--inline-max=0` turns every shortcut off, this one too.
    let now_max = config.inline_max.min(ENGINE_IO_MAX);
    let depth = config.queue_depth.max(threads);
    MemberPath::Threads(MemberThreads::spawn(slot, "io", target, threads, depth, now_max, notifier))
}

impl MemberPath {
    /// Take a member I/O (into the ring, to the threads, or kept until there is room).
    pub(super) fn queue(&mut self, io: MemberIo) {
        match self {
            MemberPath::Threads(t) => t.queue(io),
            MemberPath::Ring(r) => r.queue(io),
        }
    }

    /// Take a member I/O ahead of those waiting for room: the array's metadata, which the
    /// writes parked for their records wait for.
    pub(super) fn queue_first(&mut self, io: MemberIo) {
        match self {
            MemberPath::Threads(t) => t.queue_first(io),
            MemberPath::Ring(r) => r.queue_first(io),
        }
    }

    /// Hand the ring's new entries to the kernel (threads need no such step).
    pub(super) fn submit(&mut self) {
        if let MemberPath::Ring(r) = self {
            r.submit();
        }
    }

    /// Take what completed, and start what waited for room. Whether anything completed.
    pub(super) fn reap(&mut self) -> bool {
        match self {
            MemberPath::Threads(t) => t.reap(),
            MemberPath::Ring(r) => r.reap(),
        }
    }

    /// Whether answers wait to be reaped or taken.
    pub(super) fn has_answers(&mut self) -> bool {
        match self {
            MemberPath::Threads(t) => t.has_answers(),
            MemberPath::Ring(r) => r.has_completions(),
        }
    }

    /// The answers so far, for the engine.
    pub(super) fn take_done(&mut self) -> std::vec::Drain<'_, (IoId, IoResult)> {
        match self {
            MemberPath::Threads(t) => t.take_done(),
            MemberPath::Ring(r) => r.take_done(),
        }
    }

    /// Whether nothing is in flight or waiting (answers may still wait in `take_done`).
    pub(super) fn idle(&self) -> bool {
        match self {
            MemberPath::Threads(t) => t.idle(),
            MemberPath::Ring(r) => r.idle(),
        }
    }

    /// Finish everything in flight and waiting, waiting for it; the answers are in
    /// [`MemberPath::take_done`].
    pub(super) fn drain(&mut self) {
        match self {
            MemberPath::Threads(t) => t.drain(),
            MemberPath::Ring(r) => r.drain(),
        }
    }
}
