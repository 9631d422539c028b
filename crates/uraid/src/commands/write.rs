//! `uraid write`: write stdin into the array (or a gvinum volume) at an offset, keeping parity
//! and copies consistent (also degraded), with the format's dirty/clean bookkeeping around it.
//!
//! The input is read completely (up to the space left in the array) before anything is written,
//! so input that does not fit is refused without touching a member.

use std::io::{self, Read};

use super::source::open_source;
use super::{err, CliError, CliResult, RESYNC_NEEDED};
use crate::size::parse_size;
use crate::WriteArgs;

/// Bytes handed to the engine per request.
const STEP: usize = 4 << 20;

pub fn run(args: &WriteArgs) -> CliResult {
    let offset = parse_size(&args.offset, 1).map_err(CliError)?;
    let mut array = open_source(&args.source, true)?;
    let size = array.size();
    if offset > size {
        return err(format!("offset {offset} is beyond the end of the array ({size} bytes)"));
    }
    let room = size - offset;
    let mut input = Vec::new();
    io::stdin().lock().take(room + 1).read_to_end(&mut input).map_err(|e| CliError(format!("reading stdin: {e}")))?;
    if input.len() as u64 > room {
        return err(format!(
            "input is larger than the {room} bytes left in the array after offset {offset}; nothing written"
        ));
    }
    let mut pos = 0usize;
    while pos < input.len() {
        let n = STEP.min(input.len() - pos);
        array.write(offset + pos as u64, input[pos..pos + n].to_vec())?;
        pos += n;
    }
    for (member, reason) in &array.failures {
        eprintln!("uraid: {member} failed and was marked faulty: {reason}");
    }
    let clean = array.close()?;
    eprintln!("uraid: wrote {} bytes at offset {offset}", input.len());
    if !clean {
        eprintln!("uraid: {RESYNC_NEEDED}");
    }
    Ok(())
}
