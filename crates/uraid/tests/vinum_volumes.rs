//! gvinum volumes through the engine, the real binary on drive files: volumes made by
//! `uraid vinum create` are written with `uraid write --volume` and read back with `uraid cat
//! --volume`, whole, with drives missing, and degraded; every byte must sit on the drives where
//! gvinum's mapping puts it (checked with the format crate's plex mapping, not the engine's
//! layout); and volumes that cannot run are refused with what is wrong, nothing written.

use std::path::{Path, PathBuf};
use std::process::Output;

use tempfile::TempDir;
use uraid_testkit::scratch_dir;
use uraid_vinum_format::{parse_config, DriveHeader, DriveMetadata, PlexLayout, SubdiskState, Timeval, VinumConfig};

mod common;
use common::{uraid, uraid_stdin};

const MIB: u64 = 1 << 20;

/// Two volumes on four drives of 24 MiB:
/// - `mv`, a concat plex (a, b) mirrored by a striped plex (c, d, and a again), 16 MiB;
/// - `r5`, a raid5 plex with 32 KiB stripes over b, c and d, 8 MiB.
const VOLUMES: &str = "\
volume mv
  plex org concat
    sd length 8m drive a
    sd length 8m drive b
  plex org striped 64k
    sd length 6m drive c
    sd length 6m drive d
    sd length 6m drive a
volume r5
  plex org raid5 32k
    sd length 4m drive b
    sd length 4m drive c
    sd length 4m drive d
";

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
    assert_ne!(o.status.code(), Some(101), "a panic, not a refusal: {}", stderr(&o));
    stderr(&o)
}

struct Drives {
    _dir: TempDir,
    dir: PathBuf,
    paths: Vec<String>,
}

impl Drives {
    /// Drives a, b, c, d with both volumes made by `uraid vinum create`.
    fn new() -> Drives {
        let (dir, paths) = blank_drives(&["a", "b", "c", "d"], 24 * MIB);
        let path = dir.path().to_path_buf();
        let drives: String =
            ["a", "b", "c", "d"].iter().zip(&paths).map(|(n, p)| format!("drive {n} device {p}\n")).collect();
        ok(uraid_stdin(&["vinum", "create", "-"], format!("{drives}{VOLUMES}").as_bytes()));
        Drives { _dir: dir, dir: path, paths }
    }

    fn path(&self, name: &str) -> &str {
        &self.paths[["a", "b", "c", "d"].iter().position(|n| *n == name).unwrap()]
    }

    /// `uraid VERB --volume VOLUME [args] DRIVES...` with the drives named.
    fn run(&self, verb: &str, volume: &str, args: &[&str], drives: &[&str], input: &[u8]) -> Output {
        let mut all: Vec<&str> = vec![verb, "--volume", volume];
        all.extend_from_slice(args);
        all.extend(drives.iter().map(|d| self.path(d)));
        uraid_stdin(&all, input)
    }

    fn write(&self, volume: &str, offset: u64, data: &[u8], drives: &[&str]) -> Output {
        self.run("write", volume, &["--offset", &offset.to_string()], drives, data)
    }

    fn cat(&self, volume: &str, drives: &[&str]) -> Vec<u8> {
        ok(self.run("cat", volume, &[], drives, b""))
    }

    /// The configuration the drives hold (copy 1 of the newest).
    fn config(&self) -> VinumConfig {
        let newest = self
            .paths
            .iter()
            .map(|p| DriveMetadata::parse(&std::fs::read(p).unwrap()[..135_680]).unwrap())
            .max_by_key(|m| m.header.label.last_update)
            .unwrap();
        parse_config(&newest.config_text).unwrap()
    }

    /// Every byte of `volume` where gvinum's mapping puts it, on every plex, equals `model`
    /// (sampled every 997 bytes and at both ends of every stripe unit or subdisk).
    fn assert_placed(&self, volume: &str, model: &[u8]) {
        let config = self.config();
        let images: Vec<Vec<u8>> = self.paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
        for plex in config.plexes_of(volume) {
            let layout = PlexLayout::from_config(&config, &plex.name).unwrap();
            let mut offsets: Vec<u64> = (0..model.len() as u64).step_by(997).collect();
            let mut at = 0;
            while at < model.len() as u64 {
                let loc = layout.locate(at).unwrap();
                offsets.extend([at, at + loc.run - 1]);
                at += loc.run;
            }
            for offset in offsets.into_iter().filter(|&o| o < model.len() as u64) {
                let loc = layout.locate(offset).unwrap();
                let column = &layout.columns()[loc.column];
                let drive = ["a", "b", "c", "d"].iter().position(|n| *n == column.drive).unwrap();
                let byte = images[drive][(column.drive_offset + loc.offset) as usize];
                assert_eq!(
                    byte,
                    model[offset as usize],
                    "{volume} byte {offset}: plex {} puts it on {} at {}",
                    plex.name,
                    column.subdisk,
                    column.drive_offset + loc.offset
                );
            }
        }
    }

    fn subdisk_state(&self, name: &str) -> SubdiskState {
        self.config().subdisk(name).unwrap().state
    }

    fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Blank drive files `NAME.img` of `size` bytes in a new folder, and their paths.
fn blank_drives(names: &[&str], size: u64) -> (TempDir, Vec<String>) {
    let dir = tempfile::tempdir_in(scratch_dir("vinum-volumes")).unwrap();
    let paths = names
        .iter()
        .map(|n| {
            let p = dir.path().join(format!("{n}.img"));
            std::fs::File::create(&p).unwrap().set_len(size).unwrap();
            p.display().to_string()
        })
        .collect();
    (dir, paths)
}

fn random(len: usize, seed: u64) -> Vec<u8> {
    uraid_testkit::random_bytes(len as u64, seed)
}

#[test]
fn a_mirror_of_a_concat_and_a_striped_plex_is_written_to_both_and_read_from_either() {
    let d = Drives::new();
    let model = random(16 * MIB as usize, 1);
    // Drives named in any order: they are known by the names in their headers.
    ok(d.write("mv", 0, &model, &["d", "b", "a", "c"]));
    assert_eq!(d.cat("mv", &["a", "b", "c", "d"]), model);
    d.assert_placed("mv", &model);
    // Each plex alone: the concat plex on a and b, the striped plex on c, d and a.
    assert_eq!(d.cat("mv", &["a", "b"]), model, "the concat plex alone");
    assert_eq!(d.cat("mv", &["c", "d", "a"]), model, "the striped plex alone");
    // Written and stopped cleanly: every subdisk is up on the drives again.
    for sd in ["mv.p0.s0", "mv.p0.s1", "mv.p1.s0", "mv.p1.s1", "mv.p1.s2"] {
        assert_eq!(d.subdisk_state(sd), SubdiskState::Up, "{sd}");
    }
}

#[test]
fn a_raid5_plex_reads_around_a_missing_drive_and_remembers_what_it_missed() {
    let d = Drives::new();
    let size = 8 * MIB as usize;
    let mut model = random(size, 2);
    ok(d.write("r5", 0, &model, &["b", "c", "d"]));
    assert_eq!(d.cat("r5", &["b", "c", "d"]), model);
    d.assert_placed("r5", &model);
    // Without c, read by reconstruction.
    assert_eq!(d.cat("r5", &["b", "d"]), model, "reconstructed without c");
    // Written without d: d's subdisk is saved down on b and c before the write goes out.
    let patch = random(100_000, 3);
    let out = d.write("r5", 33_000, &patch, &["b", "c"]);
    assert!(stderr(&out).contains("subdisk r5.p0.s2 is down: its drive d was not found"), "{}", stderr(&out));
    ok(out);
    model[33_000..133_000].copy_from_slice(&patch);
    assert_eq!(d.subdisk_state("r5.p0.s2"), SubdiskState::Down);
    // With d back, its old contents are never read: the subdisk is stale, read around.
    let out = d.run("cat", "r5", &[], &["b", "c", "d"], b"");
    assert!(stderr(&out).contains("r5.p0.s2 not up (stale): left out"), "{}", stderr(&out));
    assert_eq!(ok(out), model);
}

#[test]
fn drives_are_found_under_scan_and_a_volume_is_named_by_its_name() {
    let d = Drives::new();
    let model = random(300_000, 4);
    let dir = d.dir().display().to_string();
    ok(uraid_stdin(&["write", "--volume", "mv", "--offset", "4095", "--scan", &dir], &model));
    let out = ok(uraid(&["cat", "--volume", "mv", "--offset", "4095", "--length", "300000", "--scan", &dir]));
    assert_eq!(out, model);
}

#[test]
fn volumes_that_cannot_run_are_refused_and_nothing_is_written() {
    let d = Drives::new();
    let before: Vec<Vec<u8>> = d.paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let unchanged = || {
        for (p, b) in d.paths.iter().zip(&before) {
            assert!(std::fs::read(p).unwrap() == *b, "{p} was written");
        }
    };
    let e = refused(d.write("nosuch", 0, b"x", &["a", "b", "c", "d"]));
    assert!(e.contains("no volume named \"nosuch\""), "{e}");
    // Two of r5's three subdisks gone: no copy of some data.
    let e = refused(d.write("r5", 0, b"x", &["b"]));
    assert!(e.contains("volume \"r5\" cannot be read") && e.contains("r5.p0.s1 (drive c not found)"), "{e}");
    // The mirror without a (it holds one subdisk of each plex).
    let e = refused(d.write("mv", 0, b"x", &["b", "c", "d"]));
    assert!(e.contains("volume \"mv\" cannot be read"), "{e}");
    // Past the end of the volume.
    let e = refused(d.write("r5", 8 * MIB - 1, b"xy", &["b", "c", "d"]));
    assert!(e.contains("larger than the 1 bytes left"), "{e}");
    // A file that is no gvinum drive, named among the drives, is said so.
    let stray = d.dir().join("stray.img");
    std::fs::write(&stray, vec![0u8; 200_000]).unwrap();
    let out =
        uraid(&["cat", "--volume", "r5", "--length", "10", &stray.display().to_string(), d.path("b"), d.path("c")]);
    assert!(stderr(&out).contains("no gvinum drive header"), "{}", stderr(&out));
    assert_eq!(ok(out).len(), 10);
    // No drives at all.
    let e = refused(uraid(&["cat", "--volume", "r5", &stray.display().to_string()]));
    assert!(e.contains("no gvinum drives"), "{e}");
    unchanged();
}

#[test]
fn a_stale_subdisk_is_revived_while_the_volume_is_served() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let d = Drives::new();
    let mut model = random(8 * MIB as usize, 5);
    ok(d.write("r5", 0, &model, &["b", "c", "d"]));
    let patch = random(200_000, 6);
    ok(d.write("r5", 70_000, &patch, &["b", "c"]));
    model[70_000..270_000].copy_from_slice(&patch);
    let sock = d.dir().join("nbd.sock");
    let ctl = d.dir().join("ctl.sock");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["serve", "--volume", "r5"])
        .arg(format!("--listen=unix:{}", sock.display()))
        .arg(format!("--control={}", ctl.display()))
        .args(["a", "b", "c", "d"].map(|n| d.path(n)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ctl.exists() {
        assert!(Instant::now() < deadline && serve.try_wait().unwrap().is_none(), "uraid serve did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ctl = ctl.display().to_string();
    ok(uraid(&["ctl", &ctl, "wait"]));
    let status = String::from_utf8(ok(uraid(&["ctl", &ctl, "status"]))).unwrap();
    assert!(status.contains("[UUU]") && status.contains("recover completed"), "{status}");
    // `vinum stop`: the server stops cleanly (as on SIGTERM) and saves the revived subdisk up;
    // it returns once the server is gone.
    let stopped = uraid(&["vinum", "stop", &ctl]);
    assert!(stderr(&stopped).contains("stopped"), "{}", stderr(&stopped));
    ok(stopped);
    assert!(!Path::new(&ctl).exists(), "the control socket goes with the server");
    let out = serve.wait_with_output().unwrap();
    let log = stderr(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("r5.p0.s2 not up (stale): revived"), "{log}");
    assert_eq!(d.subdisk_state("r5.p0.s2"), SubdiskState::Up);
    // d now holds what the writes without it left to parity: read without b, every byte.
    assert_eq!(d.cat("r5", &["c", "d"]), model);
}

#[test]
fn checkparity_counts_bad_rows_and_rebuildparity_fixes_them() {
    let d = Drives::new();
    let model = random(8 * MIB as usize, 7);
    ok(d.write("r5", 0, &model, &["b", "c", "d"]));
    let drives: Vec<&str> = ["b", "c", "d"].iter().map(|n| d.path(n)).collect();
    let vinum = |verb: &str, extra: &[&str]| {
        let mut args = vec!["vinum", verb];
        args.extend_from_slice(extra);
        args.push("r5.p0");
        args.extend(drives.iter().copied());
        uraid(&args)
    };
    let out = String::from_utf8(ok(vinum("checkparity", &[]))).unwrap();
    assert!(out.contains("128 rows, all correct"), "{out}");
    // Flip a byte of row 0 (its parity is on d, column 2) and one of row 5's data on b.
    let flip = |drive: &str, at: u64| {
        let mut bytes = std::fs::read(d.path(drive)).unwrap();
        bytes[at as usize] ^= 0x55;
        std::fs::write(d.path(drive), bytes).unwrap();
    };
    let start = |sd: &str| d.config().subdisk(sd).unwrap().drive_offset;
    flip("d", start("r5.p0.s2") + 100);
    flip("b", start("r5.p0.s0") + 5 * 32_768 + 7);
    let e = refused(vinum("checkparity", &["-v"]));
    assert!(e.contains("2 of 128 rows have parity that disagrees"), "{e}");
    assert!(e.contains("row 0 (plex offset 0)") && e.contains("row 5 (plex offset 327680)"), "{e}");
    let out = String::from_utf8(ok(vinum("rebuildparity", &[]))).unwrap();
    assert!(out.contains("2 of 128 rows had parity that disagreed"), "{out}");
    ok(vinum("checkparity", &[]));
    // Parity now matches the data as it is (the flipped data byte included): c rebuilt from
    // b and d reads back what c holds.
    let now = d.cat("r5", &["b", "c", "d"]);
    assert_eq!(d.cat("r5", &["b", "d"]), now, "c reconstructed from b and d's parity");
    // Not raid5, not up, unknown: refused.
    let e = refused(uraid(&["vinum", "checkparity", "mv.p0", d.path("a"), d.path("b")]));
    assert!(e.contains("'mv.p0' is concat, not raid5"), "{e}");
    ok(d.write("r5", 0, b"x", &["b", "c"]));
    let e = refused(vinum("checkparity", &[]));
    assert!(e.contains("subdisk r5.p0.s2 is down; start it first"), "{e}");
}

/// Whether a drive's header (at 4096) carries uraid's unclean mark.
fn marked_unclean(path: &str) -> bool {
    let bytes = std::fs::read(path).unwrap();
    DriveHeader::parse(&bytes[4096..]).unwrap().label.last_update.marks_unclean()
}

#[test]
fn a_raid5_volume_left_unclean_has_its_parity_rewritten_before_it_is_saved_clean() {
    let d = Drives::new();
    let model = random(MIB as usize, 11);
    ok(d.write("r5", 0, &model, &["b", "c", "d"]));
    for n in ["b", "c", "d"] {
        assert!(!marked_unclean(d.path(n)), "closed clean: no unclean mark");
    }
    // A crash while writing, as the drives would keep it: the unclean mark on every drive's
    // stamp, and a row whose parity no longer matches its data (row 3's data on b).
    for n in ["a", "b", "c", "d"] {
        let mut bytes = std::fs::read(d.path(n)).unwrap();
        let mut header = DriveHeader::parse(&bytes[4096..]).unwrap();
        let newest = header.label.last_update;
        header.label.last_update = Timeval::save_stamp(newest, newest, true);
        bytes[4096..4096 + 512].copy_from_slice(&header.to_bytes().unwrap());
        if n == "b" {
            let at = d.config().subdisk("r5.p0.s0").unwrap().drive_offset + 3 * 32_768 + 9;
            bytes[at as usize] ^= 0x0f;
        }
        std::fs::write(d.path(n), bytes).unwrap();
    }
    let drives: Vec<&str> = ["b", "c", "d"].iter().map(|n| d.path(n)).collect();
    let vinum = |verb: &str, extra: &[&str]| {
        let mut args = vec!["vinum", verb];
        args.extend_from_slice(extra);
        args.extend(drives.iter().copied());
        uraid(&args)
    };
    let e = refused(vinum("checkparity", &["r5.p0"]));
    assert!(e.contains("1 of 128 rows"), "{e}");
    // Degraded, it is not run at all: data rebuilt from that row's parity would be wrong.
    let e = refused(d.run("cat", "r5", &[], &["b", "c"], b""));
    assert!(e.contains("was not stopped cleanly") && e.contains("refusing"), "{e}");
    let examined = String::from_utf8(ok(uraid(&["examine", d.path("c")]))).unwrap();
    assert!(examined.contains("uraid's unclean mark"), "{examined}");
    // A command-line save keeps the mark.
    ok(uraid(&["vinum", "saveconfig", d.path("a"), d.path("b"), d.path("c"), d.path("d")]));
    assert!(marked_unclean(d.path("c")));
    // `start` rewrites the parity and saves the volume clean.
    let out = String::from_utf8(ok(vinum("start", &["r5"]))).unwrap();
    assert!(out.contains("volume r5: parity rewritten; saved clean"), "{out}");
    ok(vinum("checkparity", &["r5.p0"]));
    for n in ["b", "c", "d"] {
        assert!(!marked_unclean(d.path(n)), "saved clean");
    }
    // Parity follows the data as it was found: c rebuilt from b and d reads what c holds.
    let now = d.cat("r5", &["b", "c", "d"]);
    assert_eq!(d.cat("r5", &["b", "d"]), now);
}

#[test]
fn start_revives_what_a_write_missed_and_refuses_what_gvinum_cannot_start() {
    let d = Drives::new();
    let model = random(16 * MIB as usize, 8);
    // Written without drive b: the concat plex's second subdisk misses it.
    ok(d.write("mv", 0, &model, &["a", "c", "d"]));
    assert_eq!(d.subdisk_state("mv.p0.s1"), SubdiskState::Down);
    let all: Vec<&str> = ["a", "b", "c", "d"].iter().map(|n| d.path(n)).collect();
    let mut args = vec!["vinum", "start", "mv"];
    args.extend(all.iter().copied());
    let out = String::from_utf8(ok(uraid(&args))).unwrap();
    assert!(out.contains("volume mv: revived mv.p0.s1"), "{out}");
    assert_eq!(d.subdisk_state("mv.p0.s1"), SubdiskState::Up);
    assert_eq!(d.cat("mv", &["a", "b"]), model, "the concat plex alone, revived");
    let out = String::from_utf8(ok(uraid(&args))).unwrap();
    assert!(out.contains("nothing to start"), "{out}");
    for (object, says) in
        [("mv.p0.s1", "cannot start 'mv.p0.s1' - not yet supported"), ("nosuch", "unknown object 'nosuch'")]
    {
        let mut args = vec!["vinum", "start", object];
        args.extend(all.iter().copied());
        let e = refused(uraid(&args));
        assert!(e.contains(says), "{e}");
    }
}

#[test]
fn start_initialises_a_raid5_plex_that_is_down() {
    let d = Drives::new();
    ok(d.write("r5", 0, &random(8 * MIB as usize, 9), &["b", "c", "d"]));
    // Two of its three subdisks stale and the plex down, as the drives would hold them after
    // the plex lost them: its data cannot be rebuilt, only initialised.
    for drive in ["a", "b", "c", "d"] {
        let path = d.path(drive);
        let mut bytes = std::fs::read(path).unwrap();
        let mut meta = DriveMetadata::parse(&bytes[..135_680]).unwrap();
        meta.config_text = meta
            .config_text
            .lines()
            .map(|l| match l {
                l if l.starts_with("sd name r5.p0.s0 ") || l.starts_with("sd name r5.p0.s1 ") => {
                    l.replace("state up", "state stale")
                }
                l if l.starts_with("plex name r5.p0 ") => l.replace("state up", "state down"),
                l => l.to_string(),
            })
            .map(|l| l + "\n")
            .collect();
        bytes[..135_680].copy_from_slice(&meta.to_bytes().unwrap());
        std::fs::write(path, bytes).unwrap();
    }
    let e = refused(d.run("cat", "r5", &[], &["b", "c", "d"], b""));
    assert!(e.contains("r5.p0.s0 (stale), r5.p0.s1 (stale)"), "{e}");
    let out = uraid(&["vinum", "start", "r5", d.path("b"), d.path("c"), d.path("d")]);
    assert!(stderr(&out).contains("every subdisk is zero-filled"), "{}", stderr(&out));
    assert!(String::from_utf8(ok(out)).unwrap().contains("volume r5: initialised"));
    for sd in ["r5.p0.s0", "r5.p0.s1", "r5.p0.s2"] {
        assert_eq!(d.subdisk_state(sd), SubdiskState::Up, "{sd}");
    }
    assert!(d.cat("r5", &["b", "c", "d"]).iter().all(|&b| b == 0), "zero-filled");
    // Every row's parity is right: any one drive can go.
    assert!(d.cat("r5", &["b", "d"]).iter().all(|&b| b == 0), "c rebuilt from parity");
    ok(uraid(&["vinum", "checkparity", "r5.p0", d.path("b"), d.path("c"), d.path("d")]));
}

#[test]
fn examine_and_detail_describe_drives_and_volumes() {
    let d = Drives::new();
    let out = String::from_utf8(ok(uraid(&["examine", d.path("a")]))).unwrap();
    assert!(out.contains("Format : gvinum drive, canonical") && out.contains("Drive : a"), "{out}");
    assert!(out.contains("mv.p0.s0 at byte 135680, 8388608 bytes, up, plex mv.p0"), "{out}");
    assert!(out.contains("mv.p1.s2 at byte 8524288"), "{out}");
    let json: serde_json::Value = serde_json::from_slice(&ok(uraid(&["examine", "--json", d.path("b")]))).unwrap();
    assert_eq!(json[0]["format"], "gvinum");
    assert_eq!(json[0]["subdisks"].as_array().unwrap().len(), 2);
    assert_eq!(json[0]["config_from_second_copy"], false);
    // Copy 1 damaged (a save cut short inside it): read from copy 2, and said so.
    let mut bytes = std::fs::read(d.path("b")).unwrap();
    bytes[4608..4608 + 13].copy_from_slice(b"\x01\x02 not a line");
    std::fs::write(d.path("b"), bytes).unwrap();
    let out = String::from_utf8(ok(uraid(&["examine", d.path("b")]))).unwrap();
    assert!(out.contains("Configuration : copy 2 (copy 1 cannot be read"), "{out}");
    assert!(out.contains("mv.p0.s1 at byte 135680"), "{out}");
    // detail of a volume missing a drive: what serves and what does not.
    let out =
        String::from_utf8(ok(uraid(&["detail", "--volume", "mv", d.path("a"), d.path("c"), d.path("d")]))).unwrap();
    assert!(out.contains("Layout : 2 plexes: concat, striped") && out.contains("Array Size : 16777216 bytes"), "{out}");
    assert!(out.contains("mv.p0.s1") && out.contains("(drive not found)"), "{out}");
    let json: serde_json::Value = serde_json::from_slice(&ok(uraid(&[
        "detail",
        "--json",
        "--volume",
        "r5",
        "--scan",
        &d.dir().display().to_string(),
    ])))
    .unwrap();
    assert_eq!(json["size"], 8 * MIB);
    assert_eq!(json["subdisks"].as_array().unwrap().len(), 3);
    assert_eq!(json["plexes"][0]["stripe_size"], 32768);
    // Neither md, gvinum nor RAIDframe: said so.
    let stray = d.dir().join("stray.img");
    std::fs::write(&stray, vec![0u8; 200_000]).unwrap();
    let e = refused(uraid(&["examine", &stray.display().to_string()]));
    assert!(e.contains("no gvinum drive header or RAIDframe component label either"), "{e}");
}

/// A raid5 plex mirrored with a concat plex (two levels of engine arrays): the concat plex
/// joins stale and `start` revives it from the raid5 plex; writes then go to both (each plex
/// alone reads them, `--plex` read-only); the raid5 plex's own parity is checked and rebuilt
/// by `checkparity`/`rebuildparity` without touching the other plex; with a drive of the raid5
/// plex gone the volume still reads and writes, and `start` rebuilds that subdisk.
#[test]
fn a_raid5_plex_mirrored_with_a_concat_plex_runs_whole() {
    let dir = tempfile::tempdir_in(scratch_dir("vinum-volumes")).unwrap();
    let paths: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| {
            let p = dir.path().join(format!("{n}.img"));
            std::fs::File::create(&p).unwrap().set_len(8 * MIB).unwrap();
            p.display().to_string()
        })
        .collect();
    let drives: String =
        ["a", "b", "c", "d"].iter().zip(&paths).map(|(n, p)| format!("drive {n} device {p}\n")).collect();
    let raid5 =
        "volume m\n plex org raid5 64k\n  sd length 2m drive a\n  sd length 2m drive b\n  sd length 2m drive c\n";
    ok(uraid_stdin(&["vinum", "create", "-"], format!("{drives}{raid5}").as_bytes()));
    let mut model = random(4 * MIB as usize, 11);
    let run = |verb: &[&str], on: &[usize], input: &[u8]| {
        let mut a: Vec<&str> = verb.to_vec();
        a.extend(on.iter().map(|&i| paths[i].as_str()));
        uraid_stdin(&a, input)
    };
    let all = [0, 1, 2, 3];
    ok(run(&["write", "--volume", "m", "--offset", "0"], &all, &model));
    // A concat plex joins the volume, stale: read around until it is revived.
    let dir_text = dir.path().display().to_string();
    let concat = "plex name m.p1 org concat volume m\n sd name m.p1.s0 length 4m drive d plex m.p1\n";
    ok(uraid_stdin(&["vinum", "create", "--scan", &dir_text, "-"], concat.as_bytes()));
    assert!(ok(run(&["cat", "--volume", "m"], &all, b"")) == model, "read from the raid5 plex");
    let out = ok(uraid(&["vinum", "start", "--scan", &dir_text, "m.p1"]));
    assert!(String::from_utf8_lossy(&out).contains("revived m.p1.s0"), "{}", String::from_utf8_lossy(&out));
    let plex_alone = |plex: &str| {
        let out = run(&["cat", "--volume", "m", "--plex", plex], &all, b"");
        assert!(stderr(&out).contains(&format!("reading plex {plex} of volume m on its own (read-only)")));
        ok(out)
    };
    assert!(plex_alone("m.p1") == model, "the revived concat plex alone");
    // Writes go to both plexes: the raid5 plex by stripe updates, the concat plex as a copy.
    let patch = random(300_001, 12);
    model[1_000_000..1_300_001].copy_from_slice(&patch);
    ok(run(&["write", "--volume", "m", "--offset", "1000000"], &all, &patch));
    assert!(plex_alone("m.p0") == model && plex_alone("m.p1") == model, "each plex alone");
    let e = refused(run(&["cat", "--volume", "m", "--plex", "m.p7"], &all, b""));
    assert!(e.contains("has no plex \"m.p7\" (its plexes: m.p0, m.p1)"), "{e}");
    let e = refused(run(&["write", "--volume", "m", "--plex", "m.p0", "--offset", "0"], &all, b"x"));
    assert!(e.contains("read-only"), "{e}");
    // The raid5 plex's parity, on its own: a parity byte spoiled on b (the second subdisk holds
    // row 1's parity, left-asymmetric over three) is found and rewritten, the data untouched.
    let check = |verb: &str| run(&["vinum", verb, "m.p0"], &all, b"");
    assert!(String::from_utf8_lossy(&ok(check("checkparity"))).contains("all correct"));
    let b_path = &paths[1];
    let mut b = std::fs::read(b_path).unwrap();
    let at = 135_680 + 64 * 1024 + 100;
    b[at] ^= 0x5a;
    std::fs::write(b_path, &b).unwrap();
    let e = refused(check("checkparity"));
    assert!(e.contains("1 of 32 rows have parity that disagrees"), "{e}");
    assert!(String::from_utf8_lossy(&ok(check("rebuildparity"))).contains("1 of 32 rows had parity that disagreed"));
    assert!(String::from_utf8_lossy(&ok(check("checkparity"))).contains("all correct"));
    assert!(plex_alone("m.p0") == model && plex_alone("m.p1") == model, "parity rebuilt, data kept");
    // Drive b gone: the raid5 plex serves degraded beside the concat plex, and takes writes.
    let patch = random(77_777, 13);
    model[3_000_000..3_077_777].copy_from_slice(&patch);
    ok(run(&["write", "--volume", "m", "--offset", "3000000"], &[0, 2, 3], &patch));
    assert!(ok(run(&["cat", "--volume", "m"], &[0, 2, 3], b"")) == model);
    // With b back, `start` rebuilds its stale subdisk from the plex's parity.
    let out = ok(uraid(&["vinum", "start", "--scan", &dir_text, "m"]));
    assert!(String::from_utf8_lossy(&out).contains("revived m.p0.s1"), "{}", String::from_utf8_lossy(&out));
    assert!(plex_alone("m.p0") == model && plex_alone("m.p1") == model, "after the rebuild");
    assert!(String::from_utf8_lossy(&ok(check("checkparity"))).contains("all correct"));
}

/// A mirror of two concat plexes cut at odd sectors (gvinum takes lengths in sectors), so that
/// no subdisk boundary of one plex is one of the other or a whole 4 KiB: written and read
/// whole and from either plex alone; a subdisk a write missed is revived by `start`, and its
/// plex alone then reads the same.
#[test]
fn a_mirror_of_plexes_cut_at_odd_sectors_runs() {
    let (_dir, paths) = blank_drives(&["e", "f", "g"], 8 * MIB);
    let description = format!(
        "drive e device {}\ndrive f device {}\ndrive g device {}\nvolume odd\n  plex org concat\n    sd length 5003s drive e\n    sd length 6000s drive f\n  plex org concat\n    sd length 7001s drive g\n    sd length 4002s drive g\n",
        paths[0], paths[1], paths[2]
    );
    ok(uraid_stdin(&["vinum", "create", "-"], description.as_bytes()));
    let run = |verb: &str, args: &[&str], drives: &[usize], input: &[u8]| {
        let mut all: Vec<&str> = vec![verb, "--volume", "odd"];
        all.extend_from_slice(args);
        all.extend(drives.iter().map(|&d| paths[d].as_str()));
        uraid_stdin(&all, input)
    };
    let size = 11003 * 512;
    let mut model = random(size, 21);
    ok(run("write", &["--offset", "0"], &[0, 1, 2], &model));
    assert_eq!(ok(run("cat", &[], &[0, 1, 2], b"")), model);
    assert_eq!(ok(run("cat", &[], &[0, 1], b"")), model, "plex odd.p0 alone");
    assert_eq!(ok(run("cat", &[], &[2], b"")), model, "plex odd.p1 alone");
    // Written without drive f: odd.p0.s1 misses it, and start revives it from the other plex.
    let patch = random(1_000_000, 22);
    ok(run("write", &["--offset", "2561000"], &[0, 2], &patch));
    model[2_561_000..3_561_000].copy_from_slice(&patch);
    let out = String::from_utf8(ok(uraid(&["vinum", "start", "odd", &paths[0], &paths[1], &paths[2]]))).unwrap();
    assert!(out.contains("revived odd.p0.s1"), "{out}");
    assert_eq!(ok(run("cat", &[], &[0, 1], b"")), model, "plex odd.p0 alone, revived");
    assert_eq!(ok(run("cat", &[], &[0, 1, 2], b"")), model);
}
