//! Layouts the engine does not know run on it: FreeBSD gvinum's plexes (`common/vinum.rs`,
//! mapped by `uraid_vinum_format`), handed over through `Geometry::custom`. Each is written, read,
//! read with members missing, rebuilt onto a replaced member and checked, and its bytes must
//! sit where gvinum puts them. (The same layouts also run through every test that goes over
//! `common::geometries()`.)

mod common;

use common::vinum::{self, VinumConcatPlex, VinumMirroredVolume, VinumRaid5Plex};
use common::{assert_every_loss_reads, geometries, read_all, sync, Members, MEMBER_BYTES};
use uraid_engine::array::{Array, Completion, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::geometry::{Geometry, Redundancy};
use uraid_engine::EngineError;
use uraid_layout::{Level, ParityAlgorithm, ParityLayout};
use uraid_vinum_format::drive_layout::DATA_START;
use uraid_vinum_format::PlexLayout;

/// gvinum(8)'s raid5 example, as gvinum writes its configuration: three subdisks of 32538
/// sectors, a stripe of 986 sectors (neither a power of two nor whole 4 KiB), and s2 stale.
const MANUAL_RAID5: &str = include_str!("../../vinum/format/tests/data/man-page-raid5.conf");

/// A concatenated plex whose subdisks end at odd sectors, mid-row.
const ODD_CONCAT_PLEX: &str = "\
volume vo state up
plex name vo.p0 org concat vol vo state up
sd name vo.p0.s0 drive d0 len 384s driveoffset 265s plex vo.p0 plexoffset 0s state up
sd name vo.p0.s1 drive d1 len 203s driveoffset 265s plex vo.p0 plexoffset 384s state up
sd name vo.p0.s2 drive d2 len 299s driveoffset 265s plex vo.p0 plexoffset 587s state up
";

fn pattern(len: u64, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 9) as u8).collect()
}

fn write(array: &mut Array, members: &mut Members, offset: u64, data: &[u8]) {
    let request = Request::Write { offset, data: data.to_vec().into() };
    assert_eq!(execute(array, request, &mut |io| members.exec(io)), Ok(Completion::Written), "write at {offset}");
}

fn read(array: &mut Array, members: &mut Members, offset: u64, len: u64) -> Vec<u8> {
    match execute(array, Request::Read { offset, len }, &mut |io| members.exec(io)) {
        Ok(Completion::Read(data)) => data.into_vec(),
        other => panic!("read {offset}+{len}: {other:?}"),
    }
}

/// Fill the array with `model` in writes of uneven lengths, none aligned to anything.
fn write_in_pieces(array: &mut Array, members: &mut Members, model: &[u8]) {
    let mut offset = 0;
    for piece in [777_777u64, 4096, 1, 65_537, 300_001].into_iter().cycle() {
        if offset == model.len() {
            break;
        }
        let end = (offset + piece as usize).min(model.len());
        write(array, members, offset as u64, &model[offset..end]);
        offset = end;
    }
}

/// Rebuild every recovering slot over the whole member, in windows, and mark it in sync.
fn recover(array: &mut Array, members: &mut Members, slot: usize) {
    let end = array.geometry().member_data_bytes();
    let window = 1 << 20;
    for offset in (0..end).step_by(window as usize) {
        let request = Request::Recover { offset, len: window.min(end - offset) };
        assert_eq!(execute(array, request, &mut |io| members.exec(io)), Ok(Completion::Recovered), "at {offset}");
    }
    array.set_slot_state(slot, SlotState::InSync, false).unwrap();
    members.no_reads[slot] = false;
}

/// Fail the device in `slot` if it holds one, put an empty device there and make it a
/// recovering member.
fn replace(array: &mut Array, members: &mut Members, slot: usize, bytes: u64) {
    if array.slot_states()[slot] == SlotState::InSync {
        array.set_slot_state(slot, SlotState::Faulty, false).unwrap();
    }
    members.disks[slot] = Some(vec![0u8; bytes as usize]);
    members.no_reads[slot] = true;
    array.set_slot_state(slot, SlotState::Recovering, false).unwrap();
}

#[test]
fn the_raid5_plex_of_the_gvinum_manual_runs_degraded_recovers_and_checks_clean() {
    let config = vinum::config(MANUAL_RAID5);
    let plex_name = "myraid5vol.p0";
    let g = VinumRaid5Plex::geometry(&config, plex_name);
    let plex = PlexLayout::from_config(&config, plex_name).unwrap();
    assert_eq!(g.name(), "vinum raid5 plex");
    assert_eq!(g.redundancy(), Redundancy::Parity { data_disks: 2 });
    assert_eq!(g.stripe_data_bytes(), Some(2 * 986 * 512));
    let n = g.raid_disks();
    let member_bytes = g.member_data_bytes();
    assert_eq!(member_bytes, 32538 * 512);

    // s2 is stale in the configuration: the array starts without it.
    let slots: Vec<SlotState> = (0..n)
        .map(|c| if vinum::subdisk_is_up(&config, plex_name, c) { SlotState::InSync } else { SlotState::Missing })
        .collect();
    assert_eq!(slots, [SlotState::InSync, SlotState::InSync, SlotState::Missing]);
    let mut members = Members::new(n, member_bytes);
    members.disks[2] = None;
    let mut array = Array::new(g.clone(), slots).unwrap();

    // Writes and reads, degraded: s2's chunks are rebuilt from s0, s1 and parity.
    let size = array.size_bytes();
    assert_eq!(size, plex.size());
    let model = pattern(size, 3);
    write_in_pieces(&mut array, &mut members, &model);
    assert!(read_all(&mut array, &mut members) == model, "degraded: contents differ");
    for (offset, len) in [(986 * 512 - 10, 20), (3 * 986 * 512 + 100, 5 * 986 * 512), (size - 4097, 4097)] {
        let got = read(&mut array, &mut members, offset, len);
        assert!(got == model[offset as usize..(offset + len) as usize], "degraded read {offset}+{len}");
    }

    // s2 replaced and rebuilt; nothing disagrees afterwards.
    replace(&mut array, &mut members, 2, member_bytes);
    recover(&mut array, &mut members, 2);
    assert_eq!(sync(&mut array, &mut members, false), 0, "mismatches after the rebuild");

    // The bytes sit where gvinum puts them: data per gv_raid5_offset, parity the XOR of its row.
    for offset in (0..size).step_by(4099) {
        let at = plex.locate_raid5(offset).unwrap();
        let disk = |column: usize| members.disks[column].as_ref().unwrap()[at.data.offset as usize];
        assert_eq!(disk(at.data.column), model[offset as usize], "data byte {offset}");
        let xor = (0..n).filter(|&c| c != at.parity_column).fold(0u8, |x, c| x ^ disk(c));
        assert_eq!(disk(at.parity_column), xor, "parity of byte {offset}");
    }

    // The rebuilt member serves reads: without s0, its data comes from s1 and the new s2.
    let mut without_s0 = Array::new(g, vec![SlotState::Missing, SlotState::InSync, SlotState::InSync]).unwrap();
    assert!(read_all(&mut without_s0, &mut members) == model, "reading without s0 after the rebuild");
}

#[test]
fn a_gvinum_raid5_plex_writes_the_bytes_md_left_asymmetric_writes() {
    let vinum = VinumRaid5Plex::geometry(&vinum::config(vinum::RAID5_PLEX), "v5.p0");
    let algorithm = ParityAlgorithm::from_md(Level::Raid5, 0).unwrap();
    assert_eq!(algorithm.name(), "left-asymmetric");
    let md = Geometry::Parity(ParityLayout::new(Level::Raid5, algorithm, 4, 8, MEMBER_BYTES / 512).unwrap());
    assert_eq!(vinum.array_bytes(), md.array_bytes());
    let stripes = vinum.member_data_bytes() / vinum.chunk_bytes();
    for stripe in 0..stripes {
        assert_eq!(vinum.stripe_roles(stripe), md.stripe_roles(stripe), "stripe {stripe}");
    }
    let model = pattern(vinum.array_bytes(), 11);
    let mut images = Vec::new();
    for g in [vinum, md] {
        let n = g.raid_disks();
        let mut members = Members::new(n, MEMBER_BYTES);
        let mut array = Array::new(g, vec![SlotState::InSync; n]).unwrap();
        write_in_pieces(&mut array, &mut members, &model);
        assert!(read_all(&mut array, &mut members) == model);
        images.push(members.disks);
    }
    assert!(images[0] == images[1], "gvinum's raid5 and md's left-asymmetric raid5 wrote different members");
}

#[test]
fn a_gvinum_concat_plex_of_unequal_subdisks_keeps_each_byte_on_its_subdisk() {
    let config = vinum::config(ODD_CONCAT_PLEX);
    let g = VinumConcatPlex::geometry(&config, "vo.p0");
    let plex = PlexLayout::from_config(&config, "vo.p0").unwrap();
    assert_eq!(g.redundancy(), Redundancy::None);
    assert_eq!(g.array_bytes(), (384 + 203 + 299) * 512);
    let n = g.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
    let size = array.size_bytes();
    let model = pattern(size, 7);
    write_in_pieces(&mut array, &mut members, &model);
    assert!(read_all(&mut array, &mut members) == model);
    // Reads across the subdisks' ends, which fall mid-sector of no row.
    for (offset, len) in [(384 * 512 - 1, 2), (587 * 512 - 3000, 6000), (100, size - 200)] {
        assert!(read(&mut array, &mut members, offset, len) == model[offset as usize..(offset + len) as usize]);
    }
    for offset in (0..size).step_by(997) {
        let at = plex.locate(offset).unwrap();
        let byte = members.disks[at.column].as_ref().unwrap()[at.offset as usize];
        assert_eq!(byte, model[offset as usize], "byte {offset}");
    }
    // No redundancy: nothing to check, nothing to rebuild, and no subdisk can be spared.
    assert_eq!(sync(&mut array, &mut members, false), 0);
    array.set_slot_state(1, SlotState::Faulty, true).unwrap();
    assert_eq!(array.set_slot_state(1, SlotState::Recovering, false), Ok(()));
    let got = array.submit(Request::Recover { offset: 0, len: 4096 });
    assert_eq!(got, Err(EngineError::NoRedundancy { level: "vinum concat plex".into() }));
    assert!(matches!(
        Array::new(g, vec![SlotState::InSync, SlotState::Missing, SlotState::InSync]),
        Err(EngineError::ArrayFailed)
    ));
}

#[test]
fn a_gvinum_volume_of_two_plexes_mirrors_rebuilds_a_drive_and_checks_its_copies() {
    let config = vinum::config(vinum::MIRRORED_VOLUME);
    let g = VinumMirroredVolume::geometry(&config, "vm");
    let plexes: Vec<PlexLayout> = ["vm.p0", "vm.p1"].map(|p| PlexLayout::from_config(&config, p).unwrap()).into();
    assert!(g.is_mirrored());
    assert_eq!(g.max_degraded(), 2, "either plex's two drives may go");
    let n = g.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
    let size = array.size_bytes();
    let model = pattern(size, 5);
    write_in_pieces(&mut array, &mut members, &model);
    assert!(read_all(&mut array, &mut members) == model);

    // Each plex holds the whole volume on its subdisks' drives.
    let drives = config.drive_names();
    let copy_at = |members: &Members, plex: &PlexLayout, offset: u64| {
        let at = plex.locate(offset).unwrap();
        let column = &plex.columns()[at.column];
        let slot = drives.iter().position(|d| *d == column.drive).unwrap();
        members.disks[slot].as_ref().unwrap()[(column.drive_offset - DATA_START + at.offset) as usize]
    };
    for offset in (0..size).step_by(1009) {
        for plex in &plexes {
            assert_eq!(copy_at(&members, plex, offset), model[offset as usize], "byte {offset}");
        }
    }
    // Any drives whose loss leaves a copy of every byte: d0 and d1 (all of p0), or d2 and d3.
    assert!(g.is_readable(&|s| s >= 2) && g.is_readable(&|s| s < 2));
    assert!(!g.is_readable(&|s| s != 0 && s != 3), "d0 and d3 hold the only copies of some bytes");
    assert_every_loss_reads(&g, &mut members, &model, "vinum-mirror-4");

    // d2, holding two pieces of p1 far apart in the volume, replaced and rebuilt from p0.
    replace(&mut array, &mut members, 2, MEMBER_BYTES);
    recover(&mut array, &mut members, 2);
    assert_eq!(sync(&mut array, &mut members, false), 0, "mismatches after the rebuild");
    let mut p1_only =
        Array::new(g.clone(), vec![SlotState::Missing, SlotState::Missing, SlotState::InSync, SlotState::InSync])
            .unwrap();
    assert!(read_all(&mut p1_only, &mut members) == model, "plex p1 alone after rebuilding d2");

    // A check compares the copies: a byte changed on d3 is found, and repair puts it right.
    let offset = 200 * 1024;
    let at = plexes[1].locate(offset).unwrap();
    assert_eq!(plexes[1].columns()[at.column].drive, "d3");
    members.disks[3].as_mut().unwrap()[at.offset as usize] ^= 0xff;
    // One 4 KiB row differs, counted in sectors as md's mismatch_cnt counts it.
    assert_eq!(sync(&mut array, &mut members, false), 8);
    assert_eq!(sync(&mut array, &mut members, true), 8);
    assert_eq!(sync(&mut array, &mut members, false), 0, "repaired");
}

/// What every geometry says member bytes hold is the inverse of where it puts logical bytes:
/// the engine rebuilds members from `logical`/`member_runs` and reads through `runs`.
#[test]
fn every_layout_maps_member_bytes_back_to_the_logical_bytes_it_put_there() {
    for (name, g) in geometries() {
        for slot in 0..g.raid_disks() {
            for offset in (0..g.member_data_bytes()).step_by(512) {
                let Some(logical) = g.logical(slot, offset) else { continue };
                let copies = &g.runs(logical, 1)[0].copies;
                assert!(copies.contains(&(slot, offset)), "{name}: slot {slot} byte {offset} -> {logical}: {copies:?}");
            }
        }
        for logical in (0..g.array_bytes()).step_by(1536) {
            for &(slot, offset) in &g.runs(logical, 1)[0].copies {
                assert_eq!(g.logical(slot, offset), Some(logical), "{name}: logical {logical} on slot {slot}");
            }
        }
    }
}
