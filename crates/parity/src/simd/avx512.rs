//! 512-bit AVX-512 (F + BW) vectors.

use std::arch::x86_64::*;

use super::{nibble_tables, Vector};

#[derive(Clone, Copy)]
pub(crate) struct Avx512(pub(super) __m512i);

/// VPTERNLOG's truth table for a ^ b ^ c.
pub(super) const XOR3: i32 = 0x96;

impl Vector for Avx512 {
    const BYTES: usize = 64;
    /// The low- and high-nibble lookup tables, each in all four 128-bit lanes.
    type Multiplier = (__m512i, __m512i);

    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx512(_mm512_setzero_si512())
    }

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Avx512(_mm512_loadu_si512(src.cast()))
    }

    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        _mm512_storeu_si512(dst.cast(), self.0)
    }

    #[inline(always)]
    unsafe fn store_stream(self, dst: *mut u8) {
        if dst as usize & (Self::BYTES - 1) == 0 {
            _mm512_stream_si512(dst.cast(), self.0)
        } else {
            self.store(dst)
        }
    }

    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Avx512(_mm512_xor_si512(self.0, other.0))
    }

    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        let (doubled, reduction) = self.doubled_and_reduction();
        Avx512(_mm512_xor_si512(doubled, reduction))
    }

    #[inline(always)]
    unsafe fn mul2_xor(self, add: Self) -> Self {
        let (doubled, reduction) = self.doubled_and_reduction();
        Avx512(_mm512_ternarylogic_epi64::<XOR3>(doubled, reduction, add.0))
    }

    #[inline(always)]
    unsafe fn multiplier(c: u8) -> Self::Multiplier {
        let (low, high) = nibble_tables(c);
        (
            _mm512_broadcast_i32x4(_mm_loadu_si128(low.as_ptr().cast())),
            _mm512_broadcast_i32x4(_mm_loadu_si128(high.as_ptr().cast())),
        )
    }

    #[inline(always)]
    unsafe fn mul(self, m: &Self::Multiplier) -> Self {
        let nibble = _mm512_set1_epi8(0x0f);
        let low = _mm512_and_si512(self.0, nibble);
        let high = _mm512_and_si512(_mm512_srli_epi16::<4>(self.0), nibble);
        Avx512(_mm512_xor_si512(_mm512_shuffle_epi8(m.0, low), _mm512_shuffle_epi8(m.1, high)))
    }
}

impl Avx512 {
    /// Every byte shifted left by one, and 0x1d in the bytes whose top bit fell off (the mask
    /// register holds exactly those top bits).
    #[inline(always)]
    unsafe fn doubled_and_reduction(self) -> (__m512i, __m512i) {
        let overflow = _mm512_movepi8_mask(self.0);
        let doubled = _mm512_add_epi8(self.0, self.0);
        let reduction = _mm512_maskz_mov_epi8(overflow, _mm512_set1_epi8(crate::gf::REDUCTION as i8));
        (doubled, reduction)
    }
}
