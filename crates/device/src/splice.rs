//! Reads handed over as a pipe of page references (`splice(2)`), for front ends that send the
//! data on to a socket.
//!
//! Why: answering a read with `pread` and `send` copies every byte twice in this process (page
//! cache to buffer, buffer to socket), and for large reads from memory those two copies are
//! most of the work. `splice` from a member file to a pipe only takes references to the file's
//! pages, and `splice` from the pipe to a socket passes those references on, so the bytes are
//! copied once, by the client's `recv`. Over a unix socket, `nbdcopy` reading an array of files on
//! tmpfs then finds the server doing almost nothing per byte.
//!
//! What the pipe holds is a reference to each page at the moment of the read, not a copy: a
//! write to the same bytes before the pipe is drained shows through. A client cannot tell, as
//! long as the reply is not sent before the read was done (it is not: the service fills the
//! pipe before it completes the request) and any write the client orders after the read starts
//! only once it has the reply (that is, after the data is in its own memory). Writes the client
//! sends before it has the reply are concurrent with the read, and NBD leaves what such a read
//! returns unspecified, as a disk does.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::syscall::transfer_all;

/// The bytes one pipe can hold, and so the largest spliced read. `splice` puts every page (or
/// part of one) in a slot of its own, so a read that starts or ends inside pages needs a slot
/// more per piece; [`pages_spanned`] counts them. 1 MiB is Linux's default limit for a pipe an
/// unprivileged process may resize (`/proc/sys/fs/pipe-max-size`).
pub const PIPE_BYTES: usize = 1 << 20;

/// Bytes per pipe slot.
const PAGE: u64 = 4096;

/// Pipes kept for reuse once drained. More than this in flight are created as needed and
/// closed after use.
const MAX_IDLE: usize = 32;

/// Most pipes of one pool open at once (two descriptors each); a read finding none is copied.
/// Without a bound, a client keeping hundreds of large reads in flight would hold as many pipes,
/// and a process allowed to exceed the user's pipe memory (`CAP_SYS_RESOURCE`) would run out of
/// descriptors for anything else. 64 pipes of 1 MiB are also all the default
/// `pipe-user-pages-soft` (64 MiB) lets an unprivileged user resize.
pub const MAX_PIPES: usize = 64;

/// The pipe slots `len` bytes from `offset` of a file take when spliced.
pub fn pages_spanned(offset: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    (offset + len).div_ceil(PAGE) - offset / PAGE
}

/// The slots of a pipe of [`PIPE_BYTES`].
pub const PIPE_SLOTS: u64 = PIPE_BYTES as u64 / PAGE;

/// An empty pipe of [`PIPE_BYTES`]: its write end is what members splice into.
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// Its pool's count of open pipes, taken back when it closes.
    open: Arc<AtomicUsize>,
}

impl Drop for Pipe {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pipe {
    /// A new pipe, counted in `open` (which it must already include) until it closes.
    fn new(open: Arc<AtomicUsize>) -> io::Result<Pipe> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two descriptors of the array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            open.fetch_sub(1, Ordering::Relaxed);
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and belong to nothing else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let pipe = Pipe { read, write, open };
        pipe.resize()?;
        Ok(pipe)
    }

    fn resize(&self) -> io::Result<()> {
        let write = &self.write;
        // Refused (EPERM) once the user's pipes hold more than `pipe-user-pages-soft` pages: the
        // caller then reads the usual way.
        // SAFETY: F_SETPIPE_SZ on a pipe we own.
        let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES as libc::c_int) };
        if size < 0 {
            return Err(io::Error::last_os_error());
        }
        if (size as usize) < PIPE_BYTES {
            return Err(io::Error::other(format!("the pipe holds {size} bytes, not {PIPE_BYTES}")));
        }
        Ok(())
    }

    /// The end members splice into.
    pub fn write_end(&self) -> BorrowedFd<'_> {
        self.write.as_fd()
    }
}

/// Drained pipes waiting to be used again, shared by a service's handles.
#[derive(Default)]
pub struct PipePool {
    idle: Mutex<Vec<Pipe>>,
    /// Pipes open: idle, or holding a read.
    open: Arc<AtomicUsize>,
}

impl PipePool {
    /// An empty pipe: an idle one, or a new one while fewer than [`MAX_PIPES`] are open.
    pub fn take(&self) -> io::Result<Pipe> {
        if let Some(p) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(p);
        }
        if self.open.fetch_add(1, Ordering::Relaxed) >= MAX_PIPES {
            self.open.fetch_sub(1, Ordering::Relaxed);
            return Err(io::Error::other(format!("{MAX_PIPES} pipes are open already")));
        }
        Pipe::new(Arc::clone(&self.open))
    }

    /// Pipes open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Keep `pipe` for reuse; it must be empty.
    pub(crate) fn give_back(&self, pipe: Pipe) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(pipe);
        }
    }
}

/// A read's bytes, in a pipe. Drained to a socket with [`PipedRead::splice_to`]; a pipe dropped
/// with bytes still in it is closed, not reused.
pub struct PipedRead {
    pipe: Option<Pipe>,
    /// Bytes still in the pipe.
    len: usize,
    pool: Arc<PipePool>,
}

impl PipedRead {
    /// `pipe`, which holds `len` bytes, returning to `pool` once drained.
    pub fn new(pipe: Pipe, len: usize, pool: Arc<PipePool>) -> PipedRead {
        PipedRead { pipe: Some(pipe), len, pool }
    }

    /// The bytes still in the pipe.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Move every byte to `out`, blocking until they are all written (for a socket: queued on
    /// it, as a `send` would).
    pub fn splice_to(&mut self, out: BorrowedFd<'_>) -> io::Result<()> {
        let Some(pipe) = &self.pipe else { return Ok(()) };
        let (from, to, len) = (pipe.read.as_raw_fd(), out.as_raw_fd(), self.len);
        transfer_all(
            len,
            // SAFETY: splice between two descriptors we hold, with no offsets (a pipe and a
            // socket have none).
            |done| unsafe {
                libc::splice(from, std::ptr::null_mut(), to, std::ptr::null_mut(), len - done, libc::SPLICE_F_MOVE)
            },
            |done| {
                io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("{} bytes left in the pipe would not move", len - done),
                )
            },
        )?;
        // Only a drained pipe is reused (see `Drop`).
        self.len = 0;
        Ok(())
    }

    /// The bytes, read out of the pipe (for callers that cannot splice, and for tests).
    pub fn read_to_vec(&mut self) -> io::Result<Vec<u8>> {
        let Some(pipe) = &self.pipe else { return Ok(Vec::new()) };
        let (from, len) = (pipe.read.as_raw_fd(), self.len);
        let mut out = vec![0u8; len];
        let start = out.as_mut_ptr();
        transfer_all(
            len,
            // SAFETY: read into the unfilled tail of `out`.
            |done| unsafe { libc::read(from, start.add(done).cast(), len - done) },
            |_| io::Error::new(io::ErrorKind::UnexpectedEof, "the pipe ended early"),
        )?;
        self.len = 0;
        Ok(out)
    }
}

impl Drop for PipedRead {
    fn drop(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            if self.len == 0 {
                self.pool.give_back(pipe);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn pages_spanned_counts_partial_pages() {
        assert_eq!(pages_spanned(0, 0), 0);
        assert_eq!(pages_spanned(0, 4096), 1);
        assert_eq!(pages_spanned(1, 4096), 2);
        assert_eq!(pages_spanned(4095, 2), 2);
        assert_eq!(pages_spanned(8192, 1), 1);
        assert_eq!(pages_spanned(512, 1 << 20), 257);
    }

    /// No more than MAX_PIPES are open at once; closing one makes room.
    #[test]
    fn open_pipes_are_bounded() {
        let pool = PipePool::default();
        let mut held = Vec::new();
        while let Ok(p) = pool.take() {
            held.push(p);
            assert!(held.len() <= MAX_PIPES, "more pipes than the bound");
        }
        // The user's pipe memory may run out first where other pipes exist (the error then
        // comes from the kernel); the bound itself must hold either way.
        assert_eq!(pool.open(), held.len());
        if held.len() == MAX_PIPES {
            let refused = pool.take().err().expect("refused at the bound");
            assert!(refused.to_string().contains("pipes are open already"), "{refused}");
        }
        held.pop();
        assert_eq!(pool.open(), held.len());
        let again = pool.take().expect("a closed pipe makes room");
        drop(again);
        drop(held);
        assert_eq!(pool.open(), 0);
    }

    /// Bytes written into a pipe come out on a socket, the pipe goes back to the pool once
    /// drained, and one dropped full is not reused.
    #[test]
    fn piped_bytes_reach_a_socket_and_pipes_are_reused_only_empty() {
        let pool = Arc::new(PipePool::default());
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 4096) as u8).collect();
        let pipe = pool.take().unwrap();
        std::fs::File::from(pipe.write.try_clone().unwrap()).write_all(&data).unwrap();
        let mut piped = PipedRead::new(pipe, data.len(), pool.clone());
        let (a, mut b) = UnixStream::pair().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; 300_000];
            b.read_exact(&mut got).unwrap();
            got
        });
        piped.splice_to(a.as_fd()).unwrap();
        assert!(piped.is_empty());
        assert_eq!(reader.join().unwrap(), data);
        drop(piped);
        assert_eq!(pool.idle.lock().unwrap().len(), 1, "a drained pipe is kept");

        let pipe = pool.take().unwrap();
        assert!(pool.idle.lock().unwrap().is_empty());
        std::fs::File::from(pipe.write.try_clone().unwrap()).write_all(&data[..10]).unwrap();
        let mut piped = PipedRead::new(pipe, 10, pool.clone());
        assert_eq!(piped.read_to_vec().unwrap(), &data[..10]);
        drop(piped);
        let pipe = pool.take().unwrap();
        std::fs::File::from(pipe.write.try_clone().unwrap()).write_all(&data[..10]).unwrap();
        drop(PipedRead::new(pipe, 10, pool.clone()));
        assert!(pool.idle.lock().unwrap().is_empty(), "a pipe dropped with bytes in it is closed");
    }
}
