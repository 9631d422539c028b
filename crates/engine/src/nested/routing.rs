//! Requests, member I/O and completions flowing between the two levels: a request goes to the
//! outer mirror (and, for checks and recoveries, to the plexes' arrays too); an outer member I/O
//! to a plex becomes a request to the plex's array; the plexes' member I/Os go to the driver.

use super::NestedArray;
use crate::array::requests::check_range;
use crate::array::{Completion, Request, RequestId};
use crate::error::EngineError;
use crate::member_io::{IoId, IoResult, MemberIo, MemberIoError, MemberOp};
use crate::slot::SlotState;

/// What a request to a plex's array is for.
#[derive(Debug, Clone, Copy)]
pub(super) enum InnerPurpose {
    /// It serves this outer member I/O.
    OuterIo(IoId),
    /// It is the plex's part of this request (a parity check, a rebuild inside the plex).
    Part(RequestId),
}

/// What a request needs from the levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    /// Served by the outer mirror alone (reads, writes, flushes, discards).
    Outer,
    /// The raid5 plexes' parity checked first, then the plexes compared.
    Sync,
    /// Both levels' recovering members rebuilt over the same member range.
    Recover,
}

#[derive(Debug)]
pub(super) struct NestedOp {
    kind: OpKind,
    /// Parts submitted and not finished.
    pending: usize,
    mismatch_sectors: u64,
    error: Option<EngineError>,
    /// The outer request to submit once the plexes' parts are done.
    then: Option<Request>,
}

impl NestedArray {
    /// Accept a request (see [`crate::Array::submit`]).
    pub fn submit(&mut self, request: Request) -> Result<RequestId, EngineError> {
        let rid = self.next_request;
        let size = self.size_bytes();
        let mut op = NestedOp { kind: OpKind::Outer, pending: 0, mismatch_sectors: 0, error: None, then: None };
        match request {
            Request::Recover { offset, len } => {
                check_range(offset, len, self.geometry.member_data_bytes())?;
                op.kind = OpKind::Recover;
                if !self.rebuilding() {
                    return Err(EngineError::NothingToRecover);
                }
                // Empty past the members being rebuilt: the walk covers the longest level.
                let parts = self.recover_parts(offset, len);
                for (plex, part) in parts {
                    self.submit_part(rid, &mut op, plex, part);
                }
            }
            Request::Sync { offset, len, repair } => {
                check_range(offset, len, size)?;
                op.kind = OpKind::Sync;
                // A degraded raid5 plex's parity cannot be checked (md refuses to check a
                // degraded array); the comparison of the plexes still reads its data.
                for plex in 0..self.plexes.len() {
                    let whole = self.outer.slot_states()[plex] == SlotState::InSync;
                    let intact = self.plexes[plex].as_ref().is_some_and(|a| !a.degraded());
                    if whole && intact && self.layout.plexes()[plex].is_parity() {
                        self.submit_part(rid, &mut op, Some(plex), Request::Sync { offset, len, repair });
                    }
                }
                // Then the plexes in service are compared (md's mirrors compare the copies
                // that are there).
                op.then = Some(Request::Sync { offset, len, repair });
            }
            request => {
                if let Request::Discard { offset, len } = request {
                    check_range(offset, len, size)?;
                    if let Some(granularity) = self.geometry.discard_granularity() {
                        if offset % granularity != 0 || len % granularity != 0 {
                            return Err(EngineError::Unaligned { offset, len, granularity });
                        }
                    }
                }
                let orid = self.outer.submit(request)?;
                self.outer_requests.insert(orid, rid);
                op.pending = 1;
            }
        }
        self.next_request += 1;
        Ok(self.accepted(rid, op))
    }

    /// Request `rid` is under way with its first parts submitted: it waits for them, or goes on
    /// at once if none is out.
    fn accepted(&mut self, rid: RequestId, op: NestedOp) -> RequestId {
        if op.pending == 0 {
            self.advance(rid, op);
        } else {
            self.requests.insert(rid, op);
        }
        self.pump();
        rid
    }

    /// Check (or repair) the parity of plex `plex` alone over the mirror's bytes
    /// `[offset, offset+len)`, leaving the other plexes alone (gvinum's `checkparity` and
    /// `rebuildparity` of one raid5 plex). Completes as a [`Request::Sync`] does.
    pub fn submit_plex_sync(
        &mut self,
        plex: usize,
        offset: u64,
        len: u64,
        repair: bool,
    ) -> Result<RequestId, EngineError> {
        check_range(offset, len, self.size_bytes())?;
        let plexes = self.plexes.len();
        if plex >= plexes || !self.layout.plexes()[plex].is_parity() {
            return Err(EngineError::NoParityPlex { plex, plexes });
        }
        if self.outer.slot_states()[plex] != SlotState::InSync {
            return Err(EngineError::DegradedCheck);
        }
        let rid = self.next_request;
        self.next_request += 1;
        let mut op = NestedOp { kind: OpKind::Sync, pending: 0, mismatch_sectors: 0, error: None, then: None };
        self.submit_part(rid, &mut op, Some(plex), Request::Sync { offset, len, repair });
        Ok(self.accepted(rid, op))
    }

    /// Whether anything is being rebuilt: a plex revived whole, or a member inside a whole
    /// plex (a member recovering in a plex out of service waits for the others).
    fn rebuilding(&self) -> bool {
        let outer = self.outer.slot_states();
        outer.contains(&SlotState::Recovering)
            || self.plexes.iter().enumerate().any(|(p, plex)| {
                outer[p] == SlotState::InSync
                    && plex.as_ref().is_some_and(|a| a.slot_states().contains(&SlotState::Recovering))
            })
    }

    /// The parts of a recovery of member bytes `[offset, offset+len)`: the outer mirror's (`None`)
    /// while a plex is revived whole, and each whole plex's with a member rebuilt inside it.
    fn recover_parts(&self, offset: u64, len: u64) -> Vec<(Option<usize>, Request)> {
        let mut parts = Vec::new();
        let clip = |end: u64| (offset < end).then(|| Request::Recover { offset, len: len.min(end - offset) });
        if self.outer.slot_states().contains(&SlotState::Recovering) {
            parts.extend(clip(self.size_bytes()).map(|r| (None, r)));
        }
        for (p, plex) in self.plexes.iter().enumerate() {
            let Some(plex) = plex else { continue };
            if self.outer.slot_states()[p] == SlotState::InSync && plex.slot_states().contains(&SlotState::Recovering) {
                parts.extend(clip(plex.geometry().member_data_bytes()).map(|r| (Some(p), r)));
            }
        }
        parts
    }

    /// Submit one part of request `rid`: to plex `plex`'s array, or to the outer mirror.
    fn submit_part(&mut self, rid: RequestId, op: &mut NestedOp, plex: Option<usize>, part: Request) {
        let submitted = match plex {
            None => self.outer.submit(part).map(|orid| {
                self.outer_requests.insert(orid, rid);
            }),
            Some(p) => {
                let generation = self.plex_generation[p];
                let array = self.plexes[p].as_mut().expect("a plex in service");
                array.submit(part).map(|irid| {
                    self.inner_requests.insert((p, generation, irid), InnerPurpose::Part(rid));
                })
            }
        };
        match submitted {
            Ok(()) => op.pending += 1,
            Err(e) => {
                op.error.get_or_insert(e);
            }
        }
    }

    /// Account for a finished part of request `rid`.
    fn part_done(&mut self, rid: RequestId, result: Result<Completion, EngineError>) {
        let Some(mut op) = self.requests.remove(&rid) else { return };
        op.pending -= 1;
        if op.kind == OpKind::Outer {
            self.finished.push_back((rid, result));
            return;
        }
        match result {
            Ok(Completion::Synced { mismatch_sectors }) => op.mismatch_sectors += mismatch_sectors,
            Ok(_) => {}
            // A plex's own parity check cut short (a member lost under it, a row it could not
            // read) leaves the comparison of the plexes to come: it reads that plex too, and
            // rebuilds what it cannot read from another.
            Err(_) if op.kind == OpKind::Sync && op.then.is_some() => {}
            Err(e) => {
                op.error.get_or_insert(e);
            }
        }
        if op.pending == 0 {
            self.advance(rid, op);
        } else {
            self.requests.insert(rid, op);
        }
    }

    /// Request `rid` has no part in flight: submit what comes next, or finish it.
    fn advance(&mut self, rid: RequestId, mut op: NestedOp) {
        if op.error.is_none() {
            if let Some(next) = op.then.take() {
                self.submit_part(rid, &mut op, None, next);
                if op.pending > 0 {
                    self.requests.insert(rid, op);
                    return;
                }
            }
        }
        let result = match (op.error, op.kind) {
            (Some(e), _) => Err(e),
            (None, OpKind::Sync) => Ok(Completion::Synced { mismatch_sectors: op.mismatch_sectors }),
            (None, OpKind::Recover) => Ok(Completion::Recovered),
            (None, OpKind::Outer) => unreachable!("an outer request finishes with its outer completion"),
        };
        self.finished.push_back((rid, result));
    }

    /// Report the outcome of member I/O `id` (see [`crate::Array::complete_io`]).
    pub fn complete_io(&mut self, id: IoId, result: IoResult) {
        let (plex, generation, inner) = self.member_ios.remove(&id).expect("completion for an unknown member I/O");
        if generation == self.plex_generation[plex] {
            if let Some(array) = self.plexes[plex].as_mut() {
                array.complete_io(inner, result);
            }
        }
        self.pump();
    }

    /// Move everything that can move between the levels until nothing does.
    pub(super) fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some(io) = self.outer.next_io() {
                moved = true;
                self.route_outer_io(io);
            }
            for p in 0..self.plexes.len() {
                let generation = self.plex_generation[p];
                let Some(array) = self.plexes[p].as_mut() else { continue };
                let mut completions = Vec::new();
                while let Some(done) = array.next_completion() {
                    completions.push(done);
                }
                while let Some(io) = array.next_io() {
                    let id = self.next_io;
                    self.next_io += 1;
                    self.member_ios.insert(id, (p, generation, io.id));
                    let slot = self.layout.first_slot(p) + io.slot;
                    self.outbox.push_back(MemberIo { id, slot, ..io });
                    moved = true;
                }
                let events = array.take_events();
                moved |= !completions.is_empty() || !events.is_empty();
                for (irid, result) in completions {
                    self.inner_done(p, irid, result);
                }
                if !events.is_empty() {
                    self.plex_events(p, events);
                }
            }
            while let Some((orid, result)) = self.outer.next_completion() {
                moved = true;
                if let Some(rid) = self.outer_requests.remove(&orid) {
                    self.part_done(rid, result);
                }
            }
            let events = self.outer.take_events();
            if !events.is_empty() {
                moved = true;
                self.outer_events(events);
            }
            if !moved {
                break;
            }
        }
        self.trust_parity_where_alone();
    }

    /// While another plex serves whole, a read error meeting a raid5 plex's parity owed a
    /// resync is rebuilt from that plex, not from the parity; a plex serving alone rebuilds from
    /// its parity, as md's raid5 does, having nothing else.
    fn trust_parity_where_alone(&mut self) {
        let outer = self.outer.slot_states();
        let whole = outer.iter().filter(|s| **s == SlotState::InSync).count();
        for (p, plex) in self.plexes.iter_mut().enumerate() {
            if let Some(array) = plex {
                let alone = whole == 1 && outer[p] == SlotState::InSync;
                array.set_rebuild_from_unchecked_parity(alone);
            }
        }
    }

    /// An outer member I/O to a plex, as a request to the plex's array.
    fn route_outer_io(&mut self, io: MemberIo) {
        let p = io.slot;
        let request = match io.op {
            MemberOp::Read { len } => Request::Read { offset: io.offset, len },
            MemberOp::Write { data } => Request::Write { offset: io.offset, data: data.into_bytes() },
            MemberOp::Flush => Request::Flush,
            MemberOp::Discard { len } => Request::Discard { offset: io.offset, len },
            MemberOp::LogWrite { .. } | MemberOp::MetadataWrite { .. } => {
                let error = MemberIoError::other(format!("plex {p} takes no log or metadata writes"));
                self.outer.complete_io(io.id, IoResult::Failed(error));
                return;
            }
        };
        let generation = self.plex_generation[p];
        let submitted = match self.plexes[p].as_mut() {
            Some(array) => array.submit(request),
            None => Err(EngineError::ArrayFailed),
        };
        match submitted {
            Ok(irid) => {
                self.inner_requests.insert((p, generation, irid), InnerPurpose::OuterIo(io.id));
                self.outer_ios.insert(io.id, (p, generation));
            }
            Err(e) => {
                let error = MemberIoError::other(format!("plex {p}: {e}"));
                self.outer.complete_io(io.id, IoResult::Failed(error));
            }
        }
    }

    /// A request to plex `p`'s array finished.
    fn inner_done(&mut self, p: usize, irid: RequestId, result: Result<Completion, EngineError>) {
        let generation = self.plex_generation[p];
        match self.inner_requests.remove(&(p, generation, irid)) {
            Some(InnerPurpose::OuterIo(io)) => {
                self.outer_ios.remove(&io);
                let outcome = match result {
                    Ok(Completion::Read(data)) => IoResult::Read(data.into_bytes()),
                    Ok(_) => IoResult::Done,
                    Err(e) => IoResult::Failed(MemberIoError::other(format!("plex {p}: {e}"))),
                };
                self.outer.complete_io(io, outcome);
            }
            Some(InnerPurpose::Part(rid)) => self.part_done(rid, result),
            None => {}
        }
    }

    /// Plex `p`'s array is being replaced: what the old one was doing ends, failed (the outer
    /// mirror no longer trusts the plex, so it ignores those results but must hear of them).
    pub(super) fn abandon_plex(&mut self, p: usize) {
        let generation = self.plex_generation[p];
        self.plex_generation[p] += 1;
        let mut ios: Vec<IoId> =
            self.outer_ios.iter().filter(|(_, &(plex, g))| plex == p && g == generation).map(|(&io, _)| io).collect();
        ios.sort_unstable();
        for io in ios {
            self.outer_ios.remove(&io);
            let error = MemberIoError::other(format!("plex {p} was replaced"));
            self.outer.complete_io(io, IoResult::Failed(error));
        }
        let mut parts: Vec<(RequestId, RequestId)> = self
            .inner_requests
            .iter()
            .filter_map(|(&(plex, g, irid), purpose)| match purpose {
                InnerPurpose::Part(rid) if plex == p && g == generation => Some((irid, *rid)),
                _ => None,
            })
            .collect();
        parts.sort_unstable();
        self.inner_requests.retain(|&(plex, g, _), _| !(plex == p && g == generation));
        for (_, rid) in parts {
            self.part_done(rid, Err(EngineError::ArrayFailed));
        }
    }
}
