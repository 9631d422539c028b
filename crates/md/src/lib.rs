//! Linux md on uraid's engine.
//!
//! - [`metadata`]: a running md array's superblocks and write-intent bitmap as a sans-I/O state
//!   machine behind the engine's format-neutral [`uraid_engine::metadata::ArrayMetadata`]: md's
//!   event-count rules, role tables, rebuild and resync checkpoints, and the bitmap's bits, as
//!   ordered member writes and flushes.
//!
//! md's on-disk bytes themselves (superblocks 0.90 and 1.x, the bitmap header, PPL headers) are
//! parsed and written by `uraid-md-format`; the assembly decisions are in `uraid_engine::assemble`.

pub mod metadata;

pub use metadata::{MdDevice, MdMetadata, WriteIntentBits};
