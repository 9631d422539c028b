//! Read balancing by measured latency, in virtual time: mirrors whose members answer after
//! different delays (a local device beside a far host), driven by closed-loop random readers.
//! Most reads must go to the fast member, a member that becomes fast must win its share back,
//! and members that are alike must be read exactly as md's policy alone reads them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use bytes::Bytes;
use uraid_engine::array::IoResult;
use uraid_engine::{Array, Geometry, MemberOp, ReadPolicy, Request, SlotState};
use uraid_layout::{Raid10Format, Raid10Layout, Raid1Layout};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const MEMBER_SECTORS: u64 = 2 << 20; // 1 GiB

/// How a simulated member serves what it is given.
#[derive(Debug, Clone, Copy)]
enum Serves {
    /// Every I/O after the same delay, however many are in flight (a host with many threads
    /// behind a network: nbdkit's delay filter).
    InParallel,
    /// One I/O at a time, each taking the delay (a device with one queue).
    OneAtATime,
}

#[derive(Debug, Clone, Copy)]
struct Member {
    delay_ns: u64,
    serves: Serves,
}

/// A member I/O in flight: (completion time, issue order, I/O id, slot, length), earliest first.
type InFlight = Reverse<(u64, u64, u64, usize, u64)>;

/// A closed-loop random reader workload over an array, in virtual time.
struct Sim {
    array: Array,
    members: Vec<Member>,
    busy_until: Vec<u64>,
    /// Member I/Os in flight: (completion time, issue order) → (id, slot, length).
    events: BinaryHeap<InFlight>,
    order: u64,
    now: u64,
    rng: u64,
    /// Member reads per slot.
    reads: Vec<u64>,
    /// The slot of every member read, in issue order.
    choices: Vec<usize>,
    /// When each slot was last read, and first read.
    last_read: Vec<u64>,
    first_read: Vec<Option<u64>>,
    /// The longest time any slot went without a read (from the start).
    longest_unread: u64,
    tell_time: bool,
}

impl Sim {
    fn new(geometry: Geometry, members: Vec<Member>, policy: ReadPolicy, tell_time: bool) -> Sim {
        let n = members.len();
        let mut array = Array::new(geometry, vec![SlotState::InSync; n]).unwrap();
        array.set_read_policy(policy);
        Sim {
            array,
            members,
            busy_until: vec![0; n],
            events: BinaryHeap::new(),
            order: 0,
            now: 0,
            rng: 0x9e37_79b9_7f4a_7c15,
            reads: vec![0; n],
            choices: Vec::new(),
            last_read: vec![0; n],
            first_read: vec![None; n],
            longest_unread: 0,
            tell_time,
        }
    }

    fn random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn clock(&mut self) {
        if self.tell_time {
            self.array.set_now(Duration::from_nanos(self.now));
        }
    }

    fn submit_random_read(&mut self) {
        let blocks = self.array.size_bytes() / 4096;
        let offset = self.random() % blocks * 4096;
        self.clock();
        self.array.submit(Request::Read { offset, len: 4096 }).unwrap();
        self.dispatch();
    }

    fn dispatch(&mut self) {
        while let Some(io) = self.array.next_io() {
            let MemberOp::Read { len } = io.op else { panic!("only reads: {io:?}") };
            let m = self.members[io.slot];
            // A tenth either way, so that alike members never answer in lockstep.
            let jitter = self.random() % (m.delay_ns / 5 + 1);
            let delay = m.delay_ns - m.delay_ns / 10 + jitter;
            let done = match m.serves {
                Serves::InParallel => self.now + delay,
                Serves::OneAtATime => {
                    let done = self.busy_until[io.slot].max(self.now) + delay;
                    self.busy_until[io.slot] = done;
                    done
                }
            };
            self.reads[io.slot] += 1;
            self.choices.push(io.slot);
            self.longest_unread = self.longest_unread.max(self.now - self.last_read[io.slot]);
            self.last_read[io.slot] = self.now;
            self.first_read[io.slot].get_or_insert(self.now);
            self.order += 1;
            self.events.push(Reverse((done, self.order, io.id, io.slot, len)));
        }
    }

    /// Run `requests` random 4 KiB reads with `depth` in flight; the reads per slot they made.
    fn run(&mut self, requests: u64, depth: u64) -> Vec<u64> {
        let before = self.reads.clone();
        let mut submitted = 0;
        while submitted < depth.min(requests) {
            self.submit_random_read();
            submitted += 1;
        }
        let mut finished = 0;
        while finished < requests {
            let Reverse((at, _, id, _, len)) = self.events.pop().expect("reads in flight");
            self.now = at;
            self.clock();
            self.array.complete_io(id, IoResult::Read(Bytes::from(vec![0; len as usize])));
            self.dispatch();
            while let Some((_, result)) = self.array.next_completion() {
                result.unwrap();
                finished += 1;
                if submitted < requests {
                    self.submit_random_read();
                    submitted += 1;
                }
            }
        }
        self.reads.iter().zip(&before).map(|(a, b)| a - b).collect()
    }

    /// Let `ns` of virtual time pass with nothing to do.
    fn idle(&mut self, ns: u64) {
        self.now += ns;
    }
}

fn raid1(n: usize) -> Geometry {
    Geometry::Raid1(Raid1Layout::new(n, MEMBER_SECTORS).unwrap())
}

fn member(delay_ns: u64, serves: Serves) -> Member {
    Member { delay_ns, serves }
}

fn share(reads: &[u64], slot: usize) -> f64 {
    reads[slot] as f64 / reads.iter().sum::<u64>() as f64
}

#[test]
fn a_far_member_gets_few_reads_at_queue_depth_1_and_32() {
    for serves in [Serves::InParallel, Serves::OneAtATime] {
        for policy in ReadPolicy::ALL {
            for nonrot in [false, true] {
                for depth in [1, 32] {
                    // The far member first, so that md's order (first idle disk) favours it.
                    let members = vec![member(5 * MS, serves), member(100 * US, serves)];
                    let mut sim = Sim::new(raid1(2), members, policy, true);
                    sim.array.set_nonrotational(nonrot);
                    let reads = sim.run(20_000, depth);
                    let far = share(&reads, 0);
                    let what = format!("{serves:?} {policy} nonrot={nonrot} depth {depth}: {reads:?}");
                    // At depth 32 the far member may take a read when the near one is queued
                    // deeper than it is slower (32 x 0.1 ms against 5 ms): a few percent.
                    assert!(far < 0.05, "{what}");

                    // Without latency balancing the same policy reads the far member as much
                    // or more: much more where the policy has no reason of its own to avoid it
                    // (a member that serves one read at a time in 5 ms keeps a long queue,
                    // which md's nearest-head rule and the queue-counting policies avoid).
                    let members = vec![member(5 * MS, serves), member(100 * US, serves)];
                    let mut blind = Sim::new(raid1(2), members, policy, true);
                    blind.array.set_latency_balancing(false);
                    blind.array.set_nonrotational(nonrot);
                    let blind_reads = blind.run(20_000, depth);
                    let blind_far = share(&blind_reads, 0);
                    let what = format!("{what}, and without latency balancing {blind_reads:?}");
                    assert!(blind_far >= far, "{what}");
                    if blind_far > 0.1 {
                        assert!(blind_far > 10.0 * far, "{what}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_far_member_that_becomes_near_wins_its_share_back() {
    for policy in [ReadPolicy::Md, ReadPolicy::ShortestQueue, ReadPolicy::Split] {
        let members = vec![member(100 * US, Serves::OneAtATime), member(5 * MS, Serves::OneAtATime)];
        let mut sim = Sim::new(raid1(2), members, policy, true);
        let slow = sim.run(20_000, 32);
        assert!(share(&slow, 1) < 0.02, "{policy}: {slow:?}");
        // The far host recovers: as fast as the other.
        sim.members[1].delay_ns = 100 * US;
        // The reads to it stay few until its estimate has faded enough for a probe (seconds).
        sim.idle(10 * 1_000 * MS);
        let back = sim.run(20_000, 32);
        assert!(share(&back, 1) > 0.3, "{policy}: far {slow:?}, then near {back:?}");
        // What an array of two alike members gives from the start.
        let alike = vec![member(100 * US, Serves::OneAtATime), member(100 * US, Serves::OneAtATime)];
        let alike = Sim::new(raid1(2), alike, policy, true).run(20_000, 32);
        assert!((share(&back, 1) - share(&alike, 1)).abs() < 0.1, "{policy}: {back:?} against {alike:?}");
    }
}

#[test]
fn a_far_member_is_probed_now_and_then_and_stays_avoided() {
    let members = vec![member(100 * US, Serves::InParallel), member(5 * MS, Serves::InParallel)];
    let mut sim = Sim::new(raid1(2), members, ReadPolicy::Md, true);
    sim.array.set_nonrotational(true);
    // 20 s of reads at depth 32 (about 320,000 reads of 100 µs in parallel... fewer: each
    // round is a second of virtual time at most, the rest idle).
    let mut far = 0;
    let mut total = 0;
    for _ in 0..20 {
        let reads = sim.run(50_000, 32);
        far += reads[1];
        total += reads.iter().sum::<u64>();
        sim.idle(1_000 * MS);
    }
    // Probed again after each idle second, a few reads each time, never a share.
    assert!(far >= 20, "the far member is not tried again: {far}");
    assert!(far * 500 < total, "{far} reads of {total} to the far member");
}

#[test]
fn alike_members_are_read_exactly_as_without_a_clock() {
    let layouts = [
        ("raid1-2", raid1(2)),
        ("raid1-3", raid1(3)),
        ("raid10-4-n2", Geometry::Raid10(Raid10Layout::new(4, 128, Raid10Format::NEAR2, MEMBER_SECTORS).unwrap())),
        (
            "raid10-4-f2",
            Geometry::Raid10(Raid10Layout::new(4, 128, Raid10Format::parse("f2").unwrap(), MEMBER_SECTORS).unwrap()),
        ),
    ];
    for (name, geometry) in layouts {
        let n = geometry.raid_disks();
        for policy in ReadPolicy::ALL {
            for (serves, delay) in [(Serves::OneAtATime, 8 * MS), (Serves::InParallel, 100 * US)] {
                for depth in [1, 4, 32] {
                    let run = |tell_time: bool| {
                        let members = vec![member(delay, serves); n];
                        let mut sim = Sim::new(geometry.clone(), members, policy, tell_time);
                        sim.run(3_000, depth);
                        sim
                    };
                    let timed = run(true);
                    let blind = run(false);
                    assert!(blind.array.read_latency(0, 4096).is_none(), "{name}: no clock, nothing measured");
                    let what = format!(
                        "{name} {policy} {serves:?} depth {depth}: {:?} against {:?}",
                        timed.reads, blind.reads
                    );
                    let longest_unread =
                        blind.last_read.iter().map(|&t| blind.now - t).max().unwrap().max(blind.longest_unread);
                    let all_read_early = blind.first_read.iter().all(|t| t.is_some_and(|t| t < 90 * MS));
                    if longest_unread < 900 * MS && all_read_early {
                        // Every member read within the first tenth of a second and then at
                        // least once a second: measured, never probed, and too alike to be
                        // passed over: the policy's own choices.
                        assert!(timed.choices == blind.choices, "{what}");
                    } else {
                        // The policy leaves a member unread for a while (md's first idle disk at
                        // depth 1): it is probed after a tenth of a second, then each second,
                        // four reads each time, and the choices after a probe go their own way
                        // (heads and turns differ); bounded by the probes' count.
                        let seconds = timed.now as f64 / 1e9;
                        let moved = timed.choices.iter().zip(&blind.choices).filter(|(a, b)| a != b).count();
                        assert!(
                            moved as f64 <= 4.0 * (n as f64) * (seconds + 1.0),
                            "{what}: {moved} moved in {seconds} s"
                        );
                    }
                }
            }
        }
    }
}
