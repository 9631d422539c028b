//! Disk models in virtual time: [`hdd::HardDisk`] (seek curve, rotation, zones, track buffer,
//! command queue, write cache) and [`ssd::SolidStateDisk`] (latency, bandwidth, channels).
//!
//! This module owns the interface both present to [`crate::storage`]: a disk accepts requests
//! into its own queue while it has room ([`Disk::has_room_for`]), starts them on its media when it
//! chooses ([`Disk::dispatch`]), and is told when a media phase it announced has ended
//! ([`Disk::media_done`]). Moving data over the channel is the storage layer's job, except that
//! a write's data must cross the bus before the media can take it, so dispatch gets the bus.

pub mod hdd;
pub mod ssd;

use crate::bus::Bus;
use crate::Nanos;

/// Bytes per sector for every modelled disk.
pub const SECTOR: u64 = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskOp {
    Read,
    Write,
}

/// One request as the disk sees it: bytes from the start of the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskRequest {
    pub id: u64,
    pub op: DiskOp,
    pub offset: u64,
    pub len: u64,
}

/// A request the disk has started: its media phase runs from `media_start` to `media_end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    pub request: DiskRequest,
    pub media_start: Nanos,
    pub media_end: Nanos,
    /// The host was already told this write completed (it sits in the write cache).
    pub acked: bool,
}

/// How the disk took a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Queued; the host hears of it when its media phase and transfer are done.
    Queued,
    /// A write taken into the write cache: complete to the host once its data has crossed the
    /// bus; the disk writes it to the media later.
    Cached,
}

/// How a disk orders its own queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduling {
    /// Oldest first.
    Fifo,
    /// Shortest positioning time first (seek plus rotational wait), oldest first on ties.
    /// Starvation is not bounded: a sequential stream whose next request is always queued
    /// keeps the head (only a bounded queue and closed-loop clients limit it).
    Sptf,
}

/// Either disk model.
#[derive(Debug, Clone)]
pub enum Disk {
    Hdd(Box<hdd::HardDisk>),
    Ssd(ssd::SolidStateDisk),
}

impl Disk {
    pub fn capacity_bytes(&self) -> u64 {
        match self {
            Disk::Hdd(d) => d.capacity_bytes(),
            Disk::Ssd(d) => d.capacity_bytes(),
        }
    }

    /// Whether the disk would take `request` now.
    pub fn has_room_for(&self, request: &DiskRequest) -> bool {
        match self {
            Disk::Hdd(d) => d.has_room_for(request),
            Disk::Ssd(d) => d.has_room(),
        }
    }

    pub fn accept(&mut self, now: Nanos, request: DiskRequest) -> Accepted {
        match self {
            Disk::Hdd(d) => d.accept(now, request),
            Disk::Ssd(d) => d.accept(now, request),
        }
    }

    pub fn dispatch(&mut self, now: Nanos, bus: &mut Bus) -> Vec<Started> {
        match self {
            Disk::Hdd(d) => d.dispatch(now, bus).into_iter().collect(),
            Disk::Ssd(d) => d.dispatch(now, bus),
        }
    }

    pub fn media_done(&mut self, now: Nanos, started: &Started) {
        match self {
            Disk::Hdd(d) => d.media_done(now, started),
            Disk::Ssd(d) => d.media_done(now, started),
        }
    }
}
