//! One test per rule of the paper (section 4.3 as `algorithm.md` reads it), then the extensions,
//! then properties over random inputs.

use proptest::prelude::*;

use super::*;

const GBIT: f64 = 1e9;
const MBIT: f64 = 1e6;

fn port(cap: f64, rx: f64, overloaded: bool) -> PortView {
    PortView {
        capacity_bps: cap,
        up: true,
        rx_bps: rx,
        overloaded,
        resolution_bps: 0.0,
    }
}

fn client(port: PortIndex, rate: f64) -> ClientView {
    ClientView {
        port,
        rate_bps: rate,
        held: false,
        fixed: false,
        since_move: None,
        last_move: None,
    }
}

fn cfg() -> PolicyConfig {
    PolicyConfig::default()
}

/// Ports' rx is the sum of their clients' rates, as on a real port.
fn ports_from(caps: &[f64], clients: &[ClientView], overloaded: &[bool]) -> Vec<PortView> {
    caps.iter()
        .enumerate()
        .map(|(i, &c)| {
            let rx = clients
                .iter()
                .filter(|x| x.port == i)
                .map(|x| x.rate_bps)
                .sum();
            port(c, rx, overloaded[i])
        })
        .collect()
}

#[test]
fn paper_test_two_gbe_c1_c3_on_slave0_one_moves_to_slave1() {
    // C1 and C3 share slave 0 and split its gigabit; C2 and C4 idle on slave 1.
    let clients = [
        client(0, 500.0 * MBIT),
        client(1, 1.0 * MBIT),
        client(0, 500.0 * MBIT),
        client(1, 1.0 * MBIT),
    ];
    let ports = ports_from(&[GBIT, GBIT], &clients, &[true, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!((moves[0].from, moves[0].to), (0, 1));
    assert!(moves[0].client == 0 || moves[0].client == 2);
    assert_eq!(moves[0].reason, Reason::Overload);
}

#[test]
fn rule_floor_clients_under_5kbyte_per_s_are_ignored_and_not_counted() {
    // One big client and a keep-alive at 4 KB/s: N = 1 after the floor, so nothing moves.
    let clients = [client(0, 900.0 * MBIT), client(0, 32_000.0)];
    let ports = ports_from(&[GBIT, GBIT], &clients, &[true, false]);
    assert!(plan(&cfg(), &ports, &clients).is_empty());
}

#[test]
fn rule_n_equals_one_single_flow_is_not_moved() {
    let clients = [client(0, 950.0 * MBIT)];
    let ports = ports_from(&[GBIT, GBIT], &clients, &[true, false]);
    assert!(plan(&cfg(), &ports, &clients).is_empty());
}

#[test]
fn rule_3_1_without_single_big_flow_walk_n_minus_1() {
    // Three equal clients and two empty ports: only two may go, one always stays.
    let clients = [
        client(0, 300.0 * MBIT),
        client(0, 300.0 * MBIT),
        client(0, 300.0 * MBIT),
    ];
    let ports = ports_from(&[GBIT, GBIT, GBIT], &clients, &[true, false, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert_eq!(moves.len(), 2, "{moves:?}");
    assert!(
        moves.iter().all(|m| m.client != 2),
        "the last of the walk stays: {moves:?}"
    );
    let targets: Vec<_> = moves.iter().map(|m| m.to).collect();
    assert_eq!(
        targets,
        vec![1, 2],
        "each goes to the least-loaded port at that moment"
    );
}

#[test]
fn rule_3_2_the_single_biggest_flow_never_moves_but_the_others_may() {
    // An elephant at 810 (>= 0.8 x 1000) and two mice; walk N, skipping the elephant. (At 92%
    // the port is not saturated: the rates are the demands; two empty ports take one mouse
    // each, as every port takes at most one client a round.)
    let clients = [
        client(0, 810.0 * MBIT),
        client(0, 70.0 * MBIT),
        client(0, 40.0 * MBIT),
    ];
    let ports = ports_from(&[GBIT, GBIT, GBIT], &clients, &[true, false, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert!(moves.iter().all(|m| m.client != 0), "{moves:?}");
    let moved: Vec<_> = moves.iter().map(|m| m.client).collect();
    assert_eq!(moved, vec![1, 2], "with an elephant the walk covers all N");
}

#[test]
fn rule_3a_target_is_the_least_loaded_port() {
    let clients = [
        client(0, 500.0 * MBIT),
        client(0, 450.0 * MBIT),
        client(1, 300.0 * MBIT),
        client(2, 100.0 * MBIT),
    ];
    let ports = ports_from(&[GBIT, GBIT, GBIT], &clients, &[true, false, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert_eq!(moves[0].to, 2, "{moves:?}");
}

#[test]
fn rule_3b_a_move_that_would_push_the_target_over_threshold_is_skipped() {
    // Target already at 0.5; moving 400 would put it at 0.9 > 0.8; the 200 one fits.
    let clients = [
        client(0, 400.0 * MBIT),
        client(0, 200.0 * MBIT),
        client(0, 300.0 * MBIT),
        client(1, 500.0 * MBIT),
    ];
    let ports = ports_from(&[GBIT, GBIT], &clients, &[true, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert!(moves.iter().all(|m| m.client != 0), "{moves:?}");
    assert!(
        moves.iter().any(|m| m.client == 2 || m.client == 1),
        "{moves:?}"
    );
    for m in &moves {
        assert!(m.to_util.1 <= 0.8 + 1e-12, "{m:?}");
    }
}

#[test]
fn rule_3c_rate_must_be_less_than_the_load_difference() {
    // Hot at 0.85, target at 0.45: a 400 client would leave the target (0.85) no better off.
    let clients = [
        client(0, 400.0 * MBIT),
        client(0, 450.0 * MBIT),
        client(1, 450.0 * MBIT),
    ];
    let ports = ports_from(&[GBIT, GBIT], &clients, &[true, false]);
    let cfg = PolicyConfig {
        threshold: 0.9,
        ..cfg()
    };
    let moves = plan(&cfg, &ports, &clients);
    assert!(moves.is_empty(), "{moves:?}");
}

#[test]
fn rule_4_walk_stops_when_the_best_port_is_the_hot_one() {
    // After the first move the hot port is the least loaded: the second client stays.
    let clients = [
        client(0, 500.0 * MBIT),
        client(0, 400.0 * MBIT),
        client(0, 10.0 * MBIT),
    ];
    let ports = ports_from(&[GBIT, GBIT], &clients, &[true, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!(moves[0].client, 0);
}

#[test]
fn loads_are_updated_after_each_move() {
    // Two targets; the two moves must spread over both, not pile onto the first.
    let clients = [
        client(0, 300.0 * MBIT),
        client(0, 300.0 * MBIT),
        client(0, 300.0 * MBIT),
    ];
    let ports = ports_from(&[GBIT, GBIT, GBIT], &clients, &[true, false, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert_ne!(moves[0].to, moves[1].to);
}

#[test]
fn utilization_not_raw_load_for_mixed_speeds() {
    // A 10G port at 2 Gbit/s (0.2) is less loaded than a 1G port at 0.5 Gbit/s (0.5).
    let clients = [
        client(0, 500.0 * MBIT),
        client(0, 450.0 * MBIT),
        client(1, 500.0 * MBIT),
        client(2, 2.0 * GBIT),
    ];
    let ports = ports_from(&[GBIT, GBIT, 10.0 * GBIT], &clients, &[true, false, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert_eq!(moves[0].to, 2, "{moves:?}");
}

#[test]
fn hold_down_keeps_a_recently_moved_client_in_place() {
    let mut clients = [client(0, 500.0 * MBIT), client(0, 500.0 * MBIT)];
    clients[0].held = true;
    let ports = ports_from(&[GBIT, GBIT], &clients, &[true, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert!(moves.iter().all(|m| m.client != 0), "{moves:?}");
}

#[test]
fn a_fixed_flow_is_the_one_that_stays_so_the_smallest_may_go() {
    // After a failover (`rlbd simulate`'s guests.json): a large guest held by its hold-down, a
    // host client the guests' planner may not move, and a small guest, on a port at 85%; the
    // other port at 60%. The walk's N-1 largest are the two that cannot go: the host client
    // stays anyway, so the smallest may go (it ends the overload).
    let mut clients = [
        client(0, 60.0 * MBIT),
        client(0, 15.0 * MBIT).fixed(),
        client(0, 10.0 * MBIT),
        client(1, 60.0 * MBIT),
    ];
    clients[0].held = true;
    let ports = ports_from(&[100.0 * MBIT, 100.0 * MBIT], &clients, &[true, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!((moves[0].client, moves[0].to), (2, 1), "{moves:?}");
    // Held by the hold-down only, the 15 Mbit/s client may go at the next round: the smallest
    // is the one that stays (the paper's N-1), and nothing moves now.
    clients[1] = client(0, 15.0 * MBIT);
    clients[1].held = true;
    let moves = plan(&cfg(), &ports, &clients);
    assert!(moves.is_empty(), "{moves:?}");
}

#[test]
fn a_down_port_is_never_a_target() {
    let clients = [client(0, 500.0 * MBIT), client(0, 500.0 * MBIT)];
    let mut ports = ports_from(&[GBIT, GBIT, GBIT], &clients, &[true, false, false]);
    ports[1].up = false;
    let moves = plan(&cfg(), &ports, &clients);
    assert!(moves.iter().all(|m| m.to == 2), "{moves:?}");
}

#[test]
fn failover_moves_every_client_off_a_down_port_least_loaded_first_even_when_held() {
    let mut clients = [
        client(1, 300.0 * MBIT),
        client(1, 200.0 * MBIT),
        client(1, 1_000.0), // under the floor: still moved, it would receive nothing
        client(0, 100.0 * MBIT),
    ];
    clients[1].held = true;
    let mut ports = ports_from(&[GBIT, GBIT, GBIT], &clients, &[false, false, false]);
    ports[1].up = false;
    let moves = plan(&cfg(), &ports, &clients);
    let failover: Vec<_> = moves
        .iter()
        .filter(|m| m.reason == Reason::Failover)
        .collect();
    assert_eq!(failover.len(), 3, "{moves:?}");
    assert_eq!(
        (failover[0].client, failover[0].to),
        (0, 2),
        "largest first to the emptiest"
    );
    assert_eq!(
        (failover[1].client, failover[1].to),
        (1, 0),
        "then to the next least loaded"
    );
    assert!(moves.iter().all(|m| m.to != 1));
}

#[test]
fn failover_deals_quiet_clients_round_the_live_ports_least_loaded_first() {
    // p0 fails with one busy client and seven quiet ones (idle, or only resolved): p2 is the
    // emptiest, then p3, then p1 (once the busy client has gone to p2, p3 is).
    let mut clients = vec![client(0, 50.0 * MBIT)];
    clients.extend((0..7).map(|_| client(0, 0.0)));
    clients.push(client(1, 300.0 * MBIT));
    clients.push(client(2, 10.0 * MBIT));
    clients.push(client(3, 100.0 * MBIT));
    let mut ports = ports_from(&[GBIT; 4], &clients, &[false; 4]);
    ports[0].up = false;
    let moves = plan(&cfg(), &ports, &clients);
    assert!(moves
        .iter()
        .all(|m| m.reason == Reason::Failover && m.from == 0));
    assert_eq!((moves[0].client, moves[0].to), (0, 2), "{moves:?}");
    let quiet: Vec<PortIndex> = moves[1..].iter().map(|m| m.to).collect();
    // After the busy one: p2 60, p3 100, p1 300 Mbit/s.
    assert_eq!(quiet, vec![2, 3, 1, 2, 3, 1, 2], "{moves:?}");
    assert!(moves[1..]
        .iter()
        .all(|m| m.rate_bps == 0.0 && m.to_util.0 == m.to_util.1));
}

#[test]
fn placement_picks_the_least_utilized_live_port() {
    let mut ports = vec![
        port(GBIT, 500.0 * MBIT, false),
        port(10.0 * GBIT, 2.0 * GBIT, false),
        port(GBIT, 0.0, false),
    ];
    assert_eq!(place(&ports), Some(2));
    ports[2].up = false;
    assert_eq!(place(&ports), Some(1), "0.2 of 10G beats 0.5 of 1G");
    for p in ports.iter_mut() {
        p.up = false;
    }
    assert_eq!(place(&ports), None);
}

#[test]
fn no_live_port_means_no_moves() {
    let clients = [client(0, 500.0 * MBIT)];
    let mut ports = ports_from(&[GBIT], &clients, &[false]);
    ports[0].up = false;
    assert!(plan(&cfg(), &ports, &clients).is_empty());
}

#[test]
fn bad_numbers_do_not_panic_or_move() {
    let clients = [
        client(0, f64::NAN),
        client(0, f64::INFINITY),
        client(7, 1.0),
        client(0, -5.0),
    ];
    let ports = vec![
        port(GBIT, f64::NAN, true),
        port(0.0, 0.0, false),
        port(f64::NAN, 0.0, false),
    ];
    let _ = plan(&cfg(), &ports, &clients);
}

// ---- properties ----

fn scenario() -> impl Strategy<Value = (Vec<PortView>, Vec<ClientView>, u64)> {
    (2usize..6)
        .prop_flat_map(|np| {
            let ports = prop::collection::vec(
                (
                    prop::sample::select(vec![100.0 * MBIT, GBIT, 10.0 * GBIT]),
                    any::<bool>(),
                    prop::bool::weighted(0.85),
                ),
                np,
            );
            let clients =
                prop::collection::vec((0..np, 0.0f64..1.2e9, prop::bool::weighted(0.2)), 0..40);
            (ports, clients, any::<u64>())
        })
        .prop_map(|(ports, clients, seed)| {
            let clients: Vec<ClientView> = clients
                .into_iter()
                .map(|(p, r, held)| ClientView {
                    port: p,
                    rate_bps: r,
                    held,
                    fixed: false,
                    since_move: None,
                    last_move: None,
                })
                .collect();
            let ports = ports
                .into_iter()
                .enumerate()
                .map(|(i, (cap, overloaded, up))| {
                    let rx: f64 = clients
                        .iter()
                        .filter(|c| c.port == i)
                        .map(|c| c.rate_bps)
                        .sum();
                    PortView {
                        capacity_bps: cap,
                        up,
                        rx_bps: rx,
                        overloaded: overloaded || rx > 0.8 * cap,
                        resolution_bps: 0.0,
                    }
                })
                .collect();
            (ports, clients, seed)
        })
}

fn peak(ports: &[PortView], load: &[f64]) -> f64 {
    ports
        .iter()
        .zip(load)
        .filter(|(p, _)| p.up)
        .map(|(p, l)| l / p.capacity_bps)
        .fold(0.0, f64::max)
}

proptest! {
    #[test]
    fn prop_no_move_targets_a_down_port((ports, clients, _) in scenario()) {
        for m in plan(&cfg(), &ports, &clients) {
            prop_assert!(ports[m.to].up, "{m:?}");
        }
    }

    #[test]
    fn prop_no_overload_move_pushes_a_target_over_threshold_or_a_saturated_ports_over_max_fill(
        (ports, clients, _) in scenario()
    ) {
        // The paper's rule 3(b), except off a saturated port (issue 15): then up to max_fill,
        // or when nothing fits there, one client up to the saturated port's own level. An
        // exchange's halves are made together: the target is judged after both.
        let c = cfg();
        let mut load: Vec<f64> = ports.iter().map(|p| p.rx_bps).collect();
        let mut past_fill = std::collections::HashMap::new();
        let moves = plan(&c, &ports, &clients);
        for (i, m) in moves.iter().enumerate() {
            if i > 0 && moves[i - 1].exchange {
                continue; // made with the first half
            }
            load[m.from] -= m.rate_bps;
            load[m.to] += m.rate_bps;
            if m.exchange {
                let other = &moves[i + 1];
                prop_assert_eq!((other.from, other.to), (m.to, m.from), "{:?}", moves);
                load[other.from] -= other.rate_bps;
                load[other.to] += other.rate_bps;
            }
            if m.reason != Reason::Overload {
                continue;
            }
            let util = load[m.to] / ports[m.to].capacity_bps;
            if ports[m.from].utilization() < c.saturated {
                prop_assert!(util <= c.threshold + 1e-9, "{m:?}");
            } else if util > c.max_fill + 1e-9 {
                prop_assert!(util <= ports[m.from].utilization() + 1e-9, "{m:?}");
                *past_fill.entry(m.from).or_insert(0) += 1;
            }
        }
        prop_assert!(past_fill.values().all(|&n| n == 1), "{past_fill:?}");
    }

    #[test]
    fn prop_each_port_takes_at_most_one_client_per_round_for_overload(
        (ports, clients, _) in scenario()
    ) {
        let mut got = std::collections::HashMap::new();
        for m in plan(&cfg(), &ports, &clients) {
            if m.reason == Reason::Overload {
                *got.entry(m.to).or_insert(0) += 1;
            }
        }
        prop_assert!(got.values().all(|&n| n == 1), "{got:?}");
    }

    #[test]
    fn prop_nothing_moves_for_overload_while_a_move_settles(
        (ports, mut clients, _) in scenario(),
        which in any::<prop::sample::Index>(),
        ago in 0u64..SETTLE_SECS,
    ) {
        if clients.is_empty() {
            return Ok(());
        }
        let i = which.index(clients.len());
        clients[i].since_move = Some(ago);
        for m in plan(&cfg(), &ports, &clients) {
            prop_assert_eq!(m.reason, Reason::Failover);
        }
    }

    #[test]
    fn prop_peak_utilization_never_rises((ports, clients, _) in scenario()) {
        // Failover load has nowhere else to go; the property is about balancing moves.
        let all_up: Vec<PortView> = ports.iter().map(|p| PortView { up: true, ..p.clone() }).collect();
        let mut load: Vec<f64> = all_up.iter().map(|p| p.rx_bps).collect();
        let before = peak(&all_up, &load);
        for m in plan(&cfg(), &all_up, &clients) {
            load[m.from] -= m.rate_bps;
            load[m.to] += m.rate_bps;
        }
        prop_assert!(peak(&all_up, &load) <= before + 1e-9);
    }

    #[test]
    fn prop_single_big_flow_never_moves((ports, clients, _) in scenario()) {
        let c = cfg();
        for m in plan(&c, &ports, &clients) {
            if m.reason == Reason::Overload {
                prop_assert!(m.rate_bps < c.threshold * ports[m.from].capacity_bps, "{m:?}");
            }
        }
    }

    #[test]
    fn prop_held_clients_move_only_on_failover((ports, clients, _) in scenario()) {
        for m in plan(&cfg(), &ports, &clients) {
            if clients[m.client].held {
                prop_assert_eq!(m.reason, Reason::Failover);
                prop_assert!(!ports[m.from].up);
            }
        }
    }

    #[test]
    fn prop_same_input_same_output((ports, clients, _) in scenario()) {
        prop_assert_eq!(plan(&cfg(), &ports, &clients), plan(&cfg(), &ports, &clients));
    }

    #[test]
    fn prop_a_client_moves_at_most_once_per_round((ports, clients, _) in scenario()) {
        let moves = plan(&cfg(), &ports, &clients);
        let mut seen = std::collections::HashSet::new();
        for m in &moves {
            prop_assert!(seen.insert(m.client), "{moves:?}");
        }
    }
}

mod packing;
