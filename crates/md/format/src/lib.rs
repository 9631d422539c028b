//! On-disk formats of Linux md: parse and serialize the member superblocks (0.90, 1.0, 1.1,
//! 1.2) and the internal write-intent bitmap superblock, and plan the superblocks of a new
//! array the way mdadm 4.2 would write them.
//!
//! Everything here is pure: no I/O. Callers read bytes from a member device and hand them in,
//! and write back what [`Superblock::to_bytes`] returns at the offset they read from.
//!
//! The specification is the Linux kernel (`include/uapi/linux/raid/md_p.h`,
//! `drivers/md/md.c`: `super_90_load`, `super_1_load`, `super_1_sync`, `drivers/md/md-bitmap.h`)
//! and mdadm 4.2 (`super0.c`, `super1.c`, `bitmap.c`, `Create.c`).
//!
//! Layout of the crate:
//! - [`sb1`]: the version-1 superblock (`struct mdp_superblock_1`, little-endian).
//! - [`sb090`]: the version-0.90 superblock (`mdp_super_t`, host-endian; little-endian only here).
//! - [`bitmap`]: the write-intent bitmap superblock (`bitmap_super_t`).
//! - [`create`]: mdadm's rules for the superblocks of a new array (1.x data offset, sizes,
//!   bitmap and PPL placement; `missing` members and spares; 0.90's placement and limits).
//! - [`ppl`]: the raid5 Partial Parity Log header (`struct ppl_header`).
//! - [`reshape`]: a reshape in progress, as the superblock records it.
//! - [`uuid`]: mdadm's textual UUID form.
//! - [`conf`]: mdadm.conf's `DEVICE` and `ARRAY` lines (what `--examine --scan` and
//!   `--detail --scan` print, and `--assemble --scan` reads).

use std::fmt;

pub mod backup;
pub mod bitmap;
mod bytes;
pub mod conf;
pub mod create;
pub mod ppl;
pub mod reshape;
pub mod sb090;
pub mod sb1;
pub mod uuid;

pub use reshape::Reshape;
pub use sb090::{Disk090, Superblock090};
pub use sb1::Superblock1;

/// Bytes per sector: every md offset and size is counted in 512-byte sectors.
pub const SECTOR: u64 = 512;

/// md's "no sector" value: `resync_offset` holds it when the array is clean.
pub const MAX_SECTOR: u64 = u64::MAX;

/// The magic number at the start of every md superblock (0.90 and 1.x alike).
pub const MD_SB_MAGIC: u32 = 0xa92b_4efc;

/// The metadata (superblock) format of an md member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataVersion {
    /// 0.90: 4 KiB superblock 64-128 KiB from the end of the device, host-endian.
    V0_90,
    /// 1.0: superblock 8-12 KiB from the end of the device.
    V1_0,
    /// 1.1: superblock at the start of the device.
    V1_1,
    /// 1.2: superblock 4 KiB from the start of the device (mdadm's default).
    V1_2,
}

impl MetadataVersion {
    /// Parse a `--metadata` value as mdadm accepts it (`match_metadata_desc0/1`): "0.90", "0",
    /// "1.0", "1.1", "1.2", "1" and "default" (both 1.2, mdadm's default for new arrays).
    pub fn parse(s: &str) -> Result<Self, FormatError> {
        // mdadm drops leading zeros ("--detail" prints "01.02"-like forms).
        let trimmed = s.trim();
        let t = trimmed.trim_start_matches('0');
        let v = match t {
            "" | ".90" | ".9" | ".90.0" => MetadataVersion::V0_90,
            "1.0" | "1.00" => MetadataVersion::V1_0,
            "1.1" | "1.01" => MetadataVersion::V1_1,
            "1.2" | "1.02" | "1" => MetadataVersion::V1_2,
            _ if trimmed.eq_ignore_ascii_case("default") => MetadataVersion::V1_2,
            _ => return Err(FormatError::UnknownMetadataVersion(s.to_string())),
        };
        if trimmed.is_empty() {
            return Err(FormatError::UnknownMetadataVersion(s.to_string()));
        }
        Ok(v)
    }

    /// Byte offset of the superblock on a device of `device_bytes` bytes, or `None` when the
    /// device is too small to hold one (`super_90_load`'s `MD_NEW_SIZE_SECTORS`, and mdadm's
    /// `load_super1` which refuses devices under 24 sectors).
    pub fn superblock_offset(self, device_bytes: u64) -> Option<u64> {
        self.superblock_sector(device_bytes / SECTOR).map(|s| s * SECTOR)
    }

    /// Sector of the superblock on a device of `device_sectors` sectors (see
    /// [`MetadataVersion::superblock_offset`]).
    pub fn superblock_sector(self, device_sectors: u64) -> Option<u64> {
        match self {
            MetadataVersion::V0_90 => sb090::sb_start(device_sectors),
            _ if device_sectors < sb1::MIN_DEVICE_SECTORS => None,
            // 8-12 KiB from the end, 4 KiB aligned.
            MetadataVersion::V1_0 => Some((device_sectors - 16) & !7),
            MetadataVersion::V1_1 => Some(0),
            MetadataVersion::V1_2 => Some(8),
        }
    }

    /// All versions, in the order mdadm lists them.
    pub fn all() -> [MetadataVersion; 4] {
        [MetadataVersion::V0_90, MetadataVersion::V1_0, MetadataVersion::V1_1, MetadataVersion::V1_2]
    }

    /// The major version stored in the superblock (0 or 1).
    pub fn major(self) -> u32 {
        match self {
            MetadataVersion::V0_90 => 0,
            _ => 1,
        }
    }
}

impl fmt::Display for MetadataVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MetadataVersion::V0_90 => "0.90",
            MetadataVersion::V1_0 => "1.0",
            MetadataVersion::V1_1 => "1.1",
            MetadataVersion::V1_2 => "1.2",
        })
    }
}

/// What a member is to its array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// In sync (or being recovered, see `recovery_offset`) in raid slot `n`.
    Active(u32),
    /// Not part of the data layout; may be used to rebuild a slot.
    Spare,
    /// Failed; md will not use it.
    Faulty,
    /// The raid4/5/6 write journal device.
    Journal,
    /// Being built as a replacement of the device in slot `n` (1.x `MD_FEATURE_REPLACEMENT`).
    Replacement(u32),
}

/// The 1.x `dev_roles[]` encoding of roles (`MD_DISK_ROLE_*` in md_p.h).
pub mod role_code {
    /// An unused entry or a spare.
    pub const SPARE: u16 = 0xffff;
    /// A failed device.
    pub const FAULTY: u16 = 0xfffe;
    /// The journal device.
    pub const JOURNAL: u16 = 0xfffd;
    /// Values at or above this are not raid slots.
    pub const MAX: u16 = 0xff00;
}

/// The normalized view the engine and CLI use, the same for every version.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberInfo {
    pub version: MetadataVersion,
    /// Array UUID in mdadm's display byte order (see [`uuid::format_md`]).
    pub array_uuid: [u8; 16],
    /// The name as stored (1.x `set_name` up to the first NUL); "" for 0.90.
    pub name: String,
    /// 0.90's `md_minor`: the md device the array was made as (mdadm's "Preferred Minor", its
    /// `/dev/mdN`); `None` for 1.x, which records none.
    pub preferred_minor: Option<u32>,
    /// Creation time, unix seconds.
    pub ctime: u64,
    /// Last update time, unix seconds.
    pub utime: u64,
    /// md level: -1 linear, 0, 1, 4, 5, 6, 10 (-4 multipath, -5 faulty).
    pub level: i32,
    /// md layout number as the kernel uses it; -1 for raid0 without a stored layout
    /// (1.x without `MD_FEATURE_RAID0_LAYOUT`, and every 0.90 raid0), as `super_*_validate` do.
    pub layout: i32,
    /// Chunk size in sectors (linear: rounding; raid1: 0).
    pub chunk_sectors: u32,
    pub raid_disks: u32,
    /// The superblock's "size": sectors of every member used for data (mdadm's Used Dev Size).
    /// 0 for linear and raid0 arrays made by mdadm, which use `usable_sectors` instead.
    pub component_sectors: u64,
    /// The kernel's `rdev->sectors` after load: 1.x `data_size`; for 0.90 the superblock start
    /// (capped just below 4 TiB for levels >= 1, as `super_90_load` does). Linear and raid0
    /// use this (rounded down to the chunk) rather than `component_sectors`.
    pub usable_sectors: u64,
    /// mdadm's Avail Dev Size: 1.x `data_size`, 0.90 the superblock start.
    pub avail_sectors: u64,
    /// Sector where data starts on this member.
    pub data_offset: u64,
    /// Sector of the superblock on this member.
    pub super_offset: u64,
    pub events: u64,
    /// Sectors before this are in sync; `u64::MAX` ([`MAX_SECTOR`]) when clean.
    pub resync_offset: u64,
    /// For a member being recovered (`MD_FEATURE_RECOVERY_OFFSET`): sectors already rebuilt.
    pub recovery_offset: Option<u64>,
    /// 1.x feature bits ([`sb1::feature`]); 0 for 0.90.
    pub feature_map: u32,
    /// Index of this member in `roles` (1.x `dev_number`, 0.90 `this_disk.number`).
    pub dev_number: u32,
    pub role: Role,
    /// Role of every descriptor: 1.x `dev_roles[0..max_dev]`, 0.90 `disks[0..27]`.
    pub roles: Vec<Role>,
    /// 1.x device UUID in byte order; `None` for 0.90.
    pub device_uuid: Option<[u8; 16]>,
    /// Internal bitmap position in sectors relative to the superblock, when one is present.
    pub bitmap_offset: Option<i32>,
    /// Partial parity log (1.x `MD_FEATURE_PPL` or `MD_FEATURE_MULTIPLE_PPLS`): offset from the
    /// superblock (sectors, signed) and size (sectors).
    pub ppl: Option<(i16, u16)>,
    /// 1.x bad-block log: offset from the superblock (sectors, signed) and size (sectors).
    pub bad_block_log: Option<(i32, u16)>,
    /// What mdadm prints as State: clean (1.x `resync_offset == MaxSector`, 0.90 `MD_SB_CLEAN`).
    pub state_clean: bool,
    /// The checksum as stored.
    pub checksum: u32,
    /// A reshape in progress (1.x `MD_FEATURE_RESHAPE_ACTIVE`, 0.90 minor version 91).
    pub reshape: Option<Reshape>,
}

/// A parsed md superblock of any version.
// A 0.90 superblock is 4 KiB of named fields; there are only a handful per array and they
// are not moved in hot paths, so boxing would only complicate matching on them.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Superblock {
    V090(Superblock090),
    V1(Superblock1),
}

impl Superblock {
    /// Parse the superblock `bytes` read at `version.superblock_offset(device_bytes)` on a device
    /// of `device_bytes` bytes. 1.x needs at least `256 + 2*max_dev` bytes (md reads 4096), 0.90
    /// needs 4096.
    ///
    /// Checks what the kernel's `super_90_load` / `super_1_load` check: magic, major version,
    /// checksum, that `super_offset` matches where it was read, zero padding, no unknown feature
    /// bits, a sane `max_dev`, and that `data_offset`/`data_size` fit the device.
    pub fn parse(version: MetadataVersion, bytes: &[u8], device_bytes: u64) -> Result<Superblock, FormatError> {
        match version {
            MetadataVersion::V0_90 => Superblock090::parse(bytes, device_bytes).map(Superblock::V090),
            _ => Superblock1::parse(version, bytes, device_bytes).map(Superblock::V1),
        }
    }

    /// Look for a superblock at every version's location. `read_at(offset, len)` returns up to
    /// `len` bytes of the device at byte `offset`.
    ///
    /// `Ok(None)` when no location holds md's magic. When a location holds md's magic with the
    /// right major version but does not parse, and no other location holds a valid superblock,
    /// that error is returned (a damaged superblock is not a blank device). When several
    /// locations hold valid superblocks (leftovers of an older array), the newest by update time
    /// wins, then by creation time, as mdadm's `guess_super` prefers the latest.
    pub fn find<E, F>(device_bytes: u64, mut read_at: F) -> Result<Option<Superblock>, FindError<E>>
    where
        F: FnMut(u64, usize) -> Result<Vec<u8>, E>,
    {
        let mut found: Vec<Superblock> = Vec::new();
        let mut damaged: Option<FormatError> = None;
        // A location that cannot be read is skipped, as mdadm's `guess_super` skips a type whose
        // load fails: the other locations lie in a 1.2 member's data area, where a bad sector
        // must not make the member's own superblock unusable. It is the answer only when no
        // location holds a superblock.
        let mut unreadable: Option<FindError<E>> = None;
        for version in [MetadataVersion::V1_2, MetadataVersion::V1_1, MetadataVersion::V1_0, MetadataVersion::V0_90] {
            let Some(offset) = version.superblock_offset(device_bytes) else { continue };
            let len = (device_bytes - offset).min(4096) as usize;
            let buf = match read_at(offset, len) {
                Ok(buf) => buf,
                Err(source) => {
                    unreadable.get_or_insert(FindError::Read { offset, source });
                    continue;
                }
            };
            if buf.len() < 8 || bytes::le_u32(&buf, 0) != MD_SB_MAGIC {
                continue;
            }
            match Superblock::parse(version, &buf, device_bytes) {
                Ok(sb) => found.push(sb),
                Err(e) => {
                    if bytes::le_u32(&buf, 4) == version.major() && damaged.is_none() {
                        damaged = Some(e);
                    }
                }
            }
        }
        if found.is_empty() {
            // A damaged superblock says more than a location that could not be read.
            return match (damaged, unreadable) {
                (Some(e), _) => Err(FindError::Format(e)),
                (None, Some(e)) => Err(e),
                (None, None) => Ok(None),
            };
        }
        found.sort_by_key(|sb| {
            let i = sb.info();
            (i.utime, i.ctime)
        });
        Ok(found.pop())
    }

    /// The metadata version (where the superblock lives).
    pub fn version(&self) -> MetadataVersion {
        match self {
            Superblock::V090(_) => MetadataVersion::V0_90,
            Superblock::V1(sb) => sb.version,
        }
    }

    /// The normalized member description.
    pub fn info(&self) -> MemberInfo {
        match self {
            Superblock::V090(sb) => sb.info(),
            Superblock::V1(sb) => sb.info(),
        }
    }

    /// The image to write back at the superblock's offset, checksum recomputed: for 1.x
    /// `256 + 2*max_dev` bytes rounded up to a 512-byte sector (what md and mdadm write); for
    /// 0.90 the whole 4096-byte `mdp_super_t`.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Superblock::V090(sb) => sb.to_bytes(),
            Superblock::V1(sb) => sb.to_bytes(),
        }
    }

    /// Byte offset of the superblock on its device.
    pub fn byte_offset(&self) -> u64 {
        self.info().super_offset * SECTOR
    }

    pub fn set_events(&mut self, events: u64) {
        match self {
            Superblock::V090(sb) => sb.set_events(events),
            Superblock::V1(sb) => sb.events = events,
        }
    }

    pub fn set_utime(&mut self, unix_seconds: u64) {
        match self {
            Superblock::V090(sb) => sb.utime = unix_seconds as u32,
            Superblock::V1(sb) => sb.utime = unix_seconds & sb1::TIME_SECONDS_MASK,
        }
    }

    /// Mark the array clean (in sync) or active (needing resync after a crash): 1.x
    /// `resync_offset` = MaxSector / 0; 0.90 the `MD_SB_CLEAN` state bit, as `super_*_sync` do.
    pub fn set_clean(&mut self, clean: bool) {
        match self {
            Superblock::V090(sb) => sb.set_clean(clean),
            Superblock::V1(sb) => sb.resync_offset = if clean { MAX_SECTOR } else { 0 },
        }
    }

    /// Record an array that still owes a resync, which has made everything below `sectors`
    /// consistent: 1.x `resync_offset`, 0.90 `recovery_cp` (with the clean bit off), as
    /// `super_*_sync` write md's `recovery_cp` for an interrupted resync. 0.90 takes the
    /// checkpoint at the current events (`cp_events`, set the events first), else
    /// `super_90_validate` ignores it and resyncs from the start.
    pub fn set_resync_offset(&mut self, sectors: u64) {
        self.set_clean(false);
        match self {
            Superblock::V090(sb) => {
                sb.recovery_cp = sectors.min(u64::from(u32::MAX - 1)) as u32;
                sb.cp_events_lo = sb.events_lo;
                sb.cp_events_hi = sb.events_hi;
            }
            Superblock::V1(sb) => sb.resync_offset = sectors.min(MAX_SECTOR - 1),
        }
    }

    /// The superblock for a device joining this array (see [`Superblock1::for_new_member`] and
    /// [`Superblock090::for_new_member`]; 0.90 has no device UUID).
    pub fn for_new_member(
        &self,
        dev_number: u32,
        device_uuid: [u8; 16],
        device_bytes: u64,
    ) -> Result<Superblock, FormatError> {
        match self {
            Superblock::V1(sb) => Ok(Superblock::V1(sb.for_new_member(dev_number, device_uuid, device_bytes)?)),
            Superblock::V090(sb) => Ok(Superblock::V090(sb.for_new_member(dev_number, device_bytes)?)),
        }
    }

    /// The descriptor number for a device joining this array, given the numbers its devices
    /// hold (`in_use`): for 1.x the next after every number in use and after the role table
    /// (an entry of the table may still name a former member); for 0.90 the first free
    /// descriptor after the raid slots, where md's `super_90_sync` puts spares (a descriptor
    /// below `raid_disks` belongs to that slot).
    pub fn new_member_number(&self, in_use: &[u32]) -> Result<u32, FormatError> {
        match self {
            Superblock::V1(sb) => Ok(in_use.iter().map(|n| n + 1).chain([sb.max_dev]).max().unwrap_or(0)),
            Superblock::V090(sb) => {
                (sb.raid_disks..sb090::SB_DISKS as u32).find(|n| !in_use.contains(n)).ok_or_else(|| {
                    FormatError::Create(format!(
                        "0.90 metadata has room for {} devices, and every descriptor after the {} raid slots is taken",
                        sb090::SB_DISKS,
                        sb.raid_disks
                    ))
                })
            }
        }
    }

    /// Record device `dev_number` as being rebuilt into `slot` from its start: 1.x gives it the
    /// slot and a recovery offset of 0 (md resumes from the offset recorded later); 0.90 has
    /// nowhere to record a rebuild in progress, so the device stays a spare until it is whole,
    /// as md's `super_90_sync` writes a device that is not in sync. Either way a crash during
    /// the rebuild never leaves it looking in sync.
    pub fn set_rebuilding(&mut self, dev_number: u32, slot: u32) {
        match self {
            Superblock::V1(sb) => {
                sb.set_role(dev_number, Role::Active(slot));
                sb.set_recovery_offset(Some(0));
            }
            Superblock::V090(sb) => sb.set_role(dev_number, Role::Spare),
        }
    }

    /// Rewrite the role table from the devices that take part in the array (`live`: device
    /// number and role), as md's superblock sync does: 1.x marks every other entry of the first
    /// `table_len` faulty (`super_1_sync`), 0.90 rebuilds its descriptors
    /// ([`Superblock090::sync_descriptors`]).
    pub fn sync_roles(&mut self, live: &[(u32, Role)], table_len: usize) {
        match self {
            Superblock::V1(sb) => {
                for dev_number in 0..table_len as u32 {
                    let role = live.iter().find(|(d, _)| *d == dev_number).map_or(Role::Faulty, |(_, r)| *r);
                    sb.set_role(dev_number, role);
                }
            }
            Superblock::V090(sb) => sb.sync_descriptors(live),
        }
    }

    /// Record how far this device has been rebuilt (`Some(sectors)`), or that it is in sync.
    /// 0.90 has no such field; its devices are either in sync or spares.
    pub fn set_recovery_offset(&mut self, sectors: Option<u64>) {
        if let Superblock::V1(sb) = self {
            sb.set_recovery_offset(sectors);
        }
    }

    /// Set the role of descriptor `dev_number` (e.g. a member failed, or a spare took a slot).
    pub fn set_role(&mut self, dev_number: u32, role: Role) {
        match self {
            Superblock::V090(sb) => sb.set_role(dev_number, role),
            Superblock::V1(sb) => sb.set_role(dev_number, role),
        }
    }
}

/// Why [`Superblock::find`] failed.
#[derive(Debug, thiserror::Error)]
pub enum FindError<E> {
    #[error("cannot read at byte {offset}: {source}")]
    Read { offset: u64, source: E },
    #[error(transparent)]
    Format(FormatError),
}

/// What is wrong with a superblock or a request, in words a user can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("truncated: needs {needed} bytes, got {got}")]
    Truncated { needed: usize, got: usize },
    #[error("no md superblock (magic 0x{found:08x} at byte {offset})")]
    NoSuperblock { found: u32, offset: u64 },
    #[error("md superblock major version {found} at a {version} location (expected {expected})")]
    WrongMajorVersion { found: u32, expected: u32, version: MetadataVersion },
    #[error("unsupported 0.90 superblock version 0.{minor}")]
    UnsupportedMinorVersion { minor: u32 },
    #[error("bad superblock checksum (stored 0x{stored:08x}, computed 0x{computed:08x})")]
    BadChecksum { stored: u32, computed: u32 },
    #[error("superblock claims offset {claimed} but was read at {read_at} (sectors)")]
    WrongOffset { claimed: u64, read_at: u64 },
    #[error("unknown feature bits 0x{bits:x} (feature map 0x{feature_map:x})")]
    UnknownFeatures { bits: u32, feature_map: u32 },
    #[error("invalid feature combination: {0}")]
    BadFeatures(String),
    #[error("non-zero padding in {field} (a newer md feature?)")]
    NonZeroPadding { field: &'static str },
    #[error("max_dev {max_dev} is out of range (at most {limit})")]
    BadMaxDev { max_dev: u32, limit: u32 },
    #[error("raid_disks {0} is out of range")]
    BadRaidDisks(u32),
    #[error("data area does not fit the device: {0}")]
    BadDataArea(String),
    #[error("device of {device_bytes} bytes is too small for {version} metadata")]
    DeviceTooSmall { device_bytes: u64, version: MetadataVersion },
    #[error("unknown metadata version {0:?} (expected 0.90, 1.0, 1.1, 1.2 or default)")]
    UnknownMetadataVersion(String),
    #[error("bad UUID {0:?} (expected 32 hex digits, e.g. 6d646f72:61636c65:00000000:00000036)")]
    BadUuid(String),
    #[error("big-endian 0.90 superblock (made on a big-endian host) is not supported")]
    BigEndian090,
    #[error("bad bitmap superblock: {0}")]
    BadBitmap(String),
    #[error("bad PPL header checksum (stored 0x{stored:08x}, computed 0x{computed:08x})")]
    BadPplChecksum { stored: u32, computed: u32 },
    #[error("PPL header claims {count} entries (at most {max} fit)")]
    BadPplEntryCount { count: u32, max: u32 },
    #[error("cannot create array: {0}")]
    Create(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_names() {
        for (text, v) in [
            ("0.90", MetadataVersion::V0_90),
            ("0", MetadataVersion::V0_90),
            ("1.0", MetadataVersion::V1_0),
            ("1.1", MetadataVersion::V1_1),
            ("1.2", MetadataVersion::V1_2),
            ("1", MetadataVersion::V1_2),
            ("default", MetadataVersion::V1_2),
            ("01.02", MetadataVersion::V1_2),
        ] {
            assert_eq!(MetadataVersion::parse(text).unwrap(), v, "{text}");
        }
        for bad in ["", "2", "1.3", "ddf", "imsm"] {
            assert!(MetadataVersion::parse(bad).is_err(), "{bad}");
        }
        let shown: Vec<String> = MetadataVersion::all().iter().map(|v| v.to_string()).collect();
        assert_eq!(shown, ["0.90", "1.0", "1.1", "1.2"]);
        for v in MetadataVersion::all() {
            assert_eq!(MetadataVersion::parse(&v.to_string()).unwrap(), v);
        }
    }

    #[test]
    fn new_members_are_numbered_as_md_numbers_them() {
        use crate::create::{plan_members, ConsistencyPolicy, CreateSpec, NewMember};
        for version in [MetadataVersion::V0_90, MetadataVersion::V1_2] {
            let spec = CreateSpec {
                version,
                level: 5,
                layout: -1,
                chunk_sectors: 128,
                raid_disks: 4,
                array_uuid: [3; 16],
                name: "h:n".into(),
                ctime: 1_700_000_000,
                component_sectors: None,
                bitmap: false,
                data_offset: None,
                bitmap_chunk: None,
            };
            let d = NewMember::Device { bytes: 8 << 20, uuid: [1; 16] };
            let p = plan_members(&spec, ConsistencyPolicy::Resync, &[d, NewMember::Missing, d, d]).unwrap();
            let in_use: Vec<u32> = p.members.iter().map(|m| m.dev_number).collect();
            let mut sb = p.superblocks[0].clone();
            let number = sb.new_member_number(&in_use).unwrap();
            // 1.x: after the role table; 0.90: the first descriptor after the slots.
            assert_eq!(number, if version == MetadataVersion::V0_90 { 4 } else { 128 }, "{version}");
            let mut new = sb.for_new_member(number, [5; 16], 8 << 20).unwrap();
            new.set_rebuilding(number, 1);
            let info = new.info();
            if version == MetadataVersion::V0_90 {
                assert_eq!(info.role, Role::Spare, "0.90 cannot record a rebuild: a spare until whole");
            } else {
                assert_eq!((info.role, info.recovery_offset), (Role::Active(1), Some(0)));
            }
            // Once rebuilt, the role table says so.
            sb.sync_roles(
                &[(0, Role::Active(0)), (number, Role::Active(1)), (2, Role::Active(2))],
                number as usize + 1,
            );
            assert_eq!(sb.info().roles[number as usize], Role::Active(1), "{version}");
        }
    }

    #[test]
    fn superblock_locations() {
        let four_mib = 4u64 << 20;
        assert_eq!(MetadataVersion::V1_2.superblock_offset(four_mib), Some(4096));
        assert_eq!(MetadataVersion::V1_1.superblock_offset(four_mib), Some(0));
        assert_eq!(MetadataVersion::V1_0.superblock_offset(four_mib), Some(8176 * 512));
        assert_eq!(MetadataVersion::V0_90.superblock_offset(four_mib), Some(8064 * 512));
        // Odd sizes: 1.0 stays 4 KiB aligned 8-12 KiB from the end, 0.90 64 KiB aligned.
        assert_eq!(MetadataVersion::V1_0.superblock_offset(four_mib + 3 * 512), Some(8176 * 512));
        assert_eq!(MetadataVersion::V0_90.superblock_offset(four_mib + 127 * 512), Some(8064 * 512));
        assert_eq!(MetadataVersion::V1_2.superblock_offset(23 * 512), None);
        assert_eq!(MetadataVersion::V0_90.superblock_offset(127 * 512), None);
    }
}
