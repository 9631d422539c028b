//! PPL against the real thing: raid5 arrays made by mdadm 4.2 `--consistency-policy=ppl` and run
//! by Linux 6.1 (tests/data/ppl, made by scripts/oracle/make-ppl-samples.sh; see the README
//! there). Each sample keeps every member's metadata region in three states: as mdadm wrote it
//! (`mdadm`), after md started the array and finished the initial recovery (`created`), and
//! after md logged real writes (`written`).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::mdadm_sections;
use uraid_md_format::create::{self, ConsistencyPolicy, CreateSpec};
use uraid_md_format::ppl::{self, PplHeader};
use uraid_md_format::sb1::feature;
use uraid_md_format::{uuid, FormatError, MetadataVersion, Superblock, Superblock1, SECTOR};

const STATES: [&str; 3] = ["mdadm", "created", "written"];

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ppl")
}

/// One member's metadata region: `meta` holds the device's bytes from `start` on.
struct Member {
    size: u64,
    start: u64,
    meta: Vec<u8>,
}

impl Member {
    fn load(dir: &Path, index: usize) -> Member {
        let txt = fs::read_to_string(dir.join(format!("disk{index}.txt"))).expect("diskN.txt");
        let nums: Vec<u64> = txt.split_whitespace().map(|n| n.parse().expect("number")).collect();
        let xz = dir.join(format!("disk{index}.meta.xz"));
        let out = Command::new("xz").arg("-dc").arg(&xz).output().expect("run xz (install xz-utils)");
        assert!(out.status.success(), "xz -dc {}", xz.display());
        Member { size: nums[0], start: nums[1], meta: out.stdout }
    }

    /// Device bytes `[offset, offset + len)`, which must lie in the kept region.
    fn bytes(&self, offset: u64, len: u64) -> &[u8] {
        assert!(offset >= self.start, "byte {offset} is before the kept region ({})", self.start);
        let at = (offset - self.start) as usize;
        &self.meta[at..at + len as usize]
    }

    fn superblock(&self, version: MetadataVersion) -> Superblock1 {
        let at = version.superblock_offset(self.size).expect("superblock location");
        match Superblock::parse(version, self.bytes(at, 4096), self.size).expect("superblock parses") {
            Superblock::V1(sb) => sb,
            other => panic!("expected 1.x, got {other:?}"),
        }
    }

    /// The PPL area the superblock points at.
    fn ppl_area(&self, sb: &Superblock1) -> &[u8] {
        let (offset, size) = sb.ppl_area().expect("superblock without a PPL");
        let start = (sb.super_offset as i64 + i64::from(offset)) as u64 * SECTOR;
        self.bytes(start, u64::from(size) * SECTOR)
    }
}

struct Sample {
    name: String,
    version: MetadataVersion,
    raid_devices: usize,
    dir: PathBuf,
}

impl Sample {
    fn state(&self, state: &str) -> Vec<Member> {
        (0..self.raid_devices).map(|i| Member::load(&self.dir.join(state), i)).collect()
    }
}

/// Every sample folder (`raid5-<n>-ppl-<metadata>`), found rather than listed.
fn samples() -> Vec<Sample> {
    let mut out: Vec<Sample> = fs::read_dir(data_dir())
        .expect("tests/data/ppl")
        .filter_map(|e| {
            let dir = e.ok()?.path();
            let name = dir.file_name()?.to_str()?.to_string();
            let mut parts = name.split('-');
            let (Some("raid5"), Some(n), Some("ppl"), Some(meta)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return None;
            };
            Some(Sample {
                version: MetadataVersion::parse(meta).expect("metadata in the name"),
                raid_devices: n.parse().expect("member count in the name"),
                name,
                dir,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    let versions: Vec<MetadataVersion> = out.iter().map(|s| s.version).collect();
    for v in [MetadataVersion::V1_0, MetadataVersion::V1_1, MetadataVersion::V1_2] {
        assert!(versions.contains(&v), "no PPL sample with {v} metadata");
    }
    out
}

/// The headers md's `ppl_load_distributed` would walk: from the start of the area, each
/// followed by its partial parity, while the checksum and signature hold and the generation
/// does not go back. Returns (sector offset in the area, header, raw 4 KiB, partial parity).
fn walk(area: &[u8], signature: u32) -> Vec<(usize, PplHeader, &[u8], &[u8])> {
    let mut out: Vec<(usize, PplHeader, &[u8], &[u8])> = Vec::new();
    let mut at = 0usize;
    while at + ppl::HEADER_BYTES <= area.len() {
        let Ok(h) = PplHeader::parse(&area[at..]) else { break };
        if h.signature != signature || out.last().is_some_and(|(_, prev, _, _)| prev.generation > h.generation) {
            break;
        }
        let pp_end = (at + ppl::HEADER_BYTES + h.pp_bytes() as usize).min(area.len());
        let raw = &area[at..at + ppl::HEADER_BYTES];
        let pp = &area[at + ppl::HEADER_BYTES..pp_end];
        out.push((at / 512, h, raw, pp));
        at = pp_end;
    }
    out
}

#[test]
fn md_signs_ppl_headers_with_the_array_uuid() {
    for s in samples() {
        let sb = s.state("written")[0].superblock(s.version);
        let examine = mdadm_sections(&s.dir.join("written/examine.txt"));
        let text = examine[&0]["Array UUID"].clone();
        assert_eq!(uuid::parse_md(&text).unwrap(), sb.set_uuid, "{}", s.name);
        let area = s.state("written")[0].ppl_area(&sb).to_vec();
        let h = PplHeader::parse(&area).unwrap();
        assert_eq!(h.signature, ppl::signature(&sb.set_uuid), "{}: signature(uuid)", s.name);
    }
}

#[test]
fn kernel_written_headers_parse_round_trip_and_check_their_partial_parity() {
    let (mut headers, mut entries, mut with_pp, mut scanned) = (0, 0, 0, 0);
    for s in samples() {
        for (i, m) in s.state("written").iter().enumerate() {
            let ctx = format!("{} disk{i}", s.name);
            let sb = m.superblock(s.version);
            let sig = ppl::signature(&sb.set_uuid);
            let area = m.ppl_area(&sb);
            // The chain md would follow: every header round-trips byte for byte and every
            // entry's checksum matches its partial parity.
            let chain = walk(area, sig);
            assert!(chain.len() > 5, "{ctx}: only {} headers in the chain", chain.len());
            for (at, h, raw, pp) in &chain {
                assert_eq!(h.to_bytes().as_slice(), *raw, "{ctx}: header at sector {at} round trip");
                let mut rest = *pp;
                for e in &h.entries {
                    let (mine, after) = rest.split_at(e.pp_size as usize);
                    assert_eq!(ppl::pp_checksum(mine), e.checksum, "{ctx}: entry {e:?} at sector {at}");
                    assert_eq!(e.parity_disk as usize, i, "{ctx}: md logs a stripe on its parity disk");
                    if e.pp_size > 0 {
                        with_pp += 1;
                    }
                    rest = after;
                    entries += 1;
                }
            }
            headers += chain.len();
            // Every 4 KiB-aligned header anywhere in the area (older laps of the ring too) has
            // this array's signature and round-trips.
            for at in (0..area.len() - ppl::HEADER_BYTES).step_by(4096) {
                if let Ok(h) = PplHeader::parse(&area[at..]) {
                    assert_eq!(h.signature, sig, "{ctx}: header at byte {at}");
                    assert_eq!(h.to_bytes().as_slice(), &area[at..at + ppl::HEADER_BYTES], "{ctx}: byte {at}");
                    scanned += 1;
                }
            }
        }
    }
    println!("{headers} headers in md's chains ({entries} entries, {with_pp} with partial parity), {scanned} found by scanning");
    assert!(with_pp >= 20, "too few entries with partial parity: {with_pp}");
}

#[test]
fn a_corrupted_kernel_header_is_refused() {
    let s = &samples()[0];
    let m = &s.state("written")[0];
    let sb = m.superblock(s.version);
    let area = m.ppl_area(&sb);
    let good = &area[..ppl::HEADER_BYTES];
    let stored = PplHeader::parse(good).map(|_| u32::from_le_bytes(good[532..536].try_into().unwrap())).unwrap();
    for at in [0usize, 512, 520, 528, 540, 2000] {
        let mut bad = good.to_vec();
        bad[at] ^= 1;
        match PplHeader::parse(&bad) {
            Err(FormatError::BadPplChecksum { stored: st, computed }) => {
                assert_eq!(st, stored);
                assert_ne!(computed, stored);
            }
            other => panic!("byte {at}: {other:?}"),
        }
    }
}

#[test]
fn fresh_ppl_areas_are_an_empty_header_then_zeros() {
    for s in samples() {
        for state in ["mdadm", "created"] {
            for (i, m) in s.state(state).iter().enumerate() {
                let sb = m.superblock(s.version);
                let area = m.ppl_area(&sb);
                let expected = PplHeader::empty(ppl::signature(&sb.set_uuid));
                assert_eq!(PplHeader::parse(area).unwrap(), expected, "{} {state} disk{i}", s.name);
                assert_eq!(&area[..ppl::HEADER_BYTES], expected.to_bytes().as_slice(), "{} {state} disk{i}", s.name);
                assert!(area[ppl::HEADER_BYTES..].iter().all(|&b| b == 0), "{} {state} disk{i}: zeroed", s.name);
            }
        }
    }
}

/// The fields where two superblocks differ, one `planned / real` pair per line.
fn field_diff(planned: &Superblock1, real: &Superblock1) -> String {
    let (a, b) = (format!("{planned:?}"), format!("{real:?}"));
    let split = |s: &str| s.split(", ").map(str::to_string).collect::<Vec<_>>();
    let (a, b) = (split(&a), split(&b));
    let diff: Vec<String> =
        a.iter().zip(&b).filter(|(x, y)| x != y).map(|(x, y)| format!("\n  planned {x} / real {y}")).collect();
    if diff.is_empty() {
        "(no field differs: bytes after the roles)".to_string()
    } else {
        diff.concat()
    }
}

/// The create spec that reproduces a sample (the create command: level 5, chunk 64K, mdadm's
/// default layout, --uuid, --name with --homehost=oracle, no --size or --data-offset).
fn spec_of(sb: &Superblock1) -> CreateSpec {
    CreateSpec {
        version: sb.version,
        level: sb.level,
        layout: -1,
        chunk_sectors: 128,
        raid_disks: sb.raid_disks,
        array_uuid: sb.set_uuid,
        name: sb.name(),
        ctime: sb.ctime,
        component_sectors: None,
        bitmap: false,
        data_offset: None,
        bitmap_chunk: None,
    }
}

#[test]
fn plan_reproduces_what_mdadm_wrote() {
    for s in samples() {
        let members = s.state("mdadm");
        let real: Vec<Superblock1> = members.iter().map(|m| m.superblock(s.version)).collect();
        let sizes: Vec<u64> = members.iter().map(|m| m.size).collect();
        let uuids: Vec<[u8; 16]> = real.iter().map(|sb| sb.device_uuid).collect();
        let plan = create::plan_with_policy(&spec_of(&real[0]), ConsistencyPolicy::Ppl, &sizes, &uuids)
            .unwrap_or_else(|e| panic!("{}: {e}", s.name));
        let image = plan.ppl_image().expect("a PPL image");
        let examine = mdadm_sections(&s.dir.join("mdadm/examine.txt"));
        for (i, (m, real_sb)) in members.iter().zip(&real).enumerate() {
            let ctx = format!("{} disk{i}", s.name);
            let Superblock::V1(planned) = &plan.superblocks[i] else { panic!("{ctx}: not 1.x") };
            // mdadm 4.2 writes MD_FEATURE_PPL, never MULTIPLE_PPLS, and the PPL where we do.
            assert_eq!(real_sb.feature_map, feature::PPL, "{ctx}: mdadm's feature map");
            assert_eq!(planned.ppl(), real_sb.ppl(), "{ctx}: PPL offset and size");
            // mdadm builds a raid5 by recovery: it writes the last slot's device (descriptor
            // `n`, see create::plan) as a spare for md to rebuild, and the array as clean. The
            // plan describes the array as it is once that recovery is done (slot `n - 1` in
            // `dev_roles[n]`) and leaves the clean mark to the writer (Superblock::set_clean).
            let n = s.raid_devices;
            let mut p = planned.clone();
            assert_eq!(p.dev_roles[n], (n - 1) as u16, "{ctx}: the rebuilt slot's descriptor");
            assert_eq!(real_sb.dev_roles[n], 0xffff, "{ctx}: mdadm writes it as a spare");
            p.dev_roles[n] = 0xffff;
            assert_eq!(real_sb.resync_offset, u64::MAX, "{ctx}: mdadm writes the array clean");
            p.resync_offset = real_sb.resync_offset;
            let written = p.to_bytes();
            let at = s.version.superblock_offset(m.size).unwrap();
            assert!(
                written.as_slice() == m.bytes(at, written.len() as u64),
                "{ctx}: superblock differs: {}",
                field_diff(&p, real_sb)
            );
            // The PPL area: mdadm's write_init_ppl1, byte for byte.
            let (ppl_at, ppl_len) = plan.members[i].ppl.expect("member PPL");
            assert_eq!(m.bytes(ppl_at, ppl_len), image.as_slice(), "{ctx}: PPL area");
            let areas = plan.areas_for(i);
            assert_eq!(areas.len(), 1, "{ctx}: only the PPL area besides the superblock");
            assert_eq!((areas[0].offset, areas[0].what), (ppl_at, "ppl"));
            // mdadm --examine's PPL line.
            let (off, size) = real_sb.ppl();
            let line = format!("{size} sectors at offset {off} sectors from superblock");
            assert_eq!(examine[&i].get("PPL"), Some(&line), "{ctx}: examine");
        }
    }
}

/// Zero what md changes once it runs an array: events, update time, resync state, checksum;
/// and md's MULTIPLE_PPLS (a PPL area that holds several logs) back to mdadm's PPL.
fn settle(sb: &mut Superblock1) {
    sb.events = 0;
    sb.utime = 0;
    sb.resync_offset = 0;
    sb.sb_csum = 0;
    if sb.feature_map & feature::MULTIPLE_PPLS != 0 {
        sb.feature_map = (sb.feature_map & !feature::MULTIPLE_PPLS) | feature::PPL;
    }
}

#[test]
fn plan_matches_the_superblocks_md_keeps() {
    for s in samples() {
        for state in ["created", "written"] {
            let members = s.state(state);
            let real: Vec<Superblock1> = members.iter().map(|m| m.superblock(s.version)).collect();
            let sizes: Vec<u64> = members.iter().map(|m| m.size).collect();
            let uuids: Vec<[u8; 16]> = real.iter().map(|sb| sb.device_uuid).collect();
            let plan = create::plan_with_policy(&spec_of(&real[0]), ConsistencyPolicy::Ppl, &sizes, &uuids).unwrap();
            let examine = mdadm_sections(&s.dir.join(state).join("examine.txt"));
            for (i, real_sb) in real.iter().enumerate() {
                let ctx = format!("{} {state} disk{i}", s.name);
                // md runs a 1 MiB PPL area as several logs and says so in the feature map.
                assert_eq!(real_sb.feature_map, feature::MULTIPLE_PPLS, "{ctx}: md's feature map");
                assert_eq!(examine[&i].get("Feature Map").map(String::as_str), Some("0x800"), "{ctx}");
                assert_eq!(
                    real_sb.ppl_area(),
                    Some((if s.version == MetadataVersion::V1_0 { -2056 } else { 8 }, 2048))
                );
                let Superblock::V1(planned) = &plan.superblocks[i] else { panic!() };
                let (mut p, mut r) = (planned.clone(), real_sb.clone());
                settle(&mut p);
                settle(&mut r);
                assert!(p.to_bytes() == r.to_bytes(), "{ctx}: planned superblock differs: {}", field_diff(&p, &r));
                assert!(real_sb.info().state_clean, "{ctx}: stopped clean");
            }
        }
    }
}

#[test]
fn samples_are_described() {
    let readme = fs::read_to_string(data_dir().join("README.md")).expect("tests/data/ppl/README.md");
    assert!(readme.contains("scripts/oracle/make-ppl-samples.sh"));
    for s in samples() {
        for state in STATES {
            assert!(s.dir.join(state).join("examine.txt").is_file(), "{}/{state}", s.name);
        }
    }
}
