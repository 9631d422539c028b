//! md's reshape of a raid4/5/6 (a restripe: more members, another chunk size, another layout,
//! or several at once), as pure decisions: which superblock fields start, record and end it,
//! how far the data offset moves, and which stripe may be written next without overwriting
//! data that is not yet safe.
//!
//! md's rule for 1.x (`raid5.c` `reshape_request`, mdadm's `Grow.c`): the data offset moves, so
//! that no new stripe is written over old data not yet read. A reshape onto more members (and a
//! restripe on the same members with more room before the data than after it) runs forwards,
//! the new shape's data starting lower on every member (`new_offset` < 0): each new stripe lands
//! below the old data it has not read yet. A reshape onto fewer members (and a restripe with
//! more room after the data) runs backwards, from the array's end, the new shape's data
//! starting higher (`new_offset` > 0): each new stripe lands above the old data still to be
//! read. A crash leaves the array readable from the superblocks alone: on the side of the
//! recorded `reshape_position` the reshape has passed, the data is in the new shape, on the
//! other still in the old one, untouched. So a new stripe may be written only where it lands on
//! old data the recorded position has already passed; when the next one would not, the position
//! reached is recorded first (after a flush of what was written).
//!
//! Where the data offset cannot move (0.90 and 1.0 metadata, or no room before the data), a
//! reshape onto more members runs in place, as mdadm runs it with a backup: its first new
//! stripes land on old ones not yet read (the critical section, [`GrowWindow::critical_section`]),
//! so that part of the array is first copied to the added members in mdadm's backup format
//! (`uraid_md_format::backup`), from where a crash inside it is mended, by uraid or by mdadm;
//! past it, each new stripe again lands only on old data the recorded position has passed.
//!
//! The reshape here goes one step at a time: every member's rows of the larger of the two chunk
//! sizes (md's `reshape_sectors`), whole new stripes, data and parity. So the data offset must
//! move by at least that much (md's `raid5_run` refuses to continue a restripe on the same
//! members that moved it less unless started read-only), and a recorded position is always a
//! whole number of steps, as `raid5_run` wants it. Past the old array's end the new stripes
//! hold zeros, as md writes them, so the whole grown array checks clean.

use std::ops::Range;

use uraid_layout::Raid10Format;
use uraid_md_format::sb090::Superblock090;
use uraid_md_format::sb1::{feature, Superblock1};
use uraid_md_format::{MetadataVersion, Role};

/// What stops a reshape from being started or continued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReshapeError {
    /// Something this reshape does not do (yet), in mdadm's words where mdadm has them.
    #[error("{0}")]
    Unsupported(String),
    /// Not enough room before the data (after it, for a reshape run backwards) to move it by a
    /// chunk (the larger of the two).
    #[error(
        "cannot move the data offset by a chunk ({chunk_sectors} sectors): only {room_sectors} sectors are free {} the data (mdadm would need a backup file)",
        if *after { "after" } else { "before" }
    )]
    NoRoom { chunk_sectors: u64, room_sectors: u64, after: bool },
}

/// The shapes of a reshape, in bytes: each shape's chunk size and data members per stripe, where
/// the old shape's data starts on the members (from the new one's), and the members' size.
///
/// A raid10 in a near layout is reshaped onto more members the same way (md's
/// `raid10.c` `reshape_request`): its data disks are then its members, and `copies` its near
/// copies. Chunk `c` of the array is held at chunk positions `c*copies ..` of the members taken
/// row by row, so `copies` rows of the members hold `members` chunks of the array: a step is
/// that many rows, and the rows old data occupies follow from the position as for raid4/5/6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrowWindow {
    pub old_chunk: u64,
    pub new_chunk: u64,
    pub old_data_disks: u64,
    pub new_data_disks: u64,
    /// Copies of each chunk: 1 for raid4/5/6, the near copies for raid10.
    pub copies: u64,
    /// How far apart the two shapes' data starts are (the data offset's move): the old one's
    /// above the new one's, or below it for a reshape run backwards.
    pub shift: u64,
    /// Bytes of each member the array uses (md's component size, whole chunks).
    pub member_bytes: u64,
    /// The reshape runs from the array's end to its start (the data moving up).
    pub backwards: bool,
    /// Logical bytes from the array's start held in a backup of the critical section (a
    /// reshape in place, `shift` 0: see [`GrowWindow::critical_section`]): steps wholly below
    /// it may be written whatever is recorded, as a crash there is mended from the backup.
    pub backed_up: u64,
}

/// What the reshape does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrowStep {
    /// Write new stripe `stripe`: the logical bytes `logical`, of which those below the old
    /// array's end are read from the old shape and the rest are zeros. (Run backwards, the
    /// array does not grow, so every byte is read.)
    Stripe { stripe: u64, logical: Range<u64> },
    /// Record this position (logical bytes) in every superblock first, after a flush.
    Record { at: u64 },
    /// Every new stripe is written: record the end.
    Finished,
}

impl GrowWindow {
    /// The position a reshape starts at, as md records it: 0, or for one run backwards the
    /// smaller shape's end (md's `raid5_size`).
    pub fn start(&self) -> u64 {
        if self.backwards {
            self.old_size().min(self.new_size())
        } else {
            0
        }
    }

    /// The position a reshape ends at: the new shape's end, or 0 for one run backwards.
    pub fn end(&self) -> u64 {
        if self.backwards {
            0
        } else {
            self.new_size()
        }
    }

    /// Logical bytes reshaped once the reshape has reached `position` (all of them at
    /// [`GrowWindow::end`]).
    pub fn done(&self, position: u64) -> u64 {
        position.abs_diff(self.start())
    }

    /// The array's size in a shape of `data_disks` and `chunk`: whole chunks, as md's
    /// `raid5_size` and raid10's `calc_sectors` count them.
    fn size_of(&self, data_disks: u64, chunk: u64) -> u64 {
        data_disks * (self.member_bytes / chunk) / self.copies * chunk
    }

    /// The array's size before the reshape.
    pub fn old_size(&self) -> u64 {
        self.size_of(self.old_data_disks, self.old_chunk)
    }

    /// The array's size once reshaped.
    pub fn new_size(&self) -> u64 {
        self.size_of(self.new_data_disks, self.new_chunk)
    }

    /// Member bytes one step covers: the larger chunk (md's `reshape_sectors`), so a step is
    /// whole stripes of both shapes (raid10: a row per copy, holding a chunk per member).
    pub fn step_member_bytes(&self) -> u64 {
        self.old_chunk.max(self.new_chunk) * self.copies
    }

    /// Logical bytes of one step (whole new stripes).
    pub fn step_bytes(&self) -> u64 {
        self.new_data_disks * self.old_chunk.max(self.new_chunk)
    }

    /// Whether step `stripe` may be written while `recorded` is the position the superblocks
    /// hold. Run forwards, it must end on the members where old data from `recorded` on starts
    /// (that old data is still needed after a crash); run backwards, it must start where old
    /// data below `recorded` ends.
    pub fn may_write(&self, stripe: u64, recorded: u64) -> bool {
        if !self.backwards && (stripe + 1) * self.step_bytes() <= self.backed_up {
            return true;
        }
        // The old shape's chunk positions on the members, taken row by row, of the array's
        // chunks below `recorded` end at `recorded`'s chunk times the copies.
        if self.backwards {
            let new_start = self.shift + stripe * self.step_member_bytes();
            let old_needed_to =
                (recorded.div_ceil(self.old_chunk) * self.copies).div_ceil(self.old_data_disks) * self.old_chunk;
            return new_start >= old_needed_to;
        }
        if recorded >= self.old_size() {
            return true;
        }
        let new_end = (stripe + 1) * self.step_member_bytes();
        let old_needed_from =
            self.shift + recorded / self.old_chunk * self.copies / self.old_data_disks * self.old_chunk;
        new_end <= old_needed_from
    }

    /// The next step from `position` (logical bytes done, a whole number of steps; run
    /// backwards, the logical byte the reshape has come down to) with `recorded` in the
    /// superblocks.
    pub fn next(&self, position: u64, recorded: u64) -> Result<GrowStep, ReshapeError> {
        if self.backwards {
            return self.next_backwards(position, recorded);
        }
        let stripe_bytes = self.step_bytes();
        if position >= self.new_size() {
            return Ok(GrowStep::Finished);
        }
        // md records a raid4/5/6 reshape at whole new stripes; a raid10's anywhere (its chunks'
        // copies stand alone), so one found part-way through a step goes on with the rest of it.
        if !position.is_multiple_of(stripe_bytes) && self.copies == 1 {
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
            return Err(self.no_room());
        }
        // The last step may be short: a raid10's size need not be whole steps.
        Ok(GrowStep::Stripe { stripe, logical: position..((stripe + 1) * stripe_bytes).min(self.new_size()) })
    }

    /// [`GrowWindow::next`] for a reshape run backwards: the step below `position`.
    fn next_backwards(&self, position: u64, recorded: u64) -> Result<GrowStep, ReshapeError> {
        let stripe_bytes = self.step_bytes();
        if position == 0 {
            return Ok(GrowStep::Finished);
        }
        // A raid10 starts from its size and is recorded at any chunk: its steps below a
        // position part-way through one are the rest of that step (see `next`).
        if (!position.is_multiple_of(stripe_bytes) && self.copies == 1) || position > self.start() {
            return Err(ReshapeError::Unsupported(format!(
                "the reshape position ({} sectors) is not at the start of a step of {} sectors (whole new stripes of the larger chunk) within the array",
                position / 512,
                stripe_bytes / 512
            )));
        }
        let stripe = (position - 1) / stripe_bytes;
        if !self.may_write(stripe, recorded) {
            if recorded > position {
                return Ok(GrowStep::Record { at: position });
            }
            return Err(self.no_room());
        }
        Ok(GrowStep::Stripe { stripe, logical: stripe * stripe_bytes..position })
    }

    /// For a reshape onto more members in place (the data offset kept, `shift` 0: 0.90 and 1.0
    /// metadata, or no room before the data), the logical bytes from the start whose new
    /// stripes overwrite old ones not yet read, so that they must be backed up before they are
    /// written (mdadm's critical section): whole steps up to the first whose stripe may be
    /// written once the steps below it are recorded, and at least as far as mdadm's
    /// `Grow_restart` wants a backup (its `last_block`) and the kernel's `raid5_run` refuses to
    /// start the array ("reshape_position too early for auto-recovery"). 0 where no step is
    /// critical (the data offset moves, or the reshape runs backwards).
    pub fn critical_section(&self) -> u64 {
        if self.backwards || self.shift != 0 || self.new_data_disks <= self.old_data_disks {
            return 0;
        }
        let step = self.step_bytes();
        let unbacked = GrowWindow { backed_up: 0, ..*self };
        let mut k = 0;
        while k * step < self.new_size() && !unbacked.may_write(k, k * step) {
            k += 1;
        }
        // mdadm's loop, in bytes: new rows per member until the old data they end at starts
        // on a later row.
        let (mut new_rows, mut old_rows, mut last) = (0, 0, 0);
        while new_rows >= old_rows {
            new_rows += self.new_chunk;
            last = new_rows * self.new_data_disks;
            old_rows = last / self.old_data_disks / self.old_chunk * self.old_chunk;
        }
        (k * step).max(last.div_ceil(step) * step).min(self.new_size())
    }

    fn no_room(&self) -> ReshapeError {
        ReshapeError::NoRoom {
            chunk_sectors: self.step_member_bytes() / 512,
            room_sectors: self.shift / 512,
            after: self.backwards,
        }
    }

    /// Whether the reshape has passed `position` since `recorded` (so a client write there must
    /// have the position recorded first): `position` lies between the two in the reshape's
    /// direction.
    pub fn moved_on(&self, position: u64, recorded: u64) -> bool {
        if self.backwards {
            position < recorded
        } else {
            position > recorded
        }
    }
}

/// Sectors free before a member's data (between the end of its superblock and the areas kept
/// after it, and the data offset) and after it (between the end of the part the array uses and
/// the end of the data area), as md lets a reshape move the data into: md's
/// `super_1_allow_new_offset` keeps a new offset 36 KiB past the superblock's start, past the
/// bad-block log; `new_offset_store` keeps the data area within `data_size`.
pub fn room(sb: &Superblock1) -> (u64, u64) {
    let after = sb.data_size.saturating_sub(sb.size);
    if sb.version == MetadataVersion::V1_0 {
        // The superblock is at the end, after the data area; nothing is before the data.
        return (0, after);
    }
    let mut meta_end = sb.super_offset + 72;
    if sb.bblog_size != 0 && sb.bblog_offset > 0 {
        meta_end = meta_end.max(sb.super_offset + sb.bblog_offset as u64 + u64::from(sb.bblog_size));
    }
    (sb.data_offset.saturating_sub(meta_end), after)
}

/// Whether a reshape changing the member count by `delta_disks` runs backwards (the data moving
/// up): onto fewer members always, onto more never, and on the same members where there is at
/// least as much room after the data as before it (mdadm's `set_new_data_offset`).
pub fn runs_backwards(sb: &Superblock1, delta_disks: i32) -> bool {
    let (before, after) = room(sb);
    delta_disks < 0 || (delta_disks == 0 && before <= after)
}

/// How far the data moves on a member whose superblock is `sb`, for a reshape to chunks of
/// `new_chunk_sectors` run `backwards` or not: down (negative) into the room before the data,
/// or up into the room after it, by half that room in whole steps of the larger chunk, at least
/// one. Where there is no such room and the reshape may run `in_place` (onto more members of a
/// raid4/5/6, its critical section backed up), 0: the data stays where it is, as mdadm keeps
/// it when it cannot move it. Refuses what this reshape does not do.
pub fn choose_new_offset(
    sb: &Superblock1,
    new_chunk_sectors: u32,
    backwards: bool,
    in_place: bool,
) -> Result<i64, ReshapeError> {
    let chunk = u64::from(sb.chunksize.max(new_chunk_sectors));
    if sb.feature_map & (feature::BITMAP_OFFSET | feature::PPL | feature::MULTIPLE_PPLS | feature::JOURNAL) != 0 {
        return Err(ReshapeError::Unsupported(
            "the array has a write-intent bitmap, a partial parity log or a journal, and md changes no shape with one (mdadm: \"Bitmap must be removed before shape can be changed\"): remove a bitmap first with uraid grow --bitmap=none, and add it back afterwards with --bitmap=internal".into(),
        ));
    }
    let in_place = in_place && !backwards;
    if sb.version == MetadataVersion::V1_0 && !backwards {
        if in_place {
            return Ok(0);
        }
        return Err(ReshapeError::Unsupported(
            "1.0 metadata keeps no room before the data to move it into, and uraid restripes such an array on the same members only where the members have room after the data (mdadm would need a backup file)".into(),
        ));
    }
    let (before, after) = room(sb);
    let room = if backwards { after } else { before };
    let chunks = room / chunk.max(1);
    if chunks == 0 {
        if in_place {
            return Ok(0);
        }
        return Err(ReshapeError::NoRoom { chunk_sectors: chunk, room_sectors: room, after: backwards });
    }
    // Half the room (at least a step), so a later reshape still finds some.
    let moved = ((chunks / 2).max(1) * chunk) as i64;
    Ok(if backwards { moved } else { -moved })
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
/// (negative: down, so the reshape runs forwards from position 0; positive: up, so it runs
/// backwards from the array's end), as md records one (`super_1_sync` with a reshape running):
/// the new member count and the change, the current level, layout and chunk kept with the new
/// ones beside them, and the start position.
pub fn begin_reshape(sb: &mut Superblock1, to: NewShape, new_offset: i64) {
    let members = u64::from(to.raid_disks.min(sb.raid_disks));
    let chunk = u64::from(sb.chunksize.max(to.chunk_sectors)).max(1);
    // md's size of the smaller shape: `raid5_size` (its data members' whole larger chunks), or
    // raid10's `raid10_size` (its members' whole chunks over the near copies).
    let smaller = match sb.level {
        10 => {
            let copies = Raid10Format::near_copies(sb.layout).unwrap_or(1);
            members * (sb.size / chunk) / u64::from(copies.max(1)) * chunk
        }
        6 => members.saturating_sub(2) * (sb.size / chunk * chunk),
        _ => members.saturating_sub(1) * (sb.size / chunk * chunk),
    };
    sb.delta_disks = to.raid_disks as i32 - sb.raid_disks as i32;
    sb.raid_disks = to.raid_disks;
    sb.feature_map |= feature::RESHAPE_ACTIVE;
    // `super_1_sync` records a new offset only where the data moves (not in place).
    sb.feature_map &= !(feature::RESHAPE_BACKWARDS | feature::NEW_OFFSET);
    if new_offset != 0 {
        sb.feature_map |= feature::NEW_OFFSET;
    }
    sb.reshape_position = 0;
    if new_offset > 0 {
        // `super_1_sync` writes the flag only for a reshape on the same members: fewer imply it.
        if sb.delta_disks == 0 {
            sb.feature_map |= feature::RESHAPE_BACKWARDS;
        }
        sb.reshape_position = smaller;
    }
    sb.new_level = sb.level;
    sb.new_layout = to.layout;
    sb.new_chunk = to.chunk_sectors;
    sb.new_offset = new_offset as i32;
}

/// Record how far the reshape has come, in array sectors.
pub fn record_position(sb: &mut Superblock1, sectors: u64) {
    sb.reshape_position = sectors;
}

/// End the reshape, as `raid5_finish_reshape`, `md_finish_reshape` and `super_1_sync` leave
/// the superblock: the new level, layout and chunk become the array's, the data now starts at
/// the new offset (the data area grows or shrinks by as much), the reshape fields cleared, and
/// the members a reshape onto fewer left out of the new shape spares.
pub fn finish(sb: &mut Superblock1) {
    for dev in 0..sb.dev_roles.len() as u32 {
        if let Role::Active(slot) = sb.role_of(dev) {
            if slot >= sb.raid_disks {
                sb.set_role(dev, Role::Spare);
            }
        }
    }
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

/// [`begin_reshape`] on a 0.90 superblock, as `super_90_sync` writes one with a reshape
/// running: minor version 91, the new member count, the change, the new level, layout and chunk
/// (bytes) beside the current ones, and the position. 0.90 records no data offset, so a 0.90
/// reshape runs in place, forwards from 0 (onto more members).
pub fn begin_reshape_090(sb: &mut Superblock090, to: NewShape) {
    sb.minor_version = 91;
    sb.delta_disks = to.raid_disks as i32 - sb.raid_disks as i32;
    sb.raid_disks = to.raid_disks;
    sb.reshape_position = 0;
    sb.new_level = sb.level;
    sb.new_layout = to.layout;
    sb.new_chunk = to.chunk_sectors * 512;
}

/// [`record_position`] on a 0.90 superblock.
pub fn record_position_090(sb: &mut Superblock090, sectors: u64) {
    sb.reshape_position = sectors;
}

/// [`finish`] on a 0.90 superblock: the new level, layout and chunk become the array's, the
/// reshape fields are cleared and the minor version is 90 again, as `super_90_sync` writes it
/// once md's `reshape_position` is MaxSector.
pub fn finish_090(sb: &mut Superblock090) {
    if sb.minor_version >= 91 {
        sb.level = sb.new_level;
        sb.layout = sb.new_layout;
        if sb.new_chunk != 0 {
            sb.chunk_size = sb.new_chunk;
        }
    }
    sb.minor_version = 90;
    sb.reshape_position = 0;
    sb.delta_disks = 0;
    sb.new_level = 0;
    sb.new_layout = 0;
    sb.new_chunk = 0;
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
            copies: 1,
            shift: chunks * CHUNK,
            member_bytes: 32 * CHUNK,
            backwards: false,
            backed_up: 0,
        }
    }

    /// Walk a whole reshape, checking at every write that no old data the recorded position
    /// still leaves in the old shape is overwritten, and that it ends with every stripe
    /// written. The check places every chunk of the old shape on the members by itself (rows
    /// from each shape's data start), rather than trusting `may_write`'s arithmetic.
    fn walk(w: GrowWindow) -> (u64, u64) {
        let (old_base, new_base) = if w.backwards { (0, w.shift) } else { (w.shift, 0) };
        let grain = w.old_chunk.min(w.new_chunk);
        // The member bytes (from the lower start) that the copies of old logical byte `l` are
        // held at: chunk `c`'s copies at chunk positions `c*copies ..`, taken row by row.
        let old_at = |l: u64| -> Vec<u64> {
            let c = l / w.old_chunk;
            (0..w.copies)
                .map(|k| old_base + (c * w.copies + k) / w.old_data_disks * w.old_chunk + l % w.old_chunk)
                .collect()
        };
        // The member rows (from the lower start) new logical bytes `r` are written to.
        let new_rows = |r: &std::ops::Range<u64>| {
            let (first, last) = (r.start / w.new_chunk, (r.end - 1) / w.new_chunk);
            let from = first * w.copies / w.new_data_disks * w.new_chunk;
            let to = ((last * w.copies + w.copies - 1) / w.new_data_disks + 1) * w.new_chunk;
            new_base + from..new_base + to
        };
        let (mut position, mut recorded) = (w.start(), w.start());
        let (mut records, mut stripes) = (0, 0);
        let mut written: Vec<std::ops::Range<u64>> = Vec::new();
        loop {
            match w.next(position, recorded).unwrap() {
                GrowStep::Stripe { stripe, logical } => {
                    let rows = new_rows(&logical);
                    assert!(rows.end - new_base <= (stripe + 1) * w.step_member_bytes(), "within its step");
                    // A critical section's stripes overwrite old data on purpose: it is backed up.
                    let backed_up = !w.backwards && logical.end <= w.backed_up;
                    let still_old = |l: u64| {
                        !backed_up && if w.backwards { l < recorded } else { l >= recorded && l < w.old_size() }
                    };
                    for l in (0..w.old_size()).step_by(grain as usize).filter(|&l| still_old(l)) {
                        for at in old_at(l) {
                            assert!(
                                at + grain <= rows.start || at >= rows.end,
                                "stripe {stripe} overwrites old data at logical {l} (recorded {recorded})"
                            );
                        }
                    }
                    if w.backwards {
                        assert_eq!(logical.end, position);
                        position = logical.start;
                    } else {
                        assert_eq!(logical.start, position);
                        position = logical.end;
                    }
                    written.push(rows);
                    stripes += 1;
                }
                GrowStep::Record { at } => {
                    assert!(w.moved_on(at, recorded), "the recorded position only moves on");
                    recorded = at;
                    records += 1;
                }
                GrowStep::Finished => break,
            }
        }
        assert_eq!(position, if w.backwards { 0 } else { w.new_size() });
        assert!(written.iter().all(|r| r.end <= w.shift + w.member_bytes), "within the data area");
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
    fn a_reshape_in_place_needs_its_critical_section_backed_up_and_no_more() {
        // (old data disks, new data disks, critical section in chunks): the first whole new
        // stripes whose rows the old data they hold does not yet start beyond, as mdadm counts.
        for (old, new, chunks) in [(1, 2, 2), (2, 3, 6), (3, 4, 12), (3, 5, 10), (4, 6, 12), (7, 8, 56)] {
            let w = GrowWindow { old_data_disks: old, new_data_disks: new, member_bytes: 64 * CHUNK, ..window(0) };
            assert_eq!(w.critical_section(), chunks * CHUNK, "{old} -> {new} data disks");
            // Without the backup, the first stripe cannot be written at all.
            assert_eq!(w.next(0, 0), Err(w.no_room()), "{old} -> {new}");
            // With it, the whole reshape goes through, old data past it never overwritten early.
            let backed = GrowWindow { backed_up: w.critical_section(), ..w };
            let (stripes, _) = walk(backed);
            assert_eq!(stripes, 64 * new / new, "{old} -> {new}: every stripe once");
            // One step less backed up stalls at that step.
            let short = GrowWindow { backed_up: w.critical_section() - w.step_bytes(), ..w };
            let last = short.backed_up;
            assert_eq!(short.next(last, last), Err(short.no_room()), "{old} -> {new}: one step short");
        }
        // A chunk change with the growth: mdadm's count in both chunk sizes, whole steps.
        let w = GrowWindow { new_chunk: 2 * CHUNK, member_bytes: 64 * CHUNK, ..window(0) };
        let critical = w.critical_section();
        assert!(critical.is_multiple_of(w.step_bytes()) && critical > 0);
        walk(GrowWindow { backed_up: critical, ..w });
        // No critical section where the data offset moves, or the reshape runs backwards.
        assert_eq!(window(2).critical_section(), 0);
        assert_eq!(
            GrowWindow { old_data_disks: 4, new_data_disks: 3, backwards: true, ..window(0) }.critical_section(),
            0
        );
    }

    #[test]
    fn a_raid10_grows_a_row_per_copy_at_a_time_never_over_old_data_not_yet_recorded() {
        // near 2 from 4 to 5 and 6 members, near 3 from 3 to 4; members of whole steps or not.
        for (copies, old, new) in [(2, 4, 5), (2, 4, 6), (3, 3, 4), (2, 2, 3)] {
            for member_chunks in [32, 33] {
                for room in [copies, copies + 1, 4 * copies] {
                    let w = GrowWindow {
                        old_data_disks: old,
                        new_data_disks: new,
                        copies,
                        member_bytes: member_chunks * CHUNK,
                        ..window(room)
                    };
                    let what = format!("near {copies}, {old} -> {new}, {member_chunks} chunks, room {room}");
                    assert_eq!(w.new_size(), new * member_chunks / copies * CHUNK, "{what}");
                    let (stripes, records) = walk(w);
                    assert_eq!(stripes, (new * member_chunks / copies).div_ceil(new), "{what}: every step once");
                    assert!(records > 0, "{what}: some records");
                }
            }
            // Onto fewer members, backwards from the smaller size, whole steps or not.
            for member_chunks in [32, 33] {
                for room in [copies, 2 * copies, 4 * copies] {
                    let w = GrowWindow {
                        old_data_disks: new,
                        new_data_disks: old,
                        copies,
                        member_bytes: member_chunks * CHUNK,
                        backwards: true,
                        ..window(room)
                    };
                    let what = format!("near {copies}, {new} -> {old}, {member_chunks} chunks, room {room}");
                    assert_eq!(w.start(), w.new_size(), "{what}");
                    let (stripes, _) = walk(w);
                    assert_eq!(stripes, (old * member_chunks / copies).div_ceil(old), "{what}: every step once");
                }
            }
            // Taken up part-way through a step (md records a raid10 reshape at any chunk): the
            // rest of that step.
            let w = GrowWindow { old_data_disks: old, new_data_disks: new, copies, ..window(4 * copies) };
            let at = CHUNK + w.step_bytes();
            assert_eq!(
                w.next(at, at),
                Ok(GrowStep::Stripe { stripe: 1, logical: at..2 * w.step_bytes() }),
                "near {copies}, {old} -> {new}"
            );
            // Less than a step of room: no step can be written.
            let tight = GrowWindow { old_data_disks: old, new_data_disks: new, copies, ..window(copies - 1) };
            assert!(matches!(tight.next(0, 0), Err(ReshapeError::NoRoom { .. })), "near {copies}: tight");
        }
    }

    #[test]
    fn a_restripe_on_the_same_members_goes_in_steps_of_the_larger_chunk_either_way() {
        for backwards in [false, true] {
            for (old_chunk, new_chunk) in [(CHUNK, 2 * CHUNK), (2 * CHUNK, CHUNK), (CHUNK, CHUNK)] {
                let big = old_chunk.max(new_chunk);
                let restripe = |shift| GrowWindow {
                    old_chunk,
                    new_chunk,
                    old_data_disks: 3,
                    new_data_disks: 3,
                    copies: 1,
                    shift,
                    member_bytes: 32 * CHUNK,
                    backwards,
                    backed_up: 0,
                };
                let what = format!("{old_chunk} -> {new_chunk}, backwards {backwards}");
                for steps in [1, 2, 5] {
                    let w = restripe(steps * big);
                    let (written, records) = walk(w);
                    assert_eq!(written, 32 * CHUNK / big, "{what}: every step once");
                    assert!(records > 0, "{what}, {steps} steps of room: some records");
                    assert_eq!(w.old_size(), w.new_size(), "the size stays");
                }
                if big > CHUNK {
                    let tight = restripe(big / 2);
                    let start = tight.start();
                    assert!(matches!(tight.next(start, start), Err(ReshapeError::NoRoom { .. })), "{what}: tight");
                }
            }
        }
    }

    #[test]
    fn a_reshape_onto_fewer_members_runs_backwards_over_old_data_already_read() {
        for chunks in [1, 2, 3, 8, 40] {
            // raid5 5 -> 4: the array shrinks to 3 data members' worth.
            let w = GrowWindow { old_data_disks: 4, new_data_disks: 3, backwards: true, ..window(chunks) };
            assert_eq!(w.start(), w.new_size(), "it starts at the smaller shape's end");
            let (stripes, records) = walk(w);
            assert_eq!(stripes, 32, "every new stripe once");
            assert!(records > 0 || chunks >= 32, "{chunks} chunks of room: some records");
        }
        // Without room, the top stripes go (they land above the old data still needed), but
        // the walk stops where new and old rows meet.
        let w = GrowWindow { old_data_disks: 4, new_data_disks: 3, backwards: true, ..window(0) };
        let (mut position, mut recorded) = (w.new_size(), w.new_size());
        let refusal = loop {
            match w.next(position, recorded) {
                Ok(GrowStep::Stripe { logical, .. }) => position = logical.start,
                Ok(GrowStep::Record { at }) => recorded = at,
                Ok(GrowStep::Finished) => panic!("a reshape without room finished"),
                Err(e) => break e,
            }
        };
        assert!(matches!(refusal, ReshapeError::NoRoom { after: true, .. }), "{refusal}");
        assert!(position > 0 && position < w.new_size());
        assert!(matches!(w.next(CHUNK, w.new_size()), Err(ReshapeError::Unsupported(_))), "not a step start");
    }

    #[test]
    fn less_than_a_chunk_of_room_is_refused() {
        let w = window(0);
        assert!(matches!(w.next(0, 0), Err(ReshapeError::NoRoom { .. })));
        assert!(matches!(window(1).next(CHUNK, 0), Err(ReshapeError::Unsupported(_))), "not a stripe start");
    }

    #[test]
    fn a_superblock_starts_and_ends_a_reshape_as_md_writes_it() {
        let spec = raid5_spec(MetadataVersion::V1_2, 4, None);
        let made = uraid_md_format::create::plan(&spec, &[16 << 20; 4], &[[1; 16]; 4]).unwrap();
        let uraid_md_format::Superblock::V1(mut sb) = made.superblocks[0].clone() else { unreachable!() };
        let (offset, size) = (sb.data_offset, sb.data_size);
        let moved = choose_new_offset(&sb, 128, false, false).unwrap();
        assert!(moved < 0 && (moved % 128) == 0, "{moved}");
        assert!(offset.saturating_add_signed(moved) >= sb.super_offset + 8, "stays past the superblock");
        let to = NewShape { raid_disks: 5, layout: sb.layout, chunk_sectors: sb.chunksize };
        begin_reshape(&mut sb, to, moved);
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
        let moved = choose_new_offset(&sb, 256, false, false).unwrap();
        assert!(moved <= -256 && moved % 256 == 0, "{moved}");
        begin_reshape(&mut sb, NewShape { raid_disks: 5, layout: 0, chunk_sectors: 256 }, moved);
        let r = sb.info().reshape.expect("recorded");
        assert_eq!((r.delta_disks, r.new_layout, r.new_chunk_sectors, r.backwards), (0, 0, 256, false));
        assert_eq!((sb.layout, sb.chunksize), (2, 128), "the old shape stays the array's until the end");
        finish(&mut sb);
        assert_eq!((sb.layout, sb.chunksize, sb.level), (0, 256, 5));
    }

    /// What `create` is asked for a raid5 of `raid_disks` members with `version` metadata,
    /// chunks of 128 sectors, using `component_sectors` of each (all there is when `None`).
    fn raid5_spec(
        version: MetadataVersion,
        raid_disks: u32,
        component_sectors: Option<u64>,
    ) -> uraid_md_format::create::CreateSpec {
        uraid_md_format::create::CreateSpec {
            version,
            level: 5,
            layout: -1,
            chunk_sectors: 128,
            raid_disks,
            array_uuid: [3; 16],
            name: if version == MetadataVersion::V0_90 { String::new() } else { "h:g".into() },
            ctime: 1_700_000_000,
            component_sectors,
            bitmap: false,
            data_offset: None,
            bitmap_chunk: None,
        }
    }

    #[test]
    fn a_090_superblock_starts_and_ends_a_reshape_as_md_writes_it() {
        let spec = raid5_spec(MetadataVersion::V0_90, 4, None);
        let made = uraid_md_format::create::plan(&spec, &[16 << 20; 4], &[[1; 16]; 4]).unwrap();
        let uraid_md_format::Superblock::V090(mut sb) = made.superblocks[0].clone() else { unreachable!() };
        begin_reshape_090(&mut sb, NewShape { raid_disks: 5, layout: 2, chunk_sectors: 256 });
        let parsed = Superblock090::parse(&sb.to_bytes(), 16 << 20).unwrap();
        let r = parsed.info().reshape.expect("minor version 91 records a reshape");
        assert_eq!((parsed.minor_version, parsed.raid_disks), (91, 5));
        assert_eq!((r.delta_disks, r.position, r.new_chunk_sectors, r.new_layout, r.new_offset), (1, 0, 256, 2, 0));
        record_position_090(&mut sb, 3072);
        assert_eq!(sb.info().reshape.unwrap().position, 3072);
        finish_090(&mut sb);
        let parsed = Superblock090::parse(&sb.to_bytes(), 16 << 20).unwrap();
        assert_eq!(
            (parsed.minor_version, parsed.info().reshape, parsed.chunk_size, parsed.raid_disks),
            (90, None, 256 * 512, 5)
        );
    }

    #[test]
    fn a_superblock_starts_and_ends_a_reshape_onto_fewer_members_as_md_writes_it() {
        // Members of 16 MiB, of which the array uses 12 MiB: room after the data.
        let spec = raid5_spec(MetadataVersion::V1_2, 5, Some(12 * 2048));
        let made = uraid_md_format::create::plan(&spec, &[16 << 20; 5], &[[1; 16]; 5]).unwrap();
        let uraid_md_format::Superblock::V1(mut sb) = made.superblocks[0].clone() else { unreachable!() };
        let (offset, data_size) = (sb.data_offset, sb.data_size);
        assert!(runs_backwards(&sb, -1) && !runs_backwards(&sb, 1));
        assert!(runs_backwards(&sb, 0), "more room after the data than before: a restripe moves it up");
        let moved = choose_new_offset(&sb, 128, true, false).unwrap();
        assert!(moved > 0 && moved % 128 == 0 && moved as u64 <= data_size - sb.size, "{moved}");
        let to = NewShape { raid_disks: 4, layout: sb.layout, chunk_sectors: 128 };
        begin_reshape(&mut sb, to, moved);
        let r = sb.info().reshape.expect("recorded");
        assert_eq!((r.delta_disks, r.backwards, r.new_offset), (-1, true, moved));
        assert_eq!(r.position, 3 * 12 * 2048, "from the end of the smaller array");
        assert_eq!(sb.feature_map & feature::RESHAPE_BACKWARDS, 0, "implied by fewer members, as md leaves it");
        let holder =
            |sb: &Superblock1, slot: u32| (0..sb.dev_roles.len() as u32).find(|&d| sb.role_of(d) == Role::Active(slot));
        let last = holder(&sb, 4).expect("the last member keeps its slot until the end");
        record_position(&mut sb, 0);
        finish(&mut sb);
        assert_eq!(sb.info().reshape, None);
        assert_eq!((sb.data_offset, sb.data_size), (offset + moved as u64, data_size - moved as u64));
        assert_eq!((sb.raid_disks, sb.role_of(last)), (4, Role::Spare), "the member left out is a spare");
        assert!(holder(&sb, 3).is_some() && holder(&sb, 4).is_none());

        // Full members have no room after the data: refused, as md's `new_offset_store` would.
        let full = uraid_md_format::create::CreateSpec { component_sectors: None, ..spec };
        let made = uraid_md_format::create::plan(&full, &[16 << 20; 5], &[[1; 16]; 5]).unwrap();
        let uraid_md_format::Superblock::V1(sb) = made.superblocks[0].clone() else { unreachable!() };
        assert!(matches!(choose_new_offset(&sb, 128, true, true), Err(ReshapeError::NoRoom { after: true, .. })));
    }
}
