//! `uraid cat`: stream the array's (or a gvinum volume's) logical contents to stdout,
//! rebuilding from redundancy where members are missing, failed or stale.

use std::io::{self, Write};

use super::source::open_source;
use super::{err, CliResult};
use crate::size::parse_size;
use crate::CatArgs;

/// Bytes read from the array per step: large enough for sequential speed, small enough to bound
/// memory.
const STEP: u64 = 4 << 20;

pub fn run(args: &CatArgs) -> CliResult {
    let mut array = open_source(&args.source, false)?;
    let size = array.size();
    let offset = parse_size(&args.offset, 1).map_err(super::CliError)?;
    let length = match &args.length {
        Some(l) => parse_size(l, 1).map_err(super::CliError)?,
        None => size.saturating_sub(offset),
    };
    if offset.checked_add(length).is_none_or(|end| end > size) {
        return err(format!("range {offset}+{length} is outside the array (size {size} bytes)"));
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut pos = offset;
    while pos < offset + length {
        let n = STEP.min(offset + length - pos);
        let data = array.read(pos, n)?;
        match out.write_all(&data) {
            Ok(()) => {}
            // A closed pipe (`uraid cat ... | head`) is the reader's choice, not an error.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return err(format!("writing to stdout: {e}")),
        }
        pos += n;
    }
    out.flush().or_else(|e| if e.kind() == io::ErrorKind::BrokenPipe { Ok(()) } else { Err(e) })?;
    Ok(())
}
