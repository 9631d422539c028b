//! `uraid sim`: the simulations from the command line.
//!
//! `uraid sim faults` runs the fault simulation (crate `uraid-fault-sim`): seeded runs of the real
//! engine over simulated members with faults and crashes injected, each judged against a model
//! of what every sector may hold; it exits non-zero when a run fails, and prints the command that
//! replays it.
//!
//! `uraid sim seeds` (the performance model, crate `uraid-perf-model`) replays every seed benchmark the simulator models, on the seed's hardware
//! profile, through the real engine, under each read policy, and prints the seed's value, the
//! simulated one and their ratio (a table, or one JSON object per figure and policy); with
//! `--plots DIR` it also runs the sweeps and writes their SVG charts.
//!
//! `uraid sim hosts` (`sim_hosts.rs`) puts arrays over many hosts on paper: rebuild time and
//! the chance of data loss by host count and placement.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use uraid_engine::ReadPolicy;
use uraid_fault_sim::campaign::{run_plan, Plan};
use uraid_fault_sim::{geometries, Mutation, Scenario};
use uraid_perf_model::seeds::{self, Figure, Options};

use super::{emit, err, CliResult};

#[derive(Args)]
pub struct SimArgs {
    #[command(subcommand)]
    pub what: SimWhat,
}

#[derive(Subcommand)]
pub enum SimWhat {
    /// Reproduce the seed documents' published figures under md's read policy and ours.
    Seeds(SeedsArgs),
    /// Run the real engine under injected faults and crashes, seed by seed, judged against a
    /// model; exits non-zero when a run fails.
    Faults(FaultsArgs),
    /// Arrays over many hosts on paper: rebuild time and the chance of data loss by host count
    /// and placement (md over NBD through one host, raid6 groups, declustered raid6).
    Hosts(super::sim_hosts::HostsArgs),
}

#[derive(Args)]
pub struct FaultsArgs {
    /// How many seeds to run (spread over the geometries, seed s on geometry s mod count).
    #[arg(long, default_value_t = 1000)]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    pub first: u64,
    /// Run one geometry only (see --list).
    #[arg(long, conflicts_with = "level")]
    pub geometry: Option<String>,
    /// Run the geometries of one level only: linear, raid0, raid1, raid4, raid5, raid6, raid10.
    #[arg(long)]
    pub level: Option<String>,
    /// Plant a deliberate fault the checker must catch: silent-corruption, extra-death or
    /// lying-flush (the members and the fault plan), ignore-events (md assembly ignores event
    /// counts), data-before-bitmap or checkpoint-ahead (the running array's policy). A campaign
    /// that catches it fails, as it should.
    #[arg(long)]
    pub mutation: Option<String>,
    /// The write-hole scenario: parity arrays crash while degraded and are assembled anyway.
    #[arg(long)]
    pub write_hole: bool,
    /// Force the partial parity log on or off for parity arrays (default: each seed decides).
    #[arg(long, value_parser = ["on", "off"])]
    pub ppl: Option<String>,
    /// Worker threads (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Report every failing run instead of stopping at the first.
    #[arg(long)]
    pub keep_going: bool,
    /// End with one JSON line of totals instead of a sentence.
    #[arg(long)]
    pub json: bool,
    /// List the geometries and stop.
    #[arg(long)]
    pub list: bool,
}

#[derive(Args)]
pub struct SeedsArgs {
    /// One JSON object per line (per figure and policy) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also run the sweeps and write their charts (SVG) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// The simulation's seed: platter phases and every random choice of the benchmarks.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fraction of each benchmark's data volume to simulate (0 < scale <= 1); rates change
    /// little, run time a lot.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
}

pub fn run(args: &SimArgs) -> CliResult {
    match &args.what {
        SimWhat::Seeds(a) => run_seeds(a),
        SimWhat::Faults(a) => run_faults(a),
        SimWhat::Hosts(a) => super::sim_hosts::run(a),
    }
}

fn run_faults(args: &FaultsArgs) -> CliResult {
    if args.list {
        return emit(&geometries::ALL.iter().map(|g| format!("{g}\n")).collect::<String>());
    }
    let mutation = match &args.mutation {
        Some(m) => Some(Mutation::parse(m).ok_or_else(|| {
            let known: Vec<&str> = Mutation::ALL.iter().map(|m| m.name()).collect();
            super::CliError(format!("--mutation={m}: not a mutation ({})", known.join(", ")))
        })?),
        None => None,
    };
    let scenario = if args.write_hole { Scenario::WriteHole } else { Scenario::Standard };
    let mut names: Vec<&str> = match (&args.geometry, &args.level) {
        (Some(g), _) => match geometries::ALL.iter().find(|n| **n == g.as_str()) {
            Some(n) => vec![*n],
            None => return err(format!("--geometry={g}: not a geometry (see --list)")),
        },
        (None, Some(l)) => geometries::of_level(l),
        (None, None) => geometries::ALL.to_vec(),
    };
    if scenario == Scenario::WriteHole {
        names.retain(|g| matches!(geometries::level_of(g), "raid4" | "raid5" | "raid6"));
    }
    if names.is_empty() {
        return err("no geometry to run (see --list; the write-hole scenario takes raid4/5/6 only)");
    }
    if args.seeds == 0 {
        return err("--seeds=0: nothing to run");
    }
    let mut plan = Plan::new(&names, args.first, args.seeds);
    plan.threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    plan.scenario = scenario;
    plan.mutation = mutation;
    plan.ppl = args.ppl.as_deref().map(|p| p == "on");
    plan.progress_every = if args.json { 0 } else { (args.seeds / 20).max(1000) };
    plan.stop_at_first = !args.keep_going;
    let (summary, failures) = run_plan(&plan);
    for f in &failures {
        eprintln!("{f}\n");
    }
    if args.json {
        let line = serde_json::json!({
            "runs": summary.runs + failures.len() as u64,
            "failures": failures.len(),
            "crashes": summary.crashes,
            // Crashes while superblock, bitmap or log-header writes were in flight or not yet
            // durable.
            "crashes_in_metadata_writes": summary.crashes_in_metadata_writes,
            "metadata_ios": summary.metadata_ios,
            "torn_superblocks": summary.torn_superblocks,
            "mutation": mutation.map(Mutation::name),
            "scenario": if args.write_hole { "write-hole" } else { "standard" },
            "first": args.first,
            "seeds": args.seeds,
            "geometries": names,
            "refused": summary.refused,
            "resyncs": summary.resyncs,
            "rebuilds": summary.rebuilds,
            "member_deaths": summary.deaths,
            "requests": summary.ops,
            "member_ios": summary.member_ios,
            "seconds": (summary.seconds * 10.0).round() / 10.0,
        });
        emit(&format!("{line}\n"))?;
    } else {
        emit(&format!("{}\n", summary.line()))?;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        err(format!("{} failing run(s); each ends with the command that replays it", failures.len()))
    }
}

fn run_seeds(args: &SeedsArgs) -> CliResult {
    if !(args.scale > 0.0 && args.scale <= 1.0) {
        return err(format!("--scale={}: give a fraction in (0, 1]", args.scale));
    }
    keep_buffers_in_the_heap();
    let opts = Options { seed: args.seed, scale: args.scale };
    let (figures, charts) = seeds::reproduce(&opts, args.plots.is_some());
    let mut text = String::new();
    if args.json {
        for f in &figures {
            text.push_str(&serde_json::to_string(f)?);
            text.push('\n');
        }
    } else {
        text = table(&figures);
    }
    emit(&text)?;
    if let Some(dir) = &args.plots {
        std::fs::create_dir_all(dir).map_err(|e| super::CliError(format!("{}: {e}", dir.display())))?;
        for chart in &charts {
            if std::env::var("TMPDUMP").is_ok() {
                eprintln!("{}", serde_json::to_string(chart).unwrap());
            }
            let path = dir.join(&chart.file);
            std::fs::write(&path, uraid_perf_model::plot::svg(chart))
                .map_err(|e| super::CliError(format!("{}: {e}", path.display())))?;
            if !args.json {
                emit(&format!("wrote {}\n", path.display()))?;
            }
        }
    }
    Ok(())
}

/// The simulation allocates and frees a buffer of up to a few hundred KiB for every simulated
/// member I/O (the engine's data types own their bytes). glibc serves blocks that large with a
/// fresh mmap each time and returns them to the kernel on free, so two thirds of a run went to
/// page faults; raising its thresholds keeps them in the heap, reused (same results, a third of
/// the time).
fn keep_buffers_in_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before the simulation allocates.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

fn fmt(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.2}"),
        None => "-".to_string(),
    }
}

/// One row per figure: the seed, the simulated value under the md of the seed's era (the
/// figure's `seed_md_policy`) and their ratio, then every policy's value (today's md among
/// them), and the ratios to a single disk (seed's, the era's md's, then every policy's).
fn table(figures: &[Figure]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let first = ReadPolicy::ALL[0].name();
    let rows: Vec<&Figure> = figures.iter().filter(|f| f.policy == first).collect();
    let all = ReadPolicy::ALL;
    let _ = write!(out, "{:<42} {:>8} {:>9} {:>8} {:>9} {:>7}", "figure", "unit", "seed", "era md", "era", "era/seed");
    for p in &all {
        let _ = write!(out, " {:>14}", p.name());
    }
    let _ = writeln!(
        out,
        "   x single disk: seed / era md / {}",
        all.iter().map(|p| p.name()).collect::<Vec<_>>().join(" / ")
    );
    for f in rows {
        let same = |name: &str| figures.iter().find(|g| g.id == f.id && g.policy == name).expect("every policy");
        let era = same(f.seed_md_policy);
        let _ = write!(
            out,
            "{:<42} {:>8} {:>9} {:>8} {:>9} {:>7}",
            f.id,
            f.unit,
            fmt(f.seed_value),
            f.seed_md_policy,
            fmt(Some(era.sim_value)),
            fmt(era.sim_to_seed)
        );
        for p in &all {
            let _ = write!(out, " {:>14}", fmt(Some(same(p.name()).sim_value)));
        }
        if f.ratio_to_single_disk.is_some() {
            let ours: Vec<String> = all.iter().map(|p| fmt(same(p.name()).ratio_to_single_disk)).collect();
            let _ = write!(
                out,
                "   {} / {} / {}",
                fmt(f.seed_ratio_to_single_disk),
                fmt(era.ratio_to_single_disk),
                ours.join(" / ")
            );
        }
        out.push('\n');
    }
    out
}
