//! The policy in fake time over in-memory members, with this file as its driver: it performs the
//! metadata I/O and the engine requests the policy hands out, when it likes, and checks what the
//! policy records before and after them. Each planted mutation is shown to break the check made
//! for it.

use std::sync::Arc;
use std::time::Duration;

use uraid_engine::array::{Completion, IoResult, MemberIoError, MemberOp, Request, RequestId, SlotState};
use uraid_engine::metadata::{MetaError, MetaOp};
use uraid_engine::EngineError;

use super::*;
use crate::member::{MemberDevice, MemoryDevice};
use crate::probe::probe;

const MEMBER_BYTES: u64 = 16 << 20;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Members in memory with fresh md 1.2 superblocks (all zero, so consistent at any level),
/// recorded clean or not, with a write-intent bitmap of 64 KiB chunks or none.
fn members(level: i32, n: usize, clean: bool, bitmap: bool) -> Vec<Arc<MemoryDevice>> {
    let array = uraid_testkit::NewMdArray {
        chunk_sectors: if level == 1 { 0 } else { 16 },
        clean,
        bitmap_chunk: bitmap.then_some(64 << 10),
        ..uraid_testkit::NewMdArray::new(level, n, MEMBER_BYTES)
    };
    array
        .images()
        .into_iter()
        .enumerate()
        .map(|(i, img)| Arc::new(MemoryDevice::from_bytes(&format!("mem{i}"), img)))
        .collect()
}

fn assemble(devs: &[Arc<MemoryDevice>]) -> OpenArray {
    let boxed = devs.iter().map(|d| Box::new(Arc::clone(d)) as Box<dyn MemberDevice>).collect();
    OpenArray::assemble(boxed, true).expect("assemble")
}

fn clean_on_disk(dev: &MemoryDevice) -> bool {
    probe(dev).unwrap().expect("superblock").superblock.info().state_clean
}

/// Whether bitmap chunk `c` is set in the bitmap on `dev`.
fn bit_on_disk(dev: &MemoryDevice, c: u64) -> bool {
    let probed = probe(dev).unwrap().expect("superblock");
    let info = probed.superblock.info();
    let at = (probed.offset as i64 + i64::from(info.bitmap_offset.expect("bitmap")) * 512) as u64;
    let mut bits = vec![0u8; 4096];
    dev.read_at(at + uraid_md_format::bitmap::HEADER_BYTES as u64, &mut bits).unwrap();
    uraid_md_format::bitmap::is_dirty(&bits, c)
}

/// The policy over one array, driven by hand in fake time.
struct Driver {
    array: OpenArray,
    policy: ArrayPolicy,
    now: Duration,
    events: Vec<PolicyEvent>,
    /// Kinds of the metadata jobs performed, in order.
    performed: Vec<MetadataIoKind>,
    /// Reads of this slot fail (a member with unreadable sectors).
    unreadable: Option<usize>,
}

impl Driver {
    /// `array` with its metadata deferred (as the service runs it) under a fresh policy.
    fn new(mut array: OpenArray, config: PolicyConfig) -> Driver {
        array.defer_metadata(true);
        let policy = ArrayPolicy::new(&mut array, config, Duration::ZERO);
        let mut d =
            Driver { array, policy, now: Duration::ZERO, events: Vec::new(), performed: Vec::new(), unreadable: None };
        d.take_events();
        d
    }

    fn take_events(&mut self) {
        while let Some(e) = self.policy.take_event() {
            self.events.push(e);
        }
    }

    fn released(&self, id: u64) -> bool {
        self.events.contains(&PolicyEvent::WriteReleased(WriteId(id)))
    }

    /// Hand out the next metadata job, if any, without performing it.
    fn hand_out_metadata(&mut self) -> Option<MetadataIo> {
        self.policy.next_metadata_io(&mut self.array)
    }

    /// Perform `job` on the members and report it done.
    fn complete_metadata(&mut self, job: MetadataIo) {
        for (dev, op) in &job.ops {
            match op {
                MetaOp::Write { offset, data, .. } => dev.write_at(*offset, data).unwrap(),
                MetaOp::Flush { .. } => dev.flush().unwrap(),
            }
        }
        self.performed.push(job.kind);
        self.policy.metadata_io_done(&mut self.array, self.now, Ok(()));
        self.take_events();
    }

    /// Perform the next metadata job; its kind, or `None` if there was none.
    fn metadata_step(&mut self) -> Option<MetadataIoKind> {
        let job = self.hand_out_metadata()?;
        let kind = job.kind;
        self.complete_metadata(job);
        Some(kind)
    }

    /// Perform metadata jobs until none is left.
    fn settle_metadata(&mut self) {
        while self.metadata_step().is_some() {}
    }

    /// Run an engine request to its completion, performing its member I/O on the members.
    fn run_engine(&mut self, rid: RequestId) -> Result<Completion, EngineError> {
        let targets = self.array.member_targets();
        loop {
            while let Some((done, result)) = self.array.engine_mut().next_completion() {
                if done == rid {
                    return result;
                }
            }
            let io = self.array.engine_mut().next_io().expect("engine stalled");
            let target = targets[io.slot].as_ref().expect("member in slot");
            let result = if self.unreadable == Some(io.slot) && matches!(io.op, MemberOp::Read { .. }) {
                let error = std::io::Error::from_raw_os_error(5);
                IoResult::Failed(MemberIoError::os(format!("slot {}: read at byte {}", io.slot, io.offset), &error))
            } else {
                target.perform(&io).unwrap_or_else(IoResult::Failed)
            };
            self.array.engine_mut().complete_io(io.id, result.handing_back(io.op));
        }
    }

    /// Submit the pass's next step if one is due; the request, with its engine id.
    fn submit_pass_step(&mut self) -> Option<(Request, RequestId)> {
        let request = self.policy.next_pass_step(&mut self.array, self.now)?;
        let submitted = self.array.engine_mut().submit(request.clone());
        let rid = *submitted.as_ref().expect("engine took the step");
        self.policy.pass_step_submitted(&mut self.array, self.now, submitted);
        self.take_events();
        Some((request, rid))
    }

    /// Complete the step submitted as `rid`.
    fn complete_pass_step(&mut self, rid: RequestId) {
        let result = self.run_engine(rid);
        self.policy.pass_step_done(&mut self.array, self.now, rid, result, false);
        self.take_events();
    }
}

fn config(mutation: PolicyMutation) -> PolicyConfig {
    PolicyConfig { mutation, ..PolicyConfig::default() }
}

/// The first write after idle, on a raid1 with a bitmap, waits for its dirty mark and bitmap
/// bit: it may go out only once both are on every member. `Err` says how that was broken.
fn first_write_waits_for_its_records(mutation: PolicyMutation) -> Result<(), String> {
    let mem = members(1, 2, true, true);
    let mut d = Driver::new(assemble(&mem), config(mutation));
    let start = d.policy.write_starts(&mut d.array, WriteId(1), 0..4096).unwrap();
    let records_on_disk =
        |d: &Driver| d.array.metadata_pending().is_none() && mem.iter().all(|m| !clean_on_disk(m) && bit_on_disk(m, 0));
    match start {
        WriteStart::Go => return Err("the write went out at once, before any record was written".into()),
        WriteStart::Parked => {}
        WriteStart::Fail(e) => panic!("write failed: {e}"),
    }
    let mut steps = 0;
    while !d.released(1) {
        if d.metadata_step().is_none() {
            return Err("the write was never released".into());
        }
        steps += 1;
        if d.released(1) && !records_on_disk(&d) {
            return Err(format!(
                "the write was released after {steps} metadata jobs, before its records were all durable"
            ));
        }
    }
    assert!(steps >= 2, "dirty mark and bitmap take several steps, saw {steps}");
    Ok(())
}

#[test]
fn a_parked_write_is_released_only_once_its_ticket_is_durable() {
    assert_eq!(first_write_waits_for_its_records(PolicyMutation::None), Ok(()));
}

#[test]
fn data_before_bitmap_lets_the_write_out_early() {
    let broken = first_write_waits_for_its_records(PolicyMutation::DataBeforeBitmap);
    assert!(broken.as_ref().is_err_and(|e| e.contains("before any record")), "{broken:?}");
}

/// A repair's writing steps wait for the dirty mark (and their bitmap bits) the pass recorded.
fn repair_step_waits_for_its_records(mutation: PolicyMutation) -> Result<(), String> {
    let mem = members(1, 2, true, true);
    let mut d = Driver::new(assemble(&mem), config(mutation));
    d.policy.start_pass(&mut d.array, SyncAction::Repair, d.now).unwrap();
    loop {
        let pending = d.array.metadata_pending().is_some();
        if let Some((request, _)) = d.submit_pass_step() {
            assert!(matches!(request, Request::Sync { offset: 0, repair: true, .. }), "{request:?}");
            return if pending { Err("the repair's first step went out before its records".into()) } else { Ok(()) };
        }
        if d.metadata_step().is_none() {
            return Err("the repair never stepped".into());
        }
    }
}

#[test]
fn a_pass_writing_step_waits_for_its_records() {
    assert_eq!(repair_step_waits_for_its_records(PolicyMutation::None), Ok(()));
    let broken = repair_step_waits_for_its_records(PolicyMutation::DataBeforeBitmap);
    assert!(broken.as_ref().is_err_and(|e| e.contains("before its records")), "{broken:?}");
}

/// Once a metadata write fails, the writes parked on it fail rather than go out.
#[test]
fn a_failed_metadata_write_fails_the_parked_writes() {
    let mem = members(1, 2, true, true);
    let mut d = Driver::new(assemble(&mem), PolicyConfig::default());
    assert_eq!(d.policy.write_starts(&mut d.array, WriteId(1), 0..4096), Ok(WriteStart::Parked));
    // The first member is failed for it (as md does) and the step goes again to the second,
    // where it fails too: the array cannot do without that one, so the metadata stops.
    for device in [0, 1] {
        let _job = d.hand_out_metadata().expect("a metadata step");
        let failed =
            MetaError::Io { device, what: "writing bitmap".into(), reason: "injected".into(), unreachable: false };
        d.policy.metadata_io_done(&mut d.array, d.now, Err(failed));
    }
    d.take_events();
    assert!(
        d.events.iter().any(|e| matches!(e, PolicyEvent::WriteFailed(WriteId(1), MetadataError::Device { .. }))),
        "{:?}",
        d.events
    );
    assert!(!d.released(1));
    // A later write needing new bits is refused outright.
    assert!(d.policy.write_starts(&mut d.array, WriteId(2), 4 << 20..(4 << 20) + 4096).is_err());
}

/// While a member failure is being recorded, answers to writes wait for the record.
#[test]
fn answers_wait_for_a_member_failure_record() {
    let mem = members(1, 2, true, false);
    let mut d = Driver::new(assemble(&mem), PolicyConfig::default());
    d.array.fail_member("mem1", false).unwrap();
    d.policy.membership_changed(&d.array);
    assert!(d.policy.hold_answer(&d.array, WriteId(7)));
    assert!(!d.events.contains(&PolicyEvent::AnswerReleased(WriteId(7))));
    d.settle_metadata();
    assert!(d.events.contains(&PolicyEvent::AnswerReleased(WriteId(7))));
    assert!(!d.policy.hold_answer(&d.array, WriteId(8)), "nothing is being recorded any more");
}

/// A rebuild onto a member added to a degraded raid1, stepped every half second and cut short
/// after a few seconds. Its checkpoint may never say more than the data a completed member
/// flush covers; `Err` says when it did. In the right policy a checkpoint is recorded while it
/// runs and when it is cut short, each right after a flush.
fn rebuild_checkpoints_follow_flushes(mutation: PolicyMutation) -> Result<(), String> {
    let mem = members(1, 2, true, false);
    let mut array = assemble(&mem[..1]);
    let fresh = Arc::new(MemoryDevice::new("fresh", MEMBER_BYTES));
    assert_eq!(array.add_member(Box::new(Arc::clone(&fresh))).unwrap(), Some(1));
    let mut d = Driver::new(array, config(mutation));
    // Member bytes rebuilt by completed steps; what the last completed flush covers.
    let mut rebuilt = 0u64;
    let mut flushed = 0u64;
    let mut checkpoints = Vec::new();
    let check = |d: &Driver, flushed: u64, checkpoints: &mut Vec<u64>| -> Result<(), String> {
        let at = d.array.recovery_checkpoint(1).unwrap_or(0) * 512;
        if at > flushed {
            return Err(format!("checkpoint at byte {at}, but flushed data reaches only byte {flushed}"));
        }
        if at > 0 && checkpoints.last() != Some(&at) {
            checkpoints.push(at);
        }
        Ok(())
    };
    let metadata = |d: &mut Driver, rebuilt: u64, flushed: &mut u64, cps: &mut Vec<u64>| {
        while let Some(job) = d.hand_out_metadata() {
            let covers = rebuilt;
            let kind = job.kind;
            d.complete_metadata(job);
            if kind == MetadataIoKind::MemberFlush {
                *flushed = covers;
            }
            check(d, *flushed, cps)?;
        }
        Ok::<(), String>(())
    };
    for _ in 0..7 {
        d.now += ms(500);
        let (request, rid) = d.submit_pass_step().ok_or("no rebuild step")?;
        check(&d, flushed, &mut checkpoints)?;
        let Request::Recover { offset, len } = request else { panic!("{request:?}") };
        d.complete_pass_step(rid);
        rebuilt = rebuilt.max(offset + len);
        check(&d, flushed, &mut checkpoints)?;
        metadata(&mut d, rebuilt, &mut flushed, &mut checkpoints)?;
    }
    d.policy.stop(&mut d.array, d.now);
    d.take_events();
    metadata(&mut d, rebuilt, &mut flushed, &mut checkpoints)?;
    assert!(d.events.iter().any(|e| matches!(e, PolicyEvent::PassEnded { .. })));
    assert!(checkpoints.len() >= 2, "a running and a stopping checkpoint, saw {checkpoints:?}");
    assert_eq!(checkpoints.last(), Some(&rebuilt), "cut short, the rebuild records how far it got");
    Ok(())
}

#[test]
fn a_checkpoint_is_recorded_only_after_a_flush_completes() {
    assert_eq!(rebuild_checkpoints_follow_flushes(PolicyMutation::None), Ok(()));
}

#[test]
fn checkpoint_ahead_records_a_checkpoint_past_the_flushed_data() {
    let broken = rebuild_checkpoints_follow_flushes(PolicyMutation::CheckpointAhead);
    assert!(broken.as_ref().is_err_and(|e| e.contains("flushed data reaches only")), "{broken:?}");
}

/// The checkpoint waits for the flush that covers it: between the step that makes it due and
/// the end of that flush, the superblocks keep the old position.
#[test]
fn a_due_checkpoint_waits_for_its_flush() {
    let mem = members(1, 2, true, false);
    let mut array = assemble(&mem[..1]);
    assert_eq!(array.add_member(Box::new(MemoryDevice::new("fresh", MEMBER_BYTES))).unwrap(), Some(1));
    let mut d = Driver::new(array, PolicyConfig::default());
    let rebuilt = loop {
        d.now += ms(700);
        let (request, rid) = d.submit_pass_step().expect("a rebuild step");
        let Request::Recover { offset, len } = request else { panic!("{request:?}") };
        d.complete_pass_step(rid);
        if let Some(job) = d.hand_out_metadata() {
            assert_eq!(job.kind, MetadataIoKind::MemberFlush, "a checkpoint starts with a flush");
            assert_eq!(d.array.recovery_checkpoint(1), Some(0), "recorded before its flush ended");
            d.complete_metadata(job);
            break offset + len;
        }
    };
    assert_eq!(d.array.recovery_checkpoint(1), Some(rebuilt / 512));
    assert_eq!(d.metadata_step(), Some(MetadataIoKind::Step), "the superblocks follow the flush");
}

/// A write ends, the clean delay passes and the flush before the clean mark goes out; `write`
/// says whether another write comes while that flush is out. Whether the array ends up recorded
/// clean.
fn clean_after_flush(write_during_flush: bool) -> bool {
    let mem = members(1, 2, true, false);
    let mut d = Driver::new(assemble(&mem), PolicyConfig::default());
    assert_eq!(d.policy.write_starts(&mut d.array, WriteId(1), 0..4096), Ok(WriteStart::Parked));
    d.settle_metadata();
    assert!(d.released(1));
    d.now = ms(100);
    d.policy.write_ends(WriteId(1), d.now);
    assert_eq!(d.policy.next_deadline(&d.array), Some(ms(600)), "clean one delay after the last write");
    d.now = ms(599);
    d.policy.run_timers(&mut d.array, d.now);
    assert!(d.hand_out_metadata().is_none(), "nothing before the delay");
    d.now = ms(600);
    d.policy.run_timers(&mut d.array, d.now);
    let flush = d.hand_out_metadata().expect("the flush before the clean mark");
    assert_eq!(flush.kind, MetadataIoKind::MemberFlush);
    if write_during_flush {
        d.now = ms(610);
        assert_eq!(d.policy.write_starts(&mut d.array, WriteId(2), 8192..12288), Ok(WriteStart::Go));
        d.policy.write_ends(WriteId(2), d.now);
    }
    d.complete_metadata(flush);
    d.settle_metadata();
    !d.array.is_dirty() && mem.iter().all(|m| clean_on_disk(m))
}

#[test]
fn clean_is_not_recorded_when_a_write_came_during_the_flush() {
    assert!(clean_after_flush(false), "an idle array is marked clean after its flush");
    assert!(!clean_after_flush(true), "marked clean over a write made during the flush");
}

/// Bits of idle chunks clear one `bitmap_clear_delay` after their last write, and not while a
/// write touched them after the flush before the clearing started.
#[test]
fn intent_bits_clear_only_after_the_delay() {
    let mem = members(1, 2, true, true);
    // No clean mark in this test: it would clear every bit at once.
    let config = PolicyConfig { clean_delay: Duration::from_secs(3600), ..PolicyConfig::default() };
    let mut d = Driver::new(assemble(&mem), config);
    let chunk = 64 << 10;
    let dirty = |d: &Driver, c: u64| d.array.write_intent().unwrap().is_dirty(c);
    let write = |d: &mut Driver, id: u64, c: u64| {
        let start = d.policy.write_starts(&mut d.array, WriteId(id), c * chunk..c * chunk + 4096).unwrap();
        d.settle_metadata();
        assert!(start == WriteStart::Go || d.released(id));
        d.policy.write_ends(WriteId(id), d.now);
    };
    d.now = Duration::from_secs(1);
    write(&mut d, 1, 0);
    write(&mut d, 2, 5);
    // Chunk 5 is written again later: its delay starts over.
    d.now = Duration::from_secs(3);
    write(&mut d, 3, 5);
    assert!(dirty(&d, 0) && dirty(&d, 5) && mem.iter().all(|m| bit_on_disk(m, 0) && bit_on_disk(m, 5)));
    assert_eq!(d.policy.next_deadline(&d.array), Some(Duration::from_secs(6)));
    d.now = ms(5999);
    d.policy.run_timers(&mut d.array, d.now);
    assert!(d.hand_out_metadata().is_none(), "nothing is due before the delay");
    d.now = Duration::from_secs(6);
    d.policy.run_timers(&mut d.array, d.now);
    assert_eq!(d.metadata_step(), Some(MetadataIoKind::MemberFlush), "the members are flushed first");
    d.settle_metadata();
    assert!(!dirty(&d, 0) && dirty(&d, 5), "chunk 0 is cleared, chunk 5 is not yet due");
    assert!(mem.iter().all(|m| !bit_on_disk(m, 0) && bit_on_disk(m, 5)));
    assert_eq!(d.policy.next_deadline(&d.array), Some(Duration::from_secs(8)));
    // A write to chunk 5 while the flush before its clearing is out keeps its bit.
    d.now = Duration::from_secs(8);
    d.policy.run_timers(&mut d.array, d.now);
    let flush = d.hand_out_metadata().expect("the flush before clearing chunk 5");
    write(&mut d, 4, 5);
    d.complete_metadata(flush);
    d.settle_metadata();
    assert!(dirty(&d, 5), "cleared although written during the flush");
    d.now = Duration::from_secs(13);
    d.policy.run_timers(&mut d.array, d.now);
    d.settle_metadata();
    assert!(!dirty(&d, 5) && mem.iter().all(|m| !bit_on_disk(m, 5)));
}

/// A resync of a raid5 found dirty checkpoints while it runs and when stopped; assembled again,
/// the array's next resync starts from that checkpoint, not from 0, and never past where the
/// first one got.
#[test]
fn a_resync_resumes_from_its_checkpoint() {
    let mem = members(5, 4, false, false);
    let mut d = Driver::new(assemble(&mem), PolicyConfig::default());
    assert!(d.events.contains(&PolicyEvent::Notice("resync started".into())), "{:?}", d.events);
    let mut done = 0;
    for _ in 0..6 {
        d.now += ms(500);
        let (request, rid) = d.submit_pass_step().expect("a resync step");
        let Request::Sync { offset, len, repair: true } = request else { panic!("{request:?}") };
        assert_eq!(offset, done, "steps follow one another");
        d.complete_pass_step(rid);
        done = offset + len;
        d.settle_metadata();
    }
    d.policy.stop(&mut d.array, d.now);
    d.take_events();
    d.settle_metadata();
    let Some(PolicyEvent::PassEnded { summary }) = d.events.iter().find(|e| matches!(e, PolicyEvent::PassEnded { .. }))
    else {
        panic!("the resync did not end: {:?}", d.events)
    };
    assert!(summary.starts_with("resync interrupted"), "{summary}");
    assert!(mem.iter().all(|m| !clean_on_disk(m)), "a resync cut short is still owed");
    drop(d);

    let mut again = Driver::new(assemble(&mem), PolicyConfig::default());
    let from = again.policy.pass().expect("the resync starts again").start;
    assert!(from > 0 && from <= done, "resumed from byte {from}; the first resync got to {done}");
    again.now = ms(1);
    let (request, _) = again.submit_pass_step().expect("a step");
    assert!(matches!(request, Request::Sync { offset, repair: true, .. } if offset == from), "{request:?}");
}

/// An array of `n` members at `level`, its last member left out and a fresh one added in its
/// place, rebuilt by itself; the devices in slot order, and the policy's driver.
fn rebuilding(level: i32, n: usize, config: PolicyConfig) -> (Vec<Arc<MemoryDevice>>, Driver) {
    let mem = members(level, n, true, false);
    let mut array = assemble(&mem[..n - 1]);
    let fresh = Arc::new(MemoryDevice::new("fresh", MEMBER_BYTES));
    assert_eq!(array.add_member(Box::new(Arc::clone(&fresh))).unwrap(), Some(n - 1));
    let mut devs = mem[..n - 1].to_vec();
    devs.push(fresh);
    (devs, Driver::new(array, config))
}

/// A raid1 of two: one member and a fresh one added, rebuilt by itself.
fn rebuilding_mirror(config: PolicyConfig) -> (Vec<Arc<MemoryDevice>>, Driver) {
    rebuilding(1, 2, config)
}

/// Seven rebuild steps half a second apart (past the first checkpoint), then a write that
/// makes the array dirty, all recorded: what an unclean stop then leaves on the members.
fn rebuild_a_while_then_write(d: &mut Driver) {
    for _ in 0..7 {
        d.now += ms(500);
        let (_, rid) = d.submit_pass_step().expect("a rebuild step");
        d.complete_pass_step(rid);
        d.settle_metadata();
    }
    assert_eq!(d.policy.write_starts(&mut d.array, WriteId(1), 0..4096), Ok(WriteStart::Parked));
    d.settle_metadata();
    assert!(d.released(1));
}

fn pass_summary(d: &Driver) -> Option<&str> {
    d.events.iter().rev().find_map(|e| match e {
        PolicyEvent::PassEnded { summary } => Some(summary.as_str()),
        _ => None,
    })
}

/// A rebuild whose source cannot be read, with no other copy left, fails; it is not started
/// again by itself for the same member (it would fail at the same place forever), as md's
/// `recovery_disabled`, and the array counts as idle. A new policy (the array assembled
/// again) tries anew.
#[test]
fn a_failed_rebuild_is_not_restarted_by_itself() {
    let (_, mut d) = rebuilding_mirror(PolicyConfig::default());
    d.unreadable = Some(0);
    d.now += ms(1);
    let (request, rid) = d.submit_pass_step().expect("the rebuild starts by itself");
    assert!(matches!(request, Request::Recover { offset: 0, .. }), "{request:?}");
    d.complete_pass_step(rid);
    d.settle_metadata();
    let summary = pass_summary(&d).expect("the rebuild ended");
    assert!(summary.starts_with("recover failed at byte 0"), "{summary}");
    assert!(
        d.events.iter().any(|e| matches!(e, PolicyEvent::Notice(n) if n.contains("not retried by itself"))),
        "{:?}",
        d.events
    );
    for _ in 0..10 {
        d.now += ms(500);
        assert!(d.submit_pass_step().is_none(), "the failed rebuild started again");
        d.settle_metadata();
    }
    assert!(d.policy.pass_idle(&d.array), "nothing will run: waiting for the passes must end");
    assert_eq!(d.array.engine().slot_states()[1], SlotState::Recovering, "the member waits, still to be rebuilt");

    d.unreadable = None;
    d.policy = ArrayPolicy::new(&mut d.array, PolicyConfig::default(), d.now);
    d.now += ms(1);
    assert!(d.submit_pass_step().is_some(), "assembled again, the rebuild tries anew");
}

/// Run the pass that is due, step by step with its metadata, until it has ended and left
/// nothing to record; the requests it made.
fn run_passes(d: &mut Driver) -> Vec<Request> {
    let mut requests = Vec::new();
    for _ in 0..100_000 {
        d.now += ms(10);
        d.settle_metadata();
        match d.submit_pass_step() {
            Some((request, rid)) => {
                requests.push(request);
                d.complete_pass_step(rid);
            }
            None if d.policy.pass_idle(&d.array) && d.array.metadata_pending().is_none() => {
                d.settle_metadata();
                if d.policy.pass_idle(&d.array) {
                    return requests;
                }
            }
            None => {}
        }
    }
    panic!("the passes never ended: {:?}", d.events)
}

/// After an unclean stop in the middle of a mirror's rebuild, the rebuild resumes from its
/// checkpoint, as md's does, and the resync owed runs after it, once the rebuilt member is in
/// sync: the resync then makes its copies alike wherever a write was cut short.
#[test]
fn after_an_unclean_stop_a_mirror_rebuild_resumes_and_the_resync_follows() {
    let (devs, mut d) = rebuilding_mirror(PolicyConfig::default());
    // A write makes the array dirty, and the service dies without stopping.
    rebuild_a_while_then_write(&mut d);
    let checkpoint = d.array.recovery_checkpoint(1).expect("rebuilding");
    assert!(checkpoint > 0, "the rebuild recorded its progress");
    drop(d);

    let array = assemble(&devs);
    assert!(array.needs_resync(), "found dirty");
    assert_eq!(array.recovery_checkpoint(1), Some(checkpoint), "a mirror's rebuild keeps its checkpoint");
    let mut d = Driver::new(array, PolicyConfig::default());
    assert!(d.policy.pass().is_none(), "the resync waits for the rebuild");
    let requests = run_passes(&mut d);
    let first_sync = requests.iter().position(|r| matches!(r, Request::Sync { .. })).expect("a resync ran");
    assert!(
        matches!(requests[0], Request::Recover { offset, .. } if offset == checkpoint * 512),
        "the rebuild resumed from its checkpoint: {:?}",
        requests[0]
    );
    assert!(requests[first_sync..].iter().all(|r| matches!(r, Request::Sync { repair: true, .. })), "{requests:?}");
    assert!(matches!(requests[first_sync], Request::Sync { offset: 0, .. }), "{:?}", requests[first_sync]);
    assert!(d.events.contains(&PolicyEvent::RebuildRecorded));
    assert!(!d.array.needs_resync(), "the resync completed");
    assert_eq!(d.array.engine().slot_states(), &[SlotState::InSync, SlotState::InSync]);
}

/// A parity array's rebuild after an unclean stop starts over: neither a log replay nor a
/// resync would make what it rebuilt agree with the rest of its stripes.
#[test]
fn after_an_unclean_stop_a_parity_rebuild_starts_over() {
    let (devs, mut d) = rebuilding(5, 3, PolicyConfig::default());
    rebuild_a_while_then_write(&mut d);
    assert!(d.array.recovery_checkpoint(2).is_some_and(|c| c > 0));
    drop(d);
    let boxed = devs.iter().map(|d| Box::new(Arc::clone(d)) as Box<dyn MemberDevice>).collect();
    let rules = uraid_md::assemble::AssemblyRules { start_dirty_degraded: true, ..Default::default() };
    let array = OpenArray::assemble_with(boxed, true, rules).expect("assembled as start_dirty_degraded allows");
    assert_eq!(array.recovery_checkpoint(2), Some(0));
}
