//! Arithmetic in GF(2^8) exactly as Linux md's RAID-6 uses it.
//!
//! This module owns the field: the reduction polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d), the
//! generator {02}, the lookup tables derived from them, and whole-slice multiply-accumulate.
//! Any other polynomial (AES uses 0x11b) would give a Q that md cannot read, so the polynomial is
//! fixed here and nowhere else.
//!
//! The tables are built by `const fn` at compile time rather than lazily through a `OnceLock`:
//! they depend on nothing but the polynomial, so there is nothing to decide at run time, and a
//! plain `static` needs no initialisation check in the inner loops that index it.

/// The low eight bits of md's reduction polynomial 0x11d. The x^8 term is the bit shifted out
/// of a byte when it is doubled, so only these bits are XORed back in.
pub(crate) const REDUCTION: u8 = 0x1d;

/// The multiplicative group of GF(2^8) has this many elements; powers of the generator repeat
/// with this period.
const GROUP_ORDER: usize = 255;

/// Multiplies by the generator {02}: a left shift, reduced when bit 7 falls off.
pub(crate) const fn mul2(a: u8) -> u8 {
    let shifted = a << 1;
    if a & 0x80 != 0 {
        shifted ^ REDUCTION
    } else {
        shifted
    }
}

struct Tables {
    /// `exp[i]` = g^i for i in 0..255.
    exp: [u8; GROUP_ORDER],
    /// `log[a]` = i with g^i = a, for a != 0 (`log[0]` is unused).
    log: [u8; 256],
    /// `inv[a]` = a^-1 for a != 0 (`inv[0]` is unused).
    inv: [u8; 256],
    /// `mul[a][b]` = a * b. One row is a complete "multiply by a" lookup, which is what the slice
    /// loops want: one index per byte and no branch on zero.
    mul: [[u8; 256]; 256],
}

const fn build_tables() -> Tables {
    let mut exp = [0u8; GROUP_ORDER];
    let mut log = [0u8; 256];
    let mut power = 1u8;
    let mut i = 0;
    while i < GROUP_ORDER {
        exp[i] = power;
        log[power as usize] = i as u8;
        power = mul2(power);
        i += 1;
    }

    let mut inv = [0u8; 256];
    let mut mul = [[0u8; 256]; 256];
    let mut a = 1;
    while a < 256 {
        inv[a] = exp[(GROUP_ORDER - log[a] as usize) % GROUP_ORDER];
        let mut b = 1;
        while b < 256 {
            let sum = log[a] as usize + log[b] as usize;
            mul[a][b] = exp[sum % GROUP_ORDER];
            b += 1;
        }
        a += 1;
    }
    Tables { exp, log, inv, mul }
}

/// A `static` (not a `const`) so the 64 KiB multiplication table exists once in the binary
/// instead of being materialised at every use.
static TABLES: Tables = build_tables();

/// The product `a * b` in GF(2^8).
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    TABLES.mul[a as usize][b as usize]
}

/// g^power with g = {02}. Any power is accepted; powers repeat with period 255, so `exp(255)`
/// is 1.
#[inline]
pub fn exp(power: usize) -> u8 {
    TABLES.exp[power % GROUP_ORDER]
}

/// The discrete logarithm base {02}: the `i` in 0..255 with `exp(i) == a`, or `None` for 0,
/// which is no power of the generator.
#[inline]
pub fn log(a: u8) -> Option<u8> {
    (a != 0).then(|| TABLES.log[a as usize])
}

/// The multiplicative inverse of `a`. Panics for 0, which has none; a caller reaching that has
/// a logic error (for example two data slots whose generator powers coincide).
#[inline]
pub fn inv(a: u8) -> u8 {
    assert!(a != 0, "zero has no multiplicative inverse in GF(2^8)");
    TABLES.inv[a as usize]
}

/// The lookup table for "multiply by `c`": `mul_row(c)[x] == mul(c, x)`.
#[inline]
pub(crate) fn mul_row(c: u8) -> &'static [u8; 256] {
    &TABLES.mul[c as usize]
}

/// `dst[i] ^= mul(c, src[i])` for every byte. Both slices must have the same length.
pub fn mul_acc(dst: &mut [u8], src: &[u8], c: u8) {
    assert_eq!(dst.len(), src.len(), "mul_acc: destination is {} bytes but source is {}", dst.len(), src.len());
    match c {
        0 => {}
        1 => crate::xor_into(dst, src),
        _ => {
            let row = mul_row(c);
            for (d, &s) in dst.iter_mut().zip(src) {
                *d ^= row[s as usize];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Carry-less multiply then reduce, one bit at a time: independent of every table above.
    fn bitwise_mul(a: u8, b: u8) -> u8 {
        let mut product: u16 = 0;
        for bit in 0..8 {
            if b & (1 << bit) != 0 {
                product ^= (a as u16) << bit;
            }
        }
        for bit in (8..16).rev() {
            if product & (1 << bit) != 0 {
                product ^= 0x11d << (bit - 8);
            }
        }
        product as u8
    }

    #[test]
    fn known_values() {
        assert_eq!(mul(0x80, 2), 0x1d);
        assert_eq!(mul2(0x80), 0x1d);
        assert_eq!(exp(0), 1);
        assert_eq!(exp(1), 2);
        assert_eq!(exp(7), 0x80);
        assert_eq!(exp(8), 0x1d);
        assert_eq!(exp(255), 1);
        assert_eq!(exp(256), 2);
        assert_eq!(log(1), Some(0));
        assert_eq!(log(2), Some(1));
        assert_eq!(log(0x1d), Some(8));
        assert_eq!(log(0), None);
        // {02} * {8e} = 1 in this field: the inverse of the generator.
        assert_eq!(inv(2), 0x8e);
        assert_eq!(mul(2, 0x8e), 1);
    }

    #[test]
    fn table_multiply_agrees_with_bitwise_multiply() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), bitwise_mul(a, b), "{a:#04x} * {b:#04x}");
            }
        }
    }

    #[test]
    fn multiply_is_commutative_with_identity_and_zero() {
        for a in 0..=255u8 {
            assert_eq!(mul(a, 1), a);
            assert_eq!(mul(a, 0), 0);
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), mul(b, a));
            }
        }
    }

    #[test]
    fn multiply_is_associative_and_distributes_over_xor() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let ab = mul(a, b);
                for c in 0..=255u8 {
                    assert_eq!(mul(ab, c), mul(a, mul(b, c)));
                    assert_eq!(mul(a, b ^ c), ab ^ mul(a, c));
                }
            }
        }
    }

    #[test]
    fn every_nonzero_element_has_an_inverse() {
        for a in 1..=255u8 {
            assert_eq!(mul(a, inv(a)), 1, "{a:#04x}");
            assert_eq!(inv(inv(a)), a);
        }
    }

    #[test]
    #[should_panic(expected = "no multiplicative inverse")]
    fn inverse_of_zero_panics() {
        inv(0);
    }

    #[test]
    fn generator_reaches_every_nonzero_element_and_logs_invert_exp() {
        let mut seen = [false; 256];
        for i in 0..255 {
            let x = exp(i);
            assert_ne!(x, 0);
            assert!(!seen[x as usize], "g^{i} repeats an earlier power");
            seen[x as usize] = true;
            assert_eq!(log(x), Some(i as u8));
        }
        for a in 1..=255u8 {
            assert_eq!(exp(log(a).unwrap() as usize), a);
        }
    }

    #[test]
    fn mul_acc_matches_bytewise_multiply() {
        let src: Vec<u8> = (0..=255).collect();
        for c in [0u8, 1, 2, 0x1d, 0x8e, 0xff] {
            let mut dst: Vec<u8> = (0..=255u8).rev().collect();
            mul_acc(&mut dst, &src, c);
            for (i, &d) in dst.iter().enumerate() {
                assert_eq!(d, (255 - i as u8) ^ bitwise_mul(c, i as u8));
            }
        }
    }
}
