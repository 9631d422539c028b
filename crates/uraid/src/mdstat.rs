//! A running array's status (the JSON `control::status_json` gives) as text, the way
//! /proc/mdstat shows md's arrays: one entry per array, with the bar of the running pass.
//! `uraid ctl SOCKET status` prints one entry with uraid's own lines after it (state, speed
//! limits, last pass); `uraid status` prints every running array's entry between mdstat's
//! `Personalities` and `unused devices` lines.

use std::path::Path;

use serde_json::Value;

/// The /proc/mdstat entry of one array, headed `label` (md prints the device name, `md0` or
/// `md_NAME`): its level and members, its size and slots, and the running pass's progress line.
pub fn entry(label: &str, v: &Value) -> String {
    let members = v["members"].as_array().cloned().unwrap_or_default();
    let names: Vec<String> = members
        .iter()
        .map(|m| {
            let name = m["path"].as_str().map(short_name).unwrap_or_else(|| "(missing)".into());
            // md marks failed devices and spares; a member being rebuilt holds its slot
            // unmarked (md's "(R)" is a replacement, which uraid does not make).
            let flag = if m["state"] == "faulty" { "(F)" } else { "" };
            format!("{name}[{}]{flag}", m["slot"])
        })
        .chain(
            // Spares follow the slots, numbered after them as md numbers the devices it adds.
            v["spares"].as_array().into_iter().flatten().enumerate().map(|(i, path)| {
                format!("{}[{}](S)", path.as_str().map(short_name).unwrap_or_default(), members.len() + i)
            }),
        )
        .collect();
    let up: String = members.iter().map(|m| if m["state"] == "in_sync" { 'U' } else { '_' }).collect();
    let in_sync = up.chars().filter(|c| *c == 'U').count();
    let chunk = v["chunk_bytes"].as_u64().unwrap_or(0);
    let mut out = format!(
        "{label} : {} {} {}\n      {} blocks{} [{}/{}] [{}]\n",
        if v["read_only"] == true { "active (read-only)" } else { "active" },
        v["level"].as_str().unwrap_or("?"),
        names.join(" "),
        v["size_bytes"].as_u64().unwrap_or(0) / 1024,
        match v["md_shape"].as_str() {
            // md's own words for the superblock and the shape.
            Some(shape) => shape.to_string(),
            // Another format: the chunk, for levels that have one.
            None if chunk > 0 => format!(", {}k chunk", chunk / 1024),
            None => String::new(),
        },
        members.len(),
        in_sync,
        up,
    );
    if let Some(line) = progress_line(v) {
        out.push_str(&line);
    }
    out
}

/// The running pass's line, as md prints it under the array:
/// `[==>..................]  recovery = 12.5% (1024/8192) finish=0.1min speed=1024K/sec`.
fn progress_line(v: &Value) -> Option<String> {
    let (action, done, total) = sync_progress(v)?;
    let frac = if total == 0 { 1.0 } else { done as f64 / total as f64 };
    let width = 20;
    let filled = ((frac * width as f64) as usize).min(width);
    let bar: String = "=".repeat(filled) + ">" + &".".repeat(width - filled);
    let finish =
        v["sync_eta_seconds"].as_u64().map(|e| format!("{:.1}min", e as f64 / 60.0)).unwrap_or_else(|| "?".into());
    let speed = v["sync_speed_bytes_per_sec"].as_u64().unwrap_or(0);
    Some(format!(
        "      [{bar}]  {} = {:4.1}% ({}/{}) finish={finish} speed={}K/sec\n",
        mdstat_action(&action),
        frac * 100.0,
        done / 1024,
        total / 1024,
        speed / 1024,
    ))
}

/// md's sysfs says `recover` (sync_action) where /proc/mdstat says `recovery`.
fn mdstat_action(action: &str) -> &str {
    match action {
        "recover" => "recovery",
        other => other,
    }
}

/// What `uraid ctl SOCKET status` prints: the mdstat entry headed by the array's UUID, then
/// uraid's state, speed limits and the last pass's outcome.
pub fn ctl_status(v: &Value) -> String {
    let mut out = entry(v["uuid"].as_str().unwrap_or("?"), v);
    if sync_progress(v).is_none() {
        out.push_str(&format!("      state: {}\n", v["state"].as_str().unwrap_or("?")));
    }
    if let (Some(min), Some(max)) = (v["speed_limit_min"].as_u64(), v["speed_limit_max"].as_u64()) {
        out.push_str(&format!("      speed limits: min={}K/sec max={}K/sec\n", min / 1024, max / 1024));
    }
    if let Some(last) = v["last_sync"].as_str() {
        out.push_str(&format!("      last pass: {last}; mismatch_cnt {}\n", v["mismatch_cnt"]));
    }
    for r in v["returning"].as_array().into_iter().flatten() {
        let path = r["path"].as_str().unwrap_or("?");
        let next = r["next_attempt_ms"].as_u64().unwrap_or(0);
        let mut line = format!(
            "      lost: {path} (slot {}), {} attempt(s) to reach it again, next in {}.{:01}s",
            r["slot"],
            r["attempts"],
            next / 1000,
            next % 1000 / 100
        );
        if let Some(why) = r["last_failure"].as_str() {
            let what = if r["refused"] == Value::Bool(true) { "left out" } else { "not reached" };
            line.push_str(&format!("; {what}: {why}"));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The whole of /proc/mdstat for the arrays given as (md device name, status): the levels in
/// use, each array's entry followed by a blank line, and the unused devices (uraid keeps none).
pub fn mdstat(arrays: &[(String, Value)]) -> String {
    let mut levels: Vec<&str> = arrays.iter().filter_map(|(_, v)| v["level"].as_str()).collect();
    levels.sort_unstable();
    levels.dedup();
    let personalities: String = levels.iter().map(|l| format!("[{l}] ")).collect();
    let mut out = format!("Personalities : {personalities}\n");
    for (label, v) in arrays {
        out.push_str(&entry(label, v));
        out.push('\n');
    }
    out.push_str("unused devices: <none>\n");
    out
}

/// The running pass of a JSON status: (action, bytes done, bytes in all), or `None` when idle.
pub fn sync_progress(v: &Value) -> Option<(String, u64, u64)> {
    let action = v["sync_action"].as_str()?;
    if action == "idle" {
        return None;
    }
    Some((action.to_string(), v["sync_done_bytes"].as_u64().unwrap_or(0), v["sync_total_bytes"].as_u64().unwrap_or(0)))
}

fn short_name(path: &str) -> String {
    Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn member(slot: usize, path: Option<&str>, state: &str) -> Value {
        json!({"slot": slot, "path": path, "state": state})
    }

    fn raid5(states: [&str; 4]) -> Value {
        json!({
            "uuid": "0a1b2c3d:00000000:00000000:00000001",
            "level": "raid5",
            "size_bytes": 24u64 << 20,
            "chunk_bytes": 65536,
            "read_only": false,
            "state": "clean",
            "sync_action": "idle",
            "members": (0..4).map(|i| member(i, Some(&format!("/srv/d{i}.img")), states[i])).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn a_whole_array_reads_as_mdstat_prints_it() {
        let v = raid5(["in_sync"; 4]);
        assert_eq!(
            entry("md_data", &v),
            "md_data : active raid5 d0.img[0] d1.img[1] d2.img[2] d3.img[3]\n      24576 blocks, 64k chunk [4/4] [UUUU]\n"
        );
    }

    /// An md array: md's words for its superblock and shape, and its spares after the slots.
    #[test]
    fn an_md_array_has_mdstats_shape_and_spares() {
        let mut v = raid5(["in_sync"; 4]);
        v["md_shape"] = json!(" super 1.2 level 5, 64k chunk, algorithm 2");
        v["spares"] = json!(["/srv/e4.img"]);
        assert_eq!(
            entry("md_data", &v),
            "md_data : active raid5 d0.img[0] d1.img[1] d2.img[2] d3.img[3] e4.img[4](S)\n      24576 blocks super 1.2 level 5, 64k chunk, algorithm 2 [4/4] [UUUU]\n"
        );
    }

    /// md says the chunk only of levels that have one (raid1 has none).
    #[test]
    fn a_level_without_chunks_says_none() {
        let mut mirror = raid5(["in_sync"; 4]);
        mirror["chunk_bytes"] = json!(0);
        assert!(entry("md_m", &mirror).ends_with("\n      24576 blocks [4/4] [UUUU]\n"));
    }

    #[test]
    fn failed_and_missing_members_are_marked_and_a_rebuilding_one_is_not() {
        let mut v = raid5(["in_sync", "faulty", "in_sync", "recovering"]);
        v["members"][2] = member(2, None, "missing");
        let text = entry("md_x", &v);
        assert!(text.starts_with("md_x : active raid5 d0.img[0] d1.img[1](F) (missing)[2] d3.img[3]\n"), "{text}");
        assert!(text.contains(" [4/1] [U___]\n"), "{text}");
    }

    /// md's progress line: the bar, the action in mdstat's word, percent, KiB done of all,
    /// the finish estimate in minutes and the speed.
    #[test]
    fn a_running_recovery_has_mdstats_progress_line() {
        let mut v = raid5(["in_sync", "in_sync", "in_sync", "recovering"]);
        v["sync_action"] = json!("recover");
        v["sync_done_bytes"] = json!(2u64 << 20);
        v["sync_total_bytes"] = json!(8u64 << 20);
        v["sync_speed_bytes_per_sec"] = json!(1u64 << 20);
        v["sync_eta_seconds"] = json!(6);
        let text = entry("md_x", &v);
        let line = text.lines().nth(2).expect("a progress line");
        assert_eq!(line, "      [=====>...............]  recovery = 25.0% (2048/8192) finish=0.1min speed=1024K/sec");
        v["sync_action"] = json!("check");
        assert!(entry("md_x", &v).contains("]  check = 25.0% "));
    }

    #[test]
    fn the_whole_file_lists_levels_once_and_ends_with_unused_devices() {
        let a = raid5(["in_sync"; 4]);
        let mut b = raid5(["in_sync"; 4]);
        b["level"] = json!("raid1");
        let c = raid5(["in_sync"; 4]);
        let text = mdstat(&[("md_a".into(), a), ("md_b".into(), b), ("md_c".into(), c)]);
        assert!(text.starts_with("Personalities : [raid1] [raid5] \nmd_a : active raid5 "), "{text}");
        assert!(text.contains("\n\nmd_b : active raid1 "), "{text}");
        assert!(text.ends_with("[UUUU]\n\nunused devices: <none>\n"), "{text}");
        assert_eq!(mdstat(&[]), "Personalities : \nunused devices: <none>\n");
    }

    #[test]
    fn ctl_status_adds_state_limits_and_last_pass() {
        let mut v = raid5(["in_sync"; 4]);
        v["speed_limit_min"] = json!(1u64 << 20);
        v["speed_limit_max"] = json!(200u64 << 20);
        v["last_sync"] = json!("check completed");
        v["mismatch_cnt"] = json!(8);
        let text = ctl_status(&v);
        assert!(text.starts_with("0a1b2c3d:00000000:00000000:00000001 : active raid5 "), "{text}");
        assert!(text.ends_with(
            "      state: clean\n      speed limits: min=1024K/sec max=204800K/sec\n      last pass: check completed; mismatch_cnt 8\n"
        ), "{text}");
    }
}
