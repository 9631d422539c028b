//! Request splitting: a request becomes the fewest member I/Os (the pieces one member holds are
//! read or written together), and parity writes in progress hold a bounded amount of stripe
//! memory.

mod common;

use common::{drive, filled_array, geometries, use_policy, Members, MEMBER_BYTES};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uraid_engine::array::{Array, Completion, MemberIo, MemberOp, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::geometry::{Geometry, Redundancy};
use uraid_layout::{Level, ParityAlgorithm, ParityLayout, Raid0Layout, Raid0ZoneLayout};

const KIB: u64 = 1024;

fn parity(level: Level, disks: usize, chunk_bytes: u64) -> Geometry {
    let alg = ParityAlgorithm::from_md(level, if level == Level::Raid4 { 0 } else { 2 }).unwrap();
    Geometry::Parity(ParityLayout::new(level, alg, disks, (chunk_bytes / 512) as u32, MEMBER_BYTES / 512).unwrap())
}

/// Submit one request, perform every member I/O it emits, and return its completion with the
/// member I/Os it took, writes recorded as `Discard`s of their length (without their payload).
fn counted(array: &mut Array, members: &mut Members, request: Request) -> (Completion, Vec<MemberIo>) {
    let (done, ios) = common::run_recorded(array, members, request);
    let ios = ios
        .into_iter()
        .map(|io| match &io.op {
            MemberOp::Write { data } => MemberIo { op: MemberOp::Discard { len: data.len() as u64 }, ..io },
            _ => io,
        })
        .collect();
    (done, ios)
}

fn reads(ios: &[MemberIo]) -> usize {
    ios.iter().filter(|io| matches!(io.op, MemberOp::Read { .. })).count()
}

/// Writes are recorded as `Discard` by `counted`.
fn writes(ios: &[MemberIo]) -> usize {
    ios.iter().filter(|io| matches!(io.op, MemberOp::Discard { .. })).count()
}

/// Vinum's example: RAID-5 over 5 members, 4 KiB chunks, a 32.5 KiB read at 7.5 KiB spans three
/// stripes in 3 + 4 + 2 = 9 chunk pieces; one read per member is 5 (the member holding data of
/// stripes 0 and 2 reads stripe 1's parity chunk between them and drops it).
#[test]
fn vinum_read_takes_one_io_per_member() {
    let g = parity(Level::Raid5, 5, 4 * KIB);
    let (mut members, mut array, model) = filled_array(&g);
    let (offset, len) = (7 * KIB + 512, 32 * KIB + 512);
    assert_eq!(g.parity_runs(offset, len).len(), 9, "the request spans 9 chunk pieces");
    let (done, ios) = counted(&mut array, &mut members, Request::Read { offset, len });
    assert_eq!(done, Completion::Read(model[offset as usize..(offset + len) as usize].to_vec().into()));
    assert_eq!(ios.len(), 5, "{ios:?}");
    assert_eq!(reads(&ios), 5);
    let mut slots: Vec<usize> = ios.iter().map(|io| io.slot).collect();
    slots.sort_unstable();
    assert_eq!(slots, vec![0, 1, 2, 3, 4]);
}

/// raid0 over 4 members: 4 whole stripes are 4 member reads (a member's chunks of consecutive
/// stripes are contiguous on it), and 4 member writes.
#[test]
fn raid0_whole_stripes_take_one_io_per_member() {
    let comp = MEMBER_BYTES / 512;
    let g = Geometry::Raid0(Raid0Layout::new(&[comp; 4], 8, Raid0ZoneLayout::Unset).unwrap());
    let (mut members, mut array, model) = filled_array(&g);
    let stripe = 4 * 4 * KIB;
    let (offset, len) = (2 * stripe, 4 * stripe);
    assert_eq!(g.runs(offset, len).len(), 16);
    let (done, ios) = counted(&mut array, &mut members, Request::Read { offset, len });
    assert_eq!(done, Completion::Read(model[offset as usize..(offset + len) as usize].to_vec().into()));
    assert_eq!(reads(&ios), 4, "{ios:?}");
    let data: Vec<u8> = (0..len).map(|i| (i % 13) as u8).collect();
    let (done, ios) = counted(&mut array, &mut members, Request::Write { offset, data: data.clone().into() });
    assert_eq!(done, Completion::Written);
    assert_eq!((reads(&ios), writes(&ios)), (0, 4), "{ios:?}");
    let (done, _) = counted(&mut array, &mut members, Request::Read { offset, len });
    assert_eq!(done, Completion::Read(data.into()));
}

/// A write of 3 whole, aligned stripes on raid5 and raid6 needs no reads and is one write per
/// member: each member's data or parity chunks of the three stripes follow one another.
#[test]
fn full_stripe_writes_take_one_write_per_member() {
    for (level, disks) in [(Level::Raid5, 5), (Level::Raid6, 6), (Level::Raid4, 4)] {
        let g = parity(level, disks, 4 * KIB);
        let (mut members, mut array, mut model) = filled_array(&g);
        let width = g.stripe_data_bytes().unwrap();
        let (offset, len) = (5 * width, 3 * width);
        let data: Vec<u8> = (0..len).map(|i| (i % 7 + 1) as u8).collect();
        let (done, ios) = counted(&mut array, &mut members, Request::Write { offset, data: data.clone().into() });
        assert_eq!(done, Completion::Written);
        assert_eq!((reads(&ios), writes(&ios)), (0, disks), "{level}: {ios:?}");
        for io in &ios {
            assert_eq!((io.offset, io.op.clone()), (5 * 4 * KIB, MemberOp::Discard { len: 3 * 4 * KIB }), "{level}");
        }
        model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
        let size = array.size_bytes();
        let (done, _) = counted(&mut array, &mut members, Request::Read { offset: 0, len: size });
        assert!(done == Completion::Read(model.clone().into()), "{level}: contents differ");
        let check = Request::Sync { offset: 0, len: size, repair: false };
        let mismatches = match execute(&mut array, check, &mut |io| members.exec(io)).unwrap() {
            Completion::Synced { mismatch_sectors } => mismatch_sectors,
            other => panic!("{other:?}"),
        };
        assert_eq!(mismatches, 0, "{level}: parity disagrees after merged writes");
    }
}

/// Vinum's read with latent errors inside merged reads: in the parity chunk a merged read
/// crosses (not asked for: nothing to correct) and in a data chunk it covers (rebuilt from the
/// stripe, returned, written back). The bytes are right and only the asked-for bytes are
/// corrected.
#[test]
fn read_errors_inside_a_merged_read() {
    let g = parity(Level::Raid5, 5, 4 * KIB);
    let (mut members, mut array, model) = filled_array(&g);
    let snapshot = members.disks.clone();
    // Slot 3 holds data of stripes 0 and 2 and the parity of stripe 1 (left-symmetric).
    let roles = g.stripe_roles(1);
    assert_eq!(roles.p, 3);
    members.unreadable[3][(4 * KIB + 100) as usize..(4 * KIB + 200) as usize].fill(true);
    members.add_bad_range(3, 8 * KIB + 1000, 300);
    let (offset, len) = (7 * KIB + 512, 32 * KIB + 512);
    let (done, ios) = counted(&mut array, &mut members, Request::Read { offset, len });
    assert_eq!(done, Completion::Read(model[offset as usize..(offset + len) as usize].to_vec().into()));
    assert!(reads(&ios) > 5, "the failed merged read was retried piece by piece: {ios:?}");
    assert!(members.disks == snapshot, "the bad data bytes were rewritten");
    let events = array.take_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        matches!(events[0], uraid_engine::EngineEvent::ReadErrorCorrected { slot: 3, offset, .. } if offset == 8 * KIB)
    );
    assert!(array.slot_states().iter().all(|s| *s == SlotState::InSync));
}

/// With a member missing, the rows each survivor gives to the rebuilds of the pieces the
/// missing member held are read with the survivor's own pieces: one read per survivor.
#[test]
fn degraded_reads_read_each_survivor_once() {
    let g = parity(Level::Raid5, 5, 4 * KIB);
    let (mut members, _, model) = filled_array(&g);
    let mut slots = vec![SlotState::InSync; 5];
    slots[3] = SlotState::Missing;
    members.disks[3] = None;
    let mut array = Array::new(g.clone(), slots).unwrap();
    let (offset, len) = (7 * KIB + 512, 32 * KIB + 512);
    let (done, ios) = counted(&mut array, &mut members, Request::Read { offset, len });
    assert_eq!(done, Completion::Read(model[offset as usize..(offset + len) as usize].to_vec().into()));
    assert!(ios.iter().all(|io| io.slot != 3));
    // Stripe by stripe, the missing member's pieces (chunks 3 and 8, stripes 0 and 2) would
    // need 4 reads each on top of the survivors' 4 merged reads.
    assert_eq!(reads(&ios), 4, "{ios:?}");
}

/// Random reads spanning several stripes, on every level and layout, with latent read errors
/// on one member (where the level has redundancy) and with a member missing: the bytes equal
/// the model, and unreadable bytes that were asked for are rewritten. Mirrors read with a read
/// policy the seed picks.
fn random_reads(seed: u64, reads: usize, errors: bool, absent: bool) {
    for (name, g) in geometries() {
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut members, mut array, model) = filled_array(&g);
        let pick = (seed >> 40) as usize;
        let n = g.raid_disks();
        let redundant = g.max_degraded() > 0;
        let mut missing = None;
        if absent && redundant {
            let slot = rng.gen_range(0..n);
            let mut slots = vec![SlotState::InSync; n];
            slots[slot] = SlotState::Missing;
            members.disks[slot] = None;
            match Array::new(g.clone(), slots) {
                Ok(a) => array = a,
                Err(_) => continue, // a raid10 layout that needs that slot
            }
            missing = Some(slot);
        }
        // Read errors besides a missing member only where any two members may be lost (two
        // parity chunks; a mirror may lose both copies of a chunk).
        let any_two = matches!(g.redundancy(), Redundancy::Parity { data_disks } if n - data_disks >= 2);
        if errors && redundant && (missing.is_none() || any_two) {
            let slot = (rng.gen_range(1..n) + missing.unwrap_or(0)) % n;
            for _ in 0..6 {
                let len = rng.gen_range(1..3000u64);
                let off = rng.gen_range(0..g.member_data_bytes() - len);
                members.add_bad_range(slot, off, len);
            }
        }
        let policy = use_policy(&mut array, pick);
        let name = format!("{name} ({policy})");
        let size = array.size_bytes();
        let chunk = g.chunk_bytes().max(4096);
        let mut requests = Vec::new();
        for _ in 0..reads {
            let len = rng.gen_range(1..(chunk * 9).min(size));
            let offset = rng.gen_range(0..size - len);
            requests.push((offset, len));
        }
        // One at a time, then all at once with member I/O completing in random order.
        for &(offset, len) in &requests {
            let got = execute(&mut array, Request::Read { offset, len }, &mut |io| members.exec(io)).unwrap();
            assert!(
                got == Completion::Read(model[offset as usize..(offset + len) as usize].to_vec().into()),
                "{name}: read {offset}+{len} differs"
            );
        }
        let results = drive(
            &mut array,
            &mut members,
            requests.iter().map(|&(offset, len)| Request::Read { offset, len }).collect(),
            &mut rng,
        );
        for (&(offset, len), got) in requests.iter().zip(results) {
            assert!(
                got.unwrap() == Completion::Read(model[offset as usize..(offset + len) as usize].to_vec().into()),
                "{name}: concurrent read {offset}+{len} differs"
            );
        }
        assert!(
            array.slot_states().iter().filter(|s| **s != SlotState::InSync).count() <= usize::from(absent),
            "{name}: a member left"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn merged_reads_match_the_model(seed in any::<u64>()) {
        random_reads(seed, 6, false, false);
    }

    #[test]
    fn merged_reads_survive_read_errors(seed in any::<u64>()) {
        random_reads(seed, 6, true, false);
    }

    #[test]
    fn merged_reads_on_degraded_arrays(seed in any::<u64>()) {
        random_reads(seed, 4, false, true);
    }

    #[test]
    fn merged_reads_on_degraded_arrays_with_read_errors(seed in any::<u64>()) {
        random_reads(seed, 4, true, true);
    }
}

/// Many concurrent writes of many stripes under a small stripe memory limit: the memory held
/// never exceeds the limit, every write completes, and the contents are right.
#[test]
fn stripe_memory_stays_under_its_limit() {
    for (level, disks, logged) in [(Level::Raid5, 5, false), (Level::Raid6, 6, false), (Level::Raid5, 4, true)] {
        let g = parity(level, disks, 4 * KIB);
        let (mut members, mut array, mut model) = filled_array(&g);
        if logged {
            array.enable_ppl(uraid_engine::ppl::PplConfig { signature: 7, area_bytes: 4096 + 8 * 8192 });
        }
        let width = g.stripe_data_bytes().unwrap();
        // Three full stripes' worth: charge is 2 * members * rows.
        let limit = 3 * 2 * disks as u64 * 4 * KIB;
        array.set_stripe_memory_limit(limit);
        assert_eq!(array.stripe_memory_limit(), limit);
        array.take_stripe_memory_peak();
        let mut rng = StdRng::seed_from_u64(disks as u64);
        let size = array.size_bytes();
        let mut ids = Vec::new();
        for i in 0..12u64 {
            // Big aligned writes, unaligned ones (read-modify-write and reconstruct-write), and
            // overlapping ones.
            let len = match i % 3 {
                0 => width * rng.gen_range(4..10),
                1 => rng.gen_range(1..width * 5),
                _ => rng.gen_range(1..5000),
            };
            let offset = match i % 3 {
                0 => rng.gen_range(0..(size - len) / width) * width,
                _ => rng.gen_range(0..size - len),
            };
            let data: Vec<u8> = (0..len).map(|b| (b as u8).wrapping_add(i as u8 * 17)).collect();
            model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
            ids.push(array.submit(Request::Write { offset, data: data.into() }).unwrap());
            assert!(array.stripe_memory_in_use() <= limit);
        }
        let mut pool = Vec::new();
        let mut done = Vec::new();
        loop {
            while let Some((id, result)) = array.next_completion() {
                assert_eq!(result.unwrap(), Completion::Written);
                done.push(id);
            }
            while let Some(io) = array.next_io() {
                pool.push(io);
            }
            if pool.is_empty() {
                break;
            }
            let io: MemberIo = pool.swap_remove(rng.gen_range(0..pool.len()));
            let result = members.exec(&io);
            array.complete_io(io.id, result);
            assert!(array.stripe_memory_in_use() <= limit, "{level}: {} held", array.stripe_memory_in_use());
        }
        done.sort_unstable();
        assert_eq!(done, ids, "{level}: not every write completed");
        assert_eq!(array.stripe_memory_in_use(), 0);
        let peak = array.take_stripe_memory_peak();
        assert!(peak <= limit && peak > limit / 2, "{level}: peak {peak} of {limit}");
        let got = execute(&mut array, Request::Read { offset: 0, len: size }, &mut |io| members.exec(io)).unwrap();
        assert!(got == Completion::Read(model.clone().into()), "{level} logged {logged}: contents differ");
    }
}

/// A limit smaller than one stripe does not deadlock: each stripe then runs alone.
#[test]
fn stripe_memory_limit_below_one_stripe_still_progresses() {
    let g = parity(Level::Raid5, 5, 4 * KIB);
    let (mut members, mut array, mut model) = filled_array(&g);
    array.set_stripe_memory_limit(1);
    array.take_stripe_memory_peak();
    let mut rng = StdRng::seed_from_u64(3);
    let requests: Vec<Request> = (0..4u64)
        .map(|i| {
            let offset = i * 20_000 + 100;
            let data = vec![i as u8 + 1; 50_000];
            model[offset as usize..offset as usize + data.len()].copy_from_slice(&data);
            Request::Write { offset, data: data.into() }
        })
        .collect();
    for r in drive(&mut array, &mut members, requests, &mut rng) {
        assert_eq!(r.unwrap(), Completion::Written);
    }
    assert_eq!(array.take_stripe_memory_peak(), 2 * 5 * 4 * KIB, "one stripe at a time");
    let size = array.size_bytes();
    let got = execute(&mut array, Request::Read { offset: 0, len: size }, &mut |io| members.exec(io)).unwrap();
    assert!(got == Completion::Read(model.into()));
}

/// Data the engine only passes through is not copied: a raid0 write reaches the members as
/// slices of the request's own buffer (gathered per member, not joined), and a read is answered
/// with the member reads' own buffers. Checked by address, so a copy anywhere fails it.
#[test]
fn passed_through_data_is_not_copied() {
    let comp = MEMBER_BYTES / 512;
    // 4 KiB chunks over 4 members: 32 KiB is two stripes, two chunks per member.
    let g = Geometry::Raid0(Raid0Layout::new(&[comp; 4], 8, Raid0ZoneLayout::Unset).unwrap());
    let mut members = Members::new(4, MEMBER_BYTES);
    let mut array = Array::new(g, vec![SlotState::InSync; 4]).unwrap();
    let data = uraid_testkit::noise(7, 32 * KIB as usize);
    let sent = data.clone();
    let (start, end) = (sent.as_ptr() as usize, sent.as_ptr() as usize + sent.len());
    array.submit(Request::Write { offset: 0, data: sent.into() }).unwrap();
    let mut member_writes = 0;
    while let Some(io) = array.next_io() {
        let MemberOp::Write { data: piece } = &io.op else { panic!("a write emits writes: {io:?}") };
        member_writes += 1;
        assert_eq!(piece.piece_count(), 2, "one write per member, gathering its two chunks");
        for p in piece.pieces() {
            let at = p.as_ptr() as usize;
            assert!(at >= start && at + p.len() <= end, "member write data was copied out of the request's buffer");
        }
        let result = members.exec(&io);
        array.complete_io(io.id, result);
    }
    assert_eq!(member_writes, 4);
    assert!(matches!(array.next_completion(), Some((_, Ok(Completion::Written)))));

    array.submit(Request::Read { offset: 0, len: 32 * KIB }).unwrap();
    let mut read_buffers = Vec::new();
    while let Some(io) = array.next_io() {
        let result = members.exec(&io);
        if let uraid_engine::IoResult::Read(buf) = &result {
            read_buffers.push((buf.as_ptr() as usize, buf.len()));
        }
        array.complete_io(io.id, result);
    }
    assert_eq!(read_buffers.len(), 4, "one read per member");
    let Some((_, Ok(Completion::Read(got)))) = array.next_completion() else { panic!("the read completes") };
    assert_eq!(got, data);
    assert_eq!(got.piece_count(), 8, "one piece per chunk, none joined");
    for p in got.pieces() {
        let at = p.as_ptr() as usize;
        assert!(
            read_buffers.iter().any(|&(b, len)| at >= b && at + p.len() <= b + len),
            "read data was copied out of the member read's buffer"
        );
    }
}
