//! NetBSD RAIDframe on uraid's engine.
//!
//! The on-disk format is `uraid_raidframe_format` (pure); this crate is what running a set
//! needs on top of it, still without I/O:
//!
//! - [`set_layout`]: a set as one engine layout (its slots are its columns), through
//!   RAIDframe's own RAID 0/1/4/5 mapping;
//! - [`set_plan`]: which components serve, from their labels, as the kernel decides at
//!   autoconfiguration or at `raidctl -c`;
//! - [`metadata`]: the running set's component label updates (mod_counter, clean flag, status)
//!   and its parity map, behind the engine's format-neutral `ArrayMetadata`;
//! - [`new_set`]: the labels `raidctl -C` and `-I` give the components of a new set;
//! - [`raidctl_session`]: the labels NetBSD leaves after `raidctl -c; VERB; -u`.

pub mod metadata;
pub mod new_set;
pub mod raidctl_session;
pub mod set_layout;
pub mod set_plan;
#[cfg(test)]
mod test_labels;

pub use metadata::RaidframeMetadata;
pub use set_layout::{SetLayout, SetLayoutError};
pub use set_plan::{SetPlan, SetPlanError};
