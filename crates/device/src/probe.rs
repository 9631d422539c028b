//! Finding an md superblock on a member device.
//!
//! Where md keeps its superblocks and how a member is recognised is md's knowledge
//! ([`uraid_md::probe`], which does no I/O); this module only reads a [`MemberDevice`] for it and
//! names the device in errors.

use uraid_md::probe as md;
pub use uraid_md::probe::{NoSuperblock, Probed};
use uraid_md_format::{FindError, FormatError};

use crate::member::MemberDevice;

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

/// `len` bytes of `dev` at byte `offset`, as [`uraid_md::probe`] asks for them.
fn reader(dev: &dyn MemberDevice) -> impl FnMut(u64, usize) -> std::io::Result<Vec<u8>> + '_ {
    move |offset, len| {
        let mut buf = vec![0u8; len];
        dev.read_at(offset, &mut buf).map(|()| buf)
    }
}

/// Look for an md superblock on `dev`. `Ok(None)` when there is none.
///
/// When more than one location holds a valid superblock (an old array's leftovers), the one
/// updated last wins, as mdadm's `guess_super` prefers the newest.
pub fn probe(dev: &dyn MemberDevice) -> Result<Option<Probed>, ProbeError> {
    md::probe(dev.size(), reader(dev)).map_err(|e| match e {
        FindError::Read { source, .. } => ProbeError::Io { device: dev.name().to_string(), source },
        FindError::Format(source) => ProbeError::Damaged { device: dev.name().to_string(), source },
    })
}

/// A "no superblock" description for `dev`.
pub fn no_superblock(dev: &dyn MemberDevice) -> NoSuperblock {
    NoSuperblock { device: dev.name().to_string(), size: dev.size() }
}

/// Every superblock location on `dev` that starts with md's magic, valid or not: what a create
/// with `--force` must wipe so no leftover is ever taken for a member.
pub fn md_magic_offsets(dev: &dyn MemberDevice) -> std::io::Result<Vec<u64>> {
    md::magic_offsets(dev.size(), reader(dev))
}
