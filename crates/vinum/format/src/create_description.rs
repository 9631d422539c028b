//! Create descriptions: the files `gvinum create` reads (`gvinum_create` in
//! `sbin/gvinum/gvinum.c`), in the same line grammar as the on-disk text plus `drive` lines,
//! with what may be left out filled in as gvinum fills it in:
//!
//! - a plex without `name` is called `<volume>.p<N>` after the volume line above it, N
//!   counting such unnamed plexes of that volume from 0; without `vol` it joins that volume;
//! - a subdisk without `name` is called `<plex>.s<N>` after the plex line above it, N
//!   counting such unnamed subdisks of that plex from 0; without `plex` it joins that plex;
//! - a subdisk without `len` (or with `len` 0 or negative) takes the largest free extent on
//!   its drive, without `driveoffset` the first fitting one, without `plexoffset` the next
//!   place in its plex. These are decided when the objects are placed
//!   ([`crate::placement`]), so they stay `None` here.
//!
//! `gvinum` skips lines it cannot split into tokens and refuses the whole file if any object
//! line is malformed; here every such line is an error naming its line. A plex or subdisk
//! that needs a default name before any volume or plex line is an error (gvinum would use
//! an uninitialised buffer).

use thiserror::Error;

use crate::line_syntax::{parse_object_line, LineProblem, ObjectLine};
use crate::objects::{
    plex_name, subdisk_name, Drive, DriveState, ObjectKind, Plex, PlexState, SubdiskState, Volume, VolumeState,
};
use crate::tokens::{tokenize, Blanks};

/// A subdisk as a create description gives it: what is left out is decided at placement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubdiskRequest {
    /// The subdisk's name, given or generated.
    pub name: String,
    /// The drive to put it on.
    pub drive: String,
    /// The plex it joins, given or the one above it.
    pub plex: Option<String>,
    /// Length in bytes; `None` to take the largest free extent on the drive.
    pub length: Option<u64>,
    /// Drive offset in bytes; `None` for the first free extent that fits.
    pub drive_offset: Option<u64>,
    /// Plex offset in bytes; `None` for the next place in the plex.
    pub plex_offset: Option<u64>,
    /// A state, if the description sets one.
    pub state: Option<SubdiskState>,
}

/// A parsed create description, objects in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CreateDescription {
    /// `drive NAME device PATH` lines (device without `/dev/`).
    pub drives: Vec<Drive>,
    /// Volume lines (state `down` unless given, as gvinum's zeroed objects start).
    pub volumes: Vec<Volume>,
    /// Plex lines with default names and volumes filled in.
    pub plexes: Vec<Plex>,
    /// Subdisk lines with default names and plexes filled in.
    pub subdisks: Vec<SubdiskRequest>,
}

/// What is wrong with a create description.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CreateDescriptionError {
    /// A line that cannot be read.
    #[error("line {line}: {problem}")]
    Line { line: usize, problem: LineProblem },
    /// A plex or subdisk without a name before any line its default name would come from.
    #[error("line {line}: unnamed {object} with no {parent} line above it to name it after")]
    NoParentForDefaultName { line: usize, object: ObjectKind, parent: ObjectKind },
}

/// Read a create description.
pub fn parse_create_description(text: &str) -> Result<CreateDescription, CreateDescriptionError> {
    let mut description = CreateDescription::default();
    let mut current_volume: Option<String> = None;
    let mut current_plex: Option<String> = None;
    let mut unnamed_plexes = 0usize;
    let mut unnamed_subdisks = 0usize;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let at_line = |problem: LineProblem| CreateDescriptionError::Line { line: number, problem };
        let tokens = tokenize(line, Blanks::Command).map_err(|e| at_line(e.into()))?;
        if tokens.is_empty() {
            continue;
        }
        match parse_object_line(&tokens).map_err(at_line)? {
            ObjectLine::Drive(d) => description.drives.push(Drive {
                name: d.name.ok_or_else(|| missing_name(number, ObjectKind::Drive))?,
                device: d.device,
                state: d.state.unwrap_or(DriveState::Down),
            }),
            ObjectLine::Volume(v) => {
                let name = v.name.ok_or_else(|| missing_name(number, ObjectKind::Volume))?;
                current_volume = Some(name.clone());
                unnamed_plexes = 0;
                description.volumes.push(Volume { name, state: v.state.unwrap_or(VolumeState::Down) });
            }
            ObjectLine::Plex(p) => {
                let name = match p.name {
                    Some(name) => name,
                    None => {
                        let volume = current_volume.as_deref().ok_or(no_parent(number, ObjectKind::Plex))?;
                        unnamed_plexes += 1;
                        generated(number, ObjectKind::Plex, plex_name(volume, unnamed_plexes - 1))?
                    }
                };
                let organization = p.organization.ok_or(CreateDescriptionError::Line {
                    line: number,
                    problem: LineProblem::MissingKeyword { object: ObjectKind::Plex, keyword: "org" },
                })?;
                current_plex = Some(name.clone());
                unnamed_subdisks = 0;
                description.plexes.push(Plex {
                    name,
                    organization,
                    volume: p.volume.or_else(|| current_volume.clone()),
                    state: p.state.unwrap_or(PlexState::Down),
                });
            }
            ObjectLine::Subdisk(s) => {
                let name = match s.name {
                    Some(name) => name,
                    None => {
                        let plex = current_plex.as_deref().ok_or(no_parent(number, ObjectKind::Subdisk))?;
                        unnamed_subdisks += 1;
                        generated(number, ObjectKind::Subdisk, subdisk_name(plex, unnamed_subdisks - 1))?
                    }
                };
                description.subdisks.push(SubdiskRequest {
                    name,
                    drive: s.drive.expect("the grammar requires a drive"),
                    plex: s.plex.or_else(|| current_plex.clone()),
                    length: s.length.and_then(|(bytes, _)| u64::try_from(bytes).ok()).filter(|&b| b > 0),
                    drive_offset: s.drive_offset,
                    plex_offset: s.plex_offset,
                    state: s.state,
                });
            }
        }
    }
    Ok(description)
}

fn missing_name(line: usize, object: ObjectKind) -> CreateDescriptionError {
    CreateDescriptionError::Line { line, problem: LineProblem::MissingKeyword { object, keyword: "name" } }
}

fn no_parent(line: usize, object: ObjectKind) -> CreateDescriptionError {
    let parent = if object == ObjectKind::Plex { ObjectKind::Volume } else { ObjectKind::Plex };
    CreateDescriptionError::NoParentForDefaultName { line, object, parent }
}

/// A generated name must fit gvinum's field like a given one (gvinum would cut it).
fn generated(line: usize, kind: ObjectKind, name: String) -> Result<String, CreateDescriptionError> {
    crate::objects::check_name(kind, &name)
        .map_err(|problem| CreateDescriptionError::Line {
            line,
            problem: LineProblem::BadName { kind, name: name.clone(), problem },
        })
        .map(|()| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drive_layout::DATA_START;
    use crate::objects::PlexOrganization;

    #[test]
    fn a_mirror_description_gets_gvinums_default_names() {
        let text = "drive a device /dev/ada1\n\
                    drive b device ada2 state up\n\
                    volume mirror\n\
                    \x20 plex org concat\n\
                    \x20   sd length 512m drive a\n\
                    \x20 plex org striped 256k\n\
                    \x20   sd length 0 drive b\r\n\
                    \x20   sd drive a driveoffset 265s plexoffset 256k name custom\n\
                    \x20   sd drive b\n";
        let d = parse_create_description(text).unwrap();
        assert_eq!(
            d.drives,
            vec![
                Drive { name: "a".into(), device: Some("ada1".into()), state: DriveState::Down },
                Drive { name: "b".into(), device: Some("ada2".into()), state: DriveState::Up },
            ]
        );
        let plexes: Vec<(&str, Option<&str>)> =
            d.plexes.iter().map(|p| (p.name.as_str(), p.volume.as_deref())).collect();
        assert_eq!(plexes, [("mirror.p0", Some("mirror")), ("mirror.p1", Some("mirror"))]);
        assert_eq!(d.plexes[1].organization, PlexOrganization::Striped { stripe_size: 262_144 });
        let sds: Vec<(&str, Option<&str>, Option<u64>)> =
            d.subdisks.iter().map(|s| (s.name.as_str(), s.plex.as_deref(), s.length)).collect();
        assert_eq!(
            sds,
            [
                ("mirror.p0.s0", Some("mirror.p0"), Some(512 << 20)),
                ("mirror.p1.s0", Some("mirror.p1"), None),
                ("custom", Some("mirror.p1"), None),
                ("mirror.p1.s1", Some("mirror.p1"), None),
            ]
        );
        assert_eq!(d.subdisks[2].drive_offset, Some(DATA_START));
        assert_eq!(d.subdisks[2].plex_offset, Some(262_144));
    }

    #[test]
    fn explicit_names_do_not_advance_the_counters() {
        let text = "volume v\nplex name first org concat\nplex org concat\nsd drive d\n";
        let d = parse_create_description(text).unwrap();
        assert_eq!(d.plexes[1].name, "v.p0");
        assert_eq!(d.subdisks[0].name, "v.p0.s0");
    }

    #[test]
    fn default_names_need_a_line_above() {
        assert_eq!(
            parse_create_description("plex org concat\n"),
            Err(CreateDescriptionError::NoParentForDefaultName {
                line: 1,
                object: ObjectKind::Plex,
                parent: ObjectKind::Volume
            })
        );
        assert_eq!(
            parse_create_description("volume v\nsd drive d\n"),
            Err(CreateDescriptionError::NoParentForDefaultName {
                line: 2,
                object: ObjectKind::Subdisk,
                parent: ObjectKind::Plex
            })
        );
    }

    #[test]
    fn malformed_lines_name_their_line() {
        let err = parse_create_description("volume v\nplex org raid5\n").unwrap_err();
        assert_eq!(
            err,
            CreateDescriptionError::Line {
                line: 2,
                problem: LineProblem::MissingValue { object: ObjectKind::Plex, keyword: "org" }
            }
        );
        let err = parse_create_description("drive a\n").unwrap_err();
        assert!(err.to_string().starts_with("line 1: drive line has no \"device\""), "{err}");
        let long = format!("volume {}\nplex org concat\n", "v".repeat(61));
        assert!(matches!(
            parse_create_description(&long),
            Err(CreateDescriptionError::Line { line: 2, problem: LineProblem::BadName { .. } })
        ));
    }
}
