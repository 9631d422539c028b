//! `NestedArray`: the sans-I/O engine for a mirror whose copies are arrays of their own
//! ([`NestedLayout`]: a Vinum volume mirroring a raid5 plex with other plexes).
//!
//! Two levels of [`Array`], nothing new below them: an outer mirror whose members are the plexes,
//! and one inner array per plex over its members. An outer member I/O to a plex becomes a
//! request to that plex's array (a member read a read, a member write a write, which a raid5
//! plex turns into its own stripe update); the inner arrays' member I/Os are the ones the driver
//! performs, renumbered into the whole layout's slots. The driver sees one engine with the same
//! interface as [`Array`] ([`crate::Engine`]), one slot per member device.
//!
//! How plexes are kept, which decides what survives what:
//!
//! - A plex serves whole or not at all. A raid5 plex that loses one member stays in service,
//!   degraded (its own array reconstructs and rebuilds that member from parity). A plex that can
//!   no longer give every byte (a concatenated or striped plex losing a member, a raid5 plex
//!   losing two) is taken out as a whole: none of its members gets writes any more, so every one
//!   of them is reported failed, stale. Vinum keeps the other subdisks of such a plex up; uraid
//!   gives that up for mirrors with a raid5 plex, where the outer mirror cannot address part of a
//!   plex. What it costs: data is lost only when no plex is whole, where per-subdisk tracking
//!   could still have pieced some bytes together from two broken plexes.
//! - A plex out of service is revived whole once every one of its members is back (marked
//!   recovering): the outer mirror copies the volume onto it, the plex's array writing its
//!   stripes with reconstruct-write only, so each stripe's parity comes out of the data written
//!   last, whatever the members held before.
//! - Checks (`Request::Sync`) first check every raid5 plex's own parity (a degraded one's cannot
//!   be), then compare the plexes in service.
//! - While parity is owed a resync (after an unclean stop) and another plex serves whole, a raid5
//!   plex does not rebuild an unreadable row from that parity
//!   ([`Array::set_rebuild_from_unchecked_parity`]): the read fails and the outer mirror
//!   rebuilds the bytes from another plex; a raid5 plex that loses a member then is taken out.
//! - A recovery (`Request::Recover`) covers both levels over the same member range: plexes being
//!   revived whole (the outer mirror's members, as long as the volume) and members rebuilt
//!   inside a raid5 plex (as long as its members); the driver walks from 0 to the layout's
//!   member_data_bytes, the larger of the two.
//!
//! The code, by responsibility: `mod.rs` the array and its settings; `routing.rs` requests,
//! member I/O and completions flowing between the levels; `slots.rs` member states, plex
//! failures and revivals, and the events the driver hears.

mod routing;
mod slots;

use std::collections::{HashMap, VecDeque};

use crate::array::{Array, Completion, EngineEvent, ParityWriteChoice, RequestId};
use crate::error::EngineError;
use crate::geometry::{Geometry, NestedLayout};
use crate::idmap::IdMap;
use crate::member_io::{IoId, MemberIo};
use crate::read_balance::{ReadPolicy, SplitTuning};
use crate::slot::SlotState;

/// The engine for a mirror of arrays (see the module's documentation).
#[derive(Debug)]
pub struct NestedArray {
    /// The whole layout, as drivers see it.
    geometry: Geometry,
    layout: NestedLayout,
    /// The mirror of plexes.
    outer: Array,
    /// Each plex's own array; `None` while the plex is out of service and not being revived.
    plexes: Vec<Option<Array>>,
    /// Bumped whenever a plex's array is replaced, so that what the old one left in flight is
    /// recognised and dropped.
    plex_generation: Vec<u64>,
    /// Every member's state as the driver sees it, plex after plex.
    slots: Vec<SlotState>,
    next_request: RequestId,
    requests: IdMap<RequestId, routing::NestedOp>,
    /// Outer requests, by their outer id: the nested request each belongs to.
    outer_requests: IdMap<RequestId, RequestId>,
    /// Requests to plex arrays, by (plex, generation, request id): what each is for.
    inner_requests: HashMap<(usize, u64, RequestId), routing::InnerPurpose>,
    /// Outer member I/Os being served by a plex's array: (plex, generation).
    outer_ios: IdMap<IoId, (usize, u64)>,
    next_io: IoId,
    /// Member I/Os handed to the driver: (plex, generation, the plex array's I/O id).
    member_ios: IdMap<IoId, (usize, u64, IoId)>,
    outbox: VecDeque<MemberIo>,
    finished: VecDeque<(RequestId, Result<Completion, EngineError>)>,
    events: Vec<EngineEvent>,
    /// Settings every plex array gets, including those built later.
    resync_pending: bool,
    parity_write_choice: ParityWriteChoice,
    stripe_memory_limit: Option<u64>,
}

impl NestedArray {
    /// An engine over the mirror `geometry` describes, with one state per member slot of the
    /// whole layout. Fails when no plex can be read whole.
    pub fn new(geometry: Geometry, slots: Vec<SlotState>) -> Result<NestedArray, EngineError> {
        let layout = geometry.nested().expect("a nested layout").clone();
        assert_eq!(slots.len(), geometry.raid_disks(), "one state per slot");
        let n = layout.plexes().len();
        let mut array = NestedArray {
            outer: Array::new(layout.outer().clone(), vec![SlotState::InSync; n])?,
            geometry,
            plexes: (0..n).map(|_| None).collect(),
            plex_generation: vec![0; n],
            slots,
            next_request: 1,
            requests: IdMap::default(),
            outer_requests: IdMap::default(),
            inner_requests: HashMap::new(),
            outer_ios: IdMap::default(),
            next_io: 1,
            member_ios: IdMap::default(),
            outbox: VecDeque::new(),
            finished: VecDeque::new(),
            events: Vec::new(),
            resync_pending: false,
            parity_write_choice: ParityWriteChoice::default(),
            stripe_memory_limit: None,
            layout,
        };
        let outer_states = array.open_plexes();
        if !outer_states.contains(&SlotState::InSync) {
            return Err(EngineError::ArrayFailed);
        }
        array.outer = Array::new(array.layout.outer().clone(), outer_states)?;
        Ok(array)
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub fn size_bytes(&self) -> u64 {
        self.geometry.array_bytes()
    }

    /// Every member's state, plex after plex.
    pub fn slot_states(&self) -> &[SlotState] {
        &self.slots
    }

    /// Whether the engine may read member `slot`: in sync, or recovering in a raid5 plex being
    /// revived whole (whose reconstruct-writes read the bytes not yet copied, and write parity
    /// the copy then makes right).
    pub fn may_read(&self, slot: usize) -> bool {
        let (plex, _) = self.layout.plex_of(slot);
        match self.slots[slot] {
            SlotState::InSync => true,
            SlotState::Recovering => {
                self.outer.slot_states()[plex] == SlotState::Recovering && self.layout.plexes()[plex].is_parity()
            }
            SlotState::Missing | SlotState::Faulty => false,
        }
    }

    /// Whether any member is not in sync, or any plex out of service or being revived.
    pub fn degraded(&self) -> bool {
        self.slots.iter().any(|s| *s != SlotState::InSync) || self.outer.degraded()
    }

    /// Requests submitted and not yet returned by [`NestedArray::next_completion`].
    pub fn in_flight(&self) -> usize {
        self.requests.len() + self.finished.len()
    }

    /// The next member I/O to perform, if any.
    pub fn next_io(&mut self) -> Option<MemberIo> {
        self.outbox.pop_front()
    }

    /// The next finished request, if any.
    pub fn next_completion(&mut self) -> Option<(RequestId, Result<Completion, EngineError>)> {
        self.finished.pop_front()
    }

    /// Events since the last call, in the whole layout's slots.
    pub fn take_events(&mut self) -> Vec<EngineEvent> {
        std::mem::take(&mut self.events)
    }

    /// Whether a member failure waits to be taken with [`NestedArray::take_events`].
    pub fn failure_untaken(&self) -> bool {
        self.events.iter().any(|e| matches!(e, EngineEvent::MemberFailed { .. }))
    }

    /// Say whether copies and parity may be inconsistent (an unclean stop): the outer mirror
    /// then reads the first plex only, and raid5 plexes write by reconstruct-write.
    pub fn set_resync_pending(&mut self, pending: bool) {
        self.resync_pending = pending;
        self.outer.set_resync_pending(pending);
        for (p, plex) in self.plexes.iter_mut().enumerate() {
            if let Some(plex) = plex {
                // A plex being revived whole keeps writing by reconstruct-write until it is.
                plex.set_resync_pending(pending || self.outer.slot_states()[p] == SlotState::Recovering);
            }
        }
    }

    /// How raid5 plexes choose between read-modify-write and reconstruct-write.
    pub fn set_parity_write_choice(&mut self, choice: ParityWriteChoice) {
        self.parity_write_choice = choice;
        for plex in self.plexes.iter_mut().flatten() {
            plex.set_parity_write_choice(choice);
        }
    }

    /// How reads pick among the plexes.
    pub fn set_read_policy(&mut self, policy: ReadPolicy) {
        self.outer.set_read_policy(policy);
    }

    pub fn read_policy(&self) -> ReadPolicy {
        self.outer.read_policy()
    }

    pub fn set_nonrotational(&mut self, nonrot: bool) {
        self.outer.set_nonrotational(nonrot);
    }

    /// The driver's clock (see [`Array::set_now`]): the mirror of plexes measures each plex's
    /// reads by it. The plexes' own arrays have no copies to choose among.
    pub fn set_now(&mut self, now: std::time::Duration) {
        self.outer.set_now(now);
    }

    pub fn set_latency_balancing(&mut self, on: bool) {
        self.outer.set_latency_balancing(on);
    }

    pub fn latency_balancing(&self) -> bool {
        self.outer.latency_balancing()
    }

    pub fn nonrotational(&self) -> bool {
        self.outer.nonrotational()
    }

    pub fn split_tuning(&self) -> SplitTuning {
        self.outer.split_tuning()
    }

    pub fn set_split_tuning(&mut self, tuning: SplitTuning) {
        self.outer.set_split_tuning(tuning);
    }

    pub fn readahead_in_use(&self) -> u64 {
        self.outer.readahead_in_use()
    }

    /// Bound each plex's stripe buffers (see [`Array::set_stripe_memory_limit`]).
    pub fn set_stripe_memory_limit(&mut self, limit: u64) {
        self.stripe_memory_limit = Some(limit);
        for plex in self.plexes.iter_mut().flatten() {
            plex.set_stripe_memory_limit(limit);
        }
    }

    pub fn stripe_memory_limit(&self) -> u64 {
        self.plexes.iter().flatten().map(Array::stripe_memory_limit).max().unwrap_or(0)
    }

    pub fn stripe_memory_in_use(&self) -> u64 {
        self.plexes.iter().flatten().map(Array::stripe_memory_in_use).sum()
    }

    pub fn take_stripe_memory_peak(&mut self) -> u64 {
        self.plexes.iter_mut().flatten().map(Array::take_stripe_memory_peak).sum()
    }

    /// A plex array over `geometry` with the settings every plex gets.
    fn plex_array(&self, geometry: &Geometry, states: Vec<SlotState>) -> Result<Array, EngineError> {
        let mut array = Array::new(geometry.clone(), states)?;
        array.set_parity_write_choice(self.parity_write_choice);
        array.set_resync_pending(self.resync_pending);
        if let Some(limit) = self.stripe_memory_limit {
            array.set_stripe_memory_limit(limit);
        }
        Ok(array)
    }
}
