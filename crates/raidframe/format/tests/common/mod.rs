//! Shared helpers: the saved component images (tests/data/README.md) and the test pattern.

#![allow(dead_code)]

use std::path::PathBuf;

pub const SECTOR: usize = 512;

pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// Expands `NAME.cI.sparse` into the full component image.
pub fn component(name: &str, index: usize) -> Vec<u8> {
    let path = data_dir().join(format!("{name}.c{index}.sparse"));
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&raw[..8], b"RFSPARSE", "{}", path.display());
    let u64_at = |o: usize| u64::from_le_bytes(raw[o..o + 8].try_into().unwrap());
    let len = u64_at(8) as usize;
    let count = u64_at(16) as usize;
    let mut image = vec![0u8; len];
    let mut at = 24;
    for _ in 0..count {
        let sector = u64_at(at) as usize;
        image[sector * SECTOR..(sector + 1) * SECTOR].copy_from_slice(&raw[at + 8..at + 8 + SECTOR]);
        at += 8 + SECTOR;
    }
    assert_eq!(at, raw.len(), "{}", path.display());
    image
}

/// All components of a saved set.
pub fn set(name: &str) -> Vec<Vec<u8>> {
    let columns = match name {
        "raid0" | "raid1" => 2,
        "spare5" => 4, // three columns and the hot spare that replaced column 1
        _ => 3,
    };
    (0..columns).map(|i| component(name, i)).collect()
}

pub fn text(file: &str) -> String {
    std::fs::read_to_string(data_dir().join(file)).unwrap()
}

/// RAID sector `n` of the pattern written to set `tag` (tests/data/pattern.py).
pub fn pattern_sector(tag: &str, n: u64) -> Vec<u8> {
    let mut record = format!("{tag} s{n:07}");
    while record.len() < 15 {
        record.push(' ');
    }
    record.push('\n');
    assert_eq!(record.len(), 16);
    record.repeat(32).into_bytes()
}

/// Saved sets without the pattern (zeros were written).
pub const ZERO_SETS: [&str; 1] = ["regions5"];

/// Saved sets with a hot spare (the last image).
pub const SPARE_SETS: [&str; 1] = ["spare5"];

/// The saved sets with the pattern, and how many bytes of it each had written.
pub const SETS: [(&str, u64); 7] = [
    ("raid0", 65536),
    ("raid1", 32768),
    ("raid4", 24576),
    ("raid5", 49152),
    ("dirty5", 32768),
    ("fail5", 16384),
    ("new5", 16384),
];
