//! Telling a service manager that an array serves: systemd's readiness notification
//! (`sd_notify(3)`), a `READY=1` datagram to the socket `$NOTIFY_SOCKET` names, so that a unit
//! of `Type=notify` counts as started only once its array answers, and units ordered after it
//! (an nbd-client, a virtual machine) find the export there.

use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The variable the service manager sets for its notification socket.
const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Send `READY=1` if a service manager asked for notifications; otherwise do nothing. A
/// failure is said on stderr and is not an error: the array serves either way.
pub fn ready() {
    let Some(target) = std::env::var_os(NOTIFY_SOCKET) else { return };
    if let Err(e) = send(&target.to_string_lossy(), b"READY=1") {
        eprintln!("uraid: telling the service manager the array is ready ({NOTIFY_SOCKET}={}): {e}", target.display());
    }
}

fn send(target: &str, message: &[u8]) -> std::io::Result<()> {
    let socket = UnixDatagram::unbound()?;
    // A leading '@' names a socket in the abstract namespace.
    let addr = match target.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())?
        }
        None => SocketAddr::from_pathname(target)?,
    };
    socket.send_to_addr(message, &addr).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_reaches_a_path_socket_and_an_abstract_one() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        send(path.to_str().unwrap(), b"READY=1").unwrap();
        let mut buf = [0u8; 32];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("uraid-notify-test-{}", std::process::id());
        let abstract_listener =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
        send(&format!("@{name}"), b"READY=1").unwrap();
        let n = abstract_listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        assert!(send(tmp.path().join("nobody").to_str().unwrap(), b"READY=1").is_err());
    }
}
