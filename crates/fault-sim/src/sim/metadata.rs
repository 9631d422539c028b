//! The running array's policy and its metadata, in virtual time. The run drives the service's
//! own policy (`uraid_device::array_policy::ArrayPolicy`): it decides when the array is marked
//! dirty and clean, which writes wait for which records, when bitmap bits clear, and which pass
//! is owed, and it hands out metadata jobs (md's superblock, bitmap and log-header writes, and
//! member flushes) and pass steps. The run performs the metadata jobs as simulated member I/O
//! with latencies, so a crash lands between and inside them like any other write, torn sectors
//! included, and submits the pass steps to the engine like any other request.
//!
//! Client requests keep their order: while a write waits for its records, later client requests
//! wait behind it, so the model's rule that reads see every write submitted before them holds.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use uraid_device::array_policy::{PolicyEvent, WriteId as PolicyWrite, WriteStart};
use uraid_engine::array::{Completion, Request, RequestId, SlotState};
use uraid_engine::metadata::{MetaError, MetaOp, MetaWhat};
use uraid_engine::EngineError;

use crate::member_device::device_id;
use crate::model::{FlushToken, WriteId};

/// Flushes are known to the policy by their request id with this bit set, apart from writes.
const FLUSH_ANSWER: u64 = 1 << 63;

use super::{Failure, Invariant, MetaFlight, Mutation, Pending, Queued, Sim, SimFormat, Verify};

/// The metadata job out on the members.
struct Out {
    left: usize,
    error: Option<MetaError>,
}

impl MetaRun {
    /// Whether a metadata op of the job out failed on device `dev`: the array fails that member
    /// when the job completes, so it counts as lost from now on.
    pub(super) fn failed_on(&self, dev: usize) -> bool {
        self.failed_devices.contains(&dev)
    }
}

/// The run's side of the policy: what it performs for it and what waits on it.
#[derive(Default)]
pub(super) struct MetaRun {
    out: Option<Out>,
    /// Client requests waiting, in arrival order: a write until the policy releases it, anything
    /// after it until it has gone.
    parked: VecDeque<(Option<WriteId>, Request, Pending)>,
    /// Parked writes the policy has released (or failed) and that wait only for those before.
    released: BTreeSet<WriteId>,
    failed: Vec<(WriteId, String)>,
    /// Writes whose answers the policy holds while a member failure is being recorded...
    held: BTreeSet<WriteId>,
    /// ...and flushes, by `FLUSH_ANSWER | request id`, with what they cover.
    held_flushes: BTreeMap<u64, FlushToken>,
    next_id: u64,
    /// The running pass's steps with the engine.
    pub(super) steps: BTreeSet<RequestId>,
    /// Devices on which an op of the job out failed.
    failed_devices: BTreeSet<usize>,
}

impl MetaRun {
    pub(super) fn has_parked(&self) -> bool {
        !self.parked.is_empty()
    }
}

impl Sim {
    /// The policy's clock: virtual time.
    pub(super) fn clock(&self) -> Duration {
        Duration::from_nanos(self.now)
    }

    /// Hand a client request to the engine, or park it behind the records it needs (see the
    /// module docs).
    pub(super) fn submit_client(&mut self, request: Request, pending: Pending) -> Result<(), Failure> {
        let mut parked_write = None;
        if let Pending::Write { wid } = pending {
            let range = match &request {
                Request::Write { offset, data } => *offset..*offset + data.len() as u64,
                Request::Discard { offset, len } => *offset..*offset + *len,
                other => unreachable!("a client write is {other:?}"),
            };
            match self.policy.write_starts(&mut self.open, PolicyWrite(wid), range) {
                Ok(WriteStart::Go) => {}
                Ok(WriteStart::Parked) => parked_write = Some(wid),
                Ok(WriteStart::Fail(e)) => {
                    self.policy.write_ends(PolicyWrite(wid), self.clock());
                    return self.client_write_failed(wid, request, e.to_string());
                }
                Err(e) => return self.client_write_failed(wid, request, e.to_string()),
            }
            self.policy_events()?;
        }
        if parked_write.is_some() || self.meta.has_parked() {
            trace!(self, "client request parked{}", if parked_write.is_some() { " for its records" } else { "" });
            self.client_inflight += 1;
            self.meta.parked.push_back((parked_write, request, pending));
            return Ok(());
        }
        self.submit(request, pending)?;
        Ok(())
    }

    fn client_write_failed(&mut self, wid: WriteId, request: Request, why: String) -> Result<(), Failure> {
        self.inflight_writes.remove(&wid);
        self.model.write_failed(wid);
        let what = match request {
            Request::Write { offset, data } => format!("write {offset}+{}", data.len()),
            Request::Discard { offset, len } => format!("discard {offset}+{len}"),
            other => format!("{other:?}"),
        };
        self.request_failed(what, format!("metadata: {why}"))
    }

    /// A client write completed: its answer counts now, or once the member failure being
    /// recorded is durable.
    pub(super) fn write_answered(&mut self, wid: WriteId) {
        if self.policy.hold_answer(&self.open, PolicyWrite(wid)) {
            self.meta.held.insert(wid);
        } else {
            self.model.write_acked(wid);
        }
    }

    /// A client flush completed: what it covers counts as durable now, or once the member
    /// failure being recorded is durable (the service holds its answer until then).
    pub(super) fn flush_answered(&mut self, rid: RequestId, token: FlushToken) {
        let id = FLUSH_ANSWER | rid;
        if self.policy.hold_answer(&self.open, PolicyWrite(id)) {
            self.meta.held_flushes.insert(id, token);
        } else {
            self.flush_durable(token);
        }
    }

    fn flush_durable(&mut self, token: FlushToken) {
        self.model.flush_done(token);
        if self.last_flush.is_none_or(|t| t.0 < token.0) {
            self.last_flush = Some(token);
        }
    }

    /// A client write ended (answered or failed).
    pub(super) fn write_ended(&mut self, wid: WriteId) -> Result<(), Failure> {
        self.policy.write_ends(PolicyWrite(wid), self.clock());
        self.policy_events()
    }

    /// Do what the policy decided, in its order.
    pub(super) fn policy_events(&mut self) -> Result<(), Failure> {
        // What the run last knew: a resync owed until now that no longer is has completed.
        let resync_owed = self.needs_resync;
        while let Some(event) = self.policy.take_event() {
            match event {
                PolicyEvent::WriteReleased(PolicyWrite(w)) => {
                    self.meta.released.insert(w);
                }
                PolicyEvent::WriteFailed(PolicyWrite(w), e) => self.meta.failed.push((w, e.to_string())),
                PolicyEvent::AnswerReleased(PolicyWrite(w)) => {
                    if let Some(token) = self.meta.held_flushes.remove(&w) {
                        self.flush_durable(token);
                    } else if self.meta.held.remove(&w) {
                        self.model.write_acked(w);
                    }
                }
                PolicyEvent::PassEnded { summary } => trace!(self, "policy: {summary}"),
                PolicyEvent::RebuildRecorded => {
                    trace!(self, "policy: rebuild recorded");
                    // The devices this record makes in sync, with those of a record before it
                    // that is not durable yet either (this one is queued after it).
                    let states = self.open.engine().slot_states();
                    let mut rebuilt: Vec<usize> = (0..states.len())
                        .filter(|&s| states[s] == SlotState::InSync)
                        .filter_map(|s| self.slot_dev[s])
                        .filter(|d| self.rebuilding.contains(d))
                        .collect();
                    self.rebuilding.retain(|d| !rebuilt.contains(d));
                    if let Some((t, before)) = self.rebuilt_unrecorded.take() {
                        if !self.open.metadata_durable(t) {
                            rebuilt.extend(before);
                        }
                    }
                    self.rebuilt_unrecorded = self.open.metadata_pending().map(|t| (t, rebuilt));
                    self.report.rebuilds += 1;
                    self.verify.push(Verify::AfterRebuild);
                }
                PolicyEvent::Notice(line) => trace!(self, "policy: {line}"),
                PolicyEvent::FailuresRecorded => self.spares_join()?,
            }
        }
        if resync_owed && !self.open.needs_resync() {
            self.report.resyncs += 1;
            self.verify.push(Verify::AfterResync);
        }
        self.needs_resync = self.open.needs_resync();
        self.release_parked()
    }

    /// Hand the parked requests that may go to the engine, in order.
    fn release_parked(&mut self) -> Result<(), Failure> {
        for (wid, why) in std::mem::take(&mut self.meta.failed) {
            let Some(i) = self.meta.parked.iter().position(|p| p.0 == Some(wid)) else { continue };
            let (_, request, _) = self.meta.parked.remove(i).expect("found");
            self.client_inflight -= 1;
            self.policy.write_ends(PolicyWrite(wid), self.clock());
            self.client_write_failed(wid, request, why)?;
        }
        while let Some((wid, _, _)) = self.meta.parked.front() {
            if let Some(w) = wid {
                if !self.meta.released.remove(w) {
                    return Ok(());
                }
            }
            let (_, request, pending) = self.meta.parked.pop_front().expect("looked at");
            self.client_inflight -= 1;
            self.submit(request, pending)?;
        }
        Ok(())
    }

    /// Start the policy's next metadata job when none is out, and its pass's next step when none
    /// is with the engine.
    pub(super) fn drive_policy(&mut self) -> Result<(), Failure> {
        let now = self.clock();
        if self.policy.next_deadline(&self.open).is_some_and(|at| at <= now) {
            self.policy.run_timers(&mut self.open, now);
        }
        // A job with nothing to do (every op was for a member failed meanwhile) is done at once,
        // and the next one taken.
        while self.meta.out.is_none() {
            let Some(job) = self.policy.next_metadata_io(&mut self.open) else { break };
            self.meta.out = Some(Out { left: job.ops.len(), error: None });
            if job.ops.is_empty() {
                self.metadata_job_done()?;
                continue;
            }
            for (_, op) in job.ops {
                self.schedule_metadata(op)?;
            }
        }
        // As many steps as the policy gives out (it bounds how many are in flight).
        while let Some(request) = self.policy.next_pass_step(&mut self.open, now) {
            let submitted = self.open.engine_mut().submit(request.clone());
            if let Ok(rid) = submitted {
                trace!(self, "request #{rid} submitted: pass step {request:?}");
                self.reqs.insert(rid, Pending::Step);
                self.meta.steps.insert(rid);
                self.last_rid = rid;
            }
            self.policy.pass_step_submitted(&mut self.open, now, submitted);
        }
        self.policy_events()
    }

    /// The pass's step completed.
    pub(super) fn pass_step_done(
        &mut self,
        rid: RequestId,
        result: Result<Completion, EngineError>,
    ) -> Result<(), Failure> {
        self.meta.steps.remove(&rid);
        if let Err(e) = &result {
            trace!(self, "pass step failed: {e}");
        }
        let busy = self.client_inflight > 0;
        let now = self.clock();
        self.policy.pass_step_done(&mut self.open, now, rid, result, busy);
        self.policy_events()
    }

    /// When the policy next has something to do by itself, if anything.
    pub(super) fn policy_deadline(&self) -> Option<u64> {
        self.policy.next_deadline(&self.open).map(|d| d.as_nanos() as u64)
    }

    fn schedule_metadata(&mut self, op: MetaOp) -> Result<(), Failure> {
        let idx = op.device();
        let name = self.open.metadata_device_name(idx).unwrap_or_default().to_string();
        let Some(dev) = device_id(&name) else {
            return Err(self.fail(Invariant::Protocol, format!("a metadata op for device {idx} ({name:?}), unknown")));
        };
        let len = match &op {
            MetaOp::Write { data, offset, .. } => {
                if !self.devices[dev].in_range(*offset, data.len() as u64) {
                    return Err(self.fail(
                        Invariant::Protocol,
                        format!("a metadata write at {offset}+{} past the end of d{dev}", data.len()),
                    ));
                }
                data.len() as u64
            }
            MetaOp::Flush { .. } => 0,
        };
        let base = self.latency[dev];
        let latency = match op {
            MetaOp::Flush { .. } => base * 2 + self.rng.between(0, base * 3),
            MetaOp::Write { .. } => base / 2 + self.rng.between(0, base) + len * 2,
        };
        let id = self.meta.next_id;
        self.meta.next_id += 1;
        let done_at = self.now + latency;
        self.queue.insert((done_at, self.seq), Queued::Metadata(id));
        self.seq += 1;
        let mark = matches!(op, MetaOp::Flush { .. }).then(|| self.devices[dev].flush_mark());
        trace!(self, "  meta {id} issue {} d{dev} +{len}", meta_op_name(&op));
        self.fingerprint(id.rotate_left(40) ^ dev as u64 ^ len << 20 ^ done_at);
        self.meta_ios.insert(id, MetaFlight { op, dev, mark });
        Ok(())
    }

    pub(super) fn complete_metadata_io(&mut self, id: u64) -> Result<(), Failure> {
        let f = self.meta_ios.remove(&id).expect("a scheduled metadata I/O");
        let d = &mut self.devices[f.dev];
        let result = if d.dead {
            Err("member is dead".to_string())
        } else {
            match &f.op {
                // The planted Vinum bugs: a save that skips a drive, or forgets the unclean mark.
                MetaOp::Write { .. } if self.cfg.mutation == Some(Mutation::VinumSaveSkipsDrive) && f.dev != 0 => {
                    Ok(())
                }
                MetaOp::Write { offset, data, .. }
                    if self.cfg.mutation == Some(Mutation::VinumNoDirtyMark)
                        && *offset == uraid_vinum_format::header::HEADER_OFFSET =>
                {
                    d.write(*offset, &without_unclean_mark(data))
                }
                MetaOp::Write { offset, data, .. }
                    if self.cfg.mutation == Some(Mutation::RaidframeNoDirtyRecord)
                        && self.format == SimFormat::Raidframe =>
                {
                    d.write(*offset, &without_dirty_record(*offset, data))
                }
                MetaOp::Write { offset, data, what: MetaWhat::Bitmap, .. }
                    if self.cfg.mutation == Some(Mutation::RaidframeMapSkipsRegions)
                        && self.format == SimFormat::Raidframe =>
                {
                    d.write(*offset, &vec![0; data.len()])
                }
                MetaOp::Write { offset, data, .. } => d.write(*offset, data),
                MetaOp::Flush { .. } => {
                    d.flush_done(f.mark.expect("flushes carry a mark"));
                    Ok(())
                }
            }
        };
        trace!(self, "  meta {id} done {} d{}: {result:?}", meta_op_name(&f.op), f.dev);
        self.report.metadata_ios += 1;
        if result.is_err() {
            self.meta.failed_devices.insert(f.dev);
        }
        let out = self.meta.out.as_mut().expect("a metadata I/O belongs to the job out");
        out.left -= 1;
        if let Err(reason) = result {
            let what = match &f.op {
                MetaOp::Write { what, .. } => what.to_string(),
                MetaOp::Flush { .. } => "flushing metadata".to_string(),
            };
            out.error.get_or_insert(MetaError::Io { device: f.op.device(), what, reason, unreachable: false });
        }
        if out.left == 0 {
            self.metadata_job_done()?;
        }
        Ok(())
    }

    fn metadata_job_done(&mut self) -> Result<(), Failure> {
        let out = self.meta.out.take().expect("a job was out");
        self.meta.failed_devices.clear();
        let result = out.error.map_or(Ok(()), Err);
        if let Err(e) = &result {
            trace!(self, "metadata job failed: {e}");
        }
        let now = self.clock();
        self.policy.metadata_io_done(&mut self.open, now, result);
        // A member whose metadata could not be written may have been failed for it.
        self.pump_events()?;
        self.policy_events()
    }
}

/// A gvinum drive header as written, its `last_update` moved back off the unclean mark if it
/// carries it (the bytes as they are if they are not a header).
fn without_unclean_mark(header: &[u8]) -> Vec<u8> {
    use uraid_vinum_format::DriveHeader;
    let Ok(mut h) = DriveHeader::parse(header) else { return header.to_vec() };
    if !h.label.last_update.marks_unclean() {
        return header.to_vec();
    }
    h.label.last_update.microseconds -= 1;
    match h.to_bytes() {
        Ok(bytes) => {
            let mut out = header.to_vec();
            out[..bytes.len()].copy_from_slice(&bytes);
            out
        }
        Err(_) => header.to_vec(),
    }
}

fn meta_op_name(op: &MetaOp) -> String {
    match op {
        MetaOp::Write { what, .. } => what.to_string(),
        MetaOp::Flush { .. } => "flush".into(),
    }
}

/// A RAIDframe label or parity map as written, with what says "dirty" taken out: the label's
/// clean flag set, the map's regions all clear.
fn without_dirty_record(offset: u64, data: &bytes::Bytes) -> Vec<u8> {
    use uraid_raidframe_format::label::{ComponentLabel, RAID_CLEAN};
    use uraid_raidframe_format::layout::{parity_map_offset, LABEL_OFFSET};
    if offset == LABEL_OFFSET {
        if let Ok(mut label) = ComponentLabel::parse(data) {
            label.clean = RAID_CLEAN;
            return label.to_area(data.len());
        }
    } else if offset == parity_map_offset(512) {
        return vec![0; data.len()];
    }
    data.to_vec()
}
