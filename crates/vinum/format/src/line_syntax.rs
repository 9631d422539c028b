//! The keyword grammar of one object line, shared by the on-disk configuration text and
//! create descriptions (`gv_new_volume`, `gv_new_plex`, `gv_new_sd`, `gv_new_drive` in
//! `geom_vinum_share.c`):
//!
//! ```text
//! volume NAME [state STATE]
//! plex [name NAME] org concat|striped SIZE|raid5 SIZE [vol|volume NAME] [state STATE]
//! sd [name NAME] drive NAME [len|length SIZE] [driveoffset SIZE] [plex NAME] [plexoffset SIZE] [state STATE]
//! drive NAME device PATH [state STATE]
//! ```
//!
//! Keywords may come in any order. Where gvinum is lax this grammar is strict, so that a
//! damaged line is an error rather than a different configuration: an unknown state name is
//! an error (gvinum reads it as `down`), a keyword given twice is an error (gvinum keeps the
//! last), a second bare name on a volume or drive line is an error (gvinum keeps the last),
//! names longer than gvinum's fields are errors (gvinum cuts them), and sizes must be whole
//! 512-byte sectors (the text can only hold sectors).

use thiserror::Error;

use crate::drive_layout::{DATA_START, SECTOR_SIZE};
use crate::objects::{
    check_name, DriveState, NameProblem, ObjectKind, PlexOrganization, PlexState, SubdiskState, VolumeState,
};
use crate::tokens::{parse_size, SizeError, Token, TokenizeError};

/// What is wrong with one line of a configuration text or create description.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LineProblem {
    /// The line cannot be split into tokens.
    #[error(transparent)]
    Tokenize(#[from] TokenizeError),
    /// The first token names no kind of object.
    #[error("{token:?} starts no object line (expected volume, plex, sd or drive)")]
    UnknownObjectType { token: String },
    /// A kind of line that does not belong in this text (drive lines in the on-disk text).
    #[error("{object} lines are not part of the on-disk configuration")]
    NotOnDisk { object: ObjectKind },
    /// A keyword the object does not know.
    #[error("unknown {object} keyword {token:?} at column {column}")]
    UnknownKeyword { object: ObjectKind, token: String, column: usize },
    /// A keyword at the end of the line, without its value.
    #[error("{object} keyword {keyword:?} has no value")]
    MissingValue { object: ObjectKind, keyword: &'static str },
    /// A keyword given twice.
    #[error("{object} keyword {keyword:?} given twice (second at column {column})")]
    RepeatedKeyword { object: ObjectKind, keyword: &'static str, column: usize },
    /// A volume or drive line with two bare names.
    #[error("{object} line names {first:?} and {second:?}")]
    SecondName { object: ObjectKind, first: String, second: String },
    /// A required keyword is missing.
    #[error("{object} line has no {keyword:?}")]
    MissingKeyword { object: ObjectKind, keyword: &'static str },
    /// A name that is not allowed.
    #[error("{kind} name {name:?} {problem}")]
    BadName { kind: ObjectKind, name: String, problem: NameProblem },
    /// A size token that cannot be read.
    #[error("{keyword} {token:?}: {problem}")]
    BadSize { keyword: &'static str, token: String, problem: SizeError },
    /// A size that must not be negative.
    #[error("{keyword} {token:?} is negative")]
    NegativeSize { keyword: &'static str, token: String },
    /// A size that is not whole 512-byte sectors.
    #[error("{keyword} {token:?} is not a whole number of 512-byte sectors")]
    NotWholeSectors { keyword: &'static str, token: String },
    /// A striped or raid5 plex with stripe size 0.
    #[error("stripe size {token:?} is zero")]
    ZeroStripeSize { token: String },
    /// A subdisk length of 0 in the on-disk text (only create descriptions may autosize).
    #[error("len {token:?} is zero")]
    ZeroLength { token: String },
    /// A drive offset inside gvinum's metadata.
    #[error("driveoffset {token:?} is inside gvinum's metadata (subdisk data starts at byte {DATA_START})")]
    OffsetInMetadata { token: String },
    /// An organization gvinum does not know.
    #[error("unknown plex organization {token:?} (expected concat, striped or raid5)")]
    UnknownOrganization { token: String },
    /// A state name gvinum does not know for this kind of object.
    #[error("unknown {object} state {token:?}")]
    UnknownState { object: ObjectKind, token: String },
    /// A plex offset for a subdisk that names no plex (it could not be written back).
    #[error("sd has a plexoffset but no plex")]
    PlexOffsetWithoutPlex,
}

/// A volume line's fields.
#[derive(Debug, Default)]
pub(crate) struct VolumeLine {
    pub name: Option<String>,
    pub state: Option<VolumeState>,
}

/// A plex line's fields.
#[derive(Debug, Default)]
pub(crate) struct PlexLine {
    pub name: Option<String>,
    pub organization: Option<PlexOrganization>,
    pub volume: Option<String>,
    pub state: Option<PlexState>,
}

/// A subdisk line's fields; `length` keeps its sign (create descriptions autosize on ≤ 0).
#[derive(Debug, Default)]
pub(crate) struct SubdiskLine {
    pub name: Option<String>,
    pub drive: Option<String>,
    pub plex: Option<String>,
    pub length: Option<(i64, String)>,
    pub drive_offset: Option<u64>,
    pub plex_offset: Option<u64>,
    pub state: Option<SubdiskState>,
}

/// A drive line's fields (create descriptions only).
#[derive(Debug, Default)]
pub(crate) struct DriveLine {
    pub name: Option<String>,
    pub device: Option<String>,
    pub state: Option<DriveState>,
}

/// One parsed object line.
#[derive(Debug)]
pub(crate) enum ObjectLine {
    Volume(VolumeLine),
    Plex(PlexLine),
    Subdisk(SubdiskLine),
    Drive(DriveLine),
}

/// Parse one non-empty tokenized line.
pub(crate) fn parse_object_line(tokens: &[Token<'_>]) -> Result<ObjectLine, LineProblem> {
    let (first, rest) = tokens.split_first().expect("a line with tokens");
    let mut cursor = Cursor { rest, object: ObjectKind::Volume };
    match first.text {
        "volume" => {
            cursor.object = ObjectKind::Volume;
            parse_volume(&mut cursor).map(ObjectLine::Volume)
        }
        "plex" => {
            cursor.object = ObjectKind::Plex;
            parse_plex(&mut cursor).map(ObjectLine::Plex)
        }
        "sd" => {
            cursor.object = ObjectKind::Subdisk;
            parse_subdisk(&mut cursor).map(ObjectLine::Subdisk)
        }
        "drive" => {
            cursor.object = ObjectKind::Drive;
            parse_drive(&mut cursor).map(ObjectLine::Drive)
        }
        other => Err(LineProblem::UnknownObjectType { token: other.to_string() }),
    }
}

struct Cursor<'t, 'a> {
    rest: &'t [Token<'a>],
    object: ObjectKind,
}

impl<'a> Cursor<'_, 'a> {
    fn next(&mut self) -> Option<Token<'a>> {
        let (first, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(*first)
    }

    fn value(&mut self, keyword: &'static str) -> Result<Token<'a>, LineProblem> {
        self.next().ok_or(LineProblem::MissingValue { object: self.object, keyword })
    }

    fn name_value(&mut self, keyword: &'static str, kind: ObjectKind) -> Result<String, LineProblem> {
        let token = self.value(keyword)?;
        named(kind, token.text)
    }
}

fn named(kind: ObjectKind, text: &str) -> Result<String, LineProblem> {
    check_name(kind, text).map_err(|problem| LineProblem::BadName { kind, name: text.to_string(), problem })?;
    Ok(text.to_string())
}

fn set_once<T>(
    slot: &mut Option<T>,
    value: T,
    object: ObjectKind,
    keyword: &'static str,
    column: usize,
) -> Result<(), LineProblem> {
    if slot.is_some() {
        return Err(LineProblem::RepeatedKeyword { object, keyword, column });
    }
    *slot = Some(value);
    Ok(())
}

fn state<S>(cursor: &mut Cursor<'_, '_>, from_name: impl Fn(&str) -> Option<S>) -> Result<S, LineProblem> {
    let token = cursor.value("state")?;
    from_name(token.text).ok_or(LineProblem::UnknownState { object: cursor.object, token: token.text.to_string() })
}

fn size(keyword: &'static str, token: &Token<'_>) -> Result<i64, LineProblem> {
    let bytes = parse_size(token.text).map_err(|problem| LineProblem::BadSize {
        keyword,
        token: token.text.to_string(),
        problem,
    })?;
    if bytes % SECTOR_SIZE as i64 != 0 {
        return Err(LineProblem::NotWholeSectors { keyword, token: token.text.to_string() });
    }
    Ok(bytes)
}

fn unsigned_size(keyword: &'static str, token: &Token<'_>) -> Result<u64, LineProblem> {
    let bytes = size(keyword, token)?;
    u64::try_from(bytes).map_err(|_| LineProblem::NegativeSize { keyword, token: token.text.to_string() })
}

fn parse_volume(cursor: &mut Cursor<'_, '_>) -> Result<VolumeLine, LineProblem> {
    let mut line = VolumeLine::default();
    while let Some(token) = cursor.next() {
        if token.text == "state" {
            let value = state(cursor, VolumeState::from_name)?;
            set_once(&mut line.state, value, cursor.object, "state", token.column)?;
        } else {
            let name = named(ObjectKind::Volume, token.text)?;
            if let Some(first) = &line.name {
                return Err(LineProblem::SecondName { object: cursor.object, first: first.clone(), second: name });
            }
            line.name = Some(name);
        }
    }
    Ok(line)
}

fn parse_plex(cursor: &mut Cursor<'_, '_>) -> Result<PlexLine, LineProblem> {
    let mut line = PlexLine::default();
    let object = cursor.object;
    while let Some(token) = cursor.next() {
        match token.text {
            "name" => {
                let name = cursor.name_value("name", ObjectKind::Plex)?;
                set_once(&mut line.name, name, object, "name", token.column)?;
            }
            "org" => {
                let org = cursor.value("org")?;
                let organization = match org.text {
                    "concat" => PlexOrganization::Concat,
                    "striped" | "raid5" => {
                        let size_token = cursor.value("org")?;
                        let stripe_size = size("stripe size", &size_token)?;
                        if stripe_size == 0 {
                            return Err(LineProblem::ZeroStripeSize { token: size_token.text.to_string() });
                        }
                        let stripe_size = u64::try_from(stripe_size).map_err(|_| LineProblem::NegativeSize {
                            keyword: "stripe size",
                            token: size_token.text.to_string(),
                        })?;
                        if org.text == "striped" {
                            PlexOrganization::Striped { stripe_size }
                        } else {
                            PlexOrganization::Raid5 { stripe_size }
                        }
                    }
                    other => return Err(LineProblem::UnknownOrganization { token: other.to_string() }),
                };
                set_once(&mut line.organization, organization, object, "org", token.column)?;
            }
            "vol" | "volume" => {
                let volume = cursor.name_value("vol", ObjectKind::Volume)?;
                set_once(&mut line.volume, volume, object, "vol", token.column)?;
            }
            "state" => {
                let value = state(cursor, PlexState::from_name)?;
                set_once(&mut line.state, value, object, "state", token.column)?;
            }
            other => {
                return Err(LineProblem::UnknownKeyword { object, token: other.to_string(), column: token.column })
            }
        }
    }
    Ok(line)
}

fn parse_subdisk(cursor: &mut Cursor<'_, '_>) -> Result<SubdiskLine, LineProblem> {
    let mut line = SubdiskLine::default();
    let object = cursor.object;
    while let Some(token) = cursor.next() {
        match token.text {
            "name" => {
                let name = cursor.name_value("name", ObjectKind::Subdisk)?;
                set_once(&mut line.name, name, object, "name", token.column)?;
            }
            "drive" => {
                let drive = cursor.name_value("drive", ObjectKind::Drive)?;
                set_once(&mut line.drive, drive, object, "drive", token.column)?;
            }
            "plex" => {
                let plex = cursor.name_value("plex", ObjectKind::Plex)?;
                set_once(&mut line.plex, plex, object, "plex", token.column)?;
            }
            "state" => {
                let value = state(cursor, SubdiskState::from_name)?;
                set_once(&mut line.state, value, object, "state", token.column)?;
            }
            "len" | "length" => {
                let value = cursor.value("len")?;
                let bytes = size("len", &value)?;
                set_once(&mut line.length, (bytes, value.text.to_string()), object, "len", token.column)?;
            }
            "driveoffset" => {
                let value = cursor.value("driveoffset")?;
                let bytes = unsigned_size("driveoffset", &value)?;
                if bytes < DATA_START {
                    return Err(LineProblem::OffsetInMetadata { token: value.text.to_string() });
                }
                set_once(&mut line.drive_offset, bytes, object, "driveoffset", token.column)?;
            }
            "plexoffset" => {
                let value = cursor.value("plexoffset")?;
                let bytes = unsigned_size("plexoffset", &value)?;
                set_once(&mut line.plex_offset, bytes, object, "plexoffset", token.column)?;
            }
            other => {
                return Err(LineProblem::UnknownKeyword { object, token: other.to_string(), column: token.column })
            }
        }
    }
    if line.drive.is_none() {
        return Err(LineProblem::MissingKeyword { object, keyword: "drive" });
    }
    Ok(line)
}

fn parse_drive(cursor: &mut Cursor<'_, '_>) -> Result<DriveLine, LineProblem> {
    let mut line = DriveLine::default();
    let object = cursor.object;
    while let Some(token) = cursor.next() {
        match token.text {
            "state" => {
                let value = state(cursor, DriveState::from_name)?;
                set_once(&mut line.state, value, object, "state", token.column)?;
            }
            "device" => {
                let value = cursor.value("device")?;
                let device = value.text.strip_prefix("/dev/").unwrap_or(value.text);
                if device.is_empty() {
                    return Err(LineProblem::MissingValue { object, keyword: "device" });
                }
                set_once(&mut line.device, device.to_string(), object, "device", token.column)?;
            }
            _ => {
                let name = named(ObjectKind::Drive, token.text)?;
                if let Some(first) = &line.name {
                    return Err(LineProblem::SecondName { object, first: first.clone(), second: name });
                }
                line.name = Some(name);
            }
        }
    }
    if line.device.is_none() {
        return Err(LineProblem::MissingKeyword { object, keyword: "device" });
    }
    Ok(line)
}
