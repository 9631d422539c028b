//! Seed 004's "influence of request structure": a 32.5 kB transfer across three stripes of a
//! raid5 plex of five subdisks. Vinum splits it into one transfer per stripe, 9 member I/Os; the
//! optimum is 5, one per subdisk. uraid's engine, running the volume as gvinum lays it out, must
//! take the optimum for the read. Read degraded, it still reads each surviving subdisk once, where
//! Vinum (and md) rebuild stripe by stripe: 12 member reads.

use bytes::Bytes;
use uraid_engine::array::{Completion, IoResult, MemberIo, MemberOp, Request, SlotState};
use uraid_engine::blocking::execute;
use uraid_engine::Array;
use uraid_vinum::VolumeLayout;
use uraid_vinum_format::parse_config;

/// Five subdisks of 256 KiB with 4 KiB stripes: a stripe holds 16 KiB of data.
const PLEX: &str = "\
volume r state up
plex name r.p0 org raid5 8s vol r state up
sd name r.p0.s0 drive d0 len 512s driveoffset 265s plex r.p0 plexoffset 0s state up
sd name r.p0.s1 drive d1 len 512s driveoffset 265s plex r.p0 plexoffset 8s state up
sd name r.p0.s2 drive d2 len 512s driveoffset 265s plex r.p0 plexoffset 16s state up
sd name r.p0.s3 drive d3 len 512s driveoffset 265s plex r.p0 plexoffset 24s state up
sd name r.p0.s4 drive d4 len 512s driveoffset 265s plex r.p0 plexoffset 32s state up
";

/// The seed's transfer: 32.5 kB from the third data unit of stripe 0, so it takes two units
/// of stripe 0, all four of stripe 1 and three (the last one half) of stripe 2: Vinum's
/// 2 + 4 + 3 = 9 transfers.
const OFFSET: u64 = 8192;
const LEN: u64 = 33_280;

fn volume(states: Vec<SlotState>) -> (Array, Vec<Vec<u8>>) {
    let config = parse_config(PLEX).unwrap();
    let geometry = VolumeLayout::geometry(&config, "r").unwrap();
    let array = Array::new(geometry, states).unwrap();
    (array, vec![vec![0u8; 256 << 10]; 5])
}

/// Run `request`, recording every member I/O as (slot, kind).
fn run(
    array: &mut Array,
    members: &mut [Vec<u8>],
    request: Request,
    ios: &mut Vec<(usize, &'static str)>,
) -> Completion {
    execute(array, request, &mut |io: &MemberIo| {
        let at = io.offset as usize;
        let m = &mut members[io.slot];
        match &io.op {
            MemberOp::Read { len } => {
                ios.push((io.slot, "read"));
                IoResult::Read(Bytes::copy_from_slice(&m[at..at + *len as usize]))
            }
            MemberOp::Write { data } => {
                ios.push((io.slot, "write"));
                let bytes = data.to_vec();
                m[at..at + bytes.len()].copy_from_slice(&bytes);
                IoResult::Done
            }
            MemberOp::Flush => IoResult::Done,
            other => panic!("unexpected member op {other:?}"),
        }
    })
    .unwrap()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ (i >> 8) as u8).collect()
}

#[test]
fn the_seeds_transfer_reads_each_subdisk_once() {
    let (mut array, mut members) = volume(vec![SlotState::InSync; 5]);
    let data = pattern(256 << 10);
    let mut ios = Vec::new();
    run(&mut array, &mut members, Request::Write { offset: 0, data: data.clone().into() }, &mut ios);
    let mut ios = Vec::new();
    let Completion::Read(got) = run(&mut array, &mut members, Request::Read { offset: OFFSET, len: LEN }, &mut ios)
    else {
        panic!("a read")
    };
    assert_eq!(got.to_vec(), data[OFFSET as usize..(OFFSET + LEN) as usize]);
    let mut slots: Vec<usize> = ios.iter().map(|(s, _)| *s).collect();
    slots.sort_unstable();
    assert_eq!(slots, vec![0, 1, 2, 3, 4], "one read per subdisk, where Vinum makes 9: {ios:?}");
}

#[test]
fn the_seeds_transfer_read_degraded_reads_each_surviving_subdisk_once() {
    let (mut array, mut members) = volume(vec![SlotState::InSync; 5]);
    let data = pattern(256 << 10);
    let mut ios = Vec::new();
    run(&mut array, &mut members, Request::Write { offset: 0, data: data.clone().into() }, &mut ios);
    array.set_slot_state(1, SlotState::Faulty, false).unwrap();
    let mut ios = Vec::new();
    let Completion::Read(got) = run(&mut array, &mut members, Request::Read { offset: OFFSET, len: LEN }, &mut ios)
    else {
        panic!("a read")
    };
    assert_eq!(got.to_vec(), data[OFFSET as usize..(OFFSET + LEN) as usize], "rebuilt from parity");
    assert!(ios.iter().all(|(s, _)| *s != 1), "the failed subdisk is not read");
    // Stripe by stripe, as md and Vinum rebuild, each of the three stripes would read the four
    // survivors' units: 12 reads. The rows each survivor gives to the rebuilds and the units it
    // holds itself are one member read.
    let mut slots: Vec<usize> = ios.iter().map(|(s, _)| *s).collect();
    slots.sort_unstable();
    assert_eq!(slots, vec![0, 2, 3, 4], "one read per surviving subdisk: {ios:?}");
}
