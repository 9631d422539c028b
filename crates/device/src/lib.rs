//! uraid-device (being written).
