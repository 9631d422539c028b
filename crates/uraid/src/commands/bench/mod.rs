//! `uraid bench`: measure uraid's own parity kernels, this machine's single-core memory read
//! bandwidth, and the engine driving an array in-process, so they can be compared with other
//! implementations (ISA-L, fio) run on the same machine.
//!
//! Every figure is the median of several timed runs (min and max are printed too); nothing here
//! asserts a speed. A kernel's output is checked against the scalar reference before and after
//! it is timed: a kernel that computes the wrong bytes is an error, never a number.

pub mod engine;
pub mod membw;
pub mod parity;

use std::alloc::{alloc, dealloc, Layout};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::{err, CliResult};
use crate::size::parse_size;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(Subcommand)]
pub enum BenchWhat {
    /// Time the parity kernels (XOR, P+Q, one- and two-member recovery); GB/s counts the data
    /// members' bytes (10^9 bytes per GB). Also measures single-core memory read bandwidth.
    Parity(ParityArgs),
    /// Time single-core memory read bandwidth (a summing read of a buffer larger than any cache).
    Membw(MembwArgs),
    /// Drive an existing array in-process at a queue depth, as fio drives a block device, and
    /// report MB/s, IOPS and CPU seconds per GiB moved (no network or FUSE front end).
    Engine(engine::EngineBenchArgs),
}

#[derive(Args)]
pub struct ParityArgs {
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Operations, comma-separated: xor (P of k data), pq (P and Q of k data), recover1 (one
    /// data member from P and the rest), recover2 (two data members from P, Q and the rest).
    #[arg(long, value_name = "OPS", default_value = "xor,pq,recover1,recover2")]
    pub op: String,
    /// Kernels, comma-separated (scalar, avx2, avx512, gfni), `best`, or `all` (every kernel
    /// this CPU runs).
    #[arg(long, value_name = "NAMES", default_value = "all")]
    pub kernel: String,
    /// Layouts as DATA+PARITY, comma-separated (4+1, 8+2, ...); xor and recover1 run the +1
    /// layouts, pq and recover2 the +2 ones. A bare number (4) is that many data members for
    /// every operation. Default: 4+1,8+1 for xor and recover1, 4+2,8+2 for pq and recover2.
    #[arg(long, value_name = "LAYOUTS")]
    pub layout: Option<String>,
    /// Chunk sizes (bytes per member per stripe), comma-separated; a bare number is KiB as in
    /// mdadm. Multiples of 4K.
    #[arg(long, value_name = "SIZES", default_value = "64K,1M")]
    pub chunk: String,
    /// Working sets, comma-separated: `hot` (one stripe reused, cache-resident) or a size (a
    /// pool of stripes, data and parity, of at least that many bytes, cycled through so every
    /// call reads memory; a bare number is bytes).
    #[arg(long, value_name = "SETS", default_value = "hot,512M")]
    pub working_set: String,
    /// Timed runs per measurement; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seconds per timed run.
    #[arg(long, default_value_t = 0.3)]
    pub seconds: f64,
    /// Skip the memory read bandwidth line.
    #[arg(long)]
    pub no_membw: bool,
}

#[derive(Args)]
pub struct MembwArgs {
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Buffer size (a bare number is bytes); it should be much larger than the last-level cache.
    #[arg(long, default_value = "1G")]
    pub bytes: String,
    /// Timed runs; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seconds per timed run (at least one full pass over the buffer is made).
    #[arg(long, default_value_t = 0.3)]
    pub seconds: f64,
}

pub fn run(args: &BenchArgs) -> CliResult {
    match &args.what {
        BenchWhat::Parity(a) => parity::run(a),
        BenchWhat::Membw(a) => membw::run(a),
        BenchWhat::Engine(a) => engine::run(a),
    }
}

/// Check the options every benchmark shares.
fn check_runs(runs: usize, seconds: f64) -> CliResult {
    if runs == 0 {
        return err("--runs must be at least 1");
    }
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 3600.0) {
        return err(format!("--seconds={seconds}: give a positive number of seconds (at most 3600)"));
    }
    Ok(())
}

/// A size option's value; a bare number is in units of `bare_unit` bytes.
fn size_arg(option: &str, text: &str, bare_unit: u64) -> CliResult<u64> {
    parse_size(text, bare_unit).map_err(|e| super::CliError(format!("--{option}: {e}")))
}

/// The items of a comma-separated option, refusing an empty one.
fn list_arg<'a>(option: &str, text: &'a str) -> CliResult<Vec<&'a str>> {
    let items: Vec<&str> = text.split(',').map(str::trim).collect();
    if items.iter().any(|s| s.is_empty()) {
        return err(format!("--{option}={text}: empty item in the list"));
    }
    Ok(items)
}

/// One measured figure: the GB/s of every run.
pub struct Row {
    pub op: &'static str,
    pub data_members: usize,
    pub parity_members: usize,
    pub chunk_bytes: u64,
    pub kernel: String,
    pub working_set_bytes: u64,
    /// Whether the working set is one stripe reused (printed as "hot").
    pub hot: bool,
    pub runs: Vec<f64>,
}

impl Row {
    pub fn median(&self) -> f64 {
        median(&self.runs)
    }

    fn min(&self) -> f64 {
        self.runs.iter().copied().fold(f64::INFINITY, f64::min)
    }

    fn max(&self) -> f64 {
        self.runs.iter().copied().fold(0.0, f64::max)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "op": self.op,
            "data_members": self.data_members,
            "parity_members": self.parity_members,
            "chunk_bytes": self.chunk_bytes,
            "kernel": self.kernel,
            "working_set_bytes": self.working_set_bytes,
            "gbps": round3(self.median()),
            "gbps_min": round3(self.min()),
            "gbps_max": round3(self.max()),
            "runs": self.runs.iter().map(|&g| round3(g)).collect::<Vec<f64>>(),
        })
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Prints rows as they are measured: JSON lines, or an aligned table under one header.
pub struct Printer {
    json: bool,
    header_done: bool,
}

impl Printer {
    pub fn new(json: bool) -> Printer {
        Printer { json, header_done: false }
    }

    pub fn print(&mut self, row: &Row) {
        use std::io::Write;
        if self.json {
            println!("{}", row.to_json());
        } else {
            if !self.header_done {
                println!(
                    "{:<9} {:>6} {:>6} {:>12} {:<7} {:>8} {:>8} {:>8} {:>4}",
                    "op", "layout", "chunk", "working set", "kernel", "GB/s", "min", "max", "runs"
                );
                self.header_done = true;
            }
            let layout =
                if row.op == "read" { "-".to_string() } else { format!("{}+{}", row.data_members, row.parity_members) };
            let chunk = if row.op == "read" { "-".to_string() } else { short_size(row.chunk_bytes) };
            let set = if row.hot {
                format!("hot {}", short_size(row.working_set_bytes))
            } else {
                short_size(row.working_set_bytes)
            };
            println!(
                "{:<9} {:>6} {:>6} {:>12} {:<7} {:>8.2} {:>8.2} {:>8.2} {:>4}",
                row.op,
                layout,
                chunk,
                set,
                row.kernel,
                row.median(),
                row.min(),
                row.max(),
                row.runs.len()
            );
        }
        let _ = std::io::stdout().flush();
    }
}

/// A byte count in the largest binary unit that divides it (1G, 520M, 64K); from 1 MiB up,
/// else in MiB with one decimal (512.2M).
pub fn short_size(bytes: u64) -> String {
    for (unit, suffix) in [(1u64 << 30, "G"), (1 << 20, "M")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    if bytes >= 1 << 20 {
        format!("{:.1}M", bytes as f64 / (1u64 << 20) as f64)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{}K", bytes >> 10)
    } else {
        format!("{bytes}B")
    }
}

pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Time `call(i)` for i = 0, 1, 2, ... (the caller maps i onto its stripes): a warm-up of a
/// quarter of `seconds`, then `runs` runs of at least `seconds` each. Returns each run's
/// GB/s, counting `bytes_per_call` per call. The call count carries on across runs so a pool
/// larger than the caches keeps streaming.
pub fn time_calls(runs: usize, seconds: f64, bytes_per_call: u64, mut call: impl FnMut(usize)) -> Vec<f64> {
    let mut i = 0usize;
    let warm = Duration::from_secs_f64(seconds / 4.0);
    let start = Instant::now();
    while start.elapsed() < warm {
        call(i);
        i += 1;
    }
    let span = Duration::from_secs_f64(seconds);
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            let mut calls = 0u64;
            let elapsed = loop {
                call(i);
                i += 1;
                calls += 1;
                let e = start.elapsed();
                if e >= span {
                    break e;
                }
            };
            (calls * bytes_per_call) as f64 / elapsed.as_secs_f64() / 1e9
        })
        .collect()
}

/// A zero-initialised heap buffer aligned to 4 KiB (page-aligned, as member buffers are, and
/// as SIMD kernels like).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

const ALIGN: usize = 4096;

impl AlignedBuf {
    /// `len` bytes, a multiple of 8. Panics (as Vec does) if the allocation fails.
    pub fn new(len: usize) -> AlignedBuf {
        assert!(len > 0 && len.is_multiple_of(8), "AlignedBuf length {len} must be a positive multiple of 8");
        let layout = Layout::from_size_align(len, ALIGN).expect("buffer layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let mut b = AlignedBuf { ptr, len };
        b.words_mut().fill(0);
        b
    }

    /// The buffer as 64-bit words (it is 4 KiB-aligned and a multiple of 8 bytes long).
    pub fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: ptr is valid for len bytes, aligned for u64, len.is_multiple_of(8), and the borrow of
        // self keeps the memory exclusive and alive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u64, self.len / 8) }
    }

    pub fn words(&self) -> &[u64] {
        // SAFETY: as in words_mut, shared.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u64, self.len / 8) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and exclusively borrowed through self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Fill with pseudo-random words (xorshift64*), writing every page.
    pub fn fill_random(&mut self, seed: u64) {
        let mut x = seed | 1;
        for w in self.words_mut() {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            *w = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in new with this very layout.
        unsafe { dealloc(self.ptr, Layout::from_size_align(self.len, ALIGN).expect("buffer layout")) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[5.0]), 5.0);
    }

    #[test]
    fn short_sizes() {
        assert_eq!(short_size(64 << 10), "64K");
        assert_eq!(short_size(1 << 20), "1M");
        assert_eq!(short_size(520 << 20), "520M");
        assert_eq!(short_size(1 << 30), "1G");
        assert_eq!(short_size((1 << 20) + (1 << 19) + 1), "1.5M");
        assert_eq!(short_size(524480 << 10), "512.2M");
        assert_eq!(short_size(1000), "1000B");
    }

    #[test]
    fn aligned_buffer_is_aligned_and_filled() {
        let mut b = AlignedBuf::new(1 << 16);
        assert_eq!(b.bytes_mut().as_ptr() as usize % ALIGN, 0);
        b.fill_random(7);
        assert!(b.words().iter().filter(|&&w| w == 0).count() < 2);
    }
}
