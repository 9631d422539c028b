//! `printconfig`: the configuration as gvinum prints it, a create description that makes the
//! same objects again.
//!
//! gvinum's `printconfig` prints a comment line, `# Vinum configuration of HOST, saved at
//! CTIME` (`ctime` ends it), then what the kernel's `gv_format_config` writes with `ondisk`
//! 0: first a `drive NAME device /dev/DEVICE` line for every drive, then the volume, plex and
//! subdisk lines of the on-disk text without their `state` keywords, each list in the
//! kernel's order. Here a drive's device is the path it was found at (the same text for a
//! device under /dev).

use std::fmt::Write as _;

use uraid_vinum_format::drive_layout::SECTOR_SIZE;
use uraid_vinum_format::VinumConfig;

use super::super::{emit, CliResult};
use super::drives::{hostname, now, DriveSet, DriveView};
use super::DrivesArgs;

/// `gv_format_config(sc, sb, 0, prefix)`.
pub fn format_printconfig(drives: &[DriveView], config: &VinumConfig, prefix: &str) -> String {
    let sectors = |bytes: u64| bytes / SECTOR_SIZE;
    let mut out = String::new();
    for d in drives {
        let _ = writeln!(out, "{prefix}drive {} device {}", d.name, d.shown);
    }
    for v in &config.volumes {
        let _ = writeln!(out, "{prefix}volume {}", v.name);
    }
    for p in &config.plexes {
        let _ = write!(out, "{prefix}plex name {} org {} ", p.name, p.organization.name());
        if let Some(stripe_size) = p.organization.stripe_size() {
            let _ = write!(out, "{}s ", sectors(stripe_size));
        }
        // The kernel writes `vol` only for a plex attached to a volume it has.
        if let Some(volume) = p.volume.as_deref().filter(|v| config.volume(v).is_some()) {
            let _ = write!(out, "vol {volume}");
        }
        out.push('\n');
    }
    for s in &config.subdisks {
        let _ = write!(
            out,
            "{prefix}sd name {} drive {} len {}s driveoffset {}s",
            s.name,
            s.drive,
            sectors(s.length),
            sectors(s.drive_offset)
        );
        if let Some(m) = s.membership.as_ref().filter(|m| config.plex(&m.plex).is_some()) {
            let _ = write!(out, " plex {} plexoffset {}s", m.plex, sectors(m.plex_offset));
        }
        out.push('\n');
    }
    out
}

/// `ctime(3)`: "Thu Nov 24 18:22:48 1986\n", local time.
pub fn ctime(seconds: u64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let t = seconds as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value; localtime_r fills it from `t`.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return format!("{seconds}\n");
    }
    format!(
        "{} {}{:3} {:02}:{:02}:{:02} {}\n",
        DAYS[tm.tm_wday.rem_euclid(7) as usize],
        MONTHS[tm.tm_mon.rem_euclid(12) as usize],
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        tm.tm_year + 1900
    )
}

pub fn run(args: &DrivesArgs) -> CliResult {
    let set = DriveSet::start(&args.devices, &args.search, &[])?;
    set.report_skipped(false)?;
    let config = set.config();
    let views = set.views(&config);
    let head = format!("# Vinum configuration of {}, saved at {}", hostname(), ctime(now().seconds));
    emit(&(head + &format_printconfig(&views, &config, "")))
}
