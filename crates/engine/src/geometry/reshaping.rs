//! `ReshapingLayout`: an array caught part-way through a reshape, where some of the data is in
//! the new shape and the rest still in the old one.
//!
//! md reshapes an array by moving its data, stripe after stripe, from the old layout (member
//! count, level, layout, chunk, data offset) to the new one, and records in every superblock the
//! array position it has reached. Until it finishes, a logical byte is found in the new layout
//! when the reshape has passed it (below the position, or above it for a reshape that runs
//! backwards), and in the old layout otherwise: md's `raid5_compute_sector` with `previous`
//! chosen the same way in `make_stripe_request`. Each shape has its own data start on each
//! member (md moves the data offset so that new stripes never overwrite old ones not yet read);
//! this layout counts member offsets from the lower of the two, and adds to each shape's
//! offsets the distance from there to that shape's own start.
//!
//! The whole answers [`Layout`] as a layout without redundancy: every logical byte has one place
//! to be read from. It is for reading only; writing would have to keep each shape's parity, and
//! a driver holding it must never write through it.

use super::layout::{CopyPlacement, Layout, MemberExtent, Redundancy};
use super::{Copies, Geometry};

/// Which shape holds a logical byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The layout the array is reshaped from.
    Old,
    /// The layout the array is reshaped to.
    New,
}

/// An array part-way through a reshape (see the module documentation).
#[derive(Debug, Clone)]
pub struct ReshapingLayout {
    name: String,
    old: Geometry,
    new: Geometry,
    /// The logical byte the reshape has reached.
    position: u64,
    backwards: bool,
    /// Per slot, where each shape's data starts, in bytes from the slot's lower data start.
    old_start: Vec<u64>,
    new_start: Vec<u64>,
    array_bytes: u64,
    raid_disks: usize,
}

impl ReshapingLayout {
    /// `old` and `new` are the two shapes over the same slots (the one with fewer members uses
    /// the first of them); `position` is the logical byte the reshape has reached, `backwards`
    /// whether it runs from the end; `old_start` and `new_start` give, per slot, where each
    /// shape's data starts relative to the lower of the two (one of them is 0 on every slot).
    /// The array is as large as the smaller shape, as md keeps it until the reshape ends.
    pub fn new(
        old: Geometry,
        new: Geometry,
        position: u64,
        backwards: bool,
        old_start: Vec<u64>,
        new_start: Vec<u64>,
    ) -> ReshapingLayout {
        let raid_disks = old.raid_disks().max(new.raid_disks());
        assert_eq!(old_start.len(), raid_disks, "a data start per slot");
        assert_eq!(new_start.len(), raid_disks, "a data start per slot");
        let array_bytes = old.array_bytes().min(new.array_bytes());
        let name = format!("{} reshaping ({} to {} members)", old.name(), old.raid_disks(), new.raid_disks());
        ReshapingLayout {
            name,
            old,
            new,
            position: position.min(array_bytes),
            backwards,
            old_start,
            new_start,
            array_bytes,
            raid_disks,
        }
    }

    /// The logical byte the reshape has reached.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Which shape holds logical byte `offset`, and how many bytes from it stay in that shape.
    pub fn shape_of(&self, offset: u64) -> (Shape, u64) {
        let reshaped = if self.backwards { offset >= self.position } else { offset < self.position };
        let end = match (reshaped, self.backwards) {
            (true, false) | (false, true) => self.position,
            _ => self.array_bytes,
        };
        let shape = if reshaped { Shape::New } else { Shape::Old };
        (shape, end.saturating_sub(offset).max(1))
    }

    fn shape(&self, shape: Shape) -> (&Geometry, &[u64]) {
        match shape {
            Shape::Old => (&self.old, &self.old_start),
            Shape::New => (&self.new, &self.new_start),
        }
    }
}

impl Layout for ReshapingLayout {
    fn name(&self) -> &str {
        &self.name
    }

    fn raid_disks(&self) -> usize {
        self.raid_disks
    }

    fn array_bytes(&self) -> u64 {
        self.array_bytes
    }

    fn member_data_bytes(&self) -> u64 {
        (0..self.raid_disks)
            .map(|slot| {
                let old = self.old_start[slot] + self.old.member_data_bytes();
                let new = self.new_start[slot] + self.new.member_data_bytes();
                old.max(new)
            })
            .max()
            .unwrap_or(0)
    }

    fn chunk_bytes(&self) -> u64 {
        self.old.chunk_bytes().min(self.new.chunk_bytes())
    }

    fn redundancy(&self) -> Redundancy {
        Redundancy::None
    }

    fn max_degraded(&self) -> usize {
        0
    }

    /// Both shapes must be readable on their own (a reshape reads the old one and writes the
    /// new one through engines of each, which go round a missing member as md does); this
    /// layout itself reads no parity, so its own reads need every member (see `OpenArray`).
    fn is_readable(&self, alive: &dyn Fn(usize) -> bool) -> bool {
        self.old.is_readable(alive) && self.new.is_readable(alive)
    }

    fn map(&self, offset: u64, copies: &mut Copies) -> u64 {
        let (shape, left) = self.shape_of(offset);
        let (geometry, start) = self.shape(shape);
        let first = copies.len();
        let run = geometry.map(offset, copies);
        for copy in &mut copies[first..] {
            copy.1 += start[copy.0];
        }
        run.min(left)
    }

    fn member_extent(&self, slot: usize, offset: u64) -> MemberExtent {
        let mut len = u64::MAX;
        for shape in [Shape::New, Shape::Old] {
            let (geometry, start) = self.shape(shape);
            if slot >= geometry.raid_disks() {
                continue;
            }
            if offset < start[slot] {
                len = len.min(start[slot] - offset);
                continue;
            }
            let extent = geometry.member_extent(slot, offset - start[slot]);
            len = len.min(extent.len);
            if let Some(logical) = extent.logical.filter(|&l| l < self.array_bytes) {
                let (holder, left) = self.shape_of(logical);
                if holder == shape {
                    return MemberExtent { logical: Some(logical), len: extent.len.min(left) };
                }
            }
        }
        MemberExtent { logical: None, len: len.max(1) }
    }

    fn copy_placement(&self) -> CopyPlacement {
        CopyPlacement::Images { same_slots: false }
    }
}

#[cfg(test)]
mod tests {
    use uraid_layout::{Level, ParityAlgorithm, ParityLayout};

    use super::*;

    const CHUNK: u64 = 64 * 1024;

    fn raid5(disks: usize, component_sectors: u64) -> Geometry {
        Geometry::Parity(
            ParityLayout::new(Level::Raid5, ParityAlgorithm::LeftSymmetric, disks, 128, component_sectors).unwrap(),
        )
    }

    /// A raid5 of 4 growing to 5, its new shape starting 256 sectors lower on every member.
    fn growing(position: u64) -> ReshapingLayout {
        let shift = 256 * 512;
        ReshapingLayout::new(raid5(4, 4096), raid5(5, 4096), position, false, vec![shift; 5], vec![0; 5])
    }

    #[test]
    fn bytes_before_the_position_are_in_the_new_shape() {
        let layout = growing(5 * CHUNK);
        let (old, new) = (raid5(4, 4096), raid5(5, 4096));
        for offset in [0, CHUNK, 4 * CHUNK + 7, 5 * CHUNK, 9 * CHUNK + 100, layout.array_bytes() - 1] {
            let mut got = Copies::new();
            layout.map(offset, &mut got);
            let mut want = Copies::new();
            if offset < 5 * CHUNK {
                new.map(offset, &mut want);
            } else {
                old.map(offset, &mut want);
                want[0].1 += 256 * 512;
            }
            assert_eq!(got, want, "logical byte {offset}");
        }
        assert_eq!(layout.array_bytes(), old.array_bytes(), "md keeps the old size until the end");
    }

    #[test]
    fn runs_stop_at_the_position() {
        let layout = growing(5 * CHUNK + 4096);
        let mut copies = Copies::new();
        assert_eq!(layout.map(5 * CHUNK, &mut copies), 4096);
    }

    #[test]
    fn backwards_reshapes_are_mirrored() {
        let old = raid5(5, 4096);
        let new = raid5(4, 4096);
        let layout = ReshapingLayout::new(old.clone(), new.clone(), 6 * CHUNK, true, vec![0; 5], vec![0; 5]);
        assert_eq!(layout.shape_of(6 * CHUNK).0, Shape::New);
        assert_eq!(layout.shape_of(6 * CHUNK - 1), (Shape::Old, 1));
        let mut got = Copies::new();
        layout.map(CHUNK, &mut got);
        let mut want = Copies::new();
        old.map(CHUNK, &mut want);
        assert_eq!(got, want);
    }

    #[test]
    fn member_bytes_map_back_to_the_shape_that_holds_them() {
        let layout = growing(7 * CHUNK);
        for slot in 0..5 {
            let mut offset = 0;
            while offset < layout.member_data_bytes() {
                let extent = layout.member_extent(slot, offset);
                if let Some(logical) = extent.logical {
                    let mut copies = Copies::new();
                    layout.map(logical, &mut copies);
                    assert_eq!(copies[0], (slot, offset), "slot {slot} byte {offset} holds {logical}");
                }
                offset += extent.len.min(4096);
            }
        }
    }
}
