//! Named hardware profiles: a disk model, the channel the disks share (or each own), and the
//! host's block-layer habits of the era (read-ahead, write-back request size, elevator).
//!
//! One profile per piece of hardware, parameters from sources where there are any; where there
//! are none the doc comment says how the value was chosen. `docs/disk-models.md` has the same
//! table with the reasoning. No profile is tuned per figure: every seed figure on a given
//! hardware runs with the same profile.

use crate::bus::BusParams;
use crate::disk::hdd::{HardDisk, HddParams};
use crate::disk::ssd::SsdParams;
use crate::disk::Scheduling;
use crate::us;

/// The disk a profile is made of.
#[derive(Debug, Clone, PartialEq)]
pub enum DiskModel {
    Hdd(HddParams),
    Ssd(SsdParams),
}

/// What the operating system of the seed's era did between the benchmark and the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostParams {
    /// Page-cache read-ahead window: a sequential reader's requests reach the block device
    /// as reads of this size, with one window in flight ahead of the one being consumed.
    pub readahead_bytes: u64,
    /// Size of the writes the page cache's write-back sends down for sequential dirty data.
    pub writeback_bytes: u64,
    /// How many write-back requests are queued at once.
    pub writeback_depth: usize,
    /// Whether the host sorts its queue (an elevator: one-way scan by offset) before the disk's.
    pub elevator: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    pub description: &'static str,
    pub disk: DiskModel,
    pub bus: BusParams,
    /// All disks on one channel (the seeds' SCSI setups) rather than one channel each.
    pub shared_bus: bool,
    pub host: HostParams,
}

impl Profile {
    pub fn hdd(&self) -> Option<&HddParams> {
        match &self.disk {
            DiskModel::Hdd(p) => Some(p),
            DiskModel::Ssd(_) => None,
        }
    }

    /// Bytes one disk of the profile holds.
    pub fn disk_capacity_bytes(&self) -> u64 {
        match &self.disk {
            DiskModel::Hdd(p) => HardDisk::new(p.clone(), 0).capacity_bytes(),
            DiskModel::Ssd(p) => p.capacity_bytes,
        }
    }
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// The 1998 "moderate speed" UW SCSI disks of Molnar's 4-way RAID1 test (seed
/// `000_d8827bf9b2d28a48.txt`): 7.7 MB/s read and 8.0 MB/s write through ext2, four on one
/// 40 MB/s Ultra Wide bus. The model is not named; the geometry is DiskSim's validated Seagate
/// ST32171W Barracuda (7200 rpm, 5 surfaces, 5172 cylinders, 11 zones, seek 1.943 ms track to
/// track and 16.679 ms full stroke, 0.6 ms command overhead, 3 cache segments) with its sectors
/// per track scaled from 186→119 to 136→87 so that the outer zone streams the seed's 8.0 MB/s.
/// The vendor average seek is not in the seed (its "10.5 ms" is bonnie's time per random
/// access, rotation included): 8.5 ms is assumed, typical of 7200-rpm SCSI disks of 1997–98.
/// Write cache off (the SCSI default then); tagged queueing 8 deep with the disk's own
/// reordering (Linux 2.2's aic7xxx default depth; the firmware's reordering is assumed).
pub fn uw_scsi_1998() -> Profile {
    Profile {
        name: "uw-scsi-1998",
        description: "1998 7200-rpm UW SCSI disk, 8 MB/s, on a shared 40 MB/s Ultra Wide bus",
        disk: DiskModel::Hdd(HddParams {
            rpm: 7200.0,
            cylinders: 5172,
            heads: 5,
            spt_outer: 136,
            spt_inner: 87,
            zones: 11,
            seek_track_ms: 1.943,
            seek_avg_ms: 8.5,
            seek_full_ms: 16.679,
            write_settle_ms: 0.3,
            head_switch_ms: 0.1,
            command_overhead_ms: 0.6,
            queue_depth: 8,
            scheduling: Scheduling::Sptf,
            readahead_bytes: 140 * KIB,
            cache_segments: 3,
            write_cache_bytes: 0,
        }),
        bus: BusParams { name: "Ultra Wide SCSI (40 MB/s)", bytes_per_s: 40e6, command_overhead: us(50.0) },
        shared_bus: true,
        // Linux 2.2: read-ahead up to 128 KiB per file, buffer-cache write-back merged by the
        // elevator into requests of up to 64 KiB (assumed: 128 sectors per request).
        host: HostParams { readahead_bytes: 128 * KIB, writeback_bytes: 64 * KIB, writeback_depth: 8, elevator: true },
    }
}

/// Seagate Cheetah 15K.3 (ST373453LW, 73 GB) on one Ultra160 channel of an Adaptec 39320, as
/// in Baker's 2006 dd test (seed `002_702c458d4dea2a7a.txt`). 15 000 rpm; sustained 49–75 MB/s
/// and 3.6 ms average read seek are from the 15K.3 product manual as remembered (not verified
/// here); track-to-track 0.2 ms and full stroke 6.6 ms are the Cheetah 15K.7's (sourced, used as
/// a proxy). Geometry chosen to give that capacity and those rates: 8 heads, 36 000 cylinders,
/// 600→390 sectors per track in 16 zones. 8 MB cache: 16 segments, 512 KiB read-ahead (assumed).
/// Tagged queue 32 deep (Linux aic79xx default), served in arrival order: Linux sent SIMPLE
/// tags, and the seed's own single-disk runs (two or more `dd`s seek-bound at 34 MB/s, each
/// stream's 128 KiB windows taking turns) show the drive did not keep the head on one
/// sequential stream as shortest-positioning-first would.
pub fn cheetah_15k3_u160() -> Profile {
    Profile {
        name: "cheetah-15k3-u160",
        description: "2006 Seagate Cheetah 15K.3 on a shared Ultra160 channel",
        disk: DiskModel::Hdd(HddParams {
            rpm: 15000.0,
            cylinders: 36_000,
            heads: 8,
            spt_outer: 600,
            spt_inner: 390,
            zones: 16,
            seek_track_ms: 0.2,
            seek_avg_ms: 3.6,
            seek_full_ms: 6.6,
            write_settle_ms: 0.3,
            head_switch_ms: 0.2,
            command_overhead_ms: 0.1,
            queue_depth: 32,
            scheduling: Scheduling::Fifo,
            readahead_bytes: 512 * KIB,
            cache_segments: 16,
            write_cache_bytes: 0,
        }),
        bus: BusParams { name: "Ultra160 SCSI (160 MB/s)", bytes_per_s: 160e6, command_overhead: us(20.0) },
        shared_bus: true,
        // Linux 2.6.15: 128 KiB read-ahead (VM_MAX_READAHEAD), 512 KiB requests.
        host: HostParams { readahead_bytes: 128 * KIB, writeback_bytes: 512 * KIB, writeback_depth: 8, elevator: true },
    }
}

/// The 2008 desktop SATA disk of the bonnie++ table (seed `001_16bcdf9fbfe374c3.txt`): model not
/// named; 77 MB/s read and 63 MB/s write through ext3 at the start of the disk. The outer zone is
/// set to stream 80 MB/s (7200 rpm, 1300 sectors per track), falling to half at the inner edge
/// (the usual ratio; assumed). Seek 0.8 / 8.5 / 16 ms are the Barracuda ES.2's (the anchors'
/// desim file; the full stroke there is itself a guess). NCQ 31 deep with SPTF, write cache on
/// (the SATA default), 8 MiB of it usable (assumed). Both disks hang on the "cheap card" the
/// seed mentions: taken to be a 32-bit/33 MHz PCI SATA card, so they share its bandwidth
/// (133 MB/s peak, about 110 MB/s sustained).
pub fn sata_2008() -> Profile {
    Profile {
        name: "sata-2008",
        description: "2008 7200-rpm SATA disk, 80 MB/s, two on a shared 32-bit PCI SATA card",
        disk: DiskModel::Hdd(HddParams {
            rpm: 7200.0,
            cylinders: 100_000,
            heads: 6,
            spt_outer: 1300,
            spt_inner: 650,
            zones: 24,
            seek_track_ms: 0.8,
            seek_avg_ms: 8.5,
            seek_full_ms: 16.0,
            write_settle_ms: 0.2,
            head_switch_ms: 0.3,
            command_overhead_ms: 0.1,
            queue_depth: 31,
            scheduling: Scheduling::Sptf,
            readahead_bytes: 512 * KIB,
            cache_segments: 16,
            write_cache_bytes: 8 * MIB,
        }),
        // 133 MB/s is the PCI bus's peak; bursts, arbitration and the card's own overheads leave
        // about 110 MB/s of sustained DMA, the figure usually measured on such buses (assumed).
        bus: BusParams {
            name: "32-bit/33 MHz PCI SATA card (110 MB/s sustained)",
            bytes_per_s: 110e6,
            command_overhead: us(20.0),
        },
        shared_bus: true,
        // Linux 2.6.2x: 128 KiB read-ahead, 512 KiB write-back requests (max_sectors_kb).
        host: HostParams { readahead_bytes: 128 * KIB, writeback_bytes: 512 * KIB, writeback_depth: 8, elevator: true },
    }
}

/// Seagate ST41200N (1990, 5.25" full height, about 1 GB) on an Adaptec 1542C, as in Parkes'
/// RAIDframe test (seed `003_43b5c8654f6efe43.txt`). 3600 rpm, 15 heads, 1931 cylinders and a
/// 15 ms average seek are the drive's published figures as remembered (not verified here);
/// track-to-track 3 ms, full stroke 32 ms and the 80→64 sectors per track in 4 zones are
/// assumptions in keeping with drives of that class (about 2.4 MB/s outside). No command
/// queueing, no write cache, a 64 KiB read-ahead buffer. The 1542C is an ISA bus master: 5 MB/s.
pub fn st41200n_1542c() -> Profile {
    Profile {
        name: "st41200n-1542c",
        description: "1990 Seagate ST41200N (3600 rpm) on an ISA Adaptec 1542C (5 MB/s)",
        disk: DiskModel::Hdd(HddParams {
            rpm: 3600.0,
            cylinders: 1931,
            heads: 15,
            spt_outer: 80,
            spt_inner: 64,
            zones: 4,
            seek_track_ms: 3.0,
            seek_avg_ms: 15.0,
            seek_full_ms: 32.0,
            write_settle_ms: 0.5,
            head_switch_ms: 1.0,
            command_overhead_ms: 1.0,
            queue_depth: 1,
            scheduling: Scheduling::Fifo,
            readahead_bytes: 64 * KIB,
            cache_segments: 1,
            write_cache_bytes: 0,
        }),
        bus: BusParams { name: "Adaptec 1542C on ISA (5 MB/s)", bytes_per_s: 5e6, command_overhead: us(300.0) },
        shared_bus: true,
        // NetBSD 1.4: FFS clusters of up to 64 KiB (MAXPHYS), disksort elevator.
        host: HostParams { readahead_bytes: 64 * KIB, writeback_bytes: 64 * KIB, writeback_depth: 4, elevator: true },
    }
}

/// The "very old pre-SCSI-1 disk drives" of Lehey's Vinum measurements (seed
/// `004_693d145518e9b74e.txt`). Nothing about them is published but what the seed's
/// configurations imply: a drive holds two `sd length 102480k` subdisks (its mirror "both
/// plexes on the same disks"), so at least 210 MB with gvinum's metadata; 1500 cylinders of 8
/// heads and 35 sectors make 215 MB. The rest is an assumed late-1980s drive: 3600 rpm, 35
/// sectors per track (about 1 MB/s), seeks 8 / 28 / 50 ms, no queueing, no cache, on an
/// asynchronous SCSI bus of 4 MB/s. Only relative results on this profile mean anything, as
/// the seed itself says of its graphs.
pub fn vinum_prescsi() -> Profile {
    Profile {
        name: "vinum-prescsi",
        description: "late-1980s pre-SCSI-1 drive (assumed 3600 rpm, 1 MB/s) on a 4 MB/s bus",
        disk: DiskModel::Hdd(HddParams {
            rpm: 3600.0,
            cylinders: 1500,
            heads: 8,
            spt_outer: 35,
            spt_inner: 35,
            zones: 1,
            seek_track_ms: 8.0,
            seek_avg_ms: 28.0,
            seek_full_ms: 50.0,
            write_settle_ms: 1.0,
            head_switch_ms: 1.0,
            command_overhead_ms: 1.5,
            queue_depth: 1,
            scheduling: Scheduling::Fifo,
            readahead_bytes: 0,
            cache_segments: 1,
            write_cache_bytes: 0,
        }),
        bus: BusParams { name: "asynchronous SCSI (4 MB/s)", bytes_per_s: 4e6, command_overhead: us(300.0) },
        shared_bus: true,
        // FreeBSD 3: 128 KiB MAXPHYS, disksort.
        host: HostParams { readahead_bytes: 64 * KIB, writeback_bytes: 64 * KIB, writeback_depth: 4, elevator: true },
    }
}

/// A generic present-day 7200-rpm SATA disk (assumed figures: 195→98 MB/s, seeks 0.5 / 8.5 /
/// 16 ms, NCQ 32, 32 MiB write cache), each on its own 6 Gb/s port.
pub fn generic_hdd_7200() -> Profile {
    Profile {
        name: "hdd-7200",
        description: "generic modern 7200-rpm SATA disk, one 6 Gb/s port each",
        disk: DiskModel::Hdd(HddParams {
            rpm: 7200.0,
            cylinders: 400_000,
            heads: 4,
            spt_outer: 3200,
            spt_inner: 1600,
            zones: 30,
            seek_track_ms: 0.5,
            seek_avg_ms: 8.5,
            seek_full_ms: 16.0,
            write_settle_ms: 0.2,
            head_switch_ms: 0.3,
            command_overhead_ms: 0.05,
            queue_depth: 32,
            scheduling: Scheduling::Sptf,
            readahead_bytes: 1 << 20,
            cache_segments: 32,
            write_cache_bytes: 32 * MIB,
        }),
        bus: BusParams { name: "SATA 6 Gb/s port (600 MB/s)", bytes_per_s: 600e6, command_overhead: us(5.0) },
        shared_bus: false,
        host: HostParams { readahead_bytes: 128 * KIB, writeback_bytes: 1 << 20, writeback_depth: 8, elevator: false },
    }
}

/// A generic NVMe SSD (assumed figures: 80 µs read and 20 µs write latency, 8 channels of
/// 400 MB/s, queue 128), each on its own PCIe 3.0 x4 link.
pub fn nvme() -> Profile {
    Profile {
        name: "nvme",
        description: "generic NVMe SSD, PCIe 3.0 x4 each",
        disk: DiskModel::Ssd(SsdParams {
            capacity_bytes: 1 << 40,
            read_latency: us(80.0),
            write_latency: us(20.0),
            channel_bytes_per_s: 400e6,
            channels: 8,
            queue_depth: 128,
        }),
        bus: BusParams { name: "PCIe 3.0 x4 (3.5 GB/s)", bytes_per_s: 3.5e9, command_overhead: us(1.0) },
        shared_bus: false,
        host: HostParams { readahead_bytes: 128 * KIB, writeback_bytes: 1 << 20, writeback_depth: 8, elevator: false },
    }
}

/// Every profile.
pub fn all() -> Vec<Profile> {
    vec![
        uw_scsi_1998(),
        cheetah_15k3_u160(),
        sata_2008(),
        st41200n_1542c(),
        vinum_prescsi(),
        generic_hdd_7200(),
        nvme(),
    ]
}

/// The profile called `name`.
pub fn by_name(name: &str) -> Option<Profile> {
    all().into_iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        let all = all();
        for p in &all {
            assert_eq!(by_name(p.name).as_ref(), Some(p));
            assert_eq!(all.iter().filter(|q| q.name == p.name).count(), 1);
        }
    }

    #[test]
    fn media_rates_match_the_stated_figures() {
        let rate = |p: Profile| {
            let h = p.hdd().unwrap().clone();
            h.sustained_rate(h.spt_outer) / 1e6
        };
        let r = rate(uw_scsi_1998());
        assert!((7.7..8.4).contains(&r), "{r}");
        let r = rate(cheetah_15k3_u160());
        assert!((70.0..78.0).contains(&r), "{r}");
        let r = rate(sata_2008());
        assert!((76.0..82.0).contains(&r), "{r}");
    }
}
