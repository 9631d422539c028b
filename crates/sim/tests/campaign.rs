use uraid_sim::campaign::{replay_config_from_env, run_plan, Plan};
use uraid_sim::geometries;
use uraid_sim::run_one;

#[test]
fn replay() {
    let Some(cfg) = replay_config_from_env() else { return };
    match run_one(&cfg) {
        Ok(r) => eprintln!("passed: {r:?}"),
        Err(f) => panic!("{f}"),
    }
}

#[test]
#[ignore]
fn quick() {
    let seeds = uraid_sim::campaign::env_u64("URAID_SIM_SEEDS").unwrap_or(100);
    let first = uraid_sim::campaign::env_u64("URAID_SIM_FIRST_SEED").unwrap_or(0);
    for level in ["linear", "raid0", "raid1", "raid10", "raid4", "raid5", "raid6"] {
        let expose = std::env::var("URAID_SIM_EXPOSE_KNOWN_BUGS").is_ok_and(|v| v == "1");
        let plan = Plan { stop_at_first: false, threads: 2, expose_known_bugs: expose, ..Plan::new(&geometries::of_level(level), first, seeds) };
        let (s, f) = run_plan(&plan);
        eprintln!("{level}: {}", s.line());
        for x in f.iter() { eprintln!("FAIL {} {} {:?} {}", x.config.geometry, x.config.seed, x.invariant, x.detail.lines().next().unwrap_or("")); }
        eprintln!("{level}: {} failures", f.len());
    }
}
