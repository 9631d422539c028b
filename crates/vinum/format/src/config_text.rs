//! The configuration text stored in each configuration copy: write it byte for byte as
//! gvinum does (`gv_format_config(sc, sb, 1, NULL)` in `geom_vinum_subr.c`) and read it back.
//!
//! gvinum writes all volumes, then all plexes, then all subdisks, one line each, every line
//! ended by a newline, sizes in 512-byte sectors with an `s` suffix, single blanks:
//!
//! ```text
//! volume NAME state STATE
//! plex name NAME org ORG [STRIPEs ]vol VOLUME state STATE
//! sd name NAME drive DRIVE len LENs driveoffset OFFs plex PLEX plexoffset OFFs state STATE
//! ```
//!
//! The stripe size appears for striped and raid5 plexes only; `vol VOLUME` only for a plex
//! in a volume (a detached plex therefore has two blanks before `state`); `plex …
//! plexoffset …` only for a subdisk in a plex. Drives are not listed: each describes itself
//! in its header.
//!
//! [`parse_config`] reads such a text strictly (see [`crate::line_syntax`]): every line must
//! be a volume, plex or subdisk line, every line must end with a newline (a text cut short
//! is refused), and the on-disk fields must be there. For any configuration that
//! [`format_config`] accepts, `parse_config(format_config(c)) == c`, and every text in
//! gvinum's form comes back unchanged from `format_config(parse_config(text))`.
//!
//! [`parse_config_as_kernel`] reads the way the kernel's `gv_parse_config` does: lines it
//! cannot split into tokens and lines of other kinds are skipped, and the first malformed
//! object line ends the reading, keeping what came before.

use std::fmt::Write as _;

use thiserror::Error;

use crate::drive_layout::{DATA_START, SECTOR_SIZE};
use crate::line_syntax::{parse_object_line, LineProblem, ObjectLine, PlexLine, SubdiskLine, VolumeLine};
use crate::objects::{
    check_name, ConfigProblem, ObjectKind, Plex, PlexMembership, PlexState, Subdisk, SubdiskState, VinumConfig, Volume,
    VolumeState, MAX_TEXT_SIZE,
};
use crate::tokens::{tokenize, Blanks};

/// What is wrong with a configuration text, or with a configuration to be written as one.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigTextError {
    /// A line that cannot be read.
    #[error("config line {line}: {problem}")]
    Line { line: usize, problem: LineProblem },
    /// The last line has no newline: gvinum ends every line with one, so the text was cut.
    #[error("config line {line} has no newline at its end (the text is cut short)")]
    UnterminatedLine { line: usize },
    /// A configuration that cannot be written so that it reads back the same.
    #[error("cannot write the config text: {0}")]
    Unwritable(ConfigProblem),
}

/// The on-disk configuration text of `config`, byte for byte as gvinum writes it.
///
/// Refused: names that are not single tokens or too long for gvinum's fields, sizes and
/// offsets that are not whole 512-byte sectors (gvinum would silently round them down),
/// zero stripe sizes and lengths, and subdisks inside the metadata area. Nothing else about
/// the configuration is checked; see [`VinumConfig::problems`].
pub fn format_config(config: &VinumConfig) -> Result<String, ConfigTextError> {
    if let Some(problem) = unwritable(config) {
        return Err(ConfigTextError::Unwritable(problem));
    }
    let sectors = |bytes: u64| bytes / SECTOR_SIZE;
    let mut out = String::new();
    for v in &config.volumes {
        writeln!(out, "volume {} state {}", v.name, v.state).expect("write to a String");
    }
    for p in &config.plexes {
        write!(out, "plex name {} org {} ", p.name, p.organization.name()).expect("write to a String");
        if let Some(stripe_size) = p.organization.stripe_size() {
            write!(out, "{}s ", sectors(stripe_size)).expect("write to a String");
        }
        if let Some(volume) = &p.volume {
            write!(out, "vol {volume}").expect("write to a String");
        }
        writeln!(out, " state {}", p.state).expect("write to a String");
    }
    for s in &config.subdisks {
        write!(
            out,
            "sd name {} drive {} len {}s driveoffset {}s",
            s.name,
            s.drive,
            sectors(s.length),
            sectors(s.drive_offset)
        )
        .expect("write to a String");
        if let Some(m) = &s.membership {
            write!(out, " plex {} plexoffset {}s", m.plex, sectors(m.plex_offset)).expect("write to a String");
        }
        writeln!(out, " state {}", s.state).expect("write to a String");
    }
    Ok(out)
}

/// Read an on-disk configuration text strictly (see the module documentation).
///
/// Blank lines and `#` comments are allowed and carry nothing; a missing `state` reads as
/// `down`, as in the kernel, whose objects start zeroed.
pub fn parse_config(text: &str) -> Result<VinumConfig, ConfigTextError> {
    let mut config = VinumConfig::default();
    let mut lines = text.split('\n').enumerate().peekable();
    while let Some((index, line)) = lines.next() {
        let number = index + 1;
        if lines.peek().is_none() {
            // The piece after the last newline: empty in a whole text.
            if !line.is_empty() {
                return Err(ConfigTextError::UnterminatedLine { line: number });
            }
            break;
        }
        let at_line = |problem: LineProblem| ConfigTextError::Line { line: number, problem };
        let tokens = tokenize(line, Blanks::Kernel).map_err(|e| at_line(e.into()))?;
        if tokens.is_empty() {
            continue;
        }
        add_object(&mut config, parse_object_line(&tokens).map_err(at_line)?).map_err(at_line)?;
    }
    Ok(config)
}

/// What the kernel makes of a configuration text (`gv_parse_config`), with what it passed
/// over.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelReading {
    /// The objects read before the reading stopped.
    pub config: VinumConfig,
    /// Lines the kernel skips: lines it cannot split into tokens, and lines that are not
    /// volume, plex or subdisk lines.
    pub skipped: Vec<ConfigTextError>,
    /// The malformed object line at which the kernel stops reading; later lines are lost.
    pub stopped_at: Option<ConfigTextError>,
}

/// Read a configuration text the way the kernel does at taste time: skip what it skips,
/// stop where it stops. Malformed values stop the reading here even where the kernel would
/// substitute a default (an unknown state becomes `down` there); the line is named in
/// [`KernelReading::stopped_at`].
pub fn parse_config_as_kernel(text: &str) -> KernelReading {
    let mut reading = KernelReading::default();
    for (index, line) in text.split('\n').enumerate() {
        let number = index + 1;
        let at_line = |problem: LineProblem| ConfigTextError::Line { line: number, problem };
        let tokens = match tokenize(line, Blanks::Kernel) {
            Ok(tokens) => tokens,
            Err(e) => {
                reading.skipped.push(at_line(e.into()));
                continue;
            }
        };
        if tokens.is_empty() {
            continue;
        }
        if !matches!(tokens[0].text, "volume" | "plex" | "sd") {
            let problem = match tokens[0].text {
                "drive" => LineProblem::NotOnDisk { object: ObjectKind::Drive },
                other => LineProblem::UnknownObjectType { token: other.to_string() },
            };
            reading.skipped.push(at_line(problem));
            continue;
        }
        let added = parse_object_line(&tokens).and_then(|object| add_object(&mut reading.config, object));
        if let Err(problem) = added {
            reading.stopped_at = Some(at_line(problem));
            break;
        }
    }
    reading
}

fn add_object(config: &mut VinumConfig, object: ObjectLine) -> Result<(), LineProblem> {
    match object {
        ObjectLine::Volume(line) => config.volumes.push(on_disk_volume(line)?),
        ObjectLine::Plex(line) => config.plexes.push(on_disk_plex(line)?),
        ObjectLine::Subdisk(line) => config.subdisks.push(on_disk_subdisk(line)?),
        ObjectLine::Drive(_) => return Err(LineProblem::NotOnDisk { object: ObjectKind::Drive }),
    }
    Ok(())
}

fn on_disk_volume(line: VolumeLine) -> Result<Volume, LineProblem> {
    let object = ObjectKind::Volume;
    Ok(Volume {
        name: line.name.ok_or(LineProblem::MissingKeyword { object, keyword: "name" })?,
        state: line.state.unwrap_or(VolumeState::Down),
    })
}

fn on_disk_plex(line: PlexLine) -> Result<Plex, LineProblem> {
    let object = ObjectKind::Plex;
    Ok(Plex {
        name: line.name.ok_or(LineProblem::MissingKeyword { object, keyword: "name" })?,
        organization: line.organization.ok_or(LineProblem::MissingKeyword { object, keyword: "org" })?,
        volume: line.volume,
        state: line.state.unwrap_or(PlexState::Down),
    })
}

fn on_disk_subdisk(line: SubdiskLine) -> Result<Subdisk, LineProblem> {
    let object = ObjectKind::Subdisk;
    let (length, length_token) = line.length.ok_or(LineProblem::MissingKeyword { object, keyword: "len" })?;
    let length = match u64::try_from(length) {
        Ok(0) => return Err(LineProblem::ZeroLength { token: length_token }),
        Ok(length) => length,
        Err(_) => return Err(LineProblem::NegativeSize { keyword: "len", token: length_token }),
    };
    let membership = match (line.plex, line.plex_offset) {
        (Some(plex), Some(plex_offset)) => Some(PlexMembership { plex, plex_offset }),
        (Some(_), None) => return Err(LineProblem::MissingKeyword { object, keyword: "plexoffset" }),
        (None, Some(_)) => return Err(LineProblem::PlexOffsetWithoutPlex),
        (None, None) => None,
    };
    Ok(Subdisk {
        name: line.name.ok_or(LineProblem::MissingKeyword { object, keyword: "name" })?,
        drive: line.drive.expect("the grammar requires a drive"),
        length,
        drive_offset: line.drive_offset.ok_or(LineProblem::MissingKeyword { object, keyword: "driveoffset" })?,
        membership,
        state: line.state.unwrap_or(SubdiskState::Down),
    })
}

/// The first reason `config` cannot be written and read back as itself.
fn unwritable(config: &VinumConfig) -> Option<ConfigProblem> {
    let name = |kind: ObjectKind, name: &str| {
        check_name(kind, name).err().map(|problem| ConfigProblem::BadName { kind, name: name.to_string(), problem })
    };
    let size = |what: &dyn Fn() -> String, value: u64| {
        if !value.is_multiple_of(SECTOR_SIZE) {
            Some(ConfigProblem::NotWholeSectors { what: what(), value })
        } else if value > MAX_TEXT_SIZE {
            Some(ConfigProblem::TooLarge { what: what(), value })
        } else {
            None
        }
    };
    for v in &config.volumes {
        if let Some(problem) = name(ObjectKind::Volume, &v.name) {
            return Some(problem);
        }
    }
    for p in &config.plexes {
        let problem = name(ObjectKind::Plex, &p.name)
            .or_else(|| p.volume.as_deref().and_then(|v| name(ObjectKind::Volume, v)))
            .or_else(|| match p.organization.stripe_size() {
                Some(0) => Some(ConfigProblem::ZeroStripeSize { plex: p.name.clone() }),
                Some(stripe) => size(&|| format!("stripe size of plex {:?}", p.name), stripe),
                None => None,
            });
        if problem.is_some() {
            return problem;
        }
    }
    for s in &config.subdisks {
        let problem = name(ObjectKind::Subdisk, &s.name)
            .or_else(|| name(ObjectKind::Drive, &s.drive))
            .or_else(|| s.plex().and_then(|p| name(ObjectKind::Plex, p)))
            .or_else(|| (s.length == 0).then(|| ConfigProblem::ZeroLength { subdisk: s.name.clone() }))
            .or_else(|| size(&|| format!("length of sd {:?}", s.name), s.length))
            .or_else(|| {
                (s.drive_offset < DATA_START)
                    .then(|| ConfigProblem::OffsetInMetadata { subdisk: s.name.clone(), drive_offset: s.drive_offset })
            })
            .or_else(|| size(&|| format!("drive offset of sd {:?}", s.name), s.drive_offset))
            .or_else(|| {
                s.membership.as_ref().and_then(|m| size(&|| format!("plex offset of sd {:?}", s.name), m.plex_offset))
            });
        if problem.is_some() {
            return problem;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::PlexOrganization;

    /// The configuration of gvinum.8's raid5 example (`printconfig` output there) in its
    /// on-disk form: the same objects and list order, with the state fields the on-disk form
    /// adds (after the drive failure the example describes).
    const MAN_PAGE_RAID5: &str = include_str!("../tests/data/man-page-raid5.conf");

    #[test]
    fn the_man_page_example_reads_and_writes_back_byte_for_byte() {
        let config = parse_config(MAN_PAGE_RAID5).unwrap();
        assert_eq!(config.volumes, vec![Volume { name: "myraid5vol".into(), state: VolumeState::Up }]);
        assert_eq!(config.plexes[0].organization, PlexOrganization::Raid5 { stripe_size: 986 * 512 });
        assert_eq!(config.plexes[0].state, PlexState::Degraded);
        let s2 = &config.subdisks[0];
        assert_eq!(s2.name, "myraid5vol.p0.s2");
        assert_eq!(s2.length, 32_538 * 512);
        assert_eq!(s2.drive_offset, DATA_START);
        assert_eq!(s2.membership, Some(PlexMembership { plex: "myraid5vol.p0".into(), plex_offset: 1972 * 512 }));
        assert_eq!(s2.state, SubdiskState::Stale);
        assert_eq!(config.problems(), vec![]);
        assert_eq!(format_config(&config).unwrap(), MAN_PAGE_RAID5);
    }

    #[test]
    fn detached_objects_are_written_with_gvinums_blanks() {
        let config = VinumConfig {
            volumes: vec![],
            plexes: vec![
                Plex { name: "p".into(), organization: PlexOrganization::Concat, volume: None, state: PlexState::Down },
                Plex {
                    name: "q".into(),
                    organization: PlexOrganization::Striped { stripe_size: 262_144 },
                    volume: None,
                    state: PlexState::Up,
                },
            ],
            subdisks: vec![Subdisk {
                name: "s".into(),
                drive: "d".into(),
                length: 1 << 20,
                drive_offset: DATA_START,
                membership: None,
                state: SubdiskState::Stale,
            }],
        };
        let text = format_config(&config).unwrap();
        assert_eq!(
            text,
            "plex name p org concat  state down\n\
             plex name q org striped 512s  state up\n\
             sd name s drive d len 2048s driveoffset 265s state stale\n"
        );
        assert_eq!(parse_config(&text).unwrap(), config);
    }

    #[test]
    fn the_empty_config_is_the_empty_text() {
        assert_eq!(format_config(&VinumConfig::default()).unwrap(), "");
        assert_eq!(parse_config("").unwrap(), VinumConfig::default());
    }

    #[test]
    fn keyword_order_units_comments_and_missing_states_are_accepted() {
        let text = "# a comment\n\n\
                    sd drive d0 name v.p0.s0 state up plex v.p0 driveoffset 135680 length 1m plexoffset 0\n\
                    plex org concat volume v name v.p0\n\
                    volume v\n";
        let config = parse_config(text).unwrap();
        assert_eq!(config.subdisks[0].length, 1 << 20);
        assert_eq!(config.plexes[0].state, PlexState::Down);
        assert_eq!(config.volumes[0].state, VolumeState::Down);
        assert_eq!(
            format_config(&config).unwrap(),
            "volume v state down\n\
             plex name v.p0 org concat vol v state down\n\
             sd name v.p0.s0 drive d0 len 2048s driveoffset 265s plex v.p0 plexoffset 0s state up\n"
        );
    }

    fn line_problem(text: &str) -> (usize, LineProblem) {
        match parse_config(text) {
            Err(ConfigTextError::Line { line, problem }) => (line, problem),
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn malformed_lines_are_refused_with_line_and_token() {
        let ok = "volume v state up\n";
        let cases: Vec<(String, LineProblem)> = vec![
            ("frob x\n".into(), LineProblem::UnknownObjectType { token: "frob".into() }),
            ("drive d device /dev/ada0\n".into(), LineProblem::NotOnDisk { object: ObjectKind::Drive }),
            (
                "volume v state sideways\n".into(),
                LineProblem::UnknownState { object: ObjectKind::Volume, token: "sideways".into() },
            ),
            (
                "volume v w\n".into(),
                LineProblem::SecondName { object: ObjectKind::Volume, first: "v".into(), second: "w".into() },
            ),
            ("volume\n".into(), LineProblem::MissingKeyword { object: ObjectKind::Volume, keyword: "name" }),
            ("volume v state\n".into(), LineProblem::MissingValue { object: ObjectKind::Volume, keyword: "state" }),
            ("plex name p org mirror vol v\n".into(), LineProblem::UnknownOrganization { token: "mirror".into() }),
            (
                "plex name p org striped vol v\n".into(),
                LineProblem::BadSize {
                    keyword: "stripe size",
                    token: "vol".into(),
                    problem: crate::tokens::SizeError::NoNumber,
                },
            ),
            ("plex name p org raid5 0s vol v\n".into(), LineProblem::ZeroStripeSize { token: "0s".into() }),
            (
                "plex name p org raid5 1000 vol v\n".into(),
                LineProblem::NotWholeSectors { keyword: "stripe size", token: "1000".into() },
            ),
            (
                "plex name p org concat setupstate up\n".into(),
                LineProblem::UnknownKeyword { object: ObjectKind::Plex, token: "setupstate".into(), column: 24 },
            ),
            (
                "plex name p name q org concat\n".into(),
                LineProblem::RepeatedKeyword { object: ObjectKind::Plex, keyword: "name", column: 13 },
            ),
            (
                "plex org concat vol v\n".into(),
                LineProblem::MissingKeyword { object: ObjectKind::Plex, keyword: "name" },
            ),
            ("plex name p vol v\n".into(), LineProblem::MissingKeyword { object: ObjectKind::Plex, keyword: "org" }),
            (
                "sd name s len 10s driveoffset 265s\n".into(),
                LineProblem::MissingKeyword { object: ObjectKind::Subdisk, keyword: "drive" },
            ),
            (
                "sd name s drive d driveoffset 265s\n".into(),
                LineProblem::MissingKeyword { object: ObjectKind::Subdisk, keyword: "len" },
            ),
            ("sd name s drive d len 0s driveoffset 265s\n".into(), LineProblem::ZeroLength { token: "0s".into() }),
            (
                "sd name s drive d len -8s driveoffset 265s\n".into(),
                LineProblem::NegativeSize { keyword: "len", token: "-8s".into() },
            ),
            ("sd name s drive d len 8s driveoffset 8s\n".into(), LineProblem::OffsetInMetadata { token: "8s".into() }),
            (
                "sd name s drive d len 8s\n".into(),
                LineProblem::MissingKeyword { object: ObjectKind::Subdisk, keyword: "driveoffset" },
            ),
            (
                "sd name s drive d len 8s driveoffset 265s plex p\n".into(),
                LineProblem::MissingKeyword { object: ObjectKind::Subdisk, keyword: "plexoffset" },
            ),
            ("sd name s drive d len 8s driveoffset 265s plexoffset 0s\n".into(), LineProblem::PlexOffsetWithoutPlex),
            (
                "sd name s drive d len 8x driveoffset 265s\n".into(),
                LineProblem::BadSize {
                    keyword: "len",
                    token: "8x".into(),
                    problem: crate::tokens::SizeError::UnknownUnit,
                },
            ),
            (
                format!("sd name s drive {} len 8s driveoffset 265s\n", "d".repeat(32)),
                LineProblem::BadName {
                    kind: ObjectKind::Drive,
                    name: "d".repeat(32),
                    problem: crate::objects::NameProblem::TooLong { len: 32, max: 31 },
                },
            ),
            (
                "volume \"v\" state up\n".into(),
                LineProblem::Tokenize(crate::tokens::TokenizeError::Quoted { column: 8 }),
            ),
        ];
        for (bad, expected) in cases {
            let text = format!("{ok}{bad}");
            assert_eq!(line_problem(&text), (2, expected), "{bad:?}");
            let message = parse_config(&text).unwrap_err().to_string();
            assert!(message.starts_with("config line 2: "), "{message}");
        }
    }

    #[test]
    fn a_text_cut_short_is_refused() {
        let cut = &MAN_PAGE_RAID5[..MAN_PAGE_RAID5.len() - 20];
        assert_eq!(parse_config(cut), Err(ConfigTextError::UnterminatedLine { line: 5 }));
    }

    #[test]
    fn unwritable_configs_are_refused() {
        let mut config = parse_config(MAN_PAGE_RAID5).unwrap();
        config.subdisks[1].length += 1;
        assert!(matches!(
            format_config(&config),
            Err(ConfigTextError::Unwritable(ConfigProblem::NotWholeSectors { .. }))
        ));
        let mut config = parse_config(MAN_PAGE_RAID5).unwrap();
        config.volumes[0].name = "my vol".into();
        assert!(matches!(format_config(&config), Err(ConfigTextError::Unwritable(ConfigProblem::BadName { .. }))));
        let mut config = parse_config(MAN_PAGE_RAID5).unwrap();
        config.subdisks[0].drive_offset = 0;
        assert!(matches!(
            format_config(&config),
            Err(ConfigTextError::Unwritable(ConfigProblem::OffsetInMetadata { .. }))
        ));
        let mut config = parse_config(MAN_PAGE_RAID5).unwrap();
        config.subdisks[0].length = MAX_TEXT_SIZE + 512;
        assert!(matches!(format_config(&config), Err(ConfigTextError::Unwritable(ConfigProblem::TooLarge { .. }))));
    }

    #[test]
    fn the_kernel_skips_some_lines_and_stops_at_others() {
        let text = "volume a state up\n\
                    drive d0 device /dev/ada0\n\
                    volume \"quoted\" state up\n\
                    garbage here\n\
                    volume b state up\n\
                    plex name b.p0 org concat vol b bogus\n\
                    volume c state up\n";
        let reading = parse_config_as_kernel(text);
        let names: Vec<&str> = reading.config.volumes.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let skipped: Vec<usize> = reading
            .skipped
            .iter()
            .map(|e| match e {
                ConfigTextError::Line { line, .. } => *line,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(skipped, [2, 3, 4]);
        assert!(matches!(
            reading.stopped_at,
            Some(ConfigTextError::Line { line: 6, problem: LineProblem::UnknownKeyword { .. } })
        ));
    }

    #[test]
    fn the_kernel_reading_of_a_sound_text_is_the_strict_one() {
        let reading = parse_config_as_kernel(MAN_PAGE_RAID5);
        assert_eq!(reading.config, parse_config(MAN_PAGE_RAID5).unwrap());
        assert!(reading.skipped.is_empty() && reading.stopped_at.is_none());
    }
}
