//! A member failure holds the partial parity log until the driver has recorded it
//! (`Array::set_log_hold_on_failure`): no log header goes out, so no entry is retired, and a
//! stripe with nothing to log (its parity member is the one that failed) is not written either.
//! md does the same by leaving every stripe alone while `MD_SB_CHANGE_PENDING` is set; without
//! it a crash before the failure is recorded brings the failed member back in sync beside
//! parity that no longer matches it, with nothing in the log to set it right.

mod common;

use common::{Members, MEMBER_BYTES};
use uraid_engine::array::{Array, Completion, IoResult, MemberIo, MemberIoError, MemberOp, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::geometry::Geometry;
use uraid_engine::ppl::PplConfig;
use uraid_layout::{Level, ParityAlgorithm, ParityLayout};

const CONFIG: PplConfig = PplConfig { signature: 0x5eed, area_bytes: 4096 + 8 * 8192 };
const CHUNK: u64 = 8192;

fn raid5(disks: usize) -> Geometry {
    let alg = ParityAlgorithm::from_md(Level::Raid5, 2).unwrap();
    Geometry::Parity(ParityLayout::new(Level::Raid5, alg, disks, 16, MEMBER_BYTES / 512).unwrap())
}

/// Perform every member I/O the engine has out, and what follows from them, until it has none;
/// writes for which `fail` holds fail. The I/Os performed, in order.
fn pump(array: &mut Array, members: &mut Members, fail: &dyn Fn(&MemberIo) -> bool) -> Vec<MemberIo> {
    let mut done = Vec::new();
    while let Some(io) = array.next_io() {
        let result =
            if fail(&io) { IoResult::Failed(MemberIoError::other("injected write error")) } else { members.exec(&io) };
        array.complete_io(io.id, result.handing_back(io.op.clone()));
        done.push(io);
    }
    done
}

fn writes_and_log_writes(ios: &[MemberIo]) -> (usize, usize) {
    let writes = ios.iter().filter(|io| matches!(io.op, MemberOp::Write { .. })).count();
    let logs = ios.iter().filter(|io| matches!(io.op, MemberOp::LogWrite { .. })).count();
    (writes, logs)
}

/// The first stripe at or after `from` whose parity sits on `slot` (`on`) or not (`!on`).
fn stripe_with_parity(g: &Geometry, slot: usize, on: bool, from: u64) -> u64 {
    (from..).find(|&s| (g.stripe_roles(s).p == slot) == on).unwrap()
}

#[test]
fn a_member_failure_holds_log_headers_and_unlogged_stripes_until_it_is_recorded() {
    let g = raid5(4);
    let data_disks = 3u64;
    let n = g.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
    let fill: Vec<u8> = (0..array.size_bytes()).map(|i| (i % 251) as u8).collect();
    execute(&mut array, Request::Write { offset: 0, data: fill.clone().into() }, &mut |io| members.exec(io)).unwrap();
    array.enable_ppl(CONFIG.clone());
    array.set_log_hold_on_failure(true);
    let mut model = fill;

    // A write to stripe 0's first data chunk fails on its member: the member leaves the array
    // and the log is held.
    let failed = g.stripe_roles(0).data[0];
    let w1 = array.submit(Request::Write { offset: 1024, data: vec![1u8; 2048].into() }).unwrap();
    pump(&mut array, &mut members, &|io| io.slot == failed && matches!(io.op, MemberOp::Write { .. }));
    assert_eq!(array.slot_states()[failed], SlotState::Faulty);
    assert!(array.log_held(), "the failure holds the log");
    model[1024..3072].fill(1);
    let finished: Vec<_> = std::iter::from_fn(|| array.next_completion()).collect();
    assert!(finished.iter().any(|(id, r)| *id == w1 && r.is_ok()), "the stripe finished on the others: {finished:?}");

    // A stripe whose parity was on the failed member has nothing to log: it waits. So does a
    // stripe that needs a log header.
    let unlogged = stripe_with_parity(&g, failed, true, 1);
    let logged = stripe_with_parity(&g, failed, false, 1);
    let at = |stripe: u64| stripe * data_disks * CHUNK + 512;
    let w2 = array.submit(Request::Write { offset: at(unlogged), data: vec![2u8; 1024].into() }).unwrap();
    let w3 = array.submit(Request::Write { offset: at(logged), data: vec![3u8; 1024].into() }).unwrap();
    let during = pump(&mut array, &mut members, &|_| false);
    assert_eq!(writes_and_log_writes(&during), (0, 0), "nothing is written while held: {during:?}");
    assert!(array.next_completion().is_none(), "both writes wait");

    // Recorded: the log header goes out, then both stripes are written.
    array.release_log_hold();
    assert!(!array.log_held());
    let after = pump(&mut array, &mut members, &|_| false);
    let (writes, logs) = writes_and_log_writes(&after);
    assert!(logs >= 1 && writes >= 2, "released: {after:?}");
    let finished: Vec<_> = std::iter::from_fn(|| array.next_completion()).collect();
    for id in [w2, w3] {
        assert!(finished.iter().any(|(done, r)| *done == id && r.is_ok()), "request {id} finished: {finished:?}");
    }
    model[at(unlogged) as usize..at(unlogged) as usize + 1024].fill(2);
    model[at(logged) as usize..at(logged) as usize + 1024].fill(3);
    let size = array.size_bytes();
    let read = execute(&mut array, Request::Read { offset: 0, len: size }, &mut |io| members.exec(io)).unwrap();
    let Completion::Read(got) = read else { panic!("a read") };
    assert!(got.into_vec() == model, "the degraded array reads what was written");
}

#[test]
fn without_the_opt_in_a_failure_holds_nothing() {
    let g = raid5(4);
    let n = g.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
    array.enable_ppl(CONFIG.clone());
    let failed = g.stripe_roles(0).data[0];
    array.submit(Request::Write { offset: 1024, data: vec![1u8; 2048].into() }).unwrap();
    pump(&mut array, &mut members, &|io| io.slot == failed && matches!(io.op, MemberOp::Write { .. }));
    assert_eq!(array.slot_states()[failed], SlotState::Faulty);
    assert!(!array.log_held());
}

/// A stripe whose log write is out when another member fails: the log write completing does not
/// release the stripe's member writes while the failure is unrecorded. Written then, the stripe
/// would skip the failed member, which a crash before the record brings back in sync with its
/// old contents beside the new parity; md touches no stripe while a superblock change is
/// pending.
#[test]
fn a_logged_stripe_waits_for_a_failure_recorded_after_its_log_write_went_out() {
    let g = raid5(4);
    let n = g.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
    array.enable_ppl(CONFIG.clone());
    array.set_log_hold_on_failure(true);

    // A write to stripe 0's first data chunk: its reads come back, its log write goes out and
    // is kept out.
    let roles = g.stripe_roles(0);
    let written = roles.data[0];
    let w = array.submit(Request::Write { offset: 1024, data: vec![7u8; 2048].into() }).unwrap();
    let mut log_write = None;
    while let Some(io) = array.next_io() {
        if matches!(io.op, MemberOp::LogWrite { .. }) {
            log_write = Some(io);
            continue;
        }
        let result = members.exec(&io);
        array.complete_io(io.id, result.handing_back(io.op.clone()));
    }
    let log_write = log_write.expect("the stripe's partial parity is logged first");
    assert_eq!(log_write.slot, roles.p, "logged on the parity member");

    // The member the stripe writes its data to is failed (as `mdadm --fail`), then the log
    // write completes.
    array.set_slot_state(written, SlotState::Faulty, false).unwrap();
    assert!(array.log_held());
    let result = members.exec(&log_write);
    array.complete_io(log_write.id, result.handing_back(log_write.op.clone()));
    let during = pump(&mut array, &mut members, &|_| false);
    assert_eq!(writes_and_log_writes(&during).0, 0, "no stripe write while the failure is unrecorded: {during:?}");
    assert!(array.next_completion().is_none(), "the write waits");

    // Recorded: the stripe is written (without the failed member) and the request finishes.
    array.release_log_hold();
    let after = pump(&mut array, &mut members, &|_| false);
    assert!(after.iter().any(|io| io.slot == roles.p && matches!(io.op, MemberOp::Write { .. })), "{after:?}");
    assert!(after.iter().all(|io| io.slot != written), "nothing goes to the failed member: {after:?}");
    let finished: Vec<_> = std::iter::from_fn(|| array.next_completion()).collect();
    assert!(finished.iter().any(|(id, r)| *id == w && r.is_ok()), "{finished:?}");
    let read = execute(&mut array, Request::Read { offset: 1024, len: 2048 }, &mut |io| members.exec(io)).unwrap();
    let Completion::Read(got) = read else { panic!("a read") };
    assert!(got.into_vec() == vec![7u8; 2048], "the degraded array reads what was written");
}
