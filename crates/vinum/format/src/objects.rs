//! The Vinum object model: drives hold subdisks, subdisks make up plexes, plexes (mirrors of
//! each other) make up volumes; gvinum's state names, its generated names, and the rules a
//! configuration must follow to come up as written.
//!
//! Sizes and offsets are bytes, as in the kernel (`struct gv_sd`, `struct gv_plex` in
//! `geom_vinum_var.h`); the configuration text counts them in 512-byte sectors, so a
//! configuration meant for disk keeps them whole sectors ([`VinumConfig::problems`] says so).

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

use crate::drive_layout::{DATA_START, SECTOR_SIZE};

/// Longest drive name (`GV_MAXDRIVENAME` less the NUL).
pub const MAX_DRIVE_NAME_LEN: usize = 31;
/// Longest volume, plex or subdisk name (`GV_MAXVOLNAME`, `GV_MAXPLEXNAME`, `GV_MAXSDNAME`
/// less the NUL).
pub const MAX_OBJECT_NAME_LEN: usize = 63;
/// Stripe size gvinum's `stripe`, `raid5` and `mirror -s` shortcuts use (`DEFAULT_STRIPESIZE`
/// in `geom_vinum_create.c`): 256 KiB.
pub const DEFAULT_STRIPE_SIZE: u64 = 262_144;

/// Largest size or offset a configuration text can hold: gvinum reads sizes into a signed
/// 64-bit byte count.
pub const MAX_TEXT_SIZE: u64 = i64::MAX as u64 / SECTOR_SIZE * SECTOR_SIZE;

/// The four kinds of Vinum object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// A disk or partition carrying a gvinum header.
    Drive,
    /// What users see: `/dev/gvinum/<name>`.
    Volume,
    /// One copy of a volume's data.
    Plex,
    /// A contiguous extent of a drive that belongs to a plex.
    Subdisk,
}

impl ObjectKind {
    /// The keyword that starts this kind's configuration line.
    pub fn keyword(self) -> &'static str {
        match self {
            ObjectKind::Drive => "drive",
            ObjectKind::Volume => "volume",
            ObjectKind::Plex => "plex",
            ObjectKind::Subdisk => "sd",
        }
    }

    /// Longest name of this kind.
    pub fn max_name_len(self) -> usize {
        match self {
            ObjectKind::Drive => MAX_DRIVE_NAME_LEN,
            _ => MAX_OBJECT_NAME_LEN,
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword())
    }
}

macro_rules! state_names {
    ($(#[$meta:meta])* $ty:ident { $($(#[$vmeta:meta])* $variant:ident => $name:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $ty {
            $($(#[$vmeta])* $variant),+
        }

        impl $ty {
            /// Every state, lowest first (the kernel's numbering).
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The name gvinum writes in the configuration text.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }

            /// The state with this exact name.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

state_names! {
    /// A drive's state (`GV_DRIVE_*`). Not written in the configuration text.
    DriveState {
        /// Not accessible.
        Down => "down",
        /// Accessible; configuration saves go to it.
        Up => "up",
    }
}

state_names! {
    /// A volume's state (`GV_VOL_*`).
    VolumeState {
        /// No plex is usable.
        Down => "down",
        /// At least one plex is usable.
        Up => "up",
    }
}

state_names! {
    /// A plex's state (`GV_PLEX_*`).
    PlexState {
        /// Not usable.
        Down => "down",
        /// Being initialised.
        Initializing => "initializing",
        /// raid5 with one subdisk missing: usable, no redundancy.
        Degraded => "degraded",
        /// New subdisks added; `start` restripes onto them.
        Growable => "growable",
        /// Fully usable.
        Up => "up",
    }
}

state_names! {
    /// A subdisk's state (`GV_SD_*`).
    SubdiskState {
        /// Not usable.
        Down => "down",
        /// Contents out of date (e.g. attached to a running plex); needs a sync or rebuild.
        Stale => "stale",
        /// Being zero-filled.
        Initializing => "initializing",
        /// Being rebuilt from the other subdisks of a raid5 plex.
        Reviving => "reviving",
        /// Usable.
        Up => "up",
    }
}

/// How a plex spreads its address space over its subdisks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlexOrganization {
    /// One subdisk after the other, by plex offset.
    Concat,
    /// RAID-0: stripe units of `stripe_size` bytes dealt round the subdisks.
    Striped {
        /// Bytes per stripe unit.
        stripe_size: u64,
    },
    /// RAID-5 with rotating parity (see [`crate::mapping`]).
    Raid5 {
        /// Bytes per stripe unit.
        stripe_size: u64,
    },
}

impl PlexOrganization {
    /// The name gvinum writes after `org`.
    pub fn name(self) -> &'static str {
        match self {
            PlexOrganization::Concat => "concat",
            PlexOrganization::Striped { .. } => "striped",
            PlexOrganization::Raid5 { .. } => "raid5",
        }
    }

    /// Bytes per stripe unit; `None` for concat.
    pub fn stripe_size(self) -> Option<u64> {
        match self {
            PlexOrganization::Concat => None,
            PlexOrganization::Striped { stripe_size } | PlexOrganization::Raid5 { stripe_size } => Some(stripe_size),
        }
    }

    /// Fewest subdisks with which a plex of this organization can come up
    /// (`gv_update_plex_config`: striped 2, raid5 3; a plex without subdisks is down).
    pub fn minimum_subdisks(self) -> usize {
        match self {
            PlexOrganization::Concat => 1,
            PlexOrganization::Striped { .. } => 2,
            PlexOrganization::Raid5 { .. } => 3,
        }
    }
}

impl fmt::Display for PlexOrganization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A drive as named in a create description or found by tasting.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Drive {
    /// The drive's name, as in its header.
    pub name: String,
    /// The device it lives on, without `/dev/` (`???` for a drive only referenced so far).
    pub device: Option<String>,
    /// Up or down.
    pub state: DriveState,
}

/// A volume.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Volume {
    /// The volume's name.
    pub name: String,
    /// Up or down.
    pub state: VolumeState,
}

/// A plex.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Plex {
    /// The plex's name (`<volume>.p<N>` when gvinum chose it).
    pub name: String,
    /// concat, striped or raid5.
    pub organization: PlexOrganization,
    /// The volume it belongs to; `None` for a detached plex.
    pub volume: Option<String>,
    /// The plex's state.
    pub state: PlexState,
}

/// Where a subdisk sits in its plex.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlexMembership {
    /// The plex's name.
    pub plex: String,
    /// Byte offset in the plex's address space. For striped and raid5 plexes only the order
    /// of these offsets matters: it is the column order.
    pub plex_offset: u64,
}

/// A subdisk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subdisk {
    /// The subdisk's name (`<plex>.s<N>` when gvinum chose it).
    pub name: String,
    /// The drive it lives on, by drive name.
    pub drive: String,
    /// Length in bytes.
    pub length: u64,
    /// Byte offset on the drive (at least [`DATA_START`]).
    pub drive_offset: u64,
    /// The plex it belongs to; `None` for a detached subdisk.
    pub membership: Option<PlexMembership>,
    /// The subdisk's state.
    pub state: SubdiskState,
}

impl Subdisk {
    /// The plex this subdisk belongs to, if any.
    pub fn plex(&self) -> Option<&str> {
        self.membership.as_ref().map(|m| m.plex.as_str())
    }
}

/// A whole configuration: what one configuration copy describes. Each list keeps the order
/// of the text (gvinum's internal list order).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct VinumConfig {
    /// All volumes.
    pub volumes: Vec<Volume>,
    /// All plexes.
    pub plexes: Vec<Plex>,
    /// All subdisks.
    pub subdisks: Vec<Subdisk>,
}

/// `<volume>.p<index>`: the name gvinum gives a volume's plex when none is given.
pub fn plex_name(volume: &str, index: usize) -> String {
    format!("{volume}.p{index}")
}

/// `<plex>.s<index>`: the name gvinum gives a plex's subdisk when none is given.
pub fn subdisk_name(plex: &str, index: usize) -> String {
    format!("{plex}.s{index}")
}

/// `<prefix><N>` for the smallest N not taken, as gvinum's shortcut commands name new
/// volumes (`gvinumvolumeN`) and drives (`gvinumdriveN`).
pub fn first_free_numbered_name(prefix: &str, is_taken: impl Fn(&str) -> bool) -> String {
    (0u64..).map(|n| format!("{prefix}{n}")).find(|name| !is_taken(name)).expect("some number is free")
}

/// Why a name cannot be written into a configuration text and read back as itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum NameProblem {
    /// Empty names are not allowed.
    #[error("is empty")]
    Empty,
    /// Longer than the kernel's field.
    #[error("is {len} bytes, longer than {max}")]
    TooLong { len: usize, max: usize },
    /// Contains a blank, a line break or a NUL, which would split it.
    #[error("contains white space or a NUL")]
    HasSeparator,
    /// Starts with `#` (a comment) or a quote (gvinum cannot read quoted tokens).
    #[error("starts with '#' or a quote")]
    BadFirstCharacter,
    /// A volume named `state` reads as the keyword.
    #[error("is the keyword 'state'")]
    IsKeyword,
}

/// Check that `name` can name an object of `kind` in a configuration text.
pub fn check_name(kind: ObjectKind, name: &str) -> Result<(), NameProblem> {
    if name.is_empty() {
        return Err(NameProblem::Empty);
    }
    if name.len() > kind.max_name_len() {
        return Err(NameProblem::TooLong { len: name.len(), max: kind.max_name_len() });
    }
    if name.bytes().any(|b| b == 0 || b.is_ascii_whitespace() || b == 0x0b) {
        return Err(NameProblem::HasSeparator);
    }
    if name.starts_with(['#', '"', '\'']) {
        return Err(NameProblem::BadFirstCharacter);
    }
    // Volume (and drive) lines take any bare token as the name, so the keywords they know
    // cannot be names.
    let reserved: &[&str] = match kind {
        ObjectKind::Volume => &["state"],
        ObjectKind::Drive => &["state", "device"],
        _ => &[],
    };
    if reserved.contains(&name) {
        return Err(NameProblem::IsKeyword);
    }
    Ok(())
}

/// One way in which a configuration would not come up as written, or not at all.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Error)]
pub enum ConfigProblem {
    /// A name that cannot be written as a token.
    #[error("{kind} name {name:?} {problem}")]
    BadName { kind: ObjectKind, name: String, problem: NameProblem },
    /// Two objects of one kind with one name: the kernel keeps the first.
    #[error("two {kind}s named {name:?}")]
    DuplicateName { kind: ObjectKind, name: String },
    /// A detached plex: the kernel drops it when it reads the configuration back.
    #[error("plex {plex:?} belongs to no volume (the kernel drops it when it next reads the config)")]
    PlexWithoutVolume { plex: String },
    /// A plex naming a volume that is not in the configuration.
    #[error("plex {plex:?} names volume {volume:?}, which is not in the config")]
    UnknownVolume { plex: String, volume: String },
    /// A detached subdisk: the kernel drops it when it reads the configuration back.
    #[error("sd {subdisk:?} belongs to no plex (the kernel drops it when it next reads the config)")]
    SubdiskWithoutPlex { subdisk: String },
    /// A subdisk naming a plex that is not in the configuration.
    #[error("sd {subdisk:?} names plex {plex:?}, which is not in the config")]
    UnknownPlex { subdisk: String, plex: String },
    /// A size or offset the text (in 512-byte sectors) cannot hold exactly.
    #[error("{what} is {value} bytes, not a whole number of 512-byte sectors")]
    NotWholeSectors { what: String, value: u64 },
    /// A striped or raid5 plex with stripe size 0.
    #[error("plex {plex:?} has stripe size 0")]
    ZeroStripeSize { plex: String },
    /// A size or offset larger than the configuration text can hold (a signed 64-bit byte
    /// count).
    #[error("{what} is {value} bytes, more than a config text can hold")]
    TooLarge { what: String, value: u64 },
    /// A plex larger than 2^64 bytes: it cannot be addressed.
    #[error("plex {plex:?} would be larger than 2^64 bytes")]
    PlexTooLarge { plex: String },
    /// A subdisk of length 0.
    #[error("sd {subdisk:?} has length 0")]
    ZeroLength { subdisk: String },
    /// A subdisk placed over the header or the configuration copies.
    #[error(
        "sd {subdisk:?} starts at drive byte {drive_offset}, inside gvinum's metadata (data starts at {DATA_START})"
    )]
    OffsetInMetadata { subdisk: String, drive_offset: u64 },
    /// Fewer subdisks than the organization needs: the plex comes up down.
    #[error("{organization} plex {plex:?} has {found} subdisks; it needs at least {needed}")]
    TooFewSubdisks { plex: String, organization: PlexOrganization, found: usize, needed: usize },
    /// Subdisks of a striped or raid5 plex differ in length: the plex comes up down.
    #[error("sd {subdisk:?} of plex {plex:?} is {length} bytes; the plex's first sd is {expected}")]
    LengthMismatch { plex: String, subdisk: String, length: u64, expected: u64 },
    /// A striped or raid5 subdisk that is not whole stripes: the kernel trims it.
    #[error("sd {subdisk:?} of plex {plex:?} is {length} bytes, not a multiple of the stripe size {stripe_size}")]
    NotWholeStripes { plex: String, subdisk: String, length: u64, stripe_size: u64 },
    /// Two subdisks of one plex at one plex offset: their column order is undefined.
    #[error("sds {first:?} and {second:?} of plex {plex:?} share plex offset {plex_offset}")]
    SharedPlexOffset { plex: String, first: String, second: String, plex_offset: u64 },
    /// A concat subdisk that does not start where the previous one ends (a hole or overlap
    /// in the plex's address space).
    #[error(
        "sd {subdisk:?} of concat plex {plex:?} is at plex offset {plex_offset}; the previous sd ends at {expected}"
    )]
    ConcatNotContiguous { plex: String, subdisk: String, plex_offset: u64, expected: u64 },
    /// A striped or raid5 subdisk whose plex offset is not its column times the stripe size,
    /// as gvinum assigns them.
    #[error("sd {subdisk:?} is column {column} of plex {plex:?} but at plex offset {plex_offset} (gvinum puts it at {expected})")]
    UnexpectedPlexOffset { plex: String, subdisk: String, column: usize, plex_offset: u64, expected: u64 },
    /// Two subdisks overlapping on one drive.
    #[error("sds {first:?} and {second:?} overlap on drive {drive:?}")]
    OverlappingSubdisks { drive: String, first: String, second: String },
    /// A subdisk reaching past the end of its drive.
    #[error("sd {subdisk:?} ends at drive byte {end}, past the end of drive {drive:?} ({drive_size} bytes)")]
    BeyondDrive { subdisk: String, drive: String, end: u128, drive_size: u64 },
}

impl VinumConfig {
    /// The volume of that name.
    pub fn volume(&self, name: &str) -> Option<&Volume> {
        self.volumes.iter().find(|v| v.name == name)
    }

    /// The plex of that name.
    pub fn plex(&self, name: &str) -> Option<&Plex> {
        self.plexes.iter().find(|p| p.name == name)
    }

    /// The subdisk of that name.
    pub fn subdisk(&self, name: &str) -> Option<&Subdisk> {
        self.subdisks.iter().find(|s| s.name == name)
    }

    /// The plexes attached to a volume, in list order.
    pub fn plexes_of(&self, volume: &str) -> Vec<&Plex> {
        self.plexes.iter().filter(|p| p.volume.as_deref() == Some(volume)).collect()
    }

    /// The subdisks attached to a plex, ordered by plex offset as the kernel keeps them
    /// (`gv_sd_to_plex`); for striped and raid5 plexes this is the column order.
    pub fn subdisks_of(&self, plex: &str) -> Vec<&Subdisk> {
        let mut members: Vec<&Subdisk> = self.subdisks.iter().filter(|s| s.plex() == Some(plex)).collect();
        members.sort_by_key(|s| s.membership.as_ref().map(|m| m.plex_offset));
        members
    }

    /// The names of all drives the subdisks refer to, sorted.
    pub fn drive_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.subdisks.iter().map(|s| s.drive.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// A plex's size in bytes as `gv_plex_size` computes it: concat the sum of its subdisks,
    /// striped n × the first subdisk, raid5 (n − 1) × the first subdisk (at most
    /// `u64::MAX`).
    pub fn plex_size(&self, plex: &str) -> Option<u64> {
        let p = self.plex(plex)?;
        let members = self.subdisks_of(plex);
        let first = members.first().map_or(0, |s| s.length);
        let n = members.len() as u64;
        // Saturating: a corrupt configuration must not overflow.
        Some(match p.organization {
            PlexOrganization::Concat => members.iter().fold(0u64, |sum, s| sum.saturating_add(s.length)),
            PlexOrganization::Striped { .. } => n.saturating_mul(first),
            PlexOrganization::Raid5 { .. } => n.saturating_sub(1).saturating_mul(first),
        })
    }

    /// A volume's size in bytes (`gv_vol_size`): its smallest plex, 0 without plexes.
    pub fn volume_size(&self, volume: &str) -> Option<u64> {
        self.volume(volume)?;
        Some(self.plexes_of(volume).iter().filter_map(|p| self.plex_size(&p.name)).min().unwrap_or(0))
    }

    /// Everything that keeps this configuration from coming up as written; empty when it is
    /// sound. Drive sizes are not known here; see [`VinumConfig::problems_on_drives`].
    pub fn problems(&self) -> Vec<ConfigProblem> {
        let mut found = Vec::new();
        self.check_names(&mut found);
        self.check_references(&mut found);
        self.check_sizes(&mut found);
        for plex in &self.plexes {
            self.check_plex_members(plex, &mut found);
        }
        self.check_drive_overlaps(&mut found);
        found
    }

    /// [`VinumConfig::problems`] plus subdisks reaching past the end of their drive, given
    /// each drive's media size in bytes (drives not listed are not checked).
    pub fn problems_on_drives(&self, media_sizes: &BTreeMap<String, u64>) -> Vec<ConfigProblem> {
        let mut found = self.problems();
        for s in &self.subdisks {
            let Some(&drive_size) = media_sizes.get(&s.drive) else { continue };
            let end = u128::from(s.drive_offset) + u128::from(s.length);
            if end > u128::from(drive_size) {
                found.push(ConfigProblem::BeyondDrive {
                    subdisk: s.name.clone(),
                    drive: s.drive.clone(),
                    end,
                    drive_size,
                });
            }
        }
        found
    }

    fn check_names(&self, found: &mut Vec<ConfigProblem>) {
        let names = self
            .volumes
            .iter()
            .map(|v| (ObjectKind::Volume, v.name.as_str()))
            .chain(self.plexes.iter().map(|p| (ObjectKind::Plex, p.name.as_str())))
            .chain(self.subdisks.iter().map(|s| (ObjectKind::Subdisk, s.name.as_str())));
        let mut seen = std::collections::BTreeSet::new();
        for (kind, name) in names {
            if let Err(problem) = check_name(kind, name) {
                found.push(ConfigProblem::BadName { kind, name: name.to_string(), problem });
            }
            if !seen.insert((kind, name)) {
                found.push(ConfigProblem::DuplicateName { kind, name: name.to_string() });
            }
        }
        let referenced = self
            .plexes
            .iter()
            .filter_map(|p| p.volume.as_deref().map(|v| (ObjectKind::Volume, v)))
            .chain(self.subdisks.iter().filter_map(|s| s.plex().map(|p| (ObjectKind::Plex, p))))
            .chain(self.subdisks.iter().map(|s| (ObjectKind::Drive, s.drive.as_str())));
        let mut reported = std::collections::BTreeSet::new();
        for (kind, name) in referenced {
            if let Err(problem) = check_name(kind, name) {
                if reported.insert((kind, name)) {
                    found.push(ConfigProblem::BadName { kind, name: name.to_string(), problem });
                }
            }
        }
    }

    fn check_references(&self, found: &mut Vec<ConfigProblem>) {
        for p in &self.plexes {
            match &p.volume {
                None => found.push(ConfigProblem::PlexWithoutVolume { plex: p.name.clone() }),
                Some(v) if self.volume(v).is_none() => {
                    found.push(ConfigProblem::UnknownVolume { plex: p.name.clone(), volume: v.clone() })
                }
                Some(_) => {}
            }
        }
        for s in &self.subdisks {
            match s.plex() {
                None => found.push(ConfigProblem::SubdiskWithoutPlex { subdisk: s.name.clone() }),
                Some(p) if self.plex(p).is_none() => {
                    found.push(ConfigProblem::UnknownPlex { subdisk: s.name.clone(), plex: p.to_string() })
                }
                Some(_) => {}
            }
        }
    }

    fn check_sizes(&self, found: &mut Vec<ConfigProblem>) {
        let mut whole = |what: String, value: u64| {
            if !value.is_multiple_of(SECTOR_SIZE) {
                found.push(ConfigProblem::NotWholeSectors { what, value });
            } else if value > MAX_TEXT_SIZE {
                found.push(ConfigProblem::TooLarge { what, value });
            }
        };
        for p in &self.plexes {
            if let Some(stripe) = p.organization.stripe_size() {
                whole(format!("stripe size of plex {:?}", p.name), stripe);
            }
        }
        for s in &self.subdisks {
            whole(format!("length of sd {:?}", s.name), s.length);
            whole(format!("drive offset of sd {:?}", s.name), s.drive_offset);
            if let Some(m) = &s.membership {
                whole(format!("plex offset of sd {:?}", s.name), m.plex_offset);
            }
        }
        for p in &self.plexes {
            if p.organization.stripe_size() == Some(0) {
                found.push(ConfigProblem::ZeroStripeSize { plex: p.name.clone() });
            }
        }
        for s in &self.subdisks {
            if s.length == 0 {
                found.push(ConfigProblem::ZeroLength { subdisk: s.name.clone() });
            }
            if s.drive_offset < DATA_START {
                found.push(ConfigProblem::OffsetInMetadata { subdisk: s.name.clone(), drive_offset: s.drive_offset });
            }
        }
    }

    fn check_plex_members(&self, plex: &Plex, found: &mut Vec<ConfigProblem>) {
        let members = self.subdisks_of(&plex.name);
        let needed = plex.organization.minimum_subdisks();
        if members.len() < needed {
            found.push(ConfigProblem::TooFewSubdisks {
                plex: plex.name.clone(),
                organization: plex.organization,
                found: members.len(),
                needed,
            });
        }
        let n = members.len() as u64;
        let first = members.first().map_or(0, |s| s.length);
        let fits = match plex.organization {
            PlexOrganization::Concat => members.iter().try_fold(0u64, |sum, s| sum.checked_add(s.length)).is_some(),
            _ => n.checked_mul(first).is_some(),
        };
        if !fits {
            found.push(ConfigProblem::PlexTooLarge { plex: plex.name.clone() });
        }
        let offset = |s: &Subdisk| s.membership.as_ref().map_or(0, |m| m.plex_offset);
        for pair in members.windows(2) {
            if offset(pair[0]) == offset(pair[1]) {
                found.push(ConfigProblem::SharedPlexOffset {
                    plex: plex.name.clone(),
                    first: pair[0].name.clone(),
                    second: pair[1].name.clone(),
                    plex_offset: offset(pair[0]),
                });
            }
        }
        match plex.organization.stripe_size() {
            None => {
                let mut expected = 0u64;
                for s in &members {
                    if offset(s) != expected {
                        found.push(ConfigProblem::ConcatNotContiguous {
                            plex: plex.name.clone(),
                            subdisk: s.name.clone(),
                            plex_offset: offset(s),
                            expected,
                        });
                    }
                    expected = offset(s).saturating_add(s.length);
                }
            }
            Some(stripe_size) => {
                let first_length = members.first().map_or(0, |s| s.length);
                for (column, s) in members.iter().enumerate() {
                    if s.length != first_length {
                        found.push(ConfigProblem::LengthMismatch {
                            plex: plex.name.clone(),
                            subdisk: s.name.clone(),
                            length: s.length,
                            expected: first_length,
                        });
                    }
                    if stripe_size != 0 && !s.length.is_multiple_of(stripe_size) {
                        found.push(ConfigProblem::NotWholeStripes {
                            plex: plex.name.clone(),
                            subdisk: s.name.clone(),
                            length: s.length,
                            stripe_size,
                        });
                    }
                    let expected = (column as u64).saturating_mul(stripe_size);
                    if offset(s) != expected {
                        found.push(ConfigProblem::UnexpectedPlexOffset {
                            plex: plex.name.clone(),
                            subdisk: s.name.clone(),
                            column,
                            plex_offset: offset(s),
                            expected,
                        });
                    }
                }
            }
        }
    }

    fn check_drive_overlaps(&self, found: &mut Vec<ConfigProblem>) {
        let mut by_drive: BTreeMap<&str, Vec<&Subdisk>> = BTreeMap::new();
        for s in &self.subdisks {
            by_drive.entry(&s.drive).or_default().push(s);
        }
        for (drive, mut extents) in by_drive {
            extents.sort_by_key(|s| s.drive_offset);
            for pair in extents.windows(2) {
                let end = u128::from(pair[0].drive_offset) + u128::from(pair[0].length);
                if end > u128::from(pair[1].drive_offset) {
                    found.push(ConfigProblem::OverlappingSubdisks {
                        drive: drive.to_string(),
                        first: pair[0].name.clone(),
                        second: pair[1].name.clone(),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sd(name: &str, drive: &str, plex: &str, plex_offset: u64, length: u64) -> Subdisk {
        Subdisk {
            name: name.into(),
            drive: drive.into(),
            length,
            drive_offset: DATA_START,
            membership: Some(PlexMembership { plex: plex.into(), plex_offset }),
            state: SubdiskState::Up,
        }
    }

    fn raid5(n: usize, stripe: u64, length: u64) -> VinumConfig {
        VinumConfig {
            volumes: vec![Volume { name: "r5".into(), state: VolumeState::Up }],
            plexes: vec![Plex {
                name: plex_name("r5", 0),
                organization: PlexOrganization::Raid5 { stripe_size: stripe },
                volume: Some("r5".into()),
                state: PlexState::Up,
            }],
            subdisks: (0..n)
                .rev()
                .map(|i| sd(&subdisk_name("r5.p0", i), &format!("d{i}"), "r5.p0", i as u64 * stripe, length))
                .collect(),
        }
    }

    #[test]
    fn state_names_are_gvinums() {
        let names: Vec<&str> = SubdiskState::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["down", "stale", "initializing", "reviving", "up"]);
        let names: Vec<&str> = PlexState::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["down", "initializing", "degraded", "growable", "up"]);
        assert_eq!(VolumeState::from_name("up"), Some(VolumeState::Up));
        assert_eq!(DriveState::from_name("UP"), None);
        assert_eq!(PlexOrganization::Raid5 { stripe_size: 512 }.to_string(), "raid5");
    }

    #[test]
    fn generated_names_follow_gvinum() {
        assert_eq!(plex_name("v", 0), "v.p0");
        assert_eq!(subdisk_name("v.p0", 2), "v.p0.s2");
        let taken = ["gvinumvolume0", "gvinumvolume1", "gvinumvolume3"];
        assert_eq!(first_free_numbered_name("gvinumvolume", |n| taken.contains(&n)), "gvinumvolume2");
    }

    #[test]
    fn names_that_cannot_be_tokens_are_refused() {
        assert_eq!(check_name(ObjectKind::Volume, ""), Err(NameProblem::Empty));
        assert_eq!(check_name(ObjectKind::Volume, "a b"), Err(NameProblem::HasSeparator));
        assert_eq!(check_name(ObjectKind::Plex, "#x"), Err(NameProblem::BadFirstCharacter));
        assert_eq!(check_name(ObjectKind::Volume, "state"), Err(NameProblem::IsKeyword));
        assert_eq!(check_name(ObjectKind::Plex, "state"), Ok(()));
        assert_eq!(check_name(ObjectKind::Drive, &"d".repeat(32)), Err(NameProblem::TooLong { len: 32, max: 31 }));
        assert_eq!(check_name(ObjectKind::Subdisk, &"s".repeat(63)), Ok(()));
    }

    #[test]
    fn a_sound_raid5_has_no_problems_and_gvinums_sizes() {
        let config = raid5(3, 65_536, 10 * 65_536);
        assert_eq!(config.problems(), vec![]);
        assert_eq!(config.plex_size("r5.p0"), Some(20 * 65_536));
        assert_eq!(config.volume_size("r5"), Some(20 * 65_536));
        let columns: Vec<&str> = config.subdisks_of("r5.p0").iter().map(|s| s.name.as_str()).collect();
        assert_eq!(columns, ["r5.p0.s0", "r5.p0.s1", "r5.p0.s2"]);
    }

    #[test]
    fn striped_rules_are_reported() {
        let mut config = raid5(2, 65_536, 10 * 65_536);
        config.subdisks[0].length += 512;
        config.subdisks[1].membership.as_mut().unwrap().plex_offset = 4096;
        let problems = config.problems();
        assert!(problems.iter().any(|p| matches!(p, ConfigProblem::TooFewSubdisks { found: 2, needed: 3, .. })));
        assert!(problems.iter().any(|p| matches!(p, ConfigProblem::LengthMismatch { .. })));
        assert!(problems.iter().any(|p| matches!(p, ConfigProblem::NotWholeStripes { .. })));
        assert!(problems.iter().any(|p| matches!(p, ConfigProblem::UnexpectedPlexOffset { column: 0, .. })));
    }

    #[test]
    fn concat_holes_dangling_references_and_overlaps_are_reported() {
        let config = VinumConfig {
            volumes: vec![Volume { name: "v".into(), state: VolumeState::Up }],
            plexes: vec![
                Plex {
                    name: "v.p0".into(),
                    organization: PlexOrganization::Concat,
                    volume: Some("v".into()),
                    state: PlexState::Up,
                },
                Plex {
                    name: "lost".into(),
                    organization: PlexOrganization::Concat,
                    volume: None,
                    state: PlexState::Down,
                },
            ],
            subdisks: vec![
                sd("v.p0.s0", "d0", "v.p0", 0, 1 << 20),
                Subdisk { drive_offset: DATA_START + 4096, ..sd("v.p0.s1", "d0", "v.p0", 2 << 20, 1 << 20) },
                sd("x", "d1", "nosuch", 0, 1 << 20),
            ],
        };
        let problems = config.problems();
        let expected = [
            ConfigProblem::PlexWithoutVolume { plex: "lost".into() },
            ConfigProblem::UnknownPlex { subdisk: "x".into(), plex: "nosuch".into() },
            ConfigProblem::TooFewSubdisks {
                plex: "lost".into(),
                organization: PlexOrganization::Concat,
                found: 0,
                needed: 1,
            },
            ConfigProblem::ConcatNotContiguous {
                plex: "v.p0".into(),
                subdisk: "v.p0.s1".into(),
                plex_offset: 2 << 20,
                expected: 1 << 20,
            },
            ConfigProblem::OverlappingSubdisks {
                drive: "d0".into(),
                first: "v.p0.s0".into(),
                second: "v.p0.s1".into(),
            },
        ];
        for e in &expected {
            assert!(problems.contains(e), "missing {e}: {problems:?}");
        }
        assert_eq!(problems.len(), expected.len(), "{problems:?}");
    }

    #[test]
    fn metadata_sector_and_drive_end_rules_are_reported() {
        let mut config = raid5(3, 65_536, 10 * 65_536);
        config.subdisks[0].drive_offset = 4096;
        config.subdisks[1].length = 1000;
        config.plexes[0].organization = PlexOrganization::Raid5 { stripe_size: 0 };
        let problems = config.problems();
        assert!(problems.iter().any(|p| matches!(p, ConfigProblem::OffsetInMetadata { drive_offset: 4096, .. })));
        assert!(problems.iter().any(|p| matches!(p, ConfigProblem::NotWholeSectors { value: 1000, .. })));
        assert!(problems.iter().any(|p| matches!(p, ConfigProblem::ZeroStripeSize { .. })));
        let sizes = BTreeMap::from([("d0".to_string(), DATA_START + 65_536)]);
        let problems = raid5(3, 65_536, 10 * 65_536).problems_on_drives(&sizes);
        assert_eq!(
            problems,
            vec![ConfigProblem::BeyondDrive {
                subdisk: "r5.p0.s0".into(),
                drive: "d0".into(),
                end: u128::from(DATA_START + 10 * 65_536),
                drive_size: DATA_START + 65_536,
            }]
        );
    }

    #[test]
    fn duplicates_are_reported() {
        let mut config = raid5(3, 65_536, 10 * 65_536);
        config.volumes.push(config.volumes[0].clone());
        assert!(config
            .problems()
            .contains(&ConfigProblem::DuplicateName { kind: ObjectKind::Volume, name: "r5".into() }));
    }
}
