//! On plain ports a port's failure also moves the clients the host's own ARP and ND frames put
//! on it, counted or not: a client that resolved the server and has not sent yet is in no
//! client table, and nobody else will tell it.

use super::fixture::*;
use super::*;
use crate::capture::NdKind;
use crate::host::testing::{CLIENT_IP, SERVER, SERVER6};
use crate::policy::reassert::*;
use std::net::{Ipv4Addr, Ipv6Addr};

const CLIENT: ClientKey = ClientKey::untagged(crate::host::testing::CLIENT);

fn moves(out: &[Action]) -> Vec<String> {
    out.iter()
        .filter_map(|a| match a {
            Action::Log(Level::Info, _, m, _) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

fn sent_on(out: &[Action]) -> Vec<PortIndex> {
    out.iter()
        .filter_map(|a| match a {
            Action::Send { port, .. } => Some(*port),
            _ => None,
        })
        .collect()
}

/// p0 fails at `at`; `clients` is the client table as the daemon hands it in.
fn fail_p0(w: &mut World, s: &mut Steerer, at: u64, clients: &[ClientSnap]) -> Vec<Action> {
    w.usable[0] = false;
    let ports = w.port_views();
    let mut out = Vec::new();
    w.with(|ctx| s.failover(at, &[0], &ports, clients, ctx, &mut out));
    out
}

#[test]
fn a_client_the_host_answered_on_a_failed_port_is_moved_though_it_never_sent() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    w.with(|ctx| s.on_arp(1000, &reply_from(0), ctx, &mut out));
    assert!(out.is_empty(), "an answer alone sends nothing: {out:?}");
    let out = fail_p0(&mut w, &mut s, 5000, &[]);
    let m = s.moved(&CLIENT).expect("moved");
    assert_eq!(m.reason, Reason::Failover);
    assert_ne!(m.port, 0);
    // What the host paired in its answer is what the move claims.
    assert_eq!(
        m.claims,
        vec![Claim::V4 {
            client: CLIENT_IP,
            server: SERVER
        }]
    );
    assert_eq!(sent_on(&out), vec![m.port]);
    let lines = moves(&out);
    assert!(
        lines.len() == 1
            && lines[0].contains("failover: p0 is down (the host or rlbd told it to use that port"),
        "{lines:?}"
    );
}

#[test]
fn answers_on_another_port_a_counted_client_and_a_bond_leave_it_alone() {
    // Answered on p1 only: p0's failure is not its business.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    w.with(|ctx| s.on_arp(1000, &reply_from(1), ctx, &mut Vec::new()));
    let out = fail_p0(&mut w, &mut s, 5000, &[]);
    assert!(s.moved(&CLIENT).is_none() && out.is_empty(), "{out:?}");

    // Answered on p0, but its frames have arrived on p2 since (a second's rates): it is where
    // they arrive.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    w.with(|ctx| s.on_arp(1000, &reply_from(0), ctx, &mut Vec::new()));
    let counted = ClientSnap {
        key: CLIENT,
        port: 2,
        rate_bps: 1e6,
        quiet_secs: 0,
        talk: talk(),
    };
    let views = w.port_views();
    w.with(|ctx| {
        let why = |_: &crate::policy::Move| String::new();
        s.rebalance(3000, (&views, &[]), &[counted], &why, ctx, &mut Vec::new())
    });
    let out = fail_p0(&mut w, &mut s, 5000, &[counted]);
    assert!(s.moved(&CLIENT).is_none() && out.is_empty(), "{out:?}");

    // On a bond the driver keeps its own answers (follow_answers off).
    let mut w = World::new();
    let mut s = Steerer::new(SteerConfig {
        follow_answers: false,
        ..cfg()
    });
    w.with(|ctx| s.on_arp(1000, &reply_from(0), ctx, &mut Vec::new()));
    let out = fail_p0(&mut w, &mut s, 5000, &[]);
    assert!(s.moved(&CLIENT).is_none() && out.is_empty(), "{out:?}");
}

#[test]
fn a_round_answered_on_two_ports_fails_over_from_either_and_a_later_round_replaces_it() {
    // A broadcast request answered by p0 and p1 at once: the client holds one of the two.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    w.with(|ctx| {
        s.on_arp(1000, &reply_from(1), ctx, &mut Vec::new());
        s.on_arp(1001, &reply_from(0), ctx, &mut Vec::new());
    });
    fail_p0(&mut w, &mut s, 5000, &[]);
    assert!(s.moved(&CLIENT).is_some_and(|m| m.port != 0));

    // Re-resolved later on p1 alone: p0's failure leaves it.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    w.with(|ctx| {
        s.on_arp(1000, &reply_from(0), ctx, &mut Vec::new());
        s.on_arp(4000, &reply_from(1), ctx, &mut Vec::new());
    });
    fail_p0(&mut w, &mut s, 5000, &[]);
    assert!(s.moved(&CLIENT).is_none());
}

#[test]
fn a_broadcast_request_from_a_port_puts_every_answered_client_of_its_vlan_there() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    let ask = ArpSeen {
        op: 1,
        eth_dst: Mac::broadcast(),
        tpa: Ipv4Addr::new(198, 18, 0, 99),
        ..reply_from(0)
    };
    w.with(|ctx| {
        s.on_arp(1000, &reply_from(1), ctx, &mut Vec::new());
        // The host resolving another neighbour from p0: CLIENT, which has an entry for the
        // server, takes p0's MAC from it.
        s.on_arp(3000, &ask, ctx, &mut Vec::new());
    });
    fail_p0(&mut w, &mut s, 5000, &[]);
    assert!(s.moved(&CLIENT).is_some_and(|m| m.port != 0));
}

#[test]
fn rlbds_own_updates_and_frames_to_moved_clients_are_not_answers() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    // The gratuitous form rlbd sends: target address = sender address = the server's.
    let update = ArpSeen {
        tpa: SERVER,
        ..reply_from(0)
    };
    w.with(|ctx| s.on_arp(1000, &update, ctx, &mut Vec::new()));
    fail_p0(&mut w, &mut s, 5000, &[]);
    assert!(s.moved(&CLIENT).is_none());

    // A client rlbd moved to p1, then answered by the host on p0: the move re-asserts it (the
    // update goes out 20 ms later), and p0's failure does not move it again.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    assert!(make_move(
        &mut s,
        &w,
        0,
        mv(0, 1, Reason::Overload),
        &mut out
    ));
    w.with(|ctx| {
        s.on_timer(1000, ctx, &mut out);
        s.on_arp(1000, &reply_from(0), ctx, &mut out);
        s.on_timer(1020, ctx, &mut out);
    });
    assert_eq!(s.moved(&CLIENT).unwrap().reasserts, 1);
    let out = fail_p0(&mut w, &mut s, 5000, &[]);
    assert_eq!(s.moved(&CLIENT).unwrap().port, 1);
    assert_eq!(s.moved(&CLIENT).unwrap().reason, Reason::Overload);
    assert!(moves(&out).is_empty(), "{:?}", moves(&out));
}

#[test]
fn the_hosts_neighbor_advertisement_places_an_ipv6_client() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    let na = NdSeen {
        outgoing: true,
        kind: NdKind::Na,
        eth_src: P[0],
        eth_dst: CLIENT.mac,
        target: SERVER6,
        src_ip: SERVER6,
        dst_ip: crate::host::testing::CLIENT6,
        lladdr: Some(P[0]),
        vlan: 0,
    };
    w.with(|ctx| s.on_nd(1000, &na, ctx, &mut Vec::new()));
    fail_p0(&mut w, &mut s, 5000, &[]);
    let m = s.moved(&CLIENT).expect("moved");
    assert_ne!(m.port, 0);
    assert_eq!(
        m.claims,
        vec![Claim::V6 {
            client: crate::host::testing::CLIENT6,
            server: SERVER6
        }]
    );
    // A multicast NA from p1 afterwards: the client may hold p1's MAC as well.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    let all = NdSeen {
        eth_src: P[1],
        eth_dst: Mac(0x33, 0x33, 0, 0, 0, 1),
        dst_ip: Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
        lladdr: Some(P[1]),
        ..na
    };
    w.with(|ctx| {
        s.on_nd(1000, &na, ctx, &mut Vec::new());
        s.on_nd(2000, &all, ctx, &mut Vec::new());
    });
    w.usable[1] = false;
    let ports = w.port_views();
    w.with(|ctx| s.failover(5000, &[1], &ports, &[], ctx, &mut Vec::new()));
    assert!(s.moved(&CLIENT).is_some_and(|m| m.port != 1));
}

#[test]
fn a_solicitation_from_a_ports_link_local_address_places_nobody() {
    // The host probing the client from p0's link-local address: the client learns p0's MAC for
    // that address only, not for the server's addresses it talks to.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    let probe = NdSeen {
        outgoing: true,
        kind: NdKind::Ns,
        eth_src: P[0],
        eth_dst: CLIENT.mac,
        target: crate::host::testing::CLIENT6,
        src_ip: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0xf00),
        dst_ip: crate::host::testing::CLIENT6,
        lladdr: Some(P[0]),
        vlan: 0,
    };
    w.with(|ctx| s.on_nd(1000, &probe, ctx, &mut Vec::new()));
    fail_p0(&mut w, &mut s, 5000, &[]);
    assert!(s.moved(&CLIENT).is_none());
    // From the server's global address, it does.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    let probe = NdSeen {
        src_ip: SERVER6,
        ..probe
    };
    w.with(|ctx| s.on_nd(1000, &probe, ctx, &mut Vec::new()));
    fail_p0(&mut w, &mut s, 5000, &[]);
    assert!(s.moved(&CLIENT).is_some_and(|m| m.port != 0));
}

#[test]
fn a_move_forgotten_while_its_client_was_idle_is_still_failed_over() {
    // On a bond too: the driver re-steers only the clients it answered itself.
    let mut w = World::new();
    let mut s = Steerer::new(SteerConfig {
        follow_answers: false,
        idle_ms: 10_000,
        ..cfg()
    });
    let mut out = Vec::new();
    assert!(make_move(
        &mut s,
        &w,
        1000,
        mv(1, 0, Reason::Overload),
        &mut out
    ));
    assert!(s.moved(&CLIENT).is_some());
    // Its repeats go out first: a move with an update still to send is not idle.
    w.with(|ctx| s.on_timer(5_000, ctx, &mut out));
    w.with(|ctx| s.forget_idle(60_000, |_| false, ctx, &mut out));
    assert!(s.moved(&CLIENT).is_none(), "forgotten while idle");
    let out = fail_p0(&mut w, &mut s, 61_000, &[]);
    assert!(
        s.moved(&CLIENT).is_some_and(|m| m.port != 0),
        "moved off the failed port: {out:?}"
    );
}

/// A move forgotten while its client idles, after a broadcast of the host's put the client
/// back on p0 and its re-assertion was kept back by its budget: the record of where it sends
/// holds p0 too, and p0 failing moves it (found by the simulation, seed 14).
#[test]
fn a_move_forgotten_after_the_host_put_its_client_back_leaves_it_on_that_port() {
    let mut w = World::new();
    let mut s = Steerer::new(SteerConfig {
        per_client_per_sec: 1,
        repeats: 1,
        ..cfg()
    });
    let mut out = Vec::new();
    assert!(make_move(
        &mut s,
        &w,
        0,
        mv(0, 1, Reason::Overload),
        &mut out
    ));
    let broadcast = ArpSeen {
        eth_dst: crate::Mac::broadcast(),
        op: ARP_REQUEST,
        tpa: std::net::Ipv4Addr::new(198, 18, 0, 99),
        ..reply_from(0)
    };
    w.with(|ctx| {
        s.on_timer(0, ctx, &mut out);
        s.on_arp(500, &broadcast, ctx, &mut out);
        // The re-assertion is due at 520 and 770 ms, with the client's budget spent by the move.
        s.on_timer(520, ctx, &mut out);
        s.on_timer(770, ctx, &mut out);
        s.forget_idle(60_000, |_| false, ctx, &mut out);
    });
    assert!(s.moved(&CLIENT).is_none(), "forgotten while idle");
    assert!(
        s.counters().suppressed > 0,
        "the re-assertion was not kept back"
    );
    fail_p0(&mut w, &mut s, 61_000, &[]);
    assert!(
        s.moved(&CLIENT).is_some_and(|m| m.port != 0),
        "left on the dead p0"
    );
}

/// A client the host answered on p0 that the failover cannot place when p0 dies (the server
/// has no confirmed neighbour entry for it at that instant) is failed over once its entry is
/// told, not left until its own ARP brings it back (found by the simulation, seed 14).
#[test]
fn a_client_the_failover_could_not_place_is_retried_when_its_neighbour_is_confirmed() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    w.with(|ctx| s.on_arp(1000, &reply_from(0), ctx, &mut Vec::new()));
    let entries = |state| {
        [
            crate::host::testing::neigh(
                crate::host::testing::BOND,
                CLIENT_IP.into(),
                CLIENT.mac,
                state,
            ),
            crate::host::testing::neigh(
                crate::host::testing::BOND,
                crate::host::testing::CLIENT6.into(),
                CLIENT.mac,
                state,
            ),
        ]
    };
    for ev in entries(libc::NUD_FAILED) {
        w.host.apply(&ev);
    }
    fail_p0(&mut w, &mut s, 5000, &[]);
    assert!(s.moved(&CLIENT).is_none(), "no entry: not placed");
    assert!(s
        .retry_unplaced(6000, |m| m == crate::Mac(2, 0, 0, 0, 0, 9))
        .is_empty());
    for ev in entries(libc::NUD_REACHABLE) {
        w.host.apply(&ev);
    }
    assert_eq!(s.retry_unplaced(6000, |m| m == CLIENT.mac), vec![0]);
    fail_p0(&mut w, &mut s, 6000, &[]);
    assert!(s.moved(&CLIENT).is_some_and(|m| m.port != 0), "left on p0");
    assert!(
        s.retry_unplaced(7000, |m| m == CLIENT.mac).is_empty(),
        "retried once"
    );
}
