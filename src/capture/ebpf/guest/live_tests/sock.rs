//! The live tests' packet sockets: send a frame out of a device, and read what arrives at one
//! with any tag the kernel took out put back in (`PACKET_AUXDATA`), as it was on the wire.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

pub fn ifindex(dev: &str) -> u32 {
    let c = std::ffi::CString::new(dev).unwrap();
    // SAFETY: `c` is a NUL-terminated name that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert_ne!(i, 0, "no device {dev}");
    i
}

/// `struct tpacket_auxdata` (UAPI).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct AuxData {
    status: u32,
    len: u32,
    snaplen: u32,
    mac: u16,
    net: u16,
    vlan_tci: u16,
    vlan_tpid: u16,
}

const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// A packet socket on one device (every protocol).
pub struct Sock(OwnedFd);

impl Sock {
    pub fn open(dev: &str) -> Sock {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
        assert!(fd >= 0, "packet socket: {}", io::Error::last_os_error());
        // SAFETY: a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let one: libc::c_int = 1;
        // SAFETY: `one` is a live int of the length passed.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_AUXDATA,
                (&one as *const libc::c_int).cast(),
                4,
            )
        };
        assert_eq!(rc, 0, "PACKET_AUXDATA: {}", io::Error::last_os_error());
        // SAFETY: an all-zero sockaddr_ll is valid; the fields are set below.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = proto;
        sa.sll_ifindex = ifindex(dev) as i32;
        // SAFETY: `sa` is a live sockaddr_ll of the length passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(rc, 0, "bind to {dev}: {}", io::Error::last_os_error());
        Sock(fd)
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` is live for the call and its length is passed.
        let n = unsafe { libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(n, frame.len() as isize, "{}", io::Error::last_os_error());
    }

    /// The frames received (not sent) within `wait`, tags put back.
    pub fn drain(&self, wait: Duration) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let end = Instant::now() + wait;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let mut p = libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one live pollfd.
            if unsafe { libc::poll(&mut p, 1, left.as_millis() as i32) } <= 0 {
                return out;
            }
            if let Some(f) = self.recv() {
                out.push(f);
            }
        }
    }

    /// One frame; None for one this host sent.
    fn recv(&self) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        let mut ctl = [0u64; 16];
        // SAFETY: all-zero sockaddr_ll and msghdr are valid; the pointers are set below.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut sa as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&ctl);
        // SAFETY: every buffer `msg` points to is live and of the length it says.
        let n = unsafe { libc::recvmsg(self.0.as_raw_fd(), &mut msg, 0) };
        let n = usize::try_from(n).expect("recvmsg");
        buf.truncate(n);
        if sa.sll_pkttype == libc::PACKET_OUTGOING {
            return None;
        }
        if let Some(aux) = aux_data(&msg) {
            if aux.status & TP_STATUS_VLAN_VALID != 0 && buf.len() >= 12 {
                let tpid = if aux.status & TP_STATUS_VLAN_TPID_VALID != 0 {
                    aux.vlan_tpid
                } else {
                    0x8100
                };
                let mut tag = tpid.to_be_bytes().to_vec();
                tag.extend_from_slice(&aux.vlan_tci.to_be_bytes());
                buf.splice(12..12, tag);
            }
        }
        Some(buf)
    }
}

fn aux_data(msg: &libc::msghdr) -> Option<AuxData> {
    // SAFETY: `msg` was filled by recvmsg; the CMSG macros walk its control buffer within
    // msg_controllen, and the aux data is read unaligned from inside it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
                let p = libc::CMSG_DATA(c).cast::<AuxData>();
                return Some(std::ptr::read_unaligned(p));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}
