//! How a connection ended ([`EndReason`]) and what it did ([`ConnStats`]).

use std::fmt;

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndReason {
    /// EOF or a reset from the client without `NBD_CMD_DISC`.
    ClientDisconnected,
    /// The client sent `NBD_CMD_DISC`.
    Disconnect,
    /// The client sent `NBD_OPT_ABORT` during the handshake.
    Aborted,
    /// The client broke the protocol; the text says how.
    ProtocolError(String),
    /// The server refused what the client asked for in a way the protocol can only answer by
    /// closing (an unknown name in `NBD_OPT_EXPORT_NAME`).
    Refused(String),
    /// [`Server::stop`](crate::Server::stop) was called.
    ServerStop,
    /// A socket error other than the client going away.
    Io(String),
    /// The TLS handshake after `NBD_OPT_STARTTLS` failed (wrong key, untrusted certificate...).
    Tls(String),
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndReason::ClientDisconnected => f.write_str("client disconnected"),
            EndReason::Disconnect => f.write_str("client sent NBD_CMD_DISC"),
            EndReason::Aborted => f.write_str("client sent NBD_OPT_ABORT"),
            EndReason::ProtocolError(m) => write!(f, "protocol error: {m}"),
            EndReason::Refused(m) => write!(f, "refused: {m}"),
            EndReason::ServerStop => f.write_str("server stopping"),
            EndReason::Io(m) => write!(f, "I/O error: {m}"),
            EndReason::Tls(m) => write!(f, "{m}"),
        }
    }
}

/// What one connection did, returned when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnStats {
    /// The export name the client asked for, if it got as far as choosing one.
    pub export: Option<String>,
    pub structured_replies: bool,
    /// Requests answered (every reply written, errors included).
    pub requests: u64,
    /// Bytes of read data sent to the client.
    pub bytes_read: u64,
    /// Bytes of write data the export accepted.
    pub bytes_written: u64,
    pub reason: EndReason,
}
