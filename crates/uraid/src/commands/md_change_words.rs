//! The words of `--size` (with `--assume-clean`) and `--bitmap` (with `--bitmap-chunk`), as
//! `uraid grow` and `uraid ctl NAME grow` take them, turned into the change they ask for.

use uraid_device::md_change::MdChange;
use uraid_md::resize::SizeRequest;

use super::{err, CliError, CliResult};
use crate::size::parse_size;

/// The size or bitmap change the words of `--size` (with `--assume-clean`) or `--bitmap` (with
/// `--bitmap-chunk`) ask for: one of them, as mdadm takes them.
pub fn md_change(
    size: Option<&str>,
    assume_clean: bool,
    bitmap: Option<&str>,
    bitmap_chunk: Option<&str>,
) -> CliResult<MdChange> {
    if size.is_some() && bitmap.is_some() {
        return err("grow: --bitmap changes cannot be used with other changes (one at a time, as mdadm takes them)");
    }
    if let Some(text) = size {
        let request = if text == "max" {
            SizeRequest::Max
        } else {
            let bytes = parse_size(text, 1024).map_err(|e| CliError(format!("grow: --size={text}: {e}")))?;
            if bytes == 0 || bytes % 1024 != 0 {
                return err(format!("grow: --size={text} is not a positive whole number of KiB (or max)"));
            }
            SizeRequest::Sectors(bytes / 512)
        };
        return Ok(MdChange::Size { request, assume_clean });
    }
    match bitmap {
        Some("internal") => {
            let chunk = match bitmap_chunk {
                Some(c) => Some(parse_size(c, 1024).map_err(|e| CliError(format!("grow: --bitmap-chunk={c}: {e}")))?),
                None => None,
            };
            Ok(MdChange::AddBitmap { chunk })
        }
        Some("none") if bitmap_chunk.is_some() => err("grow: --bitmap-chunk goes with --bitmap=internal"),
        Some("none") => Ok(MdChange::RemoveBitmap),
        Some(other) => err(format!(
            "grow: --bitmap={other}: only internal and none are supported (no bitmap files or clustered bitmaps)"
        )),
        None => err("grow: nothing to change"),
    }
}
