//! Tests of `filter.rs`: the programs run in a small classic-BPF interpreter.

use super::*;

/// [`run_with`] with a random source that always answers 0 (every frame sampled).
pub(crate) fn run(prog: &[sock_filter], frame: &[u8]) -> u32 {
    run_with(prog, frame, &mut || 0)
}

/// A tiny classic-BPF interpreter covering what a socket filter can use: loads (absolute,
/// indirect, immediate, length, scratch memory, the `SKF_AD_RANDOM` extension from `rand`),
/// stores, ALU, jumps, returns. Out-of-bounds packet loads return 0 (drop), as in the kernel.
/// Returns the number of bytes the kernel would keep: `min(ret, frame.len())`.
pub(crate) fn run_with(prog: &[sock_filter], frame: &[u8], rand: &mut dyn FnMut() -> u32) -> u32 {
    let (mut a, mut x) = (0u32, 0u32);
    let mut mem = [0u32; 16];
    let mut pc = 0usize;
    let load = |off: u32, size: usize| -> Option<u32> {
        if off == AD_RANDOM {
            panic!("the random extension is a word load in A only");
        }
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
                    libc::BPF_ABS if ins.k == AD_RANDOM && size == 4 => Some(rand()),
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
                a = alu(code & 0xf0, a, src);
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

/// A classic-BPF ALU operation `op` on A and `src`.
fn alu(op: u32, a: u32, src: u32) -> u32 {
    match op {
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
fn sampling_keeps_one_in_n_data_frames_and_every_arp_and_nd() {
    let macs = [PORT_A, PORT_B];
    let exact = program(&macs, 96).unwrap();
    for n in [2u32, 8, 1024, MAX_SAMPLING] {
        let p = sampled_program(&macs, 96, n).unwrap();
        assert_eq!(p.len(), exact.len() + 4);
        // A counter as the "random" source: exactly the multiples of n pass.
        let mut r = 0u32;
        let mut next = || {
            r = r.wrapping_add(1);
            r
        };
        let v4 = eth(PORT_A, 0x0800, false, 1514);
        let kept = (0..4 * n)
            .filter(|_| run_with(&p, &v4, &mut next) == 96)
            .count();
        assert_eq!(kept, 4, "ratio {n}");
        for vlan in [false, true] {
            let v6 = ipv6(PORT_B, vlan, 6, 0, 1514);
            assert_eq!(run_with(&p, &v6, &mut || 1), 0, "IPv6 data is sampled");
            assert_eq!(run_with(&p, &v6, &mut || n), 96);
            // ARP and ND pass whatever the generator says; nothing else ever does.
            let arp = eth(OTHER, 0x0806, vlan, 60);
            assert_eq!(run_with(&p, &arp, &mut || 1), 60);
            let na = ipv6(OTHER, vlan, 58, 136, 86);
            assert_eq!(run_with(&p, &na, &mut || 1), 86);
            assert_eq!(run_with(&p, &eth(OTHER, 0x0800, vlan, 200), &mut || 0), 0);
            assert_eq!(run_with(&p, &eth(PORT_A, 0x88cc, vlan, 200), &mut || 0), 0);
        }
    }
    assert_eq!(sampled_program(&macs, 96, 1).unwrap().len(), exact.len());
    for bad in [0u32, 3, 12, MAX_SAMPLING * 2] {
        assert!(sampled_program(&macs, 96, bad).is_err(), "{bad}");
    }
    // The longest jump (ARP -> accept over every MAC block and the sampling block) fits.
    let all: Vec<Mac> = (0..MAX_MACS as u8)
        .map(|i| Mac(0x02, i, 0, 0, i, 1))
        .collect();
    let p = sampled_program(&all, 96, 64).unwrap();
    assert_eq!(run_with(&p, &eth(OTHER, 0x0806, false, 60), &mut || 5), 60);
    assert_eq!(
        run_with(&p, &eth(all[31], 0x0800, false, 600), &mut || 64),
        96
    );
    assert_eq!(
        run_with(&p, &eth(all[31], 0x0800, false, 600), &mut || 65),
        0
    );
}

#[test]
fn drop_all_drops() {
    let p = drop_all();
    assert_eq!(run(&p, &eth(PORT_A, 0x0800, false, 100)), 0);
    assert_eq!(run(&p, &eth(PORT_A, 0x0806, false, 100)), 0);
    assert!(program(&[PORT_A], 0).is_err());
}
