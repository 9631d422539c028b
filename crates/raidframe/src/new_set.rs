//! The labels of a new set: what `raidctl -C CONF raid0` writes on blank components (then
//! `-I SERIAL` and `-u`), as NetBSD's driver writes them (`rf_ConfigureDisks`,
//! `raid_init_component_label`, `rf_paritymap_attach` with the map invalidated, as `-C`
//! always does).
//!
//! Measured on the driver: every label is version 2, row 0, its own column, one row, the file's
//! columns, layout and queue depth, 512-byte blocks, `numBlocks` the smallest component's
//! sectors less the 64 protected ones (each label keeps its own partition size), status
//! optimal, dirty (no parity has been written), not autoconfigured, unit 0, and with redundancy
//! the parity map fields VALID and WASUSED, 40000 ms, 8 ticks, the default region count, and a
//! map whose every region is dirty. RAID 0 has no map and its map fields stay 0 but
//! `parity_map_modcount`, which every label write sets to the counter. The serial
//! number is 0 until `-I` sets one.

use uraid_raidframe_format::config_file::RaidConfig;
use uraid_raidframe_format::label::{ComponentLabel, DiskStatus, PMLABEL_VALID, PMLABEL_WASUSED, RAID_DIRTY};
use uraid_raidframe_format::layout::{default_region_count, usable_sectors, DEFAULT_COOLDOWN, DEFAULT_TICKMS};
use uraid_raidframe_format::mapping::{Geometry, Level};

use crate::raidctl_session::{CONFIGURE_BUMPS, UNCONFIGURE_BUMPS, VERB_BUMPS};

/// Bytes per sector of every component uraid labels (the driver was checked on 512 only).
pub const SECTOR_BYTES: u64 = 512;

/// Why a new set cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NewSetError {
    #[error("the configuration lists {listed} component(s) for {columns} column(s)")]
    ColumnCount { listed: usize, columns: i32 },
    #[error("every column is absent: a new set needs at least one component")]
    NoComponents,
    #[error("column {column}: {sectors} sectors is too small for a RAIDframe component (64 are protected)")]
    TooSmall { column: usize, sectors: u64 },
    #[error("the layout does not fit the components: {0}")]
    Geometry(String),
}

/// The labels `raidctl -C` then, with `serial`, `-I serial`, then `-u` leave: per column, the
/// label for the component of `partition_sectors[c]` sectors (`None`: absent, not labelled).
pub fn new_labels(
    config: &RaidConfig,
    partition_sectors: &[Option<u64>],
    serial: Option<i32>,
) -> Result<Vec<Option<ComponentLabel>>, NewSetError> {
    let columns = usize::try_from(config.num_columns).unwrap_or(0);
    if partition_sectors.len() != columns || config.disks.len() != columns {
        return Err(NewSetError::ColumnCount { listed: partition_sectors.len(), columns: config.num_columns });
    }
    let mut num_blocks: Option<u64> = None;
    for (column, sectors) in partition_sectors.iter().enumerate() {
        let Some(sectors) = *sectors else { continue };
        let usable = usable_sectors(sectors).filter(|&u| u > 0).ok_or(NewSetError::TooSmall { column, sectors })?;
        num_blocks = Some(num_blocks.map_or(usable, |n| n.min(usable)));
    }
    let num_blocks = num_blocks.ok_or(NewSetError::NoComponents)?;
    let layout = &config.layout;
    Geometry::new(layout.level, columns as u32, u64::try_from(layout.sect_per_su).unwrap_or(0), num_blocks)
        .map_err(|e| NewSetError::Geometry(e.to_string()))?;
    // `-C` and `-u` bump the counter from 0; `-I` is one more verb on the configured set.
    let mod_counter = CONFIGURE_BUMPS + UNCONFIGURE_BUMPS + if serial.is_some() { VERB_BUMPS } else { 0 };
    let redundant = layout.level != Level::Raid0;
    Ok(partition_sectors
        .iter()
        .enumerate()
        .map(|(column, sectors)| {
            sectors.map(|partition_size| ComponentLabel {
                serial_number: serial.unwrap_or(0),
                mod_counter,
                row: 0,
                column: column as i32,
                num_rows: 1,
                num_columns: config.num_columns,
                clean: RAID_DIRTY,
                status: DiskStatus::Optimal.raw(),
                sect_per_su: layout.sect_per_su,
                sus_per_pu: layout.sus_per_pu,
                sus_per_ru: layout.sus_per_ru,
                parity_config: layout.level.as_char() as i32,
                max_outstanding: config.queue.max_outstanding,
                block_size: SECTOR_BYTES as i32,
                num_blocks,
                partition_size,
                parity_map_modcount: mod_counter,
                parity_map_flags: if redundant { PMLABEL_VALID | PMLABEL_WASUSED } else { 0 },
                parity_map_tickms: if redundant { DEFAULT_TICKMS } else { 0 },
                parity_map_ntick: if redundant { DEFAULT_COOLDOWN } else { 0 },
                parity_map_regions: if redundant { default_region_count(num_blocks, SECTOR_BYTES) } else { 0 },
                ..ComponentLabel::default()
            })
        })
        .collect())
}

#[cfg(test)]
mod tests;
