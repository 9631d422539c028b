//! Every parity kernel this CPU runs must produce exactly the scalar reference's bytes (the
//! reference itself is checked against the definitions in `properties.rs` and against md in
//! `kernel_fixtures.rs`).
//!
//! The vector kernels have separate code for whole groups of vectors, single vectors and the
//! bytes after them, and must not care about alignment, so the stripes here have every length
//! up to a few KiB and blocks starting at arbitrary offsets. The kernels are called directly
//! rather than through `URAID_PARITY_KERNEL`, whose choice is fixed once per process.

use proptest::prelude::*;
use uraid_parity::Kernel;

/// The kernels checked against [`Kernel::Scalar`]; scalar is included so the harness itself is
/// exercised on machines without vector kernels.
fn kernels() -> Vec<Kernel> {
    Kernel::available_kernels()
}

fn fill(seed: u64, len: usize) -> Vec<u8> {
    uraid_testkit::noise(seed, len)
}

/// Blocks of one length, each starting `offset` bytes into its own allocation so that the
/// kernels see every alignment.
#[derive(Clone)]
struct Blocks {
    storage: Vec<Vec<u8>>,
    offsets: Vec<usize>,
    len: usize,
}

impl std::fmt::Debug for Blocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} blocks of {} bytes at offsets {:?}", self.storage.len(), self.len, self.offsets)
    }
}

impl Blocks {
    fn new(count: usize, len: usize, seed: u64) -> Self {
        let offsets: Vec<usize> = (0..count).map(|i| fill(seed ^ 0x0ff5e7 ^ i as u64, 1)[0] as usize % 64).collect();
        let storage = offsets
            .iter()
            .enumerate()
            .map(|(i, &offset)| {
                fill(seed.wrapping_add((i as u64).wrapping_mul(0x1234_5678_9abc_def1)), offset + len + 7)
            })
            .collect();
        Blocks { storage, offsets, len }
    }

    fn get(&self, i: usize) -> &[u8] {
        &self.storage[i][self.offsets[i]..self.offsets[i] + self.len]
    }

    fn refs(&self) -> Vec<&[u8]> {
        (0..self.storage.len()).map(|i| self.get(i)).collect()
    }

    fn muts(&mut self) -> Vec<&mut [u8]> {
        let len = self.len;
        self.storage.iter_mut().zip(&self.offsets).map(|(s, &o)| &mut s[o..o + len]).collect()
    }

    /// The bytes around each block, which no kernel may touch.
    fn margins(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.storage.iter().zip(&self.offsets).map(|(s, &o)| (s[..o].to_vec(), s[o + self.len..].to_vec())).collect()
    }
}

/// Data blocks for `count` members, with P and Q of them appended (by the scalar reference).
fn stripe(count: usize, len: usize, seed: u64) -> Blocks {
    let mut blocks = Blocks::new(count + 2, len, seed);
    let data: Vec<Vec<u8>> = (0..count).map(|i| blocks.get(i).to_vec()).collect();
    let data: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let mut all = blocks.muts();
    let (_, parity) = all.split_at_mut(count);
    let (p, q) = parity.split_at_mut(1);
    Kernel::Scalar.gen_pq(p[0], q[0], &data);
    blocks
}

/// Member counts 1..=16 mostly, and now and then a wide array up to md's limit.
fn member_count() -> impl Strategy<Value = usize> {
    prop_oneof![8 => 1usize..=16, 1 => Just(64usize), 1 => Just(253usize)]
}

/// Lengths around multiples of the vector sizes are where the tails go wrong, so half of the
/// lengths are within a few bytes of one.
fn length() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..=5000, (0usize..=40, 0usize..=6).prop_map(|(k, d)| (k * 128 + d).saturating_sub(3)),]
}

/// The indices lost in one RAID-6 recovery of `n` data blocks, of the kind `kind` (0 one data,
/// 1 two data, 2 data + P, 3 data + Q, 4 P, 5 Q, 6 P + Q), chosen by `pick`.
fn lost(kind: usize, n: usize, pick: usize) -> Option<Vec<usize>> {
    let (p, q) = (n, n + 1);
    let x = pick % n;
    Some(match kind {
        0 => vec![x],
        1 if n >= 2 => {
            let y = (x + 1 + (pick / n) % (n - 1)) % n;
            vec![x, y]
        }
        1 => return None,
        2 => vec![p, x],
        3 => vec![x, q],
        4 => vec![p],
        5 => vec![q],
        _ => vec![q, p],
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn gen_p_and_gen_pq_match_scalar(n in member_count(), len in length(), seed in any::<u64>()) {
        let data = Blocks::new(n, len, seed);
        let data = data.refs();
        let mut want_p = vec![0u8; len];
        let mut want_q = vec![0u8; len];
        Kernel::Scalar.gen_pq(&mut want_p, &mut want_q, &data);
        for kernel in kernels() {
            let mut out = Blocks::new(2, len, seed ^ 1);
            let margins = out.margins();
            {
                let mut pq = out.muts();
                let (p, q) = pq.split_at_mut(1);
                kernel.gen_p(p[0], &data);
                prop_assert!(*p[0] == want_p[..], "{kernel}: gen_p, {n} x {len}");
                p[0].fill(0xa5);
                kernel.gen_pq(p[0], q[0], &data);
                prop_assert!(*p[0] == want_p[..], "{kernel}: gen_pq P, {n} x {len}");
                prop_assert!(*q[0] == want_q[..], "{kernel}: gen_pq Q, {n} x {len}");
            }
            prop_assert!(out.margins() == margins, "{kernel}: wrote outside the blocks");
        }
    }

    #[test]
    fn xor_into_matches_scalar(len in length(), seed in any::<u64>()) {
        let blocks = Blocks::new(2, len, seed);
        let mut want = blocks.get(0).to_vec();
        Kernel::Scalar.xor_into(&mut want, blocks.get(1));
        for kernel in kernels() {
            let mut got = blocks.clone();
            let margins = got.margins();
            {
                let mut b = got.muts();
                let (dst, src) = b.split_at_mut(1);
                kernel.xor_into(dst[0], src[0]);
            }
            prop_assert!(got.get(0) == want, "{kernel}: xor_into, {len} bytes");
            prop_assert!(got.margins() == margins, "{kernel}: wrote outside the blocks");
        }
    }

    #[test]
    fn raid6_recovery_of_every_kind_matches_original(
        n in member_count(),
        len in length(),
        seed in any::<u64>(),
        picks in proptest::array::uniform7(any::<usize>()),
    ) {
        let original = stripe(n, len, seed);
        for kernel in kernels() {
            for (kind, &pick) in picks.iter().enumerate() {
                let Some(missing) = lost(kind, n, pick) else { continue };
                let mut work = original.clone();
                let mut blocks = work.muts();
                for &m in &missing {
                    blocks[m].copy_from_slice(&fill(pick as u64 ^ m as u64, len));
                }
                kernel.raid6_recover(&mut blocks, &missing);
                for i in 0..n + 2 {
                    prop_assert!(
                        work.storage[i] == original.storage[i],
                        "{kernel}: block {i} (or its margins) wrong after losing {missing:?} \
                         of {n} + 2, {len} bytes"
                    );
                }
            }
        }
    }

    #[test]
    fn raid5_recovery_matches_original(
        n in member_count(),
        len in length(),
        seed in any::<u64>(),
        pick in any::<usize>(),
    ) {
        let original = stripe(n, len, seed);
        // Data and P only: a RAID-5 stripe.
        let mut raid5 = original.clone();
        raid5.storage.pop();
        raid5.offsets.pop();
        let missing = pick % (n + 1);
        for kernel in kernels() {
            let mut work = raid5.clone();
            let end = work.offsets[missing] + len;
            work.storage[missing][work.offsets[missing]..end].fill(0xee);
            kernel.raid5_recover(&mut work.muts(), missing);
            prop_assert!(
                work.storage == raid5.storage,
                "{kernel}: losing {missing} of {n} + 1, {len} bytes"
            );
        }
    }

    #[test]
    fn update_pq_matches_scalar_for_every_slot(
        n in member_count(),
        len in length(),
        seed in any::<u64>(),
    ) {
        let start = stripe(n, len.min(700), seed);
        let len = start.len;
        let new = fill(seed ^ 0x5eed, len);
        let slots: Vec<usize> = if n <= 16 { (0..n).collect() } else { vec![0, 1, n / 2, n - 1] };
        for slot in slots {
            let old = start.get(slot);
            let mut want_p = start.get(n).to_vec();
            let mut want_q = start.get(n + 1).to_vec();
            Kernel::Scalar.update_pq(&mut want_p, Some(&mut want_q), slot, old, &new);
            let mut want_p_only = start.get(n).to_vec();
            Kernel::Scalar.update_pq(&mut want_p_only, None, slot, old, &new);
            for kernel in kernels() {
                let mut p = start.get(n).to_vec();
                let mut q = start.get(n + 1).to_vec();
                kernel.update_pq(&mut p, Some(&mut q), slot, old, &new);
                prop_assert!(
                    p == want_p && q == want_q,
                    "{kernel}: slot {slot} of {n}, {len} bytes"
                );
                let mut p = start.get(n).to_vec();
                kernel.update_pq(&mut p, None, slot, old, &new);
                prop_assert!(p == want_p_only, "{kernel}: P only, slot {slot} of {n}, {len} bytes");
            }
        }
    }
}

/// Every pair of lost blocks at a few widths, with lengths that leave a tail after the whole
/// vectors.
#[test]
fn every_pair_is_recovered_by_every_kernel() {
    for n in [1usize, 2, 3, 4, 6, 13] {
        for len in [1usize, 63, 64 * 5 + 33] {
            let original = stripe(n, len, (n * 1000 + len) as u64);
            for kernel in kernels() {
                for a in 0..n + 2 {
                    for b in a..n + 2 {
                        let missing = if a == b { vec![a] } else { vec![a, b] };
                        let mut work = original.clone();
                        let mut blocks = work.muts();
                        for &m in &missing {
                            blocks[m].fill(0x77);
                        }
                        kernel.raid6_recover(&mut blocks, &missing);
                        assert!(
                            work.storage == original.storage,
                            "{kernel}: losing {missing:?} of {n} + 2, {len} bytes"
                        );
                    }
                }
            }
        }
    }
}

/// Blocks of 512 KiB and more are written with non-temporal stores (where aligned), a path the
/// property tests' short blocks never reach: check it, with blocks at differing alignments.
#[test]
fn large_blocks_take_the_streaming_path_exactly() {
    let (n, len) = (5usize, (1 << 20) + 77);
    let original = stripe(n, len, 0x1a29e);
    let data = original.refs()[..n].to_vec();
    for kernel in kernels() {
        let mut p = vec![0u8; len];
        let mut q = vec![0u8; len];
        kernel.gen_p(&mut p, &data);
        assert!(p == original.get(n), "{kernel}: gen_p");
        p.fill(0);
        kernel.gen_pq(&mut p, &mut q, &data);
        assert!(p == original.get(n) && q == original.get(n + 1), "{kernel}: gen_pq");
        for missing in [vec![1], vec![n], vec![0, 3], vec![2, n], vec![4, n + 1], vec![n, n + 1]] {
            let mut work = original.clone();
            let mut blocks = work.muts();
            for &m in &missing {
                blocks[m].fill(0x3c);
            }
            kernel.raid6_recover(&mut blocks, &missing);
            assert!(work.storage == original.storage, "{kernel}: losing {missing:?}");
        }
    }
}

/// The recovery tests would pass vacuously if a kernel left the lost blocks alone and the test
/// compared them with themselves; make sure a wrong byte is seen.
#[test]
fn a_wrong_byte_is_detected() {
    let original = stripe(4, 300, 9);
    let mut work = original.clone();
    let mut blocks = work.muts();
    blocks[1][299] ^= 1;
    assert!(work.storage != original.storage);
}

#[test]
fn a_kernel_the_cpu_lacks_is_refused() {
    for kernel in Kernel::ALL.into_iter().filter(|k| !k.available()) {
        let result = std::panic::catch_unwind(|| kernel.gen_p(&mut [0u8; 4], &[&[1u8; 4]]));
        assert!(result.is_err() || !cfg!(target_arch = "x86_64"), "{kernel} ran without its CPU features");
    }
}

#[test]
fn reports_the_kernels_it_checked() {
    let names: Vec<&str> = kernels().iter().map(|k| k.name()).collect();
    eprintln!("parity kernels checked against scalar: {}", names.join(", "));
    assert!(names.contains(&"scalar"));
}
