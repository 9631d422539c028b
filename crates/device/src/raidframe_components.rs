//! Reading and writing NetBSD RAIDframe components' labels and parity maps on member devices.
//!
//! A component starts with 16 KiB RAIDframe never touches, then its label at byte 16384 and,
//! on sets with redundancy, the parity map after it; data starts at sector 64. What the bytes
//! mean is `uraid_raidframe_format`'s knowledge (pure); this module reads them off a
//! [`MemberDevice`] and names the device in every error, telling a device that carries no
//! RAIDframe label apart from one whose label is damaged.
//!
//! A label is taken as the kernel takes it when it scans for components (`rf_get_component`):
//! it must pass `rf_reasonable_label`, and the partition size it records must fit the device.

use thiserror::Error;
use uraid_raidframe::set_plan::ReadComponent;
use uraid_raidframe_format::label::{ComponentLabel, LabelError};
use uraid_raidframe_format::layout::{
    label_area_size, parity_map_area_size, parity_map_offset, ParityMap, LABEL_OFFSET,
};

use crate::member::MemberDevice;

pub mod copyback;

/// The sector size a component's label is looked for with, before the label says its own: the
/// label sits at byte 16384 whatever the sectors, and is 392 bytes long.
const PROBE_SECTOR: u64 = 512;

/// Why a device's RAIDframe label could not be read, or why it carries none.
#[derive(Debug, Error)]
pub enum ComponentError {
    #[error("{device}: cannot read: {source}")]
    Read { device: String, source: std::io::Error },
    #[error("{device}: cannot write its RAIDframe label or parity map: {source}")]
    Write { device: String, source: std::io::Error },
    /// The label area is blank, or holds no RAIDframe version word: not a component.
    #[error("{device}: no RAIDframe component label at byte 16384 ({source})")]
    NoLabel { device: String, source: LabelError },
    /// A RAIDframe version word, but a field the kernel would refuse: a torn or damaged label.
    #[error("{device}: RAIDframe component label is damaged: {source}")]
    Damaged { device: String, source: LabelError },
    /// The label records a partition larger than the device (the kernel skips it).
    #[error(
        "{device}: its RAIDframe label records a component of {recorded} sectors, but the device holds {sectors} (a truncated image?)"
    )]
    TooSmall { device: String, recorded: u64, sectors: u64 },
}

impl ComponentError {
    /// The device the error is about.
    pub fn device(&self) -> &str {
        match self {
            ComponentError::Read { device, .. }
            | ComponentError::Write { device, .. }
            | ComponentError::NoLabel { device, .. }
            | ComponentError::Damaged { device, .. }
            | ComponentError::TooSmall { device, .. } => device,
        }
    }

    /// True for a device that carries a RAIDframe label (or may) that cannot be used; false
    /// for one that simply is not a component.
    pub fn is_damage(&self) -> bool {
        !matches!(self, ComponentError::NoLabel { .. })
    }
}

fn read(dev: &dyn MemberDevice, offset: u64, len: u64) -> Result<Vec<u8>, ComponentError> {
    let end = dev.size().min(offset + len);
    let mut buf = vec![0u8; end.saturating_sub(offset) as usize];
    dev.read_at(offset, &mut buf).map_err(|source| ComponentError::Read { device: dev.name().to_string(), source })?;
    Ok(buf)
}

/// The label on `dev`, checked as the kernel checks a component it finds.
pub fn read_label(dev: &dyn MemberDevice) -> Result<ComponentLabel, ComponentError> {
    let device = || dev.name().to_string();
    let bytes = read(dev, LABEL_OFFSET, label_area_size(PROBE_SECTOR))?;
    let label = match ComponentLabel::decode(&bytes) {
        Ok(l) => l,
        Err(source) => return Err(ComponentError::NoLabel { device: device(), source }),
    };
    let block = u64::try_from(label.block_size).ok().filter(|&b| b > 0);
    let sectors = block.map_or(0, |b| dev.size() / b);
    let mut label = label;
    label.check_reasonable(None).map_err(|source| ComponentError::Damaged { device: device(), source })?;
    label.fix_old_label_size(sectors);
    if label.partition_size > sectors {
        return Err(ComponentError::TooSmall { device: device(), recorded: label.partition_size, sectors });
    }
    Ok(label)
}

/// The label on `dev` and, beside it, its parity map (`None` when the map area does not read
/// as one: the set's plan then trusts no map).
pub fn read_component(dev: &dyn MemberDevice) -> Result<ReadComponent, ComponentError> {
    let label = read_label(dev)?;
    let sector = u64::try_from(label.block_size).expect("a reasonable label has a positive block size");
    let area = read(dev, parity_map_offset(sector), parity_map_area_size(sector))?;
    let parity_map = ParityMap::parse(&area).ok();
    Ok(ReadComponent { label, parity_map })
}

/// Write `label` (and, when given, `map` beside it) to `dev` where NetBSD keeps them, then
/// flush: the writes a component label update makes (`raidflush_component_label`).
pub fn write_component(
    dev: &dyn MemberDevice,
    label: &ComponentLabel,
    map: Option<&ParityMap>,
) -> Result<(), ComponentError> {
    let sector = u64::try_from(label.block_size).ok().filter(|&b| b > 0).unwrap_or(PROBE_SECTOR);
    let write = |offset: u64, bytes: &[u8]| {
        dev.write_at(offset, bytes).map_err(|source| ComponentError::Write { device: dev.name().to_string(), source })
    };
    if let Some(map) = map {
        write(parity_map_offset(sector), &map.to_area(parity_map_area_size(sector) as usize))?;
    }
    write(LABEL_OFFSET, &label.to_area(label_area_size(sector) as usize))?;
    dev.flush().map_err(|source| ComponentError::Write { device: dev.name().to_string(), source })
}

#[cfg(test)]
mod tests;
