//! nbdkit serving a file on a Unix socket, as a member that can be killed and started again on
//! the same bytes (its host lost and back).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

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
        sleep(Duration::from_millis(50));
    }
}

/// `nbdkit file` exporting `file` on `socket`; killed (SIGKILL) on drop.
pub struct FileExport {
    child: Option<Child>,
    pub socket: PathBuf,
    pub file: PathBuf,
}

impl FileExport {
    pub fn start(socket: &Path, file: &Path) -> FileExport {
        // A killed nbdkit leaves its socket behind.
        let _ = std::fs::remove_file(socket);
        let child = Command::new("nbdkit")
            .args(["-f", "-U"])
            .arg(socket)
            .arg("file")
            .arg(format!("file={}", file.display()))
            .stdout(Stdio::null())
            .spawn()
            .expect("run nbdkit");
        wait_until("nbdkit's socket", Duration::from_secs(10), || {
            std::os::unix::net::UnixStream::connect(socket).is_ok()
        });
        FileExport { child: Some(child), socket: socket.to_path_buf(), file: file.to_path_buf() }
    }

    /// The export's URI.
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    /// SIGKILL, as a host that is lost: nothing is flushed or said.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for FileExport {
    fn drop(&mut self) {
        self.kill();
    }
}
