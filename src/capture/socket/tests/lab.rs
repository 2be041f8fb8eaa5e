//! The live capture test's lab: addresses, a veth pair's sockets, and draining what they
//! capture.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use mio::{Interest, Token};

use crate::capture::frame::tests::{arp_frame, ipv4_frame};
use crate::capture::frame::{parse, Frame};
use crate::capture::socket::{CaptureSocket, FrameMeta, RingConfig};
use crate::capture::Mac;

// Test addresses: 198.18.0.0/15 only; locally administered MACs.
pub(crate) const CAP_MAC: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x01);
pub(crate) const PEER_MAC: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x02);
pub(crate) const CLIENT: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x09);
pub(crate) const OTHER: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x77);
pub(crate) const SERVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub(crate) const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 9);
pub(crate) const OTHER_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 7);

pub(crate) type Captured = Vec<(FrameMeta, Vec<u8>)>;

/// Moves this (test-spawned) thread into a network namespace of its own and makes the veth
/// pair `cap0` (`CAP_MAC`) / `peer0` (`PEER_MAC`) there, up, with IPv6 off: the new links' own
/// Neighbor Discovery (DAD, router solicitations) would pass the filters the tests want quiet.
/// (Sysctls under /proc/sys/net follow the opening thread's namespace.)
pub(crate) fn veth_pair() -> Result<(), String> {
    // SAFETY: unshare only moves this (test-spawned) thread into a new network namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        ));
    }
    ip("link set lo up")?;
    for key in ["all", "default"] {
        std::fs::write(format!("/proc/sys/net/ipv6/conf/{key}/disable_ipv6"), "1")
            .map_err(|e| format!("disable_ipv6: {e}"))?;
    }
    ip("link add cap0 address 02:52:4c:42:00:01 type veth peer name peer0 address 02:52:4c:42:00:02")?;
    ip("link set cap0 up")?;
    ip("link set peer0 up")
}

pub(crate) fn ip(args: &str) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args.split_whitespace())
        .output()
        .map_err(|e| format!("cannot run `ip {args}`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {args}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

pub(crate) fn small_ring() -> RingConfig {
    RingConfig {
        block_size: 1 << 16,
        block_count: 4,
        retire_timeout_ms: 10,
        ..RingConfig::default()
    }
}

/// Drains `sock` (in chunks of `chunk`) until `want` frames arrived or `timeout` passed, then
/// keeps listening for `linger` to catch anything unexpected.
pub(crate) fn collect(
    sock: &mut CaptureSocket,
    want: usize,
    chunk: usize,
    timeout: Duration,
    linger: Duration,
) -> Captured {
    let mut poll = mio::Poll::new().unwrap();
    poll.registry()
        .register(sock, Token(7), Interest::READABLE)
        .unwrap();
    let mut events = mio::Events::with_capacity(4);
    let mut got: Captured = Vec::new();
    let start = Instant::now();
    let mut deadline = start + timeout;
    let mut lingering = false;
    loop {
        loop {
            let n = sock.drain(chunk, |m, d| got.push((m, d.to_vec())));
            assert!(n <= chunk);
            if n < chunk {
                break;
            }
        }
        if got.len() >= want && !lingering {
            lingering = true;
            deadline = Instant::now() + linger;
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        // Short waits: readiness is edge-triggered and only signalled per retired block.
        let wait = (deadline - now).min(Duration::from_millis(25));
        poll.poll(&mut events, Some(wait)).unwrap();
    }
    poll.registry().deregister(sock).unwrap();
    got
}

pub(crate) fn ours(got: &Captured) -> Vec<(FrameMeta, Option<Frame>, usize)> {
    got.iter()
        .filter(|(_, d)| {
            d.len() >= 12 && (d[6..12] == CLIENT.octets() || d[6..12] == CAP_MAC.octets())
        })
        .map(|(m, d)| (*m, parse(d), d.len()))
        .collect()
}

pub(crate) struct Lab {
    pub(crate) cap: CaptureSocket,
    pub(crate) peer: CaptureSocket,
    /// A second socket on cap0 that passes ARP only: it sees what `cap` sends as OUTGOING.
    pub(crate) cap_arp: CaptureSocket,
}

pub(crate) fn to_us() -> Vec<u8> {
    ipv4_frame(CLIENT, CAP_MAC, CLIENT_IP, SERVER_IP, false, 300)
}

pub(crate) fn to_other() -> Vec<u8> {
    ipv4_frame(CLIENT, OTHER, CLIENT_IP, OTHER_IP, false, 300)
}

/// The client's broadcast ARP request for the server's address, tagged or not.
pub(crate) fn arp_request(vlan: bool) -> Vec<u8> {
    arp_frame(
        CLIENT,
        Mac::broadcast(),
        1,
        CLIENT,
        CLIENT_IP,
        Mac::zero(),
        SERVER_IP,
        vlan,
    )
}

/// Sends `sent` copies of `frame` from `peer`, an ARP request before every 80th; returns how
/// many ARP requests that was.
pub(crate) fn data_with_arp(peer: &CaptureSocket, frame: &[u8], sent: u64) -> usize {
    let req = arp_request(false);
    let mut arps = 0;
    for i in 0..sent {
        peer.send(frame).unwrap();
        if i % 80 == 0 {
            peer.send(&req).unwrap();
            arps += 1;
        }
    }
    arps
}

/// What `cap` counted since its last reading, of `sent` frames of `len` bytes counted in the
/// kernel one in `n`: each kept frame counted `n` times, so the frames are a multiple of `n` (an
/// exact count of a `sent` that is not would not be), within 15% of those sent, and the bytes
/// `len` a frame.
pub(crate) fn assert_counted_one_in(cap: &mut CaptureSocket, n: u64, sent: u64, len: u64) {
    let mut counts = Vec::new();
    cap.read_counts(&mut counts).unwrap();
    let (frames, bytes) = counts
        .iter()
        .fold((0, 0), |(f, b), d| (f + d.frames, b + d.bytes));
    // At 1 in 8 of 8,000: 1000 kept on average, a standard deviation of 30: 5 either way.
    assert_eq!(frames % n, 0, "{frames}");
    assert!(
        (sent * 85 / 100..=sent * 115 / 100).contains(&frames),
        "{frames} of {sent}"
    );
    assert_eq!(bytes, frames * len);
}

/// Nothing but what the filter passes got through (no IPv6 router solicitations etc.).
pub(crate) fn only_what_the_filter_passes(got: &Captured) {
    for (m, d) in got {
        match parse(d) {
            Some(Frame::Arp { .. }) => {}
            Some(Frame::Ipv4 { dst_mac, .. }) | Some(Frame::Ipv6 { dst_mac, .. }) => {
                assert_eq!(dst_mac, CAP_MAC)
            }
            // Neighbor Discovery passes in any direction, like ARP.
            Some(Frame::Nd { .. }) => {}
            None => panic!("unexpected frame {m:?} {d:02x?}"),
        }
    }
}
