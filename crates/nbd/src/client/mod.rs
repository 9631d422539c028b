//! uraid as an NBD client: an export on another host (or another process) used as a member.
//!
//! - [`uri`]: libnbd's `nbd://` and `nbd+unix://` URIs, and how a member string is told from a
//!   path;
//! - [`handshake`]: the fixed-newstyle handshake from the client's side;
//! - [`reply`]: reading simple and structured replies, checked against their requests;
//! - `connection`: one connection with many requests in flight, a reader thread matching
//!   replies to requests by handle;
//! - [`blocks`]: fitting ranges to the server's block size constraints;
//! - [`config`]: timeouts, reconnection backoff, connection count;
//! - [`NbdClient`]: an export over one or several connections (multi-conn), opened again when
//!   they break.

pub mod blocks;
pub mod config;
mod connection;
mod export_client;
pub mod handshake;
pub mod reply;
pub(crate) mod socket;
pub mod uri;

pub use config::ClientConfig;
pub use connection::{CallError, ConnectError};
pub use export_client::{ClientError, NbdClient};
pub use handshake::{ExportInfo, HandshakeError};
pub use uri::{looks_like_nbd_uri, Endpoint, NbdUri, UriError};
