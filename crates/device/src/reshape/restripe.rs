//! The shape a reshape asks for, checked as mdadm (`Grow.c` `analyse_change`) and md
//! (`raid5_check_reshape`, `raid6_check_reshape`) check it before anything changes: more
//! members only, a layout md knows at the array's level (raid4 has only one), a chunk size that
//! is a power of two of at least 4 KiB and divides the members' size, and something to change.

use uraid_layout::{Level, ParityAlgorithm};
use uraid_md::reshape::NewShape;
use uraid_md_format::Superblock1;

use super::{GrowError, ReshapeRequest};

/// The new shape of the array whose reference superblock is `sb` (`old` members, at `level`),
/// as `request` asks, or why it may not be.
pub(super) fn new_shape(
    level: Level,
    sb: &Superblock1,
    old: u32,
    request: &ReshapeRequest,
) -> Result<NewShape, GrowError> {
    let refuse = |why: String| Err(GrowError::Refused(why));
    let raid_disks = request.raid_devices.unwrap_or(old);
    if raid_disks < old {
        return refuse(format!(
            "cannot reduce the number of devices ({old} -> {raid_disks}): shrinking is not supported yet"
        ));
    }
    let layout = match request.layout {
        None => sb.layout,
        Some(0) if level == Level::Raid4 => 0,
        Some(_) if level == Level::Raid4 => {
            return refuse("raid4 keeps parity on the last member: it has no other layout to change to".into())
        }
        Some(number) => {
            let valid = u32::try_from(number).ok().and_then(|n| ParityAlgorithm::from_md(level, n).ok());
            if valid.is_none() {
                return refuse(format!("layout {number} is not a {level} layout md knows"));
            }
            number
        }
    };
    let chunk_sectors = match request.chunk_sectors {
        None => sb.chunksize,
        Some(c) => {
            let kib = c / 2;
            if c == 0 || !c.is_multiple_of(8) {
                return refuse(format!("chunk size {kib}K must be a positive multiple of 4K"));
            }
            if !c.is_power_of_two() {
                return refuse(format!("chunk size {kib}K is not a power of two ({level} needs one)"));
            }
            if !sb.size.is_multiple_of(u64::from(c)) {
                return refuse(format!(
                    "New chunk size ({kib}K) does not evenly divide device size ({}k); shrink the array (--size) to a multiple of it first",
                    sb.size / 2
                ));
            }
            c
        }
    };
    if raid_disks == old && layout == sb.layout && chunk_sectors == sb.chunksize {
        return refuse(if request.layout.is_none() && request.chunk_sectors.is_none() {
            format!("the array already has {old} devices: nothing to do")
        } else {
            format!(
                "the array already has {old} devices, a chunk of {}K and that layout: nothing to change",
                sb.chunksize / 2
            )
        });
    }
    Ok(NewShape { raid_disks, layout, chunk_sectors })
}
