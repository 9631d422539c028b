//! 512-bit AVX-512 vectors multiplying with GFNI's affine transform.

use std::arch::x86_64::*;

use super::{affine_matrix, Vector};

#[derive(Clone, Copy)]
pub(crate) struct Gfni(__m512i);

impl Vector for Gfni {
    const BYTES: usize = 64;
    /// The multiply's bit matrix in every 64-bit lane.
    type Multiplier = __m512i;

    #[inline(always)]
    unsafe fn zero() -> Self {
        Gfni(_mm512_setzero_si512())
    }

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Gfni(_mm512_loadu_si512(src.cast()))
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
        Gfni(_mm512_xor_si512(self.0, other.0))
    }

    /// One affine transform by the matrix of {02}.
    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        self.mul(&_mm512_set1_epi64(TIMES_2 as i64))
    }

    #[inline(always)]
    unsafe fn multiplier(c: u8) -> Self::Multiplier {
        _mm512_set1_epi64(affine_matrix(c) as i64)
    }

    #[inline(always)]
    unsafe fn mul(self, m: &Self::Multiplier) -> Self {
        Gfni(_mm512_gf2p8affine_epi64_epi8::<0>(self.0, *m))
    }
}

/// `affine_matrix(2)`, spelled out so the doubling in the Q loop needs no computation.
pub(super) const TIMES_2: u64 = 0x8001_8284_8810_2040;
