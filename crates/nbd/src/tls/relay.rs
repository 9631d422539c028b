//! The TLS relay: one thread per TLS connection that owns the OpenSSL session and moves bytes
//! between it and one end of a Unix socket pair; the protocol code gets the other end.
//!
//! Why a relay rather than handing the `SslStream` to the protocol code: both the server and the
//! client read on one thread while other threads write, and an OpenSSL session must not be read
//! and written from two threads at once (a TLS 1.3 read may itself need to write, a write may
//! need to read). With the relay, the protocol code keeps a plain socket it can clone, shut
//! down and splice into, exactly as without TLS, and only this thread touches the session. The
//! cost is a copy through the socket pair, small beside encryption.
//!
//! The thread runs until the local end has closed and everything it sent has been encrypted and
//! handed to the network (then a `close_notify` is sent), or the network side fails. When the
//! peer ends its side, the local end's reads see end-of-file. Once the local end has closed, what
//! it left unsent gets `linger` to go out; a peer that stops reading cannot hold the thread.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use openssl::ssl::{ErrorCode, SslStream};

use crate::client::socket::Socket;
use crate::stream::Stream;

/// Bytes moved per read, either way.
const CHUNK: usize = 64 << 10;

/// A running relay: the local end to hand to the protocol code, the thread, and why the TLS
/// session failed if it did.
pub struct Relay {
    pub local: UnixStream,
    pub thread: JoinHandle<()>,
    pub failure: Failure,
}

/// Why the relay's TLS session failed (a TLS alert from the peer, a broken socket), set before
/// the local end is shut down, so whoever sees that end close can ask why. In TLS 1.3 a client's
/// handshake is over before the server has checked the client's certificate: a refusal then
/// arrives as an alert on the first read, and only the relay sees it.
#[derive(Clone, Default)]
pub struct Failure(Arc<Mutex<Option<String>>>);

impl Failure {
    pub fn reason(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, e: &openssl::ssl::Error) {
        let reason = match (e.ssl_error(), e.io_error()) {
            (Some(stack), _) => super::error::describe_stack(stack),
            (None, Some(io)) => io.to_string(),
            (None, None) => "the peer closed the connection".into(),
        };
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(reason);
    }
}

/// A network socket a relay can run on: the server's and the client's.
pub(crate) trait NetSocket: Read + Write + AsFd + Send + 'static {
    fn make_nonblocking(&self) -> io::Result<()>;
}

impl<S: Stream> NetSocket for S {
    fn make_nonblocking(&self) -> io::Result<()> {
        self.set_nonblocking(true)
    }
}

impl NetSocket for Socket {
    fn make_nonblocking(&self) -> io::Result<()> {
        self.set_nonblocking(true)
    }
}

/// Starts relaying `tls`, whose handshake is done. Its socket is made non-blocking.
pub fn spawn<S: NetSocket>(tls: SslStream<S>, linger: Duration, name: &str) -> io::Result<Relay> {
    tls.get_ref().make_nonblocking()?;
    let (local, ours) = UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    let failure = Failure::default();
    let pump = Pump::new(tls, ours, linger, failure.clone());
    let thread = thread::Builder::new().name(name.into()).spawn(move || pump.run())?;
    Ok(Relay { local, thread, failure })
}

/// Bytes taken from one side and not yet all given to the other: `buf[start..end]`. A side is
/// only read when its `Pending` is empty, so each read goes straight into the whole buffer and no
/// byte is copied twice.
struct Pending {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Pending {
    fn new() -> Self {
        Pending { buf: vec![0; CHUNK].into_boxed_slice(), start: 0, end: 0 }
    }
    fn is_empty(&self) -> bool {
        self.start >= self.end
    }
    fn rest(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.is_empty() {
            self.clear();
        }
    }
    fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }
    /// Where the next read goes; only while empty, so nothing pending is overwritten.
    fn space(&mut self) -> &mut [u8] {
        debug_assert!(self.is_empty(), "reading into a buffer that still holds bytes");
        &mut self.buf
    }
    /// The read into [`Pending::space`] gave `n` bytes.
    fn filled(&mut self, n: usize) {
        self.start = 0;
        self.end = n;
    }
}

/// What one pass needs before it can go on: readiness of the network socket and of the local
/// end, as `poll` events.
#[derive(Default)]
struct Wants {
    net: libc::c_short,
    local: libc::c_short,
}

struct Pump<S: Read + Write> {
    tls: SslStream<S>,
    local: UnixStream,
    linger: Duration,
    /// Decrypted, for the local end.
    inbound: Pending,
    /// From the local end, to encrypt.
    outbound: Pending,
    /// The peer may still send.
    peer_sending: bool,
    /// The local end still takes what the peer sends (it has not shut down its reading).
    local_taking: bool,
    /// The local end was told the peer has finished.
    local_told_eof: bool,
    /// When the local end closed (it sends no more), for the linger bound.
    local_closed_at: Option<Instant>,
    failure: Failure,
}

enum Step {
    Progress,
    Blocked,
    /// The network side failed; the relay ends.
    Failed,
}

impl<S: NetSocket> Pump<S> {
    fn new(tls: SslStream<S>, local: UnixStream, linger: Duration, failure: Failure) -> Self {
        Pump {
            tls,
            local,
            linger,
            inbound: Pending::new(),
            outbound: Pending::new(),
            peer_sending: true,
            local_taking: true,
            local_told_eof: false,
            local_closed_at: None,
            failure,
        }
    }

    fn run(mut self) {
        loop {
            let mut wants = Wants::default();
            // Each direction in turn, every pass: a step that cannot go on says what it waits for.
            let steps = [
                self.decrypt_incoming(&mut wants),
                self.deliver_incoming(&mut wants),
                self.take_outgoing(&mut wants),
                self.encrypt_outgoing(&mut wants),
            ];
            if steps.iter().any(|s| matches!(s, Step::Failed)) {
                break;
            }
            if self.local_closed_at.is_some() && self.outbound.is_empty() {
                // Everything the local end sent is out: say goodbye (once; a peer that is gone
                // or slow to read it changes nothing) and end.
                let _ = self.tls.shutdown();
                break;
            }
            if !self.peer_sending && self.inbound.is_empty() && !self.local_told_eof {
                let _ = self.local.shutdown(Shutdown::Write);
                self.local_told_eof = true;
            }
            if steps.iter().any(|s| matches!(s, Step::Progress)) {
                continue;
            }
            let timeout = match self.local_closed_at {
                Some(at) => match self.linger.checked_sub(at.elapsed()) {
                    Some(left) => Some(left),
                    None => break,
                },
                None => None,
            };
            if !self.wait(&wants, timeout) {
                break;
            }
        }
        // Whatever the local end still does fails or sees the end now.
        let _ = self.local.shutdown(Shutdown::Both);
    }

    /// Decrypts what the peer sent, if there is room for it.
    fn decrypt_incoming(&mut self, wants: &mut Wants) -> Step {
        if !self.peer_sending || !self.inbound.is_empty() {
            return Step::Blocked;
        }
        // A close_notify, or (IGNORE_UNEXPECTED_EOF) the socket simply closing, reads as the end:
        // NBD's own framing tells a cut-off message from a finished one.
        let read = self.tls.ssl_read(self.inbound.space()).or_else(|e| match e.code() {
            ErrorCode::ZERO_RETURN => Ok(0),
            _ => Err(e),
        });
        match read {
            Ok(0) => {
                self.peer_sending = false;
                Step::Progress
            }
            Ok(n) => {
                // Read all the same when the local end no longer takes them, so the peer is not
                // held up; they are then dropped.
                if self.local_taking {
                    self.inbound.filled(n);
                }
                Step::Progress
            }
            Err(e) => self.net_blocked_or_failed(e, wants),
        }
    }

    /// Hands decrypted bytes to the local end.
    fn deliver_incoming(&mut self, wants: &mut Wants) -> Step {
        if self.inbound.is_empty() {
            return Step::Blocked;
        }
        match (&self.local).write(self.inbound.rest()) {
            Ok(n) => {
                self.inbound.consume(n);
                Step::Progress
            }
            Err(e) => retry_local(&e, libc::POLLOUT, wants).unwrap_or_else(|| {
                // The local end no longer reads (it shut down its reading, or is gone): what the
                // peer sends from now on is read and dropped.
                self.local_taking = false;
                self.inbound.clear();
                Step::Progress
            }),
        }
    }

    /// Takes what the local end sent, if the previous piece is out.
    fn take_outgoing(&mut self, wants: &mut Wants) -> Step {
        if self.local_closed_at.is_some() || !self.outbound.is_empty() {
            return Step::Blocked;
        }
        let read = match (&self.local).read(self.outbound.space()) {
            Err(e) => match retry_local(&e, libc::POLLIN, wants) {
                Some(step) => return step,
                None => Err(e),
            },
            read => read,
        };
        match read {
            Ok(n) if n > 0 => self.outbound.filled(n),
            // End-of-file, or a local end that broke: either way it sends no more.
            _ => self.local_closed_at = Some(Instant::now()),
        }
        Step::Progress
    }

    /// Encrypts and sends what the local end sent.
    fn encrypt_outgoing(&mut self, wants: &mut Wants) -> Step {
        if self.outbound.is_empty() {
            return Step::Blocked;
        }
        match self.tls.ssl_write(self.outbound.rest()) {
            Ok(n) => {
                self.outbound.consume(n);
                Step::Progress
            }
            Err(e) => self.net_blocked_or_failed(e, wants),
        }
    }

    /// An OpenSSL call on the network side that did not go through: it waits for the socket to be
    /// readable or writable, or the session failed (and the relay ends, saying why).
    fn net_blocked_or_failed(&self, e: openssl::ssl::Error, wants: &mut Wants) -> Step {
        match e.code() {
            ErrorCode::WANT_READ => {
                wants.net |= libc::POLLIN;
                Step::Blocked
            }
            ErrorCode::WANT_WRITE => {
                wants.net |= libc::POLLOUT;
                Step::Blocked
            }
            _ => {
                self.failure.set(&e);
                Step::Failed
            }
        }
    }

    /// Waits until a side is ready as `wants` says, or `timeout`. False if polling failed.
    fn wait(&self, wants: &Wants, timeout: Option<Duration>) -> bool {
        // A side nothing waits on is left out (-1): its hang-up would wake the poll at once, over
        // and over, while the relay is waiting on the other side.
        let fd_if = |want: libc::c_short, fd: i32| if want != 0 { fd } else { -1 };
        let mut fds = [
            libc::pollfd {
                fd: fd_if(wants.net, self.tls.get_ref().as_fd().as_raw_fd()),
                events: wants.net,
                revents: 0,
            },
            libc::pollfd { fd: fd_if(wants.local, self.local.as_raw_fd()), events: wants.local, revents: 0 },
        ];
        let ms = timeout.map_or(-1, |t| t.as_millis().clamp(1, i32::MAX as u128) as libc::c_int);
        // SAFETY: two valid pollfds whose descriptors stay open for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        n >= 0 || io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
    }
}

/// A local read or write that did not go through but only has to be tried again: once the local
/// end is ready for `event` (it would block), or at once (interrupted). `None` for a real failure.
fn retry_local(e: &io::Error, event: libc::c_short, wants: &mut Wants) -> Option<Step> {
    match e.kind() {
        io::ErrorKind::WouldBlock => {
            wants.local |= event;
            Some(Step::Blocked)
        }
        io::ErrorKind::Interrupted => Some(Step::Progress),
        _ => None,
    }
}
