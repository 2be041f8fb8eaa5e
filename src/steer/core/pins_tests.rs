//! `[clients]` in the core: an excluded client is never moved, never sent a frame and never
//! offered to the planner; a pinned one is placed, re-asserted, failed over and brought back,
//! and its load stays where it is.

use std::collections::BTreeMap;

use super::fixture::*;
use super::*;
use crate::config::{ClientRules, ClientsConfig};
use crate::host::testing::{CLIENT_IP, SERVER};
use crate::policy::reassert::ArpSeen;

const CLIENT: ClientKey = ClientKey::untagged(crate::host::testing::CLIENT);

fn rules(exclude: &[&str], pin: &[(&str, &str)]) -> ClientRules {
    ClientRules::new(&ClientsConfig {
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
        pin: pin
            .iter()
            .map(|(a, p)| (a.to_string(), p.to_string()))
            .collect::<BTreeMap<_, _>>(),
        places: BTreeMap::new(),
    })
}

fn steerer(exclude: &[&str], pin: &[(&str, &str)]) -> Steerer {
    Steerer::new(SteerConfig {
        clients: rules(exclude, pin),
        ..cfg()
    })
}

/// A client the kernel does not confirm (rlbd cannot move it), so that CLIENT is not p0's
/// only one.
fn other() -> ClientSnap {
    ClientSnap {
        key: ClientKey::untagged(Mac(2, 0, 0, 0, 0, 0xc3)),
        port: 0,
        rate_bps: 20e6,
        quiet_secs: 0,
        talk: crate::host::Talk::default(),
    }
}

fn snap(port: PortIndex, rate_bps: f64) -> ClientSnap {
    ClientSnap {
        key: CLIENT,
        port,
        rate_bps,
        quiet_secs: 0,
        talk: talk(),
    }
}

/// p0 over its threshold (94%), CLIENT 45 Mbit/s of it: without `[clients]` it moves.
fn hot_p0(w: &World) -> Vec<PortView> {
    let mut ports = w.port_views();
    ports[0].rx_bps = 94e6;
    ports[0].overloaded = true;
    ports
}

fn rebalance(
    s: &mut Steerer,
    w: &World,
    now: u64,
    ports: &[PortView],
    c: &[ClientSnap],
) -> Vec<Action> {
    let mut out = Vec::new();
    w.with(|ctx| {
        s.rebalance(now, (ports, &[]), c, &|_| "overload".into(), ctx, &mut out);
    });
    out
}

#[test]
fn an_overloaded_port_moves_the_client_when_it_is_not_named() {
    // The control for the two tests below: the same second moves CLIENT.
    let w = World::new();
    let mut s = steerer(&[], &[]);
    let out = rebalance(&mut s, &w, 0, &hot_p0(&w), &[snap(0, 45e6), other()]);
    assert_eq!(s.moved(&CLIENT).map(|m| m.reason), Some(Reason::Overload));
    assert!(!sends(&out).is_empty());
}

#[test]
fn an_excluded_client_is_never_moved_nor_sent_a_frame() {
    for entry in [
        "198.18.0.11",
        "198.18.0.0/24",
        "02:00:00:00:00:c1",
        "2001:db8::/64",
    ] {
        let mut w = World::new();
        let mut s = steerer(&[entry], &[]);
        let mut out = rebalance(&mut s, &w, 0, &hot_p0(&w), &[snap(0, 45e6), other()]);
        assert!(
            s.moved(&CLIENT).is_none(),
            "{entry}: not offered to the planner"
        );
        // Asked directly, for every reason: refused.
        for r in [
            Reason::Overload,
            Reason::Failover,
            Reason::Placement,
            Reason::Settle,
        ] {
            assert!(
                !make_move(&mut s, &w, 1000, mv(0, 1, r), &mut out),
                "{entry}"
            );
        }
        // Its port fails: the kernel places it, not rlbd.
        w.usable[0] = false;
        let mut ports = w.port_views();
        ports[0].up = false;
        w.with(|ctx| s.failover(2000, &[0], &ports, &[snap(0, 45e6)], ctx, &mut out));
        let quiet = rebalance(&mut s, &w, 3000, &ports, &[snap(0, 45e6)]);
        out.extend(quiet);
        assert!(sends(&out).is_empty(), "{entry}: {out:?}");
        assert!(s.moved(&CLIENT).is_none());
        assert_eq!(s.counters().sent, 0);
    }
}

#[test]
fn a_moved_client_excluded_by_a_reload_is_sent_nothing_more() {
    let w = World::new();
    let mut s = moved_to_p1(&w);
    s.reconfigure(SteerConfig {
        clients: rules(&["198.18.0.11"], &[]),
        ..cfg()
    });
    assert!(s.moved(&CLIENT).is_none(), "its move is forgotten");
    let reply = reply_from(0);
    let mut out = Vec::new();
    w.with(|ctx| {
        s.on_arp(2000, &reply, ctx, &mut out);
        s.on_timer(5000, ctx, &mut out);
    });
    assert!(
        sends(&out).is_empty(),
        "no re-assertion of an excluded client"
    );
}

#[test]
fn a_pinned_client_stays_on_an_overloaded_port_its_load_fixed() {
    let w = World::new();
    let mut s = steerer(&[], &[("198.18.0.11", "p0")]);
    let ports = hot_p0(&w);
    let out = rebalance(&mut s, &w, 0, &ports, &[snap(0, 45e6), other()]);
    // Not moved off its port by the planner: kept there (a record, sent on p0 only).
    let m = s.moved(&CLIENT).expect("kept where it is pinned");
    assert_eq!((m.port, m.reason), (0, Reason::Placement));
    assert!(sends(&out).iter().all(|(p, _)| *p == 0), "{out:?}");
    assert_eq!(s.counters().moves_overload, 0);
    // A second later, and past the hold-down: still no overload move.
    for t in [1000, 200_000] {
        rebalance(&mut s, &w, t, &ports, &[snap(0, 45e6), other()]);
        assert_eq!(s.moved(&CLIENT).unwrap().port, 0);
        assert_eq!(s.counters().moves_overload, 0);
    }
}

#[test]
fn a_pinned_client_is_placed_and_re_asserted() {
    for entry in ["198.18.0.11", "02:00:00:00:00:c1", "198.18.0.0/16"] {
        let w = World::new();
        let mut s = steerer(&[], &[(entry, "p2")]);
        let ports = w.port_views();
        let out = rebalance(&mut s, &w, 0, &ports, &[snap(0, 10e6)]);
        let m = s.moved(&CLIENT).expect(entry);
        assert_eq!((m.port, m.left, m.reason), (2, 0, Reason::Placement));
        assert_eq!(sends(&out), vec![(2, V4), (2, V6)], "{entry}");
        assert!(logs(&out, Level::Info)[0].contains("pinned to p2"));
        // The host's ARP reply tells it p0 again: re-asserted like any move.
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
            s.on_timer(1000, ctx, &mut out);
            out.clear();
            s.on_arp(2000, &reply, ctx, &mut out);
            s.on_timer(3000, ctx, &mut out);
        });
        assert_eq!(s.moved(&CLIENT).unwrap().reasserts, 1);
        assert!(!sends(&out).is_empty() && sends(&out).iter().all(|(p, _)| *p == 2));
        // Its frames still arrive on p0 seconds later: re-asserted, not moved again.
        let out = rebalance(&mut s, &w, 4000, &ports, &[snap(0, 10e6)]);
        let mut more = out.clone();
        w.with(|ctx| s.on_timer(4100, ctx, &mut more));
        assert_eq!(s.moved(&CLIENT).unwrap().reasserts, 2);
        assert_eq!(s.counters().moves_placement, 1);
        assert!(sends(&more).iter().all(|(p, _)| *p == 2));
        // Where it was put: nothing to do.
        let out = rebalance(&mut s, &w, 5000, &ports, &[snap(2, 10e6)]);
        assert!(sends(&out).is_empty());
    }
}

#[test]
fn a_pinned_client_is_failed_over_and_brought_back_once_its_port_is_stable() {
    let mut w = World::new();
    let mut s = steerer(&[], &[("198.18.0.11", "p2")]);
    let ports = w.port_views();
    rebalance(&mut s, &w, 0, &ports, &[snap(0, 10e6)]);
    assert_eq!(s.moved(&CLIENT).unwrap().port, 2);
    // p2 fails: failed over to a live port in the same step.
    w.usable[2] = false;
    let down = w.port_views();
    let mut out = Vec::new();
    w.with(|ctx| s.failover(10_000, &[2], &down, &[snap(2, 10e6)], ctx, &mut out));
    let m = s.moved(&CLIENT).unwrap();
    assert_eq!(m.reason, Reason::Failover);
    let spare = m.port;
    assert_ne!(spare, 2);
    assert!(sends(&out).iter().all(|(p, _)| *p == spare));
    // While p2 is down, it stays on the spare port.
    let out = rebalance(&mut s, &w, 11_000, &down, &[snap(spare, 10e6)]);
    assert!(sends(&out).is_empty());
    // p2 comes back: not at once (a flapping link would pull it to and fro)...
    w.usable[2] = true;
    let up = w.port_views();
    for t in [12_000, 14_000, 16_000] {
        let out = rebalance(&mut s, &w, t, &up, &[snap(spare, 10e6)]);
        assert!(sends(&out).is_empty(), "at {t}");
        assert_eq!(s.moved(&CLIENT).unwrap().port, spare);
    }
    // ...but once it has been up STABLE_MS.
    let out = rebalance(&mut s, &w, 12_000 + STABLE_MS, &up, &[snap(spare, 10e6)]);
    let m = s.moved(&CLIENT).unwrap();
    assert_eq!((m.port, m.left, m.reason), (2, spare, Reason::Placement));
    assert_eq!(sends(&out), vec![(2, V4), (2, V6)]);
}

#[test]
fn a_pin_to_a_port_the_core_does_not_have_is_left_alone() {
    let w = World::new();
    let mut s = steerer(&[], &[("198.18.0.11", "eth9")]);
    let out = rebalance(&mut s, &w, 0, &hot_p0(&w), &[snap(0, 45e6), other()]);
    assert!(sends(&out).is_empty());
    assert!(s.moved(&CLIENT).is_none());
}

#[test]
fn a_moved_client_found_to_use_an_excluded_address_is_sent_nothing_more() {
    // Moved while the core knew only its IPv6 address; 198.18.0.11 is excluded.
    let w = World::new();
    let mut s = steerer(&["198.18.0.11/32"], &[]);
    let v6_only = crate::host::Talk { v4: None, ..talk() };
    let mut out = Vec::new();
    let made = w.with(|ctx| {
        s.apply_move(
            0,
            CLIENT,
            &v6_only,
            &mv(0, 1, Reason::Overload),
            "",
            ctx,
            &mut out,
        )
    });
    assert!(made, "nothing excluded it yet");
    // Its IPv4 address shows up: the move is forgotten, and no frame goes to it again.
    out.clear();
    rebalance(&mut s, &w, 1000, &w.port_views(), &[snap(1, 1e6)]);
    assert!(s.moved(&CLIENT).is_none());
    w.with(|ctx| s.on_timer(60_000, ctx, &mut out));
    assert!(sends(&out).is_empty(), "{out:?}");
}
