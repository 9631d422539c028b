//! The members as gvinum keeps them: drives made by the code `uraid vinum create` runs (the
//! create description placed as the kernel places it, then saved as `gv_save_config` saves,
//! header and two configuration copies on every drive), and the volume opened from the drives'
//! bytes by `OpenArray::open_volume`, the code `uraid serve --volume` runs: drives found by
//! the names in their headers, the newest configuration taken, stale subdisks revived.
//!
//! A drive may hold several subdisks of the volume (`vinum-shared-*`): its device is then the
//! target of several slots, and its death fails all of them.

use std::collections::BTreeMap;

use uraid_device::vinum_drives::{prepare_save, DriveToWrite};
use uraid_device::{MemberDevice, OpenArray, OpenError};
use uraid_vinum_format::create_description::parse_create_description;
use uraid_vinum_format::drive_layout::DATA_START;
use uraid_vinum_format::placement::{place, Present};
use uraid_vinum_format::{DriveHeader, Timeval};

use crate::disk::SimDisk;
use crate::member_device::{device_name, open_without_writes, SimMember};
use crate::vinum_geometries::{VinumBuilt, VOLUME};

/// When the drives were made (the configuration's first `last_update`).
const CREATED: Timeval = Timeval::new(1_700_000_000, 0);

/// Make the drives of `built` on new simulated devices and open its volume.
pub(super) fn start(built: &VinumBuilt) -> Result<(Vec<SimDisk>, u64, OpenArray), String> {
    // Room for the metadata, the subdisks, and a little more (placement may round).
    let disk_bytes = DATA_START + built.data_bytes_per_drive + 64 * 1024;
    let mut devices: Vec<SimDisk> = (0..built.drives).map(|id| SimDisk::new(id, disk_bytes)).collect();
    let description = parse_create_description(&built.description).map_err(|e| format!("the description: {e}"))?;
    let sizes: BTreeMap<String, u64> = (0..built.drives).map(|d| (device_name(d), disk_bytes)).collect();
    let placement = place(&description, &Present::default(), &sizes).map_err(|e| format!("placing the volume: {e}"))?;
    let views: Vec<SimMember> = devices.iter().map(SimMember::of).collect();
    let mut to_write = Vec::new();
    for placed in &placement.drives {
        let device = crate::member_device::device_id(&placed.drive.device)
            .ok_or_else(|| format!("drive {} is on an unknown device {}", placed.drive.name, placed.drive.device))?;
        to_write.push(DriveToWrite {
            device: &views[device] as &dyn MemberDevice,
            header: DriveHeader::new(&placed.drive.name, "sim", CREATED),
        });
    }
    let plan = prepare_save(to_write, &placement.config, CREATED).map_err(|e| format!("saving the drives: {e}"))?;
    plan.run().map_err(|e| format!("saving the drives: {e}"))?;
    for (d, view) in views.iter().enumerate() {
        for (offset, data) in view.take_writes() {
            devices[d].write_durable(offset, &data)?;
        }
    }
    let ids: Vec<usize> = (0..built.drives).collect();
    let open = open(&mut devices, &ids).map_err(|e| format!("opening the new volume: {e}"))?;
    Ok((devices, disk_bytes, open))
}

/// Open the volume from the current bytes of `disks` (those with ids `ids`), as `uraid`
/// opens it, writable, with the metadata deferred to the simulation. Opening writes nothing:
/// what it decides (subdisks revived, states changed) is saved by later metadata steps.
pub(super) fn open(disks: &mut [SimDisk], ids: &[usize]) -> Result<OpenArray, OpenError> {
    open_without_writes(disks, ids, "volume", |views| {
        let devs: Vec<Box<dyn MemberDevice>> =
            views.iter().map(|v| Box::new(v.clone()) as Box<dyn MemberDevice>).collect();
        Ok(OpenArray::open_volume(devs, VOLUME, true)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;
    use uraid_engine::SlotState;

    #[test]
    fn a_subdisk_is_taken_out_only_while_the_volume_can_do_without_it() {
        let built = crate::vinum_geometries::build("vinum-mirror-2-concat", &mut SimRng::new(1)).unwrap();
        let (_, _, mut open) = start(&built).unwrap();
        let e = open.fail_subdisk(9, false).unwrap_err().to_string();
        assert!(e.contains("slot 9") && e.contains("no such subdisk"), "{e}");
        open.fail_subdisk(0, false).unwrap();
        assert_eq!(open.engine().slot_states()[0], SlotState::Faulty);
        let e = open.fail_subdisk(0, false).unwrap_err().to_string();
        assert!(e.contains("v.p") && e.contains("not up"), "{e}");
        // The other plex holds the only copy of what subdisk 0 held: refused, nothing changed.
        let other = (1..open.engine().slot_states().len())
            .find(|&s| open.fail_subdisk(s, false).is_err())
            .expect("a subdisk the volume cannot do without");
        assert_eq!(open.engine().slot_states()[other], SlotState::InSync);
    }
}
