//! The sampling draw both counting programs make (the tc program and the socket filter): past
//! a port's limit one IPv4/IPv6 data frame in N is kept and counted for N, the others end
//! before their key or their slot; ARP and Neighbor Discovery are never sampled. N (log2)
//! lives in a one-entry per-CPU array the daemon writes (no reload), beside each CPU's
//! generator and the packets the program saw there (what N is chosen from). Why this way and
//! what it costs: docs/design.md, "Sampling on busy ports".

use super::insn::{Alu, Asm, Cond, Helper, Label, Reg, Size};
use super::program::{wire16, ETH_P_IP, SEGS, SKB_PROTOCOL, WIRE};

/// Stack: log2 N of the port's sampling (0: every frame counted), the draw (not 0: a data
/// frame is not one of the 1 in N kept), and the ratio map's key; all written first.
const SHIFT: i16 = -96;
const SKIP: i16 = -104;
const RATIO_KEY: i16 = -112;
/// Largest log2 N the program applies (N up to 2^16, as the capture filter's sampling).
pub const MAX_SHIFT: u32 = 16;
/// The ratio map's value, one per CPU: log2 N, the state of that CPU's generator (never 0),
/// and the packets the hook handed the program on that CPU (the rate N is chosen from: under
/// GRO far fewer than the port's wire packets).
pub const RATIO_VALUE: usize = 24;
const RATIO_SHIFT: i16 = 0;
const RATIO_STATE: i16 = 8;
pub const RATIO_SEEN: usize = 16;

/// The sampling draw, before the frame is read (a helper call ends the packet pointers'
/// checks): [SHIFT] = log2 N from this CPU's entry of the ratio map (0 without one), [SKIP] =
/// log2 N bits of the next number of that entry's xorshift64 generator, 0 for one data frame
/// in N (the one kept). Not `bpf_get_prandom_u32`: a helper call and its return cost about
/// 20 ns a frame on the bench's VM, more than the rest of a frame the draw skips (see
/// docs/design.md, "Sampling on busy ports"). R6 = context.
pub(super) fn draw(a: &mut Asm, ratio_fd: i32) {
    use Reg::*;
    let drawn = a.label();
    a.st(Size::DW, R10, SHIFT, 0).st(Size::DW, R10, SKIP, 0);
    a.st(Size::DW, R10, RATIO_KEY, 0);
    a.ld_map_fd(R1, ratio_fd);
    a.mov(R2, R10).alu_imm(Alu::Add, R2, i32::from(RATIO_KEY));
    a.call(Helper::MapLookupElem);
    a.jmp_imm(Cond::Eq, R0, 0, drawn);
    // This CPU's own: no atomic needed.
    a.ldx(Size::DW, R1, R0, RATIO_SEEN as i16)
        .alu_imm(Alu::Add, R1, 1);
    a.stx(Size::DW, R0, RATIO_SEEN as i16, R1);
    a.ldx(Size::DW, R1, R0, RATIO_SHIFT);
    a.jmp_imm(Cond::Eq, R1, 0, drawn);
    // A larger value is the daemon's bug; bounded, it cannot make the shift undefined.
    a.jmp_imm(Cond::Gt, R1, MAX_SHIFT as i32, drawn);
    a.stx(Size::DW, R10, SHIFT, R1);
    // x ^= x << 13; x ^= x >> 7; x ^= x << 17 (this CPU's own: nothing else writes it).
    a.ldx(Size::DW, R2, R0, RATIO_STATE);
    for (op, by) in [(Alu::Lsh, 13), (Alu::Rsh, 7), (Alu::Lsh, 17)] {
        a.mov(R3, R2).alu_imm(op, R3, by).alu_reg(Alu::Xor, R2, R3);
    }
    a.stx(Size::DW, R0, RATIO_STATE, R2);
    // The high half: the better-mixed bits.
    a.alu_imm(Alu::Rsh, R2, 32);
    a.mov_imm(R3, 1)
        .alu_reg(Alu::Lsh, R3, R1)
        .alu_imm(Alu::Sub, R3, 1);
    a.alu_reg(Alu::And, R2, R3).stx(Size::DW, R10, SKIP, R2);
    a.bind(drawn);
}

/// An IPv4 frame the draw did not keep ends at once, before any of it is read: the stack's
/// protocol (`skb->protocol`, the ethertype behind any tag the driver took out) says it is
/// neither ARP nor ND, and a frame a check below would refuse is not counted either way.
pub(super) fn unsampled_ipv4(a: &mut Asm, done: Label) {
    use Reg::*;
    let read = a.label();
    a.ldx(Size::DW, R0, R10, SKIP);
    a.jmp_imm(Cond::Eq, R0, 0, read);
    a.ldx(Size::W, R0, R6, SKB_PROTOCOL);
    a.jmp_imm(Cond::Eq, R0, wire16(ETH_P_IP), done);
    a.bind(read);
}

/// A data frame the draw did not keep ends here, before its key or its slot.
pub(super) fn unsampled(a: &mut Asm, done: Label) {
    a.ldx(Size::DW, Reg::R0, Reg::R10, SKIP);
    a.jmp_imm(Cond::Ne, Reg::R0, 0, done);
}

/// A kept frame of a sampled port counts for N: [SEGS] and [WIRE] shifted left by log2 N.
pub(super) fn scale(a: &mut Asm) {
    use Reg::*;
    let exact = a.label();
    a.ldx(Size::DW, R1, R10, SHIFT);
    a.jmp_imm(Cond::Eq, R1, 0, exact);
    for at in [SEGS, WIRE] {
        a.ldx(Size::DW, R0, R10, at).alu_reg(Alu::Lsh, R0, R1);
        a.stx(Size::DW, R10, at, R0);
    }
    a.bind(exact);
}
