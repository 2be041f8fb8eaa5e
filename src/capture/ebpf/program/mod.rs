//! The counting program: an eBPF socket filter for a port's capture socket that counts every
//! IPv4/IPv6 data frame (one in N on a busy port: `draw.rs`) into the counting map and drops it
//! before anything is copied, and passes ARP and Neighbor Discovery to the ring as the classic
//! filter does (`filter.rs`).
//!
//! Acceptance, the same as the classic filter followed by the daemon's checks:
//! - a tag the driver took out (`vlan_present`) gives the VLAN when its TPID is 802.1Q; any other
//!   TPID drops the frame (rlbd does not steer 802.1ad). Otherwise one 802.1Q tag in the frame
//!   gives it (the network header moves by 4);
//! - ARP (any direction) and ICMPv6 Neighbor Solicitations and Advertisements (any direction)
//!   go to the ring, truncated to the snap length;
//! - an IPv4 frame (version 4, header length >= 5) or IPv6 frame (version 6, not NS/NA) that came
//!   in (not `PACKET_OUTGOING`) for this port (`PACKET_HOST`) or for one of the host's other MACs
//!   is counted under (source MAC, VLAN, destination address) and dropped;
//! - everything else is dropped.
//!
//! A frame too short for a field it needs is dropped (`LD_ABS` ends the program with 0).

use super::draw::{draw, scale, unsampled, unsampled_ipv4};
use super::insn::{Alu, Asm, Cond, Helper, Insn, Label, Reg, Size};
use super::map::{KEY_SIZE, VALUE_SIZE};
use super::slots::{PROBES, SLOT_BYTES, SLOT_FRAMES, SLOT_SRC};
use crate::capture::Mac;

// `struct __sk_buff` field offsets (UAPI).
pub(super) const SKB_LEN: i16 = 0;
pub(super) const SKB_PKT_TYPE: i16 = 4;
pub(super) const SKB_VLAN_PRESENT: i16 = 20;
pub(super) const SKB_VLAN_TCI: i16 = 24;
pub(super) const SKB_VLAN_PROTO: i16 = 28;
/// The ethertype as the stack read it (big-endian; behind any tag the driver took out).
pub(super) const SKB_PROTOCOL: i16 = 16;

pub(super) const PACKET_HOST: i32 = 0;
pub(super) const PACKET_OUTGOING: i32 = 4;
pub(super) const ETH_P_IP: i32 = 0x0800;
pub(super) const ETH_P_ARP: i32 = 0x0806;
pub(super) const ETH_P_8021Q: i32 = 0x8100;
pub(super) const ETH_P_IPV6: i32 = 0x86dd;
pub(super) const ETH_HDR: i32 = 14;
pub(super) const IPPROTO_TCP: i32 = 6;
pub(super) const IPPROTO_UDP: i32 = 17;
pub(super) const IPPROTO_ICMPV6: i32 = 58;
pub(super) const ND_NS: i32 = 135;
pub(super) const ND_NA: i32 = 136;

// The stack: the map key (24 bytes) at -24, a new entry's value (32 bytes) at -56.
pub(super) const KEY: i16 = -24;
pub(super) const KEY_VLAN: i16 = KEY + 6;
pub(super) const KEY_DST: i16 = KEY + 8;
const VAL: i16 = -56;
const VAL_FRAMES: i16 = VAL;
const VAL_BYTES: i16 = VAL + 8;
const VAL_SRC: i16 = VAL + 16;
/// The slot table's probe index, where the hash map's new value would be: written whole (8
/// bytes) every time, since a verifier before 6.x refuses a user without CAP_PERFMON (the
/// packaged unit's) a 4-byte store over the 4-byte spill of a bounded scalar; read as the u32
/// key at [`IDX_KEY`].
const IDX: i16 = VAL;
/// The u32 key inside the 8-byte index: its low half.
const IDX_KEY: i16 = if cfg!(target_endian = "big") {
    IDX + 4
} else {
    IDX
};
/// What the frame counts for, written before the count: the frames it arrived as, and their
/// bytes on the wire (more than one where GRO merged a stream's frames: see `tc_program`).
pub(super) const SEGS: i16 = -64;
pub(super) const WIRE: i16 = -72;

/// `x`, a big-endian 16-bit field, as a direct packet load (or `skb->protocol`) reads it.
pub(super) fn wire16(x: i32) -> i32 {
    i32::from(u16::from_ne_bytes((x as u16).to_be_bytes()))
}

/// Where the program counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// A per-CPU LRU hash keyed by the key (`map.rs`).
    Hash,
    /// An mmapable array of `slots` slots (a power of two) and the overflow slot (`slots.rs`),
    /// probed from the key hashed with the odd multipliers `mul` (secret per process, so
    /// senders cannot aim their MACs at one probe run).
    Slots { slots: u32, mul: [i32; 3] },
}
/// Most host MACs (besides the port's own) one program tests: 4 instructions each, twice.
pub const MAX_HOST_MACS: usize = 64;

/// Builds the program for a port whose map is `map_fd` and whose sampling ratio is in
/// `ratio_fd` (`draw.rs`); `host_macs` are the server's MACs other than the port's own whose
/// frames count too (a macvlan's, a bridge's). ARP and ND frames are passed truncated to
/// `snap_len`; a data frame the draw does not keep is dropped uncounted.
pub fn counting_program(
    host_macs: &[Mac],
    snap_len: u32,
    map_fd: i32,
    store: Store,
    ratio_fd: i32,
) -> Result<Vec<Insn>, String> {
    if host_macs.len() > MAX_HOST_MACS {
        return Err(format!(
            "{} host MACs given, at most {MAX_HOST_MACS} supported",
            host_macs.len()
        ));
    }
    let snap = i32::try_from(snap_len).map_err(|_| format!("snap length {snap_len} too large"))?;
    if let Store::Slots { slots, .. } = store {
        if !slots.is_power_of_two() || slots > 1 << 30 {
            return Err(format!("{slots} slots: a power of two up to 2^30 expected"));
        }
    }
    debug_assert_eq!(KEY_SIZE, 24);
    debug_assert_eq!(VALUE_SIZE, 32);
    let mut a = Asm::new();
    let l = Labels::new(&mut a);
    // R6 = context (LD_ABS needs it there).
    a.mov(Reg::R6, Reg::R1);
    draw(&mut a, ratio_fd);
    unsampled_ipv4(&mut a, l.drop);
    vlan_and_ethertype(&mut a, &l);
    ipv6_key(&mut a, &l, host_macs);
    ipv4_key(&mut a, &l, host_macs);
    key_source(&mut a, &l);
    scale(&mut a);
    match store {
        Store::Hash => count_hash(&mut a, l.drop, map_fd),
        Store::Slots { slots, mul } => count_slots(&mut a, l.drop, map_fd, slots, mul),
    }
    a.bind(l.drop);
    a.mov_imm(Reg::R0, 0).exit();
    a.bind(l.pass);
    a.mov_imm(Reg::R0, snap).exit();
    a.finish()
}

/// The program's jump targets, shared by its sections.
struct Labels {
    drop: Label,
    pass: Label,
    v4: Label,
    count: Label,
}

impl Labels {
    fn new(a: &mut Asm) -> Self {
        Labels {
            drop: a.label(),
            pass: a.label(),
            v4: a.label(),
            count: a.label(),
        }
    }
}

/// R7 = the tag's length in the frame (0 or 4), R8 = VLAN, R9 = whether the driver took a tag
/// out; then dispatch on the EtherType: ARP passes, IPv4 goes to `v4`, IPv6 falls through,
/// anything else drops. R6 = context.
fn vlan_and_ethertype(a: &mut Asm, l: &Labels) {
    use Reg::*;
    let (untagged, inner, dispatch) = (a.label(), a.label(), a.label());
    a.mov_imm(R7, 0).mov_imm(R8, 0);
    a.ldx(Size::W, R9, R6, SKB_VLAN_PRESENT);
    a.jmp_imm(Cond::Eq, R9, 0, untagged);
    a.ldx(Size::W, R0, R6, SKB_VLAN_PROTO);
    // vlan_proto is the raw big-endian TPID.
    a.jmp_imm(
        Cond::Ne,
        R0,
        i32::from((ETH_P_8021Q as u16).to_be()),
        l.drop,
    );
    a.ldx(Size::W, R8, R6, SKB_VLAN_TCI);
    a.alu_imm(Alu::And, R8, 0x0fff);
    a.bind(untagged);
    a.ld_abs(Size::H, 12);
    a.jmp_imm(Cond::Ne, R0, ETH_P_8021Q, dispatch);
    a.mov_imm(R7, 4);
    // A tag the driver took out names the VLAN; one left in the frame only moves the header.
    a.jmp_imm(Cond::Ne, R9, 0, inner);
    a.ld_abs(Size::H, 14);
    a.mov(R8, R0).alu_imm(Alu::And, R8, 0x0fff);
    a.bind(inner);
    a.ld_abs(Size::H, 16);
    a.bind(dispatch);
    a.jmp_imm(Cond::Eq, R0, ETH_P_ARP, l.pass);
    a.jmp_imm(Cond::Eq, R0, ETH_P_IP, l.v4);
    a.jmp_imm(Cond::Ne, R0, ETH_P_IPV6, l.drop);
}

/// IPv6: NS/NA pass; a data frame for the host gets its destination in the key, R9 = 6.
fn ipv6_key(a: &mut Asm, l: &Labels, host_macs: &[Mac]) {
    use Reg::*;
    let (v6data, v6key) = (a.label(), a.label());
    a.ld_ind(Size::B, R7, ETH_HDR);
    a.alu_imm(Alu::Rsh, R0, 4);
    a.jmp_imm(Cond::Ne, R0, 6, l.drop);
    a.ld_ind(Size::B, R7, ETH_HDR + 6);
    a.jmp_imm(Cond::Ne, R0, IPPROTO_ICMPV6, v6data);
    a.ld_ind(Size::B, R7, ETH_HDR + 40);
    a.jmp_imm(Cond::Eq, R0, ND_NS, l.pass);
    a.jmp_imm(Cond::Eq, R0, ND_NA, l.pass);
    a.bind(v6data);
    unsampled(a, l.drop);
    host_check(a, host_macs, v6key, l.drop);
    a.bind(v6key);
    a.mov_imm(R9, 6);
    load_bytes(a, ETH_HDR + 24, KEY_DST, 16);
    a.jmp_imm(Cond::Ne, R0, 0, l.drop);
    a.ja(l.count);
}

/// IPv4 (what ip_rcv would take for a header at all) for the host: its destination in the key
/// as ::ffff:a.b.c.d, R9 = 4; falls through to `count`.
fn ipv4_key(a: &mut Asm, l: &Labels, host_macs: &[Mac]) {
    use Reg::*;
    let v4key = a.label();
    a.bind(l.v4);
    unsampled(a, l.drop);
    a.ld_ind(Size::B, R7, ETH_HDR);
    a.mov(R1, R0).alu_imm(Alu::Rsh, R1, 4);
    a.jmp_imm(Cond::Ne, R1, 4, l.drop);
    a.alu_imm(Alu::And, R0, 0x0f);
    a.jmp_imm(Cond::Lt, R0, 5, l.drop);
    host_check(a, host_macs, v4key, l.drop);
    a.bind(v4key);
    a.mov_imm(R9, 4);
    // A load of the packet is cheaper than the load-bytes helper; it is put back in the
    // packet's byte order.
    a.st(Size::DW, R10, KEY_DST, 0);
    a.st(Size::H, R10, KEY_DST + 8, 0);
    a.st(Size::H, R10, KEY_DST + 10, 0xffff);
    a.ld_ind(Size::W, R7, ETH_HDR + 16).to_be(R0, 32);
    a.stx(Size::W, R10, KEY_DST + 12, R0);
}

/// The key's source MAC and VLAN (the destination is in already).
fn key_source(a: &mut Asm, l: &Labels) {
    use Reg::*;
    a.bind(l.count);
    a.ld_abs(Size::W, 6)
        .to_be(R0, 32)
        .stx(Size::W, R10, KEY, R0);
    a.ld_abs(Size::H, 10)
        .to_be(R0, 16)
        .stx(Size::H, R10, KEY + 4, R0);
    a.stx(Size::H, R10, KEY_VLAN, R8);
    // A capture socket's filter counts the packet as one frame of its length.
    a.st(Size::DW, R10, SEGS, 1);
    a.ldx(Size::W, R1, R6, SKB_LEN).stx(Size::DW, R10, WIRE, R1);
}

/// The count in the hash: this CPU's entry grows by the frame, or a new one is made (then
/// falls through to `drop`).
pub(super) fn count_hash(a: &mut Asm, drop: Label, map_fd: i32) {
    use Reg::*;
    let (new, new6, insert) = (a.label(), a.label(), a.label());
    a.ld_map_fd(R1, map_fd);
    a.mov(R2, R10).alu_imm(Alu::Add, R2, i32::from(KEY));
    a.call(Helper::MapLookupElem);
    a.jmp_imm(Cond::Eq, R0, 0, new);
    // This CPU's own copy: no other CPU writes it, and the receive path does not nest on one.
    for (field, what) in [(0, SEGS), (8, WIRE)] {
        a.ldx(Size::DW, R1, R0, field).ldx(Size::DW, R2, R10, what);
        a.alu_reg(Alu::Add, R1, R2).stx(Size::DW, R0, field, R1);
    }
    a.ja(drop);

    // A new entry: the frames, their bytes, and the source address they came from.
    a.bind(new);
    for (field, what) in [(VAL_FRAMES, SEGS), (VAL_BYTES, WIRE)] {
        a.ldx(Size::DW, R1, R10, what).stx(Size::DW, R10, field, R1);
    }
    a.jmp_imm(Cond::Eq, R9, 6, new6);
    a.st(Size::DW, R10, VAL_SRC, 0);
    a.st(Size::H, R10, VAL_SRC + 8, 0);
    a.st(Size::H, R10, VAL_SRC + 10, 0xffff);
    // On failure the helper zeroes the bytes: the entry still counts, without a source.
    load_bytes(a, ETH_HDR + 12, VAL_SRC + 12, 4);
    a.ja(insert);
    a.bind(new6);
    load_bytes(a, ETH_HDR + 8, VAL_SRC, 16);
    a.bind(insert);
    a.ld_map_fd(R1, map_fd);
    a.mov(R2, R10).alu_imm(Alu::Add, R2, i32::from(KEY));
    a.mov(R3, R10).alu_imm(Alu::Add, R3, i32::from(VAL));
    a.mov_imm(R4, 0); // BPF_ANY
    a.call(Helper::MapUpdateElem);
}

/// The count in the slot table: the key's slot is the first of its probe run that holds the
/// key, or the first free one (claimed: key and source written, the key's first word last);
/// with neither, the overflow slot. Frames and bytes are atomic adds (other CPUs count into
/// the same slot). Falls through to `drop`.
pub(super) fn count_slots(a: &mut Asm, drop: Label, map_fd: i32, slots: u32, mul: [i32; 3]) {
    use Reg::*;
    let mask = (slots - 1) as i32;
    let (claim, add) = (a.label(), a.label());
    // The all-zero MAC untagged would read as a free slot.
    a.ldx(Size::DW, R1, R10, KEY);
    a.jmp_imm(Cond::Eq, R1, 0, drop);
    a.alu_imm(Alu::Mul, R1, mul[0]);
    for (w, m) in [(KEY + 8, mul[1]), (KEY + 16, mul[2])] {
        a.ldx(Size::DW, R2, R10, w).alu_imm(Alu::Mul, R2, m);
        a.alu_reg(Alu::Xor, R1, R2);
    }
    a.mov(R2, R1)
        .alu_imm(Alu::Rsh, R2, 32)
        .alu_reg(Alu::Xor, R1, R2);
    a.alu_imm(Alu::And, R1, mask);
    a.stx(Size::DW, R10, IDX, R1);
    for _ in 0..PROBES {
        let (next, other) = (a.label(), a.label());
        lookup_slot(a, map_fd, drop);
        a.ldx(Size::DW, R1, R0, 0).ldx(Size::DW, R2, R10, KEY);
        a.jmp_reg(Cond::Ne, R1, R2, other);
        for w in [8, 16] {
            a.ldx(Size::DW, R1, R0, w).ldx(Size::DW, R2, R10, KEY + w);
            a.jmp_reg(Cond::Ne, R1, R2, next);
        }
        a.ja(add);
        a.bind(other);
        a.jmp_imm(Cond::Eq, R1, 0, claim);
        a.bind(next);
        a.ldx(Size::DW, R1, R10, IDX).alu_imm(Alu::Add, R1, 1);
        a.alu_imm(Alu::And, R1, mask).stx(Size::DW, R10, IDX, R1);
    }
    a.st(Size::DW, R10, IDX, slots as i32);
    lookup_slot(a, map_fd, drop);
    a.ja(add);

    // R8 (the VLAN, in the key now) keeps the slot across the helper calls.
    let (src4, src_done) = (a.label(), a.label());
    a.bind(claim);
    a.mov(R8, R0);
    for w in [8, 16] {
        a.ldx(Size::DW, R1, R10, KEY + w).stx(Size::DW, R8, w, R1);
    }
    a.jmp_imm(Cond::Ne, R9, 6, src4);
    load_bytes_to(a, R8, ETH_HDR + 8, SLOT_SRC as i16, 16);
    a.ja(src_done);
    a.bind(src4);
    a.st(Size::DW, R8, SLOT_SRC as i16, 0);
    a.st(Size::H, R8, SLOT_SRC as i16 + 8, 0);
    a.st(Size::H, R8, SLOT_SRC as i16 + 10, 0xffff);
    load_bytes_to(a, R8, ETH_HDR + 12, SLOT_SRC as i16 + 12, 4);
    a.bind(src_done);
    a.ldx(Size::DW, R1, R10, KEY).stx(Size::DW, R8, 0, R1);
    a.mov(R0, R8);

    a.bind(add);
    a.ldx(Size::DW, R1, R10, SEGS)
        .atomic_add(R0, SLOT_FRAMES as i16, R1);
    a.ldx(Size::DW, R1, R10, WIRE)
        .atomic_add(R0, SLOT_BYTES as i16, R1);
}

/// `R0 = &slots[*(u32 *)(fp + IDX_KEY)]`, or to `drop` (never: the index is in range, but the
/// verifier wants the check).
fn lookup_slot(a: &mut Asm, map_fd: i32, drop: Label) {
    use Reg::*;
    a.ld_map_fd(R1, map_fd);
    a.mov(R2, R10).alu_imm(Alu::Add, R2, i32::from(IDX_KEY));
    a.call(Helper::MapLookupElem);
    a.jmp_imm(Cond::Eq, R0, 0, drop);
}

/// `bpf_skb_load_bytes(ctx, R7 + off, base + to, len)` into a slot (`base`, a callee-saved
/// register). On failure the helper zeroes the bytes.
fn load_bytes_to(a: &mut Asm, base: Reg, off: i32, to: i16, len: i32) {
    use Reg::*;
    a.mov(R1, R6).mov(R2, R7).alu_imm(Alu::Add, R2, off);
    a.mov(R3, base).alu_imm(Alu::Add, R3, i32::from(to));
    a.mov_imm(R4, len).call(Helper::SkbLoadBytes);
}

/// `R0 = bpf_skb_load_bytes(ctx, R7 + off, fp + to, len)`: bytes of the network header (moved
/// by the tag) onto the stack.
fn load_bytes(a: &mut Asm, off: i32, to: i16, len: i32) {
    use Reg::*;
    a.mov(R1, R6).mov(R2, R7).alu_imm(Alu::Add, R2, off);
    a.mov(R3, R10).alu_imm(Alu::Add, R3, i32::from(to));
    a.mov_imm(R4, len).call(Helper::SkbLoadBytes);
}

/// Goes to `ok` for a frame that came in for this port or for one of `host_macs`, else to
/// `drop`.
fn host_check(a: &mut Asm, host_macs: &[Mac], ok: Label, drop: Label) {
    use Reg::*;
    a.ldx(Size::W, R0, R6, SKB_PKT_TYPE);
    a.jmp_imm(Cond::Eq, R0, PACKET_HOST, ok);
    a.jmp_imm(Cond::Eq, R0, PACKET_OUTGOING, drop);
    for m in host_macs {
        let o = m.octets();
        let next = a.label();
        a.ld_abs(Size::W, 2);
        a.jmp32_imm(
            Cond::Ne,
            R0,
            u32::from_be_bytes([o[2], o[3], o[4], o[5]]),
            next,
        );
        a.ld_abs(Size::H, 0);
        a.jmp_imm(
            Cond::Eq,
            R0,
            i32::from(u16::from_be_bytes([o[0], o[1]])),
            ok,
        );
        a.bind(next);
    }
    a.ja(drop);
}

#[cfg(test)]
pub(super) mod tests;
