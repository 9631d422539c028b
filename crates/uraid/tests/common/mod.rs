//! What the binary's tests share: running the real `uraid`.

#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Run `uraid` with `args` in the runtime directory `runtime` (where named arrays keep their
/// sockets), and wait for it.
pub fn uraid_in(runtime: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uraid")).env("URAID_RUNTIME_DIR", runtime).args(args).output().unwrap()
}

/// Every array still running in the runtime directory it names stopped when this is dropped,
/// so that a failed assertion leaves no server behind. Made right after the runtime
/// directory's path (dropped before the temporary directory holding it).
pub struct StopAll(pub std::path::PathBuf);

impl Drop for StopAll {
    fn drop(&mut self) {
        if self.0.exists() {
            let _ = uraid_in(&self.0, &["stop", "all"]);
        }
    }
}

/// Run `uraid` with `args` and wait for it.
pub fn uraid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uraid")).args(args).output().expect("run uraid")
}

/// Run `uraid` with `args`, `input` on its standard input.
pub fn uraid_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn uraid");
    // uraid may refuse before reading its input; a closed pipe is then expected.
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

/// What a finished `uraid` said, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Run `uraid` with `args`, which must succeed.
pub fn ok(args: &[&str]) -> Output {
    let o = uraid(args);
    assert!(o.status.success(), "uraid {args:?} failed\n{}", text(&o));
    o
}

/// `head` followed by `tail` (member paths, usually), as one argument list.
pub fn with<'a>(head: &[&'a str], tail: &'a [String]) -> Vec<&'a str> {
    head.iter().copied().chain(tail.iter().map(String::as_str)).collect()
}

pub mod lossy_link;
pub mod nbdkit;
pub mod restripe;
pub mod serve;
pub mod takeover;

/// `uraid detail --json` of `members`.
pub fn detail(members: &[String]) -> serde_json::Value {
    serde_json::from_slice(&ok(&with(&["detail", "--json"], members)).stdout).unwrap()
}

/// Every file's sha256, to show that nothing was written to it.
pub fn hashes(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| uraid_testkit::sha256_hex(&std::fs::read(p).unwrap())).collect()
}

/// Whether `program` runs; says so when it does not (the test then passes without running).
pub fn installed(program: &str) -> bool {
    let found = Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !found {
        eprintln!("skipped: {program} is not installed");
    }
    found
}

/// Wait until `done`, at most `limit`.
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        sleep(Duration::from_millis(20));
    }
}

/// A blank member image of `size` bytes in `dir`; its path.
pub fn image(dir: &Path, name: &str, size: u64) -> String {
    let path = dir.join(name);
    std::fs::File::create(&path).unwrap().set_len(size).unwrap();
    path.display().to_string()
}

/// What a new NBD connection to the export on `socket` is told (nbdinfo's `--json` of it).
pub fn nbd_export(socket: &Path) -> serde_json::Value {
    let uri = format!("nbd+unix:///?socket={}", socket.display());
    let o = Command::new("nbdinfo")
        .arg("--json")
        .arg(&uri)
        .output()
        .expect("running nbdinfo (Debian package libnbd-bin; scripts/setup.sh installs it)");
    assert!(o.status.success(), "nbdinfo {uri}: {}", text(&o));
    let all: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    all["exports"][0].clone()
}
