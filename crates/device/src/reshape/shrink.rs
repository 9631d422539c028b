//! A reshape onto fewer members: how much of each member the smaller array keeps, and the
//! user's word that the array may shrink. md keeps the component size through such a reshape
//! and moves the data up; where a member has no room after its data for that, the component
//! size gives up one step first, as mdadm's `raid10_reshape` reduces it. mdadm refuses to
//! start unless the array was truncated to the new size first (`--grow --array-size`), so that
//! whoever shrinks it has shrunk what is on it; uraid, on a stopped array, takes that word as
//! `--array-size` given with the reshape.

use uraid_layout::Level;
use uraid_md::reshape::{room, NewShape};
use uraid_md_format::{MemberInfo, Superblock1};

use super::GrowError;

/// Sectors of each member the array uses once reshaped to `to` from the shape `sb` records:
/// the component size, less a step (the larger chunk; a raid10's, times its `copies`) when a
/// reshape run `backwards` onto fewer members finds no room after the data to move it up by
/// one.
pub(super) fn component_size(sb: &Superblock1, to: NewShape, backwards: bool, copies: u32) -> u64 {
    let step = u64::from(sb.chunksize.max(to.chunk_sectors)).max(1) * u64::from(copies);
    if !backwards || to.raid_disks >= sb.raid_disks || room(sb).1 >= step {
        return sb.size;
    }
    (sb.data_size.saturating_sub(step) / step * step).min(sb.size)
}

/// Bytes an array of `level` holds over `raid_disks` members using `component` sectors each in
/// chunks of `chunk` sectors: whole chunks of its data members (a raid10: of its members over
/// its near `copies`, as md's `calc_sectors` counts them).
fn array_bytes(level: Level, raid_disks: u32, component: u64, chunk: u32, copies: u32) -> u64 {
    let chunk = u64::from(chunk.max(1));
    let chunks = match level {
        Level::Raid10 => u64::from(raid_disks) * (component / chunk) / u64::from(copies.max(1)),
        Level::Raid6 => u64::from(raid_disks.saturating_sub(2)) * (component / chunk),
        _ => u64::from(raid_disks.saturating_sub(1)) * (component / chunk),
    };
    chunks * chunk * 512
}

/// Refuse a reshape that makes the array smaller unless `asked` (bytes, `--array-size`) is the
/// size it will have; refuse `--array-size` on one that does not.
pub(super) fn check_array_size(
    level: Level,
    sb: &MemberInfo,
    old_raid_disks: u32,
    to: NewShape,
    component: u64,
    copies: u32,
    asked: Option<u64>,
) -> Result<(), GrowError> {
    let now = array_bytes(level, old_raid_disks, sb.component_sectors, sb.chunk_sectors, copies);
    // Whole steps of the larger chunk of each member, as the reshape moves them.
    let after = array_bytes(level, to.raid_disks, component, sb.chunk_sectors.max(to.chunk_sectors), copies);
    let refuse = |why: String| Err(GrowError::Refused(why));
    match asked {
        _ if after >= now => match asked {
            None => Ok(()),
            Some(_) => refuse(format!(
                "--array-size is the size a reshape onto fewer devices shrinks the array to; this one keeps {}K",
                now / 1024
            )),
        },
        Some(size) if size == after => Ok(()),
        Some(size) => refuse(format!(
            "--array-size={}K is not the size the array will have: {}K (uraid takes --array-size as the word that the array may shrink to exactly that)",
            size / 1024,
            after / 1024
        )),
        None => Err(GrowError::Shrinks { now, after, component_cut: (sb.component_sectors - component) * 512 }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uraid_md_format::create::{plan, CreateSpec};
    use uraid_md_format::{MetadataVersion, Superblock};

    /// The first superblock of a new 1.2 raid5 over five 16 MiB members, chunks of 64K, the
    /// array using `component` sectors of each (all there is when `None`).
    fn superblock(component: Option<u64>) -> Superblock1 {
        let spec = CreateSpec {
            version: MetadataVersion::V1_2,
            level: 5,
            layout: -1,
            chunk_sectors: 128,
            raid_disks: 5,
            array_uuid: [5; 16],
            name: "h:r".into(),
            ctime: 1_700_000_000,
            component_sectors: component,
            bitmap: false,
            data_offset: None,
            bitmap_chunk: None,
        };
        let made = plan(&spec, &[16 << 20; 5], &[[1; 16]; 5]).unwrap();
        let Superblock::V1(sb) = made.superblocks[0].clone() else { unreachable!() };
        sb
    }

    fn to(raid_disks: u32) -> NewShape {
        NewShape { raid_disks, layout: 2, chunk_sectors: 128 }
    }

    #[test]
    fn members_with_room_after_the_data_keep_their_size() {
        let sb = superblock(Some(12 * 2048));
        assert_eq!(component_size(&sb, to(4), true, 1), sb.size);
    }

    #[test]
    fn full_members_give_up_a_step_to_move_the_data_up() {
        let sb = superblock(None);
        let kept = component_size(&sb, to(4), true, 1);
        assert!(kept < sb.size && kept.is_multiple_of(128), "{kept} of {}", sb.size);
        assert!(room(&Superblock1 { size: kept, ..sb.clone() }).1 >= 128, "a step of room after");
        assert_eq!(component_size(&sb, to(5), true, 1), sb.size, "not on the same members");
        assert_eq!(component_size(&sb, to(6), false, 1), sb.size, "not onto more");
    }

    #[test]
    fn a_smaller_array_needs_the_users_word() {
        let sb = superblock(Some(12 * 2048));
        let new_bytes = 3 * sb.size * 512;
        let why = |asked: Option<u64>| match check_array_size(Level::Raid5, &sb.info(), 5, to(4), sb.size, 1, asked) {
            Err(GrowError::Refused(why)) => why,
            other => panic!("not refused: {other:?}"),
        };
        let unsaid = check_array_size(Level::Raid5, &sb.info(), 5, to(4), sb.size, 1, None).unwrap_err().to_string();
        assert!(unsaid.contains("reduce the size of the array from 49152K to 36864K"), "{unsaid}");
        assert!(unsaid.contains("--array-size=36864K") && !unsaid.contains("gives"), "{unsaid}");
        assert!(why(Some(new_bytes - 1024)).contains("is not the size the array will have: 36864K"));
        assert!(check_array_size(Level::Raid5, &sb.info(), 5, to(4), sb.size, 1, Some(new_bytes)).is_ok());
        assert!(check_array_size(Level::Raid5, &sb.info(), 5, to(5), sb.size, 1, None).is_ok(), "the same size");
        assert!(matches!(
            check_array_size(Level::Raid5, &sb.info(), 5, to(6), sb.size, 1, Some(new_bytes)),
            Err(GrowError::Refused(why)) if why.contains("onto fewer devices")
        ));
    }
}
