//! RAID-4, RAID-5 and RAID-6: which member holds each data chunk, P and Q, stripe by stripe.
//!
//! Follows `raid5_compute_sector` (logical to member), `raid5_compute_blocknr` (the inverse),
//! `raid5_size`, `raid6_d0`, `raid6_idx_to_slot` and `set_syndrome_sources` in
//! `drivers/md/raid5.c`; algorithm numbers are `ALGORITHM_*` from `drivers/md/raid5.h`.
//!
//! Geometry: the array is cut into chunks; chunk `c` is data chunk `c % data_disks` of stripe
//! `c / data_disks`, and every chunk of stripe `s` sits at member sector `s * chunk`. The
//! algorithm decides, per stripe, which member holds P (and Q for raid6) and in which order the
//! data chunks fill the remaining members. raid4 ignores the stored algorithm (md stores 0)
//! and always keeps P on the last member.
//!
//! # The Q syndrome's slot order
//!
//! RAID-6 computes `Q = sum over data members of g^slot * D` in GF(2^8) (generator {02}). The
//! slot of a data member is *not* always its data index:
//!
//! - md layouts (`set_syndrome_sources` with `raid6_d0`): walk the members starting just after
//!   Q (member `qd + 1`, or member 0 when Q is the last member), wrapping around, and give each
//!   data member the next slot `0, 1, ..., N-3`; P and Q take no slot. There are `N - 2` slots.
//!   For left/right-symmetric the walk meets the data in data-index order, so slot == data index.
//!   For the asymmetric layouts, parity-first/last and all `-6` layouts, the walk follows
//!   physical member order instead, which differs from data order in most stripes.
//! - DDF layouts (`ddf-zero-restart`, `ddf-N-restart`, `ddf-N-continue`): the walk starts at
//!   member 0 and *every* member consumes a slot, P and Q included (their slots are fed zero
//!   blocks), so a data member's slot is its member index and there are `N` slots.
//!
//! [`ParityLayout::stripe`] returns these slots as [`StripeRoles::syndrome_slot`].

use std::fmt;

use smallvec::{smallvec, SmallVec};

use crate::{check_in_array, LayoutError, Level, PAGE_SECTORS};

/// md's RAID-5/6 parity placement algorithms (`ALGORITHM_*` in `raid5.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParityAlgorithm {
    /// 0: P rotates from the last member down; data fills the other members in order.
    LeftAsymmetric,
    /// 1: P rotates from the first member up; data fills the other members in order.
    RightAsymmetric,
    /// 2 (mdadm's default): P rotates down; data starts just after P and wraps.
    LeftSymmetric,
    /// 3: P rotates up; data starts just after P and wraps.
    RightSymmetric,
    /// 4: P (and Q) on the first member(s).
    ParityFirst,
    /// 5: P (and Q) on the last member(s). Also raid6's `PARITY_N_6`.
    ParityLast,
    /// 8 (raid6 only): DDF's PRL=6 RLQ=0 - like right-asymmetric, DDF Q order.
    DdfZeroRestart,
    /// 9 (raid6 only): DDF's PRL=6 RLQ=1 - like left-asymmetric shifted one stripe, DDF Q order.
    DdfNRestart,
    /// 10 (raid6 only): DDF's PRL=6 RLQ=2 - like left-symmetric with Q before P, DDF Q order.
    DdfNContinue,
    /// 16 (raid6 only): raid5 left-asymmetric over the first N-1 members, Q on the last.
    LeftAsymmetric6,
    /// 17 (raid6 only): raid5 right-asymmetric over the first N-1 members, Q on the last.
    RightAsymmetric6,
    /// 18 (raid6 only): raid5 left-symmetric over the first N-1 members, Q on the last.
    LeftSymmetric6,
    /// 19 (raid6 only): raid5 right-symmetric over the first N-1 members, Q on the last.
    RightSymmetric6,
    /// 20 (raid6 only): P on the first member, Q on the last.
    ParityFirst6,
}

use ParityAlgorithm as A;

/// Every algorithm with its md number and mdadm name.
const ALGORITHMS: [(ParityAlgorithm, u32, &str); 14] = [
    (A::LeftAsymmetric, 0, "left-asymmetric"),
    (A::RightAsymmetric, 1, "right-asymmetric"),
    (A::LeftSymmetric, 2, "left-symmetric"),
    (A::RightSymmetric, 3, "right-symmetric"),
    (A::ParityFirst, 4, "parity-first"),
    (A::ParityLast, 5, "parity-last"),
    (A::DdfZeroRestart, 8, "ddf-zero-restart"),
    (A::DdfNRestart, 9, "ddf-N-restart"),
    (A::DdfNContinue, 10, "ddf-N-continue"),
    (A::LeftAsymmetric6, 16, "left-asymmetric-6"),
    (A::RightAsymmetric6, 17, "right-asymmetric-6"),
    (A::LeftSymmetric6, 18, "left-symmetric-6"),
    (A::RightSymmetric6, 19, "right-symmetric-6"),
    (A::ParityFirst6, 20, "parity-first-6"),
];

impl ParityAlgorithm {
    /// The algorithm for md's layout number at `level`. raid4/5 accept 0..=5
    /// (`algorithm_valid_raid5`), raid6 also 8..=10 and 16..=20 (`algorithm_valid_raid6`).
    /// For raid4 the number is kept only so it can be written back; placement ignores it.
    pub fn from_md(level: Level, n: u32) -> Result<ParityAlgorithm, LayoutError> {
        if !level.is_parity() {
            return Err(LayoutError::NotParityLevel { level });
        }
        ALGORITHMS
            .iter()
            .find(|(algorithm, number, _)| *number == n && algorithm.valid_for(level))
            .map(|(algorithm, _, _)| *algorithm)
            .ok_or(LayoutError::UnknownParityAlgorithm { level, number: n })
    }

    /// md's layout number.
    pub fn to_md(self) -> u32 {
        ALGORITHMS.iter().find(|(a, _, _)| *a == self).map(|(_, n, _)| *n).expect("listed")
    }

    /// The name mdadm prints and accepts: "left-symmetric", "parity-first", "ddf-N-restart",
    /// "left-symmetric-6", ...
    pub fn name(self) -> &'static str {
        ALGORITHMS.iter().find(|(a, _, _)| *a == self).map(|(_, _, s)| *s).expect("listed")
    }

    /// Whether the algorithm exists at `level` (the DDF and `-6` ones only for raid6).
    pub fn valid_for(self, level: Level) -> bool {
        match level {
            Level::Raid6 => true,
            Level::Raid4 | Level::Raid5 => self.to_md() <= 5,
            _ => false,
        }
    }

    /// Whether this is a DDF layout, which orders the Q syndrome differently (see the module
    /// documentation).
    pub fn is_ddf(self) -> bool {
        matches!(self, A::DdfZeroRestart | A::DdfNRestart | A::DdfNContinue)
    }

    /// Parses mdadm's layout names (its `r5layout`/`r6layout` tables), ignoring case: the full
    /// names, `la ra ls rs`, `default` (left-symmetric), or md's number. As mdadm does, raid4/5
    /// read the DDF names as their raid5 equivalents (`ddf-zero-restart` = right-asymmetric,
    /// `ddf-N-restart` = left-asymmetric, `ddf-N-continue` = left-symmetric).
    pub fn parse(level: Level, s: &str) -> Result<ParityAlgorithm, LayoutError> {
        if !level.is_parity() {
            return Err(LayoutError::NotParityLevel { level });
        }
        let text = s.trim().to_ascii_lowercase();
        if let Ok(number) = text.parse::<u32>() {
            return ParityAlgorithm::from_md(level, number);
        }
        let short = match text.as_str() {
            "default" | "ls" => Some(A::LeftSymmetric),
            "la" => Some(A::LeftAsymmetric),
            "ra" => Some(A::RightAsymmetric),
            "rs" => Some(A::RightSymmetric),
            _ => None,
        };
        let raid5_ddf = match text.as_str() {
            "ddf-zero-restart" => Some(A::RightAsymmetric),
            "ddf-n-restart" => Some(A::LeftAsymmetric),
            "ddf-n-continue" => Some(A::LeftSymmetric),
            _ => None,
        };
        let named = ALGORITHMS.iter().find(|(_, _, name)| name.eq_ignore_ascii_case(&text)).map(|(a, _, _)| *a);
        let found = match (short, raid5_ddf, level) {
            (Some(a), _, _) => a,
            (None, Some(a), Level::Raid4 | Level::Raid5) => a,
            _ => named.ok_or_else(|| LayoutError::UnknownParityAlgorithmName { level, name: s.to_string() })?,
        };
        if !found.valid_for(level) {
            return Err(LayoutError::AlgorithmNeedsRaid6 { level, algorithm: found });
        }
        Ok(found)
    }
}

impl fmt::Display for ParityAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where one logical sector lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParityMap {
    /// Stripe number (= member chunk row).
    pub stripe: u64,
    /// Position of the chunk among the stripe's data chunks (`dd_idx` before placement).
    pub data_index: usize,
    /// Member holding it.
    pub member: usize,
    /// Member sector.
    pub sector: u64,
    /// Sectors from here to the end of the chunk (or of the array).
    pub sectors: u64,
}

/// One entry per member (or per data member), inline up to 16 members: an engine asks for a
/// stripe's roles on every parity write, and arrays wider than that are rare.
pub type MemberList<T> = SmallVec<[T; 16]>;

/// The members' roles in one stripe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeRoles {
    /// Member holding P.
    pub p: usize,
    /// Member holding Q (raid6 only).
    pub q: Option<usize>,
    /// `data[i]` is the member holding data chunk `i` of the stripe.
    pub data: MemberList<usize>,
    /// Per member, its slot (power of the generator) in the Q syndrome; `None` for P and Q and
    /// for every member of raid4/5. See the module documentation.
    pub syndrome_slot: MemberList<Option<usize>>,
    /// Number of slots Q is computed over: N-2 for md layouts, N for DDF layouts, 0 without Q.
    pub syndrome_disks: usize,
}

/// A raid4/5/6 array's geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParityLayout {
    level: Level,
    algorithm: ParityAlgorithm,
    raid_disks: usize,
    data_disks: usize,
    chunk_sectors: u32,
    /// Component size rounded down to the chunk.
    dev_sectors: u64,
    array_sectors: u64,
}

impl ParityLayout {
    /// `component_sectors` is the superblock's per-member size; md rounds it down to the chunk
    /// (`raid5_run`, `raid5_size`). Refuses what md and mdadm refuse: fewer than 2 members (raid4,
    /// raid5) or 4 (raid6), a chunk that is not a power of two of at least 4 KiB, an algorithm
    /// not valid at the level.
    pub fn new(
        level: Level,
        algorithm: ParityAlgorithm,
        raid_disks: usize,
        chunk_sectors: u32,
        component_sectors: u64,
    ) -> Result<Self, LayoutError> {
        let (min, parity_disks) = match level {
            Level::Raid4 | Level::Raid5 => (2, 1),
            Level::Raid6 => (4, 2),
            _ => return Err(LayoutError::NotParityLevel { level }),
        };
        if raid_disks < min {
            return Err(LayoutError::TooFewDevices { level, min, got: raid_disks });
        }
        if !algorithm.valid_for(level) {
            return Err(LayoutError::AlgorithmNeedsRaid6 { level, algorithm });
        }
        if chunk_sectors == 0 {
            return Err(LayoutError::ChunkMissing { level });
        }
        if !chunk_sectors.is_power_of_two() {
            return Err(LayoutError::ChunkNotPowerOfTwo { level, chunk_sectors });
        }
        if chunk_sectors < PAGE_SECTORS {
            return Err(LayoutError::ChunkTooSmall { level, chunk_sectors });
        }
        let data_disks = raid_disks - parity_disks;
        let dev_sectors = component_sectors & !(u64::from(chunk_sectors) - 1);
        let array_sectors = dev_sectors.checked_mul(data_disks as u64).ok_or(LayoutError::TooLarge)?;
        Ok(ParityLayout { level, algorithm, raid_disks, data_disks, chunk_sectors, dev_sectors, array_sectors })
    }

    pub fn level(&self) -> Level {
        self.level
    }

    pub fn algorithm(&self) -> ParityAlgorithm {
        self.algorithm
    }

    /// Members holding data in each stripe (`raid_disks` minus 1 or 2).
    pub fn data_disks(&self) -> usize {
        self.data_disks
    }

    pub fn raid_disks(&self) -> usize {
        self.raid_disks
    }

    pub fn chunk_sectors(&self) -> u32 {
        self.chunk_sectors
    }

    /// Sectors used on each member: the component size rounded down to the chunk.
    pub fn dev_sectors(&self) -> u64 {
        self.dev_sectors
    }

    /// `data_disks * dev_sectors` (`raid5_size`).
    pub fn array_sectors(&self) -> u64 {
        self.array_sectors
    }

    /// Number of stripes (chunk rows per member).
    pub fn stripes(&self) -> u64 {
        self.dev_sectors / u64::from(self.chunk_sectors)
    }

    /// Where `logical` lives, and the run to the end of its chunk.
    pub fn map(&self, logical: u64) -> ParityMap {
        check_in_array(logical, self.array_sectors);
        let chunk = u64::from(self.chunk_sectors);
        let in_chunk = logical % chunk;
        let chunk_number = logical / chunk;
        let stripe = chunk_number / self.data_disks as u64;
        let data_index = (chunk_number % self.data_disks as u64) as usize;
        let placement = self.place(stripe, data_index);
        ParityMap {
            stripe,
            data_index,
            member: placement.data,
            sector: stripe * chunk + in_chunk,
            sectors: (chunk - in_chunk).min(self.array_sectors - logical),
        }
    }

    /// The roles of every member in `stripe`, including the Q syndrome slots.
    pub fn stripe(&self, stripe: u64) -> StripeRoles {
        let first = self.place(stripe, 0);
        let (p, q) = (first.p, first.q);
        let data: MemberList<usize> = (0..self.data_disks).map(|i| self.place(stripe, i).data).collect();
        let n = self.raid_disks;
        let mut syndrome_slot: MemberList<Option<usize>> = smallvec![None; n];
        let syndrome_disks = match q {
            None => 0,
            Some(q) => {
                let ddf = self.algorithm.is_ddf();
                // raid6_d0: DDF walks from member 0, md from the member after Q.
                let start = if ddf || q == n - 1 { 0 } else { q + 1 };
                let mut next_slot = 0;
                for step in 0..n {
                    let member = (start + step) % n;
                    // raid6_idx_to_slot: under DDF every member uses up a slot, P and Q too.
                    let slot = next_slot;
                    if ddf {
                        next_slot += 1;
                    }
                    if member == p || member == q {
                        continue;
                    }
                    if !ddf {
                        next_slot += 1;
                    }
                    syndrome_slot[member] = Some(slot);
                }
                if ddf {
                    n
                } else {
                    n - 2
                }
            }
        };
        StripeRoles { p, q, data, syndrome_slot, syndrome_disks }
    }

    /// The array sector stored at `sector` of `member`; `None` for P and Q chunks and past the
    /// used part of the member (what `raid5_compute_blocknr` computes for data blocks).
    pub fn logical(&self, member: usize, sector: u64) -> Option<u64> {
        if member >= self.raid_disks || sector >= self.dev_sectors {
            return None;
        }
        let chunk = u64::from(self.chunk_sectors);
        let stripe = sector / chunk;
        // The forward placement is a permutation of the members per stripe, so searching the
        // data indexes is an exact inverse and cannot drift from `map`.
        let data_index = (0..self.data_disks).find(|&i| self.place(stripe, i).data == member)?;
        Some((stripe * self.data_disks as u64 + data_index as u64) * chunk + sector % chunk)
    }

    /// `raid5_compute_sector`'s placement for data chunk `dd` of `stripe`: the member holding
    /// it, and the members holding P and Q.
    fn place(&self, stripe: u64, dd: usize) -> Placement {
        let n = self.raid_disks;
        let data_disks = self.data_disks;
        // Rotation position of this stripe among `modulus` members.
        let rot = |stripe: u64, modulus: usize| (stripe % modulus as u64) as usize;
        match self.level {
            Level::Raid4 => Placement { data: dd, p: data_disks, q: None },
            Level::Raid5 => {
                let (p, data) = match self.algorithm {
                    A::LeftAsymmetric => {
                        let p = data_disks - rot(stripe, n);
                        (p, if dd >= p { dd + 1 } else { dd })
                    }
                    A::RightAsymmetric => {
                        let p = rot(stripe, n);
                        (p, if dd >= p { dd + 1 } else { dd })
                    }
                    A::LeftSymmetric => {
                        let p = data_disks - rot(stripe, n);
                        (p, (p + 1 + dd) % n)
                    }
                    A::RightSymmetric => {
                        let p = rot(stripe, n);
                        (p, (p + 1 + dd) % n)
                    }
                    A::ParityFirst => (0, dd + 1),
                    A::ParityLast => (data_disks, dd),
                    other => unreachable!("{other} was refused for raid5 by new()"),
                };
                Placement { data, p, q: None }
            }
            Level::Raid6 => {
                // The asymmetric layouts skip over the P,Q pair; when P is last, Q wraps to 0.
                let asymmetric = |p: usize| {
                    if p == n - 1 {
                        (0, dd + 1)
                    } else {
                        (p + 1, if dd >= p { dd + 2 } else { dd })
                    }
                };
                let (p, q, data) = match self.algorithm {
                    A::LeftAsymmetric => {
                        let p = n - 1 - rot(stripe, n);
                        let (q, data) = asymmetric(p);
                        (p, q, data)
                    }
                    A::RightAsymmetric | A::DdfZeroRestart => {
                        let p = rot(stripe, n);
                        let (q, data) = asymmetric(p);
                        (p, q, data)
                    }
                    A::DdfNRestart => {
                        // Left-asymmetric one stripe later, so stripe 0 is D D D P Q.
                        let p = n - 1 - rot(stripe + 1, n);
                        let (q, data) = asymmetric(p);
                        (p, q, data)
                    }
                    A::LeftSymmetric => {
                        let p = n - 1 - rot(stripe, n);
                        (p, (p + 1) % n, (p + 2 + dd) % n)
                    }
                    A::RightSymmetric => {
                        let p = rot(stripe, n);
                        (p, (p + 1) % n, (p + 2 + dd) % n)
                    }
                    A::DdfNContinue => {
                        let p = n - 1 - rot(stripe, n);
                        (p, (p + n - 1) % n, (p + 1 + dd) % n)
                    }
                    A::ParityFirst => (0, 1, dd + 2),
                    A::ParityLast => (data_disks, data_disks + 1, dd),
                    A::LeftAsymmetric6 => {
                        let p = data_disks - rot(stripe, n - 1);
                        (p, n - 1, if dd >= p { dd + 1 } else { dd })
                    }
                    A::RightAsymmetric6 => {
                        let p = rot(stripe, n - 1);
                        (p, n - 1, if dd >= p { dd + 1 } else { dd })
                    }
                    A::LeftSymmetric6 => {
                        let p = data_disks - rot(stripe, n - 1);
                        (p, n - 1, (p + 1 + dd) % (n - 1))
                    }
                    A::RightSymmetric6 => {
                        let p = rot(stripe, n - 1);
                        (p, n - 1, (p + 1 + dd) % (n - 1))
                    }
                    A::ParityFirst6 => (0, n - 1, dd + 1),
                };
                Placement { data, p, q: Some(q) }
            }
            other => unreachable!("{other} is not a parity level"),
        }
    }
}

/// One data chunk's member and its stripe's P and Q members.
struct Placement {
    data: usize,
    p: usize,
    q: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(level: Level, algorithm: ParityAlgorithm, disks: usize) -> ParityLayout {
        ParityLayout::new(level, algorithm, disks, 8, 8 * 64).unwrap()
    }

    #[test]
    fn raid5_left_symmetric_rotates_as_documented() {
        // md's left-symmetric with 4 members: P on 3, 2, 1, 0; data starts after P.
        let l = layout(Level::Raid5, A::LeftSymmetric, 4);
        let roles: Vec<(usize, Vec<usize>)> = (0..4).map(|s| l.stripe(s)).map(|r| (r.p, r.data.to_vec())).collect();
        assert_eq!(roles, vec![(3, vec![0, 1, 2]), (2, vec![3, 0, 1]), (1, vec![2, 3, 0]), (0, vec![1, 2, 3])]);
    }

    #[test]
    fn raid5_left_asymmetric_keeps_data_in_member_order() {
        let l = layout(Level::Raid5, A::LeftAsymmetric, 4);
        assert_eq!(l.stripe(1).data.to_vec(), vec![0, 1, 3]);
        assert_eq!(l.stripe(1).p, 2);
    }

    #[test]
    fn raid4_ignores_the_algorithm() {
        let l = layout(Level::Raid4, A::LeftAsymmetric, 3);
        for s in 0..5 {
            assert_eq!(l.stripe(s).p, 2);
            assert_eq!(l.stripe(s).data.to_vec(), vec![0, 1]);
        }
    }

    #[test]
    fn raid6_q_slots_follow_md_and_ddf_rules() {
        // Left-symmetric: slot == data index.
        let l = layout(Level::Raid6, A::LeftSymmetric, 5);
        for s in 0..10 {
            let roles = l.stripe(s);
            for (i, &m) in roles.data.iter().enumerate() {
                assert_eq!(roles.syndrome_slot[m], Some(i));
            }
            assert_eq!(roles.syndrome_disks, 3);
        }
        // Left-asymmetric, stripe 1 of 5: P on 3, Q on 4, data on 0 1 2; slots walk from 0.
        let l = layout(Level::Raid6, A::LeftAsymmetric, 5);
        let roles = l.stripe(1);
        assert_eq!((roles.p, roles.q), (3, Some(4)));
        assert_eq!(roles.syndrome_slot.to_vec(), vec![Some(0), Some(1), Some(2), None, None]);
        // Stripe 2: P on 2, Q on 3, data on 0 1 4; the walk starts at 4.
        let roles = l.stripe(2);
        assert_eq!((roles.p, roles.q), (2, Some(3)));
        assert_eq!(roles.data.to_vec(), vec![0, 1, 4]);
        assert_eq!(roles.syndrome_slot.to_vec(), vec![Some(1), Some(2), None, None, Some(0)]);
        // DDF: the slot is the member index, over N slots.
        let l = layout(Level::Raid6, A::DdfNContinue, 5);
        let roles = l.stripe(1);
        assert_eq!(roles.syndrome_disks, 5);
        for m in 0..5 {
            let expected = (m != roles.p && Some(m) != roles.q).then_some(m);
            assert_eq!(roles.syndrome_slot[m], expected);
        }
    }

    #[test]
    fn ddf_n_restart_starts_with_parity_last() {
        let l = layout(Level::Raid6, A::DdfNRestart, 5);
        let roles = l.stripe(0);
        assert_eq!((roles.p, roles.q, roles.data.to_vec()), (3, Some(4), vec![0, 1, 2]));
    }

    #[test]
    fn names_and_numbers() {
        for (algorithm, number, name) in ALGORITHMS {
            assert_eq!(ParityAlgorithm::from_md(Level::Raid6, number), Ok(algorithm));
            assert_eq!(ParityAlgorithm::parse(Level::Raid6, name), Ok(algorithm));
            assert_eq!(algorithm.to_md(), number);
            assert_eq!(algorithm.to_string(), name);
        }
        assert_eq!(ParityAlgorithm::parse(Level::Raid5, "default"), Ok(A::LeftSymmetric));
        assert_eq!(ParityAlgorithm::parse(Level::Raid5, "ra"), Ok(A::RightAsymmetric));
        assert_eq!(ParityAlgorithm::parse(Level::Raid5, "ddf-N-restart"), Ok(A::LeftAsymmetric));
        assert_eq!(ParityAlgorithm::parse(Level::Raid6, "ddf-N-restart"), Ok(A::DdfNRestart));
        assert!(matches!(
            ParityAlgorithm::parse(Level::Raid5, "left-symmetric-6"),
            Err(LayoutError::AlgorithmNeedsRaid6 { .. })
        ));
        assert!(ParityAlgorithm::from_md(Level::Raid5, 8).is_err());
        assert_eq!(ParityAlgorithm::from_md(Level::Raid4, 0), Ok(A::LeftAsymmetric));
        assert!(ParityAlgorithm::parse(Level::Raid5, "sideways").is_err());
    }

    #[test]
    fn refuses_what_md_refuses() {
        let e = ParityLayout::new(Level::Raid5, A::LeftSymmetric, 4, 24, 6144).unwrap_err();
        assert_eq!(e.to_string(), "chunk size 12 KiB is not a power of two (raid5 needs one)");
        assert!(ParityLayout::new(Level::Raid6, A::LeftSymmetric, 3, 128, 6144).is_err());
        assert!(ParityLayout::new(Level::Raid5, A::LeftSymmetric, 1, 128, 6144).is_err());
        assert!(ParityLayout::new(Level::Raid5, A::DdfNRestart, 4, 128, 6144).is_err());
        assert!(ParityLayout::new(Level::Raid1, A::LeftSymmetric, 4, 128, 6144).is_err());
    }
}
