//! Ports that fail and come back do not move clients to and fro: a port that just came back is
//! no target while a port that has stayed up is, and a client failed over is not failed over
//! again when its old port fails again. A settling move (issue 27) is one per move, never back
//! to the port the client left, and an exchange is made whole or not at all.

use super::fixture::*;
use super::*;
use crate::host::Talk;

const CLIENT: ClientKey = ClientKey::untagged(crate::host::testing::CLIENT);

fn snap(port: PortIndex, rate_bps: f64) -> ClientSnap {
    ClientSnap {
        key: CLIENT,
        port,
        rate_bps,
        quiet_secs: 0,
        talk: talk(),
    }
}

/// The ports' views with p1 half loaded and p2 idle: p2 is the planner's first choice.
fn views(w: &World) -> Vec<crate::policy::PortView> {
    let mut v = w.port_views();
    v[1].rx_bps = 50e6;
    v
}

/// p2 goes down at 1 s and comes back at `back`.
fn p2_flapped(w: &mut World, s: &mut Steerer, back: u64) {
    let mut out = Vec::new();
    w.with(|ctx| s.failover(0, &[], &views(w), &[], ctx, &mut out));
    w.usable[2] = false;
    let v = views(w);
    w.with(|ctx| s.failover(1000, &[2], &v, &[], ctx, &mut out));
    w.usable[2] = true;
    let v = views(w);
    w.with(|ctx| s.failover(back, &[], &v, &[], ctx, &mut out));
}

#[test]
fn failover_prefers_a_port_that_stayed_up_to_one_that_just_came_back() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    p2_flapped(&mut w, &mut s, 10_000);
    w.usable[0] = false;
    let v = views(&w);
    let mut out = Vec::new();
    w.with(|ctx| s.failover(11_000, &[0], &v, &[snap(0, 10e6)], ctx, &mut out));
    assert_eq!(s.moved(&CLIENT).map(|m| m.port), Some(1));
}

#[test]
fn a_port_back_for_a_while_is_a_target_again() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    p2_flapped(&mut w, &mut s, 10_000);
    w.usable[0] = false;
    let v = views(&w);
    let mut out = Vec::new();
    let at = 10_000 + STABLE_MS;
    w.with(|ctx| s.failover(at, &[0], &v, &[snap(0, 10e6)], ctx, &mut out));
    assert_eq!(s.moved(&CLIENT).map(|m| m.port), Some(2));
}

#[test]
fn a_port_just_back_is_still_used_when_no_other_is_up() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    p2_flapped(&mut w, &mut s, 10_000);
    w.usable[0] = false;
    w.usable[1] = false;
    let v = views(&w);
    let mut out = Vec::new();
    w.with(|ctx| s.failover(10_500, &[0, 1], &v, &[snap(0, 10e6)], ctx, &mut out));
    assert_eq!(s.moved(&CLIENT).map(|m| m.port), Some(2));
}

#[test]
fn no_chosen_move_onto_a_port_that_just_came_back() {
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    p2_flapped(&mut w, &mut s, 10_000);
    let mut v = views(&w);
    v[0].rx_bps = 95e6;
    v[0].overloaded = true;
    v[1].rx_bps = 90e6;
    // Two clients on p0, so that one may leave (the planner keeps one).
    let other = ClientSnap {
        key: ClientKey::untagged(crate::Mac(2, 0, 0, 0, 9, 9)),
        ..snap(0, 60e6)
    };
    let clients = [snap(0, 35e6), other];
    let mut out = Vec::new();
    let made = w.with(|ctx| {
        s.rebalance(
            11_000,
            (&v, &[]),
            &clients,
            &|_| "overload".into(),
            ctx,
            &mut out,
        )
    });
    assert!(made.is_empty(), "moved onto p2 1 s after it came back");
    let at = 10_000 + STABLE_MS;
    let made = w.with(|ctx| {
        s.rebalance(
            at,
            (&v, &[]),
            &clients,
            &|_| "overload".into(),
            ctx,
            &mut out,
        )
    });
    assert_eq!(made, vec![0]);
    assert_eq!(s.moved(&CLIENT).map(|m| m.port), Some(2));
}

#[test]
fn a_client_failed_over_is_not_failed_over_again_when_its_old_port_fails_again() {
    // p1 goes down (the client, quiet, is moved to p0 or p2), then is removed, then added back
    // down: each is a failure of p1, and each used to move the client once more.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    w.usable[1] = false;
    let mut ports = w.port_views();
    let quiet = ClientSnap {
        key: CLIENT,
        port: 1,
        rate_bps: 0.0,
        quiet_secs: u64::MAX,
        talk: talk(),
    };
    let mut out = Vec::new();
    w.with(|ctx| s.failover(1000, &[1], &ports, &[quiet], ctx, &mut out));
    let first = s.moved(&CLIENT).unwrap().clone();
    assert_ne!(first.port, 1);
    ports[1].up = false;
    for t in [1000, 6000, 11000] {
        w.with(|ctx| s.failover(t, &[1], &ports, &[quiet], ctx, &mut out));
    }
    // Still sending, but its frames of the last second predate the move made 1 s ago.
    let busy = ClientSnap {
        rate_bps: 5e6,
        quiet_secs: 0,
        ..quiet
    };
    let mut s2 = Steerer::new(cfg());
    w.with(|ctx| s2.failover(1000, &[1], &ports, &[busy], ctx, &mut out));
    w.with(|ctx| s2.failover(2000, &[1], &ports, &[busy], ctx, &mut out));
    assert_eq!(s2.counters().moves_failover, 1);
    assert_eq!(s.moved(&CLIENT).unwrap().at_ms, first.at_ms);
    assert_eq!(s.counters().moves_failover, 1);
}

#[test]
fn a_client_seen_on_the_failed_port_after_its_move_is_failed_over_again() {
    // rlbd put it on p2 long ago, but its frames of the last second came in on p1 (something
    // sent it back): p1 failing strands it, so it is moved.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    make_move(&mut s, &w, 0, mv(1, 2, Reason::Overload), &mut out);
    w.usable[1] = false;
    let ports = w.port_views();
    let snap = ClientSnap {
        key: CLIENT,
        port: 1,
        rate_bps: 5e6,
        quiet_secs: 0,
        talk: talk(),
    };
    w.with(|ctx| s.failover(60_000, &[1], &ports, &[snap], ctx, &mut out));
    assert_eq!(s.counters().moves_failover, 1);
    assert_eq!(s.moved(&CLIENT).unwrap().at_ms, 60_000);
}

#[test]
fn a_quiet_client_counted_before_its_move_is_not_failed_over_again() {
    // Failed over off p1 at 1 s, quiet since: its last frames on p1, a few seconds old,
    // predate the move, so p1 failing again (removed, added back down) leaves it where it is.
    let mut w = World::new();
    let mut s = Steerer::new(cfg());
    w.usable[1] = false;
    let mut ports = w.port_views();
    ports[1].up = false;
    let mut out = Vec::new();
    let counted = |quiet_secs| ClientSnap {
        key: CLIENT,
        port: 1,
        rate_bps: 0.0,
        quiet_secs,
        talk: talk(),
    };
    w.with(|ctx| s.failover(1000, &[1], &ports, &[counted(1)], ctx, &mut out));
    assert_eq!(s.counters().moves_failover, 1);
    for (t, quiet) in [(3000, 3), (5000, 5), (6000, 6)] {
        w.with(|ctx| s.failover(t, &[1], &ports, &[counted(quiet)], ctx, &mut out));
    }
    assert_eq!(s.counters().moves_failover, 1);
}

#[test]
fn a_quiet_client_counted_on_the_failed_port_after_its_move_is_failed_over_again() {
    // rlbd put it on p2 long ago; its frames came in on p1 3 s ago, none since (a small client
    // on a sampled port): p1 failing strands it. Counted there 6 s ago is too long ago to say.
    for (quiet_secs, moved_again) in [(3, true), (6, false)] {
        let mut w = World::new();
        let mut s = Steerer::new(cfg());
        let mut out = Vec::new();
        make_move(&mut s, &w, 0, mv(1, 2, Reason::Overload), &mut out);
        w.usable[1] = false;
        let ports = w.port_views();
        let snap = ClientSnap {
            key: CLIENT,
            port: 1,
            rate_bps: 0.0,
            quiet_secs,
            talk: talk(),
        };
        w.with(|ctx| s.failover(60_000, &[1], &ports, &[snap], ctx, &mut out));
        assert_eq!(
            s.counters().moves_failover,
            u64::from(moved_again),
            "counted {quiet_secs} s ago"
        );
    }
}

/// A held client's move may be corrected once (`settle`): not back to the port it left, and
/// not a second time within its hold-down; the correction is counted apart.
#[test]
fn a_move_is_settled_once_and_never_back_to_the_port_it_left() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let mut out = Vec::new();
    assert!(make_move(
        &mut s,
        &w,
        0,
        mv(0, 1, Reason::Overload),
        &mut out
    ));
    assert!(!make_move(
        &mut s,
        &w,
        3000,
        mv(1, 0, Reason::Settle),
        &mut out
    ));
    assert!(make_move(
        &mut s,
        &w,
        3000,
        mv(1, 2, Reason::Settle),
        &mut out
    ));
    assert_eq!(s.last_move(&CLIENT, 3000), Some((1, Reason::Settle)));
    assert!(!make_move(
        &mut s,
        &w,
        4000,
        mv(2, 0, Reason::Settle),
        &mut out
    ));
    let c = s.counters();
    assert_eq!((c.moves_overload, c.moves_settle), (1, 1));
    assert_eq!(s.moved(&CLIENT).unwrap().port, 2);
    // After the hold-down the client moves freely again, and is no longer settling.
    let hold = cfg().policy.hold_down * 1000;
    assert_eq!(s.last_move(&CLIENT, 3000 + hold), None);
}

/// The planner's exchange for a settling client: `CLIENT` (moved p0 -> p1 3 s ago) filled p1;
/// p2 has too little room for it alone but enough once its 30 Mbit/s client comes to p1.
/// `p1_usable` is what the core finds of p1 when it sends.
fn exchange(p1_usable: bool) -> (Steerer, Vec<Action>, ClientKey) {
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
    let other = ClientKey::untagged(Mac(2, 0, 0, 0, 0, 0xc3));
    let ip = std::net::Ipv4Addr::new(198, 18, 0, 13);
    let reachable = libc::NUD_REACHABLE;
    let host =
        crate::host::testing::neigh(crate::host::testing::BOND, ip.into(), other.mac, reachable);
    w.host.apply(&host);
    // The planner sees every port up (its figures are from the last second).
    let mut ports = w.port_views();
    for (p, rx) in ports.iter_mut().zip([50e6, 97e6, 80e6]) {
        p.rx_bps = rx;
    }
    w.usable[1] = p1_usable;
    let other_talk = Talk::default();
    let clients = [
        ClientSnap {
            key: CLIENT,
            port: 1,
            rate_bps: 40e6,
            quiet_secs: 0,
            talk: talk(),
        },
        ClientSnap {
            key: other,
            port: 2,
            rate_bps: 30e6,
            quiet_secs: 0,
            talk: other_talk,
        },
    ];
    let why = |_: &crate::policy::Move| "overload".to_string();
    w.with(|ctx| s.rebalance(3000, (&ports, &[]), &clients, &why, ctx, &mut out));
    (s, out, other)
}

#[test]
fn an_exchange_moves_both_clients_in_one_round() {
    let (s, out, other) = exchange(true);
    assert_eq!(s.moved(&CLIENT).map(|m| (m.port, m.left)), Some((2, 1)));
    assert_eq!(s.moved(&other).map(|m| (m.port, m.left)), Some((1, 2)));
    assert_eq!(s.counters().moves_settle, 2);
    let settles = out
        .iter()
        .filter(|a| matches!(a, Action::Log(Level::Info, _, l, _) if l.contains("; settle: ")))
        .count();
    assert_eq!(settles, 2, "{out:?}");
}

#[test]
fn an_exchange_half_of_which_cannot_be_made_is_not_made_at_all() {
    // p1 is not usable when the core sends: `other` cannot go there, so `CLIENT` stays too.
    let (s, _, other) = exchange(false);
    assert_eq!(s.moved(&CLIENT).map(|m| m.port), Some(1));
    assert!(s.moved(&other).is_none());
    assert_eq!(s.counters().moves_settle, 0);
}
