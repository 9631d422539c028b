//! mdadm's `--grow --size` and `--grow --bitmap` on the member devices of a stopped md array:
//! the members are read and checked as one whole array (every member given, none stale, no
//! reshape part-way), md's rules ([`uraid_md::resize`], [`uraid_md::bitmap_change`]) decide
//! what changes, and only then is anything written: the bitmap areas of every member first and
//! flushed, the superblocks naming them after, so a crash between the two leaves the array as
//! it was.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use uraid_md::assemble::{self, Candidate, MemberVerdict};
use uraid_md::bitmap_change::{self, bitmap_at, new_bitmap_sectors, BitmapChangeError, BitmapNow};
use uraid_md::offline_change::{OfflineChange, StoppedMember};
use uraid_md::resize::{self, ResizeError, SizeRequest};
use uraid_md_format::bitmap::{self, BitmapSuper};
use uraid_md_format::{Role, SECTOR};

use crate::member::MemberDevice;
use crate::open_member::Member;
use crate::probe::{no_superblock, probe};
use crate::OpenError;

/// What to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MdChange {
    /// `--size`: the sectors of each member the array uses; `assume_clean` records no resync
    /// of the new space.
    Size { request: SizeRequest, assume_clean: bool },
    /// `--bitmap=internal`, with `--bitmap-chunk` in bytes.
    AddBitmap { chunk: Option<u64> },
    /// `--bitmap=none`.
    RemoveBitmap,
}

/// What was done (its `Display` says it as mdadm would, in one line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MdChanged {
    /// The size asked for is the size the array has (sectors per member).
    SizeUnchanged {
        sectors: u64,
    },
    /// Sectors per member before and after; where md's resync of the new space starts (member
    /// sectors, array sectors for raid10), unless `--assume-clean`.
    Resized {
        old: u64,
        new: u64,
        resync_from: Option<u64>,
    },
    /// A bitmap of this chunk (bytes) now covers the array.
    BitmapAdded {
        chunk: u32,
    },
    BitmapRemoved,
}

impl std::fmt::Display for MdChanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MdChanged::SizeUnchanged { sectors } => write!(f, "component size unchanged at {}K", sectors / 2),
            MdChanged::Resized { new, resync_from: Some(from), .. } => {
                write!(f, "component size has been set to {}K; the new space is resynced from {}K", new / 2, from / 2)
            }
            MdChanged::Resized { new, resync_from: None, .. } => {
                write!(f, "component size has been set to {}K; the new space is recorded in sync", new / 2)
            }
            MdChanged::BitmapAdded { chunk } => {
                write!(f, "internal bitmap added, {}K of each member per bit", chunk / 1024)
            }
            MdChanged::BitmapRemoved => write!(f, "internal bitmap removed"),
        }
    }
}

/// Why nothing was changed, or where writing stopped.
#[derive(Debug, thiserror::Error)]
pub enum MdChangeError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Resize(#[from] ResizeError),
    #[error(transparent)]
    Bitmap(#[from] BitmapChangeError),
    /// The array is not in a state md changes it in.
    #[error("{0}")]
    Refused(String),
    #[error("{device}: {what}: {source}")]
    Write { device: String, what: String, source: std::io::Error },
}

/// A member, opened writable, with what was read from it.
struct Opened {
    dev: Arc<dyn MemberDevice>,
    member: StoppedMember,
}

/// Apply `change` to the stopped array whose members are `paths` (all of them).
pub fn change_stopped(paths: &[PathBuf], change: MdChange) -> Result<MdChanged, MdChangeError> {
    let mut devs: Vec<Arc<dyn MemberDevice>> = Vec::new();
    for p in paths {
        let dev = Member::open(p, true).map_err(|source| OpenError::Open { path: p.display().to_string(), source })?;
        devs.push(Arc::new(dev));
    }
    change_on(devs, change)
}

/// [`change_stopped`] on devices already open, writable, that nothing else writes meanwhile (a
/// server applies it so between stopping its engine and opening the array again).
pub fn change_on(devs: Vec<Arc<dyn MemberDevice>>, change: MdChange) -> Result<MdChanged, MdChangeError> {
    let mut opened = Vec::new();
    for dev in devs {
        let probed = probe(dev.as_ref()).map_err(OpenError::from)?;
        let Some(probed) = probed else {
            return Err(OpenError::BadMember(no_superblock(dev.as_ref()).to_string()).into());
        };
        let member = StoppedMember {
            name: dev.name().to_string(),
            superblock: probed.superblock,
            device_sectors: dev.size() / SECTOR,
        };
        opened.push(Opened { dev, member });
    }
    let reference = check_whole(&opened, change)?;
    let members: Vec<StoppedMember> = opened.iter().map(|o| o.member.clone()).collect();
    let info = members[reference].superblock.info();
    let utime = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (writes, done) = match change {
        MdChange::Size { request, assume_clean } => {
            let bitmap = read_bitmap(&opened[reference])?;
            let plan = resize::plan(&members, bitmap.as_ref(), request, assume_clean, utime)?;
            match plan.change {
                None => return Ok(MdChanged::SizeUnchanged { sectors: plan.old_sectors }),
                Some(c) => (
                    c,
                    MdChanged::Resized { old: plan.old_sectors, new: plan.new_sectors, resync_from: plan.resync_from },
                ),
            }
        }
        MdChange::AddBitmap { chunk } => {
            let sectors = new_bitmap_sectors(info.level, info.layout, info.raid_disks, info.component_sectors);
            let c = bitmap_change::add(&members, sectors, chunk, utime)?;
            let chunk = c.areas[0].first().and_then(|a| BitmapSuper::parse(&a.bytes).ok()).map_or(0, |h| h.chunksize);
            (c, MdChanged::BitmapAdded { chunk })
        }
        MdChange::RemoveBitmap => (bitmap_change::remove(&members, utime)?, MdChanged::BitmapRemoved),
    };
    write(&opened, &writes)?;
    Ok(done)
}

/// Check that `opened` is a whole array md would change so; the index of the reference member.
fn check_whole(opened: &[Opened], change: MdChange) -> Result<usize, MdChangeError> {
    let candidates: Vec<Candidate> =
        opened.iter().map(|o| Candidate { name: o.member.name.clone(), info: o.member.superblock.info() }).collect();
    let plan = assemble::plan(&candidates).map_err(OpenError::from)?;
    for (o, verdict) in opened.iter().zip(&plan.verdicts) {
        if !matches!(verdict, MemberVerdict::Active { .. } | MemberVerdict::Spare) {
            return Err(MdChangeError::Refused(format!(
                "{}: {verdict}; give only the array's current members (re-add it first with uraid add)",
                o.member.name
            )));
        }
    }
    // A slot the superblocks still give to a device that is not here: that member was left
    // out of the list, and a change recorded without it would leave it stale.
    let roles = &candidates[plan.reference].info.roles;
    if let Some(slot) = plan.missing_slots().into_iter().find(|s| roles.contains(&Role::Active(*s as u32))) {
        return Err(MdChangeError::Refused(format!(
            "the member in slot {slot} was not given: give every member of the array (a change recorded without it would leave it out of date)"
        )));
    }
    if let Some(r) = plan.reshape {
        return Err(MdChangeError::Refused(format!(
            "a reshape is in progress (reshape position {}K): finish it first (uraid grow --continue)",
            r.position / 2
        )));
    }
    let refuse = |text: &str| Err(MdChangeError::Refused(text.to_string()));
    if !plan.clean {
        return refuse(
            "the array owes a resync (it was not shut down cleanly, or a grow left new space to sync), and md changes neither size nor bitmap until it is done: resync it first (uraid resync)",
        );
    }
    if plan.degraded() && matches!(change, MdChange::Size { .. }) {
        let missing = plan.missing_slots();
        return Err(MdChangeError::Refused(format!(
            "the array is degraded ({} of {} slots empty or rebuilding): rebuild it before growing it, so the new space can be resynced",
            missing.len().max(plan.recovering.iter().flatten().count()),
            plan.raid_disks
        )));
    }
    Ok(plan.reference)
}

/// The bitmap the reference member holds, when its superblock names one.
fn read_bitmap(o: &Opened) -> Result<Option<BitmapNow>, MdChangeError> {
    let Some(at) = bitmap_at(&o.member.superblock) else { return Ok(None) };
    let io = |source| OpenError::Io { device: o.member.name.clone(), what: "reading bitmap", source };
    let mut head = vec![0u8; bitmap::HEADER_BYTES];
    o.dev.read_at(at, &mut head).map_err(io)?;
    let header = BitmapSuper::parse(&head)
        .map_err(|e| OpenError::BadMember(format!("{}: bitmap at byte {at}: {e}", o.member.name)))?;
    let mut bits = vec![0u8; header.bits_bytes()];
    o.dev.read_at(at + bitmap::HEADER_BYTES as u64, &mut bits).map_err(io)?;
    Ok(Some(BitmapNow { header, bits }))
}

/// Write `change`: every member's areas, flushed; then every superblock, flushed.
fn write(opened: &[Opened], change: &OfflineChange) -> Result<(), MdChangeError> {
    let failed = |o: &Opened, what: String| {
        let device = o.member.name.clone();
        move |source| MdChangeError::Write { device, what, source }
    };
    for (o, areas) in opened.iter().zip(&change.areas) {
        for a in areas {
            o.dev
                .write_at(a.offset, &a.bytes)
                .map_err(failed(o, format!("writing the {} at byte {}", a.what, a.offset)))?;
        }
    }
    for o in opened {
        o.dev.flush().map_err(failed(o, "flushing".into()))?;
    }
    for (i, o) in opened.iter().enumerate() {
        let at = change.superblock_offset(i);
        o.dev
            .write_at(at, &change.superblocks[i].to_bytes())
            .map_err(failed(o, format!("writing the superblock at byte {at}")))?;
    }
    for o in opened {
        o.dev.flush().map_err(failed(o, "flushing the superblock".into()))?;
    }
    Ok(())
}
