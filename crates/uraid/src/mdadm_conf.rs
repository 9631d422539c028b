//! The part of mdadm.conf(5) that says which arrays to assemble from which devices: `DEVICE`
//! lines (glob patterns, `partitions`) and `ARRAY` lines (the device name, `UUID=`, `name=`,
//! `devices=`). Everything else in the file (`MAILADDR`, `PROGRAM`, `HOMEHOST`, `CREATE`,
//! `POLICY`, other `ARRAY` tags) is read past, as it says nothing about where members are.
//!
//! Kept to this one file, with a small surface ([`parse`], [`ArrayLine`], [`candidates`]), so
//! that a fuller reader of the format can take its place.

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

/// What the file says about arrays and devices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// The `DEVICE` words, in order: glob patterns, `partitions` or `containers`.
    pub devices: Vec<String>,
    pub arrays: Vec<ArrayLine>,
}

/// One `ARRAY` line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayLine {
    /// The device name (`/dev/md/data`, `/dev/md0`), or `None` for `<ignore>`.
    pub device: Option<String>,
    /// `UUID=`, as written (mdadm's forms: colons, dashes or none).
    pub uuid: Option<String>,
    /// `name=`, md's array name (`host:name` or `name`).
    pub name: Option<String>,
    /// `devices=`: the only devices (glob patterns) to look at for this array.
    pub devices: Vec<String>,
    /// The line number, for messages.
    pub line: usize,
}

impl ArrayLine {
    /// The name mdadm would give the array's device: `/dev/md/data` → `data`, `/dev/md0` →
    /// `md0`.
    pub fn device_name(&self) -> Option<&str> {
        let device = self.device.as_deref()?;
        let name = device.strip_prefix("/dev/md/").unwrap_or_else(|| device.rsplit('/').next().unwrap_or(device));
        (!name.is_empty()).then_some(name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfError {
    #[error("line {line}: ARRAY names no device")]
    ArrayWithoutDevice { line: usize },
    #[error("line {line}: ARRAY {device} has neither UUID= nor name= nor devices= to find its members by")]
    ArrayWithoutIdentity { line: usize, device: String },
}

/// Read mdadm.conf text. As mdadm: `#` starts a comment, a line starting with white space
/// continues the one before, keywords may be shortened to three letters and are not case
/// sensitive, and tags' names are not case sensitive.
pub fn parse(text: &str) -> Result<Config, ConfError> {
    let mut config = Config::default();
    for (line, words) in logical_lines(text) {
        let Some((keyword, rest)) = words.split_first() else { continue };
        let keyword = keyword.to_ascii_lowercase();
        if keyword.len() >= 3 && "device".starts_with(&keyword) {
            config.devices.extend(rest.iter().cloned());
        } else if keyword.len() >= 3 && "array".starts_with(&keyword) {
            config.arrays.push(array_line(line, rest)?);
        }
    }
    Ok(config)
}

fn array_line(line: usize, words: &[String]) -> Result<ArrayLine, ConfError> {
    let mut array = ArrayLine { line, ..ArrayLine::default() };
    for word in words {
        match word.split_once('=') {
            Some((tag, value)) => match tag.to_ascii_lowercase().as_str() {
                "uuid" => array.uuid = Some(value.to_string()),
                "name" => array.name = Some(value.to_string()),
                "devices" => array.devices.extend(value.split(',').filter(|d| !d.is_empty()).map(str::to_string)),
                _ => {}
            },
            None if array.device.is_none() && !word.starts_with('<') => array.device = Some(word.clone()),
            None if word == "<ignore>" => array.device = Some(word.clone()),
            None => {}
        }
    }
    match array.device.as_deref() {
        None => return Err(ConfError::ArrayWithoutDevice { line }),
        Some("<ignore>") => array.device = None,
        Some(_) => {}
    }
    if array.uuid.is_none() && array.name.is_none() && array.devices.is_empty() {
        let device = array.device.clone().unwrap_or_default();
        return Err(ConfError::ArrayWithoutIdentity { line, device });
    }
    Ok(array)
}

/// The file's lines with comments cut and continuations joined, as (first line number, words).
fn logical_lines(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut out: Vec<(usize, Vec<String>)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("");
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        let continues = line.starts_with([' ', '\t']);
        match out.last_mut() {
            Some((_, last)) if continues => last.extend(words),
            _ if words.is_empty() => {}
            _ => out.push((i + 1, words)),
        }
    }
    out
}

/// The devices to look for `array`'s members among: its `devices=` when it has them, else the
/// `DEVICE` lines' (mdadm's default, `partitions`, when there are none). Patterns are expanded
/// as glob(3) expands them; `containers` names none here.
pub fn candidates(config: &Config, array: &ArrayLine) -> Vec<PathBuf> {
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
    fn device_and_array_lines_are_read_with_continuations_and_comments() {
        let c = parse(CONF).unwrap();
        assert_eq!(c.devices, ["/srv/images/*.img", "/dev/sd[bc]1", "partitions"]);
        assert_eq!(c.arrays.len(), 3);
        let data = &c.arrays[0];
        assert_eq!(data.device.as_deref(), Some("/dev/md/data"));
        assert_eq!(data.uuid.as_deref(), Some("0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9"));
        assert_eq!(data.name.as_deref(), Some("host:data"), "the continuation line was lost");
        assert_eq!((data.line, data.device_name()), (5, Some("data")));
        let md0 = &c.arrays[1];
        assert_eq!(md0.devices, ["/dev/sdd1", "/dev/sde1"]);
        assert_eq!(md0.device_name(), Some("md0"));
        assert_eq!(c.arrays[2].device, None);
    }

    #[test]
    fn arrays_that_cannot_be_found_are_errors() {
        assert_eq!(parse("ARRAY UUID=1:2:3:4\n"), Err(ConfError::ArrayWithoutDevice { line: 1 }));
        let e = parse("\nARRAY /dev/md/x metadata=1.2\n").unwrap_err();
        assert_eq!(e, ConfError::ArrayWithoutIdentity { line: 2, device: "/dev/md/x".into() });
        assert!(e.to_string().starts_with("line 2: "), "{e}");
    }

    #[test]
    fn candidates_are_the_arrays_devices_else_the_device_lines() {
        let tmp = tempfile::tempdir().unwrap();
        for f in ["a.img", "b.img", "c.raw"] {
            std::fs::write(tmp.path().join(f), "").unwrap();
        }
        let dir = tmp.path().display();
        let c = parse(&format!(
            "DEVICE {dir}/*.img {dir}/none-*\nARRAY /dev/md/x UUID=1\nARRAY /dev/md/y devices={dir}/c.raw\n"
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
