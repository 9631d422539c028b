//! FreeBSD gvinum (Vinum) on uraid's engine.
//!
//! The on-disk format and the object model are `uraid_vinum_format` (pure); this crate is what
//! running a volume needs on top of them, still without I/O:
//!
//! - [`volume_layout`]: a volume as one engine layout (its slots are its subdisks);
//! - [`volume_plan`]: which subdisks serve, from the merged configuration and the drives found
//!   (Vinum's startup, as the kernel decides subdisk, plex and volume states);
//! - [`metadata`]: the running volume's state changes as configuration saves on every up drive,
//!   behind the engine's format-neutral `ArrayMetadata`.

pub mod metadata;
pub mod volume_layout;
pub mod volume_plan;

pub use metadata::VinumMetadata;
pub use volume_layout::{SlotSubdisk, VolumeLayout, VolumeLayoutError};
pub use volume_plan::{VolumePlan, VolumePlanError};
