//! `uraid zero-superblock` (mdadm --zero-superblock) through the real binary: every md
//! superblock on a device is erased and nothing else; a device without one, or with a damaged
//! one (unless --force), is refused and nothing at all is written.

use std::path::Path;

use uraid_testkit::sha256_hex;

mod common;
use common::{ok, uraid};

fn files(dir: &Path, names: &[&str], bytes: u64) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            let p = dir.join(n);
            std::fs::File::create(&p).unwrap().set_len(bytes).unwrap();
            p.display().to_string()
        })
        .collect()
}

fn has_superblock(path: &str) -> bool {
    uraid(&["examine", path]).status.success()
}

/// A device that carries a 1.2 superblock and the leftover 0.90 superblock of an older array
/// loses both, and not one other byte.
#[test]
fn every_superblock_is_erased_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let m = files(tmp.path(), &["a.img", "b.img", "c.img", "d.img"], 8 << 20);
    ok(&["create", "-e0.90", "-l1", "-n2", &m[2], &m[3]]);
    ok(&["create", "-l1", "-n2", "--bitmap=internal", &m[0], &m[1]]);

    let old = std::fs::read(&m[2]).unwrap();
    let mut a = std::fs::read(&m[0]).unwrap();
    // c's 0.90 superblock, 64 KiB from the end of an 8 MiB device, goes on a beside its own.
    let at090 = (8 << 20) - (64 << 10);
    a[at090..at090 + 4096].copy_from_slice(&old[at090..at090 + 4096]);
    std::fs::write(&m[0], &a).unwrap();

    let o = ok(&["zero-superblock", &m[0], &m[1]]);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("erased the md 0.90 superblock") && said.contains("erased the md 1.2 superblock at byte 4096"),
        "{said}"
    );
    assert!(!has_superblock(&m[0]) && !has_superblock(&m[1]));
    // Only the superblocks' bytes changed: the 1.2 one's first sector, the 0.90 one's 4 KiB
    // (the bitmap after the 1.2 superblock is still there).
    let after = std::fs::read(&m[0]).unwrap();
    let mut want = a.clone();
    want[4096..4096 + 512].fill(0);
    want[at090..at090 + 4096].fill(0);
    assert!(after == want, "bytes other than the superblocks changed");
    assert_eq!(&after[8192..8196], &0x6d74_6962u32.to_le_bytes(), "bitmap header kept");
    // The devices are free now: create needs no --force.
    ok(&["create", "-l1", "-n2", &m[0], &m[1]]);
}

#[test]
fn refusals_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let m = files(tmp.path(), &["a.img", "b.img", "plain.img"], 8 << 20);
    ok(&["create", "-l1", "-n2", &m[0], &m[1]]);
    let hashes = || m.iter().map(|p| sha256_hex(&std::fs::read(p).unwrap())).collect::<Vec<_>>();
    let before = hashes();

    // A device with no superblock among others: refused, nobody touched.
    let o = uraid(&["zero-superblock", &m[0], &m[2], &m[1]]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("plain.img: Unrecognised md component device") && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(hashes(), before);

    // A damaged superblock: named and refused unless --force.
    let mut b = std::fs::read(&m[1]).unwrap();
    b[4096 + 40] ^= 0x20; // a byte of the name: only the checksum sees it
    std::fs::write(&m[1], &b).unwrap();
    let damaged = hashes();
    let o = uraid(&["zero-superblock", &m[0], &m[1]]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("b.img: the md 1.2 superblock at byte 4096 is damaged") && err.contains("--force"), "{err}");
    assert_eq!(hashes(), damaged);
    ok(&["zero-superblock", "--force", &m[0], &m[1]]);
    assert!(!has_superblock(&m[0]) && !has_superblock(&m[1]));
    assert_eq!(std::fs::read(&m[1]).unwrap()[4096..4096 + 512], [0u8; 512]);

    // Two refusals: each named, then a summary.
    let o = uraid(&["zero-superblock", &m[0], &m[2]]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("a.img: Unrecognised") && err.contains("plain.img: Unrecognised"), "{err}");
    assert!(err.contains("2 of 2 devices refused; nothing was written"), "{err}");
    let o = uraid(&["zero-superblock", "/nonexistent/x.img"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("/nonexistent/x.img"));
}
