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
    #[error("array is degraded ({missing} member(s) missing) and was not shut down cleanly; its partial parity log must be replayed before it can be read safely, which needs it opened writable")]
    DirtyDegradedReadOnly { missing: usize },
}
