//! A metadata write that fails on one member: md fails that member and writes the update to the
//! others (`super_written` → `md_error`, `MD_SB_NEED_REWRITE`); the array goes on degraded. Only
//! when the array cannot do without the member does the metadata stop.

use uraid_device::{MemberDevice, MemoryDevice, OpenArray};
use uraid_engine::metadata::{MetaChange, MetaError, MetaOp};
use uraid_engine::SlotState;
use uraid_testkit::NewMdArray;

const DEVICE_BYTES: u64 = 8 << 20;

/// A new raid1 of `n` members in memory, assembled with its metadata deferred to the caller.
fn raid1(n: usize) -> OpenArray {
    let devs: Vec<Box<dyn MemberDevice>> = NewMdArray::new(1, n, DEVICE_BYTES)
        .images()
        .into_iter()
        .enumerate()
        .map(|(m, img)| Box::new(MemoryDevice::from_bytes(&format!("m{m}"), img)) as Box<dyn MemberDevice>)
        .collect();
    let mut open = OpenArray::assemble(devs, true).expect("assemble");
    open.defer_metadata(true);
    open
}

/// Perform every queued metadata step, failing each op on `device` with an I/O error; returns
/// the devices written.
fn perform_failing(open: &mut OpenArray, device: usize) -> Vec<usize> {
    let mut written = Vec::new();
    while let Some(step) = open.next_metadata_step() {
        let mut result = Ok(());
        for (dev, op) in step {
            if op.device() == device {
                result = Err(MetaError::Io {
                    device,
                    what: "writing superblock".into(),
                    reason: "EIO".into(),
                    unreachable: false,
                });
                continue;
            }
            if let MetaOp::Write { offset, data, .. } = &op {
                dev.write_at(*offset, data).expect("memory write");
                written.push(op.device());
            }
        }
        open.metadata_step_done(result).expect("the array does without the member");
    }
    written
}

#[test]
fn a_member_whose_superblock_cannot_be_written_is_failed_and_the_update_goes_to_the_others() {
    let mut open = raid1(3);
    let ticket = open.record_change(MetaChange::Dirty).expect("record").expect("a ticket");
    let written = perform_failing(&mut open, 1);
    assert!(open.metadata_durable(ticket), "the dirty mark is durable on the other members");
    assert!(open.metadata_failed().is_none(), "the metadata goes on");
    assert_eq!(open.engine().slot_states()[1], SlotState::Faulty);
    assert!(written.contains(&0) && written.contains(&2));
    let failed = open.note_events();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, "m1");
    assert!(failed[0].1.contains("metadata could not be written"), "{}", failed[0].1);
    // The survivors record it, and the failed member is written no more.
    open.record_change(MetaChange::Roles).expect("roles");
    let later = perform_failing(&mut open, usize::MAX);
    assert!(!later.is_empty() && !later.contains(&1), "{later:?}");
}

#[test]
fn the_last_member_is_not_failed_for_its_metadata_the_metadata_stops_instead() {
    let mut open = raid1(1);
    open.record_change(MetaChange::Dirty).expect("record");
    let step = open.next_metadata_step().expect("a step");
    let device = step[0].1.device();
    let result =
        Err(MetaError::Io { device, what: "writing superblock".into(), reason: "EIO".into(), unreachable: false });
    assert!(open.metadata_step_done(result).is_err());
    assert_eq!(open.engine().slot_states()[0], SlotState::InSync);
    assert!(open.metadata_failed().is_some());
}
