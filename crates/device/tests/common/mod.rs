//! What the service tests share: arrays of in-memory members with real md superblocks, and
//! small helpers to serve, read and damage them.

#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use uraid_device::service::{BlockOp, BlockReply, ServiceHandle};
use uraid_device::{probe, MemberDevice, MemoryDevice, OpenArray};
use uraid_testkit::NewMdArray;

pub const MEMBER_BYTES: u64 = 8 << 20;

/// Members in memory carrying fresh md 1.2 superblocks (marked clean, contents all zero, which
/// is consistent for every level).
pub fn members(level: i32, n: usize, chunk_sectors: u32) -> Vec<Arc<MemoryDevice>> {
    members_marked(level, n, chunk_sectors, true)
}

pub fn members_marked(level: i32, n: usize, chunk_sectors: u32, clean: bool) -> Vec<Arc<MemoryDevice>> {
    members_with(level, n, chunk_sectors, clean, false)
}

/// The same, with a write-intent bitmap of 64 KiB chunks when `bitmap`.
pub fn members_with(level: i32, n: usize, chunk_sectors: u32, clean: bool, bitmap: bool) -> Vec<Arc<MemoryDevice>> {
    let array = NewMdArray {
        chunk_sectors,
        clean,
        bitmap_chunk: bitmap.then_some(64 << 10),
        ..NewMdArray::new(level, n, MEMBER_BYTES)
    };
    array
        .images()
        .into_iter()
        .enumerate()
        .map(|(i, img)| Arc::new(MemoryDevice::from_bytes(&format!("mem{i}"), img)))
        .collect()
}

/// Members of `member_bytes` in memory carrying a clean md 1.2 array of `level`, `n` members
/// and `chunk_sectors`, written whole with [`pattern`]`(seed)`: the members and the data.
pub fn filled_members(
    level: i32,
    n: usize,
    chunk_sectors: u32,
    member_bytes: u64,
    seed: u64,
) -> (Vec<Arc<MemoryDevice>>, Vec<u8>) {
    let array = NewMdArray { chunk_sectors, clean: true, ..NewMdArray::new(level, n, member_bytes) };
    let devs: Vec<Arc<MemoryDevice>> = array
        .images()
        .into_iter()
        .enumerate()
        .map(|(i, img)| Arc::new(MemoryDevice::from_bytes(&format!("m{i}"), img)))
        .collect();
    let mut a = open(&as_dyn(&devs), true);
    let data = pattern(seed, a.size() as usize);
    a.write(0, data.clone()).unwrap();
    a.close().unwrap();
    (devs, data)
}

pub fn open(devs: &[Arc<dyn MemberDevice>], writable: bool) -> OpenArray {
    let boxed: Vec<Box<dyn MemberDevice>> =
        devs.iter().map(|d| Box::new(Arc::clone(d)) as Box<dyn MemberDevice>).collect();
    OpenArray::assemble(boxed, writable).expect("assemble")
}

pub fn as_dyn(devs: &[Arc<MemoryDevice>]) -> Vec<Arc<dyn MemberDevice>> {
    devs.iter().map(|d| Arc::clone(d) as Arc<dyn MemberDevice>).collect()
}

pub fn clean_on_disk(dev: &dyn MemberDevice) -> bool {
    probe(dev).unwrap().expect("superblock").superblock.info().state_clean
}

pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    uraid_testkit::noise(seed, len)
}

pub fn read(h: &ServiceHandle, offset: u64, len: u64) -> Vec<u8> {
    match h.call(BlockOp::Read { offset, len }).expect("read") {
        BlockReply::Data(d) => d.into_vec(),
        other => panic!("read answered {other:?}"),
    }
}

/// Flip one byte of member `i` inside its data area, `at` bytes from the data start.
pub fn corrupt(devs: &[Arc<dyn MemberDevice>], i: usize, at: u64) {
    let info = probe(devs[i].as_ref()).unwrap().unwrap().superblock.info();
    let pos = info.data_offset * 512 + at;
    let mut b = [0u8; 1];
    devs[i].read_at(pos, &mut b).unwrap();
    b[0] ^= 0x5a;
    devs[i].write_at(pos, &b).unwrap();
}

/// Copy of the members as they are on "disk" right now: what a crash would leave.
pub fn crash_copy(mem: &[Arc<MemoryDevice>]) -> Vec<Arc<MemoryDevice>> {
    mem.iter().map(|m| Arc::new(MemoryDevice::from_bytes(m.name(), m.snapshot()))).collect()
}

/// A new array's members as files in a scratch directory named `name`.
pub fn file_members(name: &str, level: i32, n: usize, chunk: u32) -> Vec<Arc<dyn MemberDevice>> {
    let dir = uraid_testkit::scratch_dir(name);
    members(level, n, chunk)
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let path = dir.join(format!("m{i}.img"));
            std::fs::write(&path, m.snapshot()).unwrap();
            Arc::new(uraid_device::FileDevice::open(&path, true).unwrap()) as Arc<dyn MemberDevice>
        })
        .collect()
}

/// Which I/O of a [`Breakable`] fails once it is broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fails {
    /// Writes only: a disk that stops taking writes may go on reading what it holds.
    Writes,
    /// Reads only: a medium error under data that is never rewritten.
    Reads,
    /// Every read and write: a disk gone.
    All,
}

/// A member in memory whose I/O fails as `fails` says once `broken` is set (flushes never
/// fail). Until then it answers `read_now` from memory too.
pub struct Breakable {
    pub inner: Arc<MemoryDevice>,
    pub broken: Arc<AtomicBool>,
    pub fails: Fails,
}

impl Breakable {
    fn check(&self, reads: bool, what: &str) -> std::io::Result<()> {
        let hit = match self.fails {
            Fails::Writes => !reads,
            Fails::Reads => reads,
            Fails::All => true,
        };
        if hit && self.broken.load(Ordering::SeqCst) {
            return Err(std::io::Error::other(format!("injected {what} error")));
        }
        Ok(())
    }
}

impl MemberDevice for Breakable {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, o: u64, b: &mut [u8]) -> std::io::Result<()> {
        self.check(true, "read")?;
        self.inner.read_at(o, b)
    }
    fn read_now(&self, o: u64, b: &mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<bool> {
        self.check(true, "read")?;
        self.inner.read_now(o, b)
    }
    fn write_at(&self, o: u64, d: &[u8]) -> std::io::Result<()> {
        self.check(false, "write")?;
        self.inner.write_at(o, d)
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}
