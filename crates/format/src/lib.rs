//! uraid-format (being written).
