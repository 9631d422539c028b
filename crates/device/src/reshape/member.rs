//! A member taking part in a reshape, and what the reshape reads and changes in its superblock,
//! whichever md metadata it carries: 1.x, whose data offset a reshape may move, or 0.90, which
//! records none (its data starts at sector 0) and so is reshaped in place.

use std::sync::Arc;

use uraid_md::reshape::{
    begin_reshape, begin_reshape_090, finish, finish_090, record_position, record_position_090, NewShape,
};
use uraid_md_format::Superblock;

use super::{io_error, GrowError};
use crate::member::MemberDevice;

/// A member taking part, with its superblock as last written.
pub(super) struct GrowMember {
    pub(super) dev: Arc<dyn MemberDevice>,
    pub(super) sb: Superblock,
    /// Why it failed part-way, if it did: it is written no more.
    pub(super) failed: Option<String>,
}

impl GrowMember {
    /// The sector its data starts at (0.90: always 0).
    pub(super) fn data_offset(&self) -> u64 {
        match &self.sb {
            Superblock::V1(sb) => sb.data_offset,
            Superblock::V090(_) => 0,
        }
    }

    /// Sectors of it the array uses (md's component size).
    pub(super) fn component_sectors(&self) -> u64 {
        self.sb.info().component_sectors
    }

    /// Set the component size (sectors; whole KiB for 0.90, which records it so).
    pub(super) fn set_component_sectors(&mut self, sectors: u64) {
        match &mut self.sb {
            Superblock::V1(sb) => sb.size = sectors,
            Superblock::V090(sb) => sb.size = (sectors / 2) as u32,
        }
    }

    /// The array UUID as mdadm writes it into a reshape's backup header (`uuid_from_super`):
    /// 1.x the `set_uuid` bytes, 0.90 the four UUID words as they lie in the superblock.
    pub(super) fn backup_uuid(&self) -> [u8; 16] {
        match &self.sb {
            Superblock::V1(sb) => sb.set_uuid,
            Superblock::V090(sb) => sb.md_uuid(),
        }
    }

    /// Set the events and the update time, as each superblock update does.
    pub(super) fn stamp(&mut self, events: u64, utime: u64) {
        self.sb.set_events(events);
        self.sb.set_utime(utime);
    }

    /// Record the start of a reshape to `to`, the data to move `new_offset` sectors (0.90:
    /// always 0, in place).
    pub(super) fn begin_reshape(&mut self, to: NewShape, new_offset: i64) {
        match &mut self.sb {
            Superblock::V1(sb) => begin_reshape(sb, to, new_offset),
            Superblock::V090(sb) => begin_reshape_090(sb, to),
        }
    }

    /// Record the position (sectors) the reshape has reached.
    pub(super) fn record_position(&mut self, sectors: u64) {
        match &mut self.sb {
            Superblock::V1(sb) => record_position(sb, sectors),
            Superblock::V090(sb) => record_position_090(sb, sectors),
        }
    }

    /// Record the end of the reshape: the new shape becomes the array's.
    pub(super) fn finish_reshape(&mut self) {
        match &mut self.sb {
            Superblock::V1(sb) => finish(sb),
            Superblock::V090(sb) => finish_090(sb),
        }
    }

    /// Write its superblock as it stands (not flushed).
    pub(super) fn write_superblock(&self) -> Result<(), GrowError> {
        self.dev
            .write_at(self.sb.byte_offset(), &self.sb.to_bytes())
            .map_err(|e| io_error(self.dev.as_ref(), "writing the superblock", e))
    }
}
