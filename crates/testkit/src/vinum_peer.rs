//! The independent Vinum reader the cross-checks run: Python with the package
//! `dissect.volume`, and the helper scripts in `crates/vinum/format/tests/peer/`.
//!
//! `scripts/setup.sh` installs `dissect.volume` at the version pinned in that folder's
//! `requirements.txt` into a virtualenv at `${XDG_CACHE_HOME:-$HOME/.cache}/uraid/peer-venv`;
//! [`python`] takes that virtualenv's Python, or the one `URAID_VINUM_PEER_PYTHON` names (then
//! whatever `dissect.volume` version it has). Without a usable one every caller fails, saying
//! what to do: a suite that skips its peer would pass having compared nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::workspace_root;

/// The variable that names another Python to run the peer with.
pub const PYTHON_VAR: &str = "URAID_VINUM_PEER_PYTHON";

/// The folder holding the peer's pinned requirements and the helper scripts.
pub fn peer_dir() -> PathBuf {
    workspace_root().join("crates/vinum/format/tests/peer")
}

/// A helper script of [`peer_dir`], by file name.
pub fn script(name: &str) -> PathBuf {
    let path = peer_dir().join(name);
    assert!(path.is_file(), "the peer helper {} is missing", path.display());
    path
}

/// The virtualenv `scripts/setup.sh` makes: `${XDG_CACHE_HOME:-$HOME/.cache}/uraid/peer-venv`.
fn default_venv() -> PathBuf {
    let set = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache = set("XDG_CACHE_HOME").or_else(|| set("HOME").map(|home| home.join(".cache"))).unwrap_or_else(|| {
        panic!("neither XDG_CACHE_HOME nor HOME is set, so the peer's virtualenv cannot be found; set {PYTHON_VAR}")
    });
    cache.join("uraid/peer-venv")
}

/// The `dissect.volume` version pinned in the peer's `requirements.txt`.
fn pinned_version() -> String {
    let path = peer_dir().join("requirements.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .find_map(|l| l.trim().strip_prefix("dissect.volume=="))
        .unwrap_or_else(|| panic!("{}: no dissect.volume==VERSION line", path.display()))
        .to_string()
}

/// Where the peer's Python is and whether it is usable, checked once per test binary: a
/// missing Python or module fails every test with what to do.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = PYTHON.get_or_init(|| {
        let (python, pinned, fix) = match std::env::var_os(PYTHON_VAR).filter(|v| !v.is_empty()) {
            Some(p) => (
                PathBuf::from(p),
                None,
                format!("install dissect.volume there, or unset {PYTHON_VAR} and run scripts/setup.sh"),
            ),
            None => (
                default_venv().join("bin/python"),
                Some(pinned_version()),
                format!("run scripts/setup.sh to install it (or set {PYTHON_VAR} to a Python that has it)"),
            ),
        };
        let probe = "import importlib.metadata as m, dissect.volume.vinum.vinum; print(m.version('dissect.volume'))";
        let output = Command::new(&python)
            .args(["-c", probe])
            .output()
            .map_err(|e| format!("cannot run the peer's Python {}: {e}; {fix}", python.display()))?;
        if !output.status.success() {
            return Err(format!(
                "{} cannot import dissect.volume: {}; {fix}",
                python.display(),
                // The traceback's last line says what is missing.
                String::from_utf8_lossy(&output.stderr).trim().lines().last().unwrap_or("")
            ));
        }
        let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
        match pinned {
            Some(pinned) if version != pinned => Err(format!(
                "{} has dissect.volume {version}, but crates/vinum/format/tests/peer/requirements.txt pins {pinned}; {fix}",
                python.display()
            )),
            _ => Ok(python),
        }
    });
    match found {
        Ok(python) => python,
        Err(message) => panic!("{message}"),
    }
}
