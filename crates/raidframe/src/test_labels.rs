//! The component label the crate's unit tests build sets from: serial 77, 32-sector stripe
//! units, 1000 usable sectors, clean, with a parity map in use.

use uraid_raidframe_format::label::{ComponentLabel, PMLABEL_VALID, PMLABEL_WASUSED, RAID_CLEAN};

/// The label of `column` of a set of `columns` at RAID level `level` (`b'5'`), with
/// `mod_counter`.
pub(crate) fn label(level: u8, columns: i32, column: i32, mod_counter: i32) -> ComponentLabel {
    ComponentLabel {
        serial_number: 77,
        mod_counter,
        column,
        num_columns: columns,
        clean: RAID_CLEAN,
        sect_per_su: 32,
        parity_config: i32::from(level),
        max_outstanding: 100,
        num_blocks: 1000,
        partition_size: 1064,
        parity_map_modcount: mod_counter,
        parity_map_flags: PMLABEL_VALID | PMLABEL_WASUSED,
        parity_map_tickms: 40000,
        parity_map_ntick: 8,
        parity_map_regions: 1,
        ..ComponentLabel::default()
    }
}
