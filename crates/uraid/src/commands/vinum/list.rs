//! `list`/`l`, `ld`, `lv`, `lp`, `ls`: gvinum's listings, text for text.
//!
//! The formats are the kernel's (`gv_list`, `gv_ld`/`gv_ldi`, `gv_lv`/`gv_lvi`, `gv_lp`/`gv_lpi`,
//! `gv_ls`/`gv_lsi` in `geom_vinum_list.c`; `gv_roughlength` in `geom_vinum_share.c`), which
//! `gvinum list` prints as it gets them. Where the kernel prints `/dev/<device>` the path the
//! drive was found at is printed (a drive on `/dev/ada1` shows as `/dev/ada1` either way).
//! Runtime flags are not on disk: they are printed as the kernel has them after tasting the
//! drives (drives 0, or 1 for a drive only named by subdisks; plexes 0; subdisks 4, "can go
//! up", when up, plus 2 on a drive not found). Nothing is syncing, so no progress is shown
//! (`S 0%`, `I 0%` and `R 0%` only as the kernel shows them for initializing or reviving
//! subdisks).

use std::fmt::Write as _;

use serde_json::{json, Value};
use uraid_vinum_format::{Plex, PlexOrganization, Subdisk, SubdiskState, VinumConfig, Volume};

use super::super::{emit, err, CliResult};
use super::drives::{DriveSet, DriveView};
use super::ListArgs;

const KILOBYTE: u64 = 1024;
const MEGABYTE: u64 = 1024 * 1024;
const GIGABYTE: u64 = 1024 * 1024 * 1024;

/// Which listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    All,
    Drives,
    Volumes,
    Plexes,
    Subdisks,
}

/// `-r`, `-v`, `-V` (GV_FLAG_R, GV_FLAG_V, GV_FLAG_VV).
#[derive(Debug, Clone, Copy, Default)]
pub struct Flags {
    pub r: bool,
    pub v: bool,
    pub vv: bool,
}

/// `gv_roughlength`: a size in its best unit, right-aligned in 10 digits unless `lj`.
pub fn roughlength(bytes: u64, lj: bool) -> String {
    let (n, unit) = if bytes > MEGABYTE * 10000 {
        (bytes / GIGABYTE, "GB")
    } else if bytes > KILOBYTE * 10000 {
        (bytes / MEGABYTE, "MB")
    } else if bytes > 10000 {
        (bytes / KILOBYTE, "kB")
    } else {
        (bytes, " B")
    };
    if lj {
        format!("{n} {unit}")
    } else {
        format!("{n:>10} {unit}")
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}:\n", if n == 1 { one } else { many })
}

/// The objects shown, each once, in the order first shown (for `--json`).
#[derive(Default)]
struct Shown {
    drives: Vec<String>,
    volumes: Vec<String>,
    plexes: Vec<String>,
    subdisks: Vec<String>,
}

fn note(list: &mut Vec<String>, name: &str) {
    if !list.iter().any(|n| n == name) {
        list.push(name.to_string());
    }
}

/// A listing being written.
pub struct Lister<'a> {
    drives: &'a [DriveView],
    config: &'a VinumConfig,
    flags: Flags,
    pub out: String,
    shown: Shown,
}

impl<'a> Lister<'a> {
    pub fn new(drives: &'a [DriveView], config: &'a VinumConfig, flags: Flags) -> Self {
        Lister { drives, config, flags, out: String::new(), shown: Shown::default() }
    }

    /// Everything of one kind (`gv_ld`, `gv_lv`, `gv_lp`, `gv_ls`), or all four, a blank line
    /// between them.
    pub fn all(&mut self, kind: Kind) {
        let config = self.config;
        match kind {
            Kind::All => {
                for (i, k) in [Kind::Drives, Kind::Volumes, Kind::Plexes, Kind::Subdisks].into_iter().enumerate() {
                    if i > 0 {
                        self.out.push('\n');
                    }
                    self.all(k);
                }
            }
            Kind::Drives => {
                self.out += &plural(self.drives.len(), "drive", "drives");
                for d in self.drives {
                    self.drive(d);
                }
            }
            Kind::Volumes => {
                self.out += &plural(config.volumes.len(), "volume", "volumes");
                for v in &config.volumes {
                    self.volume(v);
                }
            }
            Kind::Plexes => {
                self.out += &plural(config.plexes.len(), "plex", "plexes");
                for p in &config.plexes {
                    self.plex(p);
                }
            }
            Kind::Subdisks => {
                self.out += &plural(config.subdisks.len(), "subdisk", "subdisks");
                for s in &config.subdisks {
                    self.subdisk(s);
                }
            }
        }
    }

    /// Named objects (`gv_list` with arguments): each of the kind given (any kind for
    /// `list`), looked up as `gv_object_type` does: volumes, plexes, subdisks, then drives.
    /// As in gvinum, one name that is wrong means nothing is printed.
    pub fn named(&mut self, kind: Kind, names: &[String]) -> CliResult {
        let config = self.config;
        let mut first_error: Option<String> = None;
        let drives = self.drives;
        for name in names {
            let volume = config.volume(name);
            let plex = config.plex(name);
            let subdisk = config.subdisk(name);
            let drive = drives.iter().find(|d| &d.name == name);
            let wrong = |what: &str| Some(format!("'{name}' is not a {what}"));
            let error = match kind {
                Kind::All => {
                    if let Some(v) = volume {
                        self.volume(v);
                        None
                    } else if let Some(p) = plex {
                        self.plex(p);
                        None
                    } else if let Some(s) = subdisk {
                        self.subdisk(s);
                        None
                    } else if let Some(d) = drive {
                        self.drive(d);
                        None
                    } else {
                        Some(format!("unknown object '{name}'"))
                    }
                }
                Kind::Volumes => volume.map(|v| self.volume(v)).map_or_else(|| wrong("volume"), |()| None),
                Kind::Plexes => plex.map(|p| self.plex(p)).map_or_else(|| wrong("plex"), |()| None),
                Kind::Subdisks => subdisk.map(|s| self.subdisk(s)).map_or_else(|| wrong("subdisk"), |()| None),
                Kind::Drives => drive.map(|d| self.drive(d)).map_or_else(|| wrong("drive"), |()| None),
            };
            if first_error.is_none() {
                first_error = error;
            }
        }
        match first_error {
            Some(e) => err(format!("can't get configuration: {e}")),
            None => Ok(()),
        }
    }

    /// `gv_ldi`.
    fn drive(&mut self, d: &DriveView) {
        note(&mut self.shown.drives, &d.name);
        let mb = |b: u64| b / MEGABYTE;
        let o = &mut self.out;
        if self.flags.v {
            let used = d.size - d.avail;
            let _ = writeln!(o, "Drive {}:\tDevice {}", d.name, d.device);
            let _ = writeln!(o, "\t\tSize: {:16} bytes ({} MB)", d.size, mb(d.size));
            let _ = writeln!(o, "\t\tUsed: {used:16} bytes ({} MB)", mb(used));
            let _ = writeln!(o, "\t\tAvailable: {:11} bytes ({} MB)", d.avail, mb(d.avail));
            let _ = writeln!(o, "\t\tState: {}", d.state);
            let _ = writeln!(o, "\t\tFlags: {}", u8::from(d.referenced));
            if self.flags.vv {
                let _ = writeln!(o, "\t\tFree list contains {} entries:", d.free.len());
                let _ = writeln!(o, "\t\t   Offset\t     Size");
                for (offset, length) in &d.free {
                    let _ = writeln!(o, "\t\t{offset:9}\t{length:9}");
                }
            }
        } else {
            let percent = if d.size > 0 { u128::from(d.avail) * 100 / u128::from(d.size) } else { 0 };
            let _ = writeln!(
                o,
                "D {:<21} State: {}\t{}\tA: {}/{} MB ({percent}%)",
                d.name,
                d.state,
                d.shown,
                mb(d.avail),
                mb(d.size)
            );
        }
        if self.flags.r {
            let mut on_drive: Vec<&Subdisk> = self.config.subdisks.iter().filter(|s| s.drive == d.name).collect();
            on_drive.sort_by_key(|s| s.drive_offset);
            for s in on_drive {
                self.subdisk(s);
            }
        }
    }

    /// `gv_lvi`.
    fn volume(&mut self, v: &Volume) {
        note(&mut self.shown.volumes, &v.name);
        let config = self.config;
        let size = config.volume_size(&v.name).unwrap_or(0);
        let plexes = config.plexes_of(&v.name);
        let o = &mut self.out;
        if self.flags.v {
            let _ = writeln!(o, "Volume {}:\tSize: {size} bytes ({} MB)", v.name, size / MEGABYTE);
            let _ = writeln!(o, "\t\tState: {}", v.state);
        } else {
            let _ = writeln!(
                o,
                "V {:<21} State: {}\tPlexes: {:7}\tSize: {}",
                v.name,
                v.state,
                plexes.len(),
                roughlength(size, false)
            );
        }
        if self.flags.vv {
            for (i, p) in plexes.iter().enumerate() {
                let size = config.plex_size(&p.name).unwrap_or(0);
                let _ = writeln!(o, "\t\tPlex {i:2}:\t{}\t({}), {}", p.name, p.state, roughlength(size, false));
            }
        }
        if self.flags.r {
            for p in plexes {
                self.plex(p);
            }
        }
    }

    /// `gv_lpi`.
    fn plex(&mut self, p: &Plex) {
        note(&mut self.shown.plexes, &p.name);
        let config = self.config;
        let size = config.plex_size(&p.name).unwrap_or(0);
        let members = config.subdisks_of(&p.name);
        let o = &mut self.out;
        if self.flags.v {
            let _ = writeln!(o, "Plex {}:\tSize:\t{size:9} bytes ({} MB)", p.name, size / MEGABYTE);
            let _ = writeln!(o, "\t\tSubdisks: {:8}", members.len());
            let _ = writeln!(o, "\t\tState: {}", p.state);
            // As in the kernel, a concat plex's organization line has no newline of its own.
            let _ = write!(o, "\t\tOrganization: {}", p.organization);
            if let Some(stripe_size) = p.organization.stripe_size() {
                let _ = writeln!(o, "\tStripe size: {}", roughlength(stripe_size, true));
            }
            let _ = writeln!(o, "\t\tFlags: 0");
            if let Some(volume) = p.volume.as_deref().filter(|v| config.volume(v).is_some()) {
                let _ = writeln!(o, "\t\tPart of volume {volume}");
            }
        } else {
            let org = match p.organization {
                PlexOrganization::Concat => "C",
                PlexOrganization::Striped { .. } => "S",
                PlexOrganization::Raid5 { .. } => "R5",
            };
            let _ = writeln!(
                o,
                "P {:<18} {org:>2} State: {}\tSubdisks: {:5}\tSize: {}",
                p.name,
                p.state,
                members.len(),
                roughlength(size, false)
            );
        }
        if self.flags.vv {
            for (i, s) in members.iter().enumerate() {
                let _ = writeln!(o, "\t\tSubdisk {i}:\t{}", s.name);
                let _ = writeln!(o, "\t\t  state: {}\tsize {:11} ({} MB)", s.state, s.length, s.length / MEGABYTE);
                if p.organization == PlexOrganization::Concat {
                    let offset = s.membership.as_ref().map_or(0, |m| m.plex_offset);
                    let _ = writeln!(o, "\t\t\toffset {offset:9} (0x{offset:x})");
                }
            }
        }
        if self.flags.r {
            for s in members {
                self.subdisk(s);
            }
        }
    }

    /// `gv_lsi`.
    fn subdisk(&mut self, s: &Subdisk) {
        note(&mut self.shown.subdisks, &s.name);
        let drive = self.drives.iter().find(|d| d.name == s.drive);
        let on_placeholder = drive.is_none_or(|d| d.referenced);
        let flags = if on_placeholder { 2 } else { 0 } | if s.state == SubdiskState::Up { 4 } else { 0 };
        let progress = match s.state {
            SubdiskState::Initializing => Some(("Initialized", "I")),
            SubdiskState::Reviving => Some(("Revived", "R")),
            _ => None,
        };
        let in_plex = s.membership.as_ref().filter(|m| self.config.plex(&m.plex).is_some());
        let o = &mut self.out;
        if self.flags.v {
            let _ = writeln!(o, "Subdisk {}:", s.name);
            let _ = writeln!(o, "\t\tSize: {:16} bytes ({} MB)", s.length, s.length / MEGABYTE);
            let _ = writeln!(o, "\t\tState: {}", s.state);
            if let Some((word, _)) = progress {
                let _ = writeln!(o, "\t\t{word}: {:16} bytes (0%)", 0);
            }
            if let Some(m) = in_plex {
                let _ = writeln!(
                    o,
                    "\t\tPlex {} at offset {} ({})",
                    m.plex,
                    m.plex_offset,
                    roughlength(m.plex_offset, true)
                );
            }
            let _ = writeln!(
                o,
                "\t\tDrive {} ({}) at offset {} ({})",
                s.drive,
                drive.map_or("*missing*", |d| d.name.as_str()),
                s.drive_offset,
                roughlength(s.drive_offset, true)
            );
            let _ = writeln!(o, "\t\tFlags: {flags}");
        } else {
            let _ = write!(o, "S {:<21} State: ", s.name);
            match progress {
                Some((_, letter)) => {
                    let _ = write!(o, "{letter} 0%\t");
                }
                None => {
                    let _ = write!(o, "{}\t", s.state);
                }
            }
            let _ = writeln!(o, "D: {:<12} Size: {}", s.drive, roughlength(s.length, false));
        }
    }

    /// The objects shown, as JSON.
    pub fn json(&self) -> Value {
        let config = self.config;
        let drives: Vec<Value> = self
            .shown
            .drives
            .iter()
            .filter_map(|n| self.drives.iter().find(|d| &d.name == n))
            .map(|d| {
                let mut on: Vec<&Subdisk> = config.subdisks.iter().filter(|s| s.drive == d.name).collect();
                on.sort_by_key(|s| s.drive_offset);
                json!({
                    "name": d.name, "state": d.state, "device": if d.referenced { Value::Null } else { json!(d.shown) },
                    "size": d.size, "used": d.size - d.avail, "available": d.avail,
                    "subdisks": on.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
                })
            })
            .collect();
        let volumes: Vec<Value> = self
            .shown
            .volumes
            .iter()
            .filter_map(|n| config.volume(n))
            .map(|v| {
                json!({
                    "name": v.name, "state": v.state.name(), "size": config.volume_size(&v.name),
                    "plexes": config.plexes_of(&v.name).iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
                })
            })
            .collect();
        let plexes: Vec<Value> = self
            .shown
            .plexes
            .iter()
            .filter_map(|n| config.plex(n))
            .map(|p| {
                json!({
                    "name": p.name, "organization": p.organization.name(),
                    "stripe_size": p.organization.stripe_size(), "state": p.state.name(),
                    "size": config.plex_size(&p.name), "volume": p.volume,
                    "subdisks": config.subdisks_of(&p.name).iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
                })
            })
            .collect();
        let subdisks: Vec<Value> = self
            .shown
            .subdisks
            .iter()
            .filter_map(|n| config.subdisk(n))
            .map(|s| {
                json!({
                    "name": s.name, "state": s.state.name(), "size": s.length,
                    "drive": s.drive, "drive_offset": s.drive_offset,
                    "plex": s.membership.as_ref().map(|m| m.plex.as_str()),
                    "plex_offset": s.membership.as_ref().map(|m| m.plex_offset),
                })
            })
            .collect();
        json!({ "drives": drives, "volumes": volumes, "plexes": plexes, "subdisks": subdisks })
    }
}

pub fn run(kind: Kind, args: &ListArgs) -> CliResult {
    // Arguments that are files, block devices or NBD URIs are devices to look at; the rest are
    // names.
    let (devices, names): (Vec<&String>, Vec<&String>) =
        args.args.iter().partition(|a| super::drives::is_device_argument(a));
    let devices: Vec<std::path::PathBuf> = devices.into_iter().map(Into::into).collect();
    let names: Vec<String> = names.into_iter().cloned().collect();
    let set = DriveSet::start(&devices, &args.search, &[])?;
    set.report_skipped(false)?;
    let config = set.config();
    let views = set.views(&config);
    let flags = Flags { r: args.r, v: args.v || args.very_verbose, vv: args.very_verbose };
    let mut lister = Lister::new(&views, &config, flags);
    if names.is_empty() {
        lister.all(kind);
    } else {
        lister.named(kind, &names)?;
    }
    if args.json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&lister.json()).expect("JSON")))
    } else {
        emit(&lister.out)
    }
}
