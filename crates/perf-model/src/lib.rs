//! uraid's performance model.
//!
//! The real engine ([`uraid_engine::Array`], sans-I/O) runs over modelled disks and buses in
//! virtual time, so the seed documents' benchmarks (bonnie, parallel `dd`, rawio, a tar
//! extraction, Vinum's rawio sweeps) can be replayed on the seeds' hardware and compared
//! with their published figures, and read-balancing policies compared on identical workloads.
//!
//! Time is integer nanoseconds ([`Nanos`]); nothing reads the wall clock and every random choice
//! comes from one seeded generator, so one `u64` seed gives the same figures on every run.
//!
//! - [`disk`]: the disk models (a rotating hard disk and a simple SSD);
//! - [`bus`]: a shared SCSI/SATA/PCI channel that serializes data transfers;
//! - [`profiles`]: named hardware profiles with their parameters and sources;
//! - [`storage`]: disks, their buses and host queues, as one discrete-event system;
//! - [`volume`]: a gvinum volume on simulated drives (subdisks may share a drive), and Vinum's
//!   request structure;
//! - [`workload`]: the benchmarks as streams of block requests from closed-loop clients;
//! - [`runner`]: the event loop driving the engine (or one bare disk) under a workload;
//! - [`seeds`]: the seed figures, how each is modelled, and their simulated values;
//! - [`plot`]: the SVG charts of the sweeps;
//! - [`hosts`]: arrays over many hosts on paper: rebuild time and the chance of data loss by
//!   host count and placement (`uraid sim hosts`, `docs/many-hosts.md`).

pub mod bus;
pub mod disk;
pub mod hosts;
pub mod plot;
pub mod profiles;
pub mod runner;
pub mod seeds;
pub mod storage;
pub mod volume;
pub mod workload;

pub use uraid_fault_sim::rng::SimRng;

/// Virtual time in nanoseconds.
pub type Nanos = u64;

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

/// Bytes in the "MB" the seeds speak of (10^6; bonnie's K/sec are 1024 bytes, see `seeds`).
pub const MB: f64 = 1e6;

/// Milliseconds (possibly fractional) as nanoseconds.
pub fn ms(v: f64) -> Nanos {
    (v * NS_PER_MS as f64).round() as Nanos
}

/// Microseconds (possibly fractional) as nanoseconds.
pub fn us(v: f64) -> Nanos {
    (v * NS_PER_US as f64).round() as Nanos
}

/// Time to move `bytes` at `bytes_per_s`.
pub fn transfer_ns(bytes: u64, bytes_per_s: f64) -> Nanos {
    (bytes as f64 * NS_PER_S as f64 / bytes_per_s).round() as Nanos
}
