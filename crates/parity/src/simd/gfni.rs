//! 512-bit AVX-512 vectors multiplying with GFNI's affine transform.

use std::arch::x86_64::*;

use super::avx512::Avx512;
use super::{affine_matrix, Vector};

/// An AVX-512 register: loads, stores and XOR are AVX-512's; only the multiplies differ.
#[derive(Clone, Copy)]
pub(crate) struct Gfni(Avx512);

impl Vector for Gfni {
    const BYTES: usize = 64;
    /// The multiply's bit matrix in every 64-bit lane.
    type Multiplier = __m512i;

    #[inline(always)]
    unsafe fn zero() -> Self {
        Gfni(Avx512::zero())
    }

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Gfni(Avx512::load(src))
    }

    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        self.0.store(dst)
    }

    #[inline(always)]
    unsafe fn store_stream(self, dst: *mut u8) {
        self.0.store_stream(dst)
    }

    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Gfni(self.0.xor(other.0))
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
        Gfni(Avx512(_mm512_gf2p8affine_epi64_epi8::<0>(self.0 .0, *m)))
    }
}

/// `affine_matrix(2)`, spelled out so the doubling in the Q loop needs no computation.
pub(super) const TIMES_2: u64 = 0x8001_8284_8810_2040;
