//! The passes on the engine thread: submitting the step the policy gives to the engine, and
//! telling those waiting for the passes to end once they have. (Which pass runs, its steps and
//! its checkpoints are the policy's; see [`crate::array_policy`].)

use super::Runner;

impl Runner {
    /// Submit the running pass's next steps, as many as the policy has now.
    pub(super) fn drive_pass(&mut self) {
        let now = self.now();
        self.array.engine_mut().set_now(now);
        while let Some(request) = self.policy.next_pass_step(&mut self.array, now) {
            let submitted = self.array.engine_mut().submit(request);
            self.policy.pass_step_submitted(&mut self.array, now, submitted);
        }
        self.policy_events();
    }

    /// Tell those waiting for the end of the pass, once it has ended (a rebuild's end recorded),
    /// unless the next step of a level change starts now: they wait for that too.
    pub(super) fn notify_idle_waiters(&mut self) {
        if !self.policy.pass_idle(&self.array) || self.ask_follow_up() || self.grow_ask.is_some() {
            return;
        }
        let status = self.status();
        for w in self.idle_waiters.drain(..) {
            let _ = w.send(status.clone());
        }
    }
}
