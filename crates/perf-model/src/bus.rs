//! `Bus`: a shared channel (a SCSI bus, an Ultra160 channel, a PCI SATA card, an ISA host
//! adapter) that carries the data of every disk attached to it.
//!
//! It owns one thing: when the channel is next free. Transfers are serialized at the channel's
//! bandwidth, each paying a per-command overhead (arbitration, selection, command and status
//! phases). Disks buffer data, so a read's transfer may overlap the media read when the channel
//! is idle; the disk model says how early a transfer may start (`ready`).

use crate::{transfer_ns, Nanos};

/// A channel's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct BusParams {
    pub name: &'static str,
    /// Data bandwidth in bytes per second.
    pub bytes_per_s: f64,
    /// Fixed cost of each command on the channel.
    pub command_overhead: Nanos,
}

/// One channel's state.
#[derive(Debug, Clone)]
pub struct Bus {
    pub params: BusParams,
    free_at: Nanos,
    busy_total: Nanos,
}

impl Bus {
    pub fn new(params: BusParams) -> Bus {
        Bus { params, free_at: 0, busy_total: 0 }
    }

    /// How long the channel is held to carry `bytes`.
    pub fn occupancy(&self, bytes: u64) -> Nanos {
        self.params.command_overhead + transfer_ns(bytes, self.params.bytes_per_s)
    }

    /// Carry `bytes`, starting no earlier than `ready` and after every earlier transfer: returns
    /// when the last byte has crossed. Callers reserve in non-decreasing event time, so
    /// reservations never overlap.
    pub fn transfer(&mut self, ready: Nanos, bytes: u64) -> Nanos {
        let hold = self.occupancy(bytes);
        let start = ready.max(self.free_at);
        self.free_at = start + hold;
        self.busy_total += hold;
        self.free_at
    }

    /// Total time the channel has been held (for utilisation).
    pub fn busy_total(&self) -> Nanos {
        self.busy_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_serialize_at_the_bandwidth() {
        let mut b = Bus::new(BusParams { name: "t", bytes_per_s: 1e6, command_overhead: 0 });
        assert_eq!(b.transfer(0, 1000), 1_000_000);
        // A second transfer ready at the same instant waits for the first.
        assert_eq!(b.transfer(0, 1000), 2_000_000);
        // One ready later than the channel frees starts when ready.
        assert_eq!(b.transfer(5_000_000, 500), 5_500_000);
    }
}
