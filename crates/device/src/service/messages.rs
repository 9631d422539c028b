//! What clients send the engine thread: the messages of its inbox, and the guard that answers a
//! request still waiting there when the engine thread is gone. (Member I/O and metadata answers
//! come on channels of their own; see `notifier`.)

use crossbeam_channel::Sender;

use crate::member::RemoteLimits;

use crate::array_policy::{ReturnBackoff, ReturnBackoffChange, ReturnBackoffError};

use super::{
    ArrayStatus, BlockOp, Done, ManageError, ManageOp, RemoteLimitsChange, RemoteLimitsError, ServiceError,
    SpeedLimitError, SpeedLimits, StopError, StopReport, SyncAction, SyncError,
};

/// A request's callback while the request waits in the engine thread's inbox. Dropped without
/// being taken, as the requests still in the inbox are when the engine thread ends after a
/// stop, it answers "stopping": no caller is left waiting for an answer that never comes.
pub(super) struct Pending(pub(super) Option<Done>);

impl Pending {
    pub(super) fn take(mut self) -> Done {
        self.0.take().expect("a pending request's callback is taken once")
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            done(Err(ServiceError::Stopping));
        }
    }
}

pub(super) enum Msg {
    Submit(BlockOp, Pending),
    Stop(Sender<Result<StopReport, StopError>>),
    Status(Sender<ArrayStatus>),
    StartSync(SyncAction, Sender<Result<(), SyncError>>),
    /// Stop the running pass (md's `idle`).
    Idle(Sender<()>),
    /// Answer once no pass is running.
    WaitIdle(Sender<ArrayStatus>),
    Manage(ManageOp, Sender<Result<String, ManageError>>),
    /// Reshape the array as `request` asks (more members, `add` being the new ones, another
    /// chunk size or layout), or change a raid1's number of copies (`force`: new slots may be
    /// left missing); answered once the reshape has started or the copies changed (or with
    /// why not).
    Grow {
        request: crate::reshape::ReshapeRequest,
        add: Vec<std::path::PathBuf>,
        force: bool,
        reply: Sender<Result<String, ManageError>>,
    },
    /// Change the array's level as md's takeover does, moving no data (`add`: devices for the
    /// slots the new level adds, rebuilt there); answered once the superblocks are written and
    /// the array served again in its new shape (or with why not).
    Takeover {
        request: uraid_md::takeover::TakeoverRequest,
        add: Vec<std::path::PathBuf>,
        reply: Sender<Result<String, ManageError>>,
    },
    /// Change the array's size or bitmap (md's `--grow --size`, `--bitmap`); answered once the
    /// change is written and the array served again (or with why not).
    Change {
        change: crate::md_change::MdChange,
        reply: Sender<Result<String, ManageError>>,
    },
    /// Change the passes' speed limits (either or both; neither: only say them).
    SpeedLimits {
        min: Option<u64>,
        max: Option<u64>,
        reply: Sender<Result<SpeedLimits, SpeedLimitError>>,
    },
    /// Change (or with an empty change, only say) the remote limits of one member, or of every
    /// member that has them.
    RemoteLimits {
        member: Option<String>,
        change: RemoteLimitsChange,
        reply: Sender<Result<Vec<(String, RemoteLimits)>, RemoteLimitsError>>,
    },
    /// Change (or with an empty change, only say) how often members lost for being unreachable
    /// are tried again.
    ReturnBackoff {
        change: ReturnBackoffChange,
        reply: Sender<Result<ReturnBackoff, ReturnBackoffError>>,
    },
}
