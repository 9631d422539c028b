//! Which instruction set computes parity: runtime CPU detection and per-kernel entry points.
//!
//! [`Kernel::active`] is the kernel the crate's plain functions ([`crate::xor_into`],
//! [`crate::gen_p`], [`crate::gen_pq`], [`crate::update_pq`], [`crate::raid5_recover`],
//! [`crate::raid6_recover`]) use: the best one this
//! CPU has, unless `URAID_PARITY_KERNEL` names another (for benchmarks and for testing the
//! fallbacks). Every kernel produces exactly the bytes of the scalar reference.

use std::sync::OnceLock;

/// A parity implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Portable 64-bit words: the reference every other kernel is tested against.
    Scalar,
    /// 256-bit AVX2.
    Avx2,
    /// 512-bit AVX-512 (F + BW).
    Avx512,
    /// AVX-512 with GFNI's affine transform as the GF(2^8) multiply for Q and recovery.
    Gfni,
}

impl Kernel {
    /// Every kernel, slowest first.
    pub const ALL: [Kernel; 4] = [Kernel::Scalar, Kernel::Avx2, Kernel::Avx512, Kernel::Gfni];

    /// The name used in `URAID_PARITY_KERNEL`, benchmark output and messages.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512 => "avx512",
            Kernel::Gfni => "gfni",
        }
    }

    /// The kernel called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether this CPU can run the kernel.
    pub fn available(self) -> bool {
        match self {
            Kernel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bw")
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Gfni => Kernel::Avx512.available() && std::arch::is_x86_feature_detected!("gfni"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The kernels this CPU can run, slowest first.
    pub fn available_kernels() -> Vec<Kernel> {
        Kernel::ALL.into_iter().filter(|k| k.available()).collect()
    }

    /// The best kernel this CPU can run.
    pub fn best() -> Kernel {
        Kernel::ALL.into_iter().rev().find(|k| k.available()).unwrap_or(Kernel::Scalar)
    }

    /// The kernel in use: `URAID_PARITY_KERNEL` if set (an unknown or unavailable name is
    /// refused with a message naming the choices, rather than silently ignored), else [`best`].
    ///
    /// [`best`]: Kernel::best
    pub fn active() -> Kernel {
        static ACTIVE: OnceLock<Kernel> = OnceLock::new();
        *ACTIVE.get_or_init(|| match std::env::var("URAID_PARITY_KERNEL") {
            Ok(name) => match Kernel::from_name(&name) {
                Some(k) if k.available() => k,
                _ => {
                    let names: Vec<&str> = Kernel::available_kernels().iter().map(|k| k.name()).collect();
                    panic!(
                        "URAID_PARITY_KERNEL={name}: not a kernel this CPU runs (choose one of {})",
                        names.join(", ")
                    )
                }
            },
            Err(_) => Kernel::best(),
        })
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The operations, run by a chosen kernel. Lengths are checked as in the crate's plain
/// functions (which call these with [`Kernel::active`]). Calling a vector kernel this CPU cannot
/// run ([`Kernel::available`] is false) panics rather than executing unknown instructions; on
/// other architectures every kernel runs the scalar reference.
impl Kernel {
    /// `dst ^= src`.
    pub fn xor_into(self, dst: &mut [u8], src: &[u8]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(ops) = crate::simd::ops(self) {
            return crate::simd::xor_into(ops, dst, src);
        }
        crate::raid5::xor_into_scalar(dst, src)
    }

    /// `p` = XOR of `data`.
    pub fn gen_p(self, p: &mut [u8], data: &[&[u8]]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(ops) = crate::simd::ops(self) {
            return crate::simd::gen_p(ops, p, data);
        }
        crate::raid5::gen_p_scalar(p, data)
    }

    /// `p` and `q` of `data` (md's RAID-6 syndromes).
    pub fn gen_pq(self, p: &mut [u8], q: &mut [u8], data: &[&[u8]]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(ops) = crate::simd::ops(self) {
            return crate::simd::gen_pq(ops, p, q, data);
        }
        crate::raid6::gen_pq_scalar(p, q, data)
    }

    /// Read-modify-write update of P (and Q if given) after data slot `slot` changed from `old`
    /// to `new`; see [`crate::update_pq`].
    pub fn update_pq(self, p: &mut [u8], q: Option<&mut [u8]>, slot: usize, old: &[u8], new: &[u8]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(ops) = crate::simd::ops(self) {
            return crate::simd::update_pq(ops, p, q, slot, old, new);
        }
        crate::raid6::update_pq_scalar(p, q, slot, old, new)
    }

    /// Rebuild `blocks[missing]` as the XOR of the others.
    pub fn raid5_recover(self, blocks: &mut [&mut [u8]], missing: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(ops) = crate::simd::ops(self) {
            return crate::simd::raid5_recover(ops, blocks, missing);
        }
        crate::raid5::raid5_recover_scalar(blocks, missing)
    }

    /// Rebuild one or two blocks of a RAID-6 stripe (data in syndrome order, then P, then Q).
    pub fn raid6_recover(self, blocks: &mut [&mut [u8]], missing: &[usize]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(ops) = crate::simd::ops(self) {
            return crate::simd::raid6_recover(ops, blocks, missing);
        }
        crate::raid6::raid6_recover_scalar(blocks, missing)
    }
}
