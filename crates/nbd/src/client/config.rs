//! How patient the client is: timeouts, reconnection, and how many connections it opens.

use std::time::Duration;

/// The client's limits. The defaults suit a member on a local network:
///
/// - a request unanswered for 30 s fails (the Linux NBD client's usual timeout): the member
///   is then the array's to fail, as md's failfast would, instead of holding every request
///   behind it;
/// - a broken connection is opened again up to 5 times, 100 ms after the failure and then
///   twice as long each time up to 2 s, within 10 s in all; then the member is gone and every
///   later request fails at once;
/// - 4 connections when the server says several may be used at once (`NBD_FLAG_CAN_MULTI_CONN`,
///   nbdcopy's default), otherwise 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Bounds connecting and each step of the handshake, and each write of a request.
    pub connect_timeout: Duration,
    /// How long a request waits for its reply before it fails and its connection is dropped.
    pub request_timeout: Duration,
    /// Connection attempts after a connection breaks, before the export is given up for gone.
    pub reconnect_attempts: u32,
    /// The wait before the first attempt; it doubles after each failed one.
    pub reconnect_first_delay: Duration,
    /// The longest wait between attempts.
    pub reconnect_max_delay: Duration,
    /// All attempts for one breakage end within this time.
    pub reconnect_budget: Duration,
    /// Connections opened when the server allows several.
    pub multi_conn: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            reconnect_attempts: 5,
            reconnect_first_delay: Duration::from_millis(100),
            reconnect_max_delay: Duration::from_secs(2),
            reconnect_budget: Duration::from_secs(10),
            multi_conn: 4,
        }
    }
}

impl ClientConfig {
    /// The waits before each reconnection attempt: the first delay, doubling, capped, and cut
    /// off once their sum would pass the budget. Its length is at most `reconnect_attempts`.
    pub fn reconnect_delays(&self) -> Vec<Duration> {
        let mut delays = Vec::new();
        let mut next = self.reconnect_first_delay;
        let mut total = Duration::ZERO;
        for _ in 0..self.reconnect_attempts {
            if total + next > self.reconnect_budget {
                break;
            }
            total += next;
            delays.push(next);
            next = (next * 2).min(self.reconnect_max_delay);
        }
        delays
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_backoff_is_bounded_in_count_and_time() {
        let ms = Duration::from_millis;
        assert_eq!(ClientConfig::default().reconnect_delays(), [ms(100), ms(200), ms(400), ms(800), ms(1600)]);
        let c = ClientConfig { reconnect_attempts: 10, reconnect_budget: Duration::from_secs(5), ..Default::default() };
        // 0.1 + 0.2 + 0.4 + 0.8 + 1.6 + 2 = 5.1 s would pass the budget.
        assert_eq!(c.reconnect_delays().len(), 5);
        assert!(c.reconnect_delays().iter().sum::<Duration>() <= Duration::from_secs(5));
        assert!(ClientConfig { reconnect_attempts: 0, ..Default::default() }.reconnect_delays().is_empty());
    }
}
