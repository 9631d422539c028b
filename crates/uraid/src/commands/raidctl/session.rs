//! The end of a `uraid raidctl` command that changes the set: the labels NetBSD leaves at
//! `raidctl -u` after the verb (`uraid_raidframe::raidctl_session`), written to the set's
//! components once the verb is done and the set closed.

use std::sync::Arc;

use uraid_device::raidframe_components::write_component;
use uraid_device::{MemberDevice, OpenArray};
use uraid_raidframe::raidctl_session::{LabelChange, Session};
use uraid_raidframe_format::layout::ParityMap;

use super::super::{CliError, CliResult};
use super::target::parity_clean;

/// A configured set's labels and the devices to write them to, taken before the verb runs.
pub struct Configured {
    session: Session,
    /// Per column, the component serving it (`None`: failed or absent).
    devices: Vec<Option<Arc<dyn MemberDevice>>>,
    /// The set keeps a parity map (written clean when parity has been rewritten).
    map_in_use: bool,
}

impl Configured {
    pub fn of(array: &OpenArray) -> Configured {
        let set = array.raidframe().expect("a RAIDframe set");
        let labels = set.metadata().labels().to_vec();
        let first = labels.iter().flatten().next();
        let map_fields = set.plan.configured_map_fields(first);
        let columns = set.plan.columns.len();
        let devices = (0..columns)
            .map(|c| set.plan.component_of(c).and_then(|i| set.components[i].clone()).filter(|_| labels[c].is_some()))
            .collect();
        let map_in_use =
            map_fields.is_some_and(|(flags, ..)| flags & uraid_raidframe_format::label::PMLABEL_DISABLE == 0);
        Configured {
            session: Session {
                labels,
                mod_counter: set.plan.mod_counter,
                parity_good: parity_clean(array),
                map_fields,
            },
            devices,
            map_in_use,
        }
    }

    /// Whether the set's parity was known good at configure.
    pub fn parity_good(&self) -> bool {
        self.session.parity_good
    }

    /// Write the labels NetBSD leaves after `change` (the set must be closed by now).
    pub fn unconfigure(&self, change: LabelChange) -> CliResult {
        let labels = self.session.final_labels(change).map_err(|e| CliError(e.to_string()))?;
        let map = (change == LabelChange::ParityRewritten && self.map_in_use).then(ParityMap::clean);
        for (label, dev) in labels.iter().zip(&self.devices) {
            if let (Some(label), Some(dev)) = (label, dev) {
                write_component(dev.as_ref(), label, map.as_ref())?;
            }
        }
        Ok(())
    }
}
