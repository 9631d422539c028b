//! An md array left part-way through a reshape (by a crash, a stop, or the kernel), opened to
//! be served writable: `serve` (and so `assemble`) continues the reshape in the background
//! instead of refusing the array.

use std::path::PathBuf;

use uraid_device::reshape::Grow;
use uraid_device::OpenArray;

use super::{select_members, CliResult};
use crate::ArraySource;

/// The reshape to continue, and what to say about the array.
pub struct Reshaping {
    pub grow: Grow,
    pub uuid: String,
    pub md_shape: Option<String>,
    pub description: String,
}

/// The reshape in progress on the md array `source` names, taken up; `None` if the array is
/// not one (another format, or not part-way through a reshape, or not readable at all: the
/// caller's own error says why). A reshape that cannot be continued is refused with why.
pub fn reshape_in_progress(source: &ArraySource) -> CliResult<Option<Reshaping>> {
    if source.raidframe.is_some() || source.volume.is_some() {
        return Ok(None);
    }
    let paths = select_members(&source.members, source.scan.as_deref(), source.uuid.as_deref())?;
    let array = match OpenArray::open_paths(&paths, false) {
        Ok(array) => array,
        // Stopped inside a grow in place's critical section: taking the reshape up mends the
        // section from its backup first (as mdadm --assemble does), after which it reads.
        Err(uraid_device::OpenError::CriticalSection(_)) => {
            drop(Grow::resume(&paths)?);
            eprintln!("uraid: the reshape had stopped inside its critical section; restored it from its backup on the added devices");
            let Ok(array) = OpenArray::open_paths(&paths, false) else { return Ok(None) };
            array
        }
        Err(_) => return Ok(None),
    };
    let Some(md) = array.md() else { return Ok(None) };
    if md.plan.reshape.is_none() {
        return Ok(None);
    }
    let uuid = array.identity();
    let md_shape = array.mdstat_shape();
    let description = array.describe();
    let names: Vec<PathBuf> = array.device_names().into_iter().map(PathBuf::from).collect();
    drop(array);
    let grow = Grow::resume(&names)?;
    Ok(Some(Reshaping { grow, uuid, md_shape, description }))
}
