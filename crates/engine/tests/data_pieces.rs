//! `Geometry::each_data_piece`: the member pieces of a read on levels that keep one copy of
//! every byte, which the service reads without the engine. Checked against what the engine
//! itself wrote: gathering the pieces from the member images gives back the written data.

mod common;

use common::{filled_array, geometries};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn data_pieces_gather_what_the_engine_wrote() {
    let mut rng = StdRng::seed_from_u64(0x5eed_da7a);
    for (name, g) in geometries() {
        let single_copy = !g.is_mirrored();
        let (members, _array, model) = filled_array(&g);
        let size = model.len() as u64;
        for round in 0..200 {
            // Small reads inside a chunk, reads across chunks and members, and the whole array.
            let len = match round {
                0 => size,
                r if r % 3 == 0 => rng.gen_range(1..=64 * 1024u64.min(size)),
                _ => rng.gen_range(1..=9000u64.min(size)),
            };
            let offset = rng.gen_range(0..=size - len);
            let mut got = Vec::with_capacity(len as usize);
            let mut pieces = 0;
            let answered = g.each_data_piece(offset, len, |slot, at, n| {
                assert!(n > 0, "{name}: empty piece");
                let disk = members.disks[slot].as_ref().expect("a device");
                got.extend_from_slice(&disk[at as usize..(at + n) as usize]);
                pieces += 1;
            });
            assert_eq!(answered, single_copy, "{name}: answered for a mirrored level, or refused a single-copy one");
            if !single_copy {
                assert_eq!(pieces, 0, "{name}: a refusal called back");
                continue;
            }
            assert!(
                got == model[offset as usize..(offset + len) as usize],
                "{name}: pieces of {offset}+{len} do not hold what was written there"
            );
            if let Some(chunk) = Some(g.chunk_bytes()).filter(|&c| c > 0) {
                // No piece crosses a chunk: at most one per chunk touched.
                let chunks = (offset + len).div_ceil(chunk) - offset / chunk;
                assert!(pieces as u64 <= chunks, "{name}: {pieces} pieces for {chunks} chunks");
            }
        }
    }
}
