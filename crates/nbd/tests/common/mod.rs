//! Shared setup for the integration tests: a server running its accept loop on a Unix socket in a
//! private directory, and clients connected to it.

#![allow(dead_code)]

pub mod scripted;

use std::io;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use uraid_nbd::testing::{MemExport, TestClient};
use uraid_nbd::{ListenAddr, Server, ServerConfig};

pub const EXPORT_NAME: &str = "array0";

pub struct Running {
    pub server: Server,
    pub export: Arc<MemExport>,
    pub path: PathBuf,
    dir: PathBuf,
    run: Option<JoinHandle<io::Result<()>>>,
}

pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "uraid-nbd-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn config() -> ServerConfig {
    ServerConfig { export_name: EXPORT_NAME.into(), description: Some("test array".into()), ..ServerConfig::default() }
}

/// A pattern that differs at every offset, so misplaced data is caught.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add((i >> 8) as u8).wrapping_add(seed)).collect()
}

pub fn start(export: Arc<MemExport>, config: ServerConfig) -> Running {
    let dir = temp_dir("srv");
    let path = dir.join("nbd.sock");
    let listener = ListenAddr::Unix(path.clone()).bind().unwrap();
    let server = Server::new(export.clone(), config);
    let runner = server.clone();
    let run = thread::spawn(move || runner.run(listener));
    Running { server, export, path, dir, run: Some(run) }
}

impl Running {
    pub fn connect(&self) -> UnixStream {
        let s = UnixStream::connect(&self.path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    }

    pub fn client(&self) -> TestClient<UnixStream> {
        TestClient::start_default(self.connect()).unwrap()
    }

    /// A client in transmission through NBD_OPT_GO, with structured replies if asked.
    pub fn go(&self, structured: bool) -> TestClient<UnixStream> {
        let mut c = self.client();
        if structured {
            c.negotiate_structured().unwrap();
        }
        c.go(EXPORT_NAME, &[]).unwrap();
        c
    }

    /// Stops the server and waits for `run` to return.
    pub fn stop(&mut self) {
        self.server.stop();
        if let Some(run) = self.run.take() {
            run.join().unwrap().unwrap();
        }
    }

    pub fn run_finished(&self) -> bool {
        match &self.run {
            None => true,
            Some(r) => r.is_finished(),
        }
    }

    pub fn wait_run(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.run_finished() {
            if Instant::now() > deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
        if let Some(run) = self.run.take() {
            run.join().unwrap().unwrap();
        }
        true
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.server.stop();
        if let Some(run) = self.run.take() {
            if !thread::panicking() {
                let _ = run.join();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Polls `cond` until it holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}
