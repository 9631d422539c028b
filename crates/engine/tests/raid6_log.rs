//! raid6 with a partial parity log: each stripe write is logged on both parity members, P and
//! Q, so that its entry outlives the loss of either. The crash in these tests keeps the data
//! member's write and loses the write to one parity member, and the other parity member dies
//! with the crash; a second member (one the write left alone) is out as well, so the stripe's
//! rows on it can only be rebuilt through the parity member that lost its write. Only an entry
//! for the stripe in that member's own log makes them right again.

mod common;

use common::{Members, MEMBER_BYTES};
use uraid_engine::array::{Array, Completion, IoResult, MemberIo, MemberIoError, MemberOp, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::geometry::Geometry;
use uraid_engine::ppl::{latest_header, replay, MemberLog, PplConfig, ReplayReport};
use uraid_layout::{Level, ParityAlgorithm, ParityLayout};
use uraid_md_format::ppl::{PplHeader, HEADER_BYTES};

const CONFIG: PplConfig = PplConfig { signature: 0x5eed, area_bytes: 4096 + 8 * 8192 };

/// Rows 1..3 KiB of data chunk 0 of stripe 0: data chunk 1 of those rows is left alone.
const OFFSET: u64 = 1024;
const LEN: usize = 2048;

fn raid6(disks: usize) -> Geometry {
    let alg = ParityAlgorithm::from_md(Level::Raid6, 2).unwrap();
    Geometry::Parity(ParityLayout::new(Level::Raid6, alg, disks, 16, MEMBER_BYTES / 512).unwrap())
}

/// A raid6 array filled with a pattern (returned too), logging from now on.
fn filled(g: &Geometry) -> (Members, Array, Vec<u8>) {
    let n = g.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
    let data: Vec<u8> = (0..array.size_bytes()).map(|i| (i % 251) as u8).collect();
    execute(&mut array, Request::Write { offset: 0, data: data.clone().into() }, &mut |io| members.exec(io)).unwrap();
    array.enable_ppl(CONFIG.clone());
    (members, array, data)
}

/// The newest header of a member's log.
fn header_of(members: &Members, slot: usize) -> Option<PplHeader> {
    latest_header(&members.logs[slot], CONFIG.signature).map(|(_, h)| h)
}

/// Replay the logs of the members in sync in `slots`, as assembly does.
fn replay_all(g: &Geometry, slots: &[SlotState], members: &mut Members) -> ReplayReport {
    let areas = members.logs.clone();
    let found: Vec<(usize, PplHeader, &[u8])> = (0..slots.len())
        .filter(|&s| slots[s] == SlotState::InSync)
        .filter_map(|s| {
            let (at, header) = latest_header(&areas[s], CONFIG.signature)?;
            Some((s, header, &areas[s][at + HEADER_BYTES..]))
        })
        .collect();
    let logs: Vec<MemberLog> = found.iter().map(|(slot, header, pp)| MemberLog { slot: *slot, header, pp }).collect();
    replay(g, slots, &logs, members).unwrap()
}

#[test]
fn a_raid6_stripe_is_logged_on_p_and_q_and_replays_with_either_lost() {
    let g = raid6(6);
    let roles = g.stripe_roles(0);
    let (p, q) = (roles.p, roles.q.unwrap());
    let chunk = g.chunk_bytes();
    let untouched = roles.data[1];
    for (lost_write, dies) in [(q, p), (p, q)] {
        let (mut members, mut array, mut model) = filled(&g);
        let new = vec![0xa5u8; LEN];
        model[OFFSET as usize..OFFSET as usize + LEN].copy_from_slice(&new);
        // The crash keeps the data member's write and loses `lost_write`'s.
        let mut exec = |io: &MemberIo| {
            if io.slot == lost_write && matches!(io.op, MemberOp::Write { .. }) {
                return IoResult::Done;
            }
            members.exec(io)
        };
        let done = execute(&mut array, Request::Write { offset: OFFSET, data: new.into() }, &mut exec).unwrap();
        assert_eq!(done, Completion::Written);
        let (on_p, on_q) = (header_of(&members, p).unwrap(), header_of(&members, q).unwrap());
        assert_eq!(on_p.entries.len(), 1, "P's log holds the stripe: {on_p:?}");
        assert_eq!(on_p.entries, on_q.entries, "Q's log holds the same entry");
        assert_eq!(on_p.entries[0].parity_disk as usize, p, "an entry names P, wherever it is kept");
        // `dies` is gone with the crash, `untouched` is out as well.
        let mut slots = vec![SlotState::InSync; g.raid_disks()];
        slots[dies] = SlotState::Missing;
        slots[untouched] = SlotState::Missing;
        members.disks[dies] = None;
        members.disks[untouched].as_mut().unwrap().fill(0xee);
        let r = replay_all(&g, &slots, &mut members);
        assert_eq!((r.recovered, r.bad, r.duplicates), (1, 0, 0), "slot {dies} lost: {r:?}");
        let mut after = Array::new(g.clone(), slots).unwrap();
        let read = execute(&mut after, Request::Read { offset: 0, len: 2 * chunk }, &mut |io| members.exec(io));
        let Ok(Completion::Read(got)) = read else { panic!("reading back failed: {read:?}") };
        assert!(
            got.into_vec() == model[..2 * chunk as usize],
            "slot {dies} died with the crash, slot {lost_write} lost its write: stripe 0 reads back wrong"
        );
    }
}

#[test]
fn an_entry_on_both_parity_members_is_applied_once() {
    let g = raid6(5);
    let (mut members, mut array, mut model) = filled(&g);
    let roles = g.stripe_roles(0);
    let new = vec![0x3cu8; LEN];
    model[OFFSET as usize..OFFSET as usize + LEN].copy_from_slice(&new);
    // Only the data write lands: P and Q both disagree with it until the replay.
    let mut exec = |io: &MemberIo| {
        if (io.slot == roles.p || Some(io.slot) == roles.q) && matches!(io.op, MemberOp::Write { .. }) {
            return IoResult::Done;
        }
        members.exec(io)
    };
    execute(&mut array, Request::Write { offset: OFFSET, data: new.into() }, &mut exec).unwrap();
    let slots = vec![SlotState::InSync; g.raid_disks()];
    let r = replay_all(&g, &slots, &mut members);
    assert_eq!((r.recovered, r.duplicates, r.bad), (1, 1, 0), "{r:?}");
    // Every member but one in turn: P and Q agree with the data again.
    for gone in 0..g.raid_disks() {
        let mut slots = vec![SlotState::InSync; g.raid_disks()];
        slots[gone] = SlotState::Missing;
        let mut degraded = Array::new(g.clone(), slots).unwrap();
        let size = degraded.size_bytes();
        let read = execute(&mut degraded, Request::Read { offset: 0, len: size }, &mut |io| members.exec(io));
        let Ok(Completion::Read(got)) = read else { panic!("reading without slot {gone} failed: {read:?}") };
        assert!(got.into_vec() == model, "reading without slot {gone} differs");
    }
}

/// The member I/Os the engine has emitted and not yet been told about.
fn outbox(array: &mut Array) -> Vec<MemberIo> {
    std::iter::from_fn(|| array.next_io()).collect()
}

#[test]
fn a_raid6_stripe_waits_for_both_log_writes_and_goes_on_with_one_if_the_other_member_fails() {
    let g = raid6(5);
    let roles = g.stripe_roles(0);
    let (p, q) = (roles.p, roles.q.unwrap());
    for q_log_fails in [false, true] {
        let (mut members, mut array, _) = filled(&g);
        array.submit(Request::Write { offset: OFFSET, data: vec![7u8; LEN].into() }).unwrap();
        // Reads first (read-modify-write or reconstruct-write), then the two log writes.
        let mut logs = Vec::new();
        loop {
            let ios = outbox(&mut array);
            assert!(!ios.is_empty(), "the engine stalled before logging");
            for io in ios {
                match io.op {
                    MemberOp::LogWrite { .. } => logs.push(io),
                    MemberOp::Read { .. } => {
                        let r = members.exec(&io);
                        array.complete_io(io.id, r);
                    }
                    ref other => panic!("{other:?} to slot {} before the log is durable", io.slot),
                }
            }
            if logs.len() == 2 {
                break;
            }
        }
        let mut slots: Vec<usize> = logs.iter().map(|io| io.slot).collect();
        slots.sort_unstable();
        let mut want = vec![p, q];
        want.sort_unstable();
        assert_eq!(slots, want, "one log write to P and one to Q");
        let (to_p, to_q) = if logs[0].slot == p { (&logs[0], &logs[1]) } else { (&logs[1], &logs[0]) };
        let r = members.exec(to_p);
        array.complete_io(to_p.id, r);
        assert!(outbox(&mut array).is_empty(), "nothing goes out while Q's log write is pending");
        let r = if q_log_fails { IoResult::Failed(MemberIoError::other("injected fault")) } else { members.exec(to_q) };
        array.complete_io(to_q.id, r);
        let writes: Vec<usize> =
            outbox(&mut array).iter().filter(|io| matches!(io.op, MemberOp::Write { .. })).map(|io| io.slot).collect();
        assert!(writes.contains(&roles.data[0]) && writes.contains(&p), "the stripe is written: {writes:?}");
        assert_eq!(writes.contains(&q), !q_log_fails, "Q is written unless it failed: {writes:?}");
        assert_eq!(array.slot_states()[q] == SlotState::Faulty, q_log_fails);
    }
}
