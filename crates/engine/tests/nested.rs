//! A mirror whose copies are arrays of their own (`NestedLayout`, run by `NestedArray`): a raid5
//! plex of three members beside a concatenated plex of two. Written, read from either plex
//! alone, checked, degraded inside the raid5 plex and rebuilt there, and plexes taken out and
//! revived whole, the raid5 plex's parity right at the end of each.

mod common;

use common::Members;
use uraid_engine::array::{Completion, EngineEvent, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::geometry::{Geometry, NestedLayout};
use uraid_engine::{Array, Engine, EngineError, RequestFlow};
use uraid_layout::{Level, LinearLayout, ParityAlgorithm, ParityLayout};

/// Bytes per member: the raid5 plex (64 KiB chunks, 3 members) holds twice that, and the
/// concatenated plex (members of 160 and 128 KiB) 288 KiB; the mirror is 256 KiB.
const MEMBER: u64 = 160 * 1024;

fn raid5_plex() -> Geometry {
    Geometry::Parity(
        ParityLayout::new(Level::Raid5, ParityAlgorithm::LeftAsymmetric, 3, 128, 256 * 1024 / 512 / 2).unwrap(),
    )
}

fn concat_plex() -> Geometry {
    Geometry::Linear(LinearLayout::new(&[160 * 2, 128 * 2], 0).unwrap())
}

/// Slots 0–2 are the raid5 plex, 3–4 the concatenated one.
fn mirror() -> Geometry {
    Geometry::custom(NestedLayout::new("raid5 and concat", vec![raid5_plex(), concat_plex()]))
}

fn pattern(len: u64, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 10) as u8).collect()
}

fn run(engine: &mut impl RequestFlow, members: &mut Members, request: Request) -> Result<Completion, EngineError> {
    execute(engine, request, &mut |io| members.exec(io))
}

fn write(engine: &mut impl RequestFlow, members: &mut Members, offset: u64, data: &[u8]) {
    let request = Request::Write { offset, data: data.to_vec().into() };
    assert_eq!(run(engine, members, request), Ok(Completion::Written), "write at {offset}");
}

fn read(engine: &mut impl RequestFlow, members: &mut Members, offset: u64, len: u64) -> Vec<u8> {
    match run(engine, members, Request::Read { offset, len }) {
        Ok(Completion::Read(data)) => data.into_vec(),
        other => panic!("read {offset}+{len}: {other:?}"),
    }
}

fn sync(engine: &mut impl RequestFlow, members: &mut Members, len: u64, repair: bool) -> u64 {
    match run(engine, members, Request::Sync { offset: 0, len, repair }) {
        Ok(Completion::Synced { mismatch_sectors }) => mismatch_sectors,
        other => panic!("sync: {other:?}"),
    }
}

/// Writes of uneven lengths over the whole mirror.
fn fill(engine: &mut Engine, members: &mut Members, model: &[u8]) {
    let mut offset = 0;
    for piece in [70_001usize, 4096, 1, 65_537, 12_345].into_iter().cycle() {
        if offset == model.len() {
            break;
        }
        let end = (offset + piece).min(model.len());
        write(engine, members, offset as u64, &model[offset..end]);
        offset = end;
    }
}

/// What each plex alone reads, and its own parity check (the raid5 plex as an array of its
/// own, on the same members).
fn assert_each_plex_holds(members: &mut Members, model: &[u8]) {
    let size = model.len() as u64;
    let mut raid5 = Array::new(raid5_plex(), vec![SlotState::InSync; 3]).unwrap();
    let mut on_raid5 = Members::new(3, MEMBER);
    on_raid5.disks = members.disks[0..3].to_vec();
    assert!(read(&mut raid5, &mut on_raid5, 0, size) == model, "the raid5 plex alone");
    let raid5_size = raid5.size_bytes();
    assert_eq!(sync(&mut raid5, &mut on_raid5, raid5_size, false), 0, "the raid5 plex's parity");
    let mut concat = Array::new(concat_plex(), vec![SlotState::InSync; 2]).unwrap();
    let mut on_concat = Members::new(2, MEMBER);
    on_concat.disks = members.disks[3..5].to_vec();
    assert!(read(&mut concat, &mut on_concat, 0, size) == model, "the concatenated plex alone");
}

/// Walk a recovery over every member offset, then mark `slots` in sync.
fn recover(engine: &mut Engine, members: &mut Members, slots: &[usize]) {
    let end = engine.geometry().member_data_bytes();
    let window = 48 * 1024;
    for offset in (0..end).step_by(window as usize) {
        let request = Request::Recover { offset, len: window.min(end - offset) };
        assert_eq!(run(engine, members, request), Ok(Completion::Recovered), "recovery at {offset}");
    }
    for &slot in slots {
        engine.set_slot_state(slot, SlotState::InSync, false).unwrap();
        members.no_reads[slot] = false;
    }
}

/// Put an empty device in `slot` and make it recovering.
fn replace(engine: &mut Engine, members: &mut Members, slot: usize) {
    members.disks[slot] = Some(vec![0xa5; MEMBER as usize]);
    members.broken[slot] = false;
    members.no_reads[slot] = true;
    engine.set_slot_state(slot, SlotState::Recovering, false).unwrap();
}

fn failed_slots(events: &[EngineEvent]) -> Vec<usize> {
    let mut slots: Vec<usize> = events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::MemberFailed { slot, .. } => Some(*slot),
            _ => None,
        })
        .collect();
    slots.sort_unstable();
    slots
}

fn whole() -> (Engine, Members, Vec<u8>) {
    let g = mirror();
    let mut engine = Engine::new(g.clone(), vec![SlotState::InSync; 5]).unwrap();
    assert!(matches!(engine, Engine::Nested(_)));
    assert_eq!(engine.size_bytes(), 256 * 1024);
    let mut members = Members::new(5, MEMBER);
    let model = pattern(engine.size_bytes(), 3);
    fill(&mut engine, &mut members, &model);
    (engine, members, model)
}

#[test]
fn both_plexes_hold_every_byte_and_the_raid5_plex_its_parity() {
    let (mut engine, mut members, model) = whole();
    assert!(read(&mut engine, &mut members, 0, model.len() as u64) == model);
    assert_each_plex_holds(&mut members, &model);
    assert_eq!(sync(&mut engine, &mut members, model.len() as u64, false), 0);
    // Either plex alone runs the mirror.
    for absent in [[0, 1, 2], [3, 4, 4]] {
        let states = (0..5).map(|s| if absent.contains(&s) { SlotState::Missing } else { SlotState::InSync });
        let mut alone = Engine::new(mirror(), states.collect()).unwrap();
        assert!(read(&mut alone, &mut members, 0, model.len() as u64) == model, "without slots {absent:?}");
    }
    // Without two members of the raid5 plex and one of the other, no plex is whole.
    let states = vec![SlotState::Missing, SlotState::Missing, SlotState::InSync, SlotState::InSync, SlotState::Missing];
    assert_eq!(Engine::new(mirror(), states).err(), Some(EngineError::ArrayFailed));
}

#[test]
fn a_check_counts_what_differs_in_either_level_and_repair_mends_it() {
    let (mut engine, mut members, model) = whole();
    let size = model.len() as u64;
    // A parity byte of the raid5 plex (stripe 0's parity is on slot 2, left-asymmetric).
    members.disks[2].as_mut().unwrap()[100] ^= 0x40;
    // A data byte of the concatenated plex: the two plexes disagree there.
    members.disks[4].as_mut().unwrap()[5000] ^= 0x01;
    assert_eq!(sync(&mut engine, &mut members, size, false), 16, "one 4 KiB row in each level");
    assert_eq!(sync(&mut engine, &mut members, size, true), 16);
    assert_eq!(sync(&mut engine, &mut members, size, false), 0, "repaired");
    assert_each_plex_holds(&mut members, &model);
}

#[test]
fn a_raid5_member_lost_leaves_its_plex_serving_degraded_and_is_rebuilt_from_parity() {
    let (mut engine, mut members, mut model) = whole();
    members.broken[1] = true;
    let update = pattern(100_000, 9);
    model[20_000..120_000].copy_from_slice(&update);
    write(&mut engine, &mut members, 20_000, &update);
    assert_eq!(failed_slots(&engine.take_events()), vec![1], "only the member that failed");
    assert_eq!(engine.slot_states()[1], SlotState::Faulty);
    assert!(engine.slot_states().iter().enumerate().all(|(s, st)| s == 1 || *st == SlotState::InSync));
    // The concatenated plex out: the degraded raid5 plex serves alone, by reconstruction.
    let mut states = engine.slot_states().to_vec();
    states[3] = SlotState::Missing;
    let mut degraded = Engine::new(mirror(), states).unwrap();
    assert!(read(&mut degraded, &mut members, 0, model.len() as u64) == model, "the raid5 plex degraded");
    // Rebuilt inside the plex, from parity (the recovery never reads slot 1).
    replace(&mut engine, &mut members, 1);
    recover(&mut engine, &mut members, &[1]);
    assert!(engine.slot_states().iter().all(|s| *s == SlotState::InSync));
    assert_each_plex_holds(&mut members, &model);
}

#[test]
fn a_concat_member_lost_takes_its_plex_out_and_the_plex_is_revived_whole() {
    let (mut engine, mut members, mut model) = whole();
    members.broken[3] = true;
    let update = pattern(50_000, 11);
    model[1000..51_000].copy_from_slice(&update);
    write(&mut engine, &mut members, 1000, &update);
    // The whole plex stops getting writes: both its members are stale.
    assert_eq!(failed_slots(&engine.take_events()), vec![3, 4]);
    let more = pattern(30_000, 12);
    model[200_000..230_000].copy_from_slice(&more);
    write(&mut engine, &mut members, 200_000, &more);
    assert!(read(&mut engine, &mut members, 0, model.len() as u64) == model);
    // One member back is not enough to revive the plex, nor to call it in sync.
    replace(&mut engine, &mut members, 3);
    assert_eq!(
        engine.set_slot_state(3, SlotState::InSync, false),
        Err(EngineError::PlexNotRevived { slot: 3, waiting: 4 })
    );
    assert_eq!(
        run(&mut engine, &mut members, Request::Recover { offset: 0, len: 4096 }),
        Err(EngineError::NothingToRecover)
    );
    // Both back: the plex is revived whole (never read until it is), while writes go on.
    members.no_reads[4] = true;
    engine.set_slot_state(4, SlotState::Recovering, false).unwrap();
    let during = pattern(10_000, 13);
    model[150_000..160_000].copy_from_slice(&during);
    write(&mut engine, &mut members, 150_000, &during);
    recover(&mut engine, &mut members, &[3, 4]);
    assert!(engine.slot_states().iter().all(|s| *s == SlotState::InSync));
    assert_eq!(sync(&mut engine, &mut members, model.len() as u64, false), 0);
    assert_each_plex_holds(&mut members, &model);
}

#[test]
fn a_raid5_plex_that_loses_two_members_is_revived_whole_with_its_parity_written_new() {
    let (mut engine, mut members, mut model) = whole();
    engine.set_slot_state(0, SlotState::Faulty, false).unwrap();
    assert_eq!(failed_slots(&engine.take_events()), vec![0]);
    // The second failure leaves the plex unable to give every byte: out, the third member too.
    engine.set_slot_state(2, SlotState::Faulty, false).unwrap();
    assert_eq!(failed_slots(&engine.take_events()), vec![1, 2]);
    // The last whole plex is not failed without force.
    assert_eq!(engine.set_slot_state(3, SlotState::Faulty, false), Err(EngineError::WouldFailArray { slot: 3 }));
    let update = pattern(90_000, 21);
    model[100_000..190_000].copy_from_slice(&update);
    write(&mut engine, &mut members, 100_000, &update);
    for slot in [0, 1, 2] {
        replace(&mut engine, &mut members, slot);
        // Reconstruct-write reads the plex's other members while it is revived: what it
        // computes from bytes not yet copied is rewritten when the copy reaches them.
        members.no_reads[slot] = false;
    }
    let during = pattern(5_000, 22);
    model[3_000..8_000].copy_from_slice(&during);
    write(&mut engine, &mut members, 3_000, &during);
    recover(&mut engine, &mut members, &[0, 1, 2]);
    assert_eq!(sync(&mut engine, &mut members, model.len() as u64, false), 0);
    assert_each_plex_holds(&mut members, &model);
}

#[test]
fn discards_cover_whole_stripes_of_the_raid5_plex() {
    let (mut engine, mut members, mut model) = whole();
    assert_eq!(engine.geometry().discard_granularity(), Some(128 * 1024));
    assert_eq!(
        run(&mut engine, &mut members, Request::Discard { offset: 4096, len: 128 * 1024 }),
        Err(EngineError::Unaligned { offset: 4096, len: 128 * 1024, granularity: 128 * 1024 })
    );
    assert_eq!(
        run(&mut engine, &mut members, Request::Discard { offset: 128 * 1024, len: 128 * 1024 }),
        Ok(Completion::Written)
    );
    model[128 * 1024..].fill(0);
    assert!(read(&mut engine, &mut members, 0, model.len() as u64) == model);
    assert_eq!(sync(&mut engine, &mut members, model.len() as u64, false), 0);
}

#[test]
fn the_whole_layout_maps_every_member_byte_back() {
    let g = mirror();
    let nested = g.nested().unwrap();
    assert_eq!(nested.plex_of(3), (1, 0));
    assert_eq!(nested.plex_of(2), (0, 2));
    // Every logical byte has a copy in each plex, and each copy maps back to it.
    for offset in (0..g.array_bytes()).step_by(4093) {
        let run = &g.runs(offset, 1)[0];
        assert_eq!(run.copies.len(), 2, "one copy per plex at {offset}");
        for &(slot, at) in &run.copies {
            assert_eq!(g.logical(slot, at), Some(offset), "slot {slot} at {at}");
        }
    }
    // Bytes of the concatenated plex past the mirror's end hold nothing of it.
    assert_eq!(g.logical(4, 127 * 1024), None);
    assert_eq!(g.member_data_bytes(), 256 * 1024, "the mirror, larger than any member");
}

/// A plex that cannot be read whole at open is out from the start: its other members are
/// faulty (stale, for the driver to record), with no event for what nothing did while running.
#[test]
fn a_plex_short_of_a_member_at_open_is_out_and_says_so_by_its_states() {
    let states = vec![SlotState::InSync, SlotState::InSync, SlotState::InSync, SlotState::Missing, SlotState::InSync];
    let mut engine = Engine::new(mirror(), states).unwrap();
    assert_eq!(engine.slot_states()[3..], [SlotState::Missing, SlotState::Faulty]);
    assert!(engine.take_events().is_empty());
    // The raid5 plex serves alone, and takes writes.
    let mut members = Members::new(5, MEMBER);
    let model = pattern(engine.size_bytes(), 7);
    fill(&mut engine, &mut members, &model);
    assert!(read(&mut engine, &mut members, 0, model.len() as u64) == model);
}

/// One plex's parity checked alone; refused for a plex without parity, one that does not exist,
/// or one out of service, and on a single-level array.
#[test]
fn one_plex_parity_is_checked_alone_and_refused_where_there_is_none() {
    let (mut engine, mut members, model) = whole();
    let size = model.len() as u64;
    members.disks[4].as_mut().unwrap()[5000] ^= 0x01;
    members.disks[2].as_mut().unwrap()[100] ^= 0x40;
    let id = engine.submit_plex_sync(0, 0, size, false).unwrap();
    let done = loop {
        if let Some((rid, result)) = engine.next_completion() {
            assert_eq!(rid, id);
            break result;
        }
        let io = engine.next_io().expect("member I/O or a completion");
        let result = members.exec(&io);
        engine.complete_io(io.id, result);
    };
    assert_eq!(done, Ok(Completion::Synced { mismatch_sectors: 8 }), "the parity row only, not the other plex");
    assert_eq!(engine.submit_plex_sync(1, 0, size, false), Err(EngineError::NoParityPlex { plex: 1, plexes: 2 }));
    assert_eq!(engine.submit_plex_sync(2, 0, size, false), Err(EngineError::NoParityPlex { plex: 2, plexes: 2 }));
    assert!(matches!(engine.submit_plex_sync(0, size, 1, false), Err(EngineError::OutOfRange { .. })));
    let mut flat = Engine::new(raid5_plex(), vec![SlotState::InSync; 3]).unwrap();
    assert_eq!(flat.submit_plex_sync(0, 0, 4096, false), Err(EngineError::NoParityPlex { plex: 0, plexes: 0 }));
    // Out of service: the raid5 plex lost two members.
    engine.set_slot_state(0, SlotState::Faulty, false).unwrap();
    engine.set_slot_state(1, SlotState::Faulty, false).unwrap();
    assert_eq!(engine.submit_plex_sync(0, 0, size, false), Err(EngineError::DegradedCheck));
}
