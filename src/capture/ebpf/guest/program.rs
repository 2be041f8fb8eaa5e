//! The guests' tc programs (`BPF_PROG_TYPE_SCHED_CLS`, direct-action), pure builders.
//!
//! Both read the frame in place (bounds checked against `data_end`) and key it as the pins map
//! does: a MAC and the VLAN of an 802.1Q tag taken out (`vlan_present`/`vlan_tci`) or, failing
//! that, of one in the frame (0 untagged). A frame under an 802.1ad tag taken out is nobody's.
//! Their only verdicts: "none" (`TC_ACT_UNSPEC`: the hook goes on as if they were not there),
//! drop (`TC_ACT_SHOT`) and, at egress, redirect.

use super::super::insn::{Alu, Asm, Cond, Helper, Insn, Label, Reg, Size};
use super::super::program::{
    wire16, ETH_HDR, ETH_P_8021Q, ETH_P_IP, ETH_P_IPV6, IPPROTO_TCP, IPPROTO_UDP, SKB_LEN,
    SKB_PKT_TYPE, SKB_VLAN_PRESENT, SKB_VLAN_PROTO, SKB_VLAN_TCI,
};
use super::{GuestFds, FLOODS, MAX_PORTS, REFLECTIONS, RX, SEEN, TX_BYTES, TX_PACKETS};

// `struct __sk_buff` (UAPI).
const SKB_DATA: i16 = 76;
const SKB_DATA_END: i16 = 80;
const SKB_GSO_SEGS: i16 = 164;
const PACKET_OTHERHOST: i32 = 3;
pub const TC_ACT_UNSPEC: i32 = -1;
pub const TC_ACT_SHOT: i32 = 2;
pub const TC_ACT_REDIRECT: i32 = 7;
// The stack. Each key has a slot of its own, written 2-byte parts first: a verifier before
// 6.x refuses a user without CAP_PERFMON a store of under 8 bytes into a slot that starts with
// the 4-byte spill of a bounded scalar (see `program.rs`).
const SRC_KEY: i16 = -8;
const DST_KEY: i16 = -56;
/// The counter slot, written as 8 bytes; the array's u32 key is its low half.
const IDX: i16 = -16;
const IDX_KEY: i16 = if cfg!(target_endian = "big") {
    IDX + 4
} else {
    IDX
};
const SEGS: i16 = -24;
const WIRE: i16 = -32;
/// The headers' length across a helper call, and the byte it reads.
const HDR: i16 = -40;
const SCRATCH: i16 = -48;
/// Bytes a GRO packet's count reads (up to the data offset of TCP behind IPv6 and a tag): a
/// head shorter than this in a longer packet is pulled in once.
const HEAD: i32 = ETH_HDR + 4 + 40 + 13;

/// The bond's egress program: a frame from a pinned guest is counted (packets, GRO/TSO merges
/// as their segments; bytes, `skb->len`) and redirected out of its slave unchanged; every
/// other frame gets no verdict. It runs on every frame the host sends (each ACK of a stream
/// it receives): a frame whose source no guest's MAC shares the last two octets with (the
/// host's own) leaves in 13 instructions with no lookup; another frame not a guest's runs 34
/// untagged or with its tag taken out (42 tagged in the frame), one of them the pins' hash
/// lookup.
pub fn guest_egress_program(maps: GuestFds) -> Result<Vec<Insn>, String> {
    use Reg::*;
    let mut a = Asm::new();
    let (done, redirect, one) = (a.label(), a.label(), a.label());
    a.mov(R6, R1);
    packet_pointers(&mut a);
    need(&mut a, R2, ETH_HDR, done);
    no_guest_has(&mut a, maps.filter, 6, done);
    vlan_and_tag(&mut a, done);
    key(&mut a, 6, SRC_KEY);
    lookup(&mut a, maps.pins, SRC_KEY);
    a.jmp_imm(Cond::Eq, R0, 0, done);
    a.ldx(Size::W, R7, R0, 0);
    a.ldx(Size::W, R1, R0, 4).stx(Size::DW, R10, IDX, R1);
    lookup(&mut a, maps.counters, IDX_KEY);
    a.jmp_imm(Cond::Eq, R0, 0, redirect);
    a.ldx(Size::W, R1, R6, SKB_GSO_SEGS);
    a.jmp_imm(Cond::Ne, R1, 0, one);
    a.mov_imm(R1, 1);
    a.bind(one);
    add(&mut a, TX_PACKETS, R1);
    a.ldx(Size::W, R1, R6, SKB_LEN);
    add(&mut a, TX_BYTES, R1);
    a.bind(redirect);
    a.mov(R1, R7).mov_imm(R2, 0).call(Helper::Redirect);
    a.exit();
    a.bind(done);
    a.mov_imm(R0, TC_ACT_UNSPEC).exit();
    a.finish()
}

/// A slave's ingress program (`port_ifindex`, whose received frames count under
/// `port_slot`): a pinned guest's own frame is counted as seen from the switch where it is
/// pinned here, else dropped as a reflection; a unicast frame for a pinned guest is counted
/// where it is pinned here, else dropped as a flood; every other frame gets no verdict. A
/// frame whose MACs no guest's share the last two octets with runs 21 instructions and no
/// lookup (31 for another host's unicast on a promiscuous port); with a guest's octets, one
/// lookup per MAC (51 instructions with both).
pub fn guest_ingress_program(
    maps: GuestFds,
    port_ifindex: u32,
    port_slot: usize,
) -> Result<Vec<Insn>, String> {
    use Reg::*;
    if port_slot >= MAX_PORTS {
        return Err(format!(
            "port slot {port_slot}: 0 to {} expected",
            MAX_PORTS - 1
        ));
    }
    let port = i32::try_from(port_ifindex).map_err(|_| format!("ifindex {port_ifindex}"))?;
    let mut a = Asm::new();
    let (done, shot, from_guest, flood) = (a.label(), a.label(), a.label(), a.label());
    let not_from_guest = a.label();
    a.mov(R6, R1);
    vlan_and_tag(&mut a, done);
    no_guest_has(&mut a, maps.filter, 6, not_from_guest);
    key(&mut a, 6, SRC_KEY);
    lookup(&mut a, maps.pins, SRC_KEY);
    a.jmp_imm(Cond::Ne, R0, 0, from_guest);
    // Only a frame for a MAC not this port's can be a guest's (broadcast and multicast are
    // not PACKET_OTHERHOST either).
    a.bind(not_from_guest);
    a.ldx(Size::W, R0, R6, SKB_PKT_TYPE);
    a.jmp_imm(Cond::Ne, R0, PACKET_OTHERHOST, done);
    packet_pointers(&mut a);
    need(&mut a, R2, ETH_HDR, done);
    no_guest_has(&mut a, maps.filter, 0, done);
    key(&mut a, 0, DST_KEY);
    lookup(&mut a, maps.pins, DST_KEY);
    a.jmp_imm(Cond::Eq, R0, 0, done);
    a.ldx(Size::W, R1, R0, 4).stx(Size::DW, R10, IDX, R1);
    a.ldx(Size::W, R1, R0, 0);
    a.jmp32_imm(Cond::Ne, R1, port as u32, flood);
    rx_wire(&mut a);
    let rx = RX + 16 * port_slot as i16;
    lookup(&mut a, maps.counters, IDX_KEY);
    a.jmp_imm(Cond::Eq, R0, 0, done);
    a.ldx(Size::DW, R1, R10, SEGS);
    add(&mut a, rx, R1);
    a.ldx(Size::DW, R1, R10, WIRE);
    add(&mut a, rx + 8, R1);
    a.ja(done);

    a.bind(flood);
    bump(&mut a, maps.counters, FLOODS, shot);
    a.bind(from_guest);
    let reflection = a.label();
    a.ldx(Size::W, R1, R0, 4).stx(Size::DW, R10, IDX, R1);
    a.ldx(Size::W, R1, R0, 0);
    a.jmp32_imm(Cond::Ne, R1, port as u32, reflection);
    bump(&mut a, maps.counters, SEEN, done);
    a.bind(reflection);
    bump(&mut a, maps.counters, REFLECTIONS, shot);
    a.bind(shot);
    a.mov_imm(R0, TC_ACT_SHOT).exit();
    a.bind(done);
    a.mov_imm(R0, TC_ACT_UNSPEC).exit();
    a.finish()
}

/// R6 = context (set by the caller). R8 = the VLAN (of a tag taken out, else of one in the
/// frame, else 0), R7 = the tag's length in the frame (0 or 4), R9 = whether one was taken
/// out; R2/R3 = data/data_end with the Ethernet header (and a tag in the frame) checked in.
/// An 802.1ad tag taken out, or a runt, ends here.
fn vlan_and_tag(a: &mut Asm, done: Label) {
    use Reg::*;
    let (untagged, keyed) = (a.label(), a.label());
    a.mov_imm(R7, 0).mov_imm(R8, 0);
    a.ldx(Size::W, R9, R6, SKB_VLAN_PRESENT);
    a.jmp_imm(Cond::Eq, R9, 0, untagged);
    a.ldx(Size::W, R0, R6, SKB_VLAN_PROTO);
    a.jmp_imm(Cond::Ne, R0, wire16(ETH_P_8021Q), done);
    a.ldx(Size::W, R8, R6, SKB_VLAN_TCI);
    a.alu_imm(Alu::And, R8, 0x0fff);
    a.bind(untagged);
    packet_pointers(a);
    need(a, R2, ETH_HDR, done);
    a.ldx(Size::H, R0, R2, 12);
    a.jmp_imm(Cond::Ne, R0, wire16(ETH_P_8021Q), keyed);
    need(a, R2, ETH_HDR + 4, done);
    a.mov_imm(R7, 4);
    // With a tag taken out, the one in the frame is an inner one.
    a.jmp_imm(Cond::Ne, R9, 0, keyed);
    a.ldx(Size::H, R8, R2, 14).to_be(R8, 16);
    a.alu_imm(Alu::And, R8, 0x0fff);
    a.bind(keyed);
}

/// Goes to `out` when no pinned guest's MAC ends in the two octets of the frame's MAC at `mac`
/// (6: the source, 0: the destination): the filter's byte for them (`GuestMaps`: one per value
/// of a MAC's last two octets, set while a guest with them is pinned) read in place, with no
/// lookup. R2 = data with the Ethernet header checked in (kept). Clobbers R0, R1, R4.
fn no_guest_has(a: &mut Asm, filter: i32, mac: i16, out: Label) {
    use Reg::*;
    a.ldx(Size::H, R1, R2, mac + 4);
    a.ld_map_value(R4, filter, 0).alu_reg(Alu::Add, R4, R1);
    a.ldx(Size::B, R0, R4, 0);
    a.jmp_imm(Cond::Eq, R0, 0, out);
}

/// The key at `at` on the stack: the MAC at `mac` in the frame (R2, checked in), VLAN R8.
fn key(a: &mut Asm, mac: i16, at: i16) {
    use Reg::*;
    a.ldx(Size::H, R1, R2, mac + 4)
        .stx(Size::H, R10, at + 4, R1);
    a.stx(Size::H, R10, at + 6, R8);
    a.ldx(Size::W, R1, R2, mac).stx(Size::W, R10, at, R1);
}

/// R0 = the value of `map` under the key at `at` on the stack, or 0. Clobbers R1-R5.
fn lookup(a: &mut Asm, map: i32, at: i16) {
    use Reg::*;
    a.ld_map_fd(R1, map);
    a.mov(R2, R10).alu_imm(Alu::Add, R2, i32::from(at));
    a.call(Helper::MapLookupElem);
}

/// `*(u64 *)(R0 + field) += src` (this CPU's record: nothing else writes it meanwhile).
fn add(a: &mut Asm, field: i16, src: Reg) {
    use Reg::*;
    a.ldx(Size::DW, R2, R0, field);
    a.alu_reg(Alu::Add, R2, src).stx(Size::DW, R0, field, R2);
}

/// Counts one at `field` of the slot in `IDX`, then goes to `then`.
fn bump(a: &mut Asm, counters: i32, field: i16, then: Label) {
    use Reg::*;
    lookup(a, counters, IDX_KEY);
    a.jmp_imm(Cond::Eq, R0, 0, then);
    a.mov_imm(R1, 1);
    add(a, field, R1);
    a.ja(then);
}

/// R2 = data, R3 = data_end (again after a helper that may move the packet).
fn packet_pointers(a: &mut Asm) {
    use Reg::*;
    a.ldx(Size::W, R2, R6, SKB_DATA)
        .ldx(Size::W, R3, R6, SKB_DATA_END);
}

/// `if base + len > R3 goto out`. Clobbers R0.
fn need(a: &mut Asm, base: Reg, len: i32, out: Label) {
    use Reg::*;
    a.mov(R0, base).alu_imm(Alu::Add, R0, len);
    a.jmp_reg(Cond::Gt, R0, R3, out);
}

/// What the packet counts for, into `SEGS` and `WIRE`, as the counting program counts it
/// (`tc_program::wire_length`): one frame of `skb->len`, or where GRO merged `gso_segs` frames,
/// each with the Ethernet, tag, IP and TCP/UDP headers the merge kept once. Headers it cannot
/// read count once. R7 = the tag's length in the frame. Clobbers R0-R5, R9.
fn rx_wire(a: &mut Asm) {
    use Reg::*;
    let (done, linear, l3, v6, tcp, l4) = (
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
    );
    a.ldx(Size::W, R0, R6, SKB_LEN).stx(Size::DW, R10, WIRE, R0);
    a.st(Size::DW, R10, SEGS, 1);
    a.ldx(Size::W, R1, R6, SKB_GSO_SEGS);
    a.jmp_imm(Cond::Le, R1, 1, done);
    a.stx(Size::DW, R10, SEGS, R1);
    packet_pointers(a);
    a.mov(R1, R2).alu_imm(Alu::Add, R1, HEAD);
    a.jmp_reg(Cond::Le, R1, R3, linear);
    a.ldx(Size::W, R1, R6, SKB_LEN);
    a.jmp_imm(Cond::Lt, R1, HEAD, linear);
    // Headers outside the linear head (drivers that build GRO packets from pages): pulled
    // in; a failure leaves the headers unread and the packet counted as its length.
    a.mov(R1, R6).mov_imm(R2, HEAD).call(Helper::SkbPullData);
    packet_pointers(a);
    a.bind(linear);
    // R4: the network header (constant offsets only: the verifier refuses a packet pointer
    // plus a register to a user without CAP_PERFMON); R0: the ethertype before it.
    need(a, R2, ETH_HDR + 4, done);
    a.mov(R4, R2).alu_imm(Alu::Add, R4, ETH_HDR);
    a.ldx(Size::H, R0, R2, 12);
    a.jmp_imm(Cond::Eq, R7, 0, l3);
    a.alu_imm(Alu::Add, R4, 4).ldx(Size::H, R0, R2, 16);
    a.bind(l3);
    a.mov(R5, R7).alu_imm(Alu::Add, R5, ETH_HDR);
    a.mov_imm(R9, 6);
    a.jmp_imm(Cond::Eq, R0, wire16(ETH_P_IPV6), v6);
    a.jmp_imm(Cond::Ne, R0, wire16(ETH_P_IP), done);
    a.mov_imm(R9, 4);
    need(a, R4, 20, done);
    a.ldx(Size::B, R1, R4, 0).alu_imm(Alu::And, R1, 0x0f);
    a.alu_imm(Alu::Lsh, R1, 2).ldx(Size::B, R0, R4, 9);
    a.ja(tcp);
    a.bind(v6);
    need(a, R4, 40, done);
    a.mov_imm(R1, 40).ldx(Size::B, R0, R4, 6);
    a.bind(tcp);
    a.alu_reg(Alu::Add, R5, R1);
    let udp = a.label();
    a.jmp_imm(Cond::Ne, R0, IPPROTO_TCP, udp);
    tcp_data_offset(a);
    a.alu_imm(Alu::Rsh, R1, 4);
    a.alu_imm(Alu::Lsh, R1, 2).alu_reg(Alu::Add, R5, R1);
    a.ja(l4);
    a.bind(udp);
    a.jmp_imm(Cond::Ne, R0, IPPROTO_UDP, l4);
    a.alu_imm(Alu::Add, R5, 8);
    // WIRE += (SEGS - 1) * R5
    a.bind(l4);
    a.ldx(Size::DW, R1, R10, SEGS).alu_imm(Alu::Sub, R1, 1);
    a.alu_reg(Alu::Mul, R1, R5);
    a.ldx(Size::DW, R0, R10, WIRE).alu_reg(Alu::Add, R0, R1);
    a.stx(Size::DW, R10, WIRE, R0);
    a.bind(done);
}

/// R1 = TCP's data offset byte: in place behind a 20-byte IPv4 or a 40-byte IPv6 header, else
/// through the helper (its offset is a register; on failure it reads 0). R1 = the network
/// header's length, R3 = data_end, R4 = the network header, R5 = the headers before TCP's
/// (kept), R9 = the IP version. Clobbers R0-R4.
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
    a.st(Size::DW, R10, SCRATCH, 0);
    a.mov(R1, R6).mov(R2, R5).alu_imm(Alu::Add, R2, 12);
    a.mov(R3, R10).alu_imm(Alu::Add, R3, i32::from(SCRATCH));
    a.mov_imm(R4, 1).call(Helper::SkbLoadBytes);
    a.ldx(Size::DW, R5, R10, HDR);
    a.ldx(Size::B, R1, R10, SCRATCH);
    a.bind(read);
}
