//! What `uraid examine` says of a RAIDframe component and `uraid detail` of a RAIDframe set,
//! beside md's members and arrays: the component label as `raidctl -g` prints it; the set's
//! columns, which component serves each, and whether its parity is known good.

use serde_json::{json, Value};
use uraid_device::OpenArray;
use uraid_engine::geometry::Layout;
use uraid_raidframe::set_plan::MapStart;
use uraid_raidframe_format::label::ComponentLabel;

/// `raidctl -g`'s words for `root_partition & 3`.
const ROOT_PARTITION: [&str; 4] = ["No", "Force", "Soft", "*invalid*"];

fn yes_no(b: bool) -> &'static str {
    if b {
        "Yes"
    } else {
        "No"
    }
}

/// A component label as `raidctl -g` prints it (and `raidctl -s` for each optimal component).
pub fn raidctl_label_text(device: &str, label: &ComponentLabel) -> String {
    let level = label.level_char().unwrap_or('?');
    format!(
        "Component label for {device}:\n   Row: {}, Column: {}, Num Rows: {}, Num Columns: {}\n   Version: {}, Serial Number: {}, Mod Counter: {}\n   Clean: {}, Status: {}\n   sectPerSU: {}, SUsPerPU: {}, SUsPerRU: {}\n   Queue size: {}, blocksize: {}, numBlocks: {}\n   RAID Level: {level}\n   Autoconfig: {}\n   Root partition: {}\n   Last configured as: raid{}\n",
        label.row,
        label.column,
        label.num_rows,
        label.num_columns,
        label.version,
        label.serial_number as u32,
        label.mod_counter,
        yes_no(label.is_clean()),
        label.status,
        label.sect_per_su,
        label.sus_per_pu,
        label.sus_per_ru,
        label.max_outstanding,
        label.block_size,
        label.num_blocks,
        yes_no(label.autoconfigure != 0),
        ROOT_PARTITION[(label.root_partition & 3) as usize],
        label.last_unit,
    )
}

/// A component label as `uraid examine` prints it: `raidctl -g`'s lines, then the parity map
/// fields raidctl does not print; and as JSON.
pub fn examine_component(device: &str, label: &ComponentLabel) -> (String, Value) {
    let text = format!(
        "{}   Parity map: flags {:#x}, mod counter {}, {} region(s), tick {} ms, cooldown {} tick(s)\n",
        raidctl_label_text(device, label),
        label.parity_map_flags,
        label.parity_map_modcount,
        label.parity_map_regions,
        label.parity_map_tickms,
        label.parity_map_ntick,
    );
    (text, label_json(device, label))
}

/// A component label as JSON, every field raidctl prints and the parity map fields.
pub fn label_json(device: &str, label: &ComponentLabel) -> Value {
    let level = label.level_char().unwrap_or('?');
    json!({
        "device": device,
        "format": "raidframe",
        "row": label.row,
        "column": label.column,
        "num_rows": label.num_rows,
        "num_columns": label.num_columns,
        "version": label.version,
        "serial_number": label.serial_number as u32,
        "mod_counter": label.mod_counter,
        "clean": label.is_clean(),
        "status": label.status,
        "sect_per_su": label.sect_per_su,
        "sus_per_pu": label.sus_per_pu,
        "sus_per_ru": label.sus_per_ru,
        "raid_level": level.to_string(),
        "queue_size": label.max_outstanding,
        "block_size": label.block_size,
        "num_blocks": label.num_blocks,
        "partition_size": label.partition_size,
        "autoconfigure": label.autoconfigure != 0,
        "root_partition": label.root_partition,
        "last_unit": label.last_unit,
        "parity_map": {
            "flags": label.parity_map_flags,
            "modcount": label.parity_map_modcount,
            "regions": label.parity_map_regions,
            "tickms": label.parity_map_tickms,
            "ntick": label.parity_map_ntick,
        },
    })
}

/// A RAIDframe set as `uraid detail` prints it.
pub fn detail_set(array: &OpenArray) -> (String, Value) {
    let set = array.raidframe().expect("a RAIDframe set");
    let plan = &set.plan;
    let g = plan.layout.raid_geometry();
    let parity = match &plan.parity_map {
        MapStart::NoParity => "none (RAID 0)".to_string(),
        _ if array.needs_resync() => "DIRTY: a parity rewrite is owed".to_string(),
        _ => "clean".to_string(),
    };
    let map = match &plan.parity_map {
        MapStart::NoParity => "none",
        MapStart::Disabled => "disabled",
        MapStart::InUse { on_disk: Some(_), .. } => "in use",
        MapStart::InUse { on_disk: None, .. } => "in use (not trusted as found: rewritten before it is relied on)",
    };
    let mut text = format!(
        "RAIDframe set {}:\n      RAID level : {}\n         Columns : {}\n      Stripe unit : {} sectors of {} bytes\n   Data per disk : {} sectors ({} stripe units used)\n      Array size : {} bytes\n     Mod counter : {}\n          Parity : {parity}\n      Parity map : {map}\n",
        plan.serial_number,
        g.level.as_char(),
        g.columns,
        g.sect_per_su,
        plan.layout.sector_bytes(),
        g.sectors_per_disk,
        g.stripe_units_per_disk(),
        plan.layout.array_bytes(),
        set.metadata().mod_counter(),
    );
    let mut columns = Vec::new();
    for c in 0..plan.columns.len() {
        let device = array.slot_device_name(c);
        let state = match device {
            Some(_) => "optimal",
            None => "failed",
        };
        text.push_str(&format!("   column {c}: {} ({state})\n", device.unwrap_or("-")));
        columns.push(json!({ "column": c, "device": device, "state": state }));
    }
    for why in &set.skipped {
        text.push_str(&format!("   left out: {why}\n"));
    }
    let value = json!({
        "format": "raidframe",
        "serial_number": plan.serial_number as u32,
        "raid_level": g.level.as_char().to_string(),
        "columns": columns,
        "sect_per_su": g.sect_per_su,
        "block_size": plan.layout.sector_bytes(),
        "num_blocks": g.sectors_per_disk,
        "array_bytes": plan.layout.array_bytes(),
        "mod_counter": set.metadata().mod_counter(),
        "parity_clean": !array.needs_resync(),
        "parity_map": map,
        "left_out": set.skipped,
    });
    (text, value)
}
