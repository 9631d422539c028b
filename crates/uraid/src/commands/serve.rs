//! `uraid serve`: assemble an array and serve it over NBD until SIGINT/SIGTERM.
//!
//! The NBD protocol lives in `uraid-nbd`; the array side is `uraid_device::service`. This module
//! only joins them: it maps NBD commands to block operations and service errors to NBD errors,
//! and owns the order of a clean stop (stop accepting, answer what is in flight, flush, mark the
//! superblocks clean).

use std::sync::Arc;
use std::thread;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use uraid_device::service::{
    ArrayService, BlockOp, BlockReply, ServiceConfig, ServiceError, ServiceHandle, SpeedLimits,
};
use uraid_device::splice::PipedRead;
use uraid_engine::EngineError;
use uraid_nbd::tls::{ServerCredentials, ServerTls, TlsMode};
use uraid_nbd::{
    parse_listen, Errno, Export, ExportCommand, ExportError, ExportReply, ListenAddr, Server, ServerConfig, SplicedData,
};

use super::report_stop;
use super::reshaping::{reshape_in_progress, Reshaping};
use super::source::open_source;
use super::{CliError, CliResult};
use crate::size::parse_size;
use crate::{ServeArgs, TlsArgs, TlsChoice};

pub fn run(args: &ServeArgs) -> CliResult {
    let rate = |flag: &str, text: &Option<String>| -> CliResult<Option<u64>> {
        text.as_deref().map(|t| parse_size(t, 1).map_err(|e| CliError(format!("--{flag}: {e}")))).transpose()
    };
    let speed = SpeedLimits::default()
        .with(rate("speed-limit-min", &args.speed_limit_min)?, rate("speed-limit-max", &args.speed_limit_max)?)
        .map_err(|e| CliError(format!("--speed-limit-min/--speed-limit-max: {e}")))?;
    let mut stripe_cache_bytes = ServiceConfig::default().stripe_cache_bytes;
    if let Some(size) = &args.stripe_cache {
        stripe_cache_bytes = parse_size(size, 1).map_err(|e| CliError(format!("--stripe-cache: {e}")))?;
    }
    let addr = parse_listen(&args.listen, args.allow_remote)
        .map_err(|e| CliError(format!("--listen={}: {e}", args.listen)))?;
    let tls = server_tls(&args.tls)?;
    if matches!(addr, ListenAddr::Tcp(a) if !a.ip().is_loopback())
        && tls.as_ref().map(ServerTls::mode) != Some(TlsMode::Require)
    {
        eprintln!(
            "uraid: warning: serving on {} without --tls=require: anyone who reaches the port can read and write the array, in plain text",
            args.listen
        );
    }
    let tls_note = match &tls {
        None => String::new(),
        Some(t) if t.mode() == TlsMode::Require => ", TLS required".into(),
        Some(_) => ", TLS offered".into(),
    };
    // An md array part-way through a reshape is not opened writable as it stands: its reshape
    // is continued in the background while it is served.
    let opened = match open_source(&args.source, !args.read_only) {
        Ok(array) => Opened::Array(Box::new(array)),
        Err(e) if !args.read_only => match reshape_in_progress(&args.source) {
            Ok(Some(r)) => Opened::Reshaping(Box::new(r)),
            Ok(None) => return Err(e),
            Err(why) => return Err(CliError(format!("{e}; it cannot be continued while served: {why}"))),
        },
        Err(e) => return Err(e),
    };
    let (description, summary) = match &opened {
        Opened::Array(array) => {
            let slots = array.engine().slot_states().len();
            (
                format!("{} from uraid", array.describe()),
                format!(
                    "{} ({} bytes{}, {} of {} members)",
                    array.describe(),
                    array.size(),
                    if args.read_only { ", read-only" } else { "" },
                    slots - array.missing_slots().len(),
                    slots,
                ),
            )
        }
        Opened::Reshaping(r) => {
            let (from, to) = r.grow.raid_disks();
            let (done, total) = r.grow.progress();
            (
                format!("{} from uraid", r.description),
                format!(
                    "{} ({} bytes, reshaping from {from} to {to} members, at {}K of {}K)",
                    r.description,
                    r.grow.serving_size(),
                    done / 1024,
                    total / 1024
                ),
            )
        }
    };
    let config = args.member_io.apply(ServiceConfig {
        workers_per_member: args.member_threads.max(1),
        speed,
        stripe_cache_bytes,
        inline_max: uraid_device::service::SERVE_INLINE_MAX,
        ..ServiceConfig::default()
    })?;
    // Bind both sockets before the array is started, so a busy address costs nothing. The NBD
    // socket comes first: a control socket that answers tells scripts the export is there too.
    let listener = addr.bind().map_err(|e| CliError(format!("--listen={}: {e}", args.listen)))?;
    let mut control = args.control.as_deref().map(crate::control::bind).transpose()?;
    let service = match opened {
        Opened::Array(array) => ArrayService::start(*array, config),
        Opened::Reshaping(r) => {
            let r = *r;
            ArrayService::start_reshaping(r.grow, config, r.uuid, r.md_shape)
        }
    };
    if let Some(c) = control.as_mut() {
        if let Err(e) = c.serve(service.handle()) {
            let _ = service.stop();
            return Err(e);
        }
    }
    let export = Arc::new(ArrayExport { handle: service.handle(), splice: !args.no_splice });
    let server = Arc::new(Server::new(
        export,
        ServerConfig {
            export_name: args.export_name.clone(),
            description: Some(description),
            tls,
            ..ServerConfig::default()
        },
    ));

    let mut signals =
        Signals::new([SIGINT, SIGTERM]).map_err(|e| CliError(format!("installing signal handlers: {e}")))?;
    let signal_handle = signals.handle();
    let stopper = Arc::clone(&server);
    let watcher = thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
            eprintln!("uraid: {name}: stopping; finishing requests in flight");
            stopper.stop();
        }
    });
    eprintln!("uraid: serving {summary} on {}{tls_note}", args.listen);
    let served = server.run(listener);
    signal_handle.close();
    let _ = watcher.join();
    let stopped = service.stop();
    served.map_err(|e| CliError(format!("serving on {}: {e}", args.listen)))?;
    let report = stopped.map_err(|e| CliError(format!("stopping the array: {e}")))?;
    report_stop(&report, args.read_only, "stopped");
    Ok(())
}

/// What `serve` opened: an array as it stands, or one whose reshape it continues.
enum Opened {
    Array(Box<uraid_device::OpenArray>),
    Reshaping(Box<Reshaping>),
}

/// The export's TLS from `--tls`, `--tls-psk`, `--tls-certificates` and `--tls-verify-peer`,
/// checked and loaded before anything is opened (a bad key file costs nothing).
fn server_tls(args: &TlsArgs) -> CliResult<Option<ServerTls>> {
    if args.tls_verify_peer && args.tls_certificates.is_none() {
        return Err(CliError(
            "--tls-verify-peer checks client certificates and needs --tls-certificates=DIR (PSK clients are checked by their key)"
                .into(),
        ));
    }
    let credentials = match (&args.tls_psk, &args.tls_certificates) {
        (Some(file), None) => Some(ServerCredentials::Psk { file: file.clone() }),
        (None, Some(dir)) => Some(ServerCredentials::X509 { dir: dir.clone(), verify_peer: args.tls_verify_peer }),
        (None, None) => None,
        (Some(_), Some(_)) => return Err(CliError("--tls-psk and --tls-certificates: give one".into())),
    };
    let (mode, credentials) =
        match (args.tls, credentials) {
            (None | Some(TlsChoice::Off), None) => return Ok(None),
            (None, Some(_)) => return Err(CliError(
                "--tls-psk or --tls-certificates without --tls: add --tls=require (or --tls=on to let clients choose)"
                    .into(),
            )),
            (Some(TlsChoice::Off), Some(_)) => {
                return Err(CliError(
                    "--tls=off with --tls-psk or --tls-certificates: TLS credentials given but TLS turned off".into(),
                ))
            }
            (Some(_), None) => {
                return Err(CliError("--tls=on and --tls=require need --tls-psk=FILE or --tls-certificates=DIR".into()))
            }
            (Some(TlsChoice::On), Some(c)) => (TlsMode::On, c),
            (Some(TlsChoice::Require), Some(c)) => (TlsMode::Require, c),
        };
    let flag = match &credentials {
        ServerCredentials::Psk { .. } => "--tls-psk",
        ServerCredentials::X509 { .. } => "--tls-certificates",
    };
    ServerTls::new(mode, &credentials).map(Some).map_err(|e| CliError(format!("{flag}: {e}")))
}

/// Reads from this size up are tried as spliced replies. Below it, copying the bytes costs
/// about what splicing adds (two more system calls per read, and a reply that cannot be
/// gathered into one socket write with its neighbours). Measured with the limit at 4 KiB,
/// fio's random reads at iodepth 32, spliced against copied (median of four alternating
/// pairs): 4 KiB 0.71x, 16 KiB 1.26x, 32 KiB 0.88x, 64 KiB 1.72x, 128 KiB 1.99x.
const SPLICE_MIN: u32 = 64 << 10;

/// The served array as the NBD server sees it.
struct ArrayExport {
    handle: ServiceHandle,
    /// Whether reads are tried as spliced replies (`--no-splice` turns it off).
    splice: bool,
}

/// A read's data in a pipe, as the NBD writer takes it.
struct SplicedRead(PipedRead);

impl SplicedData for SplicedRead {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn splice_to(&mut self, out: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
        self.0.splice_to(out)
    }
}

impl Export for ArrayExport {
    fn size(&self) -> u64 {
        self.handle.info().size
    }

    fn read_only(&self) -> bool {
        self.handle.info().read_only
    }

    fn preferred_block_size(&self) -> u32 {
        self.handle.info().preferred_block_size().min(32 << 20) as u32
    }

    /// Every connection goes through the one service, and a flush flushes every member: a flush
    /// on any connection covers writes completed on all of them.
    fn multi_conn_safe(&self) -> bool {
        true
    }

    fn submit(&self, cmd: ExportCommand, done: uraid_nbd::Completion) {
        if let ExportCommand::Read { offset, len } = cmd {
            if self.splice && len >= SPLICE_MIN {
                if let Some(piped) = self.handle.read_spliced(offset, u64::from(len)) {
                    return done(Ok(ExportReply::Spliced(Box::new(SplicedRead(piped)))));
                }
            }
        }
        let (op, prefetch) = match cmd {
            ExportCommand::Read { offset, len } => (BlockOp::Read { offset, len: u64::from(len) }, false),
            ExportCommand::Write { offset, data, fua } => (BlockOp::Write { offset, data, fua }, false),
            ExportCommand::Flush => (BlockOp::Flush, false),
            ExportCommand::Trim { offset, len, fua } => {
                // TRIM's FUA asks that the trim itself be durable: a flush after it does that.
                if fua {
                    let handle = self.handle.clone();
                    self.handle.submit(
                        BlockOp::Trim { offset, len: u64::from(len) },
                        Box::new(move |r| match r {
                            Ok(_) => handle.submit(BlockOp::Flush, Box::new(move |r| done(reply(r, false)))),
                            Err(e) => done(Err(export_error(&e))),
                        }),
                    );
                    return;
                }
                (BlockOp::Trim { offset, len: u64::from(len) }, false)
            }
            ExportCommand::WriteZeroes { offset, len, may_trim, fua } => {
                (BlockOp::Zero { offset, len: u64::from(len), may_deallocate: may_trim, fua }, false)
            }
            // A prefetch: reading pulls the range into the members' caches.
            ExportCommand::Cache { offset, len } => (BlockOp::Read { offset, len: u64::from(len) }, true),
        };
        self.handle.submit(op, Box::new(move |r| done(reply(r, prefetch))));
    }
}

fn reply(r: Result<BlockReply, ServiceError>, prefetch: bool) -> Result<ExportReply, ExportError> {
    match r {
        Ok(BlockReply::Data(d)) if !prefetch => Ok(ExportReply::Data(d)),
        Ok(_) => Ok(ExportReply::Done),
        Err(e) => Err(export_error(&e)),
    }
}

/// The NBD error a client should see for a service error.
fn export_error(e: &ServiceError) -> ExportError {
    let errno = match e {
        ServiceError::Engine(EngineError::OutOfRange { .. } | EngineError::Unaligned { .. }) => Errno::Inval,
        ServiceError::ReadOnly => Errno::Perm,
        ServiceError::Stopping => Errno::Shutdown,
        ServiceError::Engine(_) | ServiceError::Metadata(_) | ServiceError::Reshape(_) => Errno::Io,
    };
    ExportError::new(errno, e.to_string())
}
