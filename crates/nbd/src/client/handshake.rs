//! The client's side of the fixed-newstyle handshake: the greeting and the client flags
//! ([`greet`]); for TLS, `NBD_OPT_STARTTLS` as the very first option ([`start_tls`]), after which
//! the caller runs the TLS handshake on the same socket; then ([`negotiate`]) structured replies
//! asked for, and `NBD_OPT_GO` with an `NBD_INFO_BLOCK_SIZE` request (so the server may state its
//! size constraints, which the client then honours), falling back to `NBD_OPT_EXPORT_NAME` for a
//! server that does not know `NBD_OPT_GO`. [`handshake`] is the whole of it without TLS.

use std::io::{self, Read, Write};

use thiserror::Error;

use crate::proto::*;

/// Largest option reply payload read. The longest this client asks for is an `NBD_REP_INFO`
/// (at most a 4096-byte string and its type) or an error message; anything much longer is a
/// server not to be trusted with memory.
const MAX_OPTION_REPLY: u32 = 64 << 10;

/// The largest request payload this client sends, whatever the server allows: the size the
/// specification says no server may take as an attack.
pub const MAX_PAYLOAD_CAP: u32 = 1 << 25;

/// What the server said about the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportInfo {
    pub size: u64,
    /// `NBD_FLAG_*` transmission flags.
    pub flags: u16,
    /// Requests' offsets and lengths are multiples of this (1 when the server states nothing).
    pub min_block: u32,
    /// The size below which the server works less well (4096 when it states nothing).
    pub preferred_block: u32,
    /// The largest read or write payload sent: the server's maximum, capped at
    /// [`MAX_PAYLOAD_CAP`] and rounded down to a multiple of `min_block`.
    pub max_payload: u32,
    /// Whether structured replies were negotiated.
    pub structured: bool,
}

impl ExportInfo {
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
    pub fn read_only(&self) -> bool {
        self.has(FLAG_READ_ONLY)
    }
}

/// Why the handshake did not reach the transmission phase.
#[derive(Debug, Error)]
pub enum HandshakeError {
    #[error("connection lost during the handshake: {0}")]
    Io(#[from] io::Error),
    #[error("not an NBD server: {0}")]
    NotNbd(ProtoError),
    #[error("the server does not speak the fixed newstyle handshake")]
    NotFixedNewstyle,
    #[error("the server has no export named {name:?}{}", suffix(.message))]
    UnknownExport { name: String, message: String },
    #[error("the server requires TLS{}; connect with nbds:// (or nbds+unix://) and tls-psk-file= or tls-certificates=", suffix(.message))]
    TlsRequired { message: String },
    /// `NBD_OPT_STARTTLS` was refused: an `nbds` URI never goes on in plain text.
    #[error("the server does not offer TLS ({reply}{}); an nbds URI is never served in plain text", suffix(.message))]
    TlsRefused { reply: String, message: String },
    #[error("the server refused {option} ({reply}){}", suffix(.message))]
    Refused { option: String, reply: String, message: String },
    #[error("the server closed the connection after NBD_OPT_EXPORT_NAME (it has no export {name:?}, or refuses it)")]
    ExportNameRejected { name: String },
    #[error("bad option reply: {0}")]
    BadReply(String),
}

fn suffix(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

fn reply_name(reply_type: u32) -> String {
    match reply_type {
        REP_ERR_UNSUP => "NBD_REP_ERR_UNSUP".into(),
        REP_ERR_POLICY => "NBD_REP_ERR_POLICY".into(),
        REP_ERR_INVALID => "NBD_REP_ERR_INVALID".into(),
        REP_ERR_PLATFORM => "NBD_REP_ERR_PLATFORM".into(),
        REP_ERR_TLS_REQD => "NBD_REP_ERR_TLS_REQD".into(),
        REP_ERR_UNKNOWN => "NBD_REP_ERR_UNKNOWN".into(),
        REP_ERR_SHUTDOWN => "NBD_REP_ERR_SHUTDOWN".into(),
        REP_ERR_BLOCK_SIZE_REQD => "NBD_REP_ERR_BLOCK_SIZE_REQD".into(),
        REP_ERR_TOO_BIG => "NBD_REP_ERR_TOO_BIG".into(),
        other => format!("reply type {other:#x}"),
    }
}

/// What the server's greeting settled that later steps need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Greeting {
    /// Both sides agreed to leave out the 124 zero bytes after `NBD_OPT_EXPORT_NAME`'s reply.
    pub no_zeroes: bool,
}

/// Runs the whole handshake for `export` over `s` (a fresh connection), without TLS, and returns
/// what was agreed.
pub fn handshake<S: Read + Write>(s: &mut S, export: &str) -> Result<ExportInfo, HandshakeError> {
    let greeting = greet(s)?;
    negotiate(s, export, greeting)
}

/// Reads the server's greeting and answers with the client flags.
pub fn greet<S: Read + Write>(s: &mut S) -> Result<Greeting, HandshakeError> {
    let mut greeting = [0u8; GREETING_LEN];
    s.read_exact(&mut greeting)?;
    let server_flags = decode_greeting(&greeting).map_err(HandshakeError::NotNbd)?;
    if server_flags & FLAG_FIXED_NEWSTYLE == 0 {
        return Err(HandshakeError::NotFixedNewstyle);
    }
    let no_zeroes = server_flags & FLAG_NO_ZEROES != 0;
    let client_flags = FLAG_C_FIXED_NEWSTYLE | if no_zeroes { FLAG_C_NO_ZEROES } else { 0 };
    s.write_all(&client_flags.to_be_bytes())?;
    Ok(Greeting { no_zeroes })
}

/// Sends `NBD_OPT_STARTTLS` and reads its answer. `Ok` means the server acknowledged it and the
/// TLS handshake starts now, on the same socket; any refusal is an error (the protocol lets a
/// client go on in plain text, but an `nbds` URI must not).
pub fn start_tls<S: Read + Write>(s: &mut S) -> Result<(), HandshakeError> {
    send_option(s, OPT_STARTTLS, &[])?;
    let (header, data) = read_option_reply(s, OPT_STARTTLS)?;
    let message = String::from_utf8_lossy(&data).into_owned();
    match header.reply_type {
        REP_ACK if data.is_empty() => Ok(()),
        REP_ACK => Err(HandshakeError::BadReply(format!(
            "NBD_OPT_STARTTLS acknowledged with {} bytes of data (it has none)",
            data.len()
        ))),
        t if t & REP_ERR_BIT != 0 => Err(HandshakeError::TlsRefused { reply: reply_name(t), message }),
        other => Err(HandshakeError::BadReply(format!("unexpected reply type {other:#x} to NBD_OPT_STARTTLS"))),
    }
}

/// The option haggling after the greeting (and after TLS, when used): structured replies, then
/// `NBD_OPT_GO` (or `NBD_OPT_EXPORT_NAME`) for `export`.
pub fn negotiate<S: Read + Write>(s: &mut S, export: &str, greeting: Greeting) -> Result<ExportInfo, HandshakeError> {
    let no_zeroes = greeting.no_zeroes;
    send_option(s, OPT_STRUCTURED_REPLY, &[])?;
    let (header, data) = read_option_reply(s, OPT_STRUCTURED_REPLY)?;
    if header.reply_type == REP_ERR_TLS_REQD {
        // No option will succeed without TLS: saying so now beats a refused NBD_OPT_GO.
        return Err(HandshakeError::TlsRequired { message: String::from_utf8_lossy(&data).into_owned() });
    }
    // Any other refusal just means simple replies; only an ACK turns structured replies on.
    let structured = header.reply_type == REP_ACK;

    let go = InfoRequest { name: export.as_bytes().to_vec(), requests: vec![INFO_BLOCK_SIZE] };
    send_option(s, OPT_GO, &go.encode())?;
    let mut export_info: Option<(u64, u16)> = None;
    let mut block_size: Option<(u32, u32, u32)> = None;
    loop {
        let (header, data) = read_option_reply(s, OPT_GO)?;
        match header.reply_type {
            REP_INFO => match parse_info(&data)? {
                Info::Export { size, flags } => export_info = Some((size, flags)),
                Info::BlockSize { min, preferred, max } => block_size = Some((min, preferred, max)),
                Info::Other => {}
            },
            REP_ACK => break,
            REP_ERR_UNSUP => return export_name_fallback(s, export, no_zeroes, structured),
            t if t & REP_ERR_BIT != 0 => {
                let message = String::from_utf8_lossy(&data).into_owned();
                return Err(match t {
                    REP_ERR_UNKNOWN => HandshakeError::UnknownExport { name: export.to_string(), message },
                    REP_ERR_TLS_REQD => HandshakeError::TlsRequired { message },
                    _ => HandshakeError::Refused { option: option_name(OPT_GO), reply: reply_name(t), message },
                });
            }
            other => return Err(HandshakeError::BadReply(format!("unexpected reply type {other:#x} to NBD_OPT_GO"))),
        }
    }
    let (size, flags) = export_info
        .ok_or_else(|| HandshakeError::BadReply("NBD_OPT_GO acknowledged without NBD_INFO_EXPORT".into()))?;
    let (min, preferred, max) = block_size.unwrap_or((1, 4096, MAX_PAYLOAD_CAP));
    Ok(ExportInfo {
        size,
        flags,
        min_block: min,
        preferred_block: preferred,
        max_payload: max.min(MAX_PAYLOAD_CAP) / min * min,
        structured,
    })
}

/// `NBD_OPT_EXPORT_NAME`, for servers without `NBD_OPT_GO`: no block size constraints can be
/// learnt, so the specification's safe choice of 512-byte blocks is used.
fn export_name_fallback<S: Read + Write>(
    s: &mut S,
    export: &str,
    no_zeroes: bool,
    structured: bool,
) -> Result<ExportInfo, HandshakeError> {
    send_option(s, OPT_EXPORT_NAME, export.as_bytes())?;
    let mut b = [0u8; 10 + EXPORT_NAME_ZEROES];
    let want = if no_zeroes { 10 } else { b.len() };
    s.read_exact(&mut b[..want]).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => HandshakeError::ExportNameRejected { name: export.to_string() },
        _ => HandshakeError::Io(e),
    })?;
    let size = u64::from_be_bytes(b[..8].try_into().expect("eight bytes"));
    let flags = u16::from_be_bytes([b[8], b[9]]);
    Ok(ExportInfo { size, flags, min_block: 512, preferred_block: 4096, max_payload: MAX_PAYLOAD_CAP, structured })
}

fn send_option<W: Write>(w: &mut W, option: u32, data: &[u8]) -> io::Result<()> {
    let mut b = OptionHeader { option, len: data.len() as u32 }.encode().to_vec();
    b.extend_from_slice(data);
    w.write_all(&b)?;
    w.flush()
}

/// Reads one option reply to `option` and its payload (bounded by [`MAX_OPTION_REPLY`]).
fn read_option_reply<R: Read>(r: &mut R, option: u32) -> Result<(OptionReplyHeader, Vec<u8>), HandshakeError> {
    let mut b = [0u8; OPTION_REPLY_HEADER_LEN];
    r.read_exact(&mut b)?;
    let header = OptionReplyHeader::decode(&b).map_err(|e| HandshakeError::BadReply(e.to_string()))?;
    if header.option != option {
        return Err(HandshakeError::BadReply(format!(
            "reply to {} while waiting for one to {}",
            option_name(header.option),
            option_name(option)
        )));
    }
    if header.len > MAX_OPTION_REPLY {
        return Err(HandshakeError::BadReply(format!("option reply of {} bytes", header.len)));
    }
    let mut data = vec![0u8; header.len as usize];
    r.read_exact(&mut data)?;
    Ok((header, data))
}

#[derive(Debug, PartialEq, Eq)]
enum Info {
    Export { size: u64, flags: u16 },
    BlockSize { min: u32, preferred: u32, max: u32 },
    Other,
}

/// An `NBD_REP_INFO` payload, its constraints checked as the specification states them.
fn parse_info(data: &[u8]) -> Result<Info, HandshakeError> {
    let bad = |what: &str| HandshakeError::BadReply(format!("{what} ({} bytes: {data:02x?})", data.len()));
    if data.len() < 2 {
        return Err(bad("NBD_REP_INFO too short"));
    }
    let u32_at = |i: usize| u32::from_be_bytes(data[i..i + 4].try_into().expect("four bytes"));
    match u16::from_be_bytes([data[0], data[1]]) {
        INFO_EXPORT if data.len() == 12 => Ok(Info::Export {
            size: u64::from_be_bytes(data[2..10].try_into().expect("eight bytes")),
            flags: u16::from_be_bytes([data[10], data[11]]),
        }),
        INFO_EXPORT => Err(bad("NBD_INFO_EXPORT of the wrong length")),
        INFO_BLOCK_SIZE if data.len() == 14 => {
            let (min, preferred, max) = (u32_at(2), u32_at(6), u32_at(10));
            let valid = min.is_power_of_two()
                && min <= 1 << 16
                && preferred.is_power_of_two()
                && preferred >= min.max(512)
                && max >= preferred;
            if !valid {
                return Err(HandshakeError::BadReply(format!(
                    "impossible block size constraints: minimum {min}, preferred {preferred}, maximum {max}"
                )));
            }
            Ok(Info::BlockSize { min, preferred, max })
        }
        INFO_BLOCK_SIZE => Err(bad("NBD_INFO_BLOCK_SIZE of the wrong length")),
        _ => Ok(Info::Other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's bytes to read, and what the client writes kept.
    struct Scripted<'a> {
        server: &'a [u8],
        client: Vec<u8>,
    }

    impl Read for Scripted<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.server.read(buf)
        }
    }

    impl Write for Scripted<'_> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.client.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn reply(option: u32, reply_type: u32, data: &[u8]) -> Vec<u8> {
        let mut b = OptionReplyHeader { option, reply_type, len: data.len() as u32 }.encode().to_vec();
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn go_with_block_sizes_and_structured_replies() {
        let mut server = encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_vec();
        server.extend(reply(OPT_STRUCTURED_REPLY, REP_ACK, &[]));
        server.extend(reply(OPT_GO, REP_INFO, &info_string(INFO_NAME, "disk")));
        server.extend(reply(OPT_GO, REP_INFO, &info_block_size(512, 4096, 1 << 26)));
        server.extend(reply(OPT_GO, REP_INFO, &info_export(1 << 30, FLAG_HAS_FLAGS | FLAG_SEND_FLUSH)));
        server.extend(reply(OPT_GO, REP_ACK, &[]));
        let mut s = Scripted { server: &server, client: Vec::new() };
        let info = handshake(&mut s, "disk").unwrap();
        assert_eq!(
            info,
            ExportInfo {
                size: 1 << 30,
                flags: FLAG_HAS_FLAGS | FLAG_SEND_FLUSH,
                min_block: 512,
                preferred_block: 4096,
                max_payload: MAX_PAYLOAD_CAP,
                structured: true,
            }
        );
        // Client flags, then NBD_OPT_STRUCTURED_REPLY, then NBD_OPT_GO asking for block sizes.
        let mut want = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes().to_vec();
        want.extend(OptionHeader { option: OPT_STRUCTURED_REPLY, len: 0 }.encode());
        let go = InfoRequest { name: b"disk".to_vec(), requests: vec![INFO_BLOCK_SIZE] }.encode();
        want.extend(OptionHeader { option: OPT_GO, len: go.len() as u32 }.encode());
        want.extend(go);
        assert_eq!(s.client, want);
    }

    #[test]
    fn a_server_without_go_gets_export_name() {
        let mut server = encode_greeting(FLAG_FIXED_NEWSTYLE).to_vec();
        server.extend(reply(OPT_STRUCTURED_REPLY, REP_ERR_UNSUP, &[]));
        server.extend(reply(OPT_GO, REP_ERR_UNSUP, b"what is GO?"));
        server.extend(export_name_reply(1 << 20, FLAG_HAS_FLAGS | FLAG_READ_ONLY, false));
        let mut s = Scripted { server: &server, client: Vec::new() };
        let info = handshake(&mut s, "old").unwrap();
        assert_eq!((info.size, info.read_only(), info.structured, info.min_block), (1 << 20, true, false, 512));
        assert!(s.client.ends_with(&[&OptionHeader { option: OPT_EXPORT_NAME, len: 3 }.encode()[..], b"old"].concat()));
        // A server that closes instead of answering NBD_OPT_EXPORT_NAME has no such export.
        let cut = &server[..server.len() - 134];
        let e = handshake(&mut Scripted { server: cut, client: Vec::new() }, "old").unwrap_err();
        assert!(matches!(e, HandshakeError::ExportNameRejected { .. }), "{e}");
    }

    #[test]
    fn refusals_are_told_apart() {
        let refused = |reply_type: u32, message: &[u8]| {
            let mut server = encode_greeting(FLAG_FIXED_NEWSTYLE).to_vec();
            server.extend(reply(OPT_STRUCTURED_REPLY, REP_ACK, &[]));
            server.extend(reply(OPT_GO, reply_type, message));
            handshake(&mut Scripted { server: &server, client: Vec::new() }, "x").unwrap_err()
        };
        assert!(matches!(refused(REP_ERR_UNKNOWN, b""), HandshakeError::UnknownExport { .. }));
        let tls = refused(REP_ERR_TLS_REQD, b"TLS please").to_string();
        assert!(tls.contains("requires TLS") && tls.contains("TLS please") && tls.contains("nbds://"), "{tls}");
        // Told at the first option, the client stops there.
        let mut server = encode_greeting(FLAG_FIXED_NEWSTYLE).to_vec();
        server.extend(reply(OPT_STRUCTURED_REPLY, REP_ERR_TLS_REQD, b"use TLS"));
        let mut s = Scripted { server: &server, client: Vec::new() };
        assert!(matches!(handshake(&mut s, "x"), Err(HandshakeError::TlsRequired { .. })));
        assert!(!s.client.windows(4).any(|w| w == OPT_GO.to_be_bytes()), "NBD_OPT_GO was not sent");
        let policy = refused(REP_ERR_POLICY, b"not you").to_string();
        assert_eq!(policy, "the server refused NBD_OPT_GO (NBD_REP_ERR_POLICY): not you");
        let mut old = encode_greeting(0).to_vec();
        old.extend([0; 4]);
        assert!(matches!(
            handshake(&mut Scripted { server: &old, client: Vec::new() }, "x"),
            Err(HandshakeError::NotFixedNewstyle)
        ));
    }

    #[test]
    fn starttls_is_the_first_option_and_only_an_ack_goes_on() {
        let starttls = |server: &[u8]| {
            let mut s = Scripted { server, client: Vec::new() };
            let greeting = greet(&mut s).unwrap();
            let r = start_tls(&mut s);
            (greeting, r, s.client)
        };
        let mut server = encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_vec();
        server.extend(reply(OPT_STARTTLS, REP_ACK, &[]));
        let (greeting, r, client) = starttls(&server);
        assert!(r.is_ok() && greeting.no_zeroes);
        let mut want = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes().to_vec();
        want.extend(OptionHeader { option: OPT_STARTTLS, len: 0 }.encode());
        assert_eq!(client, want);

        let mut server = encode_greeting(FLAG_FIXED_NEWSTYLE).to_vec();
        server.extend(reply(OPT_STARTTLS, REP_ERR_UNSUP, b"no TLS here"));
        let e = starttls(&server).1.unwrap_err();
        assert!(matches!(e, HandshakeError::TlsRefused { .. }), "{e}");
        assert!(e.to_string().contains("NBD_REP_ERR_UNSUP: no TLS here") && e.to_string().contains("never"), "{e}");

        let mut server = encode_greeting(FLAG_FIXED_NEWSTYLE).to_vec();
        server.extend(reply(OPT_STARTTLS, REP_ACK, b"x"));
        assert!(matches!(starttls(&server).1, Err(HandshakeError::BadReply(_))));
        let mut server = encode_greeting(FLAG_FIXED_NEWSTYLE).to_vec();
        server.extend(reply(OPT_GO, REP_ACK, &[]));
        assert!(matches!(starttls(&server).1, Err(HandshakeError::BadReply(_))), "a reply to another option");
    }

    #[test]
    fn info_payloads() {
        assert_eq!(parse_info(&info_export(1 << 30, 0x1ed)).unwrap(), Info::Export { size: 1 << 30, flags: 0x1ed });
        assert_eq!(
            parse_info(&info_block_size(512, 4096, 1 << 20)).unwrap(),
            Info::BlockSize { min: 512, preferred: 4096, max: 1 << 20 }
        );
        assert_eq!(parse_info(&info_string(INFO_NAME, "x")).unwrap(), Info::Other);
        assert!(parse_info(&info_block_size(3, 4096, 1 << 20)).is_err());
        assert!(parse_info(&info_block_size(512, 256, 1 << 20)).is_err());
        assert!(parse_info(&info_block_size(4096, 4096, 100)).is_err());
        assert!(parse_info(&[0, 0, 1]).is_err());
        assert!(parse_info(&[0]).is_err());
    }
}
