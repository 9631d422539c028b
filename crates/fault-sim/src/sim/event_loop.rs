//! The discrete-event loop: member I/O completions and client arrivals in virtual-time order,
//! with faults, background jobs and checks at quiet points woven in, until the run ends.

use super::{Failure, Invariant, Queued, Report, Sim};

/// Give up on a run this long (a livelock guard; runs take a few thousand events).
const MAX_EVENTS: u64 = 3_000_000;

impl Sim {
    /// Play the run to its end.
    pub fn run(mut self) -> Result<Report, Failure> {
        trace!(self, "seed {} {}", self.cfg.seed, self.report.description);
        trace!(
            self,
            "mode {:?}; workload {} ops, up to {} in flight, mean gap {} us, {}% reads {}% writes {}% flushes {}% discards; spares {}",
            self.mode,
            self.w.target,
            self.w.max_inflight,
            self.w.mean_gap / 1000,
            self.w.read,
            self.w.write,
            self.w.flush,
            self.w.discard,
            self.spares
        );
        for f in self.plan.clone() {
            trace!(self, "planned fault {:?} after request {} + {} events", f.kind, f.at_op, f.delay);
        }
        for d in 0..self.devices.len() {
            trace!(self, "device d{d}: base latency {} us", self.latency[d] / 1000);
        }
        let mut idle_passes = 0u64;
        loop {
            self.pump()?;
            if self.ended.is_some() {
                break;
            }
            if let Some(v) = self.verify.pop() {
                self.quiesce()?;
                self.do_verify(v)?;
                continue;
            }
            self.fire_faults()?;
            if self.ended.is_some() {
                break;
            }
            self.drive_spares()?;
            self.maybe_copyback()?;
            self.pump()?;
            if self.ended.is_some() {
                break;
            }
            if !self.verify.is_empty() {
                continue;
            }
            let t_io = self.queue.first_key_value().map(|(k, _)| k.0);
            let ops_left = self.w.submitted < self.w.target;
            let t_arr = (ops_left && self.client_inflight < self.w.max_inflight).then_some(self.w.next_arrival);
            // The policy's own deadline (a clean mark, bitmap bits to clear, a throttled pass
            // step) when nothing else comes first: time moves on to it.
            // Once nothing else is left but the policy's timers (a clean mark, bits to clear, or
            // their retries on a broken array), the run ends: only a pass still keeps it going.
            let only_timers = t_io.is_none() && t_arr.is_none() && self.policy.pass().is_none();
            if let Some(t) = self.policy_deadline().filter(|_| !only_timers) {
                if t_io.into_iter().chain(t_arr).all(|e| t < e) {
                    idle_passes += 1;
                    if idle_passes > 10_000 {
                        return Err(
                            self.fail(Invariant::Stalled, "the policy's deadline passes and nothing happens".into())
                        );
                    }
                    self.now = self.now.max(t);
                    continue;
                }
            }
            let arrival = match (t_io, t_arr) {
                (None, None) => {
                    if !self.reqs.is_empty() || self.meta.has_parked() {
                        return Err(self.stalled());
                    }
                    if self.spare_countdown.is_some() {
                        self.spare_countdown = Some(0);
                        continue;
                    }
                    if !self.plan.is_empty() {
                        self.fire_leftover_faults()?;
                        continue;
                    }
                    break;
                }
                (Some(t), Some(a)) => a <= t,
                (None, Some(_)) => true,
                (Some(_), None) => false,
            };
            idle_passes = 0;
            self.events += 1;
            if self.events > MAX_EVENTS {
                return Err(self.fail(Invariant::Stalled, format!("still running after {MAX_EVENTS} events")));
            }
            if let Some(c) = &mut self.spare_countdown {
                *c = c.saturating_sub(1);
            }
            if arrival {
                self.now = self.now.max(self.w.next_arrival);
                self.w.next_arrival = self.now + self.gap();
                if self.plugged_bursts {
                    self.submit_burst()?;
                } else {
                    self.submit_client_op()?;
                }
            } else {
                let ((t, _), q) = self.queue.pop_first().expect("checked above");
                self.now = t;
                self.complete(q)?;
            }
        }
        if self.ended.is_none() {
            self.final_checks()?;
            self.report.end = "workload done, final checks passed".into();
        } else {
            self.report.end = self.ended.clone().unwrap_or_default();
        }
        self.report.ops = self.w.submitted;
        self.report.writes_gathered += self.open.engine().writes_gathered();
        self.report.virtual_ns = self.now;
        self.report.standing_corruptions =
            self.slot_dev.iter().flatten().map(|&d| self.devices[d].standing_corruptions() as u32).sum();
        trace!(self, "end: {}", self.report.end);
        Ok(self.report)
    }

    /// One to four client requests arriving together, submitted plugged as the service submits
    /// what it takes from its queue in one go; the unplug releases the writes the engine held
    /// (and `pump` unplugs again after completions, as the service does each time its queue is
    /// empty).
    fn submit_burst(&mut self) -> Result<(), Failure> {
        self.open.engine_mut().plug();
        let extra = self.rng.below(4);
        self.submit_client_op()?;
        for _ in 0..extra {
            if self.w.submitted >= self.w.target || self.client_inflight >= self.w.max_inflight {
                break;
            }
            self.submit_client_op()?;
        }
        self.open.engine_mut().unplug();
        Ok(())
    }

    /// Complete what the queue says is next.
    pub(super) fn complete(&mut self, q: Queued) -> Result<(), Failure> {
        match q {
            Queued::Engine(id) => self.complete_member_io(id),
            Queued::Metadata(id) => self.complete_metadata_io(id),
        }
    }

    pub(super) fn gap(&mut self) -> u64 {
        self.rng.between(0, 2 * self.w.mean_gap)
    }

    pub(super) fn stalled(&self) -> Failure {
        let waiting: Vec<String> = self.reqs.keys().map(|r| format!("#{r}")).collect();
        self.fail(
            Invariant::Stalled,
            format!(
                "requests {} are unfinished and the engine has no member I/O outstanding or to issue",
                waiting.join(" ")
            ),
        )
    }

    pub(super) fn end(&mut self, why: String) {
        trace!(self, "scenario ends: {why}");
        self.ended = Some(why);
    }
}
