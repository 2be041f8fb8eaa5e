//! A port whose MAC changed (balance-alb swaps the active slave's MAC with the next one's when
//! it fails): the clients rlbd put on it must hear the new MAC, even when the failover that came
//! with the swap spent the total budget.

use super::fixture::*;
use super::watching::SWAP_WINDOW_MS;
use super::*;
use crate::host::testing::*;
use crate::policy::Reason;

/// The ports as the core sees them: p0, p1, ... with these MACs, usable or not.
fn infos(ports: &[(Mac, bool)]) -> Vec<PortInfo> {
    ports
        .iter()
        .enumerate()
        .map(|(i, (mac, usable))| PortInfo {
            name: format!("p{i}"),
            mac: *mac,
            usable: *usable,
        })
        .collect()
}

#[test]
fn a_mac_change_re_assertion_waits_for_the_total_budget_instead_of_being_shed() {
    let w = World::new();
    // One frame per move and a total budget of two a second: the move's ARP and NA spend it.
    let mut s = Steerer::new(SteerConfig {
        repeats: 1,
        total_per_sec: 2,
        ..cfg()
    });
    let mut out = Vec::new();
    w.with(|ctx| {
        let to_p1 = mv(0, 1, Reason::Failover);
        let key = ClientKey::untagged(CLIENT);
        assert!(s.apply_move(0, key, &talk(), &to_p1, "test", ctx, &mut out));
    });
    assert_eq!(sends(&out).len(), 2, "the move's ARP and NA");
    out.clear();
    // p1's MAC changes 10 ms later, while the budget is empty.
    w.with(|ctx| {
        s.on_port_mac_changed(10, 1, ctx, &mut out);
        for t in (10..5000).step_by(10) {
            s.on_timer(t, ctx, &mut out);
        }
    });
    let told = sends(&out);
    assert!(
        told.contains(&(1, V4)) && told.contains(&(1, V6)),
        "the client never heard p1's new MAC: {told:?}; {:?}",
        logs(&out, Level::Debug)
    );
}

#[test]
fn a_client_the_host_put_on_a_port_follows_its_mac_to_the_dead_slave_that_took_it() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let key = ClientKey::untagged(CLIENT);
    // The host (or an idle move forgotten) left the client on p1's MAC.
    s.answered.restore(0, key, 1 << 1, vec![V4]);
    // p0, the active slave, fails: the driver gives p1 the bond's MAC (p0's) and p0 p1's.
    let ports = infos(&[(P[1], false), (P[0], true), (P[2], true)]);
    let mut out = Vec::new();
    w.with(|real| {
        let ctx = Ctx {
            host: real.host,
            ports: &ports,
            resync_since: None,
        };
        let dead = s.follow_port_macs(1000, &[(0, P[0]), (1, P[1])], &ctx);
        assert_eq!(dead, vec![0], "p1's old MAC is on the dead p0 now");
        let mut views = w.port_views();
        views[0].up = false;
        s.failover(1000, &dead, &views, &[], &ctx, &mut out);
    });
    let to = s.moved(&key).map(|m| m.port);
    assert!(to.is_some_and(|p| p != 0), "left on the dead p0: {to:?}");
}

#[test]
fn a_swap_told_in_two_batches_still_takes_the_host_s_clients_to_the_dead_slave() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let key = ClientKey::untagged(CLIENT);
    s.answered.restore(0, key, 1 << 1, vec![V4]);
    // p0, the active slave, fails; the driver's swap is told p1 first (it has p0's MAC, which
    // p0 still has too), then p0 (it has p1's): p1's old MAC is nowhere in the first batch.
    let first = infos(&[(P[0], false), (P[0], true), (P[2], true)]);
    let second = infos(&[(P[1], false), (P[0], true), (P[2], true)]);
    let mut out = Vec::new();
    w.with(|real| {
        let ctx = Ctx {
            host: real.host,
            ports: &first,
            resync_since: None,
        };
        assert!(s.follow_port_macs(1000, &[(1, P[1])], &ctx).is_empty());
        let ctx = Ctx {
            host: real.host,
            ports: &second,
            resync_since: None,
        };
        let dead = s.follow_port_macs(1010, &[(0, P[0])], &ctx);
        assert_eq!(dead, vec![0], "p1's old MAC is on the dead p0 now");
        let mut views = w.port_views();
        views[0].up = false;
        s.failover(1010, &dead, &views, &[], &ctx, &mut out);
    });
    let to = s.moved(&key).map(|m| m.port);
    assert!(to.is_some_and(|p| p != 0), "left on the dead p0: {to:?}");
}

#[test]
fn a_mac_given_up_long_ago_is_not_followed_when_a_port_takes_it() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let key = ClientKey::untagged(CLIENT);
    s.answered.restore(0, key, 1 << 1, vec![V4]);
    let first = infos(&[(P[0], false), (P[0], true), (P[2], true)]);
    let later = infos(&[(P[1], false), (P[0], true), (P[2], true)]);
    w.with(|real| {
        let ctx = Ctx {
            host: real.host,
            ports: &first,
            resync_since: None,
        };
        assert!(s.follow_port_macs(1000, &[(1, P[1])], &ctx).is_empty());
        let ctx = Ctx {
            host: real.host,
            ports: &later,
            resync_since: None,
        };
        let dead = s.follow_port_macs(1000 + SWAP_WINDOW_MS + 1, &[(0, P[0])], &ctx);
        assert!(
            dead.is_empty(),
            "followed a MAC given up {SWAP_WINDOW_MS} ms before: {dead:?}"
        );
    });
}

/// A client counted on p1 whom rlbd did not move (the driver's, or a move a restart without
/// its state file forgot) sends to p1's MAC; when the active p0 fails and takes that MAC in the
/// swap, the client's frames go to the dead p0: it is failed over. One counted on p1 since the
/// swap (it heard p1's new MAC) stays.
#[test]
fn a_client_counted_on_the_port_whose_mac_the_dead_slave_took_is_failed_over() {
    for (counted_since_swap, moved) in [(false, true), (true, false)] {
        let w = World::new();
        let mut s = Steerer::new(cfg());
        let key = ClientKey::untagged(CLIENT);
        let ports = infos(&[(P[1], false), (P[0], true), (P[2], true)]);
        let (at, quiet_secs) = if counted_since_swap {
            (5_000, 0)
        } else {
            (1_000, 1)
        };
        let snap = ClientSnap {
            key,
            port: 1,
            rate_bps: if counted_since_swap { 1e6 } else { 0.0 },
            quiet_secs,
            talk: talk(),
        };
        let mut out = Vec::new();
        w.with(|real| {
            let ctx = Ctx {
                host: real.host,
                ports: &ports,
                resync_since: None,
            };
            let dead = s.follow_port_macs(1_000, &[(0, P[0]), (1, P[1])], &ctx);
            assert_eq!(dead, vec![0]);
            let mut views = w.port_views();
            views[0].up = false;
            s.failover(at, &dead, &views, &[snap], &ctx, &mut out);
        });
        assert_eq!(
            s.moved(&key).is_some(),
            moved,
            "counted since the swap: {counted_since_swap}"
        );
    }
}
