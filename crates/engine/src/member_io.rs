//! The member I/O the engine asks a driver to perform, and the driver's answers: the plain types
//! between the engine and whatever performs I/O (real files, block devices, simulated disks).

use bytes::Bytes;

use crate::iobuf::IoBuf;

/// Identifies an emitted member I/O.
pub type IoId = u64;

/// A member I/O for the driver to perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberIo {
    pub id: IoId,
    pub slot: usize,
    /// Byte offset from the member's data start (the driver adds the data offset).
    pub offset: u64,
    pub op: MemberOp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberOp {
    Read {
        len: u64,
    },
    /// Write the bytes, often slices of the request's own buffer, possibly several pieces
    /// (a vectored write).
    Write {
        data: IoBuf,
    },
    Flush,
    /// Zero `len` bytes, deallocating if the member can; afterwards they must read as zeros.
    Discard {
        len: u64,
    },
    /// Write `data` at `offset` from the start of the member's partial parity log area (not
    /// its data), durably: complete it only once the bytes are on stable storage (FUA).
    LogWrite {
        data: Vec<u8>,
    },
    /// Write `data` at `offset` bytes from the start of the device itself, into the member's
    /// metadata (superblock, write-intent bitmap, log header: a [`crate::metadata::MetaOp`]),
    /// never into its data. The engine never emits it: a driver sends the array's metadata
    /// writes down the members' own I/O paths with it. Durable only after a later `Flush`.
    MetadataWrite {
        data: Bytes,
    },
}

/// The driver's answer for one member I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IoResult {
    /// The bytes read (a driver may hand over a buffer of its own, see `Bytes::from_owner`;
    /// the engine passes it on to the request's answer without copying).
    Read(Bytes),
    Done,
    /// A write is done, and here are its bytes back: the engine keeps the blocks it computed
    /// new parity into for the next parity write (see `array/parity_blocks.rs`). A driver that
    /// drops them answers `Done`, which costs an allocation per parity write and nothing else.
    /// [`IoResult::handing_back`] makes this of a `Done`.
    Written(IoBuf),
    /// The I/O failed; the error says how (its text ends up in the member-failed event).
    Failed(MemberIoError),
}

/// Why a member I/O failed, as its driver reports it. The engine only learns that the member
/// failed and passes the text on; the OS error's kind and number are kept for drivers and front
/// ends that tell failures apart.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct MemberIoError {
    /// What failed and why, in words: the device, the operation and where, and the OS error.
    message: String,
    kind: std::io::ErrorKind,
    errno: Option<i32>,
}

impl MemberIoError {
    /// A failure the OS reported: `what` names the device, the operation and where (for
    /// example `/dev/sdb: write at byte 4096`), and the OS error's text follows it.
    pub fn os(what: impl std::fmt::Display, error: &std::io::Error) -> MemberIoError {
        MemberIoError { message: format!("{what}: {error}"), kind: error.kind(), errno: error.raw_os_error() }
    }

    /// A failure with no OS error behind it (an I/O refused as outside its member's area, I/O
    /// threads that stopped, a simulated fault).
    pub fn other(message: impl Into<String>) -> MemberIoError {
        MemberIoError { message: message.into(), kind: std::io::ErrorKind::Other, errno: None }
    }

    /// The OS error's kind ([`std::io::ErrorKind::Other`] where there was none).
    pub fn kind(&self) -> std::io::ErrorKind {
        self.kind
    }

    /// The OS error number (`errno`), where the failure came from one.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }

    /// Whether the member did not answer at all (its request timed out) or cannot be reached
    /// (a remote member whose server is gone), rather than answering with an error for these
    /// bytes. Retrying the read row by row or rewriting it, as a read error gets, would only
    /// wait on it again.
    pub fn member_unreachable(&self) -> bool {
        unreachable_kind(self.kind)
    }
}

/// Whether an I/O error of `kind` says the member did not answer or cannot be reached (a
/// request timed out, or the connection to a remote member is gone for good), not that it
/// answered with an error.
pub fn unreachable_kind(kind: std::io::ErrorKind) -> bool {
    matches!(kind, std::io::ErrorKind::TimedOut | std::io::ErrorKind::NotConnected)
}

impl IoResult {
    /// `self`, with the bytes of a finished write handed back to the engine (a `Done` for a
    /// `Write` becomes [`IoResult::Written`]). For drivers, once the kernel is done with them.
    pub fn handing_back(self, op: MemberOp) -> IoResult {
        match (self, op) {
            (IoResult::Done, MemberOp::Write { data }) => IoResult::Written(data),
            (result, _) => result,
        }
    }
}
