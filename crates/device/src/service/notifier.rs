//! How the engine thread sleeps and is woken: the eventfd its senders and the members' rings
//! signal; its inbox, the bounded channel of client messages with that notifier; and the
//! channels of answers (member I/O threads, the metadata thread) that wake it the same way.
//!
//! Every channel into or out of the engine thread is bounded, and none can deadlock it:
//!
//! - clients wait when the inbox is full ([`INBOX_CAPACITY`]): that is their back-pressure. The
//!   engine thread never waits for room in it (a client's callback runs on the engine thread,
//!   and one that submits a follow-up request into a full inbox has it looped back instead, see
//!   [`Inbox::send`]), and nothing else sends into it;
//! - answers do not go through the inbox, where clients could take all the room: each producer
//!   answers on a channel of its own, sized for everything the engine thread has handed it and
//!   not yet taken the answer of, so an answer never waits (see `io_threads` and
//!   `metadata_io`). The engine thread, in turn, never waits for room in their queues: it
//!   hands out no more than those capacities and keeps the rest on its side.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, SendError, Sender, TrySendError};

use super::messages::Msg;

/// Client messages (block requests not answered inline, status and control requests) that may
/// wait for the engine thread. A client that finds them all taken waits for room in
/// [`ServiceHandle::submit`](super::ServiceHandle::submit) and the other calls; the engine thread
/// takes messages in batches of 32 between submissions of member I/O, so this is many batches,
/// and a client waits only when the engine thread is far behind.
pub const INBOX_CAPACITY: usize = 1024;

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

/// The engine thread's message channel (of [`INBOX_CAPACITY`]), with the notifier its senders
/// wake it by.
#[derive(Clone)]
pub(super) struct Inbox {
    tx: Sender<Msg>,
    /// The channel's receiving end, only to answer what is left in it once the engine thread has
    /// ended: a bounded channel keeps its messages for as long as a sender lives (an unbounded one
    /// drops them when its receivers go), and their requests would never be answered.
    rx: Receiver<Msg>,
    /// Set once the engine thread has ended.
    closed: Arc<AtomicBool>,
    pub(super) notifier: Arc<Notifier>,
}

impl Inbox {
    /// A new inbox, empty, and its receiving end for the engine thread.
    pub(super) fn new(notifier: Arc<Notifier>) -> (Inbox, Receiver<Msg>) {
        let (tx, rx) = crossbeam_channel::bounded(INBOX_CAPACITY);
        (Inbox { tx, rx: rx.clone(), closed: Arc::new(AtomicBool::new(false)), notifier }, rx)
    }

    /// Send `msg`, waiting for room if the inbox is full; an error once the engine thread is
    /// gone. On this inbox's own engine thread (a request's callback submitting another
    /// request), a full inbox cannot wait, as only that thread makes room: the message is
    /// looped back, and the engine thread takes it before the inbox (see [`take_looped_back`]).
    pub(super) fn send(&self, msg: Msg) -> Result<(), SendError<Msg>> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(SendError(msg));
        }
        match self.tx.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Disconnected(msg)) => return Err(SendError(msg)),
            Err(TrySendError::Full(msg)) => {
                if let Some(msg) = loop_back(&self.notifier, msg) {
                    self.tx.send(msg)?;
                }
            }
        }
        self.notifier.notify();
        // The engine thread may have ended after it last looked at the inbox and before the
        // message went in; then it is answered here. (The engine thread sets `closed` before it
        // looks the last time, and this looks at `closed` after the message went in, so one of
        // the two finds it.)
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.answer_left();
        }
        Ok(())
    }

    /// The engine thread has ended: what is left in the inbox is answered "stopping" (its
    /// messages dropped, see `Pending`), and later messages are refused.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.answer_left();
    }

    fn answer_left(&self) {
        while let Ok(msg) = self.rx.try_recv() {
            drop(msg);
        }
    }
}

thread_local! {
    /// On an engine thread: the notifier of its service (which tells its inbox from others), and
    /// the messages it sent its own full inbox. Bounded by construction: they are what the
    /// callbacks of the requests answered since the engine thread last looked submitted, and it
    /// looks before every message it takes.
    static LOOPED_BACK: RefCell<Option<(*const Notifier, VecDeque<Msg>)>> = const { RefCell::new(None) };
}

/// Mark this thread as the engine thread of the service woken through `notifier`.
pub(super) fn engine_thread_starts(notifier: &Arc<Notifier>) {
    LOOPED_BACK.with(|l| *l.borrow_mut() = Some((Arc::as_ptr(notifier), VecDeque::new())));
}

/// The engine thread is done: messages still looped back are dropped, which answers their
/// requests "stopping" (see `Pending`).
pub(super) fn engine_thread_ends() {
    let left = LOOPED_BACK.with(|l| l.borrow_mut().take());
    drop(left);
}

/// `msg` kept for the engine thread if this is the engine thread of `notifier`'s service; else
/// `msg` back.
fn loop_back(notifier: &Arc<Notifier>, msg: Msg) -> Option<Msg> {
    LOOPED_BACK.with(|l| match &mut *l.borrow_mut() {
        Some((ours, queue)) if *ours == Arc::as_ptr(notifier) => {
            queue.push_back(msg);
            None
        }
        _ => Some(msg),
    })
}

/// On the engine thread: the oldest message it looped back to itself.
pub(super) fn take_looped_back() -> Option<Msg> {
    LOOPED_BACK.with(|l| l.borrow_mut().as_mut().and_then(|(_, queue)| queue.pop_front()))
}

/// On the engine thread: whether it has looped-back messages to take.
pub(super) fn has_looped_back() -> bool {
    LOOPED_BACK.with(|l| l.borrow().as_ref().is_some_and(|(_, queue)| !queue.is_empty()))
}

/// The sending end of a channel of answers to the engine thread: a member I/O thread's or the
/// metadata thread's. Whoever makes the channel sizes it for every answer that can be
/// outstanding, so [`AnswerSender::send`] never waits.
pub(super) struct AnswerSender<T> {
    tx: Sender<T>,
    notifier: Arc<Notifier>,
}

impl<T> Clone for AnswerSender<T> {
    fn clone(&self) -> Self {
        AnswerSender { tx: self.tx.clone(), notifier: Arc::clone(&self.notifier) }
    }
}

impl<T> AnswerSender<T> {
    /// A channel of `capacity` answers, its sending end waking the engine thread through
    /// `notifier`.
    pub(super) fn channel(capacity: usize, notifier: Arc<Notifier>) -> (AnswerSender<T>, Receiver<T>) {
        let (tx, rx) = crossbeam_channel::bounded(capacity);
        (AnswerSender { tx, notifier }, rx)
    }

    /// Send an answer and wake the engine thread; an error once its receiver is gone.
    pub(super) fn send(&self, answer: T) -> Result<(), SendError<T>> {
        self.tx.send(answer)?;
        self.notifier.notify();
        Ok(())
    }
}
