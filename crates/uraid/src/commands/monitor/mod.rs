//! `uraid monitor`: report events of the arrays running under names, as `mdadm --monitor`
//! does, by looking at every array's status every `--delay` seconds (mdadm polls every 60 s by
//! default; uraid every 2 s, since a look costs a few microseconds). Each event is printed as a
//! line (`Event: Fail, array data, device /srv/d1.img`) or as JSON, or with `--program` given to
//! the program as mdadm gives it: `PROG EVENT ARRAY [DEVICE]` (the line is then not printed, as
//! mdadm prints it only when no program, mail or syslog takes it). Which events there are and
//! when is `events`.

pub mod events;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use events::{Event, Look, Snapshot};

use super::{emit, err, CliResult};
use crate::array_name;
use crate::runtime_dir::RuntimeDir;
use crate::MonitorArgs;

pub fn run(args: &MonitorArgs) -> CliResult {
    if !(args.delay.is_finite() && args.delay > 0.0) {
        return err(format!("--delay={}: give a number of seconds above 0", args.delay));
    }
    for name in &args.names {
        array_name::check(name)?;
    }
    let runtime = RuntimeDir::from_env()?;
    let mut known: BTreeMap<String, Snapshot> = BTreeMap::new();
    let mut first = true;
    loop {
        let now = look(&runtime, &args.names)?;
        let names: BTreeSet<&String> = known.keys().chain(now.keys()).collect();
        let look = Look { first, test: args.test, increment: u64::from(args.increment) };
        for name in names {
            for event in events::events(name, known.get(name), now.get(name), look) {
                report(&event, args)?;
            }
        }
        known = now;
        first = false;
        if args.oneshot {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs_f64(args.delay));
    }
}

/// A look at every running array (those named, if any are): an array whose control socket
/// does not answer (still starting, or stopping) is not running yet, or any more.
fn look(runtime: &RuntimeDir, only: &[String]) -> CliResult<BTreeMap<String, Snapshot>> {
    let mut seen = BTreeMap::new();
    for array in runtime.running()? {
        let name = array.dir.name();
        if !only.is_empty() && !only.iter().any(|n| n == name) {
            continue;
        }
        if let Ok(status) = super::ctl::status(&array.dir.control_socket()) {
            seen.insert(name.to_string(), Snapshot::from_status(&status));
        }
    }
    Ok(seen)
}

/// Print the event, or run the program for it, as mdadm does: mdadm prints an event only when
/// nothing else takes it (no program), and waits for the program, so that events reach it in
/// order. JSON, asked for, is always printed. A program that cannot be run or fails is said on
/// stderr; monitoring goes on.
fn report(event: &Event, args: &MonitorArgs) -> CliResult {
    if args.json {
        emit(&format!("{}\n", event.json()))?;
    } else if args.program.is_none() {
        emit(&format!("{}\n", event.line()))?;
    }
    if let Some(program) = &args.program {
        let mut command = Command::new(program);
        command.arg(event.kind.name()).arg(&event.array).args(event.detail());
        match command.status() {
            Ok(status) if status.success() => {}
            Ok(status) => eprintln!("uraid: {} for {}: {status}", program.display(), event.kind.name()),
            Err(e) => eprintln!("uraid: running {} for {}: {e}", program.display(), event.kind.name()),
        }
    }
    Ok(())
}
