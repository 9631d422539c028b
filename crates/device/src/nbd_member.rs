//! `NbdDevice`: a member that is an NBD export, on another host or in another process, reached
//! through uraid's own client (`uraid_nbd::client`).
//!
//! It has no descriptors for io_uring ([`MemberDevice::io_handle`] is `None`): the service
//! drives it from its member I/O threads, whose concurrent calls become concurrent requests on
//! the client's connections.

use std::io;

use uraid_engine::IoBuf;
use uraid_nbd::client::{ClientConfig, ClientError, NbdClient, NbdUri};

use crate::member::{MemberDevice, RemoteLimits};

/// An NBD export used as a member.
pub struct NbdDevice {
    /// The URI as shown (no user name).
    name: String,
    client: NbdClient,
    writable: bool,
}

impl NbdDevice {
    /// Connects to `uri` with the client's default limits (see [`ClientConfig`]). A writable
    /// member on a read-only export is refused here rather than on its first write.
    pub fn open(uri: &NbdUri, writable: bool) -> Result<NbdDevice, ClientError> {
        NbdDevice::open_with(uri, writable, ClientConfig::default())
    }

    pub fn open_with(uri: &NbdUri, writable: bool, config: ClientConfig) -> Result<NbdDevice, ClientError> {
        let client = NbdClient::connect(uri, config)?;
        if writable && client.info().read_only() {
            return Err(ClientError::ReadOnly);
        }
        Ok(NbdDevice { name: client.uri().to_string(), client, writable })
    }

    pub fn client(&self) -> &NbdClient {
        &self.client
    }

    /// The export's minimum block size when it has one larger than a byte: the smallest unit it
    /// takes, as a block device's logical sector size is.
    pub fn logical_sector_size(&self) -> Option<u32> {
        let min = self.client.info().min_block;
        (min > 1).then_some(min)
    }

    fn check_writable(&self) -> io::Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::PermissionDenied, "member is open read-only"))
        }
    }
}

impl std::fmt::Debug for NbdDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbdDevice").field("name", &self.name).field("writable", &self.writable).finish()
    }
}

impl MemberDevice for NbdDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> u64 {
        self.client.info().size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        Ok(self.client.read(offset, buf)?)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check_writable()?;
        Ok(self.client.write(offset, &[data], false)?)
    }

    /// One request carrying every piece (split only at the server's maximum payload).
    fn write_pieces(&self, offset: u64, data: &IoBuf) -> io::Result<()> {
        self.check_writable()?;
        let pieces: Vec<&[u8]> = data.pieces().map(|p| &p[..]).collect();
        Ok(self.client.write(offset, &pieces, false)?)
    }

    fn flush(&self) -> io::Result<()> {
        Ok(self.client.flush()?)
    }

    /// `NBD_CMD_TRIM` promises nothing about what the range reads afterwards, so it is not
    /// used: the zeros come from `NBD_CMD_WRITE_ZEROES` (which may deallocate), or are written.
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_writable()?;
        Ok(self.client.write_zeroes(offset, len)?)
    }

    /// Cheap when the server zeroes ranges itself: no data crosses the network.
    fn discard_is_cheap(&self) -> bool {
        self.client.can_write_zeroes()
    }

    fn remote_limits(&self) -> Option<RemoteLimits> {
        let c = self.client.config();
        Some(RemoteLimits {
            request_timeout: c.request_timeout,
            reconnect_attempts: c.reconnect_attempts,
            reconnect_budget: c.reconnect_budget,
        })
    }

    fn set_remote_limits(&self, limits: RemoteLimits) -> bool {
        let config = ClientConfig {
            request_timeout: limits.request_timeout,
            reconnect_attempts: limits.reconnect_attempts,
            reconnect_budget: limits.reconnect_budget,
            ..self.client.config()
        };
        self.client.set_config(config);
        true
    }
}
