//! The partial parity log at assembly (md's `ppl_load` and `ppl_write_empty_header`): where each
//! member keeps its log, replaying the logs of an array that stopped uncleanly, and starting
//! every log empty. What the log is and why it closes the write hole: `uraid_engine::ppl`.

use uraid_engine::array::MemberIoError;
use uraid_engine::ppl::{latest_header, replay, MemberLog, PplConfig, ReplayIo, ReplayReport};
use uraid_engine::{Geometry, SlotState};
use uraid_md_format::ppl::PplHeader;
use uraid_md_format::Superblock;

use crate::error::OpenError;
use crate::target::MemberTarget;

/// The log area a superblock describes: byte offset on its device and length.
pub(crate) fn log_area_of(sb: &Superblock) -> Option<(u64, u64)> {
    let Superblock::V1(sb) = sb else { return None };
    // mdadm sets MD_FEATURE_PPL; md switches it to MULTIPLE_PPLS once it runs the array.
    let (offset, size) = sb.ppl_area()?;
    let start = sb.super_offset as i64 + i64::from(offset);
    (start >= 0 && size > 0).then(|| (start as u64 * 512, u64::from(size) * 512))
}

/// What replaying the logs found, over every member.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LogReplay {
    pub report: ReplayReport,
    /// Members whose log had no valid header (md's mismatch: the array then needs a resync).
    pub invalid_logs: Vec<String>,
}

impl LogReplay {
    /// Whether every log was read and applied in full, so parity matches data everywhere.
    pub fn complete(&self) -> bool {
        self.invalid_logs.is_empty() && self.report.bad == 0
    }
}

struct TargetIo<'a> {
    targets: &'a [Option<MemberTarget>],
}

impl ReplayIo for TargetIo<'_> {
    fn read(&mut self, slot: usize, offset: u64, len: u64) -> Result<Vec<u8>, MemberIoError> {
        let t = self.target(slot)?;
        let (at, mut buf) = (t.base + offset, vec![0u8; len as usize]);
        t.dev.read_at(at, &mut buf).map_err(|e| t.failure("reading for log replay", Some(at), &e))?;
        Ok(buf)
    }

    fn write(&mut self, slot: usize, offset: u64, data: &[u8]) -> Result<(), MemberIoError> {
        let t = self.target(slot)?;
        let at = t.base + offset;
        t.dev.write_at(at, data).map_err(|e| t.failure("writing parity in log replay", Some(at), &e))
    }
}

impl TargetIo<'_> {
    fn target(&self, slot: usize) -> Result<&MemberTarget, MemberIoError> {
        self.targets[slot].as_ref().ok_or_else(|| MemberIoError::other(format!("slot {slot} is empty")))
    }
}

/// Replay the logs of the in-sync members together (raid6 keeps each entry on two of them),
/// then flush the members.
pub(crate) fn replay_logs(
    geometry: &Geometry,
    slots: &[SlotState],
    targets: &[Option<MemberTarget>],
    config: &PplConfig,
) -> Result<LogReplay, OpenError> {
    let mut out = LogReplay::default();
    let mut found: Vec<(usize, PplHeader, Vec<u8>)> = Vec::new();
    for (slot, target) in targets.iter().enumerate() {
        let Some(t) = target else { continue };
        if slots[slot] != SlotState::InSync {
            continue;
        }
        let (at, len) = t.log_area.expect("every member of a logged array has a log area");
        let mut area = vec![0u8; len as usize];
        t.dev.read_at(at, &mut area).map_err(|source| OpenError::Io {
            device: t.dev.name().to_string(),
            what: "reading the partial parity log",
            source,
        })?;
        let Some((offset, header)) = latest_header(&area, config.signature) else {
            out.invalid_logs.push(t.dev.name().to_string());
            continue;
        };
        area.drain(..offset + uraid_md_format::ppl::HEADER_BYTES);
        found.push((slot, header, area));
    }
    let logs: Vec<MemberLog> = found.iter().map(|(slot, header, pp)| MemberLog { slot: *slot, header, pp }).collect();
    out.report =
        replay(geometry, slots, &logs, &mut TargetIo { targets }).map_err(|e| OpenError::BadMember(e.to_string()))?;
    flush_all(targets)?;
    Ok(out)
}

/// Start every member's log empty: zeros over the area, then md's empty header (so no old log
/// can be mistaken for a newer one).
pub(crate) fn reset_logs(targets: &[Option<MemberTarget>], config: &PplConfig) -> Result<(), OpenError> {
    for t in targets.iter().flatten() {
        write_empty_log(t, config)?;
    }
    flush_all(targets)
}

/// Zeros over one member's log area and an empty header at its start.
pub(crate) fn write_empty_log(t: &MemberTarget, config: &PplConfig) -> Result<(), OpenError> {
    let (at, len) = t.log_area.expect("every member of a logged array has a log area");
    t.dev.write_at(at, &empty_log(config, len)).map_err(|source| OpenError::Io {
        device: t.dev.name().to_string(),
        what: "writing an empty partial parity log",
        source,
    })
}

/// What an empty log area holds: md's empty header, then zeros.
pub(crate) fn empty_log(config: &PplConfig, len: u64) -> Vec<u8> {
    let mut image = vec![0u8; len as usize];
    let header = PplHeader::empty(config.signature).to_bytes();
    image[..header.len()].copy_from_slice(&header);
    image
}

fn flush_all(targets: &[Option<MemberTarget>]) -> Result<(), OpenError> {
    for t in targets.iter().flatten() {
        t.dev.flush().map_err(|source| OpenError::Io { device: t.dev.name().to_string(), what: "flush", source })?;
    }
    Ok(())
}
