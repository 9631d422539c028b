//! Property-based fuzzing of the TLS parsers: the client's reading of the answer to
//! `NBD_OPT_STARTTLS`, and the PSK file parser.
//!
//! What must hold: nothing panics; the client goes on to TLS only on an exact acknowledgement
//! (right option, `NBD_REP_ACK`, no data), so no server answer can make an `nbds` URI run in
//! plain text; a well-formed PSK file gives back exactly its users and keys, and any text is
//! parsed or refused with a line number inside the text.

mod common;

use common::scripted::Scripted;
use proptest::prelude::*;
use proptest::sample::Index;
use uraid_nbd::client::handshake::{start_tls, HandshakeError};
use uraid_nbd::proto::*;
use uraid_nbd::tls::{PskFile, PskFileError};

fn reply(option: u32, reply_type: u32, data: &[u8]) -> Vec<u8> {
    let mut b = OptionReplyHeader { option, reply_type, len: data.len() as u32 }.encode().to_vec();
    b.extend_from_slice(data);
    b
}

/// Whether `bytes` begin with the one answer that lets TLS start.
fn is_exact_ack(bytes: &[u8]) -> bool {
    bytes.len() >= OPTION_REPLY_HEADER_LEN && bytes[..OPTION_REPLY_HEADER_LEN] == reply(OPT_STARTTLS, REP_ACK, &[])[..]
}

fn arb_name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._@-][A-Za-z0-9._@ -]{0,30}"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn starttls_goes_on_only_on_an_exact_ack(
        option in prop_oneof![Just(OPT_STARTTLS), Just(OPT_GO), any::<u32>()],
        reply_type in prop_oneof![Just(REP_ACK), Just(REP_ERR_UNSUP), Just(REP_ERR_POLICY), Just(REP_ERR_TLS_REQD), any::<u32>()],
        data in prop::collection::vec(any::<u8>(), 0..40),
        flips in prop::collection::vec((any::<Index>(), 1u8..), 0..3),
        cut in prop::option::of(any::<Index>()),
    ) {
        let mut bytes = reply(option, reply_type, &data);
        for (at, x) in &flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        if let Some(at) = cut {
            bytes.truncate(at.index(bytes.len() + 1));
        }
        match start_tls(&mut Scripted(&bytes)) {
            Ok(()) => prop_assert!(is_exact_ack(&bytes), "TLS started on {bytes:02x?}"),
            Err(HandshakeError::TlsRefused { reply, .. }) => {
                prop_assert!(!is_exact_ack(&bytes));
                prop_assert!(reply.starts_with("NBD_REP_ERR") || reply.starts_with("reply type"), "{reply}");
            }
            Err(_) => prop_assert!(!is_exact_ack(&bytes) || bytes.len() < OPTION_REPLY_HEADER_LEN),
        }
    }

    #[test]
    fn noise_never_starts_tls(noise in prop::collection::vec(any::<u8>(), 0..64)) {
        if start_tls(&mut Scripted(&noise)).is_ok() {
            prop_assert!(is_exact_ack(&noise));
        }
    }

    #[test]
    fn well_formed_psk_files_give_back_their_keys(
        entries in prop::collection::btree_map(arb_name(), prop::collection::vec(any::<u8>(), 1..64), 1..6),
        upper in any::<bool>(),
        crlf in any::<bool>(),
        blank_lines in 0usize..3,
    ) {
        let newline = if crlf { "\r\n" } else { "\n" };
        let mut text = String::new();
        for (name, key) in &entries {
            let hex: String = key.iter().map(|b| if upper { format!("{b:02X}") } else { format!("{b:02x}") }).collect();
            text.push_str(&format!("{name}:{hex}{newline}"));
            text.push_str(&newline.repeat(blank_lines));
        }
        let file = PskFile::parse(&text).unwrap();
        prop_assert_eq!(file.usernames().count(), entries.len());
        for (name, key) in &entries {
            prop_assert_eq!(file.key(name.as_bytes()), Some(key.as_slice()));
        }
    }

    #[test]
    fn any_text_is_parsed_or_refused_with_its_line(
        lines in prop::collection::vec(
            prop_oneof![
                "[a-z]{1,8}:[0-9a-f]{2,16}",
                "[ -~]{0,20}",
                Just(String::new()),
                Just(":".to_string()),
                "[a-z]{1,4}:[0-9a-fA-FxZ ]{0,9}",
            ],
            0..8,
        ),
    ) {
        let text = lines.join("\n");
        match PskFile::parse(&text) {
            Ok(file) => {
                for username in file.usernames() {
                    let key = file.key(username.as_bytes()).unwrap_or_default();
                    prop_assert!(!username.is_empty() && !key.is_empty());
                    let prefix = format!("{username}:");
                    prop_assert!(text.contains(&prefix), "{} is not in the text", prefix);
                }
            }
            Err(PskFileError::Empty) => prop_assert!(text.trim().is_empty()),
            Err(e) => {
                let message = e.to_string();
                let line: usize = message
                    .strip_prefix("line ")
                    .and_then(|m| m.split(':').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no line number in {message:?}"));
                prop_assert!(line >= 1 && line <= lines.len().max(1), "{message}");
            }
        }
    }
}
