//! `Array`: the sans-I/O engine for one assembled array.
//!
//! A driver feeds it block requests ([`Request`]) and member completions ([`IoResult`]); it emits
//! member I/Os ([`MemberIo`]) and request completions. It never touches the OS, so the same code
//! runs over real files (the synchronous driver in `uraid-device`) and over simulated disks.
//!
//! What it owns:
//! - splitting a logical request into member I/Os per level ([`Geometry`]), as few as it can:
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
//!   like md's `mismatch_cnt` (in 512-byte sectors, per 4 KiB row), and optionally repair.

use std::collections::{BTreeSet, VecDeque};

use bytes::Bytes;
use smallvec::{smallvec, SmallVec};
use uraid_layout::StripeRoles;

use crate::error::EngineError;
use crate::geometry::{Copies, Geometry, ParityRun, SECTOR_BYTES};
use crate::idmap::IdMap;
use crate::iobuf::IoBuf;
use crate::read_balance::{Balancer, ReadPolicy};

pub use crate::member_io::{IoId, IoResult, MemberIo, MemberOp};
pub use crate::slot::SlotState;

mod logging;
mod parity_blocks;
mod readahead;

/// Identifies a submitted request.
pub type RequestId = u64;

/// The granularity of mismatch counting and repair, as md's stripe pages (4 KiB).
pub const CHECK_ROW_BYTES: u64 = 4096;

/// Largest member I/O made by merging the pieces of one request that lie on one member (reads,
/// and writes of whole stripes or of levels without parity): keeps one member buffer bounded.
pub const MAX_MERGE_BYTES: u64 = 8 << 20;

/// Default bound on the bytes of stripe buffers held by parity writes in progress (see
/// [`Array::set_stripe_memory_limit`]).
pub const DEFAULT_STRIPE_MEMORY: u64 = 64 << 20;

/// Tag parts from here on name a group of merged writes (`GROUP_PART + index`), not one part.
const GROUP_PART: usize = usize::MAX / 2;

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
    },
    /// A read of `len` bytes at member byte `offset` of `slot` failed; the bytes were rebuilt
    /// from redundancy and written back successfully, so the member stays in sync.
    ReadErrorCorrected {
        slot: usize,
        offset: u64,
        len: u64,
    },
}

/// A member write of one part of a request, before merging: `(part, slot, member offset, bytes)`.
type PartWrite = (usize, usize, u64, Bytes);
/// The member writes of a request, inline for a small one (one run, up to four copies).
type PartWrites = SmallVec<[PartWrite; 4]>;
/// The parts one merged member write covers.
type GroupParts = SmallVec<[usize; 2]>;

/// A stripe's member write: `(slot, member offset, bytes, is a correction)`.
type StripeMemberWrite = (usize, u64, Bytes, bool);
/// A stripe's member writes, inline for a small write (data, P and Q).
type StripeMemberWrites = SmallVec<[StripeMemberWrite; 4]>;
/// Per member slot, a stripe's old (then new) contents over its rows, where known.
type StripeBlocks = SmallVec<[Option<Vec<u8>>; 8]>;
/// Member slots, inline for arrays of up to 16 members.
type Slots = SmallVec<[usize; 16]>;

/// A logical byte range `[start, end)` an op holds, and whether it holds it exclusively (writes).
type Lock = (u64, u64, bool);
/// A request's locks: one range but for recovery, held inline so that submitting does not
/// allocate.
type Locks = SmallVec<[Lock; 1]>;

#[derive(Debug)]
struct Op {
    kind: OpKind,
    /// Logical byte ranges this op must not share with a conflicting op.
    locks: Locks,
}

// A read is the largest kind (its first part and pieces are inline); boxing it would put back
// the allocation per request the inline lists save.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum OpKind {
    Read(ReadOp),
    Write(CopyWriteOp),
    ParityWrite(ParityWriteOp),
    Flush { pending: usize, ok: usize },
    Sync(SyncOp),
    Discard(DiscardOp),
    Recover(RecoverOp),
}

/// Sub-identifier of an I/O inside its op: which part, and which slot.
#[derive(Debug, Clone, Copy)]
struct IoTag {
    part: usize,
    slot: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IoKind {
    Read,
    Write,
    /// Writes back bytes whose read failed; once written they are read again ([`IoKind::Reread`]).
    Correction,
    /// Reads back what a correction wrote, as md's `fix_read_error` does: a sector that still
    /// cannot be read once rewritten (a drive that took the write but could not remap the
    /// sector) fails its member. The request waits for it as it did for the correction.
    Reread,
    Other,
}

/// What the engine remembers of an emitted member I/O.
#[derive(Debug, Clone, Copy)]
struct Emitted {
    rid: RequestId,
    tag: IoTag,
    /// The slot's generation when the I/O was issued (see [`Array::generation`]).
    generation: u64,
    offset: u64,
    len: u64,
    kind: IoKind,
    /// A data read, write or discard: where it ends is where the member's head will be.
    moves_head: bool,
}

/// A member I/O's result as the ops see it.
#[derive(Debug)]
enum Outcome {
    Data(Bytes),
    Done,
    /// A read from an in-sync member failed. The member keeps its state: the op rebuilds the
    /// bytes from redundancy and writes them back.
    ReadError,
    /// The I/O failed (a write: the member is faulty now), or its slot changed state since it
    /// was issued: the result is not to be used.
    Lost,
}

impl Outcome {
    fn succeeded(&self) -> bool {
        matches!(self, Outcome::Data(_) | Outcome::Done)
    }
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
    /// The partial parity log, when writes are logged (see `array/logging.rs`).
    log: Option<logging::PplLog>,
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
            log: None,
            stripe_memory_limit: DEFAULT_STRIPE_MEMORY,
            stripe_memory: 0,
            stripe_memory_peak: 0,
            memory_waiters: VecDeque::new(),
            admitting: false,
            write_batch: None,
            balance,
            readahead: readahead::ReadAhead::default(),
            parity_blocks: parity_blocks::ParityBlocks::new(),
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

    /// Whether any slot is not in sync (missing, faulty or still recovering).
    pub fn degraded(&self) -> bool {
        self.slots.iter().any(|s| *s != SlotState::InSync)
    }

    /// Number of requests submitted and not yet returned by [`Array::next_completion`].
    pub fn in_flight(&self) -> usize {
        self.ops.len() + self.finished.len()
    }

    /// Change a slot's membership, as the driver decides it:
    /// - `Missing`/`Faulty` → `Recovering`: a spare was added in the slot;
    /// - `Recovering` → `InSync`: its recovery finished;
    /// - `InSync`/`Recovering` → `Faulty`: an operator failed it (a `MemberFailed` event with
    ///   reason "failed by request" follows);
    /// - `Faulty` → `Missing`: the failed device was removed.
    ///
    /// Failing an in-sync member beyond the level's redundancy is refused unless `force`.
    /// Member I/O already issued to a slot that leaves its device behind still completes, and
    /// its result is ignored. Nothing changes when an error is returned.
    pub fn set_slot_state(&mut self, slot: usize, state: SlotState, force: bool) -> Result<(), EngineError> {
        let raid_disks = self.slots.len();
        let from = *self.slots.get(slot).ok_or(EngineError::NoSuchSlot { slot, raid_disks })?;
        if from == state {
            return Ok(());
        }
        use SlotState::*;
        let allowed = matches!(
            (from, state),
            (Missing | Faulty, Recovering) | (Recovering, InSync) | (InSync | Recovering, Faulty) | (Faulty, Missing)
        );
        if !allowed {
            return Err(EngineError::InvalidSlotChange { slot, from, to: state });
        }
        if from == InSync && !force {
            let slots = &self.slots;
            if !self.geometry.is_readable(&|s| s != slot && slots[s] == InSync) {
                return Err(EngineError::WouldFailArray { slot });
            }
        }
        if state == Faulty {
            self.fail_slot(slot, "failed by request");
        } else {
            self.change_state(slot, state);
        }
        self.log_maintenance();
        self.admit_waiting();
        Ok(())
    }

    /// Accept a request. Errors at once for a range outside the array (outside the members'
    /// data for `Recover`), and for a `Recover` that has nothing to do. A request may finish
    /// before this returns, without any member I/O (a read served from what the `split` policy
    /// read ahead, an empty read): drivers look at [`Array::next_completion`] after submitting,
    /// not only after completing member I/O.
    pub fn submit(&mut self, request: Request) -> Result<RequestId, EngineError> {
        let size = self.size_bytes();
        let locks: Locks = match &request {
            Request::Read { offset, len } => {
                check_range(*offset, *len, size)?;
                // A read error on a mirror is corrected in whole rows, which no write may change
                // meanwhile.
                let (start, wide) = self.mirror_rows(*offset, *len, size);
                smallvec![(start, start + wide, false)]
            }
            Request::Write { offset, data } => {
                check_range(*offset, data.len() as u64, size)?;
                smallvec![(*offset, offset + data.len() as u64, true)]
            }
            Request::Sync { offset, len, .. } => {
                check_range(*offset, *len, size)?;
                let (start, wide) = self.mirror_rows(*offset, *len, size);
                smallvec![(start, start + wide, true)]
            }
            Request::Discard { offset, len } => {
                check_range(*offset, *len, size)?;
                if self.log.is_some() {
                    return Err(EngineError::DiscardWithLog);
                }
                if let Some(width) = self.geometry.stripe_data_bytes() {
                    if offset % width != 0 || len % width != 0 {
                        return Err(EngineError::Unaligned { offset: *offset, len: *len, granularity: width });
                    }
                }
                smallvec![(*offset, offset + len, true)]
            }
            Request::Recover { offset, len } => {
                if self.geometry.max_degraded() == 0 {
                    return Err(EngineError::NoRedundancy { level: self.geometry.level().to_string() });
                }
                check_range(*offset, *len, self.geometry.member_data_bytes())?;
                if !self.slots.contains(&SlotState::Recovering) {
                    return Err(EngineError::NothingToRecover);
                }
                let (start, wide) = self.mirror_rows(*offset, *len, self.geometry.member_data_bytes());
                self.recover_locks(start, wide).into()
            }
            Request::Flush => Locks::new(),
        };
        // Parity is shared by a whole stripe: lock whole stripes.
        let locks = locks
            .into_iter()
            .map(|(s, e, w)| match self.geometry.stripe_data_bytes() {
                Some(width) => (s / width * width, e.div_ceil(width) * width, w),
                None => (s, e, w),
            })
            .collect();
        let id = self.next_request;
        self.next_request += 1;
        let kind = match request {
            Request::Read { offset, len } => OpKind::Read(ReadOp::new(offset, len)),
            Request::Write { offset, data } => {
                if self.geometry.parity().is_some() {
                    OpKind::ParityWrite(ParityWriteOp {
                        offset,
                        data,
                        stripes: SmallVec::new(),
                        remaining: 0,
                        error: None,
                        unplanned: 0..0,
                        groups: Vec::new(),
                    })
                } else {
                    OpKind::Write(CopyWriteOp {
                        offset,
                        data,
                        parts: SmallVec::new(),
                        pending: 0,
                        error: None,
                        groups: Vec::new(),
                    })
                }
            }
            Request::Flush => OpKind::Flush { pending: 0, ok: 0 },
            Request::Sync { offset, len, repair } => OpKind::Sync(SyncOp::new(offset, len, repair)),
            Request::Discard { offset, len } => {
                OpKind::Discard(DiscardOp { offset, len, pending: 0, parts: Vec::new() })
            }
            Request::Recover { offset, len } => {
                OpKind::Recover(RecoverOp { offset, len, units: Vec::new(), remaining: 0, error: None })
            }
        };
        self.ops.insert(id, Op { kind, locks });
        self.waiting.push_back(id);
        self.start_ready();
        self.admit_waiting();
        Ok(id)
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

    /// Report the outcome of member I/O `id`.
    pub fn complete_io(&mut self, id: IoId, result: IoResult) {
        let result = match result {
            IoResult::Written(data) => {
                for piece in data.into_pieces() {
                    self.parity_blocks.give_back(piece);
                }
                IoResult::Done
            }
            other => other,
        };
        let io = self.io_owner.remove(&id).expect("completion for an unknown member I/O");
        let slot = io.tag.slot;
        self.balance.completed(slot, io.offset, io.len, io.moves_head);
        let outcome = if self.generation[slot] != io.generation {
            Outcome::Lost
        } else {
            match result {
                IoResult::Read(_) if io.kind == IoKind::Reread => {
                    self.events.push(EngineEvent::ReadErrorCorrected { slot, offset: io.offset, len: io.len });
                    Outcome::Done
                }
                IoResult::Read(data) => Outcome::Data(data),
                IoResult::Done | IoResult::Written(_) => {
                    // Corrections go to in-sync members only, and a member that leaves that
                    // state takes a new generation (its I/Os are lost above), so this one can
                    // be read back.
                    if io.kind == IoKind::Correction && self.in_sync(slot) {
                        // Not done until read back: the owner hears of it then.
                        self.emit_io(io.rid, io.tag, io.offset, MemberOp::Read { len: io.len }, IoKind::Reread);
                        return;
                    }
                    Outcome::Done
                }
                IoResult::Failed(reason) => match io.kind {
                    IoKind::Read => Outcome::ReadError,
                    IoKind::Correction => {
                        self.fail_slot(slot, &format!("rewriting after a read error failed: {reason}"));
                        Outcome::Lost
                    }
                    IoKind::Reread => {
                        self.fail_slot(slot, &format!("reading back a rewritten read error failed: {reason}"));
                        Outcome::Lost
                    }
                    IoKind::Write | IoKind::Other => {
                        self.fail_slot(slot, &reason);
                        Outcome::Lost
                    }
                },
            }
        };
        let rid = io.rid;
        let tag = io.tag;
        if rid == readahead::READAHEAD_RID {
            self.readahead_io_done(tag, outcome);
            self.log_maintenance();
            self.admit_waiting();
            return;
        }
        if rid == logging::LOG_RID {
            self.log_io_done(tag, outcome);
            self.log_maintenance();
            self.admit_waiting();
            return;
        }
        let mut op = self.ops.remove(&rid).expect("member I/O of a finished request");
        let done = match &mut op.kind {
            OpKind::Read(r) => self.read_io_done(rid, r, tag, outcome),
            OpKind::Write(w) => self.copy_write_io_done(w, tag, outcome),
            OpKind::ParityWrite(w) => self.parity_write_io_done(rid, w, tag, outcome),
            OpKind::Flush { pending, ok } => {
                *pending -= 1;
                if outcome.succeeded() && self.in_sync(slot) {
                    *ok += 1;
                }
                *pending == 0
            }
            OpKind::Sync(s) => self.sync_io_done(rid, s, tag, outcome),
            OpKind::Discard(d) => {
                d.pending -= 1;
                if outcome.succeeded() && self.in_sync(slot) {
                    d.parts[tag.part] += 1;
                }
                d.pending == 0
            }
            OpKind::Recover(r) => self.recover_io_done(rid, r, tag, outcome),
        };
        if done {
            self.finish(rid, op);
        } else {
            self.ops.insert(rid, op);
        }
        self.log_maintenance();
        self.admit_waiting();
    }

    /// Whether every byte can be read from in-sync members (recovering ones do not count).
    fn readable(&self) -> bool {
        let slots = &self.slots;
        self.geometry.is_readable(&|s| slots[s] == SlotState::InSync)
    }

    fn in_sync(&self, slot: usize) -> bool {
        self.slots[slot] == SlotState::InSync
    }

    /// Whether writes go to the slot: in-sync and recovering members.
    fn writable(&self, slot: usize) -> bool {
        matches!(self.slots[slot], SlotState::InSync | SlotState::Recovering)
    }

    fn change_state(&mut self, slot: usize, state: SlotState) {
        // A recovering member that turns in sync is the same device; anything else means the
        // device held so far is no longer trusted.
        if !(self.slots[slot] == SlotState::Recovering && state == SlotState::InSync) {
            self.generation[slot] += 1;
        }
        let joins = self.slots[slot] != SlotState::InSync && state == SlotState::InSync;
        self.slots[slot] = state;
        if joins {
            self.log_member_joined(slot);
        }
    }

    fn fail_slot(&mut self, slot: usize, reason: &str) {
        if self.writable(slot) {
            self.change_state(slot, SlotState::Faulty);
            self.events.push(EngineEvent::MemberFailed { slot, reason: reason.to_string() });
        }
    }

    /// On raid1/raid10, `[offset, offset+len)` widened to whole 4 KiB rows, the end clipped to
    /// `limit` (the array's end, or the members' for member ranges); other levels keep the range.
    /// A mirror corrects a read error by rewriting whole rows (see [`CopyUnit::wide`]), so the
    /// requests that may do so hold whole rows, and checks and recoveries work on whole rows.
    /// Logical and member rows coincide: raid1 copies sit at their logical offset, and raid10
    /// chunks are whole rows that keep their offset inside the chunk on every copy.
    fn mirror_rows(&self, offset: u64, len: u64, limit: u64) -> (u64, u64) {
        match self.geometry {
            Geometry::Raid1(_) | Geometry::Raid10(_) => widen(offset, len, CHECK_ROW_BYTES, limit),
            _ => (offset, len),
        }
    }

    fn emit_io(&mut self, rid: RequestId, tag: IoTag, offset: u64, op: MemberOp, kind: IoKind) {
        let id = self.next_io;
        self.next_io += 1;
        let len = match &op {
            MemberOp::Read { len } | MemberOp::Discard { len } => *len,
            MemberOp::Write { data } => data.len() as u64,
            MemberOp::LogWrite { data } => data.len() as u64,
            MemberOp::Flush => 0,
        };
        // Log writes land in the log area, not at a data offset.
        let moves_head = matches!(op, MemberOp::Read { .. } | MemberOp::Write { .. } | MemberOp::Discard { .. });
        self.balance.issued(tag.slot, offset, len, moves_head);
        let generation = self.generation[tag.slot];
        self.io_owner.insert(id, Emitted { rid, tag, generation, offset, len, kind, moves_head });
        self.outbox.push_back(MemberIo { id, slot: tag.slot, offset, op });
    }

    fn emit(&mut self, rid: RequestId, tag: IoTag, offset: u64, op: MemberOp) {
        let kind = match op {
            MemberOp::Read { .. } => IoKind::Read,
            MemberOp::Write { .. } => IoKind::Write,
            MemberOp::Flush | MemberOp::Discard { .. } | MemberOp::LogWrite { .. } => IoKind::Other,
        };
        self.emit_io(rid, tag, offset, op, kind);
    }

    /// Write back bytes whose read from an in-sync member failed.
    fn emit_correction(&mut self, rid: RequestId, tag: IoTag, offset: u64, data: IoBuf) {
        self.emit_io(rid, tag, offset, MemberOp::Write { data }, IoKind::Correction);
    }

    /// Start every waiting request that no earlier request conflicts with, in arrival order.
    fn start_ready(&mut self) {
        if self.starting {
            self.rescan = true;
            return;
        }
        self.starting = true;
        loop {
            self.rescan = false;
            // Each request waiting now is looked at once; those that must wait on go to the
            // back, in their order (the deque keeps its buffer: no allocation per request).
            let mut blocked: Vec<Lock> = Vec::new();
            for _ in 0..self.waiting.len() {
                let rid = self.waiting.pop_front().expect("counted");
                let locks = self.ops[&rid].locks.clone();
                let conflicts = |other: &Lock| locks.iter().any(|l| (l.2 || other.2) && l.0 < other.1 && other.0 < l.1);
                let busy =
                    self.running.iter().any(|(_, held)| held.iter().any(conflicts)) || blocked.iter().any(conflicts);
                if busy {
                    blocked.extend(locks.iter().copied());
                    self.waiting.push_back(rid);
                    continue;
                }
                if !locks.is_empty() {
                    self.running.push((rid, locks));
                }
                self.start(rid);
            }
            if !self.rescan {
                break;
            }
        }
        self.starting = false;
    }

    fn start(&mut self, rid: RequestId) {
        let mut op = self.ops.remove(&rid).expect("starting a known request");
        let done = if !self.readable() {
            Some(Err(EngineError::ArrayFailed))
        } else {
            match &mut op.kind {
                OpKind::Read(r) => self.start_read(rid, r),
                OpKind::Write(w) => self.start_copy_write(rid, w),
                OpKind::ParityWrite(w) => self.start_parity_write(rid, w),
                OpKind::Flush { pending, .. } => {
                    for slot in 0..self.slots.len() {
                        if self.writable(slot) {
                            *pending += 1;
                            self.emit(rid, IoTag { part: 0, slot }, 0, MemberOp::Flush);
                        }
                    }
                    (*pending == 0).then_some(Ok(()))
                }
                OpKind::Sync(s) => self.start_sync(rid, s),
                OpKind::Discard(d) => self.start_discard(rid, d),
                OpKind::Recover(r) => self.start_recover(rid, r),
            }
        };
        match done {
            Some(Ok(())) => self.finish(rid, op),
            Some(Err(e)) => self.finish_result(rid, Err(e)),
            None => {
                self.ops.insert(rid, op);
            }
        }
    }

    fn finish(&mut self, rid: RequestId, op: Op) {
        let result = match op.kind {
            OpKind::Read(r) => match r.error {
                Some(e) => Err(e),
                None => Ok(Completion::Read(r.assembly.finish())),
            },
            OpKind::Write(w) => match w.error {
                Some(e) => Err(e),
                None => Ok(Completion::Written),
            },
            OpKind::ParityWrite(w) => match w.error {
                Some(e) => Err(e),
                None => Ok(Completion::Written),
            },
            OpKind::Flush { ok, .. } => {
                if ok > 0 || self.slots.iter().all(|s| *s != SlotState::InSync) {
                    Ok(Completion::Flushed)
                } else {
                    Err(EngineError::ArrayFailed)
                }
            }
            OpKind::Sync(s) => match s.error {
                Some(e) => Err(e),
                None => Ok(Completion::Synced { mismatch_sectors: s.mismatch_sectors }),
            },
            // As for writes: a part none of whose in-sync copies was zeroed is lost.
            OpKind::Discard(d) => {
                if d.parts.contains(&0) || !self.readable() {
                    Err(EngineError::ArrayFailed)
                } else {
                    Ok(Completion::Written)
                }
            }
            OpKind::Recover(r) => match r.error {
                Some(e) => Err(e),
                None => Ok(Completion::Recovered),
            },
        };
        self.finish_result(rid, result);
    }

    fn finish_result(&mut self, rid: RequestId, result: Result<Completion, EngineError>) {
        self.finished.push_back((rid, result));
        self.running.retain(|(r, _)| *r != rid);
        self.start_ready();
    }

    // ----- shared pieces: one run with copies, the same rows of every member of a stripe ------

    /// Read a copy unit from its next in-sync copy, starting with the one read balancing chose
    /// ([`CopyUnit::first`]), then on in md's copy order (over [`CopyUnit::wide`] once a copy
    /// failed). `Some` when the unit is finished: no copy is left to read (an error).
    fn issue_copy_read(&mut self, rid: RequestId, part: usize, u: &mut CopyUnit) -> Option<Result<(), EngineError>> {
        loop {
            while u.tried < u.copies.len() {
                let (slot, off) = u.copies[(u.first + u.tried) % u.copies.len()];
                u.tried += 1;
                if self.in_sync(slot) && !u.bad.iter().any(|b| b.0 == slot) {
                    let (lead, len) = u.wide.unwrap_or((0, u.len));
                    self.emit(rid, IoTag { part, slot }, off - lead, MemberOp::Read { len });
                    return None;
                }
            }
            // No copy could read the whole row. Whole sectors are enough not to splice, and the
            // copies that failed after the first may have failed outside the unit's sectors: try
            // them again over those sectors alone (the first failed inside them).
            let sectors = u.widened(SECTOR_BYTES, self.geometry.member_data_bytes());
            if u.wide.is_none() || u.wide == Some(sectors) || u.bad.len() < 2 {
                break;
            }
            u.wide = Some(sectors);
            u.bad.truncate(1);
            u.tried = 0;
        }
        Some(Err(match u.bad.first() {
            Some(&(slot, offset)) => EngineError::UnrecoverableRead { slot, offset, len: u.len },
            None => EngineError::ArrayFailed,
        }))
    }

    /// Advance a copy unit after one of its I/Os completed; the data read goes to `sink` too
    /// (the read's assembly, at the unit's place in it). `Some` once the unit is finished.
    fn copy_unit_step(
        &mut self,
        rid: RequestId,
        part: usize,
        u: &mut CopyUnit,
        slot: usize,
        outcome: Outcome,
        sink: Option<(&mut ReadAssembly, usize)>,
    ) -> Option<Result<(), EngineError>> {
        if u.writing {
            u.pending -= 1;
            return (u.pending == 0).then_some(Ok(()));
        }
        match outcome {
            Outcome::Data(data) => {
                // After a read error `data` is wider than the unit: the unit's own bytes go to
                // the reader and the targets, all of it to the copies whose read failed.
                let (lead, _) = u.wide.unwrap_or((0, u.len));
                // The common case hands the member's bytes on as they are: slicing or cloning a
                // `Bytes` made from a `Vec` allocates its shared header, so do neither when the
                // read is exactly the unit and nobody else needs it.
                let whole = lead == 0 && data.len() as u64 == u.len;
                let own = if whole && u.targets.is_empty() && u.bad.is_empty() {
                    if let Some((assembly, at)) = sink {
                        assembly.put(at, data);
                    }
                    u.writing = true;
                    return (u.pending == 0).then_some(Ok(()));
                } else if whole {
                    data.clone()
                } else {
                    data.slice(lead as usize..(lead + u.len) as usize)
                };
                if let Some((assembly, at)) = sink {
                    assembly.put(at, own.clone());
                }
                u.writing = true;
                for &(target, off) in &u.targets {
                    if self.writable(target) {
                        u.pending += 1;
                        self.emit(rid, IoTag { part, slot: target }, off, MemberOp::Write { data: own.clone().into() });
                    }
                }
                for &(bad, off) in &u.bad {
                    if self.in_sync(bad) {
                        u.pending += 1;
                        self.emit_correction(rid, IoTag { part, slot: bad }, off - lead, data.clone().into());
                    }
                }
                (u.pending == 0).then_some(Ok(()))
            }
            Outcome::ReadError => {
                let copy = *u.copies.iter().find(|c| c.0 == slot).expect("the failed read was one of the copies");
                u.bad.push(copy);
                if u.wide.is_none() {
                    u.wide = Some(u.widened(CHECK_ROW_BYTES, self.geometry.member_data_bytes()));
                }
                self.issue_copy_read(rid, part, u)
            }
            Outcome::Done | Outcome::Lost => self.issue_copy_read(rid, part, u),
        }
    }

    /// Read `rows` from every in-sync member not known bad, except `skip`.
    fn read_rows(&mut self, rid: RequestId, part: usize, rows: &mut Rows, skip: Option<usize>) {
        for slot in 0..self.slots.len() {
            if Some(slot) != skip && self.in_sync(slot) && !rows.bad.contains(&slot) {
                rows.pending += 1;
                self.emit(rid, IoTag { part, slot }, rows.offset, MemberOp::Read { len: rows.len });
            }
        }
    }

    /// Write the rebuilt rows back to the members whose read failed; how many writes went out.
    fn rewrite_bad_rows(&mut self, rid: RequestId, part: usize, rows: &Rows) -> usize {
        let mut issued = 0;
        for &slot in &rows.bad {
            if self.in_sync(slot) {
                let data = rows.blocks[slot].clone().expect("rebuilt rows");
                self.emit_correction(rid, IoTag { part, slot }, rows.offset, data.into());
                issued += 1;
            }
        }
        issued
    }

    // ----- reads -------------------------------------------------------------------------------

    fn start_read(&mut self, rid: RequestId, r: &mut ReadOp) -> Option<Result<(), EngineError>> {
        let mut stream = None;
        if self.geometry.parity().is_some() {
            for run in self.geometry.parity_runs(r.offset, r.len) {
                r.parts.push(ReadPart::Parity { run, phase: ParityRead::Direct });
            }
        } else if self.split_reads() {
            stream = self.plan_split_read(r);
        } else {
            self.balance.begin_request();
            for run in self.geometry.runs(r.offset, r.len) {
                // A policy may send parts of one run to different copies (md-1998 moves a
                // sequential run to the next disk every 64 KiB).
                let mut at = 0;
                while at < run.len {
                    let copies: Copies = run.copies.iter().map(|&(s, o)| (s, o + at)).collect();
                    let len = self.balance.piece_len(&copies, run.len - at).max(1);
                    let mut unit = CopyUnit::new(copies, len, Vec::new());
                    unit.first = self.choose_copy(&unit.copies, unit.len);
                    r.parts.push(ReadPart::Copies { logical: run.logical + at, unit });
                    at += len;
                }
            }
        }
        let groups = self.merge_read_parts(r);
        let held: BTreeSet<usize> = groups.iter().flat_map(|g| g.pieces.iter().map(|&(p, _)| p)).collect();
        let first_merged = r.parts.len();
        r.remaining = r.parts.len() + groups.len();
        for part in 0..first_merged {
            if !held.contains(&part) {
                let step = self.start_read_part(rid, r, part);
                r.settle(step);
            }
        }
        for g in groups {
            let part = r.parts.len();
            self.emit(rid, IoTag { part, slot: g.slot }, g.offset, MemberOp::Read { len: g.len });
            r.parts.push(ReadPart::Merged(g));
        }
        if let Some(stream) = stream {
            self.read_ahead(stream);
        }
        (r.remaining == 0).then_some(Ok(()))
    }

    /// Where a read part would be read directly, before any error: `(slot, member offset,
    /// length)` of the in-sync member holding it (the first in-sync copy from the chosen one,
    /// as [`Array::issue_copy_read`] picks). `None` for a parity run whose member is not in
    /// sync (it is rebuilt from its stripe).
    fn direct_location(&self, part: &ReadPart) -> Option<(usize, u64, u64)> {
        match part {
            ReadPart::Copies { unit, .. } => {
                let n = unit.copies.len();
                (0..n)
                    .map(|k| unit.copies[(unit.first + k) % n])
                    .find(|&(slot, _)| self.in_sync(slot))
                    .map(|(slot, off)| (slot, off, unit.len))
            }
            ReadPart::Parity { run, .. } => self
                .in_sync(run.slot)
                .then(|| (run.slot, run.stripe * self.geometry.chunk_bytes() + run.chunk_offset, run.len)),
            ReadPart::Merged(_) | ReadPart::Cached { .. } => None,
        }
    }

    /// The copy (an index into `copies`) a read of `len` bytes should read first: read
    /// balancing's choice among the in-sync copies, or md's first in-sync copy while a resync
    /// is owed (copies may disagree until it is done, and md then reads the first so that
    /// reading a block twice gives the same answer). 0 if no copy is in sync (the read then
    /// fails through the usual path).
    fn choose_copy(&mut self, copies: &[(usize, u64)], len: u64) -> usize {
        let slots = &self.slots;
        let in_sync = |slot: usize| slots[slot] == SlotState::InSync;
        let chosen = if self.resync_pending {
            self.balance.choose_first(copies, len, in_sync)
        } else {
            self.balance.choose(copies, len, in_sync)
        };
        chosen.unwrap_or(0)
    }

    /// Group the parts of a fresh read that go to the same member into one member read each:
    /// pieces that are contiguous on the member, or separated by at most one chunk. On a
    /// rotating-parity layout the pieces one member holds of consecutive stripes sit a stripe
    /// row apart, with at most the parity chunk (or a data chunk the request does not want)
    /// between them; reading that one chunk and dropping it costs far less than a second seek
    /// and request, and a gap of one chunk is all the layouts ever put between a member's
    /// pieces of one request, so the rule never reads more than one chunk per merge. Groups
    /// of one piece are left out (the part is read as before).
    ///
    /// Under the `split` policy only contiguous pieces merge: a gap there is what another copy
    /// reads.
    fn merge_read_parts(&self, r: &ReadOp) -> Vec<MergedRead> {
        if r.parts.len() < 2 {
            // Nothing to merge (most small reads): no lists to build.
            return Vec::new();
        }
        let gap = if self.split_reads() { 0 } else { self.geometry.chunk_bytes() };
        let mut located: Vec<(usize, u64, u64, usize)> = r
            .parts
            .iter()
            .enumerate()
            .filter_map(|(part, p)| self.direct_location(p).map(|(slot, off, len)| (slot, off, len, part)))
            .collect();
        located.sort_unstable();
        let mut groups: Vec<MergedRead> = Vec::new();
        let mut current: Option<MergedRead> = None;
        for (slot, off, len, part) in located {
            if let Some(g) = current.as_mut() {
                let end = g.offset + g.len;
                if g.slot == slot && off >= end && off - end <= gap && off + len - g.offset <= MAX_MERGE_BYTES {
                    g.pieces.push((part, off - g.offset));
                    g.len = off + len - g.offset;
                    continue;
                }
            }
            if let Some(g) = current.take() {
                if g.pieces.len() > 1 {
                    groups.push(g);
                }
            }
            current = Some(MergedRead { slot, offset: off, len, pieces: vec![(part, 0)] });
        }
        if let Some(g) = current.take() {
            if g.pieces.len() > 1 {
                groups.push(g);
            }
        }
        groups
    }

    /// A merged member read completed. With its data every piece is handed out; otherwise each
    /// piece starts afresh on its own, as if it had never been merged, so a read error is
    /// narrowed to the pieces (and then rows) it really hits and corrected as usual, and a
    /// member that failed meanwhile sends its pieces to another copy or to a rebuild.
    fn merged_read_done(&mut self, rid: RequestId, r: &mut ReadOp, part: usize, outcome: Outcome) {
        let ReadPart::Merged(g) = &r.parts[part] else { unreachable!("a merged read part") };
        let pieces = g.pieces.clone();
        match outcome {
            Outcome::Data(data) => {
                for (p, at) in pieces {
                    let (logical, len) = match &r.parts[p] {
                        ReadPart::Copies { logical, unit } => (*logical, unit.len),
                        ReadPart::Parity { run, .. } => (run.logical, run.len),
                        ReadPart::Merged(_) => unreachable!("merged reads do not nest"),
                        ReadPart::Cached { .. } => unreachable!("cached parts are not merged"),
                    };
                    let to = (logical - r.offset) as usize;
                    r.assembly.put(to, data.slice(at as usize..(at + len) as usize));
                    r.settle(Some(Ok(())));
                }
            }
            Outcome::ReadError | Outcome::Done | Outcome::Lost => {
                for (p, _) in pieces {
                    let step = self.start_read_part(rid, r, p);
                    r.settle(step);
                }
            }
        }
        r.settle(Some(Ok(())));
    }

    /// Issue the first member reads of one part of a read. `Some` when the part is finished.
    fn start_read_part(&mut self, rid: RequestId, r: &mut ReadOp, part: usize) -> Option<Result<(), EngineError>> {
        if matches!(r.parts[part], ReadPart::Cached { .. }) {
            return self.start_cached_part(rid, r, part);
        }
        match &mut r.parts[part] {
            ReadPart::Copies { unit, .. } => self.issue_copy_read(rid, part, unit),
            ReadPart::Merged(_) => unreachable!("merged reads start with their request"),
            ReadPart::Cached { .. } => unreachable!("handled above"),
            ReadPart::Parity { run, phase } => {
                if self.in_sync(run.slot) {
                    let off = run.stripe * self.geometry.chunk_bytes() + run.chunk_offset;
                    self.emit(rid, IoTag { part, slot: run.slot }, off, MemberOp::Read { len: run.len });
                    None
                } else {
                    let at = (run.logical - r.offset) as usize;
                    let sink = r.assembly.sink(at, run.len as usize);
                    self.start_parity_rebuild(rid, part, run, phase, Vec::new(), sink)
                }
            }
        }
    }

    /// A read error hit a part spanning several 4 KiB rows: replace it by one part per row and
    /// start those afresh, so an error costs only its own rows and errors on different members
    /// in different rows never add up (md works in 4 KiB stripe pages, and raid1's
    /// `fix_read_error` page by page, for the same reason). The old part is finished.
    fn split_read_part(&mut self, rid: RequestId, r: &mut ReadOp, part: usize) {
        let pieces: Vec<ReadPart> = match &r.parts[part] {
            ReadPart::Copies { logical, unit } => unit
                .row_pieces()
                .into_iter()
                .map(|(delta, len)| ReadPart::Copies { logical: logical + delta, unit: unit.piece(delta, len) })
                .collect(),
            ReadPart::Parity { run, .. } => row_pieces(run.chunk_offset, run.len)
                .into_iter()
                .map(|(delta, len)| ReadPart::Parity {
                    run: ParityRun {
                        logical: run.logical + delta,
                        len,
                        chunk_offset: run.chunk_offset + delta,
                        ..run.clone()
                    },
                    phase: ParityRead::Direct,
                })
                .collect(),
            ReadPart::Merged(_) => unreachable!("a merged read is never split"),
            ReadPart::Cached { .. } => unreachable!("a cached part has no member read to fail"),
        };
        let first = r.parts.len();
        r.remaining += pieces.len();
        r.parts.extend(pieces);
        for piece in first..r.parts.len() {
            let step = self.start_read_part(rid, r, piece);
            r.settle(step);
        }
        r.settle(Some(Ok(())));
    }

    /// Rebuild a parity run from the same rows of the stripe's other members. `bad` lists
    /// members whose read of those rows already failed.
    fn start_parity_rebuild(
        &mut self,
        rid: RequestId,
        part: usize,
        run: &ParityRun,
        phase: &mut ParityRead,
        bad: Vec<usize>,
        sink: &mut [u8],
    ) -> Option<Result<(), EngineError>> {
        let offset = run.stripe * self.geometry.chunk_bytes() + run.chunk_offset;
        let mut rows = Rows::new(offset, run.len, self.slots.len(), bad);
        self.read_rows(rid, part, &mut rows, Some(run.slot));
        if rows.pending == 0 {
            return self.parity_read_rebuilt(rid, part, run, phase, rows, sink);
        }
        *phase = ParityRead::Rebuild(rows);
        None
    }

    /// Every read of a parity rebuild is in: rebuild, hand out the run, rewrite failed rows.
    fn parity_read_rebuilt(
        &mut self,
        rid: RequestId,
        part: usize,
        run: &ParityRun,
        phase: &mut ParityRead,
        mut rows: Rows,
        sink: &mut [u8],
    ) -> Option<Result<(), EngineError>> {
        let roles = self.geometry.stripe_roles(run.stripe);
        if let Err(e) = rows.rebuild(&roles) {
            return Some(Err(e));
        }
        sink.copy_from_slice(rows.blocks[run.slot].as_ref().expect("rebuilt block"));
        let pending = self.rewrite_bad_rows(rid, part, &rows);
        if pending == 0 {
            return Some(Ok(()));
        }
        *phase = ParityRead::Rewriting { pending };
        None
    }

    fn read_io_done(&mut self, rid: RequestId, r: &mut ReadOp, tag: IoTag, outcome: Outcome) -> bool {
        let part = tag.part;
        if matches!(r.parts[part], ReadPart::Merged(_)) {
            self.merged_read_done(rid, r, part, outcome);
            return r.remaining == 0;
        }
        let split = matches!(outcome, Outcome::ReadError)
            && match &r.parts[part] {
                ReadPart::Copies { unit, .. } => !unit.writing && unit.copies.len() > 1 && unit.row_pieces().len() > 1,
                ReadPart::Parity { run, phase } => {
                    matches!(phase, ParityRead::Direct) && row_pieces(run.chunk_offset, run.len).len() > 1
                }
                ReadPart::Merged(_) | ReadPart::Cached { .. } => false,
            };
        if split {
            self.split_read_part(rid, r, part);
            return r.remaining == 0;
        }
        let step = match &mut r.parts[part] {
            ReadPart::Copies { logical, unit } => {
                let at = (*logical - r.offset) as usize;
                self.copy_unit_step(rid, part, unit, tag.slot, outcome, Some((&mut r.assembly, at)))
            }
            ReadPart::Merged(_) => unreachable!("handled above"),
            ReadPart::Cached { .. } => unreachable!("read-ahead completions are filed under their own id"),
            ReadPart::Parity { run, phase } => {
                let at = (run.logical - r.offset) as usize;
                if let ParityRead::Direct = phase {
                    if let Outcome::Data(data) = outcome {
                        // Moved, not cloned: cloning a `Bytes` made from a `Vec` allocates.
                        r.assembly.put(at, data);
                        r.settle(Some(Ok(())));
                        return r.remaining == 0;
                    }
                }
                let sink = r.assembly.sink(at, run.len as usize);
                match phase {
                    ParityRead::Direct => match outcome {
                        Outcome::Data(_) => unreachable!("handled above"),
                        Outcome::ReadError => self.start_parity_rebuild(rid, part, run, phase, vec![run.slot], sink),
                        Outcome::Done | Outcome::Lost => {
                            self.start_parity_rebuild(rid, part, run, phase, Vec::new(), sink)
                        }
                    },
                    ParityRead::Rebuild(rows) => {
                        rows.absorb(tag.slot, outcome);
                        if rows.pending > 0 {
                            None
                        } else if !rows.bad.is_empty() && row_pieces(run.chunk_offset, run.len).len() > 1 {
                            self.split_read_part(rid, r, part);
                            return r.remaining == 0;
                        } else {
                            let ParityRead::Rebuild(rows) = std::mem::replace(phase, ParityRead::Direct) else {
                                unreachable!("phase checked above")
                            };
                            self.parity_read_rebuilt(rid, part, run, phase, rows, sink)
                        }
                    }
                    ParityRead::Rewriting { pending } => {
                        *pending -= 1;
                        (*pending == 0).then_some(Ok(()))
                    }
                }
            }
        };
        r.settle(step);
        r.remaining == 0
    }

    // ----- writes: linear, raid0, raid1, raid10 ------------------------------------------------

    fn start_copy_write(&mut self, rid: RequestId, w: &mut CopyWriteOp) -> Option<Result<(), EngineError>> {
        self.readahead_write(w.offset, &w.data);
        let runs = self.geometry.runs(w.offset, w.data.len() as u64);
        let mut writes = PartWrites::new();
        for (part, run) in runs.into_iter().enumerate() {
            let at = (run.logical - w.offset) as usize;
            let bytes = w.data.slice(at..at + run.len as usize);
            let mut in_sync_targets = 0;
            for &(slot, off) in &run.copies {
                if self.writable(slot) {
                    in_sync_targets += usize::from(self.in_sync(slot));
                    w.pending += 1;
                    writes.push((part, slot, off, bytes.clone()));
                }
            }
            w.parts.push(CopyWritePart { written: 0 });
            if in_sync_targets == 0 {
                w.error.get_or_insert(EngineError::ArrayFailed);
            }
        }
        // The runs one member holds of consecutive chunks (raid0's stripes, linear's spans,
        // raid10's copies) are often contiguous on it: one write each.
        self.emit_merged_writes(rid, &mut w.groups, writes);
        (w.pending == 0).then_some(Ok(()))
    }

    fn copy_write_io_done(&mut self, w: &mut CopyWriteOp, tag: IoTag, outcome: Outcome) -> bool {
        if tag.part >= GROUP_PART {
            let ok = outcome.succeeded();
            let mut done = false;
            for part in w.groups[tag.part - GROUP_PART].clone() {
                let each = if ok { Outcome::Done } else { Outcome::Lost };
                done = self.copy_write_io_done(w, IoTag { part, slot: tag.slot }, each);
            }
            return done;
        }
        w.pending -= 1;
        // Only an in-sync copy holds the data for reads; a recovering one is a bonus.
        if outcome.succeeded() && self.in_sync(tag.slot) {
            w.parts[tag.part].written += 1;
        }
        if w.pending == 0 {
            // A part whose every in-sync copy failed is lost; otherwise the failed copies are
            // faulty now and the array carries on degraded, as md does.
            if w.parts.iter().any(|p| p.written == 0) || !self.readable() {
                w.error.get_or_insert(EngineError::ArrayFailed);
            }
            return true;
        }
        false
    }

    // ----- discards ------------------------------------------------------------------------------

    fn start_discard(&mut self, rid: RequestId, d: &mut DiscardOp) -> Option<Result<(), EngineError>> {
        if d.len == 0 {
            return Some(Ok(()));
        }
        self.readahead_forget(d.offset, d.len);
        match self.geometry.stripe_data_bytes() {
            // Whole stripes (checked at submit) occupy the same member range on every slot, data
            // and parity alike: one discard per live member.
            Some(width) => {
                let chunk = self.geometry.chunk_bytes();
                let first = d.offset / width;
                let stripes = d.len / width;
                d.parts.push(0);
                for slot in 0..self.slots.len() {
                    if self.writable(slot) {
                        d.pending += 1;
                        self.emit(
                            rid,
                            IoTag { part: 0, slot },
                            first * chunk,
                            MemberOp::Discard { len: stripes * chunk },
                        );
                    }
                }
            }
            None => {
                for (part, run) in self.geometry.runs(d.offset, d.len).into_iter().enumerate() {
                    d.parts.push(0);
                    for &(slot, off) in &run.copies {
                        if self.writable(slot) {
                            d.pending += 1;
                            self.emit(rid, IoTag { part, slot }, off, MemberOp::Discard { len: run.len });
                        }
                    }
                }
            }
        }
        (d.pending == 0).then_some(Err(EngineError::ArrayFailed))
    }

    // ----- writes: raid4/5/6 ---------------------------------------------------------------------

    fn start_parity_write(&mut self, rid: RequestId, w: &mut ParityWriteOp) -> Option<Result<(), EngineError>> {
        let runs = self.geometry.parity_runs(w.offset, w.data.len() as u64);
        let mut by_stripe: SmallVec<[StripeWrite; 1]> = SmallVec::new();
        for run in runs {
            match by_stripe.last_mut() {
                Some(sw) if sw.stripe == run.stripe => sw.runs.push(run),
                _ => by_stripe.push(StripeWrite::new(run)),
            }
        }
        if let Some(max) = self.log_max_rows() {
            // Partial parity of one stripe write must fit one log write (md logs 4 KiB rows).
            by_stripe = by_stripe
                .into_iter()
                .flat_map(|sw| {
                    let lo = sw.runs.iter().map(|r| r.chunk_offset).min().expect("runs") / max * max;
                    let hi = sw.runs.iter().map(|r| r.chunk_offset + r.len).max().expect("runs");
                    if hi - lo <= max {
                        return smallvec![sw];
                    }
                    let bounds: Vec<(u64, u64)> =
                        (lo..hi).step_by(max as usize).map(|s| (s, (s + max).min(hi))).collect();
                    stripe_pieces(&sw, &bounds)
                })
                .collect();
        }
        w.stripes = by_stripe;
        w.remaining = w.stripes.len();
        w.unplanned = 0..w.stripes.len();
        // Requests already waiting for stripe memory go first.
        if self.memory_waiters.is_empty() {
            self.admit_stripes(rid, w);
        }
        if !w.unplanned.is_empty() {
            self.memory_waiters.push_back(rid);
        }
        (w.remaining == 0).then_some(Ok(()))
    }

    /// Upper bound of the stripe buffers one stripe write holds while in progress: the old
    /// contents of every member it may read, and the new contents and parity it writes, over
    /// the member rows it spans (the request's own data is the caller's and not counted).
    fn stripe_charge(&self, sw: &StripeWrite) -> u64 {
        let mut lo = sw.runs.iter().map(|r| r.chunk_offset).min().expect("a stripe write has runs");
        let mut hi = sw.runs.iter().map(|r| r.chunk_offset + r.len).max().expect("a stripe write has runs");
        if self.log.is_some() {
            lo = lo / crate::ppl::ROW_BYTES * crate::ppl::ROW_BYTES;
            hi = hi.div_ceil(crate::ppl::ROW_BYTES) * crate::ppl::ROW_BYTES;
        }
        2 * self.slots.len() as u64 * (hi - lo)
    }

    /// Plan the stripes of `w` not planned yet, in order, while the stripe memory allows. A
    /// stripe whose charge alone exceeds the limit is planned when nothing else holds memory
    /// (requests are never refused, and a stripe cannot be cut further than its rows; writes
    /// bigger than the limit are cut into stripes anyway, so a limit of a few stripes bounds
    /// everything). Without a log, the member writes of the stripes planned together that need
    /// no reads (full stripes) are merged per member: on every member, a stripe's chunk follows
    /// the previous stripe's, data and parity alike. With a log each stripe's writes wait for
    /// its own log write and are released stripe by stripe (`release_logged`), so they are not
    /// merged.
    fn admit_stripes(&mut self, rid: RequestId, w: &mut ParityWriteOp) {
        let merging = self.log.is_none();
        let outer = if merging { self.write_batch.replace(PartWrites::new()) } else { None };
        while let Some(part) = w.unplanned.clone().next() {
            let charge = self.stripe_charge(&w.stripes[part]);
            if self.stripe_memory > 0 && self.stripe_memory + charge > self.stripe_memory_limit {
                break;
            }
            w.unplanned.start += 1;
            w.stripes[part].charge = charge;
            self.stripe_memory += charge;
            self.stripe_memory_peak = self.stripe_memory_peak.max(self.stripe_memory);
            if self.plan_stripe_write(rid, w, part) {
                self.stripe_finished(w, part);
            }
        }
        if merging {
            let batch = std::mem::replace(&mut self.write_batch, outer).unwrap_or_default();
            self.emit_merged_writes(rid, &mut w.groups, batch);
        }
    }

    /// Emit `writes` (of the request's parts) merged per member (see [`merge_writes`]): a write
    /// covering one part is tagged with it, one covering several with `GROUP_PART` plus its
    /// index in `groups`, where the parts it covers are recorded.
    fn emit_merged_writes(&mut self, rid: RequestId, groups: &mut Vec<GroupParts>, writes: PartWrites) {
        for (slot, off, data, parts) in merge_writes(writes) {
            let part = match parts[..] {
                [part] => part,
                _ => {
                    groups.push(parts);
                    GROUP_PART + groups.len() - 1
                }
            };
            self.emit(rid, IoTag { part, slot }, off, MemberOp::Write { data });
        }
    }

    /// A stripe write is finished: its memory goes back.
    fn stripe_finished(&mut self, w: &mut ParityWriteOp, part: usize) {
        w.remaining -= 1;
        self.stripe_memory -= std::mem::take(&mut w.stripes[part].charge);
    }

    /// Let requests waiting for stripe memory plan more stripes, oldest first. Called where
    /// every request is in `ops`.
    fn admit_waiting(&mut self) {
        if self.admitting {
            return;
        }
        self.admitting = true;
        while let Some(&rid) = self.memory_waiters.front() {
            let mut op = self.ops.remove(&rid).expect("a request waiting for memory is open");
            let OpKind::ParityWrite(w) = &mut op.kind else { unreachable!("only parity writes wait for memory") };
            self.admit_stripes(rid, w);
            let left = w.unplanned.len();
            if left == 0 {
                self.memory_waiters.pop_front();
            }
            if w.remaining == 0 {
                self.finish(rid, op);
            } else {
                self.ops.insert(rid, op);
            }
            if left > 0 {
                break;
            }
        }
        self.admitting = false;
    }

    /// Bound the bytes of stripe buffers held by parity writes in progress (md's stripe cache
    /// size): a write waits for memory before planning a stripe that would exceed it (see
    /// `admit_stripes`). Default [`DEFAULT_STRIPE_MEMORY`].
    pub fn set_stripe_memory_limit(&mut self, bytes: u64) {
        self.stripe_memory_limit = bytes;
        self.admit_waiting();
    }

    pub fn stripe_memory_limit(&self) -> u64 {
        self.stripe_memory_limit
    }

    /// Bytes of stripe buffers held by parity writes in progress now (as charged by the limit).
    pub fn stripe_memory_in_use(&self) -> u64 {
        self.stripe_memory
    }

    /// The most [`Array::stripe_memory_in_use`] has been since the last call (or since the
    /// start); the count starts afresh from what is in use now.
    pub fn take_stripe_memory_peak(&mut self) -> u64 {
        std::mem::replace(&mut self.stripe_memory_peak, self.stripe_memory)
    }

    /// Choose a strategy for one stripe and issue its reads (or, with nothing to read, its
    /// writes). Returns true when the stripe is already finished (failed).
    fn plan_stripe_write(&mut self, rid: RequestId, w: &mut ParityWriteOp, part: usize) -> bool {
        if !self.readable() {
            w.error.get_or_insert(EngineError::ArrayFailed);
            return true;
        }
        let n = self.slots.len();
        let sw = &mut w.stripes[part];
        let roles = self.geometry.stripe_roles(sw.stripe);
        let mut lo = sw.runs.iter().map(|r| r.chunk_offset).min().expect("a stripe write has runs");
        let mut hi = sw.runs.iter().map(|r| r.chunk_offset + r.len).max().expect("a stripe write has runs");
        if self.log.is_some() {
            // Partial parity is logged in whole sectors, so the rows are read and parity
            // written whole.
            lo = lo / crate::ppl::ROW_BYTES * crate::ppl::ROW_BYTES;
            hi = hi.div_ceil(crate::ppl::ROW_BYTES) * crate::ppl::ROW_BYTES;
        }
        sw.lo = lo;
        sw.hi = hi;
        let parity_slots: Slots = std::iter::once(roles.p).chain(roles.q).collect();
        let touched: Slots = sw.runs.iter().map(|r| r.slot).collect();
        let fully_covered =
            |slot: usize| sw.runs.iter().any(|r| r.slot == slot && r.chunk_offset == lo && r.len == hi - lo);
        let slots = &self.slots;
        let bad = &sw.bad;
        // Old contents come from in-sync members only, and not from one whose read just failed.
        let readable = |s: usize| slots[s] == SlotState::InSync && !bad.contains(&s);
        let writable = |s: usize| matches!(slots[s], SlotState::InSync | SlotState::Recovering);
        let kept_parity: Slots = parity_slots.iter().copied().filter(|&s| writable(s)).collect();

        let strategy = if kept_parity.is_empty() {
            // No parity left to maintain: plain data writes.
            Strategy::DataOnly
        } else if !bad.is_empty() {
            // A read failed: rebuild every member's rows, so the failed ones can be rewritten.
            Strategy::Degraded
        } else {
            // Read-modify-write needs the old contents of every parity block it writes, so a
            // recovering parity member (or touched data member) rules it out.
            // With a partial parity log every syndrome must be known afresh (partial parity is
            // derived from it), so a parity member that cannot be read rules it out too.
            let logged = self.log.is_some();
            let rmw_possible = !self.resync_pending
                && touched.iter().all(|&s| readable(s))
                && kept_parity.iter().all(|&s| readable(s))
                && (!logged || parity_slots.iter().all(|&s| readable(s)));
            let rcw_needs: Slots = roles.data.iter().copied().filter(|&s| !fully_covered(s)).collect();
            let rcw_possible = rcw_needs.iter().all(|&s| readable(s));
            let rmw_reads = touched.len() + kept_parity.len();
            let rcw_reads = rcw_needs.len();
            match (rmw_possible, rcw_possible) {
                (true, true) if rmw_reads < rcw_reads => Strategy::ReadModifyWrite,
                (_, true) => Strategy::ReconstructWrite,
                (true, false) => Strategy::ReadModifyWrite,
                (false, false) => Strategy::Degraded,
            }
        };
        let reads: Slots = match strategy {
            Strategy::DataOnly => Slots::new(),
            Strategy::ReadModifyWrite => touched.iter().copied().chain(kept_parity.iter().copied()).collect(),
            Strategy::ReconstructWrite => roles.data.iter().copied().filter(|&s| !fully_covered(s)).collect(),
            Strategy::Degraded => (0..n).filter(|&s| readable(s)).collect(),
        };
        let chunk = self.geometry.chunk_bytes();
        let base = sw.stripe * chunk;
        if strategy == Strategy::Degraded && n - reads.len() > parity_slots.len() {
            w.error.get_or_insert(match sw.bad.first() {
                Some(&slot) => EngineError::UnrecoverableRead { slot, offset: base + lo, len: hi - lo },
                None => EngineError::ArrayFailed,
            });
            return true;
        }
        sw.strategy = strategy;
        sw.blocks = smallvec![None; n];
        sw.failed_read = false;
        sw.pending = reads.len();
        if reads.is_empty() {
            return self.write_stripe(rid, w, part, &roles);
        }
        for slot in reads {
            self.emit(rid, IoTag { part, slot }, base + lo, MemberOp::Read { len: hi - lo });
        }
        false
    }

    /// All reads of a stripe are in: compute the new parity and issue the writes.
    /// Returns true when the stripe is finished (nothing was left to write).
    fn write_stripe(&mut self, rid: RequestId, w: &mut ParityWriteOp, part: usize, roles: &StripeRoles) -> bool {
        let sw = &mut w.stripes[part];
        let (lo, hi) = (sw.lo, sw.hi);
        let len = (hi - lo) as usize;
        // New contents of each touched member over [lo, hi) where known.
        let overlay = |block: &mut [u8], slot: usize| {
            for r in sw.runs.iter().filter(|r| r.slot == slot) {
                let at = (r.chunk_offset - lo) as usize;
                let src = (r.logical - w.offset) as usize;
                block[at..at + r.len as usize].copy_from_slice(&w.data[src..src + r.len as usize]);
            }
        };
        // The request's bytes for `slot`, when one run writes all of its rows [lo, hi).
        let request_rows = |slot: usize| -> Option<&[u8]> {
            let r = sw.runs.iter().find(|r| r.slot == slot && r.chunk_offset == lo && r.len == hi - lo)?;
            let src = (r.logical - w.offset) as usize;
            Some(&w.data[src..src + len])
        };
        // Members written over the whole of [lo, hi): parity, and data members whose read failed
        // (their rows are rewritten in full, which is the correction).
        let mut whole: SmallVec<[(usize, Vec<u8>); 2]> = SmallVec::new();
        // New contents over [lo, hi) of the data members the write touches, by slot, kept for
        // the partial parity log.
        let logging = self.log.is_some() && sw.strategy != Strategy::DataOnly;
        let mut new_blocks: StripeBlocks =
            if logging { smallvec![None; self.slots.len()] } else { StripeBlocks::new() };
        match sw.strategy {
            Strategy::DataOnly => {}
            Strategy::ReadModifyWrite => {
                let mut p = sw.blocks[roles.p].take();
                let mut q = roles.q.and_then(|q| sw.blocks[q].take());
                let mut touched: Slots = sw.runs.iter().map(|r| r.slot).collect();
                touched.sort_unstable();
                touched.dedup();
                for slot in touched {
                    let old = sw.blocks[slot].take().expect("RMW read the old data");
                    // A member written over all of [lo, hi) takes its new contents straight
                    // from the request; only a partly written one needs a merged copy.
                    let mut merged = None;
                    let new: &[u8] = match request_rows(slot) {
                        Some(rows) => rows,
                        None => {
                            let mut block = self.parity_blocks.take(len);
                            block.copy_from_slice(&old);
                            overlay(&mut block, slot);
                            &*merged.insert(block)
                        }
                    };
                    let qslot = roles.syndrome_slot[slot].unwrap_or(0);
                    match (&mut p, &mut q) {
                        (Some(p), q) => uraid_parity::update_pq(p, q.as_deref_mut(), qslot, &old, new),
                        (None, Some(q)) => {
                            let mut scratch = vec![0u8; len];
                            uraid_parity::update_pq(&mut scratch, Some(q), qslot, &old, new);
                        }
                        (None, None) => unreachable!("RMW is chosen only with live parity"),
                    }
                    if logging {
                        new_blocks[slot] = Some(new.to_vec());
                    }
                    if let Some(block) = merged {
                        self.parity_blocks.put(block);
                    }
                }
                if let Some(p) = p {
                    whole.push((roles.p, p));
                }
                if let (Some(qs), Some(q)) = (roles.q, q) {
                    whole.push((qs, q));
                }
            }
            Strategy::ReconstructWrite | Strategy::Degraded => {
                let mut blocks = std::mem::take(&mut sw.blocks);
                if sw.strategy == Strategy::Degraded {
                    // Rebuild the old contents of every member not read first.
                    let missing: Vec<usize> = (0..blocks.len()).filter(|&s| blocks[s].is_none()).collect();
                    reconstruct(roles, &mut blocks, &missing, len);
                }
                // New contents per data member: merged into its old rows where it has them,
                // else straight from the request when it writes them all (no copy), else
                // the request's pieces over zeros.
                for &slot in &roles.data {
                    match blocks[slot].as_mut() {
                        Some(b) => overlay(b, slot),
                        None if request_rows(slot).is_some() => {}
                        None => {
                            let mut b = vec![0u8; len];
                            overlay(&mut b, slot);
                            blocks[slot] = Some(b);
                        }
                    }
                }
                let new_data = |slot: usize| -> &[u8] {
                    blocks[slot]
                        .as_deref()
                        .or_else(|| request_rows(slot))
                        .expect("every data member's new rows are known")
                };
                for &slot in &roles.data {
                    if sw.bad.contains(&slot) {
                        whole.push((slot, new_data(slot).to_vec()));
                    }
                    if logging && sw.runs.iter().any(|r| r.slot == slot) {
                        new_blocks[slot] = Some(new_data(slot).to_vec());
                    }
                }
                let data: SmallVec<[&[u8]; 16]> = roles.data.iter().map(|&slot| new_data(slot)).collect();
                let mut p = self.parity_blocks.take(len);
                let mut q = roles.q.map(|_| self.parity_blocks.take(len));
                let zeros = if roles.syndrome_disks > data.len() { self.parity_blocks.zeros(len) } else { &[] };
                compute_parity_into(roles, &data, zeros, &mut p, q.as_deref_mut());
                whole.push((roles.p, p));
                if let (Some(qs), Some(q)) = (roles.q, q) {
                    whole.push((qs, q));
                }
            }
        }
        // New parity, kept for the partial parity log.
        let new_p = logging.then(|| whole.iter().find(|(s, _)| *s == roles.p).map(|(_, b)| b.clone())).flatten();
        let new_q = logging
            .then(|| roles.q.and_then(|qs| whole.iter().find(|(s, _)| *s == qs)).map(|(_, b)| b.clone()))
            .flatten();
        let chunk = self.geometry.chunk_bytes();
        let base = sw.stripe * chunk;
        let mut writes = StripeMemberWrites::new();
        for r in &sw.runs {
            if self.writable(r.slot) && !whole.iter().any(|(s, _)| *s == r.slot) {
                let src = (r.logical - w.offset) as usize;
                writes.push((r.slot, base + r.chunk_offset, w.data.slice(src..src + r.len as usize), false));
            }
        }
        for (slot, block) in whole {
            if self.writable(slot) {
                let correction = sw.bad.contains(&slot) && self.in_sync(slot);
                writes.push((slot, base + lo, Bytes::from(block), correction));
            }
        }
        sw.blocks = smallvec![None; self.slots.len()];
        sw.writing = true;
        sw.pending = writes.len();
        if writes.is_empty() {
            return true;
        }
        if logging {
            if let Some(log_slot) = self.log_slot_for(roles.p, roles.q) {
                // Hold the writes back until partial parity for these rows is durable.
                let p = new_p.as_deref();
                let q = new_q.as_deref();
                let rows = ((hi - lo) / crate::ppl::ROW_BYTES) as usize;
                let modified: Vec<Vec<bool>> = roles
                    .data
                    .iter()
                    .map(|&slot| {
                        (0..rows as u64)
                            .map(|row| {
                                let (start, end) =
                                    (lo + row * crate::ppl::ROW_BYTES, lo + (row + 1) * crate::ppl::ROW_BYTES);
                                sw.runs
                                    .iter()
                                    .any(|r| r.slot == slot && r.chunk_offset < end && start < r.chunk_offset + r.len)
                            })
                            .collect()
                    })
                    .collect();
                let new_data: Vec<Option<&[u8]>> = roles.data.iter().map(|&slot| new_blocks[slot].as_deref()).collect();
                let p = p.expect("a logged write computes P");
                let change = crate::ppl::StripeChange {
                    stripe: sw.stripe,
                    lo,
                    hi,
                    modified: &modified,
                    new_data: &new_data,
                    p,
                    q,
                };
                let (entries, pp) = crate::ppl::stripe_entries(&self.geometry, &change);
                if !entries.is_empty() {
                    sw.pending = 0;
                    sw.deferred = writes;
                    sw.log_slot = Some(log_slot);
                    self.log_enqueue(
                        log_slot,
                        logging::Logged { item: logging::Item::Stripe { rid, part }, entries, pp },
                    );
                    return false;
                }
            }
        }
        self.emit_stripe_writes(rid, part, writes);
        false
    }

    /// Send a stripe's member writes: `(slot, offset, bytes, is a correction)`.
    fn emit_stripe_writes(&mut self, rid: RequestId, part: usize, writes: StripeMemberWrites) {
        for (slot, off, data, correction) in writes {
            let tag = IoTag { part, slot };
            // Writes wait for the log: by now the slot may hold another device, which gets the
            // block as a plain write.
            if correction && self.in_sync(slot) {
                self.emit_correction(rid, tag, off, data.into());
            } else if let Some(batch) = self.write_batch.as_mut() {
                // Merged with the other stripes planned with it (see `admit_stripes`).
                batch.push((part, slot, off, data));
            } else {
                self.emit(rid, tag, off, MemberOp::Write { data: data.into() });
            }
        }
    }

    fn parity_write_io_done(&mut self, rid: RequestId, w: &mut ParityWriteOp, tag: IoTag, outcome: Outcome) -> bool {
        if tag.part >= GROUP_PART {
            // A merged write: every stripe it covers has one write fewer to wait for (its
            // outcome does not matter to a stripe that is writing: a failure made the member
            // faulty).
            let mut done = false;
            for part in w.groups[tag.part - GROUP_PART].clone() {
                done = self.parity_write_io_done(rid, w, IoTag { part, slot: tag.slot }, Outcome::Done);
            }
            return done;
        }
        let part = tag.part;
        let sw = &mut w.stripes[part];
        sw.pending -= 1;
        let mut stripe_done = false;
        if sw.writing {
            if sw.pending == 0 {
                stripe_done = true;
                if sw.log_slot.take().is_some() {
                    self.log_stripe_done(rid, part);
                }
                // Failed writes made members faulty; the data is still there if the array is
                // within its redundancy.
                if !self.readable() {
                    w.error.get_or_insert(EngineError::ArrayFailed);
                }
            }
        } else {
            match outcome {
                Outcome::Data(data) => sw.blocks[tag.slot] = Some(data.into()),
                Outcome::ReadError => {
                    sw.bad.push(tag.slot);
                    sw.failed_read = true;
                }
                Outcome::Done | Outcome::Lost => sw.failed_read = true,
            }
            if sw.pending == 0 {
                if !sw.bad.is_empty() && row_pieces(sw.lo, sw.hi - sw.lo).len() > 1 {
                    self.split_stripe_write(rid, w, part);
                    return w.remaining == 0;
                } else if sw.failed_read {
                    // A member failed under us (or a read failed): plan again without it.
                    stripe_done = self.plan_stripe_write(rid, w, part);
                } else {
                    let roles = self.geometry.stripe_roles(w.stripes[part].stripe);
                    stripe_done = self.write_stripe(rid, w, part, &roles);
                }
            }
        }
        if stripe_done {
            self.stripe_finished(w, part);
        }
        w.remaining == 0
    }

    /// A read error hit a stripe write spanning several 4 KiB rows: replace it by one stripe
    /// write per row (see `split_read_part`) and plan those afresh. The old one is finished.
    fn split_stripe_write(&mut self, rid: RequestId, w: &mut ParityWriteOp, part: usize) {
        let sw = &w.stripes[part];
        let bounds: Vec<(u64, u64)> = row_pieces(sw.lo, sw.hi - sw.lo)
            .into_iter()
            .map(|(delta, len)| (sw.lo + delta, sw.lo + delta + len))
            .collect();
        let mut pieces = stripe_pieces(sw, &bounds);
        // The pieces take over the stripe's memory: they span its rows, so no more.
        self.stripe_memory -= std::mem::take(&mut w.stripes[part].charge);
        for piece in &mut pieces {
            piece.charge = self.stripe_charge(piece);
            self.stripe_memory += piece.charge;
        }
        let first = w.stripes.len();
        w.remaining += pieces.len();
        w.stripes.extend(pieces);
        for piece in first..w.stripes.len() {
            if self.plan_stripe_write(rid, w, piece) {
                self.stripe_finished(w, piece);
            }
        }
        self.stripe_finished(w, part);
    }

    // ----- consistency check / repair ------------------------------------------------------------

    fn start_sync(&mut self, rid: RequestId, s: &mut SyncOp) -> Option<Result<(), EngineError>> {
        // A recovering member is simply left out of the comparison. On parity levels a missing
        // or faulty one takes away what parity could be checked against, except on raid6 short
        // of one member: the member is rebuilt from P and Q is checked against it (or, where it
        // is P or Q, the other syndrome against the data). Mirrors compare the copies that are
        // there (md's raid1/raid10 resync does the same), and a chunk left with one copy has
        // nothing to disagree with.
        let lost = self.slots.iter().filter(|st| matches!(st, SlotState::Missing | SlotState::Faulty)).count();
        if self.geometry.parity().is_some() && lost > 0 && lost + 1 > self.geometry.max_degraded() {
            return Some(Err(EngineError::DegradedCheck));
        }
        let n = self.slots.len();
        s.in_sync_at_start = (0..n).map(|slot| self.in_sync(slot)).collect();
        match &self.geometry {
            Geometry::Linear(_) | Geometry::Raid0(_) => return Some(Ok(())),
            Geometry::Parity(_) => {
                let width = self.geometry.stripe_data_bytes().expect("parity geometry");
                let chunk = self.geometry.chunk_bytes();
                let first = s.offset / width;
                let last = (s.offset + s.len).div_ceil(width);
                for stripe in first..last {
                    let copies = (0..n).map(|slot| (slot, stripe * chunk)).collect();
                    s.units.push(SyncUnit::new(Some(stripe), copies, chunk, n));
                }
            }
            Geometry::Raid1(_) | Geometry::Raid10(_) => {
                // Whole rows, so a copy whose read fails is rewritten in whole rows of the
                // reference copy, and repairs too.
                let (offset, len) = self.mirror_rows(s.offset, s.len, self.size_bytes());
                // Copies it rewrites take the reference copy's bytes, which need not be the
                // ones read ahead.
                self.readahead_forget(offset, len);
                for run in self.geometry.runs(offset, len) {
                    s.units.push(SyncUnit::new(None, run.copies.into_vec(), run.len, n));
                }
            }
        }
        s.remaining = s.units.len();
        for part in 0..s.units.len() {
            if self.start_sync_unit(rid, s, part) {
                s.remaining -= 1;
            }
        }
        (s.remaining == 0).then_some(Ok(()))
    }

    /// Read every in-sync member block of a check unit. Returns true when the unit is finished.
    fn start_sync_unit(&mut self, rid: RequestId, s: &mut SyncOp, part: usize) -> bool {
        let unit = &mut s.units[part];
        let count = |state: SlotState| unit.copies.iter().filter(|&&(slot, _)| self.slots[slot] == state).count();
        if unit.stripe.is_none() && count(SlotState::InSync) < 2 && !(s.repair && count(SlotState::Recovering) > 0) {
            // A mirror chunk with a single good copy and nothing to fill: nothing to compare.
            return true;
        }
        for &(slot, off) in &unit.copies {
            if self.in_sync(slot) {
                unit.pending += 1;
                self.emit(rid, IoTag { part, slot }, off, MemberOp::Read { len: unit.len });
            }
        }
        unit.pending == 0 && self.sync_unit_read(rid, s, part)
    }

    /// A read error hit a check unit spanning several 4 KiB rows: replace it by one unit per
    /// row (see `split_read_part`) and check those afresh. The old one is finished.
    fn split_sync_unit(&mut self, rid: RequestId, s: &mut SyncOp, part: usize) {
        let unit = &s.units[part];
        let n = self.slots.len();
        let pieces: Vec<SyncUnit> = row_pieces(unit.copies[0].1, unit.len)
            .into_iter()
            .map(|(delta, len)| {
                let copies = unit.copies.iter().map(|&(slot, off)| (slot, off + delta)).collect();
                SyncUnit::new(unit.stripe, copies, len, n)
            })
            .collect();
        let first = s.units.len();
        s.remaining += pieces.len();
        s.units.extend(pieces);
        for piece in first..s.units.len() {
            if self.start_sync_unit(rid, s, piece) {
                s.remaining -= 1;
            }
        }
        s.remaining -= 1;
    }

    fn sync_io_done(&mut self, rid: RequestId, s: &mut SyncOp, tag: IoTag, outcome: Outcome) -> bool {
        let unit = &mut s.units[tag.part];
        unit.pending -= 1;
        match outcome {
            Outcome::Data(data) if !unit.writing => unit.blocks[tag.slot] = Some(data.into()),
            Outcome::ReadError => unit.bad.push(tag.slot),
            // A member that was in sync when the check began failed, or was failed, under it:
            // the array is degraded and the check cannot vouch for anything.
            Outcome::Lost if s.in_sync_at_start[tag.slot] => {
                s.error.get_or_insert(EngineError::DegradedCheck);
            }
            _ => {}
        }
        if unit.pending > 0 {
            return false;
        }
        if !unit.writing
            && s.error.is_none()
            && !unit.bad.is_empty()
            && row_pieces(unit.copies[0].1, unit.len).len() > 1
        {
            self.split_sync_unit(rid, s, tag.part);
            return s.remaining == 0;
        }
        if unit.writing || s.error.is_some() || self.sync_unit_read(rid, s, tag.part) {
            s.remaining -= 1;
        }
        s.remaining == 0
    }

    /// Every read of a check unit is in: compare, count, and issue corrections and repairs.
    /// Returns true when the unit is finished (nothing to write).
    fn sync_unit_read(&mut self, rid: RequestId, s: &mut SyncOp, part: usize) -> bool {
        let unit = &mut s.units[part];
        let len = unit.len as usize;
        // Rows to write: (slot, member offset, bytes, whether it corrects a failed read).
        let mut writes: Vec<(usize, u64, Vec<u8>, bool)> = Vec::new();
        let was_read: Vec<bool> = unit.blocks.iter().map(Option::is_some).collect();
        let recovering: Vec<usize> =
            unit.copies.iter().map(|c| c.0).filter(|&slot| self.slots[slot] == SlotState::Recovering).collect();
        match unit.stripe {
            Some(stripe) => {
                let roles = self.geometry.stripe_roles(stripe);
                let missing: Vec<usize> = (0..was_read.len()).filter(|&slot| !was_read[slot]).collect();
                if missing.len() > 1 + usize::from(roles.q.is_some()) {
                    s.error.get_or_insert(match unit.bad.first() {
                        Some(&slot) => EngineError::UnrecoverableRead { slot, offset: unit.copies[0].1, len: unit.len },
                        None => EngineError::ArrayFailed,
                    });
                    return true;
                }
                // Members not read (recovering, or whose read failed) are rebuilt first: for
                // raid6 with one of them a data member, Q can still be checked.
                reconstruct(&roles, &mut unit.blocks, &missing, len);
                let data: Vec<&[u8]> =
                    roles.data.iter().map(|&d| unit.blocks[d].as_deref().expect("rebuilt")).collect();
                let (p, q) = compute_parity(&roles, &data, len);
                let mut targets = vec![(roles.p, p)];
                if let (Some(qs), Some(q)) = (roles.q, q) {
                    targets.push((qs, q));
                }
                // The unit may be one row cut out of its stripe after a read error: its own
                // offset, not the stripe's start, is where its rows are.
                let base = unit.copies[0].1;
                for row in (0..unit.len).step_by(CHECK_ROW_BYTES as usize) {
                    let r = row as usize..(row + CHECK_ROW_BYTES).min(unit.len) as usize;
                    let compared: Vec<&(usize, Vec<u8>)> = targets.iter().filter(|(slot, _)| was_read[*slot]).collect();
                    let bad = compared
                        .iter()
                        .any(|(slot, want)| want[r.clone()] != unit.blocks[*slot].as_ref().expect("read")[r.clone()]);
                    if bad {
                        s.mismatch_sectors += (r.end - r.start) as u64 / SECTOR_BYTES;
                        if s.repair {
                            for (slot, want) in compared {
                                writes.push((*slot, base + row, want[r.clone()].to_vec(), false));
                            }
                        }
                    }
                }
                // The right contents of a member: recomputed parity, or its (rebuilt) data.
                let correct = |slot: usize| match targets.iter().find(|(t, _)| *t == slot) {
                    Some((_, want)) => want.clone(),
                    None => unit.blocks[slot].clone().expect("rebuilt"),
                };
                for &slot in &unit.bad {
                    writes.push((slot, base, correct(slot), true));
                }
                if s.repair {
                    for &slot in &recovering {
                        writes.push((slot, base, correct(slot), false));
                    }
                }
            }
            None => {
                // md compares every copy against the first one read.
                let Some(&(first, _)) = unit.copies.iter().find(|c| was_read[c.0]) else {
                    s.error.get_or_insert(match unit.bad.first() {
                        Some(&slot) => {
                            let offset = unit.copies.iter().find(|c| c.0 == slot).expect("a copy").1;
                            EngineError::UnrecoverableRead { slot, offset, len: unit.len }
                        }
                        None => EngineError::ArrayFailed,
                    });
                    return true;
                };
                let reference = unit.blocks[first].take().expect("read");
                for row in (0..unit.len).step_by(CHECK_ROW_BYTES as usize) {
                    let r = row as usize..(row + CHECK_ROW_BYTES).min(unit.len) as usize;
                    let mut bad = false;
                    for &(slot, off) in &unit.copies {
                        let Some(other) = unit.blocks[slot].as_ref() else { continue };
                        if other[r.clone()] != reference[r.clone()] {
                            bad = true;
                            if s.repair {
                                writes.push((slot, off + row, reference[r.clone()].to_vec(), false));
                            }
                        }
                    }
                    if bad {
                        s.mismatch_sectors += (r.end - r.start) as u64 / SECTOR_BYTES;
                    }
                }
                for &(slot, off) in &unit.copies {
                    let fix = unit.bad.contains(&slot);
                    if fix || (s.repair && recovering.contains(&slot)) {
                        writes.push((slot, off, reference.clone(), fix));
                    }
                }
            }
        }
        unit.blocks.iter_mut().for_each(|b| *b = None);
        unit.writing = true;
        for (slot, off, data, correction) in writes {
            if !self.writable(slot) || (correction && !self.in_sync(slot)) {
                continue;
            }
            unit.pending += 1;
            let tag = IoTag { part, slot };
            if correction {
                self.emit_correction(rid, tag, off, data.into());
            } else {
                self.emit(rid, tag, off, MemberOp::Write { data: data.into() });
            }
        }
        unit.pending == 0
    }

    // ----- recovery -------------------------------------------------------------------------------

    /// Locks for rebuilding member bytes `[offset, offset+len)`: the logical ranges stored
    /// there, as exclusive locks, so foreground writes and the rebuild never interleave.
    fn recover_locks(&self, offset: u64, len: u64) -> Vec<Lock> {
        let end = offset + len;
        match &self.geometry {
            // Stripe s occupies member bytes [s*chunk, (s+1)*chunk) on every member.
            Geometry::Parity(_) => {
                let chunk = self.geometry.chunk_bytes();
                let width = self.geometry.stripe_data_bytes().expect("parity geometry");
                vec![(offset / chunk * width, end.div_ceil(chunk) * width, true)]
            }
            Geometry::Raid1(_) => vec![(offset, end, true)],
            // The logical data of a member range is scattered (far copies, near copies on other
            // members). Which slots the request rebuilds is decided when it starts, so lock what
            // the range holds on every slot: correct whatever is recovering by then.
            Geometry::Raid10(_) => {
                let mut ranges: Vec<(u64, u64)> = Vec::new();
                for slot in 0..self.slots.len() {
                    for (_, logical, piece) in self.member_pieces(slot, offset, len) {
                        if let Some(l) = logical {
                            ranges.push((l, l + piece));
                        }
                    }
                }
                ranges.sort_unstable();
                let mut merged: Vec<Lock> = Vec::new();
                for (s, e) in ranges {
                    match merged.last_mut() {
                        Some(last) if s <= last.1 => last.1 = last.1.max(e),
                        _ => merged.push((s, e, true)),
                    }
                }
                merged
            }
            Geometry::Linear(_) | Geometry::Raid0(_) => Vec::new(),
        }
    }

    /// Split member bytes `[offset, offset+len)` of `slot` at chunk boundaries: `(member
    /// offset, logical offset stored there if any, length)` per piece (raid10).
    fn member_pieces(&self, slot: usize, offset: u64, len: u64) -> Vec<(u64, Option<u64>, u64)> {
        let chunk = self.geometry.chunk_bytes();
        let end = offset + len;
        let mut out = Vec::new();
        let mut pos = offset;
        while pos < end {
            let piece = (chunk - pos % chunk).min(end - pos);
            out.push((pos, self.geometry.logical(slot, pos), piece));
            pos += piece;
        }
        out
    }

    fn start_recover(&mut self, rid: RequestId, r: &mut RecoverOp) -> Option<Result<(), EngineError>> {
        let targets: Vec<usize> = (0..self.slots.len()).filter(|&s| self.slots[s] == SlotState::Recovering).collect();
        if targets.is_empty() {
            // Whatever was recovering finished or failed since the request was submitted.
            return Some(Ok(()));
        }
        let n = self.slots.len();
        let end = r.offset + r.len;
        // Mirrors rebuild whole rows, so a copy whose read fails is rewritten in whole rows.
        let (rows_offset, rows_len) = self.mirror_rows(r.offset, r.len, self.geometry.member_data_bytes());
        match &self.geometry {
            Geometry::Linear(_) | Geometry::Raid0(_) => {
                return Some(Err(EngineError::NoRedundancy { level: self.geometry.level().to_string() }));
            }
            Geometry::Parity(_) => {
                let chunk = self.geometry.chunk_bytes();
                let mut pos = r.offset;
                while pos < end {
                    let stripe = pos / chunk;
                    let rows_end = ((stripe + 1) * chunk).min(end);
                    let rows = Rows::new(pos, rows_end - pos, n, Vec::new());
                    r.units.push(RecoverUnit::Stripe { stripe, rows, targets: targets.clone(), writing: false });
                    pos = rows_end;
                }
            }
            Geometry::Raid1(_) => {
                for run in self.geometry.runs(rows_offset, rows_len) {
                    let to = run.copies.iter().copied().filter(|c| targets.contains(&c.0)).collect();
                    r.units.push(RecoverUnit::Copies(CopyUnit::new(run.copies, run.len, to)));
                }
            }
            Geometry::Raid10(_) => {
                // For each piece of each recovering member, the logical bytes stored there; a
                // piece that another recovering member also holds shares one read.
                for &target in &targets {
                    for (member_off, logical, piece) in self.member_pieces(target, rows_offset, rows_len) {
                        // Member chunks past the last whole array chunk hold nothing (md's
                        // recovery skips them too).
                        let Some(logical) = logical else { continue };
                        for run in self.geometry.runs(logical, piece) {
                            let at = (target, member_off + (run.logical - logical));
                            debug_assert!(run.copies.contains(&at), "raid10 inverse map disagrees with map");
                            let same = r.units.iter_mut().find_map(|u| match u {
                                RecoverUnit::Copies(c) if c.copies == run.copies && c.len == run.len => Some(c),
                                _ => None,
                            });
                            match same {
                                Some(unit) => unit.targets.push(at),
                                None => r.units.push(RecoverUnit::Copies(CopyUnit::new(run.copies, run.len, vec![at]))),
                            }
                        }
                    }
                }
            }
        }
        r.remaining = r.units.len();
        for part in 0..r.units.len() {
            let step = self.start_recover_unit(rid, r, part);
            r.settle(step);
        }
        (r.remaining == 0).then_some(Ok(()))
    }

    /// Issue the reads of one recovery unit. `Some` when the unit is finished.
    fn start_recover_unit(
        &mut self,
        rid: RequestId,
        r: &mut RecoverOp,
        part: usize,
    ) -> Option<Result<(), EngineError>> {
        match &mut r.units[part] {
            RecoverUnit::Copies(unit) => self.issue_copy_read(rid, part, unit),
            RecoverUnit::Stripe { rows, .. } => {
                self.read_rows(rid, part, rows, None);
                if rows.pending == 0 {
                    self.recover_stripe_read(rid, r, part)
                } else {
                    None
                }
            }
        }
    }

    /// A read error hit a recovery unit spanning several 4 KiB rows: replace it by one unit per
    /// row (see `split_read_part`) and start those afresh. The old one is finished.
    fn split_recover_unit(&mut self, rid: RequestId, r: &mut RecoverOp, part: usize) {
        let n = self.slots.len();
        let pieces: Vec<RecoverUnit> = match &r.units[part] {
            RecoverUnit::Copies(unit) => {
                unit.row_pieces().into_iter().map(|(delta, len)| RecoverUnit::Copies(unit.piece(delta, len))).collect()
            }
            RecoverUnit::Stripe { stripe, rows, targets, .. } => row_pieces(rows.offset, rows.len)
                .into_iter()
                .map(|(delta, len)| RecoverUnit::Stripe {
                    stripe: *stripe,
                    rows: Rows::new(rows.offset + delta, len, n, Vec::new()),
                    targets: targets.clone(),
                    writing: false,
                })
                .collect(),
        };
        let first = r.units.len();
        r.remaining += pieces.len();
        r.units.extend(pieces);
        for piece in first..r.units.len() {
            let step = self.start_recover_unit(rid, r, piece);
            r.settle(step);
        }
        r.settle(Some(Ok(())));
    }

    /// Every read of a stripe's rows is in: rebuild the recovering members' rows (and those
    /// whose read failed) and write them. `Some` when the unit is finished.
    fn recover_stripe_read(
        &mut self,
        rid: RequestId,
        r: &mut RecoverOp,
        part: usize,
    ) -> Option<Result<(), EngineError>> {
        let RecoverUnit::Stripe { stripe, rows, targets, writing } = &mut r.units[part] else {
            unreachable!("a stripe unit")
        };
        let roles = self.geometry.stripe_roles(*stripe);
        if let Err(e) = rows.rebuild(&roles) {
            return Some(Err(e));
        }
        *writing = true;
        let mut issued = self.rewrite_bad_rows(rid, part, rows);
        for &slot in targets.iter() {
            if self.writable(slot) && !rows.bad.contains(&slot) {
                let data = rows.blocks[slot].clone().expect("rebuilt");
                self.emit(rid, IoTag { part, slot }, rows.offset, MemberOp::Write { data: data.into() });
                issued += 1;
            }
        }
        rows.pending = issued;
        (issued == 0).then_some(Ok(()))
    }

    fn recover_io_done(&mut self, rid: RequestId, r: &mut RecoverOp, tag: IoTag, outcome: Outcome) -> bool {
        let part = tag.part;
        let step = match &mut r.units[part] {
            RecoverUnit::Copies(unit) => {
                if matches!(outcome, Outcome::ReadError) && !unit.writing && unit.row_pieces().len() > 1 {
                    self.split_recover_unit(rid, r, part);
                    return r.remaining == 0;
                }
                self.copy_unit_step(rid, part, unit, tag.slot, outcome, None)
            }
            RecoverUnit::Stripe { rows, writing, .. } => {
                if *writing {
                    rows.pending -= 1;
                    (rows.pending == 0).then_some(Ok(()))
                } else {
                    rows.absorb(tag.slot, outcome);
                    if rows.pending > 0 {
                        None
                    } else if !rows.bad.is_empty() && row_pieces(rows.offset, rows.len).len() > 1 {
                        self.split_recover_unit(rid, r, part);
                        return r.remaining == 0;
                    } else {
                        self.recover_stripe_read(rid, r, part)
                    }
                }
            }
        };
        r.settle(step);
        r.remaining == 0
    }
}

fn check_range(offset: u64, len: u64, size: u64) -> Result<(), EngineError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(EngineError::OutOfRange { offset, len, size }),
    }
}

/// P (and Q) over the data blocks of a stripe, given in data-index order, in new blocks.
pub fn compute_parity(roles: &StripeRoles, data: &[&[u8]], len: usize) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut p = vec![0u8; len];
    let mut q = roles.q.map(|_| vec![0u8; len]);
    let zeros = if roles.syndrome_disks > data.len() { vec![0u8; len] } else { Vec::new() };
    compute_parity_into(roles, data, &zeros, &mut p, q.as_deref_mut());
    (p, q)
}

/// P (and, on raid6, Q) over the data blocks of a stripe, given in data-index order, written
/// over whatever `p` and `q` held. Syndrome slots that hold no data (P and Q's own under DDF
/// layouts) count as zeros, which `zeros` provides: at least as long as `p` when there are any.
pub fn compute_parity_into(roles: &StripeRoles, data: &[&[u8]], zeros: &[u8], p: &mut [u8], q: Option<&mut [u8]>) {
    match (roles.q, q) {
        (None, _) => uraid_parity::gen_p(p, data),
        (Some(_), Some(q)) => {
            let zero = if roles.syndrome_disks > data.len() { &zeros[..p.len()] } else { &[][..] };
            let mut by_slot: SmallVec<[&[u8]; 16]> = smallvec![zero; roles.syndrome_disks];
            for (i, &member) in roles.data.iter().enumerate() {
                let slot = roles.syndrome_slot[member].expect("data member has a syndrome slot");
                by_slot[slot] = data[i];
            }
            uraid_parity::gen_pq(p, q, &by_slot);
        }
        (Some(_), None) => panic!("raid6 parity needs a block for Q"),
    }
}

/// Fill in `blocks[m]` for every member `m` in `missing` (at most the level's redundancy),
/// from the others. `blocks` is indexed by member slot.
pub fn reconstruct(roles: &StripeRoles, blocks: &mut [Option<Vec<u8>>], missing: &[usize], len: usize) {
    if missing.is_empty() {
        return;
    }
    match roles.q {
        None => {
            assert_eq!(missing.len(), 1, "raid4/5 can rebuild one member");
            let m = missing[0];
            let mut out = vec![0u8; len];
            for (slot, b) in blocks.iter().enumerate() {
                if slot != m {
                    uraid_parity::xor_into(&mut out, b.as_ref().expect("surviving member was read"));
                }
            }
            blocks[m] = Some(out);
        }
        Some(q) => {
            assert!(missing.len() <= 2, "raid6 can rebuild two members");
            let n = roles.syndrome_disks;
            // Arrange as the parity crate wants: data by syndrome slot, then P, then Q.
            let mut arranged: Vec<Vec<u8>> = vec![vec![0u8; len]; n + 2];
            let index_of = |member: usize| -> usize {
                if member == roles.p {
                    n
                } else if member == q {
                    n + 1
                } else {
                    roles.syndrome_slot[member].expect("data member has a syndrome slot")
                }
            };
            for (member, b) in blocks.iter().enumerate() {
                if let Some(b) = b {
                    arranged[index_of(member)].copy_from_slice(b);
                }
            }
            let lost: Vec<usize> = missing.iter().map(|&m| index_of(m)).collect();
            let mut refs: Vec<&mut [u8]> = arranged.iter_mut().map(Vec::as_mut_slice).collect();
            uraid_parity::raid6_recover(&mut refs, &lost);
            for &m in missing {
                blocks[m] = Some(arranged[index_of(m)].clone());
            }
        }
    }
}

/// One run of bytes with copies on several members (raid1/raid10, or the single copy of
/// linear/raid0): read from the first in-sync copy that answers, then written to `targets` and
/// back to every copy whose read failed.
#[derive(Debug)]
struct CopyUnit {
    len: u64,
    /// Every copy as `(slot, member offset)`, in md's copy order.
    copies: Copies,
    /// The index in `copies` of the copy to read first: the one read balancing chose (0, md's
    /// first copy, where nothing was chosen: recovery).
    first: usize,
    /// Copies tried so far, in order from `first`.
    tried: usize,
    /// Copies whose read failed: they get the bytes back once a good copy was read.
    bad: Vec<(usize, u64)>,
    /// Copies on recovering members to fill (recovery only).
    targets: Vec<(usize, u64)>,
    /// Once a copy's read failed, what is read from the others, as `(bytes before the unit,
    /// length)`: the unit's whole 4 KiB row (whole sectors if no copy can read the row). The
    /// failed copies get all of it back, one copy's version of every sector: while copies
    /// disagree (after a crash, before the resync has passed), rewriting just the unit's bytes
    /// would leave the sectors at its edges part one version, part another.
    wide: Option<(u64, u64)>,
    writing: bool,
    /// Writes issued and not completed.
    pending: usize,
}

impl CopyUnit {
    fn new(copies: Copies, len: u64, targets: Vec<(usize, u64)>) -> CopyUnit {
        CopyUnit { len, copies, first: 0, tried: 0, bad: Vec::new(), targets, wide: None, writing: false, pending: 0 }
    }

    /// The unit widened to whole `unit`s of bytes, not past member byte `limit`, as `(bytes
    /// before the unit, length)`. The same for every copy (see `row_pieces`).
    fn widened(&self, unit: u64, limit: u64) -> (u64, u64) {
        let offset = self.copies[0].1;
        let (start, len) = widen(offset, self.len, unit, limit);
        (offset - start, len)
    }

    /// The unit's 4 KiB member rows, as `(offset into the unit, length)`. Every copy sits at the
    /// same offset modulo the row size (raid1: the same offset; raid10: the same offset in a
    /// chunk of whole rows), so the first copy's rows are every copy's rows.
    fn row_pieces(&self) -> Vec<(u64, u64)> {
        row_pieces(self.copies[0].1, self.len)
    }

    /// A fresh unit for the bytes `[delta, delta+len)` of this one, read first from the same
    /// copy.
    fn piece(&self, delta: u64, len: u64) -> CopyUnit {
        fn shift<C: FromIterator<(usize, u64)>>(v: &[(usize, u64)], delta: u64) -> C {
            v.iter().map(|&(slot, off)| (slot, off + delta)).collect()
        }
        let mut piece = CopyUnit::new(shift(&self.copies, delta), len, shift(&self.targets, delta));
        piece.first = self.first;
        piece
    }
}

/// The parts of a stripe write inside each member row range of `bounds` (ranges holding none
/// of it, between the runs of a write that wraps into the next chunk, give no piece).
fn stripe_pieces(sw: &StripeWrite, bounds: &[(u64, u64)]) -> SmallVec<[StripeWrite; 1]> {
    let mut pieces = SmallVec::new();
    for &(row_start, row_end) in bounds {
        let runs: SmallVec<[ParityRun; 1]> = sw
            .runs
            .iter()
            .filter_map(|r| {
                let start = r.chunk_offset.max(row_start);
                let end = (r.chunk_offset + r.len).min(row_end);
                (start < end).then(|| ParityRun {
                    logical: r.logical + (start - r.chunk_offset),
                    len: end - start,
                    chunk_offset: start,
                    ..r.clone()
                })
            })
            .collect();
        if let Some(first) = runs.first() {
            let mut piece = StripeWrite::new(first.clone());
            piece.runs = runs;
            pieces.push(piece);
        }
    }
    pieces
}

/// Merge member writes `(part, slot, member offset, bytes)` that continue one another on the
/// same member into one write, up to [`MAX_MERGE_BYTES`]: `(slot, offset, bytes, parts)` with
/// the parts each write covers, in the order of the first write of each merged run.
fn merge_writes(mut writes: PartWrites) -> SmallVec<[(usize, u64, IoBuf, GroupParts); 4]> {
    let mut sorted: SmallVec<[(usize, u64, usize); 4]> =
        writes.iter().enumerate().map(|(i, w)| (w.1, w.2, i)).collect();
    sorted.sort_unstable();
    let mut out: SmallVec<[(usize, u64, IoBuf, GroupParts); 4]> = SmallVec::new();
    for (slot, off, i) in sorted {
        let (part, _, _, data) = std::mem::take(&mut writes[i]);
        if let Some(last) = out.last_mut() {
            let end = last.1 + last.2.len() as u64;
            if last.0 == slot && end == off && last.2.len() + data.len() <= MAX_MERGE_BYTES as usize {
                // A vectored write of the pieces where they are: no copy.
                last.2.push(data);
                last.3.push(part);
                continue;
            }
        }
        out.push((slot, off, IoBuf::from(data), smallvec![part]));
    }
    out
}

/// Split member bytes `[offset, offset+len)` at 4 KiB row boundaries: `(offset into the range,
/// length)` per row.
fn row_pieces(offset: u64, len: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut pos = offset;
    let end = offset + len;
    while pos < end {
        let piece = (CHECK_ROW_BYTES - pos % CHECK_ROW_BYTES).min(end - pos);
        out.push((pos - offset, piece));
        pos += piece;
    }
    out
}

/// `[offset, offset+len)` widened to whole `unit`s of bytes (rows, sectors), the end clipped to
/// `limit`: `(start, length)`. An empty range stays empty.
fn widen(offset: u64, len: u64, unit: u64, limit: u64) -> (u64, u64) {
    if len == 0 {
        return (offset, 0);
    }
    let start = offset / unit * unit;
    let end = ((offset + len).div_ceil(unit) * unit).min(limit);
    (start, end - start)
}

/// The same member rows (`[offset, offset+len)`) of every member of one stripe, read for a
/// rebuild.
#[derive(Debug)]
struct Rows {
    offset: u64,
    len: u64,
    /// Indexed by slot; `None` where not read (yet).
    blocks: Vec<Option<Vec<u8>>>,
    /// In-sync members whose read failed: rebuilt and written back.
    bad: Vec<usize>,
    /// I/Os issued and not completed.
    pending: usize,
}

impl Rows {
    fn new(offset: u64, len: u64, slots: usize, bad: Vec<usize>) -> Rows {
        Rows { offset, len, blocks: vec![None; slots], bad, pending: 0 }
    }

    fn absorb(&mut self, slot: usize, outcome: Outcome) {
        self.pending -= 1;
        match outcome {
            Outcome::Data(data) => self.blocks[slot] = Some(data.into()),
            Outcome::ReadError => self.bad.push(slot),
            Outcome::Done | Outcome::Lost => {}
        }
    }

    /// Rebuild every block not read from the others; an error when more are missing than the
    /// level can rebuild.
    fn rebuild(&mut self, roles: &StripeRoles) -> Result<(), EngineError> {
        let missing: Vec<usize> = (0..self.blocks.len()).filter(|&s| self.blocks[s].is_none()).collect();
        if missing.len() > 1 + usize::from(roles.q.is_some()) {
            return Err(match self.bad.first() {
                Some(&slot) => EngineError::UnrecoverableRead { slot, offset: self.offset, len: self.len },
                None => EngineError::ArrayFailed,
            });
        }
        reconstruct(roles, &mut self.blocks, &missing, self.len as usize);
        Ok(())
    }
}

#[derive(Debug)]
struct ReadOp {
    offset: u64,
    len: u64,
    assembly: ReadAssembly,
    /// Inline for one part: a small read on one member does not allocate.
    parts: SmallVec<[ReadPart; 1]>,
    remaining: usize,
    error: Option<EngineError>,
}

impl ReadOp {
    fn new(offset: u64, len: u64) -> ReadOp {
        ReadOp {
            offset,
            len,
            assembly: ReadAssembly::new(len as usize),
            parts: SmallVec::new(),
            remaining: 0,
            error: None,
        }
    }

    /// Account for a part that finished (`Some`), with its error if any.
    fn settle(&mut self, step: Option<Result<(), EngineError>>) {
        if let Some(result) = step {
            if let Err(e) = result {
                self.error.get_or_insert(e);
            }
            self.remaining -= 1;
        }
    }
}

/// A read request's bytes as they arrive. Member reads are kept as they came, as pieces of the
/// answer (no copy, no buffer of the request's size). Only when a slow path (a rebuild from
/// parity) needs a place to write into is one buffer allocated; the pieces are then copied into
/// it when the request finishes.
#[derive(Debug)]
struct ReadAssembly {
    len: usize,
    /// `(offset in the request, bytes)`, in arrival order; inline for the usual one or two.
    pieces: SmallVec<[(usize, Bytes); 2]>,
    buf: Option<Vec<u8>>,
}

impl ReadAssembly {
    fn new(len: usize) -> ReadAssembly {
        ReadAssembly { len, pieces: SmallVec::new(), buf: None }
    }

    fn put(&mut self, at: usize, bytes: Bytes) {
        self.pieces.push((at, bytes));
    }

    /// Bytes `[at, at+len)` of the request's buffer, for a rebuild to fill.
    fn sink(&mut self, at: usize, len: usize) -> &mut [u8] {
        let size = self.len;
        &mut self.buf.get_or_insert_with(|| vec![0u8; size])[at..at + len]
    }

    /// The answer, once every part of a successful read has arrived. The parts cover the
    /// request exactly once, so the pieces, in order, tile it; anything else is a bug in the
    /// engine and must not reach a client as data.
    fn finish(mut self) -> IoBuf {
        if let Some(mut buf) = self.buf.take() {
            for (at, piece) in &self.pieces {
                buf[*at..*at + piece.len()].copy_from_slice(piece);
            }
            return IoBuf::from(buf);
        }
        self.pieces.sort_unstable_by_key(|(at, _)| *at);
        let mut out = IoBuf::new();
        for (at, piece) in self.pieces {
            assert_eq!(at, out.len(), "read pieces must tile the request");
            out.push(piece);
        }
        assert_eq!(out.len(), self.len, "read pieces must cover the request");
        out
    }
}

#[derive(Debug)]
enum ReadPart {
    Copies {
        logical: u64,
        unit: CopyUnit,
    },
    Parity {
        run: ParityRun,
        phase: ParityRead,
    },
    /// One member read standing for several parts on that member (see
    /// [`Array::merge_read_parts`]); those parts are started only if it fails.
    Merged(MergedRead),
    /// Bytes the `split` policy read ahead (entry `entry` of `array/readahead.rs`); read from
    /// the members instead if that read ahead goes stale or fails.
    Cached {
        logical: u64,
        len: u64,
        entry: u64,
    },
}

#[derive(Debug, Clone)]
struct MergedRead {
    slot: usize,
    offset: u64,
    len: u64,
    /// `(part, offset of its bytes in the member read)`, by member offset.
    pieces: Vec<(usize, u64)>,
}

#[derive(Debug)]
enum ParityRead {
    /// Reading the run from the member that holds it.
    Direct,
    /// Rebuilding it from the same rows of the stripe's other members.
    Rebuild(Rows),
    /// The run is known; rewriting the rows whose read failed.
    Rewriting { pending: usize },
}

#[derive(Debug)]
struct DiscardOp {
    offset: u64,
    len: u64,
    pending: usize,
    /// Per part, how many in-sync copies were zeroed.
    parts: Vec<usize>,
}

#[derive(Debug)]
struct CopyWriteOp {
    offset: u64,
    data: Bytes,
    /// Inline for a small write (one or two runs).
    parts: SmallVec<[CopyWritePart; 2]>,
    /// Counted per part and copy, merged writes included.
    pending: usize,
    error: Option<EngineError>,
    /// The parts each merged member write covers (tag part `GROUP_PART + index`).
    groups: Vec<GroupParts>,
}

#[derive(Debug)]
struct CopyWritePart {
    /// In-sync copies of this part written successfully.
    written: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// Every parity member is gone: just write the data.
    DataOnly,
    /// Read old data and parity, apply the difference (md's rmw).
    ReadModifyWrite,
    /// Read the data not being overwritten, compute parity afresh (md's rcw).
    ReconstructWrite,
    /// A member we need cannot be read: read every readable member, rebuild, then write.
    Degraded,
}

#[derive(Debug)]
struct ParityWriteOp {
    offset: u64,
    data: Bytes,
    /// Inline for the usual one stripe.
    stripes: SmallVec<[StripeWrite; 1]>,
    remaining: usize,
    error: Option<EngineError>,
    /// Stripes waiting for stripe memory before they are planned, in order.
    unplanned: std::ops::Range<usize>,
    /// The stripes each merged member write covers (tag part `GROUP_PART + index`).
    groups: Vec<GroupParts>,
}

#[derive(Debug)]
struct StripeWrite {
    stripe: u64,
    /// Inline for the usual one run (a stripe's part of a small write).
    runs: SmallVec<[ParityRun; 1]>,
    lo: u64,
    hi: u64,
    strategy: Strategy,
    blocks: StripeBlocks,
    /// In-sync members whose read of `[lo, hi)` failed: rebuilt and rewritten in full.
    bad: Vec<usize>,
    pending: usize,
    failed_read: bool,
    writing: bool,
    /// Member writes held back until the log write covering the stripe is durable:
    /// `(slot, offset, bytes, is a correction)`.
    deferred: StripeMemberWrites,
    /// The member whose log covers this stripe's writes in flight.
    log_slot: Option<usize>,
    /// Stripe memory held for it (see `Array::stripe_charge`); 0 once finished.
    charge: u64,
}

impl StripeWrite {
    fn new(run: ParityRun) -> StripeWrite {
        StripeWrite {
            stripe: run.stripe,
            runs: smallvec![run],
            lo: 0,
            hi: 0,
            strategy: Strategy::DataOnly,
            blocks: StripeBlocks::new(),
            bad: Vec::new(),
            pending: 0,
            failed_read: false,
            writing: false,
            deferred: StripeMemberWrites::new(),
            log_slot: None,
            charge: 0,
        }
    }
}

#[derive(Debug)]
struct SyncOp {
    offset: u64,
    len: u64,
    repair: bool,
    units: Vec<SyncUnit>,
    remaining: usize,
    mismatch_sectors: u64,
    error: Option<EngineError>,
    /// Which slots were in sync when the check started: losing one of them fails the check,
    /// losing a recovering one does not.
    in_sync_at_start: Vec<bool>,
}

impl SyncOp {
    fn new(offset: u64, len: u64, repair: bool) -> SyncOp {
        SyncOp {
            offset,
            len,
            repair,
            units: Vec::new(),
            remaining: 0,
            mismatch_sectors: 0,
            error: None,
            in_sync_at_start: Vec::new(),
        }
    }
}

/// One stripe (parity levels) or one run with copies (raid1/raid10) of a check.
#[derive(Debug)]
struct SyncUnit {
    /// The stripe, for parity levels.
    stripe: Option<u64>,
    /// `(slot, member offset)` of every member block compared: all members of the stripe, or
    /// every copy of the run.
    copies: Vec<(usize, u64)>,
    len: u64,
    /// Indexed by slot.
    blocks: Vec<Option<Vec<u8>>>,
    /// In-sync members whose read failed: rebuilt and written back.
    bad: Vec<usize>,
    pending: usize,
    writing: bool,
}

impl SyncUnit {
    fn new(stripe: Option<u64>, copies: Vec<(usize, u64)>, len: u64, slots: usize) -> SyncUnit {
        SyncUnit { stripe, copies, len, blocks: vec![None; slots], bad: Vec::new(), pending: 0, writing: false }
    }
}

#[derive(Debug)]
struct RecoverOp {
    offset: u64,
    len: u64,
    units: Vec<RecoverUnit>,
    remaining: usize,
    error: Option<EngineError>,
}

impl RecoverOp {
    /// Account for a unit that finished (`Some`), with its error if any.
    fn settle(&mut self, step: Option<Result<(), EngineError>>) {
        if let Some(result) = step {
            if let Err(e) = result {
                self.error.get_or_insert(e);
            }
            self.remaining -= 1;
        }
    }
}

#[derive(Debug)]
enum RecoverUnit {
    /// raid1/raid10: one run, read from an in-sync copy, written to the recovering copies.
    Copies(CopyUnit),
    /// raid4/5/6: the same rows of every member of a stripe, rebuilt for `targets`.
    Stripe { stripe: u64, rows: Rows, targets: Vec<usize>, writing: bool },
}
