//! `uraid grow --size` and `uraid grow --bitmap`, as mdadm's `--grow` has md do them: the space
//! each member gives the array (`max` or a size), its new part resynced when the array next
//! runs unless `--assume-clean`; an internal write-intent bitmap added (`--bitmap-chunk`) or
//! removed. One change at a time, as mdadm takes them. Given the members of an array uraid
//! runs, its server makes the change (as `uraid ctl NAME grow --size|--bitmap` asks it): it
//! winds down, writes the change as here, and serves the array again.

use uraid_device::md_change::{change_stopped, MdChange, MdChanged};

use super::{err, CliError, CliResult};
use crate::GrowArgs;

pub fn run(args: &GrowArgs) -> CliResult {
    let change = parse(args)?;
    if let Some((name, socket)) = super::served_by::served_by(&args.members) {
        return super::ctl::change_served(&name, &socket, change);
    }
    let done = change_stopped(&args.members, change).map_err(|e| CliError(format!("grow: {e}")))?;
    eprintln!("uraid: {done}");
    if matches!(done, MdChanged::Resized { resync_from: Some(_), .. }) {
        eprintln!(
            "uraid: the resync runs when the array next runs (uraid assemble, uraid resync, or mdadm --assemble)"
        );
    }
    Ok(())
}

/// The one change asked for, checked before any member is opened.
fn parse(args: &GrowArgs) -> CliResult<MdChange> {
    let others = args.raid_devices.is_some()
        || !args.add.is_empty()
        || args.continue_
        || args.level.is_some()
        || args.chunk.is_some()
        || args.layout.is_some()
        || args.array_size.is_some()
        || args.speed_limit_max.is_some();
    if args.bitmap.is_some() && (others || args.size.is_some()) {
        return err("grow: --bitmap changes cannot be used with other changes (one at a time, as mdadm takes them)");
    }
    if args.size.is_some() && others {
        return err("grow: --size cannot be used with other changes (one at a time, as mdadm takes them)");
    }
    super::md_change_words::md_change(
        args.size.as_deref(),
        args.assume_clean,
        args.bitmap.as_deref(),
        args.bitmap_chunk.as_deref(),
    )
}
