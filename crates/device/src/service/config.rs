//! How the service is set up: the member I/O backend, queue depths, delays, speed limits and the
//! inline-request limits.

use std::time::Duration;

use uraid_engine::{ReadPolicy, SplitTuning};

use super::SpeedLimits;

/// How member I/O is performed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoBackend {
    /// One io_uring per member, on a thread of its own, with up to
    /// [`ServiceConfig::queue_depth`] I/Os in flight, `O_DIRECT` where the file system allows
    /// it. Devices without a file descriptor, and kernels without io_uring, use threads.
    #[default]
    Uring,
    /// [`ServiceConfig::workers_per_member`] threads per member, each doing one blocking I/O at
    /// a time through the page cache.
    Threads,
}

impl std::str::FromStr for IoBackend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uring" | "io_uring" => Ok(IoBackend::Uring),
            "threads" => Ok(IoBackend::Threads),
            other => Err(format!("unknown I/O backend {other:?} (uring or threads)")),
        }
    }
}

impl std::fmt::Display for IoBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IoBackend::Uring => "uring",
            IoBackend::Threads => "threads",
        })
    }
}

#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// How member I/O is performed.
    pub io: IoBackend,
    /// With [`IoBackend::Uring`]: member I/Os in flight on one member. With I/O threads: member
    /// I/Os handed to one member's threads at once (at least one per thread), queued for them
    /// or being performed; the engine thread keeps the rest until they take some.
    pub queue_depth: usize,
    /// With [`IoBackend::Threads`] (or a device without a file descriptor): threads doing
    /// member I/O per member, the number of member I/Os being performed on one member at once.
    pub workers_per_member: usize,
    /// How long the array stays marked dirty after the last write (md's `safe_mode_delay`).
    pub clean_delay: Duration,
    /// Background pass speed limits (md's `speed_limit_min` / `speed_limit_max`).
    pub speed: SpeedLimits,
    /// Start a resync by itself when the array was found dirty (md does).
    pub auto_resync: bool,
    /// How long a write-intent bitmap region stays marked after its last write (md's bitmap
    /// `daemon_sleep`, 5 s by default).
    pub bitmap_clear_delay: Duration,
    /// Bound on the stripe buffers parity writes in progress hold (md's stripe cache); see the
    /// engine's `Array::set_stripe_memory_limit`.
    pub stripe_cache_bytes: u64,
    /// How reads of mirrored data (raid1, raid10) choose a copy; see the engine's
    /// `read_balance`. md keeps no such setting in its superblock: it is a run-time choice.
    pub read_policy: ReadPolicy,
    /// The `split` policy's knobs (window, read-ahead bound, division threshold).
    pub split_tuning: SplitTuning,
    /// Whether reads of mirrored data pass over copies measured clearly slower than another (a
    /// far or slow host); see the engine's `Array::set_latency_balancing`.
    pub latency_balancing: bool,
    /// Reads (and, on linear and raid0, writes without FUA, up to [`INLINE_WRITE_MAX`]) of at
    /// most this many bytes are answered on the submitting thread when the array is whole and
    /// the members can do them without waiting for a device (see the `inline` module); 0 turns that off.
    pub inline_max: u64,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        // md's safe_mode_delay is 200 ms; a little longer here, since every clean/dirty round
        // trip costs a flush of every member plus two superblock writes.
        ServiceConfig {
            // Measured faster on this project's machines so far (see BENCHMARKS.md): on tmpfs
            // io_uring hands every I/O to the kernel's worker threads, a hand-off like an I/O
            // thread's, and buffered reads through the threads find the page cache.
            io: IoBackend::Threads,
            queue_depth: 32,
            workers_per_member: 4,
            clean_delay: Duration::from_millis(500),
            speed: SpeedLimits::default(),
            auto_resync: true,
            bitmap_clear_delay: Duration::from_secs(5),
            stripe_cache_bytes: uraid_engine::array::DEFAULT_STRIPE_MEMORY,
            read_policy: ReadPolicy::Md,
            split_tuning: SplitTuning::default(),
            latency_balancing: true,
            inline_max: DEFAULT_INLINE_MAX,
        }
    }
}

/// Requests up to this size are tried inline by default: above it, member I/O threads copying in
/// parallel gain more than the hand-offs cost (see BENCHMARKS.md, section 2).
pub const DEFAULT_INLINE_MAX: u64 = 256 << 10;

/// The inline limit `uraid serve` uses by default. Over NBD, reads of 512 KiB done on the
/// connection's thread beat the hand-offs to the engine and member threads (`nbdcopy` and fio's
/// random reads, BENCHMARKS.md section 3), where in process, one thread submitting everything,
/// the member threads copying in parallel win; 1 MiB reads lost over NBD too.
pub const SERVE_INLINE_MAX: u64 = 512 << 10;

/// Writes are never done inline above this size, whatever [`ServiceConfig::inline_max`] says:
/// larger ones went slower on the submitting thread than through the member threads, over NBD
/// too (fio's 1 MiB random writes, BENCHMARKS.md, section 3). At 512 KiB inline still won
/// over NBD (`nbdcopy` writes and fio's 512 KiB random writes, section 3).
pub const INLINE_WRITE_MAX: u64 = 512 << 10;
