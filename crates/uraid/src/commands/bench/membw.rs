//! Single-core memory read bandwidth: sum a buffer far larger than the caches, 64-bit word by
//! word into eight independent accumulators (the compiler may vectorise the loop; it cannot
//! drop it, as the sum is used). The buffer is written before timing, so no page is faulted
//! in during a run.

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

/// Sum of the words: the read loop being timed.
fn sum_words(words: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let mut chunks = words.chunks_exact(8);
    for c in &mut chunks {
        for j in 0..8 {
            acc[j] = acc[j].wrapping_add(c[j]);
        }
    }
    let tail: u64 = chunks.remainder().iter().fold(0, |a, &w| a.wrapping_add(w));
    acc.iter().fold(tail, |a, &w| a.wrapping_add(w))
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
        let words: Vec<u64> = (1..=21).collect();
        assert_eq!(sum_words(&words), 21 * 22 / 2);
        assert_eq!(sum_words(&[u64::MAX, 2]), 1);
    }
}
