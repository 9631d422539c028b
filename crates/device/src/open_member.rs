//! One way to open a member, whatever it is: every command and the running service open the
//! members they are given through [`Member::open`], so an NBD URI works wherever a path does.
//!
//! A member string that is written as an NBD URI (`nbd://`, `nbd+unix://`, and the TLS forms
//! `nbds://`, `nbds+unix://` with their `tls-*` parameters; see
//! [`uraid_nbd::client::looks_like_nbd_uri`]) is an NBD export; any other
//! is a file or block device path. A file whose name really starts like a URI is reached as
//! `./nbd://…`.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::path::Path;

use bytes::Bytes;
use uraid_engine::IoBuf;
use uraid_nbd::client::{looks_like_nbd_uri, NbdUri};

use crate::member::{FileDevice, IoHandle, MemberDevice, RemoteLimits};
use crate::nbd_member::NbdDevice;

/// An opened member: a file or block device, or an NBD export (boxed: its client, with its
/// connection slots and limits, is several times a file's size, and members move around in
/// vectors).
#[derive(Debug)]
pub enum Member {
    File(FileDevice),
    Nbd(Box<NbdDevice>),
}

impl Member {
    /// Opens `spec` (a path, or an NBD URI) for reading, and for writing too when `writable`.
    /// Errors do not repeat `spec`: callers name the member, as they do for files.
    pub fn open(spec: &Path, writable: bool) -> io::Result<Member> {
        match spec.to_str() {
            Some(s) if looks_like_nbd_uri(s) => {
                let uri = NbdUri::parse(s).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                Ok(Member::Nbd(Box::new(NbdDevice::open(&uri, writable)?)))
            }
            _ => Ok(Member::File(FileDevice::open(spec, writable)?)),
        }
    }

    /// Whether `spec` names an NBD export rather than a path.
    pub fn is_uri(spec: &Path) -> bool {
        spec.to_str().is_some_and(looks_like_nbd_uri)
    }

    /// The smallest unit the member reads and writes: a block device's logical sector size, an
    /// NBD export's minimum block size; `None` for a regular file or an export that takes bytes.
    pub fn logical_sector_size(&self) -> io::Result<Option<u32>> {
        match self {
            Member::File(f) => f.logical_sector_size(),
            Member::Nbd(n) => Ok(n.logical_sector_size()),
        }
    }

    fn dev(&self) -> &dyn MemberDevice {
        match self {
            Member::File(f) => f,
            Member::Nbd(n) => n.as_ref(),
        }
    }
}

impl MemberDevice for Member {
    fn name(&self) -> &str {
        self.dev().name()
    }
    fn size(&self) -> u64 {
        self.dev().size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.dev().read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.dev().write_at(offset, data)
    }
    fn read_buf(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        self.dev().read_buf(offset, len)
    }
    fn read_now(&self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> io::Result<bool> {
        self.dev().read_now(offset, buf)
    }
    fn read_if_cached(&self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> io::Result<bool> {
        self.dev().read_if_cached(offset, buf)
    }
    fn splice_now(&self, offset: u64, len: usize, pipe: BorrowedFd<'_>) -> io::Result<bool> {
        self.dev().splice_now(offset, len, pipe)
    }
    fn write_now(&self, offset: u64, data: &[u8]) -> io::Result<bool> {
        self.dev().write_now(offset, data)
    }
    fn write_pieces(&self, offset: u64, data: &IoBuf) -> io::Result<()> {
        self.dev().write_pieces(offset, data)
    }
    fn flush(&self) -> io::Result<()> {
        self.dev().flush()
    }
    fn flush_is_noop(&self) -> bool {
        self.dev().flush_is_noop()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.dev().discard(offset, len)
    }
    fn discard_is_cheap(&self) -> bool {
        self.dev().discard_is_cheap()
    }
    fn remote_limits(&self) -> Option<RemoteLimits> {
        self.dev().remote_limits()
    }
    fn set_remote_limits(&self, limits: RemoteLimits) -> bool {
        self.dev().set_remote_limits(limits)
    }
    fn io_handle(&self) -> Option<IoHandle> {
        self.dev().io_handle()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_and_paths_are_told_apart() {
        assert!(Member::is_uri(Path::new("nbd://host/export")));
        assert!(Member::is_uri(Path::new("nbd+unix:///e?socket=/run/s")));
        assert!(!Member::is_uri(Path::new("./nbd://host/export")));
        assert!(!Member::is_uri(Path::new("/srv/d0.img")));
    }

    /// Every property of the device inside shows through (one forgotten method silently
    /// takes the trait's default).
    #[test]
    fn a_file_member_answers_as_its_file() {
        for dir in [std::env::temp_dir(), std::path::PathBuf::from("/dev/shm")] {
            let folder = dir.join(format!("uraid-open-member-{}", std::process::id()));
            if std::fs::create_dir_all(&folder).is_err() {
                continue;
            }
            let path = folder.join("m.img");
            std::fs::File::create(&path).unwrap().set_len(1 << 20).unwrap();
            let file = FileDevice::open(&path, true).unwrap();
            let member = Member::open(&path, true).unwrap();
            assert_eq!(member.flush_is_noop(), file.flush_is_noop(), "{}", dir.display());
            assert_eq!(member.discard_is_cheap(), file.discard_is_cheap(), "{}", dir.display());
            assert_eq!(member.io_handle().is_some(), file.io_handle().is_some(), "{}", dir.display());
            assert_eq!((member.name(), member.size()), (file.name(), file.size()));
            drop((file, member));
            std::fs::remove_dir_all(&folder).unwrap();
        }
    }

    #[test]
    fn tls_settings_are_checked_before_connecting() {
        // On a plain URI they are refused: it would not be encrypted.
        let e = Member::open(Path::new("nbd://127.0.0.1:1/x?tls-psk-file=k.psk"), false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("nbds://"), "{e}");
        // A missing key file is named before any connection is tried (nothing listens on port 1).
        let e = Member::open(Path::new("nbds://127.0.0.1:1/x?tls-psk-file=/nonexistent/k.psk"), false).unwrap_err();
        assert!(e.to_string().contains("PSK file /nonexistent/k.psk: cannot be read"), "{e}");
    }
}
