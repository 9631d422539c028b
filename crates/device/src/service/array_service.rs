//! `ArrayService`: starting the service over an assembled array (the member I/O paths and the
//! engine thread) and stopping it.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::engine_thread::{self, configure_engine, Phase, Shared};
use super::inline;
use super::messages::Msg;
use super::notifier::{Inbox, Notifier};
use super::reshaping::{CarriedOver, Reshaping};
use super::runner::Runner;
use super::types::SharedInfo;
use super::{log, uring, IoBackend, ServiceConfig, ServiceHandle, ServiceInfo, StopError, StopReport};
use crate::open_array::OpenArray;
use crate::reshape::Grow;

/// The running service: the engine thread and its member workers.
pub struct ArrayService {
    handle: ServiceHandle,
    engine_thread: Option<JoinHandle<()>>,
}

impl ArrayService {
    /// Start serving `array`.
    pub fn start(mut array: OpenArray, config: ServiceConfig) -> ArrayService {
        configure_engine(&mut array, &config);
        let info = Arc::new(ServiceInfo::of(&array));
        let inline = Arc::new(inline::InlineIo::new(config.inline_max));
        let notifier = Arc::new(Notifier::new().expect("creating the engine thread's eventfd"));
        let (inbox, rx) = Inbox::new(notifier);
        let config = usable_io(config);
        let runner = Runner::start(array, config, Arc::clone(&info), inbox.clone(), Arc::clone(&inline));
        ArrayService::spawn(
            Phase::Serving(Box::new(runner)),
            rx,
            Shared { info: Arc::new(SharedInfo::new(info)), inbox, inline },
        )
    }

    /// Serve an md array left part-way through a reshape (by a crash, a stop, or the kernel),
    /// continuing the reshape in the background (see `reshaping`); once it finishes, the array
    /// is served in its new shape. `uuid` and `md_shape` are for its status.
    pub fn start_reshaping(grow: Grow, config: ServiceConfig, uuid: String, md_shape: Option<String>) -> ArrayService {
        let info = Arc::new(ServiceInfo::reshaping(&grow));
        let config = usable_io(config);
        let inline = Arc::new(inline::InlineIo::new(config.inline_max));
        let notifier = Arc::new(Notifier::new().expect("creating the engine thread's eventfd"));
        let (inbox, rx) = Inbox::new(notifier);
        let carried = CarriedOver {
            report: StopReport::default(),
            idle_waiters: Vec::new(),
            requests: Vec::new(),
            follow_up: None,
        };
        let reshaping = Reshaping::new(grow, config, Arc::clone(&info), uuid, md_shape, carried);
        ArrayService::spawn(
            Phase::Reshaping(Box::new(reshaping)),
            rx,
            Shared { info: Arc::new(SharedInfo::new(info)), inbox, inline },
        )
    }

    fn spawn(first: Phase, rx: crossbeam_channel::Receiver<Msg>, shared: Shared) -> ArrayService {
        let handle = ServiceHandle {
            inbox: shared.inbox.clone(),
            info: Arc::clone(&shared.info),
            inline: Arc::clone(&shared.inline),
        };
        let engine_thread = std::thread::Builder::new()
            .name("engine".into())
            .spawn(move || engine_thread::run(first, rx, shared))
            .expect("spawning the engine thread");
        ArrayService { handle, engine_thread: Some(engine_thread) }
    }

    pub fn handle(&self) -> ServiceHandle {
        self.handle.clone()
    }

    /// Refuse new requests, finish every accepted one, flush the members and mark the array
    /// clean. Returns what happened while serving, or why the final update failed.
    pub fn stop(mut self) -> Result<StopReport, StopError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let result = match self.handle.inbox.send(Msg::Stop(tx)) {
            Ok(()) => rx.recv().unwrap_or(Err(StopError::NoReport)),
            Err(_) => Err(StopError::Ended),
        };
        if let Some(t) = self.engine_thread.take() {
            if t.join().is_err() {
                return Err(StopError::Panicked);
            }
        }
        result
    }
}

/// `config` with member I/O on threads where io_uring is not available.
fn usable_io(mut config: ServiceConfig) -> ServiceConfig {
    if config.io == IoBackend::Uring {
        if let Err(e) = uring::available() {
            log(&format!("io_uring is not available ({e}); member I/O uses threads"));
            config.io = IoBackend::Threads;
        }
    }
    config
}
