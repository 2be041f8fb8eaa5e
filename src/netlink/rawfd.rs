//! The two calls on the rtnetlink socket's descriptor that netlink-sys does not offer: a larger
//! receive buffer, and a bounded wait for readability.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use log::debug;
use netlink_sys::Socket;

/// Socket receive buffer. Neighbour tables can change by thousands of entries at once (a
/// flush, a failover); every notification lost costs a full re-dump.
const SO_RCVBUF_BYTES: libc::c_int = 4 * 1024 * 1024;

/// Raises the socket's receive buffer, past `rmem_max` when we have CAP_NET_ADMIN.
///
/// `RLBD_TEST_NETLINK_RCVBUF` (bytes), a hidden test knob, sets it instead: the fault tests shrink
/// it to make the kernel drop notifications on purpose.
pub(super) fn grow_receive_buffer(socket: &Socket) {
    let fd = socket.as_raw_fd();
    let value = std::env::var("RLBD_TEST_NETLINK_RCVBUF")
        .ok()
        .and_then(|v| v.parse::<libc::c_int>().ok())
        .unwrap_or(SO_RCVBUF_BYTES);
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: `value` is a live c_int and its size is passed alongside.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return;
        }
    }
    debug!(
        "could not raise rtnetlink receive buffer: {}",
        io::Error::last_os_error()
    );
}

/// Waits until the socket is readable or `timeout` passes (which is not an error: the caller
/// decides).
pub(super) fn wait_readable(socket: &Socket, timeout: Duration) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis())
        .unwrap_or(libc::c_int::MAX)
        .max(1);
    // SAFETY: one valid pollfd for the duration of the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
