//! What rlbd's programs cost per run, measured by the kernel (`BPF_PROG_TEST_RUN`,
//! JIT-compiled, a million runs, with kernel.bpf_stats_enabled off), beside the floor (a
//! program that returns at once: the test loop's own cost per run):
//! - the egress program the daemon attaches to a port, on the ACK the GRO benchmark's receiver
//!   sends (IPv4) and on the same ACK over IPv6;
//! - the guests' egress program (the bond's, with [guests] on), with 64 guests pinned, on the
//!   same ACKs (the host's own frames: it runs on every one the host sends);
//! - the counting program at a port's ingress (the daemon's, slot table and all) on a GRO
//!   packet of 43 TCP/IPv4 frames, its count checked (each run counts the 43 frames).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use rlbd::capture::ebpf::guest::GuestMaps;
use rlbd::capture::ebpf::insn::{Asm, Insn, Reg};
use rlbd::capture::ebpf::tc_program::{watching_program, Ring};
use rlbd::capture::ebpf::{map_entries, Hook, KernelCounter, RingBuf};
use rlbd::capture::{Mac, DEFAULT_SNAP_LEN};

use super::Res;

/// ns per run: the egress program on an IPv4 ACK and on an IPv6 ACK, the guests' egress
/// program on the same, the counting program on a GRO packet, and the floor.
#[derive(Debug, Clone, Copy, Default)]
pub struct AckCost {
    pub v4_ns: u32,
    pub v6_ns: u32,
    pub guest_v4_ns: u32,
    pub guest_v6_ns: u32,
    pub ingress_gro_ns: u32,
    pub floor_ns: u32,
}

/// Frames in the GRO packet the counting program is run on.
const GRO_SEGS: u32 = 43;
/// Guests pinned while the guests' program runs.
const GUESTS: u8 = 64;

impl AckCost {
    /// The program's own cost on the dearer of the two ACKs, above the floor.
    pub fn above_floor(&self) -> f64 {
        f64::from(self.v4_ns.max(self.v6_ns).saturating_sub(self.floor_ns))
    }

    /// The guests' egress program's own cost on the dearer of the two ACKs, above the floor.
    pub fn guest_above_floor(&self) -> f64 {
        f64::from(
            self.guest_v4_ns
                .max(self.guest_v6_ns)
                .saturating_sub(self.floor_ns),
        )
    }

    /// The counting program's own cost on a GRO packet, above the floor.
    pub fn ingress_above_floor(&self) -> f64 {
        f64::from(self.ingress_gro_ns.saturating_sub(self.floor_ns))
    }
}

const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_TEST_RUN: libc::c_int = 10;
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;

/// `bpf_attr` for BPF_PROG_LOAD, up to the name (the crate's loader is not public).
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

/// `bpf_attr.test` up to `ctx_out`.
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
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
}

/// `struct __sk_buff` as BPF_PROG_TEST_RUN takes it in: all zero but what may be set.
const SKB_SIZE: usize = 192;
const SKB_GSO_SEGS: usize = 164;

/// bpf(2) with `attr` (a live #[repr(C)] prefix of bpf_attr for `cmd`).
fn bpf<T>(cmd: libc::c_int, attr: &mut T, what: &str) -> Res<i64> {
    // SAFETY: `attr` is valid for its size for the whole call; the pointers inside it point to
    // buffers the caller keeps alive across it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    match rc {
        rc if rc >= 0 => Ok(rc),
        _ => Err(format!("{what}: {}", std::io::Error::last_os_error())),
    }
}

fn load(insns: &[Insn], name: &str) -> Res<OwnedFd> {
    let license = b"MIT OR Apache-2.0\0";
    let mut prog_name = [0u8; 16];
    prog_name[..name.len().min(15)].copy_from_slice(&name.as_bytes()[..name.len().min(15)]);
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_SCHED_CLS,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name,
        ..ProgLoad::default()
    };
    let fd = bpf(BPF_PROG_LOAD, &mut attr, &format!("loading {name}"))?;
    // SAFETY: a successful BPF_PROG_LOAD returns a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The mean ns of one of `repeat` runs of `prog` on `frame`, a packet GRO merged `segs`
/// frames into (0: none).
fn test_run(prog: BorrowedFd<'_>, frame: &[u8], segs: u32, repeat: u32) -> Res<u32> {
    let mut ctx = [0u8; SKB_SIZE];
    ctx[SKB_GSO_SEGS..SKB_GSO_SEGS + 4].copy_from_slice(&segs.to_ne_bytes());
    let mut attr = TestRun {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat,
        ctx_size_in: SKB_SIZE as u32,
        ctx_in: ctx.as_ptr() as u64,
        ..TestRun::default()
    };
    bpf(BPF_PROG_TEST_RUN, &mut attr, "BPF_PROG_TEST_RUN")?;
    Ok(attr.duration)
}

const RUNS: u32 = 1_000_000;

/// The median of 5 measures of a million runs.
fn median_ns(prog: BorrowedFd<'_>, frame: &[u8], segs: u32) -> Res<u32> {
    let mut v = (0..5)
        .map(|_| test_run(prog, frame, segs, RUNS))
        .collect::<Res<Vec<u32>>>()?;
    v.sort_unstable();
    Ok(v[2])
}

/// A GRO packet as the counting program sees it: the first of `GRO_SEGS` TCP/IPv4 frames of
/// 1500 bytes (to the test loop's device's MAC, all zero: for the host), its length the one
/// frame's (the rest are pages the program never reads).
fn gro_packet() -> Vec<u8> {
    let mut f = vec![0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0x05, 0xdc, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&[198, 18, 200, 1, 198, 18, 200, 2]);
    let mut tcp = vec![0u8; 32];
    tcp[12] = 8 << 4;
    tcp[13] = 0x10;
    f.extend_from_slice(&tcp);
    f.resize(1514, 0x5a);
    f
}

/// The daemon's counting program on a GRO packet: ns per run, and its count checked.
fn ingress_gro() -> Res<u32> {
    let mut c = KernelCounter::new(
        &[],
        Hook::tc(DEFAULT_SNAP_LEN),
        map_entries(4096),
        "gro_cost",
    )
    .map_err(|e| format!("the counting program: {e}"))?;
    let ns = median_ns(c.program(), &gro_packet(), GRO_SEGS)?;
    let mut deltas = Vec::new();
    c.read(&mut deltas).map_err(|e| e.to_string())?;
    let frames: u64 = deltas.iter().map(|d| d.frames).sum();
    let want = 5 * u64::from(RUNS) * u64::from(GRO_SEGS);
    match frames == want {
        true => Ok(ns),
        false => Err(format!(
            "the counting program counted {frames} frames in 5 million GRO packets of \
             {GRO_SEGS}, not {want}"
        )),
    }
}

/// The guests' egress program with `GUESTS` guests pinned: ns per run on each ACK.
fn guest_egress() -> Res<(u32, u32)> {
    let maps = GuestMaps::new(256).map_err(|e| format!("the guests' maps: {e}"))?;
    for i in 0..GUESTS {
        maps.pin(Mac(2, 0x47, 0, 0, 1, i), 0, 7)
            .map_err(|e| e.to_string())?;
    }
    let prog = maps
        .load_egress("gro_cost")
        .map_err(|e| format!("the guests' egress program: {e}"))?;
    Ok((
        median_ns(prog.as_fd(), &ack(false), 0)?,
        median_ns(prog.as_fd(), &ack(true), 0)?,
    ))
}

/// An ACK with timestamps (TCP header of 32 bytes) behind an IPv4 or an IPv6 header.
fn ack(v6: bool) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    let mut tcp = vec![0u8; 32];
    tcp[12] = 8 << 4;
    tcp[13] = 0x10;
    if v6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 6, 64]);
        f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    } else {
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 52, 0, 0, 0x40, 0, 64, 6, 0, 0]);
        f.extend_from_slice(&[198, 18, 200, 2, 198, 18, 200, 1]);
    }
    f.extend_from_slice(&tcp);
    f
}

/// Measures the egress program per ACK (root; kernel.bpf_stats_enabled must be off).
pub fn measure() -> Res<AckCost> {
    let ring = RingBuf::new("gro_cost").map_err(|e| e.to_string())?;
    let r = Ring {
        fd: ring.fd().as_raw_fd(),
        snap_len: DEFAULT_SNAP_LEN,
        lost_fd: ring.lost_fd().as_raw_fd(),
    };
    let egress = load(&watching_program(r)?, "rlbd_gro_cost")?;
    let mut a = Asm::new();
    a.mov_imm(Reg::R0, -1).exit();
    let floor = load(&a.finish()?, "rlbd_gro_floor")?;
    let (guest_v4_ns, guest_v6_ns) = guest_egress()?;
    Ok(AckCost {
        v4_ns: median_ns(egress.as_fd(), &ack(false), 0)?,
        v6_ns: median_ns(egress.as_fd(), &ack(true), 0)?,
        guest_v4_ns,
        guest_v6_ns,
        ingress_gro_ns: ingress_gro()?,
        floor_ns: median_ns(floor.as_fd(), &ack(false), 0)?,
    })
}
