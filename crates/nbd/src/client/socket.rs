//! Connecting to an NBD endpoint: a TCP or Unix stream socket behind one type.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::uri::Endpoint;

/// A connected socket to an NBD server. Clones share the socket, so the reader thread reads
/// while requests are written, and either end can shut it down.
#[derive(Debug)]
pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    /// Connects to `endpoint`, giving up after `timeout` for each TCP address tried.
    pub fn connect(endpoint: &Endpoint, timeout: Duration) -> io::Result<Socket> {
        match endpoint {
            Endpoint::Unix { socket } => Ok(Socket::Unix(UnixStream::connect(socket)?)),
            Endpoint::Tcp { host, port } => {
                let mut last = None;
                for addr in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(s) => {
                            // A request header and its data are separate writes; the
                            // specification asks both ends not to wait for an ACK between them.
                            s.set_nodelay(true)?;
                            return Ok(Socket::Tcp(s));
                        }
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the host has no address")))
            }
        }
    }

    pub fn try_clone(&self) -> io::Result<Socket> {
        Ok(match self {
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Socket::Unix(s) => Socket::Unix(s.try_clone()?),
        })
    }

    /// Ends the connection both ways; the reader thread then sees the end of the stream.
    pub fn shutdown(&self) {
        // Already shut down or reset: nothing more to end.
        let _ = match self {
            Socket::Tcp(s) => s.shutdown(Shutdown::Both),
            Socket::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }

    /// Bounds each read and write (the handshake's), or lifts the bound (`None`).
    pub fn set_timeouts(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_read_timeout(timeout)?,
            Socket::Unix(s) => s.set_read_timeout(timeout)?,
        }
        self.set_write_timeout(timeout)
    }

    /// Whether reads and writes return `WouldBlock` rather than wait (the TLS relay's network
    /// socket is non-blocking once the handshake is done).
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_nonblocking(nonblocking),
            Socket::Unix(s) => s.set_nonblocking(nonblocking),
        }
    }

    /// Bounds each write only (the socket is shared by its clones, so this holds for all).
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_write_timeout(timeout),
            Socket::Unix(s) => s.set_write_timeout(timeout),
        }
    }
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Socket::Tcp(s) => s.as_fd(),
            Socket::Unix(s) => s.as_fd(),
        }
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write_vectored(bufs),
            Socket::Unix(s) => s.write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
