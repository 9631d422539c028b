//! `MemberTarget`: where one slot's member I/O goes (a device, its data area and its partial
//! parity log area), the check that keeps every member I/O inside those areas, and the blocking
//! way to perform one.

use std::io;
use std::sync::Arc;

use uraid_engine::array::{IoResult, MemberIo, MemberIoError, MemberOp};

use crate::member::MemberDevice;

/// Where one slot's member I/O goes: a device and its data area.
#[derive(Clone)]
pub struct MemberTarget {
    pub dev: Arc<dyn MemberDevice>,
    /// Byte offset of the data area on the device.
    pub base: u64,
    /// Bytes of array data the member holds.
    pub data_bytes: u64,
    /// Byte offset and length of the member's partial parity log area, if it has one.
    pub log_area: Option<(u64, u64)>,
}

/// A member I/O that would land outside the member's areas: a bug upstream, never performed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("log write to {device}, which has no log area")]
    NoLogArea { device: String },
    #[error("log write {offset}+{len} outside the log area ({area} bytes) of {device}")]
    OutsideLog { device: String, offset: u64, len: u64, area: u64 },
    #[error(
        "metadata write {offset}+{len} on {device} overlaps its data area ({data_start}+{data_bytes}) or runs past its end ({size} bytes)"
    )]
    MetadataOutside { device: String, offset: u64, len: u64, data_start: u64, data_bytes: u64, size: u64 },
    #[error("member I/O {offset}+{len} outside the data area ({area} bytes) of {device}")]
    OutsideData { device: String, offset: u64, len: u64, area: u64 },
}

/// Where one member I/O lands on its device, once checked against the member's areas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Absolute byte offset on the device.
    pub at: u64,
    /// Bytes covered (0 for a flush).
    pub len: u64,
}

impl MemberTarget {
    /// Check one member I/O against the member's data area (or, for a log write, its log area;
    /// for a metadata write, the device outside its data area) and say where it goes on the
    /// device. Every driver calls this before touching the device,
    /// so a bug can never overwrite a superblock or bitmap; the error text is for a panic or a
    /// member failure, since an I/O outside its area is a bug upstream.
    pub fn placement(&self, io: &MemberIo) -> Result<Placement, PlacementError> {
        let device = || self.dev.name().to_string();
        if let MemberOp::LogWrite { data } = &io.op {
            let Some((at, len)) = self.log_area else {
                return Err(PlacementError::NoLogArea { device: device() });
            };
            let n = data.len() as u64;
            if io.offset.checked_add(n).is_none_or(|end| end > len) {
                return Err(PlacementError::OutsideLog { device: device(), offset: io.offset, len: n, area: len });
            }
            return Ok(Placement { at: at + io.offset, len: n });
        }
        if let MemberOp::MetadataWrite { data } = &io.op {
            // Metadata has its own places on the device, never among the data: a write there
            // would destroy what the array holds.
            let len = data.len() as u64;
            let data_area = self.base..self.base + self.data_bytes;
            let end = io.offset.checked_add(len);
            let overlaps = end.is_none_or(|end| io.offset < data_area.end && data_area.start < end);
            if overlaps || end.is_none_or(|end| end > self.dev.size()) {
                return Err(PlacementError::MetadataOutside {
                    device: device(),
                    offset: io.offset,
                    len,
                    data_start: self.base,
                    data_bytes: self.data_bytes,
                    size: self.dev.size(),
                });
            }
            return Ok(Placement { at: io.offset, len });
        }
        let len = match &io.op {
            MemberOp::Read { len } | MemberOp::Discard { len } => *len,
            MemberOp::Write { data } => data.len() as u64,
            MemberOp::LogWrite { data } => data.len() as u64,
            MemberOp::MetadataWrite { data } => data.len() as u64,
            MemberOp::Flush => 0,
        };
        if io.offset.checked_add(len).is_none_or(|end| end > self.data_bytes) {
            return Err(PlacementError::OutsideData {
                device: device(),
                offset: io.offset,
                len,
                area: self.data_bytes,
            });
        }
        Ok(Placement { at: self.base + io.offset, len })
    }

    /// Perform one member I/O, refusing (with a panic) anything outside the member's data area.
    pub fn perform(&self, io: &MemberIo) -> Result<IoResult, MemberIoError> {
        let at = self.placement(io).unwrap_or_else(|e| panic!("{e}")).at;
        let failed = |what: &'static str| move |e: io::Error| self.failure(what, Some(at), &e);
        Ok(match &io.op {
            MemberOp::Read { len } => IoResult::Read(self.dev.read_buf(at, *len as usize).map_err(failed("read"))?),
            MemberOp::Write { data } => {
                self.dev.write_pieces(at, data).map_err(failed("write"))?;
                IoResult::Done
            }
            MemberOp::Flush => {
                self.dev.flush().map_err(|e| self.failure("flush", None, &e))?;
                IoResult::Done
            }
            MemberOp::Discard { len } => {
                self.dev.discard(at, *len).map_err(failed("discard"))?;
                IoResult::Done
            }
            MemberOp::LogWrite { data } => {
                // A partial parity log write: durable before it completes (md writes the log
                // with FUA).
                self.dev.write_at(at, data).map_err(failed("writing the partial parity log"))?;
                if !self.dev.flush_is_noop() {
                    self.dev.flush().map_err(|e| self.failure("flushing the partial parity log", None, &e))?;
                }
                IoResult::Done
            }
            MemberOp::MetadataWrite { data } => {
                self.dev.write_at(at, data).map_err(failed("writing metadata"))?;
                IoResult::Done
            }
        })
    }

    /// Perform a data read or write at once if the device can without waiting
    /// ([`MemberDevice::read_now`], [`MemberDevice::write_now`]: a file on tmpfs, a page-cache
    /// hit), or `None` to perform it the usual way (every other op, too). A write refused part
    /// way may have put some of its bytes down; the usual way writes all of them again. Errors
    /// are left to the usual way too, which reports them.
    pub fn perform_now(&self, io: &MemberIo) -> Option<IoResult> {
        match &io.op {
            MemberOp::Read { len } => {
                let at = self.placement(io).ok()?.at;
                let len = *len as usize;
                let mut buf = uraid_engine::PoolBuf::new(len);
                if !matches!(self.dev.read_now(at, buf.spare(len)), Ok(true)) {
                    return None;
                }
                // SAFETY: `read_now` said it filled all `len` bytes of the spare room.
                unsafe { buf.set_len(len) };
                Some(IoResult::Read(buf.into_bytes()))
            }
            MemberOp::Write { data } => {
                let mut at = self.placement(io).ok()?.at;
                for piece in data.pieces() {
                    if !matches!(self.dev.write_now(at, piece), Ok(true)) {
                        return None;
                    }
                    at += piece.len() as u64;
                }
                Some(IoResult::Done)
            }
            _ => None,
        }
    }

    /// A member I/O the OS failed: the device, what was done (at byte `at` of the device,
    /// where it has a place), and the OS error.
    pub fn failure(&self, what: &str, at: Option<u64>, error: &io::Error) -> MemberIoError {
        match at {
            Some(at) => MemberIoError::os(format_args!("{}: {what} at byte {at}", self.dev.name()), error),
            None => MemberIoError::os(format_args!("{}: {what}", self.dev.name()), error),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::member::MemoryDevice;

    fn target() -> MemberTarget {
        let dev = Arc::new(MemoryDevice::new("m", 1 << 20));
        MemberTarget { dev, base: 64 << 10, data_bytes: 512 << 10, log_area: Some((8 << 10, 32 << 10)) }
    }

    fn io(offset: u64, op: MemberOp) -> MemberIo {
        MemberIo { id: 1, slot: 0, offset, op }
    }

    #[test]
    fn data_and_log_io_stay_in_their_areas() {
        let t = target();
        let write = |len| MemberOp::Write { data: vec![1u8; len].into() };
        assert_eq!(t.placement(&io(4096, write(4096))), Ok(Placement { at: (64 << 10) + 4096, len: 4096 }));
        assert!(t.placement(&io((512 << 10) - 100, write(4096))).is_err(), "past the data area");
        let log = MemberOp::LogWrite { data: vec![2; 4096] };
        assert_eq!(t.placement(&io(0, log.clone())), Ok(Placement { at: 8 << 10, len: 4096 }));
        assert!(t.placement(&io(30 << 10, log)).is_err(), "past the log area");
    }

    /// A metadata write lands where it says, on the device itself, but never in the data area
    /// nor past the device's end.
    #[test]
    fn metadata_writes_stay_out_of_the_data_area() {
        let t = target();
        let meta = |len| MemberOp::MetadataWrite { data: Bytes::from(vec![3u8; len]) };
        assert_eq!(t.placement(&io(4096, meta(512))), Ok(Placement { at: 4096, len: 512 }));
        assert_eq!(t.placement(&io(576 << 10, meta(4096))), Ok(Placement { at: 576 << 10, len: 4096 }));
        for (offset, len) in [((64 << 10) - 512, 1024), (100 << 10, 512), ((576 << 10) - 1, 1), ((1 << 20) - 100, 512)]
        {
            let refused = t.placement(&io(offset, meta(len)));
            assert!(refused.is_err(), "{offset}+{len}: {refused:?}");
        }
        assert!(t.placement(&io(u64::MAX - 10, meta(512))).is_err(), "an offset that overflows");
        // Performed, it writes exactly there.
        t.perform(&io(4096, meta(512))).unwrap();
        let mut back = vec![0u8; 512];
        t.dev.read_at(4096, &mut back).unwrap();
        assert_eq!(back, vec![3u8; 512]);
    }
}
