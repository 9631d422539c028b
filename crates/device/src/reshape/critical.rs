//! A reshape in place (onto more members, the data offset kept: 1.0 metadata, or no room before
//! the data) and its critical section, as mdadm runs one with its backup on the added devices.
//!
//! The first new stripes land on old stripes not yet read ([`GrowWindow::critical_section`]).
//! Before any of them is written, that part of the array is copied to every added member in
//! mdadm's backup format ([`uraid_md_format::backup`]): at the end of the part of its data area
//! the array uses, which the reshape reaches last. The critical section is then reshaped
//! without a record (the superblocks keep the position it started from), its end recorded,
//! and the backup forgotten (its header's length set to 0, as mdadm's `forget_backup` does).
//! A crash in between leaves a recorded position inside the section and a backup covering it:
//! [`Grow::restore_backup`] writes the backed-up data in the new shape and records the
//! section's end, as mdadm's `Grow_restart` does when it assembles such an array (the kernel
//! refuses to start it otherwise), so either can take it up.
//!
//! [`GrowWindow::critical_section`]: uraid_md::reshape::GrowWindow::critical_section

use std::ops::Range;

use uraid_engine::array::{Completion, Request};
use uraid_engine::SECTOR_BYTES;
use uraid_md_format::backup::{self, BackupHeader, HEADER_BYTES};

use super::{io_error, now_seconds, Grow, GrowError, Shape};

/// The copy of the header before the backed-up data is this far before it (mdadm's 4 KiB).
const LEADING_COPY: u64 = 4096;

/// Where one added member holds the backup: its index among the reshape's members, the sector
/// its backed-up data starts at, and the sector of the header after it.
#[derive(Debug, Clone, Copy)]
pub(super) struct BackupPlace {
    member: usize,
    devstart: u64,
    header: u64,
}

impl Grow {
    /// Logical bytes of the critical section of a reshape in place (backed up on the added
    /// members before they were overwritten); 0 where the reshape moves the data offset.
    pub fn critical_section(&self) -> u64 {
        self.window.critical_section()
    }

    /// The members in the slots the reshape adds (those past the old shape's), working: where
    /// mdadm keeps its backup, and looks for it.
    fn added_members(&self) -> Vec<usize> {
        self.slot_member
            .iter()
            .skip(self.old_raid_disks as usize)
            .flatten()
            .copied()
            .filter(|&i| self.members[i].failed.is_none())
            .collect()
    }

    /// Copy the logical bytes `range` (whole steps, still in the old shape) to every added
    /// member, then write the header after them and its copy before them, then flush: from
    /// then on the steps in `range` may be written whatever the superblocks record.
    pub(super) fn back_up(&mut self, range: Range<u64>) -> Result<(), GrowError> {
        let sectors = (range.end - range.start) / SECTOR_BYTES;
        let mut places = Vec::new();
        for member in self.added_members() {
            let (data_offset, size) = (self.members[member].data_offset(), self.members[member].component_sectors());
            // Room for the copy of the header before the data, and no nearer the start than
            // half the member (mdadm refuses a backup of half a member or more).
            let devstart = backup::data_sector(data_offset, size, sectors)
                .filter(|&s| s * SECTOR_BYTES >= LEADING_COPY && sectors * 2 < size);
            let Some(devstart) = devstart else {
                return Err(GrowError::Refused(format!(
                    "{}: too small to hold the backup of the reshape's critical section ({}K at the end of {}K used)",
                    self.members[member].dev.name(),
                    sectors / 2,
                    size / 2
                )));
            };
            places.push(BackupPlace { member, devstart, header: devstart + sectors });
        }
        if places.is_empty() {
            return Err(GrowError::Refused(
                "no added member is left to hold the backup of the reshape's critical section".into(),
            ));
        }
        let step = self.window.step_bytes();
        let mut at = range.start;
        while at < range.end {
            let len = step.min(range.end - at);
            let Completion::Read(bytes) = self.perform(Shape::Old, Request::Read { offset: at, len })? else {
                unreachable!("a read answers with bytes")
            };
            let mut buf = vec![0u8; len as usize];
            bytes.copy_to(&mut buf);
            for place in &places {
                let dev = &self.members[place.member].dev;
                dev.write_at(place.devstart * SECTOR_BYTES + (at - range.start), &buf)
                    .map_err(|e| io_error(dev.as_ref(), "writing the backup of the critical section", e))?;
            }
            at += len;
        }
        let header = BackupHeader {
            set_uuid: self.members[places[0].member].backup_uuid(),
            mtime: now_seconds(),
            arraystart: range.start / SECTOR_BYTES,
            length: sectors,
            // mdadm's second section starts a backup's length on.
            devstart2: sectors,
            ..BackupHeader::default()
        };
        self.write_backup_headers(&places, header)?;
        self.backup = places;
        self.window.backed_up = range.end;
        Ok(())
    }

    /// Write `header` (its `devstart` each member's own) after each member's backed-up data and
    /// 4 KiB before it, then flush them (a forgotten one, of length 0, where the live one was).
    fn write_backup_headers(&self, places: &[BackupPlace], header: BackupHeader) -> Result<(), GrowError> {
        for place in places {
            let dev = &self.members[place.member].dev;
            let bytes = BackupHeader { devstart: place.devstart, ..header }.to_bytes();
            for offset in [place.devstart * SECTOR_BYTES - LEADING_COPY, place.header * SECTOR_BYTES] {
                dev.write_at(offset, &bytes).map_err(|e| io_error(dev.as_ref(), "writing the backup header", e))?;
            }
            dev.flush().map_err(|e| io_error(dev.as_ref(), "flushing the backup", e))?;
        }
        Ok(())
    }

    /// Reshape the rest of the critical section, backing it up first if it is not, then record
    /// its end and forget the backup. Nothing to do past it, or where the reshape moves the
    /// data offset.
    pub(super) fn through_critical_section(&mut self) -> Result<(), GrowError> {
        let critical = self.window.critical_section();
        if self.position >= critical {
            return Ok(());
        }
        if self.window.backed_up < critical {
            self.back_up(self.position..critical)?;
        }
        while self.position < critical {
            self.step()?;
        }
        self.record(critical)?;
        let places = std::mem::take(&mut self.backup);
        let forgotten = BackupHeader {
            set_uuid: self.members[self.reference_member()].backup_uuid(),
            mtime: now_seconds(),
            ..BackupHeader::default()
        };
        self.write_backup_headers(&places, forgotten)
    }

    /// A working member, for what every member's superblock says alike.
    fn reference_member(&self) -> usize {
        self.members.iter().position(|m| m.failed.is_none()).unwrap_or(0)
    }

    /// Mend a reshape in place cut short inside its critical section: find a backup covering
    /// the recorded position on an added member (its header after the data, checked against
    /// the copy before it, of this array), write its data in the new shape, and record the end
    /// of what it held, as mdadm's `Grow_restart` does. True if one was restored. Refused,
    /// nothing written, when the position is inside the section and no backup is found.
    pub(super) fn restore_backup(&mut self) -> Result<bool, GrowError> {
        let critical = self.window.critical_section();
        if self.recorded >= critical {
            return Ok(false);
        }
        let at = self.recorded / SECTOR_BYTES;
        let uuid = self.members[self.reference_member()].backup_uuid();
        for member in self.added_members() {
            let Some(header) = self.backup_on(member, uuid) else { continue };
            let Some(covers) = header.covers() else { continue };
            if at < covers.start || at > covers.end {
                continue;
            }
            let mut sections = vec![(header.devstart, header.arraystart..header.arraystart + header.length)];
            if header.two_sections {
                sections.push((
                    header.devstart + header.devstart2,
                    header.arraystart2..header.arraystart2 + header.length2,
                ));
            }
            for (devstart, sectors) in sections.into_iter().filter(|(_, s)| !s.is_empty()) {
                self.restore_section(member, devstart, sectors)?;
            }
            self.position = covers.end * SECTOR_BYTES;
            self.record(self.position)?;
            if self.position >= critical {
                // Forgotten once the position is past it, as after a section run through: else
                // mdadm, finding the position at the backup's very end, would write it again
                // over what clients wrote since.
                let places = self.backup_places_found(uuid);
                let forgotten = BackupHeader { set_uuid: uuid, mtime: now_seconds(), ..BackupHeader::default() };
                self.write_backup_headers(&places, forgotten)?;
            }
            return Ok(true);
        }
        Err(GrowError::Refused(format!(
            "the reshape stopped at {}K, inside its critical section (the first {}K, whose new stripes overwrite old ones not yet moved), and no backup of it was found on the added members (mdadm: Failed to find backup of critical section); nothing was written",
            at / 2,
            critical / 1024
        )))
    }

    /// Where the added members hold a sound backup of array `uuid`.
    fn backup_places_found(&self, uuid: [u8; 16]) -> Vec<BackupPlace> {
        self.added_members()
            .into_iter()
            .filter_map(|member| {
                let header = self.backup_on(member, uuid)?;
                let m = &self.members[member];
                let at = backup::header_sector(m.data_offset(), m.component_sectors())?;
                Some(BackupPlace { member, devstart: header.devstart, header: at })
            })
            .collect()
    }

    /// The backup header on added member `member`, if it holds a sound one of array `uuid`.
    fn backup_on(&self, member: usize, uuid: [u8; 16]) -> Option<BackupHeader> {
        let m = &self.members[member];
        let at = backup::header_sector(m.data_offset(), m.component_sectors())? * SECTOR_BYTES;
        let mut bytes = vec![0u8; HEADER_BYTES];
        m.dev.read_at(at, &mut bytes).ok()?;
        let header = BackupHeader::parse(&bytes).ok().filter(|h| h.set_uuid == uuid)?;
        let leading = (header.devstart * SECTOR_BYTES).checked_sub(LEADING_COPY)?;
        let mut copy = vec![0u8; HEADER_BYTES];
        m.dev.read_at(leading, &mut copy).ok()?;
        let n = header.compared_bytes();
        (copy[..n] == bytes[..n]).then_some(header)
    }

    /// Write `sectors` of the array, held on member `member` from `devstart`, in the new shape,
    /// a step at a time (whole new stripes, so their parity is computed afresh).
    fn restore_section(&mut self, member: usize, devstart: u64, sectors: Range<u64>) -> Result<(), GrowError> {
        let (start, end) = (sectors.start * SECTOR_BYTES, sectors.end * SECTOR_BYTES);
        let step = self.window.step_bytes();
        let mut at = start;
        while at < end {
            let len = step.min(end - at);
            let mut buf = vec![0u8; len as usize];
            let dev = std::sync::Arc::clone(&self.members[member].dev);
            dev.read_at(devstart * SECTOR_BYTES + (at - start), &mut buf)
                .map_err(|e| io_error(dev.as_ref(), "reading the backup of the critical section", e))?;
            self.perform(Shape::New, Request::Write { offset: at, data: bytes::Bytes::from(buf) })?;
            at += len;
        }
        Ok(())
    }
}
