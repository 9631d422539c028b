//! The service's metadata, watched write by write: bitmap bits and dirty marks durable before
//! the writes they cover, rebuild and resync checkpoints behind the data, the engine thread
//! never waiting on a metadata write, and what a failed metadata write or flush does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use uraid_device::service::{ArrayService, BlockOp, ServiceConfig, ServiceError, SpeedLimits, SyncAction};
use uraid_device::{probe, MemberDevice, MemoryDevice};

mod common;
use common::*;

fn bitmap_bits_on_disk(dev: &dyn MemberDevice) -> Vec<u8> {
    let probed = probe(dev).unwrap().unwrap();
    let info = probed.superblock.info();
    let at = (probed.offset as i64 + i64::from(info.bitmap_offset.expect("bitmap")) * 512) as u64;
    let mut header = vec![0u8; uraid_md_format::bitmap::HEADER_BYTES];
    dev.read_at(at, &mut header).unwrap();
    let bms = uraid_md_format::bitmap::BitmapSuper::parse(&header).unwrap();
    let mut bits = vec![0u8; bms.bits_bytes()];
    dev.read_at(at + header.len() as u64, &mut bits).unwrap();
    bits
}

/// With a write-intent bitmap, regions are marked before writes reach the members, cleared
/// lazily once idle, and a resync after a crash visits only the marked regions, yet repairs a
/// torn stripe inside them.
#[test]
fn bitmap_marks_regions_and_limits_the_resync() {
    for bitmap in [true, false] {
        let mem = members_with(5, 4, 16, true, bitmap);
        let devs = as_dyn(&mem);
        let config = ServiceConfig {
            clean_delay: Duration::from_secs(30),
            bitmap_clear_delay: Duration::from_millis(100),
            ..ServiceConfig::default()
        };
        let service = ArrayService::start(open(&devs, true), config.clone());
        let h = service.handle();
        let size = h.info().size;
        h.call(BlockOp::Write { offset: 0, data: (pattern(1, size as usize)).into(), fua: true }).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        if bitmap {
            // Idle regions lose their bits even while the array is still marked dirty.
            assert!(!clean_on_disk(devs[0].as_ref()));
            assert!(bitmap_bits_on_disk(devs[0].as_ref()).iter().all(|b| *b == 0), "idle bits not cleared");
        }
        h.call(BlockOp::Write { offset: 100_000, data: (vec![7; 5000]).into(), fua: true }).unwrap();
        if bitmap {
            assert!(bitmap_bits_on_disk(devs[1].as_ref()).iter().any(|b| *b != 0), "no bit set before the write");
        }
        // Crash now: the array is dirty and the write's region is marked.
        let crashed = crash_copy(&mem);
        let crashed_devs = as_dyn(&crashed);
        // Tear the stripe the write went to: parity no longer matches.
        corrupt(&crashed_devs, 0, 100_000 / 3 / 1024 * 1024 / 8192 * 8192 + 100);
        drop(h);
        service.stop().unwrap();
        let service = ArrayService::start(open(&crashed_devs, true), config);
        let status = service.handle().wait_idle().unwrap();
        let last = status.last_sync.clone().unwrap_or_default();
        assert!(last.starts_with("resync completed"), "{last}");
        let done: u64 = last.split_whitespace().nth(2).unwrap().parse().unwrap();
        if bitmap {
            assert!(done < size / 10, "resync with a bitmap covered {done} of {size} bytes: {last}");
            assert!(last.contains("skipped"), "{last}");
        } else {
            assert_eq!(done, size, "{last}");
        }
        service.handle().start_sync(SyncAction::Check).unwrap();
        assert_eq!(
            service.handle().wait_idle().unwrap().mismatch_sectors,
            0,
            "bitmap {bitmap}: the resync missed the torn stripe"
        );
        service.stop().unwrap();
    }
}

/// What a member was asked to do, in order, across all members.
#[derive(Debug, Clone)]
enum Op {
    Write { dev: usize, offset: u64, data: Vec<u8> },
    Flush { dev: usize },
}

/// A member in memory that records every write and flush it is asked for (in a log shared by
/// all), and whose flushes wait while its gate is shut: a disk slow to make anything durable.
struct Watched {
    dev: usize,
    inner: Arc<MemoryDevice>,
    log: Arc<std::sync::Mutex<Vec<Op>>>,
    /// Writes below this byte (the metadata, before the data area) fail.
    fail_below: std::sync::atomic::AtomicU64,
    /// Flushes fail.
    fail_flush: AtomicBool,
    shut: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
    flushes_waiting: std::sync::atomic::AtomicUsize,
}

impl Watched {
    fn new(dev: usize, inner: Arc<MemoryDevice>, log: &Arc<std::sync::Mutex<Vec<Op>>>) -> Arc<Watched> {
        Arc::new(Watched {
            dev,
            inner,
            log: Arc::clone(log),
            fail_below: std::sync::atomic::AtomicU64::new(0),
            fail_flush: AtomicBool::new(false),
            shut: std::sync::Mutex::new(false),
            opened: std::sync::Condvar::new(),
            flushes_waiting: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn set_shut(&self, shut: bool) {
        *self.shut.lock().unwrap() = shut;
        self.opened.notify_all();
    }
}

impl MemberDevice for Watched {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        if offset < self.fail_below.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("injected metadata write error"));
        }
        let mut log = self.log.lock().unwrap();
        self.inner.write_at(offset, data)?;
        log.push(Op::Write { dev: self.dev, offset, data: data.to_vec() });
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        self.flushes_waiting.fetch_add(1, Ordering::SeqCst);
        let mut shut = self.shut.lock().unwrap();
        while *shut {
            shut = self.opened.wait(shut).unwrap();
        }
        drop(shut);
        self.flushes_waiting.fetch_sub(1, Ordering::SeqCst);
        if self.fail_flush.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("injected flush error"));
        }
        let mut log = self.log.lock().unwrap();
        self.inner.flush()?;
        log.push(Op::Flush { dev: self.dev });
        Ok(())
    }
}

/// The members of `mem`, watched, with one log.
fn watched(mem: &[Arc<MemoryDevice>]) -> (Vec<Arc<Watched>>, Arc<std::sync::Mutex<Vec<Op>>>) {
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    (mem.iter().enumerate().map(|(i, m)| Watched::new(i, Arc::clone(m), &log)).collect(), log)
}

fn watched_dyn(w: &[Arc<Watched>]) -> Vec<Arc<dyn MemberDevice>> {
    w.iter().map(|d| Arc::clone(d) as Arc<dyn MemberDevice>).collect()
}

/// The engine thread never waits on a metadata write or flush: while the members' flushes hang,
/// the first write (which needs the dirty mark and its bitmap bit durable) waits, unanswered,
/// yet status requests and reads are answered; once the flushes go through, the write completes
/// with the array marked dirty and the bit set on disk.
#[test]
fn metadata_writes_never_stall_the_engine_thread() {
    let mem = members_with(1, 2, 0, true, true);
    let (slow, _) = watched(&mem);
    let devs = watched_dyn(&slow);
    let config = ServiceConfig { inline_max: 0, clean_delay: Duration::from_secs(30), ..ServiceConfig::default() };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    for s in &slow {
        s.set_shut(true);
    }
    let answered = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let flag = Arc::clone(&answered);
    h.submit(
        BlockOp::Write { offset: 1 << 20, data: (pattern(40, 8192)).into(), fua: false },
        Box::new(move |r| {
            flag.store(true, Ordering::SeqCst);
            let _ = tx.send(r.is_ok());
        }),
    );
    // The metadata thread is now stuck in a flush.
    let stuck = Instant::now();
    while slow.iter().all(|s| s.flushes_waiting.load(Ordering::SeqCst) == 0) {
        assert!(stuck.elapsed() < Duration::from_secs(10), "no metadata flush was attempted");
        std::thread::sleep(Duration::from_millis(5));
    }
    for _ in 0..20 {
        h.status().expect("status while a metadata flush hangs");
        assert_eq!(read(&h, 0, 4096), vec![0; 4096]);
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(!answered.load(Ordering::SeqCst), "the write was answered before its metadata was durable");
    for s in &slow {
        s.set_shut(false);
    }
    assert!(rx.recv_timeout(Duration::from_secs(10)).expect("write answered"), "write failed");
    assert!(!clean_on_disk(devs[0].as_ref()), "the dirty mark is not on disk");
    assert!(bitmap_bits_on_disk(devs[1].as_ref()).iter().any(|b| *b != 0), "the write's bit is not on disk");
    assert_eq!(read(&h, 1 << 20, 8192), pattern(40, 8192));
    drop(h);
    service.stop().unwrap();
    assert!(devs.iter().all(|d| clean_on_disk(d.as_ref())));
}

fn resync_offset_on_disk(dev: &dyn MemberDevice) -> u64 {
    probe(dev).unwrap().expect("superblock").superblock.info().resync_offset
}

/// How many bytes a finished resync says it went over.
fn resynced_bytes(status: &uraid_device::service::ArrayStatus) -> u64 {
    let last = status.last_sync.clone().unwrap_or_default();
    assert!(last.starts_with("resync completed"), "{last}");
    last.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// A resync cut short by a stop, or by a crash after its last checkpoint, leaves its position
/// in the superblocks (md's `resync_offset`), and the next start resumes there: it goes over
/// less than the whole array, yet repairs a torn stripe past the checkpoint. raid5 keeps the
/// position in member sectors, raid10 in array sectors, as md does.
#[test]
fn a_resync_cut_short_resumes_from_its_checkpoint() {
    for (level, n) in [(5, 4), (10, 4)] {
        let mem = members_marked(level, n, 16, false);
        let devs = as_dyn(&mem);
        // A torn stripe near the end of every member, past any checkpoint the slow resync reaches.
        corrupt(&devs, 1, 6 << 20);
        let slow = ServiceConfig {
            speed: SpeedLimits { min_bytes_per_sec: 1, max_bytes_per_sec: 3 << 20 },
            ..ServiceConfig::default()
        };
        let service = ArrayService::start(open(&devs, true), slow);
        let size = service.handle().info().size;
        std::thread::sleep(Duration::from_millis(2700));
        // A crash now, after the checkpoint taken at two seconds.
        let crashed = crash_copy(&mem);
        service.stop().unwrap();
        for (what, members) in [("stopped", mem.clone()), ("crashed", crashed)] {
            let devs = as_dyn(&members);
            let at = resync_offset_on_disk(devs[0].as_ref());
            assert!(at > 0 && at < u64::MAX, "level {level}, {what}: resync_offset {at} on disk");
            let service = ArrayService::start(open(&devs, true), ServiceConfig::default());
            let h = service.handle();
            let status = h.wait_idle().unwrap();
            let done = resynced_bytes(&status);
            assert!(done > 0 && done < size, "level {level}, {what}: resumed resync went over {done} of {size} bytes");
            h.start_sync(SyncAction::Check).unwrap();
            assert_eq!(
                h.wait_idle().unwrap().mismatch_sectors,
                0,
                "level {level}, {what}: resync missed the torn stripe"
            );
            drop(h);
            service.stop().unwrap();
            assert_eq!(resync_offset_on_disk(devs[0].as_ref()), u64::MAX, "level {level}, {what}: not clean");
        }
    }
}

/// A rebuild's checkpoint never runs ahead of the data it covers: every superblock the
/// rebuilding member gets with `recovery_offset` R comes after a flush of that member that
/// follows every rebuilt write below R. Checked over a slow rebuild that checkpoints while
/// running and again when stopped.
#[test]
fn rebuild_checkpoints_follow_the_data_they_cover() {
    let mem = members(1, 2, 0);
    let info = probe(mem[0].as_ref()).unwrap().unwrap().superblock.info();
    let (data_start, super_at) = (info.data_offset * 512, info.super_offset * 512);
    let fresh = Arc::new(MemoryDevice::new("fresh", MEMBER_BYTES));
    let (w, log) = watched(&[Arc::clone(&mem[0]), fresh]);
    let mut array = open(&watched_dyn(&w[..1]), true);
    assert_eq!(array.add_member(Box::new(Arc::clone(&w[1]))).unwrap(), Some(1));
    let config = ServiceConfig {
        speed: SpeedLimits { min_bytes_per_sec: 1, max_bytes_per_sec: 2 << 20 },
        ..ServiceConfig::default()
    };
    let service = ArrayService::start(array, config);
    std::thread::sleep(Duration::from_millis(2600));
    service.stop().unwrap();
    let log = log.lock().unwrap().clone();
    let mut checkpoints = 0;
    for (i, op) in log.iter().enumerate() {
        let Op::Write { dev: 1, offset, data } = op else { continue };
        if *offset != super_at {
            continue;
        }
        let sb = uraid_md_format::Superblock::parse(info.version, data, MEMBER_BYTES).expect("a superblock");
        let Some(rebuilt) = sb.info().recovery_offset.filter(|r| *r > 0) else { continue };
        checkpoints += 1;
        let covered_end = data_start + rebuilt * 512;
        let last_flush =
            log[..i].iter().rposition(|o| matches!(o, Op::Flush { dev: 1 })).expect("a flush before the checkpoint");
        for (j, earlier) in log[..i].iter().enumerate() {
            if let Op::Write { dev: 1, offset, data } = earlier {
                let covered = *offset >= data_start && *offset + data.len() as u64 <= covered_end;
                assert!(
                    !covered || j < last_flush,
                    "data write {j} at {offset} (below the checkpoint {rebuilt}) was not flushed before it (op {i})"
                );
            }
        }
    }
    assert!(checkpoints >= 2, "expected a running and a stopping checkpoint, saw {checkpoints}");
}

/// No data write reaches a member before the bitmap bit covering it is on that member: for every
/// data write, the last bitmap that member was given before it has the write's bit set, and a
/// flush of the member lies between the two. Over writes in bursts, with bits cleared between
/// bursts so they must be set again.
#[test]
fn bitmap_bits_are_durable_before_the_writes_they_cover() {
    let mem = members_with(1, 2, 0, true, true);
    let info = probe(mem[0].as_ref()).unwrap().unwrap().superblock.info();
    let data_start = info.data_offset * 512;
    let bitmap_at = (info.super_offset as i64 * 512 + i64::from(info.bitmap_offset.expect("bitmap")) * 512) as u64;
    let (w, log) = watched(&mem);
    let devs = watched_dyn(&w);
    let config = ServiceConfig {
        bitmap_clear_delay: Duration::from_millis(30),
        clean_delay: Duration::from_secs(30),
        inline_max: 0,
        ..ServiceConfig::default()
    };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    let size = h.info().size;
    for burst in 0..6u64 {
        for i in 0..12u64 {
            let offset = (burst * 7919 + i * 104_729) * 4096 % (size - 8192);
            h.call(BlockOp::Write { offset, data: (pattern(burst * 100 + i, 8192)).into(), fua: false }).unwrap();
        }
        std::thread::sleep(Duration::from_millis(120));
    }
    drop(h);
    service.stop().unwrap();
    let header = uraid_md_format::bitmap::HEADER_BYTES;
    let chunk_bytes = 64u64 << 10;
    let log = log.lock().unwrap().clone();
    let mut data_writes = 0;
    for (i, op) in log.iter().enumerate() {
        let Op::Write { dev, offset, data } = op else { continue };
        if *offset < data_start {
            continue;
        }
        data_writes += 1;
        let first = (*offset - data_start) / chunk_bytes;
        let last = (*offset + data.len() as u64 - 1 - data_start) / chunk_bytes;
        // The bitmap as the member holds it durably when the data write goes out: the last
        // bitmap write on that member that a flush has followed since. (A later bitmap write,
        // for other chunks, may still be on its way: that one does not count.)
        let mut flushed = false;
        let durable = log[..i].iter().enumerate().rev().find_map(|(j, o)| match o {
            Op::Flush { dev: d } if d == dev => {
                flushed = true;
                None
            }
            Op::Write { dev: d, offset, data } if d == dev && *offset == bitmap_at && flushed => {
                Some((j, data[header..].to_vec()))
            }
            _ => None,
        });
        let (b, bits) =
            durable.unwrap_or_else(|| panic!("data write {i} on member {dev} before any durable bitmap write"));
        for c in first..=last {
            assert!(
                uraid_md_format::bitmap::is_dirty(&bits, c),
                "data write {i} on member {dev}: bit {c} clear in the durable bitmap (write {b})"
            );
        }
    }
    assert!(data_writes >= 72 * 2, "{data_writes} data writes seen");
}

/// A served raid1 of two watched members with a bitmap, after one write (the array is dirty and
/// the bit of its first chunk set).
struct Mirror {
    mem: Vec<Arc<MemoryDevice>>,
    /// Where the data area starts on each member: metadata lies below.
    data_start: u64,
    w: Vec<Arc<Watched>>,
    service: ArrayService,
    h: uraid_device::ServiceHandle,
}

fn mirror_after_a_first_write() -> Mirror {
    let mem = members_with(1, 2, 0, true, true);
    let data_start = probe(mem[0].as_ref()).unwrap().unwrap().superblock.info().data_offset * 512;
    let (w, _) = watched(&mem);
    let devs = watched_dyn(&w);
    let config = ServiceConfig { inline_max: 0, clean_delay: Duration::from_secs(30), ..ServiceConfig::default() };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    h.call(BlockOp::Write { offset: 0, data: (pattern(1, 4096)).into(), fua: false }).expect("first write");
    Mirror { mem, data_start, w, service, h }
}

/// Once a metadata write has failed, a write whose bitmap bit could not be recorded fails
/// with a metadata error and never reaches the members, later ones that need new bits fail
/// too, and the service still stops.
#[test]
fn writes_fail_rather_than_go_out_unrecorded_after_a_metadata_write_fails() {
    let Mirror { mem, data_start, w, service, h } = mirror_after_a_first_write();
    // Metadata fails on both members: the first is failed for it (as md does), the second
    // cannot be, so the metadata stops.
    w[0].fail_below.store(data_start, Ordering::SeqCst);
    w[1].fail_below.store(data_start, Ordering::SeqCst);
    for (i, offset) in [(2u64, 3u64 << 20), (3, 5 << 20)] {
        let r = h.call(BlockOp::Write { offset, data: (pattern(i, 4096)).into(), fua: false });
        assert!(matches!(r, Err(ServiceError::Metadata(_))), "write at {offset} answered {r:?}");
        let mut on_disk = vec![0u8; 4096];
        mem[1].read_at(data_start + offset, &mut on_disk).unwrap();
        assert_ne!(on_disk, pattern(i, 4096), "the unrecorded write at {offset} reached a member");
    }
    drop(h);
    let _ = service.stop();
}

/// A metadata write that fails on one member of a mirror fails that member, as md does
/// (`super_written`), and the array goes on degraded: the write is answered, reaches the other
/// member, and the survivor's superblock records the failure.
#[test]
fn a_member_whose_metadata_cannot_be_written_is_failed_and_writes_go_on() {
    let Mirror { mem, data_start, w, service, h } = mirror_after_a_first_write();
    w[0].fail_below.store(data_start, Ordering::SeqCst);
    let offset = 3u64 << 20;
    h.call(BlockOp::Write { offset, data: (pattern(2, 4096)).into(), fua: false }).expect("the mirror goes on");
    let mut on_disk = vec![0u8; 4096];
    mem[1].read_at(data_start + offset, &mut on_disk).unwrap();
    assert_eq!(on_disk, pattern(2, 4096), "the write reached the surviving member");
    assert_eq!(read(&h, offset, 4096), pattern(2, 4096));
    drop(h);
    let report = service.stop().unwrap();
    assert!(report.failed_members.iter().any(|(_, why)| why.contains("metadata could not be written")), "{report:?}");
    let survivor = probe(mem[1].as_ref()).unwrap().unwrap().superblock.info();
    assert!(
        survivor.roles.iter().filter(|r| matches!(r, uraid_md_format::Role::Active(_))).count() == 1,
        "the survivor's superblock records the failed member: {:?}",
        survivor.roles
    );
}

/// A member flush that fails before the clean mark: as md fails a member whose superblock write
/// (with its preflush) fails, the member is failed, the flush goes to the other, and the
/// survivor is marked clean; the service goes on serving throughout.
#[test]
fn a_member_whose_flush_fails_is_failed_and_the_survivor_is_marked_clean() {
    let mem = members(1, 2, 0);
    let (w, _) = watched(&mem);
    let devs = watched_dyn(&w);
    let config = ServiceConfig { inline_max: 0, clean_delay: Duration::from_millis(50), ..ServiceConfig::default() };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    // The dirty mark (written and flushed) goes through; the flush before the clean mark fails.
    h.call(BlockOp::Write { offset: 4096, data: (pattern(7, 4096)).into(), fua: false }).expect("write");
    w[1].fail_flush.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !clean_on_disk(devs[0].as_ref()) {
        assert!(Instant::now() < deadline, "the survivor was never marked clean");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!clean_on_disk(devs[1].as_ref()), "the member whose flush failed was marked clean");
    assert_eq!(read(&h, 4096, 4096), pattern(7, 4096), "the service stopped serving");
    drop(h);
    let report = service.stop().unwrap();
    assert_eq!(report.failed_members.len(), 1, "one member failed for its flush: {report:?}");
    assert!(report.failed_members[0].0.contains("mem1"), "{report:?}");
}

/// The array's metadata goes down the members' own I/O paths (their rings or I/O threads),
/// beside their data: the dirty mark and bitmap bits of a write, the clean mark at the stop.
/// Only a spare, which has no path of its own, has its superblock written by the metadata
/// thread. Either way the superblocks end up as md would have them.
#[test]
fn metadata_goes_down_the_members_own_paths() {
    use uraid_device::service::{IoBackend, ManageOp};
    for io in [IoBackend::Uring, IoBackend::Threads] {
        let name = format!("service-metadata-paths-{io}");
        let devs = file_members(&name, 1, 2, 0);
        let spare = uraid_testkit::scratch_dir(&name).join("spare.img");
        std::fs::write(&spare, vec![0u8; devs[0].size() as usize]).unwrap();
        let config = ServiceConfig { io, ..ServiceConfig::default() };
        let service = ArrayService::start(open(&devs, true), config);
        let h = service.handle();
        h.call(BlockOp::Write { offset: 4096, data: pattern(3, 8192).into(), fua: true }).unwrap();
        assert!(!clean_on_disk(devs[0].as_ref()) && !clean_on_disk(devs[1].as_ref()), "{io}: marked dirty first");
        h.manage(ManageOp::Add(spare.clone())).unwrap();
        h.call(BlockOp::Flush).unwrap();
        let report = service.stop().unwrap();
        assert!(report.metadata_ios_on_member_paths >= 4, "{io}: {report:?}");
        assert!(report.metadata_ios_on_thread >= 1, "{io}: the spare's superblock: {report:?}");
        assert!(devs.iter().all(|d| clean_on_disk(d.as_ref())), "{io}: marked clean at the stop");
        let spare_dev = uraid_device::FileDevice::open(&spare, false).unwrap();
        let found = probe(&spare_dev).unwrap().expect("the spare carries a superblock");
        assert_eq!(found.superblock.info().role, uraid_md_format::Role::Spare, "{io}");
        assert_eq!(open(&devs, false).read(4096, 8192).unwrap(), pattern(3, 8192), "{io}");
    }
}

/// A mirror crashed in the middle of a rebuild, while written to: served again, it resumes the
/// rebuild from its checkpoint, and the resync owed runs after it, once the rebuilt member is in
/// sync; those waiting for the passes hear of the end only once both are done, and the copies
/// then agree.
#[test]
fn after_a_crash_mid_rebuild_the_rebuild_resumes_and_the_resync_follows() {
    let mem = members(1, 2, 0);
    let fresh = Arc::new(MemoryDevice::new("fresh", MEMBER_BYTES));
    let all = [Arc::clone(&mem[0]), Arc::clone(&fresh)];
    let mut array = open(&as_dyn(&all[..1]), true);
    assert_eq!(array.add_member(Box::new(Arc::clone(&fresh))).unwrap(), Some(1));
    let slow = ServiceConfig {
        speed: SpeedLimits { min_bytes_per_sec: 1, max_bytes_per_sec: 2 << 20 },
        ..ServiceConfig::default()
    };
    let service = ArrayService::start(array, slow);
    let h = service.handle();
    // Past the rebuild's first checkpoint (two seconds), a write makes the array dirty.
    std::thread::sleep(Duration::from_millis(2300));
    h.call(BlockOp::Write { offset: 1 << 20, data: pattern(5, 64 << 10).into(), fua: false }).unwrap();
    let crashed = crash_copy(&all);
    drop(h);
    service.stop().unwrap();

    let devs = as_dyn(&crashed);
    let array = open(&devs, true);
    assert!(array.needs_resync(), "found dirty after the crash");
    let checkpoint = array.recovery_checkpoint(1).expect("the new member is still being rebuilt");
    assert!(checkpoint > 0, "the rebuild's checkpoint survives the crash on a mirror");
    let service = ArrayService::start(array, ServiceConfig::default());
    let status = service.handle().wait_idle().unwrap();
    let last = status.last_sync.clone().unwrap_or_default();
    assert!(last.starts_with("resync completed"), "the resync ran last: {last}");
    assert!(!status.needs_resync && status.degraded == 0, "{status:?}");
    service.handle().start_sync(SyncAction::Check).unwrap();
    assert_eq!(service.handle().wait_idle().unwrap().mismatch_sectors, 0, "the copies agree");
    service.stop().unwrap();
}
