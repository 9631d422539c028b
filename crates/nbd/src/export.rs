//! What the server serves: the [`Export`] trait and the commands, replies and errors that cross it.

use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;

use bytes::Bytes;
use thiserror::Error;
pub use uraid_engine::IoBuf;

/// A device the server exports.
///
/// The server calls [`Export::submit`] from each connection's reader thread as soon as a request is
/// read and validated, so many requests from many connections are in flight at once. The server
/// has already checked every command against [`Export::size`], [`Export::read_only`] and the
/// configured payload limit, and never submits a zero-length range, so an implementation only sees
/// in-range, non-empty work (and never a write-like command when it says it is read-only).
pub trait Export: Send + Sync + 'static {
    /// Size in bytes. Read once per connection, when the client picks the export.
    fn size(&self) -> u64;
    fn read_only(&self) -> bool;
    /// Preferred I/O size in bytes (a power of two >= 512), advertised in `NBD_INFO_BLOCK_SIZE`.
    /// Read once per connection, as the size is.
    fn preferred_block_size(&self) -> u32;
    /// True when a flush on one connection makes durable the writes completed on every connection
    /// (then `NBD_FLAG_CAN_MULTI_CONN` is advertised).
    fn multi_conn_safe(&self) -> bool;
    /// Starts `cmd`. `done` must be called exactly once, from any thread, in any order relative to
    /// other requests; it only queues the reply, so it is cheap and never blocks on the network.
    /// Dropping `done` without calling it is answered to the client as an `EIO` error. `done` may
    /// be called inside `submit` (the request answered at once); such replies are sent when the
    /// connection's reader next waits, so `submit` must not wait for other replies to reach the
    /// client.
    fn submit(&self, cmd: ExportCommand, done: Completion);
}

/// The callback an [`Export`] calls when a command finishes.
pub type Completion = Box<dyn FnOnce(Result<ExportReply, ExportError>) + Send>;

/// One validated request. Ranges lie inside the export and have a nonzero length.
#[derive(Clone, PartialEq, Eq)]
pub enum ExportCommand {
    Read {
        offset: u64,
        len: u32,
    },
    /// `fua`: the data must be durable before `done` is called.
    Write {
        offset: u64,
        data: Bytes,
        fua: bool,
    },
    /// Make every write completed so far durable.
    Flush,
    /// Advisory: the export may deallocate whole blocks inside the range; contents after are
    /// unspecified.
    Trim {
        offset: u64,
        len: u32,
        fua: bool,
    },
    /// The range must read back as zeros afterwards; with `may_trim` (`NBD_CMD_FLAG_NO_HOLE` not
    /// set) the export may deallocate.
    WriteZeroes {
        offset: u64,
        len: u32,
        may_trim: bool,
        fua: bool,
    },
    /// Advisory prefetch.
    Cache {
        offset: u64,
        len: u32,
    },
}

impl ExportCommand {
    /// The byte range the command touches, if it has one.
    pub fn range(&self) -> Option<(u64, u64)> {
        match *self {
            ExportCommand::Read { offset, len }
            | ExportCommand::Trim { offset, len, .. }
            | ExportCommand::WriteZeroes { offset, len, .. }
            | ExportCommand::Cache { offset, len } => Some((offset, len as u64)),
            ExportCommand::Write { offset, ref data, .. } => Some((offset, data.len() as u64)),
            ExportCommand::Flush => None,
        }
    }
}

// Written by hand so that a write's data is summarized, not dumped.
impl fmt::Debug for ExportCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportCommand::Read { offset, len } => write!(f, "Read {{ offset: {offset}, len: {len} }}"),
            ExportCommand::Write { offset, data, fua } => {
                write!(f, "Write {{ offset: {offset}, len: {}, fua: {fua} }}", data.len())
            }
            ExportCommand::Flush => write!(f, "Flush"),
            ExportCommand::Trim { offset, len, fua } => {
                write!(f, "Trim {{ offset: {offset}, len: {len}, fua: {fua} }}")
            }
            ExportCommand::WriteZeroes { offset, len, may_trim, fua } => {
                write!(f, "WriteZeroes {{ offset: {offset}, len: {len}, may_trim: {may_trim}, fua: {fua} }}")
            }
            ExportCommand::Cache { offset, len } => write!(f, "Cache {{ offset: {offset}, len: {len} }}"),
        }
    }
}

/// A successful completion: the data of a read (exactly the requested length), or `Done` for
/// everything else.
pub enum ExportReply {
    /// The bytes, in pieces if that is how the export has them (they are sent one after the
    /// other, never joined).
    Data(IoBuf),
    /// The bytes, already in a pipe the writer moves to the socket with `splice(2)`, so the
    /// server never copies them (see [`SplicedData`]).
    Spliced(Box<dyn SplicedData>),
    Done,
}

// Written by hand: a spliced reply is summarized by its length.
impl fmt::Debug for ExportReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportReply::Data(d) => f.debug_tuple("Data").field(d).finish(),
            ExportReply::Spliced(s) => write!(f, "Spliced({} bytes)", s.len()),
            ExportReply::Done => f.write_str("Done"),
        }
    }
}

/// A read's data held where the kernel can move it to the socket without it passing through
/// this process: in practice a pipe that `splice(2)` filled with references to the member
/// files' page-cache pages. A reply of page references is sent with no copy at all on the
/// server's side, where `pread` and `send` would copy every byte twice.
///
/// The data must be complete before the export completes the request (the writer sends the
/// reply header, which says the read succeeded, before it moves the data), so a failure to
/// move it is a failure of the connection, as a failed socket write is.
pub trait SplicedData: Send {
    /// The number of bytes held; the writer checks it against the read's length.
    fn len(&self) -> usize;
    /// Whether nothing is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Move all the bytes to `out` (a blocking socket), returning once they are all written.
    fn splice_to(&mut self, out: BorrowedFd<'_>) -> io::Result<()>;
}

/// A failed command. The message goes to the client in structured replies, so it should make sense
/// to a person reading it on the client side.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{errno}: {message}")]
pub struct ExportError {
    pub errno: Errno,
    pub message: String,
}

impl ExportError {
    pub fn new(errno: Errno, message: impl Into<String>) -> Self {
        ExportError { errno, message: message.into() }
    }
}

/// The error values the protocol allows on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Errno {
    Perm,
    Io,
    NoMem,
    Inval,
    NoSpc,
    Overflow,
    NotSup,
    Shutdown,
}

impl Errno {
    pub const ALL: [Errno; 8] = [
        Errno::Perm,
        Errno::Io,
        Errno::NoMem,
        Errno::Inval,
        Errno::NoSpc,
        Errno::Overflow,
        Errno::NotSup,
        Errno::Shutdown,
    ];

    /// The value sent in a reply's error field (`NBD_EPERM` = 1 ... `NBD_ESHUTDOWN` = 108).
    pub fn code(self) -> u32 {
        match self {
            Errno::Perm => 1,
            Errno::Io => 5,
            Errno::NoMem => 12,
            Errno::Inval => 22,
            Errno::NoSpc => 28,
            Errno::Overflow => 75,
            Errno::NotSup => 95,
            Errno::Shutdown => 108,
        }
    }

    pub fn from_code(code: u32) -> Option<Errno> {
        Errno::ALL.into_iter().find(|e| e.code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            Errno::Perm => "EPERM",
            Errno::Io => "EIO",
            Errno::NoMem => "ENOMEM",
            Errno::Inval => "EINVAL",
            Errno::NoSpc => "ENOSPC",
            Errno::Overflow => "EOVERFLOW",
            Errno::NotSup => "ENOTSUP",
            Errno::Shutdown => "ESHUTDOWN",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_codes_are_the_wire_values() {
        let codes: Vec<u32> = Errno::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [1, 5, 12, 22, 28, 75, 95, 108]);
        for e in Errno::ALL {
            assert_eq!(Errno::from_code(e.code()), Some(e));
        }
        assert_eq!(Errno::from_code(0), None);
        assert_eq!(ExportError::new(Errno::Io, "member 2 failed").to_string(), "EIO: member 2 failed");
    }

    #[test]
    fn debug_of_a_write_does_not_dump_data() {
        let w = ExportCommand::Write { offset: 7, data: (vec![0xaa; 4096]).into(), fua: true };
        assert_eq!(format!("{w:?}"), "Write { offset: 7, len: 4096, fua: true }");
        assert_eq!(w.range(), Some((7, 4096)));
        assert_eq!(ExportCommand::Flush.range(), None);
    }
}
