//! `uraid vinum VERB`: FreeBSD gvinum's verbs on drive files and block devices, with gvinum's
//! on-disk format written byte for byte (`uraid_vinum_format` makes the bytes, `uraid_device::
//! vinum_drives` reads and writes them).
//!
//! There is no kernel holding the configuration between commands: each command finds the
//! gvinum drives among the devices it is given (paths, and every file or block device under
//! `--scan DIR`), by the drive names in their headers, merges their configurations as the
//! kernel does when it tastes them, and works on that. A verb that changes anything saves the
//! configuration to every drive, as gvinum does after each change.
//!
//! - `create`, `concat`, `stripe`, `raid5`, `mirror`: [`create`];
//! - `list`/`l`, `ld`, `lv`, `lp`, `ls`: [`list`] (gvinum's listing formats);
//! - `printconfig`: [`printconfig`];
//! - `saveconfig`, `resetconfig`: [`save`];
//! - `rm`, `rename`, `setstate`, `attach`, `detach`, `move`/`mv`: [`edit`].

mod create;
pub(super) mod describe;
pub(super) mod drives;
pub use drives::Search;
mod edit;
mod list;
mod passes;
mod printconfig;
mod save;

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::CliResult;

#[derive(Args)]
pub struct VinumArgs {
    #[command(subcommand)]
    pub verb: Verb,
}

#[derive(Subcommand)]
pub enum Verb {
    /// Create drives, volumes, plexes and subdisks from a gvinum create description (FILE, or -
    /// or nothing for stdin); `drive NAME device PATH` lines make new drives, and the drives
    /// that exist are looked for among DEVICES and under --scan.
    Create(CreateArgs),
    /// List drives, volumes, plexes and subdisks as gvinum does (all, or the objects named).
    #[command(visible_alias = "l")]
    List(ListArgs),
    /// List drives.
    Ld(ListArgs),
    /// List volumes.
    Lv(ListArgs),
    /// List plexes.
    Lp(ListArgs),
    /// List subdisks.
    Ls(ListArgs),
    /// Print the configuration as a create description (gvinum printconfig).
    Printconfig(DrivesArgs),
    /// Save the configuration to every drive again, with a new last_update.
    Saveconfig(DrivesArgs),
    /// Wipe the gvinum configuration off every drive, as gvinum resetconfig does.
    Resetconfig(ResetArgs),
    /// Make a concatenated volume: one new drive per device, one subdisk filling each.
    Concat(ShortcutArgs),
    /// Make a striped volume (256 KiB stripes) over new drives on the devices (at least 2).
    Stripe(StripeArgs),
    /// Make a RAID-5 volume over new drives on the devices (at least 3).
    Raid5(Raid5Args),
    /// Make a mirrored volume: two plexes, even-numbered devices in the first.
    Mirror(MirrorArgs),
    /// Start volumes or plexes: revive their stale subdisks (rebuilt from the other plexes, or
    /// from a raid5 plex's parity), with progress.
    Start(passes::StartArgs),
    /// Stop the volume served in the background by `uraid serve --volume ... --control SOCKET`
    /// (gvinum's stop unloads the kernel module, stopping every volume): requests finished,
    /// drives flushed, the volume saved clean; waits until it has stopped.
    Stop(StopArgs),
    /// Check a raid5 plex's parity, row by row; exits non-zero if any row disagrees.
    Checkparity(passes::ParityArgs),
    /// Rewrite a raid5 plex's parity from its data, row by row.
    Rebuildparity(passes::ParityArgs),
    /// Remove volumes, plexes, subdisks or drives; -r also what they hold.
    Rm(RmArgs),
    /// Rename a volume, plex, subdisk or drive; -r also its plexes and subdisks.
    Rename(RenameArgs),
    /// Set the state of a volume, plex, subdisk or drive: up, down or stale.
    Setstate(SetstateArgs),
    /// Attach a plex to a volume (PLEX VOLUME, then optionally rename) or a subdisk to a plex
    /// (SUBDISK PLEX, then optionally OFFSET and rename); what is attached is stale until revived.
    Attach(AttachArgs),
    /// Detach a plex from its volume or a subdisk from its plex.
    Detach(DetachArgs),
    /// Move subdisks to another drive (DRIVE SUBDISK...); their data is not copied, they come
    /// back stale. -f is required.
    #[command(visible_alias = "mv")]
    Move(MoveArgs),
}

#[derive(Args)]
pub struct CreateArgs {
    /// Overwrite devices that hold something else (an md superblock, data where gvinum's
    /// metadata goes) and, as gvinum's -f, skip objects whose names exist already.
    #[arg(short, long)]
    pub force: bool,
    #[command(flatten)]
    pub search: Search,
    /// The create description: a file, or - for stdin (the default).
    pub file: Option<PathBuf>,
    /// Devices that may hold existing gvinum drives.
    pub devices: Vec<PathBuf>,
}

#[derive(Args)]
pub struct ListArgs {
    /// Recursive: a volume with its plexes and their subdisks, a drive with its subdisks.
    #[arg(short)]
    pub r: bool,
    /// Verbose.
    #[arg(short)]
    pub v: bool,
    /// Very verbose (implies -v): a volume's plexes, a plex's subdisks, a drive's free list.
    #[arg(short = 'V')]
    pub very_verbose: bool,
    /// Print JSON: the objects the listing shows, under "drives", "volumes", "plexes" and
    /// "subdisks", sizes in bytes.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub search: Search,
    /// Devices to look for drives on (paths that exist), and names of objects to list.
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct DrivesArgs {
    #[command(flatten)]
    pub search: Search,
    /// Devices that hold the drives.
    pub devices: Vec<PathBuf>,
}

#[derive(Args)]
pub struct StopArgs {
    /// Accepted and ignored, as gvinum ignores it.
    #[arg(short)]
    pub f: bool,
    /// The control sockets of the volumes to stop (`uraid serve --volume NAME --control SOCKET`).
    /// uraid runs no volume in the background otherwise: a volume opened by any other command
    /// stops when that command ends.
    #[arg(required = true, value_name = "SOCKET")]
    pub sockets: Vec<std::path::PathBuf>,
}

#[derive(Args)]
pub struct ResetArgs {
    /// Do not ask; without -f a terminal is needed to confirm on.
    #[arg(short, long)]
    pub force: bool,
    #[command(flatten)]
    pub search: Search,
    /// Devices that hold the drives.
    pub devices: Vec<PathBuf>,
}

/// What every shortcut takes.
#[derive(Args)]
pub struct ShortcutArgs {
    /// The volume's name (default: the first free gvinumvolumeN).
    #[arg(short, value_name = "NAME")]
    pub n: Option<String>,
    /// Overwrite devices that hold something else (an md superblock, data where gvinum's
    /// metadata goes).
    #[arg(short, long)]
    pub force: bool,
    /// Accepted, as gvinum accepts it; changes nothing.
    #[arg(short)]
    pub v: bool,
    #[command(flatten)]
    pub search: Search,
    /// The devices to make new drives on, in order.
    #[arg(required = true)]
    pub devices: Vec<PathBuf>,
}

#[derive(Args)]
pub struct StripeArgs {
    /// Accepted, as gvinum accepts it; the stripe size stays 256 KiB.
    #[arg(short)]
    pub s: bool,
    #[command(flatten)]
    pub common: ShortcutArgs,
}

#[derive(Args)]
pub struct Raid5Args {
    /// Stripe size as gvinum reads sizes: bytes, or with s, k, m, g (default 256k).
    #[arg(short, value_name = "SIZE")]
    pub s: Option<String>,
    #[command(flatten)]
    pub common: ShortcutArgs,
}

#[derive(Args)]
pub struct MirrorArgs {
    /// Striped plexes (256 KiB stripes, at least 4 devices) instead of concatenated ones.
    #[arg(short)]
    pub s: bool,
    #[command(flatten)]
    pub common: ShortcutArgs,
}

#[derive(Args)]
pub struct RmArgs {
    /// Recursive: a volume with its plexes and their subdisks, a plex with its subdisks, a
    /// drive with every volume that has a subdisk on it.
    #[arg(short)]
    pub r: bool,
    /// Accepted, as gvinum accepts it: it lets gvinum remove a drive that is open, and no
    /// drive is open between uraid's commands.
    #[arg(short, long)]
    pub force: bool,
    #[command(flatten)]
    pub search: Search,
    /// The objects to remove, and the devices that hold the drives (paths that exist).
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct RenameArgs {
    /// Rename a volume's plexes and subdisks, or a plex's subdisks, to match: v.p0.s1 becomes
    /// NEWNAME.p0.s1.
    #[arg(short)]
    pub r: bool,
    #[command(flatten)]
    pub search: Search,
    /// OBJECT NEWNAME, and the devices that hold the drives (paths that exist).
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct SetstateArgs {
    /// Set the state even where gvinum's rules refuse it.
    #[arg(short, long)]
    pub force: bool,
    #[command(flatten)]
    pub search: Search,
    /// STATE OBJECT, and the devices that hold the drives (paths that exist).
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct AttachArgs {
    #[command(flatten)]
    pub search: Search,
    /// PLEX VOLUME then optionally rename, or SUBDISK PLEX then optionally OFFSET and rename (OFFSET in bytes, or with s, k,
    /// m, g), and the devices that hold the drives (paths that exist).
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct DetachArgs {
    /// Detach even a plex that is up, or a subdisk its plex needs.
    #[arg(short, long)]
    pub force: bool,
    #[command(flatten)]
    pub search: Search,
    /// PLEX or SUBDISK, and the devices that hold the drives (paths that exist).
    pub args: Vec<String>,
}

#[derive(Args)]
pub struct MoveArgs {
    /// Required, as in gvinum: the subdisks' data is not moved.
    #[arg(short, long)]
    pub force: bool,
    #[command(flatten)]
    pub search: Search,
    /// DRIVE SUBDISK..., and the devices that hold the drives (paths that exist).
    pub args: Vec<String>,
}

pub fn run(args: &VinumArgs) -> CliResult {
    use list::Kind;
    match &args.verb {
        Verb::Create(a) => create::create(a),
        Verb::List(a) => list::run(Kind::All, a),
        Verb::Ld(a) => list::run(Kind::Drives, a),
        Verb::Lv(a) => list::run(Kind::Volumes, a),
        Verb::Lp(a) => list::run(Kind::Plexes, a),
        Verb::Ls(a) => list::run(Kind::Subdisks, a),
        Verb::Printconfig(a) => printconfig::run(a),
        Verb::Saveconfig(a) => save::saveconfig(a),
        Verb::Resetconfig(a) => save::resetconfig(a),
        Verb::Concat(a) => create::shortcut(create::Shortcut::Concat, a),
        Verb::Stripe(a) => create::shortcut(create::Shortcut::Stripe, &a.common),
        Verb::Raid5(a) => create::shortcut(create::Shortcut::Raid5(a.s.clone()), &a.common),
        Verb::Mirror(a) => create::shortcut(create::Shortcut::Mirror { striped: a.s }, &a.common),
        Verb::Start(a) => passes::start(a),
        Verb::Stop(a) => a.sockets.iter().try_for_each(|s| crate::commands::ctl::stop(s)),
        Verb::Checkparity(a) => passes::parity(a, false),
        Verb::Rebuildparity(a) => passes::parity(a, true),
        Verb::Rm(a) => edit::rm(a),
        Verb::Rename(a) => edit::rename(a),
        Verb::Setstate(a) => edit::setstate(a),
        Verb::Attach(a) => edit::attach(a),
        Verb::Detach(a) => edit::detach(a),
        Verb::Move(a) => edit::move_subdisks(a),
    }
}
