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
//! raid6 (uraid's own extension) keeps redundancy with a parity member gone, so two more rules:
//! - a stripe is logged on its P member, or on its Q member while P is not in sync; when the
//!   member holding a stripe's log fails while its writes are out or not yet flushed, the
//!   entries move to the stripe's other parity member's log, and no new stripe is logged
//!   anywhere until those writes finished and were flushed (`Pause`): a moved entry is only
//!   right as long as no later write changed its stripe;
//! - a member that becomes in sync again logs its stripes only once no other log holds an entry
//!   for them (`log_member_joined`): an old entry left in a Q member's header could otherwise
//!   outlive later writes to its stripe and be replayed with stale partial parity. A header
//!   that a new one is replacing counts until the new one is durable: a crash before then
//!   replays the old one.
//!
//! Log writes belong to no request: they carry [`LOG_RID`], and the tag's part tells a header
//! write (`HEADER_PART`) from a flush made for the log of slot `part - FLUSH_PART_BASE`.

use std::collections::{BTreeSet, HashSet, VecDeque};

use uraid_md_format::ppl::{PplEntry, PplHeader, MAX_ENTRIES};

use super::emit::{IoKind, IoTag, Outcome};
use super::parity_write::StripeMemberWrites;
use super::requests::OpKind;
use super::{Array, RequestId};
use crate::geometry::SECTOR_BYTES;
use crate::member_io::MemberOp;
use crate::ppl::PplConfig;

/// The request id log I/O is filed under (requests count from 1).
pub(super) const LOG_RID: RequestId = 0;
const HEADER_PART: usize = 0;
const FLUSH_PART_BASE: usize = 1;
/// The tag part of the flushes that end a pause: past every slot's flush part.
const PAUSE_PART: usize = usize::MAX;

#[derive(Debug)]
pub(super) struct PplLog {
    pub(super) config: PplConfig,
    generation: u64,
    slots: Vec<SlotLog>,
    /// Per slot, whether its log may be written (see `log_member_joined`): items queue until.
    usable: Vec<bool>,
    /// Logged stripes whose member writes are out and not all finished.
    writing: HashSet<(RequestId, usize)>,
    /// Set while entries moved off a failed member's log stand for writes not yet durable.
    pause: Option<Pause>,
}

/// No new stripe is logged until the stripes a failed log member covered are written and their
/// members flushed; then the moved entries are dropped (see the module documentation).
#[derive(Debug, Default)]
struct Pause {
    /// Stripes of the failed log still being written.
    waiting: HashSet<(RequestId, usize)>,
    /// Members to flush once they are done.
    targets: BTreeSet<usize>,
    /// Flushes out.
    flushing: usize,
}

#[derive(Debug, Default)]
struct SlotLog {
    /// Items waiting for the next log write of this member.
    queued: VecDeque<Logged>,
    /// The log write on disk (or going there), while stripes it covers are being written.
    active: Option<Unit>,
    /// What the header on disk (or going there) holds.
    header: Vec<Logged>,
    /// While a new header is going out, the one it replaces, still on disk: a crash before the
    /// new one is durable replays this one.
    replaced: Vec<Logged>,
    /// Members written under the current header and not flushed since.
    unflushed: BTreeSet<usize>,
    /// Flushes in flight before the next header may go out.
    flushing: usize,
}

/// What one item of a log write stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Item {
    /// A stripe write whose member writes wait for this log write.
    Stripe { rid: RequestId, part: usize },
    /// A stripe whose log member failed after its writes went out: its entries live here until
    /// what it wrote is flushed.
    Moved { rid: RequestId, part: usize },
    /// No entries: a new header for the sake of a member that joined.
    Barrier,
}

/// One item waiting to be logged, with its entries and partial parity.
#[derive(Debug, Clone)]
pub(super) struct Logged {
    pub(super) item: Item,
    pub(super) entries: Vec<PplEntry>,
    pub(super) pp: Vec<u8>,
}

impl SlotLog {
    /// Whether this log's header (written or going out, or replaced by one not yet durable) or
    /// queue has entries for stripes whose P is `slot`.
    fn holds_entries_of(&self, slot: usize) -> bool {
        let of = |l: &Logged| l.entries.iter().any(|e| e.parity_disk as usize == slot);
        self.header.iter().any(of) || self.replaced.iter().any(of) || self.queued.iter().any(of)
    }
}

#[derive(Debug)]
struct Unit {
    /// Stripes covered by this log write whose member writes have not all finished.
    open: Vec<(RequestId, usize)>,
    /// The log write completed.
    durable: bool,
    /// The log write out adds moved entries to a header whose stripes were released already.
    amending: bool,
}

/// The bytes of one log write: the header, then the items' partial parity in entry order.
fn header_image(header: &PplHeader, items: &[Logged]) -> Vec<u8> {
    let mut data = header.to_bytes();
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
            usable: vec![true; slots],
            writing: HashSet::new(),
            pause: None,
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

    /// Whether entries moved off a failed log member (raid6) may not be durable yet: a crash now
    /// could leave stripes whose writes are out without a log (see the module documentation).
    pub fn ppl_moves_pending(&self) -> bool {
        self.log.as_ref().is_some_and(|l| {
            l.pause.is_some()
                || l.slots.iter().any(|sl| {
                    sl.active.as_ref().is_some_and(|u| u.amending)
                        || sl.queued.iter().any(|i| matches!(i.item, Item::Moved { .. }))
                })
        })
    }

    /// Largest row range (bytes) one stripe write may span so its partial parity fits in one
    /// log write; `None` without a log.
    pub(super) fn log_max_rows(&self) -> Option<u64> {
        let log = self.log.as_ref()?;
        let per_row = crate::ppl::pp_per_row(&self.geometry);
        Some((log.config.space() / per_row * crate::ppl::ROW_BYTES).min(self.geometry.chunk_bytes()))
    }

    /// The member whose log covers a stripe with these roles: its P, or for raid6 its Q when P
    /// is not in sync; failing both, a parity member being rebuilt (its log is not replayed
    /// while it rebuilds, but it is the moment it is in sync, with writes issued just before
    /// still in flight); `None` if none is left (the write then goes out unlogged).
    pub(super) fn log_slot_for(&self, p: usize, q: Option<usize>) -> Option<usize> {
        self.log.as_ref()?;
        let parity = || std::iter::once(p).chain(q);
        parity().find(|&s| self.in_sync(s)).or_else(|| parity().find(|&s| self.writable(s)))
    }

    /// A member became in sync (a rebuild finished): see the module documentation. Its log is
    /// held until every other log has written a header without entries for its stripes.
    pub(super) fn log_member_joined(&mut self, slot: usize) {
        if self.log.is_none() || self.geometry.stripe_roles(0).q.is_none() {
            return;
        }
        self.log.as_mut().expect("checked").usable[slot] = false;
        self.log_barrier_check();
    }

    /// Let held logs go once no other log holds entries for their stripes; make a log that
    /// still does and has nothing queued write a new header.
    fn log_barrier_check(&mut self) {
        let in_sync: Vec<bool> = (0..self.slots.len()).map(|s| self.in_sync(s)).collect();
        let Some(log) = self.log.as_mut() else { return };
        let n = log.slots.len();
        let mut kick = Vec::new();
        for k in 0..n {
            if log.usable[k] {
                continue;
            }
            let holders: Vec<usize> =
                (0..n).filter(|&y| y != k && in_sync[y] && log.slots[y].holds_entries_of(k)).collect();
            if holders.is_empty() {
                log.usable[k] = true;
                kick.push(k);
            }
            for y in holders {
                if log.slots[y].queued.is_empty() {
                    log.slots[y].queued.push_back(Logged { item: Item::Barrier, entries: Vec::new(), pp: Vec::new() });
                    kick.push(y);
                }
            }
        }
        for s in kick {
            self.log_kick(s);
        }
    }

    /// Queue an item for the next log write of `slot`.
    pub(super) fn log_enqueue(&mut self, slot: usize, item: Logged) {
        let log = self.log.as_mut().expect("logging is enabled");
        log.slots[slot].queued.push_back(item);
        self.log_kick(slot);
    }

    /// Send the next log write of `slot` if nothing holds it back.
    fn log_kick(&mut self, slot: usize) {
        if !self.writable(slot) {
            return; // its items are taken care of by `log_maintenance`
        }
        let writable: Vec<bool> = (0..self.slots.len()).map(|s| self.writable(s)).collect();
        let Some(log) = self.log.as_mut() else { return };
        let space = log.config.space();
        let sl = &mut log.slots[slot];
        if sl.active.is_some() {
            // Entries moved here cannot wait for this unit to finish: the header is rewritten
            // with them added, which drops nothing and so needs no flush.
            self.log_amend(slot);
            return;
        }
        if sl.flushing > 0 || sl.queued.is_empty() {
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
        // New stripes wait while a pause is on, or while this log is held (`log_member_joined`);
        // moved entries and barriers do not.
        let paused = log.pause.is_some() || !log.usable[slot];
        let mut items: Vec<Logged> = Vec::new();
        let (mut entries, mut pp_len) = (0usize, 0u64);
        while let Some(next) = sl.queued.front() {
            if paused && matches!(next.item, Item::Stripe { .. }) {
                break;
            }
            let fits = entries + next.entries.len() <= MAX_ENTRIES && pp_len + next.pp.len() as u64 <= space;
            if !fits && !items.is_empty() {
                break;
            }
            let item = sl.queued.pop_front().expect("front exists");
            entries += item.entries.len();
            pp_len += item.pp.len() as u64;
            items.push(item);
        }
        if items.is_empty() {
            return;
        }
        let writing = &log.writing;
        let open = items
            .iter()
            .filter_map(|i| match i.item {
                Item::Stripe { rid, part } => Some((rid, part)),
                Item::Moved { rid, part } if writing.contains(&(rid, part)) => Some((rid, part)),
                _ => None,
            })
            .collect();
        let sl = &mut log.slots[slot];
        sl.replaced = std::mem::replace(&mut sl.header, items);
        sl.active = Some(Unit { open, durable: false, amending: false });
        self.send_header(slot);
    }

    /// Write `slot`'s header as it now stands (the entries and partial parity of its items),
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

    /// Add the moved entries queued at the front to the durable header of `slot`'s active unit.
    fn log_amend(&mut self, slot: usize) {
        let Some(log) = self.log.as_mut() else { return };
        let space = log.config.space();
        let sl = &mut log.slots[slot];
        let Some(unit) = sl.active.as_ref() else { return };
        if !unit.durable {
            return;
        }
        let mut entries: usize = sl.header.iter().map(|i| i.entries.len()).sum();
        let mut pp_len: u64 = sl.header.iter().map(|i| i.pp.len() as u64).sum();
        let mut moved = Vec::new();
        while let Some(next) = sl.queued.front() {
            let fits = entries + next.entries.len() <= MAX_ENTRIES && pp_len + next.pp.len() as u64 <= space;
            if !matches!(next.item, Item::Moved { .. }) || !fits {
                break;
            }
            let item = sl.queued.pop_front().expect("front exists");
            entries += item.entries.len();
            pp_len += item.pp.len() as u64;
            moved.push(item);
        }
        if moved.is_empty() {
            return;
        }
        let writing = &log.writing;
        let unit = log.slots[slot].active.as_mut().expect("checked");
        for i in &moved {
            if let Item::Moved { rid, part } = i.item {
                if writing.contains(&(rid, part)) {
                    unit.open.push((rid, part));
                }
            }
        }
        unit.durable = false;
        unit.amending = true;
        log.slots[slot].header.extend(moved);
        self.send_header(slot);
    }

    /// A log write or a log flush finished.
    pub(super) fn log_io_done(&mut self, tag: IoTag, outcome: Outcome) {
        if tag.part == PAUSE_PART {
            let log = self.log.as_mut().expect("logging is enabled");
            let pause = log.pause.as_mut().expect("a pause is on");
            pause.flushing -= 1;
            self.log_pause_step();
            return;
        }
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
        let items = self.log.as_ref().expect("logging is enabled").slots[slot].header.clone();
        let ok = outcome.succeeded() && self.writable(slot);
        let log = self.log.as_mut().expect("logging is enabled");
        // Written or not, the header this one replaced no longer counts: on disk it is
        // superseded, or the member failed.
        log.slots[slot].replaced.clear();
        let unit = log.slots[slot].active.as_mut().expect("a log write is out");
        let amended = std::mem::replace(&mut unit.amending, false);
        if ok {
            unit.durable = true;
            if !amended {
                for i in &items {
                    if let Item::Stripe { rid, part } = i.item {
                        self.release_logged(rid, part, slot);
                    }
                }
            }
            self.log_unit_check(slot);
            self.log_barrier_check();
            self.log_kick(slot);
        } else if amended {
            // The stripes are out already: `log_maintenance` moves them on as for any durable
            // header of a member that failed.
            unit.durable = true;
        } else {
            // The member holding the log failed before its header was surely written: stripes
            // waiting for it are planned again without it; moved entries move on.
            let log = self.log.as_mut().expect("logging is enabled");
            let sl = &mut log.slots[slot];
            sl.active = None;
            sl.header.clear();
            for i in items {
                match i.item {
                    Item::Stripe { rid, part } => self.replan_logged(rid, part),
                    Item::Moved { .. } => self.log_move(i, slot),
                    Item::Barrier => {}
                }
            }
            self.log_barrier_check();
        }
    }

    /// Advance a pause: flush its members once its stripes are written, end it once flushed.
    fn log_pause_step(&mut self) {
        let writable: Vec<bool> = (0..self.slots.len()).map(|s| self.writable(s)).collect();
        let Some(log) = self.log.as_mut() else { return };
        let Some(pause) = log.pause.as_mut() else { return };
        if !pause.waiting.is_empty() || pause.flushing > 0 {
            return;
        }
        let targets: Vec<usize> = std::mem::take(&mut pause.targets).into_iter().filter(|&s| writable[s]).collect();
        if !targets.is_empty() {
            pause.flushing = targets.len();
            for t in targets {
                self.emit_io(LOG_RID, IoTag { part: PAUSE_PART, slot: t }, 0, MemberOp::Flush, IoKind::Other);
            }
            return;
        }
        // What the moved entries covered is durable: they are no longer needed, and new
        // stripes may be logged again.
        log.pause = None;
        for sl in &mut log.slots {
            sl.queued.retain(|i| !matches!(i.item, Item::Moved { .. }));
        }
        for s in 0..log.slots.len() {
            self.log_kick(s);
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

    /// The log covering a stripe is durable: send the stripe's member writes.
    fn release_logged(&mut self, rid: RequestId, part: usize, log_slot: usize) {
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
        log.slots[log_slot].unflushed.extend(written);
        log.writing.insert((rid, part));
        if finished {
            // Nothing was left to write (every target failed meanwhile).
            sw.log_slot = None;
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
        log.writing.remove(&(rid, part));
        if let Some(pause) = log.pause.as_mut() {
            if pause.waiting.remove(&(rid, part)) {
                self.log_pause_step();
            }
        }
        let log = self.log.as_mut().expect("checked");
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

    /// Plan a stripe again whose log write did not happen (its log member is gone).
    fn replan_logged(&mut self, rid: RequestId, part: usize) {
        let mut op = self.ops.remove(&rid).expect("a logged stripe's request is open");
        let OpKind::ParityWrite(w) = &mut op.kind else { unreachable!("only parity writes are logged") };
        let sw = &mut w.stripes[part];
        sw.deferred.clear();
        sw.writing = false;
        sw.log_slot = None;
        if self.plan_stripe_write(rid, w, part) {
            self.stripe_finished(w, part);
        }
        if w.remaining == 0 {
            self.finish(rid, op);
        } else {
            self.ops.insert(rid, op);
        }
    }

    /// Move the entries of `item` from the log of `from`, whose member failed, to the log of the
    /// stripe's other parity member (raid6). raid4/5 have no other: nothing is left to protect.
    fn log_move(&mut self, item: Logged, from: usize) {
        let (Item::Stripe { rid, part } | Item::Moved { rid, part }) = item.item else { return };
        let Some(first) = item.entries.first() else { return };
        let width = self.geometry.stripe_data_bytes().expect("parity geometry");
        let roles = self.geometry.stripe_roles(first.data_sector * SECTOR_BYTES / width);
        let to = std::iter::once(roles.p).chain(roles.q).find(|&s| s != from && self.in_sync(s));
        let Some(to) = to else { return };
        let log = self.log.as_mut().expect("logging is enabled");
        // Ahead of stripes waiting there: those wait for the pause anyway.
        log.slots[to].queued.push_front(Logged { item: Item::Moved { rid, part }, entries: item.entries, pp: item.pp });
        self.log_kick(to);
    }

    /// Take care of the logs of members that failed (or were emptied): queued stripes are planned
    /// again, and what a durable header covered moves (see the module documentation). Called
    /// where no request is taken out of `ops`.
    pub(super) fn log_maintenance(&mut self) {
        let Some(log) = self.log.as_ref() else { return };
        let n = log.slots.len();
        for slot in 0..n {
            if self.writable(slot) {
                continue;
            }
            let log = self.log.as_mut().expect("logging is enabled");
            let sl = &mut log.slots[slot];
            let queued: Vec<Logged> = sl.queued.drain(..).collect();
            // A header write still out completes as lost and is handled in `log_io_done`.
            let settled = sl.active.as_ref().is_none_or(|u| u.durable);
            let (header, unflushed, open) = if settled {
                let open = sl.active.take().map(|u| u.open).unwrap_or_default();
                (std::mem::take(&mut sl.header), std::mem::take(&mut sl.unflushed), open)
            } else {
                (Vec::new(), BTreeSet::new(), Vec::new())
            };
            let has_q = self.geometry.stripe_roles(0).q.is_some();
            if has_q && header.iter().any(|i| !i.entries.is_empty()) {
                let pause = log.pause.get_or_insert_with(Pause::default);
                pause.waiting.extend(open.into_iter().filter(|k| log.writing.contains(k)));
                pause.targets.extend(unflushed);
            }
            for i in queued {
                match i.item {
                    Item::Stripe { rid, part } => self.replan_logged(rid, part),
                    Item::Moved { .. } => self.log_move(i, slot),
                    // A barrier write that cannot happen: this log is never replayed now.
                    Item::Barrier => {}
                }
            }
            for i in header {
                self.log_move(i, slot);
            }
            self.log_pause_step();
        }
        self.log_barrier_check();
    }
}
