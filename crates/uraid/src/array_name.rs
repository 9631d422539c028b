//! The names running arrays go by (`uraid assemble --name`, `uraid stop NAME`, `uraid ctl
//! NAME`): which names are accepted, and the name an array gets when none is given, as mdadm
//! names `/dev/md/NAME` after the array's own name.
//!
//! A name is a folder of the runtime directory and a word on the command line, so it is kept
//! to what needs no quoting and cannot be mistaken for a path or a flag.

use uraid_md_format::uuid::format_md;

/// md keeps at most 32 bytes of name in a 1.x superblock (`homehost:name` included).
pub const MAX_LEN: usize = 32;

/// `uraid stop all` stops every array, so no array may be called that.
pub const EVERY_ARRAY: &str = "all";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("an array name cannot be empty")]
    Empty,
    #[error("array name {0:?} is longer than {MAX_LEN} characters")]
    TooLong(String),
    #[error("array name {name:?} {why} (use letters, digits, '.', '_', '+' and '-')")]
    Invalid { name: String, why: &'static str },
    #[error("array name {EVERY_ARRAY:?} is reserved: `uraid stop {EVERY_ARRAY}` stops every array")]
    Reserved,
}

/// Accept `name` as an array name, or say why not.
pub fn check(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_LEN {
        return Err(NameError::TooLong(name.to_string()));
    }
    let invalid = |why| Err(NameError::Invalid { name: name.to_string(), why });
    if name.contains('/') {
        return invalid("contains '/'");
    }
    if name.starts_with('.') {
        return invalid("starts with '.'");
    }
    if name.starts_with('-') {
        return invalid("starts with '-'");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-')) {
        return invalid("contains a character other than letters, digits, '.', '_', '+' and '-'");
    }
    if name == EVERY_ARRAY {
        return Err(NameError::Reserved);
    }
    Ok(())
}

/// The name an array runs under when none is given: its md name without the `homehost:` part
/// (mdadm's `/dev/md/NAME`), or, when it has none that can serve as a name, the first eight
/// hex digits of its UUID.
pub fn default_name(md_name: &str, uuid: &[u8; 16]) -> String {
    let own = md_name.split_once(':').map_or(md_name, |(_, name)| name);
    if check(own).is_ok() {
        own.to_string()
    } else {
        uuid_prefix(uuid)
    }
}

/// The first group of the UUID as md prints it (`0a1b2c3d` of `0a1b2c3d:...`).
pub fn uuid_prefix(uuid: &[u8; 16]) -> String {
    format_md(uuid)[..8].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: [u8; 16] = [0x0a, 0x1b, 0x2c, 0x3d, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

    #[test]
    fn the_md_name_without_its_host_part_is_the_default() {
        assert_eq!(default_name("myhost:data", &UUID), "data");
        assert_eq!(default_name("data", &UUID), "data");
        assert_eq!(default_name("host:web-1.vol_a", &UUID), "web-1.vol_a");
    }

    #[test]
    fn without_a_usable_md_name_the_uuid_prefix_is_used() {
        assert_eq!(default_name("", &UUID), "0a1b2c3d");
        assert_eq!(default_name("myhost:", &UUID), "0a1b2c3d");
        assert_eq!(default_name("host:has space", &UUID), "0a1b2c3d");
        assert_eq!(default_name("host:all", &UUID), "0a1b2c3d");
        assert_eq!(default_name("host:.hidden", &UUID), "0a1b2c3d");
    }

    #[test]
    fn names_that_are_paths_flags_or_reserved_are_refused() {
        assert_eq!(check(""), Err(NameError::Empty));
        assert!(matches!(check("a/b"), Err(NameError::Invalid { why: "contains '/'", .. })));
        assert!(matches!(check(".."), Err(NameError::Invalid { .. })));
        assert!(matches!(check("-f"), Err(NameError::Invalid { .. })));
        assert!(matches!(check("tab\there"), Err(NameError::Invalid { .. })));
        assert_eq!(check("all"), Err(NameError::Reserved));
        assert_eq!(check(&"x".repeat(33)), Err(NameError::TooLong("x".repeat(33))));
        assert!(check(&"x".repeat(32)).is_ok());
        assert!(check("md0").is_ok() && check("Data_2.old+1").is_ok());
        assert!(check("a/b").unwrap_err().to_string().contains("'/'"));
    }
}
