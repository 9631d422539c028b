//! `uraid grow --chunk=SIZE` and `--layout=NAME`: the words of a restripe turned into what the
//! reshape is asked to change. A bare chunk number is KiB, as mdadm reads it; layout names are
//! `create`'s (mdadm's), read at the array's level, so raid5 takes mdadm's DDF names as their
//! raid5 equivalents and raid6 has its `-6` forms. Whether the change may be made is the
//! reshape's to say (`uraid_device::reshape`), before anything is written.

use std::path::PathBuf;

use uraid_device::reshape::ReshapeRequest;
use uraid_layout::{Level, ParityAlgorithm};

use super::{err, open_and_probe, CliError, CliResult};
use crate::size::parse_size;
use crate::GrowArgs;

/// The reshape `args` ask of the array of `members`.
pub fn request(args: &GrowArgs, members: &[PathBuf]) -> CliResult<ReshapeRequest> {
    let chunk_sectors = args.chunk.as_deref().map(chunk_sectors).transpose()?;
    let layout = match &args.layout {
        None => None,
        Some(name) => Some(layout_number(name, members)?),
    };
    let array_size = args.array_size.as_deref().map(array_size).transpose()?;
    Ok(ReshapeRequest { raid_devices: args.raid_devices, layout, chunk_sectors, array_size })
}

/// The size `text` gives as `--array-size`, in bytes (a bare number is KiB, as mdadm reads it).
pub fn array_size(text: &str) -> CliResult<u64> {
    parse_size(text, 1024).map_err(|e| CliError(format!("grow: --array-size: {e}")))
}

/// The chunk size `text` asks for, in sectors (a bare number is KiB, as mdadm reads it).
pub fn chunk_sectors(text: &str) -> CliResult<u32> {
    let bytes = parse_size(text, 1024).map_err(CliError)?;
    if bytes == 0 || !bytes.is_multiple_of(4096) {
        return err(format!("grow: chunk size {text} must be a positive multiple of 4K"));
    }
    u32::try_from(bytes / 512).map_err(|_| CliError(format!("grow: chunk size {text} is too large")))
}

/// md's number for layout `name` at the level of the array `members` belong to (the first
/// member's superblock says which).
fn layout_number(name: &str, members: &[PathBuf]) -> CliResult<i32> {
    let Some(first) = members.first() else { return err("grow: no members given") };
    let (_, probed) = open_and_probe(first)?;
    let Some(probed) = probed else {
        return err(format!("grow: {}: no md superblock found", first.display()));
    };
    let level = Level::from_md(probed.superblock.info().level)
        .map_err(|e| CliError(format!("grow: {}: {e}", first.display())))?;
    layout_at(level, name)
}

/// md's number for layout `name` at `level`.
pub fn layout_at(level: Level, name: &str) -> CliResult<i32> {
    match level {
        Level::Raid4 => match name {
            "parity-last" | "default" => Ok(0),
            _ => {
                err(format!("grow: --layout={name}: raid4 keeps parity on the last member; only parity-last is valid"))
            }
        },
        Level::Raid5 | Level::Raid6 => Ok(ParityAlgorithm::parse(level, name)
            .map_err(|e| CliError(format!("grow: --layout={name}: {e}")))?
            .to_md() as i32),
        other => {
            err(format!("grow: --layout: uraid restripes raid4, raid5 and raid6 arrays only; this one is {other}"))
        }
    }
}
