//! The classic BPF program attached to every capture socket.
//!
//! It passes (a) IPv4 and IPv6 frames whose destination MAC is one of the server's ports, (b) ARP
//! frames and (c) ICMPv6 Neighbor Solicitations and Advertisements in any direction, truncated to
//! the snap length, and drops everything else. One 802.1Q tag is
//! looked through (the kernel normally strips the tag before taps see the frame, but not always, e.g.
//! outgoing frames without VLAN offload). Building the program is plain safe code; attaching it is
//! in `setup.rs`.
//!
//! Sampling: with a ratio N > 1 the kernel keeps each IPv4/IPv6 frame of (a) with probability 1/N
//! (the `SKF_AD_RANDOM` extension, a per-CPU pseudo-random number, masked to N - 1) and drops the
//! rest before anything is copied, so a busy port costs the daemon 1/N of its frames. ARP and
//! Neighbor Discovery are tested first and never sampled: every one of them matters to steering.

use std::io;

use libc::sock_filter;

use super::frame::Mac;

/// Most destination MACs one program can test. Each MAC costs 4 instructions, and classic BPF jump
/// offsets are 8 bits: the ARP accept jump spans every MAC block and the sampling block
/// (12 + 4 * MAX_MACS), so that must stay below 256.
pub const MAX_MACS: usize = 32;

/// Default snap length: Ethernet (14) + one 802.1Q tag (4) + an IPv4 header with up to 40 bytes of
/// options (60) = 78, Ethernet + tag + ARP (28) = 46, or Ethernet + tag + IPv6 (40) + an NS/NA
/// (24) + one link-layer address option (8) = 90; rounded up.
pub const DEFAULT_SNAP_LEN: u32 = 96;

/// Largest sampling ratio (one frame in this many is kept). A power of two, like every ratio.
pub const MAX_SAMPLING: u32 = 1 << 16;

const ETH_P_IP: u32 = 0x0800;
const ETH_P_ARP: u32 = 0x0806;
const ETH_P_8021Q: u32 = 0x8100;
const ETH_P_IPV6: u32 = 0x86dd;
const IPPROTO_ICMPV6: u32 = 58;
const ND_NS: u32 = 135;
const ND_NA: u32 = 136;
const ETH_HDR: u32 = 14;
const VLAN_LEN: u32 = 4;
const IPV6_NEXT_HEADER: u32 = 6;
const IPV6_HDR: u32 = 40;

const LD_H_ABS: u16 = (libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) as u16;
const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const LD_B_IND: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_IND) as u16;
const LDX_IMM: u16 = (libc::BPF_LDX | libc::BPF_W | libc::BPF_IMM) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
/// The classic-BPF extension load of a random u32 (`ld rand` in bpf_asm).
const AD_RANDOM: u32 = (libc::SKF_AD_OFF + 56) as u32;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

const fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// A one-instruction program that drops every frame. Attached right after `socket()` so nothing
/// can be queued between `bind()` and the real filter.
pub fn drop_all() -> [sock_filter; 1] {
    [stmt(RET_K, 0)]
}

/// The distinct MACs of `macs`, after checking them and the other parameters.
fn checked_macs(macs: &[Mac], snap_len: u32, one_in: u32) -> io::Result<Vec<Mac>> {
    if snap_len == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "capture filter: snap length must be > 0",
        ));
    }
    if !one_in.is_power_of_two() || one_in > MAX_SAMPLING {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("capture filter: sampling ratio {one_in} is not a power of two in 1..={MAX_SAMPLING}"),
        ));
    }
    let mut unique: Vec<Mac> = Vec::with_capacity(macs.len());
    for m in macs {
        if !unique.contains(m) {
            unique.push(*m);
        }
    }
    if unique.len() > MAX_MACS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "capture filter: {} MACs given, at most {MAX_MACS} supported",
                unique.len()
            ),
        ));
    }
    Ok(unique)
}

/// Builds the capture program for `macs` (duplicates are ignored), returning at most `snap_len`
/// bytes of each frame it passes, every IPv4/IPv6 frame (exact counting). Fails with
/// `InvalidInput` for more than [`MAX_MACS`] distinct MACs or a zero snap length.
pub fn program(macs: &[Mac], snap_len: u32) -> io::Result<Vec<sock_filter>> {
    sampled_program(macs, snap_len, 1)
}

/// [`program`] keeping one IPv4/IPv6 frame in `one_in` at random (ARP and Neighbor Discovery
/// always). `one_in` must be a power of two in 1..=[`MAX_SAMPLING`]; 1 is exact counting.
pub fn sampled_program(macs: &[Mac], snap_len: u32, one_in: u32) -> io::Result<Vec<sock_filter>> {
    let unique = checked_macs(macs, snap_len, one_in)?;
    let n = unique.len();
    // Layout (pc: instruction):
    //   0..=12           EtherType dispatch and the Neighbor Discovery test
    //   13 + 4i ..= 16 + 4i  destination-MAC test for MAC i
    //   drop = 13 + 4n     ret #0
    //   sample = 14 + 4n   (only when sampling) ld rand; and #(N-1); jeq #0 -> accept; ret #0
    //   accept             ret #snap_len
    let macs_at = 13;
    let drop = macs_at + 4 * n;
    let sample = drop + 1;
    let accept = if one_in > 1 { sample + 4 } else { sample };
    // Jump offset from the instruction at `pc` to `target` (relative to pc + 1).
    let off = |pc: usize, target: usize| -> u8 {
        u8::try_from(target - pc - 1).expect("MAX_MACS keeps BPF jumps within 8 bits")
    };
    let mut p = Vec::with_capacity(accept + 1);

    // EtherType dispatch. X = the tag's length (0 or 4), A = EtherType at 12; if it is an
    // 802.1Q tag, reload A with the inner EtherType at 16 (the destination MAC stays at offset 0
    // either way, the network header moves by X).
    p.push(stmt(LDX_IMM, 0)); // 0: X = 0
    p.push(stmt(LD_H_ABS, 12)); // 1: A = outer EtherType
    p.push(jump(JEQ_K, ETH_P_8021Q, 0, 2)); // 2: tagged? -> 3, else -> 5
    p.push(stmt(LDX_IMM, VLAN_LEN)); // 3: X = 4
    p.push(stmt(LD_H_ABS, 16)); // 4: A = inner EtherType
    p.push(jump(JEQ_K, ETH_P_ARP, off(5, accept), 0)); // 5: ARP (any direction) -> accept
    p.push(jump(JEQ_K, ETH_P_IP, off(6, macs_at), 0)); // 6: IPv4 -> MAC tests
    p.push(jump(JEQ_K, ETH_P_IPV6, 0, off(7, drop))); // 7: neither -> drop
                                                      // IPv6: an NS or NA (next header 58 right after the fixed header, ICMPv6 type 135 or 136)
                                                      // passes in any direction; any other IPv6 goes on to the MAC tests.
    p.push(stmt(LD_B_IND, ETH_HDR + IPV6_NEXT_HEADER)); // 8: A = next header
    p.push(jump(JEQ_K, IPPROTO_ICMPV6, 0, off(9, macs_at))); // 9: not ICMPv6 -> MAC tests
    p.push(stmt(LD_B_IND, ETH_HDR + IPV6_HDR)); // 10: A = ICMPv6 type
    p.push(jump(JEQ_K, ND_NS, off(11, accept), 0)); // 11: NS -> accept
    p.push(jump(JEQ_K, ND_NA, off(12, accept), 0)); // 12: NA -> accept, else MAC tests
    debug_assert_eq!(p.len(), macs_at);

    // Destination-MAC tests, one self-contained block per MAC (each block reloads A, so a
    // mismatch on either half simply falls through to the next block, and the last one to drop).
    for (i, m) in unique.iter().enumerate() {
        let pc = macs_at + 4 * i;
        let m = m.octets();
        let lo = u32::from_be_bytes([m[2], m[3], m[4], m[5]]);
        let hi = u32::from(u16::from_be_bytes([m[0], m[1]]));
        p.push(stmt(LD_W_ABS, 2)); // A = dst MAC bytes 2..6
        p.push(jump(JEQ_K, lo, 0, 2)); // low 4 bytes differ -> next block
        p.push(stmt(LD_H_ABS, 0)); // A = dst MAC bytes 0..2
        p.push(jump(JEQ_K, hi, off(pc + 3, sample), 0)); // match -> sample, else next block
    }

    // Verdicts. The return value is the number of bytes kept, which truncates the copy to the
    // ring (tp_len still reports the real frame length).
    p.push(stmt(RET_K, 0)); // drop
    if one_in > 1 {
        // Masking needs no division; the generator's low bits are as uniform as its high ones.
        p.push(stmt(LD_W_ABS, AD_RANDOM)); // A = random u32
        p.push(stmt(AND_K, one_in - 1));
        p.push(jump(JEQ_K, 0, off(sample + 2, accept), 0)); // one in N -> accept
        p.push(stmt(RET_K, 0)); // the others: drop (jumps only go forward)
    }
    p.push(stmt(RET_K, snap_len)); // accept, truncated
    debug_assert_eq!(p.len(), accept + 1);
    Ok(p)
}

#[cfg(test)]
pub(crate) mod tests;
