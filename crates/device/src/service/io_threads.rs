//! Member I/O on threads: a queue of one member's I/O, the threads that perform it with the
//! blocking calls of [`MemberTarget::perform`], and the channel of their answers, which the engine
//! thread drains as it reaps a ring's completions. The members without a ring use them, and a
//! ring hands them what it cannot do itself.
//!
//! Both channels are bounded by `depth`, and neither side ever waits on the other: the engine
//! thread hands the threads at most `depth` I/Os whose answers it has not taken yet (the rest
//! wait on its side, in [`MemberThreads::queue`]), so the queue always has room for what it
//! hands over, and the answers channel room for every answer the threads can owe.

use std::collections::VecDeque;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use uraid_engine::array::{IoId, IoResult, MemberIo, MemberIoError, MemberOp};

use super::notifier::{AnswerSender, Notifier};
use crate::target::MemberTarget;

/// One member's I/O threads, as the engine thread drives them.
pub(super) struct MemberThreads {
    queue: Sender<MemberIo>,
    answers: Receiver<(IoId, IoResult)>,
    /// Most I/Os handed to the threads and not answered yet: the capacity of both channels.
    depth: usize,
    /// I/Os handed to the threads whose answers the engine thread has not taken.
    in_flight: usize,
    /// I/Os waiting for `in_flight` to drop below `depth`, in arrival order.
    waiting: VecDeque<MemberIo>,
    /// Answers taken from the channel (or made here), not handed to the engine yet.
    done: Vec<(IoId, IoResult)>,
    threads: Vec<JoinHandle<()>>,
    /// The device's completed writes are durable as they are
    /// ([`crate::member::MemberDevice::flush_is_noop`]): flushes are answered here, at once.
    flush_is_noop: bool,
}

impl MemberThreads {
    /// Start `threads` I/O threads for the member in `slot`, named `{name}{n}`, with up to
    /// `depth` I/Os handed to them at once; their answers wake the engine thread through
    /// `notifier`.
    pub(super) fn spawn(
        slot: usize,
        name: &str,
        target: MemberTarget,
        threads: usize,
        depth: usize,
        notifier: &std::sync::Arc<Notifier>,
    ) -> MemberThreads {
        let depth = depth.max(1);
        let (qtx, qrx) = crossbeam_channel::bounded::<MemberIo>(depth);
        let (atx, arx) = AnswerSender::channel(depth, std::sync::Arc::clone(notifier));
        let threads = (0..threads.max(1))
            .map(|n| {
                let (qrx, atx, target) = (qrx.clone(), atx.clone(), target.clone());
                std::thread::Builder::new()
                    .name(format!("member{slot}-{name}{n}"))
                    .spawn(move || member_worker(qrx, target, atx))
                    .expect("spawning a member I/O thread")
            })
            .collect();
        let flush_is_noop = target.dev.flush_is_noop();
        MemberThreads {
            flush_is_noop,
            queue: qtx,
            answers: arx,
            depth,
            in_flight: 0,
            waiting: VecDeque::new(),
            done: Vec::new(),
            threads,
        }
    }

    /// Take a member I/O: to the threads if fewer than `depth` are out, else kept until fewer
    /// are.
    pub(super) fn queue(&mut self, io: MemberIo) {
        if self.flush_is_noop && matches!(io.op, MemberOp::Flush) {
            // It covers the writes completed before it, durable already.
            self.done.push((io.id, IoResult::Done));
        } else if self.in_flight < self.depth && self.waiting.is_empty() {
            self.hand_over(io);
        } else {
            self.waiting.push_back(io);
        }
    }

    /// Take a member I/O ahead of those waiting (the array's metadata, which writes wait for).
    pub(super) fn queue_first(&mut self, io: MemberIo) {
        if self.in_flight < self.depth {
            self.hand_over(io);
        } else {
            self.waiting.push_front(io);
        }
    }

    fn hand_over(&mut self, io: MemberIo) {
        match self.queue.try_send(io) {
            Ok(()) => self.in_flight += 1,
            // Not expected: the queue holds at most `in_flight` < `depth` I/Os.
            Err(TrySendError::Full(io)) => self.waiting.push_front(io),
            // The threads are gone (one panicked outside `perform`): fail the I/O, so nothing
            // waits for it.
            Err(TrySendError::Disconnected(io)) => {
                self.done.push((io.id, IoResult::Failed(MemberIoError::other("member I/O threads stopped"))))
            }
        }
    }

    /// Take the answers that came, and hand over waiting I/Os in the room they free. Whether
    /// any came.
    pub(super) fn reap(&mut self) -> bool {
        let mut any = false;
        while let Ok(answer) = self.answers.try_recv() {
            self.in_flight -= 1;
            self.done.push(answer);
            any = true;
        }
        while self.in_flight < self.depth {
            let Some(io) = self.waiting.pop_front() else { break };
            self.hand_over(io);
        }
        any
    }

    /// Whether answers wait to be taken.
    pub(super) fn has_answers(&self) -> bool {
        !self.done.is_empty() || !self.answers.is_empty()
    }

    /// The answers so far, for the engine.
    pub(super) fn take_done(&mut self) -> std::vec::Drain<'_, (IoId, IoResult)> {
        self.done.drain(..)
    }

    /// Whether nothing is handed over or waiting.
    pub(super) fn idle(&self) -> bool {
        self.in_flight == 0 && self.waiting.is_empty()
    }

    /// Finish everything handed over and waiting, waiting for it; the answers are in
    /// [`MemberThreads::take_done`].
    pub(super) fn drain(&mut self) {
        loop {
            self.reap();
            if self.idle() {
                return;
            }
            match self.answers.recv() {
                Ok(answer) => {
                    self.in_flight -= 1;
                    self.done.push(answer);
                }
                // Every thread is gone: what they held is never answered.
                Err(_) => return,
            }
        }
    }
}

impl Drop for MemberThreads {
    fn drop(&mut self) {
        // Closing the queue ends the threads once they have answered what it holds: their
        // answers have room, so they never wait on a channel nobody drains.
        let (closed, _) = crossbeam_channel::bounded(0);
        drop(std::mem::replace(&mut self.queue, closed));
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn member_worker(queue: Receiver<MemberIo>, target: MemberTarget, answers: AnswerSender<(IoId, IoResult)>) {
    for io in queue {
        // A panic here (perform refuses I/O outside the data area with one) must still answer
        // the engine, or the request would wait forever; the member is failed instead, which
        // stops further I/O to it.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.perform(&io)));
        let result = match outcome {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => IoResult::Failed(e),
            Err(_) => IoResult::Failed(MemberIoError::other(format!(
                "internal error on {} (see the panic message above)",
                target.dev.name()
            ))),
        };
        if answers.send((io.id, result.handing_back(io.op))).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::member::{MemberDevice, MemoryDevice};

    /// Memory that counts its flushes and says whether they are needed.
    struct Counted {
        mem: MemoryDevice,
        noop: bool,
        flushes: AtomicUsize,
    }

    impl MemberDevice for Counted {
        fn name(&self) -> &str {
            "counted"
        }
        fn size(&self) -> u64 {
            self.mem.size()
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
            self.mem.read_at(offset, buf)
        }
        fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            self.mem.write_at(offset, data)
        }
        fn flush(&self) -> std::io::Result<()> {
            self.flushes.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn flush_is_noop(&self) -> bool {
            self.noop
        }
    }

    fn flushes_reaching(noop: bool) -> usize {
        let dev = Arc::new(Counted { mem: MemoryDevice::new("m", 1 << 20), noop, flushes: AtomicUsize::new(0) });
        let target = MemberTarget {
            dev: Arc::clone(&dev) as Arc<dyn MemberDevice>,
            base: 0,
            data_bytes: 1 << 20,
            log_area: None,
        };
        let notifier = Arc::new(Notifier::new().unwrap());
        let mut threads = MemberThreads::spawn(0, "test", target, 1, 4, &notifier);
        threads.queue(MemberIo { id: 1, slot: 0, offset: 0, op: MemberOp::Flush });
        threads.drain();
        let answers: Vec<_> = threads.take_done().collect();
        assert_eq!(answers, vec![(1, IoResult::Done)]);
        dev.flushes.load(Ordering::SeqCst)
    }

    #[test]
    fn a_flush_reaches_the_device_unless_its_completed_writes_are_durable_already() {
        assert_eq!(flushes_reaching(false), 1);
        assert_eq!(flushes_reaching(true), 0, "answered at once, without the device");
    }
}
