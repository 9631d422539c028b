//! The engine thread's phases: serving the array (`runner`), and reshaping it (`reshaping`),
//! on the same inbox, so clients and the control socket keep their handles throughout. A grow
//! asked of the runner winds it down and starts the reshape; a takeover (a level change, a
//! raid1's copies) or a size or bitmap change winds it down, is written as on a stopped array,
//! and the array is served again; a reshape that finishes opens the array again in its new
//! shape and serves it with a new runner (a resync first if the array was written dirty
//! meanwhile, as the policy starts for any array found dirty). Each time the array is served
//! again, what front ends tell new connections (`SharedInfo`) is replaced.

use std::sync::Arc;

use crossbeam_channel::Receiver;

use super::follow_up::FollowUp;
use super::inline::InlineIo;
use super::messages::Msg;
use super::notifier::{self, Inbox};
use super::reshaping::{CarriedOver, ReshapeEnd, Reshaping};
use super::runner::{Asked, Handoff, Runner};
use super::types::{answer_stopping, SharedInfo};
use super::{log, ManageError, ServiceConfig, ServiceInfo};
use crate::md_change::change_on;
use crate::member::MemberDevice;
use crate::open_array::OpenArray;
use crate::reshape::{Grow, GrowError, ReshapeRequest};
use crate::takeover::{restripe_first_on, take_over_on};
use uraid_md::takeover::TakeoverRequest;

/// What the engine thread runs now.
pub(super) enum Phase {
    Serving(Box<Runner>),
    Reshaping(Box<Reshaping>),
    Ended,
}

/// What every phase shares with the handles.
pub(super) struct Shared {
    /// The facts front ends take per connection, replaced when the array is served again in a
    /// new shape.
    pub info: Arc<SharedInfo>,
    pub inbox: Inbox,
    pub inline: Arc<InlineIo>,
}

/// The engine thread: run `first`, and the phases it leads to, until the service stops.
pub(super) fn run(first: Phase, rx: Receiver<Msg>, shared: Shared) {
    notifier::engine_thread_starts(&shared.inbox.notifier);
    let mut phase = first;
    loop {
        phase = match phase {
            Phase::Serving(runner) => match runner.serve(&rx) {
                None => Phase::Ended,
                Some((Asked::Reshape(request), handoff)) => begin_reshape(handoff, request, None, &shared),
                Some((Asked::Change(change), handoff)) => as_stopped(handoff, "change", &shared, |devices, _| {
                    change_on(devices.clone(), change)
                        .map(|done| (done.to_string(), devices, None))
                        .map_err(|e| e.to_string())
                }),
                Some((Asked::Takeover(request), handoff)) => take_over_served(handoff, request, &shared),
            },
            Phase::Reshaping(reshaping) => match reshaping.serve(&rx) {
                ReshapeEnd::Stopped => Phase::Ended,
                ReshapeEnd::Finished(f) => serve_again(f.devices, f.config, f.carried, &shared),
            },
            Phase::Ended => break,
        };
    }
    shared.inbox.close();
    notifier::engine_thread_ends();
}

/// Answer the wound-down runner's ask (`what`: a grow, or a size or bitmap change) with `why` it
/// was refused, and serve the array as it was.
fn refused(what: &str, why: String, h: Handoff, shared: &Shared) -> Phase {
    log(&format!("{what} refused: {why}"));
    let _ = h.reply.send(Err(ManageError::Grow(why)));
    let carried =
        CarriedOver { report: h.report, idle_waiters: h.idle_waiters, requests: h.parked, follow_up: h.follow_up };
    serve_again(h.devices, h.config, carried, shared)
}

/// A takeover asked of the running array. Where md takes the level over only from another
/// layout, the array is restriped first, the takeover following once that has ended; where the
/// layout asked for is not the one the takeover gives, the restripe follows once the new slots
/// are rebuilt (mdadm's chains).
fn take_over_served(h: Handoff, request: TakeoverRequest, shared: &Shared) -> Phase {
    match restripe_first_on(h.devices.clone(), &request) {
        Err(e) => refused("grow", e.to_string(), h, shared),
        Ok(Some(layout)) => {
            let then = FollowUp::Takeover(request);
            let said = then.describe();
            let restripe = ReshapeRequest { layout: Some(layout), ..ReshapeRequest::default() };
            begin_reshape(Handoff { follow_up: Some(then), ..h }, restripe, Some(&said), shared)
        }
        Ok(None) => as_stopped(h, "grow", shared, |devices, added| {
            take_over_on(devices, added, &request)
                .map(|(done, kept)| {
                    let then =
                        done.change.restripe_to.map(|layout| FollowUp::Restripe { level: done.change.level, layout });
                    (done.lines().join("; "), kept, then)
                })
                .map_err(|e| e.to_string())
        }),
    }
}

/// Make a change as on a stopped array (`change` takes the array's devices and the ones to
/// add, and says what it did and which devices now make the array: a size or bitmap change, a
/// takeover), then serve the array again from those devices, in its new shape (a new runner
/// rebuilds any slot added). Refused, `what` in the log, the array is served as it was.
fn as_stopped(
    h: Handoff,
    what: &str,
    shared: &Shared,
    change: impl FnOnce(
        Vec<Arc<dyn MemberDevice>>,
        Vec<Arc<dyn MemberDevice>>,
    ) -> Result<(String, Vec<Arc<dyn MemberDevice>>, Option<FollowUp>), String>,
) -> Phase {
    if let Some(why) = h.failed.clone() {
        return refused(what, format!("marking the array clean before the change failed: {why}"), h, shared);
    }
    match change(h.devices.clone(), h.added.clone()) {
        Ok((done, devices, then)) => {
            log(&done);
            let _ = h.reply.send(Ok(done));
            let carried = CarriedOver {
                report: h.report,
                idle_waiters: h.idle_waiters,
                requests: h.parked,
                follow_up: then.or(h.follow_up),
            };
            serve_again(devices, h.config, carried, shared)
        }
        Err(why) => refused(what, why, h, shared),
    }
}

/// Record the grow in the superblocks and start the reshape; if it cannot start, serve the
/// array as it was. `then` says what follows it, for the answer.
fn begin_reshape(h: Handoff, request: ReshapeRequest, then: Option<&str>, shared: &Shared) -> Phase {
    if let Some(why) = h.failed.clone() {
        return refused("grow", format!("marking the array clean before the reshape failed: {why}"), h, shared);
    }
    match Grow::start_reshape_on(h.devices.clone(), h.added.clone(), request) {
        Ok(grow) => {
            let names: Vec<&str> = h.added.iter().map(|d| d.name()).collect();
            let added = if names.is_empty() { String::new() } else { format!("added {}; ", names.join(", ")) };
            let follows =
                then.map(|t| format!("; {t} follows once it ends, as mdadm restripes first")).unwrap_or_default();
            let in_place = match grow.critical_section() {
                0 => String::new(),
                bytes => format!(
                    " in place (no room to move the data offset; its critical section, {}K, was backed up on the added devices first, as mdadm backs it up)",
                    bytes / 1024
                ),
            };
            let _ = h.reply.send(Ok(format!("{added}reshape {} started{in_place}{follows}", grow.change())));
            let carried = CarriedOver {
                report: h.report,
                idle_waiters: h.idle_waiters,
                requests: h.parked,
                follow_up: h.follow_up,
            };
            // New connections are told the array as it is while reshaped: onto fewer members,
            // the size it shrinks to (connected clients keep theirs, and are refused past it).
            let info = Arc::new(ServiceInfo::reshaping(&grow));
            shared.info.publish(Arc::clone(&info));
            Phase::Reshaping(Box::new(Reshaping::new(grow, h.config, info, h.uuid, h.md_shape, carried)))
        }
        Err(e @ GrowError::NotTakenUp(_)) => {
            // The superblocks say the reshape began, but it cannot be taken up: nothing more is
            // written; the next assembly (or the kernel) continues it.
            let why = e.to_string();
            log(&why);
            let _ = h.reply.send(Err(ManageError::Grow(why)));
            answer_stopping(h.parked);
            Phase::Ended
        }
        Err(e) => refused("grow", e.to_string(), h, shared),
    }
}

/// Open the array of `devices` again, writable, and serve it with a new runner.
fn serve_again(
    devices: Vec<Arc<dyn MemberDevice>>,
    config: ServiceConfig,
    carried: CarriedOver,
    shared: &Shared,
) -> Phase {
    let boxed: Vec<Box<dyn MemberDevice>> = devices.into_iter().map(|d| Box::new(d) as Box<dyn MemberDevice>).collect();
    match OpenArray::assemble(boxed, true) {
        Ok(mut array) => {
            configure_engine(&mut array, &config);
            log(&format!("serving {}", array.describe()));
            // New connections see the array as it now is; connected clients keep what they
            // were told (past a size that shrank, their requests are refused as out of range).
            let info = Arc::new(ServiceInfo::of(&array));
            shared.info.publish(Arc::clone(&info));
            let mut runner = Runner::start(array, config, info, shared.inbox.clone(), Arc::clone(&shared.inline));
            runner.take_over(carried);
            Phase::Serving(Box::new(runner))
        }
        Err(e) => {
            log(&format!("opening the array again failed: {e}; the array is no longer served"));
            answer_stopping(carried.requests);
            Phase::Ended
        }
    }
}

/// Set `array`'s engine up as `config` asks (stripe cache, read policy and balancing, splits).
pub(super) fn configure_engine(array: &mut OpenArray, config: &ServiceConfig) {
    array.engine_mut().set_stripe_memory_limit(config.stripe_cache_bytes);
    array.engine_mut().set_read_policy(config.read_policy);
    array.engine_mut().set_latency_balancing(config.latency_balancing);
    array.engine_mut().set_split_tuning(config.split_tuning);
}
