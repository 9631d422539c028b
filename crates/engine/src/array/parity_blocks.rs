//! Blocks the engine computes new parity into, kept for the next parity write once the member
//! writes that carried them come back ([`IoResult::Written`]).
//!
//! Why: a raid4/5/6 write that reconstructs its stripe (or merges a partly written member)
//! needs one or two fresh blocks of the rows it touches, and allocating them was the last
//! allocation a steady stream of small parity writes made in the engine. md takes these from
//! the pages of its stripe cache; here they travel to the driver inside `Bytes` (moved, never
//! cloned), and a driver that hands them back lets the engine turn the same memory around.
//!
//! A block comes back only when nothing else holds it (`Bytes::is_unique`) and it is a plain
//! heap block of exactly its length, which is what [`ParityBlocks::take`] makes; anything else
//! handed back (a client's data, a pooled buffer) is simply dropped, as it would have been.
//! What is kept is bounded ([`KEPT_BLOCKS`], [`KEPT_BYTES`]); the oldest goes first, so the
//! kept sizes follow the load.
//!
//! [`IoResult::Written`]: super::IoResult::Written

use bytes::Bytes;

/// Most blocks kept.
pub(super) const KEPT_BLOCKS: usize = 64;

/// Most bytes kept, over all blocks.
pub(super) const KEPT_BYTES: usize = 8 << 20;

pub(super) struct ParityBlocks {
    free: Vec<Vec<u8>>,
    bytes: usize,
    /// Zeros for the syndrome slots that hold no data on DDF raid6 layouts; only ever read.
    zeros: Vec<u8>,
}

// Written by hand: the blocks' bytes are noise.
impl std::fmt::Debug for ParityBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ParityBlocks {{ kept: {}, bytes: {} }}", self.free.len(), self.bytes)
    }
}

impl ParityBlocks {
    pub(super) fn new() -> ParityBlocks {
        ParityBlocks { free: Vec::with_capacity(KEPT_BLOCKS), bytes: 0, zeros: Vec::new() }
    }

    /// A block of `len` bytes, whose contents are whatever they were: the caller overwrites
    /// every byte.
    pub(super) fn take(&mut self, len: usize) -> Vec<u8> {
        match self.free.iter().rposition(|b| b.len() == len) {
            Some(i) => {
                self.bytes -= len;
                self.free.swap_remove(i)
            }
            None => vec![0u8; len],
        }
    }

    /// Keep `block` for [`ParityBlocks::take`].
    pub(super) fn put(&mut self, block: Vec<u8>) {
        // `Bytes::from` a vector with room to spare allocates, so only exact blocks are kept.
        if block.is_empty() || block.len() != block.capacity() || block.len() > KEPT_BYTES {
            return;
        }
        while self.free.len() >= KEPT_BLOCKS || self.bytes + block.len() > KEPT_BYTES {
            let oldest = self.free.remove(0);
            self.bytes -= oldest.len();
        }
        self.bytes += block.len();
        self.free.push(block);
    }

    /// Keep the memory of a member write's piece, if nothing else holds it.
    pub(super) fn give_back(&mut self, piece: Bytes) {
        // Unique and heap-backed: turning it into a vector takes the memory over, no copy.
        // (`is_unique` is false for pieces owned elsewhere, such as pooled buffers, whose
        // conversion would copy.)
        if piece.is_unique() && piece.len() <= KEPT_BYTES {
            self.put(Vec::from(piece));
        }
    }

    /// At least `len` zero bytes.
    pub(super) fn zeros(&mut self, len: usize) -> &[u8] {
        if self.zeros.len() < len {
            self.zeros = vec![0u8; len];
        }
        &self.zeros[..len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_come_back_only_whole_and_unshared() {
        let mut blocks = ParityBlocks::new();
        let p = blocks.take(4096);
        let at = p.as_ptr();
        let bytes = Bytes::from(p);
        let shared = bytes.clone();
        blocks.give_back(bytes);
        assert!(blocks.free.is_empty(), "a block still shared is not kept");
        blocks.give_back(shared);
        assert_eq!(blocks.free.len(), 1, "the last holder gives it back");
        let again = blocks.take(4096);
        assert_eq!(again.as_ptr(), at, "the same memory is used again");
        assert!(blocks.free.is_empty());
        // A vector with spare room, or another size, is not what `take` asked for.
        let mut roomy = Vec::with_capacity(8192);
        roomy.resize(4096, 0u8);
        blocks.put(roomy);
        assert!(blocks.free.is_empty());
        blocks.put(vec![1u8; 512]);
        assert_eq!(blocks.take(4096), vec![0u8; 4096], "a new block");
        assert_eq!(blocks.free.len(), 1, "the 512-byte block is still kept");
        // A piece owned elsewhere is dropped, not copied.
        blocks.give_back(Bytes::from_owner(vec![2u8; 4096]));
        assert_eq!(blocks.free.len(), 1);
    }

    #[test]
    fn what_is_kept_is_bounded_oldest_out() {
        let mut blocks = ParityBlocks::new();
        for i in 0..KEPT_BLOCKS + 10 {
            blocks.put(vec![i as u8; 1024]);
        }
        assert_eq!(blocks.free.len(), KEPT_BLOCKS);
        assert_eq!(blocks.free[0][0], 10, "the oldest went first");
        let big = KEPT_BYTES / 2;
        blocks.put(vec![0u8; big]);
        blocks.put(vec![0u8; big]);
        assert!(blocks.bytes <= KEPT_BYTES);
        assert_eq!(blocks.bytes, blocks.free.iter().map(Vec::len).sum::<usize>());
        blocks.put(vec![0u8; KEPT_BYTES + 1]);
        assert!(blocks.free.iter().all(|b| b.len() <= big));
        assert_eq!(blocks.zeros(100), &[0u8; 100][..]);
    }
}
