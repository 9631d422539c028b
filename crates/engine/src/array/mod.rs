//! `Array`: the sans-I/O engine for one assembled array.
//!
//! A driver feeds it block requests ([`Request`]) and member completions ([`IoResult`]); it emits
//! member I/Os ([`MemberIo`]) and request completions. It never touches the OS, so the same code
//! runs over real files (the synchronous driver in `uraid-device`) and over simulated disks.
//!
//! What it owns:
//! - splitting a logical request into member I/Os as its layout says ([`Geometry`]), as few as it can:
//!   the pieces of a read that one in-sync member holds are read in one I/O when they are
//!   contiguous or at most a chunk apart (the chunk between is read and dropped), and member
//!   writes that continue one another (whole stripes, raid0/linear/mirror runs) go out as one;
//!   an error in a merged read sends its pieces back through the per-piece paths below;
//! - bounding the stripe buffers parity writes hold ([`Array::set_stripe_memory_limit`]);
//! - degraded reads (another mirror, or reconstruction from parity) and the choice between
//!   read-modify-write and reconstruct-write for parity levels, done per stripe as md's
//!   `handle_stripe_dirtying` does: the fewer member reads wins, ties go to reconstruct-write;
//! - member states ([`SlotState`]): in-sync members are read and written; a recovering member (a
//!   spare being rebuilt, md's member short of its `recovery_offset`) is written by every write
//!   but never read, so what recovery already rebuilt stays right and the rest is rewritten by
//!   recovery anyway; [`Request::Recover`] rebuilds it range by range;
//! - failures: a failed write marks its member faulty and the array carries on while redundancy
//!   allows; a failed read does not (md's `fix_read_error` and raid5's read-error path): the
//!   bytes are rebuilt from redundancy, returned, and written back to the member, which stays in
//!   sync if that write succeeds. Mirrors write back whole 4 KiB rows read from one good copy
//!   (md's `fix_read_error` works in whole sectors and pages): copies may disagree after a crash,
//!   and rewriting only the bytes asked for would splice two copies inside a sector;
//! - ordering: a write waits for every earlier request it overlaps (whole stripes for parity
//!   levels, since a stripe's parity covers all of it), so concurrent requests never interleave
//!   inside a stripe;
//! - consistency checks (`Request::Sync`): compare mirrors or recompute parity, count mismatches
//!   like md's `mismatch_cnt` (in 512-byte sectors, per row: 4 KiB, or what the layout says in
//!   [`Layout::row_bytes`](crate::geometry::Layout::row_bytes)), and optionally repair.
//!
//! The code, by responsibility (files of this folder):
//! - `mod.rs`: the [`Array`] itself, its settings, and the request and answer types;
//! - `requests.rs`: accepting requests, the ranges they lock, starting and finishing them in order;
//! - `emit.rs`: member I/Os going out, and what is remembered of each until its result is back;
//! - `completions.rs`: member I/O results coming back, handed to whatever issued the I/O;
//! - `members.rs`: slot states, and how they change (by the driver, or when a member fails);
//! - `rows.rs`, `copy_unit.rs` and `parity.rs`: what the ops below share (4 KiB rows and stripe
//!   rebuilds, runs with copies, parity computation);
//! - `read.rs` and `assembly.rs`: reads; `readahead.rs`: what the `split` policy reads ahead;
//! - `copy_write.rs` and `write_merge.rs`: writes without parity, and merged member writes;
//! - `parity_write.rs` (planning: read-modify-write or reconstruct-write), `stripe_update.rs`
//!   (new parity, then the member writes), `stripe_memory.rs` (the bound on stripe buffers),
//!   `logging.rs` (the partial parity log) and `parity_blocks.rs`: raid4/5/6 writes;
//! - `discard.rs`, `sync.rs` (check and repair) and `recover.rs` (rebuilding members).

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;

use crate::error::EngineError;
use crate::geometry::Geometry;
use crate::idmap::IdMap;
use crate::iobuf::IoBuf;
use crate::read_balance::{Balancer, ReadPolicy};

pub use crate::member_io::{unreachable_kind, IoId, IoResult, MemberIo, MemberIoError, MemberOp};
pub use crate::slot::SlotState;
pub use parity::{compute_parity_into, reconstruct};

mod assembly;
mod completions;
mod copy_unit;
mod copy_write;
mod discard;
mod emit;
mod logging;
mod members;
mod parity;
mod parity_blocks;
mod parity_write;
mod read;
mod readahead;
mod recover;
pub(crate) mod requests;
mod rows;
mod stripe_memory;
mod stripe_update;
mod sync;
mod write_data;
mod write_gather;
mod write_merge;

use emit::Emitted;
use requests::{Locks, Op};
use write_merge::PartWrites;

/// Identifies a submitted request.
pub type RequestId = u64;

/// The granularity of mismatch counting and repair, as md's stripe pages (4 KiB), unless the
/// layout says otherwise ([`Geometry::row_bytes`]).
pub const CHECK_ROW_BYTES: u64 = crate::geometry::DEFAULT_ROW_BYTES;

/// Largest member I/O made by merging the pieces of one request that lie on one member (reads,
/// and writes of whole stripes or of levels without parity): keeps one member buffer bounded.
pub const MAX_MERGE_BYTES: u64 = 8 << 20;

/// Default bound on the bytes of stripe buffers held by parity writes in progress (see
/// [`Array::set_stripe_memory_limit`]).
pub const DEFAULT_STRIPE_MEMORY: u64 = 64 << 20;

/// A block request against the array.
#[derive(Debug, Clone)]
pub enum Request {
    /// Read `len` bytes at logical byte `offset`.
    Read { offset: u64, len: u64 },
    /// Write `data` at logical byte `offset`. `Bytes`, so a caller may hand over a buffer it
    /// shares or pools (`Vec<u8>` converts with `.into()`, without copying).
    Write { offset: u64, data: Bytes },
    /// Make every completed write durable on every member.
    Flush,
    /// Check redundancy over `[offset, offset+len)` (widened to whole stripes, or to whole 4 KiB
    /// rows on mirrors); with `repair`, rewrite parity or copies that disagree (md's `check` /
    /// `repair` / initial resync).
    /// Recovering members are not compared; a repair also writes them the correct bytes.
    Sync { offset: u64, len: u64, repair: bool },
    /// Make `[offset, offset+len)` read back as zeros, deallocating member space where the
    /// members can (TRIM, WRITE_ZEROES, punch-hole). Parity arrays take whole stripes only: a
    /// stripe whose data and parity are all zero is consistent, a part-zeroed one is not (md
    /// discards whole stripes on raid5 for the same reason); callers write zeros at the edges.
    Discard { offset: u64, len: u64 },
    /// Rebuild member bytes `[offset, offset+len)` (from the member's data start, the same range
    /// on every slot) of every slot that is [`SlotState::Recovering`] when the request starts,
    /// from the in-sync members: md's recovery, one window at a time (widened to whole 4 KiB rows
    /// on mirrors). The driver walks the member from 0 to [`Geometry::member_data_bytes`] and
    /// then marks the slot in sync.
    Recover { offset: u64, len: u64 },
}

/// What a finished request returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// The bytes read, in as many pieces as member reads answered them (see [`IoBuf`]).
    Read(IoBuf),
    Written,
    Flushed,
    /// Mismatched sectors found (and repaired, if asked).
    Synced {
        mismatch_sectors: u64,
    },
    /// The recovering slots hold the right bytes over the requested range (unless they failed
    /// meanwhile, which an [`EngineEvent::MemberFailed`] says).
    Recovered,
}

/// Something the driver should know about (and usually record in the superblocks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineEvent {
    MemberFailed {
        slot: usize,
        reason: String,
        /// It failed because it could not be reached (an I/O timed out, or its connection could
        /// not be made again: `MemberIoError::member_unreachable`), not because it answered
        /// with an error or was failed by request: a member on another host may come back.
        unreachable: bool,
    },
    /// A read of `len` bytes at member byte `offset` of `slot` failed; the bytes were rebuilt
    /// from redundancy and written back successfully, so the member stays in sync.
    ReadErrorCorrected { slot: usize, offset: u64, len: u64 },
}

/// How a parity write chooses, stripe by stripe, between reading the old data and parity
/// (read-modify-write) and reading the data it does not overwrite (reconstruct-write), when
/// both are possible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ParityWriteChoice {
    /// md's `handle_stripe_dirtying`: the fewer member reads wins, ties go to
    /// reconstruct-write.
    #[default]
    FewestReads,
    /// RAIDframe's `rf_RaidFiveDagSelect` (`rf_raid5.c`): a read-modify-write (its small-write
    /// DAG) when the stripe's part of the request touches at most half its data units (one on
    /// three or four disks, "I want single-stripe-unit updates to use just one disk"), a
    /// reconstruct-write (its large-write DAG) otherwise.
    StripeUnits,
}

/// The engine for one array.
#[derive(Debug)]
pub struct Array {
    geometry: Geometry,
    slots: Vec<SlotState>,
    /// Per slot, bumped whenever the slot stops holding the device it held (it failed, or it
    /// was emptied or refilled): completions of I/O issued before then are ignored for data
    /// purposes, since they speak of a device the array no longer trusts.
    generation: Vec<u64>,
    next_request: RequestId,
    next_io: IoId,
    ops: IdMap<RequestId, Op>,
    io_owner: IdMap<IoId, Emitted>,
    outbox: VecDeque<MemberIo>,
    finished: VecDeque<(RequestId, Result<Completion, EngineError>)>,
    events: Vec<EngineEvent>,
    /// Requests waiting for a conflicting earlier request, in arrival order.
    waiting: VecDeque<RequestId>,
    /// Requests started and not finished, with their locks.
    running: Vec<(RequestId, Locks)>,
    /// Set while `start_ready` runs, so a request finishing during its own start asks for
    /// another pass instead of re-entering (which would lose track of what is blocked).
    starting: bool,
    rescan: bool,
    /// Parity may be inconsistent (unclean shutdown, resync not done): read-modify-write would
    /// carry old errors into new parity, so only reconstruct-write is used (as md does while
    /// `recovery_cp` is short of the end).
    resync_pending: bool,
    /// Whether a read error is rebuilt from parity while a resync is owed (see
    /// [`Array::set_rebuild_from_unchecked_parity`]).
    rebuild_from_unchecked_parity: bool,
    /// How a parity write chooses between read-modify-write and reconstruct-write.
    parity_write_choice: ParityWriteChoice,
    /// The partial parity log, when writes are logged (see `array/logging.rs`).
    log: Option<logging::PplLog>,
    /// Whether a member failing holds the log (see [`Array::set_log_hold_on_failure`]).
    log_hold_on_failure: bool,
    /// A member failed and its failure is not yet recorded: no log header is written.
    log_held: bool,
    /// Bound on `stripe_memory` (see [`Array::set_stripe_memory_limit`]).
    stripe_memory_limit: u64,
    /// Stripe buffer bytes charged to parity stripe writes in progress.
    stripe_memory: u64,
    stripe_memory_peak: u64,
    /// Parity writes with stripes waiting for memory, oldest first.
    memory_waiters: VecDeque<RequestId>,
    admitting: bool,
    /// While stripes are planned together, their member writes gather here to be merged.
    write_batch: Option<PartWrites>,
    /// Which copy of mirrored data each read goes to (see [`crate::read_balance`]).
    balance: Balancer,
    /// What the `split` read policy read ahead of sequential streams.
    readahead: readahead::ReadAhead,
    /// Blocks for new parity, back from the member writes that carried them.
    parity_blocks: parity_blocks::ParityBlocks,
    /// Writes held while the driver is plugged, and those riding on merged writes.
    gather: write_gather::WriteGather,
}

impl Array {
    /// An engine over `geometry` with the given slot states.
    pub fn new(geometry: Geometry, slots: Vec<SlotState>) -> Result<Array, EngineError> {
        assert_eq!(slots.len(), geometry.raid_disks(), "one state per slot");
        let n = slots.len();
        let balance = Balancer::new(&geometry);
        let array = Array {
            geometry,
            slots,
            generation: vec![0; n],
            next_request: 1,
            next_io: 1,
            ops: IdMap::default(),
            io_owner: IdMap::default(),
            outbox: VecDeque::new(),
            finished: VecDeque::new(),
            events: Vec::new(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            starting: false,
            rescan: false,
            resync_pending: false,
            rebuild_from_unchecked_parity: true,
            parity_write_choice: ParityWriteChoice::FewestReads,
            log: None,
            log_hold_on_failure: false,
            log_held: false,
            stripe_memory_limit: DEFAULT_STRIPE_MEMORY,
            stripe_memory: 0,
            stripe_memory_peak: 0,
            memory_waiters: VecDeque::new(),
            admitting: false,
            write_batch: None,
            balance,
            readahead: readahead::ReadAhead::default(),
            parity_blocks: parity_blocks::ParityBlocks::new(),
            gather: write_gather::WriteGather::default(),
        };
        if !array.readable() {
            return Err(EngineError::ArrayFailed);
        }
        Ok(array)
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub fn size_bytes(&self) -> u64 {
        self.geometry.array_bytes()
    }

    pub fn slot_states(&self) -> &[SlotState] {
        &self.slots
    }

    /// Say whether parity may be inconsistent (see the field's comment).
    /// Mirrors then read md's first copy only (see [`Array::set_read_policy`]), so nothing read
    /// ahead from another copy is kept.
    pub fn set_resync_pending(&mut self, pending: bool) {
        if pending && !self.resync_pending {
            self.readahead_reset();
        }
        self.resync_pending = pending;
    }

    /// Say whether a read error on a parity layout is rebuilt from parity while a resync is
    /// owed (parity may disagree with the data then). md does (true, the default): it has
    /// nothing else to rebuild from. An array with another copy of every byte (a raid5 plex
    /// of a mirror of arrays, while another plex serves) says false: the read, a check's row
    /// or the write whose reconstruct-write needed the row fails instead, and the mirror
    /// rebuilds the bytes from another plex (or takes the plex out).
    pub fn set_rebuild_from_unchecked_parity(&mut self, rebuild: bool) {
        self.rebuild_from_unchecked_parity = rebuild;
    }

    /// Whether a read error may be rebuilt from parity now (see
    /// [`Array::set_rebuild_from_unchecked_parity`]).
    pub(super) fn parity_trusted_for_rebuilds(&self) -> bool {
        self.rebuild_from_unchecked_parity || !self.resync_pending
    }

    /// Choose how parity writes pick between read-modify-write and reconstruct-write (see
    /// [`ParityWriteChoice`]). Takes effect for stripes planned from now on.
    pub fn set_parity_write_choice(&mut self, choice: ParityWriteChoice) {
        self.parity_write_choice = choice;
    }

    /// Choose how reads pick among the copies of mirrored data (raid1, raid10; other levels
    /// have one place for every byte). Takes effect for requests started from now on.
    pub fn set_read_policy(&mut self, policy: ReadPolicy) {
        if policy != self.balance.policy() {
            self.readahead_reset();
        }
        self.balance.set_policy(policy);
    }

    /// How reads pick among copies (see [`Array::set_read_policy`]); [`ReadPolicy::Md`] unless
    /// set.
    pub fn read_policy(&self) -> ReadPolicy {
        self.balance.policy()
    }

    /// Say whether the members are non-rotational (SSDs): seek distance then means nothing,
    /// and md's policy takes the least busy copy instead of the nearest head. Rotational
    /// unless set.
    pub fn set_nonrotational(&mut self, nonrot: bool) {
        self.balance.set_nonrot(nonrot);
    }

    /// Whether the members are taken to be non-rotational (see [`Array::set_nonrotational`]).
    pub fn nonrotational(&self) -> bool {
        self.balance.nonrot()
    }

    /// Tell the engine the time: the driver's monotonic clock, from any fixed start, before it
    /// submits requests or hands back completions (a real driver reads its clock; a simulator
    /// gives its virtual time). The engine measures each member's read latency by it and reads
    /// mirrored data from a far or slow member less (see `docs/read-balancing.md`, "Latency").
    /// Until it is told, nothing is measured. A time earlier than the last is taken as the last.
    pub fn set_now(&mut self, now: Duration) {
        self.balance.set_now(u64::try_from(now.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Say whether reads of mirrored data pass over copies measured to be clearly slower than
    /// another (on by default; it needs [`Array::set_now`]). Off, the read policy alone decides,
    /// as it does for members that are alike.
    pub fn set_latency_balancing(&mut self, on: bool) {
        self.balance.set_latency_balancing(on);
    }

    /// Whether reads pass over slow copies (see [`Array::set_latency_balancing`]).
    pub fn latency_balancing(&self) -> bool {
        self.balance.latency_balancing()
    }

    /// The measured mean latency of reads of about `len` bytes from `slot` (completion minus
    /// issue), once enough reads of that size were measured.
    pub fn read_latency(&self, slot: usize, len: u64) -> Option<Duration> {
        self.balance.read_latency_ns(slot, len).map(|ns| Duration::from_nanos(ns as u64))
    }

    /// Whether any slot is not in sync (missing, faulty or still recovering).
    pub fn degraded(&self) -> bool {
        self.slots.iter().any(|s| *s != SlotState::InSync)
    }

    /// Number of requests submitted and not yet returned by [`Array::next_completion`].
    pub fn in_flight(&self) -> usize {
        self.ops.len() + self.finished.len() + self.gather.outstanding()
    }

    /// The next member I/O to perform, if any.
    pub fn next_io(&mut self) -> Option<MemberIo> {
        self.outbox.pop_front()
    }

    /// The next finished request, if any.
    pub fn next_completion(&mut self) -> Option<(RequestId, Result<Completion, EngineError>)> {
        self.finished.pop_front()
    }

    /// Events since the last call (members that failed, read errors corrected).
    pub fn take_events(&mut self) -> Vec<EngineEvent> {
        std::mem::take(&mut self.events)
    }

    /// Whether a member failure waits to be taken with [`Array::take_events`] (the driver has
    /// not recorded it yet).
    pub fn failure_untaken(&self) -> bool {
        self.events.iter().any(|e| matches!(e, EngineEvent::MemberFailed { .. }))
    }
}
