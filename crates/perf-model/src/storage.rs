//! `Storage`: a set of disks, the channels they hang on and the host's queue in front of each
//! disk, run as one discrete-event system in virtual time.
//!
//! What it owns: the event queue of media phases ending and requests completing to the host,
//! the host queues (FIFO, or an elevator scanning one way by offset, as Linux's and BSD's
//! `disksort` did), feeding each disk as its own queue has room, and the channel transfers: a
//! read's data crosses the channel after (or while, if the channel is free) the media reads
//! it, a write's before the media takes it (in [`crate::disk`]), a cached write's as soon as
//! the disk takes it, and then it completes.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::bus::Bus;
use crate::disk::hdd::HardDisk;
use crate::disk::ssd::SolidStateDisk;
use crate::disk::{Accepted, Disk, DiskOp, DiskRequest, Started};
use crate::profiles::{DiskModel, Profile};
use crate::{Nanos, SimRng};

/// A request finished, as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskCompletion {
    pub disk: usize,
    pub request: DiskRequest,
    pub at: Nanos,
}

#[derive(Debug, Clone)]
enum Event {
    MediaDone { disk: usize, started: Started },
    Complete { disk: usize, request: DiskRequest },
}

#[derive(Debug, Clone)]
struct Unit {
    disk: Disk,
    bus: usize,
    host_queue: Vec<DiskRequest>,
    elevator: bool,
    /// Where the elevator's scan stands.
    scan_at: u64,
    busy_time: Nanos,
}

/// Disks, buses and their events.
#[derive(Debug, Clone)]
pub struct Storage {
    units: Vec<Unit>,
    buses: Vec<Bus>,
    heap: BinaryHeap<Reverse<(Nanos, u64)>>,
    events: HashMap<u64, Event>,
    next_event: u64,
    now: Nanos,
}

impl Storage {
    /// `count` disks of `profile`, each with a platter phase drawn from `rng`.
    pub fn new(profile: &Profile, count: usize, rng: &mut SimRng) -> Storage {
        let buses = if profile.shared_bus { 1 } else { count };
        let units = (0..count)
            .map(|i| {
                let disk = match &profile.disk {
                    DiskModel::Hdd(p) => Disk::Hdd(Box::new(HardDisk::new(p.clone(), rng.next_u64()))),
                    DiskModel::Ssd(p) => Disk::Ssd(SolidStateDisk::new(p.clone())),
                };
                Unit {
                    disk,
                    bus: if profile.shared_bus { 0 } else { i },
                    host_queue: Vec::new(),
                    elevator: profile.host.elevator,
                    scan_at: 0,
                    busy_time: 0,
                }
            })
            .collect();
        Storage {
            units,
            buses: (0..buses).map(|_| Bus::new(profile.bus.clone())).collect(),
            heap: BinaryHeap::new(),
            events: HashMap::new(),
            next_event: 0,
            now: 0,
        }
    }

    pub fn disk_count(&self) -> usize {
        self.units.len()
    }

    pub fn capacity_bytes(&self, disk: usize) -> u64 {
        self.units[disk].disk.capacity_bytes()
    }

    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Media time each disk has spent (for utilisation).
    pub fn busy_time(&self, disk: usize) -> Nanos {
        self.units[disk].busy_time
    }

    /// Time each channel has been held.
    pub fn bus_busy(&self) -> Vec<Nanos> {
        self.buses.iter().map(|b| b.busy_total()).collect()
    }

    fn schedule(&mut self, at: Nanos, event: Event) {
        let id = self.next_event;
        self.next_event += 1;
        self.events.insert(id, event);
        self.heap.push(Reverse((at, id)));
    }

    /// Hand `request` to disk `disk`'s host queue at the present time.
    pub fn submit(&mut self, disk: usize, request: DiskRequest) {
        assert!(
            request.offset + request.len <= self.capacity_bytes(disk),
            "request {request:?} past the end of disk {disk}"
        );
        self.units[disk].host_queue.push(request);
        self.pump(disk);
    }

    /// Move requests from the host queue into the disk while it has room, and let it start.
    fn pump(&mut self, d: usize) {
        let now = self.now;
        loop {
            let unit = &mut self.units[d];
            if unit.host_queue.is_empty() {
                break;
            }
            let pick = if unit.elevator {
                let ahead = unit
                    .host_queue
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.offset >= unit.scan_at)
                    .min_by_key(|(i, r)| (r.offset, *i));
                match ahead {
                    Some((i, _)) => i,
                    None => unit
                        .host_queue
                        .iter()
                        .enumerate()
                        .min_by_key(|(i, r)| (r.offset, *i))
                        .map(|(i, _)| i)
                        .expect("non-empty"),
                }
            } else {
                0
            };
            // The disk takes a command only when it has a queue slot and, for a write it will
            // cache, buffer space: it pulls a write's data when it can hold it, so writes enter
            // in order and none waits on the bus behind later ones.
            if !unit.disk.has_room_for(&unit.host_queue[pick]) {
                break;
            }
            let request = unit.host_queue.remove(pick);
            unit.scan_at = request.offset + request.len;
            if unit.disk.accept(now, request) == Accepted::Cached {
                let done = self.buses[unit.bus].transfer(now, request.len);
                self.schedule(done, Event::Complete { disk: d, request });
            }
        }
        let unit = &mut self.units[d];
        let started = unit.disk.dispatch(now, &mut self.buses[unit.bus]);
        for s in started {
            self.units[d].busy_time += s.media_end - now;
            self.schedule(s.media_end, Event::MediaDone { disk: d, started: s });
        }
    }

    /// Move the clock to `at` with nothing happening before it (the host was thinking).
    pub fn advance_to(&mut self, at: Nanos) {
        assert!(self.next_time().is_none_or(|t| t >= at) && at >= self.now, "advance past an event");
        self.now = at;
    }

    /// When the next event happens, if any.
    pub fn next_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    /// Process the next event; a completion if it was one.
    pub fn step(&mut self) -> Option<DiskCompletion> {
        let Reverse((at, id)) = self.heap.pop()?;
        debug_assert!(at >= self.now, "time runs forward");
        self.now = at;
        match self.events.remove(&id).expect("scheduled event") {
            Event::MediaDone { disk, started } => {
                let unit = &mut self.units[disk];
                unit.disk.media_done(at, &started);
                let r = started.request;
                match (r.op, started.acked) {
                    (DiskOp::Read, _) => {
                        // The disk sends from its buffer; with the channel free the transfer
                        // overlaps the media read and ends with it.
                        let bus = &mut self.buses[unit.bus];
                        let ready = started.media_start.max(at.saturating_sub(bus.occupancy(r.len)));
                        let done = bus.transfer(ready, r.len).max(at);
                        self.schedule(done, Event::Complete { disk, request: r });
                    }
                    (DiskOp::Write, false) => self.schedule(at, Event::Complete { disk, request: r }),
                    (DiskOp::Write, true) => {}
                }
                self.pump(disk);
                None
            }
            Event::Complete { disk, request } => Some(DiskCompletion { disk, request, at }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles;

    /// Read `per_disk` bytes sequentially from every disk at once, `len` at a time, two
    /// requests in flight per disk; aggregate bytes/s.
    fn parallel_sequential(profile: &Profile, disks: usize, per_disk: u64, len: u64) -> f64 {
        let mut s = Storage::new(profile, disks, &mut SimRng::new(1));
        let mut next = vec![0u64; disks];
        let mut id = 0;
        for (d, at) in next.iter_mut().enumerate() {
            for _ in 0..2 {
                s.submit(d, DiskRequest { id, op: DiskOp::Read, offset: *at, len });
                *at += len;
                id += 1;
            }
        }
        let mut end = 0;
        while let Some(t) = s.next_time() {
            end = t;
            if let Some(c) = s.step() {
                if next[c.disk] < per_disk {
                    s.submit(c.disk, DiskRequest { id, op: DiskOp::Read, offset: next[c.disk], len });
                    next[c.disk] += len;
                    id += 1;
                }
            }
        }
        (per_disk * disks as u64) as f64 / (end as f64 / 1e9)
    }

    #[test]
    fn bus_saturation_caps_aggregate_throughput() {
        // Four 75 MB/s Cheetahs on one 160 MB/s channel: no more than the channel.
        let p = profiles::cheetah_15k3_u160();
        let one = parallel_sequential(&p, 1, 64 << 20, 128 << 10);
        let four = parallel_sequential(&p, 4, 64 << 20, 128 << 10);
        assert!(one > 60e6, "one disk {one}");
        assert!(four <= 160e6 && four > 140e6, "four disks on U160: {four}");
        // The same four on their own channels scale.
        let own = Profile { shared_bus: false, ..p };
        let four_own = parallel_sequential(&own, 4, 64 << 20, 128 << 10);
        assert!(four_own > 3.5 * one, "{four_own} vs {one}");
    }

    #[test]
    fn cached_sequential_writes_stream_at_the_media_rate() {
        // Eight 512 KiB writes outstanding against an 8 MiB write cache: the disk must not
        // stall on the bus behind writes it took out of order.
        let p = profiles::sata_2008();
        let media = p.hdd().map(|h| h.sustained_rate(h.spt_outer)).unwrap();
        let mut s = Storage::new(&p, 1, &mut SimRng::new(1));
        let (len, total) = (512u64 << 10, 128u64 << 20);
        let mut next = 0;
        for id in 0..8 {
            s.submit(0, DiskRequest { id, op: DiskOp::Write, offset: next, len });
            next += len;
        }
        let mut id = 8;
        let mut end = 0;
        while s.next_time().is_some() {
            if let Some(c) = s.step() {
                end = c.at;
                if next < total {
                    s.submit(0, DiskRequest { id, op: DiskOp::Write, offset: next, len });
                    next += len;
                    id += 1;
                }
            }
        }
        let rate = total as f64 / (end as f64 / 1e9);
        assert!(rate > 0.95 * media, "{rate:.0} B/s against a media rate of {media:.0}");
    }

    #[test]
    fn same_seed_same_times() {
        let p = profiles::uw_scsi_1998();
        let run = |seed| {
            let mut s = Storage::new(&p, 2, &mut SimRng::new(seed));
            let mut rng = SimRng::new(seed);
            for i in 0..50 {
                let off = rng.below(s.capacity_bytes(0) / 8192) * 8192;
                s.submit((i % 2) as usize, DiskRequest { id: i, op: DiskOp::Read, offset: off, len: 8192 });
            }
            let mut times = Vec::new();
            while s.next_time().is_some() {
                if let Some(c) = s.step() {
                    times.push((c.request.id, c.at));
                }
            }
            times
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
