//! Hash maps keyed by the engine's own integers (request ids, I/O ids, chunk numbers).
//!
//! The standard map hashes with SipHash, which resists keys chosen to collide and costs about
//! as much as the rest of a map lookup again. These keys are counters and chunk numbers, looked
//! up several times per request on the engine thread (about 6 % of its time on 4 KiB random
//! reads went to SipHash). [`IdHasher`] mixes a `u64` with SplitMix64's finaliser instead: every
//! bit of the key reaches every bit of the hash, so ids with a common stride (chunk numbers a
//! power of two apart) do not share buckets, in a few cycles.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` over integer keys hashed with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// SplitMix64's finaliser over the integers written to it.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl IdHasher {
    fn mix(x: u64) -> u64 {
        let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by integer keys; kept correct for any other.
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = Self::mix(self.0 ^ n);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn strided_keys_spread_over_the_low_bits() {
        // Chunk numbers a megabyte apart: the bucket index (low bits) must still vary.
        let b = BuildHasherDefault::<IdHasher>::default();
        let buckets: std::collections::HashSet<u64> = (0..1024u64).map(|k| b.hash_one(k << 20) & 1023).collect();
        assert!(buckets.len() > 550, "{} of 1024 buckets used", buckets.len());
        // And the top bits (hashbrown's control byte) too.
        let tops: std::collections::HashSet<u64> = (0..1024u64).map(|k| b.hash_one(k) >> 57).collect();
        assert_eq!(tops.len(), 128);
    }

    #[test]
    fn a_map_works_as_a_map() {
        let mut m: IdMap<u64, u64> = IdMap::default();
        for k in 0..10_000u64 {
            m.insert(k * 4096, k);
        }
        assert!((0..10_000u64).all(|k| m[&(k * 4096)] == k));
        assert_eq!(m.remove(&4096), Some(1));
        assert_eq!(m.len(), 9_999);
    }
}
