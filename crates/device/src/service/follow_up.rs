//! The second step of a level change that needs a restripe, as mdadm chains them on a running
//! array: the server makes it itself once the first step has ended and the array is idle and
//! whole (the rebuild of a slot the takeover added, or the resync owed after writes during a
//! restripe, comes first). It is carried from phase to phase with the callers waiting for the
//! array to be idle, who are answered once it has run. It lives only in the server: stopped
//! between the steps, the array is left as the first one made it, which `uraid grow` can
//! finish.

use uraid_layout::Level;
use uraid_md::takeover::TakeoverRequest;

/// A change the server asks of itself once the array is idle.
#[derive(Debug, Clone)]
pub(super) enum FollowUp {
    /// The restripe after a takeover, to `layout` (md's number) at `level`: a raid5 to a
    /// normal raid6 layout, a raid0 or raid4 to a raid5 other than parity-last.
    Restripe { level: Level, layout: i32 },
    /// The takeover after the restripe that makes it possible: a normal raid6 to raid5, a
    /// raid5 to raid0 or raid4.
    Takeover(TakeoverRequest),
}

impl FollowUp {
    /// What it is, for the log and for the answer to whoever asked the change.
    pub(super) fn describe(&self) -> String {
        match self {
            FollowUp::Restripe { level, layout } => format!(
                "the restripe to layout {}",
                uraid_md::layout_name(*level, *layout).unwrap_or_else(|| layout.to_string())
            ),
            FollowUp::Takeover(request) => match request.level {
                Some(level) => format!("the change to {level}"),
                None => "the change of the number of devices".to_string(),
            },
        }
    }
}
