//! Settling on fixed cases: a client whose move overfilled its port moves on or is exchanged,
//! never back to the port it left, once, and only within the window.

use super::*;
use crate::policy::plan;

const MBIT: f64 = 1e6;

fn client(port: PortIndex, mbit: f64) -> ClientView {
    ClientView {
        port,
        rate_bps: mbit * MBIT,
        held: false,
        fixed: false,
        since_move: None,
        last_move: None,
    }
}

/// Client 3 moved p0 -> p1 `since` seconds ago for `why`, and filled p1: 20 Mbit/s ports, p1
/// reads full (7 + 12.4); p0 has room for it (the port it left), p2 has `p2` clients.
fn case(since: u64, why: Reason, p2: &[f64]) -> (Vec<PortView>, Vec<ClientView>) {
    let mut clients = vec![client(0, 3.0), client(0, 3.0), client(0, 3.0)];
    clients.push(ClientView {
        held: true,
        since_move: Some(since),
        last_move: Some((0, why)),
        ..client(1, 7.0)
    });
    clients.push(client(1, 12.4));
    clients.push(client(3, 14.0));
    clients.extend(p2.iter().map(|&r| client(2, r)));
    let ports = (0..4)
        .map(|p| PortView {
            capacity_bps: 20.0 * MBIT,
            up: true,
            rx_bps: clients
                .iter()
                .filter(|c| c.port == p)
                .map(|c| c.rate_bps)
                .sum(),
            overloaded: false,
            resolution_bps: 0.0,
        })
        .collect();
    (ports, clients)
}

fn moves(
    ports: &[PortView],
    clients: &[ClientView],
) -> Vec<(usize, PortIndex, PortIndex, Reason, bool)> {
    plan(&PolicyConfig::default(), ports, clients)
        .iter()
        .map(|m| (m.client, m.from, m.to, m.reason, m.exchange))
        .collect()
}

#[test]
fn a_client_that_overfilled_its_port_moves_on_to_room_but_not_back() {
    // p0 has the most room (11 Mbit/s) but is the port it left; p2 takes 7 under 93%.
    let (ports, clients) = case(3, Reason::Overload, &[10.0]);
    assert_eq!(
        moves(&ports, &clients),
        vec![(3, 1, 2, Reason::Settle, false)]
    );
}

#[test]
fn where_it_fits_nowhere_it_is_exchanged_with_a_smaller_client() {
    // p2 has 5.6 Mbit/s of room under 93%: too little for 7, enough once its 4 Mbit/s client
    // leaves (its 9 Mbit/s one would give p1 more than it sheds).
    let (ports, clients) = case(2, Reason::Overload, &[9.0, 4.0]);
    assert_eq!(
        moves(&ports, &clients),
        vec![
            (3, 1, 2, Reason::Settle, true),
            (7, 2, 1, Reason::Settle, false)
        ]
    );
}

#[test]
fn an_exchange_that_sheds_next_to_nothing_is_not_made() {
    // p2's 6.9 Mbit/s client would make room for 7, but p1 would shed 0.1 Mbit/s for two
    // clients' last move of the hold-down; 6.7 sheds 0.3, over a quarter of `min_gain` (1 Mbit/s).
    let (ports, clients) = case(2, Reason::Overload, &[9.0, 6.9]);
    assert_eq!(moves(&ports, &clients), vec![]);
    let (ports, clients) = case(2, Reason::Overload, &[9.0, 6.7]);
    assert_eq!(
        moves(&ports, &clients),
        vec![
            (3, 1, 2, Reason::Settle, true),
            (7, 2, 1, Reason::Settle, false)
        ]
    );
}

#[test]
fn a_move_is_settled_once_and_only_within_the_window() {
    for (since, why) in [
        (1, Reason::Overload),  // the figures are not clean yet
        (11, Reason::Overload), // past `settle` (10 s)
        (3, Reason::Settle),    // already corrected
        (3, Reason::Failover),  // a failover is not second-guessed
    ] {
        let (ports, clients) = case(since, why, &[10.0]);
        assert_eq!(moves(&ports, &clients), vec![], "{since} s after {why:?}");
    }
    let cfg = PolicyConfig {
        settle: 0,
        ..PolicyConfig::default()
    };
    let (ports, clients) = case(3, Reason::Overload, &[10.0]);
    assert!(plan(&cfg, &ports, &clients).is_empty(), "settle = 0 is off");
}
