//! `ArrayService`: one assembled array served to many clients at once.
//!
//! The NBD server and the FUSE file both sit on this. It runs the sans-I/O engine on one thread
//! (the engine thread) and performs member I/O with one io_uring per member ([`uring`]), or on a
//! small pool of threads per member ([`IoBackend::Threads`], and always for devices without a
//! file descriptor), so many block requests, and many member I/Os per request, are in flight
//! together; requests complete in whatever order their member I/O finishes. Clients submit [`BlockOp`]s from any thread and
//! get the result through a callback, called exactly once, on the engine thread.
//!
//! Superblock bookkeeping follows md:
//! - the array is marked dirty before the first write is let through (the write waits for it);
//! - once no write has been in flight for [`ServiceConfig::clean_delay`], the members are
//!   flushed and the array is marked clean again (md's `safe_mode_delay`), so a crash while idle
//!   needs no resync;
//! - a member whose I/O fails is dropped from the array and the survivors' superblocks record it
//!   at once, so a later assembly leaves the stale member out;
//! - [`ArrayService::stop`] lets every accepted request finish, flushes, and marks clean.
//!
//! Only the engine thread touches the engine and the array's metadata; workers only do member
//! I/O. What is recorded when, and which pass runs, is the array's policy
//! ([`crate::array_policy`]), which the engine thread runs with the time since it started. The
//! metadata's writes and the flushes that must come before them (a clean mark, cleared bitmap
//! bits, a rebuild checkpoint) are done on a metadata I/O thread (`metadata_io`), one step at a
//! time, so the engine thread never waits on them: what depends on them waits in the policy
//! instead.
//!
//! Background passes (md's `sync_action`: resync, check, repair) run on the same engine thread
//! in steps of about a megabyte, interleaved with client requests and throttled as md throttles
//! them (see [`SyncRun`]). A resync starts by itself when an array found dirty is opened writable;
//! once it has covered the whole array, the array may be marked clean again.
//!
//! Where things live: the public requests, answers and reports in `types`, the settings in
//! `config`, the client side in `handle` (`ServiceHandle`) and `array_service` (start and stop),
//! the engine thread's messages in `messages` and its wake-ups in `notifier`, the choice of a
//! member's I/O path in `workers`, member I/O threads in `io_threads` and rings in [`uring`], the
//! metadata I/O thread in `metadata_io`, attempts to reach members lost for being unreachable in
//! `reopen` (when they are due, and re-adding those that answer, in `runner::member_return`),
//! the engine thread itself in `runner` (its policy in
//! [`crate::array_policy`]), and inline requests in `inline`. Every queue between these threads is bounded; why
//! none of them can make a thread wait forever is told in `notifier`.

mod array_service;
mod config;
mod engine_thread;
mod follow_up;
mod handle;
mod inline;
mod io_threads;
mod messages;
mod metadata_io;
mod notifier;
mod reopen;
mod reshaping;
mod runner;
mod types;
pub mod uring;
mod workers;

pub use crate::array_policy::{
    MetadataError, ReturnBackoff, ReturnBackoffChange, ReturnBackoffError, SpeedLimitError, SpeedLimits, SyncAction,
    SyncError, SyncRun,
};
pub use array_service::ArrayService;
pub use config::{IoBackend, ServiceConfig, DEFAULT_INLINE_MAX, INLINE_WRITE_MAX, SERVE_INLINE_MAX};
pub use handle::ServiceHandle;
pub use notifier::INBOX_CAPACITY;
pub use types::{
    ArrayStatus, BlockOp, BlockReply, Done, ManageError, ManageOp, RemoteLimitsChange, RemoteLimitsError,
    ReshapeProgress, ReturningReport, ServiceError, ServiceInfo, SlotReport, StopError, StopReport, SyncProgress,
};

/// Service messages go to standard error, one line each.
fn log(line: &str) {
    eprintln!("uraid: {line}");
}
