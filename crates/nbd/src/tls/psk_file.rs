//! Pre-shared key files in the format GnuTLS's `psktool` writes and nbdkit, qemu-nbd and libnbd
//! read: one `USERNAME:HEXKEY` per line.
//!
//! Parsed strictly, so that a mistyped file is reported with its line rather than found out as a
//! failed handshake: blank lines are skipped, every other line must hold a user name, a colon and
//! an even, non-empty number of hex digits; a user named twice is an error (GnuTLS would silently
//! take the first). The limits are OpenSSL's (`PSK_MAX_IDENTITY_LEN`, `PSK_MAX_PSK_LEN`).

use std::fmt;
use std::path::Path;

use thiserror::Error;

/// Longest user name (the TLS PSK identity) OpenSSL sends or accepts.
pub const MAX_USERNAME_LEN: usize = 256;

/// Longest key OpenSSL takes, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// Why a PSK file could not be used. Line numbers start at 1.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PskFileError {
    #[error("cannot be read: {reason}")]
    Read { reason: String },
    #[error("line {line}: expected USERNAME:HEXKEY (as psktool writes it)")]
    NoColon { line: usize },
    #[error("line {line}: the user name is empty")]
    EmptyUsername { line: usize },
    #[error("line {line}: the user name is longer than {MAX_USERNAME_LEN} bytes")]
    UsernameTooLong { line: usize },
    #[error("line {line}: the user name contains a control character")]
    ControlInUsername { line: usize },
    #[error("line {line}: the key is empty")]
    EmptyKey { line: usize },
    #[error("line {line}: the key has an odd number of hex digits")]
    OddKey { line: usize },
    #[error("line {line}: the key has a character that is not a hex digit")]
    NotHex { line: usize },
    #[error("line {line}: the key is longer than {MAX_KEY_LEN} bytes")]
    KeyTooLong { line: usize },
    #[error("line {line}: user {username:?} was already given on line {first}")]
    Duplicate { line: usize, username: String, first: usize },
    #[error("the file holds no key")]
    Empty,
}

/// One user's key.
#[derive(Clone, PartialEq, Eq)]
struct PskEntry {
    username: String,
    key: Vec<u8>,
}

/// Keys are never printed.
impl fmt::Debug for PskEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PskEntry {{ username: {:?}, key: <{} bytes> }}", self.username, self.key.len())
    }
}

/// The keys of a PSK file, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PskFile {
    entries: Vec<PskEntry>,
}

impl PskFile {
    /// Reads and parses the file at `path`; errors do not repeat the path (callers name it).
    pub fn load(path: &Path) -> Result<PskFile, PskFileError> {
        let text = std::fs::read(path).map_err(|e| PskFileError::Read { reason: e.to_string() })?;
        let text = String::from_utf8(text).map_err(|_| PskFileError::Read { reason: "not UTF-8 text".into() })?;
        PskFile::parse(&text)
    }

    /// Parses a file's text (see the module documentation for what is accepted).
    pub fn parse(text: &str) -> Result<PskFile, PskFileError> {
        let mut entries: Vec<(PskEntry, usize)> = Vec::new();
        for (index, raw) in text.split('\n').enumerate() {
            let line = index + 1;
            let raw = raw.strip_suffix('\r').unwrap_or(raw);
            if raw.trim().is_empty() {
                continue;
            }
            // The first colon ends the name, as GnuTLS reads it: a key never holds one.
            let (username, hex) = raw.split_once(':').ok_or(PskFileError::NoColon { line })?;
            if username.is_empty() {
                return Err(PskFileError::EmptyUsername { line });
            }
            if username.len() > MAX_USERNAME_LEN {
                return Err(PskFileError::UsernameTooLong { line });
            }
            if username.chars().any(char::is_control) {
                return Err(PskFileError::ControlInUsername { line });
            }
            let key = decode_hex(hex, line)?;
            if let Some((_, first)) = entries.iter().find(|(e, _)| e.username == username) {
                return Err(PskFileError::Duplicate { line, username: username.to_string(), first: *first });
            }
            entries.push((PskEntry { username: username.to_string(), key }, line));
        }
        if entries.is_empty() {
            return Err(PskFileError::Empty);
        }
        Ok(PskFile { entries: entries.into_iter().map(|(e, _)| e).collect() })
    }

    /// The key of `username`, if the file has one.
    pub fn key(&self, username: &[u8]) -> Option<&[u8]> {
        self.entries.iter().find(|e| e.username.as_bytes() == username).map(|e| e.key.as_slice())
    }

    /// The users the file has keys for, in file order (the keys stay inside: see [`PskFile::key`]).
    pub fn usernames(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.username.as_str())
    }
}

fn decode_hex(hex: &str, line: usize) -> Result<Vec<u8>, PskFileError> {
    if hex.is_empty() {
        return Err(PskFileError::EmptyKey { line });
    }
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(PskFileError::NotHex { line });
    }
    if !hex.len().is_multiple_of(2) {
        return Err(PskFileError::OddKey { line });
    }
    if hex.len() / 2 > MAX_KEY_LEN {
        return Err(PskFileError::KeyTooLong { line });
    }
    let digit = |b: u8| (b as char).to_digit(16).expect("checked above") as u8;
    Ok(hex.as_bytes().chunks(2).map(|pair| digit(pair[0]) << 4 | digit(pair[1])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psktool_lines() {
        let f = PskFile::parse("alice:0a1B\r\n\nbob:00ff00ff\n").unwrap();
        assert_eq!(f.key(b"alice"), Some(&[0x0a, 0x1b][..]));
        assert_eq!(f.key(b"bob"), Some(&[0, 0xff, 0, 0xff][..]));
        assert_eq!(f.key(b"carol"), None);
        assert_eq!(f.usernames().collect::<Vec<_>>(), ["alice", "bob"]);
        assert!(!format!("{f:?}").contains("0a"), "keys are not printed");
    }

    #[test]
    fn mistakes_are_named_with_their_line() {
        let e = |t: &str| PskFile::parse(t).unwrap_err();
        assert_eq!(e("alice:00\nbob"), PskFileError::NoColon { line: 2 });
        assert_eq!(e(":00"), PskFileError::EmptyUsername { line: 1 });
        assert_eq!(e("a:"), PskFileError::EmptyKey { line: 1 });
        assert_eq!(e("a:abc"), PskFileError::OddKey { line: 1 });
        assert_eq!(e("a:zz"), PskFileError::NotHex { line: 1 });
        assert_eq!(e("a:00 "), PskFileError::NotHex { line: 1 });
        assert_eq!(e("a\tb:00"), PskFileError::ControlInUsername { line: 1 });
        assert_eq!(e(&format!("a:{}", "00".repeat(MAX_KEY_LEN + 1))), PskFileError::KeyTooLong { line: 1 });
        assert_eq!(e(&format!("{}:00", "u".repeat(MAX_USERNAME_LEN + 1))), PskFileError::UsernameTooLong { line: 1 });
        assert_eq!(e("a:00\n\na:11"), PskFileError::Duplicate { line: 3, username: "a".into(), first: 1 });
        assert_eq!(e("\n \n"), PskFileError::Empty);
        assert_eq!(e("a:00:11"), PskFileError::NotHex { line: 1 });
        assert!(e("a:0").to_string().starts_with("line 1: "));
    }
}
