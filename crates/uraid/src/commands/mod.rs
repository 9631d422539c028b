//! One module per `uraid` command. Shared here: the error type every command returns, how
//! output reaches stdout, and how member paths are opened and probed.

pub mod add;
pub mod assemble;
pub mod bench;
pub mod cat;
pub mod create;
pub mod ctl;
pub mod detail;
pub mod examine;
pub mod grow;
pub mod grow_restripe;
pub mod grow_size_bitmap;
pub mod grow_takeover;
pub mod md_change_words;
pub mod monitor;
pub mod mount;
pub mod pass;
pub mod raidctl;
pub mod raidframe_describe;
pub mod reshape_run;
pub mod reshaping;
pub mod serve;
pub mod served_by;
pub mod sim;
pub mod sim_hosts;
pub mod source;
pub mod status;
pub mod stop;
pub mod vinum;
pub mod write;
pub mod zero_superblock;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use uraid_device::service::StopReport;
use uraid_device::{probe, Member, MemberDevice, OpenArray, OpenError, Probed};
use uraid_md::assemble::MemberVerdict;
use uraid_md_format::uuid::{format_md, parse_md};

/// A command's failure: one line for the user, already naming the file and what is wrong.
#[derive(Debug)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for CliError {
    fn from(e: E) -> CliError {
        CliError(e.to_string())
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;

/// Build an error from anything printable.
pub fn err<T>(message: impl Into<String>) -> CliResult<T> {
    Err(CliError(message.into()))
}

/// Write `text` to stdout. A reader that went away (`uraid ... | head`) ends the output quietly:
/// a closed pipe is the reader's choice, not an error (`print!` would panic on it).
pub fn emit(text: &str) -> CliResult {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => err(format!("stdout: {e}")),
        _ => Ok(()),
    }
}

/// Open a member: a file or block device, or an NBD export given as a URI (see
/// [`uraid_device::open_member`]).
pub fn open_member(path: &Path, writable: bool) -> CliResult<Member> {
    Member::open(path, writable).map_err(|e| CliError(format!("{}: {e}", path.display())))
}

/// Open and probe a member: its device and the superblock found (or `None`).
pub fn open_and_probe(path: &Path) -> CliResult<(Member, Option<Probed>)> {
    let dev = open_member(path, false)?;
    let probed = probe(&dev as &dyn MemberDevice)?;
    Ok((dev, probed))
}

/// Every regular file or block device under `dir` (recursively) that carries an md superblock,
/// grouped by array UUID. Damaged superblocks are reported and skipped.
pub fn scan_groups(dir: &Path) -> CliResult<Vec<([u8; 16], Vec<PathBuf>)>> {
    let files = files_under(dir)?;
    let mut groups: BTreeMap<[u8; 16], Vec<PathBuf>> = BTreeMap::new();
    for f in files {
        match open_and_probe(&f) {
            Ok((_, Some(p))) => groups.entry(p.superblock.info().array_uuid).or_default().push(f),
            Ok((_, None)) => {}
            Err(e) => eprintln!("uraid: skipping {}", e.0),
        }
    }
    Ok(groups.into_iter().collect())
}

/// Every regular file or block device under `dir` (recursively), sorted.
pub fn files_under(dir: &Path) -> CliResult<Vec<PathBuf>> {
    let mut files = Vec::new();
    walk(dir, &mut files).map_err(|e| CliError(format!("{}: {e}", dir.display())))?;
    files.sort();
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let ft = entry.file_type()?;
        let path = entry.path();
        if ft.is_dir() {
            walk(&path, out)?;
        } else {
            use std::os::unix::fs::FileTypeExt;
            if ft.is_file() || ft.is_block_device() {
                out.push(path);
            }
        }
    }
    Ok(())
}

/// The members to assemble: those given, or with `--scan DIR` those of the array `uuid` found
/// there (the UUID may be left out when DIR holds exactly one array).
pub fn select_members(members: &[PathBuf], scan: Option<&Path>, uuid: Option<&str>) -> CliResult<Vec<PathBuf>> {
    let Some(dir) = scan else {
        if uuid.is_some() {
            return err("--uuid needs --scan DIR to search for members");
        }
        return Ok(members.to_vec());
    };
    let groups = scan_groups(dir)?;
    match uuid {
        Some(u) => {
            let want = parse_md(u).map_err(|e| CliError(format!("--uuid={u}: {e}")))?;
            groups
                .into_iter()
                .find(|(id, _)| *id == want)
                .map(|(_, g)| g)
                .ok_or_else(|| CliError(format!("{}: no members of array {u} found", dir.display())))
        }
        None => match groups.len() {
            0 => err(format!("{}: no md members found", dir.display())),
            1 => Ok(groups.into_iter().next().expect("one group").1),
            n => {
                let ids: Vec<String> = groups.iter().map(|(id, _)| format_md(id)).collect();
                err(format!("{}: {n} arrays found ({}); choose one with --uuid", dir.display(), ids.join(", ")))
            }
        },
    }
}

/// Assemble an array for a long-running front end, telling the user on stderr what assembly
/// decided: members left out and why, missing slots (degraded), and a pending resync.
pub fn assemble_for_service(paths: &[PathBuf], writable: bool) -> CliResult<OpenArray> {
    let array = OpenArray::open_paths(paths, writable)?;
    if array.log_unreplayed() {
        return Err(OpenError::DirtyDegradedReadOnly { missing: array.missing_slots().len() }.into());
    }
    let md = array.md().expect("an md array was assembled");
    let plan = &md.plan;
    for (m, verdict) in md.members.iter().zip(&plan.verdicts) {
        if !matches!(verdict, MemberVerdict::Active { .. }) {
            eprintln!("uraid: {}: {verdict}", m.dev.name());
        }
    }
    let missing = plan.missing_slots();
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|s| s.to_string()).collect();
        eprintln!(
            "uraid: array is degraded: slot(s) {} missing; reads of them are rebuilt from redundancy",
            list.join(", ")
        );
    }
    report_log_replay(&array);
    if let Some(r) = &plan.reshape {
        eprintln!(
            "uraid: array is part-way through a reshape (reshape position {}K of {}K): read through the old and the new layout, nothing written",
            r.position / 2,
            array.size() / 1024
        );
    }
    if !plan.clean && array.needs_resync() {
        eprintln!("uraid: array was not shut down cleanly; redundancy may be inconsistent until a resync (writes use reconstruct-write meanwhile)");
    }
    Ok(array)
}

/// Say what replaying the partial parity log did at assembly (an array stopped uncleanly).
pub fn report_log_replay(array: &OpenArray) {
    let Some(r) = array.md().and_then(|md| md.log_replay.as_ref()) else { return };
    eprintln!(
        "uraid: array was not shut down cleanly; its partial parity log was replayed: {} entries made parity match, {} rebuilt around a missing member, {} left alone (a member they changed is missing), {} unusable{}",
        r.report.recovered,
        r.report.rebuilt,
        r.report.skipped,
        r.report.bad,
        if r.invalid_logs.is_empty() {
            String::new()
        } else {
            format!("; no valid log on {}", r.invalid_logs.join(", "))
        }
    );
    if !r.complete() && !array.needs_resync() {
        eprintln!("uraid: no resync is owed for what the replay could not use: with its missing member(s) the array has no redundancy left to disagree (parity defines what they hold)");
    }
}

/// Why an array stays marked dirty after a clean stop.
pub const RESYNC_NEEDED: &str =
    "the array stays marked dirty: it was not shut down cleanly before this run, and its parity/copies may disagree until a resync";

/// Say how a served array was left, from the service's final report.
pub fn report_stop(report: &StopReport, read_only: bool, what: &str) {
    for (name, reason) in &report.failed_members {
        eprintln!("uraid: member {name} failed and was marked faulty: {reason}");
    }
    let state = if read_only {
        "opened read-only, superblocks untouched".to_string()
    } else if report.clean {
        "members flushed and marked clean".to_string()
    } else if report.resync_needed {
        format!("members flushed; {RESYNC_NEEDED}")
    } else {
        "members flushed; the array could not be marked clean".to_string()
    };
    let inline = match (report.inline_reads, report.inline_writes, report.spliced_reads) {
        (0, 0, _) => String::new(),
        (r, w, 0) => format!(" ({r} reads and {w} writes answered inline)"),
        (r, w, s) => format!(" ({r} reads, {s} of them spliced, and {w} writes answered inline)"),
    };
    eprintln!("uraid: {what} after {} requests{inline}; {state}", report.requests);
}
