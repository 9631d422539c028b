//! `uraid stop NAME...` (or `all`, or `--scan`): stop arrays started by `uraid assemble` as
//! `mdadm --stop` does: requests in flight are finished, the members flushed and the array
//! recorded clean, and the command returns once each array's process has ended. Its folder in
//! the runtime directory is removed then.

use std::path::Path;

use super::{err, CliResult};
use crate::array_name::EVERY_ARRAY;
use crate::runtime_dir::{RunningArray, RuntimeDir};
use crate::StopArgs;

pub fn run(args: &StopArgs) -> CliResult {
    let runtime = RuntimeDir::from_env()?;
    let every = args.scan || args.names.iter().any(|n| n == EVERY_ARRAY);
    if every && args.names.iter().any(|n| n != EVERY_ARRAY) {
        return err(format!("give array names, or `{EVERY_ARRAY}` (or --scan) for every array, not both"));
    }
    let arrays = if every {
        runtime.running()?
    } else {
        args.names.iter().map(|n| runtime.find(n)).collect::<Result<Vec<_>, _>>()?
    };
    if arrays.is_empty() {
        eprintln!("uraid: no arrays are running (in {})", runtime.base().display());
        return Ok(());
    }
    // Every array is asked first, so that they stop together.
    let mut asked = Vec::new();
    let mut failed = Vec::new();
    for array in arrays {
        match super::ctl::ask_to_stop(&array.dir.control_socket()) {
            Ok(()) => asked.push(array),
            Err(e) => failed.push(format!("{}: {e}", array.dir.name())),
        }
    }
    for array in asked {
        if let Err(e) = wait_and_report(&runtime, &array) {
            failed.push(e.0);
        }
    }
    match failed.len() {
        0 => Ok(()),
        1 => err(failed.remove(0)),
        _ => err(failed.join("; ")),
    }
}

/// Wait until `array` has ended, say how it ended (its log's last line: the members flushed
/// and marked clean, or why not), and remove its folder.
fn wait_and_report(runtime: &RuntimeDir, array: &RunningArray) -> CliResult {
    let name = array.dir.name();
    super::ctl::wait_stopped(&array.dir.control_socket());
    runtime.wait_ended(&array.dir)?;
    let last = last_line(&array.dir.log_file());
    runtime.remove_ended(&array.dir)?;
    match last {
        // Run in the foreground, the array's messages went to its own standard error.
        None => eprintln!("uraid: stopped {name}"),
        // `serve`'s last word on a stop (see `report_stop`).
        Some(line) if line.starts_with("uraid: stopped after ") && !line.contains("could not be marked clean") => {
            eprintln!("uraid: stopped {name}: {}", line.trim_start_matches("uraid: stopped "))
        }
        Some(line) => return err(format!("{name} ended, but not cleanly: {}", line.trim_start_matches("uraid: "))),
    }
    Ok(())
}

fn last_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines().rev().find(|l| !l.trim().is_empty()).map(str::to_string)
}
