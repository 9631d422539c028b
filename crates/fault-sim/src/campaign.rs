//! Running many seeds: the CI campaign per level, the long campaign, and replay from the
//! environment.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::sim::{run, Config, Failure, Invariant, Mutation, Report, Scenario};

/// Run one configuration; a panic (in the engine or the simulation) becomes a [`Failure`] that
/// carries the replay command like any other.
pub fn run_one(cfg: &Config) -> Result<Report, Failure> {
    match catch_unwind(AssertUnwindSafe(|| run(cfg))) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-text panic payload".into());
            Err(Failure {
                config: cfg.clone(),
                invariant: Invariant::Panic,
                detail: format!("panicked: {message}"),
                time: 0,
                event: 0,
                explained_by_write_hole: false,
            })
        }
    }
}

/// Totals over many runs.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub runs: u64,
    pub overload_runs: u64,
    pub ops: u64,
    pub member_ios: u64,
    /// Superblock, bitmap and log-header writes and flushes.
    pub metadata_ios: u64,
    pub crashes: u64,
    /// Crashes while metadata writes were in flight or not yet durable.
    pub crashes_in_metadata_writes: u64,
    /// Superblocks torn by crashes (their members left out at assembly).
    pub torn_superblocks: u64,
    pub refused: u64,
    pub resyncs: u64,
    pub rebuilds: u64,
    /// RAIDframe copybacks begun, and those a crash cut short.
    pub copybacks: u64,
    pub copybacks_cut_short: u64,
    pub deaths: u64,
    pub latent_errors: u64,
    pub write_errors: u64,
    pub members_failed: u64,
    pub read_errors_corrected: u64,
    pub partial_sector_kicks: u64,
    pub subset_reads: u64,
    pub requests_failed: u64,
    pub writes_gathered: u64,
    /// Runs whose parity array kept a partial parity log, and the log entries they replayed.
    pub ppl_runs: u64,
    pub log_entries_replayed: u64,
    pub seconds: f64,
}

impl Summary {
    pub fn add(&mut self, r: &Report) {
        self.runs += 1;
        self.overload_runs += u64::from(r.overload);
        self.ops += r.ops;
        self.member_ios += r.member_ios;
        self.metadata_ios += r.metadata_ios;
        self.crashes += u64::from(r.crashes);
        self.crashes_in_metadata_writes += u64::from(r.crashes_in_metadata_writes);
        self.torn_superblocks += u64::from(r.torn_superblocks);
        self.refused += u64::from(r.refused);
        self.resyncs += u64::from(r.resyncs);
        self.rebuilds += u64::from(r.rebuilds);
        self.copybacks += u64::from(r.copybacks);
        self.copybacks_cut_short += u64::from(r.copybacks_cut_short);
        self.deaths += u64::from(r.deaths);
        self.latent_errors += u64::from(r.latent_errors);
        self.write_errors += u64::from(r.write_errors);
        self.members_failed += u64::from(r.members_failed);
        self.read_errors_corrected += u64::from(r.read_errors_corrected);
        self.subset_reads += u64::from(r.subset_reads);
        self.partial_sector_kicks += u64::from(r.partial_sector_kicks);
        self.requests_failed += u64::from(r.requests_failed);
        self.writes_gathered += r.writes_gathered;
        self.ppl_runs += u64::from(r.ppl);
        self.log_entries_replayed += r.log_entries_replayed;
    }

    pub fn line(&self) -> String {
        format!(
            "{} runs ({} beyond redundancy) in {:.1} s: {} requests, {} member I/Os, {} metadata I/Os; {} crashes ({} among metadata writes, {} refused as dirty+degraded parity, {} superblocks torn), {} resyncs, {} rebuilds, {} copybacks ({} cut short by a crash); faults: {} deaths, {} latent-error bursts, {} write errors; {} members failed ({} by a partial-sector rewrite of a bad sector), {} read errors corrected, {} subset reads, {} requests failed (beyond redundancy), {} writes gathered into another's; {} runs with a partial parity log, {} log entries replayed",
            self.runs,
            self.overload_runs,
            self.seconds,
            self.ops,
            self.member_ios,
            self.metadata_ios,
            self.crashes,
            self.crashes_in_metadata_writes,
            self.refused,
            self.torn_superblocks,
            self.resyncs,
            self.rebuilds,
            self.copybacks,
            self.copybacks_cut_short,
            self.deaths,
            self.latent_errors,
            self.write_errors,
            self.members_failed,
            self.partial_sector_kicks,
            self.read_errors_corrected,
            self.subset_reads,
            self.requests_failed,
            self.writes_gathered,
            self.ppl_runs,
            self.log_entries_replayed
        )
    }
}

/// What to run: seeds `first..first+count`, seed `s` on `geometries[s % len]`.
#[derive(Debug, Clone)]
pub struct Plan {
    pub geometries: Vec<String>,
    pub first: u64,
    pub count: u64,
    pub threads: usize,
    pub scenario: Scenario,
    pub mutation: Option<Mutation>,
    /// Switch off the known-bug guards.
    pub expose_known_bugs: bool,
    /// Force the partial parity log on or off for parity arrays (`None`: each seed decides).
    pub ppl: Option<bool>,
    /// Stop at the first failure (else collect every failure).
    pub stop_at_first: bool,
    /// Print progress to stderr every this many runs (0: never).
    pub progress_every: u64,
}

impl Plan {
    pub fn new(geometries: &[&str], first: u64, count: u64) -> Plan {
        Plan {
            geometries: geometries.iter().map(|g| g.to_string()).collect(),
            first,
            count,
            threads: 1,
            scenario: Scenario::Standard,
            mutation: None,
            expose_known_bugs: false,
            ppl: None,
            stop_at_first: true,
            progress_every: 0,
        }
    }

    pub fn config(&self, seed: u64) -> Config {
        let geometry = &self.geometries[(seed % self.geometries.len() as u64) as usize];
        let mut cfg = Config::new(seed, geometry);
        cfg.scenario = self.scenario;
        cfg.ppl = self.ppl;
        cfg.mutation = self.mutation;
        cfg.expose_known_bugs = self.expose_known_bugs;
        cfg
    }
}

/// Run a plan; failures sorted by seed.
pub fn run_plan(plan: &Plan) -> (Summary, Vec<Failure>) {
    assert!(!plan.geometries.is_empty(), "no geometry to run");
    let start = Instant::now();
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let summary = Mutex::new(Summary::default());
    let failures = Mutex::new(Vec::<Failure>::new());
    let worker = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= plan.count || stop.load(Ordering::Relaxed) {
            return;
        }
        let cfg = plan.config(plan.first + i);
        match run_one(&cfg) {
            Ok(report) => {
                let mut s = summary.lock().expect("summary lock");
                s.add(&report);
                if plan.progress_every > 0 && s.runs % plan.progress_every == 0 {
                    eprintln!(
                        "uraid-sim: {} of {} runs done ({:.0} s)",
                        s.runs,
                        plan.count,
                        start.elapsed().as_secs_f64()
                    );
                }
            }
            Err(f) => {
                if plan.stop_at_first {
                    stop.store(true, Ordering::Relaxed);
                }
                failures.lock().expect("failures lock").push(f);
            }
        }
    };
    if plan.threads <= 1 {
        worker();
    } else {
        std::thread::scope(|s| {
            for _ in 0..plan.threads {
                s.spawn(worker);
            }
        });
    }
    let mut summary = summary.into_inner().expect("summary lock");
    summary.seconds = start.elapsed().as_secs_f64();
    let mut failures = failures.into_inner().expect("failures lock");
    failures.sort_by_key(|f| f.config.seed);
    (summary, failures)
}

/// Read a number from the environment (panics with a clear message when it is not one).
pub fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a number")))
}

/// The replay configuration the environment asks for (`URAID_SIM_SEED`, `URAID_SIM_GEOMETRY`,
/// optionally `URAID_SIM_WRITE_HOLE=1`, `URAID_SIM_PPL=0|1`, `URAID_SIM_READ_POLICY=<name>` and
/// `URAID_SIM_MUTATION=<name>`), traced.
pub fn replay_config_from_env() -> Option<Config> {
    let seed = env_u64("URAID_SIM_SEED")?;
    let geometry = std::env::var("URAID_SIM_GEOMETRY").unwrap_or_else(|_| "raid5-4-ls".into());
    let mut cfg = Config::new(seed, &geometry);
    cfg.trace = std::env::var("URAID_SIM_TRACE").map_or(true, |v| v != "0");
    if std::env::var("URAID_SIM_WRITE_HOLE").is_ok_and(|v| v == "1") {
        cfg.scenario = Scenario::WriteHole;
    }
    if let Ok(v) = std::env::var("URAID_SIM_PPL") {
        cfg.ppl = Some(v == "1");
    }
    if std::env::var("URAID_SIM_EXPOSE_KNOWN_BUGS").is_ok_and(|v| v == "1") {
        cfg.expose_known_bugs = true;
    }
    if let Ok(p) = std::env::var("URAID_SIM_READ_POLICY") {
        cfg.read_policy = Some(p.parse().unwrap_or_else(|e| panic!("URAID_SIM_READ_POLICY: {e}")));
    }
    if let Ok(m) = std::env::var("URAID_SIM_MUTATION") {
        cfg.mutation = Some(Mutation::parse(&m).unwrap_or_else(|| panic!("unknown URAID_SIM_MUTATION {m:?}")));
    }
    Some(cfg)
}
