//! [`IoBuf`]: bytes that pass through the engine without being copied.
//!
//! A write request's data reaches the members as slices of the caller's buffer, and a read
//! request's answer is made of the member reads as they arrived. Both can be several pieces: a
//! raid0 write merged per member gathers chunks that sit a stripe apart in the caller's buffer,
//! and a striped read is answered by one piece per member run. Drivers hand the pieces to
//! vectored I/O (`pwritev`, `writev` on a socket) instead of joining them.
//!
//! The pieces are [`bytes::Bytes`]: reference-counted, sliced without copying, and turned back
//! into a `Vec<u8>` without copying when nothing else holds them. The first piece is kept
//! inline, so the common single-piece buffer allocates nothing of its own.

use std::fmt;

use bytes::Bytes;

/// A sequence of byte pieces read or written as one.
#[derive(Clone, Default)]
pub struct IoBuf {
    first: Bytes,
    rest: Vec<Bytes>,
    len: usize,
}

impl IoBuf {
    /// An empty buffer.
    pub fn new() -> IoBuf {
        IoBuf::default()
    }

    /// Total bytes in all pieces.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Append a piece (empty pieces are dropped).
    pub fn push(&mut self, piece: Bytes) {
        if piece.is_empty() {
            return;
        }
        self.len += piece.len();
        if self.first.is_empty() {
            self.first = piece;
        } else {
            self.rest.push(piece);
        }
    }

    /// The pieces, in order, none of them empty.
    pub fn pieces(&self) -> impl Iterator<Item = &Bytes> + '_ {
        std::iter::once(&self.first).filter(|b| !b.is_empty()).chain(self.rest.iter())
    }

    /// Number of pieces.
    pub fn piece_count(&self) -> usize {
        usize::from(!self.first.is_empty()) + self.rest.len()
    }

    /// The bytes as one slice, when they are one piece (or none).
    pub fn as_single(&self) -> Option<&[u8]> {
        self.rest.is_empty().then_some(&self.first[..])
    }

    /// Copy the bytes into `out`, which must be exactly as long.
    pub fn copy_to(&self, out: &mut [u8]) {
        assert_eq!(out.len(), self.len, "copy_to needs a buffer of the same length");
        let mut at = 0;
        for p in self.pieces() {
            out[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
    }

    /// The pieces, in order, none of them empty, by value.
    pub fn into_pieces(self) -> impl Iterator<Item = Bytes> {
        std::iter::once(self.first).filter(|b| !b.is_empty()).chain(self.rest)
    }

    /// The bytes as one `Vec`; without a copy when they are one piece nothing else shares.
    pub fn into_vec(self) -> Vec<u8> {
        if self.rest.is_empty() {
            return Vec::from(self.first);
        }
        self.to_vec()
    }

    /// The bytes as one [`Bytes`]: the piece itself when there is one, else a joined copy.
    pub fn into_bytes(self) -> Bytes {
        if self.rest.is_empty() {
            return self.first;
        }
        Bytes::from(self.to_vec())
    }

    /// A copy of the bytes as one `Vec`.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for p in self.pieces() {
            out.extend_from_slice(p);
        }
        out
    }

    /// The bytes `[start, start+len)`, sharing the pieces (no copy).
    pub fn slice(&self, start: usize, len: usize) -> IoBuf {
        assert!(start + len <= self.len, "slice {start}+{len} past the end of a {}-byte buffer", self.len);
        let mut out = IoBuf::new();
        let (mut skip, mut want) = (start, len);
        for p in self.pieces() {
            if want == 0 {
                break;
            }
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            let take = (p.len() - skip).min(want);
            out.push(p.slice(skip..skip + take));
            skip = 0;
            want -= take;
        }
        out
    }
}

impl From<Bytes> for IoBuf {
    fn from(b: Bytes) -> IoBuf {
        let len = b.len();
        IoBuf { first: b, rest: Vec::new(), len }
    }
}

impl From<Vec<u8>> for IoBuf {
    fn from(v: Vec<u8>) -> IoBuf {
        IoBuf::from(Bytes::from(v))
    }
}

impl From<&[u8]> for IoBuf {
    fn from(v: &[u8]) -> IoBuf {
        IoBuf::from(Bytes::copy_from_slice(v))
    }
}

impl PartialEq for IoBuf {
    /// Equal bytes, however they are cut into pieces.
    fn eq(&self, other: &IoBuf) -> bool {
        if self.len != other.len {
            return false;
        }
        let mut a = self.pieces().flat_map(|p| p.iter());
        let mut b = other.pieces().flat_map(|p| p.iter());
        loop {
            match (a.next(), b.next()) {
                (None, None) => return true,
                (x, y) if x == y => {}
                _ => return false,
            }
        }
    }
}

impl Eq for IoBuf {}

impl PartialEq<[u8]> for IoBuf {
    fn eq(&self, other: &[u8]) -> bool {
        if self.len != other.len() {
            return false;
        }
        let mut at = 0;
        self.pieces().all(|p| {
            let same = p[..] == other[at..at + p.len()];
            at += p.len();
            same
        })
    }
}

impl PartialEq<Vec<u8>> for IoBuf {
    fn eq(&self, other: &Vec<u8>) -> bool {
        *self == other[..]
    }
}

impl fmt::Debug for IoBuf {
    /// Length and pieces, not the bytes: buffers are often megabytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IoBuf({} bytes in {} pieces)", self.len, self.piece_count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(parts: &[&[u8]]) -> IoBuf {
        let mut b = IoBuf::new();
        for p in parts {
            b.push(Bytes::copy_from_slice(p));
        }
        b
    }

    #[test]
    fn equality_ignores_how_the_bytes_are_cut() {
        let a = pieces(&[b"abc", b"", b"defg"]);
        let b = pieces(&[b"ab", b"cdefg"]);
        assert_eq!(a, b);
        assert_eq!(a.len(), 7);
        assert_eq!(a.piece_count(), 2);
        assert_ne!(a, pieces(&[b"abcdefh"]));
        assert_ne!(a, pieces(&[b"abcdef"]));
        assert_eq!(a, b"abcdefg".to_vec());
    }

    #[test]
    fn slices_share_and_cross_pieces() {
        let a = pieces(&[b"abc", b"def", b"ghij"]);
        for start in 0..=a.len() {
            for len in 0..=a.len() - start {
                let s = a.slice(start, len);
                assert_eq!(s.to_vec(), b"abcdefghij"[start..start + len].to_vec(), "slice {start}+{len}");
                assert_eq!(s.len(), len);
            }
        }
    }

    #[test]
    fn copy_to_and_into_vec_join_the_pieces() {
        let a = pieces(&[b"abc", b"def"]);
        let mut out = [0u8; 6];
        a.copy_to(&mut out);
        assert_eq!(&out, b"abcdef");
        assert_eq!(a.as_single(), None);
        assert_eq!(a.into_vec(), b"abcdef");
        let one = IoBuf::from(b"xyz".to_vec());
        assert_eq!(one.as_single(), Some(&b"xyz"[..]));
        assert_eq!(one.into_vec(), b"xyz");
        assert!(IoBuf::new().is_empty());
        assert_eq!(IoBuf::new().pieces().count(), 0);
    }
}
