//! Where running arrays live: the runtime directory, with one folder per array name holding
//! its NBD socket (`nbd.sock`), control socket (`control.sock`), process id (`pid`), log
//! (`log`) and a lock (`lock`).
//!
//! The runtime directory is `$URAID_RUNTIME_DIR` if set, else `/run/uraid` for root, else
//! `$XDG_RUNTIME_DIR/uraid`. It is private to its owner (0700): whoever reaches the sockets
//! can read, write and fail the arrays.
//!
//! The process serving an array holds an exclusive `flock` on `NAME/lock` for its whole life
//! (the lock is taken before the array is started, and the server inherits it), so whether an
//! array runs is asked of the kernel, which drops the lock when the process ends however it
//! ends. A pid file could name a process that died, or a new one that reused the number; the
//! lock cannot. An entry whose lock is free and whose control socket does not answer is stale:
//! what it left (sockets, pid, lock) is removed, and only its log is kept, for the reason it
//! ended. A server not started by uraid that answers on `NAME/control.sock` is left alone.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use crate::array_name;

/// The environment variable that chooses the runtime directory.
pub const ENV_VAR: &str = "URAID_RUNTIME_DIR";

/// root's runtime directory.
pub const SYSTEM_DIR: &str = "/run/uraid";

/// What the runtime directory is chosen from.
#[derive(Debug, Clone, Default)]
pub struct RuntimeEnv {
    pub uraid_runtime_dir: Option<OsString>,
    pub xdg_runtime_dir: Option<OsString>,
    pub root: bool,
}

impl RuntimeEnv {
    /// This process's environment and effective user.
    pub fn current() -> RuntimeEnv {
        RuntimeEnv {
            uraid_runtime_dir: std::env::var_os(ENV_VAR),
            xdg_runtime_dir: std::env::var_os("XDG_RUNTIME_DIR"),
            // SAFETY: geteuid cannot fail.
            root: unsafe { libc::geteuid() } == 0,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeDirError {
    #[error("no runtime directory for running arrays: set {ENV_VAR} (or XDG_RUNTIME_DIR; root uses {SYSTEM_DIR})")]
    Unset,
    #[error("{}: {source} (in the runtime directory of running arrays; {ENV_VAR} chooses another)", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("array {name} is already running{}; stop it with `uraid stop {name}`, or give another --name", pid_text(*pid))]
    AlreadyRunning { name: String, pid: Option<u32> },
    #[error("no array named {name} is running (in {})", base.display())]
    NotRunning { name: String, base: PathBuf },
    #[error(transparent)]
    Name(#[from] array_name::NameError),
}

fn pid_text(pid: Option<u32>) -> String {
    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> RuntimeDirError + '_ {
    move |source| RuntimeDirError::Io { path: path.to_path_buf(), source }
}

/// The runtime directory `env` chooses: `URAID_RUNTIME_DIR` (relative to the current folder
/// if relative), else `/run/uraid` for root, else `XDG_RUNTIME_DIR/uraid` (ignored unless
/// absolute, as the XDG base directory specification says).
pub fn resolve(env: &RuntimeEnv) -> Result<PathBuf, RuntimeDirError> {
    if let Some(dir) = env.uraid_runtime_dir.as_ref().filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return std::path::absolute(&dir).map_err(io_error(&dir));
    }
    if env.root {
        return Ok(PathBuf::from(SYSTEM_DIR));
    }
    match env.xdg_runtime_dir.as_ref().map(PathBuf::from) {
        Some(xdg) if xdg.is_absolute() => Ok(xdg.join("uraid")),
        _ => Err(RuntimeDirError::Unset),
    }
}

/// The files of one array's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayDir {
    name: String,
    dir: PathBuf,
}

impl ArrayDir {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn path(&self) -> &Path {
        &self.dir
    }
    pub fn nbd_socket(&self) -> PathBuf {
        self.dir.join("nbd.sock")
    }
    pub fn control_socket(&self) -> PathBuf {
        self.dir.join("control.sock")
    }
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("pid")
    }
    pub fn log_file(&self) -> PathBuf {
        self.dir.join("log")
    }
    pub fn lock_file(&self) -> PathBuf {
        self.dir.join("lock")
    }

    /// The NBD URI clients (nbdinfo, nbdcopy, qemu) open the export with.
    pub fn nbd_uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.nbd_socket().display())
    }

    /// The process id the pid file names, if it names one.
    pub fn pid(&self) -> Option<u32> {
        fs::read_to_string(self.pid_file()).ok()?.trim().parse().ok()
    }

    fn control_answers(&self) -> bool {
        UnixStream::connect(self.control_socket()).is_ok()
    }
}

/// An array whose process is alive.
#[derive(Debug, Clone)]
pub struct RunningArray {
    pub dir: ArrayDir,
    pub pid: Option<u32>,
}

/// Whether an array's folder belongs to a live process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Liveness {
    Running(Option<u32>),
    /// Left by a process that is gone.
    Stale,
    /// Nothing there but, perhaps, the log of an array that ended.
    Vacant,
}

/// The runtime directory of running arrays.
#[derive(Debug, Clone)]
pub struct RuntimeDir {
    base: PathBuf,
}

impl RuntimeDir {
    /// The runtime directory this process's environment chooses (see [`resolve`]).
    pub fn from_env() -> Result<RuntimeDir, RuntimeDirError> {
        Ok(RuntimeDir::at(resolve(&RuntimeEnv::current())?))
    }

    /// The runtime directory at `base`.
    pub fn at(base: PathBuf) -> RuntimeDir {
        RuntimeDir { base }
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    /// The folder array `name` uses (the name must be valid).
    pub fn array_dir(&self, name: &str) -> Result<ArrayDir, RuntimeDirError> {
        array_name::check(name)?;
        Ok(ArrayDir { name: name.to_string(), dir: self.base.join(name) })
    }

    /// Take `name` for an array about to start: its folder is made (and the runtime directory,
    /// owner-only), its lock taken, and what a dead process left there removed. Refused while
    /// another process holds the name.
    pub fn claim(&self, name: &str) -> Result<Claim, RuntimeDirError> {
        let dir = self.array_dir(name)?;
        make_private_dir(&self.base, true)?;
        make_private_dir(dir.path(), false)?;
        let Some(lock) = lock_if_free(&dir)? else {
            return Err(RuntimeDirError::AlreadyRunning { name: name.to_string(), pid: dir.pid() });
        };
        if dir.control_answers() {
            return Err(RuntimeDirError::AlreadyRunning { name: name.to_string(), pid: dir.pid() });
        }
        remove_leftovers(&dir, Keep::Log)?;
        Ok(Claim { dir, lock })
    }

    /// Every array running here, by name. Stale folders met on the way are cleaned.
    pub fn running(&self) -> Result<Vec<RunningArray>, RuntimeDirError> {
        let entries = match fs::read_dir(&self.base) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&self.base)(e)),
        };
        let mut names: Vec<String> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_error(&self.base))?;
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            match entry.file_name().into_string() {
                Ok(name) if is_dir && array_name::check(&name).is_ok() => names.push(name),
                _ => {}
            }
        }
        names.sort();
        let mut running = Vec::new();
        for name in names {
            let dir = ArrayDir { dir: self.base.join(&name), name };
            if let Some(r) = self.look_up(dir)? {
                running.push(r);
            }
        }
        Ok(running)
    }

    /// The running array `name`; a stale folder of that name is cleaned and reported as not
    /// running.
    pub fn find(&self, name: &str) -> Result<RunningArray, RuntimeDirError> {
        let dir = self.array_dir(name)?;
        self.look_up(dir)?
            .ok_or_else(|| RuntimeDirError::NotRunning { name: name.to_string(), base: self.base.clone() })
    }

    fn look_up(&self, dir: ArrayDir) -> Result<Option<RunningArray>, RuntimeDirError> {
        match liveness(&dir) {
            Liveness::Running(pid) => Ok(Some(RunningArray { dir, pid })),
            Liveness::Vacant => Ok(None),
            Liveness::Stale => {
                clean_stale(&dir)?;
                Ok(None)
            }
        }
    }

    /// Remove the folder of an array that has ended, its log included. Nothing is removed
    /// while a process still holds the lock.
    pub fn remove_ended(&self, dir: &ArrayDir) -> Result<(), RuntimeDirError> {
        if !dir.path().exists() {
            return Ok(());
        }
        let Some(_lock) = lock_if_free(dir)? else {
            if !dir.path().exists() {
                // Removed meanwhile by the array's own process (one run in the foreground).
                return Ok(());
            }
            return Err(RuntimeDirError::AlreadyRunning { name: dir.name.clone(), pid: dir.pid() });
        };
        remove_ended_files(dir, Keep::Nothing)?;
        let _ = fs::remove_dir(dir.path());
        Ok(())
    }

    /// Wait until the process holding `dir`'s lock has ended (for one that never held it: until
    /// its control socket stops answering).
    pub fn wait_ended(&self, dir: &ArrayDir) -> Result<(), RuntimeDirError> {
        loop {
            if matches!(liveness(dir), Liveness::Stale | Liveness::Vacant) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A name taken for an array that is starting: the lock is held until this is dropped (or
/// handed on to the array's process with [`Claim::lock_for_server`]).
pub struct Claim {
    dir: ArrayDir,
    lock: File,
}

impl Claim {
    pub fn dir(&self) -> &ArrayDir {
        &self.dir
    }

    /// The lock as a file the array's process inherits: the lock belongs to the open file, so
    /// it stays held while that process keeps it open, after this one has exited.
    pub fn lock_for_server(&self) -> Result<File, RuntimeDirError> {
        self.lock.try_clone().map_err(io_error(&self.dir.lock_file()))
    }

    /// Record the array's process id (written whole, then renamed into place, so a reader
    /// never sees half of it).
    pub fn write_pid(&self, pid: u32) -> Result<(), RuntimeDirError> {
        let path = self.dir.pid_file();
        let partial = self.dir.path().join("pid.new");
        fs::write(&partial, format!("{pid}\n")).map_err(io_error(&partial))?;
        fs::rename(&partial, &path).map_err(io_error(&path))
    }

    /// The array did not start: remove what it left but its log, and free the name.
    pub fn abandon(self) -> Result<(), RuntimeDirError> {
        remove_ended_files(&self.dir, Keep::Log)
    }

    /// The array ran in this process and has ended: remove its folder.
    pub fn finish(self) -> Result<(), RuntimeDirError> {
        remove_ended_files(&self.dir, Keep::Nothing)?;
        let _ = fs::remove_dir(self.dir.path());
        Ok(())
    }
}

fn liveness(dir: &ArrayDir) -> Liveness {
    if let Ok(lock) = File::open(dir.lock_file()) {
        if let Err(e) = flock(&lock, libc::LOCK_SH | libc::LOCK_NB) {
            if e.kind() == io::ErrorKind::WouldBlock {
                return Liveness::Running(dir.pid());
            }
        }
    }
    if dir.control_answers() {
        return Liveness::Running(dir.pid());
    }
    let left = [dir.lock_file(), dir.pid_file(), dir.nbd_socket(), dir.control_socket()];
    if left.iter().any(|p| fs::symlink_metadata(p).is_ok()) {
        Liveness::Stale
    } else {
        Liveness::Vacant
    }
}

/// Clean a folder found stale, under its lock (a process that takes the name meanwhile wins,
/// and nothing of it is touched).
fn clean_stale(dir: &ArrayDir) -> Result<(), RuntimeDirError> {
    if let Some(_lock) = lock_if_free(dir)? {
        if !dir.control_answers() {
            remove_ended_files(dir, Keep::Log)?;
        }
    }
    Ok(())
}

/// The lock of `dir`, taken if no process holds it (`None` if one does, or the folder is
/// gone). A missing lock file is made, so that the caller holds the name while it works.
fn lock_if_free(dir: &ArrayDir) -> Result<Option<File>, RuntimeDirError> {
    let path = dir.lock_file();
    loop {
        let lock = match OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error(&path)(e)),
        };
        match flock(&lock, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(io_error(&path)(e)),
        }
        // The process that held the lock may have removed the file before letting go of it
        // (an ended array's cleanup does, last): a lock on a file no longer at `path` locks
        // nothing anyone else will look at, so take the one there now.
        if same_file(&lock, &path) {
            return Ok(Some(lock));
        }
    }
}

fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Log,
    Nothing,
}

/// Remove what an ended array left and its lock, freeing the name: the caller holds the lock
/// until then, so no process takes the name while half of the old files are still there.
fn remove_ended_files(dir: &ArrayDir, keep: Keep) -> Result<(), RuntimeDirError> {
    remove_leftovers(dir, keep)?;
    remove_if_there(&dir.lock_file())
}

/// Remove an ended array's files but its lock: sockets only if they are sockets (anything
/// else there is not ours to remove), the pid file, and the log unless kept.
fn remove_leftovers(dir: &ArrayDir, keep: Keep) -> Result<(), RuntimeDirError> {
    for socket in [dir.nbd_socket(), dir.control_socket()] {
        if fs::symlink_metadata(&socket).is_ok_and(|m| m.file_type().is_socket()) {
            remove_if_there(&socket)?;
        }
    }
    remove_if_there(&dir.pid_file())?;
    remove_if_there(&dir.path().join("pid.new"))?;
    if keep == Keep::Nothing {
        remove_if_there(&dir.log_file())?;
    }
    Ok(())
}

fn remove_if_there(path: &Path) -> Result<(), RuntimeDirError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_error(path)(e)),
        _ => Ok(()),
    }
}

/// Make `path` a folder only its owner can enter (with its parents if `parents`); one that
/// exists is left as it is.
fn make_private_dir(path: &Path, parents: bool) -> Result<(), RuntimeDirError> {
    match fs::DirBuilder::new().recursive(parents).mode(0o700).create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(io_error(path)(e)),
    }
}

fn flock(file: &File, operation: i32) -> io::Result<()> {
    // SAFETY: flock on a descriptor this File owns.
    if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(uraid: Option<&str>, xdg: Option<&str>, root: bool) -> RuntimeEnv {
        RuntimeEnv { uraid_runtime_dir: uraid.map(Into::into), xdg_runtime_dir: xdg.map(Into::into), root }
    }

    #[test]
    fn the_variable_wins_then_root_then_xdg() {
        assert_eq!(resolve(&env(Some("/srv/rt"), Some("/run/user/1000"), true)).unwrap(), Path::new("/srv/rt"));
        assert_eq!(resolve(&env(None, Some("/run/user/1000"), true)).unwrap(), Path::new("/run/uraid"));
        assert_eq!(resolve(&env(None, Some("/run/user/1000"), false)).unwrap(), Path::new("/run/user/1000/uraid"));
        // An empty variable is as good as unset.
        assert_eq!(resolve(&env(Some(""), Some("/run/user/7"), false)).unwrap(), Path::new("/run/user/7/uraid"));
    }

    #[test]
    fn a_relative_variable_is_taken_from_here_and_a_relative_xdg_is_ignored() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(resolve(&env(Some("rt"), None, false)).unwrap(), here.join("rt"));
        assert!(matches!(resolve(&env(None, Some("run/user"), false)), Err(RuntimeDirError::Unset)));
        assert!(matches!(resolve(&env(None, None, false)), Err(RuntimeDirError::Unset)));
        assert!(resolve(&env(None, None, false)).unwrap_err().to_string().contains(ENV_VAR));
    }

    #[test]
    fn an_array_folder_holds_its_files_under_its_name() {
        let rt = RuntimeDir::at(PathBuf::from("/rt"));
        let dir = rt.array_dir("data").unwrap();
        assert_eq!(dir.nbd_socket(), Path::new("/rt/data/nbd.sock"));
        assert_eq!(dir.control_socket(), Path::new("/rt/data/control.sock"));
        assert_eq!(dir.pid_file(), Path::new("/rt/data/pid"));
        assert_eq!(dir.log_file(), Path::new("/rt/data/log"));
        assert_eq!(dir.nbd_uri(), "nbd+unix:///?socket=/rt/data/nbd.sock");
        assert!(matches!(rt.array_dir("../etc"), Err(RuntimeDirError::Name(_))));
    }

    /// A claim holds the name until released; a folder whose lock nobody holds is stale and
    /// is cleaned, its log kept.
    #[test]
    fn claims_exclude_each_other_and_stale_folders_are_cleaned() {
        let tmp = tempfile::tempdir().unwrap();
        let rt = RuntimeDir::at(tmp.path().join("rt"));
        let claim = rt.claim("data").unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(rt.base()).unwrap().permissions().mode() & 0o777, 0o700);
        claim.write_pid(4242).unwrap();
        assert!(matches!(rt.claim("data"), Err(RuntimeDirError::AlreadyRunning { pid: Some(4242), .. })));
        let running = rt.running().unwrap();
        assert_eq!(running.len(), 1);
        assert_eq!((running[0].dir.name(), running[0].pid), ("data", Some(4242)));
        assert!(rt.remove_ended(&running[0].dir).is_err(), "removed the folder of a running array");

        // The process "dies": its lock is dropped, its files stay behind.
        fs::write(claim.dir().log_file(), "why it ended\n").unwrap();
        let dir = claim.dir().clone();
        drop(claim);
        assert!(rt.running().unwrap().is_empty());
        assert!(!dir.pid_file().exists() && !dir.lock_file().exists(), "stale files left");
        assert_eq!(fs::read_to_string(dir.log_file()).unwrap(), "why it ended\n");
        assert!(matches!(rt.find("data"), Err(RuntimeDirError::NotRunning { .. })));
        let again = rt.claim("data").unwrap();
        again.finish().unwrap();
        assert!(!dir.path().exists());
    }
}
