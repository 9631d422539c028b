//! Test support shared by the engine's integration tests: in-memory members with injectable
//! faults, the list of geometries under test, and a few drivers around the engine.
#![allow(dead_code)]

pub mod vinum;

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::Rng;
use uraid_engine::array::{
    Array, Completion, IoResult, MemberIo, MemberIoError, MemberOp, Request, RequestId, SlotState,
};
use uraid_engine::blocking::execute;
use uraid_engine::geometry::Geometry;
use uraid_engine::read_balance::SplitTuning;
use uraid_engine::{EngineError, ReadPolicy};
use uraid_layout::{
    Level, LinearLayout, ParityAlgorithm, ParityLayout, Raid0Layout, Raid0ZoneLayout, Raid10Format, Raid10Layout,
    Raid1Layout,
};

/// Member images in memory; `None` for a slot without a device.
pub struct Members {
    pub disks: Vec<Option<Vec<u8>>>,
    /// Slots whose I/O fails from now on (an injected fault).
    pub broken: Vec<bool>,
    /// Per slot, bytes that cannot be read (latent sector errors): a read touching one fails.
    /// Writing a byte makes it readable again (the drive remaps the sector), unless
    /// `bad_writes_fail` says the slot cannot even do that.
    pub unreadable: Vec<Vec<bool>>,
    /// Slots where a write touching an unreadable byte fails too.
    pub bad_writes_fail: Vec<bool>,
    /// Slots where a write over unreadable bytes succeeds but leaves them unreadable (a drive
    /// that takes the write and cannot remap the sector).
    pub bad_stays_bad: Vec<bool>,
    /// Slots the engine must not read (recovering members): a read there panics.
    pub no_reads: Vec<bool>,
    /// Per slot, its partial parity log area (empty until the engine writes one).
    pub logs: Vec<Vec<u8>>,
}

impl Members {
    pub fn new(n: usize, bytes: u64) -> Members {
        Members {
            disks: (0..n).map(|_| Some(vec![0u8; bytes as usize])).collect(),
            broken: vec![false; n],
            unreadable: vec![vec![false; bytes as usize]; n],
            bad_writes_fail: vec![false; n],
            bad_stays_bad: vec![false; n],
            no_reads: vec![false; n],
            logs: vec![Vec::new(); n],
        }
    }

    /// Make `[offset, offset+len)` of `slot` unreadable and scramble what it holds, so a test
    /// can tell whether the engine rewrote it.
    pub fn add_bad_range(&mut self, slot: usize, offset: u64, len: u64) {
        let range = offset as usize..(offset + len) as usize;
        self.unreadable[slot][range.clone()].fill(true);
        let disk = self.disks[slot].as_mut().expect("a device");
        for (i, b) in disk[range].iter_mut().enumerate() {
            *b = !*b ^ (i as u8);
        }
    }

    pub fn exec(&mut self, io: &MemberIo) -> IoResult {
        if self.broken[io.slot] {
            return IoResult::Failed(MemberIoError::other("injected fault"));
        }
        let disk = self.disks[io.slot].as_mut().expect("engine used a missing slot");
        let at = io.offset as usize;
        match &io.op {
            MemberOp::Read { len } => {
                assert!(
                    !self.no_reads[io.slot],
                    "engine read slot {} at {}+{len}, which it must not read",
                    io.slot, io.offset
                );
                assert!(at + *len as usize <= disk.len(), "read past member end");
                if self.unreadable[io.slot][at..at + *len as usize].contains(&true) {
                    return IoResult::Failed(MemberIoError::other("injected read error"));
                }
                IoResult::Read(disk[at..at + *len as usize].to_vec().into())
            }
            MemberOp::Write { data } => {
                assert!(at + data.len() <= disk.len(), "write past member end");
                let bad = &mut self.unreadable[io.slot][at..at + data.len()];
                if self.bad_writes_fail[io.slot] && bad.contains(&true) {
                    return IoResult::Failed(MemberIoError::other("injected write error"));
                }
                if !self.bad_stays_bad[io.slot] {
                    bad.fill(false);
                }
                disk[at..at + data.len()].copy_from_slice(&data.to_vec());
                IoResult::Done
            }
            MemberOp::Flush => IoResult::Done,
            MemberOp::MetadataWrite { .. } => panic!("the engine emitted a metadata write"),
            MemberOp::Discard { len } => {
                assert!(at + *len as usize <= disk.len(), "discard past member end");
                self.unreadable[io.slot][at..at + *len as usize].fill(false);
                disk[at..at + *len as usize].fill(0);
                IoResult::Done
            }
            MemberOp::LogWrite { data } => {
                let log = &mut self.logs[io.slot];
                if log.len() < at + data.len() {
                    log.resize(at + data.len(), 0);
                }
                log[at..at + data.len()].copy_from_slice(data);
                IoResult::Done
            }
        }
    }
}

impl uraid_engine::ppl::ReplayIo for Members {
    fn read(&mut self, slot: usize, offset: u64, len: u64) -> Result<Vec<u8>, MemberIoError> {
        let disk = self.disks[slot].as_ref().ok_or_else(|| MemberIoError::other("no device"))?;
        Ok(disk[offset as usize..(offset + len) as usize].to_vec())
    }

    fn write(&mut self, slot: usize, offset: u64, data: &[u8]) -> Result<(), MemberIoError> {
        let disk = self.disks[slot].as_mut().ok_or_else(|| MemberIoError::other("no device"))?;
        disk[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
}

pub const MEMBER_BYTES: u64 = 192 * 1024;

/// The `split` policy's knobs scaled to the test members: windows of a few rows, read-ahead of
/// a few windows, reads divided from 16 KiB on.
pub const SMALL_SPLIT: SplitTuning =
    SplitTuning { window_bytes: 16 * 1024, readahead_bytes: 96 * 1024, divide_bytes: 16 * 1024 };

/// Give `array` read policy number `pick` (modulo their number), with [`SMALL_SPLIT`]; the
/// policy set.
pub fn use_policy(array: &mut Array, pick: usize) -> ReadPolicy {
    let policy = ReadPolicy::ALL[pick % ReadPolicy::ALL.len()];
    array.set_read_policy(policy);
    array.set_split_tuning(SMALL_SPLIT);
    policy
}

/// Every level/layout combination under test, with a name: md's, then gvinum's.
pub fn geometries() -> Vec<(String, Geometry)> {
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
    out.push((
        "raid0-2-12k".into(),
        Geometry::Raid0(Raid0Layout::new(&[comp; 2], 24, Raid0ZoneLayout::Unset).unwrap()),
    ));
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
        out.push((
            format!("raid5-4-{}", a.name()),
            Geometry::Parity(ParityLayout::new(Level::Raid5, a, 4, 8, comp).unwrap()),
        ));
    }
    out.push((
        "raid5-2".into(),
        Geometry::Parity(
            ParityLayout::new(Level::Raid5, ParityAlgorithm::from_md(Level::Raid5, 2).unwrap(), 2, 8, comp).unwrap(),
        ),
    ));
    for alg in [0u32, 1, 2, 3, 4, 5, 8, 9, 10, 16, 17, 18, 19, 20] {
        let a = ParityAlgorithm::from_md(Level::Raid6, alg).unwrap();
        out.push((
            format!("raid6-5-{}", a.name()),
            Geometry::Parity(ParityLayout::new(Level::Raid6, a, 5, 8, comp).unwrap()),
        ));
    }
    // Wider stripes, where read-modify-write wins for small writes (and slot order matters).
    for alg in [0u32, 2, 16] {
        let a = ParityAlgorithm::from_md(Level::Raid6, alg).unwrap();
        out.push((
            format!("raid6-7-{}", a.name()),
            Geometry::Parity(ParityLayout::new(Level::Raid6, a, 7, 8, comp).unwrap()),
        ));
    }
    out.push((
        "raid5-6-la".into(),
        Geometry::Parity(
            ParityLayout::new(Level::Raid5, ParityAlgorithm::from_md(Level::Raid5, 0).unwrap(), 6, 8, comp).unwrap(),
        ),
    ));
    out.push((
        "raid6-4".into(),
        Geometry::Parity(
            ParityLayout::new(Level::Raid6, ParityAlgorithm::from_md(Level::Raid6, 2).unwrap(), 4, 8, comp).unwrap(),
        ),
    ));
    // Layouts another format defines, which the engine runs without knowing them.
    out.extend(vinum::geometries());
    out
}

pub fn read_all(array: &mut Array, members: &mut Members) -> Vec<u8> {
    let size = array.size_bytes();
    match execute(array, Request::Read { offset: 0, len: size }, &mut |io| members.exec(io)).unwrap() {
        Completion::Read(d) => d.into_vec(),
        other => panic!("unexpected completion {other:?}"),
    }
}

pub fn sync(array: &mut Array, members: &mut Members, repair: bool) -> u64 {
    let size = array.size_bytes();
    match execute(array, Request::Sync { offset: 0, len: size, repair }, &mut |io| members.exec(io)).unwrap() {
        Completion::Synced { mismatch_sectors } => mismatch_sectors,
        other => panic!("unexpected completion {other:?}"),
    }
}

pub fn check_consistent(array: &mut Array, members: &mut Members, name: &str) {
    assert_eq!(sync(array, members, false), 0, "{name}: redundancy inconsistent");
}

/// Slots we can take away from a healthy array and still read everything.
pub fn removable_sets(geometry: &Geometry) -> Vec<Vec<usize>> {
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

/// Every loss the level survives must read back `model` from these member images.
pub fn assert_every_loss_reads(geometry: &Geometry, members: &mut Members, model: &[u8], name: &str) {
    let n = geometry.raid_disks();
    for set in removable_sets(geometry) {
        let mut slots = vec![SlotState::InSync; n];
        for &s in &set {
            slots[s] = SlotState::Missing;
        }
        let mut degraded = Array::new(geometry.clone(), slots).unwrap();
        assert!(read_all(&mut degraded, members) == model, "{name}: reading without slots {set:?} differs");
    }
}

/// A healthy array over fresh members, filled with a known pattern (returned too).
pub fn filled_array(g: &Geometry) -> (Members, Array, Vec<u8>) {
    let n = g.raid_disks();
    let mut members = Members::new(n, MEMBER_BYTES);
    let mut array = Array::new(g.clone(), vec![SlotState::InSync; n]).unwrap();
    let data: Vec<u8> = (0..array.size_bytes()).map(|i| (i % 251) as u8).collect();
    execute(&mut array, Request::Write { offset: 0, data: data.clone().into() }, &mut |io| members.exec(io)).unwrap();
    (members, array, data)
}

/// Submit every request at once and perform the member I/Os they produce in random order, as a
/// driver with many I/Os in flight may; the results come back in submission order.
pub fn drive(
    array: &mut Array,
    members: &mut Members,
    requests: Vec<Request>,
    rng: &mut StdRng,
) -> Vec<Result<Completion, EngineError>> {
    let ids: Vec<RequestId> = requests.into_iter().map(|r| array.submit(r).expect("request accepted")).collect();
    let mut results: HashMap<RequestId, Result<Completion, EngineError>> = HashMap::new();
    let mut pool: Vec<MemberIo> = Vec::new();
    loop {
        while let Some((id, result)) = array.next_completion() {
            results.insert(id, result);
        }
        while let Some(io) = array.next_io() {
            pool.push(io);
        }
        if pool.is_empty() {
            assert!(ids.iter().all(|id| results.contains_key(id)), "engine stalled with requests unfinished");
            break;
        }
        let io = pool.swap_remove(rng.gen_range(0..pool.len()));
        let result = members.exec(&io);
        array.complete_io(io.id, result);
    }
    ids.iter().map(|id| results.remove(id).expect("a result")).collect()
}

/// Submit `request`, perform every member I/O the engine emits in order until it completes
/// (read-ahead included), and return its completion with the member I/Os performed.
pub fn run_recorded(array: &mut Array, members: &mut Members, request: Request) -> (Completion, Vec<MemberIo>) {
    let id = array.submit(request).unwrap();
    let mut ios = Vec::new();
    loop {
        if let Some((done, result)) = array.next_completion() {
            assert_eq!(done, id);
            return (result.unwrap(), ios);
        }
        let io = array.next_io().expect("engine stalled");
        let result = members.exec(&io);
        ios.push(io.clone());
        array.complete_io(io.id, result);
    }
}
