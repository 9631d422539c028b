//! `SimDisk`: one simulated member device in memory.
//!
//! What it owns: the bytes reads see (the drive's cache), the bytes a power loss keeps (the
//! media), the log of completed writes not yet on the media, latent sector errors, and death.
//!
//! - A completed write is visible to reads at once and goes to the volatile log. It reaches the
//!   media when a member flush that was *issued after it completed* completes, or earlier when
//!   the drive destages on its own ([`SimDisk::destage`], oldest first, as a cache drains).
//! - A write is applied whole at its completion. Writes are byte-granular at the interface (the
//!   engine works in bytes) but the media is made of 512-byte sectors: each logged write keeps
//!   the full sectors it touched, as they were after it, so a crash keeps or loses whole sectors.
//! - A crash ([`SimDisk::crash`]) decides for every logged write (and every write still in flight,
//!   which may have reached the drive) whether it was kept, lost, or torn: torn keeps some of its
//!   sectors and loses the others, never half a sector.
//! - A latent sector error makes reads touching the sector fail and scrambles what it holds.
//!   A write covering the whole sector remaps it (the error is gone and the new bytes go straight
//!   to the media); a write covering only part of it fails, since the drive (or the driver's
//!   read-modify-write of the sector) would have to read the lost bytes first.

use std::collections::{BTreeSet, VecDeque};

use crate::rng::SimRng;

/// Media sector size.
pub const SECTOR: u64 = 512;

#[derive(Debug)]
struct Record {
    seq: u64,
    /// First sector the record covers.
    first: u64,
    /// Whole sectors, as they were right after the write.
    data: Vec<u8>,
}

/// What a crash did to one disk's volatile writes.
#[derive(Debug, Default, Clone, Copy)]
pub struct CrashOutcome {
    pub kept: usize,
    pub lost: usize,
    pub torn: usize,
}

#[derive(Debug)]
pub struct SimDisk {
    /// Device number (devices are never reused: a spare is a new device).
    pub id: usize,
    cache: Vec<u8>,
    durable: Vec<u8>,
    log: VecDeque<Record>,
    next_seq: u64,
    bad: BTreeSet<u64>,
    /// All I/O fails.
    pub dead: bool,
    /// The next write fails (and only it; the engine drops the member anyway).
    pub fail_next_write: bool,
    /// A fault was injected here (explains a member failure the engine reports).
    pub faulted: bool,
    /// Checker validation only: flushes complete without making anything durable.
    pub lying_flush: bool,
    /// Bytes silently corrupted and not rewritten since (checker validation).
    corrupted: BTreeSet<u64>,
}

impl SimDisk {
    pub fn new(id: usize, bytes: u64) -> SimDisk {
        SimDisk {
            id,
            cache: vec![0; bytes as usize],
            durable: vec![0; bytes as usize],
            log: VecDeque::new(),
            next_seq: 0,
            bad: BTreeSet::new(),
            dead: false,
            fail_next_write: false,
            faulted: false,
            lying_flush: false,
            corrupted: BTreeSet::new(),
        }
    }

    pub fn len(&self) -> u64 {
        self.cache.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    pub fn in_range(&self, offset: u64, len: u64) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.len())
    }

    pub fn has_bad_sectors(&self) -> bool {
        !self.bad.is_empty()
    }

    pub fn volatile_writes(&self) -> usize {
        self.log.len()
    }

    pub fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>, String> {
        let end = offset + len;
        if let Some(s) = self.bad.range(offset / SECTOR..end.div_ceil(SECTOR)).next() {
            return Err(format!("medium error: sector {s} is unreadable"));
        }
        Ok(self.cache[offset as usize..end as usize].to_vec())
    }

    /// The cached bytes, bad sectors or not (for failure reports).
    pub fn peek(&self, offset: u64, len: u64) -> &[u8] {
        &self.cache[offset as usize..(offset + len) as usize]
    }

    /// A write command: fails for an injected write error or a partial write of a bad sector.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        if self.fail_next_write {
            self.fail_next_write = false;
            return Err("injected write error".into());
        }
        self.store(offset, data)
    }

    /// Discard: the range reads back as zeros (a write of zeros as far as the media goes).
    pub fn discard(&mut self, offset: u64, len: u64) -> Result<(), String> {
        self.write(offset, &vec![0u8; len as usize])
    }

    fn store(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        if data.is_empty() {
            return Ok(());
        }
        let end = offset + data.len() as u64;
        let (first, last) = (offset / SECTOR, end.div_ceil(SECTOR));
        let remapped: Vec<u64> = self.bad.range(first..last).copied().collect();
        for &s in &remapped {
            if offset > s * SECTOR || end < (s + 1) * SECTOR {
                return Err(format!(
                    "write {offset}+{} covers only part of unreadable sector {s}: the rest of the sector cannot be read to merge with it",
                    data.len()
                ));
            }
        }
        self.cache[offset as usize..end as usize].copy_from_slice(data);
        let rewritten: Vec<u64> = self.corrupted.range(offset..end).copied().collect();
        for b in rewritten {
            self.corrupted.remove(&b);
        }
        for s in remapped {
            self.bad.remove(&s);
            let r = (s * SECTOR) as usize..((s + 1) * SECTOR) as usize;
            let bytes = self.cache[r.clone()].to_vec();
            self.durable[r].copy_from_slice(&bytes);
        }
        let r = (first * SECTOR) as usize..(last * SECTOR) as usize;
        self.log.push_back(Record { seq: self.next_seq, first, data: self.cache[r].to_vec() });
        self.next_seq += 1;
        Ok(())
    }

    /// A FUA write (a partial parity log write): durable when it completes, whatever the
    /// cache holds. Whole sectors only, as the log writes them.
    pub fn write_fua(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        if self.fail_next_write {
            self.fail_next_write = false;
            return Err("injected write error".into());
        }
        let at = offset as usize;
        self.cache[at..at + data.len()].copy_from_slice(data);
        self.durable[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// A FUA write in flight at a crash: nothing of it, all of it, or some of its sectors.
    /// Call before [`SimDisk::crash`], which makes the cache what the media holds.
    pub fn crash_fua(&mut self, rng: &mut SimRng, offset: u64, data: &[u8]) {
        let fate = rng.below(3);
        for (i, sector) in data.chunks(SECTOR as usize).enumerate() {
            if fate == 1 || (fate == 2 && rng.chance(1, 2)) {
                let at = offset as usize + i * SECTOR as usize;
                self.durable[at..at + sector.len()].copy_from_slice(sector);
            }
        }
    }

    /// Write `data` at `offset` straight to the media (the array's creation, before the run,
    /// and what assembly wrote, which it flushed before it returned).
    pub fn write_durable(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        if data.is_empty() {
            return Ok(());
        }
        self.store(offset, data)?;
        let r = self.log.pop_back().expect("a stored write is logged");
        self.apply(r.first, &r.data);
        Ok(())
    }

    /// What the drive returns now, bad sectors included (for assembly after a crash, when the
    /// cache holds what the media holds), and which sectors are bad.
    pub fn contents(&self) -> (&[u8], &BTreeSet<u64>) {
        (&self.cache, &self.bad)
    }

    /// A flush is being issued: it covers every write completed so far.
    pub fn flush_mark(&self) -> u64 {
        self.next_seq
    }

    /// The flush issued at `mark` completed: what it covers is on the media.
    pub fn flush_done(&mut self, mark: u64) {
        if self.lying_flush {
            return;
        }
        while self.log.front().is_some_and(|r| r.seq < mark) {
            let r = self.log.pop_front().expect("checked");
            self.apply(r.first, &r.data);
        }
    }

    /// The drive writes back up to `count` of its oldest cached writes on its own.
    pub fn destage(&mut self, count: usize) {
        for _ in 0..count {
            let Some(r) = self.log.pop_front() else { return };
            self.apply(r.first, &r.data);
        }
    }

    fn apply(&mut self, first: u64, data: &[u8]) {
        let at = (first * SECTOR) as usize;
        self.durable[at..at + data.len()].copy_from_slice(data);
    }

    /// Make `count` sectors from `first` unreadable and scramble them (on the media too).
    /// Sectors with a write still in the cache are left alone (the drive would write them back
    /// and remap them). Returns the sectors made bad.
    pub fn add_latent(&mut self, first: u64, count: u64, rng: &mut SimRng) -> Vec<u64> {
        let mut out = Vec::new();
        for s in first..(first + count).min(self.len() / SECTOR) {
            let cached = self.log.iter().any(|r| r.first <= s && s < r.first + r.data.len() as u64 / SECTOR);
            if cached || self.bad.contains(&s) {
                continue;
            }
            let r = (s * SECTOR) as usize..((s + 1) * SECTOR) as usize;
            rng.fill(&mut self.cache[r.clone()]);
            let bytes = self.cache[r.clone()].to_vec();
            self.durable[r].copy_from_slice(&bytes);
            self.bad.insert(s);
            out.push(s);
        }
        out
    }

    /// Checker validation only: change a byte behind the engine's back, in the cache and on the
    /// media alike.
    pub fn corrupt(&mut self, offset: u64, xor: u8) {
        let xor = xor.max(1);
        self.corrupted.insert(offset);
        self.cache[offset as usize] ^= xor;
        self.durable[offset as usize] ^= xor;
    }

    /// Silently corrupted bytes no write has covered since.
    pub fn standing_corruptions(&self) -> usize {
        self.corrupted.len()
    }

    /// Power loss. `inflight` are writes issued to the drive and not completed, in issue order:
    /// each may have reached it. Every volatile write is kept, lost or torn; afterwards the
    /// cache holds what the media holds.
    pub fn crash(&mut self, rng: &mut SimRng, inflight: &[(u64, Vec<u8>)]) -> CrashOutcome {
        for (offset, data) in inflight {
            // One that could not have succeeded simply did not happen.
            let _ = self.store(*offset, data);
        }
        let mut outcome = CrashOutcome::default();
        // How this drive's cache fared: all lost, all kept, or each write on its own.
        let style = rng.below(4);
        while let Some(r) = self.log.pop_front() {
            let fate = match style {
                0 => 1,
                1 => 0,
                _ => rng.below(3),
            };
            match fate {
                0 => {
                    outcome.kept += 1;
                    self.apply(r.first, &r.data);
                }
                1 => outcome.lost += 1,
                _ => {
                    outcome.torn += 1;
                    for (i, sector) in r.data.chunks(SECTOR as usize).enumerate() {
                        if rng.chance(1, 2) {
                            self.apply(r.first + i as u64, sector);
                        }
                    }
                }
            }
        }
        self.cache.copy_from_slice(&self.durable);
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushed_writes_survive_a_crash() {
        let mut rng = SimRng::new(1);
        for _ in 0..50 {
            let mut d = SimDisk::new(0, 8192);
            d.write(100, &[7u8; 1000]).unwrap();
            let mark = d.flush_mark();
            d.write(3000, &[9u8; 10]).unwrap();
            d.flush_done(mark);
            d.crash(&mut rng, &[]);
            assert_eq!(d.read(100, 1000).unwrap(), vec![7u8; 1000]);
            let tail = d.read(3000, 10).unwrap();
            assert!(tail == vec![9u8; 10] || tail == vec![0u8; 10]);
        }
    }

    #[test]
    fn torn_writes_tear_at_sector_boundaries() {
        let mut rng = SimRng::new(2);
        for _ in 0..200 {
            let mut d = SimDisk::new(0, 8192);
            d.write(256, &[5u8; 4096]).unwrap();
            d.crash(&mut rng, &[]);
            let all = d.read(0, 8192).unwrap();
            for s in 0..16 {
                let sector = &all[s * 512..(s + 1) * 512];
                let lo = 256usize.saturating_sub(s * 512).min(512);
                let hi = (256 + 4096usize).saturating_sub(s * 512).min(512);
                let new = sector[lo..hi].iter().all(|&b| b == 5);
                let old = sector[lo..hi].iter().all(|&b| b == 0);
                assert!(new || old, "sector {s} mixes old and new");
            }
        }
    }

    #[test]
    fn latent_errors_fail_reads_until_rewritten_whole() {
        let mut rng = SimRng::new(3);
        let mut d = SimDisk::new(0, 8192);
        assert_eq!(d.add_latent(2, 1, &mut rng), vec![2]);
        assert!(d.read(1000, 100).is_err());
        assert!(d.read(0, 1024).is_ok());
        assert!(d.write(1100, &[1u8; 10]).is_err(), "a partial write of a bad sector cannot merge");
        d.write(1024, &[1u8; 512]).unwrap();
        assert_eq!(d.read(1024, 512).unwrap(), vec![1u8; 512]);
        // The remap went straight to the media.
        d.crash(&mut rng, &[]);
        assert_eq!(d.read(1024, 512).unwrap(), vec![1u8; 512]);
    }
}
