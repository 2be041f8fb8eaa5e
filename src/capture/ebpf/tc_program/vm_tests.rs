//! The ingress counting program in the interpreter (`program/tests/vm.rs`): what a GRO packet
//! counts for, and the instructions each path runs (deterministic: the first measure of the
//! program's cost per packet at the hook; `BPF_PROG_TEST_RUN` in the GRO bench gives its ns).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::super::program::tests::vm::{run_counted, stores, Map, Skb, LOST_FD, RING_FD};
use super::*;

const MAP_FD: i32 = 42;
const RATIO_FD: i32 = 45;
const RING: Ring = Ring {
    fd: RING_FD,
    snap_len: 96,
    lost_fd: LOST_FD,
};
const CLIENT: [u8; 6] = [0x02, 0x52, 0x4c, 0x42, 0x00, 0x09];
const PORT: [u8; 6] = [0x02, 0x52, 0x4c, 0x42, 0x00, 0x01];
/// TCP with timestamps: the header of every segment of a bulk stream.
const TCP_HDR: usize = 32;

/// The first frame of a GRO packet of `segs` (0: a frame GRO left alone) of TCP to the port,
/// over IPv4 or IPv6, with `data` bytes of its own.
fn gro(v6: bool, segs: u32, data: usize) -> Skb {
    let mut f = PORT.to_vec();
    f.extend_from_slice(&CLIENT);
    let len = |l3: usize| ((l3 + TCP_HDR + data) as u16).to_be_bytes();
    if v6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&len(0));
        f.extend_from_slice(&[IPPROTO_TCP as u8, 64]);
        f.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9).octets());
        f.extend_from_slice(&Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).octets());
    } else {
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&len(20));
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, IPPROTO_TCP as u8, 0, 0]);
        f.extend_from_slice(&[198, 18, 0, 9, 198, 18, 0, 1]);
    }
    let mut tcp = [0u8; TCP_HDR];
    tcp[12] = (TCP_HDR as u8 / 4) << 4;
    f.extend_from_slice(&tcp);
    f.resize(f.len() + data, 0x5a);
    Skb {
        data: f,
        pkt_type: 0,
        vlan: None,
        gso_segs: segs,
    }
}

fn program(store: Store) -> Vec<Insn> {
    counting_program(&[], MAP_FD, store, RING, RATIO_FD).unwrap()
}

/// A GRO packet counts as the frames merged into it, each with the headers it carried on the
/// wire (as the NIC's counters count them), in either store.
#[test]
fn a_gro_packet_counts_its_frames_with_their_headers() {
    for store in stores() {
        for v6 in [false, true] {
            let mut m = Map::new(store);
            let skb = gro(v6, 43, 43 * 1448);
            let (verdict, _) = run_counted(&program(store), &skb, &mut m);
            assert_eq!(verdict as i32, TC_ACT_UNSPEC);
            let l3 = if v6 { 40 } else { 20 };
            let wire = skb.data.len() + 42 * (ETH_HDR as usize + l3 + TCP_HDR);
            let c = m.counts();
            assert_eq!(c.len(), 1, "{store:?} v6 {v6}");
            assert_eq!((c[0].1, c[0].2), (43, wire as u64), "{store:?} v6 {v6}");
            let dst: IpAddr = match v6 {
                true => Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).into(),
                false => Ipv4Addr::new(198, 18, 0, 1).into(),
            };
            assert_eq!(c[0].0.dst, dst);
        }
    }
}

/// The instructions each path runs in the slot table (the daemon's store): a GRO packet (or a
/// frame GRO left alone) of a client already in its slot, over IPv4 and IPv6, and a frame a
/// sampled port's draw does not keep. Where a GRO packet's 129 go (`cargo test --lib
/// instructions_per_path -- --nocapture`, and the code): the draw about 13 (an inlined per-CPU
/// lookup), what the packet counts for (`wire_length`) about 31, the slot (hash, probe, two
/// atomic adds) about 33, the walk to the key and the exit the rest. By the kernel's clock
/// (the GRO bench's `ingress_own_ns_per_pkt`) all of it is about 10 ns above an empty
/// program's run.
#[test]
fn instructions_per_path() {
    let store = stores()[1];
    let p = program(store);
    let mut m = Map::new(store);
    let steps = |skb: &Skb, m: &mut Map| run_counted(&p, skb, m).1;
    // The first frame claims the slot; what follows finds it.
    steps(&gro(false, 43, 100), &mut m);
    steps(&gro(true, 43, 100), &mut m);
    let cases = [
        ("GRO, IPv4", steps(&gro(false, 43, 100), &mut m)),
        ("GRO, IPv6", steps(&gro(true, 43, 100), &mut m)),
        ("one frame, IPv4", steps(&gro(false, 0, 100), &mut m)),
        ("one frame, IPv6", steps(&gro(true, 0, 100), &mut m)),
    ];
    m.sample(4, 0x1234_5678);
    let mut unkept = None;
    for _ in 0..64 {
        let before = m.counts();
        let n = steps(&gro(false, 43, 100), &mut m);
        if m.counts() == before {
            unkept = Some(n);
            break;
        }
    }
    for (what, n) in cases {
        eprintln!("counting program, {what}: {n} instructions");
    }
    eprintln!("counting program, a frame the draw does not keep: {unkept:?} instructions");
    assert_eq!(cases.map(|c| c.1), [129, 128, 102, 105]);
    assert_eq!(unkept, Some(39));
}
