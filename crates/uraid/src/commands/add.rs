//! `uraid add --device NEW MEMBER...`: add devices to a stopped array and rebuild them in the
//! foreground (md's `--add` followed by its recovery), with a progress bar on a terminal.
//!
//! Each new device takes a missing or failed slot and is rebuilt from redundancy, or becomes a
//! hot spare when every slot is filled. A device that already carries an md superblock is
//! refused (it may hold data). An interrupted rebuild keeps its position in the superblocks; the
//! next `uraid serve` (or `uraid add` with no new device) resumes it.

use std::path::PathBuf;

use uraid_device::service::{ArrayService, ManageOp, ServiceConfig, SpeedLimits};
use uraid_device::OpenArray;

use super::{assemble_for_service, err, report_stop, CliError, CliResult};
use crate::control::status_json;
use crate::size::parse_size;
use crate::AddArgs;

pub fn run(args: &AddArgs) -> CliResult {
    let mut speed = SpeedLimits::default();
    if let Some(max) = &args.speed_limit_max {
        speed.max_bytes_per_sec = parse_size(max, 1).map_err(CliError)?.max(1);
    }
    let array = assemble_for_service(&args.members, true)?;
    rebuild(array, speed, &args.device)
}

/// Run `array` until its rebuilds are done, in the foreground with progress: each of `devices`
/// added first (rebuilt into a free slot or kept as a spare), and any slot already being
/// rebuilt (a resumed rebuild, a spare that took a slot) rebuilt with them.
pub(super) fn rebuild(array: OpenArray, speed: SpeedLimits, devices: &[PathBuf]) -> CliResult {
    let config = ServiceConfig { auto_resync: false, speed, ..ServiceConfig::default() };
    let service = ArrayService::start(array, config);
    let handle = service.handle();
    for dev in devices {
        if let Err(e) = handle.manage(ManageOp::Add(dev.clone())) {
            let _ = service.stop();
            return err(e.to_string());
        }
    }
    let last = crate::progress::follow(
        || handle.status().map(|s| status_json(&s)).map_err(|e| CliError(e.to_string())),
        || handle.wait_idle().map(|s| status_json(&s)).map_err(|e| CliError(e.to_string())),
    )?;
    let report = service.stop().map_err(|e| CliError(format!("stopping the array: {e}")))?;
    // How the rebuild ended is already in the service's messages ("recover completed: ...").
    report_stop(&report, false, "done");
    let rebuilding: Vec<&str> = last["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["state"] == "recovering")
        .filter_map(|m| m["path"].as_str())
        .collect();
    if !rebuilding.is_empty() {
        return err(format!("rebuild did not finish for {}; run again to resume", rebuilding.join(", ")));
    }
    Ok(())
}
