//! The simulation campaigns: what CI runs, the long campaign, replay, and the opt-in scenarios.
//!
//! - `ci_<level>`: `URAID_SIM_CI_SEEDS` seeds (default 2000) per level, spread over the level's
//!   geometries (`ci_vinum`: over the gvinum volumes; `ci_raidframe`: over the RAIDframe sets);
//!   the first failure panics with a message ending in its replay command.
//! - `replay`: `URAID_SIM_SEED=.. URAID_SIM_GEOMETRY=.. cargo test -p uraid-fault-sim --test campaign
//!   replay -- --nocapture` runs one seed with a step-by-step trace (does nothing without them).
//! - `long_campaign` (ignored): `URAID_SIM_SEEDS=1000000 cargo test -p uraid-fault-sim --release --test
//!   campaign -- --ignored long_campaign`; `URAID_SIM_FIRST_SEED`, `URAID_SIM_GEOMETRY` (one
//!   geometry) or `URAID_SIM_LEVEL`, `URAID_SIM_THREADS`, `URAID_SIM_EXPOSE_KNOWN_BUGS=1`.
//! - `ci_write_hole`: the RAID-4/5/6 write-hole scenario with md's partial parity log, 600 seeds;
//!   `write_hole` (ignored) runs it as a long campaign.
//! - `known_bugs` (ignored): the standard campaign with the known-bug guards off; fails while the
//!   bugs in `uraid_fault_sim::KNOWN_BUGS` are there (none today).

use uraid_fault_sim::campaign::{env_u64, replay_config_from_env, run_plan, Plan};
use uraid_fault_sim::{geometries, run_one, Scenario};

fn ci_level(level: &str) {
    let seeds = env_u64("URAID_SIM_CI_SEEDS").unwrap_or(2000);
    let plan = Plan::new(&geometries::of_level(level), 0, seeds);
    let (summary, failures) = run_plan(&plan);
    if let Some(f) = failures.first() {
        panic!("{f}");
    }
    println!("{level}: {}", summary.line());
}

/// gvinum volumes (`uraid_fault_sim::vinum_geometries`): concat, striped and raid5 plexes,
/// one to four plexes per volume, drives shared between plexes.
#[test]
fn ci_vinum() {
    ci_level("vinum");
}

/// NetBSD RAIDframe sets (`uraid_fault_sim::raidframe_geometries`): RAID 1, 4 and 5, labels
/// and parity maps written as NetBSD writes them, crashes inside those writes.
#[test]
fn ci_raidframe() {
    ci_level("raidframe");
}

#[test]
fn ci_linear() {
    ci_level("linear");
}

#[test]
fn ci_raid0() {
    ci_level("raid0");
}

#[test]
fn ci_raid1() {
    ci_level("raid1");
}

#[test]
fn ci_raid10() {
    ci_level("raid10");
}

#[test]
fn ci_raid4() {
    ci_level("raid4");
}

#[test]
fn ci_raid5() {
    ci_level("raid5");
}

#[test]
fn ci_raid6() {
    ci_level("raid6");
}

/// Replay one seed with a trace: see the module documentation.
#[test]
fn replay() {
    let Some(cfg) = replay_config_from_env() else {
        println!("replay: set URAID_SIM_SEED and URAID_SIM_GEOMETRY to replay a run");
        return;
    };
    match run_one(&cfg) {
        Ok(r) => eprintln!("\npassed: {r:#?}"),
        Err(f) => panic!("{f}"),
    }
}

/// Seeds that found engine bugs since fixed, run as they were found. A later change to the
/// engine may take a seed down another path, so each is only a check that the run passes, not a
/// proof that its bug's path is still taken.
/// - raid6-5-rs 1013616 (default configuration): a raid6 member back in sync logged a stripe
///   while another member's header still on disk (its replacement going out, not yet durable)
///   held an older entry for that stripe; the crash replayed that entry's stale partial parity
///   over the new write.
/// - raid1-3 3002713 (default configuration): G3, a read cut into pieces that ended inside
///   sectors answered one sector half from each of two disagreeing copies.
/// - raid6-5-rs6 5056093 (`URAID_SIM_PPL=1`): a raid6 log write lost with its dead member came
///   back after a spare had taken the slot, and the stripes queued for that slot's log were
///   never sent (the engine stalled).
/// - [`P1_SEEDS`] (`URAID_SIM_PPL=1`): P1, found with the guards off.
/// - raid5-4-ra 1623 (default configuration) and raid6-5-pf 5171957 (`URAID_SIM_PPL=1`): P3, a
///   stripe whose write failed on a member finished on the others and its log entry retired
///   before the failure was on the superblocks; a crash then brought the member back in sync
///   with the old bytes of its chunk and nothing in the log to set parity right. Both failed
///   without the fix (a member failure holding the log until it is recorded), once P3's guard
///   was off.
/// - [`P3_P4_SEEDS`] (`URAID_SIM_PPL=1`): found by a campaign with the log on and the guards off
///   once the log was held: stripes with nothing to log written during the hold (P3), and a
///   spare given the slot of a member whose failure was not yet recorded (P4).
/// - raid6-5-ls 5003009 (`URAID_SIM_PPL=1`): P5, found once parity passes kept several steps in
///   flight: a stripe whose log write completed after another member failed was written without
///   that member before the failure was recorded, its only log on a member being rebuilt.
/// - [`METADATA_SEEDS`] (default configuration): found once the simulation ran md's metadata.
/// - [`RAIDFRAME_SPARE_SEEDS`] (default configuration): a RAIDframe column being reconstructed
///   died, and its failed label flush was taken as a column already out: the metadata step was
///   tried again against it for ever (the engine stalled); and (53, 106) the fix's first form,
///   which blamed the spare for the failed flush of the dead component it had just replaced.
#[test]
fn seeds_of_fixed_bugs_pass() {
    let mut runs =
        vec![uraid_fault_sim::Config::new(1_013_616, "raid6-5-rs"), uraid_fault_sim::Config::new(3_002_713, "raid1-3")];
    runs.extend(METADATA_SEEDS.iter().map(|&(geometry, seed, _)| uraid_fault_sim::Config::new(seed, geometry)));
    let mut stalled = uraid_fault_sim::Config::new(5_056_093, "raid6-5-rs6");
    stalled.ppl = Some(true);
    runs.push(stalled);
    runs.push(uraid_fault_sim::Config::new(1623, "raid5-4-ra"));
    let mut p3 = uraid_fault_sim::Config::new(5_171_957, "raid6-5-pf");
    p3.ppl = Some(true);
    runs.push(p3);
    runs.extend(RAIDFRAME_SPARE_SEEDS.iter().map(|&(geometry, seed)| uraid_fault_sim::Config::new(seed, geometry)));
    let mut p5 = uraid_fault_sim::Config::new(5_003_009, "raid6-5-ls");
    p5.ppl = Some(true);
    runs.push(p5);
    for &(geometry, seed) in P3_P4_SEEDS {
        let mut cfg = uraid_fault_sim::Config::new(seed, geometry);
        cfg.ppl = Some(true);
        runs.push(cfg);
    }
    for &(geometry, seed) in P1_SEEDS {
        let mut cfg = uraid_fault_sim::Config::new(seed, geometry);
        cfg.ppl = Some(true);
        runs.push(cfg);
    }
    for cfg in &runs {
        if let Err(f) = run_one(cfg) {
            panic!("{f}");
        }
    }
}

/// Seeds of the campaign with the log on and the guards off that found the rest of P3, and P4.
const RAIDFRAME_SPARE_SEEDS: &[(&str, u64)] = &[
    ("raidframe-raid1-4", 7_700_169),
    ("raidframe-raid5-4", 7_701_503),
    ("raidframe-raid1-4", 7_710_228),
    ("raidframe-raid5-3", 53),
    ("raidframe-raid1-4", 106),
];

const P3_P4_SEEDS: &[(&str, u64)] =
    &[("raid5-3-ls", 8_794), ("raid5-4-ra", 8_994), ("raid5-4-rs", 13_163), ("raid6-5-la", 5_003_009)];

/// Seeds of the campaigns over md's metadata that found bugs (or runs the simulation judged
/// wrongly), with what each found.
const METADATA_SEEDS: &[(&str, u64, &str)] = &[
    ("raid10-4-n2", 72_249, "a damaged superblock was reported as an unreadable location"),
    ("raid1-2", 80_184, "a superblock torn by a crash: the run must end there"),
    ("raid10-4-n2", 56_961, "a rebuild that could not read its source was restarted forever"),
    ("raid1-3", 89_719, "a member left behind by two lost superblock updates was not counted as lost"),
    ("raid10-5-f2", 140_039, "a member rebuilt but not yet recorded so was counted as in sync"),
    ("raid10-4-n2", 147_051, "a member left behind by two lost superblock updates was not counted as lost"),
    ("raid10-3-n2", 174_518, "writes went out before members assembled one event behind were recorded dirty"),
    ("raid10-4-f2", 302_074, "a member failure was recorded only after every bitmap update queued before it"),
    ("raid10-4-o2", 550_800, "the same: a member failed for its metadata, then a crash"),
    ("raid10-5-o3", 741_020, "the same: two members failed, then a crash"),
    ("raid10-5-o3", 931_700, "the same: a member failed for its metadata, then a crash"),
    ("raid10-3-n2", 17_564, "an update superseding a queued one skipped its event number: a member two behind"),
    ("raid1-3", 807_919, "the same, after a member was failed by hand"),
    ("raid10-5-f2", 893_897, "the same, during a rebuild"),
    ("raid4-3", 819_435, "an update superseded the flush of the one before: two updates lost to one crash"),
    ("raid1-3", 683_599, "an update superseded the rewrite of one a member's failed write cut short"),
    ("raid1-3", 320_593, "a member with latent errors left behind by two crashes was taken for a failure of the code"),
];

/// Known bug P1 (`docs/fault-simulation.md`): raid6 with a log, a member holding the only log
/// entries of a stripe dead at a crash with a second member out; data rebuilt through the
/// stripe's stale other syndrome read wrong. Every seed of 5,000,000..5,200,000 over the raid6
/// geometries that failed with the guards off, with the log forced on.
const P1_SEEDS: &[(&str, u64)] = &[
    ("raid6-6-rs", 5_002_031),
    ("raid6-5-pl", 5_003_350),
    ("raid6-5-rs6", 5_003_933),
    ("raid6-5-la6", 5_004_362),
    ("raid6-5-ra6", 5_008_619),
    ("raid6-6-rs", 5_010_463),
    ("raid6-5-ra", 5_011_106),
    ("raid6-5-rs", 5_011_684),
    ("raid6-5-ra6", 5_014_123),
    ("raid6-5-pf", 5_015_877),
    ("raid6-5-ra6", 5_024_667),
    ("raid6-5-ddfzr", 5_029_591),
    ("raid6-5-la", 5_030_737),
    ("raid6-5-pl", 5_032_790),
    ("raid6-5-ls", 5_034_291),
    ("raid6-5-la6", 5_034_666),
    ("raid6-6-rs", 5_040_015),
    ("raid6-5-ddfnc", 5_042_697),
    ("raid6-5-la", 5_045_153),
    ("raid6-5-pf6", 5_047_166),
    ("raid6-5-pl", 5_048_886),
    ("raid6-5-ddfnr", 5_050_696),
    ("raid6-5-pl", 5_053_398),
    ("raid6-5-pf6", 5_055_550),
    ("raid6-5-la", 5_058_369),
    ("raid6-5-pl", 5_058_534),
    ("raid6-5-ddfzr", 5_060_775),
    ("raid6-5-ls6", 5_066_572),
    ("raid6-5-pf", 5_066_693),
    ("raid6-5-pf6", 5_066_798),
    ("raid6-5-ra", 5_069_410),
    ("raid6-5-ra", 5_070_162),
    ("raid6-5-pf", 5_071_365),
    ("raid6-5-rs6", 5_072_749),
    ("raid6-5-ra", 5_075_186),
    ("raid6-5-la", 5_080_561),
    ("raid6-6-rs", 5_084_287),
    ("raid6-5-rs6", 5_085_773),
    ("raid6-5-ra", 5_088_562),
    ("raid6-5-ddfnr", 5_089_432),
    ("raid6-5-la", 5_090_801),
    ("raid6-5-ls6", 5_090_844),
    ("raid6-5-ddfnc", 5_091_641),
    ("raid6-5-ddfzr", 5_091_847),
    ("raid6-4-ls", 5_105_120),
    ("raid6-6-rs", 5_106_191),
    ("raid6-5-ra6", 5_113_131),
    ("raid6-6-rs", 5_115_615),
    ("raid6-5-rs6", 5_117_469),
    ("raid6-5-pf6", 5_122_030),
    ("raid6-5-ls6", 5_123_564),
    ("raid6-5-pf6", 5_123_902),
    ("raid6-5-ra6", 5_136_139),
    ("raid6-5-pf6", 5_138_574),
    ("raid6-5-ls6", 5_139_692),
    ("raid6-5-ddfzr", 5_140_823),
    ("raid6-5-rs6", 5_143_069),
    ("raid6-5-ddfzr", 5_148_583),
    ("raid6-5-la6", 5_148_874),
    ("raid6-5-ls", 5_155_651),
    ("raid6-5-ls6", 5_159_308),
    ("raid6-5-la6", 5_162_522),
    ("raid6-6-rs", 5_166_815),
    ("raid6-5-pf", 5_171_957),
    ("raid6-5-pl", 5_172_678),
    ("raid6-5-ddfnr", 5_174_968),
    ("raid6-4-ls", 5_175_360),
    ("raid6-5-pf6", 5_176_782),
    ("raid6-5-rs6", 5_180_461),
    ("raid6-5-pf", 5_188_885),
    ("raid6-5-pl", 5_189_574),
    ("raid6-5-ddfnr", 5_190_408),
    ("raid6-5-rs6", 5_198_701),
    ("raid6-5-rs6", 5_198_829),
    ("raid6-5-rs", 5_199_460),
];

fn campaign_geometries() -> Vec<&'static str> {
    if let Ok(g) = std::env::var("URAID_SIM_GEOMETRY") {
        let name = geometries::ALL.iter().copied().find(|n| *n == g);
        return vec![name.unwrap_or_else(|| Box::leak(g.into_boxed_str()))];
    }
    match std::env::var("URAID_SIM_LEVEL") {
        Ok(level) => geometries::of_level(&level),
        Err(_) => geometries::ALL.to_vec(),
    }
}

fn long_plan(scenario: Scenario, default_seeds: u64, geometries: Vec<&'static str>) -> Plan {
    let threads = env_u64("URAID_SIM_THREADS")
        .map(|t| t as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let count = env_u64("URAID_SIM_SEEDS").unwrap_or(default_seeds);
    let mut plan = Plan::new(&geometries, env_u64("URAID_SIM_FIRST_SEED").unwrap_or(1_000_000), count);
    plan.threads = threads;
    plan.scenario = scenario;
    plan.expose_known_bugs = std::env::var("URAID_SIM_EXPOSE_KNOWN_BUGS").is_ok_and(|v| v == "1");
    plan.progress_every = (count / 20).max(1000);
    plan
}

fn report(name: &str, plan: &Plan) {
    eprintln!(
        "{name}: seeds {}..{} over {} geometries on {} threads",
        plan.first,
        plan.first + plan.count,
        plan.geometries.len(),
        plan.threads
    );
    let (summary, failures) = run_plan(plan);
    eprintln!("{name}: {}", summary.line());
    if let Some(f) = failures.first() {
        panic!("{f}");
    }
}

/// The long campaign (see the module documentation).
#[test]
#[ignore]
fn long_campaign() {
    let plan = long_plan(Scenario::Standard, 100_000, campaign_geometries());
    report("long campaign", &plan);
}

/// The RAID-4/5/6 write hole, closed: a parity array with md's partial parity log crashes while
/// degraded, its logs are replayed and it is read: nothing but sectors written in flight on the
/// missing member may read back wrong. `URAID_SIM_CI_WRITE_HOLE_SEEDS` (default 600).
#[test]
fn ci_write_hole() {
    let parity: Vec<&'static str> = geometries::ALL
        .iter()
        .copied()
        .filter(|g| matches!(geometries::level_of(g), "raid4" | "raid5" | "raid6"))
        .collect();
    let seeds = env_u64("URAID_SIM_CI_WRITE_HOLE_SEEDS").unwrap_or(600);
    let mut plan = Plan::new(&parity, 0, seeds);
    plan.scenario = Scenario::WriteHole;
    let (summary, failures) = run_plan(&plan);
    if let Some(f) = failures.first() {
        panic!("{f}");
    }
    println!("write hole: {}", summary.line());
}

/// The write-hole scenario as a long campaign (see `ci_write_hole`).
#[test]
#[ignore]
fn write_hole() {
    let parity: Vec<&'static str> = campaign_geometries()
        .into_iter()
        .filter(|g| matches!(geometries::level_of(g), "raid4" | "raid5" | "raid6"))
        .collect();
    let plan = long_plan(Scenario::WriteHole, 10_000, parity);
    report("write hole", &plan);
}

/// The standard campaign without the guards that keep it away from known engine bugs: fails
/// while those bugs are there (see `uraid_fault_sim::KNOWN_BUGS`).
#[test]
#[ignore]
fn known_bugs() {
    let mut plan = long_plan(Scenario::Standard, 20_000, campaign_geometries());
    plan.first = env_u64("URAID_SIM_FIRST_SEED").unwrap_or(0);
    plan.expose_known_bugs = true;
    report("known bugs", &plan);
}
