//! `uraid grow`: mdadm's `--grow --raid-devices=N` on a stopped raid4/5/6 array (or onto more
//! members, a raid10 in a near layout), the new
//! devices given with `--add` (mdadm adds them as spares first, then grows), or fewer with
//! `--array-size` (the size it shrinks to, which mdadm wants set first), `--chunk` and
//! `--layout` (a restripe, on the same members or with the new ones), and `--continue`
//! (mdadm's `--grow --continue`) for a reshape left part-way, by uraid or by the kernel. The
//! reshape runs in the foreground with a progress bar on a terminal, records its position as
//! md does, and stops cleanly on SIGINT or SIGTERM (the next `--continue`, or the kernel, goes
//! on from there). Given the members of an array `uraid assemble` runs, the running server
//! grows it instead, in the background, as `uraid ctl NAME grow` asks it (more members, or
//! fewer with `--array-size`, another chunk or layout). `--size` and
//! `--bitmap` go to `grow_size_bitmap`, level changes and a raid1's device count to
//! `grow_takeover`; what else md's `--grow` does is refused, naming it.

use uraid_device::reshape::{Grow, ReshapeRequest};

use super::{err, CliError, CliResult};
use crate::size::parse_size;
use crate::GrowArgs;

pub fn run(args: &GrowArgs) -> CliResult {
    if let Some(file) = &args.backup_file {
        return err(format!(
            "grow: --backup-file={}: uraid takes no backup file; a grow that cannot move the data offset (0.90, 1.0) keeps the backup of its critical section on the added devices, as mdadm does without one; leave --backup-file out (nothing was written). A shrink or restripe that would need one is refused",
            file.display()
        ));
    }
    if args.size.is_some() || args.bitmap.is_some() {
        return super::grow_size_bitmap::run(args);
    }
    // Level changes and raid1's device count: md's takeovers, which move no data.
    if super::grow_takeover::applies(args)? {
        return super::grow_takeover::run(args);
    }
    if args.array_size.is_some() && args.raid_devices.is_none() {
        return err(
            "grow: --array-size goes with --raid-devices onto fewer devices (the size the array shrinks to); uraid keeps no array size apart from its members' (use --size for that)",
        );
    }
    let limit = match &args.speed_limit_max {
        Some(max) => Some(parse_size(max, 1).map_err(CliError)?.max(1)),
        None => None,
    };
    // Members of an array uraid is running: the running server grows it, in the background.
    if let Some((name, socket)) = super::served_by::served_by(&args.members) {
        return grow_served(&name, &socket, args, limit);
    }
    let restripe = args.chunk.is_some() || args.layout.is_some();
    match (args.raid_devices.is_some() || restripe, args.continue_) {
        (true, true) => {
            return err(
                "grow: give --raid-devices, --chunk or --layout to start a reshape, or --continue to go on with one, not both",
            )
        }
        (false, false) => {
            return err(
                "grow: nothing to change: give --raid-devices=N (with --add for the new devices), --chunk, --layout, or --continue",
            )
        }
        (true, false) => {
            let request = super::grow_restripe::request(args, &args.members)?;
            Grow::start_reshape(&args.members, &args.add, request)?;
            for dev in &args.add {
                eprintln!("uraid: added {}", dev.display());
            }
        }
        (false, true) => {
            if !args.add.is_empty() {
                return err("grow: --continue takes every member, the added ones included, and no --add");
            }
        }
    }
    let mut members = args.members.clone();
    if !args.continue_ {
        members.extend(args.add.iter().cloned());
    }
    if args.continue_ && Grow::settle_end_at(&members)? {
        eprintln!("uraid: the reshape had ended; its end is now recorded on every member");
        return Ok(());
    }
    let mut grow = Grow::resume(&members)?;
    if grow.critical_section() > 0 && !args.continue_ {
        eprintln!(
            "uraid: no room to move the data offset: the reshape runs in place; its critical section ({}K) was backed up on the added devices first, as mdadm backs it up",
            grow.critical_section() / 1024
        );
    }
    let (done, total) = grow.progress();
    eprintln!(
        "uraid: reshape of {} {} {} at {}K of {}K",
        grow.name(),
        grow.change(),
        if done == 0 { "starting" } else { "continuing" },
        done / 1024,
        total / 1024
    );
    super::reshape_run::reshape(&mut grow, limit, &members)
}

/// Grow the running array `name` (its control socket `socket`) as `uraid ctl NAME grow` does.
fn grow_served(name: &str, socket: &std::path::Path, args: &GrowArgs, limit: Option<u64>) -> CliResult {
    if args.continue_ {
        return err(format!(
            "grow: array {name} is running: it continues its reshape itself (uraid status shows it); nothing to continue here"
        ));
    }
    let request = super::grow_restripe::request(args, &args.members)?;
    if request == ReshapeRequest::default() {
        return err(
            "grow: nothing to change: give --raid-devices=N (with --add for the new devices), --chunk or --layout",
        );
    }
    let body = super::ctl::grow_request(&request, &args.add, false);
    let answer = super::ctl::request(socket, body)?;
    eprintln!("uraid: {name}: {}", answer["done"].as_str().unwrap_or("reshape started"));
    // Only once the grow is accepted: a refused grow leaves the array's limits as they were.
    if let Some(max) = limit {
        super::ctl::request(socket, serde_json::json!({"op": "speed-limit", "max": max})).map_err(|e| {
            CliError(format!("grow: array {name}: the reshape started, but its speed limit was not set: {}", e.0))
        })?;
    }
    eprintln!("uraid: the reshape runs in the background; `uraid ctl {name} wait` waits for it to end");
    Ok(())
}
