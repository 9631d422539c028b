//! The members as NetBSD's RAIDframe keeps them: components labelled as a new set is once
//! initialised (`RaidframeBuilt::labels`), and the set opened from the components' bytes by `OpenArray::open_raidframe`, the code `uraid serve` runs on components found by
//! scanning: grouped by their labels, the freshest modification counter deciding which columns
//! serve, stale and failed components left out.

use std::sync::Arc;

use uraid_device::open_array::SetSource;
use uraid_device::{MemberDevice, OpenArray, OpenError};
use uraid_raidframe_format::layout::{self, ParityMap};

use crate::disk::SimDisk;
use crate::member_device::open_without_writes;
use crate::raidframe_geometries::{RaidframeBuilt, SERIAL};

/// Label the components of `built` on new simulated devices and open the set.
pub(super) fn start(built: &RaidframeBuilt) -> Result<(Vec<SimDisk>, u64, OpenArray), String> {
    let sector = uraid_raidframe::new_set::SECTOR_BYTES;
    let disk_bytes = built.partition_sectors * sector;
    let labels = built.labels()?;
    let mut devices: Vec<SimDisk> = (0..labels.len()).map(|id| SimDisk::new(id, disk_bytes)).collect();
    for (label, disk) in labels.iter().zip(devices.iter_mut()) {
        disk.write_durable(layout::LABEL_OFFSET, &label.to_area(layout::label_area_size(sector) as usize))?;
        if label.parity_map_regions > 0 {
            let map = ParityMap::clean().to_area(layout::parity_map_area_size(sector) as usize);
            disk.write_durable(layout::parity_map_offset(sector), &map)?;
        }
    }
    let ids: Vec<usize> = (0..devices.len()).collect();
    let open = open(&mut devices, &ids).map_err(|e| format!("opening the new set: {e}"))?;
    Ok((devices, disk_bytes, open))
}

/// Open the set from the current bytes of `disks` (those with ids `ids`), as `uraid` opens
/// components found by scanning, writable, with the metadata deferred to the simulation.
/// Opening writes nothing: labels are written by later metadata steps.
pub(super) fn open(disks: &mut [SimDisk], ids: &[usize]) -> Result<OpenArray, OpenError> {
    open_without_writes(disks, ids, "set", |views| {
        let devs: Vec<Option<Arc<dyn MemberDevice>>> =
            views.iter().map(|v| Some(Arc::new(v.clone()) as Arc<dyn MemberDevice>)).collect();
        Ok(OpenArray::open_raidframe(devs, SetSource::Autoconfigure { serial: Some(SERIAL) }, true)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member_device::SimMember;
    use crate::rng::SimRng;
    use uraid_engine::SlotState;

    #[test]
    fn a_column_is_failed_only_while_the_set_can_do_without_it() {
        let built = crate::raidframe_geometries::build("raidframe-raid5-3", &mut SimRng::new(1)).unwrap();
        let (_, _, mut open) = start(&built).unwrap();
        let e = open.fail_column(7, false).unwrap_err().to_string();
        assert!(e.contains("column 7") && e.contains("no such column"), "{e}");
        open.fail_column(1, false).unwrap();
        assert_eq!(open.engine().slot_states()[1], SlotState::Faulty);
        let e = open.fail_column(1, false).unwrap_err().to_string();
        assert!(e.contains("column 1") && e.contains("already failed"), "{e}");
        // A second column of a RAID 5 holds data no other copy has: refused, nothing changed.
        assert!(open.fail_column(0, false).is_err());
        assert_eq!(open.engine().slot_states()[0], SlotState::InSync);
    }

    /// A reconstruction takes a blank device or the failed component, one column at a time,
    /// and refuses a device that may hold data: one of the set's live components, or another
    /// set's component.
    #[test]
    fn a_column_is_reconstructed_only_onto_a_device_free_to_take_it() {
        use std::sync::Arc;
        let built = crate::raidframe_geometries::build("raidframe-raid5-3", &mut SimRng::new(1)).unwrap();
        let (disks, bytes, mut open) = start(&built).unwrap();
        let member = |d: &SimDisk| Arc::new(SimMember::of(d)) as Arc<dyn MemberDevice>;
        assert_eq!(open.reconstruct_onto(member(&SimDisk::new(9, bytes))).unwrap(), None, "nothing missing");
        // Failed by name, as `uraid ctl SOCKET fail` does.
        let e = open.fail_member("d7", false).unwrap_err().to_string();
        assert!(e.contains("d7: not a component serving this set") && e.contains("d0, d1, d2"), "{e}");
        assert_eq!(open.fail_member("d1", false).unwrap(), 1);
        let e = open.reconstruct_onto(member(&disks[0])).unwrap_err().to_string();
        assert!(e.contains("already serves column 0"), "{e}");
        // Another set's component: d0's label under another serial number.
        let mut other = SimDisk::new(7, bytes);
        let mut label = built.labels().unwrap().remove(0);
        label.serial_number = 4242;
        other.write_durable(layout::LABEL_OFFSET, &label.to_area(layout::label_area_size(512) as usize)).unwrap();
        let e = open.reconstruct_onto(member(&other)).unwrap_err().to_string();
        assert!(e.contains("RAIDframe set 4242"), "{e}");
        let e = open.reconstruct_onto(member(&SimDisk::new(8, 4096))).unwrap_err().to_string();
        assert!(e.contains("needs"), "{e}");
        assert_eq!(open.engine().slot_states()[1], SlotState::Faulty, "refusals change nothing");
        // The failed component itself, in place, then nothing more while it is rebuilt.
        assert_eq!(open.reconstruct_onto(member(&disks[1])).unwrap(), Some(1));
        assert_eq!(open.engine().slot_states()[1], SlotState::Recovering);
        let e = open.reconstruct_onto(member(&SimDisk::new(6, bytes))).unwrap_err().to_string();
        assert!(e.contains("one reconstruction at a time"), "{e}");
    }
}
