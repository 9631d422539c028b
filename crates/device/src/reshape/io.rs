//! Client I/O on an array part-way through a reshape that a running server drives
//! ([`Grow`] online): what the reshape has passed is read and written in the new shape, the rest
//! in the old one, as md's `make_stripe_request` chooses with `reshape_progress`.
//!
//! The server calls these between reshape steps, on the thread that makes them, so no client
//! I/O ever overlaps the stripe being moved (md's stripe blocking, by construction). What stays
//! to be ordered is the record: a crash makes the reshape start again from the position the
//! superblocks hold, copying the old shape again from there. Data written in the new shape
//! between that position and the one reached would be copied over with old bytes, so such a
//! write first records the position reached (md waits for `reshape_safe` the same way); writes
//! below the record, and writes in the old shape ahead of the position, need no such care.
//! Before the first write the superblocks are marked dirty, as md marks them: a crash during a
//! write leaves parity to set right, which the resync after the reshape does.

use bytes::Bytes;
use uraid_engine::array::{Completion, Request};
use uraid_engine::IoBuf;

use super::{Grow, GrowError, Shape};

impl Grow {
    /// The size the array has while it is reshaped: the smaller shape's (md keeps the old size
    /// until a grow ends, and a reshape onto fewer members serves the size it shrinks to).
    pub fn serving_size(&self) -> u64 {
        self.window.old_size().min(self.window.new_size())
    }

    /// Whether a resync is owed: the array was found dirty when the reshape was taken up (the
    /// resync after the reshape sets it right).
    pub fn owes_resync(&self) -> bool {
        self.owes_resync
    }

    /// Whether the superblocks say dirty.
    pub fn dirty(&self) -> bool {
        self.dirty
    }

    /// `len` bytes of the array at `offset`: the engine's buffers as they came, each shape's
    /// pieces in turn, none copied.
    pub fn read(&mut self, offset: u64, len: u64) -> Result<IoBuf, GrowError> {
        self.check_range(offset, len)?;
        let mut out = IoBuf::new();
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let (upto, below) = self.piece(at, end);
            let shape = if below { Shape::New } else { Shape::Old };
            let Completion::Read(bytes) = self.perform(shape, Request::Read { offset: at, len: upto - at })? else {
                return Err(GrowError::Refused("the engine answered a read with no data".into()));
            };
            bytes.into_pieces().for_each(|piece| out.push(piece));
            at = upto;
        }
        Ok(out)
    }

    /// Write `data` at `offset`: in the new shape below the position reached, in the old one
    /// above it (see the module documentation for the record made first). Each shape's piece
    /// is a slice of `data`, not a copy.
    pub fn write(&mut self, offset: u64, data: Bytes) -> Result<(), GrowError> {
        let len = data.len() as u64;
        self.check_range(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        if !self.dirty {
            self.update_superblocks(|m| m.sb.set_clean(false))?;
            self.dirty = true;
        }
        let end = offset + len;
        // The bytes the reshape has passed since the last record, in the new shape now.
        let unrecorded =
            if self.window.backwards { self.position..self.recorded } else { self.recorded..self.position };
        if offset < unrecorded.end && end > unrecorded.start {
            let at = self.position;
            self.record(at)?;
        }
        let mut at = offset;
        while at < end {
            let (upto, below) = self.piece(at, end);
            let shape = if below { Shape::New } else { Shape::Old };
            let piece = data.slice((at - offset) as usize..(upto - offset) as usize);
            self.perform(shape, Request::Write { offset: at, data: piece })?;
            at = upto;
        }
        Ok(())
    }

    /// Make every write so far durable on the members.
    pub fn flush(&self) -> Result<(), GrowError> {
        for m in self.working() {
            m.dev.flush().map_err(|e| super::io_error(m.dev.as_ref(), "flushing", e))?;
        }
        Ok(())
    }

    /// Stop where the reshape got to: flush, then record the position reached, and the array
    /// clean unless it owes a resync (found dirty when the reshape was taken up). The next
    /// assembly, or the kernel, continues from there.
    pub fn stop(&mut self) -> Result<(), GrowError> {
        let clean = !self.owes_resync;
        let at = self.position;
        if at == self.window.end() {
            return Ok(());
        }
        self.update_superblocks(|m| {
            m.record_position(at / uraid_engine::SECTOR_BYTES);
            if clean {
                m.sb.set_clean(true);
            }
        })?;
        self.recorded = at;
        self.dirty = !clean;
        Ok(())
    }

    /// The piece of `[at, end)` that lies in one shape: its end, and whether that shape is the
    /// new one (the reshape has passed it: below the position, or from it on for a reshape
    /// run backwards).
    fn piece(&self, at: u64, end: u64) -> (u64, bool) {
        let below = at < self.position;
        (if below { end.min(self.position) } else { end }, below != self.window.backwards)
    }

    /// Refuse a range that is not inside the array as it is served while reshaped.
    pub fn check_range(&self, offset: u64, len: u64) -> Result<(), GrowError> {
        let size = self.serving_size();
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(GrowError::OutOfRange { offset, len, size });
        }
        Ok(())
    }
}
