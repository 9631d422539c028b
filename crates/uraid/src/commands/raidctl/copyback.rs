//! `-B`: copyback. A hot spare serving a column after `-F` has its data copied to the column's
//! own component (the one the configuration file names for it: the failed component, or the one
//! that replaced it), which then takes the column back; the spare is a spare again.
//!
//! As NetBSD's copyback (`rf_CopybackReconstructedData` suspends new requests while it copies),
//! the set serves nothing meanwhile: the spare's data area is copied whole (through the engine,
//! as the recovery of a mirror of the spare and the component), then the component is
//! flushed, and only then are the labels written (those NetBSD leaves after `raidctl -c; -B; -u`).
//! Until then the component keeps its old (stale) label or none, so a copyback cut short leaves
//! the spare serving the column.

use std::sync::Arc;

use uraid_device::raidframe_components::copyback::{copyback_mirror, copyback_requests, COPYBACK_WINDOW};
use uraid_device::MemberDevice;
use uraid_engine::array::{IoResult, MemberIo, MemberIoError, MemberOp, Request};
use uraid_engine::blocking::execute;
use uraid_raidframe::raidctl_session::{joining_label, LabelChange};
use uraid_raidframe_format::layout::data_offset;

use super::super::{err, CliError, CliResult};
use super::session::Configured;
use super::target::Target;
use crate::progress::bytes_bar;

pub fn run(target: &Target) -> CliResult {
    let array = target.open(true)?;
    let set = array.raidframe().expect("a RAIDframe set");
    let Some(&(spare, column)) = set.used_spares.first() else {
        return err(format!("{}: no hot spare serves a column: nothing to copy back", target.name));
    };
    let disks = target.resolved.disks.len();
    let component = &target.shown.disks[column];
    let Some(original) = set.components[column].clone() else {
        return err(format!("{component}: column {column}'s component cannot be opened: nothing to copy back to"));
    };
    let spare_dev = set.components[disks + spare].clone().expect("a used spare was opened");
    let sector = set.plan.layout.sector_bytes();
    let base = data_offset(sector);
    let data = array.engine().geometry().member_data_bytes();
    if original.size() < base + data {
        return err(format!(
            "{component}: holds {} bytes, column {column} needs {}: nothing written",
            original.size(),
            base + data
        ));
    }
    let served = set.metadata().labels()[column].clone().expect("a used spare has its label");
    // The driver opens the component anew for the copyback and records its size, blank or not
    // (unlike `-R`, see `raidctl_session`).
    let joining = joining_label(&served, column, Some(original.size() / sector));
    let mut configured = Configured::of(&array);
    configured.with_spare(Arc::clone(&spare_dev), Some(served));
    configured.joining(column, Arc::clone(&original), joining);
    array.close()?;
    copy(spare_dev.as_ref(), original.as_ref(), base, data)?;
    configured.unconfigure(LabelChange::CopiedBack(column))?;
    eprintln!(
        "uraid: column {column} copied back from hot spare {} to {component}; the spare is free again",
        target.shown.spares[spare]
    );
    Ok(())
}

/// The spare's data area onto the component's through the engine (the recovery of a mirror of
/// the two, `copyback_mirror`), then a flush of the component.
fn copy(from: &dyn MemberDevice, to: &dyn MemberDevice, base: u64, len: u64) -> CliResult {
    let bar = bytes_bar(len, "copyback");
    let mut mirror = copyback_mirror(len);
    let mut failed: Option<String> = None;
    for request in copyback_requests(len, COPYBACK_WINDOW) {
        let Request::Recover { offset, len: window } = request else { unreachable!("recovery requests") };
        let mut exec = |io: &MemberIo| {
            let (dev, at) = (if io.slot == 0 { from } else { to }, base + io.offset);
            let done = match &io.op {
                MemberOp::Read { len } => {
                    let mut buf = vec![0u8; *len as usize];
                    dev.read_at(at, &mut buf).map(|_| IoResult::Read(buf.into())).map_err(|e| ("reading", e))
                }
                MemberOp::Write { data } => {
                    dev.write_at(at, &data.to_vec()).map(|_| IoResult::Done).map_err(|e| ("writing", e))
                }
                _ => Ok(IoResult::Done),
            };
            done.unwrap_or_else(|(what, e)| {
                let message = format!("{}: {what} at byte {at}: {e}", dev.name());
                failed.get_or_insert(message.clone());
                IoResult::Failed(MemberIoError::other(message))
            })
        };
        if let Err(e) = execute(&mut mirror, request, &mut exec) {
            return Err(CliError(failed.unwrap_or_else(|| format!("copying member bytes {offset}+{window}: {e}"))));
        }
        if let Some(b) = &bar {
            b.set_position(offset + window);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    to.flush().map_err(|e| CliError(format!("{}: flush: {e}", to.name())))
}
