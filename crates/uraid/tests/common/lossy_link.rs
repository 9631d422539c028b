//! A network link with delay and loss made in user space, for kernels without netem: two TAP
//! devices, one left in the test's namespace and one moved into a host's, and a thread per
//! direction that carries Ethernet frames across, dropping a share of them at random and
//! holding each for the link's delay (order kept, as netem keeps it without jitter).
//!
//! Everything the kernel puts on the wire (ARP, TCP segments and their retransmissions) goes
//! through it, so TCP sees real loss and a real round-trip time.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `TUNSETIFF` from `<linux/if_tun.h>`: `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// How a link treats every frame, in each direction.
#[derive(Debug, Clone, Copy)]
pub struct Impairment {
    pub delay: Duration,
    /// Frames dropped per million.
    pub loss_ppm: u32,
}

/// A running link; its threads stop and its devices go when it is dropped (the inner one with
/// the namespace it was moved into, or here).
pub struct LossyLink {
    pub outer: String,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Frames carried and dropped, both directions.
    pub carried: Arc<AtomicU64>,
    pub dropped: Arc<AtomicU64>,
}

fn ip(args: &[&str]) -> io::Result<()> {
    let o = Command::new("ip").args(args).output()?;
    if o.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("ip {args:?}: {}", String::from_utf8_lossy(&o.stderr).trim())))
    }
}

/// Attach to the TAP device `name`, creating it (without the 4-byte packet information header,
/// so a read is one Ethernet frame).
fn open_tap(name: &str) -> io::Result<File> {
    let file = OpenOptions::new().read(true).write(true).open("/dev/net/tun")?;
    // struct ifreq: the name (16 bytes), then the flags as a short, in a 40-byte union.
    let mut req = [0u8; 40];
    req[..name.len()].copy_from_slice(name.as_bytes());
    let flags = (libc::IFF_TAP | libc::IFF_NO_PI) as i16;
    req[16..18].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: TUNSETIFF reads and writes a struct ifreq, which `req` is large enough to hold.
    if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF, req.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

impl LossyLink {
    /// A link named `name` (the devices are `{name}a` here and `{name}b` in `namespace`), with
    /// `outer_addr` (CIDR) on this side and `inner_addr` (CIDR) on the host's.
    pub fn new(
        name: &str,
        namespace: &str,
        outer_addr: &str,
        inner_addr: &str,
        how: Impairment,
    ) -> io::Result<LossyLink> {
        let (outer, inner) = (format!("{name}a"), format!("{name}b"));
        let a = open_tap(&outer)?;
        let b = open_tap(&inner)?;
        // The attached descriptor follows its device into the namespace.
        ip(&["link", "set", &inner, "netns", namespace])?;
        ip(&["addr", "add", outer_addr, "dev", &outer])?;
        ip(&["link", "set", &outer, "up"])?;
        ip(&["netns", "exec", namespace, "ip", "addr", "add", inner_addr, "dev", &inner])?;
        ip(&["netns", "exec", namespace, "ip", "link", "set", &inner, "up"])?;
        let stop = Arc::new(AtomicBool::new(false));
        let carried = Arc::new(AtomicU64::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        for (seed, from, to) in [(1u64, a.try_clone()?, b.try_clone()?), (2, b, a)] {
            let (stop, carried, dropped) = (Arc::clone(&stop), Arc::clone(&carried), Arc::clone(&dropped));
            threads.push(std::thread::spawn(move || carry(from, to, how, seed, &stop, &carried, &dropped)));
        }
        Ok(LossyLink { outer, stop, threads, carried, dropped })
    }
}

/// Move frames from `from` to `to` until `stop`: each dropped with the link's chance, the rest
/// written once the delay since it was read has passed.
fn carry(
    mut from: File,
    mut to: File,
    how: Impairment,
    seed: u64,
    stop: &AtomicBool,
    carried: &AtomicU64,
    dropped: &AtomicU64,
) {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut held: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while held.front().is_some_and(|(due, _)| *due <= now) {
            let (_, frame) = held.pop_front().unwrap();
            // A device that is down refuses frames: they are lost, as on a wire.
            let _ = to.write(&frame);
            carried.fetch_add(1, Ordering::Relaxed);
        }
        let wait = held.front().map_or(Duration::from_millis(50), |(due, _)| due.saturating_duration_since(now));
        let mut pfd = libc::pollfd { fd: from.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // Rounded up: a frame due in under a millisecond must not make poll return at once,
        // over and over (a spin that takes a core from the array being tested).
        let ms = wait.as_micros().div_ceil(1000).clamp(1, 50) as i32;
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        if ready <= 0 || pfd.revents & libc::POLLIN == 0 {
            continue;
        }
        let Ok(n) = from.read(&mut buf) else { continue };
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (x % 1_000_000) < u64::from(how.loss_ppm) {
            dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        held.push_back((Instant::now() + how.delay, buf[..n].to_vec()));
    }
}

impl Drop for LossyLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The threads' descriptors are closed now, which removes both devices (they are not
        // persistent); this is for one a failed set-up left behind.
        let _ = ip(&["link", "del", &self.outer]);
    }
}
