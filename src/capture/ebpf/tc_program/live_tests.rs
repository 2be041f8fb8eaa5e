//! The egress (watching) program run by the kernel (`BPF_PROG_TEST_RUN`, JIT-compiled, root):
//! what it hands to the ring buffer, and what a data packet (a server's ACK) costs it, against
//! the floor (a program that returns at once), printed for the record.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use super::super::insn::{Asm, Reg};
use super::super::sys;
use super::*;
use crate::capture::ebpf::RingBuf;

/// Runs `prog` `repeat` times on `frame`: its verdict and the mean ns of one run.
fn test_run(prog: BorrowedFd<'_>, frame: &[u8], repeat: u32) -> Result<(i32, u32), String> {
    sys::test_run(prog, frame, repeat)
        .map(|(verdict, ns)| (verdict as i32, ns))
        .map_err(|e| format!("BPF_PROG_TEST_RUN: {e}"))
}

const DST: [u8; 6] = [2, 0, 0, 0, 0, 1];
const SRC: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// An Ethernet frame, with an 802.1Q tag (VLAN 5) in it if `tagged`.
fn frame(ethertype: u16, tagged: bool, payload: &[u8]) -> Vec<u8> {
    let mut f = [DST, SRC].concat();
    if tagged {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A TCP ACK with timestamps (32 bytes), as a bulk stream's receiver sends them.
fn tcp_ack() -> Vec<u8> {
    let mut t = vec![0u8; 32];
    t[..4].copy_from_slice(&[0x14, 0x51, 0xc0, 0x01]);
    t[12] = 8 << 4;
    t[13] = 0x10;
    t[20..22].copy_from_slice(&[1, 1]);
    t[22..24].copy_from_slice(&[8, 10]);
    t
}

fn ipv4_ack() -> Vec<u8> {
    let mut ip = vec![0x45, 0, 0, 52, 0, 0, 0x40, 0, 64, 6, 0, 0];
    ip.extend_from_slice(&[198, 18, 200, 2, 198, 18, 200, 1]);
    frame(0x0800, false, &[ip, tcp_ack()].concat())
}

/// An IPv6 header with `next` as its next header and `payload` behind it.
fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let mut ip = vec![0x60, 0, 0, 0, 0, payload.len() as u8, next, 255];
    ip.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    ip.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    [ip, payload.to_vec()].concat()
}

fn ipv6_ack() -> Vec<u8> {
    frame(0x86dd, false, &ipv6(6, &tcp_ack()))
}

/// An ICMPv6 message of `kind` (NS 135, NA 136, echo request 128), 24 bytes.
fn icmpv6(kind: u8, tagged: bool) -> Vec<u8> {
    let mut m = vec![0u8; 24];
    m[0] = kind;
    frame(0x86dd, tagged, &ipv6(58, &m))
}

fn arp_reply() -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 2];
    a.extend_from_slice(&[SRC.as_slice(), &[198, 18, 200, 2], &DST, &[198, 18, 200, 1]].concat());
    frame(0x0806, false, &a)
}

/// The median of `n` measures of `repeat` runs each, in ns.
fn cost(prog: BorrowedFd<'_>, f: &[u8]) -> Result<u32, String> {
    let mut v = Vec::new();
    for _ in 0..5 {
        let (verdict, ns) = test_run(prog, f, 1_000_000)?;
        assert_eq!(verdict, TC_ACT_UNSPEC);
        v.push(ns);
    }
    v.sort_unstable();
    Ok(v[v.len() / 2])
}

fn watching() -> Result<(), String> {
    // Without root the kernel refuses the ring buffer; `root_or_skip` has said so already.
    let mut ring = RingBuf::new("tctest").map_err(|e| e.to_string())?;
    let r = Ring {
        fd: ring.fd().as_raw_fd(),
        snap_len: 96,
        lost_fd: ring.lost_fd().as_raw_fd(),
    };
    let insns = watching_program(r)?;
    let prog = sys::prog_load(sys::BPF_PROG_TYPE_SCHED_CLS, &insns, "rlbdtest_watch")
        .map_err(|e| format!("loading the egress program: {e}"))?;
    let mut a = Asm::new();
    a.mov_imm(Reg::R0, TC_ACT_UNSPEC).exit();
    let floor = sys::prog_load(sys::BPF_PROG_TYPE_SCHED_CLS, &a.finish()?, "rlbdtest_floor")
        .map_err(|e| format!("loading the floor program: {e}"))?;
    // What the daemon must see, and what it must not.
    let cases = [
        ("an ARP reply", arp_reply(), true),
        ("a Neighbor Solicitation", icmpv6(135, false), true),
        ("a Neighbor Advertisement, tagged", icmpv6(136, true), true),
        (
            "an echo request (ICMPv6, not ND)",
            icmpv6(128, false),
            false,
        ),
        ("an IPv4 ACK", ipv4_ack(), false),
        ("an IPv6 ACK", ipv6_ack(), false),
        (
            "an IPv6 ACK, tagged",
            frame(0x86dd, true, &ipv6(6, &tcp_ack())),
            false,
        ),
    ];
    for (what, f, seen) in &cases {
        assert_eq!(test_run(prog.as_fd(), f, 1)?.0, TC_ACT_UNSPEC, "{what}");
        let mut got = Vec::new();
        ring.drain(16, |meta, bytes| got.push((meta, bytes.to_vec())));
        let want = usize::from(*seen);
        assert_eq!(got.len(), want, "{what}: records in the ring");
        if let Some((meta, bytes)) = got.first() {
            assert_eq!(meta.pkt_type, PACKET_OUTGOING as u8, "{what}");
            assert_eq!(meta.len as usize, f.len(), "{what}");
            assert_eq!(&bytes[..f.len().min(96)], &f[..f.len().min(96)], "{what}");
        }
    }
    assert_eq!(ring.lost().map_err(|e| e.to_string())?, 0);
    let floor_ns = cost(floor.as_fd(), &ipv4_ack())?;
    let v4 = cost(prog.as_fd(), &ipv4_ack())?;
    let v6 = cost(prog.as_fd(), &ipv6_ack())?;
    eprintln!(
        "egress program per ACK (BPF_PROG_TEST_RUN, median of 5 x 1M runs): IPv4 {v4} ns, \
         IPv6 {v6} ns; the floor (a program that returns at once) {floor_ns} ns"
    );
    assert!(ring.drain(16, |_, _| ()) == 0, "an ACK reached the ring");
    Ok(())
}

#[test]
fn the_egress_program_passes_arp_and_nd_and_leaves_acks_alone() {
    crate::test_support::in_own_thread("the egress program, run by the kernel", watching);
}
