//! `SolidStateDisk`: a flash disk as a fixed per-command latency plus a transfer at each
//! channel's bandwidth, over several channels working in parallel. No positions, no seeks: the
//! only things that matter are how many commands run at once and how fast bytes move.

use std::collections::VecDeque;

use crate::bus::Bus;
use crate::disk::{Accepted, DiskOp, DiskRequest, Started};
use crate::{transfer_ns, Nanos};

#[derive(Debug, Clone, PartialEq)]
pub struct SsdParams {
    pub capacity_bytes: u64,
    pub read_latency: Nanos,
    pub write_latency: Nanos,
    /// Bandwidth of one internal channel (bytes/s).
    pub channel_bytes_per_s: f64,
    pub channels: usize,
    pub queue_depth: usize,
}

#[derive(Debug, Clone)]
pub struct SolidStateDisk {
    params: SsdParams,
    channel_free: Vec<Nanos>,
    queue: VecDeque<DiskRequest>,
    in_flight: usize,
}

impl SolidStateDisk {
    pub fn new(params: SsdParams) -> SolidStateDisk {
        assert!(params.channels >= 1 && params.queue_depth >= 1);
        SolidStateDisk { channel_free: vec![0; params.channels], params, queue: VecDeque::new(), in_flight: 0 }
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.params.capacity_bytes
    }

    pub fn has_room(&self) -> bool {
        self.queue.len() + self.in_flight < self.params.queue_depth
    }

    pub fn accept(&mut self, _now: Nanos, request: DiskRequest) -> Accepted {
        self.queue.push_back(request);
        Accepted::Queued
    }

    /// Start everything queued, each on the channel that frees first.
    pub fn dispatch(&mut self, now: Nanos, bus: &mut Bus) -> Vec<Started> {
        let mut out = Vec::new();
        while let Some(r) = self.queue.pop_front() {
            let ready = if r.op == DiskOp::Write { bus.transfer(now, r.len) } else { now };
            let (ch, free) =
                self.channel_free.iter().copied().enumerate().min_by_key(|&(i, t)| (t, i)).expect("a channel");
            let start = ready.max(free);
            let latency = if r.op == DiskOp::Read { self.params.read_latency } else { self.params.write_latency };
            let end = start + latency + transfer_ns(r.len, self.params.channel_bytes_per_s);
            self.channel_free[ch] = end;
            self.in_flight += 1;
            out.push(Started { request: r, media_start: start, media_end: end, acked: false });
        }
        out
    }

    pub fn media_done(&mut self, _now: Nanos, _started: &Started) {
        self.in_flight -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::BusParams;

    #[test]
    fn channels_work_in_parallel() {
        let p = SsdParams {
            capacity_bytes: 1 << 30,
            read_latency: 100_000,
            write_latency: 20_000,
            channel_bytes_per_s: 1e9,
            channels: 4,
            queue_depth: 32,
        };
        let mut d = SolidStateDisk::new(p);
        let mut bus = Bus::new(BusParams { name: "t", bytes_per_s: 1e12, command_overhead: 0 });
        for i in 0..8 {
            d.accept(0, DiskRequest { id: i, op: DiskOp::Read, offset: i * 4096, len: 1_000_000 });
        }
        let s = d.dispatch(0, &mut bus);
        let last = s.iter().map(|s| s.media_end).max().unwrap();
        // 8 transfers of 1 ms on 4 channels: two rounds.
        assert_eq!(last, 2 * (100_000 + 1_000_000));
    }
}
