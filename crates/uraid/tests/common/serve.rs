//! A running `uraid serve` with a control socket, for tests that manage arrays online.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::uraid;

/// A running server, stopped with SIGTERM (or killed) on request; killed on drop.
pub struct Serve {
    child: Option<Child>,
    pub control: PathBuf,
}

impl Serve {
    pub fn start(dir: &Path, members: &[String], extra: &[&str]) -> Serve {
        let control = dir.join("ctl.sock");
        let nbd = dir.join("nbd.sock");
        // A killed server leaves its sockets behind; wait for the new ones, not those.
        let _ = std::fs::remove_file(&control);
        let _ = std::fs::remove_file(&nbd);
        let mut args = vec![
            "serve".to_string(),
            format!("--listen=unix:{}", nbd.display()),
            format!("--control={}", control.display()),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(members.iter().cloned());
        // Its messages go to serve.log beside the sockets, for a failure to show.
        let log = std::fs::File::create(dir.join("serve.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_uraid")).args(&args).stderr(Stdio::from(log)).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        // A socket file appears when bound, a moment before it listens: wait until the control
        // socket (bound after the NBD one) accepts.
        while !(nbd.exists() && std::os::unix::net::UnixStream::connect(&control).is_ok()) {
            assert!(Instant::now() < deadline, "control socket never appeared");
            sleep(Duration::from_millis(20));
        }
        Serve { child: Some(child), control }
    }

    pub fn ctl(&self, args: &[&str]) -> Output {
        let control = self.control.display().to_string();
        let mut all = vec!["ctl", control.as_str()];
        all.extend_from_slice(args);
        uraid(&all)
    }

    pub fn status(&self) -> Value {
        serde_json::from_slice(&self.ctl(&["status", "--json"]).stdout).expect("status --json")
    }

    pub fn stop(mut self, signal: i32) {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        if signal == libc::SIGTERM {
            assert!(status.success(), "serve exited {status}");
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
