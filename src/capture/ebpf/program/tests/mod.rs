//! The counting program run on a small interpreter of the instructions it uses, against frames
//! of every kind it must tell apart (the kernel's verifier and JIT are exercised by the root
//! tests and the kernel lab; this checks the logic on every machine, VLANs included).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::super::insn::*;
use super::super::map::EntryKey;
use super::*;
use crate::capture::frame::tests::ipv4_frame;
use crate::client::ClientKey;

pub(in crate::capture::ebpf) mod vm;
use vm::{run, stores, Map, Skb, MAP_FD, RATIO_FD};

const SNAP: u32 = 96;

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
        gso_segs: 0,
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
    counting_program(host_macs, SNAP, MAP_FD, store, RATIO_FD).unwrap()
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
                gso_segs: 0,
            };
            assert_eq!(run(&p, &skb, &mut m), u64::from(SNAP));
        }
    }
    assert!(m.counts().is_empty());
}

#[test]
fn sampled_one_data_frame_in_n_counts_for_n_and_never_arp() {
    for s in stores() {
        sampled_in(s);
    }
}

/// At 1 in 8: IPv4 and IPv6 data kept one in 8 on average, each kept frame counted for 8
/// (frames and bytes), every frame dropped from the socket; ARP and ND always passed; the
/// packets seen counted for the daemon's choice of N.
fn sampled_in(store: Store) {
    let p = prog(&[], store);
    let mut m = Map::new(store);
    m.sample(3, 0x9e37_79b9_7f4a_7c15);
    // Not a multiple of 8: counted exactly, the frames would not be one.
    const SENT: u64 = 4001;
    let (f4, f6) = (v4(PORT), v6(6, 0));
    for i in 0..SENT {
        assert_eq!(run(&p, &host(f4.clone()), &mut m), 0);
        assert_eq!(run(&p, &host(f6.clone()), &mut m), 0);
        if i % 100 == 0 {
            assert_eq!(run(&p, &host(arp()), &mut m), u64::from(SNAP));
            assert_eq!(run(&p, &host(v6(58, 136)), &mut m), u64::from(SNAP));
        }
    }
    assert!(m.seen() >= 2 * SENT + 82, "{}", m.seen());
    let c = m.counts();
    assert_eq!(c.len(), 2, "{c:?}");
    for (k, frames, bytes, _) in c {
        let len = if k.dst.is_ipv4() { f4.len() } else { f6.len() } as u64;
        // 500 kept on average, a standard deviation of 21: 4 of them either way.
        assert_eq!(frames % 8, 0, "{frames}");
        assert!((3400..=4600).contains(&frames), "{frames} of {SENT}");
        assert_eq!(bytes, frames * len);
    }
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
        gso_segs: 0,
    };
    assert_eq!(run(&p, &off, &mut m), 0);
    // Both: the offloaded one names the VLAN, the one in the frame moves the header.
    let both = Skb {
        data: tagged(&v4(PORT), 7),
        pkt_type: 0,
        vlan: Some((300, 0x8100)),
        gso_segs: 0,
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
        gso_segs: 0,
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
        gso_segs: 0,
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
        gso_segs: 0,
    };
    assert_eq!(run(&p, &skb, &mut m), 0);
    assert_eq!(m.counts().len(), 1);
    assert!(counting_program(
        &vec![PORT; MAX_HOST_MACS + 1],
        SNAP,
        MAP_FD,
        store,
        RATIO_FD
    )
    .is_err());
    assert!(counting_program(&[], u32::MAX, MAP_FD, store, RATIO_FD).is_err());
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
