//! Sets written entirely by this crate, judged by NetBSD's own driver (the raidframe oracle, see
//! `uraid_testkit::raidframe_oracle`).
//!
//! For each set: `raidctl -c` configures it only if the labels agree; every component must be
//! optimal and parity clean; the RAID contents read back through the driver must be the test
//! pattern; then, on levels with redundancy, the parity map is turned off and the driver rewrites
//! every stripe's parity or mirror copy (`-iv`), which must change no byte of the data areas.
//!
//! `RAIDFRAME_PEER_DIR=DIR cargo test -p uraid-raidframe-format --test peer_oracle -- --ignored` also
//! writes the sets into DIR for `tests/peer/label-checks.sh`.
mod common;

use std::path::{Path, PathBuf};

use uraid_raidframe_format::config_file::{LayoutLine, QueueLine, RaidConfig};
use uraid_raidframe_format::label::{ComponentLabel, PMLABEL_VALID, PMLABEL_WASUSED, RAID_CLEAN};
use uraid_raidframe_format::layout::{self, ParityMap};
use uraid_raidframe_format::mapping::{Geometry, Level};
use uraid_testkit::raidframe_oracle::Kernel;

const S: u64 = 512;

struct Spec {
    name: &'static str,
    level: Level,
    columns: u32,
    sect_per_su: u64,
    partition_sectors: u64,
    data_sectors: u64,
}

fn write_set(dir: &Path, spec: &Spec) {
    let num_blocks = layout::usable_sectors(spec.partition_sectors).unwrap();
    let g = Geometry::new(spec.level, spec.columns, spec.sect_per_su, num_blocks).unwrap();
    let mut images = vec![vec![0u8; (spec.partition_sectors * S) as usize]; spec.columns as usize];
    let mut data = Vec::new();
    for r in 0..spec.data_sectors {
        let sector = common::pattern_sector(spec.name, r);
        let m = g.map(r).unwrap();
        let put = |images: &mut Vec<Vec<u8>>, column: u32, at: u64, bytes: &[u8], xor: bool| {
            let off = layout::component_byte_offset(at, S) as usize;
            let dst = &mut images[column as usize][off..off + S as usize];
            for (d, b) in dst.iter_mut().zip(bytes) {
                *d = if xor { *d ^ b } else { *b };
            }
        };
        put(&mut images, m.data.column, m.data.sector, &sector, false);
        if let Some(red) = m.redundancy {
            put(&mut images, red.column, red.sector, &sector, spec.level != Level::Raid1);
        }
        data.extend_from_slice(&sector);
    }
    let redundant = spec.level.faults_tolerated() > 0;
    for (column, image) in images.iter_mut().enumerate() {
        let label = ComponentLabel {
            serial_number: 4242,
            mod_counter: 15,
            column: column as i32,
            num_columns: spec.columns as i32,
            clean: RAID_CLEAN,
            sect_per_su: spec.sect_per_su as i32,
            parity_config: spec.level.as_char() as i32,
            max_outstanding: 100,
            block_size: S as i32,
            num_blocks,
            partition_size: spec.partition_sectors,
            parity_map_modcount: 15,
            parity_map_flags: if redundant { PMLABEL_VALID | PMLABEL_WASUSED } else { 0 },
            parity_map_tickms: if redundant { layout::DEFAULT_TICKMS } else { 0 },
            parity_map_ntick: if redundant { layout::DEFAULT_COOLDOWN } else { 0 },
            parity_map_regions: if redundant { layout::default_region_count(num_blocks, S) } else { 0 },
            ..ComponentLabel::default()
        };
        let at = layout::LABEL_OFFSET as usize;
        let area = label.to_area(layout::label_area_size(S) as usize);
        image[at..at + area.len()].copy_from_slice(&area);
        let map_at = layout::parity_map_offset(S) as usize;
        let map = ParityMap::clean().to_area(layout::parity_map_area_size(S) as usize);
        image[map_at..map_at + map.len()].copy_from_slice(&map);
        std::fs::write(dir.join(format!("{}.c{column}.img", spec.name)), image).unwrap();
    }
    let config = RaidConfig {
        num_rows: 1,
        num_columns: spec.columns as i32,
        disks: (0..spec.columns).map(|c| format!("/disk{c}")).collect(),
        spares: vec![],
        layout: LayoutLine { sect_per_su: spec.sect_per_su as i32, sus_per_pu: 1, sus_per_ru: 1, level: spec.level },
        queue: QueueLine { queue_type: "fifo".into(), max_outstanding: 100 },
        debug: vec![],
    };
    std::fs::write(dir.join(format!("{}.conf", spec.name)), config.to_text(None)).unwrap();
    std::fs::write(dir.join(format!("{}.data", spec.name)), data).unwrap();
}

const SPECS: [Spec; 4] = [
    Spec { name: "ur0", level: Level::Raid0, columns: 3, sect_per_su: 16, partition_sectors: 2048, data_sectors: 480 },
    Spec { name: "ur1", level: Level::Raid1, columns: 4, sect_per_su: 8, partition_sectors: 3000, data_sectors: 400 },
    Spec { name: "ur4", level: Level::Raid4, columns: 4, sect_per_su: 4, partition_sectors: 2048, data_sectors: 600 },
    Spec { name: "ur5", level: Level::Raid5, columns: 5, sect_per_su: 8, partition_sectors: 2600, data_sectors: 2000 },
];

#[test]
#[ignore = "writes the sets into RAIDFRAME_PEER_DIR for tests/peer/label-checks.sh"]
fn write_sets_for_the_oracle() {
    let dir = PathBuf::from(std::env::var("RAIDFRAME_PEER_DIR").expect("RAIDFRAME_PEER_DIR"));
    std::fs::create_dir_all(&dir).unwrap();
    for spec in &SPECS {
        write_set(&dir, spec);
    }
}

#[test]
fn netbsds_driver_configures_reads_and_keeps_the_parity_of_sets_written_here() {
    for spec in &SPECS {
        let dir = uraid_testkit::scratch_dir(&format!("raidframe-peer-oracle/{}", spec.name));
        write_set(&dir, spec);
        let images: Vec<PathBuf> = (0..spec.columns).map(|c| dir.join(format!("{}.c{c}.img", spec.name))).collect();
        let originals: Vec<Vec<u8>> = images.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let conf = dir.join(format!("{}.conf", spec.name));
        let conf = conf.to_str().unwrap();
        let data = std::fs::read(dir.join(format!("{}.data", spec.name))).unwrap();

        let kernel = Kernel::start(&dir.join("k"), &images);
        kernel.raidctl_ok(&["-c", conf, "raid0"]);
        let status = kernel.raidctl_ok(&["-s", "raid0"]);
        let components: Vec<&str> = status.lines().filter(|l| l.trim_start().starts_with("/disk")).collect();
        assert_eq!(components.len(), spec.columns as usize, "{}: {status}", spec.name);
        assert!(components.iter().all(|l| l.ends_with(": optimal")), "{}: {status}", spec.name);
        let parity = kernel.raidctl_ok(&["-p", "raid0"]);
        assert!(parity.contains("clean"), "{}: {parity}", spec.name);
        assert!(kernel.read("/dev/rraid0d", data.len() as u64) == data, "{}: data read back differs", spec.name);
        if spec.level != Level::Raid0 {
            kernel.raidctl_ok(&["-M", "no", "raid0"]);
            kernel.raidctl_ok(&["-u", "raid0"]);
            kernel.raidctl_ok(&["-c", conf, "raid0"]);
            kernel.raidctl_ok(&["-iv", "raid0"]);
        }
        kernel.raidctl_ok(&["-u", "raid0"]);
        drop(kernel);
        for (path, original) in images.iter().zip(&originals) {
            let now = std::fs::read(path).unwrap();
            let data_start = layout::component_byte_offset(0, S) as usize;
            assert!(
                now[data_start..] == original[data_start..],
                "{}: the driver's full parity rewrite changed the data area of {}",
                spec.name,
                path.display()
            );
        }
    }
}
