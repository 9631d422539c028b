//! Linux md on uraid's engine: everything md-specific above its on-disk bytes.
//!
//! - [`assemble`]: md's assembly decisions as a pure function of the superblocks found: which
//!   members are fresh (event counts, the freshest superblock's role table), which slot each
//!   fills, and whether the array can run at all;
//! - [`probe`]: where md keeps its superblock on a device and how a member is recognised, given
//!   a way to read the device's bytes;
//! - [`metadata`]: a running md array's superblocks and write-intent bitmap as a sans-I/O state
//!   machine behind the engine's format-neutral [`uraid_engine::metadata::ArrayMetadata`]: md's
//!   event-count rules, role tables, rebuild and resync checkpoints, and the bitmap's bits, as
//!   ordered member writes and flushes;
//! - [`resize`] and [`bitmap_change`]: md's `--grow --size` and `--grow --bitmap` on a stopped
//!   array as pure decisions (what each member allows, what the superblocks and the bitmap
//!   record), the writes collected in an [`offline_change::OfflineChange`];
//! - [`reshape`]: md's reshape that adds members to a raid4/5/6, as pure decisions (superblock
//!   fields, how far the data moves, which stripe may be written next);
//! - [`takeover`]: md's level changes that move no data and raid1's change of its number of
//!   devices, as pure decisions (the new shape, where each device goes, which slots start empty).
//!
//! md's on-disk bytes themselves (superblocks 0.90 and 1.x, the bitmap header, PPL headers) are
//! parsed and written by `uraid-md-format` (`crates/md/format`).

pub mod assemble;
pub mod bitmap_change;
mod layout_name;
pub mod mdstat;
pub mod metadata;
pub mod offline_change;
pub mod probe;
pub mod reshape;
pub mod resize;
pub mod takeover;

pub use layout_name::layout_name;
pub use metadata::{load_write_intent, MdDevice, MdMetadata};
pub use uraid_engine::metadata::WriteIntentBits;
/// mdadm.conf's `DEVICE` and `ARRAY` lines, for the commands that write and read them (a pure
/// text format, kept with md's other formats in `uraid-md-format`).
pub use uraid_md_format::conf;
