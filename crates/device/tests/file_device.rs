//! `FileDevice`'s reads into uninitialised buffers and vectored writes.

use bytes::Bytes;
use uraid_device::{FileDevice, MemberDevice};
use uraid_engine::IoBuf;

#[test]
fn vectored_writes_and_unzeroed_reads_round_trip() {
    let dir = uraid_testkit::scratch_dir("file-device-vectored");
    let path = dir.join("member.img");
    std::fs::write(&path, vec![0xaau8; 1 << 20]).unwrap();
    let dev = FileDevice::open(&path, true).unwrap();

    let a = uraid_testkit::noise(1, 5000);
    let b = uraid_testkit::noise(2, 70_000);
    let c = uraid_testkit::noise(3, 3);
    let mut data = IoBuf::new();
    for p in [&a, &b, &c] {
        data.push(Bytes::copy_from_slice(p));
    }
    dev.write_pieces(4096 + 17, &data).unwrap();

    let got = dev.read_buf(4096, 17 + data.len() + 10).unwrap();
    assert!(got[..17].iter().all(|&x| x == 0xaa), "bytes before the write kept");
    assert_eq!(&got[17..17 + a.len()], &a[..]);
    assert_eq!(&got[17 + a.len()..17 + a.len() + b.len()], &b[..]);
    assert_eq!(&got[17 + a.len() + b.len()..17 + data.len()], &c[..]);
    assert!(got[17 + data.len()..].iter().all(|&x| x == 0xaa), "bytes after the write kept");

    // Past the end: refused, nothing written.
    assert!(dev.read_buf((1 << 20) - 10, 11).is_err());
    assert!(dev.write_pieces((1 << 20) - 10, &data).is_err());
    assert!(dev.read_buf((1 << 20) - 10, 10).unwrap().iter().all(|&x| x == 0xaa));
    assert!(dev.read_buf(0, 0).unwrap().is_empty());
}

/// More pieces than one vectored write may take, and a member that shrank under us.
#[test]
fn many_pieces_and_a_short_file() {
    let dir = uraid_testkit::scratch_dir("file-device-many");
    let path = dir.join("member.img");
    std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    let dev = FileDevice::open(&path, true).unwrap();
    let mut data = IoBuf::new();
    let mut expect = Vec::new();
    for i in 0..2500u32 {
        let piece = vec![(i % 251) as u8; 1 + (i as usize % 7)];
        expect.extend_from_slice(&piece);
        data.push(Bytes::from(piece));
    }
    assert!(data.piece_count() > uraid_device::member::IOV_MAX);
    dev.write_pieces(3, &data).unwrap();
    assert_eq!(dev.read_buf(3, expect.len()).unwrap(), expect);

    // The file is cut short behind the device's back: the read says so, never zero fills.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(4096).unwrap();
    let err = dev.read_buf(0, 8192).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    assert!(err.to_string().contains("short read at byte 4096"), "{err}");
}

const SHM: &str = "/dev/shm";

/// A scratch directory on the build's file system, and one on tmpfs where the machine has
/// `/dev/shm` (removed by [`remove_memory_dir`]).
fn disk_and_memory_dirs(name: &str) -> Vec<std::path::PathBuf> {
    let mut dirs = vec![uraid_testkit::scratch_dir(&format!("file-device-{name}"))];
    if std::path::Path::new(SHM).is_dir() {
        let d = std::path::Path::new(SHM).join(format!("uraid-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        dirs.push(d);
    }
    dirs
}

fn remove_memory_dir(dirs: &[std::path::PathBuf]) {
    if let Some(d) = dirs.get(1) {
        std::fs::remove_dir_all(d).unwrap();
    }
}

/// `data` written to `member.img` in `dir`, synced and dropped from the page cache: the file,
/// the device over it, and whether the device takes its file system for memory (tmpfs).
fn dropped_member(dir: &std::path::Path, data: &[u8]) -> (std::fs::File, FileDevice, bool) {
    use std::os::fd::AsRawFd;
    let path = dir.join("member.img");
    std::fs::write(&path, data).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    file.sync_all().unwrap();
    // SAFETY: an advisory call on a descriptor we own.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let dev = FileDevice::open(&path, false).unwrap();
    let in_memory = dev.io_handle().expect("a file has descriptors").in_memory;
    (file, dev, in_memory)
}

/// `read_now` reads what is in memory and says when it would have to wait: on tmpfs always in
/// memory; on a disk file system, pages dropped from the page cache are refused (or read, if the
/// kernel kept them), never read wrong, and pages just read are served.
#[test]
fn read_now_answers_only_from_memory() {
    use std::mem::MaybeUninit;
    let read_now = |dev: &FileDevice, offset: u64, len: usize| -> Option<Vec<u8>> {
        let mut buf = vec![MaybeUninit::<u8>::uninit(); len];
        match dev.read_now(offset, &mut buf).expect("read_now") {
            // SAFETY: `Ok(true)` means every byte was filled.
            true => Some(buf.into_iter().map(|b| unsafe { b.assume_init() }).collect()),
            false => None,
        }
    };
    let data = uraid_testkit::noise(7, 1 << 20);
    let dirs = disk_and_memory_dirs("read-now");
    let shm = std::path::Path::new(SHM);
    for dir in &dirs {
        let (_file, dev, in_memory) = dropped_member(dir, &data);
        assert_eq!(in_memory, dir.starts_with(shm), "{}: memory file system misjudged", dir.display());
        assert_eq!(dev.flush_is_noop(), in_memory, "{}: only a file in memory needs no flush", dir.display());
        let (at, len) = (123_456u64, 70_000usize);
        let expect = &data[at as usize..at as usize + len];
        match read_now(&dev, at, len) {
            Some(got) => assert!(got == expect, "{}: read_now returned other bytes", dir.display()),
            None => assert!(!in_memory, "{}: a tmpfs read was refused", dir.display()),
        }
        let mut warm = vec![0u8; len];
        dev.read_at(at, &mut warm).unwrap();
        let got = read_now(&dev, at, len).unwrap_or_else(|| panic!("{}: cached pages refused", dir.display()));
        assert!(got == expect, "{}: read_now of cached pages returned other bytes", dir.display());
        // Past the end: an error, as for every read.
        assert!(dev.read_now((1 << 20) - 10, &mut [MaybeUninit::uninit(); 11]).is_err());
    }
    remove_memory_dir(&dirs);
}

/// Pages of `file` in the page cache over `[offset, offset+len)`, by `cachestat(2)`; `None`
/// where the kernel does not have it (before Linux 6.5).
fn cached_pages(file: &std::fs::File, offset: u64, len: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    const SYS_CACHESTAT: libc::c_long = 451;
    let range = [offset, len];
    // nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted
    let mut stat = [0u64; 5];
    // SAFETY: cachestat reads two u64 (offset, length) and fills five.
    let rc = unsafe { libc::syscall(SYS_CACHESTAT, file.as_raw_fd(), range.as_ptr(), stat.as_mut_ptr(), 0) };
    (rc == 0).then_some(stat[0])
}

/// `read_if_cached` reads what is in memory, as `read_now`, but where the pages are not in the
/// page cache it says so without starting to read them in (an `RWF_NOWAIT` read starts that):
/// a mirror asks each copy this way and must not make every copy read what one will serve.
#[test]
fn read_if_cached_starts_no_read_of_missing_pages() {
    use std::mem::MaybeUninit;
    let data = uraid_testkit::noise(8, 1 << 20);
    let dirs = disk_and_memory_dirs("read-if-cached");
    for dir in &dirs {
        let (file, dev, in_memory) = dropped_member(dir, &data);
        let (at, len) = (256 << 10, 8192usize);
        let expect = &data[at as usize..at as usize + len];
        let mut buf = vec![MaybeUninit::<u8>::uninit(); len];
        let dropped = cached_pages(&file, at, len as u64) == Some(0);
        let got = dev.read_if_cached(at, &mut buf).expect("read_if_cached");
        // SAFETY (both below): `Ok(true)` means every byte was filled.
        let bytes = |buf: &[MaybeUninit<u8>]| -> Vec<u8> { buf.iter().map(|b| unsafe { b.assume_init() }).collect() };
        if in_memory {
            assert!(got && bytes(&buf) == expect, "{}: a tmpfs read was refused or wrong", dir.display());
        } else if dropped {
            assert!(!got, "{}: pages not cached were read", dir.display());
            assert_eq!(cached_pages(&file, at, len as u64), Some(0), "{}: a read-in was started", dir.display());
        }
        let mut warm = vec![0u8; len];
        dev.read_at(at, &mut warm).unwrap();
        let mut buf = vec![MaybeUninit::<u8>::uninit(); len];
        let got = dev.read_if_cached(at, &mut buf).expect("read_if_cached");
        if in_memory || cached_pages(&file, at, len as u64).is_some() {
            assert!(got, "{}: cached pages refused", dir.display());
            assert!(bytes(&buf) == expect, "{}: read_if_cached returned other bytes", dir.display());
        } else {
            assert!(!got, "{}: read without cachestat(2) to tell what is cached", dir.display());
        }
        assert!(dev.read_if_cached((1 << 20) - 10, &mut [MaybeUninit::uninit(); 11]).is_err(), "past the end");
    }
    remove_memory_dir(&dirs);
}

/// `write_now` writes a file on tmpfs at once; elsewhere it either writes (the file system took
/// an `RWF_NOWAIT` write) or says it would wait, and what it wrote is right. A read-only device
/// refuses.
#[test]
fn write_now_writes_only_where_nothing_waits() {
    let dirs = disk_and_memory_dirs("write-now");
    let shm = std::path::Path::new(SHM);
    for dir in &dirs {
        let path = dir.join("member.img");
        std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
        let dev = FileDevice::open(&path, true).unwrap();
        let data = uraid_testkit::noise(9, 50_000);
        let wrote = dev.write_now(4096 + 3, &data).expect("write_now");
        assert!(wrote || !dir.starts_with(shm), "{}: a tmpfs write was refused", dir.display());
        let mut back = vec![0u8; data.len()];
        dev.read_at(4096 + 3, &mut back).unwrap();
        if wrote {
            assert!(back == data, "{}: write_now wrote other bytes", dir.display());
        }
        assert!(dev.write_now((1 << 20) - 10, &[1; 11]).is_err(), "past the end");
        let ro = FileDevice::open(&path, false).unwrap();
        let err = ro.write_now(0, &[1]).expect_err("a read-only device wrote");
        assert!(err.to_string().contains("member.img: opened read-only"), "{err}");
    }
    remove_memory_dir(&dirs);
}

/// `read_now`, `write_now` and `read_buf` make their system calls by hand (`member::raw`):
/// offsets past 4 GiB reach the bytes there, not bytes the low 32 bits of the offset name.
#[test]
fn read_now_and_write_now_reach_offsets_past_4_gib() {
    use std::mem::MaybeUninit;
    let dirs = disk_and_memory_dirs("past-4g");
    for dir in &dirs {
        let path = dir.join("member.img");
        let size = (5u64 << 30) + 8192;
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(size).unwrap(); // sparse: nothing is written but what the test writes
        let far = (4u64 << 30) + 12_345;
        let data = uraid_testkit::noise(11, 6000);
        let dev = FileDevice::open(&path, true).unwrap();
        dev.write_at(far, &data).unwrap();
        // Same low 32 bits, 4 GiB lower: zeros, which a truncated offset would read instead.
        let mut low = vec![0u8; data.len()];
        dev.read_at(far - (4 << 30), &mut low).unwrap();
        assert!(low.iter().all(|&b| b == 0));
        dev.read_at(far, &mut low).unwrap(); // warms the page cache for a disk file system
        let mut buf = vec![MaybeUninit::<u8>::uninit(); data.len()];
        assert!(dev.read_now(far, &mut buf).expect("read_now"), "{}: cached pages refused", dir.display());
        // SAFETY: `Ok(true)` means every byte was filled.
        let got: Vec<u8> = buf.into_iter().map(|b| unsafe { b.assume_init() }).collect();
        assert!(got == data, "{}: read_now past 4 GiB returned other bytes", dir.display());
        assert!(
            dev.read_buf(far, data.len()).unwrap() == data,
            "{}: read_buf past 4 GiB returned other bytes",
            dir.display()
        );
        let other = uraid_testkit::noise(12, 3000);
        let at = size - 5000;
        if dev.write_now(at, &other).expect("write_now") {
            let mut back = vec![0u8; other.len()];
            dev.read_at(at, &mut back).unwrap();
            assert!(back == other, "{}: write_now past 4 GiB wrote elsewhere", dir.display());
            dev.read_at(at - (4 << 30), &mut back).unwrap();
            assert!(back.iter().all(|&b| b == 0), "{}: write_now wrote 4 GiB too low", dir.display());
        }
        drop(dev);
        std::fs::remove_file(&path).unwrap();
    }
    remove_memory_dir(&dirs);
}
