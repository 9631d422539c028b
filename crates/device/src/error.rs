//! `OpenError`: what can go wrong opening, assembling and driving an array over real devices.
//! Shared by the synchronous driver ([`crate::open_array`]), the partial parity log at assembly
//! ([`crate::ppl`]) and the members' metadata I/O.

use uraid_engine::{EngineError, MemberIoError};

use crate::probe::ProbeError;

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// A member that cannot take part as it is (no superblock, too small, bad bitmap); the
    /// text names the device and the problem.
    #[error("{0}")]
    BadMember(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{device}: {what}: {source}")]
    Io { device: String, what: &'static str, source: std::io::Error },
    /// A member I/O of a request failed (and with it the request).
    #[error(transparent)]
    MemberIo(#[from] MemberIoError),
    #[error("{device}: {what}: {reason}")]
    Metadata { device: String, what: String, reason: String },
    #[error("array is degraded ({missing} member(s) missing) and was not shut down cleanly: parity may not match the data, so rebuilt data could be wrong; refusing to assemble (md refuses too)")]
    DirtyDegraded { missing: usize },
    /// An operation this array's format does not have.
    #[error("{0}")]
    Unsupported(String),
    #[error("array is open read-only")]
    ReadOnly,
    /// The array is part-way through a reshape and was to be opened writable.
    #[error(transparent)]
    Reshaping(ReshapeRefusal),
    #[error("array is degraded ({missing} member(s) missing) and was not shut down cleanly; its partial parity log must be replayed before it can be read safely, which needs it opened writable")]
    DirtyDegradedReadOnly { missing: usize },
    /// A degraded array part-way through a reshape: it is read only through the reshape, which
    /// goes round the missing members.
    #[error("array is part-way through a reshape and degraded ({missing} member(s) missing): uraid reads it only by continuing the reshape (uraid grow --continue MEMBERS, or uraid assemble or serve it, which continue it in the background)")]
    ReshapingDegraded { missing: usize },
    /// A reshape in place stopped inside its critical section: the data there is whole only in
    /// its backup, which continuing the reshape restores.
    #[error("{0}")]
    CriticalSection(String),
}

/// Why an array part-way through a reshape is not opened for writing: which array, and how far
/// the reshape has come, in mdadm's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "array {array} is part-way through a reshape ({change}; reshape position {position_kib}K of {array_kib}K): \
     until it is finished uraid writes it only while continuing the reshape (uraid serve or assemble, \
     for a reshape that adds members), and otherwise only reads it (uraid cat, uraid detail, serve and \
     mount with --read-only); finish it with uraid grow --continue on the stopped members, by serving \
     it, or let the kernel (mdadm --assemble)"
)]
pub struct ReshapeRefusal {
    /// The array's name, else its UUID.
    pub array: String,
    /// What the reshape changes, as `mdadm --examine` says it ("4->5 devices").
    pub change: String,
    /// How far it has come, in KiB of the array (md's `reshape_position` / 2).
    pub position_kib: u64,
    /// The array's size in KiB.
    pub array_kib: u64,
}
