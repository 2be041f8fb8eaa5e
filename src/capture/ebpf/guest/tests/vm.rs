//! A small interpreter of what the guests' tc programs use: direct packet access (a read must
//! lie within what a bounds check against `data_end` proved, as the verifier demands), the
//! `__sk_buff` fields, the pins hash, the counters array (one CPU's) and the helpers.

use std::collections::HashMap;

use super::super::super::insn::*;
use super::super::{
    filter_index, GuestCounters, GuestFds, GuestKey, FILTER_BYTES, KEY_SIZE, PIN_SIZE, RECORD,
};

pub const FDS: GuestFds = GuestFds {
    pins: 42,
    counters: 43,
    filter: 44,
};

/// What the hook hands the program.
#[derive(Clone, Debug)]
pub struct Skb {
    pub data: Vec<u8>,
    pub pkt_type: u32,
    /// A tag taken out: (tci, tpid).
    pub vlan: Option<(u16, u16)>,
    pub gso_segs: u32,
    /// The linear head (what `data_end` bounds); the whole frame when None.
    pub linear: Option<usize>,
}

impl Skb {
    pub fn new(data: Vec<u8>) -> Skb {
        Skb {
            data,
            pkt_type: 3,
            vlan: None,
            gso_segs: 0,
            linear: None,
        }
    }
}

/// The maps and what the helpers did.
#[derive(Default)]
pub struct Maps {
    pins: HashMap<[u8; KEY_SIZE], [u8; PIN_SIZE]>,
    slots: Vec<Vec<u8>>,
    /// The filter's value, as `GuestMaps` keeps it.
    filter: Vec<u8>,
    /// The last `bpf_redirect(ifindex, flags)`.
    pub redirect: Option<(u64, u64)>,
    pub pulls: usize,
    pub load_bytes: usize,
}

impl Maps {
    pub fn new(slots: usize) -> Maps {
        Maps {
            slots: vec![vec![0; RECORD]; slots],
            filter: vec![0; FILTER_BYTES],
            ..Maps::default()
        }
    }

    pub fn pin(&mut self, g: GuestKey, ifindex: u32, slot: u32) {
        let mut v = [0u8; PIN_SIZE];
        v[..4].copy_from_slice(&ifindex.to_ne_bytes());
        v[4..].copy_from_slice(&slot.to_ne_bytes());
        self.pins.insert(g.encode(), v);
        self.filter[filter_index(g.mac)] = 1;
    }

    pub fn counters(&self, slot: usize) -> GuestCounters {
        GuestCounters::sum(&self.slots[slot])
    }

    /// Every slot's counters, summed (nothing counted anywhere: all zero).
    pub fn total(&self) -> GuestCounters {
        GuestCounters::sum(&self.slots.concat())
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum V {
    Scalar(u64),
    Ctx,
    Stack(i64),
    Pkt(i64),
    PktEnd,
    Pin([u8; KEY_SIZE], i64),
    Slot(usize, i64),
    Map(i32),
    /// Into the filter's value.
    Filter(i64),
}

impl V {
    fn s(self) -> u64 {
        match self {
            V::Scalar(x) => x,
            other => panic!("scalar expected, got {other:?}"),
        }
    }
}

/// What a run did: the verdict (as the program returned it) and the instructions it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub verdict: i32,
    pub steps: usize,
}

struct Vm<'a> {
    r: [V; 11],
    stack: [u8; 512],
    skb: &'a Skb,
    linear: usize,
    /// Packet bytes a bounds check proved readable.
    checked: i64,
}

fn ne(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[..b.len()].copy_from_slice(b);
    u64::from_ne_bytes(x)
}

fn size_of(i: &Insn) -> usize {
    match i.code & 0x18 {
        0x00 => 4,
        0x08 => 2,
        0x10 => 1,
        _ => 8,
    }
}

pub fn run(prog: &[Insn], skb: &Skb, maps: &mut Maps) -> Run {
    let mut vm = Vm {
        r: [V::Scalar(0); 11],
        stack: [0; 512],
        skb,
        linear: skb.linear.unwrap_or(skb.data.len()).min(skb.data.len()),
        checked: 0,
    };
    vm.r[1] = V::Ctx;
    vm.r[10] = V::Stack(512);
    let mut pc = 0usize;
    for steps in 1..10_000 {
        let i = prog[pc];
        pc += 1;
        let skip = match i.class() {
            CLASS_ALU64 => vm.alu64(&i),
            CLASS_ALU => vm.byte_swap(&i),
            CLASS_LD => vm.ld_imm64(&i),
            CLASS_LDX => vm.ldx(&i, maps),
            CLASS_ST | CLASS_STX => vm.st(&i, maps),
            CLASS_JMP | CLASS_JMP32 => match vm.jmp(&i, maps) {
                Ok(skip) => skip,
                Err(v) => {
                    return Run {
                        verdict: v as i32,
                        steps,
                    }
                }
            },
            c => panic!("class {c}"),
        };
        pc = (pc as i64 + skip) as usize;
    }
    panic!("runaway program");
}

impl Vm<'_> {
    fn alu64(&mut self, i: &Insn) -> i64 {
        let (dst, src) = (usize::from(i.dst()), usize::from(i.src()));
        let rhs = if i.code & SRC_X != 0 {
            self.r[src]
        } else {
            V::Scalar(i.imm as i64 as u64)
        };
        self.r[dst] = match (i.code & 0xf0, self.r[dst], rhs) {
            (0xb0, _, v) => v,
            (0x00, V::Stack(o), V::Scalar(k)) => V::Stack(o + k as i64),
            (0x00, V::Pkt(o), V::Scalar(k)) => V::Pkt(o + k as i64),
            (0x00, V::Filter(o), V::Scalar(k)) => V::Filter(o + k as i64),
            (0x00, V::Scalar(a), V::Scalar(b)) => V::Scalar(a.wrapping_add(b)),
            (0x10, V::Scalar(a), V::Scalar(b)) => V::Scalar(a.wrapping_sub(b)),
            (0x20, V::Scalar(a), V::Scalar(b)) => V::Scalar(a.wrapping_mul(b)),
            (0x50, V::Scalar(a), V::Scalar(b)) => V::Scalar(a & b),
            (0x60, V::Scalar(a), V::Scalar(b)) => V::Scalar(a << b),
            (0x70, V::Scalar(a), V::Scalar(b)) => V::Scalar(a >> b),
            other => panic!("unsupported ALU {other:?}"),
        };
        0
    }

    fn byte_swap(&mut self, i: &Insn) -> i64 {
        assert_eq!(i.code, CLASS_ALU | OP_END | SRC_X);
        let dst = usize::from(i.dst());
        let v = self.r[dst].s();
        self.r[dst] = V::Scalar(match i.imm {
            16 => u64::from((v as u16).to_be()),
            32 => u64::from((v as u32).to_be()),
            _ => v.to_be(),
        });
        0
    }

    fn ld_imm64(&mut self, i: &Insn) -> i64 {
        assert_eq!(i.code, CLASS_LD | MODE_IMM | 0x18, "no LD_ABS/LD_IND at tc");
        if i.src() == PSEUDO_MAP_VALUE {
            assert_eq!(
                i.imm, FDS.filter,
                "only the filter's value is read in place"
            );
            self.r[usize::from(i.dst())] = V::Filter(0);
            return 1;
        }
        assert_eq!(i.src(), PSEUDO_MAP_FD);
        assert!([FDS.pins, FDS.counters].contains(&i.imm), "map {}", i.imm);
        self.r[usize::from(i.dst())] = V::Map(i.imm);
        1
    }

    fn ctx(&self, off: i16) -> V {
        let s = self.skb;
        V::Scalar(match off {
            0 => s.data.len() as u64,
            4 => u64::from(s.pkt_type),
            20 => u64::from(s.vlan.is_some()),
            24 => u64::from(s.vlan.map_or(0, |v| v.0)),
            28 => u64::from(s.vlan.map_or(0, |v| v.1.to_be())),
            76 => return V::Pkt(0),
            80 => return V::PktEnd,
            164 => u64::from(s.gso_segs),
            _ => panic!("context field {off} read"),
        })
    }

    fn ldx(&mut self, i: &Insn, maps: &Maps) -> i64 {
        let (dst, src, n) = (usize::from(i.dst()), usize::from(i.src()), size_of(i));
        let off = i64::from(i.off);
        let at = |o: i64| (o + off) as usize;
        self.r[dst] = match self.r[src] {
            V::Ctx => self.ctx(i.off),
            V::Stack(o) => V::Scalar(ne(&self.stack[at(o)..at(o) + n])),
            V::Pkt(o) => {
                let end = o + off + n as i64;
                assert!(end <= self.checked, "packet read to {end} unchecked");
                V::Scalar(ne(&self.skb.data[at(o)..at(o) + n]))
            }
            V::Pin(k, o) => {
                assert!(at(o) + n <= PIN_SIZE, "pin read past its end");
                V::Scalar(ne(&maps.pins[&k][at(o)..at(o) + n]))
            }
            V::Slot(e, o) => {
                assert!(at(o) + n <= RECORD, "counter read past the record");
                V::Scalar(ne(&maps.slots[e][at(o)..at(o) + n]))
            }
            V::Filter(o) => {
                assert!(
                    o >= 0 && at(o) + n <= FILTER_BYTES,
                    "filter read out of bounds"
                );
                V::Scalar(ne(&maps.filter[at(o)..at(o) + n]))
            }
            other => panic!("load through {other:?}"),
        };
        0
    }

    fn st(&mut self, i: &Insn, maps: &mut Maps) -> i64 {
        let (dst, src, n) = (usize::from(i.dst()), usize::from(i.src()), size_of(i));
        assert_ne!(
            i.code & 0xe0,
            MODE_ATOMIC,
            "per-CPU counters need no atomics"
        );
        let v = if i.class() == CLASS_STX {
            self.r[src].s()
        } else {
            i.imm as i64 as u64
        };
        let bytes = &v.to_ne_bytes()[..n];
        let at = |o: i64| (o + i64::from(i.off)) as usize;
        match self.r[dst] {
            V::Stack(o) => {
                assert_eq!(at(o) % n, 0, "unaligned stack store");
                self.stack[at(o)..at(o) + n].copy_from_slice(bytes);
            }
            V::Slot(e, o) => {
                assert!(at(o) + n <= RECORD, "counter write past the record");
                maps.slots[e][at(o)..at(o) + n].copy_from_slice(bytes);
            }
            other => panic!("store through {other:?}"),
        }
        0
    }

    /// Exit (`Err(R0)`), calls and jumps; a map value compares as a non-null pointer, packet
    /// pointers by their offsets (a passed check proves the bytes before the pointer).
    fn jmp(&mut self, i: &Insn, maps: &mut Maps) -> Result<i64, u64> {
        let op = i.code & 0xf0;
        match op {
            OP_EXIT => return Err(self.r[0].s()),
            OP_CALL => {
                self.r[0] = self.call(i.imm, maps);
                for x in &mut self.r[1..=5] {
                    *x = V::Scalar(0xdead);
                }
                return Ok(0);
            }
            OP_JA => return Ok(i64::from(i.off)),
            _ => {}
        }
        let (dst, src) = (usize::from(i.dst()), usize::from(i.src()));
        let rhs = if i.code & SRC_X != 0 {
            self.r[src]
        } else {
            V::Scalar(i.imm as i64 as u64)
        };
        let (mut a, mut b) = match (self.r[dst], rhs) {
            (V::Pkt(o), V::PktEnd) => (o as u64, self.linear as u64),
            (V::Pin(..) | V::Slot(..), V::Scalar(0)) => (1, 0),
            (V::Scalar(a), V::Scalar(b)) => (a, b),
            other => panic!("compare {other:?}"),
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
        if let (V::Pkt(o), V::PktEnd) = (self.r[dst], rhs) {
            // `> end` not taken, or `<= end` taken: o bytes are in.
            if (op == 0x20 && !taken) || (op == 0xb0 && taken) {
                self.checked = self.checked.max(o);
            }
        }
        Ok(if taken { i64::from(i.off) } else { 0 })
    }

    fn call(&mut self, h: i32, maps: &mut Maps) -> V {
        let r = self.r;
        let stack_at = |v: V| match v {
            V::Stack(o) => o as usize,
            other => panic!("stack pointer expected, got {other:?}"),
        };
        match h {
            1 if r[1] == V::Map(FDS.pins) => {
                let at = stack_at(r[2]);
                let k: [u8; KEY_SIZE] = self.stack[at..at + KEY_SIZE].try_into().unwrap();
                if maps.pins.contains_key(&k) {
                    V::Pin(k, 0)
                } else {
                    V::Scalar(0)
                }
            }
            1 if r[1] == V::Map(FDS.counters) => {
                let at = stack_at(r[2]);
                let i = ne(&self.stack[at..at + 4]) as usize;
                if i < maps.slots.len() {
                    V::Slot(i, 0)
                } else {
                    V::Scalar(0)
                }
            }
            23 => {
                maps.redirect = Some((r[1].s(), r[2].s()));
                V::Scalar(7)
            }
            39 => {
                assert_eq!(r[1], V::Ctx);
                maps.pulls += 1;
                self.linear = self
                    .linear
                    .max((r[2].s() as usize).min(self.skb.data.len()));
                // The helper moves the packet: earlier pointers and checks are void.
                self.checked = 0;
                V::Scalar(0)
            }
            26 => {
                assert_eq!(r[1], V::Ctx);
                maps.load_bytes += 1;
                let (off, len, to) = (r[2].s() as usize, r[4].s() as usize, stack_at(r[3]));
                match self.skb.data.get(off..off + len) {
                    Some(b) => {
                        self.stack[to..to + len].copy_from_slice(b);
                        V::Scalar(0)
                    }
                    None => {
                        self.stack[to..to + len].fill(0);
                        V::Scalar(-14i64 as u64)
                    }
                }
            }
            other => panic!("helper {other} (map {:?})", r[1]),
        }
    }
}
