//! The one bpf(2) command the guests need that `sys` lacks: deleting a map element. (It
//! belongs in `sys`; it is here because this change was to leave `sys` alone.)

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

const BPF_MAP_DELETE_ELEM: libc::c_int = 3;

/// `bpf_attr` for an element command.
#[repr(C)]
#[derive(Default)]
struct Elem {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// Deletes `key` from `map`; a missing key is no error.
pub fn delete(map: BorrowedFd<'_>, key: &[u8]) -> io::Result<()> {
    let mut attr = Elem {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        ..Elem::default()
    };
    // SAFETY: `attr` is a live #[repr(C)] bpf_attr prefix of its size for the whole call, and
    // `key` (the map's key size, which the caller passes) outlives it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_DELETE_ELEM,
            (&mut attr as *mut Elem).cast::<libc::c_void>(),
            std::mem::size_of::<Elem>() as libc::c_uint,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    match io::Error::last_os_error() {
        e if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        e => Err(e),
    }
}

/// `bpf_attr.test` up to `duration`.
#[cfg(test)]
#[repr(C)]
#[derive(Default)]
struct TestRun {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
}

/// Runs `prog` `repeat` times on `frame` in the kernel (`BPF_PROG_TEST_RUN`): its verdict and
/// the mean time of one run in ns.
#[cfg(test)]
pub fn test_run(prog: BorrowedFd<'_>, frame: &[u8], repeat: u32) -> io::Result<(u32, u32)> {
    const BPF_PROG_TEST_RUN: libc::c_int = 10;
    let mut attr = TestRun {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat,
        ..TestRun::default()
    };
    // SAFETY: as in `delete`; `frame` outlives the call and no output buffer is given.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            (&mut attr as *mut TestRun).cast::<libc::c_void>(),
            std::mem::size_of::<TestRun>() as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((attr.retval, attr.duration))
}
