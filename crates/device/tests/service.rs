//! The concurrent service over in-memory members: many clients at once, md's dirty/clean
//! bookkeeping, zeroing and trimming, member failure during service, and a clean stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use uraid_device::service::{
    ArrayService, BlockOp, BlockReply, IoBackend, ServiceConfig, ServiceError, SpeedLimits, SyncAction, SyncError,
    INBOX_CAPACITY,
};
use uraid_device::{probe, MemberDevice, MemoryDevice};

mod common;
use common::*;

/// Four client threads write and read back disjoint regions at once on every level; the whole
/// array then holds what they wrote, the stop marks it clean, and a fresh assembly finds the
/// redundancy consistent.
#[test]
fn concurrent_clients_on_every_level() {
    for (level, n, chunk) in [(-1, 3, 0), (0, 4, 16), (1, 2, 0), (4, 4, 16), (5, 4, 16), (6, 5, 16), (10, 4, 16)] {
        let mem = members(level, n, chunk);
        let devs = as_dyn(&mem);
        let service = ArrayService::start(open(&devs, true), ServiceConfig::default());
        let size = service.handle().info().size;
        let expect = four_clients(&service, level);
        assert!(read(&service.handle(), 0, size) == expect, "level {level}: array differs from what was written");
        let report = service.stop().expect("stop");
        assert!(report.failed_members.is_empty());
        for d in &devs {
            assert!(clean_on_disk(d.as_ref()), "level {level}: {} not clean after stop", d.name());
        }
        let mut again = open(&devs, false);
        assert!(again.read(0, size).unwrap() == expect, "level {level}: reassembled contents differ");
        if level >= 1 {
            assert_eq!(again.sync(0, size, false).unwrap(), 0, "level {level}: redundancy inconsistent");
        }
    }
}

/// Four client threads writing (some with FUA) and reading back disjoint quarters of the array;
/// returns what the array should hold.
fn four_clients(service: &ArrayService, level: i32) -> Vec<u8> {
    let size = service.handle().info().size;
    let region = size / 4;
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let h = service.handle();
            std::thread::spawn(move || {
                let base = t * region;
                let mut model = vec![0u8; region as usize];
                for i in 0..40u64 {
                    let len = 1 + (pattern(t * 1000 + i, 8).iter().map(|&b| b as u64).sum::<u64>() * 97) % 70_000;
                    let len = len.min(region);
                    let at = (i * 7919 * 13) % (region - len + 1);
                    let data = pattern(t * 1000 + i, len as usize);
                    model[at as usize..(at + len) as usize].copy_from_slice(&data);
                    h.call(BlockOp::Write { offset: base + at, data: data.into(), fua: i % 10 == 0 }).expect("write");
                    if i % 5 == 0 {
                        assert!(read(&h, base, region) == model, "level {level}: thread {t} read back differs");
                    }
                }
                (base, model)
            })
        })
        .collect();
    let mut expect = vec![0u8; size as usize];
    for t in threads {
        let (base, model) = t.join().unwrap();
        expect[base as usize..base as usize + model.len()].copy_from_slice(&model);
    }
    expect
}

/// Member files (which the io_uring backend drives directly, O_DIRECT where it can) served by
/// each backend: the same clients, zeroing, flushes and a clean stop give the same array.
#[test]
fn file_members_on_both_backends() {
    use uraid_device::service::IoBackend;
    for io in [IoBackend::Uring, IoBackend::Threads] {
        for (level, n, chunk) in [(5, 4, 16), (1, 2, 0), (10, 4, 16)] {
            let devs = file_members(&format!("service-files-{io}-{level}"), level, n, chunk);
            let config = ServiceConfig { io, queue_depth: 8, workers_per_member: 2, ..ServiceConfig::default() };
            let service = ArrayService::start(open(&devs, true), config);
            let h = service.handle();
            let size = h.info().size;
            let mut expect = four_clients(&service, level);
            // Zeroing: holes punched in whole stripes, zeros written at the edges.
            let (at, len) = (size / 3 + 1234, size / 5);
            h.call(BlockOp::Zero { offset: at, len, may_deallocate: true, fua: false }).expect("zero");
            expect[at as usize..(at + len) as usize].fill(0);
            h.call(BlockOp::Flush).expect("flush");
            assert!(read(&h, 0, size) == expect, "{io}, level {level}: array differs from what was written");
            let report = service.stop().expect("stop");
            assert!(report.failed_members.is_empty(), "{io}, level {level}: {:?}", report.failed_members);
            // Dirty marks and the like went down the members' own paths; with no spare, none
            // needed the metadata thread.
            assert!(report.metadata_ios_on_member_paths > 0, "{io}, level {level}: {report:?}");
            assert_eq!(report.metadata_ios_on_thread, 0, "{io}, level {level}: {report:?}");
            for d in &devs {
                assert!(clean_on_disk(d.as_ref()), "{io}, level {level}: {} not clean after stop", d.name());
            }
            let mut again = open(&devs, false);
            assert!(again.read(0, size).unwrap() == expect, "{io}, level {level}: reassembled contents differ");
            assert_eq!(again.sync(0, size, false).unwrap(), 0, "{io}, level {level}: redundancy inconsistent");
        }
    }
}

/// Every read policy serves mirrors (in memory and in files, over both backends): concurrent
/// clients read back what they wrote, a sequential reader (which the `split` policy reads ahead
/// of) reads the whole array right, and the stop is clean with read-ahead still in flight.
#[test]
fn every_read_policy_serves_mirrors() {
    use uraid_device::service::IoBackend;
    use uraid_engine::ReadPolicy;
    for policy in ReadPolicy::ALL {
        for io in [IoBackend::Uring, IoBackend::Threads] {
            for (level, n, chunk) in [(1, 2, 0), (1, 3, 0), (10, 4, 16)] {
                let devs = file_members(&format!("service-policy-{policy}-{io}-{level}-{n}"), level, n, chunk);
                let config = ServiceConfig { io, read_policy: policy, ..ServiceConfig::default() };
                let service = ArrayService::start(open(&devs, true), config);
                let h = service.handle();
                let size = h.info().size;
                let expect = four_clients(&service, level);
                let what = format!("{policy}, {io}, level {level} of {n}");
                let mut whole = Vec::with_capacity(size as usize);
                let step = 128 << 10;
                let mut at = 0;
                while at < size {
                    whole.extend(read(&h, at, step.min(size - at)));
                    at += step;
                }
                assert!(whole == expect, "{what}: a sequential read of the array differs");
                // A stream whose read-ahead has arrived: its next read needs no member I/O (it
                // finishes as it is submitted), and must still be answered.
                read(&h, 0, 64 << 10);
                read(&h, 64 << 10, 64 << 10);
                // (Read again behind the stream, so this read starts no read-ahead either.)
                for (offset, len) in [(128 << 10, 64 << 10), (130 << 10, 10 << 10)] {
                    std::thread::sleep(Duration::from_millis(200));
                    let (tx, rx) = std::sync::mpsc::channel();
                    h.submit(BlockOp::Read { offset, len }, Box::new(move |r| _ = tx.send(r)));
                    match rx.recv_timeout(Duration::from_secs(20)) {
                        Ok(Ok(BlockReply::Data(d))) => {
                            assert!(
                                d.to_vec()[..] == expect[offset as usize..(offset + len) as usize],
                                "{what}: read after read-ahead differs"
                            )
                        }
                        other => panic!("{what}: read at {offset} after read-ahead answered {other:?}"),
                    }
                }
                // Stop right after a stream's reads, with its read-ahead possibly in flight.
                read(&h, 192 << 10, 64 << 10);
                let report = service.stop().expect("stop");
                assert!(report.failed_members.is_empty(), "{what}: {:?}", report.failed_members);
                for d in &devs {
                    assert!(clean_on_disk(d.as_ref()), "{what}: {} not clean after stop", d.name());
                }
            }
        }
    }
}

/// The array is dirty on disk while writes are recent and clean again after the delay, as md's
/// safe mode does.
#[test]
fn dirty_while_writing_clean_when_idle() {
    let mem = members(5, 3, 16);
    let devs = as_dyn(&mem);
    let config = ServiceConfig { clean_delay: Duration::from_millis(150), ..ServiceConfig::default() };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    assert!(clean_on_disk(devs[0].as_ref()));
    h.call(BlockOp::Write { offset: 4096, data: (vec![1; 4096]).into(), fua: false }).unwrap();
    assert!(!clean_on_disk(devs[0].as_ref()), "not marked dirty before the write");
    std::thread::sleep(Duration::from_millis(600));
    assert!(devs.iter().all(|d| clean_on_disk(d.as_ref())), "not marked clean after the idle delay");
    h.call(BlockOp::Write { offset: 0, data: (vec![2; 10]).into(), fua: false }).unwrap();
    assert!(!clean_on_disk(devs[1].as_ref()));
    service.stop().unwrap();
    assert!(devs.iter().all(|d| clean_on_disk(d.as_ref())));
}

/// Without the service (`OpenArray::write`, as `uraid write` uses it), the same rule: a level
/// with redundancy is marked dirty before its first write and clean at close; linear and raid0
/// are never marked dirty, as in md, and their data is on the members after close.
#[test]
fn direct_writes_mark_only_redundant_levels_dirty() {
    for (level, chunk) in [(-1, 0), (0, 16), (1, 0), (5, 16)] {
        let mem = members(level, 3, chunk);
        let devs = as_dyn(&mem);
        let mut array = open(&devs, true);
        let data = pattern((level + 11) as u64, 70_000);
        array.write(5000, data.clone()).unwrap();
        let redundant = level > 0;
        assert_eq!(!clean_on_disk(devs[0].as_ref()), redundant, "level {level}: dirty while written");
        assert!(array.close().unwrap(), "level {level}: not clean at close");
        assert!(devs.iter().all(|d| clean_on_disk(d.as_ref())), "level {level}");
        assert!(open(&devs, false).read(5000, 70_000).unwrap() == data, "level {level}: read back differs");
    }
}

/// Zeroing reads back zeros exactly over its range, unaligned edges included; trimming leaves
/// everything outside its range alone; both keep redundancy consistent.
#[test]
fn zero_and_trim() {
    for (level, n) in [(5, 4), (6, 4), (1, 2), (10, 4), (0, 3)] {
        let mem = members(level, n, if level == 1 { 0 } else { 16 });
        let devs = as_dyn(&mem);
        let service = ArrayService::start(open(&devs, true), ServiceConfig::default());
        let h = service.handle();
        let size = h.info().size;
        let mut model = pattern(level as u64 + 50, size as usize);
        h.call(BlockOp::Write { offset: 0, data: model.clone().into(), fua: false }).unwrap();
        // Unaligned zeroing, with and without deallocation, across stripe boundaries.
        for (offset, len, may_deallocate) in
            [(1000u64, 200_000u64, true), (300_000, 5000, false), (8192 * 3 + 1, 3 * 65536, true)]
        {
            h.call(BlockOp::Zero { offset, len, may_deallocate, fua: true }).unwrap();
            model[offset as usize..(offset + len) as usize].fill(0);
            assert!(read(&h, 0, size) == model, "level {level}: zero {offset}+{len} wrong");
        }
        // Trim: outside the range nothing changes.
        let (t0, t1) = (size / 2 + 123, size / 2 + 123 + 500_000);
        h.call(BlockOp::Trim { offset: t0, len: t1 - t0 }).unwrap();
        let after = read(&h, 0, size);
        assert!(
            after[..t0 as usize] == model[..t0 as usize] && after[t1 as usize..] == model[t1 as usize..],
            "level {level}: trim touched data outside its range"
        );
        // Out of range is refused.
        assert!(matches!(
            h.call(BlockOp::Zero { offset: size - 1, len: 2, may_deallocate: true, fua: false }),
            Err(ServiceError::Engine(_))
        ));
        service.stop().unwrap();
        if level >= 1 {
            let mut again = open(&devs, false);
            assert_eq!(
                again.sync(0, size, false).unwrap(),
                0,
                "level {level}: redundancy inconsistent after zero/trim"
            );
        }
    }
}

/// A member in memory seen only through the plain device calls: its discard is not cheap (as on
/// a block device), and it never answers inline (`read_now` says it would wait, or with the
/// flag set fails).
struct Plain(Arc<MemoryDevice>, bool);

impl MemberDevice for Plain {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, o: u64, b: &mut [u8]) -> std::io::Result<()> {
        self.0.read_at(o, b)
    }
    fn read_now(&self, _: u64, _: &mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<bool> {
        if self.1 {
            return Err(std::io::Error::other("injected inline read error"));
        }
        Ok(false)
    }
    fn write_at(&self, o: u64, d: &[u8]) -> std::io::Result<()> {
        self.0.write_at(o, d)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A member whose writes fail is dropped; the array goes on degraded, the data stays readable,
/// and the survivors' superblocks record it so a later assembly leaves the member out.
#[test]
fn failing_member_is_recorded_and_service_continues() {
    let mem = members(5, 4, 16);
    let broken = Arc::new(AtomicBool::new(false));
    let mut devs = as_dyn(&mem);
    devs[2] = Arc::new(Breakable { inner: Arc::clone(&mem[2]), broken: Arc::clone(&broken), fails: Fails::All });
    let service = ArrayService::start(open(&devs, true), ServiceConfig::default());
    let h = service.handle();
    let size = h.info().size;
    let data = pattern(9, size as usize);
    h.call(BlockOp::Write { offset: 0, data: data.clone().into(), fua: false }).unwrap();
    broken.store(true, Ordering::SeqCst);
    let patch = pattern(10, 300_000);
    h.call(BlockOp::Write { offset: 77_777, data: patch.clone().into(), fua: true }).unwrap();
    let mut model = data;
    model[77_777..77_777 + patch.len()].copy_from_slice(&patch);
    assert!(read(&h, 0, size) == model, "data lost after a member failed");
    let report = service.stop().unwrap();
    assert_eq!(report.failed_members.len(), 1);
    assert_eq!(report.failed_members[0].0, "mem2");
    // The three survivors assemble without the failed member, which is now stale.
    let mut healthy = as_dyn(&mem);
    let stale = healthy.remove(2);
    let mut again = open(&healthy, false);
    assert!(again.read(0, size).unwrap() == model);
    let mut all = healthy.clone();
    all.push(stale);
    let with_stale = open(&all, false);
    assert!(with_stale.engine().degraded(), "the failed member was taken back in");
}

/// A member in memory behind a model of Linux's page cache for a file: `read_now` (an
/// `RWF_NOWAIT` read) of pages not cached starts reading them in, as the kernel's read-ahead
/// does, and says it would wait; `read_if_cached` starts nothing; `read_at` reads in what is
/// missing and waits for it. `device_pages` counts the pages read from the device.
struct PageCached {
    inner: Arc<MemoryDevice>,
    cached: std::sync::Mutex<std::collections::HashSet<u64>>,
    device_pages: std::sync::atomic::AtomicU64,
}

impl PageCached {
    fn new(inner: Arc<MemoryDevice>) -> PageCached {
        PageCached { inner, cached: Default::default(), device_pages: Default::default() }
    }

    fn pages(offset: u64, len: usize) -> std::ops::Range<u64> {
        offset / 4096..(offset + len as u64).div_ceil(4096)
    }

    /// Whether every page of the range is cached; with `read_in`, the missing ones are read in.
    fn in_cache(&self, offset: u64, len: usize, read_in: bool) -> bool {
        let mut cached = self.cached.lock().unwrap();
        let mut all = true;
        for page in Self::pages(offset, len) {
            if !cached.contains(&page) {
                all = false;
                if read_in {
                    cached.insert(page);
                    self.device_pages.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        all
    }

    /// The cache emptied, as after a drop of the file's pages; the count starts again.
    fn drop_cache(&self) {
        self.cached.lock().unwrap().clear();
        self.device_pages.store(0, Ordering::SeqCst);
    }
}

impl MemberDevice for PageCached {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, o: u64, b: &mut [u8]) -> std::io::Result<()> {
        self.in_cache(o, b.len(), true);
        self.inner.read_at(o, b)
    }
    fn read_now(&self, o: u64, b: &mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<bool> {
        if !self.in_cache(o, b.len(), true) {
            return Ok(false);
        }
        self.inner.read_now(o, b)
    }
    fn read_if_cached(&self, o: u64, b: &mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<bool> {
        if !self.in_cache(o, b.len(), false) {
            return Ok(false);
        }
        self.inner.read_now(o, b)
    }
    fn write_at(&self, o: u64, d: &[u8]) -> std::io::Result<()> {
        self.cached.lock().unwrap().extend(Self::pages(o, d.len()));
        self.inner.write_at(o, d)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A 4 KiB read of data no member holds in memory costs one device read on mirrors as on raid0:
/// the inline attempt asks each copy whether it has the bytes, which starts no read of the
/// copies the read policy then does not choose (it cost a 4-way mirror four device reads, and
/// a 2-way one two). The same reads again are served inline, from the copy that read them in.
/// After a run of such hits the first copy is read without asking first, so a new burst of
/// misses costs one device read more at most, on that copy; then copies are asked again.
#[test]
fn mirror_reads_missing_the_cache_read_one_copy() {
    for (level, n, chunk) in [(0, 4, 16), (1, 2, 0), (1, 4, 0), (10, 4, 16)] {
        let cached: Vec<Arc<PageCached>> =
            members(level, n, chunk).into_iter().map(|m| Arc::new(PageCached::new(m))).collect();
        let devs: Vec<Arc<dyn MemberDevice>> = cached.iter().map(|d| Arc::clone(d) as Arc<dyn MemberDevice>).collect();
        let service = ArrayService::start(open(&devs, false), ServiceConfig::default());
        let h = service.handle();
        let pages = h.info().size / 4096;
        for d in &cached {
            d.drop_cache();
        }
        let device_pages = || cached.iter().map(|d| d.device_pages.load(Ordering::SeqCst)).sum::<u64>();
        // Distinct pages spread over the array, so over every member and chunk: even ones
        // first, odd ones for the last burst.
        let offsets: Vec<u64> = (0..64u64).map(|i| (i * 7919 % (pages / 2)) * 8192).collect();
        for &at in &offsets {
            read(&h, at, 4096);
        }
        assert_eq!(device_pages(), 64, "level {level}, {n} members: pages read from the devices");
        for &at in offsets.iter().chain(&offsets) {
            read(&h, at, 4096);
        }
        assert_eq!(device_pages(), 64, "level {level}, {n} members: reads of cached data read the devices");
        for &at in &offsets {
            read(&h, at + 4096, 4096);
        }
        let burst = device_pages() - 64;
        assert!((64..=65).contains(&burst), "level {level}, {n} members: 64 misses after hits read {burst} pages");
        let report = service.stop().unwrap();
        assert_eq!(report.inline_reads, 128, "level {level}, {n} members: reads of cached data");
    }
}

/// Small reads are answered on the client's thread while the array is whole (inline reads), and
/// never from a member that missed a write: once a write has failed a member out of the array,
/// every later read goes through the engine, which rebuilds the data from the others. The
/// failing member here still answers `read_now` with what it held, as a disk that stops taking
/// writes may go on reading: an inline read of it would return the old data. On the mirrors it
/// is slot 0, the copy inline reads try first.
#[test]
fn a_member_that_missed_a_write_is_never_read_inline() {
    for level in [1, 4, 5, 6, 10] {
        let mem = members(level, 4, if level == 1 { 0 } else { 16 });
        let broken = Arc::new(AtomicBool::new(false));
        let mut devs = as_dyn(&mem);
        let stale = if level == 1 || level == 10 { 0 } else { 1 };
        devs[stale] =
            Arc::new(Breakable { inner: Arc::clone(&mem[stale]), broken: Arc::clone(&broken), fails: Fails::Writes });
        let service = ArrayService::start(open(&devs, true), ServiceConfig::default());
        let h = service.handle();
        let region = 256 << 10;
        let old = pattern(20, region);
        h.call(BlockOp::Write { offset: 0, data: old.clone().into(), fua: false }).unwrap();
        for at in (0..region).step_by(4096) {
            assert!(read(&h, at as u64, 4096) == old[at..at + 4096], "level {level}: inline read at {at} differs");
        }
        broken.store(true, Ordering::SeqCst);
        let new = pattern(21, region);
        h.call(BlockOp::Write { offset: 0, data: new.clone().into(), fua: false }).unwrap();
        for at in (0..region).step_by(4096) {
            assert!(
                read(&h, at as u64, 4096) == new[at..at + 4096],
                "level {level}: read at {at} after the failure returned old data"
            );
        }
        let report = service.stop().unwrap();
        assert_eq!(
            report.inline_reads,
            (region / 4096) as u64,
            "level {level}: reads answered inline, before the failure only"
        );
        assert_eq!(report.failed_members.len(), 1, "level {level}");
    }
}

/// Mirrors whose copies may disagree (found dirty, no resync yet) read md's first copy through
/// the engine: nothing is read inline until the resync has run.
#[test]
fn mirrors_owing_a_resync_are_not_read_inline() {
    for level in [1, 10] {
        let mem = members_marked(level, 4, if level == 1 { 0 } else { 16 }, false);
        let devs = as_dyn(&mem);
        let config = ServiceConfig { auto_resync: false, ..ServiceConfig::default() };
        let service = ArrayService::start(open(&devs, true), config);
        let h = service.handle();
        for at in (0..64u64).map(|i| i * 4096) {
            read(&h, at, 4096);
        }
        h.start_sync(SyncAction::Resync).unwrap();
        h.wait_idle().unwrap();
        for at in (0..64u64).map(|i| i * 4096) {
            read(&h, at, 4096);
        }
        let report = service.stop().unwrap();
        assert_eq!(report.inline_reads, 64, "level {level}: inline reads before / after the resync");
    }
}

/// On linear and raid0, small writes without FUA are done on the client's thread too; the data
/// lands where the engine would have put it (a fresh assembly reads it back), the superblocks
/// are never marked dirty for them (md marks only levels with redundancy dirty), FUA writes and
/// writes above the limit go through the engine, and a read-only array refuses them all.
#[test]
fn linear_and_raid0_writes_are_done_inline() {
    for level in [-1, 0] {
        let mem = members(level, 3, 16);
        let devs = as_dyn(&mem);
        let config = ServiceConfig { inline_max: 64 << 10, ..ServiceConfig::default() };
        let service = ArrayService::start(open(&devs, true), config);
        let h = service.handle();
        let size = h.info().size;
        let mut model = vec![0u8; size as usize];
        let mut rng = 0x1234_5678u64;
        let mut next = |bound: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % bound
        };
        let (mut small, mut fua, mut large) = (0u64, 0u64, 0u64);
        for i in 0..300u64 {
            let len = match i % 10 {
                9 => 100_000 + next(50_000),
                _ => 1 + next(20_000),
            };
            let offset = next(size - len);
            let data = pattern(i, len as usize);
            let with_fua = i % 7 == 3;
            h.call(BlockOp::Write { offset, data: data.clone().into(), fua: with_fua }).unwrap();
            model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
            match (with_fua, len > 64 << 10) {
                (true, _) => fua += 1,
                (false, true) => large += 1,
                (false, false) => small += 1,
            }
            if i == 0 {
                assert!(devs.iter().all(|d| clean_on_disk(d.as_ref())), "level {level}: marked dirty for a write");
            }
        }
        assert!(read(&h, 0, size) == model, "level {level}: data differs while serving");
        let report = service.stop().unwrap();
        assert!(fua > 0 && large > 0);
        assert_eq!(report.inline_writes, small, "level {level}: writes done inline (small, no FUA, only)");
        let mut again = open(&devs, false);
        assert!(again.read(0, size).unwrap() == model, "level {level}: data differs after a fresh assembly");
        // Read-only: refused, inline or not.
        let service = ArrayService::start(open(&devs, false), ServiceConfig::default());
        let h = service.handle();
        assert_eq!(
            h.call(BlockOp::Write { offset: 0, data: vec![1; 512].into(), fua: false }),
            Err(ServiceError::ReadOnly)
        );
        assert_eq!(service.stop().unwrap().inline_writes, 0);
    }
}

/// A limit above 512 KiB lets reads that long be answered inline, but never writes: those go
/// to the engine (larger inline writes measured slower).
#[test]
fn inline_writes_stop_at_512k_whatever_the_limit() {
    let mem = members(0, 3, 16);
    let devs = as_dyn(&mem);
    let config = ServiceConfig { inline_max: 1 << 20, ..ServiceConfig::default() };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    let long = pattern(7, 600 << 10);
    let short = pattern(8, 500 << 10);
    h.call(BlockOp::Write { offset: 0, data: long.clone().into(), fua: false }).unwrap();
    h.call(BlockOp::Write { offset: 1 << 20, data: short.clone().into(), fua: false }).unwrap();
    assert!(read(&h, 0, long.len() as u64) == long);
    assert!(read(&h, 1 << 20, short.len() as u64) == short);
    let report = service.stop().unwrap();
    assert_eq!(report.inline_writes, 1, "only the write within 512 KiB is done inline");
    assert_eq!(report.inline_reads, 2, "both reads are within the 1 MiB limit");
}

/// A member that cannot answer inline (an error, or data not in memory) sends the read to the
/// engine, which reads it the usual way: the client sees the data, never the inline error.
#[test]
fn reads_a_member_refuses_inline_go_through_the_engine() {
    for fails in [true, false] {
        let mem = members(5, 4, 16);
        let mut devs = as_dyn(&mem);
        devs[2] = Arc::new(Plain(Arc::clone(&mem[2]), fails));
        let service = ArrayService::start(open(&devs, true), ServiceConfig::default());
        let h = service.handle();
        let data = pattern(40, 96 << 10);
        h.call(BlockOp::Write { offset: 0, data: data.clone().into(), fua: false }).unwrap();
        let mut inline = 0;
        for i in 0..24usize {
            assert!(
                read(&h, (i * 4096) as u64, 4096) == data[i * 4096..(i + 1) * 4096],
                "block {i} (read_now fails: {fails})"
            );
            // Chunks are 8 KiB over three data members: which member holds block i.
            let chunk = i / 2;
            let stripe = chunk / 3;
            let parity = 3 - stripe % 4;
            let member = (parity + 1 + chunk % 3) % 4;
            inline += usize::from(member != 2);
        }
        let report = service.stop().unwrap();
        assert_eq!(report.failed_members.len(), 0, "an inline refusal failed a member");
        assert_eq!(
            report.inline_reads, inline as u64,
            "reads of the other members are inline (read_now fails: {fails})"
        );
    }
}

/// Reads handed over as pipes (`read_spliced`, here from member files whose pages are cached)
/// hold exactly what a read returns, on every level, at any alignment, up to what a pipe holds.
/// A read the pipe cannot hold, a degraded array and an inline limit of 0 give `None`, and the
/// read then goes the usual way.
#[test]
fn spliced_reads_hold_what_reads_return() {
    use uraid_device::service::{IoBackend, ManageOp};
    for (level, n, chunk) in [(-1, 3, 0), (0, 4, 16), (1, 2, 0), (5, 4, 16), (6, 5, 16), (10, 4, 16)] {
        let devs = file_members(&format!("service-splice-{level}"), level, n, chunk);
        let config = ServiceConfig { io: IoBackend::Threads, ..ServiceConfig::default() };
        let service = ArrayService::start(open(&devs, true), config);
        let h = service.handle();
        let data = pattern((50 + level) as u64, 3 << 20);
        h.call(BlockOp::Write { offset: 0, data: data.clone().into(), fua: false }).unwrap();
        for (at, len) in
            [(0usize, 65536usize), (513, 200_000), (12289, (1 << 20) - 8192), (1 << 20, 1 << 20), (8191, 4097)]
        {
            let mut piped = h
                .read_spliced(at as u64, len as u64)
                .unwrap_or_else(|| panic!("level {level}: {len} at {at} not spliced"));
            assert_eq!(piped.len(), len);
            assert!(
                piped.read_to_vec().unwrap() == data[at..at + len],
                "level {level}: {len} bytes spliced at {at} differ"
            );
        }
        // 1 MiB from inside a page touches 257 pages at least: one more than a pipe has slots.
        assert!(h.read_spliced(513, 1 << 20).is_none(), "level {level}: a read the pipe cannot hold");
        assert!(read(&h, 513, 1 << 20) == data[513..513 + (1 << 20)]);
        if level >= 1 {
            h.manage(ManageOp::Fail { member: devs[n - 1].name().to_string(), force: false }).unwrap();
            assert!(h.read_spliced(0, 65536).is_none(), "level {level}: spliced while degraded");
            assert!(read(&h, 0, 65536) == data[..65536], "level {level}: degraded read");
        }
        let report = service.stop().unwrap();
        assert_eq!(report.spliced_reads, 5, "level {level}");
    }
    let devs = file_members("service-splice-off", 0, 4, 16);
    let config = ServiceConfig { io: IoBackend::Threads, inline_max: 0, ..ServiceConfig::default() };
    let service = ArrayService::start(open(&devs, true), config);
    assert!(service.handle().read_spliced(0, 65536).is_none(), "spliced with inline requests off");
    service.stop().unwrap();
}

/// Spliced reads held by a slow client use up the pipes (at most `MAX_PIPES`, fewer where the
/// kernel's pipe-memory limit says so): the next spliced read is refused and the read is served
/// the usual way; once one is handed back, spliced reads work again.
#[test]
fn spliced_reads_fall_back_when_every_pipe_is_taken() {
    use uraid_device::service::IoBackend;
    use uraid_device::splice::MAX_PIPES;
    let devs = file_members("service-splice-pipes", 0, 4, 16);
    let config = ServiceConfig { io: IoBackend::Threads, ..ServiceConfig::default() };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    let data = pattern(77, 1 << 20);
    h.call(BlockOp::Write { offset: 0, data: data.clone().into(), fua: false }).unwrap();
    let mut held = Vec::new();
    while let Some(piped) = h.read_spliced(0, 65536) {
        held.push(piped);
        assert!(held.len() <= MAX_PIPES, "more than {MAX_PIPES} pipes open");
    }
    assert!(!held.is_empty(), "no spliced read at all");
    assert!(read(&h, 4096, 65536) == data[4096..4096 + 65536], "the refused read, served the usual way");
    let mut first = held.remove(0);
    assert!(first.read_to_vec().unwrap() == data[..65536], "a held pipe's bytes");
    drop(first);
    let mut again = h.read_spliced(8192, 65536).expect("a pipe handed back is used again");
    assert!(again.read_to_vec().unwrap() == data[8192..8192 + 65536]);
    drop(held);
    service.stop().unwrap();
}

/// With `inline_max: 0` every read goes through the engine.
#[test]
fn inline_reads_can_be_turned_off() {
    let mem = members(5, 4, 16);
    let devs = as_dyn(&mem);
    let service = ArrayService::start(open(&devs, true), ServiceConfig { inline_max: 0, ..ServiceConfig::default() });
    let h = service.handle();
    let data = pattern(30, 65536);
    h.call(BlockOp::Write { offset: 4096, data: data.clone().into(), fua: false }).unwrap();
    assert!(read(&h, 4096, 65536) == data);
    let report = service.stop().unwrap();
    assert_eq!((report.requests, report.inline_reads), (2, 0));
}

/// A read-only service refuses writes and leaves the superblocks untouched.
#[test]
fn read_only_refuses_writes() {
    let mem = members(1, 2, 0);
    let devs = as_dyn(&mem);
    let before: Vec<Vec<u8>> = mem.iter().map(|m| m.snapshot()).collect();
    let service = ArrayService::start(open(&devs, false), ServiceConfig::default());
    let h = service.handle();
    assert_eq!(h.call(BlockOp::Write { offset: 0, data: vec![1].into(), fua: false }), Err(ServiceError::ReadOnly));
    assert_eq!(h.call(BlockOp::Trim { offset: 0, len: 4096 }), Err(ServiceError::ReadOnly));
    assert_eq!(read(&h, 0, 4096), vec![0u8; 4096]);
    service.stop().unwrap();
    let after: Vec<Vec<u8>> = mem.iter().map(|m| m.snapshot()).collect();
    assert!(before == after, "a read-only service changed a member");
}

/// Stop waits for every accepted request; later submissions are refused, not lost silently.
#[test]
fn stop_finishes_accepted_requests() {
    let mem = members(6, 4, 16);
    let devs = as_dyn(&mem);
    let service = ArrayService::start(open(&devs, true), ServiceConfig::default());
    let h = service.handle();
    let (tx, rx) = crossbeam_channel::bounded(64);
    for i in 0..64u64 {
        let tx = tx.clone();
        h.submit(
            BlockOp::Write { offset: i * 65536, data: (pattern(i, 65536)).into(), fua: false },
            Box::new(move |r| tx.send(r).unwrap()),
        );
    }
    service.stop().unwrap();
    let results: Vec<_> = rx.try_iter().collect();
    assert_eq!(results.len(), 64);
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(h.call(BlockOp::Flush), Err(ServiceError::Stopping));
    let mut again = open(&devs, false);
    for i in 0..64u64 {
        assert!(again.read(i * 65536, 65536).unwrap() == pattern(i, 65536));
    }
}

/// Requests that race the stop are answered too: every callback is called, with data or with
/// "stopping", including those of requests still waiting in the engine thread's inbox when it
/// ends. A client keeping 64 requests in flight while another thread stops the service has some
/// of them waiting there at that moment.
#[test]
fn requests_racing_the_stop_are_all_answered() {
    use std::sync::atomic::AtomicU64;
    for round in 0..5 {
        let mem = members(5, 4, 16);
        let devs = as_dyn(&mem);
        // Nothing inline: every read goes through the inbox.
        let config = ServiceConfig { inline_max: 0, ..ServiceConfig::default() };
        let service = ArrayService::start(open(&devs, true), config);
        let h = service.handle();
        let answered = Arc::new(AtomicU64::new(0));
        let stopping_seen = Arc::new(AtomicBool::new(false));
        let client = {
            let (answered, stopping_seen) = (Arc::clone(&answered), Arc::clone(&stopping_seen));
            std::thread::spawn(move || {
                let mut submitted = 0u64;
                // Until well after the first "stopping": the engine thread is then finishing,
                // or gone.
                let mut after_stop = 0;
                while after_stop < 20_000 {
                    if stopping_seen.load(Ordering::Relaxed) {
                        after_stop += 1;
                    }
                    // At most 64 unanswered, so the inbox holds a few at any moment.
                    while submitted - answered.load(Ordering::Relaxed) >= 64 && after_stop == 0 {
                        std::thread::yield_now();
                    }
                    let (answered, stopping_seen) = (Arc::clone(&answered), Arc::clone(&stopping_seen));
                    h.submit(
                        BlockOp::Read { offset: (submitted % 256) * 4096, len: 4096 },
                        Box::new(move |r| {
                            match r {
                                Ok(_) => {}
                                Err(ServiceError::Stopping) => stopping_seen.store(true, Ordering::Relaxed),
                                Err(e) => panic!("read failed: {e}"),
                            }
                            answered.fetch_add(1, Ordering::Relaxed);
                        }),
                    );
                    submitted += 1;
                }
                submitted
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        service.stop().unwrap();
        let submitted = client.join().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while answered.load(Ordering::Relaxed) < submitted && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(answered.load(Ordering::Relaxed), submitted, "round {round}: requests never answered");
    }
}

/// An array found dirty (unclean shutdown) may have parity that disagrees with its data: the
/// service writes it, but never marks it clean, idle or at stop, since no resync has run.
#[test]
fn dirty_array_is_never_marked_clean_without_a_resync() {
    let mem = members_marked(5, 3, 16, false);
    let devs = as_dyn(&mem);
    let config =
        ServiceConfig { clean_delay: Duration::from_millis(50), auto_resync: false, ..ServiceConfig::default() };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    h.call(BlockOp::Write { offset: 0, data: (vec![3; 100_000]).into(), fua: false }).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!clean_on_disk(devs[0].as_ref()), "marked clean while idle without a resync");
    let report = service.stop().unwrap();
    assert!(!report.clean && report.resync_needed);
    assert!(devs.iter().all(|d| !clean_on_disk(d.as_ref())), "marked clean at stop without a resync");
    // A level without redundancy has nothing to resync: it is marked clean as usual.
    let mem = members_marked(0, 2, 16, false);
    let devs = as_dyn(&mem);
    let service = ArrayService::start(open(&devs, true), ServiceConfig::default());
    service.handle().call(BlockOp::Write { offset: 0, data: (vec![3; 1000]).into(), fua: false }).unwrap();
    let report = service.stop().unwrap();
    assert!(report.clean && !report.resync_needed);
    assert!(devs.iter().all(|d| clean_on_disk(d.as_ref())));
}

/// On members whose discard may mean writing zeros everywhere (block devices), an advisory trim
/// does nothing; zeroing still zeroes.
#[test]
fn trim_is_skipped_where_discard_is_expensive() {
    let mem = members(1, 2, 0);
    let devs: Vec<Arc<dyn MemberDevice>> =
        mem.iter().map(|m| Arc::new(Plain(Arc::clone(m), false)) as Arc<dyn MemberDevice>).collect();
    let service = ArrayService::start(open(&devs, true), ServiceConfig::default());
    let h = service.handle();
    assert!(!h.info().cheap_discard);
    h.call(BlockOp::Write { offset: 0, data: (vec![9; 1 << 20]).into(), fua: false }).unwrap();
    h.call(BlockOp::Trim { offset: 0, len: 1 << 19 }).unwrap();
    assert_eq!(read(&h, 0, 1 << 19), vec![9; 1 << 19], "trim touched members whose discard is expensive");
    h.call(BlockOp::Zero { offset: 0, len: 1 << 19, may_deallocate: true, fua: false }).unwrap();
    assert_eq!(read(&h, 0, 1 << 20)[..1 << 19], vec![0; 1 << 19][..]);
    service.stop().unwrap();
}

/// An array found dirty is resynced by itself; the resync makes parity consistent (a stripe
/// left torn is rewritten), and then the array is marked clean when idle.
#[test]
fn dirty_array_is_resynced_then_marked_clean() {
    for (level, n) in [(5, 4), (6, 4), (1, 2), (10, 4)] {
        let mem = members_marked(level, n, if level == 1 { 0 } else { 16 }, false);
        let devs = as_dyn(&mem);
        corrupt(&devs, 1, 3000);
        let config = ServiceConfig { clean_delay: Duration::from_millis(50), ..ServiceConfig::default() };
        let service = ArrayService::start(open(&devs, true), config);
        let h = service.handle();
        let status = h.wait_idle().unwrap();
        assert!(!status.needs_resync, "level {level}: {:?}", status.last_sync);
        assert!(status.last_sync.as_deref().unwrap_or("").starts_with("resync completed"), "{:?}", status.last_sync);
        // Marked clean once idle for the clean delay; a loaded machine may take a while longer.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !devs.iter().all(|d| clean_on_disk(d.as_ref())) {
            assert!(std::time::Instant::now() < deadline, "level {level}: not marked clean after the resync");
            std::thread::sleep(Duration::from_millis(20));
        }
        h.start_sync(SyncAction::Check).unwrap();
        let status = h.wait_idle().unwrap();
        assert_eq!(status.mismatch_sectors, 0, "level {level}: resync left mismatches");
        service.stop().unwrap();
    }
}

/// A check, a repair and a stop finish when member I/O goes through rings the engine thread
/// drives (their completions, not messages, must move the pass on).
#[test]
fn passes_and_stop_finish_over_io_uring() {
    use uraid_device::service::IoBackend;
    let devs = file_members("service-uring-passes", 5, 4, 16);
    let config = ServiceConfig { io: IoBackend::Uring, ..ServiceConfig::default() };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    let size = h.info().size;
    h.call(BlockOp::Write { offset: 0, data: (pattern(9, size as usize)).into(), fua: true }).unwrap();
    for action in [SyncAction::Check, SyncAction::Repair, SyncAction::Check] {
        h.start_sync(action).unwrap();
        let waiter = h.clone();
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = tx.send(waiter.wait_idle());
        });
        let status = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the pass never finished").unwrap();
        assert_eq!(status.mismatch_sectors, 0, "{action}: {:?}", status.last_sync);
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(service.stop());
    });
    let report = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the stop never finished").unwrap();
    assert!(report.clean);
}

/// check counts mismatched sectors and changes nothing; repair fixes them; a second check finds
/// none. Passes cannot run where md cannot run them.
#[test]
fn check_and_repair_online() {
    let mem = members(5, 4, 16);
    let devs = as_dyn(&mem);
    let service = ArrayService::start(open(&devs, true), ServiceConfig::default());
    let h = service.handle();
    let size = h.info().size;
    h.call(BlockOp::Write { offset: 0, data: (pattern(4, size as usize)).into(), fua: true }).unwrap();
    corrupt(&devs, 2, 70_000);
    // The data areas: the superblocks may be marked clean meanwhile.
    let data_start = probe(mem[0].as_ref()).unwrap().unwrap().superblock.info().data_offset as usize * 512;
    let before: Vec<Vec<u8>> = mem.iter().map(|m| m.snapshot()[data_start..].to_vec()).collect();
    assert_eq!(h.status().unwrap().passes_ended, 0);
    h.start_sync(SyncAction::Check).unwrap();
    let e = h.start_sync(SyncAction::Repair).unwrap_err();
    assert_eq!(e, SyncError::AlreadyRunning(SyncAction::Check));
    assert!(e.to_string().contains("already running"), "{e}");
    let status = h.wait_idle().unwrap();
    assert_eq!(status.mismatch_sectors, 8, "{:?}", status.last_sync);
    let after: Vec<Vec<u8>> = mem.iter().map(|m| m.snapshot()[data_start..].to_vec()).collect();
    assert!(before == after, "check changed a member");
    h.start_sync(SyncAction::Repair).unwrap();
    assert_eq!(h.wait_idle().unwrap().mismatch_sectors, 8);
    h.start_sync(SyncAction::Check).unwrap();
    let last = h.wait_idle().unwrap();
    assert_eq!(last.mismatch_sectors, 0);
    // Every pass that ended is counted, so a watcher that looked only before and after each
    // one still sees it happen.
    assert_eq!(last.passes_ended, 3, "{:?}", last.last_sync);
    service.stop().unwrap();

    let r0 = members(0, 2, 16);
    let service = ArrayService::start(open(&as_dyn(&r0), true), ServiceConfig::default());
    let e = service.handle().start_sync(SyncAction::Check).unwrap_err();
    assert!(matches!(e, SyncError::NoRedundancy { .. }) && e.to_string().contains("no redundancy"), "{e}");
    service.stop().unwrap();
    let degraded = as_dyn(&mem)[..3].to_vec();
    let service = ArrayService::start(open(&degraded, true), ServiceConfig::default());
    let e = service.handle().start_sync(SyncAction::Check).unwrap_err();
    assert!(matches!(e, SyncError::Degraded(_)) && e.to_string().contains("degraded"), "{e}");
    service.stop().unwrap();
}

/// A pass keeps to its speed limit, reports progress while it runs, and stops on `idle`.
#[test]
fn passes_are_throttled_reported_and_interruptible() {
    let mem = members(1, 2, 0);
    let devs = as_dyn(&mem);
    let limit = 8_000_000;
    let config = ServiceConfig {
        speed: SpeedLimits { min_bytes_per_sec: 1_000_000, max_bytes_per_sec: limit },
        ..ServiceConfig::default()
    };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    let size = h.info().size;
    let started = std::time::Instant::now();
    h.start_sync(SyncAction::Check).unwrap();
    std::thread::sleep(Duration::from_millis(250));
    let running = h.status().unwrap().sync.expect("check still running at 8 MB/s");
    assert!(running.done_bytes > 0 && running.done_bytes < running.total_bytes, "{running:?}");
    assert!(running.bytes_per_sec <= limit * 3 / 2, "{running:?}");
    h.wait_idle().unwrap();
    let secs = started.elapsed().as_secs_f64();
    assert!(secs >= size as f64 / limit as f64 * 0.8, "{size} bytes checked in {secs:.2} s, over the limit");

    h.start_sync(SyncAction::Check).unwrap();
    h.idle().unwrap();
    let status = h.wait_idle().unwrap();
    assert!(status.sync.is_none());
    assert_eq!(status.passes_ended, 2, "a pass cut short counts as ended");
    assert!(status.last_sync.unwrap_or_default().contains("interrupted"));
    service.stop().unwrap();
}

/// A request's callback runs on the engine thread. One that submits another request while the
/// inbox is full must not wait for room, which only the engine thread makes: the request is
/// taken all the same, and everything is answered.
#[test]
fn a_callback_may_submit_into_a_full_inbox() {
    let mem = members(5, 4, 16);
    let devs = as_dyn(&mem);
    let config = ServiceConfig { inline_max: 0, ..ServiceConfig::default() };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    let (entered_tx, entered_rx) = crossbeam_channel::bounded::<()>(1);
    let (go_tx, go_rx) = crossbeam_channel::bounded::<()>(1);
    let (done_tx, done_rx) = crossbeam_channel::bounded::<Result<(), ServiceError>>(INBOX_CAPACITY + 1);
    let (h2, flushed) = (h.clone(), done_tx.clone());
    h.submit(
        BlockOp::Read { offset: 0, len: 4096 },
        Box::new(move |r| {
            r.unwrap();
            // Hold the engine thread here until the inbox is full.
            entered_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            h2.submit(BlockOp::Flush, Box::new(move |r| flushed.send(r.map(|_| ())).unwrap()));
        }),
    );
    entered_rx.recv_timeout(Duration::from_secs(20)).expect("the first read answered");
    for i in 0..INBOX_CAPACITY as u64 {
        let done = done_tx.clone();
        h.submit(
            BlockOp::Read { offset: (i % 256) * 4096, len: 4096 },
            Box::new(move |r| done.send(r.map(|_| ())).unwrap()),
        );
    }
    go_tx.send(()).unwrap();
    for n in 0..=INBOX_CAPACITY {
        let r = done_rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("{n} answered, then none"));
        assert_eq!(r, Ok(()));
    }
    service.stop().unwrap();
}

/// With member I/O threads kept to one I/O at a time, far more member I/O than that is in flight:
/// the rest waits on the engine thread's side, and every request completes.
#[test]
fn member_io_beyond_the_queue_depth_waits_its_turn() {
    let mem = members(5, 4, 16);
    let devs = as_dyn(&mem);
    let config = ServiceConfig {
        io: IoBackend::Threads,
        queue_depth: 1,
        workers_per_member: 1,
        inline_max: 0,
        ..ServiceConfig::default()
    };
    let service = ArrayService::start(open(&devs, true), config);
    let h = service.handle();
    let (tx, rx) = crossbeam_channel::bounded(256);
    for i in 0..256u64 {
        let tx = tx.clone();
        let data = pattern(i, 8192);
        h.submit(
            BlockOp::Write { offset: i * 8192, data: data.into(), fua: false },
            Box::new(move |r| tx.send(r).unwrap()),
        );
    }
    for _ in 0..256 {
        rx.recv_timeout(Duration::from_secs(20)).expect("a write answered").unwrap();
    }
    for i in 0..256u64 {
        assert!(read(&h, i * 8192, 8192) == pattern(i, 8192), "block {i}");
    }
    let report = service.stop().unwrap();
    assert!(report.failed_members.is_empty());
}
