//! x86-64 vector kernels: AVX2, AVX-512 and AVX-512 with GFNI.
//!
//! Every operation is written once, generic over [`Vector`] (what one register of a kernel can
//! do), and instantiated per kernel inside a `#[target_feature]` function so the intrinsics are
//! compiled for that instruction set. [`Ops`] collects a kernel's instantiations; `Kernel` picks
//! one after checking the CPU has the features.
//!
//! Memory traffic is what limits parity, so each operation makes a single pass: it walks the
//! blocks position by position, [`UNROLL`] vectors at a time, and at each position reads every
//! source block once and keeps P and Q in registers until they are stored. Recovery fuses the
//! syndrome of the surviving data with the solving step in the same pass.
//!
//! Bytes past the last whole vector are done one at a time with the scalar field tables, so any
//! length and any alignment gives exactly the scalar reference's bytes.

use std::ptr;

use crate::gf;

mod avx2;
mod avx512;
mod gfni;

/// Blocks of at least this many bytes get their outputs written with non-temporal stores.
///
/// A stripe of blocks this large overflows the per-core cache, so the parity written would be
/// evicted before anything reads it again; writing it around the cache saves reading every
/// output line in first (a third more memory traffic for P+Q of four data blocks). For small
/// blocks the output is better left in cache, where the I/O that follows finds it: streaming
/// measured about twice as slow for 64 KiB blocks in cache, and faster from 1 MiB blocks.
const STREAM_FROM: usize = 512 << 10;

/// Blocks from this size up to [`STREAM_FROM`] are streamed when their sources are not in the
/// core's caches (see [`sources_cold`]). Below it the probe's cost (tens of nanoseconds) is no
/// longer small against the operation's.
const PROBE_FROM: usize = 32 << 10;

/// Whether to write an operation's outputs with non-temporal stores.
#[inline(always)]
unsafe fn stream_outputs(len: usize, sources: &[*const u8]) -> bool {
    #[cfg(test)]
    if tests::FORCE_STREAM.with(|force| force.get()) {
        return true;
    }
    len >= STREAM_FROM || (len >= PROBE_FROM && sources_cold(sources))
}

/// Whether the first lines of (up to four of) `sources` had to come from beyond the core's own
/// caches, judged by the time their loads take against the time of loads known to hit.
///
/// Blocks of 64 KiB are the hard case for the store choice: in cache (data just received, the
/// engine's usual case) ordinary stores are twice as fast as streaming ones, because the I/O
/// that follows reads the output back from cache; from memory (a rebuild or scrub of direct
/// reads, where the output leaves by DMA) streaming stores save reading every output line in
/// first, a quarter of the traffic of P+Q over four blocks. Where the sources are is what tells
/// the two apart, and a few loads tell where they are. The loads are not wasted: the loop needs
/// those lines first. A wrong guess costs speed only, never bytes.
#[inline(always)]
unsafe fn sources_cold(sources: &[*const u8]) -> bool {
    let Some(hit) = hit_ticks() else {
        return false;
    };
    let mut first = [ptr::null::<u8>(); 4];
    let mut n = 0;
    for &source in sources {
        if !source.is_null() && n < first.len() {
            first[n] = source;
            n += 1;
        }
    }
    probe_ticks(&first[..n]) > COLD_FACTOR * hit
}

/// A probe that takes this many times the time of loads that hit the core's caches went to
/// memory (or a distant cache). Measured on a Xeon with AVX-512: about 110 ticks when the lines
/// are in L1/L2, 550-1050 from memory, 280-620 from its large shared L3 (either choice is close
/// there).
const COLD_FACTOR: u64 = 3;

/// Ticks of the time-stamp counter taken by loading one byte from each of `lines`, with the
/// counter reads fenced so the loads fall between them.
#[inline(always)]
unsafe fn probe_ticks(lines: &[*const u8]) -> u64 {
    use std::arch::x86_64::{_mm_lfence, _rdtsc};
    _mm_lfence();
    let start = _rdtsc();
    _mm_lfence();
    let mut sink = 0u8;
    for &line in lines {
        sink ^= ptr::read_volatile(line);
    }
    _mm_lfence();
    let end = _rdtsc();
    std::hint::black_box(sink);
    end.wrapping_sub(start)
}

/// What a probe of four lines takes when they are all in L1, measured once (the fastest of a
/// few tries); `None` where the counter is too slow to read for probing to pay (a hypervisor
/// that traps it), so that nothing is streamed below [`STREAM_FROM`].
fn hit_ticks() -> Option<u64> {
    use std::sync::atomic::{AtomicU64, Ordering};
    /// 0: not measured yet; u64::MAX: probing is off.
    static HIT: AtomicU64 = AtomicU64::new(0);
    /// A trapped counter read costs a microsecond or more, thousands of ticks.
    const TOO_SLOW: u64 = 2000;
    let hit = match HIT.load(Ordering::Relaxed) {
        0 => {
            let line = [0u8; 64];
            let lines = [line.as_ptr(); 4];
            // SAFETY: the pointers are to a live local array.
            let fastest = (0..32).map(|_| unsafe { probe_ticks(&lines) }).min().unwrap_or(0);
            let hit = if fastest == 0 || fastest > TOO_SLOW { u64::MAX } else { fastest };
            HIT.store(hit, Ordering::Relaxed);
            hit
        }
        hit => hit,
    };
    (hit != u64::MAX).then_some(hit)
}

/// Orders the non-temporal stores of an operation before anything the caller does next (they
/// are weakly ordered, so without this another thread handed the buffer might not see them).
#[inline(always)]
unsafe fn fence() {
    std::arch::x86_64::_mm_sfence()
}

/// Vectors processed per position: enough independent chains to hide the latency of the
/// doubling and multiplies while P, Q and a source still fit in the 16 AVX2 registers.
const UNROLL: usize = 4;

/// One register's worth of bytes and the GF(2^8) operations the kernels need on it.
///
/// # Safety
///
/// The methods use instructions the CPU may lack; they may only run inside a function compiled
/// with (and called after checking for) the implementing kernel's target features. They are
/// `#[inline(always)]` so that they are compiled into such a function.
pub(crate) trait Vector: Copy {
    const BYTES: usize;
    /// A constant prepared for [`Vector::mul`].
    type Multiplier: Copy;
    unsafe fn zero() -> Self;
    /// Unaligned load of `Self::BYTES` bytes.
    unsafe fn load(src: *const u8) -> Self;
    /// Unaligned store of `Self::BYTES` bytes.
    unsafe fn store(self, dst: *mut u8);
    /// A non-temporal store (bypassing the caches) if `dst` is aligned to `Self::BYTES`,
    /// else an ordinary one. Must be followed by [`fence`] before the operation returns.
    unsafe fn store_stream(self, dst: *mut u8);
    /// [`Vector::store_stream`] when `stream`, else [`Vector::store`].
    #[inline(always)]
    unsafe fn put(self, dst: *mut u8, stream: bool) {
        if stream {
            self.store_stream(dst)
        } else {
            self.store(dst)
        }
    }
    unsafe fn xor(self, other: Self) -> Self;
    /// Every byte times {02}.
    unsafe fn mul2(self) -> Self;
    /// Every byte times {02}, then XOR `add`: one step of Horner's rule.
    unsafe fn mul2_xor(self, add: Self) -> Self {
        self.mul2().xor(add)
    }
    unsafe fn multiplier(c: u8) -> Self::Multiplier;
    /// Every byte times the constant `m` was prepared for.
    unsafe fn mul(self, m: &Self::Multiplier) -> Self;
}

/// The nibble tables of "multiply by `c`": `low[i] = c * i` and `high[i] = c * (i << 4)`, so
/// `c * x = low[x & 15] ^ high[x >> 4]` (multiplication distributes over XOR). PSHUFB looks up
/// sixteen entries at once.
fn nibble_tables(c: u8) -> ([u8; 16], [u8; 16]) {
    let mut low = [0u8; 16];
    let mut high = [0u8; 16];
    for i in 0..16u8 {
        low[i as usize] = gf::mul(c, i);
        high[i as usize] = gf::mul(c, i << 4);
    }
    (low, high)
}

/// The GF2P8AFFINEQB matrix of "multiply by `c`" in md's field.
///
/// GFNI's own multiply (GF2P8MULB) reduces by the AES polynomial 0x11b, which is a different
/// field from md's 0x11d. Multiplying by a constant is linear over GF(2), though, so it is an 8x8
/// bit matrix, which the affine instruction applies to every byte: output bit `i` is the parity
/// of `x` AND the matrix byte `7 - i`. Bit `j` of that byte is therefore bit `i` of `c * 2^j`.
fn affine_matrix(c: u8) -> u64 {
    let mut matrix = 0u64;
    for i in 0..8 {
        let mut row = 0u8;
        for j in 0..8 {
            row |= ((gf::mul(c, 1 << j) >> i) & 1) << j;
        }
        matrix |= (row as u64) << (8 * (7 - i));
    }
    matrix
}

/// What an operation does at each position once P and Q of its sources are in registers.
trait Finish<V: Vector> {
    /// The output whose stores the vector loop aligns.
    fn output(&self) -> *const u8;
    /// `stream`: write with [`Vector::put`]'s non-temporal stores.
    unsafe fn vector(&self, at: usize, p: V, q: V, stream: bool);
    /// The same for the single byte at `at`, for the tail past the last whole vector.
    unsafe fn byte(&self, at: usize, p: u8, q: u8);
}

mod generic {
    use super::*;

    /// `dst` = XOR of `srcs` (at least one; `dst` may be one of them).
    #[inline(always)]
    pub(super) unsafe fn xor_gen<V: Vector>(dst: *mut u8, srcs: &[*const u8], len: usize) {
        let (&first, rest) = srcs.split_first().expect("xor_gen needs a source");
        let xor_bytes = |range: std::ops::Range<usize>| {
            for at in range {
                let mut byte = *first.add(at);
                for &src in rest {
                    byte ^= *src.add(at);
                }
                *dst.add(at) = byte;
            }
        };
        let stream = stream_outputs(len, srcs);
        let mut at = aligned_start::<V>(dst, len);
        xor_bytes(0..at);
        while at + UNROLL * V::BYTES <= len {
            xor_step::<V, UNROLL>(dst, first, rest, at, stream);
            at += UNROLL * V::BYTES;
        }
        while at + V::BYTES <= len {
            xor_step::<V, 1>(dst, first, rest, at, stream);
            at += V::BYTES;
        }
        xor_bytes(at..len);
        if stream {
            fence();
        }
    }

    /// Where the vector loop starts: the first position at which `output` is aligned to a
    /// vector (or `len`), the bytes before it being done one at a time. Stores that straddle
    /// cache lines are the costliest misalignment, and blocks in ordinary heap buffers are
    /// commonly only 16-byte aligned, so aligning the output costs at most one vector of bytes
    /// and saves a split store on every vector.
    #[inline(always)]
    pub(super) fn aligned_start<V: Vector>(output: *const u8, len: usize) -> usize {
        output.align_offset(V::BYTES).min(len)
    }

    #[inline(always)]
    unsafe fn xor_step<V: Vector, const N: usize>(
        dst: *mut u8,
        first: *const u8,
        rest: &[*const u8],
        at: usize,
        stream: bool,
    ) {
        let mut acc = [V::zero(); N];
        for (k, a) in acc.iter_mut().enumerate() {
            *a = V::load(first.add(at + k * V::BYTES));
        }
        for &src in rest {
            for (k, a) in acc.iter_mut().enumerate() {
                *a = a.xor(V::load(src.add(at + k * V::BYTES)));
            }
        }
        for (k, a) in acc.into_iter().enumerate() {
            a.put(dst.add(at + k * V::BYTES), stream);
        }
    }

    /// P and Q of `slots` (syndrome order, null for a hole; at least one slot) at every
    /// position, handed to `finish`.
    #[inline(always)]
    pub(super) unsafe fn syndrome<V: Vector, F: Finish<V>>(slots: &[*const u8], len: usize, finish: &F) {
        // Horner's rule from the highest slot down, as md does: each step doubles what has been
        // accumulated, so slot i ends up multiplied by {02} i times.
        let (&top, lower) = slots.split_last().expect("syndrome needs a slot");
        let bytes = |range: std::ops::Range<usize>| {
            for at in range {
                let mut p = if top.is_null() { 0 } else { *top.add(at) };
                let mut q = p;
                for &slot in lower.iter().rev() {
                    q = gf::mul2(q);
                    if !slot.is_null() {
                        let d = *slot.add(at);
                        p ^= d;
                        q ^= d;
                    }
                }
                finish.byte(at, p, q);
            }
        };
        let stream = stream_outputs(len, slots);
        let mut at = aligned_start::<V>(finish.output(), len);
        bytes(0..at);
        while at + UNROLL * V::BYTES <= len {
            syndrome_step::<V, F, UNROLL>(top, lower, at, finish, stream);
            at += UNROLL * V::BYTES;
        }
        while at + V::BYTES <= len {
            syndrome_step::<V, F, 1>(top, lower, at, finish, stream);
            at += V::BYTES;
        }
        bytes(at..len);
        if stream {
            fence();
        }
    }

    #[inline(always)]
    unsafe fn syndrome_step<V: Vector, F: Finish<V>, const N: usize>(
        top: *const u8,
        lower: &[*const u8],
        at: usize,
        finish: &F,
        stream: bool,
    ) {
        let mut p = [V::zero(); N];
        if !top.is_null() {
            for (k, p) in p.iter_mut().enumerate() {
                *p = V::load(top.add(at + k * V::BYTES));
            }
        }
        let mut q = p;
        for &slot in lower.iter().rev() {
            if slot.is_null() {
                for q in q.iter_mut() {
                    *q = q.mul2();
                }
            } else {
                for k in 0..N {
                    let d = V::load(slot.add(at + k * V::BYTES));
                    p[k] = p[k].xor(d);
                    q[k] = q[k].mul2_xor(d);
                }
            }
        }
        for k in 0..N {
            finish.vector(at + k * V::BYTES, p[k], q[k], stream);
        }
    }

    /// `p ^= old ^ new`, `q ^= c * (old ^ new)`.
    #[inline(always)]
    pub(super) unsafe fn update_pq<V: Vector>([p, q]: [*mut u8; 2], [old, new]: [*const u8; 2], len: usize, c: u8) {
        let times_c = V::multiplier(c);
        let row = gf::mul_row(c);
        let bytes = |range: std::ops::Range<usize>| {
            for at in range {
                let delta = *old.add(at) ^ *new.add(at);
                *p.add(at) ^= delta;
                *q.add(at) ^= row[delta as usize];
            }
        };
        let mut at = aligned_start::<V>(q, len);
        bytes(0..at);
        while at + V::BYTES <= len {
            let delta = V::load(old.add(at)).xor(V::load(new.add(at)));
            V::load(p.add(at)).xor(delta).store(p.add(at));
            V::load(q.add(at)).xor(delta.mul(&times_c)).store(q.add(at));
            at += V::BYTES;
        }
        bytes(at..len);
    }
}

/// Store P and Q (P may be null when only Q is wanted).
struct StorePq {
    p: *mut u8,
    q: *mut u8,
}

impl<V: Vector> Finish<V> for StorePq {
    fn output(&self) -> *const u8 {
        self.q
    }
    #[inline(always)]
    unsafe fn vector(&self, at: usize, p: V, q: V, stream: bool) {
        if !self.p.is_null() {
            p.put(self.p.add(at), stream);
        }
        q.put(self.q.add(at), stream);
    }
    #[inline(always)]
    unsafe fn byte(&self, at: usize, p: u8, q: u8) {
        if !self.p.is_null() {
            *self.p.add(at) = p;
        }
        *self.q.add(at) = q;
    }
}

/// Data slots x < y lost; the sources' P and Q are P_x,y and Q_x,y (see `raid6::two_data`):
/// D_x = a * (P + P_x,y) + b * (Q + Q_x,y), D_y = (P + P_x,y) + D_x.
struct TwoData<M> {
    p: *const u8,
    q: *const u8,
    dx: *mut u8,
    dy: *mut u8,
    a: M,
    b: M,
    a_row: &'static [u8; 256],
    b_row: &'static [u8; 256],
}

impl<V: Vector> Finish<V> for TwoData<V::Multiplier> {
    fn output(&self) -> *const u8 {
        self.dx
    }
    #[inline(always)]
    unsafe fn vector(&self, at: usize, p: V, q: V, stream: bool) {
        let p_xy = V::load(self.p.add(at)).xor(p);
        let q_xy = V::load(self.q.add(at)).xor(q);
        let x = p_xy.mul(&self.a).xor(q_xy.mul(&self.b));
        x.put(self.dx.add(at), stream);
        p_xy.xor(x).put(self.dy.add(at), stream);
    }
    #[inline(always)]
    unsafe fn byte(&self, at: usize, p: u8, q: u8) {
        let p_xy = *self.p.add(at) ^ p;
        let q_xy = *self.q.add(at) ^ q;
        let x = self.a_row[p_xy as usize] ^ self.b_row[q_xy as usize];
        *self.dx.add(at) = x;
        *self.dy.add(at) = p_xy ^ x;
    }
}

/// Data slot x and P lost: D_x = c * (Q + Q_x) with c = g^-x, then P = P_x + D_x.
struct DataAndP<M> {
    q: *const u8,
    dx: *mut u8,
    p_out: *mut u8,
    c: M,
    c_row: &'static [u8; 256],
}

impl<V: Vector> Finish<V> for DataAndP<V::Multiplier> {
    fn output(&self) -> *const u8 {
        self.dx
    }
    #[inline(always)]
    unsafe fn vector(&self, at: usize, p: V, q: V, stream: bool) {
        let x = V::load(self.q.add(at)).xor(q).mul(&self.c);
        x.put(self.dx.add(at), stream);
        p.xor(x).put(self.p_out.add(at), stream);
    }
    #[inline(always)]
    unsafe fn byte(&self, at: usize, p: u8, q: u8) {
        let x = self.c_row[(*self.q.add(at) ^ q) as usize];
        *self.dx.add(at) = x;
        *self.p_out.add(at) = p ^ x;
    }
}

/// Data slot x and Q lost: D_x = P + P_x, then Q = Q_x + c * D_x with c = g^x.
struct DataAndQ<M> {
    p: *const u8,
    dx: *mut u8,
    q_out: *mut u8,
    c: M,
    c_row: &'static [u8; 256],
}

impl<V: Vector> Finish<V> for DataAndQ<V::Multiplier> {
    fn output(&self) -> *const u8 {
        self.dx
    }
    #[inline(always)]
    unsafe fn vector(&self, at: usize, p: V, q: V, stream: bool) {
        let x = V::load(self.p.add(at)).xor(p);
        x.put(self.dx.add(at), stream);
        q.xor(x.mul(&self.c)).put(self.q_out.add(at), stream);
    }
    #[inline(always)]
    unsafe fn byte(&self, at: usize, p: u8, q: u8) {
        let x = *self.p.add(at) ^ p;
        *self.dx.add(at) = x;
        *self.q_out.add(at) = q ^ self.c_row[x as usize];
    }
}

/// Two blocks read by an operation.
type Inputs = [*const u8; 2];
/// Two blocks written by an operation.
type Outputs = [*mut u8; 2];

/// A kernel's operations on raw blocks of `len` bytes. Sources are read-only; `slots` lists data
/// blocks in syndrome order with null for a hole or lost block and must not be empty.
///
/// # Safety (all of them)
///
/// The CPU must have the kernel's features, every non-null pointer must be valid for `len`
/// bytes, and outputs must not overlap each other or any source (except `xor_gen`'s `dst`,
/// which may be exactly a source).
pub(crate) struct Ops {
    /// `dst` = XOR of `srcs` (at least one).
    xor_gen: unsafe fn(dst: *mut u8, srcs: &[*const u8], len: usize),
    /// `[p, q]` = syndromes of `slots`; `p` may be null.
    gen_pq: unsafe fn(slots: &[*const u8], len: usize, pq: [*mut u8; 2]),
    /// `[dx, dy]` from surviving `[p, q]`, with the coefficients `[a, b]` of [`TwoData`].
    two_data: unsafe fn(&[*const u8], usize, Inputs, Outputs, [u8; 2]),
    /// `[dx, p]` from surviving `q`, with `c` = g^-x.
    data_and_p: unsafe fn(&[*const u8], usize, *const u8, [*mut u8; 2], u8),
    /// `[dx, q]` from surviving `p`, with `c` = g^x.
    data_and_q: unsafe fn(&[*const u8], usize, *const u8, [*mut u8; 2], u8),
    /// `[p, q]` updated for `[old, new]` with `c` = g^slot.
    update_pq: unsafe fn([*mut u8; 2], [*const u8; 2], usize, u8),
}

/// Instantiates every operation for one vector type inside functions compiled for `$features`.
macro_rules! kernel_ops {
    ($name:ident, $vector:ty, $features:literal) => {
        pub(crate) mod $name {
            use super::*;
            type V = $vector;

            #[target_feature(enable = $features)]
            unsafe fn xor_gen(dst: *mut u8, srcs: &[*const u8], len: usize) {
                generic::xor_gen::<V>(dst, srcs, len)
            }

            #[target_feature(enable = $features)]
            unsafe fn gen_pq(slots: &[*const u8], len: usize, [p, q]: [*mut u8; 2]) {
                generic::syndrome::<V, _>(slots, len, &StorePq { p, q })
            }

            #[target_feature(enable = $features)]
            unsafe fn two_data(
                slots: &[*const u8],
                len: usize,
                [p, q]: [*const u8; 2],
                [dx, dy]: [*mut u8; 2],
                [a, b]: [u8; 2],
            ) {
                let finish = TwoData {
                    p,
                    q,
                    dx,
                    dy,
                    a: V::multiplier(a),
                    b: V::multiplier(b),
                    a_row: gf::mul_row(a),
                    b_row: gf::mul_row(b),
                };
                generic::syndrome::<V, _>(slots, len, &finish)
            }

            #[target_feature(enable = $features)]
            unsafe fn data_and_p(slots: &[*const u8], len: usize, q: *const u8, [dx, p_out]: [*mut u8; 2], c: u8) {
                let finish = DataAndP { q, dx, p_out, c: V::multiplier(c), c_row: gf::mul_row(c) };
                generic::syndrome::<V, _>(slots, len, &finish)
            }

            #[target_feature(enable = $features)]
            unsafe fn data_and_q(slots: &[*const u8], len: usize, p: *const u8, [dx, q_out]: [*mut u8; 2], c: u8) {
                let finish = DataAndQ { p, dx, q_out, c: V::multiplier(c), c_row: gf::mul_row(c) };
                generic::syndrome::<V, _>(slots, len, &finish)
            }

            #[target_feature(enable = $features)]
            unsafe fn update_pq(pq: [*mut u8; 2], old_new: [*const u8; 2], len: usize, c: u8) {
                generic::update_pq::<V>(pq, old_new, len, c)
            }

            pub(crate) static OPS: Ops = Ops { xor_gen, gen_pq, two_data, data_and_p, data_and_q, update_pq };

            /// `dst[i] = c * src[i]`, for testing the multiplier alone.
            #[cfg(test)]
            #[target_feature(enable = $features)]
            pub(crate) unsafe fn mul_vector(dst: &mut [u8], src: &[u8], c: u8) {
                let m = V::multiplier(c);
                V::load(src.as_ptr()).mul(&m).store(dst.as_mut_ptr());
                V::load(src.as_ptr()).mul2().store(dst[<V as Vector>::BYTES..].as_mut_ptr());
            }
        }
    };
}

kernel_ops!(avx2_ops, avx2::Avx2, "avx2");
kernel_ops!(avx512_ops, avx512::Avx512, "avx512f,avx512bw");
kernel_ops!(gfni_ops, gfni::Gfni, "avx512f,avx512bw,gfni");

/// Pointers to a call's source blocks, on the stack for the usual handful of members.
struct Pointers {
    inline: [*const u8; Pointers::INLINE],
    len: usize,
    spilled: Vec<*const u8>,
}

impl Pointers {
    /// Covers all but the widest arrays without allocating; wider ones move the list to the
    /// heap.
    const INLINE: usize = 64;

    fn new() -> Self {
        Pointers { inline: [ptr::null(); Pointers::INLINE], len: 0, spilled: Vec::new() }
    }

    fn push(&mut self, pointer: *const u8) {
        if self.spilled.is_empty() && self.len < Pointers::INLINE {
            self.inline[self.len] = pointer;
            self.len += 1;
        } else {
            if self.spilled.is_empty() {
                self.spilled.extend_from_slice(&self.inline[..self.len]);
            }
            self.spilled.push(pointer);
        }
    }

    fn as_slice(&self) -> &[*const u8] {
        if self.spilled.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spilled
        }
    }
}

impl FromIterator<*const u8> for Pointers {
    fn from_iter<I: IntoIterator<Item = *const u8>>(iter: I) -> Self {
        let mut pointers = Pointers::new();
        for pointer in iter {
            pointers.push(pointer);
        }
        pointers
    }
}

/// The operations of a vector kernel, or `None` for the scalar one.
///
/// Panics if the CPU lacks the kernel's features: running it would be undefined behaviour.
pub(crate) fn ops(kernel: crate::Kernel) -> Option<&'static Ops> {
    use crate::Kernel;
    if kernel == Kernel::Scalar {
        return None;
    }
    assert!(kernel.available(), "parity kernel {kernel} needs CPU features this machine lacks");
    Some(match kernel {
        Kernel::Scalar => unreachable!(),
        Kernel::Avx2 => &avx2_ops::OPS,
        Kernel::Avx512 => &avx512_ops::OPS,
        Kernel::Gfni => &gfni_ops::OPS,
    })
}

// The safe entry points. Each checks its arguments exactly as the scalar reference does, then
// hands raw pointers to the kernel. SAFETY (every `unsafe` block below): `ops` came from `ops()`,
// which checked the CPU; pointers come from slices whose lengths were all checked equal to
// `len`; outputs are `&mut` blocks, so they overlap nothing else (xor_into's `dst` is passed as
// its own first source, which `xor_gen` allows).

pub(crate) fn xor_into(ops: &Ops, dst: &mut [u8], src: &[u8]) {
    crate::raid5::check_xor_into(dst, src);
    let len = dst.len();
    let dst = dst.as_mut_ptr();
    let srcs = [dst as *const u8, src.as_ptr()];
    unsafe { (ops.xor_gen)(dst, &srcs, len) }
}

pub(crate) fn gen_p(ops: &Ops, p: &mut [u8], data: &[&[u8]]) {
    crate::raid5::check_gen_p(p, data);
    if data.is_empty() {
        p.fill(0);
        return;
    }
    let srcs: Pointers = data.iter().map(|d| d.as_ptr()).collect();
    let len = p.len();
    unsafe { (ops.xor_gen)(p.as_mut_ptr(), srcs.as_slice(), len) }
}

pub(crate) fn gen_pq(ops: &Ops, p: &mut [u8], q: &mut [u8], data: &[&[u8]]) {
    crate::raid6::check_gen_pq(p, q, data);
    if data.is_empty() {
        p.fill(0);
        q.fill(0);
        return;
    }
    let slots: Pointers = data.iter().map(|d| d.as_ptr()).collect();
    let len = p.len();
    unsafe { (ops.gen_pq)(slots.as_slice(), len, [p.as_mut_ptr(), q.as_mut_ptr()]) }
}

pub(crate) fn update_pq(ops: &Ops, p: &mut [u8], q: Option<&mut [u8]>, slot: usize, old: &[u8], new: &[u8]) {
    crate::raid6::check_update_pq(p, q.as_deref(), old, new);
    let len = p.len();
    match q {
        None => {
            let p_ptr = p.as_mut_ptr();
            let srcs = [p_ptr as *const u8, old.as_ptr(), new.as_ptr()];
            unsafe { (ops.xor_gen)(p_ptr, &srcs, len) }
        }
        Some(q) => unsafe {
            (ops.update_pq)([p.as_mut_ptr(), q.as_mut_ptr()], [old.as_ptr(), new.as_ptr()], len, gf::exp(slot))
        },
    }
}

pub(crate) fn raid5_recover(ops: &Ops, blocks: &mut [&mut [u8]], missing: usize) {
    crate::raid5::check_raid5_recover(blocks, missing);
    let len = blocks[0].len();
    let srcs: Pointers = blocks.iter().enumerate().filter(|&(i, _)| i != missing).map(|(_, b)| b.as_ptr()).collect();
    unsafe { (ops.xor_gen)(blocks[missing].as_mut_ptr(), srcs.as_slice(), len) }
}

pub(crate) fn raid6_recover(ops: &Ops, blocks: &mut [&mut [u8]], missing: &[usize]) {
    let (first, second) = crate::raid6::recover_targets(blocks, missing);
    let len = blocks[0].len();
    let data_count = blocks.len() - 2;
    let (p_index, q_index) = (data_count, data_count + 1);
    let lost = |i: usize| i == first || Some(i) == second;

    // Every pointer is taken from the `&mut` blocks once, so reads of survivors and writes of the
    // lost blocks below are all through these and never through a later reborrow.
    let all: Vec<*mut u8> = blocks.iter_mut().map(|b| b.as_mut_ptr()).collect();
    let survivor = |i: usize| all[i] as *const u8;
    // Data in syndrome order with the lost slots as holes.
    let slots: Pointers = (0..data_count).map(|i| if lost(i) { ptr::null() } else { survivor(i) }).collect();
    let slots = slots.as_slice();

    unsafe {
        match second {
            None if first < data_count => {
                let srcs: Pointers = (0..=p_index).filter(|&i| i != first).map(survivor).collect();
                (ops.xor_gen)(all[first], srcs.as_slice(), len)
            }
            None if first == p_index => {
                let srcs: Pointers = (0..data_count).map(survivor).collect();
                (ops.xor_gen)(all[p_index], srcs.as_slice(), len)
            }
            None => (ops.gen_pq)(slots, len, [ptr::null_mut(), all[q_index]]),
            Some(second) if second < data_count => {
                let (x, y) = (first, second);
                // See raid6::two_data for the derivation.
                let gap_power = gf::exp(y - x);
                assert!(
                    gap_power != 1,
                    "raid6_recover: data slots {x} and {y} have the same generator power and \
                     cannot be told apart"
                );
                let denominator_inverse = gf::inv(gap_power ^ 1);
                let a = gf::mul(gap_power, denominator_inverse);
                let b = gf::mul(gf::inv(gf::exp(x)), denominator_inverse);
                (ops.two_data)(slots, len, [survivor(p_index), survivor(q_index)], [all[x], all[y]], [a, b])
            }
            Some(second) if first < data_count && second == p_index => {
                (ops.data_and_p)(slots, len, survivor(q_index), [all[first], all[p_index]], gf::inv(gf::exp(first)))
            }
            Some(_) if first < data_count => {
                (ops.data_and_q)(slots, len, survivor(p_index), [all[first], all[q_index]], gf::exp(first))
            }
            Some(_) => (ops.gen_pq)(slots, len, [all[p_index], all[q_index]]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kernel;
    use std::cell::Cell;

    thread_local! {
        /// Makes every operation on this thread write with non-temporal stores, so that the
        /// path cold sources take below [`STREAM_FROM`] can be checked without depending on
        /// where the test's buffers happen to be.
        pub(super) static FORCE_STREAM: Cell<bool> = const { Cell::new(false) };
    }

    /// Blocks below [`STREAM_FROM`] whose sources are cold get non-temporal stores; those bytes
    /// must be the scalar reference's, at every alignment of the outputs.
    #[test]
    fn streamed_small_blocks_match_scalar() {
        FORCE_STREAM.with(|force| force.set(true));
        let n = 5;
        for (len, skew) in [(64 << 10, 0), ((64 << 10) + 77, 3), (PROBE_FROM + 1, 17)] {
            let data: Vec<Vec<u8>> = (0..n).map(|i| uraid_testkit::noise(i as u64 + 1, len + skew)).collect();
            let data: Vec<&[u8]> = data.iter().map(|d| &d[skew..]).collect();
            let mut want_p = vec![0u8; len];
            let mut want_q = vec![0u8; len];
            Kernel::Scalar.gen_pq(&mut want_p, &mut want_q, &data);
            for kernel in Kernel::available_kernels() {
                if kernel == Kernel::Scalar {
                    continue;
                }
                let mut p = vec![0u8; len + skew];
                let mut q = vec![0u8; len + skew];
                kernel.gen_pq(&mut p[skew..], &mut q[skew..], &data);
                assert!(p[skew..] == want_p && q[skew..] == want_q, "{kernel}: gen_pq, {len}");
                p.fill(0);
                kernel.gen_p(&mut p[skew..], &data);
                assert!(p[skew..] == want_p, "{kernel}: gen_p, {len}");
                let mut stripe: Vec<Vec<u8>> = data.iter().map(|d| d.to_vec()).collect();
                stripe.push(want_p.clone());
                stripe.push(want_q.clone());
                for missing in [vec![1], vec![0, 3], vec![2, n], vec![4, n + 1]] {
                    let mut work = stripe.clone();
                    for &m in &missing {
                        work[m].fill(0x5a);
                    }
                    let mut blocks: Vec<&mut [u8]> = work.iter_mut().map(|b| &mut b[..]).collect();
                    kernel.raid6_recover(&mut blocks, &missing);
                    assert!(work == stripe, "{kernel}: losing {missing:?}, {len}");
                }
            }
        }
        FORCE_STREAM.with(|force| force.set(false));
    }

    /// The store choice by size alone, where no probe is made.
    #[test]
    fn streaming_by_size() {
        let line = [7u8; 64];
        let sources = [line.as_ptr(); 2];
        // SAFETY: the sources point at a live array.
        unsafe {
            assert!(stream_outputs(STREAM_FROM, &sources));
            assert!(!stream_outputs(PROBE_FROM - 1, &sources));
        }
    }

    /// GF2P8AFFINEQB on one byte, as Intel documents it.
    fn affine_byte(matrix: u64, x: u8) -> u8 {
        let mut out = 0u8;
        for i in 0..8 {
            let row = (matrix >> (8 * (7 - i))) as u8;
            out |= (((row & x).count_ones() & 1) as u8) << i;
        }
        out
    }

    #[test]
    fn affine_matrix_multiplies_in_mds_field() {
        for c in 0..=255u8 {
            let matrix = affine_matrix(c);
            for x in 0..=255u8 {
                assert_eq!(affine_byte(matrix, x), gf::mul(c, x), "{c:#04x} * {x:#04x}");
            }
        }
    }

    #[test]
    fn gfni_doubling_matrix_is_the_matrix_of_two() {
        assert_eq!(gfni::TIMES_2, affine_matrix(2));
    }

    #[test]
    fn nibble_tables_multiply() {
        for c in 0..=255u8 {
            let (low, high) = nibble_tables(c);
            for x in 0..=255u8 {
                assert_eq!(low[(x & 15) as usize] ^ high[(x >> 4) as usize], gf::mul(c, x));
            }
        }
    }

    /// Every kernel's vector multiply and doubling, for every constant and every byte.
    #[test]
    fn vector_multiplies_match_tables() {
        type MulVector = unsafe fn(&mut [u8], &[u8], u8);
        let kernels: [(Kernel, MulVector, usize); 3] = [
            (Kernel::Avx2, avx2_ops::mul_vector, 32),
            (Kernel::Avx512, avx512_ops::mul_vector, 64),
            (Kernel::Gfni, gfni_ops::mul_vector, 64),
        ];
        for (kernel, mul_vector, width) in kernels {
            if !kernel.available() {
                continue;
            }
            for c in 0..=255u8 {
                for start in (0..256).step_by(width) {
                    let src: Vec<u8> = (start..start + width).map(|x| x as u8).collect();
                    let mut dst = vec![0u8; 2 * width];
                    // SAFETY: the kernel is available; both slices hold at least a vector.
                    unsafe { mul_vector(&mut dst, &src, c) };
                    for (i, &x) in src.iter().enumerate() {
                        assert_eq!(dst[i], gf::mul(c, x), "{kernel}: {c:#04x} * {x:#04x}");
                        assert_eq!(dst[width + i], gf::mul2(x), "{kernel}: 2 * {x:#04x}");
                    }
                }
            }
        }
    }
}
