//! What a run is asked to do: the scenario, the mutation, the [`Config`] a seed and a geometry
//! name expand into, and the [`Mode`] (within or beyond the level's redundancy).

use uraid_engine::ReadPolicy;

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
    /// Assembly ignores event counts: a member the others recorded as failed, or one left
    /// behind by a crash, is taken as fresh.
    IgnoreEvents,
    /// The policy lets a write (or a pass's writing step) out before its dirty mark and bitmap
    /// bits are durable.
    DataBeforeBitmap,
    /// The policy records a rebuild's checkpoint without flushing, ahead of the data it covers.
    CheckpointAhead,
    /// Vinum: saves never carry the unclean mark, so a volume crashed while dirty is taken as
    /// clean (Vinum geometries only).
    VinumNoDirtyMark,
    /// Vinum: configuration saves reach drive `g0`'s device (d0) only: every other drive keeps
    /// the configuration it was created with (Vinum geometries only).
    VinumSaveSkipsDrive,
    /// RAIDframe: label updates always say clean and parity map updates never mark a region
    /// dirty, so a set crashed with writes in flight is taken as clean (RAIDframe geometries
    /// only).
    RaidframeNoDirtyRecord,
    /// RAIDframe: parity map updates never mark a region dirty (the labels still go dirty), so
    /// a write goes out before its region is marked and the resync after a crash passes over
    /// it (RAIDframe geometries only).
    RaidframeMapSkipsRegions,
    /// RAIDframe: a copyback (`raidctl -B`) writes the labels that give the column back to its
    /// component before copying the spare's data there, and a crash cuts the copy short
    /// (RAIDframe geometries only).
    RaidframeCopybackLabelsFirst,
}

impl Mutation {
    pub const ALL: [Mutation; 11] = [
        Mutation::SilentCorruption,
        Mutation::ExtraDeath,
        Mutation::LyingFlush,
        Mutation::IgnoreEvents,
        Mutation::DataBeforeBitmap,
        Mutation::CheckpointAhead,
        Mutation::VinumNoDirtyMark,
        Mutation::VinumSaveSkipsDrive,
        Mutation::RaidframeNoDirtyRecord,
        Mutation::RaidframeMapSkipsRegions,
        Mutation::RaidframeCopybackLabelsFirst,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutation::SilentCorruption => "silent-corruption",
            Mutation::ExtraDeath => "extra-death",
            Mutation::LyingFlush => "lying-flush",
            Mutation::IgnoreEvents => "ignore-events",
            Mutation::DataBeforeBitmap => "data-before-bitmap",
            Mutation::CheckpointAhead => "checkpoint-ahead",
            Mutation::VinumNoDirtyMark => "vinum-no-dirty-mark",
            Mutation::VinumSaveSkipsDrive => "vinum-save-skips-drive",
            Mutation::RaidframeNoDirtyRecord => "raidframe-no-dirty-record",
            Mutation::RaidframeMapSkipsRegions => "raidframe-map-skips-regions",
            Mutation::RaidframeCopybackLabelsFirst => "raidframe-copyback-labels-first",
        }
    }

    pub fn parse(s: &str) -> Option<Mutation> {
        Mutation::ALL.into_iter().find(|m| m.name() == s)
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
