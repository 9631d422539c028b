//! `Engine`: an array engine of either shape, behind one interface for drivers.
//!
//! Most layouts run on one [`Array`]. A mirror whose copies are arrays of their own (a
//! [`NestedLayout`](crate::geometry::NestedLayout)) runs on a [`NestedArray`], two levels of
//! `Array`. Drivers hold an `Engine` and never ask which: every method here is the same method
//! of both.

use crate::array::{Array, Completion, EngineEvent, ParityWriteChoice, Request, RequestId};
use crate::error::EngineError;
use crate::geometry::Geometry;
use crate::member_io::{IoId, IoResult, MemberIo};
use crate::nested::NestedArray;
use crate::read_balance::{ReadPolicy, SplitTuning};
use crate::slot::SlotState;

/// The engine for one array, of whichever shape its layout needs.
///
/// Neither variant is boxed: an engine is made once per array and lives as long as it, so its
/// size does not matter, and the single-level one serves every request without a detour.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Engine {
    Array(Array),
    Nested(NestedArray),
}

/// Calls `$body` with `$engine` bound to the engine inside.
macro_rules! either {
    ($self:expr, $engine:ident => $body:expr) => {
        match $self {
            Engine::Array($engine) => $body,
            Engine::Nested($engine) => $body,
        }
    };
}

impl Engine {
    /// An engine over `geometry` with the given slot states: a [`NestedArray`] for a mirror of
    /// arrays, an [`Array`] for everything else.
    pub fn new(geometry: Geometry, slots: Vec<SlotState>) -> Result<Engine, EngineError> {
        if geometry.nested().is_some() {
            NestedArray::new(geometry, slots).map(Engine::Nested)
        } else {
            Array::new(geometry, slots).map(Engine::Array)
        }
    }

    /// The single-level engine, if this is one (what only such an engine has: the partial
    /// parity log).
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Engine::Array(array) => Some(array),
            Engine::Nested(_) => None,
        }
    }

    /// The single-level engine, mutably, if this is one.
    pub fn as_array_mut(&mut self) -> Option<&mut Array> {
        match self {
            Engine::Array(array) => Some(array),
            Engine::Nested(_) => None,
        }
    }

    pub fn geometry(&self) -> &Geometry {
        either!(self, e => e.geometry())
    }

    pub fn size_bytes(&self) -> u64 {
        either!(self, e => e.size_bytes())
    }

    pub fn slot_states(&self) -> &[SlotState] {
        either!(self, e => e.slot_states())
    }

    /// Whether the engine may read member `slot` (a driver's check of the protocol): in sync,
    /// or what [`NestedArray::may_read`] allows besides.
    pub fn may_read(&self, slot: usize) -> bool {
        match self {
            Engine::Array(array) => array.slot_states()[slot] == SlotState::InSync,
            Engine::Nested(nested) => nested.may_read(slot),
        }
    }

    pub fn set_slot_state(&mut self, slot: usize, state: SlotState, force: bool) -> Result<(), EngineError> {
        either!(self, e => e.set_slot_state(slot, state, force))
    }

    pub fn submit(&mut self, request: Request) -> Result<RequestId, EngineError> {
        either!(self, e => e.submit(request))
    }

    /// Requests from here on arrive together: parity writes that leave a stripe partly
    /// written are held, to be merged into whole stripes (see [`Array::plug`]). A mirror of
    /// arrays holds nothing: its plexes take the outer mirror's member writes one by one.
    pub fn plug(&mut self) {
        if let Engine::Array(array) = self {
            array.plug();
        }
    }

    /// The batch is over: what [`Engine::plug`] held goes in (see [`Array::unplug`]).
    pub fn unplug(&mut self) {
        if let Engine::Array(array) = self {
            array.unplug();
        }
    }

    /// How many write requests have been merged into another's write (see
    /// [`Array::writes_gathered`]).
    pub fn writes_gathered(&self) -> u64 {
        self.as_array().map_or(0, Array::writes_gathered)
    }

    pub fn complete_io(&mut self, id: IoId, result: IoResult) {
        either!(self, e => e.complete_io(id, result))
    }

    pub fn next_io(&mut self) -> Option<MemberIo> {
        either!(self, e => e.next_io())
    }

    pub fn next_completion(&mut self) -> Option<(RequestId, Result<Completion, EngineError>)> {
        either!(self, e => e.next_completion())
    }

    pub fn take_events(&mut self) -> Vec<EngineEvent> {
        either!(self, e => e.take_events())
    }

    pub fn failure_untaken(&self) -> bool {
        either!(self, e => e.failure_untaken())
    }

    pub fn degraded(&self) -> bool {
        either!(self, e => e.degraded())
    }

    pub fn in_flight(&self) -> usize {
        either!(self, e => e.in_flight())
    }

    pub fn set_resync_pending(&mut self, pending: bool) {
        either!(self, e => e.set_resync_pending(pending))
    }

    pub fn set_parity_write_choice(&mut self, choice: ParityWriteChoice) {
        either!(self, e => e.set_parity_write_choice(choice))
    }

    pub fn set_read_policy(&mut self, policy: ReadPolicy) {
        either!(self, e => e.set_read_policy(policy))
    }

    pub fn read_policy(&self) -> ReadPolicy {
        either!(self, e => e.read_policy())
    }

    pub fn set_nonrotational(&mut self, nonrot: bool) {
        either!(self, e => e.set_nonrotational(nonrot))
    }

    pub fn nonrotational(&self) -> bool {
        either!(self, e => e.nonrotational())
    }

    /// Tell the engine the time (see [`Array::set_now`]).
    pub fn set_now(&mut self, now: std::time::Duration) {
        either!(self, e => e.set_now(now))
    }

    pub fn set_latency_balancing(&mut self, on: bool) {
        either!(self, e => e.set_latency_balancing(on))
    }

    pub fn latency_balancing(&self) -> bool {
        either!(self, e => e.latency_balancing())
    }

    pub fn split_tuning(&self) -> SplitTuning {
        either!(self, e => e.split_tuning())
    }

    pub fn set_split_tuning(&mut self, tuning: SplitTuning) {
        either!(self, e => e.set_split_tuning(tuning))
    }

    pub fn readahead_in_use(&self) -> u64 {
        either!(self, e => e.readahead_in_use())
    }

    pub fn set_stripe_memory_limit(&mut self, limit: u64) {
        either!(self, e => e.set_stripe_memory_limit(limit))
    }

    pub fn stripe_memory_limit(&self) -> u64 {
        either!(self, e => e.stripe_memory_limit())
    }

    pub fn stripe_memory_in_use(&self) -> u64 {
        either!(self, e => e.stripe_memory_in_use())
    }

    pub fn take_stripe_memory_peak(&mut self) -> u64 {
        either!(self, e => e.take_stripe_memory_peak())
    }

    /// Check (or repair) the parity of one plex of a mirror of arrays alone (see
    /// [`NestedArray::submit_plex_sync`]); a single-level array has no plexes of its own.
    pub fn submit_plex_sync(
        &mut self,
        plex: usize,
        offset: u64,
        len: u64,
        repair: bool,
    ) -> Result<RequestId, EngineError> {
        match self {
            Engine::Nested(nested) => nested.submit_plex_sync(plex, offset, len, repair),
            Engine::Array(_) => Err(EngineError::NoParityPlex { plex, plexes: 0 }),
        }
    }

    /// Whether writes are logged (md's partial parity log; only single-level parity arrays).
    pub fn ppl_enabled(&self) -> bool {
        self.as_array().is_some_and(Array::ppl_enabled)
    }

    /// Whether a member failure holds the log (see [`Array::log_held`]).
    pub fn log_held(&self) -> bool {
        self.as_array().is_some_and(Array::log_held)
    }

    /// See [`Array::release_log_hold`].
    pub fn release_log_hold(&mut self) {
        if let Some(array) = self.as_array_mut() {
            array.release_log_hold();
        }
    }
}

/// The four calls that move requests through an engine, which drivers generic over the shape
/// (the synchronous loop of [`crate::blocking`], tests) need and every shape has.
pub trait RequestFlow {
    fn submit(&mut self, request: Request) -> Result<RequestId, EngineError>;
    fn next_io(&mut self) -> Option<MemberIo>;
    fn complete_io(&mut self, id: IoId, result: IoResult);
    fn next_completion(&mut self) -> Option<(RequestId, Result<Completion, EngineError>)>;
}

macro_rules! request_flow {
    ($t:ty) => {
        impl RequestFlow for $t {
            fn submit(&mut self, request: Request) -> Result<RequestId, EngineError> {
                <$t>::submit(self, request)
            }
            fn next_io(&mut self) -> Option<MemberIo> {
                <$t>::next_io(self)
            }
            fn complete_io(&mut self, id: IoId, result: IoResult) {
                <$t>::complete_io(self, id, result)
            }
            fn next_completion(&mut self) -> Option<(RequestId, Result<Completion, EngineError>)> {
                <$t>::next_completion(self)
            }
        }
    };
}

request_flow!(Array);
request_flow!(NestedArray);
request_flow!(Engine);

impl From<Array> for Engine {
    fn from(array: Array) -> Engine {
        Engine::Array(array)
    }
}
