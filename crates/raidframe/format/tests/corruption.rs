//! Random and damaged input never panics and gives typed errors.

mod common;

use proptest::prelude::*;
use uraid_raidframe_format::freshness::assess_all;
use uraid_raidframe_format::label::{ComponentLabel, LabelError, LABEL_STRUCT_SIZE};
use uraid_raidframe_format::layout::{self, parity_map_verdict, ParityMap, ParityMapError};
use uraid_raidframe_format::{ConfigFileError, RaidConfig};

fn real_label_area() -> Vec<u8> {
    let image = common::component("raid5", 1);
    let at = layout::LABEL_OFFSET as usize;
    image[at..at + 1024].to_vec()
}

fn real_config() -> String {
    common::text("raid5.raidctl-G.txt")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_label_bytes(bytes in prop::collection::vec(any::<u8>(), 0..1100)) {
        match ComponentLabel::parse(&bytes) {
            Ok(label) => {
                prop_assert!(label.check_reasonable(None).is_ok());
                prop_assert_eq!(&label.to_bytes()[..], &bytes[..LABEL_STRUCT_SIZE]);
            }
            Err(LabelError::TooShort { len }) => prop_assert!(len < LABEL_STRUCT_SIZE),
            Err(_) => {}
        }
    }

    #[test]
    fn mutated_real_label(flips in prop::collection::vec((0usize..LABEL_STRUCT_SIZE, any::<u8>()), 1..8)) {
        let mut area = real_label_area();
        for (at, value) in flips {
            area[at] = value;
        }
        // Whatever decodes is written back byte for byte, reasonable or not.
        match ComponentLabel::decode(&area) {
            Ok(label) => {
                prop_assert_eq!(&label.to_bytes()[..], &area[..LABEL_STRUCT_SIZE]);
                let _ = label.check_reasonable(Some(2048));
                let mut fixed = label.clone();
                let _ = fixed.fix_old_label_size(2048);
                let _ = assess_all(&[label.clone(), fixed]);
                let _ = parity_map_verdict([&label]);
            }
            Err(e) => {
                let is_version = matches!(e, LabelError::UnknownVersion { .. });
                prop_assert!(is_version, "unexpected error {:?}", e);
            }
        }
    }

    #[test]
    fn random_labels_in_sets(areas in prop::collection::vec(prop::collection::vec(any::<u8>(), LABEL_STRUCT_SIZE), 0..6),
                             real_count in 0usize..3) {
        let mut labels: Vec<ComponentLabel> = areas.iter().filter_map(|a| ComponentLabel::decode(a).ok()).collect();
        for _ in 0..real_count {
            labels.push(ComponentLabel::decode(&real_label_area()).unwrap());
        }
        let given: Vec<Option<&ComponentLabel>> = labels.iter().map(Some).chain([None]).collect();
        let _ = uraid_raidframe_format::check_labels('5', given.len(), &given);
        let _ = uraid_raidframe_format::check_labels('0', 2, &given);
        for (members, a) in assess_all(&labels) {
            prop_assert!(!members.is_empty());
            prop_assert!(a.columns.len() <= 40);
        }
    }

    #[test]
    fn random_parity_map_bytes(bytes in prop::collection::vec(any::<u8>(), 0..1200)) {
        match ParityMap::parse(&bytes) {
            Ok(map) => prop_assert_eq!(map.to_area(bytes.len()), bytes),
            Err(ParityMapError::TooShort { len }) => prop_assert!(len < 512),
            Err(ParityMapError::TrailingBytes { offset, value }) => {
                prop_assert!(offset >= 512);
                prop_assert_eq!(bytes[offset], value);
            }
        }
    }

    #[test]
    fn random_config_text(text in "(START |array|disks|spare|layout|queue|debug|[0-9 ]{1,6}|#|absent|/dev/x|\n|\t|[a-z5]){0,60}") {
        if let Err(e) = RaidConfig::parse(&text) {
            let _ = e.to_string();
        }
    }

    #[test]
    fn random_unicode_config_text(text in any::<String>()) {
        let _ = RaidConfig::parse(&text);
    }

    #[test]
    fn mutated_real_config(edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<char>()), 1..6)) {
        let mut chars: Vec<char> = real_config().chars().collect();
        for (at, kind, c) in edits {
            if chars.is_empty() {
                chars.push(c);
                continue;
            }
            let i = at.index(chars.len());
            match kind {
                0 => { chars.remove(i); }
                1 => chars.insert(i, c),
                _ => chars[i] = c,
            }
        }
        let text: String = chars.into_iter().collect();
        match RaidConfig::parse(&text) {
            Ok(config) => {
                // A damaged file that still parses prints back into one that parses the same.
                let again = RaidConfig::parse(&config.to_text(None));
                if !config.disks.iter().chain(config.spares.iter()).any(|d| d.starts_with("START") || d.starts_with('#') || d.is_empty()) {
                    prop_assert_eq!(again.unwrap(), config);
                }
            }
            Err(e) => {
                let typed = matches!(e, ConfigFileError::MissingSection { .. } | ConfigFileError::MissingLine { .. }
                    | ConfigFileError::BadLine { .. } | ConfigFileError::OutOfRange { .. }
                    | ConfigFileError::UnsupportedLevel { .. });
                prop_assert!(typed);
            }
        }
    }
}

#[test]
fn torn_real_labels_name_their_field() {
    let area = real_label_area();
    assert!(matches!(ComponentLabel::parse(&area[..300]), Err(LabelError::TooShort { len: 300 })));
    let mut torn = area.clone();
    torn[28] = 7; // clean
    match ComponentLabel::parse(&torn) {
        Err(LabelError::Unreasonable { field: "clean", offset: 28, value: 7, .. }) => {}
        other => panic!("{other:?}"),
    }
    let mut zeroed_tail = area.clone();
    zeroed_tail[24..].fill(0); // num_columns and everything after gone
    match ComponentLabel::parse(&zeroed_tail) {
        Err(LabelError::Unreasonable { field: "num_columns", offset: 24, .. }) => {}
        other => panic!("{other:?}"),
    }
    let mut foreign = area.clone();
    foreign[..4].copy_from_slice(b"VINU");
    assert!(matches!(ComponentLabel::parse(&foreign), Err(LabelError::UnknownVersion { .. })));
    assert_eq!(ComponentLabel::parse(&[0u8; 1024]), Err(LabelError::Blank));
}

#[test]
fn real_label_in_foreign_byte_order_reads_the_same() {
    let area = real_label_area();
    let mut swapped = area.clone();
    for word in swapped[..LABEL_STRUCT_SIZE].chunks_mut(4) {
        word.reverse();
    }
    let le = ComponentLabel::parse(&area).unwrap();
    let be = ComponentLabel::parse(&swapped).unwrap();
    assert_eq!(be.byte_order, uraid_raidframe_format::ByteOrder::Big);
    assert_eq!(ComponentLabel { byte_order: le.byte_order, ..be.clone() }, le);
    assert_eq!(&be.to_bytes()[..], &swapped[..LABEL_STRUCT_SIZE]);
}
