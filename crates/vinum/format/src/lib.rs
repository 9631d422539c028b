//! FreeBSD gvinum (Vinum) on disk: the drive header, the configuration text, the fixed drive
//! layout, the object model, plex address mapping, and which drive's configuration wins.
//!
//! Everything here is pure: no I/O. Callers read the first [`drive_layout::DATA_START`]
//! bytes of each drive and hand them in, and write back what the serializers return.
//!
//! The specification is FreeBSD's `sys/geom/vinum` (`geom_vinum_var.h`,
//! `geom_vinum_drive.c`, `geom_vinum_subr.c`, `geom_vinum_share.c`, `geom_vinum_plex.c`,
//! `geom_vinum_raid5.c`, `geom_vinum_events.c`, `geom_vinum_create.c`) and `sbin/gvinum`.
//!
//! Layout of the crate:
//! - [`header`]: the drive header at byte 4096 (canonical big-endian and four classic
//!   layouts).
//! - [`drive_layout`]: where header, configuration copies and data sit; reading and writing
//!   a configuration area; a drive's metadata as a whole.
//! - [`tokens`]: gvinum's tokenizer and size units.
//! - [`line_syntax`]: the keyword grammar of one object line.
//! - [`config_text`]: the on-disk configuration text, written byte for byte and read back.
//! - [`create_description`]: `gvinum create` files with gvinum's default names.
//! - [`objects`]: volumes, plexes, subdisks, drives; states; names; validation rules.
//! - [`mapping`]: plex offset to subdisk offset for concat, striped and raid5.
//! - [`newest`]: merging the configurations of several drives as the kernel does.
//! - [`placement`]: create descriptions and the shortcut commands laid out on drives as the
//!   kernel lays them out (free lists, autosize, plex offsets, stripe trimming).
//! - [`edit`]: the verbs that change objects and states (`rm`, `rename`, `setstate`,
//!   `attach`, `detach`, `move`) as the kernel carries them out.

pub mod config_text;
pub mod create_description;
pub mod drive_layout;
pub mod edit;
pub mod header;
pub mod line_syntax;
pub mod mapping;
pub mod newest;
pub mod objects;
pub mod placement;
pub mod tokens;

pub use config_text::{format_config, parse_config, parse_config_as_kernel, ConfigTextError, KernelReading};
pub use create_description::{parse_create_description, CreateDescription, CreateDescriptionError, SubdiskRequest};
pub use drive_layout::{ConfigAreaError, ConfigCopy, DriveMetadata, DriveMetadataError};
pub use header::{DriveHeader, DriveLabel, HeaderError, HeaderLayout, HeaderStatus, Timeval};
pub use line_syntax::LineProblem;
pub use mapping::{Location, MappingError, PlexLayout, Raid5Location};
pub use newest::{
    merge_in_taste_order, merge_newest_first, merge_newest_first_keeping_detached, MergedConfig, TastedDrive,
};
pub use objects::{
    ConfigProblem, Drive, DriveState, ObjectKind, Plex, PlexMembership, PlexOrganization, PlexState, Subdisk,
    SubdiskState, VinumConfig, Volume, VolumeState,
};
pub use placement::{
    concat, mirror, place, raid5, stripe, Extent, PlacedDrive, Placement, PlacementError, Present, ShortcutCommand,
    SizedDrive,
};
