//! Generators shared by the property and corruption tests: configurations that gvinum could
//! have written, headers, and gvinum-form texts.

#![allow(dead_code)]

use proptest::prelude::*;
use uraid_vinum_format::drive_layout::DATA_START;
use uraid_vinum_format::objects::{check_name, ObjectKind};
use uraid_vinum_format::{
    DriveHeader, HeaderLayout, HeaderStatus, Plex, PlexMembership, PlexOrganization, PlexState, Subdisk, SubdiskState,
    Timeval, VinumConfig, Volume, VolumeState,
};

/// A name gvinum can write for an object of `kind`: mostly ordinary, sometimes with the
/// characters that are legal inside a token but special at its start.
pub fn name(kind: ObjectKind) -> impl Strategy<Value = String> {
    let max = kind.max_name_len();
    prop_oneof![
        4 => "[a-z][a-z0-9._-]{0,14}",
        1 => "[A-Za-z0-9][A-Za-z0-9._#'\"é:/-]{0,20}",
        1 => proptest::string::string_regex(&format!("[a-z]{{{max}}}")).unwrap(),
    ]
    .prop_filter("a valid name", move |n| check_name(kind, n).is_ok())
}

fn sectors(max: u64) -> impl Strategy<Value = u64> {
    (1..=max).prop_map(|s| s * 512)
}

pub fn organization() -> impl Strategy<Value = PlexOrganization> {
    prop_oneof![
        Just(PlexOrganization::Concat),
        sectors(4096).prop_map(|stripe_size| PlexOrganization::Striped { stripe_size }),
        sectors(4096).prop_map(|stripe_size| PlexOrganization::Raid5 { stripe_size }),
    ]
}

pub fn volume() -> impl Strategy<Value = Volume> {
    (name(ObjectKind::Volume), proptest::sample::select(VolumeState::ALL))
        .prop_map(|(name, state)| Volume { name, state })
}

pub fn plex() -> impl Strategy<Value = Plex> {
    (
        name(ObjectKind::Plex),
        organization(),
        proptest::option::weighted(0.9, name(ObjectKind::Volume)),
        proptest::sample::select(PlexState::ALL),
    )
        .prop_map(|(name, organization, volume, state)| Plex { name, organization, volume, state })
}

pub fn subdisk() -> impl Strategy<Value = Subdisk> {
    (
        name(ObjectKind::Subdisk),
        name(ObjectKind::Drive),
        sectors(1 << 40),
        (0u64..1 << 40).prop_map(|s| DATA_START + s * 512),
        proptest::option::weighted(
            0.9,
            (name(ObjectKind::Plex), (0u64..1 << 40).prop_map(|s| s * 512))
                .prop_map(|(plex, plex_offset)| PlexMembership { plex, plex_offset }),
        ),
        proptest::sample::select(SubdiskState::ALL),
    )
        .prop_map(|(name, drive, length, drive_offset, membership, state)| Subdisk {
            name,
            drive,
            length,
            drive_offset,
            membership,
            state,
        })
}

/// Any configuration the text can hold: objects need not refer to each other.
pub fn config() -> impl Strategy<Value = VinumConfig> {
    (
        proptest::collection::vec(volume(), 0..4),
        proptest::collection::vec(plex(), 0..6),
        proptest::collection::vec(subdisk(), 0..10),
    )
        .prop_map(|(volumes, plexes, subdisks)| VinumConfig { volumes, plexes, subdisks })
}

/// A configuration as gvinum's shortcut commands make it: one volume, one plex, one
/// subdisk per drive at the data start, column offsets as gvinum assigns them.
pub fn sound_config() -> impl Strategy<Value = VinumConfig> {
    ("[a-z][a-z0-9_-]{0,20}", organization(), 3usize..6, 1u64..64).prop_map(|(volume, organization, n, units)| {
        let plex = format!("{volume}.p0");
        let stripe = organization.stripe_size().unwrap_or(65_536);
        let length = units * stripe;
        let subdisks = (0..n)
            .rev()
            .map(|i| Subdisk {
                name: format!("{plex}.s{i}"),
                drive: format!("gvinumdrive{i}"),
                length,
                drive_offset: DATA_START,
                membership: Some(PlexMembership {
                    plex: plex.clone(),
                    plex_offset: i as u64 * if organization.stripe_size().is_some() { stripe } else { length },
                }),
                state: SubdiskState::Up,
            })
            .collect();
        VinumConfig {
            volumes: vec![Volume { name: volume.clone(), state: VolumeState::Up }],
            plexes: vec![Plex { name: plex, organization, volume: Some(volume), state: PlexState::Up }],
            subdisks,
        }
    })
}

fn timeval() -> impl Strategy<Value = Timeval> {
    (any::<u64>(), any::<u64>()).prop_map(|(s, us)| Timeval::new(s, us))
}

/// Any header the canonical layout can hold.
pub fn header() -> impl Strategy<Value = DriveHeader> {
    (any::<bool>(), any::<u64>(), "[ -~]{0,32}", "[!-~]{0,32}", timeval(), timeval(), any::<u64>()).prop_map(
        |(active, config_length, sysname, name, born, updated, drive_size)| {
            let mut h = DriveHeader::new(&name, &sysname, born);
            h.status = if active { HeaderStatus::Active } else { HeaderStatus::Removed };
            h.layout = HeaderLayout::Canonical;
            h.config_length = config_length;
            h.label.last_update = updated;
            h.label.drive_size = drive_size;
            h
        },
    )
}
