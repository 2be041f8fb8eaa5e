//! The programs for a port's tc hooks (`BPF_PROG_TYPE_SCHED_CLS`, attached direct-action by
//! `tc.rs`), which replace the capture socket's tap altogether:
//! - at ingress, the same count as the socket filter (`program.rs`), into the same map and
//!   under the same key;
//! - at both hooks, ARP and Neighbor Discovery frames (what the steering watches, the host's
//!   own outgoing answers included) copied, up to the snap length, into a ring buffer the
//!   daemon reads (`ringbuf.rs`), behind a header: length u32, VLAN u16, packet type u8 (the
//!   kernel's at ingress, `PACKET_OUTGOING` at egress), whether the tag was taken out u8.
//!
//! They read the frame in place (direct packet access, bounds checked against `data_end`),
//! take a tag the driver or the stack already took out from `vlan_present`/`vlan_tci`, and never
//! drop, change or classify a frame: they always return `TC_ACT_UNSPEC`, which lets the hook
//! run whatever filters come after them (an operator's) exactly as if they were not there.
//! (`TC_ACT_OK` would end classification and skip those.)
//!
//! Acceptance, as the socket filter's: an IPv4 frame (version 4, header length >= 5) or an
//! IPv6 frame (version 6, not a Neighbor Solicitation or Advertisement) for this port
//! (`PACKET_HOST`) or for one of the host's other MACs, untagged, tagged 802.1Q once in the
//! frame, or with an 802.1Q tag taken out, is counted under (source MAC, VLAN, destination
//! address); ARP, and ICMPv6 NS/NA, go to the ring buffer. A frame under an 802.1ad tag taken
//! out is neither (rlbd does not steer 802.1ad).

use super::draw::{draw, scale, unsampled, unsampled_ipv4};
use super::insn::{Alu, Asm, Cond, Helper, Insn, Label, Reg, Size};
use super::program::{
    count_hash, count_slots, wire16, Store, ETH_HDR, ETH_P_8021Q, ETH_P_ARP, ETH_P_IP, ETH_P_IPV6,
    IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP, KEY, KEY_DST, KEY_VLAN, MAX_HOST_MACS, ND_NA, ND_NS,
    PACKET_HOST, PACKET_OUTGOING, SEGS, SKB_LEN, SKB_PKT_TYPE, SKB_PROTOCOL, SKB_VLAN_PRESENT,
    SKB_VLAN_PROTO, SKB_VLAN_TCI, WIRE,
};
use super::ringbuf::META;
use crate::capture::Mac;

// `struct __sk_buff`: the packet pointers (UAPI).
const SKB_DATA: i16 = 76;
const SKB_DATA_END: i16 = 80;
/// How many frames GRO merged into this packet (0 or 1: none).
const SKB_GSO_SEGS: i16 = 164;
/// Stack: the headers' length across the helper call, and the byte it reads.
const HDR: i16 = -80;
const SCRATCH: i16 = -88;
/// "No verdict": the hook goes on as if no filter had matched.
const TC_ACT_UNSPEC: i32 = -1;
/// Bytes every counted frame needs linear (up to the ICMPv6 type behind a tag): a head shorter
/// than this in a longer frame is pulled in once.
const HEAD: i32 = ETH_HDR + 4 + 40 + 1;

/// Where a frame for the ring buffer goes, and how much of it.
#[derive(Debug, Clone, Copy)]
pub struct Ring {
    pub fd: i32,
    pub snap_len: u32,
    /// A one-entry array counting the frames a full ring buffer had no room for.
    pub lost_fd: i32,
}

impl Ring {
    /// Bytes reserved per record: the header and the snap length, padded to 8.
    fn record(&self) -> Result<i32, String> {
        let n = (META as u32 + self.snap_len).next_multiple_of(8);
        match i32::try_from(n) {
            Ok(n) if (ETH_HDR as u32) <= self.snap_len && n <= 4096 => Ok(n),
            _ => Err(format!("snap length {} out of range", self.snap_len)),
        }
    }
}

/// Builds the ingress program for a port whose map is `map_fd` and whose sampling ratio is in
/// `ratio_fd` (a one-entry per-CPU array of [`RATIO_VALUE`](super::draw::RATIO_VALUE) bytes);
/// `host_macs` are the server's MACs other than the port's own whose frames count too.
pub fn counting_program(
    host_macs: &[Mac],
    map_fd: i32,
    store: Store,
    ring: Ring,
    ratio_fd: i32,
) -> Result<Vec<Insn>, String> {
    if host_macs.len() > MAX_HOST_MACS {
        return Err(format!(
            "{} host MACs given, at most {MAX_HOST_MACS} supported",
            host_macs.len()
        ));
    }
    if let Store::Slots { slots, .. } = store {
        if !slots.is_power_of_two() || slots > 1 << 30 {
            return Err(format!("{slots} slots: a power of two up to 2^30 expected"));
        }
    }
    let mut a = Asm::new();
    let (done, pass, v4, v6data, count) = (a.label(), a.label(), a.label(), a.label(), a.label());
    a.mov(Reg::R6, Reg::R1);
    draw(&mut a, ratio_fd);
    unsampled_ipv4(&mut a, done);
    vlan_and_head(&mut a, done);
    ethertype(&mut a, done, pass, v4);
    ipv6_nd(&mut a, done, pass, v6data);
    a.bind(v6data);
    unsampled(&mut a, done);
    ipv6_key(&mut a, done, count, host_macs);
    a.bind(v4);
    unsampled(&mut a, done);
    ipv4_key(&mut a, done, host_macs);
    a.bind(count);
    key_source(&mut a);
    wire_length(&mut a);
    scale(&mut a);
    match store {
        Store::Hash => count_hash(&mut a, done, map_fd),
        Store::Slots { slots, mul } => count_slots(&mut a, done, map_fd, slots, mul),
    }
    a.ja(done);
    to_ring(&mut a, pass, done, ring, false)?;
    a.bind(done);
    a.mov_imm(Reg::R0, TC_ACT_UNSPEC).exit();
    a.finish()
}

/// Builds the egress program: the host's outgoing ARP and Neighbor Discovery to the ring
/// buffer, nothing counted.
pub fn watching_program(ring: Ring) -> Result<Vec<Insn>, String> {
    let mut a = Asm::new();
    let (done, pass, look) = (a.label(), a.label(), a.label());
    a.mov(Reg::R6, Reg::R1);
    data_leaves(&mut a, done, look);
    a.bind(look);
    vlan_and_head(&mut a, done);
    ethertype(&mut a, done, pass, done);
    ipv6_nd(&mut a, done, pass, done);
    to_ring(&mut a, pass, done, ring, true)?;
    a.bind(done);
    a.mov_imm(Reg::R0, TC_ACT_UNSPEC).exit();
    a.finish()
}

/// Ends a data packet in a handful of instructions; anything else goes on to `look`, the whole
/// walk. Nearly all a server sends is data (every ACK of a stream it receives): IPv4 by the
/// stack's protocol, before anything is read (IPv4 is neither ARP nor ND); untagged IPv6 whose
/// next header is not ICMPv6, by two bytes of the frame (the walk ends those too: ND is only
/// looked for right behind the IPv6 header). Clobbers R0, R2, R3.
fn data_leaves(a: &mut Asm, done: Label, look: Label) {
    use Reg::*;
    a.ldx(Size::W, R0, R6, SKB_PROTOCOL);
    a.jmp_imm(Cond::Eq, R0, wire16(ETH_P_IP), done);
    a.jmp_imm(Cond::Ne, R0, wire16(ETH_P_IPV6), look);
    packet_pointers(a);
    need(a, R2, ETH_HDR + 7, look);
    a.ldx(Size::H, R0, R2, 12);
    a.jmp_imm(Cond::Ne, R0, wire16(ETH_P_IPV6), look);
    a.ldx(Size::B, R0, R2, ETH_HDR as i16 + 6);
    a.jmp_imm(Cond::Ne, R0, IPPROTO_ICMPV6, done);
}

/// `pass`: the frame's header and first bytes into a ring buffer record, then `done`. When the
/// ring is full the frame is lost to the daemon, as a full capture ring loses it, and counted
/// as lost (the daemon shows the count as the port's ring drops).
fn to_ring(a: &mut Asm, pass: Label, done: Label, ring: Ring, egress: bool) -> Result<(), String> {
    use Reg::*;
    let record = ring.record()?;
    let snap = ring.snap_len as i32;
    let (short, long_enough, full) = (a.label(), a.label(), a.label());
    a.bind(pass);
    a.ld_map_fd(R1, ring.fd).mov_imm(R2, record).mov_imm(R3, 0);
    a.call(Helper::RingbufReserve);
    a.jmp_imm(Cond::Eq, R0, 0, full);
    a.mov(R7, R0);
    a.ldx(Size::W, R1, R6, SKB_LEN).stx(Size::W, R7, 0, R1);
    a.stx(Size::H, R7, 4, R8);
    if egress {
        a.st(Size::B, R7, 6, PACKET_OUTGOING);
    } else {
        a.ldx(Size::W, R1, R6, SKB_PKT_TYPE).stx(Size::B, R7, 6, R1);
    }
    a.stx(Size::B, R7, 7, R9);
    // min(len, snap), and at least the Ethernet header the checks above read.
    a.ldx(Size::W, R4, R6, SKB_LEN);
    a.jmp_imm(Cond::Le, R4, snap, short);
    a.mov_imm(R4, snap);
    a.bind(short);
    a.jmp_imm(Cond::Ge, R4, ETH_HDR, long_enough);
    a.mov_imm(R4, ETH_HDR);
    a.bind(long_enough);
    // On failure the helper zeroes the bytes: the daemon finds no frame in them.
    a.mov(R1, R6).mov_imm(R2, 0);
    a.mov(R3, R7).alu_imm(Alu::Add, R3, META as i32);
    a.call(Helper::SkbLoadBytes);
    a.mov(R1, R7).mov_imm(R2, 0).call(Helper::RingbufSubmit);
    a.ja(done);
    a.bind(full);
    a.st(Size::W, R10, -8, 0);
    a.ld_map_fd(R1, ring.lost_fd)
        .mov(R2, R10)
        .alu_imm(Alu::Add, R2, -8);
    a.call(Helper::MapLookupElem);
    a.jmp_imm(Cond::Eq, R0, 0, done);
    a.mov_imm(R1, 1).atomic_add(R0, 0, R1);
    a.ja(done);
    Ok(())
}

/// R6 = context (set by the caller); R7 = 0 (the tag's length in the frame), R8 = VLAN of a
/// tag taken out, R9 = whether one was; R2/R3 = data/data_end with the head made linear where
/// the frame is longer than it. An 802.1ad tag taken out ends here.
fn vlan_and_head(a: &mut Asm, done: Label) {
    use Reg::*;
    let (untagged, linear) = (a.label(), a.label());
    a.mov_imm(R7, 0).mov_imm(R8, 0);
    a.ldx(Size::W, R9, R6, SKB_VLAN_PRESENT);
    a.jmp_imm(Cond::Eq, R9, 0, untagged);
    a.ldx(Size::W, R0, R6, SKB_VLAN_PROTO);
    // vlan_proto is the raw big-endian TPID.
    a.jmp_imm(Cond::Ne, R0, wire16(ETH_P_8021Q), done);
    a.ldx(Size::W, R8, R6, SKB_VLAN_TCI);
    a.alu_imm(Alu::And, R8, 0x0fff);
    a.bind(untagged);
    packet_pointers(a);
    a.mov(R1, R2).alu_imm(Alu::Add, R1, HEAD);
    a.jmp_reg(Cond::Le, R1, R3, linear);
    a.ldx(Size::W, R1, R6, SKB_LEN);
    a.jmp_imm(Cond::Lt, R1, HEAD, linear);
    // Headers outside the linear head (rare: drivers pull them in): pull them in; a failure
    // leaves the frame as it was and the checks below pass it uncounted.
    a.mov(R1, R6).mov_imm(R2, HEAD).call(Helper::SkbPullData);
    packet_pointers(a);
    a.bind(linear);
}

/// R2 = data, R3 = data_end (again after a helper that may move the packet).
fn packet_pointers(a: &mut Asm) {
    use Reg::*;
    a.ldx(Size::W, R2, R6, SKB_DATA)
        .ldx(Size::W, R3, R6, SKB_DATA_END);
}

/// `if base + len > R3 goto done`: the bounds check the verifier wants before a read. Clobbers
/// R0 only (no caller has anything in it).
fn need(a: &mut Asm, base: Reg, len: i32, done: Label) {
    use Reg::*;
    a.mov(R0, base).alu_imm(Alu::Add, R0, len);
    a.jmp_reg(Cond::Gt, R0, R3, done);
}

/// Looks through one 802.1Q tag in the frame (R7 = 4; its VLAN unless one was taken out), and
/// dispatches: ARP to `pass`, IPv4 to `v4`, IPv6 falls through, anything else ends. R4 = the
/// network header.
fn ethertype(a: &mut Asm, done: Label, pass: Label, v4: Label) {
    use Reg::*;
    let (dispatch, inner, untagged) = (a.label(), a.label(), a.label());
    need(a, R2, ETH_HDR, done);
    a.ldx(Size::H, R0, R2, 12);
    a.jmp_imm(Cond::Ne, R0, wire16(ETH_P_8021Q), dispatch);
    need(a, R2, ETH_HDR + 4, done);
    a.mov_imm(R7, 4);
    a.jmp_imm(Cond::Ne, R9, 0, inner);
    a.ldx(Size::H, R8, R2, 14).to_be(R8, 16);
    a.alu_imm(Alu::And, R8, 0x0fff);
    a.bind(inner);
    a.ldx(Size::H, R0, R2, 16);
    a.bind(dispatch);
    // Constant offsets only: the verifier refuses a packet pointer plus a register to a user
    // without CAP_PERFMON (the packaged unit's), even a register that is 0 or 4.
    a.mov(R4, R2).alu_imm(Alu::Add, R4, ETH_HDR);
    a.jmp_imm(Cond::Eq, R7, 0, untagged);
    a.alu_imm(Alu::Add, R4, 4);
    a.bind(untagged);
    a.jmp_imm(Cond::Eq, R0, wire16(ETH_P_ARP), pass);
    a.jmp_imm(Cond::Eq, R0, wire16(ETH_P_IP), v4);
    a.jmp_imm(Cond::Ne, R0, wire16(ETH_P_IPV6), done);
}

/// IPv6: NS/NA to `pass`, other frames to `data`.
fn ipv6_nd(a: &mut Asm, done: Label, pass: Label, data: Label) {
    use Reg::*;
    need(a, R4, 40, done);
    a.ldx(Size::B, R0, R4, 0).alu_imm(Alu::Rsh, R0, 4);
    a.jmp_imm(Cond::Ne, R0, 6, done);
    a.ldx(Size::B, R0, R4, 6);
    a.jmp_imm(Cond::Ne, R0, IPPROTO_ICMPV6, data);
    need(a, R4, 41, done);
    a.ldx(Size::B, R0, R4, 40);
    a.jmp_imm(Cond::Eq, R0, ND_NS, pass);
    a.jmp_imm(Cond::Eq, R0, ND_NA, pass);
    a.ja(data);
}

/// IPv6 data for the host: the destination into the key, R9 = 6, to `count`.
fn ipv6_key(a: &mut Asm, done: Label, count: Label, host_macs: &[Mac]) {
    use Reg::*;
    let ours = a.label();
    need(a, R4, 40, done);
    host_check(a, host_macs, ours, done);
    a.bind(ours);
    a.mov_imm(R9, 6);
    for w in [0, 8] {
        a.ldx(Size::DW, R1, R4, 24 + w)
            .stx(Size::DW, R10, KEY_DST + w, R1);
    }
    a.ja(count);
}

/// IPv4 (a header ip_rcv would look at) for the host: the destination into the key as
/// ::ffff:a.b.c.d, R9 = 4; falls through to `count`. R4 = the network header.
fn ipv4_key(a: &mut Asm, done: Label, host_macs: &[Mac]) {
    use Reg::*;
    let ours = a.label();
    need(a, R4, 20, done);
    a.ldx(Size::B, R0, R4, 0);
    a.mov(R1, R0).alu_imm(Alu::Rsh, R1, 4);
    a.jmp_imm(Cond::Ne, R1, 4, done);
    a.alu_imm(Alu::And, R0, 0x0f);
    a.jmp_imm(Cond::Lt, R0, 5, done);
    host_check(a, host_macs, ours, done);
    a.bind(ours);
    a.mov_imm(R9, 4);
    a.st(Size::DW, R10, KEY_DST, 0);
    a.st(Size::H, R10, KEY_DST + 8, 0);
    a.st(Size::H, R10, KEY_DST + 10, 0xffff);
    a.ldx(Size::W, R1, R4, 16)
        .stx(Size::W, R10, KEY_DST + 12, R1);
}

/// The key's source MAC and VLAN, copied as the frame holds them (the destination is in).
fn key_source(a: &mut Asm) {
    use Reg::*;
    // The 2-byte parts first: a verifier before 6.x refuses a user without CAP_PERFMON (the
    // packaged unit's) any store of under 8 bytes into a slot after the 4-byte spill of a
    // bounded scalar (the word from the packet) at its start.
    a.ldx(Size::H, R1, R2, 10).stx(Size::H, R10, KEY + 4, R1);
    a.stx(Size::H, R10, KEY_VLAN, R8);
    a.ldx(Size::W, R1, R2, 6).stx(Size::W, R10, KEY, R1);
}

/// What the packet counts for, into `SEGS` and `WIRE`: one frame of its length, or, where GRO
/// merged `gso_segs` frames of a stream into it (any NIC driver does, before the hook), each of
/// them with the headers each carried on the wire, which the merge kept once: so the count
/// agrees with the NIC's own receive counters. R4 = the network header (its first 20 bytes,
/// 40 for IPv6, checked), R7 = the tag's length in the frame, R9 = the IP version. Clobbers
/// R0-R5.
fn wire_length(a: &mut Asm) {
    use Reg::*;
    let (v6, l3, tcp, l4, done) = (a.label(), a.label(), a.label(), a.label(), a.label());
    a.ldx(Size::W, R0, R6, SKB_LEN).stx(Size::DW, R10, WIRE, R0);
    a.st(Size::DW, R10, SEGS, 1);
    a.ldx(Size::W, R1, R6, SKB_GSO_SEGS);
    a.jmp_imm(Cond::Le, R1, 1, done);
    a.stx(Size::DW, R10, SEGS, R1);
    // R5: the headers of one frame, Ethernet and tag, network (R1), transport (TCP's or UDP's).
    a.mov(R5, R7).alu_imm(Alu::Add, R5, ETH_HDR);
    a.jmp_imm(Cond::Eq, R9, 6, v6);
    a.ldx(Size::B, R1, R4, 0).alu_imm(Alu::And, R1, 0x0f);
    a.alu_imm(Alu::Lsh, R1, 2).ldx(Size::B, R0, R4, 9);
    a.ja(l3);
    a.bind(v6);
    a.mov_imm(R1, 40).ldx(Size::B, R0, R4, 6);
    a.bind(l3);
    a.alu_reg(Alu::Add, R5, R1);
    a.jmp_imm(Cond::Eq, R0, IPPROTO_TCP, tcp);
    a.jmp_imm(Cond::Ne, R0, IPPROTO_UDP, l4);
    a.alu_imm(Alu::Add, R5, 8).ja(l4);
    // TCP's header length: its data offset, byte 12.
    a.bind(tcp);
    tcp_data_offset(a);
    a.alu_imm(Alu::Rsh, R1, 4);
    a.alu_imm(Alu::Lsh, R1, 2).alu_reg(Alu::Add, R5, R1);
    // WIRE += (SEGS - 1) * R5
    a.bind(l4);
    a.ldx(Size::DW, R1, R10, SEGS).alu_imm(Alu::Sub, R1, 1);
    a.alu_reg(Alu::Mul, R1, R5);
    a.ldx(Size::DW, R0, R10, WIRE).alu_reg(Alu::Add, R0, R1);
    a.stx(Size::DW, R10, WIRE, R0);
    a.bind(done);
}

/// R1 = the byte of the TCP header that holds its data offset (byte 12). Behind a 20-byte IPv4
/// or a 40-byte IPv6 header (nearly every packet) it is at a constant offset from R4, read in
/// place; behind IPv4 options the offset is a register, which the verifier refuses a user
/// without CAP_PERFMON to add to a packet pointer, so the helper reads it (on failure the byte
/// reads 0, and the options go uncounted). The helper's call costs more than the rest of a
/// GRO packet's count (docs/labs.md, "The GRO benchmark"). R1 = the network header's length,
/// R3 = data_end, R4 = the network header, R5 = the headers before TCP's (kept), R9 = the IP
/// version. Clobbers R0-R4.
fn tcp_data_offset(a: &mut Asm) {
    use Reg::*;
    let (v6, helper, read) = (a.label(), a.label(), a.label());
    a.jmp_imm(Cond::Eq, R9, 6, v6);
    a.jmp_imm(Cond::Ne, R1, 20, helper);
    need(a, R4, 20 + 13, helper);
    a.ldx(Size::B, R1, R4, 20 + 12).ja(read);
    a.bind(v6);
    need(a, R4, 40 + 13, helper);
    a.ldx(Size::B, R1, R4, 40 + 12).ja(read);
    a.bind(helper);
    a.stx(Size::DW, R10, HDR, R5);
    a.mov(R1, R6).mov(R2, R5).alu_imm(Alu::Add, R2, 12);
    a.mov(R3, R10).alu_imm(Alu::Add, R3, i32::from(SCRATCH));
    a.mov_imm(R4, 1).call(Helper::SkbLoadBytes);
    a.ldx(Size::DW, R5, R10, HDR);
    a.ldx(Size::B, R1, R10, SCRATCH);
    a.bind(read);
}

/// Goes to `ok` for a frame that came in for this port or for one of `host_macs`, else to
/// `done`. (At ingress nothing is `PACKET_OUTGOING`.)
fn host_check(a: &mut Asm, host_macs: &[Mac], ok: Label, done: Label) {
    use Reg::*;
    a.ldx(Size::W, R0, R6, SKB_PKT_TYPE);
    a.jmp_imm(Cond::Eq, R0, PACKET_HOST, ok);
    for m in host_macs {
        let o = m.octets();
        let next = a.label();
        a.ldx(Size::W, R0, R2, 2);
        a.jmp32_imm(
            Cond::Ne,
            R0,
            u32::from_ne_bytes([o[2], o[3], o[4], o[5]]),
            next,
        );
        a.ldx(Size::H, R0, R2, 0);
        a.jmp_imm(
            Cond::Eq,
            R0,
            i32::from(u16::from_ne_bytes([o[0], o[1]])),
            ok,
        );
        a.bind(next);
    }
    a.ja(done);
}

#[cfg(test)]
mod live_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod vm_tests;
