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
    Session { labels, mod_counter, parity_good, map_fields: Some((map_flags, 40000, 8, 1)), spare_served: None }
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

// Measured on the driver: a RAID 5 over 3 with a spare, parity clean at counter 24 (then 9).

#[test]
fn reconstruct_in_place_writes_the_new_label_with_the_others() {
    let mut s = session(24, true, 3);
    let set_label = s.labels[0].clone().unwrap();
    s.labels[1] = Some(joining_label(&set_label, 1, None));
    let after = s.final_labels(LabelChange::Reconstructed(1)).unwrap();
    assert_eq!(counters(&after), vec![32; 3]);
    let rebuilt = after[1].as_ref().unwrap();
    assert_eq!((rebuilt.column, rebuilt.partition_size, rebuilt.clean, rebuilt.status), (1, 0, RAID_CLEAN, 0));
    let mut survivor = after[0].clone().unwrap();
    survivor.column = 1;
    survivor.partition_size = 0;
    assert_eq!(&survivor, rebuilt, "the rebuilt label is a survivor's but for column and partition size");
    assert_eq!(s.spare_label(LabelChange::Reconstructed(1)).unwrap(), None);
}

#[test]
fn fail_to_a_spare_moves_the_column_to_the_spare() {
    let s = session(9, true, 3);
    let change = LabelChange::Spared { column: 1, spare_sectors: 8192 };
    let after = s.final_labels(change).unwrap();
    assert_eq!(counters(&after), vec![18, 12, 18]);
    assert_eq!(after[1].as_ref().unwrap().clean, 0, "the failed label was marked dirty by the verb's open");
    let spare = s.spare_label(change).unwrap().unwrap();
    let mut survivor = after[0].clone().unwrap();
    survivor.column = 1;
    survivor.partition_size = 8192;
    assert_eq!(spare, survivor);
}

#[test]
fn copyback_gives_the_column_back_and_leaves_the_spare_behind() {
    let mut s = session(18, true, 3);
    let served = s.labels[1].take().unwrap();
    s.spare_served = Some(served.clone());
    s.labels[1] = Some(joining_label(&served, 1, Some(8192)));
    let after = s.final_labels(LabelChange::CopiedBack(1)).unwrap();
    assert_eq!(counters(&after), vec![26; 3]);
    let spare = s.spare_label(LabelChange::CopiedBack(1)).unwrap().unwrap();
    assert_eq!((spare.mod_counter, spare.column, spare.clean), (21, 1, 0));
}
