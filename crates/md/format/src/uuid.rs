//! mdadm's textual form of array and device UUIDs: four groups of eight hex digits separated
//! by colons, bytes in order (`6d646f72:61636c65:00000000:00000036`).

use crate::FormatError;

/// Format as mdadm prints UUIDs (`--examine`, `--detail`, mdadm.conf).
pub fn format_md(u: &[u8; 16]) -> String {
    let mut s = String::with_capacity(35);
    for (i, b) in u.iter().enumerate() {
        if i > 0 && i % 4 == 0 {
            s.push(':');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Parse a UUID the way mdadm's `parse_uuid` does: exactly 32 hex digits, with any of
/// `:`, `.`, ` ` and `-` allowed between them (so the mdadm form and the usual
/// 8-4-4-4-12 form both work).
pub fn parse_md(s: &str) -> Result<[u8; 16], FormatError> {
    let mut out = [0u8; 16];
    let mut digits = 0usize;
    for c in s.trim().chars() {
        if let Some(v) = c.to_digit(16) {
            if digits >= 32 {
                return Err(FormatError::BadUuid(s.to_string()));
            }
            out[digits / 2] = (out[digits / 2] << 4) | v as u8;
            digits += 1;
        } else if !matches!(c, ':' | '.' | ' ' | '-') {
            return Err(FormatError::BadUuid(s.to_string()));
        }
    }
    if digits != 32 {
        return Err(FormatError::BadUuid(s.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let text = "6d646f72:61636c65:00000000:00000036";
        let u = parse_md(text).unwrap();
        assert_eq!(u[0], 0x6d);
        assert_eq!(u[15], 0x36);
        assert_eq!(format_md(&u), text);
        assert_eq!(parse_md("6d646f72-6163-6c65-0000-000000000036").unwrap(), u);
        assert!(parse_md("6d646f72:61636c65:00000000").is_err());
        assert!(parse_md("6d646f72:61636c65:00000000:0000003x").is_err());
    }
}
