//! RAID levels: md's level numbers (as stored in superblocks and shown in sysfs), the names sysfs
//! and mdadm print, and the spellings mdadm accepts on its command line (its `pers` table).

use std::fmt;

use crate::LayoutError;

/// A RAID level uraid can lay out.
///
/// md also knows multipath (-4), faulty (-5) and containers (-100); those are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    Linear,
    Raid0,
    Raid1,
    Raid4,
    Raid5,
    Raid6,
    Raid10,
}

impl Level {
    /// Every supported level, in md number order.
    pub const ALL: [Level; 7] =
        [Level::Linear, Level::Raid0, Level::Raid1, Level::Raid4, Level::Raid5, Level::Raid6, Level::Raid10];

    /// The level for md's level number (`LEVEL_LINEAR` is -1).
    pub fn from_md(level: i32) -> Result<Level, LayoutError> {
        Ok(match level {
            -1 => Level::Linear,
            0 => Level::Raid0,
            1 => Level::Raid1,
            4 => Level::Raid4,
            5 => Level::Raid5,
            6 => Level::Raid6,
            10 => Level::Raid10,
            other => return Err(LayoutError::UnsupportedLevel(other)),
        })
    }

    /// md's level number.
    pub fn to_md(self) -> i32 {
        match self {
            Level::Linear => -1,
            Level::Raid0 => 0,
            Level::Raid1 => 1,
            Level::Raid4 => 4,
            Level::Raid5 => 5,
            Level::Raid6 => 6,
            Level::Raid10 => 10,
        }
    }

    /// The name sysfs (`md/level`) and mdadm print: "linear", "raid0", ...
    pub fn name(self) -> &'static str {
        match self {
            Level::Linear => "linear",
            Level::Raid0 => "raid0",
            Level::Raid1 => "raid1",
            Level::Raid4 => "raid4",
            Level::Raid5 => "raid5",
            Level::Raid6 => "raid6",
            Level::Raid10 => "raid10",
        }
    }

    /// Parses the spellings mdadm's `--level` accepts (linear, 0/raid0/stripe, 1/raid1/mirror,
    /// 4/raid4, 5/raid5, 6/raid6, 10/raid10), ignoring case. md's number for linear (-1) is
    /// accepted too. Known-but-unsupported personalities (multipath, faulty, container) get
    /// [`LayoutError::UnsupportedLevel`].
    pub fn parse(s: &str) -> Result<Level, LayoutError> {
        let lower = s.trim().to_ascii_lowercase();
        Ok(match lower.as_str() {
            "linear" | "-1" => Level::Linear,
            "0" | "raid0" | "stripe" => Level::Raid0,
            "1" | "raid1" | "mirror" => Level::Raid1,
            "4" | "raid4" => Level::Raid4,
            "5" | "raid5" => Level::Raid5,
            "6" | "raid6" => Level::Raid6,
            "10" | "raid10" => Level::Raid10,
            "multipath" | "mp" | "-4" => return Err(LayoutError::UnsupportedLevel(-4)),
            "faulty" | "-5" => return Err(LayoutError::UnsupportedLevel(-5)),
            "container" | "-100" => return Err(LayoutError::UnsupportedLevel(-100)),
            _ => return Err(LayoutError::UnknownLevelName(s.to_string())),
        })
    }

    /// Whether the level keeps a chunk size (linear may carry one only as a rounding unit).
    pub fn is_striped(self) -> bool {
        matches!(self, Level::Raid0 | Level::Raid4 | Level::Raid5 | Level::Raid6 | Level::Raid10)
    }

    /// Whether the level is raid4, raid5 or raid6 (handled by [`crate::parity`]).
    pub fn is_parity(self) -> bool {
        matches!(self, Level::Raid4 | Level::Raid5 | Level::Raid6)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_round_trip() {
        for level in Level::ALL {
            assert_eq!(Level::from_md(level.to_md()), Ok(level));
            assert_eq!(Level::parse(level.name()), Ok(level));
            assert_eq!(Level::parse(&level.to_md().to_string()), Ok(level));
        }
    }

    #[test]
    fn mdadm_spellings() {
        assert_eq!(Level::parse("stripe"), Ok(Level::Raid0));
        assert_eq!(Level::parse("mirror"), Ok(Level::Raid1));
        assert_eq!(Level::parse("RAID5"), Ok(Level::Raid5));
        assert_eq!(Level::parse("multipath"), Err(LayoutError::UnsupportedLevel(-4)));
        assert_eq!(Level::from_md(-4), Err(LayoutError::UnsupportedLevel(-4)));
        assert!(matches!(Level::parse("raid7"), Err(LayoutError::UnknownLevelName(_))));
    }
}
