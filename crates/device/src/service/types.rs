//! The service's public vocabulary: the block requests clients submit and their answers, the
//! errors, the membership changes, and what the service reports about the array (its facts,
//! its status, and what it did by the time it stopped).

use std::sync::{Arc, RwLock};

use bytes::Bytes;
use uraid_engine::{EngineError, IoBuf, SlotState};

use super::SyncAction;
use crate::array_policy::MetadataError;
use crate::error::OpenError;
use crate::open_array::OpenArray;

/// A block request from a client.
#[derive(Debug, Clone)]
pub enum BlockOp {
    Read {
        offset: u64,
        len: u64,
    },
    /// With `fua`, the write is durable on the members when it completes. The data is
    /// passed to the engine as it is (see `Request::Write`).
    Write {
        offset: u64,
        data: Bytes,
        fua: bool,
    },
    /// Every write completed before the flush was submitted is durable when it completes.
    Flush,
    /// Advisory: release space inside the range where that is safe (whole stripes on parity
    /// levels; anything on the others). What the range reads afterwards is unspecified.
    Trim {
        offset: u64,
        len: u64,
    },
    /// The range reads back as zeros afterwards; with `may_deallocate`, by releasing space where
    /// possible (NBD's WRITE_ZEROES without NO_HOLE, fallocate's PUNCH_HOLE).
    Zero {
        offset: u64,
        len: u64,
        may_deallocate: bool,
        fua: bool,
    },
}

impl BlockOp {
    pub(super) fn writes(&self) -> bool {
        matches!(self, BlockOp::Write { .. } | BlockOp::Trim { .. } | BlockOp::Zero { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockReply {
    /// The bytes read, possibly in several pieces (see [`IoBuf`]): write them out vectored.
    Data(IoBuf),
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("array is read-only")]
    ReadOnly,
    #[error("array is stopping")]
    Stopping,
    /// Writing the superblocks failed; the write was not let through.
    #[error("updating the superblocks failed: {0}")]
    Metadata(MetadataError),
    /// The array is being reshaped and the request failed, or the reshape stopped on a failure
    /// (then nothing more is done until the array is stopped).
    #[error("reshape: {0}")]
    Reshape(String),
}

/// Why a membership change was refused or failed
/// ([`ServiceHandle::manage`](super::ServiceHandle::manage)).
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    #[error("array is stopping")]
    Stopping,
    #[error("array is read-only: membership cannot change")]
    ReadOnly,
    /// The device to add could not be opened.
    #[error("{}: {source}", path.display())]
    Open { path: std::path::PathBuf, source: std::io::Error },
    /// The name given is no member's, as given or once canonicalized.
    #[error("{given}: not a member of this array")]
    NotAMember { given: String },
    /// Failing the member would fail the array, and `force` was not given.
    #[error("{member}: failing it would lose data (no redundancy left for its slot); use --force to fail it anyway")]
    WouldLoseData { member: String },
    /// The array refused the change or could not record it.
    #[error(transparent)]
    Array(#[from] OpenError),
    /// A re-add was refused (nothing was written to the device).
    #[error(transparent)]
    Readd(#[from] crate::open_array::ReaddRefusal),
    /// A reshape is running: the membership changes once it has ended.
    #[error("the array is being reshaped: wait for the reshape to end (uraid ctl NAME wait)")]
    Reshaping,
    /// The reshape asked for cannot be done now, or could not start.
    #[error("grow: {0}")]
    Grow(String),
}

/// Why stopping the service did not end with the array marked clean
/// ([`ArrayService::stop`](super::ArrayService::stop)).
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    /// The final flush of the members, or the clean mark after it, failed.
    #[error(transparent)]
    MarkClean(#[from] OpenError),
    #[error("engine thread already ended")]
    Ended,
    /// Recording where the reshape got to failed, or it had stopped on a failure before: the
    /// superblocks hold its last record.
    #[error("reshape: {0}")]
    Reshape(String),
    #[error("engine thread ended without a report")]
    NoReport,
    #[error("engine thread panicked")]
    Panicked,
}

/// Called once with a request's outcome.
pub type Done = Box<dyn FnOnce(Result<BlockReply, ServiceError>) + Send>;

/// Answer requests that will not be served, the array no longer being served.
pub(super) fn answer_stopping(requests: impl IntoIterator<Item = (BlockOp, Done)>) {
    for (_, done) in requests {
        done(Err(ServiceError::Stopping));
    }
}

/// Facts about the served array that front ends advertise.
#[derive(Debug, Clone)]
pub struct ServiceInfo {
    pub size: u64,
    pub read_only: bool,
    /// The layout's kind: md's level ("raid5"), or another format's ("vinum-mirror").
    pub level: String,
    /// Chunk size in bytes (0 where the level has none).
    pub chunk_bytes: u64,
    /// Data bytes in a full stripe, for parity levels: writes of whole stripes need no reads.
    pub stripe_data_bytes: Option<u64>,
    /// What a discard's offset and length must be whole multiples of (whole stripes of every
    /// parity layout in the array); `None` where any whole sectors do.
    pub discard_granularity: Option<u64>,
    /// Every member releases discarded space cheaply (files): advisory trims are passed on.
    /// Otherwise a trim does nothing, since zeroing a block device can mean writing every byte.
    pub cheap_discard: bool,
    /// The engine takes discards at all: not with a partial parity log, where zeroes are
    /// written instead and trims do nothing (md's raid5 likewise ignores discards unless told
    /// the members zero them safely).
    pub discards: bool,
}

/// The served array's facts as they stand: replaced when a change made while serving (a
/// takeover to another level, more copies, more space) opens the array again in its new shape.
/// Each NBD connection takes them at its handshake, as nbdkit's plugins give each connection
/// the size of the moment: a connection made before the change keeps the size it was told,
/// one made after sees the array as it now is.
#[derive(Debug)]
pub(super) struct SharedInfo(RwLock<Arc<ServiceInfo>>);

impl SharedInfo {
    pub(super) fn new(info: Arc<ServiceInfo>) -> SharedInfo {
        SharedInfo(RwLock::new(info))
    }

    pub(super) fn current(&self) -> Arc<ServiceInfo> {
        // A writer cannot panic while holding the lock (it only stores an Arc).
        Arc::clone(&self.0.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub(super) fn publish(&self, info: Arc<ServiceInfo>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = info;
    }
}

impl ServiceInfo {
    /// What front ends are told of `array`, opened to be served.
    pub(super) fn of(array: &OpenArray) -> ServiceInfo {
        let geometry = array.engine().geometry();
        let discards = !array.engine().ppl_enabled();
        ServiceInfo {
            cheap_discard: discards && array.member_targets().iter().flatten().all(|t| t.dev.discard_is_cheap()),
            discards,
            size: array.size(),
            read_only: !array.writable(),
            level: geometry.name().to_string(),
            chunk_bytes: geometry.chunk_bytes(),
            stripe_data_bytes: geometry.stripe_data_bytes(),
            discard_granularity: geometry.discard_granularity(),
        }
    }

    /// What front ends are told of an array while `grow` reshapes it: the size it has meanwhile
    /// (the smaller shape's: a reshape onto fewer members serves the size it shrinks to at
    /// once), the old shape's chunk and stripe; trims are not passed on and zeroing is written.
    pub(super) fn reshaping(grow: &crate::reshape::Grow) -> ServiceInfo {
        let geometry = grow.old_geometry();
        ServiceInfo {
            cheap_discard: false,
            discards: false,
            size: grow.serving_size(),
            read_only: false,
            level: geometry.name().to_string(),
            chunk_bytes: geometry.chunk_bytes(),
            stripe_data_bytes: geometry.stripe_data_bytes(),
            discard_granularity: geometry.discard_granularity(),
        }
    }

    /// The I/O size (a power of two) that avoids read-modify-write and splitting: the full
    /// stripe when that is a power of two, else the chunk; 4 KiB where there are no chunks.
    pub fn preferred_block_size(&self) -> u64 {
        let candidate = match self.stripe_data_bytes {
            Some(w) if w.is_power_of_two() => w,
            _ => self.chunk_bytes,
        };
        if candidate.is_power_of_two() && candidate >= 4096 {
            candidate
        } else {
            4096
        }
    }
}

/// What the service did over its life, reported when it stops.
#[derive(Debug, Clone, Default)]
pub struct StopReport {
    pub requests: u64,
    /// Of `requests`, the reads and writes answered on the submitting thread (see the `inline` module).
    pub inline_reads: u64,
    pub inline_writes: u64,
    /// Of `inline_reads`, those handed over as pipes ([`ServiceHandle::read_spliced`](super::ServiceHandle::read_spliced)).
    pub spliced_reads: u64,
    /// Whether the superblocks say clean at the end. False when the array was opened read-only
    /// over a dirty array, or still needs a resync (found dirty at assembly).
    pub clean: bool,
    /// The array was found dirty at assembly and has not been resynced.
    pub resync_needed: bool,
    /// Members that failed while serving, with the reason.
    pub failed_members: Vec<(String, String)>,
    /// Metadata writes and flushes (superblocks, bitmap, log headers) performed on the members'
    /// own I/O paths, beside their data, and on the metadata thread (for devices that have no
    /// path: spares).
    pub metadata_ios_on_member_paths: u64,
    pub metadata_ios_on_thread: u64,
}

/// One slot as reported by [`ServiceHandle::status`](super::ServiceHandle::status).
#[derive(Debug, Clone)]
pub struct SlotReport {
    pub slot: usize,
    /// The device filling the slot, if any.
    pub device: Option<String>,
    pub state: SlotState,
}

/// A running pass, as /proc/mdstat shows it.
#[derive(Debug, Clone)]
pub struct SyncProgress {
    pub action: SyncAction,
    pub done_bytes: u64,
    pub total_bytes: u64,
    /// Its current speed, over its last few seconds (md's `sync_speed`).
    pub bytes_per_sec: u64,
    pub eta_secs: Option<u64>,
}

/// A running reshape, as /proc/mdstat shows it (`reshape = ...`).
#[derive(Debug, Clone)]
pub struct ReshapeProgress {
    /// Members before and after.
    pub from_disks: u32,
    pub to_disks: u32,
    /// Bytes of the grown array reshaped, of all of it.
    pub done_bytes: u64,
    pub total_bytes: u64,
    /// Over its last few seconds.
    pub bytes_per_sec: u64,
    pub eta_secs: Option<u64>,
}

/// What `uraid ctl status` shows.
#[derive(Debug, Clone)]
pub struct ArrayStatus {
    pub uuid: String,
    /// The layout's kind: md's level ("raid5"), or another format's ("vinum-mirror").
    pub level: String,
    pub size: u64,
    pub chunk_bytes: u64,
    /// md's words for the shape, as /proc/mdstat prints them after the size (`super 1.2 level
    /// 5, 512k chunk, algorithm 2`); `None` for other formats.
    pub md_shape: Option<String>,
    pub slots: Vec<SlotReport>,
    /// Devices kept as spares, by name.
    pub spares: Vec<String>,
    pub read_only: bool,
    /// The superblocks say dirty.
    pub dirty: bool,
    /// Found dirty at assembly and not resynced yet.
    pub needs_resync: bool,
    /// Slots not in sync.
    pub degraded: usize,
    pub sync: Option<SyncProgress>,
    pub reshape: Option<ReshapeProgress>,
    /// Sectors found inconsistent by the last check or repair (md's `mismatch_cnt`).
    pub mismatch_sectors: u64,
    /// The limits background passes keep to (md's `speed_limit_min` / `speed_limit_max`).
    pub speed_limits: super::SpeedLimits,
    /// How the last pass ended, in words (e.g. "check completed: 0 mismatched sectors").
    pub last_sync: Option<String>,
    /// Bytes the last pass went through (read and compared, or rebuilt), bitmap-clean regions
    /// it stepped over not counted.
    pub last_sync_bytes: Option<u64>,
    /// Passes ended since the array started, finished or cut short: a pass that began and
    /// ended between two looks at the status still shows here.
    pub passes_ended: u64,
    pub requests: u64,
    /// Members lost for being unreachable that the array tries to reach again.
    pub returning: Vec<ReturningReport>,
    /// Members the array took back by itself since it started.
    pub readded: u64,
}

impl ArrayStatus {
    /// The status of the array `info` describes, with `uuid`, `md_shape` and `slots` as given,
    /// and nothing going on: no spare, clean, no pass or reshape, no history. Each phase of the
    /// engine thread fills in from here what it knows.
    pub(super) fn of(
        info: &ServiceInfo,
        uuid: String,
        md_shape: Option<String>,
        slots: Vec<SlotReport>,
        speed_limits: super::SpeedLimits,
    ) -> ArrayStatus {
        ArrayStatus {
            uuid,
            level: info.level.clone(),
            size: info.size,
            chunk_bytes: info.chunk_bytes,
            md_shape,
            slots,
            spares: Vec::new(),
            read_only: info.read_only,
            dirty: false,
            needs_resync: false,
            degraded: 0,
            sync: None,
            reshape: None,
            mismatch_sectors: 0,
            speed_limits,
            last_sync: None,
            last_sync_bytes: None,
            passes_ended: 0,
            requests: 0,
            returning: Vec::new(),
            readded: 0,
        }
    }
}

/// A member lost for being unreachable, as the array tries to reach it again.
#[derive(Debug, Clone)]
pub struct ReturningReport {
    pub device: String,
    /// The slot it held.
    pub slot: usize,
    /// Attempts made so far.
    pub attempts: u64,
    /// Until the next attempt (zero while one is out).
    pub next_attempt_in: std::time::Duration,
    /// How the last attempt went: the member could not be reached, or answered and was refused
    /// (why, in words).
    pub last_failure: Option<String>,
    /// The last attempt reached it and it was refused (rather than not reached).
    pub refused: bool,
}

/// Membership changes, as md's `--add`, `--fail` and `--remove`.
#[derive(Debug, Clone)]
pub enum ManageOp {
    /// Add a device: it is rebuilt into a missing or failed slot, or kept as a spare.
    Add(std::path::PathBuf),
    /// Fail a member; refused when that would lose data, unless `force`.
    Fail { member: String, force: bool },
    /// Remove a failed member or a spare.
    Remove(String),
    /// md's `--re-add`: take a former member back into its slot, rebuilt only where the
    /// write-intent bitmap marks; refused when that is not possible.
    ReAdd(std::path::PathBuf),
}

/// A change to the remote limits of members reached over a network (NBD exports): the fields
/// given change, the others stay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoteLimitsChange {
    pub request_timeout: Option<std::time::Duration>,
    pub reconnect_attempts: Option<u32>,
    pub reconnect_budget: Option<std::time::Duration>,
}

impl RemoteLimitsChange {
    pub fn is_empty(&self) -> bool {
        *self == RemoteLimitsChange::default()
    }

    /// `limits` with this change made; a zero timeout is refused (every request would fail).
    pub fn apply(&self, limits: crate::member::RemoteLimits) -> Result<crate::member::RemoteLimits, RemoteLimitsError> {
        if self.request_timeout.is_some_and(|t| t.is_zero()) {
            return Err(RemoteLimitsError::ZeroTimeout);
        }
        Ok(crate::member::RemoteLimits {
            request_timeout: self.request_timeout.unwrap_or(limits.request_timeout),
            reconnect_attempts: self.reconnect_attempts.unwrap_or(limits.reconnect_attempts),
            reconnect_budget: self.reconnect_budget.unwrap_or(limits.reconnect_budget),
        })
    }
}

/// Why remote limits were not changed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteLimitsError {
    #[error("array is stopping")]
    Stopping,
    #[error("the request timeout must be longer than 0")]
    ZeroTimeout,
    #[error(transparent)]
    Member(#[from] ManageError),
    #[error("{0}: not reached over a network, so it has no remote limits")]
    NotRemote(String),
}
