//! The version-0.90 md superblock (`mdp_super_t` in the kernel's md_p.h).
//!
//! 4096 bytes = 1024 u32 words in host byte order, at `(sectors & ~127) - 128` (the last
//! 64-128 KiB of the device). Only little-endian superblocks are handled here (those made on
//! x86, arm64, ...). Word map: 0-31 constant array information, 32-63 array state, 64-127
//! personality (layout, chunk), 128-991 `disks[27]` (32 words each), 992-1023 `this_disk`.
//! The checksum is the folded sum of all 1024 words (`calc_sb_csum`).

use crate::bytes::{le_u32, put_u32};
use crate::{FormatError, MemberInfo, MetadataVersion, Reshape, Role, MAX_SECTOR, MD_SB_MAGIC, SECTOR};

/// Size of the superblock.
pub const SB_BYTES: usize = 4096;
/// md reserves the last 64-128 KiB (`MD_RESERVED_SECTORS`).
pub const RESERVED_SECTORS: u64 = 128;
/// Number of device descriptors (`MD_SB_DISKS`).
pub const SB_DISKS: usize = 27;

/// Array `state` bits (`MD_SB_*`).
pub mod state {
    /// The array was shut down cleanly.
    pub const CLEAN: u32 = 1 << 0;
    pub const ERRORS: u32 = 1 << 1;
    /// An internal bitmap follows the superblock (4 KiB after it).
    pub const BITMAP_PRESENT: u32 = 1 << 8;
}

/// Descriptor `state` bits (`MD_DISK_*`).
pub mod disk_state {
    pub const FAULTY: u32 = 1 << 0;
    pub const ACTIVE: u32 = 1 << 1;
    pub const SYNC: u32 = 1 << 2;
    pub const REMOVED: u32 = 1 << 3;
    pub const WRITE_MOSTLY: u32 = 1 << 9;
}

/// Sector of the 0.90 superblock on a device of `device_sectors` sectors
/// (`MD_NEW_SIZE_SECTORS`), `None` when the device is smaller than the reserved area.
pub fn sb_start(device_sectors: u64) -> Option<u64> {
    let rounded = device_sectors & !(RESERVED_SECTORS - 1);
    rounded.checked_sub(RESERVED_SECTORS).filter(|_| rounded >= RESERVED_SECTORS)
}

/// One device descriptor (`mdp_disk_t`, 32 words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Disk090 {
    /// Descriptor number (index into `disks`).
    pub number: u32,
    /// Device major/minor when the superblock was written.
    pub major: u32,
    pub minor: u32,
    /// Raid slot.
    pub raid_disk: u32,
    /// [`disk_state`] bits.
    pub state: u32,
    /// Words 5-31, unused.
    pub reserved: [u32; 27],
}

impl Disk090 {
    fn decode(words: &[u32]) -> Self {
        let mut reserved = [0u32; 27];
        reserved.copy_from_slice(&words[5..32]);
        Disk090 { number: words[0], major: words[1], minor: words[2], raid_disk: words[3], state: words[4], reserved }
    }

    fn encode(&self, words: &mut [u32]) {
        words[0] = self.number;
        words[1] = self.major;
        words[2] = self.minor;
        words[3] = self.raid_disk;
        words[4] = self.state;
        words[5..32].copy_from_slice(&self.reserved);
    }

    /// The role this descriptor gives its device (`super_90_validate`).
    pub fn role(&self, minor_version: u32) -> Role {
        if self.state & disk_state::FAULTY != 0 {
            Role::Faulty
        } else if self.state & disk_state::SYNC != 0 {
            Role::Active(self.raid_disk)
        } else if self.state & disk_state::ACTIVE != 0 && minor_version >= 91 {
            // Active but not in sync: being recovered (after a reshape).
            Role::Active(self.raid_disk)
        } else {
            Role::Spare
        }
    }
}

/// Every on-disk field of a 0.90 superblock, by name (word index in the comments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock090 {
    /// Sector where this superblock was read or is to be written; not stored on disk (it
    /// follows from the device size).
    pub sb_start: u64,
    /// 0
    pub md_magic: u32,
    /// 1: 0.
    pub major_version: u32,
    /// 2: 90, or 91 while a reshape is in progress.
    pub minor_version: u32,
    /// 3
    pub patch_version: u32,
    /// 4
    pub gvalid_words: u32,
    /// 5: first UUID word.
    pub set_uuid0: u32,
    /// 6: creation time, unix seconds.
    pub ctime: u32,
    /// 7: -1 linear, 0, 1, 4, 5, 6, 10.
    pub level: i32,
    /// 8: used size of each member in KiB.
    pub size: u32,
    /// 9: descriptors in use.
    pub nr_disks: u32,
    /// 10
    pub raid_disks: u32,
    /// 11: preferred md minor.
    pub md_minor: u32,
    /// 12
    pub not_persistent: u32,
    /// 13-15: the other UUID words.
    pub set_uuid1: u32,
    pub set_uuid2: u32,
    pub set_uuid3: u32,
    /// 16-31
    pub gstate_creserved: [u32; 16],
    /// 32: last update, unix seconds.
    pub utime: u32,
    /// 33: [`state`] bits.
    pub state: u32,
    /// 34-37: descriptor counts.
    pub active_disks: u32,
    pub working_disks: u32,
    pub failed_disks: u32,
    pub spare_disks: u32,
    /// 38
    pub sb_csum: u32,
    /// 39-40: update counter (low word first on little-endian hosts).
    pub events_lo: u32,
    pub events_hi: u32,
    /// 41-42: events at the last checkpoint.
    pub cp_events_lo: u32,
    pub cp_events_hi: u32,
    /// 43: resync checkpoint, valid when the checkpoint events equal the events.
    pub recovery_cp: u32,
    /// 44-45 (0.91 only)
    pub reshape_position: u64,
    /// 46-49 (0.91 only)
    pub new_level: i32,
    pub delta_disks: i32,
    pub new_layout: i32,
    pub new_chunk: u32,
    /// 50-63
    pub gstate_sreserved: [u32; 14],
    /// 64
    pub layout: i32,
    /// 65: chunk size in bytes.
    pub chunk_size: u32,
    /// 66-67
    pub root_pv: u32,
    pub root_block: u32,
    /// 68-127
    pub pstate_reserved: [u32; 60],
    /// 128-991
    pub disks: [Disk090; SB_DISKS],
    /// 992-1023: this device's descriptor.
    pub this_disk: Disk090,
}

/// `calc_sb_csum`: the sum of all 1024 words with the checksum word as zero, folded to 32 bits.
pub fn checksum(bytes: &[u8]) -> u32 {
    let mut sum: u64 = 0;
    for w in 0..SB_BYTES / 4 {
        if w != 38 {
            sum += u64::from(le_u32(bytes, w * 4));
        }
    }
    ((sum & 0xffff_ffff) + (sum >> 32)) as u32
}

/// `md_csum_fold`: the kernel compares 0.90 checksums folded to 16 bits, because old kernels
/// computed them with `csum_partial`.
fn fold16(csum: u32) -> u32 {
    let c = (csum & 0xffff) + (csum >> 16);
    (c & 0xffff) + (c >> 16)
}

impl Superblock090 {
    /// Parse and check a 0.90 superblock read at [`sb_start`] of a device of `device_bytes`
    /// bytes (`super_90_load`).
    pub fn parse(bytes: &[u8], device_bytes: u64) -> Result<Self, FormatError> {
        let device_sectors = device_bytes / SECTOR;
        let start = sb_start(device_sectors)
            .ok_or(FormatError::DeviceTooSmall { device_bytes, version: MetadataVersion::V0_90 })?;
        if bytes.len() < SB_BYTES {
            return Err(FormatError::Truncated { needed: SB_BYTES, got: bytes.len() });
        }
        let magic = le_u32(bytes, 0);
        if magic != MD_SB_MAGIC {
            if magic == MD_SB_MAGIC.swap_bytes() {
                return Err(FormatError::BigEndian090);
            }
            return Err(FormatError::NoSuperblock { found: magic, offset: start * SECTOR });
        }
        let sb = Self::decode(bytes, start);
        if sb.major_version != 0 {
            return Err(FormatError::WrongMajorVersion {
                found: sb.major_version,
                expected: 0,
                version: MetadataVersion::V0_90,
            });
        }
        if !(90..=91).contains(&sb.minor_version) {
            return Err(FormatError::UnsupportedMinorVersion { minor: sb.minor_version });
        }
        if sb.raid_disks == 0 {
            return Err(FormatError::BadRaidDisks(sb.raid_disks));
        }
        let computed = checksum(bytes);
        if fold16(computed) != fold16(sb.sb_csum) {
            return Err(FormatError::BadChecksum { stored: sb.sb_csum, computed });
        }
        if sb.this_disk.number as usize >= SB_DISKS {
            return Err(FormatError::BadDataArea(format!(
                "this_disk.number {} is beyond the {} descriptors",
                sb.this_disk.number, SB_DISKS
            )));
        }
        if sb.level >= 1 && Self::usable(start, sb.level) < u64::from(sb.size) * 2 {
            return Err(FormatError::BadDataArea(format!(
                "size {} KiB exceeds the {} sectors before the superblock",
                sb.size, start
            )));
        }
        Ok(sb)
    }

    /// `rdev->sectors` after `super_90_load`: everything before the superblock, capped just
    /// below 4 TiB for levels >= 1 because `size` is a 32-bit KiB count.
    fn usable(sb_start: u64, level: i32) -> u64 {
        if level >= 1 && sb_start >= 2 << 32 {
            (2 << 32) - 2
        } else {
            sb_start
        }
    }

    fn decode(bytes: &[u8], sb_start: u64) -> Self {
        let w: Vec<u32> = (0..SB_BYTES / 4).map(|i| le_u32(bytes, i * 4)).collect();
        let mut gstate_creserved = [0u32; 16];
        gstate_creserved.copy_from_slice(&w[16..32]);
        let mut gstate_sreserved = [0u32; 14];
        gstate_sreserved.copy_from_slice(&w[50..64]);
        let mut pstate_reserved = [0u32; 60];
        pstate_reserved.copy_from_slice(&w[68..128]);
        let disks = std::array::from_fn(|i| Disk090::decode(&w[128 + 32 * i..160 + 32 * i]));
        Superblock090 {
            sb_start,
            md_magic: w[0],
            major_version: w[1],
            minor_version: w[2],
            patch_version: w[3],
            gvalid_words: w[4],
            set_uuid0: w[5],
            ctime: w[6],
            level: w[7] as i32,
            size: w[8],
            nr_disks: w[9],
            raid_disks: w[10],
            md_minor: w[11],
            not_persistent: w[12],
            set_uuid1: w[13],
            set_uuid2: w[14],
            set_uuid3: w[15],
            gstate_creserved,
            utime: w[32],
            state: w[33],
            active_disks: w[34],
            working_disks: w[35],
            failed_disks: w[36],
            spare_disks: w[37],
            sb_csum: w[38],
            events_lo: w[39],
            events_hi: w[40],
            cp_events_lo: w[41],
            cp_events_hi: w[42],
            recovery_cp: w[43],
            reshape_position: u64::from(w[44]) | (u64::from(w[45]) << 32),
            new_level: w[46] as i32,
            delta_disks: w[47] as i32,
            new_layout: w[48] as i32,
            new_chunk: w[49],
            gstate_sreserved,
            layout: w[64] as i32,
            chunk_size: w[65],
            root_pv: w[66],
            root_block: w[67],
            pstate_reserved,
            disks,
            this_disk: Disk090::decode(&w[992..1024]),
        }
    }

    /// The 4096-byte image, checksum recomputed.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = vec![0u32; SB_BYTES / 4];
        w[0] = self.md_magic;
        w[1] = self.major_version;
        w[2] = self.minor_version;
        w[3] = self.patch_version;
        w[4] = self.gvalid_words;
        w[5] = self.set_uuid0;
        w[6] = self.ctime;
        w[7] = self.level as u32;
        w[8] = self.size;
        w[9] = self.nr_disks;
        w[10] = self.raid_disks;
        w[11] = self.md_minor;
        w[12] = self.not_persistent;
        w[13] = self.set_uuid1;
        w[14] = self.set_uuid2;
        w[15] = self.set_uuid3;
        w[16..32].copy_from_slice(&self.gstate_creserved);
        w[32] = self.utime;
        w[33] = self.state;
        w[34] = self.active_disks;
        w[35] = self.working_disks;
        w[36] = self.failed_disks;
        w[37] = self.spare_disks;
        w[39] = self.events_lo;
        w[40] = self.events_hi;
        w[41] = self.cp_events_lo;
        w[42] = self.cp_events_hi;
        w[43] = self.recovery_cp;
        w[44] = self.reshape_position as u32;
        w[45] = (self.reshape_position >> 32) as u32;
        w[46] = self.new_level as u32;
        w[47] = self.delta_disks as u32;
        w[48] = self.new_layout as u32;
        w[49] = self.new_chunk;
        w[50..64].copy_from_slice(&self.gstate_sreserved);
        w[64] = self.layout as u32;
        w[65] = self.chunk_size;
        w[66] = self.root_pv;
        w[67] = self.root_block;
        w[68..128].copy_from_slice(&self.pstate_reserved);
        for (i, d) in self.disks.iter().enumerate() {
            d.encode(&mut w[128 + 32 * i..160 + 32 * i]);
        }
        self.this_disk.encode(&mut w[992..1024]);
        let mut b = vec![0u8; SB_BYTES];
        for (i, word) in w.iter().enumerate() {
            put_u32(&mut b, i * 4, *word);
        }
        let csum = checksum(&b);
        put_u32(&mut b, 38 * 4, csum);
        b
    }

    pub fn events(&self) -> u64 {
        (u64::from(self.events_hi) << 32) | u64::from(self.events_lo)
    }

    fn cp_events(&self) -> u64 {
        (u64::from(self.cp_events_hi) << 32) | u64::from(self.cp_events_lo)
    }

    /// Set the event count; a clean superblock's checkpoint follows it as `super_90_sync` does.
    pub fn set_events(&mut self, events: u64) {
        self.events_lo = events as u32;
        self.events_hi = (events >> 32) as u32;
        if self.state & state::CLEAN != 0 {
            self.cp_events_lo = self.events_lo;
            self.cp_events_hi = self.events_hi;
        }
    }

    /// Clean: `MD_SB_CLEAN`, the checkpoint at the current events and MaxSector (truncated to
    /// 32 bits) as `super_90_sync` writes it; active: the bit cleared and the checkpoint at 0.
    pub fn set_clean(&mut self, clean: bool) {
        if clean {
            self.state |= state::CLEAN;
            self.recovery_cp = u32::MAX;
            self.cp_events_lo = self.events_lo;
            self.cp_events_hi = self.events_hi;
        } else {
            self.state &= !state::CLEAN;
            self.recovery_cp = 0;
        }
    }

    /// Array UUID in mdadm's display byte order (each word big-endian).
    pub fn uuid(&self) -> [u8; 16] {
        let mut u = [0u8; 16];
        for (i, word) in [self.set_uuid0, self.set_uuid1, self.set_uuid2, self.set_uuid3].iter().enumerate() {
            u[4 * i..4 * i + 4].copy_from_slice(&word.to_be_bytes());
        }
        u
    }

    /// An all-zero superblock (every descriptor unused) to be written at sector `sb_start`,
    /// with md's magic and version 0.90.0: what a new array's superblock is built from.
    pub fn blank(sb_start: u64) -> Self {
        let mut sb = Self::decode(&[0u8; SB_BYTES], sb_start);
        sb.md_magic = MD_SB_MAGIC;
        sb.minor_version = 90;
        sb
    }

    /// The array UUID as md holds it for a 0.90 array (`mddev->uuid`: the four words as they
    /// lie in the superblock, little-endian), which is what an internal bitmap header carries.
    /// mdadm displays each word big-endian ([`Self::uuid`]).
    pub fn md_uuid(&self) -> [u8; 16] {
        let mut u = [0u8; 16];
        for (i, word) in [self.set_uuid0, self.set_uuid1, self.set_uuid2, self.set_uuid3].iter().enumerate() {
            u[4 * i..4 * i + 4].copy_from_slice(&word.to_le_bytes());
        }
        u
    }

    /// Store an array UUID given in mdadm's display byte order (the inverse of [`Self::uuid`]).
    pub fn set_uuid(&mut self, uuid: &[u8; 16]) {
        let word = |i: usize| u32::from_be_bytes([uuid[4 * i], uuid[4 * i + 1], uuid[4 * i + 2], uuid[4 * i + 3]]);
        self.set_uuid0 = word(0);
        self.set_uuid1 = word(1);
        self.set_uuid2 = word(2);
        self.set_uuid3 = word(3);
    }

    /// Rewrite the whole descriptor table from the devices that take part in the array
    /// (`live`: descriptor number and role), as md's `super_90_sync` writes it, and point
    /// `this_disk` at this device's descriptor again:
    ///
    /// - every descriptor is cleared, descriptor 0 marked removed (md cannot tell an unused
    ///   first descriptor from a used one otherwise);
    /// - an active device's descriptor says active and in sync in its slot; a spare's is all
    ///   zero state with its own number as slot ("compatibility"); a faulty device's says faulty;
    /// - every slot below `raid_disks` whose descriptor is still unused is marked removed and
    ///   faulty (a missing member), and counted as failed.
    ///
    /// Unlike md, descriptors are not renumbered (md gives active devices their slot's
    /// descriptor and spares the ones after `raid_disks`): a device keeps its number, so the
    /// superblock on it stays its own. The device numbers and minor numbers md records are kept
    /// from the old descriptors.
    pub fn sync_descriptors(&mut self, live: &[(u32, Role)]) {
        let old = self.disks;
        self.disks = [Disk090::default(); SB_DISKS];
        self.disks[0].state = disk_state::REMOVED;
        let (mut active, mut working, mut failed, mut spare, mut nr_disks) = (0, 0, 0, 0, 0);
        for &(dev_number, role) in live {
            let i = dev_number as usize;
            if i >= SB_DISKS {
                continue;
            }
            let keep = old[i].state & disk_state::WRITE_MOSTLY;
            let d = &mut self.disks[i];
            *d = Disk090 { number: dev_number, major: old[i].major, minor: old[i].minor, ..Disk090::default() };
            nr_disks += 1;
            match role {
                Role::Active(slot) | Role::Replacement(slot) => {
                    d.raid_disk = slot;
                    d.state = disk_state::ACTIVE | disk_state::SYNC | keep;
                    active += 1;
                    working += 1;
                }
                Role::Spare | Role::Journal => {
                    d.raid_disk = dev_number;
                    d.state = keep;
                    spare += 1;
                    working += 1;
                }
                Role::Faulty => {
                    d.raid_disk = dev_number;
                    d.state = disk_state::FAULTY | keep;
                }
            }
        }
        for i in 0..(self.raid_disks as usize).min(SB_DISKS) {
            let d = &mut self.disks[i];
            if d.state == 0 && d.number == 0 {
                *d = Disk090 {
                    number: i as u32,
                    raid_disk: i as u32,
                    state: disk_state::REMOVED | disk_state::FAULTY,
                    ..Disk090::default()
                };
                failed += 1;
            }
        }
        self.nr_disks = nr_disks;
        self.active_disks = active;
        self.working_disks = working;
        self.failed_disks = failed;
        self.spare_disks = spare;
        if let Some(own) = self.disks.get(self.this_disk.number as usize) {
            self.this_disk = *own;
        }
    }

    /// The superblock for a device joining this array as descriptor `dev_number` (a spare until
    /// it is rebuilt into a slot) on a device of `device_bytes` bytes: the array's superblock
    /// with the superblock position of the new device and `this_disk` pointing at its own,
    /// still unused, descriptor. The device must hold the array's `size` before the superblock.
    pub fn for_new_member(&self, dev_number: u32, device_bytes: u64) -> Result<Self, FormatError> {
        if dev_number as usize >= SB_DISKS {
            return Err(FormatError::Create(format!(
                "0.90 metadata has room for {SB_DISKS} devices; descriptor {dev_number} is beyond them"
            )));
        }
        let start = sb_start(device_bytes / SECTOR)
            .ok_or(FormatError::DeviceTooSmall { device_bytes, version: MetadataVersion::V0_90 })?;
        let needed = if self.level >= 1 { u64::from(self.size) * 2 } else { 0 };
        if Self::usable(start, self.level) < needed {
            return Err(FormatError::Create(format!(
                "device of {device_bytes} bytes is too small: the array needs {needed} sectors of data before the 0.90 superblock at sector {start}"
            )));
        }
        let mut sb = self.clone();
        sb.sb_start = start;
        sb.this_disk = Disk090 { number: dev_number, raid_disk: dev_number, ..Disk090::default() };
        Ok(sb)
    }

    /// Set the descriptor of `dev_number` to `role` and keep the counters and `this_disk` in
    /// step (the descriptor encoding of `super_90_sync`).
    pub fn set_role(&mut self, dev_number: u32, role: Role) {
        let i = dev_number as usize;
        if i >= SB_DISKS {
            return;
        }
        let old = self.disks[i];
        let in_use = |d: &Disk090| d.state != 0 || d.major != 0 || d.minor != 0 || d.number != 0;
        let old_in_use = in_use(&old) || i == self.this_disk.number as usize;
        self.count(&old, old_in_use, -1);
        let mut d = old;
        d.number = dev_number;
        match role {
            Role::Active(slot) | Role::Replacement(slot) => {
                d.raid_disk = slot;
                d.state = (d.state & disk_state::WRITE_MOSTLY) | disk_state::ACTIVE | disk_state::SYNC;
            }
            Role::Spare | Role::Journal => {
                d.raid_disk = dev_number;
                d.state &= disk_state::WRITE_MOSTLY;
            }
            Role::Faulty => {
                d.raid_disk = dev_number;
                d.state = disk_state::FAULTY;
            }
        }
        self.disks[i] = d;
        self.count(&d, true, 1);
        if self.this_disk.number == dev_number {
            self.this_disk = d;
        }
    }

    fn count(&mut self, d: &Disk090, in_use: bool, delta: i32) {
        let add = |v: &mut u32| *v = v.wrapping_add_signed(delta);
        if !in_use {
            return;
        }
        if d.state & disk_state::FAULTY != 0 {
            add(&mut self.failed_disks);
        } else if d.state & disk_state::ACTIVE != 0 {
            add(&mut self.active_disks);
            add(&mut self.working_disks);
        } else {
            add(&mut self.spare_disks);
            add(&mut self.working_disks);
        }
    }

    /// The normalized view.
    pub fn info(&self) -> MemberInfo {
        let start = self.sb_start;
        let clean = self.state & state::CLEAN != 0;
        // super_90_validate: the checkpoint counts only if taken at the current events.
        let resync_offset = if clean {
            MAX_SECTOR
        } else if self.events() == self.cp_events() {
            if self.recovery_cp == u32::MAX {
                MAX_SECTOR
            } else {
                u64::from(self.recovery_cp)
            }
        } else {
            0
        };
        let own = if (self.this_disk.number as usize) < SB_DISKS {
            self.disks[self.this_disk.number as usize]
        } else {
            self.this_disk
        };
        MemberInfo {
            version: MetadataVersion::V0_90,
            array_uuid: self.uuid(),
            name: String::new(),
            preferred_minor: Some(self.md_minor),
            ctime: u64::from(self.ctime),
            utime: u64::from(self.utime),
            level: self.level,
            // super_90_validate: 0.90 cannot record a raid0 layout.
            layout: if self.level == 0 { -1 } else { self.layout },
            chunk_sectors: self.chunk_size / SECTOR as u32,
            raid_disks: self.raid_disks,
            component_sectors: u64::from(self.size) * 2,
            usable_sectors: Self::usable(start, self.level),
            avail_sectors: start,
            data_offset: 0,
            super_offset: start,
            events: self.events(),
            resync_offset,
            recovery_offset: None,
            feature_map: 0,
            dev_number: self.this_disk.number,
            role: own.role(self.minor_version),
            roles: self.disks.iter().map(|d| d.role(self.minor_version)).collect(),
            device_uuid: None,
            // The kernel puts a 0.90 internal bitmap 4 KiB after the superblock.
            bitmap_offset: (self.state & state::BITMAP_PRESENT != 0).then_some(8),
            ppl: None,
            bad_block_log: None,
            state_clean: clean,
            checksum: self.sb_csum,
            // super_90_validate: minor version 91 carries a reshape; 0.90 has no new offset
            // (data starts at sector 0 in every shape) and no backwards flag.
            reshape: (self.minor_version >= 91).then(|| Reshape {
                position: self.reshape_position,
                delta_disks: self.delta_disks,
                new_level: self.new_level,
                new_layout: self.new_layout,
                new_chunk_sectors: self.new_chunk / SECTOR as u32,
                backwards: Reshape::is_backwards(self.delta_disks, false),
                new_offset: 0,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::disk_state::{ACTIVE, FAULTY, REMOVED, SYNC};
    use super::*;

    /// A raid5 of 4 whose superblock is on descriptor `own`.
    fn raid5(own: u32) -> Superblock090 {
        let mut sb = Superblock090::blank(8064);
        sb.level = 5;
        sb.raid_disks = 4;
        sb.size = 4032;
        sb.this_disk.number = own;
        sb
    }

    #[test]
    fn descriptors_are_synced_as_md_writes_them() {
        let mut sb = raid5(4);
        sb.disks[1].major = 7;
        sb.disks[1].minor = 1;
        // Slot 2 has no device; descriptor 4 is a spare, 5 failed.
        sb.sync_descriptors(&[
            (0, Role::Active(0)),
            (1, Role::Active(1)),
            (3, Role::Active(3)),
            (4, Role::Spare),
            (5, Role::Faulty),
        ]);
        let table: Vec<(u32, u32, u32)> = sb.disks[..7].iter().map(|d| (d.number, d.raid_disk, d.state)).collect();
        assert_eq!(
            table,
            [
                (0, 0, ACTIVE | SYNC),
                (1, 1, ACTIVE | SYNC),
                (2, 2, REMOVED | FAULTY),
                (3, 3, ACTIVE | SYNC),
                (4, 4, 0),
                (5, 5, FAULTY),
                (0, 0, 0)
            ]
        );
        assert_eq!((sb.disks[1].major, sb.disks[1].minor), (7, 1), "device numbers are kept");
        assert_eq!((sb.nr_disks, sb.active_disks, sb.working_disks, sb.failed_disks, sb.spare_disks), (5, 3, 4, 1, 1));
        assert_eq!(sb.this_disk, sb.disks[4]);
        // A spare that took slot 2 keeps its own descriptor; slot 2's stays removed.
        sb.sync_descriptors(&[(0, Role::Active(0)), (1, Role::Active(1)), (3, Role::Active(3)), (4, Role::Active(2))]);
        assert_eq!((sb.disks[4].raid_disk, sb.disks[4].state), (2, ACTIVE | SYNC));
        assert_eq!(sb.disks[2].state, REMOVED | FAULTY);
        let info = sb.info();
        assert_eq!(info.role, Role::Active(2));
        assert_eq!(info.roles[2], Role::Faulty);
        let back = Superblock090::parse(&sb.to_bytes(), 4 << 20).unwrap();
        assert_eq!(back.disks, sb.disks);
    }

    #[test]
    fn a_new_member_is_an_unused_descriptor_until_synced() {
        let mut sb = raid5(0);
        sb.sync_descriptors(&[(0, Role::Active(0)), (1, Role::Active(1)), (3, Role::Active(3))]);
        let new = sb.for_new_member(4, 8 << 20).unwrap();
        assert_eq!(new.sb_start, sb_start((8 << 20) / 512).unwrap());
        assert_eq!(new.this_disk.number, 4);
        assert_eq!(new.info().role, Role::Spare, "not in sync until rebuilt");
        assert!(sb.for_new_member(27, 8 << 20).is_err());
        let err = sb.for_new_member(4, 2 << 20).unwrap_err().to_string();
        assert!(err.contains("too small"), "{err}");
    }

    #[test]
    fn uuid_words_round_trip() {
        let mut sb = Superblock090::blank(0);
        let uuid = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
        sb.set_uuid(&uuid);
        assert_eq!(sb.uuid(), uuid);
        assert_eq!(sb.set_uuid0, 0x0102_0304);
        assert_eq!(sb.md_uuid()[..4], [4, 3, 2, 1]);
    }
}
