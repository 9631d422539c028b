//! md's change of a stopped array's per-device size (`mdadm --grow --size`): how much of each
//! member md lets the array use (`rdev_size_change` of 0.90 and 1.x), the size each level takes
//! of that (`raid1_resize`, `raid5_resize`, `raid10_resize`), and what md records: the new
//! `size` (and 1.x `data_size`), a resync from the old end (`recovery_cp`, which 1.x writes as
//! `resync_offset` and 0.90 as `recovery_cp` with its checkpoint events), and the bitmap
//! resized to cover the new size.

use uraid_md_format::create::choose_bm_space;
use uraid_md_format::sb1::feature;
use uraid_md_format::{MetadataVersion, Superblock};

use crate::bitmap_change::{self, bitmap_at, BitmapChangeError, BitmapNow};
use crate::offline_change::{next_events, stamped, AreaWrite, OfflineChange, StoppedMember};

/// Sectors a 0.90 superblock can record per member: `size` is a 32-bit count of KiB.
const MAX_090_SECTORS: u64 = 1 << 33;

/// The size asked for: the most every member allows (`--size=max`), or sectors per member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeRequest {
    Max,
    Sectors(u64),
}

/// Why the size cannot change. Nothing is written after one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResizeError {
    #[error(
        "md cannot change the component size of a {0} array: it always uses all of every member (mdadm: \"Component size change is not supported\")"
    )]
    NoComponentSize(String),
    #[error("md cannot resize a raid10 with the far layout: its far copies start at fixed places on every member")]
    FarLayout,
    #[error("md cannot resize an array with a {0}")]
    Log(&'static str),
    #[error(
        "cannot shrink the component size from {from}K to {to}K: the data past the new end would be cut off (mdadm does so only after the filesystem on it was shrunk; uraid grows only)"
    )]
    Shrink { from: u64, to: u64 },
    #[error("{device} has room for {avail}K of data per device; --size asks for {wanted}K")]
    NoRoom { device: String, avail: u64, wanted: u64 },
    #[error("0.90 metadata records at most 4 TiB (4294967295K) per device; {0}K asked for (use 1.x metadata)")]
    TooLargeFor090(u64),
    #[error("the bitmap cannot follow the new size: {0}")]
    Bitmap(BitmapChangeError),
}

/// What a size change does.
#[derive(Debug, Clone)]
pub struct SizePlan {
    /// Sectors of each member used before and after.
    pub old_sectors: u64,
    pub new_sectors: u64,
    /// Where the resync md owes starts, in md's units for the level (member sectors; array
    /// sectors for raid10); `None` with `--assume-clean` or when nothing changes.
    pub resync_from: Option<u64>,
    /// The writes; `None` when the size does not change.
    pub change: Option<OfflineChange>,
}

/// Plan the size change of the stopped array made of `members` (every member, in sync and
/// clean: the caller checks the array's state) whose reference member holds `bitmap`.
pub fn plan(
    members: &[StoppedMember],
    bitmap: Option<&BitmapNow>,
    request: SizeRequest,
    assume_clean: bool,
    utime: u64,
) -> Result<SizePlan, ResizeError> {
    let reference = members.iter().max_by_key(|m| m.superblock.info().events).expect("an array has members");
    let info = reference.superblock.info();
    match info.level {
        1 | 4 | 5 | 6 | 10 => {}
        -1 => return Err(ResizeError::NoComponentSize("linear".into())),
        n => return Err(ResizeError::NoComponentSize(format!("raid{n}"))),
    }
    if info.ppl.is_some() {
        return Err(ResizeError::Log("partial parity log"));
    }
    if info.feature_map & feature::JOURNAL != 0 {
        return Err(ResizeError::Log("write journal"));
    }
    let geometry = Raid10Geometry::of(info.level, info.layout, info.chunk_sectors, info.raid_disks);
    if geometry.is_some_and(|g| g.far > 1 && !g.offset) {
        return Err(ResizeError::FarLayout);
    }
    let wanted = match request {
        SizeRequest::Max => None,
        SizeRequest::Sectors(s) => Some(s),
    };
    if info.version == MetadataVersion::V0_90 && wanted.is_some_and(|s| s >= MAX_090_SECTORS) {
        return Err(ResizeError::TooLargeFor090(wanted.unwrap_or(0) / 2));
    }
    // update_size: "max" is what the member with the least room allows; a given size must fit
    // every member.
    let rooms: Vec<(u64, u64)> = members.iter().map(|m| member_room(&m.superblock, m.device_sectors, wanted)).collect();
    let fits = match wanted {
        None => rooms.iter().map(|r| r.0).min().unwrap_or(0),
        Some(s) => {
            if let Some((m, r)) = members.iter().zip(&rooms).find(|(_, r)| r.0 < s) {
                return Err(ResizeError::NoRoom { device: m.name.clone(), avail: r.0 / 2, wanted: s / 2 });
            }
            s
        }
    };
    let new_sectors = match (info.level, geometry) {
        (10, Some(g)) => g.dev_sectors(fits),
        (4..=6, _) if info.chunk_sectors > 0 => fits / u64::from(info.chunk_sectors) * u64::from(info.chunk_sectors),
        _ => fits,
    };
    if info.version == MetadataVersion::V0_90 && new_sectors >= MAX_090_SECTORS {
        return Err(ResizeError::TooLargeFor090(new_sectors / 2));
    }
    let old_sectors = info.component_sectors;
    if new_sectors == old_sectors {
        return Ok(SizePlan { old_sectors, new_sectors, resync_from: None, change: None });
    }
    if new_sectors < old_sectors {
        return Err(ResizeError::Shrink { from: old_sectors / 2, to: new_sectors / 2 });
    }
    // What md resyncs and its bitmap covers: member sectors, the array for raid10.
    let sync_units = |sectors: u64| geometry.map_or(sectors, |g| g.array_sectors(sectors));
    let resync_from = (!assume_clean).then(|| sync_units(old_sectors));
    let mut superblocks = stamped(members, utime);
    for (sb, &(_, data_size)) in superblocks.iter_mut().zip(&rooms) {
        match sb {
            Superblock::V1(sb1) => {
                sb1.size = new_sectors;
                sb1.data_size = data_size;
            }
            Superblock::V090(sb0) => sb0.size = (new_sectors / 2) as u32,
        }
        if let Some(from) = resync_from {
            sb.set_resync_offset(from);
        }
    }
    let mut areas = vec![Vec::new(); members.len()];
    if let Some(now) = bitmap {
        let (_, image) = bitmap_change::resize(
            now,
            &reference.superblock,
            sync_units(old_sectors),
            sync_units(new_sectors),
            !assume_clean,
            info.events,
            next_events(members),
        )
        .map_err(ResizeError::Bitmap)?;
        for (i, sb) in superblocks.iter().enumerate() {
            if let Some(at) = bitmap_at(sb) {
                areas[i].push(AreaWrite { offset: at, bytes: image.clone(), what: "bitmap" });
            }
        }
    }
    Ok(SizePlan { old_sectors, new_sectors, resync_from, change: Some(OfflineChange { areas, superblocks }) })
}

/// md's `rdev_size_change` for a member: the sectors it lets the array use, and the 1.x
/// `data_size` it records, given the size asked for (`None`: the most). 1.1/1.2 use the device
/// up to its end; a 1.0 member without a bitmap reaches up to its bitmap space and bad-block
/// log below the superblock; a 1.0 member with a bitmap (which md does not move) and every 0.90
/// member keep what they hold.
fn member_room(sb: &Superblock, device_sectors: u64, wanted: Option<u64>) -> (u64, u64) {
    let take = |most: u64| match wanted {
        Some(s) if s <= most => s,
        _ => most,
    };
    match sb {
        Superblock::V090(_) => (sb.info().usable_sectors, 0),
        Superblock::V1(sb1) if sb1.version == MetadataVersion::V1_0 => {
            if sb1.feature_map & feature::BITMAP_OFFSET != 0 {
                return (sb1.data_size, sb1.data_size);
            }
            let most = sb1.super_offset.saturating_sub(choose_bm_space(device_sectors) + 8);
            // Never below what is recorded: md's own placement may have left a larger room.
            let size = take(most.max(sb1.data_size));
            (most.max(sb1.data_size), size)
        }
        Superblock::V1(sb1) => {
            let most = device_sectors.saturating_sub(sb1.data_offset);
            (most, take(most))
        }
    }
}

/// A raid10's shape as md's `raid10_size` and `calc_sectors` use it.
#[derive(Debug, Clone, Copy)]
struct Raid10Geometry {
    near: u64,
    far: u64,
    offset: bool,
    chunk: u64,
    raid_disks: u64,
}

impl Raid10Geometry {
    fn of(level: i32, layout: i32, chunk_sectors: u32, raid_disks: u32) -> Option<Raid10Geometry> {
        (level == 10).then(|| Raid10Geometry {
            near: (layout & 255).max(1) as u64,
            far: ((layout >> 8) & 255).max(1) as u64,
            offset: layout & 0x10000 != 0,
            chunk: u64::from(chunk_sectors.max(1)),
            raid_disks: u64::from(raid_disks.max(1)),
        })
    }

    /// `raid10_size`: the array sectors `sectors` of each member hold.
    fn array_sectors(self, sectors: u64) -> u64 {
        sectors / self.chunk / self.far * self.raid_disks / self.near * self.chunk
    }

    /// `calc_sectors`: the member sectors used for an array of `sectors` per member.
    fn dev_sectors(self, sectors: u64) -> u64 {
        let array_chunks = sectors / self.chunk / self.far * self.raid_disks / self.near;
        (array_chunks * self.near * self.far).div_ceil(self.raid_disks) * self.chunk
    }
}

#[cfg(test)]
mod tests;
