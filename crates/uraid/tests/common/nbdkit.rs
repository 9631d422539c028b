//! nbdkit serving a file on a Unix socket, as a member that can be killed and started again on
//! the same bytes (its host lost and back).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::wait_until;

/// `nbdkit file` exporting `file` on `socket`; killed (SIGKILL) on drop.
pub struct FileExport {
    child: Option<Child>,
    pub socket: PathBuf,
    pub file: PathBuf,
}

impl FileExport {
    pub fn start(socket: &Path, file: &Path) -> FileExport {
        FileExport::start_with(socket, file, &[], &[])
    }

    /// [`FileExport::start`] through nbdkit `filters` (`--filter=NAME`) given `params` (e.g.
    /// the delay filter and `wdelay=1`: every write a second late).
    pub fn start_with(socket: &Path, file: &Path, filters: &[&str], params: &[&str]) -> FileExport {
        // A killed nbdkit leaves its socket behind.
        let _ = std::fs::remove_file(socket);
        let child = Command::new("nbdkit")
            .args(["-f", "-U"])
            .arg(socket)
            .args(filters.iter().map(|f| format!("--filter={f}")))
            .arg("file")
            .arg(format!("file={}", file.display()))
            .args(params)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
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
