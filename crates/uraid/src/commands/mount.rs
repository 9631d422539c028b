//! `uraid mount`: assemble an array and present it as one regular file through FUSE, so that
//! `losetup` turns it into a block device (mkfs, mount, fsck) without the kernel's md or nbd.
//!
//! The FUSE file system has a single inode, the root, and it is a regular file the size of the
//! array (FUSE may be mounted over a regular file). Requests go to the array service without
//! waiting: each FUSE reply is moved into the completion callback, so many reads and writes are
//! in flight together. SIGINT/SIGTERM or `fusermount -u FILE` unmounts; the array is then
//! flushed and marked clean.

use std::fs::OpenOptions;
use std::path::Path;
use std::thread;
use std::time::{Duration, SystemTime};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, InitFlags, KernelConfig, LockOwner,
    MountOption, OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request,
    Session, SessionACL, WriteFlags,
};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use uraid_device::service::{ArrayService, BlockOp, BlockReply, ServiceConfig, ServiceError, ServiceHandle};
use uraid_engine::EngineError;

use super::source::open_source;
use super::{err, report_stop, CliError, CliResult};
use crate::{ArraySource, MountArgs};

/// The array as a single-file FUSE file system.
struct ArrayFile {
    handle: ServiceHandle,
    attr: FileAttr,
}

/// Attributes are fixed for the life of the mount; the kernel may cache them for a while.
const ATTR_TTL: Duration = Duration::from_secs(60);

pub fn run(args: &MountArgs) -> CliResult {
    let file = args.file.as_path();
    let created = prepare_mountpoint(file)?;
    let result = mount_and_serve(args, file);
    if created {
        let _ = std::fs::remove_file(file);
    }
    result
}

/// The mount point must be a regular file (FUSE then shows the array in its place); create an
/// empty one if nothing is there. Returns whether it was created.
fn prepare_mountpoint(file: &Path) -> CliResult<bool> {
    match std::fs::symlink_metadata(file) {
        Ok(m) if m.file_type().is_file() => Ok(false),
        Ok(_) => {
            err(format!("{}: not a regular file; the array is mounted as a file, give a file path", file.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(file)
                .map_err(|e| CliError(format!("{}: creating the mount point: {e}", file.display())))?;
            Ok(true)
        }
        Err(e) => err(format!("{}: {e}", file.display())),
    }
}

fn mount_and_serve(args: &MountArgs, file: &Path) -> CliResult {
    let source = ArraySource {
        volume: args.volume.clone(),
        plex: args.plex.clone(),
        raidframe: args.raidframe.clone(),
        scan: args.scan.clone(),
        uuid: args.uuid.clone(),
        serial: args.serial,
        members: args.members.clone(),
    };
    let array = open_source(&source, !args.read_only)?;
    let summary = format!("{} ({} bytes)", array.describe(), array.size());
    let service = ArrayService::start(array, args.member_io.apply(ServiceConfig::default())?);
    let handle = service.handle();
    let now = SystemTime::now();
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let attr = FileAttr {
        ino: INodeNo(1),
        size: handle.info().size,
        blocks: handle.info().size.div_ceil(512),
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind: FileType::RegularFile,
        perm: if args.read_only { 0o444 } else { 0o644 },
        nlink: 1,
        uid,
        gid,
        rdev: 0,
        blksize: handle.info().preferred_block_size() as u32,
        flags: 0,
    };
    let mut options =
        vec![MountOption::FSName(format!("uraid:{}", handle.info().level)), MountOption::Subtype("uraid".into())];
    if args.read_only {
        options.push(MountOption::RO);
    }
    let mut config = Config::default();
    config.mount_options = options;
    config.acl = if args.allow_other { SessionACL::All } else { SessionACL::Owner };
    config.n_threads = Some(2);
    let fs = ArrayFile { handle, attr };
    let mut session = match Session::new(fs, file, &config) {
        Ok(s) => s,
        Err(e) => {
            let _ = service.stop();
            return err(format!(
                "{}: mounting with FUSE: {e} (is /dev/fuse there, and fusermount3 installed?)",
                file.display()
            ));
        }
    };
    let mut unmounter = session.unmount_callable();
    let mut signals =
        Signals::new([SIGINT, SIGTERM]).map_err(|e| CliError(format!("installing signal handlers: {e}")))?;
    let signal_handle = signals.handle();
    let shown = file.display().to_string();
    let watcher = thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
            eprintln!("uraid: {name}: unmounting {shown}");
            if let Err(e) = unmounter.unmount() {
                eprintln!("uraid: unmounting {shown}: {e}");
            }
        }
    });
    eprintln!(
        "uraid: {summary} mounted as the file {}; attach it with: losetup -f --show {}",
        file.display(),
        file.display()
    );
    let served = session.run();
    signal_handle.close();
    let _ = watcher.join();
    let stopped = service.stop();
    served.map_err(|e| CliError(format!("{}: FUSE session: {e}", file.display())))?;
    let report = stopped.map_err(|e| CliError(format!("stopping the array: {e}")))?;
    report_stop(&report, args.read_only, &format!("unmounted {}", file.display()));
    Ok(())
}

fn errno(e: &ServiceError) -> Errno {
    match e {
        ServiceError::Engine(EngineError::OutOfRange { .. } | EngineError::Unaligned { .. }) => Errno::EINVAL,
        ServiceError::ReadOnly => Errno::EROFS,
        ServiceError::Stopping => Errno::from_i32(libc::ESHUTDOWN),
        ServiceError::Engine(_) | ServiceError::Metadata(_) | ServiceError::Reshape(_) => Errno::EIO,
    }
}

fn wants_write(flags: OpenFlags) -> bool {
    !matches!(flags.acc_mode(), OpenAccMode::O_RDONLY)
}

impl ArrayFile {
    fn size(&self) -> u64 {
        self.attr.size
    }

    fn done_empty(reply: ReplyEmpty) -> uraid_device::service::Done {
        Box::new(move |r: Result<BlockReply, ServiceError>| match r {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        })
    }
}

impl Filesystem for ArrayFile {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Larger requests mean fewer round trips; the kernel lowers these to what it allows.
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_readahead(1 << 20);
        // Without it the kernel turns every O_DIRECT read or write of an asynchronous caller
        // (libaio, io_uring: a VM's disk, fio) into one that waits, so queue depth is lost. A
        // kernel that lacks it answers with the flags it has; the mount works either way.
        let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        Ok(())
    }

    fn lookup(&self, _req: &Request, _parent: INodeNo, _name: &std::ffi::OsStr, reply: ReplyEntry) {
        // The root is a file: nothing lives under it.
        reply.error(Errno::ENOTDIR);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if ino != INodeNo(1) {
            return reply.error(Errno::ENOENT);
        }
        reply.attr(&ATTR_TTL, &self.attr);
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // The file is the array: its size is the array's. Other attributes are not stored.
        match size {
            Some(s) if s != self.size() => reply.error(Errno::EPERM),
            _ => reply.attr(&ATTR_TTL, &self.attr),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if wants_write(flags) && self.handle.info().read_only {
            return reply.error(Errno::EROFS);
        }
        // Direct writes from several callers may run at once, as on a block device (the kernel
        // otherwise holds the file's lock across each: one writer at a time). Writes that
        // overlap while both are in flight land in either order there too.
        reply.opened(FileHandle(0), FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES);
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // Reads at or past the end are short, as for any file.
        let len = u64::from(size).min(self.size().saturating_sub(offset));
        if len == 0 {
            return reply.data(&[]);
        }
        self.handle.submit(
            BlockOp::Read { offset, len },
            Box::new(move |r| match r {
                Ok(BlockReply::Data(d)) => match d.as_single() {
                    Some(one) => reply.data(one),
                    // FUSE takes one slice; the kernel copies it anyway.
                    None => reply.data(&d.to_vec()),
                },
                Ok(BlockReply::Done) => reply.error(Errno::EIO),
                Err(e) => reply.error(errno(&e)),
            }),
        );
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The file cannot grow: a write at the end is a full disk; one crossing it is short.
        let room = self.size().saturating_sub(offset);
        if room == 0 && !data.is_empty() {
            return reply.error(Errno::from_i32(libc::ENOSPC));
        }
        let n = (data.len() as u64).min(room) as usize;
        let fua = flags.0 & (libc::O_SYNC | libc::O_DSYNC) != 0;
        self.handle.submit(
            BlockOp::Write { offset, data: uraid_engine::bufpool::bytes_from_slice(&data[..n]), fua },
            Box::new(move |r| match r {
                Ok(_) => reply.written(n as u32),
                Err(e) => reply.error(errno(&e)),
            }),
        );
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        // close() does not make data durable on a block device either; fsync does.
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.handle.submit(BlockOp::Flush, ArrayFile::done_empty(reply));
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let size = self.size();
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let op = mode & !libc::FALLOC_FL_KEEP_SIZE;
        let Some(end) = offset.checked_add(length) else {
            return reply.error(Errno::EINVAL);
        };
        if op == libc::FALLOC_FL_PUNCH_HOLE || op == libc::FALLOC_FL_ZERO_RANGE {
            if op == libc::FALLOC_FL_PUNCH_HOLE && !keep_size {
                // fallocate(2): PUNCH_HOLE must come with KEEP_SIZE.
                return reply.error(Errno::EOPNOTSUPP);
            }
            if self.handle.info().read_only {
                return reply.error(Errno::EROFS);
            }
            // Zeroing past the end would grow a file that cannot grow.
            if end > size && !keep_size {
                return reply.error(Errno::from_i32(libc::ENOSPC));
            }
            let len = end.min(size).saturating_sub(offset);
            if len == 0 {
                return reply.ok();
            }
            let may_deallocate = op == libc::FALLOC_FL_PUNCH_HOLE;
            self.handle.submit(BlockOp::Zero { offset, len, may_deallocate, fua: false }, ArrayFile::done_empty(reply));
        } else if op == 0 {
            // Plain allocation: every byte of the array already exists; it cannot grow.
            if end > size && !keep_size {
                reply.error(Errno::from_i32(libc::ENOSPC))
            } else {
                reply.ok()
            }
        } else {
            reply.error(Errno::EOPNOTSUPP);
        }
    }
}
