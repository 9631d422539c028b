//! Byte-slice kernels that work eight bytes at a time.
//!
//! XOR and doubling in GF(2^8) act on each byte independently, so eight bytes packed into a
//! `u64` can be processed at once whatever the machine's byte order; any tail shorter than a word
//! falls back to single bytes. Callers check lengths; these functions assume they are equal.

use crate::gf;

const WORD: usize = 8;
/// The top bit of every byte in a word.
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

#[inline]
fn load(bytes: &[u8]) -> u64 {
    u64::from_ne_bytes(bytes.try_into().expect("a whole word"))
}

#[inline]
fn store(bytes: &mut [u8], word: u64) {
    bytes.copy_from_slice(&word.to_ne_bytes());
}

/// Multiplies each of the eight bytes of `word` by {02}: shift every byte left by one without
/// letting bits cross into the neighbour, then XOR the reduction into the bytes whose top bit
/// fell off. `carries * 0x1d` puts 0x1d in exactly those bytes because each carry is 0 or 1.
#[inline]
fn mul2_word(word: u64) -> u64 {
    let carries = (word & HIGH_BITS) >> 7;
    ((word & !HIGH_BITS) << 1) ^ (carries * gf::REDUCTION as u64)
}

/// `dst ^= src`.
pub(crate) fn xor(dst: &mut [u8], src: &[u8]) {
    let mut dst_words = dst.chunks_exact_mut(WORD);
    let mut src_words = src.chunks_exact(WORD);
    for (d, s) in (&mut dst_words).zip(&mut src_words) {
        store(d, load(d) ^ load(s));
    }
    for (d, s) in dst_words.into_remainder().iter_mut().zip(src_words.remainder()) {
        *d ^= s;
    }
}

/// `acc = {02} * acc`, then `acc ^= src` when there is a source. One step of Horner's rule.
pub(crate) fn mul2_then_xor(acc: &mut [u8], src: Option<&[u8]>) {
    match src {
        Some(src) => {
            let mut acc_words = acc.chunks_exact_mut(WORD);
            let mut src_words = src.chunks_exact(WORD);
            for (a, s) in (&mut acc_words).zip(&mut src_words) {
                store(a, mul2_word(load(a)) ^ load(s));
            }
            for (a, s) in acc_words.into_remainder().iter_mut().zip(src_words.remainder()) {
                *a = gf::mul2(*a) ^ s;
            }
        }
        None => {
            let mut acc_words = acc.chunks_exact_mut(WORD);
            for a in &mut acc_words {
                store(a, mul2_word(load(a)));
            }
            for a in acc_words.into_remainder() {
                *a = gf::mul2(*a);
            }
        }
    }
}

/// `dst = ` XOR of all `sources` (zeros when there are none).
pub(crate) fn xor_all<'a>(dst: &mut [u8], sources: impl IntoIterator<Item = &'a [u8]>) {
    let mut sources = sources.into_iter();
    match sources.next() {
        Some(first) => dst.copy_from_slice(first),
        None => dst.fill(0),
    }
    for src in sources {
        xor(dst, src);
    }
}

/// `dst = ` sum over slots i of g^i * slots[i], where `None` is a hole (a block of zeros).
///
/// Horner's rule from the highest slot down, as md does: each step doubles what has been
/// accumulated so far, so slot i ends up multiplied by {02} exactly i times.
pub(crate) fn syndrome<'a, I>(dst: &mut [u8], slots: I)
where
    I: IntoIterator<Item = Option<&'a [u8]>>,
    I::IntoIter: DoubleEndedIterator,
{
    let mut highest_first = slots.into_iter().rev();
    match highest_first.next() {
        Some(Some(top)) => dst.copy_from_slice(top),
        Some(None) | None => dst.fill(0),
    }
    for slot in highest_first {
        mul2_then_xor(dst, slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_doubling_matches_byte_doubling() {
        let bytes: Vec<u8> = (0..=255).collect();
        for word in bytes.chunks_exact(WORD) {
            let doubled = mul2_word(load(word)).to_ne_bytes();
            for (d, &b) in doubled.iter().zip(word) {
                assert_eq!(*d, gf::mul2(b));
            }
        }
    }
}
