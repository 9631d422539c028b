//! A simulated member as the device layer sees it, for the moments the real device code reads
//! or writes members itself: assembly after a crash (probing superblocks, reading bitmaps,
//! replaying partial parity logs) and probing a spare before it is added.
//!
//! While the array runs, the simulation performs every member I/O itself, in virtual time: the
//! engine's through its event loop, the metadata's as the steps `OpenArray` queues (it runs with
//! `defer_metadata`). So a `SimMember` is a view of a [`SimDisk`]'s bytes taken when it was made,
//! and what the device code writes through it is kept aside for the simulation to apply to
//! the disk ([`SimMember::take_writes`]). Once the simulation has taken the writes it seals the
//! view: any later I/O through it is an error, since it would bypass the simulated disks.

use std::collections::BTreeSet;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use uraid_device::{MemberDevice, OpenArray, OpenError};

use crate::disk::{SimDisk, SECTOR};

/// Open an array on views of `disks` (those with ids `ids`) with `opener`, which must write
/// nothing: what opening decides is written later as the metadata steps the simulation
/// performs, so the metadata is deferred to the run. A write through a view fails the open,
/// naming the device and `what` was opened.
pub fn open_without_writes(
    disks: &[SimDisk],
    ids: &[usize],
    what: &str,
    opener: impl FnOnce(&[SimMember]) -> Result<OpenArray, OpenError>,
) -> Result<OpenArray, OpenError> {
    let views: Vec<SimMember> = ids.iter().map(|&d| SimMember::of(&disks[d])).collect();
    let result = opener(&views);
    for (view, &d) in views.iter().zip(ids) {
        if !view.take_writes().is_empty() {
            return Err(OpenError::BadMember(format!("d{d}: opening the {what} wrote to it outside the run")));
        }
    }
    let mut open = result?;
    open.defer_metadata(true);
    Ok(open)
}

/// The name of simulated device `id`, as assembly reports it.
pub fn device_name(id: usize) -> String {
    format!("d{id}")
}

/// The simulated device a name from [`device_name`] stands for.
pub fn device_id(name: &str) -> Option<usize> {
    name.strip_prefix('d')?.parse().ok()
}

/// A view of one simulated disk for the device layer (see the module docs). Clones share the
/// view: the simulation keeps one to take the writes of the one assembly owns.
#[derive(Clone)]
pub struct SimMember(Arc<View>);

struct View {
    name: String,
    bytes: Mutex<Vec<u8>>,
    bad: BTreeSet<u64>,
    writes: Mutex<Vec<(u64, Vec<u8>)>>,
    sealed: AtomicBool,
}

impl SimMember {
    /// A view of `disk` as it reads now.
    pub fn of(disk: &SimDisk) -> SimMember {
        let (bytes, bad) = disk.contents();
        SimMember(Arc::new(View {
            name: device_name(disk.id),
            bytes: Mutex::new(bytes.to_vec()),
            bad: bad.clone(),
            writes: Mutex::new(Vec::new()),
            sealed: AtomicBool::new(false),
        }))
    }

    /// What the device code wrote through this view, in order; the view is sealed from now on.
    pub fn take_writes(&self) -> Vec<(u64, Vec<u8>)> {
        self.0.sealed.store(true, Ordering::SeqCst);
        std::mem::take(&mut *self.0.writes.lock().expect("not poisoned"))
    }
}

impl View {
    fn size(&self) -> u64 {
        self.bytes.lock().expect("not poisoned").len() as u64
    }

    fn check(&self, offset: u64, len: usize) -> io::Result<()> {
        if self.sealed.load(Ordering::SeqCst) {
            return Err(io::Error::other(format!(
                "{}: member I/O outside the simulation's event loop (the array must run with deferred metadata)",
                self.name
            )));
        }
        if offset.checked_add(len as u64).is_none_or(|end| end > self.size()) {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("{}: I/O past the end", self.name)));
        }
        Ok(())
    }
}

impl MemberDevice for SimMember {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn size(&self) -> u64 {
        self.0.size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.0.write_at(offset, data)
    }

    fn flush(&self) -> io::Result<()> {
        self.0.check(0, 0)
    }
}

impl View {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.check(offset, buf.len())?;
        let end = offset + buf.len() as u64;
        if let Some(s) = self.bad.range(offset / SECTOR..end.div_ceil(SECTOR)).next() {
            return Err(io::Error::other(format!("{}: medium error: sector {s} is unreadable", self.name)));
        }
        let bytes = self.bytes.lock().expect("not poisoned");
        buf.copy_from_slice(&bytes[offset as usize..end as usize]);
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check(offset, data.len())?;
        let end = offset + data.len() as u64;
        if let Some(s) = self
            .bad
            .range(offset / SECTOR..end.div_ceil(SECTOR))
            .find(|&&s| offset > s * SECTOR || end < (s + 1) * SECTOR)
        {
            return Err(io::Error::other(format!("{}: write covers only part of unreadable sector {s}", self.name)));
        }
        let mut bytes = self.bytes.lock().expect("not poisoned");
        bytes[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        self.writes.lock().expect("not poisoned").push((offset, data.to_vec()));
        Ok(())
    }
}
