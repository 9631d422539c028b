//! Damaged input: random bytes and random mutations of real headers, configuration areas,
//! configuration texts and create descriptions go to every parser, which must answer with a
//! value or a typed error, never a panic.

mod common;

use proptest::prelude::*;
use uraid_vinum_format::drive_layout::{parse_config_area, read_config_copy, CONFIG_LEN, CONFIG_OFFSET, DATA_START};
use uraid_vinum_format::header::HEADER_BYTES_READ;
use uraid_vinum_format::tokens::{parse_size, tokenize, Blanks};
use uraid_vinum_format::{
    format_config, merge_in_taste_order, merge_newest_first, parse_config, parse_config_as_kernel,
    parse_create_description, ConfigAreaError, ConfigCopy, ConfigTextError, DriveHeader, DriveMetadata, HeaderError,
    PlexLayout, TastedDrive, Timeval,
};

/// gvinum.8's raid5 example in on-disk form.
const MAN_PAGE_RAID5: &str = include_str!("data/man-page-raid5.conf");

/// Words the grammar knows, so that random lines get past the first token.
const VOCABULARY: &[&str] = &[
    "volume",
    "plex",
    "sd",
    "drive",
    "name",
    "org",
    "concat",
    "striped",
    "raid5",
    "vol",
    "volume",
    "state",
    "up",
    "down",
    "stale",
    "degraded",
    "len",
    "length",
    "driveoffset",
    "plexoffset",
    "device",
    "/dev/ada0",
    "0",
    "265s",
    "512s",
    "-1",
    "1k",
    "9999999999999999999g",
    "#",
    "\"",
    "x",
    "v.p0",
    "v.p0.s0",
    "\t",
    "\r",
];

fn parse_every_text_parser(text: &str) {
    if let Ok(config) = parse_config(text) {
        // Whatever reads strictly writes back and reads back the same.
        let written = format_config(&config).expect("a parsed config can be written");
        assert_eq!(parse_config(&written).expect("written text reads back"), config);
        let _ = config.problems();
        for plex in &config.plexes {
            if let Ok(layout) = PlexLayout::from_config(&config, &plex.name) {
                let size = layout.size();
                for offset in [0, size / 2, size.saturating_sub(1), size] {
                    let _ = layout.locate(offset);
                    let _ = layout.locate_raid5(offset);
                }
            }
        }
    }
    let reading = parse_config_as_kernel(text);
    let _ = format_config(&reading.config);
    let _ = parse_create_description(text);
    for line in text.lines() {
        let _ = tokenize(line, Blanks::Kernel);
        if let Ok(tokens) = tokenize(line, Blanks::Command) {
            for t in tokens {
                let _ = parse_size(t.text);
            }
        }
    }
}

fn parse_every_byte_parser(bytes: &[u8]) {
    if let Ok(header) = DriveHeader::parse(bytes) {
        // Fields hold at most 32 bytes without a NUL, so every parsed header can be written.
        let written = header.to_bytes().expect("a parsed header can be written");
        let again = DriveHeader::parse(&written).expect("written header reads back");
        assert_eq!(again.label, header.label);
    }
    for copy in [ConfigCopy::First, ConfigCopy::Second] {
        if let Ok(text) = parse_config_area(bytes, copy) {
            parse_every_text_parser(text);
        }
        let _ = read_config_copy(bytes, copy);
    }
    let _ = DriveMetadata::parse(bytes);
}

fn sample_header() -> Vec<u8> {
    let mut h = DriveHeader::new("gvinumdrive0", "fbsd", Timeval::new(1_200_000_000, 1));
    h.label.last_update = Timeval::new(1_200_000_500, 2);
    h.to_bytes().unwrap().to_vec()
}

fn sample_drive_start() -> Vec<u8> {
    let mut header = DriveHeader::new("gvinumdrive0", "fbsd", Timeval::new(1_200_000_000, 1));
    header.label.last_update = Timeval::new(1_200_000_500, 2);
    DriveMetadata { header, config_text: MAN_PAGE_RAID5.into() }.to_bytes().unwrap()
}

#[test]
fn every_short_header_is_truncated() {
    let bytes = sample_header();
    for len in 0..HEADER_BYTES_READ {
        assert_eq!(
            DriveHeader::parse(&bytes[..len]),
            Err(HeaderError::Truncated { needed: HEADER_BYTES_READ, got: len })
        );
    }
}

#[test]
fn every_single_byte_change_of_a_header_parses_or_is_refused() {
    let bytes = sample_header();
    for at in 0..HEADER_BYTES_READ {
        for value in [0u8, 0x20, 0x7f, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[at] = value;
            match DriveHeader::parse(&b) {
                Ok(h) => assert!(at >= 8 || b[..8] == bytes[..8], "magic byte {at} changed yet parsed: {h:?}"),
                Err(HeaderError::NotVinum { .. }) => assert!(at < 8),
                Err(HeaderError::NameNotText { offset, .. }) => assert!((16..80).contains(&(offset - 4096))),
                Err(e) => panic!("byte {at} = {value:#x}: {e}"),
            }
        }
    }
}

#[test]
fn a_config_cut_mid_line_is_refused_not_misread() {
    for cut in 1..MAN_PAGE_RAID5.len() {
        let text = &MAN_PAGE_RAID5[..cut];
        match parse_config(text) {
            Ok(_) => assert!(text.ends_with('\n'), "cut at {cut} parsed"),
            Err(ConfigTextError::UnterminatedLine { .. }) => assert!(!text.ends_with('\n')),
            Err(e) => panic!("cut at {cut}: {e}"),
        }
    }
}

#[test]
fn a_full_area_without_a_final_newline_is_cut_short() {
    // What a configuration longer than 64 KiB leaves on disk: gvinum's fixed buffer stops
    // mid-line, the NUL at the very end.
    let line = "volume vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv state up\n";
    let mut area: Vec<u8> = line.bytes().cycle().take(CONFIG_LEN - 1).collect();
    area.push(0);
    let text = parse_config_area(&area, ConfigCopy::First).unwrap();
    assert!(matches!(parse_config(text), Err(ConfigTextError::UnterminatedLine { .. })));
    area[CONFIG_LEN - 1] = b'x';
    assert_eq!(
        parse_config_area(&area, ConfigCopy::First),
        Err(ConfigAreaError::Unterminated { copy: 1, offset: CONFIG_OFFSET })
    );
}

#[test]
fn the_sample_drive_reads_whole() {
    let bytes = sample_drive_start();
    assert_eq!(bytes.len() as u64, DATA_START);
    let meta = DriveMetadata::parse(&bytes).unwrap();
    assert_eq!(meta.config_text, MAN_PAGE_RAID5);
}

#[test]
fn the_largest_sizes_a_text_can_hold_do_not_overflow() {
    use uraid_vinum_format::objects::MAX_TEXT_SIZE;
    let max = MAX_TEXT_SIZE / 512;
    for org in ["concat ".to_string(), "striped 1s ".into(), "raid5 1s ".into(), format!("raid5 {max}s ")] {
        let mut text = format!("volume v state up\nplex name v.p0 org {org}vol v state up\n");
        for i in 0..5u64 {
            text += &format!(
                "sd name v.p0.s{i} drive d{i} len {max}s driveoffset {max}s plex v.p0 plexoffset {i}s state up\n"
            );
        }
        let config = parse_config(&text).unwrap();
        assert_eq!(format_config(&config).unwrap(), text);
        assert!(!config.problems().is_empty());
        assert_eq!(config.plex_size("v.p0"), Some(u64::MAX));
        let sizes = std::collections::BTreeMap::from([("d0".to_string(), u64::MAX)]);
        assert!(!config.problems_on_drives(&sizes).is_empty());
        assert!(matches!(
            PlexLayout::from_config(&config, "v.p0"),
            Err(uraid_vinum_format::MappingError::TooLarge { .. })
        ));
    }
    let one_more = format!("sd name s drive d len {}s driveoffset 265s\n", max + 1);
    assert!(parse_config(&one_more).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..700)) {
        parse_every_byte_parser(&bytes);
        // Behind each known magic, so the field decoding runs on garbage.
        for magic in [b"VINUM-1\0", b"VINUM--\0", b"IN VINO\0", b"NO VINO\0", b"\0ONIV NI", b"\0ONIV ON"] {
            let mut b = bytes.clone();
            if b.len() >= 8 {
                b[..8].copy_from_slice(magic);
            }
            parse_every_byte_parser(&b);
        }
    }

    #[test]
    fn mutated_drive_metadata_never_panics(
        edits in proptest::collection::vec((0usize..(CONFIG_OFFSET as usize + 600), any::<u8>()), 1..12),
        cut in proptest::option::of(0usize..(DATA_START as usize)),
    ) {
        let mut b = sample_drive_start();
        for (at, v) in &edits {
            // Mostly the header and the start of copy 1.
            let at = if *at < 4096 { 4096 + at % 512 } else { *at };
            b[at] = *v;
        }
        if let Some(cut) = cut {
            b.truncate(cut);
        }
        parse_every_byte_parser(&b);
    }

    #[test]
    fn random_text_never_panics(text in "\\PC{0,300}") {
        parse_every_text_parser(&text);
    }

    #[test]
    fn random_token_soup_never_panics(
        lines in proptest::collection::vec(
            proptest::collection::vec(
                prop_oneof![3 => proptest::sample::select(VOCABULARY).prop_map(str::to_string), 1 => "\\PC{0,6}"],
                0..14,
            ),
            0..8,
        ),
    ) {
        let text: String = lines.iter().map(|l| l.join(" ") + "\n").collect();
        parse_every_text_parser(&text);
    }

    #[test]
    fn mutated_config_texts_never_panic(
        config in common::config(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..4, "\\PC{0,3}"), 1..6),
    ) {
        let mut text = format_config(&config).unwrap();
        if text.is_empty() {
            text = MAN_PAGE_RAID5.to_string();
        }
        for (at, kind, insert) in &edits {
            let chars: Vec<char> = text.chars().collect();
            if chars.is_empty() {
                break;
            }
            let i = at.index(chars.len());
            let mut changed: String = chars[..i].iter().collect();
            match kind {
                0 => {} // delete a character
                1 => { changed.push_str(insert); } // replace it
                2 => { changed.push_str(insert); changed.push(chars[i]); } // insert before it
                _ => { changed.push(' '); } // turn it into a blank
            }
            changed.extend(&chars[i + 1..]);
            text = changed;
        }
        parse_every_text_parser(&text);
        let area = uraid_vinum_format::drive_layout::config_area_bytes(&text);
        if let Ok(area) = area {
            parse_every_byte_parser(&area);
        }
    }

    #[test]
    fn merging_anything_never_panics_and_keeps_names_unique(
        drives in proptest::collection::vec((common::header(), common::config()), 0..5),
    ) {
        let tasted: Vec<TastedDrive> =
            drives.into_iter().map(|(header, config)| TastedDrive { header, config }).collect();
        for merged in [merge_in_taste_order(&tasted), merge_newest_first(&tasted)] {
            let mut names: Vec<&str> = merged.config.plexes.iter().map(|p| p.name.as_str()).collect();
            let count = names.len();
            names.sort_unstable();
            names.dedup();
            prop_assert_eq!(names.len(), count);
            for p in &merged.config.plexes {
                prop_assert!(p.volume.as_deref().is_some_and(|v| merged.config.volume(v).is_some()));
            }
            for s in &merged.config.subdisks {
                prop_assert!(s.plex().is_some_and(|p| merged.config.plex(p).is_some()));
            }
            prop_assert_eq!(merged.drives.len() + merged.ignored.len(), tasted.len());
        }
    }
}
