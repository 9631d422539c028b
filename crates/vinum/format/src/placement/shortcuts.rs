//! The commands that make a whole volume from devices in one go: `concat`, `stripe`,
//! `raid5` and `mirror` (`create_volume` and `create_drive` in `sbin/gvinum/gvinum.c`;
//! `gv_concat`, `gv_stripe`, `gv_raid5`, `gv_mirror` in `geom_vinum_create.c`), as create
//! descriptions for [`super::place`].
//!
//! What gvinum does with `VERB [-f] [-v] [-n name] [-s …] devices…`:
//!
//! - each device becomes a drive named `gvinumdriveN`, N the first number no drive has
//!   (the drives a subdisk refers to count as drives), one after the other;
//! - the volume is called by `-n`, or `gvinumvolumeN` with N the first free number; its
//!   plexes are `<volume>.p0` (and `.p1` for a mirror), its subdisks `<plex>.s<i>`;
//! - every subdisk is autosized and placed by the kernel: the whole drive, one subdisk per
//!   drive, the drives' subdisks in the order of the devices;
//! - `concat`: one concat plex; `stripe`: one striped plex of 262144-byte stripes (the
//!   kernel fixes the size; `-s` is accepted and ignored), at least 2 drives; `raid5`: one
//!   raid5 plex, stripe size from `-s` (default 262144), at least 3 drives; `mirror`: two
//!   concat plexes, or with `-s` two striped plexes of 262144-byte stripes, an even number
//!   of drives (at least 4 with `-s`), drives 0, 2, 4, … in `.p0` and 1, 3, 5, … in `.p1`.
//!
//! `-f` and `-v` change nothing here. gvinum creates each drive before the kernel looks at
//! the volume, so a refused volume leaves its drives behind; here nothing is created then.

use std::fmt;

use crate::create_description::{CreateDescription, SubdiskRequest};
use crate::objects::{
    check_name, first_free_numbered_name, plex_name, subdisk_name, Drive, DriveState, ObjectKind, Plex,
    PlexOrganization, PlexState, Volume, VolumeState, DEFAULT_STRIPE_SIZE,
};

use super::{PlacementError, Present};

/// One of the shortcut commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShortcutCommand {
    /// `gvinum concat`.
    Concat,
    /// `gvinum stripe`.
    Stripe,
    /// `gvinum raid5`.
    Raid5,
    /// `gvinum mirror`.
    Mirror,
}

impl fmt::Display for ShortcutCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShortcutCommand::Concat => "concat",
            ShortcutCommand::Stripe => "stripe",
            ShortcutCommand::Raid5 => "raid5",
            ShortcutCommand::Mirror => "mirror",
        })
    }
}

/// `gvinum concat [-n volume] devices…`: one concat plex over all the devices.
pub fn concat(present: &Present, devices: &[&str], volume: Option<&str>) -> Result<CreateDescription, PlacementError> {
    let volume = volume_name(present, volume)?;
    // gvinum's usage check: at least one argument (the kernel itself takes none).
    need_drives(ShortcutCommand::Concat, &volume, devices.len(), 1)?;
    let drives = new_drives(present, devices)?;
    Ok(single_plex(volume, PlexOrganization::Concat, drives))
}

/// `gvinum stripe [-n volume] devices…`: one striped plex of 262144-byte stripes.
pub fn stripe(present: &Present, devices: &[&str], volume: Option<&str>) -> Result<CreateDescription, PlacementError> {
    let volume = volume_name(present, volume)?;
    need_drives(ShortcutCommand::Stripe, &volume, devices.len(), 2)?;
    let drives = new_drives(present, devices)?;
    Ok(single_plex(volume, PlexOrganization::Striped { stripe_size: DEFAULT_STRIPE_SIZE }, drives))
}

/// `gvinum raid5 [-s stripe_size] [-n volume] devices…` (gvinum's default stripe size is
/// [`DEFAULT_STRIPE_SIZE`]). The stripe size is checked when the description is placed.
pub fn raid5(
    present: &Present,
    devices: &[&str],
    volume: Option<&str>,
    stripe_size: u64,
) -> Result<CreateDescription, PlacementError> {
    let volume = volume_name(present, volume)?;
    need_drives(ShortcutCommand::Raid5, &volume, devices.len(), 3)?;
    let drives = new_drives(present, devices)?;
    Ok(single_plex(volume, PlexOrganization::Raid5 { stripe_size }, drives))
}

/// `gvinum mirror [-s] [-n volume] devices…`: two plexes, concat or (`striped`, `-s`)
/// striped with 262144-byte stripes; even-numbered devices in the first, odd-numbered in the
/// second.
pub fn mirror(
    present: &Present,
    devices: &[&str],
    volume: Option<&str>,
    striped: bool,
) -> Result<CreateDescription, PlacementError> {
    let volume = volume_name(present, volume)?;
    if !devices.len().is_multiple_of(2) {
        return Err(PlacementError::OddDriveCount { volume, found: devices.len() });
    }
    // The kernel wants 4 for striped plexes; without `-s` it would take 0 and make two
    // empty plexes, but gvinum's usage check wants an argument.
    need_drives(ShortcutCommand::Mirror, &volume, devices.len(), if striped { 4 } else { 2 })?;
    let drives = new_drives(present, devices)?;
    let organization =
        if striped { PlexOrganization::Striped { stripe_size: DEFAULT_STRIPE_SIZE } } else { PlexOrganization::Concat };
    let mut description = CreateDescription { drives, volumes: vec![new_volume(&volume)], ..Default::default() };
    for first_drive in 0..2 {
        let plex = new_plex(&volume, first_drive, organization);
        let members: Vec<String> =
            description.drives.iter().skip(first_drive).step_by(2).map(|d| d.name.clone()).collect();
        for (column, drive) in members.into_iter().enumerate() {
            description.subdisks.push(autosized(&plex.name, column, drive));
        }
        description.plexes.push(plex);
    }
    Ok(description)
}

fn need_drives(command: ShortcutCommand, volume: &str, found: usize, needed: usize) -> Result<(), PlacementError> {
    if found < needed {
        return Err(PlacementError::TooFewDrives { command, volume: volume.to_string(), found, needed });
    }
    Ok(())
}

/// `-n name`, or the first free `gvinumvolumeN` (gvinum's `find_name` looks for the word
/// after `volume` on each line of the configuration, so only volume names count).
fn volume_name(present: &Present, given: Option<&str>) -> Result<String, PlacementError> {
    let taken = |name: &str| present.config.volume(name).is_some();
    let Some(name) = given else { return Ok(first_free_numbered_name("gvinumvolume", taken)) };
    check_name(ObjectKind::Volume, name).map_err(|problem| PlacementError::BadName {
        kind: ObjectKind::Volume,
        name: name.to_string(),
        problem,
    })?;
    if taken(name) {
        // The kernel does not look: it would make a second volume of that name.
        return Err(PlacementError::AlreadyExists { kind: ObjectKind::Volume, name: name.to_string() });
    }
    Ok(name.to_string())
}

/// One new drive per device (`create_drive`): `/dev/` dropped, a device gvinum already has
/// refused (the kernel's "already in use by gvinum"), the name the first free
/// `gvinumdriveN`, where `find_name` counts the word after `drive` on every line, so drives
/// only referred to by a subdisk count too.
fn new_drives(present: &Present, devices: &[&str]) -> Result<Vec<Drive>, PlacementError> {
    let mut drives: Vec<Drive> = Vec::new();
    for device in devices {
        let device = device.strip_prefix("/dev/").unwrap_or(device);
        let name = first_free_numbered_name("gvinumdrive", |candidate| {
            present.drives.iter().any(|d| d.name == candidate)
                || present.config.subdisks.iter().any(|s| s.drive == candidate)
                || drives.iter().any(|d| d.name == candidate)
        });
        let holder = present
            .drives
            .iter()
            .find(|d| d.device == device)
            .map(|d| d.name.clone())
            .or_else(|| drives.iter().find(|d| d.device.as_deref() == Some(device)).map(|d| d.name.clone()));
        if let Some(holder) = holder {
            return Err(PlacementError::DeviceInUse { drive: name, device: device.to_string(), holder });
        }
        // The kernel brings every drive it creates up (`gv_create_drive`).
        drives.push(Drive { name, device: Some(device.to_string()), state: DriveState::Up });
    }
    Ok(drives)
}

/// The shortcuts ask for the volume up (`v->state = GV_VOL_UP`); the kernel works the state
/// out again from the plexes once they are set up.
fn new_volume(name: &str) -> Volume {
    Volume { name: name.to_string(), state: VolumeState::Up }
}

fn new_plex(volume: &str, index: usize, organization: PlexOrganization) -> Plex {
    Plex { name: plex_name(volume, index), organization, volume: Some(volume.to_string()), state: PlexState::Down }
}

fn autosized(plex: &str, index: usize, drive: String) -> SubdiskRequest {
    SubdiskRequest {
        name: subdisk_name(plex, index),
        drive,
        plex: Some(plex.to_string()),
        length: None,
        drive_offset: None,
        plex_offset: None,
        state: None,
    }
}

/// `concat`, `stripe`, `raid5`: plex `.p0` (the new volume's plex count, 0), subdisk `.s<i>`
/// on the i-th drive.
fn single_plex(volume: String, organization: PlexOrganization, drives: Vec<Drive>) -> CreateDescription {
    let plex = new_plex(&volume, 0, organization);
    let subdisks = drives.iter().enumerate().map(|(i, d)| autosized(&plex.name, i, d.name.clone())).collect();
    CreateDescription { volumes: vec![new_volume(&volume)], plexes: vec![plex], subdisks, drives }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drive_layout::DATA_START;
    use crate::objects::{PlexMembership, Subdisk, SubdiskState, VinumConfig};
    use crate::placement::SizedDrive;

    fn names<T>(items: &[T], name: impl Fn(&T) -> &str) -> Vec<&str> {
        items.iter().map(name).collect()
    }

    fn members(description: &CreateDescription) -> Vec<(&str, &str, &str)> {
        description.subdisks.iter().map(|s| (s.name.as_str(), s.plex.as_deref().unwrap(), s.drive.as_str())).collect()
    }

    #[test]
    fn concat_stripe_and_raid5_name_as_gvinum_does() {
        let present = Present::default();
        let d = concat(&present, &["/dev/ada1", "ada2"], None).unwrap();
        assert_eq!(names(&d.drives, |x| &x.name), ["gvinumdrive0", "gvinumdrive1"]);
        assert_eq!(d.drives[0].device.as_deref(), Some("ada1"));
        assert_eq!(d.volumes, [Volume { name: "gvinumvolume0".into(), state: VolumeState::Up }]);
        assert_eq!(d.plexes[0].name, "gvinumvolume0.p0");
        assert_eq!(d.plexes[0].organization, PlexOrganization::Concat);
        assert_eq!(
            members(&d),
            [
                ("gvinumvolume0.p0.s0", "gvinumvolume0.p0", "gvinumdrive0"),
                ("gvinumvolume0.p0.s1", "gvinumvolume0.p0", "gvinumdrive1")
            ]
        );
        assert!(d.subdisks.iter().all(|s| s.length.is_none() && s.drive_offset.is_none() && s.plex_offset.is_none()));
        let d = stripe(&present, &["da0", "da1", "da2"], Some("fast")).unwrap();
        assert_eq!(d.plexes[0].organization, PlexOrganization::Striped { stripe_size: 262_144 });
        assert_eq!(names(&d.subdisks, |s| &s.name), ["fast.p0.s0", "fast.p0.s1", "fast.p0.s2"]);
        let d = raid5(&present, &["da0", "da1", "da2"], Some("r"), 504_832).unwrap();
        assert_eq!(d.plexes[0].organization, PlexOrganization::Raid5 { stripe_size: 504_832 });
    }

    #[test]
    fn mirror_deals_the_drives_to_two_plexes() {
        let present = Present::default();
        let d = mirror(&present, &["ada1", "ada2"], None, false).unwrap();
        assert_eq!(names(&d.plexes, |p| &p.name), ["gvinumvolume0.p0", "gvinumvolume0.p1"]);
        assert!(d.plexes.iter().all(|p| p.organization == PlexOrganization::Concat));
        assert_eq!(
            members(&d),
            [
                ("gvinumvolume0.p0.s0", "gvinumvolume0.p0", "gvinumdrive0"),
                ("gvinumvolume0.p1.s0", "gvinumvolume0.p1", "gvinumdrive1")
            ]
        );
        // gvinum.8: "gvinum mirror -s -n data /dev/ada1 /dev/ada2 /dev/ada3 /dev/ada4".
        let d = mirror(&present, &["/dev/ada1", "/dev/ada2", "/dev/ada3", "/dev/ada4"], Some("data"), true).unwrap();
        assert!(d.plexes.iter().all(|p| p.organization == PlexOrganization::Striped { stripe_size: 262_144 }));
        assert_eq!(
            members(&d),
            [
                ("data.p0.s0", "data.p0", "gvinumdrive0"),
                ("data.p0.s1", "data.p0", "gvinumdrive2"),
                ("data.p1.s0", "data.p1", "gvinumdrive1"),
                ("data.p1.s1", "data.p1", "gvinumdrive3"),
            ]
        );
        let devices: Vec<Option<&str>> = d.drives.iter().map(|x| x.device.as_deref()).collect();
        assert_eq!(devices, [Some("ada1"), Some("ada2"), Some("ada3"), Some("ada4")]);
    }

    #[test]
    fn generated_names_skip_the_ones_taken() {
        let sd = |name: &str, drive: &str| Subdisk {
            name: name.into(),
            drive: drive.into(),
            length: 1 << 20,
            drive_offset: DATA_START,
            membership: Some(PlexMembership { plex: "gvinumvolume0.p0".into(), plex_offset: 0 }),
            state: SubdiskState::Up,
        };
        let present = Present {
            config: VinumConfig {
                volumes: vec![Volume { name: "gvinumvolume0".into(), state: VolumeState::Up }],
                plexes: vec![],
                // A drive gvinum only knows from a subdisk still holds its name.
                subdisks: vec![sd("x", "gvinumdrive1")],
            },
            drives: vec![SizedDrive { name: "gvinumdrive0".into(), device: "ada0".into(), media_size: 1 << 30 }],
        };
        let d = concat(&present, &["ada5", "ada6"], None).unwrap();
        assert_eq!(names(&d.drives, |x| &x.name), ["gvinumdrive2", "gvinumdrive3"]);
        assert_eq!(d.volumes[0].name, "gvinumvolume1");
    }

    #[test]
    fn shortcuts_refuse_what_gvinum_refuses() {
        let present = Present {
            config: VinumConfig {
                volumes: vec![Volume { name: "taken".into(), state: VolumeState::Up }],
                ..Default::default()
            },
            drives: vec![SizedDrive { name: "old".into(), device: "ada0".into(), media_size: 1 << 30 }],
        };
        let too_few = |command, found, needed| PlacementError::TooFewDrives {
            command,
            volume: "gvinumvolume0".into(),
            found,
            needed,
        };
        assert_eq!(concat(&present, &[], None), Err(too_few(ShortcutCommand::Concat, 0, 1)));
        assert_eq!(stripe(&present, &["a"], None), Err(too_few(ShortcutCommand::Stripe, 1, 2)));
        assert_eq!(raid5(&present, &["a", "b"], None, 65_536), Err(too_few(ShortcutCommand::Raid5, 2, 3)));
        assert_eq!(mirror(&present, &[], None, false), Err(too_few(ShortcutCommand::Mirror, 0, 2)));
        assert_eq!(mirror(&present, &["a", "b"], None, true), Err(too_few(ShortcutCommand::Mirror, 2, 4)));
        assert_eq!(
            mirror(&present, &["a", "b", "c"], None, false),
            Err(PlacementError::OddDriveCount { volume: "gvinumvolume0".into(), found: 3 })
        );
        assert_eq!(
            concat(&present, &["a"], Some("taken")),
            Err(PlacementError::AlreadyExists { kind: ObjectKind::Volume, name: "taken".into() })
        );
        assert!(matches!(concat(&present, &["a"], Some("two words")), Err(PlacementError::BadName { .. })));
        assert_eq!(
            concat(&present, &["a", "/dev/ada0"], None),
            Err(PlacementError::DeviceInUse {
                drive: "gvinumdrive1".into(),
                device: "ada0".into(),
                holder: "old".into()
            })
        );
        assert_eq!(
            stripe(&present, &["a", "/dev/a"], None),
            Err(PlacementError::DeviceInUse {
                drive: "gvinumdrive1".into(),
                device: "a".into(),
                holder: "gvinumdrive0".into()
            })
        );
    }
}
