//! Parity over a stripe's blocks: P (and Q) computed from the data, and lost blocks rebuilt from
//! the others.

use bytes::Bytes;
use smallvec::{smallvec, SmallVec};
use uraid_layout::StripeRoles;

use crate::bufpool::PoolBuf;

/// A stripe block [`reconstruct`] can make: a `Vec`, or `Bytes` from the buffer pool.
pub trait RebuiltBlock: AsRef<[u8]> + From<Vec<u8>> {
    /// A block of `len` bytes, every one of them written by `fill`.
    fn filled_by(len: usize, fill: impl FnOnce(&mut [u8])) -> Self;
}

impl RebuiltBlock for Vec<u8> {
    fn filled_by(len: usize, fill: impl FnOnce(&mut [u8])) -> Self {
        let mut v = vec![0u8; len];
        fill(&mut v);
        v
    }
}

impl RebuiltBlock for Bytes {
    /// From the pool, not zeroed first: a rebuild makes one such block per stripe, and a fresh
    /// zeroed allocation of a chunk was a memset and page faults per block (about 5 % of a raid5
    /// rebuild's CPU in `perf`).
    fn filled_by(len: usize, fill: impl FnOnce(&mut [u8])) -> Self {
        let mut buf = PoolBuf::new(len);
        fill(buf.overwrite(len));
        buf.into_bytes()
    }
}

/// P (and, on raid6, Q) over the data blocks of a stripe, given in data-index order, written
/// over whatever `p` and `q` held. Syndrome slots that hold no data (P and Q's own under DDF
/// layouts) count as zeros, which `zeros` provides: at least as long as `p` when there are any.
pub fn compute_parity_into(roles: &StripeRoles, data: &[&[u8]], zeros: &[u8], p: &mut [u8], q: Option<&mut [u8]>) {
    match (roles.q, q) {
        (None, _) => uraid_parity::gen_p(p, data),
        (Some(_), Some(q)) => {
            let zero = if roles.syndrome_disks > data.len() { &zeros[..p.len()] } else { &[][..] };
            let mut by_slot: SmallVec<[&[u8]; 16]> = smallvec![zero; roles.syndrome_disks];
            for (i, &member) in roles.data.iter().enumerate() {
                let slot = roles.syndrome_slot[member].expect("data member has a syndrome slot");
                by_slot[slot] = data[i];
            }
            uraid_parity::gen_pq(p, q, &by_slot);
        }
        (Some(_), None) => panic!("raid6 parity needs a block for Q"),
    }
}

/// Fill in `blocks[m]` for every member `m` in `missing` (at most the level's redundancy),
/// from the others. `blocks` is indexed by member slot; they are `Vec`s or the `Bytes` member
/// reads came in (kept as they came: a rebuild reads them, and copies none).
pub fn reconstruct<B: RebuiltBlock>(roles: &StripeRoles, blocks: &mut [Option<B>], missing: &[usize], len: usize) {
    if missing.is_empty() {
        return;
    }
    match roles.q {
        // One member lost of raid4/5, or one other than Q of raid6 (P is the XOR of the data
        // there too, so a data member or P is the XOR of P and the data left, Q untouched): one
        // pass over the survivors, writing each byte of the rebuilt block once.
        q if missing.len() == 1 && q != Some(missing[0]) => {
            let m = missing[0];
            let out = {
                let sources: SmallVec<[&[u8]; 16]> = (0..blocks.len())
                    .filter(|&slot| slot != m && Some(slot) != q)
                    .map(|slot| blocks[slot].as_ref().expect("surviving member was read").as_ref())
                    .collect();
                B::filled_by(len, |out| uraid_parity::gen_p(out, &sources))
            };
            blocks[m] = Some(out);
        }
        None => unreachable!("raid4/5 can rebuild one member, not {}", missing.len()),
        // Q alone lost of raid6 (every data member read): computed afresh from the data, into
        // a pooled block, where the two-failure recovery below copies every block first.
        Some(q) if missing == [q] => {
            let out = {
                let data: SmallVec<[&[u8]; 16]> =
                    roles.data.iter().map(|&d| blocks[d].as_ref().expect("data member was read").as_ref()).collect();
                let zeros = if roles.syndrome_disks > data.len() { vec![0u8; len] } else { Vec::new() };
                // P is computed alongside (the kernels make both at once) and dropped.
                let mut p = PoolBuf::new(len);
                B::filled_by(len, |q_out| compute_parity_into(roles, &data, &zeros, p.overwrite(len), Some(q_out)))
            };
            blocks[q] = Some(out);
        }
        Some(q) => {
            assert!(missing.len() <= 2, "raid6 can rebuild two members");
            let n = roles.syndrome_disks;
            // Arrange as the parity crate wants: data by syndrome slot, then P, then Q.
            let mut arranged: Vec<Vec<u8>> = vec![vec![0u8; len]; n + 2];
            let index_of = |member: usize| -> usize {
                if member == roles.p {
                    n
                } else if member == q {
                    n + 1
                } else {
                    roles.syndrome_slot[member].expect("data member has a syndrome slot")
                }
            };
            for (member, b) in blocks.iter().enumerate() {
                if let Some(b) = b {
                    arranged[index_of(member)].copy_from_slice(b.as_ref());
                }
            }
            let lost: Vec<usize> = missing.iter().map(|&m| index_of(m)).collect();
            let mut refs: Vec<&mut [u8]> = arranged.iter_mut().map(Vec::as_mut_slice).collect();
            uraid_parity::raid6_recover(&mut refs, &lost);
            for &m in missing {
                blocks[m] = Some(std::mem::take(&mut arranged[index_of(m)]).into());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use uraid_layout::{Level, ParityAlgorithm, ParityLayout};

    use super::*;
    use crate::geometry::Geometry;

    // Pooled (see `bufpool::POOLED_FROM`), so rebuilt blocks reuse buffers that held other bytes.
    const LEN: usize = 64 << 10;

    /// Every stripe's blocks (by slot) of a `disks`-member array, data patterned and parity
    /// computed, for the first `stripes` stripes.
    fn stripes(level: Level, md_layout: u32, disks: usize, stripes: u64) -> Vec<(StripeRoles, Vec<Vec<u8>>)> {
        let alg = ParityAlgorithm::from_md(level, md_layout).unwrap();
        let g = Geometry::Parity(ParityLayout::new(level, alg, disks, 8, 1024).unwrap());
        (0..stripes)
            .map(|stripe| {
                let roles = g.stripe_roles(stripe);
                let mut blocks = vec![vec![0u8; LEN]; disks];
                for (i, &d) in roles.data.iter().enumerate() {
                    for (j, b) in blocks[d].iter_mut().enumerate() {
                        *b = (j as u64 * 31 + i as u64 * 7 + stripe * 13) as u8;
                    }
                }
                let data: Vec<&[u8]> = roles.data.iter().map(|&d| &blocks[d][..]).collect();
                let (mut p, mut q) = (vec![0u8; LEN], vec![0u8; LEN]);
                compute_parity_into(&roles, &data, &[0u8; LEN], &mut p, roles.q.map(|_| &mut q[..]));
                drop(data);
                blocks[roles.p] = p;
                if let Some(qs) = roles.q {
                    blocks[qs] = q;
                }
                (roles, blocks)
            })
            .collect()
    }

    /// `missing` rebuilt from the rest of `blocks`, as `B`.
    fn rebuilt<B: RebuiltBlock>(roles: &StripeRoles, blocks: &[Vec<u8>], missing: &[usize]) -> Vec<Vec<u8>> {
        let mut held: Vec<Option<B>> =
            blocks.iter().enumerate().map(|(s, b)| (!missing.contains(&s)).then(|| B::from(b.clone()))).collect();
        reconstruct(roles, &mut held, missing, LEN);
        held.into_iter().map(|b| b.expect("every block present").as_ref().to_vec()).collect()
    }

    fn every_loss_rebuilt(level: Level, md_layout: u32, disks: usize) {
        let most = if level == Level::Raid6 { 2 } else { 1 };
        for (stripe, (roles, blocks)) in stripes(level, md_layout, disks, disks as u64 * 2).into_iter().enumerate() {
            let mut losses: Vec<Vec<usize>> = (0..disks).map(|a| vec![a]).collect();
            if most == 2 {
                losses.extend((0..disks).flat_map(|a| (a + 1..disks).map(move |b| vec![a, b])));
            }
            for missing in losses {
                let what = format!("{level:?} layout {md_layout} of {disks}, stripe {stripe}, {missing:?} lost");
                // Every block made afresh, over pooled buffers that held other bytes before.
                assert!(rebuilt::<Bytes>(&roles, &blocks, &missing) == blocks, "{what}, as Bytes");
                assert!(rebuilt::<Vec<u8>>(&roles, &blocks, &missing) == blocks, "{what}, as Vec");
            }
        }
    }

    #[test]
    fn any_member_of_raid5_is_rebuilt_from_the_others() {
        for layout in 0..=5 {
            every_loss_rebuilt(Level::Raid5, layout, 4);
        }
    }

    #[test]
    fn any_one_or_two_members_of_raid6_are_rebuilt_from_the_others() {
        // Q alone lost takes its own path; the DDF layouts give some syndrome slots no data.
        for layout in [0, 2, 5, 8, 9, 10, 16, 18, 20] {
            every_loss_rebuilt(Level::Raid6, layout, 4);
            every_loss_rebuilt(Level::Raid6, layout, 6);
        }
    }
}
