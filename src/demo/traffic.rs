//! Bulk TCP traffic for the labs, so a guest or namespace needs no iperf. `rlbd-lab sink` and
//! `rlbd-lab source` run these as processes inside namespaces (tests, QEMU guests); `rlbd demo`
//! runs them as threads that enter the lab's namespaces, so the product binary needs no traffic
//! subcommand.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Accepts connections and discards what arrives, until `stop` is set (never, without one); one
/// thread per connection keeps a slow sender from stalling the others (this is test tooling, not
/// the daemon).
pub fn run_sink(listen: &str, stop: Option<Arc<AtomicBool>>) -> io::Result<()> {
    let listener = TcpListener::bind(listen)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}")))?;
    // With a stop flag the accept loop polls it; a process sink is simply killed.
    listener.set_nonblocking(stop.is_some())?;
    loop {
        if stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Ok(());
        }
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream.set_nonblocking(false)?;
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 256 * 1024];
                    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(_) => {}
        }
    }
}

/// Sends as fast as TCP allows until `seconds` have passed; reconnects if the connection
/// breaks (a port going down mid-test must not end the traffic). Returns bytes sent.
pub fn run_source(to: &str, seconds: f64) -> io::Result<u64> {
    let addr = to
        .to_socket_addrs()
        .map_err(|e| io::Error::new(e.kind(), format!("bad address {to}: {e}")))?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("bad address {to}")))?;
    let deadline = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
    let buf = vec![0x5au8; 64 * 1024];
    let mut sent = 0u64;
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(mut stream) = TcpStream::connect_timeout(&addr, left.min(Duration::from_secs(2)))
        else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        // A short write timeout lets the deadline end a stream stalled by a dead path.
        stream.set_write_timeout(Some(Duration::from_millis(200)))?;
        while Instant::now() < deadline {
            match stream.write(&buf) {
                Ok(n) => sent += n as u64,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
    }
    Ok(sent)
}

/// Runs `f` on a new thread inside the network namespace `ns` (as `ip netns` names it, under
/// /run/netns). Only that thread changes namespace: sockets it opens belong to `ns`.
pub fn spawn_in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<JoinHandle<io::Result<T>>> {
    let path = format!("/run/netns/{ns}");
    let file = File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    Ok(std::thread::spawn(move || {
        // SAFETY: setns on a valid namespace fd affects only the calling thread's namespace.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        drop(file);
        f()
    }))
}
