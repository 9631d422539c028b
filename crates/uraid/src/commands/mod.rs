//! One module per `uraid` command. Shared here: the error type every command returns and how
//! member paths are opened and probed.

pub mod cat;
pub mod create;
pub mod detail;
pub mod examine;
pub mod write;

use std::fmt;
use std::path::Path;

use uraid_device::{probe, FileDevice, MemberDevice, Probed};

/// A command's failure: one line for the user, already naming the file and what is wrong.
#[derive(Debug)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for CliError {
    fn from(e: E) -> CliError {
        CliError(e.to_string())
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;

/// Build an error from anything printable.
pub fn err<T>(message: impl Into<String>) -> CliResult<T> {
    Err(CliError(message.into()))
}

/// Open a member file or block device.
pub fn open_member(path: &Path, writable: bool) -> CliResult<FileDevice> {
    FileDevice::open(path, writable).map_err(|e| CliError(format!("{}: {e}", path.display())))
}

/// Open and probe a member: its device and the superblock found (or `None`).
pub fn open_and_probe(path: &Path) -> CliResult<(FileDevice, Option<Probed>)> {
    let dev = open_member(path, false)?;
    let probed = probe(&dev as &dyn MemberDevice)?;
    Ok((dev, probed))
}
