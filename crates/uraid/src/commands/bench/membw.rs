//! Single-core memory read bandwidth: sum a buffer far larger than the caches as 64-bit words.
//!
//! One sequential stream leaves a core well short of what it can read (too few cache misses in
//! flight), and a stripe's members are read as several streams at once; so the buffer is read
//! as eight equal sections side by side, 64 bytes of each in turn, summed into one accumulator
//! per section. The loop is compiled for the widest vector unit the CPU has (AVX-512, AVX2,
//! else SSE2); it cannot be dropped, as the sum is used. The buffer is written before timing,
//! so no page is faulted in during a run.

use std::hint::black_box;
use std::time::{Duration, Instant};

use super::{check_runs, size_arg, AlignedBuf, MembwArgs, Printer, Row};
use crate::commands::{err, CliResult};

/// The buffer `uraid bench parity` reads for its memory line.
pub const DEFAULT_BYTES: u64 = 1 << 30;

pub fn run(args: &MembwArgs) -> CliResult {
    check_runs(args.runs, args.seconds)?;
    let bytes = size_arg("bytes", &args.bytes, 1)?;
    if bytes < 1 << 20 || !bytes.is_multiple_of(4096) {
        return err(format!("--bytes={}: give a multiple of 4K of at least 1M", args.bytes));
    }
    let row = measure(bytes, args.runs, args.seconds);
    Printer::new(args.json).print(&row);
    Ok(())
}

/// Sections read side by side.
const STREAMS: usize = 8;
/// Words of a section read in one step (64 bytes, a cache line).
const STEP: usize = 8;

/// Sum of the words: the read loop being timed, in the widest vector code this CPU runs.
fn sum_words(words: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { sum_words_avx512(words) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { sum_words_avx2(words) };
        }
    }
    sum_words_portable(words)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn sum_words_avx512(words: &[u64]) -> u64 {
    sum_words_portable(words)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_words_avx2(words: &[u64]) -> u64 {
    sum_words_portable(words)
}

#[inline(always)]
fn sum_words_portable(words: &[u64]) -> u64 {
    let section = words.len() / (STREAMS * STEP) * STEP;
    let (body, tail) = words.split_at(section * STREAMS);
    let sections: [&[u64]; STREAMS] = std::array::from_fn(|s| &body[s * section..(s + 1) * section]);
    let mut acc = [[0u64; STEP]; STREAMS];
    for i in (0..section).step_by(STEP) {
        for (a, sec) in acc.iter_mut().zip(&sections) {
            let line: &[u64; STEP] = sec[i..i + STEP].try_into().expect("a whole step");
            for (x, &w) in a.iter_mut().zip(line) {
                *x = x.wrapping_add(w);
            }
        }
    }
    let mut total = tail.iter().fold(0u64, |t, &w| t.wrapping_add(w));
    for a in &acc {
        total = a.iter().fold(total, |t, &w| t.wrapping_add(w));
    }
    total
}

/// Median read bandwidth over `runs` runs of full passes over a `bytes`-byte buffer, each run
/// lasting at least `seconds` and at least one pass. Reported as op "read", kernel "memory",
/// with the buffer as the one "data member".
pub fn measure(bytes: u64, runs: usize, seconds: f64) -> Row {
    let mut buf = AlignedBuf::new(bytes as usize);
    buf.fill_random(0x006d_656d_6277);
    let words = buf.words();
    // One untimed pass, so the first run starts like the others.
    black_box(sum_words(black_box(words)));
    let span = Duration::from_secs_f64(seconds);
    let results = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let mut passes = 0u64;
            let elapsed = loop {
                black_box(sum_words(black_box(words)));
                passes += 1;
                let e = start.elapsed();
                if e >= span {
                    break e;
                }
            };
            (passes * bytes) as f64 / elapsed.as_secs_f64() / 1e9
        })
        .collect();
    Row {
        op: "read",
        data_members: 1,
        parity_members: 0,
        chunk_bytes: bytes,
        kernel: "memory".to_string(),
        working_set_bytes: bytes,
        hot: false,
        runs: results,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_every_word() {
        for n in [0u64, 2, 21, 64, 100, 1000, 4096 + 17] {
            let words: Vec<u64> = (1..=n).collect();
            assert_eq!(sum_words(&words), n * (n + 1) / 2, "{n} words");
            assert_eq!(sum_words_portable(&words), n * (n + 1) / 2, "{n} words");
        }
        assert_eq!(sum_words(&[u64::MAX, 2]), 1);
    }
}
