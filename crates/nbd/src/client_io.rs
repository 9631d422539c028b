//! Reading from and writing to the client: exact reads that tell a clean close from a message
//! cut short, and how a failed read or write ends the connection.

use std::io::{self, BufRead, Read};

use bytes::Bytes;
use uraid_engine::PoolBuf;

use crate::outcome::EndReason;

/// How a read from the client ended early.
pub(crate) enum ReadEnd {
    /// EOF exactly at a message boundary.
    Closed,
    /// EOF inside a message.
    Truncated(&'static str),
    Failed(io::Error),
}

impl ReadEnd {
    pub(crate) fn reason(self, stopping: bool) -> EndReason {
        if stopping {
            // A stop shuts the read side down, which looks like EOF from here.
            return EndReason::ServerStop;
        }
        match self {
            ReadEnd::Closed => EndReason::ClientDisconnected,
            ReadEnd::Truncated(what) => EndReason::ProtocolError(format!("connection closed in the middle of {what}")),
            ReadEnd::Failed(e) if matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe) => {
                EndReason::ClientDisconnected
            }
            ReadEnd::Failed(e) => EndReason::Io(format!("reading from the client: {e}")),
        }
    }
}

/// Fills `buf`, telling EOF before the first byte (a clean close) from EOF inside the message.
pub(crate) fn read_exact_or_eof<R: Read>(r: &mut R, buf: &mut [u8], what: &'static str) -> Result<(), ReadEnd> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) if filled == 0 => return Err(ReadEnd::Closed),
            Ok(0) => return Err(ReadEnd::Truncated(what)),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadEnd::Failed(e)),
        }
    }
    Ok(())
}

/// Reads exactly `len` bytes without zero-filling a buffer first.
pub(crate) fn read_vec<R: Read>(r: &mut R, len: usize, what: &'static str) -> Result<Vec<u8>, ReadEnd> {
    let mut data = Vec::with_capacity(len);
    match r.take(len as u64).read_to_end(&mut data) {
        Ok(n) if n == len => Ok(data),
        Ok(_) => Err(ReadEnd::Truncated(what)),
        Err(e) => Err(ReadEnd::Failed(e)),
    }
}

/// Reads exactly `len` bytes into a buffer from the pool (`uraid_engine::bufpool`): a large
/// write's buffer is freed on a member I/O thread once written, and taken back from the pool
/// for the next one instead of being faulted in afresh.
pub(crate) fn read_payload<R: Read>(r: &mut R, len: usize, what: &'static str) -> Result<Bytes, ReadEnd> {
    let mut buf = PoolBuf::new(len);
    match buf.read_from(r, len) {
        Ok(n) if n == len => Ok(buf.into_bytes()),
        Ok(_) => Err(ReadEnd::Truncated(what)),
        Err(e) => Err(ReadEnd::Failed(e)),
    }
}

/// Reads and drops `len` bytes.
pub(crate) fn discard<R: BufRead>(r: &mut R, len: u64, what: &'static str) -> Result<(), ReadEnd> {
    match io::copy(&mut r.take(len), &mut io::sink()) {
        Ok(n) if n == len => Ok(()),
        Ok(_) => Err(ReadEnd::Truncated(what)),
        Err(e) => Err(ReadEnd::Failed(e)),
    }
}

/// How a failed write to the client ends the connection.
pub(crate) fn write_failed(e: io::Error, stopping: bool) -> EndReason {
    if stopping {
        EndReason::ServerStop
    } else if matches!(e.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset) {
        EndReason::ClientDisconnected
    } else {
        EndReason::Io(format!("writing to the client: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tell_clean_eof_from_truncation() {
        let mut buf = [0u8; 4];
        assert!(matches!(read_exact_or_eof(&mut &[][..], &mut buf, "x"), Err(ReadEnd::Closed)));
        assert!(matches!(read_exact_or_eof(&mut &[1, 2][..], &mut buf, "x"), Err(ReadEnd::Truncated("x"))));
        assert!(read_exact_or_eof(&mut &[1, 2, 3, 4, 5][..], &mut buf, "x").is_ok());
        assert_eq!(buf, [1, 2, 3, 4]);
        assert!(matches!(read_vec(&mut &[1, 2][..], 3, "y"), Err(ReadEnd::Truncated("y"))));
        assert_eq!(read_vec(&mut &[1, 2, 3][..], 2, "y").ok(), Some(vec![1, 2]));
        assert!(discard(&mut &[0u8; 10][..], 10, "z").is_ok());
        assert!(matches!(discard(&mut &[0u8; 10][..], 11, "z"), Err(ReadEnd::Truncated("z"))));
    }
}
