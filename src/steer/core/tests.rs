//! One test per rule of the steering core, with a bond of three ports and one client the kernel
//! confirms for IPv4 and IPv6.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::*;
use crate::capture::NdKind;
use crate::host::testing::*;
use crate::host::Talk;
use crate::netlink::NlEvent;
use crate::policy::reassert::*;
use crate::steer::arp::steering_update;
use crate::steer::nd::neighbor_advertisement;

use super::fixture::*;

/// The fixture's client as the core keys it (untagged).
const CLIENT: ClientKey = ClientKey::untagged(crate::host::testing::CLIENT);

#[test]
fn a_move_sends_at_once_then_repeats_and_stops() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    w.with(|ctx| {
        assert!(s.apply_move(
            0,
            CLIENT,
            &talk(),
            &mv(0, 1, Reason::Overload),
            "why",
            ctx,
            &mut out
        ))
    });
    assert_eq!(
        sends(&out),
        vec![(1, V4), (1, V6)],
        "both families, from p1, now"
    );
    assert_eq!(logs(&out, Level::Info).len(), 1);
    assert!(logs(&out, Level::Info)[0].contains("p0 -> p1"));
    assert_eq!(s.next_due(), Some(250));
    for (t, n) in [(249, 0), (250, 2), (500, 2), (10_000, 0)] {
        let mut out = Vec::new();
        w.with(|ctx| s.on_timer(t, ctx, &mut out));
        assert_eq!(sends(&out).len(), n, "at {t} ms");
    }
    assert_eq!(s.next_due(), None);
    assert_eq!(s.counters().moves_overload, 1);
    assert_eq!(s.counters().sent, 6);
}

#[test]
fn the_frames_are_the_gratuitous_arp_and_the_override_na_from_the_new_port() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    make_move(&mut s, &w, 0, mv(0, 2, Reason::Overload), &mut out);
    let frames: Vec<&Vec<u8>> = out
        .iter()
        .filter_map(|a| match a {
            Action::Send { frame, .. } => Some(frame),
            _ => None,
        })
        .collect();
    assert_eq!(
        frames[0].as_slice(),
        &steering_update(CLIENT.mac, P[2], SERVER)[..]
    );
    assert_eq!(
        frames[1].as_slice(),
        &neighbor_advertisement(CLIENT.mac, CLIENT6, P[2], SERVER6)[..]
    );
}

#[test]
fn a_client_the_kernel_does_not_confirm_is_never_moved() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    let stranger = ClientKey::untagged(Mac(2, 0x66, 0, 0, 0, 1));
    let moved = w.with(|ctx| {
        s.apply_move(
            0,
            stranger,
            &talk(),
            &mv(0, 1, Reason::Overload),
            "",
            ctx,
            &mut out,
        )
    });
    assert!(!moved);
    assert!(sends(&out).is_empty());
    assert_eq!(s.moved_count(), 0);
}

#[test]
fn no_frame_after_the_kernel_stops_confirming_the_client() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    make_move(&mut s, &w, 0, mv(0, 1, Reason::Overload), &mut out);
    w.host
        .apply(&neigh(BOND, CLIENT_IP.into(), CLIENT.mac, libc::NUD_FAILED));
    let mut out = Vec::new();
    w.with(|ctx| s.on_timer(250, ctx, &mut out));
    assert_eq!(
        sends(&out),
        vec![(1, V6)],
        "IPv4 entry failed; IPv6 still confirmed"
    );
}

#[test]
fn an_address_that_stopped_being_the_servers_is_no_longer_claimed() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    make_move(&mut s, &w, 0, mv(0, 1, Reason::Overload), &mut out);
    let NlEvent::Addr(a) = addr(BOND, "198.18.0.1/24") else {
        unreachable!()
    };
    w.host.apply(&NlEvent::AddrRemoved(a));
    let mut out = Vec::new();
    w.with(|ctx| s.on_timer(250, ctx, &mut out));
    assert_eq!(sends(&out), vec![(1, V6)]);
}

#[test]
fn dry_run_decides_and_logs_but_sends_nothing() {
    let w = World::new();
    let mut s = Steerer::new(SteerConfig {
        dry_run: true,
        ..cfg()
    });
    let mut out = Vec::new();
    w.with(|ctx| {
        s.apply_move(
            0,
            CLIENT,
            &talk(),
            &mv(0, 1, Reason::Overload),
            "",
            ctx,
            &mut out,
        );
        s.on_timer(5000, ctx, &mut out);
    });
    assert!(sends(&out).is_empty());
    assert!(logs(&out, Level::Info)[0].starts_with("dry run: would move"));
    assert!(s.moved(&CLIENT).is_some());
}

#[test]
fn hold_down_refuses_overload_and_room_moves_but_not_failover() {
    let w = World::new();
    let mut s = moved_to_p1(&w);
    let mut out = Vec::new();
    let hold = cfg().policy.hold_down * 1000;
    w.with(|ctx| {
        assert!(s.held(&CLIENT, hold - 1));
        for reason in [Reason::Overload, Reason::Room] {
            assert!(!s.apply_move(
                hold - 1,
                CLIENT,
                &talk(),
                &mv(1, 2, reason),
                "",
                ctx,
                &mut out
            ));
        }
        assert!(s.apply_move(
            hold - 1,
            CLIENT,
            &talk(),
            &mv(1, 2, Reason::Failover),
            "",
            ctx,
            &mut out
        ));
        assert!(!s.held(&CLIENT, 2 * hold));
    });
    assert_eq!(s.moved(&CLIENT).unwrap().port, 2);
}

#[test]
fn the_hosts_arp_reply_with_another_ports_mac_is_answered_once_per_burst() {
    let w = World::new();
    let mut s = moved_to_p1(&w);
    let reply = ArpSeen {
        outgoing: true,
        op: 2,
        eth_src: P[0],
        eth_dst: CLIENT.mac,
        sha: P[0],
        spa: SERVER,
        tpa: CLIENT_IP,
        vlan: 0,
    };
    let mut out = Vec::new();
    w.with(|ctx| {
        // The same reply seen on three ports, twice.
        for _ in 0..6 {
            s.on_arp(2000, &reply, ctx, &mut out);
        }
        s.on_timer(3000, ctx, &mut out);
    });
    assert_eq!(s.moved(&CLIENT).unwrap().reasserts, 1);
    assert_eq!(
        sends(&out).len(),
        4,
        "two rounds (now + one repeat) of ARP and NA"
    );
    assert!(sends(&out).iter().all(|(p, _)| *p == 1));
    // A reply carrying p1's MAC (rlbd's own, or the right port's) is harmless.
    let mut out = Vec::new();
    let ok = ArpSeen {
        sha: P[1],
        eth_src: P[1],
        ..reply
    };
    w.with(|ctx| s.on_arp(4000, &ok, ctx, &mut out));
    assert!(s.next_due().is_none() && sends(&out).is_empty());
}

#[test]
fn the_hosts_multicast_na_re_asserts_ipv6_clients() {
    let w = World::new();
    let mut s = moved_to_p1(&w);
    let na = NdSeen {
        outgoing: true,
        kind: NdKind::Na,
        eth_src: P[0],
        eth_dst: Mac(0x33, 0x33, 0, 0, 0, 1),
        target: SERVER6,
        lladdr: Some(P[0]),
        src_ip: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1),
        dst_ip: Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
        vlan: 0,
    };
    let mut out = Vec::new();
    w.with(|ctx| {
        s.on_nd(2000, &na, ctx, &mut out);
        s.on_timer(2020, ctx, &mut out);
    });
    assert_eq!(s.counters().reasserts, 1);
    assert_eq!(sends(&out).len(), 2);
}

#[test]
fn the_per_client_limit_holds_under_a_storm_of_re_assertions() {
    let w = World::new();
    let mut s = moved_to_p1(&w);
    let req = ArpSeen {
        outgoing: false,
        op: 1,
        eth_src: CLIENT.mac,
        eth_dst: Mac::broadcast(),
        sha: CLIENT.mac,
        spa: CLIENT_IP,
        tpa: SERVER,
        vlan: 0,
    };
    let mut out = Vec::new();
    w.with(|ctx| {
        for t in (2000..3000).step_by(10) {
            s.on_arp(t, &req, ctx, &mut out);
            s.on_timer(t, ctx, &mut out);
        }
        s.on_timer(3000, ctx, &mut out);
    });
    // 8 a second, with a bucket that refilled over the second since the move's sends.
    let n = sends(&out).len();
    assert!((8..=16).contains(&n), "{n} frames in one second");
    assert!(s.counters().suppressed > 0);
}

#[test]
fn a_port_mac_change_re_asserts_the_clients_on_it() {
    let w = World::new();
    let mut s = moved_to_p1(&w);
    let mut out = Vec::new();
    w.with(|ctx| {
        s.on_port_mac_changed(2000, 0, ctx, &mut out);
        assert!(s.next_due().is_none(), "nobody on p0");
        s.on_port_mac_changed(2000, 1, ctx, &mut out);
    });
    assert_eq!(s.next_due(), Some(2020));
}

#[test]
fn idle_moves_are_forgotten_and_their_sends_dropped() {
    let w = World::new();
    let mut s = moved_to_p1(&w);
    let mut out = Vec::new();
    w.with(|ctx| s.forget_idle(30_000, |_| false, ctx, &mut out));
    assert!(s.moved(&CLIENT).is_some(), "not idle long enough");
    w.with(|ctx| s.forget_idle(60_000, |_| true, ctx, &mut out));
    assert!(s.moved(&CLIENT).is_some(), "still in the table");
    w.with(|ctx| s.forget_idle(60_000, |_| false, ctx, &mut out));
    assert!(s.moved(&CLIENT).is_none());
    assert_eq!(logs(&out, Level::Debug).len(), 1);
}

#[test]
fn rebalance_moves_off_an_overloaded_port_and_holds_the_moved() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let other = ClientKey::untagged(Mac(2, 0, 0, 0, 0, 0xc3));
    let mut ports = w.port_views();
    // Overloaded, not saturated (94%): the paper's walk, which stops at the first client that
    // stays (a saturated port's walk would look past it and move CLIENT).
    ports[0].rx_bps = 90e6;
    ports[0].overloaded = true;
    let clients = [
        ClientSnap {
            key: other,
            port: 0,
            rate_bps: 50e6,
            quiet_secs: 0,
            talk: Talk::default(),
        },
        ClientSnap {
            key: CLIENT,
            port: 0,
            rate_bps: 45e6,
            quiet_secs: 0,
            talk: talk(),
        },
    ];
    let mut out = Vec::new();
    // `other` is biggest, but the kernel does not confirm it: the planner is offered it as one
    // that stays, and walks no further (one client stays on the hot port).
    let made = w.with(|ctx| {
        s.rebalance(
            0,
            (&ports, &[]),
            &clients,
            &|_| "overload".into(),
            ctx,
            &mut out,
        )
    });
    assert!(made.is_empty());
    assert!(s.moved(&other).is_none());
    // Confirmed: now it moves.
    let mut w2 = World::new();
    w2.host.apply(&neigh(
        BOND,
        Ipv4Addr::new(198, 18, 0, 13).into(),
        other.mac,
        libc::NUD_REACHABLE,
    ));
    let made = w2.with(|ctx| {
        s.rebalance(
            0,
            (&ports, &[]),
            &clients,
            &|_| "overload".into(),
            ctx,
            &mut out,
        )
    });
    assert_eq!(made, vec![0]);
    assert!(s.held(&other, 1000));
    let again = w2.with(|ctx| {
        s.rebalance(
            1000,
            (&ports, &[]),
            &clients,
            &|_| "overload".into(),
            ctx,
            &mut out,
        )
    });
    assert!(
        again.is_empty(),
        "both held: the planner is offered nothing to move"
    );
}

#[test]
fn a_move_to_gather_room_is_counted_apart() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    assert!(make_move(&mut s, &w, 0, mv(1, 2, Reason::Room), &mut out));
    let c = s.counters();
    assert_eq!((c.moves_room, c.moves_overload), (1, 0));
    assert_eq!(s.moved(&CLIENT).unwrap().reason, Reason::Room);
}

#[test]
fn a_full_port_raises_saturated_and_max_fill_to_just_under_where_it_reads_and_says_so() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let configured = cfg().policy;
    assert_eq!(s.policy_in_force(), configured);
    let mut ports = w.port_views();
    ports[0].rx_bps = 0.97 * ports[0].capacity_bps;
    ports[0].overloaded = true;
    let mut out = Vec::new();
    // One second teaches nothing: the next must read as much.
    w.with(|ctx| s.rebalance(0, (&ports, &[]), &[], &|_| "overload".into(), ctx, &mut out));
    assert_eq!(s.policy_in_force(), configured);
    w.with(|ctx| {
        s.rebalance(
            1000,
            (&ports, &[]),
            &[],
            &|_| "overload".into(),
            ctx,
            &mut out,
        )
    });
    let tuned = s.policy_in_force();
    assert!((tuned.saturated - 0.95).abs() < 1e-9, "{tuned:?}");
    assert!((tuned.max_fill - 0.945).abs() < 1e-9, "{tuned:?}");
    assert_eq!(s.saturation_ceiling(), Some(0.97));
    let said = logs(&out, Level::Info);
    assert!(
        said.iter().any(|l| l.contains("full ports read 97.0%")
            && l.contains("saturated from 95.0%")
            && l.contains("up to 94.5%")),
        "{said:?}"
    );
    // Said once: the same reading again changes nothing worth a line.
    out.clear();
    w.with(|ctx| {
        s.rebalance(
            2000,
            (&ports, &[]),
            &[],
            &|_| "overload".into(),
            ctx,
            &mut out,
        )
    });
    assert!(logs(&out, Level::Info).is_empty());
}
