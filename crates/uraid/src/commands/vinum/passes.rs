//! The verbs that run over a volume's data: `start` (revive what is stale, as
//! `geom_vinum_init.c` does), `checkparity` and `rebuildparity` (a raid5 plex's rows, each
//! XORed and compared with its parity).
//!
//! They run through the engine like every other access: `start` serves the volume until the
//! service's rebuild of its stale subdisks is done (the rebuild `serve` would run, with its
//! progress and speed limit), and the parity verbs send one check or repair request per row
//! of the plex, counting the rows whose parity disagrees.

use std::path::PathBuf;

use clap::Args;
use uraid_device::service::{ArrayService, ServiceConfig, SpeedLimits};
use uraid_device::OpenArray;
use uraid_vinum::VolumePlan;
use uraid_vinum_format::{PlexOrganization, PlexState, SubdiskState, VinumConfig};

use super::super::source::open_volume;
use super::super::{err, report_stop, CliError, CliResult};
use super::drives::{DriveSet, Search};
use crate::control::status_json;
use crate::size::parse_size;

#[derive(Args)]
pub struct StartArgs {
    /// Ignored, as gvinum ignores it (the size of the requests that initialise a plex).
    #[arg(short = 'S', value_name = "SIZE")]
    pub s: Option<String>,
    /// Upper speed of the rebuild in bytes per second (suffixes K, M, G). Default 200M.
    #[arg(long)]
    pub speed_limit_max: Option<String>,
    #[command(flatten)]
    pub search: Search,
    /// Devices that hold the drives (paths that exist), and the volumes or plexes to start.
    #[arg(required = true)]
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct ParityArgs {
    /// From the start of the plex (uraid keeps no check pointer between runs, so always).
    #[arg(short)]
    pub f: bool,
    /// Say every row whose parity disagrees.
    #[arg(short)]
    pub v: bool,
    #[command(flatten)]
    pub search: Search,
    /// Devices that hold the drives (paths that exist), and the raid5 plex.
    #[arg(required = true)]
    pub args: Vec<String>,
}

/// Split arguments into devices (paths that exist, NBD URIs) and object names, as `list` does.
fn devices_and_names(args: &[String]) -> (Vec<PathBuf>, Vec<String>) {
    let (devices, names): (Vec<&String>, Vec<&String>) = args
        .iter()
        .partition(|a| std::path::Path::new(a).exists() || uraid_device::Member::is_uri(std::path::Path::new(a)));
    (devices.into_iter().map(PathBuf::from).collect(), names.into_iter().cloned().collect())
}

/// The merged configuration of the drives among `devices` and under `--scan`, with the names
/// of the drives found and their paths.
fn configuration(devices: &[PathBuf], search: &Search) -> CliResult<(VinumConfig, Vec<(String, PathBuf)>)> {
    let set = DriveSet::start(devices, search, &[])?;
    set.report_skipped(false)?;
    if set.startup.drives.is_empty() {
        return err("no gvinum drives found: name their devices or give --scan DIR");
    }
    let found =
        set.startup.drives.iter().map(|d| (d.drive.header.label.name.clone(), set.path_of(d).to_path_buf())).collect();
    Ok((set.config(), found))
}

/// `gvinum start VOLUME|PLEX...`: revive every stale subdisk of the volume (rebuilt from its
/// other plexes, or from a raid5 plex's parity). A subdisk or drive cannot be started, as in
/// gvinum.
pub fn start(args: &StartArgs) -> CliResult {
    let (devices, names) = devices_and_names(&args.args);
    if names.is_empty() {
        return err("start: name the volumes or plexes to start");
    }
    let (config, found) = configuration(&devices, &args.search)?;
    let mut volumes: Vec<String> = Vec::new();
    for name in &names {
        let volume = if config.volume(name).is_some() {
            name.clone()
        } else if let Some(p) = config.plex(name) {
            p.volume.clone().ok_or_else(|| CliError(format!("cannot start plex '{name}': it is in no volume")))?
        } else if config.subdisk(name).is_some() || config.drive_names().contains(&name.as_str()) {
            return err(format!("cannot start '{name}' - not yet supported (start its volume or plex, as in gvinum)"));
        } else {
            return err(format!("unknown object '{name}'"));
        };
        if !volumes.contains(&volume) {
            volumes.push(volume);
        }
    }
    let mut speed = SpeedLimits::default();
    if let Some(max) = &args.speed_limit_max {
        speed.max_bytes_per_sec = parse_size(max, 1).map_err(CliError)?.max(1);
    }
    for volume in &volumes {
        if must_initialise(&config, volume, &found) {
            initialise(&found, volume)?;
        } else {
            start_volume(&devices, &args.search, volume, speed)?;
        }
    }
    Ok(())
}

/// Whether starting `volume` initialises it, as `gv_start_plex` does a raid5 plex that is
/// down (or initialising): too few of its subdisks are up to rebuild the others from parity,
/// every drive is there, and the plex says so.
fn must_initialise(config: &VinumConfig, volume: &str, found: &[(String, PathBuf)]) -> bool {
    let names: Vec<String> = found.iter().map(|(n, _)| n.clone()).collect();
    let plexes = config.plexes_of(volume);
    let [plex] = plexes.as_slice() else { return false };
    matches!(plex.organization, PlexOrganization::Raid5 { .. })
        && matches!(plex.state, PlexState::Down | PlexState::Initializing)
        && VolumePlan::new(config, volume, &names).is_err()
        && VolumePlan::initialising(config, volume, &names).is_ok()
}

/// Zero every subdisk of a raid5 volume's plex through the engine (whole rows, so every row's
/// parity is right), then record every subdisk up.
fn initialise(found: &[(String, PathBuf)], volume: &str) -> CliResult {
    let paths: Vec<&PathBuf> = found.iter().map(|(_, p)| p).collect();
    let mut array = OpenArray::open_volume_to_initialise(&paths, volume)?;
    eprintln!(
        "uraid: volume {volume}: initialising its raid5 plex: every subdisk is zero-filled, as gvinum start does"
    );
    let size = array.size();
    let step = array.engine().geometry().stripe_data_bytes().expect("a raid5 plex") * 64;
    let mut at = 0;
    while at < size {
        let len = step.min(size - at);
        array.discard(at, len)?;
        at += len;
    }
    array.flush()?;
    array.record_roles()?;
    array.close()?;
    println!("volume {volume}: initialised");
    Ok(())
}

fn start_volume(devices: &[PathBuf], search: &Search, volume: &str, speed: SpeedLimits) -> CliResult {
    let array = open_volume(devices, search.scan.as_deref(), volume, true)?;
    let stale: Vec<String> =
        array.vinum().expect("a vinum volume").stale_subdisks().into_iter().map(str::to_string).collect();
    // A raid5 volume not stopped cleanly has its parity rewritten too (what `serve` would do
    // first), so that it is saved clean.
    let resync = array.needs_resync();
    if stale.is_empty() && !resync {
        println!("volume {volume}: every subdisk is up; nothing to start");
        return Ok(());
    }
    let config = ServiceConfig { auto_resync: resync, speed, ..ServiceConfig::default() };
    let service = ArrayService::start(array, config);
    let handle = service.handle();
    let last = crate::progress::follow(
        || handle.status().map(|s| status_json(&s)).map_err(|e| CliError(e.to_string())),
        || handle.wait_idle().map(|s| status_json(&s)).map_err(|e| CliError(e.to_string())),
    )?;
    let report = service.stop().map_err(|e| CliError(format!("stopping volume {volume}: {e}")))?;
    report_stop(&report, false, "done");
    let outcome = last["last_sync"].as_str().unwrap_or("no result").to_string();
    let what =
        if stale.is_empty() { "rewriting its parity".to_string() } else { format!("reviving {}", stale.join(", ")) };
    if !outcome.contains("completed") || !report.failed_members.is_empty() || !report.clean {
        return err(format!("volume {volume}: {what} did not complete: {outcome}"));
    }
    if stale.is_empty() {
        println!("volume {volume}: parity rewritten; saved clean");
    } else {
        println!("volume {volume}: revived {}", stale.join(", "));
    }
    Ok(())
}

/// `gvinum checkparity` (`repair` false) and `rebuildparity` (true) of one raid5 plex.
pub fn parity(args: &ParityArgs, repair: bool) -> CliResult {
    let verb = if repair { "rebuildparity" } else { "checkparity" };
    let (devices, names) = devices_and_names(&args.args);
    let [plex] = names.as_slice() else {
        return err(format!("{verb}: name one raid5 plex"));
    };
    let (config, _) = configuration(&devices, &args.search)?;
    let Some(p) = config.plex(plex) else {
        return err(format!("{verb}: unknown plex '{plex}'"));
    };
    if !matches!(p.organization, PlexOrganization::Raid5 { .. }) {
        return err(format!("{verb}: plex '{plex}' is {}, not raid5", p.organization.name()));
    }
    // As gvinum: parity is checked only with every subdisk up (a degraded plex is started,
    // which rebuilds the missing subdisk from parity, first).
    if let Some(sd) = config.subdisks_of(plex).into_iter().find(|s| s.state != SubdiskState::Up) {
        return err(format!("{verb}: plex '{plex}' is not up: subdisk {} is {}; start it first", sd.name, sd.state));
    }
    let volume = p.volume.clone().ok_or_else(|| CliError(format!("{verb}: plex '{plex}' is in no volume")))?;
    let mut array = open_volume(&devices, args.search.scan.as_deref(), &volume, repair)?;
    if array.missing_slots().len() + array.vinum().map_or(0, |v| v.stale_subdisks().len()) > 0 {
        return err(format!("{verb}: plex '{plex}' is not up: a drive of it was not found"));
    }
    if repair {
        array.mark_dirty()?;
    }
    let (rows, bad) = each_row(&mut array, plex, repair, args.v)?;
    if repair {
        // Every row's parity now matches its data: a volume found unclean is owed nothing more.
        array.resync_done();
        let clean = array.close()?;
        if !clean {
            return err(format!("{verb}: plex '{plex}': the volume could not be recorded clean"));
        }
        println!("plex {plex}: parity rebuilt; {bad} of {rows} rows had parity that disagreed");
        return Ok(());
    }
    if bad > 0 {
        return err(format!("plex {plex}: {bad} of {rows} rows have parity that disagrees with their data; rebuildparity {plex} rewrites it"));
    }
    println!("plex {plex}: parity checked, {rows} rows, all correct");
    Ok(())
}

/// Check (or repair) every row of the volume's raid5 plex, one request per row; returns the
/// rows and how many disagreed.
///
/// A raid5 plex mirrored with other plexes is checked on its own (the plexes are not compared):
/// its rows are its own stripes.
fn each_row(array: &mut OpenArray, plex: &str, repair: bool, verbose: bool) -> CliResult<(u64, u64)> {
    let geometry = array.engine().geometry().clone();
    let in_mirror = match geometry.nested() {
        Some(nested) => {
            let index = array.vinum().and_then(|v| v.plex_index(plex)).expect("a plex of the volume");
            Some((index, nested.plexes()[index].clone()))
        }
        None => None,
    };
    let own = in_mirror.as_ref().map_or(&geometry, |(_, g)| g);
    let row_bytes = own.stripe_data_bytes().expect("a raid5 plex has stripes");
    let rows = array.size() / row_bytes;
    let bar = crate::progress::bytes_bar(rows * row_bytes, if repair { "rebuild" } else { "check" });
    let mut bad = 0;
    for row in 0..rows {
        let mismatched = match &in_mirror {
            Some((index, _)) => array.sync_plex(*index, row * row_bytes, row_bytes, repair)?,
            None => array.sync(row * row_bytes, row_bytes, repair)?,
        };
        if mismatched > 0 {
            bad += 1;
            if verbose {
                let line = format!("plex {plex}: row {row} (plex offset {}): parity disagrees", row * row_bytes);
                match &bar {
                    Some(b) => b.println(line),
                    None => eprintln!("{line}"),
                }
            }
        }
        if let Some(b) = &bar {
            b.set_position((row + 1) * row_bytes);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok((rows, bad))
}
