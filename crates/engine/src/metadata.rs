//! A running array's on-disk metadata, as a format-neutral sans-I/O state machine.
//!
//! Every format uraid runs (md today; Vinum and RAIDframe next) records the same few things
//! while an array runs: whether it may be inconsistent (clean or dirty), which device holds
//! which slot and in what state, how far a rebuild or a resync has come, and, where the format
//! has one, which regions a crash could have left inconsistent (a write-intent bitmap). Each
//! format keeps them in its own bytes with its own rules (md's event counts, Vinum's
//! configuration text, RAIDframe's component labels and modification counter).
//!
//! [`ArrayMetadata`] is the interface between the engine's drivers and a format. The driver
//! tells it what changed ([`MetaChange`], with the membership as the engine sees it); the format
//! answers with a [`Ticket`] and queues the member writes and flushes that make the change
//! durable, in the order the format needs, as [`MetaStep`]s: the ops of one step may run in any
//! order or at once, and a step starts only after the step before it has completed. The driver
//! performs them through its member I/O path and reports back; a ticket is durable once every
//! step up to and including its own has completed. Nothing here reads a clock or touches a
//! device: time comes in as [`UnixSeconds`], bytes go out as [`MetaOp`]s. That is what lets the
//! fault simulator crash an array between and inside these writes and assemble it again from
//! the bytes, with the same code that serves it.

use std::collections::VecDeque;
use std::fmt;
use std::ops::Range;

use bytes::Bytes;

use crate::slot::SlotState;

mod write_intent;

pub use write_intent::WriteIntentBits;

/// Wall-clock time in whole seconds since the Unix epoch, handed in by the driver.
pub type UnixSeconds = u64;

/// A metadata update, in the order recorded: durable once [`ArrayMetadata::durable`] reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

/// One metadata I/O on a member device. Offsets are absolute byte offsets on the device (the
/// metadata lives outside the data area the engine's member I/O addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaOp {
    /// Write `data` at byte `offset` of device `device` (an index into the driver's devices).
    Write { device: usize, offset: u64, data: Bytes, what: MetaWhat },
    /// Make every completed write of `device` durable.
    Flush { device: usize },
}

impl MetaOp {
    /// The device the op goes to.
    pub fn device(&self) -> usize {
        match self {
            MetaOp::Write { device, .. } | MetaOp::Flush { device } => *device,
        }
    }
}

/// What a metadata write holds, for messages and for the fault simulator's accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaWhat {
    /// The format's per-device label (md's superblock, RAIDframe's component label, Vinum's
    /// drive header and configuration).
    Label,
    /// The write-intent bitmap (header and bits).
    Bitmap,
    /// A partial parity log's header.
    Log,
}

impl fmt::Display for MetaWhat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MetaWhat::Label => "writing superblock",
            MetaWhat::Bitmap => "writing bitmap",
            MetaWhat::Log => "writing log header",
        })
    }
}

/// Ops that may run in any order or at once; the next step waits for all of them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetaStep {
    pub ops: Vec<MetaOp>,
    /// The last ticket this step completes.
    pub completes: Option<Ticket>,
}

/// What one device is to the array, as the driver and the engine see it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceRole {
    /// Holds `slot`, in the state the engine has for it; `rebuilt` is how far a recovering slot
    /// has been rebuilt (bytes of member data, from the data start).
    Slot { slot: usize, state: SlotState, rebuilt: u64 },
    /// Part of the array, holding no slot: used when a slot needs a device.
    Spare,
    /// Failed, removed or left out: the format records it as no longer part of the array.
    Out,
}

/// A state change the array records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaChange {
    /// A write is about to be let through an array recorded clean: record it dirty first.
    Dirty,
    /// No write is in flight and the members are flushed: record the array clean (unless a
    /// resync is still owed, when only membership changes are recorded).
    Clean,
    /// Membership changed (a device failed, was added, removed, became a spare, or finished
    /// rebuilding): record the roles without changing clean/dirty.
    Roles,
    /// Regions (in the format's intent units) that writes are about to touch: record them
    /// before the writes go out. Nothing is queued when they are recorded already.
    IntentSet(Range<u64>),
    /// Regions no write has touched for a while and whose writes are all durable: forget them.
    IntentClear(Range<u64>),
    /// A resync has made everything below `array_bytes` consistent (recorded with the next
    /// update, as md records `recovery_cp`).
    ResyncCheckpoint { array_bytes: u64 },
    /// A resync or repair has made all redundancy consistent.
    ResyncDone,
}

/// Why a metadata change could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    #[error("the array is open read-only")]
    ReadOnly,
    #[error("device {device}: {what} failed: {reason}")]
    Io {
        device: usize,
        what: String,
        reason: String,
        /// The device could not be reached (see [`crate::array::MemberIoError::member_unreachable`]).
        unreachable: bool,
    },
    #[error("{0}")]
    Format(String),
}

/// A running array's metadata in one on-disk format.
pub trait ArrayMetadata: Send {
    /// Record `change`, with the devices' roles as they are now (one per device the driver
    /// holds, in the driver's order). Returns the ticket that is durable once the change is on
    /// disk, or `None` when nothing needed writing.
    fn record(
        &mut self,
        change: MetaChange,
        devices: &[DeviceRole],
        now: UnixSeconds,
    ) -> Result<Option<Ticket>, MetaError>;

    /// The next step to perform, if one is ready (none while a step is out).
    fn next_step(&mut self) -> Option<MetaStep>;

    /// The step handed out last has completed (every op done), or one of its ops failed.
    fn step_done(&mut self, result: Result<(), MetaError>);

    /// Membership changed (a device failed, or a rebuild moved on) and the driver will record
    /// it with a later update: that update counts as a membership change (md's
    /// `MD_SB_CHANGE_DEVS`, which never takes an event back).
    fn membership_changed(&mut self);

    /// The step handed out last failed on `device`, and the driver has failed that device (as
    /// md fails a member whose superblock cannot be written): the step is to be performed again
    /// without it, and so are the queued steps; no ticket is lost. The driver records the new
    /// membership with a later update.
    fn step_failed_on(&mut self, device: usize);

    /// Whether `ticket` is durable.
    fn durable(&self, ticket: Ticket) -> bool;

    /// Whether the array is recorded dirty (or about to be, once queued writes land).
    fn is_dirty(&self) -> bool;

    /// Whether the metadata says writes may be in flight, so that a write needs nothing recorded
    /// before it goes out: recorded dirty, and not as an idle record (one that notes how far a
    /// resync owed has come, which holds only while no write is in flight).
    fn writes_recorded(&self) -> bool;

    /// Whether a resync is owed before the array may be recorded clean.
    fn needs_resync(&self) -> bool;

    /// Where a resync may resume, in array bytes (0: from the start, for formats that keep no
    /// resync checkpoint).
    fn resync_checkpoint(&self) -> u64 {
        0
    }

    /// The format's write-intent log (md's bitmap, RAIDframe's parity map) as it stands in
    /// memory, when the array keeps one: which regions writes are marked in, and how large a
    /// region is. `None` for formats and arrays without one.
    fn write_intent(&self) -> Option<&WriteIntentBits> {
        None
    }
}

/// The queue every format keeps behind [`ArrayMetadata`]: its updates as steps in order, the
/// one step out with the driver, how far updates are durable, and the failure that ends them.
/// A format decides what to write; this keeps the protocol of handing it out the same for all.
#[derive(Debug, Default)]
pub struct StepQueue {
    /// Steps not yet handed out, in order.
    queue: VecDeque<MetaStep>,
    /// The step out with the driver.
    out: Option<MetaStep>,
    /// Tickets issued so far.
    issued: u64,
    durable_through: u64,
    failed: Option<MetaError>,
}

impl StepQueue {
    pub fn new() -> StepQueue {
        StepQueue::default()
    }

    /// Queue `steps` (empty ones dropped); the last completes a new ticket, returned. `None`
    /// when nothing is left to write.
    pub fn push(&mut self, mut steps: Vec<MetaStep>) -> Option<Ticket> {
        steps.retain(|s| !s.ops.is_empty());
        if steps.is_empty() {
            return None;
        }
        self.issued += 1;
        let ticket = Ticket(self.issued);
        if let Some(last) = steps.last_mut() {
            last.completes = Some(ticket);
        }
        self.queue.extend(steps);
        Some(ticket)
    }

    /// Keep only the queued steps (not the one out) for which `keep` holds: a format drops
    /// steps a newer update supersedes. Their tickets complete with a later one's.
    pub fn retain_queued(&mut self, keep: impl FnMut(&MetaStep) -> bool) {
        self.queue.retain(keep);
    }

    /// What every [`ArrayMetadata::record`] checks first: no step has failed, the array is
    /// writable, and one role was given per device.
    pub fn admit(&self, writable: bool, roles: usize, devices: usize) -> Result<(), MetaError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if !writable {
            return Err(MetaError::ReadOnly);
        }
        if roles != devices {
            return Err(MetaError::Format(format!("{roles} device roles given for {devices} devices")));
        }
        Ok(())
    }

    /// [`ArrayMetadata::next_step`].
    pub fn next_step(&mut self) -> Option<MetaStep> {
        if self.out.is_some() || self.failed.is_some() {
            return None;
        }
        let step = self.queue.pop_front()?;
        self.out = Some(step.clone());
        Some(step)
    }

    /// [`ArrayMetadata::step_done`]: a failure ends every update still queued.
    pub fn step_done(&mut self, result: Result<(), MetaError>) {
        let Some(MetaStep { completes, .. }) = self.out.take() else { return };
        match result {
            Ok(()) => {
                if let Some(t) = completes {
                    self.durable_through = self.durable_through.max(t.0);
                }
            }
            Err(e) => {
                self.queue.clear();
                self.failed = Some(e);
            }
        }
    }

    /// The step out failed on a device the driver has failed: it is to be performed again,
    /// and so are the queued steps, without the ops for which `gone` holds. Ops that completed
    /// on other devices are performed again: they write the same bytes.
    pub fn without(&mut self, gone: impl Fn(&MetaOp) -> bool) {
        let keep = |step: &mut MetaStep| step.ops.retain(|op| !gone(op));
        if let Some(mut step) = self.out.take() {
            keep(&mut step);
            self.queue.push_front(step);
        }
        self.queue.iter_mut().for_each(keep);
    }

    /// The step out with the driver, if one is.
    pub fn out(&self) -> Option<&MetaStep> {
        self.out.as_ref()
    }

    /// [`ArrayMetadata::durable`].
    pub fn durable(&self, ticket: Ticket) -> bool {
        ticket.0 <= self.durable_through
    }

    /// Why no more metadata can be written, once a step failed.
    pub fn failed(&self) -> Option<&MetaError> {
        self.failed.as_ref()
    }

    /// The newest update queued, if any.
    pub fn newest(&self) -> Option<Ticket> {
        (self.issued > 0).then_some(Ticket(self.issued))
    }
}
