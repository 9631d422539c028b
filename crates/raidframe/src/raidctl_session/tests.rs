use uraid_raidframe_format::label::{ComponentLabel, PMLABEL_DISABLE, PMLABEL_VALID, PMLABEL_WASUSED, RAID_CLEAN};

use super::*;

fn session(mod_counter: i32, parity_good: bool, map_flags: u32) -> Session {
    let labels = (0..3)
        .map(|column| {
            Some(ComponentLabel {
                serial_number: 2026,
                mod_counter,
                column,
                num_columns: 3,
                clean: RAID_CLEAN,
                parity_map_modcount: mod_counter,
                parity_map_flags: map_flags,
                ..ComponentLabel::default()
            })
        })
        .collect();
    Session { labels, mod_counter, parity_good, map_fields: Some((map_flags, 40000, 8, 1)) }
}

fn counters(labels: &[Option<ComponentLabel>]) -> Vec<i32> {
    labels.iter().map(|l| l.as_ref().map_or(-1, |l| l.mod_counter)).collect()
}

// Every expectation below is what the driver left, measured with the raidframe oracle.

#[test]
fn a_verb_costs_seven_and_parity_rewrite_makes_clean() {
    let s = session(7, false, PMLABEL_VALID | PMLABEL_WASUSED);
    let after = s.final_labels(LabelChange::ParityRewritten).unwrap();
    assert_eq!(counters(&after), vec![14; 3]);
    assert!(after.iter().flatten().all(|l| l.clean == RAID_CLEAN && l.parity_map_modcount == 14));
    let after = s.final_labels(LabelChange::None).unwrap();
    assert!(after.iter().flatten().all(|l| l.clean == 0));
}

#[test]
fn fail_leaves_the_failed_label_behind() {
    let after = session(49, true, 3).final_labels(LabelChange::Fail(1)).unwrap();
    assert_eq!(counters(&after), vec![59, 53, 59]);
    assert!(after.iter().flatten().all(|l| l.clean == RAID_CLEAN && l.status == 0));
}

#[test]
fn autoconfig_and_parity_map_settings() {
    let s = session(21, true, PMLABEL_VALID | PMLABEL_WASUSED);
    let a = s.final_labels(LabelChange::Autoconfig(Autoconfig::SoftRoot)).unwrap();
    assert!(a.iter().flatten().all(|l| (l.autoconfigure, l.root_partition, l.mod_counter) == (1, 2, 28)));
    let m = s.final_labels(LabelChange::ParityMap(false)).unwrap();
    assert!(m.iter().flatten().all(|l| l.parity_map_flags == 7));
    let disabled = session(35, true, PMLABEL_VALID | PMLABEL_DISABLE);
    let m = disabled.final_labels(LabelChange::ParityMap(true)).unwrap();
    assert!(m.iter().flatten().all(|l| l.parity_map_flags == PMLABEL_VALID));
    let i = s.final_labels(LabelChange::Serial(99)).unwrap();
    assert!(i.iter().flatten().all(|l| l.serial_number == 99 && l.parity_map_flags == 3));
    let mut auto = disabled.clone();
    auto.labels.iter_mut().flatten().for_each(|l| l.autoconfigure = 1);
    let i = auto.final_labels(LabelChange::Serial(99)).unwrap();
    assert!(i.iter().flatten().all(|l| (l.autoconfigure, l.parity_map_flags, l.parity_map_regions) == (0, 0, 0)));
}

#[test]
fn autoconfig_words_read_as_raidctl_reads_them() {
    assert_eq!(Autoconfig::parse("YES"), Some(Autoconfig::Yes));
    assert_eq!(Autoconfig::parse("root"), Some(Autoconfig::ForceRoot));
    assert_eq!(Autoconfig::parse("forceroot"), Some(Autoconfig::ForceRoot));
    assert_eq!(Autoconfig::parse("softroot"), Some(Autoconfig::SoftRoot));
    assert_eq!(Autoconfig::parse("no"), Some(Autoconfig::No));
    assert_eq!(Autoconfig::parse("maybe"), None);
}

#[test]
fn a_counter_at_the_top_is_refused() {
    let s = session(i32::MAX - 3, true, 3);
    assert!(s.final_labels(LabelChange::None).is_err());
}
