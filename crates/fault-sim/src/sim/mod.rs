//! `Sim`: one seeded run of the real engine over simulated members, in virtual time.
//!
//! What it owns: the discrete-event loop (member and metadata I/O completions at per-member
//! latencies, client arrivals, the policy's deadlines), the workload, the fault injector, the
//! crash and reassembly cycle, spares, and the checks against the [`Model`]. The array itself is
//! what `uraid serve` runs: md's metadata on the members' bytes (`OpenArray`), the engine, and
//! the service's policy (`ArrayPolicy`) deciding the metadata's order and the passes.
//! Everything random comes from the seed; nothing depends on the wall clock or on hash order.
//!
//! This module holds the run's state ([`Sim`]) and the helpers every part shares; each part of
//! the run is a submodule: `setup`, `md_members` and `vinum_members` (creating the members and
//! opening the array on them, md's or a gvinum volume),
//! `event_loop`, `engine_outputs`, `metadata` (the policy and its metadata I/O), `workload`,
//! `faults`, `crash`, `jobs` (spares) and `checks`. What a run is asked to do is in `config`,
//! what it reports in `report`.

use std::collections::BTreeMap;

use uraid_device::array_policy::{ArrayPolicy, PolicyConfig};
use uraid_device::{MemberTarget, OpenArray};
use uraid_engine::array::{Completion, IoId, MemberIo, MemberOp, RequestId};
use uraid_engine::metadata::MetaOp;
use uraid_engine::ppl::PplConfig;
use uraid_engine::read_balance::SplitTuning;
use uraid_engine::Engine;
use uraid_engine::{EngineError, Geometry, ReadPolicy};

use crate::disk::SimDisk;
use crate::model::{Expect, FlushToken, Model, WriteId};
use crate::rng::SimRng;

/// Print a step of the run when it is traced. Defined before the submodules, which use it.
macro_rules! trace {
    ($sim:expr, $($arg:tt)*) => {
        if $sim.cfg.trace {
            $sim.emit_trace(format!($($arg)*));
        }
    };
}

mod checks;
mod config;
mod copyback;
mod crash;
mod engine_outputs;
mod event_loop;
mod faults;
mod jobs;
mod md_members;
mod metadata;
mod raidframe_members;
mod report;
mod setup;
mod vinum_members;
mod workload;

pub use config::{Config, Mode, Mutation, Scenario};
pub use report::{Failure, Invariant, Report};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FaultKind {
    Death,
    Latent,
    WriteError,
    OperatorFail,
    Crash,
    /// A crash while a rebuild runs (waits for one).
    CrashInRebuild,
    Corrupt,
}

#[derive(Debug, Clone, Copy)]
struct Fault {
    /// Armed once this many client requests were submitted...
    at_op: u64,
    /// ...to fire this many events later.
    delay: u64,
    /// The event count it fires at, once armed.
    at: Option<u64>,
    kind: FaultKind,
    tries: u32,
}

enum Pending {
    Read {
        expect: Expect,
        prior: Vec<WriteId>,
    },
    Write {
        wid: WriteId,
    },
    Flush {
        token: FlushToken,
    },
    Scrub,
    /// The policy's pass step.
    Step,
    Internal,
}

impl Pending {
    fn is_client(&self) -> bool {
        matches!(self, Pending::Read { .. } | Pending::Write { .. } | Pending::Scrub | Pending::Flush { .. })
    }
}

struct Flight {
    io: MemberIo,
    dev: usize,
    /// Where the I/O lands on the device (the member's data or log area).
    at: u64,
    /// Flushes: the device's mark when issued.
    mark: Option<u64>,
}

/// A metadata write or flush in flight: part of the step the array's metadata handed out.
struct MetaFlight {
    op: MetaOp,
    dev: usize,
    /// Flushes: the device's mark when issued.
    mark: Option<u64>,
}

/// What completes next in virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queued {
    Engine(IoId),
    Metadata(u64),
}

#[derive(Debug, Clone, Copy)]
enum Verify {
    AfterResync,
    AfterRebuild,
}

struct Workload {
    target: u64,
    submitted: u64,
    max_inflight: usize,
    mean_gap: u64,
    next_arrival: u64,
    read: u64,
    write: u64,
    flush: u64,
    discard: u64,
}

/// The `split` read policy's knobs scaled to the simulated members (64-256 KiB): windows of a
/// few rows and read-ahead of a few windows, so streams are followed and read ahead while
/// writes, faults and crashes go on.
const SIM_SPLIT: SplitTuning = SplitTuning { window_bytes: 8192, readahead_bytes: 48 * 1024, divide_bytes: 16 * 1024 };

fn configure_reads(array: &mut Engine, policy: ReadPolicy) {
    array.set_read_policy(policy);
    array.set_split_tuning(SIM_SPLIT);
}

/// The on-disk format a run's members are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SimFormat {
    Md,
    Vinum,
    Raidframe,
}

pub struct Sim {
    cfg: Config,
    geometry: Geometry,
    /// Parity anywhere in the array (its own, or a raid5 plex's in a mirror of arrays): parity
    /// a crash may leave stale.
    parity: bool,
    redundant: bool,
    mode: Mode,
    rng: SimRng,
    frng: SimRng,
    crng: SimRng,
    devices: Vec<SimDisk>,
    /// Bytes of every device (metadata and data).
    disk_bytes: u64,
    /// md's partial parity log, when this parity array keeps one.
    ppl: Option<PplConfig>,
    latency: Vec<u64>,
    /// Per device: its latent errors were all rewritten while requests up to this id were in
    /// flight. Those requests may still hold it as a copy that failed them (the engine does not
    /// read such a copy again), so it counts as compromised until they are done.
    cleared_while: Vec<Option<RequestId>>,
    /// Devices that joined a slot to be rebuilt (spares, or members assembled as rebuilding)
    /// since the last assembly. Once the rebuild is recorded the engine takes them as in sync at
    /// once, but the members' superblocks say so only when `rebuilt_unrecorded` is durable: a
    /// crash before that assembles them as rebuilding again, so until then they count as
    /// compromised.
    rebuilding: std::collections::BTreeSet<usize>,
    /// The devices the last rebuilds recorded made in sync, and the metadata that says so,
    /// while it may not be durable yet.
    rebuilt_unrecorded: Option<(uraid_engine::metadata::Ticket, Vec<usize>)>,
    last_rid: RequestId,
    slow_chance: u64,
    /// Half the reads continue the previous one (mirrors under a policy other than md's, whose
    /// streams and read-ahead need sequential readers to show up at all).
    sequential_reads: bool,
    /// Where the next sequential read starts.
    read_cursor: u64,
    /// Client requests arrive in bursts submitted plugged, as the service takes them from its
    /// queue, and half the writes continue the previous one: the engine holds and merges
    /// writes into whole stripes (`Array::plug`), and the checks see that it loses nothing.
    /// A third of the seeds.
    plugged_bursts: bool,
    /// Where the next sequential write starts.
    write_cursor: u64,
    destage: bool,
    slot_dev: Vec<Option<usize>>,
    /// Per slot: where its member I/O lands on its device.
    targets: Vec<Option<MemberTarget>>,
    /// Every device that ever joined the array, in the order assembly gets them.
    joined: Vec<usize>,
    /// Spares added while a member failure held the partial parity log: they wait, as spares,
    /// for the failure to be recorded, then take the empty slots (`spares_join`).
    waiting_spares: Vec<usize>,
    /// The array as `uraid` runs it: the engine, and md's metadata (or gvinum's), deferred to
    /// the run.
    open: OpenArray,
    /// What the members are: md members, gvinum drives holding one volume, or the components
    /// of a RAIDframe set.
    format: SimFormat,
    meta: metadata::MetaRun,
    model: Model,
    now: u64,
    seq: u64,
    queue: BTreeMap<(u64, u64), Queued>,
    ios: BTreeMap<IoId, Flight>,
    meta_ios: BTreeMap<u64, MetaFlight>,
    reqs: BTreeMap<RequestId, Pending>,
    inflight_writes: BTreeMap<WriteId, (u64, u64)>,
    client_inflight: usize,
    w: Workload,
    plan: Vec<Fault>,
    events: u64,
    /// The array owes a resync (as its metadata says).
    needs_resync: bool,
    /// The service's policy, and how it is set up for this run.
    policy: ArrayPolicy,
    policy_config: PolicyConfig,
    spares: bool,
    spare_countdown: Option<u64>,
    /// RAIDframe: devices added as hot spares (a column one serves may be copied back).
    spare_devs: std::collections::BTreeSet<usize>,
    /// RAIDframe: whether this run's copyback was decided on (once a run).
    copyback_decided: bool,
    verify: Vec<Verify>,
    internal: Option<Result<Completion, EngineError>>,
    last_flush: Option<FlushToken>,
    ended: Option<String>,
    report: Report,
}

fn op_len(op: &MemberOp) -> u64 {
    match op {
        MemberOp::Read { len } | MemberOp::Discard { len } => *len,
        MemberOp::Write { data } => data.len() as u64,
        MemberOp::LogWrite { data } => data.len() as u64,
        MemberOp::MetadataWrite { data } => data.len() as u64,
        MemberOp::Flush => 0,
    }
}

fn op_name(op: &MemberOp) -> &'static str {
    match op {
        MemberOp::Read { .. } => "read",
        MemberOp::Write { .. } => "write",
        MemberOp::Flush => "flush",
        MemberOp::Discard { .. } => "discard",
        MemberOp::LogWrite { .. } => "log write",
        MemberOp::MetadataWrite { .. } => "metadata write",
    }
}

fn result_name(r: &Result<Completion, EngineError>) -> String {
    match r {
        Ok(Completion::Read(d)) => format!("read {} bytes", d.len()),
        Ok(Completion::Synced { mismatch_sectors }) => format!("synced ({mismatch_sectors} mismatched sectors)"),
        Ok(other) => format!("{other:?}").to_lowercase(),
        Err(e) => format!("error: {e}"),
    }
}

impl Sim {
    fn emit_trace(&self, line: String) {
        eprintln!("[{:>10.3} ms #{:<6}] {line}", self.now as f64 / 1e6, self.events);
    }

    fn fingerprint(&mut self, v: u64) {
        self.report.fingerprint = (self.report.fingerprint ^ v).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(5);
    }

    fn fail(&self, invariant: Invariant, detail: String) -> Failure {
        Failure {
            config: self.cfg.clone(),
            invariant,
            detail: format!("{detail}\n  state: {}", self.state_summary()),
            time: self.now,
            event: self.events,
            explained_by_write_hole: false,
        }
    }

    fn state_summary(&self) -> String {
        let slots: Vec<String> = (0..self.slot_dev.len())
            .map(|s| {
                let state = self.open.engine().slot_states()[s];
                let dev = match self.slot_dev[s] {
                    None => "no device".to_string(),
                    Some(d) => {
                        let dev = &self.devices[d];
                        let mut notes = Vec::new();
                        if dev.dead {
                            notes.push("dead");
                        }
                        if dev.has_bad_sectors() {
                            notes.push("latent errors");
                        }

                        format!(
                            "d{d}{}",
                            if notes.is_empty() { String::new() } else { format!(" {}", notes.join(",")) }
                        )
                    }
                };
                format!("{s}: {state} ({dev})")
            })
            .collect();
        format!(
            "mode {:?}, {} crash(es), resync {}, slots [{}]",
            self.mode,
            self.report.crashes,
            if self.needs_resync { "pending" } else { "done" },
            slots.join("; ")
        )
    }
}

/// Run one configuration to its end.
pub fn run(cfg: &Config) -> Result<Report, Failure> {
    Sim::new(cfg.clone())?.run()
}
