//! `uraid zero-superblock DEVICE...` (`mdadm --zero-superblock`): erase the md superblocks of
//! devices that are to be used for something else.
//!
//! Every version's location is looked at and every superblock found there erased (a device
//! can carry the leftovers of several arrays), by writing over it what mdadm writes: zeros over
//! a 0.90 superblock's 4 KiB, over a 1.x superblock's first sector. Nothing else on the device
//! is touched (a bitmap, a partial parity log, the data stay as they are).
//!
//! Every device is checked before anything is written, and one refusal writes nothing at all:
//! - a device with no md superblock is "Unrecognised md component device", an error (mdadm
//!   says so too, but exits 0 since 4.1, taking such a device as already zeroed);
//! - a superblock that holds md's magic but does not parse is only erased with `--force`;
//! - a block device that someone holds open exclusively (a mounted file system, a running md
//!   array) is refused, as mdadm's exclusive open refuses it; `--force` opens it anyway.
//!
//! uraid itself takes no lock on the members it serves, so a member of an array that
//! `uraid serve` or `uraid mount` is running cannot be told apart from a free one.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use uraid_device::{Member, MemberDevice};
use uraid_md::probe::{superblocks_on_device, OnDevice};

use super::{err, CliError, CliResult};
use crate::ZeroSuperblockArgs;

/// A device whose superblocks may be erased, and what erasing them writes.
struct Checked {
    path: PathBuf,
    dev: Member,
    found: Vec<OnDevice>,
    /// The exclusive open held on a block device until its superblocks are erased.
    _exclusive: Option<File>,
}

pub fn run(args: &ZeroSuperblockArgs) -> CliResult {
    let mut checked = Vec::new();
    let mut refused = Vec::new();
    for path in &args.devices {
        match check(path, args.force) {
            Ok(c) => checked.push(c),
            Err(e) => refused.push(e.0),
        }
    }
    match refused.len() {
        0 => {}
        1 => return Err(CliError(format!("{}; nothing was written", refused.remove(0)))),
        n => {
            for r in &refused {
                eprintln!("uraid: {r}");
            }
            return err(format!("{n} of {} devices refused; nothing was written", args.devices.len()));
        }
    }
    for c in &checked {
        for sb in &c.found {
            c.dev.write_at(sb.offset, &vec![0u8; sb.erase_len]).map_err(|e| {
                CliError(format!(
                    "{}: erasing the md {} superblock at byte {}: {e}",
                    c.path.display(),
                    sb.version,
                    sb.offset
                ))
            })?;
            eprintln!("uraid: {}: erased the md {} superblock at byte {}", c.path.display(), sb.version, sb.offset);
        }
        c.dev.flush().map_err(|e| CliError(format!("{}: flush: {e}", c.path.display())))?;
    }
    Ok(())
}

/// Open `path` and find what there is to erase, or say why it must not be.
fn check(path: &Path, force: bool) -> CliResult<Checked> {
    let name = path.display();
    // An NBD export has no local node to hold exclusively; it is opened as any member is.
    let block = !Member::is_uri(path)
        && std::fs::metadata(path).map_err(|e| CliError(format!("{name}: {e}")))?.file_type().is_block_device();
    let exclusive = if block && !force {
        let f = OpenOptions::new().read(true).write(true).custom_flags(libc::O_EXCL).open(path).map_err(|e| {
            CliError(format!(
                "{name}: Couldn't open for write - not zeroing: {e} (a mounted file system or a running array holds it; --force opens it anyway)"
            ))
        })?;
        Some(f)
    } else {
        None
    };
    let dev = Member::open(path, true).map_err(|e| CliError(format!("{name}: {e}")))?;
    let found = superblocks_on_device(dev.size(), |offset, len| {
        let mut buf = vec![0u8; len];
        dev.read_at(offset, &mut buf).map(|()| buf)
    })
    .map_err(|e| CliError(format!("{name}: cannot read: {e}")))?;
    if found.is_empty() {
        return err(format!(
            "{name}: Unrecognised md component device (no md superblock at the 0.90, 1.0, 1.1 or 1.2 locations)"
        ));
    }
    if !force {
        if let Some(bad) = found.iter().find(|f| f.damage.is_some()) {
            return err(format!(
                "{name}: the md {} superblock at byte {} is damaged ({}); --force erases it anyway",
                bad.version,
                bad.offset,
                bad.damage.as_ref().expect("damaged")
            ));
        }
    }
    Ok(Checked { path: path.to_path_buf(), dev, found, _exclusive: exclusive })
}
