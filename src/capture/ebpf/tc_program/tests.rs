//! The tc programs' shape, checked without a kernel (the live tests in `capture/socket/tc_tests.rs` run
//! them): within the kernel's limits, forward jumps only, and no verdict but "none" anywhere,
//! so that they can never drop or redirect a frame.

use super::super::insn::*;
use super::*;

const MAP_FD: i32 = 42;
const RATIO_FD: i32 = 45;
const RING: Ring = Ring {
    fd: 43,
    snap_len: 96,
    lost_fd: 44,
};

fn stores() -> [Store; 2] {
    [
        Store::Hash,
        Store::Slots {
            slots: 1 << 15,
            mul: [3, 5, 7],
        },
    ]
}

/// Every exit returns TC_ACT_UNSPEC (R0 set to it right before), every jump goes forward and
/// lands inside, and every map named is one of `fds`.
fn well_formed(p: &[Insn], fds: &[i32]) {
    assert!(p.len() < 4096, "{} instructions", p.len());
    assert_eq!(p.last().unwrap().code, CLASS_JMP | OP_EXIT);
    for (pc, i) in p.iter().enumerate() {
        let op = i.code & 0xf0;
        if i.code == CLASS_JMP | OP_EXIT {
            let before = p[pc - 1];
            assert_eq!(before.code, CLASS_ALU64 | 0xb0 | SRC_K, "exit at {pc}");
            assert_eq!(
                (before.dst(), before.imm),
                (0, TC_ACT_UNSPEC),
                "exit at {pc}"
            );
        } else if matches!(i.class(), CLASS_JMP | CLASS_JMP32) && op != OP_CALL {
            let t = pc as i64 + 1 + i64::from(i.off);
            assert!((0..p.len() as i64).contains(&t), "jump at {pc} to {t}");
            assert!(t > pc as i64, "backward jump at {pc}");
        }
        if i.code == CLASS_LD | MODE_IMM | 0x18 && i.src() == PSEUDO_MAP_FD {
            assert!(fds.contains(&i.imm), "map fd {} at {pc}", i.imm);
        }
        // No packet write: a store goes to the stack, a map value or a ring record.
        if matches!(i.class(), CLASS_ST | CLASS_STX) {
            assert_ne!(i.dst(), 2, "store through the packet pointer at {pc}");
            assert_ne!(i.dst(), 4, "store through the network header at {pc}");
        }
    }
}

#[test]
fn the_tc_programs_only_ever_say_no_verdict() {
    let macs: Vec<Mac> = (0..MAX_HOST_MACS as u8)
        .map(|i| Mac(2, 0, 0, 0, 1, i))
        .collect();
    for store in stores() {
        for m in [&[][..], &macs[..]] {
            let p = counting_program(m, MAP_FD, store, RING, RATIO_FD).unwrap();
            well_formed(&p, &[MAP_FD, RING.fd, RING.lost_fd, RATIO_FD]);
        }
    }
    well_formed(&watching_program(RING).unwrap(), &[RING.fd, RING.lost_fd]);
}

#[test]
fn bad_parameters_are_refused() {
    let too_many = vec![Mac(2, 0, 0, 0, 0, 1); MAX_HOST_MACS + 1];
    assert!(counting_program(&too_many, MAP_FD, Store::Hash, RING, RATIO_FD).is_err());
    let odd = Store::Slots {
        slots: 1000,
        mul: [1, 1, 1],
    };
    assert!(counting_program(&[], MAP_FD, odd, RING, RATIO_FD).is_err());
    for snap_len in [0, 13, 1 << 20] {
        let r = Ring { snap_len, ..RING };
        assert!(watching_program(r).is_err(), "snap {snap_len}");
        assert!(counting_program(&[], MAP_FD, Store::Hash, r, RATIO_FD).is_err());
    }
}

/// The egress program runs on every packet a host sends: a data packet (IPv4, or IPv6 whose
/// next header is not ICMPv6) jumps straight to the exit in its first 13 instructions.
#[test]
fn a_data_packet_leaves_the_egress_program_at_once() {
    let p = watching_program(RING).unwrap();
    let exit = p.len() as i64 - 2;
    let to_exit = |pc: usize| pc as i64 + 1 + i64::from(p[pc].off) == exit;
    let (jeq, jne) = (CLASS_JMP | 0x10 | SRC_K, CLASS_JMP | 0x50 | SRC_K);
    let v4 = (0..p.len()).find(|&pc| p[pc].code == jeq && p[pc].imm == wire16(ETH_P_IP));
    assert!(v4.is_some_and(|pc| pc < 3 && to_exit(pc)), "IPv4: {v4:?}");
    let v6 = (0..p.len()).find(|&pc| p[pc].code == jne && p[pc].imm == IPPROTO_ICMPV6);
    assert!(v6.is_some_and(|pc| pc < 13 && to_exit(pc)), "IPv6: {v6:?}");
}
