//! The server's TLS: its mode (offered or required), its credentials (a PSK file, or an X.509
//! certificate folder as nbdkit and qemu-nbd take it), and accepting a client's handshake after
//! `NBD_OPT_STARTTLS`.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use openssl::ex_data::Index;
use openssl::ssl::{Ssl, SslContext, SslContextBuilder, SslMethod, SslOptions, SslVerifyMode, SslVersion};

use super::error::{describe_handshake, setup, TlsError};
use super::relay::{self, NetSocket, Relay};
use super::x509_dir::{self, CA_CERT, SERVER_CERT, SERVER_KEY};

/// nbdkit's `--tls=on` and `--tls=require` (`--tls=off` is no [`ServerTls`] at all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Clients may upgrade with `NBD_OPT_STARTTLS`, or go on in plain text.
    On,
    /// Every option but `NBD_OPT_STARTTLS` and `NBD_OPT_ABORT` is refused with
    /// `NBD_REP_ERR_TLS_REQD` until TLS is up (the protocol's FORCEDTLS mode).
    Require,
}

/// How clients prove who they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerCredentials {
    /// A psktool file: a client is let in with any user name and key it holds.
    Psk { file: PathBuf },
    /// A folder with `server-cert.pem` and `server-key.pem`; with `verify_peer`, clients must
    /// show a certificate signed by its `ca-cert.pem`.
    X509 { dir: PathBuf, verify_peer: bool },
}

/// A server's TLS, ready to accept handshakes.
#[derive(Clone)]
pub struct ServerTls {
    mode: TlsMode,
    context: Arc<SslContext>,
    /// "PSK" or "X.509", for the log.
    kind: &'static str,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls").field("mode", &self.mode).field("kind", &self.kind).finish()
    }
}

impl ServerTls {
    /// Loads the credentials now, so a missing or bad file stops the server before it serves.
    pub fn new(mode: TlsMode, credentials: &ServerCredentials) -> Result<ServerTls, TlsError> {
        let mut b = SslContextBuilder::new(SslMethod::tls_server()).map_err(setup("making the server context"))?;
        b.set_min_proto_version(Some(SslVersion::TLS1_2)).map_err(setup("requiring TLS 1.2 or later"))?;
        // No resumption is offered, so tickets would only cost the client a message to ignore.
        b.set_num_tickets(0).map_err(setup("turning session tickets off"))?;
        b.set_options(SslOptions::IGNORE_UNEXPECTED_EOF | SslOptions::NO_RENEGOTIATION);
        let kind = match credentials {
            ServerCredentials::Psk { file } => {
                let keys = super::error::load_psk_file(file)?;
                let user_index = psk_user_index()?;
                b.set_psk_server_callback(move |ssl, identity, psk| match identity.map(|id| (id, keys.key(id))) {
                    Some((id, Some(key))) if key.len() <= psk.len() => {
                        psk[..key.len()].copy_from_slice(key);
                        // Kept for the log: TLS 1.3 does not report the identity afterwards.
                        ssl.set_ex_data(user_index, String::from_utf8_lossy(id).into_owned());
                        Ok(key.len())
                    }
                    // An unknown user gets 0 bytes: OpenSSL then fails the handshake.
                    _ => Ok(0),
                });
                "PSK"
            }
            ServerCredentials::X509 { dir, verify_peer } => {
                x509_dir::check_folder(dir)?;
                let cert = x509_dir::required(dir, SERVER_CERT)?;
                let key = x509_dir::required(dir, SERVER_KEY)?;
                x509_dir::use_key_pair(&mut b, &cert, &key)?;
                if *verify_peer {
                    let ca = x509_dir::required(dir, CA_CERT)?;
                    b.set_ca_file(&ca).map_err(|e| x509_dir::file_error(&ca, e))?;
                    b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
                }
                "X.509"
            }
        };
        Ok(ServerTls { mode, context: Arc::new(b.build()), kind })
    }

    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// Runs the server side of the handshake on `stream` (blocking), then starts its relay.
    /// Returns the relay and a line for the log: protocol, cipher, and who the client is.
    pub(crate) fn accept<S: NetSocket>(&self, stream: S, linger: Duration) -> Result<(Relay, String), TlsError> {
        let ssl = Ssl::new(&self.context).map_err(setup("making a session for a client"))?;
        let tls = ssl.accept(stream).map_err(|e| TlsError::Handshake {
            reason: describe_handshake(&e),
            hint: format!(" ({} authentication)", self.kind),
        })?;
        let s = tls.ssl();
        let psk_user = psk_user_index().ok().and_then(|i| s.ex_data(i));
        let who = match (psk_user, s.peer_certificate()) {
            (Some(user), _) => format!(", PSK user {user:?}"),
            (None, Some(cert)) => format!(", client certificate {}", subject_line(&cert)),
            (None, None) => String::new(),
        };
        let summary = format!(
            "TLS ({}, {}, {}{who})",
            self.kind,
            s.version_str(),
            s.current_cipher().map_or("no cipher", |c| c.name())
        );
        let relay = relay::spawn(tls, linger, "nbd-tls-relay").map_err(TlsError::Relay)?;
        Ok((relay, summary))
    }
}

/// Where a connection keeps the PSK user its client authenticated as.
fn psk_user_index() -> Result<Index<Ssl, String>, TlsError> {
    static INDEX: OnceLock<Index<Ssl, String>> = OnceLock::new();
    if let Some(i) = INDEX.get() {
        return Ok(*i);
    }
    let i = Ssl::new_ex_index().map_err(setup("making a place for the PSK user name"))?;
    Ok(*INDEX.get_or_init(|| i))
}

/// A certificate's subject as `CN=...,O=...`.
fn subject_line(cert: &openssl::x509::X509) -> String {
    let parts: Vec<String> = cert
        .subject_name()
        .entries()
        .map(|e| {
            let key = e.object().nid().short_name().unwrap_or("?");
            let value = e.data().to_string().unwrap_or_else(|_| "?".into());
            format!("{key}={value}")
        })
        .collect();
    parts.join(",")
}
