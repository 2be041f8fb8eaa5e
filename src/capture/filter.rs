//! The classic BPF program attached to every capture socket.
//!
//! It passes (a) IPv4 and IPv6 frames whose destination MAC is one of the server's ports, (b) ARP
//! frames and (c) ICMPv6 Neighbor Solicitations and Advertisements in any direction, truncated to
//! the snap length, and drops everything else. One 802.1Q tag is
//! looked through (the kernel normally strips the tag before taps see the frame, but not always, e.g.
//! outgoing frames without VLAN offload). Building the program is plain safe code; attaching it is
//! in `socket.rs`.

use std::io;

use libc::sock_filter;

use super::frame::Mac;

/// Most destination MACs one program can test. Each MAC costs 4 instructions, and classic BPF jump
/// offsets are 8 bits: the ARP accept jump spans every MAC block (8 + 4 * MAX_MACS), so that must
/// stay below 256.
pub const MAX_MACS: usize = 32;

/// Default snap length: Ethernet (14) + one 802.1Q tag (4) + an IPv4 header with up to 40 bytes of
/// options (60) = 78, Ethernet + tag + ARP (28) = 46, or Ethernet + tag + IPv6 (40) + an NS/NA
/// (24) + one link-layer address option (8) = 90; rounded up.
pub const DEFAULT_SNAP_LEN: u32 = 96;

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

/// Builds the capture program for `macs` (duplicates are ignored), returning at most `snap_len`
/// bytes of each frame it passes. Fails with `InvalidInput` for more than [`MAX_MACS`] distinct
/// MACs or a zero snap length.
pub fn program(macs: &[Mac], snap_len: u32) -> io::Result<Vec<sock_filter>> {
    if snap_len == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "capture filter: snap length must be > 0",
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
    let n = unique.len();
    // Layout (pc: instruction):
    //   0..=12           EtherType dispatch and the Neighbor Discovery test
    //   13 + 4i ..= 16 + 4i  destination-MAC test for MAC i
    //   drop = 13 + 4n     ret #0
    //   accept = 14 + 4n   ret #snap_len
    let macs_at = 13;
    let drop = macs_at + 4 * n;
    let accept = drop + 1;
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
        p.push(jump(JEQ_K, hi, off(pc + 3, accept), 0)); // match -> accept, else next block
    }

    // Verdicts. The return value is the number of bytes kept, which truncates the copy to the
    // ring (tp_len still reports the real frame length).
    p.push(stmt(RET_K, 0)); // drop
    p.push(stmt(RET_K, snap_len)); // accept, truncated
    debug_assert_eq!(p.len(), accept + 1);
    Ok(p)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A tiny classic-BPF interpreter covering what a socket filter can use without extensions:
    /// loads (absolute, indirect, immediate, length, scratch memory), stores, ALU, jumps, returns.
    /// Out-of-bounds packet loads return 0 (drop), as in the kernel. Returns the number of bytes the
    /// kernel would keep: `min(ret, frame.len())`.
    pub(crate) fn run(prog: &[sock_filter], frame: &[u8]) -> u32 {
        let (mut a, mut x) = (0u32, 0u32);
        let mut mem = [0u32; 16];
        let mut pc = 0usize;
        let load = |off: u32, size: usize| -> Option<u32> {
            let off = off as usize;
            let bytes = frame.get(off..off.checked_add(size)?)?;
            Some(bytes.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)))
        };
        loop {
            let ins = prog.get(pc).expect("BPF program ran off its end");
            pc += 1;
            let code = u32::from(ins.code);
            let size = match code & 0x18 {
                libc::BPF_W => 4,
                libc::BPF_H => 2,
                _ => 1,
            };
            match code & 0x07 {
                libc::BPF_LD | libc::BPF_LDX => {
                    let v = match code & 0xe0 {
                        libc::BPF_IMM => Some(ins.k),
                        libc::BPF_ABS => load(ins.k, size),
                        libc::BPF_IND => load(x.wrapping_add(ins.k), size),
                        libc::BPF_MEM => Some(mem[ins.k as usize]),
                        libc::BPF_LEN => Some(frame.len() as u32),
                        libc::BPF_MSH => load(ins.k, 1).map(|b| (b & 0xf) << 2),
                        other => panic!("unsupported load mode {other:#x}"),
                    };
                    let Some(v) = v else { return 0 };
                    if code & 0x07 == libc::BPF_LD {
                        a = v;
                    } else {
                        x = v;
                    }
                }
                libc::BPF_ST => mem[ins.k as usize] = a,
                libc::BPF_STX => mem[ins.k as usize] = x,
                libc::BPF_ALU => {
                    let src = if code & libc::BPF_X != 0 { x } else { ins.k };
                    a = match code & 0xf0 {
                        0x00 => a.wrapping_add(src),
                        0x10 => a.wrapping_sub(src),
                        0x20 => a.wrapping_mul(src),
                        0x30 => a.checked_div(src).unwrap_or(0),
                        0x40 => a | src,
                        0x50 => a & src,
                        0x60 => a.wrapping_shl(src),
                        0x70 => a.wrapping_shr(src),
                        0x80 => a.wrapping_neg(),
                        0x90 => a.checked_rem(src).unwrap_or(0),
                        0xa0 => a ^ src,
                        other => panic!("unsupported ALU op {other:#x}"),
                    };
                }
                libc::BPF_JMP => {
                    let src = if code & libc::BPF_X != 0 { x } else { ins.k };
                    let taken = match code & 0xf0 {
                        0x00 => {
                            pc += ins.k as usize;
                            continue;
                        }
                        0x10 => a == src,
                        0x20 => a > src,
                        0x30 => a >= src,
                        0x40 => a & src != 0,
                        other => panic!("unsupported jump {other:#x}"),
                    };
                    pc += usize::from(if taken { ins.jt } else { ins.jf });
                }
                libc::BPF_RET => {
                    let r = if code & 0x18 == libc::BPF_A { a } else { ins.k };
                    return r.min(frame.len() as u32);
                }
                libc::BPF_MISC => {
                    if code & 0xf8 == 0 {
                        x = a; // tax
                    } else {
                        a = x; // txa
                    }
                }
                _ => unreachable!(),
            }
        }
    }

    const PORT_A: Mac = Mac(0x02, 0xaa, 0x00, 0x00, 0x00, 0x01);
    const PORT_B: Mac = Mac(0x02, 0xaa, 0x00, 0x00, 0x00, 0x02);
    const OTHER: Mac = Mac(0x02, 0xbb, 0x00, 0x00, 0x00, 0x01);
    const CLIENT: Mac = Mac(0x02, 0xcc, 0x00, 0x00, 0x00, 0x09);

    fn eth(dst: Mac, ethertype: u16, vlan: bool, len: usize) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst.octets());
        f.extend_from_slice(&CLIENT.octets());
        if vlan {
            f.extend_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&0x0005u16.to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.resize(len.max(f.len()), 0x45);
        f
    }

    #[test]
    fn passes_ipv4_to_listed_macs_only() {
        let p = program(&[PORT_A, PORT_B], 96).unwrap();
        assert_eq!(run(&p, &eth(PORT_A, 0x0800, false, 1514)), 96);
        assert_eq!(run(&p, &eth(PORT_B, 0x0800, false, 1514)), 96);
        assert_eq!(run(&p, &eth(OTHER, 0x0800, false, 1514)), 0);
        // Same low 4 bytes as PORT_A, different high 2 bytes; and the reverse.
        let mut near = PORT_A;
        near.0 = 0x06;
        assert_eq!(run(&p, &eth(near, 0x0800, false, 100)), 0);
        let mut near = PORT_A;
        near.5 = 0x7f;
        assert_eq!(run(&p, &eth(near, 0x0800, false, 100)), 0);
        assert_eq!(
            run(
                &p,
                &eth(Mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 0x0800, false, 100)
            ),
            0
        );
    }

    #[test]
    fn passes_arp_any_destination() {
        let p = program(&[PORT_A], 96).unwrap();
        assert_eq!(
            run(
                &p,
                &eth(Mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 0x0806, false, 42)
            ),
            42
        );
        assert_eq!(run(&p, &eth(OTHER, 0x0806, false, 60)), 60);
        assert_eq!(run(&p, &eth(OTHER, 0x0806, true, 64)), 64);
        // No MACs at all: ARP still passes, IPv4 never does.
        let p = program(&[], 96).unwrap();
        assert_eq!(run(&p, &eth(OTHER, 0x0806, false, 42)), 42);
        assert_eq!(run(&p, &eth(PORT_A, 0x0800, false, 42)), 0);
    }

    #[test]
    fn drops_other_ethertypes() {
        let p = program(&[PORT_A], 96).unwrap();
        for et in [0x8035, 0x88cc, 0x0801, 0x8100, 0x88a8, 0x0000] {
            assert_eq!(run(&p, &eth(PORT_A, et, false, 200)), 0, "{et:#x}");
        }
        assert_eq!(run(&p, &eth(PORT_A, 0x88cc, true, 200)), 0);
    }

    #[test]
    fn looks_through_one_vlan_tag() {
        let p = program(&[PORT_A], 96).unwrap();
        assert_eq!(run(&p, &eth(PORT_A, 0x0800, true, 1518)), 96);
        assert_eq!(run(&p, &eth(OTHER, 0x0800, true, 1518)), 0);
    }

    #[test]
    fn truncated_and_runt_frames() {
        let p = program(&[PORT_A], 96).unwrap();
        // Shorter than the snap length: kept whole.
        assert_eq!(run(&p, &eth(PORT_A, 0x0800, false, 34)), 34);
        // Too short to hold an EtherType: out-of-bounds load drops it.
        assert_eq!(run(&p, &PORT_A.octets()), 0);
        assert_eq!(run(&p, &[]), 0);
        // Tagged but too short for the inner EtherType.
        let f = eth(PORT_A, 0x0800, true, 0);
        assert_eq!(run(&p, &f[..16]), 0);
    }

    #[test]
    fn snap_length_is_honoured() {
        let p = program(&[PORT_A], 64).unwrap();
        assert_eq!(run(&p, &eth(PORT_A, 0x0800, false, 1000)), 64);
        assert_eq!(run(&p, &eth(OTHER, 0x0806, false, 1000)), 64);
    }

    #[test]
    fn max_macs_all_match_and_jumps_fit() {
        let macs: Vec<Mac> = (0..MAX_MACS as u8)
            .map(|i| Mac(0x02, i, 0x10, 0x20, i, 0x30))
            .collect();
        let p = program(&macs, 96).unwrap();
        assert_eq!(p.len(), 15 + 4 * MAX_MACS);
        for m in &macs {
            assert_eq!(run(&p, &eth(*m, 0x0800, false, 500)), 96);
        }
        assert_eq!(run(&p, &eth(OTHER, 0x0800, false, 500)), 0);
        assert_eq!(run(&p, &eth(OTHER, 0x0806, false, 500)), 96);
        let mut too_many = macs.clone();
        too_many.push(OTHER);
        assert!(program(&too_many, 96).is_err());
        // Duplicates do not count against the limit.
        let mut dup = macs.clone();
        dup.extend_from_slice(&macs);
        assert_eq!(program(&dup, 96).unwrap().len(), p.len());
    }

    /// An IPv6 frame [tagged] to `dst` with next header `nh` and first payload byte `ty`.
    fn ipv6(dst: Mac, vlan: bool, nh: u8, ty: u8, len: usize) -> Vec<u8> {
        let mut f = eth(dst, 0x86dd, vlan, 0);
        let l3 = f.len();
        f.resize(len.max(l3 + 41), 0);
        f[l3] = 0x60;
        f[l3 + 6] = nh;
        f[l3 + 40] = ty;
        f
    }

    #[test]
    fn passes_ipv6_to_listed_macs_only() {
        let p = program(&[PORT_A, PORT_B], 96).unwrap();
        for vlan in [false, true] {
            assert_eq!(run(&p, &ipv6(PORT_A, vlan, 6, 0, 1514)), 96);
            assert_eq!(run(&p, &ipv6(PORT_B, vlan, 17, 0, 1514)), 96);
            assert_eq!(run(&p, &ipv6(OTHER, vlan, 6, 0, 1514)), 0);
            // ICMPv6 that is not NS/NA: only to our MACs.
            assert_eq!(run(&p, &ipv6(PORT_A, vlan, 58, 128, 200)), 96);
            assert_eq!(run(&p, &ipv6(OTHER, vlan, 58, 128, 200)), 0);
            assert_eq!(
                run(&p, &ipv6(Mac(0x33, 0x33, 0, 0, 0, 1), vlan, 58, 134, 200)),
                0
            );
        }
    }

    #[test]
    fn passes_neighbor_discovery_any_destination() {
        let p = program(&[PORT_A], 96).unwrap();
        let mcast = [0x33, 0x33, 0xff, 0, 0, 1];
        for vlan in [false, true] {
            for ty in [135u8, 136] {
                // Ethernet [+ tag] + IPv6 + NS/NA + one option: whole within the snap length.
                let len = if vlan { 90 } else { 86 };
                assert_eq!(
                    run(&p, &ipv6(Mac::from(mcast), vlan, 58, ty, len)),
                    len as u32
                );
                assert_eq!(run(&p, &ipv6(OTHER, vlan, 58, ty, len)), len as u32);
                assert_eq!(run(&p, &ipv6(PORT_A, vlan, 58, ty, len)), len as u32);
                // The same type behind another next header is not ND.
                assert_eq!(run(&p, &ipv6(OTHER, vlan, 17, ty, len)), 0);
                assert_eq!(
                    run(&p, &ipv6(OTHER, vlan, 0, ty, len)),
                    0,
                    "hop-by-hop first"
                );
            }
            for ty in [133u8, 134, 137, 1] {
                assert_eq!(
                    run(&p, &ipv6(Mac::from(mcast), vlan, 58, ty, 90)),
                    0,
                    "type {ty}"
                );
            }
        }
        // No MACs at all: ND still passes, other IPv6 never does.
        let p = program(&[], 96).unwrap();
        assert_eq!(run(&p, &ipv6(OTHER, false, 58, 136, 86)), 86);
        assert_eq!(run(&p, &ipv6(PORT_A, false, 6, 0, 86)), 0);
        // Too short to hold the ICMPv6 type: dropped.
        let f = ipv6(OTHER, false, 58, 135, 86);
        assert_eq!(run(&p, &f[..54]), 0);
    }

    #[test]
    fn drop_all_drops() {
        let p = drop_all();
        assert_eq!(run(&p, &eth(PORT_A, 0x0800, false, 100)), 0);
        assert_eq!(run(&p, &eth(PORT_A, 0x0806, false, 100)), 0);
        assert!(program(&[PORT_A], 0).is_err());
    }
}
