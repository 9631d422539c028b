//! NetBSD RAIDframe sets through the engine, the real binary on component files:
//!
//! - sets NetBSD's own driver made (`crates/raidframe/format/tests/data`: clean, killed while
//!   configured, with a failed column, with a hot spare in use) read byte for byte as the
//!   driver wrote them, without a byte of any component changing;
//! - sets labelled with the format crate are written with `uraid write` and read back with
//!   `uraid cat`, every byte where RAIDframe's mapping (the format crate's, not the engine's
//!   layout) puts it; a component left out of a write is found stale afterwards and the set
//!   reads degraded; labels carry the mod_counter and clean flag NetBSD would write;
//! - sets that cannot run are refused with what is wrong, nothing written.

use std::path::{Path, PathBuf};
use std::process::Output;

use tempfile::TempDir;
use uraid_raidframe_format::label::{ComponentLabel, PMLABEL_VALID, PMLABEL_WASUSED, RAID_CLEAN};
use uraid_raidframe_format::layout::{self, ParityMap};
use uraid_raidframe_format::mapping::{Geometry, Level};
use uraid_testkit::scratch_dir;

mod common;
use common::{uraid, uraid_stdin};

const SECTOR: usize = 512;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn ok(o: Output) -> Vec<u8> {
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(&o));
    o.stdout
}

#[track_caller]
fn refused(o: Output) -> String {
    assert!(!o.status.success(), "expected a refusal, got success: {}", stderr(&o));
    stderr(&o)
}

fn paths(files: &[PathBuf]) -> Vec<&str> {
    files.iter().map(|p| p.to_str().unwrap()).collect()
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../raidframe/format/tests/data")
}

/// `NAME.cI.sparse` expanded into a component file in `dir` (the format of `pack_sparse.py`).
fn expand(name: &str, index: usize, dir: &Path) -> PathBuf {
    let raw = std::fs::read(data_dir().join(format!("{name}.c{index}.sparse"))).unwrap();
    assert_eq!(&raw[..8], b"RFSPARSE");
    let u64_at = |o: usize| u64::from_le_bytes(raw[o..o + 8].try_into().unwrap());
    let mut image = vec![0u8; u64_at(8) as usize];
    let mut at = 24;
    for _ in 0..u64_at(16) {
        let sector = u64_at(at) as usize;
        image[sector * SECTOR..(sector + 1) * SECTOR].copy_from_slice(&raw[at + 8..at + 8 + SECTOR]);
        at += 8 + SECTOR;
    }
    let path = dir.join(format!("{name}.c{index}.img"));
    std::fs::write(&path, image).unwrap();
    path
}

/// RAID sector `n` of the pattern written to set `tag` (`tests/data/pattern.py`).
fn pattern_sector(tag: &str, n: u64) -> Vec<u8> {
    let mut record = format!("{tag} s{n:07}");
    while record.len() < 15 {
        record.push(' ');
    }
    record.push('\n');
    record.repeat(32).into_bytes()
}

/// Every set the driver made, with its components and the pattern bytes written to it (0:
/// zeros were written).
const NETBSD_SETS: [(&str, usize, u64); 9] = [
    ("raid0", 2, 65536),
    ("raid1", 2, 32768),
    ("raid4", 3, 24576),
    ("raid5", 3, 49152),
    ("dirty5", 3, 32768),
    ("fail5", 3, 16384),
    ("new5", 3, 16384),
    ("regions5", 3, 0),
    ("spare5", 4, 16384),
];

#[test]
fn sets_netbsds_driver_made_read_byte_for_byte() {
    let tmp = TempDir::new_in(scratch_dir("raidframe")).unwrap();
    for (name, components, written) in NETBSD_SETS {
        let files: Vec<PathBuf> = (0..components).map(|i| expand(name, i, tmp.path())).collect();
        let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
        let out = uraid(&[&["cat"], paths(&files).as_slice()].concat());
        let data = ok(out);
        let mut want: Vec<u8> = (0..written / SECTOR as u64).flat_map(|n| pattern_sector(name, n)).collect();
        want.resize(data.len(), 0);
        assert!(data == want, "{name}: the set does not read as the driver wrote it");
        // 1 MiB components hold 1984 data sectors (whole stripe units at every sectPerSU used
        // here), dirty5's 16 MiB ones 32704; RAID 1 over two keeps one copy of data.
        let per_component: u64 = if name == "dirty5" { 32704 } else { 1984 };
        let data_columns: u64 = if name == "raid1" { 1 } else { 2 };
        assert_eq!(data.len() as u64, per_component * data_columns * SECTOR as u64, "{name}");
        for (f, b) in files.iter().zip(&before) {
            assert!(std::fs::read(f).unwrap() == *b, "{name}: reading changed {}", f.display());
        }
    }
}

#[test]
fn what_netbsd_left_behind_is_told() {
    let tmp = TempDir::new_in(scratch_dir("raidframe")).unwrap();
    let fail: Vec<PathBuf> = (0..3).map(|i| expand("fail5", i, tmp.path())).collect();
    let out = uraid(&[&["detail", "--json"], paths(&fail).as_slice()].concat());
    let v: serde_json::Value = serde_json::from_slice(&ok(out)).unwrap();
    assert_eq!(v["serial_number"], 1007);
    assert_eq!(v["mod_counter"], 20);
    assert_eq!(v["columns"][1]["state"], "failed");
    assert!(v["left_out"][0].as_str().unwrap().contains("column 1 is stale (mod_counter 13"), "{v}");
    let dirty: Vec<PathBuf> = (0..3).map(|i| expand("dirty5", i, tmp.path())).collect();
    let out = uraid(&[&["detail", "--json"], paths(&dirty).as_slice()].concat());
    let v: serde_json::Value = serde_json::from_slice(&ok(out)).unwrap();
    assert_eq!(v["parity_clean"], false, "clean labels, but region 0 of the map is dirty");
    let text = String::from_utf8(ok(uraid(&["examine", fail[0].to_str().unwrap()]))).unwrap();
    assert!(text.contains("Version: 2, Serial Number: 1007, Mod Counter: 20\n   Clean: Yes, Status: 0\n"), "{text}");
    assert!(text.contains("   RAID Level: 5\n"), "{text}");
}

/// Components of a set labelled with the format crate, zero-filled (parity of zeros is zero),
/// parity maps clean: what `raidctl -C`, `-I 4242` and `-iv` leave.
fn make_set(dir: &Path, name: &str, level: Level, columns: u32, sect_per_su: u64, sectors: u64) -> Vec<PathBuf> {
    let num_blocks = layout::usable_sectors(sectors).unwrap();
    let redundant = level != Level::Raid0;
    (0..columns)
        .map(|column| {
            let mut image = vec![0u8; sectors as usize * SECTOR];
            let label = ComponentLabel {
                serial_number: 4242,
                mod_counter: 15,
                column: column as i32,
                num_columns: columns as i32,
                clean: RAID_CLEAN,
                sect_per_su: sect_per_su as i32,
                parity_config: level.as_char() as i32,
                max_outstanding: 100,
                block_size: SECTOR as i32,
                num_blocks,
                partition_size: sectors,
                parity_map_modcount: 15,
                parity_map_flags: if redundant { PMLABEL_VALID | PMLABEL_WASUSED } else { 0 },
                parity_map_tickms: if redundant { layout::DEFAULT_TICKMS } else { 0 },
                parity_map_ntick: if redundant { layout::DEFAULT_COOLDOWN } else { 0 },
                parity_map_regions: if redundant { 1 } else { 0 },
                ..ComponentLabel::default()
            };
            let at = layout::LABEL_OFFSET as usize;
            image[at..at + 1024].copy_from_slice(&label.to_area(1024));
            let map_at = layout::parity_map_offset(512) as usize;
            image[map_at..map_at + 512].copy_from_slice(&ParityMap::clean().to_area(512));
            let path = dir.join(format!("{name}.c{column}.img"));
            std::fs::write(&path, image).unwrap();
            path
        })
        .collect()
}

fn label_of(path: &Path) -> ComponentLabel {
    let bytes = std::fs::read(path).unwrap();
    ComponentLabel::parse(&bytes[layout::LABEL_OFFSET as usize..]).unwrap()
}

fn map_of(path: &Path) -> ParityMap {
    let bytes = std::fs::read(path).unwrap();
    ParityMap::parse(&bytes[layout::parity_map_offset(512) as usize..][..512]).unwrap()
}

/// Bytes that differ from sector to sector and from run to run of a test.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Every sector of `data` written at RAID sector `first` sits where RAIDframe's mapping puts
/// it, and its mirror copy too.
#[track_caller]
fn assert_placed(files: &[PathBuf], g: &Geometry, first: u64, data: &[u8]) {
    let images: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    for (i, want) in data.chunks(SECTOR).enumerate() {
        let m = g.map(first + i as u64).unwrap();
        let mut places = vec![m.data];
        if g.level == Level::Raid1 {
            places.push(m.redundancy.unwrap());
        }
        for at in places {
            let off = layout::component_byte_offset(at.sector, 512) as usize;
            assert!(images[at.column as usize][off..off + SECTOR] == *want, "{g:?}: RAID sector {}", first + i as u64);
        }
    }
}

#[test]
fn sets_are_written_where_raidframe_maps_them_and_labelled_as_netbsd_labels_them() {
    let tmp = TempDir::new_in(scratch_dir("raidframe")).unwrap();
    for (name, level, columns, su) in [
        ("r0", Level::Raid0, 3, 16),
        ("r1", Level::Raid1, 4, 8),
        ("r4", Level::Raid4, 4, 32),
        ("r5", Level::Raid5, 5, 32),
    ] {
        let files = make_set(tmp.path(), name, level, columns, su, 2600);
        let g = Geometry::new(level, columns, su, 2536).unwrap();
        let data = noise(300 * SECTOR, columns.into());
        ok(uraid_stdin(&[&["write", "--offset", "7680"], paths(&files).as_slice()].concat(), &data));
        let back = ok(uraid(&[&["cat", "--offset", "7680", "--length", "153600"], paths(&files).as_slice()].concat()));
        assert!(back == data, "{name}: read back differs");
        assert_placed(&files, &g, 15, &data);
        for f in &files {
            let l = label_of(f);
            if level == Level::Raid0 {
                // Nothing a crash could leave disagreeing: no label update around writes.
                assert_eq!((l.mod_counter, l.clean), (15, RAID_CLEAN), "{name}");
            } else {
                // Dirty before the first write (15 + 1), clean at the close (+ 1).
                assert_eq!((l.mod_counter, l.parity_map_modcount, l.clean), (17, 17, RAID_CLEAN), "{name}");
                assert_eq!(map_of(f), ParityMap::clean(), "{name}");
            }
        }
        if level != Level::Raid0 {
            // Parity (or the mirror) agrees with the data everywhere.
            let images: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
            for stripe in 0..g.stripe_units_per_disk() * su {
                let off = layout::component_byte_offset(stripe, 512) as usize;
                let sectors: Vec<&[u8]> = images.iter().map(|i| &i[off..off + SECTOR]).collect();
                let ok_stripe = match level {
                    Level::Raid1 => (0..columns as usize / 2).all(|p| sectors[2 * p] == sectors[2 * p + 1]),
                    _ => (0..SECTOR).all(|b| sectors.iter().fold(0u8, |x, s| x ^ s[b]) == 0),
                };
                assert!(ok_stripe, "{name}: component sector {stripe} disagrees");
            }
        }
    }
}

#[test]
fn a_component_left_out_of_a_write_is_stale_and_the_set_reads_degraded() {
    let tmp = TempDir::new_in(scratch_dir("raidframe")).unwrap();
    let files = make_set(tmp.path(), "d5", Level::Raid5, 3, 16, 1088);
    let data = noise(200 * SECTOR, 99);
    ok(uraid_stdin(&[&["write", "--offset", "0"], paths(&files).as_slice()].concat(), &data));
    // Column 1 is gone for the next write: the others move on without it.
    let without: Vec<PathBuf> = vec![files[0].clone(), files[2].clone()];
    let second = noise(64 * SECTOR, 7);
    let out = uraid_stdin(&[&["write", "--offset", "16384"], paths(&without).as_slice()].concat(), &second);
    ok(out);
    let counters: Vec<i32> = files.iter().map(|f| label_of(f).mod_counter).collect();
    assert_eq!(counters, vec![19, 17, 19], "the failed column keeps its counter, the survivors move on");
    let before = std::fs::read(&files[1]).unwrap();
    let out = uraid(&[&["cat", "--length", "102400"], paths(&files).as_slice()].concat());
    let err = stderr(&out);
    let mut want = data.clone();
    want[16384..16384 + second.len()].copy_from_slice(&second);
    assert!(ok(out) == want, "the degraded set reads what was written");
    assert!(err.contains("column 1 is stale (mod_counter 17, the set's is 19)"), "{err}");
    assert!(err.contains("degraded: column(s) 1 failed"), "{err}");
    // Written again with the stale component given: it is still left out, never written.
    ok(uraid_stdin(&[&["write", "--offset", "0"], paths(&files).as_slice()].concat(), &second));
    assert!(std::fs::read(&files[1]).unwrap() == before, "the stale component was written");
    assert_eq!(label_of(&files[0]).mod_counter, 21);
}

#[test]
fn a_config_file_names_the_components_as_raidctl_c_takes_them() {
    let tmp = TempDir::new_in(scratch_dir("raidframe")).unwrap();
    let files = make_set(tmp.path(), "c1", Level::Raid1, 2, 8, 1088);
    let conf = tmp.path().join("raid.conf");
    let disks: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let text = format!(
        "START array\n1 2 0\n\nSTART disks\n{}\n\nSTART layout\n8 1 1 1\n\nSTART queue\nfifo 100\n",
        disks.join("\n")
    );
    std::fs::write(&conf, &text).unwrap();
    let data = noise(40 * SECTOR, 3);
    let c = conf.to_str().unwrap();
    ok(uraid_stdin(&["write", "--raidframe", c, "--offset", "512"], &data));
    assert!(ok(uraid(&["cat", "--raidframe", c, "--offset", "512", "--length", "20480"])) == data);
    // A column the file marks absent runs degraded.
    std::fs::write(&conf, text.replace(&disks[0], "absent")).unwrap();
    assert!(ok(uraid(&["cat", "--raidframe", c, "--offset", "512", "--length", "20480"])) == data);
    // A file whose layout disagrees with the labels is refused, nothing written.
    std::fs::write(&conf, text.replace("8 1 1 1", "16 1 1 1")).unwrap();
    let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let err = refused(uraid_stdin(&["write", "--raidframe", c, "--offset", "0"], &data));
    assert!(err.contains("the configuration file says sectPerSU 16, but the label of column 0 says 8"), "{err}");
    assert!(files.iter().zip(&before).all(|(f, b)| std::fs::read(f).unwrap() == *b));
}

#[test]
fn sets_that_cannot_run_are_refused_and_not_written() {
    let tmp = TempDir::new_in(scratch_dir("raidframe")).unwrap();
    let files = make_set(tmp.path(), "x5", Level::Raid5, 3, 16, 1088);
    let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let err = refused(uraid_stdin(&["write", "--offset", "0", files[0].to_str().unwrap()], b"data"));
    assert!(err.contains("column(s) 1, 2 have no fresh component"), "{err}");
    // A component of another set (another serial number) is not taken into this one.
    let other = make_set(tmp.path(), "y1", Level::Raid1, 2, 8, 1088);
    let mixed = vec![files[0].clone(), files[1].clone(), other[0].clone()];
    let err = refused(uraid_stdin(&[&["write", "--offset", "0"], paths(&mixed).as_slice()].concat(), b"data"));
    assert!(err.contains("2 RAIDframe sets share serial number 4242"), "{err}");
    assert!(files.iter().zip(&before).all(|(f, b)| std::fs::read(f).unwrap() == *b));
}

/// A label whose modification counter runs far ahead of the others' (a component from the
/// future): NetBSD takes the freshest counter as the set's and the others as stale, so a RAID 5
/// is left one fresh column and cannot be configured. Refused, nothing written.
#[test]
fn a_label_from_the_future_outvotes_the_others_and_nothing_is_written() {
    let tmp = TempDir::new_in(scratch_dir("raidframe")).unwrap();
    let files = make_set(tmp.path(), "f5", Level::Raid5, 3, 16, 1088);
    let mut label = label_of(&files[0]);
    label.mod_counter = 1_000_000;
    label.parity_map_modcount = 1_000_000;
    let mut image = std::fs::read(&files[0]).unwrap();
    let at = layout::LABEL_OFFSET as usize;
    image[at..at + 1024].copy_from_slice(&label.to_area(1024));
    std::fs::write(&files[0], image).unwrap();
    let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let err = refused(uraid_stdin(&[&["write", "--offset", "0"], paths(&files).as_slice()].concat(), b"data"));
    assert!(err.contains("mod_counter 15, the set's is 1000000"), "{err}");
    assert!(files.iter().zip(&before).all(|(f, b)| std::fs::read(f).unwrap() == *b), "nothing written");
}

/// A component the configuration file names but that cannot be opened fails its column, as
/// `raidctl -c` fails it: the set runs degraded, and says which and why.
#[test]
fn a_component_that_cannot_be_opened_fails_its_column() {
    let tmp = TempDir::new_in(scratch_dir("raidframe")).unwrap();
    let files = make_set(tmp.path(), "u5", Level::Raid5, 3, 16, 1088);
    let data = noise(64 * SECTOR, 9);
    let conf = tmp.path().join("raid.conf");
    let disks: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let text = format!(
        "START array\n1 3 0\nSTART disks\n{}\nSTART layout\n16 1 1 5\nSTART queue\nfifo 100\n",
        disks.join("\n")
    );
    std::fs::write(&conf, &text).unwrap();
    let c = conf.to_str().unwrap();
    ok(uraid_stdin(&["write", "--raidframe", c, "--offset", "0"], &data));
    let gone = tmp.path().join("gone.img");
    std::fs::write(&conf, text.replace(&disks[1], gone.to_str().unwrap())).unwrap();
    let out = uraid(&["cat", "--raidframe", c, "--offset", "0", "--length", &data.len().to_string()]);
    let said = stderr(&out);
    assert!(ok(out) == data, "read degraded, rebuilt from parity");
    assert!(said.contains("gone.img") && said.contains("No such file"), "{said}");
}
