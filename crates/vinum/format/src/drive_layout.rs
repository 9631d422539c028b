//! The fixed layout of every gvinum drive and the configuration areas within it.
//!
//! | what | drive bytes |
//! |---|---|
//! | untouched (boot block, disk label) | 0..4096 |
//! | header ([`crate::header`]) | 4096..4608 |
//! | configuration copy 1 | 4608..70144 |
//! | configuration copy 2 | 70144..135680 |
//! | subdisk data | from 135680 (`GV_DATA_START`, sector 265) |
//!
//! Each configuration area holds the configuration text ([`crate::config_text`]) followed by
//! a NUL and padding (zeros as written here and by current FreeBSD, whose string buffers are
//! zero-filled). gvinum writes both copies identically at every save but reads only copy 1
//! when it tastes a drive (`gv_drive_tasted` in `geom_vinum_events.c`).

use thiserror::Error;

/// Where the drive header starts (defined with the header).
pub use crate::header::HEADER_OFFSET;
use crate::header::{DriveHeader, HeaderError};

/// gvinum counts every size and offset in 512-byte sectors, whatever the media's sector size.
pub const SECTOR_SIZE: u64 = 512;
/// Length of the header block (`GV_HDR_LEN`).
pub const HEADER_LEN: usize = 512;
/// Drive byte where configuration copy 1 starts (`GV_CFG_OFFSET`).
pub const CONFIG_OFFSET: u64 = 4608;
/// Length of each configuration copy (`GV_CFG_LEN`).
pub const CONFIG_LEN: usize = 65536;
/// First drive byte a subdisk may use (`GV_DATA_START`): after the two configuration copies.
pub const DATA_START: u64 = CONFIG_OFFSET + 2 * CONFIG_LEN as u64;
/// Longest configuration text that fits a copy: the area also holds the terminating NUL.
pub const MAX_CONFIG_TEXT_LEN: usize = CONFIG_LEN - 1;

/// One of the two configuration copies on a drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigCopy {
    /// Copy 1 at drive byte 4608: the one the kernel reads.
    First,
    /// Copy 2 at drive byte 70144: written, never read by the kernel.
    Second,
}

impl ConfigCopy {
    /// Drive byte where this copy starts.
    pub fn offset(self) -> u64 {
        match self {
            ConfigCopy::First => CONFIG_OFFSET,
            ConfigCopy::Second => CONFIG_OFFSET + CONFIG_LEN as u64,
        }
    }

    fn number(self) -> u8 {
        match self {
            ConfigCopy::First => 1,
            ConfigCopy::Second => 2,
        }
    }
}

/// What is wrong with a configuration area or with a text meant for one.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigAreaError {
    /// The bytes end before a NUL and before the end of the area.
    #[error(
        "truncated gvinum config copy {copy}: needs {needed} bytes from drive byte {offset}, got {got} \
         and no NUL among them"
    )]
    Truncated { copy: u8, offset: u64, needed: usize, got: usize },
    /// The whole area holds no NUL: gvinum always ends the text with one.
    #[error("gvinum config copy {copy} at drive byte {offset} has no terminating NUL in its {CONFIG_LEN} bytes")]
    Unterminated { copy: u8, offset: u64 },
    /// The text holds bytes that are not UTF-8.
    #[error("gvinum config copy {copy} is not text: invalid byte at drive byte {offset}")]
    NotText { copy: u8, offset: u64 },
    /// A text to write does not fit an area (gvinum would silently cut it).
    #[error("config text of {len} bytes does not fit a config copy (at most {MAX_CONFIG_TEXT_LEN})")]
    TooLong { len: usize },
    /// A text to write contains a NUL, which would end it early.
    #[error("config text contains a NUL at byte {at}")]
    ContainsNul { at: usize },
}

/// What is wrong with the metadata at the start of a drive.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DriveMetadataError {
    /// The header block.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// A configuration copy.
    #[error(transparent)]
    ConfigArea(#[from] ConfigAreaError),
}

/// True if gvinum can use media of this logical sector size: the header's offset and length
/// must be whole sectors (`gv_read_header`), so 4096-byte-sector media are refused.
pub fn supports_sector_size(sector_size: u64) -> bool {
    sector_size != 0 && HEADER_OFFSET.is_multiple_of(sector_size) && (HEADER_LEN as u64).is_multiple_of(sector_size)
}

/// Bytes available to subdisks on media of `media_size` bytes (`gv_create_drive`: media size
/// minus [`DATA_START`]); `None` if the media cannot even hold the metadata.
pub fn usable_size(media_size: u64) -> Option<u64> {
    media_size.checked_sub(DATA_START)
}

/// The configuration text in a configuration area: the bytes before the first NUL.
///
/// `area` starts at the copy's offset; it may be longer than [`CONFIG_LEN`] (the rest is
/// ignored) or shorter if a NUL comes first.
pub fn parse_config_area(area: &[u8], copy: ConfigCopy) -> Result<&str, ConfigAreaError> {
    let within = &area[..area.len().min(CONFIG_LEN)];
    let Some(end) = within.iter().position(|&b| b == 0) else {
        if within.len() < CONFIG_LEN {
            return Err(ConfigAreaError::Truncated {
                copy: copy.number(),
                offset: copy.offset(),
                needed: CONFIG_LEN,
                got: area.len(),
            });
        }
        return Err(ConfigAreaError::Unterminated { copy: copy.number(), offset: copy.offset() });
    };
    std::str::from_utf8(&within[..end])
        .map_err(|e| ConfigAreaError::NotText { copy: copy.number(), offset: copy.offset() + e.valid_up_to() as u64 })
}

/// A configuration area holding `text`: the text, a NUL, zeros to [`CONFIG_LEN`].
pub fn config_area_bytes(text: &str) -> Result<Vec<u8>, ConfigAreaError> {
    if let Some(at) = text.bytes().position(|b| b == 0) {
        return Err(ConfigAreaError::ContainsNul { at });
    }
    if text.len() > MAX_CONFIG_TEXT_LEN {
        return Err(ConfigAreaError::TooLong { len: text.len() });
    }
    let mut area = vec![0u8; CONFIG_LEN];
    area[..text.len()].copy_from_slice(text.as_bytes());
    Ok(area)
}

/// The configuration text of one copy, from bytes read at the start of a drive.
pub fn read_config_copy(drive_start: &[u8], copy: ConfigCopy) -> Result<&str, ConfigAreaError> {
    let from = copy.offset() as usize;
    if drive_start.len() <= from {
        return Err(ConfigAreaError::Truncated {
            copy: copy.number(),
            offset: copy.offset(),
            needed: CONFIG_LEN,
            got: 0,
        });
    }
    parse_config_area(&drive_start[from..], copy)
}

/// A drive's metadata as the kernel reads it: the header and configuration copy 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveMetadata {
    /// The header at byte 4096.
    pub header: DriveHeader,
    /// The text of configuration copy 1.
    pub config_text: String,
}

impl DriveMetadata {
    /// Read the header and copy 1 from bytes read at the start of a drive (at least up to the
    /// text's NUL; [`DATA_START`] bytes always suffice).
    pub fn parse(drive_start: &[u8]) -> Result<Self, DriveMetadataError> {
        let from = HEADER_OFFSET as usize;
        let header_bytes = drive_start.get(from..).unwrap_or(&[]);
        let header_bytes = &header_bytes[..header_bytes.len().min(HEADER_LEN)];
        let header = DriveHeader::parse(header_bytes)?;
        let config_text = read_config_copy(drive_start, ConfigCopy::First)?.to_string();
        Ok(DriveMetadata { header, config_text })
    }

    /// The first [`DATA_START`] bytes of the drive as `gv_save_config` leaves them: zeros
    /// before the header, the canonical header, the text in both copies.
    pub fn to_bytes(&self) -> Result<Vec<u8>, DriveMetadataError> {
        let mut out = vec![0u8; DATA_START as usize];
        let header = self.header.to_bytes()?;
        out[HEADER_OFFSET as usize..HEADER_OFFSET as usize + HEADER_LEN].copy_from_slice(&header);
        let area = config_area_bytes(&self.config_text)?;
        for copy in [ConfigCopy::First, ConfigCopy::Second] {
            let at = copy.offset() as usize;
            out[at..at + CONFIG_LEN].copy_from_slice(&area);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Timeval;

    #[test]
    fn the_constants_are_gvinums() {
        assert_eq!(DATA_START, 135_680);
        assert_eq!(DATA_START / SECTOR_SIZE, 265);
        assert_eq!(ConfigCopy::First.offset(), 4608);
        assert_eq!(ConfigCopy::Second.offset(), 70_144);
        assert_eq!(usable_size(1 << 20), Some((1 << 20) - 135_680));
        assert_eq!(usable_size(100_000), None);
    }

    /// `gv_read_header` tastes a device only when 4096 and 512 are both whole sectors: sizes
    /// that divide 512 are taken, 4Kn and every other size refused (0 too, where the kernel
    /// would divide by zero).
    #[test]
    fn only_sector_sizes_dividing_512_are_supported() {
        for taken in [512, 256, 128, 64, 2, 1] {
            assert!(supports_sector_size(taken), "{taken}");
        }
        for refused in [0, 3, 520, 1024, 2048, 4096, 8192, 65536, 1 << 40] {
            assert!(!supports_sector_size(refused), "{refused}");
        }
        // Equivalently: exactly the divisors of 512.
        for size in 0..=70_000u64 {
            assert_eq!(supports_sector_size(size), size != 0 && 512 % size == 0, "{size}");
        }
    }

    #[test]
    fn a_config_area_is_text_nul_and_zeros() {
        let area = config_area_bytes("volume v state up\n").unwrap();
        assert_eq!(area.len(), CONFIG_LEN);
        assert_eq!(&area[..18], b"volume v state up\n");
        assert!(area[18..].iter().all(|&b| b == 0));
        assert_eq!(parse_config_area(&area, ConfigCopy::First).unwrap(), "volume v state up\n");
    }

    #[test]
    fn bytes_after_the_nul_are_ignored() {
        let mut area = config_area_bytes("volume v state up\n").unwrap();
        area[100] = 0xff;
        assert_eq!(parse_config_area(&area, ConfigCopy::Second).unwrap(), "volume v state up\n");
    }

    #[test]
    fn an_area_without_a_nul_is_refused() {
        let area = vec![b'a'; CONFIG_LEN];
        assert_eq!(
            parse_config_area(&area, ConfigCopy::First),
            Err(ConfigAreaError::Unterminated { copy: 1, offset: 4608 })
        );
        assert_eq!(
            parse_config_area(&area[..10], ConfigCopy::Second),
            Err(ConfigAreaError::Truncated { copy: 2, offset: 70_144, needed: CONFIG_LEN, got: 10 })
        );
    }

    #[test]
    fn non_text_is_refused_at_its_drive_byte() {
        let mut area = config_area_bytes("volume v state up\n").unwrap();
        area[7] = 0xc3;
        area[8] = 0x28;
        let err = parse_config_area(&area, ConfigCopy::First).unwrap_err();
        assert_eq!(err, ConfigAreaError::NotText { copy: 1, offset: 4608 + 7 });
        assert!(err.to_string().contains("drive byte 4615"), "{err}");
    }

    #[test]
    fn texts_that_do_not_fit_are_refused() {
        assert!(config_area_bytes(&"x".repeat(MAX_CONFIG_TEXT_LEN)).is_ok());
        assert_eq!(config_area_bytes(&"x".repeat(CONFIG_LEN)), Err(ConfigAreaError::TooLong { len: CONFIG_LEN }));
        assert_eq!(config_area_bytes("ab\0c"), Err(ConfigAreaError::ContainsNul { at: 2 }));
    }

    #[test]
    fn drive_metadata_round_trips() {
        let mut header = DriveHeader::new("d0", "host", Timeval::new(10, 20));
        header.label.last_update = Timeval::new(30, 40);
        let meta = DriveMetadata { header, config_text: "volume v state up\n".into() };
        let bytes = meta.to_bytes().unwrap();
        assert_eq!(bytes.len(), DATA_START as usize);
        assert!(bytes[..4096].iter().all(|&b| b == 0));
        assert_eq!(&bytes[4096..4104], b"VINUM-1\0");
        assert_eq!(&bytes[4608..4626], b"volume v state up\n");
        assert_eq!(&bytes[70_144..70_162], b"volume v state up\n");
        assert_eq!(DriveMetadata::parse(&bytes).unwrap(), meta);
        assert_eq!(read_config_copy(&bytes, ConfigCopy::Second).unwrap(), meta.config_text);
    }

    #[test]
    fn short_drives_report_which_part_is_missing() {
        assert!(matches!(DriveMetadata::parse(&[0u8; 100]), Err(DriveMetadataError::Header(_))));
        let meta = DriveMetadata {
            header: DriveHeader::new("d0", "host", Timeval::default()),
            config_text: "volume v state up\n".into(),
        };
        let bytes = meta.to_bytes().unwrap();
        assert!(matches!(
            DriveMetadata::parse(&bytes[..4620]),
            Err(DriveMetadataError::ConfigArea(ConfigAreaError::Truncated { .. }))
        ));
        assert!(matches!(
            DriveMetadata::parse(&bytes[..4608]),
            Err(DriveMetadataError::ConfigArea(ConfigAreaError::Truncated { got: 0, .. }))
        ));
    }
}
