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
#[derive(Debug, Clone, Copy)]
pub struct SpeedLimits {
    pub min_bytes_per_sec: u64,
    pub max_bytes_per_sec: u64,
}

impl Default for SpeedLimits {
    fn default() -> Self {
        SpeedLimits { min_bytes_per_sec: 1_000_000, max_bytes_per_sec: 200_000_000 }
    }
}

/// How long to wait after a step when foreground I/O is waiting and the pass is above its
/// minimum: a little, often, so clients see short delays rather than long stalls.
const YIELD: Duration = Duration::from_millis(20);

/// The state of one running pass.
#[derive(Debug, Clone)]
pub struct SyncRun {
    pub action: SyncAction,
    /// Next byte to do, in the pass's own space (logical for resync/check/repair, member bytes
    /// for recovery), and where the pass ends.
    pub pos: u64,
    pub end: u64,
    /// Where the pass started (a resumed pass does not start at 0).
    pub start: u64,
    /// Bytes per step: a whole number of stripes.
    pub step: u64,
    /// When the pass started.
    pub started: Duration,
    pub mismatch_sectors: u64,
    /// A step is with the engine.
    pub in_flight: bool,
    /// Do not start the next step before this.
    pub next_at: Duration,
    /// Set when the operator asks to stop (md's `idle`).
    pub interrupted: bool,
    /// For a rebuild: the slots it rebuilds (those recovering when it started)...
    pub slots: Vec<usize>,
    /// ...and the device each held then. A slot whose device changed meanwhile (it failed and
    /// a spare took its place) was not rebuilt by this pass: nothing of it is recorded.
    pub devices: Vec<String>,
    /// Bytes passed over without work (clean in the write-intent bitmap).
    pub skipped: u64,
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
            in_flight: false,
            next_at: now,
            interrupted: false,
            slots: Vec::new(),
            devices: Vec::new(),
            skipped: 0,
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

    /// The next step to run now, if one is due.
    pub fn next_step(&mut self, now: Duration) -> Option<(u64, u64)> {
        if self.in_flight || self.interrupted || self.pos >= self.end || now < self.next_at {
            return None;
        }
        let len = self.step.min(self.end - self.pos);
        self.in_flight = true;
        Some((self.pos, len))
    }

    /// Record a finished step and decide when the next may start.
    pub fn step_done(
        &mut self,
        len: u64,
        mismatch_sectors: u64,
        now: Duration,
        foreground_busy: bool,
        limits: SpeedLimits,
    ) {
        self.in_flight = false;
        self.pos += len;
        self.mismatch_sectors += mismatch_sectors;
        self.next_at =
            now + throttle_delay(self.done_bytes(), now.saturating_sub(self.started), foreground_busy, limits);
    }

    pub fn finished(&self) -> bool {
        !self.in_flight && (self.pos >= self.end || self.interrupted)
    }

    pub fn done_bytes(&self) -> u64 {
        self.pos - self.start
    }

    /// Average speed of this pass so far.
    pub fn bytes_per_sec(&self, now: Duration) -> u64 {
        let secs = now.saturating_sub(self.started).as_secs_f64();
        if secs <= 0.0 {
            return 0;
        }
        (self.done_bytes() as f64 / secs) as u64
    }

    /// Seconds to the end at the current speed.
    pub fn eta_secs(&self, now: Duration) -> Option<u64> {
        let speed = self.bytes_per_sec(now);
        (speed > 0).then(|| (self.end - self.pos) / speed)
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
            run.step_done(len, 1, now, false, SpeedLimits { min_bytes_per_sec: 0, max_bytes_per_sec: u64::MAX });
        }
        assert_eq!(seen, vec![(0, 4), (4, 4), (8, 2)]);
        assert!(run.finished());
        assert_eq!(run.mismatch_sectors, 3);
        let mut run = SyncRun::new(SyncAction::Repair, 0, 10, 4, now);
        run.next_step(now);
        run.interrupted = true;
        assert!(!run.finished(), "a step is still in flight");
        run.step_done(4, 0, now, false, LIMITS);
        assert!(run.finished());
        assert!(run.next_step(now).is_none());
    }
}
