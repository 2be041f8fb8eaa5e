//! A small interpreter of the instructions the counting program uses, for its tests: the
//! frame as a socket filter sees it, the stack, and either store (hash or slot table).

use std::collections::HashMap;
use std::net::IpAddr;

use super::super::super::draw::{RATIO_SEEN, RATIO_VALUE};
use super::super::super::insn::*;
use super::super::super::map::{
    addr, decode_key, sum_values, EntryKey, RawKey, KEY_SIZE, VALUE_SIZE,
};
use super::super::super::slots::SLOT_SIZE;
use super::super::Store;

pub const MAP_FD: i32 = 42;
/// The sampling ratio's map (`draw.rs`): one entry, this CPU's value.
pub const RATIO_FD: i32 = 45;

/// What the kernel hands a socket filter: the frame as taps see it and a few `__sk_buff`
/// fields.
#[derive(Clone)]
pub struct Skb {
    pub data: Vec<u8>,
    pub pkt_type: u32,
    pub vlan: Option<(u16, u16)>, // (tci, tpid)
    /// Frames GRO merged into the packet (tc programs only).
    pub gso_segs: u32,
}

/// The ring buffer's and its lost-frame counter's descriptors, for the tc programs.
pub const RING_FD: i32 = 43;
pub const LOST_FD: i32 = 44;

#[derive(Clone, Copy, Debug, PartialEq)]
enum V {
    Scalar(u64),
    Ctx,
    Stack(i64),
    Value(usize, i64),
    /// Into the ratio map's value (this CPU's).
    Ratio(i64),
    Map(i32),
    /// Direct packet access at tc: a pointer into the frame, and its end.
    Pkt(i64),
    PktEnd,
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
pub struct Map {
    store: Store,
    keys: Vec<RawKey>,
    values: Vec<Vec<u8>>,
    index: HashMap<RawKey, usize>,
    /// The ratio map's value: log2 N, the generator, the packets seen (`draw.rs`).
    ratio: Vec<u8>,
}

/// Both stores, the slot table small enough that probe runs meet.
pub fn stores() -> [Store; 2] {
    [
        Store::Hash,
        Store::Slots {
            slots: 8,
            mul: [0x2545_f491, 0x1b87_3593, 0x0cc9_e2d5],
        },
    ]
}

impl Map {
    pub fn new(store: Store) -> Map {
        let values = match store {
            Store::Hash => Vec::new(),
            Store::Slots { slots, .. } => vec![vec![0; SLOT_SIZE]; slots as usize + 1],
        };
        Map {
            store,
            keys: Vec::new(),
            values,
            index: HashMap::new(),
            ratio: vec![0; RATIO_VALUE],
        }
    }

    /// Counts one data frame in 2^`shift` from now on, the generator seeded with `seed`.
    pub fn sample(&mut self, shift: u64, seed: u64) {
        self.ratio[..8].copy_from_slice(&shift.to_ne_bytes());
        self.ratio[8..16].copy_from_slice(&(seed | 1).to_ne_bytes());
    }

    /// The packets the program saw, as the daemon reads them.
    pub fn seen(&self) -> u64 {
        ne(&self.ratio[RATIO_SEEN..RATIO_SEEN + 8])
    }

    pub fn counts(&self) -> Vec<(EntryKey, u64, u64, Option<IpAddr>)> {
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
    pub fn overflow(&self) -> u64 {
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
        // The ethertype behind any tag taken out, as the stack keeps it (big-endian).
        16 => u64::from(u16::from_ne_bytes([skb.data[12], skb.data[13]])),
        164 => u64::from(skb.gso_segs),
        _ => panic!("context field {off} read"),
    }
}

/// The machine's registers and stack while a program runs.
struct Vm<'a> {
    r: [V; 11],
    stack: [u8; 512],
    skb: &'a Skb,
}

/// What an instruction did to the flow.
enum Flow {
    Next,
    /// Skip this many instructions (a taken jump, or the second half of a 64-bit load).
    Skip(i64),
    /// The program returned this.
    Exit(u64),
}

fn size_of(i: &Insn) -> usize {
    match i.code & 0x18 {
        0x00 => 4,
        0x08 => 2,
        0x10 => 1,
        _ => 8,
    }
}

/// Runs `prog` on `skb`; returns its verdict (bytes to keep).
pub fn run(prog: &[Insn], skb: &Skb, map: &mut Map) -> u64 {
    run_counted(prog, skb, map).0
}

/// Runs `prog` on `skb`; returns its verdict and the instructions it ran (a 64-bit load is
/// one).
pub fn run_counted(prog: &[Insn], skb: &Skb, map: &mut Map) -> (u64, usize) {
    let mut vm = Vm {
        r: [V::Scalar(0); 11],
        stack: [0u8; 512],
        skb,
    };
    vm.r[1] = V::Ctx;
    vm.r[10] = V::Stack(512);
    let mut pc = 0usize;
    for steps in 1..10_000 {
        let i = prog[pc];
        pc += 1;
        let flow = match i.class() {
            CLASS_ALU64 => vm.alu64(&i),
            CLASS_ALU => vm.byte_swap(&i),
            CLASS_LD => vm.ld(&i),
            CLASS_LDX => vm.ldx(&i, map),
            CLASS_ST | CLASS_STX => vm.st(&i, map),
            CLASS_JMP | CLASS_JMP32 => vm.jmp(&i, map),
            c => panic!("class {c}"),
        };
        match flow {
            Flow::Next => {}
            Flow::Skip(n) => pc = (pc as i64 + n) as usize,
            Flow::Exit(v) => return (v, steps),
        }
    }
    panic!("runaway program");
}

impl Vm<'_> {
    fn clobber(&mut self) {
        for x in &mut self.r[1..=5] {
            *x = V::Scalar(0xdead);
        }
    }

    fn alu64(&mut self, i: &Insn) -> Flow {
        let (dst, src) = (usize::from(i.dst()), usize::from(i.src()));
        let rhs = if i.code & SRC_X != 0 {
            self.r[src]
        } else {
            V::Scalar(i.imm as i64 as u64)
        };
        self.r[dst] = match (i.code & 0xf0, self.r[dst], rhs) {
            (0xb0, _, v) => v,
            (0x00, V::Stack(o), V::Scalar(k)) => V::Stack(o + k as i64),
            (0x00, V::Value(e, o), V::Scalar(k)) => V::Value(e, o + k as i64),
            (0x00, V::Pkt(o), V::Scalar(k)) => V::Pkt(o + k as i64),
            (0x10, V::Scalar(a), V::Scalar(b)) => V::Scalar(a.wrapping_sub(b)),
            (0x60, V::Scalar(a), V::Scalar(b)) => V::Scalar(a << b),
            (0x00, V::Scalar(a), V::Scalar(b)) => V::Scalar(a.wrapping_add(b)),
            (0x20, V::Scalar(a), V::Scalar(b)) => V::Scalar(a.wrapping_mul(b)),
            (0xa0, V::Scalar(a), V::Scalar(b)) => V::Scalar(a ^ b),
            (0x50, V::Scalar(a), V::Scalar(b)) => V::Scalar(a & b),
            (0x70, V::Scalar(a), V::Scalar(b)) => V::Scalar(a >> b),
            other => panic!("unsupported ALU {other:?}"),
        };
        Flow::Next
    }

    fn byte_swap(&mut self, i: &Insn) -> Flow {
        assert_eq!(
            i.code,
            CLASS_ALU | OP_END | SRC_X,
            "only to-big-endian here"
        );
        let dst = usize::from(i.dst());
        let v = self.r[dst].s();
        self.r[dst] = V::Scalar(match i.imm {
            16 => u64::from((v as u16).to_be()),
            32 => u64::from((v as u32).to_be()),
            64 => v.to_be(),
            b => panic!("byte swap of {b} bits"),
        });
        Flow::Next
    }

    /// `LD_ABS`/`LD_IND` (a frame too short ends the program with 0) and the map's address.
    fn ld(&mut self, i: &Insn) -> Flow {
        let mode = i.code & 0xe0;
        if mode != MODE_ABS && mode != MODE_IND {
            assert_eq!(i.code, CLASS_LD | MODE_IMM | 0x18);
            assert_eq!(i.src(), PSEUDO_MAP_FD);
            assert!(
                [MAP_FD, RATIO_FD, RING_FD, LOST_FD].contains(&i.imm),
                "map {}",
                i.imm
            );
            self.r[usize::from(i.dst())] = V::Map(i.imm);
            return Flow::Skip(1);
        }
        let base = if mode == MODE_IND {
            self.r[usize::from(i.src())].s()
        } else {
            0
        };
        let n = size_of(i);
        let at = usize::try_from(base.wrapping_add(i.imm as i64 as u64)).ok();
        let bytes = at.and_then(|a| self.skb.data.get(a..a.checked_add(n)?));
        let Some(b) = bytes else {
            return Flow::Exit(0);
        };
        self.r[0] = V::Scalar(b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)));
        self.clobber();
        Flow::Next
    }

    fn ldx(&mut self, i: &Insn, map: &Map) -> Flow {
        let (dst, src, size) = (usize::from(i.dst()), usize::from(i.src()), size_of(i));
        let off = i64::from(i.off);
        self.r[dst] = V::Scalar(match self.r[src] {
            V::Ctx if off == 76 => {
                self.r[dst] = V::Pkt(0);
                return Flow::Next;
            }
            V::Ctx if off == 80 => {
                self.r[dst] = V::PktEnd;
                return Flow::Next;
            }
            V::Ctx => ctx_field(self.skb, off),
            V::Pkt(o) => {
                let at = (o + off) as usize;
                ne(&self.skb.data[at..at + size])
            }
            V::Stack(o) => {
                let at = (o + off) as usize;
                ne(&self.stack[at..at + size])
            }
            V::Value(e, o) => {
                let at = (o + off) as usize;
                ne(&map.values[e][at..at + size])
            }
            V::Ratio(o) => {
                let at = (o + off) as usize;
                ne(&map.ratio[at..at + size])
            }
            other => panic!("load through {other:?}"),
        });
        Flow::Next
    }

    /// Stores, and the 64-bit atomic add.
    fn st(&mut self, i: &Insn, map: &mut Map) -> Flow {
        let (dst, src, size) = (usize::from(i.dst()), usize::from(i.src()), size_of(i));
        let off = i64::from(i.off);
        if i.class() == CLASS_STX && i.code & 0xe0 == MODE_ATOMIC {
            assert_eq!((size, i.imm), (8, 0), "only 64-bit atomic add here");
            let V::Value(e, o) = self.r[dst] else {
                panic!("atomic add through {:?}", self.r[dst]);
            };
            let at = (o + off) as usize;
            assert_eq!(at % 8, 0, "unaligned atomic");
            let v = ne(&map.values[e][at..at + 8]).wrapping_add(self.r[src].s());
            map.values[e][at..at + 8].copy_from_slice(&v.to_ne_bytes());
            return Flow::Next;
        }
        let v = if i.class() == CLASS_STX {
            self.r[src].s()
        } else {
            i.imm as i64 as u64
        };
        let bytes = &v.to_ne_bytes()[..size];
        match self.r[dst] {
            V::Stack(o) => {
                let at = (o + off) as usize;
                assert_eq!(at % size, 0, "unaligned stack store");
                self.stack[at..at + size].copy_from_slice(bytes);
            }
            V::Value(e, o) => {
                let at = (o + off) as usize;
                map.values[e][at..at + size].copy_from_slice(bytes);
            }
            V::Ratio(o) => {
                let at = (o + off) as usize;
                map.ratio[at..at + size].copy_from_slice(bytes);
            }
            other => panic!("store through {other:?}"),
        }
        Flow::Next
    }

    /// Exit, helper calls and jumps (a map value compares as a non-null pointer).
    fn jmp(&mut self, i: &Insn, map: &mut Map) -> Flow {
        let op = i.code & 0xf0;
        if op == OP_EXIT {
            return Flow::Exit(self.r[0].s());
        }
        if op == OP_CALL {
            self.r[0] = call(i.imm, &self.r, &mut self.stack, self.skb, map);
            self.clobber();
            return Flow::Next;
        }
        if op == OP_JA {
            return Flow::Skip(i64::from(i.off));
        }
        let (dst, src) = (usize::from(i.dst()), usize::from(i.src()));
        let end = self.skb.data.len() as u64;
        let mut a = match self.r[dst] {
            V::Scalar(x) => x,
            V::Value(..) | V::Ratio(..) => 1,
            V::Pkt(o) => o as u64,
            other => panic!("compare {other:?}"),
        };
        let mut b = match (i.code & SRC_X != 0, self.r[src]) {
            (true, V::PktEnd) => end,
            (true, r) => r.s(),
            (false, _) => i.imm as i64 as u64,
        };
        if i.class() == CLASS_JMP32 {
            a &= 0xffff_ffff;
            b &= 0xffff_ffff;
        }
        let taken = match op {
            0x10 => a == b,
            0x50 => a != b,
            0xa0 => a < b,
            0x30 => a >= b,
            0x20 => a > b,
            0xb0 => a <= b,
            _ => panic!("jump op {op:x}"),
        };
        if taken {
            Flow::Skip(i64::from(i.off))
        } else {
            Flow::Next
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
        // The ring buffer full: the frame counted as lost (not kept here).
        131 => V::Scalar(0),
        1 if r[1] == V::Map(LOST_FD) => V::Scalar(0),
        // The head is linear in these frames: nothing to pull.
        39 => V::Scalar(0),
        1 if r[1] == V::Map(RATIO_FD) => {
            let at = stack_at(r[2]);
            assert_eq!(ne(&stack[at..at + 4]), 0, "the ratio map has one entry");
            V::Ratio(0)
        }
        1 if matches!(map.store, Store::Slots { .. }) => {
            assert_eq!(r[1], V::Map(MAP_FD));
            let at = stack_at(r[2]);
            let i = ne(&stack[at..at + 4]) as usize;
            if i < map.values.len() {
                V::Value(i, 0)
            } else {
                V::Scalar(0)
            }
        }
        1 | 2 => {
            assert_eq!(r[1], V::Map(MAP_FD));
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
