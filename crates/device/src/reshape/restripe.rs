//! The shape a reshape asks for, checked as mdadm (`Grow.c` `analyse_change`) and md
//! (`raid5_check_reshape`, `raid6_check_reshape`) check it before anything changes: at least
//! two members (raid6: four), a layout md knows at the array's level (raid4 has only one), a
//! chunk size that is a power of two of at least 4 KiB and divides the members' size, and
//! something to change. A raid10 (`raid10_check_reshape`) is reshaped in a near layout onto
//! more or fewer members only, its copies, chunk and layout kept.

use uraid_layout::{Level, ParityAlgorithm, Raid10Format};
use uraid_md::reshape::NewShape;
use uraid_md_format::MemberInfo;

use super::{GrowError, ReshapeRequest};

/// The new shape of the array whose reference superblock says `sb` (`old` members, at `level`),
/// as `request` asks, or why it may not be.
pub(super) fn new_shape(
    level: Level,
    sb: &MemberInfo,
    old: u32,
    request: &ReshapeRequest,
) -> Result<NewShape, GrowError> {
    let refuse = |why: String| Err(GrowError::Refused(why));
    if level == Level::Raid10 {
        return raid10_shape(sb, old, request);
    }
    let raid_disks = request.raid_devices.unwrap_or(old);
    // md's `raid5_check_reshape` and `raid6_check_reshape`: raid4/5 keep two members, raid6 four.
    let least = if level == Level::Raid6 { 4 } else { 2 };
    if raid_disks < least {
        return refuse(format!("a {level} array needs at least {least} devices; {raid_disks} asked for"));
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
        None => sb.chunk_sectors,
        Some(c) => {
            let kib = c / 2;
            if c == 0 || !c.is_multiple_of(8) {
                return refuse(format!("chunk size {kib}K must be a positive multiple of 4K"));
            }
            if !c.is_power_of_two() {
                return refuse(format!("chunk size {kib}K is not a power of two ({level} needs one)"));
            }
            if !sb.component_sectors.is_multiple_of(u64::from(c)) {
                let used = sb.component_sectors / 2;
                return refuse(format!(
                    "New chunk size ({kib}K) does not evenly divide device size ({used}k): choose a chunk that divides the {used}K each member gives the array (uraid does not shrink it to fit)"
                ));
            }
            c
        }
    };
    if raid_disks == old && layout == sb.layout && chunk_sectors == sb.chunk_sectors {
        return refuse(if request.layout.is_none() && request.chunk_sectors.is_none() {
            format!("the array already has {old} devices: nothing to do")
        } else {
            format!(
                "the array already has {old} devices, a chunk of {}K and that layout: nothing to change",
                sb.chunk_sectors / 2
            )
        });
    }
    Ok(NewShape { raid_disks, layout, chunk_sectors })
}

/// The new shape of a raid10 (md's `raid10_check_reshape`, as far as uraid reshapes one): a
/// near layout onto more or fewer members, its copies, chunk and layout kept.
fn raid10_shape(sb: &MemberInfo, old: u32, request: &ReshapeRequest) -> Result<NewShape, GrowError> {
    let refuse = |why: String| Err(GrowError::Refused(why));
    let Some(copies) = Raid10Format::near_copies(sb.layout) else {
        return refuse(
            "Cannot Grow RAID10 with far/offset layout: uraid reshapes a raid10 in a near layout only".into(),
        );
    };
    if request.layout.is_some_and(|l| l != sb.layout) || request.chunk_sectors.is_some_and(|c| c != sb.chunk_sectors) {
        return refuse(
            "uraid reshapes a raid10 onto more or fewer devices only: its layout and chunk size stay".into(),
        );
    }
    let Some(raid_disks) = request.raid_devices else {
        return refuse("give --raid-devices, the number of devices the raid10 is to have".into());
    };
    if raid_disks == old {
        return refuse(format!("the array already has {old} devices: nothing to do"));
    }
    if raid_disks < copies {
        return refuse(format!("a raid10 of {copies} near copies needs at least {copies} devices"));
    }
    Ok(NewShape { raid_disks, layout: sb.layout, chunk_sectors: sb.chunk_sectors })
}

#[cfg(test)]
mod tests {
    use super::*;
    use uraid_md_format::create::{plan, CreateSpec};
    use uraid_md_format::MetadataVersion;

    /// The first superblock of a new 1.2 array of `level` over four 16 MiB members, chunks of
    /// 128 sectors.
    fn superblock(level: i32) -> MemberInfo {
        let spec = CreateSpec {
            version: MetadataVersion::V1_2,
            level,
            layout: -1,
            chunk_sectors: 128,
            raid_disks: 4,
            array_uuid: [5; 16],
            name: "h:r".into(),
            ctime: 1_700_000_000,
            component_sectors: None,
            bitmap: false,
            data_offset: None,
            bitmap_chunk: None,
        };
        let made = plan(&spec, &[16 << 20; 4], &[[1; 16]; 4]).unwrap();
        made.superblocks[0].info()
    }

    fn ask(raid_devices: Option<u32>, layout: Option<i32>, chunk_sectors: Option<u32>) -> ReshapeRequest {
        ReshapeRequest { raid_devices, layout, chunk_sectors, array_size: None }
    }

    fn refusal(level: Level, sb: &MemberInfo, request: ReshapeRequest) -> String {
        match new_shape(level, sb, 4, &request) {
            Err(GrowError::Refused(why)) => why,
            other => panic!("{request:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn what_is_not_given_stays() {
        let sb = superblock(5);
        let to = new_shape(Level::Raid5, &sb, 4, &ask(None, None, Some(256))).unwrap();
        assert_eq!(to, NewShape { raid_disks: 4, layout: sb.layout, chunk_sectors: 256 });
        let to = new_shape(Level::Raid5, &sb, 4, &ask(Some(5), Some(1), None)).unwrap();
        assert_eq!(to, NewShape { raid_disks: 5, layout: 1, chunk_sectors: 128 });
    }

    #[test]
    fn md_and_mdadm_refusals() {
        let r5 = superblock(5);
        assert!(refusal(Level::Raid5, &r5, ask(None, None, Some(192))).contains("not a power of two"));
        assert!(refusal(Level::Raid5, &r5, ask(None, None, Some(4))).contains("multiple of 4K"));
        assert!(refusal(Level::Raid5, &r5, ask(None, Some(17), None)).contains("not a raid5 layout"));
        assert!(refusal(Level::Raid5, &r5, ask(Some(1), None, None)).contains("at least 2 devices"));
        assert!(refusal(Level::Raid6, &superblock(6), ask(Some(3), None, None)).contains("at least 4 devices"));
        assert_eq!(new_shape(Level::Raid5, &r5, 4, &ask(Some(3), None, None)).unwrap().raid_disks, 3, "fewer");
        assert!(refusal(Level::Raid5, &r5, ask(None, Some(r5.layout), Some(128))).contains("nothing to change"));
        assert!(refusal(Level::Raid5, &r5, ask(Some(4), None, None)).contains("nothing to do"));
        let too_big = (r5.component_sectors as u32).next_power_of_two() * 2;
        assert!(refusal(Level::Raid5, &r5, ask(None, None, Some(too_big))).contains("does not evenly divide"));
        let r4 = superblock(4);
        assert!(refusal(Level::Raid4, &r4, ask(None, Some(2), None)).contains("raid4 keeps parity"));
        let r6 = superblock(6);
        assert_eq!(new_shape(Level::Raid6, &r6, 4, &ask(None, Some(17), None)).unwrap().layout, 17);
    }
}
