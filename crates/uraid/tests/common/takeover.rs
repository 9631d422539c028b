//! Arrays for the takeover tests: made, filled, described, and their members' bytes.

use std::path::Path;

use super::{detail, image, ok, text, uraid_stdin, with};

/// `count` blank 16 MiB member images in `dir`, named `d0.img`, `d1.img`, ...
pub fn disks(dir: &Path, count: usize) -> Vec<String> {
    (0..count).map(|i| image(dir, &format!("d{i}.img"), 16 << 20)).collect()
}

/// Create an array over `members` with `flags` (`missing` allowed among them), and fill the
/// whole of it with a pattern of its own; the pattern.
pub fn created_and_filled(flags: &[&str], members: &[String]) -> Vec<u8> {
    ok(&with(&[&["create", "--name=t"][..], flags].concat(), members));
    let present: Vec<String> = members.iter().filter(|m| *m != "missing").cloned().collect();
    let size = detail(&present)["array_size_bytes"].as_u64().unwrap();
    let data: Vec<u8> = (0..size).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8 ^ (i >> 20) as u8).collect();
    let w = uraid_stdin(&with(&["write", "--offset=0"], &present), &data);
    assert!(w.status.success(), "{}", text(&w));
    data
}

/// The first `len` bytes `uraid cat` reads from `members`.
pub fn read(members: &[String], len: usize) -> Vec<u8> {
    let mut out = ok(&with(&["cat"], members)).stdout;
    assert!(out.len() >= len, "the array holds {} bytes, fewer than {len}", out.len());
    out.truncate(len);
    out
}

/// Each member's state as `detail` says it, in slot order ("active", "rebuilding", ...).
pub fn states(members: &[String]) -> Vec<String> {
    let d = detail(members);
    let mut found: Vec<(u64, String)> = d["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| Some((m["slot"].as_u64()?, m["state"].as_str()?.to_string())))
        .collect();
    found.sort();
    found.into_iter().map(|(_, s)| s).collect()
}

/// `uraid check` of `members` finds no mismatch.
pub fn checks_clean(members: &[String]) {
    let out = ok(&with(&["check"], members));
    assert!(String::from_utf8_lossy(&out.stdout).contains("mismatch_cnt 0"), "{}", text(&out));
}
