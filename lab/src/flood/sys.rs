//! The system calls of the flood: the raw sending socket, CPU pinning and CPU time.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data for which all-zero is the empty set; CPU_SET writes inside
    // it (it ignores CPUs past the set's size) and sched_setaffinity only reads `set`.
    unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("sched_setaffinity(cpu {cpu}): {e}"),
            ));
        }
    }
    Ok(())
}

/// CPU time (user + system) of the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    rusage_ns(libc::RUSAGE_THREAD)
}

/// CPU time (user + system) of the whole process, in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    rusage_ns(libc::RUSAGE_SELF)
}

fn rusage_ns(who: libc::c_int) -> u64 {
    // SAFETY: `ru` is a writable rusage; getrusage only writes it.
    let ru = unsafe {
        let mut ru: libc::rusage = mem::zeroed();
        if libc::getrusage(who, &mut ru) != 0 {
            return 0;
        }
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A raw AF_PACKET socket bound to an interface for sending only (protocol 0: it receives
/// nothing), bypassing the qdisc.
pub(super) fn open_sender(iface: &str) -> io::Result<OwnedFd> {
    let ifindex = rlbd::capture::socket::if_index(iface)?;
    // SAFETY: plain socket(2) call with constant arguments.
    let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let one: libc::c_int = 1;
    // SAFETY: `one` is a live c_int and the length is its size. Failure only costs speed.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            (&one as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = 0;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a valid sockaddr_ll and the length passed is its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("bind to {iface}: {e}")));
    }
    Ok(fd)
}
