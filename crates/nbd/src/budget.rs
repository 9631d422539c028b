//! The bytes of requests in flight across every connection of one server.
//!
//! Each connection bounds its own queue (`ServerConfig::max_inflight_bytes`), but a client with
//! several connections (multi-conn: fio's jobs, nbdcopy's connections, the kernel's nbd with
//! `-C`) multiplies that: four connections of queue depth 32 with 1 MiB writes hold 128 MiB of
//! write data while the array is busy. The server-wide budget makes the memory a server can be
//! made to hold independent of how many connections a client opens.
//!
//! A connection's reader takes room here after its own limit lets a request through, and waits
//! while the server is full. A connection with nothing in flight is always let through, with its
//! cost counted, so that no connection waits forever on others; the total can then pass the
//! budget by at most one request per connection.
//!
//! Every request and every reply passes here, on every connection at once, so taking and giving
//! room are atomic operations; the lock is taken only by a reader that has to wait, and by a
//! giver when some reader waits.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

pub(crate) struct ServerBudget {
    max_bytes: u64,
    bytes: AtomicU64,
    /// Readers waiting for room: `give` takes the lock to wake them only if there are any.
    waiters: AtomicUsize,
    lock: Mutex<()>,
    changed: Condvar,
}

impl ServerBudget {
    pub(crate) fn new(max_bytes: u64) -> ServerBudget {
        ServerBudget {
            max_bytes,
            bytes: AtomicU64::new(0),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            changed: Condvar::new(),
        }
    }

    /// Whether `cost` fits beside `bytes` in flight (an empty server takes any one request).
    fn fits(&self, bytes: u64, cost: u64) -> bool {
        bytes == 0 || bytes.saturating_add(cost) <= self.max_bytes
    }

    /// Count `cost` if it fits (or `always`); whether it was counted.
    pub(crate) fn try_take(&self, cost: u64, always: bool) -> bool {
        if cost == 0 {
            return true;
        }
        if always {
            self.bytes.fetch_add(cost, Ordering::SeqCst);
            return true;
        }
        let mut now = self.bytes.load(Ordering::SeqCst);
        while self.fits(now, cost) {
            match self.bytes.compare_exchange_weak(now, now + cost, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(seen) => now = seen,
            }
        }
        false
    }

    /// Wait until `cost` might fit, or `give_up()` says to stop waiting. Counts nothing: the
    /// caller tries again with [`ServerBudget::try_take`].
    pub(crate) fn wait_for_room(&self, cost: u64, give_up: impl Fn() -> bool) {
        let mut guard = self.lock.lock().unwrap();
        loop {
            // Counted as waiting before looking: a `give` that this look misses sees the count
            // and wakes this reader (all in one order, `SeqCst`).
            self.waiters.fetch_add(1, Ordering::SeqCst);
            if give_up() || self.fits(self.bytes.load(Ordering::SeqCst), cost) {
                self.waiters.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            guard = self.changed.wait(guard).unwrap();
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub(crate) fn give(&self, cost: u64) {
        if cost == 0 {
            return;
        }
        self.bytes.fetch_sub(cost, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock().unwrap();
            self.changed.notify_all();
        }
    }

    /// Wake every waiting reader, so that one told to stop notices.
    pub(crate) fn wake_all(&self) {
        let _guard = self.lock.lock().unwrap();
        self.changed.notify_all();
    }

    #[cfg(test)]
    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::ServerBudget;

    #[test]
    fn room_is_counted_until_given_back() {
        let b = ServerBudget::new(100);
        assert!(b.try_take(60, false));
        assert!(!b.try_take(60, false), "over the budget");
        assert!(b.try_take(40, false));
        assert!(b.try_take(500, true), "a connection with nothing in flight always goes");
        assert_eq!(b.bytes(), 600);
        b.give(500);
        b.give(60);
        assert!(b.try_take(60, false));
        b.give(60);
        b.give(40);
        assert_eq!(b.bytes(), 0);
        assert!(b.try_take(1000, false), "an empty server takes any one request");
    }

    #[test]
    fn a_waiter_wakes_when_room_is_given_back_or_it_is_told_to_stop() {
        let b = Arc::new(ServerBudget::new(100));
        assert!(b.try_take(100, false));
        let waiter = {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                b.wait_for_room(50, || false);
                b.try_take(50, false)
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "no room yet");
        b.give(100);
        assert!(waiter.join().unwrap());

        let stop = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (b, stop) = (Arc::clone(&b), Arc::clone(&stop));
            std::thread::spawn(move || b.wait_for_room(100, || stop.load(Ordering::SeqCst)))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished());
        stop.store(true, Ordering::SeqCst);
        b.wake_all();
        waiter.join().unwrap();
    }
}
