//! Round trips: configurations through the text, texts through the parser, headers and whole
//! drive metadata through their bytes, and the create-description reading of on-disk texts.

mod common;

use proptest::prelude::*;
use uraid_vinum_format::drive_layout::{config_area_bytes, parse_config_area, DATA_START};
use uraid_vinum_format::mapping::PlexLayout;
use uraid_vinum_format::objects::PlexOrganization;
use uraid_vinum_format::{
    format_config, parse_config, parse_config_as_kernel, parse_create_description, ConfigCopy, DriveHeader,
    DriveMetadata,
};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn configs_round_trip_through_the_text(config in common::config()) {
        let text = format_config(&config).unwrap();
        let parsed = parse_config(&text).unwrap();
        prop_assert_eq!(&parsed, &config);
        prop_assert_eq!(format_config(&parsed).unwrap(), text.clone());
        let kernel = parse_config_as_kernel(&text);
        prop_assert_eq!(kernel.config, config);
        prop_assert!(kernel.skipped.is_empty() && kernel.stopped_at.is_none());
    }

    #[test]
    fn texts_round_trip_through_a_config_area(config in common::config()) {
        let text = format_config(&config).unwrap();
        let area = config_area_bytes(&text).unwrap();
        prop_assert_eq!(parse_config_area(&area, ConfigCopy::First).unwrap(), text.as_str());
    }

    #[test]
    fn an_on_disk_text_reads_the_same_as_a_create_description(config in common::config()) {
        let text = format_config(&config).unwrap();
        let description = parse_create_description(&text).unwrap();
        prop_assert_eq!(&description.volumes, &config.volumes);
        // gvinum puts a plex that names no volume into the volume above it (in the on-disk
        // text, the last volume) and a subdisk that names no plex into the last plex.
        let last_volume = config.volumes.last().map(|v| v.name.clone());
        let mut expected_plexes = config.plexes.clone();
        for p in &mut expected_plexes {
            p.volume = p.volume.clone().or_else(|| last_volume.clone());
        }
        prop_assert_eq!(&description.plexes, &expected_plexes);
        let last_plex = config.plexes.last().map(|p| p.name.as_str());
        prop_assert_eq!(description.subdisks.len(), config.subdisks.len());
        for (request, sd) in description.subdisks.iter().zip(&config.subdisks) {
            prop_assert_eq!(&request.name, &sd.name);
            prop_assert_eq!(&request.drive, &sd.drive);
            prop_assert_eq!(request.length, Some(sd.length));
            prop_assert_eq!(request.drive_offset, Some(sd.drive_offset));
            prop_assert_eq!(request.state, Some(sd.state));
            prop_assert_eq!(request.plex.as_deref(), sd.plex().or(last_plex));
            prop_assert_eq!(request.plex_offset, sd.membership.as_ref().map(|m| m.plex_offset));
        }
    }

    #[test]
    fn headers_round_trip_byte_for_byte(header in common::header()) {
        let bytes = header.to_bytes().unwrap();
        let parsed = DriveHeader::parse(&bytes).unwrap();
        prop_assert_eq!(&parsed, &header);
        prop_assert_eq!(parsed.to_bytes().unwrap(), bytes);
    }

    #[test]
    fn drive_metadata_round_trips(header in common::header(), config in common::sound_config()) {
        let meta = DriveMetadata { header, config_text: format_config(&config).unwrap() };
        let bytes = meta.to_bytes().unwrap();
        prop_assert_eq!(bytes.len() as u64, DATA_START);
        let parsed = DriveMetadata::parse(&bytes).unwrap();
        prop_assert_eq!(&parsed, &meta);
        prop_assert_eq!(parse_config(&parsed.config_text).unwrap(), config);
    }

    #[test]
    fn sound_configs_have_no_problems_and_map_every_unit(config in common::sound_config()) {
        prop_assert_eq!(config.problems(), vec![]);
        let plex = &config.plexes[0];
        let layout = PlexLayout::from_config(&config, &plex.name).unwrap();
        prop_assert_eq!(Some(layout.size()), config.plex_size(&plex.name));
        prop_assert_eq!(Some(layout.size()), config.volume_size(&config.volumes[0].name));
        let unit = plex.organization.stripe_size().unwrap_or(65_536);
        let mut data = std::collections::HashSet::new();
        let mut parity = std::collections::HashSet::new();
        for i in 0..layout.size() / unit {
            let at = layout.locate(i * unit).unwrap();
            prop_assert!(at.offset + at.run <= layout.columns()[at.column].length);
            prop_assert!(at.run >= unit || matches!(plex.organization, PlexOrganization::Concat));
            prop_assert!(data.insert((at.column, at.offset)));
            if let PlexOrganization::Raid5 { .. } = plex.organization {
                let r5 = layout.locate_raid5(i * unit).unwrap();
                prop_assert_eq!(r5.data, at);
                parity.insert((r5.parity_column, at.offset));
            }
        }
        // Data units and parity units never share a place.
        prop_assert!(data.is_disjoint(&parity));
    }
}
