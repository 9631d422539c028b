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

pub mod serve;
