//! Placement as a whole: the seed paper's and gvinum.8's examples laid out on drives of
//! given sizes, the kernel's sequencing of cuts and free space, objects added to a present
//! configuration, every refusal, and properties of any placement.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::create_description::parse_create_description;
use crate::format_config;
use crate::objects::{VolumeState, DEFAULT_STRIPE_SIZE};

const MIB: u64 = 1 << 20;
const DS: u64 = DATA_START;

fn drives(names: &[&str], media_size: u64) -> Vec<SizedDrive> {
    names.iter().map(|n| SizedDrive { name: n.to_string(), device: format!("d{n}"), media_size }).collect()
}

fn on_drives(names: &[&str], media_size: u64) -> Present {
    Present { config: VinumConfig::default(), drives: drives(names, media_size) }
}

fn place_text(text: &str, present: &Present) -> Result<Placement, PlacementError> {
    place(&parse_create_description(text).expect("a valid description"), present, &BTreeMap::new())
}

fn sd<'a>(placement: &'a Placement, name: &str) -> &'a Subdisk {
    placement.config.subdisk(name).unwrap_or_else(|| panic!("no sd {name}"))
}

/// (drive, drive offset, length, plex offset) of a subdisk.
fn spot(placement: &Placement, name: &str) -> (String, u64, u64, u64) {
    let s = sd(placement, name);
    (s.drive.clone(), s.drive_offset, s.length, s.membership.as_ref().unwrap().plex_offset)
}

fn free_of(placement: &Placement, drive: &str) -> Vec<(u64, u64)> {
    let d = placement.drives.iter().find(|d| d.drive.name == drive).unwrap();
    d.free.iter().map(|e| (e.offset, e.length)).collect()
}

// The Vinum paper (seed 004, "One disk per subdisk"), one config line per object.
const RAID10_EIGHT_DISKS: &str = "volume raid10\n\
    plex org striped 512k\n\
    sd length 102480k drive a\nsd length 102480k drive b\nsd length 102480k drive c\nsd length 102480k drive d\n\
    plex org striped 512k\n\
    sd length 102480k drive e\nsd length 102480k drive f\nsd length 102480k drive g\nsd length 102480k drive h\n";

// The Vinum paper (seed 004, "Both plexes on the same disks").
const RAID10_FOUR_DISKS: &str = "volume raid10\n\
    plex org striped 512k\n\
    sd length 102480k drive a\nsd length 102480k drive b\nsd length 102480k drive c\nsd length 102480k drive d\n\
    plex org striped 512k\n\
    sd length 102480k drive c\nsd length 102480k drive d\nsd length 102480k drive a\nsd length 102480k drive b\n";

#[test]
fn the_papers_raid10_on_eight_disks() {
    let present = on_drives(&["a", "b", "c", "d", "e", "f", "g", "h"], 256 * MIB);
    let placed = place_text(RAID10_EIGHT_DISKS, &present).unwrap();
    // 102480k is 200 stripes of 512k and 80k: the second subdisk of each plex is cut to
    // 200 stripes and the first, shorter than nothing yet when it joined, is cut to match.
    for (plex, drives) in [("raid10.p0", ["a", "b", "c", "d"]), ("raid10.p1", ["e", "f", "g", "h"])] {
        for (column, drive) in drives.iter().enumerate() {
            let name = format!("{plex}.s{column}");
            assert_eq!(spot(&placed, &name), (drive.to_string(), DS, 100 * MIB, column as u64 * 512 * 1024));
            assert_eq!(free_of(&placed, drive), [(DS + 100 * MIB, 156 * MIB - DS)]);
        }
    }
    assert_eq!(placed.config.volume_size("raid10"), Some(400 * MIB));
    assert_eq!(placed.config.problems(), vec![]);
}

#[test]
fn the_papers_raid10_on_four_disks_puts_the_second_plex_after_the_first() {
    let present = on_drives(&["a", "b", "c", "d"], 256 * MIB);
    let placed = place_text(RAID10_FOUR_DISKS, &present).unwrap();
    // The first plex's subdisks start at sector 265 and, once cut to 204800s, give their
    // last 80k back; the second plex's subdisks take the first free extent after them.
    let expected = "volume raid10 state up\n\
        plex name raid10.p1 org striped 1024s vol raid10 state up\n\
        plex name raid10.p0 org striped 1024s vol raid10 state up\n\
        sd name raid10.p1.s3 drive b len 204800s driveoffset 205065s plex raid10.p1 plexoffset 3072s state up\n\
        sd name raid10.p1.s2 drive a len 204800s driveoffset 205065s plex raid10.p1 plexoffset 2048s state up\n\
        sd name raid10.p1.s1 drive d len 204800s driveoffset 205065s plex raid10.p1 plexoffset 1024s state up\n\
        sd name raid10.p1.s0 drive c len 204800s driveoffset 205065s plex raid10.p1 plexoffset 0s state up\n\
        sd name raid10.p0.s3 drive d len 204800s driveoffset 265s plex raid10.p0 plexoffset 3072s state up\n\
        sd name raid10.p0.s2 drive c len 204800s driveoffset 265s plex raid10.p0 plexoffset 2048s state up\n\
        sd name raid10.p0.s1 drive b len 204800s driveoffset 265s plex raid10.p0 plexoffset 1024s state up\n\
        sd name raid10.p0.s0 drive a len 204800s driveoffset 265s plex raid10.p0 plexoffset 0s state up\n";
    assert_eq!(format_config(&placed.config).unwrap(), expected);
    assert_eq!(free_of(&placed, "a"), [(DS + 200 * MIB, 56 * MIB - DS)]);
    // On drives too small for two such subdisks the second plex does not fit.
    let small = on_drives(&["a", "b", "c", "d"], 200 * MIB);
    assert_eq!(
        place_text(RAID10_FOUR_DISKS, &small),
        Err(PlacementError::NoExtentLargeEnough {
            subdisk: "raid10.p1.s0".into(),
            drive: "c".into(),
            length: 102_480 * 1024,
            largest: 100 * MIB - DS,
        })
    );
}

#[test]
fn gvinum8s_raid5_example() {
    // "gvinum raid5 -s 493k /dev/ada1 /dev/ada2 /dev/ada3", named as the page's listing,
    // on disks of 33000 sectors: 32735 sectors of data area, 33 stripes of 986 sectors.
    let present = Present::default();
    let description =
        raid5(&present, &["/dev/ada1", "/dev/ada2", "/dev/ada3"], Some("myraid5vol"), 493 * 1024).unwrap();
    let sizes: BTreeMap<String, u64> = ["ada1", "ada2", "ada3"].iter().map(|d| (d.to_string(), 33_000 * 512)).collect();
    let placed = place(&description, &present, &sizes).unwrap();
    let listing = include_str!("../../tests/data/man-page-raid5.conf");
    // The page shows the volume after a drive failed; new, everything is up.
    let expected = listing.replace("state degraded", "state up").replace("state stale", "state up");
    assert_eq!(format_config(&placed.config).unwrap(), expected);
    let names: Vec<&str> = placed.drives.iter().map(|d| d.drive.name.as_str()).collect();
    assert_eq!(names, ["gvinumdrive2", "gvinumdrive1", "gvinumdrive0"]);
}

#[test]
fn gvinum8s_mirror_examples() {
    // "gvinum mirror /dev/ada1 /dev/ada2": each plex one whole drive.
    let present = Present::default();
    let description = mirror(&present, &["/dev/ada1", "/dev/ada2"], None, false).unwrap();
    let sizes = BTreeMap::from([("ada1".to_string(), 1 << 30), ("ada2".to_string(), (1 << 30) + MIB)]);
    let placed = place(&description, &present, &sizes).unwrap();
    assert_eq!(spot(&placed, "gvinumvolume0.p0.s0"), ("gvinumdrive0".into(), DS, (1 << 30) - DS, 0));
    assert_eq!(spot(&placed, "gvinumvolume0.p1.s0"), ("gvinumdrive1".into(), DS, (1 << 30) + MIB - DS, 0));
    assert_eq!(placed.config.volume_size("gvinumvolume0"), Some((1 << 30) - DS));
    assert!(placed.drives.iter().all(|d| d.free.is_empty()));
    // "gvinum mirror -s -n data /dev/ada1 /dev/ada2 /dev/ada3 /dev/ada4": two striped plexes,
    // each subdisk the drive's data area cut to whole 256k stripes.
    let devices = ["/dev/ada1", "/dev/ada2", "/dev/ada3", "/dev/ada4"];
    let description = mirror(&present, &devices, Some("data"), true).unwrap();
    let sizes: BTreeMap<String, u64> = devices.iter().map(|d| (d[5..].to_string(), 1 << 30)).collect();
    let placed = place(&description, &present, &sizes).unwrap();
    let column = ((1 << 30) - DS) / DEFAULT_STRIPE_SIZE * DEFAULT_STRIPE_SIZE;
    assert_eq!(spot(&placed, "data.p0.s1"), ("gvinumdrive2".into(), DS, column, DEFAULT_STRIPE_SIZE));
    assert_eq!(spot(&placed, "data.p1.s0"), ("gvinumdrive1".into(), DS, column, 0));
    assert_eq!(placed.config.volume_size("data"), Some(2 * column));
    assert_eq!(free_of(&placed, "gvinumdrive3"), [(DS + column, (1 << 30) - DS - column)]);
}

#[test]
fn concat_and_stripe_shortcuts_use_whole_drives() {
    let present = Present::default();
    let sizes = BTreeMap::from([("da0".to_string(), 10 * MIB), ("da1".to_string(), 30 * MIB + 512)]);
    let placed = place(&concat(&present, &["da0", "da1"], None).unwrap(), &present, &sizes).unwrap();
    assert_eq!(spot(&placed, "gvinumvolume0.p0.s1"), ("gvinumdrive1".into(), DS, 30 * MIB + 512 - DS, 10 * MIB - DS));
    assert_eq!(placed.config.volume_size("gvinumvolume0"), Some(40 * MIB + 512 - 2 * DS));
    // stripe: both cut to the smaller drive's whole stripes.
    let placed = place(&stripe(&present, &["da0", "da1"], None).unwrap(), &present, &sizes).unwrap();
    let column = (10 * MIB - DS) / DEFAULT_STRIPE_SIZE * DEFAULT_STRIPE_SIZE;
    assert_eq!(spot(&placed, "gvinumvolume0.p0.s1"), ("gvinumdrive1".into(), DS, column, DEFAULT_STRIPE_SIZE));
    assert_eq!(free_of(&placed, "gvinumdrive1"), [(DS + column, 30 * MIB + 512 - DS - column)]);
}

#[test]
fn concat_subdisks_follow_each_other_and_share_drives_first_fit() {
    let present = on_drives(&["a", "b"], 64 * MIB);
    let text = "volume v\nplex org concat\nsd drive a len 1m\nsd drive b len 2m\nsd drive a len 1m\n";
    let placed = place_text(text, &present).unwrap();
    assert_eq!(spot(&placed, "v.p0.s0"), ("a".into(), DS, MIB, 0));
    assert_eq!(spot(&placed, "v.p0.s1"), ("b".into(), DS, 2 * MIB, MIB));
    assert_eq!(spot(&placed, "v.p0.s2"), ("a".into(), DS + MIB, MIB, 3 * MIB));
    // A given plex offset is kept; the next subdisk goes after the highest one.
    let text = "volume v\nplex org concat\nsd drive a len 1m plexoffset 0\nsd drive b len 1m\n";
    assert_eq!(spot(&place_text(text, &present).unwrap(), "v.p0.s1"), ("b".into(), DS, MIB, MIB));
    // And a given drive offset is where the subdisk goes.
    let text = "volume v\nplex org concat\nsd drive a len 1m driveoffset 8m\nsd drive a len 1m\n";
    let placed = place_text(text, &present).unwrap();
    assert_eq!(spot(&placed, "v.p0.s0"), ("a".into(), 8 * MIB, MIB, 0));
    assert_eq!(spot(&placed, "v.p0.s1"), ("a".into(), DS, MIB, MIB));
    assert_eq!(free_of(&placed, "a"), [(DS + MIB, 7 * MIB - DS), (9 * MIB, 55 * MIB)]);
}

/// A present concat volume on drive `a` whose subdisks leave holes: free extents of 1M at
/// DS, 3M at DS+2M and `last`M at DS+6M.
fn drive_with_holes(last: u64) -> Present {
    let sub = |name: &str, at: u64, plex_offset: u64| Subdisk {
        name: name.into(),
        drive: "a".into(),
        length: MIB,
        drive_offset: DS + at,
        membership: Some(PlexMembership { plex: "p.p0".into(), plex_offset }),
        state: SubdiskState::Up,
    };
    Present {
        config: VinumConfig {
            volumes: vec![Volume { name: "p".into(), state: crate::objects::VolumeState::Up }],
            plexes: vec![Plex {
                name: "p.p0".into(),
                organization: PlexOrganization::Concat,
                volume: Some("p".into()),
                state: PlexState::Up,
            }],
            subdisks: vec![sub("p.p0.s0", MIB, 0), sub("p.p0.s1", 5 * MIB, MIB)],
        },
        drives: drives(&["a"], DS + (6 + last) * MIB),
    }
}

#[test]
fn autosize_takes_the_largest_extent_and_lengths_the_first_that_fits() {
    let present = drive_with_holes(4);
    let one =
        |line: &str| place_text(&format!("volume v\nplex org concat\n{line}\n"), &present).map(|p| spot(&p, "v.p0.s0"));
    assert_eq!(one("sd drive a"), Ok(("a".into(), DS + 6 * MIB, 4 * MIB, 0)));
    assert_eq!(one("sd drive a len 2m"), Ok(("a".into(), DS + 2 * MIB, 2 * MIB, 0)));
    assert_eq!(one("sd drive a len 512k"), Ok(("a".into(), DS, 512 * 1024, 0)));
    assert_eq!(
        one("sd drive a driveoffset 6m"),
        Err(PlacementError::AutosizeElsewhere {
            subdisk: "v.p0.s0".into(),
            drive: "a".into(),
            given: 6 * MIB,
            chosen: DS + 6 * MIB,
        })
    );
    // Two largest extents of 3M: the kernel's loop ends on the later one.
    let present = drive_with_holes(3);
    let placed = place_text("volume v\nplex org concat\nsd drive a\n", &present).unwrap();
    assert_eq!(spot(&placed, "v.p0.s0"), ("a".into(), DS + 6 * MIB, 3 * MIB, 0));
    // Present objects follow the new ones, as the kernel lists them.
    let names: Vec<&str> = placed.config.subdisks.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["v.p0.s0", "p.p0.s0", "p.p0.s1"]);
}

#[test]
fn space_cut_from_a_subdisk_is_free_for_later_subdisks_of_the_same_create() {
    let mut present = on_drives(&["a"], DS + 10 * MIB + 4096);
    present.drives.extend(drives(&["b"], DS + 20 * MIB));
    // b's subdisk joins first; a's is shorter, so b's is cut to it and a's last 4096 bytes
    // (not a whole 64k stripe) go back at once: w's subdisk on a gets them.
    let text = "volume v\nplex org striped 64k\nsd drive b\nsd drive a\nvolume w\nplex org concat\nsd drive a\n";
    let placed = place_text(text, &present).unwrap();
    assert_eq!(spot(&placed, "v.p0.s0"), ("b".into(), DS, 10 * MIB, 0));
    assert_eq!(spot(&placed, "v.p0.s1"), ("a".into(), DS, 10 * MIB, 65_536));
    assert_eq!(spot(&placed, "w.p0.s0"), ("a".into(), DS + 10 * MIB, 4096, 0));
    assert_eq!(free_of(&placed, "b"), [(DS + 10 * MIB, 10 * MIB)]);
    // The other way round, a's subdisk is first and is cut to whole stripes only at the end
    // of the create: when w's subdisk comes, drive a is still full.
    let text = "volume v\nplex org striped 64k\nsd drive a\nsd drive b\nvolume w\nplex org concat\nsd drive a\n";
    assert_eq!(
        place_text(text, &present),
        Err(PlacementError::NoFreeSpace { subdisk: "w.p0.s0".into(), drive: "a".into() })
    );
    let text = "volume v\nplex org striped 64k\nsd drive a\nsd drive b\n";
    let placed = place_text(text, &present).unwrap();
    assert_eq!(spot(&placed, "v.p0.s0"), ("a".into(), DS, 10 * MIB, 0));
    assert_eq!(spot(&placed, "v.p0.s1"), ("b".into(), DS, 10 * MIB, 65_536));
    assert_eq!(free_of(&placed, "a"), [(DS + 10 * MIB, 4096)]);
}

/// A present striped volume `r` (64k stripes, up) with 10M columns on `a` and `b`; drive `c`
/// empty.
fn present_striped() -> Present {
    let column = |i: u64, drive: &str| Subdisk {
        name: format!("r.p0.s{i}"),
        drive: drive.into(),
        length: 10 * MIB,
        drive_offset: DS,
        membership: Some(PlexMembership { plex: "r.p0".into(), plex_offset: i * 65_536 }),
        state: SubdiskState::Up,
    };
    Present {
        config: VinumConfig {
            volumes: vec![Volume { name: "r".into(), state: VolumeState::Up }],
            plexes: vec![Plex {
                name: "r.p0".into(),
                organization: PlexOrganization::Striped { stripe_size: 65_536 },
                volume: Some("r".into()),
                state: PlexState::Up,
            }],
            subdisks: vec![column(0, "a"), column(1, "b")],
        },
        drives: drives(&["a", "b", "c"], DS + 32 * MIB),
    }
}

#[test]
fn a_subdisk_added_to_a_running_striped_plex_is_cut_to_its_columns_and_makes_it_growable() {
    let present = present_striped();
    let placed = place_text("sd name r.p0.s2 drive c plex r.p0\n", &present).unwrap();
    assert_eq!(spot(&placed, "r.p0.s2"), ("c".into(), DS, 10 * MIB, 2 * 65_536));
    assert_eq!(free_of(&placed, "c"), [(DS + 10 * MIB, 22 * MIB)]);
    assert_eq!(placed.config.plex("r.p0").unwrap().state, PlexState::Growable);
    assert_eq!(placed.config.volume("r").unwrap().state, VolumeState::Up);
    assert_eq!(sd(&placed, "r.p0.s2").state, SubdiskState::Up);
    // A shorter one would shrink a plex that holds data: refused (GV_ERR_BADSIZE).
    assert_eq!(
        place_text("sd name r.p0.s2 drive c len 8m plex r.p0\n", &present),
        Err(PlacementError::ShorterThanColumns {
            subdisk: "r.p0.s2".into(),
            drive: "c".into(),
            plex: "r.p0".into(),
            length: 8 * MIB,
            column_length: 10 * MIB,
        })
    );
}

#[test]
fn a_plex_added_to_a_present_volume_comes_up_down_until_started() {
    let present = present_striped();
    // States given in the description do not count: the kernel sets them.
    let placed = place_text("plex name r.p1 org concat vol r\nsd drive c len 20m state up\n", &present).unwrap();
    assert_eq!(placed.config.plex("r.p1").unwrap().state, PlexState::Down);
    assert_eq!(sd(&placed, "r.p1.s0").state, SubdiskState::Stale);
    assert_eq!(placed.config.volume("r").unwrap().state, VolumeState::Up);
    // A raid5 plex keeps its subdisks up (it is initialised, not synced), but is down too.
    let text = "plex name r.p1 org raid5 64k vol r\nsd drive c len 4m\nsd drive c len 4m\nsd drive c len 4m\n";
    let placed = place_text(text, &present).unwrap();
    assert_eq!(placed.config.plex("r.p1").unwrap().state, PlexState::Down);
    assert!(placed.config.subdisks_of("r.p1").iter().all(|s| s.state == SubdiskState::Up));
    // In a new volume a new plex and its subdisks come up, whatever the description says.
    let placed =
        place_text("volume n state down\nplex org concat state down\nsd drive c state stale\n", &present).unwrap();
    assert_eq!(placed.config.volume("n").unwrap().state, VolumeState::Up);
    assert_eq!(placed.config.plex("n.p0").unwrap().state, PlexState::Up);
    assert_eq!(sd(&placed, "n.p0.s0").state, SubdiskState::Up);
}

#[test]
fn new_drives_come_from_the_description_with_their_device_sizes() {
    let present = present_striped();
    let text = "drive e device /dev/ada7\nvolume n\nplex org concat\nsd drive e\n";
    let sizes = BTreeMap::from([("ada7".to_string(), 8 * MIB)]);
    let placed = place(&parse_create_description(text).unwrap(), &present, &sizes).unwrap();
    assert_eq!(spot(&placed, "n.p0.s0"), ("e".into(), DS, 8 * MIB - DS, 0));
    let first = &placed.drives[0];
    assert_eq!(first.drive, SizedDrive { name: "e".into(), device: "ada7".into(), media_size: 8 * MIB });
    assert_eq!(placed.drives.len(), 4);
}

fn refused(text: &str) -> PlacementError {
    place_text(text, &errors_present()).unwrap_err()
}

/// Drives a, b, c of 64M data area (devices da, db, dc); volume `old` on c.
fn errors_present() -> Present {
    let mut present = on_drives(&["a", "b", "c"], DS + 64 * MIB);
    let text = "volume old\nplex org concat\nsd drive c len 1m\n";
    present.config = place_text(text, &present).unwrap().config;
    present
}

fn description(text: &str) -> CreateDescription {
    parse_create_description(text).unwrap()
}

fn refused_description(description: &CreateDescription) -> PlacementError {
    place(description, &errors_present(), &BTreeMap::new()).unwrap_err()
}

#[test]
fn references_to_missing_objects_are_refused() {
    let head = "volume v\nplex org concat\n";
    assert_eq!(
        refused(&format!("{head}sd drive zz\n")),
        PlacementError::UnknownDrive { subdisk: "v.p0.s0".into(), drive: "zz".into() }
    );
    assert_eq!(
        refused(&format!("{head}sd name x drive a plex nope\n")),
        PlacementError::UnknownPlex { subdisk: "x".into(), drive: "a".into(), plex: "nope".into() }
    );
    assert_eq!(
        refused("plex name p org concat vol nope\n"),
        PlacementError::UnknownVolume { plex: "p".into(), volume: "nope".into() }
    );
    let mut d = description(&format!("{head}sd drive a\n"));
    d.subdisks[0].plex = None;
    assert_eq!(
        refused_description(&d),
        PlacementError::SubdiskWithoutPlex { subdisk: "v.p0.s0".into(), drive: "a".into() }
    );
    d.plexes[0].volume = None;
    assert_eq!(refused_description(&d), PlacementError::PlexWithoutVolume { plex: "v.p0".into() });
}

#[test]
fn subdisks_that_do_not_fit_are_refused() {
    let head = "volume v\nplex org concat\n";
    let subdisk = |name: &str| name.to_string();
    assert_eq!(
        refused(&format!("{head}sd drive a\nsd drive a\n")),
        PlacementError::NoFreeSpace { subdisk: subdisk("v.p0.s1"), drive: "a".into() }
    );
    assert_eq!(
        refused(&format!("{head}sd drive a len 100m\n")),
        PlacementError::NoExtentLargeEnough {
            subdisk: subdisk("v.p0.s0"),
            drive: "a".into(),
            length: 100 * MIB,
            largest: 64 * MIB
        }
    );
    assert_eq!(
        refused(&format!("{head}sd drive a len 2m driveoffset 63m\n")),
        PlacementError::PastDriveEnd {
            subdisk: subdisk("v.p0.s0"),
            drive: "a".into(),
            end: u128::from(65 * MIB),
            data_end: DS + 64 * MIB
        }
    );
    assert_eq!(
        refused(&format!("{head}sd name x drive a len 1m\nsd name y drive a len 1m driveoffset 1m\n")),
        PlacementError::OverlapsSubdisk {
            subdisk: subdisk("y"),
            drive: "a".into(),
            other: "x".into(),
            drive_offset: MIB,
            end: u128::from(2 * MIB)
        }
    );
    // Over a subdisk of the present configuration.
    assert_eq!(
        refused(&format!("{head}sd name y drive c len 1m driveoffset 265s\n")),
        PlacementError::OverlapsSubdisk {
            subdisk: subdisk("y"),
            drive: "c".into(),
            other: "old.p0.s0".into(),
            drive_offset: DS,
            end: u128::from(DS + MIB)
        }
    );
    assert_eq!(
        refused(&format!("{head}sd name x drive a len 1m driveoffset 1m\nsd name y drive a driveoffset 265s\n")),
        PlacementError::AutosizeElsewhere { subdisk: subdisk("y"), drive: "a".into(), given: DS, chosen: 2 * MIB }
    );
    let mut d = description(&format!("{head}sd drive a len 1m\n"));
    d.subdisks[0].drive_offset = Some(4096);
    assert_eq!(
        refused_description(&d),
        PlacementError::OffsetInMetadata { subdisk: subdisk("v.p0.s0"), drive: "a".into(), drive_offset: 4096 }
    );
    d.subdisks[0].drive_offset = None;
    d.subdisks[0].length = Some(1000);
    assert_eq!(
        refused_description(&d),
        PlacementError::NotWholeSectors { subdisk: subdisk("v.p0.s0"), drive: "a".into(), what: "length", value: 1000 }
    );
}

#[test]
fn bad_stripe_sizes_are_refused() {
    let present = Present::default();
    let sizes: BTreeMap<String, u64> = ["x", "y", "z"].iter().map(|d| (d.to_string(), 64 * MIB)).collect();
    let with = |stripe_size| place(&raid5(&present, &["x", "y", "z"], None, stripe_size).unwrap(), &present, &sizes);
    let plex = || "gvinumvolume0.p0".to_string();
    assert_eq!(with(0), Err(PlacementError::ZeroStripeSize { plex: plex() }));
    assert_eq!(with(1000), Err(PlacementError::StripeSizeNotWholeSectors { plex: plex(), stripe_size: 1000 }));
    assert_eq!(with(1 << 31), Err(PlacementError::StripeSizeTooLarge { plex: plex(), stripe_size: 1 << 31 }));
    assert!(with(MAX_STRIPE_SIZE).is_err_and(|e| matches!(e, PlacementError::NoWholeStripe { .. })));
    assert!(with(512).is_ok());
}

#[test]
fn names_and_devices_gvinum_has_are_refused() {
    let exists = |kind, name: &str| PlacementError::AlreadyExists { kind, name: name.into() };
    assert_eq!(refused("volume old\n"), exists(ObjectKind::Volume, "old"));
    assert_eq!(refused("volume v\nplex name old.p0 org concat\n"), exists(ObjectKind::Plex, "old.p0"));
    assert_eq!(
        refused("volume v\nplex org concat\nsd name old.p0.s0 drive a\n"),
        exists(ObjectKind::Subdisk, "old.p0.s0")
    );
    assert_eq!(refused("drive c device dz\n"), exists(ObjectKind::Drive, "c"));
    assert_eq!(
        refused("volume v\nvolume v\n"),
        PlacementError::DescribedTwice { kind: ObjectKind::Volume, name: "v".into() }
    );
    assert_eq!(
        refused("drive n device /dev/da\n"),
        PlacementError::DeviceInUse { drive: "n".into(), device: "da".into(), holder: "a".into() }
    );
    assert_eq!(
        refused("drive n device new1\n"),
        PlacementError::UnknownDeviceSize { drive: "n".into(), device: "new1".into() }
    );
    let mut d = description("drive n device new1\n");
    d.drives[0].device = None;
    assert_eq!(refused_description(&d), PlacementError::MissingDevice { drive: "n".into() });
    let mut d = description("volume v\n");
    d.volumes[0].name = "two words".into();
    assert!(matches!(refused_description(&d), PlacementError::BadName { kind: ObjectKind::Volume, .. }));
}

#[test]
fn plexes_that_could_not_come_up_are_refused() {
    let no_whole_stripe = |subdisk: &str, drive: &str, length| PlacementError::NoWholeStripe {
        subdisk: subdisk.into(),
        drive: drive.into(),
        plex: "v.p0".into(),
        length,
        stripe_size: MIB,
    };
    // The first subdisk is cut only at the end, the second when it joins.
    let head = "volume v\nplex org striped 1m\n";
    assert_eq!(
        refused(&format!("{head}sd drive a len 512k\nsd drive b len 2m\n")),
        no_whole_stripe("v.p0.s0", "a", 512 * 1024)
    );
    assert_eq!(
        refused(&format!("{head}sd drive a len 2m\nsd drive b len 512k\n")),
        no_whole_stripe("v.p0.s1", "b", 512 * 1024)
    );
    assert_eq!(
        refused("volume v\nplex org concat\nsd drive a len 1m plexoffset 0\nsd drive b len 1m plexoffset 0\n"),
        PlacementError::PlexOffsetTaken {
            subdisk: "v.p0.s1".into(),
            drive: "b".into(),
            plex: "v.p0".into(),
            plex_offset: 0,
            other: "v.p0.s0".into()
        }
    );
    assert_eq!(
        refused("volume v\nplex org raid5 64k\nsd drive a\nsd drive b\n"),
        PlacementError::TooFewSubdisks {
            plex: "v.p0".into(),
            organization: PlexOrganization::Raid5 { stripe_size: 65_536 },
            found: 2,
            needed: 3
        }
    );
    assert!(matches!(
        refused("volume v\nplex org concat\n"),
        PlacementError::TooFewSubdisks { found: 0, needed: 1, .. }
    ));
    // What the kernel would take but not bring up as written: a concat plex with a hole.
    assert_eq!(
        refused("volume v\nplex org concat\nsd drive a len 1m plexoffset 1m\n"),
        PlacementError::Unsound {
            problems: vec![ConfigProblem::ConcatNotContiguous {
                plex: "v.p0".into(),
                subdisk: "v.p0.s0".into(),
                plex_offset: MIB,
                expected: 0
            }]
        }
    );
}

#[test]
fn an_unsound_present_configuration_is_refused() {
    let mut present = errors_present();
    present.config.subdisks[0].drive_offset = 4096;
    assert!(matches!(place_text("volume v\n", &present), Err(PlacementError::PresentUnsound { .. })));
    let mut present = errors_present();
    present.drives[1].name = "a".into();
    assert_eq!(place_text("volume v\n", &present), Err(PlacementError::PresentDriveListedTwice { drive: "a".into() }));
}

#[test]
fn detached_plexes_and_subdisks_stay_and_keep_their_space() {
    // What `detach` leaves: old.p0 out of its volume, its subdisk still in it, on c.
    let mut present = errors_present();
    present.config.plexes[0].volume = None;
    let placed = place_text("volume v\nplex org concat\nsd drive c len 1m\n", &present).unwrap();
    assert_eq!(spot(&placed, "v.p0.s0"), ("c".into(), DS + MIB, MIB, 0));
    assert_eq!(placed.config.plex("old.p0").unwrap().volume, None);
    // And a detached subdisk after it.
    let mut present = errors_present();
    let loose = Subdisk {
        name: "loose".into(),
        drive_offset: DS + MIB,
        membership: None,
        ..present.config.subdisks[0].clone()
    };
    present.config.subdisks.push(loose);
    let placed = place_text("volume v\nplex org concat\nsd drive c len 1m\n", &present).unwrap();
    assert_eq!(spot(&placed, "v.p0.s0").1, DS + 2 * MIB);
    assert!(placed.config.subdisk("loose").is_some_and(|s| s.membership.is_none()));
}

/// Every subdisk inside its drive's data area, none overlapping another, the free extents
/// exactly the rest, and the configuration sound.
fn assert_laid_out(placement: &Placement) -> Result<(), TestCaseError> {
    let sizes: BTreeMap<String, u64> =
        placement.drives.iter().map(|d| (d.drive.name.clone(), d.drive.media_size)).collect();
    prop_assert_eq!(placement.config.problems_on_drives(&sizes), vec![]);
    for drive in &placement.drives {
        let mut used: Vec<(u64, u64)> = placement
            .config
            .subdisks
            .iter()
            .filter(|s| s.drive == drive.drive.name)
            .map(|s| (s.drive_offset, s.length))
            .chain(drive.free.iter().map(|e| (e.offset, e.length)))
            .collect();
        used.sort_unstable();
        let mut at = DS;
        for (offset, length) in used {
            prop_assert_eq!(offset, at, "drive {} not tiled", drive.drive.name);
            prop_assert!(length > 0);
            at = offset + length;
        }
        prop_assert_eq!(at.max(DS), data_area_end(drive.drive.media_size).max(DS));
    }
    Ok(())
}

fn organization() -> impl Strategy<Value = PlexOrganization> {
    prop_oneof![
        Just(PlexOrganization::Concat),
        (1u64..=16).prop_map(|s| PlexOrganization::Striped { stripe_size: s * 512 }),
        (1u64..=16).prop_map(|s| PlexOrganization::Raid5 { stripe_size: s * 512 }),
    ]
}

/// (drive, length, drive offset, plex offset), lengths and offsets in sectors.
type RequestShape = (usize, Option<u64>, Option<u64>, Option<u64>);

fn request() -> impl Strategy<Value = RequestShape> {
    (
        0usize..4,
        prop::option::weighted(0.85, 1u64..=600),
        prop::option::weighted(0.05, 265u64..=4000),
        prop::option::weighted(0.02, 0u64..=64),
    )
}

/// Volumes of plexes of subdisks, named `<prefix><i>`, `.p<j>`, `.s<k>`, on drives d0..d3.
fn random_description(prefix: &'static str) -> impl Strategy<Value = CreateDescription> {
    // Mostly enough subdisks for the organization; a plex with too few is refused.
    let plex = organization().prop_flat_map(|o| {
        let needed = o.minimum_subdisks();
        (Just(o), prop::collection::vec(request(), needed..needed + 3))
    });
    prop::collection::vec(prop::collection::vec(plex, 1..3), 1..3).prop_map(move |volumes| {
        let mut d = CreateDescription::default();
        for (i, plexes) in volumes.into_iter().enumerate() {
            let volume = format!("{prefix}{i}");
            d.volumes.push(Volume { name: volume.clone(), state: VolumeState::Down });
            for (j, (organization, requests)) in plexes.into_iter().enumerate() {
                let plex = format!("{volume}.p{j}");
                d.plexes.push(Plex {
                    name: plex.clone(),
                    organization,
                    volume: Some(volume.clone()),
                    state: PlexState::Down,
                });
                for (k, (drive, length, drive_offset, plex_offset)) in requests.into_iter().enumerate() {
                    d.subdisks.push(SubdiskRequest {
                        name: format!("{plex}.s{k}"),
                        drive: format!("d{drive}"),
                        plex: Some(plex.clone()),
                        length: length.map(|s| s * 512),
                        drive_offset: drive_offset.map(|s| s * 512),
                        plex_offset: plex_offset.map(|s| s * 512),
                        state: None,
                    });
                }
            }
        }
        d
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_placement_is_laid_out_soundly(
        sizes in prop::collection::vec(0u64..=8000 * 512 + 511, 4),
        first in random_description("v"),
        second in random_description("w"),
    ) {
        let names = ["d0", "d1", "d2", "d3"];
        let present = Present {
            config: VinumConfig::default(),
            drives: names.iter().zip(&sizes).map(|(n, &media_size)| SizedDrive {
                name: n.to_string(),
                device: n.to_string(),
                media_size: DS + media_size,
            }).collect(),
        };
        if let Ok(placed) = place(&first, &present, &BTreeMap::new()) {
            assert_laid_out(&placed)?;
            // Placing again on top of it: the present subdisks stay where they are.
            let again = Present {
                config: placed.config.clone(),
                drives: placed.drives.iter().map(|d| d.drive.clone()).collect(),
            };
            if let Ok(more) = place(&second, &again, &BTreeMap::new()) {
                assert_laid_out(&more)?;
                for s in &placed.config.subdisks {
                    let kept = more.config.subdisk(&s.name).unwrap();
                    prop_assert_eq!((kept.drive_offset, kept.length), (s.drive_offset, s.length));
                }
            }
        }
    }

    #[test]
    fn shortcuts_on_any_devices_are_laid_out_soundly(
        sizes in prop::collection::vec(0u64..=4000 * 512 + 511, 1..7),
        command in 0usize..5,
        stripe_sectors in 1u64..=64,
    ) {
        let present = Present::default();
        let devices: Vec<String> = (0..sizes.len()).map(|i| format!("da{i}")).collect();
        let devices: Vec<&str> = devices.iter().map(String::as_str).collect();
        let device_sizes: BTreeMap<String, u64> =
            devices.iter().zip(&sizes).map(|(d, &s)| (d.to_string(), DS + s)).collect();
        let description = match command {
            0 => concat(&present, &devices, None),
            1 => stripe(&present, &devices, None),
            2 => raid5(&present, &devices, None, stripe_sectors * 512),
            3 => mirror(&present, &devices, None, false),
            _ => mirror(&present, &devices, None, true),
        };
        let Ok(description) = description else { return Ok(()) };
        match place(&description, &present, &device_sizes) {
            Ok(placed) => {
                assert_laid_out(&placed)?;
                prop_assert_eq!(placed.config.subdisks.len(), devices.len());
                prop_assert!(placed.config.subdisks.iter().all(|s| s.drive_offset == DS));
                prop_assert_eq!(placed.config.volume("gvinumvolume0").unwrap().state, VolumeState::Up);
            }
            // Only drives without room, or too small for a stripe, keep a shortcut from being
            // placed.
            Err(e) => prop_assert!(
                matches!(e, PlacementError::NoFreeSpace { .. } | PlacementError::NoWholeStripe { .. }),
                "{e}"
            ),
        }
    }
}
