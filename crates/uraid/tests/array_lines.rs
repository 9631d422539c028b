//! mdadm.conf's ARRAY lines from `uraid examine --scan` and `uraid detail --scan`/`--brief`, and
//! `uraid detail --export`'s variables, through the real binary: the exact text mdadm 4.2
//! prints for the same superblocks, and lines that read back (uraid_md::conf) as what they say.

use std::path::Path;

use serde_json::Value;
use uraid_md::conf;
use uraid_md_format::uuid::format_md;
use uraid_testkit::cases;

mod common;
use common::{text, uraid, with};

fn out(args: &[&str]) -> String {
    let o = uraid(args);
    assert!(o.status.success(), "uraid {args:?} failed\n{}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

fn files(dir: &Path, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            let p = dir.join(n);
            std::fs::File::create(&p).unwrap().set_len(8 << 20).unwrap();
            p.display().to_string()
        })
        .collect()
}

fn uuid_of(member: &str) -> String {
    let v: Value = serde_json::from_str(&out(&["examine", "--json", member])).unwrap();
    v[0]["array_uuid"].as_str().unwrap().to_string()
}

/// A raid5 of four with a spare (1.2, named) and a 0.90 raid1, side by side in one folder.
fn two_arrays(dir: &Path) -> (Vec<String>, Vec<String>) {
    let r5 = files(dir, &["a.img", "b.img", "c.img", "d.img", "e.img"]);
    let r1 = files(dir, &["f.img", "g.img"]);
    files(dir, &["plain.img"]);
    out(&with(&["create", "-l5", "-n4", "-x1", "--chunk=64K", "--name=data", "--homehost=host"], &r5));
    out(&with(&["create", "-e0.90", "-l1", "-n2"], &r1));
    (r5, r1)
}

#[test]
fn examine_scan_prints_mdadms_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let (r5, r1) = two_arrays(tmp.path());
    let (u5, u1) = (uuid_of(&r5[0]), uuid_of(&r1[0]));
    let all: Vec<String> = [r5.clone(), r1.clone(), vec![tmp.path().join("plain.img").display().to_string()]].concat();
    // As mdadm: the array met last first, two spaces after a 1.x device name, 0.90 without
    // metadata=, spares on a line of their own; a device without a superblock skipped.
    assert_eq!(
        out(&with(&["examine", "--scan"], &all)),
        format!("ARRAY /dev/md0 UUID={u1}\nARRAY /dev/md/data  metadata=1.2 UUID={u5} name=host:data\n   spares=1\n")
    );
    let verbose = out(&with(&["examine", "--scan", "-v"], &all));
    assert_eq!(
        verbose,
        format!(
            "ARRAY /dev/md0 level=raid1 num-devices=2 UUID={u1}\n   devices={}\n\
             ARRAY /dev/md/data  level=raid5 metadata=1.2 num-devices=4 UUID={u5} name=host:data\n   spares=1   devices={}\n",
            r1.join(","),
            r5.join(",")
        )
    );
    // --brief is --scan; a folder stands for what is under it.
    let dir = tmp.path().display().to_string();
    assert_eq!(out(&["examine", "--brief", &dir]).lines().count(), 3);
    // The lines are a configuration that says what they printed.
    let parsed = conf::parse(&verbose).expect("mdadm.conf syntax");
    assert_eq!(parsed.arrays.len(), 2);
    let data = &parsed.arrays[1];
    assert_eq!(data.devname.as_deref(), Some("/dev/md/data"));
    assert_eq!(format_md(&data.uuid.unwrap()), u5);
    assert_eq!(data.name.as_deref(), Some("host:data"));
    assert_eq!((data.level, data.num_devices, data.spares), (Some(5), Some(4), 1));
    assert_eq!(data.metadata.map(|m| m.to_string()).as_deref(), Some("1.2"));
    assert_eq!(data.devices, r5);
    assert_eq!(parsed.arrays[0].devname.as_deref(), Some("/dev/md0"));
    // Nothing md among the devices: nothing printed, no error (a scan meets such devices).
    let o = uraid(&["examine", "--scan", &tmp.path().join("plain.img").display().to_string()]);
    assert!(o.status.success() && o.stdout.is_empty(), "{}", text(&o));
}

#[test]
fn detail_scan_brief_and_export() {
    let tmp = tempfile::tempdir().unwrap();
    let (r5, r1) = two_arrays(tmp.path());
    let (u5, u1) = (uuid_of(&r5[0]), uuid_of(&r1[0]));
    let dir = tmp.path().display().to_string();
    let line5 = format!("ARRAY /dev/md/data metadata=1.2 spares=1 name=host:data UUID={u5}\n");
    let line1 = format!("ARRAY /dev/md0 metadata=0.90 UUID={u1}\n");
    // --scan DIR: ARRAY lines (sorted by UUID), as mdadm --detail --scan.
    let scan = out(&["detail", "--scan", &dir]);
    let mut want = [line5.clone(), line1.clone()];
    want.sort_by_key(|l| l.rsplit("UUID=").next().unwrap().to_string());
    assert_eq!(scan, want.concat());
    assert_eq!(out(&with(&["detail", "--brief"], &r5)), line5);
    let mut sorted = r5.clone();
    sorted.sort();
    assert_eq!(
        out(&with(&["detail", "--brief", "-v"], &r5)),
        format!(
            "ARRAY /dev/md/data level=raid5 num-devices=4 metadata=1.2 spares=1 name=host:data UUID={u5}\n   devices={}\n",
            sorted.join(",")
        )
    );
    // -vv with --scan: the whole descriptions again.
    assert!(out(&["detail", "--scan", &dir, "-vv"]).contains("Raid Devices : 4"));
    let parsed = conf::parse(&scan).unwrap();
    assert_eq!(parsed.arrays.len(), 2);
    assert!(parsed.arrays.iter().all(|a| a.uuid.is_some() && a.metadata.is_some()));

    let key = |p: &str| {
        let f = Path::new(p).file_name().unwrap().to_str().unwrap();
        format!("dev_{}", f.replace('.', "_"))
    };
    let mut want =
        format!("MD_LEVEL=raid5\nMD_DEVICES=4\nMD_METADATA=1.2\nMD_UUID={u5}\nMD_DEVNAME=data\nMD_NAME=host:data\n");
    for (i, m) in r5.iter().enumerate() {
        let role = if i < 4 { i.to_string() } else { "spare".to_string() };
        want.push_str(&format!("MD_DEVICE_{k}_ROLE={role}\nMD_DEVICE_{k}_DEV={m}\n", k = key(m)));
    }
    assert_eq!(out(&with(&["detail", "--export"], &r5)), want);
    let export1 = out(&with(&["detail", "--export"], &r1));
    assert!(
        export1.starts_with(&format!("MD_LEVEL=raid1\nMD_DEVICES=2\nMD_METADATA=0.90\nMD_UUID={u1}\nMD_DEVICE_")),
        "{export1}"
    );
    assert!(!export1.contains("MD_NAME") && !export1.contains("MD_DEVNAME"), "0.90 has no name: {export1}");
    // Read as shell assignments, every line is NAME=VALUE.
    assert!(export1
        .lines()
        .all(|l| l.split_once('=').is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))));
    // Forms that do not go together, and arrays that are not md's, are refused.
    let o = uraid(&with(&["detail", "--brief", "--json"], &r5));
    assert!(!o.status.success(), "--brief and --json do not go together");
    let o = uraid(&["detail", "--export", "--volume", "v", &r5[0]]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("md arrays"), "{}", text(&o));
}

/// For arrays the kernel made, --export says what mdadm recorded in case.json.
#[test]
fn export_of_kernel_made_arrays_matches_their_record() {
    let mut checked = 0;
    for case in cases() {
        if !["raid5-4-ls-64k-spare", "raid5-3-ls-64k-0.90", "raid6-5-ls-64k-missing0-3", "raid1-2"]
            .contains(&case.name.as_str())
        {
            continue;
        }
        let imgs: Vec<String> =
            case.members.iter().filter_map(|m| case.member_image(m.index)).map(|p| p.display().to_string()).collect();
        let vars = out(&with(&["detail", "--export"], &imgs));
        let get = |k: &str| vars.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).map(str::to_string);
        let j = &case.json;
        assert_eq!(get("MD_LEVEL").as_deref(), j["level"].as_str(), "{}", case.name);
        assert_eq!(get("MD_DEVICES"), j["raid_devices"].as_u64().map(|n| n.to_string()), "{}", case.name);
        assert_eq!(get("MD_UUID").as_deref(), j["array_uuid"].as_str(), "{}", case.name);
        let metadata = j["metadata"].as_str().unwrap();
        assert_eq!(
            get("MD_METADATA").as_deref(),
            Some(if metadata == "0.90" { "0.90" } else { metadata }),
            "{}",
            case.name
        );
        match j["array_name"].as_str().filter(|n| !n.is_empty()) {
            Some(name) => assert_eq!(get("MD_NAME").as_deref(), Some(name), "{}", case.name),
            None => assert_eq!(get("MD_NAME"), None, "{}", case.name),
        }
        let roles = vars.lines().filter(|l| l.contains("_ROLE=")).count();
        let members = case.members.iter().filter(|m| m.status != "missing").count();
        assert_eq!(roles, members, "{}: {vars}", case.name);
        checked += 1;
    }
    assert_eq!(checked, 4);
}
