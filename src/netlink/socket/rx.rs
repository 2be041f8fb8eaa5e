//! Receiving one rtnetlink datagram whole, or reporting its loss as an overrun.

use std::io;

use log::warn;
use netlink_sys::Socket;

/// The kernel builds dump datagrams of at most ~32 KiB; notifications are one message each.
/// Twice that leaves room for an unusually large link message without a resize.
pub(super) const RX_BUF_INITIAL: usize = 64 * 1024;
/// A datagram larger than this is not an rtnetlink message we could use.
const RX_BUF_MAX: usize = 1024 * 1024;

/// Reads one datagram into `rx`. `Ok(false)` when nothing is queued.
pub(super) fn receive(socket: &Socket, rx: &mut Vec<u8>) -> io::Result<bool> {
    loop {
        rx.clear();
        match socket.recv(rx, libc::MSG_DONTWAIT | libc::MSG_TRUNC) {
            Ok(len) if len > rx.len() => {
                // The rest of the datagram is gone. Whatever it held (dump entries or
                // notifications) must be recovered by re-dumping, exactly as after an
                // overrun, so report it as one.
                warn!(
                    "rtnetlink datagram of {len} bytes truncated to {}; treating as overrun",
                    rx.len()
                );
                rx.clear();
                rx.reserve(len.next_power_of_two().min(RX_BUF_MAX));
                return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
            }
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}
