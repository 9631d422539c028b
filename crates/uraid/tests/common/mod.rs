//! What the binary's tests share: running the real `uraid`.

#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

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
pub mod serve;
