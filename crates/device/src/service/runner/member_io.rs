//! Handing the engine's member I/O out: to a member's I/O threads through their queue, or into its
//! ring, and driving the rings (submitting, reaping, handing completions back to the engine).

use uraid_engine::array::{IoResult, MemberIoError};

use super::{MemberPath, Runner};

impl Runner {
    /// Hand the engine's member I/O to the workers, or put it in the members' rings (submitted
    /// by [`Runner::drive_rings`], so a batch of requests costs one submission per ring).
    pub(super) fn pump(&mut self) {
        while let Some(io) = self.array.engine_mut().next_io() {
            match self.queues[io.slot].as_mut().expect("engine used an empty slot") {
                MemberPath::Ring(ring) => ring.queue(io),
                MemberPath::Threads(queue) => {
                    if let Err(crossbeam_channel::SendError(io)) = queue.send(io) {
                        // The workers are gone (only at the very end); fail the I/O so nothing
                        // waits.
                        self.array
                            .engine_mut()
                            .complete_io(io.id, IoResult::Failed(MemberIoError::other("member I/O threads stopped")));
                        self.after_completions();
                    }
                }
            }
        }
    }

    /// Submit what the rings hold and hand their completions to the engine, until they have
    /// none ready. Whether any completed.
    pub(super) fn drive_rings(&mut self) -> bool {
        let mut any = false;
        // Reused across calls: this runs for every batch of requests.
        let mut done = std::mem::take(&mut self.ring_done);
        loop {
            for path in self.queues.iter_mut().flatten() {
                if let MemberPath::Ring(ring) = path {
                    ring.submit();
                    ring.reap();
                    done.extend(ring.take_done());
                }
            }
            if done.is_empty() {
                self.ring_done = done;
                return any;
            }
            any = true;
            for (id, result) in done.drain(..) {
                self.array.engine_mut().complete_io(id, result);
            }
            self.after_completions();
            self.finish_sync_if_done();
            self.pump();
        }
    }

    pub(super) fn rings_have_completions(&mut self) -> bool {
        self.queues.iter_mut().flatten().any(|p| match p {
            MemberPath::Ring(r) => r.has_completions(),
            MemberPath::Threads(_) => false,
        })
    }

    /// Finish what a member's ring holds (it is being removed, or the service stops): wait for
    /// it, and hand the answers to the engine.
    pub(super) fn drain_ring(&mut self, slot: usize) {
        if let Some(MemberPath::Ring(ring)) = self.queues[slot].as_mut() {
            ring.drain();
            let done: Vec<_> = ring.take_done().collect();
            for (id, result) in done {
                self.array.engine_mut().complete_io(id, result);
            }
            self.after_completions();
        }
    }
}
