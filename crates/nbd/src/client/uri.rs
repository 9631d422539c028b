//! NBD URIs as libnbd writes them (`nbd_connect_uri(3)`), parsed without I/O.
//!
//! - `nbd://HOST[:PORT][/EXPORT]`: TCP, port 10809 by default; `HOST` may be an IPv6 address in
//!   brackets (`nbd://[::1]:10809/disk`);
//! - `nbd+unix:///[EXPORT]?socket=PATH`: a Unix socket; the authority must be empty;
//! - `nbds://…`, `nbds+unix://…`: the same over TLS, which must then be negotiated: the connection
//!   fails rather than go on in plain text.
//!
//! The export name is the path without its leading `/`, percent-decoded, as libnbd takes it
//! (`nbd://host/` and `nbd://host` both name the default export, `""`). The socket path is
//! percent-decoded too.
//!
//! TLS parameters ([`TlsParams`]), libnbd's names: `tls-psk-file=FILE` (psktool's format) with
//! the user name from `USER@` in the authority or `tls-username=NAME` (by default the local user
//! name, as libnbd takes it); or `tls-certificates=DIR` (`ca-cert.pem`, and `client-cert.pem`
//! with `client-key.pem` if the server checks clients); `tls-verify-peer=false` to accept any
//! server certificate; `tls-hostname=NAME`, the name the server's certificate must carry (by
//! default the URI's host; over a Unix socket no name is checked unless given). They are only
//! taken with `nbds`: on a plain `nbd` URI they would promise a protection it does not have, and
//! are refused. Anything else this client would not follow (an unknown query parameter, a
//! fragment, `nbd+vsock`) is refused rather than ignored.
//!
//! Telling a URI from a path: a member string is an NBD URI when it starts with a scheme of the
//! form `nbd`, `nbds`, `nbd+TRANSPORT` or `nbds+TRANSPORT` followed by `://` (see
//! [`looks_like_nbd_uri`]). Any other string is a path; a file whose name really starts that
//! way is reached as `./nbd://…`.

use std::fmt;

use thiserror::Error;

/// The port NBD servers listen on unless told otherwise (IANA's `nbd`).
pub const DEFAULT_PORT: u16 = 10809;

/// Where the server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A host name or address and a port; an IPv6 address is kept without its brackets.
    Tcp { host: String, port: u16 },
    /// A Unix domain socket.
    Unix { socket: String },
}

/// A parsed NBD URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdUri {
    pub endpoint: Endpoint,
    /// The export name sent in `NBD_OPT_GO` (may be empty: the server's default export).
    pub export: String,
    /// `Some` for `nbds://` and `nbds+unix://`: TLS is required, with these settings.
    pub tls: Option<TlsParams>,
}

/// How an `nbds` URI's TLS is set up (see the module documentation for the parameters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsParams {
    /// The PSK user name (`USER@` or `tls-username=`); `None` is the local user name.
    pub username: Option<String>,
    /// `tls-psk-file=`: authenticate with a pre-shared key from this file.
    pub psk_file: Option<String>,
    /// `tls-certificates=`: the folder of `ca-cert.pem` (and the client's certificate and key).
    pub certificates: Option<String>,
    /// `tls-verify-peer=`: whether the server's certificate is checked (default true).
    pub verify_peer: bool,
    /// `tls-hostname=`: the name the server's certificate must carry.
    pub hostname: Option<String>,
}

impl Default for TlsParams {
    fn default() -> Self {
        TlsParams { username: None, psk_file: None, certificates: None, verify_peer: true, hostname: None }
    }
}

/// Why a string is not an NBD URI this client can connect to.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UriError {
    #[error("not an NBD URI (expected nbd://, nbd+unix://, nbds:// or nbds+unix://)")]
    NotNbd,
    #[error("the {scheme}:// transport is not supported (use nbd://, nbd+unix://, nbds:// or nbds+unix://)")]
    UnsupportedTransport { scheme: String },
    #[error("nbd+unix:// needs ?socket=PATH")]
    MissingSocket,
    #[error("nbd+unix:// takes no host (write nbd+unix:///EXPORT?socket=PATH), found {0:?}")]
    UnixWithHost(String),
    #[error("nbd:// needs a host")]
    MissingHost,
    #[error("bad port {0:?} (expected 1 to 65535)")]
    BadPort(String),
    #[error("bad host {0:?}")]
    BadHost(String),
    #[error("{0}= sets up TLS, which nbd:// and nbd+unix:// never use; write nbds:// or nbds+unix:// to require TLS")]
    TlsParameterWithoutTls(String),
    #[error("unknown query parameter {0:?} (understood: socket, tls-psk-file, tls-username, tls-certificates, tls-verify-peer, tls-hostname)")]
    UnknownParameter(String),
    #[error("{0}= given twice")]
    DuplicateParameter(String),
    #[error("{0}= needs a value")]
    EmptyParameter(String),
    #[error("tls-verify-peer={0:?}: expected true or false")]
    BadBoolean(String),
    #[error("tls-psk-file= and tls-certificates= are two ways to authenticate; give one")]
    PskAndCertificates,
    #[error("the PSK user is given twice, as {authority:?}@ and tls-username={query:?}")]
    TwoUsernames { authority: String, query: String },
    #[error("socket= is only for nbd+unix:// URIs")]
    SocketWithTcp,
    #[error("a fragment (#…) has no meaning in an NBD URI")]
    Fragment,
    #[error("bad percent-encoding in {0:?}")]
    BadPercent(String),
    #[error("{what} is not valid UTF-8 once percent-decoded")]
    NotUtf8 { what: &'static str },
    #[error("export name of {0} bytes is longer than the protocol's 4096")]
    ExportNameTooLong(usize),
}

/// Whether `s` is written as an NBD URI: `nbd`, `nbds`, `nbd+X` or `nbds+X` (X lowercase letters),
/// then `://`. Such a string is never taken as a path, even when the URI in it is bad, so a
/// mistyped URI gets the URI's error rather than "no such file".
pub fn looks_like_nbd_uri(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once("://") else { return false };
    let base = scheme.strip_prefix("nbds").or_else(|| scheme.strip_prefix("nbd"));
    match base {
        Some("") => true,
        Some(rest) => {
            rest.strip_prefix('+').is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_lowercase()))
        }
        None => false,
    }
}

impl NbdUri {
    /// Parses `s` (see the module documentation for the forms taken).
    pub fn parse(s: &str) -> Result<NbdUri, UriError> {
        if !looks_like_nbd_uri(s) {
            return Err(UriError::NotNbd);
        }
        let (scheme, rest) = s.split_once("://").ok_or(UriError::NotNbd)?;
        let (unix, tls) = match scheme {
            "nbd" => (false, false),
            "nbd+unix" => (true, false),
            "nbds" => (false, true),
            "nbds+unix" => (true, true),
            other => return Err(UriError::UnsupportedTransport { scheme: other.to_string() }),
        };
        if rest.contains('#') {
            return Err(UriError::Fragment);
        }
        let (before_query, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match before_query.find('/') {
            Some(i) => (&before_query[..i], &before_query[i + 1..]),
            None => (before_query, ""),
        };
        // libnbd takes the TLS (PSK) user name from the authority; without TLS it means
        // nothing, and is dropped.
        let (user, host_port) = match authority.rsplit_once('@') {
            Some((user, hp)) if tls => (Some(percent_decode(user, "user name")?), hp),
            Some((_, hp)) => (None, hp),
            None => (None, authority),
        };
        let export = percent_decode(path, "export name")?;
        if export.len() > crate::proto::MAX_STRING_LEN {
            return Err(UriError::ExportNameTooLong(export.len()));
        }

        let mut socket = None;
        let mut params = TlsParams::default();
        let mut query_user = None;
        let mut seen: Vec<&str> = Vec::new();
        for param in query.into_iter().flat_map(|q| q.split('&')).filter(|p| !p.is_empty()) {
            let (key, value) = param.split_once('=').unwrap_or((param, ""));
            if seen.contains(&key) {
                return Err(UriError::DuplicateParameter(key.to_string()));
            }
            seen.push(key);
            if key.starts_with("tls-") && !tls {
                return Err(UriError::TlsParameterWithoutTls(key.to_string()));
            }
            let value = percent_decode(value, "query parameter")?;
            if value.is_empty() && key != "socket" {
                return Err(UriError::EmptyParameter(key.to_string()));
            }
            match key {
                "socket" => socket = Some(value),
                "tls-psk-file" => params.psk_file = Some(value),
                "tls-certificates" => params.certificates = Some(value),
                "tls-username" => query_user = Some(value),
                "tls-hostname" => params.hostname = Some(value),
                "tls-verify-peer" => params.verify_peer = parse_bool(&value)?,
                k => return Err(UriError::UnknownParameter(k.to_string())),
            }
        }
        if params.psk_file.is_some() && params.certificates.is_some() {
            return Err(UriError::PskAndCertificates);
        }
        params.username = match (user.filter(|u| !u.is_empty()), query_user) {
            (Some(a), Some(q)) if a != q => return Err(UriError::TwoUsernames { authority: a, query: q }),
            (a, q) => q.or(a),
        };

        let endpoint = if unix {
            if !host_port.is_empty() {
                return Err(UriError::UnixWithHost(host_port.to_string()));
            }
            match socket {
                Some(s) if !s.is_empty() => Endpoint::Unix { socket: s },
                _ => return Err(UriError::MissingSocket),
            }
        } else {
            if socket.is_some() {
                return Err(UriError::SocketWithTcp);
            }
            let (host, port) = split_host_port(host_port)?;
            Endpoint::Tcp { host, port }
        };
        Ok(NbdUri { endpoint, export, tls: tls.then_some(params) })
    }
}

/// libnbd's booleans, as the URI specification allows them.
fn parse_bool(value: &str) -> Result<bool, UriError> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(UriError::BadBoolean(value.to_string())),
    }
}

/// `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT`.
fn split_host_port(s: &str) -> Result<(String, u16), UriError> {
    let (host, port) = if let Some(bracketed) = s.strip_prefix('[') {
        let (v6, after) = bracketed.split_once(']').ok_or_else(|| UriError::BadHost(s.to_string()))?;
        if v6.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(UriError::BadHost(s.to_string()));
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| UriError::BadHost(s.to_string()))?),
        };
        (v6.to_string(), port)
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (s.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(UriError::MissingHost);
    }
    if !host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b)) {
        return Err(UriError::BadHost(host));
    }
    let port = match port {
        None | Some("") => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n != 0 && p.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => return Err(UriError::BadPort(p.to_string())),
        },
    };
    Ok((host, port))
}

fn percent_decode(s: &str, what: &'static str) -> Result<String, UriError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(|| UriError::BadPercent(s.to_string()))?;
            let digit = |b: u8| (b as char).to_digit(16);
            match (digit(hex[0]), digit(hex[1])) {
                (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
                _ => return Err(UriError::BadPercent(s.to_string())),
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| UriError::NotUtf8 { what })
}

fn percent_encode(s: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The URI written back in its plain form: what messages and the member's name show. It carries
/// no user name and no TLS parameter (only `nbds` says TLS is used), so it is safe to print and
/// log, and one export keeps one name whatever credentials reach it.
impl fmt::Display for NbdUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let export = percent_encode(&self.export, b"/");
        let s = if self.tls.is_some() { "s" } else { "" };
        match &self.endpoint {
            Endpoint::Tcp { host, port } => {
                let host = if host.contains(':') { format!("[{host}]") } else { host.clone() };
                if *port == DEFAULT_PORT {
                    write!(f, "nbd{s}://{host}/{export}")
                } else {
                    write!(f, "nbd{s}://{host}:{port}/{export}")
                }
            }
            Endpoint::Unix { socket } => {
                write!(f, "nbd{s}+unix:///{export}?socket={}", percent_encode(socket, b"/"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16, export: &str) -> NbdUri {
        NbdUri { endpoint: Endpoint::Tcp { host: host.into(), port }, export: export.into(), tls: None }
    }

    #[test]
    fn libnbd_examples() {
        assert_eq!(NbdUri::parse("nbd://example.com"), Ok(tcp("example.com", 10809, "")));
        assert_eq!(NbdUri::parse("nbd://example.com/"), Ok(tcp("example.com", 10809, "")));
        assert_eq!(NbdUri::parse("nbd://example.com:1234/disk"), Ok(tcp("example.com", 1234, "disk")));
        assert_eq!(NbdUri::parse("nbd://[::1]:2000/a%20b"), Ok(tcp("::1", 2000, "a b")));
        assert_eq!(NbdUri::parse("nbd://[::1]/"), Ok(tcp("::1", 10809, "")));
        assert_eq!(NbdUri::parse("nbd://127.0.0.1/x/y"), Ok(tcp("127.0.0.1", 10809, "x/y")));
        assert_eq!(
            NbdUri::parse("nbd+unix:///foo?socket=/tmp/nbd.sock"),
            Ok(NbdUri { endpoint: Endpoint::Unix { socket: "/tmp/nbd.sock".into() }, export: "foo".into(), tls: None })
        );
        assert_eq!(
            NbdUri::parse("nbd+unix://?socket=/tmp/a%20b.sock"),
            Ok(NbdUri { endpoint: Endpoint::Unix { socket: "/tmp/a b.sock".into() }, export: "".into(), tls: None })
        );
        // A user name (libnbd's TLS user) is dropped.
        assert_eq!(NbdUri::parse("nbd://alice@host/e"), Ok(tcp("host", 10809, "e")));
    }

    #[test]
    fn nbds_takes_libnbds_tls_parameters() {
        let u = NbdUri::parse("nbds://alice@h:99/e?tls-psk-file=/k%20s.psk").unwrap();
        assert_eq!(u.endpoint, Endpoint::Tcp { host: "h".into(), port: 99 });
        let tls = u.tls.unwrap();
        assert_eq!((tls.username.as_deref(), tls.psk_file.as_deref()), (Some("alice"), Some("/k s.psk")));
        assert!(tls.verify_peer && tls.certificates.is_none() && tls.hostname.is_none());

        let u = NbdUri::parse(
            "nbds+unix:///d?socket=/s&tls-certificates=/c&tls-verify-peer=false&tls-hostname=srv.example",
        )
        .unwrap();
        let tls = u.tls.clone().unwrap();
        assert_eq!(tls.certificates.as_deref(), Some("/c"));
        assert_eq!(tls.hostname.as_deref(), Some("srv.example"));
        assert!(!tls.verify_peer);
        assert_eq!(u.to_string(), "nbds+unix:///d?socket=/s", "credentials are not shown");

        let u = NbdUri::parse("nbds://h/?tls-username=bob&tls-psk-file=k").unwrap();
        assert_eq!(u.tls.unwrap().username.as_deref(), Some("bob"));
        assert_eq!(NbdUri::parse("nbds://h").unwrap().tls, Some(TlsParams::default()));
        for v in ["1", "TRUE", "yes", "on"] {
            assert!(NbdUri::parse(&format!("nbds://h/?tls-verify-peer={v}")).unwrap().tls.unwrap().verify_peer);
        }
    }

    #[test]
    fn tls_settings_are_never_silently_dropped() {
        // On a plain URI they would promise what nbd:// does not do.
        assert_eq!(
            NbdUri::parse("nbd://h/?tls-psk-file=k"),
            Err(UriError::TlsParameterWithoutTls("tls-psk-file".into()))
        );
        assert!(NbdUri::parse("nbd+unix:///?socket=/s&tls-certificates=c")
            .unwrap_err()
            .to_string()
            .contains("write nbds://"));
        assert_eq!(NbdUri::parse("nbds://h/?tls-psk-file=k&tls-certificates=c"), Err(UriError::PskAndCertificates));
        assert_eq!(NbdUri::parse("nbds://h/?tls-verify-peer=maybe"), Err(UriError::BadBoolean("maybe".into())));
        assert_eq!(NbdUri::parse("nbds://h/?tls-psk-file="), Err(UriError::EmptyParameter("tls-psk-file".into())));
        assert_eq!(
            NbdUri::parse("nbds://h/?tls-hostname=a&tls-hostname=b"),
            Err(UriError::DuplicateParameter("tls-hostname".into()))
        );
        assert_eq!(NbdUri::parse("nbds://h/?tls-type=psk"), Err(UriError::UnknownParameter("tls-type".into())));
        assert_eq!(
            NbdUri::parse("nbds://a@h/?tls-username=b"),
            Err(UriError::TwoUsernames { authority: "a".into(), query: "b".into() })
        );
    }

    #[test]
    fn malformed_uris_are_refused_with_reasons() {
        assert_eq!(NbdUri::parse("nbd+unix:///x"), Err(UriError::MissingSocket));
        assert_eq!(NbdUri::parse("nbd+unix:///x?socket="), Err(UriError::MissingSocket));
        assert_eq!(NbdUri::parse("nbd+unix://h/x?socket=/s"), Err(UriError::UnixWithHost("h".into())));
        assert_eq!(NbdUri::parse("nbd:///x"), Err(UriError::MissingHost));
        assert_eq!(NbdUri::parse("nbd://h:0/"), Err(UriError::BadPort("0".into())));
        assert_eq!(NbdUri::parse("nbd://h:65536/"), Err(UriError::BadPort("65536".into())));
        assert_eq!(NbdUri::parse("nbd://h:+1/"), Err(UriError::BadPort("+1".into())));
        assert_eq!(NbdUri::parse("nbd://[zz]/"), Err(UriError::BadHost("[zz]".into())));
        assert_eq!(NbdUri::parse("nbd://h/?socket=/s"), Err(UriError::SocketWithTcp));
        assert_eq!(
            NbdUri::parse("nbd+unix:///?socket=/a&socket=/b"),
            Err(UriError::DuplicateParameter("socket".into()))
        );
        assert_eq!(NbdUri::parse("nbd://h/?cache=1"), Err(UriError::UnknownParameter("cache".into())));
        assert_eq!(NbdUri::parse("nbd://h/x#y"), Err(UriError::Fragment));
        assert_eq!(NbdUri::parse("nbd://h/%4"), Err(UriError::BadPercent("%4".into())));
        assert_eq!(NbdUri::parse("nbd://h/%ff"), Err(UriError::NotUtf8 { what: "export name" }));
        assert!(matches!(NbdUri::parse("nbd+vsock:///"), Err(UriError::UnsupportedTransport { .. })));
        assert_eq!(NbdUri::parse("/dev/sda"), Err(UriError::NotNbd));
    }

    #[test]
    fn uri_or_path() {
        for s in ["nbd://h", "nbds://h", "nbd+unix:///", "nbds+unix:///", "nbd+vsock:///", "nbd://"] {
            assert!(looks_like_nbd_uri(s), "{s}");
        }
        for s in
            ["d0.img", "./nbd://h", "/srv/nbd://x", "nbd:/h", "nbdx://h", "nbd+://h", "nbd+UNIX://h", "missing", ""]
        {
            assert!(!looks_like_nbd_uri(s), "{s}");
        }
    }

    #[test]
    fn display_round_trips_without_user() {
        for s in [
            "nbd://h/",
            "nbd://h:99/a%20b",
            "nbd://[::1]:7/x/y",
            "nbd+unix:///e?socket=/run/x%20y.sock",
            "nbds://h/",
            "nbds+unix:///e?socket=/s",
        ] {
            let u = NbdUri::parse(s).unwrap();
            assert_eq!(u.to_string(), s);
            assert_eq!(NbdUri::parse(&u.to_string()), Ok(u));
        }
        assert_eq!(NbdUri::parse("nbd://bob@h").unwrap().to_string(), "nbd://h/");
    }
}
