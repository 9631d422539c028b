//! What a run reports: the [`Invariant`] a failing run broke, the [`Failure`] with its replay
//! command, and the [`Report`] of a passing run.

use std::fmt;

use super::Config;

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
    /// Metadata writes and flushes performed (superblocks, bitmap, log headers).
    pub metadata_ios: u64,
    pub crashes: u32,
    /// Crashes that came while metadata writes were in flight or not yet durable.
    pub crashes_in_metadata_writes: u32,
    /// Superblocks a crash tore (their members left out at assembly).
    pub torn_superblocks: u32,
    /// How the array kept itself consistent: "resync", "bitmap" or "ppl".
    pub consistency: String,
    /// Ended at a crash while a parity array was degraded: md refuses to assemble it.
    pub refused: bool,
    pub resyncs: u32,
    pub rebuilds: u32,
    pub spares_added: u32,
    /// RAIDframe copybacks begun (`raidctl -B`), and those a crash cut short.
    pub copybacks: u32,
    pub copybacks_cut_short: u32,
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
    /// Client writes the engine merged into another's write (plugged bursts).
    pub writes_gathered: u64,
    /// The array kept md's partial parity log.
    pub ppl: bool,
    /// Log entries replayed after crashes.
    pub log_entries_replayed: u64,
    pub virtual_ns: u64,
    /// A hash of every I/O and completion: equal for equal runs.
    pub fingerprint: u64,
    pub end: String,
}
