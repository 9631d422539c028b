//! The gvinum drive header: the 512-byte block at drive byte 4096 that names the drive and
//! dates its configuration.
//!
//! Current gvinum writes one layout only, big-endian whatever the host ("canonical" here):
//!
//! | offset | width | field |
//! |---|---|---|
//! | 0 | u64 | magic: `VINUM-1\0` (active) or `VINUM--\0` (drive removed) |
//! | 8 | u64 | config_length, always 65536 |
//! | 16 | 32 bytes | label.sysname: host name at creation, NUL padded |
//! | 48 | 32 bytes | label.name: the drive's name, NUL padded |
//! | 80 | 2 × u64 | label.date_of_birth (seconds, microseconds) |
//! | 96 | 2 × u64 | label.last_update (seconds, microseconds), set at every save |
//! | 112 | u64 | label.drive_size (gvinum leaves it 0) |
//! | 120..512 | | zero |
//!
//! Classic (pre-GEOM) vinum dumped its host structure instead, magic `IN VINO\0` in host byte
//! order. gvinum's reader (`gv_read_header`, `gv_legacy_header_type` in
//! `sys/geom/vinum/geom_vinum_drive.c`) knows four such layouts: 32-bit (i386, powerpc) with
//! 4-byte config_length and timestamps, and 64-bit (amd64, sparc64) at the canonical offsets.
//! [`DriveHeader::parse`] reads all five into one [`DriveHeader`] and records which layout it
//! read in [`HeaderLayout`]; [`DriveHeader::to_bytes`] always writes the canonical layout, as
//! gvinum does when it next saves a drive it read in a legacy layout.

use thiserror::Error;

/// Drive byte where the header starts (`GV_HDR_OFFSET`).
pub const HEADER_OFFSET: u64 = 4096;

/// Magic of an active drive in the canonical layout: ASCII `VINUM-1\0` read big-endian.
pub const MAGIC_ACTIVE: u64 = 0x5649_4E55_4D2D_3100;
/// Magic gvinum writes when a drive is removed (`rm drive`): ASCII `VINUM--\0`.
pub const MAGIC_REMOVED: u64 = 0x5649_4E55_4D2D_2D00;
/// Classic vinum's magic as the bytes `IN VINO\0` read big-endian (a little-endian host wrote it).
pub const LEGACY_MAGIC_ACTIVE: u64 = 0x494E_2056_494E_4F00;
/// Classic vinum's removed-drive magic, the bytes `NO VINO\0` read big-endian.
pub const LEGACY_MAGIC_REMOVED: u64 = 0x4E4F_2056_494E_4F00;

/// Length of the sysname (host name) field.
pub const SYSNAME_FIELD_LEN: usize = 32;
/// Length of the drive name field (`GV_MAXDRIVENAME`).
pub const DRIVE_NAME_FIELD_LEN: usize = 32;
/// Bytes a header parse needs: the canonical and 64-bit layouts use 120, and the 32-bit
/// layout test looks at bytes 100..120 too.
pub const HEADER_BYTES_READ: usize = 120;
/// The value gvinum always stores in config_length (`GV_CFG_LEN`).
pub const CANONICAL_CONFIG_LENGTH: u64 = 65536;

/// A `struct timeval` as gvinum stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timeval {
    /// Seconds since the Unix epoch.
    pub seconds: u64,
    /// Microseconds within the second.
    pub microseconds: u64,
}

impl Timeval {
    /// A timestamp from its two fields.
    pub const fn new(seconds: u64, microseconds: u64) -> Self {
        Timeval { seconds, microseconds }
    }

    /// One microsecond later.
    pub fn next(self) -> Timeval {
        if self.microseconds >= 999_999 {
            Timeval { seconds: self.seconds + 1, microseconds: 0 }
        } else {
            Timeval { seconds: self.seconds, microseconds: self.microseconds + 1 }
        }
    }

    /// Whether this `last_update` carries uraid's unclean mark: microseconds ending in
    /// [`UNCLEAN_MARK`] (see there).
    pub fn marks_unclean(self) -> bool {
        self.microseconds % 1000 == UNCLEAN_MARK
    }

    /// The `last_update` of a save made at `now`: later than `newest` (the newest on any drive,
    /// since the newest wins), and carrying the unclean mark exactly when `unclean`. At most a
    /// millisecond past the later of the two.
    pub fn save_stamp(now: Timeval, newest: Timeval, unclean: bool) -> Timeval {
        let t = now.max(newest.next());
        if unclean {
            // The same millisecond, its last microsecond: never earlier than `t`.
            Timeval { seconds: t.seconds, microseconds: t.microseconds - t.microseconds % 1000 + UNCLEAN_MARK }
        } else if t.marks_unclean() {
            t.next()
        } else {
            t
        }
    }
}

/// uraid's mark, in a save's `last_update`, of a volume whose raid5 parity may not match its
/// data (writes were in flight when the save was made): the microseconds end in 999.
///
/// gvinum's configuration has no clean flag and rejects any keyword it does not know, so the
/// only place a mark can go unseen by FreeBSD is the time stamp, whose microseconds FreeBSD uses
/// only to tell which drive's configuration is newest. A single raid5 plex is saved with the
/// mark before its first write and without it once idle and flushed; a volume found marked is
/// made consistent (every row's parity from its data) before it is saved clean. A drive last
/// saved by FreeBSD carries the mark by chance one time in a thousand, which costs one parity
/// rewrite. Saves made by the command line keep the mark the drives carry.
pub const UNCLEAN_MARK: u64 = 999;

/// Whether the magic marks a drive in use or one removed from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderStatus {
    /// `VINUM-1` / `IN VINO`: the kernel tastes this drive.
    Active,
    /// `VINUM--` / `NO VINO`: gvinum's reader refuses the drive (only active magics pass).
    Removed,
}

/// Which of the five on-disk header layouts a header was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderLayout {
    /// Current gvinum: big-endian, 64-bit fields at the offsets in the module table.
    Canonical,
    /// Classic vinum on i386: little-endian, 4-byte config_length and timestamps.
    LegacyI386,
    /// Classic vinum on amd64: little-endian, canonical offsets.
    LegacyAmd64,
    /// Classic vinum on 32-bit powerpc: big-endian, the i386 offsets.
    LegacyPowerPc,
    /// Classic vinum on sparc64: big-endian, canonical offsets.
    LegacySparc64,
}

impl HeaderLayout {
    /// True for the four classic vinum layouts.
    pub fn is_legacy(self) -> bool {
        self != HeaderLayout::Canonical
    }

    fn big_endian(self) -> bool {
        matches!(self, HeaderLayout::Canonical | HeaderLayout::LegacyPowerPc | HeaderLayout::LegacySparc64)
    }

    fn is_32_bit(self) -> bool {
        matches!(self, HeaderLayout::LegacyI386 | HeaderLayout::LegacyPowerPc)
    }
}

/// The label part of the header (`struct gv_label`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DriveLabel {
    /// Host name of the system that created the drive (at most 32 bytes).
    pub sysname: String,
    /// The drive's name: subdisks refer to drives by this name, not by device path.
    pub name: String,
    /// When the drive was created.
    pub date_of_birth: Timeval,
    /// When the configuration on this drive was last saved; the newest drive's states win.
    pub last_update: Timeval,
    /// Total size in bytes including the metadata. gvinum never fills it (0); classic vinum
    /// stored the media size. Nothing should depend on it.
    pub drive_size: u64,
}

/// A parsed gvinum drive header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DriveHeader {
    /// Active or removed drive.
    pub status: HeaderStatus,
    /// The layout the header was read from; [`DriveHeader::to_bytes`] writes canonical.
    pub layout: HeaderLayout,
    /// Length of each configuration copy as recorded (gvinum writes 65536 and reads 65536
    /// whatever this says).
    pub config_length: u64,
    /// Name, host name and timestamps.
    pub label: DriveLabel,
}

/// What is wrong with the bytes given as a drive header.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// Fewer bytes than a header parse reads.
    #[error("truncated gvinum header: needs {needed} bytes from drive byte {HEADER_OFFSET}, got {got}")]
    Truncated { needed: usize, got: usize },
    /// The magic is none of gvinum's or classic vinum's.
    #[error(
        "no gvinum drive header: magic 0x{magic:016x} at drive byte {HEADER_OFFSET} is neither \
         VINUM-1/VINUM-- nor classic IN VINO/NO VINO"
    )]
    NotVinum { magic: u64 },
    /// A name field holds bytes that are not UTF-8 text.
    #[error("gvinum header {field} at drive byte {offset} is not UTF-8 text")]
    NameNotText { field: &'static str, offset: u64 },
    /// A name is too long for its fixed field (writing).
    #[error("gvinum header {field} {value:?} is {len} bytes; the field holds at most {max}")]
    NameTooLong { field: &'static str, value: String, len: usize, max: usize },
    /// A name contains a NUL byte, which would end it early on disk (writing).
    #[error("gvinum header {field} {value:?} contains a NUL byte")]
    NameHasNul { field: &'static str, value: String },
}

impl DriveHeader {
    /// The header gvinum gives a new drive (`gv_create_drive`): active, canonical, config
    /// length 65536, drive_size 0, last_update 0 until the first save sets it.
    pub fn new(name: &str, sysname: &str, date_of_birth: Timeval) -> Self {
        DriveHeader {
            status: HeaderStatus::Active,
            layout: HeaderLayout::Canonical,
            config_length: CANONICAL_CONFIG_LENGTH,
            label: DriveLabel {
                sysname: sysname.to_string(),
                name: name.to_string(),
                date_of_birth,
                last_update: Timeval::default(),
                drive_size: 0,
            },
        }
    }

    /// The header a configuration save writes (`gv_save_config`): active, canonical, config
    /// length 65536, `last_update` the save's time; name, host name, date of birth and drive
    /// size kept. A classic drive is rewritten in canonical form so.
    pub fn saved_at(&self, now: Timeval) -> DriveHeader {
        let mut saved = self.clone();
        saved.status = HeaderStatus::Active;
        saved.layout = HeaderLayout::Canonical;
        saved.config_length = CANONICAL_CONFIG_LENGTH;
        saved.label.last_update = now;
        saved
    }

    /// True when the magic marks an active drive (the only kind the kernel tastes).
    pub fn is_active(&self) -> bool {
        self.status == HeaderStatus::Active
    }

    /// Parse a header from the bytes at drive byte 4096 (at least [`HEADER_BYTES_READ`]).
    ///
    /// Accepts the canonical layout and the four classic layouts, active or removed. The
    /// classic byte order is taken from the magic's bytes (`IN VINO\0` as written by a
    /// little-endian host, `\0ONIV NI` by a big-endian one); the kernel instead assumes its
    /// own byte order and so reads only its own platform's legacy headers. 32-bit versus
    /// 64-bit follows the kernel's heuristic. Values are not range-checked (the kernel does
    /// not check them either); names must be UTF-8.
    pub fn parse(bytes: &[u8]) -> Result<Self, HeaderError> {
        if bytes.len() < HEADER_BYTES_READ {
            return Err(HeaderError::Truncated { needed: HEADER_BYTES_READ, got: bytes.len() });
        }
        let magic_be = u64::from_be_bytes(bytes[0..8].try_into().expect("8 bytes"));
        let magic_le = u64::from_le_bytes(bytes[0..8].try_into().expect("8 bytes"));
        let (status, layout) = match (magic_be, magic_le) {
            (MAGIC_ACTIVE, _) => (HeaderStatus::Active, HeaderLayout::Canonical),
            (MAGIC_REMOVED, _) => (HeaderStatus::Removed, HeaderLayout::Canonical),
            (LEGACY_MAGIC_ACTIVE, _) => (HeaderStatus::Active, legacy_layout(bytes, false)),
            (LEGACY_MAGIC_REMOVED, _) => (HeaderStatus::Removed, legacy_layout(bytes, false)),
            (_, LEGACY_MAGIC_ACTIVE) => (HeaderStatus::Active, legacy_layout(bytes, true)),
            (_, LEGACY_MAGIC_REMOVED) => (HeaderStatus::Removed, legacy_layout(bytes, true)),
            _ => return Err(HeaderError::NotVinum { magic: magic_be }),
        };
        let fields = FieldReader { bytes, big_endian: layout.big_endian() };
        let header = if layout.is_32_bit() {
            DriveHeader {
                status,
                layout,
                config_length: fields.u32_at(8),
                label: DriveLabel {
                    sysname: name_field(bytes, 12, "sysname")?,
                    name: name_field(bytes, 44, "drive name")?,
                    date_of_birth: Timeval::new(fields.u32_at(76), fields.u32_at(80)),
                    last_update: Timeval::new(fields.u32_at(84), fields.u32_at(88)),
                    drive_size: fields.u64_at(92),
                },
            }
        } else {
            // Classic 64-bit hosts stored config_length as a 4-byte int followed by 4 bytes of
            // alignment padding; the kernel reads all 8, which only matters if the padding is
            // not zero. Only the int is read here.
            let config_length = if layout.is_legacy() { fields.u32_at(8) } else { fields.u64_at(8) };
            DriveHeader {
                status,
                layout,
                config_length,
                label: DriveLabel {
                    sysname: name_field(bytes, 16, "sysname")?,
                    name: name_field(bytes, 48, "drive name")?,
                    date_of_birth: Timeval::new(fields.u64_at(80), fields.u64_at(88)),
                    last_update: Timeval::new(fields.u64_at(96), fields.u64_at(104)),
                    drive_size: fields.u64_at(112),
                },
            }
        };
        Ok(header)
    }

    /// The 512-byte canonical header as `gv_write_header` lays it out: big-endian, zero
    /// after byte 120, magic by [`HeaderStatus`]. A canonical header whose name fields are
    /// zero-padded and whose bytes 120..512 are zero comes back byte for byte.
    pub fn to_bytes(&self) -> Result<[u8; 512], HeaderError> {
        let mut out = [0u8; 512];
        let magic = match self.status {
            HeaderStatus::Active => MAGIC_ACTIVE,
            HeaderStatus::Removed => MAGIC_REMOVED,
        };
        out[0..8].copy_from_slice(&magic.to_be_bytes());
        out[8..16].copy_from_slice(&self.config_length.to_be_bytes());
        put_name(&mut out[16..48], &self.label.sysname, "sysname")?;
        put_name(&mut out[48..80], &self.label.name, "drive name")?;
        let words = [
            self.label.date_of_birth.seconds,
            self.label.date_of_birth.microseconds,
            self.label.last_update.seconds,
            self.label.last_update.microseconds,
            self.label.drive_size,
        ];
        for (i, word) in words.iter().enumerate() {
            let at = 80 + 8 * i;
            out[at..at + 8].copy_from_slice(&word.to_be_bytes());
        }
        Ok(out)
    }
}

/// gvinum's choice between the 32-bit and 64-bit classic layouts (`gv_legacy_header_type`).
/// Only zero tests are made, so the byte order of the words read does not matter.
fn legacy_layout(bytes: &[u8], big_endian: bool) -> HeaderLayout {
    let (layout_32, layout_64) = if big_endian {
        (HeaderLayout::LegacyPowerPc, HeaderLayout::LegacySparc64)
    } else {
        (HeaderLayout::LegacyI386, HeaderLayout::LegacyAmd64)
    };
    // A non-empty 32-bit sysname starts at 12, inside the 64-bit config_length word.
    if bytes[12..16] != [0; 4] {
        return layout_32;
    }
    // A non-empty 64-bit sysname starts at 16.
    if bytes[16] != 0 {
        return layout_64;
    }
    // The 32-bit structure ends at 100.
    if bytes[100..120].iter().any(|&b| b != 0) {
        return layout_32;
    }
    // 32-bit last_update seconds sit where the 64-bit date_of_birth microseconds' high half is.
    if bytes[84..88] == [0; 4] {
        layout_64
    } else {
        layout_32
    }
}

struct FieldReader<'a> {
    bytes: &'a [u8],
    big_endian: bool,
}

impl FieldReader<'_> {
    fn u32_at(&self, at: usize) -> u64 {
        let raw: [u8; 4] = self.bytes[at..at + 4].try_into().expect("4 bytes");
        u64::from(if self.big_endian { u32::from_be_bytes(raw) } else { u32::from_le_bytes(raw) })
    }

    fn u64_at(&self, at: usize) -> u64 {
        let raw: [u8; 8] = self.bytes[at..at + 8].try_into().expect("8 bytes");
        if self.big_endian {
            u64::from_be_bytes(raw)
        } else {
            u64::from_le_bytes(raw)
        }
    }
}

/// A 32-byte name field: the text before the first NUL, or all 32 bytes if there is none.
fn name_field(bytes: &[u8], at: usize, field: &'static str) -> Result<String, HeaderError> {
    let raw = &bytes[at..at + 32];
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    std::str::from_utf8(&raw[..end])
        .map(str::to_string)
        .map_err(|_| HeaderError::NameNotText { field, offset: HEADER_OFFSET + at as u64 })
}

fn put_name(field: &mut [u8], value: &str, name: &'static str) -> Result<(), HeaderError> {
    if value.as_bytes().contains(&0) {
        return Err(HeaderError::NameHasNul { field: name, value: value.to_string() });
    }
    if value.len() > field.len() {
        return Err(HeaderError::NameTooLong {
            field: name,
            value: value.to_string(),
            len: value.len(),
            max: field.len(),
        });
    }
    field[..value.len()].copy_from_slice(value.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DriveHeader {
        let mut h = DriveHeader::new("gvinumdrive0", "fbsd.example.org", Timeval::new(1_200_000_000, 123_456));
        h.label.last_update = Timeval::new(1_200_000_100, 654_321);
        h
    }

    #[test]
    fn a_save_stamp_is_newer_than_every_drive_and_carries_the_mark_only_when_asked() {
        let now = Timeval::new(100, 500_000);
        for newest in
            [Timeval::new(90, 0), Timeval::new(100, 499_999), Timeval::new(100, 700_998), Timeval::new(101, 999_999)]
        {
            for unclean in [false, true] {
                let t = Timeval::save_stamp(now, newest, unclean);
                assert!(t > newest && t >= now, "{t:?} after {newest:?}");
                assert_eq!(t.marks_unclean(), unclean, "{t:?}");
                assert!(t.microseconds < 1_000_000);
                let floor = now.max(newest.next());
                assert!((t.seconds - floor.seconds) * 1_000_000 + t.microseconds - floor.microseconds <= 1000);
            }
        }
        // A clean stamp that would land on the mark moves one microsecond on.
        assert_eq!(Timeval::save_stamp(Timeval::new(5, 1999), Timeval::default(), false), Timeval::new(5, 2000));
    }

    #[test]
    fn canonical_header_is_laid_out_as_gv_write_header_does() {
        let bytes = sample().to_bytes().unwrap();
        assert_eq!(&bytes[0..8], b"VINUM-1\0");
        assert_eq!(u64::from_be_bytes(bytes[8..16].try_into().unwrap()), 65536);
        assert_eq!(&bytes[16..32], b"fbsd.example.org");
        assert!(bytes[32..48].iter().all(|&b| b == 0));
        assert_eq!(&bytes[48..60], b"gvinumdrive0");
        assert_eq!(u64::from_be_bytes(bytes[80..88].try_into().unwrap()), 1_200_000_000);
        assert_eq!(u64::from_be_bytes(bytes[88..96].try_into().unwrap()), 123_456);
        assert_eq!(u64::from_be_bytes(bytes[96..104].try_into().unwrap()), 1_200_000_100);
        assert_eq!(u64::from_be_bytes(bytes[104..112].try_into().unwrap()), 654_321);
        assert_eq!(u64::from_be_bytes(bytes[112..120].try_into().unwrap()), 0);
        assert!(bytes[120..].iter().all(|&b| b == 0));
    }

    #[test]
    fn canonical_header_round_trips_byte_for_byte() {
        let bytes = sample().to_bytes().unwrap();
        let parsed = DriveHeader::parse(&bytes).unwrap();
        assert_eq!(parsed, sample());
        assert_eq!(parsed.to_bytes().unwrap(), bytes);
    }

    #[test]
    fn removed_drive_magic_is_read_and_written_back() {
        let mut h = sample();
        h.status = HeaderStatus::Removed;
        let bytes = h.to_bytes().unwrap();
        assert_eq!(&bytes[0..8], b"VINUM--\0");
        let parsed = DriveHeader::parse(&bytes).unwrap();
        assert!(!parsed.is_active());
        assert_eq!(parsed, h);
    }

    /// A classic header as a 32-bit host laid it out (i386 little-endian, powerpc big).
    fn legacy_32(big_endian: bool, removed: bool) -> Vec<u8> {
        let mut b = vec![0u8; 512];
        let magic: &[u8; 8] = match (big_endian, removed) {
            (false, false) => b"IN VINO\0",
            (false, true) => b"NO VINO\0",
            (true, false) => b"\0ONIV NI",
            (true, true) => b"\0ONIV ON",
        };
        b[0..8].copy_from_slice(magic);
        let put32 = |b: &mut Vec<u8>, at: usize, v: u32| {
            let raw = if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
            b[at..at + 4].copy_from_slice(&raw);
        };
        put32(&mut b, 8, 262_144);
        b[12..18].copy_from_slice(b"oldbox");
        b[44..50].copy_from_slice(b"drive1");
        put32(&mut b, 76, 990_000_000);
        put32(&mut b, 80, 5);
        put32(&mut b, 84, 990_000_500);
        put32(&mut b, 88, 6);
        let size = if big_endian { 4_000_000_000u64.to_be_bytes() } else { 4_000_000_000u64.to_le_bytes() };
        b[92..100].copy_from_slice(&size);
        b
    }

    /// A classic header as a 64-bit host laid it out (amd64 little-endian, sparc64 big).
    fn legacy_64(big_endian: bool) -> Vec<u8> {
        let mut b = vec![0u8; 512];
        b[0..8].copy_from_slice(if big_endian { b"\0ONIV NI" } else { b"IN VINO\0" });
        let put = |b: &mut Vec<u8>, at: usize, v: u64| {
            let raw = if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
            b[at..at + 8].copy_from_slice(&raw);
        };
        let cfg = if big_endian { 262_144u32.to_be_bytes() } else { 262_144u32.to_le_bytes() };
        b[8..12].copy_from_slice(&cfg);
        b[16..22].copy_from_slice(b"newbox");
        b[48..54].copy_from_slice(b"drive2");
        put(&mut b, 80, 1_100_000_000);
        put(&mut b, 88, 7);
        put(&mut b, 96, 1_100_000_900);
        put(&mut b, 104, 8);
        put(&mut b, 112, 8_000_000_000);
        b
    }

    #[test]
    fn the_four_classic_layouts_are_told_apart_and_read() {
        for (big, layout) in [(false, HeaderLayout::LegacyI386), (true, HeaderLayout::LegacyPowerPc)] {
            let h = DriveHeader::parse(&legacy_32(big, false)).unwrap();
            assert_eq!(h.layout, layout);
            assert_eq!(h.status, HeaderStatus::Active);
            assert_eq!(h.config_length, 262_144);
            assert_eq!(h.label.sysname, "oldbox");
            assert_eq!(h.label.name, "drive1");
            assert_eq!(h.label.date_of_birth, Timeval::new(990_000_000, 5));
            assert_eq!(h.label.last_update, Timeval::new(990_000_500, 6));
            assert_eq!(h.label.drive_size, 4_000_000_000);
        }
        for (big, layout) in [(false, HeaderLayout::LegacyAmd64), (true, HeaderLayout::LegacySparc64)] {
            let h = DriveHeader::parse(&legacy_64(big)).unwrap();
            assert_eq!(h.layout, layout);
            assert_eq!(h.config_length, 262_144);
            assert_eq!(h.label.sysname, "newbox");
            assert_eq!(h.label.name, "drive2");
            assert_eq!(h.label.date_of_birth, Timeval::new(1_100_000_000, 7));
            assert_eq!(h.label.last_update, Timeval::new(1_100_000_900, 8));
            assert_eq!(h.label.drive_size, 8_000_000_000);
        }
    }

    #[test]
    fn classic_removed_drives_are_read_as_removed() {
        let h = DriveHeader::parse(&legacy_32(false, true)).unwrap();
        assert_eq!((h.status, h.layout), (HeaderStatus::Removed, HeaderLayout::LegacyI386));
        let h = DriveHeader::parse(&legacy_32(true, true)).unwrap();
        assert_eq!((h.status, h.layout), (HeaderStatus::Removed, HeaderLayout::LegacyPowerPc));
    }

    #[test]
    fn a_legacy_header_is_rewritten_canonical() {
        let h = DriveHeader::parse(&legacy_32(false, false)).unwrap();
        let bytes = h.to_bytes().unwrap();
        assert_eq!(&bytes[0..8], b"VINUM-1\0");
        let again = DriveHeader::parse(&bytes).unwrap();
        assert_eq!(again.layout, HeaderLayout::Canonical);
        assert_eq!(again.label, h.label);
    }

    #[test]
    fn the_32_bit_heuristic_falls_back_on_the_timestamp_word() {
        // Empty sysname and nothing past byte 100: the kernel looks at the word at 84, which
        // is the 32-bit last_update seconds.
        let mut b = legacy_32(false, false);
        b[12..44].fill(0);
        b[92..100].fill(0);
        assert_eq!(DriveHeader::parse(&b).unwrap().layout, HeaderLayout::LegacyI386);
        b[84..88].fill(0);
        assert_eq!(DriveHeader::parse(&b).unwrap().layout, HeaderLayout::LegacyAmd64);
    }

    #[test]
    fn foreign_blank_and_short_blocks_are_refused_with_the_reason() {
        let zeros = [0u8; 512];
        let err = DriveHeader::parse(&zeros).unwrap_err();
        assert_eq!(err, HeaderError::NotVinum { magic: 0 });
        assert!(err.to_string().contains("at drive byte 4096"), "{err}");
        let mut md = [0u8; 512];
        md[0..4].copy_from_slice(&0xa92b_4efcu32.to_le_bytes());
        assert!(matches!(DriveHeader::parse(&md), Err(HeaderError::NotVinum { .. })));
        let good = sample().to_bytes().unwrap();
        assert_eq!(DriveHeader::parse(&good[..119]), Err(HeaderError::Truncated { needed: 120, got: 119 }));
        assert!(DriveHeader::parse(&good[..120]).is_ok());
    }

    #[test]
    fn a_name_that_is_not_text_is_refused_with_its_offset() {
        let mut b = sample().to_bytes().unwrap();
        b[48] = 0xff;
        let err = DriveHeader::parse(&b).unwrap_err();
        assert_eq!(err, HeaderError::NameNotText { field: "drive name", offset: 4096 + 48 });
    }

    #[test]
    fn names_that_do_not_fit_are_refused_when_writing() {
        let mut h = sample();
        h.label.name = "x".repeat(33);
        assert!(matches!(h.to_bytes(), Err(HeaderError::NameTooLong { len: 33, max: 32, .. })));
        h.label.name = "a\0b".into();
        assert!(matches!(h.to_bytes(), Err(HeaderError::NameHasNul { .. })));
        // 32 bytes fill the field without a NUL; that is how it reads back too.
        h.label.name = "y".repeat(32);
        let bytes = h.to_bytes().unwrap();
        assert_eq!(DriveHeader::parse(&bytes).unwrap().label.name, "y".repeat(32));
    }
}
