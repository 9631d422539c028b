//! uraid's member devices and the synchronous array driver.
//!
//! - [`member`]: the `MemberDevice` trait every backend implements, and its file/block-device
//!   and in-memory backends;
//! - [`probe`]: finding and reading an md superblock on a device (trying every metadata version);
//! - [`open_array`]: assembling an array from devices and running the engine over them one request
//!   at a time, keeping superblocks (events, clean state, roles) and the bitmap as md would.

pub mod member;
pub mod open_array;
pub mod probe;

pub use member::{FileDevice, MemberDevice, MemoryDevice};
pub use open_array::{OpenArray, OpenError};
pub use probe::{probe, Probed, ProbeError};
