//! uraid-engine (being written).
