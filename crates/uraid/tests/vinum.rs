//! `uraid vinum`, the real binary on drive files: the Vinum paper's and gvinum.8's examples
//! created, listed in gvinum's formats, printed and created again from the print; the bytes on
//! the drives checked against gvinum's format; saveconfig and resetconfig; and bad input, each
//! refused with a clear message and no drive written, block devices with 4096-byte sectors too
//! (that test needs root and util-linux's losetup, for its loop devices).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use tempfile::TempDir;
use uraid_testkit::{scratch_dir, NewMdArray};

mod common;
use common::{uraid, uraid_stdin};

const MIB: u64 = 1 << 20;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn ok(o: Output) -> String {
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(&o));
    stdout(&o)
}

fn scratch() -> TempDir {
    tempfile::tempdir_in(scratch_dir("vinum")).unwrap()
}

/// Sparse drive files `<name>.img` of `size` bytes.
fn drive_files(dir: &Path, names: &[&str], size: u64) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            let p = dir.join(format!("{n}.img"));
            std::fs::File::create(&p).unwrap().set_len(size).unwrap();
            p.display().to_string()
        })
        .collect()
}

/// `drive NAME device PATH` lines.
fn drive_lines(names: &[&str], paths: &[String]) -> String {
    names.iter().zip(paths).map(|(n, p)| format!("drive {n} device {p}\n")).collect()
}

fn with(head: &[&str], tail: &[String]) -> Vec<String> {
    head.iter().map(|s| s.to_string()).chain(tail.iter().cloned()).collect()
}

fn run(args: &[String]) -> Output {
    uraid(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn create(dir: &Path, description: &str, extra: &[String]) -> Output {
    let file = dir.join("create.conf");
    std::fs::write(&file, description).unwrap();
    run(&with(&["vinum", "create", &file.display().to_string()], extra))
}

/// The metadata area of each drive (the first 135680 bytes).
fn metadata(paths: &[String]) -> Vec<Vec<u8>> {
    paths
        .iter()
        .map(|p| {
            let mut bytes = std::fs::read(p).unwrap();
            bytes.truncate(135_680);
            bytes
        })
        .collect()
}

/// The configuration text of one copy (1 or 2) of a drive's metadata.
fn copy_text(meta: &[u8], copy: usize) -> String {
    let area = &meta[4608 + (copy - 1) * 65536..4608 + copy * 65536];
    let end = area.iter().position(|&b| b == 0).expect("a NUL ends the text");
    assert!(area[end..].iter().all(|&b| b == 0), "zeros after the text");
    String::from_utf8(area[..end].to_vec()).unwrap()
}

/// Check what gvinum's save leaves on every drive: nothing before the header, the header's
/// magic at 4096, both copies holding `text`, and one last_update on all.
#[track_caller]
fn assert_saved(paths: &[String], text: &str) {
    let metas = metadata(paths);
    let stamp = &metas[0][4096 + 96..4096 + 112];
    assert_ne!(stamp, [0u8; 16]);
    for (meta, path) in metas.iter().zip(paths) {
        assert!(meta[..4096].iter().all(|&b| b == 0), "{path}: bytes before the header");
        assert_eq!(&meta[4096..4104], b"VINUM-1\0", "{path}: magic");
        assert_eq!(u64::from_be_bytes(meta[4104..4112].try_into().unwrap()), 65536, "{path}: config_length");
        assert!(meta[4096 + 120..4608].iter().all(|&b| b == 0), "{path}: header padding");
        assert_eq!(copy_text(meta, 1), text, "{path}: copy 1");
        assert_eq!(copy_text(meta, 2), text, "{path}: copy 2");
        assert_eq!(&meta[4096 + 96..4096 + 112], stamp, "{path}: one last_update on every drive");
    }
}

fn drive_name(meta: &[u8]) -> String {
    let field = &meta[4096 + 48..4096 + 80];
    String::from_utf8(field[..field.iter().position(|&b| b == 0).unwrap()].to_vec()).unwrap()
}

/// The Vinum paper's first raid10 example, "one disk per subdisk", one object per line as the
/// paper sets it.
const PAPER_EIGHT_DISKS: &str = "volume raid10
  plex org striped 512k
    sd length 102480k drive a
    sd length 102480k drive b
    sd length 102480k drive c
    sd length 102480k drive d
  plex org striped 512k
    sd length 102480k drive e
    sd length 102480k drive f
    sd length 102480k drive g
    sd length 102480k drive h
";

/// The paper's second example, "both plexes on the same disks".
const PAPER_FOUR_DISKS: &str = "volume raid10
  plex org striped 512k
    sd length 102480k drive a
    sd length 102480k drive b
    sd length 102480k drive c
    sd length 102480k drive d
  plex org striped 512k
    sd length 102480k drive c
    sd length 102480k drive d
    sd length 102480k drive a
    sd length 102480k drive b
";

/// What the kernel saves for the four-disk example: the new objects, latest first.
const PAPER_FOUR_DISKS_ON_DISK: &str = "volume raid10 state up
plex name raid10.p1 org striped 1024s vol raid10 state up
plex name raid10.p0 org striped 1024s vol raid10 state up
sd name raid10.p1.s3 drive b len 204800s driveoffset 205065s plex raid10.p1 plexoffset 3072s state up
sd name raid10.p1.s2 drive a len 204800s driveoffset 205065s plex raid10.p1 plexoffset 2048s state up
sd name raid10.p1.s1 drive d len 204800s driveoffset 205065s plex raid10.p1 plexoffset 1024s state up
sd name raid10.p1.s0 drive c len 204800s driveoffset 205065s plex raid10.p1 plexoffset 0s state up
sd name raid10.p0.s3 drive d len 204800s driveoffset 265s plex raid10.p0 plexoffset 3072s state up
sd name raid10.p0.s2 drive c len 204800s driveoffset 265s plex raid10.p0 plexoffset 2048s state up
sd name raid10.p0.s1 drive b len 204800s driveoffset 265s plex raid10.p0 plexoffset 1024s state up
sd name raid10.p0.s0 drive a len 204800s driveoffset 265s plex raid10.p0 plexoffset 0s state up
";

#[test]
fn the_papers_raid10_on_eight_disks() {
    let dir = scratch();
    let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let paths = drive_files(dir.path(), &names, 112 * MIB);
    ok(create(dir.path(), &(drive_lines(&names, &paths) + PAPER_EIGHT_DISKS), &[]));
    // 102480k is 200 stripes of 512k and 80k more: every subdisk is cut to 200 stripes.
    let mut text = "volume raid10 state up\n\
        plex name raid10.p1 org striped 1024s vol raid10 state up\n\
        plex name raid10.p0 org striped 1024s vol raid10 state up\n"
        .to_string();
    for (plex, drives) in [(1, ["e", "f", "g", "h"]), (0, ["a", "b", "c", "d"])] {
        for column in (0..4).rev() {
            text += &format!(
                "sd name raid10.p{plex}.s{column} drive {} len 204800s driveoffset 265s plex raid10.p{plex} \
                 plexoffset {}s state up\n",
                drives[column],
                column * 1024
            );
        }
    }
    assert_saved(&paths, &text);
    let metas = metadata(&paths);
    for (meta, name) in metas.iter().zip(names) {
        assert_eq!(drive_name(meta), name);
    }
    // The data area is the volume's: untouched.
    let a = std::fs::read(&paths[0]).unwrap();
    assert!(a[135_680..].iter().all(|&b| b == 0));

    let listing = ok(run(&with(&["vinum", "list"], &paths)));
    let expected_drives: String = names
        .iter()
        .zip(&paths)
        .map(|(n, p)| format!("D {n}                     State: up\t{p}\tA: 11/111 MB (10%)\n"))
        .collect();
    let expected = format!(
        "8 drives:\n{expected_drives}\n\
         1 volume:\n\
         V raid10                State: up\tPlexes:       2\tSize:        400 MB\n\n\
         2 plexes:\n\
         P raid10.p0           S State: up\tSubdisks:     4\tSize:        400 MB\n\
         P raid10.p1           S State: up\tSubdisks:     4\tSize:        400 MB\n\n\
         8 subdisks:\n{}",
        (0..2)
            .flat_map(|plex| (0..4).map(move |column| (plex, column)))
            .map(|(plex, column)| format!(
                "S raid10.p{plex}.s{column}          State: up\tD: {:<12} Size:        100 MB\n",
                names[plex * 4 + column]
            ))
            .collect::<String>()
    );
    assert_eq!(listing, expected);
}

#[test]
fn the_papers_raid10_on_four_disks_and_its_listings() {
    let dir = scratch();
    let names = ["a", "b", "c", "d"];
    let paths = drive_files(dir.path(), &names, 216 * MIB);
    ok(create(dir.path(), &(drive_lines(&names, &paths) + PAPER_FOUR_DISKS), &[]));
    assert_saved(&paths, PAPER_FOUR_DISKS_ON_DISK);
    let lv = ok(run(&with(&["vinum", "lv", "-r"], &paths)));
    assert_eq!(
        lv,
        "1 volume:\n\
         V raid10                State: up\tPlexes:       2\tSize:        400 MB\n\
         P raid10.p0           S State: up\tSubdisks:     4\tSize:        400 MB\n\
         S raid10.p0.s0          State: up\tD: a            Size:        100 MB\n\
         S raid10.p0.s1          State: up\tD: b            Size:        100 MB\n\
         S raid10.p0.s2          State: up\tD: c            Size:        100 MB\n\
         S raid10.p0.s3          State: up\tD: d            Size:        100 MB\n\
         P raid10.p1           S State: up\tSubdisks:     4\tSize:        400 MB\n\
         S raid10.p1.s0          State: up\tD: c            Size:        100 MB\n\
         S raid10.p1.s1          State: up\tD: d            Size:        100 MB\n\
         S raid10.p1.s2          State: up\tD: a            Size:        100 MB\n\
         S raid10.p1.s3          State: up\tD: b            Size:        100 MB\n"
    );
    // Drive a holds a subdisk of each plex, the second right after the first.
    let ld = ok(run(&with(&["vinum", "ld", "-r", "a"], &paths)));
    assert_eq!(
        ld,
        format!(
            "D a                     State: up\t{}\tA: 15/215 MB (7%)\n\
             S raid10.p0.s0          State: up\tD: a            Size:        100 MB\n\
             S raid10.p1.s2          State: up\tD: a            Size:        100 MB\n",
            paths[0]
        )
    );
    let ls = ok(run(&with(&["vinum", "ls", "-v", "raid10.p1.s2"], &paths)));
    assert_eq!(
        ls,
        "Subdisk raid10.p1.s2:\n\
         \t\tSize:        104857600 bytes (100 MB)\n\
         \t\tState: up\n\
         \t\tPlex raid10.p1 at offset 1048576 (1024 kB)\n\
         \t\tDrive a (a) at offset 104993280 (100 MB)\n\
         \t\tFlags: 4\n"
    );
    let lp = ok(run(&with(&["vinum", "lp", "-v", "raid10.p0"], &paths)));
    assert_eq!(
        lp,
        "Plex raid10.p0:\tSize:\t419430400 bytes (400 MB)\n\
         \t\tSubdisks:        4\n\
         \t\tState: up\n\
         \t\tOrganization: striped\tStripe size: 512 kB\n\
         \t\tFlags: 0\n\
         \t\tPart of volume raid10\n"
    );
    let json: Value = serde_json::from_str(&ok(run(&with(&["vinum", "list", "--json"], &paths)))).unwrap();
    assert_eq!(json["volumes"][0]["size"], 400 * MIB);
    assert_eq!(
        json["plexes"][1]["subdisks"],
        serde_json::json!(["raid10.p1.s0", "raid10.p1.s1", "raid10.p1.s2", "raid10.p1.s3"])
    );
    assert_eq!(json["drives"][0]["subdisks"], serde_json::json!(["raid10.p0.s0", "raid10.p1.s2"]));
    assert_eq!(json["subdisks"][4]["drive_offset"], 205_065 * 512);
    // Names that are not of the kind asked for, or of none, print nothing.
    let o = run(&with(&["vinum", "ld", "raid10"], &paths));
    assert!(!o.status.success() && o.stdout.is_empty());
    assert!(stderr(&o).contains("can't get configuration: 'raid10' is not a drive"), "{}", stderr(&o));
    let o = run(&with(&["vinum", "list", "raid10", "nosuch"], &paths));
    assert!(!o.status.success() && o.stdout.is_empty());
    assert!(stderr(&o).contains("unknown object 'nosuch'"), "{}", stderr(&o));
}

/// A small concat volume on two 4 MiB drives, listed in every format.
#[test]
fn listings_follow_gvinums_formats() {
    let dir = scratch();
    let paths = drive_files(dir.path(), &["d0", "d1"], 4 * MIB);
    let text = drive_lines(&["d0", "d1"], &paths)
        + "volume small\nplex org concat\nsd length 1m drive d0\nsd length 2m drive d1\n";
    ok(create(dir.path(), &text, &[]));
    let (p0, p1) = (&paths[0], &paths[1]);
    assert_eq!(
        ok(run(&with(&["vinum", "l"], &paths))),
        format!(
            "2 drives:\n\
             D d0                    State: up\t{p0}\tA: 2/3 MB (74%)\n\
             D d1                    State: up\t{p1}\tA: 1/3 MB (48%)\n\n\
             1 volume:\n\
             V small                 State: up\tPlexes:       1\tSize:       3072 kB\n\n\
             1 plex:\n\
             P small.p0            C State: up\tSubdisks:     2\tSize:       3072 kB\n\n\
             2 subdisks:\n\
             S small.p0.s0           State: up\tD: d0           Size:       1024 kB\n\
             S small.p0.s1           State: up\tD: d1           Size:       2048 kB\n"
        )
    );
    assert_eq!(
        ok(run(&with(&["vinum", "list", "-v", "small"], &paths))),
        "Volume small:\tSize: 3145728 bytes (3 MB)\n\t\tState: up\n"
    );
    // gv_lpi prints no newline after a concat plex's organization.
    assert_eq!(
        ok(run(&with(&["vinum", "lp", "-V"], &paths))),
        "1 plex:\n\
         Plex small.p0:\tSize:\t  3145728 bytes (3 MB)\n\
         \t\tSubdisks:        2\n\
         \t\tState: up\n\
         \t\tOrganization: concat\t\tFlags: 0\n\
         \t\tPart of volume small\n\
         \t\tSubdisk 0:\tsmall.p0.s0\n\
         \t\t  state: up\tsize     1048576 (1 MB)\n\
         \t\t\toffset         0 (0x0)\n\
         \t\tSubdisk 1:\tsmall.p0.s1\n\
         \t\t  state: up\tsize     2097152 (2 MB)\n\
         \t\t\toffset   1048576 (0x100000)\n"
    );
    assert_eq!(
        ok(run(&with(&["vinum", "ld", "-V", "d1"], &paths))),
        format!(
            "Drive d1:\tDevice {p1}\n\
             \t\tSize:          4058624 bytes (3 MB)\n\
             \t\tUsed:          2097152 bytes (2 MB)\n\
             \t\tAvailable:     1961472 bytes (1 MB)\n\
             \t\tState: up\n\
             \t\tFlags: 0\n\
             \t\tFree list contains 1 entries:\n\
             \t\t   Offset\t     Size\n\
             \t\t  2232832\t  1961472\n"
        )
    );
    assert_eq!(
        ok(run(&with(&["vinum", "ls", "-v", "small.p0.s0"], &paths))),
        "Subdisk small.p0.s0:\n\t\tSize:          1048576 bytes (1 MB)\n\t\tState: up\n\
         \t\tPlex small.p0 at offset 0 (0  B)\n\t\tDrive d0 (d0) at offset 135680 (132 kB)\n\t\tFlags: 4\n"
    );
    // With one drive missing, gvinum lists it as a placeholder, down, on no device.
    assert_eq!(
        ok(run(&["vinum".into(), "ld".into(), p0.clone()])),
        format!(
            "2 drives:\n\
             D d0                    State: up\t{p0}\tA: 2/3 MB (74%)\n\
             D d1                    State: down\t/dev/???\tA: 0/0 MB (0%)\n"
        )
    );
    // --scan finds the drives in a folder.
    assert_eq!(
        ok(run(&["vinum".into(), "lv".into(), "--scan".into(), dir.path().display().to_string()])).lines().count(),
        2
    );
}

#[test]
fn gvinum8s_raid5_example() {
    let dir = scratch();
    // "gvinum raid5 -s 493k /dev/ada1 /dev/ada2 /dev/ada3", named as the page's listing, on
    // disks of 33000 sectors.
    let paths = drive_files(dir.path(), &["ada1", "ada2", "ada3"], 33_000 * 512);
    ok(run(&with(&["vinum", "raid5", "-s", "493k", "-n", "myraid5vol"], &paths)));
    let page = include_str!("../../vinum/format/tests/data/man-page-raid5.conf");
    // The page shows the volume after a drive failed; new, everything is up.
    assert_saved(&paths, &page.replace("state degraded", "state up").replace("state stale", "state up"));
    let names: Vec<String> = metadata(&paths).iter().map(|m| drive_name(m)).collect();
    assert_eq!(names, ["gvinumdrive0", "gvinumdrive1", "gvinumdrive2"]);
    // printconfig as on the page, but read back from the drives: the kernel's lists are in
    // the reverse of the order on disk after it tastes them.
    let printed = ok(run(&with(&["vinum", "printconfig"], &paths)));
    let mut lines = printed.lines();
    assert!(lines.next().unwrap().starts_with("# Vinum configuration of "), "{printed}");
    let rest: Vec<&str> = lines.collect();
    let sd = |i: usize| {
        format!(
            "sd name myraid5vol.p0.s{i} drive gvinumdrive{i} len 32538s driveoffset 265s plex myraid5vol.p0 plexoffset {}s",
            i * 986
        )
    };
    let expected = vec![
        format!("drive gvinumdrive0 device {}", paths[0]),
        format!("drive gvinumdrive1 device {}", paths[1]),
        format!("drive gvinumdrive2 device {}", paths[2]),
        "volume myraid5vol".into(),
        "plex name myraid5vol.p0 org raid5 986s vol myraid5vol".into(),
        sd(0),
        sd(1),
        sd(2),
    ];
    assert_eq!(rest, expected);
    assert_eq!(
        ok(run(&with(&["vinum", "lp"], &paths))),
        "1 plex:\nP myraid5vol.p0      R5 State: up\tSubdisks:     3\tSize:         31 MB\n"
    );
}

#[test]
fn gvinum8s_mirror_examples_and_the_other_shortcuts() {
    let dir = scratch();
    let paths = drive_files(dir.path(), &["ada1", "ada2", "ada3", "ada4", "ada5", "ada6"], 8 * MIB);
    // "gvinum mirror /dev/ada1 /dev/ada2"
    ok(run(&with(&["vinum", "mirror"], &paths[..2])));
    let scan = ["--scan".to_string(), dir.path().display().to_string()];
    let json: Value = serde_json::from_str(&ok(run(&with(&["vinum", "list", "--json"], &scan)))).unwrap();
    assert_eq!(json["volumes"][0]["name"], "gvinumvolume0");
    assert_eq!(json["volumes"][0]["plexes"], serde_json::json!(["gvinumvolume0.p0", "gvinumvolume0.p1"]));
    assert_eq!(json["volumes"][0]["size"], 8 * MIB - 135_680);
    assert_eq!(json["plexes"][0]["organization"], "concat");
    // "gvinum mirror -s -n data /dev/ada1 /dev/ada2 /dev/ada3 /dev/ada4", on the next four
    // devices; the drives gvinum has already are found under --scan and keep their names.
    ok(run(&[with(&["vinum", "mirror", "-s", "-n", "data"], &scan), paths[2..6].to_vec()].concat()));
    let json: Value = serde_json::from_str(&ok(run(&with(&["vinum", "lv", "-r", "--json", "data"], &scan)))).unwrap();
    let column = (8 * MIB - 135_680) / 262_144 * 262_144;
    assert_eq!(json["volumes"][0]["size"], 2 * column);
    assert_eq!(json["plexes"][0]["organization"], "striped");
    assert_eq!(json["plexes"][0]["stripe_size"], 262_144);
    let drives: Vec<(String, String)> = json["subdisks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s["drive"].as_str().unwrap().to_string()))
        .collect();
    let pairs = [
        ("data.p0.s0", "gvinumdrive2"),
        ("data.p0.s1", "gvinumdrive4"),
        ("data.p1.s0", "gvinumdrive3"),
        ("data.p1.s1", "gvinumdrive5"),
    ];
    assert_eq!(drives, pairs.map(|(a, b)| (a.to_string(), b.to_string())));
    assert_saved(&paths, &copy_text(&metadata(&paths[..1])[0], 1));

    // concat and stripe on devices of their own.
    let more = drive_files(dir.path(), &["s0", "s1", "c0"], 4 * MIB);
    ok(run(&[with(&["vinum", "stripe"], &scan), more[..2].to_vec()].concat()));
    ok(run(&[with(&["vinum", "concat", "-n", "one"], &scan), more[2..].to_vec()].concat()));
    let lv = ok(run(&with(&["vinum", "lv"], &scan)));
    assert!(lv.starts_with("4 volumes:\n"), "{lv}");
    assert!(lv.contains("V gvinumvolume1 ") && lv.contains("V one "), "{lv}");
    // Too few devices: nothing made.
    let few = drive_files(dir.path(), &["r0", "r1"], 4 * MIB);
    let o = run(&with(&["vinum", "raid5"], &few));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("needs at least 3 drives, got 2"), "{}", stderr(&o));
    assert!(metadata(&few).iter().all(|m| m.iter().all(|&b| b == 0)));
}

#[test]
fn printconfig_creates_the_same_objects_again() {
    let dir = scratch();
    let names = ["a", "b", "c", "d"];
    let old = drive_files(dir.path(), &names, 216 * MIB);
    ok(create(dir.path(), &(drive_lines(&names, &old) + PAPER_FOUR_DISKS), &[]));
    let printed = ok(run(&with(&["vinum", "printconfig"], &old)));
    let fresh_dir = dir.path().join("fresh");
    std::fs::create_dir(&fresh_dir).unwrap();
    let fresh = drive_files(&fresh_dir, &names, 216 * MIB);
    let mut description = printed.clone();
    for (o, n) in old.iter().zip(&fresh) {
        description = description.replace(&format!(" device {o}\n"), &format!(" device {n}\n"));
    }
    assert_ne!(description, printed);
    // From stdin, as gvinum reads a description it is given.
    ok(uraid_stdin(&["vinum", "create", "-"], description.as_bytes()));
    let before = metadata(&old);
    let after = metadata(&fresh);
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(copy_text(a, 1), copy_text(b, 1));
        assert_eq!(drive_name(a), drive_name(b));
    }
    assert_saved(&fresh, PAPER_FOUR_DISKS_ON_DISK);
}

/// Two 4 MiB drives d0 and d1 under `dir` with a concat volume `v` of a 1 MiB subdisk on each,
/// created; the drive files and the description that made them.
fn two_drive_concat(dir: &Path) -> (Vec<String>, String) {
    let paths = drive_files(dir, &["d0", "d1"], 4 * MIB);
    let text = drive_lines(&["d0", "d1"], &paths)
        + "volume v\nplex org concat\nsd length 1m drive d0\nsd length 1m drive d1\n";
    ok(create(dir, &text, &[]));
    (paths, text)
}

#[test]
fn saveconfig_stamps_every_drive_again() {
    let dir = scratch();
    let (paths, text) = two_drive_concat(dir.path());
    let before = metadata(&paths);
    std::thread::sleep(std::time::Duration::from_millis(5));
    ok(run(&with(&["vinum", "saveconfig"], &paths)));
    let after = metadata(&paths);
    assert_ne!(before[0][4096 + 96..4096 + 112], after[0][4096 + 96..4096 + 112]);
    // As the kernel after tasting: its lists are the reverse of the text it read.
    let on_disk = copy_text(&before[0], 1);
    let mut lines: Vec<&str> = on_disk.lines().collect();
    lines[2..4].reverse();
    let reversed: String = lines.iter().map(|l| format!("{l}\n")).collect();
    assert_saved(&paths, &reversed);
    // Names, birth dates and the data area stay.
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b[4096..4096 + 96], a[4096..4096 + 96]);
    }
    // The same description again: refused, or with gvinum's -f every object that exists is
    // skipped and only the save happens.
    let o = create(dir.path(), &text, &[]);
    assert!(
        stderr(&o).contains("drive \"d0\": ") && stderr(&o).contains("is already gvinum drive \"d0\""),
        "{}",
        stderr(&o)
    );
    assert_eq!(metadata(&paths), after);
    ok(create(dir.path(), &(text + "sd length 1m drive d1 plex v.p0\n"), &["-f".to_string()]));
    let json: Value = serde_json::from_str(&ok(run(&with(&["vinum", "ls", "--json"], &paths)))).unwrap();
    assert_eq!(json["subdisks"].as_array().unwrap().len(), 3);
}

#[test]
fn resetconfig_asks_then_removes_every_drive() {
    let dir = scratch();
    let (paths, _) = two_drive_concat(dir.path());
    let before = metadata(&paths);
    // No terminal to ask on and no -f: refused.
    let o = run(&with(&["vinum", "resetconfig"], &paths));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("give -f"), "{}", stderr(&o));
    assert_eq!(metadata(&paths), before);
    assert_eq!(ok(run(&with(&["vinum", "resetconfig", "-f"], &paths))), "gvinum configuration obliterated\n");
    for meta in metadata(&paths) {
        assert_eq!(&meta[4096..4104], b"VINUM--\0");
    }
    assert_eq!(ok(run(&with(&["vinum", "ld"], &paths))), "0 drives:\n");
    // Removed drives are gvinum's own leftovers: a new drive may go there without --force.
    ok(create(dir.path(), &(drive_lines(&["n0"], &paths[..1]) + "volume w\nplex org concat\nsd drive n0\n"), &[]));
    assert_eq!(drive_name(&metadata(&paths[..1])[0]), "n0");
}

/// Run `uraid` with its stdout a pipe whose reader has already gone, as `uraid ... | head`
/// after head has its lines: every write to it fails with a broken pipe.
fn run_into_closed_pipe(args: &[String]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    std::process::Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run uraid")
}

/// A reader that closes early (`uraid vinum list | head -1`) ends the output quietly: no panic,
/// no error, exit 0, for every verb that prints; resetconfig still does its work.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let dir = scratch();
    let (paths, _) = two_drive_concat(dir.path());
    let verbs: [&[&str]; 9] = [
        &["list", "-r", "-v"],
        &["list", "-V"],
        &["l"],
        &["ld"],
        &["lv", "-r"],
        &["lp"],
        &["ls", "-v"],
        &["list", "--json"],
        &["printconfig"],
    ];
    for verb in verbs {
        let o = run_into_closed_pipe(&with(&[&["vinum"], verb].concat(), &paths));
        let what = verb.join(" ");
        assert!(!stderr(&o).contains("panicked"), "{what}: {}", stderr(&o));
        assert_ne!(o.status.code(), Some(101), "{what}: {}", stderr(&o));
        assert!(o.status.success(), "{what}: exit {:?}: {}", o.status, stderr(&o));
        assert_eq!(stderr(&o), "", "{what}");
    }
    // The same verbs with a reader print something: the pipe was what stopped them.
    assert!(ok(run(&with(&["vinum", "printconfig"], &paths))).contains("volume v"));
    let o = run_into_closed_pipe(&with(&["vinum", "resetconfig", "-f"], &paths));
    assert!(o.status.success() && stderr(&o).is_empty(), "exit {:?}: {}", o.status, stderr(&o));
    for meta in metadata(&paths) {
        assert_eq!(&meta[4096..4104], b"VINUM--\0");
    }
}

/// Each must fail with a message naming the problem and leave every device as it was.
#[test]
fn bad_input_writes_nothing() {
    let dir = scratch();
    let paths = drive_files(dir.path(), &["x", "y"], 4 * MIB);
    let present = drive_files(dir.path(), &["p"], 4 * MIB);
    ok(create(
        dir.path(),
        &(drive_lines(&["p"], &present) + "volume pv\nplex org concat\nsd length 1m drive p\n"),
        &[],
    ));
    let mut all = paths.clone();
    all.extend(present.iter().cloned());
    let head = drive_lines(&["x", "y"], &paths);
    let good = head.clone() + "volume v\nplex org striped 64k\nsd length 1m drive x\nsd length 1m drive y\n";
    let cases: Vec<(&str, String, &str)> = vec![
        ("truncated", good[..good.len() - 6].to_string(), "line 6"),
        (
            "unknown drive",
            head.clone() + "volume v\nplex org concat\nsd length 1m drive nope\n",
            "\"nope\", which does not exist",
        ),
        (
            "overlap",
            head.clone()
                + "volume v\nplex org concat\nsd drive x len 1m driveoffset 265s\nsd drive x len 1m driveoffset 300s\n",
            "overlaps sd",
        ),
        ("stripe size 0", head.clone() + "volume v\nplex org striped 0\nsd drive x\nsd drive y\n", "line 4"),
        ("stripe size not sectors", head.clone() + "volume v\nplex org striped 1000\nsd drive x\nsd drive y\n", "1000"),
        (
            "too long",
            head.clone() + "volume v\nplex org concat\nsd length 100m drive x\n",
            "no free extent of 104857600 bytes",
        ),
        ("existing name", head.clone() + "volume pv\n", "volume \"pv\" already exists"),
        ("existing drive", drive_lines(&["q"], &present) + "volume q\n", "is already gvinum drive \"p\""),
        ("no such device", "drive z device /nonexistent/z.img\n".into(), "/nonexistent/z.img"),
    ];
    let before = metadata(&all);
    for (what, description, message) in cases {
        let o = create(dir.path(), &description, &present);
        assert!(!o.status.success(), "{what}: accepted");
        assert!(stderr(&o).contains(message), "{what}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{what}: {}", stderr(&o));
        assert_eq!(metadata(&all), before, "{what}: a device was written");
    }
    // A description with nothing in it creates nothing and saves nothing, as in gvinum.
    ok(create(dir.path(), "# nothing here\n\n", &present));
    assert_eq!(metadata(&all), before);
}

#[test]
fn devices_in_use_need_force() {
    let dir = scratch();
    let [small, md, mbr, copy]: [String; 4] =
        drive_files(dir.path(), &["small", "md", "mbr", "copy"], 4 * MIB).try_into().unwrap();
    std::fs::File::create(&small).unwrap().set_len(100 * 1024).unwrap();
    std::fs::write(&md, NewMdArray::new(1, 2, 4 * MIB).images().remove(0)).unwrap();
    let mut bytes = vec![0u8; 4 * MIB as usize];
    bytes[510..512].copy_from_slice(&[0x55, 0xaa]);
    std::fs::write(&mbr, &bytes).unwrap();
    let one = |name: &str, path: &str| {
        format!("drive {name} device {path}\nvolume {name}v\nplex org concat\nsd drive {name}\n")
    };
    let all = vec![small.clone(), md.clone(), mbr.clone()];
    let before = metadata(&all);
    for (path, message) in [
        (&small, "102400 bytes is too small for a gvinum drive"),
        (&md, "holds an md 1.2 superblock at byte 4096"),
        (&mbr, "holds data at byte 510"),
    ] {
        let o = create(dir.path(), &one("n", path), &[]);
        assert!(!o.status.success());
        assert!(stderr(&o).contains(message), "{}", stderr(&o));
        assert!(stderr(&o).contains("--force") || path == &small, "{}", stderr(&o));
        assert_eq!(metadata(&all), before);
    }
    // With --force the md member and the partitioned disk become drives.
    ok(create(dir.path(), &one("m", &md), &["--force".to_string()]));
    ok(create(dir.path(), &one("b", &mbr), &["-f".to_string()]));
    assert_eq!(drive_name(&metadata(std::slice::from_ref(&md))[0]), "m");
    // Two devices carrying one drive name: refused by every verb, naming both.
    std::fs::copy(&mbr, &copy).unwrap();
    let o = run(&["vinum".into(), "list".into(), mbr.clone(), copy.clone()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains(&format!("{mbr} and {copy} both carry gvinum drive \"b\"")), "{}", stderr(&o));
    let pair = vec![mbr.clone(), copy.clone()];
    let before = metadata(&pair);
    let o = run(&["vinum".into(), "saveconfig".into(), mbr.clone(), copy.clone()]);
    assert!(!o.status.success());
    assert_eq!(metadata(&pair), before);
}

/// Paths given twice, or a drive given and scanned, are one device.
#[test]
fn a_device_named_twice_is_one_device() {
    let dir = scratch();
    let paths = drive_files(dir.path(), &["d0"], 4 * MIB);
    ok(create(dir.path(), &(drive_lines(&["d0"], &paths) + "volume v\nplex org concat\nsd drive d0\n"), &[]));
    let alias: PathBuf = dir.path().join(".").join("d0.img");
    let scan = dir.path().display().to_string();
    let out = ok(uraid(&["vinum", "ld", &paths[0], &alias.display().to_string(), "--scan", &scan]));
    assert!(out.starts_with("1 drive:\n"), "{out}");
}

/// A loop device over `file` with `sector_size`-byte logical sectors, detached on drop so that
/// a failed assertion leaves none behind.
struct LoopDevice(String);

impl LoopDevice {
    fn attach(file: &str, sector_size: u32) -> LoopDevice {
        let o = std::process::Command::new("losetup")
            .args(["--sector-size", &sector_size.to_string(), "-f", "--show", file])
            .output()
            .unwrap_or_else(|e| panic!("cannot run losetup (Debian package util-linux): {e}"));
        assert!(o.status.success(), "losetup (needs root and /dev/loop-control): {}", stderr(&o));
        let dev = stdout(&o).trim().to_string();
        assert!(dev.starts_with("/dev/loop"), "losetup printed {dev:?}");
        LoopDevice(dev)
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// gvinum uses only media whose logical sectors divide 512 bytes (`gv_read_header` does not
/// taste the rest): a block device with 4096-byte sectors is refused by every verb, naming it
/// and its sector size, before anything is written, even beside a device that would do; under
/// --scan it is passed over; a block device with 512-byte sectors is taken.
#[test]
fn block_devices_with_4096_byte_sectors_are_refused() {
    let dir = scratch();
    let files = drive_files(dir.path(), &["k", "s"], 4 * MIB);
    let four_k = LoopDevice::attach(&files[0], 4096);
    let small = LoopDevice::attach(&files[1], 512);
    let (k, s) = (four_k.0.as_str(), small.0.as_str());
    let refusals = [
        create(dir.path(), &format!("drive k device {k}\nvolume v\nplex org concat\nsd drive k\n"), &[]),
        uraid(&["vinum", "concat", "-f", "-n", "c", k]),
        uraid(&["vinum", "stripe", s, k]),
        uraid(&["vinum", "list", k]),
        uraid(&["vinum", "printconfig", k]),
        uraid(&["vinum", "saveconfig", k]),
    ];
    for o in &refusals {
        assert!(!o.status.success(), "{}", stdout(o));
        assert!(stderr(o).contains(&format!("{k}: logical sector size 4096 bytes")), "{}", stderr(o));
        assert!(stderr(o).contains("divide 512"), "{}", stderr(o));
    }
    for file in &files {
        assert!(std::fs::read(file).unwrap().iter().all(|&b| b == 0), "{file} was written");
    }
    // Under --scan, as the kernel when tasting, it is not a drive and not an error.
    let scan = dir.path().join("scan");
    std::fs::create_dir(&scan).unwrap();
    let node = std::ffi::CString::new(scan.join("node").display().to_string()).unwrap();
    let rdev = std::os::unix::fs::MetadataExt::rdev(&std::fs::metadata(k).unwrap());
    // SAFETY: mknod reads a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mknod(node.as_ptr(), libc::S_IFBLK | 0o600, rdev) }, 0, "mknod");
    assert_eq!(ok(uraid(&["vinum", "ld", "--scan", &scan.display().to_string()])), "0 drives:\n");
    // 512-byte sectors: a drive as on any file.
    ok(uraid(&["vinum", "concat", "-n", "c", s]));
    let json: Value = serde_json::from_str(&ok(uraid(&["vinum", "ld", "--json", s]))).unwrap();
    assert_eq!(json["drives"].as_array().unwrap().len(), 1, "{json}");
}

/// Drives a to f (4 MiB files): a mirror `m` of two concat plexes on a and b, a raid5 volume
/// `r` (64 KiB stripes) on c, d and e, 1 MiB subdisks; f holds no subdisk.
fn edit_fixture(dir: &Path) -> Vec<String> {
    let names = ["a", "b", "c", "d", "e", "f"];
    let paths = drive_files(dir, &names, 4 * MIB);
    let text = drive_lines(&names, &paths)
        + "volume m\nplex org concat\nsd length 1m drive a\nplex org concat\nsd length 1m drive b\n\
           volume r\nplex org raid5 64k\nsd length 1m drive c\nsd length 1m drive d\nsd length 1m drive e\n";
    ok(create(dir, &text, &[]));
    paths
}

/// `vinum ARGS... PATHS...`.
fn vinum_args(args: &[&str], paths: &[String]) -> Vec<String> {
    std::iter::once("vinum").chain(args.iter().copied()).map(String::from).chain(paths.iter().cloned()).collect()
}

fn vinum_ok(paths: &[String], args: &[&str]) -> String {
    ok(run(&vinum_args(args, paths)))
}

/// `uraid vinum list --json` of the drives.
fn listing(paths: &[String]) -> Value {
    serde_json::from_str(&vinum_ok(paths, &["list", "--json"])).unwrap()
}

/// The object called `name` in a listing's `kind` ("volumes", "plexes", ...), or Null.
fn object<'a>(json: &'a Value, kind: &str, name: &str) -> &'a Value {
    json[kind].as_array().unwrap().iter().find(|o| o["name"] == name).unwrap_or(&Value::Null)
}

/// Run a vinum verb that must be refused: its message contains `message`, and no drive was
/// written.
#[track_caller]
fn refused_unchanged(paths: &[String], args: &[&str], message: &str) {
    let before = metadata(paths);
    let o = run(&vinum_args(args, paths));
    assert!(!o.status.success(), "{args:?}: accepted");
    assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    assert_eq!(metadata(paths), before, "{args:?}: a drive was written");
}

#[test]
fn rm_removes_what_it_holds_with_r_and_marks_a_drive_removed() {
    let dir = scratch();
    let paths = edit_fixture(dir.path());
    refused_unchanged(&paths, &["rm", "m"], "volume 'm' has attached plexes - need recursive removal");
    refused_unchanged(&paths, &["rm", "r.p0.s1"], "subdisk 'r.p0.s1' is still attached to plex 'r.p0'");
    refused_unchanged(&paths, &["rm", "-r", "m.p1", "m.p0"], "plex 'm.p0' is still attached to volume 'm'");
    refused_unchanged(&paths, &["rm", "nosuch"], "unknown object 'nosuch'");

    vinum_ok(&paths, &["rm", "-r", "m"]);
    let json = listing(&paths);
    for (kind, name) in [("volumes", "m"), ("plexes", "m.p0"), ("plexes", "m.p1"), ("subdisks", "m.p0.s0")] {
        assert!(object(&json, kind, name).is_null(), "{name} still there");
    }
    assert_eq!(object(&json, "volumes", "r")["state"], "up");
    assert_eq!(object(&json, "drives", "a")["available"], object(&json, "drives", "a")["size"]);

    // A drive with nothing on it: its header is marked removed, the others save without it.
    vinum_ok(&paths, &["rm", "f"]);
    let metas = metadata(&paths);
    assert_eq!(&metas[5][4096..4104], b"VINUM--\0");
    assert_saved(&paths[..5], &copy_text(&metas[0], 1));
    // A drive holding a raid5 column, without -r: the column stays, down, on a drive that is
    // gone.
    vinum_ok(&paths, &["rm", "d"]);
    assert_eq!(&metadata(&paths)[3][4096..4104], b"VINUM--\0");
    let json = listing(&paths);
    assert_eq!(object(&json, "subdisks", "r.p0.s1")["state"], "down");
    assert_eq!(object(&json, "plexes", "r.p0")["state"], "degraded");
    assert_eq!(
        (&object(&json, "drives", "d")["device"], &object(&json, "drives", "d")["state"]),
        (&Value::Null, &Value::from("down"))
    );
    assert!(object(&json, "drives", "f").is_null());
}

#[test]
fn rename_r_renames_the_children_and_a_drive_its_header() {
    let dir = scratch();
    let paths = edit_fixture(dir.path());
    refused_unchanged(&paths, &["rename", "m", "r"], "volume name 'r' already in use");
    refused_unchanged(&paths, &["rename", "m.p0", "plain"], "proposed plex name 'plain' is not a valid plex name");
    refused_unchanged(&paths, &["rename", "m"], "no new name specified");

    vinum_ok(&paths, &["rename", "-r", "m", "mirror"]);
    let json = listing(&paths);
    assert_eq!(object(&json, "volumes", "mirror")["plexes"].as_array().unwrap().len(), 2);
    assert_eq!(object(&json, "plexes", "mirror.p1")["volume"], "mirror");
    assert_eq!(object(&json, "subdisks", "mirror.p0.s0")["plex"], "mirror.p0");
    assert!(object(&json, "volumes", "m").is_null() && object(&json, "subdisks", "m.p0.s0").is_null());

    vinum_ok(&paths, &["rename", "a", "alpha"]);
    assert_eq!(drive_name(&metadata(&paths)[0]), "alpha");
    let json = listing(&paths);
    assert_eq!(object(&json, "subdisks", "mirror.p0.s0")["drive"], "alpha");
    assert_eq!(object(&json, "drives", "alpha")["state"], "up");
    assert!(vinum_ok(&paths, &["printconfig"]).contains("drive alpha device "));
}

#[test]
fn setstate_follows_the_kernels_rules_and_saves() {
    let dir = scratch();
    let paths = edit_fixture(dir.path());
    refused_unchanged(&paths, &["setstate", "degraded", "r.p0"], "invalid state 'degraded'");
    refused_unchanged(&paths, &["setstate", "stale", "r.p0"], "invalid plex state 'stale'");
    refused_unchanged(&paths, &["setstate", "stale", "m.p1.s0"], "only with -f");
    refused_unchanged(&paths, &["setstate", "down", "m"], "only with -f");

    vinum_ok(&paths, &["setstate", "-f", "stale", "m.p1.s0"]);
    let json = listing(&paths);
    assert_eq!(object(&json, "subdisks", "m.p1.s0")["state"], "stale");
    assert_eq!(object(&json, "plexes", "m.p1")["state"], "down");
    assert_eq!(object(&json, "volumes", "m")["state"], "up");
    // Stale in a mirrored plex it must be revived; the last plex up stays up.
    refused_unchanged(&paths, &["setstate", "up", "m.p1.s0"], "which another plex mirrors");
    refused_unchanged(&paths, &["setstate", "down", "m.p0"], "the only plex of volume 'm' that is not down");

    // A drive taken down: its subdisk goes down, and the drive itself takes no save.
    let d_before = metadata(&paths[3..4]);
    vinum_ok(&paths, &["setstate", "down", "d"]);
    assert_eq!(metadata(&paths[3..4]), d_before, "the drive set down was written");
    let json = listing(&paths);
    assert_eq!(object(&json, "subdisks", "r.p0.s1")["state"], "down");
    assert_eq!(object(&json, "plexes", "r.p0")["state"], "degraded");
}

#[test]
fn detach_and_attach_a_plex_and_a_subdisk() {
    let dir = scratch();
    let paths = edit_fixture(dir.path());
    refused_unchanged(&paths, &["detach", "m.p1"], "plex 'm.p1' is busy: it is up in volume 'm'");
    refused_unchanged(&paths, &["detach", "r.p0.s2"], "is busy");
    refused_unchanged(&paths, &["detach", "m"], "only plexes and subdisks are attached and detached");

    vinum_ok(&paths, &["detach", "-f", "m.p1"]);
    assert!(copy_text(&metadata(&paths)[0], 1).contains("plex name m.p1 org concat  state up\n"));
    // The detached plex lasts into the next command (gvinum keeps it until it restarts).
    let json = listing(&paths);
    assert_eq!(object(&json, "plexes", "m.p1")["volume"], Value::Null);
    assert_eq!(object(&json, "volumes", "m")["plexes"].as_array().unwrap().len(), 1);
    refused_unchanged(&paths, &["attach", "m.p1", "r.p0"], "no such volume to attach to: 'r.p0'");
    refused_unchanged(&paths, &["attach", "m.p0", "r"], "plex 'm.p0' is already attached to 'm'");

    vinum_ok(&paths, &["attach", "m.p1", "m", "rename"]);
    let json = listing(&paths);
    assert_eq!(object(&json, "plexes", "m.p2")["volume"], "m");
    assert_eq!(object(&json, "plexes", "m.p2")["state"], "down");
    assert_eq!(object(&json, "subdisks", "m.p1.s0")["plex"], "m.p2");
    assert_eq!(object(&json, "subdisks", "m.p1.s0")["state"], "stale");
    assert_eq!(object(&json, "volumes", "m")["state"], "up");

    // A subdisk out of its concat plex and back at an offset.
    vinum_ok(&paths, &["detach", "-f", "m.p0.s0"]);
    assert_eq!(object(&listing(&paths), "subdisks", "m.p0.s0")["plex"], Value::Null);
    refused_unchanged(&paths, &["attach", "m.p0.s0", "m.p0", "1000"], "not a whole number of 512-byte sectors");
    vinum_ok(&paths, &["attach", "m.p0.s0", "m.p0", "0", "rename"]);
    let json = listing(&paths);
    let s = object(&json, "subdisks", "m.p0.s1");
    assert_eq!(s["plex"], "m.p0");
    assert_eq!(s["plex_offset"], 0);
    assert_eq!(s["state"], "stale");
}

#[test]
fn move_puts_a_subdisk_on_another_drive_stale_and_start_revives_it() {
    let dir = scratch();
    let paths = edit_fixture(dir.path());
    let data: Vec<u8> = (0..2 * MIB as usize).map(|i| (i * 31 + 7) as u8).collect();
    let uraid_with = |head: &[&str], paths: &[String], input: &[u8]| {
        let args = with(head, paths);
        uraid_stdin(&args.iter().map(String::as_str).collect::<Vec<_>>(), input)
    };
    ok(uraid_with(&["write", "--volume", "r", "--offset", "0"], &paths, &data));

    refused_unchanged(&paths, &["move", "f", "r.p0.s1"], "-f flag not passed; move would be destructive");
    refused_unchanged(&paths, &["mv", "-f", "r", "r.p0.s1"], "destination 'r' is not a drive");
    refused_unchanged(&paths, &["mv", "-f", "f", "r.p0"], "you can only move subdisks; 'r.p0' isn't one");
    refused_unchanged(&paths, &["mv", "-f", "d", "r.p0.s1"], "subdisk 'r.p0.s1' already on drive 'd'");

    vinum_ok(&paths, &["mv", "-f", "f", "r.p0.s1"]);
    let json = listing(&paths);
    let s = object(&json, "subdisks", "r.p0.s1");
    assert_eq!(s["drive"], "f");
    assert_eq!(s["drive_offset"], 135_680);
    assert_eq!(s["state"], "stale");
    assert_eq!(object(&json, "plexes", "r.p0")["state"], "degraded");
    assert_eq!(object(&json, "drives", "d")["subdisks"].as_array().unwrap().len(), 0);

    // The stale column is read around (rebuilt from parity), so the data is all there, also
    // without the drive the column left.
    let cat = |paths: &[String]| {
        let o = uraid_with(&["cat", "--volume", "r", "--length", &data.len().to_string()], paths, b"");
        assert!(o.status.success(), "cat: {}", stderr(&o));
        assert!(stderr(&o).contains("r.p0.s1 not up (stale): left out"), "{}", stderr(&o));
        o.stdout
    };
    assert_eq!(cat(&paths), data);
    let without = |drive: usize| -> Vec<String> {
        paths.iter().enumerate().filter(|(i, _)| *i != drive).map(|(_, p)| p.clone()).collect()
    };
    assert_eq!(cat(&without(3)), data);

    // start rebuilds the column on f from the other two; then it serves reads with e gone.
    vinum_ok(&paths, &["start", "r"]);
    assert_eq!(object(&listing(&paths), "subdisks", "r.p0.s1")["state"], "up");
    let o = uraid_with(&["cat", "--volume", "r", "--length", &data.len().to_string()], &without(4), b"");
    assert!(o.status.success(), "cat: {}", stderr(&o));
    assert_eq!(o.stdout, data);
}
