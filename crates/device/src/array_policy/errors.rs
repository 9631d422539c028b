//! What can go wrong in the running array's policy: its metadata could not be updated, or a pass
//! could not be started.

use super::SyncAction;
use crate::error::OpenError;

/// Why the array's metadata (superblocks, write-intent bitmap) could not be updated while the
/// array runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    #[error("array is open read-only")]
    ReadOnly,
    /// Writing or flushing one member's metadata failed.
    #[error("{device}: {what}: {reason}")]
    Device { device: String, what: String, reason: String },
    /// The change could not be recorded (the metadata refused it); the text says why.
    #[error("{0}")]
    Other(String),
}

impl From<OpenError> for MetadataError {
    fn from(e: OpenError) -> MetadataError {
        match e {
            OpenError::ReadOnly => MetadataError::ReadOnly,
            OpenError::Metadata { device, what, reason } => MetadataError::Device { device, what, reason },
            OpenError::Io { device, what, source } => {
                MetadataError::Device { device, what: what.to_string(), reason: source.to_string() }
            }
            other => MetadataError::Other(other.to_string()),
        }
    }
}

/// Why a pass was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    #[error("array is stopping")]
    Stopping,
    #[error("a {0} is already running; stop it first (idle)")]
    AlreadyRunning(SyncAction),
    #[error("{level} has no redundancy to {action}")]
    NoRedundancy { level: String, action: SyncAction },
    #[error("array is read-only: cannot {0}")]
    ReadOnly(SyncAction),
    /// A check, repair or resync of parity needs every member (raid6 can do without one).
    #[error("array is degraded: cannot {0} parity without every member (md cannot either; uraid can for raid6 short of one member)")]
    Degraded(SyncAction),
    /// A rebuild was asked for, and no member is waiting for one.
    #[error("no member is waiting to be rebuilt")]
    NothingToRebuild,
    /// The array is being reshaped: the reshape is its pass until it ends.
    #[error("the array is being reshaped: no {0} until the reshape ends")]
    Reshaping(SyncAction),
    /// Marking the array dirty before a writing pass failed.
    #[error("updating the superblocks failed: {0}")]
    Metadata(MetadataError),
}
