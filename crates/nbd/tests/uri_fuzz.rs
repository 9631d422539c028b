//! Property tests of the NBD URI parser: any string is parsed or refused without a panic, the
//! URI-or-path rule agrees with the parser, every URI written back parses to itself (less its
//! TLS settings, which are not shown), and TLS parameters come back as they were written.

use proptest::prelude::*;
use uraid_nbd::client::uri::TlsParams;
use uraid_nbd::client::{looks_like_nbd_uri, Endpoint, NbdUri, UriError};

fn arb_text() -> impl Strategy<Value = String> {
    // Printable characters, the URI syntax's own, and a few beyond ASCII.
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select("abcxyz019-._~".chars().collect::<Vec<_>>()),
            2 => prop::sample::select(":/?#[]@&=%+ ".chars().collect::<Vec<_>>()),
            1 => prop::sample::select(vec!['é', '\u{0}', '\u{7f}', '漢']),
        ],
        0..24,
    )
    .prop_map(|c| c.into_iter().collect())
}

fn arb_uri() -> impl Strategy<Value = NbdUri> {
    let tcp = (
        prop_oneof![
            Just("localhost".to_string()),
            Just("127.0.0.1".to_string()),
            Just("::1".to_string()),
            "[a-z][a-z0-9-]{0,10}(\\.[a-z]{1,5}){0,2}"
        ],
        1u16..,
    )
        .prop_map(|(host, port)| Endpoint::Tcp { host, port });
    let unix = arb_text().prop_filter("a socket path", |s| !s.is_empty()).prop_map(|socket| Endpoint::Unix { socket });
    (prop_oneof![tcp, unix], arb_text(), any::<bool>()).prop_map(|(endpoint, export, tls)| NbdUri {
        endpoint,
        export,
        tls: tls.then(TlsParams::default),
    })
}

/// What `Display` keeps of a URI: its TLS settings are not shown, only that TLS is used.
fn as_shown(u: &NbdUri) -> NbdUri {
    NbdUri { tls: u.tls.as_ref().map(|_| TlsParams::default()), ..u.clone() }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn non_empty() -> impl Strategy<Value = String> {
    arb_text().prop_filter("a value", |s| !s.is_empty())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn any_string_is_parsed_or_refused(
        prefix in prop::sample::select(vec!["", "nbd://", "nbd+unix://", "nbds://", "nbds+unix://", "nbd+x://", "nbd:"]),
        rest in arb_text(),
        query in prop::sample::select(vec!["", "?tls-psk-file=k", "?tls-verify-peer=0&tls-hostname=h", "?tls-certificates=%2Fc&socket=/s"]),
    ) {
        let s = format!("{prefix}{rest}{query}");
        match NbdUri::parse(&s) {
            Err(UriError::NotNbd) => prop_assert!(!looks_like_nbd_uri(&s)),
            other => {
                prop_assert!(looks_like_nbd_uri(&s), "{s:?} parsed as {other:?}");
                if let Ok(u) = other {
                    prop_assert!(u.tls.is_some() == s.starts_with("nbds"), "{s:?}: TLS is what the scheme says");
                    prop_assert_eq!(NbdUri::parse(&u.to_string()), Ok(as_shown(&u)));
                }
            }
        }
    }

    #[test]
    fn tls_parameters_come_back_as_written(
        unix in any::<bool>(),
        user in prop::option::of("[a-z][a-z0-9]{0,8}"),
        psk in prop::option::of(non_empty()),
        certificates in prop::option::of(non_empty()),
        hostname in prop::option::of(non_empty()),
        verify in prop::option::of(any::<bool>()),
    ) {
        let mut query = Vec::new();
        if unix {
            query.push("socket=/run/s".to_string());
        }
        for (key, value) in [("tls-psk-file", &psk), ("tls-certificates", &certificates), ("tls-hostname", &hostname)] {
            if let Some(v) = value {
                query.push(format!("{key}={}", encode(v)));
            }
        }
        if let Some(v) = verify {
            query.push(format!("tls-verify-peer={v}"));
        }
        let authority = match (unix, &user) {
            (true, _) => String::new(),
            (false, Some(u)) => format!("{u}@host"),
            (false, None) => "host".into(),
        };
        let scheme = if unix { "nbds+unix" } else { "nbds" };
        let s = format!("{scheme}://{authority}/e?{}", query.join("&"));
        match NbdUri::parse(&s) {
            Ok(u) => {
                let tls = u.tls.unwrap();
                prop_assert!(psk.is_none() || certificates.is_none(), "{s:?} took both ways of authenticating");
                prop_assert_eq!(&tls.psk_file, &psk);
                prop_assert_eq!(&tls.certificates, &certificates);
                prop_assert_eq!(&tls.hostname, &hostname);
                prop_assert_eq!(tls.verify_peer, verify.unwrap_or(true));
                prop_assert_eq!(tls.username, if unix { None } else { user });
            }
            Err(e) => prop_assert!(psk.is_some() && certificates.is_some(), "{s:?}: {e}"),
        }
        // The same settings on a plain URI are refused, never ignored.
        let plain = s.replacen("nbds", "nbd", 1);
        if psk.is_some() || certificates.is_some() || hostname.is_some() || verify.is_some() {
            prop_assert!(NbdUri::parse(&plain).is_err(), "{plain:?}");
        }
    }

    #[test]
    fn written_back_uris_parse_to_themselves(uri in arb_uri()) {
        let shown = uri.to_string();
        prop_assert!(looks_like_nbd_uri(&shown));
        prop_assert_eq!(NbdUri::parse(&shown), Ok(as_shown(&uri)));
    }
}
