//! `HardDisk`: a rotating disk in virtual time, after Ruemmler and Wilkes, "An introduction to
//! disk drive modeling" (IEEE Computer 27(3), 1994).
//!
//! What it owns:
//! - **geometry**: cylinders, heads and zones (outer zones hold more sectors per track, so they
//!   transfer faster), with track skew so a sequential transfer crossing a track loses only the
//!   head-switch time, not a revolution;
//! - **seek curve** ([`SeekCurve`]): `track + lin·(d/N) + sq·√(d/N)` for a distance of `d ≥ 1`
//!   cylinders out of `N`: the square root dominates short (acceleration-limited) seeks, the
//!   linear term long (coasting) ones (`d − 1` and `N − 1` in the code, so one cylinder costs
//!   exactly the track-to-track time and `N` the full stroke). The two coefficients are fitted to the datasheet's
//!   track-to-track, average and full-stroke times, with the vendors' definition of the average
//!   (over all pairs of cylinders, so distances are triangular: E[d/N] = 1/3, E[√(d/N)] = 8/15);
//! - **rotation**: the platter angle advances with virtual time from a per-disk phase; a request
//!   waits after its seek until its first sector comes under the head;
//! - **track buffer**: the sectors of recent reads stay in cache segments, and after a read the
//!   disk keeps reading ahead into the segment while it is idle (up to `readahead_bytes`); a read
//!   found there costs only the transfer, one that starts inside the segment the head is still
//!   streaming continues without repositioning;
//! - **command queue** of `queue_depth` with FIFO or SPTF ordering ([`Scheduling`]);
//! - **write cache** (`write_cache_bytes`, 0 for off): a write that fits is acknowledged once its
//!   data has crossed the bus and is written to the media later, in queue order.

use crate::bus::Bus;
use crate::disk::{Accepted, DiskOp, DiskRequest, Scheduling, Started, SECTOR};
use crate::{ms, Nanos, NS_PER_S};

/// A hard disk's parameters (see `docs/disk-models.md` for each profile's sources).
#[derive(Debug, Clone, PartialEq)]
pub struct HddParams {
    pub rpm: f64,
    pub cylinders: u32,
    pub heads: u32,
    /// Sectors per track in the outermost and innermost zone; zones in between are linear.
    pub spt_outer: u32,
    pub spt_inner: u32,
    pub zones: u32,
    /// Read seek times in milliseconds: one cylinder, vendor average, full stroke.
    pub seek_track_ms: f64,
    pub seek_avg_ms: f64,
    pub seek_full_ms: f64,
    /// Extra settling a write needs after a seek.
    pub write_settle_ms: f64,
    /// Time to switch heads (also the track skew).
    pub head_switch_ms: f64,
    /// Controller time per command (decode, cache lookup, status).
    pub command_overhead_ms: f64,
    pub queue_depth: usize,
    pub scheduling: Scheduling,
    /// How far the disk reads ahead after a read while idle.
    pub readahead_bytes: u64,
    /// How many separate read streams the track buffer keeps.
    pub cache_segments: usize,
    /// Write cache size; 0 when the write cache is disabled.
    pub write_cache_bytes: u64,
}

impl HddParams {
    /// Nanoseconds per revolution.
    pub fn revolution(&self) -> Nanos {
        (60.0 * NS_PER_S as f64 / self.rpm).round() as Nanos
    }

    /// Sustained sequential media rate (bytes/s) of a zone with `spt` sectors per track: a
    /// track per revolution plus one head switch.
    pub fn sustained_rate(&self, spt: u32) -> f64 {
        let rev = self.revolution() as f64;
        let skew = skew_sectors(self, spt) as f64 * rev / f64::from(spt);
        f64::from(spt) * SECTOR as f64 * NS_PER_S as f64 / (rev + skew)
    }
}

fn skew_sectors(p: &HddParams, spt: u32) -> u32 {
    let per_sector = p.revolution() as f64 / f64::from(spt);
    (ms(p.head_switch_ms) as f64 / per_sector).ceil() as u32
}

/// The seek-time curve fitted to three datasheet numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeekCurve {
    track_ms: f64,
    linear_ms: f64,
    sqrt_ms: f64,
    max_distance: f64,
}

impl SeekCurve {
    /// Fit to track-to-track, average (vendor definition) and full-stroke times over
    /// `max_distance` cylinders. With F = full − track and A = avg − track:
    /// sq = 5(A − F/3) and lin = 8F/3 − 5A (both must come out non-negative: a datasheet whose
    /// average is below a third of the way from track to full, or above 8/15 of it, has no
    /// such curve).
    pub fn fit(track_ms: f64, avg_ms: f64, full_ms: f64, max_distance: u32) -> SeekCurve {
        let f = full_ms - track_ms;
        let a = avg_ms - track_ms;
        let sqrt_ms = 5.0 * (a - f / 3.0);
        let linear_ms = 8.0 * f / 3.0 - 5.0 * a;
        assert!(sqrt_ms >= 0.0 && linear_ms >= 0.0, "seek times {track_ms}/{avg_ms}/{full_ms} ms have no concave fit");
        SeekCurve { track_ms, linear_ms, sqrt_ms, max_distance: f64::from(max_distance.max(1)) }
    }

    /// Seek time over `distance` cylinders.
    pub fn time(&self, distance: u32) -> Nanos {
        if distance == 0 {
            return 0;
        }
        let x = f64::from(distance - 1) / (self.max_distance - 1.0).max(1.0);
        ms(self.track_ms + self.linear_ms * x + self.sqrt_ms * x.sqrt())
    }

    /// The coefficients `(track, linear, sqrt)` in milliseconds, for the documentation.
    pub fn coefficients(&self) -> (f64, f64, f64) {
        (self.track_ms, self.linear_ms, self.sqrt_ms)
    }
}

#[derive(Debug, Clone, Copy)]
struct Zone {
    first_cyl: u32,
    spt: u32,
    skew: u32,
    first_lba: u64,
}

/// Where a sector lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chs {
    cyl: u32,
    /// Global track number (cylinder × heads + head).
    track: u64,
    sector: u32,
    zone: usize,
}

/// A range of sectors held in the track buffer.
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: u64,
    end: u64,
}

#[derive(Debug, Clone)]
struct Queued {
    seq: u64,
    request: DiskRequest,
    acked: bool,
    /// When the disk took it.
    accepted_at: Nanos,
}

/// What serving one request costs from the disk's present state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Service {
    /// Command overhead, seek and rotational wait before the media transfer starts.
    pub positioning: Nanos,
    /// Media transfer (0 for a read found in the track buffer).
    pub transfer: Nanos,
    pub buffer_hit: bool,
}

/// One hard disk's state.
#[derive(Debug, Clone)]
pub struct HardDisk {
    params: HddParams,
    zones: Vec<Zone>,
    seek: SeekCurve,
    rev: Nanos,
    phase: Nanos,
    capacity_sectors: u64,
    cyl: u32,
    track: u64,
    /// The sector after the last one the head read or wrote.
    stream_lba: u64,
    /// When the head passed `stream_lba`.
    stream_at: Nanos,
    busy: bool,
    queue: Vec<Queued>,
    next_seq: u64,
    /// Track buffer segments, least recently used first.
    segments: Vec<Segment>,
    /// The last media operation was a read: the disk reads ahead while idle.
    reading_ahead: bool,
    readahead_left: u64,
    cache_used: u64,
}

impl HardDisk {
    /// A disk whose platters start at rotational phase `phase` (any value; taken modulo a
    /// revolution) so that disks of one array do not spin in lockstep.
    pub fn new(params: HddParams, phase: u64) -> HardDisk {
        assert!(params.zones >= 1 && params.cylinders >= params.zones && params.heads >= 1);
        assert!(params.spt_outer >= params.spt_inner && params.spt_inner >= 1 && params.queue_depth >= 1);
        let mut zones = Vec::new();
        let mut lba = 0;
        let per_zone = params.cylinders / params.zones;
        for z in 0..params.zones {
            let first_cyl = z * per_zone;
            let cyls = if z + 1 == params.zones { params.cylinders - first_cyl } else { per_zone };
            let spt = if params.zones == 1 {
                params.spt_outer
            } else {
                params.spt_outer - (params.spt_outer - params.spt_inner) * z / (params.zones - 1)
            };
            zones.push(Zone { first_cyl, spt, skew: skew_sectors(&params, spt), first_lba: lba });
            lba += u64::from(cyls) * u64::from(params.heads) * u64::from(spt);
        }
        let seek = SeekCurve::fit(params.seek_track_ms, params.seek_avg_ms, params.seek_full_ms, params.cylinders - 1);
        let rev = params.revolution();
        HardDisk {
            zones,
            seek,
            rev,
            phase: phase % rev,
            capacity_sectors: lba,
            cyl: 0,
            track: 0,
            stream_lba: 0,
            stream_at: 0,
            busy: false,
            queue: Vec::new(),
            next_seq: 0,
            segments: Vec::new(),
            reading_ahead: false,
            readahead_left: 0,
            cache_used: 0,
            params,
        }
    }

    pub fn params(&self) -> &HddParams {
        &self.params
    }

    pub fn seek_curve(&self) -> &SeekCurve {
        &self.seek
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_sectors * SECTOR
    }

    /// Cylinder of a byte offset (for tests and seek statistics).
    pub fn cylinder_of(&self, offset: u64) -> u32 {
        self.chs(offset / SECTOR).cyl
    }

    pub fn cylinders(&self) -> u32 {
        self.params.cylinders
    }

    /// Sustained media rate at a byte offset (bytes/s).
    pub fn rate_at(&self, offset: u64) -> f64 {
        let z = &self.zones[self.chs(offset / SECTOR).zone];
        self.params.sustained_rate(z.spt)
    }

    fn chs(&self, lba: u64) -> Chs {
        let lba = lba.min(self.capacity_sectors - 1);
        let zone = self.zones.partition_point(|z| z.first_lba <= lba) - 1;
        let z = &self.zones[zone];
        let within = lba - z.first_lba;
        let per_track = u64::from(z.spt);
        let track_in_zone = within / per_track;
        let cyl = z.first_cyl + (track_in_zone / u64::from(self.params.heads)) as u32;
        let track = u64::from(z.first_cyl) * u64::from(self.params.heads) + track_in_zone;
        Chs { cyl, track, sector: (within % per_track) as u32, zone }
    }

    /// Rotational position (ns into a revolution) at which sector `lba` starts under the head.
    fn angle_of(&self, lba: u64) -> Nanos {
        let c = self.chs(lba);
        let z = &self.zones[c.zone];
        let skewed = (u64::from(c.sector) + c.track * u64::from(z.skew)) % u64::from(z.spt);
        skewed * self.rev / u64::from(z.spt)
    }

    /// Media time to transfer sectors `[start, end)`: a sector time each, plus the skew at
    /// every track boundary crossed.
    fn media_time(&self, start: u64, end: u64) -> Nanos {
        let mut t = 0;
        let mut lba = start;
        while lba < end {
            let c = self.chs(lba);
            let z = &self.zones[c.zone];
            let left_on_track = u64::from(z.spt - c.sector);
            let n = left_on_track.min(end - lba);
            t += n * self.rev / u64::from(z.spt);
            lba += n;
            if lba < end && n == left_on_track {
                t += u64::from(z.skew) * self.rev / u64::from(z.spt);
            }
        }
        t
    }

    /// Seek plus rotational wait to reach sector `lba` starting at `at`, from where the head is.
    fn reach(&self, at: Nanos, lba: u64, op: DiskOp) -> Nanos {
        if lba == self.stream_lba && at == self.stream_at {
            return 0;
        }
        let c = self.chs(lba);
        let distance = c.cyl.abs_diff(self.cyl);
        let mut seek = self.seek.time(distance);
        if distance > 0 && op == DiskOp::Write {
            seek += ms(self.params.write_settle_ms);
        }
        if distance == 0 && c.track != self.track {
            seek = ms(self.params.head_switch_ms);
        }
        let arrive = at + seek;
        let under_head = (arrive + self.phase) % self.rev;
        let wait = (self.angle_of(lba) + self.rev - under_head) % self.rev;
        seek + wait
    }

    /// What serving `request` at `now` would cost from the present head position and buffer,
    /// for a command the disk takes now.
    pub fn service_time(&self, now: Nanos, request: &DiskRequest) -> Service {
        self.service_time_of(now, request, self.params.queue_depth > 1)
    }

    /// Whether the disk decoded `q` while the last command ran. A disk that queues commands is
    /// taken to have held the next one by then (its queue is fed ahead of it); a disk without a
    /// queue (depth 1) holds one command at a time, so it took `q` during the last one only if
    /// it took it before that one's media phase ended: the host sends the next command only
    /// when it has seen the last one end.
    fn decoded(&self, q: &Queued) -> bool {
        self.params.queue_depth > 1 || q.accepted_at < self.stream_at
    }

    /// What serving `request` at `now` would cost; `decoded` if the disk took it while the
    /// previous command ran.
    fn service_time_of(&self, now: Nanos, request: &DiskRequest, decoded: bool) -> Service {
        let start = request.offset / SECTOR;
        let end = (request.offset + request.len).div_ceil(SECTOR);
        // A command decoded while the previous one ran starts the moment that one ends.
        let overhead = if decoded && now == self.stream_at { 0 } else { ms(self.params.command_overhead_ms) };
        if request.op == DiskOp::Read {
            if self.segments.iter().any(|s| s.start <= start && end <= s.end) {
                return Service { positioning: overhead, transfer: 0, buffer_hit: true };
            }
            // It starts inside the segment the head is streaming: carry on from its end.
            if let Some(seg) = self.segments.last() {
                if seg.end == self.stream_lba && seg.start <= start && start <= seg.end {
                    let streaming = self.reading_ahead && self.readahead_left > 0;
                    let positioning =
                        if streaming { overhead } else { overhead + self.reach(now + overhead, seg.end, request.op) };
                    return Service { positioning, transfer: self.media_time(seg.end, end), buffer_hit: false };
                }
            }
        }
        let wait = self.reach(now + overhead, start, request.op);
        Service { positioning: overhead + wait, transfer: self.media_time(start, end), buffer_hit: false }
    }

    /// Account for the read-ahead done while the disk sat idle up to `now`.
    fn settle_readahead(&mut self, now: Nanos) {
        if !self.reading_ahead || self.busy || now <= self.stream_at || self.readahead_left == 0 {
            return;
        }
        let Some(last) = self.segments.last().copied() else { return };
        if last.end != self.stream_lba {
            return;
        }
        // Sector by sector through track boundaries is exact but slow; advance by whole tracks.
        let mut lba = self.stream_lba;
        let mut at = self.stream_at;
        let limit = (lba + self.readahead_left).min(self.capacity_sectors);
        while lba < limit && at < now {
            let c = self.chs(lba);
            let z = self.zones[c.zone];
            let n = u64::from(z.spt - c.sector).min(limit - lba);
            let t = self.media_time(lba, lba + n);
            if at + t > now {
                let per_sector = self.rev / u64::from(z.spt);
                let k = (now - at) / per_sector;
                lba += k;
                at += k * per_sector;
                break;
            }
            lba += n;
            at += t;
            if n == u64::from(z.spt - c.sector) && lba < limit {
                at += u64::from(z.skew) * self.rev / u64::from(z.spt);
            }
        }
        self.readahead_left -= lba - self.stream_lba;
        if let Some(seg) = self.segments.last_mut() {
            seg.end = lba;
        }
        let c = self.chs(lba);
        self.cyl = c.cyl;
        self.track = c.track;
        self.stream_lba = lba;
        self.stream_at = at;
    }

    /// A queue slot for commands not yet acknowledged (cached writes hold buffer space, not a
    /// slot), and for a write that fits the write cache at all, room in it.
    pub fn has_room_for(&self, request: &DiskRequest) -> bool {
        let slot = self.queue.iter().filter(|q| !q.acked).count() < self.params.queue_depth;
        let cap = self.params.write_cache_bytes;
        let cacheable = request.op == DiskOp::Write && request.len <= cap;
        slot && (!cacheable || self.cache_used + request.len <= cap)
    }

    pub fn accept(&mut self, now: Nanos, request: DiskRequest) -> Accepted {
        let cached = request.op == DiskOp::Write
            && self.params.write_cache_bytes > 0
            && self.cache_used + request.len <= self.params.write_cache_bytes;
        if cached {
            self.cache_used += request.len;
        }
        self.queue.push(Queued { seq: self.next_seq, request, acked: cached, accepted_at: now });
        self.next_seq += 1;
        if cached {
            Accepted::Cached
        } else {
            Accepted::Queued
        }
    }

    /// Start the next request on the media if the disk is idle.
    pub fn dispatch(&mut self, now: Nanos, bus: &mut Bus) -> Option<Started> {
        if self.busy || self.queue.is_empty() {
            return None;
        }
        self.settle_readahead(now);
        let pick = match self.params.scheduling {
            Scheduling::Fifo => 0,
            Scheduling::Sptf => {
                let mut best = 0;
                let mut best_key = (u64::MAX, u64::MAX);
                for (i, q) in self.queue.iter().enumerate() {
                    let key = (self.service_time_of(now, &q.request, self.decoded(q)).positioning, q.seq);
                    if key < best_key {
                        best_key = key;
                        best = i;
                    }
                }
                best
            }
        };
        let q = self.queue.remove(pick);
        let r = q.request;
        let service = self.service_time_of(now, &r, self.decoded(&q));
        let media_start = now + service.positioning;
        let mut media_end = media_start + service.transfer;
        if r.op == DiskOp::Write && !q.acked {
            // The data crosses the bus while the disk seeks; the media cannot finish first.
            let arrived = bus.transfer(now, r.len);
            media_end = media_end.max(arrived);
        }
        let start = r.offset / SECTOR;
        let end = (r.offset + r.len).div_ceil(SECTOR);
        match r.op {
            DiskOp::Read => {
                if let Some(i) = self.segments.iter().rposition(|s| s.start <= start && start <= s.end) {
                    let mut seg = self.segments.remove(i);
                    seg.end = seg.end.max(end);
                    self.segments.push(seg);
                } else {
                    self.segments.push(Segment { start, end });
                }
                while self.segments.len() > self.params.cache_segments.max(1) {
                    self.segments.remove(0);
                }
                if !service.buffer_hit {
                    self.reading_ahead = true;
                    self.readahead_left = self.params.readahead_bytes / SECTOR;
                }
            }
            DiskOp::Write => {
                self.segments.retain(|s| s.end <= start || s.start >= end);
                self.reading_ahead = false;
            }
        }
        if !service.buffer_hit {
            let c = self.chs(end);
            self.cyl = c.cyl;
            self.track = c.track;
            self.stream_lba = end;
            self.stream_at = media_end;
        } else if self.reading_ahead && self.segments.last().is_some_and(|s| s.end == self.stream_lba) {
            // A hit in the streaming segment: read-ahead goes on past it.
            self.readahead_left =
                self.readahead_left.max((end + self.params.readahead_bytes / SECTOR).saturating_sub(self.stream_lba));
        }
        self.busy = true;
        Some(Started { request: r, media_start, media_end, acked: q.acked })
    }

    pub fn media_done(&mut self, _now: Nanos, started: &Started) {
        self.busy = false;
        if started.acked {
            self.cache_used -= started.request.len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::BusParams;
    use crate::SimRng;

    fn params() -> HddParams {
        crate::profiles::generic_hdd_7200().hdd().expect("an hdd").clone()
    }

    fn fast_bus() -> Bus {
        Bus::new(BusParams { name: "test", bytes_per_s: 1e12, command_overhead: 0 })
    }

    #[test]
    fn seek_curve_hits_the_three_datasheet_points_and_the_vendor_average() {
        for profile in crate::profiles::all() {
            let Some(p) = profile.hdd() else { continue };
            let disk = HardDisk::new(p.clone(), 0);
            let c = disk.seek_curve();
            let n = p.cylinders - 1;
            assert!(c.time(n).abs_diff(ms(p.seek_full_ms)) < 1000, "{}", profile.name);
            assert!(c.time(1).abs_diff(ms(p.seek_track_ms)) < ms(0.05), "{}", profile.name);
            // Mean over uniformly random pairs of cylinders (the vendor definition).
            let mut rng = SimRng::new(11);
            let samples = 200_000;
            let total: u64 = (0..samples)
                .map(|_| c.time((rng.below(u64::from(n) + 1) as u32).abs_diff(rng.below(u64::from(n) + 1) as u32)))
                .sum();
            let mean_ms = total as f64 / samples as f64 / 1e6;
            let rel = (mean_ms - p.seek_avg_ms).abs() / p.seek_avg_ms;
            assert!(rel < 0.03, "{}: mean random seek {mean_ms:.3} ms vs average {} ms", profile.name, p.seek_avg_ms);
        }
    }

    fn run_alone(disk: &mut HardDisk, requests: &[DiskRequest]) -> Nanos {
        // Closed loop, one at a time: each starts when the previous media phase ends.
        let mut bus = fast_bus();
        let mut now = 0;
        for r in requests {
            disk.accept(now, *r);
            let s = disk.dispatch(now, &mut bus).expect("idle disk starts");
            disk.media_done(s.media_end, &s);
            now = s.media_end;
        }
        now
    }

    #[test]
    fn a_command_the_disk_takes_only_when_the_last_ends_misses_the_next_sector() {
        // Back to back on one track, a disk without a queue: the command overhead lets the next
        // sector pass, and the disk waits most of a revolution for it; with a queue, it streams on.
        let p = HddParams { readahead_bytes: 0, scheduling: Scheduling::Fifo, ..params() };
        let reqs: Vec<DiskRequest> =
            (0..50).map(|i| DiskRequest { id: i, op: DiskOp::Read, offset: i * 4096, len: 4096 }).collect();
        let alone = run_alone(&mut HardDisk::new(HddParams { queue_depth: 1, ..p.clone() }, 777), &reqs);
        let queued = run_queued(p.clone(), &reqs, 2);
        let rev = p.revolution();
        assert!(alone > queued + 40 * rev / 2, "alone {alone} ns, queued {queued} ns, a revolution {rev} ns");
    }

    #[test]
    fn sequential_reads_run_at_the_outer_zone_media_rate() {
        // In order, the next command queued while each runs.
        let p = HddParams { scheduling: Scheduling::Fifo, ..params() };
        let disk = HardDisk::new(p.clone(), 12345);
        let len = 256 << 10;
        let reqs: Vec<DiskRequest> =
            (0..200).map(|i| DiskRequest { id: i, op: DiskOp::Read, offset: i * len, len }).collect();
        let t = run_queued(p.clone(), &reqs, 2);
        let rate = (200 * len) as f64 / (t as f64 / 1e9);
        let media = p.sustained_rate(p.spt_outer);
        assert!((rate - media).abs() / media < 0.03, "sequential {rate:.0} B/s vs media {media:.0} B/s");
        // Inner zones are slower.
        assert!(disk.rate_at(disk.capacity_bytes() - 1) < 0.7 * media);
    }

    #[test]
    fn a_reread_hits_the_track_buffer() {
        let mut disk = HardDisk::new(params(), 0);
        let r = DiskRequest { id: 1, op: DiskOp::Read, offset: 1 << 30, len: 64 << 10 };
        run_alone(&mut disk, &[r]);
        let s = disk.service_time(ms(50.0), &r);
        assert!(s.buffer_hit && s.transfer == 0);
        // Read-ahead while idle: the next 64 KiB is there after a few milliseconds idle.
        let next = DiskRequest { id: 2, op: DiskOp::Read, offset: (1 << 30) + (64 << 10), len: 64 << 10 };
        let mut bus = fast_bus();
        disk.accept(ms(60.0), next);
        let started = disk.dispatch(ms(60.0), &mut bus).unwrap();
        assert_eq!(started.media_end - started.media_start, 0, "read-ahead served it");
    }

    fn random_reads(seed: u64, n: u64, span: u64) -> Vec<DiskRequest> {
        let mut rng = SimRng::new(seed);
        (0..n)
            .map(|i| DiskRequest { id: i, op: DiskOp::Read, offset: rng.below(span / 4096) * 4096, len: 4096 })
            .collect()
    }

    /// Keep `depth` requests queued at the disk until `reqs` are done; the elapsed time.
    fn run_queued(p: HddParams, reqs: &[DiskRequest], depth: usize) -> Nanos {
        let mut disk = HardDisk::new(HddParams { queue_depth: depth, ..p }, 777);
        let mut bus = fast_bus();
        let mut now = 0;
        let mut next = 0;
        let mut done = 0;
        while done < reqs.len() {
            while next < reqs.len() && disk.has_room_for(&reqs[next]) {
                disk.accept(now, reqs[next]);
                next += 1;
            }
            let s = disk.dispatch(now, &mut bus).expect("work queued");
            now = s.media_end;
            disk.media_done(now, &s);
            done += 1;
        }
        now
    }

    #[test]
    fn sptf_beats_fifo_at_queue_depth_16() {
        let p = params();
        let cap = HardDisk::new(p.clone(), 0).capacity_bytes();
        let reqs = random_reads(5, 3000, cap);
        let fifo = run_queued(HddParams { scheduling: Scheduling::Fifo, ..p.clone() }, &reqs, 16);
        let sptf = run_queued(HddParams { scheduling: Scheduling::Sptf, ..p.clone() }, &reqs, 16);
        assert!((sptf as f64) < 0.7 * fifo as f64, "SPTF {sptf} ns vs FIFO {fifo} ns");
        // And random single reads average seek + half a revolution + overhead.
        let one = run_queued(HddParams { scheduling: Scheduling::Fifo, ..p.clone() }, &reqs, 1) as f64 / 3000.0 / 1e6;
        let expect = p.seek_avg_ms + 30_000.0 / p.rpm + p.command_overhead_ms;
        assert!((one - expect).abs() / expect < 0.1, "random access {one:.2} ms vs {expect:.2} ms");
    }

    #[test]
    fn two_interleaved_sequential_streams_are_seek_bound() {
        let p = params();
        let disk = HardDisk::new(p.clone(), 0);
        let half = disk.capacity_bytes() / 2;
        let len = 64 << 10;
        let mut reqs = Vec::new();
        for i in 0..300 {
            reqs.push(DiskRequest { id: 2 * i, op: DiskOp::Read, offset: i * len, len });
            reqs.push(DiskRequest { id: 2 * i + 1, op: DiskOp::Read, offset: half + i * len, len });
        }
        let t = run_queued(HddParams { scheduling: Scheduling::Fifo, ..p.clone() }, &reqs, 1);
        let rate = (600 * len) as f64 / (t as f64 / 1e9);
        let media = p.sustained_rate(p.spt_outer);
        assert!(rate < 0.5 * media, "interleaved streams {rate:.0} B/s should be far below {media:.0} B/s");
    }

    #[test]
    fn write_cache_acknowledges_at_once_and_destages_later() {
        let p = HddParams { write_cache_bytes: 1 << 20, ..params() };
        let mut disk = HardDisk::new(p, 0);
        let w = DiskRequest { id: 1, op: DiskOp::Write, offset: 1 << 30, len: 64 << 10 };
        assert_eq!(disk.accept(0, w), Accepted::Cached);
        let big = DiskRequest { id: 2, op: DiskOp::Write, offset: 0, len: 2 << 20 };
        assert_eq!(disk.accept(0, big), Accepted::Queued, "larger than the cache");
    }
}
