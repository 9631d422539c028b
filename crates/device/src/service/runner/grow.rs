//! A reshape asked of the running array (md's `--grow --raid-devices` with `--add`, `--chunk`,
//! `--layout`), a takeover (`--grow --level` where md moves no data, and a raid1's number of
//! copies, `--grow --raid-devices` on a raid1), or a change of its size or bitmap (`--size`,
//! `--bitmap`): checked here before anything changes, then the runner winds down as a stop
//! does (requests in flight answered, members flushed, the array marked clean) and hands the
//! array's devices over, with the requests that arrived meanwhile. The reshape itself runs in
//! `service::reshaping`; a takeover, or a change of size or bitmap, is written as on a stopped
//! array and the array served again in its new shape (`service::engine_thread`), where new
//! slots are rebuilt.

use std::path::PathBuf;
use std::sync::Arc;

use crossbeam_channel::Sender;

use super::{log, Runner};
use crate::md_change::MdChange;
use crate::member::MemberDevice;
use crate::probe::probe;
use crate::reshape::ReshapeRequest;
use crate::service::follow_up::FollowUp;
use crate::service::{ArrayStatus, BlockOp, Done, ManageError, ServiceConfig, StopReport};
use uraid_layout::Level;
use uraid_md::takeover::TakeoverRequest;

/// What the running array is asked to change.
#[derive(Debug)]
pub(in crate::service) enum Asked {
    Reshape(ReshapeRequest),
    Change(MdChange),
    /// A level change that moves no data, or a raid1's number of copies (md's takeovers, raid1
    /// to raid1 included).
    Takeover(TakeoverRequest),
}

/// What was asked, checked, and the devices it adds, open.
type Checked = (Asked, Vec<Arc<dyn MemberDevice>>);

/// A grow or change waiting for the runner to wind down.
pub(super) struct GrowAsk {
    what: Asked,
    added: Vec<Arc<dyn MemberDevice>>,
    pub(super) reply: Sender<Result<String, ManageError>>,
}

/// What the reshape, or a change written as on a stopped array, takes over from a runner wound
/// down for it (what was asked comes beside it, from [`Runner::hand_over`]).
pub(in crate::service) struct Handoff {
    /// The array's devices (members and spares), and the ones to add.
    pub devices: Vec<Arc<dyn MemberDevice>>,
    pub added: Vec<Arc<dyn MemberDevice>>,
    /// Answered once the reshape has started or the change is written, or with why not.
    pub reply: Sender<Result<String, ManageError>>,
    /// Requests that arrived while the runner wound down, in order.
    pub parked: Vec<(BlockOp, Done)>,
    /// Callers waiting for the array to be idle (`wait`): the reshape answers them at its end.
    pub idle_waiters: Vec<Sender<ArrayStatus>>,
    pub report: StopReport,
    pub config: ServiceConfig,
    /// The array's identity and md's words for its shape, for its status.
    pub uuid: String,
    pub md_shape: Option<String>,
    /// The wind-down's last step, flushing and marking the array clean, failed: the reshape
    /// does not start.
    pub failed: Option<String>,
    /// The change to make once the array is idle again (the next step of a level change).
    pub follow_up: Option<FollowUp>,
}

impl Runner {
    /// Check the reshape `request` asks, with `add` as the new devices; if it may go, start
    /// winding down for it (see the module documentation). A refusal changes nothing. (Whether
    /// the chunk size and layout may be is the reshape's to say, once it has the superblocks:
    /// refused then, the array is served again as it was.)
    pub(super) fn ask_grow(
        &mut self,
        request: ReshapeRequest,
        add: Vec<PathBuf>,
        force: bool,
        reply: Sender<Result<String, ManageError>>,
    ) {
        let checked = if self.array.md().is_some_and(|md| md.plan.level == Level::Raid1) {
            self.check_copies(&request, &add, force)
        } else if force {
            Err(ManageError::Grow("--force goes with a raid1's number of devices only".into()))
        } else {
            self.check_grow(&request, &add).map(|added| (Asked::Reshape(request), added))
        };
        self.wind_down_for(checked, reply);
    }

    /// Start winding down for what was asked, if its checks let it go (the runner hands the
    /// array over once the requests in flight are answered: see [`Runner::hand_over`]); else
    /// answer `reply` with the refusal, nothing changed.
    fn wind_down_for(&mut self, checked: Result<Checked, ManageError>, reply: Sender<Result<String, ManageError>>) {
        let (what, added) = match checked {
            Ok(go) => go,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        log(&format!("{what:?} asked: finishing the requests in flight"));
        // No pass starts from here on and no idle clean mark is started: the wind-down marks
        // the array clean itself.
        let now = self.now();
        self.policy.stop(&mut self.array, now);
        self.policy_events();
        self.grow_ask = Some(GrowAsk { what, added, reply });
    }

    /// Refuse any change while the array is read-only, another change is starting, or a pass
    /// runs.
    fn refuse_unless_free(&self) -> Result<(), ManageError> {
        if self.info.read_only {
            return Err(ManageError::ReadOnly);
        }
        if self.grow_ask.is_some() {
            return Err(ManageError::Grow("a grow or change is already starting".into()));
        }
        if let Some(pass) = self.policy.pass() {
            return Err(ManageError::Grow(format!(
                "a {} is running: wait for it to end (or stop it with idle) first",
                pass.action
            )));
        }
        Ok(())
    }

    /// Check a size or bitmap change (the change itself checks the array as on a stopped one,
    /// once wound down: refused then, the array is served again as it was); if it may go,
    /// start winding down for it.
    pub(super) fn ask_change(&mut self, change: MdChange, reply: Sender<Result<String, ManageError>>) {
        let checked = self.refuse_unless_free().and_then(|()| match self.array.md() {
            // md changes neither size nor bitmap while a resync is owed. The change as on a
            // stopped array would refuse it too, but only after clients had waited for the
            // wind-down, and with the resync the user stopped (idle) started again.
            Some(_) => self.refuse_owing_resync(),
            None => Err(ManageError::Grow("uraid changes the size and bitmap of md arrays only".into())),
        });
        self.wind_down_for(checked.map(|()| (Asked::Change(change), Vec::new())), reply);
    }

    /// Refuse, changing nothing, what the reshape cannot do; else the new devices, open.
    fn check_grow(&self, request: &ReshapeRequest, add: &[PathBuf]) -> Result<Vec<Arc<dyn MemberDevice>>, ManageError> {
        let refuse = |why: String| Err(ManageError::Grow(why));
        self.refuse_unless_free()?;
        let Some(md) = self.array.md() else {
            return refuse("uraid grows md arrays only".into());
        };
        if !md.plan.level.is_parity() && md.plan.level != Level::Raid10 {
            return refuse(format!(
                "uraid grows raid4, raid5, raid6 and raid10 arrays only; this one is {}",
                md.plan.level
            ));
        }
        let old = md.plan.raid_disks as u32;
        let restripe = request.chunk_sectors.is_some() || request.layout.is_some();
        let raid_devices = request.raid_devices.unwrap_or(old);
        if raid_devices < old {
            // The array shrinks under its clients: only on the user's word of the size it
            // shrinks to, which the reshape checks (naming it when absent or wrong).
            if !add.is_empty() {
                return refuse(format!("--add goes with more devices; the array goes from {old} to {raid_devices}"));
            }
        } else if request.array_size.is_some() {
            return refuse(
                "--array-size goes with a reshape onto fewer devices (the size the array shrinks to)".into(),
            );
        }
        if raid_devices == old && !restripe {
            return refuse(format!("the array already has {old} devices: nothing to do"));
        }
        if raid_devices == old && !add.is_empty() {
            return refuse(format!(
                "--add takes new devices for more members; the array keeps its {old} devices (give --raid-devices)"
            ));
        }
        if raid_devices > old && add.len() as u32 != raid_devices - old {
            return refuse(format!(
                "growing from {old} to {raid_devices} devices needs {} new device(s) (--add); {} given",
                raid_devices - old,
                add.len()
            ));
        }
        if self.array.engine().degraded() {
            return refuse("the array is degraded: rebuild it before growing it".into());
        }
        self.refuse_owing_resync()?;
        if self.array.write_intent().is_some() || self.array.ppl().is_some() {
            return refuse(
                "the array has a write-intent bitmap or a partial parity log, and md changes no shape with one (mdadm: \"Bitmap must be removed before shape can be changed\"): stop the array, remove a bitmap with uraid grow --bitmap=none, and grow it then"
                    .into(),
            );
        }
        self.open_added(add)
    }

    /// Refuse, changing nothing, a change of a raid1's copies the running array cannot take
    /// (md's takeover rules decide the rest once it is wound down: refused then, it is served
    /// again as it was); else the change, and the new devices, open.
    fn check_copies(&self, request: &ReshapeRequest, add: &[PathBuf], force: bool) -> Result<Checked, ManageError> {
        let refuse = |why: String| Err(ManageError::Grow(why));
        self.refuse_unless_free()?;
        if request.chunk_sectors.is_some() || request.layout.is_some() || request.array_size.is_some() {
            return refuse("a raid1 has no chunk size or layout to change, and its size changes with --size".into());
        }
        let old = self.array.md().map_or(0, |md| md.plan.raid_disks as u32);
        let Some(raid_devices) = request.raid_devices else {
            return refuse("give --raid-devices, the number of copies the raid1 is to have".into());
        };
        if raid_devices == old {
            return refuse(format!("the array already has {old} devices: nothing to do"));
        }
        if raid_devices < old && !add.is_empty() {
            return refuse(format!("--add goes with more devices; the array goes from {old} to {raid_devices}"));
        }
        let takeover = TakeoverRequest {
            level: None,
            raid_devices: Some(raid_devices),
            layout: None,
            added: add.len() as u32,
            force,
            restripe: false,
        };
        self.check_takeover(takeover, add)
    }

    /// Check a level change asked of the running array (see [`Runner::check_takeover`]); if it
    /// may go, start winding down for it.
    pub(super) fn ask_takeover(
        &mut self,
        request: TakeoverRequest,
        add: Vec<PathBuf>,
        reply: Sender<Result<String, ManageError>>,
    ) {
        let checked = match self.array.md() {
            None => Err(ManageError::Grow("uraid changes the level of md arrays only".into())),
            Some(_) if request.level.is_none() => {
                Err(ManageError::Grow("give --level, the level the array is to have".into()))
            }
            Some(_) => self.check_takeover(TakeoverRequest { added: add.len() as u32, ..request }, &add),
        };
        self.wind_down_for(checked, reply);
    }

    /// Ask the next step of a level change of itself, once the array is idle and whole: true
    /// when it was asked (the runner winds down for it). Refused, or the array left degraded,
    /// the chain ends there, said in the log with what is left to do.
    pub(super) fn ask_follow_up(&mut self) -> bool {
        if self.grow_ask.is_some() || !self.policy.pass_idle(&self.array) {
            return false;
        }
        let Some(follow_up) = self.follow_up.take() else { return false };
        if self.array.engine().degraded() {
            log(&format!(
                "{} is not started: the array is degraded; once it is rebuilt, ask it again",
                follow_up.describe()
            ));
            return false;
        }
        log(&format!("{} starts, as the level change asked", follow_up.describe()));
        let (reply, answer) = crossbeam_channel::bounded(1);
        match follow_up.clone() {
            FollowUp::Restripe { layout, .. } => {
                let request = ReshapeRequest { layout: Some(layout), ..ReshapeRequest::default() };
                self.ask_grow(request, Vec::new(), false, reply);
            }
            FollowUp::Takeover(request) => self.ask_takeover(request, Vec::new(), reply),
        }
        if let Ok(Err(e)) = answer.try_recv() {
            log(&format!("{} refused: {e}", follow_up.describe()));
        }
        self.grow_ask.is_some()
    }

    /// Refuse, changing nothing, a takeover (a level change, or a raid1's copies) the running
    /// array cannot take now; md's takeover rules decide the rest once it is wound down (refused
    /// then, it is served again as it was). Else the change, and the new devices, open.
    fn check_takeover(&self, request: TakeoverRequest, add: &[PathBuf]) -> Result<Checked, ManageError> {
        self.refuse_unless_free()?;
        self.refuse_owing_resync()?;
        if self.array.write_intent().is_some() {
            return Err(ManageError::Grow(
                "the array has a write-intent bitmap, and uraid changes the shape of arrays without one only (mdadm: \"Bitmap must be removed before shape can be changed\"): remove it first with uraid ctl NAME grow --bitmap=none"
                    .into(),
            ));
        }
        if self.array.ppl().is_some() {
            return Err(ManageError::Grow(
                "the array has a partial parity log, and uraid changes the shape of arrays without one only".into(),
            ));
        }
        let added = self.open_added(add)?;
        Ok((Asked::Takeover(request), added))
    }

    /// Refuse a change of shape while a resync is owed.
    fn refuse_owing_resync(&self) -> Result<(), ManageError> {
        if self.array.needs_resync() {
            return Err(ManageError::Grow(
                "the array owes a resync (it was not shut down cleanly): let it finish first".into(),
            ));
        }
        Ok(())
    }

    /// The devices `add` names, open, each checked to be new to this array and blank.
    fn open_added(&self, add: &[PathBuf]) -> Result<Vec<Arc<dyn MemberDevice>>, ManageError> {
        let refuse = |why: String| Err(ManageError::Grow(why));
        let mut added: Vec<Arc<dyn MemberDevice>> = Vec::new();
        for path in add {
            // Before opening it: a device of this array is not opened for writing a second time.
            if let Ok(name) = self.resolve_member(&path.display().to_string()) {
                return refuse(format!("{}: already a device of this array (as {name})", path.display()));
            }
            let dev = crate::open_member::Member::open(path, true)
                .map_err(|source| ManageError::Open { path: path.clone(), source })?;
            match probe(&dev) {
                Ok(None) => {}
                Ok(Some(_)) => {
                    return refuse(format!(
                        "{}: carries an md superblock; it may hold data, so it is not added (wipe it with uraid zero-superblock if it is free)",
                        path.display()
                    ))
                }
                Err(e) => return refuse(format!("{}: {e}", path.display())),
            }
            added.push(Arc::new(dev));
        }
        Ok(added)
    }

    /// Wind down as a stop does and hand the array over, with what was asked of it (see
    /// [`Handoff`]).
    pub(super) fn hand_over(mut self) -> (Asked, Handoff) {
        let ask = self.grow_ask.take().expect("a grow was asked for");
        // Waiting for the change to have run (the wind-down would answer them, as a stop does).
        let idle_waiters = std::mem::take(&mut self.idle_waiters);
        let failed = self.wind_down().err().map(|e| e.to_string());
        let handoff = Handoff {
            // Not those removed while served: they are out of the array, their superblocks left
            // behind by its later updates (a change written as on a stopped array would refuse
            // them as stale, and serving again would open them for nothing).
            devices: self.array.devices_in_place(),
            added: ask.added,
            reply: ask.reply,
            parked: std::mem::take(&mut self.parked),
            idle_waiters,
            report: std::mem::take(&mut self.report),
            // The limits in force, which `speed-limit` may have changed since the start (it
            // changes the policy's, not the config's).
            config: ServiceConfig { speed: self.policy.speed_limits(), ..self.config.clone() },
            uuid: self.array.identity(),
            md_shape: self.array.mdstat_shape(),
            failed,
            follow_up: self.follow_up.take(),
        };
        (ask.what, handoff)
    }
}
