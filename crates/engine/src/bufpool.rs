//! Large data buffers that stay mapped from one use to the next.
//!
//! A member read's buffer travels up to the client as a piece of its answer (see [`crate::IoBuf`])
//! and is dropped there, on another thread, once the answer is sent; a client's write data is
//! read off the socket by the front end and dropped by a member I/O thread once written. Freed to
//! the allocator, a large buffer goes back to the kernel (glibc trims a thread arena's top with
//! `MADV_DONTNEED`, or unmaps the block), and the next buffer of that size faults every page in
//! again, has it zeroed and charged to the cgroup. On tmpfs members that was over 40 % of the
//! samples of raid0 1 MiB sequential reads (`perf`: `exc_page_fault`, `clear_page_erms`,
//! `memcg1_commit_charge`, `zap_page_range` under `madvise`). So buffers of [`POOLED_FROM`] bytes
//! and more come from this pool, by power-of-two size class, and go back to it when the last piece
//! that holds them is dropped. What the pool keeps is bounded ([`POOL_LIMIT`]); beyond that a
//! returned buffer is freed as before. Pooled buffers start on a page boundary
//! ([`POOL_ALIGN`]), so the io_uring driver's `O_DIRECT` reads go straight into them instead of
//! through a bounce buffer and a copy.
//!
//! Written here rather than taken from a crate: it is one free list per size class behind a
//! mutex (member reads this large come at most some thousands a second), and the return path
//! has to be `bytes::Bytes::from_owner`, which general-purpose pools do not offer.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::io::{ErrorKind, Read};
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

/// Buffers shorter than this are allocated on their own: the allocator keeps small blocks mapped
/// itself, and a pool lock would cost more than it saves.
pub const POOLED_FROM: usize = 64 << 10;

/// Nor are buffers longer than this pooled (member reads and NBD writes stay far below it).
pub const POOLED_UP_TO: usize = 16 << 20;

/// The most bytes of free buffers the pool keeps, over all classes.
pub const POOL_LIMIT: usize = 32 << 20;

/// Where pooled buffers start: a page boundary, the most `O_DIRECT` asks of memory.
pub const POOL_ALIGN: usize = 4096;

/// A pooled buffer's memory: `cap` bytes from a page boundary, zeroed when first allocated, so
/// every byte of it is initialised from then on, whatever was read into it since.
struct Block {
    ptr: NonNull<u8>,
    cap: usize,
}

// SAFETY: a block owns its memory alone, as a `Box<[u8]>` does.
unsafe impl Send for Block {}
// SAFETY: shared access only reads, as through a `&[u8]`.
unsafe impl Sync for Block {}

impl Block {
    fn layout(cap: usize) -> Layout {
        Layout::from_size_align(cap, POOL_ALIGN).expect("a pooled size class is a valid layout")
    }

    fn new(cap: usize) -> Block {
        let layout = Block::layout(cap);
        // SAFETY: the layout has a non-zero size (at least POOLED_FROM).
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| handle_alloc_error(layout));
        Block { ptr, cap }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `cap` initialised bytes (zeroed at allocation) owned by this block.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cap) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `Block::new` with this very layout.
        unsafe { dealloc(self.ptr.as_ptr(), Block::layout(self.cap)) }
    }
}

/// Size classes: `POOLED_FROM << k` for k in `0..CLASSES`.
const CLASSES: usize = (POOLED_UP_TO / POOLED_FROM).trailing_zeros() as usize + 1;

/// Free buffers by size class. The process has one ([`PoolBuf::new`] takes from it); tests make
/// their own.
pub struct BufPool {
    free: [Mutex<Vec<Block>>; CLASSES],
    /// Capacity of the buffers in `free`.
    held: AtomicUsize,
    limit: usize,
}

static POOL: BufPool = BufPool::new(POOL_LIMIT);

fn class_of(len: usize) -> Option<usize> {
    (POOLED_FROM..=POOLED_UP_TO)
        .contains(&len)
        .then(|| (len.next_power_of_two() / POOLED_FROM).trailing_zeros() as usize)
}

impl BufPool {
    /// A pool keeping at most `limit` bytes of free buffers.
    pub const fn new(limit: usize) -> BufPool {
        BufPool { free: [const { Mutex::new(Vec::new()) }; CLASSES], held: AtomicUsize::new(0), limit }
    }

    /// Bytes of free buffers the pool holds now.
    pub fn pooled_bytes(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// A buffer with room for `len` bytes, empty: from this pool if `len` is pooled and a
    /// buffer of its class is free.
    pub fn take(&'static self, len: usize) -> PoolBuf {
        let Some(class) = class_of(len) else {
            return PoolBuf { own: Vec::with_capacity(len), block: None, len: 0, pool: self };
        };
        let reused = self.free[class].lock().unwrap_or_else(|e| e.into_inner()).pop();
        let block = match reused {
            Some(b) => {
                self.held.fetch_sub(b.cap, Ordering::Relaxed);
                b
            }
            None => Block::new(POOLED_FROM << class),
        };
        PoolBuf { own: Vec::new(), block: Some((block, class)), len: 0, pool: self }
    }

    fn give_back(&self, class: usize, block: Block) {
        let cap = block.cap;
        if self.held.fetch_add(cap, Ordering::Relaxed) + cap > self.limit {
            self.held.fetch_sub(cap, Ordering::Relaxed);
            return;
        }
        self.free[class].lock().unwrap_or_else(|e| e.into_inner()).push(block);
    }
}

/// One buffer: room for some bytes, filled by a read (its contents start uninitialised, except
/// through [`PoolBuf::zeroed`]), then handed on as `Bytes` with [`PoolBuf::into_bytes`]. A pooled
/// buffer returns to the pool when the last `Bytes` that holds it is dropped.
pub struct PoolBuf {
    /// The memory of a buffer too small or too large for the pool.
    own: Vec<u8>,
    /// A pooled block and its class (then `own` is unused).
    block: Option<(Block, usize)>,
    /// Bytes filled in `block`.
    len: usize,
    pool: &'static BufPool,
}

impl PoolBuf {
    /// A buffer with room for `len` bytes, empty, from the process's pool.
    pub fn new(len: usize) -> PoolBuf {
        POOL.take(len)
    }

    /// Where a read writes: the start of the buffer, with room for `capacity()` bytes.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        match &mut self.block {
            Some((b, _)) => b.ptr.as_ptr(),
            None => self.own.as_mut_ptr(),
        }
    }

    pub fn capacity(&self) -> usize {
        match &self.block {
            Some((b, _)) => b.cap,
            None => self.own.capacity(),
        }
    }

    pub fn len(&self) -> usize {
        match &self.block {
            Some(_) => self.len,
            None => self.own.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Take `len` bytes as read.
    ///
    /// # Safety
    /// The first `len` bytes of the buffer must have been written, and `len <= capacity()`.
    pub unsafe fn set_len(&mut self, len: usize) {
        debug_assert!(len <= self.capacity());
        match &self.block {
            Some(_) => self.len = len,
            // SAFETY: the caller wrote the first `len` bytes, within the capacity.
            None => unsafe { self.own.set_len(len) },
        }
    }

    /// The first `len` bytes of the buffer (at most `capacity()`), emptied, to read into without
    /// zeroing first; [`PoolBuf::set_len`] then takes what was filled.
    pub fn spare(&mut self, len: usize) -> &mut [MaybeUninit<u8>] {
        assert!(len <= self.capacity(), "{len} bytes asked of a buffer of {}", self.capacity());
        match &mut self.block {
            Some((b, _)) => {
                self.len = 0;
                // SAFETY: `len` bytes inside the block, which `&mut self` holds exclusively;
                // initialised bytes may be viewed as possibly uninitialised ones.
                unsafe { std::slice::from_raw_parts_mut(b.ptr.as_ptr().cast::<MaybeUninit<u8>>(), len) }
            }
            None => {
                self.own.clear();
                &mut self.own.spare_capacity_mut()[..len]
            }
        }
    }

    /// The first `len` bytes, zeroed, for a read that needs an initialised slice.
    pub fn zeroed(&mut self, len: usize) -> &mut [u8] {
        // A pooled block holds the bytes of its last use; a short buffer comes zeroed already.
        let pooled = self.block.is_some();
        let s = self.overwrite(len);
        if pooled {
            s.fill(0);
        }
        s
    }

    /// The first `len` bytes as they are (a pooled block's old contents: it was zeroed when
    /// first allocated), for a writer that overwrites every one of them, such as a block
    /// rebuilt from parity: zeroing first would be a pass over the bytes for nothing. Short
    /// buffers, from the allocator, are zeroed (cheaply, at that size).
    pub fn overwrite(&mut self, len: usize) -> &mut [u8] {
        match &mut self.block {
            Some((b, _)) => {
                self.len = len;
                &mut b.as_mut_slice()[..len]
            }
            None => {
                self.own.clear();
                self.own.resize(len, 0);
                &mut self.own
            }
        }
    }

    /// Append `data` (a read that went through a bounce buffer), within the capacity asked for.
    pub fn extend_from_slice(&mut self, data: &[u8]) {
        match &mut self.block {
            Some((b, _)) => {
                let end = self.len + data.len();
                b.as_mut_slice()[self.len..end].copy_from_slice(data);
                self.len = end;
            }
            None => self.own.extend_from_slice(data),
        }
    }

    /// Replace the contents with up to `len` bytes read from `r` (a request's payload off a
    /// socket), without zeroing first; returns how many came before the end of `r`.
    pub fn read_from<R: Read>(&mut self, r: &mut R, len: usize) -> std::io::Result<usize> {
        let Some((b, _)) = &mut self.block else {
            self.own.clear();
            return r.take(len as u64).read_to_end(&mut self.own);
        };
        let dst = &mut b.as_mut_slice()[..len];
        self.len = 0;
        while self.len < len {
            match r.read(&mut dst[self.len..]) {
                Ok(0) => break,
                Ok(n) => self.len += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.len)
    }

    /// The bytes read, as the engine takes them (a pooled buffer goes back when they are dropped).
    pub fn into_bytes(mut self) -> Bytes {
        if self.block.is_none() {
            return Bytes::from(std::mem::take(&mut self.own));
        }
        Bytes::from_owner(self)
    }
}

/// `data` copied into a buffer from the pool, as `Bytes` (a front end that only lends the data,
/// such as FUSE, hands it on this way).
pub fn bytes_from_slice(data: &[u8]) -> Bytes {
    let mut b = PoolBuf::new(data.len());
    b.extend_from_slice(data);
    b.into_bytes()
}

impl AsRef<[u8]> for PoolBuf {
    fn as_ref(&self) -> &[u8] {
        match &self.block {
            Some((b, _)) => &b.as_slice()[..self.len],
            None => &self.own,
        }
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        if let Some((block, class)) = self.block.take() {
            self.pool.give_back(class, block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(limit: usize) -> &'static BufPool {
        Box::leak(Box::new(BufPool::new(limit)))
    }

    #[test]
    fn an_overwritten_buffer_holds_what_was_written_however_it_was_used_before() {
        let p = pool(1 << 20);
        for len in [4096, POOLED_FROM, POOLED_FROM + 512] {
            let mut b = p.take(len);
            b.zeroed(len).fill(0xee);
            drop(b.into_bytes());
            // The same block again (for the pooled sizes), with its old bytes in it.
            let mut b = p.take(len);
            let s = b.overwrite(len);
            assert_eq!(s.len(), len);
            for (i, byte) in s.iter_mut().enumerate() {
                *byte = i as u8;
            }
            assert_eq!(b.len(), len);
            let bytes = b.into_bytes();
            assert!(bytes.iter().enumerate().all(|(i, &v)| v == i as u8), "{len} bytes");
        }
    }

    #[test]
    fn small_and_huge_reads_are_not_pooled() {
        assert_eq!(class_of(4096), None);
        assert_eq!(class_of(POOLED_FROM - 1), None);
        assert_eq!(class_of(POOLED_UP_TO + 1), None);
        assert_eq!(class_of(POOLED_FROM), Some(0));
        assert_eq!(class_of(POOLED_FROM + 1), Some(1));
        assert_eq!(class_of(POOLED_UP_TO), Some(CLASSES - 1));
        let p = pool(POOL_LIMIT);
        let mut b = p.take(4096);
        b.zeroed(4096).fill(7);
        let bytes = b.into_bytes();
        assert_eq!(&bytes[..], &[7u8; 4096][..]);
        drop(bytes);
        assert_eq!(p.pooled_bytes(), 0);
    }

    #[test]
    fn a_payload_is_read_into_a_pooled_buffer() {
        let p = pool(POOL_LIMIT);
        let payload: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut b = p.take(payload.len());
        assert_eq!(b.read_from(&mut &payload[..], payload.len()).unwrap(), payload.len());
        let bytes = b.into_bytes();
        assert_eq!(&bytes[..], &payload[..]);
        drop(bytes);
        assert_eq!(p.pooled_bytes(), 128 << 10, "back in its class");
        // A short stream says how much came.
        let mut b = p.take(payload.len());
        assert_eq!(b.read_from(&mut &payload[..10], payload.len()).unwrap(), 10);
        assert_eq!(b.len(), 10);
        assert_eq!(&bytes_from_slice(&payload[5..70_000])[..], &payload[5..70_000]);
    }

    #[test]
    fn a_dropped_answer_gives_its_buffer_back_for_the_next_read() {
        let p = pool(POOL_LIMIT);
        let len = 3 << 20;
        let mut b = p.take(len);
        assert!(b.capacity() >= len && b.capacity().is_power_of_two());
        let at = b.as_mut_ptr() as usize;
        assert_eq!(at % POOL_ALIGN, 0, "pooled buffers start on a page boundary");
        b.zeroed(len)[..3].copy_from_slice(b"abc");
        let bytes = b.into_bytes();
        assert_eq!(bytes.len(), len);
        assert_eq!(&bytes[..3], b"abc");
        let piece = bytes.slice(1..2);
        drop(bytes);
        // A piece still holds the buffer: the next read of that size gets another one.
        let mut other = p.take(len);
        assert_ne!(other.as_mut_ptr() as usize, at);
        assert_eq!(&piece[..], b"b");
        drop(piece);
        assert_eq!(p.pooled_bytes(), 4 << 20);
        let mut again = p.take(len);
        assert_eq!(again.as_mut_ptr() as usize, at, "the same memory, still mapped");
        assert!(again.is_empty());
        assert_eq!(p.pooled_bytes(), 0);
        drop(other);
        drop(again);
        assert_eq!(p.pooled_bytes(), 8 << 20);
    }

    #[test]
    fn the_pool_keeps_no_more_than_its_limit() {
        let p = pool(3 << 20);
        let bufs: Vec<PoolBuf> = (0..5).map(|_| p.take(1 << 20)).collect();
        drop(bufs);
        assert_eq!(p.pooled_bytes(), 3 << 20, "three kept, two freed");
        let a = p.take(1 << 20);
        assert_eq!(p.pooled_bytes(), 2 << 20);
        drop(a);
        assert_eq!(p.pooled_bytes(), 3 << 20);
    }
}
