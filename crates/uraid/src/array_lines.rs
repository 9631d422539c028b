//! mdadm's one-line descriptions of arrays, written as mdadm 4.2 writes them: the `ARRAY` lines
//! of `--examine --scan` (`brief_examine_super0/1`, `Examine.c`) and of `--detail --scan`
//! (`Detail.c`, `brief_detail_super0/1`), which an mdadm.conf takes back (`uraid_md::conf`
//! reads them), and the shell variables of `--detail --export`.
//!
//! uraid runs no `/dev/mdN`, so an array's device name is the one mdadm derives from its
//! superblock: `/dev/md/NAME` for a 1.x array with a name (what follows `homehost:`), and
//! `/dev/mdN` for a 0.90 array, N the minor its superblock records; a 1.x array without a name
//! gets none, as in mdadm's `--examine --scan`. Member devices are the paths given (or found).

use uraid_md::assemble::{AssemblyPlan, MemberVerdict};
use uraid_md::conf::quote;
use uraid_md_format::uuid::format_md;
use uraid_md_format::{MemberInfo, MetadataVersion, Role};

use crate::report::level_name;

/// The part of a 1.x name mdadm names the device after: what follows `homehost:`, with spaces
/// and tabs as `_` and `/` as `-` (mdadm's `print_escape`); `None` without a name.
fn short_name(info: &MemberInfo) -> Option<String> {
    if info.version == MetadataVersion::V0_90 || info.name.is_empty() {
        return None;
    }
    let after_host = info.name.split_once(':').map_or(info.name.as_str(), |(_, n)| n);
    Some(
        after_host
            .chars()
            .map(|c| match c {
                ' ' | '\t' => '_',
                '/' => '-',
                c => c,
            })
            .collect(),
    )
}

/// The device name mdadm gives the array (see the module documentation).
pub fn device_name(info: &MemberInfo) -> Option<String> {
    match info.preferred_minor {
        Some(minor) => Some(format!("/dev/md{minor}")),
        None => short_name(info).map(|n| format!("/dev/md/{n}")),
    }
}

/// Whether a member's own superblock says it is in sync in a slot (mdadm counts the others,
/// spares and faulty ones alike, as spares in `--examine --scan`).
fn in_sync(info: &MemberInfo) -> bool {
    matches!(info.role, Role::Active(_) | Role::Replacement(_)) && info.recovery_offset.is_none()
}

/// `mdadm --examine --scan` (`-v`: `verbose`) of `members` (path and superblock): one entry per
/// array, arrays in mdadm's order (the one met last first), members in the order given.
pub fn examine_scan(members: &[(String, MemberInfo)], verbose: bool) -> String {
    let mut arrays: Vec<(&MemberInfo, Vec<&str>, usize)> = Vec::new();
    for (path, info) in members {
        let spare = usize::from(!in_sync(info));
        match arrays
            .iter_mut()
            .find(|(first, _, _)| first.array_uuid == info.array_uuid && first.version == info.version)
        {
            Some((_, paths, spares)) => {
                paths.push(path);
                *spares += spare;
            }
            None => arrays.push((info, vec![path], spare)),
        }
    }
    let mut out = String::new();
    for (info, paths, spares) in arrays.iter().rev() {
        out.push_str(&examine_line(info, verbose));
        let mut tail = String::new();
        if *spares > 0 {
            tail.push_str(&format!("   spares={spares}"));
        }
        if verbose {
            tail.push_str(&format!("   devices={}", paths.join(",")));
        }
        if !tail.is_empty() {
            out.push_str(&tail);
            out.push('\n');
        }
    }
    out
}

/// The first line of an `--examine --scan` entry, newline included.
fn examine_line(info: &MemberInfo, verbose: bool) -> String {
    let uuid = format_md(&info.array_uuid);
    let level = level_name(info.level);
    if info.version == MetadataVersion::V0_90 {
        let dev = device_name(info).unwrap_or_default();
        return if verbose {
            format!("ARRAY {dev} level={level} num-devices={} UUID={uuid}\n", info.raid_disks)
        } else {
            format!("ARRAY {dev} UUID={uuid}\n")
        };
    }
    // mdadm writes the device name and a space, then " metadata=": two spaces between them.
    let mut s = String::from("ARRAY ");
    if let Some(dev) = device_name(info) {
        s.push_str(&dev);
        s.push(' ');
    }
    if verbose {
        s.push_str(&format!(" level={level}"));
    }
    s.push_str(&format!(" metadata={} ", info.version));
    if verbose {
        s.push_str(&format!("num-devices={} ", info.raid_disks));
    }
    s.push_str(&format!("UUID={uuid}"));
    if !info.name.is_empty() {
        s.push_str(&format!(" name={}", quote(&info.name)));
    }
    s.push('\n');
    s
}

/// The members that are part of the assembled array (in a slot, rebuilding or not, or spares),
/// with the slot each holds; members left out (stale, faulty, duplicates) are not.
fn in_array<'a>(plan: &AssemblyPlan, names: &'a [String]) -> Vec<(&'a str, Option<usize>)> {
    let mut out: Vec<(&str, Option<usize>)> = plan
        .verdicts
        .iter()
        .zip(names)
        .filter_map(|(v, n)| match v {
            MemberVerdict::Active { slot } => Some((n.as_str(), Some(*slot))),
            MemberVerdict::Spare => Some((n.as_str(), None)),
            _ => None,
        })
        .collect();
    out.sort_by_key(|(_, slot)| slot.unwrap_or(usize::MAX));
    out
}

/// `mdadm --detail --brief` (`--detail --scan`) of an assembled array, newline included;
/// `verbose` adds the level, the raid devices and a second line of devices, sorted.
pub fn detail_line(plan: &AssemblyPlan, infos: &[MemberInfo], names: &[String], verbose: bool) -> String {
    let reference = &infos[plan.reference];
    let mut s = String::from("ARRAY");
    if let Some(dev) = device_name(reference) {
        s.push_str(&format!(" {dev}"));
    }
    if verbose {
        s.push_str(&format!(" level={} num-devices={}", plan.level.name(), plan.raid_disks));
    }
    s.push_str(&format!(" metadata={}", plan.version));
    // md counts a device rebuilding into a slot as not yet active, like a spare.
    let members = in_array(plan, names);
    let spares = members.iter().filter(|(_, slot)| slot.is_none_or(|s| plan.recovering[s].is_some())).count();
    if spares > 0 {
        s.push_str(&format!(" spares={spares}"));
    }
    if plan.version != MetadataVersion::V0_90 && !plan.name.is_empty() {
        s.push_str(&format!(" name={}", quote(&plan.name)));
    }
    s.push_str(&format!(" UUID={}", plan.uuid_string()));
    if verbose && !members.is_empty() {
        let mut paths: Vec<&str> = members.iter().map(|(p, _)| *p).collect();
        paths.sort_unstable();
        s.push_str(&format!("\n   devices={}", paths.join(",")));
    }
    s.push('\n');
    s
}

/// The part of a member variable's name mdadm takes from the kernel's `dev-NAME` folder of the
/// member: here `dev-` and the file name, every character but letters and digits as `_`.
fn member_key(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    format!("dev-{file}").chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// `mdadm --detail --export`: shell variables, in mdadm's order.
pub fn export_variables(plan: &AssemblyPlan, infos: &[MemberInfo], names: &[String]) -> String {
    let reference = &infos[plan.reference];
    let mut s = String::new();
    s.push_str(&format!("MD_LEVEL={}\n", plan.level.name()));
    s.push_str(&format!("MD_DEVICES={}\n", plan.raid_disks));
    s.push_str(&format!("MD_METADATA={}\n", plan.version));
    s.push_str(&format!("MD_UUID={}\n", plan.uuid_string()));
    // mdadm names the device only when it lives under /dev/md/.
    if let Some(short) = short_name(reference) {
        s.push_str(&format!("MD_DEVNAME={short}\n"));
    }
    if plan.version != MetadataVersion::V0_90 && !plan.name.is_empty() {
        // As mdadm: the name up to a newline.
        let name = plan.name.split('\n').next().unwrap_or_default();
        s.push_str(&format!("MD_NAME={name}\n"));
    }
    for (path, slot) in in_array(plan, names) {
        let key = member_key(path);
        match slot {
            Some(slot) => s.push_str(&format!("MD_DEVICE_{key}_ROLE={slot}\n")),
            None => s.push_str(&format!("MD_DEVICE_{key}_ROLE=spare\n")),
        }
        s.push_str(&format!("MD_DEVICE_{key}_DEV={path}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(version: MetadataVersion, name: &str, role: Role) -> MemberInfo {
        MemberInfo {
            version,
            array_uuid: [0x6d, 0x64, 0x6f, 0x72, 0x61, 0x63, 0x6c, 0x65, 0, 0, 0, 0, 0, 0, 0, 0x36],
            name: name.into(),
            preferred_minor: (version == MetadataVersion::V0_90).then_some(3),
            ctime: 0,
            utime: 0,
            level: 5,
            layout: 2,
            chunk_sectors: 128,
            raid_disks: 4,
            component_sectors: 0,
            usable_sectors: 0,
            avail_sectors: 0,
            data_offset: 0,
            super_offset: 8,
            events: 0,
            resync_offset: u64::MAX,
            recovery_offset: None,
            feature_map: 0,
            dev_number: 0,
            role,
            roles: Vec::new(),
            device_uuid: None,
            bitmap_offset: None,
            ppl: None,
            bad_block_log: None,
            state_clean: true,
            checksum: 0,
            reshape: None,
        }
    }

    const UUID: &str = "6d646f72:61636c65:00000000:00000036";

    #[test]
    fn examine_scan_is_mdadms() {
        let a = info(MetadataVersion::V1_2, "vm:data", Role::Active(0));
        let s = info(MetadataVersion::V1_2, "vm:data", Role::Spare);
        let members = vec![("/d/a".to_string(), a.clone()), ("/d/e".to_string(), s)];
        assert_eq!(
            examine_scan(&members, false),
            format!("ARRAY /dev/md/data  metadata=1.2 UUID={UUID} name=vm:data\n   spares=1\n")
        );
        assert_eq!(
            examine_scan(&members, true),
            format!(
                "ARRAY /dev/md/data  level=raid5 metadata=1.2 num-devices=4 UUID={UUID} name=vm:data\n   spares=1   devices=/d/a,/d/e\n"
            )
        );
        // 0.90: /dev/mdN, no metadata word; a nameless 1.x array: no device name.
        let old = info(MetadataVersion::V0_90, "", Role::Active(1));
        assert_eq!(examine_scan(&[("/x".into(), old)], false), format!("ARRAY /dev/md3 UUID={UUID}\n"));
        let nameless = info(MetadataVersion::V1_0, "", Role::Active(1));
        assert_eq!(examine_scan(&[("/x".into(), nameless)], false), format!("ARRAY  metadata=1.0 UUID={UUID}\n"));
        // A name with a space is quoted, and escaped in the device name.
        let spaced = info(MetadataVersion::V1_2, "h:my data/x", Role::Active(0));
        assert_eq!(
            examine_scan(&[("/x".into(), spaced)], false),
            format!("ARRAY /dev/md/my_data-x  metadata=1.2 UUID={UUID} name=\"h:my data/x\"\n")
        );
        // Two arrays: the one met last comes first, as in mdadm.
        let mut other = a.clone();
        other.array_uuid[15] = 0x37;
        other.name = "vm:other".into();
        let text = examine_scan(&[("/a".into(), a), ("/b".into(), other)], false);
        assert!(text.starts_with("ARRAY /dev/md/other"), "{text}");
    }

    #[test]
    fn lines_read_back_as_a_configuration() {
        let a = info(MetadataVersion::V1_2, "h:two words", Role::Active(0));
        let text = examine_scan(&[("/d/a".into(), a)], true);
        let conf = uraid_md::conf::parse(&text).expect("mdadm.conf syntax");
        let line = &conf.arrays[0];
        assert_eq!(line.devname.as_deref(), Some("/dev/md/two_words"));
        assert_eq!(line.name.as_deref(), Some("h:two words"));
        assert_eq!(line.uuid.map(|u| format_md(&u)).as_deref(), Some(UUID));
        assert_eq!((line.level, line.num_devices, line.devices.clone()), (Some(5), Some(4), vec!["/d/a".to_string()]));
    }

    #[test]
    fn member_keys_follow_the_kernels_folder_names() {
        assert_eq!(member_key("/dev/sdb1"), "dev_sdb1");
        assert_eq!(member_key("/srv/images/d0.img"), "dev_d0_img");
        assert_eq!(member_key("d-1.img"), "dev_d_1_img");
    }
}
