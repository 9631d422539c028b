//! Property tests of the NBD URI parser: any string is parsed or refused without a panic, the
//! URI-or-path rule agrees with the parser, and every URI written back parses to itself.

use proptest::prelude::*;
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
    (prop_oneof![tcp, unix], arb_text()).prop_map(|(endpoint, export)| NbdUri { endpoint, export })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn any_string_is_parsed_or_refused(prefix in prop::sample::select(vec!["", "nbd://", "nbd+unix://", "nbds://", "nbd+x://", "nbd:"]), rest in arb_text()) {
        let s = format!("{prefix}{rest}");
        match NbdUri::parse(&s) {
            Err(UriError::NotNbd) => prop_assert!(!looks_like_nbd_uri(&s)),
            other => {
                prop_assert!(looks_like_nbd_uri(&s), "{s:?} parsed as {other:?}");
                if let Ok(u) = other {
                    prop_assert_eq!(NbdUri::parse(&u.to_string()), Ok(u));
                }
            }
        }
    }

    #[test]
    fn written_back_uris_parse_to_themselves(uri in arb_uri()) {
        let shown = uri.to_string();
        prop_assert!(looks_like_nbd_uri(&shown));
        prop_assert_eq!(NbdUri::parse(&shown), Ok(uri));
    }
}
