//! `uraid raidctl` judged by NetBSD's own driver (the raidframe oracle, see
//! `uraid_testkit::raidframe_oracle`): the same images, copied twice, go through the same verbs,
//! once with `uraid raidctl VERB CONF` and once with the driver's `raidctl -c CONF raid0;
//! raidctl VERB raid0; raidctl -u raid0`; afterwards the two copies of every component must be
//! the same file, byte for byte: labels (mod_counter, clean flag, status, serial, autoconfigure,
//! parity map fields), parity maps and data areas.
//!
//! Where the reports are compared (`-s`, `-G`, `-m`), the driver's component names (`/diskN`) are
//! replaced by uraid's, and the labels' mod_counter and clean lines are left out: the driver
//! reports the labels of a set it has just configured and opened for the report (counter three
//! above the labels', and marked dirty by that open, `rf_markalldirty`), uraid the labels as
//! they are on the components. The labels themselves are compared on disk after every verb.

use std::path::{Path, PathBuf};
use std::process::Output;

use uraid_raidframe_format::label::ComponentLabel;
use uraid_raidframe_format::layout::{self, ParityMap};
use uraid_testkit::raidframe_oracle::Kernel;
use uraid_testkit::scratch_dir;

mod common;
use common::{uraid, uraid_stdin};

const MIB: u64 = 1 << 20;

#[track_caller]
fn ok(o: Output) -> String {
    assert!(o.status.success(), "exit {:?}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Two folders, `uraid` and `netbsd`, each with `columns + spares` blank components of `size`
/// bytes, and a configuration file for each naming them (uraid's by relative path).
struct Pair {
    dir: PathBuf,
    count: usize,
    conf: String,
}

impl Pair {
    fn new(name: &str, level: char, columns: usize, spares: usize, sect_per_su: u32, size: u64) -> Pair {
        let dir = scratch_dir(&format!("raidctl-peer/{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        let count = columns + spares;
        for side in ["uraid", "netbsd"] {
            std::fs::create_dir_all(dir.join(side)).unwrap();
            for i in 0..count {
                let f = std::fs::File::create(dir.join(side).join(format!("c{i}.img"))).unwrap();
                f.set_len(size).unwrap();
            }
        }
        let text = |name: &dyn Fn(usize) -> String| {
            let disks: Vec<String> = (0..columns).map(name).collect();
            let spare: Vec<String> = (columns..count).map(name).collect();
            let spare_section = if spares > 0 { format!("START spare\n{}\n", spare.join("\n")) } else { String::new() };
            format!(
                "START array\n1 {columns} {spares}\nSTART disks\n{}\n{spare_section}START layout\n{sect_per_su} 1 1 {level}\nSTART queue\nfifo 100\n",
                disks.join("\n")
            )
        };
        std::fs::write(dir.join("uraid/raid0.conf"), text(&|i| format!("c{i}.img"))).unwrap();
        std::fs::write(dir.join("netbsd/raid0.conf"), text(&|i| format!("/disk{i}"))).unwrap();
        let conf = dir.join("uraid/raid0.conf").display().to_string();
        Pair { dir, count, conf }
    }

    fn images(&self, side: &str) -> Vec<PathBuf> {
        (0..self.count).map(|i| self.dir.join(side).join(format!("c{i}.img"))).collect()
    }

    fn kernel(&self) -> Kernel {
        Kernel::start(&self.dir.join("netbsd/k"), &self.images("netbsd"))
    }

    fn netbsd_conf(&self) -> String {
        self.dir.join("netbsd/raid0.conf").display().to_string()
    }

    /// `uraid raidctl ARGS CONF`.
    fn uraid(&self, args: &[&str]) -> String {
        let mut all = vec!["raidctl"];
        all.extend_from_slice(args);
        all.push(&self.conf);
        ok(uraid(&all))
    }

    /// A new set on both sides with serial number `serial`: `uraid raidctl -I`, and the
    /// driver's `-C; -I; -u`.
    fn label_both(&self, kernel: &Kernel, serial: &str) {
        self.uraid(&["-I", serial]);
        kernel.raidctl_ok(&["-C", &self.netbsd_conf(), "raid0"]);
        kernel.raidctl_ok(&["-I", serial, "raid0"]);
        kernel.raidctl_ok(&["-u", "raid0"]);
    }

    /// The driver's `-c CONF raid0; VERB raid0; -u raid0`.
    fn netbsd(&self, kernel: &Kernel, args: &[&str]) -> String {
        kernel.raidctl_ok(&["-c", &self.netbsd_conf(), "raid0"]);
        let mut all = args.to_vec();
        all.push("raid0");
        let out = kernel.raidctl_ok(&all);
        kernel.raidctl_ok(&["-u", "raid0"]);
        out
    }

    /// The same bytes written straight into the data area of both copies of component `i`.
    fn scribble(&self, i: usize, seed: u64) {
        use std::os::unix::fs::FileExt;
        let mut x = seed | 1;
        let bytes: Vec<u8> = (0..256 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for side in ["uraid", "netbsd"] {
            let f = std::fs::OpenOptions::new().write(true).open(&self.images(side)[i]).unwrap();
            f.write_all_at(&bytes, layout::data_offset(512) + 64 * 1024).unwrap();
        }
    }

    /// Every component the same on both sides; a difference is told field by field.
    #[track_caller]
    fn assert_same(&self, after: &str) {
        for (u, n) in self.images("uraid").iter().zip(self.images("netbsd")) {
            let (a, b) = (std::fs::read(u).unwrap(), std::fs::read(&n).unwrap());
            if a == b {
                continue;
            }
            let label = |bytes: &[u8]| ComponentLabel::decode(&bytes[layout::LABEL_OFFSET as usize..]).ok();
            let map = |bytes: &[u8]| ParityMap::parse(&bytes[layout::parity_map_offset(512) as usize..][..512]).ok();
            assert_eq!(label(&a), label(&b), "after {after}: labels of {} (uraid left, NetBSD right)", u.display());
            assert_eq!(map(&a), map(&b), "after {after}: parity maps of {}", u.display());
            let first = a.iter().zip(&b).position(|(x, y)| x != y).unwrap();
            panic!("after {after}: {} differs from NetBSD's copy first at byte {first}", u.display());
        }
    }
}

/// The driver's report with its component names made uraid's and mod_counter lines left out.
fn normalized(report: &str, count: usize) -> String {
    let mut text = report.to_string();
    for i in 0..count {
        text = text.replace(&format!("/disk{i}"), &format!("c{i}.img"));
    }
    text.lines().filter(|l| !l.contains("Mod Counter") && !l.contains("Clean: ")).map(|l| format!("{l}\n")).collect()
}

fn without_counters(report: &str) -> String {
    report.lines().filter(|l| !l.contains("Mod Counter") && !l.contains("Clean: ")).map(|l| format!("{l}\n")).collect()
}

impl Pair {
    /// Make NetBSD's copies what uraid's are again (after a report, which moves the driver's
    /// counters and changes nothing else).
    fn resync_netbsd(&self) {
        use std::os::unix::fs::FileExt;
        for (u, n) in self.images("uraid").iter().zip(self.images("netbsd")) {
            let f = std::fs::OpenOptions::new().write(true).open(&n).unwrap();
            f.write_all_at(&std::fs::read(u).unwrap(), 0).unwrap();
        }
    }

    /// `uraid raidctl REPORT CONF` and the driver's, compared; uraid's must succeed exactly when
    /// the driver's does. NetBSD's copies are then made uraid's again.
    #[track_caller]
    fn same_report(&self, kernel: &Kernel, verb: &str) {
        let ours = uraid(&["raidctl", verb, &self.conf]);
        kernel.raidctl_ok(&["-c", &self.netbsd_conf(), "raid0"]);
        let theirs = kernel.raidctl(&[verb, "raid0"]);
        kernel.raidctl_ok(&["-u", "raid0"]);
        assert_eq!(ours.status.success(), theirs.status.success(), "{verb}: exit status");
        assert_eq!(
            without_counters(&String::from_utf8_lossy(&ours.stdout)),
            normalized(&String::from_utf8_lossy(&theirs.stdout), self.count),
            "{verb}: uraid's report (left) against NetBSD's"
        );
        self.resync_netbsd();
    }
}

#[test]
fn a_raid5_set_made_and_managed_by_uraid_is_what_netbsd_makes() {
    let pair = Pair::new("r5", '5', 3, 1, 32, 4 * MIB);
    let kernel = pair.kernel();
    let nb = pair.netbsd_conf();

    // A new set: -C, -I, -u on the driver.
    pair.label_both(&kernel, "2026");
    pair.assert_same("-C; -I 2026; -u");
    for verb in ["-s", "-p", "-m", "-G", "-S"] {
        pair.same_report(&kernel, verb);
    }

    // Data put straight into the components: the rewrite must make the same parity of it.
    for i in 0..3 {
        pair.scribble(i, 17 + i as u64);
    }
    pair.uraid(&["-i"]);
    pair.netbsd(&kernel, &["-iv"]);
    pair.assert_same("-i");
    for verb in ["-s", "-p", "-m", "-G"] {
        pair.same_report(&kernel, verb);
    }

    for (ours, theirs) in [
        (vec!["-A", "softroot"], vec!["-A", "softroot"]),
        (vec!["-A", "yes"], vec!["-A", "yes"]),
        (vec!["-M", "no"], vec!["-M", "no"]),
        (vec!["-I", "99"], vec!["-I", "99"]),
        (vec!["-M", "yes"], vec!["-M", "yes"]),
    ] {
        pair.uraid(&ours);
        pair.netbsd(&kernel, &theirs);
        pair.assert_same(&ours.join(" "));
        pair.same_report(&kernel, "-s");
    }

    // -f: how many times the driver bumps the counters around `rf_FailDisk` varies with the
    // state of its parity map (survivors 8 or 10 above the set's counter, the failed component
    // 3 or 4, seen on the same kind of set). What holds: the survivors agree in everything but
    // the counter, the failed component is left behind them, and the next configuration fails
    // it on both sides.
    pair.uraid(&["-f", "c1.img"]);
    pair.netbsd(&kernel, &["-f", "/disk1"]);
    let label = |p: &Path| {
        let mut l = ComponentLabel::decode(&std::fs::read(p).unwrap()[layout::LABEL_OFFSET as usize..]).unwrap();
        let counter = l.mod_counter;
        (l.mod_counter, l.parity_map_modcount) = (0, 0);
        (l, counter)
    };
    let (ours, theirs) = (pair.images("uraid"), pair.images("netbsd"));
    for c in [0, 2] {
        assert_eq!(label(&ours[c]).0, label(&theirs[c]).0, "-f: survivor {c}");
    }
    for (name, side) in [("uraid", &ours), ("netbsd", &theirs)] {
        let counters: Vec<i32> = side[..3].iter().map(|p| label(p).1).collect();
        assert!(
            counters[1] < counters[0],
            "-f: the failed component is behind on {name}'s side: counters {counters:?}"
        );
        assert_eq!(counters[0], counters[2], "-f: the survivors agree on {name}'s side");
    }
    let ours_s = ok(uraid(&["raidctl", "-s", &pair.conf]));
    assert!(ours_s.contains("c1.img: failed") && ours_s.contains("c1.img status is: failed.  Skipping label."));
    kernel.raidctl_ok(&["-c", &nb, "raid0"]);
    let theirs_s = kernel.raidctl_ok(&["-s", "raid0"]);
    kernel.raidctl_ok(&["-u", "raid0"]);
    assert_eq!(without_counters(&ours_s), normalized(&theirs_s, 4));
}

#[test]
fn raid0_and_raid1_sets_made_by_uraid_are_what_netbsd_makes() {
    for (name, level, columns) in [("r0", '0', 2), ("r1", '1', 2)] {
        let pair = Pair::new(name, level, columns, 0, 16, 3 * MIB);
        let kernel = pair.kernel();
        pair.label_both(&kernel, "7");
        pair.assert_same(&format!("{name}: -C; -I 7; -u"));
        pair.same_report(&kernel, "-p");
        for i in 0..columns {
            pair.scribble(i, 5 + i as u64);
        }
        pair.uraid(&["-i"]);
        pair.netbsd(&kernel, &["-iv"]);
        pair.assert_same(&format!("{name}: -i"));
        pair.same_report(&kernel, "-s");
        pair.same_report(&kernel, "-m");
    }
}

impl Pair {
    /// Component `i` replaced by a new blank one of the same size, on both sides (in place, so
    /// the driver's open image is the new one).
    fn replace_blank(&self, i: usize) {
        for side in ["uraid", "netbsd"] {
            blank(&self.images(side)[i]);
        }
    }

    /// The label of component `i` on `side`, with its counters apart.
    fn label(&self, side: &str, i: usize) -> (ComponentLabel, i32) {
        let bytes = std::fs::read(&self.images(side)[i]).unwrap();
        let mut l = ComponentLabel::decode(&bytes[layout::LABEL_OFFSET as usize..]).unwrap();
        let counter = l.mod_counter;
        (l.mod_counter, l.parity_map_modcount) = (0, 0);
        (l, counter)
    }

    /// The data areas of component `i` on both sides are the same.
    #[track_caller]
    fn same_data(&self, i: usize, after: &str) {
        let start = layout::data_offset(512) as usize;
        let a = std::fs::read(&self.images("uraid")[i]).unwrap();
        let b = std::fs::read(&self.images("netbsd")[i]).unwrap();
        assert!(a[start..] == b[start..], "after {after}: the data areas of component {i} differ");
    }
}

/// The component at `path` replaced by a new blank one of the same size, in place (a driver
/// holding it open sees the new one).
fn blank(path: &Path) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let size = f.metadata().unwrap().len();
    f.set_len(0).unwrap();
    f.set_len(size).unwrap();
}

/// The driver's `-c; VERB -v; -u`, waiting for the verb's reconstruction or copyback.
fn netbsd_waiting(pair: &Pair, kernel: &Kernel, verbs: &[&[&str]]) {
    kernel.raidctl_ok(&["-c", &pair.netbsd_conf(), "raid0"]);
    for verb in verbs {
        let mut all = vec!["-v"];
        all.extend_from_slice(verb);
        all.push("raid0");
        kernel.raidctl_ok(&all);
    }
    kernel.raidctl_ok(&["-u", "raid0"]);
}

#[test]
fn reconstruction_in_place_and_to_a_spare_and_copyback_are_what_netbsd_does() {
    let pair = Pair::new("recon5", '5', 3, 1, 32, 4 * MIB);
    let kernel = pair.kernel();
    let nb = pair.netbsd_conf();
    pair.label_both(&kernel, "2026");
    for i in 0..3 {
        pair.scribble(i, 31 + i as u64);
    }
    pair.uraid(&["-i"]);
    pair.netbsd(&kernel, &["-iv"]);
    pair.assert_same("-i");

    // -R after -f, onto a new blank component: the same files on both sides. (-f's own counters
    // vary on the driver, see above; the copies are made alike again after it.)
    pair.uraid(&["-f", "c1.img"]);
    pair.resync_netbsd();
    pair.replace_blank(1);
    pair.uraid(&["-v", "-R", "c1.img"]);
    netbsd_waiting(&pair, &kernel, &[&["-R", "/disk1"]]);
    pair.assert_same("-f; new blank c1; -R c1");
    pair.same_report(&kernel, "-s");

    // -R onto the failed component itself (its stale label still on it).
    pair.uraid(&["-f", "c2.img"]);
    pair.resync_netbsd();
    pair.uraid(&["-R", "c2.img"]);
    netbsd_waiting(&pair, &kernel, &[&["-R", "/disk2"]]);
    pair.assert_same("-f; -R c2 in place");

    // -F onto the hot spare: the spare takes column 1, the failed component is left behind.
    let before = pair.images("uraid").iter().map(|p| std::fs::read(p).unwrap()).collect::<Vec<_>>();
    pair.uraid(&["-v", "-F", "c1.img"]);
    netbsd_waiting(&pair, &kernel, &[&["-F", "/disk1"]]);
    pair.assert_same("-F c1");
    let ours = ok(uraid(&["raidctl", "-s", &pair.conf]));
    assert!(ours.contains("c1.img: spared") && ours.contains("c3.img: used_spare"), "{ours}");
    assert!(ours.contains("c1.img status is: spared.  Skipping label.") && ours.contains("Component label for c3.img"));
    // Autoconfiguration puts the spare in column 1 and reads the set whole.
    let scan_dir = pair.dir.join("uraid");
    let scanned = ok(uraid(&["raidctl", "-s", "--scan", scan_dir.to_str().unwrap()]));
    assert!(scanned.contains("c3.img: optimal"), "{scanned}");

    // -B: NetBSD copies back within the session that used the spare (its next `-c` takes the
    // file's word: column 1 failed, the spare unused), so its side is `-c; -F; -B; -u` from the
    // same start, and only what does not depend on the number of sessions is compared.
    blank(&pair.images("uraid")[1]);
    pair.uraid(&["-B"]);
    for (i, bytes) in before.iter().enumerate() {
        std::fs::write(&pair.images("netbsd")[i], bytes).unwrap();
    }
    kernel.raidctl_ok(&["-c", &nb, "raid0"]);
    kernel.raidctl_ok(&["-v", "-F", "/disk1", "raid0"]);
    blank(&pair.images("netbsd")[1]);
    kernel.raidctl_ok(&["-v", "-B", "raid0"]);
    kernel.raidctl_ok(&["-u", "raid0"]);
    for i in 0..4 {
        pair.same_data(i, "-B");
    }
    for i in 0..3 {
        let ((ours, oc), (theirs, tc)) = (pair.label("uraid", i), pair.label("netbsd", i));
        assert_eq!(ours, theirs, "-B: label of column {i} (counters apart)");
        assert_eq!(oc, pair.label("uraid", 0).1);
        assert_eq!(tc, pair.label("netbsd", 0).1);
    }
    let ((ours, oc), (theirs, tc)) = (pair.label("uraid", 3), pair.label("netbsd", 3));
    assert_eq!(ours, theirs, "-B: the spare's label left behind (counters apart)");
    assert!(oc < pair.label("uraid", 0).1 && tc < pair.label("netbsd", 0).1, "-B: the spare is stale after");
    let ours = ok(uraid(&["raidctl", "-s", &pair.conf]));
    assert!(ours.contains("c1.img: optimal") && ours.contains("c3.img: spare"), "{ours}");

    // The set uraid rebuilt reads the same through NetBSD's driver as through uraid.
    let size = 2 * (4 * MIB - 32768) / (32 * 512) * (32 * 512);
    let ours = uraid(&["cat", "--raidframe", &pair.conf]).stdout;
    pair.resync_netbsd();
    kernel.raidctl_ok(&["-c", &nb, "raid0"]);
    let theirs = kernel.read("/dev/rraid0d", size);
    kernel.raidctl_ok(&["-u", "raid0"]);
    assert_eq!(ours.len() as u64, size);
    assert!(ours == theirs, "the driver reads the set uraid rebuilt as uraid does");
}

/// Data written through the engine (`uraid write`) into a set uraid made: NetBSD's driver
/// configures the set with `raidctl -c` (its labels agree), reports every component optimal and
/// the parity clean, and reads the set byte for byte as `uraid cat` does.
#[test]
fn netbsd_reads_what_uraid_wrote_through_the_engine() {
    let pair = Pair::new("written", '5', 3, 0, 32, 4 * MIB);
    pair.uraid(&["-I", "11"]);
    pair.uraid(&["-i"]);
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let wrote = uraid_stdin(&["write", "--raidframe", &pair.conf, "--offset", "12345"], &data);
    assert!(wrote.status.success(), "{}", String::from_utf8_lossy(&wrote.stderr));
    let ours = uraid(&["cat", "--raidframe", &pair.conf]).stdout;
    assert!(ours[12345..12345 + data.len()] == data[..], "uraid reads back what it wrote");

    let kernel = Kernel::start(&pair.dir.join("uraid/k"), &pair.images("uraid"));
    let theirs = netbsd_reads_optimal_and_clean(&kernel, &pair.netbsd_conf(), 3, ours.len() as u64);
    assert!(ours == theirs, "the driver reads the set as uraid does");
}

/// A set uraid left behind by a crash while writing: labels dirty, and in the parity map only
/// the region the write went to. NetBSD's driver trusts that map: its `-P` rewrites the marked
/// region's parity and leaves the other region alone (parity spoiled on purpose in both shows
/// which ones it rewrote). uraid's own `-P` rewrites the same, to the same bytes.
#[test]
fn netbsd_rewrites_only_the_region_uraid_marked_before_a_crash() {
    // 64 MiB components: two regions of 2047 stripes of 16 KiB units (the kernel's default
    // count, one per 25 MiB).
    let pair = Pair::new("crashed", '5', 3, 0, 32, 64 * MIB);
    pair.uraid(&["-I", "12"]);
    pair.uraid(&["-i"]);
    let region_member_bytes = 2047 * 16 * 1024;
    let region1_logical = 2047 * 2 * 16 * 1024;
    let mut set = uraid_device::OpenArray::open_raidframe_paths(&pair.images("uraid"), Some(12), true).unwrap();
    set.write(region1_logical + MIB, vec![0x5a; 65536]).unwrap();
    drop(set); // a crash: nothing more is written

    let data_start = layout::data_offset(512);
    let maps: Vec<ParityMap> = pair.images("uraid").iter().map(|p| map_of(p)).collect();
    for map in &maps {
        assert_eq!(map.dirty_regions().collect::<Vec<_>>(), vec![1], "only the region written is marked");
    }
    assert!(pair.images("uraid").iter().all(|p| label_of(p).clean == 0), "the labels say dirty");
    // Spoil a stripe in each region (column 0's bytes, data or parity as the rotation has it).
    for member_offset in [MIB, region_member_bytes + 3 * MIB] {
        patch(&pair.images("uraid")[0], data_start + member_offset, &[0xee; 16384]);
    }
    let before: Vec<Vec<u8>> = pair.images("uraid").iter().map(|p| std::fs::read(p).unwrap()).collect();
    for (from, to) in pair.images("uraid").iter().zip(pair.images("netbsd")) {
        std::fs::copy(from, to).unwrap();
    }

    let kernel = pair.kernel();
    pair.netbsd(&kernel, &["-P"]);
    drop(kernel);
    pair.uraid(&["-P"]);

    for side in ["netbsd", "uraid"] {
        let changed: Vec<u64> = pair
            .images(side)
            .iter()
            .zip(&before)
            .flat_map(|(p, old)| {
                let new = std::fs::read(p).unwrap();
                (data_start as usize..new.len()).step_by(512).filter(move |&at| new[at..at + 512] != old[at..at + 512])
            })
            .map(|at| at as u64 - data_start)
            .collect();
        assert!(!changed.is_empty(), "{side}: the marked region's spoiled stripe is rewritten");
        assert!(
            changed.iter().all(|&at| (region_member_bytes..2 * region_member_bytes).contains(&at)),
            "{side}: only the marked region is rewritten: {changed:?}"
        );
    }
    for (n, u) in pair.images("netbsd").iter().zip(pair.images("uraid")) {
        let (n, u) = (std::fs::read(n).unwrap(), std::fs::read(&u).unwrap());
        assert!(n[data_start as usize..] == u[data_start as usize..], "the same data and parity on both sides");
        assert_eq!(map_of_bytes(&n), map_of_bytes(&u), "the same parity map");
    }
}

/// The driver's `-c CONF raid0`: every one of the `columns` components optimal and the parity
/// clean; then the first `len` bytes it reads of the set, and `-u`.
fn netbsd_reads_optimal_and_clean(kernel: &Kernel, conf: &str, columns: usize, len: u64) -> Vec<u8> {
    kernel.raidctl_ok(&["-c", conf, "raid0"]);
    let status = kernel.raidctl_ok(&["-s", "raid0"]);
    let components: Vec<&str> = status.lines().filter(|l| l.trim_start().starts_with("/disk")).collect();
    assert_eq!(components.len(), columns, "{status}");
    assert!(components.iter().all(|l| l.ends_with(": optimal")), "{status}");
    let parity = kernel.raidctl_ok(&["-p", "raid0"]);
    assert!(parity.contains("Parity status: clean"), "{parity}");
    let theirs = kernel.read("/dev/rraid0d", len);
    kernel.raidctl_ok(&["-u", "raid0"]);
    theirs
}

fn label_of(path: &Path) -> ComponentLabel {
    let bytes = std::fs::read(path).unwrap();
    ComponentLabel::parse(&bytes[layout::LABEL_OFFSET as usize..]).unwrap()
}

fn map_of(path: &Path) -> ParityMap {
    map_of_bytes(&std::fs::read(path).unwrap())
}

fn map_of_bytes(bytes: &[u8]) -> ParityMap {
    ParityMap::parse(&bytes[layout::parity_map_offset(512) as usize..][..512]).unwrap()
}

fn patch(path: &Path, at: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(bytes).unwrap();
}

/// A served set's component is failed online (`uraid ctl SOCKET fail C`, as `raidctl -f`) and a
/// hot spare added (`uraid ctl SOCKET add SPARE`, as `raidctl -a` then `-F`): the failed column
/// is reconstructed onto the spare while the set serves, the spare's label joins the others'
/// once it is in sync, and NetBSD's driver configures the set with the spare in that column, all
/// optimal, and reads it as uraid does.
#[test]
fn a_served_set_fails_a_component_and_reconstructs_onto_a_spare_added_online() {
    let pair = Pair::new("online-spare", '5', 3, 1, 32, 4 * MIB);
    pair.uraid(&["-I", "13"]);
    pair.uraid(&["-i"]);
    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i.wrapping_mul(2_246_822_519) >> 11) as u8).collect();
    let wrote = uraid_stdin(&["write", "--raidframe", &pair.conf, "--offset", "4096"], &data);
    assert!(wrote.status.success(), "{}", String::from_utf8_lossy(&wrote.stderr));
    let images = pair.images("uraid");
    let want = uraid(&["cat", "--raidframe", &pair.conf]).stdout;
    assert!(want[4096..4096 + data.len()] == data[..], "read back");

    let dir = pair.dir.join("uraid");
    let (nbd, control) = (dir.join("nbd.sock"), dir.join("ctl.sock"));
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["serve", "--raidframe", &pair.conf])
        .arg(format!("--listen=unix:{}", nbd.display()))
        .arg(format!("--control={}", control.display()))
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&control).is_err() {
        assert!(std::time::Instant::now() < deadline, "the control socket never appeared");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let ctl = |args: &[&str]| {
        let socket = control.display().to_string();
        let mut all = vec!["ctl", socket.as_str()];
        all.extend_from_slice(args);
        uraid(&all)
    };
    // Column 1's component failed while the set serves (`raidctl -f`), then the spare added.
    let c1 = images[1].display().to_string();
    let failed = ctl(&["fail", &c1]);
    assert!(failed.status.success(), "{}", String::from_utf8_lossy(&failed.stderr));
    let status: serde_json::Value = serde_json::from_slice(&ctl(&["status", "--json"]).stdout).unwrap();
    assert_eq!(status["degraded"], 1, "{status:#}");
    let spare = images[3].display().to_string();
    let added = ctl(&["add", &spare]);
    let said = String::from_utf8_lossy(&added.stdout).to_string() + &String::from_utf8_lossy(&added.stderr);
    assert!(added.status.success() && said.contains("slot 1"), "{said}");
    let waited: serde_json::Value = serde_json::from_slice(&ctl(&["wait", "--json"]).stdout).unwrap();
    assert_eq!(waited["degraded"], 0, "{waited:#}");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success(), "{}", std::fs::read_to_string(dir.join("serve.log")).unwrap());

    let spare_label = label_of(&images[3]);
    let set_label = label_of(&images[0]);
    assert_eq!((spare_label.column, spare_label.status, spare_label.clean), (1, 0, 1));
    assert_eq!((spare_label.serial_number, spare_label.mod_counter), (13, set_label.mod_counter));
    assert!(label_of(&images[1]).mod_counter < set_label.mod_counter, "the failed component is left stale");
    assert!(uraid(&["cat", "--raidframe", &pair.conf]).stdout == want, "uraid reads the set through the spare");

    // NetBSD's driver, the spare named in column 1.
    let conf = dir.join("netbsd-spare.conf");
    std::fs::write(
        &conf,
        "START array\n1 3 0\nSTART disks\n/disk0\n/disk3\n/disk2\nSTART layout\n32 1 1 5\nSTART queue\nfifo 100\n",
    )
    .unwrap();
    let kernel = Kernel::start(&dir.join("k"), &images);
    let theirs = netbsd_reads_optimal_and_clean(&kernel, &conf.display().to_string(), 3, want.len() as u64);
    assert!(theirs == want, "the driver reads the set as uraid does");
}

/// A set NetBSD's driver left in the middle of a reconstruction in place (the kernel killed
/// while `-R` rebuilt column 1 of 1 GiB components): the component being rebuilt still has its
/// old, stale label, the others are dirty. uraid runs it degraded without the half-rebuilt
/// component, refuses to run it writable (dirty and degraded), and reads it read-only as the
/// driver wrote it.
#[test]
fn a_set_netbsd_left_in_the_middle_of_a_reconstruction_is_read() {
    let pair = Pair::new("mid-reconstruction", '5', 3, 0, 32, 1024 * MIB);
    let kernel = pair.kernel();
    kernel.raidctl_ok(&["-C", &pair.netbsd_conf(), "raid0"]);
    kernel.raidctl_ok(&["-I", "14", "raid0"]);
    let data: Vec<u8> = (0..4 * MIB as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 17) as u8).collect();
    let file = pair.dir.join("netbsd/data.bin");
    std::fs::write(&file, &data).unwrap();
    kernel.write("/dev/rraid0d", &file, 65536);
    kernel.raidctl_ok(&["-f", "/disk1", "raid0"]);
    // `-R` returns at once and the kernel rebuilds in the background (about a minute here;
    // `-S` would wait for it): killed now, the reconstruction is cut short.
    kernel.raidctl_ok(&["-R", "/disk1", "raid0"]);
    kernel.crash();

    let images = pair.images("netbsd");
    let (stale, set) = (label_of(&images[1]), label_of(&images[0]));
    assert!(
        stale.mod_counter < set.mod_counter,
        "cut short, the component being rebuilt keeps its old label: {stale:?} against {set:?}"
    );
    let conf = pair.dir.join("netbsd/uraid.conf");
    std::fs::write(
        &conf,
        "START array\n1 3 0\nSTART disks\nc0.img\nc1.img\nc2.img\nSTART layout\n32 1 1 5\nSTART queue\nfifo 100\n",
    )
    .unwrap();
    let conf = conf.display().to_string();
    let before: Vec<Vec<u8>> = images.iter().map(|p| std::fs::read(p).unwrap()[..65536].to_vec()).collect();
    let read = uraid(&["cat", "--raidframe", &conf, "--length", &(4 * MIB).to_string()]);
    let said = String::from_utf8_lossy(&read.stderr).to_string();
    assert!(read.status.success(), "{said}");
    assert!(read.stdout == data, "uraid reads the set as the driver wrote it");
    assert!(said.contains("column 1") && said.contains("degraded"), "{said}");
    let written = uraid_stdin(&["write", "--raidframe", &conf, "--offset", "0"], &[1u8; 512]);
    let said = String::from_utf8_lossy(&written.stderr);
    assert!(!written.status.success() && said.contains("degraded"), "{said}");
    let after: Vec<Vec<u8>> = images.iter().map(|p| std::fs::read(p).unwrap()[..65536].to_vec()).collect();
    assert!(before == after, "nothing is written to the components");
}
