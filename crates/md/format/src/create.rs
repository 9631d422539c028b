//! mdadm 4.2's rules for the superblocks of a new array (`mdadm --create`).
//!
//! The rules follow mdadm's `Create.c` (defaults, size selection, `missing` members and spares,
//! the recovery trick for raid4/5 and for raid6 missing one member), `super1.c`
//! (`validate_geometry1`: default data offset and usable size; `init_super1`: `max_dev`;
//! `add_internal_bitmap1`: bitmap chunk and position; `write_init_super1`: data size,
//! bad-block log, raid0 layout flag, PPL area; `write_init_ppl1`: the initial PPL header),
//! `choose_bm_space`, and for 0.90 `super0.c` (in `create/v090.rs`).
//!
//! The result is what the superblocks look like once md has finished the initial sync of a
//! new array, except that `events` is mdadm's (0 for 1.x, 1 for 0.90), `utime` equals `ctime`
//! and arrays with redundancy left are marked as needing a resync: see [`plan`] and
//! [`CreatePlan::starts_in_sync`].

use crate::bitmap::{self, BitmapSuper};
use crate::ppl::{self, PplHeader};
use crate::sb1::{self, feature, Superblock1};
use crate::{role_code, FormatError, MetadataVersion, Superblock, MAX_SECTOR, MD_SB_MAGIC, SECTOR};

mod v090;

/// mdadm's default chunk for striped levels (`DEFAULT_CHUNK`), in KiB.
pub const DEFAULT_CHUNK_KIB: u64 = 512;
/// mdadm's smallest default bitmap chunk for internal bitmaps, in bytes.
pub const DEFAULT_BITMAP_CHUNK: u64 = 64 << 20;
/// raid0's original multi-zone layout (`RAID0_ORIG_LAYOUT`), mdadm 4.2's default.
pub const RAID0_ORIG_LAYOUT: i32 = 1;
/// raid5/6 left-symmetric, mdadm's default layout.
pub const LAYOUT_LEFT_SYMMETRIC: i32 = 2;
/// raid10 near=2, mdadm's default layout.
pub const LAYOUT_RAID10_N2: i32 = 0x102;
/// Sectors mdadm reserves for the PPL of a new 1.x array (`MULTIPLE_PPL_AREA_SIZE_SUPER1`,
/// 1 MiB); md uses an area this big as a ring of several PPLs (`MD_FEATURE_MULTIPLE_PPLS`).
pub const PPL_AREA_SECTORS: u64 = 2048;

/// How md keeps parity or mirrors consistent across a crash (mdadm's `--consistency-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsistencyPolicy {
    /// No log: after an unclean shutdown the whole array is resynced.
    Resync,
    /// An internal write-intent bitmap (`--bitmap=internal`): only dirty regions are resynced.
    Bitmap,
    /// A partial parity log on every member (raid5 in md; uraid also runs it for raid4 and
    /// raid6): the write hole is closed without a resync.
    Ppl,
}

impl ConsistencyPolicy {
    /// mdadm's name: "resync", "bitmap", "ppl".
    pub fn name(self) -> &'static str {
        match self {
            ConsistencyPolicy::Resync => "resync",
            ConsistencyPolicy::Bitmap => "bitmap",
            ConsistencyPolicy::Ppl => "ppl",
        }
    }

    /// Parse mdadm's name (see [`ConsistencyPolicy::name`]).
    pub fn parse(s: &str) -> Option<ConsistencyPolicy> {
        match s {
            "resync" => Some(ConsistencyPolicy::Resync),
            "bitmap" => Some(ConsistencyPolicy::Bitmap),
            "ppl" => Some(ConsistencyPolicy::Ppl),
            _ => None,
        }
    }
}

/// What a user chose (mdadm flags); everything else follows mdadm 4.2's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateSpec {
    /// `--metadata`: 1.0, 1.1 or 1.2.
    pub version: MetadataVersion,
    /// `--level`: -1 linear, 0, 1, 4, 5, 6, 10.
    pub level: i32,
    /// `--layout` as md's number; -1 for mdadm's default (raid5/6 left-symmetric, raid10 n2,
    /// raid0 original, others 0).
    pub layout: i32,
    /// `--chunk` in sectors; 0 for mdadm's default (512 KiB for raid0/4/5/6/10; none for
    /// raid1; for linear this is the rounding).
    pub chunk_sectors: u32,
    /// `--raid-devices`; members beyond this are spares.
    pub raid_disks: u32,
    /// `--uuid`.
    pub array_uuid: [u8; 16],
    /// The name as stored: already "host:name" or plain (see [`stored_name`]).
    pub name: String,
    /// Creation time, unix seconds.
    pub ctime: u64,
    /// `--size` in sectors; `None` for the largest that fits all members (mdadm's rules,
    /// including rounding to the chunk and, for raid1, to 64 KiB).
    pub component_sectors: Option<u64>,
    /// `--bitmap=internal`.
    pub bitmap: bool,
    /// `--data-offset` in sectors; `None` for mdadm's default.
    pub data_offset: Option<u64>,
    /// `--bitmap-chunk` in bytes (a power of two, at least 4 KiB); `None` for mdadm's default
    /// (64 MiB, or larger when the bitmap would not fit).
    pub bitmap_chunk: Option<u64>,
}

/// Where things go on one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberLayout {
    /// Descriptor number of this member (its index in `dev_roles`).
    pub dev_number: u32,
    /// Byte offset of the superblock.
    pub super_byte_offset: u64,
    /// Data start and size in sectors.
    pub data_offset: u64,
    pub data_size: u64,
    /// Byte offset of the bitmap header on this member, and the bytes mdadm writes there
    /// (header plus bits, rounded up to 4 KiB).
    pub bitmap: Option<(u64, usize)>,
    /// Byte offset and length of the area reserved for the bad-block log. mdadm does not write
    /// it; md reads it only once `MD_FEATURE_BAD_BLOCKS` is set, so it can be left alone.
    pub bad_block_log: Option<(u64, usize)>,
    /// The PPL area: byte offset on this member and byte length (see
    /// [`CreatePlan::ppl_image`] for what goes there).
    pub ppl: Option<(u64, u64)>,
}

/// The superblocks of a new array and everything a writer needs besides them.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatePlan {
    /// One per member, in the order of the device list given to [`plan`].
    pub superblocks: Vec<Superblock>,
    /// The superblock "size": sectors of each member used (0 for linear and raid0).
    pub component_sectors: u64,
    /// The bitmap header, its byte offset on member 0 (see `members` for the others: with 1.0
    /// it depends on the device size) and the bytes after the header that mdadm writes with
    /// 0xff (every chunk dirty, so md resyncs everything on first start).
    pub bitmap: Option<(BitmapSuper, u64, usize)>,
    /// Placement on every member, same order as `superblocks`.
    pub members: Vec<MemberLayout>,
    /// The layout and chunk actually used (after defaults).
    pub layout: i32,
    pub chunk_sectors: u32,
    /// Whether md would start this array with nothing to resync (mdadm marks it clean): linear
    /// and raid0, and raid4/5/6 missing as many members as they can lose, which leaves no
    /// redundancy to make consistent. The superblocks say so (`resync_offset` MaxSector, the
    /// 0.90 clean bit); the others are marked as needing a resync.
    pub starts_in_sync: bool,
    /// The raid slots created empty (`missing`): the array starts degraded.
    pub missing_slots: Vec<usize>,
}

/// One entry of the device list of a new array, as `mdadm --create` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewMember {
    /// A device of `bytes` bytes, with the device UUID its 1.x superblock gets (0.90 has none).
    Device { bytes: u64, uuid: [u8; 16] },
    /// mdadm's `missing`: the raid slot stays empty and the array starts degraded.
    Missing,
}

/// Bytes to write on a member before its superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Area {
    /// Byte offset on the member.
    pub offset: u64,
    pub bytes: Vec<u8>,
    /// What the area is ("bitmap", "ppl"), for messages.
    pub what: &'static str,
}

impl CreatePlan {
    /// What mdadm writes on member `member` besides the superblock: the bitmap header and
    /// its 0xff-filled bits when there is an internal bitmap; the zeroed PPL area with an
    /// empty PPL header at its start when there is a PPL. The superblock itself
    /// (`superblocks[member].to_bytes()` at `members[member].super_byte_offset`) goes last.
    pub fn areas_for(&self, member: usize) -> Vec<Area> {
        let mut out = Vec::new();
        let Some(layout) = self.members.get(member) else { return out };
        if let (Some(image), Some((offset, _))) = (self.bitmap_image(), layout.bitmap) {
            out.push(Area { offset, bytes: image, what: "bitmap" });
        }
        if let (Some(image), Some((offset, _))) = (self.ppl_image(), layout.ppl) {
            out.push(Area { offset, bytes: image, what: "ppl" });
        }
        out
    }

    /// The bytes mdadm writes over the PPL area of every member (`write_init_ppl1`): the whole
    /// area zeroed, then an empty header (generation 0, no entries, signed with the array UUID)
    /// at its start. md writes the same when it starts the array (`ppl_write_empty_header`).
    pub fn ppl_image(&self) -> Option<Vec<u8>> {
        let (_, len) = self.members.first()?.ppl?;
        let uuid = self.superblocks.first()?.info().array_uuid;
        let mut out = PplHeader::empty(ppl::signature(&uuid)).to_bytes();
        out.resize(len as usize, 0);
        Some(out)
    }

    /// The bytes mdadm writes at the bitmap position of every member: the header, then 0xff
    /// up to the 4 KiB-rounded bitmap size (`write_bitmap1`).
    pub fn bitmap_image(&self) -> Option<Vec<u8>> {
        let (bms, _, rest) = self.bitmap.as_ref()?;
        let mut out = bms.to_bytes().to_vec();
        out.resize(bitmap::HEADER_BYTES + rest, 0xff);
        Some(out)
    }
}

/// The name mdadm stores (`init_super1`): "homehost:name" when the name has no ':' and the
/// whole fits in 31 bytes (plus NUL in the 32-byte field), else the name cut to 31 bytes.
pub fn stored_name(homehost: &str, name: &str) -> String {
    if !homehost.is_empty() && !name.contains(':') && homehost.len() + 1 + name.len() < 32 {
        format!("{homehost}:{name}")
    } else {
        let mut end = name.len().min(31);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name[..end].to_string()
    }
}

/// Sectors mdadm leaves for a bitmap on a device (or array component) of `sectors` sectors
/// (`choose_bm_space`): 4 KiB, 64 KiB above 8 GiB, 128 KiB from 200 GiB.
pub fn choose_bm_space(sectors: u64) -> u64 {
    if sectors < 64 * 2 {
        0
    } else if sectors - 64 * 2 >= 200 * 1024 * 1024 * 2 {
        128 * 2
    } else if sectors - 4 * 2 > 8 * 1024 * 1024 * 2 {
        64 * 2
    } else {
        4 * 2
    }
}

/// mdadm's default data offset for 1.1/1.2 on a device of `device_sectors` sectors with a
/// chunk of `chunk_kib` KiB (0: none) (`validate_geometry1`): 12 KiB of metadata, the bitmap
/// space, and reshape headroom of 128 MiB, halved while it exceeds 0.1% of the device as long
/// as it stays at least four chunks; rounded up to 1 MiB.
pub fn default_data_offset(device_sectors: u64, chunk_kib: u64) -> u64 {
    data_offset_reserving(device_sectors, chunk_kib, choose_bm_space(device_sectors))
}

/// [`default_data_offset`] with `bm_space` sectors reserved after the superblock (mdadm's
/// `bmspace`: the bitmap space, or [`PPL_AREA_SECTORS`] for a PPL).
fn data_offset_reserving(device_sectors: u64, chunk_kib: u64, bm_space: u64) -> u64 {
    let mut headroom: u64 = 128 * 1024 * 2;
    while (headroom << 10) > device_sectors && (chunk_kib == 0 || headroom / 2 >= chunk_kib * 2 * 2) {
        headroom >>= 1;
    }
    (12 * 2 + bm_space + headroom).div_ceil(2048) * 2048
}

fn default_layout(level: i32) -> i32 {
    match level {
        0 => RAID0_ORIG_LAYOUT,
        5 | 6 => LAYOUT_LEFT_SYMMETRIC,
        10 => LAYOUT_RAID10_N2,
        _ => 0,
    }
}

fn level_text(level: i32) -> String {
    match level {
        -1 => "linear".to_string(),
        n => format!("raid{n}"),
    }
}

/// The bitmap chunk `add_internal_bitmap` chooses for `bitmap_sectors` of each member: the
/// smallest power of two of at least 4 KiB whose bits fit in `room_bytes` beside the header,
/// and at least 64 MiB unless `given` (checked against the same bounds). `room` names the
/// space in messages.
pub fn bitmap_chunk(given: Option<u64>, bitmap_sectors: u64, room_bytes: u64, room: &str) -> Result<u32, FormatError> {
    let max_bits = (room_bytes - bitmap::HEADER_BYTES as u64) * 8;
    let mut min_chunk: u64 = 4096;
    let mut bits = bitmap_sectors * SECTOR / min_chunk + 1;
    while bits > max_bits {
        min_chunk *= 2;
        bits = bits.div_ceil(2);
    }
    let chunk = match given {
        Some(c) if !c.is_power_of_two() || c < 4096 => {
            return fail(format!("bitmap chunk {c} bytes is not a power of two of at least 4096"));
        }
        Some(c) if c < min_chunk => {
            return fail(format!(
                "bitmap chunk {c} bytes is too small: the bitmap would not fit in {room}; at least {min_chunk}"
            ));
        }
        Some(c) => c,
        None => min_chunk.max(DEFAULT_BITMAP_CHUNK),
    };
    u32::try_from(chunk).or_else(|_| fail(format!("bitmap chunk {chunk} bytes is too large")))
}

fn fail<T>(message: impl Into<String>) -> Result<T, FormatError> {
    Err(FormatError::Create(message.into()))
}

/// Chosen bitmap header and its offset from the superblock (`add_internal_bitmap1`, creating).
fn plan_bitmap(spec: &CreateSpec, size_sectors: u64, bitmap_sectors: u64) -> Result<(BitmapSuper, i32), FormatError> {
    // When creating, mdadm reserves choose_bm_space(size) plus 8 sectors of bad-block log and
    // takes the log back out; with no chunk requested the bitmap is limited to 128 KiB.
    let room = choose_bm_space(size_sectors).min(128 * 2);
    if room <= 1 {
        return fail("no room for an internal bitmap on such small members");
    }
    let chunk32 = bitmap_chunk(spec.bitmap_chunk, bitmap_sectors, room * 512, &format!("the {} KiB it has", room / 2))?;
    let offset = match spec.version {
        MetadataVersion::V1_0 => {
            // Before the superblock, 4 KiB aligned, below the 8-sector bad-block log.
            let bits = bitmap_sectors * 512 / u64::from(chunk32) + 1;
            let blocks = (bits.div_ceil(8) + bitmap::HEADER_BYTES as u64).div_ceil(4096);
            -((blocks * 8) as i64) - 8
        }
        _ => 8,
    };
    Ok((BitmapSuper::new(spec.array_uuid, bitmap_sectors, chunk32), offset as i32))
}

/// Plan the superblocks of a new array on members of `device_bytes` bytes, with device UUIDs
/// `device_uuids` (one per member, in the same order).
///
/// Member `i` is raid slot `i` for `i < raid_disks` and a spare after that. Descriptor
/// numbers follow mdadm: member `i` gets number `i`, except that for raid4/5 mdadm builds the
/// last slot by recovery onto a spare, so that member gets number `members` (one past the
/// others) and the slot's own descriptor stays unused, as in the arrays mdadm makes. For a
/// device list with `missing` entries see [`plan_members`]; for 0.90 metadata, where md
/// numbers descriptors its own way (`create/v090.rs`).
///
/// Data offset, data size, superblock position, bad-block log, bitmap position and chunk,
/// `max_dev` and the feature map (`BITMAP_OFFSET`, `RAID0_LAYOUT` for raid0 members of
/// different sizes) are what mdadm 4.2 writes for these device sizes. `events` is 0 and
/// `utime` equals `ctime` as mdadm writes them. `resync_offset` is MaxSector for linear and
/// raid0 and 0 (needs resync) for levels with redundancy: a writer that has made mirrors or
/// parity consistent marks the superblocks clean with [`Superblock::set_clean`]; otherwise
/// md resyncs on first start.
pub fn plan(spec: &CreateSpec, device_bytes: &[u64], device_uuids: &[[u8; 16]]) -> Result<CreatePlan, FormatError> {
    let policy = if spec.bitmap { ConsistencyPolicy::Bitmap } else { ConsistencyPolicy::Resync };
    plan_with_policy(spec, policy, device_bytes, device_uuids)
}

/// [`plan`] with a consistency policy: [`ConsistencyPolicy::Bitmap`] is `spec.bitmap` (an
/// internal bitmap), [`ConsistencyPolicy::Ppl`] a partial parity log as mdadm 4.2's
/// `--consistency-policy=ppl` makes it:
///
/// - every member reserves [`PPL_AREA_SECTORS`] (1 MiB) for it instead of bitmap space
///   (`validate_geometry1`), so the default data offset of 1.1/1.2 and the usable size of 1.0
///   members account for 1 MiB;
/// - 1.1/1.2: the PPL starts 8 sectors (4 KiB) after the superblock, the bad-block log right
///   after the PPL; 1.0: the PPL ends 8 sectors before the superblock, just below the
///   bad-block log (`write_init_super1`);
/// - the superblock has `MD_FEATURE_PPL` and the PPL's offset and size in the union with
///   `bitmap_offset`. mdadm never sets `MD_FEATURE_MULTIPLE_PPLS`: md switches to it when it
///   runs an array whose PPL area holds at least two 132 KiB PPLs, as 1 MiB does;
/// - the area is zeroed and gets an empty header ([`CreatePlan::ppl_image`]).
///
/// PPL is refused with 0.90 metadata (no room), with a bitmap, for levels other than 4, 5 and
/// 6 (md runs PPL on raid5 only; raid4 and raid6 are uraid's own), and where the PPL would
/// overlap the data or the bad-block log (an explicit `--data-offset` too small for it).
pub fn plan_with_policy(
    spec: &CreateSpec,
    policy: ConsistencyPolicy,
    device_bytes: &[u64],
    device_uuids: &[[u8; 16]],
) -> Result<CreatePlan, FormatError> {
    if device_uuids.len() != device_bytes.len() {
        return fail(format!("{} device UUIDs for {} devices", device_uuids.len(), device_bytes.len()));
    }
    let members: Vec<NewMember> =
        device_bytes.iter().zip(device_uuids).map(|(&bytes, &uuid)| NewMember::Device { bytes, uuid }).collect();
    plan_members(spec, policy, &members)
}

/// [`plan_with_policy`] for a device list that may hold `missing` (mdadm's keyword): the
/// entries of `members` are the list given to `mdadm --create`, the first `raid_disks` of them
/// raid slots (a [`NewMember::Missing`] slot stays empty and the array starts degraded), the
/// rest hot spares, which must be devices.
///
/// As mdadm: linear and raid0 take no missing member and no spare, at least one slot must be
/// filled, and the array must be able to run without its missing members (mdadm's `enough`):
/// raid1 with one copy, raid4/5 without one member, raid6 without two, raid10 with one copy of
/// every chunk. The superblocks of a degraded array record its missing slots as md does (1.x:
/// no entry of the role table holds them; 0.90: their descriptors removed and faulty).
///
/// [`CreatePlan::superblocks`] and [`CreatePlan::members`] hold one entry per device, in list
/// order, `missing` entries skipped. Descriptor numbers are list positions (a missing entry
/// uses one up, as in mdadm), except that the slot mdadm builds by recovery onto a spare
/// (raid4/5 created whole, raid6 missing one member) gets the number after the whole list:
/// mdadm adds that device last. 0.90 numbers descriptors as md rewrites them (`create/v090.rs`).
pub fn plan_members(
    spec: &CreateSpec,
    policy: ConsistencyPolicy,
    members: &[NewMember],
) -> Result<CreatePlan, FormatError> {
    let shape = Shape::check(spec, policy, members)?;
    match spec.version {
        MetadataVersion::V0_90 => v090::plan(spec, &shape, members),
        _ => plan_v1(spec, &shape, members),
    }
}

/// What every version's plan needs, checked once: the geometry after mdadm's defaults and the
/// role of every entry of the device list.
pub(crate) struct Shape {
    pub(crate) level: i32,
    pub(crate) layout: i32,
    pub(crate) policy: ConsistencyPolicy,
    /// Chunk in KiB (mdadm's unit); 0 for none.
    pub(crate) chunk_kib: u64,
    /// `--size` in KiB, rounded down to the chunk; 0 for the largest that fits every member.
    pub(crate) size_kib: u64,
    pub(crate) raid_disks: usize,
    /// The raid slots whose entry is `missing`.
    pub(crate) missing: Vec<usize>,
    /// The slot mdadm builds by recovery onto a spare rather than by a resync (raid4/5 created
    /// whole, raid6 missing one member): its device is added last.
    pub(crate) recovered: Option<usize>,
}

impl Shape {
    fn check(spec: &CreateSpec, policy: ConsistencyPolicy, members: &[NewMember]) -> Result<Shape, FormatError> {
        let version = spec.version;
        let ppl = policy == ConsistencyPolicy::Ppl;
        if spec.bitmap && policy != ConsistencyPolicy::Bitmap {
            return fail(format!("a bitmap is not compatible with consistency policy {}", policy.name()));
        }
        let with_bitmap = policy == ConsistencyPolicy::Bitmap;
        if ppl {
            if version == MetadataVersion::V0_90 {
                return fail("the PPL consistency policy needs 1.x metadata (0.90 has no room for a PPL)");
            }
            if !matches!(spec.level, 4..=6) {
                return fail(format!(
                    "the PPL consistency policy needs raid4, raid5 or raid6, not {}",
                    level_text(spec.level)
                ));
            }
        }
        let n = members.len();
        let rd = spec.raid_disks as usize;
        let level = spec.level;
        if !matches!(level, -1 | 0 | 1 | 4 | 5 | 6 | 10) {
            return fail(format!("unsupported raid level {level}"));
        }
        if rd == 0 {
            return fail("at least one raid device is needed");
        }
        if n < rd {
            return fail(format!("{n} devices given for {rd} raid devices"));
        }
        if level == 6 && rd < 4 {
            return fail("at least 4 raid-devices needed for level 6");
        }
        if level >= 4 && rd < 2 {
            return fail(format!("at least 2 raid-devices needed for level {level}"));
        }
        if level <= 0 && n > rd {
            return fail("this level does not support spare devices");
        }
        if let Some(i) = (rd..n).find(|&i| members[i] == NewMember::Missing) {
            return fail(format!("device {i} is 'missing' but is a spare: only raid slots can be missing"));
        }
        let missing: Vec<usize> = (0..rd).filter(|&i| members[i] == NewMember::Missing).collect();
        if level <= 0 && !missing.is_empty() {
            return fail(format!(
                "{} has no redundancy: it does not support missing devices (slot {} is missing)",
                level_text(level),
                missing[0]
            ));
        }
        if missing.len() == rd {
            return fail("every raid slot is missing: at least one device is needed");
        }
        if with_bitmap && level <= 0 {
            return fail("bitmaps are not meaningful with linear or raid0");
        }
        if version == MetadataVersion::V1_0 && level <= 0 && spec.data_offset.is_some() {
            // mdadm would record a data_size reaching up to the superblock from sector 0, which
            // linear and raid0 use in full: the data would run into the metadata.
            return fail("--data-offset cannot be used with 1.0 metadata for linear or raid0");
        }
        let layout = if spec.layout == -1 { default_layout(level) } else { spec.layout };
        if level == 10 {
            let copies = (layout & 255) * ((layout >> 8) & 255);
            if copies <= 0 || copies as usize > rd {
                return fail(format!("raid10 layout 0x{layout:x} needs more than {rd} devices"));
            }
        }
        if !missing.is_empty() && !survives_missing(level, rd, layout, &missing) {
            let list: Vec<String> = missing.iter().map(|s| s.to_string()).collect();
            return fail(format!(
                "too many missing devices: {} with {rd} raid-devices cannot run without slot(s) {} ({}); the array would hold no complete copy of its data",
                level_text(level),
                list.join(", "),
                survivable_text(level, layout),
            ));
        }
        if spec.chunk_sectors & 1 != 0 {
            return fail("chunk size must be a multiple of 1 KiB");
        }
        // mdadm counts chunk and sizes in KiB.
        let chunk_kib: u64 = match level {
            0 | 4 | 5 | 6 | 10 if spec.chunk_sectors == 0 => DEFAULT_CHUNK_KIB,
            1 if spec.chunk_sectors != 0 => return fail("specifying a chunk size is forbidden for raid1"),
            _ => u64::from(spec.chunk_sectors / 2),
        };
        let mut size_kib = match spec.component_sectors {
            Some(s) if s & 1 != 0 => return fail("size must be a multiple of 1 KiB"),
            Some(s) => s / 2,
            None => 0,
        };
        if size_kib != 0 {
            size_kib = round_to_chunk(size_kib, chunk_kib);
            if size_kib == 0 {
                return fail("size cannot be smaller than the chunk");
            }
        }
        // Create.c: raid4/5 are built by recovering the last slot onto a spare, and so is a
        // raid6 missing one member (else md could not build it): that member is added last.
        let recovered = match (level, missing.as_slice()) {
            (4 | 5, []) => Some(rd - 1),
            (6, [gone]) if *gone == rd - 1 => Some(rd - 2),
            (6, [_]) => Some(rd - 1),
            _ => None,
        };
        Ok(Shape { level, layout, policy, chunk_kib, size_kib, raid_disks: rd, missing, recovered })
    }

    /// Whether md would start the array with nothing to resync: linear and raid0, and raid4/5/6
    /// missing as many members as they can lose (no redundancy is left to make consistent).
    /// mdadm marks those clean (`Create.c`); md resyncs the others on first start.
    pub(crate) fn starts_in_sync(&self) -> bool {
        let max_missing = match self.level {
            4 | 5 => 1,
            6 => 2,
            _ => usize::MAX,
        };
        self.level <= 0 || self.missing.len() == max_missing
    }

    /// The descriptor number of list entry `i` (see [`plan_members`]).
    pub(crate) fn dev_number(&self, i: usize, entries: usize) -> u32 {
        if Some(i) == self.recovered {
            entries as u32
        } else {
            i as u32
        }
    }
}

/// `kib` rounded down to the chunk as mdadm does it (`Create.c`, a mask: exact for the power
/// of two chunks every level but raid0 requires; 0: no chunk).
/// Create.c's size per device, from each device's room for data past its metadata (KiB,
/// rounded to the chunk), as `(device, room)`: every device must hold `size_kib` when it is
/// given; otherwise the smallest room is taken (raid1 rounded to 64 KiB, so it can become a
/// raid5 later). 0 (the whole of every device) for linear and raid0.
pub(crate) fn choose_size_kib(room_kib: &[(usize, u64)], size_kib: u64, level: i32) -> Result<u64, FormatError> {
    for &(i, room) in room_kib {
        if room == 0 {
            return fail(format!("no free space left on device {i}"));
        }
        if size_kib != 0 && room < size_kib {
            return fail(format!("device {i} is smaller than the given size: {room}K < {size_kib}K + metadata"));
        }
    }
    if size_kib != 0 || level <= 0 {
        return Ok(size_kib);
    }
    let mut size = room_kib.iter().map(|&(_, room)| room).min().unwrap_or(0);
    if level == 1 {
        size &= !63;
    }
    if size == 0 {
        return fail("members are too small");
    }
    Ok(size)
}

pub(crate) fn round_to_chunk(kib: u64, chunk_kib: u64) -> u64 {
    if chunk_kib != 0 {
        kib & !(chunk_kib - 1)
    } else {
        kib
    }
}

/// Whether an array of `level` with `raid_disks` slots and `layout` can run without the slots
/// in `missing` (mdadm's `enough`, for a clean array): raid1 needs one copy, raid4/5 lose at
/// most one member and raid6 two, linear and raid0 none; raid10 needs, in each run of `copies`
/// slots that holds the copies of one chunk (runs start every near-copies slots, wrapping
/// round), at least one slot that is there.
pub fn survives_missing(level: i32, raid_disks: usize, layout: i32, missing: &[usize]) -> bool {
    let gone = |slot: usize| missing.contains(&slot);
    let lost = (0..raid_disks).filter(|&s| gone(s)).count();
    match level {
        1 => lost < raid_disks,
        4 | 5 => lost <= 1,
        6 => lost <= 2,
        10 => {
            let near = (layout & 255).max(1) as usize;
            let copies = near * ((layout >> 8) & 255).max(1) as usize;
            let mut first = 0;
            loop {
                if (0..copies).all(|k| gone((first + k) % raid_disks)) {
                    return false;
                }
                first = (first + near) % raid_disks;
                if first == 0 {
                    return true;
                }
            }
        }
        _ => lost == 0,
    }
}

/// What `level` can lose, for messages.
fn survivable_text(level: i32, layout: i32) -> String {
    match level {
        1 => "raid1 needs one copy".to_string(),
        4 | 5 => format!("{} can lose one member", level_text(level)),
        6 => "raid6 can lose two members".to_string(),
        10 => {
            let copies = (layout & 255) * ((layout >> 8) & 255);
            format!("raid10 keeps {copies} copies of each chunk on neighbouring slots, one of which must be there")
        }
        _ => format!("{} has no redundancy", level_text(level)),
    }
}

/// mdadm's 1.x placement (see [`plan_with_policy`]) of a checked [`Shape`].
fn plan_v1(spec: &CreateSpec, shape: &Shape, members: &[NewMember]) -> Result<CreatePlan, FormatError> {
    let version = spec.version;
    let ppl = shape.policy == ConsistencyPolicy::Ppl;
    let with_bitmap = shape.policy == ConsistencyPolicy::Bitmap;
    let (level, layout, chunk_kib, rd) = (shape.level, shape.layout, shape.chunk_kib, shape.raid_disks);
    let n = members.len();
    let mut size_kib = shape.size_kib;
    let round_to_chunk = |kib: u64| round_to_chunk(kib, chunk_kib);

    // The devices of the list, by position; `missing` entries have none.
    let present: Vec<(usize, u64, [u8; 16])> = members
        .iter()
        .enumerate()
        .filter_map(|(i, m)| match *m {
            NewMember::Device { bytes, uuid } => Some((i, bytes, uuid)),
            NewMember::Missing => None,
        })
        .collect();
    // validate_geometry1: the first device decides the default data offset for all.
    // With a PPL mdadm reserves its 1 MiB instead of the bitmap space.
    let reserved = |device_sectors: u64| if ppl { PPL_AREA_SECTORS } else { choose_bm_space(device_sectors) };
    let first_sectors = present[0].1 / SECTOR;
    let data_offset = match (spec.data_offset, version) {
        (Some(off), _) => off,
        (None, MetadataVersion::V1_0) => 0,
        (None, _) => data_offset_reserving(first_sectors, chunk_kib, reserved(first_sectors)),
    };
    let mut room_kib: Vec<(usize, u64)> = Vec::with_capacity(present.len());
    for &(i, bytes, _) in &present {
        let ds = bytes / SECTOR;
        if ds < sb1::MIN_DEVICE_SECTORS {
            return fail(format!("device {i} ({bytes} bytes) is too small for md metadata"));
        }
        let free = match version {
            MetadataVersion::V1_0 => (ds & !7).checked_sub(8 * 2 + 8 + reserved(ds)),
            _ => ds.checked_sub(data_offset),
        };
        let Some(free) = free else {
            return fail(format!("device {i} ({bytes} bytes) is too small for the required metadata"));
        };
        room_kib.push((i, round_to_chunk(free / 2)));
    }
    size_kib = choose_size_kib(&room_kib, size_kib, level)?;
    let size_sectors = size_kib * 2;
    let chunk_sectors = (chunk_kib * 2) as u32;

    // Create.c: raid4/5 are built by recovering the last slot onto a spare; that member is
    // added last and so gets the highest descriptor number.
    let dev_numbers: Vec<u32> = (0..n).map(|i| shape.dev_number(i, n)).collect();
    // init_super1: room for every device rounded up to a sector; add_to_super1 grows it.
    let described = n + usize::from(shape.recovered.is_some());
    if described > sb1::MAX_DEVS as usize {
        return fail(format!("too many devices: {described} > {}", sb1::MAX_DEVS));
    }
    let mut max_dev = (sb1::written_bytes(described as u32) - sb1::FIXED_BYTES) as u32 / 2;
    let highest = dev_numbers.iter().copied().max().unwrap_or(0);
    if highest >= max_dev && max_dev < sb1::MAX_DEVS {
        max_dev = highest + 1;
    }
    // A missing slot's entry stays unused (a spare's value): no device holds the slot.
    let mut dev_roles = vec![role_code::SPARE; max_dev as usize];
    for &(i, _, _) in &present {
        dev_roles[dev_numbers[i] as usize] = if i < rd { i as u16 } else { role_code::SPARE };
    }

    // write_init_super1 (mdadm 4.2): raid0 gets RAID0_LAYOUT only when members differ in
    // size, counted (as mdadm does) in byte size minus data offset, divided by the chunk.
    let raid0_units =
        |bytes: u64| bytes.saturating_sub(spec.data_offset.unwrap_or(0)) / u64::from(chunk_sectors.max(1));
    let raid0_layout =
        level == 0 && layout != 0 && present.iter().any(|&(_, b, _)| raid0_units(b) != raid0_units(present[0].1));

    let bitmap = if with_bitmap {
        // Create.c: a raid10 bitmap covers the array, other levels one member.
        let bitmap_sectors = if level == 10 {
            let copies = (((layout >> 8) & 255) * (layout & 255)) as u64;
            size_kib * rd as u64 / copies * 2
        } else {
            size_sectors
        };
        Some(plan_bitmap(spec, size_sectors, bitmap_sectors)?)
    } else {
        None
    };

    // write_init_super1: the PPL sits where the bitmap would, 1 MiB of it.
    let ppl_offset: Option<i64> = ppl.then(|| match version {
        MetadataVersion::V1_0 => -(PPL_AREA_SECTORS as i64) - 8,
        _ => 8,
    });

    let mut feature_map = 0;
    if bitmap.is_some() {
        feature_map |= feature::BITMAP_OFFSET;
    }
    if raid0_layout {
        feature_map |= feature::RAID0_LAYOUT;
    }
    let mut set_name = [0u8; 32];
    let name = stored_name("", &spec.name);
    set_name[..name.len()].copy_from_slice(name.as_bytes());
    let resync_offset = if shape.starts_in_sync() { MAX_SECTOR } else { 0 };

    let mut superblocks = Vec::with_capacity(n);
    let mut members = Vec::with_capacity(n);
    for &(i, bytes, device_uuid) in &present {
        let ds = bytes / SECTOR;
        let (mut bm_space, bm_offset) = match (&bitmap, ppl_offset) {
            (Some((bms, off)), _) => (bms.space_bytes(4096) / SECTOR, i64::from(*off)),
            (None, Some(off)) => (PPL_AREA_SECTORS, off),
            (None, None) => (choose_bm_space(size_sectors), 8),
        };
        let super_offset;
        let data_size;
        let mut bblog: Option<(u16, i32)> = None;
        match version {
            MetadataVersion::V1_0 => {
                // Bitmap and 8 sectors of bad-block log sit between data and superblock.
                bm_space += 8;
                super_offset = (ds - 16) & !7;
                if super_offset < size_sectors {
                    return fail(format!("device {i} is too small for {size_sectors} sectors"));
                }
                if super_offset < size_sectors + bm_space {
                    if ppl {
                        return fail(format!(
                            "device {i} has no room for the PPL after {size_sectors} sectors of data"
                        ));
                    }
                    bm_space = super_offset - size_sectors;
                }
                data_size = super_offset - bm_space;
                if bm_space >= 8 {
                    bblog = Some((8, -8));
                }
            }
            _ => {
                super_offset = if version == MetadataVersion::V1_2 { 8 } else { 0 };
                if data_offset >= ds {
                    return fail(format!("data offset {data_offset} is beyond device {i}"));
                }
                data_size = ds - data_offset;
                let sb_end = super_offset as i64 + bm_offset + bm_space as i64;
                if data_offset as i64 >= sb_end + 8 {
                    bblog = Some((8, (bm_offset + bm_space as i64) as i32));
                } else if data_offset >= super_offset + 16 {
                    bblog = Some((8, (data_offset - 8 - super_offset) as i32));
                }
                if data_offset < super_offset + (sb1::written_bytes(max_dev) as u64) / SECTOR {
                    return fail(format!("data offset {data_offset} overlaps the superblock"));
                }
                if ppl && (data_offset as i64) < sb_end + 8 {
                    return fail(format!(
                        "data offset {data_offset} leaves no room for the PPL and the bad-block log (needs {})",
                        sb_end + 8
                    ));
                }
            }
        }
        if data_size < 10 || (level > 0 && data_size < size_sectors) {
            return fail(format!("device {i} has only {data_size} sectors for data"));
        }
        if let Some(off) = ppl_offset {
            // ppl_validate_rdev: md refuses a PPL that overlaps the data.
            let start = (super_offset as i64 + off) as u64;
            let end = start + PPL_AREA_SECTORS;
            if start < data_offset + data_size && data_offset < end {
                return fail(format!(
                    "device {i}: the PPL (sectors {start}..{end}) would overlap the data (sectors {data_offset}..{})",
                    data_offset + data_size
                ));
            }
        }
        let sb = Superblock1 {
            version,
            magic: MD_SB_MAGIC,
            major_version: 1,
            feature_map,
            pad0: 0,
            set_uuid: spec.array_uuid,
            set_name,
            ctime: spec.ctime & sb1::TIME_SECONDS_MASK,
            level,
            layout,
            size: size_sectors,
            chunksize: chunk_sectors,
            raid_disks: spec.raid_disks,
            bitmap_offset: bitmap.as_ref().map_or(0, |(_, off)| *off),
            new_level: 0,
            reshape_position: 0,
            delta_disks: 0,
            new_layout: 0,
            new_chunk: 0,
            new_offset: 0,
            data_offset,
            data_size,
            super_offset,
            recovery_offset: 0,
            dev_number: dev_numbers[i],
            cnt_corrected_read: 0,
            device_uuid,
            devflags: 0,
            bblog_shift: 0,
            bblog_size: bblog.map_or(0, |b| b.0),
            bblog_offset: bblog.map_or(0, |b| b.1),
            utime: spec.ctime & sb1::TIME_SECONDS_MASK,
            events: 0,
            resync_offset,
            sb_csum: 0,
            max_dev,
            pad3: [0; 32],
            dev_roles: dev_roles.clone(),
            // init_super1 fills the whole 4 KiB buffer after the fixed part with 0xff.
            trailing: vec![0xff; sb1::MAX_SB_BYTES - sb1::FIXED_BYTES - 2 * max_dev as usize],
        };
        let mut sb = sb;
        if let Some(off) = ppl_offset {
            sb.set_ppl(Some((off as i16, PPL_AREA_SECTORS as u16)));
        }
        sb.sb_csum = sb.computed_checksum();
        let sb_byte = super_offset * SECTOR;
        let rel = |off: i64| (super_offset as i64 + off) as u64 * SECTOR;
        members.push(MemberLayout {
            dev_number: dev_numbers[i],
            super_byte_offset: sb_byte,
            data_offset,
            data_size,
            bitmap: bitmap.as_ref().map(|(bms, off)| (rel(i64::from(*off)), bms.space_bytes(4096) as usize)),
            bad_block_log: bblog.map(|(size, off)| (rel(i64::from(off)), usize::from(size) * SECTOR as usize)),
            ppl: ppl_offset.map(|off| (rel(off), PPL_AREA_SECTORS * SECTOR)),
        });
        superblocks.push(Superblock::V1(sb));
    }
    let bitmap = bitmap.map(|(bms, _)| {
        let rest = bms.space_bytes(4096) as usize - bitmap::HEADER_BYTES;
        let offset = members[0].bitmap.map_or(0, |b| b.0);
        (bms, offset, rest)
    });
    Ok(CreatePlan {
        superblocks,
        component_sectors: size_sectors,
        bitmap,
        members,
        layout,
        chunk_sectors,
        starts_in_sync: shape.starts_in_sync(),
        missing_slots: shape.missing.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    fn spec(version: MetadataVersion, level: i32, raid_disks: u32) -> CreateSpec {
        CreateSpec {
            version,
            level,
            layout: -1,
            chunk_sectors: 0,
            raid_disks,
            array_uuid: [7; 16],
            name: "host:test".into(),
            ctime: 1_700_000_000,
            component_sectors: None,
            bitmap: false,
            data_offset: None,
            bitmap_chunk: None,
        }
    }

    fn parses_where_planned(plan: &CreatePlan, spec: &CreateSpec, sizes: &[u64]) {
        for (i, sb) in plan.superblocks.iter().enumerate() {
            let back = Superblock::parse(spec.version, &sb.to_bytes(), sizes[i]).expect("planned superblock parses");
            assert_eq!(back.info(), sb.info());
        }
    }

    #[test]
    fn default_data_offsets_follow_validate_geometry1() {
        // 4 MiB members: 1 MiB, or 2 MiB with mdadm's default 512 KiB chunk.
        assert_eq!(default_data_offset(8192, 0), 2048);
        assert_eq!(default_data_offset(8192, 64), 2048);
        assert_eq!(default_data_offset(8192, 512), 4096);
        // 1 TiB: the full 128 MiB of headroom plus 128 KiB of bitmap space, rounded to 1 MiB:
        // the familiar "Data Offset : 264192 sectors".
        assert_eq!(default_data_offset(1 << 31, 512), 264_192);
        // 10 GiB raid1: headroom 8 MiB (about 0.1%), 64 KiB bitmap space.
        assert_eq!(default_data_offset(10 << 21, 0), 18_432);
    }

    #[test]
    fn bitmap_space_follows_choose_bm_space() {
        assert_eq!(choose_bm_space(100), 0);
        assert_eq!(choose_bm_space(8192), 8);
        assert_eq!(choose_bm_space(8 << 21), 8);
        assert_eq!(choose_bm_space((8 << 21) + 9), 128);
        assert_eq!(choose_bm_space((200 << 21) + 128), 256);
    }

    #[test]
    fn names_follow_init_super1() {
        assert_eq!(stored_name("oracle", "raid1-2"), "oracle:raid1-2");
        assert_eq!(stored_name("oracle", "raid5-4-ls-64k-1.0-bitmap"), "raid5-4-ls-64k-1.0-bitmap");
        assert_eq!(stored_name("oracle", "other:name"), "other:name");
        assert_eq!(stored_name("", "x"), "x");
        assert_eq!(stored_name("h", &"n".repeat(40)).len(), 31);
    }

    #[test]
    fn raid5_moves_the_last_member_to_the_end_like_mdadm() {
        let s = spec(MetadataVersion::V1_2, 5, 4);
        let sizes = [4 << 20; 5];
        let plan = plan(&s, &sizes, &[[1; 16]; 5]).unwrap();
        let numbers: Vec<u32> = plan.members.iter().map(|m| m.dev_number).collect();
        assert_eq!(numbers, [0, 1, 2, 5, 4]);
        let info = plan.superblocks[3].info();
        assert_eq!(info.role, Role::Active(3));
        assert_eq!(
            &info.roles[..6],
            &[Role::Active(0), Role::Active(1), Role::Active(2), Role::Spare, Role::Spare, Role::Active(3)]
        );
        assert_eq!(plan.superblocks[4].info().role, Role::Spare);
        assert_eq!(info.data_offset, 4096);
        assert_eq!(plan.chunk_sectors, 1024);
        assert_eq!(plan.layout, LAYOUT_LEFT_SYMMETRIC);
        assert_eq!(info.resync_offset, 0, "redundant arrays start unsynced");
        parses_where_planned(&plan, &s, &sizes);
    }

    #[test]
    fn metadata_1_1_and_1_0_plans_parse_back() {
        for version in [MetadataVersion::V1_0, MetadataVersion::V1_1, MetadataVersion::V1_2] {
            let mut s = spec(version, 1, 2);
            s.bitmap = true;
            let sizes = [(1u64 << 30) + 12345 * 512, 3 << 30];
            let plan = plan(&s, &sizes, &[[1; 16], [2; 16]]).unwrap();
            parses_where_planned(&plan, &s, &sizes);
            let (bms, _, rest) = plan.bitmap.clone().unwrap();
            assert_eq!(bms.sync_size, plan.component_sectors);
            assert_eq!(bms.chunksize, 64 << 20);
            assert_eq!(plan.bitmap_image().unwrap().len(), 256 + rest);
            for (m, sb) in plan.members.iter().zip(&plan.superblocks) {
                let info = sb.info();
                let bitmap_at = (info.super_offset as i64 + i64::from(info.bitmap_offset.unwrap())) as u64 * SECTOR;
                assert_eq!(m.bitmap.unwrap().0, bitmap_at);
                assert!(info.usable_sectors >= plan.component_sectors);
                if version == MetadataVersion::V1_0 {
                    // The bitmap and bad-block log sit between the data and the superblock.
                    assert!(info.data_offset + info.usable_sectors <= bitmap_at / SECTOR);
                    assert_eq!(info.bad_block_log, Some((-8, 8)));
                } else {
                    assert!(bitmap_at / SECTOR + 8 <= info.data_offset);
                }
            }
        }
    }

    #[test]
    fn raid10_bitmap_covers_the_array() {
        let mut s = spec(MetadataVersion::V1_2, 10, 4);
        s.bitmap = true;
        let sizes = [64 << 20; 4];
        let plan = plan(&s, &sizes, &[[1; 16]; 4]).unwrap();
        assert_eq!(plan.bitmap.unwrap().0.sync_size, plan.component_sectors * 2);
    }

    #[test]
    fn raid0_layout_flag_only_for_unequal_members() {
        let s = spec(MetadataVersion::V1_2, 0, 3);
        let equal = plan(&s, &[4 << 20; 3], &[[1; 16]; 3]).unwrap();
        let info = equal.superblocks[0].info();
        assert_eq!(info.feature_map, 0);
        assert_eq!(info.layout, -1, "no layout recorded");
        let unequal = plan(&s, &[4 << 20, 6 << 20, 8 << 20], &[[1; 16]; 3]).unwrap();
        let info = unequal.superblocks[0].info();
        assert_eq!(info.feature_map, feature::RAID0_LAYOUT);
        assert_eq!(info.layout, RAID0_ORIG_LAYOUT);
        assert_eq!(info.component_sectors, 0);
    }

    #[test]
    fn invalid_requests_are_refused() {
        let sizes = [4 << 20; 3];
        let uuids = [[1; 16]; 3];
        assert!(plan(&spec(MetadataVersion::V1_2, 6, 3), &sizes, &uuids).is_err());
        let mut s = spec(MetadataVersion::V0_90, 1, 3);
        s.data_offset = Some(2048);
        assert!(plan(&s, &sizes, &uuids).is_err(), "0.90 has no data offset");
        let mut s = spec(MetadataVersion::V1_2, 1, 3);
        s.chunk_sectors = 128;
        assert!(plan(&s, &sizes, &uuids).is_err());
        let mut s = spec(MetadataVersion::V1_2, 0, 2);
        s.bitmap = true;
        assert!(plan(&s, &sizes, &uuids).is_err(), "spares and bitmap on raid0");
        let s = spec(MetadataVersion::V1_2, 5, 3);
        assert!(plan(&s, &[4 << 20, 4 << 20, 8192], &uuids).is_err(), "tiny member");
        let mut s = spec(MetadataVersion::V1_2, 5, 3);
        s.component_sectors = Some(16 << 20);
        assert!(plan(&s, &sizes, &uuids).is_err(), "size larger than members");
    }

    #[test]
    fn explicit_size_and_data_offset_are_used() {
        let mut s = spec(MetadataVersion::V1_2, 5, 3);
        s.chunk_sectors = 128;
        s.component_sectors = Some(5000);
        s.data_offset = Some(3072);
        let sizes = [8 << 20; 3];
        let plan = plan(&s, &sizes, &[[1; 16]; 3]).unwrap();
        assert_eq!(plan.component_sectors, 4992, "rounded down to the 64 KiB chunk");
        let info = plan.superblocks[0].info();
        assert_eq!(info.data_offset, 3072);
        assert_eq!(info.usable_sectors, 16384 - 3072);
        parses_where_planned(&plan, &s, &sizes);
    }

    #[test]
    fn ppl_placement_follows_mdadm() {
        // 24 MiB members, chunk 64K: what mdadm 4.2 wrote in the oracle samples
        // (crates/md/format/tests/ppl.rs compares whole superblocks).
        let bytes = 24u64 << 20;
        for (version, n, data_offset, ppl_at, bblog, data_size, size) in [
            (MetadataVersion::V1_2, 4, 4096, 8i16, (2056, 8), 45056, 45056),
            (MetadataVersion::V1_1, 4, 4096, 8, (2056, 8), 45056, 45056),
            (MetadataVersion::V1_0, 3, 0, -2056, (-8, 8), 47080, 46976),
        ] {
            let mut s = spec(version, 5, n);
            s.chunk_sectors = 128;
            let sizes = vec![bytes; n as usize];
            let p = plan_with_policy(&s, ConsistencyPolicy::Ppl, &sizes, &vec![[4; 16]; n as usize]).unwrap();
            parses_where_planned(&p, &s, &sizes);
            assert_eq!(p.component_sectors, size, "{version}");
            let image = p.ppl_image().unwrap();
            assert_eq!(image.len(), 1 << 20);
            let header = PplHeader::parse(&image).unwrap();
            assert_eq!(header, PplHeader::empty(ppl::signature(&[7; 16])));
            assert!(image[ppl::HEADER_BYTES..].iter().all(|&b| b == 0));
            for (i, (m, sb)) in p.members.iter().zip(&p.superblocks).enumerate() {
                let Superblock::V1(sb1) = sb else { panic!() };
                let info = sb.info();
                assert_eq!(info.feature_map, feature::PPL, "{version}: mdadm sets PPL, never MULTIPLE_PPLS");
                assert_eq!(sb1.ppl(), (ppl_at, 2048));
                assert_eq!(info.ppl, Some((ppl_at, 2048)));
                assert_eq!(info.bitmap_offset, None);
                assert_eq!(info.data_offset, data_offset);
                assert_eq!(info.usable_sectors, data_size);
                assert_eq!(info.bad_block_log, Some(bblog));
                let ppl_byte = (info.super_offset as i64 + i64::from(ppl_at)) as u64 * SECTOR;
                assert_eq!(m.ppl, Some((ppl_byte, 1 << 20)));
                let areas = p.areas_for(i);
                assert_eq!(areas.len(), 1);
                assert_eq!((areas[0].offset, areas[0].what, areas[0].bytes.len()), (ppl_byte, "ppl", 1 << 20));
                // The PPL lies between the superblock and the data, clear of both.
                let (start, end) = (ppl_byte / SECTOR, ppl_byte / SECTOR + 2048);
                assert!(end <= info.data_offset || start >= info.data_offset + info.usable_sectors);
                assert!(start >= info.super_offset + 8 || end + 8 <= info.super_offset);
            }
        }
    }

    #[test]
    fn ppl_default_data_offset_grows_for_the_ppl() {
        // A 1 GiB member: 12 KiB + 1 MiB of PPL + 1 MiB of headroom = 4120 sectors, rounded up
        // to 1 MiB: 6144, where 4 KiB of bitmap space gives 4096.
        let mut s = spec(MetadataVersion::V1_2, 5, 3);
        s.chunk_sectors = 128;
        let sizes = [1u64 << 30; 3];
        let resync = plan(&s, &sizes, &[[1; 16]; 3]).unwrap();
        let with_ppl = plan_with_policy(&s, ConsistencyPolicy::Ppl, &sizes, &[[1; 16]; 3]).unwrap();
        assert_eq!(resync.superblocks[0].info().data_offset, 4096);
        assert_eq!(with_ppl.superblocks[0].info().data_offset, 6144);
        assert_eq!(data_offset_reserving(1 << 21, 64, PPL_AREA_SECTORS), 6144);
    }

    #[test]
    fn ppl_refusals() {
        let sizes = [24u64 << 20; 4];
        let uuids = [[1; 16]; 4];
        let ppl = |s: &CreateSpec| plan_with_policy(s, ConsistencyPolicy::Ppl, &sizes, &uuids);
        for level in [-1, 0, 1, 10] {
            let err = ppl(&spec(MetadataVersion::V1_2, level, 4)).unwrap_err().to_string();
            assert!(err.contains("needs raid4, raid5 or raid6"), "{level}: {err}");
        }
        for level in [4, 5, 6] {
            assert!(ppl(&spec(MetadataVersion::V1_2, level, 4)).is_ok(), "raid{level}");
        }
        let err = ppl(&spec(MetadataVersion::V0_90, 5, 4)).unwrap_err().to_string();
        assert!(err.contains("1.x metadata"), "{err}");
        let mut with_bitmap = spec(MetadataVersion::V1_2, 5, 4);
        with_bitmap.bitmap = true;
        let err = ppl(&with_bitmap).unwrap_err().to_string();
        assert!(err.contains("not compatible"), "{err}");
        assert!(plan_with_policy(&with_bitmap, ConsistencyPolicy::Resync, &sizes, &uuids).is_err());
        assert!(plan_with_policy(&with_bitmap, ConsistencyPolicy::Bitmap, &sizes, &uuids).is_ok());
        // An explicit data offset that leaves no room for the PPL and the bad-block log.
        let mut tight = spec(MetadataVersion::V1_2, 5, 4);
        tight.data_offset = Some(2048);
        assert!(ppl(&tight).unwrap_err().to_string().contains("no room for the PPL"));
        tight.data_offset = Some(2072);
        assert!(ppl(&tight).is_ok(), "8 + 8 + 2048 + 8 sectors fit");
        // 1.0 with a data offset: the data would run into the PPL below the superblock.
        let mut v10 = spec(MetadataVersion::V1_0, 5, 4);
        v10.data_offset = Some(2048);
        assert!(ppl(&v10).unwrap_err().to_string().contains("overlap the data"));
    }

    fn dev(bytes: u64) -> NewMember {
        NewMember::Device { bytes, uuid: [9; 16] }
    }

    /// The list `"d d missing d"` as members of `bytes` bytes.
    fn list(words: &str, bytes: u64) -> Vec<NewMember> {
        words.split_whitespace().map(|w| if w == "missing" { NewMember::Missing } else { dev(bytes) }).collect()
    }

    fn error_of(spec: &CreateSpec, members: &[NewMember]) -> String {
        plan_members(spec, ConsistencyPolicy::Resync, members).expect_err("refused").to_string()
    }

    #[test]
    fn missing_slots_hold_no_entry_of_the_role_table() {
        // As mdadm wrote raid5-4-ls-64k-missing3: descriptors by position, no recovery trick,
        // slot 3 held by nobody, and clean from the start (nothing left to resync).
        let s = spec(MetadataVersion::V1_2, 5, 4);
        let p = plan_members(&s, ConsistencyPolicy::Resync, &list("d d d missing", 4 << 20)).unwrap();
        assert_eq!(p.superblocks.len(), 3);
        assert_eq!(p.members.iter().map(|m| m.dev_number).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(p.missing_slots, [3]);
        assert!(p.starts_in_sync);
        let info = p.superblocks[2].info();
        assert_eq!(&info.roles[..4], &[Role::Active(0), Role::Active(1), Role::Active(2), Role::Spare]);
        assert!(!info.roles.contains(&Role::Active(3)));
        assert_eq!(info.resync_offset, MAX_SECTOR);
        assert_eq!(info.raid_disks, 4);
        parses_where_planned(&p, &s, &[4 << 20; 3]);
    }

    #[test]
    fn raid6_missing_two_starts_in_sync_and_missing_one_is_recovered() {
        let s = spec(MetadataVersion::V1_2, 6, 5);
        // raid6-5-ls-64k-missing0-3: members 1, 2, 4 keep their positions as numbers.
        let two = plan_members(&s, ConsistencyPolicy::Resync, &list("missing d d missing d", 4 << 20)).unwrap();
        assert_eq!(two.members.iter().map(|m| m.dev_number).collect::<Vec<_>>(), [1, 2, 4]);
        assert!(two.starts_in_sync);
        assert_eq!(two.missing_slots, [0, 3]);
        // One missing: mdadm makes the last good slot a spare to be recovered (else md could
        // not build the array), so that device is numbered after the list; a resync is owed.
        let one = plan_members(&s, ConsistencyPolicy::Resync, &list("d missing d d d", 4 << 20)).unwrap();
        assert_eq!(one.members.iter().map(|m| m.dev_number).collect::<Vec<_>>(), [0, 2, 3, 5]);
        assert!(!one.starts_in_sync);
        assert_eq!(one.superblocks[3].info().role, Role::Active(4));
        assert_eq!(one.superblocks[0].info().resync_offset, 0);
        let last = plan_members(&s, ConsistencyPolicy::Resync, &list("d d d d missing", 4 << 20)).unwrap();
        assert_eq!(last.members.iter().map(|m| m.dev_number).collect::<Vec<_>>(), [0, 1, 2, 5]);
        assert_eq!(last.superblocks[3].info().role, Role::Active(3));
    }

    #[test]
    fn mirrors_with_missing_copies_still_owe_a_resync() {
        for (level, raid_disks, words) in [(1, 3, "d missing d"), (10, 4, "missing d missing d")] {
            let s = spec(MetadataVersion::V1_2, level, raid_disks);
            let p = plan_members(&s, ConsistencyPolicy::Resync, &list(words, 8 << 20)).unwrap();
            assert!(!p.starts_in_sync, "raid{level}: md resyncs the copies that are there");
            assert_eq!(p.superblocks[0].info().resync_offset, 0);
        }
    }

    #[test]
    fn spares_follow_the_raid_slots() {
        // raid1-2-spare: numbers 0, 1, 2, the spare's entry a spare's.
        let s = spec(MetadataVersion::V1_2, 1, 2);
        let p = plan_members(&s, ConsistencyPolicy::Resync, &list("d d d", 4 << 20)).unwrap();
        assert_eq!(p.members.iter().map(|m| m.dev_number).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(p.superblocks[2].info().role, Role::Spare);
        assert_eq!(p.superblocks[0].info().roles[2], Role::Spare);
        // A degraded raid5 with a spare: no recovery trick, the spare after the slots.
        let s = spec(MetadataVersion::V1_2, 5, 3);
        let p = plan_members(&s, ConsistencyPolicy::Resync, &list("d missing d d", 4 << 20)).unwrap();
        assert_eq!(p.members.iter().map(|m| m.dev_number).collect::<Vec<_>>(), [0, 2, 3]);
        assert_eq!(p.superblocks[2].info().role, Role::Spare);
    }

    #[test]
    fn too_many_missing_or_misplaced_missing_is_refused() {
        let e = error_of(&spec(MetadataVersion::V1_2, 5, 4), &list("d missing missing d", 4 << 20));
        assert!(e.contains("too many missing devices") && e.contains("slot(s) 1, 2") && e.contains("lose one"), "{e}");
        let e = error_of(&spec(MetadataVersion::V1_2, 6, 5), &list("missing missing d missing d", 4 << 20));
        assert!(e.contains("raid6") && e.contains("0, 1, 3"), "{e}");
        let e = error_of(&spec(MetadataVersion::V1_2, 1, 2), &list("missing missing", 4 << 20));
        assert!(e.contains("every raid slot is missing"), "{e}");
        for level in [-1, 0] {
            let e = error_of(&spec(MetadataVersion::V1_2, level, 3), &list("d missing d", 4 << 20));
            assert!(e.contains("does not support missing devices"), "{level}: {e}");
        }
        // raid10 n2 keeps the copies of a chunk on slots 0-1 and 2-3.
        let e = error_of(&spec(MetadataVersion::V1_2, 10, 4), &list("missing missing d d", 4 << 20));
        assert!(e.contains("raid10"), "{e}");
        let e = error_of(&spec(MetadataVersion::V1_2, 1, 2), &list("d d missing", 4 << 20));
        assert!(e.contains("is a spare"), "{e}");
        let e = error_of(&spec(MetadataVersion::V1_2, 0, 2), &list("d d d", 4 << 20));
        assert!(e.contains("does not support spare devices"), "{e}");
    }

    #[test]
    fn what_each_level_survives() {
        assert!(survives_missing(1, 3, 0, &[0, 2]));
        assert!(!survives_missing(1, 2, 0, &[0, 1]));
        assert!(survives_missing(5, 4, 2, &[3]) && !survives_missing(5, 4, 2, &[0, 3]));
        assert!(survives_missing(6, 5, 2, &[1, 4]) && !survives_missing(6, 5, 2, &[0, 1, 4]));
        assert!(!survives_missing(0, 2, 0, &[1]) && !survives_missing(-1, 2, 0, &[0]));
        // raid10 n2 on 4: pairs 0-1 and 2-3.
        assert!(survives_missing(10, 4, 0x102, &[0, 2]) && survives_missing(10, 4, 0x102, &[1, 3]));
        assert!(!survives_missing(10, 4, 0x102, &[2, 3]));
        // n2 on 3 slots: chunk copies on 0-1, 2-0, 1-2.
        assert!(survives_missing(10, 3, 0x102, &[0]) && !survives_missing(10, 3, 0x102, &[0, 1]));
        // f2 on 4: a chunk's far copy is on the next slot, so neighbours may not both go.
        assert!(survives_missing(10, 4, 0x201, &[0, 2]) && !survives_missing(10, 4, 0x201, &[3, 0]));
        // n3 on 3: any two may go.
        assert!(survives_missing(10, 3, 0x103, &[0, 2]) && !survives_missing(10, 3, 0x103, &[0, 1, 2]));
    }

    proptest::proptest! {
        #[test]
        fn degraded_and_090_plans_never_panic_and_leave_missing_slots_empty(
            level in proptest::sample::select(vec![-1, 0, 1, 4, 5, 6, 10]),
            version in proptest::sample::select(vec![MetadataVersion::V0_90, MetadataVersion::V1_0, MetadataVersion::V1_2]),
            entries in proptest::collection::vec(proptest::option::of(0u64..(1 << 36)), 1..9),
            raid_disks in 1u32..9,
            policy in proptest::sample::select(vec![ConsistencyPolicy::Resync, ConsistencyPolicy::Bitmap]),
        ) {
            let mut s = spec(version, level, raid_disks);
            s.bitmap = policy == ConsistencyPolicy::Bitmap;
            let members: Vec<NewMember> = entries.iter().map(|e| e.map_or(NewMember::Missing, dev)).collect();
            if let Ok(p) = plan_members(&s, policy, &members) {
                let present: Vec<u64> = entries.iter().flatten().copied().collect();
                proptest::prop_assert_eq!(p.superblocks.len(), present.len());
                parses_where_planned(&p, &s, &present);
                for sb in &p.superblocks {
                    let info = sb.info();
                    for slot in &p.missing_slots {
                        proptest::prop_assert!(!info.roles.contains(&Role::Active(*slot as u32)));
                    }
                    let clean = info.resync_offset == MAX_SECTOR;
                    proptest::prop_assert_eq!(clean, p.starts_in_sync);
                }
                let missing: Vec<usize> = (0..raid_disks as usize).filter(|&i| entries[i].is_none()).collect();
                proptest::prop_assert_eq!(&p.missing_slots, &missing);
                proptest::prop_assert!(survives_missing(level, raid_disks as usize, p.layout, &missing));
            }
        }

        #[test]
        fn plans_never_panic_and_always_parse(
            level in proptest::sample::select(vec![-1, 0, 1, 4, 5, 6, 10]),
            version in proptest::sample::select(vec![MetadataVersion::V1_0, MetadataVersion::V1_1, MetadataVersion::V1_2]),
            sizes in proptest::collection::vec(0u64..(1 << 44), 1..7),
            raid_disks in 1u32..7,
            chunk_kib in proptest::sample::select(vec![0u32, 4, 12, 64, 512, 4096]),
            policy in proptest::sample::select(vec![ConsistencyPolicy::Resync, ConsistencyPolicy::Bitmap, ConsistencyPolicy::Ppl]),
            data_offset in proptest::option::of(0u64..100_000),
        ) {
            let mut s = spec(version, level, raid_disks);
            s.chunk_sectors = chunk_kib * 2;
            s.bitmap = policy == ConsistencyPolicy::Bitmap;
            s.data_offset = data_offset;
            let uuids = vec![[3u8; 16]; sizes.len()];
            if let Ok(p) = plan_with_policy(&s, policy, &sizes, &uuids) {
                parses_where_planned(&p, &s, &sizes);
                for (m, sb) in p.members.iter().zip(&p.superblocks) {
                    let info = sb.info();
                    proptest::prop_assert_eq!(m.ppl.is_some(), policy == ConsistencyPolicy::Ppl);
                    if let Some((at, len)) = m.ppl {
                        // Clear of the data, the superblock and the bad-block log.
                        let (start, end) = (at / SECTOR, (at + len) / SECTOR);
                        proptest::prop_assert!(end <= info.data_offset || start >= info.data_offset + info.usable_sectors);
                        proptest::prop_assert!(start >= info.super_offset + 8 || end <= info.super_offset);
                        if let Some((off, size)) = info.bad_block_log {
                            let b = (info.super_offset as i64 + i64::from(off)) as u64;
                            proptest::prop_assert!(b + u64::from(size) <= start || b >= end);
                        }
                    }
                }
            }
        }
    }
}
