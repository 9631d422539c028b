//! The policy of a running array, as a sans-I/O driver: what must be on the members before what,
//! and which background pass is owed and how it goes. The array service runs it on its engine
//! thread; the fault simulator runs the same code in virtual time over simulated members.
//!
//! What it decides, as md does:
//!
//! - **Metadata ordering.** A write after an idle period waits until the array is recorded dirty,
//!   and a write (or a pass's writing step) until the write-intent bits of its chunks are set on
//!   the members: such writes are *parked* until their records are durable, and released in
//!   arrival order. A write's answer is held while a member failure is being recorded (md holds
//!   bios while `MD_SB_CHANGE_PENDING` is set). Once a metadata write has failed, parked writes
//!   fail rather than go out unrecorded.
//! - **What waits for a member flush** (md gets the same from the `REQ_PREFLUSH` of its
//!   superblock writes): the clean mark (only if no write came during the flush), the clearing of
//!   bitmap bits (of chunks idle since before the flush), a rebuild's or resync's checkpoint, and
//!   the end of a rebuild.
//! - **The write-intent bitmap while running**: which chunks a write holds, and clearing those
//!   idle for [`PolicyConfig::bitmap_clear_delay`] (md's bitmap daemon).
//! - **The passes**: a rebuild starts by itself whenever a slot is recovering, from the lowest
//!   checkpoint of its slots; a resync (when the array is found dirty and
//!   [`PolicyConfig::auto_resync`] is set) resumes from the metadata's resync checkpoint; both
//!   skip what the bitmap says is clean where it can vouch for that (re-added members, a resync
//!   with a trusted bitmap); steps are throttled as md throttles them, checkpointed every 2 s
//!   and when cut short, and a finished rebuild is recorded after a flush.
//!
//! Nothing here reads a clock, blocks, or touches a device or a channel. Time is an input: a
//! `Duration` since any fixed origin the caller keeps (the service: when its engine thread
//! started; the simulator: virtual time). Its outputs are queued for the caller:
//!
//! - metadata I/O, one job at a time: [`ArrayPolicy::next_metadata_io`] hands out the next
//!   metadata step or member flush; the caller performs it however it likes (the service on a
//!   thread of its own, the simulator as simulated I/O a crash can interrupt) and reports with
//!   [`ArrayPolicy::metadata_io_done`]. What a flush is for stays inside the policy;
//! - the running pass's next engine request, from [`ArrayPolicy::next_pass_step`]: the caller
//!   submits it to the engine, says how that went ([`ArrayPolicy::pass_step_submitted`]) and
//!   hands its completion back ([`ArrayPolicy::pass_step_done`]);
//! - [`PolicyEvent`]s, taken with [`ArrayPolicy::take_event`] after every call: parked writes
//!   released or failed, held answers released, a pass ended, notices to log.
//!
//! Client writes are known by a [`WriteId`] the caller chooses and maps back to its own
//! requests; the policy never sees their data, their engine requests or their callbacks.
//!
//! **Why it borrows the array rather than owning it.** Every call takes the [`OpenArray`] by
//! `&mut`, and the policy keeps only its own state. The caller drives the engine on that array
//! between calls (submitting client requests, completing member I/O, membership changes) and the
//! service reads its status from it; owning it would route all of that through the policy. The
//! caller must pass the same array every time: the policy's tickets refer to its metadata. The
//! array may defer its metadata writes ([`OpenArray::defer_metadata`], as the service does), and
//! then they come out of [`ArrayPolicy::next_metadata_io`]; if it does not, they are written as
//! they are recorded and only member flushes come out.
//!
//! Where things live: client writes, parking and held answers in `writes`, the metadata queue and
//! what follows a flush in `metadata`, the bitmap in `intent`, the passes in `passes` and one
//! pass's bookkeeping and throttle in `pass_run`. Beside the policy, and as free of I/O:
//! `member_returns`, when the members lost for being unreachable are tried again (the service
//! makes the attempts and re-adds those that come back).

use std::collections::VecDeque;
use std::time::Duration;

use uraid_engine::idmap::IdMap;

use crate::open_array::{OpenArray, WriteIntentBits};

mod errors;
mod intent;
mod member_returns;
mod metadata;
mod pass_run;
mod passes;
mod writes;

#[cfg(test)]
mod tests;

pub use errors::{MetadataError, SyncError};
pub use member_returns::{
    AttemptFailure, LostMember, MemberReturns, ReturnBackoff, ReturnBackoffChange, ReturnBackoffError,
};
pub use metadata::{MetadataIo, MetadataIoKind};
pub use pass_run::{throttle_delay, SpeedLimitError, SpeedLimits, SpeedWindow, SyncAction, SyncRun};
pub use passes::CHECKPOINT_EVERY;
pub use writes::WriteStart;

use metadata::MetaState;

/// How the policy is set up.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    /// How long the array stays marked dirty after the last write (md's `safe_mode_delay`).
    pub clean_delay: Duration,
    /// How long a write-intent bitmap region stays marked after its last write (md's bitmap
    /// `daemon_sleep`).
    pub bitmap_clear_delay: Duration,
    /// Background pass speed limits (md's `speed_limit_min` / `speed_limit_max`).
    pub speed: SpeedLimits,
    /// Start a resync by itself when the array was found dirty (md does).
    pub auto_resync: bool,
    /// About how much a pass covers per step, in bytes (whole stripes, or whole chunks of a
    /// rebuild, at least one). A megabyte; the fault simulator, whose members are small, takes
    /// a few KiB so that its passes take many steps among the workload's requests.
    pub pass_step_bytes: u64,
    /// How many steps of a pass may be with the engine at once while it runs unthrottled (one
    /// while it yields to clients or is held to its maximum speed): the next windows are read
    /// while the last ones are written.
    pub pass_depth: usize,
    /// How often a running rebuild or resync records its position (md writes it now and then,
    /// so that a restart resumes there): [`CHECKPOINT_EVERY`] by default.
    pub checkpoint_every: Duration,
    /// For mutation testing only: a deliberate bug to plant, so a checker can show it catches
    /// it. [`PolicyMutation::None`] (the default) everywhere else.
    pub mutation: PolicyMutation,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            // md's safe_mode_delay is 200 ms; a little longer here, since every clean/dirty
            // round trip costs a flush of every member plus two superblock writes.
            clean_delay: Duration::from_millis(500),
            bitmap_clear_delay: Duration::from_secs(5),
            speed: SpeedLimits::default(),
            auto_resync: true,
            pass_step_bytes: 1 << 20,
            pass_depth: PASS_DEPTH,
            checkpoint_every: CHECKPOINT_EVERY,
            mutation: PolicyMutation::None,
        }
    }
}

/// Steps of a pass in flight by default (see [`PolicyConfig::pass_depth`]).
pub const PASS_DEPTH: usize = 4;

/// A deliberate bug the policy can be told to have, for mutation testing: a checker (the fault
/// simulator, the policy's own tests) must catch each one. Never set outside such tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PolicyMutation {
    /// The policy as it should be.
    #[default]
    None,
    /// Writes, and a pass's writing steps, go out at once, before the dirty mark and the
    /// write-intent bits they need are durable.
    DataBeforeBitmap,
    /// A rebuild's checkpoint is recorded without a member flush before it, at the end of the
    /// step just submitted rather than of the steps completed: ahead of the data on the members.
    CheckpointAhead,
}

/// A client write, as the caller knows it: any number, unique among the writes in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteId(pub u64);

/// What the caller is to do after a call; taken with [`ArrayPolicy::take_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyEvent {
    /// The records a parked write needed are durable: its engine requests may go out now.
    WriteReleased(WriteId),
    /// The records a parked write needed can never be durable (a metadata write failed): the
    /// write fails with this error, and is ended ([`ArrayPolicy::write_ends`]) as any other.
    WriteFailed(WriteId, MetadataError),
    /// The answer to this write, held by [`ArrayPolicy::hold_answer`], may be given now.
    AnswerReleased(WriteId),
    /// A pass ended; `summary` says how, as the service logs it. Members may be in sync again,
    /// and those waiting for the passes to end may be told ([`ArrayPolicy::pass_idle`]).
    PassEnded { summary: String },
    /// The end of a rebuild is recorded: its members are in sync. As after `PassEnded`.
    RebuildRecorded,
    /// Something worth a line in the log (a pass started, a metadata update failed).
    Notice(String),
    /// The member failures that held the partial parity log are recorded: a spare may take an
    /// empty slot now (`OpenArray::activate_spare`).
    FailuresRecorded,
}

/// What the policy needs to know of the array's shape (it does not change while it runs).
#[derive(Debug, Clone)]
struct Shape {
    size: u64,
    read_only: bool,
    level: String,
    chunk_bytes: u64,
    stripe_data_bytes: Option<u64>,
    max_degraded: usize,
}

/// The running array's policy state (see the module documentation).
pub struct ArrayPolicy {
    config: PolicyConfig,
    shape: Shape,
    events: VecDeque<PolicyEvent>,
    /// The caller is stopping: no pass starts, none steps on, and the idle clean mark is left
    /// to the caller's own end.
    stopping: bool,
    /// Client writes in flight, each with the bitmap chunks it holds.
    writes: IdMap<WriteId, Option<std::ops::Range<u64>>>,
    /// When the last write (or writing pass) ended, and how many have ended: a clean mark
    /// queued before a flush is made only if none ended while the flush ran.
    last_write: Duration,
    writes_ended: u64,
    /// Metadata I/O out and queued, and what waits on it.
    meta: MetaState,
    /// Writes in flight per write-intent bitmap chunk.
    intent_users: IdMap<u64, u32>,
    /// Chunks with no write in flight: since when, and in which order they went idle (so that
    /// "idle since before the flush started" holds however coarse the caller's clock is).
    intent_idle: IdMap<u64, intent::IdleSince>,
    idle_order: u64,
    /// The running pass.
    pass: Option<SyncRun>,
    /// The running pass's steps given out: each with its engine request once submitted (at
    /// most one is not yet), and the bitmap chunks it holds.
    steps: Vec<passes::PassStep>,
    /// When the running pass last checkpointed its position.
    last_checkpoint: Duration,
    /// The bitmap as it was when the running resync started, if it can be trusted.
    resync_bits: Option<WriteIntentBits>,
    /// For a rebuild of re-added members only: the bitmap's marks when it started.
    recover_bits: Option<WriteIntentBits>,
    /// Why the running pass stopped early, if it failed.
    pass_failure: Option<String>,
    /// Sectors the last check or repair found inconsistent (md's `mismatch_cnt`).
    mismatch_sectors: u64,
    /// How the last pass ended, in words.
    last_pass: Option<String>,
    /// Bytes the last pass went through, regions it skipped as clean not counted.
    last_pass_bytes: Option<u64>,
    /// Passes ended so far (finished or cut short), so that a watcher polling the status can
    /// tell that a pass began and ended between two looks.
    passes_ended: u64,
    /// A rebuild has been recorded while a resync is still owed: it resumes next.
    resync_due: bool,
    /// Flushes before a clean mark that failed in a row: each retry waits twice as long.
    clean_failures: u32,
    /// The members whose rebuild failed (a source could not be read and no other copy or
    /// parity was left): not rebuilt again by itself while these same members wait, as md's
    /// `recovery_disabled`, or it would fail at the same place forever. A member added, or
    /// the array assembled again, tries anew.
    rebuild_blocked: Option<Vec<String>>,
}

impl ArrayPolicy {
    /// The policy of `array` from `now` on. If the array was found dirty, is writable, and
    /// `config.auto_resync` says so, a resync starts (its notices are the first events).
    pub fn new(array: &mut OpenArray, config: PolicyConfig, now: Duration) -> ArrayPolicy {
        let geometry = array.engine().geometry();
        let shape = Shape {
            size: array.size(),
            read_only: !array.writable(),
            level: geometry.name().to_string(),
            chunk_bytes: geometry.chunk_bytes(),
            stripe_data_bytes: geometry.stripe_data_bytes(),
            max_degraded: geometry.max_degraded(),
        };
        let mut policy = ArrayPolicy {
            config,
            shape,
            events: VecDeque::new(),
            stopping: false,
            writes: IdMap::default(),
            last_write: now,
            writes_ended: 0,
            meta: MetaState::default(),
            intent_users: IdMap::default(),
            intent_idle: IdMap::default(),
            idle_order: 0,
            pass: None,
            steps: Vec::new(),
            last_checkpoint: now,
            resync_bits: None,
            recover_bits: None,
            pass_failure: None,
            mismatch_sectors: 0,
            last_pass: None,
            last_pass_bytes: None,
            passes_ended: 0,
            resync_due: false,
            clean_failures: 0,
            rebuild_blocked: None,
        };
        // Members assembled one event behind the array (their last update was lost in a crash)
        // get the array's superblock now, before anything else is recorded: another lost update
        // would leave them two behind, and a later assembly would take them for stale.
        // Their superblocks may also still say clean (the update a crash lost was the dirty
        // mark): no write, the resync's included, goes out before they say dirty, or another
        // crash would assemble the array clean and leave its copies different.
        if array.writable() && array.members_behind() {
            match policy.record(array, uraid_engine::metadata::MetaChange::Roles) {
                Ok(ticket) if array.is_dirty() => policy.meta.dirty_ticket = ticket,
                Ok(_) => {}
                Err(e) => policy.notice(format!("bringing the members' superblocks up to date failed: {e}")),
            }
        }
        // A rebuild owed goes first and the resync after it, as md's `md_check_recovery`
        // orders them: the resync then covers the rebuilt members too (see
        // `OpenArray::assemble` on a rebuild after an unclean stop).
        if policy.config.auto_resync && array.writable() && array.needs_resync() {
            if Self::recovering_slots(array).next().is_some() {
                policy.resync_due = true;
            } else if let Err(e) = policy.start_pass(array, SyncAction::Resync, now) {
                policy.notice(format!("resync not started: {e}"));
            }
        }
        policy
    }

    /// The next thing for the caller to do, in the order the policy decided them.
    pub fn take_event(&mut self) -> Option<PolicyEvent> {
        self.events.pop_front()
    }

    fn notice(&mut self, line: String) {
        self.events.push_back(PolicyEvent::Notice(line));
    }

    /// The caller is stopping: no pass starts from now on, the running one is cut short at its
    /// current step (a resync cut short is still owed), and no idle clean mark is started (the
    /// caller marks the array clean at its end, once [`ArrayPolicy::settled`]).
    pub fn stop(&mut self, array: &mut OpenArray, now: Duration) {
        self.stopping = true;
        self.interrupt_pass(array, now);
    }

    /// Whether nothing of the policy's is under way: no pass step with the engine, no metadata
    /// I/O out or queued, no write parked and no answer held. A stop waits for this.
    pub fn settled(&self, array: &OpenArray) -> bool {
        self.steps.is_empty() && !self.metadata_busy(array)
    }

    /// When the policy next has something to do by itself ([`ArrayPolicy::run_timers`], or a
    /// throttled pass's next step from [`ArrayPolicy::next_pass_step`]), if anything.
    pub fn next_deadline(&self, array: &OpenArray) -> Option<Duration> {
        // A step parked for its records goes when they are durable, which metadata I/O tells.
        let step_at =
            self.pass.as_ref().filter(|r| r.wants_step() && self.meta.parked_step.is_none()).map(|r| r.next_at);
        [self.clean_at(array), step_at, self.intent_clear_at(array)].into_iter().flatten().min()
    }

    /// Do what is due by `now`: clear the bits of bitmap chunks idle for long enough, and mark
    /// the array clean once no write has ended for [`PolicyConfig::clean_delay`]. Each first
    /// queues a flush of the members; what it records follows that flush.
    pub fn run_timers(&mut self, array: &mut OpenArray, now: Duration) {
        if self.intent_clear_at(array).is_some_and(|at| now >= at) {
            self.clear_idle_intent(array, now);
        }
        if self.clean_at(array).is_some_and(|at| now >= at) {
            self.flush_then(metadata::AfterFlush::Clean { writes_ended: self.writes_ended });
        }
    }

    /// When the array may be marked clean: it is dirty, owes no resync, no write is in flight,
    /// no writing pass runs, and no clean mark is already on its way.
    fn clean_at(&self, array: &OpenArray) -> Option<Duration> {
        // A rebuild writes only the member it rebuilds, whose progress its checkpoint records:
        // as md's safe mode, the array may be marked clean while it runs. A resync or repair
        // rewrites redundancy and keeps the array dirty.
        let pass_writes =
            self.pass.as_ref().is_some_and(|r| matches!(r.action, SyncAction::Resync | SyncAction::Repair));
        let due = array.is_dirty()
            && !array.needs_resync()
            && self.writes.is_empty()
            && !pass_writes
            && !self.meta.cleaning()
            && !self.stopping
            // Nothing can be recorded once a metadata write has failed for good: no attempts.
            && array.metadata_failed().is_none();
        due.then(|| self.last_write + self.config.clean_delay * (1u32 << self.clean_failures))
    }

    /// A write (or a writing pass) ended at `now`.
    fn note_write_ended(&mut self, now: Duration) {
        self.last_write = now;
        self.clean_failures = 0;
        self.writes_ended += 1;
    }

    /// The running pass, if any.
    pub fn pass(&self) -> Option<&SyncRun> {
        self.pass.as_ref()
    }

    /// The speed limits passes keep to.
    pub fn speed_limits(&self) -> SpeedLimits {
        self.config.speed
    }

    /// Change the speed limits passes keep to, the running one's included: its speed is
    /// measured afresh from `now` (what it did under the old limits does not count against the
    /// new ones, as it would in an average since its start).
    pub fn set_speed_limits(&mut self, limits: SpeedLimits, now: Duration) {
        self.config.speed = limits;
        if let Some(run) = &mut self.pass {
            run.limits_changed(limits, now);
        }
    }

    /// Sectors the last check or repair found inconsistent (md's `mismatch_cnt`).
    pub fn mismatch_sectors(&self) -> u64 {
        self.mismatch_sectors
    }

    /// How the last pass ended, in words (e.g. "check completed: ...").
    pub fn last_pass(&self) -> Option<&str> {
        self.last_pass.as_deref()
    }

    /// Bytes the last pass went through (a rebuild: bytes rebuilt), regions it stepped over as
    /// clean in the write-intent bitmap not counted.
    pub fn last_pass_bytes(&self) -> Option<u64> {
        self.last_pass_bytes
    }

    /// Passes ended so far, finished or cut short.
    pub fn passes_ended(&self) -> u64 {
        self.passes_ended
    }
}
