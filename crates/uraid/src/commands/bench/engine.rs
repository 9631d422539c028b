//! `uraid bench engine`: drive an assembled array in-process, without a network or FUSE front
//! end, the way fio drives a block device: a closed loop keeping `--iodepth` requests in flight,
//! sequential or random, for a fixed time. What it measures is uraid's own overhead (engine,
//! member I/O driver) on top of the member files, so `bench/engine.py` can set it beside fio run
//! directly on the same files.
//!
//! CPU time is the whole process's (`getrusage`), the load generator included, as fio's figures
//! include fio's own.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;

use uraid_device::service::{ArrayService, BlockOp, BlockReply, ServiceConfig};
use uraid_device::OpenArray;

use crate::commands::{err, CliError, CliResult};
use crate::size::parse_size;

#[derive(clap::Args, Debug)]
pub struct EngineBenchArgs {
    /// read, write (sequential) or randread, randwrite (uniform over the array, aligned to --bs)
    #[arg(long, default_value = "read")]
    pub pattern: String,
    /// Bytes per request (suffixes K, M)
    #[arg(long, default_value = "1M")]
    pub bs: String,
    /// Requests kept in flight (in all, over the streams)
    #[arg(long, default_value_t = 32)]
    pub iodepth: usize,
    /// With read or write: this many sequential streams, each over its own equal part of the
    /// array, sharing --iodepth (parallel readers such as several dd)
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// Seconds to run
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Member I/O threads per member (the service's default otherwise)
    #[arg(long)]
    pub member_threads: Option<usize>,
    #[command(flatten)]
    pub member_io: crate::MemberIoArgs,
    /// One JSON object instead of a line of text
    #[arg(long)]
    pub json: bool,
    /// Member files or block devices of an existing array (its data is overwritten by the write
    /// patterns)
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
}

#[derive(Clone, Copy, PartialEq)]
enum Pattern {
    Read,
    Write,
    RandRead,
    RandWrite,
}

/// A finished request: the stream it belongs to, and its outcome.
type Completion = (usize, Result<BlockReply, String>);

thread_local! {
    /// Requests completed on the load generator's own thread (answered inline, inside
    /// `submit`), waiting to be counted.
    static COMPLETIONS: RefCell<Vec<Completion>> = const { RefCell::new(Vec::new()) };
    /// Set on the load generator's thread only.
    static GENERATOR: Cell<bool> = const { Cell::new(false) };
}

/// Where requests completed on the service's threads go.
static ELSEWHERE: OnceLock<mpsc::Sender<Completion>> = OnceLock::new();

const CLOCK_EVERY: u64 = 64;

/// The load generator's side of a completion. The generator is measured along with the array,
/// as fio is along with the files, so it is kept lean, as fio is: a request answered inline
/// costs a push onto a vector, not a channel's send and receive, and the callback holds nothing
/// but its stream number.
fn complete(stream: usize, r: Result<BlockReply, String>) {
    if GENERATOR.get() {
        COMPLETIONS.with(|c| c.borrow_mut().push((stream, r)));
    } else if let Some(tx) = ELSEWHERE.get() {
        let _ = tx.send((stream, r));
    }
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

pub fn run(args: &EngineBenchArgs) -> CliResult {
    let pattern = match args.pattern.as_str() {
        "read" => Pattern::Read,
        "write" => Pattern::Write,
        "randread" => Pattern::RandRead,
        "randwrite" => Pattern::RandWrite,
        other => return err(format!("--pattern={other}: choose read, write, randread or randwrite")),
    };
    let bs = parse_size(&args.bs, 1).map_err(CliError)?;
    if bs == 0 || bs % 512 != 0 {
        return err(format!("--bs={}: must be a non-zero multiple of 512 bytes", args.bs));
    }
    if args.iodepth == 0 || args.iodepth > 4096 {
        return err(format!("--iodepth={}: must be between 1 and 4096", args.iodepth));
    }
    if args.streams == 0 || args.streams > args.iodepth {
        return err(format!("--streams={}: must be between 1 and --iodepth ({})", args.streams, args.iodepth));
    }
    if args.streams > 1 && !matches!(pattern, Pattern::Read | Pattern::Write) {
        return err(format!("--streams={}: only the sequential patterns (read, write) have streams", args.streams));
    }
    super::check_runs(1, args.seconds)?;
    // Unbounded in type, bounded by construction: completions come only for requests the bench
    // submitted, and it keeps at most --iodepth of them in flight.
    let (tx, rx) = mpsc::channel::<Completion>();
    if ELSEWHERE.set(tx).is_err() {
        return err("the engine bench runs once per process".to_string());
    }
    let writes = matches!(pattern, Pattern::Write | Pattern::RandWrite);
    let array = OpenArray::open_paths(&args.members, writes)?;
    let level = array.engine().geometry().name().to_string();
    let mut config = args.member_io.apply(ServiceConfig::default())?;
    if let Some(t) = args.member_threads {
        config.workers_per_member = t;
    }
    let config_split = config.split_tuning;
    let config_inline_max = config.inline_max;
    let service = ArrayService::start(array, config);
    let handle = service.handle();
    let size = handle.info().size;
    let blocks = size / bs;
    if blocks == 0 {
        return err(format!("--bs={}: larger than the array ({size} bytes)", args.bs));
    }
    let payload: Bytes = (0..bs).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8).collect::<Vec<u8>>().into();
    COMPLETIONS.with(|c| c.borrow_mut().reserve(args.iodepth));
    // Stream `s` covers blocks [s * blocks / streams, (s + 1) * blocks / streams).
    let streams = args.streams as u64;
    if blocks < streams {
        return err(format!("--streams={}: more streams than --bs blocks in the array", args.streams));
    }
    let part = |s: u64| (s * blocks / streams, (s + 1) * blocks / streams);
    let mut next_block: Vec<u64> = (0..streams).map(|s| part(s).0).collect();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut submit = |handle: &uraid_device::service::ServiceHandle, stream: usize| {
        let block = match pattern {
            Pattern::Read | Pattern::Write => {
                let b = next_block[stream];
                let (first, end) = part(stream as u64);
                next_block[stream] = if b + 1 == end { first } else { b + 1 };
                b
            }
            Pattern::RandRead | Pattern::RandWrite => {
                // xorshift64*: cheap, and the same sequence every run.
                rng ^= rng >> 12;
                rng ^= rng << 25;
                rng ^= rng >> 27;
                rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % blocks
            }
        };
        let offset = block * bs;
        let op = if writes {
            // Every write sends the same buffer, shared, as fio writes from buffers it reuses:
            // what is measured is the array's work, not the load generator's copies. (The NBD
            // server reads each write off the socket into a pooled buffer; `bench/nbd.py`
            // measures that path.)
            BlockOp::Write { offset, data: payload.clone(), fua: false }
        } else {
            BlockOp::Read { offset, len: bs }
        };
        handle.submit(op, Box::new(move |r| complete(stream, r.map_err(|e| e.to_string()))));
    };
    GENERATOR.set(true);
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.seconds);
    for i in 0..args.iodepth {
        submit(&handle, i % args.streams);
    }
    let (mut done, mut in_flight, mut running) = (0u64, args.iodepth, true);
    while in_flight > 0 {
        let ((stream, r), here) = match COMPLETIONS.with(|c| c.borrow_mut().pop()) {
            Some(c) => (c, true),
            None => (rx.recv().map_err(|_| CliError("the array service stopped".into()))?, false),
        };
        in_flight -= 1;
        if let Err(e) = r {
            return err(format!("a request failed: {e}"));
        }
        done += 1;
        // After requests answered inline, the clock is read every CLOCK_EVERY completions: they
        // come hundreds of thousands a second, so the run still ends within a fraction of a
        // millisecond of the deadline. Others, slower, read it every time.
        if running && (!here || done % CLOCK_EVERY == 0) {
            running = Instant::now() < deadline;
        }
        if running {
            submit(&handle, stream);
            in_flight += 1;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    service.stop().map_err(|e| CliError(e.to_string()))?;
    let bytes = done * bs;
    let gib = bytes as f64 / (1u64 << 30) as f64;
    let mbps = bytes as f64 / elapsed / 1e6;
    let iops = done as f64 / elapsed;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "level": level.to_string(), "pattern": args.pattern, "bs": bs, "iodepth": args.iodepth,
                "streams": args.streams, "read_policy": args.member_io.read_policy.name(),
                "latency_balancing": !args.member_io.no_latency_balancing,
                "split_window": config_split.window_bytes, "split_readahead": config_split.readahead_bytes,
                "split_divide": config_split.divide_bytes, "inline_max": config_inline_max,
                "io": format!("{:?}", args.member_io.io).to_lowercase(),
                "seconds": elapsed, "bytes": bytes, "mbps": mbps, "iops": iops,
                "cpu_seconds": cpu, "cpu_seconds_per_gib": cpu / gib,
            })
        );
    } else {
        println!(
            "{level} {} bs={bs} iodepth={} streams={} read-policy={}: {mbps:.0} MB/s, {iops:.0} IOPS over {elapsed:.1} s; {cpu:.2} CPU s ({:.3} CPU s/GiB)",
            args.pattern,
            args.iodepth,
            args.streams,
            args.member_io.read_policy,
            cpu / gib
        );
    }
    Ok(())
}
