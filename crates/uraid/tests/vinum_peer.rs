//! Cross-check of uraid-made gvinum drives with an independent reader, end to end: drives
//! are made by the real binary (`uraid vinum create` and the shortcut verbs), every volume is
//! filled with random bytes by `uraid write --volume` (or, for random shapes, by an NBD client
//! through `uraid serve --volume`), and then the Python package
//! `dissect.volume` reads the drives (`crates/vinum/format/tests/peer/dissect_volumes.py`).
//! It must see the volumes, plexes and subdisks `uraid vinum list --json` lists (names, sizes,
//! organisations, stripe sizes, offsets, states), and read every volume, and every plex of a
//! mirror, as the bytes `uraid cat --volume` reads and the bytes written.
//!
//! FreeBSD's `sys/geom/vinum` is the authority on where bytes go, not dissect.volume. Where
//! dissect.volume maps or sizes differently from the kernel, the tests below say exactly what
//! it does instead (so a change in it shows), and `docs/vinum.md` lists these shapes.
//!
//! The peer's Python is found by `uraid_testkit::vinum_peer` (the virtualenv
//! `scripts/setup.sh` makes, or `URAID_VINUM_PEER_PYTHON`); without it the tests fail, saying
//! so. Alone: `cargo test -p uraid --test vinum_peer`.

use std::process::{Command, Output};

use serde_json::{json, Value};
use tempfile::TempDir;
use uraid_testkit::{scratch_dir, vinum_peer};
use uraid_vinum_format::drive_layout::DATA_START;

mod common;
use common::{uraid, uraid_stdin};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

#[track_caller]
fn ok(o: Output) -> Vec<u8> {
    assert!(o.status.success(), "exit {:?}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    o.stdout
}

fn random(len: u64, seed: u64) -> Vec<u8> {
    uraid_testkit::random_bytes(len, seed)
}

/// Equal bytes, or the first offset where they differ (not megabytes of both).
#[track_caller]
fn assert_bytes(what: &str, got: &[u8], want: &[u8]) {
    if let Some(at) = got.iter().zip(want).position(|(g, w)| g != w) {
        panic!("{what}: first differing byte at {at} ({:#04x}, expected {:#04x})", got[at], want[at]);
    }
    assert_eq!(got.len(), want.len(), "{what}: length");
}

/// Image files in a scratch folder; drives once a `create` or a shortcut has run on them.
struct Set {
    _dir: TempDir,
    paths: Vec<String>,
}

impl Set {
    fn files(sizes: &[u64]) -> Set {
        let dir = tempfile::tempdir_in(scratch_dir("vinum-peer")).unwrap();
        let paths = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let path = dir.path().join(format!("d{i}.img"));
                std::fs::File::create(&path).unwrap().set_len(size).unwrap();
                path.display().to_string()
            })
            .collect();
        Set { _dir: dir, paths }
    }

    fn all(&self) -> Vec<&str> {
        self.paths.iter().map(String::as_str).collect()
    }

    /// `uraid vinum create` with a drive `dN` on each file and then `objects`.
    fn create(&self, objects: &str) {
        let drives: String = self.paths.iter().enumerate().map(|(i, p)| format!("drive d{i} device {p}\n")).collect();
        ok(uraid_stdin(&["vinum", "create", "-"], format!("{drives}{objects}").as_bytes()));
    }

    /// `uraid vinum VERB [args] FILES...`.
    fn shortcut(&self, args: &[&str]) {
        let mut all = vec!["vinum"];
        all.extend_from_slice(args);
        all.extend(self.all());
        ok(uraid(&all));
    }

    /// `uraid vinum list --json` of every file.
    fn list(&self) -> Value {
        let mut args = vec!["vinum", "list", "--json"];
        args.extend(self.all());
        serde_json::from_slice(&ok(uraid(&args))).unwrap()
    }

    /// Writes random bytes over the whole volume with `uraid write --volume`; they are returned.
    fn fill(&self, list: &Value, volume: &str, seed: u64) -> Vec<u8> {
        let size = named(&list["volumes"], volume)["size"].as_u64().unwrap();
        let data = random(size, seed);
        let mut args = vec!["write", "--volume", volume, "--offset", "0"];
        args.extend(self.all());
        ok(uraid_stdin(&args, &data));
        data
    }

    /// The whole volume as `uraid cat --volume` reads it from `devices`.
    fn cat(&self, volume: &str, devices: &[&str]) -> Vec<u8> {
        let mut args = vec!["cat", "--volume", volume];
        args.extend_from_slice(devices);
        ok(uraid(&args))
    }

    /// The files holding `plex`'s subdisks, by `list`.
    fn plex_devices<'a>(&self, list: &'a Value, plex: &str) -> Vec<&'a str> {
        named(&list["plexes"], plex)["subdisks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|sd| {
                let drive = named(&list["subdisks"], sd.as_str().unwrap())["drive"].as_str().unwrap();
                named(&list["drives"], drive)["device"].as_str().unwrap()
            })
            .collect()
    }
}

/// The object called `name` in a JSON list of objects.
#[track_caller]
fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array().unwrap().iter().find(|o| o["name"] == name).unwrap_or_else(|| panic!("no {name:?} in {list}"))
}

/// What dissect.volume made of some drive files (see dissect_volumes.py for the JSON).
struct Peer {
    out: TempDir,
    json: Value,
}

impl Peer {
    fn read(devices: &[&str]) -> Peer {
        let out = tempfile::tempdir_in(scratch_dir("vinum-peer")).unwrap();
        let output = Command::new(vinum_peer::python())
            .arg(vinum_peer::script("dissect_volumes.py"))
            .arg(out.path())
            .args(devices)
            .output()
            .expect("run the peer's Python");
        assert!(output.status.success(), "dissect.volume failed: {}", String::from_utf8_lossy(&output.stderr));
        let json = serde_json::from_slice(&output.stdout).unwrap();
        Peer { out, json }
    }

    fn volume(&self, name: &str) -> &Value {
        named(&self.json["volumes"], name)
    }

    fn plex(&self, name: &str) -> &Value {
        let plexes = self.json["volumes"].as_array().unwrap().iter().flat_map(|v| v["plexes"].as_array().unwrap());
        plexes.into_iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("dissect has no plex {name}"))
    }

    /// The bytes of a `read` record and the ranges where dissect's stream returned nothing.
    #[track_caller]
    fn bytes(&self, read: &Value) -> (Vec<u8>, Vec<(u64, u64)>) {
        assert!(read["error"].is_null(), "dissect.volume could not read: {}", read["error"]);
        let data = std::fs::read(self.out.path().join(read["file"].as_str().unwrap())).unwrap();
        let holes = read["holes"].as_array().unwrap().iter().map(|h| (h[0].as_u64().unwrap(), h[1].as_u64().unwrap()));
        (data, holes.collect())
    }

    /// The whole volume and every plex of it dissect uses read as `want`, with no gaps.
    #[track_caller]
    fn assert_reads(&self, volume: &str, want: &[u8]) {
        let v = self.volume(volume);
        let (data, holes) = self.bytes(&v["read"]);
        assert_eq!(holes, [], "dissect's volume {volume} has gaps");
        assert_bytes(&format!("dissect's volume {volume}"), &data, want);
        for plex in v["plexes"].as_array().unwrap() {
            let (data, holes) = self.bytes(&plex["read"]);
            assert_eq!(holes, [], "dissect's plex {} has gaps", plex["name"]);
            assert_bytes(&format!("dissect's plex {} of {volume}", plex["name"]), &data, want);
        }
    }
}

/// The volumes (by name), their plexes (by name, dissect's order for a mirror) and subdisks
/// (by plex offset, their column order) in one form to compare, from `uraid vinum list
/// --json` ...
fn uraid_objects(list: &Value) -> Value {
    let mut volumes: Vec<Value> = list["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let mut plexes: Vec<Value> = v["plexes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|name| {
                    let p = named(&list["plexes"], name.as_str().unwrap());
                    let mut subdisks: Vec<Value> = p["subdisks"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|name| {
                            let s = named(&list["subdisks"], name.as_str().unwrap());
                            json!({
                                "name": s["name"], "drive": s["drive"], "size": s["size"],
                                "drive_offset": s["drive_offset"], "plex": s["plex"],
                                "plex_offset": s["plex_offset"], "state": s["state"],
                            })
                        })
                        .collect();
                    subdisks.sort_by_key(|s| s["plex_offset"].as_u64());
                    json!({
                        "name": p["name"], "organization": p["organization"], "stripe_size": p["stripe_size"],
                        "state": p["state"], "volume": p["volume"], "size": p["size"], "subdisks": subdisks,
                    })
                })
                .collect();
            plexes.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
            json!({"name": v["name"], "size": v["size"], "state": v["state"], "plexes": plexes})
        })
        .collect();
    volumes.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Value::Array(volumes)
}

/// ... and the same from what dissect.volume reports.
fn peer_objects(peer: &Value) -> Value {
    let mut volumes: Vec<Value> = peer["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let plexes: Vec<Value> = v["plexes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    json!({
                        "name": p["name"], "organization": p["organization"], "stripe_size": p["stripe_size"],
                        "state": p["state"], "volume": p["volume"], "size": p["size"], "subdisks": p["subdisks"],
                    })
                })
                .collect();
            json!({"name": v["name"], "size": v["size"], "state": v["state"], "plexes": plexes})
        })
        .collect();
    volumes.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Value::Array(volumes)
}

/// dissect.volume sees the objects `uraid vinum list` lists, and its reader's view of every
/// drive and volume is the one expected of it.
#[track_caller]
fn assert_same_objects(list: &Value, peer: &Peer) {
    assert_peer_sees(list, uraid_objects(list), peer);
}

/// dissect.volume sees `objects` (as [`uraid_objects`] gives them), drives as
/// `list` lists them, and RAID levels that follow from the plexes' organisations.
#[track_caller]
fn assert_peer_sees(list: &Value, objects: Value, peer: &Peer) {
    assert_eq!(peer_objects(&peer.json), objects, "dissect.volume's objects (left) differ from the expected");
    for v in peer.json["volumes"].as_array().unwrap() {
        let plexes = v["plexes"].as_array().unwrap();
        let level = |org: &Value| match org.as_str().unwrap() {
            "concat" => "linear",
            "striped" => "raid0",
            "raid5" => "raid5",
            other => panic!("organization {other}"),
        };
        for p in plexes {
            assert_eq!(p["level"], level(&p["organization"]), "dissect's RAID level for plex {}", p["name"]);
        }
        if let [p] = plexes.as_slice() {
            assert_eq!(v["level"], p["level"], "{}", v["name"]);
            assert_eq!(v["stripe_size"], p["stripe_size"].as_u64().unwrap_or(0), "{}", v["name"]);
            assert_eq!(v["num_disks"], p["subdisks"].as_array().unwrap().len(), "{}", v["name"]);
        } else {
            assert_eq!(v["level"], "raid1", "{}", v["name"]);
            assert_eq!(v["num_disks"], plexes.len(), "{}", v["name"]);
        }
    }
    // Every drive found, by the name in its header. dissect takes a drive's data area as
    // starting at the data start and running for the header's drive_size, or when that is 0
    // (gvinum never sets it) for the whole image; the kernel's drive size is the media less
    // the data start, as uraid lists it.
    let drives = peer.json["drives"].as_array().unwrap();
    assert_eq!(drives.len(), list["drives"].as_array().unwrap().len(), "drives");
    for d in drives {
        let ours = list["drives"].as_array().unwrap().iter().find(|o| o["device"] == d["image"]).unwrap();
        assert_eq!(d["name"], ours["name"]);
        assert_eq!(d["active"], true, "{}", d["name"]);
        assert_eq!(d["data_offset"], DATA_START, "{}", d["name"]);
        let image = std::fs::metadata(d["image"].as_str().unwrap()).unwrap().len();
        assert_eq!(d["data_length"], image, "{}: dissect's data length", d["name"]);
        assert_eq!(ours["size"], image - DATA_START, "{}: uraid's drive size", d["name"]);
    }
}

/// Every volume of `set`, written whole with random bytes, reads back through uraid and
/// through dissect.volume (the volume and each of its plexes) as written.
fn check_every_volume(set: &Set, seed: u64) -> Vec<(String, Vec<u8>)> {
    let list = set.list();
    let volumes: Vec<String> =
        list["volumes"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap().to_string()).collect();
    let written: Vec<(String, Vec<u8>)> =
        volumes.iter().enumerate().map(|(i, v)| (v.clone(), set.fill(&list, v, seed + i as u64))).collect();
    let peer = Peer::read(&set.all());
    assert_same_objects(&list, &peer);
    for (volume, data) in &written {
        let ours = set.cat(volume, &set.all());
        assert_bytes(&format!("uraid cat --volume {volume}"), &ours, data);
        peer.assert_reads(volume, &ours);
    }
    written
}

#[test]
fn volumes_of_every_organisation_from_a_description_read_the_same_in_dissect() {
    // One subdisk per drive, at its data start: where dissect.volume looks for it. Drives of
    // whole stripes for dissect's RAID-0 reader (see the odd-size test below).
    let set = Set::files(&[2 * MIB; 13]);
    set.create(
        "\
volume st
  plex org striped 16k
    sd drive d0
    sd drive d1
    sd drive d2
volume r5
  plex org raid5 32k
    sd length 1m drive d3
    sd length 1m drive d4
    sd length 1m drive d5
    sd length 1m drive d6
volume mi
  plex org concat
    sd length 1536k drive d7
  plex org striped 64k
    sd length 768k drive d8
    sd length 768k drive d9
  plex org striped 256k
    sd length 768k drive d10
    sd length 768k drive d11
volume one
  plex org concat
    sd drive d12
",
    );
    let list = set.list();
    // The shapes are what the description says: st's subdisks took their whole drives,
    // trimmed to whole 16 KiB stripes; mi mirrors three plexes of three kinds of layout.
    assert_eq!(named(&list["subdisks"], "st.p0.s0")["size"], (2 * MIB - DATA_START) / (16 * KIB) * (16 * KIB));
    assert_eq!(named(&list["volumes"], "mi")["plexes"].as_array().unwrap().len(), 3);
    assert_eq!(named(&list["volumes"], "r5")["size"], 3 * MIB);
    let written = check_every_volume(&set, 10);
    assert_eq!(written.len(), 4);
}

#[test]
fn volumes_made_by_the_shortcuts_read_the_same_in_dissect_and_so_does_each_plex_of_a_mirror_alone() {
    // (arguments, drives, and the organisation and stripe size the verb gives every plex)
    let cases: [(&[&str], usize, &str, Option<u64>); 5] = [
        (&["stripe", "-n", "sw"], 3, "striped", Some(256 * KIB)),
        (&["raid5", "-s", "64k", "-n", "r64"], 4, "raid5", Some(64 * KIB)),
        (&["mirror", "-n", "mw"], 2, "concat", None),
        (&["mirror", "-s", "-n", "ms"], 4, "striped", Some(256 * KIB)),
        (&["concat", "-n", "c1"], 1, "concat", None),
    ];
    for (seed, (args, drives, organization, stripe)) in (20..).zip(cases) {
        let set = Set::files(&vec![2 * MIB; drives]);
        set.shortcut(args);
        let list = set.list();
        for p in list["plexes"].as_array().unwrap() {
            assert_eq!(p["organization"], organization, "{args:?}");
            assert_eq!(p["stripe_size"], json!(stripe), "{args:?}");
        }
        let written = check_every_volume(&set, seed);
        let plexes = list["plexes"].as_array().unwrap();
        if plexes.len() < 2 {
            continue;
        }
        // A mirror with only one plex's drives: uraid reads that plex; dissect leaves out
        // the plex it has no drives for and reads the volume through the other.
        let (volume, data) = &written[0];
        for p in plexes {
            let name = p["name"].as_str().unwrap();
            let devices = set.plex_devices(&list, name);
            assert_bytes(&format!("uraid cat --volume {volume}, plex {name} alone"), &set.cat(volume, &devices), data);
            let peer = Peer::read(&devices);
            let used: Vec<&Value> =
                peer.volume(volume)["plexes"].as_array().unwrap().iter().map(|p| &p["name"]).collect();
            assert_eq!(used, [&p["name"]], "dissect's plexes of {volume} with {name}'s drives");
            peer.assert_reads(volume, data);
        }
    }
}

#[test]
fn dissect_reads_a_concat_plex_as_whole_images_end_to_end_not_subdisks() {
    let set = Set::files(&[MIB, 2 * MIB]);
    set.shortcut(&["concat", "-n", "cc"]);
    let list = set.list();
    let data = set.fill(&list, "cc", 30);
    assert_bytes("uraid cat --volume cc", &set.cat("cc", &set.all()), &data);
    let peer = Peer::read(&set.all());
    // dissect parses every object right ...
    assert_same_objects(&list, &peer);
    // ... but maps bytes otherwise. FreeBSD (`gv_plex_offset`) puts volume byte o of a concat
    // plex in the subdisk with plex_offset <= o < plex_offset + size, so cc.p0.s1 starts where
    // cc.p0.s0 ends. dissect lays the drives' data areas end to end, each as long as the
    // header's drive_size or, as gvinum leaves that 0, the whole image: cc.p0.s0 seems to run
    // 135680 bytes past its drive's end, where dissect's stream returns nothing, and cc.p0.s1
    // starts at the first image's length.
    let len0 = named(&list["subdisks"], "cc.p0.s0")["size"].as_u64().unwrap() as usize;
    assert_eq!(len0 as u64, MIB - DATA_START);
    let first_image = MIB as usize;
    for read in [&peer.volume("cc")["read"], &peer.plex("cc.p0")["read"]] {
        let (bytes, holes) = peer.bytes(read);
        assert_eq!(bytes.len(), data.len());
        assert_eq!(holes, [(len0 as u64, MIB)], "where dissect reads nothing");
        assert_bytes("dissect's cc, cc.p0.s0", &bytes[..len0], &data[..len0]);
        let moved = data.len() - first_image;
        assert_bytes("dissect's cc, cc.p0.s1 moved", &bytes[first_image..], &data[len0..len0 + moved]);
    }
}

#[test]
fn dissect_reads_every_subdisk_from_its_drives_data_start() {
    // Two volumes on the same two drives: lo's subdisks at the data start, hi's after them.
    let set = Set::files(&[2 * MIB; 2]);
    set.create(
        "\
volume lo
  plex org striped 32k
    sd length 256k drive d0
    sd length 256k drive d1
volume hi
  plex org striped 32k
    sd length 512k drive d0
    sd length 512k drive d1
",
    );
    let list = set.list();
    assert_eq!(named(&list["subdisks"], "hi.p0.s0")["drive_offset"], DATA_START + 256 * KIB);
    let lo = set.fill(&list, "lo", 40);
    let hi = set.fill(&list, "hi", 41);
    assert_bytes("uraid cat --volume lo", &set.cat("lo", &set.all()), &lo);
    assert_bytes("uraid cat --volume hi", &set.cat("hi", &set.all()), &hi);
    let peer = Peer::read(&set.all());
    // dissect parses hi's drive offsets ...
    assert_same_objects(&list, &peer);
    peer.assert_reads("lo", &lo);
    // ... but reads each subdisk from its drive's data start, where FreeBSD's
    // `gv_plex_normal_request` adds the subdisk's drive_offset. hi's subdisks thus read as
    // lo's for their first 256 KiB, which with the same 32 KiB stripes is all of lo, and then
    // as hi's own first 256 KiB.
    let (bytes, holes) = peer.bytes(&peer.volume("hi")["read"]);
    assert_eq!(holes, []);
    assert_eq!(bytes.len(), hi.len());
    assert_bytes("dissect's hi, first half", &bytes[..lo.len()], &lo);
    assert_bytes("dissect's hi, second half", &bytes[lo.len()..], &hi[..hi.len() - lo.len()]);
}

#[test]
fn dissect_sizes_a_mirror_by_its_first_plex_not_its_smallest() {
    let set = Set::files(&[2 * MIB; 3]);
    set.create(
        "\
volume mi
  plex org concat
    sd length 1m drive d0
  plex org striped 64k
    sd length 256k drive d1
    sd length 256k drive d2
",
    );
    let list = set.list();
    // FreeBSD's `gv_vol_size`: a volume is as large as its smallest plex.
    assert_eq!(named(&list["volumes"], "mi")["size"], 512 * KIB);
    assert_eq!(named(&list["plexes"], "mi.p0")["size"], MIB);
    let data = set.fill(&list, "mi", 50);
    assert_bytes("uraid cat --volume mi", &set.cat("mi", &set.all()), &data);
    let peer = Peer::read(&set.all());
    // dissect sees every object, but sizes the volume as its first plex by name.
    let mut objects = uraid_objects(&list);
    objects[0]["size"] = json!(MIB);
    assert_peer_sees(&list, objects, &peer);
    // Its volume runs on past the mirror's end into mi.p0's unused half, read from d0.
    let (bytes, holes) = peer.bytes(&peer.volume("mi")["read"]);
    assert_eq!(holes, []);
    assert_bytes("dissect's mi, the volume", &bytes[..data.len()], &data);
    let d0 = std::fs::read(&set.paths[0]).unwrap();
    let past = &d0[(DATA_START + 512 * KIB) as usize..(DATA_START + MIB) as usize];
    assert_bytes("dissect's mi, past the volume", &bytes[data.len()..], past);
    let (p1, holes) = peer.bytes(&peer.plex("mi.p1")["read"]);
    assert_eq!(holes, []);
    assert_bytes("dissect's plex mi.p1", &p1, &data);
}

#[test]
fn dissect_cannot_read_a_striped_plex_on_images_of_part_stripes() {
    // 2 MiB and 4 KiB: gvinum trims the subdisks to whole 256 KiB stripes and runs; dissect's
    // RAID-0 reader sizes its zones by the whole images (drive_size is 0), which are not whole
    // stripes, and fails to set them up.
    let set = Set::files(&[2 * MIB + 4 * KIB; 2]);
    set.shortcut(&["stripe", "-n", "odd"]);
    let list = set.list();
    let data = set.fill(&list, "odd", 60);
    assert_bytes("uraid cat --volume odd", &set.cat("odd", &set.all()), &data);
    let peer = Peer::read(&set.all());
    assert_same_objects(&list, &peer);
    for read in [&peer.volume("odd")["read"], &peer.plex("odd.p0")["read"]] {
        assert!(!read["error"].is_null(), "dissect.volume now reads it: compare the bytes instead ({read})");
    }
}

#[test]
fn dissect_cannot_read_a_raid5_volume_with_a_drive_missing() {
    let set = Set::files(&[2 * MIB; 3]);
    set.shortcut(&["raid5", "-s", "128k", "-n", "r5"]);
    let written = check_every_volume(&set, 70);
    let (_, data) = &written[0];
    for missing in 0..3 {
        let devices: Vec<&str> =
            set.all().into_iter().enumerate().filter(|(i, _)| *i != missing).map(|(_, d)| d).collect();
        // uraid reads around the missing drive, from parity ...
        assert_bytes(&format!("uraid cat --volume r5 without d{missing}"), &set.cat("r5", &devices), data);
        // ... dissect's raid5 reader only ever reads data units, and fails at the first one on
        // the missing drive.
        let peer = Peer::read(&devices);
        let read = &peer.volume("r5")["read"];
        assert!(!read["error"].is_null(), "dissect.volume now reads r5 without d{missing}: compare the bytes ({read})");
    }
}

/// A random volume on fresh drives, in a shape dissect.volume reads (one subdisk per drive at
/// its data start, drives of whole stripes): its description and how many drives it takes.
fn random_shape(seed: u64) -> (String, usize) {
    let mut x = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut pick = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let stripes = ["16k", "32k", "64k", "128k", "256k"];
    match pick(3) {
        0 => {
            let n = 2 + pick(3) as usize;
            let sds: String = (0..n).map(|i| format!("    sd drive d{i}\n")).collect();
            (format!("volume v\n  plex org striped {}\n{sds}", stripes[pick(5) as usize]), n)
        }
        1 => {
            let n = 3 + pick(3) as usize;
            let sds: String = (0..n).map(|i| format!("    sd drive d{i}\n")).collect();
            (format!("volume v\n  plex org raid5 {}\n{sds}", stripes[pick(5) as usize]), n)
        }
        _ => {
            // Two plexes, each concat on one drive, striped over two or raid5 over three (a
            // mirror of arrays); the same length.
            let mut text = String::from("volume v\n");
            let mut drive = 0;
            for _ in 0..2 {
                let kind = pick(3);
                if kind == 0 {
                    text.push_str(&format!("  plex org concat\n    sd length 1m drive d{drive}\n"));
                    drive += 1;
                } else if kind == 1 {
                    text.push_str(&format!("  plex org raid5 {}\n", stripes[pick(5) as usize]));
                    for d in drive..drive + 3 {
                        text.push_str(&format!("    sd length 512k drive d{d}\n"));
                    }
                    drive += 3;
                } else {
                    text.push_str(&format!(
                        "  plex org striped {}\n    sd length 512k drive d{drive}\n    sd length 512k drive d{}\n",
                        stripes[pick(5) as usize],
                        drive + 1
                    ));
                    drive += 2;
                }
            }
            (text, drive)
        }
    }
}

/// Random volumes written through `uraid serve` by an NBD client (nbdcopy), then read back by
/// `uraid cat --volume` and by dissect.volume, byte for byte.
#[test]
fn random_volumes_written_through_serve_read_the_same_in_uraid_and_dissect() {
    use std::time::{Duration, Instant};
    for seed in 1..=10u64 {
        let (description, drives) = random_shape(seed);
        let set = Set::files(&vec![2 * MIB; drives]);
        set.create(&description);
        let list = set.list();
        let size = named(&list["volumes"], "v")["size"].as_u64().unwrap();
        let data = random(size, 100 + seed);
        let dir = tempfile::tempdir_in(scratch_dir("vinum-peer")).unwrap();
        let input = dir.path().join("input");
        std::fs::write(&input, &data).unwrap();
        let sock = dir.path().join("nbd.sock");
        let mut serve = Command::new(env!("CARGO_BIN_EXE_uraid"))
            .args(["serve", "--volume", "v"])
            .arg(format!("--listen=unix:{}", sock.display()))
            .args(set.all())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !sock.exists() {
            assert!(Instant::now() < deadline && serve.try_wait().unwrap().is_none(), "{description}: no server");
            std::thread::sleep(Duration::from_millis(20));
        }
        let uri = format!("nbd+unix:///?socket={}", sock.display());
        let copy = Command::new("nbdcopy").arg(&input).arg(&uri).output().expect("nbdcopy (Debian libnbd-bin)");
        assert!(copy.status.success(), "{description}: nbdcopy: {}", String::from_utf8_lossy(&copy.stderr));
        // SAFETY: the server is our child; SIGTERM asks it to flush and stop.
        unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
        let out = serve.wait_with_output().unwrap();
        assert!(out.status.success(), "{description}: uraid serve: {}", String::from_utf8_lossy(&out.stderr));
        let ours = set.cat("v", &set.all());
        assert_bytes(&format!("{description}: uraid cat --volume"), &ours, &data);
        let peer = Peer::read(&set.all());
        assert_same_objects(&set.list(), &peer);
        peer.assert_reads("v", &data);
    }
}
