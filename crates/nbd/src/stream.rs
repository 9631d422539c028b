//! The sockets the server can speak over.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;

/// A connected, blocking, full-duplex byte stream whose clones share one underlying socket, so
/// one thread can read while another writes and a third shuts it down. Its descriptor is what
/// spliced replies are moved to (see [`crate::export::SplicedData`]).
pub trait Stream: Read + Write + AsFd + Send + Sync + Sized + 'static {
    fn try_clone(&self) -> io::Result<Self>;
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;
    /// Whether reads and writes return `WouldBlock` rather than wait (a TLS relay's network
    /// socket is non-blocking once the handshake is done).
    fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()>;
    /// Socket options applied once before the handshake.
    fn prepare(&self) -> io::Result<()> {
        Ok(())
    }
}

/// What a connection's control needs of its socket: shutting it down from another thread. A
/// trait object, because the socket changes type when the connection turns to TLS.
pub(crate) trait ShutdownHandle: Send + Sync {
    fn shut(&self, how: Shutdown) -> io::Result<()>;
}

impl<S: Stream> ShutdownHandle for S {
    fn shut(&self, how: Shutdown) -> io::Result<()> {
        self.shutdown(how)
    }
}

impl Stream for UnixStream {
    fn try_clone(&self) -> io::Result<Self> {
        UnixStream::try_clone(self)
    }
    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        UnixStream::shutdown(self, how)
    }
    fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        UnixStream::set_nonblocking(self, nonblocking)
    }
}

impl Stream for TcpStream {
    fn try_clone(&self) -> io::Result<Self> {
        TcpStream::try_clone(self)
    }
    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        TcpStream::shutdown(self, how)
    }
    fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        TcpStream::set_nonblocking(self, nonblocking)
    }
    /// The spec asks both ends to disable Nagle: a reply header and its data are separate writes,
    /// and waiting for an ACK between them would add a round trip to every read.
    fn prepare(&self) -> io::Result<()> {
        self.set_nodelay(true)
    }
}
