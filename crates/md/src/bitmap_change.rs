//! md's internal write-intent bitmap added to, removed from, or resized with a stopped array:
//! where mdadm's `--grow --bitmap=internal` puts a new one (`add_internal_bitmap1` for a live
//! array, `add_internal_bitmap0`) and what it writes there, what `--bitmap=none` leaves (md's
//! superblock update without the bitmap), and how md's `md_bitmap_resize` follows a new size.

use uraid_md_format::bitmap::{self, BitmapSuper};
use uraid_md_format::create::bitmap_chunk;
use uraid_md_format::sb1::feature;
use uraid_md_format::{sb090, MetadataVersion, Superblock, SECTOR};

use crate::metadata::bitmap_byte_offset;
use crate::offline_change::{stamped, AreaWrite, OfflineChange, StoppedMember};

/// Sectors a 0.90 bitmap may take after its superblock's first 4 KiB (md's `default_space`).
const SPACE_090: u64 = 64 * 2 - 8;
/// Most sectors mdadm gives a new bitmap when no chunk is asked for (128 KiB).
const DEFAULT_ROOM_LIMIT: u64 = 128 * 2;
/// The largest bitmap chunk md's `bitmap_super_t` can hold before its shift overflows.
const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// Why a bitmap cannot be added, removed or resized. Nothing is written after one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BitmapChangeError {
    #[error("a bitmap is already present (remove it first with --bitmap=none)")]
    AlreadyPresent,
    #[error("no bitmap found: there is nothing to remove")]
    Absent,
    #[error("bitmaps are not meaningful with {0}: it has no redundancy to resync")]
    Level(String),
    #[error("cannot add a bitmap to an array with a partial parity log (consistency policy ppl)")]
    Ppl,
    #[error("cannot add a bitmap to an array with a write journal")]
    Journal,
    #[error("{device}: no room for an internal bitmap: {detail}")]
    NoRoom { device: String, detail: String },
    #[error("{0}")]
    Chunk(String),
}

/// Sectors a new bitmap covers, as mdadm's `Grow_addbitmap` counts them: the used size of a
/// member, and for raid10 the array (members times used size over copies).
pub fn new_bitmap_sectors(level: i32, layout: i32, raid_disks: u32, component_sectors: u64) -> u64 {
    if level == 10 {
        let copies = u64::from(((layout & 255) * ((layout >> 8) & 255)).max(1) as u32);
        component_sectors * u64::from(raid_disks) / copies
    } else {
        component_sectors
    }
}

/// Where a new bitmap goes on a member, before its chunk is known.
struct Placement {
    /// Sectors from the superblock; `None`: before the superblock, placed once the bitmap's
    /// size is known (1.0).
    offset: Option<i32>,
    /// Sectors the bitmap may take.
    room: u64,
    /// Sectors kept for the bad-block log below the superblock (1.0, movable placement).
    bad_block_log: u64,
}

/// `add_internal_bitmap1` for a running array whose bitmap location md lets mdadm set, and
/// `add_internal_bitmap0`.
fn placement(sb: &Superblock, chunk_given: bool) -> Placement {
    let mut p = match sb {
        Superblock::V090(_) => Placement { offset: Some(8), room: SPACE_090, bad_block_log: 0 },
        Superblock::V1(sb) if sb.version == MetadataVersion::V1_0 => {
            let room = sb.super_offset.saturating_sub(sb.data_offset + sb.data_size);
            let bbl = u64::from(sb.bblog_size).max(8).max(u64::from(sb.bblog_offset.min(0).unsigned_abs()));
            if room < 3 * 2 && sb.max_dev <= 384 {
                // No gap below the superblock: 3 KiB of its own 4 KiB block, 1 KiB in.
                Placement { offset: Some(2), room: 3 * 2, bad_block_log: 0 }
            } else {
                Placement { offset: None, room: room.saturating_sub(bbl), bad_block_log: bbl }
            }
        }
        Superblock::V1(sb) => {
            let mut room = sb.data_offset.saturating_sub(sb.super_offset);
            let mut bbl = u64::from(sb.bblog_size);
            if bbl != 0 {
                room = (i64::from(sb.bblog_offset) + bbl as i64).max(0) as u64;
            } else {
                bbl = 8;
            }
            // 4 KiB left for the superblock, the bad-block log after the bitmap.
            Placement { offset: Some(8), room: room.saturating_sub(8).saturating_sub(bbl), bad_block_log: 0 }
        }
    };
    if !chunk_given {
        p.room = p.room.min(DEFAULT_ROOM_LIMIT);
    }
    p
}

/// mdadm's `--grow --bitmap=internal` on a stopped array: a bitmap header and every bit set
/// (mdadm's `write_bitmap`: md then finds nothing to resync on a clean array, and a member that
/// comes back later is rebuilt in full) on every member, then the superblocks naming it.
/// `chunk` is `--bitmap-chunk` in bytes. The bitmap covers `sectors` (see
/// [`new_bitmap_sectors`]).
pub fn add(
    members: &[StoppedMember],
    sectors: u64,
    chunk: Option<u64>,
    utime: u64,
) -> Result<OfflineChange, BitmapChangeError> {
    let info = members.first().expect("an array has members").superblock.info();
    if info.level <= 0 {
        return Err(BitmapChangeError::Level(if info.level == 0 { "raid0".into() } else { "linear".into() }));
    }
    if info.ppl.is_some() {
        return Err(BitmapChangeError::Ppl);
    }
    if info.feature_map & feature::JOURNAL != 0 {
        return Err(BitmapChangeError::Journal);
    }
    if members.iter().any(|m| m.superblock.info().bitmap_offset.is_some()) {
        return Err(BitmapChangeError::AlreadyPresent);
    }
    let mut superblocks = stamped(members, utime);
    let mut areas = Vec::with_capacity(members.len());
    // mdadm passes the chunk chosen for the first member on to the others.
    let mut chosen = chunk;
    for (m, sb) in members.iter().zip(&mut superblocks) {
        let p = placement(sb, chunk.is_some());
        if p.room <= 1 {
            return Err(no_room(m, "the space beside its superblock is taken".into()));
        }
        let room_bytes = p.room * SECTOR;
        let size = bitmap_chunk(chosen, sectors, room_bytes, &format!("the {} KiB it has", room_bytes / 1024))
            .map_err(|e| BitmapChangeError::Chunk(format!("{}: {}", m.name, strip_create(&e.to_string()))))?;
        chosen = Some(u64::from(size));
        let header = BitmapSuper::new(bitmap_uuid(sb), sectors, size);
        let offset = match p.offset {
            Some(o) => i64::from(o),
            None => {
                let bits = sectors * SECTOR / u64::from(size) + 1;
                let blocks = (bits.div_ceil(8) + bitmap::HEADER_BYTES as u64).div_ceil(4096);
                -((blocks * 8 + p.bad_block_log) as i64)
            }
        };
        let sb_info = sb.info();
        let start = sb_info.super_offset as i64 + offset;
        let image = image_of(&header, &vec![0xff; header.bits_bytes()]);
        let end = start + (image.len() as u64 / SECTOR) as i64;
        // The bitmap must stay clear of the data (before the superblock on 1.0, after the
        // superblock and before the data on 1.1/1.2).
        let data_start = sb_info.data_offset as i64;
        let data_end = data_start + sb_info.avail_sectors as i64;
        if start < data_end && end > data_start {
            return Err(no_room(
                m,
                format!(
                    "a {} KiB bitmap at sector {start} would overlap the data (sectors {data_start}..{data_end})",
                    image.len() / 1024
                ),
            ));
        }
        let at = start as u64 * SECTOR;
        match sb {
            Superblock::V1(sb1) => {
                sb1.feature_map |= feature::BITMAP_OFFSET;
                sb1.bitmap_offset = offset as i32;
            }
            Superblock::V090(sb0) => sb0.state |= sb090::state::BITMAP_PRESENT,
        }
        areas.push(vec![AreaWrite { offset: at, bytes: image, what: "bitmap" }]);
    }
    Ok(OfflineChange { areas, superblocks })
}

/// The array UUID as md compares it with a bitmap's: 1.x `set_uuid`, 0.90's words as they lie
/// in its superblock (not mdadm's display order).
fn bitmap_uuid(sb: &Superblock) -> [u8; 16] {
    match sb {
        Superblock::V090(sb0) => sb0.md_uuid(),
        Superblock::V1(sb1) => sb1.set_uuid,
    }
}

fn no_room(m: &StoppedMember, detail: String) -> BitmapChangeError {
    BitmapChangeError::NoRoom { device: m.name.clone(), detail }
}

/// The create rules' message without their "cannot create array" lead.
fn strip_create(text: &str) -> &str {
    text.strip_prefix("cannot create array: ").unwrap_or(text)
}

/// `--bitmap=none`: the superblocks no longer name a bitmap (1.x feature bit and offset, 0.90
/// state bit), as md writes them once it has let the bitmap go. The bitmap's bytes stay where
/// they were, unused, as md leaves them.
pub fn remove(members: &[StoppedMember], utime: u64) -> Result<OfflineChange, BitmapChangeError> {
    if !members.iter().any(|m| m.superblock.info().bitmap_offset.is_some()) {
        return Err(BitmapChangeError::Absent);
    }
    let mut superblocks = stamped(members, utime);
    for sb in &mut superblocks {
        match sb {
            Superblock::V1(sb1) => {
                sb1.feature_map &= !feature::BITMAP_OFFSET;
                sb1.bitmap_offset = 0;
            }
            Superblock::V090(sb0) => sb0.state &= !sb090::state::BITMAP_PRESENT,
        }
    }
    Ok(OfflineChange { areas: vec![Vec::new(); members.len()], superblocks })
}

/// The bitmap a member holds, as a size change finds it.
#[derive(Debug, Clone)]
pub struct BitmapNow {
    pub header: BitmapSuper,
    /// The bits after the header (at least enough for the header's chunks).
    pub bits: Vec<u8>,
}

/// md's `md_bitmap_resize` for an array whose bitmap covered `old_sectors` and now covers
/// `new_sectors` (member sectors; array sectors for raid10): the chunk is kept while the bits
/// fit the space md knows of, and doubled until they do; the bits already set carry over to
/// the chunks that hold them, and with `mark_new` every chunk reaching past the old end is set,
/// so the resync that md runs from there covers the new space. `reference` is the superblock
/// the space is read from; `sb_events` the events it held before the change, `events` the ones
/// the change records.
pub fn resize(
    now: &BitmapNow,
    reference: &Superblock,
    old_sectors: u64,
    new_sectors: u64,
    mark_new: bool,
    sb_events: u64,
    events: u64,
) -> Result<(BitmapSuper, Vec<u8>), BitmapChangeError> {
    let old = &now.header;
    let space = bitmap_space(reference, old, old_sectors);
    let mut chunk = u64::from(old.chunksize);
    let new_chunks = loop {
        let chunks = bitmap::chunks(new_sectors, chunk as u32);
        if chunks.div_ceil(8) + bitmap::HEADER_BYTES as u64 <= space * SECTOR {
            break chunks;
        }
        chunk *= 2;
        if chunk > MAX_CHUNK_BYTES {
            return Err(BitmapChangeError::NoRoom {
                device: "the bitmap".into(),
                detail: format!("{space} sectors cannot cover {new_sectors} sectors with any chunk md accepts"),
            });
        }
    };
    let old_chunks = bitmap::chunks(old_sectors, old.chunksize);
    let scale = chunk / u64::from(old.chunksize);
    let mut bits = vec![0u8; new_chunks.div_ceil(8) as usize];
    for i in (0..old_chunks).filter(|&i| bitmap::is_dirty(&now.bits, i)) {
        bitmap::set_dirty(&mut bits, i / scale, true);
    }
    if mark_new {
        for j in (old_sectors * SECTOR / chunk)..new_chunks {
            bitmap::set_dirty(&mut bits, j, true);
        }
    }
    let mut header = old.clone();
    // A bitmap already behind its superblock stays known as stale once it carries new events.
    if old.events < sb_events {
        header.state |= bitmap::state::STALE;
    }
    header.chunksize = chunk as u32;
    header.sync_size = new_sectors;
    header.events = events;
    header.sectors_reserved = space as u32;
    Ok((header.clone(), image_of(&header, &bits)))
}

/// The sectors md lets a bitmap take when it resizes it (`super_*_validate`'s space, then
/// `md_bitmap_read_sb`'s `sectors_reserved` and `md_bitmap_resize`'s fallback: what the bitmap
/// takes now, rounded up to a sector).
fn bitmap_space(reference: &Superblock, header: &BitmapSuper, old_sectors: u64) -> u64 {
    let info = reference.info();
    let mut space = match (reference, info.bitmap_offset) {
        (Superblock::V090(_), _) => SPACE_090,
        (Superblock::V1(sb), Some(offset)) if sb.version == MetadataVersion::V1_0 => {
            if offset > 0 {
                (8 - i64::from(offset)).max(0) as u64
            } else {
                u64::from(offset.unsigned_abs())
            }
        }
        _ => 0,
    };
    let reserved = u64::from(header.sectors_reserved);
    if space == 0 || space > reserved {
        space = reserved;
    }
    if space == 0 {
        let chunks = bitmap::chunks(old_sectors, header.chunksize);
        space = (chunks.div_ceil(8) + bitmap::HEADER_BYTES as u64).div_ceil(SECTOR);
    }
    space
}

/// The bytes written at a bitmap's offset: the header, the bits, zeros to the next sector.
fn image_of(header: &BitmapSuper, bits: &[u8]) -> Vec<u8> {
    let mut out = header.to_bytes().to_vec();
    out.extend_from_slice(bits);
    out.resize((out.len() as u64).div_ceil(SECTOR) as usize * SECTOR as usize, 0);
    out
}

/// Byte offset of member `sb`'s bitmap, when it names one.
pub fn bitmap_at(sb: &Superblock) -> Option<u64> {
    let info = sb.info();
    info.bitmap_offset.map(|o| bitmap_byte_offset(info.super_offset * SECTOR, o))
}
