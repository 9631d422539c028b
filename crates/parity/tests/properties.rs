//! Property tests of the public parity API against naive, table-free references.

use proptest::prelude::*;
use uraid_parity::{gen_p, gen_pq, gf, p_matches, pq_matches, raid5_recover, raid6_recover, update_pq, xor_into};

/// Bit-by-bit multiply in GF(2^8) mod 0x11d, sharing nothing with the crate's tables.
fn naive_mul(mut a: u8, mut b: u8) -> u8 {
    let mut product = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            product ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= 0x1d;
        }
        b >>= 1;
    }
    product
}

fn naive_pow2(power: usize) -> u8 {
    (0..power).fold(1u8, |acc, _| naive_mul(acc, 2))
}

/// P and Q straight from the definition, one byte and one slot at a time.
fn naive_pq(data: &[Vec<u8>], len: usize) -> (Vec<u8>, Vec<u8>) {
    let mut p = vec![0u8; len];
    let mut q = vec![0u8; len];
    for (slot, block) in data.iter().enumerate() {
        let coefficient = naive_pow2(slot);
        for i in 0..len {
            p[i] ^= block[i];
            q[i] ^= naive_mul(coefficient, block[i]);
        }
    }
    (p, q)
}

/// A small deterministic generator so a stripe of up to 64 KiB costs one proptest value (a
/// seed) instead of one per byte.
fn fill(seed: u64, len: usize) -> Vec<u8> {
    uraid_testkit::noise(seed, len)
}

#[derive(Debug, Clone)]
struct Stripe {
    data: Vec<Vec<u8>>,
    len: usize,
}

impl Stripe {
    fn refs(&self) -> Vec<&[u8]> {
        self.data.iter().map(Vec::as_slice).collect()
    }

    fn with_pq(&self) -> Vec<Vec<u8>> {
        let (p, q) = naive_pq(&self.data, self.len);
        let mut all = self.data.clone();
        all.push(p);
        all.push(q);
        all
    }
}

/// 3..=16 data blocks of 1..=4096 bytes; each block is a hole (all zeros) with probability 1/4
/// (two bits of `holes` per block).
fn stripe() -> impl Strategy<Value = Stripe> {
    (3usize..=16, 1usize..=4096, any::<u64>(), any::<u32>()).prop_map(|(n, len, seed, holes)| {
        let data = (0..n)
            .map(|i| {
                if (holes >> (2 * i)) & 3 == 3 {
                    vec![0u8; len]
                } else {
                    fill(seed ^ (i as u64).wrapping_mul(0x1234_5678_9abc_def1), len)
                }
            })
            .collect();
        Stripe { data, len }
    })
}

/// Wipes the lost blocks with garbage, recovers them, and checks the whole stripe came back.
fn check_raid6_recovery(full: &[Vec<u8>], missing: &[usize]) {
    let mut work = full.to_vec();
    for (k, &m) in missing.iter().enumerate() {
        work[m] = fill(0xdead_beef + k as u64, work[m].len());
    }
    let mut blocks: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
    raid6_recover(&mut blocks, missing);
    for (i, (got, want)) in work.iter().zip(full).enumerate() {
        assert!(got == want, "block {i} wrong after recovering {missing:?} (n = {})", full.len() - 2);
    }
}

proptest! {
    #[test]
    fn gen_pq_agrees_with_naive_definition(stripe in stripe()) {
        let mut p = vec![0xaa; stripe.len];
        let mut q = vec![0x55; stripe.len];
        gen_pq(&mut p, &mut q, &stripe.refs());
        let (want_p, want_q) = naive_pq(&stripe.data, stripe.len);
        prop_assert_eq!(&p, &want_p);
        prop_assert_eq!(&q, &want_q);

        let mut p_only = vec![0x77; stripe.len];
        gen_p(&mut p_only, &stripe.refs());
        prop_assert_eq!(&p_only, &want_p);
    }

    #[test]
    fn raid6_recovers_every_kind_of_loss(
        stripe in stripe(),
        pick_a in any::<usize>(),
        pick_b in any::<usize>(),
    ) {
        let n = stripe.data.len();
        let full = stripe.with_pq();
        let (p, q) = (n, n + 1);
        let x = pick_a % n;
        let y = (x + 1 + pick_b % (n - 1)) % n;
        for missing in [
            vec![x],
            vec![p],
            vec![q],
            vec![x, y],
            vec![y, x],
            vec![x, p],
            vec![q, x],
            vec![p, q],
        ] {
            check_raid6_recovery(&full, &missing);
        }
    }

    #[test]
    fn raid5_recovers_any_one_block(stripe in stripe(), pick in any::<usize>()) {
        let (p, _) = naive_pq(&stripe.data, stripe.len);
        let mut full = stripe.data.clone();
        full.push(p);
        let missing = pick % full.len();
        let mut work = full.clone();
        work[missing] = fill(7, stripe.len);
        let mut blocks: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
        raid5_recover(&mut blocks, missing);
        prop_assert_eq!(work, full);
    }

    #[test]
    fn update_pq_equals_regenerating(stripe in stripe(), pick in any::<usize>(), seed in any::<u64>()) {
        let n = stripe.data.len();
        let slot = pick % n;
        let old_pq = stripe.with_pq();
        let mut p = old_pq[n].clone();
        let mut q = old_pq[n + 1].clone();
        let mut p5 = p.clone();

        let new_block = fill(seed, stripe.len);
        update_pq(&mut p, Some(&mut q), slot, &stripe.data[slot], &new_block);
        update_pq(&mut p5, None, slot, &stripe.data[slot], &new_block);

        let mut changed = stripe.clone();
        changed.data[slot] = new_block;
        let (want_p, want_q) = naive_pq(&changed.data, stripe.len);
        prop_assert_eq!(&p, &want_p);
        prop_assert_eq!(&q, &want_q);
        prop_assert_eq!(&p5, &want_p);
    }

    #[test]
    fn scrub_checks_accept_good_parity_and_reject_any_flipped_byte(
        stripe in stripe(),
        pick in any::<usize>(),
        bit in 0u8..8,
    ) {
        let n = stripe.data.len();
        let full = stripe.with_pq();
        let refs = stripe.refs();
        prop_assert!(p_matches(&full[n], &refs));
        prop_assert!(pq_matches(&full[n], &full[n + 1], &refs));

        let offset = pick % stripe.len;
        let mut bad_p = full[n].clone();
        bad_p[offset] ^= 1 << bit;
        prop_assert!(!p_matches(&bad_p, &refs));
        prop_assert!(!pq_matches(&bad_p, &full[n + 1], &refs));

        let mut bad_q = full[n + 1].clone();
        bad_q[offset] ^= 1 << bit;
        prop_assert!(!pq_matches(&full[n], &bad_q, &refs));

        let mut bad_data = stripe.data.clone();
        bad_data[pick % n][offset] ^= 1 << bit;
        let bad_refs: Vec<&[u8]> = bad_data.iter().map(Vec::as_slice).collect();
        prop_assert!(!p_matches(&full[n], &bad_refs));
        prop_assert!(!pq_matches(&full[n], &full[n + 1], &bad_refs));
    }
}

/// Every single and double loss for every stripe width from 1 to 16 data blocks, at lengths
/// around the 8-byte word size and the scrub piece size.
#[test]
fn raid6_recovers_every_pair_at_every_width() {
    for n in 1..=16 {
        for len in [1, 7, 8, 9, 63, 4097] {
            let data: Vec<Vec<u8>> = (0..n).map(|i| fill((n * 100 + i) as u64, len)).collect();
            let full = Stripe { data, len }.with_pq();
            for a in 0..n + 2 {
                check_raid6_recovery(&full, &[a]);
                for b in a + 1..n + 2 {
                    check_raid6_recovery(&full, &[a, b]);
                }
            }
        }
    }
}

/// A stripe of holes only: P and Q are zero, and recovery of two holes gives zeros.
#[test]
fn all_hole_stripe_has_zero_parity() {
    let data = vec![vec![0u8; 100]; 5];
    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let mut p = vec![1u8; 100];
    let mut q = vec![2u8; 100];
    gen_pq(&mut p, &mut q, &refs);
    assert!(p.iter().chain(&q).all(|&b| b == 0));
    check_raid6_recovery(&Stripe { data, len: 100 }.with_pq(), &[1, 3]);
}

/// Q is linear in each slot with coefficient g^slot: a single non-zero byte in slot i shows up
/// in Q multiplied by exactly g^i.
#[test]
fn q_weights_each_slot_by_its_generator_power() {
    for n in 1..=20 {
        for slot in 0..n {
            let mut data = vec![vec![0u8; 3]; n];
            data[slot][1] = 1;
            let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            let (mut p, mut q) = (vec![0; 3], vec![0; 3]);
            gen_pq(&mut p, &mut q, &refs);
            assert_eq!(p, [0, 1, 0]);
            assert_eq!(q, [0, gf::exp(slot), 0]);
        }
    }
}

#[test]
fn empty_data_gives_zero_parity_and_empty_blocks_are_fine() {
    let mut p = vec![9u8; 10];
    let mut q = vec![9u8; 10];
    gen_pq(&mut p, &mut q, &[]);
    assert_eq!((p.as_slice(), q.as_slice()), (&[0u8; 10][..], &[0u8; 10][..]));

    let empty: [&[u8]; 3] = [&[], &[], &[]];
    gen_pq(&mut [], &mut [], &empty);
    assert!(pq_matches(&[], &[], &empty));
}

#[test]
fn xor_into_and_mul_acc_handle_every_tail_length() {
    for len in 0..=40 {
        let a = fill(1, len);
        let b = fill(2, len);
        let mut x = a.clone();
        xor_into(&mut x, &b);
        let mut m = a.clone();
        gf::mul_acc(&mut m, &b, 0x53);
        for i in 0..len {
            assert_eq!(x[i], a[i] ^ b[i]);
            assert_eq!(m[i], a[i] ^ naive_mul(0x53, b[i]));
        }
    }
}

#[test]
#[should_panic(expected = "all blocks of one call must have the same length")]
fn unequal_lengths_are_rejected() {
    let short = [0u8; 3];
    let long = [0u8; 4];
    let mut p = [0u8; 4];
    let mut q = [0u8; 4];
    gen_pq(&mut p, &mut q, &[&long, &short]);
}

#[test]
#[should_panic(expected = "must be distinct")]
fn repeated_missing_index_is_rejected() {
    let mut blocks = [[0u8; 4]; 5];
    let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(|b| b.as_mut_slice()).collect();
    raid6_recover(&mut refs, &[1, 1]);
}

#[test]
#[should_panic(expected = "one or two blocks")]
fn three_missing_blocks_are_rejected() {
    let mut blocks = [[0u8; 4]; 5];
    let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(|b| b.as_mut_slice()).collect();
    raid6_recover(&mut refs, &[0, 1, 2]);
}
