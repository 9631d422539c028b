//! What `Grow::resume_on` refuses to take up, with nothing written: superblocks whose reshape
//! record cannot be right (a shrink's position past the end of the array it shrinks to; a data
//! offset moving against the reshape's direction, or by different amounts on different
//! members), as a torn or hand-edited record would leave them.

mod common;

use std::sync::Arc;

use common::{as_dyn, filled_members};
use uraid_device::reshape::{Grow, GrowError, ReshapeRequest};
use uraid_device::{MemberDevice, MemoryDevice};
use uraid_md_format::sb1::Superblock1;
use uraid_md_format::MetadataVersion;

const MEMBER_BYTES: u64 = 4 << 20;
/// Where a 1.2 superblock sits on its member.
const SB_AT: u64 = 4096;

/// A raid5 of `n` members holding a pattern.
fn raid5(n: usize) -> Vec<Arc<MemoryDevice>> {
    filled_members(5, n, 128, MEMBER_BYTES, 3).0
}

fn superblock(dev: &MemoryDevice) -> Superblock1 {
    let mut bytes = vec![0u8; 4096];
    dev.read_at(SB_AT, &mut bytes).unwrap();
    Superblock1::parse(MetadataVersion::V1_2, &bytes, dev.size()).unwrap()
}

/// Change member `i`'s superblock with `edit` and write it back with its checksum.
fn edit(dev: &MemoryDevice, i: usize, edit: impl Fn(usize, &mut Superblock1)) {
    let mut sb = superblock(dev);
    edit(i, &mut sb);
    dev.write_at(SB_AT, &sb.to_bytes()).unwrap();
}

/// `Grow::resume_on` over `devs` refuses with words containing `words`, and writes nothing.
fn refused(devs: &[Arc<MemoryDevice>], words: &str) {
    let before: Vec<Vec<u8>> = devs.iter().map(|d| d.snapshot()).collect();
    match Grow::resume_on(as_dyn(devs)) {
        Err(GrowError::Refused(why)) => assert!(why.contains(words), "refused for another reason: {why}"),
        Err(other) => panic!("expected a refusal containing {words:?}, got {other}"),
        Ok(_) => panic!("taken up, where the record says {words:?}"),
    }
    let after: Vec<Vec<u8>> = devs.iter().map(|d| d.snapshot()).collect();
    assert!(before == after, "a member was written by a refused take-up");
}

/// A shrink of five members onto four, recorded and not stepped.
fn shrink_begun() -> Vec<Arc<MemoryDevice>> {
    let devs = raid5(5);
    let ask = ReshapeRequest { raid_devices: Some(4), ..ReshapeRequest::default() };
    let after = match Grow::start_reshape_on(as_dyn(&devs), Vec::new(), ask) {
        Err(GrowError::Shrinks { after, .. }) => after,
        other => panic!("a shrink without the user's word: {:?}", other.map(|g| g.change())),
    };
    let ask = ReshapeRequest { array_size: Some(after), ..ask };
    Grow::start_reshape_on(as_dyn(&devs), Vec::new(), ask).unwrap();
    assert!(superblock(&devs[0]).reshape_position > 0, "a shrink starts at the smaller array's end");
    devs
}

/// A grow of four members onto a fifth, recorded and not stepped.
fn grow_begun() -> Vec<Arc<MemoryDevice>> {
    let devs = raid5(4);
    let blank = Arc::new(MemoryDevice::new("m4", MEMBER_BYTES));
    let ask = ReshapeRequest { raid_devices: Some(5), ..ReshapeRequest::default() };
    Grow::start_reshape_on(as_dyn(&devs), vec![Arc::clone(&blank) as Arc<dyn MemberDevice>], ask).unwrap();
    let mut devs = devs;
    devs.push(blank);
    devs
}

#[test]
fn the_records_as_written_are_taken_up() {
    // The two begun reshapes the tests below spoil are themselves sound.
    Grow::resume_on(as_dyn(&shrink_begun())).unwrap();
    Grow::resume_on(as_dyn(&grow_begun())).unwrap();
}

#[test]
fn a_shrink_recorded_past_the_end_of_the_smaller_array_is_refused() {
    let devs = shrink_begun();
    for (i, d) in devs.iter().enumerate() {
        edit(d, i, |_, sb| sb.reshape_position += 1024);
    }
    refused(&devs, "past the end of the array it shrinks to");
}

#[test]
fn a_data_offset_moving_against_the_reshapes_direction_is_refused() {
    // A grow runs forwards: its data moves down (a negative new offset). Recorded moving up:
    let devs = grow_begun();
    assert!(superblock(&devs[0]).new_offset < 0);
    for (i, d) in devs.iter().enumerate() {
        edit(d, i, |_, sb| sb.new_offset = -sb.new_offset);
    }
    refused(&devs, "moves down by the same amount on every member");
    // A shrink runs backwards: its data moves up. Recorded moving down:
    let devs = shrink_begun();
    assert!(superblock(&devs[0]).new_offset > 0);
    for (i, d) in devs.iter().enumerate() {
        edit(d, i, |_, sb| sb.new_offset = -sb.new_offset);
    }
    refused(&devs, "moves up by the same amount on every member");
}

#[test]
fn data_offsets_moving_by_different_amounts_are_refused() {
    let devs = grow_begun();
    edit(&devs[2], 2, |_, sb| sb.new_offset -= 8);
    refused(&devs, "by the same amount on every member");
}
