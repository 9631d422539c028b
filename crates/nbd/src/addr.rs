//! Where the server listens: parsing `unix:PATH` / `tcp:HOST:PORT`, binding, and cleaning up the
//! socket file.

use std::fmt;
use std::fs;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// The IANA-reserved NBD port, for callers that build a default address (`parse_listen` always
/// wants the port spelled out).
pub const NBD_PORT: u16 = 10809;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Unix(p) => write!(f, "unix:{}", p.display()),
            ListenAddr::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

#[derive(Debug, Error)]
pub enum AddrError {
    #[error("listen address {0:?} must be unix:PATH or tcp:HOST:PORT")]
    UnknownScheme(String),
    #[error("listen address {0:?} has an empty socket path")]
    EmptyPath(String),
    #[error("listen address {0:?} must be tcp:HOST:PORT (an IPv6 host in brackets, as in tcp:[::1]:10809)")]
    BadTcp(String),
    #[error("cannot resolve {host:?}: {source}")]
    Resolve { host: String, source: io::Error },
    #[error(
        "refusing to listen on {addr}, which is not a loopback address: NBD has no authentication \
         or encryption, so anyone who can reach the port could read and overwrite the array; \
         pass --allow-remote to listen there anyway"
    )]
    NotLoopback { addr: SocketAddr },
}

/// Parses `unix:PATH` or `tcp:HOST:PORT`. HOST may be an IP address (IPv6 in brackets) or a name;
/// a name is resolved now, and every address it resolves to must be loopback unless
/// `allow_remote`, so that serving beyond this machine is always a deliberate choice.
pub fn parse_listen(s: &str, allow_remote: bool) -> Result<ListenAddr, AddrError> {
    if let Some(path) = s.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(AddrError::EmptyPath(s.into()));
        }
        return Ok(ListenAddr::Unix(PathBuf::from(path)));
    }
    let Some(hostport) = s.strip_prefix("tcp:") else {
        return Err(AddrError::UnknownScheme(s.into()));
    };
    let bad = || AddrError::BadTcp(s.into());
    let (host, port) = hostport.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let host = match host.strip_prefix('[') {
        Some(h) => h.strip_suffix(']').ok_or_else(bad)?,
        // An unbracketed host with a colon would be an IPv6 address cut in the wrong place.
        None if host.contains(':') => return Err(bad()),
        None => host,
    };
    if host.is_empty() {
        return Err(bad());
    }
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            (host, port).to_socket_addrs().map_err(|source| AddrError::Resolve { host: host.into(), source })?.collect()
        }
    };
    let first = *addrs.first().ok_or_else(|| AddrError::Resolve {
        host: host.into(),
        source: io::Error::new(io::ErrorKind::NotFound, "no addresses"),
    })?;
    if !allow_remote {
        if let Some(remote) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(AddrError::NotLoopback { addr: *remote });
        }
    }
    Ok(ListenAddr::Tcp(first))
}

/// A bound listening socket.
#[derive(Debug)]
pub enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

/// A freshly accepted connection.
pub(crate) enum Accepted {
    Unix(UnixStream),
    Tcp(TcpStream, SocketAddr),
}

impl ListenAddr {
    /// Binds the address; a Unix socket as [`bind_unix_socket`] says (owner-only, since whoever
    /// can connect can read and write the whole export). [`crate::Server::run`] removes the
    /// socket file when the server stops.
    pub fn bind(&self) -> io::Result<Listener> {
        match self {
            ListenAddr::Tcp(addr) => TcpListener::bind(addr).map(Listener::Tcp),
            ListenAddr::Unix(path) => bind_unix_socket(path).map(Listener::Unix),
        }
    }
}

/// Bind a Unix socket at `path` for a server (the NBD export, the control socket): an existing
/// socket file nobody answers on is a leftover and is replaced; one a server answers on is in
/// use; anything that is not a socket is never removed. The socket is owner-only (0600) from the
/// moment it exists (`bind_owner_only`), and set so again afterwards for file systems that do
/// not apply the umask to sockets.
pub fn bind_unix_socket(path: &Path) -> io::Result<UnixListener> {
    remove_stale_socket(path)?;
    let listener = bind_owner_only(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Bind a Unix socket at `path` that is owner-only (0600) from the moment it exists. The socket
/// file takes its mode from the umask, and it accepts connections as soon as `bind` returns; a
/// `chmod` afterwards left a window in which anyone the umask let write it could connect and read
/// or write the whole export. The umask is process-wide, so it is narrowed only around the one
/// call (callers bind before they start anything that creates files, or while nothing does).
fn bind_owner_only(path: &Path) -> io::Result<UnixListener> {
    // SAFETY: umask only swaps the process's file-creation mask; it cannot fail.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above, restoring the mask found.
    unsafe { libc::umask(old) };
    bound
}

fn remove_stale_socket(path: &Path) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket; refusing to replace it", path.display()),
        ));
    }
    match UnixStream::connect(path) {
        Ok(_) => {
            Err(io::Error::new(io::ErrorKind::AddrInUse, format!("{} is in use by a running server", path.display())))
        }
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => fs::remove_file(path),
        Err(e) => Err(io::Error::new(e.kind(), format!("checking whether {} is in use: {e}", path.display()))),
    }
}

impl Listener {
    pub fn local_addr(&self) -> io::Result<ListenAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().map(ListenAddr::Tcp),
            Listener::Unix(l) => {
                let addr = l.local_addr()?;
                let path = addr.as_pathname().ok_or_else(|| io::Error::other("unnamed Unix socket"))?;
                Ok(ListenAddr::Unix(path.to_path_buf()))
            }
        }
    }

    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        match self {
            Listener::Unix(l) => l.set_nonblocking(nonblocking),
            Listener::Tcp(l) => l.set_nonblocking(nonblocking),
        }
    }

    pub(crate) fn accept(&self) -> io::Result<Accepted> {
        // Accepted sockets must block: the connection threads use plain blocking I/O.
        match self {
            Listener::Unix(l) => {
                let (s, _) = l.accept()?;
                s.set_nonblocking(false)?;
                Ok(Accepted::Unix(s))
            }
            Listener::Tcp(l) => {
                let (s, peer) = l.accept()?;
                s.set_nonblocking(false)?;
                Ok(Accepted::Tcp(s, peer))
            }
        }
    }
}

impl AsRawFd for Listener {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Listener::Unix(l) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
        }
    }
}

/// Removes a Unix listener's socket file when dropped, but only if the path still names the very
/// socket that was bound, so a later server's socket at the same path is left alone.
pub(crate) struct SocketFileGuard {
    path: Option<(PathBuf, u64, u64)>,
}

impl SocketFileGuard {
    pub(crate) fn new(listener: &Listener) -> Self {
        let path = match listener.local_addr() {
            Ok(ListenAddr::Unix(p)) => fs::symlink_metadata(&p).ok().map(|m| (p, m.dev(), m.ino())),
            _ => None,
        };
        SocketFileGuard { path }
    }
}

impl Drop for SocketFileGuard {
    fn drop(&mut self) {
        if let Some((path, dev, ino)) = &self.path {
            if let Ok(m) = fs::symlink_metadata(path) {
                if m.file_type().is_socket() && m.dev() == *dev && m.ino() == *ino {
                    let _ = fs::remove_file(path);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_unix_and_loopback_tcp() {
        assert_eq!(parse_listen("unix:/run/a.sock", false).unwrap(), ListenAddr::Unix("/run/a.sock".into()));
        assert_eq!(
            parse_listen("tcp:127.0.0.1:10809", false).unwrap(),
            ListenAddr::Tcp("127.0.0.1:10809".parse().unwrap())
        );
        assert_eq!(parse_listen("tcp:[::1]:7", false).unwrap(), ListenAddr::Tcp("[::1]:7".parse().unwrap()));
        let local = parse_listen("tcp:localhost:10809", false).unwrap();
        assert!(matches!(local, ListenAddr::Tcp(a) if a.ip().is_loopback() && a.port() == 10809));
        assert_eq!(parse_listen("tcp:127.0.0.1:0", false).unwrap().to_string(), "tcp:127.0.0.1:0");
    }

    #[test]
    fn refuses_remote_unless_allowed() {
        let e = parse_listen("tcp:0.0.0.0:10809", false).unwrap_err();
        assert!(matches!(e, AddrError::NotLoopback { .. }));
        assert!(e.to_string().contains("--allow-remote"), "{e}");
        assert!(parse_listen("tcp:[::]:10809", false).is_err());
        assert!(parse_listen("tcp:192.0.2.1:10809", false).is_err());
        assert_eq!(parse_listen("tcp:0.0.0.0:10809", true).unwrap(), ListenAddr::Tcp("0.0.0.0:10809".parse().unwrap()));
    }

    #[test]
    fn rejects_malformed_addresses() {
        for bad in [
            "",
            "/tmp/x",
            "udp:1.2.3.4:5",
            "unix:",
            "tcp:",
            "tcp:127.0.0.1",
            "tcp::10809",
            "tcp:127.0.0.1:x",
            "tcp:127.0.0.1:70000",
            "tcp:::1:5",
            "tcp:[::1:5",
            "tcp:[::1]",
        ] {
            assert!(parse_listen(bad, true).is_err(), "{bad:?} was accepted");
        }
    }

    /// Held by the tests that fork and by those that check whether a dropped listener's socket is
    /// stale: a child between fork and exec still holds every descriptor of this process,
    /// listening sockets included, so a socket dropped meanwhile still accepts connections and
    /// reads as in use.
    static FORK_OR_STALE_CHECK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Run in a child process of the test binary (the umask is process-wide, and the other tests
    /// of this binary create files in parallel): under a umask of 0, a socket file made by
    /// `bind_owner_only` is 0600 already, before `bind`'s own `chmod`.
    #[test]
    fn a_socket_is_owner_only_from_the_moment_it_is_bound() {
        let _forking = FORK_OR_STALE_CHECK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("uraid-nbd-umask-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "addr::tests::child_binds_under_umask_zero",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("URAID_UMASK_TEST_DIR", &dir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("socket mode 600, plain file mode 666"), "the child did not check: {text}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[ignore = "run by a_socket_is_owner_only_from_the_moment_it_is_bound in a child process"]
    fn child_binds_under_umask_zero() {
        let Some(dir) = std::env::var_os("URAID_UMASK_TEST_DIR").map(PathBuf::from) else { return };
        // SAFETY: this process runs this one test.
        unsafe { libc::umask(0) };
        let path = dir.join("s.sock");
        let _listener = bind_owner_only(&path).unwrap();
        let socket_mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        // The umask is back as found: a file made now gets everything.
        let plain = dir.join("plain");
        fs::write(&plain, b"x").unwrap();
        let plain_mode = fs::metadata(&plain).unwrap().permissions().mode() & 0o777;
        println!("socket mode {socket_mode:o}, plain file mode {plain_mode:o}");
        assert_eq!(socket_mode, 0o600);
        assert_eq!(plain_mode, 0o666);
    }

    #[test]
    fn bind_replaces_stale_sockets_but_nothing_else() {
        let _no_fork = FORK_OR_STALE_CHECK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("uraid-nbd-addr-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let addr = ListenAddr::Unix(path.clone());

        // A regular file is never removed.
        fs::write(&path, b"precious").unwrap();
        let e = addr.bind().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(fs::read(&path).unwrap(), b"precious");
        fs::remove_file(&path).unwrap();

        // A live socket is in use.
        let live = addr.bind().unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(addr.bind().unwrap_err().kind(), io::ErrorKind::AddrInUse);

        // Once its listener is gone the file is stale and is replaced.
        drop(live);
        assert!(path.exists());
        let again = addr.bind().unwrap();
        assert_eq!(again.local_addr().unwrap(), addr);

        // The guard removes its own socket, but not a different one at the same path.
        let guard = SocketFileGuard::new(&again);
        drop(guard);
        assert!(!path.exists());
        let third = addr.bind().unwrap();
        let stale_guard = SocketFileGuard { path: Some((path.clone(), 0, 0)) };
        drop(stale_guard);
        assert!(path.exists());
        drop(third);
        fs::remove_dir_all(&dir).unwrap();
    }
}
