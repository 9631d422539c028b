//! The client's TLS, from an `nbds://` URI's parameters as libnbd reads them: a PSK file and user
//! name, or a certificate folder (the CA that signed the server's certificate, and the client's
//! own certificate if the server asks for one), whether and against which name the server's
//! certificate is checked.

use std::ffi::CStr;
use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use openssl::ssl::{Ssl, SslContext, SslContextBuilder, SslMethod, SslOptions, SslVerifyMode, SslVersion};

use super::error::{describe_handshake, setup, TlsError};
use super::relay::{self, Relay};
use super::x509_dir::{self, CA_CERT, CLIENT_CERT, CLIENT_KEY};
use crate::client::socket::Socket;
use crate::client::uri::{Endpoint, TlsParams};

/// A client's TLS, ready to run handshakes (one per connection, reconnections included).
pub struct ClientTls {
    context: SslContext,
    /// The name the server's certificate must carry (and that is sent as SNI when it is a host
    /// name); `None` checks the chain only, as libnbd does over a Unix socket.
    expected_name: Option<String>,
    /// Why a handshake usually fails with these credentials, added to its error.
    hint: String,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls").field("expected_name", &self.expected_name).finish()
    }
}

impl ClientTls {
    /// Reads the credentials `params` names (errors name the file), for a server at `endpoint`.
    pub fn new(params: &TlsParams, endpoint: &Endpoint) -> Result<ClientTls, TlsError> {
        let mut b = SslContextBuilder::new(SslMethod::tls_client()).map_err(setup("making the client context"))?;
        b.set_min_proto_version(Some(SslVersion::TLS1_2)).map_err(setup("requiring TLS 1.2 or later"))?;
        b.set_options(SslOptions::IGNORE_UNEXPECTED_EOF | SslOptions::NO_RENEGOTIATION);
        let expected_name = params.hostname.clone().or_else(|| match endpoint {
            Endpoint::Tcp { host, .. } => Some(host.clone()),
            Endpoint::Unix { .. } => None,
        });
        let hint = if let Some(file) = &params.psk_file {
            let keys = super::error::load_psk_file(Path::new(file))?;
            let username = match &params.username {
                Some(u) => u.clone(),
                None => local_username().ok_or(TlsError::NoUsername)?,
            };
            let key = keys
                .key(username.as_bytes())
                .ok_or_else(|| TlsError::UnknownUser { path: file.clone(), username: username.clone() })?
                .to_vec();
            let identity = username.clone().into_bytes();
            b.set_psk_client_callback(move |_ssl, _hint, id_out, psk_out| {
                // The identity goes out as a C string; both fit, as the file's limits are
                // OpenSSL's own.
                if identity.len() >= id_out.len() || key.len() > psk_out.len() {
                    return Ok(0);
                }
                id_out[..identity.len()].copy_from_slice(&identity);
                id_out[identity.len()] = 0;
                psk_out[..key.len()].copy_from_slice(&key);
                Ok(key.len())
            });
            // A server that does not take the key would fall back to a certificate; with no CA
            // to check it against, that fails too, so a PSK URI never talks to an unknown server.
            b.set_verify(SslVerifyMode::PEER);
            format!(" (does the server hold the same key for user {username:?} as {file}?)")
        } else {
            match &params.certificates {
                Some(dir) => {
                    let dir = Path::new(dir);
                    x509_dir::check_folder(dir)?;
                    let ca = x509_dir::required(dir, CA_CERT)?;
                    b.set_ca_file(&ca).map_err(|e| x509_dir::file_error(&ca, e))?;
                    match (x509_dir::optional(dir, CLIENT_CERT), x509_dir::optional(dir, CLIENT_KEY)) {
                        (Some(cert), Some(key)) => {
                            x509_dir::use_key_pair(&mut b, &cert, &key)?;
                        }
                        (None, None) => {}
                        (Some(_), None) => return Err(half_key_pair(dir, CLIENT_CERT, CLIENT_KEY)),
                        (None, Some(_)) => return Err(half_key_pair(dir, CLIENT_KEY, CLIENT_CERT)),
                    }
                }
                None => b.set_default_verify_paths().map_err(setup("reading the system's trusted CAs"))?,
            }
            b.set_verify(if params.verify_peer { SslVerifyMode::PEER } else { SslVerifyMode::NONE });
            let name = match &expected_name {
                Some(n) => format!("{n:?}"),
                None => "(none checked over a Unix socket without tls-hostname=)".into(),
            };
            format!(
                " (the server's certificate must be signed by {} and name {name}; tls-hostname= sets another name)",
                params.certificates.as_ref().map_or("a CA the system trusts".into(), |d| format!("{d}/{CA_CERT}"))
            )
        };
        Ok(ClientTls { context: b.build(), expected_name, hint })
    }

    /// The error for a session the server ended at once, for `reason` (the relay's).
    pub(crate) fn ended_after_handshake(&self, reason: String) -> TlsError {
        let hint = if reason.contains("certificate required") {
            " (the server wants a client certificate: put client-cert.pem and client-key.pem in the tls-certificates folder)"
                .to_string()
        } else {
            self.hint.clone()
        };
        TlsError::EndedAfterHandshake { reason, hint }
    }

    /// Runs the client side of the handshake on `stream` (blocking; the socket's timeouts bound
    /// it), then starts its relay.
    pub(crate) fn connect(&self, stream: Socket, linger: Duration) -> Result<Relay, TlsError> {
        let mut ssl = Ssl::new(&self.context).map_err(setup("making a session"))?;
        if let Some(name) = &self.expected_name {
            match name.parse::<IpAddr>() {
                Ok(ip) => ssl.param_mut().set_ip(ip).map_err(setup(format!("expecting IP address {ip}")))?,
                Err(_) => {
                    ssl.set_hostname(name).map_err(setup(format!("sending host name {name:?} (SNI)")))?;
                    ssl.param_mut().set_host(name).map_err(setup(format!("expecting host name {name:?}")))?;
                }
            }
        }
        let tls = ssl
            .connect(stream)
            .map_err(|e| TlsError::Handshake { reason: describe_handshake(&e), hint: self.hint.clone() })?;
        relay::spawn(tls, linger, "nbd-tls-relay").map_err(TlsError::Relay)
    }
}

fn half_key_pair(dir: &Path, present: &'static str, missing: &'static str) -> TlsError {
    TlsError::HalfKeyPair { dir: dir.display().to_string(), present, missing }
}

/// The local user name, found as libnbd finds it: `$LOGNAME`, else the name of the user this
/// process runs as (libnbd asks for the terminal's login name, the same user when there is one).
fn local_username() -> Option<String> {
    if let Some(name) = std::env::var("LOGNAME").ok().filter(|n| !n.is_empty()) {
        return Some(name);
    }
    // SAFETY: passwd is plain data (integers and pointers); all zeros is a valid value of it.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut strings = vec![0 as libc::c_char; 4096];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to memory owned here and sized as passed; `found` is set to
    // `&mut pwd` or null, and pwd's strings point into `strings`, alive below.
    let r = unsafe { libc::getpwuid_r(libc::getuid(), &mut pwd, strings.as_mut_ptr(), strings.len(), &mut found) };
    if r != 0 || found.is_null() {
        return None;
    }
    // SAFETY: pw_name points to a NUL-terminated string inside `strings`.
    let name = unsafe { CStr::from_ptr(pwd.pw_name) }.to_string_lossy().into_owned();
    (!name.is_empty()).then_some(name)
}
