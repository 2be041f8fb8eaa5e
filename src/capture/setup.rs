//! The system calls that open a capture socket, in the order `socket.rs` describes: a quiet
//! socket, its receive ring, the bind, the filter.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::{self, NonNull};

use libc::{c_int, c_void, sock_filter, socklen_t};

use super::filter;
use super::ring::{Ring, RingConfig};

pub(super) fn with_ctx(name: &str, ifindex: u32, what: &str, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("{what} on {name} (ifindex {ifindex}): {e}"),
    )
}

pub(super) fn check(rc: c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn setsockopt<T>(fd: &OwnedFd, level: c_int, opt: c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` is a live, initialized T for the whole call and the length passed is exactly
    // its size; the kernel only reads (copies) it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (val as *const T).cast::<c_void>(),
            mem::size_of::<T>() as socklen_t,
        )
    })
}

pub(super) fn attach_filter(fd: &OwnedFd, prog: &[sock_filter]) -> io::Result<()> {
    let len = u16::try_from(prog.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "BPF program too long"))?;
    let fprog = libc::sock_fprog {
        len,
        // The kernel copies the program and never writes through this pointer.
        filter: prog.as_ptr().cast_mut(),
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
}

/// A nonblocking AF_PACKET socket that receives nothing yet (protocol 0, drop-all filter).
pub(super) fn quiet_socket() -> Result<OwnedFd, (&'static str, io::Error)> {
    // SAFETY: plain socket(2) call with constant arguments; no pointers involved.
    let raw = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if raw < 0 {
        return Err(("socket(AF_PACKET)", io::Error::last_os_error()));
    }
    // SAFETY: `raw` is a freshly created descriptor that nothing else owns or closes.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    attach_filter(&fd, &filter::drop_all()).map_err(|e| ("SO_ATTACH_FILTER (drop all)", e))?;
    Ok(fd)
}

/// Sets up the TPACKET_V3 receive ring of `fd` and maps it.
pub(super) fn map_ring(
    fd: &OwnedFd,
    config: &RingConfig,
) -> Result<Ring, (&'static str, io::Error)> {
    let version = libc::tpacket_versions::TPACKET_V3 as c_int;
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &version)
        .map_err(|e| ("PACKET_VERSION=TPACKET_V3", e))?;
    let req = libc::tpacket_req3 {
        tp_block_size: config.block_size,
        tp_block_nr: config.block_count,
        tp_frame_size: config.frame_size,
        tp_frame_nr: (config.block_size / config.frame_size) * config.block_count,
        tp_retire_blk_tov: config.retire_timeout_ms,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
        .map_err(|e| ("PACKET_RX_RING", e))?;
    let size = config.block_size as usize * config.block_count as usize;
    // SAFETY: maps the ring the kernel just allocated for this socket (PACKET_RX_RING succeeded
    // with exactly `size` bytes) at an address of the kernel's choosing; no existing memory is
    // affected.
    let base = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(("mmap of the receive ring", io::Error::last_os_error()));
    }
    let base = NonNull::new(base.cast::<u8>()).expect("mmap returned a null mapping");
    // SAFETY: `base` is the fresh mapping of exactly this geometry made just above; the Ring is
    // its only owner.
    Ok(unsafe {
        Ring::from_mapping(
            base,
            config.block_size as usize,
            config.block_count as usize,
        )
    })
}

/// Gives the receive ring's memory back to the kernel (a ring request of no blocks). The
/// mapping must be gone first: the kernel refuses (EBUSY) while any of it is mapped.
pub(super) fn free_ring(fd: &OwnedFd) -> io::Result<()> {
    let none = libc::tpacket_req3 {
        tp_block_size: 0,
        tp_block_nr: 0,
        tp_frame_size: 0,
        tp_frame_nr: 0,
        tp_retire_blk_tov: 0,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &none)
}

/// Binds `fd` to every protocol (ETH_P_ALL) on interface `ifindex`.
pub(super) fn bind_all(fd: &OwnedFd, ifindex: c_int) -> io::Result<()> {
    bind_proto(fd, ifindex, libc::ETH_P_ALL as u16)
}

/// An EtherType no frame of rlbd's interest carries (IEEE 802 local experimental 2): a socket
/// bound to it on an interface is no tap for any other frame, and still sends there. (Binding
/// to protocol 0 does not unbind a socket.)
pub(super) const ETH_P_NONE: u16 = 0x88b6;

/// Binds `fd` to protocol `proto` on interface `ifindex`.
pub(super) fn bind_proto(fd: &OwnedFd, ifindex: c_int, proto: u16) -> io::Result<()> {
    let sll = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: proto.to_be(),
        sll_ifindex: ifindex,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: `sll` is a valid sockaddr_ll and the length passed is exactly its size.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
            mem::size_of::<libc::sockaddr_ll>() as socklen_t,
        )
    })
}

/// The destination of `frame` sent out of `ifindex`: its destination MAC, with its EtherType
/// as the protocol.
pub(super) fn link_addr(ifindex: u32, frame: &[u8]) -> libc::sockaddr_ll {
    let mut addr = [0u8; 8];
    if let Some(dst) = frame.get(..6) {
        addr[..6].copy_from_slice(dst);
    }
    let proto = frame
        .get(12..14)
        .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]]));
    libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: proto,
        sll_ifindex: ifindex as c_int,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 6,
        sll_addr: addr,
    }
}
