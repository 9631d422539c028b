//! The RAIDframe component label (`RF_ComponentLabel_t` in NetBSD's
//! `sys/dev/raidframe/raidframevar.h`): 98 32-bit words, 392 bytes, at component byte
//! [`crate::layout::LABEL_OFFSET`].
//!
//! | word | offset | field |
//! |---|---|---|
//! | 0 | 0 | version (2; 1 for labels of old kernels) |
//! | 1 | 4 | serial_number (`raidctl -I`) |
//! | 2 | 8 | mod_counter |
//! | 3, 4 | 12, 16 | row, column |
//! | 5, 6 | 20, 24 | num_rows, num_columns |
//! | 7 | 28 | clean (1 clean, 0 dirty) |
//! | 8 | 32 | status ([`DiskStatus`]) |
//! | 9..12 | 36..48 | sectPerSU, SUsPerPU, SUsPerRU |
//! | 12 | 48 | parityConfig: the level's ASCII character |
//! | 13 | 52 | maxOutstanding (the `queue` line's number) |
//! | 14 | 56 | blockSize (bytes per sector) |
//! | 15 | 60 | numBlocks, low word (usable sectors per component) |
//! | 16 | 64 | partitionSize, low word (sectors) |
//! | 17..22 | 68..88 | parity map: modcount, flags, tickms, ntick, regions |
//! | 22..50 | 88..200 | future_use (zero) |
//! | 50..54 | 200..216 | autoconfigure, root_partition, last_unit, config_order |
//! | 54, 55 | 216, 220 | numBlocks and partitionSize, high words |
//! | 56..98 | 224..392 | future_use2 (zero) |
//!
//! Every field is a C `int` or `u_int` in the byte order of the machine that wrote it. The
//! version word tells the order: 1 or 2 read as little-endian, or as big-endian. Parsing
//! keeps every word, the reserved ones too, so that [`ComponentLabel::to_bytes`] writes back
//! exactly what was read, in the order it was read in.
//!
//! [`ComponentLabel::parse`] also applies the kernel's sanity test (`rf_reasonable_label`
//! in `rf_netbsdkintf.c`), so a torn or foreign block gives a [`LabelError`] naming the
//! field and its offset; [`ComponentLabel::decode`] only decodes.

use thiserror::Error;

/// Size of the label structure in bytes (98 words).
pub const LABEL_STRUCT_SIZE: usize = 392;
/// Number of 32-bit words in the label.
pub const LABEL_WORDS: usize = LABEL_STRUCT_SIZE / 4;
/// The label version current kernels write (`RF_COMPONENT_LABEL_VERSION`).
pub const LABEL_VERSION: i32 = 2;
/// The label version of kernels before 1.5 (`RF_COMPONENT_LABEL_VERSION_1`), still accepted.
pub const LABEL_VERSION_1: i32 = 1;
/// `clean` value of a set whose parity is known good (`RF_RAID_CLEAN`).
pub const RAID_CLEAN: i32 = 1;
/// `clean` value of a set whose parity may be stale (`RF_RAID_DIRTY`).
pub const RAID_DIRTY: i32 = 0;

/// Number of reserved words between the parity map fields and `autoconfigure`.
pub const FUTURE_USE_WORDS: usize = 28;
/// Number of reserved words after `partitionSizeHi`.
pub const FUTURE_USE2_WORDS: usize = 42;

/// Byte offset of each named field, for error messages and tests.
pub mod offsets {
    /// `version`.
    pub const VERSION: usize = 0;
    /// `serial_number`.
    pub const SERIAL_NUMBER: usize = 4;
    /// `mod_counter`.
    pub const MOD_COUNTER: usize = 8;
    /// `row`.
    pub const ROW: usize = 12;
    /// `column`.
    pub const COLUMN: usize = 16;
    /// `num_rows`.
    pub const NUM_ROWS: usize = 20;
    /// `num_columns`.
    pub const NUM_COLUMNS: usize = 24;
    /// `clean`.
    pub const CLEAN: usize = 28;
    /// `status`.
    pub const STATUS: usize = 32;
    /// `sectPerSU`.
    pub const SECT_PER_SU: usize = 36;
    /// `SUsPerPU`.
    pub const SUS_PER_PU: usize = 40;
    /// `SUsPerRU`.
    pub const SUS_PER_RU: usize = 44;
    /// `parityConfig`.
    pub const PARITY_CONFIG: usize = 48;
    /// `maxOutstanding`.
    pub const MAX_OUTSTANDING: usize = 52;
    /// `blockSize`.
    pub const BLOCK_SIZE: usize = 56;
    /// `__numBlocks` (low word).
    pub const NUM_BLOCKS: usize = 60;
    /// `__partitionSize` (low word).
    pub const PARTITION_SIZE: usize = 64;
    /// `parity_map_modcount`.
    pub const PARITY_MAP_MODCOUNT: usize = 68;
    /// `parity_map_flags`.
    pub const PARITY_MAP_FLAGS: usize = 72;
    /// `parity_map_tickms`.
    pub const PARITY_MAP_TICKMS: usize = 76;
    /// `parity_map_ntick`.
    pub const PARITY_MAP_NTICK: usize = 80;
    /// `parity_map_regions`.
    pub const PARITY_MAP_REGIONS: usize = 84;
    /// `future_use[0]`.
    pub const FUTURE_USE: usize = 88;
    /// `autoconfigure`.
    pub const AUTOCONFIGURE: usize = 200;
    /// `root_partition`.
    pub const ROOT_PARTITION: usize = 204;
    /// `last_unit`.
    pub const LAST_UNIT: usize = 208;
    /// `config_order`.
    pub const CONFIG_ORDER: usize = 212;
    /// `numBlocksHi`.
    pub const NUM_BLOCKS_HI: usize = 216;
    /// `partitionSizeHi`.
    pub const PARTITION_SIZE_HI: usize = 220;
    /// `future_use2[0]`.
    pub const FUTURE_USE2: usize = 224;
}

/// Parity map flag: the parity map fields of this label are meaningful (`RF_PMLABEL_VALID`).
pub const PMLABEL_VALID: u32 = 1;
/// Parity map flag: the map was in use when the label was written (`RF_PMLABEL_WASUSED`).
pub const PMLABEL_WASUSED: u32 = 2;
/// Parity map flag: do not use the map at the next configure (`RF_PMLABEL_DISABLE`).
pub const PMLABEL_DISABLE: u32 = 4;

/// Byte order a label was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    /// x86, ARM and other little-endian hosts.
    #[default]
    Little,
    /// sparc64, powerpc and other big-endian hosts.
    Big,
}

impl ByteOrder {
    fn read(self, bytes: &[u8], offset: usize) -> u32 {
        let word = [bytes[offset], bytes[offset + 1], bytes[offset + 2], bytes[offset + 3]];
        match self {
            ByteOrder::Little => u32::from_le_bytes(word),
            ByteOrder::Big => u32::from_be_bytes(word),
        }
    }

    fn write(self, bytes: &mut [u8], offset: usize, value: u32) {
        let word = match self {
            ByteOrder::Little => value.to_le_bytes(),
            ByteOrder::Big => value.to_be_bytes(),
        };
        bytes[offset..offset + 4].copy_from_slice(&word);
    }
}

/// A component's status as the label records it (`RF_DiskStatus_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiskStatus {
    /// 0, `rf_ds_optimal`: in use, up to date.
    Optimal,
    /// 1, `rf_ds_failed`.
    Failed,
    /// 2, `rf_ds_reconstructing`.
    Reconstructing,
    /// 3, `rf_ds_dist_spared`.
    DistSpared,
    /// 4, `rf_ds_spared`: failed and rebuilt onto a spare.
    Spared,
    /// 5, `rf_ds_spare`: an unused hot spare.
    Spare,
    /// 6, `rf_ds_used_spare`: a spare that took over a column.
    UsedSpare,
    /// 7, `rf_ds_rebuilding_spare`.
    RebuildingSpare,
}

impl DiskStatus {
    /// The status for a raw `status` word, if it is one RAIDframe defines.
    pub fn from_raw(raw: i32) -> Option<Self> {
        Some(match raw {
            0 => DiskStatus::Optimal,
            1 => DiskStatus::Failed,
            2 => DiskStatus::Reconstructing,
            3 => DiskStatus::DistSpared,
            4 => DiskStatus::Spared,
            5 => DiskStatus::Spare,
            6 => DiskStatus::UsedSpare,
            7 => DiskStatus::RebuildingSpare,
            _ => return None,
        })
    }

    /// The raw `status` word.
    pub fn raw(self) -> i32 {
        self as i32
    }
}

/// Why a block is not a component label RAIDframe would accept.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LabelError {
    /// Fewer bytes than the 392-byte structure.
    #[error("component label needs {LABEL_STRUCT_SIZE} bytes, got {len}")]
    TooShort {
        /// Bytes handed in.
        len: usize,
    },
    /// Every byte is zero: the component was never labelled.
    #[error("component label area is all zero (never labelled)")]
    Blank,
    /// The version word is neither 1 nor 2 in either byte order: not a RAIDframe label.
    #[error("not a RAIDframe component label: version word at offset 0 is {raw:#010x}")]
    UnknownVersion {
        /// The first four bytes read as little-endian.
        raw: u32,
    },
    /// A field fails the kernel's sanity test (`rf_reasonable_label`): a torn or damaged label.
    #[error("unreasonable component label: {field} at offset {offset} is {value} ({why})")]
    Unreasonable {
        /// The C name of the field.
        field: &'static str,
        /// Its byte offset in the label.
        offset: usize,
        /// The value read.
        value: i64,
        /// What the kernel requires.
        why: &'static str,
    },
}

/// One component label, every word kept as read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ComponentLabel {
    /// Byte order of the words; [`ComponentLabel::to_bytes`] writes in this order.
    pub byte_order: ByteOrder,
    /// `version`: [`LABEL_VERSION`] or [`LABEL_VERSION_1`].
    pub version: i32,
    /// `serial_number`: the set's serial, chosen with `raidctl -I`.
    pub serial_number: i32,
    /// `mod_counter`: bumped at every label update; the newest labels have the largest.
    pub mod_counter: i32,
    /// `row`: always 0 (multi-row sets are gone).
    pub row: i32,
    /// `column`: this component's position in the set.
    pub column: i32,
    /// `num_rows`: 1.
    pub num_rows: i32,
    /// `num_columns`: number of components in the set.
    pub num_columns: i32,
    /// `clean`: [`RAID_CLEAN`] or [`RAID_DIRTY`].
    pub clean: i32,
    /// `status`: see [`DiskStatus::from_raw`].
    pub status: i32,
    /// `sectPerSU`: sectors per stripe unit.
    pub sect_per_su: i32,
    /// `SUsPerPU`: stripe units per parity unit.
    pub sus_per_pu: i32,
    /// `SUsPerRU`: stripe units per reconstruction unit.
    pub sus_per_ru: i32,
    /// `parityConfig`: the level's character (`'0'`, `'1'`, `'4'`, `'5'`, ...) in an int.
    pub parity_config: i32,
    /// `maxOutstanding`: queue depth.
    pub max_outstanding: i32,
    /// `blockSize`: bytes per sector of the component.
    pub block_size: i32,
    /// `__numBlocks` and `numBlocksHi`: usable sectors per component (after the 64 protected).
    pub num_blocks: u64,
    /// `__partitionSize` and `partitionSizeHi`: sectors of the whole component partition.
    pub partition_size: u64,
    /// `parity_map_modcount`: equals `mod_counter` when a parity-map aware kernel wrote it.
    pub parity_map_modcount: i32,
    /// `parity_map_flags`: [`PMLABEL_VALID`], [`PMLABEL_WASUSED`], [`PMLABEL_DISABLE`].
    pub parity_map_flags: u32,
    /// `parity_map_tickms`: cooldown tick in milliseconds.
    pub parity_map_tickms: u32,
    /// `parity_map_ntick`: ticks of cooldown before a region is marked clean.
    pub parity_map_ntick: u32,
    /// `parity_map_regions`: number of parity map regions.
    pub parity_map_regions: u32,
    /// `future_use`: reserved, zero as NetBSD writes it; kept for byte-exact round trips.
    pub future_use: [i32; FUTURE_USE_WORDS],
    /// `autoconfigure`: 1 if the set configures itself at boot (`raidctl -A yes`).
    pub autoconfigure: i32,
    /// `root_partition`: 0 no, 1 force root, 2 soft root.
    pub root_partition: i32,
    /// `last_unit`: N of the raidN the set was last configured as.
    pub last_unit: i32,
    /// `config_order`: unused by NetBSD today.
    pub config_order: i32,
    /// `future_use2`: reserved, zero as NetBSD writes it.
    pub future_use2: [i32; FUTURE_USE2_WORDS],
}

impl Default for ComponentLabel {
    fn default() -> Self {
        ComponentLabel {
            byte_order: ByteOrder::Little,
            version: LABEL_VERSION,
            serial_number: 0,
            mod_counter: 0,
            row: 0,
            column: 0,
            num_rows: 1,
            num_columns: 1,
            clean: RAID_DIRTY,
            status: 0,
            sect_per_su: 0,
            sus_per_pu: 1,
            sus_per_ru: 1,
            parity_config: b'0' as i32,
            max_outstanding: 0,
            block_size: 512,
            num_blocks: 0,
            partition_size: 0,
            parity_map_modcount: 0,
            parity_map_flags: 0,
            parity_map_tickms: 0,
            parity_map_ntick: 0,
            parity_map_regions: 0,
            future_use: [0; FUTURE_USE_WORDS],
            autoconfigure: 0,
            root_partition: 0,
            last_unit: 0,
            config_order: 0,
            future_use2: [0; FUTURE_USE2_WORDS],
        }
    }
}

/// Detects the byte order from the version word: 1 or 2 in either order.
fn detect_order(bytes: &[u8]) -> Option<ByteOrder> {
    let le = ByteOrder::Little.read(bytes, 0);
    let be = ByteOrder::Big.read(bytes, 0);
    if le == LABEL_VERSION as u32 || le == LABEL_VERSION_1 as u32 {
        Some(ByteOrder::Little)
    } else if be == LABEL_VERSION as u32 || be == LABEL_VERSION_1 as u32 {
        Some(ByteOrder::Big)
    } else {
        None
    }
}

impl ComponentLabel {
    /// Decodes the first [`LABEL_STRUCT_SIZE`] bytes without judging the values beyond the
    /// version word (which fixes the byte order).
    pub fn decode(bytes: &[u8]) -> Result<Self, LabelError> {
        if bytes.len() < LABEL_STRUCT_SIZE {
            return Err(LabelError::TooShort { len: bytes.len() });
        }
        let bytes = &bytes[..LABEL_STRUCT_SIZE];
        if bytes.iter().all(|&b| b == 0) {
            return Err(LabelError::Blank);
        }
        let order = detect_order(bytes).ok_or(LabelError::UnknownVersion { raw: ByteOrder::Little.read(bytes, 0) })?;
        let u = |offset: usize| order.read(bytes, offset);
        let i = |offset: usize| order.read(bytes, offset) as i32;
        let mut future_use = [0i32; FUTURE_USE_WORDS];
        for (k, word) in future_use.iter_mut().enumerate() {
            *word = i(offsets::FUTURE_USE + 4 * k);
        }
        let mut future_use2 = [0i32; FUTURE_USE2_WORDS];
        for (k, word) in future_use2.iter_mut().enumerate() {
            *word = i(offsets::FUTURE_USE2 + 4 * k);
        }
        use offsets::*;
        Ok(ComponentLabel {
            byte_order: order,
            version: i(VERSION),
            serial_number: i(SERIAL_NUMBER),
            mod_counter: i(MOD_COUNTER),
            row: i(ROW),
            column: i(COLUMN),
            num_rows: i(NUM_ROWS),
            num_columns: i(NUM_COLUMNS),
            clean: i(CLEAN),
            status: i(STATUS),
            sect_per_su: i(SECT_PER_SU),
            sus_per_pu: i(SUS_PER_PU),
            sus_per_ru: i(SUS_PER_RU),
            parity_config: i(PARITY_CONFIG),
            max_outstanding: i(MAX_OUTSTANDING),
            block_size: i(BLOCK_SIZE),
            num_blocks: (u64::from(u(NUM_BLOCKS_HI)) << 32) | u64::from(u(NUM_BLOCKS)),
            partition_size: (u64::from(u(PARTITION_SIZE_HI)) << 32) | u64::from(u(PARTITION_SIZE)),
            parity_map_modcount: i(PARITY_MAP_MODCOUNT),
            parity_map_flags: u(PARITY_MAP_FLAGS),
            parity_map_tickms: u(PARITY_MAP_TICKMS),
            parity_map_ntick: u(PARITY_MAP_NTICK),
            parity_map_regions: u(PARITY_MAP_REGIONS),
            future_use,
            autoconfigure: i(AUTOCONFIGURE),
            root_partition: i(ROOT_PARTITION),
            last_unit: i(LAST_UNIT),
            config_order: i(CONFIG_ORDER),
            future_use2,
        })
    }

    /// Decodes and applies the kernel's sanity test ([`ComponentLabel::check_reasonable`]
    /// without a partition size).
    pub fn parse(bytes: &[u8]) -> Result<Self, LabelError> {
        let label = Self::decode(bytes)?;
        label.check_reasonable(None)?;
        Ok(label)
    }

    /// The kernel's test for a label worth considering (`rf_reasonable_label`): version 1
    /// or 2, clean 0 or 1, row and column inside the set, positive block size and block
    /// count, and, when `partition_sectors` is given, a recorded partition size that fits.
    pub fn check_reasonable(&self, partition_sectors: Option<u64>) -> Result<(), LabelError> {
        fn bad(field: &'static str, offset: usize, value: i64, why: &'static str) -> Result<(), LabelError> {
            Err(LabelError::Unreasonable { field, offset, value, why })
        }
        if self.version != LABEL_VERSION && self.version != LABEL_VERSION_1 {
            return bad("version", offsets::VERSION, self.version.into(), "must be 1 or 2");
        }
        if self.clean != RAID_CLEAN && self.clean != RAID_DIRTY {
            return bad("clean", offsets::CLEAN, self.clean.into(), "must be 0 or 1");
        }
        if self.num_rows <= 0 {
            return bad("num_rows", offsets::NUM_ROWS, self.num_rows.into(), "must be positive");
        }
        if self.row < 0 || self.row >= self.num_rows {
            return bad("row", offsets::ROW, self.row.into(), "must be in 0..num_rows");
        }
        if self.num_columns <= 0 {
            return bad("num_columns", offsets::NUM_COLUMNS, self.num_columns.into(), "must be positive");
        }
        if self.column < 0 || self.column >= self.num_columns {
            return bad("column", offsets::COLUMN, self.column.into(), "must be in 0..num_columns");
        }
        if self.block_size <= 0 {
            return bad("blockSize", offsets::BLOCK_SIZE, self.block_size.into(), "must be positive");
        }
        if self.num_blocks == 0 {
            return bad("numBlocks", offsets::NUM_BLOCKS, 0, "must be positive");
        }
        if let Some(actual) = partition_sectors {
            if self.partition_size > actual {
                return bad(
                    "partitionSize",
                    offsets::PARTITION_SIZE,
                    self.partition_size as i64,
                    "larger than the partition holding the component",
                );
            }
        }
        Ok(())
    }

    /// The 392-byte structure, in [`ComponentLabel::byte_order`].
    pub fn to_bytes(&self) -> [u8; LABEL_STRUCT_SIZE] {
        let mut out = [0u8; LABEL_STRUCT_SIZE];
        let order = self.byte_order;
        let mut put = |offset: usize, value: u32| order.write(&mut out, offset, value);
        use offsets::*;
        put(VERSION, self.version as u32);
        put(SERIAL_NUMBER, self.serial_number as u32);
        put(MOD_COUNTER, self.mod_counter as u32);
        put(ROW, self.row as u32);
        put(COLUMN, self.column as u32);
        put(NUM_ROWS, self.num_rows as u32);
        put(NUM_COLUMNS, self.num_columns as u32);
        put(CLEAN, self.clean as u32);
        put(STATUS, self.status as u32);
        put(SECT_PER_SU, self.sect_per_su as u32);
        put(SUS_PER_PU, self.sus_per_pu as u32);
        put(SUS_PER_RU, self.sus_per_ru as u32);
        put(PARITY_CONFIG, self.parity_config as u32);
        put(MAX_OUTSTANDING, self.max_outstanding as u32);
        put(BLOCK_SIZE, self.block_size as u32);
        put(NUM_BLOCKS, self.num_blocks as u32);
        put(PARTITION_SIZE, self.partition_size as u32);
        put(PARITY_MAP_MODCOUNT, self.parity_map_modcount as u32);
        put(PARITY_MAP_FLAGS, self.parity_map_flags);
        put(PARITY_MAP_TICKMS, self.parity_map_tickms);
        put(PARITY_MAP_NTICK, self.parity_map_ntick);
        put(PARITY_MAP_REGIONS, self.parity_map_regions);
        for (k, word) in self.future_use.iter().enumerate() {
            put(FUTURE_USE + 4 * k, *word as u32);
        }
        put(AUTOCONFIGURE, self.autoconfigure as u32);
        put(ROOT_PARTITION, self.root_partition as u32);
        put(LAST_UNIT, self.last_unit as u32);
        put(CONFIG_ORDER, self.config_order as u32);
        put(NUM_BLOCKS_HI, (self.num_blocks >> 32) as u32);
        put(PARTITION_SIZE_HI, (self.partition_size >> 32) as u32);
        for (k, word) in self.future_use2.iter().enumerate() {
            put(FUTURE_USE2 + 4 * k, *word as u32);
        }
        out
    }

    /// The label as NetBSD writes its label block: the structure followed by zeros up to
    /// `area_len` bytes (see [`crate::layout::label_area_size`]). `area_len` below 392 is
    /// raised to 392.
    pub fn to_area(&self, area_len: usize) -> Vec<u8> {
        let mut out = vec![0u8; area_len.max(LABEL_STRUCT_SIZE)];
        out[..LABEL_STRUCT_SIZE].copy_from_slice(&self.to_bytes());
        out
    }

    /// The status word as a [`DiskStatus`], if it is a defined one.
    pub fn disk_status(&self) -> Option<DiskStatus> {
        DiskStatus::from_raw(self.status)
    }

    /// The RAID level character (`parityConfig`), if it is printable ASCII.
    pub fn level_char(&self) -> Option<char> {
        u8::try_from(self.parity_config).ok().filter(|b| b.is_ascii_graphic()).map(char::from)
    }

    /// True when the label says the set's parity is known good.
    pub fn is_clean(&self) -> bool {
        self.clean == RAID_CLEAN
    }

    /// What `rf_fix_old_label_size` does to labels of pre-2TB-aware kernels: when the
    /// partition holds fewer than 2^32 sectors, non-zero high words are garbage and are
    /// cleared. Returns true if it changed anything.
    pub fn fix_old_label_size(&mut self, partition_sectors: u64) -> bool {
        if partition_sectors >> 32 != 0 {
            return false;
        }
        let before = (self.num_blocks, self.partition_size);
        self.num_blocks &= 0xffff_ffff;
        self.partition_size &= 0xffff_ffff;
        before != (self.num_blocks, self.partition_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ComponentLabel {
        ComponentLabel {
            serial_number: 2026,
            mod_counter: 17,
            column: 1,
            num_columns: 3,
            clean: RAID_CLEAN,
            sect_per_su: 8,
            parity_config: b'5' as i32,
            max_outstanding: 100,
            num_blocks: 1984,
            partition_size: 2048,
            parity_map_modcount: 17,
            parity_map_flags: PMLABEL_VALID | PMLABEL_WASUSED,
            parity_map_tickms: 40000,
            parity_map_ntick: 8,
            parity_map_regions: 1,
            ..ComponentLabel::default()
        }
    }

    #[test]
    fn field_offsets_match_the_table() {
        let bytes = sample().to_bytes();
        let word = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
        assert_eq!(word(offsets::VERSION), 2);
        assert_eq!(word(offsets::SERIAL_NUMBER), 2026);
        assert_eq!(word(offsets::PARITY_CONFIG), 0x35);
        assert_eq!(word(offsets::NUM_BLOCKS), 1984);
        assert_eq!(word(offsets::PARTITION_SIZE), 2048);
        assert_eq!(word(offsets::PARITY_MAP_TICKMS), 40000);
        assert_eq!(word(offsets::NUM_BLOCKS_HI), 0);
    }

    #[test]
    fn big_endian_round_trip_and_detection() {
        let label = ComponentLabel { byte_order: ByteOrder::Big, num_blocks: 0x1_0000_0040, ..sample() };
        let bytes = label.to_bytes();
        assert_eq!(&bytes[..4], &[0, 0, 0, 2]);
        assert_eq!(&bytes[offsets::NUM_BLOCKS_HI..offsets::NUM_BLOCKS_HI + 4], &[0, 0, 0, 1]);
        assert_eq!(ComponentLabel::parse(&bytes).unwrap(), label);
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(ComponentLabel::parse(&[0; 100]), Err(LabelError::TooShort { len: 100 }));
        assert_eq!(ComponentLabel::parse(&[0; 392]), Err(LabelError::Blank));
        let mut bytes = sample().to_bytes();
        bytes[0] = 7;
        assert_eq!(ComponentLabel::parse(&bytes), Err(LabelError::UnknownVersion { raw: 7 }));
        let mut torn = sample();
        torn.column = 5;
        match ComponentLabel::parse(&torn.to_bytes()) {
            Err(LabelError::Unreasonable { field: "column", offset: 16, value: 5, .. }) => {}
            other => panic!("{other:?}"),
        }
        assert!(sample().check_reasonable(Some(2047)).is_err());
        assert!(sample().check_reasonable(Some(2048)).is_ok());
    }

    #[test]
    fn old_label_high_words_are_cleared_on_small_partitions() {
        let mut label = ComponentLabel { num_blocks: 0xdead_0000_07c0, ..sample() };
        assert!(label.fix_old_label_size(2048));
        assert_eq!(label.num_blocks, 0x7c0);
        let mut big = ComponentLabel { num_blocks: 0x1_0000_0000, ..sample() };
        assert!(!big.fix_old_label_size(0x2_0000_0000));
    }

    #[test]
    fn status_and_level() {
        assert_eq!(sample().disk_status(), Some(DiskStatus::Optimal));
        assert_eq!(DiskStatus::from_raw(6), Some(DiskStatus::UsedSpare));
        assert_eq!(DiskStatus::from_raw(9), None);
        assert_eq!(sample().level_char(), Some('5'));
    }
}
