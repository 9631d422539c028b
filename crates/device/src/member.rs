//! `MemberDevice`: what the engine's drivers need from a member, and two backends.
//!
//! Files and block devices go through positioned reads and writes (`pread`/`pwrite`), so one open
//! handle serves concurrent users without a shared cursor.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A member of an array: a fixed-size byte-addressed store.
pub trait MemberDevice: Send + Sync {
    /// A name for messages (usually the path).
    fn name(&self) -> &str;
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Fill `buf` from byte `offset`; a short device is an error, never a silent zero fill.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Make completed writes durable.
    fn flush(&self) -> io::Result<()>;
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
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        (**self).discard(offset, len)
    }
    fn discard_is_cheap(&self) -> bool {
        (**self).discard_is_cheap()
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
}

impl FileDevice {
    /// Open `path` for reading, and for writing too when `writable`.
    pub fn open(path: &Path, writable: bool) -> io::Result<FileDevice> {
        let meta = std::fs::metadata(path)?;
        let ft = meta.file_type();
        if ft.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "is a directory, not a member image or block device"));
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
        Ok(FileDevice {
            name: path.display().to_string(),
            path: path.to_path_buf(),
            file,
            size,
            is_block_device: ft.is_block_device(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
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

    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// `fallocate(PUNCH_HOLE)`: on a regular file the range reads as zeros afterwards; on a block
    /// device the kernel zeroes it (discarding only where that guarantees zeros) or refuses.
    /// Where the file system or device refuses, zeros are written instead.
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
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

    fn write_at(&self, offset: u64, src: &[u8]) -> io::Result<()> {
        let mut data = self.data.lock().expect("memory device lock");
        check_bounds(data.len() as u64, offset, src.len())?;
        data[offset as usize..offset as usize + src.len()].copy_from_slice(src);
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
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

fn check_bounds(size: u64, offset: u64, len: usize) -> io::Result<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= size => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("access {offset}+{len} beyond the device end ({size} bytes)"),
        )),
    }
}
