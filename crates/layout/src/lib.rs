//! uraid-layout (being written).
