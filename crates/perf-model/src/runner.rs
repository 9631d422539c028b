//! The event loop: benchmark streams → the real engine → member I/Os on simulated disks →
//! completions back through the engine to the streams, all in virtual time.
//!
//! What it owns: building the array ([`ArraySpec`] → [`Geometry`] sized to the profile's
//! disks), the loop itself, and the places where engine types and simulated I/O meet: a member
//! I/O becomes a disk request in [`member_io_to_disk`], a completion becomes the engine's
//! [`IoResult`] in [`disk_result_to_engine`], and a stream's request becomes an engine
//! [`Request`] in [`engine_request`]. The engine's data-buffer types may change; only these
//! three functions know them. The baseline target
//! [`Target::Disk`] runs the same streams on one bare disk with no engine in between, as the
//! seeds measured their single disks (`sdf1`, "base hd", a single disk without RAIDframe).

use std::collections::HashMap;

use uraid_engine::{Array, Geometry, IoResult, MemberIo, MemberOp, Request, SlotState, SECTOR_BYTES};
use uraid_layout::{
    Level, LinearLayout, ParityAlgorithm, ParityLayout, Raid0Layout, Raid0ZoneLayout, Raid10Format, Raid10Layout,
    Raid1Layout,
};

use crate::disk::{DiskOp, DiskRequest};
use crate::profiles::Profile;
use crate::storage::Storage;
use crate::workload::{IoReq, Stream};
use crate::{Nanos, SimRng};

/// An md array to build over the profile's disks. Chunks are in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArraySpec {
    Linear {
        disks: usize,
    },
    Raid0 {
        disks: usize,
        chunk: u64,
    },
    Raid1 {
        disks: usize,
    },
    /// Left-symmetric (md's default).
    Raid5 {
        disks: usize,
        chunk: u64,
    },
    Raid10 {
        disks: usize,
        chunk: u64,
        far: bool,
    },
}

impl ArraySpec {
    pub fn disks(&self) -> usize {
        match *self {
            ArraySpec::Linear { disks }
            | ArraySpec::Raid0 { disks, .. }
            | ArraySpec::Raid1 { disks }
            | ArraySpec::Raid5 { disks, .. }
            | ArraySpec::Raid10 { disks, .. } => disks,
        }
    }

    /// Whether reads have a choice of copy (so a read policy matters).
    pub fn mirrored(&self) -> bool {
        matches!(self, ArraySpec::Raid1 { .. } | ArraySpec::Raid10 { .. })
    }

    /// The engine geometry with every member `member_bytes` long (data from byte 0 of each
    /// disk: the superblock and data offset are left out, they only shift every address).
    pub fn geometry(&self, member_bytes: u64) -> Result<Geometry, String> {
        let sectors = member_bytes / SECTOR_BYTES;
        let chunk_sectors = |c: u64| -> Result<u32, String> {
            if c < 4096 || !c.is_multiple_of(SECTOR_BYTES) {
                return Err(format!("chunk of {c} bytes: md's smallest chunk is 4 KiB"));
            }
            Ok((c / SECTOR_BYTES) as u32)
        };
        let e = |e: uraid_layout::LayoutError| e.to_string();
        Ok(match *self {
            ArraySpec::Linear { disks } => Geometry::Linear(LinearLayout::new(&vec![sectors; disks], 0).map_err(e)?),
            ArraySpec::Raid0 { disks, chunk } => {
                let c = chunk_sectors(chunk)?;
                let s = sectors / u64::from(c) * u64::from(c);
                Geometry::Raid0(Raid0Layout::new(&vec![s; disks], c, Raid0ZoneLayout::Unset).map_err(e)?)
            }
            ArraySpec::Raid1 { disks } => Geometry::Raid1(Raid1Layout::new(disks, sectors).map_err(e)?),
            ArraySpec::Raid5 { disks, chunk } => {
                let alg = ParityAlgorithm::from_md(Level::Raid5, 2).map_err(e)?;
                Geometry::Parity(
                    ParityLayout::new(Level::Raid5, alg, disks, chunk_sectors(chunk)?, sectors).map_err(e)?,
                )
            }
            ArraySpec::Raid10 { disks, chunk, far } => {
                let format = Raid10Format::parse(if far { "f2" } else { "n2" }).map_err(e)?;
                Geometry::Raid10(Raid10Layout::new(disks, chunk_sectors(chunk)?, format, sectors).map_err(e)?)
            }
        })
    }
}

/// What the streams run against.
#[derive(Debug, Clone)]
pub enum Target {
    /// One bare disk, no engine.
    Disk,
    /// An md array through the engine.
    Array(ArraySpec),
}

impl Target {
    pub fn disks(&self) -> usize {
        match self {
            Target::Disk => 1,
            Target::Array(spec) => spec.disks(),
        }
    }
}

/// How one stream did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamResult {
    /// Bytes of its waited requests.
    pub bytes: u64,
    /// Waited requests completed.
    pub ops: u64,
    /// When its last waited request completed.
    pub finished_at: Nanos,
}

impl StreamResult {
    /// Bytes per second over the stream's own run (how `dd` reports).
    pub fn rate(&self) -> f64 {
        self.bytes as f64 / (self.finished_at.max(1) as f64 / 1e9)
    }
}

/// How a run went.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// When the last stream finished.
    pub elapsed: Nanos,
    pub streams: Vec<StreamResult>,
    /// Member media time per disk.
    pub disk_busy: Vec<Nanos>,
}

impl RunResult {
    pub fn bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes).sum()
    }
    pub fn ops(&self) -> u64 {
        self.streams.iter().map(|s| s.ops).sum()
    }
    pub fn seconds(&self) -> f64 {
        self.elapsed as f64 / 1e9
    }
    /// Aggregate bytes per second.
    pub fn throughput(&self) -> f64 {
        self.bytes() as f64 / self.seconds()
    }
    /// Waited operations per second.
    pub fn ops_per_s(&self) -> f64 {
        self.ops() as f64 / self.seconds()
    }
    /// The sum of every stream's own rate (how the seeds add up parallel `dd`s).
    pub fn sum_of_rates(&self) -> f64 {
        self.streams.iter().map(|s| s.rate()).sum()
    }
}

/// A hook to configure the engine before the run (a read policy, say).
pub type Configure<'a> = &'a dyn Fn(&mut Array);

/// An engine member I/O as a disk request, or `None` for what completes at once here (a flush
/// or a discard: no modelled disk has a cache that a flush must drain... except a write cache,
/// whose flush cost the seeds' workloads never pay, and none of them discards).
pub fn member_io_to_disk(io: &MemberIo, id: u64) -> Option<DiskRequest> {
    let (op, len) = match &io.op {
        MemberOp::Read { len } => (DiskOp::Read, *len),
        MemberOp::Write { data } => (DiskOp::Write, data.len() as u64),
        MemberOp::Flush | MemberOp::Discard { .. } => return None,
        MemberOp::LogWrite { .. } => panic!("perf-model arrays run without a partial parity log"),
        MemberOp::MetadataWrite { .. } => panic!("the engine never emits metadata writes"),
    };
    Some(DiskRequest { id, op, offset: io.offset, len })
}

/// What the engine hears when a member I/O has completed: for the disk request it became,
/// zeros for a read (the simulator measures time, not data); for one that became none
/// (`member_io_to_disk` gave `None`), success.
pub fn disk_result_to_engine(request: Option<&DiskRequest>) -> IoResult {
    match request.map(|r| (r.op, r.len)) {
        Some((DiskOp::Read, len)) => IoResult::Read(vec![0; len as usize].into()),
        Some((DiskOp::Write, _)) | None => IoResult::Done,
    }
}

/// A stream's request as an engine request (writes carry zeros).
pub fn engine_request(req: &IoReq) -> Request {
    match req.op {
        DiskOp::Read => Request::Read { offset: req.offset, len: req.len },
        DiskOp::Write => Request::Write { offset: req.offset, data: (vec![0; req.len as usize]).into() },
    }
}

/// Run `streams` against `target` on disks of `profile`; one seed decides everything random
/// (platter phases, the streams' choices).
pub fn run(
    profile: &Profile,
    target: &Target,
    configure: Configure,
    mut streams: Vec<Box<dyn Stream>>,
    seed: u64,
) -> RunResult {
    let mut rng = SimRng::new(seed);
    let mut storage = Storage::new(profile, target.disks(), &mut rng.fork());
    let mut array = match target {
        Target::Disk => None,
        Target::Array(spec) => {
            let member = storage.capacity_bytes(0);
            let geometry = spec.geometry(member).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
            let mut a = Array::new(geometry, vec![SlotState::InSync; spec.disks()]).expect("a whole array");
            configure(&mut a);
            Some(a)
        }
    };
    let n = streams.len();
    let mut results = vec![StreamResult::default(); n];
    let mut in_flight = vec![0usize; n];
    // A stream thinking (spending CPU), or not started yet, issues nothing until then.
    let mut wake_at: Vec<Nanos> = streams.iter().map(|s| s.starts_at()).collect();
    // Requests in the engine (or on the bare disk): id → (stream, request).
    let mut requests: HashMap<u64, (usize, IoReq)> = HashMap::new();
    // Disk requests the engine caused: disk request id → engine member I/O id.
    let mut member_ios: HashMap<u64, u64> = HashMap::new();
    let mut next_disk_id = 0u64;
    loop {
        let now = storage.now();
        let mut progress = true;
        while progress {
            progress = false;
            for (i, s) in streams.iter_mut().enumerate() {
                if wake_at[i] > now {
                    continue;
                }
                while let Some(req) = s.next(&mut rng, in_flight[i]) {
                    progress = true;
                    if req.wait {
                        in_flight[i] += 1;
                    }
                    match array.as_mut() {
                        Some(a) => {
                            let id = a.submit(engine_request(&req)).unwrap_or_else(|e| panic!("{req:?}: {e}"));
                            requests.insert(id, (i, req));
                        }
                        None => {
                            let id = next_disk_id;
                            next_disk_id += 1;
                            requests.insert(id, (i, req));
                            storage.submit(0, DiskRequest { id, op: req.op, offset: req.offset, len: req.len });
                        }
                    }
                }
            }
            if let Some(a) = array.as_mut() {
                while let Some(io) = a.next_io() {
                    progress = true;
                    match member_io_to_disk(&io, next_disk_id) {
                        Some(dr) => {
                            member_ios.insert(next_disk_id, io.id);
                            next_disk_id += 1;
                            storage.submit(io.slot, dr);
                        }
                        None => a.complete_io(io.id, disk_result_to_engine(None)),
                    }
                }
                while let Some((id, result)) = a.next_completion() {
                    progress = true;
                    if let Err(e) = result {
                        panic!("request failed in a fault-free run: {e}");
                    }
                    let (i, req) = requests.remove(&id).expect("a known request");
                    finish(&mut streams[i], &mut results[i], &mut in_flight[i], &mut wake_at[i], &req, now, &mut rng);
                }
            }
        }
        let all_done = streams.iter().zip(&in_flight).all(|(s, &f)| s.finished() && f == 0);
        if all_done {
            break;
        }
        let wake = wake_at.iter().copied().filter(|&t| t > now).min();
        match (storage.next_time(), wake) {
            (None, None) => panic!("the run stalled with work left"),
            (next, Some(w)) if next.is_none_or(|t| w < t) => {
                storage.advance_to(w);
                continue;
            }
            _ => {}
        }
        if let Some(c) = storage.step() {
            match array.as_mut() {
                Some(a) => {
                    let io = member_ios.remove(&c.request.id).expect("a known member I/O");
                    a.complete_io(io, disk_result_to_engine(Some(&c.request)));
                }
                None => {
                    let (i, req) = requests.remove(&c.request.id).expect("a known request");
                    finish(&mut streams[i], &mut results[i], &mut in_flight[i], &mut wake_at[i], &req, c.at, &mut rng);
                }
            }
        }
    }
    let elapsed = results.iter().map(|r| r.finished_at).max().unwrap_or(0);
    RunResult {
        elapsed,
        streams: results,
        disk_busy: (0..storage.disk_count()).map(|d| storage.busy_time(d)).collect(),
    }
}

fn finish(
    stream: &mut Box<dyn Stream>,
    result: &mut StreamResult,
    in_flight: &mut usize,
    wake_at: &mut Nanos,
    req: &IoReq,
    now: Nanos,
    rng: &mut SimRng,
) {
    if !req.wait {
        return;
    }
    *in_flight -= 1;
    result.bytes += req.len;
    result.ops += 1;
    result.finished_at = now;
    stream.complete(req, rng);
    *wake_at = now + stream.think();
}

/// Nothing to configure.
pub fn no_configure(_: &mut Array) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles;
    use crate::workload::{Rawio, Sequential, Sizes};

    fn seq(op: DiskOp, bytes: u64) -> Vec<Box<dyn Stream>> {
        vec![Box::new(Sequential::new(op, 0, bytes, 512 << 10, 4))]
    }

    #[test]
    fn raid0_over_two_disks_doubles_sequential_reads() {
        let p = profiles::generic_hdd_7200();
        let one = run(&p, &Target::Disk, &no_configure, seq(DiskOp::Read, 256 << 20), 1).throughput();
        let two = run(
            &p,
            &Target::Array(ArraySpec::Raid0 { disks: 2, chunk: 64 << 10 }),
            &no_configure,
            seq(DiskOp::Read, 256 << 20),
            1,
        )
        .throughput();
        let ratio = two / one;
        assert!((1.8..2.1).contains(&ratio), "raid0 x2 / single = {ratio:.2} ({two:.0} vs {one:.0})");
    }

    #[test]
    fn a_raid1_write_costs_about_one_disk_write() {
        let p = profiles::generic_hdd_7200();
        let one = run(&p, &Target::Disk, &no_configure, seq(DiskOp::Write, 128 << 20), 2).throughput();
        let mirror =
            run(&p, &Target::Array(ArraySpec::Raid1 { disks: 2 }), &no_configure, seq(DiskOp::Write, 128 << 20), 2)
                .throughput();
        let ratio = mirror / one;
        assert!((0.9..1.05).contains(&ratio), "raid1 write / single = {ratio:.2}");
    }

    #[test]
    fn a_one_member_linear_array_matches_the_bare_disk() {
        let p = profiles::uw_scsi_1998();
        let streams = || -> Vec<Box<dyn Stream>> {
            vec![Box::new(Rawio {
                op: DiskOp::Read,
                start: 0,
                span: 1 << 30,
                sizes: Sizes::Fixed(8192),
                ops_left: 500,
            })]
        };
        let bare = run(&p, &Target::Disk, &no_configure, streams(), 3);
        let linear = run(&p, &Target::Array(ArraySpec::Linear { disks: 1 }), &no_configure, streams(), 3);
        assert_eq!(bare.elapsed, linear.elapsed, "the engine adds no time of its own");
    }

    #[test]
    fn raid5_small_writes_cost_four_member_ios() {
        let p = profiles::uw_scsi_1998();
        let streams = || -> Vec<Box<dyn Stream>> {
            vec![Box::new(Rawio {
                op: DiskOp::Write,
                start: 0,
                span: 1 << 30,
                sizes: Sizes::Fixed(4096),
                ops_left: 300,
            })]
        };
        let single = run(&p, &Target::Disk, &no_configure, streams(), 4).ops_per_s();
        let raid5 =
            run(&p, &Target::Array(ArraySpec::Raid5 { disks: 3, chunk: 64 << 10 }), &no_configure, streams(), 4)
                .ops_per_s();
        // Read old data and parity, then write both: two dependent rounds on two disks.
        let ratio = raid5 / single;
        assert!((0.3..0.65).contains(&ratio), "raid5 small writes / single = {ratio:.2}");
    }

    #[test]
    fn raid10_far_reads_a_single_stream_like_raid0() {
        // md's far layout puts the first copy of every chunk striped over the outer halves,
        // so one sequential reader gets both disks (the 2008 seed's commenters' point).
        let p = profiles::generic_hdd_7200();
        let one = run(&p, &Target::Disk, &no_configure, seq(DiskOp::Read, 256 << 20), 5).throughput();
        let far = Target::Array(ArraySpec::Raid10 { disks: 2, chunk: 512 << 10, far: true });
        let f2 = run(&p, &far, &no_configure, seq(DiskOp::Read, 256 << 20), 5).throughput();
        let near = Target::Array(ArraySpec::Raid10 { disks: 2, chunk: 512 << 10, far: false });
        let n2 = run(&p, &near, &no_configure, seq(DiskOp::Read, 256 << 20), 5).throughput();
        assert!(f2 / one > 1.7, "raid10 f2 / single = {:.2}", f2 / one);
        assert!(n2 / one < 1.2, "raid10 n2 / single = {:.2}", n2 / one);
    }

    #[test]
    fn an_nvme_mirror_serves_random_reads_from_both_copies() {
        let p = profiles::nvme();
        let streams = || -> Vec<Box<dyn Stream>> {
            (0..32)
                .map(|_| {
                    Box::new(Rawio {
                        op: DiskOp::Read,
                        start: 0,
                        span: 1 << 30,
                        sizes: Sizes::Fixed(128 << 10),
                        ops_left: 100,
                    }) as Box<dyn Stream>
                })
                .collect()
        };
        let one = run(&p, &Target::Disk, &no_configure, streams(), 6).throughput();
        let least_busy = |a: &mut Array| a.set_read_policy(uraid_engine::ReadPolicy::ShortestQueue);
        let two = run(&p, &Target::Array(ArraySpec::Raid1 { disks: 2 }), &least_busy, streams(), 6).throughput();
        assert!(two / one > 1.7, "nvme raid1 / single = {:.2}", two / one);
    }

    #[test]
    fn a_stream_issues_nothing_before_it_starts() {
        let p = profiles::generic_hdd_7200();
        let at_once = run(&p, &Target::Disk, &no_configure, seq(DiskOp::Read, 16 << 20), 7);
        let delay = crate::ms(250.0);
        let later: Vec<Box<dyn Stream>> =
            vec![Box::new(Sequential::new(DiskOp::Read, 0, 16 << 20, 512 << 10, 4).starting_at(delay))];
        let later = run(&p, &Target::Disk, &no_configure, later, 7);
        // The same work, a quarter second later (give or take where the platter stands then).
        let took = later.elapsed - delay;
        assert!(took.abs_diff(at_once.elapsed) < crate::ms(10.0), "{took} vs {}", at_once.elapsed);
    }

    #[test]
    fn runs_are_deterministic() {
        let p = profiles::sata_2008();
        let streams = || -> Vec<Box<dyn Stream>> {
            (0..4)
                .map(|_| {
                    Box::new(Rawio {
                        op: DiskOp::Read,
                        start: 0,
                        span: 4 << 30,
                        sizes: Sizes::Uniform { min: 512, max: 32768 },
                        ops_left: 200,
                    }) as Box<dyn Stream>
                })
                .collect()
        };
        let spec = Target::Array(ArraySpec::Raid1 { disks: 2 });
        assert_eq!(run(&p, &spec, &no_configure, streams(), 9), run(&p, &spec, &no_configure, streams(), 9));
        assert_ne!(
            run(&p, &spec, &no_configure, streams(), 9).elapsed,
            run(&p, &spec, &no_configure, streams(), 10).elapsed
        );
    }
}
