//! Tests of `socket.rs`: ring geometry checks (no root) and a live capture over a veth pair in a
//! private network namespace (root only).

use super::*;
use crate::capture::frame::tests::{arp_frame, ipv4_frame};
use crate::capture::frame::Frame;
use std::time::Duration;

#[test]
fn config_validation() {
    assert!(RingConfig::default().validate().is_ok());
    let bad = [
        RingConfig {
            block_size: 1000,
            ..RingConfig::default()
        },
        RingConfig {
            block_count: 0,
            ..RingConfig::default()
        },
        RingConfig {
            frame_size: 250,
            ..RingConfig::default()
        },
        RingConfig {
            frame_size: 64,
            ..RingConfig::default()
        },
        RingConfig {
            snap_len: 0,
            ..RingConfig::default()
        },
        RingConfig {
            block_count: 8192,
            ..RingConfig::default()
        },
    ];
    for c in bad {
        assert!(c.validate().is_err(), "{c:?}");
    }
    // Errors name the interface, and a bad config fails before any socket is made.
    let e = CaptureSocket::open("eth9", 9, &[], &bad[0]).unwrap_err();
    assert!(e.to_string().contains("eth9 (ifindex 9)"), "{e}");
    let e = CaptureSocket::open("eth9", 0, &[], &RingConfig::default()).unwrap_err();
    assert!(e.to_string().contains("eth9 (ifindex 0)"), "{e}");
    let e =
        CaptureSocket::open_by_name("rlbd-no-such-if0", &[], &RingConfig::default()).unwrap_err();
    assert!(e.to_string().contains("rlbd-no-such-if0"), "{e}");
}

pub(crate) mod lab;

use lab::*;

fn live() -> Result<(), String> {
    veth_pair()?;
    let cfg = small_ring();
    let mut lab = Lab {
        cap: CaptureSocket::open_by_name("cap0", &[CAP_MAC], &cfg).unwrap(),
        peer: CaptureSocket::open_by_name("peer0", &[PEER_MAC], &cfg).unwrap(),
        cap_arp: CaptureSocket::open_by_name("cap0", &[], &cfg).unwrap(),
    };
    assert_eq!(lab.cap.name(), "cap0");
    assert!(lab.cap.ifindex() > 0);
    assert!(!lab.cap.pending());
    assert_eq!(lab.cap.sampling(), 1);
    filter_and_direction(&mut lab);
    sends(&mut lab);
    swap_macs(&mut lab);
    bounded_drains(&mut lab);
    statistics(&mut lab);
    sampling(&mut lab);
    overflow(&mut lab);
    Ok(())
}

fn filter_and_direction(lab: &mut Lab) {
    let Lab { cap, peer, cap_arp } = lab;
    // 1. From the peer: IPv4 to the listed MAC, IPv4 to another MAC, an IPv6 frame (not
    // Neighbor Discovery) to another MAC, and a broadcast ARP request. Only the first and the
    // last may arrive.
    let to_us = to_us();
    let to_other = to_other();
    let mut v6 = to_other.clone();
    v6[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    let req = arp_request(false);
    for f in [&to_us, &to_other, &v6, &req] {
        peer.send(f).unwrap();
    }
    let got = collect(
        cap,
        2,
        usize::MAX,
        Duration::from_secs(3),
        Duration::from_millis(100),
    );
    let mine = ours(&got);
    assert_eq!(mine.len(), 2, "{mine:?}");
    let (m, f, caplen) = &mine[0];
    assert_eq!(m.orig_len, 300);
    assert_eq!(*caplen, 96, "truncated to the snap length");
    assert_eq!(m.pkt_type, PACKET_HOST);
    assert!(!m.is_outgoing());
    assert_eq!(
        *f,
        Some(Frame::Ipv4 {
            src_mac: CLIENT,
            dst_mac: CAP_MAC,
            src_ip: CLIENT_IP,
            dst_ip: SERVER_IP
        })
    );
    let (m, f, caplen) = &mine[1];
    assert_eq!((m.orig_len, *caplen), (60, 60));
    assert_eq!(m.pkt_type, PACKET_BROADCAST);
    assert!(matches!(
        f,
        Some(Frame::Arp {
            op: 1,
            tpa: SERVER_IP,
            ..
        })
    ));
    only_what_the_filter_passes(&got);
    // The sender never sees its own frames; the ARP-only socket on cap0 saw the request.
    let peer_got = collect(
        peer,
        0,
        usize::MAX,
        Duration::ZERO,
        Duration::from_millis(50),
    );
    assert!(ours(&peer_got).is_empty(), "{peer_got:?}");
    let arp_got = collect(
        cap_arp,
        1,
        usize::MAX,
        Duration::from_secs(3),
        Duration::from_millis(50),
    );
    let mine = ours(&arp_got);
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert!(matches!(mine[0].1, Some(Frame::Arp { .. })));
}

fn sends(lab: &mut Lab) {
    let Lab { cap, peer, cap_arp } = lab;
    // 2. A reply sent by `cap` on cap0: the peer sees it as HOST, the other cap0 socket as
    // OUTGOING, and `cap` itself not at all.
    let reply = arp_frame(
        CAP_MAC, PEER_MAC, 2, CAP_MAC, SERVER_IP, CLIENT, CLIENT_IP, false,
    );
    cap.send(&reply).unwrap();
    let at_peer = collect(
        peer,
        1,
        usize::MAX,
        Duration::from_secs(3),
        Duration::from_millis(50),
    );
    let at_peer = ours(&at_peer);
    assert_eq!(at_peer.len(), 1, "{at_peer:?}");
    assert_eq!(at_peer[0].0.pkt_type, PACKET_HOST);
    assert!(matches!(at_peer[0].1, Some(Frame::Arp { op: 2, .. })));
    let outgoing = ours(&collect(
        cap_arp,
        1,
        usize::MAX,
        Duration::from_secs(3),
        Duration::from_millis(50),
    ));
    assert_eq!(outgoing.len(), 1, "{outgoing:?}");
    assert!(outgoing[0].0.is_outgoing());
    assert_eq!(outgoing[0].0.orig_len, 60);
    let own = ours(&collect(
        cap,
        0,
        usize::MAX,
        Duration::ZERO,
        Duration::from_millis(50),
    ));
    assert!(own.is_empty(), "{own:?}");
}

fn swap_macs(lab: &mut Lab) {
    let Lab { cap, peer, .. } = lab;
    let to_us = to_us();
    let to_other = to_other();
    // 3. Swap the MAC set: now only IPv4 to OTHER passes (seen as OTHERHOST).
    cap.set_macs(&[OTHER]).unwrap();
    peer.send(&to_us).unwrap();
    peer.send(&to_other).unwrap();
    let mine = ours(&collect(
        cap,
        1,
        usize::MAX,
        Duration::from_secs(3),
        Duration::from_millis(100),
    ));
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0].0.pkt_type, PACKET_OTHERHOST);
    assert!(matches!(
        mine[0].1,
        Some(Frame::Ipv4 { dst_mac: OTHER, .. })
    ));
    cap.set_macs(&[CAP_MAC, OTHER]).unwrap();
}

fn bounded_drains(lab: &mut Lab) {
    let Lab { cap, peer, .. } = lab;
    // 4. Bounded drains resume where they stopped.
    for i in 0..7u8 {
        let mut f = ipv4_frame(
            CLIENT,
            CAP_MAC,
            CLIENT_IP,
            SERVER_IP,
            false,
            100 + usize::from(i),
        );
        f[40] = i;
        peer.send(&f).unwrap();
    }
    let got = collect(cap, 7, 2, Duration::from_secs(3), Duration::from_millis(50));
    let lens: Vec<u32> = ours(&got).iter().map(|(m, _, _)| m.orig_len).collect();
    assert_eq!(lens, (100..107).collect::<Vec<u32>>());
    let mut n = 0;
    assert_eq!(cap.drain(0, |_, _| n += 1), 0);
    assert_eq!(n, 0);
}

fn statistics(lab: &mut Lab) {
    let Lab { cap, .. } = lab;
    // 5. Statistics accumulate across reads (the kernel resets them on each read).
    let s1 = cap.stats().unwrap();
    // 2 (step 1) + 1 (step 3) + 7 (step 4) of ours, plus any noise that passed the filter.
    assert!(s1.packets >= 10, "{s1:?}");
    assert_eq!(s1.drops, 0);
    let s2 = cap.stats().unwrap();
    assert!(s2.packets >= s1.packets);
}

fn overflow(lab: &mut Lab) {
    let Lab { peer, .. } = lab;
    let to_us = to_us();
    // 6. Overflow a tiny ring (2 one-page blocks): the excess is counted as drops, what was
    // kept is intact, and the ring works again once drained.
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u32;
    let tiny_cfg = RingConfig {
        block_size: page,
        block_count: 2,
        ..small_ring()
    };
    let mut tiny = CaptureSocket::open_by_name("cap0", &[CAP_MAC], &tiny_cfg).unwrap();
    for i in 0..200usize {
        peer.send(&ipv4_frame(
            CLIENT,
            CAP_MAC,
            CLIENT_IP,
            SERVER_IP,
            false,
            200 + i,
        ))
        .unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    let st = tiny.stats().unwrap();
    assert!(st.packets >= 200, "{st:?}");
    assert!(st.drops > 0, "{st:?}");
    let kept = ours(&collect(
        &mut tiny,
        usize::MAX,
        usize::MAX,
        Duration::from_millis(100),
        Duration::ZERO,
    ));
    eprintln!("tiny ring overflow: {st:?}, kept {}", kept.len());
    assert!(!kept.is_empty());
    assert_eq!(kept.len() as u64, st.packets - st.drops, "{st:?}");
    // Oldest first, strictly in order, and without gaps inside what was kept.
    let lens: Vec<u32> = kept.iter().map(|(m, _, _)| m.orig_len).collect();
    assert!(lens.windows(2).all(|w| w[1] == w[0] + 1), "{lens:?}");
    assert_eq!(lens[0], 200);
    peer.send(&to_us).unwrap();
    let after = ours(&collect(
        &mut tiny,
        1,
        usize::MAX,
        Duration::from_secs(3),
        Duration::ZERO,
    ));
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].0.orig_len, 300);
    let st2 = tiny.stats().unwrap();
    assert_eq!(st2.drops, st.drops, "{st2:?}");
    assert!(
        st2.packets > st.packets,
        "accumulated: {st2:?} after {st:?}"
    );
}

/// Root only: a veth pair in a private network namespace, frames sent from one end and
/// captured on the other.
#[test]
fn live_veth_capture() {
    crate::test_support::in_own_thread("live_veth_capture", live);
}

/// Sampling: one IPv4 frame in N kept (with weight N), every ARP frame kept; frames kept before
/// a change of ratio keep their old weight; the MAC set and the ratio are independent.
fn sampling(lab: &mut Lab) {
    let Lab { cap, peer, .. } = lab;
    let v4 = |i: usize| ipv4_frame(CLIENT, CAP_MAC, CLIENT_IP, SERVER_IP, false, 100 + i % 900);
    let req = arp_request(false);
    assert!(cap.set_sampling(3).is_err());
    assert_eq!(cap.sampling(), 1, "a refused ratio leaves the old one");
    cap.set_sampling(8).unwrap();
    assert_eq!(cap.sampling(), 8);
    for i in 0..1600 {
        peer.send(&v4(i)).unwrap();
        if i % 80 == 0 {
            peer.send(&req).unwrap();
        }
    }
    let got = ours(&collect(
        cap,
        300,
        usize::MAX,
        Duration::from_secs(3),
        Duration::from_millis(100),
    ));
    let arps = got
        .iter()
        .filter(|(_, f, _)| matches!(f, Some(Frame::Arp { .. })))
        .count();
    let kept: Vec<&FrameMeta> = got
        .iter()
        .filter(|(_, f, _)| matches!(f, Some(Frame::Ipv4 { .. })))
        .map(|(m, _, _)| m)
        .collect();
    assert_eq!(arps, 20, "ARP is never sampled");
    // Binomial(1600, 1/8): mean 200, standard deviation 13.2.
    assert!(
        (120..=280).contains(&kept.len()),
        "kept {} of 1600",
        kept.len()
    );
    assert!(kept
        .iter()
        .all(|m| m.weight == 8 && m.bytes() == u64::from(m.orig_len) * 8));
    cap.set_macs(&[CAP_MAC]).unwrap();
    assert_eq!(cap.sampling(), 8, "a new MAC set keeps the ratio");

    // 50 frames kept exactly and left in the ring, then 400 sampled 1 in 4: the first 50 keep
    // weight 1 though they are read after the change.
    cap.set_sampling(1).unwrap();
    for i in 0..50 {
        peer.send(&v4(i)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(30));
    cap.set_sampling(4).unwrap();
    for i in 0..400 {
        peer.send(&v4(i)).unwrap();
    }
    let got = ours(&collect(
        cap,
        100,
        usize::MAX,
        Duration::from_secs(3),
        Duration::from_millis(100),
    ));
    let weights: Vec<u32> = got.iter().map(|(m, _, _)| m.weight).collect();
    assert!(weights.len() >= 90, "{weights:?}");
    assert!(weights[..50].iter().all(|w| *w == 1), "{weights:?}");
    assert!(weights[50..].iter().all(|w| *w == 4), "{weights:?}");
    cap.set_sampling(1).unwrap();
}

#[test]
fn an_interface_index_by_name_or_an_error_naming_it() {
    assert!(if_index("lo").unwrap() > 0);
    let e = if_index("rlbd-none0").unwrap_err();
    assert!(e.to_string().starts_with("interface rlbd-none0: "), "{e}");
    let e = if_index("lo\0").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
}
