//! Parity math for RAID-4/5/6, byte-compatible with Linux md.
//!
//! Everything here is pure computation on caller-supplied buffers: no I/O, no allocation of data
//! buffers, no knowledge of layouts. The caller decides which member holds which block and hands
//! the blocks over in the order documented on each function.
//!
//! - [`gf`]: the GF(2^8) field md's RAID-6 uses (polynomial 0x11d, generator {02}).
//! - RAID-4/5 (XOR parity): [`xor_into`], [`gen_p`], [`raid5_recover`], [`p_matches`].
//! - RAID-6 (P and Q syndromes): [`gen_pq`], [`update_pq`], [`raid6_recover`], [`pq_matches`].
//!
//! Within one call every block has the same length, which may be any number of bytes; a
//! mismatch is a caller bug and panics with a message naming the offending block.
//!
//! # Kernels
//!
//! The work is done by one of several [`Kernel`]s, all producing identical bytes:
//!
//! - `scalar`: portable 64-bit words and table lookups. It is the readable reference that the
//!   others are tested against, so it favours clarity over speed.
//! - `avx2`, `avx512`, `gfni` (x86-64 only): vector kernels that make a single pass over the
//!   blocks, reading each source once and keeping P and Q in registers. Q is accumulated by
//!   Horner's rule with a vector doubling; recovery multiplies by constants with PSHUFB nibble
//!   tables (`avx2`, `avx512`) or with one GF2P8AFFINEQB per vector (`gfni`; GFNI's own multiply
//!   uses the AES polynomial, not md's, so the affine form is used with md's field as a bit
//!   matrix).
//!
//! The plain functions above run [`Kernel::active`]: the best kernel the CPU supports, found at
//! run time on first use, or the one named by the `URAID_PARITY_KERNEL` environment variable.
//! A specific kernel can be called through [`Kernel`]'s methods, as the tests and benchmarks do.
//! The checks ([`p_matches`], [`pq_matches`]) always use the scalar code on small pieces.

pub mod gf;
mod kernel;
mod raid5;
mod raid6;
#[cfg(target_arch = "x86_64")]
mod simd;
mod words;

pub use kernel::Kernel;
pub use raid5::{gen_p, p_matches, raid5_recover, xor_into};
pub use raid6::{gen_pq, pq_matches, raid6_recover, update_pq};

/// Panics unless `got == expected`, naming the block so a caller can find its mistake.
#[track_caller]
pub(crate) fn assert_block_len(function: &str, what: &str, index: usize, got: usize, expected: usize) {
    assert!(
        got == expected,
        "{function}: {what} {index} is {got} bytes but the first block is {expected}; \
         all blocks of one call must have the same length"
    );
}
