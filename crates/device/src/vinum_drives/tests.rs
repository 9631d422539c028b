//! Drive I/O on devices in memory: reading, telling non-drives from damaged drives, startup,
//! and the exact writes of a save and of a reset.

use std::io;
use std::sync::Mutex;

use uraid_testkit::NewMdArray;
use uraid_vinum_format::drive_layout::{read_config_copy, ConfigCopy};
use uraid_vinum_format::header::MAGIC_REMOVED;

use super::*;
use crate::member::MemoryDevice;

const MIB: u64 = 1 << 20;

const CONFIG: &str = "volume v state up\n\
    plex name v.p0 org striped 512s vol v state up\n\
    sd name v.p0.s1 drive b len 2048s driveoffset 265s plex v.p0 plexoffset 512s state up\n\
    sd name v.p0.s0 drive a len 2048s driveoffset 265s plex v.p0 plexoffset 0s state up\n";

/// A device holding drive `name`, saved at `stamp` with `text`.
fn drive_device(device: &str, name: &str, stamp: u64, text: &str) -> MemoryDevice {
    let mut header = DriveHeader::new(name, "host", Timeval::new(1, 0));
    header.label.last_update = Timeval::new(stamp, 0);
    let meta = DriveMetadata { header, config_text: text.to_string() };
    let mut bytes = meta.to_bytes().unwrap();
    bytes.resize(4 * MIB as usize, 0);
    MemoryDevice::from_bytes(device, bytes)
}

fn devs(list: &[MemoryDevice]) -> Vec<&dyn MemberDevice> {
    list.iter().map(|d| d as &dyn MemberDevice).collect()
}

#[test]
fn a_drive_reads_back_header_and_first_copy() {
    let dev = drive_device("d0", "a", 100, CONFIG);
    let drive = read_drive(&dev).unwrap();
    assert_eq!(drive.header.label.name, "a");
    assert_eq!(drive.config_text, CONFIG);
    assert_eq!(drive.config, parse_config(CONFIG).unwrap());
}

#[test]
fn no_header_is_not_damage() {
    let blank = MemoryDevice::new("blank", 4 * MIB);
    let err = read_drive(&blank).unwrap_err();
    assert!(matches!(err, VinumDriveError::NoHeader { magic: 0, .. }), "{err}");
    assert!(!err.is_damage());
    assert!(err.to_string().starts_with("blank: no gvinum drive header"), "{err}");
    // Too small to hold a header at all.
    let mut tiny = vec![0u8; 4100];
    tiny[4096..].copy_from_slice(b"VINU");
    let tiny = MemoryDevice::from_bytes("tiny", tiny);
    assert!(matches!(read_drive(&tiny), Err(VinumDriveError::NoHeader { .. })));
}

#[test]
fn damaged_headers_and_configurations_name_the_device() {
    let mut bytes = drive_device("d", "a", 1, CONFIG).snapshot();
    bytes[4096 + 48] = 0xff; // the drive name is no longer UTF-8
    let err = read_drive(&MemoryDevice::from_bytes("d0", bytes)).unwrap_err();
    assert!(matches!(err, VinumDriveError::DamagedHeader { .. }) && err.is_damage(), "{err}");
    assert!(err.to_string().starts_with("d0: gvinum drive header is damaged"), "{err}");

    // Both copies damaged (with copy 2 whole, copy 2 is read: see below).
    let mut bytes = drive_device("d", "a", 1, CONFIG).snapshot();
    bytes[4608..4608 + 6].copy_from_slice(b"vilume");
    bytes[70_144..70_144 + 6].copy_from_slice(b"vilume");
    let err = read_drive(&MemoryDevice::from_bytes("d1", bytes)).unwrap_err();
    assert!(
        matches!(&err, VinumDriveError::ConfigUnreadable { source, .. } if matches!(**source, ConfigDamage::Text(_))),
        "{err}"
    );
    assert!(err.to_string().starts_with("d1: gvinum drive \"a\": configuration unreadable: config line 1"), "{err}");

    // A copy with no NUL in its 64 KiB.
    let mut bytes = drive_device("d", "a", 1, CONFIG).snapshot();
    bytes[4608..4608 + 2 * 65536].fill(b'x');
    let err = read_drive(&MemoryDevice::from_bytes("d2", bytes)).unwrap_err();
    assert!(
        matches!(&err, VinumDriveError::ConfigUnreadable { source, .. } if matches!(**source, ConfigDamage::Area(_))),
        "{err}"
    );

    // Cut short: the device ends inside copy 1, after the text; or inside the text.
    for cut in [5000, 4620] {
        let bytes = drive_device("d", "a", 1, CONFIG).snapshot()[..cut].to_vec();
        let err = read_drive(&MemoryDevice::from_bytes("d3", bytes)).unwrap_err();
        assert!(matches!(err, VinumDriveError::ConfigUnreadable { .. }), "{err}");
    }
}

#[test]
fn a_first_copy_torn_by_a_crash_is_read_from_the_second() {
    // A save cut short inside copy 1's write: copy 2 (written and flushed first) holds the new
    // text whole, copy 1 a mixture of sectors.
    let new = CONFIG.replace("plexoffset 0s state up", "plexoffset 0s state stale");
    let mut bytes = drive_device("d", "a", 1, CONFIG).snapshot();
    let area = uraid_vinum_format::drive_layout::config_area_bytes(&new).unwrap();
    bytes[70_144..70_144 + 65_536].copy_from_slice(&area);
    bytes[4608 + 100..4608 + 110].copy_from_slice(b"\x01garbage\xffz");
    let drive = read_drive(&MemoryDevice::from_bytes("d0", bytes)).unwrap();
    assert!(drive.from_second_copy);
    assert_eq!(drive.config_text, new);
    assert_eq!(drive.config.subdisk("v.p0.s0").unwrap().state, uraid_vinum_format::SubdiskState::Stale);
    // A readable copy 1 is read, as the kernel reads it, even where copy 2 differs.
    let mut bytes = drive_device("d", "a", 1, CONFIG).snapshot();
    bytes[70_144..70_144 + 65_536].copy_from_slice(&area);
    let drive = read_drive(&MemoryDevice::from_bytes("d0", bytes)).unwrap();
    assert!(!drive.from_second_copy);
    assert_eq!(drive.config_text, CONFIG);
}

/// A copy 1 torn into a text that still parses, but into objects that cannot be: a line of the
/// new text joined mid-line to the old one put subdisk s1 on drive a, over s0. Copy 2 is whole
/// and sound, and taken.
#[test]
fn a_first_copy_torn_into_impossible_objects_is_read_from_the_second() {
    let new = CONFIG.replace("plexoffset 0s state up", "plexoffset 0s state stale");
    let torn = CONFIG.replace("sd name v.p0.s1 drive b", "sd name v.p0.s1 drive a");
    assert!(!parse_config(&torn).unwrap().problems().is_empty(), "the torn text parses into overlapping subdisks");
    let mut bytes = drive_device("d", "a", 1, &torn).snapshot();
    let area = uraid_vinum_format::drive_layout::config_area_bytes(&new).unwrap();
    bytes[70_144..70_144 + 65_536].copy_from_slice(&area);
    let drive = read_drive(&MemoryDevice::from_bytes("d0", bytes)).unwrap();
    assert!(drive.from_second_copy);
    assert_eq!(drive.config_text, new);
    // With copy 2 the same (or unsound too), copy 1 is read as it stands.
    let bytes = drive_device("d", "a", 1, &torn).snapshot();
    let drive = read_drive(&MemoryDevice::from_bytes("d0", bytes)).unwrap();
    assert!(!drive.from_second_copy);
    assert_eq!(drive.config_text, torn);
}

#[test]
fn removed_drives_are_not_read() {
    let mut bytes = drive_device("d", "gone", 1, CONFIG).snapshot();
    bytes[4096..4104].copy_from_slice(&MAGIC_REMOVED.to_be_bytes());
    let err = read_drive(&MemoryDevice::from_bytes("d0", bytes)).unwrap_err();
    assert!(matches!(&err, VinumDriveError::Removed { name, .. } if name == "gone"), "{err}");
    assert!(!err.is_damage());
}

#[test]
fn foreign_content_says_what_is_there() {
    assert_eq!(foreign_content(&MemoryDevice::new("blank", 4 * MIB)).unwrap(), None);
    let mut bytes = vec![0u8; 4 * MIB as usize];
    bytes[510] = 0x55;
    let found = foreign_content(&MemoryDevice::from_bytes("mbr", bytes)).unwrap();
    assert_eq!(found, Some(Foreign::NonZero { offset: 510 }));
    assert!(found.unwrap().to_string().starts_with("data at byte 510"));
    // Beyond the metadata area, data is the drive's own business.
    let mut bytes = vec![0u8; 4 * MIB as usize];
    bytes[DATA_START as usize] = 1;
    assert_eq!(foreign_content(&MemoryDevice::from_bytes("late", bytes)).unwrap(), None);
    let image = NewMdArray::new(1, 2, 8 * MIB).images().remove(0);
    let found = foreign_content(&MemoryDevice::from_bytes("md", image)).unwrap().unwrap();
    assert!(matches!(&found, Foreign::MdSuperblock { version, offset: 4096, .. } if version == "1.2"), "{found}");
    assert!(found.to_string().starts_with("an md 1.2 superblock at byte 4096 (array "), "{found}");
}

#[test]
fn startup_knows_drives_by_name_and_merges_newest_first() {
    let failed = CONFIG.replace("plexoffset 0s state up", "plexoffset 0s state stale");
    let list = [
        drive_device("/dev/x", "a", 100, CONFIG),
        MemoryDevice::new("blank", MIB),
        drive_device("/dev/y", "b", 200, &failed),
    ];
    let started = startup(&devs(&list)).unwrap();
    // Tasted newest first: b, whose configuration names a, which then takes its place after b.
    let names: Vec<&str> = started.drives.iter().map(|d| d.drive.header.label.name.as_str()).collect();
    assert_eq!(names, ["b", "a"]);
    assert_eq!(started.drive("b").unwrap().index, 2);
    assert_eq!(started.drive("a").unwrap().media_size, 4 * MIB);
    assert_eq!(started.merged.config, parse_config(&failed).unwrap());
    assert_eq!(started.skipped.len(), 1);
    assert_eq!(started.skipped[0].0, 1);
    assert_eq!(started.damaged().count(), 0);
}

#[test]
fn startup_refuses_two_devices_with_one_drive_name() {
    let list = [drive_device("d0.img", "a", 1, CONFIG), drive_device("d1.img", "a", 2, CONFIG)];
    let err = startup(&devs(&list)).unwrap_err();
    assert_eq!(err.to_string(), "d0.img and d1.img both carry gvinum drive \"a\"; remove one from the set");
}

#[test]
fn a_save_writes_one_stamp_header_then_both_copies_then_flushes() {
    let list = [MemoryDevice::new("n0", 4 * MIB), drive_device("p0", "old", 5, "volume gone state up\n")];
    let before = list[1].snapshot();
    let config = parse_config(CONFIG).unwrap();
    let now = Timeval::new(1_700_000_000, 123_456);
    let drives = vec![
        DriveToWrite { device: &list[0], header: DriveHeader::new("new", "host", now) },
        DriveToWrite { device: &list[1], header: read_drive(&list[1]).unwrap().header },
    ];
    let plan = prepare_save(drives, &config, now).unwrap();
    assert_eq!(
        plan.outline(),
        [
            (0, 4096, 512),
            (0, 4608, 65536),
            (0, 70_144, 65536),
            (1, 4096, 512),
            (1, 4608, 65536),
            (1, 70_144, 65536),
            (0, 0, 0),
            (1, 0, 0)
        ]
    );
    plan.run().unwrap();
    for dev in &list {
        let bytes = dev.snapshot();
        let drive = read_drive(dev).unwrap();
        assert_eq!(drive.header.label.last_update, now);
        assert_eq!(drive.config_text, format_config(&config).unwrap());
        assert_eq!(read_config_copy(&bytes, ConfigCopy::Second).unwrap(), drive.config_text);
        assert!(bytes[..4096].iter().all(|&b| b == 0));
    }
    // The present drive keeps its name and date of birth; nothing outside the metadata moves.
    let after = list[1].snapshot();
    assert_eq!(read_drive(&list[1]).unwrap().header.label.date_of_birth, Timeval::new(1, 0));
    assert_eq!(after[DATA_START as usize..], before[DATA_START as usize..]);
    assert_eq!(plan.headers[0].label.name, "new");
}

#[test]
fn nothing_is_planned_that_cannot_be_written() {
    let small = MemoryDevice::new("small", DATA_START - 1);
    let config = parse_config(CONFIG).unwrap();
    let now = Timeval::new(1, 0);
    let drives = vec![DriveToWrite { device: &small, header: DriveHeader::new("a", "h", now) }];
    assert!(
        matches!(prepare_save(drives, &config, now), Err(SaveError::TooSmall { size, .. }) if size == DATA_START - 1)
    );
    let dev = MemoryDevice::new("d", MIB);
    let long = "x".repeat(40);
    let drives = vec![DriveToWrite { device: &dev, header: DriveHeader::new(&long, "h", now) }];
    let err = prepare_save(drives, &VinumConfig::default(), now).err().unwrap();
    assert!(err.to_string().starts_with("d: the gvinum header cannot be written"), "{err}");
    assert!(dev.snapshot().iter().all(|&b| b == 0));
}

/// A device whose writes fail, recording nothing.
struct Broken;

impl MemberDevice for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    fn size(&self) -> u64 {
        4 * MIB
    }
    fn read_at(&self, _: u64, _: &mut [u8]) -> io::Result<()> {
        Err(io::Error::other("dead"))
    }
    fn write_at(&self, _: u64, _: &[u8]) -> io::Result<()> {
        Err(io::Error::other("dead"))
    }
    fn flush(&self) -> io::Result<()> {
        Err(io::Error::other("dead"))
    }
}

/// A device that counts flushes.
struct Counting(MemoryDevice, Mutex<usize>);

impl MemberDevice for Counting {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.write_at(offset, data)
    }
    fn flush(&self) -> io::Result<()> {
        *self.1.lock().unwrap() += 1;
        Ok(())
    }
}

#[test]
fn a_failing_device_does_not_stop_the_others() {
    let good = Counting(MemoryDevice::new("good", 4 * MIB), Mutex::new(0));
    let now = Timeval::new(9, 9);
    let drives = vec![
        DriveToWrite { device: &Broken, header: DriveHeader::new("x", "h", now) },
        DriveToWrite { device: &good, header: DriveHeader::new("y", "h", now) },
    ];
    let plan = prepare_save(drives, &parse_config(CONFIG).unwrap(), now).unwrap();
    let err = plan.run().unwrap_err();
    assert_eq!(err.to_string(), "broken: cannot write gvinum metadata at byte 4096: dead");
    assert_eq!(read_drive(&good.0).unwrap().header.label.last_update, now);
    assert_eq!(*good.1.lock().unwrap(), 1);
}

#[test]
fn a_reset_leaves_every_drive_removed_as_the_kernel_does() {
    let list = [drive_device("d0", "a", 100, CONFIG), drive_device("d1", "b", 100, CONFIG)];
    let started = startup(&devs(&list)).unwrap();
    let now = Timeval::new(500, 0);
    let drives: Vec<DriveToWrite> = started
        .drives
        .iter()
        .map(|d| DriveToWrite { device: &list[d.index], header: d.drive.header.clone() })
        .collect();
    let config = started.merged.config_in_kernel_list_order();
    let plan = prepare_reset(drives, &config, now).unwrap();
    // First drive: its header removed. Then the second saved without subdisks, then its header
    // removed; then both flushed.
    let (first, second) = (started.drives[0].index, started.drives[1].index);
    assert_eq!(plan.outline().len(), 1 + 3 + 1 + 2);
    plan.run().unwrap();
    for (index, stamp, text) in [
        (first, 100, CONFIG.to_string()),
        (second, 500, "volume v state up\nplex name v.p0 org striped 512s vol v state up\n".to_string()),
    ] {
        let err = read_drive(&list[index]).unwrap_err();
        assert!(matches!(err, VinumDriveError::Removed { .. }), "{err}");
        let bytes = list[index].snapshot();
        let header = DriveHeader::parse(&bytes[4096..4608]).unwrap();
        assert_eq!(header.status, HeaderStatus::Removed);
        assert_eq!(header.label.last_update, Timeval::new(stamp, 0));
        assert_eq!(read_config_copy(&bytes, ConfigCopy::First).unwrap(), text);
        assert_eq!(read_config_copy(&bytes, ConfigCopy::Second).unwrap(), text);
    }
    let again = startup(&devs(&list)).unwrap();
    assert!(again.drives.is_empty() && again.damaged().count() == 0);
}

#[test]
fn a_removed_drive_gets_only_its_header_marked_and_the_others_the_save() {
    let list = [drive_device("d0", "a", 100, CONFIG), drive_device("d1", "b", 100, CONFIG)];
    let started = startup(&devs(&list)).unwrap();
    let now = Timeval::new(700, 0);
    let to_write = |d: &StartedDrive| DriveToWrite { device: &list[d.index], header: d.drive.header.clone() };
    let (removed, kept): (Vec<&StartedDrive>, Vec<&StartedDrive>) =
        started.drives.iter().partition(|d| d.drive.header.label.name == "a");
    let text = "volume v state up\n";
    let config = parse_config(text).unwrap();
    let plan = prepare_remove(
        kept.into_iter().map(to_write).collect(),
        removed.into_iter().map(to_write).collect(),
        &config,
        now,
    )
    .unwrap();
    // The removed drive's header, the kept drive's save (header, two copies), two flushes.
    assert_eq!(
        plan.outline(),
        [(0, 4096, 512), (1, 4096, 512), (1, 4608, 65536), (1, 70144, 65536), (0, 0, 0), (1, 0, 0)]
    );
    plan.run().unwrap();
    let a = list[0].snapshot();
    let header = DriveHeader::parse(&a[4096..4608]).unwrap();
    assert_eq!((header.status, header.label.last_update), (HeaderStatus::Removed, Timeval::new(100, 0)));
    assert_eq!(read_config_copy(&a, ConfigCopy::First).unwrap(), CONFIG, "the removed drive's copies stay");
    let b = read_drive(&list[1]).unwrap();
    assert_eq!((b.header.label.last_update, b.config), (now, config));
    let again = startup(&devs(&list)).unwrap();
    assert_eq!(again.drives.len(), 1);
    assert!(matches!(again.skipped[0].1, VinumDriveError::Removed { .. }));
}

#[test]
fn startup_keeps_detached_plexes_and_subdisks() {
    let text = "volume v state up\n\
        plex name v.p0 org concat vol v state up\n\
        plex name loose.p0 org concat  state down\n\
        sd name v.p0.s0 drive a len 2048s driveoffset 265s plex v.p0 plexoffset 0s state up\n\
        sd name loose.s0 drive a len 2048s driveoffset 2313s state stale\n";
    let list = [drive_device("d0", "a", 100, text)];
    let started = startup(&devs(&list)).unwrap();
    assert!(started.merged.config.plex("loose.p0").is_some_and(|p| p.volume.is_none()));
    assert!(started.merged.config.subdisk("loose.s0").is_some_and(|s| s.membership.is_none()));
    assert!(started.merged.dropped.is_empty());
}

/// A regular file has no sector size of its own: gvinum's rule takes it as 512-byte media.
#[test]
fn a_regular_file_counts_as_512_byte_sector_media() {
    let path = uraid_testkit::scratch_dir("vinum-drives").join(format!("media-{}.img", std::process::id()));
    std::fs::File::create(&path).unwrap().set_len(4 * MIB).unwrap();
    let dev = crate::open_member::Member::open(&path, false).unwrap();
    assert_eq!(dev.logical_sector_size().unwrap(), None);
    assert_eq!(media_sector_size(&dev).unwrap(), 512);
    assert_eq!(check_media(&dev).unwrap(), 512);
    std::fs::remove_file(&path).unwrap();
}
