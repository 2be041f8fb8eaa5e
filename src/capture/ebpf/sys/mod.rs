//! bpf(2) and SO_ATTACH_BPF: creating the counting map, loading the program (with the
//! verifier's log in the error), attaching it to a socket, and reading the map. All `unsafe`
//! code of the eBPF counting lives here and in `mapped.rs` (the mmapped array).

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libc::{c_int, c_long, c_void};

use super::insn::Insn;

mod mapped;
pub use mapped::Mapped;

const BPF_MAP_CREATE: c_int = 0;
const BPF_MAP_LOOKUP_ELEM: c_int = 1;
const BPF_MAP_UPDATE_ELEM: c_int = 2;
const BPF_MAP_DELETE_ELEM: c_int = 3;
const BPF_MAP_GET_NEXT_KEY: c_int = 4;
const BPF_PROG_LOAD: c_int = 5;
const BPF_OBJ_GET_INFO_BY_FD: c_int = 15;
const BPF_MAP_LOOKUP_BATCH: c_int = 24;
const BPF_LINK_CREATE: c_int = 28;
const BPF_LINK_UPDATE: c_int = 29;
pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
pub const BPF_MAP_TYPE_LRU_PERCPU_HASH: u32 = 10;
/// A ring buffer the programs write records into and the process reads mapped (Linux >= 5.8).
pub const BPF_MAP_TYPE_RINGBUF: u32 = 27;
/// An array the process may mmap (Linux >= 5.5).
pub const BPF_F_MMAPABLE: u32 = 1 << 10;
pub const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
/// A tc classifier (`cls_bpf`), here attached direct-action at a port's ingress hook.
pub const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
/// The kernel's "operation not supported" (ENOTSUPP, not in libc): an old kernel's answer to
/// a batch lookup.
const ENOTSUPP: i32 = 524;

/// `bpf(cmd, attr, sizeof attr)`.
fn bpf<T>(cmd: c_int, attr: &mut T) -> io::Result<c_long> {
    // SAFETY: `attr` is a live, initialized #[repr(C)] bpf_attr prefix of exactly
    // size_of::<T>() bytes for the whole call; every pointer inside it was set by the caller to
    // a buffer that outlives the call and has the size the command implies.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<c_void>(),
            mem::size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn fd_of(rc: c_long) -> io::Result<OwnedFd> {
    let raw = c_int::try_from(rc).map_err(|_| io::Error::other("bpf(2) returned no descriptor"))?;
    // SAFETY: a successful BPF_MAP_CREATE / BPF_PROG_LOAD / BPF_LINK_CREATE returns a new
    // descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn name16(name: &str) -> [u8; 16] {
    // Names are [A-Za-z0-9_.], at most 15 bytes (the kernel rejects others).
    let mut n = [0u8; 16];
    for (d, c) in n.iter_mut().take(15).zip(
        name.bytes()
            .filter(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.'),
    ) {
        *d = c;
    }
    n
}

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// Creates a map. Before Linux 5.11 maps are charged to RLIMIT_MEMLOCK: on EPERM the limit is
/// raised (when the process may) and the creation tried once more.
pub fn map_create(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut attr = MapCreate {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_flags,
        map_name: name16(name),
        ..MapCreate::default()
    };
    match bpf(BPF_MAP_CREATE, &mut attr) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) && raise_memlock() => {
            fd_of(bpf(BPF_MAP_CREATE, &mut attr)?)
        }
        r => fd_of(r?),
    }
}

fn raise_memlock() -> bool {
    let r = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the struct passed by reference.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) == 0 }
}

#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

const LICENSE: &[u8] = b"MIT OR Apache-2.0\0";
/// Bytes of verifier log kept in an error.
const LOG_TAIL: usize = 1500;

/// Loads a program of `prog_type`. When the kernel refuses it, the error carries the end of the
/// verifier's log (the load is repeated with logging on).
pub fn prog_load(prog_type: u32, insns: &[Insn], name: &str) -> io::Result<OwnedFd> {
    let insn_cnt = u32::try_from(insns.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "eBPF program too long"))?;
    let mut attr = ProgLoad {
        prog_type,
        insn_cnt,
        insns: insns.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        prog_name: name16(name),
        ..ProgLoad::default()
    };
    let first = match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(rc) => return fd_of(rc),
        Err(e) => e,
    };
    if first.raw_os_error() != Some(libc::EACCES) && first.raw_os_error() != Some(libc::EINVAL) {
        return Err(first);
    }
    let mut log = vec![0u8; 1 << 18];
    attr.log_level = 1;
    attr.log_size = log.len() as u32;
    attr.log_buf = log.as_mut_ptr() as u64;
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(rc) => fd_of(rc),
        Err(e) => {
            let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail = text.len().saturating_sub(LOG_TAIL);
            let tail = text
                .char_indices()
                .find(|(i, _)| *i >= tail)
                .map_or("", |(i, _)| &text[i..]);
            Err(io::Error::new(
                e.kind(),
                format!(
                    "{e}; verifier log ends: {}",
                    tail.trim().replace('\n', " | ")
                ),
            ))
        }
    }
}

/// Attaches program `prog` to socket `sock` in place of its filter (atomically).
pub fn attach_bpf(sock: BorrowedFd<'_>, prog: BorrowedFd<'_>) -> io::Result<()> {
    let fd: c_int = prog.as_raw_fd();
    // SAFETY: `fd` is a live c_int and the length passed is its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_BPF,
            (&fd as *const c_int).cast::<c_void>(),
            mem::size_of::<c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[repr(C)]
#[derive(Default)]
struct Elem {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

fn map_fd(map: BorrowedFd<'_>) -> u32 {
    map.as_raw_fd() as u32
}

/// Looks `key` up; `value` must hold the whole (per-CPU) value. `Ok(false)`: no such entry.
pub fn lookup(map: BorrowedFd<'_>, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
    let mut attr = Elem {
        map_fd: map_fd(map),
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        ..Elem::default()
    };
    match bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes `value` (the whole value) under `key`, whether or not it is there.
pub fn update(map: BorrowedFd<'_>, key: &[u8], value: &[u8]) -> io::Result<()> {
    let mut attr = Elem {
        map_fd: map_fd(map),
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        ..Elem::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
}

/// Deletes `key` from `map`; a missing key is no error.
pub fn delete(map: BorrowedFd<'_>, key: &[u8]) -> io::Result<()> {
    let mut attr = Elem {
        map_fd: map_fd(map),
        key: key.as_ptr() as u64,
        ..Elem::default()
    };
    match bpf(BPF_MAP_DELETE_ELEM, &mut attr) {
        Err(e) if e.raw_os_error() != Some(libc::ENOENT) => Err(e),
        _ => Ok(()),
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

/// Runs `prog` `repeat` times on `frame` in the kernel (`BPF_PROG_TEST_RUN`, tests only): its
/// verdict and the mean time of one run in ns.
#[cfg(test)]
pub fn test_run(prog: BorrowedFd<'_>, frame: &[u8], repeat: u32) -> io::Result<(u32, u32)> {
    const BPF_PROG_TEST_RUN: c_int = 10;
    let mut attr = TestRun {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat,
        ..TestRun::default()
    };
    bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    Ok((attr.retval, attr.duration))
}

/// The key after `key` (the first with `None`) into `next`. `Ok(false)`: no more.
pub fn next_key(map: BorrowedFd<'_>, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
    let mut attr = Elem {
        map_fd: map_fd(map),
        key: key.map_or(0, |k| k.as_ptr() as u64),
        value: next.as_mut_ptr() as u64,
        ..Elem::default()
    };
    match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

#[repr(C)]
#[derive(Default)]
struct Batch {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// One step of a batch lookup.
pub enum BatchStep {
    /// `n` entries read; more follow from the token.
    More(usize, u64),
    /// `n` entries read, and the map has no more.
    Done(usize),
    /// A bucket holds more entries than the buffers: retry with bigger ones.
    TooSmall,
    /// This kernel has no batch lookup for this map.
    Unsupported,
}

/// Reads up to `keys.len() / key_size` entries after token `from` (`None`: from the start).
pub fn lookup_batch(
    map: BorrowedFd<'_>,
    from: Option<u64>,
    keys: &mut [u8],
    values: &mut [u8],
    key_size: usize,
    value_size: usize,
) -> io::Result<BatchStep> {
    let count = (keys.len() / key_size.max(1)).min(values.len() / value_size.max(1));
    let in_token = from.unwrap_or(0);
    let mut out_token = 0u64;
    let mut attr = Batch {
        in_batch: from.map_or(0, |_| &in_token as *const u64 as u64),
        out_batch: &mut out_token as *mut u64 as u64,
        keys: keys.as_mut_ptr() as u64,
        values: values.as_mut_ptr() as u64,
        count: u32::try_from(count).unwrap_or(u32::MAX),
        map_fd: map_fd(map),
        ..Batch::default()
    };
    let r = bpf(BPF_MAP_LOOKUP_BATCH, &mut attr);
    let n = (attr.count as usize).min(count);
    match r {
        Ok(_) => Ok(BatchStep::More(n, out_token)),
        Err(e) => match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(BatchStep::Done(n)),
            Some(libc::ENOSPC) => Ok(BatchStep::TooSmall),
            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) | Some(ENOTSUPP) | Some(libc::ENOSYS) => {
                Ok(BatchStep::Unsupported)
            }
            _ => Err(e),
        },
    }
}

#[repr(C)]
#[derive(Default)]
struct InfoByFd {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// `bpf_attr.link_create` with its `tcx` member (Linux >= 6.6).
#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    relative_fd: u32,
    _pad: u32,
    expected_revision: u64,
}

/// `attach_type` of a tcx link at a device's ingress and egress hooks.
const BPF_TCX_INGRESS: u32 = 46;
const BPF_TCX_EGRESS: u32 = 47;
/// The tcx hook's `attach_type`: ingress, else egress.
fn tcx_hook(ingress: bool) -> u32 {
    if ingress {
        BPF_TCX_INGRESS
    } else {
        BPF_TCX_EGRESS
    }
}

/// With no relative program: first in the hook's list.
const BPF_F_BEFORE: u32 = 1 << 3;

/// Attaches a `BPF_PROG_TYPE_SCHED_CLS` program first at the tcx `ingress` (else egress) hook of
/// `ifindex` (Linux >= 6.6): a link that holds it there until the descriptor closes, also when
/// the process dies.
pub fn tcx_link(prog: BorrowedFd<'_>, ifindex: u32, ingress: bool) -> io::Result<OwnedFd> {
    link_at(prog, ifindex, ingress, BPF_F_BEFORE)
}

/// With no relative program: last in the hook's list.
const BPF_F_AFTER: u32 = 1 << 4;

/// As [`tcx_link`], but last in the hook's list: after every program already there (rlbd's
/// counting link, which is always put first).
pub fn tcx_link_last(prog: BorrowedFd<'_>, ifindex: u32, ingress: bool) -> io::Result<OwnedFd> {
    link_at(prog, ifindex, ingress, BPF_F_AFTER)
}

fn link_at(prog: BorrowedFd<'_>, ifindex: u32, ingress: bool, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreate {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: tcx_hook(ingress),
        flags,
        ..LinkCreate::default()
    };
    fd_of(bpf(BPF_LINK_CREATE, &mut attr)?)
}

#[cfg(test)]
#[repr(C)]
#[derive(Default)]
struct ProgQuery {
    target_ifindex: u32,
    attach_type: u32,
    query_flags: u32,
    attach_flags: u32,
    prog_ids: u64,
    prog_cnt: u32,
    _pad: u32,
}

/// The programs attached at the tcx `ingress` (else egress) hook of `ifindex`.
#[cfg(test)]
pub fn tcx_programs(ifindex: u32, ingress: bool) -> io::Result<u32> {
    const BPF_PROG_QUERY: c_int = 16;
    let mut attr = ProgQuery {
        target_ifindex: ifindex,
        attach_type: tcx_hook(ingress),
        ..ProgQuery::default()
    };
    bpf(BPF_PROG_QUERY, &mut attr)?;
    Ok(attr.prog_cnt)
}

#[repr(C)]
#[derive(Default)]
struct LinkUpdate {
    link_fd: u32,
    new_prog_fd: u32,
    flags: u32,
    old_prog_fd: u32,
}

/// Swaps the program of `link` for `prog` (atomically).
pub fn link_update(link: BorrowedFd<'_>, prog: BorrowedFd<'_>) -> io::Result<()> {
    let mut attr = LinkUpdate {
        link_fd: link.as_raw_fd() as u32,
        new_prog_fd: prog.as_raw_fd() as u32,
        ..LinkUpdate::default()
    };
    bpf(BPF_LINK_UPDATE, &mut attr).map(|_| ())
}

/// `struct bpf_prog_info` up to `run_cnt` (Linux >= 5.1); the kernel fills what it knows.
const PROG_INFO_LEN: usize = 208;
const RUN_TIME_NS: usize = 192;
const RUN_CNT: usize = 200;

/// The kernel's (run time in ns, runs) of a program: counted only while the
/// `kernel.bpf_stats_enabled` sysctl is 1.
pub fn prog_run_stats(prog: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let mut info = [0u64; PROG_INFO_LEN / 8];
    let mut attr = InfoByFd {
        bpf_fd: prog.as_raw_fd() as u32,
        info_len: PROG_INFO_LEN as u32,
        info: info.as_mut_ptr() as u64,
    };
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    if (attr.info_len as usize) < PROG_INFO_LEN {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel reports no program run statistics",
        ));
    }
    Ok((info[RUN_TIME_NS / 8], info[RUN_CNT / 8]))
}
