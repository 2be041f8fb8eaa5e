//! The guests' programs run in the interpreter (`vm.rs`): every branch, untagged, tagged in
//! the frame and with the tag taken out; their shape; the counters' sums and deltas.

mod vm;

use super::program::{TC_ACT_REDIRECT, TC_ACT_SHOT, TC_ACT_UNSPEC};
use super::*;
use crate::capture::ebpf::insn::*;
use vm::{run, Maps, Skb, FDS};

const GUEST: Mac = Mac(0x02, 0x47, 0x53, 0x54, 0x00, 0x01);
const OTHER_GUEST: Mac = Mac(0x02, 0x47, 0x53, 0x54, 0x00, 0x02);
const STRANGER: Mac = Mac(0x02, 0x47, 0x53, 0x54, 0x00, 0x99);
const FAR: Mac = Mac(0x02, 0x47, 0x53, 0x54, 0x00, 0x98);
/// Not a guest, but its MAC ends as `GUEST`'s: the filter lets it on to the lookup.
const LOOKALIKE: Mac = Mac(0x02, 0x99, 0x00, 0x00, 0x00, 0x01);
const SLAVE_A: u32 = 7;
const SLAVE_B: u32 = 9;
const BROADCAST: Mac = Mac(0xff, 0xff, 0xff, 0xff, 0xff, 0xff);

/// How the frame's VLAN reaches the program.
#[derive(Debug, Clone, Copy)]
enum Tag {
    None,
    InFrame(u16),
    TakenOut(u16),
}

impl Tag {
    fn vlan(self) -> u16 {
        match self {
            Tag::None => 0,
            Tag::InFrame(v) | Tag::TakenOut(v) => v,
        }
    }
    fn in_frame(self) -> usize {
        match self {
            Tag::InFrame(_) => 4,
            _ => 0,
        }
    }
}

const TAGS: [Tag; 3] = [Tag::None, Tag::InFrame(5), Tag::TakenOut(5)];

/// A frame from `src` to `dst` carrying `l3` (ethertype `ethertype`), tagged as `tag` says.
fn frame(dst: Mac, src: Mac, tag: Tag, ethertype: u16, l3: &[u8]) -> Skb {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&src.octets());
    if let Tag::InFrame(v) = tag {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&(0x2000 | v).to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    let mut skb = Skb::new(f);
    if let Tag::TakenOut(v) = tag {
        skb.vlan = Some((0x2000 | v, 0x8100));
    }
    skb.pkt_type = if dst == BROADCAST { 1 } else { 3 };
    skb
}

/// An IPv4 packet: `options` bytes of IP options, TCP (a 32-byte header) or UDP, `data` bytes.
fn ipv4(options: usize, tcp: bool, data: usize) -> Vec<u8> {
    let mut p = vec![0u8; 20 + options];
    p[0] = 0x40 | ((20 + options) / 4) as u8;
    p[9] = if tcp { 6 } else { 17 };
    l4(&mut p, tcp, data);
    p
}

fn ipv6(tcp: bool, data: usize) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[6] = if tcp { 6 } else { 17 };
    l4(&mut p, tcp, data);
    p
}

fn l4(p: &mut Vec<u8>, tcp: bool, data: usize) {
    if tcp {
        let mut t = [0u8; 32];
        t[12] = 8 << 4;
        p.extend_from_slice(&t);
    } else {
        p.extend_from_slice(&[0; 8]);
    }
    p.extend(std::iter::repeat_n(0xab, data));
}

fn egress() -> Vec<Insn> {
    guest_egress_program(FDS).unwrap()
}

fn ingress(port: u32, slot: usize) -> Vec<Insn> {
    guest_ingress_program(FDS, port, slot).unwrap()
}

fn pinned(tag: Tag) -> Maps {
    let mut m = Maps::new(4);
    m.pin(GuestKey::new(GUEST, tag.vlan()), SLAVE_B, 2);
    m.pin(GuestKey::new(OTHER_GUEST, tag.vlan()), SLAVE_A, 3);
    m
}

#[test]
fn a_pinned_guests_frames_leave_through_its_slave_counted() {
    for tag in TAGS {
        let mut m = pinned(tag);
        let skb = frame(BROADCAST, GUEST, tag, 0x0806, &[0; 28]);
        let r = run(&egress(), &skb, &mut m);
        assert_eq!(r.verdict, TC_ACT_REDIRECT, "{tag:?}");
        assert_eq!(m.redirect, Some((u64::from(SLAVE_B), 0)), "{tag:?}");
        let c = m.counters(2);
        assert_eq!((c.tx_packets, c.tx_bytes), (1, skb.data.len() as u64));
        // A TSO packet counts as its segments.
        let mut big = frame(STRANGER, GUEST, tag, 0x0800, &ipv4(0, true, 4000));
        big.gso_segs = 3;
        assert_eq!(run(&egress(), &big, &mut m).verdict, TC_ACT_REDIRECT);
        let c = m.counters(2);
        assert_eq!(c.tx_packets, 4, "{tag:?}");
        assert_eq!(c.tx_bytes, (skb.data.len() + big.data.len()) as u64);
        assert_eq!(m.counters(3), GuestCounters::default());
    }
}

#[test]
fn other_frames_leave_untouched_after_one_lookup() {
    for tag in TAGS {
        let mut m = pinned(tag);
        // Not pinned, on another VLAN than the pin's, an 802.1ad tag taken out, a runt.
        let mut qinq = frame(STRANGER, GUEST, Tag::None, 0x0800, &ipv4(0, false, 10));
        qinq.vlan = Some((tag.vlan(), 0x88a8));
        let other_vlan = match tag {
            Tag::None => Tag::TakenOut(5),
            _ => Tag::None,
        };
        let frames = [
            frame(GUEST, STRANGER, tag, 0x0800, &ipv4(0, false, 10)),
            frame(GUEST, LOOKALIKE, tag, 0x0800, &ipv4(0, false, 10)),
            frame(STRANGER, GUEST, other_vlan, 0x0800, &ipv4(0, false, 10)),
            qinq,
            Skb::new(GUEST.octets().repeat(2)[..11].to_vec()),
        ];
        for skb in &frames {
            let r = run(&egress(), skb, &mut m);
            assert_eq!(r.verdict, TC_ACT_UNSPEC, "{tag:?} {skb:?}");
        }
        assert_eq!(m.redirect, None);
        assert_eq!(m.total(), GuestCounters::default());
    }
    // The cost the program documents: a frame from a MAC that ends as no guest's does (the
    // host's own, every ACK it sends) in a handful of instructions, tagged or not; one whose
    // MAC ends as a guest's, untagged and tagged in the frame, after the lookup.
    let mut m = pinned(Tag::None);
    for tag in [Tag::None, Tag::InFrame(5)] {
        let host = frame(GUEST, STRANGER, tag, 0x0800, &ipv4(0, false, 10));
        assert_eq!(run(&egress(), &host, &mut m).steps, 13, "{tag:?}");
    }
    let plain = frame(GUEST, LOOKALIKE, Tag::None, 0x0800, &ipv4(0, false, 10));
    assert_eq!(run(&egress(), &plain, &mut m).steps, 34);
    let tagged = frame(
        GUEST,
        LOOKALIKE,
        Tag::InFrame(5),
        0x0800,
        &ipv4(0, false, 10),
    );
    assert_eq!(run(&egress(), &tagged, &mut m).steps, 42);
}

#[test]
fn a_guests_own_frame_from_the_switch_moved_it_or_is_a_reflection() {
    for tag in TAGS {
        // Pinned to this port (B): it moved away; counted, passed.
        let mut m = pinned(tag);
        let rarp = frame(BROADCAST, GUEST, tag, 0x8035, &[0; 28]);
        let r = run(&ingress(SLAVE_B, 1), &rarp, &mut m);
        assert_eq!(r.verdict, TC_ACT_UNSPEC, "{tag:?}");
        assert_eq!(m.counters(2).seen_from_switch, 1);
        assert_eq!(m.counters(2).reflections, 0);
        // Pinned to another port: the switch flooded its broadcast back; dropped.
        let r = run(&ingress(SLAVE_A, 0), &rarp, &mut m);
        assert_eq!(r.verdict, TC_ACT_SHOT, "{tag:?}");
        let c = m.counters(2);
        assert_eq!((c.seen_from_switch, c.reflections), (1, 1), "{tag:?}");
        // A unicast one too (to another guest pinned elsewhere: the source decides).
        let uni = frame(OTHER_GUEST, GUEST, tag, 0x0800, &ipv4(0, false, 10));
        assert_eq!(run(&ingress(SLAVE_A, 0), &uni, &mut m).verdict, TC_ACT_SHOT);
        assert_eq!(m.counters(2).reflections, 2);
        assert_eq!(m.counters(3), GuestCounters::default());
    }
}

#[test]
fn frames_for_a_guest_count_on_its_port_and_floods_elsewhere_drop() {
    for tag in TAGS {
        let mut m = pinned(tag);
        let skb = frame(GUEST, STRANGER, tag, 0x0800, &ipv4(0, false, 100));
        let r = run(&ingress(SLAVE_B, 1), &skb, &mut m);
        assert_eq!(r.verdict, TC_ACT_UNSPEC, "{tag:?}");
        let c = m.counters(2);
        assert_eq!(c.rx[1], (1, skb.data.len() as u64), "{tag:?}");
        assert_eq!(c.rx[0], (0, 0));
        assert_eq!(c.floods, 0);
        // The same frame flooded to a second promiscuous port: dropped.
        let r = run(&ingress(SLAVE_A, 0), &skb, &mut m);
        assert_eq!(r.verdict, TC_ACT_SHOT, "{tag:?}");
        let c = m.counters(2);
        assert_eq!((c.floods, c.rx[0], c.rx[1].0), (1, (0, 0), 1), "{tag:?}");
    }
}

#[test]
fn everything_else_passes_uncounted() {
    for tag in TAGS {
        let mut m = pinned(tag);
        let mut to_host = frame(GUEST, STRANGER, tag, 0x0800, &ipv4(0, false, 10));
        to_host.pkt_type = 0;
        let other_vlan = match tag {
            Tag::None => Tag::InFrame(6),
            _ => Tag::None,
        };
        let frames = [
            frame(FAR, STRANGER, tag, 0x0800, &ipv4(0, false, 10)),
            // For the guest, but for this host's MAC as the port sees it (never a guest's).
            to_host,
            frame(GUEST, STRANGER, other_vlan, 0x0800, &ipv4(0, false, 10)),
            frame(BROADCAST, STRANGER, tag, 0x0806, &[0; 28]),
            Skb::new(vec![0xff; 13]),
        ];
        for skb in &frames {
            let r = run(&ingress(SLAVE_A, 0), skb, &mut m);
            assert_eq!(r.verdict, TC_ACT_UNSPEC, "{tag:?} {skb:?}");
        }
        assert_eq!(m.total(), GuestCounters::default(), "{tag:?}");
    }
    // A broadcast (the frame most often not a guest's on the active port) and the host's own
    // unicast cost no lookup when no guest's MAC ends as their source does; another host's
    // unicast (a promiscuous port) none either when no guest's ends as its destination does.
    let mut m = pinned(Tag::None);
    let arp = frame(BROADCAST, STRANGER, Tag::None, 0x0806, &[0; 28]);
    assert_eq!(run(&ingress(SLAVE_A, 0), &arp, &mut m).steps, 21);
    let mut to_host = frame(FAR, STRANGER, Tag::None, 0x0800, &ipv4(0, false, 10));
    to_host.pkt_type = 0;
    assert_eq!(run(&ingress(SLAVE_A, 0), &to_host, &mut m).steps, 21);
    let far = frame(FAR, STRANGER, Tag::None, 0x0800, &ipv4(0, false, 10));
    assert_eq!(run(&ingress(SLAVE_A, 0), &far, &mut m).steps, 31);
    // MACs that end as a guest's: a lookup each.
    let alike = frame(LOOKALIKE, LOOKALIKE, Tag::None, 0x0800, &ipv4(0, false, 10));
    let r = run(&ingress(SLAVE_A, 0), &alike, &mut m);
    assert_eq!((r.verdict, r.steps), (TC_ACT_UNSPEC, 51));
    assert_eq!(m.total(), GuestCounters::default());
}

/// A GRO packet of `segs` counts as the frames it merged, each with its headers.
#[test]
fn gro_packets_count_their_segments_with_their_headers() {
    for tag in TAGS {
        let eth = 14 + tag.in_frame();
        let cases = [
            (ipv4(0, true, 3000), eth + 20 + 32, 0),
            // IP options: TCP's offset is read through the helper.
            (ipv4(4, true, 3000), eth + 24 + 32, 1),
            (ipv4(0, false, 3000), eth + 20 + 8, 0),
            (ipv6(true, 3000), eth + 40 + 32, 0),
            (ipv6(false, 3000), eth + 40 + 8, 0),
        ];
        for (l3, hdr, helper) in cases {
            let ethertype = if l3[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
            let mut m = pinned(tag);
            let mut skb = frame(GUEST, STRANGER, tag, ethertype, &l3);
            skb.gso_segs = 3;
            assert_eq!(run(&ingress(SLAVE_B, 4), &skb, &mut m).verdict, -1);
            let want = (3, (skb.data.len() + 2 * hdr) as u64);
            assert_eq!(m.counters(2).rx[4], want, "{tag:?} {hdr}");
            assert_eq!(m.load_bytes, helper, "{tag:?} {hdr}");
            // Headers outside the linear head are pulled in first.
            let mut m = pinned(tag);
            skb.linear = Some(eth);
            run(&ingress(SLAVE_B, 4), &skb, &mut m);
            assert_eq!(m.counters(2).rx[4], want, "{tag:?} {hdr} pulled");
            assert_eq!(m.pulls, 1);
        }
    }
}

#[test]
fn a_port_slot_out_of_range_is_refused() {
    assert!(guest_ingress_program(FDS, SLAVE_A, MAX_PORTS).is_err());
    assert!(guest_ingress_program(FDS, u32::MAX, 0).is_err());
}

/// Every exit returns a verdict the hook knows (no verdict, drop, or the redirect helper's),
/// every jump goes forward and lands inside, the only maps are the guests', and nothing is
/// written through a packet pointer.
fn well_formed(p: &[Insn], verdicts: &[i32]) {
    assert!(p.len() < 4096, "{} instructions", p.len());
    assert_eq!(p.last().unwrap().code, CLASS_JMP | OP_EXIT);
    for (pc, i) in p.iter().enumerate() {
        let op = i.code & 0xf0;
        if i.code == CLASS_JMP | OP_EXIT {
            let before = p[pc - 1];
            if before.code == CLASS_JMP | OP_CALL {
                assert_eq!(before.imm, Helper::Redirect as i32, "exit at {pc}");
            } else {
                assert_eq!(before.code, CLASS_ALU64 | 0xb0 | SRC_K, "exit at {pc}");
                assert!(verdicts.contains(&before.imm), "exit at {pc}");
            }
        } else if matches!(i.class(), CLASS_JMP | CLASS_JMP32) && op != OP_CALL {
            let t = pc as i64 + 1 + i64::from(i.off);
            assert!((pc as i64 + 1..p.len() as i64).contains(&t), "jump at {pc}");
        }
        if i.code == CLASS_LD | MODE_IMM | 0x18 && i.src() == PSEUDO_MAP_FD {
            assert!([FDS.pins, FDS.counters].contains(&i.imm), "map at {pc}");
        }
        if i.code == CLASS_LD | MODE_IMM | 0x18 && i.src() == PSEUDO_MAP_VALUE {
            assert_eq!((i.imm, p[pc + 1].imm), (FDS.filter, 0), "value at {pc}");
        }
        if matches!(i.class(), CLASS_ST | CLASS_STX) {
            assert!(![2, 4].contains(&i.dst()), "packet write at {pc}");
        }
    }
}

#[test]
fn the_programs_are_well_formed() {
    well_formed(&egress(), &[TC_ACT_UNSPEC]);
    for slot in [0, MAX_PORTS - 1] {
        well_formed(&ingress(SLAVE_A, slot), &[TC_ACT_UNSPEC, TC_ACT_SHOT]);
    }
    let redirects = |p: Vec<Insn>| {
        p.iter()
            .any(|i| i.code == CLASS_JMP | OP_CALL && i.imm == Helper::Redirect as i32)
    };
    assert!(redirects(egress()));
    assert!(!redirects(ingress(SLAVE_A, 0)));
}

#[test]
fn counters_sum_over_cpus_and_diff() {
    let mut rec = vec![0u8; RECORD * 2 + 5];
    let put = |rec: &mut Vec<u8>, cpu: usize, at: i16, v: u64| {
        let at = cpu * RECORD + at as usize;
        rec[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    };
    put(&mut rec, 0, TX_PACKETS, 3);
    put(&mut rec, 1, TX_PACKETS, 4);
    put(&mut rec, 1, RX + 16 * 15 + 8, 1500);
    put(&mut rec, 0, SEEN, u64::MAX);
    put(&mut rec, 1, SEEN, 1);
    let c = GuestCounters::sum(&rec);
    assert_eq!(c.tx_packets, 7);
    assert_eq!(c.rx[15], (0, 1500));
    assert_eq!(c.seen_from_switch, u64::MAX);
    let earlier = GuestCounters {
        tx_packets: 5,
        floods: 9,
        ..GuestCounters::default()
    };
    let d = c.since(&earlier);
    assert_eq!((d.tx_packets, d.floods, d.rx[15].1), (2, 0, 1500));
    // Pinned again since: the counters started over.
    let later = GuestCounters {
        tx_packets: 1,
        ..GuestCounters::default()
    };
    assert_eq!(later.since(&c).tx_packets, 1);
    assert_eq!(GuestKey::new(GUEST, 0x0102).encode()[..6], GUEST.octets());
}
