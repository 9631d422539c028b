//! When a running array tries again to reach the members it lost for being unreachable (an NBD
//! member whose host went away or stopped answering): one schedule per lost member, with a
//! bounded backoff, in the time the caller passes.
//!
//! Pure, as the rest of the policy: it opens nothing and reads no clock. The service asks which
//! attempts are due ([`MemberReturns::due`]), performs them off its engine thread (connecting
//! and reading the superblock), and reports each outcome ([`MemberReturns::attempt_failed`], or
//! [`MemberReturns::forget`] once the member is back or may no longer come back). Each failed
//! attempt doubles the wait before the next, from [`ReturnBackoff::first`] up to
//! [`ReturnBackoff::max`]; a member is tried for as long as the array runs and its slot stays
//! free.

use std::time::Duration;

/// How often lost members are tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReturnBackoff {
    /// Whether lost members are tried again at all.
    pub enabled: bool,
    /// The wait before the first attempt; it doubles after each failed one.
    pub first: Duration,
    /// The longest wait between attempts.
    pub max: Duration,
}

impl Default for ReturnBackoff {
    fn default() -> Self {
        ReturnBackoff { enabled: true, first: Duration::from_secs(1), max: Duration::from_secs(30) }
    }
}

/// A change to the backoff: the fields given change, the others stay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReturnBackoffChange {
    pub enabled: Option<bool>,
    pub first: Option<Duration>,
    pub max: Option<Duration>,
}

/// Why a backoff change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReturnBackoffError {
    #[error("--readd-first and --readd-max (the waits before trying a lost member again) must be longer than 0")]
    ZeroWait,
    #[error("the longest wait ({max:?}) is shorter than the first ({first:?})")]
    MaxBelowFirst { first: Duration, max: Duration },
    /// Members are not tried again while a reshape runs (it stops at a member failure).
    #[error("the array is being reshaped: wait for the reshape to end (uraid ctl NAME wait)")]
    Reshaping,
}

impl ReturnBackoffChange {
    /// `backoff` with this change made. A longest wait given alone below the first wait in force
    /// takes the first wait down with it; a first wait given alone above the longest takes the
    /// longest up.
    pub fn apply(&self, backoff: ReturnBackoff) -> Result<ReturnBackoff, ReturnBackoffError> {
        let mut first = self.first.unwrap_or(backoff.first);
        let mut max = self.max.unwrap_or(backoff.max);
        if first.is_zero() || self.max.is_some_and(|m| m.is_zero()) {
            return Err(ReturnBackoffError::ZeroWait);
        }
        match (self.first, self.max) {
            (Some(f), Some(m)) if m < f => return Err(ReturnBackoffError::MaxBelowFirst { first: f, max: m }),
            (None, Some(m)) if m < first => first = m,
            (Some(f), None) if f > max => max = f,
            _ => {}
        }
        Ok(ReturnBackoff { enabled: self.enabled.unwrap_or(backoff.enabled), first, max })
    }
}

/// How an attempt to reach a lost member went, when it did not bring the member back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptFailure {
    /// It could not be reached, or did not answer.
    Unreachable(String),
    /// It answered, and was not taken back: why (another array's device at that address, a
    /// bitmap that cannot vouch for what it missed, ...). Nothing was written to it.
    Refused(String),
}

impl AttemptFailure {
    pub fn text(&self) -> &str {
        match self {
            AttemptFailure::Unreachable(why) | AttemptFailure::Refused(why) => why,
        }
    }
}

/// A lost member and where its schedule stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostMember {
    /// The device, as the array names it (an NBD URI).
    pub device: String,
    /// The slot it held, which it may take back while that stays free.
    pub slot: usize,
    /// Attempts made so far.
    pub attempts: u64,
    /// When the next attempt is due (the caller's time).
    pub next_attempt: Duration,
    /// An attempt is out.
    pub in_flight: bool,
    /// How the last attempt went, if one was made.
    pub last_failure: Option<AttemptFailure>,
}

/// The lost members and when each is tried again.
#[derive(Debug, Clone, Default)]
pub struct MemberReturns {
    backoff: ReturnBackoff,
    lost: Vec<LostMember>,
}

impl MemberReturns {
    pub fn new(backoff: ReturnBackoff) -> MemberReturns {
        MemberReturns { backoff, lost: Vec::new() }
    }

    pub fn backoff(&self) -> ReturnBackoff {
        self.backoff
    }

    /// New limits; the waits already scheduled keep their time, and later ones follow these.
    pub fn set_backoff(&mut self, backoff: ReturnBackoff) {
        self.backoff = backoff;
    }

    /// The wait after the `attempts`-th attempt failed: the first wait doubled that many times,
    /// up to the longest.
    fn wait_after(&self, attempts: u64) -> Duration {
        let doubled = self.backoff.first.checked_mul(1 << attempts.min(30)).unwrap_or(self.backoff.max);
        doubled.min(self.backoff.max)
    }

    /// `device`, which held `slot`, was lost at `now` for being unreachable: its first attempt
    /// is due after the first wait. Lost again while an attempt is out, it keeps that attempt.
    pub fn lost(&mut self, device: &str, slot: usize, now: Duration) {
        let in_flight = self.find(device).is_some_and(|m| m.in_flight);
        self.forget(device);
        self.lost.push(LostMember {
            device: device.to_string(),
            slot,
            attempts: 0,
            next_attempt: now + self.backoff.first,
            in_flight,
            last_failure: None,
        });
    }

    /// Stop trying `device` (it is back, or can no longer come back). Whether it was tried.
    pub fn forget(&mut self, device: &str) -> bool {
        let before = self.lost.len();
        self.lost.retain(|m| m.device != device);
        self.lost.len() != before
    }

    pub fn find(&self, device: &str) -> Option<&LostMember> {
        self.lost.iter().find(|m| m.device == device)
    }

    /// The members being tried, in the order they were lost.
    pub fn members(&self) -> &[LostMember] {
        &self.lost
    }

    /// The attempts due at `now`, each as (device, slot), marked as out: the caller makes each
    /// and reports how it went. None while tries are turned off.
    pub fn due(&mut self, now: Duration) -> Vec<(String, usize)> {
        if !self.backoff.enabled {
            return Vec::new();
        }
        let mut out = Vec::new();
        for m in &mut self.lost {
            if !m.in_flight && m.next_attempt <= now {
                m.in_flight = true;
                m.attempts += 1;
                out.push((m.device.clone(), m.slot));
            }
        }
        out
    }

    /// When the next attempt is due, if any is waiting (and tries are on).
    pub fn next_deadline(&self) -> Option<Duration> {
        if !self.backoff.enabled {
            return None;
        }
        self.lost.iter().filter(|m| !m.in_flight).map(|m| m.next_attempt).min()
    }

    /// The attempt out for `device` did not bring it back: the next is due after the current
    /// wait, which then doubles up to the longest. Whether this outcome is news (the first, or
    /// different from the last), which callers report and otherwise keep quiet about.
    pub fn attempt_failed(&mut self, device: &str, now: Duration, how: AttemptFailure) -> bool {
        let Some(attempts) = self.find(device).map(|m| m.attempts) else { return false };
        let wait = self.wait_after(attempts);
        let m = self.lost.iter_mut().find(|m| m.device == device).expect("found above");
        m.in_flight = false;
        m.next_attempt = now + wait;
        let news = m.last_failure.as_ref() != Some(&how);
        m.last_failure = Some(how);
        news
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn waits_double_from_the_first_up_to_the_longest() {
        let mut r = MemberReturns::new(ReturnBackoff { enabled: true, first: S(1), max: S(4) });
        r.lost("nbd://h/e", 1, S(10));
        assert!(r.due(S(10)).is_empty(), "the first attempt waits the first wait");
        assert_eq!(r.next_deadline(), Some(S(11)));
        let mut times = Vec::new();
        let mut now = S(11);
        for _ in 0..5 {
            assert_eq!(r.due(now), vec![("nbd://h/e".to_string(), 1)]);
            assert_eq!(r.next_deadline(), None, "no second attempt while one is out");
            r.attempt_failed("nbd://h/e", now, AttemptFailure::Unreachable("refused".into()));
            now = r.next_deadline().unwrap();
            times.push(now);
        }
        assert_eq!(times, [S(13), S(17), S(21), S(25), S(29)]);
        assert_eq!(r.find("nbd://h/e").unwrap().attempts, 5);
    }

    #[test]
    fn only_changed_outcomes_are_news() {
        let mut r = MemberReturns::new(ReturnBackoff::default());
        r.lost("m", 0, S(0));
        let fail = |r: &mut MemberReturns, how| {
            let now = r.next_deadline().unwrap();
            r.due(now);
            r.attempt_failed("m", now, how)
        };
        assert!(fail(&mut r, AttemptFailure::Unreachable("no route".into())));
        assert!(!fail(&mut r, AttemptFailure::Unreachable("no route".into())));
        assert!(fail(&mut r, AttemptFailure::Refused("another array".into())));
        assert!(!fail(&mut r, AttemptFailure::Refused("another array".into())));
    }

    #[test]
    fn forgotten_or_turned_off_members_are_not_tried() {
        let mut r = MemberReturns::new(ReturnBackoff::default());
        r.lost("a", 0, S(0));
        r.lost("b", 2, S(0));
        assert!(r.forget("a"));
        assert!(!r.forget("a"));
        r.set_backoff(ReturnBackoff { enabled: false, ..ReturnBackoff::default() });
        assert!(r.due(S(100)).is_empty() && r.next_deadline().is_none());
        r.set_backoff(ReturnBackoff::default());
        assert_eq!(r.due(S(100)), vec![("b".to_string(), 2)]);
        // Lost again while its attempt is out: that attempt stays the one out.
        r.lost("b", 2, S(100));
        assert!(r.due(S(200)).is_empty());
    }

    #[test]
    fn changes_keep_first_at_most_max() {
        let b = ReturnBackoff::default();
        let c = |first: Option<u64>, max: Option<u64>| ReturnBackoffChange {
            enabled: None,
            first: first.map(S),
            max: max.map(S),
        };
        assert_eq!(c(None, Some(0)).apply(b), Err(ReturnBackoffError::ZeroWait));
        assert_eq!(c(Some(5), Some(2)).apply(b), Err(ReturnBackoffError::MaxBelowFirst { first: S(5), max: S(2) }));
        let capped = c(None, Some(1)).apply(ReturnBackoff { first: S(2), ..b }).unwrap();
        assert_eq!((capped.first, capped.max), (S(1), S(1)));
        let raised = c(Some(60), None).apply(b).unwrap();
        assert_eq!((raised.first, raised.max), (S(60), S(60)));
    }
}
