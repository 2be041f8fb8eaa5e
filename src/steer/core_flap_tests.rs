//! Ports that fail and come back do not move clients to and fro: a port that just came back is
//! no target while a port that has stayed up is, and a client failed over is not failed over
//! again when its old port fails again.

use super::fixture::*;
use super::*;

const CLIENT: ClientKey = ClientKey::untagged(crate::host::testing::CLIENT);

fn snap(port: PortId, rate_bps: f64) -> ClientSnap {
    ClientSnap {
        key: CLIENT,
        port,
        rate_bps,
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
    let made =
        w.with(|ctx| s.rebalance(11_000, &v, &clients, &|_| "overload".into(), ctx, &mut out));
    assert!(made.is_empty(), "moved onto p2 1 s after it came back");
    let at = 10_000 + STABLE_MS;
    let made = w.with(|ctx| s.rebalance(at, &v, &clients, &|_| "overload".into(), ctx, &mut out));
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
        talk: talk(),
    };
    w.with(|ctx| s.failover(60_000, &[1], &ports, &[snap], ctx, &mut out));
    assert_eq!(s.counters().moves_failover, 1);
    assert_eq!(s.moved(&CLIENT).unwrap().at_ms, 60_000);
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
