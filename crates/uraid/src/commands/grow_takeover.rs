//! `uraid grow --level` (md's takeovers, which move no data) and `uraid grow --raid-devices` on
//! a raid1, on a stopped array: the superblocks are rewritten as md leaves them, new slots take
//! the `--add` devices (recorded as being rebuilt: `uraid add MEMBERS...` rebuilds them now, the
//! next `uraid assemble` or the kernel at its next start) or stay missing. Where md takes the
//! level over only from another layout, or the layout asked for is not the one the takeover
//! gives, the array is restriped before or after it here, as mdadm does. An array that
//! `uraid assemble` runs is changed by its server instead (as `uraid ctl NAME grow --level` or
//! `-n N` asks), which rebuilds the new slots at once and refuses a change that needs a
//! restripe, saying the steps.

use std::path::PathBuf;

use uraid_device::reshape::{Grow, ReshapeRequest};
use uraid_device::service::SpeedLimits;
use uraid_device::takeover::{current_level, restripe_first, take_over, TakeoverDone};
use uraid_layout::Level;
use uraid_md::takeover::{is_takeover, TakeoverRequest};

use super::{err, CliError, CliResult};
use crate::GrowArgs;

/// What `args` ask for, in the takeover rules' terms.
fn request(args: &GrowArgs) -> CliResult<TakeoverRequest> {
    let level = match &args.level {
        Some(text) => Some(parse_level(text)?),
        None => None,
    };
    Ok(TakeoverRequest {
        level,
        raid_devices: args.raid_devices,
        layout: args.layout.clone(),
        added: args.add.len() as u32,
        force: args.force,
        // A stopped array is restriped here after the takeover where the layout asks for it.
        restripe: true,
    })
}

fn parse_level(text: &str) -> CliResult<Level> {
    Level::parse(text).map_err(|e| CliError(format!("grow: --level={text}: {e}")))
}

/// Whether `args` ask for a takeover or a raid1 device count change (handled here), rather
/// than a restripe of a raid4/5/6 (`grow`'s own).
pub fn applies(args: &GrowArgs) -> CliResult<bool> {
    if args.level.is_none() && args.raid_devices.is_none() {
        return Ok(false);
    }
    if args.continue_ {
        if args.level.is_some() {
            return err("grow: --continue goes on with a reshape as recorded; give --level without it");
        }
        return Ok(false);
    }
    let request = request(args)?;
    let level = current_level(&args.members).map_err(|e| CliError(format!("grow: {e}")))?;
    Ok(is_takeover(level, &request))
}

pub fn run(args: &GrowArgs) -> CliResult {
    for (given, what) in [
        (&args.chunk, "--chunk"),
        (&args.size, "--size"),
        (&args.bitmap, "--bitmap"),
        (&args.array_size, "--array-size"),
        (&args.speed_limit_max, "--speed-limit-max"),
    ] {
        if given.is_some() {
            return err(format!(
                "grow: {what} cannot be given with a level change or a raid1 device count change; change one thing at a time"
            ));
        }
    }
    if let Some((name, socket)) = super::served_by::served_by(&args.members) {
        // Its server changes the running array, and rebuilds the new slots.
        let answer = if args.level.is_some() {
            super::ctl::request_takeover(&socket, &request(args)?, &args.add)?
        } else {
            let copies = ReshapeRequest { raid_devices: args.raid_devices, ..ReshapeRequest::default() };
            let body = super::ctl::grow_request(&copies, &args.add, args.force);
            super::ctl::request(&socket, body)?
        };
        eprintln!("uraid: {}", answer["done"].as_str().unwrap_or("changed"));
        if !args.add.is_empty() {
            eprintln!(
                "uraid: the new slots are rebuilt in the background; `uraid ctl {name} wait` waits for it to end"
            );
        }
        return Ok(());
    }
    let request = request(args)?;
    if let Some(layout) = restripe_first(&args.members, &request).map_err(|e| CliError(format!("grow: {e}")))? {
        restripe_before(args, layout)?;
    }
    let done = take_over(&args.members, &args.add, &request).map_err(|e| CliError(format!("grow: {e}")))?;
    report(&done, &args.members, &args.add);
    match done.change.restripe_to {
        Some(layout) => restripe_after(&done, &args.members, &args.add, layout),
        None => Ok(()),
    }
}

fn listed(paths: &[PathBuf]) -> String {
    paths.iter().map(|m| m.display().to_string()).collect::<Vec<_>>().join(" ")
}

/// Restripe the array to `layout` (md's number, at its own level) before the level change, as
/// mdadm does where md takes the new level over only from that layout (a raid6 to raid5 from
/// the -6 layout, a raid5 to raid0 or raid4 from parity-last). Cut short, the array is left as
/// any reshape is: `uraid grow --continue` (or the kernel) finishes the restripe, and the same
/// `uraid grow --level` then makes the change.
fn restripe_before(args: &GrowArgs, layout: i32) -> CliResult {
    let members = &args.members;
    Grow::start_reshape(members, &[], ReshapeRequest { layout: Some(layout), ..ReshapeRequest::default() })
        .map_err(|e| CliError(format!("grow: the restripe the level change needs first did not start: {e}")))?;
    let mut grow = Grow::resume(members)?;
    eprintln!(
        "uraid: reshape of {} {} starting, before the level change (as mdadm restripes first)",
        grow.name(),
        grow.change()
    );
    super::reshape_run::reshape(&mut grow, None, members).map_err(|e| {
        CliError(format!(
            "{}; once the restripe is finished, the same uraid grow --level={} {} changes the level",
            e.0,
            args.level.as_deref().unwrap_or("?"),
            listed(members)
        ))
    })
}

/// The rest of a takeover whose layout asked for needs a restripe after it (raid5 to a normal
/// raid6, raid0 or raid4 to a raid5 other than parity-last, as mdadm's do): rebuild the device
/// the takeover added (Q, or parity), then restripe the array to `layout` (md's number). Each
/// step leaves an array md reads: cut short, the rebuild resumes at the next start (`uraid add`,
/// `assemble`, or the kernel), and the restripe goes on with `uraid grow --continue`.
fn restripe_after(done: &TakeoverDone, members: &[PathBuf], added: &[PathBuf], layout: i32) -> CliResult {
    let all: Vec<PathBuf> = members.iter().chain(added).cloned().collect();
    let level = done.change.level;
    let kept =
        uraid_md::layout_name(level, done.change.layout).unwrap_or_else(|| "that keeps the data in place".into());
    if !done.rebuilding.is_empty() {
        eprintln!("uraid: rebuilding the new device before the restripe");
        let array = super::assemble_for_service(&all, true)?;
        super::add::rebuild(array, SpeedLimits::default(), &[]).map_err(|e| {
            CliError(format!(
                "{}; the array is {level} in layout {kept}; uraid add {} resumes the rebuild, then uraid grow --layout=... {} restripes it",
                e.0,
                listed(&all),
                listed(&all)
            ))
        })?;
    }
    let request = ReshapeRequest { layout: Some(layout), ..ReshapeRequest::default() };
    Grow::start_reshape(&all, &[], request).map_err(|e| {
        CliError(format!("grow: the array is {level} in layout {kept}, but the restripe did not start: {e}"))
    })?;
    let mut grow = Grow::resume(&all)?;
    eprintln!("uraid: reshape of {} {} starting", grow.name(), grow.change());
    super::reshape_run::reshape(&mut grow, None, &all)
}

/// Say what changed, and what is left to do.
fn report(done: &TakeoverDone, members: &[PathBuf], added: &[PathBuf]) {
    for line in done.lines() {
        eprintln!("uraid: {line}");
    }
    if !done.rebuilding.is_empty() && done.change.restripe_to.is_none() {
        let all: Vec<String> = members.iter().chain(added).map(|m| m.display().to_string()).collect();
        eprintln!(
            "uraid: uraid add {} rebuilds it now, uraid assemble (or the kernel) at the next start",
            all.join(" ")
        );
    }
}
