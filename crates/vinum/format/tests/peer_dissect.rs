//! Cross-check with an independent reader: drive images written with this crate (header,
//! configuration copies, and subdisk data placed by [`PlexLayout`]) are read by the Python
//! package `dissect.volume`, which must find the same volumes with the same contents.
//!
//! Part of the test suite. It needs Python with `dissect.volume` at the version pinned in
//! `tests/peer/requirements.txt`: `scripts/setup.sh` installs it into a virtualenv at
//! `${XDG_CACHE_HOME:-$HOME/.cache}/uraid/peer-venv`, where the test looks for it (with
//! `uraid_testkit::vinum_peer`, shared with the binary's end-to-end cross-check); without it
//! (or with another version there) the tests fail and say to run `scripts/setup.sh`.
//! `URAID_VINUM_PEER_PYTHON=/path/to/python` runs them with another Python instead (any
//! `dissect.volume` version it has). Alone:
//! `cargo test -p uraid-vinum-format --test peer_dissect`.
//!
//! dissect.volume's own limits shape the images: it assumes each subdisk starts at the
//! data start of its drive, one subdisk per drive; it takes a drive's data length from the
//! header's drive_size, or the whole image when that is 0 (gvinum leaves it 0), so the
//! concat images record their subdisk's length there; its RAID-0 reader wants that length
//! to be whole stripes, so images are padded to whole stripes; its raid5 reader returns too
//! many bytes for reads spanning stripe units (the helper reads unit by unit) and cannot
//! read with a drive missing, so parity contents are not cross-checked, only data placement.

use std::path::{Path, PathBuf};
use std::process::Command;

use uraid_testkit::vinum_peer;

use uraid_vinum_format::drive_layout::DATA_START;
use uraid_vinum_format::{
    format_config, DriveHeader, DriveMetadata, Plex, PlexLayout, PlexMembership, PlexOrganization, PlexState, Subdisk,
    SubdiskState, Timeval, VinumConfig, Volume, VolumeState,
};

/// Volume byte `i` of volume `salt`: a pattern that differs at every offset and per volume.
fn pattern(salt: u64, i: u64) -> u8 {
    let x = (i ^ (salt << 40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 56) as u8
}

/// A set of drives holding one volume with the given plexes (each a list of subdisk
/// lengths), one subdisk per drive.
struct Scenario {
    volume: &'static str,
    plexes: Vec<(PlexOrganization, Vec<u64>)>,
    record_drive_size: bool,
}

impl Scenario {
    fn config(&self) -> VinumConfig {
        let mut config = VinumConfig {
            volumes: vec![Volume { name: self.volume.into(), state: VolumeState::Up }],
            ..Default::default()
        };
        let mut drive = 0;
        for (p, (organization, lengths)) in self.plexes.iter().enumerate() {
            let plex = format!("{}.p{p}", self.volume);
            config.plexes.push(Plex {
                name: plex.clone(),
                organization: *organization,
                volume: Some(self.volume.into()),
                state: PlexState::Up,
            });
            let mut concat_offset = 0;
            for (i, &length) in lengths.iter().enumerate() {
                let plex_offset = match organization.stripe_size() {
                    Some(stripe) => i as u64 * stripe,
                    None => concat_offset,
                };
                concat_offset += length;
                config.subdisks.push(Subdisk {
                    name: format!("{plex}.s{i}"),
                    drive: format!("{}drive{drive}", self.volume),
                    length,
                    drive_offset: DATA_START,
                    membership: Some(PlexMembership { plex: plex.clone(), plex_offset }),
                    state: SubdiskState::Up,
                });
                drive += 1;
            }
        }
        assert_eq!(config.problems(), vec![]);
        config
    }

    /// Every drive's image, named by drive.
    fn images(&self, config: &VinumConfig) -> Vec<(String, Vec<u8>)> {
        let text = format_config(config).unwrap();
        let volume_size = config.volume_size(self.volume).unwrap();
        let mut images = Vec::new();
        for plex in &config.plexes {
            let layout = PlexLayout::from_config(config, &plex.name).unwrap();
            let mut columns: Vec<Vec<u8>> = layout.columns().iter().map(|c| vec![0u8; c.length as usize]).collect();
            let unit = plex.organization.stripe_size().unwrap_or(4096);
            let mut offset = 0;
            while offset < volume_size {
                let at = layout.locate(offset).unwrap();
                let len = at.run.min(unit - offset % unit).min(volume_size - offset);
                for k in 0..len {
                    columns[at.column][(at.offset + k) as usize] = pattern(1, offset + k);
                }
                if let PlexOrganization::Raid5 { .. } = plex.organization {
                    let parity = layout.locate_raid5(offset).unwrap().parity_column;
                    for k in 0..len {
                        columns[parity][(at.offset + k) as usize] ^= pattern(1, offset + k);
                    }
                }
                offset += len;
            }
            for (column, data) in layout.columns().iter().zip(columns) {
                let mut header = DriveHeader::new(&column.drive, "peer-test", Timeval::new(1_700_000_000, 0));
                header.label.last_update = Timeval::new(1_700_000_100, 250_000);
                if self.record_drive_size {
                    header.label.drive_size = column.length;
                }
                let mut image = DriveMetadata { header, config_text: text.clone() }.to_bytes().unwrap();
                image.extend_from_slice(&data);
                let pad = image.len().next_multiple_of(unit as usize * 2) - image.len();
                image.resize(image.len() + pad, 0);
                images.push((column.drive.clone(), image));
            }
        }
        images
    }
}

fn run_peer(dir: &Path, images: &[PathBuf]) -> Vec<Vec<String>> {
    let output = Command::new(vinum_peer::python())
        .arg(vinum_peer::script("dissect_read.py"))
        .arg(dir)
        .args(images)
        .output()
        .expect("run python");
    assert!(output.status.success(), "dissect.volume failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().lines().map(|l| l.split('\t').map(str::to_string).collect()).collect()
}

fn check(scenario: Scenario, expected_level: &str) {
    let config = scenario.config();
    let dir = std::env::temp_dir().join(format!("uraid-vinum-peer-{}-{}", std::process::id(), scenario.volume));
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths = Vec::new();
    for (drive, image) in scenario.images(&config) {
        let path = dir.join(format!("{drive}.img"));
        std::fs::write(&path, image).unwrap();
        paths.push(path);
    }
    let found = run_peer(&dir, &paths);
    let size = config.volume_size(scenario.volume).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    let line = &found[0];
    assert_eq!(line[0], scenario.volume);
    assert_eq!(line[1], size.to_string(), "volume size");
    assert_eq!(line[2], expected_level);
    let stripe = config.plexes[0].organization.stripe_size().unwrap_or(0);
    if expected_level != "RAID1" {
        assert_eq!(line[3], stripe.to_string(), "stripe size");
        assert_eq!(line[4], config.subdisks.len().to_string(), "subdisks");
    }
    let data = std::fs::read(dir.join(format!("{}.bin", scenario.volume))).unwrap();
    assert_eq!(data.len() as u64, size);
    if let Some(bad) = (0..size).find(|&i| data[i as usize] != pattern(1, i)) {
        panic!("{}: first differing volume byte {bad}", scenario.volume);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dissect_reads_a_raid5_volume_written_here() {
    let stripe = 65_536;
    check(
        Scenario {
            volume: "r5",
            plexes: vec![(PlexOrganization::Raid5 { stripe_size: stripe }, vec![12 * stripe; 4])],
            record_drive_size: false,
        },
        "RAID5",
    );
}

#[test]
fn dissect_reads_a_striped_volume_written_here() {
    let stripe = 16_384;
    check(
        Scenario {
            volume: "st",
            plexes: vec![(PlexOrganization::Striped { stripe_size: stripe }, vec![20 * stripe; 3])],
            record_drive_size: false,
        },
        "RAID0",
    );
}

#[test]
fn dissect_reads_a_concat_volume_written_here() {
    check(
        Scenario {
            volume: "cc",
            plexes: vec![(PlexOrganization::Concat, vec![300 * 1024, 700 * 1024])],
            record_drive_size: true,
        },
        "LINEAR",
    );
}

#[test]
fn dissect_reads_a_mirrored_volume_written_here() {
    check(
        Scenario {
            volume: "mi",
            plexes: vec![(PlexOrganization::Concat, vec![512 * 1024]), (PlexOrganization::Concat, vec![512 * 1024])],
            record_drive_size: false,
        },
        "RAID1",
    );
}
