//! 256-bit AVX2 vectors.

use std::arch::x86_64::*;

use super::{nibble_tables, Vector};

#[derive(Clone, Copy)]
pub(crate) struct Avx2(__m256i);

impl Vector for Avx2 {
    const BYTES: usize = 32;
    /// The low- and high-nibble lookup tables, each in both 128-bit lanes (PSHUFB looks up
    /// within a lane).
    type Multiplier = (__m256i, __m256i);

    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx2(_mm256_setzero_si256())
    }

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Avx2(_mm256_loadu_si256(src.cast()))
    }

    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        _mm256_storeu_si256(dst.cast(), self.0)
    }

    #[inline(always)]
    unsafe fn store_stream(self, dst: *mut u8) {
        if dst as usize & (Self::BYTES - 1) == 0 {
            _mm256_stream_si256(dst.cast(), self.0)
        } else {
            self.store(dst)
        }
    }

    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Avx2(_mm256_xor_si256(self.0, other.0))
    }

    /// Bytes with the top bit set compare below zero, giving an all-ones mask exactly where the
    /// doubled byte must be reduced by 0x1d.
    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        let overflow = _mm256_cmpgt_epi8(_mm256_setzero_si256(), self.0);
        let doubled = _mm256_add_epi8(self.0, self.0);
        let reduction = _mm256_and_si256(overflow, _mm256_set1_epi8(crate::gf::REDUCTION as i8));
        Avx2(_mm256_xor_si256(doubled, reduction))
    }

    #[inline(always)]
    unsafe fn multiplier(c: u8) -> Self::Multiplier {
        let (low, high) = nibble_tables(c);
        (
            _mm256_broadcastsi128_si256(_mm_loadu_si128(low.as_ptr().cast())),
            _mm256_broadcastsi128_si256(_mm_loadu_si128(high.as_ptr().cast())),
        )
    }

    #[inline(always)]
    unsafe fn mul(self, m: &Self::Multiplier) -> Self {
        let nibble = _mm256_set1_epi8(0x0f);
        let low = _mm256_and_si256(self.0, nibble);
        // No byte shift exists; shifting 16-bit lanes moves bits across bytes, which the mask
        // then discards.
        let high = _mm256_and_si256(_mm256_srli_epi16(self.0, 4), nibble);
        Avx2(_mm256_xor_si256(_mm256_shuffle_epi8(m.0, low), _mm256_shuffle_epi8(m.1, high)))
    }
}
