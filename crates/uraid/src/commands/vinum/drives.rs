//! The devices a command looks at, the gvinum drives found on them, and the drives as gvinum
//! lists them (placeholders for drives named by subdisks but not found included).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use uraid_device::vinum_drives::{check_media, startup, StartedDrive, Startup, VinumMediaError};
use uraid_device::{Member, MemberDevice};
use uraid_vinum_format::drive_layout::DATA_START;
use uraid_vinum_format::{Timeval, VinumConfig};

use super::super::{err, files_under, open_member, CliError, CliResult};

/// Where existing gvinum drives are looked for.
#[derive(Args, Clone, Debug, Default)]
pub struct Search {
    /// Also look for gvinum drives among every regular file and block device under DIR.
    #[arg(long, value_name = "DIR")]
    pub scan: Option<PathBuf>,
}

/// How a device came to be looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Named on the command line as a device to look for drives on.
    Given,
    /// Found under `--scan DIR`.
    Scanned,
    /// Named as the device of a new drive (looked at so that a drive on it is known).
    NewDrive,
}

/// A device looked at.
pub struct Seen {
    pub path: PathBuf,
    pub dev: Member,
    pub origin: Origin,
    pub identity: Identity,
}

/// The devices looked at and the gvinum drives on them.
pub struct DriveSet {
    pub seen: Vec<Seen>,
    pub startup: Startup,
}

/// What makes two names the same device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// (device, inode) of a file, the device number (and 0) of a block device.
    Node(u64, u64),
    /// An NBD export, by its URI as written back (two spellings of one address are not caught).
    Export(String),
}

/// What makes two paths the same device (see [`Identity`]).
pub fn identity(path: &Path) -> CliResult<Identity> {
    if let Some(uri) = path.to_str().and_then(|s| uraid_nbd::client::NbdUri::parse(s).ok()) {
        return Ok(Identity::Export(uri.to_string()));
    }
    let m = std::fs::metadata(path).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    Ok(if m.file_type().is_block_device() { Identity::Node(m.rdev(), 0) } else { Identity::Node(m.dev(), m.ino()) })
}

/// Whether a verb's argument names a device (an existing file or block device, or an NBD URI)
/// rather than an object.
pub fn is_device_argument(arg: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    Member::is_uri(Path::new(arg))
        || std::fs::metadata(arg).is_ok_and(|m| m.is_file() || m.file_type().is_block_device())
}

impl DriveSet {
    /// Open (read-only) every device given, every regular file and block device under
    /// `--scan`, and `new_drives` (the devices of drives about to be made), each device once
    /// however it is named, and find the gvinum drives on them.
    ///
    /// A device gvinum cannot use (logical sectors that do not divide 512 bytes) is refused
    /// when named, before any verb writes; under `--scan` it is passed over, as the kernel
    /// passes over it when tasting.
    pub fn start(given: &[PathBuf], search: &Search, new_drives: &[PathBuf]) -> CliResult<DriveSet> {
        // New drives' devices first: a device named twice is looked at as what it is first.
        let mut wanted: Vec<(PathBuf, Origin)> = new_drives.iter().map(|p| (p.clone(), Origin::NewDrive)).collect();
        wanted.extend(given.iter().map(|p| (p.clone(), Origin::Given)));
        if let Some(dir) = &search.scan {
            wanted.extend(files_under(dir)?.into_iter().map(|p| (p, Origin::Scanned)));
        }
        let mut seen: Vec<Seen> = Vec::new();
        for (path, origin) in wanted {
            let identity = identity(&path)?;
            if seen.iter().any(|s| s.identity == identity) {
                continue;
            }
            let dev = open_member(&path, false)?;
            match check_media(&dev) {
                Ok(_) => {}
                Err(VinumMediaError::SectorSize { .. }) if origin == Origin::Scanned => continue,
                Err(e) => return Err(e.into()),
            }
            seen.push(Seen { path, dev, origin, identity });
        }
        let devices: Vec<&dyn MemberDevice> = seen.iter().map(|s| &s.dev as &dyn MemberDevice).collect();
        let startup = startup(&devices)?;
        Ok(DriveSet { seen, startup })
    }

    /// Say on stderr why devices named on the command line hold no drive (devices of new
    /// drives are left to the create). With `strict`
    /// (commands that write), a damaged drive anywhere is an error: saving around it would
    /// leave it with an old configuration. Otherwise damage is reported and the drive left
    /// out.
    pub fn report_skipped(&self, strict: bool) -> CliResult {
        let mut damaged: Vec<String> = Vec::new();
        for (index, e) in &self.startup.skipped {
            let origin = self.seen[*index].origin;
            if origin == Origin::NewDrive {
                // The devices of new drives are checked by the create itself.
                continue;
            }
            if e.is_damage() {
                damaged.push(e.to_string());
            } else if origin == Origin::Given {
                eprintln!("uraid: {e}");
            }
        }
        match damaged.len() {
            0 => Ok(()),
            _ if strict => err(format!("{}; nothing was written", damaged.join("; "))),
            _ => {
                for d in &damaged {
                    eprintln!("uraid: skipping {d}");
                }
                Ok(())
            }
        }
    }

    /// The device a drive was found on.
    pub fn seen_of(&self, drive: &StartedDrive) -> &Seen {
        &self.seen[drive.index]
    }

    /// The path a drive was found at.
    pub fn path_of(&self, drive: &StartedDrive) -> &Path {
        &self.seen_of(drive).path
    }

    /// The configuration in the kernel's list order.
    pub fn config(&self) -> VinumConfig {
        self.startup.merged.config_in_kernel_list_order()
    }

    /// The drives as gvinum holds them, in its list order.
    pub fn views(&self, config: &VinumConfig) -> Vec<DriveView> {
        self.startup
            .merged
            .drive_list
            .iter()
            .map(|name| match self.startup.drive(name) {
                Some(d) => DriveView::found(name, &self.path_of(d).display().to_string(), d.media_size, config),
                None => DriveView::placeholder(name),
            })
            .collect()
    }

    /// Open a drive's device again, for writing.
    pub fn writable(&self, drive: &StartedDrive) -> CliResult<Member> {
        open_member(self.path_of(drive), true)
    }
}

/// A drive as gvinum lists it.
#[derive(Debug, Clone)]
pub struct DriveView {
    pub name: String,
    /// "up", or "down" for a drive only named by subdisks.
    pub state: &'static str,
    /// The device as gvinum names it (without `/dev/`; `???` when not found).
    pub device: String,
    /// The device as shown where gvinum shows `/dev/<device>`: the path it was found at.
    pub shown: String,
    /// Bytes after the metadata (`d->size`: media size less 135680); 0 when not found.
    pub size: u64,
    /// Of those, not in subdisks (`d->avail`).
    pub avail: u64,
    /// Free extents (offset, length), lowest first.
    pub free: Vec<(u64, u64)>,
    /// Found on no device: a placeholder (gvinum's "referenced" drive).
    pub referenced: bool,
}

impl DriveView {
    fn found(name: &str, path: &str, media_size: u64, config: &VinumConfig) -> DriveView {
        let size = media_size.saturating_sub(DATA_START);
        let mut extents: Vec<(u64, u64)> =
            config.subdisks.iter().filter(|s| s.drive == name).map(|s| (s.drive_offset, s.length)).collect();
        extents.sort_unstable();
        let used: u64 = extents.iter().map(|e| e.1).sum();
        // The kernel's free list: the complement of the subdisks from the data start to the
        // end of the media.
        let mut free = Vec::new();
        let mut at = DATA_START;
        for (offset, length) in extents.iter().copied().chain([(media_size.max(DATA_START), 0)]) {
            if offset > at {
                free.push((at, offset - at));
            }
            at = at.max(offset.saturating_add(length));
        }
        DriveView {
            name: name.to_string(),
            state: "up",
            device: path.strip_prefix("/dev/").unwrap_or(path).to_string(),
            shown: path.to_string(),
            size,
            avail: size.saturating_sub(used),
            free,
            referenced: false,
        }
    }

    fn placeholder(name: &str) -> DriveView {
        DriveView {
            name: name.to_string(),
            state: "down",
            device: "???".into(),
            shown: "/dev/???".into(),
            size: 0,
            avail: 0,
            free: Vec::new(),
            referenced: true,
        }
    }
}

/// Now, as gvinum's `microtime`.
pub fn now() -> Timeval {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    Timeval::new(t.as_secs(), u64::from(t.subsec_micros()))
}

/// This machine's name (`uname`'s node name).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The host name as gvinum records it in a new drive's header: at most 31 bytes, as `strlcpy`
/// into the 32-byte field leaves it.
pub fn header_hostname() -> String {
    let mut name = hostname();
    while name.len() > 31 {
        name.pop();
    }
    name
}
