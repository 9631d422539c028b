//! How uraid prints superblocks and arrays: mdadm-style text, and JSON whose field names follow
//! the md fixtures' `case.json` (so a test, or a script, can compare the two directly).

use serde_json::{json, Value};
use uraid_layout::{Level, Raid10Format};
use uraid_md::assemble::{AssemblyPlan, MemberVerdict};
use uraid_md_format::sb1::feature;
use uraid_md_format::{uuid::format_md, MemberInfo, MetadataVersion, Role};

use crate::size::{mdadm_human_size, mdadm_size};

/// md's "no resync needed" marker.
pub const MAX_SECTOR: u64 = u64::MAX;

/// The layout as mdadm names it, or `None` where mdadm prints none.
pub fn layout_name(level: i32, layout: i32, feature_map: u32) -> Option<String> {
    match Level::from_md(level).ok()? {
        lvl @ (Level::Raid5 | Level::Raid6 | Level::Raid10) => {
            Some(uraid_md::layout_name(lvl, layout).unwrap_or_else(|| format!("-unknown- ({layout})")))
        }
        Level::Raid0 => Some(if feature_map & 4096 == 0 {
            "-unknown-".to_string()
        } else {
            match layout {
                1 => "original".to_string(),
                2 => "alternate".to_string(),
                n => format!("-unknown- ({n})"),
            }
        }),
        _ => None,
    }
}

pub fn level_name(level: i32) -> String {
    Level::from_md(level).map(|l| l.name().to_string()).unwrap_or_else(|_| format!("level {level}"))
}

/// mdadm's `Device Role` text for 1.x; for 0.90 the slot/state summary.
pub fn role_text(info: &MemberInfo) -> String {
    let v090 = info.version == MetadataVersion::V0_90;
    match info.role {
        Role::Active(n) if v090 => format!("slot {n}, active sync"),
        Role::Active(n) => format!("Active device {n}"),
        Role::Replacement(n) => format!("Replacement device {n}"),
        Role::Spare => "spare".to_string(),
        Role::Faulty => "faulty".to_string(),
        Role::Journal => "Journal".to_string(),
    }
}

/// mdadm's array-state string: 'A' for each slot some device fills, '.' for the rest.
pub fn array_state(info: &MemberInfo) -> String {
    (0..info.raid_disks)
        .map(|slot| {
            let filled = info.roles.iter().any(|r| matches!(r, Role::Active(s) if *s == slot));
            if filled {
                'A'
            } else {
                '.'
            }
        })
        .collect()
}

/// Array size in bytes computable from one member's superblock (not for linear/raid0, which
/// need every member's size).
pub fn array_bytes_from_one(info: &MemberInfo) -> Option<u64> {
    let comp = info.component_sectors;
    let chunk = u64::from(info.chunk_sectors.max(1));
    let n = u64::from(info.raid_disks);
    let sectors = match Level::from_md(info.level).ok()? {
        Level::Raid1 => comp,
        Level::Raid4 | Level::Raid5 => (n - 1) * (comp / chunk * chunk),
        Level::Raid6 => (n.saturating_sub(2)) * (comp / chunk * chunk),
        Level::Raid10 => {
            let f = Raid10Format::from_md(info.layout as u32).ok()?;
            let layout = uraid_layout::Raid10Layout::new(n as usize, info.chunk_sectors, f, comp).ok()?;
            layout.array_sectors()
        }
        Level::Linear | Level::Raid0 => return None,
    };
    Some(sectors * 512)
}

/// `Sat Nov 21 20:56:34 2026` (UTC), as mdadm prints times.
pub fn ctime_text(unix: u64) -> String {
    let days = (unix / 86400) as i64;
    let secs = unix % 86400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = (days + 4).rem_euclid(7) as usize;
    const WD: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MON: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        WD[weekday],
        MON[(month - 1) as usize],
        day,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        year
    )
}

/// mdadm prints chunks in KiB whatever their size ("4096K").
pub fn chunk_text(sectors: u32) -> String {
    format!("{}K", u64::from(sectors) / 2)
}

/// `mdadm --examine` text for one member.
pub fn examine_text(path: &str, info: &MemberInfo) -> String {
    let mut s = format!("{path}:\n");
    let mut line = |k: &str, v: String| s.push_str(&format!("{k:>15} : {v}\n"));
    line("Magic", "a92b4efc".into());
    line("Version", info.version.to_string());
    if info.version != MetadataVersion::V0_90 {
        line("Feature Map", format!("{:#x}", info.feature_map));
    }
    line("Array UUID", format_md(&info.array_uuid));
    if info.version != MetadataVersion::V0_90 {
        line("Name", info.name.clone());
    }
    line("Creation Time", ctime_text(info.ctime));
    line("Raid Level", level_name(info.level));
    line("Raid Devices", info.raid_disks.to_string());
    if let Some(minor) = info.preferred_minor {
        line("Preferred Minor", minor.to_string());
    }
    line("Avail Dev Size", format!("{} sectors", info.avail_sectors));
    if let Some(bytes) = array_bytes_from_one(info) {
        line("Array Size", mdadm_size(bytes));
    }
    if info.component_sectors > 0 {
        line("Used Dev Size", format!("{} sectors", info.component_sectors));
    }
    if info.version != MetadataVersion::V0_90 {
        line("Data Offset", format!("{} sectors", info.data_offset));
        if let Some(r) = info.reshape.filter(|r| r.new_offset != 0) {
            line("New Offset", format!("{} sectors", info.data_offset.saturating_add_signed(r.new_offset)));
        }
    }
    line("Super Offset", format!("{} sectors", info.super_offset));
    if let Some(r) = info.recovery_offset {
        line("Recovery Offset", format!("{r} sectors"));
    }
    if info.resync_offset != MAX_SECTOR && info.resync_offset != 0 {
        line("Resync Offset", format!("{} sectors", info.resync_offset));
    }
    line("State", state_text(info).to_string());
    if let Some(u) = info.device_uuid {
        line("Device UUID", format_md(&u));
    }
    if let Some(b) = info.bitmap_offset {
        line("Internal Bitmap", format!("{b} sectors from superblock"));
    } else if let Some((offset, size)) = info.ppl {
        line("PPL", format!("{size} sectors at offset {offset} sectors from superblock"));
    }
    for (key, value) in reshape_lines(info) {
        line(key, value);
    }
    line("Update Time", ctime_text(info.utime));
    if let Some((off, sectors)) = info.bad_block_log {
        line("Bad Block Log", format!("{} entries available at offset {off} sectors", u64::from(sectors) * 512 / 8));
    }
    line("Checksum", format!("{:08x} - correct", info.checksum));
    line("Events", info.events.to_string());
    if let Some(l) = layout_name(info.level, info.layout, info.feature_map) {
        line("Layout", l);
    }
    if info.chunk_sectors > 0 {
        line("Chunk Size", chunk_text(info.chunk_sectors));
    }
    line("Consistency Policy", consistency_policy(info).to_string());
    line("Device Role", role_text(info));
    line("Array State", format!("{} ('A' == active, '.' == missing)", array_state(info)));
    s
}

/// What `mdadm --examine` says of a reshape in progress (`examine_super1`, `examine_super0`):
/// how far it has come, then only what changes (members, level, layout, chunk).
pub fn reshape_lines(info: &MemberInfo) -> Vec<(&'static str, String)> {
    let Some(r) = info.reshape else { return Vec::new() };
    let mut lines = vec![("Reshape pos'n", format!("{}{}", r.position / 2, mdadm_human_size(r.position_bytes())))];
    if r.delta_disks != 0 {
        lines.push((
            "Delta Devices",
            format!("{} ({}->{})", r.delta_disks, r.old_raid_disks(info.raid_disks), info.raid_disks),
        ));
    }
    if r.new_level != info.level {
        lines.push(("New Level", level_name(r.new_level)));
    }
    if r.new_layout != info.layout {
        if let Some(name) = layout_name(r.new_level, r.new_layout, info.feature_map) {
            lines.push(("New Layout", name));
        }
    }
    if r.new_chunk_sectors != info.chunk_sectors {
        lines.push(("New Chunksize", chunk_text(r.new_chunk_sectors)));
    }
    lines
}

/// The reshape of `--examine --json`, or null.
fn reshape_json(info: &MemberInfo) -> Value {
    match info.reshape {
        None => Value::Null,
        Some(r) => json!({
            "position_sectors": r.position,
            "delta_disks": r.delta_disks,
            "raid_devices_before": r.old_raid_disks(info.raid_disks),
            "new_level": level_name(r.new_level),
            "new_layout": layout_name(r.new_level, r.new_layout, info.feature_map),
            "new_layout_num": r.new_layout,
            "new_chunk_bytes": u64::from(r.new_chunk_sectors) * 512,
            "backwards": r.backwards,
            "new_offset_sectors": r.new_offset,
        }),
    }
}

/// The consistency policy a superblock implies, named as mdadm's `--detail` prints it
/// (`getinfo_super1`): journal, ppl (either PPL feature bit), bitmap, none for linear and raid0,
/// else resync.
pub fn consistency_policy(info: &MemberInfo) -> &'static str {
    if info.feature_map & feature::JOURNAL != 0 || info.role == Role::Journal {
        "journal"
    } else if info.ppl.is_some() {
        "ppl"
    } else if info.bitmap_offset.is_some() {
        "bitmap"
    } else if info.level <= 0 {
        "none"
    } else {
        "resync"
    }
}

pub fn state_text(info: &MemberInfo) -> &'static str {
    if info.state_clean {
        "clean"
    } else {
        "active"
    }
}

/// `--examine --json` for one member; field names follow case.json.
pub fn examine_json(path: &str, info: &MemberInfo, device_bytes: u64) -> Value {
    json!({
        "file": path,
        "device_bytes": device_bytes,
        "metadata": info.version.to_string(),
        "array_uuid": format_md(&info.array_uuid),
        "array_name": info.name,
        "level": level_name(info.level),
        "raid_devices": info.raid_disks,
        "layout": layout_name(info.level, info.layout, info.feature_map),
        "layout_num": layout_num(info),
        "chunk_bytes": u64::from(info.chunk_sectors) * 512,
        "component_size_kib": info.component_sectors / 2,
        "array_size_bytes": array_bytes_from_one(info),
        "events": info.events,
        "data_offset_sectors": info.data_offset,
        "super_offset_sectors": info.super_offset,
        "avail_dev_sectors": info.avail_sectors,
        "examine_device_role": role_text(info),
        "examine_state": state_text(info),
        "examine_feature_map": if info.version == MetadataVersion::V0_90 { String::new() } else { format!("{:#x}", info.feature_map) },
        "device_uuid": info.device_uuid.map(|u| format_md(&u)),
        "dev_number": info.dev_number,
        "array_state": array_state(info),
        "resync_offset": if info.resync_offset == MAX_SECTOR { None } else { Some(info.resync_offset) },
        "recovery_offset": info.recovery_offset,
        "bitmap_offset_sectors": info.bitmap_offset,
        "consistency_policy": consistency_policy(info),
        "ppl_offset_sectors": info.ppl.map(|p| p.0),
        "ppl_size_sectors": info.ppl.map(|p| p.1),
        "ctime": info.ctime,
        "utime": info.utime,
        "checksum": format!("{:08x}", info.checksum),
        "reshape": reshape_json(info),
    })
}

/// md's layout number as sysfs shows it: raid0 without a stored layout reads as -1.
pub fn layout_num(info: &MemberInfo) -> i32 {
    if info.level == 0 && info.feature_map & 4096 == 0 {
        -1
    } else {
        info.layout
    }
}

/// Per-member rows of a detail report: (name, verdict text, slot if active).
pub fn member_rows(plan: &AssemblyPlan, names: &[String]) -> Vec<(String, String, Option<usize>)> {
    let mut rows: Vec<(String, String, Option<usize>)> = plan
        .verdicts
        .iter()
        .zip(names)
        .map(|(v, n)| {
            let slot = match v {
                MemberVerdict::Active { slot } => Some(*slot),
                _ => None,
            };
            let text = match v {
                MemberVerdict::Active { slot } => match plan.recovering[*slot] {
                    Some(done) => format!("spare rebuilding ({done} sectors rebuilt)"),
                    None => "active sync".to_string(),
                },
                other => other.to_string(),
            };
            (n.clone(), text, slot)
        })
        .collect();
    rows.sort_by_key(|r| r.2.unwrap_or(usize::MAX));
    rows
}

/// `--detail` text for an assembled array.
pub fn detail_text(plan: &AssemblyPlan, infos: &[MemberInfo], names: &[String], array_bytes: u64) -> String {
    let refi = &infos[plan.reference];
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("{k:>15} : {v}\n"));
    line("Version", plan.version.to_string());
    line("Creation Time", ctime_text(refi.ctime));
    line("Raid Level", plan.level.name().to_string());
    line("Array Size", mdadm_size(array_bytes));
    if plan.component_sectors > 0 {
        line("Used Dev Size", mdadm_size(plan.component_sectors * 512));
    }
    line("Raid Devices", plan.raid_disks.to_string());
    line("Total Devices", infos.len().to_string());
    line("Update Time", ctime_text(refi.utime));
    line("State", plan.state().to_string());
    // As mdadm counts them: a device being rebuilt is a working spare until it is in sync.
    let held = plan.slots.iter().flatten().count();
    let rebuilding = plan.slots.iter().zip(&plan.recovering).filter(|(d, r)| d.is_some() && r.is_some()).count();
    let active = held - rebuilding;
    let idle_spares = plan.verdicts.iter().filter(|v| matches!(v, MemberVerdict::Spare)).count();
    let spares = idle_spares + rebuilding;
    let failed = plan.verdicts.len() - held - idle_spares;
    line("Active Devices", active.to_string());
    line("Working Devices", (active + spares).to_string());
    line("Failed Devices", failed.to_string());
    line("Spare Devices", spares.to_string());
    if let Some(l) = layout_name(refi.level, refi.layout, refi.feature_map) {
        line("Layout", l);
    }
    if plan.chunk_sectors > 0 {
        line("Chunk Size", chunk_text(plan.chunk_sectors));
    }
    line("Consistency Policy", consistency_policy(refi).to_string());
    if let Some(r) = plan.reshape {
        // Detail.c: how far, from the position over the array's size, then what changes.
        let percent = (r.position_bytes() as u128 * 100 / u128::from(array_bytes.max(1))).min(100);
        line("Reshape Status", format!("{percent}% complete"));
        for (key, value) in reshape_lines(refi) {
            match key {
                "Reshape pos'n" => {}
                "Delta Devices" => line(key, value.replacen(" (", ", (", 1)),
                _ => line(key, value),
            }
        }
    }
    if !plan.name.is_empty() {
        line("Name", plan.name.clone());
    }
    line("UUID", plan.uuid_string());
    line("Events", plan.events.to_string());
    s.push_str("\n    Slot   Events  State                                     Device\n");
    for (i, (name, text, slot)) in member_rows(plan, names).into_iter().enumerate() {
        let idx = names.iter().position(|n| *n == name).unwrap_or(i);
        let slot_text = slot.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        s.push_str(&format!("    {slot_text:>4} {:>8}  {text:<41} {name}\n", infos[idx].events));
    }
    for slot in plan.missing_slots() {
        s.push_str(&format!("    {slot:>4} {:>8}  {:<41} -\n", "-", "missing"));
    }
    s
}

/// `--detail --json`.
pub fn detail_json(plan: &AssemblyPlan, infos: &[MemberInfo], names: &[String], array_bytes: u64) -> Value {
    let refi = &infos[plan.reference];
    let members: Vec<Value> = plan
        .verdicts
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let (state, slot, fresh) = match v {
                MemberVerdict::Active { slot } if plan.recovering[*slot].is_some() => ("rebuilding", Some(*slot), true),
                MemberVerdict::Active { slot } => ("active", Some(*slot), true),
                MemberVerdict::Spare => ("spare", None, true),
                MemberVerdict::Stale { .. } => ("stale", None, false),
                MemberVerdict::Faulty => ("faulty", None, false),
                MemberVerdict::Duplicate { .. } => ("duplicate", None, false),
            };
            json!({
                "file": names[i],
                "state": state,
                "slot": slot,
                "fresh": fresh,
                "events": infos[i].events,
                "note": v.to_string(),
                "device_uuid": infos[i].device_uuid.map(|u| format_md(&u)),
            })
        })
        .collect();
    json!({
        "metadata": plan.version.to_string(),
        "array_uuid": plan.uuid_string(),
        "array_name": plan.name,
        "level": plan.level.name(),
        "raid_devices": plan.raid_disks,
        "layout": layout_name(refi.level, refi.layout, refi.feature_map),
        "layout_num": plan.layout,
        "chunk_bytes": u64::from(plan.chunk_sectors) * 512,
        "array_size_bytes": array_bytes,
        "component_size_kib": plan.component_sectors / 2,
        "state": plan.state().to_string(),
        "clean": plan.clean,
        "degraded": plan.degraded(),
        "missing_slots": plan.missing_slots(),
        "events": plan.events,
        "consistency_policy": consistency_policy(refi),
        "reshape": reshape_json(refi),
        "members": members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctime_matches_mdadm() {
        // Sat Nov 21 20:56:34 2026 UTC.
        assert_eq!(ctime_text(1_795_294_594), "Sat Nov 21 20:56:34 2026");
        assert_eq!(ctime_text(0), "Thu Jan  1 00:00:00 1970");
    }
}
