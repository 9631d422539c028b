//! A parity write's bytes: one client buffer, or several that continue one another (writes
//! gathered into one, see `write_gather.rs`), kept as they came so gathering copies nothing.
//! Member writes are slices of them; parity is computed from a member's rows in place where
//! one buffer holds them, and from a copy where they straddle two.

use bytes::Bytes;
use smallvec::{smallvec, SmallVec};

use crate::iobuf::IoBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WriteData {
    /// The buffers in order, each with where it starts in the write.
    pieces: SmallVec<[(usize, Bytes); 1]>,
    len: usize,
}

impl From<Bytes> for WriteData {
    fn from(data: Bytes) -> WriteData {
        let len = data.len();
        WriteData { pieces: smallvec![(0, data)], len }
    }
}

impl WriteData {
    /// Buffers that continue one another, in order.
    pub(super) fn joined(buffers: impl IntoIterator<Item = Bytes>) -> WriteData {
        let mut pieces = SmallVec::new();
        let mut len = 0;
        for b in buffers {
            if !b.is_empty() {
                let n = b.len();
                pieces.push((len, b));
                len += n;
            }
        }
        WriteData { pieces, len }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The index of the piece holding byte `at` (`at < len`).
    fn piece_at(&self, at: usize) -> usize {
        self.pieces.partition_point(|(start, _)| *start <= at) - 1
    }

    /// Bytes `[start, start+len)` in place, when one buffer holds them all.
    pub(super) fn contiguous(&self, start: usize, len: usize) -> Option<&[u8]> {
        if len == 0 {
            return Some(&[]);
        }
        let (from, piece) = &self.pieces[self.piece_at(start)];
        let at = start - from;
        piece.get(at..at + len)
    }

    /// Copy bytes `[start, start+out.len())` into `out`.
    pub(super) fn copy_to(&self, start: usize, out: &mut [u8]) {
        if out.is_empty() {
            return;
        }
        let mut done = 0;
        let mut i = self.piece_at(start);
        while done < out.len() {
            let (from, piece) = &self.pieces[i];
            let at = start + done - from;
            let n = (piece.len() - at).min(out.len() - done);
            out[done..done + n].copy_from_slice(&piece[at..at + n]);
            done += n;
            i += 1;
        }
    }

    /// Bytes `[start, start+len)` as a member write's buffer, without copying.
    pub(super) fn slice(&self, start: usize, len: usize) -> IoBuf {
        let mut out = IoBuf::new();
        if len == 0 {
            return out;
        }
        let mut i = self.piece_at(start);
        let mut done = 0;
        while done < len {
            let (from, piece) = &self.pieces[i];
            let at = start + done - from;
            let n = (piece.len() - at).min(len - done);
            out.push(piece.slice(at..at + n));
            done += n;
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> (WriteData, Vec<u8>) {
        let whole: Vec<u8> = (0..30u8).collect();
        let data = WriteData::joined([
            Bytes::copy_from_slice(&whole[0..10]),
            Bytes::new(),
            Bytes::copy_from_slice(&whole[10..25]),
            Bytes::copy_from_slice(&whole[25..30]),
        ]);
        (data, whole)
    }

    #[test]
    fn every_range_reads_as_the_joined_bytes() {
        let (data, whole) = three();
        assert_eq!(data.len(), 30);
        for start in 0..30 {
            for len in 0..=30 - start {
                let mut out = vec![0u8; len];
                data.copy_to(start, &mut out);
                assert_eq!(out, whole[start..start + len], "copy {start}+{len}");
                assert_eq!(data.slice(start, len).to_vec(), whole[start..start + len], "slice {start}+{len}");
                match data.contiguous(start, len) {
                    Some(b) => assert_eq!(b, &whole[start..start + len]),
                    None => assert!(
                        (start < 10 && start + len > 10) || (start < 25 && start + len > 25),
                        "{start}+{len} lies in one piece"
                    ),
                }
            }
        }
    }

    #[test]
    fn slices_are_the_buffers_themselves() {
        let b = Bytes::from(vec![5u8; 100]);
        let ptr = b.as_ptr();
        let data = WriteData::from(b);
        let s = data.slice(10, 50);
        assert_eq!(s.piece_count(), 1);
        assert_eq!(s.pieces().next().unwrap().as_ptr(), ptr.wrapping_add(10));
        assert_eq!(data.contiguous(10, 50).unwrap().as_ptr(), ptr.wrapping_add(10));
    }
}
