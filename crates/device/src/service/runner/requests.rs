//! Client requests on the engine thread: a `BlockOp` becomes one job of one or more engine
//! requests (zeroing in bounded pieces, FUA as a flush after), whose completions are gathered and
//! answered once; member failures the completions reveal are handed to the policy here too.

use uraid_engine::array::{Completion, Request};
use uraid_engine::{EngineError, IoBuf};

use super::{log, Runner};
use crate::array_policy::{WriteId, WriteStart};
use crate::service::{BlockOp, BlockReply, Done, ServiceError};

/// Largest zero-write the service puts in one engine request, and how many of them one zeroing
/// request keeps in flight: bounds the memory a huge WRITE_ZEROES can take.
const ZERO_PIECE: u64 = 1 << 20;
const ZERO_PIECES_IN_FLIGHT: usize = 8;

/// One client request, possibly several engine requests.
pub(super) struct Job {
    done: Option<Done>,
    /// Engine requests outstanding.
    outstanding: usize,
    data: Option<IoBuf>,
    error: Option<ServiceError>,
    /// Flush after the writes complete (FUA).
    then_flush: bool,
    writes: bool,
    /// A client flush: its answer, like a write's, waits for a member failure being recorded
    /// (a member failed since the writes it covers may come back at the next assembly with
    /// those writes missing from its cache, and a resync may take its copy: the flush would
    /// have promised what the array cannot keep).
    flush: bool,
    /// Zeros still to be written, as plain writes: `[next, end)`.
    zero_cursor: Option<(u64, u64)>,
    /// Engine requests waiting for the records the write needs (see `WriteStart::Parked`).
    pub(super) parked: Vec<Request>,
}

impl Job {
    /// The job fails with `error` (its first error is the one answered).
    pub(super) fn fail(&mut self, error: ServiceError) {
        self.error.get_or_insert(error);
    }
}

impl Runner {
    pub(super) fn accept(&mut self, op: BlockOp, done: Done) {
        if op.writes() && self.info.read_only {
            return done(Err(ServiceError::ReadOnly));
        }
        let size = self.info.size;
        let range_ok = |offset: u64, len: u64| match offset.checked_add(len) {
            Some(end) if end <= size => Ok(()),
            _ => Err(ServiceError::Engine(EngineError::OutOfRange { offset, len, size })),
        };
        let id = self.next_job;
        self.next_job += 1;
        let writes = op.writes();
        let mut job = Job {
            done: Some(done),
            outstanding: 0,
            data: None,
            error: None,
            then_flush: false,
            writes,
            flush: false,
            zero_cursor: None,
            parked: Vec::new(),
        };
        let job_range = match &op {
            BlockOp::Write { offset, data, .. } => (*offset, offset.saturating_add(data.len() as u64).min(size)),
            BlockOp::Trim { offset, len } | BlockOp::Zero { offset, len, .. } => {
                (*offset, offset.saturating_add(*len).min(size))
            }
            _ => (0, 0),
        };
        let job_range = (job_range.0.min(job_range.1), job_range.1);
        let mut requests = Vec::new();
        match op {
            BlockOp::Read { offset, len } => requests.push(Request::Read { offset, len }),
            BlockOp::Write { offset, data, fua } => {
                job.then_flush = fua;
                requests.push(Request::Write { offset, data });
            }
            BlockOp::Flush => {
                job.flush = true;
                requests.push(Request::Flush);
            }
            BlockOp::Trim { offset, len } => {
                if let Err(e) = range_ok(offset, len) {
                    return (job.done.take().expect("fresh job"))(Err(e));
                }
                let (lo, hi) = self.discardable(offset, len);
                if hi > lo && self.info.cheap_discard {
                    requests.push(Request::Discard { offset: lo, len: hi - lo });
                }
            }
            BlockOp::Zero { offset, len, may_deallocate, fua } => {
                if let Err(e) = range_ok(offset, len) {
                    return (job.done.take().expect("fresh job"))(Err(e));
                }
                job.then_flush = fua;
                if may_deallocate {
                    let (lo, hi) = self.discardable(offset, len);
                    if hi > lo {
                        requests.push(Request::Discard { offset: lo, len: hi - lo });
                        // The edges of a part-stripe range are written as zeros, the head now
                        // and the tail through the cursor.
                        if lo > offset {
                            requests.push(Request::Write { offset, data: (vec![0; (lo - offset) as usize]).into() });
                        }
                        if offset + len > hi {
                            job.zero_cursor = Some((hi, offset + len));
                        }
                    } else {
                        job.zero_cursor = Some((offset, offset + len));
                    }
                } else {
                    job.zero_cursor = Some((offset, offset + len));
                }
            }
        }
        if writes {
            // The policy records the array dirty first (on levels with redundancy, as md:
            // linear and raid0 have nothing a crash could leave inconsistent, and writes to them
            // may be done inline, without the engine thread; see [`inline`]) and sets the
            // write's bitmap bits; the write goes out once they are durable.
            let (lo, hi) = job_range;
            match self.policy.write_starts(&mut self.array, WriteId(id), lo..hi) {
                Ok(WriteStart::Go) => {}
                Ok(WriteStart::Parked) => {
                    job.parked = requests;
                    self.jobs.insert(id, job);
                    return;
                }
                Ok(WriteStart::Fail(e)) => {
                    // It must not go out unrecorded: it fails, and ends as any other.
                    job.fail(ServiceError::Metadata(e));
                    self.jobs.insert(id, job);
                    self.maybe_finish(id);
                    return;
                }
                Err(e) => return (job.done.take().expect("fresh job"))(Err(ServiceError::Metadata(e))),
            }
        }
        self.jobs.insert(id, job);
        for request in requests {
            self.submit_engine(id, request);
        }
        self.refill_zeros(id);
        self.maybe_finish(id);
    }

    /// levels, all of it elsewhere.
    pub(super) fn discardable(&self, offset: u64, len: u64) -> (u64, u64) {
        if !self.info.discards {
            return (0, 0);
        }
        match self.info.discard_granularity {
            Some(w) => {
                let lo = offset.div_ceil(w) * w;
                let hi = (offset + len) / w * w;
                if hi > lo {
                    (lo, hi)
                } else {
                    (0, 0)
                }
            }
            None => (offset, offset + len),
        }
    }

    pub(super) fn submit_engine(&mut self, job_id: u64, request: Request) {
        self.tell_time();
        match self.array.engine_mut().submit(request) {
            Ok(rid) => {
                self.owner.insert(rid, job_id);
                self.jobs.get_mut(&job_id).expect("live job").outstanding += 1;
            }
            Err(e) => {
                let job = self.jobs.get_mut(&job_id).expect("live job");
                job.error.get_or_insert(ServiceError::Engine(e));
            }
        }
    }

    /// Keep a zeroing job's plain zero-writes flowing, a bounded number at a time.
    pub(super) fn refill_zeros(&mut self, job_id: u64) {
        loop {
            let Some(job) = self.jobs.get_mut(&job_id) else { return };
            if job.error.is_some() || job.outstanding >= ZERO_PIECES_IN_FLIGHT {
                return;
            }
            let Some((next, end)) = job.zero_cursor else { return };
            let n = ZERO_PIECE.min(end - next);
            job.zero_cursor = (next + n < end).then_some((next + n, end));
            self.submit_engine(job_id, Request::Write { offset: next, data: (vec![0; n as usize]).into() });
        }
    }

    /// Record member failures, then route finished engine requests to their jobs (a write
    /// that finished with a member failing is answered once the failure is durable).
    pub(super) fn after_completions(&mut self) {
        self.note_failures();
        while let Some((rid, result)) = self.array.engine_mut().next_completion() {
            if self.policy.is_pass_step(rid) {
                // A pass above its minimum speed yields to clients with requests in flight.
                let foreground_busy = !self.jobs.is_empty();
                let now = self.now();
                self.policy.pass_step_done(&mut self.array, now, rid, result, foreground_busy);
                continue;
            }
            let job_id = self.owner.remove(&rid).expect("completion of an unknown engine request");
            let job = self.jobs.get_mut(&job_id).expect("live job");
            job.outstanding -= 1;
            match result {
                Ok(Completion::Read(d)) => job.data = Some(d),
                Ok(_) => {}
                Err(e) => {
                    job.error.get_or_insert(ServiceError::Engine(e));
                }
            }
            self.refill_zeros(job_id);
            self.maybe_finish(job_id);
        }
        // A pass that ended with its step, and writes its member failure released.
        self.policy_events();
    }

    /// Members the engine found failing leave the array; the survivors' metadata records it.
    pub(super) fn note_failures(&mut self) {
        let failed = self.array.note_events();
        for (name, offset, len) in self.array.take_corrected_read_errors() {
            log(&format!("member {name}: read error at byte {offset}+{len} of its data area, rebuilt from redundancy and rewritten"));
        }
        if !failed.is_empty() {
            for (name, reason) in &failed {
                log(&format!("member {name} failed and is out of the array: {reason}"));
            }
            self.report.failed_members.extend(failed);
            // Recorded, answers to writes held until it is durable, and a pass that cannot go
            // on degraded cut short.
            let now = self.now();
            self.policy.members_failed(&mut self.array, now);
            self.use_spare();
        }
    }

    pub(super) fn maybe_finish(&mut self, job_id: u64) {
        let job = self.jobs.get_mut(&job_id).expect("live job");
        if job.outstanding > 0 || (job.zero_cursor.is_some() && job.error.is_none()) {
            return;
        }
        if job.then_flush && job.error.is_none() {
            job.then_flush = false;
            self.submit_engine(job_id, Request::Flush);
            if self.jobs[&job_id].outstanding > 0 {
                return;
            }
        }
        let mut job = self.jobs.remove(&job_id).expect("live job");
        if job.writes {
            let now = self.now();
            self.policy.write_ends(WriteId(job_id), now);
        }
        let result = match (job.error.take(), job.data.take()) {
            (Some(e), _) => Err(e),
            (None, Some(d)) => Ok(BlockReply::Data(d)),
            (None, None) => Ok(BlockReply::Done),
        };
        // Before the client hears of it: a write that completed on fewer members than before
        // must not be followed by an inline read of the member that missed it.
        self.update_inline();
        let done = job.done.take().expect("job finished once");
        if job.writes || job.flush {
            self.answer_write(job_id, done, result);
        } else {
            done(result);
        }
    }
}
