//! Splitting a configuration line into tokens and reading size tokens, by gvinum's rules
//! (`gv_tokenize` and `gv_sizespec` in `geom_vinum_share.c`).
//!
//! Tokens are separated by blanks; `#` at the start of a token starts a comment to the end
//! of the line. The kernel counts only space and tab as blanks; the `gvinum` command (which
//! reads create descriptions) uses `isspace`, so carriage returns and form feeds separate
//! tokens there too. A line holds at most 64 tokens (`GV_MAXARGS`).
//!
//! gvinum's tokenizer has quoting code, but after a closing quote it goes on looking for
//! another one and always ends in an error, so no quoted token ever reaches gvinum's parser;
//! here a quote at the start of a token is an error straight away.

use thiserror::Error;

/// Most tokens gvinum reads from one line (`GV_MAXARGS`).
pub const MAX_TOKENS_PER_LINE: usize = 64;

/// Which characters separate tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Blanks {
    /// The kernel's: space and tab (how the on-disk configuration is read).
    Kernel,
    /// The `gvinum` command's: every ASCII `isspace` character (create descriptions).
    Command,
}

impl Blanks {
    fn is_blank(self, c: char) -> bool {
        match self {
            Blanks::Kernel => c == ' ' || c == '\t',
            Blanks::Command => matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c'),
        }
    }
}

/// One token and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    /// The token's text.
    pub text: &'a str,
    /// 1-based byte column where it starts.
    pub column: usize,
}

/// Why a line cannot be split into tokens.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TokenizeError {
    /// A token starts with a quote, which gvinum never accepts.
    #[error("quoted token at column {column} (gvinum cannot read quoted tokens)")]
    Quoted { column: usize },
    /// More tokens than gvinum reads from one line.
    #[error("more than {MAX_TOKENS_PER_LINE} tokens on the line (token {count} at column {column})")]
    TooMany { count: usize, column: usize },
}

/// Split one line (without its newline) into tokens.
pub fn tokenize(line: &str, blanks: Blanks) -> Result<Vec<Token<'_>>, TokenizeError> {
    let mut tokens = Vec::new();
    let mut rest = line.char_indices().peekable();
    while let Some(&(start, c)) = rest.peek() {
        if blanks.is_blank(c) {
            rest.next();
            continue;
        }
        if c == '#' {
            break;
        }
        let column = start + 1;
        if c == '"' || c == '\'' {
            return Err(TokenizeError::Quoted { column });
        }
        if tokens.len() == MAX_TOKENS_PER_LINE {
            return Err(TokenizeError::TooMany { count: tokens.len() + 1, column });
        }
        let mut end = line.len();
        while let Some(&(at, c)) = rest.peek() {
            if blanks.is_blank(c) {
                end = at;
                break;
            }
            rest.next();
        }
        tokens.push(Token { text: &line[start..end], column });
    }
    Ok(tokens)
}

/// Why a size token cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SizeError {
    /// No digits where the number should be.
    #[error("no number")]
    NoNumber,
    /// A unit gvinum does not know (it knows b, s, k, m, g in either case).
    #[error("unknown unit")]
    UnknownUnit,
    /// Characters after the unit (gvinum ignores them; refused here).
    #[error("characters after the unit")]
    TrailingCharacters,
    /// Too large for a 64-bit byte count.
    #[error("too large")]
    TooLarge,
}

/// Read a size as gvinum does: an optional `-`, decimal digits, and an optional unit:
/// none = bytes, `b`/`s` = 512-byte sectors, `k` = KiB, `m` = MiB, `g` = GiB (either case).
///
/// gvinum reads anything it cannot make sense of as 0 and ignores what follows the unit;
/// both are errors here, so a corrupt size is never taken for a valid one.
pub fn parse_size(token: &str) -> Result<i64, SizeError> {
    let (negative, digits_and_unit) = match token.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, token),
    };
    let digits_end = digits_and_unit.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(digits_and_unit.len());
    if digits_end == 0 {
        return Err(SizeError::NoNumber);
    }
    let (digits, unit) = digits_and_unit.split_at(digits_end);
    let multiplier: i64 = match unit.as_bytes().first() {
        None => 1,
        Some(b'b' | b'B' | b's' | b'S') => 512,
        Some(b'k' | b'K') => 1 << 10,
        Some(b'm' | b'M') => 1 << 20,
        Some(b'g' | b'G') => 1 << 30,
        Some(_) => return Err(SizeError::UnknownUnit),
    };
    if unit.len() > 1 {
        return Err(SizeError::TrailingCharacters);
    }
    let number: i64 = digits.parse().map_err(|_| SizeError::TooLarge)?;
    let bytes = number.checked_mul(multiplier).ok_or(SizeError::TooLarge)?;
    Ok(if negative { -bytes } else { bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str, blanks: Blanks) -> Vec<&str> {
        tokenize(line, blanks).unwrap().into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn blanks_separate_and_hash_starts_a_comment() {
        assert_eq!(texts("  sd  name\tx # a comment", Blanks::Kernel), ["sd", "name", "x"]);
        assert_eq!(texts("volume a#b", Blanks::Kernel), ["volume", "a#b"]);
        assert_eq!(texts("# all comment", Blanks::Kernel), Vec::<&str>::new());
        assert_eq!(texts("", Blanks::Kernel), Vec::<&str>::new());
        let tokens = tokenize("  sd  name", Blanks::Kernel).unwrap();
        assert_eq!(tokens[1], Token { text: "name", column: 7 });
    }

    #[test]
    fn carriage_returns_separate_only_for_the_command() {
        assert_eq!(texts("volume v\r", Blanks::Kernel), ["volume", "v\r"]);
        assert_eq!(texts("volume v\r", Blanks::Command), ["volume", "v"]);
    }

    #[test]
    fn quotes_and_overlong_lines_are_errors() {
        assert_eq!(tokenize("volume \"a b\"", Blanks::Kernel), Err(TokenizeError::Quoted { column: 8 }));
        assert_eq!(tokenize("volume a'b", Blanks::Kernel).unwrap()[1].text, "a'b");
        let line = vec!["x"; 65].join(" ");
        assert_eq!(tokenize(&line, Blanks::Kernel), Err(TokenizeError::TooMany { count: 65, column: 129 }));
        assert_eq!(tokenize(&vec!["x"; 64].join(" "), Blanks::Kernel).unwrap().len(), 64);
    }

    #[test]
    fn sizes_take_gvinums_units() {
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("265s"), Ok(135_680));
        assert_eq!(parse_size("2B"), Ok(1024));
        assert_eq!(parse_size("493k"), Ok(504_832));
        assert_eq!(parse_size("3M"), Ok(3 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("-1"), Ok(-1));
        assert_eq!(parse_size("0s"), Ok(0));
    }

    #[test]
    fn what_gvinum_would_read_as_zero_is_an_error() {
        assert_eq!(parse_size(""), Err(SizeError::NoNumber));
        assert_eq!(parse_size("s"), Err(SizeError::NoNumber));
        assert_eq!(parse_size("-"), Err(SizeError::NoNumber));
        assert_eq!(parse_size("12x"), Err(SizeError::UnknownUnit));
        assert_eq!(parse_size("12sx"), Err(SizeError::TrailingCharacters));
        assert_eq!(parse_size("99999999999999999999"), Err(SizeError::TooLarge));
        assert_eq!(parse_size("9999999999999g"), Err(SizeError::TooLarge));
    }
}
