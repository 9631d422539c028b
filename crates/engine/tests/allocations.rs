//! The engine's hot path does not allocate per request: a steady stream of small reads (every
//! level) and small writes (linear, raid0, raid1, raid10) makes no heap allocation inside the
//! engine once it has warmed up (its maps and queues have grown to their working size).
//!
//! Allocations are counted by a global allocator, only on this thread and only while the
//! engine's own calls run: the in-memory members the test performs the I/O on allocate as a
//! driver's buffers would, and that is not the engine's doing.
//!
//! Parity-level writes make none either when the driver hands the bytes of finished writes back
//! (`IoResult::Written`, as the service's drivers do): the blocks new parity is computed into
//! are used again. A driver that drops them costs one allocation per parity block (see
//! "Allocation on the hot path" in docs/design.md).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use common::{geometries, Members, MEMBER_BYTES};
use uraid_engine::array::{Array, Request, SlotState};
use uraid_engine::geometry::Geometry;

struct CountingAllocator;

thread_local! {
    /// Set while the engine's calls run on this thread.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn note_allocation() {
    // `try_with`: the thread's locals may already be gone while it exits.
    let _ = COUNTING.try_with(|counting| {
        if counting.get() {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Run `f` with this thread's allocations counted.
fn counted<T>(f: impl FnOnce() -> T) -> T {
    COUNTING.with(|c| c.set(true));
    let out = f();
    COUNTING.with(|c| c.set(false));
    out
}

const BLOCK: u64 = 4096;

/// Allocations the engine made per request over `rounds` small requests, after a warm-up, each
/// submitted alone and its member I/O performed in order; with `hand_back`, finished writes
/// give their bytes back to the engine.
fn allocations_per_request(g: &Geometry, write: bool, rounds: u64, hand_back: bool) -> f64 {
    let n = g.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
    let blocks = array.size_bytes() / BLOCK;
    let payload = Bytes::from(vec![0x5au8; BLOCK as usize]);
    let warm_up = 100;
    let mut counted_allocations = 0;
    for i in 0..warm_up + rounds {
        // Offsets that wander over the whole array, every member and chunk.
        let offset = (i * 37 % blocks) * BLOCK;
        let request =
            if write { Request::Write { offset, data: payload.clone() } } else { Request::Read { offset, len: BLOCK } };
        let before = ALLOCATIONS.with(|a| a.get());
        let id = counted(|| array.submit(request)).expect("request accepted");
        loop {
            if let Some((done, result)) = counted(|| array.next_completion()) {
                assert_eq!(done, id);
                result.expect("request succeeded");
                break;
            }
            let io = counted(|| array.next_io()).expect("engine stalled");
            let id = io.id;
            let result = members.exec(&io);
            let result = if hand_back { result.handing_back(io.op) } else { result };
            counted(|| array.complete_io(id, result));
        }
        if i >= warm_up {
            counted_allocations += ALLOCATIONS.with(|a| a.get()) - before;
        }
    }
    counted_allocations as f64 / rounds as f64
}

#[test]
fn small_reads_allocate_nothing_in_the_engine() {
    for (name, g) in geometries() {
        let per_request = allocations_per_request(&g, false, 500, true);
        assert_eq!(per_request, 0.0, "{name}: {per_request} allocations per 4 KiB read");
    }
}

#[test]
fn small_writes_allocate_nothing_in_the_engine_on_copy_levels() {
    let mut checked = 0;
    for (name, g) in geometries() {
        if g.is_parity() {
            continue;
        }
        let per_request = allocations_per_request(&g, true, 500, true);
        assert_eq!(per_request, 0.0, "{name}: {per_request} allocations per 4 KiB write");
        checked += 1;
    }
    assert!(checked >= 4, "linear, raid0, raid1 and raid10 geometries are all checked");
}

#[test]
fn small_parity_writes_allocate_nothing_when_their_blocks_come_back() {
    let mut checked = 0;
    let mut allocating_without = 0;
    for (name, g) in geometries() {
        if !g.is_parity() {
            continue;
        }
        let per_request = allocations_per_request(&g, true, 500, true);
        assert_eq!(per_request, 0.0, "{name}: {per_request} allocations per 4 KiB write");
        // Dropped by the driver instead, the blocks a reconstruct-write computes parity into
        // are made afresh each time: P, and Q. (A read-modify-write updates the old parity
        // the driver read, in its own buffers, and allocates nothing either way.)
        let roles = g.stripe_roles(0);
        let parity_blocks = 1 + usize::from(roles.q.is_some());
        let dropped = allocations_per_request(&g, true, 500, false);
        assert!(
            dropped <= parity_blocks as f64,
            "{name}: {dropped} allocations per 4 KiB write without the blocks back"
        );
        allocating_without += usize::from(dropped > 0.0);
        checked += 1;
    }
    assert!(checked >= 3, "raid4, raid5 and raid6 geometries are all checked");
    assert!(
        allocating_without > 0,
        "no geometry allocated parity blocks without them coming back: the test shows nothing"
    );
}

/// The counter sees the engine's allocations at all: a read of many chunks needs lists longer
/// than the inline ones (without this, a counter that never counted would pass the tests above).
#[test]
fn the_counter_counts_the_engines_allocations() {
    let (_, g) = geometries().into_iter().find(|(name, _)| name.starts_with("raid0")).expect("a raid0");
    let n = g.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut array = Array::new(g, vec![SlotState::InSync; n]).unwrap();
    let len = array.size_bytes();
    let before = ALLOCATIONS.with(|a| a.get());
    counted(|| array.submit(Request::Read { offset: 0, len })).unwrap();
    while counted(|| array.next_completion()).is_none() {
        let io = counted(|| array.next_io()).expect("engine stalled");
        let result = members.exec(&io);
        counted(|| array.complete_io(io.id, result));
    }
    assert!(ALLOCATIONS.with(|a| a.get()) > before, "a whole-array read counted no allocation");
}
