//! The layouts against arrays the real Linux kernel wrote.
//!
//! Every fixture case with pattern content is discovered (none are listed here), its layout is
//! built from `case.json` alone, and sampled logical sectors are looked up on the member images:
//! each active copy must hold exactly the pattern sector, the inverse map must lead back, and for
//! raid4/5/6 the P and Q blocks on disk must equal parity computed from the pattern with the
//! layout's data placement and Q slot order.

use std::collections::BTreeSet;

use uraid_layout::{
    Level, LinearLayout, ParityAlgorithm, ParityLayout, Raid0Layout, Raid0ZoneLayout, Raid10Format, Raid10Layout,
    Raid1Layout,
};
use uraid_testkit::{cases, pattern_sector, FixtureCase};

const SECTOR: usize = 512;

enum Layout {
    Linear(LinearLayout),
    Raid0(Raid0Layout),
    Raid1(Raid1Layout),
    Raid10(Raid10Layout),
    Parity(ParityLayout),
}

impl Layout {
    fn array_sectors(&self) -> u64 {
        match self {
            Layout::Linear(l) => l.array_sectors(),
            Layout::Raid0(l) => l.array_sectors(),
            Layout::Raid1(l) => l.array_sectors(),
            Layout::Raid10(l) => l.array_sectors(),
            Layout::Parity(l) => l.array_sectors(),
        }
    }

    /// Every (member, member sector) holding `logical`, and the run length from there.
    fn locate(&self, logical: u64) -> (Vec<(usize, u64)>, u64) {
        let pairs = |extents: Vec<uraid_layout::Extent>| {
            let run = extents[0].sectors;
            (extents.iter().map(|e| (e.member, e.sector)).collect(), run)
        };
        match self {
            Layout::Linear(l) => pairs(vec![l.map(logical)]),
            Layout::Raid0(l) => pairs(vec![l.map(logical)]),
            Layout::Raid1(l) => pairs(l.map(logical)),
            Layout::Raid10(l) => pairs(l.map(logical)),
            Layout::Parity(l) => {
                let m = l.map(logical);
                (vec![(m.member, m.sector)], m.sectors)
            }
        }
    }

    fn logical(&self, member: usize, sector: u64) -> Option<u64> {
        match self {
            Layout::Linear(l) => l.logical(member, sector),
            Layout::Raid0(l) => l.logical(member, sector),
            Layout::Raid1(l) => l.logical(member, sector),
            Layout::Raid10(l) => l.logical(member, sector),
            Layout::Parity(l) => l.logical(member, sector),
        }
    }
}

fn json_u64(case: &FixtureCase, key: &str) -> u64 {
    case.json[key].as_u64().unwrap_or_else(|| panic!("{}: case.json {key}", case.name))
}

/// Builds the layout from `case.json`'s fields.
fn build_layout(case: &FixtureCase) -> Layout {
    let level = Level::parse(case.json["level"].as_str().expect("level")).expect("level name");
    let raid_disks = json_u64(case, "raid_devices") as usize;
    let layout_num = case.json["layout_num"].as_i64().expect("layout_num");
    let chunk_sectors = (json_u64(case, "chunk_bytes") / SECTOR as u64) as u32;
    let component_sectors = json_u64(case, "component_size_kib") * 2;
    // linear and raid0 use each member's own size (rdev->sectors), which the kernel reported as
    // the member's used size.
    let member_sectors = || -> Vec<u64> {
        (0..raid_disks)
            .map(|slot| {
                let member = case.members.iter().find(|m| m.index == slot).expect("member");
                member.json["kernel_used_size_kib"].as_u64().expect("kernel_used_size_kib") * 2
            })
            .collect()
    };
    match level {
        Level::Linear => Layout::Linear(LinearLayout::new(&member_sectors(), chunk_sectors).unwrap()),
        Level::Raid0 => Layout::Raid0(
            Raid0Layout::new(&member_sectors(), chunk_sectors, Raid0ZoneLayout::from_md(layout_num as i32)).unwrap(),
        ),
        Level::Raid1 => Layout::Raid1(Raid1Layout::new(raid_disks, component_sectors).unwrap()),
        Level::Raid10 => Layout::Raid10(
            Raid10Layout::new(
                raid_disks,
                chunk_sectors,
                Raid10Format::from_md(layout_num as u32).unwrap(),
                component_sectors,
            )
            .unwrap(),
        ),
        Level::Raid4 | Level::Raid5 | Level::Raid6 => Layout::Parity(
            ParityLayout::new(
                level,
                ParityAlgorithm::from_md(level, layout_num as u32).unwrap(),
                raid_disks,
                chunk_sectors,
                component_sectors,
            )
            .unwrap(),
        ),
    }
}

/// A member image with its data offset, for members whose data is current.
struct Member {
    image: Vec<u8>,
    data_offset: u64,
}

impl Member {
    fn sector(&self, sector: u64) -> &[u8] {
        let start = ((self.data_offset + sector) as usize) * SECTOR;
        &self.image[start..start + SECTOR]
    }
}

/// Images of the raid slots whose data is current (not missing, failed or spare).
fn current_members(case: &FixtureCase, raid_disks: usize) -> Vec<Option<Member>> {
    (0..raid_disks)
        .map(|slot| {
            let member = case.members.iter().find(|m| m.index == slot)?;
            if !matches!(member.status.as_str(), "active" | "re-added") {
                return None;
            }
            let path = case.member_image(slot)?;
            let image = std::fs::read(&path).expect("read member image");
            let data_offset = member.json["data_offset_sectors"].as_u64().expect("data_offset");
            Some(Member { image, data_offset })
        })
        .collect()
}

/// Multiplies by the RAID-6 generator {02} in GF(2^8) with md's polynomial 0x11d.
fn times_two(byte: u8) -> u8 {
    (byte << 1) ^ if byte & 0x80 != 0 { 0x1d } else { 0 }
}

/// Checks the P (and Q) blocks of the stripe row holding `logical` against parity computed from
/// the pattern. Returns how many parity sectors were compared.
fn check_parity(case: &FixtureCase, layout: &ParityLayout, members: &[Option<Member>], logical: u64) -> usize {
    let map = layout.map(logical);
    let roles = layout.stripe(map.stripe);
    let chunk = u64::from(layout.chunk_sectors());
    let in_chunk = logical % chunk;
    let data_disks = layout.data_disks() as u64;
    let data: Vec<[u8; SECTOR]> = (0..data_disks)
        .map(|i| {
            let l = (map.stripe * data_disks + i) * chunk + in_chunk;
            pattern_sector(l, case.case_number, b"MDORACLE", 0)
        })
        .collect();

    let mut p = [0u8; SECTOR];
    for block in &data {
        p.iter_mut().zip(block).for_each(|(a, b)| *a ^= b);
    }
    let mut compared = 0;
    if let Some(member) = &members[roles.p] {
        assert!(
            member.sector(map.sector) == p,
            "{}: P of stripe {} (member {}) differs from the pattern's parity",
            case.name,
            map.stripe,
            roles.p
        );
        compared += 1;
    }
    if let Some(q_member) = roles.q {
        // Q = sum of g^slot * D, evaluated by Horner's rule from the highest slot down.
        let mut by_slot: Vec<Option<&[u8; SECTOR]>> = vec![None; roles.syndrome_disks];
        for (i, &m) in roles.data.iter().enumerate() {
            let slot = roles.syndrome_slot[m].expect("data member has a Q slot");
            assert!(by_slot[slot].is_none(), "{}: two data members share Q slot {slot}", case.name);
            by_slot[slot] = Some(&data[i]);
        }
        let mut q = [0u8; SECTOR];
        for block in by_slot.iter().rev() {
            for (k, byte) in q.iter_mut().enumerate() {
                *byte = times_two(*byte) ^ block.map_or(0, |b| b[k]);
            }
        }
        if let Some(member) = &members[q_member] {
            assert!(
                member.sector(map.sector) == q,
                "{}: Q of stripe {} (member {q_member}) differs from the pattern's syndrome",
                case.name,
                map.stripe
            );
            compared += 1;
        }
    }
    compared
}

#[test]
fn layouts_match_every_kernel_made_fixture() {
    let mut ran = Vec::new();
    for case in cases() {
        if !case.is_pattern() {
            println!("skip {} (content is not the sector pattern)", case.name);
            continue;
        }
        let layout = build_layout(&case);
        let array_sectors = layout.array_sectors();
        assert_eq!(
            array_sectors * SECTOR as u64,
            case.array_size_bytes(),
            "{}: array size differs from the kernel's",
            case.name
        );
        let raid_disks = json_u64(&case, "raid_devices") as usize;
        let members = current_members(&case, raid_disks);

        // Every 7th sector plus the first and last sector of every run the layout reports.
        let mut samples: BTreeSet<u64> = (0..array_sectors).step_by(7).collect();
        let mut logical = 0;
        while logical < array_sectors {
            let (_, run) = layout.locate(logical);
            samples.insert(logical);
            samples.insert(logical + run - 1);
            logical += run;
        }

        let (mut data_checked, mut parity_checked) = (0usize, 0usize);
        for &s in &samples {
            let expected = pattern_sector(s, case.case_number, b"MDORACLE", 0);
            let (locations, _) = layout.locate(s);
            for (member, sector) in locations {
                assert_eq!(
                    layout.logical(member, sector),
                    Some(s),
                    "{}: member {member} sector {sector} does not map back to {s}",
                    case.name
                );
                if let Some(image) = &members[member] {
                    assert!(
                        image.sector(sector) == expected,
                        "{}: logical sector {s} is not at member {member} sector {sector}",
                        case.name
                    );
                    data_checked += 1;
                }
            }
            if let Layout::Parity(parity) = &layout {
                parity_checked += check_parity(&case, parity, &members, s);
            }
        }
        assert!(data_checked > 0, "{}: no sector could be checked", case.name);
        println!(
            "ok   {}: {} samples, {data_checked} data sectors, {parity_checked} parity sectors",
            case.name,
            samples.len()
        );
        ran.push(case.name.clone());
    }
    println!("{} fixture cases checked: {}", ran.len(), ran.join(" "));
    assert!(ran.len() >= 30, "only {} fixture cases ran", ran.len());
}
