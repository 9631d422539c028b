//! Why TLS could not be set up or negotiated, on either side.

use std::io;

use openssl::error::ErrorStack;
use openssl::ssl::{HandshakeError, SslRef};
use thiserror::Error;

use super::psk_file::{PskFile, PskFileError};

#[derive(Debug, Error)]
pub enum TlsError {
    /// The PSK file is missing, unreadable or malformed.
    #[error("PSK file {path}: {source}")]
    PskFile { path: String, source: PskFileError },
    /// The PSK file has no key for the user name this client sends.
    #[error("PSK file {path} has no key for user {username:?} (the user is tls-username=, the URI's USER@, or the local user name)")]
    UnknownUser { path: String, username: String },
    /// No user name was given and none could be found for this process.
    #[error("no user name for TLS-PSK: give tls-username=NAME (or USER@ in the URI), or set LOGNAME")]
    NoUsername,
    /// A certificate, key or CA file is missing or unusable.
    #[error("{path}: {reason}")]
    Credentials { path: String, reason: String },
    /// A certificate folder has one half of a certificate and key pair without the other.
    #[error("{present} without {missing} in {dir}: give both, or neither")]
    HalfKeyPair { dir: String, present: &'static str, missing: &'static str },
    /// OpenSSL refused a setting (its own words); `step` says which.
    #[error("TLS setup, {step}: {reason}")]
    Setup { step: String, reason: String },
    /// The TLS handshake failed; `hint` says what usually causes it.
    #[error("TLS handshake failed: {reason}{hint}")]
    Handshake { reason: String, hint: String },
    /// The TLS handshake went through, and the server then ended the session (in TLS 1.3 a
    /// server refuses a client's certificate only after the client's side of the handshake).
    #[error("the server ended the TLS session right after the handshake: {reason}{hint}")]
    EndedAfterHandshake { reason: String, hint: String },
    /// The relay thread or its socket pair could not be made.
    #[error("TLS relay: {0}")]
    Relay(io::Error),
}

/// For `map_err`: OpenSSL refused the setup step `step`.
pub(crate) fn setup(step: impl Into<String>) -> impl FnOnce(ErrorStack) -> TlsError {
    let step = step.into();
    move |e| TlsError::Setup { step, reason: describe_stack(&e) }
}

/// OpenSSL's reasons, without its numeric codes and file names: "tlsv1 alert decrypt error".
pub(crate) fn describe_stack(e: &ErrorStack) -> String {
    let reasons: Vec<String> =
        e.errors().iter().map(|err| err.reason().map(str::to_string).unwrap_or_else(|| err.to_string())).collect();
    if reasons.is_empty() {
        "no reason given".into()
    } else {
        reasons.join("; ")
    }
}

/// What a failed handshake says: OpenSSL's reason, the certificate check's verdict if that was
/// it, or what happened to the socket.
pub(crate) fn describe_handshake<S>(e: &HandshakeError<S>) -> String {
    match e {
        HandshakeError::SetupFailure(stack) => describe_stack(stack),
        HandshakeError::Failure(mid) | HandshakeError::WouldBlock(mid) => describe_ssl(mid.ssl(), mid.error()),
    }
}

fn describe_ssl(ssl: &SslRef, e: &openssl::ssl::Error) -> String {
    let verify = ssl.verify_result();
    if verify != openssl::x509::X509VerifyResult::OK {
        return format!("certificate verify failed: {}", verify.error_string());
    }
    if let Some(stack) = e.ssl_error() {
        return describe_stack(stack);
    }
    match e.io_error() {
        Some(io) if io.kind() == io::ErrorKind::WouldBlock => "timed out".into(),
        Some(io) => io.to_string(),
        None => "the peer closed the connection".into(),
    }
}

/// The keys of the PSK file at `path`, for a server or a client; errors name the file.
pub(crate) fn load_psk_file(path: &std::path::Path) -> Result<PskFile, TlsError> {
    PskFile::load(path).map_err(|source| TlsError::PskFile { path: path.display().to_string(), source })
}
