//! RAID-4/5 parity: P is the XOR of the data blocks.
//!
//! This module owns plain XOR parity: generating P, rebuilding any one lost block (data or P,
//! since XOR does not care which is which), and checking P during a scrub. RAID-6 reuses the same
//! P; its Q lives in the `raid6` module.

use crate::{assert_block_len, words, Kernel};

/// How many bytes the parity checks compute at a time, in a stack buffer, so a scrub of a large
/// block needs no heap allocation and stays in cache.
pub(crate) const CHECK_PIECE: usize = 4096;

/// `dst ^= src`. Both slices must have the same length.
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    Kernel::active().xor_into(dst, src)
}

pub(crate) fn xor_into_scalar(dst: &mut [u8], src: &[u8]) {
    check_xor_into(dst, src);
    words::xor(dst, src);
}

/// Checks an `xor_into` call, for every kernel alike.
pub(crate) fn check_xor_into(dst: &[u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "xor_into: destination is {} bytes but source is {}", dst.len(), src.len());
}

/// `p` = XOR of all `data` blocks (all zeros when `data` is empty). Every block must have the
/// length of `p`.
pub fn gen_p(p: &mut [u8], data: &[&[u8]]) {
    Kernel::active().gen_p(p, data)
}

pub(crate) fn gen_p_scalar(p: &mut [u8], data: &[&[u8]]) {
    check_gen_p(p, data);
    words::xor_all(p, data.iter().copied());
}

/// Checks a `gen_p` call, for every kernel alike.
pub(crate) fn check_gen_p(p: &[u8], data: &[&[u8]]) {
    for (i, block) in data.iter().enumerate() {
        assert_block_len("gen_p", "data block", i, block.len(), p.len());
    }
}

/// Rebuilds `blocks[missing]` as the XOR of all the other blocks.
///
/// For RAID-4/5 pass the data blocks and P in any order: the lost block, data or parity, is
/// whatever makes the XOR of the whole stripe zero. Its previous contents are ignored.
pub fn raid5_recover(blocks: &mut [&mut [u8]], missing: usize) {
    Kernel::active().raid5_recover(blocks, missing)
}

pub(crate) fn raid5_recover_scalar(blocks: &mut [&mut [u8]], missing: usize) {
    check_raid5_recover(blocks, missing);
    let (before, rest) = blocks.split_at_mut(missing);
    let (lost, after) = rest.split_first_mut().expect("missing is in range");
    words::xor_all(lost, before.iter().chain(after.iter()).map(|b| &**b));
}

/// Checks a `raid5_recover` call, for every kernel alike.
pub(crate) fn check_raid5_recover(blocks: &[&mut [u8]], missing: usize) {
    assert!(blocks.len() >= 2, "raid5_recover: a stripe needs at least two blocks, got {}", blocks.len());
    assert!(missing < blocks.len(), "raid5_recover: missing index {missing} is outside the {} blocks", blocks.len());
    let len = blocks[0].len();
    for (i, block) in blocks.iter().enumerate() {
        assert_block_len("raid5_recover", "block", i, block.len(), len);
    }
}

/// True when `p` is the XOR of `data`, as a scrub wants to know. Every block must have the length
/// of `p`.
pub fn p_matches(p: &[u8], data: &[&[u8]]) -> bool {
    for (i, block) in data.iter().enumerate() {
        assert_block_len("p_matches", "data block", i, block.len(), p.len());
    }
    let mut expected = [0u8; CHECK_PIECE];
    let mut start = 0;
    while start < p.len() {
        let end = (start + CHECK_PIECE).min(p.len());
        let expected = &mut expected[..end - start];
        words::xor_all(expected, data.iter().map(|d| &d[start..end]));
        if *expected != p[start..end] {
            return false;
        }
        start = end;
    }
    true
}
