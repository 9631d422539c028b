//! NetBSD RAIDframe on disk: the component label, where label, parity map and data sit on a
//! component, raidctl's configuration file, the RAID 0/1/4/5 address mapping, and which
//! components are fresh at autoconfiguration.
//!
//! Everything here is pure: no I/O. Callers read the first
//! [`layout::data_offset`] bytes of each component (32 KiB on 512-byte sectors) and hand
//! in the slices; the serializers return the bytes to write back.
//!
//! The specification is NetBSD's `sys/dev/raidframe` (`raidframevar.h`,
//! `rf_netbsdkintf.c`, `rf_paritymap.c`, `rf_raid0.c`, `rf_raid1.c`, `rf_raid4.c`,
//! `rf_raid5.c`) and `sbin/raidctl` (`rf_configure.c`, `raidctl.c`); the tests check the
//! crate against component images NetBSD's own driver wrote (`tests/data/README.md`).
//!
//! Layout of the crate:
//! - [`label`]: the 392-byte component label, parsed and written byte for byte.
//! - [`layout`]: offsets of label, parity map and data; the on-disk parity map.
//! - [`config_file`]: raidctl's configuration file, read and printed.
//! - [`mapping`]: RAID sector to column and component sector for RAID 0, 1, 4 and 5.
//! - [`freshness`]: grouping components into sets and picking the fresh ones.
//! - [`configure_check`]: which components `raidctl -c` fails, or whether it refuses them.

pub mod config_file;
pub mod configure_check;
pub mod freshness;
pub mod label;
pub mod layout;
pub mod mapping;

pub use config_file::{ConfigFileError, LayoutLine, QueueLine, RaidConfig};
pub use configure_check::{check_labels, ConfigureCheck, Refusal};
pub use freshness::{assess_all, assess_set, group_sets, same_set, ColumnState, SetAssessment};
pub use label::{ByteOrder, ComponentLabel, DiskStatus, LabelError};
pub use layout::{ParityMap, ParityMapError, ParityMapVerdict};
pub use mapping::{Geometry, Level, Location, Mapped, MappingError};
