//! Property tests: random sequences of writes (unaligned included) against an in-memory model of
//! the logical array, for every level and layout, healthy and degraded. After each step the full
//! contents must equal the model and, where the array is whole, a check must find parity and
//! copies consistent; at the end every possible member loss within redundancy still reads back
//! the model.

use proptest::prelude::*;
use uraid_engine::array::{Array, Completion, IoResult, MemberIo, MemberOp, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::geometry::Geometry;
use uraid_layout::{
    Level, LinearLayout, ParityAlgorithm, ParityLayout, Raid0Layout, Raid0ZoneLayout, Raid10Format, Raid10Layout,
    Raid1Layout,
};

/// Member images in memory; `None` for a slot without a device.
struct Members {
    disks: Vec<Option<Vec<u8>>>,
    /// Slots whose I/O fails from now on (an injected fault).
    broken: Vec<bool>,
}

impl Members {
    fn new(n: usize, bytes: u64) -> Members {
        Members { disks: (0..n).map(|_| Some(vec![0u8; bytes as usize])).collect(), broken: vec![false; n] }
    }

    fn exec(&mut self, io: &MemberIo) -> IoResult {
        if self.broken[io.slot] {
            return IoResult::Failed("injected fault".into());
        }
        let disk = self.disks[io.slot].as_mut().expect("engine used a missing slot");
        let at = io.offset as usize;
        match &io.op {
            MemberOp::Read { len } => {
                assert!(at + *len as usize <= disk.len(), "read past member end");
                IoResult::Read(disk[at..at + *len as usize].to_vec())
            }
            MemberOp::Write { data } => {
                assert!(at + data.len() <= disk.len(), "write past member end");
                disk[at..at + data.len()].copy_from_slice(data);
                IoResult::Done
            }
            MemberOp::Flush => IoResult::Done,
            MemberOp::Discard { len } => {
                assert!(at + *len as usize <= disk.len(), "discard past member end");
                disk[at..at + *len as usize].fill(0);
                IoResult::Done
            }
        }
    }
}

const MEMBER_BYTES: u64 = 192 * 1024;

/// Every level/layout combination under test: (description, geometry builder, member count).
fn geometries() -> Vec<(String, Geometry)> {
    let comp = MEMBER_BYTES / 512;
    let mut out: Vec<(String, Geometry)> = vec![
        ("linear-3".into(), Geometry::Linear(LinearLayout::new(&[comp, comp - 64, comp - 128], 0).unwrap())),
        ("raid0-3".into(), Geometry::Raid0(Raid0Layout::new(&[comp; 3], 8, Raid0ZoneLayout::Unset).unwrap())),
    ];
    out.push((
        "raid0-3-zones".into(),
        Geometry::Raid0(Raid0Layout::new(&[comp - 96, comp, comp - 32], 16, Raid0ZoneLayout::Original).unwrap()),
    ));
    out.push((
        "raid0-3-zones-alt".into(),
        Geometry::Raid0(Raid0Layout::new(&[comp - 96, comp, comp - 32], 16, Raid0ZoneLayout::Alternate).unwrap()),
    ));
    out.push(("raid0-2-12k".into(), Geometry::Raid0(Raid0Layout::new(&[comp; 2], 24, Raid0ZoneLayout::Unset).unwrap())));
    for n in [2, 3] {
        out.push((format!("raid1-{n}"), Geometry::Raid1(Raid1Layout::new(n, comp).unwrap())));
    }
    for (n, f) in [(4, "n2"), (3, "n2"), (5, "f2"), (4, "o2"), (3, "n3"), (4, "f2"), (5, "o3")] {
        let format = Raid10Format::parse(f).unwrap();
        out.push((format!("raid10-{n}-{f}"), Geometry::Raid10(Raid10Layout::new(n, 8, format, comp).unwrap())));
    }
    let raid4 = ParityAlgorithm::from_md(Level::Raid4, 0).unwrap();
    out.push(("raid4-4".into(), Geometry::Parity(ParityLayout::new(Level::Raid4, raid4, 4, 8, comp).unwrap())));
    for alg in 0..=5u32 {
        let a = ParityAlgorithm::from_md(Level::Raid5, alg).unwrap();
        out.push((format!("raid5-4-{}", a.name()), Geometry::Parity(ParityLayout::new(Level::Raid5, a, 4, 8, comp).unwrap())));
    }
    out.push((
        "raid5-2".into(),
        Geometry::Parity(ParityLayout::new(Level::Raid5, ParityAlgorithm::from_md(Level::Raid5, 2).unwrap(), 2, 8, comp).unwrap()),
    ));
    for alg in [0u32, 1, 2, 3, 4, 5, 8, 9, 10, 16, 17, 18, 19, 20] {
        let a = ParityAlgorithm::from_md(Level::Raid6, alg).unwrap();
        out.push((format!("raid6-5-{}", a.name()), Geometry::Parity(ParityLayout::new(Level::Raid6, a, 5, 8, comp).unwrap())));
    }
    // Wider stripes, where read-modify-write wins for small writes (and slot order matters).
    for alg in [0u32, 2, 16] {
        let a = ParityAlgorithm::from_md(Level::Raid6, alg).unwrap();
        out.push((format!("raid6-7-{}", a.name()), Geometry::Parity(ParityLayout::new(Level::Raid6, a, 7, 8, comp).unwrap())));
    }
    out.push((
        "raid5-6-la".into(),
        Geometry::Parity(ParityLayout::new(Level::Raid5, ParityAlgorithm::from_md(Level::Raid5, 0).unwrap(), 6, 8, comp).unwrap()),
    ));
    out.push((
        "raid6-4".into(),
        Geometry::Parity(ParityLayout::new(Level::Raid6, ParityAlgorithm::from_md(Level::Raid6, 2).unwrap(), 4, 8, comp).unwrap()),
    ));
    out
}

fn read_all(array: &mut Array, members: &mut Members) -> Vec<u8> {
    let size = array.size_bytes();
    match execute(array, Request::Read { offset: 0, len: size }, &mut |io| members.exec(io)).unwrap() {
        Completion::Read(d) => d,
        other => panic!("unexpected completion {other:?}"),
    }
}

fn check_consistent(array: &mut Array, members: &mut Members, name: &str) {
    let size = array.size_bytes();
    let r = execute(array, Request::Sync { offset: 0, len: size, repair: false }, &mut |io| members.exec(io)).unwrap();
    assert_eq!(r, Completion::Synced { mismatch_sectors: 0 }, "{name}: redundancy inconsistent");
}

/// Slots we can take away from a healthy array and still read everything.
fn removable_sets(geometry: &Geometry) -> Vec<Vec<usize>> {
    let n = geometry.raid_disks();
    let mut sets = vec![vec![]];
    for a in 0..n {
        sets.push(vec![a]);
        for b in a + 1..n {
            sets.push(vec![a, b]);
        }
    }
    sets.into_iter().filter(|set| geometry.is_readable(&|s| !set.contains(&s))).collect()
}

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

fn run_sequence(name: &str, geometry: &Geometry, absent: &[usize], ops: &[WriteOp]) {
    let n = geometry.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut slots = vec![SlotState::InSync; n];
    for &s in absent {
        members.disks[s] = None;
        slots[s] = SlotState::Missing;
    }
    let mut array = Array::new(geometry.clone(), slots).unwrap();
    let size = array.size_bytes();
    let mut model = vec![0u8; size as usize];
    for op in ops {
        let len = (op.len as u64).min(size) as usize;
        let offset = ((op.at * (size - len as u64) as f64) as u64).min(size - len as u64);
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(op.seed) ^ (i >> 8) as u8).collect();
        model[offset as usize..offset as usize + len].copy_from_slice(&data);
        execute(&mut array, Request::Write { offset, data }, &mut |io| members.exec(io)).unwrap();
        assert!(read_all(&mut array, &mut members) == model, "{name} absent {absent:?}: contents differ after write at {offset}+{len}");
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
            assert!(read_all(&mut degraded, &mut members) == model, "{name}: reading without slots {set:?} differs");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn healthy_arrays_match_the_model(ops in write_ops()) {
        for (name, g) in geometries() {
            run_sequence(&name, &g, &[], &ops);
        }
    }

    #[test]
    fn degraded_arrays_match_the_model(ops in write_ops(), pick in any::<usize>()) {
        for (name, g) in geometries() {
            let sets: Vec<Vec<usize>> = removable_sets(&g).into_iter().filter(|s| !s.is_empty()).collect();
            if sets.is_empty() {
                continue;
            }
            let absent = &sets[pick % sets.len()];
            run_sequence(&name, &g, absent, &ops);
        }
    }
}

/// A healthy array over fresh members, filled with a known pattern (returned too).
fn filled_array(g: &Geometry) -> (Members, Array, Vec<u8>) {
    let n = g.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
    let data: Vec<u8> = (0..array.size_bytes()).map(|i| (i % 251) as u8).collect();
    execute(&mut array, Request::Write { offset: 0, data: data.clone() }, &mut |io| members.exec(io)).unwrap();
    (members, array, data)
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
        execute(&mut array, Request::Write { offset: at as u64, data: patch }, &mut |io| members.exec(io)).unwrap();
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
        assert!(array.submit(Request::Write { offset: size, data: vec![1] }).is_err());
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
        let sync = |array: &mut Array, members: &mut Members, repair| {
            match execute(array, Request::Sync { offset: 0, len: size, repair }, &mut |io| members.exec(io)).unwrap() {
                Completion::Synced { mismatch_sectors } => mismatch_sectors,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(sync(&mut array, &mut members, false), 8, "{name}: one 4 KiB row should mismatch");
        assert_eq!(sync(&mut array, &mut members, true), 8, "{name}: repair reports what it fixed");
        assert_eq!(sync(&mut array, &mut members, false), 0, "{name}: repair left mismatches");
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
            assert!(array.submit(Request::Discard { offset: w + 512, len: w }).is_err(), "{name}: unaligned discard accepted");
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
            assert!(read_all(&mut degraded, &mut members) == model, "{name}: reading without slots {set:?} after discard differs");
        }
    }
}
