//! `MemberDevice`: what the engine's drivers need from a member, and two backends.
//!
//! Files and block devices go through positioned reads and writes (`pread`/`pwrite`), so one open
//! handle serves concurrent users without a shared cursor. They also hand their descriptors (and
//! an `O_DIRECT` one, where the file system allows it) to the io_uring driver through
//! [`MemberDevice::io_handle`].

use std::fs::{File, OpenOptions};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use bytes::Bytes;
use uraid_engine::{IoBuf, PoolBuf};

use crate::syscall::transfer_all;

/// Most pieces one vectored write may take (Linux's `UIO_MAXIOV`); more are refused with
/// `EINVAL`.
pub const IOV_MAX: usize = 1024;

/// A member of an array: a fixed-size byte-addressed store.
pub trait MemberDevice: Send + Sync {
    /// A name for messages (usually the path).
    fn name(&self) -> &str;
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Fill `buf` from byte `offset`; a short device is an error, never a silent zero fill.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Read `len` bytes at `offset` into a new buffer (from the buffer pool, see
    /// [`uraid_engine::bufpool`]). Backends that can read into uninitialised memory skip the zeroing
    /// this default does.
    fn read_buf(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let mut buf = PoolBuf::new(len);
        self.read_at(offset, buf.zeroed(len))?;
        Ok(buf.into_bytes())
    }
    /// Fill `buf` from byte `offset` only if that needs no waiting for a device: the data is in
    /// memory already (the page cache holds it, the file lives on a memory file system, the
    /// device is memory). `Ok(false)` means the read would have had to wait, and `buf` holds
    /// nothing useful. The service answers small reads on the client's own thread with this (see
    /// `service::inline`). The default never reads.
    fn read_now(&self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> io::Result<bool> {
        let _ = (offset, buf);
        Ok(false)
    }
    /// As [`MemberDevice::read_now`], and where the data is not in memory, start nothing either.
    /// `read_now` of a file with a page cache may start reading the missing pages in before it
    /// says it would wait (Linux's `RWF_NOWAIT` read still starts read-ahead for them). That is
    /// the device read the engine then asks of the same member anyway; but where another copy
    /// of a mirror may serve the read, it is a device read nobody asked for. The default is
    /// `read_now`, for devices whose refusals start nothing.
    fn read_if_cached(&self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> io::Result<bool> {
        self.read_now(offset, buf)
    }
    /// Put `len` bytes from `offset` into `pipe` with `splice(2)` (references to the pages, no
    /// copy; see [`crate::splice`]), only if that needs no waiting for a device, as
    /// [`MemberDevice::read_now`]. `Ok(false)` means it would have had to wait, and nothing was
    /// put in the pipe. An error may leave some of the bytes in the pipe, which the caller then
    /// drops. The pipe must have room for every page the range touches. The default never
    /// splices.
    fn splice_now(&self, offset: u64, len: usize, pipe: BorrowedFd<'_>) -> io::Result<bool> {
        let _ = (offset, len, pipe);
        Ok(false)
    }
    /// Write `data` at `offset` only if that needs no waiting for a device (a file on a memory
    /// file system, a device that is memory). `Ok(false)` means it would have had to wait; some
    /// of `data` may have been written then, and the caller writes it all again another way.
    /// The default never writes.
    fn write_now(&self, offset: u64, data: &[u8]) -> io::Result<bool> {
        let _ = (offset, data);
        Ok(false)
    }
    /// Write the pieces of `data` back to back from `offset` (a vectored write).
    fn write_pieces(&self, offset: u64, data: &IoBuf) -> io::Result<()> {
        let mut at = offset;
        for piece in data.pieces() {
            self.write_at(at, piece)?;
            at += piece.len() as u64;
        }
        Ok(())
    }
    /// Make completed writes durable.
    fn flush(&self) -> io::Result<()>;
    /// Whether a completed write is already as durable as a flush would make it, so flushing
    /// has nothing to do: a file on a memory file system (its pages are the file), a device that
    /// is memory. Drivers then answer flushes at once, as md skips its log's flushes on devices
    /// without a volatile write cache. The default, `false`, flushes.
    fn flush_is_noop(&self) -> bool {
        false
    }
    /// Make `len` bytes at `offset` read as zeros, releasing the space where the device can.
    /// The zeros are a promise (parity over discarded stripes depends on it), so a backend that
    /// cannot deallocate with that guarantee writes zeros instead.
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        write_zeros(self, offset, len)
    }
    /// Whether [`MemberDevice::discard`] releases space cheaply (so an advisory TRIM is worth
    /// passing on) rather than possibly writing zeros over the whole range.
    fn discard_is_cheap(&self) -> bool {
        false
    }
    /// How long a request to a member reached over a network may wait, and how hard a broken
    /// connection is retried; `None` (the default) for devices that are not remote.
    fn remote_limits(&self) -> Option<RemoteLimits> {
        None
    }
    /// Change [`MemberDevice::remote_limits`] from now on; `false` for a device without them.
    fn set_remote_limits(&self, limits: RemoteLimits) -> bool {
        let _ = limits;
        false
    }
    /// The file descriptors behind the device, for a driver that submits I/O to the kernel
    /// itself (io_uring). `None` (the default) for devices that only work through the methods
    /// above, such as test devices that inject faults: those are driven by threads calling them.
    fn io_handle(&self) -> Option<IoHandle> {
        None
    }
}

/// The limits of a member reached over a network (an NBD export): what md's failfast leaves
/// to the device, set per member while the array runs (`uraid ctl SOCKET member-limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteLimits {
    /// A request unanswered this long fails (and with it, in an array, the member).
    pub request_timeout: std::time::Duration,
    /// Attempts to open a broken connection again before the member is gone.
    pub reconnect_attempts: u32,
    /// All attempts after one breakage end within this time.
    pub reconnect_budget: std::time::Duration,
}

/// What an asynchronous driver needs to reach a device directly. The descriptors belong to the
/// device: they stay open exactly as long as it lives, so a driver keeps the device alive while
/// it uses them.
#[derive(Debug, Clone)]
pub struct IoHandle {
    /// A descriptor for ordinary (buffered) I/O, open for writing when the device is writable.
    pub fd: RawFd,
    /// Size in bytes, as [`MemberDevice::size`].
    pub size: u64,
    /// A second descriptor opened with `O_DIRECT`, or why there is none (the file system refused
    /// `O_DIRECT`, or the probe read failed).
    pub direct: Result<DirectIo, String>,
    /// Whether a discard of a range reads as zeros after `fallocate(PUNCH_HOLE | KEEP_SIZE)`
    /// succeeds; [`MemberDevice::discard`] is used otherwise.
    pub punch_hole: bool,
    /// A regular file on tmpfs or ramfs. Its pages are the file, so direct and buffered I/O
    /// reach the same memory (tmpfs accepts `O_DIRECT` and serves it from those pages): no page
    /// cache can hold a stale copy.
    pub in_memory: bool,
}

/// An `O_DIRECT` descriptor and the alignment it needs.
#[derive(Debug, Clone, Copy)]
pub struct DirectIo {
    pub fd: RawFd,
    /// File offsets and lengths must be multiples of this (the logical block size).
    pub offset_align: u32,
    /// Memory buffers must start at a multiple of this.
    pub mem_align: u32,
}

/// A shared device is a device too (tests keep a handle on members they give away).
impl<T: MemberDevice + ?Sized> MemberDevice for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        (**self).write_at(offset, data)
    }
    fn read_buf(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        (**self).read_buf(offset, len)
    }
    fn read_now(&self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> io::Result<bool> {
        (**self).read_now(offset, buf)
    }
    fn read_if_cached(&self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> io::Result<bool> {
        (**self).read_if_cached(offset, buf)
    }
    fn splice_now(&self, offset: u64, len: usize, pipe: BorrowedFd<'_>) -> io::Result<bool> {
        (**self).splice_now(offset, len, pipe)
    }
    fn write_now(&self, offset: u64, data: &[u8]) -> io::Result<bool> {
        (**self).write_now(offset, data)
    }
    fn write_pieces(&self, offset: u64, data: &IoBuf) -> io::Result<()> {
        (**self).write_pieces(offset, data)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
    fn flush_is_noop(&self) -> bool {
        (**self).flush_is_noop()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        (**self).discard(offset, len)
    }
    fn discard_is_cheap(&self) -> bool {
        (**self).discard_is_cheap()
    }
    fn remote_limits(&self) -> Option<RemoteLimits> {
        (**self).remote_limits()
    }
    fn set_remote_limits(&self, limits: RemoteLimits) -> bool {
        (**self).set_remote_limits(limits)
    }
    fn io_handle(&self) -> Option<IoHandle> {
        (**self).io_handle()
    }
}

/// Write zeros over `[offset, offset+len)` in bounded pieces.
pub fn write_zeros<D: MemberDevice + ?Sized>(dev: &D, offset: u64, len: u64) -> io::Result<()> {
    const PIECE: u64 = 1 << 20;
    let zeros = vec![0u8; PIECE.min(len) as usize];
    let mut done = 0;
    while done < len {
        let n = PIECE.min(len - done);
        dev.write_at(offset + done, &zeros[..n as usize])?;
        done += n;
    }
    Ok(())
}

/// A regular file or a block device.
#[derive(Debug)]
pub struct FileDevice {
    name: String,
    path: PathBuf,
    file: File,
    size: u64,
    is_block_device: bool,
    /// A regular file on tmpfs or ramfs: its reads never wait for a device (swap aside), though
    /// the kernel cannot be asked to promise it (`RWF_NOWAIT` is refused there).
    in_memory: bool,
    writable: bool,
    /// Opened on first use by [`MemberDevice::io_handle`]: an `O_DIRECT` descriptor, or why not.
    direct: OnceLock<Result<(File, DirectIo), String>>,
}

impl FileDevice {
    /// Open `path` for reading, and for writing too when `writable`.
    pub fn open(path: &Path, writable: bool) -> io::Result<FileDevice> {
        let meta = std::fs::metadata(path)?;
        let ft = meta.file_type();
        if ft.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a directory, not a member image or block device",
            ));
        }
        if !(ft.is_file() || ft.is_block_device()) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file or block device"));
        }
        let file = OpenOptions::new().read(true).write(writable).open(path)?;
        // A block device reports size 0 in its metadata; seeking to the end gives its size.
        let size = if ft.is_block_device() {
            use std::io::{Seek, SeekFrom};
            let mut f = &file;
            f.seek(SeekFrom::End(0))?
        } else {
            meta.len()
        };
        let in_memory = ft.is_file() && on_memory_file_system(&file);
        Ok(FileDevice {
            name: path.display().to_string(),
            path: path.to_path_buf(),
            file,
            size,
            is_block_device: ft.is_block_device(),
            in_memory,
            writable,
            direct: OnceLock::new(),
        })
    }

    /// Open the device again with `O_DIRECT` and check that an aligned read works (some file
    /// systems accept the flag at open and refuse the I/O; some refuse the open).
    fn open_direct(&self) -> Result<(File, DirectIo), String> {
        let file = OpenOptions::new()
            .read(true)
            .write(self.writable)
            .custom_flags(libc::O_DIRECT)
            .open(&self.path)
            .map_err(|e| format!("opening with O_DIRECT: {e}"))?;
        let (offset_align, mem_align) = match dio_alignment(&file) {
            Some(a) => a,
            None if self.is_block_device => {
                let lbs = logical_block_size(&file).map_err(|e| format!("BLKSSZGET: {e}"))?;
                (lbs, lbs)
            }
            // Without the file system's word, 4096 covers every block size in common use.
            None => (4096, 4096),
        };
        if !offset_align.is_power_of_two() || !mem_align.is_power_of_two() {
            return Err(format!("odd direct I/O alignment (offsets {offset_align}, memory {mem_align})"));
        }
        let probe_len = offset_align.max(mem_align) as usize;
        let mut buf = AlignedBuf::new(probe_len, mem_align.max(4096) as usize);
        // SAFETY: `buf` is valid for `probe_len` bytes; pread writes at most that many.
        let rc = unsafe { libc::pread(file.as_raw_fd(), buf.as_mut_ptr().cast(), probe_len, 0) };
        if rc < 0 {
            return Err(format!("an aligned O_DIRECT read failed: {}", io::Error::last_os_error()));
        }
        // The descriptor stays the same when the File moves into the device.
        let direct = DirectIo { fd: file.as_raw_fd(), offset_align, mem_align };
        Ok((file, direct))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A block device's logical sector size (`BLKSSZGET`), the smallest unit it reads and
    /// writes; `None` for a regular file, which has no sector size of its own.
    pub fn logical_sector_size(&self) -> io::Result<Option<u32>> {
        if !self.is_block_device {
            return Ok(None);
        }
        logical_block_size(&self.file).map(Some)
    }
}

impl MemberDevice for FileDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_bounds(self.size, offset, buf.len())?;
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        check_bounds(self.size, offset, data.len())?;
        self.file.write_all_at(data, offset)
    }

    /// From the page cache only (`preadv2` with `RWF_NOWAIT`), or a plain `pread` of a file on a
    /// memory file system.
    fn read_now(&self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> io::Result<bool> {
        check_bounds(self.size, offset, buf.len())?;
        let flags = if self.in_memory { 0 } else { libc::RWF_NOWAIT };
        let fd = self.file.as_raw_fd();
        nowait_loop(
            buf.len(),
            |done| {
                let rest = &mut buf[done..];
                // SAFETY: the kernel writes at most `rest.len()` bytes into `rest`.
                unsafe { raw::pread(fd, rest.as_mut_ptr().cast(), rest.len(), offset + done as u64, flags) }
            },
            |done| short_read(offset + done as u64),
        )
    }

    /// As `read_now` on tmpfs or ramfs; elsewhere only when `cachestat(2)` finds every page of
    /// the range in the page cache (which starts no device read), and then with `RWF_NOWAIT`
    /// (a page evicted in between is refused, and its read-in started, as by `read_now`).
    /// Where the kernel has no `cachestat` (before Linux 6.5) nothing is read this way.
    fn read_if_cached(&self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> io::Result<bool> {
        check_bounds(self.size, offset, buf.len())?;
        if !self.in_memory && !all_cached(&self.file, offset, buf.len() as u64) {
            return Ok(false);
        }
        self.read_now(offset, buf)
    }

    /// Straight from a file on tmpfs or ramfs; elsewhere only when `cachestat(2)` finds every
    /// page of the range in the page cache (a page evicted in between makes the splice wait for
    /// it, which costs time, not correctness).
    fn splice_now(&self, offset: u64, len: usize, pipe: BorrowedFd<'_>) -> io::Result<bool> {
        check_bounds(self.size, offset, len)?;
        if !self.in_memory && !all_cached(&self.file, offset, len as u64) {
            return Ok(false);
        }
        let mut at = offset as libc::loff_t;
        let (fd, pipe) = (self.file.as_raw_fd(), pipe.as_raw_fd());
        transfer_all(
            len,
            // SAFETY: splice from our descriptor at `at` (which the kernel advances) into the
            // caller's pipe. SPLICE_F_NONBLOCK: a full pipe fails rather than blocks.
            |done| unsafe {
                libc::splice(fd, &mut at, pipe, std::ptr::null_mut(), len - done, libc::SPLICE_F_NONBLOCK)
            },
            |done| short_read(offset + done as u64),
        )?;
        Ok(true)
    }

    /// A plain `pwrite` on tmpfs or ramfs. Elsewhere `pwritev2` with `RWF_NOWAIT`, which ext4
    /// refuses for buffered writes (so they take the usual path) and other file systems honour.
    fn write_now(&self, offset: u64, data: &[u8]) -> io::Result<bool> {
        check_bounds(self.size, offset, data.len())?;
        if !self.writable {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("{}: opened read-only", self.name)));
        }
        let flags = if self.in_memory { 0 } else { libc::RWF_NOWAIT };
        let fd = self.file.as_raw_fd();
        nowait_loop(
            data.len(),
            |done| {
                let rest = &data[done..];
                // SAFETY: the kernel only reads the `rest.len()` bytes of `rest`.
                unsafe { raw::pwrite(fd, rest.as_ptr().cast(), rest.len(), offset + done as u64, flags) }
            },
            // A write that moves nothing is taken as one that would wait: the usual path writes
            // it and reports whatever is wrong.
            |_| io::Error::from_raw_os_error(libc::EAGAIN),
        )
    }

    /// `pread` straight into the buffer: no zeroing first.
    fn read_buf(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        check_bounds(self.size, offset, len)?;
        let mut buf = PoolBuf::new(len);
        let fd = self.file.as_raw_fd();
        let start = buf.as_mut_ptr();
        transfer_all(
            len,
            // SAFETY: the destination lies inside the buffer's capacity, past the bytes already
            // read; pread writes at most `len - done` bytes there.
            |done| unsafe { raw::pread(fd, start.add(done).cast(), len - done, offset + done as u64, 0) },
            |done| short_read(offset + done as u64),
        )?;
        // SAFETY: every byte up to `len` was written by pread above.
        unsafe { buf.set_len(len) };
        Ok(buf.into_bytes())
    }

    /// One `pwritev` per [`IOV_MAX`] pieces (a piece that writes short is finished with plain
    /// writes).
    fn write_pieces(&self, offset: u64, data: &IoBuf) -> io::Result<()> {
        check_bounds(self.size, offset, data.len())?;
        if let Some(one) = data.as_single() {
            return self.file.write_all_at(one, offset);
        }
        let pieces: Vec<&bytes::Bytes> = data.pieces().collect();
        let mut at = offset;
        for batch in pieces.chunks(IOV_MAX) {
            let iov: Vec<libc::iovec> = batch
                .iter()
                .map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() })
                .collect();
            // SAFETY: every iovec points into a live piece of `data`, which pwritev only reads.
            let rc = unsafe {
                libc::pwritev(self.file.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int, at as libc::off_t)
            };
            let mut written = if rc < 0 {
                let err = io::Error::last_os_error();
                if err.kind() != io::ErrorKind::Interrupted {
                    return Err(err);
                }
                0
            } else {
                rc as usize
            };
            for piece in batch {
                let skip = written.min(piece.len());
                written -= skip;
                if skip < piece.len() {
                    self.file.write_all_at(&piece[skip..], at + skip as u64)?;
                }
                at += piece.len() as u64;
            }
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn flush_is_noop(&self) -> bool {
        self.in_memory
    }

    /// `fallocate(PUNCH_HOLE)`: on a regular file the range reads as zeros afterwards; on a block
    /// device the kernel zeroes it (discarding only where that guarantees zeros) or refuses.
    /// Where the file system or device refuses, zeros are written instead.
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        check_bounds(self.size, offset, len as usize)?;
        if len == 0 {
            return Ok(());
        }
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: fallocate on an fd we own, with plain integer arguments.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, offset as libc::off_t, len as libc::off_t) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::ENODEV) => write_zeros(self, offset, len),
            _ => Err(err),
        }
    }

    /// Punching a hole in a regular file only changes metadata. A block device may have no
    /// zeroing discard, and then the fallback writes every byte.
    fn discard_is_cheap(&self) -> bool {
        !self.is_block_device
    }

    fn io_handle(&self) -> Option<IoHandle> {
        let direct = self.direct.get_or_init(|| self.open_direct()).as_ref().map(|(_, d)| *d).map_err(Clone::clone);
        // On a block device PUNCH_HOLE zeroes (or refuses); on a regular file the hole reads as
        // zeros. Either way a success keeps the promise; a refusal falls back to `discard`.
        Some(IoHandle {
            fd: self.file.as_raw_fd(),
            size: self.size,
            direct,
            punch_hole: true,
            in_memory: self.in_memory,
        })
    }
}

/// `pread` and `pwrite` (with `RWF_*` flags, `preadv2` and `pwritev2` of one piece) made as bare
/// system calls, for the reads and writes made per request: inline ones and the member I/O
/// threads' reads.
///
/// Why not libc's wrappers: they are cancellation points, so each call switches the thread's
/// asynchronous cancellation on and off around the system call; Rust never cancels a thread,
/// and those switches, with the vectored calls' copy of the `iovec`, were about a tenth of the
/// time of a 4 KiB random read from tmpfs (`uraid bench engine`, raid0; `perf` showed
/// `__pthread_enable_asynccancel` / `__pthread_disable_asynccancel` and `copy_iovec_from_user`).
/// Like the wrappers, these return the byte count, or -1 with `errno` set.
mod raw {
    use std::os::fd::RawFd;

    /// # Safety
    /// `buf` must be valid for writes of `len` bytes.
    pub(super) unsafe fn pread(
        fd: RawFd,
        buf: *mut libc::c_void,
        len: usize,
        offset: u64,
        flags: libc::c_int,
    ) -> isize {
        let at = offset as libc::off_t;
        if flags == 0 {
            return libc::syscall(libc::SYS_pread64, fd, buf, len, at) as isize;
        }
        let iov = libc::iovec { iov_base: buf, iov_len: len };
        // The offset goes as two halves, low then high; a 64-bit kernel takes it whole from the
        // low one.
        libc::syscall(libc::SYS_preadv2, fd, &iov, 1, at, 0, flags) as isize
    }

    /// # Safety
    /// `buf` must be valid for reads of `len` bytes.
    pub(super) unsafe fn pwrite(
        fd: RawFd,
        buf: *const libc::c_void,
        len: usize,
        offset: u64,
        flags: libc::c_int,
    ) -> isize {
        let at = offset as libc::off_t;
        if flags == 0 {
            return libc::syscall(libc::SYS_pwrite64, fd, buf, len, at) as isize;
        }
        let iov = libc::iovec { iov_base: buf.cast_mut(), iov_len: len };
        libc::syscall(libc::SYS_pwritev2, fd, &iov, 1, at, 0, flags) as isize
    }
}

/// [`transfer_all`] for `read_now` and `write_now`: a call that says it would wait (`EAGAIN`;
/// `EOPNOTSUPP` from a file system that cannot tell) ends it with `Ok(false)`. A short read or
/// write stopped at the first page that would wait, and the next call says so.
fn nowait_loop(len: usize, step: impl FnMut(usize) -> isize, at_zero: impl Fn(usize) -> io::Error) -> io::Result<bool> {
    match transfer_all(len, step, at_zero) {
        Ok(()) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EOPNOTSUPP)) => Ok(false),
        Err(e) => Err(e),
    }
}

fn short_read(at: u64) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, format!("short read at byte {at}"))
}

/// Whether every page of `[offset, offset+len)` of `file` is in the page cache, by
/// `cachestat(2)` (Linux 6.5). False where the kernel does not have it.
fn all_cached(file: &File, offset: u64, len: u64) -> bool {
    // The system call's number is the same on every architecture (the generic table), and the
    // structures are include/uapi/linux/mman.h's.
    const SYS_CACHESTAT: libc::c_long = 451;
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    if len == 0 {
        return true;
    }
    let range = Range { off: offset, len };
    let mut stat = Stat::default();
    // SAFETY: cachestat reads `range` and fills `stat`, both of the kernel's layout.
    let rc =
        unsafe { libc::syscall(SYS_CACHESTAT, file.as_raw_fd(), &range as *const Range, &mut stat as *mut Stat, 0) };
    rc == 0 && stat.nr_cache >= crate::splice::pages_spanned(offset, len)
}

/// Whether `file` lives on tmpfs or ramfs.
fn on_memory_file_system(file: &File) -> bool {
    // linux/magic.h (libc's constants change type between targets).
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    // SAFETY: fstatfs fills a zeroed struct of the right type for an fd we own.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    let kind = st.f_type as i64;
    kind == TMPFS_MAGIC || kind == RAMFS_MAGIC
}

/// The file system's direct I/O alignment (offsets, memory) from `statx(STATX_DIOALIGN)`, where
/// the kernel and file system report it.
fn dio_alignment(file: &File) -> Option<(u32, u32)> {
    // SAFETY: statx fills a zeroed struct of the right type for an fd we own.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::statx(file.as_raw_fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_DIOALIGN, &mut stx) };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return None;
    }
    Some((stx.stx_dio_offset_align, stx.stx_dio_mem_align.max(1)))
}

/// A block device's logical block size.
fn logical_block_size(file: &File) -> io::Result<u32> {
    let mut size: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::BLKSSZGET, &mut size) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(size as u32)
}

/// A heap buffer with a chosen alignment, for `O_DIRECT` I/O.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

// SAFETY: the buffer is plain owned memory.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// `len` zeroed bytes (at least one) aligned to `align` (a power of two).
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        let layout = std::alloc::Layout::from_size_align(len.max(1), align).expect("aligned buffer layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, layout }
    }

    pub fn capacity(&self) -> usize {
        self.layout.size()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the allocation is `capacity` initialized (zeroed at first) bytes we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf").field("len", &self.layout.size()).field("align", &self.layout.align()).finish()
    }
}

/// A member held in memory (tests, simulation).
#[derive(Debug)]
pub struct MemoryDevice {
    name: String,
    data: Mutex<Vec<u8>>,
}

impl MemoryDevice {
    pub fn new(name: &str, size: u64) -> MemoryDevice {
        MemoryDevice { name: name.to_string(), data: Mutex::new(vec![0u8; size as usize]) }
    }

    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> MemoryDevice {
        MemoryDevice { name: name.to_string(), data: Mutex::new(bytes) }
    }

    pub fn snapshot(&self) -> Vec<u8> {
        self.data.lock().expect("memory device lock").clone()
    }
}

impl MemberDevice for MemoryDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> u64 {
        self.data.lock().expect("memory device lock").len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = self.data.lock().expect("memory device lock");
        check_bounds(data.len() as u64, offset, buf.len())?;
        buf.copy_from_slice(&data[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }

    fn read_now(&self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> io::Result<bool> {
        let data = self.data.lock().expect("memory device lock");
        check_bounds(data.len() as u64, offset, buf.len())?;
        let src = &data[offset as usize..offset as usize + buf.len()];
        for (d, s) in buf.iter_mut().zip(src) {
            d.write(*s);
        }
        Ok(true)
    }

    fn write_now(&self, offset: u64, src: &[u8]) -> io::Result<bool> {
        self.write_at(offset, src).map(|()| true)
    }

    fn write_at(&self, offset: u64, src: &[u8]) -> io::Result<()> {
        let mut data = self.data.lock().expect("memory device lock");
        check_bounds(data.len() as u64, offset, src.len())?;
        data[offset as usize..offset as usize + src.len()].copy_from_slice(src);
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn flush_is_noop(&self) -> bool {
        true
    }

    fn discard_is_cheap(&self) -> bool {
        true
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut data = self.data.lock().expect("memory device lock");
        check_bounds(data.len() as u64, offset, len as usize)?;
        data[offset as usize..(offset + len) as usize].fill(0);
        Ok(())
    }
}

pub(crate) fn check_bounds(size: u64, offset: u64, len: usize) -> io::Result<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("access {offset}+{len} beyond the device end ({size} bytes)"),
        )),
    }
}
