//! Which components form a set, and which of them are fresh, as NetBSD decides at
//! autoconfiguration (`rf_netbsdkintf.c`: `rf_reasonable_label`, `rf_create_auto_sets`,
//! `rf_does_it_fit`, `rf_have_enough_components`). Pure over parsed labels.
//!
//! 1. Labels failing [`ComponentLabel::check_reasonable`] are not candidates; nor, here, are
//!    labels claiming more than [`MAX_COLUMNS`] columns, which the driver's tables cannot
//!    hold (the kernel does not test this itself).
//! 2. A candidate joins the first set whose first member agrees with it on version,
//!    serial_number, num_rows, num_columns, sectPerSU, SUsPerPU, SUsPerRU, parityConfig,
//!    maxOutstanding, blockSize, numBlocks (64-bit), autoconfigure, root_partition,
//!    last_unit and config_order ([`same_set`]); otherwise it starts a new set. mod_counter,
//!    clean, status and partitionSize are not compared.
//! 3. The set's mod_counter is the largest of its members'. A column is present only if a
//!    member has that column and that mod_counter; members with a smaller counter are stale
//!    and the kernel treats their columns as failed. The status word plays no part here.
//! 4. The set can be configured unless RAID 0 misses any column, RAID 4 or 5 misses more
//!    than one, or RAID 1 misses both columns of a pair (columns 2k and 2k+1). The kernel
//!    puts no limit on other levels.

use crate::label::ComponentLabel;

/// Most columns a set can have (`RF_MAXCOL`).
pub const MAX_COLUMNS: i32 = crate::config_file::MAX_COLUMNS;

fn candidate(label: &ComponentLabel) -> bool {
    label.check_reasonable(None).is_ok() && label.num_columns <= MAX_COLUMNS
}

/// True if `b` belongs in the same set as `a` (`rf_does_it_fit`).
pub fn same_set(a: &ComponentLabel, b: &ComponentLabel) -> bool {
    a.version == b.version
        && a.serial_number == b.serial_number
        && a.num_rows == b.num_rows
        && a.num_columns == b.num_columns
        && a.sect_per_su == b.sect_per_su
        && a.sus_per_pu == b.sus_per_pu
        && a.sus_per_ru == b.sus_per_ru
        && a.parity_config == b.parity_config
        && a.max_outstanding == b.max_outstanding
        && a.block_size == b.block_size
        && a.num_blocks == b.num_blocks
        && a.autoconfigure == b.autoconfigure
        && a.root_partition == b.root_partition
        && a.last_unit == b.last_unit
        && a.config_order == b.config_order
}

/// Groups labels into sets; each set lists indices into `labels`, in input order, and the
/// sets come in the order of their first member. Labels that fail the kernel's sanity test
/// are left out of every set.
pub fn group_sets(labels: &[ComponentLabel]) -> Vec<Vec<usize>> {
    let mut sets: Vec<Vec<usize>> = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        if !candidate(label) {
            continue;
        }
        match sets.iter_mut().find(|set| same_set(&labels[set[0]], label)) {
            Some(set) => set.push(i),
            None => sets.push(vec![i]),
        }
    }
    sets
}

/// What one column of an assessed set is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnState {
    /// Present and current: index of the member (the first one if several qualify).
    Fresh(usize),
    /// No member with this column and the set's mod_counter.
    Missing,
}

/// A set after the kernel's freshness rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SetAssessment {
    /// The set's serial number.
    pub serial_number: i32,
    /// The level character (`parityConfig`), if printable.
    pub level: Option<char>,
    /// The largest mod_counter among the members.
    pub mod_counter: i32,
    /// One entry per column.
    pub columns: Vec<ColumnState>,
    /// Members whose mod_counter is below the set's: out of date, treated as failed.
    pub stale: Vec<usize>,
    /// Whether the kernel would configure the set (`rf_have_enough_components`).
    pub configurable: bool,
    /// True if every fresh member's label says clean: parity needs no rewrite.
    pub clean: bool,
}

impl SetAssessment {
    /// Columns with no fresh member.
    pub fn missing_columns(&self) -> Vec<usize> {
        self.columns.iter().enumerate().filter(|(_, c)| **c == ColumnState::Missing).map(|(i, _)| i).collect()
    }
}

/// Applies the freshness rules to the members of one set (indices into `labels`, as
/// [`group_sets`] returns them). Returns `None` for an empty set or one whose first member
/// is not a candidate (see the module notes).
pub fn assess_set(labels: &[ComponentLabel], members: &[usize]) -> Option<SetAssessment> {
    let first = &labels[*members.first()?];
    if !candidate(first) {
        return None;
    }
    let mod_counter = members.iter().map(|&i| labels[i].mod_counter).max()?;
    let num_columns = usize::try_from(first.num_columns).unwrap_or(0);
    let columns: Vec<ColumnState> = (0..num_columns)
        .map(|c| {
            members
                .iter()
                .copied()
                .find(|&i| labels[i].column as usize == c && labels[i].mod_counter == mod_counter)
                .map_or(ColumnState::Missing, ColumnState::Fresh)
        })
        .collect();
    let stale: Vec<usize> = members.iter().copied().filter(|&i| labels[i].mod_counter != mod_counter).collect();
    let missing = |c: usize| columns[c] == ColumnState::Missing;
    let num_missing = (0..num_columns).filter(|&c| missing(c)).count();
    let level = first.level_char();
    let configurable = match level {
        Some('0') => num_missing == 0,
        Some('4') | Some('5') => num_missing <= 1,
        Some('1') => !(0..num_columns / 2).any(|pair| missing(2 * pair) && missing(2 * pair + 1)),
        _ => true,
    };
    let clean = columns.iter().all(|c| match c {
        ColumnState::Fresh(i) => labels[*i].is_clean(),
        ColumnState::Missing => true,
    });
    Some(SetAssessment { serial_number: first.serial_number, level, mod_counter, columns, stale, configurable, clean })
}

/// Groups and assesses in one step.
pub fn assess_all(labels: &[ComponentLabel]) -> Vec<(Vec<usize>, SetAssessment)> {
    group_sets(labels).into_iter().filter_map(|members| assess_set(labels, &members).map(|a| (members, a))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::RAID_CLEAN;

    fn member(level: u8, columns: i32, column: i32, mod_counter: i32) -> ComponentLabel {
        ComponentLabel {
            serial_number: 77,
            mod_counter,
            column,
            num_columns: columns,
            clean: RAID_CLEAN,
            sect_per_su: 32,
            parity_config: i32::from(level),
            max_outstanding: 100,
            num_blocks: 1000,
            partition_size: 1064,
            ..ComponentLabel::default()
        }
    }

    #[test]
    fn stale_member_counts_as_missing() {
        let labels = vec![member(b'5', 3, 0, 20), member(b'5', 3, 1, 13), member(b'5', 3, 2, 20)];
        let sets = assess_all(&labels);
        assert_eq!(sets.len(), 1);
        let (_, a) = &sets[0];
        assert_eq!(a.mod_counter, 20);
        assert_eq!(a.columns, vec![ColumnState::Fresh(0), ColumnState::Missing, ColumnState::Fresh(2)]);
        assert_eq!(a.stale, vec![1]);
        assert!(a.configurable);
        let two_gone = vec![member(b'5', 3, 0, 20), member(b'5', 3, 1, 13)];
        assert!(!assess_all(&two_gone)[0].1.configurable);
    }

    #[test]
    fn raid0_and_raid1_rules() {
        assert!(!assess_all(&[member(b'0', 2, 0, 5)])[0].1.configurable);
        // RAID 1 over 4: losing one of each pair is fine, losing a whole pair is not.
        let ok = vec![member(b'1', 4, 0, 5), member(b'1', 4, 3, 5)];
        assert!(assess_all(&ok)[0].1.configurable);
        let bad = vec![member(b'1', 4, 0, 5), member(b'1', 4, 1, 5)];
        assert!(!assess_all(&bad)[0].1.configurable);
    }

    #[test]
    fn grouping_ignores_counter_and_separates_serials() {
        let mut other = member(b'5', 3, 0, 20);
        other.serial_number = 78;
        let mut torn = member(b'5', 3, 1, 20);
        torn.clean = 9;
        let labels = vec![member(b'5', 3, 0, 20), other, member(b'5', 3, 1, 3), torn];
        assert_eq!(group_sets(&labels), vec![vec![0, 2], vec![1]]);
    }
}
