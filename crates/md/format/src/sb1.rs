//! The version-1 md superblock (`struct mdp_superblock_1` in the kernel's md_p.h), used by
//! metadata 1.0, 1.1 and 1.2. All fields are little-endian.
//!
//! Layout: 256 bytes of fixed fields, then `dev_roles[max_dev]` (u16 each). md reads 4 KiB and
//! writes `256 + 2*max_dev` bytes rounded up to the logical block size. The checksum covers the
//! fixed part and the roles (`calc_sb_1_csum`).

use crate::bytes::{array, le_i32, le_u16, le_u32, le_u64, put_u16, put_u32, put_u64};
use crate::{role_code, FormatError, MemberInfo, MetadataVersion, Reshape, Role, MAX_SECTOR, MD_SB_MAGIC, SECTOR};

/// Size of the fixed part before `dev_roles`.
pub const FIXED_BYTES: usize = 256;
/// md reads (and mdadm allocates) one 4 KiB block for the superblock.
pub const MAX_SB_BYTES: usize = 4096;
/// Largest `max_dev` that fits 4 KiB: (4096 - 256) / 2 (`super_1_load`).
pub const MAX_DEVS: u32 = ((MAX_SB_BYTES - FIXED_BYTES) / 2) as u32;
/// mdadm refuses devices smaller than this many sectors for 1.x (`load_super1`, `store_super1`).
pub const MIN_DEVICE_SECTORS: u64 = 24;
/// ctime/utime: the low 40 bits are seconds, the high 24 bits microseconds.
pub const TIME_SECONDS_MASK: u64 = (1 << 40) - 1;

/// `feature_map` bits (md_p.h `MD_FEATURE_*`).
pub mod feature {
    /// `bitmap_offset` is valid: an internal write-intent bitmap is present.
    pub const BITMAP_OFFSET: u32 = 1;
    /// `recovery_offset` is valid: this member is partly rebuilt.
    pub const RECOVERY_OFFSET: u32 = 2;
    /// A reshape is in progress (`new_*` and `reshape_position` are valid).
    pub const RESHAPE_ACTIVE: u32 = 4;
    /// The bad-block log is not empty.
    pub const BAD_BLOCKS: u32 = 8;
    /// This member replaces the active member with the same role.
    pub const REPLACEMENT: u32 = 16;
    /// The reshape runs backwards.
    pub const RESHAPE_BACKWARDS: u32 = 32;
    /// `new_offset` is valid.
    pub const NEW_OFFSET: u32 = 64;
    /// A recovery is driven by the bitmap.
    pub const RECOVERY_BITMAP: u32 = 128;
    /// Clustered md (mdadm calls this bit BITMAP_VERSIONED).
    pub const CLUSTERED: u32 = 256;
    /// The array has a raid4/5/6 write journal.
    pub const JOURNAL: u32 = 512;
    /// Partial parity log (raid5 write hole protection).
    pub const PPL: u32 = 1024;
    /// Several PPLs.
    pub const MULTIPLE_PPLS: u32 = 2048;
    /// `layout` is meaningful for raid0 (multi-zone arrays).
    pub const RAID0_LAYOUT: u32 = 4096;
    /// Every bit the kernel knows (`MD_FEATURE_ALL`); others make it reject the superblock.
    pub const ALL: u32 = BITMAP_OFFSET
        | RECOVERY_OFFSET
        | RESHAPE_ACTIVE
        | BAD_BLOCKS
        | REPLACEMENT
        | RESHAPE_BACKWARDS
        | NEW_OFFSET
        | RECOVERY_BITMAP
        | CLUSTERED
        | JOURNAL
        | PPL
        | MULTIPLE_PPLS
        | RAID0_LAYOUT;
}

/// `devflags` bits.
pub mod devflag {
    /// Avoid reading from this raid1 member.
    pub const WRITE_MOSTLY: u8 = 1;
    /// Fail requests fast instead of retrying.
    pub const FAIL_FAST: u8 = 2;
}

/// Every on-disk field of a version-1 superblock, by name. Offsets are in the comments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock1 {
    /// Where this superblock was read or is to be written; not stored on disk.
    pub version: MetadataVersion,
    /// 0: `MD_SB_MAGIC`.
    pub magic: u32,
    /// 4: 1.
    pub major_version: u32,
    /// 8: [`feature`] bits.
    pub feature_map: u32,
    /// 12: must be zero.
    pub pad0: u32,
    /// 16: array UUID (mdadm stores it in display byte order).
    pub set_uuid: [u8; 16],
    /// 32: "homehost:name" or "name", NUL padded.
    pub set_name: [u8; 32],
    /// 64: creation time, low 40 bits seconds, high 24 bits microseconds.
    pub ctime: u64,
    /// 72: -4 multipath, -1 linear, 0, 1, 4, 5, 6, 10.
    pub level: i32,
    /// 76: raid5/6/10 layout; raid0 layout with `RAID0_LAYOUT`.
    pub layout: i32,
    /// 80: sectors of each member used by the array.
    pub size: u64,
    /// 88: chunk size in sectors.
    pub chunksize: u32,
    /// 92
    pub raid_disks: u32,
    /// 96: bitmap start relative to the superblock, in sectors (signed). With `PPL` the same
    /// four bytes hold the PPL offset (s16) and size (u16); see [`Superblock1::ppl`].
    pub bitmap_offset: i32,
    /// 100: reshape target level (valid with `RESHAPE_ACTIVE`).
    pub new_level: i32,
    /// 104: next array sector to reshape.
    pub reshape_position: u64,
    /// 112: change in raid_disks.
    pub delta_disks: i32,
    /// 116
    pub new_layout: i32,
    /// 120: new chunk size in sectors.
    pub new_chunk: u32,
    /// 124: signed change of data_offset in the new layout (valid with `NEW_OFFSET`).
    pub new_offset: i32,
    /// 128: sector where data starts.
    pub data_offset: u64,
    /// 136: sectors available for data.
    pub data_size: u64,
    /// 144: sector of this superblock.
    pub super_offset: u64,
    /// 152: sectors rebuilt so far (with `RECOVERY_OFFSET`), or the journal tail of a journal.
    pub recovery_offset: u64,
    /// 160: index of this device in `dev_roles`.
    pub dev_number: u32,
    /// 164: read errors corrected by rewriting.
    pub cnt_corrected_read: u32,
    /// 168: device UUID.
    pub device_uuid: [u8; 16],
    /// 184: [`devflag`] bits.
    pub devflags: u8,
    /// 185: bad-block entries count blocks of `1 << bblog_shift` sectors.
    pub bblog_shift: u8,
    /// 186: sectors reserved for the bad-block log.
    pub bblog_size: u16,
    /// 188: bad-block log start relative to the superblock, in sectors (signed).
    pub bblog_offset: i32,
    /// 192: last update, same encoding as ctime.
    pub utime: u64,
    /// 200: update counter.
    pub events: u64,
    /// 208: sectors known in sync; MaxSector when clean.
    pub resync_offset: u64,
    /// 216: checksum as stored.
    pub sb_csum: u32,
    /// 220: number of `dev_roles` entries.
    pub max_dev: u32,
    /// 224: must be zero.
    pub pad3: [u8; 32],
    /// 256: role per device number ([`role_code`], or a raid slot).
    pub dev_roles: Vec<u16>,
    /// The bytes after `dev_roles` up to the end of what was read (at most 4 KiB). md writes
    /// the superblock rounded up to a sector, so the part of these within that sector is
    /// written back unchanged. mdadm fills them with 0xff.
    pub trailing: Vec<u8>,
}

/// `calc_sb_1_csum`: the sum of the little-endian u32 words of the first `256 + 2*max_dev`
/// bytes (the checksum field counted as zero, a trailing u16 added alone), folded from 64 to
/// 32 bits by adding the high half to the low half.
pub fn checksum(bytes: &[u8], max_dev: u32) -> u32 {
    let len = FIXED_BYTES + 2 * max_dev as usize;
    let mut sum: u64 = 0;
    let mut off = 0;
    while off + 4 <= len {
        if off != 216 {
            sum += u64::from(le_u32(bytes, off));
        }
        off += 4;
    }
    if len - off == 2 {
        sum += u64::from(le_u16(bytes, off));
    }
    ((sum & 0xffff_ffff) + (sum >> 32)) as u32
}

/// Bytes md writes for a superblock with `max_dev` roles: `256 + 2*max_dev` rounded up to a
/// 512-byte sector (`super_1_load`'s `sb_size` with 512-byte logical blocks; mdadm's
/// `store_super1`).
pub fn written_bytes(max_dev: u32) -> usize {
    (FIXED_BYTES + 2 * max_dev as usize).div_ceil(512) * 512
}

impl Superblock1 {
    /// Parse and check a 1.x superblock read at `version`'s location of a device of
    /// `device_bytes` bytes (see [`crate::Superblock::parse`]).
    pub fn parse(version: MetadataVersion, bytes: &[u8], device_bytes: u64) -> Result<Self, FormatError> {
        let device_sectors = device_bytes / SECTOR;
        let read_at =
            version.superblock_sector(device_sectors).ok_or(FormatError::DeviceTooSmall { device_bytes, version })?;
        if bytes.len() < FIXED_BYTES {
            return Err(FormatError::Truncated { needed: FIXED_BYTES, got: bytes.len() });
        }
        let magic = le_u32(bytes, 0);
        if magic != MD_SB_MAGIC {
            return Err(FormatError::NoSuperblock { found: magic, offset: read_at * SECTOR });
        }
        let major_version = le_u32(bytes, 4);
        if major_version != 1 {
            return Err(FormatError::WrongMajorVersion { found: major_version, expected: 1, version });
        }
        let max_dev = le_u32(bytes, 220);
        if max_dev > MAX_DEVS {
            return Err(FormatError::BadMaxDev { max_dev, limit: MAX_DEVS });
        }
        let needed = FIXED_BYTES + 2 * max_dev as usize;
        if bytes.len() < needed {
            return Err(FormatError::Truncated { needed, got: bytes.len() });
        }
        let stored = le_u32(bytes, 216);
        let computed = checksum(bytes, max_dev);
        if stored != computed {
            return Err(FormatError::BadChecksum { stored, computed });
        }
        let sb = Self::decode(version, bytes);
        sb.check(read_at, device_sectors)?;
        Ok(sb)
    }

    /// Decode the fields without any check (`bytes` holds at least `256 + 2*max_dev` bytes).
    fn decode(version: MetadataVersion, bytes: &[u8]) -> Self {
        let max_dev = le_u32(bytes, 220);
        let roles_end = FIXED_BYTES + 2 * max_dev as usize;
        let dev_roles = (0..max_dev as usize).map(|i| le_u16(bytes, FIXED_BYTES + 2 * i)).collect();
        let trailing_end = bytes.len().min(MAX_SB_BYTES).max(roles_end);
        Superblock1 {
            version,
            magic: le_u32(bytes, 0),
            major_version: le_u32(bytes, 4),
            feature_map: le_u32(bytes, 8),
            pad0: le_u32(bytes, 12),
            set_uuid: array(bytes, 16),
            set_name: array(bytes, 32),
            ctime: le_u64(bytes, 64),
            level: le_i32(bytes, 72),
            layout: le_i32(bytes, 76),
            size: le_u64(bytes, 80),
            chunksize: le_u32(bytes, 88),
            raid_disks: le_u32(bytes, 92),
            bitmap_offset: le_i32(bytes, 96),
            new_level: le_i32(bytes, 100),
            reshape_position: le_u64(bytes, 104),
            delta_disks: le_i32(bytes, 112),
            new_layout: le_i32(bytes, 116),
            new_chunk: le_u32(bytes, 120),
            new_offset: le_i32(bytes, 124),
            data_offset: le_u64(bytes, 128),
            data_size: le_u64(bytes, 136),
            super_offset: le_u64(bytes, 144),
            recovery_offset: le_u64(bytes, 152),
            dev_number: le_u32(bytes, 160),
            cnt_corrected_read: le_u32(bytes, 164),
            device_uuid: array(bytes, 168),
            devflags: bytes[184],
            bblog_shift: bytes[185],
            bblog_size: le_u16(bytes, 186),
            bblog_offset: le_i32(bytes, 188),
            utime: le_u64(bytes, 192),
            events: le_u64(bytes, 200),
            resync_offset: le_u64(bytes, 208),
            sb_csum: le_u32(bytes, 216),
            max_dev,
            pad3: array(bytes, 224),
            dev_roles,
            trailing: bytes[roles_end..trailing_end].to_vec(),
        }
    }

    /// The load-time checks of `super_1_load` after magic, version and checksum.
    fn check(&self, read_at: u64, device_sectors: u64) -> Result<(), FormatError> {
        if self.super_offset != read_at {
            return Err(FormatError::WrongOffset { claimed: self.super_offset, read_at });
        }
        let unknown = self.feature_map & !feature::ALL;
        if unknown != 0 {
            return Err(FormatError::UnknownFeatures { bits: unknown, feature_map: self.feature_map });
        }
        if self.pad0 != 0 {
            return Err(FormatError::NonZeroPadding { field: "pad0" });
        }
        if self.pad3.iter().any(|&b| b != 0) {
            return Err(FormatError::NonZeroPadding { field: "pad3" });
        }
        let fm = self.feature_map;
        if fm & (feature::PPL | feature::MULTIPLE_PPLS) != 0 {
            // super_1_validate: a PPL (single or multiple) excludes a bitmap and a journal, and
            // the two PPL bits exclude each other.
            if fm & (feature::BITMAP_OFFSET | feature::JOURNAL) != 0 {
                return Err(FormatError::BadFeatures("PPL together with a bitmap or a journal".into()));
            }
            if fm & feature::PPL != 0 && fm & feature::MULTIPLE_PPLS != 0 {
                return Err(FormatError::BadFeatures("PPL together with MULTIPLE_PPLS".into()));
            }
        }
        if fm & feature::RAID0_LAYOUT != 0 && self.level != 0 {
            return Err(FormatError::BadFeatures(format!("RAID0_LAYOUT on a level {} array", self.level)));
        }
        if self.data_size < 10 {
            return Err(FormatError::BadDataArea(format!("data_size {} is below 10 sectors", self.data_size)));
        }
        // super_1_load: the data must start after the superblock for 1.1/1.2, and data_size must
        // fit in what the device has after data_offset (1.1/1.2) or before the superblock (1.0).
        let sb_sectors = (written_bytes(self.max_dev) as u64) / SECTOR;
        let room = if self.version == MetadataVersion::V1_0 {
            read_at
        } else {
            if self.data_offset < read_at + sb_sectors {
                return Err(FormatError::BadDataArea(format!(
                    "data_offset {} overlaps the superblock at {} ({} sectors)",
                    self.data_offset, read_at, sb_sectors
                )));
            }
            device_sectors.saturating_sub(self.data_offset)
        };
        if room < self.data_size {
            return Err(FormatError::BadDataArea(format!(
                "data_size {} at data_offset {} exceeds the {} sectors available on a {}-sector device",
                self.data_size, self.data_offset, room, device_sectors
            )));
        }
        Ok(())
    }

    /// The image md writes: `256 + 2*max_dev` bytes rounded up to 512, checksum recomputed.
    pub fn to_bytes(&self) -> Vec<u8> {
        let roles_end = FIXED_BYTES + 2 * self.max_dev as usize;
        let len = written_bytes(self.max_dev);
        let mut b = vec![0u8; len];
        put_u32(&mut b, 0, self.magic);
        put_u32(&mut b, 4, self.major_version);
        put_u32(&mut b, 8, self.feature_map);
        put_u32(&mut b, 12, self.pad0);
        b[16..32].copy_from_slice(&self.set_uuid);
        b[32..64].copy_from_slice(&self.set_name);
        put_u64(&mut b, 64, self.ctime);
        put_u32(&mut b, 72, self.level as u32);
        put_u32(&mut b, 76, self.layout as u32);
        put_u64(&mut b, 80, self.size);
        put_u32(&mut b, 88, self.chunksize);
        put_u32(&mut b, 92, self.raid_disks);
        put_u32(&mut b, 96, self.bitmap_offset as u32);
        put_u32(&mut b, 100, self.new_level as u32);
        put_u64(&mut b, 104, self.reshape_position);
        put_u32(&mut b, 112, self.delta_disks as u32);
        put_u32(&mut b, 116, self.new_layout as u32);
        put_u32(&mut b, 120, self.new_chunk);
        put_u32(&mut b, 124, self.new_offset as u32);
        put_u64(&mut b, 128, self.data_offset);
        put_u64(&mut b, 136, self.data_size);
        put_u64(&mut b, 144, self.super_offset);
        put_u64(&mut b, 152, self.recovery_offset);
        put_u32(&mut b, 160, self.dev_number);
        put_u32(&mut b, 164, self.cnt_corrected_read);
        b[168..184].copy_from_slice(&self.device_uuid);
        b[184] = self.devflags;
        b[185] = self.bblog_shift;
        put_u16(&mut b, 186, self.bblog_size);
        put_u32(&mut b, 188, self.bblog_offset as u32);
        put_u64(&mut b, 192, self.utime);
        put_u64(&mut b, 200, self.events);
        put_u64(&mut b, 208, self.resync_offset);
        put_u32(&mut b, 220, self.max_dev);
        b[224..256].copy_from_slice(&self.pad3);
        for i in 0..self.max_dev as usize {
            let role = self.dev_roles.get(i).copied().unwrap_or(role_code::SPARE);
            put_u16(&mut b, FIXED_BYTES + 2 * i, role);
        }
        // The rest of the last sector: what was read there (mdadm's 0xff fill when unknown).
        for (i, byte) in b[roles_end..].iter_mut().enumerate() {
            *byte = self.trailing.get(i).copied().unwrap_or(0xff);
        }
        let csum = checksum(&b, self.max_dev);
        put_u32(&mut b, 216, csum);
        b
    }

    /// The checksum the current fields would have.
    pub fn computed_checksum(&self) -> u32 {
        checksum(&self.to_bytes(), self.max_dev)
    }

    /// The array name up to the first NUL.
    pub fn name(&self) -> String {
        let end = self.set_name.iter().position(|&b| b == 0).unwrap_or(32);
        String::from_utf8_lossy(&self.set_name[..end]).into_owned()
    }

    /// The PPL offset (sectors from the superblock) and size, meaningful with `feature::PPL`
    /// or `feature::MULTIPLE_PPLS`.
    pub fn ppl(&self) -> (i16, u16) {
        let raw = self.bitmap_offset as u32;
        ((raw & 0xffff) as u16 as i16, (raw >> 16) as u16)
    }

    /// The PPL area, when `feature::PPL` or `feature::MULTIPLE_PPLS` says there is one.
    pub fn ppl_area(&self) -> Option<(i16, u16)> {
        (self.feature_map & (feature::PPL | feature::MULTIPLE_PPLS) != 0).then(|| self.ppl())
    }

    /// Set the PPL area: `Some((offset, size))` (sectors from the superblock, sectors) sets
    /// `feature::PPL` (clearing `MULTIPLE_PPLS`, which md sets itself when it runs the array)
    /// and the `ppl` half of the union with `bitmap_offset`, as mdadm's `write_init_super1`
    /// does. `None` clears both PPL bits, and the union field if a PPL was recorded there.
    /// Nothing is refused: a bitmap shares these four bytes, so callers keep the two apart.
    pub fn set_ppl(&mut self, area: Option<(i16, u16)>) {
        match area {
            Some((offset, size)) => {
                self.feature_map &= !feature::MULTIPLE_PPLS;
                self.feature_map |= feature::PPL;
                self.bitmap_offset = ((u32::from(size) << 16) | u32::from(offset as u16)) as i32;
            }
            None => {
                if self.ppl_area().is_some() {
                    self.bitmap_offset = 0;
                }
                self.feature_map &= !(feature::PPL | feature::MULTIPLE_PPLS);
            }
        }
    }

    /// Role of device number `dev`, decoded as `super_1_validate` does (`dev_number` beyond
    /// `max_dev` is a spare).
    pub fn role_of(&self, dev: u32) -> Role {
        let Some(&code) = self.dev_roles.get(dev as usize) else { return Role::Spare };
        let role = decode_role(code);
        match role {
            Role::Active(slot) if dev == self.dev_number && self.feature_map & feature::REPLACEMENT != 0 => {
                Role::Replacement(slot)
            }
            other => other,
        }
    }

    /// The superblock for a device joining this array (a spare, or a member to rebuild): this
    /// array's superblock with the new device's number, UUID and placement. The metadata areas
    /// keep their offsets relative to the superblock, as mdadm's `add_to_super1` arranges; the
    /// device must hold this array's data size (`size`) after them.
    pub fn for_new_member(
        &self,
        dev_number: u32,
        device_uuid: [u8; 16],
        device_bytes: u64,
    ) -> Result<Superblock1, FormatError> {
        let sectors = device_bytes / 512;
        let mut sb = self.clone();
        sb.dev_number = dev_number;
        sb.device_uuid = device_uuid;
        sb.feature_map &= !(feature::RECOVERY_OFFSET | feature::REPLACEMENT);
        sb.recovery_offset = 0;
        sb.cnt_corrected_read = 0;
        sb.devflags = 0;
        let super_offset = self.version.superblock_sector(sectors).ok_or_else(|| {
            FormatError::Create(format!("device of {device_bytes} bytes is too small for md metadata"))
        })?;
        let (data_offset, data_size) = match self.version {
            // Metadata sits between the data and the superblock at the end: keep the same gap.
            MetadataVersion::V1_0 => {
                let gap = self.super_offset.saturating_sub(self.data_size);
                (0, super_offset.saturating_sub(gap))
            }
            _ => (self.data_offset, sectors.saturating_sub(self.data_offset)),
        };
        if data_size < self.size {
            return Err(FormatError::Create(format!(
                "device of {device_bytes} bytes is too small: the array needs {} sectors of data after {} sectors of metadata",
                self.size, data_offset
            )));
        }
        sb.super_offset = super_offset;
        sb.data_offset = data_offset;
        sb.data_size = data_size;
        Ok(sb)
    }

    /// Mark this device as rebuilt up to `sectors` (`Some`), or as fully in sync (`None`).
    pub fn set_recovery_offset(&mut self, sectors: Option<u64>) {
        match sectors {
            Some(s) => {
                self.feature_map |= feature::RECOVERY_OFFSET;
                self.recovery_offset = s;
            }
            None => {
                self.feature_map &= !feature::RECOVERY_OFFSET;
                self.recovery_offset = 0;
            }
        }
    }

    /// Set the role of device number `dev`, growing `max_dev` when needed as `super_1_sync`
    /// does. For this device, `Replacement` sets `MD_FEATURE_REPLACEMENT` and other roles clear it.
    pub fn set_role(&mut self, dev: u32, role: Role) {
        if dev >= MAX_DEVS {
            // Cannot be recorded in a 4 KiB superblock.
            return;
        }
        if dev >= self.max_dev {
            // The entries that come into view were 0xff-filled in md's and mdadm's buffers.
            let grow = 2 * (dev + 1 - self.max_dev) as usize;
            self.trailing.drain(..grow.min(self.trailing.len()));
            self.max_dev = dev + 1;
        }
        self.dev_roles.resize(self.max_dev as usize, role_code::SPARE);
        self.dev_roles[dev as usize] = encode_role(role);
        if dev == self.dev_number {
            if matches!(role, Role::Replacement(_)) {
                self.feature_map |= feature::REPLACEMENT;
            } else {
                self.feature_map &= !feature::REPLACEMENT;
            }
        }
    }

    /// The normalized view.
    pub fn info(&self) -> MemberInfo {
        let fm = self.feature_map;
        // super_1_validate: raid0 without RAID0_LAYOUT has no known layout.
        let layout = if self.level == 0 && fm & feature::RAID0_LAYOUT == 0 { -1 } else { self.layout };
        MemberInfo {
            version: self.version,
            array_uuid: self.set_uuid,
            name: self.name(),
            preferred_minor: None,
            ctime: self.ctime & TIME_SECONDS_MASK,
            utime: self.utime & TIME_SECONDS_MASK,
            level: self.level,
            layout,
            chunk_sectors: self.chunksize,
            raid_disks: self.raid_disks,
            component_sectors: self.size,
            usable_sectors: self.data_size,
            avail_sectors: self.data_size,
            data_offset: self.data_offset,
            super_offset: self.super_offset,
            events: self.events,
            resync_offset: self.resync_offset,
            recovery_offset: (fm & feature::RECOVERY_OFFSET != 0).then_some(self.recovery_offset),
            feature_map: fm,
            dev_number: self.dev_number,
            role: self.role_of(self.dev_number),
            roles: self.dev_roles.iter().map(|&c| decode_role(c)).collect(),
            device_uuid: Some(self.device_uuid),
            bitmap_offset: (fm & feature::BITMAP_OFFSET != 0).then_some(self.bitmap_offset),
            ppl: self.ppl_area(),
            bad_block_log: (self.bblog_size != 0 && self.bblog_offset != 0)
                .then_some((self.bblog_offset, self.bblog_size)),
            state_clean: self.resync_offset == MAX_SECTOR,
            checksum: self.sb_csum,
            reshape: (fm & feature::RESHAPE_ACTIVE != 0).then(|| Reshape {
                position: self.reshape_position,
                delta_disks: self.delta_disks,
                new_level: self.new_level,
                new_layout: self.new_layout,
                new_chunk_sectors: self.new_chunk,
                backwards: Reshape::is_backwards(self.delta_disks, fm & feature::RESHAPE_BACKWARDS != 0),
                new_offset: if fm & feature::NEW_OFFSET != 0 { i64::from(self.new_offset) } else { 0 },
            }),
        }
    }
}

/// A `dev_roles` value as a role.
pub fn decode_role(code: u16) -> Role {
    match code {
        role_code::SPARE => Role::Spare,
        role_code::FAULTY => Role::Faulty,
        role_code::JOURNAL => Role::Journal,
        slot => Role::Active(u32::from(slot)),
    }
}

/// A role as a `dev_roles` value (a replacement is stored with its slot number).
pub fn encode_role(role: Role) -> u16 {
    match role {
        Role::Active(slot) | Role::Replacement(slot) => slot.min(u32::from(role_code::MAX) - 1) as u16,
        Role::Spare => role_code::SPARE,
        Role::Faulty => role_code::FAULTY,
        Role::Journal => role_code::JOURNAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::create::{plan, CreateSpec};
    use crate::Superblock;

    fn raid5_superblock(version: MetadataVersion) -> (Superblock1, u64) {
        let spec = CreateSpec {
            version,
            level: 5,
            layout: -1,
            chunk_sectors: 128,
            raid_disks: 3,
            array_uuid: [9; 16],
            name: "h:n".into(),
            ctime: 1_700_000_000,
            component_sectors: None,
            bitmap: false,
            data_offset: None,
            bitmap_chunk: None,
        };
        let bytes = 24 << 20;
        let made = plan(&spec, &[bytes; 3], &[[1; 16]; 3]).unwrap();
        match &made.superblocks[0] {
            Superblock::V1(sb) => (sb.clone(), bytes),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_reshape_in_progress_is_read_as_super_1_validate_reads_it() {
        let (mut sb, bytes) = raid5_superblock(MetadataVersion::V1_2);
        assert_eq!(sb.info().reshape, None);
        sb.feature_map |= feature::RESHAPE_ACTIVE | feature::NEW_OFFSET;
        sb.raid_disks = 4;
        sb.delta_disks = 1;
        sb.reshape_position = 4096;
        sb.new_level = 5;
        sb.new_layout = 2;
        sb.new_chunk = 256;
        sb.new_offset = -512;
        let back = Superblock1::parse(MetadataVersion::V1_2, &sb.to_bytes(), bytes).unwrap();
        let r = back.info().reshape.expect("a reshape");
        assert_eq!(
            (r.position, r.delta_disks, r.new_level, r.new_layout, r.new_chunk_sectors, r.new_offset, r.backwards),
            (4096, 1, 5, 2, 256, -512, false)
        );
        assert_eq!(r.old_raid_disks(back.raid_disks), 3);
        // Without NEW_OFFSET the offset does not move, whatever the field holds; a reshape that
        // keeps the member count runs backwards when the flag says so.
        sb.feature_map &= !feature::NEW_OFFSET;
        sb.feature_map |= feature::RESHAPE_BACKWARDS;
        sb.delta_disks = 0;
        let r = sb.info().reshape.unwrap();
        assert_eq!((r.new_offset, r.backwards), (0, true));
    }

    #[test]
    fn set_ppl_round_trips_through_the_union() {
        for (version, area) in [(MetadataVersion::V1_2, (8i16, 2048u16)), (MetadataVersion::V1_0, (-2056, 2048))] {
            let (mut sb, bytes) = raid5_superblock(version);
            assert_eq!(sb.ppl_area(), None);
            sb.set_ppl(Some(area));
            assert_eq!(sb.feature_map & feature::PPL, feature::PPL);
            assert_eq!(sb.ppl(), area);
            let written = sb.to_bytes();
            // md_p.h: `__s16 offset; __u16 size;` at byte 96.
            assert_eq!(le_u16(&written, 96) as i16, area.0);
            assert_eq!(le_u16(&written, 98), area.1);
            let back = Superblock1::parse(version, &written, bytes).unwrap();
            assert_eq!(back.ppl_area(), Some(area));
            assert_eq!(back.info().ppl, Some(area));
            assert_eq!(back.info().bitmap_offset, None);
            assert!(back.to_bytes() == written, "parsing and writing again gives the same bytes");

            // The kernel's form: MULTIPLE_PPLS instead of PPL, same union.
            let mut multi = back.clone();
            multi.feature_map = (multi.feature_map & !feature::PPL) | feature::MULTIPLE_PPLS;
            let multi = Superblock1::parse(version, &multi.to_bytes(), bytes).unwrap();
            assert_eq!(multi.ppl_area(), Some(area));

            let mut cleared = back.clone();
            cleared.set_ppl(None);
            assert_eq!(cleared.feature_map & (feature::PPL | feature::MULTIPLE_PPLS), 0);
            assert_eq!(cleared.bitmap_offset, 0);
            assert_eq!(Superblock1::parse(version, &cleared.to_bytes(), bytes).unwrap().info().ppl, None);
        }
    }

    #[test]
    fn clearing_an_absent_ppl_keeps_a_bitmap_offset() {
        let (mut sb, _) = raid5_superblock(MetadataVersion::V1_2);
        sb.feature_map |= feature::BITMAP_OFFSET;
        sb.bitmap_offset = 8;
        sb.set_ppl(None);
        assert_eq!(sb.bitmap_offset, 8);
        assert_eq!(sb.feature_map & feature::BITMAP_OFFSET, feature::BITMAP_OFFSET);
    }

    #[test]
    fn ppl_with_a_bitmap_or_both_ppl_bits_is_refused() {
        let (mut sb, bytes) = raid5_superblock(MetadataVersion::V1_2);
        sb.set_ppl(Some((8, 2048)));
        for extra in [feature::BITMAP_OFFSET, feature::JOURNAL, feature::MULTIPLE_PPLS] {
            let mut bad = sb.clone();
            bad.feature_map |= extra;
            assert!(matches!(
                Superblock1::parse(MetadataVersion::V1_2, &bad.to_bytes(), bytes),
                Err(FormatError::BadFeatures(_))
            ));
        }
        let mut multi_bitmap = sb.clone();
        multi_bitmap.feature_map =
            (multi_bitmap.feature_map & !feature::PPL) | feature::MULTIPLE_PPLS | feature::BITMAP_OFFSET;
        assert!(Superblock1::parse(MetadataVersion::V1_2, &multi_bitmap.to_bytes(), bytes).is_err());
    }
}
