//! `uraid check|repair|resync MEMBER...`: run one background pass over a stopped array in the
//! foreground, with a progress bar on a terminal, and report what it found.
//!
//! `check` opens the members read-only and changes nothing; `repair` rewrites what disagrees;
//! `resync` is a repair that also clears the "resync needed" state of an array left dirty by a
//! crash, after which it is marked clean.

use uraid_device::service::{ArrayService, ServiceConfig, SpeedLimits, SyncAction};

use super::{assemble_for_service, err, report_stop, CliError, CliResult};
use crate::control::status_json;
use crate::size::parse_size;
use crate::PassArgs;

pub fn run(action: SyncAction, args: &PassArgs) -> CliResult {
    let writable = action != SyncAction::Check;
    let array = assemble_for_service(&args.members, writable)?;
    let mut speed = SpeedLimits::default();
    if let Some(max) = &args.speed_limit_max {
        speed.max_bytes_per_sec = parse_size(max, 1).map_err(CliError)?.max(1);
    }
    let config = ServiceConfig { auto_resync: false, speed, ..ServiceConfig::default() };
    let service = ArrayService::start(array, config);
    let handle = service.handle();
    if let Err(e) = handle.start_sync(action) {
        let _ = service.stop();
        return err(format!("{action}: {e}"));
    }
    let last = crate::progress::follow(
        || handle.status().map(|s| status_json(&s)).map_err(|e| CliError(e.to_string())),
        || handle.wait_idle().map(|s| status_json(&s)).map_err(|e| CliError(e.to_string())),
    )?;
    let report = service.stop().map_err(|e| CliError(format!("stopping the array: {e}")))?;
    let outcome = last["last_sync"].as_str().unwrap_or("no result").to_string();
    eprintln!("uraid: {outcome}");
    report_stop(&report, !writable, "done");
    if !outcome.contains("completed") {
        return err(format!("{action} did not complete: {outcome}"));
    }
    if action.counts_mismatches() {
        println!("mismatch_cnt {}", last["mismatch_cnt"]);
    }
    Ok(())
}
