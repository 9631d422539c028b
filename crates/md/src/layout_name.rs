//! md's layout numbers as mdadm names them, for the levels that have named layouts (raid5 and
//! raid6 parity algorithms, raid10's near/far/offset copies): one place for every message and
//! report that names a layout.

use uraid_layout::{Level, ParityAlgorithm, Raid10Format};

/// The name of md layout `layout` at `level` ("left-symmetric", "near=2"), or `None` where the
/// level has no named layouts or md knows no such number.
pub fn layout_name(level: Level, layout: i32) -> Option<String> {
    let number = u32::try_from(layout).ok()?;
    match level {
        Level::Raid5 | Level::Raid6 => ParityAlgorithm::from_md(level, number).ok().map(|a| a.name().to_string()),
        Level::Raid10 => Raid10Format::from_md(number).ok().map(|f| f.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_md_knows_and_nothing_else() {
        assert_eq!(layout_name(Level::Raid5, 2).as_deref(), Some("left-symmetric"));
        assert_eq!(layout_name(Level::Raid6, 18).as_deref(), Some("left-symmetric-6"));
        assert_eq!(layout_name(Level::Raid10, 0x102).as_deref(), Some("near=2"));
        assert_eq!(layout_name(Level::Raid5, 99), None);
        assert_eq!(layout_name(Level::Raid5, -1), None);
        assert_eq!(layout_name(Level::Raid1, 0), None);
    }
}
