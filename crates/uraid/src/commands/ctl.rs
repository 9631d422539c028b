//! `uraid ctl SOCKET|NAME ...`: talk to a running `uraid serve --control=SOCKET`, or to the
//! array `uraid assemble` started under NAME (its control socket in the runtime directory).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use uraid_device::md_change::MdChange;
use uraid_device::reshape::ReshapeRequest;
use uraid_md::resize::SizeRequest;
use uraid_md::takeover::TakeoverRequest;

use super::{err, CliError, CliResult};
use crate::array_name;
use crate::runtime_dir::{RuntimeDir, RuntimeDirError};
use crate::size::parse_size;
use crate::{CtlArgs, CtlOp};

/// Send one request and read its answer.
pub fn request(socket: &Path, body: Value) -> CliResult<Value> {
    let mut conn = UnixStream::connect(socket).map_err(|e| {
        CliError(format!("{}: {e} (is `uraid serve --control={}` running?)", socket.display(), socket.display()))
    })?;
    writeln!(conn, "{body}").map_err(|e| CliError(format!("{}: {e}", socket.display())))?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line).map_err(|e| CliError(format!("{}: {e}", socket.display())))?;
    let answer: Value = serde_json::from_str(&line)
        .map_err(|e| CliError(format!("{}: the server's answer is not JSON ({e}): {line:?}", socket.display())))?;
    if answer["ok"] != Value::Bool(true) {
        return err(answer["error"].as_str().unwrap_or("request refused").to_string());
    }
    Ok(answer)
}

/// The array's status, as `status --json` prints it.
pub fn status(socket: &Path) -> CliResult<Value> {
    Ok(request(socket, json!({"op": "status"}))?["status"].clone())
}

/// The control socket `target` names: a path that exists (or has a `/`) is the socket itself;
/// otherwise it is the name of an array started by `uraid assemble`.
pub fn control_socket(target: &Path) -> CliResult<PathBuf> {
    // A valid name has no '/', so it is never mistaken for a path with one.
    let name = target.to_str().filter(|n| array_name::check(n).is_ok());
    let Some(name) = name.filter(|_| std::fs::symlink_metadata(target).is_err()) else {
        return Ok(target.to_path_buf());
    };
    let runtime = RuntimeDir::from_env()
        .map_err(|e| CliError(format!("{name}: no such control socket, and no array can be looked up by name: {e}")))?;
    match runtime.find(name) {
        Ok(array) => Ok(array.dir.control_socket()),
        Err(RuntimeDirError::NotRunning { base, .. }) => {
            err(format!("{name}: no such control socket, and no array named {name} is running (in {})", base.display()))
        }
        Err(e) => Err(e.into()),
    }
}

pub fn run(args: &CtlArgs) -> CliResult {
    let socket = control_socket(&args.socket)?;
    let socket = socket.as_path();
    match &args.op {
        CtlOp::Status { json } => print_status(&status(socket)?, *json),
        CtlOp::Check => {
            request(socket, json!({"op": "check"}))?;
            eprintln!("uraid: check started; `uraid ctl {} wait` waits for it", args.socket.display());
        }
        CtlOp::Repair => {
            request(socket, json!({"op": "repair"}))?;
            eprintln!("uraid: repair started; `uraid ctl {} wait` waits for it", args.socket.display());
        }
        CtlOp::Idle => {
            request(socket, json!({"op": "idle"}))?;
        }
        CtlOp::Add { member } => manage(socket, "add", member, false)?,
        CtlOp::Fail { member, force } => manage(socket, "fail", member, *force)?,
        CtlOp::Remove { member } => manage(socket, "remove", member, false)?,
        CtlOp::ReAdd { member } => manage(socket, "re-add", member, false)?,
        CtlOp::Grow { size, assume_clean, bitmap, bitmap_chunk, .. } if size.is_some() || bitmap.is_some() => {
            let change = super::md_change_words::md_change(
                size.as_deref(),
                *assume_clean,
                bitmap.as_deref(),
                bitmap_chunk.as_deref(),
            )?;
            change_served(&args.socket.display().to_string(), socket, change)?;
        }
        CtlOp::Grow { level: Some(level), raid_devices, add, layout, force, .. } => {
            let level =
                uraid_layout::Level::parse(level).map_err(|e| CliError(format!("ctl grow: --level={level}: {e}")))?;
            let request = TakeoverRequest {
                level: Some(level),
                raid_devices: *raid_devices,
                layout: layout.clone(),
                added: add.len() as u32,
                force: *force,
                // Not sent: the server restripes before or after the takeover where it is needed.
                restripe: true,
            };
            let answer = request_takeover(socket, &request, add)?;
            eprintln!("uraid: {}", answer["done"].as_str().unwrap_or("level changed"));
            if !add.is_empty() {
                eprintln!(
                    "uraid: the new slots are rebuilt in the background; `uraid ctl {} wait` waits for it to end",
                    args.socket.display()
                );
            }
        }
        CtlOp::Grow { raid_devices, add, chunk, layout, force, array_size, .. } => {
            let chunk_sectors = chunk.as_deref().map(super::grow_restripe::chunk_sectors).transpose()?;
            let array_size = array_size.as_deref().map(super::grow_restripe::array_size).transpose()?;
            let layout = match layout {
                None => None,
                Some(name) => {
                    // Layout names are read at the array's level, which the server says.
                    let level = status(socket)?["level"].as_str().unwrap_or_default().to_string();
                    let level = uraid_layout::Level::parse(&level)
                        .map_err(|e| CliError(format!("ctl grow: the array's level {level:?}: {e}")))?;
                    Some(super::grow_restripe::layout_at(level, name)?)
                }
            };
            let reshape = ReshapeRequest { raid_devices: *raid_devices, layout, chunk_sectors, array_size };
            let answer = request(socket, grow_request(&reshape, add, *force))?;
            eprintln!("uraid: {}", answer["done"].as_str().unwrap_or("reshape started"));
            eprintln!("uraid: `uraid ctl {} wait` waits for the reshape or rebuild to end", args.socket.display());
        }
        CtlOp::Stop => stop(socket)?,
        CtlOp::MemberLimits {
            member,
            timeout,
            reconnect_attempts,
            reconnect_budget,
            auto_readd,
            readd_first,
            readd_max,
            json,
        } => member_limits(
            socket,
            member.as_deref(),
            MemberLimitFlags {
                timeout: timeout.as_deref(),
                attempts: *reconnect_attempts,
                budget: reconnect_budget.as_deref(),
                auto_readd: auto_readd.as_deref().map(|v| v == "on"),
                readd_first: readd_first.as_deref(),
                readd_max: readd_max.as_deref(),
            },
            *json,
        )?,
        CtlOp::SpeedLimit { min, max, json } => speed_limit(socket, min.as_deref(), max.as_deref(), *json)?,
        CtlOp::Wait { json } => {
            let status = crate::progress::follow(
                || Ok(request(socket, json!({"op": "status"}))?["status"].clone()),
                || Ok(request(socket, json!({"op": "wait"}))?["status"].clone()),
            )?;
            print_status(&status, *json);
        }
    }
    Ok(())
}

/// Ask the server on `socket` to stop, and wait until it has: its control socket is removed
/// once the array is stopped and recorded clean.
pub fn stop(socket: &Path) -> CliResult {
    ask_to_stop(socket)?;
    eprintln!("uraid: {}: stopping", socket.display());
    wait_stopped(socket);
    eprintln!("uraid: {}: stopped", socket.display());
    Ok(())
}

/// Ask the server on `socket` to stop (as SIGTERM does); it answers at once.
pub fn ask_to_stop(socket: &Path) -> CliResult {
    request(socket, json!({"op": "stop"})).map(drop)
}

/// Wait until the server on `socket` no longer answers: it removes its control socket once
/// the array is stopped and recorded clean.
pub fn wait_stopped(socket: &Path) {
    while UnixStream::connect(socket).is_ok() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A device as the server is to open it: the server resolves relative paths from its own
/// directory, so an absolute path (an NBD URI is no path, and goes as written).
fn absolute(member: &Path) -> PathBuf {
    if uraid_device::Member::is_uri(member) {
        member.to_path_buf()
    } else {
        std::path::absolute(member).unwrap_or_else(|_| member.to_path_buf())
    }
}

/// The request that grows the running array onto `raid_devices` members with `add` as the new
/// devices (`uraid ctl NAME grow`, and `uraid grow` on a running array's members); `force`
/// lets a raid1 leave new slots missing.
pub fn grow_request(request: &ReshapeRequest, add: &[PathBuf], force: bool) -> Value {
    let add: Vec<String> = add.iter().map(|p| absolute(p).display().to_string()).collect();
    let ReshapeRequest { raid_devices, layout, chunk_sectors, array_size } = request;
    json!({"op": "grow", "raid_devices": raid_devices, "add": add, "chunk_sectors": chunk_sectors, "layout": layout, "array_size": array_size, "force": force})
}

/// Ask the array served on `socket` for the takeover `request`, `add` the devices for its new
/// slots; the server's answer.
pub fn request_takeover(socket: &Path, takeover: &TakeoverRequest, add: &[PathBuf]) -> CliResult<Value> {
    let add: Vec<String> = add.iter().map(|p| absolute(p).display().to_string()).collect();
    let level = takeover.level.map(|l| l.to_string());
    request(
        socket,
        json!({"op": "takeover", "level": level, "raid_devices": takeover.raid_devices, "layout": takeover.layout, "add": add, "force": takeover.force}),
    )
}

fn manage(socket: &Path, op: &str, member: &Path, force: bool) -> CliResult {
    // The server resolves relative paths from its own directory: send an absolute one (an NBD
    // URI is no path, and goes as written).
    let member = absolute(member);
    let answer = request(socket, json!({"op": op, "member": member.display().to_string(), "force": force}))?;
    eprintln!("uraid: {}", answer["done"].as_str().unwrap_or("done"));
    Ok(())
}

/// Set and/or show the speed limits: `speed_limit_min BYTES` and `speed_limit_max BYTES` lines,
/// as md's sysctl names them (or a JSON object).
fn speed_limit(socket: &Path, min: Option<&str>, max: Option<&str>, as_json: bool) -> CliResult {
    let rate = |flag: &str, text: Option<&str>| -> CliResult<Option<u64>> {
        text.map(|t| parse_size(t, 1).map_err(|e| CliError(format!("speed-limit --{flag}: {e}")))).transpose()
    };
    let (min, max) = (rate("min", min)?, rate("max", max)?);
    let answer = request(socket, json!({"op": "speed-limit", "min": min, "max": max}))?;
    let (min, max) = (answer["min"].as_u64().unwrap_or(0), answer["max"].as_u64().unwrap_or(0));
    if as_json {
        println!("{}", json!({"speed_limit_min": min, "speed_limit_max": max}));
    } else {
        println!("speed_limit_min {min}\nspeed_limit_max {max}");
    }
    Ok(())
}

/// `member-limits`' flags, as given.
struct MemberLimitFlags<'a> {
    timeout: Option<&'a str>,
    attempts: Option<u32>,
    budget: Option<&'a str>,
    auto_readd: Option<bool>,
    readd_first: Option<&'a str>,
    readd_max: Option<&'a str>,
}

/// Set and/or show the remote limits of NBD members, a line per member, and how members lost
/// for being unreachable are tried again, a last line (or a JSON object).
fn member_limits(socket: &Path, member: Option<&Path>, flags: MemberLimitFlags<'_>, as_json: bool) -> CliResult {
    let millis = |flag: &str, text: Option<&str>| -> CliResult<Option<u64>> {
        text.map(|t| parse_millis(t).map_err(|e| CliError(format!("member-limits --{flag}: {e}")))).transpose()
    };
    let member = member.map(|m| {
        if uraid_device::Member::is_uri(m) {
            m.display().to_string()
        } else {
            std::path::absolute(m).unwrap_or_else(|_| m.to_path_buf()).display().to_string()
        }
    });
    let answer = request(
        socket,
        json!({
            "op": "member-limits",
            "member": member,
            "timeout_ms": millis("timeout", flags.timeout)?,
            "reconnect_attempts": flags.attempts,
            "reconnect_budget_ms": millis("reconnect-budget", flags.budget)?,
            "auto_readd": flags.auto_readd,
            "readd_first_ms": millis("readd-first", flags.readd_first)?,
            "readd_max_ms": millis("readd-max", flags.readd_max)?,
        }),
    )?;
    let members = answer["members"].as_array().cloned().unwrap_or_default();
    let readd = &answer["readd"];
    if as_json {
        println!("{}", serde_json::to_string_pretty(&json!({"members": members, "readd": readd})).expect("JSON"));
        return Ok(());
    }
    if readd["auto_readd"] == Value::Bool(true) {
        println!("auto-readd on readd-first {}ms readd-max {}ms", readd["readd_first_ms"], readd["readd_max_ms"]);
    } else {
        println!("auto-readd off");
    }
    if members.is_empty() {
        eprintln!("uraid: no member of this array is reached over a network");
    } else {
        for m in &members {
            println!(
                "{} timeout {}ms reconnect-attempts {} reconnect-budget {}ms",
                m["path"].as_str().unwrap_or("?"),
                m["timeout_ms"],
                m["reconnect_attempts"],
                m["reconnect_budget_ms"]
            );
        }
    }
    Ok(())
}

/// A duration in milliseconds from `N` (seconds), `Ns` or `Nms`.
fn parse_millis(text: &str) -> Result<u64, String> {
    let (number, scale) = match text.strip_suffix("ms") {
        Some(n) => (n, 1),
        None => (text.strip_suffix('s').unwrap_or(text), 1000),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("{text:?} is not a duration (seconds, or with a unit: 500ms, 30s)"))
}

fn print_status(v: &Value, as_json: bool) {
    if as_json {
        println!("{}", serde_json::to_string_pretty(v).expect("JSON"));
    } else {
        print!("{}", crate::mdstat::ctl_status(v));
    }
}

/// `change` asked of the running array `name` through its control socket `socket`.
pub fn change_served(name: &str, socket: &std::path::Path, change: MdChange) -> CliResult {
    let answer = request(socket, change_body(change))?;
    eprintln!("uraid: {name}: {}", answer["done"].as_str().unwrap_or("changed"));
    if matches!(change, MdChange::Size { .. }) {
        eprintln!(
            "uraid: {name}: new connections are served the new size; connected clients keep the size they were told until they connect again"
        );
    }
    Ok(())
}

/// The control socket's `change` request for `change`.
fn change_body(change: MdChange) -> Value {
    match change {
        MdChange::Size { request: SizeRequest::Max, assume_clean } => {
            json!({"op": "change", "size": "max", "assume_clean": assume_clean})
        }
        MdChange::Size { request: SizeRequest::Sectors(sectors), assume_clean } => {
            json!({"op": "change", "size": sectors, "assume_clean": assume_clean})
        }
        MdChange::AddBitmap { chunk } => json!({"op": "change", "bitmap": "internal", "bitmap_chunk": chunk}),
        MdChange::RemoveBitmap => json!({"op": "change", "bitmap": "none"}),
    }
}
