//! Ordering of partial-parity-log writes (md's PPL io_units; the entries themselves are built
//! in [`crate::ppl`]).
//!
//! Every member keeps one log: a header and partial parity at the start of its PPL area,
//! covering the stripes whose parity it holds. The rules, md's:
//! - a stripe's data and parity writes go out only once the log write describing it is durable
//!   (the driver performs [`MemberOp::LogWrite`] as a FUA write);
//! - one log write per member at a time: stripes arriving meanwhile queue for the next one,
//!   which goes out only when every stripe of the previous one is written, and after the members
//!   those stripes wrote were flushed, because the next header replaces the one that covers them;
//! - a stripe whose parity member is gone is written unlogged, as md does for raid5: there is
//!   no parity left to disagree with its data. One being rebuilt still takes the log (md skips
//!   it): writes issued just before it turns in sync may still be in flight when it does.
//!
//! raid6 (uraid's own extension) keeps redundancy with a parity member gone, and so must its
//! log: a stripe is logged on both its P and Q members (those of them in sync or being rebuilt),
//! and its writes go out once every one of those log writes is durable, or failed with its
//! member while another is durable. A member that dies with a crash then leaves the entry on
//! the other, whose syndrome is the one a second missing member is rebuilt through. Two more
//! consequences:
//! - while both copies stand, they agree with the members: a later write to the stripe is
//!   logged on both as well, and goes out only once both logs hold its entry, which replaces
//!   the older one in each (each header only after what it covered was flushed);
//! - a member that turns in sync after a rebuild has been logged on for every write since it
//!   was added, into a log area the driver emptied then, so its log is as current as the other
//!   parity member's.
//!
//! Since a stripe waits for two logs, the queues must not wait for each other in a circle: a
//! stripe is queued on both of its logs at once, so every queue holds stripes in the same order,
//! and a log write takes the front of its queue. The oldest stripe not finished therefore has
//! only finished stripes ahead of it, and its log writes can always go out.
//!
//! A member failure holds the log until the driver has recorded it (opted into with
//! [`Array::set_log_hold_on_failure`]): no header is written meanwhile, so no entry is retired,
//! and stripes with nothing to log (their parity member is the one that failed) wait too, so
//! none is written without its parity while that member may still come back in sync.
//! md does the same by leaving every stripe alone while `MD_SB_CHANGE_PENDING` is set. A stripe
//! whose write failed on a member finishes on the others; were its entry retired before the
//! failure reached the superblocks, a crash would bring the member back in sync holding the old
//! bytes of that chunk beside parity computed with the new, and nothing left in the log to set
//! the stripe right.
//!
//! Log writes belong to no request: they carry [`LOG_RID`], and the tag's part tells a header
//! write (`HEADER_PART`) from a flush made for the log of slot `part - FLUSH_PART_BASE`.

use std::collections::{BTreeSet, HashMap, VecDeque};

use smallvec::SmallVec;
use uraid_md_format::ppl::{PplEntry, PplHeader, MAX_ENTRIES};

use super::emit::{IoKind, IoTag, Outcome};
use super::parity_write::StripeMemberWrites;
use super::requests::OpKind;
use super::{Array, RequestId};
use crate::member_io::MemberOp;
use crate::ppl::PplConfig;

/// The request id log I/O is filed under (requests count from 1).
pub(super) const LOG_RID: RequestId = 0;
const HEADER_PART: usize = 0;
const FLUSH_PART_BASE: usize = 1;

/// The members whose logs cover a stripe: its P and, on raid6, its Q.
pub(super) type LogSlots = SmallVec<[usize; 2]>;

#[derive(Debug)]
pub(super) struct PplLog {
    pub(super) config: PplConfig,
    generation: u64,
    slots: Vec<SlotLog>,
    /// Logged stripes whose member writes have not been released yet.
    waiting: HashMap<(RequestId, usize), Wait>,
    /// Stripes whose member writes wait for the hold on the log to end, with the members whose
    /// logs hold them durably (none for a stripe with nothing to log: its parity member is
    /// gone): no stripe is written while a member failure is unrecorded.
    parked: Vec<(RequestId, usize, LogSlots)>,
}

/// The log writes a stripe waits for.
#[derive(Debug, Default)]
struct Wait {
    /// Members whose log write for the stripe is neither durable nor failed.
    pending: LogSlots,
    /// Members whose log holds the stripe durably (and that have not failed since).
    durable: LogSlots,
}

#[derive(Debug, Default)]
struct SlotLog {
    /// Stripes waiting for the next log write of this member.
    queued: VecDeque<Logged>,
    /// The log write on disk (or going there), while stripes it covers are being written.
    active: Option<Unit>,
    /// What the header on disk (or going there) holds.
    header: Vec<Logged>,
    /// Members written under the current header and not flushed since.
    unflushed: BTreeSet<usize>,
    /// Flushes in flight before the next header may go out.
    flushing: usize,
}

/// One stripe write's entries and partial parity, as logged.
#[derive(Debug, Clone)]
pub(super) struct Logged {
    pub(super) rid: RequestId,
    pub(super) part: usize,
    pub(super) entries: Vec<PplEntry>,
    pub(super) pp: Vec<u8>,
}

#[derive(Debug)]
struct Unit {
    /// Stripes covered by this log write whose member writes have not all finished.
    open: Vec<(RequestId, usize)>,
    /// The log write completed.
    durable: bool,
}

/// The bytes of one log write: the header, then the stripes' partial parity in entry order.
fn header_image(header: &PplHeader, items: &[Logged]) -> Vec<u8> {
    let mut data = header.to_bytes();
    data.reserve_exact(items.iter().map(|i| i.pp.len()).sum());
    for i in items {
        data.extend_from_slice(&i.pp);
    }
    data
}

impl PplLog {
    pub(super) fn new(config: PplConfig, slots: usize) -> PplLog {
        PplLog {
            config,
            generation: 0,
            slots: (0..slots).map(|_| SlotLog::default()).collect(),
            waiting: HashMap::new(),
            parked: Vec::new(),
        }
    }
}

impl Array {
    /// Log partial parity before every write to a parity stripe (md's PPL), from now on. The
    /// driver must have replayed any log left by a crash first (see [`crate::ppl::replay`]) and
    /// reset the logs to empty headers.
    pub fn enable_ppl(&mut self, config: PplConfig) {
        assert!(self.geometry.is_parity(), "a partial parity log needs a parity layout");
        assert!(
            self.geometry.chunk_bytes().is_multiple_of(crate::ppl::ROW_BYTES),
            "partial parity is kept in whole rows; the chunk must be a multiple"
        );
        assert!(config.space() >= crate::ppl::pp_per_row(&self.geometry), "the log area holds no partial parity");
        self.log = Some(PplLog::new(config, self.slots.len()));
    }

    /// Whether writes are logged.
    pub fn ppl_enabled(&self) -> bool {
        self.log.is_some()
    }

    /// From now on (`on`), a member failing holds the log until [`Array::release_log_hold`]:
    /// for drivers that record member failures in the array's metadata and say when that
    /// record is durable (see the module's comment). Off by default, for drivers that record
    /// nothing.
    pub fn set_log_hold_on_failure(&mut self, on: bool) {
        self.log_hold_on_failure = on;
        if !on {
            self.release_log_hold();
        }
    }

    /// Whether a member failure holds the log: the driver must record it and then call
    /// [`Array::release_log_hold`], or logged writes wait forever.
    pub fn log_held(&self) -> bool {
        self.log_held
    }

    /// The member failures the engine reported are recorded durably (or can no longer be): log
    /// headers may be written again.
    pub fn release_log_hold(&mut self) {
        if !std::mem::take(&mut self.log_held) {
            return;
        }
        let n = self.log.as_ref().map_or(0, |log| log.slots.len());
        for slot in 0..n {
            self.log_kick(slot);
        }
        let parked = self.log.as_mut().map(|log| std::mem::take(&mut log.parked)).unwrap_or_default();
        for (rid, part, holders) in parked {
            self.release_logged(rid, part, &holders);
        }
    }

    /// Whether a stripe's member writes must wait for the hold on the log to end; if so they
    /// are kept and sent by [`Array::release_log_hold`].
    pub(super) fn park_while_held(&mut self, rid: RequestId, part: usize) -> bool {
        match self.log.as_mut() {
            Some(log) if self.log_held => {
                log.parked.push((rid, part, LogSlots::new()));
                true
            }
            _ => false,
        }
    }

    /// A member failed: hold the log if the driver asked for it.
    pub(super) fn hold_log_for_failure(&mut self) {
        if self.log_hold_on_failure && self.log.is_some() {
            self.log_held = true;
        }
    }

    /// Largest row range (bytes) one stripe write may span so its partial parity fits in one
    /// log write; `None` without a log.
    pub(super) fn log_max_rows(&self) -> Option<u64> {
        let log = self.log.as_ref()?;
        let per_row = crate::ppl::pp_per_row(&self.geometry);
        Some((log.config.space() / per_row * crate::ppl::ROW_BYTES).min(self.geometry.chunk_bytes()))
    }

    /// The members whose logs cover a stripe with these roles: its parity members that are
    /// written to (in sync, or being rebuilt: its log is not replayed while it rebuilds, but it
    /// is the moment it is in sync, with writes issued just before still in flight). Empty
    /// without a log, or if no parity member is left (the write then goes out unlogged).
    pub(super) fn log_slots_for(&self, p: usize, q: Option<usize>) -> LogSlots {
        if self.log.is_none() {
            return LogSlots::new();
        }
        std::iter::once(p).chain(q).filter(|&s| self.writable(s)).collect()
    }

    /// Queue a stripe for the next log write of each of `slots`; its member writes wait until
    /// they are durable.
    pub(super) fn log_enqueue(&mut self, slots: &[usize], item: Logged) {
        let log = self.log.as_mut().expect("logging is enabled");
        log.waiting
            .insert((item.rid, item.part), Wait { pending: slots.iter().copied().collect(), durable: LogSlots::new() });
        // Each log holds its own copy; the last takes the stripe's.
        if let Some((&last, others)) = slots.split_last() {
            for &slot in others {
                log.slots[slot].queued.push_back(item.clone());
            }
            log.slots[last].queued.push_back(item);
        }
        for &slot in slots {
            self.log_kick(slot);
        }
    }

    /// Send the next log write of `slot` if nothing holds it back.
    fn log_kick(&mut self, slot: usize) {
        if !self.writable(slot) {
            return; // its stripes are taken care of by `log_maintenance`
        }
        if self.log_held {
            return; // `release_log_hold` kicks every log again
        }
        let writable: Vec<bool> = (0..self.slots.len()).map(|s| self.writable(s)).collect();
        let Some(log) = self.log.as_mut() else { return };
        let space = log.config.space();
        let sl = &mut log.slots[slot];
        if sl.active.is_some() || sl.flushing > 0 || sl.queued.is_empty() {
            return;
        }
        if !sl.unflushed.is_empty() {
            let targets: Vec<usize> = std::mem::take(&mut sl.unflushed).into_iter().filter(|&s| writable[s]).collect();
            sl.flushing = targets.len();
            for t in &targets {
                self.emit_io(
                    LOG_RID,
                    IoTag { part: FLUSH_PART_BASE + slot, slot: *t },
                    0,
                    MemberOp::Flush,
                    IoKind::Other,
                );
            }
            if !targets.is_empty() {
                return;
            }
        }
        let log = self.log.as_mut().expect("logging is enabled");
        let sl = &mut log.slots[slot];
        let mut items: Vec<Logged> = Vec::new();
        let (mut entries, mut pp_len) = (0usize, 0u64);
        while let Some(next) = sl.queued.front() {
            let fits = entries + next.entries.len() <= MAX_ENTRIES && pp_len + next.pp.len() as u64 <= space;
            if !fits && !items.is_empty() {
                break;
            }
            let item = sl.queued.pop_front().expect("front exists");
            entries += item.entries.len();
            pp_len += item.pp.len() as u64;
            items.push(item);
        }
        let open = items.iter().map(|i| (i.rid, i.part)).collect();
        sl.header = items;
        sl.active = Some(Unit { open, durable: false });
        self.send_header(slot);
    }

    /// Write `slot`'s header as it now stands (the entries and partial parity of its stripes),
    /// with the next generation, so that it is the newest header on the member.
    fn send_header(&mut self, slot: usize) {
        let log = self.log.as_mut().expect("logging is enabled");
        log.generation += 1;
        let items = &log.slots[slot].header;
        let header = PplHeader {
            signature: log.config.signature,
            generation: log.generation,
            entries: items.iter().flat_map(|i| i.entries.iter().copied()).collect(),
        };
        let data = header_image(&header, items);
        self.emit_io(LOG_RID, IoTag { part: HEADER_PART, slot }, 0, MemberOp::LogWrite { data }, IoKind::Other);
    }

    /// A log write or a log flush finished.
    pub(super) fn log_io_done(&mut self, tag: IoTag, outcome: Outcome) {
        if tag.part >= FLUSH_PART_BASE {
            let slot = tag.part - FLUSH_PART_BASE;
            let log = self.log.as_mut().expect("logging is enabled");
            log.slots[slot].flushing -= 1;
            if log.slots[slot].flushing == 0 {
                self.log_kick(slot);
            }
            return;
        }
        let slot = tag.slot;
        let ok = outcome.succeeded() && self.writable(slot);
        let log = self.log.as_mut().expect("logging is enabled");
        let stripes: Vec<(RequestId, usize)> = log.slots[slot].header.iter().map(|i| (i.rid, i.part)).collect();
        if ok {
            log.slots[slot].active.as_mut().expect("a log write is out").durable = true;
        } else {
            // The member holding the log failed before its header was surely written: its
            // stripes go on with their other log, or are planned again without it.
            let sl = &mut log.slots[slot];
            sl.active = None;
            sl.header.clear();
        }
        for (rid, part) in stripes {
            self.log_settle(rid, part, slot, ok);
        }
        if ok {
            self.log_unit_check(slot);
        } else {
            // The slot may hold a new device by now, with stripes queued for it.
            self.log_kick(slot);
        }
    }

    /// The log write of `slot` for a stripe became durable (`durable`) or failed with its
    /// member: release the stripe or plan it again once no other log write of it is pending.
    fn log_settle(&mut self, rid: RequestId, part: usize, slot: usize, durable: bool) {
        let log = self.log.as_mut().expect("logging is enabled");
        let Some(wait) = log.waiting.get_mut(&(rid, part)) else { return };
        let Some(i) = wait.pending.iter().position(|&s| s == slot) else { return };
        wait.pending.swap_remove(i);
        if durable {
            wait.durable.push(slot);
        }
        if !wait.pending.is_empty() {
            return;
        }
        let wait = log.waiting.remove(&(rid, part)).expect("checked");
        if wait.durable.is_empty() {
            // Every log write failed with its member.
            self.replan_logged(rid, part);
        } else if self.log_held {
            // A member failed and its failure is not recorded yet. Written now, the stripe would
            // skip that member, which a crash before the record brings back as in sync, stale
            // for this stripe, while the log that covers the stripe may be one no assembly
            // replays (a member being rebuilt). md handles no stripe while a superblock change
            // is pending; the stripe waits for the record as stripes with nothing to log do.
            log.parked.push((rid, part, wait.durable));
        } else {
            self.release_logged(rid, part, &wait.durable);
        }
    }

    /// The unit of `slot` is finished once its header is durable and its stripes are written.
    fn log_unit_check(&mut self, slot: usize) {
        let Some(log) = self.log.as_mut() else { return };
        if log.slots[slot].active.as_ref().is_some_and(|u| u.durable && u.open.is_empty()) {
            log.slots[slot].active = None;
            self.log_kick(slot);
        }
    }

    /// The logs covering a stripe are durable (or it had none and the hold on the log ended):
    /// send the stripe's member writes. Each of the `holders` flushes what they wrote before
    /// its next header replaces the one covering them.
    fn release_logged(&mut self, rid: RequestId, part: usize, holders: &[usize]) {
        let mut op = self.ops.remove(&rid).expect("a logged stripe's request is open");
        let OpKind::ParityWrite(w) = &mut op.kind else { unreachable!("only parity writes are logged") };
        let sw = &mut w.stripes[part];
        let writes: StripeMemberWrites =
            std::mem::take(&mut sw.deferred).into_iter().filter(|(slot, ..)| self.writable(*slot)).collect();
        let written: Vec<usize> = writes.iter().map(|(s, ..)| *s).collect();
        sw.pending = writes.len();
        self.emit_stripe_writes(rid, part, writes);
        let finished = sw.pending == 0;
        let log = self.log.as_mut().expect("logging is enabled");
        for &h in holders {
            log.slots[h].unflushed.extend(written.iter().copied());
        }
        if finished {
            // Nothing was left to write (every target failed meanwhile).
            sw.logged = false;
            self.stripe_finished(w, part);
            let request_done = w.remaining == 0;
            self.log_stripe_done(rid, part);
            if request_done {
                self.finish(rid, op);
                return;
            }
        }
        self.ops.insert(rid, op);
    }

    /// A logged stripe finished its member writes.
    pub(super) fn log_stripe_done(&mut self, rid: RequestId, part: usize) {
        let Some(log) = self.log.as_mut() else { return };
        let mut check = Vec::new();
        for (slot, sl) in log.slots.iter_mut().enumerate() {
            if let Some(u) = sl.active.as_mut() {
                if let Some(i) = u.open.iter().position(|&x| x == (rid, part)) {
                    u.open.swap_remove(i);
                    check.push(slot);
                }
            }
        }
        for slot in check {
            self.log_unit_check(slot);
        }
    }

    /// Plan a stripe again whose log writes did not happen (its log members are gone).
    fn replan_logged(&mut self, rid: RequestId, part: usize) {
        let mut op = self.ops.remove(&rid).expect("a logged stripe's request is open");
        let OpKind::ParityWrite(w) = &mut op.kind else { unreachable!("only parity writes are logged") };
        let sw = &mut w.stripes[part];
        sw.deferred.clear();
        sw.writing = false;
        sw.logged = false;
        if self.plan_stripe_write(rid, w, part) {
            self.stripe_finished(w, part);
        }
        if w.remaining == 0 {
            self.finish(rid, op);
        } else {
            self.ops.insert(rid, op);
        }
    }

    /// Take care of the logs of members that failed (or were emptied): their queued stripes go
    /// on with their other log or are planned again, and a durable header no longer counts for
    /// the stripes it covers (a header write still out completes as lost, in `log_io_done`).
    /// Called where no request is taken out of `ops`.
    pub(super) fn log_maintenance(&mut self) {
        let Some(log) = self.log.as_ref() else { return };
        let n = log.slots.len();
        for slot in 0..n {
            if self.writable(slot) {
                continue;
            }
            let log = self.log.as_mut().expect("logging is enabled");
            let sl = &mut log.slots[slot];
            let queued: Vec<(RequestId, usize)> = sl.queued.drain(..).map(|i| (i.rid, i.part)).collect();
            if sl.active.as_ref().is_none_or(|u| u.durable) {
                sl.active = None;
                sl.unflushed.clear();
                for i in std::mem::take(&mut sl.header) {
                    if let Some(wait) = log.waiting.get_mut(&(i.rid, i.part)) {
                        wait.durable.retain(|s| *s != slot);
                    }
                }
            }
            for (rid, part) in queued {
                self.log_settle(rid, part, slot, false);
            }
        }
    }
}
