//! `create` and the shortcuts `concat`, `stripe`, `raid5`, `mirror`.
//!
//! Both make a create description (read from a file, or built by
//! `uraid_vinum_format::placement::{concat, stripe, raid5, mirror}` from the devices given), lay it
//! out with `uraid_vinum_format::placement::place` on the drives that exist and the devices of the new
//! ones, and save the result to every drive, new and present, as gvinum does after a create.
//!
//! Every check comes before the first write: the description, the devices (each new drive's
//! device must exist, hold no gvinum drive, be large enough, and, unless `-f`, hold nothing
//! else: no md superblock, nothing but zeros where gvinum's metadata goes), the placement, and
//! the bytes of every header and configuration copy. Any refusal writes nothing.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

use uraid_device::vinum_drives::{foreign_content, prepare_save, DriveToWrite, VinumDriveError};
use uraid_device::{Member, MemberDevice};
use uraid_vinum_format::drive_layout::DATA_START;
use uraid_vinum_format::objects::DEFAULT_STRIPE_SIZE;
use uraid_vinum_format::placement::{concat, mirror, place, raid5, stripe, PlacementError, Present, SizedDrive};
use uraid_vinum_format::tokens::parse_size;
use uraid_vinum_format::{parse_create_description, CreateDescription, DriveHeader};

use super::super::{err, open_member, CliError, CliResult};
use super::drives::Search;
use super::drives::{header_hostname, identity, now, DriveSet, Identity};
use super::{CreateArgs, ShortcutArgs};

/// One of the shortcut verbs, with its own option.
pub enum Shortcut {
    Concat,
    Stripe,
    /// `-s SIZE`, as gvinum reads sizes.
    Raid5(Option<String>),
    Mirror {
        striped: bool,
    },
}

/// The device of a new drive: the name the description gives it (without `/dev/`) and the
/// path opened.
struct NewDevice {
    key: String,
    path: PathBuf,
}

/// The device name gvinum keeps for a path: without `/dev/`.
fn device_key(path: &Path) -> String {
    let text = path.to_string_lossy();
    text.strip_prefix("/dev/").unwrap_or(&text).to_string()
}

/// The path of a device a description names. gvinum drops `/dev/` from device names, so a
/// relative name is a path from here if it exists, else a device under /dev if that exists.
fn resolve(device: &str) -> PathBuf {
    let path = PathBuf::from(device);
    if path.is_absolute() || path.exists() {
        return path;
    }
    let under_dev = Path::new("/dev").join(device);
    if under_dev.exists() {
        under_dev
    } else {
        path
    }
}

fn read_description(file: Option<&Path>) -> CliResult<(String, String)> {
    match file.filter(|f| f.as_os_str() != "-") {
        Some(f) => {
            let text = std::fs::read_to_string(f).map_err(|e| CliError(format!("{}: {e}", f.display())))?;
            Ok((f.display().to_string(), text))
        }
        None => {
            let mut stdin = std::io::stdin();
            if stdin.is_terminal() {
                return err("give a create description: a FILE, or - and the description on stdin");
            }
            let mut text = String::new();
            stdin.read_to_string(&mut text).map_err(|e| CliError(format!("stdin: {e}")))?;
            Ok(("stdin".to_string(), text))
        }
    }
}

pub fn create(args: &CreateArgs) -> CliResult {
    let (source, text) = read_description(args.file.as_deref())?;
    let description = parse_create_description(&text).map_err(|e| CliError(format!("{source}: {e}")))?;
    let d = &description;
    if d.drives.is_empty() && d.volumes.is_empty() && d.plexes.is_empty() && d.subdisks.is_empty() {
        // gvinum sends the kernel nothing to create, and nothing is saved.
        return Ok(());
    }
    let new: Vec<NewDevice> = description
        .drives
        .iter()
        .filter_map(|d| d.device.as_deref())
        .map(|device| NewDevice { key: device.to_string(), path: resolve(device) })
        .collect();
    apply(&args.search, &args.devices, new, args.force, |_| Ok(description))
}

pub fn shortcut(kind: Shortcut, args: &ShortcutArgs) -> CliResult {
    let stripe_size = match &kind {
        Shortcut::Raid5(Some(text)) => match parse_size(text) {
            Ok(n) if n >= 0 => n as u64,
            Ok(_) => return err(format!("-s {text}: a stripe size cannot be negative")),
            Err(e) => return err(format!("-s {text}: not a size ({e})")),
        },
        _ => DEFAULT_STRIPE_SIZE,
    };
    let new: Vec<NewDevice> = args.devices.iter().map(|p| NewDevice { key: device_key(p), path: p.clone() }).collect();
    let names: Vec<String> = args.devices.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let volume = args.n.as_deref();
    apply(&args.search, &[], new, args.force, |present| {
        let devices: Vec<&str> = names.iter().map(String::as_str).collect();
        match kind {
            Shortcut::Concat => concat(present, &devices, volume),
            Shortcut::Stripe => stripe(present, &devices, volume),
            Shortcut::Raid5(_) => raid5(present, &devices, volume, stripe_size),
            Shortcut::Mirror { striped } => mirror(present, &devices, volume, striped),
        }
    })
}

/// gvinum's `-f` for `create`: objects whose names gvinum has already are skipped, not
/// refused (`gv_create`; a drive only named by subdisks counts).
fn skip_existing(description: &mut CreateDescription, present: &Present) {
    let config = &present.config;
    description.drives.retain(|d| {
        !present.drives.iter().any(|p| p.name == d.name) && !config.subdisks.iter().any(|s| s.drive == d.name)
    });
    description.volumes.retain(|v| config.volume(&v.name).is_none());
    description.plexes.retain(|p| config.plex(&p.name).is_none());
    description.subdisks.retain(|s| config.subdisk(&s.name).is_none());
}

/// Find the drives, build and check the description, place it, and save.
fn apply(
    search: &Search,
    given: &[PathBuf],
    new: Vec<NewDevice>,
    force: bool,
    build: impl FnOnce(&Present) -> Result<CreateDescription, PlacementError>,
) -> CliResult {
    let new_paths: Vec<PathBuf> = new.iter().map(|n| n.path.clone()).collect();
    let set = DriveSet::start(given, search, &new_paths)?;
    set.report_skipped(true)?;
    let present = Present {
        config: set.config(),
        drives: set
            .startup
            .drives
            .iter()
            .map(|d| SizedDrive {
                name: d.drive.header.label.name.clone(),
                device: device_key(set.path_of(d)),
                media_size: d.media_size,
            })
            .collect(),
    };
    let mut description = build(&present)?;
    if force {
        skip_existing(&mut description, &present);
    }

    // The devices of the drives to make.
    let mut sizes: BTreeMap<String, u64> = BTreeMap::new();
    let mut paths: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut taken: Vec<(Identity, String)> = Vec::new();
    for d in &description.drives {
        let Some(key) = d.device.as_deref() else { continue };
        let path = new.iter().find(|n| n.key == key).map_or_else(|| resolve(key), |n| n.path.clone());
        let id = identity(&path)?;
        if let Some((_, other)) = taken.iter().find(|(i, _)| *i == id) {
            return err(format!("drives {other:?} and {:?} are both on {}", d.name, path.display()));
        }
        taken.push((id.clone(), d.name.clone()));
        let index = set.seen.iter().position(|s| s.identity == id).expect("every new drive's device was looked at");
        if let Some(holder) = set.startup.drives.iter().find(|s| s.index == index) {
            return err(format!(
                "drive {:?}: {} is already gvinum drive {:?}",
                d.name,
                path.display(),
                holder.drive.header.label.name
            ));
        }
        check_new_device(&set.seen[index].dev, &set, index, force)?;
        sizes.insert(key.to_string(), set.seen[index].dev.size());
        paths.insert(key.to_string(), path);
    }

    let placement = place(&description, &present, &sizes)?;

    // Open every drive for writing, then plan the save: nothing is written before it is whole.
    let now = now();
    let host = header_hostname();
    let mut devices: Vec<Member> = Vec::new();
    let mut headers: Vec<DriveHeader> = Vec::new();
    for placed in &placement.drives {
        let name = &placed.drive.name;
        match set.startup.drive(name) {
            Some(d) => {
                devices.push(set.writable(d)?);
                headers.push(d.drive.header.clone());
            }
            None => {
                let path = &paths[&placed.drive.device];
                devices.push(open_member(path, true)?);
                headers.push(DriveHeader::new(name, &host, now));
            }
        }
    }
    let drives: Vec<DriveToWrite> = devices
        .iter()
        .zip(headers)
        .map(|(device, header)| DriveToWrite { device: device as &dyn MemberDevice, header })
        .collect();
    let plan = prepare_save(drives, &placement.config, now)?;
    plan.run()?;
    Ok(())
}

/// A new drive's device must hold no gvinum drive (checked by the caller), be large enough for
/// gvinum's metadata, and, unless `force`, hold nothing a new drive would overwrite.
fn check_new_device(dev: &Member, set: &DriveSet, index: usize, force: bool) -> CliResult {
    if dev.size() < DATA_START {
        return err(format!(
            "{}: {} bytes is too small for a gvinum drive: its header and two configuration copies take {DATA_START}",
            dev.name(),
            dev.size()
        ));
    }
    let problem = set.startup.skipped.iter().find(|(i, _)| *i == index).map(|(_, e)| e);
    let found = match problem {
        // gvinum's own leftover: a drive it removed.
        Some(VinumDriveError::Removed { .. }) => None,
        Some(VinumDriveError::NoHeader { .. }) | None => {
            foreign_content(dev)?.map(|f| format!("{}: holds {f}", dev.name()))
        }
        Some(damage) => Some(damage.to_string()),
    };
    match found {
        Some(what) if !force => err(format!("{what}; use --force to overwrite it")),
        Some(what) => {
            eprintln!("uraid: {what}; overwriting it (--force)");
            Ok(())
        }
        None => Ok(()),
    }
}
