//! NetBSD's own RAIDframe driver as a judge: the raidframe oracle (`shared/tools/raidframe-oracle`)
//! runs the driver's unchanged kernel source in a rump kernel on this host, driven by NetBSD's
//! own `raidctl`, with image files as components.
//!
//! The oracle is used from a private working copy ([`oracle`]): the copy is made once per test
//! process, and any of its shared-library links that reached us as plain files holding the link
//! target (some ways of copying a tree lose symlinks; the dynamic loader then fails with "file too
//! short") are made links again. A missing oracle is an error, not a skip.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use crate::{scratch_dir, workspace_root};

/// Where the oracle is: `$URAID_RAIDFRAME_ORACLE`, else `shared/tools/raidframe-oracle` beside the
/// repository (the layout CI uses).
pub fn oracle_source() -> PathBuf {
    if let Some(dir) = std::env::var_os("URAID_RAIDFRAME_ORACLE") {
        return PathBuf::from(dir);
    }
    workspace_root().join("../shared/tools/raidframe-oracle")
}

/// The `rfo` script of a working copy of the oracle, made on first use.
pub fn oracle() -> &'static Path {
    static RFO: OnceLock<PathBuf> = OnceLock::new();
    RFO.get_or_init(|| {
        let source = oracle_source();
        assert!(
            source.join("rfo").is_file(),
            "the RAIDframe oracle is missing at {} (set URAID_RAIDFRAME_ORACLE to its folder)",
            source.display()
        );
        let copy = scratch_dir("raidframe-oracle").join(format!("copy-{}", std::process::id()));
        let _ = fs::remove_dir_all(&copy);
        copy_tree(&source, &copy);
        relink_libraries(&copy.join("lib"));
        copy.join("rfo")
    })
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("cannot create {}: {e}", to.display()));
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display())) {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if kind.is_dir() {
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).unwrap_or_else(|e| panic!("cannot copy {}: {e}", src.display()));
            // The shared tree is read-only; the copy must be removable by the next run.
            let mode = fs::metadata(&dst).unwrap().permissions().mode();
            fs::set_permissions(&dst, fs::Permissions::from_mode(mode | 0o200)).unwrap();
        }
    }
}

/// Turns each small regular file in `lib` whose whole text names another file there back into a
/// link to it.
fn relink_libraries(lib: &Path) {
    let Ok(entries) = fs::read_dir(lib) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        let meta = fs::symlink_metadata(&path).unwrap();
        if !meta.is_file() || meta.len() > 255 {
            continue;
        }
        let Ok(text) = fs::read_to_string(&path) else { continue };
        let target = text.trim();
        if !target.is_empty() && !target.contains('/') && lib.join(target).is_file() {
            fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink(target, &path).unwrap();
        }
    }
}

/// A rump kernel running NetBSD's RAIDframe over image files; image `i` is `/disk<i>`. Stopped
/// (SIGTERM, as a shutdown) when dropped unless [`Kernel::crash`] killed it first.
pub struct Kernel {
    dir: PathBuf,
    stopped: bool,
}

impl Kernel {
    /// Starts a kernel whose working folder is `dir` (socket, pid, log) over `images`.
    pub fn start(dir: &Path, images: &[PathBuf]) -> Kernel {
        let out = Command::new(oracle()).arg("start").arg(dir).args(images).output().unwrap();
        assert!(out.status.success(), "rfo start failed: {}", String::from_utf8_lossy(&out.stderr));
        Kernel { dir: dir.to_path_buf(), stopped: false }
    }

    /// NetBSD's raidctl with `args`, whatever its exit status.
    pub fn raidctl(&self, args: &[&str]) -> Output {
        Command::new(oracle()).arg("raidctl").arg(&self.dir).args(args).stdin(Stdio::null()).output().unwrap()
    }

    /// NetBSD's raidctl with `args`; panics unless it succeeds. Returns its standard output.
    pub fn raidctl_ok(&self, args: &[&str]) -> String {
        let out = self.raidctl(args);
        assert!(
            out.status.success(),
            "raidctl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The first `bytes` of device `dev` (such as `/dev/rraid0d`) as the driver reads them.
    pub fn read(&self, dev: &str, bytes: u64) -> Vec<u8> {
        let out = Command::new(oracle()).arg("out").arg(&self.dir).arg(dev).arg(bytes.to_string()).output().unwrap();
        assert!(out.status.success(), "rfo out failed: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    /// Writes `file` into device `dev` from offset 0 in writes of `block` bytes.
    pub fn write(&self, dev: &str, file: &Path, block: u64) {
        let out = Command::new(oracle())
            .arg("in")
            .arg(&self.dir)
            .arg(dev)
            .arg(file)
            .env("RUMPDD_BS", block.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "rfo in failed: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Kills the kernel without a shutdown: what the components hold is what a crash leaves.
    pub fn crash(mut self) {
        if let Ok(pid) = fs::read_to_string(self.dir.join("rump.pid")) {
            let _ = Command::new("kill").arg("-KILL").arg(pid.trim()).status();
        }
        self.stop();
    }

    /// Stops the kernel as a shutdown does.
    pub fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            let _ = Command::new(oracle()).arg("stop").arg(&self.dir).output();
        }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.stop();
    }
}
