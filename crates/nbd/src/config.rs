//! The server's settings: [`ServerConfig`] with its payload limits, and what every connection
//! is served with once the server has adjusted them.

use std::sync::Arc;
use std::time::Duration;

use crate::budget::ServerBudget;
use crate::export::Export;
use crate::tls::ServerTls;

/// Default largest READ/WRITE payload: 2^25, the size the spec says clients may always use.
pub const DEFAULT_MAX_PAYLOAD: u32 = 32 << 20;

/// Largest `max_payload` accepted; bigger values are lowered to it so that a read reply always fits
/// one structured chunk (whose length field must also hold the 8-byte offset).
pub const MAX_PAYLOAD_CEILING: u32 = 1 << 30;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The export's name. Clients may also ask for "" (the default export) and get this one.
    pub export_name: String,
    /// Shown by `NBD_OPT_LIST` and `NBD_INFO_DESCRIPTION`.
    pub description: Option<String>,
    /// Largest READ/WRITE length, advertised as the maximum block size.
    pub max_payload: u32,
    /// Per connection, the reader stops taking requests while the reads and writes it has
    /// submitted but not yet answered add up to more than this (one request is always allowed).
    pub max_inflight_bytes: u64,
    /// Per connection, the most requests submitted but not yet answered.
    pub max_inflight_requests: usize,
    /// Across every connection of the server, readers stop taking requests while those
    /// submitted and not yet answered add up to more than this (a connection with nothing in
    /// flight is always let one through), so that a client opening many connections cannot make
    /// the server hold many times one connection's queue.
    pub max_server_inflight_bytes: u64,
    /// When a connection is closing and its replies have not moved for this long because the
    /// client stopped reading them, the socket is shut down instead of waiting forever.
    pub stalled_client_timeout: Duration,
    /// TLS offered or required (`None`: `NBD_OPT_STARTTLS` is refused, nbdkit's `--tls=off`).
    pub tls: Option<ServerTls>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            export_name: String::new(),
            description: None,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_inflight_bytes: 64 << 20,
            max_inflight_requests: 512,
            max_server_inflight_bytes: 64 << 20,
            stalled_client_timeout: Duration::from_secs(30),
            tls: None,
        }
    }
}

/// What every connection of a server is served with: the export, and the configuration and
/// preferred block size as `Server::new` adjusted them.
pub(crate) struct Settings {
    pub export: Arc<dyn Export>,
    pub config: ServerConfig,
    /// Room for requests in flight across all connections.
    pub budget: Arc<ServerBudget>,
}

impl Settings {
    /// The export's preferred block size as it is now (an export may change shape while served),
    /// made valid for `NBD_INFO_BLOCK_SIZE`: a power of two of at least 512, and no larger than
    /// the maximum payload.
    pub fn preferred_block_size(&self) -> u32 {
        let ceiling = 1u32 << (31 - self.config.max_payload.max(512).leading_zeros());
        valid_preferred(self.export.preferred_block_size()).min(ceiling)
    }
}

/// `preferred` raised to a power of two of at least 512.
pub(crate) fn valid_preferred(preferred: u32) -> u32 {
    preferred.max(512).checked_next_power_of_two().unwrap_or(1 << 31)
}
