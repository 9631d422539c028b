//! The state of one member slot, as the engine, the partial parity log and the metadata formats
//! all see it.

use std::fmt;

/// The state of one member slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    InSync,
    /// No device fills the slot.
    Missing,
    /// The device failed during service; it is no longer used.
    Faulty,
    /// A device fills the slot but its contents are not trusted yet (a spare being rebuilt):
    /// every write lands on it too, no read ever uses it.
    Recovering,
}

impl SlotState {
    /// No working device holds the slot (none was there, or the one there failed): a device may
    /// take it, to be rebuilt there.
    pub fn is_vacant(self) -> bool {
        matches!(self, SlotState::Missing | SlotState::Faulty)
    }
}

impl fmt::Display for SlotState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SlotState::InSync => "in sync",
            SlotState::Missing => "missing",
            SlotState::Faulty => "faulty",
            SlotState::Recovering => "recovering",
        })
    }
}
