//! Finding an md superblock on a device.
//!
//! md keeps its superblock in one of four places depending on the metadata version (1.2: 4 KiB
//! from the start, 1.1: at the start, 1.0: 8-12 KiB from the end, 0.90: 64-128 KiB from the end).
//! We look in all of them. Finding md's magic and then failing to parse is an error (a torn or
//! corrupt superblock must be reported, not mistaken for a blank device); finding no magic at all
//! means "no superblock".

use std::fmt;

use uraid_md_format::{FindError, FormatError, MetadataVersion, Superblock};

use crate::member::MemberDevice;

/// md's superblock magic, the same for 0.90 and 1.x.
const MD_MAGIC: u32 = uraid_md_format::MD_SB_MAGIC;

/// A superblock found on a device.
#[derive(Debug, Clone)]
pub struct Probed {
    pub superblock: Superblock,
    /// Byte offset it was read from.
    pub offset: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{device}: cannot read: {source}")]
    Io { device: String, source: std::io::Error },
    #[error("{device}: md superblock is damaged: {source}")]
    Damaged { device: String, source: FormatError },
}

impl ProbeError {
    pub fn device(&self) -> &str {
        match self {
            ProbeError::Io { device, .. } | ProbeError::Damaged { device, .. } => device,
        }
    }
}

/// Why a device holds no usable superblock, for "not an md member" messages.
#[derive(Debug, Clone)]
pub struct NoSuperblock {
    pub device: String,
    pub size: u64,
}

impl fmt::Display for NoSuperblock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.size < 64 * 1024 {
            write!(f, "{}: no md superblock (device is only {} bytes: truncated?)", self.device, self.size)
        } else {
            write!(f, "{}: no md superblock found (tried 1.2, 1.1, 1.0 and 0.90 locations)", self.device)
        }
    }
}

/// Look for an md superblock on `dev`. `Ok(None)` when there is none.
///
/// When more than one location holds a valid superblock (an old array's leftovers), the one
/// updated last wins, as mdadm's `guess_super` prefers the newest.
pub fn probe(dev: &dyn MemberDevice) -> Result<Option<Probed>, ProbeError> {
    let found = Superblock::find(dev.size(), |offset, len| {
        let mut buf = vec![0u8; len];
        dev.read_at(offset, &mut buf).map(|()| buf)
    });
    match found {
        Ok(Some(superblock)) => Ok(Some(Probed { offset: superblock.byte_offset(), superblock })),
        Ok(None) => Ok(None),
        Err(FindError::Read { source, .. }) => Err(ProbeError::Io { device: dev.name().to_string(), source }),
        Err(FindError::Format(source)) => Err(ProbeError::Damaged { device: dev.name().to_string(), source }),
    }
}

/// A "no superblock" description for `dev`.
pub fn no_superblock(dev: &dyn MemberDevice) -> NoSuperblock {
    NoSuperblock { device: dev.name().to_string(), size: dev.size() }
}

/// Every superblock location on `dev` that starts with md's magic, valid or not: what a create
/// with `--force` must wipe so no leftover is ever taken for a member.
pub fn md_magic_offsets(dev: &dyn MemberDevice) -> std::io::Result<Vec<u64>> {
    let mut out = Vec::new();
    for version in MetadataVersion::all() {
        let Some(offset) = version.superblock_offset(dev.size()) else { continue };
        let mut magic = [0u8; 4];
        dev.read_at(offset, &mut magic)?;
        if u32::from_le_bytes(magic) == MD_MAGIC && !out.contains(&offset) {
            out.push(offset);
        }
    }
    Ok(out)
}
