//! Reading and saving FreeBSD gvinum drives on member devices.
//!
//! Every gvinum drive starts with the same metadata: its header at byte 4096 and two copies of
//! the whole configuration after it, up to [`DATA_START`] (135680). What the bytes mean is
//! `uraid_vinum_format`'s knowledge (pure); this module reads them off a [`MemberDevice`], writes
//! them back, and names the device in every error:
//!
//! - [`check_media`]: whether gvinum can use a device at all (its logical sector size);
//! - [`read_drive`]: the header and configuration copy 1, as the kernel tastes a drive
//!   (`gv_drive_tasted`), telling a device without a gvinum header apart from a damaged header
//!   or an unreadable configuration;
//! - [`foreign_content`]: what a device without a gvinum header holds that a new drive would
//!   overwrite (an md superblock, or any non-zero byte where gvinum's metadata goes);
//! - [`startup`]: the gvinum drives among a set of devices, known by the name in their header
//!   (never by path), their configurations merged newest first;
//! - [`prepare_save`]: a save as `gv_save_config` makes it: one `last_update` on every drive
//!   given, header, then configuration copy 1, then copy 2, then a flush of each device;
//! - [`prepare_reset`]: what `gv_resetconfig` writes to the drives.
//!
//! Writing is planned before anything is written ([`WritePlan`]), so that every check,
//! including whether each text and header can be written at all, happens first. The time of a
//! save is a parameter: nothing here reads a clock.

use std::sync::Arc;

use thiserror::Error;
use uraid_md_format::uuid::format_md;
use uraid_vinum_format::drive_layout::{
    config_area_bytes, read_config_copy, supports_sector_size, ConfigAreaError, ConfigCopy, CONFIG_LEN, CONFIG_OFFSET,
    DATA_START,
};
use uraid_vinum_format::header::{HeaderError, HEADER_BYTES_READ, HEADER_OFFSET};
use uraid_vinum_format::{
    format_config, merge_newest_first_keeping_detached, parse_config, ConfigTextError, DriveHeader, DriveMetadata,
    DriveMetadataError, HeaderStatus, MergedConfig, TastedDrive, Timeval, VinumConfig,
};

use crate::member::MemberDevice;
use crate::open_member::Member;
use crate::probe::{self, ProbeError};

/// Why a device's gvinum metadata could not be read, or why it is not a gvinum drive.
#[derive(Debug, Error)]
pub enum VinumDriveError {
    /// Reading the device failed.
    #[error("{device}: cannot read: {source}")]
    Read { device: String, source: std::io::Error },
    /// No gvinum header at byte 4096: the device is not a gvinum drive.
    #[error("{device}: no gvinum drive header (bytes 4096..4104 hold 0x{magic:016x}, not VINUM-1 or IN VINO)")]
    NoHeader { device: String, magic: u64 },
    /// A header gvinum marked removed (`VINUM--`, by `rm` or `resetconfig`): the kernel does not
    /// taste the drive.
    #[error("{device}: gvinum drive {name:?} was removed (its header says VINUM--); it is not read")]
    Removed { device: String, name: String },
    /// A gvinum magic, but the rest of the header cannot be read.
    #[error("{device}: gvinum drive header is damaged: {source}")]
    DamagedHeader { device: String, source: HeaderError },
    /// A good header, but configuration copy 1 is not a configuration.
    #[error("{device}: gvinum drive {drive:?}: configuration unreadable: {source}")]
    ConfigUnreadable { device: String, drive: String, source: Box<ConfigDamage> },
}

impl VinumDriveError {
    /// The device the error is about.
    pub fn device(&self) -> &str {
        match self {
            VinumDriveError::Read { device, .. }
            | VinumDriveError::NoHeader { device, .. }
            | VinumDriveError::Removed { device, .. }
            | VinumDriveError::DamagedHeader { device, .. }
            | VinumDriveError::ConfigUnreadable { device, .. } => device,
        }
    }

    /// True for a device that is a gvinum drive (or may be one) whose metadata cannot be read:
    /// a read error, a damaged header, an unreadable configuration. False for devices that are
    /// simply not (or no longer) gvinum drives.
    pub fn is_damage(&self) -> bool {
        !matches!(self, VinumDriveError::NoHeader { .. } | VinumDriveError::Removed { .. })
    }
}

/// What is wrong with a configuration copy.
#[derive(Debug, Error)]
pub enum ConfigDamage {
    /// The area: cut short, no terminating NUL, not text.
    #[error(transparent)]
    Area(#[from] ConfigAreaError),
    /// The text: a line that is not a gvinum object line.
    #[error(transparent)]
    Text(#[from] ConfigTextError),
    /// The device ends inside the configuration copies (the kernel reads all 64 KiB of copy 1,
    /// and every save writes copy 2).
    #[error(
        "the device ends at byte {size}, inside the configuration copies (a drive's metadata takes {DATA_START} bytes)"
    )]
    CutShort { size: u64 },
}

/// Why a device cannot hold a gvinum drive, whatever is on it.
#[derive(Debug, Error)]
pub enum VinumMediaError {
    /// The block device did not say its logical sector size.
    #[error("{device}: cannot read its logical sector size: {source}")]
    SectorSizeUnknown { device: String, source: std::io::Error },
    /// Sectors that do not divide 512 bytes (4Kn media): see [`check_media`].
    #[error(
        "{device}: logical sector size {sector_size} bytes; gvinum only uses media whose sectors divide 512 \
         bytes (it reads the 512-byte drive header at byte 4096 in whole sectors), so this device cannot hold \
         a gvinum drive"
    )]
    SectorSize { device: String, sector_size: u32 },
}

/// The sector size a regular file counts as having: what FreeBSD's md(4) gives a file it
/// attaches unless told otherwise, so an image file moves to gvinum as 512-byte media.
pub const FILE_SECTOR_SIZE: u32 = 512;

/// The logical sector size of `dev` as gvinum would see it: a block device's own, and
/// [`FILE_SECTOR_SIZE`] for a regular file.
pub fn media_sector_size(dev: &Member) -> Result<u32, VinumMediaError> {
    let size = dev
        .logical_sector_size()
        .map_err(|source| VinumMediaError::SectorSizeUnknown { device: dev.name().to_string(), source })?;
    Ok(size.unwrap_or(FILE_SECTOR_SIZE))
}

/// Refuse a device gvinum cannot use: one whose logical sectors do not divide 512 bytes. The
/// kernel reads a drive's header only when the header's offset (4096) and length (512) are
/// whole sectors (`gv_read_header`) and otherwise does not taste the device, so a drive made
/// there would never be found. Returns the sector size.
pub fn check_media(dev: &Member) -> Result<u32, VinumMediaError> {
    let sector_size = media_sector_size(dev)?;
    if !supports_sector_size(u64::from(sector_size)) {
        return Err(VinumMediaError::SectorSize { device: dev.name().to_string(), sector_size });
    }
    Ok(sector_size)
}

/// An active gvinum drive as read from its device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VinumDrive {
    /// The header at byte 4096.
    pub header: DriveHeader,
    /// The text of configuration copy 1 (the only copy the kernel reads), or of copy 2 when
    /// copy 1 could not be read (see [`read_drive`]).
    pub config_text: String,
    /// That text, parsed.
    pub config: VinumConfig,
    /// Copy 1 could not be read or parsed, and this is copy 2's configuration.
    pub from_second_copy: bool,
}

/// Read the first [`DATA_START`] bytes of `dev` (fewer if it is smaller).
fn read_start(dev: &dyn MemberDevice) -> Result<Vec<u8>, VinumDriveError> {
    let len = dev.size().min(DATA_START) as usize;
    let mut buf = vec![0u8; len];
    dev.read_at(0, &mut buf).map_err(|source| VinumDriveError::Read { device: dev.name().to_string(), source })?;
    Ok(buf)
}

/// The gvinum drive on `dev`: its header and configuration copy 1.
///
/// Where copy 1 cannot be read or parsed and copy 2 can, copy 2 is taken (the kernel reads
/// copy 1 only, and would leave the drive out). A save writes and flushes copy 2 before copy
/// 1 and the header after both, so a copy 1 torn by a crash sits under the header of the save
/// before, with copy 2 holding the whole text of the save that was cut short: a save a little
/// newer than the header says, but one whose states were all true when it was made.
///
/// Errors say which: no gvinum header ([`VinumDriveError::NoHeader`], also for devices too
/// small to hold one), a removed drive, a damaged header, an unreadable configuration, or a
/// read error.
pub fn read_drive(dev: &dyn MemberDevice) -> Result<VinumDrive, VinumDriveError> {
    let bytes = read_start(dev)?;
    match read_drive_copy_one(dev, &bytes) {
        Ok(drive) => Ok(sound_copy(drive, &bytes)),
        Err(VinumDriveError::ConfigUnreadable { device, drive, source }) => {
            let second = second_copy(&bytes);
            let header = DriveHeader::parse(&bytes[HEADER_OFFSET as usize..]).ok();
            match (second, header) {
                (Some((config_text, config)), Some(header)) if dev.size() >= DATA_START => {
                    Ok(VinumDrive { header, config_text, config, from_second_copy: true })
                }
                _ => Err(VinumDriveError::ConfigUnreadable { device, drive, source }),
            }
        }
        other => other,
    }
}

/// Configuration copy 2's text and objects, if it parses.
fn second_copy(bytes: &[u8]) -> Option<(String, VinumConfig)> {
    let text = read_config_copy(bytes, ConfigCopy::Second).ok()?;
    parse_config(text).ok().map(|config| (text.to_string(), config))
}

/// Copy 1 as read, unless it parses into objects that cannot be (subdisks overlapping on a
/// drive, references to objects it does not hold, a plex with holes) while copy 2 differs and
/// describes sound ones: then copy 1 is a text a crash tore into one that still parses
/// (sectors of the old and the new text joined at a line boundary, or mid-line into another
/// line), and copy 2, written and flushed before it, is the whole text of that save.
fn sound_copy(drive: VinumDrive, bytes: &[u8]) -> VinumDrive {
    if drive.config.problems().is_empty() {
        return drive;
    }
    match second_copy(bytes) {
        Some((text, config)) if text != drive.config_text && config.problems().is_empty() => {
            VinumDrive { header: drive.header, config_text: text, config, from_second_copy: true }
        }
        _ => drive,
    }
}

/// [`read_drive`] from copy 1 alone, as the kernel reads.
fn read_drive_copy_one(dev: &dyn MemberDevice, bytes: &[u8]) -> Result<VinumDrive, VinumDriveError> {
    let device = || dev.name().to_string();
    let header_end = HEADER_OFFSET as usize + HEADER_BYTES_READ;
    if bytes.len() < header_end {
        let magic = magic_at(bytes);
        return Err(VinumDriveError::NoHeader { device: device(), magic });
    }
    let metadata = match DriveMetadata::parse(bytes) {
        Ok(m) => m,
        Err(DriveMetadataError::Header(HeaderError::NotVinum { magic })) => {
            return Err(VinumDriveError::NoHeader { device: device(), magic })
        }
        Err(DriveMetadataError::Header(source)) => {
            return Err(VinumDriveError::DamagedHeader { device: device(), source })
        }
        Err(DriveMetadataError::ConfigArea(source)) => {
            // The header was read; name the drive, unless it was removed anyway.
            let header = DriveHeader::parse(&bytes[HEADER_OFFSET as usize..])
                .map_err(|source| VinumDriveError::DamagedHeader { device: device(), source })?;
            if !header.is_active() {
                return Err(VinumDriveError::Removed { device: device(), name: header.label.name });
            }
            return Err(VinumDriveError::ConfigUnreadable {
                device: device(),
                drive: header.label.name,
                source: Box::new(source.into()),
            });
        }
    };
    if metadata.header.status == HeaderStatus::Removed {
        return Err(VinumDriveError::Removed { device: device(), name: metadata.header.label.name });
    }
    if dev.size() < DATA_START {
        let source = Box::new(ConfigDamage::CutShort { size: dev.size() });
        return Err(VinumDriveError::ConfigUnreadable { device: device(), drive: metadata.header.label.name, source });
    }
    let config = parse_config(&metadata.config_text).map_err(|e| VinumDriveError::ConfigUnreadable {
        device: device(),
        drive: metadata.header.label.name.clone(),
        source: Box::new(e.into()),
    })?;
    Ok(VinumDrive { header: metadata.header, config_text: metadata.config_text, config, from_second_copy: false })
}

/// The big-endian word at byte 4096, or what there is of it.
fn magic_at(bytes: &[u8]) -> u64 {
    let from = (HEADER_OFFSET as usize).min(bytes.len());
    let mut word = [0u8; 8];
    let have = &bytes[from..bytes.len().min(from + 8)];
    word[..have.len()].copy_from_slice(have);
    u64::from_be_bytes(word)
}

/// Something on a device that a new gvinum drive would overwrite or leave beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Foreign {
    /// A valid md superblock (anywhere md keeps one).
    MdSuperblock { version: String, offset: u64, array_uuid: String },
    /// md's magic where a superblock goes, but the superblock does not read.
    DamagedMd { reason: String },
    /// Data (a partition table, a file system, anything) in the bytes gvinum's metadata takes.
    NonZero { offset: u64 },
}

impl std::fmt::Display for Foreign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Foreign::MdSuperblock { version, offset, array_uuid } => {
                write!(f, "an md {version} superblock at byte {offset} (array {array_uuid})")
            }
            Foreign::DamagedMd { reason } => write!(f, "a damaged md superblock ({reason})"),
            Foreign::NonZero { offset } => write!(
                f,
                "data at byte {offset} (not zero), inside the first {DATA_START} bytes gvinum's metadata takes, \
                 and no gvinum header"
            ),
        }
    }
}

/// What `dev` holds that makes it unsafe to turn into a new gvinum drive, if anything: an md
/// superblock (valid or damaged, wherever md keeps it), else the first non-zero byte in the
/// first [`DATA_START`] bytes. `None` for a blank device. Meant for devices [`read_drive`]
/// found no gvinum header on; the caller decides what to do with gvinum drives.
pub fn foreign_content(dev: &dyn MemberDevice) -> Result<Option<Foreign>, VinumDriveError> {
    let read_error = |source| VinumDriveError::Read { device: dev.name().to_string(), source };
    match probe::probe(dev) {
        Ok(Some(p)) => {
            let info = p.superblock.info();
            return Ok(Some(Foreign::MdSuperblock {
                version: info.version.to_string(),
                offset: p.offset,
                array_uuid: format_md(&info.array_uuid),
            }));
        }
        Ok(None) => {}
        Err(ProbeError::Damaged { source, .. }) => return Ok(Some(Foreign::DamagedMd { reason: source.to_string() })),
        Err(ProbeError::Io { source, .. }) => return Err(read_error(source)),
    }
    let magic = probe::md_magic_offsets(dev).map_err(read_error)?;
    if let Some(&offset) = magic.first() {
        let reason = format!("md's magic at byte {offset}, but no superblock reads there");
        return Ok(Some(Foreign::DamagedMd { reason }));
    }
    let bytes = read_start(dev)?;
    Ok(bytes.iter().position(|&b| b != 0).map(|at| Foreign::NonZero { offset: at as u64 }))
}

/// A gvinum drive found by [`startup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedDrive {
    /// Its index in the devices given.
    pub index: usize,
    /// Bytes on its device (the kernel's media size).
    pub media_size: u64,
    /// What was read.
    pub drive: VinumDrive,
}

/// The gvinum drives among a set of devices and the configuration they make together.
#[derive(Debug)]
pub struct Startup {
    /// The active drives, in the kernel's list order ([`MergedConfig::drive_list`], tasted
    /// newest first).
    pub drives: Vec<StartedDrive>,
    /// Their configurations merged newest first, detached plexes and subdisks kept
    /// ([`merge_newest_first_keeping_detached`]: the kernel drops them when it tastes, but
    /// uraid tastes for every command, and `detach` is meant to last until an `attach` or
    /// `rm`).
    pub merged: MergedConfig,
    /// Devices that are not read as drives, with the reason: no gvinum header, removed, or
    /// damaged ([`VinumDriveError::is_damage`]).
    pub skipped: Vec<(usize, VinumDriveError)>,
}

impl Startup {
    /// The drive of that name.
    pub fn drive(&self, name: &str) -> Option<&StartedDrive> {
        self.drives.iter().find(|d| d.drive.header.label.name == name)
    }

    /// The skipped devices whose metadata is damaged (not those that are simply no drives).
    pub fn damaged(&self) -> impl Iterator<Item = &VinumDriveError> {
        self.skipped.iter().map(|(_, e)| e).filter(|e| e.is_damage())
    }
}

/// Why a set of devices cannot be started.
#[derive(Debug, Error)]
pub enum StartupError {
    /// Two devices carry one drive name: gvinum knows drives by name and would read only the
    /// first it tasted, in an order no one chooses.
    #[error("{first} and {second} both carry gvinum drive {name:?}; remove one from the set")]
    DuplicateName { name: String, first: String, second: String },
}

/// Find the gvinum drives among `devices` by the name in their headers and merge their
/// configurations newest first. Devices without a drive are listed in
/// [`Startup::skipped`]; two devices with one drive name are refused.
pub fn startup(devices: &[&dyn MemberDevice]) -> Result<Startup, StartupError> {
    let mut found: Vec<StartedDrive> = Vec::new();
    let mut skipped = Vec::new();
    for (index, dev) in devices.iter().enumerate() {
        match read_drive(*dev) {
            Ok(drive) => {
                let name = &drive.header.label.name;
                if let Some(other) = found.iter().find(|d| &d.drive.header.label.name == name) {
                    return Err(StartupError::DuplicateName {
                        name: name.clone(),
                        first: devices[other.index].name().to_string(),
                        second: dev.name().to_string(),
                    });
                }
                found.push(StartedDrive { index, media_size: dev.size(), drive });
            }
            Err(e) => skipped.push((index, e)),
        }
    }
    let tasted: Vec<TastedDrive> =
        found.iter().map(|d| TastedDrive { header: d.drive.header.clone(), config: d.drive.config.clone() }).collect();
    let merged = merge_newest_first_keeping_detached(&tasted);
    let mut drives = Vec::with_capacity(found.len());
    for name in &merged.drive_list {
        if let Some(at) = found.iter().position(|d| &d.drive.header.label.name == name) {
            drives.push(found.swap_remove(at));
        }
    }
    Ok(Startup { drives, merged, skipped })
}

/// A drive a save or reset writes: its device and its header as it stands.
pub struct DriveToWrite<'a> {
    /// The device.
    pub device: &'a dyn MemberDevice,
    /// The header (name, host name, date of birth); the save sets the rest.
    pub header: DriveHeader,
}

/// Why metadata cannot be planned or was not all written.
#[derive(Debug, Error)]
pub enum SaveError {
    /// A device too small to hold gvinum's metadata.
    #[error("{device}: {size} bytes is too small for a gvinum drive: its header and two configuration copies take {DATA_START}")]
    TooSmall { device: String, size: u64 },
    /// The configuration cannot be written as a text that reads back the same.
    #[error("the configuration cannot be saved: {0}")]
    Text(#[from] ConfigTextError),
    /// The text does not fit a configuration copy.
    #[error("the configuration cannot be saved: {0}")]
    Area(#[from] ConfigAreaError),
    /// A header that cannot be written (a name too long for its field).
    #[error("{device}: the gvinum header cannot be written: {source}")]
    Header { device: String, source: HeaderError },
    /// Writes or flushes that failed; the other devices were still written.
    #[error("{}", failures.join("; "))]
    Failed { failures: Vec<String> },
}

/// One step of a [`WritePlan`].
#[derive(Debug, Clone)]
enum Step {
    Write { drive: usize, offset: u64, bytes: Arc<Vec<u8>> },
    Flush { drive: usize },
}

/// Metadata writes worked out in full before any is made.
pub struct WritePlan<'a> {
    devices: Vec<&'a dyn MemberDevice>,
    steps: Vec<Step>,
    /// Each drive's header as the plan leaves it, in the order given.
    pub headers: Vec<DriveHeader>,
}

impl WritePlan<'_> {
    /// The writes in order, as (device index, offset, length), then flushes as (index, 0, 0).
    pub fn outline(&self) -> Vec<(usize, u64, usize)> {
        self.steps
            .iter()
            .map(|s| match s {
                Step::Write { drive, offset, bytes } => (*drive, *offset, bytes.len()),
                Step::Flush { drive } => (*drive, 0, 0),
            })
            .collect()
    }

    /// Make the writes and flushes in order. As `gv_save_config`, a device that fails is left
    /// (its remaining steps skipped) and the others are still written; every failure is
    /// reported.
    pub fn run(&self) -> Result<(), SaveError> {
        let mut failed = vec![false; self.devices.len()];
        let mut failures = Vec::new();
        for step in &self.steps {
            let (drive, result, what) = match step {
                Step::Write { drive, offset, bytes } => {
                    if failed[*drive] {
                        continue;
                    }
                    let r = self.devices[*drive].write_at(*offset, bytes);
                    (*drive, r, format!("cannot write gvinum metadata at byte {offset}"))
                }
                Step::Flush { drive } => {
                    if failed[*drive] {
                        continue;
                    }
                    (*drive, self.devices[*drive].flush(), "cannot flush".to_string())
                }
            };
            if let Err(e) = result {
                failed[drive] = true;
                failures.push(format!("{}: {what}: {e}", self.devices[drive].name()));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(SaveError::Failed { failures })
        }
    }
}

fn header_bytes(device: &dyn MemberDevice, header: &DriveHeader) -> Result<Arc<Vec<u8>>, SaveError> {
    let bytes = header.to_bytes().map_err(|source| SaveError::Header { device: device.name().to_string(), source })?;
    Ok(Arc::new(bytes.to_vec()))
}

fn check_size(device: &dyn MemberDevice) -> Result<(), SaveError> {
    if device.size() < DATA_START {
        return Err(SaveError::TooSmall { device: device.name().to_string(), size: device.size() });
    }
    Ok(())
}

/// The text and its configuration area, ready to write.
fn config_area(config: &VinumConfig) -> Result<Arc<Vec<u8>>, SaveError> {
    let text = format_config(config)?;
    Ok(Arc::new(config_area_bytes(&text)?))
}

/// Append one drive's save: header, copy 1, copy 2.
fn save_steps(steps: &mut Vec<Step>, drive: usize, header: Arc<Vec<u8>>, area: &Arc<Vec<u8>>) {
    steps.push(Step::Write { drive, offset: HEADER_OFFSET, bytes: header });
    steps.push(Step::Write { drive, offset: CONFIG_OFFSET, bytes: Arc::clone(area) });
    steps.push(Step::Write { drive, offset: CONFIG_OFFSET + CONFIG_LEN as u64, bytes: Arc::clone(area) });
}

/// Plan a save of `config` (its lists in the kernel's order: that is the order written) to
/// every drive given, in the order given (the kernel's drive list), as `gv_save_config`: one
/// `last_update`, `now` (or just after the newest drive's, keeping its unclean mark, see
/// [`Timeval::save_stamp`]), for all; for each drive its header, configuration copy 1 and copy 2;
/// then a flush of each device. Bytes 0..4096 and the data area are never touched.
pub fn prepare_save<'a>(
    drives: Vec<DriveToWrite<'a>>,
    config: &VinumConfig,
    now: Timeval,
) -> Result<WritePlan<'a>, SaveError> {
    prepare_remove(drives, Vec::new(), config, now)
}

/// Plan what `gv_rm_drive` and the save after it write: each of `removed` gets its header
/// with the removed magic (`VINUM--`), the rest of the header as it stands (the kernel writes
/// the header it holds, with no new stamp; the configuration copies stay as they are); then
/// `config` is saved to every drive of `kept` as [`prepare_save`] saves it; then every device
/// is flushed. With no drive removed this is [`prepare_save`].
pub fn prepare_remove<'a>(
    kept: Vec<DriveToWrite<'a>>,
    removed: Vec<DriveToWrite<'a>>,
    config: &VinumConfig,
    now: Timeval,
) -> Result<WritePlan<'a>, SaveError> {
    let area = config_area(config)?;
    // Newer than every drive, keeping the unclean mark the newest carries (a raid5 volume
    // whose parity a crash may have left stale stays owed its rewrite).
    let newest = kept.iter().chain(&removed).map(|d| d.header.label.last_update).max().unwrap_or_default();
    let now = Timeval::save_stamp(now, newest, newest.marks_unclean());
    let mut steps = Vec::new();
    let mut headers = Vec::new();
    let mut devices = Vec::new();
    for d in removed {
        check_size(d.device)?;
        let mut header = d.header;
        header.status = HeaderStatus::Removed;
        steps.push(Step::Write {
            drive: devices.len(),
            offset: HEADER_OFFSET,
            bytes: header_bytes(d.device, &header)?,
        });
        headers.push(header);
        devices.push(d.device);
    }
    for d in kept {
        check_size(d.device)?;
        let header = d.header.saved_at(now);
        save_steps(&mut steps, devices.len(), header_bytes(d.device, &header)?, &area);
        headers.push(header);
        devices.push(d.device);
    }
    steps.extend((0..devices.len()).map(|drive| Step::Flush { drive }));
    Ok(WritePlan { devices, steps, headers })
}

/// Plan what `gv_resetconfig` writes. The kernel removes every subdisk, then each drive in
/// its list order (`drives`, with their headers as they stand): it writes that drive's header
/// with the removed magic (`VINUM--`, the rest of the header as it was) and saves the
/// configuration, now the volumes and plexes without subdisks, to the drives still left. So
/// every drive ends with a removed header; the first keeps its old configuration copies, the
/// others hold the volume and plex lines, and all but the first were last saved at `now`.
/// Then every device is flushed. No drive is tasted again afterwards.
pub fn prepare_reset<'a>(
    drives: Vec<DriveToWrite<'a>>,
    config: &VinumConfig,
    now: Timeval,
) -> Result<WritePlan<'a>, SaveError> {
    let without_subdisks =
        VinumConfig { volumes: config.volumes.clone(), plexes: config.plexes.clone(), subdisks: Vec::new() };
    let area = config_area(&without_subdisks)?;
    let mut headers: Vec<DriveHeader> = drives.iter().map(|d| d.header.clone()).collect();
    let devices: Vec<&dyn MemberDevice> = drives.iter().map(|d| d.device).collect();
    for d in &devices {
        check_size(*d)?;
    }
    let mut steps = Vec::new();
    for i in 0..devices.len() {
        headers[i].status = HeaderStatus::Removed;
        steps.push(Step::Write { drive: i, offset: HEADER_OFFSET, bytes: header_bytes(devices[i], &headers[i])? });
        for j in i + 1..devices.len() {
            headers[j] = headers[j].saved_at(now);
            save_steps(&mut steps, j, header_bytes(devices[j], &headers[j])?, &area);
        }
    }
    steps.extend((0..devices.len()).map(|drive| Step::Flush { drive }));
    Ok(WritePlan { devices, steps, headers })
}

#[cfg(test)]
mod tests;
