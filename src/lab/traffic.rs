//! Bulk TCP traffic for the labs. Part of the binary so a guest or namespace needs no iperf.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Accepts connections forever and discards what arrives; one thread per connection keeps a
/// slow sender from stalling the others (this is test tooling, not the daemon).
pub fn run_sink(listen: &str) -> io::Result<()> {
    let listener = TcpListener::bind(listen)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}")))?;
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 256 * 1024];
            while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
        });
    }
    Ok(())
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
