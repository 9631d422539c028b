//! `Sim`: one seeded run of the real engine over simulated members, in virtual time.
//!
//! What it owns: the discrete-event loop (member I/O completions at per-member latencies, client
//! arrivals), the workload, the fault injector, the crash and reassembly cycle, the background
//! jobs (resync after a crash, recovery onto spares) and the checks against the [`Model`].
//! Everything random comes from the seed; nothing depends on the wall clock or on hash order.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use uraid_engine::array::{
    Array, Completion, EngineEvent, IoId, IoResult, MemberIo, MemberOp, Request, RequestId, SlotState,
};
use uraid_engine::blocking::execute;
use uraid_engine::ppl::{latest_header, replay, PplConfig, ReplayIo, ReplayReport};
use uraid_engine::read_balance::SplitTuning;
use uraid_engine::{EngineError, Geometry, ReadPolicy};
use uraid_format::ppl::PplHeader;

use crate::disk::{SimDisk, SECTOR};
use crate::geometries;
use crate::model::{Expect, FlushToken, Mismatch, Model, WriteId};
use crate::rng::SimRng;

/// Which scenario a run plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// The default: faults within the level's redundancy (or, for some seeds, beyond it, where
    /// only "errors are reported, never wrong data" is checked).
    Standard,
    /// A parity array crashes while degraded and is assembled anyway (md's
    /// `start_dirty_degraded`, or md's assembly with a partial parity log), then read. With the
    /// log (the default here) nothing outside the writes in flight may read back wrong; without
    /// it, this demonstrates the RAID-5/6 write hole.
    WriteHole,
}

/// Deliberate faults the engine cannot survive, to show the checker is not vacuous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// Change member bytes behind the engine's back.
    SilentCorruption,
    /// Kill one member more than the level survives, while still expecting success.
    ExtraDeath,
    /// Members acknowledge flushes without making anything durable, then a crash.
    LyingFlush,
}

impl Mutation {
    pub fn name(self) -> &'static str {
        match self {
            Mutation::SilentCorruption => "silent-corruption",
            Mutation::ExtraDeath => "extra-death",
            Mutation::LyingFlush => "lying-flush",
        }
    }

    pub fn parse(s: &str) -> Option<Mutation> {
        [Mutation::SilentCorruption, Mutation::ExtraDeath, Mutation::LyingFlush].into_iter().find(|m| m.name() == s)
    }
}

/// One run: a seed and a geometry name decide everything else.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: u64,
    pub geometry: String,
    pub scenario: Scenario,
    pub mutation: Option<Mutation>,
    /// Print every step to stderr.
    pub trace: bool,
    /// Turn off the guards that keep the fault injector away from known engine bugs (see
    /// [`crate::KNOWN_BUGS`]); `URAID_SIM_EXPOSE_KNOWN_BUGS=1`.
    pub expose_known_bugs: bool,
    /// Whether a parity array keeps md's partial parity log; `None`: the seed decides (always
    /// in the write-hole scenario). `URAID_SIM_PPL=0|1`.
    pub ppl: Option<bool>,
    /// How mirrors choose the copy a read goes to; `None`: the seed decides.
    /// `URAID_SIM_READ_POLICY=<name>`.
    pub read_policy: Option<ReadPolicy>,
}

impl Config {
    pub fn new(seed: u64, geometry: &str) -> Config {
        Config {
            seed,
            geometry: geometry.to_string(),
            scenario: Scenario::Standard,
            mutation: None,
            trace: false,
            expose_known_bugs: false,
            ppl: None,
            read_policy: None,
        }
    }

    /// The read policy of the run: as configured, else one the seed picks (from the seed
    /// itself, so the random sequences of runs are what they were before policies existed).
    pub fn read_policy(&self) -> ReadPolicy {
        self.read_policy.unwrap_or_else(|| {
            let mut z = self.seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ReadPolicy::ALL[((z ^ (z >> 31)) % ReadPolicy::ALL.len() as u64) as usize]
        })
    }

    /// The one-line command that replays this run with a step-by-step trace.
    pub fn replay_command(&self) -> String {
        let mut env = format!("URAID_SIM_SEED={} URAID_SIM_GEOMETRY={}", self.seed, self.geometry);
        if self.scenario == Scenario::WriteHole {
            env.push_str(" URAID_SIM_WRITE_HOLE=1");
        }
        if let Some(m) = self.mutation {
            env.push_str(&format!(" URAID_SIM_MUTATION={}", m.name()));
        }
        if self.expose_known_bugs {
            env.push_str(" URAID_SIM_EXPOSE_KNOWN_BUGS=1");
        }
        if let Some(ppl) = self.ppl {
            env.push_str(&format!(" URAID_SIM_PPL={}", u8::from(ppl)));
        }
        if let Some(policy) = self.read_policy {
            env.push_str(&format!(" URAID_SIM_READ_POLICY={policy}"));
        }
        format!("{env} cargo test -p uraid-fault-sim --test campaign replay -- --nocapture")
    }
}

/// Whether the run keeps its faults within the level's redundancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Within redundancy: every request must succeed and return the model's data.
    Normal,
    /// Beyond it: requests may fail, but nothing that succeeds may return wrong data.
    Overload,
}

/// The rule a failing run broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invariant {
    /// (1) A read returned bytes the model does not allow.
    WrongData,
    /// (2) A write acknowledged before a completed flush was lost in a crash.
    LostDurableWrite,
    /// (3) A check (`Sync{repair:false}`) found mismatches where redundancy must be consistent.
    Inconsistent,
    /// (4) A fresh array over a survivable subset of the members read something else.
    DegradedReadDiffers,
    /// A request failed although the failures stayed within the level's redundancy.
    RequestFailed,
    /// The engine broke its contract with the driver (I/O to an empty slot or past a member's
    /// end, a read of a recovering member, a healthy member failed, a valid request refused).
    Protocol,
    /// Requests in flight and nothing left that could finish them.
    Stalled,
    /// The engine (or the simulation) panicked.
    Panic,
    /// The run could not start (unknown geometry, scenario not applicable).
    Setup,
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Invariant::WrongData => "(1) a read returned data the model does not allow",
            Invariant::LostDurableWrite => "(2) a flushed write was lost in a crash",
            Invariant::Inconsistent => "(3) a check found inconsistent redundancy",
            Invariant::DegradedReadDiffers => "(4) a survivable subset of members reads different data",
            Invariant::RequestFailed => "a request failed within the level's redundancy",
            Invariant::Protocol => "the engine broke the driver protocol",
            Invariant::Stalled => "the engine stalled",
            Invariant::Panic => "panic",
            Invariant::Setup => "the run could not be set up",
        })
    }
}

/// A failing run: what broke, where, and how to replay it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub config: Config,
    pub invariant: Invariant,
    pub detail: String,
    /// Virtual time (ns) and event count when it was detected.
    pub time: u64,
    pub event: u64,
    /// For the write-hole scenario: every wrong sector lies in a stripe that had writes not yet
    /// flushed at the crash (the hole itself, not another bug).
    pub explained_by_write_hole: bool,
}

impl Failure {
    pub fn replay_command(&self) -> String {
        self.config.replay_command()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "uraid-sim: {}\n  geometry {}, seed {}, at virtual time {:.3} ms (event {})\n  {}\nreplay: {}",
            self.invariant,
            self.config.geometry,
            self.config.seed,
            self.time as f64 / 1e6,
            self.event,
            self.detail,
            self.replay_command()
        )
    }
}

/// What a passing run did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub seed: u64,
    pub geometry: String,
    pub description: String,
    pub overload: bool,
    pub ops: u64,
    pub member_ios: u64,
    pub crashes: u32,
    /// Ended at a crash while a parity array was degraded: md refuses to assemble it.
    pub refused: bool,
    pub resyncs: u32,
    pub rebuilds: u32,
    pub spares_added: u32,
    pub deaths: u32,
    pub latent_errors: u32,
    pub write_errors: u32,
    pub operator_fails: u32,
    pub corruptions: u32,
    /// Corrupted bytes still in place at the end on members of the array (none was rewritten):
    /// a run that passes with any is a checker that missed them.
    pub standing_corruptions: u32,
    pub members_failed: u32,
    pub read_errors_corrected: u32,
    /// Members failed because a rewrite after a read error covered only part of a bad sector.
    pub partial_sector_kicks: u32,
    pub subset_reads: u32,
    pub requests_failed: u32,
    /// The array kept md's partial parity log.
    pub ppl: bool,
    /// Log entries replayed after crashes.
    pub log_entries_replayed: u64,
    pub virtual_ns: u64,
    /// A hash of every I/O and completion: equal for equal runs.
    pub fingerprint: u64,
    pub end: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FaultKind {
    Death,
    Latent,
    WriteError,
    OperatorFail,
    Crash,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobKind {
    Resync,
    Recovery,
}

#[derive(Debug)]
struct Job {
    kind: JobKind,
    pos: u64,
    end: u64,
    inflight: Option<RequestId>,
    flushing: bool,
    /// Recovery: the slots being rebuilt.
    targets: Vec<usize>,
}

enum Pending {
    Read { expect: Expect, prior: Vec<WriteId> },
    Write { wid: WriteId },
    Flush { token: FlushToken, job: Option<JobKind> },
    Scrub,
    Step { job: JobKind, offset: u64, len: u64 },
    Internal,
}

impl Pending {
    fn is_client(&self) -> bool {
        matches!(self, Pending::Read { .. } | Pending::Write { .. } | Pending::Scrub | Pending::Flush { job: None, .. })
    }
}

struct Flight {
    io: MemberIo,
    dev: usize,
    /// Flushes: the device's mark when issued.
    mark: Option<u64>,
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

fn configure_reads(array: &mut Array, policy: ReadPolicy) {
    array.set_read_policy(policy);
    array.set_split_tuning(SIM_SPLIT);
}

/// Give up on a run this long (a livelock guard; runs take a few thousand events).
const MAX_EVENTS: u64 = 3_000_000;

macro_rules! trace {
    ($sim:expr, $($arg:tt)*) => {
        if $sim.cfg.trace {
            $sim.emit_trace(format!($($arg)*));
        }
    };
}

pub struct Sim {
    cfg: Config,
    geometry: Geometry,
    parity: bool,
    redundant: bool,
    mode: Mode,
    rng: SimRng,
    frng: SimRng,
    crng: SimRng,
    device_bytes: u64,
    devices: Vec<SimDisk>,
    /// md's partial parity log, when this parity array keeps one.
    ppl: Option<PplConfig>,
    latency: Vec<u64>,
    /// Per device: its latent errors were all rewritten while requests up to this id were in
    /// flight. Those requests may still hold it as a copy that failed them (the engine does not
    /// read such a copy again), so it counts as compromised until they are done.
    cleared_while: Vec<Option<RequestId>>,
    last_rid: RequestId,
    slow_chance: u64,
    /// Half the reads continue the previous one (mirrors under a policy other than md's, whose
    /// streams and read-ahead need sequential readers to show up at all).
    sequential_reads: bool,
    /// Where the next sequential read starts.
    read_cursor: u64,
    destage: bool,
    slot_dev: Vec<Option<usize>>,
    /// What the superblocks say: the slot's device is a trusted in-sync member.
    trusted: Vec<bool>,
    array: Array,
    model: Model,
    now: u64,
    seq: u64,
    queue: BTreeMap<(u64, u64), IoId>,
    ios: BTreeMap<IoId, Flight>,
    reqs: BTreeMap<RequestId, Pending>,
    inflight_writes: BTreeMap<WriteId, (u64, u64)>,
    client_inflight: usize,
    w: Workload,
    plan: Vec<Fault>,
    events: u64,
    recovery: Option<Job>,
    resync: Option<Job>,
    needs_resync: bool,
    /// The engine refused to resync this degraded mirror; wait until it is whole.
    resync_refused: bool,
    spares: bool,
    spare_countdown: Option<u64>,
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
    }
}

/// A log area as md leaves it when it starts an array: an empty header, then zeros.
fn empty_log(config: &PplConfig) -> Vec<u8> {
    let mut area = vec![0u8; config.area_bytes as usize];
    let header = PplHeader::empty(config.signature).to_bytes();
    area[..header.len()].copy_from_slice(&header);
    area
}

/// Log replay over the simulated members.
struct SimReplayIo<'a> {
    devices: &'a mut [SimDisk],
    slot_dev: &'a [Option<usize>],
}

impl ReplayIo for SimReplayIo<'_> {
    fn read(&mut self, slot: usize, offset: u64, len: u64) -> Result<Vec<u8>, String> {
        let d = self.slot_dev[slot].ok_or("empty slot")?;
        self.devices[d].read(offset, len)
    }

    fn write(&mut self, slot: usize, offset: u64, data: &[u8]) -> Result<(), String> {
        let d = self.slot_dev[slot].ok_or("empty slot")?;
        self.devices[d].write(offset, data)
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
    pub fn new(cfg: Config) -> Result<Sim, Failure> {
        let setup = |cfg: &Config, detail: String| Failure {
            config: cfg.clone(),
            invariant: Invariant::Setup,
            detail,
            time: 0,
            event: 0,
            explained_by_write_hole: false,
        };
        let mut rng = SimRng::new(cfg.seed);
        let built = geometries::build(&cfg.geometry, &mut rng).map_err(|e| setup(&cfg, e))?;
        let geometry = built.geometry;
        let n = geometry.raid_disks();
        let parity = geometry.parity().is_some();
        let redundant = geometry.max_degraded() > 0;
        if cfg.scenario == Scenario::WriteHole && !parity {
            return Err(setup(
                &cfg,
                format!("the write-hole scenario needs a raid4/5/6 geometry, not {}", cfg.geometry),
            ));
        }
        let frng = rng.fork();
        let crng = rng.fork();
        let mut array =
            Array::new(geometry.clone(), vec![SlotState::InSync; n]).map_err(|e| setup(&cfg, e.to_string()))?;
        configure_reads(&mut array, cfg.read_policy());
        // The log's own generator, so runs without it keep their sequence of events.
        let mut lrng = rng.fork();
        let want_ppl = match cfg.ppl {
            Some(v) => v,
            None => cfg.scenario == Scenario::WriteHole || lrng.chance(1, 2),
        };
        let ppl = (parity && want_ppl && geometry.chunk_bytes() % uraid_engine::ppl::ROW_BYTES == 0).then(|| {
            // Small areas too, so stripe writes get split and log writes queue.
            let rows = lrng.pick(&[2u64, 4, 8, 32, 256]);
            PplConfig { signature: lrng.next_u64() as u32, area_bytes: 4096 + rows * 8192 }
        });
        if let Some(config) = &ppl {
            array.enable_ppl(config.clone());
        }
        let size = array.size_bytes();
        let mode = if cfg.scenario == Scenario::Standard && cfg.mutation.is_none() && rng.chance(1, 8) {
            Mode::Overload
        } else {
            Mode::Normal
        };
        let slow_chance = rng.pick(&[0u64, 0, 1, 2]);
        let cfg_sequential_reads =
            cfg.read_policy() != ReadPolicy::Md && matches!(geometry, Geometry::Raid1(_) | Geometry::Raid10(_));
        let mut sim = Sim {
            report: Report {
                seed: cfg.seed,
                geometry: cfg.geometry.clone(),
                description: format!("{}, read policy {}", built.description, cfg.read_policy()),
                overload: mode == Mode::Overload,
                ppl: ppl.is_some(),
                ..Report::default()
            },
            destage: cfg.mutation != Some(Mutation::LyingFlush),
            cfg,
            geometry,
            parity,
            redundant,
            mode,
            rng,
            frng,
            crng,
            device_bytes: built.device_bytes,
            devices: Vec::new(),
            ppl,
            latency: Vec::new(),
            cleared_while: Vec::new(),
            last_rid: 0,
            slow_chance,
            sequential_reads: cfg_sequential_reads,
            read_cursor: 0,
            slot_dev: (0..n).map(Some).collect(),
            trusted: vec![true; n],
            array,
            model: Model::new(size),
            now: 0,
            seq: 0,
            queue: BTreeMap::new(),
            ios: BTreeMap::new(),
            reqs: BTreeMap::new(),
            inflight_writes: BTreeMap::new(),
            client_inflight: 0,
            w: Workload {
                target: 0,
                submitted: 0,
                max_inflight: 1,
                mean_gap: 1,
                next_arrival: 0,
                read: 0,
                write: 0,
                flush: 0,
                discard: 0,
            },
            plan: Vec::new(),
            events: 0,
            recovery: None,
            resync: None,
            needs_resync: false,
            resync_refused: false,
            spares: false,
            spare_countdown: None,
            verify: Vec::new(),
            internal: None,
            last_flush: None,
            ended: None,
        };
        for _ in 0..n {
            sim.new_device();
        }
        sim.plan_workload();
        sim.plan_faults();
        Ok(sim)
    }

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
                let state = self.array.slot_states()[s];
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
                        if dev.unsynced_spare {
                            notes.push("spare");
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

    fn new_device(&mut self) -> usize {
        let id = self.devices.len();
        self.devices.push(SimDisk::new(id, self.device_bytes));
        if let Some(config) = &self.ppl {
            self.devices[id].ppl_area = empty_log(config);
        }
        let mut base = self.rng.between(20_000, 200_000);
        if self.slow_chance > 0 && self.rng.chance(self.slow_chance, 6) {
            base *= self.rng.between(10, 60);
        }
        if self.cfg.mutation == Some(Mutation::LyingFlush) {
            self.devices[id].lying_flush = true;
        }
        self.latency.push(base);
        self.cleared_while.push(None);
        id
    }

    fn plan_workload(&mut self) {
        let r = &mut self.rng;
        let write_hole = self.cfg.scenario == Scenario::WriteHole;
        self.w.target = r.between(30, 160);
        self.w.max_inflight = if write_hole { r.pick(&[8, 16, 24]) } else { r.pick(&[1, 2, 4, 8, 16, 24]) };
        self.w.mean_gap = r.between(5_000, 400_000);
        let (read, flush, discard) = if write_hole {
            (10, 3, 0)
        } else if self.cfg.mutation == Some(Mutation::LyingFlush) {
            (r.between(10, 30), r.between(10, 20), r.between(0, 4))
        } else {
            (r.between(15, 50), r.between(2, 12), r.between(0, 6))
        };
        let scrub = if self.redundant { 2 } else { 0 };
        // A logged array takes no discards (the service writes zeroes instead).
        let discard = if self.ppl.is_some() { 0 } else { discard };
        self.w.read = read;
        self.w.write = 100 - read - flush - discard - scrub;
        self.w.flush = flush;
        self.w.discard = discard;
    }

    fn plan_faults(&mut self) {
        let ops = self.w.target;
        let max_deg = self.geometry.max_degraded() as u64;
        let mut faults: Vec<(u64, FaultKind)> = Vec::new();
        let r = &mut self.frng;
        // When, in percent of the workload's requests.
        let at = |r: &mut SimRng, lo: u64, hi: u64| r.between(ops * lo / 100, ops * hi / 100);
        match (self.cfg.scenario, self.cfg.mutation, self.mode) {
            (Scenario::WriteHole, _, _) => {
                faults.push((at(r, 2, 15), FaultKind::Death));
                faults.push((at(r, 20, 90), FaultKind::Crash));
            }
            (_, Some(Mutation::SilentCorruption), _) => {
                // Late, so that the workload rarely overwrites it before a check can see it.
                for _ in 0..r.between(1, 3) {
                    faults.push((at(r, 85, 100), FaultKind::Corrupt));
                }
            }
            (_, Some(Mutation::ExtraDeath), _) => {
                for _ in 0..=max_deg {
                    faults.push((at(r, 5, 60), FaultKind::Death));
                }
            }
            (_, Some(Mutation::LyingFlush), _) => faults.push((at(r, 60, 95), FaultKind::Crash)),
            (_, None, Mode::Overload) => {
                for _ in 0..r.below(max_deg + 2) {
                    faults.push((at(r, 5, 90), FaultKind::Death));
                }
                for _ in 0..r.between(1, 6) {
                    faults.push((at(r, 0, 90), FaultKind::Latent));
                }
                for _ in 0..r.below(3) {
                    faults.push((at(r, 5, 90), FaultKind::WriteError));
                }
            }
            (_, None, Mode::Normal) => {
                if self.redundant {
                    for _ in 0..r.below(max_deg.min(2) + 1) {
                        faults.push((at(r, 5, 90), FaultKind::Death));
                    }
                    for _ in 0..r.below(4) {
                        faults.push((at(r, 0, 90), FaultKind::Latent));
                    }
                    if r.chance(1, 3) {
                        faults.push((at(r, 5, 90), FaultKind::WriteError));
                    }
                    if r.chance(1, 6) {
                        faults.push((at(r, 5, 90), FaultKind::OperatorFail));
                    }
                    self.spares = r.chance(2, 3);
                }
                let crashes = match r.below(6) {
                    0..=2 => 0,
                    3 | 4 => 1,
                    _ => 2,
                };
                for _ in 0..crashes {
                    faults.push((at(r, 10, 95), FaultKind::Crash));
                }
            }
        }
        faults.sort_by_key(|f| f.0);
        self.plan = faults
            .into_iter()
            .map(|(at_op, kind)| Fault { at_op, delay: self.frng.between(0, 40), at: None, kind, tries: 0 })
            .collect();
    }

    /// Play the run to its end.
    pub fn run(mut self) -> Result<Report, Failure> {
        trace!(self, "seed {} {}", self.cfg.seed, self.report.description);
        trace!(
            self,
            "mode {:?}; workload {} ops, up to {} in flight, mean gap {} us, {}% reads {}% writes {}% flushes {}% discards; spares {}",
            self.mode,
            self.w.target,
            self.w.max_inflight,
            self.w.mean_gap / 1000,
            self.w.read,
            self.w.write,
            self.w.flush,
            self.w.discard,
            self.spares
        );
        for f in self.plan.clone() {
            trace!(self, "planned fault {:?} after request {} + {} events", f.kind, f.at_op, f.delay);
        }
        for d in 0..self.devices.len() {
            trace!(self, "device d{d}: base latency {} us", self.latency[d] / 1000);
        }
        let mut idle_passes = 0u64;
        loop {
            self.pump()?;
            if self.ended.is_some() {
                break;
            }
            if let Some(v) = self.verify.pop() {
                self.quiesce()?;
                self.do_verify(v)?;
                continue;
            }
            self.fire_faults()?;
            if self.ended.is_some() {
                break;
            }
            self.drive_jobs()?;
            self.pump()?;
            if self.ended.is_some() {
                break;
            }
            if !self.verify.is_empty() {
                continue;
            }
            let t_io = self.queue.first_key_value().map(|(k, _)| k.0);
            let ops_left = self.w.submitted < self.w.target;
            let t_arr = (ops_left && self.client_inflight < self.w.max_inflight).then_some(self.w.next_arrival);
            let arrival = match (t_io, t_arr) {
                (None, None) => {
                    if !self.reqs.is_empty() {
                        return Err(self.stalled());
                    }
                    if self.spare_countdown.is_some() {
                        self.spare_countdown = Some(0);
                        continue;
                    }
                    if !self.plan.is_empty() {
                        self.fire_leftover_faults()?;
                        continue;
                    }
                    if self.recovery.is_some() || self.resync.is_some() {
                        // A job between two steps: the next pass submits its next step.
                        idle_passes += 1;
                        if idle_passes > 10_000 {
                            return Err(self.fail(Invariant::Stalled, "a background job makes no progress".into()));
                        }
                        continue;
                    }
                    break;
                }
                (Some(t), Some(a)) => a <= t,
                (None, Some(_)) => true,
                (Some(_), None) => false,
            };
            idle_passes = 0;
            self.events += 1;
            if self.events > MAX_EVENTS {
                return Err(self.fail(Invariant::Stalled, format!("still running after {MAX_EVENTS} events")));
            }
            if let Some(c) = &mut self.spare_countdown {
                *c = c.saturating_sub(1);
            }
            if arrival {
                self.now = self.now.max(self.w.next_arrival);
                self.w.next_arrival = self.now + self.gap();
                self.submit_client_op()?;
            } else {
                let ((t, _), id) = self.queue.pop_first().expect("checked above");
                self.now = t;
                self.complete_member_io(id)?;
            }
        }
        if self.ended.is_none() {
            self.final_checks()?;
            self.report.end = "workload done, final checks passed".into();
        } else {
            self.report.end = self.ended.clone().unwrap_or_default();
        }
        self.report.ops = self.w.submitted;
        self.report.virtual_ns = self.now;
        self.report.standing_corruptions =
            self.slot_dev.iter().flatten().map(|&d| self.devices[d].standing_corruptions() as u32).sum();
        trace!(self, "end: {}", self.report.end);
        Ok(self.report)
    }

    fn gap(&mut self) -> u64 {
        self.rng.between(0, 2 * self.w.mean_gap)
    }

    fn stalled(&self) -> Failure {
        let waiting: Vec<String> = self.reqs.keys().map(|r| format!("#{r}")).collect();
        self.fail(
            Invariant::Stalled,
            format!(
                "requests {} are unfinished and the engine has no member I/O outstanding or to issue",
                waiting.join(" ")
            ),
        )
    }

    fn end(&mut self, why: String) {
        trace!(self, "scenario ends: {why}");
        self.ended = Some(why);
    }

    // ----- the engine's outputs ---------------------------------------------------------------

    /// Hand every member I/O the engine has to the scheduler and every finished request to the
    /// checker, until the engine has nothing more to say.
    fn pump(&mut self) -> Result<(), Failure> {
        loop {
            let mut progressed = false;
            while let Some(io) = self.array.next_io() {
                self.schedule(io)?;
                progressed = true;
            }
            for ev in self.array.take_events() {
                self.on_event(ev)?;
            }
            while let Some((rid, result)) = self.array.next_completion() {
                self.on_completion(rid, result)?;
                progressed = true;
                if self.ended.is_some() {
                    return Ok(());
                }
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    fn schedule(&mut self, io: MemberIo) -> Result<(), Failure> {
        let len = op_len(&io.op);
        let Some(dev) = self.slot_dev.get(io.slot).copied().flatten() else {
            return Err(self.fail(
                Invariant::Protocol,
                format!(
                    "member {} of slot {} at {}+{len}, but the slot holds no device",
                    op_name(&io.op),
                    io.slot,
                    io.offset
                ),
            ));
        };
        let in_range = match io.op {
            MemberOp::LogWrite { .. } => {
                io.offset.checked_add(len).is_some_and(|end| end <= self.devices[dev].ppl_area.len() as u64)
            }
            _ => self.devices[dev].in_range(io.offset, len),
        };
        if !in_range {
            return Err(self.fail(
                Invariant::Protocol,
                format!(
                    "member {} of slot {} at {}+{len} goes past the member's end ({} bytes)",
                    op_name(&io.op),
                    io.slot,
                    io.offset,
                    self.devices[dev].len()
                ),
            ));
        }
        if matches!(io.op, MemberOp::Read { .. }) && self.array.slot_states()[io.slot] == SlotState::Recovering {
            return Err(self.fail(
                Invariant::Protocol,
                format!(
                    "member read of slot {} at {}+{len}, which is recovering and must not be read",
                    io.slot, io.offset
                ),
            ));
        }
        let base = self.latency[dev];
        let mut latency = match io.op {
            MemberOp::Flush => base * 2 + self.rng.between(0, base * 3),
            _ => base / 2 + self.rng.between(0, base) + len * 2,
        };
        if self.rng.chance(1, 50) {
            latency *= 10;
        }
        let done_at = self.now + latency;
        self.queue.insert((done_at, self.seq), io.id);
        self.seq += 1;
        let mark = matches!(io.op, MemberOp::Flush).then(|| self.devices[dev].flush_mark());
        trace!(
            self,
            "  io {} issue {} slot {} (d{dev}) {}+{len}, done at {:.3} ms",
            io.id,
            op_name(&io.op),
            io.slot,
            io.offset,
            done_at as f64 / 1e6
        );
        self.fingerprint(io.id ^ (io.slot as u64) << 56 ^ io.offset << 8 ^ len << 32 ^ done_at);
        self.ios.insert(io.id, Flight { io, dev, mark });
        Ok(())
    }

    fn complete_member_io(&mut self, id: IoId) -> Result<(), Failure> {
        let f = self.ios.remove(&id).expect("a scheduled I/O");
        let destage = self.destage && self.frng.chance(1, 16);
        let destage_count = self.frng.between(1, 4) as usize;
        let had_bad = self.devices[f.dev].has_bad_sectors();
        let d = &mut self.devices[f.dev];
        let off = f.io.offset;
        let result = if d.dead {
            IoResult::Failed("member is dead".into())
        } else {
            match &f.io.op {
                MemberOp::Read { len } => match d.read(off, *len) {
                    Ok(data) => IoResult::Read(data.into()),
                    Err(e) => IoResult::Failed(e),
                },
                MemberOp::Write { data } => match d.write(off, &data.to_vec()) {
                    Ok(()) => IoResult::Done,
                    Err(e) => IoResult::Failed(e),
                },
                MemberOp::Flush => {
                    d.flush_done(f.mark.expect("flushes carry a mark"));
                    IoResult::Done
                }
                MemberOp::Discard { len } => match d.discard(off, *len) {
                    Ok(()) => IoResult::Done,
                    Err(e) => IoResult::Failed(e),
                },
                MemberOp::LogWrite { data } => match d.write_log(off, data) {
                    Ok(()) => IoResult::Done,
                    Err(e) => IoResult::Failed(e),
                },
            }
        };
        if destage && !d.dead {
            d.destage(destage_count);
        }
        if had_bad && !d.has_bad_sectors() {
            self.cleared_while[f.dev] = Some(self.last_rid);
        }
        let outcome = match &result {
            IoResult::Read(_) | IoResult::Done | IoResult::Written(_) => "ok".to_string(),
            IoResult::Failed(e) => format!("FAILED: {e}"),
        };
        trace!(
            self,
            "  io {id} done {} slot {} (d{}) {}+{}: {outcome}",
            op_name(&f.io.op),
            f.io.slot,
            f.dev,
            off,
            op_len(&f.io.op)
        );
        self.fingerprint(id.wrapping_mul(31) ^ u64::from(matches!(result, IoResult::Failed(_))));
        self.report.member_ios += 1;
        self.array.complete_io(id, result);
        Ok(())
    }

    fn on_event(&mut self, ev: EngineEvent) -> Result<(), Failure> {
        match ev {
            EngineEvent::MemberFailed { slot, reason } => {
                trace!(self, "event: slot {slot} failed: {reason}");
                self.trusted[slot] = false;
                self.report.members_failed += 1;
                if reason.contains("covers only part of unreadable sector") {
                    self.report.partial_sector_kicks += 1;
                }
                let explained = self.slot_dev[slot].is_some_and(|d| self.devices[d].faulted);
                if !explained {
                    return Err(self.fail(
                        Invariant::Protocol,
                        format!("the engine failed slot {slot}, whose device had no fault injected: {reason}"),
                    ));
                }
            }
            EngineEvent::ReadErrorCorrected { slot, offset, len } => {
                trace!(self, "event: slot {slot} read error at {offset}+{len} corrected");
                self.report.read_errors_corrected += 1;
            }
        }
        Ok(())
    }

    fn request_error(&mut self, what: String, e: EngineError) -> Result<(), Failure> {
        self.report.requests_failed += 1;
        trace!(self, "{what} failed: {e}");
        if self.mode == Mode::Normal {
            return Err(self.fail(
                Invariant::RequestFailed,
                format!("{what} failed ({e}) although the injected failures stay within the level's redundancy"),
            ));
        }
        Ok(())
    }

    fn mismatch_failure(&self, m: Mismatch, what: &str) -> Failure {
        let invariant = if m.lost_durable.is_some() { Invariant::LostDurableWrite } else { Invariant::WrongData };
        self.fail(invariant, format!("{what}: {}\n  {}", m.describe(), self.locate(m.offset)))
    }

    /// Where logical byte `logical` lives, and the first bytes of its sector on each copy.
    fn locate(&self, logical: u64) -> String {
        let sector = logical / SECTOR * SECTOR;
        let places: Vec<(usize, u64)> = match &self.geometry {
            Geometry::Parity(_) => {
                let run = &self.geometry.parity_runs(sector, 1)[0];
                vec![(run.slot, run.stripe * self.geometry.chunk_bytes() + run.chunk_offset)]
            }
            _ => self.geometry.runs(sector, 1)[0].copies.to_vec(),
        };
        let shown: Vec<String> = places
            .iter()
            .map(|&(slot, off)| match self.slot_dev[slot] {
                None => format!("slot {slot} at {off}: no device"),
                Some(d) => {
                    let bytes = self.devices[d].peek(off, 8);
                    format!("slot {slot} (d{d}) at member byte {off}: {bytes:02x?}")
                }
            })
            .collect();
        format!("the sector's copies: {}", shown.join("; "))
    }

    fn on_completion(&mut self, rid: RequestId, result: Result<Completion, EngineError>) -> Result<(), Failure> {
        let Some(p) = self.reqs.remove(&rid) else {
            return Err(self.fail(Invariant::Protocol, format!("completion of request #{rid}, which is not in flight")));
        };
        trace!(self, "request #{rid} done: {}", result_name(&result));
        self.fingerprint(rid.rotate_left(17) ^ u64::from(result.is_err()));
        if p.is_client() {
            self.client_inflight -= 1;
        }
        match p {
            Pending::Read { expect, prior } => match result {
                Ok(Completion::Read(data)) => {
                    let data = data.into_vec();
                    let what = format!("read #{rid} of {}+{}", expect.offset, expect.len);
                    if data.len() as u64 != expect.len {
                        return Err(self.fail(Invariant::WrongData, format!("{what} returned {} bytes", data.len())));
                    }
                    let masked: Vec<(u64, u64)> =
                        prior.iter().filter(|&&w| self.model.failed(w)).map(|&w| self.model.range(w)).collect();
                    if let Err(m) = self.model.check(&expect, &data, &masked) {
                        return Err(self.mismatch_failure(m, &what));
                    }
                }
                Ok(other) => return Err(self.fail(Invariant::Protocol, format!("read #{rid} completed as {other:?}"))),
                Err(e) => self.request_error(format!("read #{rid} of {}+{}", expect.offset, expect.len), e)?,
            },
            Pending::Write { wid } => {
                self.inflight_writes.remove(&wid);
                match result {
                    Ok(Completion::Written) => self.model.write_acked(wid),
                    Ok(other) => {
                        return Err(self.fail(Invariant::Protocol, format!("write #{rid} completed as {other:?}")))
                    }
                    Err(e) => {
                        self.model.write_failed(wid);
                        let (a, b) = self.model.range(wid);
                        self.request_error(format!("write #{rid} of {a}+{}", b - a), e)?;
                    }
                }
            }
            Pending::Flush { token, job } => match result {
                Ok(Completion::Flushed) => {
                    self.model.flush_done(token);
                    if self.last_flush.is_none_or(|t| t.0 < token.0) {
                        self.last_flush = Some(token);
                    }
                    match job {
                        Some(JobKind::Recovery) => self.recovery_done()?,
                        Some(JobKind::Resync) => self.resync_done(),
                        None => {}
                    }
                }
                Ok(other) => return Err(self.fail(Invariant::Protocol, format!("flush #{rid} completed as {other:?}"))),
                Err(e) => {
                    self.request_error(format!("flush #{rid}"), e)?;
                    match job {
                        Some(JobKind::Recovery) => self.recovery = None,
                        Some(JobKind::Resync) => self.resync = None,
                        None => {}
                    }
                }
            },
            Pending::Scrub => match result {
                Ok(Completion::Synced { mismatch_sectors: 0 }) => {}
                Ok(Completion::Synced { mismatch_sectors }) => {
                    if self.mode == Mode::Normal && !self.needs_resync {
                        return Err(self.fail(
                            Invariant::Inconsistent,
                            format!("check #{rid} found {mismatch_sectors} mismatched sectors on an array that needs no resync"),
                        ));
                    }
                }
                Ok(other) => return Err(self.fail(Invariant::Protocol, format!("check #{rid} completed as {other:?}"))),
                // A member failed while the check ran.
                Err(EngineError::DegradedCheck) if self.array.degraded() => {}
                Err(e) => self.request_error(format!("check #{rid}"), e)?,
            },
            Pending::Step { job, offset, len } => match result {
                Ok(Completion::Recovered) | Ok(Completion::Synced { .. }) => {
                    if let Some(j) = self.job_mut(job) {
                        j.pos = offset + len;
                        j.inflight = None;
                    }
                }
                Ok(other) => {
                    return Err(self.fail(Invariant::Protocol, format!("{job:?} step #{rid} completed as {other:?}")))
                }
                Err(EngineError::DegradedCheck) if job == JobKind::Resync && self.array.degraded() => {
                    // A member failed under the resync (or the engine does not resync a
                    // degraded array): it starts over once the array is whole.
                    trace!(self, "resync interrupted: the array is degraded");
                    self.resync = None;
                    self.resync_refused = true;
                    if self.parity && self.mode == Mode::Normal {
                        return Err(self.fail(
                            Invariant::RequestFailed,
                            "a parity array became degraded during its resync, which the fault plan never does".into(),
                        ));
                    }
                }
                Err(e) => {
                    *self.job_slot(job) = None;
                    self.request_error(format!("{job:?} step #{rid} over {offset}+{len}"), e)?;
                }
            },
            Pending::Internal => self.internal = Some(result),
        }
        Ok(())
    }

    // ----- the workload -----------------------------------------------------------------------

    fn pick_range(&mut self, size: u64) -> (u64, u64) {
        let unit = self.geometry.chunk_bytes().max(4096);
        let r = &mut self.rng;
        let len = match r.below(10) {
            0..=2 => r.between(1, 600),
            3..=5 => 512 * r.between(1, 16),
            6 | 7 => unit * r.between(1, 4),
            8 => r.between(1, 65536),
            _ => r.between(1, size),
        }
        .clamp(1, size);
        let align = match r.below(10) {
            0..=3 => 1,
            4..=7 => 512,
            _ => unit,
        };
        let offset = r.between(0, size - len) / align * align;
        (offset, len)
    }

    /// Whether a write of `[start, end)` would share a 512-byte sector with a write in flight
    /// without overlapping it, so the engine would run both at once (see the model's rules).
    fn shares_sector_without_overlap(&self, start: u64, end: u64) -> bool {
        if self.parity {
            // Any two writes sharing a sector share a stripe, which the engine serializes.
            return false;
        }
        let (s0, s1) = (start / SECTOR * SECTOR, end.div_ceil(SECTOR) * SECTOR);
        self.inflight_writes.values().any(|&(a, b)| {
            let share = a / SECTOR * SECTOR < s1 && s0 < b.div_ceil(SECTOR) * SECTOR;
            let overlap = a < end && start < b;
            share && !overlap
        })
    }

    fn submit(&mut self, request: Request, pending: Pending) -> Result<RequestId, Failure> {
        let what = match &request {
            Request::Read { offset, len } => format!("read {offset}+{len}"),
            Request::Write { offset, data } => format!("write {offset}+{}", data.len()),
            Request::Flush => "flush".to_string(),
            Request::Sync { offset, len, repair } => {
                format!("{} {offset}+{len}", if *repair { "repair" } else { "check" })
            }
            Request::Discard { offset, len } => format!("discard {offset}+{len}"),
            Request::Recover { offset, len } => format!("recover member bytes {offset}+{len}"),
        };
        match self.array.submit(request) {
            Ok(rid) => {
                self.last_rid = rid;
                trace!(self, "request #{rid} submitted: {what}");
                if pending.is_client() {
                    self.client_inflight += 1;
                }
                self.reqs.insert(rid, pending);
                Ok(rid)
            }
            Err(e) => Err(self.fail(Invariant::Protocol, format!("the engine refused a valid request {what}: {e}"))),
        }
    }

    fn submit_client_op(&mut self) -> Result<(), Failure> {
        self.w.submitted += 1;
        let size = self.model.size();
        let roll = self.rng.below(100);
        let w = &self.w;
        let kind = if roll < w.read {
            0
        } else if roll < w.read + w.write {
            1
        } else if roll < w.read + w.write + w.flush {
            2
        } else if roll < w.read + w.write + w.flush + w.discard {
            3
        } else {
            4
        };
        let whole = !self.array.degraded();
        match kind {
            1 => {
                let (offset, len) = self.pick_range(size);
                if self.shares_sector_without_overlap(offset, offset + len) {
                    return self.submit_read(size);
                }
                let mut data = vec![0u8; len as usize];
                self.rng.fill(&mut data);
                let wid = self.model.write(offset, &data);
                self.inflight_writes.insert(wid, (offset, offset + len));
                self.submit(Request::Write { offset, data: data.into() }, Pending::Write { wid })?;
            }
            2 => {
                let token = self.model.flush_submitted();
                self.submit(Request::Flush, Pending::Flush { token, job: None })?;
            }
            3 => {
                let (offset, len) = match self.geometry.stripe_data_bytes() {
                    Some(width) => {
                        let stripes = size / width;
                        let first = self.rng.below(stripes);
                        (first * width, self.rng.between(1, (stripes - first).min(4)) * width)
                    }
                    None => {
                        let sectors = size / SECTOR;
                        let first = self.rng.below(sectors);
                        (first * SECTOR, self.rng.between(1, (sectors - first).min(64)) * SECTOR)
                    }
                };
                if self.shares_sector_without_overlap(offset, offset + len) {
                    return self.submit_read(size);
                }
                let wid = self.model.write(offset, &vec![0u8; len as usize]);
                self.inflight_writes.insert(wid, (offset, offset + len));
                self.submit(Request::Discard { offset, len }, Pending::Write { wid })?;
            }
            4 if self.redundant && whole && !self.needs_resync => {
                let (offset, len) = self.pick_range(size);
                self.submit(Request::Sync { offset, len, repair: false }, Pending::Scrub)?;
            }
            _ => return self.submit_read(size),
        }
        Ok(())
    }

    fn submit_read(&mut self, size: u64) -> Result<(), Failure> {
        let (offset, len) = if self.sequential_reads && self.rng.chance(1, 2) {
            let offset = if self.read_cursor >= size { 0 } else { self.read_cursor };
            (offset, self.rng.between(1, 16384).min(size - offset))
        } else {
            self.pick_range(size)
        };
        self.read_cursor = offset + len;
        let expect = self.model.expect(offset, len);
        let prior: Vec<WriteId> = self
            .inflight_writes
            .iter()
            .filter(|(_, &(a, b))| a < offset + len && offset < b)
            .map(|(&w, _)| w)
            .collect();
        self.submit(Request::Read { offset, len }, Pending::Read { expect, prior })?;
        Ok(())
    }

    // ----- faults -----------------------------------------------------------------------------

    /// Slots that are not fully trustworthy right now: not in sync, without a live device, with
    /// latent errors, or with a write error waiting.
    fn compromised(&self) -> Vec<bool> {
        let states = self.array.slot_states();
        (0..states.len())
            .map(|s| {
                states[s] != SlotState::InSync
                    || match self.slot_dev[s] {
                        None => true,
                        Some(d) => {
                            let oldest = self.reqs.keys().next();
                            let recently_bad = self.cleared_while[d].is_some_and(|r| oldest.is_some_and(|o| *o <= r));
                            let d = &self.devices[d];
                            d.dead || d.has_bad_sectors() || d.fail_next_write || recently_bad
                        }
                    }
            })
            .collect()
    }

    /// Known-bug guard P1: a raid6 with two members out (not in sync, or dead and not seen so
    /// yet), or with log entries moved off a failed member and not yet durable.
    fn raid6_short_two(&self) -> bool {
        if self.geometry.max_degraded() < 2 {
            return false;
        }
        let states = self.array.slot_states();
        let out = (0..states.len())
            .filter(|&s| states[s] != SlotState::InSync || self.slot_dev[s].is_none_or(|d| self.devices[d].dead))
            .count();
        out >= 2 || self.array.ppl_moves_pending()
    }

    /// Whether every live member of the array reads and writes without error (no latent
    /// errors, no write error pending, none cleared under requests still running).
    fn live_members_sound(&self) -> bool {
        let oldest = self.reqs.keys().next();
        self.slot_dev.iter().flatten().all(|&d| {
            let dev = &self.devices[d];
            let recently_bad = self.cleared_while[d].is_some_and(|r| oldest.is_some_and(|o| *o <= r));
            dev.dead || !(dev.has_bad_sectors() || dev.fail_next_write || recently_bad)
        })
    }

    /// Whether compromising `slot` as well leaves every byte readable.
    fn within_budget_with(&self, slot: usize) -> bool {
        let mut c = self.compromised();
        c[slot] = true;
        self.geometry.is_readable(&|s| !c[s])
    }

    /// Whether the array as assembled after a crash now would miss a slot.
    fn degraded_for_assembly(&self) -> bool {
        (0..self.slot_dev.len()).any(|s| {
            self.array.slot_states()[s] != SlotState::InSync || self.slot_dev[s].is_none_or(|d| self.devices[d].dead)
        })
    }

    fn fire_faults(&mut self) -> Result<(), Failure> {
        for f in &mut self.plan {
            if f.at.is_none() && self.w.submitted >= f.at_op {
                f.at = Some(self.events + f.delay);
            }
        }
        while let Some(i) = self.plan.iter().position(|f| f.at.is_some_and(|at| at <= self.events)) {
            let mut f = self.plan.remove(i);
            let fired = self.fire(f.kind)?;
            // Hear what the engine says about it before anything else changes the slots.
            self.pump()?;
            if !fired {
                f.tries += 1;
                if f.tries < 30 {
                    f.at = Some(self.events + self.frng.between(5, 60));
                    self.plan.push(f);
                } else {
                    trace!(self, "fault {:?} dropped: its conditions never held", f.kind);
                }
            }
            if self.ended.is_some() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The workload is over and the array idle: fire what is left of the plan now, once each.
    fn fire_leftover_faults(&mut self) -> Result<(), Failure> {
        for f in std::mem::take(&mut self.plan) {
            trace!(self, "leftover fault {:?} fires at the end", f.kind);
            if !self.fire(f.kind)? {
                trace!(self, "fault {:?} dropped: its conditions do not hold", f.kind);
            }
            self.pump()?;
            if self.ended.is_some() {
                break;
            }
        }
        Ok(())
    }

    /// Inject one fault; false to try again later.
    fn fire(&mut self, kind: FaultKind) -> Result<bool, Failure> {
        let n = self.slot_dev.len();
        let ignore_budget = self.mode == Mode::Overload || self.cfg.mutation == Some(Mutation::ExtraDeath);
        // A parity array whose parity may be stale (crash, resync not finished) must not lose a
        // member: that is the write hole, which md avoids by refusing such arrays.
        if self.parity && self.needs_resync && kind != FaultKind::Crash && self.cfg.scenario == Scenario::Standard {
            return Ok(false);
        }
        let live = |s: usize| self.slot_dev[s].is_some_and(|d| !self.devices[d].dead);
        let in_sync = |s: usize| self.array.slot_states()[s] == SlotState::InSync;
        match kind {
            FaultKind::Death => {
                let cands: Vec<usize> =
                    (0..n).filter(|&s| live(s) && (ignore_budget || self.within_budget_with(s))).collect();
                if cands.is_empty() {
                    return Ok(false);
                }
                let s = self.frng.pick(&cands);
                let d = self.slot_dev[s].expect("live");
                trace!(self, "FAULT: device d{d} in slot {s} dies");
                self.devices[d].dead = true;
                self.devices[d].faulted = true;
                self.report.deaths += 1;
            }
            FaultKind::Latent | FaultKind::WriteError | FaultKind::OperatorFail => {
                let cands: Vec<usize> = (0..n)
                    .filter(|&s| live(s) && in_sync(s) && (ignore_budget || self.within_budget_with(s)))
                    .collect();
                if cands.is_empty() {
                    return Ok(false);
                }
                let s = self.frng.pick(&cands);
                let d = self.slot_dev[s].expect("live");
                match kind {
                    FaultKind::Latent => {
                        let total = self.geometry.member_data_bytes() / SECTOR;
                        let count = self.frng.between(1, 8).min(total);
                        let first = self.frng.below(total - count + 1);
                        let bad = self.devices[d].add_latent(first, count, &mut self.frng);
                        if bad.is_empty() {
                            return Ok(false);
                        }
                        trace!(self, "FAULT: latent sector errors on d{d} (slot {s}) sectors {bad:?}");
                        self.devices[d].faulted = true;
                        self.report.latent_errors += 1;
                    }
                    FaultKind::WriteError => {
                        trace!(self, "FAULT: the next write to d{d} (slot {s}) fails");
                        self.devices[d].fail_next_write = true;
                        self.devices[d].faulted = true;
                        self.report.write_errors += 1;
                    }
                    _ => {
                        trace!(self, "FAULT: the operator fails slot {s} (d{d})");
                        self.devices[d].faulted = true;
                        self.report.operator_fails += 1;
                        if let Err(e) = self.array.set_slot_state(s, SlotState::Faulty, false) {
                            return Err(self.fail(
                                Invariant::Protocol,
                                format!("failing slot {s} within redundancy was refused: {e}"),
                            ));
                        }
                    }
                }
            }
            FaultKind::Corrupt => {
                let cands: Vec<usize> = (0..n).filter(|&s| live(s) && in_sync(s)).collect();
                if cands.is_empty() {
                    return Ok(false);
                }
                let s = self.frng.pick(&cands);
                let d = self.slot_dev[s].expect("live");
                // A byte that holds something: data, or parity (inside the member's data area).
                let mut offset = self.frng.below(self.geometry.member_data_bytes());
                for _ in 0..50 {
                    if self.parity || self.geometry.logical(s, offset).is_some_and(|l| l < self.model.size()) {
                        break;
                    }
                    offset = self.frng.below(self.geometry.member_data_bytes());
                }
                let xor = self.frng.next_u64() as u8;
                trace!(self, "FAULT: byte {offset} of d{d} (slot {s}) silently corrupted");
                self.devices[d].corrupt(offset, xor);
                self.report.corruptions += 1;
            }
            FaultKind::Crash => {
                if self.cfg.scenario == Scenario::WriteHole {
                    if !self.degraded_for_assembly() {
                        return Ok(false);
                    }
                } else if !self.cfg.expose_known_bugs && self.ppl.is_some() && self.raid6_short_two() {
                    // Known-bug guard P1: see `crate::KNOWN_BUGS`.
                    return Ok(false);
                } else if self.parity && self.ppl.is_some() && self.live_members_sound() {
                    // The log makes parity match data again whatever was in flight: a crash
                    // while degraded is survivable, and nothing waits for a resync.
                } else if self.parity && self.compromised().contains(&true) {
                    // Latent errors or a pending write error would meet stale parity in the
                    // resync (the write hole again); wait until they are gone. A crash while
                    // degraded is sometimes let through: md refuses to assemble, the run ends.
                    // With the log the array is assembled, and a log replay that cannot read a
                    // member it needs leaves that stripe as it was: not simulated (docs/).
                    if self.ppl.is_some() || !(self.degraded_for_assembly() && self.frng.chance(1, 5)) {
                        return Ok(false);
                    }
                }
                self.crash()?;
            }
        }
        Ok(true)
    }

    // ----- crash and reassembly ---------------------------------------------------------------

    fn crash(&mut self) -> Result<(), Failure> {
        self.report.crashes += 1;
        trace!(
            self,
            "CRASH: {} requests and {} member I/Os in flight are dropped; {} sectors uncertain before",
            self.reqs.len(),
            self.ios.len(),
            self.model.uncertain_sectors()
        );
        let exposed = self.model.unflushed_ranges(self.last_flush);
        let mut inflight: BTreeMap<usize, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
        let mut inflight_log: Vec<(usize, u64, Vec<u8>)> = Vec::new();
        for f in self.ios.values() {
            match &f.io.op {
                MemberOp::LogWrite { data } => inflight_log.push((f.dev, f.io.offset, data.clone())),
                MemberOp::Write { data } => inflight.entry(f.dev).or_default().push((f.io.offset, data.to_vec())),
                MemberOp::Discard { len } => {
                    inflight.entry(f.dev).or_default().push((f.io.offset, vec![0; *len as usize]))
                }
                _ => {}
            }
        }
        for d in 0..self.devices.len() {
            if self.devices[d].dead {
                continue;
            }
            let volatile = self.devices[d].volatile_writes();
            let writes = inflight.remove(&d).unwrap_or_default();
            let o = self.devices[d].crash(&mut self.crng, &writes);
            trace!(
                self,
                "  d{d}: {volatile} cached + {} in-flight writes: {} kept, {} lost, {} torn",
                writes.len(),
                o.kept,
                o.lost,
                o.torn
            );
        }
        for (d, offset, data) in inflight_log {
            if !self.devices[d].dead {
                self.devices[d].crash_log(&mut self.crng, offset, &data);
            }
        }
        self.ios.clear();
        self.queue.clear();
        self.reqs.clear();
        self.inflight_writes.clear();
        self.client_inflight = 0;
        self.internal = None;
        self.model.crash();
        self.recovery = None;
        self.resync = None;
        self.needs_resync = true;
        self.verify.clear();
        self.spare_countdown = None;
        // Assemble as mdadm would from the superblocks: trusted live members are in sync; dead
        // devices and members recorded faulty are missing; a spare whose recovery had not been
        // completed starts it again from 0.
        let n = self.slot_dev.len();
        let mut states = vec![SlotState::Missing; n];
        let mut respare = Vec::new();
        for (s, state) in states.iter_mut().enumerate() {
            let Some(d) = self.slot_dev[s] else { continue };
            let dev = &self.devices[d];
            if dev.dead {
                continue;
            }
            if dev.unsynced_spare {
                respare.push(s);
            } else if self.trusted[s] {
                *state = SlotState::InSync;
            }
        }
        let degraded = states.iter().any(|s| *s != SlotState::InSync);
        trace!(self, "reassembly: slots {states:?}, spares to recover again {respare:?}");
        let mut log_complete = false;
        if let Some(config) = self.ppl.clone() {
            log_complete = self.replay_logs(&config, &states)?;
        }
        if self.parity && degraded && self.cfg.scenario == Scenario::Standard && self.ppl.is_none() {
            self.report.refused = true;
            self.end(
                "crash while a parity array was degraded: md refuses to assemble a dirty degraded raid4/5/6 (write hole), and so does the simulation"
                    .into(),
            );
            return Ok(());
        }
        self.array = match Array::new(self.geometry.clone(), states) {
            Ok(mut a) => {
                configure_reads(&mut a, self.cfg.read_policy());
                a
            }
            Err(e) => {
                if self.mode == Mode::Normal {
                    return Err(self.fail(
                        Invariant::RequestFailed,
                        format!("the array cannot be assembled after the crash: {e}"),
                    ));
                }
                self.end(format!("the array cannot be assembled after the crash: {e}"));
                return Ok(());
            }
        };
        if let Some(config) = &self.ppl {
            self.array.enable_ppl(config.clone());
            if degraded {
                // No log short of a data journal keeps a sector that was being written on a
                // member that is gone: it reads back rebuilt from parity that matches neither
                // version. Everything else is kept (that is the write hole the log closes).
                let states = self.array.slot_states().to_vec();
                for &(a, b) in &exposed {
                    let mut pos = a / SECTOR * SECTOR;
                    while pos < b {
                        if self
                            .geometry
                            .parity_runs(pos, 1)
                            .first()
                            .is_some_and(|r| states[r.slot] != SlotState::InSync)
                        {
                            self.model.forget_sectors(pos, SECTOR);
                        }
                        pos += SECTOR;
                    }
                }
            }
        }
        // A complete log replay leaves parity matching data: no resync (md marks it clean),
        // unless a raid6 lost logs with its missing members (as `uraid` assembly decides).
        self.needs_resync = !log_complete || (degraded && self.geometry.max_degraded() > 1);
        self.array.set_resync_pending(self.needs_resync);
        if self.cfg.scenario == Scenario::WriteHole {
            return self.write_hole_check(&exposed);
        }
        if !respare.is_empty() {
            for &s in &respare {
                if let Err(e) = self.array.set_slot_state(s, SlotState::Recovering, false) {
                    return Err(self.fail(Invariant::Protocol, format!("re-adding spare in slot {s} refused: {e}")));
                }
            }
            self.recovery = Some(Job {
                kind: JobKind::Recovery,
                pos: 0,
                end: self.geometry.member_data_bytes(),
                inflight: None,
                flushing: false,
                targets: respare,
            });
        }
        self.w.next_arrival = self.now + self.gap();
        Ok(())
    }

    /// Replay every in-sync member's partial parity log as assembly does, then start the logs
    /// empty. True if every log was valid and applied in full.
    fn replay_logs(&mut self, config: &PplConfig, states: &[SlotState]) -> Result<bool, Failure> {
        let mut complete = true;
        let mut total = ReplayReport::default();
        for slot in 0..states.len() {
            if states[slot] != SlotState::InSync {
                continue;
            }
            let d = self.slot_dev[slot].expect("an in-sync slot has a device");
            let Some((at, header)) = latest_header(&self.devices[d].ppl_area, config.signature) else {
                trace!(self, "  log of slot {slot} (d{d}): no valid header");
                complete = false;
                continue;
            };
            let pp = self.devices[d].ppl_area[at + uraid_format::ppl::HEADER_BYTES..].to_vec();
            for e in &header.entries {
                let ext = uraid_engine::ppl::entry_extent(&self.geometry, e);
                trace!(self, "    entry {e:?}: {ext:?}");
            }
            let mut io = SimReplayIo { devices: &mut self.devices, slot_dev: &self.slot_dev };
            match replay(&self.geometry, states, slot, &header, &pp, &mut io) {
                Ok(r) => {
                    trace!(
                        self,
                        "  log of slot {slot} (d{d}), generation {}: {} entries, {} recovered, {} rebuilt, {} skipped, {} bad",
                        header.generation,
                        header.entries.len(),
                        r.recovered,
                        r.rebuilt,
                        r.skipped,
                        r.bad
                    );
                    complete &= r.bad == 0;
                    total.recovered += r.recovered;
                    total.skipped += r.skipped;
                    total.rebuilt += r.rebuilt;
                    total.bad += r.bad;
                }
                Err(e) => {
                    return Err(self.fail(Invariant::RequestFailed, format!("replaying the log of slot {slot}: {e}")))
                }
            }
        }
        // Replay writes go straight to the media (the driver flushes after replay).
        for d in self.slot_dev.iter().flatten().copied().collect::<Vec<_>>() {
            if !self.devices[d].dead {
                let mark = self.devices[d].flush_mark();
                self.devices[d].flush_done(mark);
                self.devices[d].ppl_area = empty_log(config);
            }
        }
        self.report.log_entries_replayed += (total.recovered + total.rebuilt) as u64;
        Ok(complete)
    }

    /// The write-hole scenario after its crash: read the degraded array and say what is wrong.
    fn write_hole_check(&mut self, exposed: &[(u64, u64)]) -> Result<(), Failure> {
        let size = self.model.size();
        let width = self.geometry.stripe_data_bytes().expect("parity geometry");
        let exposed_stripes: BTreeSet<u64> = exposed.iter().flat_map(|&(a, b)| a / width..b.div_ceil(width)).collect();
        let data = match self.run_sync(Request::Read { offset: 0, len: size })? {
            Ok(Completion::Read(d)) => d.into_vec(),
            other => {
                return Err(self.fail(
                    Invariant::RequestFailed,
                    format!("reading the degraded array failed: {}", result_name(&other)),
                ))
            }
        };
        // Every wrong sector, one by one.
        let mut wrong: Vec<Mismatch> = Vec::new();
        let mut pos = 0;
        while pos < size {
            let len = SECTOR.min(size - pos);
            let e = self.model.expect(pos, len);
            if let Err(m) = self.model.check(&e, &data[pos as usize..(pos + len) as usize], &[]) {
                wrong.push(m);
            }
            pos += len;
        }
        if self.ppl.is_some() {
            // With the log, only a sector that was being written and lives on a member that is
            // gone may come back as neither version: no log short of a data journal keeps it.
            let states = self.array.slot_states().to_vec();
            let being_written = |pos: u64| exposed.iter().any(|&(a, b)| a < pos + SECTOR && pos < b);
            let on_missing = |pos: u64| {
                self.geometry.parity_runs(pos, 1).first().is_some_and(|r| states[r.slot] != SlotState::InSync)
            };
            let (allowed, unexplained): (Vec<&Mismatch>, Vec<&Mismatch>) =
                wrong.iter().partition(|m| being_written(m.offset) && on_missing(m.offset));
            if unexplained.is_empty() {
                self.end(format!(
                    "write hole closed by the log: the degraded array read back right, but for {} sector(s) written in flight on the missing member",
                    allowed.len()
                ));
                return Ok(());
            }
            return Err(self.fail(
                Invariant::WrongData,
                format!(
                    "after a crash while degraded and a log replay, {} sector(s) read wrong that were not being written on a missing member; first: {}",
                    unexplained.len(),
                    unexplained[0].describe()
                ),
            ));
        }
        if wrong.is_empty() {
            self.end("write hole: the degraded array read back correctly this time".into());
            return Ok(());
        }
        let outside: Vec<&Mismatch> = wrong.iter().filter(|m| !exposed_stripes.contains(&(m.offset / width))).collect();
        let first = &wrong[0];
        let mut f = self.fail(
            Invariant::WrongData,
            format!(
                "after a crash while degraded (assembled anyway, as md's start_dirty_degraded), {} sector(s) read wrong; first: {}. {}",
                wrong.len(),
                first.describe(),
                if outside.is_empty() {
                    format!(
                        "All lie in stripes whose writes were not yet flushed at the crash ({} such stripes): the RAID-5/6 write hole, which a journal or PPL closes",
                        exposed_stripes.len()
                    )
                } else {
                    format!(
                        "{} lie in stripes with no unflushed write: NOT explained by the write hole (first: {})",
                        outside.len(),
                        outside[0].describe()
                    )
                }
            ),
        );
        f.explained_by_write_hole = outside.is_empty();
        Err(f)
    }

    // ----- background jobs --------------------------------------------------------------------

    fn drive_jobs(&mut self) -> Result<(), Failure> {
        let states = self.array.slot_states().to_vec();
        if let Some(job) = &self.recovery {
            if job.inflight.is_none()
                && !job.flushing
                && !job.targets.iter().any(|&t| states[t] == SlotState::Recovering)
            {
                trace!(self, "recovery abandoned: no target is recovering any more");
                self.recovery = None;
            }
        }
        if self.spares && self.mode == Mode::Normal && self.recovery.is_none() && self.resync.is_none() {
            let empty: Vec<usize> =
                (0..states.len()).filter(|&s| matches!(states[s], SlotState::Faulty | SlotState::Missing)).collect();
            if !empty.is_empty() {
                match self.spare_countdown {
                    None => self.spare_countdown = Some(self.frng.between(2, 80)),
                    Some(0) => {
                        self.spare_countdown = None;
                        self.start_recovery(empty)?;
                    }
                    Some(_) => {}
                }
            }
        }
        let whole = self.array.slot_states().iter().all(|s| *s == SlotState::InSync);
        if whole {
            self.resync_refused = false;
        }
        // Mirrors may resync what is left while degraded (md does; an engine that refuses says
        // DegradedCheck and the resync waits until the array is whole). A parity array is
        // degraded here only with a partial parity log (else a crash while degraded ends the
        // run), and then only raid6 short of one member owes a resync.
        let mirror = matches!(self.geometry, Geometry::Raid1(_) | Geometry::Raid10(_));
        // raid6 short of one member resyncs too (P and Q made to agree around it).
        let lost =
            self.array.slot_states().iter().filter(|s| matches!(s, SlotState::Missing | SlotState::Faulty)).count();
        let short_raid6 = self.parity && self.geometry.max_degraded() > 1 && lost == 1;
        if self.needs_resync
            && self.resync.is_none()
            && self.recovery.is_none()
            && (whole
                || ((mirror || short_raid6)
                    && !self.resync_refused
                    && !self.array.slot_states().contains(&SlotState::Recovering)))
        {
            trace!(self, "resync starts");
            self.resync = Some(Job {
                kind: JobKind::Resync,
                pos: 0,
                end: self.model.size(),
                inflight: None,
                flushing: false,
                targets: Vec::new(),
            });
        }
        self.advance_job(JobKind::Recovery)?;
        self.advance_job(JobKind::Resync)
    }

    fn start_recovery(&mut self, slots: Vec<usize>) -> Result<(), Failure> {
        for &s in &slots {
            let d = self.new_device();
            self.devices[d].unsynced_spare = true;
            self.slot_dev[s] = Some(d);
            self.trusted[s] = false;
            trace!(self, "spare d{d} added in slot {s}");
            if let Err(e) = self.array.set_slot_state(s, SlotState::Recovering, false) {
                return Err(self.fail(Invariant::Protocol, format!("adding a spare in slot {s} was refused: {e}")));
            }
            self.report.spares_added += 1;
        }
        self.recovery = Some(Job {
            kind: JobKind::Recovery,
            pos: 0,
            end: self.geometry.member_data_bytes(),
            inflight: None,
            flushing: false,
            targets: slots,
        });
        Ok(())
    }

    fn job_slot(&mut self, kind: JobKind) -> &mut Option<Job> {
        match kind {
            JobKind::Recovery => &mut self.recovery,
            JobKind::Resync => &mut self.resync,
        }
    }

    fn job_mut(&mut self, kind: JobKind) -> Option<&mut Job> {
        self.job_slot(kind).as_mut()
    }

    fn advance_job(&mut self, kind: JobKind) -> Result<(), Failure> {
        let taken = match kind {
            JobKind::Recovery => self.recovery.take(),
            JobKind::Resync => self.resync.take(),
        };
        let Some(mut job) = taken else { return Ok(()) };
        let result = self.advance(&mut job);
        match kind {
            JobKind::Recovery => self.recovery = Some(job),
            JobKind::Resync => self.resync = Some(job),
        }
        result
    }

    fn advance(&mut self, job: &mut Job) -> Result<(), Failure> {
        if job.inflight.is_some() || job.flushing {
            return Ok(());
        }
        if job.pos < job.end {
            let left = job.end - job.pos;
            // Windows are whole sectors, as any driver's (md's are pages). On raid1/raid10 the
            // engine widens them to whole 4 KiB rows anyway, so that no sector is built from two
            // copies that disagree after a crash.
            let len = (SECTOR * self.rng.between(1, 128)).min(left);
            let offset = job.pos;
            let request = match job.kind {
                JobKind::Recovery => Request::Recover { offset, len },
                JobKind::Resync => Request::Sync { offset, len, repair: true },
            };
            let rid = self.submit(request, Pending::Step { job: job.kind, offset, len })?;
            job.inflight = Some(rid);
        } else {
            // Done: flush what the job wrote before recording it (md's superblock update after
            // recovery or resync is a flush + FUA write).
            let token = self.model.flush_submitted();
            self.submit(Request::Flush, Pending::Flush { token, job: Some(job.kind) })?;
            job.flushing = true;
        }
        Ok(())
    }

    fn recovery_done(&mut self) -> Result<(), Failure> {
        let Some(job) = self.recovery.take() else { return Ok(()) };
        for &t in &job.targets {
            if self.array.slot_states()[t] != SlotState::Recovering {
                continue;
            }
            if let Err(e) = self.array.set_slot_state(t, SlotState::InSync, false) {
                return Err(
                    self.fail(Invariant::Protocol, format!("marking rebuilt slot {t} in sync was refused: {e}"))
                );
            }
            self.trusted[t] = true;
            let d = self.slot_dev[t].expect("a spare");
            self.devices[d].unsynced_spare = false;
            trace!(self, "slot {t} (d{d}) rebuilt and in sync");
        }
        self.report.rebuilds += 1;
        self.verify.push(Verify::AfterRebuild);
        Ok(())
    }

    fn resync_done(&mut self) {
        self.resync = None;
        self.needs_resync = false;
        self.array.set_resync_pending(false);
        self.report.resyncs += 1;
        trace!(self, "resync done");
        self.verify.push(Verify::AfterResync);
    }

    // ----- checks at quiet points -------------------------------------------------------------

    /// Let every request in flight finish (no arrivals, faults or job steps meanwhile).
    fn quiesce(&mut self) -> Result<(), Failure> {
        loop {
            self.pump()?;
            if self.reqs.is_empty() || self.ended.is_some() {
                return Ok(());
            }
            let Some(((t, _), id)) = self.queue.pop_first() else { return Err(self.stalled()) };
            self.now = t;
            self.complete_member_io(id)?;
        }
    }

    /// Run one request to completion on a quiet array, through the scheduler.
    fn run_sync(&mut self, request: Request) -> Result<Result<Completion, EngineError>, Failure> {
        self.internal = None;
        self.submit(request, Pending::Internal)?;
        loop {
            self.pump()?;
            if let Some(r) = self.internal.take() {
                return Ok(r);
            }
            let Some(((t, _), id)) = self.queue.pop_first() else { return Err(self.stalled()) };
            self.now = t;
            self.complete_member_io(id)?;
        }
    }

    fn do_verify(&mut self, v: Verify) -> Result<(), Failure> {
        if self.ended.is_some() {
            return Ok(());
        }
        trace!(self, "verify {v:?}");
        match v {
            Verify::AfterResync => {
                self.verify_read_all(true, "full read after the resync that followed a crash")?;
                self.verify_check("check after the resync")?;
                self.verify_subsets("after the resync")?;
            }
            Verify::AfterRebuild => {
                self.verify_check("check after the rebuild")?;
                self.verify_subsets("after the rebuild")?;
            }
        }
        Ok(())
    }

    fn final_checks(&mut self) -> Result<(), Failure> {
        self.quiesce()?;
        trace!(self, "final checks");
        self.verify_read_all(false, "final full read")?;
        self.verify_check("final check")?;
        self.verify_subsets("at the end")
    }

    fn verify_read_all(&mut self, pin: bool, what: &str) -> Result<(), Failure> {
        let size = self.model.size();
        let expect = self.model.expect(0, size);
        match self.run_sync(Request::Read { offset: 0, len: size })? {
            Ok(Completion::Read(data)) => {
                let data = data.into_vec();
                if let Err(m) = self.model.check(&expect, &data, &[]) {
                    return Err(self.mismatch_failure(m, what));
                }
                if pin {
                    self.model.pin(&data);
                }
            }
            Ok(other) => return Err(self.fail(Invariant::Protocol, format!("{what} completed as {other:?}"))),
            Err(e) => self.request_error(what.to_string(), e)?,
        }
        Ok(())
    }

    /// Invariant (3): a whole array that needs no resync has consistent redundancy.
    fn verify_check(&mut self, what: &str) -> Result<(), Failure> {
        if !self.redundant || self.needs_resync || self.array.degraded() || self.mode == Mode::Overload {
            return Ok(());
        }
        let size = self.model.size();
        match self.run_sync(Request::Sync { offset: 0, len: size, repair: false })? {
            Ok(Completion::Synced { mismatch_sectors: 0 }) => Ok(()),
            Ok(Completion::Synced { mismatch_sectors }) => {
                Err(self.fail(Invariant::Inconsistent, format!("{what}: {mismatch_sectors} mismatched sectors")))
            }
            Ok(other) => Err(self.fail(Invariant::Protocol, format!("{what} completed as {other:?}"))),
            Err(EngineError::DegradedCheck) if self.array.degraded() => Ok(()),
            Err(e) => self.request_error(what.to_string(), e),
        }
    }

    /// Invariant (4): every survivable set of missing members still reads the model, through a
    /// fresh engine over the member contents as they are.
    fn verify_subsets(&mut self, what: &str) -> Result<(), Failure> {
        // Parity owed a resync (a raid6 assembled after a crash without the logs of a missing
        // member) may not match the data yet: reads through it are judged after the resync.
        if !self.redundant || (self.parity && self.needs_resync) {
            return Ok(());
        }
        let n = self.slot_dev.len();
        let states = self.array.slot_states().to_vec();
        let base: Vec<bool> = (0..n)
            .map(|s| {
                states[s] != SlotState::InSync
                    || self.slot_dev[s].is_none_or(|d| self.devices[d].dead || self.devices[d].has_bad_sectors())
            })
            .collect();
        let size = self.model.size();
        let expect = self.model.expect(0, size);
        let mut seen: BTreeSet<Vec<bool>> = BTreeSet::new();
        let mut sets: Vec<Vec<usize>> = vec![vec![]];
        for a in 0..n {
            sets.push(vec![a]);
            for b in a + 1..n {
                sets.push(vec![a, b]);
            }
        }
        for set in sets {
            let mut out = base.clone();
            for &s in &set {
                out[s] = true;
            }
            if set.is_empty() || !self.geometry.is_readable(&|s| !out[s]) || !seen.insert(out.clone()) {
                continue;
            }
            let slots: Vec<SlotState> =
                out.iter().map(|&o| if o { SlotState::Missing } else { SlotState::InSync }).collect();
            let mut fresh = match Array::new(self.geometry.clone(), slots) {
                Ok(mut a) => {
                    configure_reads(&mut a, self.cfg.read_policy());
                    a
                }
                Err(e) => return Err(self.fail(Invariant::Protocol, format!("a readable subset was refused: {e}"))),
            };
            let mut wrote = None;
            let devices = &self.devices;
            let slot_dev = &self.slot_dev;
            let result =
                execute(&mut fresh, Request::Read { offset: 0, len: size }, &mut |io: &MemberIo| match &io.op {
                    MemberOp::Read { len } => {
                        let d = &devices[slot_dev[io.slot].expect("a device")];
                        match d.read(io.offset, *len) {
                            Ok(data) => IoResult::Read(data.into()),
                            Err(e) => IoResult::Failed(e),
                        }
                    }
                    other => {
                        wrote = Some(format!("{} of slot {} at {}", op_name(other), io.slot, io.offset));
                        IoResult::Failed("verification arrays are read-only".into())
                    }
                });
            self.report.subset_reads += 1;
            let missing: Vec<usize> = (0..n).filter(|&s| out[s]).collect();
            if let Some(w) = wrote {
                return Err(self.fail(
                    Invariant::Protocol,
                    format!("{what}: a plain read without slots {missing:?} issued a member {w}"),
                ));
            }
            match result {
                Ok(Completion::Read(data)) => {
                    let data = data.into_vec();
                    if let Err(m) = self.model.check(&expect, &data, &[]) {
                        let mut f =
                            self.mismatch_failure(m, &format!("{what}, reading with slots {missing:?} missing"));
                        f.invariant = Invariant::DegradedReadDiffers;
                        return Err(f);
                    }
                }
                other => {
                    if self.mode == Mode::Normal {
                        return Err(self.fail(
                            Invariant::DegradedReadDiffers,
                            format!("{what}, reading with slots {missing:?} missing: {}", result_name(&other)),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Run one configuration to its end.
pub fn run(cfg: &Config) -> Result<Report, Failure> {
    Sim::new(cfg.clone())?.run()
}
