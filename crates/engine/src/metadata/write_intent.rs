//! A write-intent log as the engine's drivers see it, whichever format keeps it: md's
//! write-intent bitmap, RAIDframe's parity map.
//!
//! Both are one bit per region, least significant bit first within each byte, and both say the
//! same thing: "writes may have been in flight here when the array stopped". The driver marks a
//! region (through [`MetaChange::IntentSet`](super::MetaChange::IntentSet)) and waits for the
//! mark to be durable before the writes it covers go out, clears it lazily once idle, and after
//! an unclean stop resyncs only the regions marked. This type is the driver's read-only view of
//! the bits a format holds; the format decides what it writes.

/// The regions a format's write-intent log marks, held in memory as last written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteIntentBits {
    /// Bytes per region: of each member for layouts with parity or mirrors whose copies sit at
    /// their logical offsets (md's raid1/4/5/6, RAIDframe's levels, whose regions are whole
    /// stripes), of the array for md's raid10.
    pub chunk_bytes: u64,
    /// Regions the log covers.
    pub chunks: u64,
    /// One bit per region, least significant bit first.
    pub bits: Vec<u8>,
    /// The log on disk could not be trusted when the array was opened: every region counts as
    /// dirty until a full resync.
    pub all_dirty: bool,
    /// md's event count when bits were last cleared (a re-added member whose events are not
    /// behind it missed nothing the bitmap does not show); 0 for formats without event counts.
    pub events_cleared: u64,
}

impl WriteIntentBits {
    /// Whether region `chunk` may hold writes a crash left inconsistent.
    pub fn is_dirty(&self, chunk: u64) -> bool {
        self.all_dirty || bit(&self.bits, chunk)
    }

    /// How many regions count as dirty.
    pub fn dirty_chunks(&self) -> u64 {
        if self.all_dirty {
            return self.chunks;
        }
        (0..self.chunks).filter(|&c| bit(&self.bits, c)).count() as u64
    }

    /// Mark region `chunk` dirty or clean in memory (ignored past the bits held).
    pub fn set(&mut self, chunk: u64, dirty: bool) {
        if let Some(b) = self.bits.get_mut((chunk / 8) as usize) {
            let mask = 1u8 << (chunk % 8);
            if dirty {
                *b |= mask;
            } else {
                *b &= !mask;
            }
        }
    }
}

fn bit(bits: &[u8], chunk: u64) -> bool {
    bits.get((chunk / 8) as usize).is_some_and(|b| b & (1 << (chunk % 8)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(chunks: u64) -> WriteIntentBits {
        WriteIntentBits {
            chunk_bytes: 4096,
            chunks,
            bits: vec![0; chunks.div_ceil(8) as usize],
            all_dirty: false,
            events_cleared: 0,
        }
    }

    #[test]
    fn regions_are_bits_least_significant_first() {
        let mut b = bits(20);
        b.set(0, true);
        b.set(9, true);
        assert_eq!(b.bits, vec![0x01, 0x02, 0x00]);
        assert!(b.is_dirty(9) && !b.is_dirty(8));
        assert_eq!(b.dirty_chunks(), 2);
        b.set(9, false);
        assert_eq!(b.dirty_chunks(), 1);
        // Past the bits held: ignored, and clean.
        b.set(100, true);
        assert!(!b.is_dirty(100));
    }

    #[test]
    fn an_untrusted_log_counts_every_region() {
        let mut b = bits(20);
        b.all_dirty = true;
        assert!(b.is_dirty(19));
        assert_eq!(b.dirty_chunks(), 20);
    }
}
