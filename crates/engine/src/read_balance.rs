//! Read balancing: which copy of a mirrored run (raid1, raid10) a read goes to.
//!
//! Pure bookkeeping, no I/O. The engine ([`crate::Array`]) asks `Balancer::choose` for every
//! run with copies that a read request touches, and tells the balancer about every member I/O it
//! issues (`Balancer::issued`) and every one that completes (`Balancer::completed`). Per slot
//! it keeps what md keeps per mirror (`struct raid1_info`): where the head is after the last
//! completed I/O, where the last read sent to the slot ended, where that run of sequential reads
//! started, and how many I/Os are in flight.
//!
//! The policies ([`ReadPolicy`]):
//!
//! - **`md`**, the default: Linux md's `read_balance()`, for rotational disks.
//!   - raid1 (`drivers/md/raid1.c`, `choose_best_rdev` since 6.9): a read that continues the
//!     last read sent to a disk (`next_seq_sect == sector`) or starts where its head is
//!     (`head_position == sector`) stays on that disk; otherwise an idle disk (nothing pending)
//!     is taken, the first in slot order; otherwise the disk whose head is nearest. With
//!     non-rotational members (see [`crate::Array::set_nonrotational`]) the least busy disk is taken
//!     instead of the nearest (md's `min_pending_disk` when `nonrot_disks > 0`).
//!   - raid10 (`drivers/md/raid10.c`, `read_balance`): no sequential rule; over the copies in
//!     md's order, the smallest "distance" wins, where the distance is 0 for an idle disk of a
//!     layout with near copies, the copy's own address for a layout with far (or offset)
//!     copies (md always prefers the lowest address there: the start of the member is faster
//!     and far copies sit half a disk away), and `|address - head|` otherwise. Non-rotational
//!     members: the least busy copy.
//!   - While a resync is owed (the array was not shut down cleanly), md reads the first
//!     readable copy so that reading a block twice gives the same answer until the copies
//!     agree again; the engine does that for every policy.
//! - **`md-1998`**: raid1's read balancing in Linux 2.2 (`drivers/block/raid1.c`,
//!   `raid1_make_request`), which Molnar's 1998 benchmarks ran: every read goes to the disk the
//!   array last used (`last_used`); after a read that does not continue the previous one
//!   (`next_sect`), or once a sequential run has read `sect_limit` (128 sectors, 64 KiB) there,
//!   the next read moves to the next disk of the ring. Random reads therefore go round the
//!   disks, and a sequential reader moves on every 64 KiB. The kernel applied it per buffer
//!   head; the engine applies it per member read, cut where the kernel would have switched.
//! - **`md-2006`**: raid1's `read_balance()` of Linux 2.6.15 to 2.6.3x (`drivers/md/raid1.c`),
//!   which Baker's 2006 and the 2008 bonnie++ figures ran: one `last_used` disk and one
//!   `next_seq_sect` for the whole array: a read that continues the array's last read, or that
//!   starts where `last_used`'s head is, stays on `last_used`; otherwise the disks are scanned
//!   downwards from the one before `last_used`, round to `last_used`, and the first idle one is
//!   taken, else the one whose head (`head_position`, set at completion) is nearest.
//!   Unlike today's rule, a second sequential reader breaks the first one's run (there is one
//!   `next_seq_sect`), so parallel readers are spread by the idle-disk rule.
//!   On raid10 both historical policies read as `md` does (their era's raid10 balanced reads
//!   the same way for the near layouts the seeds do not use anyway).
//! - **`round-robin`**: each read request goes to the next copy in turn (gmirror's
//!   `round-robin`). A request is not divided: all its runs advance together.
//! - **`shortest-queue`**: the copy with the fewest member I/Os in flight; ties go to the
//!   nearest head, then to md's copy order (SPDK's raid1 picks by outstanding I/O likewise).
//! - **`split`**: ours, made to get bandwidth from every mirror (see `docs/read-balancing.md`
//!   and the engine's `array/readahead.rs`):
//!   - a read outside any sequential stream goes to the idle copy whose head is nearest; when
//!     every copy is busy, to the copy whose expected head is nearest among those with at most
//!     one I/O more in flight than the least busy, where a busy disk's head is taken to be at
//!     the end of the last I/O queued to it (it will be there when it reaches this read, and
//!     the disk's own queue order makes a near read cheap): more readers keep more disks busy,
//!     and under load each disk keeps to its part of the address space, so seeks shorten. A
//!     read that continues the last read sent to a disk stays there unless another is less
//!     busy;
//!   - a stream whose reads are written back right behind it (a read-modify-write pass) is
//!     read like random reads, without read-ahead on lanes of its own (`Stream::rewritten`),
//!     but its reads are divided as large ones are from twice
//!     [`SplitTuning::min_divided_piece`] up;
//!   - a large read outside any stream ([`SplitTuning::divide_bytes`], raid1) is divided into
//!     one contiguous piece per idle copy, none shorter than
//!     [`SplitTuning::min_divided_piece`], so each disk moves a long run;
//!   - sequential streams are followed (`Balancer::track`, up to `MAX_STREAMS`). A stream is
//!     cut into aligned windows ([`SplitTuning::window_bytes`]); its windows go to its lanes
//!     (copies) in turn, and the engine reads the next windows ahead of the reader on those
//!     copies, so every disk reads long runs of its own and skips the others' with a short
//!     seek, even for a reader with one request in flight. One stream alone has every copy
//!     for lanes; as many streams as copies or more get one copy each (md's sequential rule
//!     has the same effect, and no disk then seeks between streams); in between, a share.
//!     Layouts whose copies lie far apart (raid10 far and offset) read the lowest copy, which
//!     the layout already spreads over every member, as md does.
//!
//! Every policy passes over a copy whose measured latency is clearly worse than another's
//! (`crate::read_latency`: a far or slow host), before choosing by its own rules among the
//! others; while the members are alike, or no clock is given, that changes nothing.
//!
//! Positions are member byte offsets from the data start, as the engine's member I/Os carry
//! them (md uses sectors; only differences and equality matter here).

use std::fmt;
use std::str::FromStr;

use crate::geometry::{CopyPlacement, Geometry};
use crate::read_latency::{ReadLatency, ReadTiming, SlotSet};
use crate::SECTOR_BYTES;

/// How reads choose among the copies of mirrored data (raid1, raid10). md keeps no such setting
/// in its superblock: it is chosen when the array is started, and may be changed at any time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReadPolicy {
    /// Linux md's `read_balance()` for rotational disks.
    #[default]
    Md,
    /// Each read request to the next copy in turn.
    RoundRobin,
    /// The copy with the fewest member I/Os in flight, ties to the nearest head.
    ShortestQueue,
    /// Ours: the least busy copy for random reads, sequential streams divided across the copies.
    Split,
    /// Linux 2.2's raid1 read balancing (1998): the last used disk, moving on round the ring
    /// after a non-sequential read or 64 KiB of sequential reading.
    Md1998,
    /// Linux 2.6.15's raid1 `read_balance()` (2006): one sequential run per array, else the
    /// first idle disk from `last_used` down, else the nearest head.
    Md2006,
}

impl ReadPolicy {
    /// Every policy, the default first.
    pub const ALL: [ReadPolicy; 6] = [
        ReadPolicy::Md,
        ReadPolicy::RoundRobin,
        ReadPolicy::ShortestQueue,
        ReadPolicy::Split,
        ReadPolicy::Md1998,
        ReadPolicy::Md2006,
    ];

    /// The name used on the command line and in reports.
    pub fn name(&self) -> &'static str {
        match self {
            ReadPolicy::Md => "md",
            ReadPolicy::RoundRobin => "round-robin",
            ReadPolicy::ShortestQueue => "shortest-queue",
            ReadPolicy::Split => "split",
            ReadPolicy::Md1998 => "md-1998",
            ReadPolicy::Md2006 => "md-2006",
        }
    }

    /// The valid names, comma separated, for messages.
    pub fn names() -> String {
        ReadPolicy::ALL.iter().map(ReadPolicy::name).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for ReadPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A read policy name that names no policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown read policy {given:?}: valid read policies are {}", ReadPolicy::names())]
pub struct UnknownReadPolicy {
    pub given: String,
}

impl FromStr for ReadPolicy {
    type Err = UnknownReadPolicy;

    fn from_str(s: &str) -> Result<ReadPolicy, UnknownReadPolicy> {
        ReadPolicy::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| UnknownReadPolicy { given: s.to_string() })
    }
}

/// What the balancer knows of one member slot (md's `struct raid1_info` and the rdev's
/// `nr_pending`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SlotLoad {
    /// Member byte just past the last data I/O that completed on the slot (md's
    /// `head_position`, set at completion by `update_head_pos`).
    pub head: u64,
    /// Member byte just past the last read sent to the slot (md's `next_seq_sect`).
    pub next_seq: u64,
    /// Where the run of reads that ends at `next_seq` started (md's `seq_start`).
    pub seq_start: u64,
    /// Member I/Os issued to the slot and not completed, reads and writes alike (md's
    /// `nr_pending` counts every I/O on the device).
    pub pending: u32,
    /// Reads chosen for the slot by the request being planned, not issued yet: md counts a read
    /// in `nr_pending` when it chooses it, so the later chunks of a request see the earlier.
    pub planned: u32,
    /// Member byte just past the last data I/O issued to the slot: where its head will be once
    /// the I/Os queued before a new one are done.
    pub queued_end: u64,
}

impl SlotLoad {
    /// I/Os in flight or about to be, as md's `nr_pending` counts them.
    pub(crate) fn load(&self) -> u32 {
        self.pending + self.planned
    }

    /// Where the head will be when the slot gets to a read issued now.
    fn expected_head(&self) -> u64 {
        if self.pending > 0 {
            self.queued_end
        } else {
            self.head
        }
    }
}

/// Knobs of the `split` policy (see [`crate::Array::set_split_tuning`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitTuning {
    /// A sequential stream is cut into windows of this many bytes (aligned), each read from one
    /// copy, consecutive windows from different copies: every disk reads runs this long and
    /// skips the others' with a short seek. The longer the window, the less the skip costs
    /// against the transfer (it should span several tracks).
    pub window_bytes: u64,
    /// Bound on the bytes read ahead for sequential streams and not yet read by them.
    pub readahead_bytes: u64,
    /// A read this long or longer that is not part of a stream is divided into contiguous
    /// pieces over the idle copies (none when fewer than two copies are idle), none shorter
    /// than [`SplitTuning::min_divided_piece`].
    pub divide_bytes: u64,
}

impl SplitTuning {
    /// The shortest piece a divided read gives one copy, an eighth of `divide_bytes` (64 KiB by
    /// default): below that a disk's positioning costs more than the transfer it takes over.
    /// Reads of a stream written back behind its reader are divided from two such pieces up.
    pub fn min_divided_piece(&self) -> u64 {
        self.divide_bytes / 8
    }
}

impl Default for SplitTuning {
    fn default() -> SplitTuning {
        SplitTuning { window_bytes: 4 << 20, readahead_bytes: 64 << 20, divide_bytes: 512 << 10 }
    }
}

/// How many read requests a stream may go without one before it no longer counts as active
/// (the engine has no clock; requests are its time).
const ACTIVE_REQUESTS: u64 = 256;

/// Streams tracked at once. More concurrent sequential readers than this fall back to md's
/// sequential rule, which still keeps each on one disk.
pub(crate) const MAX_STREAMS: usize = 16;

/// Read ahead at first this many times what the stream has read, growing with it up to the
/// window depth (Linux's read-ahead ramps up likewise), so two neighbouring reads that happen
/// to touch do not cost a long read-ahead.
const RAMP: u64 = 4;

/// A sequential reader the `split` policy follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stream {
    /// Never reused: names the stream's read-ahead.
    pub id: u64,
    /// Logical byte just past the stream's last read.
    pub next: u64,
    /// Read requests that continued the stream; it is established from 1 on.
    pub hits: u32,
    /// Bytes the stream has read.
    pub run: u64,
    /// The request clock when the stream last read.
    pub last_used: u64,
    /// Logical byte up to which reads were issued for the stream (read ahead, or read).
    pub ahead: u64,
    /// Its place among the streams, which decides its copies (see [`Balancer::stream_lane`]).
    pub ordinal: u32,
    /// What the stream reads is written back right behind it (a read-modify-write pass, as
    /// bonnie's rewrite): every copy's head must come back for each write, so the stream is
    /// not read ahead on lanes of its own, far from the writes (see [`Balancer::note_write`]).
    pub rewritten: bool,
}

/// A write landing this close behind a stream's reader (within what it read) marks the stream
/// as rewritten.
const REWRITE_REACH: u64 = 16 << 20;

/// What [`Balancer::track`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tracked {
    /// The established stream the read continues (an index into the stream table).
    pub stream: Option<usize>,
    /// A stream dropped from the table to make room: its read-ahead is no longer wanted.
    pub evicted: Option<u64>,
}

/// Which of md's two `read_balance()` functions the array's copies are balanced by (from the
/// geometry's [`CopyPlacement`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MdFlavour {
    /// raid1's, for copies that are whole images (and layouts with one copy, where there is
    /// nothing to choose).
    Raid1,
    /// raid10's, with its near and far copy counts (offset layouts count as far).
    Raid10 { near: u32, far: u32 },
}

/// The per-array read balancing state.
#[derive(Debug, Clone)]
pub(crate) struct Balancer {
    policy: ReadPolicy,
    flavour: MdFlavour,
    /// The members are non-rotational: md then prefers the least busy disk over the nearest.
    nonrot: bool,
    slots: Vec<SlotLoad>,
    /// Round-robin: the copy index the current request reads from.
    turn: usize,
    /// `split`: the knobs, and the sequential streams being followed.
    tuning: SplitTuning,
    streams: Vec<Option<Stream>>,
    next_stream: u64,
    /// Read requests seen: the streams' clock.
    clock: u64,
    /// `md-1998` and `md-2006`: the slot the array last read from (md's `conf->last_used`).
    last_used: usize,
    /// `md-1998` and `md-2006`: member byte just past the array's last read (2.2's
    /// `next_sect`, 2.6's `next_seq_sect`).
    array_next: u64,
    /// `md-1998`: bytes of the current sequential run read on `last_used` (2.2's `sect_count`).
    run_count: u64,
    /// Each slot's measured read latency: which copies are too slow to choose.
    latency: ReadLatency,
}

/// `md-1998`: a sequential run moves to the next disk after this many bytes (2.2's
/// `mirror->sect_limit`, 128 sectors).
pub(crate) const MD1998_RUN_LIMIT: u64 = 128 * 512;

/// `md-1998`: the buffer head size the 2.2 kernel balanced: ext2's 1 KiB block, mke2fs's
/// default of the time. The first block of a read that does not continue the last one goes
/// to `last_used` and moves it on, so the rest of the read goes to the next disk.
pub(crate) const MD1998_BLOCK: u64 = 1024;

impl Balancer {
    pub(crate) fn new(geometry: &Geometry) -> Balancer {
        let flavour = match geometry.copy_placement() {
            CopyPlacement::Chunks { near, far } => MdFlavour::Raid10 { near, far },
            CopyPlacement::Images { .. } => MdFlavour::Raid1,
        };
        Balancer {
            policy: ReadPolicy::default(),
            flavour,
            nonrot: false,
            slots: vec![SlotLoad::default(); geometry.raid_disks()],
            turn: 0,
            tuning: SplitTuning::default(),
            streams: vec![None; MAX_STREAMS],
            next_stream: 1,
            clock: 0,
            last_used: 0,
            array_next: 0,
            run_count: 0,
            latency: ReadLatency::new(geometry.raid_disks()),
        }
    }

    /// The driver's clock, in nanoseconds from any fixed start (see [`crate::Array::set_now`]).
    pub(crate) fn set_now(&mut self, now_ns: u64) {
        self.latency.set_now(now_ns);
    }

    pub(crate) fn latency_balancing(&self) -> bool {
        self.latency.enabled()
    }

    pub(crate) fn set_latency_balancing(&mut self, on: bool) {
        self.latency.set_enabled(on);
    }

    /// The measured mean latency of reads of `len` bytes on `slot`, in nanoseconds.
    pub(crate) fn read_latency_ns(&self, slot: usize, len: u64) -> Option<f64> {
        self.latency.measured(slot, len).map(|m| m.latency_ns)
    }

    /// A member read of `len` bytes is about to go out to `slot` (before [`Balancer::issued`]):
    /// what to keep with it to measure it.
    pub(crate) fn read_started(&mut self, slot: usize, len: u64) -> Option<ReadTiming> {
        self.latency.start(slot, len, self.slots[slot].pending)
    }

    /// A read started with [`Balancer::read_started`] came back with its data.
    pub(crate) fn read_finished(&mut self, slot: usize, timing: ReadTiming) {
        self.latency.finished(slot, timing);
    }

    /// The slots too slow for a read of `len` bytes among `copies` (see
    /// `crate::read_latency`): `readable` less these is what the policies choose from.
    /// A copy the read continues a run on (md's sequential rule: it starts where the slot's
    /// last read ended, or at its head) is never among them: its latency is that of its own
    /// stream, which says nothing of where it is.
    fn too_slow(&self, copies: &[(usize, u64)], len: u64, readable: &impl Fn(usize) -> bool) -> SlotSet {
        let mut slow = self.latency.slow_slots(copies, len, &|slot| self.slots[slot].load(), readable);
        for &(slot, offset) in copies {
            let s = &self.slots[slot];
            if s.next_seq == offset || s.head == offset {
                slow.remove(slot);
            }
        }
        slow
    }

    pub(crate) fn tuning(&self) -> SplitTuning {
        self.tuning
    }

    pub(crate) fn set_tuning(&mut self, tuning: SplitTuning) {
        self.tuning = SplitTuning {
            window_bytes: tuning.window_bytes.max(4096),
            readahead_bytes: tuning.readahead_bytes,
            divide_bytes: tuning.divide_bytes.max(8192),
        };
    }

    /// Whether the layout keeps its copies far apart (raid10 far and offset layouts): streams
    /// then read the lowest copy only, which the layout already stripes over every member.
    pub(crate) fn far_copies(&self) -> bool {
        matches!(self.flavour, MdFlavour::Raid10 { far, .. } if far > 1)
    }

    /// Forget every stream (the policy changed, or reads must not run ahead for a while).
    pub(crate) fn forget_streams(&mut self) {
        self.streams.iter_mut().for_each(|s| *s = None);
    }

    pub(crate) fn policy(&self) -> ReadPolicy {
        self.policy
    }

    pub(crate) fn set_policy(&mut self, policy: ReadPolicy) {
        self.policy = policy;
    }

    pub(crate) fn nonrot(&self) -> bool {
        self.nonrot
    }

    pub(crate) fn set_nonrot(&mut self, nonrot: bool) {
        self.nonrot = nonrot;
    }

    #[cfg(test)]
    pub(crate) fn slot(&self, slot: usize) -> &SlotLoad {
        &self.slots[slot]
    }

    /// A new read request starts: round-robin moves on to the next copy; the reads the last
    /// request planned are issued (counted in `pending`) by now.
    pub(crate) fn begin_request(&mut self) {
        self.turn = self.turn.wrapping_add(1);
        self.slots.iter_mut().for_each(|s| s.planned = 0);
    }

    /// Which of `copies` (`(slot, member offset)` in md's copy order) a read of `len` bytes
    /// goes to, as an index into `copies`, among the copies on slots for which `readable`
    /// holds; `None` if there is none. Records the read as md's `update_read_sectors` does.
    pub(crate) fn choose(
        &mut self,
        copies: &[(usize, u64)],
        len: u64,
        readable: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let chosen = match copies.len() {
            0 => None,
            1 => readable(copies[0].0).then_some(0),
            _ => {
                let slow = self.too_slow(copies, len, &readable);
                let chosen = self.choose_by_policy(copies, len, &|slot| readable(slot) && !slow.contains(slot))?;
                let probe = self.latency.probe(copies, chosen, len, |s| self.slots[s].load() == 0, &readable);
                Some(probe.unwrap_or(chosen))
            }
        }?;
        let (slot, offset) = copies[chosen];
        self.note_read(slot, offset, len);
        if self.policy == ReadPolicy::Md2006 {
            self.last_used = slot;
            self.array_next = offset + len;
        }
        Some(chosen)
    }

    /// The policy's own choice among the copies `readable` allows (two or more copies).
    fn choose_by_policy(
        &mut self,
        copies: &[(usize, u64)],
        len: u64,
        readable: &impl Fn(usize) -> bool,
    ) -> Option<usize> {
        match self.policy {
            ReadPolicy::Md => match self.flavour {
                MdFlavour::Raid1 => self.md_raid1(copies, &readable),
                MdFlavour::Raid10 { near, far } => self.md_raid10(copies, near, far, &readable),
            },
            ReadPolicy::RoundRobin => {
                let n = copies.len();
                let start = self.turn % n;
                (0..n).map(|k| (start + k) % n).find(|&i| readable(copies[i].0))
            }
            ReadPolicy::ShortestQueue => self.least_busy(copies, &readable, |s| s.head),
            ReadPolicy::Split => self.split_single(copies, &readable),
            ReadPolicy::Md1998 | ReadPolicy::Md2006 if matches!(self.flavour, MdFlavour::Raid10 { .. }) => {
                let MdFlavour::Raid10 { near, far } = self.flavour else { unreachable!("matched above") };
                self.md_raid10(copies, near, far, &readable)
            }
            ReadPolicy::Md1998 => self.md1998(copies, len, &readable),
            ReadPolicy::Md2006 => self.md2006(copies, &readable),
        }
    }

    /// How much of a read of `len` bytes at `copies` should go to one copy: all of it, except
    /// under `md-1998`, where a sequential run moves to the next disk every
    /// [`MD1998_RUN_LIMIT`] bytes (the kernel decided per buffer head; the engine cuts its
    /// member reads where the kernel would have switched).
    pub(crate) fn piece_len(&self, copies: &[(usize, u64)], len: u64) -> u64 {
        if self.policy != ReadPolicy::Md1998 || copies.len() < 2 || !matches!(self.flavour, MdFlavour::Raid1) {
            return len;
        }
        let sequential = copies.first().is_some_and(|c| c.1 == self.array_next);
        let room = if sequential { MD1998_RUN_LIMIT.saturating_sub(self.run_count) } else { MD1998_BLOCK };
        let want = len.min(room.max(512));
        if want == len {
            return len;
        }
        // A piece ends on a sector boundary of the member, as the 2.2 kernel's buffer heads
        // (whole file-system blocks) did: pieces of one read may come from different copies, and
        // while a resync is owed the copies may differ, so a sector made of two would be neither.
        let start = copies[0].1;
        let end = (start + want) / SECTOR_BYTES * SECTOR_BYTES;
        if end > start { end - start } else { (start / SECTOR_BYTES + 1) * SECTOR_BYTES - start }.min(len)
    }

    /// `md-1998`: Linux 2.2's `raid1_make_request` read branch. The read goes to `last_used`
    /// (the next readable disk of the ring if it cannot be read); then, if the read did not
    /// continue the array's last one, or the run has read its `sect_limit` on this disk,
    /// `last_used` moves on to the next disk of the ring for the reads that follow.
    fn md1998(&mut self, copies: &[(usize, u64)], len: u64, readable: &impl Fn(usize) -> bool) -> Option<usize> {
        let n = copies.len();
        let start = copies.iter().position(|c| c.0 == self.last_used).unwrap_or(0);
        let cur = (0..n).map(|k| (start + k) % n).find(|&i| readable(copies[i].0))?;
        let offset = copies[cur].1;
        let switch = if offset == self.array_next {
            self.run_count += len;
            self.run_count >= MD1998_RUN_LIMIT
        } else {
            self.run_count = 0;
            true
        };
        self.array_next = offset + len;
        self.last_used = copies[cur].0;
        if switch {
            self.run_count = 0;
            if let Some(next) = (1..n).map(|k| (cur + k) % n).find(|&i| readable(copies[i].0)) {
                self.last_used = copies[next].0;
            }
        }
        Some(cur)
    }

    /// `md-2006`: Linux 2.6.15's raid1 `read_balance()`. Starting from `last_used` (or, if it
    /// cannot be read, the nearest readable disk below it), a read that continues the array's
    /// last read or starts at that disk's head stays there; otherwise the disks are scanned
    /// downwards from the one below it, round to it, and the first idle one wins, else the one
    /// whose head is nearest (ties to the earlier in the scan).
    fn md2006(&self, copies: &[(usize, u64)], readable: &impl Fn(usize) -> bool) -> Option<usize> {
        let n = copies.len();
        let down = |i: usize| (i + n - 1) % n;
        let start = copies.iter().position(|c| c.0 == self.last_used).unwrap_or(0);
        let mut first = start;
        while !readable(copies[first].0) {
            first = down(first);
            if first == start {
                return None;
            }
        }
        let (slot, offset) = copies[first];
        if offset == self.array_next || offset == self.slots[slot].head {
            return Some(first);
        }
        let mut chosen = first;
        let mut best = offset.abs_diff(self.slots[slot].head);
        let mut disk = first;
        loop {
            disk = down(disk);
            let (slot, offset) = copies[disk];
            if readable(slot) {
                let s = &self.slots[slot];
                if s.load() == 0 {
                    return Some(disk);
                }
                let dist = offset.abs_diff(s.head);
                if dist < best {
                    best = dist;
                    chosen = disk;
                }
            }
            if disk == first {
                return Some(chosen);
            }
        }
    }

    /// `split`, for a read outside any followed stream: a read that continues the last read
    /// sent to a disk stays there (md's rule: that disk's head and read-ahead are already on
    /// it, and it keeps a reader the stream table lost on one disk); else the least busy copy,
    /// ties to the nearest expected head.
    fn split_single(&self, copies: &[(usize, u64)], readable: &impl Fn(usize) -> bool) -> Option<usize> {
        let least = self.split_random(copies, readable)?;
        let fewest = self.slots[copies[least].0].load();
        // The sequential disk keeps the read unless another is less busy: a reader with
        // several reads in flight then spreads them over idle copies instead of queueing
        // them all on one disk.
        let sequential = copies.iter().position(|&(slot, offset)| {
            readable(slot) && self.slots[slot].next_seq == offset && self.slots[slot].load() <= fewest
        });
        Some(sequential.unwrap_or(least))
    }

    /// `split`, a random read: the copy that will get to it soonest, as far as the balancer can
    /// tell without a disk model. An idle copy starts at once: the idle one nearest to it
    /// (shortest positioning). When every copy is busy, a read queued behind others is served
    /// in the disk's own order (elevator, command queueing), so what it adds is mostly the
    /// seek from the disk's work to it: the copy whose expected head is nearest, among those
    /// with at most one I/O more in flight than the least busy (so no disk's queue runs away).
    /// Under load each disk then keeps to its own part of the address space, and its seeks
    /// shrink with the number of copies (Molnar's SEEK0/sqrt(N)).
    fn split_random(&self, copies: &[(usize, u64)], readable: &impl Fn(usize) -> bool) -> Option<usize> {
        let min = copies.iter().filter(|c| readable(c.0)).map(|c| self.slots[c.0].load()).min()?;
        let slack = if min == 0 { 0 } else { 1 };
        copies
            .iter()
            .enumerate()
            .filter(|(_, c)| readable(c.0) && self.slots[c.0].load() <= min + slack)
            .min_by_key(|(i, c)| (c.1.abs_diff(self.slots[c.0].expected_head()), *i))
            .map(|(i, _)| i)
    }

    /// `split`: the copies a read of `len` bytes at `copies` may be divided over: the readable
    /// copies whose disk is idle, nearest head first, written to `out` (indices into `copies`);
    /// how many. Fewer than two means the read is not divided.
    pub(crate) fn idle_copies(
        &self,
        copies: &[(usize, u64)],
        readable: impl Fn(usize) -> bool,
        out: &mut [usize],
    ) -> usize {
        let slow = self.too_slow(copies, self.tuning.divide_bytes, &readable);
        let readable = |slot| readable(slot) && !slow.contains(slot);
        let mut n = 0;
        for (i, &(slot, _)) in copies.iter().enumerate() {
            if n < out.len() && readable(slot) && self.slots[slot].load() == 0 {
                out[n] = i;
                n += 1;
            }
        }
        let dist = |i: usize| copies[i].1.abs_diff(self.slots[copies[i].0].head);
        out[..n].sort_unstable_by_key(|&i| (dist(i), i));
        n
    }

    /// Record that a read of `len` bytes went to copy `chosen` of `copies` (chosen by the
    /// caller: a divided read, a stream's window).
    pub(crate) fn chose(&mut self, copies: &[(usize, u64)], chosen: usize, len: u64) {
        let (slot, offset) = copies[chosen];
        self.note_read(slot, offset, len);
    }

    /// `split`: follow the sequential streams. Called once per read request of `[offset,
    /// offset+len)`: finds the stream it continues (it starts where a stream's last read ended,
    /// or inside what was read ahead for it) and moves it on, or starts following a new one in
    /// place of the least recently used (streams that never continued go first).
    pub(crate) fn track(&mut self, offset: u64, len: u64) -> Tracked {
        self.clock += 1;
        let clock = self.clock;
        let end = offset + len;
        let found = self
            .streams
            .iter()
            .position(|s| s.is_some_and(|s| s.next == offset || (s.hits > 0 && offset > s.next && offset < s.ahead)));
        if let Some(i) = found {
            let newly = self.streams[i].is_some_and(|s| s.hits == 0);
            let ordinal = if newly { self.free_ordinal() } else { 0 };
            let s = self.streams[i].as_mut().expect("found above");
            if newly {
                s.ordinal = ordinal;
            }
            s.hits = s.hits.saturating_add(1);
            s.run += len;
            s.next = s.next.max(end);
            s.ahead = s.ahead.max(end);
            s.last_used = clock;
            return Tracked { stream: Some(i), evicted: None };
        }
        let victim = match self.streams.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                let key = |s: &Stream| (s.hits > 0 && clock - s.last_used <= ACTIVE_REQUESTS, s.last_used);
                (0..self.streams.len())
                    .min_by_key(|&i| key(self.streams[i].as_ref().expect("table full")))
                    .expect("a table")
            }
        };
        let evicted = self.streams[victim].map(|s| s.id);
        let id = self.next_stream;
        self.next_stream += 1;
        self.streams[victim] = Some(Stream {
            id,
            next: end,
            hits: 0,
            run: len,
            last_used: clock,
            ahead: end,
            ordinal: 0,
            rewritten: false,
        });
        Tracked { stream: None, evicted }
    }

    /// A write of `len` bytes at logical `offset` starts: a stream whose reader has just read
    /// those bytes is being rewritten.
    pub(crate) fn note_write(&mut self, offset: u64, len: u64) {
        for s in self.streams.iter_mut().flatten() {
            let behind = s.next.saturating_sub(s.run.min(REWRITE_REACH));
            if s.hits > 0 && offset < s.next && offset + len > behind {
                s.rewritten = true;
            }
        }
    }

    /// The smallest ordinal no active stream holds.
    fn free_ordinal(&self) -> u32 {
        let mut ordinal = 0;
        while self.active_streams().any(|s| s.ordinal == ordinal) {
            ordinal += 1;
        }
        ordinal
    }

    /// Established streams that read recently.
    fn active_streams(&self) -> impl Iterator<Item = &Stream> + '_ {
        let clock = self.clock;
        self.streams.iter().flatten().filter(move |s| s.hits > 0 && clock - s.last_used <= ACTIVE_REQUESTS)
    }

    pub(crate) fn stream(&self, index: usize) -> &Stream {
        self.streams[index].as_ref().expect("a followed stream")
    }

    pub(crate) fn stream_mut(&mut self, index: usize) -> &mut Stream {
        self.streams[index].as_mut().expect("a followed stream")
    }

    /// Where the reader of stream `id` is (the logical byte past its last read), if the stream
    /// is still followed.
    pub(crate) fn stream_position(&self, id: u64) -> Option<u64> {
        self.streams.iter().flatten().find(|s| s.id == id).map(|s| s.next)
    }

    /// Whether stream `id` is still followed and active.
    pub(crate) fn stream_active(&self, id: u64) -> bool {
        self.active_streams().any(|s| s.id == id)
    }

    /// How far ahead of its reader stream `index` may be read: a window per copy and one more
    /// queued behind it for each (so no disk waits between windows), grown from what the stream
    /// has read, within its share of the read-ahead memory.
    pub(crate) fn readahead_depth(&self, index: usize, copies: usize) -> u64 {
        let s = self.stream(index);
        let active = self.active_streams().count().max(1) as u64;
        let lanes = self.lane_count(index, copies) as u64;
        let w = self.tuning.window_bytes;
        let full = 2 * lanes * w;
        let share = (self.tuning.readahead_bytes / active).max(w.min(self.tuning.readahead_bytes));
        full.min(share).min(s.run.saturating_mul(RAMP).max(128 << 10))
    }

    /// The stream's place among the active streams, and how many there are.
    fn rank(&self, index: usize) -> (usize, usize) {
        let me = self.stream(index);
        let mut rank = 0;
        let mut active = 0;
        for s in self.active_streams() {
            active += 1;
            if (s.ordinal, s.id) < (me.ordinal, me.id) {
                rank += 1;
            }
        }
        // The stream itself is active: it just read.
        (rank, active.max(rank + 1))
    }

    /// How many of `copies` lanes stream `index` reads from: all of them when it is alone, one
    /// each when there are at least as many streams as copies (each reader then streams from a
    /// disk of its own, as md's sequential rule would have it), a share in between.
    fn lane_count(&self, index: usize, copies: usize) -> usize {
        let copies = self.lanes(copies);
        if copies <= 1 {
            return 1;
        }
        let (rank, active) = self.rank(index);
        if active >= copies {
            1
        } else {
            (copies - rank).div_ceil(active)
        }
    }

    /// The lane (a copy index among the readable copies, `0..copies`) that serves window
    /// `window` of stream `index`: the stream's lanes take the windows in turn.
    pub(crate) fn stream_lane(&self, index: usize, window: u64, copies: usize) -> usize {
        let copies = self.lanes(copies);
        if copies <= 1 {
            return 0;
        }
        let (rank, active) = self.rank(index);
        if active >= copies {
            return rank % copies;
        }
        let lanes = (copies - rank).div_ceil(active);
        rank + active * (window % lanes as u64) as usize
    }

    /// How many lanes `copies` readable copies make: one where the layout keeps its copies far
    /// apart (the lowest copies are already spread over every member, and the others sit half
    /// a member away), else one per copy.
    fn lanes(&self, copies: usize) -> usize {
        if self.far_copies() {
            1
        } else {
            copies
        }
    }

    /// The copy of a run that lane `lane` means: the `lane`-th readable copy in md's order
    /// (counting round when copies are missing), or, where the layout keeps its copies far
    /// apart, the readable copy at the lowest address whatever the lane.
    pub(crate) fn lane_copy(
        &self,
        copies: &[(usize, u64)],
        lane: usize,
        readable: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        // Read-ahead reads runs of up to 1 MiB, within a window.
        let slow = self.too_slow(copies, self.tuning.window_bytes.min(1 << 20), &readable);
        let readable = |slot| readable(slot) && !slow.contains(slot);
        if self.far_copies() {
            return copies
                .iter()
                .enumerate()
                .filter(|(_, c)| readable(c.0))
                .min_by_key(|(i, c)| (c.1, *i))
                .map(|(i, _)| i);
        }
        let count = copies.iter().filter(|c| readable(c.0)).count();
        if count == 0 {
            return None;
        }
        copies.iter().enumerate().filter(|(_, c)| readable(c.0)).nth(lane % count).map(|(i, _)| i)
    }

    /// The first readable copy in md's order (md's `choose_first_rdev`, used while a resync is
    /// owed). Records the read like [`Balancer::choose`].
    pub(crate) fn choose_first(
        &mut self,
        copies: &[(usize, u64)],
        len: u64,
        readable: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let chosen = copies.iter().position(|&(slot, _)| readable(slot))?;
        let (slot, offset) = copies[chosen];
        self.note_read(slot, offset, len);
        Some(chosen)
    }

    /// md's `update_read_sectors`: a read that does not continue the slot's run starts a new one.
    fn note_read(&mut self, slot: usize, offset: u64, len: u64) {
        let s = &mut self.slots[slot];
        if s.next_seq != offset {
            s.seq_start = offset;
        }
        s.next_seq = offset + len;
        s.planned += 1;
    }

    /// A member I/O of `len` bytes at `offset` went out to `slot`; `moves_head` for data I/O
    /// (reads, writes, discards), whose end is where the head will be.
    pub(crate) fn issued(&mut self, slot: usize, offset: u64, len: u64, moves_head: bool) {
        let s = &mut self.slots[slot];
        s.pending += 1;
        if moves_head {
            s.queued_end = offset + len;
        }
    }

    /// A member I/O issued with [`Balancer::issued`] completed (whatever its outcome: the disk
    /// is done with it). md's `update_head_pos`.
    pub(crate) fn completed(&mut self, slot: usize, offset: u64, len: u64, moves_head: bool) {
        let s = &mut self.slots[slot];
        s.pending = s.pending.saturating_sub(1);
        if moves_head {
            s.head = offset + len;
        }
    }

    /// raid1's `choose_best_rdev` for rotational disks (and md's `min_pending_disk` rule for
    /// non-rotational ones).
    fn md_raid1(&self, copies: &[(usize, u64)], readable: &impl Fn(usize) -> bool) -> Option<usize> {
        let mut min_pending: Option<(u32, usize)> = None;
        let mut closest: Option<(u64, usize)> = None;
        for (i, &(slot, offset)) in copies.iter().enumerate() {
            if !readable(slot) {
                continue;
            }
            let s = &self.slots[slot];
            // md's `should_choose_next` never holds here: it needs an optimal I/O size, which
            // member files and most disks do not advertise.
            if s.next_seq == offset || s.head == offset {
                return Some(i);
            }
            if min_pending.is_none_or(|(p, _)| s.load() < p) {
                min_pending = Some((s.load(), i));
            }
            let dist = offset.abs_diff(s.head);
            if closest.is_none_or(|(d, _)| dist < d) {
                closest = Some((dist, i));
            }
        }
        match min_pending {
            Some((pending, i)) if self.nonrot || pending == 0 => Some(i),
            _ => closest.map(|(_, i)| i),
        }
    }

    /// raid10's `read_balance` for rotational disks (least busy for non-rotational ones).
    fn md_raid10(
        &self,
        copies: &[(usize, u64)],
        near: u32,
        far: u32,
        readable: &impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let mut min_pending: Option<(u32, usize)> = None;
        let mut best: Option<(u64, usize)> = None;
        for (i, &(slot, offset)) in copies.iter().enumerate() {
            if !readable(slot) {
                continue;
            }
            let s = &self.slots[slot];
            if min_pending.is_none_or(|(p, _)| s.load() < p) {
                min_pending = Some((s.load(), i));
            }
            let distance = if near > 1 && s.load() == 0 {
                0
            } else if far > 1 {
                offset
            } else {
                offset.abs_diff(s.head)
            };
            if best.is_none_or(|(d, _)| distance < d) {
                best = Some((distance, i));
            }
        }
        if self.nonrot {
            min_pending.map(|(_, i)| i)
        } else {
            best.map(|(_, i)| i)
        }
    }

    /// The readable copy with the fewest I/Os pending, ties to the smallest distance between
    /// the copy and `head` of its slot, then to md's order.
    fn least_busy(
        &self,
        copies: &[(usize, u64)],
        readable: &impl Fn(usize) -> bool,
        head: impl Fn(&SlotLoad) -> u64,
    ) -> Option<usize> {
        let mut best: Option<((u32, u64), usize)> = None;
        for (i, &(slot, offset)) in copies.iter().enumerate() {
            if !readable(slot) {
                continue;
            }
            let s = &self.slots[slot];
            let key = (s.load(), offset.abs_diff(head(s)));
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, i));
            }
        }
        best.map(|(_, i)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uraid_layout::{Raid10Format, Raid10Layout, Raid1Layout};

    const MIB: u64 = 1 << 20;

    fn raid1(n: usize) -> Balancer {
        Balancer::new(&Geometry::Raid1(Raid1Layout::new(n, 1 << 20).unwrap()))
    }

    fn raid10(n: usize, format: Raid10Format) -> Balancer {
        Balancer::new(&Geometry::Raid10(Raid10Layout::new(n, 128, format, 1 << 20).unwrap()))
    }

    /// Every slot holds the copy at `offset` (raid1).
    fn mirror(n: usize, offset: u64) -> Vec<(usize, u64)> {
        (0..n).map(|s| (s, offset)).collect()
    }

    fn all(_: usize) -> bool {
        true
    }

    /// Pretend an I/O of `len` bytes at `offset` went to `slot` and completed.
    fn ran(b: &mut Balancer, slot: usize, offset: u64, len: u64) {
        b.issued(slot, offset, len, true);
        b.completed(slot, offset, len, true);
    }

    #[test]
    fn names_parse_back_and_unknown_names_list_the_valid_ones() {
        for p in ReadPolicy::ALL {
            assert_eq!(p.name().parse::<ReadPolicy>().unwrap(), p);
            assert_eq!(p.to_string(), p.name());
        }
        assert_eq!(ReadPolicy::default(), ReadPolicy::Md);
        let err = "fastest".parse::<ReadPolicy>().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("\"fastest\""), "{text}");
        assert!(text.contains("md, round-robin, shortest-queue, split, md-1998, md-2006"), "{text}");
        assert!("MD".parse::<ReadPolicy>().is_err(), "names are exact");
    }

    #[test]
    fn md_keeps_a_sequential_read_on_its_disk_even_when_another_is_idle() {
        let mut b = raid1(2);
        // Slot 1 read [0, 64K) and is idle; slot 0 is idle too.
        assert_eq!(b.choose(&mirror(2, 0), 65536, all), Some(0), "both idle: the first idle disk");
        b.issued(0, 0, 65536, true);
        // The next read continues slot 0's run while slot 0 is busy and slot 1 idle: md stays.
        assert_eq!(b.choose(&mirror(2, 65536), 65536, all), Some(0));
        assert_eq!(b.slot(0).seq_start, 0);
        assert_eq!(b.slot(0).next_seq, 131072);
        // A read that starts where slot 1's head is also counts as sequential for slot 1.
        ran(&mut b, 1, 0, 8 * MIB);
        b.issued(1, 0, 4096, true); // slot 1 busy now
        assert_eq!(b.choose(&mirror(2, 8 * MIB), 4096, all), Some(1));
    }

    #[test]
    fn md_prefers_an_idle_disk_then_the_nearest_head() {
        let mut b = raid1(3);
        ran(&mut b, 0, 0, 4096);
        ran(&mut b, 1, 500 * MIB, 4096);
        ran(&mut b, 2, 900 * MIB, 4096);
        // Slots 0 and 2 busy, slot 1 idle: slot 1 although slot 2's head is nearer.
        b.issued(0, 0, 4096, true);
        b.issued(2, 900 * MIB, 4096, true);
        assert_eq!(b.choose(&mirror(3, 800 * MIB), 4096, all), Some(1));
        // All busy: the nearest head (slot 2, at 900 MiB + 4 KiB).
        b.issued(1, 500 * MIB, 4096, true);
        assert_eq!(b.choose(&mirror(3, 850 * MIB), 4096, all), Some(2));
        // An unreadable copy is never chosen, however near.
        assert_eq!(b.choose(&mirror(3, 860 * MIB), 4096, |s| s != 2), Some(1));
        assert_eq!(b.choose(&mirror(3, 860 * MIB), 4096, |_| false), None);
    }

    #[test]
    fn md_on_nonrotational_members_takes_the_least_busy() {
        let mut b = raid1(2);
        b.set_nonrot(true);
        ran(&mut b, 1, 100 * MIB, 4096);
        b.issued(0, 0, 4096, true);
        b.issued(0, 0, 4096, true);
        b.issued(1, 0, 4096, true);
        // Slot 1's head is far, slot 0's near, but slot 1 has fewer pending.
        assert_eq!(b.choose(&mirror(2, 4096 * 9), 4096, all), Some(1));
    }

    #[test]
    fn md_raid10_near_takes_an_idle_copy_and_far_the_lowest_address() {
        let mut near = raid10(2, Raid10Format::NEAR2);
        near.issued(0, 0, 4096, true);
        assert_eq!(near.choose(&[(0, MIB), (1, MIB)], 4096, all), Some(1), "slot 1 idle");
        near.issued(1, 0, 4096, true);
        // Both busy: nearest head (slot 0 head still 0 for completed I/O: none completed).
        near.completed(1, 0, 2 * MIB, true);
        near.issued(1, 0, 4096, true);
        assert_eq!(near.choose(&[(0, 3 * MIB), (1, 3 * MIB)], 4096, all), Some(1));

        let far2 = Raid10Format::parse("f2").unwrap();
        let mut far = raid10(2, far2);
        ran(&mut far, 1, 600 * MIB, 4096);
        // Head of slot 1 is right at its copy, but md's far rule takes the lowest address.
        assert_eq!(far.choose(&[(0, 600 * MIB + 4096), (1, 10 * MIB)], 4096, all), Some(1));
        assert_eq!(far.choose(&[(0, 5 * MIB), (1, 600 * MIB + 4096)], 4096, all), Some(0));
    }

    #[test]
    fn md_counts_the_earlier_chunks_of_a_request_as_pending() {
        // raid10 n2 on two members: every chunk on both. md chooses chunk by chunk and counts
        // each choice in nr_pending, so a two-chunk read on an idle array takes both disks.
        let mut b = raid10(2, Raid10Format::NEAR2);
        b.begin_request();
        assert_eq!(b.choose(&[(0, 0), (1, 0)], 65536, all), Some(0));
        assert_eq!(b.choose(&[(0, 65536), (1, 65536)], 65536, all), Some(1));
        // The next request starts afresh (the reads are issued by then, and counted there).
        b.begin_request();
        assert_eq!(b.choose(&[(0, 5 * MIB), (1, 5 * MIB)], 4096, all), Some(0));
    }

    /// `n` reads of 4 KiB on `slot`, one at a time, each taking `ns` of the clock at `*now`.
    fn timed_reads(b: &mut Balancer, now: &mut u64, slot: usize, ns: u64, n: usize) {
        for _ in 0..n {
            b.set_now(*now);
            let t = b.read_started(slot, 4096).expect("a clock");
            b.issued(slot, 0, 4096, true);
            *now += ns;
            b.set_now(*now);
            b.completed(slot, 0, 4096, true);
            b.read_finished(slot, t);
        }
    }

    #[test]
    fn a_slow_copy_is_passed_over_unless_the_read_continues_its_run() {
        let mut b = raid1(2);
        let mut now = 0;
        timed_reads(&mut b, &mut now, 0, 5_000_000, 8);
        timed_reads(&mut b, &mut now, 1, 100_000, 8);
        // Both idle: md takes the first idle disk, but slot 0 is fifty times slower.
        assert_eq!(b.choose(&mirror(2, 100 * MIB), 4096, all), Some(1));
        // A read that continues slot 0's run (starts at its head) stays there, as md has it:
        // a stream's latency says nothing of where its disk is.
        ran(&mut b, 0, 0, 300 * MIB);
        assert_eq!(b.choose(&mirror(2, 300 * MIB), 4096, all), Some(0));
        // Turned off, md's order again.
        b.set_latency_balancing(false);
        assert_eq!(b.choose(&mirror(2, 700 * MIB), 4096, all), Some(0));
    }

    #[test]
    fn md1998_goes_round_the_ring_and_moves_sequential_runs_on_every_64k() {
        let mut b = raid1(3);
        b.set_policy(ReadPolicy::Md1998);
        // A random read: its first block on last_used (slot 0), which moves on; the rest of
        // the read continues it, on the next disk.
        let c = mirror(3, 10 * MIB);
        assert_eq!(b.piece_len(&c, 8192), MD1998_BLOCK);
        assert_eq!(b.choose(&c, MD1998_BLOCK, all), Some(0));
        let c = mirror(3, 10 * MIB + MD1998_BLOCK);
        assert_eq!(b.piece_len(&c, 7168), 7168);
        assert_eq!(b.choose(&c, 7168, all), Some(1));
        // Another random read starts on slot 1 and moves last_used to slot 2.
        assert_eq!(b.choose(&mirror(3, 500 * MIB), MD1998_BLOCK, all), Some(1));
        // A sequential run stays on slot 2 until it has read 64 KiB there.
        let mut at = 500 * MIB + MD1998_BLOCK;
        let mut run = 0;
        while run < MD1998_RUN_LIMIT {
            let c = mirror(3, at);
            let len = b.piece_len(&c, 16384);
            assert_eq!(b.choose(&c, len, all), Some(2));
            at += len;
            run += len;
        }
        assert_eq!(run, MD1998_RUN_LIMIT, "cut where the kernel switched");
        assert_eq!(b.choose(&mirror(3, at), 4096, all), Some(0), "round the ring");
        // A disk that cannot be read is passed over.
        assert_eq!(b.choose(&mirror(3, 900 * MIB), 4096, |s| s != 0), Some(1));
    }

    #[test]
    fn md2006_keeps_one_sequential_run_per_array_then_takes_an_idle_disk_then_the_nearest() {
        let mut b = raid1(3);
        b.set_policy(ReadPolicy::Md2006);
        // All idle: scanning down from slot 0 (last_used) the first idle disk is slot 2.
        assert_eq!(b.choose(&mirror(3, 100 * MIB), 4096, all), Some(2));
        b.issued(2, 100 * MIB, 4096, true);
        // It continues the array's last read: stays on slot 2 although it is busy.
        assert_eq!(b.choose(&mirror(3, 100 * MIB + 4096), 4096, all), Some(2));
        b.issued(2, 100 * MIB + 4096, 4096, true);
        // Another read elsewhere: the scan from slot 1 down finds slot 1 idle.
        assert_eq!(b.choose(&mirror(3, 700 * MIB), 4096, all), Some(1));
        b.issued(1, 700 * MIB, 4096, true);
        // The first reader continues, but the array's run is the second one's now: md-2006
        // does not know it is sequential, and takes the idle slot 0.
        assert_eq!(b.choose(&mirror(3, 100 * MIB + 8192), 4096, all), Some(0));
        b.issued(0, 100 * MIB + 8192, 4096, true);
        // Every disk busy: the nearest head (completions set the heads).
        b.completed(0, 0, 4096, true);
        b.issued(0, 0, 4096, true);
        b.completed(1, 700 * MIB, 4096, true);
        b.issued(1, 700 * MIB, 4096, true);
        b.completed(2, 300 * MIB, 4096, true);
        b.issued(2, 300 * MIB, 4096, true);
        assert_eq!(b.choose(&mirror(3, 650 * MIB), 4096, all), Some(1));
        assert_eq!(b.choose(&mirror(3, 650 * MIB), 4096, |s| s != 1), Some(2));
    }

    #[test]
    fn split_under_load_takes_the_nearest_expected_head_within_one_io_of_the_least_busy() {
        let mut b = raid1(3);
        b.set_policy(ReadPolicy::Split);
        // Every disk busy: slot 0 with one I/O ending at 100 MiB, slot 1 with two ending at
        // 500 MiB, slot 2 with three ending at 510 MiB.
        b.issued(0, 100 * MIB - 4096, 4096, true);
        b.issued(1, 0, 4096, true);
        b.issued(1, 500 * MIB - 4096, 4096, true);
        for _ in 0..3 {
            b.issued(2, 510 * MIB - 4096, 4096, true);
        }
        // Near 505 MiB: slot 1 (one more than the least busy) rather than the far slot 0;
        // slot 2 is nearer still but two more behind.
        assert_eq!(b.choose(&mirror(3, 505 * MIB), 4096, all), Some(1));
        // Near 90 MiB: slot 0.
        assert_eq!(b.choose(&mirror(3, 90 * MIB), 4096, all), Some(0));
        // One idle disk, far away: it starts at once, so it wins.
        b.completed(2, 0, 4096, true);
        b.completed(2, 0, 4096, true);
        b.completed(2, 900 * MIB, 4096, true);
        assert_eq!(b.choose(&mirror(3, 505 * MIB + 8192), 4096, all), Some(2));
    }

    #[test]
    fn split_marks_a_stream_written_back_behind_its_reader_as_rewritten() {
        let mut b = raid1(2);
        b.set_policy(ReadPolicy::Split);
        let i = streams(&mut b, &[0])[0];
        for k in 2..64u64 {
            b.track(k * 4096, 4096);
        }
        assert!(!b.stream(i).rewritten);
        // A write elsewhere does not count.
        b.note_write(500 * MIB, 65536);
        assert!(!b.stream(i).rewritten);
        // A write of what the reader has just read does.
        b.note_write(128 * 1024, 65536);
        assert!(b.stream(i).rewritten);
    }

    #[test]
    fn round_robin_takes_the_copies_in_turn_per_request() {
        let mut b = raid1(3);
        b.set_policy(ReadPolicy::RoundRobin);
        let mut seen = Vec::new();
        for _ in 0..6 {
            b.begin_request();
            let first = b.choose(&mirror(3, 0), 4096, all).unwrap();
            // A second run of the same request goes to the same copy.
            assert_eq!(b.choose(&mirror(3, MIB), 4096, all), Some(first));
            seen.push(first);
        }
        assert_eq!(seen, vec![1, 2, 0, 1, 2, 0]);
        // A copy that cannot be read is passed over.
        b.begin_request();
        assert_eq!(b.choose(&mirror(3, 0), 4096, |s| s != 1), Some(2));
    }

    #[test]
    fn shortest_queue_takes_the_fewest_pending_ties_to_the_nearest_head() {
        let mut b = raid1(3);
        b.set_policy(ReadPolicy::ShortestQueue);
        ran(&mut b, 2, 100 * MIB, 4096);
        b.issued(0, 0, 4096, true);
        b.issued(0, 0, 4096, true);
        b.issued(1, 0, 4096, true);
        b.issued(2, 0, 4096, true);
        // Slots 1 and 2 have one pending each; slot 2's head is nearer to 99 MiB.
        assert_eq!(b.choose(&mirror(3, 99 * MIB), 4096, all), Some(2));
        // Slot 1 drains: it has the fewest.
        b.completed(1, 0, 4096, true);
        assert_eq!(b.choose(&mirror(3, 99 * MIB), 4096, all), Some(1));
    }

    #[test]
    fn split_follows_streams_from_their_first_continuation() {
        let mut b = raid1(2);
        b.set_policy(ReadPolicy::Split);
        assert_eq!(b.track(0, 4096).stream, None, "a first read is no stream yet");
        let t = b.track(4096, 4096);
        let i = t.stream.expect("a continuation establishes the stream");
        assert_eq!(b.stream(i).next, 8192);
        assert_eq!(b.stream(i).run, 8192);
        // A read inside what was read ahead for the stream continues it too.
        b.stream_mut(i).ahead = MIB;
        assert_eq!(b.track(64 * 1024, 4096).stream, Some(i));
        assert_eq!(b.stream(i).next, 64 * 1024 + 4096);
        // Unrelated reads do not.
        assert_eq!(b.track(500 * MIB, 4096).stream, None);
    }

    #[test]
    fn split_evicts_streams_that_never_continued_first() {
        let mut b = raid1(2);
        b.track(0, 4096);
        let established = b.track(4096, 4096).stream.unwrap();
        let id = b.stream(established).id;
        let mut evicted = Vec::new();
        for k in 0..(3 * MAX_STREAMS as u64) {
            let t = b.track((k + 10) * MIB, 4096);
            assert_eq!(t.stream, None);
            evicted.extend(t.evicted);
        }
        assert!(!evicted.contains(&id), "the active stream was evicted");
        assert!(b.stream_active(id));
        assert!(!evicted.is_empty());
        // Once idle long enough it may go.
        for k in 0..ACTIVE_REQUESTS + 2 * MAX_STREAMS as u64 {
            evicted.extend(b.track((k + 1000) * MIB, 4096).evicted);
        }
        assert!(evicted.contains(&id));
    }

    /// Establish streams at `starts` (in that order) and return their indices.
    fn streams(b: &mut Balancer, starts: &[u64]) -> Vec<usize> {
        starts.iter().for_each(|&s| _ = b.track(s, 4096));
        starts.iter().map(|&s| b.track(s + 4096, 4096).stream.unwrap()).collect()
    }

    #[test]
    fn split_lanes_share_the_copies_among_the_streams() {
        let w = 1u64;
        // One stream, two copies: windows alternate.
        let mut b = raid1(2);
        let one = streams(&mut b, &[0]);
        let lanes: Vec<usize> = (0..6).map(|win| b.stream_lane(one[0], win * w, 2)).collect();
        assert_eq!(lanes, vec![0, 1, 0, 1, 0, 1]);
        // Two streams, two copies: a copy each, whatever the window.
        let mut b = raid1(2);
        let two = streams(&mut b, &[0, 500 * MIB]);
        for win in 0..4 {
            assert_eq!(b.stream_lane(two[0], win, 2), 0);
            assert_eq!(b.stream_lane(two[1], win, 2), 1);
        }
        // Two streams, four copies: two copies each.
        let a: Vec<usize> = (0..4).map(|win| b.stream_lane(two[0], win, 4)).collect();
        let c: Vec<usize> = (0..4).map(|win| b.stream_lane(two[1], win, 4)).collect();
        assert_eq!((a, c), (vec![0, 2, 0, 2], vec![1, 3, 1, 3]));
        // Three streams, two copies: every stream on one copy.
        let mut b = raid1(2);
        let three = streams(&mut b, &[0, 300 * MIB, 600 * MIB]);
        let homes: Vec<usize> = three.iter().map(|&i| b.stream_lane(i, 7, 2)).collect();
        assert_eq!(homes, vec![0, 1, 0]);
    }

    #[test]
    fn split_lane_copies_skip_missing_copies_and_take_the_lowest_far_copy() {
        let b = raid1(3);
        let copies = mirror(3, 0);
        assert_eq!(b.lane_copy(&copies, 1, all), Some(1));
        assert_eq!(b.lane_copy(&copies, 1, |s| s != 0), Some(2), "lane 1 of the copies left");
        assert_eq!(b.lane_copy(&copies, 2, |s| s != 0), Some(1), "counting round");
        assert_eq!(b.lane_copy(&copies, 0, |_| false), None);
        let far = raid10(2, Raid10Format::parse("f2").unwrap());
        assert!(far.far_copies());
        assert_eq!(far.lane_copy(&[(0, 600 * MIB), (1, 3 * MIB)], 0, all), Some(1));
        assert_eq!(far.lane_copy(&[(0, 600 * MIB), (1, 3 * MIB)], 1, all), Some(1));
        assert_eq!(far.lane_copy(&[(0, 600 * MIB), (1, 3 * MIB)], 0, |s| s == 0), Some(0));
    }

    #[test]
    fn split_reads_ahead_more_as_the_stream_grows_within_its_bounds() {
        let mut b = raid1(2);
        b.set_tuning(SplitTuning { window_bytes: MIB, readahead_bytes: 64 * MIB, divide_bytes: 512 << 10 });
        let i = streams(&mut b, &[0])[0];
        assert_eq!(b.readahead_depth(i, 2), 128 << 10, "small at first");
        for k in 2..1000u64 {
            b.track(k * 4096, 4096);
        }
        // Grown to a window per copy and one more behind each.
        assert_eq!(b.readahead_depth(i, 2), 4 * MIB);
        assert_eq!(b.readahead_depth(i, 4), 8 * MIB);
        // Many streams share the memory.
        b.set_tuning(SplitTuning { window_bytes: MIB, readahead_bytes: 3 * MIB, divide_bytes: 512 << 10 });
        assert_eq!(b.readahead_depth(i, 2), 3 * MIB);
    }

    #[test]
    fn split_divides_only_over_idle_copies_nearest_first() {
        let mut b = raid1(3);
        ran(&mut b, 0, 100 * MIB, 4096);
        ran(&mut b, 2, 10 * MIB, 4096);
        let mut out = [0; 8];
        let n = b.idle_copies(&mirror(3, 12 * MIB), all, &mut out);
        assert_eq!(&out[..n], &[2, 1, 0], "nearest head first");
        b.issued(2, 0, 4096, true);
        let n = b.idle_copies(&mirror(3, 12 * MIB), |s| s != 0, &mut out);
        assert_eq!(&out[..n], &[1], "busy and unreadable copies left out");
    }

    #[test]
    fn split_sends_random_reads_to_the_least_busy_and_counts_queued_work() {
        let mut b = raid1(2);
        b.set_policy(ReadPolicy::Split);
        ran(&mut b, 0, 10 * MIB, 4096);
        ran(&mut b, 1, 700 * MIB, 4096);
        assert_eq!(b.choose(&mirror(2, 11 * MIB), 4096, all), Some(0), "idle, nearer");
        b.issued(0, 11 * MIB, 4096, true);
        assert_eq!(b.choose(&mirror(2, 12 * MIB), 4096, all), Some(1), "slot 0 busy now");
        b.issued(1, 12 * MIB, 4096, true);
        // Both busy with one I/O each: nearest to where each head will be (slot 1 at 12 MiB).
        assert_eq!(b.choose(&mirror(2, 13 * MIB), 4096, all), Some(1));
    }
}
