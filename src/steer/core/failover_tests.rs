//! The core's failover: a port that fails takes every client on it to a live port, in turn
//! within the total rate limit, and a client failed over is not moved again meanwhile.

use std::net::Ipv4Addr;

use super::*;
use crate::host::testing::*;

use super::fixture::*;

/// The fixture's client as the core keys it (untagged).
const CLIENT: ClientKey = ClientKey::untagged(crate::host::testing::CLIENT);

#[test]
fn a_client_moved_onto_a_port_that_fails_is_re_steered_in_the_same_step() {
    let mut w = World::new();
    let mut s = moved_to_p1(&w);
    w.usable[1] = false;
    let mut out = Vec::new();
    let ports = w.port_views();
    // The client is quiet this second: it is not in the client list at all.
    w.with(|ctx| s.failover(5000, &[1], &ports, &[], ctx, &mut out));
    let to = s.moved(&CLIENT).unwrap().port;
    assert_ne!(to, 1);
    assert_eq!(sends(&out), vec![(to, V4), (to, V6)]);
    assert_eq!(s.counters().moves_failover, 1);
}

#[test]
fn failover_moves_clients_seen_on_the_failed_port() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    w.usable[0] = false;
    let snap = ClientSnap {
        key: CLIENT,
        port: 0,
        rate_bps: 10e6,
        quiet_secs: 0,
        talk: talk(),
    };
    let mut out = Vec::new();
    let ports = w.port_views();
    w.with(|ctx| s.failover(0, &[0], &ports, &[snap], ctx, &mut out));
    assert_eq!(s.moved(&CLIENT).unwrap().reason, Reason::Failover);
    assert_eq!(sends(&out).len(), 2);
}

#[test]
fn a_quiet_client_failed_over_is_not_moved_again_while_its_old_port_is_down() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    w.usable[0] = false;
    // Idle: its latest frame, long ago, came in on p0, and it sends nothing to say otherwise.
    let snap = ClientSnap {
        key: CLIENT,
        port: 0,
        rate_bps: 0.0,
        quiet_secs: u64::MAX,
        talk: talk(),
    };
    let mut out = Vec::new();
    let mut ports = w.port_views();
    ports[0].up = false;
    w.with(|ctx| s.failover(0, &[0], &ports, &[snap], ctx, &mut out));
    let first = s.moved(&CLIENT).unwrap().clone();
    assert_eq!(first.reason, Reason::Failover);
    out.clear();
    for t in 1..5u64 {
        let made = w.with(|ctx| {
            s.rebalance(
                t * 1000,
                (&ports, &[]),
                &[snap],
                &|_| "overload".into(),
                ctx,
                &mut out,
            )
        });
        assert!(made.is_empty(), "moved again at {t} s");
    }
    assert_eq!(s.moved(&CLIENT).unwrap().at_ms, first.at_ms);
    assert_eq!(s.counters().moves_failover, 1);
}

#[test]
fn a_port_failing_under_more_clients_than_the_total_limit_reaches_each_in_turn() {
    // 3,000 clients on p0 (a /20 of them), the total limit 1,000 updates a second.
    let mut w = World::new();
    let n = 3000u16;
    let snaps = crowd(&mut w, n, false);
    let mut s = Steerer::new(cfg());
    w.usable[0] = false;
    let ports = w.port_views();
    let mut out = Vec::new();
    w.with(|ctx| s.failover(0, &[0], &ports, &snaps, ctx, &mut out));
    let mut first: HashMap<ClientKey, u64> = HashMap::new();
    let mut per_sec: HashMap<u64, usize> = HashMap::new();
    let mut now = 0;
    loop {
        for a in out.drain(..) {
            if let Action::Send { client, .. } = a {
                first.entry(client).or_insert(now);
                *per_sec.entry(now / 1000).or_default() += 1;
            }
        }
        match s.next_due() {
            Some(t) if t < 10_000 => {
                now = t;
                w.with(|ctx| s.on_timer(now, ctx, &mut out));
            }
            _ => break,
        }
    }
    assert_eq!(s.counters().moves_failover, u64::from(n));
    assert_eq!(first.len(), usize::from(n), "every client hears once");
    let last = first.values().max().copied().unwrap_or(0);
    // 2,000 waiting at 1,000 a second, give or take the repeats of the first 1,000.
    assert!(last < 2_100, "the last first frame after {last} ms");
    // The bucket's burst (1,000) plus its rate: never more in a second.
    assert!(per_sec.values().all(|&k| k <= 2000), "{per_sec:?}");
    assert!(s.counters().deferred >= u64::from(n) - 1000);
}

/// The host's broadcast ARP request from p0: every client with an entry for the server takes
/// p0's MAC for it.
fn broadcast_from_p0() -> crate::policy::reassert::ArpSeen {
    crate::policy::reassert::ArpSeen {
        outgoing: true,
        op: crate::policy::reassert::ARP_REQUEST,
        eth_src: P[0],
        eth_dst: crate::Mac::broadcast(),
        sha: P[0],
        spa: SERVER,
        tpa: Ipv4Addr::new(198, 18, 0, 99),
        vlan: 0,
    }
}

/// A client rlbd moved to p1 that the host's broadcast from p0 put back, with no update out
/// since (its re-assertion not yet sent, or kept back by its budget), sends to p0: p0 failing
/// moves it. Once an update is out again, or its frames were counted after the broadcast, it is
/// where rlbd put it, and p0 failing leaves it there.
#[test]
fn a_moved_client_the_host_s_broadcast_put_back_is_failed_over_with_the_port_it_names() {
    let cases: [(&str, bool, Option<ClientSnap>, bool); 3] = [
        ("no update since", false, None, true),
        ("an update out since", true, None, false),
        (
            "counted on p1 since",
            false,
            Some(ClientSnap {
                key: CLIENT,
                port: 1,
                rate_bps: 1e6,
                quiet_secs: 0,
                talk: talk(),
            }),
            false,
        ),
    ];
    for (what, reasserted, counted, moved_again) in cases {
        let mut w = World::new();
        let mut s = moved_to_p1(&w);
        let mut out = Vec::new();
        w.with(|ctx| s.on_arp(10_000, &broadcast_from_p0(), ctx, &mut out));
        if reasserted {
            w.with(|ctx| s.on_timer(10_020, ctx, &mut out));
        }
        w.usable[0] = false;
        let ports = w.port_views();
        let at = if counted.is_some() { 12_000 } else { 10_010 };
        let clients: Vec<ClientSnap> = counted.into_iter().collect();
        w.with(|ctx| s.failover(at, &[0], &ports, &clients, ctx, &mut out));
        assert_eq!(
            s.counters().moves_failover,
            u64::from(moved_again),
            "{what}"
        );
        if moved_again {
            let m = s.moved(&CLIENT).unwrap();
            assert_eq!((m.reason, m.port == 0), (Reason::Failover, false), "{what}");
        }
    }
}

/// After a netlink overrun, what the host view confirms is not known until the re-dump is in:
/// a failover's updates wait for it (checked then against the whole view), and go anyway if it
/// never comes within 2 s.
#[test]
fn sends_wait_for_the_re_dump_after_an_overrun() {
    for (dump_in, sent_at) in [(Some(1_300), 1_300), (None, 3_000)] {
        let mut w = World::new();
        let mut s = moved_to_p1(&w);
        w.resync_since = Some(1_000);
        w.usable[1] = false;
        let ports = w.port_views();
        let mut out = Vec::new();
        w.with(|ctx| s.failover(1_000, &[1], &ports, &[], ctx, &mut out));
        assert_eq!(s.counters().moves_failover, 1, "the move is made at once");
        assert!(sends(&out).is_empty(), "{:?}", sends(&out));
        let mut t = 1_000;
        while sends(&out).is_empty() && t < 5_000 {
            t = s.next_due().expect("a send stays queued");
            if dump_in.is_some_and(|d| t >= d) {
                w.resync_since = None;
            }
            w.with(|ctx| s.on_timer(t, ctx, &mut out));
        }
        assert!(
            t >= sent_at && t < sent_at + 100,
            "first sent at {t} ms, not at {sent_at}"
        );
    }
}

/// Dual-stack clients failed over beyond the total limit: a move's first send that the limit
/// cuts short after its IPv4 claim waits its turn for the IPv6 one rather than shed it (a
/// client that talks to the server over IPv6 hears only that one).
#[test]
fn a_failover_beyond_the_total_limit_tells_dual_stack_clients_both_claims() {
    let mut w = World::new();
    let n = 700u16;
    let snaps = crowd(&mut w, n, true);
    // No repeats: the one send each move makes must tell both claims.
    let mut s = Steerer::new(SteerConfig {
        repeats: 1,
        ..cfg()
    });
    w.usable[0] = false;
    let ports = w.port_views();
    let mut out = Vec::new();
    w.with(|ctx| s.failover(0, &[0], &ports, &snaps, ctx, &mut out));
    let mut told: HashMap<ClientKey, (bool, bool)> = HashMap::new();
    loop {
        for a in out.drain(..) {
            if let Action::Send { client, claim, .. } = a {
                let e = told.entry(client).or_default();
                match claim {
                    Claim::V4 { .. } => e.0 = true,
                    Claim::V6 { .. } => e.1 = true,
                }
            }
        }
        match s.next_due() {
            Some(t) if t < 10_000 => w.with(|ctx| s.on_timer(t, ctx, &mut out)),
            _ => break,
        }
    }
    assert_eq!(s.counters().moves_failover, u64::from(n));
    let missing: Vec<_> = told.iter().filter(|(_, t)| !(t.0 && t.1)).collect();
    assert!(
        told.len() == usize::from(n) && missing.is_empty(),
        "{} told, {} not both claims: {:?}",
        told.len(),
        missing.len(),
        missing.first()
    );
}

/// A plain ARP reply of the host's (the driver's round after a failover) reaching a client rlbd
/// moved less than a second before is ignored by that client (Linux's locktime): the port it
/// names failing leaves the client where rlbd put it. Past the locktime, or as a request (which
/// overrides it), the frame does take the client there, and that port failing moves it.
/// (Extra seed 778935: a client failed over twice within its hold-down.)
#[test]
fn a_host_reply_within_the_client_s_locktime_does_not_undo_the_move() {
    use crate::policy::reassert::{ArpSeen, ARP_REPLY, ARP_REQUEST};

    for (what, at, op, moved_again) in [
        ("a reply within the locktime", 500, ARP_REPLY, false),
        ("a reply past it", 1_500, ARP_REPLY, true),
        ("a request within it", 500, ARP_REQUEST, true),
    ] {
        let mut w = World::new();
        let mut s = moved_to_p1(&w);
        let mut out = Vec::new();
        let seen = ArpSeen {
            op,
            ..reply_from(0)
        };
        w.with(|ctx| s.on_arp(at, &seen, ctx, &mut out));
        w.usable[0] = false;
        let ports = w.port_views();
        w.with(|ctx| s.failover(at + 10, &[0], &ports, &[], ctx, &mut out));
        assert_eq!(
            s.counters().moves_failover,
            u64::from(moved_again),
            "{what}"
        );
    }
}

/// A client whose earlier move had told its first claim and waited its turn for the second
/// (the total limit spent) is failed over: the new move tells every claim (seed 10 left a
/// dual-stack client's IPv6 entry on the dead port, told only the IPv4 claim).
#[test]
fn a_new_move_tells_every_claim_whatever_an_earlier_turn_had_told() {
    let mut w = World::new();
    let mut s = moved_to_p1(&w);
    s.unheard.insert(CLIENT, 1);
    w.usable[1] = false;
    let ports = w.port_views();
    let mut out = Vec::new();
    w.with(|ctx| s.failover(5000, &[1], &ports, &[], ctx, &mut out));
    let to = s.moved(&CLIENT).unwrap().port;
    assert_eq!(sends(&out), vec![(to, V4), (to, V6)]);
}
