//! `uraid bench parity`: time each parity kernel on whole stripes.
//!
//! A stripe is `data` members of `chunk` bytes followed by its parity members (P, then Q).
//! The working set is either one stripe used again and again (cache-resident) or a pool of
//! stripes of at least the given size, cycled through in order so that every call reads
//! memory the previous calls pushed out of the caches. The pool is written before timing.
//!
//! The operations, as a RAID array runs them:
//! - `xor`: P of the data members (RAID-4/5 writes), k+1 layouts;
//! - `pq`: P and Q of the data members (RAID-6 writes), k+2 layouts;
//! - `recover1`: data member 0 rebuilt from P and the other data members (RAID-5 degraded
//!   read or rebuild), k+1 layouts;
//! - `recover2`: data members 0 and 1 rebuilt from P, Q and the rest (RAID-6 short of two),
//!   k+2 layouts.
//!
//! GB/s counts the data members' bytes (k × chunk per stripe), 10^9 bytes per GB. Before and
//! after a kernel is timed, its result on the first stripe is compared with the scalar
//! reference; any difference is an error and no figure is printed for that kernel.

use uraid_parity::Kernel;

use super::{check_runs, list_arg, membw, short_size, size_arg, time_calls, AlignedBuf, ParityArgs, Printer, Row};
use crate::commands::{err, CliError, CliResult};
use crate::size::parse_size;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Xor,
    Pq,
    Recover1,
    Recover2,
}

impl Op {
    const ALL: [Op; 4] = [Op::Xor, Op::Pq, Op::Recover1, Op::Recover2];

    fn name(self) -> &'static str {
        match self {
            Op::Xor => "xor",
            Op::Pq => "pq",
            Op::Recover1 => "recover1",
            Op::Recover2 => "recover2",
        }
    }

    /// Parity members of the layouts the operation runs on.
    fn parity(self) -> usize {
        match self {
            Op::Xor | Op::Recover1 => 1,
            Op::Pq | Op::Recover2 => 2,
        }
    }

    /// The data members the recoveries rebuild.
    fn missing(self) -> &'static [usize] {
        match self {
            Op::Xor | Op::Pq => &[],
            Op::Recover1 => &[0],
            Op::Recover2 => &[0, 1],
        }
    }
}

/// Data members a layout may have.
const MIN_DATA: usize = 2;
const MAX_DATA: usize = 64;
/// Chunk sizes accepted: multiples of 4 KiB up to 64 MiB.
const CHUNK_UNIT: u64 = 4096;
const MAX_CHUNK: u64 = 64 << 20;
const DEFAULT_DATA: [usize; 2] = [4, 8];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WorkingSet {
    /// One stripe, reused.
    Hot,
    /// A pool of stripes of at least this many bytes.
    Bytes(u64),
}

/// The benchmark matrix, checked.
struct Plan {
    ops: Vec<Op>,
    kernels: Vec<Kernel>,
    /// (op, data members) pairs, per op in the order given.
    layouts: Vec<(Op, usize)>,
    chunks: Vec<u64>,
    sets: Vec<WorkingSet>,
}

fn parse_ops(text: &str) -> CliResult<Vec<Op>> {
    let mut ops = Vec::new();
    for item in list_arg("op", text)? {
        let op = Op::ALL.into_iter().find(|o| o.name() == item).ok_or_else(|| {
            CliError(format!("--op: unknown operation '{item}' (choose from xor, pq, recover1, recover2)"))
        })?;
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    Ok(ops)
}

fn kernel_names(kernels: &[Kernel]) -> String {
    kernels.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

fn parse_kernels(text: &str) -> CliResult<Vec<Kernel>> {
    let mut kernels = Vec::new();
    for item in list_arg("kernel", text)? {
        let chosen = match item {
            "all" => Kernel::available_kernels(),
            "best" => vec![Kernel::best()],
            name => match Kernel::from_name(name) {
                Some(k) if k.available() => vec![k],
                Some(k) => {
                    return err(format!(
                        "--kernel: {k} is not available on this CPU (it runs {})",
                        kernel_names(&Kernel::available_kernels())
                    ))
                }
                None => {
                    return err(format!(
                        "--kernel: unknown kernel '{name}' (choose from {}, best, all)",
                        kernel_names(&Kernel::ALL)
                    ))
                }
            },
        };
        for k in chosen {
            if !kernels.contains(&k) {
                kernels.push(k);
            }
        }
    }
    Ok(kernels)
}

/// `K+M` or a bare `K`: data members and, if given, parity members.
fn parse_layout(item: &str) -> CliResult<(usize, Option<usize>)> {
    let (data, parity) = match item.split_once('+') {
        Some((d, p)) => (d, Some(p)),
        None => (item, None),
    };
    let bad = || CliError(format!("--layout: '{item}' is not a layout (write DATA+PARITY, like 4+1 or 8+2)"));
    let data: usize = data.trim().parse().map_err(|_| bad())?;
    let parity: Option<usize> = match parity {
        Some(p) => Some(p.trim().parse().map_err(|_| bad())?),
        None => None,
    };
    if !(MIN_DATA..=MAX_DATA).contains(&data) {
        return err(format!("--layout: '{item}': {data} data members; give {MIN_DATA} to {MAX_DATA}"));
    }
    if let Some(p) = parity {
        if !(1..=2).contains(&p) {
            return err(format!("--layout: '{item}': {p} parity members; give 1 (xor, recover1) or 2 (pq, recover2)"));
        }
    }
    Ok((data, parity))
}

fn parse_layouts(text: Option<&str>, ops: &[Op]) -> CliResult<Vec<(Op, usize)>> {
    let Some(text) = text else {
        return Ok(ops.iter().flat_map(|&op| DEFAULT_DATA.iter().map(move |&d| (op, d))).collect());
    };
    let given = list_arg("layout", text)?.into_iter().map(parse_layout).collect::<CliResult<Vec<_>>>()?;
    let mut out = Vec::new();
    for &op in ops {
        let mut mine: Vec<usize> = Vec::new();
        for &(d, p) in &given {
            if p.unwrap_or(op.parity()) == op.parity() && !mine.contains(&d) {
                mine.push(d);
            }
        }
        if mine.is_empty() {
            return err(format!(
                "--layout={text}: no DATA+{} layout for {} (xor and recover1 run on DATA+1, pq and recover2 on DATA+2)",
                op.parity(),
                op.name()
            ));
        }
        out.extend(mine.into_iter().map(|d| (op, d)));
    }
    Ok(out)
}

fn parse_chunks(text: &str) -> CliResult<Vec<u64>> {
    let mut chunks = Vec::new();
    for item in list_arg("chunk", text)? {
        let bytes = size_arg("chunk", item, 1024)?;
        if bytes == 0 || !bytes.is_multiple_of(CHUNK_UNIT) || bytes > MAX_CHUNK {
            return err(format!(
                "--chunk: '{item}' is {bytes} bytes; give a multiple of 4K up to 64M (a bare number is KiB)"
            ));
        }
        if !chunks.contains(&bytes) {
            chunks.push(bytes);
        }
    }
    Ok(chunks)
}

fn parse_sets(text: &str) -> CliResult<Vec<WorkingSet>> {
    let mut sets = Vec::new();
    for item in list_arg("working-set", text)? {
        let set = if item.eq_ignore_ascii_case("hot") {
            WorkingSet::Hot
        } else {
            let bytes =
                parse_size(item, 1).map_err(|e| CliError(format!("--working-set: give hot or a size, not {e}")))?;
            if bytes == 0 || bytes > 1 << 40 {
                return err(format!("--working-set: '{item}': give hot or a size from 1 byte to 1T"));
            }
            WorkingSet::Bytes(bytes)
        };
        if !sets.contains(&set) {
            sets.push(set);
        }
    }
    Ok(sets)
}

fn plan(args: &ParityArgs) -> CliResult<Plan> {
    check_runs(args.runs, args.seconds)?;
    let ops = parse_ops(&args.op)?;
    let kernels = parse_kernels(&args.kernel)?;
    let layouts = parse_layouts(args.layout.as_deref(), &ops)?;
    let chunks = parse_chunks(&args.chunk)?;
    let sets = parse_sets(&args.working_set)?;
    Ok(Plan { ops, kernels, layouts, chunks, sets })
}

pub fn run(args: &ParityArgs) -> CliResult {
    let plan = plan(args)?;
    let mut printer = Printer::new(args.json);
    if !args.no_membw {
        printer.print(&membw::measure(membw::DEFAULT_BYTES, args.runs, args.seconds));
    }
    for &op in &plan.ops {
        for &(_, data) in plan.layouts.iter().filter(|(o, _)| *o == op) {
            for &chunk in &plan.chunks {
                for &set in &plan.sets {
                    let bench = Bench { op, data, chunk: chunk as usize, set };
                    bench.run(&plan.kernels, args.runs, args.seconds, &mut printer)?;
                }
            }
        }
    }
    Ok(())
}

/// One point of the matrix, run with every kernel chosen.
struct Bench {
    op: Op,
    data: usize,
    chunk: usize,
    set: WorkingSet,
}

impl Bench {
    fn members(&self) -> usize {
        self.data + self.op.parity()
    }

    fn stripes(&self) -> usize {
        let stripe = (self.members() * self.chunk) as u64;
        match self.set {
            WorkingSet::Hot => 1,
            WorkingSet::Bytes(b) => b.div_ceil(stripe).max(2) as usize,
        }
    }

    fn describe(&self) -> String {
        format!("{} {}+{} chunk {}", self.op.name(), self.data, self.op.parity(), short_size(self.chunk as u64))
    }

    fn row(&self, kernel: Kernel, runs: Vec<f64>) -> Row {
        Row {
            op: self.op.name(),
            data_members: self.data,
            parity_members: self.op.parity(),
            chunk_bytes: self.chunk as u64,
            kernel: kernel.name().to_string(),
            working_set_bytes: (self.stripes() * self.members() * self.chunk) as u64,
            hot: self.set == WorkingSet::Hot,
            runs,
        }
    }

    fn run(&self, kernels: &[Kernel], runs: usize, seconds: f64, printer: &mut Printer) -> CliResult {
        let (k, n, chunk, stripes) = (self.data, self.members(), self.chunk, self.stripes());
        let mut pool = AlignedBuf::new(stripes * n * chunk);
        pool.fill_random(0x0075_7261_6964 ^ (n * chunk) as u64);
        let bytes_per_call = (k * chunk) as u64;
        match self.op {
            Op::Xor | Op::Pq => {
                // Data members are only read and parity members only written: hand them out as
                // shared and exclusive slices of the pool.
                let mut data: Vec<&[u8]> = Vec::with_capacity(stripes * k);
                let mut parity: Vec<&mut [u8]> = Vec::with_capacity(stripes * (n - k));
                for (i, block) in pool.bytes_mut().chunks_exact_mut(chunk).enumerate() {
                    if i % n < k {
                        data.push(block);
                    } else {
                        parity.push(block);
                    }
                }
                let m = n - k;
                let gen = |kernel: Kernel, parity: &mut [&mut [u8]], data: &[&[u8]], s: usize| {
                    let d = &data[s * k..(s + 1) * k];
                    match &mut parity[s * m..(s + 1) * m] {
                        [p] => kernel.gen_p(p, d),
                        [p, q] => kernel.gen_pq(p, q, d),
                        _ => unreachable!("one or two parity members"),
                    }
                };
                let mut want: Vec<Vec<u8>> = vec![vec![0u8; chunk]; m];
                {
                    let mut refs: Vec<&mut [u8]> = want.iter_mut().map(|w| w.as_mut_slice()).collect();
                    gen(Kernel::Scalar, &mut refs, &data, 0);
                }
                for &kernel in kernels {
                    let check = |parity: &[&mut [u8]], when: &str| -> CliResult {
                        for (j, w) in want.iter().enumerate() {
                            let name = ["P", "Q"][j];
                            self.check_same(kernel, when, name, parity[j], w)?;
                        }
                        Ok(())
                    };
                    for p in &mut parity[..m] {
                        p.fill(0x5a);
                    }
                    gen(kernel, &mut parity, &data, 0);
                    check(&parity, "before timing")?;
                    let results =
                        time_calls(runs, seconds, bytes_per_call, |i| gen(kernel, &mut parity, &data, i % stripes));
                    gen(kernel, &mut parity, &data, 0);
                    check(&parity, "after timing")?;
                    printer.print(&self.row(kernel, results));
                }
            }
            Op::Recover1 | Op::Recover2 => {
                let mut blocks: Vec<&mut [u8]> = pool.bytes_mut().chunks_exact_mut(chunk).collect();
                // Make the first stripe's parity agree with its data, and keep what the
                // recoveries must rebuild.
                {
                    let (d, p) = blocks[..n].split_at_mut(k);
                    let d: Vec<&[u8]> = d.iter().map(|b| &**b).collect();
                    match p {
                        [p] => Kernel::Scalar.gen_p(p, &d),
                        [p, q] => Kernel::Scalar.gen_pq(p, q, &d),
                        _ => unreachable!("one or two parity members"),
                    }
                }
                let missing = self.op.missing();
                let want: Vec<Vec<u8>> = missing.iter().map(|&i| blocks[i].to_vec()).collect();
                let recover = |kernel: Kernel, stripe: &mut [&mut [u8]]| match missing {
                    [one] => kernel.raid5_recover(stripe, *one),
                    two => kernel.raid6_recover(stripe, two),
                };
                for &kernel in kernels {
                    let check = |blocks: &[&mut [u8]], when: &str| -> CliResult {
                        for (&i, w) in missing.iter().zip(&want) {
                            self.check_same(kernel, when, &format!("data member {i}"), blocks[i], w)?;
                        }
                        Ok(())
                    };
                    for &i in missing {
                        blocks[i].fill(0x5a);
                    }
                    recover(kernel, &mut blocks[..n]);
                    check(&blocks, "before timing")?;
                    let results = time_calls(runs, seconds, bytes_per_call, |i| {
                        let s = i % stripes;
                        recover(kernel, &mut blocks[s * n..(s + 1) * n])
                    });
                    for &i in missing {
                        blocks[i].fill(0x5a);
                    }
                    recover(kernel, &mut blocks[..n]);
                    check(&blocks, "after timing")?;
                    printer.print(&self.row(kernel, results));
                }
            }
        }
        Ok(())
    }

    /// Refuse a kernel whose block differs from the scalar reference's.
    fn check_same(&self, kernel: Kernel, when: &str, block: &str, got: &[u8], want: &[u8]) -> CliResult {
        match first_difference(got, want) {
            None => Ok(()),
            Some(at) => err(format!(
                "bench parity: kernel {kernel} computed the wrong bytes for {} ({when}): {block} differs from the scalar reference at byte {at} (0x{:02x}, expected 0x{:02x}); no figure is reported for it",
                self.describe(),
                got[at],
                want[at]
            )),
        }
    }
}

/// The first index where two equally long blocks differ.
fn first_difference(got: &[u8], want: &[u8]) -> Option<usize> {
    assert_eq!(got.len(), want.len(), "blocks compared must have the same length");
    if got == want {
        return None;
    }
    got.iter().zip(want).position(|(a, b)| a != b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_follow_the_parity_of_each_op() {
        let ops = [Op::Xor, Op::Pq];
        assert_eq!(parse_layouts(None, &ops).unwrap(), vec![(Op::Xor, 4), (Op::Xor, 8), (Op::Pq, 4), (Op::Pq, 8)]);
        assert_eq!(
            parse_layouts(Some("4+1,6+2,3"), &ops).unwrap(),
            vec![(Op::Xor, 4), (Op::Xor, 3), (Op::Pq, 6), (Op::Pq, 3)]
        );
        assert!(parse_layouts(Some("4+1"), &ops).unwrap_err().0.contains("no DATA+2 layout for pq"));
        assert!(parse_layouts(Some("4+9"), &ops).unwrap_err().0.contains("parity members"));
        assert!(parse_layouts(Some("1+1"), &ops).is_err());
        assert!(parse_layouts(Some("x+1"), &ops).is_err());
    }

    #[test]
    fn chunks_are_multiples_of_4k() {
        assert_eq!(parse_chunks("64K,1M,8").unwrap(), vec![64 << 10, 1 << 20, 8 << 10]);
        assert!(parse_chunks("3").is_err());
        assert!(parse_chunks("6K").is_err());
        assert!(parse_chunks("128M").is_err());
        assert!(parse_chunks("64K,").is_err());
    }

    #[test]
    fn working_sets() {
        assert_eq!(parse_sets("hot,512M").unwrap(), vec![WorkingSet::Hot, WorkingSet::Bytes(512 << 20)]);
        assert!(parse_sets("cold").is_err());
        let b = Bench { op: Op::Pq, data: 8, chunk: 1 << 20, set: WorkingSet::Bytes(512 << 20) };
        assert_eq!(b.stripes(), 52);
        assert!(b.row(Kernel::Scalar, vec![1.0]).working_set_bytes >= 512 << 20);
        let hot = Bench { set: WorkingSet::Hot, ..b };
        assert_eq!(hot.row(Kernel::Scalar, vec![1.0]).working_set_bytes, 10 << 20);
    }

    #[test]
    fn kernels_by_name() {
        assert_eq!(parse_kernels("all").unwrap(), Kernel::available_kernels());
        assert_eq!(
            parse_kernels("best,scalar").unwrap(),
            vec![Kernel::best(), Kernel::Scalar].into_iter().fold(Vec::new(), |mut v, k| {
                if !v.contains(&k) {
                    v.push(k)
                }
                v
            })
        );
        assert!(parse_kernels("sse9").unwrap_err().0.contains("unknown kernel"));
    }

    #[test]
    fn a_wrong_kernel_result_is_an_error() {
        let b = Bench { op: Op::Xor, data: 4, chunk: 4096, set: WorkingSet::Hot };
        let want = vec![7u8; 4096];
        let mut got = want.clone();
        assert!(b.check_same(Kernel::Scalar, "before timing", "P", &got, &want).is_ok());
        got[1000] ^= 1;
        let e = b.check_same(Kernel::Scalar, "before timing", "P", &got, &want).unwrap_err().0;
        assert!(e.contains("byte 1000") && e.contains("no figure"), "{e}");
    }
}
