//! One background pass over the whole array (resync, check, repair, or recovery onto members
//! being rebuilt): its position, its steps and md's throttling rule, with no I/O and no clock.
//! Time is the policy's (see [`super`]): a `Duration` since the array started.
//!
//! Throttling follows md's `speed_limit_min` / `speed_limit_max`: above the maximum the pass
//! waits; between the two it yields to foreground I/O (only while clients have requests in
//! flight); below the minimum it runs flat out whatever the clients do, so a pass always ends.

use std::fmt;
use std::time::Duration;

/// What a pass does, by md's `sync_action` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncAction {
    /// Make redundancy consistent after an unclean shutdown (rewrites what disagrees).
    Resync,
    /// Rebuild members being recovered (spares) from redundancy.
    Recover,
    /// Count inconsistencies without changing anything (md's `mismatch_cnt`).
    Check,
    /// Count and rewrite inconsistencies.
    Repair,
}

impl SyncAction {
    pub fn name(self) -> &'static str {
        match self {
            SyncAction::Resync => "resync",
            SyncAction::Recover => "recover",
            SyncAction::Check => "check",
            SyncAction::Repair => "repair",
        }
    }

    /// Whether the pass counts mismatches into `mismatch_cnt`.
    pub fn counts_mismatches(self) -> bool {
        matches!(self, SyncAction::Check | SyncAction::Repair)
    }
}

impl fmt::Display for SyncAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// md's default limits are per device in KiB/s (1000 and 200000); uraid's are per array in
/// bytes/s, configurable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeedLimits {
    pub min_bytes_per_sec: u64,
    pub max_bytes_per_sec: u64,
}

impl Default for SpeedLimits {
    fn default() -> Self {
        SpeedLimits { min_bytes_per_sec: 1_000_000, max_bytes_per_sec: 200_000_000 }
    }
}

/// Why limits were refused ([`SpeedLimits::with`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpeedLimitError {
    #[error("the maximum speed must be at least 1 byte/s (to stop a pass, idle it)")]
    ZeroMax,
    #[error("the minimum speed ({min} bytes/s) is above the maximum ({max} bytes/s)")]
    MinAboveMax { min: u64, max: u64 },
}

impl SpeedLimits {
    /// These limits with the minimum and/or the maximum changed. A maximum of 0 is refused (a
    /// pass would never end; md's `idle` stops one), and so is a minimum above the maximum when
    /// it is asked for (md takes that silently and then holds the pass to the maximum anyway).
    /// A maximum given alone below the minimum in force lowers the minimum to it: asking a pass
    /// to go slower than the default floor (`serve --speed-limit-max=64K`) is what it says.
    pub fn with(self, min: Option<u64>, max: Option<u64>) -> Result<SpeedLimits, SpeedLimitError> {
        let limits = match (min, max) {
            (None, Some(max)) => {
                SpeedLimits { min_bytes_per_sec: self.min_bytes_per_sec.min(max), max_bytes_per_sec: max }
            }
            _ => SpeedLimits {
                min_bytes_per_sec: min.unwrap_or(self.min_bytes_per_sec),
                max_bytes_per_sec: max.unwrap_or(self.max_bytes_per_sec),
            },
        };
        if limits.max_bytes_per_sec == 0 {
            return Err(SpeedLimitError::ZeroMax);
        }
        if limits.min_bytes_per_sec > limits.max_bytes_per_sec {
            return Err(SpeedLimitError::MinAboveMax { min: limits.min_bytes_per_sec, max: limits.max_bytes_per_sec });
        }
        Ok(limits)
    }
}

/// How long to wait after a step when foreground I/O is waiting and the pass is above its
/// minimum: a little, often, so clients see short delays rather than long stalls.
const YIELD: Duration = Duration::from_millis(20);

/// The pass's speed is measured over its last few marks, one taken at most every `MARK_STEP`,
/// as md measures `currspeed` from its `resync_mark`s (md: 10 marks 3 s apart): long enough to
/// smooth the steps, short enough that a change of limits or of load shows within seconds.
const MARK_STEP: Duration = Duration::from_millis(500);
const MARKS: usize = 6;

/// A background job's speed over its last few seconds: `(time, bytes done)` marks, at most one
/// every half second, the last six of them. The speed shown, and the one the limits are
/// held to, is measured from the oldest, so a slow spell a while ago neither hides a burst now
/// nor lets one through.
#[derive(Debug, Clone)]
pub struct SpeedWindow {
    marks: std::collections::VecDeque<(Duration, u64)>,
}

impl SpeedWindow {
    /// A window measuring from `done` bytes at `now`.
    pub fn new(now: Duration, done: u64) -> SpeedWindow {
        SpeedWindow { marks: [(now, done)].into() }
    }

    /// Measure afresh from `done` bytes at `now` (the limits changed).
    pub fn restart(&mut self, now: Duration, done: u64) {
        self.marks.clear();
        self.marks.push_back((now, done));
    }

    /// `done` bytes at `now`: a mark if the last is half a second old.
    pub fn mark(&mut self, now: Duration, done: u64) {
        let last = self.marks.back().map_or(Duration::ZERO, |m| m.0);
        if self.marks.is_empty() || now.saturating_sub(last) >= MARK_STEP {
            self.marks.push_back((now, done));
            while self.marks.len() > MARKS {
                self.marks.pop_front();
            }
        }
    }

    /// The oldest mark: `(time, bytes done then)`.
    pub fn oldest(&self) -> (Duration, u64) {
        self.marks.front().copied().unwrap_or((Duration::ZERO, 0))
    }

    /// Bytes done and time passed since the oldest mark, `done` bytes being done at `now`.
    pub fn window(&self, now: Duration, done: u64) -> (u64, Duration) {
        let (t, then) = self.oldest();
        (done.saturating_sub(then), now.saturating_sub(t))
    }

    /// The speed since the oldest mark, `done` bytes being done at `now`.
    pub fn bytes_per_sec(&self, now: Duration, done: u64) -> u64 {
        let (done, elapsed) = self.window(now, done);
        let secs = elapsed.as_secs_f64();
        if secs <= 0.0 {
            return 0;
        }
        (done as f64 / secs) as u64
    }
}

/// The state of one running pass.
#[derive(Debug, Clone)]
pub struct SyncRun {
    pub action: SyncAction,
    /// Next byte to hand out as a step, in the pass's own space (logical for
    /// resync/check/repair, member bytes for recovery), and where the pass ends. Steps still
    /// with the engine lie below it: [`SyncRun::done_to`] is how far everything is done.
    pub pos: u64,
    pub end: u64,
    /// Where the pass started (a resumed pass does not start at 0).
    pub start: u64,
    /// Bytes per step: a whole number of stripes.
    pub step: u64,
    /// When the pass started.
    pub started: Duration,
    pub mismatch_sectors: u64,
    /// Steps with the engine, `(offset, len)`, oldest first.
    in_flight: Vec<(u64, u64)>,
    /// How many steps may be with the engine at once while the pass is not held back: reading
    /// the next windows while the last ones are written keeps every member busy.
    pub depth: usize,
    /// Do not start the next step before this.
    pub next_at: Duration,
    /// The last step's completion found the pass above a limit (over the maximum, or over the
    /// minimum with clients waiting): one step at a time until a completion finds it below, as
    /// md waits for its sync I/O to drain before going on.
    held_back: bool,
    /// Set when the operator asks to stop (md's `idle`).
    pub interrupted: bool,
    /// For a rebuild: the slots it rebuilds (those recovering when it started)...
    pub slots: Vec<usize>,
    /// ...and the device each held then. A slot whose device changed meanwhile (it failed and
    /// a spare took its place) was not rebuilt by this pass: nothing of it is recorded.
    pub devices: Vec<String>,
    /// Bytes passed over without work (clean in the write-intent bitmap).
    pub skipped: u64,
    /// Bytes done (steps completed, and skipped).
    completed: u64,
    /// The limits it keeps to (the policy's, as of the last step done or change).
    pub limits: SpeedLimits,
    /// `completed` over the last few seconds: the speed the limits are held to.
    speed: SpeedWindow,
}

impl SyncRun {
    pub fn new(action: SyncAction, start: u64, end: u64, step: u64, now: Duration) -> SyncRun {
        SyncRun {
            action,
            pos: start,
            end,
            start,
            step: step.max(1),
            started: now,
            mismatch_sectors: 0,
            in_flight: Vec::new(),
            depth: 1,
            next_at: now,
            held_back: false,
            interrupted: false,
            slots: Vec::new(),
            devices: Vec::new(),
            skipped: 0,
            completed: 0,
            limits: SpeedLimits { min_bytes_per_sec: u64::MAX, max_bytes_per_sec: u64::MAX },
            speed: SpeedWindow::new(now, 0),
        }
    }

    /// The slots this rebuild has been rebuilding all along: those still held by the device
    /// they held when it started.
    pub fn rebuilt_slots(&self, array: &crate::open_array::OpenArray) -> Vec<usize> {
        self.slots
            .iter()
            .zip(&self.devices)
            .filter(|(&s, name)| array.slot_device_name(s) == Some(name.as_str()))
            .map(|(&s, _)| s)
            .collect()
    }

    /// [`SyncRun::rebuilt_slots`] with each slot's device.
    pub fn rebuilt_devices(&self, array: &crate::open_array::OpenArray) -> Vec<(usize, String)> {
        self.rebuilt_slots(array)
            .into_iter()
            .filter_map(|s| array.slot_device_name(s).map(|name| (s, name.to_string())))
            .collect()
    }

    /// Whether another step may go out once [`SyncRun::next_at`] has come.
    pub fn wants_step(&self) -> bool {
        let depth = if self.held_back { 1 } else { self.depth.max(1) };
        !self.interrupted && self.pos < self.end && self.in_flight.len() < depth
    }

    /// Steps with the engine.
    pub fn steps_in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The next step to run now, if one is due. Beside the first step out, another goes only
    /// if the bytes out with it keep the pass under its maximum (otherwise the steps out at
    /// once would be a burst above it); if not, [`SyncRun::next_at`] says when they would.
    pub fn next_step(&mut self, now: Duration) -> Option<(u64, u64)> {
        if !self.wants_step() || now < self.next_at {
            return None;
        }
        let len = self.step.min(self.end - self.pos);
        if !self.in_flight.is_empty() {
            let (t0, done0) = self.speed.oldest();
            let out: u64 = self.in_flight.iter().map(|s| s.1).sum();
            let bytes = (self.completed - done0 + out + len) as f64;
            let ok_at = t0 + Duration::from_secs_f64(bytes / self.limits.max_bytes_per_sec.max(1) as f64);
            if ok_at > now {
                self.next_at = ok_at;
                return None;
            }
        }
        let at = self.pos;
        self.in_flight.push((at, len));
        self.pos += len;
        Some((at, len))
    }

    /// Pass over `[pos, to)` without work (clean in the write-intent bitmap).
    pub fn skip_to(&mut self, to: u64) {
        let to = to.min(self.end);
        if to > self.pos {
            self.skipped += to - self.pos;
            self.completed += to - self.pos;
            self.pos = to;
        }
    }

    /// Take the step at `offset` off the engine's list; its length.
    fn take_step(&mut self, offset: u64) -> u64 {
        let i = self.in_flight.iter().position(|&(at, _)| at == offset).expect("a step in flight");
        self.in_flight.remove(i).1
    }

    /// Record the finished step at `offset` and decide when the next may start.
    pub fn step_done(
        &mut self,
        offset: u64,
        mismatch_sectors: u64,
        now: Duration,
        foreground_busy: bool,
        limits: SpeedLimits,
    ) {
        self.completed += self.take_step(offset);
        self.mismatch_sectors += mismatch_sectors;
        self.limits = limits;
        self.speed.mark(now, self.completed);
        let (done, elapsed) = self.speed.window(now, self.completed);
        let delay = throttle_delay(done, elapsed, foreground_busy, limits);
        self.held_back = delay > Duration::ZERO;
        self.next_at = now + delay;
    }

    /// The step at `offset` failed: the pass stops, and is done only below it.
    pub fn step_failed(&mut self, offset: u64) {
        self.take_step(offset);
        self.interrupted = true;
        self.pos = self.pos.min(offset);
    }

    /// How far everything is done: below the oldest step still out (or below a failed one).
    pub fn done_to(&self) -> u64 {
        self.in_flight.iter().map(|&(at, _)| at).min().unwrap_or(self.pos).min(self.pos)
    }

    pub fn finished(&self) -> bool {
        self.in_flight.is_empty() && (self.pos >= self.end || self.interrupted)
    }

    /// Bytes done so far (skipped ones included).
    pub fn done_bytes(&self) -> u64 {
        self.completed
    }

    /// The limits changed: measure the speed afresh from now, and reconsider the next step at
    /// once rather than after a wait the old limits set.
    pub fn limits_changed(&mut self, limits: SpeedLimits, now: Duration) {
        self.limits = limits;
        self.speed.restart(now, self.completed);
        self.held_back = false;
        self.next_at = self.next_at.min(now);
    }

    /// The pass's current speed (over its last few seconds, as md's).
    pub fn bytes_per_sec(&self, now: Duration) -> u64 {
        self.speed.bytes_per_sec(now, self.completed)
    }

    /// Seconds to the end at the current speed.
    pub fn eta_secs(&self, now: Duration) -> Option<u64> {
        let speed = self.bytes_per_sec(now);
        (speed > 0).then(|| (self.end - self.done_to()) / speed)
    }
}

/// md's rule (`md_do_sync`): above the maximum, wait until the average falls to it; above the
/// minimum with foreground I/O waiting, yield a little; otherwise go on at once.
pub fn throttle_delay(done: u64, elapsed: Duration, foreground_busy: bool, limits: SpeedLimits) -> Duration {
    let secs = elapsed.as_secs_f64().max(1e-6);
    let speed = done as f64 / secs;
    if speed > limits.max_bytes_per_sec as f64 {
        let needed = done as f64 / limits.max_bytes_per_sec as f64;
        return Duration::from_secs_f64((needed - secs).max(0.0));
    }
    if foreground_busy && speed > limits.min_bytes_per_sec as f64 {
        return YIELD;
    }
    Duration::ZERO
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: SpeedLimits = SpeedLimits { min_bytes_per_sec: 1_000_000, max_bytes_per_sec: 10_000_000 };

    #[test]
    fn above_the_maximum_waits_until_the_average_is_back_at_it() {
        // 20 MB in 1 s against a 10 MB/s cap: wait one more second.
        let d = throttle_delay(20_000_000, Duration::from_secs(1), false, LIMITS);
        assert!((d.as_secs_f64() - 1.0).abs() < 1e-6, "{d:?}");
    }

    #[test]
    fn between_the_limits_yields_only_to_foreground_io() {
        let d = throttle_delay(5_000_000, Duration::from_secs(1), true, LIMITS);
        assert_eq!(d, YIELD);
        let d = throttle_delay(5_000_000, Duration::from_secs(1), false, LIMITS);
        assert_eq!(d, Duration::ZERO);
    }

    #[test]
    fn below_the_minimum_never_waits() {
        let d = throttle_delay(500_000, Duration::from_secs(1), true, LIMITS);
        assert_eq!(d, Duration::ZERO);
    }

    #[test]
    fn steps_cover_the_range_once_and_stop_when_interrupted() {
        let now = Duration::from_secs(7);
        let mut run = SyncRun::new(SyncAction::Check, 0, 10, 4, now);
        let mut seen = Vec::new();
        while let Some((at, len)) = run.next_step(now) {
            assert!(run.next_step(now).is_none(), "two steps in flight");
            seen.push((at, len));
            run.step_done(at, 1, now, false, SpeedLimits { min_bytes_per_sec: 0, max_bytes_per_sec: u64::MAX });
        }
        assert_eq!(seen, vec![(0, 4), (4, 4), (8, 2)]);
        assert!(run.finished());
        assert_eq!(run.mismatch_sectors, 3);
        let mut run = SyncRun::new(SyncAction::Repair, 0, 10, 4, now);
        run.next_step(now);
        run.interrupted = true;
        assert!(!run.finished(), "a step is still in flight");
        run.step_done(0, 0, now, false, LIMITS);
        assert!(run.finished());
        assert!(run.next_step(now).is_none());
    }

    const UNLIMITED: SpeedLimits = SpeedLimits { min_bytes_per_sec: u64::MAX, max_bytes_per_sec: u64::MAX };

    #[test]
    fn several_steps_go_out_and_done_to_waits_for_the_oldest() {
        let now = Duration::from_secs(1);
        let mut run = SyncRun::new(SyncAction::Recover, 0, 100, 10, now);
        run.depth = 3;
        let out: Vec<_> = std::iter::from_fn(|| run.next_step(now)).collect();
        assert_eq!(out, vec![(0, 10), (10, 10), (20, 10)], "as many as the depth");
        assert_eq!(run.done_to(), 0);
        // The newest ends first: nothing below the oldest is done yet.
        run.step_done(20, 0, now, false, UNLIMITED);
        assert_eq!((run.done_to(), run.done_bytes()), (0, 10));
        run.step_done(0, 0, now, false, UNLIMITED);
        assert_eq!(run.done_to(), 10);
        assert_eq!(run.next_step(now), Some((30, 10)));
        assert_eq!(run.next_step(now), Some((40, 10)));
        assert_eq!(run.next_step(now), None, "three in flight again");
        run.step_done(10, 0, now, false, UNLIMITED);
        assert_eq!(run.done_to(), 30);
    }

    #[test]
    fn steps_out_together_stay_under_the_maximum() {
        let t = Duration::from_secs(1);
        let mut run = SyncRun::new(SyncAction::Recover, 0, 1 << 30, 1 << 20, t);
        run.depth = 4;
        run.limits = SpeedLimits { min_bytes_per_sec: 0, max_bytes_per_sec: 8 << 20 };
        assert_eq!(run.next_step(t), Some((0, 1 << 20)));
        assert_eq!(run.next_step(t), None, "a second MiB at once would be a burst over 8 MiB/s");
        assert_eq!(run.next_at, t + Duration::from_millis(250), "two MiB at 8 MiB/s");
        assert_eq!(run.next_step(run.next_at), Some((1 << 20, 1 << 20)));
    }

    #[test]
    fn a_failed_step_ends_the_pass_below_it() {
        let now = Duration::from_secs(1);
        let mut run = SyncRun::new(SyncAction::Resync, 0, 100, 10, now);
        run.depth = 4;
        while run.next_step(now).is_some() {}
        run.step_failed(10);
        assert!(run.next_step(now).is_none(), "no step after a failure");
        assert!(!run.finished(), "steps are still out");
        for at in [0, 20, 30] {
            run.step_done(at, 0, now, false, UNLIMITED);
        }
        assert!(run.finished());
        assert_eq!(run.done_to(), 10, "later steps done do not carry it past the failed one");
    }

    #[test]
    fn a_held_back_pass_has_one_step_out_at_a_time() {
        let t = Duration::from_secs(1);
        let mut run = SyncRun::new(SyncAction::Check, 0, 1 << 30, 1 << 20, t);
        run.depth = 4;
        while run.next_step(t).is_some() {}
        assert_eq!(run.steps_in_flight(), 4);
        // Clients are waiting and the pass is over its minimum (1 MiB in 1 s), under its
        // maximum: it yields, and drains first.
        let later = t + Duration::from_secs(1);
        run.step_done(0, 0, later, true, LIMITS);
        assert_eq!(run.next_at, later + YIELD);
        for at in [1 << 20, 2 << 20, 3 << 20] {
            assert!(run.next_step(later + YIELD).is_none(), "still {} out", run.steps_in_flight());
            run.step_done(at, 0, later, true, LIMITS);
        }
        assert!(run.next_step(later + YIELD).is_some());
        assert!(run.next_step(later + YIELD).is_none(), "one at a time while held back");
    }

    #[test]
    fn new_limits_measure_the_speed_afresh() {
        let t0 = Duration::from_secs(10);
        let mut run = SyncRun::new(SyncAction::Recover, 0, 1 << 40, 100 << 20, t0);
        // 1 GB/s for a second, unlimited.
        for i in 0..10 {
            let at = run.next_step(t0 + Duration::from_millis(100 * i)).map(|s| s.0).unwrap();
            run.step_done(at, 0, t0 + Duration::from_millis(100 * (i + 1)), false, UNLIMITED);
        }
        let t1 = t0 + Duration::from_secs(1);
        assert!(run.bytes_per_sec(t1) > 900 << 20);
        // Held to 10 MB/s from now: the gigabyte done before does not count against it.
        let slow = SpeedLimits { min_bytes_per_sec: 0, max_bytes_per_sec: 10 << 20 };
        run.limits_changed(slow, t1);
        let at = run.next_step(t1).map(|s| s.0).expect("the next step goes out at once");
        run.step_done(at, 0, t1 + Duration::from_millis(100), false, slow);
        let wait = run.next_at - (t1 + Duration::from_millis(100));
        assert!((wait.as_secs_f64() - 9.9).abs() < 0.01, "100 MiB at 10 MiB/s: {wait:?}");
    }

    #[test]
    fn limits_refuse_a_minimum_above_the_maximum_and_a_zero_maximum_and_a_lower_maximum_takes_the_minimum_down() {
        let d = SpeedLimits::default();
        assert_eq!(d.with(Some(5), None), Ok(SpeedLimits { min_bytes_per_sec: 5, ..d }));
        assert_eq!(d.with(None, Some(7)), Ok(SpeedLimits { min_bytes_per_sec: 7, max_bytes_per_sec: 7 }));
        assert_eq!(d.with(Some(8), Some(7)).unwrap_err(), SpeedLimitError::MinAboveMax { min: 8, max: 7 });
        assert_eq!(
            d.with(Some(300_000_000), None).unwrap_err(),
            SpeedLimitError::MinAboveMax { min: 300_000_000, max: 200_000_000 }
        );
        assert_eq!(d.with(Some(7), Some(7)), Ok(SpeedLimits { min_bytes_per_sec: 7, max_bytes_per_sec: 7 }));
        assert_eq!(d.with(Some(0), Some(0)).unwrap_err(), SpeedLimitError::ZeroMax);
        assert_eq!(d.with(None, None), Ok(d));
    }
}
