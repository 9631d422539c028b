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
