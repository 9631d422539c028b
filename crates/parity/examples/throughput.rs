//! Rough parity throughput per kernel: `cargo run --release -p uraid-parity --example throughput`
//! (optionally followed by kernel names to measure only those, and by a number of bytes to
//! misalign every block by).
//!
//! GB/s counts the data members' bytes processed per second (1 GB = 1e9 bytes), as ISA-L's
//! benchmarks do. "hot" repeats one stripe that stays in cache; "cold" walks stripes over a
//! 512 MiB working set, so every byte comes from and goes to DRAM. A rough check, not a
//! benchmark suite: nothing here is asserted.

use std::time::{Duration, Instant};

use uraid_parity::Kernel;

const COLD_SET: usize = 512 << 20;

#[derive(Clone, Copy)]
enum Op {
    GenP,
    GenPq,
    /// Two data members lost, rebuilt from the others, P and Q.
    Recover2,
    /// One data member lost, rebuilt from the others and P.
    Recover1,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::GenP => "gen_p",
            Op::GenPq => "gen_pq",
            Op::Recover2 => "recover2",
            Op::Recover1 => "recover1",
        }
    }

    fn parity_blocks(self) -> usize {
        match self {
            Op::GenP => 1,
            _ => 2,
        }
    }

    fn run(self, kernel: Kernel, stripe: &mut [u8], data_count: usize, chunk: usize) {
        let mut blocks: Vec<&mut [u8]> = stripe.chunks_exact_mut(chunk).collect();
        let (data, parity) = blocks.split_at_mut(data_count);
        match self {
            Op::GenP => {
                let data: Vec<&[u8]> = data.iter().map(|d| &**d).collect();
                kernel.gen_p(parity[0], &data);
            }
            Op::GenPq => {
                let data: Vec<&[u8]> = data.iter().map(|d| &**d).collect();
                let (p, q) = parity.split_at_mut(1);
                kernel.gen_pq(p[0], q[0], &data);
            }
            Op::Recover2 => kernel.raid6_recover(&mut blocks, &[0, 1]),
            Op::Recover1 => kernel.raid6_recover(&mut blocks, &[0]),
        }
    }
}

/// Gigabytes per second of data members, from the median time of single calls of `run` (each
/// processing `data_bytes`) over about `budget`. Timing calls one by one and taking the median
/// keeps the figure meaningful on a small machine shared with other work: a call interrupted by
/// another process is an outlier rather than part of an average.
fn measure(data_bytes: usize, budget: Duration, mut run: impl FnMut()) -> f64 {
    run();
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 100_000) {
        let call = Instant::now();
        run();
        times.push(call.elapsed());
    }
    times.sort();
    data_bytes as f64 / times[times.len() / 2].as_secs_f64() / 1e9
}

fn main() {
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    let misalign: usize = wanted.iter().find_map(|w| w.parse().ok()).unwrap_or(0);
    let wanted: Vec<&String> = wanted.iter().filter(|w| w.parse::<usize>().is_err()).collect();
    let kernels: Vec<Kernel> = Kernel::available_kernels()
        .into_iter()
        .filter(|k| wanted.is_empty() || wanted.iter().any(|w| *w == k.name()))
        .collect();

    // Page-aligned, as buffers for direct I/O are: a large Vec is only 16-byte aligned, and
    // vectors straddling cache lines would measure the misalignment rather than the kernel.
    let mut owner = vec![0u8; COLD_SET + 8192];
    let skip = owner.as_ptr().align_offset(4096) + misalign % 4096;
    let memory = &mut owner[skip..skip + COLD_SET];
    for (i, byte) in memory.iter_mut().enumerate() {
        *byte = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3];
    }

    println!("{:<8} {:<9} {:>6} {:>6} {:>9} {:>9}", "kernel", "op", "layout", "chunk", "hot GB/s", "cold GB/s");
    for (op, data_count) in [
        (Op::GenP, 4),
        (Op::GenP, 8),
        (Op::GenPq, 4),
        (Op::GenPq, 8),
        (Op::Recover1, 8),
        (Op::Recover2, 4),
        (Op::Recover2, 8),
    ] {
        for chunk in [64 << 10, 1 << 20] {
            let stride = chunk * (data_count + op.parity_blocks());
            if op.parity_blocks() == 2 {
                // Valid parity everywhere, so that recovery rebuilds the same data each round.
                for stripe in memory.chunks_exact_mut(stride) {
                    Op::GenPq.run(Kernel::best(), stripe, data_count, chunk);
                }
            }
            for &kernel in &kernels {
                let hot = measure(data_count * chunk, Duration::from_millis(200), || {
                    op.run(kernel, &mut memory[..stride], data_count, chunk)
                });
                // One stripe after another through the whole working set, so each call finds
                // its stripe out of cache.
                let stripes = COLD_SET / stride;
                let mut next = 0;
                let cold = measure(data_count * chunk, Duration::from_millis(400), || {
                    let at = next * stride;
                    next = (next + 1) % stripes;
                    op.run(kernel, &mut memory[at..at + stride], data_count, chunk)
                });
                println!(
                    "{:<8} {:<9} {:>6} {:>6} {:>9.1} {:>9.1}",
                    kernel.name(),
                    op.name(),
                    format!("{data_count}+{}", op.parity_blocks()),
                    format!("{}K", chunk >> 10),
                    hot,
                    cold
                );
            }
        }
    }
}
