//! A read request's answer, put together from its pieces as they arrive.

use bytes::Bytes;
use smallvec::SmallVec;

use crate::iobuf::IoBuf;

/// A read request's bytes as they arrive. Member reads are kept as they came, as pieces of the
/// answer (no copy, no buffer of the request's size). Only when a slow path (a rebuild from
/// parity) needs a place to write into is one buffer allocated; the pieces are then copied into
/// it when the request finishes.
#[derive(Debug)]
pub(super) struct ReadAssembly {
    len: usize,
    /// `(offset in the request, bytes)`, in arrival order; inline for the usual one or two.
    pieces: SmallVec<[(usize, Bytes); 2]>,
    buf: Option<Vec<u8>>,
}

impl ReadAssembly {
    pub(super) fn new(len: usize) -> ReadAssembly {
        ReadAssembly { len, pieces: SmallVec::new(), buf: None }
    }

    pub(super) fn put(&mut self, at: usize, bytes: Bytes) {
        self.pieces.push((at, bytes));
    }

    /// Bytes `[at, at+len)` of the request's buffer, for a rebuild to fill.
    pub(super) fn sink(&mut self, at: usize, len: usize) -> &mut [u8] {
        let size = self.len;
        &mut self.buf.get_or_insert_with(|| vec![0u8; size])[at..at + len]
    }

    /// The answer, once every part of a successful read has arrived. The parts cover the
    /// request exactly once, so the pieces, in order, tile it; anything else is a bug in the
    /// engine and must not reach a client as data.
    pub(super) fn finish(mut self) -> IoBuf {
        if let Some(mut buf) = self.buf.take() {
            for (at, piece) in &self.pieces {
                buf[*at..*at + piece.len()].copy_from_slice(piece);
            }
            return IoBuf::from(buf);
        }
        self.pieces.sort_unstable_by_key(|(at, _)| *at);
        let mut out = IoBuf::new();
        for (at, piece) in self.pieces {
            assert_eq!(at, out.len(), "read pieces must tile the request");
            out.push(piece);
        }
        assert_eq!(out.len(), self.len, "read pieces must cover the request");
        out
    }
}
