//! A drive's free list, kept as the kernel keeps it (`struct gv_freelist`; `gv_create_drive`
//! in `geom_vinum_create.c`; `gv_sd_to_drive` and `gv_adjust_freespace` in
//! `geom_vinum_subr.c`).
//!
//! The kernel starts every drive with one free extent from [`DATA_START`] to the end of the
//! media, carves each subdisk out of the extent that holds it, and hands the tail of a
//! subdisk back when it trims the subdisk (striped and raid5 plexes). The list stays sorted
//! by offset and no two of its extents touch, so it is always the complement of the
//! subdisks in the data area; that is how it is kept here.

use crate::drive_layout::{DATA_START, SECTOR_SIZE};

/// A run of drive bytes: free space, or the space a subdisk occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Extent {
    /// First drive byte.
    pub offset: u64,
    /// Number of bytes.
    pub length: u64,
}

impl Extent {
    /// The drive byte after the last one.
    pub fn end(&self) -> u64 {
        self.offset + self.length
    }

    fn holds(&self, inner: Extent) -> bool {
        self.offset <= inner.offset && u128::from(inner.offset) + u128::from(inner.length) <= u128::from(self.end())
    }
}

/// Where the data area of a drive with `media_size` bytes ends.
///
/// The kernel takes the whole media (`pp->mediasize`), but the configuration text counts in
/// 512-byte sectors and cuts a length down to whole sectors when it saves it; rounding the
/// end of the data area down gives the lengths the saved text, and the kernel after its next
/// taste, will have. (Subdisks placed with given lengths end on whole sectors either way.)
pub fn data_area_end(media_size: u64) -> u64 {
    media_size / SECTOR_SIZE * SECTOR_SIZE
}

/// Why a subdisk does not go onto a drive (the kernel's `GV_ERR_NOSPACE`, or a choice this
/// crate refuses to make silently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The drive has no free extent at all.
    Full,
    /// No free extent holds the length asked for.
    NoneLargeEnough { largest: u64 },
    /// The extent asked for is not inside one free extent.
    NotFreeAt,
    /// An autosized subdisk with a drive offset: the kernel ignores the offset and takes the
    /// largest extent, which starts elsewhere.
    AutosizeElsewhere { chosen: u64 },
}

/// The free extents of one drive, sorted by offset, none touching another.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FreeList {
    extents: Vec<Extent>,
}

impl FreeList {
    /// A drive with no subdisks: one extent from [`DATA_START`] to [`data_area_end`], or none
    /// if the media ends before there is a whole sector of data area.
    pub fn empty_drive(media_size: u64) -> Self {
        let end = data_area_end(media_size);
        let extents =
            if end > DATA_START { vec![Extent { offset: DATA_START, length: end - DATA_START }] } else { vec![] };
        FreeList { extents }
    }

    /// The free extents, lowest offset first.
    pub fn extents(&self) -> &[Extent] {
        &self.extents
    }

    /// Free bytes in all (the kernel's `avail`).
    pub fn available(&self) -> u64 {
        self.extents.iter().map(|e| e.length).sum()
    }

    /// The longest free extent's length, 0 when the drive is full.
    pub fn largest(&self) -> u64 {
        self.extents.iter().map(|e| e.length).max().unwrap_or(0)
    }

    /// Where the kernel puts a new subdisk (`gv_sd_to_drive`), without changing the list.
    ///
    /// - `length` `None` (autosize): the largest free extent, whole; among extents of equal
    ///   length the last, because the kernel's loop takes every extent at least as long as
    ///   the best so far. The kernel then overwrites any drive offset given; here a given
    ///   offset must be where the chosen extent starts ([`Refusal::AutosizeElsewhere`]).
    /// - a length and no offset: the first extent (lowest offset) that holds it, from its
    ///   start.
    /// - a length and an offset: the extent from there must lie inside one free extent.
    pub(crate) fn choose(&self, length: Option<u64>, drive_offset: Option<u64>) -> Result<Extent, Refusal> {
        if self.extents.is_empty() {
            return Err(Refusal::Full);
        }
        let Some(length) = length else {
            let mut best = self.extents[0];
            for e in &self.extents[1..] {
                if e.length >= best.length {
                    best = *e;
                }
            }
            return match drive_offset {
                Some(given) if given != best.offset => Err(Refusal::AutosizeElsewhere { chosen: best.offset }),
                _ => Ok(best),
            };
        };
        match drive_offset {
            None => self
                .extents
                .iter()
                .find(|e| e.length >= length)
                .map(|e| Extent { offset: e.offset, length })
                .ok_or(Refusal::NoneLargeEnough { largest: self.largest() }),
            Some(offset) => {
                let wanted = Extent { offset, length };
                if self.extents.iter().any(|e| e.holds(wanted)) {
                    Ok(wanted)
                } else {
                    Err(Refusal::NotFreeAt)
                }
            }
        }
    }

    /// Take `taken` out of the free extent that holds it, splitting that extent when the
    /// subdisk sits inside it (the kernel's carving of the slot it found). `false`, with the
    /// list unchanged, when no single free extent holds it.
    pub(crate) fn occupy(&mut self, taken: Extent) -> bool {
        if taken.length == 0 {
            return true;
        }
        let Some(index) = self.extents.iter().position(|e| e.holds(taken)) else { return false };
        let slot = self.extents.remove(index);
        let after = Extent { offset: taken.end(), length: slot.end() - taken.end() };
        let before = Extent { offset: slot.offset, length: taken.offset - slot.offset };
        for piece in [after, before] {
            if piece.length > 0 {
                self.extents.insert(index, piece);
            }
        }
        true
    }

    /// Hand back the last `amount` bytes of a subdisk that ends at `end`
    /// (`gv_adjust_freespace`): the free extent starting at `end`, if there is one, grows
    /// down over them; otherwise they become a free extent of their own.
    pub(crate) fn release_tail(&mut self, end: u64, amount: u64) {
        if amount == 0 {
            return;
        }
        if let Some(next) = self.extents.iter_mut().find(|e| e.offset == end) {
            next.offset -= amount;
            next.length += amount;
            return;
        }
        let freed = Extent { offset: end - amount, length: amount };
        let at = self.extents.partition_point(|e| e.offset < freed.offset);
        self.extents.insert(at, freed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn list(extents: &[(u64, u64)]) -> FreeList {
        FreeList { extents: extents.iter().map(|&(offset, length)| Extent { offset, length }).collect() }
    }

    #[test]
    fn a_new_drive_is_free_from_the_data_start_to_its_last_whole_sector() {
        // gv_create_drive: one slot at GV_DATA_START of mediasize - GV_DATA_START bytes.
        assert_eq!(
            FreeList::empty_drive(64 * MIB).extents(),
            [Extent { offset: DATA_START, length: 64 * MIB - DATA_START }]
        );
        // A media size that is not whole sectors loses its partial sector (the saved text
        // could not hold it).
        assert_eq!(FreeList::empty_drive(64 * MIB + 100).extents()[0].end(), 64 * MIB);
        // Media too small for any data: no free extent at all (the kernel would make one of
        // zero or negative size and refuse every subdisk, or autosize one of that size).
        assert!(FreeList::empty_drive(DATA_START).extents().is_empty());
        assert!(FreeList::empty_drive(DATA_START + 511).extents().is_empty());
        assert_eq!(FreeList::empty_drive(DATA_START + 512).available(), 512);
    }

    #[test]
    fn a_given_length_takes_the_first_extent_that_holds_it() {
        // The kernel's loop breaks at the first slot with fl->size >= s->size.
        let free = list(&[(DATA_START, MIB), (10 * MIB, 8 * MIB), (30 * MIB, 4 * MIB)]);
        assert_eq!(free.choose(Some(2 * MIB), None), Ok(Extent { offset: 10 * MIB, length: 2 * MIB }));
        assert_eq!(free.choose(Some(MIB), None), Ok(Extent { offset: DATA_START, length: MIB }));
        assert_eq!(free.choose(Some(9 * MIB), None), Err(Refusal::NoneLargeEnough { largest: 8 * MIB }));
    }

    #[test]
    fn autosize_takes_the_largest_extent_and_the_last_of_equals() {
        // The kernel's loop keeps every slot at least as large as the best so far.
        let free = list(&[(DATA_START, MIB), (10 * MIB, 8 * MIB), (30 * MIB, 4 * MIB)]);
        assert_eq!(free.choose(None, None), Ok(Extent { offset: 10 * MIB, length: 8 * MIB }));
        let ties = list(&[(DATA_START, 4 * MIB), (10 * MIB, 4 * MIB), (30 * MIB, 2 * MIB)]);
        assert_eq!(ties.choose(None, None), Ok(Extent { offset: 10 * MIB, length: 4 * MIB }));
        // A given offset is where the kernel would put it anyway, or refused.
        assert_eq!(ties.choose(None, Some(10 * MIB)), Ok(Extent { offset: 10 * MIB, length: 4 * MIB }));
        assert_eq!(ties.choose(None, Some(DATA_START)), Err(Refusal::AutosizeElsewhere { chosen: 10 * MIB }));
        assert_eq!(FreeList::default().choose(None, None), Err(Refusal::Full));
    }

    #[test]
    fn a_given_offset_must_lie_in_one_free_extent_with_the_whole_length() {
        let free = list(&[(DATA_START, MIB), (10 * MIB, 8 * MIB)]);
        assert_eq!(free.choose(Some(MIB), Some(12 * MIB)), Ok(Extent { offset: 12 * MIB, length: MIB }));
        assert_eq!(free.choose(Some(8 * MIB), Some(10 * MIB)), Ok(Extent { offset: 10 * MIB, length: 8 * MIB }));
        assert_eq!(free.choose(Some(MIB), Some(17 * MIB + 512)), Err(Refusal::NotFreeAt));
        assert_eq!(free.choose(Some(MIB), Some(2 * MIB)), Err(Refusal::NotFreeAt));
        assert_eq!(free.choose(Some(u64::MAX), Some(10 * MIB)), Err(Refusal::NotFreeAt));
    }

    #[test]
    fn occupying_splits_or_shrinks_the_extent() {
        let mut free = list(&[(DATA_START, 10 * MIB)]);
        // From the start of the slot: the slot moves up.
        assert!(free.occupy(Extent { offset: DATA_START, length: MIB }));
        assert_eq!(free, list(&[(DATA_START + MIB, 9 * MIB)]));
        // Inside: the slot splits.
        assert!(free.occupy(Extent { offset: DATA_START + 4 * MIB, length: MIB }));
        assert_eq!(free, list(&[(DATA_START + MIB, 3 * MIB), (DATA_START + 5 * MIB, 5 * MIB)]));
        // Up to the end: the slot ends there.
        assert!(free.occupy(Extent { offset: DATA_START + 9 * MIB, length: MIB }));
        assert_eq!(free, list(&[(DATA_START + MIB, 3 * MIB), (DATA_START + 5 * MIB, 4 * MIB)]));
        // The whole slot: it goes.
        assert!(free.occupy(Extent { offset: DATA_START + MIB, length: 3 * MIB }));
        assert_eq!(free, list(&[(DATA_START + 5 * MIB, 4 * MIB)]));
        // Across a used part: refused, nothing changes.
        assert!(!free.occupy(Extent { offset: DATA_START + 4 * MIB, length: 2 * MIB }));
        assert_eq!(free, list(&[(DATA_START + 5 * MIB, 4 * MIB)]));
    }

    #[test]
    fn a_trimmed_tail_joins_the_extent_after_it_or_stands_alone() {
        // A subdisk at DATA_START..DATA_START+4M, free space right after it.
        let mut free = list(&[(DATA_START + 4 * MIB, 6 * MIB)]);
        free.release_tail(DATA_START + 4 * MIB, MIB);
        assert_eq!(free, list(&[(DATA_START + 3 * MIB, 7 * MIB)]));
        // A subdisk followed by another subdisk: its tail becomes its own extent, in order.
        let mut free = list(&[(DATA_START, MIB), (20 * MIB, MIB)]);
        free.release_tail(10 * MIB, 512);
        assert_eq!(free, list(&[(DATA_START, MIB), (10 * MIB - 512, 512), (20 * MIB, MIB)]));
        free.release_tail(10 * MIB, 0);
        assert_eq!(free.extents().len(), 3);
    }
}
