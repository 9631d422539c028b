//! raidctl's configuration file, read as `rf_MakeConfig` (`sbin/raidctl/rf_configure.c`)
//! reads it and printed as `raidctl -G` prints it.
//!
//! ```text
//! START array
//! # numRow numCol numSpare
//! 1 3 0
//!
//! START disks
//! /dev/wd0e
//! absent
//! /dev/wd2e
//!
//! START layout
//! # sectPerSU SUsPerParityUnit SUsPerReconUnit RAID_level_5
//! 32 1 1 5
//!
//! START queue
//! fifo 100
//! ```
//!
//! How raidctl reads it, and so how [`RaidConfig::parse`] does:
//! - Each section is found by scanning the whole file from the top for the first line whose
//!   first word (after spaces and tabs) begins with `START` and whose second word begins
//!   with the section's name, so sections may come in any order.
//! - Inside a section, lines that are empty, white, or whose first non-white character is
//!   `#` are skipped. Comments are whole lines only, but the number lines are read with
//!   `sscanf`, which ignores whatever follows the numbers.
//! - `array` (required): `numRow numCol numSpare`, three integers. The two-number form of
//!   newer raidctl versions is refused by the driver this crate was checked against.
//! - `disks` (required): `numRow × numCol` device lines in column order. A device named
//!   `absent` (or one that cannot be opened) makes that column failed.
//! - `spare` (optional): `numSpare` device lines; without the section there are no spares.
//! - `layout` (required): `sectPerSU SUsPerPU SUsPerRU level`; the level is one character.
//!   Only RAID 0, 1, 4 and 5 are read here: declustered levels read further lines and
//!   files, which this crate does not model.
//! - `queue` (optional): `type maxOutstanding`; missing or unreadable gives `fifo 1`.
//! - `debug` (optional): `name value` lines up to the next `START` line.
//!
//! Device lines are taken whole, without leading and trailing spaces and tabs: with raidctl,
//! `/dev/wd0e # note` names a device `/dev/wd0e # note`, and a file with CRLF line ends names
//! devices ending in a carriage return (both fail to open, as the driver showed).

use thiserror::Error;

use crate::mapping::Level;

/// Rows accepted: NetBSD supports single-row sets only.
pub const MAX_ROWS: i32 = 1;
/// Largest number of columns RAIDframe accepts (`RF_MAXCOL`).
pub const MAX_COLUMNS: i32 = 40;
/// Largest number of hot spares RAIDframe accepts (`RF_MAXSPARE`).
pub const MAX_SPARES: i32 = 10;
/// Largest number of debug lines raidctl reads (`RF_MAXDBGV`).
pub const MAX_DEBUG_LINES: usize = 75;
/// The device name that marks a missing component.
pub const ABSENT: &str = "absent";

/// A configuration file raidctl would refuse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigFileError {
    /// A required `START name` line is missing.
    #[error("no \"START {section}\" line")]
    MissingSection {
        /// The section's name.
        section: &'static str,
    },
    /// The section ends (end of file) before the line it needs.
    #[error("\"{section}\" section: end of file where {what} was expected")]
    MissingLine {
        /// The section's name.
        section: &'static str,
        /// What was expected.
        what: String,
    },
    /// A line does not scan as the section requires.
    #[error("line {line}: {section} section: {problem} in {text:?}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// The section's name.
        section: &'static str,
        /// What went wrong.
        problem: &'static str,
        /// The line, without its newline.
        text: String,
    },
    /// A number outside what RAIDframe accepts.
    #[error("line {line}: {field} is {value}, must be in {min}..={max}")]
    OutOfRange {
        /// 1-based line number.
        line: usize,
        /// The field's name.
        field: &'static str,
        /// The value read.
        value: i64,
        /// Smallest accepted.
        min: i64,
        /// Largest accepted.
        max: i64,
    },
    /// A level character other than 0, 1, 4 or 5.
    #[error("line {line}: RAID level {level:?} is not one of 0, 1, 4, 5")]
    UnsupportedLevel {
        /// 1-based line number.
        line: usize,
        /// The character read.
        level: char,
    },
}

/// The `layout` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LayoutLine {
    /// Sectors per stripe unit.
    pub sect_per_su: i32,
    /// Stripe units per parity unit.
    pub sus_per_pu: i32,
    /// Stripe units per reconstruction unit.
    pub sus_per_ru: i32,
    /// The RAID level.
    pub level: Level,
}

/// The `queue` line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueLine {
    /// Queue discipline (`fifo`, `cvscan`, `sstf`, `scan`, `cscan`); raidctl keeps the word.
    pub queue_type: String,
    /// Requests outstanding per component (the label's `maxOutstanding`).
    pub max_outstanding: i32,
}

impl Default for QueueLine {
    /// What raidctl uses without a readable `queue` section: `fifo 1`.
    fn default() -> Self {
        QueueLine { queue_type: "fifo".to_string(), max_outstanding: 1 }
    }
}

/// A parsed configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RaidConfig {
    /// `numRow`: 1 for every set NetBSD still supports.
    pub num_rows: i32,
    /// `numCol`.
    pub num_columns: i32,
    /// Device of each column, in order; [`ABSENT`] for a missing one.
    pub disks: Vec<String>,
    /// Hot spare devices (`numSpare` of them).
    pub spares: Vec<String>,
    /// The layout line.
    pub layout: LayoutLine,
    /// The queue line (or raidctl's default).
    pub queue: QueueLine,
    /// Lines of the `debug` section, as written after leading white space.
    pub debug: Vec<String>,
}

/// One line of the file: its 1-based number and its text without the newline.
struct Lines<'a> {
    lines: Vec<&'a str>,
}

fn is_white(c: char) -> bool {
    c == ' ' || c == '\t'
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        let mut lines: Vec<&str> = text.split('\n').collect();
        if text.ends_with('\n') {
            lines.pop();
        }
        Lines { lines }
    }

    /// Index of the line after the first `START <name...>` line.
    fn find_section(&self, name: &str) -> Option<usize> {
        self.lines
            .iter()
            .position(|line| {
                let p = line.trim_start_matches(is_white);
                let Some(rest) = p.strip_prefix("START") else { return false };
                let rest = rest.trim_start_matches(|c: char| !is_white(c));
                rest.trim_start_matches(is_white).starts_with(name)
            })
            .map(|i| i + 1)
    }

    /// The next interesting line at or after `from`: (index, text).
    fn next_nonblank(&self, from: usize) -> Option<(usize, &'a str)> {
        (from..self.lines.len()).map(|i| (i, self.lines[i])).find(|(_, line)| {
            let p = line.trim_start_matches(is_white);
            !(p.is_empty() || p.starts_with('#'))
        })
    }
}

/// A device line as raidctl takes it: without leading and trailing spaces and tabs. Anything
/// else stays, a carriage return or words after the name included.
fn device_name(line: &str) -> String {
    line.trim_matches(is_white).to_string()
}

/// `sscanf`'s `%d`: skips white space, reads an optional sign and digits.
fn scan_int(s: &str) -> Option<(i64, &str)> {
    let s = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let digits_from = usize::from(s.starts_with(['+', '-']));
    let digits = s[digits_from..].bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let end = digits_from + digits;
    let value: i64 = s[..end].parse().ok()?;
    Some((value, &s[end..]))
}

/// Scans `count` integers from the start of `line`.
fn scan_ints(line: &str, count: usize) -> Option<(Vec<i64>, &str)> {
    let mut rest = line;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let (value, after) = scan_int(rest)?;
        out.push(value);
        rest = after;
    }
    Some((out, rest))
}

fn in_range(line: usize, field: &'static str, value: i64, min: i64, max: i64) -> Result<i32, ConfigFileError> {
    if value < min || value > max {
        return Err(ConfigFileError::OutOfRange { line, field, value, min, max });
    }
    Ok(value as i32)
}

impl RaidConfig {
    /// Reads a configuration file as raidctl does.
    pub fn parse(text: &str) -> Result<Self, ConfigFileError> {
        let lines = Lines::new(text);

        // array
        let start = lines.find_section("array").ok_or(ConfigFileError::MissingSection { section: "array" })?;
        let (idx, line) = lines.next_nonblank(start).ok_or_else(|| ConfigFileError::MissingLine {
            section: "array",
            what: "numRow numCol numSpare".to_string(),
        })?;
        let (numbers, _) = scan_ints(line, 3).ok_or_else(|| ConfigFileError::BadLine {
            line: idx + 1,
            section: "array",
            problem: "expected three integers numRow numCol numSpare",
            text: line.to_string(),
        })?;
        let num_rows = in_range(idx + 1, "numRow", numbers[0], 1, i64::from(MAX_ROWS))?;
        let num_columns = in_range(idx + 1, "numCol", numbers[1], 1, i64::from(MAX_COLUMNS))?;
        let mut num_spares = in_range(idx + 1, "numSpare", numbers[2], 0, i64::from(MAX_SPARES))?;

        // debug (optional): up to the next START line.
        let mut debug = Vec::new();
        if let Some(mut at) = lines.find_section("debug") {
            while debug.len() < MAX_DEBUG_LINES {
                let Some((idx, line)) = lines.next_nonblank(at) else { break };
                let p = line.trim_start_matches(is_white);
                if p.starts_with("START") {
                    break;
                }
                debug.push(p.to_string());
                at = idx + 1;
            }
        }

        // queue (optional)
        let mut queue = QueueLine::default();
        if let Some(start) = lines.find_section("queue") {
            if let Some((_, line)) = lines.next_nonblank(start) {
                let line = line.trim_start_matches(|c: char| c.is_ascii_whitespace());
                let word_end = line.find(|c: char| c.is_ascii_whitespace()).unwrap_or(line.len());
                let (word, rest) = line.split_at(word_end);
                if let Some(value) = scan_int(rest).and_then(|(v, _)| i32::try_from(v).ok()) {
                    queue = QueueLine { queue_type: word.to_string(), max_outstanding: value };
                }
            }
        }

        // disks
        let start = lines.find_section("disks").ok_or(ConfigFileError::MissingSection { section: "disks" })?;
        let mut disks = Vec::new();
        let mut at = start;
        for column in 0..num_rows * num_columns {
            let (idx, line) = lines.next_nonblank(at).ok_or_else(|| ConfigFileError::MissingLine {
                section: "disks",
                what: format!("the device of column {column}"),
            })?;
            disks.push(device_name(line));
            at = idx + 1;
        }

        // spare (optional; without it there are no spares)
        let mut spares = Vec::new();
        match lines.find_section("spare") {
            None => num_spares = 0,
            Some(start) => {
                let mut at = start;
                for spare in 0..num_spares {
                    let (idx, line) = lines.next_nonblank(at).ok_or_else(|| ConfigFileError::MissingLine {
                        section: "spare",
                        what: format!("the device of spare {spare}"),
                    })?;
                    spares.push(device_name(line));
                    at = idx + 1;
                }
            }
        }
        debug_assert_eq!(spares.len(), num_spares as usize);

        // layout
        let start = lines.find_section("layout").ok_or(ConfigFileError::MissingSection { section: "layout" })?;
        let (idx, line) = lines.next_nonblank(start).ok_or_else(|| ConfigFileError::MissingLine {
            section: "layout",
            what: "sectPerSU SUsPerPU SUsPerRU level".to_string(),
        })?;
        let bad_layout = || ConfigFileError::BadLine {
            line: idx + 1,
            section: "layout",
            problem: "expected sectPerSU SUsPerPU SUsPerRU and a level character",
            text: line.to_string(),
        };
        let (numbers, rest) = scan_ints(line, 3).ok_or_else(bad_layout)?;
        let level_char =
            rest.trim_start_matches(|c: char| c.is_ascii_whitespace()).chars().next().ok_or_else(bad_layout)?;
        let level = Level::from_char(level_char)
            .ok_or(ConfigFileError::UnsupportedLevel { line: idx + 1, level: level_char })?;
        let layout = LayoutLine {
            sect_per_su: in_range(idx + 1, "sectPerSU", numbers[0], 1, i64::from(i32::MAX))?,
            sus_per_pu: in_range(idx + 1, "SUsPerPU", numbers[1], 1, i64::from(i32::MAX))?,
            sus_per_ru: in_range(idx + 1, "SUsPerRU", numbers[2], 1, i64::from(i32::MAX))?,
            level,
        };

        Ok(RaidConfig { num_rows, num_columns, disks, spares, layout, queue, debug })
    }

    /// Number of hot spares.
    pub fn num_spares(&self) -> usize {
        self.spares.len()
    }

    /// Columns whose device is [`ABSENT`].
    pub fn absent_columns(&self) -> impl Iterator<Item = usize> + '_ {
        self.disks.iter().enumerate().filter(|(_, d)| d.as_str() == ABSENT).map(|(i, _)| i)
    }

    /// The file in `raidctl -G`'s form. With `device` (such as `/dev/rraid0d`) the first
    /// line is raidctl's `# raidctl config file for <device>` comment and a blank line. A
    /// `debug` section, which raidctl never prints, follows the queue section if present.
    pub fn to_text(&self, device: Option<&str>) -> String {
        let mut out = String::new();
        if let Some(device) = device {
            out.push_str(&format!("# raidctl config file for {device}\n\n"));
        }
        out.push_str("START array\n# numRow numCol numSpare\n");
        out.push_str(&format!("{} {} {}\n\n", self.num_rows, self.num_columns, self.spares.len()));
        out.push_str("START disks\n");
        for disk in &self.disks {
            out.push_str(disk);
            out.push('\n');
        }
        out.push('\n');
        if !self.spares.is_empty() {
            out.push_str("START spare\n");
            for spare in &self.spares {
                out.push_str(spare);
                out.push('\n');
            }
            out.push('\n');
        }
        let l = &self.layout;
        let level = l.level.as_char();
        out.push_str(&format!("START layout\n# sectPerSU SUsPerParityUnit SUsPerReconUnit RAID_level_{level}\n"));
        out.push_str(&format!("{} {} {} {level}\n\n", l.sect_per_su, l.sus_per_pu, l.sus_per_ru));
        out.push_str(&format!("START queue\n{} {}\n", self.queue.queue_type, self.queue.max_outstanding));
        if !self.debug.is_empty() {
            out.push_str("\nSTART debug\n");
            for line in &self.debug {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIVEN: &str = "# a comment\n\
        START disks\n/dev/wd0e\n  absent  \n\n# mid comment\n\t/dev/wd2e\n\
        START layout\n32 1 1 5   # trailing words are ignored\n\
        START array\n  1 3 1\n\
        START spare\n/dev/wd3e\n\
        START debug\naccessDebug 1\nSTART queue\nfifo 100\n";

    #[test]
    fn reads_sections_in_any_order() {
        let config = RaidConfig::parse(GIVEN).unwrap();
        assert_eq!((config.num_rows, config.num_columns, config.num_spares()), (1, 3, 1));
        assert_eq!(config.disks, ["/dev/wd0e", "absent", "/dev/wd2e"]);
        assert_eq!(config.absent_columns().collect::<Vec<_>>(), vec![1]);
        assert_eq!(config.spares, ["/dev/wd3e"]);
        assert_eq!(config.layout, LayoutLine { sect_per_su: 32, sus_per_pu: 1, sus_per_ru: 1, level: Level::Raid5 });
        assert_eq!(config.queue, QueueLine { queue_type: "fifo".into(), max_outstanding: 100 });
        assert_eq!(config.debug, ["accessDebug 1"]);
        let printed = config.to_text(Some("/dev/rraid0d"));
        assert_eq!(RaidConfig::parse(&printed).unwrap(), config);
    }

    /// raidctl configured a set from exactly this file; `raidctl -G` then printed 1 3 0,
    /// /disk0../disk2, 16 1 1 5 and fifo 64.
    #[test]
    fn a_file_raidctl_accepted() {
        let text = "# top comment\n   START  layout   \n\n  # c\n\t16 1 1 5 trailing words\nSTART queue\n\
            fifo   64 more\n  START array\n# numRow numCol numSpare\n 1  3  0  # three\nSTART disks\n\n   \
            /disk0   \n# skip\n\t/disk1\n/disk2\n";
        let config = RaidConfig::parse(text).unwrap();
        assert_eq!(config.disks, ["/disk0", "/disk1", "/disk2"]);
        assert_eq!(config.layout, LayoutLine { sect_per_su: 16, sus_per_pu: 1, sus_per_ru: 1, level: Level::Raid5 });
        assert_eq!(config.queue, QueueLine { queue_type: "fifo".into(), max_outstanding: 64 });
        assert_eq!((config.num_rows, config.num_columns, config.num_spares()), (1, 3, 0));
    }

    /// raidctl failed to open these devices: the names are not trimmed the way one might expect.
    #[test]
    fn device_names_keep_words_and_carriage_returns() {
        let crlf = "START array\r\n1 3 0\r\nSTART disks\r\n/disk0\r\n/disk1\r\n/disk2\r\nSTART layout\r\n8 1 1 5\r\n";
        assert_eq!(RaidConfig::parse(crlf).unwrap().disks[0], "/disk0\r");
        let words = "START array\n1 1 0\nSTART disks\n/disk0 junk words\nSTART layout\n8 1 1 0\n";
        assert_eq!(RaidConfig::parse(words).unwrap().disks[0], "/disk0 junk words");
    }

    #[test]
    fn queue_defaults_and_missing_spare_section() {
        let text = "START array\n1 2 4\nSTART disks\na\nb\nSTART layout\n16 1 1 0\n";
        let config = RaidConfig::parse(text).unwrap();
        assert_eq!(config.queue, QueueLine::default());
        assert!(config.spares.is_empty());
        let text = "START array\n1 2 0\nSTART disks\na\nb\nSTART layout\n16 1 1 1\nSTART queue\nfifo\n";
        assert_eq!(RaidConfig::parse(text).unwrap().queue, QueueLine::default());
    }

    #[test]
    fn typed_errors() {
        use ConfigFileError::*;
        assert_eq!(RaidConfig::parse(""), Err(MissingSection { section: "array" }));
        let two = "START array\n3 0\nSTART disks\na\nb\nc\nSTART layout\n8 1 1 5\n";
        assert!(matches!(RaidConfig::parse(two), Err(BadLine { line: 2, section: "array", .. })));
        // Like raidctl, a short disks section takes the next line, whatever it is, as a device.
        let short = "START array\n1 3 0\nSTART disks\na\nb\nSTART layout\n8 1 1 5\n";
        assert_eq!(RaidConfig::parse(short).unwrap().disks[2], "START layout");
        let shorter = "START array\n1 3 0\nSTART disks\na\nb\n";
        assert!(matches!(RaidConfig::parse(shorter), Err(MissingLine { section: "disks", .. })));
        let level = "START array\n1 2 0\nSTART disks\na\nb\nSTART layout\n8 1 1 6\n";
        assert_eq!(RaidConfig::parse(level), Err(UnsupportedLevel { line: 7, level: '6' }));
        let rows = "START array\n1 99 0\n";
        assert!(matches!(RaidConfig::parse(rows), Err(OutOfRange { field: "numCol", value: 99, .. })));
        let no_level = "START array\n1 2 0\nSTART disks\na\nb\nSTART layout\n8 1 1\n";
        assert!(matches!(RaidConfig::parse(no_level), Err(BadLine { line: 7, .. })));
    }
}
