//! Handing the engine's member I/O out, to each member's ring or I/O threads, and driving them
//! (submitting, reaping, handing the answers back to the engine, or to the metadata job whose
//! ops went down the same paths), paths retired from their slot included; answers that say a
//! member could not be reached are noted for its slot (see `member_return`).

use uraid_engine::array::{IoId, IoResult};

use super::metadata::is_metadata_io;
use super::{MemberPath, Runner};

impl Runner {
    /// A member path's answer: to the engine, or to the metadata job whose op it was. The
    /// caller tells the engine the time first, once for a batch of answers (a clock read per
    /// answer was a few percent of a 4 KiB raid5 write's CPU).
    fn hand_back(&mut self, id: IoId, result: IoResult) {
        if is_metadata_io(id) {
            self.metadata_io_answered(id, result);
        } else {
            self.array.engine_mut().complete_io(id, result);
        }
    }

    /// Hand the engine's member I/O to the members' paths (a ring's is submitted by
    /// [`Runner::drive_members`], so a batch of requests costs one submission per ring). Never
    /// waits: what a path has no room for waits on its side.
    pub(super) fn pump(&mut self) {
        while let Some(io) = self.array.engine_mut().next_io() {
            self.queues[io.slot].as_mut().expect("engine used an empty slot").queue(io);
        }
    }

    /// Submit what the rings hold, and hand what every path has answered to the engine, until
    /// none has answers ready. Whether any had.
    pub(super) fn drive_members(&mut self) -> bool {
        let mut any = false;
        // Reused across calls: this runs for every batch of requests.
        let mut done = std::mem::take(&mut self.io_done);
        loop {
            for path in self.queues.iter_mut().flatten() {
                path.submit();
                path.reap();
                done.extend(path.take_done());
            }
            for path in self.retired.iter_mut() {
                path.submit();
                path.reap();
                done.extend(path.take_done());
            }
            self.retired.retain(|p| !p.idle());
            if done.is_empty() {
                self.io_done = done;
                return any;
            }
            any = true;
            self.tell_time();
            for (id, result) in done.drain(..) {
                self.hand_back(id, result);
            }
            self.after_completions();
            self.pump();
        }
    }

    pub(super) fn members_have_answers(&mut self) -> bool {
        self.queues.iter_mut().flatten().chain(self.retired.iter_mut()).any(MemberPath::has_answers)
    }

    /// Finish what a member's path holds (it is being removed, or the service stops): wait for
    /// it, and hand the answers to the engine.
    pub(super) fn drain_path(&mut self, slot: usize) {
        if let Some(path) = self.queues[slot].as_mut() {
            path.drain();
            let done: Vec<_> = path.take_done().collect();
            self.tell_time();
            for (id, result) in done {
                self.hand_back(id, result);
            }
            self.after_completions();
        }
    }

    /// [`Runner::drain_path`] for the paths retired from their slots, which are then dropped.
    pub(super) fn drain_retired(&mut self) {
        for mut path in std::mem::take(&mut self.retired) {
            path.drain();
            self.tell_time();
            for (id, result) in path.take_done().collect::<Vec<_>>() {
                self.hand_back(id, result);
            }
        }
        self.after_completions();
    }

    /// Put `path` in `slot` (its device changed); the path it replaces is retired until its
    /// answers are all in.
    pub(super) fn set_path(&mut self, slot: usize, path: Option<MemberPath>) {
        if let Some(old) = std::mem::replace(&mut self.queues[slot], path) {
            self.retired.push(old);
        }
    }
}
