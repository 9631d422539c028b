//! The simulation campaigns: what CI runs, the long campaign, replay, and the opt-in scenarios.
//!
//! - `ci_<level>`: `URAID_SIM_CI_SEEDS` seeds (default 2000) per level, spread over the level's
//!   geometries; the first failure panics with a message ending in its replay command.
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

/// Seeds that found engine bugs since fixed, run as they were found (default configuration). A
/// later change to the engine may take a seed down another path, so each is only a check that
/// the run passes, not a proof that its bug's path is still taken.
/// - raid6-5-rs 1013616: a raid6 member back in sync logged a stripe while another member's
///   header still on disk (its replacement going out, not yet durable) held an older entry for
///   that stripe; the crash replayed that entry's stale partial parity over the new write.
#[test]
fn seeds_of_fixed_bugs_pass() {
    for (geometry, seed) in [("raid6-5-rs", 1_013_616), ("raid1-3", 3_002_713)] {
        if let Err(f) = run_one(&uraid_fault_sim::Config::new(seed, geometry)) {
            panic!("{f}");
        }
    }
}

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
