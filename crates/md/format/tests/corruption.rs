//! Damaged input: flipped bytes, blank and truncated buffers, unknown features, and random
//! bytes and random mutations of real superblocks, which must give errors, never panics.

mod common;

use std::sync::OnceLock;

use common::*;
use proptest::prelude::*;
use uraid_md_format::bitmap::BitmapSuper;
use uraid_md_format::{FormatError, MetadataVersion, Superblock};
use uraid_testkit::cases;

/// One real superblock of each version present in the fixtures: (version, 4 KiB, device bytes).
fn samples() -> &'static Vec<(MetadataVersion, Vec<u8>, u64)> {
    static SAMPLES: OnceLock<Vec<(MetadataVersion, Vec<u8>, u64)>> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let mut out: Vec<(MetadataVersion, Vec<u8>, u64)> = Vec::new();
        for case in cases() {
            for m in &case.members {
                let Some(image) = member_bytes(&case, m.index) else { continue };
                let sb = find_superblock(&image).expect("superblock");
                let v = sb.version();
                if !out.iter().any(|(have, _, _)| *have == v) {
                    out.push((v, raw_superblock(&image, v).to_vec(), image.len() as u64));
                }
            }
        }
        assert!(out.len() >= 3, "fixtures should hold 0.90, 1.0 and 1.2 superblocks");
        out
    })
}

fn sample(version: MetadataVersion) -> (Vec<u8>, u64) {
    let (_, b, size) = samples().iter().find(|(v, _, _)| *v == version).expect("sample of that version");
    (b.clone(), *size)
}

#[test]
fn a_flipped_byte_is_a_checksum_error_naming_both_sums() {
    for (version, bytes, size) in samples() {
        // A byte of the name (1.x) or of reserved words (0.90): nothing else checks it.
        let at = if *version == MetadataVersion::V0_90 { 4 * 20 } else { 40 };
        let mut bad = bytes.clone();
        bad[at] ^= 0x5a;
        let err = Superblock::parse(*version, &bad, *size).unwrap_err();
        let FormatError::BadChecksum { stored, computed } = err else { panic!("{version}: got {err:?}") };
        assert_ne!(stored, computed);
        let text = err.to_string();
        assert!(
            text.contains(&format!("stored 0x{stored:08x}")) && text.contains(&format!("computed 0x{computed:08x}")),
            "{text}"
        );
        assert!(text.starts_with("bad superblock checksum"), "{text}");
    }
}

#[test]
fn a_blank_device_has_no_superblock() {
    let size = 4u64 << 20;
    let zeros = vec![0u8; size as usize];
    assert!(find_superblock(&zeros).is_none());
    for version in MetadataVersion::all() {
        let err = Superblock::parse(version, &zeros[..4096], size).unwrap_err();
        assert!(matches!(err, FormatError::NoSuperblock { found: 0, .. }), "{err:?}");
        let offset = version.superblock_offset(size).unwrap();
        assert_eq!(err.to_string(), format!("no md superblock (magic 0x00000000 at byte {offset})"));
    }
}

#[test]
fn truncated_buffers_are_errors() {
    for (version, bytes, size) in samples() {
        for len in [0, 3, 100, 255, 256, 300, 511, 1000, 4095] {
            let needed = if *version == MetadataVersion::V0_90 { 4096 } else { 512 };
            let result = Superblock::parse(*version, &bytes[..len], *size);
            if len < needed {
                let err = result.unwrap_err();
                assert!(matches!(err, FormatError::Truncated { .. }), "{version} len {len}: {err:?}");
                assert!(err.to_string().starts_with("truncated: needs "), "{err}");
            } else {
                result.unwrap_or_else(|e| panic!("{version} len {len}: {e}"));
            }
        }
    }
    assert!(matches!(BitmapSuper::parse(&[0u8; 100]), Err(FormatError::Truncated { needed: 256, got: 100 })));
}

#[test]
fn unknown_feature_bits_are_rejected() {
    for version in [MetadataVersion::V1_0, MetadataVersion::V1_2] {
        let (bytes, size) = sample(version);
        let Superblock::V1(mut sb) = Superblock::parse(version, &bytes, size).unwrap() else { unreachable!() };
        sb.feature_map |= 0x0001_0000;
        let err = Superblock::parse(version, &sb.to_bytes(), size).unwrap_err();
        assert_eq!(err, FormatError::UnknownFeatures { bits: 0x0001_0000, feature_map: sb.feature_map });
        assert!(err.to_string().starts_with("unknown feature bits 0x10000"), "{err}");
    }
}

#[test]
fn a_superblock_read_at_the_wrong_place_says_where_it_claims_to_be() {
    let (bytes, size) = sample(MetadataVersion::V1_2);
    let err = Superblock::parse(MetadataVersion::V1_1, &bytes, size).unwrap_err();
    assert_eq!(err, FormatError::WrongOffset { claimed: 8, read_at: 0 });
    assert_eq!(err.to_string(), "superblock claims offset 8 but was read at 0 (sectors)");
    // A 1.x superblock where 0.90 is expected fails on the major version.
    let err = Superblock::parse(MetadataVersion::V0_90, &[bytes.clone(), vec![0; 4096]].concat()[..4096], size);
    assert!(matches!(err, Err(FormatError::WrongMajorVersion { found: 1, expected: 0, .. })), "{err:?}");
}

#[test]
fn other_load_checks() {
    let (bytes, size) = sample(MetadataVersion::V1_2);
    let Superblock::V1(sb) = Superblock::parse(MetadataVersion::V1_2, &bytes, size).unwrap() else { unreachable!() };
    let reparse = |sb: &uraid_md_format::Superblock1| Superblock::parse(MetadataVersion::V1_2, &sb.to_bytes(), size);
    let mut s = sb.clone();
    s.pad3[5] = 1;
    assert_eq!(reparse(&s).unwrap_err(), FormatError::NonZeroPadding { field: "pad3" });
    let mut s = sb.clone();
    s.data_size = size / 512;
    assert!(matches!(reparse(&s), Err(FormatError::BadDataArea(_))));
    let mut s = sb.clone();
    s.data_offset = 8;
    assert!(matches!(reparse(&s), Err(FormatError::BadDataArea(_))));
    let mut s = sb.clone();
    s.feature_map |= uraid_md_format::sb1::feature::RAID0_LAYOUT;
    s.level = 5;
    assert!(matches!(reparse(&s), Err(FormatError::BadFeatures(_))));
    // The kernel's limit on max_dev.
    let mut raw = bytes.clone();
    raw[220..224].copy_from_slice(&1921u32.to_le_bytes());
    assert_eq!(
        Superblock::parse(MetadataVersion::V1_2, &raw, size).unwrap_err(),
        FormatError::BadMaxDev { max_dev: 1921, limit: 1920 }
    );
    // A device too small for any superblock.
    assert!(matches!(
        Superblock::parse(MetadataVersion::V1_2, &bytes, 8 * 512),
        Err(FormatError::DeviceTooSmall { .. })
    ));
}

#[test]
fn setters_update_what_they_say_and_keep_the_checksum_valid() {
    for (version, bytes, size) in samples() {
        let mut sb = Superblock::parse(*version, bytes, *size).unwrap();
        sb.set_events(1_000_000_007);
        sb.set_utime(1_800_000_000);
        sb.set_clean(false);
        sb.set_role(1, uraid_md_format::Role::Faulty);
        let again = Superblock::parse(*version, &sb.to_bytes(), *size).unwrap();
        let info = again.info();
        assert_eq!(info.events, 1_000_000_007);
        assert_eq!(info.utime, 1_800_000_000);
        assert!(!info.state_clean);
        assert_eq!(info.roles[1], uraid_md_format::Role::Faulty);
        let mut sb = again;
        sb.set_clean(true);
        sb.set_role(1, uraid_md_format::Role::Active(1));
        let info = Superblock::parse(*version, &sb.to_bytes(), *size).unwrap().info();
        assert!(info.state_clean);
        assert_eq!(info.resync_offset, u64::MAX);
        assert_eq!(info.roles[1], uraid_md_format::Role::Active(1));
    }
}

fn parse_everything(bytes: &[u8], device_bytes: u64) {
    for version in MetadataVersion::all() {
        if let Ok(sb) = Superblock::parse(version, bytes, device_bytes) {
            let info = sb.info();
            let out = sb.to_bytes();
            assert_eq!(Superblock::parse(version, &out, device_bytes).map(|s| s.info()), Ok(info));
        }
    }
    if let Ok(b) = BitmapSuper::parse(bytes) {
        let _ = (b.chunks(), b.bits_bytes(), b.space_bytes(4096), b.to_bytes());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4200), device in 0u64..(1 << 40)) {
        parse_everything(&bytes, device);
        let mut with_magic = bytes.clone();
        if with_magic.len() >= 8 {
            with_magic[..4].copy_from_slice(&0xa92b_4efcu32.to_le_bytes());
            with_magic[4] = 1;
            with_magic[5..8].fill(0);
        }
        parse_everything(&with_magic, device);
    }

    #[test]
    fn mutated_superblocks_never_panic(
        which in 0usize..8,
        edits in proptest::collection::vec((0usize..4096, any::<u8>()), 1..8),
        fix_checksum in any::<bool>(),
        device_delta in -64i64..64,
    ) {
        let all = samples();
        let (version, bytes, size) = &all[which % all.len()];
        let mut b = bytes.clone();
        for (at, v) in &edits {
            if *at < b.len() {
                b[*at] = *v;
            }
        }
        if fix_checksum && *version != MetadataVersion::V0_90 && b.len() >= 256 {
            // Re-sign the mutation so the deeper checks run.
            let max_dev = u32::from_le_bytes(b[220..224].try_into().unwrap());
            if 256 + 2 * (max_dev as usize) <= b.len() {
                let c = uraid_md_format::sb1::checksum(&b, max_dev);
                b[216..220].copy_from_slice(&c.to_le_bytes());
            }
        } else if fix_checksum && b.len() >= 4096 {
            let c = uraid_md_format::sb090::checksum(&b);
            b[152..156].copy_from_slice(&c.to_le_bytes());
        }
        let device = (*size as i64 + device_delta * 512).max(0) as u64;
        parse_everything(&b, device);
        parse_everything(&b, *size);
    }
}
