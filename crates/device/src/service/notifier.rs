//! How the engine thread sleeps and is woken: the eventfd its senders and the members' rings
//! signal, and its inbox, the channel with that notifier.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;

use super::messages::Msg;

/// What the engine thread sleeps on when it has nothing to do: an eventfd that senders of
/// messages write (only when the engine said it is about to sleep, so a busy engine costs them no
/// system call) and that the members' rings signal when an I/O completes after its submission.
pub(super) struct Notifier {
    efd: OwnedFd,
    /// Set by the engine thread just before it sleeps.
    pub(super) sleeping: AtomicBool,
}

impl Notifier {
    pub(super) fn new() -> io::Result<Notifier> {
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Notifier { efd: unsafe { OwnedFd::from_raw_fd(fd) }, sleeping: AtomicBool::new(false) })
    }

    pub(super) fn fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }

    /// After sending a message: wake the engine thread if it is (about to be) asleep.
    pub(super) fn notify(&self) {
        // Orders the sending before the look at the flag (the engine orders its setting of the
        // flag before its look at the channel the same way), so one of the two sees the other.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            let one: u64 = 1;
            // SAFETY: an 8-byte write to our eventfd. It can only fail if the counter would
            // overflow, and then a wake-up is pending anyway.
            unsafe { libc::write(self.efd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }

    /// Sleep until the eventfd is signalled or `deadline` passes.
    pub(super) fn wait(&self, deadline: Option<Instant>) {
        let timeout_ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                // Rounded up, so the engine does not wake just before its deadline and spin.
                i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
            }
        };
        let mut pfd = libc::pollfd { fd: self.efd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd. EINTR or a timeout just returns: the caller looks again.
        unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    }

    /// Reset the eventfd after waking.
    pub(super) fn drain(&self) {
        let mut count: u64 = 0;
        // SAFETY: an 8-byte read from our non-blocking eventfd into a u64.
        unsafe { libc::read(self.efd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
    }
}

/// The engine thread's message channel, with the notifier its senders wake it by.
#[derive(Clone)]
pub(super) struct Inbox {
    pub(super) tx: Sender<Msg>,
    pub(super) notifier: Arc<Notifier>,
}

impl Inbox {
    pub(super) fn send(&self, msg: Msg) -> Result<(), crossbeam_channel::SendError<Msg>> {
        self.tx.send(msg)?;
        self.notifier.notify();
        Ok(())
    }
}
