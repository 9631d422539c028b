//! Where the arrays of an mdadm.conf(5) are to be looked for: the devices an `ARRAY` line's
//! `devices=` or the `DEVICE` lines name (glob patterns, `partitions`), expanded on this
//! machine. The file itself is read by the md crate's parser (`uraid_md::conf`).

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

use uraid_md::conf::{ArrayLine, Conf};

/// The name mdadm gives an ARRAY line's device: `/dev/md/data` → `data`, `/dev/md0` → `md0`;
/// `None` for `<ignore>` (the line says which array not to assemble).
pub fn device_name(array: &ArrayLine) -> Option<&str> {
    let device = array.devname.as_deref()?;
    if device.eq_ignore_ascii_case("<ignore>") {
        return None;
    }
    let name = device.strip_prefix("/dev/md/").unwrap_or_else(|| device.rsplit('/').next().unwrap_or(device));
    (!name.is_empty()).then_some(name)
}

/// The devices to look for `array`'s members among: its `devices=` when it has them, else the
/// `DEVICE` lines' (mdadm's default, `partitions`, when there are none). Patterns are expanded
/// as glob(3) expands them; `containers` names none here.
pub fn candidates(config: &Conf, array: &ArrayLine) -> Vec<PathBuf> {
    let patterns: Vec<String> = if !array.devices.is_empty() {
        array.devices.clone()
    } else if !config.devices.is_empty() {
        config.devices.clone()
    } else {
        vec!["partitions".to_string()]
    };
    let mut paths = Vec::new();
    for pattern in &patterns {
        match pattern.as_str() {
            "partitions" => paths.extend(partitions(Path::new("/proc/partitions"))),
            "containers" => {}
            p => paths.extend(glob(p)),
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// `/dev/NAME` for every device `/proc/partitions` lists.
fn partitions(list: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(list).unwrap_or_default();
    text.lines().skip(2).filter_map(|l| l.split_whitespace().nth(3)).map(|name| Path::new("/dev").join(name)).collect()
}

/// The paths `pattern` matches, as glob(3) finds them (none when nothing matches).
fn glob(pattern: &str) -> Vec<PathBuf> {
    let Ok(c_pattern) = CString::new(pattern) else { return Vec::new() };
    // SAFETY: glob_t is plain data that glob(3) fills; all zeroes is its documented start.
    let mut found: libc::glob_t = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated pattern, no error callback, and `found` freed below.
    let rc = unsafe { libc::glob(c_pattern.as_ptr(), 0, None, &mut found) };
    let mut paths = Vec::new();
    if rc == 0 {
        for i in 0..found.gl_pathc {
            // SAFETY: glob(3) set gl_pathc NUL-terminated strings in gl_pathv.
            let path = unsafe { CStr::from_ptr(*found.gl_pathv.add(i)) };
            use std::os::unix::ffi::OsStrExt;
            paths.push(PathBuf::from(std::ffi::OsStr::from_bytes(path.to_bytes())));
        }
    }
    // SAFETY: frees what glob(3) allocated in `found` (safe after a failed glob too).
    unsafe { libc::globfree(&mut found) };
    paths
}

#[cfg(test)]
mod tests {
    use super::*;
    use uraid_md::conf::parse;

    const CONF: &str = "\
# mdadm.conf written by hand
DEVICE /srv/images/*.img /dev/sd[bc]1
dev    partitions   # three letters are enough
MAILADDR root
ARRAY /dev/md/data metadata=1.2 UUID=0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9
   name=host:data
array /dev/md0 level=raid1 num-devices=2 devices=/dev/sdd1,/dev/sde1
ARRAY <ignore> UUID=11111111:22222222:33333333:44444444
";

    #[test]
    fn arrays_are_named_after_their_devices() {
        let c = parse(CONF).unwrap();
        assert_eq!(c.devices, ["/srv/images/*.img", "/dev/sd[bc]1", "partitions"]);
        let names: Vec<Option<&str>> = c.arrays.iter().map(device_name).collect();
        assert_eq!(names, [Some("data"), Some("md0"), None]);
    }

    #[test]
    fn candidates_are_the_arrays_devices_else_the_device_lines() {
        let tmp = tempfile::tempdir().unwrap();
        for f in ["a.img", "b.img", "c.raw"] {
            std::fs::write(tmp.path().join(f), "").unwrap();
        }
        let dir = tmp.path().display();
        let c = parse(&format!(
            "DEVICE {dir}/*.img {dir}/none-*\nARRAY /dev/md/x UUID=0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9\nARRAY /dev/md/y devices={dir}/c.raw\n"
        ))
        .unwrap();
        assert_eq!(candidates(&c, &c.arrays[0]), [tmp.path().join("a.img"), tmp.path().join("b.img")]);
        assert_eq!(candidates(&c, &c.arrays[1]), [tmp.path().join("c.raw")]);
    }

    #[test]
    fn proc_partitions_names_devices_under_dev() {
        let tmp = tempfile::tempdir().unwrap();
        let list = tmp.path().join("partitions");
        std::fs::write(
            &list,
            "major minor  #blocks  name\n\n   8        0  488386584 sda\n   8        1     524288 sda1\n",
        )
        .unwrap();
        assert_eq!(partitions(&list), [PathBuf::from("/dev/sda"), PathBuf::from("/dev/sda1")]);
    }
}
