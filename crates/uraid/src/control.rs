//! The control socket of a running array (`uraid serve --control=PATH`) and what it says.
//!
//! One request per connection line, one answer line, both JSON: `{"op":"status"}`,
//! `{"op":"check"}`, `{"op":"repair"}`, `{"op":"idle"}`, `{"op":"wait"}`, `{"op":"stop"}`,
//! `{"op":"add"|"re-add"|"fail"|"remove","member":PATH}`, `{"op":"member-limits",...}`,
//! `{"op":"grow","raid_devices":N,"add":[PATH,...],"chunk_sectors":C,"layout":L,"array_size":BYTES,"force":B}`
//! (any of the count, chunk and md layout number; the new devices for more, or for fewer the
//! size in bytes the array shrinks to; on a raid1 the count of copies, `force` leaving new
//! slots missing),
//! `{"op":"takeover","level":LEVEL,"raid_devices":N,"layout":NAME,"add":[PATH,...],"force":B}`
//! (md's `--grow --level` where no data moves: the level required, the rest optional),
//! `{"op":"change","size":"max"|SECTORS,"assume_clean":BOOL}` or
//! `{"op":"change","bitmap":"internal"|"none","bitmap_chunk":BYTES}` (md's `--grow --size`,
//! `--bitmap`),
//! `{"op":"speed-limit","min":BYTES_PER_SEC,"max":BYTES_PER_SEC}` (either or both, or neither to
//! ask; answered with the limits in force as `"min"` and `"max"`).
//! Answers are `{"ok":true, ...}` or `{"ok":false,"error":"..."}`. `wait` answers when no pass
//! is running, like `mdadm --wait`; `stop` answers at once and stops the server as SIGTERM does
//! (it raises SIGTERM in the process, so that the one way of stopping is the signal's). The
//! socket is created mode 0600: whoever can use it can stop passes and the array.
//!
//! The same module renders a status as JSON (for `uraid ctl status --json`); `mdstat` renders
//! that JSON as text.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::thread;

use serde_json::{json, Value};
use std::time::Duration;

use uraid_device::md_change::MdChange;
use uraid_device::reshape::ReshapeRequest;
use uraid_device::service::{
    ArrayStatus, ManageOp, RemoteLimitsChange, ReturnBackoff, ReturnBackoffChange, ServiceHandle, SyncAction,
};
use uraid_engine::SlotState;
use uraid_layout::Level;
use uraid_md::resize::SizeRequest;
use uraid_md::takeover::TakeoverRequest;

use crate::commands::{CliError, CliResult};

/// A bound control socket; the file is removed when this is dropped.
pub struct ControlSocket {
    path: PathBuf,
    /// Until [`ControlSocket::serve`] hands it to the control thread.
    listener: Option<UnixListener>,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Bind `path`, before the array is started: a path in use or that is not a socket is refused
/// while nothing has been written. As the NBD socket: a stale socket is replaced, and the new one
/// is owner-only from the moment it exists (whoever can connect can fail members).
pub fn bind(path: &Path) -> CliResult<ControlSocket> {
    let listener =
        uraid_nbd::bind_unix_socket(path).map_err(|e| CliError(format!("--control={}: {e}", path.display())))?;
    Ok(ControlSocket { path: path.to_path_buf(), listener: Some(listener) })
}

impl ControlSocket {
    /// Answer requests against `handle` on a thread until the process ends.
    pub fn serve(&mut self, handle: ServiceHandle) -> CliResult {
        let listener = self.listener.take().expect("a control socket is served once");
        thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let handle = handle.clone();
                    let _ = thread::Builder::new().name("control-conn".into()).spawn(move || serve_conn(conn, handle));
                }
            })
            .map_err(|e| CliError(format!("starting the control thread: {e}")))?;
        Ok(())
    }
}

fn serve_conn(conn: UnixStream, handle: ServiceHandle) {
    let Ok(mut out) = conn.try_clone() else { return };
    let reader = BufReader::new(conn);
    for line in reader.lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() {
            continue;
        }
        let answer = answer(&line, &handle);
        if writeln!(out, "{answer}").is_err() {
            return;
        }
    }
}

/// The yes-or-no field `name` of an `op` request: false when absent.
fn flag(request: &Value, op: &str, name: &str) -> Result<bool, String> {
    match request.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(v) => v.as_bool().ok_or_else(|| format!("{op}: \"{name}\" must be true or false, not {v}")),
    }
}

/// The devices a request's `"add"` lists (none if it has no such field).
fn added(request: &Value, op: &str) -> Result<Vec<PathBuf>, String> {
    match request.get("add") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_str().map(PathBuf::from))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("{op}: \"add\" must list device paths as strings")),
        Some(_) => Err(format!("{op}: \"add\" must be a list of devices")),
    }
}

/// The level change a `takeover` request asks for: `"level"` (required), and optionally
/// `"raid_devices"`, `"layout"` (a layout name, or `preserve`), `"add"` and `"force"`.
fn takeover_request(request: &Value) -> Result<(TakeoverRequest, Vec<PathBuf>), String> {
    let level = match request.get("level") {
        Some(Value::String(text)) => Level::parse(text).map_err(|e| format!("takeover: \"level\" {text:?}: {e}"))?,
        Some(v) if !v.is_null() => return Err(format!("takeover: \"level\" must be a level's name, not {v}")),
        _ => return Err("takeover needs \"level\"".into()),
    };
    let raid_devices = match request.get("raid_devices") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("takeover: \"raid_devices\" must be a count of devices, not {v}"))?,
        ),
    };
    let layout = match request.get("layout") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(v) => return Err(format!("takeover: \"layout\" must be a layout's name, not {v}")),
    };
    let add = added(request, "takeover")?;
    let force = flag(request, "takeover", "force")?;
    let takeover =
        // The server restripes before or after the takeover where the change needs it.
        TakeoverRequest { level: Some(level), raid_devices, layout, added: add.len() as u32, force, restripe: true };
    Ok((takeover, add))
}

/// The size or bitmap change a `change` request asks for: `"size"` (`"max"` or member sectors,
/// with `"assume_clean"`), or `"bitmap"` (`"internal"` with `"bitmap_chunk"` bytes, or
/// `"none"`), one of them.
fn change_request(request: &Value) -> Result<MdChange, String> {
    let size = request.get("size").filter(|v| !v.is_null());
    let bitmap = request.get("bitmap").filter(|v| !v.is_null());
    let assume_clean = flag(request, "change", "assume_clean")?;
    let bitmap_chunk = match request.get("bitmap_chunk") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64().ok_or_else(|| format!("change: \"bitmap_chunk\" must be a whole number of bytes, not {v}"))?,
        ),
    };
    match (size, bitmap) {
        (Some(_), Some(_)) | (None, None) => Err("change needs one of \"size\" and \"bitmap\"".into()),
        (Some(size), None) => {
            let request = match size {
                Value::String(s) if s == "max" => SizeRequest::Max,
                v => match v.as_u64() {
                    Some(sectors) if sectors > 0 => SizeRequest::Sectors(sectors),
                    _ => {
                        return Err(format!(
                            "change: \"size\" must be \"max\" or a positive number of sectors, not {v}"
                        ))
                    }
                },
            };
            Ok(MdChange::Size { request, assume_clean })
        }
        (None, Some(bitmap)) => match bitmap.as_str() {
            Some("internal") => Ok(MdChange::AddBitmap { chunk: bitmap_chunk }),
            Some("none") if bitmap_chunk.is_none() => Ok(MdChange::RemoveBitmap),
            Some("none") => Err("change: \"bitmap_chunk\" goes with \"bitmap\": \"internal\"".into()),
            _ => Err(format!("change: \"bitmap\" must be \"internal\" or \"none\", not {bitmap}")),
        },
    }
}

fn answer(line: &str, handle: &ServiceHandle) -> Value {
    let request: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return json!({"ok": false, "error": format!("request is not JSON: {e}")}),
    };
    let op = request.get("op").and_then(Value::as_str).unwrap_or("");
    let fail = |e: String| json!({"ok": false, "error": e});
    match op {
        "status" => match handle.status() {
            Ok(s) => json!({"ok": true, "status": status_json(&s)}),
            Err(e) => fail(e.to_string()),
        },
        "check" | "repair" => {
            let action = if op == "check" { SyncAction::Check } else { SyncAction::Repair };
            match handle.start_sync(action) {
                Ok(()) => json!({"ok": true}),
                Err(e) => fail(e.to_string()),
            }
        }
        "idle" => match handle.idle() {
            Ok(()) => json!({"ok": true}),
            Err(e) => fail(e.to_string()),
        },
        "wait" => match handle.wait_idle() {
            Ok(s) => json!({"ok": true, "status": status_json(&s)}),
            Err(e) => fail(e.to_string()),
        },
        "add" | "fail" | "remove" | "re-add" => {
            let Some(member) = request.get("member").and_then(Value::as_str) else {
                return fail(format!("{op} needs a \"member\""));
            };
            let force = match flag(&request, op, "force") {
                Ok(force) => force,
                Err(e) => return fail(e),
            };
            let manage = match op {
                "add" => ManageOp::Add(member.into()),
                "re-add" => ManageOp::ReAdd(member.into()),
                "fail" => ManageOp::Fail { member: member.to_string(), force },
                _ => ManageOp::Remove(member.to_string()),
            };
            match handle.manage(manage) {
                Ok(done) => json!({"ok": true, "done": done}),
                Err(e) => fail(e.to_string()),
            }
        }
        "grow" => {
            // Each of the count, the chunk (sectors) and the layout (md's number) optional, but
            // one of them given; whole numbers that fit.
            let field = |name: &str| -> Result<Option<i64>, String> {
                match request.get(name) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => v.as_i64().map(Some).ok_or_else(|| format!("grow: \"{name}\" must be a whole number, not {v}")),
                }
            };
            let (raid_devices, chunk_sectors, layout) =
                match (field("raid_devices"), field("chunk_sectors"), field("layout")) {
                    (Ok(n), Ok(c), Ok(l)) => (n, c, l),
                    (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return fail(e),
                };
            if raid_devices.is_none() && chunk_sectors.is_none() && layout.is_none() {
                return fail("grow needs \"raid_devices\", \"chunk_sectors\" or \"layout\"".into());
            }
            let add = match added(&request, "grow") {
                Ok(add) => add,
                Err(e) => return fail(e),
            };
            let (Ok(raid_devices), Ok(chunk_sectors), Ok(layout)) = (
                raid_devices.map(u32::try_from).transpose(),
                chunk_sectors.map(u32::try_from).transpose(),
                layout.map(i32::try_from).transpose(),
            ) else {
                return fail("grow: a count, chunk or layout out of range".into());
            };
            let force = match flag(&request, "grow", "force") {
                Ok(force) => force,
                Err(e) => return fail(e),
            };
            let array_size = match field("array_size") {
                Ok(size) => size,
                Err(e) => return fail(e),
            };
            let Ok(array_size) = array_size.map(u64::try_from).transpose() else {
                return fail("grow: \"array_size\" must not be negative".into());
            };
            let reshape = ReshapeRequest { raid_devices, layout, chunk_sectors, array_size };
            match handle.grow(reshape, add, force) {
                Ok(done) => json!({"ok": true, "done": done}),
                Err(e) => fail(e.to_string()),
            }
        }
        "takeover" => match takeover_request(&request) {
            Ok((takeover, add)) => match handle.take_over(takeover, add) {
                Ok(done) => json!({"ok": true, "done": done}),
                Err(e) => fail(e.to_string()),
            },
            Err(e) => fail(e),
        },
        "change" => match change_request(&request) {
            Ok(change) => match handle.change(change) {
                Ok(done) => json!({"ok": true, "done": done}),
                Err(e) => fail(e.to_string()),
            },
            Err(e) => fail(e),
        },
        "speed-limit" => {
            let limit = |name: &str| match request.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                    format!("speed-limit: \"{name}\" must be a whole number of bytes per second, not {v}")
                }),
            };
            let (min, max) = match (limit("min"), limit("max")) {
                (Ok(min), Ok(max)) => (min, max),
                (Err(e), _) | (_, Err(e)) => return fail(e),
            };
            match handle.speed_limits(min, max) {
                Ok(Some(l)) => json!({"ok": true, "min": l.min_bytes_per_sec, "max": l.max_bytes_per_sec}),
                Ok(None) => fail("array is stopping".into()),
                Err(e) => fail(format!("speed-limit: {e}")),
            }
        }
        "member-limits" => {
            let field = |name: &str| match request.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| format!("member-limits: \"{name}\" must be a whole number, not {v}")),
            };
            let (timeout, attempts, budget) = match (field("timeout_ms"), field("reconnect_attempts"), field("reconnect_budget_ms")) {
                (Ok(t), Ok(a), Ok(b)) => (t, a, b),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return fail(e),
            };
            let change = RemoteLimitsChange {
                request_timeout: timeout.map(Duration::from_millis),
                reconnect_attempts: attempts.map(|a| a.min(u64::from(u32::MAX)) as u32),
                reconnect_budget: budget.map(Duration::from_millis),
            };
            let (first, max) = match (field("readd_first_ms"), field("readd_max_ms")) {
                (Ok(f), Ok(m)) => (f, m),
                (Err(e), _) | (_, Err(e)) => return fail(e),
            };
            let enabled = match request.get("auto_readd") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(v) => return fail(format!("member-limits: \"auto_readd\" must be true or false, not {v}")),
            };
            let backoff_change =
                ReturnBackoffChange { enabled, first: first.map(Duration::from_millis), max: max.map(Duration::from_millis) };
            // Whether the backoff change is refused does not depend on the backoff in force:
            // refused, nothing changes.
            if let Err(e) = backoff_change.apply(ReturnBackoff::default()) {
                return fail(format!("member-limits: {e}"));
            }
            let member = request.get("member").and_then(Value::as_str).map(str::to_string);
            let members = match handle.remote_limits(member, change) {
                Ok(members) => members,
                Err(e) => return fail(format!("member-limits: {e}")),
            };
            match handle.return_backoff(backoff_change) {
                Some(Ok(backoff)) => json!({"ok": true, "members": members.iter().map(|(name, l)| json!({
                    "path": name,
                    "timeout_ms": l.request_timeout.as_millis() as u64,
                    "reconnect_attempts": l.reconnect_attempts,
                    "reconnect_budget_ms": l.reconnect_budget.as_millis() as u64,
                })).collect::<Vec<_>>(),
                "readd": {
                    "auto_readd": backoff.enabled,
                    "readd_first_ms": backoff.first.as_millis() as u64,
                    "readd_max_ms": backoff.max.as_millis() as u64,
                }}),
                Some(Err(e)) => fail(format!("member-limits: {e}")),
                None => fail("array is stopping".into()),
            }
        }
        "stop" => match signal_hook::low_level::raise(signal_hook::consts::SIGTERM) {
            Ok(()) => json!({"ok": true}),
            Err(e) => fail(format!("stopping: {e}")),
        },
        "" => fail("no \"op\" in the request".into()),
        other => fail(format!(
            "unknown op {other:?} (status, check, repair, idle, wait, add, re-add, fail, remove, grow, speed-limit, member-limits, stop)"
        )),
    }
}

fn slot_state_name(s: SlotState) -> &'static str {
    match s {
        SlotState::InSync => "in_sync",
        SlotState::Missing => "missing",
        SlotState::Faulty => "faulty",
        SlotState::Recovering => "recovering",
    }
}

/// mdadm's State line: clean/active, then what else is true.
pub fn state_text(s: &ArrayStatus) -> String {
    let mut parts = vec![if s.dirty { "active" } else { "clean" }.to_string()];
    if s.degraded > 0 {
        parts.push("degraded".into());
    }
    match &s.sync {
        Some(p) => parts.push(
            match p.action {
                SyncAction::Resync => "resyncing",
                SyncAction::Recover => "recovering",
                SyncAction::Check => "checking",
                SyncAction::Repair => "repairing",
            }
            .into(),
        ),
        None if s.reshape.is_some() => parts.push("reshaping".into()),
        None if s.needs_resync => parts.push("resync needed".into()),
        None => {}
    }
    if s.read_only {
        parts.push("read-only".into());
    }
    parts.join(", ")
}

/// The status as `uraid ctl status --json` prints it. Field names follow md's sysfs where md
/// has one (`sync_action`, `sync_completed`, `mismatch_cnt`).
pub fn status_json(s: &ArrayStatus) -> Value {
    let members: Vec<Value> = s
        .slots
        .iter()
        .map(|slot| {
            json!({
                "path": slot.device,
                "role": match slot.state {
                    SlotState::Recovering => format!("rebuilding {}", slot.slot),
                    SlotState::Faulty => "faulty".to_string(),
                    SlotState::Missing => "missing".to_string(),
                    SlotState::InSync => format!("active {}", slot.slot),
                },
                "slot": slot.slot,
                "state": slot_state_name(slot.state),
            })
        })
        .collect();
    // A reshape shows as md shows it: sync_action "reshape", its progress in the sync fields.
    let progress = match (&s.sync, &s.reshape) {
        (Some(p), _) => Some((p.action.name(), p.done_bytes, p.total_bytes, p.bytes_per_sec, p.eta_secs)),
        (None, Some(r)) => Some(("reshape", r.done_bytes, r.total_bytes, r.bytes_per_sec, r.eta_secs)),
        (None, None) => None,
    };
    let (action, completed) = match progress {
        Some((action, done, total, _, _)) => (action, format!("{} / {}", done / 512, total / 512)),
        None => ("idle", "none".to_string()),
    };
    json!({
        "uuid": s.uuid,
        "level": s.level,
        "size_bytes": s.size,
        "chunk_bytes": s.chunk_bytes,
        "md_shape": s.md_shape,
        "state": state_text(s),
        "clean": !s.dirty,
        "resync_needed": s.needs_resync,
        "degraded": s.degraded,
        "read_only": s.read_only,
        "sync_action": action,
        "sync_completed": completed,
        "sync_done_bytes": progress.map(|p| p.1),
        "sync_total_bytes": progress.map(|p| p.2),
        "sync_speed_bytes_per_sec": progress.map(|p| p.3),
        "sync_eta_seconds": progress.and_then(|p| p.4),
        "reshape": s.reshape.as_ref().map(|r| json!({
            "from_devices": r.from_disks,
            "to_devices": r.to_disks,
            "done_bytes": r.done_bytes,
            "total_bytes": r.total_bytes,
        })),
        "mismatch_cnt": s.mismatch_sectors,
        "speed_limit_min": s.speed_limits.min_bytes_per_sec,
        "speed_limit_max": s.speed_limits.max_bytes_per_sec,
        "last_sync": s.last_sync,
        "last_sync_bytes": s.last_sync_bytes,
        "passes_ended": s.passes_ended,
        "requests": s.requests,
        "members": members,
        "spares": s.spares,
        "returning": s.returning.iter().map(|r| json!({
            "path": r.device,
            "slot": r.slot,
            "attempts": r.attempts,
            "next_attempt_ms": r.next_attempt_in.as_millis() as u64,
            "last_failure": r.last_failure,
            "refused": r.refused,
        })).collect::<Vec<_>>(),
        "readded": s.readded,
    })
}
