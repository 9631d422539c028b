//! Property tests: random sequences of writes (unaligned included) against an in-memory model of
//! the logical array, for every level and layout, healthy and degraded. After each step the full
//! contents must equal the model and, where the array is whole, a check must find parity and
//! copies consistent; at the end every possible member loss within redundancy still reads back
//! the model.

mod common;

use common::{check_consistent, filled_array, geometries, read_all, removable_sets, use_policy, Members, MEMBER_BYTES};
use proptest::prelude::*;
use uraid_engine::array::{Array, Completion, MemberOp, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::geometry::Geometry;
use uraid_engine::ppl::{latest_header, replay, MemberLog, PplConfig};
use uraid_layout::{Level, ParityAlgorithm, ParityLayout};

#[derive(Debug, Clone)]
struct WriteOp {
    /// Fractions of the array size, so one strategy serves every geometry.
    at: f64,
    len: usize,
    seed: u8,
}

fn write_ops() -> impl Strategy<Value = Vec<WriteOp>> {
    prop::collection::vec(
        (0.0f64..1.0, prop_oneof![1usize..600, 600usize..9000, 9000usize..70000], any::<u8>())
            .prop_map(|(at, len, seed)| WriteOp { at, len, seed }),
        1..8,
    )
}

/// How big the partial parity log areas are in the logged runs: small, so stripe writes split
/// and log writes queue.
const LOG_AREA: u64 = 4096 + 6 * 8192;

fn run_sequence(name: &str, geometry: &Geometry, absent: &[usize], ops: &[WriteOp], policy: usize) {
    run_sequence_with(name, geometry, absent, ops, false, policy);
}

/// With `logged`, the array keeps md's partial parity log, and after every write the logs left
/// on the members must replay to no change at all: an entry whose partial parity does not match
/// what its stripe holds would rewrite parity wrongly after a crash. Reads use read policy number
/// `policy` (which only mirrors tell apart).
fn run_sequence_with(name: &str, geometry: &Geometry, absent: &[usize], ops: &[WriteOp], logged: bool, policy: usize) {
    let n = geometry.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut slots = vec![SlotState::InSync; n];
    for &s in absent {
        members.disks[s] = None;
        slots[s] = SlotState::Missing;
    }
    let mut array = Array::new(geometry.clone(), slots.clone()).unwrap();
    let chosen = use_policy(&mut array, policy);
    let name = &format!("{name} ({chosen})");
    let config = PplConfig { signature: 0x5eed, area_bytes: LOG_AREA };
    if logged {
        array.enable_ppl(config.clone());
    }
    let size = array.size_bytes();
    let mut model = vec![0u8; size as usize];
    for op in ops {
        let len = (op.len as u64).min(size) as usize;
        let offset = ((op.at * (size - len as u64) as f64) as u64).min(size - len as u64);
        let data: Vec<u8> =
            (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(op.seed) ^ (i >> 8) as u8).collect();
        model[offset as usize..offset as usize + len].copy_from_slice(&data);
        execute(&mut array, Request::Write { offset, data: data.into() }, &mut |io| members.exec(io)).unwrap();
        assert!(
            read_all(&mut array, &mut members) == model,
            "{name} absent {absent:?}: contents differ after write at {offset}+{len}"
        );
        if logged {
            let before = members.disks.clone();
            let areas = members.logs.clone();
            let mut found = Vec::new();
            for slot in (0..n).filter(|&s| slots[s] == SlotState::InSync) {
                let area = &areas[slot];
                let Some((at, header)) = latest_header(area, config.signature) else {
                    assert!(area.is_empty(), "{name}: slot {slot} holds a log without a valid header");
                    continue;
                };
                found.push((slot, header, &area[at + uraid_md_format::ppl::HEADER_BYTES..]));
            }
            let logs: Vec<MemberLog> =
                found.iter().map(|(slot, header, pp)| MemberLog { slot: *slot, header, pp }).collect();
            let r = replay(geometry, &slots, &logs, &mut members).unwrap();
            assert_eq!(r.bad, 0, "{name}: log entries that do not fit: {logs:?}");
            assert!(
                members.disks == before,
                "{name} absent {absent:?}: replaying the logs after write at {offset}+{len} changed a member"
            );
        }
        if absent.is_empty() {
            check_consistent(&mut array, &mut members, name);
        }
    }
    if absent.is_empty() {
        // Every loss the level survives must still read back the model.
        for set in removable_sets(geometry) {
            let mut slots = vec![SlotState::InSync; n];
            for &s in &set {
                slots[s] = SlotState::Missing;
            }
            let mut degraded = Array::new(geometry.clone(), slots).unwrap();
            use_policy(&mut degraded, policy);
            assert!(read_all(&mut degraded, &mut members) == model, "{name}: reading without slots {set:?} differs");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn healthy_arrays_match_the_model(ops in write_ops(), policy in any::<usize>()) {
        for (name, g) in geometries() {
            run_sequence(&name, &g, &[], &ops, policy);
        }
    }

    #[test]
    fn degraded_arrays_match_the_model(ops in write_ops(), pick in any::<usize>(), policy in any::<usize>()) {
        for (name, g) in geometries() {
            let sets: Vec<Vec<usize>> = removable_sets(&g).into_iter().filter(|s| !s.is_empty()).collect();
            if sets.is_empty() {
                continue;
            }
            let absent = &sets[pick % sets.len()];
            run_sequence(&name, &g, absent, &ops, policy);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// Parity arrays with a partial parity log: the same model, and logs that replay to no change.
    #[test]
    fn logged_arrays_match_the_model(ops in write_ops(), pick in any::<usize>()) {
        for (name, g) in geometries().into_iter().filter(|(_, g)| g.is_parity()) {
            run_sequence_with(&name, &g, &[], &ops, true, 0);
            let sets: Vec<Vec<usize>> = removable_sets(&g).into_iter().filter(|s| !s.is_empty()).collect();
            run_sequence_with(&name, &g, &sets[pick % sets.len()], &ops, true, 0);
        }
    }
}

/// A member whose I/O starts failing mid-service is marked faulty, the array carries on, and the
/// data written before and after stays readable.
#[test]
fn failing_member_is_dropped_and_data_survives() {
    for (name, g) in geometries() {
        if g.max_degraded() == 0 {
            continue;
        }
        let n = g.raid_disks();
        let (mut members, mut array, first) = filled_array(&g);
        let size = array.size_bytes();
        members.broken[1 % n] = true;
        let mut model = first;
        let patch = vec![0xa5u8; 10_000];
        let at = (size / 3) as usize;
        model[at..at + patch.len()].copy_from_slice(&patch);
        execute(&mut array, Request::Write { offset: at as u64, data: patch.into() }, &mut |io| members.exec(io))
            .unwrap();
        assert!(read_all(&mut array, &mut members) == model, "{name}: data lost after member failure");
        let events = array.take_events();
        assert!(!events.is_empty(), "{name}: no member-failed event");
        assert_eq!(array.slot_states()[1 % n], SlotState::Faulty, "{name}");
    }
}

/// Reads and writes outside the array are refused before any member I/O.
#[test]
fn out_of_range_is_refused() {
    for (_, g) in geometries() {
        let n = g.raid_disks();
        let mut array = Array::new(g, vec![SlotState::InSync; n]).unwrap();
        let size = array.size_bytes();
        assert!(array.submit(Request::Read { offset: size - 1, len: 2 }).is_err());
        assert!(array.submit(Request::Write { offset: size, data: vec![1].into() }).is_err());
        assert!(array.submit(Request::Read { offset: u64::MAX, len: 2 }).is_err());
        assert!(array.next_io().is_none());
    }
}

/// A check finds a corrupted parity/copy row and repair fixes it.
#[test]
fn check_counts_and_repair_fixes_mismatches() {
    for (name, g) in geometries() {
        if g.max_degraded() == 0 {
            continue;
        }
        let (mut members, mut array, _) = filled_array(&g);
        let size = array.size_bytes();
        // Corrupt one byte on slot 0 in its first 4 KiB row.
        members.disks[0].as_mut().unwrap()[100] ^= 0xff;
        let sync = |array: &mut Array, members: &mut Members, repair| match execute(
            array,
            Request::Sync { offset: 0, len: size, repair },
            &mut |io| members.exec(io),
        )
        .unwrap()
        {
            Completion::Synced { mismatch_sectors } => mismatch_sectors,
            other => panic!("{other:?}"),
        };
        assert_eq!(sync(&mut array, &mut members, false), 8, "{name}: one 4 KiB row should mismatch");
        assert_eq!(sync(&mut array, &mut members, true), 8, "{name}: repair reports what it fixed");
        assert_eq!(sync(&mut array, &mut members, false), 0, "{name}: repair left mismatches");
    }
}

/// A repair rewrites rows that disagree one after another as one write per member, yet counts
/// every row (md's mismatch_cnt); rows apart are written apart.
#[test]
fn repair_rewrites_runs_of_mismatched_rows_in_one_write() {
    let comp = MEMBER_BYTES / 512;
    let raid5 = ParityLayout::new(Level::Raid5, ParityAlgorithm::from_md(Level::Raid5, 2).unwrap(), 4, 64, comp);
    let raid6 = ParityLayout::new(Level::Raid6, ParityAlgorithm::from_md(Level::Raid6, 2).unwrap(), 5, 64, comp);
    for (name, g) in [("raid5-4, 32K chunks", raid5), ("raid6-5, 32K chunks", raid6)] {
        let g = Geometry::Parity(g.unwrap());
        let (mut members, mut array, _) = filled_array(&g);
        let size = array.size_bytes();
        // Stripe 0's parity member: rows 0, 1, 2 and 4 disagree, row 3 does not.
        let p = g.stripe_roles(0).p;
        for row in [0usize, 1, 2, 4] {
            members.disks[p].as_mut().unwrap()[row * 4096 + 7] ^= 0x5a;
        }
        let mut parity_writes = Vec::new();
        let done = execute(&mut array, Request::Sync { offset: 0, len: size, repair: true }, &mut |io| {
            if io.slot == p && matches!(io.op, MemberOp::Write { .. }) {
                parity_writes.push((io.offset, io.op.clone()));
            }
            members.exec(io)
        })
        .unwrap();
        assert_eq!(done, Completion::Synced { mismatch_sectors: 32 }, "{name}: four rows counted");
        let spans: Vec<(u64, u64)> = parity_writes
            .iter()
            .map(|(at, op)| match op {
                MemberOp::Write { data } => (*at, data.len() as u64),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(spans, vec![(0, 3 * 4096), (4 * 4096, 4096)], "{name}: one write per run of rows");
        let check =
            execute(&mut array, Request::Sync { offset: 0, len: size, repair: false }, &mut |io| members.exec(io));
        assert_eq!(check.unwrap(), Completion::Synced { mismatch_sectors: 0 }, "{name}: repaired");
    }
}

/// A discard zeroes exactly its range on every level, keeps parity and copies consistent, and
/// every survivable loss still reads the zeros back; parity arrays refuse part-stripe discards.
#[test]
fn discard_zeroes_the_range_and_keeps_redundancy() {
    for (name, g) in geometries() {
        let (mut members, mut array, mut model) = filled_array(&g);
        let size = array.size_bytes();
        let (offset, len) = match g.stripe_data_bytes() {
            Some(w) => (w, (size / w / 2).max(1) * w),
            None => (1000, size / 2),
        };
        if let Some(w) = g.stripe_data_bytes() {
            assert!(
                array.submit(Request::Discard { offset: w + 512, len: w }).is_err(),
                "{name}: unaligned discard accepted"
            );
        }
        model[offset as usize..(offset + len) as usize].fill(0);
        let r = execute(&mut array, Request::Discard { offset, len }, &mut |io| members.exec(io)).unwrap();
        assert_eq!(r, Completion::Written);
        assert!(read_all(&mut array, &mut members) == model, "{name}: contents differ after discard");
        if g.max_degraded() > 0 {
            check_consistent(&mut array, &mut members, &name);
        }
        let n = g.raid_disks();
        for set in removable_sets(&g) {
            let mut slots = vec![SlotState::InSync; n];
            for &s in &set {
                slots[s] = SlotState::Missing;
            }
            let mut degraded = Array::new(g.clone(), slots).unwrap();
            assert!(
                read_all(&mut degraded, &mut members) == model,
                "{name}: reading without slots {set:?} after discard differs"
            );
        }
    }
}
