//! RAID-10: md's single-level mirrored striping with near, far and offset copies.
//!
//! Follows `setup_geo`, `calc_sectors`, `raid10_size`, `__raid10_find_phys` and
//! `raid10_find_virt` in `drivers/md/raid10.c`.
//!
//! The layout word packs `near` copies (bits 0-7), `far` copies (bits 8-15), the "offset"
//! flag (bit 16) and the far-set mode (bits 17-18). Virtual chunk `v` is written `near` times
//! to consecutive members starting at position `v * near` of a raid0-like grid (wrapping to the
//! next chunk row past the last member). Each of those is then copied `far - 1` more times,
//! every time shifted by `near` members (within its far set) and by `stride` sectors further down
//! the member. For "far" layouts the stride is a fixed fraction of the member; for "offset"
//! layouts it is one chunk, and each grid row then occupies `far` chunk rows.

use std::fmt;

use crate::{check_in_array, Extent, LayoutError, Level, PAGE_SECTORS};

/// A raid10 layout word, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raid10Format {
    /// Copies on adjacent members (`nc`).
    pub near: u32,
    /// Copies further down the members (`fc`).
    pub far: u32,
    /// Far copies go to the next chunk row instead of a distant part of the member (`fo`).
    pub offset: bool,
    /// How far copies are grouped (`layout >> 17`): 0 all members form one set (what mdadm
    /// creates), 1 sets of `raid_disks / far` (an early, buggy variant), 2 sets of `far * near`.
    pub far_set_mode: u32,
}

impl Raid10Format {
    /// mdadm's default layout, `n2`.
    pub const NEAR2: Raid10Format = Raid10Format { near: 2, far: 1, offset: false, far_set_mode: 0 };

    /// Decodes md's layout number, refusing what `setup_geo`/`setup_conf` refuse: unknown high
    /// bits, an unknown far-set mode, zero copies, fewer than two copies in total.
    pub fn from_md(layout: u32) -> Result<Raid10Format, LayoutError> {
        let invalid = |reason| Err(LayoutError::InvalidRaid10Layout { layout, reason });
        if layout >> 19 != 0 {
            return invalid("bits above bit 18 are set");
        }
        let format = Raid10Format {
            near: layout & 0xff,
            far: (layout >> 8) & 0xff,
            offset: layout & (1 << 16) != 0,
            far_set_mode: layout >> 17,
        };
        if format.far_set_mode > 2 {
            return invalid("far-set mode 3 does not exist");
        }
        if format.near == 0 || format.far == 0 {
            return invalid("near and far copy counts must both be at least 1");
        }
        if format.copies() < 2 {
            return invalid("raid10 needs at least 2 copies of the data");
        }
        Ok(format)
    }

    /// md's layout number.
    pub fn to_md(self) -> u32 {
        (self.near & 0xff) | ((self.far & 0xff) << 8) | (u32::from(self.offset) << 16) | ((self.far_set_mode & 3) << 17)
    }

    /// Total copies of every sector (`near * far`).
    pub fn copies(self) -> u32 {
        self.near * self.far
    }

    /// The near copies of md's layout number `layout` where it is a near layout (no far or
    /// offset copies), the layouts md reshapes onto more or fewer members; else `None`.
    pub fn near_copies(layout: i32) -> Option<u32> {
        let format = Raid10Format::from_md(u32::try_from(layout).ok()?).ok()?;
        (format.far == 1).then_some(format.near)
    }

    /// Parses mdadm's `--layout` forms (`n2`, `f2`, `o2`), the form mdadm prints (`near=2`,
    /// `far=3`, `offset=2`, `near=2, far=2`), combined short forms (`n2f2`, `n2o2`) and md's
    /// layout number (decimal or `0x` hex). A far-set mode can be given as `far-set-mode=N`.
    pub fn parse(s: &str) -> Result<Raid10Format, LayoutError> {
        let text = s.trim().to_ascii_lowercase();
        let unknown = || LayoutError::UnknownRaid10Layout(s.to_string());
        if let Some(hex) = text.strip_prefix("0x") {
            let number = u32::from_str_radix(hex, 16).map_err(|_| unknown())?;
            return Raid10Format::from_md(number);
        }
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return Raid10Format::from_md(text.parse().map_err(|_| unknown())?);
        }

        let mut pairs: Vec<(String, u32)> = Vec::new();
        if text.contains('=') {
            for part in text.split(|c: char| c == ',' || c.is_whitespace()).filter(|p| !p.is_empty()) {
                let (key, value) = part.split_once('=').ok_or_else(unknown)?;
                pairs.push((key.to_string(), value.parse().map_err(|_| unknown())?));
            }
        } else {
            let mut rest = text.as_str();
            while !rest.is_empty() {
                let letter = &rest[..1];
                let digits = rest[1..].bytes().take_while(u8::is_ascii_digit).count();
                if digits == 0 {
                    return Err(unknown());
                }
                pairs.push((letter.to_string(), rest[1..1 + digits].parse().map_err(|_| unknown())?));
                rest = &rest[1 + digits..];
            }
        }
        if pairs.is_empty() {
            return Err(unknown());
        }

        let mut format = Raid10Format { near: 1, far: 1, offset: false, far_set_mode: 0 };
        let (mut saw_near, mut saw_far) = (false, false);
        for (key, value) in pairs {
            match key.as_str() {
                "n" | "near" if !saw_near => {
                    format.near = value;
                    saw_near = true;
                }
                "f" | "far" if !saw_far => {
                    format.far = value;
                    saw_far = true;
                }
                "o" | "offset" if !saw_far => {
                    format.far = value;
                    format.offset = true;
                    saw_far = true;
                }
                "far-set-mode" => format.far_set_mode = value,
                _ => return Err(unknown()),
            }
        }
        if format.near > 255 || format.far > 255 || format.far_set_mode > 2 {
            return Err(unknown());
        }
        Raid10Format::from_md(format.to_md())
    }
}

impl fmt::Display for Raid10Format {
    /// As mdadm's `print_r10_layout`: `near=2`, `far=2`, `offset=2`, or `near=2, far=2` when both
    /// are above one. A non-zero far-set mode (which mdadm does not show) is appended as
    /// `, far-set-mode=N` so that the text parses back to the same layout.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.near != 1 {
            parts.push(format!("near={}", self.near));
        }
        if self.far != 1 {
            parts.push(format!("{}={}", if self.offset { "offset" } else { "far" }, self.far));
        }
        if self.near * self.far == 1 {
            parts.push("NO REDUNDANCY".to_string());
        }
        if self.far_set_mode != 0 {
            parts.push(format!("far-set-mode={}", self.far_set_mode));
        }
        f.write_str(&parts.join(", "))
    }
}

/// A raid10 array's geometry (`struct geom` plus the sizes from `calc_sectors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raid10Layout {
    format: Raid10Format,
    raid_disks: u64,
    near: u64,
    far: u64,
    chunk_shift: u32,
    far_set_size: u64,
    /// Sectors used on each member (`conf->dev_sectors`).
    dev_sectors: u64,
    /// Member sectors between one far copy and the next (`geo->stride`).
    stride: u64,
    array_sectors: u64,
}

impl Raid10Layout {
    /// `component_sectors` is the superblock's per-member size (`mddev->dev_sectors`); md trims
    /// it to whole chunks per copy (`calc_sectors`), see [`Raid10Layout::dev_sectors`].
    /// The chunk must be a power of two of at least 4 KiB and there must be at least as many
    /// members as copies (`setup_geo`, `setup_conf`).
    pub fn new(
        raid_disks: usize,
        chunk_sectors: u32,
        format: Raid10Format,
        component_sectors: u64,
    ) -> Result<Self, LayoutError> {
        // Re-check fields a caller may have filled in by hand.
        let format = Raid10Format::from_md(format.to_md()).ok().filter(|checked| *checked == format).ok_or(
            LayoutError::InvalidRaid10Layout {
                layout: format.to_md(),
                reason: "copy counts must be 1..=255 with at least 2 copies in total, far-set mode 0..=2",
            },
        )?;
        if chunk_sectors == 0 {
            return Err(LayoutError::ChunkMissing { level: Level::Raid10 });
        }
        if !chunk_sectors.is_power_of_two() {
            return Err(LayoutError::ChunkNotPowerOfTwo { level: Level::Raid10, chunk_sectors });
        }
        if chunk_sectors < PAGE_SECTORS {
            return Err(LayoutError::ChunkTooSmall { level: Level::Raid10, chunk_sectors });
        }
        if (format.copies() as usize) > raid_disks {
            return Err(LayoutError::Raid10TooFewDevices { format, copies: format.copies(), raid_disks });
        }
        let r = raid_disks as u64;
        let near = u64::from(format.near);
        let far = u64::from(format.far);
        let copies = near * far;
        let far_set_size = match format.far_set_mode {
            0 => r,
            1 => r / far,
            _ => far * near,
        };
        let chunk_shift = chunk_sectors.trailing_zeros();

        // calc_sectors: whole array chunks, then the chunks each member needs (rounded up).
        let array_chunks =
            ((component_sectors >> chunk_shift) / far).checked_mul(r).ok_or(LayoutError::TooLarge)? / near;
        let dev_chunks = array_chunks.checked_mul(copies).ok_or(LayoutError::TooLarge)?.div_ceil(r);
        let dev_sectors = dev_chunks << chunk_shift;
        let stride = if format.offset { 1 << chunk_shift } else { (dev_chunks / far) << chunk_shift };
        // raid10_size, applied (as raid10_run does) to the trimmed member size.
        let array_sectors = ((dev_chunks / far) * r / near) << chunk_shift;

        Ok(Raid10Layout {
            format,
            raid_disks: r,
            near,
            far,
            chunk_shift,
            far_set_size,
            dev_sectors,
            stride,
            array_sectors,
        })
    }

    /// The array size (`raid10_size`).
    pub fn array_sectors(&self) -> u64 {
        self.array_sectors
    }

    /// Sectors used on each member (`conf->dev_sectors`): the component size trimmed to what
    /// the layout can fill. This is what md reports as the component size once running.
    pub fn dev_sectors(&self) -> u64 {
        self.dev_sectors
    }

    /// Member sectors between a far copy and the next one.
    pub fn stride(&self) -> u64 {
        self.stride
    }

    /// The layout word.
    pub fn format(&self) -> Raid10Format {
        self.format
    }

    /// Number of members.
    pub fn raid_disks(&self) -> usize {
        self.raid_disks as usize
    }

    /// The chunk size in sectors.
    pub fn chunk_sectors(&self) -> u32 {
        1 << self.chunk_shift
    }

    fn chunk(&self) -> u64 {
        1 << self.chunk_shift
    }

    /// Every copy of the run starting at `logical`, to the end of its chunk (or of the array), in
    /// the order `__raid10_find_phys` lists them: for each near copy, that copy and then its far
    /// copies. All extents have the same length.
    pub fn map(&self, logical: u64) -> Vec<Extent> {
        let mut out = Vec::with_capacity((self.near * self.far) as usize);
        self.map_each(logical, |e| out.push(e));
        out
    }

    /// [`Raid10Layout::map`]'s extents handed to `each` in the same order, without a list (for
    /// callers that map on every request and keep the copies in a buffer of their own).
    pub fn map_each(&self, logical: u64, mut each: impl FnMut(Extent)) {
        check_in_array(logical, self.array_sectors);
        let chunk = self.chunk();
        let in_chunk = logical & (chunk - 1);
        let sectors = (chunk - in_chunk).min(self.array_sectors - logical);
        let r = self.raid_disks;

        let first = (logical >> self.chunk_shift) * self.near;
        let mut row = first / r;
        let mut dev = first % r;
        if self.format.offset {
            row *= self.far;
        }
        let mut sector = (row << self.chunk_shift) + in_chunk;

        for _ in 0..self.near {
            let (mut d, mut s) = (dev, sector);
            each(Extent { member: d as usize, sector: s, sectors });
            for _ in 1..self.far {
                d = self.next_far_member(d);
                s += self.stride;
                each(Extent { member: d as usize, sector: s, sectors });
            }
            dev += 1;
            if dev >= r {
                dev = 0;
                sector += chunk;
            }
        }
    }

    /// The member holding the next far copy of a chunk on member `d`: `near` members on, wrapping
    /// within `d`'s far set. When the sets do not divide the members evenly, the last set absorbs
    /// the remainder; the test for it looks at the shifted member, as `__raid10_find_phys` does.
    fn next_far_member(&self, d: u64) -> u64 {
        let set_size = self.far_set_size;
        let set = d / set_size;
        let shifted = d + self.near;
        let remainder = self.raid_disks % set_size;
        let last_set_start = (self.raid_disks / set_size - 1) * set_size;
        if remainder != 0 && shifted > last_set_start {
            (shifted - last_set_start) % (set_size + remainder) + last_set_start
        } else {
            shifted % set_size + set_size * set
        }
    }

    /// The array sector stored at `sector` of `member`, or `None` if that sector holds no data
    /// (past the used part of the member, or a grid position no virtual chunk fills).
    ///
    /// Tries the closed-form inverse of `raid10_find_virt` first and confirms it with [`map`];
    /// unusual far-set geometries fall back to checking the few virtual chunks that can reach
    /// the given chunk row. (Some geometries md accepts, such as `n2o2` on a member count that is
    /// not a multiple of 2, place two virtual chunks on the same member chunk; `logical` then
    /// returns one of them.)
    ///
    /// [`map`]: Raid10Layout::map
    pub fn logical(&self, member: usize, sector: u64) -> Option<u64> {
        if member as u64 >= self.raid_disks || sector >= self.dev_sectors {
            return None;
        }
        let holds = |candidate: u64| {
            candidate < self.array_sectors
                && self.map(candidate).iter().any(|e| e.member == member && e.sector == sector)
        };
        if let Some(candidate) = self.find_virt(member as u64, sector) {
            if holds(candidate) {
                return Some(candidate);
            }
        }
        self.search_virt(sector, holds)
    }

    /// The closed form of `raid10_find_virt`: undo the far shifts, then the near spreading.
    fn find_virt(&self, member: u64, sector: u64) -> Option<u64> {
        let chunk = self.chunk();
        let in_chunk = sector & (chunk - 1);
        let remainder = self.raid_disks % self.far_set_size;
        let mut set_start = member / self.far_set_size * self.far_set_size;
        let mut set_size = self.far_set_size;
        if remainder != 0 {
            let last_set_start = (self.raid_disks / self.far_set_size - 1) * self.far_set_size;
            if member >= last_set_start {
                set_start = last_set_start;
                set_size = self.far_set_size + remainder;
            }
        }
        let mut dev = member as i64;
        let row;
        if self.format.offset {
            let member_row = sector >> self.chunk_shift;
            let copy = (member_row % self.far) as i64;
            row = member_row / self.far;
            dev -= copy * self.near as i64;
            if dev < set_start as i64 {
                dev += set_size as i64;
            }
        } else {
            let copy = sector / self.stride.max(1);
            if copy >= self.far {
                return None;
            }
            for _ in 0..copy {
                if dev < (self.near + set_start) as i64 {
                    dev += (set_size - self.near) as i64;
                } else {
                    dev -= self.near as i64;
                }
            }
            row = (sector - copy * self.stride) >> self.chunk_shift;
        }
        if dev < 0 {
            return None;
        }
        let vchunk = (row * self.raid_disks + dev as u64) / self.near;
        Some((vchunk << self.chunk_shift) + in_chunk)
    }

    /// Checks every virtual chunk whose copies can land on the chunk row of `sector`.
    fn search_virt(&self, sector: u64, holds: impl Fn(u64) -> bool) -> Option<u64> {
        let in_chunk = sector & (self.chunk() - 1);
        let member_row = sector >> self.chunk_shift;
        let stride_rows = self.stride >> self.chunk_shift;
        let r = self.raid_disks;
        for copy in 0..self.far {
            // Row offset of far copy `copy`, plus 0 or 1 for a near copy that wrapped.
            let far_rows = if self.format.offset { copy } else { copy * stride_rows };
            for wrap in 0..=1u64 {
                let Some(grid_row) = member_row.checked_sub(far_rows + wrap) else {
                    continue;
                };
                let grid_row = if self.format.offset {
                    if grid_row % self.far != 0 {
                        continue;
                    }
                    grid_row / self.far
                } else {
                    grid_row
                };
                // Virtual chunks whose first copy starts in `grid_row`.
                let first = (grid_row * r).div_ceil(self.near);
                let last = ((grid_row + 1) * r).div_ceil(self.near);
                for vchunk in first..last {
                    let candidate = (vchunk << self.chunk_shift) + in_chunk;
                    if holds(candidate) {
                        return Some(candidate);
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn near_copies_only_of_near_layouts() {
        assert_eq!(Raid10Format::near_copies(0x102), Some(2));
        assert_eq!(Raid10Format::near_copies(0x103), Some(3));
        assert_eq!(Raid10Format::near_copies(0x201), None, "far 2");
        assert_eq!(Raid10Format::near_copies(0x10201), None, "offset 2");
        assert_eq!(Raid10Format::near_copies(-1), None);
    }

    use super::*;

    fn members(extents: &[Extent]) -> Vec<(usize, u64)> {
        extents.iter().map(|e| (e.member, e.sector)).collect()
    }

    #[test]
    fn layout_words_match_mdadm() {
        assert_eq!(Raid10Format::parse("n2").unwrap().to_md(), 0x102);
        assert_eq!(Raid10Format::parse("f2").unwrap().to_md(), 0x201);
        assert_eq!(Raid10Format::parse("o2").unwrap().to_md(), 0x10201);
        assert_eq!(Raid10Format::parse("near=2").unwrap().to_md(), 0x102);
        assert_eq!(Raid10Format::parse("offset=3").unwrap().to_md(), 0x10301);
        assert_eq!(Raid10Format::parse("n2f2").unwrap().to_md(), 0x202);
        assert_eq!(Raid10Format::parse("near=2, far=2").unwrap().to_md(), 0x202);
        assert_eq!(Raid10Format::parse("258").unwrap().to_md(), 258);
        assert!(Raid10Format::parse("x2").is_err());
        assert!(Raid10Format::parse("n1").is_err());
        assert!(Raid10Format::parse("f2o2").is_err());
        assert_eq!(Raid10Format::from_md(0x102).unwrap().to_string(), "near=2");
        assert_eq!(Raid10Format::from_md(0x201).unwrap().to_string(), "far=2");
        assert_eq!(Raid10Format::from_md(0x10201).unwrap().to_string(), "offset=2");
        assert_eq!(Raid10Format::from_md(0x202).unwrap().to_string(), "near=2, far=2");
        assert!(Raid10Format::from_md(0x101).is_err());
        assert!(Raid10Format::from_md(0x200).is_err());
        assert!(Raid10Format::from_md(3 << 17 | 0x102).is_err());
    }

    #[test]
    fn display_parses_back() {
        for word in [0x102, 0x103, 0x201, 0x301, 0x10201, 0x202, 0x10202, 2 << 17 | 0x201] {
            let format = Raid10Format::from_md(word).unwrap();
            assert_eq!(Raid10Format::parse(&format.to_string()), Ok(format), "{format}");
        }
    }

    #[test]
    fn near2_on_three_members() {
        let layout = Raid10Layout::new(3, 128, Raid10Format::NEAR2, 6144).unwrap();
        assert_eq!(layout.array_sectors(), 9216);
        assert_eq!(members(&layout.map(0)), vec![(0, 0), (1, 0)]);
        assert_eq!(members(&layout.map(128)), vec![(2, 0), (0, 128)]);
        assert_eq!(members(&layout.map(256)), vec![(1, 128), (2, 128)]);
        assert_eq!(layout.logical(0, 130), Some(130));
    }

    #[test]
    fn far2_on_four_members() {
        let layout = Raid10Layout::new(4, 128, Raid10Format::parse("f2").unwrap(), 6144).unwrap();
        assert_eq!(layout.array_sectors(), 12288);
        assert_eq!(layout.stride(), 3072);
        assert_eq!(members(&layout.map(0)), vec![(0, 0), (1, 3072)]);
        assert_eq!(members(&layout.map(3 * 128)), vec![(3, 0), (0, 3072)]);
        assert_eq!(layout.logical(0, 3072), Some(384));
    }

    #[test]
    fn offset2_on_four_members() {
        let layout = Raid10Layout::new(4, 128, Raid10Format::parse("o2").unwrap(), 6144).unwrap();
        assert_eq!(members(&layout.map(0)), vec![(0, 0), (1, 128)]);
        assert_eq!(members(&layout.map(4 * 128)), vec![(0, 256), (1, 384)]);
        assert_eq!(layout.logical(1, 384), Some(512));
    }

    #[test]
    fn refuses_what_md_refuses() {
        let f3 = Raid10Format::parse("f3").unwrap();
        assert!(matches!(
            Raid10Layout::new(2, 128, f3, 6144),
            Err(LayoutError::Raid10TooFewDevices { copies: 3, raid_disks: 2, .. })
        ));
        assert!(matches!(
            Raid10Layout::new(4, 24, Raid10Format::NEAR2, 6144),
            Err(LayoutError::ChunkNotPowerOfTwo { .. })
        ));
        assert!(matches!(Raid10Layout::new(4, 4, Raid10Format::NEAR2, 6144), Err(LayoutError::ChunkTooSmall { .. })));
    }
}
