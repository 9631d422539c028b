//! `uraid grow --size` and `uraid grow --bitmap` on a stopped md array, as mdadm's `--grow`
//! has md do them: the space each member gives the array (`max` or a size), its new part
//! resynced when the array next runs unless `--assume-clean`; an internal write-intent bitmap
//! added (`--bitmap-chunk`) or removed. One change at a time, as mdadm takes them. Members of an
//! array uraid runs are refused: the running server holds their superblocks.

use uraid_device::md_change::{change_stopped, MdChange, MdChanged};
use uraid_md::resize::SizeRequest;

use super::{err, CliError, CliResult};
use crate::size::parse_size;
use crate::GrowArgs;

pub fn run(args: &GrowArgs) -> CliResult {
    let change = parse(args)?;
    if let Some((name, _)) = super::served_by::served_by(&args.members) {
        return err(format!(
            "grow: array {name} is running: stop it first (uraid stop {name}); --size and --bitmap change stopped arrays"
        ));
    }
    match change_stopped(&args.members, change).map_err(|e| CliError(format!("grow: {e}")))? {
        MdChanged::SizeUnchanged { sectors } => eprintln!("uraid: component size unchanged at {}K", sectors / 2),
        MdChanged::Resized { new, resync_from, .. } => {
            eprintln!("uraid: component size has been set to {}K", new / 2);
            match resync_from {
                Some(from) => eprintln!(
                    "uraid: the new space is resynced from {}K when the array next runs (uraid assemble, uraid resync, or mdadm --assemble)",
                    from / 2
                ),
                None => eprintln!("uraid: the new space is recorded in sync (--assume-clean)"),
            }
        }
        MdChanged::BitmapAdded { chunk } => {
            eprintln!("uraid: internal bitmap added, {}K of each member per bit", chunk / 1024)
        }
        MdChanged::BitmapRemoved => eprintln!("uraid: internal bitmap removed"),
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
    if let Some(text) = &args.size {
        let request = if text == "max" {
            SizeRequest::Max
        } else {
            let bytes = parse_size(text, 1024).map_err(|e| CliError(format!("grow: --size={text}: {e}")))?;
            if bytes == 0 || bytes % 1024 != 0 {
                return err(format!("grow: --size={text} is not a positive whole number of KiB (or max)"));
            }
            SizeRequest::Sectors(bytes / 512)
        };
        return Ok(MdChange::Size { request, assume_clean: args.assume_clean });
    }
    match args.bitmap.as_deref() {
        Some("internal") => {
            let chunk = match &args.bitmap_chunk {
                Some(c) => Some(parse_size(c, 1024).map_err(|e| CliError(format!("grow: --bitmap-chunk={c}: {e}")))?),
                None => None,
            };
            Ok(MdChange::AddBitmap { chunk })
        }
        Some("none") if args.bitmap_chunk.is_some() => err("grow: --bitmap-chunk goes with --bitmap=internal"),
        Some("none") => Ok(MdChange::RemoveBitmap),
        Some(other) => err(format!(
            "grow: --bitmap={other}: only internal and none are supported (no bitmap files or clustered bitmaps)"
        )),
        None => err("grow: nothing to change"),
    }
}
