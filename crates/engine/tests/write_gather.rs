//! Writes gathered into whole stripes while the driver is plugged (`Array::plug`): every
//! request still finishes, in a driver that unplugs as the service does; data and parity come
//! out as without plugging; sequential writes then read less; order with later requests holds.

mod common;

use std::collections::{HashMap, VecDeque};

use common::{check_consistent, read_all, Members, MEMBER_BYTES};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uraid_engine::array::{Array, Completion, MemberIo, MemberOp, Request, RequestId, SlotState};
use uraid_engine::geometry::Geometry;
use uraid_engine::EngineError;
use uraid_layout::{Level, ParityAlgorithm, ParityLayout};

fn raid(level: Level, disks: usize) -> Geometry {
    let alg = ParityAlgorithm::from_md(level, 2).unwrap();
    Geometry::Parity(ParityLayout::new(level, alg, disks, 8, MEMBER_BYTES / 512).unwrap())
}

/// A driver like the service's engine thread: each turn it takes up to `batch` requests from
/// its queue, plugged if `plug` says so, unplugs, and then completes one member I/O (of those
/// issued, in random order), keeping at most `depth` requests of `queue` in flight. Returns
/// every result and the member reads performed.
fn run_plugged(
    array: &mut Array,
    members: &mut Members,
    queue: Vec<Request>,
    (depth, batch, plug): (usize, usize, bool),
    rng: &mut StdRng,
) -> (Vec<Result<Completion, EngineError>>, usize) {
    let mut queue: VecDeque<(usize, Request)> = queue.into_iter().enumerate().collect();
    let total = queue.len();
    let mut ids: HashMap<RequestId, usize> = HashMap::new();
    let mut results: Vec<Option<Result<Completion, EngineError>>> = vec![None; total];
    let mut pool: Vec<MemberIo> = Vec::new();
    let mut reads = 0;
    let mut in_flight = 0;
    loop {
        if plug {
            array.plug();
        }
        let take = rng.gen_range(1..=batch);
        for _ in 0..take {
            if in_flight >= depth {
                break;
            }
            let Some((i, r)) = queue.pop_front() else { break };
            ids.insert(array.submit(r).expect("accepted"), i);
            in_flight += 1;
        }
        array.unplug();
        while let Some((id, result)) = array.next_completion() {
            results[ids.remove(&id).expect("a known request")] = Some(result);
            in_flight -= 1;
        }
        while let Some(io) = array.next_io() {
            pool.push(io);
        }
        if pool.is_empty() {
            if in_flight == 0 && queue.is_empty() {
                break;
            }
            assert!(
                in_flight < depth && !queue.is_empty(),
                "engine stalled: {in_flight} requests in flight, no member I/O"
            );
            continue;
        }
        let io = pool.swap_remove(rng.gen_range(0..pool.len()));
        if matches!(io.op, MemberOp::Read { .. }) {
            reads += 1;
        }
        let result = members.exec(&io);
        array.complete_io(io.id, result);
    }
    assert_eq!(array.in_flight(), 0);
    (results.into_iter().map(|r| r.expect("every request finished")).collect(), reads)
}

fn sequential_writes(size: u64, piece: u64, rng: &mut StdRng) -> (Vec<Request>, Vec<u8>) {
    let mut model = vec![0u8; size as usize];
    let mut out = Vec::new();
    let mut at = 0;
    while at < size {
        let len = piece.min(size - at);
        let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        model[at as usize..(at + len) as usize].copy_from_slice(&data);
        out.push(Request::Write { offset: at, data: data.into() });
        at += len;
    }
    (out, model)
}

#[test]
fn sequential_writes_gather_into_stripes_and_read_less() {
    for (level, disks) in [(Level::Raid5, 4), (Level::Raid6, 5), (Level::Raid4, 3)] {
        let g = raid(level, disks);
        let mut reads_by_batch = Vec::new();
        for (batch, plug) in [(1, false), (1, true), (8, true)] {
            let mut rng = StdRng::seed_from_u64(7);
            let mut members = Members::new(disks, MEMBER_BYTES);
            let mut array = Array::new(g.clone(), vec![SlotState::InSync; disks]).unwrap();
            let size = array.size_bytes();
            // A piece that never lines up with a stripe: every write alone is partial.
            let (writes, model) = sequential_writes(size, 5 * 1024, &mut rng);
            let (results, reads) = run_plugged(&mut array, &mut members, writes, (32, batch, plug), &mut rng);
            assert!(results.iter().all(|r| matches!(r, Ok(Completion::Written))), "{level:?}: {results:?}");
            assert!(read_all(&mut array, &mut members) == model, "{level:?} batch {batch}: data differs");
            check_consistent(&mut array, &mut members, &format!("{level:?} batch {batch}"));
            reads_by_batch.push(reads);
            eprintln!("{level:?} batch {batch} plugged {plug}: {reads} member reads");
        }
        // Unplugged, plugged one request at a time, plugged in batches.
        assert!(
            reads_by_batch[1] * 2 < reads_by_batch[0] && reads_by_batch[2] * 2 < reads_by_batch[0],
            "{level:?}: gathering should at least halve the member reads: {reads_by_batch:?}"
        );
    }
}

#[test]
fn random_writes_reads_and_flushes_keep_their_order() {
    let g = raid(Level::Raid5, 4);
    for seed in 0..40 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut members = Members::new(4, MEMBER_BYTES);
        let mut array = Array::new(g.clone(), vec![SlotState::InSync; 4]).unwrap();
        let size = array.size_bytes();
        let mut model = vec![0u8; size as usize];
        let mut requests = Vec::new();
        // (index, offset, the model's bytes there when the read was submitted)
        let mut expect: Vec<(usize, u64, Vec<u8>)> = Vec::new();
        let mut cursor = 0u64;
        for i in 0..60 {
            let roll = rng.gen_range(0..10);
            let (offset, len) = if roll < 5 {
                // Sequential, so runs form and some stay held.
                let len = rng.gen_range(1..=9000u64).min(size - cursor.min(size - 1));
                let off = if cursor + len > size { 0 } else { cursor };
                cursor = off + len;
                (off, len)
            } else {
                let len = rng.gen_range(1..=20000u64);
                (rng.gen_range(0..size - len), len)
            };
            if roll < 8 {
                let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
                requests.push(Request::Write { offset, data: data.into() });
            } else if roll == 8 {
                expect.push((i, offset, model[offset as usize..(offset + len) as usize].to_vec()));
                requests.push(Request::Read { offset, len });
            } else {
                requests.push(Request::Flush);
            }
        }
        // The engine runs overlapping requests in arrival order whatever the depth: each read
        // reads what every earlier write left.
        let (results, _) = run_plugged(&mut array, &mut members, requests, (6, 4, true), &mut rng);
        for (i, _, want) in expect {
            match &results[i] {
                Ok(Completion::Read(data)) => assert!(data.to_vec() == want, "seed {seed}: read {i} differs"),
                other => panic!("seed {seed}: read {i}: {other:?}"),
            }
        }
        assert!(read_all(&mut array, &mut members) == model, "seed {seed}: data differs");
        check_consistent(&mut array, &mut members, &format!("seed {seed}"));
    }
}

#[test]
fn a_held_write_goes_before_a_later_request_and_at_the_unplug_when_nothing_else_runs() {
    let g = raid(Level::Raid5, 4);
    let mut members = Members::new(4, MEMBER_BYTES);
    let mut array = Array::new(g, vec![SlotState::InSync; 4]).unwrap();
    array.plug();
    let w = array.submit(Request::Write { offset: 100, data: vec![7u8; 1000].into() }).unwrap();
    assert!(array.next_io().is_none(), "a partial-stripe write is held while plugged");
    assert_eq!(array.in_flight(), 1);
    // A read of the same bytes, submitted after it, releases it first and reads it.
    let r = array.submit(Request::Read { offset: 100, len: 1000 }).unwrap();
    array.unplug();
    let mut done = HashMap::new();
    loop {
        while let Some((id, result)) = array.next_completion() {
            done.insert(id, result);
        }
        let Some(io) = array.next_io() else { break };
        let result = members.exec(&io);
        array.complete_io(io.id, result);
    }
    assert!(matches!(done[&w], Ok(Completion::Written)));
    match &done[&r] {
        Ok(Completion::Read(data)) => assert!(data.to_vec().iter().all(|&b| b == 7)),
        other => panic!("{other:?}"),
    }
    // Unplugged with nothing else in flight, a lone held write goes at once.
    array.plug();
    let w2 = array.submit(Request::Write { offset: 5000, data: vec![9u8; 100].into() }).unwrap();
    array.unplug();
    assert!(array.next_io().is_some(), "released at the unplug");
    let _ = w2;
}

#[test]
fn only_a_write_that_continues_a_stream_stays_held_while_others_run() {
    let g = raid(Level::Raid5, 4);
    let mut array = Array::new(g, vec![SlotState::InSync; 4]).unwrap();
    // A read in flight (its member I/O taken, never completed), far from the writes.
    array.submit(Request::Read { offset: 300_000, len: 4096 }).unwrap();
    while array.next_io().is_some() {}
    // A lone part-stripe write at 0 continues nothing: it goes at the unplug.
    array.plug();
    array.submit(Request::Write { offset: 0, data: vec![1u8; 100].into() }).unwrap();
    array.unplug();
    let mut first = Vec::new();
    while let Some(io) = array.next_io() {
        first.push(io);
    }
    assert!(!first.is_empty(), "a write continuing no stream is released at the unplug");
    // One starting where a released write ended continues a stream: held while others run.
    array.plug();
    array.submit(Request::Write { offset: 100, data: vec![2u8; 100].into() }).unwrap();
    array.unplug();
    assert!(array.next_io().is_none(), "a stream's part-stripe write waits for the rest of its stripe");
    assert_eq!(array.in_flight(), 3);
}
