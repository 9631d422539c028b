//! uraid-parity (being written).
