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
    pub fn placement(&self, io: &MemberIo) -> Result<Placement, String> {
        if let MemberOp::LogWrite { data } = &io.op {
            let Some((at, len)) = self.log_area else {
                return Err(format!("log write to {}, which has no log area", self.dev.name()));
            };
            if io.offset.checked_add(data.len() as u64).is_none_or(|end| end > len) {
                return Err(format!(
                    "log write {}+{} outside the log area ({len} bytes) of {}",
                    io.offset,
                    data.len(),
                    self.dev.name()
                ));
            }
            return Ok(Placement { at: at + io.offset, len: data.len() as u64 });
        }
        if let MemberOp::MetadataWrite { data } = &io.op {
            // Metadata has its own places on the device, never among the data: a write there
            // would destroy what the array holds.
            let len = data.len() as u64;
            let data_area = self.base..self.base + self.data_bytes;
            let end = io.offset.checked_add(len);
            let overlaps = end.is_none_or(|end| io.offset < data_area.end && data_area.start < end);
            if overlaps || end.is_none_or(|end| end > self.dev.size()) {
                return Err(format!(
                    "metadata write {}+{len} on {} overlaps its data area ({}+{}) or runs past its end ({} bytes)",
                    io.offset,
                    self.dev.name(),
                    self.base,
                    self.data_bytes,
                    self.dev.size()
                ));
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
            return Err(format!(
                "member I/O {}+{} outside the data area ({} bytes) of {}",
                io.offset,
                len,
                self.data_bytes,
                self.dev.name()
            ));
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
                self.dev.flush().map_err(|e| self.failure("flushing the partial parity log", None, &e))?;
                IoResult::Done
            }
            MemberOp::MetadataWrite { data } => {
                self.dev.write_at(at, data).map_err(failed("writing metadata"))?;
                IoResult::Done
            }
        })
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
