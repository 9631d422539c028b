//! The certificate folders nbdkit, qemu-nbd and libnbd take, by their file names: `ca-cert.pem`
//! (the certificate authority that signed the peer's certificate), `server-cert.pem` and
//! `server-key.pem` on a server, `client-cert.pem` and `client-key.pem` on a client.

use std::path::{Path, PathBuf};

use openssl::ssl::{SslContextBuilder, SslFiletype};

use super::error::TlsError;

pub const CA_CERT: &str = "ca-cert.pem";
pub const SERVER_CERT: &str = "server-cert.pem";
pub const SERVER_KEY: &str = "server-key.pem";
pub const CLIENT_CERT: &str = "client-cert.pem";
pub const CLIENT_KEY: &str = "client-key.pem";
/// A certificate revocation list: nbdkit and libnbd check it when present. uraid cannot yet, and
/// refuses a folder that has one rather than let a revoked certificate through.
pub const CA_CRL: &str = "ca-crl.pem";

/// A file of the folder that must be there.
pub fn required(dir: &Path, name: &str) -> Result<PathBuf, TlsError> {
    let path = dir.join(name);
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => Ok(path),
        Ok(_) => Err(TlsError::Credentials { path: path.display().to_string(), reason: "not a regular file".into() }),
        Err(e) => Err(TlsError::Credentials { path: path.display().to_string(), reason: e.to_string() }),
    }
}

/// A file of the folder that may be there.
pub fn optional(dir: &Path, name: &str) -> Option<PathBuf> {
    let path = dir.join(name);
    path.is_file().then_some(path)
}

/// The folder itself must exist, and hold no revocation list (see [`CA_CRL`]).
pub fn check_folder(dir: &Path) -> Result<(), TlsError> {
    if !dir.is_dir() {
        return Err(TlsError::Credentials { path: dir.display().to_string(), reason: "not a folder".into() });
    }
    if let Some(crl) = optional(dir, CA_CRL) {
        return Err(TlsError::Credentials {
            path: crl.display().to_string(),
            reason: "certificate revocation lists are not supported yet; remove it, or revoke by replacing the CA"
                .into(),
        });
    }
    Ok(())
}

/// Loads the certificate (with any chain after it) at `cert` and its private key at `key` into
/// `b`, and checks that they belong together; errors name the file.
pub fn use_key_pair(b: &mut SslContextBuilder, cert: &Path, key: &Path) -> Result<(), TlsError> {
    b.set_certificate_chain_file(cert).map_err(|e| file_error(cert, e))?;
    b.set_private_key_file(key, SslFiletype::PEM).map_err(|e| file_error(key, e))?;
    b.check_private_key().map_err(|e| file_error(key, e))
}

/// OpenSSL's complaint about a file, named.
pub fn file_error(path: &Path, e: openssl::error::ErrorStack) -> TlsError {
    TlsError::Credentials { path: path.display().to_string(), reason: super::error::describe_stack(&e) }
}
