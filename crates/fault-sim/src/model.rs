//! `Model`: what the array's logical contents may be, per 512-byte logical sector.
//!
//! The rules (the checker's contract with the engine):
//!
//! - **Reads are linearized at submission.** The engine makes every request wait for earlier
//!   requests it conflicts with (a write with anything overlapping it; whole stripes on parity
//!   levels), so a read returns exactly the contents after every write submitted before it, and
//!   none submitted after it. The model applies a write when it is submitted, and a read is
//!   judged against a snapshot taken when it was submitted.
//! - **Sectors are atomic.** Each sector has a set of values it may hold *now* (`now`, normally
//!   one) and the list of values it may hold *after a crash* (`hist`): the value made durable by
//!   the last completed flush, then every value written since, in submission order. After a
//!   crash, each sector holds exactly one of those values, never a mix of two inside a sector,
//!   even for a write unaligned inside it (the member media tear only at sector boundaries, and
//!   the engine's member writes for one logical sector are one member write). Different sectors
//!   of one write are independent (a write may be torn between sectors).
//! - **Flush floor.** A flush completing successfully makes durable every write acknowledged
//!   before the flush was *submitted*: for each sector, the values older than the newest such
//!   write drop out of `hist` (kept aside in `retired` only to name a lost write in a report).
//! - **Failed writes** (only when failures exceed the redundancy) leave the bytes they cover
//!   unknown: any value is accepted there until they are written again.
//!
//! A client never has two writes in flight that share a sector without overlapping: the engine
//! would run them concurrently, and after a crash the sector could hold either one without the
//! other, which a single history cannot say. The workload holds such a write back (see
//! `Sim::shares_sector_without_overlap`).

use std::rc::Rc;

pub const SECTOR: u64 = 512;
const S: usize = SECTOR as usize;

/// Identifies a client write (discards included); 0 stands for "before the last crash".
pub type WriteId = u64;

/// One possible value of one sector.
#[derive(Clone, PartialEq, Eq)]
pub struct Value {
    bytes: [u8; S],
    /// Bytes that may hold anything (a failed write covered them), as a bit set.
    unknown: Option<[u64; 8]>,
}

impl Value {
    fn zero() -> Value {
        Value { bytes: [0; S], unknown: None }
    }

    fn is_unknown(&self, i: usize) -> bool {
        self.unknown.is_some_and(|m| m[i / 64] & (1 << (i % 64)) != 0)
    }

    /// First byte of `got` (which starts at byte `at` of the sector) that this value forbids.
    fn first_difference(&self, at: usize, got: &[u8], masked: &dyn Fn(usize) -> bool) -> Option<usize> {
        let want = &self.bytes[at..at + got.len()];
        if want == got {
            return None;
        }
        (0..got.len()).find(|&i| want[i] != got[i] && !self.is_unknown(at + i) && !masked(at + i))
    }
}

struct Sector {
    now: Vec<Rc<Value>>,
    hist: Vec<(Rc<Value>, WriteId)>,
    /// Values a completed flush made obsolete, with the write that did and how many crashes
    /// had happened then (only a later crash can bring one back).
    retired: Vec<(Rc<Value>, WriteId, u32)>,
}

#[derive(Debug, Clone)]
struct WriteInfo {
    offset: u64,
    len: u64,
    /// Model clock when acknowledged.
    acked: Option<u64>,
    failed: bool,
}

/// What a read may return, captured when it was submitted.
pub struct Expect {
    pub offset: u64,
    pub len: u64,
    first: u64,
    cands: Vec<Vec<Rc<Value>>>,
}

/// A flush's place in the model's order of events.
#[derive(Debug, Clone, Copy)]
pub struct FlushToken(pub(crate) u64);

/// A read that returned something the model does not allow.
#[derive(Debug, Clone)]
pub struct Mismatch {
    /// Bytes of the sector that even the closest allowed value does not explain.
    pub wrong_bytes: usize,
    /// Logical byte offset of the first byte no allowed value explains.
    pub offset: u64,
    pub sector: u64,
    pub got: u8,
    /// What the allowed values hold at that byte.
    pub allowed: Vec<u8>,
    /// The sector read back as a value that a completed flush had made obsolete: the write
    /// that superseded it was acknowledged, flushed, and then lost.
    pub lost_durable: Option<WriteId>,
}

impl Mismatch {
    pub fn describe(&self) -> String {
        let allowed: Vec<String> = self.allowed.iter().map(|b| format!("{b:#04x}")).collect();
        let mut s = format!(
            "logical byte {} (sector {}, byte {} of it; {} wrong byte(s) in the sector against the closest allowed value) read as {:#04x}; the model allows {} value(s) of the sector, holding [{}] there",
            self.offset,
            self.sector,
            self.offset % SECTOR,
            self.wrong_bytes,
            self.got,
            self.allowed.len(),
            allowed.join(", ")
        );
        if let Some(w) = self.lost_durable {
            s.push_str(&format!(
                "; the sector holds what it held before a flushed write superseded it (the value was retired by {})",
                if w == 0 { "a write before the last crash".to_string() } else { format!("write #{w}") }
            ));
        }
        s
    }
}

pub struct Model {
    sectors: Vec<Sector>,
    size: u64,
    writes: Vec<WriteInfo>,
    clock: u64,
    crashes: u32,
}

impl Model {
    /// An array of `size` bytes of zeros (fresh members hold zeros, and zeros are consistent
    /// redundancy on every level).
    pub fn new(size: u64) -> Model {
        let zero = Rc::new(Value::zero());
        let sectors = (0..size.div_ceil(SECTOR))
            .map(|_| Sector { now: vec![zero.clone()], hist: vec![(zero.clone(), 0)], retired: Vec::new() })
            .collect();
        Model { sectors, size, writes: Vec::new(), clock: 0, crashes: 0 }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// A write (or a discard, as zeros) was submitted.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> WriteId {
        self.writes.push(WriteInfo { offset, len: data.len() as u64, acked: None, failed: false });
        let id = self.writes.len() as WriteId;
        let end = offset + data.len() as u64;
        for s in offset / SECTOR..end.div_ceil(SECTOR) {
            let start = s * SECTOR;
            let lo = offset.max(start);
            let hi = end.min(start + SECTOR);
            let src = &data[(lo - offset) as usize..(hi - offset) as usize];
            let at = (lo - start) as usize;
            let sector = &mut self.sectors[s as usize];
            let mut next: Vec<Rc<Value>> = Vec::with_capacity(sector.now.len());
            for v in &sector.now {
                let mut nv = (**v).clone();
                nv.bytes[at..at + src.len()].copy_from_slice(src);
                if let Some(mask) = &mut nv.unknown {
                    for i in at..at + src.len() {
                        mask[i / 64] &= !(1 << (i % 64));
                    }
                    if mask.iter().all(|&m| m == 0) {
                        nv.unknown = None;
                    }
                }
                if !next.iter().any(|x| **x == nv) {
                    next.push(Rc::new(nv));
                }
            }
            sector.hist.extend(next.iter().map(|v| (v.clone(), id)));
            sector.now = next;
        }
        id
    }

    /// The write was acknowledged.
    pub fn write_acked(&mut self, id: WriteId) {
        let t = self.tick();
        self.writes[id as usize - 1].acked = Some(t);
    }

    /// The write failed: the bytes it covers may hold anything now, and after any crash.
    pub fn write_failed(&mut self, id: WriteId) {
        let w = self.writes[id as usize - 1].clone();
        self.writes[id as usize - 1].failed = true;
        self.mark_unknown(w.offset, w.len);
    }

    /// Whatever the sectors covering `[offset, offset+len)` hold is accepted until they are
    /// written again (whole sectors: a sector is the unit a member rebuilds).
    pub fn forget_sectors(&mut self, offset: u64, len: u64) {
        let start = offset / SECTOR * SECTOR;
        let end = (offset + len).div_ceil(SECTOR) * SECTOR;
        self.mark_unknown(start, end.min(self.size()) - start);
    }

    fn mark_unknown(&mut self, offset: u64, len: u64) {
        let end = offset + len;
        for s in offset / SECTOR..end.div_ceil(SECTOR) {
            let start = s * SECTOR;
            let lo = (offset.max(start) - start) as usize;
            let hi = (end.min(start + SECTOR) - start) as usize;
            let mark = |v: &Rc<Value>| {
                let mut nv = (**v).clone();
                let mask = nv.unknown.get_or_insert([0; 8]);
                for i in lo..hi {
                    mask[i / 64] |= 1 << (i % 64);
                }
                Rc::new(nv)
            };
            let sector = &mut self.sectors[s as usize];
            sector.now = sector.now.iter().map(mark).collect();
            sector.hist = sector.hist.iter().map(|(v, w)| (mark(v), *w)).collect();
        }
    }

    /// Whether write `id` failed.
    pub fn failed(&self, id: WriteId) -> bool {
        self.writes[id as usize - 1].failed
    }

    /// The byte range of write `id`.
    pub fn range(&self, id: WriteId) -> (u64, u64) {
        let w = &self.writes[id as usize - 1];
        (w.offset, w.offset + w.len)
    }

    /// A flush was submitted.
    pub fn flush_submitted(&mut self) -> FlushToken {
        FlushToken(self.tick())
    }

    /// The flush completed successfully: every write acknowledged before it was submitted is
    /// durable.
    pub fn flush_done(&mut self, token: FlushToken) {
        let writes = &self.writes;
        let durable = |w: WriteId| w != 0 && writes[w as usize - 1].acked.is_some_and(|t| t < token.0);
        for sector in &mut self.sectors {
            if sector.hist.len() <= 1 {
                continue;
            }
            let Some(floor) = sector.hist.iter().rev().map(|e| e.1).find(|&w| durable(w)) else { continue };
            let first = sector.hist.iter().position(|e| e.1 == floor).expect("found above");
            for (v, _) in sector.hist.drain(..first) {
                sector.retired.push((v, floor, self.crashes));
            }
            let excess = sector.retired.len().saturating_sub(4);
            sector.retired.drain(..excess);
        }
    }

    /// Writes not yet durable: unacknowledged, or acknowledged after the flush `token` was
    /// submitted (`None`: no flush completed yet). Their byte ranges.
    pub fn unflushed_ranges(&self, token: Option<FlushToken>) -> Vec<(u64, u64)> {
        self.writes
            .iter()
            .filter(|w| match (w.acked, token) {
                (None, _) | (Some(_), None) => true,
                (Some(t), Some(f)) => t >= f.0,
            })
            .map(|w| (w.offset, w.offset + w.len))
            .collect()
    }

    /// A crash: each sector may now hold any value of its history.
    pub fn crash(&mut self) {
        self.crashes += 1;
        for sector in &mut self.sectors {
            let mut set: Vec<Rc<Value>> = Vec::new();
            for (v, _) in &sector.hist {
                if !set.iter().any(|x| **x == **v) {
                    set.push(v.clone());
                }
            }
            sector.hist = set.iter().map(|v| (v.clone(), 0)).collect();
            sector.now = set;
        }
    }

    /// Sectors that may hold more than one value now.
    pub fn uncertain_sectors(&self) -> usize {
        self.sectors.iter().filter(|s| s.now.len() > 1).count()
    }

    /// What a read of `[offset, offset+len)` submitted now may return.
    pub fn expect(&self, offset: u64, len: u64) -> Expect {
        let first = offset / SECTOR;
        let last = (offset + len).div_ceil(SECTOR);
        let cands = (first..last).map(|s| self.sectors[s as usize].now.clone()).collect();
        Expect { offset, len, first, cands }
    }

    /// Judge the bytes a read returned; bytes inside `masked` (logical ranges of writes that
    /// failed while the read waited for them) are not judged.
    pub fn check(&self, exp: &Expect, data: &[u8], masked: &[(u64, u64)]) -> Result<(), Mismatch> {
        assert_eq!(data.len() as u64, exp.len, "read length checked by the caller");
        for (k, cands) in exp.cands.iter().enumerate() {
            let s = exp.first + k as u64;
            let start = s * SECTOR;
            let lo = exp.offset.max(start);
            let hi = (exp.offset + exp.len).min(start + SECTOR);
            let got = &data[(lo - exp.offset) as usize..(hi - exp.offset) as usize];
            let at = (lo - start) as usize;
            let is_masked = |i: usize| {
                let b = start + i as u64;
                masked.iter().any(|&(m0, m1)| m0 <= b && b < m1)
            };
            if cands.iter().any(|v| v.first_difference(at, got, &is_masked).is_none()) {
                continue;
            }
            // The closest allowed value (fewest forbidden bytes) names the first wrong byte.
            let mut best: Option<(usize, usize)> = None;
            for v in cands {
                let wrong: Vec<usize> = (0..got.len())
                    .filter(|&i| v.bytes[at + i] != got[i] && !v.is_unknown(at + i) && !is_masked(at + i))
                    .collect();
                match wrong.first() {
                    None => {
                        best = None;
                        break;
                    }
                    Some(&first) => {
                        if best.is_none_or(|(count, _)| wrong.len() < count) {
                            best = Some((wrong.len(), first));
                        }
                    }
                }
            }
            let Some((count, i)) = best else { continue };
            let sector = &self.sectors[s as usize];
            let lost_durable = sector
                .retired
                .iter()
                .rev()
                .find(|(v, _, epoch)| *epoch < self.crashes && v.first_difference(at, got, &is_masked).is_none())
                .map(|(_, w, _)| *w);
            return Err(Mismatch {
                wrong_bytes: count,
                offset: start + (at + i) as u64,
                sector: s,
                got: got[i],
                allowed: cands.iter().map(|v| v.bytes[at + i]).collect(),
                lost_durable,
            });
        }
        Ok(())
    }

    /// After a full read of the array that the model allowed: every sector holds what was read
    /// from now on (reads must be stable). Only `now` is narrowed; what a later crash may bring
    /// back is unchanged.
    pub fn pin(&mut self, data: &[u8]) {
        assert_eq!(data.len() as u64, self.size);
        for (s, sector) in self.sectors.iter_mut().enumerate() {
            if sector.now.len() <= 1 {
                continue;
            }
            let start = s * S;
            let got = &data[start..(start + S).min(data.len())];
            if let Some(v) = sector.now.iter().find(|v| v.first_difference(0, got, &|_| false).is_none()) {
                sector.now = vec![v.clone()];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_see_submitted_writes() {
        let mut m = Model::new(4096);
        let w = m.write(100, &[1u8; 1000]);
        let e = m.expect(0, 4096);
        let mut data = vec![0u8; 4096];
        data[100..1100].fill(1);
        assert!(m.check(&e, &data, &[]).is_ok());
        data[500] = 2;
        let err = m.check(&e, &data, &[]).unwrap_err();
        assert_eq!(err.offset, 500);
        m.write_acked(w);
    }

    #[test]
    fn crash_allows_history_since_the_flush_floor() {
        let mut m = Model::new(1024);
        let a = m.write(0, &[1u8; 512]);
        m.write_acked(a);
        let f = m.flush_submitted();
        let b = m.write(0, &[2u8; 512]);
        m.flush_done(f);
        m.write_acked(b);
        m.crash();
        let e = m.expect(0, 512);
        assert!(m.check(&e, &[1u8; 512], &[]).is_ok());
        assert!(m.check(&e, &[2u8; 512], &[]).is_ok());
        let lost = m.check(&e, &[0u8; 512], &[]).unwrap_err();
        assert_eq!(lost.lost_durable, Some(a), "write a was flushed, then lost");
        // A mix inside the sector is never allowed.
        let mut mix = vec![1u8; 512];
        mix[300..].fill(2);
        assert!(m.check(&e, &mix, &[]).is_err());
    }

    #[test]
    fn failed_writes_leave_their_bytes_unknown() {
        let mut m = Model::new(1024);
        let a = m.write(10, &[1u8; 20]);
        m.write_failed(a);
        let e = m.expect(0, 1024);
        let mut data = vec![0u8; 1024];
        data[15] = 99;
        assert!(m.check(&e, &data, &[]).is_ok());
        data[40] = 1;
        assert!(m.check(&e, &data, &[]).is_err());
    }
}
