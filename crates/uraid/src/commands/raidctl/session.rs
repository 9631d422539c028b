//! The end of a `uraid raidctl` command that changes the set: the labels NetBSD leaves at
//! `raidctl -u` after the verb (`uraid_raidframe::raidctl_session`), written to the set's
//! components once the verb is done and the set closed.

use std::sync::Arc;

use uraid_device::raidframe_components::write_component;
use uraid_device::{MemberDevice, OpenArray};
use uraid_raidframe::raidctl_session::{LabelChange, Session};
use uraid_raidframe_format::label::ComponentLabel;
use uraid_raidframe_format::layout::ParityMap;

use super::super::{CliError, CliResult};
use super::target::parity_clean;

/// A configured set's labels and the devices to write them to, taken before the verb runs.
pub struct Configured {
    session: Session,
    /// Per column, the component serving it (`None`: failed or absent).
    devices: Vec<Option<Arc<dyn MemberDevice>>>,
    /// The hot spare the verb used, if it writes one's label.
    spare: Option<Arc<dyn MemberDevice>>,
    /// The set keeps a parity map (written clean when parity has been rewritten).
    map_in_use: bool,
}

impl Configured {
    pub fn of(array: &OpenArray) -> Configured {
        let set = array.raidframe().expect("a RAIDframe set");
        let session = set.session(set.plan.mod_counter, parity_clean(array));
        let columns = set.plan.columns.len();
        let devices = (0..columns)
            .map(|c| {
                let labelled = session.labels[c].is_some();
                set.plan.component_of(c).and_then(|i| set.components[i].clone()).filter(|_| labelled)
            })
            .collect();
        let map_in_use =
            session.map_fields.is_some_and(|(flags, ..)| flags & uraid_raidframe_format::label::PMLABEL_DISABLE == 0);
        Configured { session, devices, spare: None, map_in_use }
    }

    /// Whether the set's parity was known good at configure.
    pub fn parity_good(&self) -> bool {
        self.session.parity_good
    }

    /// The verb used the hot spare `dev`, which served a column with label `served` at
    /// configure (copyback) or none (reconstruction onto it).
    pub fn with_spare(&mut self, dev: Arc<dyn MemberDevice>, served: Option<ComponentLabel>) {
        self.spare = Some(dev);
        self.session.spare_served = served;
    }

    /// Component `dev` joins the set in `column` with `label` (copied back onto).
    pub fn joining(&mut self, column: usize, dev: Arc<dyn MemberDevice>, label: ComponentLabel) {
        self.devices[column] = Some(dev);
        self.session.labels[column] = Some(label);
    }

    /// Write the labels NetBSD leaves after `change` (the set must be closed by now): the
    /// columns' first, then the spare's (a spare that took a column is written last, so that
    /// it never holds the column's newest label before the others do).
    pub fn unconfigure(&self, change: LabelChange) -> CliResult {
        let labels = self.session.final_labels(change).map_err(|e| CliError(e.to_string()))?;
        let spare_label = self.session.spare_label(change).map_err(|e| CliError(e.to_string()))?;
        let map = (change == LabelChange::ParityRewritten && self.map_in_use).then(ParityMap::clean);
        for (label, dev) in labels.iter().zip(&self.devices) {
            if let (Some(label), Some(dev)) = (label, dev) {
                write_component(dev.as_ref(), label, map.as_ref())?;
            }
        }
        if let (Some(label), Some(dev)) = (spare_label, &self.spare) {
            write_component(dev.as_ref(), &label, None)?;
        }
        Ok(())
    }
}
