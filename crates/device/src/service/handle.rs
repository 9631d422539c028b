//! `ServiceHandle`: what clients hold to submit requests and ask for the array's state from any
//! thread; reads and writes the members can do at once are answered on the caller's thread.

use std::sync::Arc;

use uraid_engine::IoBuf;

use super::inline;
use super::messages::{Msg, Pending};
use super::notifier::Inbox;
use super::types::SharedInfo;
use super::{
    ArrayStatus, BlockOp, BlockReply, Done, ManageError, ManageOp, RemoteLimitsChange, RemoteLimitsError, ServiceError,
    ServiceInfo, SpeedLimitError, SpeedLimits, SyncAction, SyncError,
};
use crate::member::RemoteLimits;
use crate::splice::PipedRead;

/// A handle for submitting requests; cheap to clone and send to other threads.
#[derive(Clone)]
pub struct ServiceHandle {
    pub(super) inbox: Inbox,
    pub(super) info: Arc<SharedInfo>,
    pub(super) inline: Arc<inline::InlineIo>,
}

impl ServiceHandle {
    /// The array's facts as they stand now (a change made while serving may replace them: see
    /// [`ServiceHandle::grow`]); a front end takes them once per connection.
    pub fn info(&self) -> Arc<ServiceInfo> {
        self.info.current()
    }

    /// Submit `op`; `done` is called once with its outcome: on the engine thread, or, for a
    /// request answered inline (see the `inline` module), on this thread before `submit` returns.
    pub fn submit(&self, op: BlockOp, done: Done) {
        match &op {
            BlockOp::Read { offset, len } => {
                if let Some(data) = self.inline.try_read(*offset, *len) {
                    return done(Ok(BlockReply::Data(IoBuf::from(data))));
                }
            }
            BlockOp::Write { offset, data, fua: false } if self.inline.try_write(*offset, data) => {
                return done(Ok(BlockReply::Done));
            }
            _ => {}
        }
        // Refused (the engine thread has ended), the request is dropped here, which answers it.
        let _ = self.inbox.send(Msg::Submit(op, Pending(Some(done))));
    }

    /// `[offset, offset+len)` read on this thread into a pipe of references to the members'
    /// pages, for a caller that sends it on to a socket with `splice(2)` (see
    /// [`crate::splice`]); `None` if that cannot be done now, and the read is then submitted
    /// as usual. The conditions are those of inline reads (see the `inline` module), up to
    /// [`crate::splice::PIPE_BYTES`] whatever the inline limit, as long as it is not 0.
    pub fn read_spliced(&self, offset: u64, len: u64) -> Option<PipedRead> {
        self.inline.try_splice(offset, len)
    }

    /// The array's state, members and any running pass.
    pub fn status(&self) -> Result<ArrayStatus, ServiceError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::Status(tx)).map_err(|_| ServiceError::Stopping)?;
        rx.recv().map_err(|_| ServiceError::Stopping)
    }

    /// Start a check, repair or resync over the whole array.
    pub fn start_sync(&self, action: SyncAction) -> Result<(), SyncError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::StartSync(action, tx)).map_err(|_| SyncError::Stopping)?;
        rx.recv().map_err(|_| SyncError::Stopping)?
    }

    /// Interrupt the running pass, if any (a resync interrupted is still needed).
    pub fn idle(&self) -> Result<(), ServiceError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::Idle(tx)).map_err(|_| ServiceError::Stopping)?;
        rx.recv().map_err(|_| ServiceError::Stopping)
    }

    /// Block until no pass is running (like `mdadm --wait`); returns the state then.
    pub fn wait_idle(&self) -> Result<ArrayStatus, ServiceError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::WaitIdle(tx)).map_err(|_| ServiceError::Stopping)?;
        rx.recv().map_err(|_| ServiceError::Stopping)
    }

    /// Change membership; returns what was done, in words.
    pub fn manage(&self, op: ManageOp) -> Result<String, ManageError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::Manage(op, tx)).map_err(|_| ManageError::Stopping)?;
        rx.recv().map_err(|_| ManageError::Stopping)?
    }

    /// Reshape the running array as `request` asks: onto more members, `add` being the new
    /// devices (md's `--grow --raid-devices` with `--add`), to another chunk size or layout, or
    /// several at once; returns once the reshape has started, which then runs in the background
    /// while requests go on. Refused, changing nothing, unless the array is a whole md
    /// raid4/5/6 with no pass running; fewer members are refused (the array would shrink under
    /// its clients). On an md raid1, `request.raid_devices` changes its number of copies as
    /// md's takeover does (more, `add` taking the new slots, which are then rebuilt, and with
    /// `force` the rest left missing; or fewer): the array is wound down as for a size change,
    /// its superblocks written, and served again.
    pub fn grow(
        &self,
        request: crate::reshape::ReshapeRequest,
        add: Vec<std::path::PathBuf>,
        force: bool,
    ) -> Result<String, ManageError> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::Grow { request, add, force, reply }).map_err(|_| ManageError::Stopping)?;
        rx.recv().map_err(|_| ManageError::Stopping)?
    }

    /// Change the running md array's level as `mdadm --grow --level` does where md moves no
    /// data (its takeovers: raid0 to raid4/5/10 and back, raid1 of two to raid5 and back,
    /// raid5 to raid6 with Q on a new last device and back), `add` giving the devices for the
    /// slots the new level adds (rebuilt there at once; without them, with `request.force` where
    /// md allows, the slots stay missing). The array is wound down as for a size change, the
    /// superblocks written as on a stopped array, and the array served again in its new shape:
    /// the size is unchanged; new connections are told the new level's block sizes. Returns what
    /// was done.
    pub fn take_over(
        &self,
        request: uraid_md::takeover::TakeoverRequest,
        add: Vec<std::path::PathBuf>,
    ) -> Result<String, ManageError> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::Takeover { request, add, reply }).map_err(|_| ManageError::Stopping)?;
        rx.recv().map_err(|_| ManageError::Stopping)?
    }

    /// Change the running array's size or write-intent bitmap as `change` asks (md's `--grow
    /// --size`, `--bitmap`): the array is wound down as for a grow (requests in flight
    /// answered, members flushed, marked clean), the superblocks (and bitmap) are written as on
    /// a stopped array, and it is served again, requests that came meanwhile included. The
    /// added space is served to new connections at once (clients learn the size when
    /// they connect); its resync runs at once. Returns what was done.
    pub fn change(&self, change: crate::md_change::MdChange) -> Result<String, ManageError> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::Change { change, reply }).map_err(|_| ManageError::Stopping)?;
        rx.recv().map_err(|_| ManageError::Stopping)?
    }

    /// Set the minimum and/or maximum speed of background passes (md's `speed_limit_min` and
    /// `speed_limit_max`, for this array), the running pass's included; with neither, only ask.
    /// Returns the limits in force afterwards. Refused, changing nothing, when the minimum would
    /// be above the maximum or the maximum 0; `Ok(None)` when the service has stopped.
    pub fn speed_limits(&self, min: Option<u64>, max: Option<u64>) -> Result<Option<SpeedLimits>, SpeedLimitError> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        if self.inbox.send(Msg::SpeedLimits { min, max, reply }).is_err() {
            return Ok(None);
        }
        rx.recv().map_or(Ok(None), |r| r.map(Some))
    }

    /// Change the remote limits (request timeout, reconnection) of `member`, or of every member
    /// reached over a network; with an empty change, only say them. Returns each such member's
    /// limits in force afterwards.
    pub fn remote_limits(
        &self,
        member: Option<String>,
        change: RemoteLimitsChange,
    ) -> Result<Vec<(String, RemoteLimits)>, RemoteLimitsError> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::RemoteLimits { member, change, reply }).map_err(|_| RemoteLimitsError::Stopping)?;
        rx.recv().map_err(|_| RemoteLimitsError::Stopping)?
    }

    /// Change how often members lost for being unreachable are tried again (an empty change
    /// only asks); the backoff in force afterwards. `None` once the array is stopping.
    pub fn return_backoff(
        &self,
        change: crate::array_policy::ReturnBackoffChange,
    ) -> Option<Result<crate::array_policy::ReturnBackoff, crate::array_policy::ReturnBackoffError>> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        self.inbox.send(Msg::ReturnBackoff { change, reply }).ok()?;
        rx.recv().ok()
    }

    /// Submit `op` and wait for its outcome.
    pub fn call(&self, op: BlockOp) -> Result<BlockReply, ServiceError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.submit(
            op,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or(Err(ServiceError::Stopping))
    }
}
