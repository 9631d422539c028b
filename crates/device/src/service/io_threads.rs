//! Member I/O on threads: a queue of one member's I/O, the threads that perform it with the
//! blocking calls of [`MemberTarget::perform`], and the channel of their answers, which the engine
//! thread drains as it reaps a ring's completions. The members without a ring use them, and a
//! ring hands them what it cannot do itself.
//!
//! Small reads and writes the member can do without waiting (a file on tmpfs, a page-cache hit)
//! are done by the engine thread itself as it hands them over, up to [`ENGINE_IO_MAX`]: on such
//! members a member thread's round trip (a channel each way, a wake-up, a sleep) costs more than
//! the I/O. A 4 KiB raid5 write is four member I/Os, and with them done in place uraid spent
//! half the CPU per write (BENCHMARKS.md, section 12). The engine may have several I/Os of a
//! member in flight at once (the threads already reorder them), so doing one early changes no
//! guarantee it relies on; what refuses is handed over as before, and errors are left to the
//! threads, which report them.
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
    /// The member, for I/Os done on the engine thread itself when the device can do them
    /// without waiting, and the largest such I/O (0: none; see the module's text).
    target: MemberTarget,
    now_max: u64,
    /// I/Os left to hand over without trying them in place, after the member refused one
    /// (see [`SKIP_AFTER_REFUSAL`]).
    now_skip: u32,
}

/// Member I/Os of at most this many bytes are tried on the engine thread (see the module's
/// text). Above it the member threads copying in parallel win: fio's 64 KiB random writes over
/// NBD on raid5 went slower with them done in place, 16 KiB ones faster (BENCHMARKS.md,
/// section 12).
pub(super) const ENGINE_IO_MAX: u64 = 16 << 10;

/// After a member refuses an I/O in place (it would wait: a page-cache miss, a file system
/// without `RWF_NOWAIT` writes, a member on another host), this many of its next I/Os go
/// straight to its threads, so a member that can never answer in place costs one refused
/// system call per this many I/Os, not one each.
const SKIP_AFTER_REFUSAL: u32 = 64;

impl MemberThreads {
    /// Start `threads` I/O threads for the member in `slot`, named `{name}{n}`, with up to
    /// `depth` I/Os handed to them at once; their answers wake the engine thread through
    /// `notifier`. Reads and writes of at most `now_max` bytes are tried in place first.
    pub(super) fn spawn(
        slot: usize,
        name: &str,
        target: MemberTarget,
        threads: usize,
        depth: usize,
        now_max: u64,
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
            target,
            now_max,
            now_skip: 0,
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
        } else if let Some(result) = self.try_in_place(&io) {
            self.done.push((io.id, result.handing_back(io.op)));
        } else if self.in_flight < self.depth && self.waiting.is_empty() {
            self.hand_over(io);
        } else {
            self.waiting.push_back(io);
        }
    }

    /// `io` done here, on the engine thread, if it is small and the member does it without
    /// waiting.
    fn try_in_place(&mut self, io: &MemberIo) -> Option<IoResult> {
        let len = match &io.op {
            MemberOp::Read { len } => *len,
            MemberOp::Write { data } => data.len() as u64,
            _ => return None,
        };
        // Too large is no refusal: the next small one is tried.
        if len == 0 || len > self.now_max {
            return None;
        }
        if self.now_skip > 0 {
            self.now_skip -= 1;
            return None;
        }
        let result = self.target.perform_now(io);
        if result.is_none() {
            self.now_skip = SKIP_AFTER_REFUSAL;
        }
        result
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
    use std::mem::MaybeUninit;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    use bytes::Bytes;
    use uraid_engine::IoBuf;

    use super::*;
    use crate::member::{MemberDevice, MemoryDevice};

    /// Memory that counts its flushes and its in-place attempts, and says whether flushes are
    /// needed and whether it does I/O in place.
    struct Counted {
        mem: MemoryDevice,
        noop: bool,
        flushes: AtomicUsize,
        in_place: AtomicBool,
        tries: AtomicUsize,
    }

    impl Counted {
        fn new(noop: bool, in_place: bool) -> Arc<Counted> {
            Arc::new(Counted {
                mem: MemoryDevice::new("m", 1 << 20),
                noop,
                flushes: AtomicUsize::new(0),
                in_place: AtomicBool::new(in_place),
                tries: AtomicUsize::new(0),
            })
        }
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
        fn read_now(&self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> std::io::Result<bool> {
            self.tries.fetch_add(1, Ordering::SeqCst);
            if !self.in_place.load(Ordering::SeqCst) {
                return Ok(false);
            }
            self.mem.read_now(offset, buf)
        }
        fn write_now(&self, offset: u64, data: &[u8]) -> std::io::Result<bool> {
            self.tries.fetch_add(1, Ordering::SeqCst);
            if !self.in_place.load(Ordering::SeqCst) {
                return Ok(false);
            }
            self.mem.write_now(offset, data)
        }
        fn flush(&self) -> std::io::Result<()> {
            self.flushes.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn flush_is_noop(&self) -> bool {
            self.noop
        }
    }

    fn threads_on(dev: &Arc<Counted>, now_max: u64) -> MemberThreads {
        let target = MemberTarget {
            dev: Arc::clone(dev) as Arc<dyn MemberDevice>,
            base: 0,
            data_bytes: 1 << 20,
            log_area: None,
        };
        let notifier = Arc::new(Notifier::new().unwrap());
        MemberThreads::spawn(0, "test", target, 1, 4, now_max, &notifier)
    }

    fn flushes_reaching(noop: bool) -> usize {
        let dev = Counted::new(noop, false);
        let mut threads = threads_on(&dev, 0);
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

    fn write(id: IoId, offset: u64, len: usize, byte: u8) -> MemberIo {
        MemberIo { id, slot: 0, offset, op: MemberOp::Write { data: IoBuf::from(Bytes::from(vec![byte; len])) } }
    }

    #[test]
    fn small_io_a_member_does_without_waiting_is_answered_as_it_is_handed_over() {
        let dev = Counted::new(false, true);
        let mut threads = threads_on(&dev, 16 << 10);
        threads.queue(write(1, 4096, 4096, 0xa5));
        // No thread was asked: the answer is there before anything is reaped.
        let answers: Vec<_> = threads.take_done().collect();
        assert!(matches!(answers.as_slice(), [(1, IoResult::Written(_))]), "{answers:?}");
        assert!(threads.idle());
        threads.queue(MemberIo { id: 2, slot: 0, offset: 4096, op: MemberOp::Read { len: 8192 } });
        let answers: Vec<_> = threads.take_done().collect();
        let [(2, IoResult::Read(bytes))] = answers.as_slice() else { panic!("{answers:?}") };
        assert_eq!(&bytes[..4096], &[0xa5; 4096][..]);
        assert_eq!(&bytes[4096..], &[0; 4096][..]);
        // Larger than the limit: to the threads, answered once they have done it.
        threads.queue(write(3, 0, 32 << 10, 0x5a));
        assert_eq!(threads.take_done().count(), 0);
        threads.drain();
        let answers: Vec<_> = threads.take_done().collect();
        assert!(matches!(answers.as_slice(), [(3, IoResult::Written(_))]), "{answers:?}");
        let mut back = vec![0; 32 << 10];
        dev.mem.read_at(0, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0x5a));
        // Flushes are never done in place.
        threads.queue(MemberIo { id: 4, slot: 0, offset: 0, op: MemberOp::Flush });
        threads.drain();
        assert_eq!(threads.take_done().count(), 1);
        assert_eq!(dev.flushes.load(Ordering::SeqCst), 1);
        assert_eq!(dev.tries.load(Ordering::SeqCst), 2, "only the two small I/Os were tried in place");
        // Nor did the large write keep the next small one from being tried.
        threads.queue(write(5, 0, 4096, 1));
        assert_eq!(threads.take_done().count(), 1, "answered as it was handed over");
        assert_eq!(dev.tries.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_member_that_refuses_in_place_is_handed_its_io_and_asked_again_only_after_a_while() {
        let dev = Counted::new(false, false);
        let mut threads = threads_on(&dev, 16 << 10);
        for id in 0..=u64::from(SKIP_AFTER_REFUSAL) {
            threads.queue(write(id, id * 4096 % (1 << 20), 4096, id as u8));
            threads.drain();
            let answers: Vec<_> = threads.take_done().collect();
            assert!(matches!(answers.as_slice(), [(i, IoResult::Written(_))] if *i == id), "{answers:?}");
        }
        // The first was tried and refused; the next SKIP_AFTER_REFUSAL went straight over.
        assert_eq!(dev.tries.load(Ordering::SeqCst), 1);
        let mut back = [0u8; 1];
        dev.mem.read_at(4096 * 7, &mut back).unwrap();
        assert_eq!(back[0], 7, "the threads wrote what was refused in place");
        // Then it is asked again, and once it takes I/O in place, it keeps being asked.
        dev.in_place.store(true, Ordering::SeqCst);
        threads.queue(write(100, 0, 4096, 1));
        threads.queue(write(101, 4096, 4096, 2));
        let answers: Vec<_> = threads.take_done().collect();
        assert_eq!(answers.len(), 2, "{answers:?}");
        assert_eq!(dev.tries.load(Ordering::SeqCst), 3);
    }
}
