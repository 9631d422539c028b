//! Parity over a stripe's blocks: P (and Q) computed from the data, and lost blocks rebuilt from
//! the others.

use smallvec::{smallvec, SmallVec};
use uraid_layout::StripeRoles;

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
pub fn reconstruct<B: AsRef<[u8]> + From<Vec<u8>>>(
    roles: &StripeRoles,
    blocks: &mut [Option<B>],
    missing: &[usize],
    len: usize,
) {
    if missing.is_empty() {
        return;
    }
    match roles.q {
        // One member lost of raid4/5, or one other than Q of raid6 (P is the XOR of the data
        // there too, so a data member or P is the XOR of P and the data left, Q untouched): one
        // pass over the survivors, writing each byte of the rebuilt block once.
        q if missing.len() == 1 && q != Some(missing[0]) => {
            let m = missing[0];
            let mut out = vec![0u8; len];
            {
                let sources: SmallVec<[&[u8]; 16]> = (0..blocks.len())
                    .filter(|&slot| slot != m && Some(slot) != q)
                    .map(|slot| blocks[slot].as_ref().expect("surviving member was read").as_ref())
                    .collect();
                uraid_parity::gen_p(&mut out, &sources);
            }
            blocks[m] = Some(out.into());
        }
        None => unreachable!("raid4/5 can rebuild one member, not {}", missing.len()),
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
