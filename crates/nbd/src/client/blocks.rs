//! Fitting byte ranges to the server's size constraints: every request's offset and length a
//! multiple of the minimum block size, and no read or write payload over the maximum.

/// `[offset, offset+len)` widened to whole blocks of `min` bytes (a power of two), the end kept
/// within `size` (an export whose size is not a multiple of its block size leaves its tail
/// unaligned: that request is as close as the client can come).
pub fn widen(offset: u64, len: u64, min: u32, size: u64) -> (u64, u64) {
    let mask = u64::from(min) - 1;
    let start = offset & !mask;
    let end = (offset + len).saturating_add(mask) & !mask;
    (start, end.min(size))
}

/// `[offset, offset+len)` narrowed to the whole blocks of `min` bytes inside it, if any.
pub fn narrow(offset: u64, len: u64, min: u32) -> Option<(u64, u64)> {
    let mask = u64::from(min) - 1;
    let start = offset.checked_add(mask)? & !mask;
    let end = (offset + len) & !mask;
    (start < end).then_some((start, end))
}

/// Whether both ends of `[offset, offset+len)` fall on `min`-byte boundaries.
pub fn aligned(offset: u64, len: u64, min: u32) -> bool {
    let mask = u64::from(min) - 1;
    offset & mask == 0 && len & mask == 0
}

/// `[offset, offset+len)` cut into requests of at most `max` bytes (`max` a multiple of the
/// minimum block size, so aligned ranges stay aligned): `(offset, len)` pairs in order.
pub fn split(offset: u64, len: u64, max: u32) -> impl Iterator<Item = (u64, u32)> {
    let max = u64::from(max.max(1));
    let mut at = offset;
    let end = offset + len;
    std::iter::from_fn(move || {
        (at < end).then(|| {
            let n = (end - at).min(max);
            let piece = (at, n as u32);
            at += n;
            piece
        })
    })
}

/// The part `[start, start+len)` of the bytes that `pieces` hold back to back, as slices of them.
pub fn sub_pieces<'a>(pieces: &[&'a [u8]], start: usize, len: usize) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    let end = start + len;
    for p in pieces {
        let (p_start, p_end) = (at, at + p.len());
        at = p_end;
        let (s, e) = (start.max(p_start), end.min(p_end));
        if s < e {
            out.push(&p[s - p_start..e - p_start]);
        }
        if p_end >= end {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples() {
        assert_eq!(widen(100, 10, 512, 1 << 20), (0, 512));
        assert_eq!(widen(512, 512, 512, 1 << 20), (512, 1024));
        assert_eq!(widen(1000, 100, 512, 1050), (512, 1050));
        assert_eq!(narrow(100, 1000, 512), Some((512, 1024)));
        assert_eq!(narrow(100, 400, 512), None);
        assert!(aligned(4096, 8192, 4096) && !aligned(4096, 100, 4096) && aligned(7, 3, 1));
        assert_eq!(split(10, 25, 10).collect::<Vec<_>>(), [(10, 10), (20, 10), (30, 5)]);
        assert_eq!(split(0, 0, 10).count(), 0);
        let (a, b, c) = (&b"abc"[..], &b"de"[..], &b"fghi"[..]);
        assert_eq!(sub_pieces(&[a, b, c], 2, 4), [&b"c"[..], b"de", b"f"]);
        assert_eq!(sub_pieces(&[a, b, c], 3, 2), [&b"de"[..]]);
    }

    proptest! {
        #[test]
        fn widened_and_split_requests_obey_the_constraints(
            offset in 0u64..1 << 30, len in 1u64..1 << 22, min_shift in 0u32..17, max_blocks in 1u32..64,
        ) {
            let min = 1u32 << min_shift;
            let size = u64::MAX / 2;
            let (s, e) = widen(offset, len, min, size);
            prop_assert!(s <= offset && e >= offset + len && aligned(s, e - s, min));
            prop_assert!(e - s < len + 2 * u64::from(min));
            let max = min * max_blocks;
            let mut at = s;
            for (o, l) in split(s, e - s, max) {
                prop_assert_eq!(o, at);
                prop_assert!(l <= max && aligned(o, u64::from(l), min));
                at += u64::from(l);
            }
            prop_assert_eq!(at, e);
            if let Some((ns, ne)) = narrow(offset, len, min) {
                prop_assert!(ns >= offset && ne <= offset + len && aligned(ns, ne - ns, min));
            }
        }

        #[test]
        fn sub_pieces_are_the_range(lens in prop::collection::vec(0usize..20, 0..6), start in 0usize..100, len in 0usize..100) {
            let joined: Vec<u8> = (0..lens.iter().sum::<usize>()).map(|i| i as u8).collect();
            let mut pieces = Vec::new();
            let mut at = 0;
            for l in &lens {
                pieces.push(&joined[at..at + l]);
                at += l;
            }
            let start = start.min(joined.len());
            let len = len.min(joined.len() - start);
            let got: Vec<u8> = sub_pieces(&pieces, start, len).concat();
            prop_assert_eq!(&got[..], &joined[start..start + len]);
        }
    }
}
