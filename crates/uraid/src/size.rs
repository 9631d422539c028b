//! Size arguments as mdadm takes them: a number with an optional binary suffix K, M, G or T.
//!
//! mdadm reads a bare number for `--chunk` and `--size` as KiB; uraid's own byte offsets
//! (`--offset`, `--length`) read a bare number as bytes. The caller says which unit applies.

/// Parse `text` as a size; a bare number is in units of `bare_unit` bytes.
pub fn parse_size(text: &str, bare_unit: u64) -> Result<u64, String> {
    let t = text.trim();
    let (digits, mult) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (t, bare_unit),
        Some((i, _)) => {
            let suffix = t[i..].to_ascii_uppercase();
            let mult = match suffix.trim_end_matches("IB").trim_end_matches('B') {
                "" if suffix == "B" => 1,
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                "T" => 1 << 40,
                "S" => 512,
                _ => {
                    return Err(format!(
                        "'{text}': unknown size suffix '{}' (use K, M, G, T, s for sectors or B for bytes)",
                        &t[i..]
                    ))
                }
            };
            (&t[..i], mult)
        }
    };
    if digits.is_empty() {
        return Err(format!("'{text}' is not a size"));
    }
    let n: u64 = digits.parse().map_err(|_| format!("'{text}' is not a size"))?;
    n.checked_mul(mult).ok_or_else(|| format!("'{text}' is too large"))
}

/// Human form of a byte count as mdadm prints it: "9216 KiB (9.00 MiB 9.44 MB)".
pub fn mdadm_size(bytes: u64) -> String {
    let kib = bytes / 1024;
    if bytes < 1 << 20 {
        return format!("{kib} KiB");
    }
    let (bin, bin_unit) = if bytes >= 1 << 40 {
        (bytes as f64 / (1u64 << 40) as f64, "TiB")
    } else if bytes >= 1 << 30 {
        (bytes as f64 / (1u64 << 30) as f64, "GiB")
    } else {
        (bytes as f64 / (1u64 << 20) as f64, "MiB")
    };
    let (dec, dec_unit) = if bytes >= 1_000_000_000_000 {
        (bytes as f64 / 1e12, "TB")
    } else if bytes >= 1_000_000_000 {
        (bytes as f64 / 1e9, "GB")
    } else {
        (bytes as f64 / 1e6, "MB")
    };
    format!("{kib} KiB ({bin:.2} {bin_unit} {dec:.2} {dec_unit})")
}

/// mdadm's `human_size`: nothing under 5000 KiB, else ` (X.XX MiB Y.YY MB)` (GiB and GB from
/// 2 GiB), as `--examine` prints after a size in KiB.
pub fn mdadm_human_size(bytes: u64) -> String {
    if bytes < 5000 * 1024 {
        return String::new();
    }
    // Hundredths, rounded as mdadm rounds them.
    let (bin_unit, bin_div, dec_unit, dec_div) = if bytes < 2 << 30 {
        ("MiB", 1u128 << 20, "MB", 1_000_000u128)
    } else {
        ("GiB", 1u128 << 30, "GB", 1_000_000_000u128)
    };
    let b = u128::from(bytes);
    let bin = (b * 200 / bin_div).div_ceil(2);
    let dec = (b / (dec_div / 200)).div_ceil(2);
    format!(" ({}.{:02} {bin_unit} {}.{:02} {dec_unit})", bin / 100, bin % 100, dec / 100, dec % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_as_mdadm_prints_them() {
        assert_eq!(mdadm_human_size(3 << 20), "");
        assert_eq!(mdadm_human_size(6 << 20), " (6.00 MiB 6.29 MB)");
        assert_eq!(mdadm_human_size(3 << 30), " (3.00 GiB 3.22 GB)");
    }

    #[test]
    fn suffixes_and_bare_units() {
        assert_eq!(parse_size("64", 1024), Ok(64 * 1024));
        assert_eq!(parse_size("64K", 1024), Ok(64 * 1024));
        assert_eq!(parse_size("64k", 1), Ok(64 * 1024));
        assert_eq!(parse_size("4M", 1), Ok(4 << 20));
        assert_eq!(parse_size("1G", 1), Ok(1 << 30));
        assert_eq!(parse_size("2T", 1), Ok(2 << 40));
        assert_eq!(parse_size("512B", 1024), Ok(512));
        assert_eq!(parse_size("3MiB", 1), Ok(3 << 20));
        assert_eq!(parse_size("8s", 1), Ok(4096));
        assert_eq!(parse_size("100", 1), Ok(100));
        assert!(parse_size("12Q", 1).is_err());
        assert!(parse_size("K", 1).is_err());
        assert!(parse_size("", 1).is_err());
        assert!(parse_size("99999999999999999999", 1).is_err());
        assert!(parse_size("99999999999T", 1).is_err());
    }

    #[test]
    fn mdadm_style_sizes() {
        assert_eq!(mdadm_size(9437184), "9216 KiB (9.00 MiB 9.44 MB)");
        assert_eq!(mdadm_size(4032 * 1024), "4032 KiB (3.94 MiB 4.13 MB)");
    }
}
