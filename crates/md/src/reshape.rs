//! md's reshape of a raid4/5/6 (a restripe: more members, another chunk size, another layout,
//! or several at once), as pure decisions: which superblock fields start, record and end it,
//! how far the data offset moves, and which stripe may be written next without overwriting
//! data that is not yet safe.
//!
//! md's rule for 1.x (`raid5.c` `reshape_request`, mdadm's `Grow.c`): the new shape's data
//! starts lower on every member than the old shape's (`new_offset` < 0), so a forward reshape
//! writes each new stripe below the old data it has not read yet. (mdadm moves the data up
//! instead, a reshape run backwards, for a restripe on the same members when there is more room
//! after the data than before it; that direction is not done here.) A crash leaves the array
//! readable from the superblocks alone: below the recorded `reshape_position` the data is in
//! the new shape, from it on still in the old one, untouched. So a new stripe may be written only
//! where it lands on old data the recorded position has already passed; when the next one would
//! not, the position reached is recorded first (after a flush of what was written).
//!
//! The reshape here goes one step at a time: every member's rows of the larger of the two chunk
//! sizes (md's `reshape_sectors`), whole new stripes, data and parity. So the data offset must
//! move by at least that much (md's `raid5_run` refuses to continue a restripe on the same
//! members that moved it less unless started read-only), and a recorded position is always a
//! whole number of steps, as `raid5_run` wants it. Past the old array's end the new stripes
//! hold zeros, as md writes them, so the whole grown array checks clean.

use std::ops::Range;

use uraid_md_format::sb1::{feature, Superblock1};
use uraid_md_format::MetadataVersion;

/// What stops a reshape from being started or continued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReshapeError {
    /// Something this reshape does not do (yet), in mdadm's words where mdadm has them.
    #[error("{0}")]
    Unsupported(String),
    /// Not enough room before the data to move it by a chunk (the larger of the two).
    #[error(
        "cannot move the data offset by a chunk ({chunk_sectors} sectors): only {room_sectors} sectors are free before the data (mdadm would need a backup file)"
    )]
    NoRoom { chunk_sectors: u64, room_sectors: u64 },
}

/// The shapes of a reshape, in bytes: each shape's chunk size and data members per stripe, where
/// the old shape's data starts on the members (from the new one's), and the members' size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrowWindow {
    pub old_chunk: u64,
    pub new_chunk: u64,
    pub old_data_disks: u64,
    pub new_data_disks: u64,
    /// Where the old shape's data starts, from the new shape's start (the data offset's move).
    pub shift: u64,
    /// Bytes of each member the array uses (md's component size, whole chunks).
    pub member_bytes: u64,
}

/// What the reshape does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrowStep {
    /// Write new stripe `stripe`: the logical bytes `logical`, of which those below the old
    /// array's end are read from the old shape and the rest are zeros.
    Stripe { stripe: u64, logical: Range<u64> },
    /// Record this position (logical bytes) in every superblock first, after a flush.
    Record { at: u64 },
    /// Every new stripe is written: record the end.
    Finished,
}

impl GrowWindow {
    /// The array's size before the reshape.
    pub fn old_size(&self) -> u64 {
        self.old_data_disks * self.member_bytes
    }

    /// The array's size once reshaped.
    pub fn new_size(&self) -> u64 {
        self.new_data_disks * self.member_bytes
    }

    /// Member bytes one step covers: the larger chunk (md's `reshape_sectors`), so a step is
    /// whole stripes of both shapes.
    pub fn step_member_bytes(&self) -> u64 {
        self.old_chunk.max(self.new_chunk)
    }

    /// Logical bytes of one step (whole new stripes).
    pub fn step_bytes(&self) -> u64 {
        self.new_data_disks * self.step_member_bytes()
    }

    /// Whether step `stripe` may be written while `recorded` is the position the superblocks
    /// hold: it must end on the members where old data from before `recorded` ends (old data
    /// from there on is still needed after a crash).
    pub fn may_write(&self, stripe: u64, recorded: u64) -> bool {
        if recorded >= self.old_size() {
            return true;
        }
        let new_end = (stripe + 1) * self.step_member_bytes();
        let old_needed_from = self.shift + recorded / (self.old_data_disks * self.old_chunk) * self.old_chunk;
        new_end <= old_needed_from
    }

    /// The next step from `position` (logical bytes done, a whole number of steps) with
    /// `recorded` in the superblocks.
    pub fn next(&self, position: u64, recorded: u64) -> Result<GrowStep, ReshapeError> {
        let stripe_bytes = self.step_bytes();
        if position >= self.new_size() {
            return Ok(GrowStep::Finished);
        }
        if !position.is_multiple_of(stripe_bytes) {
            return Err(ReshapeError::Unsupported(format!(
                "the reshape position ({} sectors) is not at the start of a step of {} sectors (whole new stripes of the larger chunk)",
                position / 512,
                stripe_bytes / 512
            )));
        }
        let stripe = position / stripe_bytes;
        if !self.may_write(stripe, recorded) {
            if recorded < position {
                return Ok(GrowStep::Record { at: position });
            }
            return Err(ReshapeError::NoRoom {
                chunk_sectors: self.step_member_bytes() / 512,
                room_sectors: self.shift / 512,
            });
        }
        Ok(GrowStep::Stripe { stripe, logical: position..position + stripe_bytes })
    }
}

/// How far the data moves down on a member whose superblock is `sb`, for a reshape to chunks of
/// `new_chunk_sectors`: half the room between the end of the superblock and the areas kept
/// after it (bad-block log) and the data offset, in whole steps of the larger chunk, at least
/// one. Refuses what this reshape does not do.
pub fn choose_new_offset(sb: &Superblock1, new_chunk_sectors: u32) -> Result<i64, ReshapeError> {
    let chunk = u64::from(sb.chunksize.max(new_chunk_sectors));
    if sb.version == MetadataVersion::V1_0 {
        return Err(ReshapeError::Unsupported(
            "1.0 metadata keeps no room before the data to move it into (mdadm would move it up, a reshape run backwards, or need a backup file); uraid reshapes 1.1 and 1.2 arrays only".into(),
        ));
    }
    if sb.feature_map & (feature::BITMAP_OFFSET | feature::PPL | feature::MULTIPLE_PPLS | feature::JOURNAL) != 0 {
        return Err(ReshapeError::Unsupported(
            "the array has a write-intent bitmap, a partial parity log or a journal, and md changes no shape with one (mdadm: \"Bitmap must be removed before shape can be changed\"): remove a bitmap first with uraid grow --bitmap=none, and add it back afterwards with --bitmap=internal".into(),
        ));
    }
    // The superblock takes 4 KiB; a bad-block log sits after it.
    let mut meta_end = sb.super_offset + 8;
    if sb.bblog_size != 0 && sb.bblog_offset > 0 {
        meta_end = meta_end.max(sb.super_offset + sb.bblog_offset as u64 + u64::from(sb.bblog_size));
    }
    let room = sb.data_offset.saturating_sub(meta_end);
    let chunks = room / chunk.max(1);
    if chunks == 0 {
        return Err(ReshapeError::NoRoom { chunk_sectors: chunk, room_sectors: room });
    }
    // Half the room (at least a step), so a later reshape still finds some.
    Ok(-(((chunks / 2).max(1) * chunk) as i64))
}

/// The shape a reshape goes to, as md records it beside the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewShape {
    pub raid_disks: u32,
    /// md's layout number.
    pub layout: i32,
    pub chunk_sectors: u32,
}

/// Start a reshape to `to` on a member's superblock, its data to move `new_offset` sectors
/// (negative: down, so the reshape runs forwards), as md records one (`super_1_sync` with a
/// reshape running): the new member count and the change, the current level, layout and chunk
/// kept with the new ones beside them, position 0.
pub fn begin_reshape(sb: &mut Superblock1, to: NewShape, new_offset: i64) {
    sb.delta_disks = to.raid_disks as i32 - sb.raid_disks as i32;
    sb.raid_disks = to.raid_disks;
    sb.feature_map |= feature::RESHAPE_ACTIVE | feature::NEW_OFFSET;
    sb.feature_map &= !feature::RESHAPE_BACKWARDS;
    sb.reshape_position = 0;
    sb.new_level = sb.level;
    sb.new_layout = to.layout;
    sb.new_chunk = to.chunk_sectors;
    sb.new_offset = new_offset as i32;
}

/// Start a reshape from `raid_disks` members to `new_raid_disks`, layout and chunk kept: see
/// [`begin_reshape`].
pub fn begin_grow(sb: &mut Superblock1, new_raid_disks: u32, new_offset: i64) {
    let to = NewShape { raid_disks: new_raid_disks, layout: sb.layout, chunk_sectors: sb.chunksize };
    begin_reshape(sb, to, new_offset);
}

/// Record how far the reshape has come, in array sectors.
pub fn record_position(sb: &mut Superblock1, sectors: u64) {
    sb.reshape_position = sectors;
}

/// End the reshape, as `raid5_finish_reshape`, `md_finish_reshape` and `super_1_sync` leave
/// the superblock: the new level, layout and chunk become the array's, the data now starts at
/// the new offset (the data area grows by as much), the reshape fields cleared.
pub fn finish(sb: &mut Superblock1) {
    if sb.feature_map & feature::RESHAPE_ACTIVE != 0 {
        sb.level = sb.new_level;
        sb.layout = sb.new_layout;
        if sb.new_chunk != 0 {
            sb.chunksize = sb.new_chunk;
        }
    }
    if sb.feature_map & feature::NEW_OFFSET != 0 {
        let moved = i64::from(sb.new_offset);
        sb.data_offset = sb.data_offset.saturating_add_signed(moved);
        sb.data_size = sb.data_size.saturating_add_signed(-moved);
    }
    sb.feature_map &= !(feature::RESHAPE_ACTIVE | feature::NEW_OFFSET | feature::RESHAPE_BACKWARDS);
    sb.reshape_position = 0;
    sb.delta_disks = 0;
    sb.new_level = 0;
    sb.new_layout = 0;
    sb.new_chunk = 0;
    sb.new_offset = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: u64 = 64 * 1024;

    /// raid5 4 -> 5, data moved down by `chunks` chunks, 32 chunks per member.
    fn window(chunks: u64) -> GrowWindow {
        GrowWindow {
            old_chunk: CHUNK,
            new_chunk: CHUNK,
            old_data_disks: 3,
            new_data_disks: 4,
            shift: chunks * CHUNK,
            member_bytes: 32 * CHUNK,
        }
    }

    /// Walk a whole reshape, checking at every write that no old data past the recorded
    /// position is overwritten, and that it ends with every stripe written.
    fn walk(w: GrowWindow) -> (u64, u64) {
        let (mut position, mut recorded, mut records, mut stripes) = (0, 0, 0, 0);
        loop {
            match w.next(position, recorded).unwrap() {
                GrowStep::Stripe { stripe, logical } => {
                    // Member bytes the write covers, from the new start, against the first old
                    // member byte that still holds data past the recorded position.
                    let written_end = (stripe + 1) * w.step_member_bytes();
                    if recorded < w.old_size() {
                        let old_first_needed = w.shift + recorded / (w.old_data_disks * w.old_chunk) * w.old_chunk;
                        assert!(written_end <= old_first_needed, "stripe {stripe} overwrites unrecorded old data");
                    }
                    assert_eq!(logical.start, position);
                    position = logical.end;
                    stripes += 1;
                }
                GrowStep::Record { at } => {
                    assert!(at > recorded, "the recorded position only moves on");
                    recorded = at;
                    records += 1;
                }
                GrowStep::Finished => break,
            }
        }
        assert_eq!(position, w.new_size());
        (stripes, records)
    }

    #[test]
    fn a_reshape_never_writes_over_old_data_not_yet_recorded() {
        for chunks in [1, 2, 3, 8, 40] {
            let (stripes, records) = walk(window(chunks));
            assert_eq!(stripes, 32, "every new stripe once");
            assert!(records > 0 || chunks >= 32, "{chunks} chunks of room: some records");
        }
        // More room, fewer records.
        assert!(walk(window(1)).1 > walk(window(8)).1);
    }

    #[test]
    fn a_restripe_on_the_same_members_goes_in_steps_of_the_larger_chunk() {
        for (old_chunk, new_chunk) in [(CHUNK, 2 * CHUNK), (2 * CHUNK, CHUNK), (CHUNK, CHUNK)] {
            let big = old_chunk.max(new_chunk);
            for steps in [1, 2, 5] {
                let w = GrowWindow {
                    old_chunk,
                    new_chunk,
                    old_data_disks: 3,
                    new_data_disks: 3,
                    shift: steps * big,
                    member_bytes: 32 * CHUNK,
                };
                let (written, records) = walk(w);
                assert_eq!(written, 32 * CHUNK / big, "{old_chunk} -> {new_chunk}: every step once");
                assert!(records > 0, "{old_chunk} -> {new_chunk}, {steps} steps of room: some records");
                assert_eq!(w.old_size(), w.new_size(), "the size stays");
            }
            let tight = GrowWindow {
                old_chunk,
                new_chunk,
                old_data_disks: 3,
                new_data_disks: 3,
                shift: big / 2,
                member_bytes: 32 * CHUNK,
            };
            if big > CHUNK {
                assert!(matches!(tight.next(0, 0), Err(ReshapeError::NoRoom { .. })), "less than a step of room");
            }
        }
    }

    #[test]
    fn less_than_a_chunk_of_room_is_refused() {
        let w = window(0);
        assert!(matches!(w.next(0, 0), Err(ReshapeError::NoRoom { .. })));
        assert!(matches!(window(1).next(CHUNK, 0), Err(ReshapeError::Unsupported(_))), "not a stripe start");
    }

    #[test]
    fn a_superblock_starts_and_ends_a_reshape_as_md_writes_it() {
        let spec = uraid_md_format::create::CreateSpec {
            version: MetadataVersion::V1_2,
            level: 5,
            layout: -1,
            chunk_sectors: 128,
            raid_disks: 4,
            array_uuid: [3; 16],
            name: "h:g".into(),
            ctime: 1_700_000_000,
            component_sectors: None,
            bitmap: false,
            data_offset: None,
            bitmap_chunk: None,
        };
        let made = uraid_md_format::create::plan(&spec, &[16 << 20; 4], &[[1; 16]; 4]).unwrap();
        let uraid_md_format::Superblock::V1(mut sb) = made.superblocks[0].clone() else { unreachable!() };
        let (offset, size) = (sb.data_offset, sb.data_size);
        let moved = choose_new_offset(&sb, 128).unwrap();
        assert!(moved < 0 && (moved % 128) == 0, "{moved}");
        assert!(offset.saturating_add_signed(moved) >= sb.super_offset + 8, "stays past the superblock");
        begin_grow(&mut sb, 5, moved);
        let r = sb.info().reshape.expect("recorded");
        assert_eq!((r.delta_disks, r.position, r.new_offset, sb.raid_disks), (1, 0, moved, 5));
        record_position(&mut sb, 4096);
        assert_eq!(sb.info().reshape.unwrap().position, 4096);
        finish(&mut sb);
        assert_eq!(sb.info().reshape, None);
        assert_eq!((sb.data_offset, sb.data_size), (offset.saturating_add_signed(moved), size + moved.unsigned_abs()));
        assert_eq!((sb.layout, sb.chunksize), (2, 128), "a grow keeps the layout and chunk");

        // A restripe on the same members: the new layout and chunk recorded beside the old
        // ones, and the array's once it ends; the data moves by at least the larger chunk.
        let moved = choose_new_offset(&sb, 256).unwrap();
        assert!(moved <= -256 && moved % 256 == 0, "{moved}");
        begin_reshape(&mut sb, NewShape { raid_disks: 5, layout: 0, chunk_sectors: 256 }, moved);
        let r = sb.info().reshape.expect("recorded");
        assert_eq!((r.delta_disks, r.new_layout, r.new_chunk_sectors, r.backwards), (0, 0, 256, false));
        assert_eq!((sb.layout, sb.chunksize), (2, 128), "the old shape stays the array's until the end");
        finish(&mut sb);
        assert_eq!((sb.layout, sb.chunksize, sb.level), (0, 256, 5));
    }
}
