//! The counting program run on a small interpreter of the instructions it uses, against frames
//! of every kind it must tell apart (the kernel's verifier and JIT are exercised by the root
//! tests and the kernel lab; this checks the logic on every machine, VLANs included).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::super::insn::*;
use super::super::map::{addr, decode_key, sum_values, EntryKey, RawKey, KEY_SIZE, VALUE_SIZE};
use super::super::slots::SLOT_SIZE;
use super::*;
use crate::capture::frame::tests::ipv4_frame;
use crate::client::ClientKey;

const MAP_FD: i32 = 42;
const SNAP: u32 = 96;

/// What the kernel hands a socket filter: the frame as taps see it and a few `__sk_buff`
/// fields.
#[derive(Clone)]
struct Skb {
    data: Vec<u8>,
    pkt_type: u32,
    vlan: Option<(u16, u16)>, // (tci, tpid)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum V {
    Scalar(u64),
    Ctx,
    Stack(i64),
    Value(usize, i64),
    Map,
}

impl V {
    fn s(self) -> u64 {
        match self {
            V::Scalar(x) => x,
            other => panic!("scalar expected, got {other:?}"),
        }
    }
}

/// The map as the program sees it: the hash (keys, one CPU's values) or the slot table.
struct Map {
    store: Store,
    keys: Vec<RawKey>,
    values: Vec<Vec<u8>>,
    index: HashMap<RawKey, usize>,
}

/// Both stores, the slot table small enough that probe runs meet.
fn stores() -> [Store; 2] {
    [
        Store::Hash,
        Store::Slots {
            slots: 8,
            mul: [0x2545_f491, 0x1b87_3593, 0x0cc9_e2d5],
        },
    ]
}

impl Map {
    fn new(store: Store) -> Map {
        let values = match store {
            Store::Hash => Vec::new(),
            Store::Slots { slots, .. } => vec![vec![0; SLOT_SIZE]; slots as usize + 1],
        };
        Map {
            store,
            keys: Vec::new(),
            values,
            index: HashMap::new(),
        }
    }

    fn counts(&self) -> Vec<(EntryKey, u64, u64, Option<IpAddr>)> {
        let mut v: Vec<_> = match self.store {
            Store::Hash => self
                .keys
                .iter()
                .zip(&self.values)
                .map(|(k, val)| {
                    let t = sum_values(val);
                    (decode_key(k), t.frames, t.bytes, t.src)
                })
                .collect(),
            Store::Slots { slots, .. } => self.values[..slots as usize]
                .iter()
                .filter(|s| s[..8] != [0; 8])
                .map(|s| {
                    let k: RawKey = s[..KEY_SIZE].try_into().unwrap();
                    let src = addr(&s[40..56].try_into().unwrap());
                    (
                        decode_key(&k),
                        ne(&s[24..32]),
                        ne(&s[32..40]),
                        (!src.is_unspecified()).then_some(src),
                    )
                })
                .collect(),
        };
        v.sort_by_key(|x| (x.0.client, x.0.dst));
        v
    }

    /// Frames the slot table counted under no client.
    fn overflow(&self) -> u64 {
        match self.store {
            Store::Hash => 0,
            Store::Slots { slots, .. } => ne(&self.values[slots as usize][24..32]),
        }
    }
}

fn ctx_field(skb: &Skb, off: i64) -> u64 {
    match off {
        0 => skb.data.len() as u64,
        4 => u64::from(skb.pkt_type),
        20 => u64::from(skb.vlan.is_some()),
        24 => u64::from(skb.vlan.map_or(0, |v| v.0)),
        28 => u64::from(skb.vlan.map_or(0, |v| v.1.to_be())),
        _ => panic!("context field {off} read"),
    }
}

/// Runs `prog` on `skb`; returns its verdict (bytes to keep).
fn run(prog: &[Insn], skb: &Skb, map: &mut Map) -> u64 {
    let mut r = [V::Scalar(0); 11];
    r[1] = V::Ctx;
    r[10] = V::Stack(512);
    let mut stack = [0u8; 512];
    let mut pc = 0usize;
    let mut steps = 0;
    let load = |data: &[u8], at: u64, n: usize| -> Option<u64> {
        let at = usize::try_from(at).ok()?;
        let b = data.get(at..at.checked_add(n)?)?;
        Some(b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)))
    };
    loop {
        steps += 1;
        assert!(steps < 10_000, "runaway program");
        let i = prog[pc];
        let (dst, src) = (usize::from(i.dst()), usize::from(i.src()));
        let size = match i.code & 0x18 {
            0x00 => 4,
            0x08 => 2,
            0x10 => 1,
            _ => 8,
        };
        pc += 1;
        match i.class() {
            CLASS_ALU64 => {
                let rhs = if i.code & SRC_X != 0 {
                    r[src]
                } else {
                    V::Scalar(i.imm as i64 as u64)
                };
                r[dst] = match (i.code & 0xf0, r[dst], rhs) {
                    (0xb0, _, v) => v,
                    (0x00, V::Stack(o), V::Scalar(k)) => V::Stack(o + k as i64),
                    (0x00, V::Value(e, o), V::Scalar(k)) => V::Value(e, o + k as i64),
                    (0x00, V::Scalar(a), V::Scalar(b)) => V::Scalar(a.wrapping_add(b)),
                    (0x20, V::Scalar(a), V::Scalar(b)) => V::Scalar(a.wrapping_mul(b)),
                    (0xa0, V::Scalar(a), V::Scalar(b)) => V::Scalar(a ^ b),
                    (0x50, V::Scalar(a), V::Scalar(b)) => V::Scalar(a & b),
                    (0x70, V::Scalar(a), V::Scalar(b)) => V::Scalar(a >> b),
                    other => panic!("unsupported ALU {other:?}"),
                };
            }
            CLASS_ALU => {
                assert_eq!(
                    i.code,
                    CLASS_ALU | OP_END | SRC_X,
                    "only to-big-endian here"
                );
                let v = r[dst].s();
                r[dst] = V::Scalar(match i.imm {
                    16 => u64::from((v as u16).to_be()),
                    32 => u64::from((v as u32).to_be()),
                    64 => v.to_be(),
                    b => panic!("byte swap of {b} bits"),
                });
            }
            CLASS_LD if i.code & 0xe0 == MODE_ABS || i.code & 0xe0 == MODE_IND => {
                let base = if i.code & 0xe0 == MODE_IND {
                    r[src].s()
                } else {
                    0
                };
                match load(&skb.data, base.wrapping_add(i.imm as i64 as u64), size) {
                    Some(v) => r[0] = V::Scalar(v),
                    None => return 0,
                }
                for x in &mut r[1..=5] {
                    *x = V::Scalar(0xdead);
                }
            }
            CLASS_LD => {
                assert_eq!(i.code, CLASS_LD | MODE_IMM | 0x18);
                assert_eq!((i.src(), i.imm), (PSEUDO_MAP_FD, MAP_FD));
                r[dst] = V::Map;
                pc += 1;
            }
            CLASS_LDX => {
                let off = i64::from(i.off);
                r[dst] = V::Scalar(match r[src] {
                    V::Ctx => ctx_field(skb, off),
                    V::Stack(o) => {
                        let at = (o + off) as usize;
                        ne(&stack[at..at + size])
                    }
                    V::Value(e, o) => {
                        let at = (o + off) as usize;
                        ne(&map.values[e][at..at + size])
                    }
                    other => panic!("load through {other:?}"),
                });
            }
            CLASS_STX if i.code & 0xe0 == MODE_ATOMIC => {
                assert_eq!((size, i.imm), (8, 0), "only 64-bit atomic add here");
                let V::Value(e, o) = r[dst] else {
                    panic!("atomic add through {:?}", r[dst]);
                };
                let at = (o + i64::from(i.off)) as usize;
                assert_eq!(at % 8, 0, "unaligned atomic");
                let v = ne(&map.values[e][at..at + 8]).wrapping_add(r[src].s());
                map.values[e][at..at + 8].copy_from_slice(&v.to_ne_bytes());
            }
            CLASS_ST | CLASS_STX => {
                let v = if i.class() == CLASS_STX {
                    r[src].s()
                } else {
                    i.imm as i64 as u64
                };
                let bytes = &v.to_ne_bytes()[..size];
                let off = i64::from(i.off);
                match r[dst] {
                    V::Stack(o) => {
                        let at = (o + off) as usize;
                        assert_eq!(at % size, 0, "unaligned stack store");
                        stack[at..at + size].copy_from_slice(bytes);
                    }
                    V::Value(e, o) => {
                        let at = (o + off) as usize;
                        map.values[e][at..at + size].copy_from_slice(bytes);
                    }
                    other => panic!("store through {other:?}"),
                }
            }
            CLASS_JMP | CLASS_JMP32 => {
                let op = i.code & 0xf0;
                if op == OP_EXIT {
                    return r[0].s();
                }
                if op == OP_CALL {
                    r[0] = call(i.imm, &r, &mut stack, skb, map);
                    for x in &mut r[1..=5] {
                        *x = V::Scalar(0xdead);
                    }
                    continue;
                }
                let taken = if op == OP_JA {
                    true
                } else {
                    let mut a = match r[dst] {
                        V::Scalar(x) => x,
                        V::Value(..) => 1,
                        other => panic!("compare {other:?}"),
                    };
                    let mut b = if i.code & SRC_X != 0 {
                        r[src].s()
                    } else {
                        i.imm as i64 as u64
                    };
                    if i.class() == CLASS_JMP32 {
                        a &= 0xffff_ffff;
                        b &= 0xffff_ffff;
                    }
                    match op {
                        0x10 => a == b,
                        0x50 => a != b,
                        0xa0 => a < b,
                        0x30 => a >= b,
                        _ => panic!("jump op {op:x}"),
                    }
                };
                if taken {
                    pc = (pc as i64 + i64::from(i.off)) as usize;
                }
            }
            c => panic!("class {c}"),
        }
    }
}

fn ne(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[..b.len()].copy_from_slice(b);
    u64::from_ne_bytes(x)
}

fn stack_at(v: V) -> usize {
    match v {
        V::Stack(o) => o as usize,
        other => panic!("stack pointer expected, got {other:?}"),
    }
}

fn call(h: i32, r: &[V; 11], stack: &mut [u8; 512], skb: &Skb, map: &mut Map) -> V {
    match h {
        26 => {
            assert_eq!(r[1], V::Ctx);
            let (off, len) = (r[2].s() as usize, r[4].s() as usize);
            let to: &mut [u8] = match r[3] {
                V::Stack(o) => &mut stack[o as usize..o as usize + len],
                V::Value(e, o) => &mut map.values[e][o as usize..o as usize + len],
                other => panic!("load bytes into {other:?}"),
            };
            match skb.data.get(off..off + len) {
                Some(b) => {
                    to.copy_from_slice(b);
                    V::Scalar(0)
                }
                None => {
                    to.fill(0);
                    V::Scalar(-14i64 as u64)
                }
            }
        }
        1 if matches!(map.store, Store::Slots { .. }) => {
            assert_eq!(r[1], V::Map);
            let at = stack_at(r[2]);
            let i = ne(&stack[at..at + 4]) as usize;
            if i < map.values.len() {
                V::Value(i, 0)
            } else {
                V::Scalar(0)
            }
        }
        1 | 2 => {
            assert_eq!(r[1], V::Map);
            assert_eq!(map.store, Store::Hash);
            let at = stack_at(r[2]);
            let mut k: RawKey = [0; KEY_SIZE];
            k.copy_from_slice(&stack[at..at + KEY_SIZE]);
            if h == 1 {
                return map.index.get(&k).map_or(V::Scalar(0), |e| V::Value(*e, 0));
            }
            let at = stack_at(r[3]);
            let mut v = [0u8; VALUE_SIZE];
            v.copy_from_slice(&stack[at..at + VALUE_SIZE]);
            match map.index.get(&k) {
                Some(e) => map.values[*e] = v.to_vec(),
                None => {
                    map.index.insert(k, map.keys.len());
                    map.keys.push(k);
                    map.values.push(v.to_vec());
                }
            }
            V::Scalar(0)
        }
        other => panic!("helper {other}"),
    }
}

const PORT: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x01);
const MACVLAN: Mac = Mac(0x02, 0x52, 0x4c, 0xc2, 0x80, 0x81);
const CLIENT: Mac = Mac(0x02, 0x52, 0x4c, 0x42, 0x00, 0x09);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 9);

fn host(data: Vec<u8>) -> Skb {
    Skb {
        data,
        pkt_type: 0,
        vlan: None,
    }
}

fn v4(dst_mac: Mac) -> Vec<u8> {
    ipv4_frame(CLIENT, dst_mac, CLIENT_IP, SERVER, false, 200)
}

/// `frame` with an 802.1Q tag for `vlan` after the MACs.
fn tagged(frame: &[u8], vlan: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&(0x2000 | vlan).to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

fn v6(next_header: u8, icmp_type: u8) -> Vec<u8> {
    let mut f = PORT.octets().to_vec();
    f.extend_from_slice(&CLIENT.octets());
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, next_header, 255]);
    f.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9).octets());
    f.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).octets());
    f.push(icmp_type);
    f.resize(f.len() + 31, 0);
    f
}

fn arp() -> Vec<u8> {
    let mut f = [0xff; 6].to_vec();
    f.extend_from_slice(&CLIENT.octets());
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&CLIENT.octets());
    f.extend_from_slice(&CLIENT_IP.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&SERVER.octets());
    f
}

fn prog(host_macs: &[Mac], store: Store) -> Vec<Insn> {
    counting_program(host_macs, SNAP, MAP_FD, store).unwrap()
}

fn key(vlan: u16, dst: IpAddr) -> EntryKey {
    EntryKey {
        client: ClientKey::new(CLIENT, vlan),
        dst,
    }
}

#[test]
fn ipv4_to_the_port_is_counted_and_dropped() {
    for s in stores() {
        ipv4_to_the_port_is_counted_and_dropped_in(s);
    }
}

fn ipv4_to_the_port_is_counted_and_dropped_in(store: Store) {
    let p = prog(&[], store);
    let mut m = Map::new(store);
    let f = v4(PORT);
    assert_eq!(run(&p, &host(f.clone()), &mut m), 0);
    assert_eq!(run(&p, &host(f.clone()), &mut m), 0);
    assert_eq!(
        m.counts(),
        vec![(
            key(0, SERVER.into()),
            2,
            2 * f.len() as u64,
            Some(CLIENT_IP.into())
        )]
    );
}

#[test]
fn arp_and_neighbor_discovery_reach_the_ring_uncounted() {
    for s in stores() {
        arp_and_neighbor_discovery_reach_the_ring_uncounted_in(s);
    }
}

fn arp_and_neighbor_discovery_reach_the_ring_uncounted_in(store: Store) {
    let p = prog(&[], store);
    let mut m = Map::new(store);
    for pkt_type in [0, 1, 3, 4] {
        for f in [arp(), v6(58, 135), v6(58, 136), tagged(&arp(), 5)] {
            let skb = Skb {
                data: f,
                pkt_type,
                vlan: None,
            };
            assert_eq!(run(&p, &skb, &mut m), u64::from(SNAP));
        }
    }
    assert!(m.counts().is_empty());
}

#[test]
fn ipv6_data_is_counted_with_its_addresses() {
    for s in stores() {
        ipv6_data_is_counted_with_its_addresses_in(s);
    }
}

fn ipv6_data_is_counted_with_its_addresses_in(store: Store) {
    let p = prog(&[], store);
    let mut m = Map::new(store);
    for f in [v6(6, 0), v6(58, 128)] {
        assert_eq!(run(&p, &host(f), &mut m), 0);
    }
    let dst = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let src = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9));
    let c = m.counts();
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].0, c[0].1, c[0].3), (key(0, dst), 2, Some(src)));
}

#[test]
fn vlans_in_the_frame_and_offloaded() {
    for s in stores() {
        vlans_in_the_frame_and_offloaded_in(s);
    }
}

fn vlans_in_the_frame_and_offloaded_in(store: Store) {
    let p = prog(&[], store);
    let mut m = Map::new(store);
    // A tag in the frame.
    assert_eq!(run(&p, &host(tagged(&v4(PORT), 100)), &mut m), 0);
    // A tag the driver took out.
    let off = Skb {
        data: v4(PORT),
        pkt_type: 0,
        vlan: Some((0x3000 | 200, 0x8100)),
    };
    assert_eq!(run(&p, &off, &mut m), 0);
    // Both: the offloaded one names the VLAN, the one in the frame moves the header.
    let both = Skb {
        data: tagged(&v4(PORT), 7),
        pkt_type: 0,
        vlan: Some((300, 0x8100)),
    };
    assert_eq!(run(&p, &both, &mut m), 0);
    let c: Vec<(u16, u64)> = m.counts().iter().map(|x| (x.0.client.vlan, x.1)).collect();
    assert_eq!(c, vec![(100, 1), (200, 1), (300, 1)]);
    assert!(m.counts().iter().all(|x| x.0.dst == IpAddr::from(SERVER)));
    // 802.1ad, offloaded or in the frame: not steered, not counted, not passed.
    let mut m = Map::new(store);
    let ad = Skb {
        data: arp(),
        pkt_type: 0,
        vlan: Some((100, 0x88a8)),
    };
    assert_eq!(run(&p, &ad, &mut m), 0);
    let mut f = tagged(&v4(PORT), 100);
    f[12..14].copy_from_slice(&[0x88, 0xa8]);
    assert_eq!(run(&p, &host(f), &mut m), 0);
    assert!(m.counts().is_empty());
}

#[test]
fn only_frames_that_came_in_for_the_host_count() {
    for s in stores() {
        only_frames_that_came_in_for_the_host_count_in(s);
    }
}

fn only_frames_that_came_in_for_the_host_count_in(store: Store) {
    let p = prog(&[MACVLAN], store);
    let mut m = Map::new(store);
    let skb = |dst: Mac, pkt_type: u32| Skb {
        data: v4(dst),
        pkt_type,
        vlan: None,
    };
    // Another host's frame (a flooded one, another port's MAC), and our own outgoing: no.
    assert_eq!(run(&p, &skb(Mac(2, 0, 0, 0, 0, 0x99), 3), &mut m), 0);
    assert_eq!(run(&p, &skb(PORT, 4), &mut m), 0);
    assert_eq!(run(&p, &skb(MACVLAN, 4), &mut m), 0);
    assert!(m.counts().is_empty());
    // The macvlan's (a low word with its top bit set: compared in 32 bits) and the port's own.
    assert_eq!(run(&p, &skb(MACVLAN, 3), &mut m), 0);
    assert_eq!(run(&p, &skb(PORT, 0), &mut m), 0);
    assert_eq!(m.counts()[0].1, 2);
    // A MAC equal in its low 4 bytes only.
    let near = Mac(0x02, 0x53, 0x4c, 0xc2, 0x80, 0x81);
    assert_eq!(run(&p, &skb(near, 3), &mut m), 0);
    assert_eq!(m.counts()[0].1, 2);
}

#[test]
fn malformed_and_short_frames_are_dropped_uncounted() {
    for s in stores() {
        malformed_and_short_frames_are_dropped_uncounted_in(s);
    }
}

fn malformed_and_short_frames_are_dropped_uncounted_in(store: Store) {
    let p = prog(&[], store);
    let mut m = Map::new(store);
    let f = v4(PORT);
    let mut bad_version = f.clone();
    bad_version[14] = 0x65;
    let mut short_header = f.clone();
    short_header[14] = 0x44;
    let mut bad_v6 = v6(6, 0);
    bad_v6[14] = 0x40;
    for d in [
        f[..33].to_vec(),
        bad_version,
        short_header,
        bad_v6,
        v6(6, 0)[..40].to_vec(),
        vec![],
        f[..13].to_vec(),
        {
            let mut x = f.clone();
            x[12..14].copy_from_slice(&[0x88, 0xcc]);
            x
        },
    ] {
        assert_eq!(run(&p, &host(d), &mut m), 0);
    }
    assert!(m.counts().is_empty());
}

#[test]
fn the_program_stays_within_the_kernel_limits() {
    for s in stores() {
        the_program_stays_within_the_kernel_limits_in(s);
    }
}

fn the_program_stays_within_the_kernel_limits_in(store: Store) {
    let macs: Vec<Mac> = (0..MAX_HOST_MACS as u8)
        .map(|i| Mac(2, 0, 0, 0, 1, i))
        .collect();
    let p = prog(&macs, store);
    assert!(p.len() < 4096, "{} instructions", p.len());
    // Every path ends in an exit; jumps stay inside.
    assert_eq!(p.last().unwrap().code, CLASS_JMP | OP_EXIT);
    for (pc, i) in p.iter().enumerate() {
        if matches!(i.class(), CLASS_JMP | CLASS_JMP32)
            && i.code & 0xf0 != OP_EXIT
            && i.code & 0xf0 != OP_CALL
        {
            let t = pc as i64 + 1 + i64::from(i.off);
            assert!((0..p.len() as i64).contains(&t), "jump at {pc} to {t}");
            assert!(t > pc as i64, "backward jump at {pc}");
        }
    }
    // With the most MACs the program still counts a macvlan's frames.
    let mut m = Map::new(store);
    let skb = Skb {
        data: v4(*macs.last().unwrap()),
        pkt_type: 3,
        vlan: None,
    };
    assert_eq!(run(&p, &skb, &mut m), 0);
    assert_eq!(m.counts().len(), 1);
    assert!(counting_program(&vec![PORT; MAX_HOST_MACS + 1], SNAP, MAP_FD, store).is_err());
    assert!(counting_program(&[], u32::MAX, MAP_FD, store).is_err());
}

#[test]
fn the_slot_table_probes_claims_and_overflows() {
    let store = stores()[1];
    let Store::Slots { slots, .. } = store else {
        unreachable!()
    };
    let p = prog(&[], store);
    let mut m = Map::new(store);
    let from = |i: u8| {
        host(ipv4_frame(
            Mac(2, 0, 0, 0, 7, i),
            PORT,
            CLIENT_IP,
            SERVER,
            false,
            200,
        ))
    };
    // More clients than slots: each takes the first free slot of its probe run, or counts as
    // overflow when its run is full; a client that has a slot keeps counting there.
    let n = 3 * slots as u8;
    for round in 0..2 {
        for i in 0..n {
            assert_eq!(run(&p, &from(i), &mut m), 0);
        }
        let c = m.counts();
        assert!(c.len() <= slots as usize);
        assert!(
            c.len() >= slots as usize / 2,
            "only {} slots taken",
            c.len()
        );
        let counted: u64 = c.iter().map(|x| x.1).sum();
        assert_eq!(counted + m.overflow(), u64::from(n) * (round + 1));
        assert!(c.iter().all(|x| x.1 == round + 1), "{c:?}");
        // Every key is in one slot only.
        let mut keys: Vec<_> = c.iter().map(|x| x.0).collect();
        keys.dedup();
        assert_eq!(keys.len(), c.len());
    }
    // The all-zero MAC untagged would look like a free slot: not counted.
    let mut m = Map::new(store);
    let zero = ipv4_frame(Mac(0, 0, 0, 0, 0, 0), PORT, CLIENT_IP, SERVER, false, 200);
    assert_eq!(run(&p, &host(zero), &mut m), 0);
    assert!(m.counts().is_empty());
    assert_eq!(m.overflow(), 0);
}
