//! `uraid`: software RAID in user space, on-disk compatible with Linux md.
//!
//! The binary is a thin front end: argument parsing (flags follow mdadm), then one module per
//! command under `commands/`. Every error is printed as one line naming what and where, and the
//! exit status is non-zero.

mod array_lines;
mod array_name;
mod commands;
mod control;
mod mdadm_conf;
mod mdstat;
mod notify;
mod progress;
mod report;
mod runtime_dir;
mod size;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "uraid",
    version,
    about = "Software RAID in user space, on-disk compatible with Linux md",
    after_help = "A member may be a file, a block device, or an NBD export named by its URI: \
                  nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH (a file whose name \
                  starts like a URI is given as ./nbd://...)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a new array on existing member files or block devices (like mdadm --create).
    Create(CreateArgs),
    /// Print the md superblock of each member (like mdadm --examine).
    Examine(ExamineArgs),
    /// Assemble read-only and describe the array (like mdadm --detail).
    Detail(DetailArgs),
    /// Write the array's logical contents to stdout.
    Cat(CatArgs),
    /// Write stdin into the array at an offset.
    Write(WriteArgs),
    /// Assemble an array and serve it over NBD (qemu, nbdcopy, nbd-client, fio) until
    /// SIGINT/SIGTERM, then flush and mark it clean.
    Serve(ServeArgs),
    /// Assemble an array and show it as one regular FILE through FUSE (losetup turns it into a
    /// block device); SIGINT/SIGTERM or `fusermount -u FILE` ends it.
    Mount(MountArgs),
    /// Start an array in the background under a name (like mdadm --assemble), served over NBD
    /// at RUNTIME/NAME/nbd.sock; returns once it serves.
    Assemble(AssembleArgs),
    /// List the arrays running under names, as /proc/mdstat does.
    #[command(alias = "stat")]
    Status(StatusArgs),
    /// Stop arrays started by assemble: flushed, marked clean, ended (like mdadm --stop).
    Stop(StopArgs),
    /// Report events of the running arrays (Fail, RebuildStarted, ...) as mdadm --monitor
    /// does, printing them and running --program for each.
    Monitor(MonitorArgs),
    /// Manage a running array through its control socket (serve --control=SOCKET), or by the
    /// NAME assemble started it under.
    Ctl(CtlArgs),
    /// Count inconsistent stripes/copies of a stopped array (md's check; changes nothing).
    Check(PassArgs),
    /// Rewrite inconsistent stripes/copies of a stopped array (md's repair).
    Repair(PassArgs),
    /// Resync a stopped array left dirty by a crash, then mark it clean.
    Resync(PassArgs),
    /// Add devices to a stopped array and rebuild them now (or keep them as hot spares).
    Add(AddArgs),
    /// Reshape a stopped raid4/5/6 onto more devices (mdadm --grow --raid-devices=N, the new
    /// devices given with --add), to another chunk size or layout (--chunk, --layout), or go on
    /// with a reshape left part-way (--continue), by uraid or by the kernel; change a stopped
    /// array's size (--size) or bitmap (--bitmap), its level where md moves no data (--level),
    /// or a raid1's number of devices.
    Grow(GrowArgs),
    /// Erase the md superblocks (every version found) of devices that are to be used for
    /// something else (like mdadm --zero-superblock); nothing else is written.
    ZeroSuperblock(ZeroSuperblockArgs),
    /// Measure parity kernels and memory bandwidth (reports speeds; asserts none).
    Bench(commands::bench::BenchArgs),
    /// FreeBSD gvinum (Vinum) drives, volumes, plexes and subdisks on drive files or block
    /// devices: create, list/l, ld, lv, lp, ls, printconfig, saveconfig, resetconfig, concat,
    /// stripe, raid5, mirror, as gvinum's verbs.
    Vinum(commands::vinum::VinumArgs),
    /// NetBSD raidctl's verbs on a RAIDframe set named by its configuration file (or found with
    /// --scan DIR): -s, -S, -p, -P, -i, -I, -g, -G, -f, -A, -M, -m, -c, -C, -u. Each command
    /// configures the set, does the verb and unconfigures it, leaving the labels NetBSD leaves.
    Raidctl(commands::raidctl::RaidctlArgs),
    /// Simulate in virtual time: the seed benchmarks over modelled disks (`seeds`), or the real
    /// engine under injected faults and crashes, judged against a model (`faults`).
    Sim(commands::sim::SimArgs),
}

#[derive(Args)]
pub struct AddArgs {
    /// A device to add (repeat for several). With none, a rebuild left unfinished resumes.
    #[arg(long = "device", value_name = "NEW")]
    pub device: Vec<PathBuf>,
    /// Upper speed limit of the rebuild (bytes per second, suffixes K, M, G).
    #[arg(long)]
    pub speed_limit_max: Option<String>,
    /// The array's current members.
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
}

#[derive(Args)]
pub struct GrowArgs {
    /// The number of devices the array is to have: more or fewer for raid4/5/6 (restriped onto
    /// them; fewer needs --array-size), more or fewer for raid1 (fewer only down to the devices
    /// it holds).
    #[arg(short = 'n', long)]
    pub raid_devices: Option<u32>,
    /// A blank device to grow onto (repeat for several), taking the new slots in order.
    #[arg(short = 'a', long, value_name = "NEW")]
    pub add: Vec<PathBuf>,
    /// Go on with a reshape left part-way (give every member, the added ones too).
    #[arg(long = "continue")]
    pub continue_: bool,
    /// mdadm's backup file: not taken. A grow that cannot move the data offset keeps the backup
    /// of its critical section on the added devices, as mdadm does without a backup file.
    #[arg(long, value_name = "FILE")]
    pub backup_file: Option<PathBuf>,
    /// Upper speed limit of the reshape (bytes of the array per second, suffixes K, M, G).
    #[arg(long)]
    pub speed_limit_max: Option<String>,
    /// The level to take the array over to without moving data, as md does: raid1 (2 devices)
    /// <-> raid5, raid1 -> raid0 (one device), raid0 -> raid4/raid5 (parity-last) and back, raid4 <-> raid5 (parity-last),
    /// raid5 -> raid6 (a -6 layout) and back, raid0 -> raid10 (near 2) and back. New slots take the --add devices, rebuilt later.
    #[arg(short = 'l', long)]
    pub level: Option<String>,
    /// Leave new slots that no --add device fills missing (mdadm's --force).
    #[arg(short = 'f', long)]
    pub force: bool,
    /// The chunk size to restripe to (a power of two, at least 4K; bare numbers are KiB).
    #[arg(short = 'c', long)]
    pub chunk: Option<String>,
    /// The layout to restripe to (raid5/6: left-symmetric, right-asymmetric, ..., parity-last;
    /// raid6 also the -6 forms), as create takes it. With --level: the layout the array ends
    /// in, one that keeps the data in place (preserve, parity-last, the -6 layout).
    #[arg(short = 'p', long)]
    pub layout: Option<String>,
    /// The space of each member the array uses: max (all each member allows) or a size (a bare
    /// number is KiB, as in mdadm; suffixes K, M, G); raid1, raid4/5/6 and raid10, stopped.
    /// The new space is resynced when the array next runs.
    #[arg(short = 'z', long)]
    pub size: Option<String>,
    /// With --size: record the new space as in sync (no resync), as mdadm's --assume-clean.
    #[arg(long, requires = "size")]
    pub assume_clean: bool,
    /// Add (internal) or remove (none) the write-intent bitmap of a stopped array.
    #[arg(short = 'b', long, value_name = "internal|none")]
    pub bitmap: Option<String>,
    /// With --bitmap=internal: bytes of each member per bitmap bit (a bare number is KiB, as in
    /// mdadm; default 64M, or larger when the bitmap would not fit).
    #[arg(long, value_name = "SIZE", requires = "bitmap")]
    pub bitmap_chunk: Option<String>,
    /// With --raid-devices onto fewer devices: the size the array shrinks to (a bare number is
    /// KiB, as in mdadm), the word that what lies past it may go. uraid says the size to give.
    #[arg(long)]
    pub array_size: Option<String>,
    /// The array's current members.
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
}

#[derive(Args)]
pub struct AssembleArgs {
    /// The name the array runs under (default: its md name without the `host:` part, else the
    /// first eight hex digits of its UUID). Letters, digits, '.', '_', '+', '-'.
    #[arg(short = 'N', long)]
    pub name: Option<String>,
    /// Find the members under DIR: those of the array --uuid, or of every array found there
    /// (each under its own name; arrays already running are passed over).
    #[arg(long, value_name = "DIR")]
    pub scan: Option<PathBuf>,
    /// Start the arrays an mdadm.conf-style FILE describes: each ARRAY line's (by UUID= and
    /// name=, named after its device, /dev/md/NAME), its members found among its devices= or
    /// the DEVICE lines' (glob patterns, partitions).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["scan", "members"])]
    pub config: Option<PathBuf>,
    /// With --scan or --config: the array to start, by UUID.
    #[arg(long)]
    pub uuid: Option<String>,
    /// Serve in this process until SIGINT/SIGTERM or `uraid stop NAME`, messages on stderr
    /// (for a service manager: contrib/systemd/uraid@.service).
    #[arg(long)]
    pub foreground: bool,
    /// Serve read-only; the members are opened read-only and never written.
    #[arg(long)]
    pub read_only: bool,
    /// Upper speed of background passes in bytes per second (as serve's).
    #[arg(long)]
    pub speed_limit_max: Option<String>,
    /// Lower speed of background passes in bytes per second (as serve's).
    #[arg(long)]
    pub speed_limit_min: Option<String>,
    /// Most memory the stripe buffers of parity writes may hold (as serve's).
    #[arg(long, value_name = "SIZE")]
    pub stripe_cache: Option<String>,
    /// The array's member files or block devices.
    #[arg(required_unless_present_any = ["scan", "config"], conflicts_with = "scan")]
    pub members: Vec<PathBuf>,
}

#[derive(Args)]
pub struct StatusArgs {
    /// Print JSON: for each array its name, pid, sockets, log and status (as ctl status --json).
    #[arg(long)]
    pub json: bool,
    /// Only these arrays (default: every running array).
    pub names: Vec<String>,
}

#[derive(Args)]
pub struct StopArgs {
    /// Stop every running array (the same as the name `all`).
    #[arg(long)]
    pub scan: bool,
    /// The arrays to stop, by name; `all` stops every one.
    #[arg(required_unless_present = "scan")]
    pub names: Vec<String>,
}

#[derive(Args)]
pub struct MonitorArgs {
    /// Run `PROG EVENT ARRAY [DEVICE]` for each event, as mdadm --monitor --program does.
    #[arg(long, alias = "alert", value_name = "PROG")]
    pub program: Option<PathBuf>,
    /// Print each event as a JSON object on a line of its own.
    #[arg(long)]
    pub json: bool,
    /// Seconds between looks at the arrays (mdadm's default is 60).
    #[arg(short, long, default_value_t = 2.0, value_name = "SECS")]
    pub delay: f64,
    /// Look once and exit: reports degraded arrays (DegradedArray), as mdadm --oneshot.
    #[arg(short = '1', long)]
    pub oneshot: bool,
    /// Report a TestMessage for every array found at the start.
    #[arg(short, long)]
    pub test: bool,
    /// Report a rebuild's progress each time it crosses a multiple of N percent (RebuildNN).
    #[arg(short = 'r', long, default_value_t = 20, value_parser = clap::value_parser!(u8).range(1..=99), value_name = "N")]
    pub increment: u8,
    /// Accepted for mdadm's sake: every running array is watched unless names are given.
    #[arg(long)]
    pub scan: bool,
    /// Only these arrays (default: every running array, those started later included).
    pub names: Vec<String>,
}

#[derive(Args)]
pub struct ZeroSuperblockArgs {
    /// Also erase damaged superblocks (md's magic, but not valid), and open a block device
    /// that is held open exclusively (a mounted file system, a running array).
    #[arg(short, long)]
    pub force: bool,
    /// Member files or block devices. Every one is checked before any is written: one that
    /// carries no md superblock (or is refused) means nothing is written.
    #[arg(required = true)]
    pub devices: Vec<PathBuf>,
}

#[derive(Args)]
pub struct CtlArgs {
    /// The control socket given to `uraid serve --control`, or the name of an array started
    /// by `uraid assemble`.
    #[arg(value_name = "SOCKET|NAME")]
    pub socket: PathBuf,
    #[command(subcommand)]
    pub op: CtlOp,
}

#[derive(Subcommand)]
pub enum CtlOp {
    /// Level, members and their state, and any running pass (like /proc/mdstat).
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Start a check pass (counts mismatches into mismatch_cnt).
    Check,
    /// Start a repair pass.
    Repair,
    /// Stop the running pass.
    Idle,
    /// Wait until no resync, recovery or check is running (like mdadm --wait).
    Wait {
        #[arg(long)]
        json: bool,
    },
    /// Add a device: rebuilt into a missing or failed slot, else kept as a hot spare.
    Add { member: PathBuf },
    /// Mark a member faulty (refused if that loses data, unless --force); a spare takes over.
    Fail {
        member: PathBuf,
        #[arg(long)]
        force: bool,
    },
    /// Remove a failed member or a spare (an active member must be failed first).
    Remove { member: PathBuf },
    /// Take a former member back into the slot it held, rebuilt only where the write-intent
    /// bitmap marks (mdadm --re-add); refused, with the reason, when that is not possible.
    #[command(name = "re-add")]
    ReAdd { member: PathBuf },
    /// Reshape the running raid4/5/6 (or near raid10) while it is served: onto more devices
    /// (mdadm --grow --raid-devices=N --add NEW) or fewer (--array-size), to another chunk size
    /// or layout, or several at once. The data is restriped in the background, as a reshape
    /// pass, while reads and writes go on. Returns once the reshape has started. Or change its
    /// level (--level, with --add for the slots the new level adds, which are then rebuilt, and
    /// the array restriped before or after where the change needs it, as mdadm chains the
    /// steps), a raid1's number of copies (--raid-devices, with --add for new ones), its size or
    /// bitmap (--size, --bitmap): written while requests wait a moment, the array then served
    /// again.
    Grow {
        /// The number of devices the array is to have (more, with --add; fewer, with
        /// --array-size; on raid1 the number of copies).
        #[arg(short = 'n', long, required_unless_present_any = ["chunk", "layout", "size", "bitmap", "level"])]
        raid_devices: Option<u32>,
        /// The level to take the array over to, as md does: raid0 to raid4, raid5 or raid10
        /// and back, a raid1 of two to raid5 and back, raid5 to raid6 (Q on a new last device)
        /// and back. --layout then names the new level's layout; where it, or md, needs
        /// another placement of the data, the array is restriped before or after the change.
        #[arg(short = 'l', long, conflicts_with_all = ["chunk", "size", "bitmap"])]
        level: Option<String>,
        /// A blank device to grow onto (repeat for several), taking the new slots in order.
        #[arg(short = 'a', long, value_name = "NEW")]
        add: Vec<PathBuf>,
        /// With --level, or --raid-devices on raid1: leave new slots missing when fewer devices
        /// are added than slots (mdadm's --force over its "Need N spares to avoid degraded
        /// array").
        #[arg(long, conflicts_with_all = ["chunk", "size", "bitmap"])]
        force: bool,
        /// The space of each member the array uses: max, or a size (bare numbers are KiB); the
        /// new space is resynced at once, and new connections are served the new size.
        #[arg(short = 'z', long, conflicts_with_all = ["raid_devices", "add", "chunk", "layout", "bitmap"])]
        size: Option<String>,
        /// With --size: record the new space as in sync (no resync).
        #[arg(long, requires = "size")]
        assume_clean: bool,
        /// Add (internal) or remove (none) the write-intent bitmap.
        #[arg(short = 'b', long, value_name = "internal|none", conflicts_with_all = ["raid_devices", "add", "chunk", "layout"])]
        bitmap: Option<String>,
        /// With --bitmap=internal: bytes of each member per bitmap bit (bare numbers are KiB).
        #[arg(long, value_name = "SIZE", requires = "bitmap")]
        bitmap_chunk: Option<String>,
        /// The chunk size to restripe to (a power of two, at least 4K; bare numbers are KiB).
        #[arg(short = 'c', long)]
        chunk: Option<String>,
        /// The layout to restripe to, as create names it at the array's level.
        #[arg(short = 'p', long)]
        layout: Option<String>,
        /// With --raid-devices onto fewer devices: the size the array shrinks to (bare numbers
        /// are KiB), the word that the rest may go, as mdadm's --grow --array-size set first.
        /// New connections are told it at once; connected clients are refused past it.
        #[arg(long, value_name = "SIZE", requires = "raid_devices", conflicts_with_all = ["add", "level", "size", "bitmap"])]
        array_size: Option<String>,
    },
    /// Show, or set, the speed limits of this array's background passes (resync, recovery,
    /// check, repair), as md's speed_limit_min / speed_limit_max; the running pass follows
    /// them at once. Prints the limits in force.
    SpeedLimit {
        /// Lower limit in bytes per second (suffixes K, M, G): below it a pass does not yield
        /// to clients.
        #[arg(long)]
        min: Option<String>,
        /// Upper limit in bytes per second (suffixes K, M, G).
        #[arg(long)]
        max: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show, or set, the limits of members reached over a network (NBD exports): how long a
    /// request may go unanswered before it fails (and, as with md's failfast, the member with
    /// it), and how a broken connection is retried. For MEMBER, or for every such member.
    /// Prints the limits in force.
    MemberLimits {
        /// The member (its URI as the array names it); every NBD member when left out.
        member: Option<PathBuf>,
        /// Request timeout: seconds, or with a unit (500ms, 30s); default 30s.
        #[arg(long)]
        timeout: Option<String>,
        /// Attempts to open a broken connection again before the member is gone; default 5.
        #[arg(long)]
        reconnect_attempts: Option<u32>,
        /// All reconnection attempts after one breakage end within this time; default 10s.
        #[arg(long)]
        reconnect_budget: Option<String>,
        /// Whether members lost for being unreachable are tried again and re-added by themselves
        /// when they answer (for the whole array); default on.
        #[arg(long, value_parser = ["on", "off"])]
        auto_readd: Option<String>,
        /// The wait before a lost member is first tried again (it doubles after each failed
        /// attempt), for the whole array; default 1s.
        #[arg(long)]
        readd_first: Option<String>,
        /// The longest wait between attempts to reach a lost member, for the whole array;
        /// default 30s.
        #[arg(long)]
        readd_max: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Stop the running array as SIGTERM does (requests in flight finished, members flushed,
    /// the array recorded clean), and wait until it has stopped (like mdadm --stop).
    Stop,
}

#[derive(Args)]
pub struct PassArgs {
    /// Upper speed limit of the pass (bytes per second, suffixes K, M, G); md's speed_limit_max.
    #[arg(long)]
    pub speed_limit_max: Option<String>,
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
}

#[derive(Args)]
pub struct CreateArgs {
    /// RAID level: linear, 0, 1, 4, 5, 6, 10 (or raid0, raid5, ...).
    #[arg(short, long)]
    pub level: String,
    /// Number of active members (raid slots), `missing` ones included.
    #[arg(short = 'n', long = "raid-devices")]
    pub raid_devices: u32,
    /// Number of hot spares: the members listed after the raid slots. raid-devices plus
    /// spare-devices must be the number of members given.
    #[arg(short = 'x', long = "spare-devices", default_value_t = 0)]
    pub spare_devices: u32,
    /// Chunk size (a bare number is KiB, as in mdadm; suffixes K, M, G). Default 512K.
    #[arg(short, long)]
    pub chunk: Option<String>,
    /// Layout: left-symmetric, left-asymmetric, right-symmetric, right-asymmetric, parity-first,
    /// parity-last (raid5/6, plus the -6 forms for raid6), n2/f2/o2... (raid10), original or
    /// alternate (multi-zone raid0).
    #[arg(short = 'p', long, alias = "parity")]
    pub layout: Option<String>,
    /// Metadata version: 1.2 (default; also "default" and "1"), 1.1, 1.0, or 0.90 (also "0.9"
    /// and "0": at the end of the members, data from sector 0, at most 27 devices and 4 TiB
    /// used per member).
    #[arg(short = 'e', long, default_value = "1.2")]
    pub metadata: String,
    /// Write-intent bitmap: internal or none.
    #[arg(short, long, default_value = "none")]
    pub bitmap: String,
    /// How redundancy stays consistent across a crash (mdadm's option): resync (a full resync
    /// after an unclean stop), bitmap (an internal write-intent bitmap, the same as
    /// --bitmap=internal) or ppl (a partial parity log on every member: no resync and no
    /// write hole; raid4/5/6, and md itself runs it on raid5 only). Default: resync, or bitmap
    /// with --bitmap=internal.
    #[arg(long, value_name = "POLICY")]
    pub consistency_policy: Option<String>,
    /// Bytes of each member per bitmap bit (a bare number is KiB, as in mdadm; default 64M).
    /// Smaller chunks make resyncs after a crash shorter and writes mark the bitmap more often.
    #[arg(long)]
    pub bitmap_chunk: Option<String>,
    /// Array name (stored as homehost:name when it fits, as mdadm does).
    #[arg(short = 'N', long)]
    pub name: Option<String>,
    /// Host name stored with the array name (default: this machine's).
    #[arg(long)]
    pub homehost: Option<String>,
    /// Space used on each member (a bare number is KiB, as in mdadm). Default: the most that
    /// fits on the smallest member.
    #[arg(short = 'z', long)]
    pub size: Option<String>,
    /// Skip the initial sync: the caller vouches that mirrors/parity are already consistent.
    #[arg(long)]
    pub assume_clean: bool,
    /// Overwrite members that already carry an md superblock.
    #[arg(short, long)]
    pub force: bool,
    /// Member files or block devices (must exist; make files with truncate -s), or NBD URIs,
    /// raid slots in order then spares. The word `missing` leaves its raid slot empty: the array starts
    /// degraded (as many as the level can lose).
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
}

#[derive(Args)]
pub struct ExamineArgs {
    /// Print JSON (one object per member, in an array).
    #[arg(long, conflicts_with_all = ["scan", "brief"])]
    pub json: bool,
    /// Print one mdadm.conf ARRAY line per md array found among the devices (those without an
    /// md superblock are skipped), as mdadm --examine --scan does; a folder stands for every
    /// file and block device under it.
    #[arg(short, long)]
    pub scan: bool,
    /// The same as --scan.
    #[arg(short, long)]
    pub brief: bool,
    /// With --scan: add level=, num-devices= and the member devices (devices=).
    #[arg(short, long)]
    pub verbose: bool,
    #[arg(required = true)]
    pub members: Vec<PathBuf>,
}

#[derive(Args)]
pub struct DetailArgs {
    #[arg(long)]
    pub json: bool,
    /// Describe the gvinum volume NAME of the drives given (or found under --scan).
    #[arg(long, value_name = "NAME")]
    pub volume: Option<String>,
    /// Describe the NetBSD RAIDframe set the raidctl configuration file CONFIG describes.
    #[arg(long, value_name = "CONFIG", conflicts_with_all = ["volume", "scan", "serial"])]
    pub raidframe: Option<PathBuf>,
    /// Of RAIDframe components given: the set to describe, by serial number.
    #[arg(long, value_name = "N", conflicts_with_all = ["volume", "scan"])]
    pub serial: Option<u32>,
    /// Find members under DIR and describe every array found there: one mdadm.conf ARRAY line
    /// each, as mdadm --detail --scan prints (-vv, --json or --export for everything).
    #[arg(long, value_name = "DIR")]
    pub scan: Option<PathBuf>,
    /// One mdadm.conf ARRAY line for the array (mdadm --detail --brief).
    #[arg(short, long, conflicts_with_all = ["json", "export"])]
    pub brief: bool,
    /// With an ARRAY line: add level=, num-devices= and the member devices (devices=). Given
    /// twice with --scan: the whole description of every array, not its ARRAY line.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Shell variables (MD_LEVEL=raid5, MD_UUID=..., MD_DEVICE_dev_NAME_ROLE=...), as mdadm
    /// --detail --export prints them.
    #[arg(short = 'Y', long, conflicts_with = "json")]
    pub export: bool,
    /// md members, gvinum drives with --volume, or RAIDframe components.
    #[arg(required_unless_present_any = ["scan", "raidframe"], conflicts_with = "scan")]
    pub members: Vec<PathBuf>,
}

#[derive(Args)]
pub struct CatArgs {
    /// Logical byte offset to start at (suffixes K, M, G allowed).
    #[arg(long, default_value = "0")]
    pub offset: String,
    /// Bytes to write out (default: to the end of the array).
    #[arg(long)]
    pub length: Option<String>,
    #[command(flatten)]
    pub source: ArraySource,
}

#[derive(Args)]
pub struct WriteArgs {
    /// Logical byte offset to write at (suffixes K, M, G allowed).
    #[arg(long)]
    pub offset: String,
    #[command(flatten)]
    pub source: ArraySource,
}

/// Which array a command runs: md members (or those under `--scan DIR`), with `--volume` a
/// FreeBSD gvinum volume of the drives given (or found under `--scan DIR`), or a NetBSD
/// RAIDframe set: of the components given or found (known by their labels), or with
/// `--raidframe CONFIG` of the components a raidctl configuration file names.
#[derive(Args, Clone, Debug, Default)]
pub struct ArraySource {
    /// Run the gvinum volume NAME of the drives given (or found under --scan) instead of an md
    /// array.
    #[arg(long, value_name = "NAME")]
    pub volume: Option<String>,
    /// With --volume: read only the plex NAME of the volume, as if it were its only plex
    /// (read-only; nothing is written). Reads a volume uraid cannot run whole, such as a raid5
    /// plex mirrored with others, without detaching anything.
    #[arg(long, value_name = "NAME", requires = "volume")]
    pub plex: Option<String>,
    /// Run the NetBSD RAIDframe set the raidctl configuration file CONFIG describes, on the
    /// components its START disks section names (relative paths from the file's folder), as
    /// `raidctl -c` configures it.
    #[arg(long, value_name = "CONFIG", conflicts_with_all = ["volume", "scan", "uuid", "serial"])]
    pub raidframe: Option<PathBuf>,
    /// Find the members (gvinum drives, RAIDframe components) under DIR instead of naming them.
    #[arg(long, value_name = "DIR")]
    pub scan: Option<PathBuf>,
    /// With --scan: the md array to run, by UUID (needed when DIR holds several).
    #[arg(long, requires = "scan", conflicts_with = "volume")]
    pub uuid: Option<String>,
    /// The RAIDframe set to run, by serial number, among the components given or found under
    /// --scan (needed when they belong to several sets).
    #[arg(long, value_name = "N", conflicts_with_all = ["volume", "uuid"])]
    pub serial: Option<u32>,
    /// md members, gvinum drives with --volume, or RAIDframe components (known by their labels).
    #[arg(required_unless_present_any = ["scan", "raidframe"])]
    pub members: Vec<PathBuf>,
}

#[derive(Args)]
pub struct ServeArgs {
    /// Where to listen: unix:PATH or tcp:HOST:PORT. Only loopback addresses unless
    /// --allow-remote.
    #[arg(long, default_value = "tcp:127.0.0.1:10809")]
    pub listen: String,
    /// Allow a non-loopback TCP address. Without --tls=require, NBD has no authentication:
    /// anyone who can reach the port can read and write the array.
    #[arg(long)]
    pub allow_remote: bool,
    #[command(flatten)]
    pub tls: TlsArgs,
    /// The export's name (clients asking for the default export "" get it too).
    #[arg(long, default_value = "")]
    pub export_name: String,
    /// Serve read-only; the members are opened read-only and never written.
    #[arg(long)]
    pub read_only: bool,
    #[command(flatten)]
    pub member_io: MemberIoArgs,
    /// With --io=threads: member I/O threads per member (member I/Os in flight on each).
    #[arg(long, default_value_t = 4)]
    pub member_threads: usize,
    /// Copy read data through a buffer (pread, then send) even where it could be spliced.
    /// By default reads of 64 KiB to 1 MiB that could be answered inline (see --inline-max; the
    /// members hold the data in memory) are moved from the members' pages to the socket with
    /// splice(2), never copied by the server.
    #[arg(long)]
    pub no_splice: bool,
    /// Most memory the stripe buffers of parity writes in progress may hold, suffixes K, M, G
    /// (md's stripe cache). Default 64M.
    #[arg(long, value_name = "SIZE")]
    pub stripe_cache: Option<String>,
    /// A unix socket for `uraid ctl` (status, check, repair, idle, wait).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Upper speed of background passes (resync, recovery, check, repair) in bytes per second,
    /// suffixes K, M, G; md's speed_limit_max. Default 200M.
    #[arg(long)]
    pub speed_limit_max: Option<String>,
    /// Lower speed of background passes: below it they do not yield to clients; md's
    /// speed_limit_min. Default 1M.
    #[arg(long)]
    pub speed_limit_min: Option<String>,
    #[command(flatten)]
    pub source: ArraySource,
}

/// TLS for the NBD export, with nbdkit's option names (`serve`).
#[derive(Args, Clone, Debug, Default)]
pub struct TlsArgs {
    /// off: NBD_OPT_STARTTLS is refused. on: clients may upgrade to TLS or stay in plain
    /// text. require: every option but STARTTLS is refused (NBD_REP_ERR_TLS_REQD) until TLS is
    /// up. on and require need --tls-psk or --tls-certificates. [default: off]
    #[arg(long, value_enum, value_name = "MODE")]
    pub tls: Option<TlsChoice>,
    /// Authenticate clients with pre-shared keys: a psktool file of USERNAME:HEXKEY lines (as
    /// nbdkit --tls-psk and qemu-nbd's keys.psk).
    #[arg(long, value_name = "FILE", conflicts_with = "tls_certificates")]
    pub tls_psk: Option<PathBuf>,
    /// Use X.509 certificates from DIR: server-cert.pem and server-key.pem (and ca-cert.pem with
    /// --tls-verify-peer), as nbdkit and qemu-nbd name them.
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,
    /// With --tls-certificates: clients must present a certificate signed by DIR/ca-cert.pem.
    #[arg(long)]
    pub tls_verify_peer: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TlsChoice {
    Off,
    On,
    Require,
}

/// How member I/O is done (`serve`, `mount`, `bench engine`).
#[derive(Args, Clone, Debug)]
pub struct MemberIoArgs {
    /// Member I/O backend. uring: one io_uring per member, submitted and reaped by the engine
    /// thread itself (no I/O threads), with --queue-depth I/Os in flight, O_DIRECT for aligned
    /// I/O where the file system allows it (buffered I/O otherwise, said once per member on
    /// stderr); falls back to threads where io_uring is unavailable.
    /// threads: blocking I/O threads per member through the page cache (--member-threads for
    /// serve, 4 otherwise).
    #[arg(long = "io", value_enum, default_value_t = IoChoice::Threads, value_name = "BACKEND")]
    pub io: IoChoice,
    /// With --io=uring: member I/Os in flight on each member.
    #[arg(long, default_value_t = 32, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub queue_depth: u32,
    /// How reads of mirrored data (raid1, raid10) pick a copy. md: Linux md's read_balance
    /// (a sequential read stays on its disk, else an idle disk, else the nearest head);
    /// round-robin: each read to the next copy; shortest-queue: the copy with the fewest I/Os
    /// in flight; split: random reads to the least busy copy, sequential streams divided over
    /// all copies and read ahead (see docs/read-balancing.md). A run-time choice: md keeps no
    /// read policy in its superblock, so arrays are the same on disk whatever was used.
    #[arg(long, default_value = "md", value_name = "NAME", value_parser = parse_read_policy)]
    pub read_policy: uraid_engine::ReadPolicy,
    /// With --read-policy=split: a sequential stream is read in aligned windows of this size,
    /// consecutive windows from different copies (longer windows make each disk's skip over
    /// the others' windows cheaper against its transfer; span several tracks).
    /// [default: 4M]
    #[arg(long, value_name = "SIZE", value_parser = parse_split_size)]
    pub split_window: Option<u64>,
    /// With --read-policy=split: bound on the bytes read ahead for sequential streams and not
    /// yet read by them (0 turns read-ahead off). [default: 64M]
    #[arg(long, value_name = "SIZE", value_parser = parse_split_bytes)]
    pub split_readahead: Option<u64>,
    /// With --read-policy=split: a read this long or longer outside any stream is divided over
    /// the idle copies (no piece shorter than an eighth of it). [default: 512K]
    #[arg(long, value_name = "SIZE", value_parser = parse_split_size)]
    pub split_divide: Option<u64>,
    /// Reads of at most this size are answered on the thread that received them, with no
    /// hand-off to the engine or member I/O threads, when the array is whole (for mirrors: no
    /// resync owed) and the members hold the data in memory (page cache, tmpfs); so are writes
    /// of that size, and at most 512K, without FUA on linear and raid0 where the members take
    /// them without waiting (tmpfs). Everything else, and members written with O_DIRECT, take
    /// the usual path, where the engine thread does the member reads and writes of at most 16K
    /// (and at most this size) itself when the members take them without waiting. 0 turns all
    /// of this off, and with it serve's spliced reads (see --no-splice). [default: 512K for
    /// serve, 256K for mount and bench engine]
    #[arg(long, value_name = "SIZE", value_parser = parse_split_bytes)]
    pub inline_max: Option<u64>,
    /// Let the read policy alone choose among copies: by default a copy measured to be clearly
    /// slower than another (a member on a far or slow host) is passed over
    /// (docs/read-balancing.md, "Latency").
    #[arg(long)]
    pub no_latency_balancing: bool,
}

fn parse_read_policy(name: &str) -> Result<uraid_engine::ReadPolicy, String> {
    name.parse().map_err(|e: uraid_engine::UnknownReadPolicy| e.to_string())
}

/// A `split` size: at least 8 KiB (a window or division smaller than a couple of pages only
/// adds I/Os).
fn parse_split_size(text: &str) -> Result<u64, String> {
    let n = crate::size::parse_size(text, 1)?;
    if n < 8192 {
        return Err(format!("{n} bytes is too small: at least 8K"));
    }
    Ok(n)
}

fn parse_split_bytes(text: &str) -> Result<u64, String> {
    crate::size::parse_size(text, 1)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IoChoice {
    Uring,
    Threads,
}

impl MemberIoArgs {
    /// `config` with this member I/O choice; an error for split knobs given with another policy
    /// (they would silently do nothing).
    pub fn apply(
        &self,
        config: uraid_device::ServiceConfig,
    ) -> Result<uraid_device::ServiceConfig, commands::CliError> {
        let io = match self.io {
            IoChoice::Uring => uraid_device::IoBackend::Uring,
            IoChoice::Threads => uraid_device::IoBackend::Threads,
        };
        let given = [
            ("--split-window", self.split_window),
            ("--split-readahead", self.split_readahead),
            ("--split-divide", self.split_divide),
        ];
        if self.read_policy != uraid_engine::ReadPolicy::Split {
            if let Some((flag, _)) = given.iter().find(|(_, v)| v.is_some()) {
                return Err(commands::CliError(format!(
                    "{flag} applies to --read-policy=split only (the policy is {})",
                    self.read_policy
                )));
            }
        }
        let d = uraid_engine::SplitTuning::default();
        let split_tuning = uraid_engine::SplitTuning {
            window_bytes: self.split_window.unwrap_or(d.window_bytes),
            readahead_bytes: self.split_readahead.unwrap_or(d.readahead_bytes),
            divide_bytes: self.split_divide.unwrap_or(d.divide_bytes),
        };
        Ok(uraid_device::ServiceConfig {
            io,
            queue_depth: self.queue_depth as usize,
            read_policy: self.read_policy,
            split_tuning,
            inline_max: self.inline_max.unwrap_or(config.inline_max),
            latency_balancing: !self.no_latency_balancing,
            ..config
        })
    }
}

#[derive(Args)]
pub struct MountArgs {
    /// Mount read-only; the members are opened read-only and never written.
    #[arg(long)]
    pub read_only: bool,
    #[command(flatten)]
    pub member_io: MemberIoArgs,
    /// Let other users open the file (FUSE's allow_other).
    #[arg(long)]
    pub allow_other: bool,
    /// Find the members (or gvinum drives) under DIR instead of naming them.
    #[arg(long, value_name = "DIR")]
    pub scan: Option<PathBuf>,
    /// With --scan: the md array to mount, by UUID.
    #[arg(long, requires = "scan", conflicts_with = "volume")]
    pub uuid: Option<String>,
    /// Mount the gvinum volume NAME of the drives given (or found under --scan).
    #[arg(long, value_name = "NAME")]
    pub volume: Option<String>,
    /// With --volume and --read-only: mount only the plex NAME of the volume, as if it were its
    /// only plex.
    #[arg(long, value_name = "NAME", requires = "volume")]
    pub plex: Option<String>,
    /// Mount the NetBSD RAIDframe set the raidctl configuration file CONFIG describes (then
    /// the only path given is the FILE).
    #[arg(long, value_name = "CONFIG", conflicts_with_all = ["volume", "scan", "uuid", "serial"])]
    pub raidframe: Option<PathBuf>,
    /// Of RAIDframe components given or found: the set to mount, by serial number.
    #[arg(long, value_name = "N", conflicts_with_all = ["volume", "uuid"])]
    pub serial: Option<u32>,
    /// Member files or block devices (gvinum drives with --volume), then the FILE to show the
    /// array as (created if missing, removed again at unmount).
    #[arg(required = true, num_args = 1..)]
    pub paths: Vec<PathBuf>,
    #[arg(skip)]
    pub members: Vec<PathBuf>,
    #[arg(skip)]
    pub file: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Create(a) => commands::create::run(&a),
        Command::Examine(a) => commands::examine::run(&a),
        Command::Detail(a) => commands::detail::run(&a),
        Command::Cat(a) => commands::cat::run(&a),
        Command::Write(a) => commands::write::run(&a),
        Command::Serve(a) => commands::serve::run(&a),
        Command::Assemble(a) => commands::assemble::run(&a),
        Command::Status(a) => commands::status::run(&a),
        Command::Stop(a) => commands::stop::run(&a),
        Command::Monitor(a) => commands::monitor::run(&a),
        Command::Ctl(a) => commands::ctl::run(&a),
        Command::Add(a) => commands::add::run(&a),
        Command::Grow(a) => commands::grow::run(&a),
        Command::ZeroSuperblock(a) => commands::zero_superblock::run(&a),
        Command::Bench(a) => commands::bench::run(&a),
        Command::Sim(a) => commands::sim::run(&a),
        Command::Vinum(a) => commands::vinum::run(&a),
        Command::Raidctl(a) => commands::raidctl::run(&a),
        Command::Check(a) => commands::pass::run(uraid_device::service::SyncAction::Check, &a),
        Command::Repair(a) => commands::pass::run(uraid_device::service::SyncAction::Repair, &a),
        Command::Resync(a) => commands::pass::run(uraid_device::service::SyncAction::Resync, &a),
        Command::Mount(mut a) => {
            // The last path is the mount point; the ones before it are members.
            a.file = a.paths.pop().expect("clap requires a path");
            a.members = std::mem::take(&mut a.paths);
            if a.members.is_empty() && a.scan.is_none() && a.raidframe.is_none() {
                eprintln!(
                    "uraid: mount: give the members (or --scan DIR, or --raidframe CONFIG) and then the FILE to mount on"
                );
                return ExitCode::FAILURE;
            }
            commands::mount::run(&a)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uraid: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Parser)]
    struct Wrapped {
        #[command(flatten)]
        io: MemberIoArgs,
    }

    /// Without `--inline-max` each command keeps its own limit (serve's differs from mount's);
    /// with it, the flag wins.
    #[test]
    fn inline_max_defaults_to_the_commands_own_limit() {
        let base = || uraid_device::ServiceConfig { inline_max: 12345, ..uraid_device::ServiceConfig::default() };
        let default = Wrapped::try_parse_from(["uraid"]).unwrap();
        assert_eq!(default.io.apply(base()).unwrap().inline_max, 12345);
        let given = Wrapped::try_parse_from(["uraid", "--inline-max=1M"]).unwrap();
        assert_eq!(given.io.apply(base()).unwrap().inline_max, 1 << 20);
        let off = Wrapped::try_parse_from(["uraid", "--inline-max=0"]).unwrap();
        assert_eq!(off.io.apply(base()).unwrap().inline_max, 0);
    }
}
