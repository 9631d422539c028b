//! The NBD wire format: constants and the fixed-size messages of the fixed-newstyle handshake and
//! the transmission phase, encoded and decoded both ways (the server uses one direction, the test
//! client the other).
//!
//! Every value here was checked against the protocol description `doc/proto.md` of the
//! NetworkBlockDevice/nbd repository, revision 174ad5513a3f (the one that documents
//! `NBD_OPT_INFO`/`NBD_OPT_GO`, `NBD_CMD_CACHE`, `NBD_FLAG_SEND_FAST_ZERO` and
//! `NBD_REP_ERR_TOO_BIG`). All integers are big-endian on the wire. Extended headers (`NBD_OPT_EXTENDED_HEADERS`) are not implemented, so
//! only the 28-byte request and the 16/20-byte replies exist here.

use thiserror::Error;

// ---- Magic numbers -------------------------------------------------------------------------

/// `NBDMAGIC` (the `INIT_PASSWD`), first thing the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: second word of the server greeting and first word of every client option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// First word of every option reply during fixed-newstyle haggling.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// `NBD_REQUEST_MAGIC`.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// `NBD_SIMPLE_REPLY_MAGIC`.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// `NBD_STRUCTURED_REPLY_MAGIC`.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// ---- Handshake flags (16 bits, server) and client flags (32 bits) ---------------------------

pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;
/// Client flags this server understands; any other bit set means the connection must be dropped.
pub const KNOWN_CLIENT_FLAGS: u32 = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;

// ---- Transmission flags (16 bits) -------------------------------------------------------------

pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_ROTATIONAL: u16 = 1 << 4;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_SEND_DF: u16 = 1 << 7;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;
pub const FLAG_SEND_RESIZE: u16 = 1 << 9;
pub const FLAG_SEND_CACHE: u16 = 1 << 10;
pub const FLAG_SEND_FAST_ZERO: u16 = 1 << 11;

// ---- Options ---------------------------------------------------------------------------------

pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_PEEK_EXPORT: u32 = 4;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;
pub const OPT_EXTENDED_HEADERS: u32 = 11;

// ---- Option reply types ----------------------------------------------------------------------

pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
/// Every error reply type has bit 31 set.
pub const REP_ERR_BIT: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_ERR_BIT + 1;
pub const REP_ERR_POLICY: u32 = REP_ERR_BIT + 2;
pub const REP_ERR_INVALID: u32 = REP_ERR_BIT + 3;
pub const REP_ERR_PLATFORM: u32 = REP_ERR_BIT + 4;
pub const REP_ERR_TLS_REQD: u32 = REP_ERR_BIT + 5;
pub const REP_ERR_UNKNOWN: u32 = REP_ERR_BIT + 6;
pub const REP_ERR_SHUTDOWN: u32 = REP_ERR_BIT + 7;
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_ERR_BIT + 8;
pub const REP_ERR_TOO_BIG: u32 = REP_ERR_BIT + 9;

// ---- NBD_REP_INFO information types ----------------------------------------------------------

pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// ---- Commands and command flags --------------------------------------------------------------

pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_CACHE: u16 = 5;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;
pub const CMD_RESIZE: u16 = 8;

pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

// ---- Structured replies ----------------------------------------------------------------------

pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
/// Every error chunk type has bit 15 set.
pub const REPLY_TYPE_ERR_BIT: u16 = 1 << 15;
pub const REPLY_TYPE_ERROR: u16 = REPLY_TYPE_ERR_BIT + 1;
pub const REPLY_TYPE_ERROR_OFFSET: u16 = REPLY_TYPE_ERR_BIT + 2;

// ---- Sizes -----------------------------------------------------------------------------------

/// NBDMAGIC + IHAVEOPT + 16-bit handshake flags.
pub const GREETING_LEN: usize = 18;
pub const OPTION_HEADER_LEN: usize = 16;
pub const OPTION_REPLY_HEADER_LEN: usize = 20;
pub const REQUEST_HEADER_LEN: usize = 28;
pub const SIMPLE_REPLY_HEADER_LEN: usize = 16;
pub const STRUCTURED_REPLY_HEADER_LEN: usize = 20;
/// The reserved zeroes after the `NBD_OPT_EXPORT_NAME` reply unless `NO_ZEROES` was negotiated.
pub const EXPORT_NAME_ZEROES: usize = 124;
/// Strings (export names, messages) "MUST be no longer than 4096 bytes".
pub const MAX_STRING_LEN: usize = 4096;

/// A message that cannot be decoded. Only magic numbers can be wrong in a fixed-size header; the
/// meaning of the other fields is judged by whoever receives them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtoError {
    #[error("bad {what} magic {found:#x} (expected {expected:#x})")]
    BadMagic { what: &'static str, expected: u64, found: u64 },
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}
fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

/// The server's first message.
pub fn encode_greeting(handshake_flags: u16) -> [u8; GREETING_LEN] {
    let mut b = [0u8; GREETING_LEN];
    b[..8].copy_from_slice(&NBD_MAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[16..].copy_from_slice(&handshake_flags.to_be_bytes());
    b
}

/// Decodes the greeting, returning the handshake flags. Oldstyle servers (second magic
/// `cliserv_magic`) are reported as a bad magic: nothing here speaks oldstyle.
pub fn decode_greeting(b: &[u8; GREETING_LEN]) -> Result<u16, ProtoError> {
    check_magic("server greeting", NBD_MAGIC, be64(&b[..8]))?;
    check_magic("newstyle greeting", IHAVEOPT, be64(&b[8..16]))?;
    Ok(be16(&b[16..]))
}

fn check_magic(what: &'static str, expected: u64, found: u64) -> Result<(), ProtoError> {
    if expected == found {
        Ok(())
    } else {
        Err(ProtoError::BadMagic { what, expected, found })
    }
}

/// A client option header; `len` bytes of option data follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    pub option: u32,
    pub len: u32,
}

impl OptionHeader {
    pub fn encode(&self) -> [u8; OPTION_HEADER_LEN] {
        let mut b = [0u8; OPTION_HEADER_LEN];
        b[..8].copy_from_slice(&IHAVEOPT.to_be_bytes());
        b[8..12].copy_from_slice(&self.option.to_be_bytes());
        b[12..].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; OPTION_HEADER_LEN]) -> Result<Self, ProtoError> {
        check_magic("option", IHAVEOPT, be64(&b[..8]))?;
        Ok(OptionHeader { option: be32(&b[8..]), len: be32(&b[12..]) })
    }
}

/// A server option reply header; `len` bytes of reply data follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionReplyHeader {
    pub option: u32,
    pub reply_type: u32,
    pub len: u32,
}

impl OptionReplyHeader {
    pub fn encode(&self) -> [u8; OPTION_REPLY_HEADER_LEN] {
        let mut b = [0u8; OPTION_REPLY_HEADER_LEN];
        b[..8].copy_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
        b[8..12].copy_from_slice(&self.option.to_be_bytes());
        b[12..16].copy_from_slice(&self.reply_type.to_be_bytes());
        b[16..].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; OPTION_REPLY_HEADER_LEN]) -> Result<Self, ProtoError> {
        check_magic("option reply", OPTION_REPLY_MAGIC, be64(&b[..8]))?;
        Ok(OptionReplyHeader { option: be32(&b[8..]), reply_type: be32(&b[12..]), len: be32(&b[16..]) })
    }

    pub fn is_error(&self) -> bool {
        self.reply_type & REP_ERR_BIT != 0
    }
}

/// The data of `NBD_OPT_INFO` and `NBD_OPT_GO`: an export name and the information types asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: Vec<u8>,
    pub requests: Vec<u16>,
}

/// Why an `NBD_OPT_INFO`/`NBD_OPT_GO` payload is malformed; answered with `NBD_REP_ERR_INVALID`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InfoRequestError {
    #[error("option data of {0} bytes is shorter than the 6-byte minimum")]
    TooShort(usize),
    #[error("export name length {name_len} does not fit in {data_len} bytes of option data")]
    NameTooLong { name_len: u32, data_len: usize },
    #[error("{count} information requests need {needed} bytes but {left} remain")]
    CountMismatch { count: u16, needed: usize, left: usize },
}

impl InfoRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(6 + self.name.len() + 2 * self.requests.len());
        b.extend_from_slice(&(self.name.len() as u32).to_be_bytes());
        b.extend_from_slice(&self.name);
        b.extend_from_slice(&(self.requests.len() as u16).to_be_bytes());
        for r in &self.requests {
            b.extend_from_slice(&r.to_be_bytes());
        }
        b
    }

    /// Parses the option data, which must be exactly name length + name + count + requests: a
    /// length field that disagrees with the option length is malformed, not something to guess at.
    pub fn decode(data: &[u8]) -> Result<Self, InfoRequestError> {
        if data.len() < 6 {
            return Err(InfoRequestError::TooShort(data.len()));
        }
        let name_len = be32(data);
        if name_len as usize > data.len() - 6 {
            return Err(InfoRequestError::NameTooLong { name_len, data_len: data.len() });
        }
        let name_end = 4 + name_len as usize;
        let name = data[4..name_end].to_vec();
        let count = be16(&data[name_end..]);
        let rest = &data[name_end + 2..];
        let needed = 2 * count as usize;
        if rest.len() != needed {
            return Err(InfoRequestError::CountMismatch { count, needed, left: rest.len() });
        }
        let requests = rest.chunks_exact(2).map(be16).collect();
        Ok(InfoRequest { name, requests })
    }
}

/// `NBD_INFO_EXPORT` payload (type included): size and transmission flags.
pub fn info_export(size: u64, transmission_flags: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(12);
    b.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&transmission_flags.to_be_bytes());
    b
}

/// `NBD_INFO_NAME` or `NBD_INFO_DESCRIPTION` payload (type included).
pub fn info_string(info_type: u16, s: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(2 + s.len());
    b.extend_from_slice(&info_type.to_be_bytes());
    b.extend_from_slice(s.as_bytes());
    b
}

/// `NBD_INFO_BLOCK_SIZE` payload (type included).
pub fn info_block_size(minimum: u32, preferred: u32, maximum: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(14);
    b.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    b.extend_from_slice(&minimum.to_be_bytes());
    b.extend_from_slice(&preferred.to_be_bytes());
    b.extend_from_slice(&maximum.to_be_bytes());
    b
}

/// `NBD_REP_SERVER` data: the name's length, the name, then a human-readable description.
pub fn rep_server(name: &str, description: Option<&str>) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + name.len() + description.map_or(0, str::len));
    b.extend_from_slice(&(name.len() as u32).to_be_bytes());
    b.extend_from_slice(name.as_bytes());
    if let Some(d) = description {
        b.extend_from_slice(d.as_bytes());
    }
    b
}

/// The reply the server sends to a successful `NBD_OPT_EXPORT_NAME` (no option reply header).
pub fn export_name_reply(size: u64, transmission_flags: u16, no_zeroes: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(10 + EXPORT_NAME_ZEROES);
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&transmission_flags.to_be_bytes());
    if !no_zeroes {
        b.resize(10 + EXPORT_NAME_ZEROES, 0);
    }
    b
}

/// A transmission-phase request header; a `NBD_CMD_WRITE` is followed by `len` bytes of data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    pub flags: u16,
    pub kind: u16,
    pub handle: u64,
    pub offset: u64,
    pub len: u32,
}

impl RequestHeader {
    pub fn encode(&self) -> [u8; REQUEST_HEADER_LEN] {
        let mut b = [0u8; REQUEST_HEADER_LEN];
        b[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.kind.to_be_bytes());
        b[8..16].copy_from_slice(&self.handle.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; REQUEST_HEADER_LEN]) -> Result<Self, ProtoError> {
        check_magic("request", REQUEST_MAGIC.into(), be32(b).into())?;
        Ok(RequestHeader {
            flags: be16(&b[4..]),
            kind: be16(&b[6..]),
            handle: be64(&b[8..]),
            offset: be64(&b[16..]),
            len: be32(&b[24..]),
        })
    }
}

/// A simple reply header; a successful read reply is followed by the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimpleReplyHeader {
    pub error: u32,
    pub handle: u64,
}

impl SimpleReplyHeader {
    pub fn encode(&self) -> [u8; SIMPLE_REPLY_HEADER_LEN] {
        let mut b = [0u8; SIMPLE_REPLY_HEADER_LEN];
        b[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&self.error.to_be_bytes());
        b[8..].copy_from_slice(&self.handle.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; SIMPLE_REPLY_HEADER_LEN]) -> Result<Self, ProtoError> {
        check_magic("simple reply", SIMPLE_REPLY_MAGIC.into(), be32(b).into())?;
        Ok(SimpleReplyHeader { error: be32(&b[4..]), handle: be64(&b[8..]) })
    }
}

/// A structured reply chunk header; `len` bytes of payload follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    pub flags: u16,
    pub chunk_type: u16,
    pub handle: u64,
    pub len: u32,
}

impl ChunkHeader {
    pub fn encode(&self) -> [u8; STRUCTURED_REPLY_HEADER_LEN] {
        let mut b = [0u8; STRUCTURED_REPLY_HEADER_LEN];
        b[..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.chunk_type.to_be_bytes());
        b[8..16].copy_from_slice(&self.handle.to_be_bytes());
        b[16..].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; STRUCTURED_REPLY_HEADER_LEN]) -> Result<Self, ProtoError> {
        check_magic("structured reply", STRUCTURED_REPLY_MAGIC.into(), be32(b).into())?;
        Ok(ChunkHeader { flags: be16(&b[4..]), chunk_type: be16(&b[6..]), handle: be64(&b[8..]), len: be32(&b[16..]) })
    }
}

/// Makes `msg` a valid protocol string: no NUL characters, at most [`MAX_STRING_LEN`] bytes,
/// cut on a character boundary so it stays UTF-8.
pub fn sanitize_message(msg: &str) -> String {
    let mut out: String = msg.chars().filter(|&c| c != '\0').collect();
    if out.len() > MAX_STRING_LEN {
        let mut cut = MAX_STRING_LEN;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
    }
    out
}

/// The payload of an `NBD_REPLY_TYPE_ERROR` chunk: error, message length, message.
pub fn error_chunk_payload(error: u32, msg: &str) -> Vec<u8> {
    let msg = sanitize_message(msg);
    let mut b = Vec::with_capacity(6 + msg.len());
    b.extend_from_slice(&error.to_be_bytes());
    b.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    b.extend_from_slice(msg.as_bytes());
    b
}

/// Splits an error chunk payload (`NBD_REPLY_TYPE_ERROR` or `_ERROR_OFFSET`) into error and
/// message; `None` when the message length does not fit the payload.
pub fn decode_error_chunk(payload: &[u8]) -> Option<(u32, String)> {
    if payload.len() < 6 {
        return None;
    }
    let error = be32(payload);
    let msg_len = be16(&payload[4..]) as usize;
    let msg = payload.get(6..6 + msg_len)?;
    Some((error, String::from_utf8_lossy(msg).into_owned()))
}

/// Human-readable name of an option, for log lines and error messages.
pub fn option_name(option: u32) -> String {
    match option {
        OPT_EXPORT_NAME => "NBD_OPT_EXPORT_NAME".into(),
        OPT_ABORT => "NBD_OPT_ABORT".into(),
        OPT_LIST => "NBD_OPT_LIST".into(),
        OPT_PEEK_EXPORT => "NBD_OPT_PEEK_EXPORT".into(),
        OPT_STARTTLS => "NBD_OPT_STARTTLS".into(),
        OPT_INFO => "NBD_OPT_INFO".into(),
        OPT_GO => "NBD_OPT_GO".into(),
        OPT_STRUCTURED_REPLY => "NBD_OPT_STRUCTURED_REPLY".into(),
        OPT_LIST_META_CONTEXT => "NBD_OPT_LIST_META_CONTEXT".into(),
        OPT_SET_META_CONTEXT => "NBD_OPT_SET_META_CONTEXT".into(),
        OPT_EXTENDED_HEADERS => "NBD_OPT_EXTENDED_HEADERS".into(),
        other => format!("option {other}"),
    }
}

/// Human-readable name of a command type.
pub fn command_name(kind: u16) -> String {
    match kind {
        CMD_READ => "NBD_CMD_READ".into(),
        CMD_WRITE => "NBD_CMD_WRITE".into(),
        CMD_DISC => "NBD_CMD_DISC".into(),
        CMD_FLUSH => "NBD_CMD_FLUSH".into(),
        CMD_TRIM => "NBD_CMD_TRIM".into(),
        CMD_CACHE => "NBD_CMD_CACHE".into(),
        CMD_WRITE_ZEROES => "NBD_CMD_WRITE_ZEROES".into(),
        CMD_BLOCK_STATUS => "NBD_CMD_BLOCK_STATUS".into(),
        CMD_RESIZE => "NBD_CMD_RESIZE".into(),
        other => format!("command type {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magics_spell_what_the_spec_says() {
        assert_eq!(&NBD_MAGIC.to_be_bytes(), b"NBDMAGIC");
        assert_eq!(&IHAVEOPT.to_be_bytes(), b"IHAVEOPT");
        assert_eq!(OPTION_REPLY_MAGIC, 0x3e889045565a9);
        assert_eq!(REP_ERR_UNSUP, 0x8000_0001);
        assert_eq!(REP_ERR_TOO_BIG, 0x8000_0009);
        assert_eq!(REPLY_TYPE_ERROR, 0x8001);
    }

    #[test]
    fn greeting_round_trip() {
        let g = encode_greeting(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
        assert_eq!(&g[..16], b"NBDMAGICIHAVEOPT");
        assert_eq!(&g[16..], &[0, 3]);
        assert_eq!(decode_greeting(&g), Ok(3));
        let mut bad = g;
        bad[9] ^= 1;
        assert!(matches!(decode_greeting(&bad), Err(ProtoError::BadMagic { what: "newstyle greeting", .. })));
    }

    #[test]
    fn option_header_layout() {
        let h = OptionHeader { option: OPT_GO, len: 0x0102_0304 };
        let b = h.encode();
        assert_eq!(&b[..8], b"IHAVEOPT");
        assert_eq!(&b[8..], &[0, 0, 0, 7, 1, 2, 3, 4]);
        assert_eq!(OptionHeader::decode(&b), Ok(h));
        let mut bad = b;
        bad[0] = b'X';
        assert!(OptionHeader::decode(&bad).is_err());
    }

    #[test]
    fn option_reply_header_layout() {
        let h = OptionReplyHeader { option: OPT_LIST, reply_type: REP_ERR_INVALID, len: 5 };
        let b = h.encode();
        assert_eq!(&b[..8], &[0, 3, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9]);
        assert_eq!(&b[8..], &[0, 0, 0, 3, 0x80, 0, 0, 3, 0, 0, 0, 5]);
        let d = OptionReplyHeader::decode(&b).unwrap();
        assert_eq!(d, h);
        assert!(d.is_error());
        assert!(!OptionReplyHeader { reply_type: REP_ACK, ..h }.is_error());
    }

    #[test]
    fn info_request_round_trip_and_malformed_lengths() {
        let r = InfoRequest { name: b"disk".to_vec(), requests: vec![INFO_NAME, INFO_BLOCK_SIZE] };
        let b = r.encode();
        assert_eq!(b, [0, 0, 0, 4, b'd', b'i', b's', b'k', 0, 2, 0, 1, 0, 3]);
        assert_eq!(InfoRequest::decode(&b), Ok(r));
        // Empty name, no requests: the smallest valid payload.
        assert_eq!(InfoRequest::decode(&[0; 6]), Ok(InfoRequest { name: vec![], requests: vec![] }));
        assert_eq!(InfoRequest::decode(&[0; 5]), Err(InfoRequestError::TooShort(5)));
        // Name length running past the data.
        assert!(matches!(InfoRequest::decode(&[0, 0, 0, 9, 0, 0]), Err(InfoRequestError::NameTooLong { .. })));
        // Request count disagreeing with what is left, both ways.
        assert!(matches!(InfoRequest::decode(&[0, 0, 0, 0, 0, 1]), Err(InfoRequestError::CountMismatch { .. })));
        assert!(matches!(InfoRequest::decode(&[0, 0, 0, 0, 0, 0, 0, 1]), Err(InfoRequestError::CountMismatch { .. })));
    }

    #[test]
    fn info_payload_lengths_match_the_spec() {
        // The spec fixes the reply lengths: 12 for EXPORT, 14 for BLOCK_SIZE, 2 + string otherwise.
        assert_eq!(info_export(1 << 40, 0x0d).len(), 12);
        assert_eq!(info_export(0x0102, 0x0304), [0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]);
        assert_eq!(info_block_size(1, 4096, 1 << 25), [0, 3, 0, 0, 0, 1, 0, 0, 0x10, 0, 2, 0, 0, 0]);
        assert_eq!(info_string(INFO_NAME, "ab"), [0, 1, b'a', b'b']);
        assert_eq!(rep_server("ab", Some("x")), [0, 0, 0, 2, b'a', b'b', b'x']);
    }

    #[test]
    fn export_name_reply_zeroes() {
        assert_eq!(export_name_reply(5, 1, true), [0, 0, 0, 0, 0, 0, 0, 5, 0, 1]);
        let with = export_name_reply(5, 1, false);
        assert_eq!(with.len(), 134);
        assert!(with[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn request_header_round_trip() {
        let r = RequestHeader {
            flags: CMD_FLAG_FUA,
            kind: CMD_WRITE,
            handle: 0x1122_3344_5566_7788,
            offset: 4096,
            len: 512,
        };
        let b = r.encode();
        assert_eq!(&b[..8], &[0x25, 0x60, 0x95, 0x13, 0, 1, 0, 1]);
        assert_eq!(RequestHeader::decode(&b), Ok(r));
        let mut bad = b;
        bad[3] = 0x14;
        assert_eq!(
            RequestHeader::decode(&bad),
            Err(ProtoError::BadMagic { what: "request", expected: 0x2560_9513, found: 0x2560_9514 })
        );
    }

    #[test]
    fn reply_headers_round_trip() {
        let s = SimpleReplyHeader { error: 22, handle: 9 };
        let b = s.encode();
        assert_eq!(&b[..8], &[0x67, 0x44, 0x66, 0x98, 0, 0, 0, 22]);
        assert_eq!(SimpleReplyHeader::decode(&b), Ok(s));
        let c = ChunkHeader { flags: REPLY_FLAG_DONE, chunk_type: REPLY_TYPE_OFFSET_DATA, handle: 3, len: 9 };
        let b = c.encode();
        assert_eq!(&b[..8], &[0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 1]);
        assert_eq!(ChunkHeader::decode(&b), Ok(c));
        assert!(ChunkHeader::decode(
            &SimpleReplyHeader { error: 0, handle: 0 }.encode().repeat(2)[..20].try_into().unwrap()
        )
        .is_err());
    }

    #[test]
    fn error_chunks_carry_sanitized_messages() {
        let p = error_chunk_payload(5, "bad\0 sector");
        assert_eq!(&p[..6], &[0, 0, 0, 5, 0, 10]);
        assert_eq!(decode_error_chunk(&p), Some((5, "bad sector".to_string())));
        let long = "é".repeat(3000); // 6000 bytes, two per character
        let p = error_chunk_payload(22, &long);
        let (_, msg) = decode_error_chunk(&p).unwrap();
        assert_eq!(msg.len(), MAX_STRING_LEN);
        assert!(decode_error_chunk(&[0, 0, 0, 1, 0, 9, b'x']).is_none());
        assert!(decode_error_chunk(&[0, 0, 0, 1]).is_none());
    }
}
