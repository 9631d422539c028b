//! `-m` (the parity map's status, in raidctl's words) and `-M yes|no` (use the map, or not,
//! from the next configuration on).
//!
//! raidctl's `write/sync/clean counters` count the map's updates since the set was configured;
//! a uraid command configures the set anew and has made none when it reports them.

use serde_json::json;
use uraid_raidframe::raidctl_session::LabelChange;
use uraid_raidframe::set_plan::MapStart;
use uraid_raidframe_format::label::PMLABEL_DISABLE;
use uraid_raidframe_format::layout::{region_size_sectors, ParityMap};

use super::super::{emit, err, CliResult};
use super::session::Configured;
use super::target::{unit, Target};

/// `raidctl -m`.
pub fn status(target: &Target, json: bool) -> CliResult {
    let array = target.open(false)?;
    let set = array.raidframe().expect("a RAIDframe set");
    let raid = unit(&array);
    let labels = set.metadata().labels();
    // The map the next configuration uses: off when a label asks for that.
    let next_disabled = labels.iter().flatten().any(|l| l.parity_map_flags & PMLABEL_DISABLE != 0);
    let next = if next_disabled { "disabled" } else { "enabled" };
    match &set.plan.parity_map {
        MapStart::NoParity => {
            if json {
                return emit(&format!("{}\n", json!({ "unit": raid, "enabled": false, "parity": false })));
            }
            emit(&format!("raid{raid}: has no parity; parity map disabled\n"))
        }
        MapStart::Disabled => {
            if json {
                let v = json!({ "unit": raid, "enabled": false, "parity": true, "next_configure": next });
                return emit(&format!("{}\n", serde_json::to_string_pretty(&v).expect("JSON")));
            }
            emit(&format!(
                "raid{raid}: parity map disabled\nraid{raid}: parity map will remain {next} on next configure\n"
            ))
        }
        MapStart::InUse { on_disk, tickms, ntick, .. } => {
            let first = labels.iter().flatten().next();
            let (_, _, _, regions) = set.plan.configured_map_fields(first).expect("a set with parity");
            let g = set.plan.layout.raid_geometry();
            let region_kb = region_size_sectors(g.stripe_units_per_disk(), regions, g.data_sectors_per_stripe())
                * set.plan.layout.sector_bytes()
                / 1024;
            // With dirty labels the whole set's parity is owed a rewrite and the driver counts
            // no region dirty (measured); a map it would not trust is replaced at configure,
            // clean since the labels say the parity is good.
            let map = match on_disk.as_deref() {
                Some(map) if set.plan.labels_clean => map.clone(),
                _ => ParityMap::clean(),
            };
            let dirty: Vec<usize> = map.dirty_regions().filter(|&r| r < regions as usize).collect();
            if json {
                let v = json!({
                    "unit": raid,
                    "enabled": true,
                    "parity": true,
                    "regions": regions,
                    "region_kb": region_kb,
                    "tickms": tickms,
                    "ntick": ntick,
                    "dirty_regions": dirty,
                    "next_configure": next,
                });
                return emit(&format!("{}\n", serde_json::to_string_pretty(&v).expect("JSON")));
            }
            emit(&format!(
                "raid{raid}: parity map enabled with {regions} regions of {region_kb}KB\nraid{raid}: regions marked clean after {ntick} intervals of {}.{:03}s\nraid{raid}: write/sync/clean counters 0/0/0\nraid{raid}: {} dirty regions\nraid{raid}: parity map will remain {next} on next configure\n",
                tickms / 1000,
                tickms % 1000,
                dirty.len(),
            ))
        }
    }
}

/// `raidctl -M yes|no`.
pub fn set(target: &Target, word: &str) -> CliResult {
    let on = match word.to_ascii_lowercase().as_str() {
        "yes" => true,
        "no" => false,
        _ => return err(format!("-M {word}: say yes or no")),
    };
    let array = target.open(true)?;
    let raid = unit(&array);
    if matches!(array.raidframe().expect("a RAIDframe set").plan.parity_map, MapStart::NoParity) {
        return err(format!("raid{raid}: has no parity; a parity map cannot be turned on or off"));
    }
    let configured = Configured::of(&array);
    array.close()?;
    configured.unconfigure(LabelChange::ParityMap(on))?;
    emit(&format!("raid{raid}: parity map will be {} on next configure\n", if on { "enabled" } else { "disabled" }))
}
