//! `uraid grow --size` and `uraid grow --bitmap`, as mdadm's `--grow` has md do them: the space
//! each member gives the array (`max` or a size), its new part resynced when the array next
//! runs unless `--assume-clean`; an internal write-intent bitmap added (`--bitmap-chunk`) or
//! removed. One change at a time, as mdadm takes them. Given the members of an array uraid
//! runs, its server makes the change (as `uraid ctl NAME grow --size|--bitmap` asks it): it
//! winds down, writes the change as here, and serves the array again.

use serde_json::{json, Value};
use uraid_device::md_change::{change_stopped, MdChange, MdChanged};
use uraid_md::resize::SizeRequest;

use super::{err, CliError, CliResult};
use crate::size::parse_size;
use crate::GrowArgs;

pub fn run(args: &GrowArgs) -> CliResult {
    let change = parse(args)?;
    if let Some((name, socket)) = super::served_by::served_by(&args.members) {
        return change_served(&name, &socket, change);
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
    md_change(args.size.as_deref(), args.assume_clean, args.bitmap.as_deref(), args.bitmap_chunk.as_deref())
}

/// The size or bitmap change the words of `--size` (with `--assume-clean`) or `--bitmap` (with
/// `--bitmap-chunk`) ask for: one of them, as mdadm takes them.
pub fn md_change(
    size: Option<&str>,
    assume_clean: bool,
    bitmap: Option<&str>,
    bitmap_chunk: Option<&str>,
) -> CliResult<MdChange> {
    if size.is_some() && bitmap.is_some() {
        return err("grow: --bitmap changes cannot be used with other changes (one at a time, as mdadm takes them)");
    }
    if let Some(text) = size {
        let request = if text == "max" {
            SizeRequest::Max
        } else {
            let bytes = parse_size(text, 1024).map_err(|e| CliError(format!("grow: --size={text}: {e}")))?;
            if bytes == 0 || bytes % 1024 != 0 {
                return err(format!("grow: --size={text} is not a positive whole number of KiB (or max)"));
            }
            SizeRequest::Sectors(bytes / 512)
        };
        return Ok(MdChange::Size { request, assume_clean });
    }
    match bitmap {
        Some("internal") => {
            let chunk = match bitmap_chunk {
                Some(c) => Some(parse_size(c, 1024).map_err(|e| CliError(format!("grow: --bitmap-chunk={c}: {e}")))?),
                None => None,
            };
            Ok(MdChange::AddBitmap { chunk })
        }
        Some("none") if bitmap_chunk.is_some() => err("grow: --bitmap-chunk goes with --bitmap=internal"),
        Some("none") => Ok(MdChange::RemoveBitmap),
        Some(other) => err(format!(
            "grow: --bitmap={other}: only internal and none are supported (no bitmap files or clustered bitmaps)"
        )),
        None => err("grow: nothing to change"),
    }
}

/// `change` asked of the running array `name` through its control socket `socket`.
pub fn change_served(name: &str, socket: &std::path::Path, change: MdChange) -> CliResult {
    let answer = super::ctl::request(socket, change_body(change))?;
    eprintln!("uraid: {name}: {}", answer["done"].as_str().unwrap_or("changed"));
    if matches!(change, MdChange::Size { .. }) {
        eprintln!("uraid: {name}: the new space is served once the array is started again (uraid stop {name}; uraid assemble)");
    }
    Ok(())
}

/// The control socket's `change` request for `change`.
fn change_body(change: MdChange) -> Value {
    match change {
        MdChange::Size { request: SizeRequest::Max, assume_clean } => {
            json!({"op": "change", "size": "max", "assume_clean": assume_clean})
        }
        MdChange::Size { request: SizeRequest::Sectors(sectors), assume_clean } => {
            json!({"op": "change", "size": sectors, "assume_clean": assume_clean})
        }
        MdChange::AddBitmap { chunk } => json!({"op": "change", "bitmap": "internal", "bitmap_chunk": chunk}),
        MdChange::RemoveBitmap => json!({"op": "change", "bitmap": "none"}),
    }
}
