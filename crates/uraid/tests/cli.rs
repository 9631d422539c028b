//! The real binary, as a user runs it: create arrays of every level and layout in temporary files,
//! write and read them back (healthy and degraded), and every kind of bad input: each must fail
//! with one clear line naming the file and the problem, and must leave the members unchanged.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use uraid_testkit::sha256_hex;

mod common;
use common::{uraid, uraid_stdin};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn members(dir: &Path, n: usize, size: u64) -> Vec<String> {
    (0..n)
        .map(|i| {
            let p = dir.join(format!("d{i}.img"));
            let f = std::fs::File::create(&p).unwrap();
            f.set_len(size).unwrap();
            p.display().to_string()
        })
        .collect()
}

fn hashes(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| sha256_hex(&std::fs::read(p).unwrap())).collect()
}

fn args<'a>(head: &[&'a str], tail: &'a [String]) -> Vec<&'a str> {
    head.iter().copied().chain(tail.iter().map(String::as_str)).collect()
}

fn data(len: usize, seed: u64) -> Vec<u8> {
    uraid_testkit::noise(seed, len)
}

fn detail(paths: &[String]) -> Value {
    let o = uraid(&args(&["detail", "--json"], paths));
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Create, write at unaligned offsets, read back; then remove members within redundancy and
/// read again, write degraded, and read again.
#[test]
fn create_write_read_every_level() {
    let combos: &[(&str, &[&str], usize)] = &[
        ("linear", &["--level=linear"], 3),
        ("raid0", &["--level=0", "--chunk=16K"], 3),
        ("raid1", &["--level=1"], 3),
        ("raid4", &["--level=4", "--chunk=16K"], 4),
        ("raid5-ls", &["--level=5", "--chunk=16K"], 4),
        ("raid5-la", &["--level=5", "--chunk=16K", "--layout=la"], 4),
        ("raid5-ra", &["--level=5", "--chunk=16K", "--layout=right-asymmetric"], 3),
        ("raid5-rs", &["--level=5", "--chunk=16K", "--layout=rs"], 5),
        ("raid5-pf", &["--level=5", "--chunk=16K", "--layout=parity-first"], 4),
        ("raid5-pl", &["--level=5", "--chunk=16K", "--layout=parity-last"], 4),
        ("raid6-ls", &["--level=6", "--chunk=16K"], 5),
        ("raid6-la", &["--level=6", "--chunk=16K", "--layout=left-asymmetric"], 6),
        ("raid6-ls6", &["--level=6", "--chunk=16K", "--layout=left-symmetric-6"], 5),
        ("raid6-pf6", &["--level=6", "--chunk=16K", "--layout=parity-first-6"], 4),
        ("raid10-n2", &["--level=10", "--chunk=16K"], 4),
        ("raid10-n2-odd", &["--level=10", "--chunk=16K", "--layout=n2"], 3),
        ("raid10-f2", &["--level=10", "--chunk=16K", "--layout=f2"], 5),
        ("raid10-o2", &["--level=10", "--chunk=16K", "--layout=o2"], 4),
        ("raid5-1.0-bitmap", &["--level=5", "--chunk=16K", "--metadata=1.0", "--bitmap=internal"], 4),
        ("raid1-1.1", &["--level=1", "--metadata=1.1"], 2),
    ];
    for (name, flags, n) in combos {
        let dir = tempfile::tempdir().unwrap();
        let m = members(dir.path(), *n, 3 << 20);
        let mut a: Vec<&str> = vec!["create", "--raid-devices"];
        let nstr = n.to_string();
        a.push(&nstr);
        a.extend_from_slice(flags);
        let o = uraid(&args(&a, &m));
        assert!(o.status.success(), "{name}: create: {}", stderr(&o));
        let d = detail(&m);
        assert_eq!(d["state"], "clean", "{name}");
        let size = d["array_size_bytes"].as_u64().unwrap() as usize;
        let mut model = vec![0u8; size];
        let write = |m: &[String], off: usize, len: usize, seed: u64, model: &mut Vec<u8>| {
            let bytes = data(len, seed);
            let o = uraid_stdin(&args(&["write", &format!("--offset={off}")], m), &bytes);
            assert!(o.status.success(), "{name}: write {off}+{len}: {}", stderr(&o));
            model[off..off + len].copy_from_slice(&bytes);
        };
        write(&m, 0, size, 1, &mut model);
        write(&m, 12345, 70001, 2, &mut model);
        write(&m, size - 513, 513, 3, &mut model);
        let o = uraid(&args(&["cat"], &m));
        assert!(o.status.success() && o.stdout == model, "{name}: read back differs");
        let o = uraid(&args(&["cat", "--offset=12000", "--length=1000"], &m));
        assert_eq!(o.stdout, model[12000..13000], "{name}: partial cat");

        // Degraded: take away the last member if the level allows.
        if !name.starts_with("linear") && !name.starts_with("raid0") {
            let rest = &m[..n - 1];
            let o = uraid(&args(&["cat"], rest));
            assert!(o.status.success() && o.stdout == model, "{name}: degraded read differs: {}", stderr(&o));
            write(rest, 4096 * 3 + 7, 50_000, 4, &mut model);
            let o = uraid(&args(&["cat"], rest));
            assert!(o.stdout == model, "{name}: degraded write then read differs");
            // The missing member is now stale: given back, it must be left out.
            let d = detail(&m);
            assert_eq!(d["degraded"], true, "{name}: stale member must not be taken back");
            let o = uraid(&args(&["cat"], &m));
            assert!(o.stdout == model, "{name}: stale member was used for reading");
        }
    }
}

#[test]
fn create_output_and_examine_text() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 4, 8 << 20);
    let o = uraid(&args(&["create", "--level=5", "--raid-devices=4", "--chunk=64K", "--name=web"], &m));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Raid Level : raid5"), "{out}");
    assert!(out.contains("left-symmetric"), "{out}");
    let o = uraid(&args(&["examine"], &m[..1]));
    let text = String::from_utf8_lossy(&o.stdout);
    for want in [
        "Version : 1.2",
        "Raid Level : raid5",
        "Chunk Size : 64K",
        "Device Role : Active device 0",
        "Array State : AAAA",
        "State : clean",
    ] {
        assert!(text.contains(want), "examine lacks {want:?}:\n{text}");
    }
    // Fresh truncate -s files stay sparse: the initial sync writes only what disagrees.
    use std::os::unix::fs::MetadataExt;
    let blocks = std::fs::metadata(&m[0]).unwrap().blocks();
    assert!(blocks * 512 < 2 << 20, "member was filled by the initial sync ({} bytes allocated)", blocks * 512);
}

#[test]
fn initial_sync_makes_garbage_members_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 5, 3 << 20);
    for (i, p) in m.iter().enumerate() {
        std::fs::write(p, data(3 << 20, 100 + i as u64)).unwrap();
    }
    let o = uraid(&args(&["create", "--level=6", "--raid-devices=5", "--chunk=16K"], &m));
    assert!(o.status.success(), "{}", stderr(&o));
    let full = uraid(&args(&["cat"], &m)).stdout;
    // Any two members lost: the same contents, so parity was made consistent.
    for (a, b) in [(0, 1), (2, 4), (1, 3)] {
        let rest: Vec<String> =
            m.iter().enumerate().filter(|(i, _)| *i != a && *i != b).map(|(_, p)| p.clone()).collect();
        assert!(uraid(&args(&["cat"], &rest)).stdout == full, "raid6 without {a},{b} differs after initial sync");
    }
}

/// The line `mdadm --examine` printed for member 0 of an oracle PPL sample (see
/// crates/md/format/tests/data/ppl/README.md).
fn mdadm_examine_line(case: &str, key: &str) -> String {
    let path =
        uraid_testkit::workspace_root().join("crates/md/format/tests/data/ppl").join(case).join("mdadm/examine.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .find(|l| l.trim_start().starts_with(&format!("{key} : ")))
        .unwrap_or_else(|| panic!("{}: no {key} line", path.display()))
        .to_string()
}

/// `--consistency-policy=ppl` on each 1.x version: mdadm's PPL placement (the same `PPL` line
/// mdadm 4.2 printed for its own array of this shape), an empty PPL header at the start of every
/// member's area, and a working array.
#[test]
fn create_with_ppl_examine_and_detail_show_it() {
    for (metadata, n, case) in
        [("1.0", 3, "raid5-3-ppl-1.0"), ("1.1", 4, "raid5-4-ppl-1.1"), ("1.2", 4, "raid5-4-ppl-1.2")]
    {
        let dir = tempfile::tempdir().unwrap();
        let m = members(dir.path(), n, 24 << 20);
        let meta = format!("--metadata={metadata}");
        let raid_devices = format!("--raid-devices={n}");
        let o =
            uraid(&args(&["create", "--level=5", &raid_devices, "--chunk=64K", &meta, "--consistency-policy=ppl"], &m));
        assert!(o.status.success(), "{metadata}: {}", stderr(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("Consistency Policy : ppl"), "{metadata}: create output");

        let o = uraid(&args(&["examine"], &m));
        assert!(o.status.success(), "{}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        let ppl_line = mdadm_examine_line(case, "PPL");
        assert_eq!(
            text.lines().filter(|l| *l == ppl_line).count(),
            n,
            "{metadata}: examine lacks mdadm's {ppl_line:?}:\n{text}"
        );
        for want in ["Feature Map : 0x400", "Consistency Policy : ppl", &mdadm_examine_line(case, "Bad Block Log")] {
            assert!(text.contains(want.trim_start()), "{metadata}: examine lacks {want:?}:\n{text}");
        }
        assert!(!text.contains("Internal Bitmap"), "{metadata}: {text}");
        let json: Value = serde_json::from_slice(&uraid(&args(&["examine", "--json"], &m[..1])).stdout).unwrap();
        assert_eq!(json[0]["consistency_policy"], "ppl");
        assert_eq!(json[0]["ppl_size_sectors"], 2048);

        let d = detail(&m);
        assert_eq!(d["consistency_policy"], "ppl", "{metadata}");
        let o = uraid(&args(&["detail"], &m));
        assert!(String::from_utf8_lossy(&o.stdout).contains("Consistency Policy : ppl"), "{metadata}: detail text");

        // Every member's PPL area (at the same place: the members are the same size) starts
        // with a valid header signed with the array UUID.
        let sector =
            json[0]["super_offset_sectors"].as_i64().unwrap() + json[0]["ppl_offset_sectors"].as_i64().unwrap();
        let uuid = uraid_md_format::uuid::parse_md(d["array_uuid"].as_str().unwrap()).unwrap();
        for (i, path) in m.iter().enumerate() {
            let image = std::fs::read(path).unwrap();
            let header = uraid_md_format::ppl::PplHeader::parse(&image[sector as usize * 512..]).expect("PPL header");
            assert_eq!(header.signature, uraid_md_format::ppl::signature(&uuid), "{metadata} member {i}");
        }

        // And it is an array: what is written reads back.
        let payload = data(300_000, 7);
        let o = uraid_stdin(&args(&["write", "--offset=12345"], &m), &payload);
        assert!(o.status.success(), "{metadata}: {}", stderr(&o));
        let o = uraid(&args(&["cat", "--offset=12345", "--length=300000"], &m));
        assert!(o.stdout == payload, "{metadata}: read back differs");
    }
}

#[test]
fn consistency_policy_bitmap_and_resync() {
    let dir = tempfile::tempdir().unwrap();
    for (flags, policy, bitmap) in [
        (&["--consistency-policy=bitmap"][..], "bitmap", true),
        (&["--bitmap=internal", "--consistency-policy=bitmap"][..], "bitmap", true),
        (&["--bitmap=internal"][..], "bitmap", true),
        (&["--consistency-policy=resync"][..], "resync", false),
        (&[][..], "resync", false),
    ] {
        let m = members(dir.path(), 2, 8 << 20);
        let mut a = vec!["create", "--level=1", "--raid-devices=2", "--force"];
        a.extend_from_slice(flags);
        let o = uraid(&args(&a, &m));
        assert!(o.status.success(), "{flags:?}: {}", stderr(&o));
        let text = String::from_utf8_lossy(&uraid(&args(&["examine"], &m[..1])).stdout).into_owned();
        assert!(text.contains(&format!("Consistency Policy : {policy}")), "{flags:?}:\n{text}");
        assert_eq!(text.contains("Internal Bitmap : 8 sectors from superblock"), bitmap, "{flags:?}:\n{text}");
        assert!(!text.contains("PPL"), "{flags:?}:\n{text}");
        assert_eq!(detail(&m)["consistency_policy"], policy, "{flags:?}");
    }
    // Linear and raid0 have nothing to keep consistent: mdadm says "none".
    let m = members(dir.path(), 2, 8 << 20);
    assert!(uraid(&args(&["create", "--level=0", "--raid-devices=2", "--force"], &m)).status.success());
    assert_eq!(detail(&m)["consistency_policy"], "none");
}

/// Refused combinations: one line naming the conflict, non-zero exit, members untouched.
#[test]
fn conflicting_consistency_policies_are_refused_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 4, 24 << 20);
    let before = hashes(&m);
    let refused: &[(&[&str], &str)] = &[
        (&["--level=5", "--consistency-policy=ppl", "--bitmap=internal"], "not compatible"),
        (&["--level=5", "--consistency-policy=resync", "--bitmap=internal"], "not compatible"),
        (&["--level=1", "--consistency-policy=ppl"], "needs raid4, raid5 or raid6"),
        (&["--level=10", "--consistency-policy=ppl"], "needs raid4, raid5 or raid6"),
        (&["--level=5", "--consistency-policy=ppl", "--metadata=0.90"], "1.x metadata"),
        (&["--level=0", "--consistency-policy=resync"], "not meaningful"),
        (&["--level=5", "--consistency-policy=journal"], "expected resync, bitmap or ppl"),
        (&["--level=5", "--consistency-policy=ppl", "--bitmap-chunk=1M"], "--bitmap-chunk needs"),
    ];
    for (flags, needle) in refused {
        let mut a = vec!["create", "--raid-devices=4"];
        a.extend_from_slice(flags);
        assert_fails(&uraid(&args(&a, &m)), needle);
        assert_eq!(hashes(&m), before, "{flags:?} wrote to a member");
    }
    // raid4 and raid6 take a PPL too (uraid's own extension; md runs PPL on raid5 only).
    for level in ["--level=4", "--level=6"] {
        let o = uraid(&args(&["create", level, "--raid-devices=4", "--consistency-policy=ppl", "--force"], &m));
        assert!(o.status.success(), "{level}: {}", stderr(&o));
        assert_eq!(detail(&m)["consistency_policy"], "ppl", "{level}");
    }
}

// ----- bad input ---------------------------------------------------------------------------------

fn assert_fails(o: &Output, needle: &str) {
    assert!(!o.status.success(), "expected failure containing {needle:?}");
    let e = stderr(o);
    assert!(e.contains(needle), "error {e:?} lacks {needle:?}");
    assert_eq!(e.trim_end().lines().count(), 1, "error should be one line: {e:?}");
}

#[test]
fn member_too_small_is_refused_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = members(dir.path(), 3, 4 << 20);
    let tiny = dir.path().join("tiny.img");
    std::fs::File::create(&tiny).unwrap().set_len(64 * 1024).unwrap();
    m[2] = tiny.display().to_string();
    let before = hashes(&m);
    let o = uraid(&args(&["create", "--level=5", "--raid-devices=3"], &m));
    assert_fails(&o, "tiny.img");
    assert_eq!(hashes(&m), before, "a refused create wrote to a member");
}

#[test]
fn existing_superblock_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 2, 4 << 20);
    assert!(uraid(&args(&["create", "--level=1", "--raid-devices=2"], &m)).status.success());
    let before = hashes(&m);
    let o = uraid(&args(&["create", "--level=1", "--raid-devices=2"], &m));
    assert_fails(&o, "already holds an md");
    assert!(stderr(&o).contains("d0.img"));
    assert_eq!(hashes(&m), before);
    let o = uraid(&args(&["create", "--level=1", "--raid-devices=2", "--force"], &m));
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn bad_level_layout_and_chunk_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 3, 4 << 20);
    let before = hashes(&m);
    assert_fails(&uraid(&args(&["create", "--level=7", "--raid-devices=3"], &m)), "7");
    assert_fails(&uraid(&args(&["create", "--level=5", "--raid-devices=3", "--layout=diagonal"], &m)), "diagonal");
    assert_fails(&uraid(&args(&["create", "--level=5", "--raid-devices=3", "--chunk=12K"], &m)), "power of two");
    assert_fails(&uraid(&args(&["create", "--level=10", "--raid-devices=3", "--layout=n4"], &m)), "");
    assert_fails(&uraid(&args(&["create", "--level=6", "--raid-devices=3"], &m)), "at least 4");
    assert_fails(&uraid(&args(&["create", "--level=5", "--raid-devices=4"], &m)), "You haven't given enough devices");
    assert_fails(&uraid(&args(&["create", "--level=5", "--raid-devices=3", "--metadata=2.0"], &m)), "2.0");
    assert_eq!(hashes(&m), before);
    // raid0 takes a non-power-of-two chunk, as md does.
    assert!(uraid(&args(&["create", "--level=0", "--raid-devices=3", "--chunk=12K"], &m)).status.success());
}

#[test]
fn zeroed_truncated_and_corrupt_members() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 3, 4 << 20);
    assert!(uraid(&args(&["create", "--level=5", "--raid-devices=3", "--chunk=64K"], &m)).status.success());
    // Zeroed image.
    let zero = dir.path().join("zero.img");
    std::fs::File::create(&zero).unwrap().set_len(4 << 20).unwrap();
    let z = zero.display().to_string();
    assert_fails(&uraid(&["examine", &z]), "zero.img: no md superblock");
    assert_fails(&uraid(&["cat", &m[0], &m[1], &z]), "zero.img: no md superblock");
    // Truncated image: cut below the data area.
    let cut = dir.path().join("cut.img");
    std::fs::copy(&m[2], &cut).unwrap();
    std::fs::OpenOptions::new().write(true).open(&cut).unwrap().set_len(2 << 20).unwrap();
    let c = cut.display().to_string();
    assert_fails(&uraid(&["cat", &m[0], &m[1], &c]), "cut.img");
    // Bad checksum: flip a byte inside the superblock (1.2: at 4096).
    let bad = dir.path().join("bad.img");
    std::fs::copy(&m[1], &bad).unwrap();
    let mut bytes = std::fs::read(&bad).unwrap();
    bytes[4096 + 100] ^= 0x40;
    std::fs::write(&bad, &bytes).unwrap();
    let b = bad.display().to_string();
    let o = uraid(&["examine", &b]);
    assert_fails(&o, "bad.img");
    assert!(stderr(&o).contains("checksum"), "{}", stderr(&o));
    let before = hashes(&[m[0].clone(), b.clone(), m[2].clone()]);
    assert_fails(&uraid_stdin(&["write", "--offset=0", &m[0], &b, &m[2]], b"hello"), "checksum");
    assert_eq!(hashes(&[m[0].clone(), b, m[2].clone()]), before, "refused write touched a member");
}

#[test]
fn mixed_arrays_and_too_few_members() {
    let dir = tempfile::tempdir().unwrap();
    let a = members(&dir.path().join("a").tap_mkdir(), 3, 4 << 20);
    let b = members(&dir.path().join("b").tap_mkdir(), 3, 4 << 20);
    assert!(uraid(&args(&["create", "--level=5", "--raid-devices=3"], &a)).status.success());
    assert!(uraid(&args(&["create", "--level=5", "--raid-devices=3"], &b)).status.success());
    let o = uraid(&["cat", &a[0], &a[1], &b[2]]);
    assert_fails(&o, "two different arrays");
    assert!(stderr(&o).contains("a/d0.img") && stderr(&o).contains("b/d2.img"), "{}", stderr(&o));
    let o = uraid(&["cat", &a[0]]);
    assert_fails(&o, "too few members");
    let before = hashes(&a);
    assert_fails(&uraid_stdin(&["write", "--offset=0", &a[0]], b"x"), "too few members");
    assert_eq!(hashes(&a), before);
}

#[test]
fn out_of_range_io_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 2, 4 << 20);
    assert!(uraid(&args(&["create", "--level=1", "--raid-devices=2"], &m)).status.success());
    let size = detail(&m)["array_size_bytes"].as_u64().unwrap();
    let before = hashes(&m);
    let o = uraid_stdin(&args(&["write", &format!("--offset={}", size - 10)], &m), &[7u8; 11]);
    assert_fails(&o, "larger than the 10 bytes left");
    assert_eq!(hashes(&m), before);
    assert_fails(&uraid(&args(&["cat", &format!("--offset={size}"), "--length=1"], &m)), "outside the array");
    assert_fails(&uraid(&["examine", "/nonexistent/x.img"]), "/nonexistent/x.img");
}

/// An unclean stop leaves the array dirty; a dirty parity array that is also degraded is refused,
/// as md refuses it, while a whole one is still readable.
#[test]
fn dirty_degraded_parity_array_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 4, 4 << 20);
    assert!(uraid(&args(&["create", "--level=5", "--raid-devices=4", "--chunk=64K"], &m)).status.success());
    mark_dirty(&m);
    let d = detail(&m);
    assert_eq!(d["clean"], false);
    assert!(uraid(&args(&["cat", "--length=4096"], &m)).status.success());
    let before = hashes(&m[..3]);
    assert_fails(&uraid(&args(&["cat", "--length=4096"], &m[..3])), "not shut down cleanly");
    assert_fails(&uraid_stdin(&args(&["write", "--offset=0"], &m[..3]), b"x"), "not shut down cleanly");
    assert_eq!(hashes(&m[..3]), before);
}

/// Change the 1.2 superblock (at byte 4096) of each of `m` with `edit`, then recompute its
/// checksum, as a tool editing it in place would.
fn edit_superblocks(m: &[String], edit: impl Fn(&mut [u8])) {
    for p in m {
        let mut b = std::fs::read(p).unwrap();
        let sb = &mut b[4096..4096 + 512];
        edit(sb);
        sb[216..220].copy_from_slice(&[0; 4]);
        let max_dev = u32::from_le_bytes(sb[220..224].try_into().unwrap()) as usize;
        let mut sum: u64 = 0;
        for w in sb[..256 + 2 * max_dev].chunks(4) {
            sum += u64::from(u32::from_le_bytes(w.try_into().unwrap()));
        }
        let csum = ((sum & 0xffff_ffff) + (sum >> 32)) as u32;
        sb[216..220].copy_from_slice(&csum.to_le_bytes());
        std::fs::write(p, &b).unwrap();
    }
}

/// Mark every superblock dirty the way an interrupted write leaves it: resync_offset = 0 (at
/// +208 in the superblock).
fn mark_dirty(m: &[String]) {
    edit_superblocks(m, |sb| sb[208..216].copy_from_slice(&0u64.to_le_bytes()));
}

/// Members whose partial parity logs do not fit together are refused by every command, naming
/// the member and the reason, and nothing is written: one member without a log while the others
/// have one (a log area md would not have made), and log areas too small to hold any partial
/// parity.
#[test]
fn inconsistent_or_too_small_partial_parity_logs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 4, 8 << 20);
    let o = uraid(&args(&["create", "--level=5", "--raid-devices=4", "--chunk=64K", "--consistency-policy=ppl"], &m));
    assert!(o.status.success(), "{}", stderr(&o));
    // feature_map at +8: MD_FEATURE_PPL is 0x400.
    edit_superblocks(&m[2..3], |sb| {
        let f = u32::from_le_bytes(sb[8..12].try_into().unwrap()) & !0x400;
        sb[8..12].copy_from_slice(&f.to_le_bytes());
    });
    let before = hashes(&m);
    for cmd in [&["cat", "--length=4096"][..], &["detail"][..]] {
        assert_fails(&uraid(&args(cmd, &m)), "has no partial parity log while other members of the array have one");
    }
    assert_fails(&uraid_stdin(&args(&["write", "--offset=0"], &m), b"x"), "has no partial parity log");
    assert_eq!(hashes(&m), before, "a refused command wrote to a member");

    let m = members(&dir.path().join("small").tap_mkdir(), 4, 8 << 20);
    let o = uraid(&args(&["create", "--level=5", "--raid-devices=4", "--chunk=64K", "--consistency-policy=ppl"], &m));
    assert!(o.status.success(), "{}", stderr(&o));
    // The PPL size (in sectors) at +98: 8 sectors hold the header and nothing after it.
    edit_superblocks(&m, |sb| sb[98..100].copy_from_slice(&8u16.to_le_bytes()));
    let before = hashes(&m);
    assert_fails(&uraid_stdin(&args(&["write", "--offset=0"], &m), b"x"), "holds no partial parity");
    assert_fails(&uraid(&args(&["cat", "--length=4096"], &m)), "holds no partial parity");
    assert_eq!(hashes(&m), before, "a refused command wrote to a member");
}

/// A dirty degraded raid5 with a log, opened read-only, is described but not read: without the
/// replay (which writes), the missing member's rebuilt data could be wrong.
#[test]
fn dirty_degraded_ppl_array_is_not_read_without_its_replay() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 4, 8 << 20);
    let o = uraid(&args(&["create", "--level=5", "--raid-devices=4", "--chunk=64K", "--consistency-policy=ppl"], &m));
    assert!(o.status.success(), "{}", stderr(&o));
    let payload = data(200_000, 5);
    assert!(uraid_stdin(&args(&["write", "--offset=0"], &m), &payload).status.success());
    mark_dirty(&m);
    let present = [m[0].clone(), m[1].clone(), m[3].clone()];
    let before = hashes(&present);
    let d = detail(&present);
    assert_eq!(d["clean"], false, "{d:#}");
    assert_fails(&uraid(&args(&["cat", "--length=4096"], &present)), "its partial parity log must be replayed");
    assert_eq!(hashes(&present), before, "a read-only command wrote to a member");
    // Opened writable, the log is replayed and the array reads.
    assert!(uraid_stdin(&args(&["write", "--offset=0"], &present), &payload[..4096]).status.success());
    let o = uraid(&args(&["cat", "--length=200000"], &present));
    assert!(o.status.success() && o.stdout == payload, "{}", stderr(&o));
}

/// A raid5 with a log, stopped dirty with a member gone, whose latest log write was cut short
/// (its entry fails the partial-parity checksum, so the stripe it names was never written). The
/// array opens, the replay counts the entry as unusable, and no resync is left owed: short of a
/// member, a raid5 has no redundancy left to disagree (md's resync skips it too). It is marked
/// clean at the next stop and reads what was written.
#[test]
fn dirty_degraded_ppl_array_with_a_torn_log_write_owes_no_resync() {
    use uraid_md_format::ppl::{PplEntry, PplHeader};
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 4, 8 << 20);
    let o = uraid(&args(&["create", "--level=5", "--raid-devices=4", "--chunk=64K", "--consistency-policy=ppl"], &m));
    assert!(o.status.success(), "{}", stderr(&o));
    let payload = data(300_000, 11);
    assert!(uraid_stdin(&args(&["write", "--offset=0"], &m), &payload).status.success());
    mark_dirty(&m);
    // Stripe 0 of the default left-symmetric raid5 keeps its parity (and so its log) on slot 3.
    let json: Value = serde_json::from_slice(&uraid(&args(&["examine", "--json"], &m[3..])).stdout).unwrap();
    let log_at = (json[0]["super_offset_sectors"].as_i64().unwrap() + json[0]["ppl_offset_sectors"].as_i64().unwrap())
        as usize
        * 512;
    let uuid = uraid_md_format::uuid::parse_md(detail(&m)["array_uuid"].as_str().unwrap()).unwrap();
    let entry = PplEntry { data_sector: 0, pp_size: 4096, data_size: 4096, parity_disk: 3, checksum: 0x0bad_0bad };
    let header = PplHeader { signature: uraid_md_format::ppl::signature(&uuid), generation: 1, entries: vec![entry] };
    let mut image = std::fs::read(&m[3]).unwrap();
    image[log_at..log_at + 4096].copy_from_slice(&header.to_bytes());
    image[log_at + 4096..log_at + 8192].copy_from_slice(&data(4096, 12));
    std::fs::write(&m[3], &image).unwrap();

    let present = [m[0].clone(), m[1].clone(), m[3].clone()];
    assert_eq!(detail(&present)["clean"], false);
    let o = uraid_stdin(&args(&["write", "--offset=0"], &present), &payload[..4096]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stderr(&o);
    assert!(said.contains(", 1 unusable"), "{said}");
    assert!(said.contains("no resync is owed"), "{said}");
    assert!(!said.contains("until a resync"), "{said}");
    assert_eq!(detail(&present)["clean"], true, "{said}");
    let o = uraid(&args(&["cat", "--length=300000"], &present));
    assert!(o.status.success() && o.stdout == payload, "{}", stderr(&o));
}

trait TapMkdir {
    fn tap_mkdir(self) -> PathBuf;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> PathBuf {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

/// `--read-policy` on serve, mount and bench engine: an unknown name is refused with the valid
/// names before any member is touched, and the help says it is a run-time choice.
#[test]
fn unknown_read_policy_is_refused_with_the_valid_names() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 2, 4 << 20);
    assert!(uraid(&args(&["create", "--level=1", "--raid-devices=2"], &m)).status.success());
    let before = hashes(&m);
    let mount_point = dir.path().join("array").display().to_string();
    let mut mount_args = m.clone();
    mount_args.push(mount_point.clone());
    for (head, tail) in [
        (&["serve", "--read-policy", "fastest"][..], &m),
        (&["mount", "--read-policy", "fastest"][..], &mount_args),
        (&["bench", "engine", "--read-policy", "fastest"][..], &m),
    ] {
        let o = uraid(&args(head, tail));
        assert!(!o.status.success(), "{head:?} accepted an unknown policy");
        assert_ne!(o.status.code(), Some(0));
        let e = stderr(&o);
        assert!(e.contains("fastest") && e.contains("md, round-robin, shortest-queue, split"), "{head:?}: {e}");
        assert!(o.stdout.is_empty(), "{head:?} printed {:?}", String::from_utf8_lossy(&o.stdout));
    }
    assert_eq!(hashes(&m), before, "a refused command wrote to a member");
    assert!(!Path::new(&mount_point).exists(), "a refused mount created its file");
    for cmd in [&["serve", "--help"][..], &["mount", "--help"], &["bench", "engine", "--help"]] {
        let o = uraid(cmd);
        let help = String::from_utf8_lossy(&o.stdout);
        assert!(help.contains("--read-policy") && help.contains("superblock"), "{cmd:?}: {help}");
    }
}

/// Every read policy reads back what was written, through `bench engine`'s service and the
/// parallel streams it drives.
#[test]
fn every_read_policy_runs_bench_engine_on_a_mirror() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 2, 8 << 20);
    assert!(uraid(&args(&["create", "--level=1", "--raid-devices=2"], &m)).status.success());
    for policy in ["md", "round-robin", "shortest-queue", "split", "md-1998", "md-2006"] {
        let o = uraid(&args(
            &[
                "bench",
                "engine",
                "--json",
                "--pattern",
                "read",
                "--bs",
                "128K",
                "--iodepth",
                "4",
                "--streams",
                "2",
                "--seconds",
                "0.2",
                "--read-policy",
                policy,
            ],
            &m,
        ));
        assert!(o.status.success(), "{policy}: {}", stderr(&o));
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["read_policy"], policy, "{r}");
        assert_eq!(r["streams"], 2, "{r}");
        assert!(r["mbps"].as_f64().unwrap() > 0.0, "{r}");
    }
    let o = uraid(&args(&["bench", "engine", "--pattern", "randread", "--streams", "2"], &m));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--streams=2"), "{}", stderr(&o));
}

/// `split`'s knobs: taken with `--read-policy=split` (the bench reports what ran), refused with
/// another policy (they would do nothing) and below 8K, before any member is touched.
#[test]
fn split_tuning_flags_apply_to_split_only() {
    let dir = tempfile::tempdir().unwrap();
    let m = members(dir.path(), 2, 8 << 20);
    assert!(uraid(&args(&["create", "--level=1", "--raid-devices=2"], &m)).status.success());
    let bench = ["bench", "engine", "--json", "--pattern", "read", "--bs", "64K", "--iodepth", "2", "--seconds", "0.2"];
    let o = uraid(&args(
        &[
            &bench[..],
            &["--read-policy", "split", "--split-window", "256K", "--split-readahead", "0", "--split-divide", "1M"],
        ]
        .concat(),
        &m,
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (r["split_window"].as_u64(), r["split_readahead"].as_u64(), r["split_divide"].as_u64()),
        (Some(256 << 10), Some(0), Some(1 << 20)),
        "{r}"
    );
    let o = uraid(&args(&[&bench[..], &["--read-policy", "split"]].concat(), &m));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (r["split_window"].as_u64(), r["split_readahead"].as_u64(), r["split_divide"].as_u64()),
        (Some(4 << 20), Some(64 << 20), Some(512 << 10)),
        "defaults: {r}"
    );
    let before = hashes(&m);
    let sock = dir.path().join("s.sock");
    let listen = format!("--listen=unix:{}", sock.display());
    for (head, want) in [
        (vec!["bench", "engine", "--split-window", "1M"], "--split-window applies to --read-policy=split only"),
        (
            vec!["serve", listen.as_str(), "--read-policy", "md", "--split-divide", "1M"],
            "--split-divide applies to --read-policy=split only",
        ),
        (vec!["bench", "engine", "--read-policy", "split", "--split-window", "4K"], "at least 8K"),
    ] {
        let o = uraid(&args(&head, &m));
        assert!(!o.status.success(), "{head:?} accepted");
        assert!(stderr(&o).contains(want), "{head:?}: {}", stderr(&o));
    }
    assert!(!sock.exists(), "a refused serve bound its socket");
    assert_eq!(hashes(&m), before, "a refused command wrote to a member");
}
