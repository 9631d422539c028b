//! Workloads: the seeds' benchmarks as closed-loop streams of block requests.
//!
//! A [`Stream`] is one process of a benchmark as the block layer sees it, after the page cache
//! of the seed's era has done its part: a sequential reader issues read-ahead windows with one
//! window in flight ahead of the one being consumed, a writer's data leaves as write-back
//! requests of the host's size, a bonnie seeker reads one 8 KiB chunk at a time and rewrites
//! one in ten without waiting for it. Streams never look at the clock: they are told when their
//! requests finish, and say what to issue next.

use crate::disk::DiskOp;
use crate::{Nanos, SimRng};

/// One block request from a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoReq {
    pub op: DiskOp,
    pub offset: u64,
    pub len: u64,
    /// The process waits for it (it counts toward the stream's results and depth). Write-back
    /// of dirty data the process has left behind does not.
    pub wait: bool,
}

/// One process of a benchmark.
pub trait Stream {
    /// The next request to issue now, given how many of its waited requests are in flight;
    /// `None` to wait for a completion (or when finished).
    fn next(&mut self, rng: &mut SimRng, in_flight: usize) -> Option<IoReq>;
    /// One of its waited requests finished.
    fn complete(&mut self, req: &IoReq, rng: &mut SimRng);
    /// Nothing more to issue.
    fn finished(&self) -> bool;
    /// CPU time the process spends after a waited request completes, before it issues more
    /// (0 for benchmarks the seeds' CPUs kept up with).
    fn think(&mut self) -> Nanos {
        0
    }
    /// When the process starts, from the start of the run (processes a shell starts one after
    /// another are some milliseconds apart).
    fn starts_at(&self) -> Nanos {
        0
    }
}

/// A sequential reader or writer over `[start, end)`: requests of `len`, `depth` in flight
/// (a `dd` through the page cache, bonnie's block read or block write).
#[derive(Debug, Clone)]
pub struct Sequential {
    pub op: DiskOp,
    pub pos: u64,
    pub end: u64,
    pub len: u64,
    pub depth: usize,
    /// When the process starts (see [`Stream::starts_at`]).
    pub starts_at: Nanos,
}

impl Sequential {
    pub fn new(op: DiskOp, start: u64, bytes: u64, len: u64, depth: usize) -> Sequential {
        Sequential { op, pos: start, end: start + bytes, len, depth, starts_at: 0 }
    }

    /// The same process, started `at` into the run.
    pub fn starting_at(self, at: Nanos) -> Sequential {
        Sequential { starts_at: at, ..self }
    }
}

impl Stream for Sequential {
    fn next(&mut self, _rng: &mut SimRng, in_flight: usize) -> Option<IoReq> {
        if in_flight >= self.depth || self.pos >= self.end {
            return None;
        }
        let len = self.len.min(self.end - self.pos);
        let r = IoReq { op: self.op, offset: self.pos, len, wait: true };
        self.pos += len;
        Some(r)
    }
    fn complete(&mut self, _req: &IoReq, _rng: &mut SimRng) {}
    fn finished(&self) -> bool {
        self.pos >= self.end
    }
    fn starts_at(&self) -> Nanos {
        self.starts_at
    }
}

/// Bonnie's rewrite: read a chunk, dirty it, write it back, through the page cache. The disk
/// sees the file read ahead (windows of `read_len`, two in flight) until a batch of dirty data
/// has built up, then that batch written back behind the reader (requests of `write_len`,
/// `write_depth` in flight), and so on: reading and writing the same region in turns.
#[derive(Debug, Clone)]
pub struct Rewrite {
    pos: u64,
    end: u64,
    read_len: u64,
    write_len: u64,
    batch: u64,
    write_depth: usize,
    /// Bytes read and not yet written back: `[dirty_from, pos)`.
    dirty_from: u64,
    /// Next write-back offset while a batch is being written.
    writing: Option<u64>,
}

impl Rewrite {
    pub fn new(start: u64, bytes: u64, read_len: u64, write_len: u64, batch: u64, write_depth: usize) -> Rewrite {
        Rewrite {
            pos: start,
            end: start + bytes,
            read_len,
            write_len,
            batch,
            write_depth,
            dirty_from: start,
            writing: None,
        }
    }
}

impl Stream for Rewrite {
    fn next(&mut self, _rng: &mut SimRng, in_flight: usize) -> Option<IoReq> {
        if let Some(w) = self.writing {
            if w < self.pos {
                if in_flight >= self.write_depth {
                    return None;
                }
                let len = self.write_len.min(self.pos - w);
                self.writing = Some(w + len);
                return Some(IoReq { op: DiskOp::Write, offset: w, len, wait: true });
            }
            if in_flight > 0 {
                return None;
            }
            // The batch is on its way to the disk and acknowledged: read on.
            self.dirty_from = self.pos;
            self.writing = None;
        }
        if self.pos < self.end && self.pos - self.dirty_from < self.batch {
            if in_flight >= 2 {
                return None;
            }
            let len = self.read_len.min(self.end - self.pos);
            let r = IoReq { op: DiskOp::Read, offset: self.pos, len, wait: true };
            self.pos += len;
            return Some(r);
        }
        if in_flight == 0 && self.pos > self.dirty_from {
            self.writing = Some(self.dirty_from);
            return self.next(_rng, 0);
        }
        None
    }
    fn complete(&mut self, _req: &IoReq, _rng: &mut SimRng) {}
    fn finished(&self) -> bool {
        self.pos >= self.end && self.dirty_from >= self.end && self.writing.is_none()
    }
}

/// One of bonnie's seeker processes: read a random `chunk` of the file, and one time in
/// `update_every` dirty it and write it back (bonnie: 3 seekers, 4000 seeks, 8 KiB chunks,
/// `UpdateSeek` 10). The write goes to the page cache, so the seeker does not wait for it.
#[derive(Debug, Clone)]
pub struct Seeker {
    pub file_start: u64,
    pub file_bytes: u64,
    pub chunk: u64,
    pub seeks_left: u64,
    pub update_every: u64,
    update: Option<IoReq>,
}

impl Seeker {
    pub fn new(file_start: u64, file_bytes: u64, chunk: u64, seeks: u64, update_every: u64) -> Seeker {
        Seeker { file_start, file_bytes, chunk, seeks_left: seeks, update_every, update: None }
    }
}

impl Stream for Seeker {
    fn next(&mut self, rng: &mut SimRng, in_flight: usize) -> Option<IoReq> {
        if let Some(u) = self.update.take() {
            return Some(u);
        }
        if in_flight > 0 || self.seeks_left == 0 {
            return None;
        }
        self.seeks_left -= 1;
        let offset = self.file_start + rng.below(self.file_bytes / self.chunk) * self.chunk;
        Some(IoReq { op: DiskOp::Read, offset, len: self.chunk, wait: true })
    }
    fn complete(&mut self, req: &IoReq, rng: &mut SimRng) {
        // `update_every` 0: a read-only seeker (not bonnie's, which always rewrites some).
        if self.update_every > 0 && rng.chance(1, self.update_every) {
            self.update = Some(IoReq { op: DiskOp::Write, wait: false, ..*req });
        }
    }
    fn finished(&self) -> bool {
        self.seeks_left == 0 && self.update.is_none()
    }
}

/// Transfer sizes of a rawio process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizes {
    Fixed(u64),
    /// Uniform over multiples of 512 bytes in `[min, max]`.
    Uniform {
        min: u64,
        max: u64,
    },
}

impl Sizes {
    /// One transfer's size.
    pub fn draw(&self, rng: &mut SimRng) -> u64 {
        match *self {
            Sizes::Fixed(n) => n,
            Sizes::Uniform { min, max } => rng.between(min / 512, max / 512) * 512,
        }
    }
}

/// A rawio process: random transfers over `[start, start+span)` aligned to 512 bytes, one at a
/// time, `ops` of them.
#[derive(Debug, Clone)]
pub struct Rawio {
    pub op: DiskOp,
    pub start: u64,
    pub span: u64,
    pub sizes: Sizes,
    pub ops_left: u64,
}

impl Stream for Rawio {
    fn next(&mut self, rng: &mut SimRng, in_flight: usize) -> Option<IoReq> {
        if in_flight > 0 || self.ops_left == 0 {
            return None;
        }
        self.ops_left -= 1;
        let len = self.sizes.draw(rng);
        let offset = self.start + rng.below((self.span - len) / 512 + 1) * 512;
        Some(IoReq { op: self.op, offset, len, wait: true })
    }
    fn complete(&mut self, _req: &IoReq, _rng: &mut SimRng) {}
    fn finished(&self) -> bool {
        self.ops_left == 0
    }
}

/// rawio's sequential test, one process: transfers one after another from `start`, each of a
/// size drawn as [`Rawio`]'s, one at a time, going round to `start` at the end of the span.
#[derive(Debug, Clone)]
pub struct SequentialRawio {
    pub op: DiskOp,
    pub start: u64,
    pub span: u64,
    pub sizes: Sizes,
    pub ops_left: u64,
    /// Where the next transfer starts, from `start`.
    at: u64,
}

impl SequentialRawio {
    pub fn new(op: DiskOp, start: u64, span: u64, sizes: Sizes, ops: u64) -> SequentialRawio {
        SequentialRawio { op, start, span, sizes, ops_left: ops, at: 0 }
    }
}

impl Stream for SequentialRawio {
    fn next(&mut self, rng: &mut SimRng, in_flight: usize) -> Option<IoReq> {
        if in_flight > 0 || self.ops_left == 0 {
            return None;
        }
        self.ops_left -= 1;
        let len = self.sizes.draw(rng);
        if self.at + len > self.span {
            self.at = 0;
        }
        let offset = self.start + self.at;
        self.at += len;
        Some(IoReq { op: self.op, offset, len, wait: true })
    }
    fn complete(&mut self, _req: &IoReq, _rng: &mut SimRng) {}
    fn finished(&self) -> bool {
        self.ops_left == 0
    }
}

/// A file-system-like small-write stream: a tar extraction into 4.4BSD FFS without soft
/// dependencies, as the block device sees it.
///
/// - Creating a file writes its inode block and then its directory's block synchronously
///   (`ufs_makeinode`'s `VOP_UPDATE(.., 1)`, `ufs_direnter`'s `VOP_BWRITE`); the process waits
///   for each. Inodes are allocated in order from the cylinder group's inode table at its start
///   (64 to an 8 KiB block), so consecutive files rewrite the same inode block. A directory's
///   entries go to its current block in the data area, a new one every `files_per_dir` files
///   (a new directory costs one more synchronous write, its first block).
/// - A file of more than 12 blocks needs an indirect block, which `ffs_balloc` writes
///   synchronously when it allocates it ("so that indirect blocks never point at garbage"); it
///   lies after the twelfth data block.
/// - tar sets the file's times when it has written it (`utimes`), and `ufs_setattr` writes the
///   inode synchronously for that (`VOP_UPDATE(vp, .., 1)`): a third synchronous write of the
///   inode block.
/// - File data is written behind: delayed writes collect in the buffer cache and leave in
///   clusters of up to `cluster` bytes once `writeback_batch` bytes are dirty (the syncer and
///   buffer shortage of a small machine), not waited for.
/// - The process spends `cpu_per_file` of CPU on each file, in equal parts after each of the
///   file's synchronous writes (the data goes on to the disk meanwhile).
/// - With `soft_updates` (FFS soft dependencies), the inode and directory writes of a create,
///   and the indirect block, become delayed writes: each inode or directory block leaves once,
///   written behind with the data, when the stream moves on from it. The `utimes` inode write
///   stays synchronous (`ffs_update` with `waitfor` still calls `bwrite`).
#[derive(Debug, Clone)]
pub struct SmallFiles {
    pub files_left: u64,
    pub mean_file: u64,
    pub cluster: u64,
    pub files_per_dir: u64,
    pub writeback_batch: u64,
    /// Size of one cylinder group: inode table in its first sixteenth, data after.
    pub group: u64,
    pub span: u64,
    pub cpu_per_file: Nanos,
    data_pos: u64,
    files_in_group: u64,
    files_in_dir: u64,
    dir_block: u64,
    dirty: Vec<IoReq>,
    dirty_bytes: u64,
    pending: Vec<IoReq>,
    /// CPU after each synchronous write of the present file.
    think_per_write: Nanos,
    pub soft_updates: bool,
    /// Under soft updates, the inode and directory blocks dirtied and not yet written behind.
    delayed_inode: Option<u64>,
    delayed_dir: Option<u64>,
}

/// FFS block size.
const FS_BLOCK: u64 = 8192;

/// Direct block pointers in an FFS inode (`NDADDR`).
const DIRECT_BLOCKS: u64 = 12;

impl SmallFiles {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        files: u64,
        mean_file: u64,
        cluster: u64,
        files_per_dir: u64,
        writeback_batch: u64,
        group: u64,
        span: u64,
        cpu_per_file: Nanos,
    ) -> SmallFiles {
        SmallFiles {
            files_left: files,
            mean_file,
            cluster,
            files_per_dir,
            writeback_batch,
            group,
            span,
            cpu_per_file,
            data_pos: group / 16,
            files_in_group: 0,
            files_in_dir: 0,
            dir_block: 0,
            dirty: Vec::new(),
            dirty_bytes: 0,
            pending: Vec::new(),
            think_per_write: 0,
            soft_updates: false,
            delayed_inode: None,
            delayed_dir: None,
        }
    }

    /// The same stream on a file system mounted with soft dependencies.
    pub fn with_soft_updates(self) -> SmallFiles {
        SmallFiles { soft_updates: true, ..self }
    }

    /// A create's metadata write to `block`: synchronous, or under soft updates a delayed write
    /// of the block, written behind when the stream moves on to another `slot` block.
    fn metadata(&mut self, order: &mut Vec<IoReq>, block: u64, dir: bool) {
        if !self.soft_updates {
            order.push(self.sync_write(block));
            return;
        }
        let slot = if dir { &mut self.delayed_dir } else { &mut self.delayed_inode };
        if let Some(old) = slot.replace(block) {
            if old != block {
                self.dirty.push(IoReq { op: DiskOp::Write, offset: old, len: FS_BLOCK, wait: false });
                self.dirty_bytes += FS_BLOCK;
            }
        }
    }

    fn group_start(&self) -> u64 {
        self.data_pos / self.group * self.group
    }

    /// Take `len` bytes of the data area, moving on to the next group when this one is full.
    fn allocate(&mut self, len: u64) -> u64 {
        if self.data_pos + len > self.group_start() + self.group || self.data_pos + len > self.span {
            let next = (self.group_start() + self.group) % (self.span / self.group * self.group);
            self.data_pos = next + self.group / 16;
            self.files_in_group = 0;
        }
        let at = self.data_pos;
        self.data_pos += len;
        at
    }

    fn sync_write(&self, offset: u64) -> IoReq {
        IoReq { op: DiskOp::Write, offset, len: FS_BLOCK, wait: true }
    }

    /// Dirty `[from, to)` in clusters.
    fn dirty_range(&mut self, from: u64, to: u64) {
        let mut at = from;
        while at < to {
            let len = self.cluster.min(to - at);
            self.dirty.push(IoReq { op: DiskOp::Write, offset: at, len, wait: false });
            self.dirty_bytes += len;
            at += len;
        }
    }
}

impl Stream for SmallFiles {
    fn next(&mut self, rng: &mut SimRng, in_flight: usize) -> Option<IoReq> {
        if let Some(r) = self.pending.pop() {
            if !r.wait || in_flight == 0 {
                return Some(r);
            }
            self.pending.push(r);
            return None;
        }
        if in_flight > 0 || self.files_left == 0 {
            return None;
        }
        self.files_left -= 1;
        let mut order = Vec::new();
        if self.files_in_dir == 0 {
            // mkdir: the new directory's first block, written synchronously.
            self.dir_block = self.allocate(FS_BLOCK);
            self.metadata(&mut order, self.dir_block, true);
        }
        self.files_in_dir = (self.files_in_dir + 1) % self.files_per_dir;
        // File sizes: exponential around the mean, in whole 1 KiB fragments (at least one).
        let u = (rng.below(1 << 30) as f64 + 0.5) / (1u64 << 30) as f64;
        let size = ((-u.ln() * self.mean_file as f64) as u64).div_ceil(1024).max(1) * 1024;
        let direct = DIRECT_BLOCKS * FS_BLOCK;
        let indirect = size > direct;
        let data = self.allocate(size + if indirect { FS_BLOCK } else { 0 });
        let inode_block = self.group_start() + self.files_in_group / 64 * FS_BLOCK;
        self.files_in_group += 1;
        self.metadata(&mut order, inode_block, false);
        self.metadata(&mut order, self.dir_block, true);
        if indirect {
            self.dirty_range(data, data + direct);
            if self.soft_updates {
                self.dirty.push(IoReq { op: DiskOp::Write, offset: data + direct, len: FS_BLOCK, wait: false });
                self.dirty_bytes += FS_BLOCK;
            } else {
                order.push(self.sync_write(data + direct));
            }
            self.dirty_range(data + direct + FS_BLOCK, data + FS_BLOCK + size);
        } else {
            self.dirty_range(data, data + size);
        }
        if self.files_left == 0 {
            for block in [self.delayed_inode.take(), self.delayed_dir.take()].into_iter().flatten() {
                self.dirty.push(IoReq { op: DiskOp::Write, offset: block, len: FS_BLOCK, wait: false });
            }
        }
        if self.dirty_bytes >= self.writeback_batch || self.files_left == 0 {
            order.append(&mut self.dirty);
            self.dirty_bytes = 0;
        }
        order.push(self.sync_write(inode_block));
        let waits = order.iter().filter(|r| r.wait).count() as u64;
        self.think_per_write = self.cpu_per_file / waits;
        order.reverse();
        self.pending = order;
        self.next(rng, in_flight)
    }
    fn complete(&mut self, _req: &IoReq, _rng: &mut SimRng) {}
    fn finished(&self) -> bool {
        self.files_left == 0 && self.pending.is_empty()
    }
    fn think(&mut self) -> Nanos {
        self.think_per_write
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drive a stream alone, completing each request at once; the requests in issue order.
    fn drain(s: &mut dyn Stream, rng: &mut SimRng, max: usize) -> Vec<IoReq> {
        let mut issued = Vec::new();
        let mut in_flight: Vec<IoReq> = Vec::new();
        while issued.len() < max {
            while let Some(r) = s.next(rng, in_flight.len()) {
                issued.push(r);
                if r.wait {
                    in_flight.push(r);
                }
            }
            let Some(done) = in_flight.pop() else { break };
            s.complete(&done, rng);
        }
        issued
    }

    #[test]
    fn rewrite_reads_a_batch_then_writes_the_same_bytes_back() {
        let mut s = Rewrite::new(0, 1 << 20, 64 << 10, 128 << 10, 256 << 10, 2);
        let reqs = drain(&mut s, &mut SimRng::new(1), 1000);
        assert!(s.finished());
        let bytes = |op| reqs.iter().filter(|r| r.op == op).map(|r| r.len).sum::<u64>();
        assert_eq!(bytes(DiskOp::Read), 1 << 20);
        assert_eq!(bytes(DiskOp::Write), 1 << 20);
        // Read 256 KiB, write those 256 KiB, read the next 256 KiB...
        assert_eq!(reqs[0].op, DiskOp::Read);
        assert_eq!((reqs[4].op, reqs[4].offset), (DiskOp::Write, 0));
        assert_eq!((reqs[6].op, reqs[6].offset), (DiskOp::Read, 256 << 10));
    }

    #[test]
    fn a_seeker_rewrites_about_one_seek_in_ten_without_waiting() {
        let mut s = Seeker::new(1 << 20, 64 << 20, 8192, 5000, 10);
        let reqs = drain(&mut s, &mut SimRng::new(2), 100_000);
        let reads: Vec<&IoReq> = reqs.iter().filter(|r| r.op == DiskOp::Read).collect();
        let writes: Vec<&IoReq> = reqs.iter().filter(|r| r.op == DiskOp::Write).collect();
        assert_eq!(reads.len(), 5000);
        assert!((400..600).contains(&writes.len()), "{} rewrites", writes.len());
        assert!(writes.iter().all(|w| !w.wait));
        assert!(reads
            .iter()
            .all(|r| r.offset >= 1 << 20 && r.offset + 8192 <= (1 << 20) + (64 << 20) && r.offset % 8192 == 0));
    }

    #[test]
    fn a_seeker_with_update_every_0_never_writes() {
        let mut s = Seeker::new(0, 64 << 20, 8192, 2000, 0);
        let reqs = drain(&mut s, &mut SimRng::new(2), 100_000);
        assert_eq!(reqs.len(), 2000);
        assert!(reqs.iter().all(|r| r.op == DiskOp::Read && r.wait));
        assert!(s.finished());
    }

    #[test]
    fn rawio_transfers_are_sector_aligned_and_within_the_span() {
        let mut s = Rawio {
            op: DiskOp::Read,
            start: 4096,
            span: 1 << 20,
            sizes: Sizes::Uniform { min: 512, max: 32768 },
            ops_left: 2000,
        };
        let reqs = drain(&mut s, &mut SimRng::new(3), 10_000);
        assert_eq!(reqs.len(), 2000);
        for r in &reqs {
            assert!(r.offset % 512 == 0 && r.len % 512 == 0 && (512..=32768).contains(&r.len));
            assert!(r.offset >= 4096 && r.offset + r.len <= 4096 + (1 << 20));
        }
        let mean = reqs.iter().map(|r| r.len).sum::<u64>() as f64 / 2000.0;
        assert!((15_000.0..18_000.0).contains(&mean), "mean transfer {mean}");
    }

    #[test]
    fn sequential_rawio_runs_on_from_each_transfer_and_goes_round_at_the_end() {
        let sizes = Sizes::Uniform { min: 512, max: 32768 };
        let mut s = SequentialRawio::new(DiskOp::Write, 1 << 20, 256 << 10, sizes, 100);
        let reqs = drain(&mut s, &mut SimRng::new(5), 1000);
        assert_eq!(reqs.len(), 100);
        let mut wrapped = 0;
        for w in reqs.windows(2) {
            if w[1].offset == 1 << 20 {
                wrapped += 1;
            } else {
                assert_eq!(w[1].offset, w[0].offset + w[0].len, "{w:?}");
            }
        }
        assert!(wrapped >= 1, "100 transfers of 16 KiB on average go round a 256 KiB span");
        assert!(reqs.iter().all(|r| r.offset >= 1 << 20 && r.offset + r.len <= (1 << 20) + (256 << 10)));
    }

    #[test]
    fn small_files_write_metadata_synchronously_and_data_behind() {
        let mut s = SmallFiles::new(500, 20 << 10, 64 << 10, 25, 1 << 20, 8 << 20, 512 << 20, 3000);
        let reqs = drain(&mut s, &mut SimRng::new(4), 100_000);
        assert!(s.finished());
        let meta: Vec<&IoReq> = reqs.iter().filter(|r| r.wait).collect();
        // Three synchronous writes per file (inode, directory entry, inode again for the
        // times), one per directory, one per indirect block (files over 96 KiB: e^-4.8 of them).
        assert!((1500 + 20..1500 + 20 + 10).contains(&meta.len()), "{} synchronous writes", meta.len());
        // Consecutive files share their inode block: 500 files need about 8 of them.
        let mut blocks: Vec<u64> = meta.iter().map(|r| r.offset).collect();
        blocks.sort_unstable();
        blocks.dedup();
        assert!(blocks.len() <= 8 + 2 * 20 + 4 + 10, "{} distinct metadata blocks", blocks.len());
        assert!(reqs.iter().filter(|r| !r.wait).all(|r| r.len <= 64 << 10));
        let data: u64 = reqs.iter().filter(|r| !r.wait).map(|r| r.len).sum();
        let mean = data as f64 / 500.0;
        assert!((14_000.0..27_000.0).contains(&mean), "mean file {mean}");
        // The file's CPU is spread over its synchronous writes.
        assert!(s.think() == 1000 || s.think() == 750, "{}", s.think());
    }

    #[test]
    fn soft_updates_leave_one_synchronous_write_per_file() {
        let mut s = SmallFiles::new(500, 20 << 10, 64 << 10, 25, 1 << 20, 8 << 20, 512 << 20, 0).with_soft_updates();
        let reqs = drain(&mut s, &mut SimRng::new(4), 100_000);
        assert!(s.finished());
        assert_eq!(reqs.iter().filter(|r| r.wait).count(), 500, "the utimes inode write of each file");
        // Each inode block and directory block is written behind once.
        let behind = reqs.iter().filter(|r| !r.wait && r.len == 8192).count();
        assert!(behind >= 8 + 20, "{behind} delayed metadata and 8 KiB data writes");
    }

    #[test]
    fn a_file_past_its_direct_blocks_writes_its_indirect_block_synchronously() {
        // Files averaging 1 MiB: nearly all need an indirect block, after their 12th block.
        let mut s = SmallFiles::new(50, 1 << 20, 64 << 10, 1000, 1 << 20, 64 << 20, 1 << 30, 0);
        let reqs = drain(&mut s, &mut SimRng::new(7), 100_000);
        let meta: Vec<&IoReq> = reqs.iter().filter(|r| r.wait).collect();
        assert!(meta.len() > 3 * 50 + 1 + 40, "{} synchronous writes", meta.len());
        // No data is written where an indirect block lies.
        for m in &meta {
            assert!(reqs
                .iter()
                .filter(|r| !r.wait)
                .all(|d| d.offset + d.len <= m.offset || d.offset >= m.offset + 8192));
        }
    }
}
