//! The events `mdadm --monitor` reports, found by comparing two looks at an array (its status
//! before and now), named and ordered as mdadm names and orders them (`Monitor.c`,
//! `check_array`): `NewArray`, `DeviceDisappeared`, `TestMessage`, `DegradedArray`,
//! `RebuildStarted`, `RebuildNN`, `RebuildFinished` (with the mismatch count when there is
//! one), `Fail`, `FailSpare`, `SpareActive`; and two of uraid's own, for members the array
//! lost for being unreachable and tries to take back: `ReAdded` (one came back and was
//! re-added) and `ReAddRefused` (one answered and was left out, with the reason).
//!
//! Pure: a look is a [`Snapshot`] taken from `uraid ctl status --json`'s answer.
//!
//! Where uraid differs: mdadm sees a pass only while /proc/mdstat shows it running, so a pass
//! that begins and ends between two polls goes unreported; the status here counts passes
//! ended, so such a pass is still reported as `RebuildFinished`. Members are followed by
//! device, not by md's disk index, since uraid's slots name their devices.

use serde_json::{json, Value};

/// A member's state as the status reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    InSync,
    Recovering,
    Faulty,
    Missing,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub device: Option<String>,
    pub state: MemberState,
}

/// The running pass: its action (md's `sync_action`) and whole percent done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    pub action: String,
    pub percent: u64,
}

/// A member lost for being unreachable that the array tries to take back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Returning {
    pub device: String,
    /// It answered and was left out: why.
    pub refused: Option<String>,
}

/// One look at an array: what the events are told from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub level: String,
    /// Some slot is not in sync (mdstat's `[UU_U]`).
    pub degraded: bool,
    pub members: Vec<Member>,
    pub pass: Option<Pass>,
    /// Passes ended since the array started.
    pub passes_ended: u64,
    /// md's `mismatch_cnt`: sectors the last check or repair found inconsistent.
    pub mismatch_cnt: u64,
    /// Bytes the last pass went through (a rebuild: bytes rebuilt).
    pub last_sync_bytes: Option<u64>,
    pub returning: Vec<Returning>,
}

impl Snapshot {
    /// The look a status (as `control::status_json` gives it) is.
    pub fn from_status(v: &Value) -> Snapshot {
        let members = v["members"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .map(|m| Member {
                        device: m["path"].as_str().map(str::to_string),
                        state: match m["state"].as_str().unwrap_or("") {
                            "in_sync" => MemberState::InSync,
                            "recovering" => MemberState::Recovering,
                            "faulty" => MemberState::Faulty,
                            _ => MemberState::Missing,
                        },
                    })
                    .collect()
            })
            .unwrap_or_default();
        let pass = crate::mdstat::sync_progress(v).map(|(action, done, total)| Pass {
            action,
            // md's /proc/mdstat percent, whole as mdadm reads it.
            percent: (done.min(total) * 100).checked_div(total).unwrap_or(100),
        });
        Snapshot {
            level: v["level"].as_str().unwrap_or("").to_string(),
            degraded: v["degraded"].as_u64().unwrap_or(0) > 0,
            members,
            pass,
            passes_ended: v["passes_ended"].as_u64().unwrap_or(0),
            mismatch_cnt: v["mismatch_cnt"].as_u64().unwrap_or(0),
            last_sync_bytes: v["last_sync_bytes"].as_u64(),
            returning: v["returning"]
                .as_array()
                .map(|rs| {
                    rs.iter()
                        .filter_map(|r| {
                            let device = r["path"].as_str()?.to_string();
                            let refused = (r["refused"] == Value::Bool(true))
                                .then(|| r["last_failure"].as_str().unwrap_or_default().to_string());
                            Some(Returning { device, refused })
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    fn has(&self, device: &str, state: MemberState) -> bool {
        self.members.iter().any(|m| m.device.as_deref() == Some(device) && m.state == state)
    }

    fn holds(&self, device: &str) -> bool {
        self.members.iter().any(|m| m.device.as_deref() == Some(device))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// An array appeared after monitoring began.
    NewArray,
    /// An array that was running is no longer.
    DeviceDisappeared,
    /// `--test`: one for every array found at the start.
    TestMessage,
    /// An array first seen degraded.
    DegradedArray,
    RebuildStarted,
    /// A running pass crossed a multiple of the increment; named with its percent.
    Rebuild(u64),
    RebuildFinished,
    /// An active member failed.
    Fail,
    /// A member being rebuilt failed.
    FailSpare,
    /// A member finished rebuilding and is active.
    SpareActive,
    /// A member lost for being unreachable came back and was re-added (uraid's own).
    ReAdded,
    /// A member lost for being unreachable answered and was left out (uraid's own).
    ReAddRefused,
}

impl EventKind {
    /// mdadm's name of the event (`Rebuild%02d` for progress).
    pub fn name(self) -> String {
        match self {
            EventKind::NewArray => "NewArray".into(),
            EventKind::DeviceDisappeared => "DeviceDisappeared".into(),
            EventKind::TestMessage => "TestMessage".into(),
            EventKind::DegradedArray => "DegradedArray".into(),
            EventKind::RebuildStarted => "RebuildStarted".into(),
            EventKind::Rebuild(percent) => format!("Rebuild{percent:02}"),
            EventKind::RebuildFinished => "RebuildFinished".into(),
            EventKind::Fail => "Fail".into(),
            EventKind::FailSpare => "FailSpare".into(),
            EventKind::SpareActive => "SpareActive".into(),
            EventKind::ReAdded => "ReAdded".into(),
            EventKind::ReAddRefused => "ReAddRefused".into(),
        }
    }
}

/// What a check or repair that ended found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatches {
    pub sectors: u64,
    pub level: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub array: String,
    pub device: Option<String>,
    /// For `RebuildFinished`: mismatches found, if any.
    pub mismatches: Option<Mismatches>,
    /// For `RebuildFinished`: the bytes the pass went through (rebuilt, for a rebuild).
    pub bytes: Option<u64>,
    /// For `ReAddRefused`: why.
    pub reason: Option<String>,
}

impl Event {
    fn new(kind: EventKind, array: &str) -> Event {
        Event { kind, array: array.to_string(), device: None, mismatches: None, bytes: None, reason: None }
    }

    fn on(kind: EventKind, array: &str, device: &str) -> Event {
        Event { device: Some(device.to_string()), ..Event::new(kind, array) }
    }

    /// mdadm's third word for the event's program: the device, or for a pass that found
    /// mismatches `mismatches found: N (on raid level L)`.
    pub fn detail(&self) -> Option<String> {
        if let Some(m) = &self.mismatches {
            let level = m.level.strip_prefix("raid").unwrap_or(&m.level);
            return Some(format!("mismatches found: {} (on raid level {level})", m.sectors));
        }
        self.device.clone()
    }

    /// `Event: Fail, array data, device /srv/d1.img`.
    pub fn line(&self) -> String {
        let mut line = format!("Event: {}, array {}", self.kind.name(), self.array);
        match (&self.mismatches, &self.device) {
            (Some(_), _) => line.push_str(&format!(", {}", self.detail().expect("mismatches"))),
            (None, Some(device)) => line.push_str(&format!(", device {device}")),
            (None, None) => {}
        }
        if let Some(reason) = &self.reason {
            line.push_str(&format!(": {reason}"));
        }
        line
    }

    pub fn json(&self) -> Value {
        json!({
            "event": self.kind.name(),
            "array": self.array,
            "device": self.device,
            "mismatch_cnt": self.mismatches.as_ref().map(|m| m.sectors),
            "bytes": self.bytes,
            "reason": self.reason,
        })
    }
}

/// How the looks being compared were taken.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// The first look since monitoring began: arrays found then are not new.
    pub first: bool,
    /// `--test`: a `TestMessage` for every array found at the first look.
    pub test: bool,
    /// Progress is reported each time a pass crosses a multiple of this percent (mdadm's
    /// `--increment`, 20 by default).
    pub increment: u64,
}

/// The events between two looks at array `array`: `before` and `after` are `None` where the
/// array was not running.
pub fn events(array: &str, before: Option<&Snapshot>, after: Option<&Snapshot>, look: Look) -> Vec<Event> {
    match (before, after) {
        (None, None) => Vec::new(),
        (Some(_), None) => vec![Event::new(EventKind::DeviceDisappeared, array)],
        (None, Some(now)) => {
            let mut out = Vec::new();
            if !look.first {
                out.push(Event::new(EventKind::NewArray, array));
            }
            if look.first && look.test {
                out.push(Event::new(EventKind::TestMessage, array));
            }
            if now.degraded {
                out.push(Event::new(EventKind::DegradedArray, array));
            }
            out
        }
        (Some(was), Some(now)) => {
            let mut out = pass_events(array, was, now, look.increment.max(1));
            out.extend(member_events(array, was, now));
            out.extend(return_events(array, was, now));
            out
        }
    }
}

fn pass_events(array: &str, was: &Snapshot, now: &Snapshot, increment: u64) -> Vec<Event> {
    let finished = || Event {
        mismatches: (now.mismatch_cnt > 0).then(|| Mismatches { sectors: now.mismatch_cnt, level: now.level.clone() }),
        bytes: now.last_sync_bytes,
        ..Event::new(EventKind::RebuildFinished, array)
    };
    let started = || Event::new(EventKind::RebuildStarted, array);
    // Fewer passes than before: a new process runs the array, and counts afresh.
    let ended_between = now.passes_ended > was.passes_ended;
    match (&was.pass, &now.pass) {
        (None, None) if ended_between => vec![finished()],
        (None, None) => Vec::new(),
        (None, Some(_)) if ended_between => vec![finished(), started()],
        (None, Some(_)) => vec![started()],
        (Some(_), None) => vec![finished()],
        (Some(p), Some(q)) if ended_between || p.action != q.action => vec![finished(), started()],
        (Some(p), Some(q)) if q.percent / increment > p.percent / increment => {
            vec![Event::new(EventKind::Rebuild(q.percent), array)]
        }
        (Some(_), Some(_)) => Vec::new(),
    }
}

fn member_events(array: &str, was: &Snapshot, now: &Snapshot) -> Vec<Event> {
    let mut out = Vec::new();
    for m in &was.members {
        let Some(device) = m.device.as_deref() else { continue };
        match m.state {
            MemberState::InSync if !now.has(device, MemberState::InSync) => {
                out.push(Event::on(EventKind::Fail, array, device))
            }
            MemberState::Recovering if now.has(device, MemberState::Faulty) || !now.holds(device) => {
                out.push(Event::on(EventKind::FailSpare, array, device))
            }
            _ => {}
        }
    }
    for m in &now.members {
        let Some(device) = m.device.as_deref() else { continue };
        if m.state == MemberState::InSync && !was.has(device, MemberState::InSync) {
            out.push(Event::on(EventKind::SpareActive, array, device));
        }
    }
    out
}

/// Members the array tries to take back: one refused for a new reason, one back in a slot.
fn return_events(array: &str, was: &Snapshot, now: &Snapshot) -> Vec<Event> {
    let mut out = Vec::new();
    for r in &now.returning {
        let Some(why) = &r.refused else { continue };
        let before = was.returning.iter().find(|w| w.device == r.device).and_then(|w| w.refused.as_ref());
        if before != Some(why) {
            out.push(Event { reason: Some(why.clone()), ..Event::on(EventKind::ReAddRefused, array, &r.device) });
        }
    }
    for r in &was.returning {
        let gone = !now.returning.iter().any(|n| n.device == r.device);
        let back = now.has(&r.device, MemberState::Recovering) || now.has(&r.device, MemberState::InSync);
        if gone && back {
            out.push(Event::on(EventKind::ReAdded, array, &r.device));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEADY: Look = Look { first: false, test: false, increment: 20 };

    fn member(device: &str, state: MemberState) -> Member {
        Member { device: Some(device.to_string()), state }
    }

    fn whole() -> Snapshot {
        Snapshot {
            level: "raid5".into(),
            degraded: false,
            members: (0..4).map(|i| member(&format!("/d{i}"), MemberState::InSync)).collect(),
            pass: None,
            passes_ended: 0,
            mismatch_cnt: 0,
            last_sync_bytes: None,
            returning: Vec::new(),
        }
    }

    fn running(mut s: Snapshot, action: &str, percent: u64) -> Snapshot {
        s.pass = Some(Pass { action: action.into(), percent });
        s
    }

    fn names(events: &[Event]) -> Vec<String> {
        events.iter().map(|e| e.kind.name()).collect()
    }

    #[test]
    fn nothing_changed_nothing_reported() {
        assert!(events("a", Some(&whole()), Some(&whole()), STEADY).is_empty());
        let r = running(whole(), "check", 30);
        assert!(events("a", Some(&r), Some(&running(whole(), "check", 39)), STEADY).is_empty());
        assert!(events("a", None, None, STEADY).is_empty());
    }

    #[test]
    fn arrays_found_at_the_start_are_not_new_but_later_ones_are() {
        let first = Look { first: true, ..STEADY };
        assert!(events("a", None, Some(&whole()), first).is_empty());
        assert_eq!(names(&events("a", None, Some(&whole()), STEADY)), ["NewArray"]);
        let mut degraded = whole();
        degraded.degraded = true;
        degraded.members[1].state = MemberState::Missing;
        assert_eq!(names(&events("a", None, Some(&degraded), first)), ["DegradedArray"]);
        assert_eq!(names(&events("a", None, Some(&degraded), STEADY)), ["NewArray", "DegradedArray"]);
        let test = Look { first: true, test: true, ..STEADY };
        assert_eq!(names(&events("a", None, Some(&degraded), test)), ["TestMessage", "DegradedArray"]);
        assert_eq!(names(&events("a", Some(&whole()), None, STEADY)), ["DeviceDisappeared"]);
    }

    #[test]
    fn a_failed_member_is_fail_with_its_device() {
        let mut failed = whole();
        failed.members[1].state = MemberState::Faulty;
        failed.degraded = true;
        let e = events("data", Some(&whole()), Some(&failed), STEADY);
        assert_eq!(e, vec![Event::on(EventKind::Fail, "data", "/d1")]);
        assert_eq!(e[0].line(), "Event: Fail, array data, device /d1");
        assert_eq!(e[0].detail().as_deref(), Some("/d1"));
        // Failed and removed between two looks is still a failure.
        let mut removed = failed.clone();
        removed.members[1] = Member { device: None, state: MemberState::Missing };
        assert_eq!(names(&events("data", Some(&whole()), Some(&removed), STEADY)), ["Fail"]);
        // Removing a member already failed is not.
        assert!(events("data", Some(&failed), Some(&removed), STEADY).is_empty());
    }

    /// A hot spare takes a failed member's slot and is rebuilt: Fail and RebuildStarted, then
    /// progress at each 20 %, then RebuildFinished and SpareActive.
    #[test]
    fn a_spare_taking_over_is_followed_to_the_end() {
        let mut taking = running(whole(), "recover", 3);
        taking.members[3] = member("/spare", MemberState::Recovering);
        taking.degraded = true;
        assert_eq!(names(&events("a", Some(&whole()), Some(&taking), STEADY)), ["RebuildStarted", "Fail"]);
        let at = |p| running(taking.clone(), "recover", p);
        assert_eq!(names(&events("a", Some(&at(3)), Some(&at(19)), STEADY)), Vec::<String>::new());
        assert_eq!(names(&events("a", Some(&at(19)), Some(&at(21)), STEADY)), ["Rebuild21"]);
        assert_eq!(names(&events("a", Some(&at(21)), Some(&at(40)), STEADY)), ["Rebuild40"]);
        // Two increments crossed between looks: one event, as mdadm gives.
        assert_eq!(names(&events("a", Some(&at(41)), Some(&at(85)), STEADY)), ["Rebuild85"]);
        let ten = Look { increment: 10, ..STEADY };
        assert_eq!(names(&events("a", Some(&at(3)), Some(&at(10)), ten)), ["Rebuild10"]);
        let mut done = whole();
        done.members[3] = member("/spare", MemberState::InSync);
        done.passes_ended = 1;
        let e = events("a", Some(&at(97)), Some(&done), STEADY);
        assert_eq!(names(&e), ["RebuildFinished", "SpareActive"]);
        assert_eq!(e[1].device.as_deref(), Some("/spare"));
        assert_eq!(e[0].line(), "Event: RebuildFinished, array a");
    }

    #[test]
    fn a_member_failing_while_rebuilt_is_failspare() {
        let mut rebuilding = running(whole(), "recover", 50);
        rebuilding.members[2] = member("/new", MemberState::Recovering);
        let mut failed = rebuilding.clone();
        failed.members[2].state = MemberState::Faulty;
        failed.pass = None;
        failed.passes_ended = 1;
        assert_eq!(names(&events("a", Some(&rebuilding), Some(&failed), STEADY)), ["RebuildFinished", "FailSpare"]);
    }

    /// A check that found mismatches ends with them in RebuildFinished, as mdadm words it;
    /// one that began and ended between two looks is still reported.
    #[test]
    fn a_check_ends_with_its_mismatch_count() {
        let mut checked = whole();
        checked.passes_ended = 1;
        checked.mismatch_cnt = 8;
        let e = events("a", Some(&running(whole(), "check", 60)), Some(&checked), STEADY);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].kind, EventKind::RebuildFinished);
        assert_eq!(e[0].detail().as_deref(), Some("mismatches found: 8 (on raid level 5)"));
        assert_eq!(e[0].line(), "Event: RebuildFinished, array a, mismatches found: 8 (on raid level 5)");
        assert_eq!(e[0].json()["mismatch_cnt"], 8);
        assert_eq!(events("a", Some(&whole()), Some(&checked), STEADY), e, "a pass between looks was missed");
        // One pass ending and the next starting between looks: both said.
        let mut next = running(checked.clone(), "repair", 5);
        next.passes_ended = 1;
        assert_eq!(
            names(&events("a", Some(&running(whole(), "check", 60)), Some(&next), STEADY)),
            ["RebuildFinished", "RebuildStarted"]
        );
        // A new process counts from zero: nothing ended.
        let restarted = whole();
        assert!(events("a", Some(&checked), Some(&restarted), STEADY).is_empty());
    }

    /// A member lost for being unreachable: refused once per reason, then back and rebuilt,
    /// the rebuild's bytes in its end.
    #[test]
    fn a_returning_member_is_refused_then_readded() {
        let mut lost = whole();
        lost.members[1].state = MemberState::Faulty;
        lost.degraded = true;
        lost.returning = vec![Returning { device: "/d1".into(), refused: None }];
        let mut refused = lost.clone();
        refused.returning[0].refused = Some("/d1: carries an md superblock of another array".into());
        let e = events("a", Some(&lost), Some(&refused), STEADY);
        assert_eq!(names(&e), ["ReAddRefused"]);
        assert_eq!(
            e[0].line(),
            "Event: ReAddRefused, array a, device /d1: /d1: carries an md superblock of another array"
        );
        assert!(events("a", Some(&refused), Some(&refused), STEADY).is_empty(), "said once per reason");
        let mut back = running(whole(), "recover", 10);
        back.members[1].state = MemberState::Recovering;
        back.degraded = true;
        assert_eq!(names(&events("a", Some(&refused), Some(&back), STEADY)), ["RebuildStarted", "ReAdded"]);
        let mut done = whole();
        done.passes_ended = 1;
        done.last_sync_bytes = Some(5 << 20);
        let e = events("a", Some(&back), Some(&done), STEADY);
        assert_eq!(names(&e), ["RebuildFinished", "SpareActive"]);
        assert_eq!(e[0].json()["bytes"], 5 << 20);
        assert_eq!(e[0].line(), "Event: RebuildFinished, array a", "mdadm's line");
    }

    /// A grow while served: the reshape is a pass like the others (md's `sync_action`
    /// `reshape`), and the member it adds is active from its start, as md makes it.
    #[test]
    fn a_grow_is_reported_as_a_pass_and_its_new_member_as_active() {
        let mut grown = whole();
        grown.members.push(member("/d4", MemberState::InSync));
        let reshaping = running(grown.clone(), "reshape", 0);
        let e = events("a", Some(&whole()), Some(&reshaping), STEADY);
        assert_eq!(names(&e), ["RebuildStarted", "SpareActive"]);
        assert_eq!(e[1].detail().as_deref(), Some("/d4"));
        assert_eq!(
            names(&events("a", Some(&reshaping), Some(&running(grown.clone(), "reshape", 41)), STEADY)),
            ["Rebuild41"]
        );
        assert_eq!(
            names(&events("a", Some(&running(grown.clone(), "reshape", 99)), Some(&grown), STEADY)),
            ["RebuildFinished"]
        );
    }

    #[test]
    fn a_status_reads_as_a_snapshot() {
        let v = json!({
            "level": "raid1", "degraded": 1, "passes_ended": 2, "mismatch_cnt": 0,
            "sync_action": "recover", "sync_done_bytes": 3 << 20, "sync_total_bytes": 8 << 20,
            "members": [
                {"slot": 0, "path": "/a", "state": "in_sync"},
                {"slot": 1, "path": "/b", "state": "recovering"},
            ],
        });
        let s = Snapshot::from_status(&v);
        assert_eq!(s.pass, Some(Pass { action: "recover".into(), percent: 37 }));
        assert!(s.degraded);
        assert_eq!(s.passes_ended, 2);
        assert_eq!(s.members[1], member("/b", MemberState::Recovering));
        let lost = json!({"level": "raid1", "members": [], "last_sync_bytes": 4096, "returning": [
            {"path": "nbd://h/e", "slot": 1, "refused": true, "last_failure": "another array"},
            {"path": "nbd://h/f", "slot": 2, "refused": false, "last_failure": "connection refused"},
        ]});
        let s = Snapshot::from_status(&lost);
        assert_eq!(s.last_sync_bytes, Some(4096));
        assert_eq!(
            s.returning,
            [
                Returning { device: "nbd://h/e".into(), refused: Some("another array".into()) },
                Returning { device: "nbd://h/f".into(), refused: None },
            ]
        );
        let idle = Snapshot::from_status(&json!({"level": "raid1", "sync_action": "idle", "members": []}));
        assert_eq!(idle.pass, None);
        assert_eq!(EventKind::Rebuild(5).name(), "Rebuild05");
    }
}
