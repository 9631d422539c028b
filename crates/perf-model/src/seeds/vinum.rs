//! Seed 004, Lehey's Vinum paper: its rawio measurements replayed on gvinum volumes laid out
//! as the kernel lays them out ([`crate::volume`]), through the engine, on the seed's old
//! drives; and the same sweeps on a present-day hard disk and SSD, for the charts.
//!
//! The seed's graphs are not in its text, only what the text says of them, so most figures
//! here have no seed value; the ones that do are the numbers and ratios the text states:
//! "95% of all transfers involve only a single data subdisk" at 256 kB stripes; the mirrors'
//! read and write changes; RAID-5 writes at "approximately half of the RAID-1 throughput ...
//! and one-quarter of the write throughput of a striped plex", reads "similar to that of
//! striped volume"; sequential RAID-5 peaking at "about 20 kB for writes and 35 kB for reads";
//! the single disk "saturated even with one process" and the striped volume improving "with up
//! to 128 processes"; and the 32.5 kB transfer's 9 I/Os against the optimum's 5.
//!
//! The set-up, from the seed where it says, assumed where it does not:
//!
//! - rawio: 8 concurrent processes ("This measurement used eight concurrent processes"), each
//!   with one transfer outstanding, random transfers of 512 bytes to 32 kB aligned to 512
//!   bytes (the concurrency graph's "roughly UFS usage", assumed for the other graphs too),
//!   300 transfers per process at scale 1 (assumed; enough for the rates to settle);
//! - volumes as the seed's configurations give them: four drives of one `sd length 102480k`
//!   subdisk each (striped, raid5), the 8-drive mirror and the 4-shared-drive mirror exactly
//!   as the seed lists them (`plex org striped 512k`, second plex on `c d a b`); rawio over the
//!   whole volume, and the single disk's rawio over the bytes one subdisk covers on its drive;
//! - Vinum's own read policy for mirrors is round-robin between plexes (`gv_volume_start`),
//!   the engine's `round-robin`; the other policies are uraid's;
//! - Vinum's request structure ([`RequestStructure::Vinum`]) on striped and raid5 volumes,
//!   beside uraid's ([`RequestStructure::Engine`]) where the two differ.
//!
//! Every figure id begins `lehey-vinum-`.

use uraid_engine::ReadPolicy;
use uraid_vinum_format::drive_layout::DATA_START;

use super::{go, series, Chart, Figure, Options, Out, VINUM};
use crate::disk::DiskOp;
use crate::profiles::{self, DiskModel, Profile};
use crate::runner::Target;
use crate::volume::{DriveVolume, RequestStructure};
use crate::workload::{Rawio, SequentialRawio, Sizes, Stream};
use crate::SimRng;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// "The actual transfers varied between 512 bytes and 32 kB, which roughly corresponds to UFS
/// usage."
const UFS_SIZES: Sizes = Sizes::Uniform { min: 512, max: 32 * KIB };

/// "This measurement used eight concurrent processes."
const PROCESSES: u64 = 8;

/// Transfers per rawio process at scale 1 (assumed).
const OPS_PER_PROCESS: u64 = 300;

/// Transfers of the concurrency and transfer-size sweeps at scale 1, shared among the
/// processes (assumed).
const OPS_PER_POINT: u64 = 2400;

/// The seed's subdisks: `sd length 102480k`.
const SEED_SUBDISK: u64 = 102_480 * KIB;

/// Stripe sizes swept for striped and raid5 plexes, in KiB (the seed names none; 1 KiB is two
/// sectors, and the points between 16 and 64 KiB resolve the RAID-5 peaks the seed puts at 20
/// and 35 kB).
const STRIPES_KIB: [u64; 13] = [1, 2, 4, 8, 16, 24, 32, 48, 64, 128, 256, 512, 1024];

/// Stripe sizes swept for the mirrors: from 16 KiB, where Vinum's request structure and
/// uraid's issue the same member I/Os for these transfers (see [`crate::volume`]).
const MIRROR_STRIPES_KIB: [u64; 7] = [16, 32, 64, 128, 256, 512, 1024];

/// The mirrors' stripe: the seed's configurations' `plex org striped 512k`.
const MIRROR_STRIPE_KIB: u64 = 512;

/// Vinum's recommended stripe ("a stripe size of 256 kB appears to be optimum").
const RECOMMENDED_KIB: u64 = 256;

/// The smallest stripe swept, where the seed sees striping fall below a single disk.
const SMALLEST_KIB: u64 = 1;

/// A small stripe for the RAID-5 request-structure comparison.
const SMALL_RAID5_KIB: u64 = 4;

/// Transfer sizes swept (bytes): 512 bytes to FreeBSD's 128 kB maximum transfer.
const TRANSFERS: [u64; 9] = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072];

/// Processes swept: "between one and 128 concurrent processes".
const PROCESS_COUNTS: [u64; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// A sweep "saturates" at the fewest processes giving this share of its best throughput.
const SATURATION_SHARE: f64 = 0.9;

/// The seed's drive names.
const DRIVE_NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

/// The drives a sweep runs on and how long each subdisk is.
#[derive(Debug, Clone)]
struct Hardware {
    profile: Profile,
    subdisk: u64,
    /// How chart titles name it.
    label: String,
}

impl Hardware {
    /// The seed's drives and subdisks.
    fn seed() -> Hardware {
        let profile = profiles::vinum_prescsi();
        Hardware { label: profile.name.to_string(), profile, subdisk: SEED_SUBDISK }
    }

    /// A present-day drive: each subdisk half its data area, in whole MiB, as two of the
    /// seed's subdisks fill one of its drives. A hard disk's write cache is turned off: a
    /// rawio run short enough to simulate (tens of MB) fits in its 32 MiB and would measure the
    /// cache, not the drive.
    fn modern(mut profile: Profile) -> Hardware {
        let mut label = profile.name.to_string();
        if let DiskModel::Hdd(p) = &mut profile.disk {
            p.write_cache_bytes = 0;
            label.push_str(", write cache off");
        }
        let subdisk = (profile.disk_capacity_bytes() - DATA_START) / 2 / MIB * MIB;
        Hardware { profile, subdisk, label }
    }

    fn volume(&self, layout: Layout, stripe: u64, structure: RequestStructure) -> Target {
        let (text, name) = layout.description(stripe, self.subdisk);
        let volume = DriveVolume::create(&text, name, self.profile.disk_capacity_bytes())
            .unwrap_or_else(|e| panic!("{layout:?} on {}: {e}", self.profile.name));
        Target::Volume(volume.with_structure(structure))
    }
}

/// The volumes the seed measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// One striped plex over four drives.
    Striped,
    /// One raid5 plex over four drives.
    Raid5,
    /// The seed's "one disk per subdisk": two striped plexes over eight drives.
    MirrorApart,
    /// The seed's "both plexes on the same disks": the second plex on `c d a b`.
    MirrorShared,
}

impl Layout {
    /// A `gvinum create` description of the layout and the volume's name.
    fn description(self, stripe: u64, subdisk: u64) -> (String, &'static str) {
        let drives =
            |n: usize| -> String { (0..n).map(|i| format!("drive {} device da{i}\n", DRIVE_NAMES[i])).collect() };
        let plex = |org: &str, on: &[&str]| -> String {
            let mut s = format!("plex org {org} {stripe}\n");
            for d in on {
                s.push_str(&format!("sd length {subdisk} drive {d}\n"));
            }
            s
        };
        let first = &DRIVE_NAMES[..4];
        match self {
            Layout::Striped => (format!("{}volume striped\n{}", drives(4), plex("striped", first)), "striped"),
            Layout::Raid5 => (format!("{}volume raid5\n{}", drives(4), plex("raid5", first)), "raid5"),
            Layout::MirrorApart => (
                format!("{}volume raid10\n{}{}", drives(8), plex("striped", first), plex("striped", &DRIVE_NAMES[4..])),
                "raid10",
            ),
            Layout::MirrorShared => (
                format!(
                    "{}volume raid10\n{}{}",
                    drives(4),
                    plex("striped", first),
                    plex("striped", &["c", "d", "a", "b"])
                ),
                "raid10",
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Random,
    /// rawio's sequential test, every process from the start of the volume ("8 concurrent
    /// processes writing the same data at the same time").
    Sequential,
}

/// One rawio run: `procs` processes of `ops` transfers each, over the volume, or over one
/// subdisk's bytes of a bare drive: MB/s.
#[allow(clippy::too_many_arguments)]
fn rawio_mb_s(
    hw: &Hardware,
    target: &Target,
    policy: ReadPolicy,
    procs: u64,
    access: Access,
    op: DiskOp,
    sizes: Sizes,
    ops: u64,
    seed: u64,
) -> f64 {
    let (start, span) = match target {
        Target::Volume(v) => (0, v.bytes()),
        _ => (DATA_START, hw.subdisk),
    };
    let streams: Vec<Box<dyn Stream>> = (0..procs)
        .map(|_| match access {
            Access::Random => Box::new(Rawio { op, start, span, sizes, ops_left: ops }) as Box<dyn Stream>,
            Access::Sequential => Box::new(SequentialRawio::new(op, start, span, sizes, ops)),
        })
        .collect();
    go(&hw.profile, target, policy, streams, seed).throughput() / 1e6
}

const OPS: [DiskOp; 2] = [DiskOp::Read, DiskOp::Write];
const STRUCTURES: [RequestStructure; 2] = [RequestStructure::Vinum, RequestStructure::Engine];
const ACCESSES: [Access; 2] = [Access::Random, Access::Sequential];

/// One mirror layout at one stripe: reads under each policy, and writes (no choice of copy).
#[derive(Debug, Clone)]
struct MirrorPoint {
    reads: Vec<(ReadPolicy, f64)>,
    write: f64,
}

impl MirrorPoint {
    fn read(&self, policy: ReadPolicy) -> f64 {
        self.reads.iter().find(|(p, _)| *p == policy).expect("every policy").1
    }
}

/// Every sweep on one hardware, MB/s.
#[derive(Debug, Clone)]
struct Sweep {
    hw: Hardware,
    /// The bare drive, 8 processes, random: read, write.
    single: [f64; 2],
    /// Per [`STRIPES_KIB`], per [`STRUCTURES`], per [`OPS`]: the striped volume, 8 random processes.
    striped: Vec<[[f64; 2]; 2]>,
    /// Per [`STRIPES_KIB`], per [`STRUCTURES`], per [`ACCESSES`], per [`OPS`]: the raid5 volume.
    raid5: Vec<[[[f64; 2]; 2]; 2]>,
    /// Per [`MIRROR_STRIPES_KIB`]: the 8-drive and the 4-shared-drive mirror.
    mirrors: Vec<[MirrorPoint; 2]>,
    /// Per [`TRANSFERS`], random reads: bare drive 1 and 8 processes, striped (256 KiB) 1 and
    /// 8 processes.
    transfers: Vec<[f64; 4]>,
    /// Per [`PROCESS_COUNTS`], random reads: bare drive, striped (256 KiB).
    processes: Vec<[f64; 2]>,
}

impl Sweep {
    fn run(hw: Hardware, opts: &Options) -> Sweep {
        let seed = opts.seed;
        let ops = opts.count(OPS_PER_PROCESS);
        let random = |target: &Target, policy, op| {
            rawio_mb_s(&hw, target, policy, PROCESSES, Access::Random, op, UFS_SIZES, ops, seed)
        };
        let single = OPS.map(|op| random(&Target::Disk, ReadPolicy::Md, op));
        let striped = STRIPES_KIB
            .iter()
            .map(|&k| {
                STRUCTURES.map(|s| OPS.map(|op| random(&hw.volume(Layout::Striped, k * KIB, s), ReadPolicy::Md, op)))
            })
            .collect();
        let raid5 = STRIPES_KIB
            .iter()
            .map(|&k| {
                STRUCTURES.map(|s| {
                    let target = hw.volume(Layout::Raid5, k * KIB, s);
                    ACCESSES.map(|a| {
                        OPS.map(|op| rawio_mb_s(&hw, &target, ReadPolicy::Md, PROCESSES, a, op, UFS_SIZES, ops, seed))
                    })
                })
            })
            .collect();
        let mirrors = MIRROR_STRIPES_KIB
            .iter()
            .map(|&k| {
                [Layout::MirrorApart, Layout::MirrorShared].map(|layout| {
                    let target = hw.volume(layout, k * KIB, RequestStructure::Engine);
                    MirrorPoint {
                        reads: ReadPolicy::ALL.iter().map(|&p| (p, random(&target, p, DiskOp::Read))).collect(),
                        write: random(&target, ReadPolicy::Md, DiskOp::Write),
                    }
                })
            })
            .collect();
        let recommended = hw.volume(Layout::Striped, RECOMMENDED_KIB * KIB, RequestStructure::Vinum);
        let reads = |target: &Target, procs: u64, sizes: Sizes| {
            let each = (opts.count(OPS_PER_POINT) / procs).max(20);
            rawio_mb_s(&hw, target, ReadPolicy::Md, procs, Access::Random, DiskOp::Read, sizes, each, seed)
        };
        let transfers = TRANSFERS
            .iter()
            .map(|&len| {
                let sizes = Sizes::Fixed(len);
                [
                    reads(&Target::Disk, 1, sizes),
                    reads(&Target::Disk, PROCESSES, sizes),
                    reads(&recommended, 1, sizes),
                    reads(&recommended, PROCESSES, sizes),
                ]
            })
            .collect();
        let processes = PROCESS_COUNTS
            .iter()
            .map(|&n| [reads(&Target::Disk, n, UFS_SIZES), reads(&recommended, n, UFS_SIZES)])
            .collect();
        Sweep { hw, single, striped, raid5, mirrors, transfers, processes }
    }

    fn stripe_index(k: u64) -> usize {
        STRIPES_KIB.iter().position(|&s| s == k).expect("a swept stripe")
    }

    fn mirror_index(k: u64) -> usize {
        MIRROR_STRIPES_KIB.iter().position(|&s| s == k).expect("a swept mirror stripe")
    }

    /// The striped volume at `k` KiB under `structure`: read, write.
    fn striped_at(&self, k: u64, structure: RequestStructure) -> [f64; 2] {
        self.striped[Self::stripe_index(k)][structure_index(structure)]
    }

    fn raid5_at(&self, k: u64, structure: RequestStructure, access: Access) -> [f64; 2] {
        let a = ACCESSES.iter().position(|&x| x == access).expect("an access");
        self.raid5[Self::stripe_index(k)][structure_index(structure)][a]
    }

    /// The stripe (KiB) at which sequential raid5 `op` under Vinum's structure is fastest.
    fn raid5_sequential_peak(&self, op: usize) -> u64 {
        let mut best = (0, f64::MIN);
        for &k in &STRIPES_KIB {
            let v = self.raid5_at(k, RequestStructure::Vinum, Access::Sequential)[op];
            if v > best.1 {
                best = (k, v);
            }
        }
        best.0
    }

    /// The fewest processes at which a concurrency sweep (`which`: 0 bare drive, 1 striped)
    /// gives [`SATURATION_SHARE`] of its best.
    fn saturation(&self, which: usize) -> u64 {
        let best = self.processes.iter().map(|p| p[which]).fold(f64::MIN, f64::max);
        let i = self.processes.iter().position(|p| p[which] >= SATURATION_SHARE * best).expect("the best is in");
        PROCESS_COUNTS[i]
    }
}

fn structure_index(s: RequestStructure) -> usize {
    STRUCTURES.iter().position(|&x| x == s).expect("a structure")
}

/// The share of rawio's transfers (`sizes`, random, aligned to 512 bytes) that touch one data
/// subdisk of a four-subdisk striped plex of `stripe` bytes, over `samples` draws.
fn one_subdisk_share(hw: &Hardware, stripe: u64, sizes: Sizes, samples: u64, seed: u64) -> f64 {
    let Target::Volume(volume) = hw.volume(Layout::Striped, stripe, RequestStructure::Vinum) else {
        unreachable!("a volume")
    };
    let mut draw = Rawio { op: DiskOp::Read, start: 0, span: volume.bytes(), sizes, ops_left: samples };
    let mut rng = SimRng::new(seed);
    let mut one = 0;
    while let Some(t) = draw.next(&mut rng, 0) {
        if volume.data_subdisks_touched(t.offset, t.len) == 1 {
            one += 1;
        }
    }
    one as f64 / samples as f64
}

/// The member I/Os of seed 004's 32.5 kB read (from the third data unit of a raid5 plex of five
/// subdisks with 4 KiB stripes) under `structure`.
fn transfer_member_ios(hw: &Hardware, structure: RequestStructure, seed: u64) -> u64 {
    let mut text: String = (0..5).map(|i| format!("drive {} device da{i}\n", DRIVE_NAMES[i])).collect();
    text.push_str("volume raid5\nplex org raid5 4k\n");
    for d in &DRIVE_NAMES[..5] {
        text.push_str(&format!("sd length {} drive {d}\n", hw.subdisk));
    }
    let volume = DriveVolume::create(&text, "raid5", hw.profile.disk_capacity_bytes()).expect("the seed's plex");
    let len = 33_280;
    let transfer = Rawio { op: DiskOp::Read, start: 8 * KIB, span: len, sizes: Sizes::Fixed(len), ops_left: 1 };
    let target = Target::Volume(volume.with_structure(structure));
    go(&hw.profile, &target, ReadPolicy::Md, vec![Box::new(transfer)], seed).disk_requests
}

/// One figure, apart from the policy it is listed under.
struct Line {
    /// The id after `lehey-vinum-`.
    id: String,
    metric: String,
    unit: &'static str,
    seed: Option<f64>,
    sim: f64,
    /// The simulated value over the bare drive's under the same benchmark.
    single: Option<f64>,
}

fn line(id: impl Into<String>, metric: impl Into<String>, unit: &'static str, seed: Option<f64>, sim: f64) -> Line {
    Line { id: id.into(), metric: metric.into(), unit, seed, sim, single: None }
}

impl Line {
    /// With its ratio to the bare drive's `single` under the same benchmark.
    fn over_single(self, single: f64) -> Line {
        Line { single: Some(self.sim / single), ..self }
    }

    /// With `ratio` as its ratio to the bare drive (for figures that are ratios themselves).
    fn with_single(self, ratio: f64) -> Line {
        Line { single: Some(ratio), ..self }
    }
}

fn push(out: &mut Out, profile: &Profile, policy: ReadPolicy, line: &Line, policy_sensitive: bool) {
    out.figures.push(Figure {
        id: format!("lehey-vinum-{}", line.id),
        seed_file: VINUM,
        metric: line.metric.clone(),
        unit: line.unit,
        seed_value: line.seed,
        policy: policy.name(),
        seed_md_policy: out.era.name(),
        profile: profile.name,
        sim_value: line.sim,
        sim_to_seed: line.seed.map(|s| line.sim / s),
        ratio_to_single_disk: line.single,
        seed_ratio_to_single_disk: None,
        policy_sensitive,
    });
}

const OP_NAMES: [&str; 2] = ["read", "write"];

/// Seed 004's figures, each under every policy, from the seed hardware's sweep.
fn figures(sweep: &Sweep, opts: &Options, out: &mut Out) {
    let hw = &sweep.hw;
    let (vinum, uraid) = (RequestStructure::Vinum, RequestStructure::Engine);
    let rawio8 = "8 rawio processes, random 512 B-32 KiB";
    let mut fixed: Vec<Line> = Vec::new();

    // The stripe-size sweep: the bare drive, and the striped volume at the smallest stripe and
    // at Vinum's recommended one, under Vinum's request structure; at the smallest, uraid's too.
    for (op, name) in OP_NAMES.iter().enumerate() {
        fixed.push(line(
            format!("single-disk-random-{name}"),
            format!("{rawio8} {name}s, one bare drive (over one subdisk's bytes)"),
            "MB/s",
            None,
            sweep.single[op],
        ));
    }
    for k in [SMALLEST_KIB, RECOMMENDED_KIB] {
        for (op, name) in OP_NAMES.iter().enumerate() {
            fixed.push(
                line(
                    format!("striped-{k}k-random-{name}"),
                    format!("{rawio8} {name}s, striped plex of 4 drives, {k} KiB stripes, Vinum's request structure"),
                    "MB/s",
                    None,
                    sweep.striped_at(k, vinum)[op],
                )
                .over_single(sweep.single[op]),
            );
        }
    }
    let k = SMALLEST_KIB;
    for (op, name) in OP_NAMES.iter().enumerate() {
        let (v, u) = (sweep.striped_at(k, vinum)[op], sweep.striped_at(k, uraid)[op]);
        fixed.push(
            line(
                format!("striped-{k}k-random-{name}-uraid"),
                format!("{rawio8} {name}s, striped plex of 4 drives, {k} KiB stripes, uraid's request structure"),
                "MB/s",
                None,
                u,
            )
            .over_single(sweep.single[op]),
        );
        fixed.push(line(
            format!("striped-{k}k-random-{name}-uraid-over-vinum"),
            format!("{rawio8} {name}s, striped plex, {k} KiB stripes: uraid's request structure over Vinum's"),
            "x",
            None,
            u / v,
        ));
    }

    // The mirrors, as the seed configures them (512k stripes), over the striped volume at the
    // same stripe. The seed's ratios: 8 drives, reads "close to 100%" better and writes
    // "little difference" (predicted, "no tests have been made"); 4 shared drives, reads
    // "little difference" and writes down "approximately 50%" (measured).
    let reference = sweep.striped_at(MIRROR_STRIPE_KIB, vinum);
    let mirrors = &sweep.mirrors[Sweep::mirror_index(MIRROR_STRIPE_KIB)];
    let layouts = [
        ("8drives", "two striped plexes on 8 drives", [2.0, 1.0]),
        ("4shared", "two striped plexes on the same 4 drives, the second on c d a b", [1.0, 0.5]),
    ];
    let mirror_line = |m: usize, op: usize, v: f64| {
        let (name, what, seeds) = layouts[m];
        line(
            format!("mirror-{name}-{}-over-striped", OP_NAMES[op]),
            format!("{rawio8} {}s, {what}, 512 KiB stripes, over the 4-drive striped plex", OP_NAMES[op]),
            "x",
            Some(seeds[op]),
            v / reference[op],
        )
        .with_single(v / sweep.single[op])
    };
    for (m, mirror) in mirrors.iter().enumerate() {
        fixed.push(mirror_line(m, 1, mirror.write));
    }

    // The transfer-size sweep: random reads, 8 processes, the striped volume at 256k.
    for len in [KIB, 16 * KIB, 128 * KIB] {
        let i = TRANSFERS.iter().position(|&t| t == len).expect("a swept size");
        let [_, disk8, _, striped8] = sweep.transfers[i];
        fixed.push(
            line(
                format!("transfer-{}k-random-read", len / KIB),
                format!(
                    "8 rawio processes, random reads of {} KiB, striped plex of 4 drives, 256 KiB stripes",
                    len / KIB
                ),
                "MB/s",
                None,
                striped8,
            )
            .over_single(disk8),
        );
    }

    // Concurrency: 1 and 128 processes, bare drive and striped volume; where each saturates.
    let ufs_reads = "rawio, random reads of 512 B-32 KiB";
    for (i, n) in [(0, 1), (PROCESS_COUNTS.len() - 1, 128)] {
        let [disk, striped] = sweep.processes[i];
        fixed.push(line(
            format!("processes-{n}-single-disk"),
            format!("{ufs_reads}, {n} processes, one bare drive"),
            "MB/s",
            None,
            disk,
        ));
        fixed.push(
            line(
                format!("processes-{n}-striped"),
                format!("{ufs_reads}, {n} processes, striped plex of 4 drives, 256 KiB stripes"),
                "MB/s",
                None,
                striped,
            )
            .over_single(disk),
        );
    }
    for (which, name, what, seed) in
        [(0, "single-disk", "one bare drive", 1.0), (1, "striped", "the striped plex", 128.0)]
    {
        fixed.push(line(
            format!("saturation-processes-{name}"),
            format!("{ufs_reads}: fewest of 1-128 processes giving 90% of the best throughput, {what}"),
            "processes",
            Some(seed),
            sweep.saturation(which) as f64,
        ));
    }

    // RAID-5 against stripe size.
    let k = RECOMMENDED_KIB;
    let r5 = sweep.raid5_at(k, vinum, Access::Random);
    let st = sweep.striped_at(k, vinum);
    for (op, name) in OP_NAMES.iter().enumerate() {
        fixed.push(
            line(
                format!("raid5-{k}k-random-{name}"),
                format!("{rawio8} {name}s, raid5 plex of 4 drives, {k} KiB stripes, Vinum's request structure"),
                "MB/s",
                None,
                r5[op],
            )
            .over_single(sweep.single[op]),
        );
    }
    fixed.push(line(
        format!("raid5-{k}k-read-over-striped"),
        format!("{rawio8} reads, raid5 plex over the striped plex, 4 drives, {k} KiB stripes"),
        "x",
        Some(1.0),
        r5[0] / st[0],
    ));
    for (op, name, seed) in [(0, "read", 35.0), (1, "write", 20.0)] {
        fixed.push(line(
            format!("raid5-sequential-{name}-peak-stripe"),
            format!("8 rawio processes, sequential {name}s of 512 B-32 KiB from the same place: the stripe size of the fastest, raid5 plex of 4 drives"),
            "KiB",
            Some(seed),
            sweep.raid5_sequential_peak(op) as f64,
        ));
    }
    let k = SMALL_RAID5_KIB;
    for (op, name) in OP_NAMES.iter().enumerate() {
        let (v, u) = (sweep.raid5_at(k, vinum, Access::Random)[op], sweep.raid5_at(k, uraid, Access::Random)[op]);
        fixed.push(line(
            format!("raid5-{k}k-random-{name}-uraid-over-vinum"),
            format!(
                "{rawio8} {name}s, raid5 plex of 4 drives, {k} KiB stripes: uraid's request structure over Vinum's"
            ),
            "x",
            None,
            u / v,
        ));
    }
    for (structure, seed) in [(vinum, 9.0), (uraid, 5.0)] {
        let who = structure.name().to_lowercase();
        fixed.push(line(
            format!("raid5-32k5-transfer-member-ios-{who}"),
            format!("member I/Os of the seed's 32.5 kB read over three stripes of a 5-subdisk raid5 plex, {} request structure", structure.name()),
            "I/Os",
            Some(seed),
            transfer_member_ios(hw, structure, opts.seed) as f64,
        ));
    }

    // "95% of all transfers involve only a single data subdisk" at 256 kB.
    fixed.push(line(
        "one-subdisk-share-256k",
        "share of random 512 B-32 KiB transfers touching one subdisk, 256 KiB stripes",
        "fraction",
        Some(0.95),
        one_subdisk_share(hw, RECOMMENDED_KIB * KIB, UFS_SIZES, opts.count(100_000), opts.seed),
    ));

    // "The RAID-5 write throughput is approximately half of the RAID-1 throughput in the graph
    // showing mirroring, and one-quarter of the write throughput of a striped plex."
    let raid1 = sweep.mirrors[Sweep::mirror_index(RECOMMENDED_KIB)][1].write;
    let k = RECOMMENDED_KIB;
    fixed.push(line(
        "raid5-write-over-raid1",
        format!("{rawio8} writes, {k} KiB stripes: raid5 plex of 4 drives over the mirror on the same 4 drives"),
        "x",
        Some(0.5),
        r5[1] / raid1,
    ));
    fixed.push(line(
        "raid5-write-over-striped",
        format!("{rawio8} writes, {k} KiB stripes: raid5 plex over striped plex, 4 drives"),
        "x",
        Some(0.25),
        r5[1] / st[1],
    ));

    for policy in ReadPolicy::ALL {
        for l in &fixed {
            push(out, &hw.profile, policy, l, false);
        }
        for (m, mirror) in mirrors.iter().enumerate() {
            push(out, &hw.profile, policy, &mirror_line(m, 0, mirror.read(policy)), true);
        }
    }
}

/// Seed 004's figures into `out` (on the seed's drives) and, with `charts`, its charts on the
/// seed's drives, a present-day hard disk and a present-day SSD. The seed drives' sweep serves
/// both.
pub(super) fn lehey(opts: &Options, charts: bool, out: &mut Out) -> Vec<Chart> {
    let seed_drives = Sweep::run(Hardware::seed(), opts);
    figures(&seed_drives, opts, out);
    if !charts {
        return Vec::new();
    }
    let mut all = vec![chart_one_subdisk(&seed_drives.hw, opts)];
    all.extend(sweep_charts(&seed_drives));
    for profile in [profiles::generic_hdd_7200(), profiles::nvme()] {
        all.extend(sweep_charts(&Sweep::run(Hardware::modern(profile), opts)));
    }
    all
}

fn points(xs: &[u64], ys: impl IntoIterator<Item = f64>) -> Vec<(f64, f64)> {
    xs.iter().map(|&x| x as f64).zip(ys).collect()
}

fn chart(kind: &str, hw: &Hardware, title: &str, x_label: &'static str, series: Vec<super::Series>) -> Chart {
    Chart {
        file: format!("lehey-vinum-{kind}-{}.svg", hw.profile.name),
        title: format!("{title} ({})", hw.label),
        x_label,
        y_label: "MB/s",
        log_x: true,
        series,
    }
}

/// The five sweeps of one hardware as charts.
fn sweep_charts(sweep: &Sweep) -> Vec<Chart> {
    let hw = &sweep.hw;
    let mut stripes = Vec::new();
    for (op, name) in OP_NAMES.iter().enumerate() {
        let flat = STRIPES_KIB.iter().map(|_| sweep.single[op]);
        stripes.push(series(format!("one drive, {name}"), points(&STRIPES_KIB, flat), false));
    }
    for structure in STRUCTURES {
        for (op, name) in OP_NAMES.iter().enumerate() {
            let ys = STRIPES_KIB.iter().map(|&k| sweep.striped_at(k, structure)[op]);
            stripes.push(series(format!("striped x4, {name}, {}", structure.name()), points(&STRIPES_KIB, ys), false));
        }
    }

    let mut mirrors = Vec::new();
    for (op, name) in OP_NAMES.iter().enumerate() {
        let ys = MIRROR_STRIPES_KIB.iter().map(|&k| sweep.striped_at(k, RequestStructure::Vinum)[op]);
        mirrors.push(series(format!("striped x4, {name}"), points(&MIRROR_STRIPES_KIB, ys), false));
    }
    for (m, name) in ["8 drives", "4 shared"].iter().enumerate() {
        for policy in [ReadPolicy::RoundRobin, ReadPolicy::Split] {
            let ys = sweep.mirrors.iter().map(|p| p[m].read(policy));
            // Vinum's own policy is round-robin.
            let who = if policy == ReadPolicy::RoundRobin { "Vinum" } else { policy.name() };
            mirrors.push(series(format!("{name}, read, {who}"), points(&MIRROR_STRIPES_KIB, ys), false));
        }
        let ys = sweep.mirrors.iter().map(|p| p[m].write);
        mirrors.push(series(format!("{name}, write"), points(&MIRROR_STRIPES_KIB, ys), false));
    }

    let labels = ["one drive, 1 process", "one drive, 8 processes", "striped x4, 1 process", "striped x4, 8 processes"];
    let transfers = labels
        .iter()
        .enumerate()
        .map(|(i, label)| series(*label, points(&TRANSFERS, sweep.transfers.iter().map(|t| t[i])), false))
        .collect();

    let processes = ["one drive", "striped x4, 256 KiB"]
        .iter()
        .enumerate()
        .map(|(i, label)| series(*label, points(&PROCESS_COUNTS, sweep.processes.iter().map(|p| p[i])), false))
        .collect();

    let mut raid5 = Vec::new();
    for structure in STRUCTURES {
        for access in ACCESSES {
            for (op, name) in OP_NAMES.iter().enumerate() {
                let ys = STRIPES_KIB.iter().map(|&k| sweep.raid5_at(k, structure, access)[op]);
                let how = if access == Access::Random { "random" } else { "sequential" };
                raid5.push(series(format!("{how} {name}, {}", structure.name()), points(&STRIPES_KIB, ys), false));
            }
        }
    }

    vec![
        chart("stripe-size", hw, "stripe size, 8 random rawio processes", "stripe size, KiB", stripes),
        chart("mirrors", hw, "mirrors: 8 drives vs 4 shared, 8 processes", "stripe size, KiB", mirrors),
        chart("transfer-size", hw, "random reads vs transfer size", "transfer size, bytes", transfers),
        chart("processes", hw, "concurrent random reads, 512 B-32 KiB", "processes", processes),
        chart("raid5", hw, "raid5 plex of 4 vs stripe size, 8 processes", "stripe size, KiB", raid5),
    ]
}

/// The share of transfers touching one subdisk against the stripe size (geometry only: the
/// same on every drive), with the seed's 95 % at 256 kB.
fn chart_one_subdisk(hw: &Hardware, opts: &Options) -> Chart {
    let samples = opts.count(20_000);
    let line = |sizes| STRIPES_KIB.iter().map(move |&k| one_subdisk_share(hw, k * KIB, sizes, samples, opts.seed));
    Chart {
        file: "lehey-vinum-one-subdisk.svg".into(),
        title: "share of transfers touching one subdisk, striped plex of 4".into(),
        x_label: "stripe size, KiB",
        y_label: "share of transfers",
        log_x: true,
        series: vec![
            series("random 512 B-32 KiB", points(&STRIPES_KIB, line(UFS_SIZES)), false),
            series("random 10 KiB", points(&STRIPES_KIB, line(Sizes::Fixed(10 * KIB))), false),
            series("seed: 95% at 256 kB", vec![(RECOMMENDED_KIB as f64, 0.95)], true),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(layout: Layout) -> DriveVolume {
        let Target::Volume(v) = Hardware::seed().volume(layout, MIRROR_STRIPE_KIB * KIB, RequestStructure::Engine)
        else {
            unreachable!("a volume")
        };
        v
    }

    /// The drives holding the copies of volume byte `offset`.
    fn copy_drives(v: &DriveVolume, offset: u64) -> Vec<usize> {
        let run = &v.geometry().runs(offset, 512)[0];
        run.copies.iter().map(|&(slot, at)| v.place(slot, at).0).collect()
    }

    #[test]
    fn the_seeds_mirrors_fit_its_drives_and_share_them_as_it_lists_them() {
        let shared = volume(Layout::MirrorShared);
        assert_eq!((shared.drives(), shared.slots().len()), (4, 8));
        for disk in 0..4 {
            let mut on: Vec<u64> = shared.slots().iter().filter(|s| s.disk == disk).map(|s| s.drive_offset).collect();
            on.sort_unstable();
            // The kernel cuts each subdisk to whole stripes and frees the rest at once.
            let used = SEED_SUBDISK / (MIRROR_STRIPE_KIB * KIB) * MIRROR_STRIPE_KIB * KIB;
            assert_eq!(on, vec![DATA_START, DATA_START + used], "drive {disk} holds one subdisk of each plex");
        }
        let apart = volume(Layout::MirrorApart);
        assert_eq!((apart.drives(), apart.slots().len()), (8, 8));
        let mut rng = SimRng::new(3);
        for _ in 0..200 {
            let at = rng.below(shared.bytes() / 512) * 512;
            let drives = copy_drives(&shared, at);
            assert_eq!(drives.len(), 2);
            assert_ne!(drives[0], drives[1], "the copies of byte {at} share a drive");
            // The second plex is the first turned by two drives: `c d a b`.
            assert_eq!(drives[1], (drives[0] + 2) % 4, "byte {at}");
            let mut drives = copy_drives(&apart, at);
            drives.sort_unstable();
            assert!(drives[0] < 4 && drives[1] >= 4, "byte {at}: {drives:?}");
        }
    }

    #[test]
    fn fewer_transfers_stay_on_one_subdisk_as_stripes_shrink() {
        let hw = Hardware::seed();
        let share = |k: u64| one_subdisk_share(&hw, k * KIB, UFS_SIZES, 5000, 9);
        let shares: Vec<f64> = [4, 16, 64, 256, 1024].map(share).to_vec();
        assert!(shares.windows(2).all(|w| w[0] < w[1]), "{shares:?}");
        assert!(shares.iter().all(|&s| s > 0.0 && s < 1.0), "{shares:?}");
    }

    #[test]
    fn a_sweep_saturates_where_it_first_comes_within_a_tenth_of_its_best() {
        let hw = Hardware::seed();
        let flat = PROCESS_COUNTS.iter().map(|_| [1.0, 1.0]).collect();
        let rising = PROCESS_COUNTS.iter().map(|&n| [1.0, n as f64]).collect();
        let sweep = |processes| Sweep {
            hw: hw.clone(),
            single: [1.0; 2],
            striped: Vec::new(),
            raid5: Vec::new(),
            mirrors: Vec::new(),
            transfers: Vec::new(),
            processes,
        };
        assert_eq!(sweep(flat).saturation(0), 1);
        assert_eq!(sweep(rising).saturation(1), 128);
    }
}
