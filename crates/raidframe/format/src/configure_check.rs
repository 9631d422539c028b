//! What `raidctl -c` does with the labels of the components a config file names
//! (`rf_CheckLabels` in `rf_disks.c`): which columns it fails, or whether it refuses the set.
//! Unlike autoconfiguration ([`crate::freshness`]), the columns come from the file, so the
//! question is which labels disagree with the rest.
//!
//! - Over the components present, count the distinct serial numbers and the distinct
//!   mod_counters. More than two of either refuses the set.
//! - Two serials, one of them on a single component: that component (the "maverick") is
//!   failed and the other serial is the set's. Two serials otherwise refuses the set.
//! - Two mod_counters, one of them on a single component: the majority counter wins (on a
//!   1-to-1 tie the larger) and the other component is failed. If that is not the serial
//!   maverick and there was one, or neither counter is on a single component, the set is
//!   refused.
//! - RAID 0 refuses any disagreement.
//! - Every other component must then carry the set's serial, row 0, its own column, one row
//!   and the file's column count, or the set is refused. A dirty label makes parity dirty.
//!
//! Missing components (`absent`, or a device that cannot be opened) are failed and left out
//! of the counts. With a missing component, the driver this crate was checked against still
//! applies the serial test to the serial maverick, so a missing component plus a component
//! with a foreign serial is refused; a missing one plus a stale mod_counter is configured
//! with both failed. That is how the driver behaved; the source of that version was not read.
//! The driver configures a set even if the failed columns exceed what the level survives.

use crate::label::ComponentLabel;

/// Why `raidctl -c` refuses the components.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// More than two distinct serial numbers.
    TooManySerials,
    /// More than two distinct mod_counters.
    TooManyModCounters,
    /// Two serials or two mod_counters, neither on a single component, or the serial and
    /// the mod_counter mavericks are different components.
    NoSingleMaverick,
    /// RAID 0 with any disagreement.
    Raid0Disagreement,
    /// A component's label does not belong at its place.
    Misplaced {
        /// The column.
        column: usize,
        /// The C name of the field that disagrees.
        field: &'static str,
    },
}

/// The result of the check.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ConfigureCheck {
    /// The set configures.
    Configures {
        /// The set's serial number.
        serial_number: i32,
        /// The set's mod_counter.
        mod_counter: i32,
        /// Columns failed: missing ones and mavericks, ascending.
        failed: Vec<usize>,
        /// True if every component used had a clean label.
        parity_good: bool,
    },
    /// The driver refuses the set.
    Refused(Refusal),
}

/// Distinct values in first-seen order with their counts.
fn tally(values: impl Iterator<Item = i32>) -> Vec<(i32, usize)> {
    let mut out: Vec<(i32, usize)> = Vec::new();
    for v in values {
        match out.iter_mut().find(|(x, _)| *x == v) {
            Some((_, n)) => *n += 1,
            None => out.push((v, 1)),
        }
    }
    out
}

/// Checks the labels of the components named by a config file, one entry per column in file
/// order (`None` for a missing component), for a set of `level` (the layout line's
/// character) and `num_columns` columns.
pub fn check_labels(level: char, num_columns: usize, labels: &[Option<&ComponentLabel>]) -> ConfigureCheck {
    let present: Vec<(usize, &ComponentLabel)> =
        labels.iter().enumerate().take(num_columns).filter_map(|(c, l)| l.map(|l| (c, l))).collect();
    let mut failed: Vec<usize> = (0..num_columns).filter(|&c| labels.get(c).is_none_or(|l| l.is_none())).collect();

    let serials = tally(present.iter().map(|(_, l)| l.serial_number));
    let mods = tally(present.iter().map(|(_, l)| l.mod_counter));
    if serials.len() > 2 {
        return ConfigureCheck::Refused(Refusal::TooManySerials);
    }
    if mods.len() > 2 {
        return ConfigureCheck::Refused(Refusal::TooManyModCounters);
    }

    let mut hosed: Option<usize> = None;
    let mut serial_number = serials.first().map_or(0, |s| s.0);
    if serials.len() == 2 {
        if level == '0' {
            return ConfigureCheck::Refused(Refusal::Raid0Disagreement);
        }
        if serials[0].1 != 1 && serials[1].1 != 1 {
            return ConfigureCheck::Refused(Refusal::NoSingleMaverick);
        }
        if serials[1].1 > serials[0].1 {
            serial_number = serials[1].0;
        }
        hosed = present.iter().find(|(_, l)| l.serial_number != serial_number).map(|(c, _)| *c);
    }

    let mut mod_counter = mods.first().map_or(0, |m| m.0);
    if mods.len() == 2 {
        if level == '0' {
            return ConfigureCheck::Refused(Refusal::Raid0Disagreement);
        }
        let ((v0, n0), (v1, n1)) = (mods[0], mods[1]);
        if n0 != 1 && n1 != 1 {
            return ConfigureCheck::Refused(Refusal::NoSingleMaverick);
        }
        mod_counter = if n1 > n0 {
            v1
        } else if n1 < n0 {
            v0
        } else {
            v0.max(v1)
        };
        for &(c, l) in &present {
            if l.mod_counter != mod_counter && hosed != Some(c) {
                if serials.len() != 1 {
                    return ConfigureCheck::Refused(Refusal::NoSingleMaverick);
                }
                hosed = Some(c);
            }
        }
    }
    if let Some(c) = hosed {
        failed.push(c);
    }

    // The driver checked against ignores a missing column here instead of the maverick.
    let skipped = failed.iter().copied().find(|c| labels.get(*c).is_none_or(|l| l.is_none())).or(hosed);
    let mut parity_good = true;
    for &(c, l) in &present {
        if Some(c) == skipped {
            continue;
        }
        let misplaced = |field| ConfigureCheck::Refused(Refusal::Misplaced { column: c, field });
        if l.serial_number != serial_number {
            return misplaced("serial_number");
        }
        if l.row != 0 {
            return misplaced("row");
        }
        if usize::try_from(l.column) != Ok(c) {
            return misplaced("column");
        }
        if l.num_rows != 1 {
            return misplaced("num_rows");
        }
        if usize::try_from(l.num_columns) != Ok(num_columns) {
            return misplaced("num_columns");
        }
        if !l.is_clean() {
            parity_good = false;
        }
    }
    failed.sort_unstable();
    failed.dedup();
    ConfigureCheck::Configures { serial_number, mod_counter, failed, parity_good }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::RAID_CLEAN;

    fn labels(columns: usize) -> Vec<ComponentLabel> {
        (0..columns)
            .map(|c| ComponentLabel {
                serial_number: 4242,
                mod_counter: 15,
                column: c as i32,
                num_columns: columns as i32,
                clean: RAID_CLEAN,
                num_blocks: 1000,
                ..ComponentLabel::default()
            })
            .collect()
    }

    fn check(level: char, labels: &[ComponentLabel], absent: &[usize]) -> ConfigureCheck {
        let given: Vec<Option<&ComponentLabel>> =
            labels.iter().enumerate().map(|(c, l)| (!absent.contains(&c)).then_some(l)).collect();
        check_labels(level, labels.len(), &given)
    }

    fn configures(failed: Vec<usize>) -> ConfigureCheck {
        ConfigureCheck::Configures { serial_number: 4242, mod_counter: 15, failed, parity_good: true }
    }

    // Each case below is one run of `raidctl -c` against NetBSD's driver (see the docs).
    #[test]
    fn cases_checked_against_the_driver() {
        let good = labels(5);
        assert_eq!(check('5', &good, &[]), configures(vec![]));
        assert_eq!(check('5', &good, &[1]), configures(vec![1]));

        let mut serial = labels(5);
        serial[2].serial_number = 513;
        assert_eq!(check('5', &serial, &[]), configures(vec![2]));

        let mut stale = labels(5);
        stale[3].mod_counter = 14;
        assert_eq!(check('5', &stale, &[]), configures(vec![3]));
        assert_eq!(check('5', &stale, &[1]), configures(vec![1, 3]));

        let mut serial4 = labels(4);
        serial4[2].serial_number = 513;
        assert_eq!(
            check('1', &serial4, &[1]),
            ConfigureCheck::Refused(Refusal::Misplaced { column: 2, field: "serial_number" })
        );

        let mut stale4 = labels(4);
        stale4[1].mod_counter = 9;
        assert_eq!(check('1', &stale4, &[]), configures(vec![1]));
        stale4[0].mod_counter = 9;
        assert_eq!(check('1', &stale4, &[]), ConfigureCheck::Refused(Refusal::NoSingleMaverick));

        let mut raid0 = labels(3);
        raid0[1].serial_number = 7;
        assert_eq!(check('0', &raid0, &[]), ConfigureCheck::Refused(Refusal::Raid0Disagreement));
    }

    #[test]
    fn source_rules() {
        let mut three = labels(4);
        three[1].serial_number = 1;
        three[2].serial_number = 2;
        assert_eq!(check('5', &three, &[]), ConfigureCheck::Refused(Refusal::TooManySerials));
        // A 1-to-1 tie of counters goes to the larger.
        let mut tie = labels(2);
        tie[0].mod_counter = 20;
        assert_eq!(
            check('1', &tie, &[]),
            ConfigureCheck::Configures { serial_number: 4242, mod_counter: 20, failed: vec![1], parity_good: true }
        );
        // Serial maverick and counter maverick on different components.
        let mut two = labels(4);
        two[1].serial_number = 1;
        two[2].mod_counter = 3;
        assert_eq!(check('5', &two, &[]), ConfigureCheck::Refused(Refusal::NoSingleMaverick));
        let mut wrong_place = labels(3);
        wrong_place[1].column = 2;
        assert_eq!(
            check('5', &wrong_place, &[]),
            ConfigureCheck::Refused(Refusal::Misplaced { column: 1, field: "column" })
        );
        let mut dirty = labels(3);
        dirty[0].clean = 0;
        assert!(matches!(check('5', &dirty, &[]), ConfigureCheck::Configures { parity_good: false, .. }));
    }
}
