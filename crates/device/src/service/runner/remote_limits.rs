//! The remote limits of members reached over a network, shown and changed while the array runs
//! (`uraid ctl SOCKET member-limits`): how long a request to the member may wait before it
//! fails, and with it (md's failfast) the member, and how hard a broken connection is retried.

use super::super::{log, RemoteLimitsChange, RemoteLimitsError};
use super::Runner;
use crate::member::RemoteLimits;

impl Runner {
    /// Applies `change` to `member` (as the user names it), or to every member that has remote
    /// limits; returns each such member's limits afterwards.
    pub(super) fn remote_limits(
        &mut self,
        member: Option<&str>,
        change: RemoteLimitsChange,
    ) -> Result<Vec<(String, RemoteLimits)>, RemoteLimitsError> {
        let wanted = member.map(|m| self.resolve_member(m)).transpose()?;
        let mut out = Vec::new();
        for dev in self.array.devices() {
            let name = dev.name().to_string();
            if wanted.as_ref().is_some_and(|w| *w != name) {
                continue;
            }
            let Some(limits) = dev.remote_limits() else {
                if wanted.is_some() {
                    return Err(RemoteLimitsError::NotRemote(name));
                }
                continue;
            };
            let new = change.apply(limits)?;
            if new != limits {
                dev.set_remote_limits(new);
                log(&format!(
                    "{name}: request timeout {:?}, {} reconnection attempt(s) within {:?}",
                    new.request_timeout, new.reconnect_attempts, new.reconnect_budget
                ));
            }
            out.push((name, new));
        }
        Ok(out)
    }
}
