//! Reading the server's transmission-phase replies: simple replies and structured reply chunks,
//! checked against the request they answer and put together into that request's outcome.
//!
//! Nothing is allocated from a length the server sends: a read's data lands in the buffer its
//! request allocated before it was sent, and the only other payloads read into memory (error
//! messages) are bounded by the protocol's 4096-byte string limit. Every header field that could
//! point outside the request (a chunk's offset and length, a hole's size) is checked before it
//! is used, so a hostile or broken server costs the connection, never a panic or a wrong read.

use std::io::{self, Read};

use thiserror::Error;

use crate::proto::*;

/// Most separate ranges a structured read reply may leave while it is being filled. Servers send
/// a read's chunks in order (they merge into one range); only a server scattering tiny chunks
/// would reach this, and it is cut off rather than allowed to grow the list.
pub const MAX_READ_FRAGMENTS: usize = 1024;

/// Largest error chunk payload: error, message length, a message of at most 4096 bytes, and the
/// offset of `NBD_REPLY_TYPE_ERROR_OFFSET`.
const MAX_ERROR_PAYLOAD: u32 = 4 + 2 + MAX_STRING_LEN as u32 + 8;

/// A reply that breaks the protocol. The connection cannot be trusted past it (the stream may be
/// out of step), so it ends.
#[derive(Debug, Error)]
pub enum ReplyError {
    #[error("connection lost: {0}")]
    Io(#[from] io::Error),
    #[error("bad reply magic {0:#010x}")]
    BadMagic(u32),
    #[error("reply for handle {0:#x}, which no request in flight has")]
    UnknownHandle(u64),
    #[error("structured reply chunk, but structured replies were not negotiated")]
    StructuredNotNegotiated,
    #[error("reply chunk type {chunk_type} to {command}, which it cannot answer")]
    UnexpectedChunk { chunk_type: u16, command: String },
    #[error("reply chunk of type {chunk_type} with a bad length {len}")]
    BadChunkLength { chunk_type: u16, len: u32 },
    #[error("read reply data {offset}+{len} outside the request {req_offset}+{req_len}")]
    OutsideRequest { offset: u64, len: u64, req_offset: u64, req_len: u32 },
    #[error("read reply chunks overlap at byte {0}")]
    Overlap(u64),
    #[error("read reply split into more than {MAX_READ_FRAGMENTS} separate pieces")]
    TooFragmented,
    #[error("read reply finished without covering the request ({covered} of {len} bytes)")]
    Incomplete { covered: u64, len: u32 },
    #[error("NBD_REPLY_TYPE_NONE without NBD_REPLY_FLAG_DONE")]
    NoneNotDone,
    #[error("error chunk with error value 0")]
    ZeroErrorChunk,
}

/// An error the server reported for one request; the connection is fine.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("server error {}{}", errno_name(*.errno), if .message.is_empty() { String::new() } else { format!(": {}", .message) })]
pub struct ServerError {
    /// The NBD error value (the Linux errno of the same meaning).
    pub errno: u32,
    pub message: String,
}

impl ServerError {
    /// The error as an `io::Error` of the kind its errno names; a value the protocol does not
    /// define is taken as `EINVAL`, as the specification asks of clients.
    pub fn to_io(&self) -> io::Error {
        let kind = match self.errno {
            1 => io::ErrorKind::PermissionDenied,
            12 => io::ErrorKind::OutOfMemory,
            28 => io::ErrorKind::StorageFull,
            95 => io::ErrorKind::Unsupported,
            5 | 75 | 108 => io::ErrorKind::Other,
            _ => io::ErrorKind::InvalidInput,
        };
        io::Error::new(kind, self.to_string())
    }
}

fn errno_name(errno: u32) -> String {
    let name = match errno {
        1 => "EPERM",
        5 => "EIO",
        12 => "ENOMEM",
        22 => "EINVAL",
        28 => "ENOSPC",
        75 => "EOVERFLOW",
        95 => "ENOTSUP",
        108 => "ESHUTDOWN",
        _ => return format!("{errno}"),
    };
    name.to_string()
}

/// One reply header, as read off the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyHeader {
    Simple(SimpleReplyHeader),
    Chunk(ChunkHeader),
}

impl ReplyHeader {
    pub fn handle(&self) -> u64 {
        match self {
            ReplyHeader::Simple(h) => h.handle,
            ReplyHeader::Chunk(h) => h.handle,
        }
    }
}

/// Reads the next reply header: a simple reply or, when `structured` was negotiated, a chunk.
pub fn read_header<R: Read>(r: &mut R, structured: bool) -> Result<ReplyHeader, ReplyError> {
    let mut b = [0u8; STRUCTURED_REPLY_HEADER_LEN];
    r.read_exact(&mut b[..4])?;
    let magic = u32::from_be_bytes(b[..4].try_into().expect("four bytes"));
    match magic {
        SIMPLE_REPLY_MAGIC => {
            r.read_exact(&mut b[4..SIMPLE_REPLY_HEADER_LEN])?;
            let h = SimpleReplyHeader::decode(b[..SIMPLE_REPLY_HEADER_LEN].try_into().expect("16 bytes"))
                .map_err(|_| ReplyError::BadMagic(magic))?;
            Ok(ReplyHeader::Simple(h))
        }
        STRUCTURED_REPLY_MAGIC if structured => {
            r.read_exact(&mut b[4..])?;
            Ok(ReplyHeader::Chunk(ChunkHeader::decode(&b).map_err(|_| ReplyError::BadMagic(magic))?))
        }
        STRUCTURED_REPLY_MAGIC => Err(ReplyError::StructuredNotNegotiated),
        other => Err(ReplyError::BadMagic(other)),
    }
}

/// A request in flight, as far as its reply is concerned.
#[derive(Debug)]
pub struct InFlight {
    /// `NBD_CMD_*`.
    pub kind: u16,
    pub offset: u64,
    pub len: u32,
    /// A read's destination, `len` bytes allocated before the request was sent (holes stay
    /// zero); empty for every other command.
    pub data: Vec<u8>,
    /// The byte ranges of `data` a structured reply has filled, relative to `offset`, sorted and
    /// merged.
    covered: Vec<(u64, u64)>,
    /// The first error the server reported for it.
    error: Option<ServerError>,
}

/// How a request ended, once its last reply arrived.
pub type Outcome = Result<Vec<u8>, ServerError>;

impl InFlight {
    pub fn new(kind: u16, offset: u64, len: u32) -> InFlight {
        let data = if kind == CMD_READ { vec![0u8; len as usize] } else { Vec::new() };
        InFlight { kind, offset, len, data, covered: Vec::new(), error: None }
    }

    /// What the request ended with (call once its reply is complete): a read's data, an empty
    /// vector for other commands, or the server's error.
    pub fn outcome(self) -> Outcome {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.data),
        }
    }

    fn covered_bytes(&self) -> u64 {
        self.covered.iter().map(|(s, e)| e - s).sum()
    }

    /// Records `[start, end)` (relative) as filled; chunks of one reply must not overlap.
    fn cover(&mut self, start: u64, end: u64) -> Result<(), ReplyError> {
        if start == end {
            return Ok(());
        }
        let i = self.covered.partition_point(|&(_, e)| e <= start);
        if let Some(&(s, _)) = self.covered.get(i) {
            if s < end {
                return Err(ReplyError::Overlap(self.offset + s.max(start)));
            }
        }
        let joins_prev = i > 0 && self.covered[i - 1].1 == start;
        let joins_next = self.covered.get(i).is_some_and(|&(s, _)| s == end);
        match (joins_prev, joins_next) {
            (true, true) => {
                self.covered[i - 1].1 = self.covered[i].1;
                self.covered.remove(i);
            }
            (true, false) => self.covered[i - 1].1 = end,
            (false, true) => self.covered[i].0 = start,
            (false, false) => {
                if self.covered.len() >= MAX_READ_FRAGMENTS {
                    return Err(ReplyError::TooFragmented);
                }
                self.covered.insert(i, (start, end));
            }
        }
        Ok(())
    }

    /// The relative range `[start, end)` of a chunk at `offset` of `len` bytes, if it lies inside
    /// the request.
    fn place(&self, offset: u64, len: u64) -> Result<(u64, u64), ReplyError> {
        let outside = || ReplyError::OutsideRequest { offset, len, req_offset: self.offset, req_len: self.len };
        let start = offset.checked_sub(self.offset).ok_or_else(outside)?;
        let end = start.checked_add(len).ok_or_else(outside)?;
        if end > u64::from(self.len) {
            return Err(outside());
        }
        Ok((start, end))
    }

    fn note_error(&mut self, e: ServerError) {
        self.error.get_or_insert(e);
    }
}

/// Reads the payload that follows `header` into `req` (the request with `header`'s handle).
/// Returns whether the request's reply is complete.
pub fn read_body<R: Read>(r: &mut R, header: &ReplyHeader, req: &mut InFlight) -> Result<bool, ReplyError> {
    match header {
        ReplyHeader::Simple(h) => {
            if h.error != 0 {
                req.note_error(ServerError { errno: h.error, message: String::new() });
            } else if req.kind == CMD_READ {
                // With simple replies a read's data follows in full; a structured reply that
                // already filled part of it cannot be mixed with this.
                if !req.covered.is_empty() {
                    return Err(ReplyError::Overlap(req.offset));
                }
                r.read_exact(&mut req.data)?;
                req.covered = vec![(0, u64::from(req.len))];
            }
            Ok(true)
        }
        ReplyHeader::Chunk(h) => {
            read_chunk(r, h, req)?;
            let done = h.flags & REPLY_FLAG_DONE != 0;
            if done && req.kind == CMD_READ && req.error.is_none() && req.covered_bytes() != u64::from(req.len) {
                return Err(ReplyError::Incomplete { covered: req.covered_bytes(), len: req.len });
            }
            Ok(done)
        }
    }
}

fn read_chunk<R: Read>(r: &mut R, h: &ChunkHeader, req: &mut InFlight) -> Result<(), ReplyError> {
    let bad_len = || ReplyError::BadChunkLength { chunk_type: h.chunk_type, len: h.len };
    let unexpected = || ReplyError::UnexpectedChunk { chunk_type: h.chunk_type, command: command_name(req.kind) };
    match h.chunk_type {
        REPLY_TYPE_NONE => {
            if h.len != 0 {
                return Err(bad_len());
            }
            if h.flags & REPLY_FLAG_DONE == 0 {
                return Err(ReplyError::NoneNotDone);
            }
        }
        REPLY_TYPE_OFFSET_DATA => {
            if req.kind != CMD_READ {
                return Err(unexpected());
            }
            if h.len <= 8 {
                return Err(bad_len());
            }
            let offset = read_u64(r)?;
            let (start, end) = req.place(offset, u64::from(h.len - 8))?;
            req.cover(start, end)?;
            r.read_exact(&mut req.data[start as usize..end as usize])?;
        }
        REPLY_TYPE_OFFSET_HOLE => {
            if req.kind != CMD_READ {
                return Err(unexpected());
            }
            if h.len != 12 {
                return Err(bad_len());
            }
            let offset = read_u64(r)?;
            let hole = read_u32(r)?;
            if hole == 0 {
                return Err(bad_len());
            }
            let (start, end) = req.place(offset, u64::from(hole))?;
            req.cover(start, end)?;
            req.data[start as usize..end as usize].fill(0);
        }
        t if t & REPLY_TYPE_ERR_BIT != 0 => {
            if !(6..=MAX_ERROR_PAYLOAD).contains(&h.len) {
                return Err(bad_len());
            }
            let errno = read_u32(r)?;
            let msg_len = read_u16(r)? as u32;
            // ERROR is exactly error + length + message; ERROR_OFFSET adds the offset; an error
            // type this client does not know may carry more after the message, which is skipped.
            let expected = match t {
                REPLY_TYPE_ERROR => 6 + msg_len,
                REPLY_TYPE_ERROR_OFFSET => 6 + msg_len + 8,
                _ => h.len,
            };
            if expected != h.len || 6 + msg_len > h.len {
                return Err(bad_len());
            }
            let mut msg = vec![0u8; msg_len as usize];
            r.read_exact(&mut msg)?;
            let mut rest = h.len - 6 - msg_len;
            if t == REPLY_TYPE_ERROR_OFFSET {
                let offset = read_u64(r)?;
                if req.kind == CMD_READ {
                    req.place(offset, 1)?;
                }
                rest -= 8;
            }
            io::copy(&mut r.take(u64::from(rest)), &mut io::sink())?;
            if errno == 0 {
                return Err(ReplyError::ZeroErrorChunk);
            }
            req.note_error(ServerError { errno, message: String::from_utf8_lossy(&msg).into_owned() });
        }
        _ => return Err(unexpected()),
    }
    Ok(())
}

fn read_u64<R: Read>(r: &mut R) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

fn read_u32<R: Read>(r: &mut R) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

fn read_u16<R: Read>(r: &mut R) -> io::Result<u16> {
    let mut b = [0u8; 2];
    r.read_exact(&mut b)?;
    Ok(u16::from_be_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(flags: u16, chunk_type: u16, handle: u64, payload: &[u8]) -> Vec<u8> {
        let mut b = ChunkHeader { flags, chunk_type, handle, len: payload.len() as u32 }.encode().to_vec();
        b.extend_from_slice(payload);
        b
    }

    fn data_chunk(flags: u16, offset: u64, data: &[u8]) -> Vec<u8> {
        let mut p = offset.to_be_bytes().to_vec();
        p.extend_from_slice(data);
        chunk(flags, REPLY_TYPE_OFFSET_DATA, 7, &p)
    }

    fn run(bytes: &[u8], req: &mut InFlight) -> Result<bool, ReplyError> {
        let mut r = bytes;
        loop {
            let h = read_header(&mut r, true)?;
            if h.handle() != 7 {
                return Err(ReplyError::UnknownHandle(h.handle()));
            }
            if read_body(&mut r, &h, req)? {
                return Ok(true);
            }
        }
    }

    #[test]
    fn structured_read_reassembles_data_and_holes_out_of_order() {
        let mut bytes = data_chunk(0, 1008, b"world");
        let mut hole = 1004u64.to_be_bytes().to_vec();
        hole.extend_from_slice(&4u32.to_be_bytes());
        bytes.extend(chunk(0, REPLY_TYPE_OFFSET_HOLE, 7, &hole));
        bytes.extend(data_chunk(0, 1000, b"abcd"));
        bytes.extend(chunk(REPLY_FLAG_DONE, REPLY_TYPE_NONE, 7, &[]));
        let mut req = InFlight::new(CMD_READ, 1000, 13);
        req.data.fill(0xff);
        assert!(run(&bytes, &mut req).unwrap());
        assert_eq!(req.outcome().unwrap(), b"abcd\0\0\0\0world");
    }

    #[test]
    fn simple_read_and_simple_error() {
        let mut bytes = SimpleReplyHeader { error: 0, handle: 7 }.encode().to_vec();
        bytes.extend_from_slice(b"xyz");
        let mut req = InFlight::new(CMD_READ, 0, 3);
        assert!(run(&bytes, &mut req).unwrap());
        assert_eq!(req.outcome().unwrap(), b"xyz");
        let bytes = SimpleReplyHeader { error: 5, handle: 7 }.encode();
        let mut req = InFlight::new(CMD_WRITE, 0, 3);
        assert!(run(&bytes, &mut req).unwrap());
        assert_eq!(req.outcome().unwrap_err().errno, 5);
    }

    #[test]
    fn error_chunks_end_the_request_with_the_message() {
        let mut bytes = data_chunk(0, 0, b"ab");
        let mut p = 5u32.to_be_bytes().to_vec();
        p.extend_from_slice(&3u16.to_be_bytes());
        p.extend_from_slice(b"bad");
        p.extend_from_slice(&3u64.to_be_bytes());
        bytes.extend(chunk(REPLY_FLAG_DONE, REPLY_TYPE_ERROR_OFFSET, 7, &p));
        let mut req = InFlight::new(CMD_READ, 0, 4);
        assert!(run(&bytes, &mut req).unwrap());
        let e = req.outcome().unwrap_err();
        assert_eq!(e, ServerError { errno: 5, message: "bad".into() });
        assert_eq!(e.to_string(), "server error EIO: bad");
        assert_eq!(e.to_io().kind(), io::ErrorKind::Other);
        assert_eq!(ServerError { errno: 999, message: String::new() }.to_io().kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn hostile_chunks_are_protocol_errors() {
        let mut req = InFlight::new(CMD_READ, 100, 4);
        assert!(matches!(
            run(&data_chunk(REPLY_FLAG_DONE, 99, b"ab"), &mut req),
            Err(ReplyError::OutsideRequest { .. })
        ));
        let mut req = InFlight::new(CMD_READ, 100, 4);
        assert!(matches!(
            run(&data_chunk(REPLY_FLAG_DONE, 103, b"ab"), &mut req),
            Err(ReplyError::OutsideRequest { .. })
        ));
        let mut req = InFlight::new(CMD_READ, 0, 4);
        let mut twice = data_chunk(0, 0, b"abc");
        twice.extend(data_chunk(REPLY_FLAG_DONE, 2, b"cd"));
        assert!(matches!(run(&twice, &mut req), Err(ReplyError::Overlap(2))));
        let mut req = InFlight::new(CMD_READ, 0, 4);
        assert!(matches!(run(&data_chunk(REPLY_FLAG_DONE, 0, b"ab"), &mut req), Err(ReplyError::Incomplete { .. })));
        let mut req = InFlight::new(CMD_WRITE, 0, 4);
        assert!(matches!(
            run(&data_chunk(REPLY_FLAG_DONE, 0, b"ab"), &mut req),
            Err(ReplyError::UnexpectedChunk { .. })
        ));
        let mut req = InFlight::new(CMD_FLUSH, 0, 0);
        assert!(matches!(run(&chunk(0, REPLY_TYPE_NONE, 7, &[]), &mut req), Err(ReplyError::NoneNotDone)));
        // A huge error payload length is refused before anything is read or allocated.
        let mut h = ChunkHeader { flags: REPLY_FLAG_DONE, chunk_type: REPLY_TYPE_ERROR, handle: 7, len: u32::MAX }
            .encode()
            .to_vec();
        h.extend_from_slice(&[0; 64]);
        assert!(matches!(run(&h, &mut InFlight::new(CMD_FLUSH, 0, 0)), Err(ReplyError::BadChunkLength { .. })));
        assert!(matches!(
            read_header(&mut &ChunkHeader { flags: 0, chunk_type: 0, handle: 7, len: 0 }.encode()[..], false),
            Err(ReplyError::StructuredNotNegotiated)
        ));
        assert!(matches!(read_header(&mut &[1, 2, 3, 4][..], true), Err(ReplyError::BadMagic(0x0102_0304))));
    }

    #[test]
    fn scattered_chunks_are_bounded() {
        let mut req = InFlight::new(CMD_READ, 0, 4 * MAX_READ_FRAGMENTS as u32 + 8);
        let mut bytes = Vec::new();
        for i in 0..=MAX_READ_FRAGMENTS as u64 {
            bytes.extend(data_chunk(0, i * 4, b"x"));
        }
        assert!(matches!(run(&bytes, &mut req), Err(ReplyError::TooFragmented)));
    }
}
