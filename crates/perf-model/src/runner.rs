//! The event loop: benchmark streams → the real engine → member I/Os on simulated disks →
//! completions back through the engine to the streams, all in virtual time.
//!
//! What it owns: building the array ([`ArraySpec`] → [`Geometry`] sized to the profile's
//! disks, or a gvinum volume placed on drives, [`DriveVolume`]), the loop itself, and the places
//! where engine types and simulated I/O meet: a member I/O becomes a disk request in
//! [`member_io_to_disk`], a completion becomes the engine's [`IoResult`] in
//! [`disk_result_to_engine`], and a stream's request becomes an engine [`Request`] in
//! [`engine_request`]. The engine's data-buffer types may change; only these three functions
//! know them. An md array's slot `s` is disk `s`, from its first byte; a volume's slot is a
//! subdisk, placed on its drive at its drive offset, and several may share one disk. The
//! baseline target [`Target::Disk`] runs the same streams on one bare disk with no engine in
//! between, as the seeds measured their single disks (`sdf1`, "base hd", a single disk without
//! RAIDframe).

use std::collections::{HashMap, VecDeque};

use uraid_engine::{
    Array, Geometry, IoResult, MemberIo, MemberOp, ParityWriteChoice, Request, SlotState, SECTOR_BYTES,
};
use uraid_layout::{
    Level, LinearLayout, ParityAlgorithm, ParityLayout, Raid0Layout, Raid0ZoneLayout, Raid10Format, Raid10Layout,
    Raid1Layout,
};

use crate::disk::{DiskOp, DiskRequest};
use crate::profiles::Profile;
use crate::storage::Storage;
use crate::volume::DriveVolume;
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
    /// A gvinum volume through the engine, its subdisks on the drives the volume places them on.
    Volume(DriveVolume),
    /// An array under NetBSD's RAIDframe driver (see [`Raidframe`]).
    Raidframe(Raidframe),
}

/// An array as NetBSD's RAIDframe driver of early 2000 ran it: the layout of `spec` (RAIDframe's
/// RAID 0 and RAID 5 place data as md's raid0 and left-symmetric raid5 do), and
/// - at most `openings` requests inside the driver at once. `raidstrategy` appends every
///   request to the unit's queue, and `raidstart` takes one off its head only while
///   `raidPtr->openings` is above zero, one opening per access until it completes
///   (`rf_netbsdkintf.c`, `RAIDOUTSTANDING` 6); the rest wait in arrival order;
/// - parity writes planned as `parity_writes` says: RAIDframe's
///   [`ParityWriteChoice::StripeUnits`] (`rf_RaidFiveDagSelect`), where md's engine counts
///   reads.
///
/// Like the engine, RAIDframe plans each request alone, stripe by stripe, and a write waits
/// for earlier writes to the same stripe (its stripe locks, `rf_stripelocks.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raidframe {
    pub spec: ArraySpec,
    pub openings: usize,
    pub parity_writes: ParityWriteChoice,
}

impl Raidframe {
    /// RAIDframe's default: `RAIDOUTSTANDING` openings.
    pub const OPENINGS: usize = 6;

    /// `spec` under RAIDframe as it was: its openings and its choice of parity write.
    pub fn new(spec: ArraySpec) -> Raidframe {
        Raidframe { spec, openings: Raidframe::OPENINGS, parity_writes: ParityWriteChoice::StripeUnits }
    }
}

impl Target {
    /// How many simulated disks the target needs.
    pub fn disks(&self) -> usize {
        match self {
            Target::Disk => 1,
            Target::Array(spec) | Target::Raidframe(Raidframe { spec, .. }) => spec.disks(),
            Target::Volume(v) => v.drives(),
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
    /// Requests the disks were given (member I/Os, or the streams' own on a bare disk).
    pub disk_requests: u64,
    /// Time each channel was held (data and per-command overhead).
    pub bus_busy: Vec<Nanos>,
    /// CPU time the streams spent thinking between requests.
    pub think: Nanos,
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

/// Where the engine's member bytes are on the simulated disks.
enum SlotMap<'a> {
    /// Slot `s` is disk `s`, from its first byte (md arrays).
    Identity,
    /// Slots are subdisks placed on drives.
    Volume(&'a DriveVolume),
}

impl SlotMap<'_> {
    fn place(&self, slot: usize, offset: u64) -> (usize, u64) {
        match self {
            SlotMap::Identity => (slot, offset),
            SlotMap::Volume(v) => v.place(slot, offset),
        }
    }
}

/// A stream's request on its way: whose it is, and how many of the pieces it was cut into
/// (one but for Vinum's request structure) are still out.
struct InFlight {
    stream: usize,
    req: IoReq,
    pieces_left: usize,
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
    let (mut array, slots) = match target {
        Target::Disk => (None, SlotMap::Identity),
        Target::Array(spec) | Target::Raidframe(Raidframe { spec, .. }) => {
            let member = storage.capacity_bytes(0);
            let geometry = spec.geometry(member).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
            (
                Some(Array::new(geometry, vec![SlotState::InSync; spec.disks()]).expect("a whole array")),
                SlotMap::Identity,
            )
        }
        Target::Volume(v) => {
            let slots = vec![SlotState::InSync; v.slots().len()];
            (Some(Array::new(v.geometry().clone(), slots).expect("a whole volume")), SlotMap::Volume(v))
        }
    };
    if let (Some(a), Target::Raidframe(r)) = (array.as_mut(), target) {
        a.set_parity_write_choice(r.parity_writes);
    }
    if let Some(a) = array.as_mut() {
        configure(a);
    }
    let cut = |req: &IoReq| match target {
        Target::Volume(v) => v.pieces(req.offset, req.len),
        _ => vec![(req.offset, req.len)],
    };
    let n = streams.len();
    let mut results = vec![StreamResult::default(); n];
    let mut in_flight = vec![0usize; n];
    // A stream thinking (spending CPU), or not started yet, issues nothing until then.
    let mut wake_at: Vec<Nanos> = streams.iter().map(|s| s.starts_at()).collect();
    // Streams' requests on their way, by a number of the runner's own.
    let mut on_way: HashMap<u64, InFlight> = HashMap::new();
    let mut next_on_way = 0u64;
    // Pieces in the engine (or on the bare disk): engine request id (or disk request id) →
    // the stream request it is part of.
    let mut pieces: HashMap<u64, u64> = HashMap::new();
    // Disk requests the engine caused: disk request id → engine member I/O id.
    let mut member_ios: HashMap<u64, u64> = HashMap::new();
    let mut next_disk_id = 0u64;
    let mut done_pieces: Vec<(u64, Nanos)> = Vec::new();
    let mut thought: Nanos = 0;
    // Stream requests not yet let into the driver, in arrival order, and how many are in it.
    let openings = match target {
        Target::Raidframe(r) => r.openings,
        _ => usize::MAX,
    };
    let mut waiting: VecDeque<u64> = VecDeque::new();
    let mut admitted = 0usize;
    loop {
        let now = storage.now();
        let mut progress = true;
        while progress {
            progress = false;
            // Pieces finished since the last pass (by the engine, or on the bare disk): a stream
            // request is done with its last piece.
            for (id, at) in done_pieces.drain(..) {
                let key = pieces.remove(&id).expect("a known piece");
                let whole = on_way.get_mut(&key).expect("a request on its way");
                whole.pieces_left -= 1;
                if whole.pieces_left == 0 {
                    let InFlight { stream: i, req, .. } = on_way.remove(&key).expect("present");
                    admitted -= 1;
                    thought += finish(
                        &mut streams[i],
                        &mut results[i],
                        &mut in_flight[i],
                        &mut wake_at[i],
                        &req,
                        at,
                        &mut rng,
                    );
                }
            }
            for (i, s) in streams.iter_mut().enumerate() {
                if wake_at[i] > now {
                    continue;
                }
                while let Some(req) = s.next(&mut rng, in_flight[i]) {
                    progress = true;
                    if req.wait {
                        in_flight[i] += 1;
                    }
                    let key = next_on_way;
                    next_on_way += 1;
                    on_way.insert(key, InFlight { stream: i, req, pieces_left: 0 });
                    waiting.push_back(key);
                }
            }
            // Let requests into the driver while it has openings, oldest first.
            while admitted < openings {
                let Some(key) = waiting.pop_front() else { break };
                progress = true;
                admitted += 1;
                let whole = on_way.get_mut(&key).expect("a request on its way");
                let req = whole.req;
                let parts = cut(&req);
                whole.pieces_left = parts.len();
                for (offset, len) in parts {
                    let piece = IoReq { offset, len, ..req };
                    match array.as_mut() {
                        Some(a) => {
                            let id = a.submit(engine_request(&piece)).unwrap_or_else(|e| panic!("{piece:?}: {e}"));
                            pieces.insert(id, key);
                        }
                        None => {
                            let id = next_disk_id;
                            next_disk_id += 1;
                            pieces.insert(id, key);
                            storage.submit(0, DiskRequest { id, op: piece.op, offset, len });
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
                            let (disk, offset) = slots.place(io.slot, dr.offset);
                            storage.submit(disk, DiskRequest { offset, ..dr });
                        }
                        None => a.complete_io(io.id, disk_result_to_engine(None)),
                    }
                }
                while let Some((id, result)) = a.next_completion() {
                    progress = true;
                    if let Err(e) = result {
                        panic!("request failed in a fault-free run: {e}");
                    }
                    done_pieces.push((id, now));
                }
                progress |= !done_pieces.is_empty();
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
                None => done_pieces.push((c.request.id, c.at)),
            }
        }
    }
    let elapsed = results.iter().map(|r| r.finished_at).max().unwrap_or(0);
    RunResult {
        elapsed,
        streams: results,
        disk_busy: (0..storage.disk_count()).map(|d| storage.busy_time(d)).collect(),
        disk_requests: next_disk_id,
        bus_busy: storage.bus_busy(),
        think: thought,
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
) -> Nanos {
    if !req.wait {
        return 0;
    }
    *in_flight -= 1;
    result.bytes += req.len;
    result.ops += 1;
    result.finished_at = now;
    stream.complete(req, rng);
    let think = stream.think();
    *wake_at = now + think;
    think
}

/// Nothing to configure.
pub fn no_configure(_: &mut Array) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiles;
    use crate::volume::RequestStructure;
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
    fn raidframe_read_modify_writes_a_single_stripe_unit_where_md_reconstructs() {
        // Three disks: an 8 KiB write inside one 16 KiB stripe unit. md reads the other data
        // unit's rows (one read); RAIDframe's small-write DAG reads old data and old parity.
        let p = profiles::uw_scsi_1998();
        let spec = ArraySpec::Raid5 { disks: 3, chunk: 16 << 10 };
        let one = || -> Vec<Box<dyn Stream>> {
            vec![Box::new(Rawio { op: DiskOp::Write, start: 0, span: 8192, sizes: Sizes::Fixed(8192), ops_left: 1 })]
        };
        let ios = |target: &Target| run(&p, target, &no_configure, one(), 4).disk_requests;
        assert_eq!(ios(&Target::Array(spec)), 3);
        assert_eq!(ios(&Target::Raidframe(Raidframe::new(spec))), 4);
        let md_choice = Raidframe { parity_writes: ParityWriteChoice::FewestReads, ..Raidframe::new(spec) };
        assert_eq!(ios(&Target::Raidframe(md_choice)), 3);
    }

    #[test]
    fn raidframe_lets_in_only_its_openings() {
        // Twelve processes of one random read each: with one opening they are served one at a
        // time, with RAIDframe's six several at once.
        let p = profiles::uw_scsi_1998();
        let spec = ArraySpec::Raid0 { disks: 2, chunk: 16 << 10 };
        let reads = || random_reads(12, 256 << 20, 20);
        let with = |openings| {
            let target = Target::Raidframe(Raidframe { openings, ..Raidframe::new(spec) });
            run(&p, &target, &no_configure, reads(), 5).elapsed
        };
        let one = with(1);
        let six = with(Raidframe::OPENINGS);
        assert!(one as f64 > 1.3 * six as f64, "one opening {one} ns, six {six} ns");
        assert_eq!(with(usize::MAX), run(&p, &Target::Array(spec), &no_configure, reads(), 5).elapsed);
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

    fn random_reads(procs: usize, span: u64, ops: u64) -> Vec<Box<dyn Stream>> {
        (0..procs)
            .map(|_| {
                Box::new(Rawio { op: DiskOp::Read, start: 0, span, sizes: Sizes::Fixed(4096), ops_left: ops })
                    as Box<dyn Stream>
            })
            .collect()
    }

    #[test]
    fn two_subdisks_on_one_drive_are_queued_on_that_one_disk() {
        // One striped plex of two subdisks: on two drives, and both on one drive.
        let p = profiles::uw_scsi_1998();
        let media = p.disk_capacity_bytes();
        let plex = |second: &str| {
            format!(
                "drive a device da0\ndrive b device da1\nvolume s\nplex org striped 64k\nsd length 64m drive a\nsd length 64m drive {second}\n"
            )
        };
        let volume = |second| Target::Volume(DriveVolume::create(&plex(second), "s", media).unwrap());
        let (apart, shared) = (volume("b"), volume("a"));
        let two = run(&p, &apart, &no_configure, random_reads(4, 128 << 20, 150), 11);
        let one = run(&p, &shared, &no_configure, random_reads(4, 128 << 20, 150), 11);
        assert!(two.disk_busy.iter().all(|&b| b > 0), "both drives work: {:?}", two.disk_busy);
        assert_eq!(one.disk_busy[1], 0, "drive b holds nothing: {:?}", one.disk_busy);
        assert_eq!(one.disk_requests, two.disk_requests, "the same member I/Os");
        // One head serves what two did.
        let ratio = one.elapsed as f64 / two.elapsed as f64;
        assert!(ratio > 1.5, "one drive took {ratio:.2}x the time of two");
    }

    #[test]
    fn vinum_issues_a_member_io_per_stripe_unit_where_the_engine_merges() {
        // Seed 004's transfer: 32.5 kB from the third data unit of a raid5 plex of five
        // subdisks with 4 KiB stripes; Vinum makes 2 + 4 + 3 transfers, the optimum 5.
        let p = profiles::uw_scsi_1998();
        let mut text = String::new();
        for d in 0..5 {
            text.push_str(&format!("drive d{d} device da{d}\n"));
        }
        text.push_str("volume r\nplex org raid5 4k\n");
        for d in 0..5 {
            text.push_str(&format!("sd length 1m drive d{d}\n"));
        }
        let volume = DriveVolume::create(&text, "r", p.disk_capacity_bytes()).unwrap();
        let transfer = || -> Vec<Box<dyn Stream>> {
            vec![Box::new(Rawio {
                op: DiskOp::Read,
                start: 8192,
                span: 33_280,
                sizes: Sizes::Fixed(33_280),
                ops_left: 1,
            })]
        };
        let ios = |structure| {
            let target = Target::Volume(volume.clone().with_structure(structure));
            run(&p, &target, &no_configure, transfer(), 12).disk_requests
        };
        assert_eq!(ios(RequestStructure::Vinum), 9);
        assert_eq!(ios(RequestStructure::Engine), 5);
    }
}
