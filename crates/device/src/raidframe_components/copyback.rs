//! The copy of a RAIDframe copyback (`raidctl -B`), through the engine: a column a hot spare
//! took over is copied from the spare to the column's own component as the recovery of a
//! two-way mirror (slot 0 the spare, in sync; slot 1 the component, recovering), window by
//! window. The caller performs the member I/O (on devices, or on the simulator's disks), flushes
//! the component, and only then writes the labels that give the column back.

use uraid_engine::array::{Array, SlotState};
use uraid_engine::geometry::Geometry;
use uraid_engine::Request;
use uraid_layout::Raid1Layout;

/// Member bytes copied per recovery request.
pub const COPYBACK_WINDOW: u64 = 1 << 20;

/// The mirror a copyback of `data_bytes` of member data (whole sectors) runs on.
pub fn copyback_mirror(data_bytes: u64) -> Array {
    let layout = Raid1Layout::new(2, data_bytes / 512).expect("two members");
    Array::new(Geometry::Raid1(layout), vec![SlotState::InSync, SlotState::Recovering]).expect("the spare is in sync")
}

/// The recovery requests that copy `data_bytes` in windows of `window` bytes, in order.
pub fn copyback_requests(data_bytes: u64, window: u64) -> impl Iterator<Item = Request> {
    (0..data_bytes)
        .step_by(window as usize)
        .map(move |offset| Request::Recover { offset, len: window.min(data_bytes - offset) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use uraid_engine::array::{Completion, IoResult, MemberOp};
    use uraid_engine::blocking::execute;

    /// The copy reads the spare only, writes the component only, and leaves it equal.
    #[test]
    fn the_spare_is_copied_onto_the_component_and_never_written() {
        let bytes = 3 * 4096 + 512;
        let mut disks = [(0..bytes).map(|i| (i * 7 % 251) as u8).collect::<Vec<u8>>(), vec![0u8; bytes as usize]];
        let mut mirror = copyback_mirror(bytes);
        for request in copyback_requests(bytes, 4096) {
            let mut exec = |io: &uraid_engine::MemberIo| {
                let at = io.offset as usize;
                match &io.op {
                    MemberOp::Read { len } => {
                        assert_eq!(io.slot, 0, "only the spare is read");
                        IoResult::Read(disks[0][at..at + *len as usize].to_vec().into())
                    }
                    MemberOp::Write { data } => {
                        assert_eq!(io.slot, 1, "only the component is written");
                        disks[1][at..at + data.len()].copy_from_slice(&data.to_vec());
                        IoResult::Done
                    }
                    _ => IoResult::Done,
                }
            };
            assert_eq!(execute(&mut mirror, request, &mut exec), Ok(Completion::Recovered));
        }
        assert!(disks[0] == disks[1]);
    }
}
