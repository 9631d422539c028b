//! `uraid status` (or `stat`): every array running under a name, as /proc/mdstat lists md's
//! arrays (`md_NAME : active raid5 ...`), or as JSON with where each one's sockets, pid and
//! log are.

use serde_json::{json, Value};

use super::{emit, CliResult};
use crate::runtime_dir::{RunningArray, RuntimeDir};
use crate::StatusArgs;

pub fn run(args: &StatusArgs) -> CliResult {
    let runtime = RuntimeDir::from_env()?;
    let arrays = if args.names.is_empty() {
        runtime.running()?
    } else {
        args.names.iter().map(|n| runtime.find(n)).collect::<Result<Vec<_>, _>>()?
    };
    let mut answered = Vec::new();
    for array in arrays {
        match super::ctl::status(&array.dir.control_socket()) {
            Ok(status) => answered.push((array, status)),
            // Starting (not answering yet) or stopping (no longer): not listed, as md lists
            // an array only while it is active.
            Err(e) => eprintln!("uraid: {}: {e}", array.dir.name()),
        }
    }
    if args.json {
        let list: Vec<Value> = answered.iter().map(|(a, s)| entry_json(a, s)).collect();
        return emit(&format!("{}\n", serde_json::to_string_pretty(&list).expect("JSON")));
    }
    let entries: Vec<(String, Value)> =
        answered.into_iter().map(|(a, s)| (format!("md_{}", a.dir.name()), s)).collect();
    emit(&crate::mdstat::mdstat(&entries))
}

/// One running array for `status --json`: its name, where it is, and its status as `uraid ctl
/// NAME status --json` prints it.
fn entry_json(array: &RunningArray, status: &Value) -> Value {
    json!({
        "name": array.dir.name(),
        "pid": array.pid,
        "nbd_socket": array.dir.nbd_socket(),
        "nbd_uri": array.dir.nbd_uri(),
        "control_socket": array.dir.control_socket(),
        "log": array.dir.log_file(),
        "status": status,
    })
}
