//! Shared helpers for the fixture tests: member images, superblock lookup, mdadm output.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::Mutex;

use uraid_md_format::{MetadataVersion, Superblock};
use uraid_testkit::FixtureCase;

/// The whole image of member `index`, or `None` for a missing member.
///
/// The testkit decompresses into a file named after the process, so two threads of one test
/// binary must not decompress at the same time: the lock serializes them.
pub fn member_bytes(case: &FixtureCase, index: usize) -> Option<Vec<u8>> {
    static DECOMPRESS: Mutex<()> = Mutex::new(());
    let path = {
        let _guard = DECOMPRESS.lock().unwrap_or_else(|e| e.into_inner());
        case.member_image(index)?
    };
    Some(fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display())))
}

/// Find the superblock of an image by trying every version's location.
pub fn find_superblock(image: &[u8]) -> Option<Superblock> {
    let size = image.len() as u64;
    Superblock::find(size, |offset, len| -> Result<Vec<u8>, std::convert::Infallible> {
        let start = offset as usize;
        Ok(image[start..(start + len).min(image.len())].to_vec())
    })
    .unwrap_or_else(|e| panic!("superblock lookup failed: {e}"))
}

/// The raw superblock bytes (4 KiB or what is left) at `version`'s location.
pub fn raw_superblock(image: &[u8], version: MetadataVersion) -> &[u8] {
    let off = version.superblock_offset(image.len() as u64).expect("location") as usize;
    &image[off..(off + 4096).min(image.len())]
}

/// `key : value` lines of each `### diskN.img` section of an mdadm output file, by N.
/// Only the first occurrence of a key in a section is kept.
pub fn mdadm_sections(path: &Path) -> HashMap<usize, HashMap<String, String>> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut out: HashMap<usize, HashMap<String, String>> = HashMap::new();
    let mut current: Option<usize> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("### disk") {
            let num: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            current = num.parse().ok();
            continue;
        }
        let Some(disk) = current else { continue };
        if let Some((k, v)) = line.split_once(" : ") {
            out.entry(disk).or_default().entry(k.trim().to_string()).or_insert_with(|| v.trim().to_string());
        }
    }
    out
}

/// The leading unsigned number of a value ("6144 sectors (3.00 MiB)" -> 6144).
pub fn leading_number(v: &str) -> u64 {
    let digits: String = v.trim().chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().unwrap_or_else(|_| panic!("no number in {v:?}"))
}

/// md level number of a sysfs level name.
pub fn level_number(name: &str) -> i32 {
    match name {
        "linear" => -1,
        "multipath" => -4,
        "faulty" => -5,
        other => other.strip_prefix("raid").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("level {other}")),
    }
}

/// Bytes of an mdadm `human_chunksize` value ("64 MB").
pub fn chunksize_bytes(v: &str) -> u64 {
    let mut it = v.split_whitespace();
    let n: u64 = it.next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("chunksize {v:?}"));
    let unit = match it.next().unwrap_or("B") {
        "B" => 1,
        "KB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        other => panic!("unit {other}"),
    };
    n * unit
}
