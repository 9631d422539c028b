//! uraid's NBD (Network Block Device) server, and its client.
//!
//! - [`proto`]: the wire format (constants and fixed-size messages), checked against the
//!   protocol description `doc/proto.md` of the NetworkBlockDevice/nbd project;
//! - [`export`]: the [`Export`] trait the RAID side implements, and what crosses it;
//! - [`server`]: the fixed-newstyle handshake and a threaded transmission phase: per connection a
//!   reader that submits requests as soon as they are parsed and a writer that sends replies in
//!   completion order, simple or structured;
//! - [`addr`]: `unix:PATH` / `tcp:HOST:PORT` listen addresses;
//! - [`client`]: the client side, for members that are NBD exports: URIs, the handshake,
//!   many requests in flight per connection, multi-conn, reconnection;
//! - [`tls`]: TLS for both sides (`NBD_OPT_STARTTLS`, PSK and X.509, through OpenSSL).
//!
//! With the `testing` feature, the `testing` module adds an in-memory export whose completions
//! arrive out of order on other threads, and a small client.

pub mod addr;
mod budget;
pub mod client;
mod client_io;
mod config;
mod conn;
pub mod export;
mod handshake;
mod log;
mod outcome;
pub mod proto;
pub mod server;
mod stream;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;

pub use addr::{bind_unix_socket, parse_listen, AddrError, ListenAddr, Listener};
pub use export::{Completion, Errno, Export, ExportCommand, ExportError, ExportReply, SplicedData};
pub use handshake::MAX_OPTION_DATA;
pub use server::{ConnStats, EndReason, Server, ServerConfig};
pub use stream::Stream;
