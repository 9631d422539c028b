//! uraid's member devices and the synchronous array driver.
//!
//! - [`member`]: the `MemberDevice` trait every backend implements, and its file/block-device
//!   and in-memory backends;
//! - [`nbd_member`]: a member that is an NBD export, through uraid's NBD client;
//! - [`open_member`]: opening a member from what a user gives, a path or an NBD URI;
//! - [`mod@probe`]: finding and reading an md superblock on a device (trying every metadata version);
//! - [`md_change`]: mdadm's `--grow --size` and `--grow --bitmap` on a stopped md array's
//!   members, checked as a whole array before anything is written;
//! - [`open_array`]: assembling an array from devices and running the engine over them one request
//!   at a time, keeping superblocks (events, clean state, roles) and the bitmap as md would;
//! - [`array_policy`]: the policy of a running array as a sans-I/O driver (what is recorded
//!   before and after what, which pass runs and how it goes), which the service runs and the
//!   fault simulator can run in virtual time;
//! - [`splice`]: reads handed over as pipes of page references, for front ends that send them
//!   to a socket;
//! - [`vinum_drives`]: FreeBSD gvinum drives on member devices: reading their metadata,
//!   finding the drives among a set of devices, and saving or resetting their configuration
//!   as gvinum does;
//! - [`raidframe_components`]: NetBSD RAIDframe components on member devices: reading their
//!   labels and parity maps;
//! - [`takeover`]: md's level changes that move no data, and raid1's change of its number of
//!   devices, on a stopped array (superblocks only);
//! - [`service`]: the same array served to many clients at once, the engine on one thread and
//!   member I/O on an io_uring or a thread pool per member (the NBD server and the FUSE file run
//!   on it).

pub mod array_policy;
mod error;
pub mod md_change;
pub mod member;
pub mod nbd_member;
pub mod open_array;
pub mod open_member;
pub mod ppl;
pub mod probe;
pub mod raidframe_components;
pub mod reshape;
pub mod service;
pub mod splice;
mod syscall;
pub mod takeover;
mod target;
pub mod vinum_drives;

pub use member::{AlignedBuf, DirectIo, FileDevice, IoHandle, MemberDevice, MemoryDevice, RemoteLimits};
pub use nbd_member::NbdDevice;
pub use open_array::{
    MemberTarget, OpenArray, OpenError, Placement, PlacementError, ReaddMode, ReaddRefusal, Readded, ReshapeRefusal,
};
pub use open_member::Member;
pub use probe::{probe, ProbeError, Probed};
pub use service::{
    ArrayService, BlockOp, BlockReply, IoBackend, ServiceConfig, ServiceError, ServiceHandle, ServiceInfo,
};
