//! TLS for both sides of NBD: `NBD_OPT_STARTTLS`, then a TLS handshake on the same socket, then
//! the rest of the option haggling and the transmission phase inside TLS.
//!
//! OpenSSL (the `openssl` crate) does the TLS, because the peers uraid must talk to (nbdkit,
//! qemu-nbd, libnbd's nbdinfo and nbdcopy, all GnuTLS) authenticate either with X.509
//! certificates or with a pre-shared key (TLS-PSK, `psktool` files), and OpenSSL has both, PSK in
//! TLS 1.3 included (with SHA-256, GnuTLS's default for external keys). rustls has no external
//! PSK.
//!
//! - [`psk_file`]: psktool's `USERNAME:HEXKEY` files;
//! - [`x509_dir`]: the certificate folders' file names, as nbdkit, qemu-nbd and libnbd use them;
//! - [`server`]: the server's mode (offered or required) and credentials, and its handshake;
//! - [`client`]: the client's credentials from an `nbds://` URI, and its handshake;
//! - `relay`: the thread that owns a connection's TLS session, so the protocol code keeps a
//!   plain socket (see its documentation for why);
//! - [`error`]: what goes wrong, worded for the person who set it up.

pub mod client;
pub mod error;
pub mod psk_file;
pub(crate) mod relay;
pub mod server;
pub mod x509_dir;

pub use client::ClientTls;
pub use error::TlsError;
pub use psk_file::{PskFile, PskFileError};
pub use server::{ServerCredentials, ServerTls, TlsMode};
