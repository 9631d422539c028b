//! A reshape run in the foreground (`uraid grow`, and the restripe that follows a raid5's
//! takeover to a normal raid6): step by step to its end, with a progress bar on a terminal, its
//! position recorded every few seconds and on SIGINT or SIGTERM, members that fail said as they
//! are recorded faulty.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGINT, SIGTERM};
use uraid_device::reshape::Grow;

use super::{err, CliError, CliResult};

/// How often the position reached is recorded, besides when the next stripe needs it: as a
/// rebuild's checkpoints, so a crash repeats little.
const RECORD_EVERY: Duration = Duration::from_secs(2);

/// Run the reshape to its end, or until SIGINT/SIGTERM (then record where it got to).
pub fn reshape(grow: &mut Grow, limit: Option<u64>, members: &[std::path::PathBuf]) -> CliResult {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).map_err(|e| CliError(format!("signal handler: {e}")))?;
    }
    let (start, total) = grow.progress();
    let bar = crate::progress::bytes_bar(total, "reshape");
    let began = Instant::now();
    let mut last_record = Instant::now();
    let mut failures_said = 0;
    loop {
        if stop.load(Ordering::Relaxed) {
            grow.checkpoint()?;
            if let Some(bar) = &bar {
                bar.finish_and_clear();
            }
            let list: Vec<String> = members.iter().map(|m| m.display().to_string()).collect();
            return err(format!(
                "reshape of {} stopped at {}K of {}K; continue it with: uraid grow --continue {} (or let the kernel: mdadm --assemble)",
                grow.name(),
                grow.recorded_progress() / 1024,
                total / 1024,
                list.join(" ")
            ));
        }
        let stepped = grow.step();
        // A member that failed is said as soon as it is recorded faulty, as md logs it.
        for (name, why) in grow.failures().into_iter().skip(failures_said) {
            if let Some(bar) = &bar {
                bar.suspend(|| {
                    eprintln!("uraid: {name} failed ({why}): recorded faulty; the reshape goes on degraded")
                });
            } else {
                eprintln!("uraid: {name} failed ({why}): recorded faulty; the reshape goes on degraded");
            }
            failures_said += 1;
        }
        if stepped? {
            break;
        }
        let (done, _) = grow.progress();
        if let Some(bar) = &bar {
            bar.set_position(done);
        }
        if last_record.elapsed() >= RECORD_EVERY {
            grow.checkpoint()?;
            last_record = Instant::now();
        }
        if let Some(max) = limit {
            // md's speed_limit_max: no faster than `max` bytes of the array per second.
            let due = Duration::from_secs_f64((done - start) as f64 / max as f64);
            if let Some(wait) = due.checked_sub(began.elapsed()) {
                std::thread::sleep(wait.min(Duration::from_millis(200)));
            }
        }
    }
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    eprintln!("uraid: reshape of {} finished: {}, array size {}K", grow.name(), grow.outcome(), total / 1024);
    if failures_said > 0 {
        eprintln!("uraid: the array is degraded: add a device to rebuild onto (uraid add MEMBERS... --device NEW)");
    }
    Ok(())
}
