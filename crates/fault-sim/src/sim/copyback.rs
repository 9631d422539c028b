//! RAIDframe's copyback (`raidctl -B`) in the simulation: a column a hot spare took over is
//! copied to a new component, which then takes the column back, the way `uraid raidctl -B`
//! does it:
//!
//! - the set stops serving (NetBSD's copyback suspends new requests too) and its members are
//!   flushed, as `raidctl -B` closes the set first;
//! - the spare's data area is copied to the new component through the engine
//!   (`uraid_device::raidframe_components::copyback`: the recovery of a two-way mirror of the
//!   spare and the new component, the code `uraid raidctl -B` copies with);
//! - the new component is flushed;
//! - the labels the driver leaves after `-B` (`LabelChange::CopiedBack`) are written and
//!   flushed component by component, the columns' first, the spare's last.
//!
//! A crash may cut it short after any step: until the labels say otherwise the spare still
//! serves the column, and a copy cut short is never read. Either way the set is then assembled
//! again from what the components hold, by autoconfiguration.

use uraid_device::raidframe_components::copyback::{copyback_mirror, copyback_requests};
use uraid_engine::array::{Completion, IoResult, MemberIoError, MemberOp, Request};
use uraid_engine::blocking::execute;
use uraid_raidframe::raidctl_session::{joining_label, LabelChange};
use uraid_raidframe_format::layout::{label_area_size, LABEL_OFFSET};

use super::{Failure, Invariant, Mode, Mutation, Scenario, Sim, SimFormat};

/// Bytes copied per recovery request: smaller than the CLI's, so that crashes land among
/// several windows of the simulation's small components.
const WINDOW: u64 = 64 * 1024;

/// One step of a copyback, after any of which a crash may come.
enum Step {
    /// Copy member bytes `[offset, offset + len)` of the column from the spare.
    Copy { offset: u64, len: u64 },
    /// Flush the new component.
    FlushNew,
    /// Write a label to a device, then flush it.
    Label { dev: usize, area: Vec<u8> },
}

impl Sim {
    /// Copy a column back from the spare serving it, once a run (in half the RAIDframe runs
    /// with spares, every run under the copyback mutation), when the set is whole and quiet.
    pub(super) fn maybe_copyback(&mut self) -> Result<(), Failure> {
        if self.format != SimFormat::Raidframe
            || self.copyback_decided
            || self.mode != Mode::Normal
            || self.cfg.scenario != Scenario::Standard
        {
            return Ok(());
        }
        if self.spare_column().is_none() || !self.quiet_and_whole() {
            return Ok(());
        }
        self.copyback_decided = true;
        let planted = self.cfg.mutation == Some(Mutation::RaidframeCopybackLabelsFirst);
        if !planted && !self.frng.chance(1, 2) {
            return Ok(());
        }
        self.quiesce()?;
        if self.ended.is_some() || !self.quiet_and_whole() {
            return Ok(());
        }
        match self.spare_column() {
            Some(column) => self.copyback(column),
            None => Ok(()),
        }
    }

    /// A column served by a device added as a spare.
    fn spare_column(&self) -> Option<usize> {
        (0..self.slot_dev.len()).find(|&s| self.slot_dev[s].is_some_and(|d| self.spare_devs.contains(&d)))
    }

    /// No member out or being rebuilt, no resync owed, nothing being recorded.
    fn quiet_and_whole(&self) -> bool {
        !self.needs_resync
            && !self.open.engine().degraded()
            && self.rebuilding.is_empty()
            && self.policy.pass_idle(&self.open)
            && self.open.metadata_pending().is_none()
            && self.reqs.is_empty()
    }

    fn copyback(&mut self, column: usize) -> Result<(), Failure> {
        let spare = self.slot_dev[column].expect("a spare serves the column");
        let base = self.targets[column].as_ref().expect("the column's target").base;
        let data = self.geometry.member_data_bytes();
        let set = self.open.raidframe().expect("a RAIDframe set");
        let sector = set.plan.layout.sector_bytes();
        let served = set.metadata().labels()[column].clone().expect("the spare serving the column has its label");
        let parity_good = set.plan.labels_clean && !self.open.needs_resync();
        let mut session = set.session(set.metadata().mod_counter(), parity_good);
        let new = self.new_device();
        self.joined.push(new);
        trace!(self, "COPYBACK: column {column} from spare d{spare} to new component d{new}");
        session.spare_served = Some(served.clone());
        session.labels[column] = Some(joining_label(&served, column, Some(self.disk_bytes / sector)));
        let change = LabelChange::CopiedBack(column);
        let labels = session.final_labels(change).map_err(|e| self.fail(Invariant::Protocol, e.to_string()))?;
        let spare_label = session.spare_label(change).map_err(|e| self.fail(Invariant::Protocol, e.to_string()))?;
        let area =
            |label: &uraid_raidframe_format::label::ComponentLabel| label.to_area(label_area_size(sector) as usize);
        let mut label_steps = Vec::new();
        for (c, label) in labels.iter().enumerate() {
            let dev = if c == column { Some(new) } else { self.slot_dev[c] };
            if let (Some(label), Some(dev)) = (label, dev) {
                label_steps.push(Step::Label { dev, area: area(label) });
            }
        }
        if let Some(label) = spare_label {
            label_steps.push(Step::Label { dev: spare, area: area(&label) });
        }
        let mut copy_steps: Vec<Step> = copyback_requests(data, WINDOW)
            .map(|r| match r {
                Request::Recover { offset, len } => Step::Copy { offset, len },
                _ => unreachable!("recovery requests"),
            })
            .collect();
        copy_steps.push(Step::FlushNew);
        let steps: Vec<Step> = if self.cfg.mutation == Some(Mutation::RaidframeCopybackLabelsFirst) {
            // Planted: the labels go out before the copy, so a crash inside the copy leaves the
            // new component taking the column with part of its bytes.
            label_steps.into_iter().chain(copy_steps).collect()
        } else {
            copy_steps.into_iter().chain(label_steps).collect()
        };
        let labels = steps.iter().filter(|s| matches!(s, Step::Label { .. })).count();
        let mut cut = match self.cfg.mutation {
            Some(Mutation::RaidframeCopybackLabelsFirst) => {
                Some(self.frng.between(labels as u64, steps.len() as u64 - 1) as usize)
            }
            _ => self.frng.chance(1, 2).then(|| self.frng.below(steps.len() as u64 + 1) as usize),
        };
        // A crash among the label writes may leave the survivors' labels newer than any on the
        // column (NetBSD's labels, written one component at a time, give no better order): the
        // set comes back without the column, as NetBSD's would. Only where the set can do
        // without it, as for any fault of the plan.
        let first_label = steps.iter().position(|s| matches!(s, Step::Label { .. })).unwrap_or(steps.len());
        if cut.is_some_and(|c| c > first_label) && !self.within_budget_with(column) {
            cut = Some(first_label);
        }
        // As `raidctl -B` closes the set first: everything written so far is on the media.
        for d in self.slot_dev.iter().flatten().copied().collect::<Vec<_>>() {
            let mark = self.devices[d].flush_mark();
            self.devices[d].flush_done(mark);
        }
        let mut mirror = copyback_mirror(data);
        self.report.copybacks += 1;
        // The column changes hands: neither its spare nor its new component is expected to be
        // fresh by what it held before (the spare's label goes stale by design).
        self.slot_dev[column] = None;
        for (i, step) in steps.iter().enumerate() {
            if cut == Some(i) {
                trace!(self, "COPYBACK cut short by a crash before step {i} of {}", steps.len());
                self.report.copybacks_cut_short += 1;
                return self.crash();
            }
            match step {
                Step::Copy { offset, len } => {
                    let devices = &mut self.devices;
                    let mut exec = |io: &uraid_engine::MemberIo| {
                        let dev = if io.slot == 0 { spare } else { new };
                        let at = base + io.offset;
                        let done = match &io.op {
                            MemberOp::Read { len } => devices[dev].read(at, *len).map(|b| IoResult::Read(b.into())),
                            MemberOp::Write { data } => devices[dev].write(at, &data.to_vec()).map(|_| IoResult::Done),
                            _ => Ok(IoResult::Done),
                        };
                        done.unwrap_or_else(|e| IoResult::Failed(MemberIoError::other(e)))
                    };
                    match execute(&mut mirror, Request::Recover { offset: *offset, len: *len }, &mut exec) {
                        Ok(Completion::Recovered) => {}
                        other => {
                            // As `raidctl -B` stops at a read or write error: the spare still
                            // serves the column.
                            trace!(self, "COPYBACK stopped at member byte {offset}: {other:?}");
                            return self.reopen();
                        }
                    }
                }
                Step::FlushNew => {
                    let mark = self.devices[new].flush_mark();
                    self.devices[new].flush_done(mark);
                }
                Step::Label { dev, area } => {
                    if let Err(e) = self.devices[*dev].write(LABEL_OFFSET, area) {
                        trace!(self, "COPYBACK label write to d{dev} failed: {e}");
                        return self.reopen();
                    }
                    let mark = self.devices[*dev].flush_mark();
                    self.devices[*dev].flush_done(mark);
                }
            }
        }
        trace!(self, "COPYBACK done: d{new} serves column {column}, d{spare} is a spare again");
        self.reopen()
    }

    /// Assemble the set again from what the components hold, with nothing lost (the set was
    /// stopped for the copyback).
    fn reopen(&mut self) -> Result<(), Failure> {
        let exposed = self.model.unflushed_ranges(self.last_flush);
        self.reassemble(&exposed)
    }
}
