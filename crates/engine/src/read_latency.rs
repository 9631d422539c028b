//! Measured read latency per member slot, and which copies of a read it rules out as slow.
//!
//! Pure bookkeeping, no I/O and no clock of its own: the driver tells the engine the time
//! ([`crate::Array::set_now`]), the engine stamps every member read when it issues it and hands
//! the stamp back here when the read completes. Until a driver tells the time nothing is
//! measured and nothing is ruled out, so read balancing is exactly what the policy alone
//! decides.
//!
//! What is kept, per slot and per size class of read, as exponentially weighted means (weight
//! [`SAMPLE_WEIGHT`] per read):
//!
//! - the latency of its reads, completion minus issue;
//! - their time per I/O in the queue: the latency divided by the I/Os the slot had in flight
//!   when the read was issued, itself included. For a member that serves one I/O at a time (a
//!   disk) that is its service time whatever the queue depth; for a member that serves many
//!   at once (a remote host, an SSD) it is its latency over the depth it was measured at.
//!   Either way `(in flight + 1) × it` is what a read issued now should wait
//!   ([`ReadLatency::expected_wait`]), without counting a queue's wait twice.
//! - when the last sample came, and how many there are since the estimate started. An
//!   estimate takes part in the rule from [`MIN_SAMPLES`] on, so one lucky or unlucky read (a
//!   disk's short or long seek) never moves a read. A sample that comes more than
//!   [`STALE_NS`] after the one before starts the estimate afresh: a host that recovered is
//!   measured as it is now, not averaged with what it was.
//!
//! Probes. A copy that no read goes to is never measured: the one md's order leaves idle at
//! queue depth 1, the one ruled out as slow. So a readable copy to which no read of a size
//! class has gone for [`STALE_NS`], or none at all [`FIRST_PROBE_NS`] after the clock started,
//! gets the next read of that class,
//! if it is idle and the policy chose a measured copy ([`ReadLatency::probe`]), and so do the
//! reads after it, one at a time, until it has [`MIN_SAMPLES`] new samples. Its first sample
//! starts its estimate afresh, and an estimate with fewer than [`MIN_SAMPLES`] is not judged:
//! the copy takes reads as the policy gives them until it is measured again. A far host ruled
//! out is so measured about once a second, at the cost of the few reads it takes meanwhile,
//! and a host that recovered wins back its share. Between alike members that the policy reads
//! every second, nothing differs from the policy's choices.
//!
//! Size classes keep bandwidth out of the comparison: a 1 MiB read takes milliseconds on a
//! fast local disk, as long as a 4 KiB read on a far host, and must not make its member look
//! far. Reads are compared with reads of their own class only (up to 16 KiB, 128 KiB, 1 MiB,
//! and larger).
//!
//! The rule ([`ReadLatency::slow_slots`]): among the readable copies with an estimate, the
//! reference is the one whose expected wait is least. Another copy is
//! slow, and passed over, when its latency, its time per I/O and its expected wait all exceed
//! [`SLOW_RATIO`] times the reference's plus [`SLOW_MARGIN_NS`]. Copies with no estimate are
//! never passed over and never the reference; the reference itself is never passed over, so
//! a readable copy always remains.
//!
//! Why all three. Latency alone differs between alike disks at different queue depths (a disk
//! with 8 reads queued answers each 8 times later); time per I/O alone differs between alike
//! hosts that serve in parallel at different depths (the same 100 µs over 1 or over 16 in
//! flight). A far or slow member is worse by both; alike members whose service time is their
//! own (SSDs, hosts) are never worse by both, whatever their queues, so the policies choose
//! among them exactly as before. Hard disks are the exception: their service time is set by
//! the seeks the policy's choices make (`docs/read-balancing.md`, "Latency").
//! The expected wait lets a slow copy take reads again when the fast one is queued deeper than
//! it is slower. A member that gets reads only now and then (a disk beside the one a sequential
//! reader keeps) starts afresh at every sample and never has enough of them to take part.

/// Weight of a new sample in the mean: an eighth, so a member's estimate follows it within a
/// few dozen reads, and the spread of a disk's random access times (2-14 ms on a hard disk)
/// moves it little enough that alike disks stay well within [`SLOW_RATIO`] of each other.
pub(crate) const SAMPLE_WEIGHT: f64 = 1.0 / 8.0;

/// A copy is slow when its latency, its time per I/O and its expected wait are more than this
/// many times the reference's. Twice: a copy that would take more than twice as long as another is a
/// different kind of member (a far host, a slower device), not the same kind with a bad
/// moment; alike disks under the same mix of reads measure within some tens of percent.
pub(crate) const SLOW_RATIO: f64 = 2.0;

/// And by more than this (50 µs): below it a difference is the host's own noise (a thread
/// wake-up, a page-cache miss), not a member's distance; a network round trip is longer.
pub(crate) const SLOW_MARGIN_NS: f64 = 50_000.0;

/// A sample more than this after the one before it (a second) starts the estimate afresh, and
/// a copy no read went to for this long is probed.
pub(crate) const STALE_NS: u64 = 1_000_000_000;

/// A copy that no read of a class has gone to since the clock started is probed this soon (a
/// tenth of a second): a far member that md's order reads first costs no more than that, and
/// a member the policy reads at all has had its read by then.
pub(crate) const FIRST_PROBE_NS: u64 = 100_000_000;

/// Samples an estimate needs, since it started, to take part in the rule.
pub(crate) const MIN_SAMPLES: u64 = 4;

/// Size classes of reads: up to 16 KiB, 128 KiB, 1 MiB, larger.
const CLASS_LIMITS: [u64; 3] = [16 << 10, 128 << 10, 1 << 20];
const CLASSES: usize = CLASS_LIMITS.len() + 1;

fn class_of(len: u64) -> usize {
    CLASS_LIMITS.iter().position(|&limit| len <= limit).unwrap_or(CLASS_LIMITS.len())
}

/// What the engine keeps with a member read in flight, to measure it at completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadTiming {
    issued_at: u64,
    class: u8,
    /// I/Os in flight on the slot when the read was issued, itself included.
    queue: u32,
}

/// One slot's estimate for one size class: latency, and time per I/O in the queue.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Estimate {
    /// Mean latency (completion minus issue), in nanoseconds.
    latency_ns: f64,
    /// Mean latency over the I/Os in flight at issue, in nanoseconds.
    per_io_ns: f64,
    /// Samples since the estimate started (the means are meaningless while it is 0).
    samples: u64,
    /// When the last sample completed.
    at: u64,
    /// When the last read went out (of this class, to this slot).
    issued_at: Option<u64>,
    /// Being probed: its next reads are the probe's, until it has samples enough.
    probing: bool,
}

/// An estimate as the rule uses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Measured {
    pub(crate) latency_ns: f64,
    pub(crate) per_io_ns: f64,
}

fn ewma(mean: f64, sample: f64) -> f64 {
    mean + SAMPLE_WEIGHT * (sample - mean)
}

impl Estimate {
    fn add(&mut self, latency_ns: f64, queue: u32, now: u64) {
        if now.saturating_sub(self.at) > STALE_NS {
            self.samples = 0;
        }
        let per_io_ns = latency_ns / f64::from(queue);
        if self.samples == 0 {
            self.latency_ns = latency_ns;
            self.per_io_ns = per_io_ns;
        } else {
            self.latency_ns = ewma(self.latency_ns, latency_ns);
            self.per_io_ns = ewma(self.per_io_ns, per_io_ns);
        }
        self.samples += 1;
        self.at = now;
        if self.samples >= MIN_SAMPLES {
            self.probing = false;
        }
    }

    /// The estimate, if it has samples enough to take part in the rule.
    fn known(&self) -> Option<Measured> {
        (self.samples >= MIN_SAMPLES).then_some(Measured { latency_ns: self.latency_ns, per_io_ns: self.per_io_ns })
    }
}

/// Slots a read must not go to, as a bit set over slot numbers (md allows up to 384 slots;
/// slots beyond [`SlotSet::CAPACITY`] are never in the set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SlotSet([u64; 6]);

impl SlotSet {
    pub(crate) const CAPACITY: usize = 6 * 64;

    fn insert(&mut self, slot: usize) {
        if slot < Self::CAPACITY {
            self.0[slot / 64] |= 1 << (slot % 64);
        }
    }

    pub(crate) fn remove(&mut self, slot: usize) {
        if slot < Self::CAPACITY {
            self.0[slot / 64] &= !(1 << (slot % 64));
        }
    }

    pub(crate) fn contains(&self, slot: usize) -> bool {
        slot < Self::CAPACITY && self.0[slot / 64] & (1 << (slot % 64)) != 0
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
}

/// The per-array latency measurements.
#[derive(Debug, Clone)]
pub(crate) struct ReadLatency {
    /// The driver's time in nanoseconds; `None` until it first tells it.
    now: Option<u64>,
    /// The first time the driver told.
    started: u64,
    /// Whether measurements rule copies out (see [`crate::Array::set_latency_balancing`]).
    enabled: bool,
    slots: Vec<[Estimate; CLASSES]>,
}

impl ReadLatency {
    pub(crate) fn new(slots: usize) -> ReadLatency {
        ReadLatency { now: None, started: 0, enabled: true, slots: vec![[Estimate::default(); CLASSES]; slots] }
    }

    /// The driver's clock: nanoseconds from any fixed start, never going back (a time before
    /// the last one is taken as the last one).
    pub(crate) fn set_now(&mut self, now_ns: u64) {
        if self.now.is_none() {
            self.started = now_ns;
        }
        self.now = Some(self.now.map_or(now_ns, |t| t.max(now_ns)));
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    pub(crate) fn set_enabled(&mut self, enabled: bool) {
        self.enabled = enabled;
    }

    /// A read of `len` bytes goes out to `slot`, which has `in_flight` I/Os before it: what to
    /// keep with it, if there is a clock to measure it by.
    pub(crate) fn start(&mut self, slot: usize, len: u64, in_flight: u32) -> Option<ReadTiming> {
        let now = self.now?;
        let class = class_of(len);
        self.slots[slot][class].issued_at = Some(now);
        Some(ReadTiming { issued_at: now, class: class as u8, queue: in_flight.saturating_add(1) })
    }

    /// A read started with [`ReadLatency::start`] on `slot` came back with its data.
    pub(crate) fn finished(&mut self, slot: usize, timing: ReadTiming) {
        let Some(now) = self.now else { return };
        let latency = now.saturating_sub(timing.issued_at) as f64;
        self.slots[slot][timing.class as usize].add(latency, timing.queue, now);
    }

    /// The estimates of `slot` for reads of `len` bytes, if measured enough to take part in
    /// the rule.
    pub(crate) fn measured(&self, slot: usize, len: u64) -> Option<Measured> {
        self.slots[slot][class_of(len)].known()
    }

    /// The policy chose copy `chosen` of `copies` for a read of `len` bytes: the copy to probe
    /// instead, if any (see the module documentation). `idle` says which slots have nothing in
    /// flight.
    pub(crate) fn probe(
        &mut self,
        copies: &[(usize, u64)],
        chosen: usize,
        len: u64,
        idle: impl Fn(usize) -> bool,
        readable: &impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let now = self.now.filter(|_| self.enabled)?;
        let class = class_of(len);
        self.slots[copies[chosen].0][class].known()?;
        let started = self.started;
        let due = |e: &Estimate| {
            e.probing
                || match e.issued_at {
                    Some(t) => now.saturating_sub(t) > STALE_NS,
                    None => now.saturating_sub(started) > FIRST_PROBE_NS,
                }
        };
        let i = copies
            .iter()
            .enumerate()
            .position(|(i, &(slot, _))| i != chosen && readable(slot) && idle(slot) && due(&self.slots[slot][class]))?;
        self.slots[copies[i].0][class].probing = true;
        Some(i)
    }

    /// How long a read issued now to a slot with `load` I/Os in flight should take, at
    /// `per_io_ns` a piece.
    fn expected_wait(per_io_ns: f64, load: u32) -> f64 {
        per_io_ns * f64::from(load + 1)
    }

    /// The slots among `copies` (slot, member offset) that a read of `len` bytes should not
    /// go to, by the rule in the module documentation; `queued` gives each slot's I/Os in
    /// flight or about to be (md's `nr_pending`) and `readable` which copies may be read at all.
    pub(crate) fn slow_slots(
        &self,
        copies: &[(usize, u64)],
        len: u64,
        queued: &impl Fn(usize) -> u32,
        readable: &impl Fn(usize) -> bool,
    ) -> SlotSet {
        let mut slow = SlotSet::default();
        if self.now.is_none() || !self.enabled {
            return slow;
        }
        let class = class_of(len);
        // Each readable copy's estimate and expected wait, worked out once.
        let measured: smallvec::SmallVec<[(usize, Measured, f64); 4]> = copies
            .iter()
            .filter(|&&(slot, _)| readable(slot))
            .filter_map(|&(slot, _)| {
                let m = self.slots[slot][class].known()?;
                Some((slot, m, Self::expected_wait(m.per_io_ns, queued(slot))))
            })
            .collect();
        let Some(&(_, reference, ref_wait)) = measured.iter().min_by(|a, b| a.2.total_cmp(&b.2)) else {
            return slow;
        };
        let worse = |a: f64, b: f64| a > SLOW_RATIO * b + SLOW_MARGIN_NS;
        for &(slot, m, wait) in &measured {
            if worse(m.latency_ns, reference.latency_ns)
                && worse(m.per_io_ns, reference.per_io_ns)
                && worse(wait, ref_wait)
            {
                slow.insert(slot);
            }
        }
        slow
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn loads(pending: &[u32]) -> impl Fn(usize) -> u32 + '_ {
        move |slot| pending[slot]
    }

    fn all(_: usize) -> bool {
        true
    }

    /// `n` reads of `len` bytes on `slot`, one at a time, each taking `latency` ns.
    fn measure(l: &mut ReadLatency, slot: usize, len: u64, latency: u64, n: usize) {
        for _ in 0..n {
            let t = l.start(slot, len, 0).unwrap();
            let now = l.now.unwrap() + latency;
            l.set_now(now);
            l.finished(slot, t);
        }
    }

    #[test]
    fn nothing_is_measured_or_ruled_out_without_a_clock() {
        let mut l = ReadLatency::new(2);
        assert_eq!(l.start(0, 4096, 0), None);
        assert!(l.slow_slots(&[(0, 0), (1, 0)], 4096, &loads(&[0, 0]), &all).is_empty());
    }

    #[test]
    fn a_far_copy_is_ruled_out_and_alike_copies_never_are() {
        let mut l = ReadLatency::new(3);
        l.set_now(0);
        measure(&mut l, 0, 4096, MS / 10, 20);
        measure(&mut l, 1, 4096, 5 * MS, 20);
        measure(&mut l, 2, 4096, MS / 10 + MS / 20, 20);
        let copies = [(0, 0), (1, 0), (2, 0)];
        let slow = l.slow_slots(&copies, 4096, &loads(&[0, 0, 0]), &all);
        assert!(!slow.contains(0) && slow.contains(1) && !slow.contains(2));
        // Alike copies (0 and 2) are not ruled out by queues alone, however unequal.
        let slow = l.slow_slots(&copies, 4096, &loads(&[30, 0, 0]), &all);
        assert!(!slow.contains(0) && !slow.contains(2));
        // The far copy takes reads when the near ones are queued deeper than it is slower.
        let slow = l.slow_slots(&copies, 4096, &loads(&[60, 0, 60]), &all);
        assert!(!slow.contains(1), "61 x 0.1 ms against 5 ms");
        // An unreadable reference rules nothing out on its behalf.
        let slow = l.slow_slots(&copies, 4096, &loads(&[0, 0, 0]), &|s| s == 1);
        assert!(slow.is_empty());
    }

    #[test]
    fn classes_keep_large_reads_apart_and_unknown_copies_are_kept() {
        let mut l = ReadLatency::new(2);
        l.set_now(0);
        measure(&mut l, 0, 4096, MS / 10, 10);
        measure(&mut l, 1, MIB, 5 * MS, 10);
        assert_eq!(l.measured(1, 4096), None);
        // 1 MiB reads were measured on slot 1 only: nothing to compare with.
        assert!(l.slow_slots(&[(0, 0), (1, 0)], MIB, &loads(&[0, 0]), &all).is_empty());
        assert!(l.slow_slots(&[(0, 0), (1, 0)], 4096, &loads(&[0, 0]), &all).is_empty());
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn queued_reads_are_counted_per_io_in_the_queue() {
        let mut l = ReadLatency::new(1);
        l.set_now(0);
        // Issued behind 31 others, each took 3.2 ms: 0.1 ms of the member's time.
        for k in 0..MIN_SAMPLES {
            let t = l.start(0, 4096, 31).unwrap();
            assert_eq!(l.measured(0, 4096).map(|m| m.per_io_ns), None, "{k} samples are not enough");
            l.set_now(3_200_000 * (k + 1));
            l.finished(0, t);
        }
        assert_eq!(l.measured(0, 4096).map(|m| m.per_io_ns), Some(100_000.0));
    }

    #[test]
    fn a_sample_after_a_long_silence_starts_the_estimate_afresh() {
        let mut l = ReadLatency::new(1);
        l.set_now(0);
        measure(&mut l, 0, 4096, 5 * MS, 20);
        l.set_now(l.now.unwrap() + 2 * STALE_NS);
        measure(&mut l, 0, 4096, MS / 10, 1);
        assert_eq!(l.measured(0, 4096).map(|m| m.per_io_ns), None, "one sample since the start");
        measure(&mut l, 0, 4096, MS / 10, MIN_SAMPLES as usize - 1);
        assert_eq!(l.measured(0, 4096).map(|m| m.per_io_ns), Some((MS / 10) as f64), "not averaged with the old 5 ms");
    }

    #[test]
    fn a_copy_left_unread_for_a_second_is_probed_and_judged_afresh() {
        let mut l = ReadLatency::new(3);
        l.set_now(0);
        measure(&mut l, 0, 4096, MS / 10, 20);
        measure(&mut l, 1, 4096, 5 * MS, 20);
        let copies = [(0, 0), (1, 0), (2, 0)];
        let idle = |_| true;
        // Slot 2 has had no read yet, and the clock has run for 102 ms: probed.
        assert_eq!(l.probe(&copies[..], 0, 4096, idle, &all), Some(2));
        l.set_now(l.now.unwrap() + STALE_NS - 50 * MS);
        // Not a busy copy, nor an unreadable one; slot 1 was read less than a second ago.
        assert_eq!(l.probe(&copies, 0, 4096, |s| s != 2, &all), None);
        assert_eq!(l.probe(&copies, 0, 4096, idle, &|s| s != 2), None);
        // A copy the policy chose without an estimate is measured by the read itself.
        assert_eq!(l.probe(&copies, 2, 4096, idle, &all), None);
        // Being probed, slot 2 takes the next reads too, until measured.
        assert_eq!(l.probe(&copies, 0, 4096, idle, &all), Some(2));
        measure(&mut l, 2, 4096, MS / 10, MIN_SAMPLES as usize);
        assert_eq!(l.probe(&copies, 0, 4096, idle, &all), None);
        // Slot 1, ruled out, unread for more than a second: probed.
        l.set_now(l.now.unwrap() + 100 * MS);
        assert!(l.slow_slots(&copies[..2], 4096, &loads(&[0, 0, 0]), &all).contains(1));
        assert_eq!(l.probe(&copies, 0, 4096, |s| s != 2, &all), Some(1));
        // Its sample starts its estimate afresh: not judged until measured enough, then by
        // what it is now.
        measure(&mut l, 1, 4096, MS / 10, 1);
        assert!(!l.slow_slots(&copies[..2], 4096, &loads(&[0, 0, 0]), &all).contains(1));
        measure(&mut l, 1, 4096, MS / 10, MIN_SAMPLES as usize);
        assert!(!l.slow_slots(&copies[..2], 4096, &loads(&[0, 0, 0]), &all).contains(1));
        assert_eq!(l.measured(1, 4096).map(|m| m.latency_ns), Some((MS / 10) as f64));
        // Had it still been far, it would be ruled out again.
        measure(&mut l, 1, 4096, 5 * MS, 20);
        assert!(l.slow_slots(&copies[..2], 4096, &loads(&[0, 0, 0]), &all).contains(1));
    }

    #[test]
    fn turned_off_it_rules_nothing_out() {
        let mut l = ReadLatency::new(2);
        l.set_now(0);
        measure(&mut l, 0, 4096, MS / 10, 5);
        measure(&mut l, 1, 4096, 5 * MS, 5);
        l.set_enabled(false);
        assert!(l.slow_slots(&[(0, 0), (1, 0)], 4096, &loads(&[0, 0]), &all).is_empty());
    }

    #[test]
    fn the_clock_never_goes_back() {
        let mut l = ReadLatency::new(1);
        l.set_now(10);
        l.set_now(5);
        assert_eq!(l.now, Some(10));
    }

    #[test]
    fn slot_sets_hold_md_s_384_slots_and_ignore_beyond() {
        let mut s = SlotSet::default();
        s.insert(0);
        s.insert(383);
        s.insert(384);
        assert!(s.contains(0) && s.contains(383) && !s.contains(384) && !s.contains(1));
    }
}
