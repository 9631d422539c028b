//! `uraid-sim`: run the simulation from the command line.
//!
//! ```text
//! uraid-sim --seed 123 --geometry raid5-4-ls --trace     one run, step by step
//! uraid-sim --seeds 100000 [--first 0] [--level raid6]   a campaign (all cores; --level vinum: gvinum
//!                                                        volumes; --level raidframe: RAIDframe sets)
//! uraid-sim --write-hole --seeds 1000                    the write-hole scenario
//! uraid-sim --list                                       the geometries
//! ```
//!
//! Other flags: `--threads N`, `--keep-going` (report every failing run), `--ppl on|off`, `--expose-known-bugs`, `--mutation NAME` (see `usage.txt`).
//! Exit status 1 when a run fails; the failure ends with the command that replays it.

use std::process::ExitCode;

use uraid_fault_sim::campaign::{run_plan, Plan};
use uraid_fault_sim::{geometries, run_one, Config, Mutation, Scenario};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut seed = None;
    let mut seeds = 1000u64;
    let mut first = 0u64;
    let mut geometry: Option<String> = None;
    let mut level: Option<String> = None;
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut scenario = Scenario::Standard;
    let mut mutation = None;
    let mut expose = false;
    let mut trace = false;
    let mut keep_going = false;
    let mut ppl = None;
    let mut i = 0;
    let value = |i: &mut usize| -> String {
        *i += 1;
        args.get(*i).cloned().unwrap_or_else(|| {
            eprintln!("uraid-sim: {} needs a value", args[*i - 1]);
            std::process::exit(2)
        })
    };
    let number = |s: String| -> u64 {
        s.parse().unwrap_or_else(|_| {
            eprintln!("uraid-sim: {s:?} is not a number");
            std::process::exit(2)
        })
    };
    while i < args.len() {
        match args[i].as_str() {
            "--seed" => seed = Some(number(value(&mut i))),
            "--seeds" => seeds = number(value(&mut i)),
            "--first" => first = number(value(&mut i)),
            "--geometry" => geometry = Some(value(&mut i)),
            "--level" => level = Some(value(&mut i)),
            "--threads" => threads = number(value(&mut i)) as usize,
            "--write-hole" => scenario = Scenario::WriteHole,
            "--expose-known-bugs" => expose = true,
            "--trace" => trace = true,
            "--keep-going" => keep_going = true,
            "--ppl" => {
                ppl = Some(match value(&mut i).as_str() {
                    "on" => true,
                    "off" => false,
                    other => {
                        eprintln!("uraid-sim: --ppl takes on or off, not {other:?}");
                        std::process::exit(2)
                    }
                })
            }
            "--mutation" => {
                let m = value(&mut i);
                mutation = Some(Mutation::parse(&m).unwrap_or_else(|| {
                    eprintln!("uraid-sim: unknown mutation {m:?}");
                    std::process::exit(2)
                }));
            }
            "--list" => {
                for g in geometries::ALL
                    .iter()
                    .chain(uraid_fault_sim::vinum_geometries::ALL)
                    .chain(uraid_fault_sim::raidframe_geometries::ALL)
                {
                    println!("{g}");
                }
                return ExitCode::SUCCESS;
            }
            "-h" | "--help" => {
                println!("{}", include_str!("usage.txt"));
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("uraid-sim: unknown argument {other:?} (try --help)");
                return ExitCode::from(2);
            }
        }
        i += 1;
    }
    if let Some(seed) = seed {
        let mut cfg = Config::new(seed, geometry.as_deref().unwrap_or("raid5-4-ls"));
        cfg.scenario = scenario;
        cfg.mutation = mutation;
        cfg.expose_known_bugs = expose;
        cfg.trace = trace;
        cfg.ppl = ppl;
        return match run_one(&cfg) {
            Ok(r) => {
                println!("passed: {r:#?}");
                ExitCode::SUCCESS
            }
            Err(f) => {
                eprintln!("{f}");
                ExitCode::FAILURE
            }
        };
    }
    let mut names: Vec<&'static str> = match (&geometry, &level) {
        (Some(g), _) => vec![Box::leak(g.clone().into_boxed_str())],
        (None, Some(l)) => geometries::of_level(l),
        (None, None) => geometries::ALL.to_vec(),
    };
    if scenario == Scenario::WriteHole {
        names.retain(|g| matches!(geometries::level_of(g), "raid4" | "raid5" | "raid6"));
    }
    if names.is_empty() {
        eprintln!("uraid-sim: no geometry to run (see --list)");
        return ExitCode::from(2);
    }
    let mut plan = Plan::new(&names, first, seeds);
    plan.threads = threads;
    plan.scenario = scenario;
    plan.mutation = mutation;
    plan.expose_known_bugs = expose;
    plan.ppl = ppl;
    plan.progress_every = (seeds / 20).max(1000);
    plan.stop_at_first = !keep_going;
    let (summary, failures) = run_plan(&plan);
    println!("{}", summary.line());
    for f in &failures {
        eprintln!("{f}\n");
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("uraid-sim: {} failing run(s)", failures.len());
        ExitCode::FAILURE
    }
}
