//! mdadm.conf's `DEVICE` and `ARRAY` lines (mdadm.conf(5); mdadm's `config.c`), as
//! `mdadm --examine --scan` and `mdadm --detail --scan` write them and `mdadm --assemble --scan`
//! reads them back.
//!
//! The syntax is mdadm's: a line that starts with a word is a new entry, whose first word is a
//! keyword (case ignored, at least three letters of it: `ARR`, `DEV`); lines that start with a
//! space or a tab continue it (blank and comment lines between them do not end it); `#` at the
//! start of a word comments out the rest of the line; `"` and `'` quote (spaces included, the
//! quotes dropped), and do not reach past the end of the line.
//!
//! Where mdadm prints a complaint and carries on (a repeated tag, a word it does not know, an
//! `ARRAY` line that identifies nothing), this parser refuses the text with an error naming the
//! line: a configuration that assembles arrays should mean one thing. Keywords other than
//! `DEVICE` and `ARRAY` (`MAILADDR`, `HOMEHOST`, `CREATE`, ...) are accepted and skipped, as
//! are the `ARRAY` tags uraid has no use for (`bitmap=`, `spare-group=`, `auto=`, `member=`,
//! `container=`).

use crate::uuid::parse_md;
use crate::MetadataVersion;

/// What a configuration says: the devices to look at and the arrays to assemble.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conf {
    /// The words of every `DEVICE` line, in order: device paths or globs, `partitions`,
    /// `containers`.
    pub devices: Vec<String>,
    pub arrays: Vec<ArrayLine>,
}

/// One `ARRAY` line: how to recognise the array's members, and what to call it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayLine {
    /// The line its `ARRAY` keyword is on (from 1).
    pub line: usize,
    /// The device name given (`/dev/md/NAME`, `/dev/mdN`, a bare name, `<ignore>`).
    pub devname: Option<String>,
    /// `UUID=`: the array UUID, in mdadm's display byte order.
    pub uuid: Option<[u8; 16]>,
    /// `name=`: the array name as stored (1.x `homehost:name`).
    pub name: Option<String>,
    /// `super-minor=`: the preferred minor a 0.90 superblock records.
    pub super_minor: Option<u32>,
    /// `metadata=`.
    pub metadata: Option<MetadataVersion>,
    /// `level=`, as md numbers levels (-1 linear, 0, 1, 4, 5, 6, 10; -4 multipath, -5 faulty,
    /// -100 container).
    pub level: Option<i32>,
    /// `num-devices=` (or the older `disks=`): raid devices.
    pub num_devices: Option<u32>,
    /// `spares=`: spares expected (0 when not given).
    pub spares: u32,
    /// `devices=`: the member devices, comma separated in the file.
    pub devices: Vec<String>,
}

/// Why a configuration text is refused; each names the line (from 1) it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfError {
    #[error("line {line}: unknown keyword {word:?} (expected DEVICE, ARRAY, MAILADDR, HOMEHOST, ...)")]
    UnknownKeyword { line: usize, word: String },
    #[error("line {line}: quote not closed before the end of the line")]
    UnclosedQuote { line: usize },
    #[error("line {line}: {word:?} on a DEVICE line is neither a path nor 'partitions' or 'containers'")]
    BadDevice { line: usize, word: String },
    #[error("line {line}: {word:?} is not a name for an md device (/dev/md/NAME, /dev/mdN, /dev/md_dN, a bare name or <ignore>)")]
    BadDeviceName { line: usize, word: String },
    #[error("line {line}: only one device per ARRAY line: {first} and {second}")]
    TwoDeviceNames { line: usize, first: String, second: String },
    #[error("line {line}: {tag} given twice on one ARRAY line")]
    Repeated { line: usize, tag: &'static str },
    #[error("line {line}: bad UUID {value:?} (expected 32 hex digits, e.g. 6d646f72:61636c65:00000000:00000036)")]
    BadUuid { line: usize, value: String },
    #[error("line {line}: {tag}={value:?} is not a number")]
    BadNumber { line: usize, tag: &'static str, value: String },
    #[error("line {line}: unknown raid level {value:?}")]
    UnknownLevel { line: usize, value: String },
    #[error("line {line}: metadata={value:?} is not one uraid knows (0.90, 1.0, 1.1, 1.2)")]
    UnknownMetadata { line: usize, value: String },
    #[error("line {line}: name={value:?} is longer than md's 32 bytes")]
    NameTooLong { line: usize, value: String },
    #[error("line {line}: unrecognised word on ARRAY line: {word:?}")]
    UnknownArrayWord { line: usize, word: String },
    #[error("line {line}: ARRAY line has no identity (UUID=, name=, super-minor= or devices=)")]
    NoIdentity { line: usize },
}

/// mdadm's keywords, in the order mdadm matches abbreviations against them.
const KEYWORDS: [&str; 13] = [
    "devices",
    "array",
    "mailaddr",
    "mailfrom",
    "program",
    "create",
    "homehost",
    "homecluster",
    "auto",
    "policy",
    "part-policy",
    "sysfs",
    "monitordelay",
];

/// One word of the text and the line it is on.
#[derive(Debug)]
struct Word {
    text: String,
    line: usize,
}

/// Parse a configuration text (see the module documentation).
pub fn parse(text: &str) -> Result<Conf, ConfError> {
    let mut conf = Conf::default();
    for entry in entries(text)? {
        let keyword = &entry[0];
        match keyword_of(&keyword.text) {
            Some("devices") => {
                for w in &entry[1..] {
                    let lower = w.text.to_ascii_lowercase();
                    if !(w.text.starts_with('/') || lower == "partitions" || lower == "containers") {
                        return Err(ConfError::BadDevice { line: w.line, word: w.text.clone() });
                    }
                    conf.devices.push(w.text.clone());
                }
            }
            Some("array") => conf.arrays.push(array_line(keyword.line, &entry[1..])?),
            Some(_) => {}
            None => return Err(ConfError::UnknownKeyword { line: keyword.line, word: keyword.text.clone() }),
        }
    }
    Ok(conf)
}

/// The keyword `word` abbreviates: at least three letters, case ignored, the first match.
fn keyword_of(word: &str) -> Option<&'static str> {
    if word.len() < 3 {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    KEYWORDS.into_iter().find(|k| k.starts_with(lower.as_str()))
}

/// The text's entries, each a keyword word followed by the words of its continuation lines.
fn entries(text: &str) -> Result<Vec<Vec<Word>>, ConfError> {
    let mut out: Vec<Vec<Word>> = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = i + 1;
        let words = split_words(raw.strip_suffix('\r').unwrap_or(raw), line)?;
        if words.is_empty() {
            continue;
        }
        let continues = raw.starts_with(' ') || raw.starts_with('\t');
        match out.last_mut() {
            Some(entry) if continues => entry.extend(words),
            // Words before any keyword line have nothing to continue: the first of them is
            // taken as a keyword (and refused unless it is one), as mdadm reads them.
            _ => out.push(words),
        }
    }
    Ok(out)
}

/// The words of one line: split at spaces and tabs, `#` at a word's start ending the line,
/// quotes kept together and dropped.
fn split_words(raw: &str, line: usize) -> Result<Vec<Word>, ConfError> {
    let mut words = Vec::new();
    let mut chars = raw.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        match chars.peek() {
            None | Some('#') => break,
            Some(_) => {}
        }
        let mut word = String::new();
        let mut quote: Option<char> = None;
        while let Some(&c) = chars.peek() {
            if quote.is_none() && (c == ' ' || c == '\t') {
                break;
            }
            chars.next();
            match quote {
                Some(q) if c == q => quote = None,
                None if c == '"' || c == '\'' => quote = Some(c),
                _ => word.push(c),
            }
        }
        if quote.is_some() {
            return Err(ConfError::UnclosedQuote { line });
        }
        words.push(Word { text: word, line });
    }
    Ok(words)
}

/// `word` as a configuration reads it back as one word: unchanged when it holds no space, tab
/// or quote; else quoted with `"` (or `'` when its first quote is a `"`), switching to the other
/// quote around any character equal to the one in use (mdadm's `print_quoted`).
pub fn quote(word: &str) -> String {
    let first =
        word.chars().find(|c| matches!(c, '"' | '\'')).or_else(|| word.chars().find(|c| matches!(c, ' ' | '\t')));
    let Some(first) = first else { return word.to_string() };
    let mut q = if first == '"' { '\'' } else { '"' };
    let mut out = String::with_capacity(word.len() + 2);
    out.push(q);
    for c in word.chars() {
        if c == q {
            out.push(q);
            q = if q == '"' { '\'' } else { '"' };
            out.push(q);
        }
        out.push(c);
    }
    out.push(q);
    out
}

/// md's level numbers by the names mdadm takes for them (mdadm's `pers` table).
fn level_number(name: &str) -> Option<i32> {
    Some(match name.to_ascii_lowercase().as_str() {
        "linear" | "-1" => -1,
        "raid0" | "0" | "stripe" => 0,
        "raid1" | "1" | "mirror" => 1,
        "raid4" | "4" => 4,
        "raid5" | "5" => 5,
        "raid6" | "6" => 6,
        "raid10" | "10" => 10,
        "multipath" | "mp" => -4,
        "faulty" => -5,
        "container" => -100,
        _ => return None,
    })
}

/// Whether mdadm takes `w` as the device name of an array.
fn is_md_device_name(w: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    w.eq_ignore_ascii_case("<ignore>")
        || w.starts_with("/dev/md/")
        || !(w.starts_with('/') || w.starts_with('<'))
        || w.strip_prefix("/dev/md_d").is_some_and(digits)
        || w.strip_prefix("/dev/md").is_some_and(digits)
}

fn array_line(line: usize, words: &[Word]) -> Result<ArrayLine, ConfError> {
    let mut a = ArrayLine { line, ..ArrayLine::default() };
    let mut seen_devices = false;
    let mut seen_spares = false;
    let number = |w: &Word, tag: &'static str, value: &str| {
        value.parse::<u32>().map_err(|_| ConfError::BadNumber { line: w.line, tag, value: value.to_string() })
    };
    for w in words {
        let text = w.text.as_str();
        let Some((tag, value)) = text.split_once('=').filter(|_| !text.starts_with('/')) else {
            if !is_md_device_name(text) {
                return Err(ConfError::BadDeviceName { line: w.line, word: text.to_string() });
            }
            if let Some(first) = &a.devname {
                return Err(ConfError::TwoDeviceNames { line: w.line, first: first.clone(), second: text.to_string() });
            }
            a.devname = Some(text.to_string());
            continue;
        };
        let repeated = |tag: &'static str| ConfError::Repeated { line: w.line, tag };
        match tag.to_ascii_lowercase().as_str() {
            "uuid" => {
                if a.uuid.is_some() {
                    return Err(repeated("UUID"));
                }
                let uuid =
                    parse_md(value).map_err(|_| ConfError::BadUuid { line: w.line, value: value.to_string() })?;
                a.uuid = Some(uuid);
            }
            "name" => {
                if a.name.is_some() {
                    return Err(repeated("name"));
                }
                if value.len() > 32 {
                    return Err(ConfError::NameTooLong { line: w.line, value: value.to_string() });
                }
                a.name = Some(value.to_string());
            }
            "super-minor" => {
                if a.super_minor.is_some() {
                    return Err(repeated("super-minor"));
                }
                a.super_minor = Some(number(w, "super-minor", value)?);
            }
            "devices" => {
                if seen_devices {
                    return Err(repeated("devices"));
                }
                seen_devices = true;
                a.devices = value.split(',').filter(|d| !d.is_empty()).map(str::to_string).collect();
            }
            "level" => {
                if a.level.is_some() {
                    return Err(repeated("level"));
                }
                let level = level_number(value)
                    .ok_or_else(|| ConfError::UnknownLevel { line: w.line, value: value.to_string() })?;
                a.level = Some(level);
            }
            t @ ("num-devices" | "disks") => {
                if a.num_devices.is_some() {
                    return Err(repeated("num-devices"));
                }
                let tag = if t == "disks" { "disks" } else { "num-devices" };
                a.num_devices = Some(number(w, tag, value)?);
            }
            "spares" => {
                if seen_spares {
                    return Err(repeated("spares"));
                }
                seen_spares = true;
                a.spares = number(w, "spares", value)?;
            }
            "metadata" => {
                if a.metadata.is_some() {
                    return Err(repeated("metadata"));
                }
                // "default" chooses a version for new arrays; a line names the one it has.
                let version = MetadataVersion::parse(value)
                    .ok()
                    .filter(|_| !value.trim().eq_ignore_ascii_case("default"))
                    .ok_or_else(|| ConfError::UnknownMetadata { line: w.line, value: value.to_string() })?;
                a.metadata = Some(version);
            }
            // mdadm's tags for what uraid does not do: bitmap files, spare groups for
            // mdadm --monitor, device node creation, container members.
            "bitmap" | "spare-group" | "auto" | "member" | "container" => {}
            _ => return Err(ConfError::UnknownArrayWord { line: w.line, word: text.to_string() }),
        }
    }
    if a.uuid.is_none() && a.name.is_none() && a.super_minor.is_none() && a.devices.is_empty() {
        return Err(ConfError::NoIdentity { line });
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uuid::format_md;

    const UUID: &str = "6d646f72:61636c65:00000000:00000036";

    fn one(text: &str) -> ArrayLine {
        let conf = parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(conf.arrays.len(), 1, "{text:?}");
        conf.arrays.into_iter().next().unwrap()
    }

    #[test]
    fn mdadm_scan_lines_read_back() {
        // mdadm --examine --scan (two spaces after the name), then --detail --scan -v.
        let a = one(&format!("ARRAY /dev/md/data  metadata=1.2 UUID={UUID} name=vm:data\n"));
        assert_eq!(a.devname.as_deref(), Some("/dev/md/data"));
        assert_eq!(a.metadata, Some(MetadataVersion::V1_2));
        assert_eq!(format_md(&a.uuid.unwrap()), UUID);
        assert_eq!(a.name.as_deref(), Some("vm:data"));
        assert_eq!(a.line, 1);
        let text = format!(
            "ARRAY /dev/md/data level=raid5 num-devices=4 metadata=1.2 spares=1 name=vm:data UUID={UUID}\n   devices=/dev/sda1,/dev/sdb1\n"
        );
        let a = one(&text);
        assert_eq!((a.level, a.num_devices, a.spares), (Some(5), Some(4), 1));
        assert_eq!(a.devices, ["/dev/sda1", "/dev/sdb1"]);
        let a = one(&format!("ARRAY /dev/md0 UUID={UUID}\n   spares=2   devices=/a,/b\n"));
        assert_eq!((a.devname.as_deref(), a.spares, a.devices.len()), (Some("/dev/md0"), 2, 2));
        // An examine line of a nameless 1.x array has no device name.
        let a = one(&format!("ARRAY  metadata=1.0 UUID={UUID}"));
        assert_eq!((a.devname, a.metadata), (None, Some(MetadataVersion::V1_0)));
    }

    #[test]
    fn a_whole_file() {
        let text = format!(
            "# mdadm.conf\nDEVICE /dev/sd* partitions\n\nHOMEHOST <system>\nMAILADDR root\n\
             arr /dev/md/a uuid={UUID}   # trailing comment\n\
             ARRAY /dev/md/b\n# a comment between\n\n\tname=\"my host:b c\" metadata=0.90\n\
             DEV containers\r\nARRAY <ignore> devices=/x\n"
        );
        let conf = parse(&text).unwrap();
        assert_eq!(conf.devices, ["/dev/sd*", "partitions", "containers"]);
        assert_eq!(conf.arrays.len(), 3);
        assert_eq!((conf.arrays[0].line, conf.arrays[1].line, conf.arrays[2].line), (6, 7, 12));
        assert_eq!(conf.arrays[1].name.as_deref(), Some("my host:b c"));
        assert_eq!(conf.arrays[1].metadata, Some(MetadataVersion::V0_90));
        assert_eq!(conf.arrays[2].devname.as_deref(), Some("<ignore>"));
        assert!(parse("").unwrap().arrays.is_empty());
    }

    #[test]
    fn bad_lines_are_refused_naming_the_line() {
        let cases: &[(&str, &str)] = &[
            ("ARRAY /dev/md0 UUID=12345\n", "line 1: bad UUID"),
            ("\n\nAR /dev/md0\n", "line 3: unknown keyword \"AR\""),
            ("FROB x\n", "unknown keyword"),
            ("ARRAY /dev/md0 level=raid7 UUID=6d646f72:61636c65:00000000:00000036", "unknown raid level \"raid7\""),
            ("ARRAY /dev/md0 metadata=imsm UUID=6d646f72:61636c65:00000000:00000036", "metadata=\"imsm\""),
            ("ARRAY /dev/md0 metadata=default UUID=6d646f72:61636c65:00000000:00000036", "metadata=\"default\""),
            ("ARRAY /dev/md0\n  name=a name=b", "line 2: name given twice"),
            ("ARRAY /dev/md0 num-devices=four name=a", "num-devices=\"four\" is not a number"),
            ("ARRAY /dev/md0 /dev/md1 name=a", "only one device per ARRAY line"),
            ("ARRAY /dev/sda name=a", "\"/dev/sda\" is not a name for an md device"),
            ("ARRAY /dev/md0 frob=1 name=a", "unrecognised word on ARRAY line: \"frob=1\""),
            ("ARRAY /dev/md0 metadata=1.2\n", "line 1: ARRAY line has no identity"),
            ("ARRAY /dev/md0 name='unclosed\n", "line 1: quote not closed"),
            ("DEVICE sda\n", "\"sda\" on a DEVICE line"),
            ("ARRAY /dev/md0 name=0123456789012345678901234567890123", "longer than md's 32 bytes"),
        ];
        for (text, want) in cases {
            let e = parse(text).expect_err(text).to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn quoting_reads_back_as_one_word() {
        for name in ["plain", "two words", "tab\there", "it's", "say \"hi\"", "both ' and \" here", "'", "\""] {
            let text = format!("ARRAY name={}", quote(name));
            assert_eq!(one(&text).name.as_deref(), Some(name), "{text}");
        }
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("a b"), "\"a b\"");
        assert_eq!(quote("say \"hi\""), "'say \"hi\"'");
    }

    proptest::proptest! {
        /// Arbitrary text never panics: it parses or is refused with a line number within it.
        #[test]
        fn any_text_parses_or_is_refused(text in "(?s)[ -~\t\n\r\"'#=,:/<>a-zA-Z0-9\u{e9}]{0,300}") {
            if let Err(e) = parse(&text) {
                let msg = e.to_string();
                let line: usize = msg.strip_prefix("line ").and_then(|r| r.split(':').next()).and_then(|n| n.parse().ok())
                    .expect("every error names a line");
                proptest::prop_assert!(line >= 1 && line <= text.split('\n').count());
            }
        }

        /// Random bytes too (as text, lossily): no panic.
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let _ = parse(&String::from_utf8_lossy(&bytes));
        }

        /// A line written from fields reads back as the same fields.
        #[test]
        fn written_lines_read_back(
            uuid in proptest::array::uniform16(proptest::num::u8::ANY),
            name in "[ -~]{0,32}",
            minor in proptest::option::of(0u32..256),
            level in proptest::sample::select(vec!["linear", "raid0", "raid1", "raid4", "raid5", "raid6", "raid10"]),
            devices in proptest::option::of(1u32..30),
            spares in 0u32..5,
            metadata in proptest::sample::select(vec!["0.90", "1.0", "1.1", "1.2"]),
            members in proptest::collection::vec("/dev/[a-z]{3}[0-9]", 0..4),
        ) {
            let mut text = format!("ARRAY /dev/md/x metadata={metadata} UUID={} name={}", format_md(&uuid), quote(&name));
            if let Some(m) = minor {
                text.push_str(&format!(" super-minor={m}"));
            }
            text.push_str(&format!("\n   level={level} spares={spares}"));
            if let Some(n) = devices {
                text.push_str(&format!(" num-devices={n}"));
            }
            if !members.is_empty() {
                text.push_str(&format!("\n\tdevices={}", members.join(",")));
            }
            let a = one(&text);
            proptest::prop_assert_eq!(a.uuid, Some(uuid));
            proptest::prop_assert_eq!(a.name.as_deref(), Some(name.as_str()));
            proptest::prop_assert_eq!(a.super_minor, minor);
            proptest::prop_assert_eq!(a.level, level_number(level));
            proptest::prop_assert_eq!(a.num_devices, devices);
            proptest::prop_assert_eq!(a.spares, spares);
            proptest::prop_assert_eq!(a.metadata, Some(MetadataVersion::parse(metadata).unwrap()));
            proptest::prop_assert_eq!(a.devices, members);
        }
    }
}
