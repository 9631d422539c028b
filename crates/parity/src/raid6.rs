//! RAID-6 parity: P (XOR) and Q (the Reed-Solomon syndrome md uses), and recovery of any one or
//! two lost blocks of a stripe.
//!
//! Q = sum over data slots i of g^i * D_i in GF(2^8) with g = {02}. The slot numbering is md's
//! "syndrome slot" order, which for some layouts differs from the logical data order; choosing it
//! is the caller's job. A hole (a slot md fills with a zero page) is passed as a block of zeros.
//!
//! Recovery follows H. Peter Anvin's "The Mathematics of RAID-6":
//! - one data block: from P, as RAID-5 does;
//! - data + Q: the data block from P, then Q from scratch;
//! - data + P: the data block from Q, then P from scratch;
//! - two data blocks x < y: solve the two linear equations that P and Q give;
//! - P, Q, or both: regenerate them from the data.

use crate::raid5::CHECK_PIECE;
use crate::{assert_block_len, gf, words, Kernel};

/// `p` = XOR of `data`, `q` = sum over i of g^i * `data[i]`, where `data[i]` is the block in
/// syndrome slot i (pass zeros for a hole). Every block must have the length of `p`.
///
/// Q is defined for any number of slots, but powers of the generator repeat every 255 slots, so
/// two lost data blocks can only be told apart by [`raid6_recover`] when their slots are not a
/// multiple of 255 apart.
pub fn gen_pq(p: &mut [u8], q: &mut [u8], data: &[&[u8]]) {
    Kernel::active().gen_pq(p, q, data)
}

pub(crate) fn gen_pq_scalar(p: &mut [u8], q: &mut [u8], data: &[&[u8]]) {
    check_gen_pq(p, q, data);
    words::xor_all(p, data.iter().copied());
    words::syndrome(q, data.iter().map(|d| Some(*d)));
}

/// Checks a `gen_pq` call, for every kernel alike.
pub(crate) fn check_gen_pq(p: &[u8], q: &[u8], data: &[&[u8]]) {
    assert_block_len("gen_pq", "Q block", 0, q.len(), p.len());
    for (i, block) in data.iter().enumerate() {
        assert_block_len("gen_pq", "data block", i, block.len(), p.len());
    }
}

/// Read-modify-write update after the block in data slot `slot` changes from `old` to `new`:
/// `p ^= old ^ new` and, for RAID-6, `q ^= g^slot * (old ^ new)`. Pass `q = None` for RAID-4/5.
/// All blocks must have the length of `p`.
pub fn update_pq(p: &mut [u8], q: Option<&mut [u8]>, slot: usize, old: &[u8], new: &[u8]) {
    Kernel::active().update_pq(p, q, slot, old, new)
}

/// Checks an `update_pq` call, for every kernel alike.
pub(crate) fn check_update_pq(p: &[u8], q: Option<&[u8]>, old: &[u8], new: &[u8]) {
    assert_block_len("update_pq", "old block", 0, old.len(), p.len());
    assert_block_len("update_pq", "new block", 0, new.len(), p.len());
    if let Some(q) = q {
        assert_block_len("update_pq", "Q block", 0, q.len(), p.len());
    }
}

pub(crate) fn update_pq_scalar(p: &mut [u8], q: Option<&mut [u8]>, slot: usize, old: &[u8], new: &[u8]) {
    check_update_pq(p, q.as_deref(), old, new);
    match q {
        None => {
            words::xor(p, old);
            words::xor(p, new);
        }
        Some(q) => {
            let times_slot_power = gf::mul_row(gf::exp(slot));
            for (((p, q), &o), &n) in p.iter_mut().zip(q.iter_mut()).zip(old).zip(new) {
                let delta = o ^ n;
                *p ^= delta;
                *q ^= times_slot_power[delta as usize];
            }
        }
    }
}

/// Rebuilds one or two lost blocks of a RAID-6 stripe in place.
///
/// `blocks` holds the `n` data blocks in syndrome-slot order, then P (index `n`), then Q (index
/// `n + 1`). `missing` holds one or two distinct indices into `blocks`; those blocks are
/// overwritten with the reconstruction and their previous contents are ignored, so they may hold
/// anything (stale data, garbage). Every combination is covered: one data block, two data blocks,
/// data + P, data + Q, P, Q, and P + Q.
pub fn raid6_recover(blocks: &mut [&mut [u8]], missing: &[usize]) {
    Kernel::active().raid6_recover(blocks, missing)
}

pub(crate) fn raid6_recover_scalar(blocks: &mut [&mut [u8]], missing: &[usize]) {
    let (first, second) = recover_targets(blocks, missing);
    let data_count = blocks.len() - 2;
    let p_index = data_count;

    // Split the stripe into the survivors (read-only, `None` where a block is lost) and mutable
    // access to the lost blocks, which double as scratch space until they receive their result.
    let mut survivors: Vec<Option<&[u8]>> = Vec::with_capacity(blocks.len());
    let mut first_lost: Option<&mut [u8]> = None;
    let mut second_lost: Option<&mut [u8]> = None;
    for (i, block) in blocks.iter_mut().enumerate() {
        if i == first {
            first_lost = Some(&mut **block);
            survivors.push(None);
        } else if Some(i) == second {
            second_lost = Some(&mut **block);
            survivors.push(None);
        } else {
            survivors.push(Some(&**block));
        }
    }
    let first_lost = first_lost.expect("first missing block was found");
    let (data, parity) = survivors.split_at(data_count);
    let (p, q) = (parity[0], parity[1]);

    match second_lost {
        None if first < data_count => {
            let p = p.expect("P survives when one block is lost");
            data_from_p(first_lost, data, p);
        }
        None if first == p_index => words::xor_all(first_lost, data.iter().flatten().copied()),
        None => words::syndrome(first_lost, data.iter().copied()),
        Some(second_lost) => {
            let second = second.expect("second index accompanies second block");
            if second < data_count {
                two_data(first_lost, first, second_lost, second, data, p, q);
            } else if first < data_count && second == p_index {
                let q = q.expect("Q survives when data and P are lost");
                data_and_p(first_lost, first, second_lost, data, q);
            } else if first < data_count {
                let p = p.expect("P survives when data and Q are lost");
                data_from_p(first_lost, data, p);
                let rebuilt: &[u8] = first_lost;
                let with_rebuilt =
                    data.iter().enumerate().map(|(slot, d)| if slot == first { Some(rebuilt) } else { *d });
                words::syndrome(second_lost, with_rebuilt);
            } else {
                words::xor_all(first_lost, data.iter().flatten().copied());
                words::syndrome(second_lost, data.iter().copied());
            }
        }
    }
}

/// Checks a `raid6_recover` call (shared by every kernel so they refuse the same mistakes with
/// the same messages) and returns the lost indices, lowest first.
pub(crate) fn recover_targets(blocks: &[&mut [u8]], missing: &[usize]) -> (usize, Option<usize>) {
    assert!(
        blocks.len() >= 3,
        "raid6_recover: a stripe needs at least one data block plus P and Q, got {} blocks",
        blocks.len()
    );
    let len = blocks[0].len();
    for (i, block) in blocks.iter().enumerate() {
        assert_block_len("raid6_recover", "block", i, block.len(), len);
    }
    let (first, second) = match *missing {
        [a] => (a, None),
        [a, b] => {
            assert_ne!(a, b, "raid6_recover: missing indices must be distinct");
            (a.min(b), Some(a.max(b)))
        }
        _ => panic!("raid6_recover: RAID-6 recovers one or two blocks, {} were given", missing.len()),
    };
    let last = second.unwrap_or(first);
    assert!(last < blocks.len(), "raid6_recover: missing index {last} is outside the {} blocks", blocks.len());
    (first, second)
}

/// The one lost data block is P XOR the surviving data (`data` has `None` only at the lost slot).
fn data_from_p(lost: &mut [u8], data: &[Option<&[u8]>], p: &[u8]) {
    words::xor_all(lost, data.iter().flatten().copied().chain(std::iter::once(p)));
}

/// Data slot `x` and P are lost. Q minus the syndrome of the surviving data leaves g^x * D_x,
/// so D_x = g^-x * (Q + Q_x) where Q_x is the syndrome with slot x as a hole. P is then plain XOR.
fn data_and_p(lost_data: &mut [u8], x: usize, lost_p: &mut [u8], data: &[Option<&[u8]>], q: &[u8]) {
    // The P block is about to be regenerated, so it holds Q_x in the meantime.
    let partial_q = &mut *lost_p;
    words::syndrome(partial_q, data.iter().copied());
    let times_inverse_power = gf::mul_row(gf::inv(gf::exp(x)));
    for ((d, &q), &partial) in lost_data.iter_mut().zip(q).zip(partial_q.iter()) {
        *d = times_inverse_power[(q ^ partial) as usize];
    }
    let rebuilt: &[u8] = lost_data;
    words::xor_all(lost_p, data.iter().flatten().copied().chain(std::iter::once(rebuilt)));
}

/// Data slots `x < y` are lost. With P_xy = P + P_x,y and Q_xy = Q + Q_x,y (the parities of the
/// surviving data, both lost slots as holes):
///   P_xy = D_x + D_y
///   Q_xy = g^x D_x + g^y D_y
/// Eliminating D_y gives D_x = (g^(y-x) P_xy + g^-x Q_xy) / (g^(y-x) + 1), and D_y = P_xy + D_x.
fn two_data(
    lost_x: &mut [u8],
    x: usize,
    lost_y: &mut [u8],
    y: usize,
    data: &[Option<&[u8]>],
    p: Option<&[u8]>,
    q: Option<&[u8]>,
) {
    let p = p.expect("P survives when two data blocks are lost");
    let q = q.expect("Q survives when two data blocks are lost");
    let gap_power = gf::exp(y - x);
    // g^(y-x) = 1 would make the denominator zero: the two slots would share a coefficient,
    // which happens only when they are a multiple of 255 slots apart.
    assert!(
        gap_power != 1,
        "raid6_recover: data slots {x} and {y} have the same generator power and cannot be told apart"
    );
    let denominator_inverse = gf::inv(gap_power ^ 1);
    let times_p_coefficient = gf::mul_row(gf::mul(gap_power, denominator_inverse));
    let times_q_coefficient = gf::mul_row(gf::mul(gf::inv(gf::exp(x)), denominator_inverse));

    // The lost blocks hold the partial P and Q until each byte is solved.
    words::xor_all(lost_x, data.iter().flatten().copied());
    words::syndrome(lost_y, data.iter().copied());
    for (((dx, dy), &p), &q) in lost_x.iter_mut().zip(lost_y.iter_mut()).zip(p).zip(q) {
        let p_xy = p ^ *dx;
        let q_xy = q ^ *dy;
        let solved_x = times_p_coefficient[p_xy as usize] ^ times_q_coefficient[q_xy as usize];
        *dx = solved_x;
        *dy = p_xy ^ solved_x;
    }
}

/// True when `p` and `q` are the P and Q of `data` (in syndrome-slot order), as a scrub wants to
/// know. Every block must have the length of `p`.
pub fn pq_matches(p: &[u8], q: &[u8], data: &[&[u8]]) -> bool {
    assert_block_len("pq_matches", "Q block", 0, q.len(), p.len());
    for (i, block) in data.iter().enumerate() {
        assert_block_len("pq_matches", "data block", i, block.len(), p.len());
    }
    let mut expected_p = [0u8; CHECK_PIECE];
    let mut expected_q = [0u8; CHECK_PIECE];
    let mut start = 0;
    while start < p.len() {
        let end = (start + CHECK_PIECE).min(p.len());
        let expected_p = &mut expected_p[..end - start];
        let expected_q = &mut expected_q[..end - start];
        words::xor_all(expected_p, data.iter().map(|d| &d[start..end]));
        words::syndrome(expected_q, data.iter().map(|d| Some(&d[start..end])));
        if *expected_p != p[start..end] || *expected_q != q[start..end] {
            return false;
        }
        start = end;
    }
    true
}
