//! The seed figures: each published number the simulator models, how its benchmark is
//! replayed, and the simulated value under each read policy.
//!
//! What it owns: the list of figures (stable ids, the seed file each comes from, the seed's
//! value), the benchmark set-ups (file sizes, process counts, offsets, as the seeds give them,
//! scaled where noted), and the sweeps the plots draw. Every simulated number is computed here
//! by running the workload through [`crate::runner`]; nothing is looked up.
//!
//! Conventions: bonnie's `K/sec` are KiB per second; `MB/s` are 10^6 bytes per second, as `dd`
//! prints them. A figure's `ratio_to_single_disk` is the simulated array's value over the
//! simulated single disk's under the same benchmark, given where the seed states a single-disk
//! figure to compare with (`seed_ratio_to_single_disk` is the seed's own).

use serde::Serialize;
use uraid_engine::{Array, ReadPolicy};

use crate::disk::DiskOp;
use crate::profiles::{self, Profile};
use crate::runner::{run, ArraySpec, Raidframe, RunResult, Target};
use crate::workload::{Rawio, Rewrite, Seeker, Sequential, SmallFiles, Stream};
use crate::{Nanos, SimRng};

mod vinum;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

pub const MOLNAR: &str = "000_d8827bf9b2d28a48.txt";
pub const BONNIE2008: &str = "001_16bcdf9fbfe374c3.txt";
pub const BAKER: &str = "002_702c458d4dea2a7a.txt";
pub const PARKES: &str = "003_43b5c8654f6efe43.txt";
pub const VINUM: &str = "004_693d145518e9b74e.txt";

/// How a run is sized.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    pub seed: u64,
    /// Fraction of each benchmark's data volume to simulate (1.0: as the seed, or as the notes
    /// below say). Rates barely depend on it; run time does.
    pub scale: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options { seed: 1, scale: 1.0 }
    }
}

impl Options {
    fn bytes(&self, full: u64) -> u64 {
        (((full as f64) * self.scale) as u64 / MIB).max(4) * MIB
    }
    fn count(&self, full: u64) -> u64 {
        (((full as f64) * self.scale) as u64).max(50)
    }
}

/// One modelled figure under one policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    pub id: String,
    pub seed_file: &'static str,
    pub metric: String,
    pub unit: &'static str,
    pub seed_value: Option<f64>,
    pub policy: &'static str,
    /// The read policy the seed's system ran: the md of its era (`md-1998` for Linux 2.2,
    /// `md-2006` for 2.6.15 to 2.6.3x, `md` for today's), whose figure reproduces the seed's md;
    /// `round-robin` for Vinum, which reads a mirror's plexes in turn.
    pub seed_md_policy: &'static str,
    pub profile: &'static str,
    pub sim_value: f64,
    /// `sim_value / seed_value`.
    pub sim_to_seed: Option<f64>,
    pub ratio_to_single_disk: Option<f64>,
    pub seed_ratio_to_single_disk: Option<f64>,
    /// Whether the read policy can matter (mirrored arrays).
    pub policy_sensitive: bool,
}

/// A point of a sweep, for the plots.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

/// One line of a plot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub label: String,
    pub points: Vec<Point>,
    /// Published points (drawn as markers, not a line).
    pub published: bool,
}

/// One chart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    pub file: String,
    pub title: String,
    pub x_label: &'static str,
    pub y_label: &'static str,
    pub log_x: bool,
    pub series: Vec<Series>,
}

/// Page-cache read-ahead the host applies to an array: md raises the device's read-ahead to
/// two full stripes for striped levels (raid0/raid5/raid10 `run`), leaves raid1 and linear.
fn readahead(profile: &Profile, target: &Target) -> u64 {
    let base = profile.host.readahead_bytes;
    match target {
        Target::Array(ArraySpec::Raid0 { disks, chunk }) => base.max(2 * *disks as u64 * chunk),
        Target::Array(ArraySpec::Raid5 { disks, chunk }) => base.max(2 * (*disks as u64 - 1) * chunk),
        Target::Array(ArraySpec::Raid10 { disks, chunk, .. }) => base.max(2 * (*disks as u64 / 2).max(1) * chunk),
        _ => base,
    }
}

fn configure(policy: ReadPolicy) -> impl Fn(&mut Array) {
    move |a: &mut Array| a.set_read_policy(policy)
}

fn go(profile: &Profile, target: &Target, policy: ReadPolicy, streams: Vec<Box<dyn Stream>>, seed: u64) -> RunResult {
    run(profile, target, &configure(policy), streams, seed)
}

/// Bonnie's four block-level results on one target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bonnie {
    pub write_kib_s: f64,
    pub rewrite_kib_s: f64,
    pub read_kib_s: f64,
    pub seeks_per_s: f64,
}

/// Bonnie's block-level columns: id part, metric, unit, in [`Bonnie::column`] order.
const BONNIE_COLUMNS: [(&str, &str, &str); 4] = [
    ("block-write", "block write", "KiB/s"),
    ("rewrite", "rewrite", "KiB/s"),
    ("block-read", "block read", "KiB/s"),
    ("seeks", "random seeks", "seeks/s"),
];

impl Bonnie {
    /// The `i`th of `BONNIE_COLUMNS`.
    pub fn column(&self, i: usize) -> f64 {
        [self.write_kib_s, self.rewrite_kib_s, self.read_kib_s, self.seeks_per_s][i]
    }
}

/// The bonnie benchmark: `seq_bytes` written, rewritten and read sequentially, then
/// `seeks` random 8 KiB reads by 3 seekers over a file of `file_bytes` (bonnie's
/// `SeekProcCount` 3, `Chunk` 8192, `UpdateSeek` 10: one seek in ten rewrites its chunk).
pub fn bonnie(
    profile: &Profile,
    target: &Target,
    policy: ReadPolicy,
    seq_bytes: u64,
    file_bytes: u64,
    seeks: u64,
    seed: u64,
) -> Bonnie {
    let h = profile.host;
    let ra = readahead(profile, target);
    let kib = |r: RunResult| r.throughput() / KIB as f64;
    let write = go(
        profile,
        target,
        policy,
        vec![Box::new(Sequential::new(DiskOp::Write, 0, seq_bytes, h.writeback_bytes, h.writeback_depth))],
        seed,
    );
    let batch = h.writeback_bytes * h.writeback_depth as u64;
    // Rewrite moves every byte twice; bonnie counts it once.
    let rewrite = go(
        profile,
        target,
        policy,
        vec![Box::new(Rewrite::new(0, seq_bytes, ra, h.writeback_bytes, batch, h.writeback_depth))],
        seed,
    );
    let rewrite_kib = seq_bytes as f64 / rewrite.seconds() / KIB as f64;
    let read = go(profile, target, policy, vec![Box::new(Sequential::new(DiskOp::Read, 0, seq_bytes, ra, 2))], seed);
    let seeks_per_s = bonnie_seeks(profile, target, policy, 3, file_bytes, seeks, seed);
    Bonnie { write_kib_s: kib(write), rewrite_kib_s: rewrite_kib, read_kib_s: kib(read), seeks_per_s }
}

/// Bonnie's seek phase alone with `procs` seekers (bonnie has 3): seeks per second.
pub fn bonnie_seeks(
    profile: &Profile,
    target: &Target,
    policy: ReadPolicy,
    procs: u64,
    file_bytes: u64,
    seeks: u64,
    seed: u64,
) -> f64 {
    seeks_rewriting(profile, target, policy, procs, file_bytes, seeks, 10, seed)
}

/// Bonnie's seek phase with `procs` seekers rewriting one chunk in `update_every` (bonnie: 10;
/// 0 for none): seeks per second.
#[allow(clippy::too_many_arguments)]
pub fn seeks_rewriting(
    profile: &Profile,
    target: &Target,
    policy: ReadPolicy,
    procs: u64,
    file_bytes: u64,
    seeks: u64,
    update_every: u64,
    seed: u64,
) -> f64 {
    let per = seeks / procs;
    let seekers: Vec<Box<dyn Stream>> = (0..procs)
        .map(|_| Box::new(Seeker::new(0, file_bytes, 8 * KIB, per, update_every)) as Box<dyn Stream>)
        .collect();
    go(profile, target, policy, seekers, seed).ops_per_s()
}

/// What a run of parallel `dd` readers gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DdRun {
    /// Total bytes over the time the slowest reader took (how the seed sums them), in MB/s.
    pub mb_s: f64,
    /// The slowest reader's time over the fastest's, each from its own start.
    pub spread: f64,
}

/// Parallel `dd`s through the page cache, reader `i` from byte `i * stride` and started at
/// `starts[i]`, `bytes` each.
pub fn dd_readers(
    profile: &Profile,
    target: &Target,
    policy: ReadPolicy,
    stride: u64,
    bytes: u64,
    starts: &[Nanos],
    seed: u64,
) -> DdRun {
    let ra = readahead(profile, target);
    let streams: Vec<Box<dyn Stream>> = starts
        .iter()
        .enumerate()
        .map(|(i, &at)| {
            Box::new(Sequential::new(DiskOp::Read, i as u64 * stride, bytes, ra, 2).starting_at(at)) as Box<dyn Stream>
        })
        .collect();
    let r = go(profile, target, policy, streams, seed);
    let took: Vec<f64> = r.streams.iter().zip(starts).map(|(s, &at)| (s.finished_at - at) as f64 / 1e9).collect();
    let slowest = took.iter().copied().fold(0.0, f64::max);
    let fastest = took.iter().copied().fold(f64::INFINITY, f64::min);
    DdRun { mb_s: r.bytes() as f64 / slowest / 1e6, spread: slowest / fastest }
}

/// `procs` rawio processes, each doing what `each` describes: MB/s.
pub fn rawio(profile: &Profile, target: &Target, policy: ReadPolicy, procs: u64, each: &Rawio, seed: u64) -> f64 {
    let streams: Vec<Box<dyn Stream>> = (0..procs).map(|_| Box::new(each.clone()) as Box<dyn Stream>).collect();
    go(profile, target, policy, streams, seed).throughput() / 1e6
}

struct Out {
    figures: Vec<Figure>,
    /// The md read policy the current seed ran (see [`Figure::seed_md_policy`]).
    era: ReadPolicy,
}

impl Out {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        id: &str,
        seed_file: &'static str,
        metric: &str,
        unit: &'static str,
        seed_value: Option<f64>,
        policy: ReadPolicy,
        profile: &Profile,
        sim_value: f64,
        single: Option<(f64, Option<f64>)>,
        policy_sensitive: bool,
    ) {
        self.figures.push(Figure {
            id: id.to_string(),
            seed_file,
            metric: metric.to_string(),
            unit,
            seed_value,
            policy: policy.name(),
            seed_md_policy: self.era.name(),
            profile: profile.name,
            sim_value,
            sim_to_seed: seed_value.map(|s| sim_value / s),
            ratio_to_single_disk: single.map(|(s, _)| sim_value / s),
            seed_ratio_to_single_disk: single.and_then(|(_, r)| r),
            policy_sensitive,
        });
    }
}

/// Molnar 1998: bonnie, 500 MB file, on one disk and on a 4-way RAID1 of four such disks on one
/// UW bus (the seed's "single-disk RAID1" is taken as the bare disk).
fn molnar(opts: &Options, out: &mut Out) {
    let p = profiles::uw_scsi_1998();
    let file = 500 * 1_000_000;
    let seq = opts.bytes(file);
    let seeks = opts.count(4000);
    let single = bonnie(&p, &Target::Disk, ReadPolicy::Md, seq, file, seeks, opts.seed);
    let seed_single = [8019.0, 3525.0, 7707.0, 94.9];
    let seed_raid1 = [7705.0, 3931.0, 11848.0, 175.6];
    let raid1 = Target::Array(ArraySpec::Raid1 { disks: 4 });
    for policy in ReadPolicy::ALL {
        let r = bonnie(&p, &raid1, policy, seq, file, seeks, opts.seed);
        for (i, (key, metric, unit)) in BONNIE_COLUMNS.iter().enumerate() {
            let metric = format!("bonnie {metric}");
            let s = single.column(i);
            out.push(
                &format!("molnar1998-single-{key}"),
                MOLNAR,
                &metric,
                unit,
                Some(seed_single[i]),
                policy,
                &p,
                s,
                None,
                false,
            );
            let seed_ratio = Some(seed_raid1[i] / seed_single[i]);
            let id = format!("molnar1998-raid1-4way-{key}");
            out.push(
                &id,
                MOLNAR,
                &metric,
                unit,
                Some(seed_raid1[i]),
                policy,
                &p,
                r.column(i),
                Some((s, seed_ratio)),
                true,
            );
        }
    }
    // Not in the seed: bonnie's seek test with 8 seekers instead of 3, so that four mirrors can
    // all be busy (three seekers cannot make a 4-way mirror more than 3x a single disk). Even
    // then the rewrites bound it: a seek costs a single disk 1.1 operations (one read, one
    // rewrite in ten) and a 4-way mirror 1.4 (the rewrite goes to every mirror), spread over
    // four disks: at best 4 x 1.1 / 1.4 = 3.14x.
    let many = 8;
    let single_many = bonnie_seeks(&p, &Target::Disk, ReadPolicy::Md, many, file, seeks, opts.seed);
    for policy in ReadPolicy::ALL {
        let v = bonnie_seeks(&p, &raid1, policy, many, file, seeks, opts.seed);
        let metric = format!("bonnie random seeks with {many} seekers (not a seed figure)");
        out.push(
            "molnar1998-raid1-4way-seeks-8seekers",
            MOLNAR,
            &metric,
            "seeks/s",
            None,
            policy,
            &p,
            v,
            Some((single_many, None)),
            true,
        );
    }
    // Not in the seed either: the seek test without its rewrites (read-only random 8 KiB reads),
    // 3 and 8 seekers: what the mirrors give random reads when no write brings every head to
    // the same place and costs every disk an operation.
    for procs in [3, many] {
        let single_ro = seeks_rewriting(&p, &Target::Disk, ReadPolicy::Md, procs, file, seeks, 0, opts.seed);
        for policy in ReadPolicy::ALL {
            let v = seeks_rewriting(&p, &raid1, policy, procs, file, seeks, 0, opts.seed);
            let metric = format!("random 8 KiB reads, {procs} processes, no rewrites (not a seed figure)");
            let id = format!("molnar1998-raid1-4way-readonly-seeks-{procs}procs");
            out.push(&id, MOLNAR, &metric, "seeks/s", None, policy, &p, v, Some((single_ro, None)), true);
        }
    }
}

/// The 2008 bonnie++ table: 6 GB file on one disk ("base hd", a bare disk), linear, striped
/// (raid0, md's 64 KiB default chunk) and mirrored arrays of two disks. Sequential phases move
/// 1 GiB (at scale 1; the 6 GB of the seed lie in the same outer zone, so the rates are the
/// same); the seeks range over the full 6 GB file.
fn bonnie2008(opts: &Options, out: &mut Out) {
    let p = profiles::sata_2008();
    let file = 6 * 1024 * MIB;
    let seq = opts.bytes(1024 * MIB);
    let seeks = opts.count(8000);
    let configs: [(&str, Target, [f64; 4]); 4] = [
        ("base", Target::Disk, [64334.0, 34373.0, 79255.0, 235.4]),
        ("linear", Target::Array(ArraySpec::Linear { disks: 2 }), [63289.0, 33291.0, 78033.0, 236.4]),
        (
            "striped",
            Target::Array(ArraySpec::Raid0 { disks: 2, chunk: 64 * KIB }),
            [109092.0, 48674.0, 116921.0, 339.5],
        ),
        ("mirrored", Target::Array(ArraySpec::Raid1 { disks: 2 }), [50917.0, 29154.0, 76402.0, 331.5]),
    ];
    let base = bonnie(&p, &Target::Disk, ReadPolicy::Md, seq, file, seeks, opts.seed);
    let mut fixed = Vec::new();
    for (name, target, _) in &configs[1..3] {
        fixed.push((*name, bonnie(&p, target, ReadPolicy::Md, seq, file, seeks, opts.seed)));
    }
    for policy in ReadPolicy::ALL {
        let mirrored = bonnie(&p, &configs[3].1, policy, seq, file, seeks, opts.seed);
        for (name, _, seed_vals) in &configs {
            let (b, sensitive) = match *name {
                "base" => (base, false),
                "mirrored" => (mirrored, true),
                other => (fixed.iter().find(|(n, _)| *n == other).expect("computed").1, false),
            };
            for (i, (key, metric, unit)) in BONNIE_COLUMNS.iter().enumerate() {
                let single = (*name != "base").then(|| (base.column(i), Some(seed_vals[i] / configs[0].2[i])));
                let metric = format!("bonnie++ {metric}");
                let id = format!("bonnie2008-{name}-{key}");
                out.push(
                    &id,
                    BONNIE2008,
                    &metric,
                    unit,
                    Some(seed_vals[i]),
                    policy,
                    &p,
                    b.column(i),
                    single,
                    sensitive,
                );
            }
        }
    }
}

/// Baker 2006: 1, 2, 4 and 8 parallel `dd bs=8k` readers, `skip` 400000 blocks apart, on the
/// raw disk and on a 2-disk RAID1, two Cheetah 15K.3 on one Ultra160 channel. Per reader the
/// seed read 3.28 GB (1 and 2 readers, and 4 on md0), 819 MB (4 on the disk), 410 MB (8); at
/// scale 1 the simulator reads a quarter of each (819, 205 and 102 MB: every reader still
/// runs for seconds of virtual time at a steady rate, from the same starting offsets).
pub const BAKER_READERS: [u64; 4] = [1, 2, 4, 8];

/// The seed's own time of each reader on md0, in seconds (it gives none for one reader).
const BAKER_MD_SECONDS: [&[f64]; 4] = [
    &[],
    &[48.243362, 48.375897],
    &[174.276585, 181.581893, 183.724243, 184.209018],
    &[35.289648, 42.653475, 43.524714, 45.151705, 47.741845, 48.600533, 48.758726, 49.679275],
];

/// Draws of the readers' start times tried (see [`baker_starts`]).
const BAKER_START_TRIALS: u64 = 8;

fn baker_bytes(readers: u64, on_array: bool) -> u64 {
    let block = 8192 / 4;
    block
        * match (readers, on_array) {
            (1 | 2, _) | (4, true) => 400_000,
            (4, false) => 100_000,
            _ => 50_000,
        }
}

/// When each of Baker's readers starts. The shell starts them one after another (`dd ... &
/// dd ... &`), each a few milliseconds after the one before (fork, exec and open: 1 to 10 ms
/// on a 2006 machine, assumed). Under md-2006 those milliseconds decide which disk each
/// reader settles on: a reader that starts while a disk is idle takes it, and from then on
/// the nearest head keeps every reader where it is. Four readers end up split 2 + 2 (they all
/// finish together, about 70 MB/s in all) or 1 + 3 (one reader has a disk to itself and
/// finishes in about 0.4 of the others' time, about 115 MB/s). The seed's own per-reader times
/// say which happened: the slowest took 1.06x the fastest with four readers, 1.41x with
/// eight. So `BAKER_START_TRIALS` draws of the gaps are tried, and the one whose md-2006
/// readers' spread comes nearest the seed's is kept; every policy, and the bare disk, then
/// runs with those starts. (md-2006 is the seed's policy; the other policies are judged on
/// the same starts.)
pub fn baker_starts(opts: &Options, readers_index: usize) -> Vec<Nanos> {
    let n = BAKER_READERS[readers_index];
    let seed_times = BAKER_MD_SECONDS[readers_index];
    if seed_times.is_empty() {
        return vec![0; n as usize];
    }
    let p = profiles::cheetah_15k3_u160();
    let raid1 = Target::Array(ArraySpec::Raid1 { disks: 2 });
    let bytes = opts.bytes(baker_bytes(n, true));
    let seed_spread =
        seed_times.iter().copied().fold(0.0, f64::max) / seed_times.iter().copied().fold(f64::INFINITY, f64::min);
    let mut rng = SimRng::new(opts.seed ^ (n << 32));
    let mut best: Option<(f64, Vec<Nanos>)> = None;
    for _ in 0..BAKER_START_TRIALS {
        let mut at = 0;
        let starts: Vec<Nanos> = (0..n)
            .map(|i| {
                if i > 0 {
                    at += crate::us(rng.between(1000, 10_000) as f64);
                }
                at
            })
            .collect();
        let run = dd_readers(&p, &raid1, ReadPolicy::Md2006, BAKER_STRIDE, bytes, &starts, opts.seed);
        let miss = (run.spread / seed_spread).ln().abs();
        if best.as_ref().is_none_or(|(m, _)| miss < *m) {
            best = Some((miss, starts));
        }
    }
    best.expect("at least one trial").1
}

/// Bytes between Baker's readers' starting offsets (`skip` 400000 blocks of 8 KiB).
const BAKER_STRIDE: u64 = 400_000 * 8192;

/// Baker's readers on the bare disk and on the mirror under each policy: MB/s per reader count,
/// in [`BAKER_READERS`] order.
struct BakerSweep {
    disk: Vec<f64>,
    raid1: Vec<(ReadPolicy, Vec<f64>)>,
}

fn baker_sweep(opts: &Options) -> BakerSweep {
    let p = profiles::cheetah_15k3_u160();
    let starts: Vec<Vec<Nanos>> = (0..BAKER_READERS.len()).map(|k| baker_starts(opts, k)).collect();
    let disk = BAKER_READERS
        .iter()
        .zip(&starts)
        .map(|(&n, at)| {
            dd_readers(
                &p,
                &Target::Disk,
                ReadPolicy::Md,
                BAKER_STRIDE,
                opts.bytes(baker_bytes(n, false)),
                at,
                opts.seed,
            )
            .mb_s
        })
        .collect();
    let raid1 = Target::Array(ArraySpec::Raid1 { disks: 2 });
    let raid1 = ReadPolicy::ALL
        .iter()
        .map(|&policy| {
            let v = BAKER_READERS
                .iter()
                .zip(&starts)
                .map(|(&n, at)| {
                    dd_readers(&p, &raid1, policy, BAKER_STRIDE, opts.bytes(baker_bytes(n, true)), at, opts.seed).mb_s
                })
                .collect();
            (policy, v)
        })
        .collect();
    BakerSweep { disk, raid1 }
}

/// Baker's figures: total bytes over the slowest reader's time, as the seed sums them.
fn baker(sweep: &BakerSweep, out: &mut Out) {
    let p = profiles::cheetah_15k3_u160();
    let seed_md = [None, Some(6553.6 / 48.375897), Some(13107.2 / 184.209018), Some(3276.8 / 49.679275)];
    let seed_disk = [None, Some(6553.6 / 192.096232), Some(3276.8 / 90.238705), Some(3276.8 / 100.144752)];
    for (policy, raid1) in &sweep.raid1 {
        for (k, &n) in BAKER_READERS.iter().enumerate() {
            let metric = format!("{n} parallel dd readers, total");
            let disk = sweep.disk[k];
            out.push(
                &format!("baker2006-disk-{n}readers"),
                BAKER,
                &metric,
                "MB/s",
                seed_disk[k],
                *policy,
                &p,
                disk,
                None,
                false,
            );
            // The seed states the single-thread speedup only in words: "0%".
            let seed_ratio = match (seed_md[k], seed_disk[k]) {
                (Some(a), Some(b)) => Some(a / b),
                _ => Some(1.0),
            };
            out.push(
                &format!("baker2006-raid1-{n}readers"),
                BAKER,
                &metric,
                "MB/s",
                seed_md[k],
                *policy,
                &p,
                raid1[k],
                Some((disk, seed_ratio)),
                true,
            );
        }
    }
}

/// One configuration of Parkes' test: name, target, and for runs without and with soft
/// dependencies the seed's real time and its user + system seconds.
pub struct ParkesConfig {
    pub name: &'static str,
    pub target: Target,
    pub seed_s: f64,
    pub cpu_s: f64,
    pub softdep_seed_s: f64,
    pub softdep_cpu_s: f64,
}

/// Parkes 2000 (seed `003_43b5c8654f6efe43.txt`): a tar extraction of 700–800 MB into a fresh
/// FFS, without and with soft dependencies, on one ST41200N, a RAIDframe RAID 0 of two and a
/// RAID 5 of three, all on one Adaptec 1542C, under RAIDframe's driver ([`Raidframe`]: six
/// openings, its own choice of parity write). RAIDframe's RAID 0 and RAID 5 map addresses as
/// md's raid0 and left-symmetric raid5 do (see `docs/performance-model.md`); the stripe unit,
/// which the seed does not give, is 32 sectors, raidctl's example `32 1 1 5`.
///
/// The archive ([`SmallFiles`]): 8 000 files averaging 88 KiB (about 720 MB), 25 to a
/// directory. The file count is the seed's: BSD charges a process one block output for each
/// buffer it dirties (`bdwrite`) or writes undelayed (`bwrite`), so the 15 574 block outputs
/// that soft dependencies saved on the single disk are the two synchronous writes of each
/// create they turned into delayed ones, and 114 686 outputs less three metadata writes per
/// file leave about 88 000 8 KiB data buffers. Data is written behind in 64 KiB clusters
/// once 1 MiB is dirty (assumed). The 486DX100's CPU cannot be simulated: the seed's own user +
/// system seconds of each run are spent as the process's CPU, spread over its files. At a
/// smaller `scale` fewer files are simulated and the time is extrapolated.
pub fn parkes_configs() -> [ParkesConfig; 3] {
    let c = |name, target, seed_s, cpu_s, softdep_seed_s, softdep_cpu_s| ParkesConfig {
        name,
        target,
        seed_s,
        cpu_s,
        softdep_seed_s,
        softdep_cpu_s,
    };
    [
        // user + system: 6.28 + 622.07; with soft dependencies 5.27 + 678.51
        c("single", Target::Disk, 1824.84, 628.35, 1488.70, 683.78),
        // 5.84 + 734.46; 6.94 + 801.14
        c(
            "raid0",
            Target::Raidframe(Raidframe::new(ArraySpec::Raid0 { disks: 2, chunk: 16 * KIB })),
            1541.38,
            740.30,
            1073.19,
            808.08,
        ),
        // 6.8 + 860.77; 8.1 + 801.14
        c(
            "raid5",
            Target::Raidframe(Raidframe::new(ArraySpec::Raid5 { disks: 3, chunk: 16 * KIB })),
            3618.41,
            867.57,
            2657.96,
            809.24,
        ),
    ]
}

/// Files of Parkes' archive (see [`parkes_configs`]).
const PARKES_FILES: u64 = 8_000;

/// Their mean size.
const PARKES_MEAN_FILE: u64 = 88 * KIB;

/// One run of Parkes' extraction on `target` with `cpu_s` seconds of CPU, with or without soft
/// dependencies: the extrapolated elapsed seconds, and the run.
pub fn parkes_tar(opts: &Options, profile: &Profile, target: &Target, cpu_s: f64, soft: bool) -> (f64, RunResult) {
    let full = PARKES_FILES;
    let files = opts.count(full);
    let cpu_per_file = (cpu_s / full as f64 * 1e9) as u64;
    let stream = SmallFiles::new(files, PARKES_MEAN_FILE, 64 * KIB, 25, MIB, 8 * MIB, 1000 * MIB, cpu_per_file);
    let stream = if soft { stream.with_soft_updates() } else { stream };
    let r = go(profile, target, ReadPolicy::Md, vec![Box::new(stream)], opts.seed);
    (r.seconds() * full as f64 / files as f64, r)
}

fn parkes(opts: &Options, out: &mut Out) {
    let p = profiles::st41200n_1542c();
    let configs = parkes_configs();
    for soft in [false, true] {
        let results: Vec<(&str, f64, f64)> = configs
            .iter()
            .map(|c| {
                let (seed_s, cpu_s) = if soft { (c.softdep_seed_s, c.softdep_cpu_s) } else { (c.seed_s, c.cpu_s) };
                (c.name, parkes_tar(opts, &p, &c.target, cpu_s, soft).0, seed_s)
            })
            .collect();
        let (single, seed_single) = (results[0].1, results[0].2);
        let (part, metric) = if soft {
            ("-softdep", "tar extraction real time, soft dependencies (the seed's CPU seconds included)")
        } else {
            ("", "tar extraction real time, no soft dependencies (the seed's CPU seconds included)")
        };
        for policy in ReadPolicy::ALL {
            for (name, sim, seed_s) in &results {
                let s = (*name != "single").then_some((single, Some(seed_s / seed_single)));
                out.push(
                    &format!("parkes2000-{name}{part}-tar-seconds"),
                    PARKES,
                    metric,
                    "s",
                    Some(*seed_s),
                    policy,
                    &p,
                    *sim,
                    s,
                    false,
                );
            }
        }
    }
}

/// Every modelled figure, each under every policy, and with `charts` the sweeps the plots draw.
/// Baker's runs (eight start trials per reader count, then every policy) serve both, once.
/// Lehey's sweeps on the seed's drives likewise serve his figures and charts.
pub fn reproduce(opts: &Options, charts: bool) -> (Vec<Figure>, Vec<Chart>) {
    let baker_runs = baker_sweep(opts);
    let mut out = Out { figures: Vec::new(), era: ReadPolicy::Md };
    // Molnar ran Linux 2.1/2.2's raid1; Baker 2.6.15 or so; the 2008 table a 2.6.2x kernel,
    // whose raid1 read_balance was still 2.6.15's. Parkes measured RAIDframe without mirrors.
    out.era = ReadPolicy::Md1998;
    molnar(opts, &mut out);
    out.era = ReadPolicy::Md2006;
    bonnie2008(opts, &mut out);
    baker(&baker_runs, &mut out);
    out.era = ReadPolicy::Md;
    parkes(opts, &mut out);
    // Vinum reads a mirror's plexes in turn (`gv_volume_start`): the engine's round-robin.
    out.era = ReadPolicy::RoundRobin;
    let lehey_charts = vinum::lehey(opts, charts, &mut out);
    // One block per policy, figures in a fixed order within it.
    let order: Vec<&str> = ReadPolicy::ALL.iter().map(|p| p.name()).collect();
    out.figures.sort_by_key(|f| order.iter().position(|p| *p == f.policy));
    let charts = if charts {
        let mut all = vec![chart_mirrors(opts), chart_readers(&baker_runs)];
        all.extend(lehey_charts);
        all
    } else {
        Vec::new()
    };
    (out.figures, charts)
}

fn series(label: impl Into<String>, points: Vec<(f64, f64)>, published: bool) -> Series {
    Series { label: label.into(), points: points.into_iter().map(|(x, y)| Point { x, y }).collect(), published }
}

/// Molnar's law in the simulator: bonnie seeks on 1 to 4 mirrors of the 1998 disk, each policy.
fn chart_mirrors(opts: &Options) -> Chart {
    let p = profiles::uw_scsi_1998();
    let file = 500 * 1_000_000;
    let seeks = opts.count(4000);
    let single = bonnie_seeks(&p, &Target::Disk, ReadPolicy::Md, 3, file, seeks, opts.seed);
    let mut out = Vec::new();
    for policy in ReadPolicy::ALL {
        let mut pts = vec![(1.0, single)];
        for n in 2..=4 {
            pts.push((
                n as f64,
                bonnie_seeks(&p, &Target::Array(ArraySpec::Raid1 { disks: n }), policy, 3, file, seeks, opts.seed),
            ));
        }
        out.push(series(format!("raid1, {}", policy.name()), pts, false));
    }
    out.push(series("seed (Molnar 1998)", vec![(1.0, 94.9), (4.0, 175.6)], true));
    Chart {
        file: "mirrors-vs-seeks.svg".into(),
        title: "bonnie random seeks vs mirrors (1998 UW SCSI disks, one bus)".into(),
        x_label: "mirrors (1 = single disk)",
        y_label: "seeks/s",
        log_x: false,
        series: out,
    }
}

/// Baker's test swept: 1, 2, 4, 8 readers on the bare Cheetah and on the 2-disk mirror.
fn chart_readers(sweep: &BakerSweep) -> Chart {
    let points = |v: &[f64]| BAKER_READERS.iter().zip(v).map(|(&n, &y)| (n as f64, y)).collect();
    let mut out = vec![series("single disk", points(&sweep.disk), false)];
    for (policy, v) in &sweep.raid1 {
        out.push(series(format!("raid1 x2, {}", policy.name()), points(v), false));
    }
    out.push(series(
        "seed: raid1 (Baker 2006)",
        vec![(2.0, 6553.6 / 48.375897), (4.0, 13107.2 / 184.209018), (8.0, 3276.8 / 49.679275)],
        true,
    ));
    out.push(series(
        "seed: single disk",
        vec![(2.0, 6553.6 / 192.096232), (4.0, 3276.8 / 90.238705), (8.0, 3276.8 / 100.144752)],
        true,
    ));
    Chart {
        file: "readers-vs-mbps.svg".into(),
        title: "parallel dd readers, Cheetah 15K.3 x2 on Ultra160".into(),
        x_label: "parallel readers",
        y_label: "MB/s (total)",
        log_x: true,
        series: out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parkes_arrays_map_addresses_as_raidframe_does() {
        // RAIDframe (rf_raid0.c, rf_raid5.c): stripe unit SUID = sector / SU; RAID 0 column
        // SUID mod N at (SUID / N)·SU; RAID 5 data column SUID mod N, parity column
        // (N − 1) − (stripe mod N), at stripe·SU, stripe = SUID / (N − 1).
        let su = 32u64;
        for c in parkes_configs() {
            let Target::Raidframe(Raidframe { spec, .. }) = c.target else { continue };
            let geometry = spec.geometry(64 << 20).expect("a geometry");
            let n = spec.disks() as u64;
            for sector in (0..4000u64).step_by(7) {
                let (suid, o) = (sector / su, sector % su);
                match &geometry {
                    uraid_engine::Geometry::Raid0(l) => {
                        let e = l.map(sector);
                        assert_eq!((e.member as u64, e.sector), (suid % n, suid / n * su + o), "{sector}");
                    }
                    uraid_engine::Geometry::Parity(l) => {
                        let stripe = suid / (n - 1);
                        let m = l.map(sector);
                        assert_eq!((m.member as u64, m.sector), (suid % n, stripe * su + o), "{sector}");
                        assert_eq!(l.stripe(stripe).p as u64, (n - 1) - stripe % n, "parity of stripe {stripe}");
                    }
                    other => panic!("{} is not RAIDframe's RAID 0 or 5: {other:?}", c.name),
                }
            }
        }
    }

    #[test]
    fn baker_readers_start_a_shell_fork_apart_and_the_kept_start_fits_the_seed_best() {
        let opts = Options { seed: 3, scale: 0.05 };
        assert_eq!(baker_starts(&opts, 0), vec![0], "one reader starts at once");
        let k = 2;
        let starts = baker_starts(&opts, k);
        assert_eq!(starts.len(), 4);
        assert_eq!(starts[0], 0);
        for w in starts.windows(2) {
            let gap = w[1] - w[0];
            assert!((crate::ms(1.0)..=crate::ms(10.0)).contains(&gap), "gap {gap} ns");
        }
        // The kept start comes nearer the seed's spread than starting every reader at once.
        let p = profiles::cheetah_15k3_u160();
        let raid1 = Target::Array(ArraySpec::Raid1 { disks: 2 });
        let bytes = opts.bytes(baker_bytes(4, true));
        let seed = BAKER_MD_SECONDS[k];
        let seed_spread = seed.iter().copied().fold(0.0, f64::max) / seed.iter().copied().fold(f64::INFINITY, f64::min);
        let miss = |at: &[Nanos]| {
            (dd_readers(&p, &raid1, ReadPolicy::Md2006, BAKER_STRIDE, bytes, at, opts.seed).spread / seed_spread)
                .ln()
                .abs()
        };
        assert!(miss(&starts) <= miss(&[0; 4]), "kept {starts:?}");
        assert_eq!(baker_starts(&opts, k), starts, "deterministic");
    }
}
