//! `uraid sim`: the performance simulator (crate `uraid-perfsim`) from the command line.
//!
//! `uraid sim seeds` replays every seed benchmark the simulator models, on the seed's hardware
//! profile, through the real engine, under each read policy, and prints the seed's value, the
//! simulated one and their ratio (a table, or one JSON object per figure and policy); with
//! `--plots DIR` it also runs the sweeps and writes their SVG charts.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use uraid_engine::ReadPolicy;
use uraid_perfsim::seeds::{self, Figure, Options};

use super::{err, CliResult};

#[derive(Args)]
pub struct SimArgs {
    #[command(subcommand)]
    pub what: SimWhat,
}

#[derive(Subcommand)]
pub enum SimWhat {
    /// Reproduce the seed documents' published figures under md's read policy and ours.
    Seeds(SeedsArgs),
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
    }
}

fn run_seeds(args: &SeedsArgs) -> CliResult {
    if !(args.scale > 0.0 && args.scale <= 1.0) {
        return err(format!("--scale={}: give a fraction in (0, 1]", args.scale));
    }
    keep_buffers_in_the_heap();
    let opts = Options { seed: args.seed, scale: args.scale };
    let figures = seeds::figures(&opts);
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
        for chart in seeds::charts(&opts) {
            let path = dir.join(chart.file);
            std::fs::write(&path, uraid_perfsim::plot::svg(&chart)).map_err(|e| super::CliError(format!("{}: {e}", path.display())))?;
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

/// Write to stdout; a reader that went away (`| head`) ends the output quietly.
fn emit(text: &str) -> CliResult {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => err(format!("stdout: {e}")),
        _ => Ok(()),
    }
}

fn fmt(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.2}"),
        None => "-".to_string(),
    }
}

/// One row per figure: the seed, md's simulated value and their ratio, each other policy's
/// value, and the ratios to a single disk (seed's, then md's and ours).
fn table(figures: &[Figure]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let md: Vec<&Figure> = figures.iter().filter(|f| f.policy == ReadPolicy::Md.name()).collect();
    let others: Vec<ReadPolicy> = ReadPolicy::ALL.into_iter().filter(|p| *p != ReadPolicy::Md).collect();
    let _ = write!(out, "{:<42} {:>8} {:>9} {:>9} {:>6}", "figure", "unit", "seed", "md", "md/seed");
    for p in &others {
        let _ = write!(out, " {:>14}", p.name());
    }
    let _ = writeln!(out, "   x single disk: seed / md / {}", others.iter().map(|p| p.name()).collect::<Vec<_>>().join(" / "));
    for f in md {
        let _ = write!(out, "{:<42} {:>8} {:>9} {:>9} {:>6}", f.id, f.unit, fmt(f.seed_value), fmt(Some(f.sim_value)), fmt(f.sim_to_seed));
        let same = |p: &ReadPolicy| figures.iter().find(|g| g.id == f.id && g.policy == p.name()).expect("every policy");
        for p in &others {
            let _ = write!(out, " {:>14}", fmt(Some(same(p).sim_value)));
        }
        if f.ratio_to_single_disk.is_some() {
            let ours: Vec<String> = others.iter().map(|p| fmt(same(p).ratio_to_single_disk)).collect();
            let _ = write!(out, "   {} / {} / {}", fmt(f.seed_ratio_to_single_disk), fmt(f.ratio_to_single_disk), ours.join(" / "));
        }
        out.push('\n');
    }
    out
}
