//! Arrays to restripe: blank members, an array over some of them filled with known bytes, and
//! what a check pass and the members' bytes say afterwards.

use std::path::Path;

use serde_json::Value;

use super::{detail, ok, text, uraid_stdin, with};

/// Blank member files `d0.img`.. of `bytes` each.
pub fn blank_members(dir: &Path, count: usize, bytes: u64) -> Vec<String> {
    (0..count)
        .map(|i| {
            let p = dir.join(format!("d{i}.img"));
            std::fs::File::create(&p).unwrap().set_len(bytes).unwrap();
            p.display().to_string()
        })
        .collect()
}

/// An array made with `create_args` (level, member count, chunk, layout, ...) over `members`,
/// filled with bytes that differ from sector to sector (returned).
pub fn filled_with(create_args: &[&str], members: &[String]) -> Vec<u8> {
    let mut args = vec!["create", "--name=grown"];
    args.extend_from_slice(create_args);
    ok(&with(&args, members));
    let size = detail(members)["array_size_bytes"].as_u64().unwrap();
    let data: Vec<u8> = (0..size).map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 29) as u8).collect();
    let w = uraid_stdin(&with(&["write", "--offset=0"], members), &data);
    assert!(w.status.success(), "{}", text(&w));
    data
}

/// The `mismatch_cnt` line of a check pass over `members`.
pub fn mismatch_cnt(members: &[String]) -> String {
    let o = ok(&with(&["check"], members));
    let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    all.lines()
        .find(|l| l.starts_with("mismatch_cnt"))
        .unwrap_or_else(|| panic!("no mismatch_cnt in {all}"))
        .to_string()
}

/// The reshape position the superblock of `member` records, if a reshape is in progress.
pub fn reshape_position(member: &str) -> Option<u64> {
    let v: Value = serde_json::from_slice(&ok(&["examine", "--json", member]).stdout).ok()?;
    v[0]["reshape"]["position_sectors"].as_u64()
}
