//! Property tests over random geometries: every layout's map is injective, stays inside the
//! members' used space, covers the array with the expected number of copies, and its inverse
//! leads back to the logical sector.

use std::collections::BTreeMap;

use proptest::prelude::*;
use uraid_layout::{
    Extent, Level, LinearLayout, ParityAlgorithm, ParityLayout, Raid0Layout, Raid0ZoneLayout, Raid10Format,
    Raid10Layout, Raid1Layout,
};

/// Walks the whole array run by run and checks the runs against each other and the inverse.
///
/// `locate` returns every copy of the run starting at a logical sector; `inverse` is the layout's
/// `logical`; `member_limit` is the used size of a member.
fn check_whole_array(
    array_sectors: u64,
    copies: usize,
    locate: impl Fn(u64) -> Vec<Extent>,
    inverse: impl Fn(usize, u64) -> Option<u64>,
    member_limit: impl Fn(usize) -> u64,
) -> Result<(), TestCaseError> {
    let mut used: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    let mut logical = 0;
    while logical < array_sectors {
        let extents = locate(logical);
        prop_assert_eq!(extents.len(), copies, "copies of {}", logical);
        let run = extents[0].sectors;
        prop_assert!(run > 0 && logical + run <= array_sectors, "run {} at {}", run, logical);
        for e in &extents {
            prop_assert_eq!(e.sectors, run, "copies of {} differ in length", logical);
            prop_assert!(
                e.sector + e.sectors <= member_limit(e.member),
                "{:?} (for {}) passes the member's end {}",
                e,
                logical,
                member_limit(e.member)
            );
            for k in [0, run / 2, run - 1] {
                prop_assert_eq!(inverse(e.member, e.sector + k), Some(logical + k), "{:?}", e);
            }
            used.entry(e.member).or_default().push((e.sector, e.sector + e.sectors));
        }
        logical += run;
    }
    for (member, mut ranges) in used {
        ranges.sort_unstable();
        for pair in ranges.windows(2) {
            prop_assert!(pair[0].1 <= pair[1].0, "member {} used twice: {:?}", member, pair);
        }
    }
    Ok(())
}

fn chunk_pow2() -> impl Strategy<Value = u32> {
    (3u32..=13).prop_map(|shift| 1 << shift) // 4 KiB ..= 4 MiB
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn linear_round_trips(
        sizes in prop::collection::vec(0u64..20_000, 1..=12),
        chunk in prop_oneof![Just(0u32), 1u32..=256],
    ) {
        let layout = LinearLayout::new(&sizes, chunk).unwrap();
        let rounded: Vec<u64> = sizes
            .iter()
            .map(|&s| if chunk == 0 { s } else { s - s % u64::from(chunk) })
            .collect();
        prop_assert_eq!(layout.array_sectors(), rounded.iter().sum::<u64>());
        check_whole_array(
            layout.array_sectors(),
            1,
            |l| vec![layout.map(l)],
            |m, s| layout.logical(m, s),
            |m| rounded[m],
        )?;
    }

    #[test]
    fn raid0_round_trips(
        chunks in prop::collection::vec(0u64..40, 1..=12),
        extra in 0u64..8192,
        chunk in prop_oneof![chunk_pow2(), 1u32..=8192],
        zone_layout in prop_oneof![
            Just(Raid0ZoneLayout::Original),
            Just(Raid0ZoneLayout::Alternate),
            Just(Raid0ZoneLayout::Unset),
        ],
    ) {
        let c = u64::from(chunk);
        let sizes: Vec<u64> = chunks.iter().map(|&n| n * c + extra % c).collect();
        let original = Raid0Layout::new(&sizes, chunk, Raid0ZoneLayout::Original).unwrap();
        let zones = original.zones();
        let coincide = zones.len() == 1 || zones[1].members.len() == 1;
        let layout = match Raid0Layout::new(&sizes, chunk, zone_layout) {
            Ok(layout) => layout,
            Err(e) => {
                prop_assert!(zone_layout == Raid0ZoneLayout::Unset && !coincide, "{}", e);
                return Ok(());
            }
        };
        // raid0_size: the chunk-rounded sizes, masked with chunk - 1.
        let expected: u64 = chunks.iter().map(|&n| (n * c) & !(c - 1)).sum();
        prop_assert_eq!(layout.array_sectors(), expected);
        if chunk.is_power_of_two() {
            prop_assert_eq!(expected, chunks.iter().sum::<u64>() * c);
        }
        check_whole_array(
            layout.array_sectors(),
            1,
            |l| vec![layout.map(l)],
            |m, s| layout.logical(m, s),
            |m| chunks[m] * c,
        )?;
    }

    #[test]
    fn raid1_round_trips(disks in 1usize..=12, component in 0u64..100_000) {
        let layout = Raid1Layout::new(disks, component).unwrap();
        prop_assert_eq!(layout.array_sectors(), component);
        check_whole_array(
            component,
            disks,
            |l| layout.map(l),
            |m, s| layout.logical(m, s),
            |_| component,
        )?;
    }

    #[test]
    fn raid10_round_trips(
        disks in 2usize..=12,
        near_pick in 0u32..1000,
        far_pick in 0u32..1000,
        offset in any::<bool>(),
        far_sets in prop_oneof![4 => Just(false), 1 => Just(true)],
        chunk in chunk_pow2(),
        chunks in 0u64..60,
        extra in 0u64..8192,
    ) {
        // Any near * far copies that fit on the members, at least two.
        let near = 1 + near_pick % (disks as u32).min(4);
        let far_max = (disks as u32 / near).min(4);
        let far = if near == 1 { 2 + far_pick % (far_max - 1) } else { 1 + far_pick % far_max };
        let copies = (near * far) as usize;
        // md accepts this, but near copies that wrap to the next chunk row land on the rows that
        // offset copies use, so two virtual chunks share a member chunk.
        let offset = offset && !(far > 1 && near > 1 && disks % near as usize != 0);
        // Far sets that do not divide the members make the last set overlap the others.
        let far_set_mode = if far_sets && disks % copies == 0 { 2 } else { 0 };
        let format = Raid10Format { near, far, offset, far_set_mode };
        let c = u64::from(chunk);
        let component = chunks * c + extra % c;
        let layout = Raid10Layout::new(disks, chunk, format, component).unwrap();

        // calc_sectors and raid10_size.
        let r = disks as u64;
        let array_chunks = (chunks / u64::from(far)) * r / u64::from(near);
        prop_assert_eq!(layout.array_sectors(), array_chunks * c);
        let dev_chunks = (array_chunks * copies as u64).div_ceil(r);
        prop_assert_eq!(layout.dev_sectors(), dev_chunks * c);
        prop_assert!(layout.dev_sectors() <= component);

        check_whole_array(
            layout.array_sectors(),
            copies,
            |l| layout.map(l),
            |m, s| layout.logical(m, s),
            |_| layout.dev_sectors(),
        )?;
    }

    #[test]
    fn parity_round_trips(
        level in prop_oneof![Just(Level::Raid4), Just(Level::Raid5), Just(Level::Raid6)],
        number in prop_oneof![0u32..=5, 8u32..=10, 16u32..=20],
        disks in 2usize..=12,
        chunk in chunk_pow2(),
        chunks in 0u64..60,
        extra in 0u64..8192,
    ) {
        let Ok(algorithm) = ParityAlgorithm::from_md(level, number) else {
            prop_assert!(level != Level::Raid6 && number > 5);
            return Ok(());
        };
        let min = if level == Level::Raid6 { 4 } else { 2 };
        let c = u64::from(chunk);
        let component = chunks * c + extra % c;
        let layout = match ParityLayout::new(level, algorithm, disks, chunk, component) {
            Ok(layout) => layout,
            Err(e) => {
                prop_assert!(disks < min, "{}", e);
                return Ok(());
            }
        };
        let parity = if level == Level::Raid6 { 2 } else { 1 };
        prop_assert_eq!(layout.data_disks(), disks - parity);
        prop_assert_eq!(layout.array_sectors(), (disks - parity) as u64 * chunks * c);
        prop_assert_eq!(layout.stripes(), chunks);

        for stripe in 0..layout.stripes().min(3 * disks as u64) {
            let roles = layout.stripe(stripe);
            let mut seen = vec![false; disks];
            for m in roles.data.iter().copied().chain([roles.p]).chain(roles.q) {
                prop_assert!(!seen[m], "stripe {} uses member {} twice: {:?}", stripe, m, roles);
                seen[m] = true;
            }
            prop_assert!(seen.iter().all(|&s| s), "stripe {} leaves a member out", stripe);
            prop_assert_eq!(layout.logical(roles.p, stripe * c), None);
            if let Some(q) = roles.q {
                prop_assert_eq!(layout.logical(q, stripe * c), None);
                check_syndrome_slots(algorithm, disks, &roles)?;
            } else {
                prop_assert!(roles.syndrome_slot.iter().all(Option::is_none));
                prop_assert_eq!(roles.syndrome_disks, 0);
            }
        }
        check_whole_array(
            layout.array_sectors(),
            1,
            |l| {
                let m = layout.map(l);
                assert_eq!(layout.stripe(m.stripe).data[m.data_index], m.member);
                vec![Extent { member: m.member, sector: m.sector, sectors: m.sectors }]
            },
            |m, s| layout.logical(m, s),
            |_| layout.dev_sectors(),
        )?;
    }

    #[test]
    fn big_arrays_round_trip_at_random_points(
        disks in 4usize..=12,
        chunk in chunk_pow2(),
        number in prop_oneof![0u32..=5, 8u32..=10, 16u32..=20],
        layout_word in prop_oneof![Just(0x102u32), Just(0x201), Just(0x10201), Just(0x103), Just(0x301)],
        point in any::<u64>(),
    ) {
        let component = 1u64 << 40; // 512 TiB members
        let parity = ParityLayout::new(
            Level::Raid6,
            ParityAlgorithm::from_md(Level::Raid6, number).unwrap(),
            disks,
            chunk,
            component,
        )
        .unwrap();
        let logical = point % parity.array_sectors();
        let m = parity.map(logical);
        prop_assert_eq!(parity.logical(m.member, m.sector), Some(logical));

        let format = Raid10Format::from_md(layout_word).unwrap();
        let raid10 = Raid10Layout::new(disks, chunk, format, component).unwrap();
        let logical = point % raid10.array_sectors();
        for e in raid10.map(logical) {
            prop_assert_eq!(raid10.logical(e.member, e.sector), Some(logical));
            prop_assert!(e.sector < raid10.dev_sectors());
        }
    }
}

/// The Q slot rules of `set_syndrome_sources` (see the parity module documentation).
fn check_syndrome_slots(
    algorithm: ParityAlgorithm,
    disks: usize,
    roles: &uraid_layout::StripeRoles,
) -> Result<(), TestCaseError> {
    use ParityAlgorithm as A;
    let q = roles.q.expect("raid6");
    prop_assert_eq!(roles.syndrome_slot[roles.p], None);
    prop_assert_eq!(roles.syndrome_slot[q], None);
    if algorithm.is_ddf() {
        prop_assert_eq!(roles.syndrome_disks, disks);
        for &m in &roles.data {
            prop_assert_eq!(roles.syndrome_slot[m], Some(m));
        }
        return Ok(());
    }
    prop_assert_eq!(roles.syndrome_disks, disks - 2);
    let mut slots: Vec<usize> = roles.data.iter().map(|&m| roles.syndrome_slot[m].unwrap()).collect();
    if matches!(algorithm, A::LeftSymmetric | A::RightSymmetric) {
        prop_assert_eq!(&slots, &(0..disks - 2).collect::<Vec<_>>());
    }
    slots.sort_unstable();
    prop_assert_eq!(slots, (0..disks - 2).collect::<Vec<_>>());
    // Slots follow member order starting after Q.
    let start = if q == disks - 1 { 0 } else { q + 1 };
    let walk: Vec<usize> = (0..disks).map(|i| (start + i) % disks).filter(|&m| m != roles.p && m != q).collect();
    for (slot, m) in walk.into_iter().enumerate() {
        prop_assert_eq!(roles.syndrome_slot[m], Some(slot));
    }
    Ok(())
}

#[test]
fn odd_raid10_geometries_md_allows() {
    // 3 members n2, 5 members f2 and o2, n3, f3, n2f2 on 5.
    for (disks, word) in [(3, 0x102), (5, 0x201), (5, 0x10201), (5, 0x103), (5, 0x301), (5, 0x202), (7, 0x103)] {
        let format = Raid10Format::from_md(word).unwrap();
        let layout = Raid10Layout::new(disks, 16, format, 16 * 37 + 5).unwrap();
        check_whole_array(
            layout.array_sectors(),
            format.copies() as usize,
            |l| layout.map(l),
            |m, s| layout.logical(m, s),
            |_| layout.dev_sectors(),
        )
        .unwrap_or_else(|e| panic!("{disks} members {format}: {e}"));
    }
}
