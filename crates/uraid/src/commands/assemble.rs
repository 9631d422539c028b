//! `uraid assemble`: start an md array under a name, as `mdadm --assemble` does, served over
//! NBD from the runtime directory (`runtime_dir`): `NAME/nbd.sock`, managed through
//! `NAME/control.sock`.
//!
//! The array runs in the same code as `uraid serve`: in the background it is this executable
//! started again as `uraid serve` in a session of its own (`setsid`), its output going to
//! `NAME/log`; with `--foreground` (a service manager's way) `serve` runs in this process. The
//! name is claimed before the array starts (its lock goes to the serving process, see
//! `runtime_dir`), and the command returns once the control socket answers, or with the log's
//! last lines if the array could not start.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::Value;
use uraid_md_format::uuid::{format_md, parse_md};

use super::{err, open_and_probe, scan_groups, CliError, CliResult};
use crate::runtime_dir::{ArrayDir, Claim, RuntimeDir};
use crate::{array_name, mdadm_conf};
use crate::{AssembleArgs, ServeArgs};

/// How long an array may take to start serving before `assemble` gives up waiting (it keeps
/// starting in the background). Assembly reads superblocks, and replays a partial parity log
/// after a crash; both are quick next to this.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Log lines shown when an array could not start.
const LOG_TAIL_LINES: usize = 15;

/// What assembly needs to know of an array before starting it: its members and identity.
struct Found {
    members: Vec<PathBuf>,
    uuid: [u8; 16],
    /// md's name as its freshest superblock has it (`homehost:name` or `name`).
    md_name: String,
    /// The name a configuration file's ARRAY line gives it (`/dev/md/NAME`).
    configured_name: Option<String>,
}

pub fn run(args: &AssembleArgs) -> CliResult {
    if let Some(name) = &args.name {
        array_name::check(name)?;
    }
    let runtime = RuntimeDir::from_env()?;
    let arrays = find_arrays(args)?;
    if arrays.len() > 1 && (args.name.is_some() || args.foreground) {
        let flag = if args.foreground { "--foreground" } else { "--name" };
        return err(format!(
            "{flag} runs one array, and {} were found in {}: choose one with --uuid",
            arrays.len(),
            args.scan.as_deref().or(args.config.as_deref()).unwrap_or(Path::new(".")).display()
        ));
    }
    let every_found = (args.scan.is_some() || args.config.is_some()) && args.uuid.is_none() && arrays.len() > 1;
    let mut failures = 0;
    for found in &arrays {
        let name = match (&args.name, &found.configured_name) {
            (Some(n), _) | (None, Some(n)) => n.clone(),
            (None, None) => array_name::default_name(&found.md_name, &found.uuid),
        };
        if let Some(other) = running_as(&runtime, &found.uuid)? {
            let uuid = format_md(&found.uuid);
            if every_found {
                // mdadm --assemble --scan passes over arrays already active.
                eprintln!("uraid: array {uuid} is already running as {other}");
                continue;
            }
            return err(format!("array {uuid} is already running as {other}; `uraid stop {other}` stops it"));
        }
        let result = if args.foreground {
            foreground(&runtime, &name, found, args)
        } else {
            background(&runtime, &name, found, args)
        };
        if let Err(e) = result {
            if arrays.len() == 1 {
                return Err(e);
            }
            eprintln!("uraid: {e}");
            failures += 1;
        }
    }
    match failures {
        0 => Ok(()),
        n => err(format!("{n} of {} arrays did not start", arrays.len())),
    }
}

/// The arrays to start: of the members given, of the array `--uuid` under `--scan DIR`, or
/// every array found under it, or those a configuration file's ARRAY lines describe.
fn find_arrays(args: &AssembleArgs) -> CliResult<Vec<Found>> {
    if args.uuid.is_some() && args.scan.is_none() && args.config.is_none() {
        return err("--uuid needs --scan DIR or --config FILE to search for members");
    }
    if let Some(config) = &args.config {
        return configured_arrays(config, args.uuid.as_deref());
    }
    let groups = match &args.scan {
        None => vec![args.members.clone()],
        Some(dir) => {
            if !args.members.is_empty() {
                return err("give the members or --scan DIR, not both");
            }
            let groups = scan_groups(dir)?;
            let groups: Vec<Vec<PathBuf>> = match &args.uuid {
                Some(u) => {
                    let want = parse_md(u).map_err(|e| CliError(format!("--uuid={u}: {e}")))?;
                    groups.into_iter().filter(|(id, _)| *id == want).map(|(_, g)| g).collect()
                }
                None => groups.into_iter().map(|(_, g)| g).collect(),
            };
            if groups.is_empty() {
                return err(match &args.uuid {
                    Some(u) => format!("{}: no members of array {u} found", dir.display()),
                    None => format!("{}: no md members found", dir.display()),
                });
            }
            groups
        }
    };
    groups.into_iter().map(|members| identify(&members)).collect()
}

/// The arrays the ARRAY lines of the mdadm.conf-style file at `path` describe (the one of
/// UUID `only`, if given), each with the members found among its candidate devices: those
/// whose superblock has the line's UUID and name.
fn configured_arrays(path: &Path, only: Option<&str>) -> CliResult<Vec<Found>> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    let config = uraid_md::conf::parse(&text).map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    let at = |line: usize, what: String| CliError(format!("{} line {line}: {what}", path.display()));
    let only = only.map(|u| parse_md(u).map_err(|e| CliError(format!("--uuid={u}: {e}")))).transpose()?;
    let mut arrays = Vec::new();
    for array in &config.arrays {
        let Some(name) = mdadm_conf::device_name(array) else {
            // `<ignore>`, or a line naming no device (as examine prints a nameless array):
            // nothing to start it under.
            continue;
        };
        let uuid = array.uuid;
        if only.is_some() && uuid != only {
            continue;
        }
        let name = name.to_string();
        array_name::check(&name).map_err(|e| at(array.line, e.to_string()))?;
        let members: Vec<PathBuf> = mdadm_conf::candidates(&config, array)
            .into_iter()
            .filter(|p| is_member_of(p, uuid.as_ref(), array.name.as_deref()))
            .collect();
        if members.is_empty() {
            return Err(at(array.line, format!("no members of {} found", array.devname.as_deref().unwrap_or("?"))));
        }
        arrays.push(Found { configured_name: Some(name), ..identify(&members)? });
    }
    if arrays.is_empty() {
        return err(match only {
            Some(u) => format!("{}: no ARRAY line has UUID {}", path.display(), format_md(&u)),
            None => format!("{}: no ARRAY lines", path.display()),
        });
    }
    Ok(arrays)
}

/// Whether the device at `path` carries an md superblock of the array `uuid` (if given) named
/// `name` (if given; with or without its `host:` part, as mdadm compares names).
fn is_member_of(path: &Path, uuid: Option<&[u8; 16]>, name: Option<&str>) -> bool {
    let Ok((_, Some(probed))) = open_and_probe(path) else { return false };
    let info = probed.superblock.info();
    let own = |n: &str| n.split_once(':').map_or(n, |(_, own)| own).to_string();
    uuid.is_none_or(|u| *u == info.array_uuid) && name.is_none_or(|n| n == info.name || own(n) == own(&info.name))
}

/// The identity of the array `members` belong to, from the freshest superblock among them
/// (the one assembly trusts). Members are only read.
fn identify(members: &[PathBuf]) -> CliResult<Found> {
    if members.is_empty() {
        return err("no members given");
    }
    let mut freshest: Option<(u64, [u8; 16], String)> = None;
    for path in members {
        let (_, probed) = open_and_probe(path)?;
        let Some(p) = probed else { continue };
        let info = p.superblock.info();
        if freshest.as_ref().is_none_or(|(events, _, _)| info.events > *events) {
            freshest = Some((info.events, info.array_uuid, info.name.clone()));
        }
    }
    let Some((_, uuid, md_name)) = freshest else {
        let list: Vec<String> = members.iter().map(|m| m.display().to_string()).collect();
        return err(format!("no md superblock on {}", list.join(", ")));
    };
    let members = members
        .iter()
        .map(|m| std::path::absolute(m).map_err(|e| CliError(format!("{}: {e}", m.display()))))
        .collect::<CliResult<Vec<_>>>()?;
    Ok(Found { members, uuid, md_name, configured_name: None })
}

/// The name array `uuid` already runs under, if it runs.
fn running_as(runtime: &RuntimeDir, uuid: &[u8; 16]) -> CliResult<Option<String>> {
    let want = format_md(uuid);
    for array in runtime.running()? {
        if let Ok(status) = super::ctl::status(&array.dir.control_socket()) {
            if status["uuid"].as_str() == Some(want.as_str()) {
                return Ok(Some(array.dir.name().to_string()));
            }
        }
    }
    Ok(None)
}

/// `uraid serve`'s arguments for the array: its sockets in its folder, the settings given.
fn serve_arguments(dir: &ArrayDir, found: &Found, args: &AssembleArgs) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![
        format!("--listen=unix:{}", dir.nbd_socket().display()).into(),
        "--control".into(),
        dir.control_socket().into(),
    ];
    if args.read_only {
        argv.push("--read-only".into());
    }
    for (flag, value) in [
        ("--speed-limit-min", &args.speed_limit_min),
        ("--speed-limit-max", &args.speed_limit_max),
        ("--stripe-cache", &args.stripe_cache),
    ] {
        if let Some(v) = value {
            argv.push(format!("{flag}={v}").into());
        }
    }
    // Members after `--`: a member path may begin with a dash.
    argv.push("--".into());
    argv.extend(found.members.iter().map(|m| m.clone().into_os_string()));
    argv
}

/// Start the array as a process of its own and wait until it serves.
fn background(runtime: &RuntimeDir, name: &str, found: &Found, args: &AssembleArgs) -> CliResult {
    let claim = runtime.claim(name)?;
    match start_server(&claim, found, args) {
        Ok(status) => {
            report_started(claim.dir(), &status);
            Ok(())
        }
        Err(e) => {
            let _ = claim.abandon();
            Err(e)
        }
    }
}

fn start_server(claim: &Claim, found: &Found, args: &AssembleArgs) -> CliResult<Value> {
    let dir = claim.dir();
    let log_path = dir.log_file();
    let log = File::create(&log_path).map_err(|e| CliError(format!("{}: {e}", log_path.display())))?;
    let log_err = log.try_clone().map_err(|e| CliError(format!("{}: {e}", log_path.display())))?;
    let exe = std::env::current_exe().map_err(|e| CliError(format!("finding the uraid executable: {e}")))?;
    let mut command = Command::new(exe);
    command
        .arg("serve")
        .args(serve_arguments(dir, found, args))
        // The server's standard input is the name's lock: the lock belongs to the open file,
        // so the server holds it for as long as it lives (see `runtime_dir`).
        .stdin(Stdio::from(claim.lock_for_server()?))
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        // A daemon keeps no folder busy; every path it is given is absolute.
        .current_dir("/");
    // SAFETY: setsid is async-signal-safe and touches nothing of the parent: the server gets a
    // session of its own, so the terminal's hang-up or Ctrl-C does not reach it.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| CliError(format!("starting uraid serve: {e}")))?;
    claim.write_pid(child.id())?;
    wait_until_serving(&mut child, dir)
}

/// Wait until the server's control socket answers (its status is returned), or the server
/// has ended (its log says why).
fn wait_until_serving(child: &mut Child, dir: &ArrayDir) -> CliResult<Value> {
    let started = Instant::now();
    loop {
        if let Some(exit) = child.try_wait().map_err(|e| CliError(format!("waiting for uraid serve: {e}")))? {
            return err(format!(
                "array {} did not start ({exit}); the end of its log {}:\n{}",
                dir.name(),
                dir.log_file().display(),
                log_tail(&dir.log_file(), LOG_TAIL_LINES).trim_end()
            ));
        }
        if let Ok(status) = super::ctl::status(&dir.control_socket()) {
            return Ok(status);
        }
        if started.elapsed() > START_TIMEOUT {
            return err(format!(
                "array {} is not serving after {} s; it goes on starting in the background (pid {}, log {})",
                dir.name(),
                START_TIMEOUT.as_secs(),
                child.id(),
                dir.log_file().display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What assembly said (members left out, degraded, a resync owed), then mdadm's line
/// ("has been started with 4 drives") and where the export is.
fn report_started(dir: &ArrayDir, status: &Value) {
    let said = log_tail(&dir.log_file(), LOG_TAIL_LINES);
    for line in said.lines().filter(|l| !l.starts_with("uraid: serving ")) {
        eprintln!("{line}");
    }
    eprintln!("uraid: array {} has been started with {}.", dir.name(), drives_text(status));
    eprintln!(
        "uraid: {} is served over NBD at {} ({}); control socket {}, log {}",
        dir.name(),
        dir.nbd_socket().display(),
        dir.nbd_uri(),
        dir.control_socket().display(),
        dir.log_file().display()
    );
}

/// mdadm's count of an array's drives: "4 drives", "3 drives (out of 4)", with "and 1
/// rebuilding" when a member is being rebuilt.
pub fn drives_text(status: &Value) -> String {
    let members = status["members"].as_array().cloned().unwrap_or_default();
    let active = members.iter().filter(|m| m["state"] == "in_sync").count();
    let rebuilding = members.iter().filter(|m| m["state"] == "recovering").count();
    let plural = |n: usize| if n == 1 { "drive" } else { "drives" };
    let mut text = format!("{active} {}", plural(active));
    if active < members.len() {
        text.push_str(&format!(" (out of {})", members.len()));
    }
    if rebuilding > 0 {
        text.push_str(&format!(" and {rebuilding} rebuilding"));
    }
    text
}

/// The last `lines` lines of the log at `path` (empty if there is none).
fn log_tail(path: &Path, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    all[start..].iter().map(|l| format!("{l}\n")).collect()
}

/// `uraid serve` in this process, under the claimed name; the folder is removed when it ends.
fn foreground(runtime: &RuntimeDir, name: &str, found: &Found, args: &AssembleArgs) -> CliResult {
    let claim = runtime.claim(name)?;
    let serve = match ServeCommandLine::try_parse_from(serve_arguments(claim.dir(), found, args)) {
        Ok(cli) => cli.serve,
        Err(e) => {
            let _ = claim.abandon();
            return err(format!("assembling the serve arguments: {e}"));
        }
    };
    claim.write_pid(std::process::id())?;
    eprintln!(
        "uraid: array {name} runs in the foreground, served over NBD at {} ({}); control socket {}",
        claim.dir().nbd_socket().display(),
        claim.dir().nbd_uri(),
        claim.dir().control_socket().display()
    );
    // The control socket answers once `serve` has started the array; a service manager
    // waiting for readiness is told then.
    let control = claim.dir().control_socket();
    std::thread::Builder::new()
        .name("readiness".into())
        .spawn(move || {
            while super::ctl::status(&control).is_err() {
                std::thread::sleep(Duration::from_millis(20));
            }
            crate::notify::ready();
        })
        .map_err(|e| CliError(format!("starting the readiness thread: {e}")))?;
    let served = super::serve::run(&serve);
    let removed = claim.finish();
    served?;
    Ok(removed?)
}

/// `uraid serve`'s arguments parsed as the `serve` command parses them, so that the array
/// runs the same in the foreground as in the background.
#[derive(Parser)]
#[command(no_binary_name = true)]
struct ServeCommandLine {
    #[command(flatten)]
    serve: ServeArgs,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn drives_are_counted_as_mdadm_counts_them() {
        let status =
            |states: &[&str]| json!({"members": states.iter().map(|s| json!({"state": s})).collect::<Vec<_>>()});
        assert_eq!(drives_text(&status(&["in_sync"; 4])), "4 drives");
        assert_eq!(drives_text(&status(&["in_sync", "missing", "in_sync"])), "2 drives (out of 3)");
        assert_eq!(drives_text(&status(&["in_sync", "recovering"])), "1 drive (out of 2) and 1 rebuilding");
    }

    /// The arguments given to the background server parse as `uraid serve`'s, sockets in the
    /// array's folder, settings passed on.
    #[test]
    fn serve_arguments_parse_as_serves() {
        let rt = RuntimeDir::at(PathBuf::from("/rt"));
        let dir = rt.array_dir("data").unwrap();
        let found = Found {
            members: vec!["/m/-odd.img".into(), "/m/d1.img".into()],
            uuid: [0; 16],
            md_name: String::new(),
            configured_name: None,
        };
        #[derive(Parser)]
        struct Assemble {
            #[command(flatten)]
            args: AssembleArgs,
        }
        let args = Assemble::try_parse_from(["assemble", "--read-only", "--speed-limit-max=5M", "x"]).unwrap().args;
        let serve = ServeCommandLine::try_parse_from(serve_arguments(&dir, &found, &args)).unwrap().serve;
        assert_eq!(serve.listen, "unix:/rt/data/nbd.sock");
        assert_eq!(serve.control.as_deref(), Some(Path::new("/rt/data/control.sock")));
        assert!(serve.read_only);
        assert_eq!(serve.speed_limit_max.as_deref(), Some("5M"));
        assert_eq!(serve.source.members, found.members);
    }
}
