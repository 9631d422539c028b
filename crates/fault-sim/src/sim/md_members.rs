//! The members as md keeps them: created by mdadm's rules (`uraid_md_format::create`), with real
//! superblocks, write-intent bitmaps and partial parity logs on the simulated disks, and
//! assembled from those bytes by the device layer's `OpenArray::assemble`, the code
//! `uraid serve` runs.
//!
//! The data offset is small (tens of KiB rather than mdadm's default megabyte) so that the
//! metadata and the data share the simulated disks without making every run's disks large;
//! the superblocks record it, as `mdadm --data-offset` does. The log areas are small in some
//! runs too (down to 20 KiB) so that stripe writes split and log writes queue.

use uraid_device::{MemberDevice, OpenArray, OpenError};
use uraid_md::assemble::AssemblyRules;
use uraid_md_format::create::{self, ConsistencyPolicy, CreateSpec};
use uraid_md_format::{MetadataVersion, Superblock};

use crate::disk::{SimDisk, SECTOR};
use crate::geometries::Built;
use crate::member_device::SimMember;
use crate::rng::SimRng;

/// How the array keeps itself consistent across a crash, as chosen for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Consistency {
    /// Nothing but the dirty mark: a crash owes a full resync.
    Resync,
    /// An internal write-intent bitmap with chunks of this many bytes.
    Bitmap { chunk: u64 },
    /// A partial parity log of this many sectors per member.
    Log { sectors: u64 },
}

/// Where md's metadata starts: the 1.2 superblock 4 KiB into the device.
const SUPER_OFFSET: u64 = 4096;

/// The superblock, the bitmap or log area after it, and room to spare, in sectors: where the
/// data starts.
fn data_offset_sectors(consistency: Consistency) -> u64 {
    let area = match consistency {
        Consistency::Resync => 0,
        // The bitmap's header and bits take 4 KiB on members this small.
        Consistency::Bitmap { .. } => 8,
        Consistency::Log { sectors } => sectors,
    };
    // Superblock at sector 8, the area at sector 16, then 8 sectors for the bad-block log.
    (16 + area + 8).div_ceil(8) * 8
}

/// Bytes of every member device: the data offset plus the largest member's data.
pub(super) fn device_bytes(built: &Built, consistency: Consistency) -> u64 {
    let data = built.member_sectors.iter().max().copied().unwrap_or(0) * SECTOR;
    data_offset_sectors(consistency) * SECTOR + data
}

/// Write a new array's metadata onto `disks` as `mdadm --create` would, marked clean: the
/// disks hold zeros, and zeros are consistent at every level.
pub(super) fn create(
    built: &Built,
    consistency: Consistency,
    disks: &mut [SimDisk],
    rng: &mut SimRng,
) -> Result<(), String> {
    let data_offset = data_offset_sectors(consistency);
    let mut uuid = [0u8; 16];
    rng.fill(&mut uuid);
    let spec = CreateSpec {
        version: MetadataVersion::V1_2,
        level: built.md_level,
        layout: built.md_layout,
        chunk_sectors: built.chunk_sectors,
        raid_disks: disks.len() as u32,
        array_uuid: uuid,
        name: "sim:0".into(),
        ctime: 1_700_000_000,
        component_sectors: (built.md_level > 0).then(|| built.member_sectors[0]),
        bitmap: matches!(consistency, Consistency::Bitmap { .. }),
        data_offset: Some(data_offset),
        bitmap_chunk: match consistency {
            Consistency::Bitmap { chunk } => Some(chunk),
            _ => None,
        },
    };
    let sizes: Vec<u64> = built.member_sectors.iter().map(|s| (data_offset + s) * SECTOR).collect();
    let uuids: Vec<[u8; 16]> = (0..disks.len())
        .map(|_| {
            let mut u = [0u8; 16];
            rng.fill(&mut u);
            u
        })
        .collect();
    let mut plan = create::plan_with_policy(&spec, creation_policy(consistency), &sizes, &uuids)
        .map_err(|e| format!("creating the md array: {e}"))?;
    for (i, disk) in disks.iter_mut().enumerate() {
        let mut areas = plan.areas_for(i);
        let sb = &mut plan.superblocks[i];
        sb.set_clean(true);
        if let Consistency::Log { sectors } = consistency {
            // mdadm reserves 1 MiB; a smaller log right after the superblock is as valid to md
            // (it reads the size from the superblock) and keeps the disks small.
            let Superblock::V1(v1) = sb else { return Err("a 1.2 superblock was expected".into()) };
            v1.set_ppl(Some((8, sectors as u16)));
            let signature = uraid_md_format::ppl::signature(&uuid);
            let mut log = uraid_md_format::ppl::PplHeader::empty(signature).to_bytes();
            log.resize((sectors * SECTOR) as usize, 0);
            areas.push(create::Area { offset: SUPER_OFFSET + 8 * SECTOR, bytes: log, what: "ppl" });
        }
        for area in areas {
            disk.write_durable(area.offset, &area.bytes)?;
        }
        disk.write_durable(plan.members[i].super_byte_offset, &sb.to_bytes())?;
    }
    Ok(())
}

/// The policy the plan is made with: a log is added by hand after planning (see [`create`]).
fn creation_policy(consistency: Consistency) -> ConsistencyPolicy {
    match consistency {
        Consistency::Bitmap { .. } => ConsistencyPolicy::Bitmap,
        Consistency::Resync | Consistency::Log { .. } => ConsistencyPolicy::Resync,
    }
}

/// Assemble the array from the current bytes of `disks` (those with ids `ids`) as `uraid`
/// does, with what assembly wrote (log replay, fresh logs) applied to the disks, and the
/// metadata deferred to the simulation from then on.
///
/// `damaged` gets the devices left out for a damaged superblock (a superblock write the crash
/// tore: md leaves such a member out too, and it counts against the redundancy).
pub(super) fn assemble(
    disks: &mut [SimDisk],
    ids: &[usize],
    rules: AssemblyRules,
    damaged: &mut Vec<usize>,
) -> Result<OpenArray, OpenError> {
    // As `mdadm --assemble --scan`: a device with no md superblock is not a candidate (a spare
    // whose superblock never reached its media before a crash), nor one whose superblock is
    // damaged (a superblock write torn by the crash: md then takes the other members' word).
    let mut members = Vec::new();
    let mut used = Vec::new();
    damaged.clear();
    for &d in ids {
        let view = SimMember::of(&disks[d]);
        match uraid_device::probe(&view) {
            Ok(None) => {
                view.take_writes();
                continue;
            }
            Err(uraid_device::ProbeError::Damaged { .. }) => {
                view.take_writes();
                damaged.push(d);
                continue;
            }
            _ => {}
        }
        members.push(view);
        used.push(d);
    }
    let ids = &used;
    let devs: Vec<Box<dyn MemberDevice>> =
        members.iter().map(|m| Box::new(m.clone()) as Box<dyn MemberDevice>).collect();
    let result = OpenArray::assemble_with(devs, true, rules);
    for (m, &d) in members.iter().zip(ids) {
        for (offset, data) in m.take_writes() {
            // What assembly wrote it flushed before it returned.
            if let Err(e) = disks[d].write_durable(offset, &data) {
                return Err(OpenError::BadMember(format!("d{d}: {e}")));
            }
        }
    }
    let mut open = result?;
    open.defer_metadata(true);
    Ok(open)
}
