//! Read balancing policies through the engine: which members the reads go to under each
//! policy, and, for every policy, reads that return the right bytes on mirrored arrays healthy,
//! degraded and with read errors, while writes, discards and checks run alongside and member
//! I/O completes in random order (the `split` policy's read-ahead must never serve bytes a
//! later write changed).

mod common;

use std::collections::HashMap;

use common::{
    check_consistent, filled_array, geometries, read_all, removable_sets, run_recorded as run, Members, MEMBER_BYTES,
    SMALL_SPLIT,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uraid_engine::array::{Array, Completion, EngineEvent, MemberIo, MemberOp, Request, RequestId, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::geometry::{CopyPlacement, Geometry};
use uraid_engine::ReadPolicy;
use uraid_layout::Raid1Layout;

const KIB: u64 = 1024;

fn mirror_geometries() -> Vec<(String, Geometry)> {
    geometries().into_iter().filter(|(_, g)| g.is_mirrored()).collect()
}

fn with_policy(array: &mut Array, policy: ReadPolicy) {
    array.set_read_policy(policy);
    array.set_split_tuning(SMALL_SPLIT);
    assert_eq!(array.read_policy(), policy);
}

fn raid1(n: usize) -> Geometry {
    Geometry::Raid1(Raid1Layout::new(n, MEMBER_BYTES / 512).unwrap())
}

/// A healthy raid1 of `n` members of `bytes` each, filled with a known pattern (returned too).
fn big_raid1(n: usize, bytes: u64) -> (Members, Array, Vec<u8>) {
    let g = Geometry::Raid1(Raid1Layout::new(n, bytes / 512).unwrap());
    let mut members = Members::new(n, bytes);
    let mut array = Array::new(g, vec![SlotState::InSync; n]).unwrap();
    let data: Vec<u8> = (0..array.size_bytes()).map(|i| (i % 253) as u8).collect();
    execute(&mut array, Request::Write { offset: 0, data: data.clone().into() }, &mut |io| members.exec(io)).unwrap();
    (members, array, data)
}

/// Perform whatever member I/O is left (read-ahead the last request did not wait for).
fn settle(array: &mut Array, members: &mut Members) -> Vec<MemberIo> {
    let mut ios = Vec::new();
    while let Some(io) = array.next_io() {
        let result = members.exec(&io);
        ios.push(io.clone());
        array.complete_io(io.id, result);
    }
    ios
}

fn read_slots(ios: &[MemberIo]) -> Vec<usize> {
    ios.iter().filter(|io| matches!(io.op, MemberOp::Read { .. })).map(|io| io.slot).collect()
}

fn read_bytes_per_slot(ios: &[MemberIo], n: usize) -> Vec<u64> {
    let mut out = vec![0; n];
    for io in ios {
        if let MemberOp::Read { len } = io.op {
            out[io.slot] += len;
        }
    }
    out
}

fn expect_read(done: Completion, model: &[u8], offset: u64, len: u64, what: &str) {
    assert!(
        done == Completion::Read(model[offset as usize..(offset + len) as usize].to_vec().into()),
        "{what}: read {offset}+{len} differs"
    );
}

#[test]
fn every_policy_is_settable_and_md_is_the_default() {
    let mut array = Array::new(raid1(2), vec![SlotState::InSync; 2]).unwrap();
    assert_eq!(array.read_policy(), ReadPolicy::Md);
    assert!(!array.nonrotational());
    for p in ReadPolicy::ALL {
        array.set_read_policy(p);
        assert_eq!(array.read_policy(), p);
    }
    array.set_nonrotational(true);
    assert!(array.nonrotational());
}

/// md: a sequential reader stays on the disk it started on, however many requests it makes.
#[test]
fn md_keeps_a_sequential_reader_on_one_disk() {
    let g = raid1(3);
    let (mut members, mut array, model) = filled_array(&g);
    let mut slots = Vec::new();
    for i in 0..20u64 {
        let (offset, len) = (40 * KIB + i * 4 * KIB, 4 * KIB);
        let (done, ios) = run(&mut array, &mut members, Request::Read { offset, len });
        expect_read(done, &model, offset, len, "md");
        slots.extend(read_slots(&ios));
    }
    assert_eq!(slots.len(), 20);
    assert!(slots.iter().all(|&s| s == slots[0]), "{slots:?}");
}

/// md: reads in flight together go to idle disks first; with every disk busy, to the nearest
/// head.
#[test]
fn md_sends_concurrent_random_reads_to_idle_disks() {
    let g = raid1(3);
    let (mut members, mut array, _) = filled_array(&g);
    let mut held = Vec::new();
    for i in 0..3u64 {
        array.submit(Request::Read { offset: 10 * KIB + i * 50 * KIB, len: 4 * KIB }).unwrap();
        held.push(array.next_io().unwrap());
    }
    let mut slots: Vec<usize> = held.iter().map(|io| io.slot).collect();
    slots.sort_unstable();
    assert_eq!(slots, vec![0, 1, 2], "each read on an idle disk");
    for io in held {
        let result = members.exec(&io);
        array.complete_io(io.id, result);
    }
}

#[test]
fn round_robin_takes_the_copies_in_turn() {
    let g = raid1(3);
    let (mut members, mut array, model) = filled_array(&g);
    with_policy(&mut array, ReadPolicy::RoundRobin);
    let mut slots = Vec::new();
    for i in 0..6u64 {
        let (offset, len) = (i * 8 * KIB, 8 * KIB);
        let (done, ios) = run(&mut array, &mut members, Request::Read { offset, len });
        expect_read(done, &model, offset, len, "round-robin");
        slots.extend(read_slots(&ios));
    }
    assert_eq!(slots.len(), 6);
    for pair in slots.windows(2) {
        assert_eq!(pair[1], (pair[0] + 1) % 3, "{slots:?}");
    }
}

#[test]
fn shortest_queue_takes_the_least_busy_copy() {
    let g = raid1(2);
    let (mut members, mut array, _) = filled_array(&g);
    with_policy(&mut array, ReadPolicy::ShortestQueue);
    // Three reads held in flight: the first two spread, the third goes where fewer are queued,
    // which after slot 0's read completes is slot 0.
    array.submit(Request::Read { offset: 0, len: 4 * KIB }).unwrap();
    let a = array.next_io().unwrap();
    array.submit(Request::Read { offset: 100 * KIB, len: 4 * KIB }).unwrap();
    let b = array.next_io().unwrap();
    assert_ne!(a.slot, b.slot);
    let result = members.exec(&a);
    array.complete_io(a.id, result);
    array.submit(Request::Read { offset: 150 * KIB, len: 4 * KIB }).unwrap();
    let c = array.next_io().unwrap();
    assert_eq!(c.slot, a.slot, "the copy with nothing in flight");
    for io in [b, c] {
        let result = members.exec(&io);
        array.complete_io(io.id, result);
    }
}

/// `split`: a large read outside any stream is divided into contiguous pieces over the idle
/// copies; a small one stays whole, on one copy.
#[test]
fn split_divides_a_large_read_and_keeps_a_small_one_whole() {
    let g = raid1(2);
    let (mut members, mut array, model) = filled_array(&g);
    with_policy(&mut array, ReadPolicy::Split);
    let (offset, len) = (20 * KIB, 64 * KIB);
    let (done, ios) = run(&mut array, &mut members, Request::Read { offset, len });
    expect_read(done, &model, offset, len, "divided");
    let reads: Vec<&MemberIo> = ios.iter().filter(|io| matches!(io.op, MemberOp::Read { .. })).collect();
    assert_eq!(reads.len(), 2, "{ios:?}");
    assert_ne!(reads[0].slot, reads[1].slot, "one piece per copy");
    assert_eq!(read_bytes_per_slot(&ios, 2), vec![32 * KIB, 32 * KIB]);
    let mut pieces: Vec<(u64, u64)> =
        reads.iter().map(|io| (io.offset, if let MemberOp::Read { len } = io.op { len } else { 0 })).collect();
    pieces.sort_unstable();
    assert_eq!(pieces, vec![(offset, 32 * KIB), (offset + 32 * KIB, 32 * KIB)], "contiguous halves");

    let (offset, len) = (150 * KIB, 4 * KIB);
    let (done, ios) = run(&mut array, &mut members, Request::Read { offset, len });
    expect_read(done, &model, offset, len, "small");
    assert_eq!(read_slots(&ios).len(), 1, "{ios:?}");
}

/// `split`: a rewrite pass (each read written back right behind the reader) gets no read-ahead,
/// but a read of two minimum pieces or more is divided over the idle copies, while a shorter
/// one stays whole; the bytes are right throughout.
#[test]
fn split_divides_the_reads_of_a_rewrite_pass() {
    let (mut members, mut array, mut model) = big_raid1(2, 4 << 20);
    array.set_read_policy(ReadPolicy::Split);
    let piece = array.split_tuning().min_divided_piece();
    assert_eq!(piece, 64 * KIB, "the default tuning");
    let len = 2 * piece;
    let mut divided = Vec::new();
    let reads = 24u64;
    for k in 0..reads {
        let offset = k * len;
        let (done, ios) = run(&mut array, &mut members, Request::Read { offset, len });
        expect_read(done, &model, offset, len, "rewrite pass");
        let per_slot = read_bytes_per_slot(&ios, 2);
        divided.push(per_slot == vec![piece, piece]);
        // Dirty it and write it back, as bonnie's rewrite does.
        let data: Vec<u8> = model[offset as usize..(offset + len) as usize].iter().map(|b| b.wrapping_add(1)).collect();
        model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
        let (done, _) = run(&mut array, &mut members, Request::Write { offset, data: data.into() });
        assert_eq!(done, Completion::Written);
        settle(&mut array, &mut members);
    }
    // The first reads are a plain stream, read ahead before the writes showed it rewritten;
    // once that read-ahead is used up, every read is divided in two halves.
    assert!(divided[reads as usize / 2..].iter().all(|&d| d), "reads divided: {divided:?}");
    let (done, ios) = run(&mut array, &mut members, Request::Read { offset: reads * len, len: piece });
    expect_read(done, &model, reads * len, piece, "short read");
    assert!(read_slots(&ios).len() <= 1, "a read of one minimum piece is not divided: {ios:?}");
    let mut all = vec![0u8; model.len()];
    let (done, _) = run(&mut array, &mut members, Request::Read { offset: 0, len: model.len() as u64 });
    if let Completion::Read(d) = done {
        all.copy_from_slice(&d.to_vec());
    }
    assert!(all == model, "the array reads back what was written");
}

/// `split`: a large read while a copy is busy is not divided onto the busy copy.
#[test]
fn split_divides_only_over_idle_copies() {
    let g = raid1(2);
    let (mut members, mut array, model) = filled_array(&g);
    with_policy(&mut array, ReadPolicy::Split);
    array.submit(Request::Read { offset: 180 * KIB, len: 4 * KIB }).unwrap();
    let busy = array.next_io().unwrap();
    let id = array.submit(Request::Read { offset: 0, len: 64 * KIB }).unwrap();
    let mut ios = Vec::new();
    while let Some(io) = array.next_io() {
        ios.push(io.clone());
        let result = members.exec(&io);
        array.complete_io(io.id, result);
    }
    assert!(read_slots(&ios).iter().all(|&s| s != busy.slot), "{ios:?}");
    let result = members.exec(&busy);
    array.complete_io(busy.id, result);
    let done: HashMap<RequestId, Completion> =
        std::iter::from_fn(|| array.next_completion()).map(|(id, r)| (id, r.unwrap())).collect();
    expect_read(done[&id].clone(), &model, 0, 64 * KIB, "while busy");
}

/// `split`: a single sequential reader of small requests ends up reading from both copies, each
/// copy in long runs of its own (whole windows), without reading anything twice.
#[test]
fn split_spreads_one_sequential_reader_over_both_copies() {
    let (mut members, mut array, model) = big_raid1(2, 1 << 20);
    with_policy(&mut array, ReadPolicy::Split);
    let mut ios = Vec::new();
    let step = 4 * KIB;
    let total = 512 * KIB;
    let mut served_at_once = 0;
    for i in 0..total / step {
        let (offset, len) = (i * step, step);
        let (done, taken) = run(&mut array, &mut members, Request::Read { offset, len });
        expect_read(done, &model, offset, len, "stream");
        if taken.is_empty() {
            served_at_once += 1;
        }
        ios.extend(taken);
    }
    ios.extend(settle(&mut array, &mut members));
    let per_slot = read_bytes_per_slot(&ios, 2);
    let read: u64 = per_slot.iter().sum();
    assert!(per_slot.iter().all(|&b| b >= total / 3), "both copies read a fair share: {per_slot:?}");
    // Everything read once; past the end of the reads at most the read-ahead's depth.
    assert!(read >= total && read <= total + 4 * SMALL_SPLIT.window_bytes, "read {read} bytes for {total}");
    assert!(served_at_once > (total / step) as usize / 2, "most requests came from read-ahead ({served_at_once})");
    // Member reads are whole windows (after the first ones), each window read from one copy.
    let mut window_slot: HashMap<u64, usize> = HashMap::new();
    let mut whole = 0;
    let reads: Vec<&MemberIo> = ios.iter().filter(|io| matches!(io.op, MemberOp::Read { .. })).collect();
    for io in &reads {
        let MemberOp::Read { len } = io.op else { unreachable!() };
        let w = io.offset / SMALL_SPLIT.window_bytes;
        assert_eq!((io.offset + len - 1) / SMALL_SPLIT.window_bytes, w, "{io:?} crosses a window");
        assert_eq!(*window_slot.entry(w).or_insert(io.slot), io.slot, "window {w} read from two copies");
        whole += usize::from(len == SMALL_SPLIT.window_bytes);
    }
    assert!(whole >= reads.len() * 3 / 4, "{whole} of {} member reads are whole windows", reads.len());
    // Consecutive windows alternate between the copies.
    for w in 2..total / SMALL_SPLIT.window_bytes {
        assert_ne!(window_slot[&w], window_slot[&(w - 1)], "windows {} and {w} on one copy: {window_slot:?}", w - 1);
    }
}

/// `split`: two sequential readers on a 2-way mirror each keep a copy of their own (md's
/// sequential rule would do the same), rather than both alternating between the copies.
#[test]
fn split_gives_two_streams_a_copy_each() {
    let (mut members, mut array, model) = big_raid1(2, 1 << 20);
    with_policy(&mut array, ReadPolicy::Split);
    let starts = [0, 512 * KIB];
    let mut per_stream: Vec<Vec<usize>> = vec![Vec::new(); 2];
    for i in 0..96u64 {
        for start in starts {
            let (offset, len) = (start + i * 4 * KIB, 4 * KIB);
            let (done, ios) = run(&mut array, &mut members, Request::Read { offset, len });
            expect_read(done, &model, offset, len, "two streams");
            for io in ios.iter().filter(|io| matches!(io.op, MemberOp::Read { .. })) {
                per_stream[usize::from(io.offset >= 512 * KIB)].push(io.slot);
            }
        }
    }
    // Once both streams are followed, each reads from one copy, and not the same one.
    let tail = |v: &Vec<usize>| v[v.len() / 2..].to_vec();
    let (a, b) = (tail(&per_stream[0]), tail(&per_stream[1]));
    assert!(a.len() >= 4 && b.len() >= 4, "{per_stream:?}");
    assert!(a.iter().all(|&s| s == a[0]) && b.iter().all(|&s| s == b[0]), "{per_stream:?}");
    assert_ne!(a[0], b[0], "{per_stream:?}");
}

/// `split` read-ahead and writes: bytes read ahead and arrived that a write then changes are
/// never returned; the write's bytes are.
#[test]
fn split_readahead_takes_the_bytes_of_later_writes() {
    let g = raid1(2);
    let (mut members, mut array, mut model) = filled_array(&g);
    with_policy(&mut array, ReadPolicy::Split);
    // Establish a stream, so the engine reads ahead, and let the read-ahead arrive.
    for i in 0..4u64 {
        let (done, _) = run(&mut array, &mut members, Request::Read { offset: i * 4 * KIB, len: 4 * KIB });
        expect_read(done, &model, i * 4 * KIB, 4 * KIB, "setup");
    }
    settle(&mut array, &mut members);
    assert!(array.readahead_in_use() > 0, "nothing read ahead");
    let data = vec![0xddu8; 6000];
    model[20_000..26_000].copy_from_slice(&data);
    let (done, _) = run(&mut array, &mut members, Request::Write { offset: 20_000, data: data.into() });
    assert_eq!(done, Completion::Written);
    for i in 4..16u64 {
        let (done, _) = run(&mut array, &mut members, Request::Read { offset: i * 4 * KIB, len: 4 * KIB });
        expect_read(done, &model, i * 4 * KIB, 4 * KIB, "after the write");
    }
}

/// Read-ahead that arrives stale: perform a read ahead from member contents older than a write
/// that started meanwhile (a disk may serve the read before the write), and check the old bytes
/// are not served.
#[test]
fn split_stale_readahead_is_not_served() {
    let g = raid1(2);
    let (mut members, mut array, mut model) = filled_array(&g);
    with_policy(&mut array, ReadPolicy::Split);
    // The second read establishes the stream; its read-ahead goes out after its own read.
    for i in 0..2u64 {
        let (done, _) = run(&mut array, &mut members, Request::Read { offset: i * 4 * KIB, len: 4 * KIB });
        expect_read(done, &model, i * 4 * KIB, 4 * KIB, "setup");
    }
    // The read-ahead the last read issued, not performed yet.
    let mut held = Vec::new();
    while let Some(io) = array.next_io() {
        held.push(io);
    }
    assert!(!held.is_empty(), "no read-ahead issued");
    let before = members.disks.clone();
    let data = vec![0x5au8; 4096];
    let at = held[0].offset + 1000;
    model[at as usize..at as usize + 4096].copy_from_slice(&data);
    let (done, _) = run(&mut array, &mut members, Request::Write { offset: at, data: data.into() });
    assert_eq!(done, Completion::Written);
    // The held reads return what the members held before the write.
    let mut old = Members::new(2, MEMBER_BYTES);
    old.disks = before;
    for io in held {
        let result = old.exec(&io);
        array.complete_io(io.id, result);
    }
    settle(&mut array, &mut members);
    let (done, _) = run(&mut array, &mut members, Request::Read { offset: at - 100, len: 4500 });
    expect_read(done, &model, at - 100, 4500, "stale read-ahead");
}

/// A read error inside bytes read ahead: the read-ahead is dropped, the reader reads from the
/// members, gets the right bytes from the other copy, and the bad copy is rewritten.
#[test]
fn split_readahead_read_error_is_corrected_by_the_reader() {
    let g = raid1(2);
    let (mut members, mut array, model) = filled_array(&g);
    with_policy(&mut array, ReadPolicy::Split);
    members.add_bad_range(0, 40 * KIB + 300, 200);
    members.add_bad_range(1, 40 * KIB + 300, 200);
    // Only one copy is bad where it matters: fix the other.
    members.disks[1].as_mut().unwrap()[(40 * KIB) as usize..(44 * KIB) as usize]
        .copy_from_slice(&model[(40 * KIB) as usize..(44 * KIB) as usize]);
    members.unreadable[1].fill(false);
    let mut events = Vec::new();
    for i in 0..24u64 {
        let (done, _) = run(&mut array, &mut members, Request::Read { offset: i * 4 * KIB, len: 4 * KIB });
        expect_read(done, &model, i * 4 * KIB, 4 * KIB, "across the bad range");
        events.extend(array.take_events());
    }
    settle(&mut array, &mut members);
    assert!(events.iter().any(|e| matches!(e, EngineEvent::ReadErrorCorrected { slot: 0, .. })), "{events:?}");
    assert!(!members.unreadable[0].contains(&true), "the bad range was rewritten");
    assert!(array.slot_states().iter().all(|s| *s == SlotState::InSync));
}

/// One client operation of the concurrent workload.
#[derive(Debug, Clone)]
enum Op {
    Read { offset: u64, len: u64 },
    Write { offset: u64, len: u64, seed: u8 },
    Discard { offset: u64, len: u64 },
    Check,
}

/// A workload of sequential streams (small and large requests), random reads, large reads,
/// writes (often right ahead of a stream), an occasional discard and check.
fn workload(rng: &mut StdRng, size: u64, ops: usize) -> Vec<Op> {
    let mut streams: Vec<(u64, u64)> =
        (0..rng.gen_range(1..=3)).map(|_| (rng.gen_range(0..size / 2), rng.gen_range(1..12) * 1024)).collect();
    let mut out = Vec::new();
    for _ in 0..ops {
        let op = match rng.gen_range(0..100) {
            0..=54 => {
                let s = rng.gen_range(0..streams.len());
                let (pos, step) = streams[s];
                let len = step.min(size - pos);
                streams[s].0 = if pos + len >= size { 0 } else { pos + len };
                Op::Read { offset: pos, len }
            }
            55..=69 => {
                let len = rng.gen_range(1..9000).min(size);
                Op::Read { offset: rng.gen_range(0..=size - len), len }
            }
            70..=74 => {
                let len = rng.gen_range(16 * KIB..64 * KIB).min(size);
                Op::Read { offset: rng.gen_range(0..=size - len), len }
            }
            75..=93 => {
                let len = rng.gen_range(1..9000).min(size);
                // Half the writes land just ahead of a stream, in what it may have read ahead.
                let offset = if rng.gen_bool(0.5) {
                    let (pos, _) = streams[rng.gen_range(0..streams.len())];
                    (pos + rng.gen_range(0..40 * KIB)).min(size - len)
                } else {
                    rng.gen_range(0..=size - len)
                };
                Op::Write { offset, len, seed: rng.r#gen() }
            }
            94..=97 => {
                let len = rng.gen_range(512..20_000).min(size);
                Op::Discard { offset: rng.gen_range(0..=size - len), len }
            }
            _ => Op::Check,
        };
        out.push(op);
    }
    out
}

fn payload(len: u64, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 7) as u8).collect()
}

/// Run `ops` against `array` with up to `depth` requests in flight and member I/O completing in
/// random order, checking every read against the model as of its submission (the engine orders
/// overlapping requests by arrival). Returns the most bytes read ahead at once.
fn run_concurrent(
    array: &mut Array,
    members: &mut Members,
    model: &mut [u8],
    ops: &[Op],
    depth: usize,
    rng: &mut StdRng,
    what: &str,
) -> u64 {
    let mut expected: HashMap<RequestId, (u64, Option<Vec<u8>>)> = HashMap::new();
    let mut pool: Vec<MemberIo> = Vec::new();
    let mut next = 0;
    let mut peak = 0;
    loop {
        while let Some((id, result)) = array.next_completion() {
            let (offset, want) = expected.remove(&id).expect("a submitted request");
            let got = result.unwrap_or_else(|e| panic!("{what}: request at {offset} failed: {e}"));
            if let Some(want) = want {
                assert!(got == Completion::Read(want.into()), "{what}: read at {offset} returned wrong bytes");
            }
        }
        while let Some(io) = array.next_io() {
            pool.push(io);
        }
        peak = peak.max(array.readahead_in_use());
        let can_submit = next < ops.len() && expected.len() < depth;
        if pool.is_empty() && !can_submit {
            assert!(expected.is_empty() && next == ops.len(), "{what}: engine stalled with requests unfinished");
            return peak;
        }
        if can_submit && (pool.is_empty() || rng.gen_bool(0.4)) {
            let (request, want) = match ops[next].clone() {
                Op::Read { offset, len } => (
                    Request::Read { offset, len },
                    Some((offset, Some(model[offset as usize..(offset + len) as usize].to_vec()))),
                ),
                Op::Write { offset, len, seed } => {
                    let data = payload(len, seed);
                    model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
                    (Request::Write { offset, data: data.into() }, Some((offset, None)))
                }
                Op::Discard { offset, len } => {
                    model[offset as usize..(offset + len) as usize].fill(0);
                    (Request::Discard { offset, len }, Some((offset, None)))
                }
                Op::Check => {
                    let size = array.size_bytes();
                    (Request::Sync { offset: 0, len: size, repair: false }, Some((0, None)))
                }
            };
            next += 1;
            let id = array.submit(request).expect("request accepted");
            expected.insert(id, want.expect("an expectation"));
            continue;
        }
        let io = pool.swap_remove(rng.gen_range(0..pool.len()));
        let result = members.exec(&io);
        array.complete_io(io.id, result);
    }
}

/// Every policy on every mirrored layout: healthy, with one member missing, and with latent
/// read errors on one member, under a concurrent mixed workload.
fn policies_return_the_model(seed: u64, scenario: usize) {
    for (name, g) in mirror_geometries() {
        for policy in ReadPolicy::ALL {
            let mut rng = StdRng::seed_from_u64(seed ^ (policy as u64) << 32);
            let (mut members, mut array, mut model) = filled_array(&g);
            let n = g.raid_disks();
            let mut absent = None;
            match scenario {
                1 => {
                    let sets: Vec<Vec<usize>> = removable_sets(&g).into_iter().filter(|s| s.len() == 1).collect();
                    let slot = sets[rng.gen_range(0..sets.len())][0];
                    let mut slots = vec![SlotState::InSync; n];
                    slots[slot] = SlotState::Missing;
                    members.disks[slot] = None;
                    array = Array::new(g.clone(), slots).unwrap();
                    absent = Some(slot);
                }
                2 => {
                    let slot = rng.gen_range(0..n);
                    for _ in 0..8 {
                        let len = rng.gen_range(1..3000u64);
                        let off = rng.gen_range(0..g.member_data_bytes() - len);
                        members.add_bad_range(slot, off, len);
                    }
                }
                _ => {}
            }
            with_policy(&mut array, policy);
            let what = format!("{name} {policy} scenario {scenario}");
            let ops = workload(&mut rng, array.size_bytes(), 160);
            let peak = run_concurrent(&mut array, &mut members, &mut model, &ops, 6, &mut rng, &what);
            assert!(read_all(&mut array, &mut members) == model, "{what}: contents differ at the end");
            settle(&mut array, &mut members);
            if policy == ReadPolicy::Split
                && scenario == 0
                && g.copy_placement() == (CopyPlacement::Images { same_slots: true })
            {
                assert!(peak > 0, "{what}: the workload never read ahead");
            }
            let left = array.slot_states().iter().filter(|s| **s != SlotState::InSync).count();
            assert_eq!(left, usize::from(absent.is_some()), "{what}: a member was failed");
            if absent.is_none() {
                check_consistent(&mut array, &mut members, &what);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn every_policy_reads_the_model_on_healthy_mirrors(seed in any::<u64>()) {
        policies_return_the_model(seed, 0);
    }

    #[test]
    fn every_policy_reads_the_model_on_degraded_mirrors(seed in any::<u64>()) {
        policies_return_the_model(seed, 1);
    }

    #[test]
    fn every_policy_reads_the_model_through_read_errors(seed in any::<u64>()) {
        policies_return_the_model(seed, 2);
    }
}

/// Sequential readers with two requests in flight each, over equal parts of the array and
/// starting again at their part's start when they reach its end, with the default `split`
/// knobs (as `uraid bench engine --streams N` drives it), on arrays that are and are not whole
/// windows long: every request completes with the right bytes.
#[test]
fn split_streams_that_wrap_around_complete() {
    for (bytes, streams) in [(7u64 << 20, 1u64), (7 << 20, 2), (8 << 20, 2), (9 << 20, 3)] {
        let (mut members, mut array, model) = big_raid1(2, bytes);
        array.set_read_policy(ReadPolicy::Split);
        let size = array.size_bytes();
        let bs = 128 * KIB;
        let blocks = size / bs;
        let part = |s: u64| (s * blocks / streams, (s + 1) * blocks / streams);
        let mut next: Vec<u64> = (0..streams).map(|s| part(s).0).collect();
        let mut rng = StdRng::seed_from_u64(5);
        let mut owner: HashMap<RequestId, (u64, u64)> = HashMap::new();
        let mut pool: Vec<MemberIo> = Vec::new();
        let mut submit = |array: &mut Array, owner: &mut HashMap<RequestId, (u64, u64)>, s: u64| {
            let b = next[s as usize];
            next[s as usize] = if b + 1 == part(s).1 { part(s).0 } else { b + 1 };
            let id = array.submit(Request::Read { offset: b * bs, len: bs }).unwrap();
            owner.insert(id, (s, b * bs));
        };
        for i in 0..2 * streams {
            submit(&mut array, &mut owner, i % streams);
        }
        let mut done = 0;
        loop {
            while let Some((id, result)) = array.next_completion() {
                let (s, offset) = owner.remove(&id).expect("a request");
                expect_read(result.unwrap(), &model, offset, bs, "wrapping streams");
                done += 1;
                if done < 600 {
                    submit(&mut array, &mut owner, s);
                }
            }
            while let Some(io) = array.next_io() {
                pool.push(io);
            }
            if pool.is_empty() {
                assert!(
                    owner.is_empty(),
                    "{bytes} bytes, {streams} streams: stalled with requests in flight: {owner:?}"
                );
                break;
            }
            let io = pool.swap_remove(rng.gen_range(0..pool.len()));
            let result = members.exec(&io);
            array.complete_io(io.id, result);
        }
    }
}
