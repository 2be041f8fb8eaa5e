//! The planner on a saturated port (issue 15's packing rules), beside the paper's rules.

use super::*;

#[test]
fn a_saturated_port_sends_one_client_to_each_target_then_waits_for_a_clean_second() {
    // 20 Mbit/s ports; p0 saturated by clients whose rates are TCP's shares. Round 1: one client
    // to each of p1, p2, p3, largest first, each to the emptiest port left.
    let mut clients: Vec<ClientView> = [3.0, 2.5, 2.5, 2.0, 2.0, 2.0, 1.5, 1.5, 1.5, 1.5]
        .iter()
        .map(|r| client(0, r * MBIT))
        .collect();
    let caps = [20.0 * MBIT; 4];
    let ports = ports_from(&caps, &clients, &[true, false, false, false]);
    let moves = plan(&cfg(), &ports, &clients);
    let got: Vec<(usize, PortIndex)> = moves.iter().map(|m| (m.client, m.to)).collect();
    assert_eq!(got, vec![(0, 1), (1, 2), (2, 3)]);
    // The next second still shows part of the old placement: nothing moves.
    for m in &moves {
        clients[m.client].port = m.to;
        clients[m.client].held = true;
        clients[m.client].since_move = Some(1);
    }
    let ports = ports_from(&caps, &clients, &[true, false, false, false]);
    assert!(plan(&cfg(), &ports, &clients).is_empty());
}

#[test]
fn past_the_threshold_when_a_saturated_port_loses_more() {
    // The case: p0 at 100% with a 4 Mbit/s client, p1 at 65%. The paper's rule refuses
    // (p1 would end at 85% > 80%); the bond gains 4 Mbit/s by the move, and p1 stays under 93%.
    let clients = [
        client(0, 8.0 * MBIT),
        client(0, 8.0 * MBIT),
        client(0, 4.0 * MBIT),
        client(1, 13.0 * MBIT),
    ];
    let ports = ports_from(&[20.0 * MBIT, 20.0 * MBIT], &clients, &[true, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!((moves[0].client, moves[0].to), (2, 1));
    assert!((moves[0].to_util.1 - 0.85).abs() < 1e-9, "{moves:?}");
    // With max_fill at the threshold, the paper's rule alone: no move.
    let paper = PolicyConfig {
        max_fill: 0.8,
        ..cfg()
    };
    assert!(plan(&paper, &ports, &clients).is_empty());
    // Past max_fill only when nothing else fits, and then only up to p0's level: at 75%, p1
    // takes the 4 Mbit/s client (95% < p0's 100%); at 85%, nothing (105%).
    for (p1, moved) in [(15.0, true), (17.0, false)] {
        let clients = [
            client(0, 8.0 * MBIT),
            client(0, 8.0 * MBIT),
            client(0, 4.0 * MBIT),
            client(1, p1 * MBIT),
        ];
        let ports = ports_from(&[20.0 * MBIT, 20.0 * MBIT], &clients, &[true, false]);
        let moves = plan(&cfg(), &ports, &clients);
        assert_eq!(!moves.is_empty(), moved, "p1 at {p1}: {moves:?}");
        if moved {
            assert_eq!((moves[0].client, moves[0].to), (2, 1));
        }
    }
}

#[test]
fn a_saturated_port_stops_sending_when_what_is_left_looks_no_busier_than_the_target() {
    // From the namespace lab: after two moves p0 counts down to 50%, no busier than p2 with its
    // 9.6 Mbit/s; the rest of p0 is not moved there, least of all the client TCP starved to
    // 0.1 Mbit/s (its demand was 3.6: p2 would have been overfilled unseen).
    let clients = [
        client(0, 5.2 * MBIT),
        client(0, 4.3 * MBIT),
        client(0, 3.7 * MBIT),
        client(0, 3.0 * MBIT),
        client(0, 2.1 * MBIT),
        client(0, 1.2 * MBIT),
        client(0, 0.1 * MBIT),
        client(1, 6.6 * MBIT),
        client(2, 9.6 * MBIT),
        client(3, 3.6 * MBIT),
    ];
    let ports = ports_from(&[20.0 * MBIT; 4], &clients, &[true, false, false, false]);
    let moves = plan(&cfg(), &ports, &clients);
    let got: Vec<(usize, PortIndex)> = moves.iter().map(|m| (m.client, m.to)).collect();
    assert_eq!(got, vec![(0, 3), (1, 1)]);
}

#[test]
fn when_nothing_fits_the_least_served_client_goes_but_not_a_starved_one() {
    // p0 saturated by four clients; every room is under max_fill for each of them. The least
    // served (3.0) goes to the emptiest port up to its capacity; the one TCP starved (0.3, under
    // a quarter of the 4.9 mean share) is passed over.
    let clients = [
        client(0, 8.0 * MBIT),
        client(0, 8.3 * MBIT),
        client(0, 3.0 * MBIT),
        client(0, 0.3 * MBIT),
        client(1, 16.0 * MBIT),
        client(2, 16.5 * MBIT),
    ];
    let ports = ports_from(&[20.0 * MBIT; 3], &clients, &[true, false, false]);
    let moves = plan(&cfg(), &ports, &clients);
    let got: Vec<(usize, PortIndex)> = moves.iter().map(|m| (m.client, m.to)).collect();
    assert_eq!(got, vec![(2, 1)]);
}

#[test]
fn a_port_over_the_threshold_but_not_saturated_keeps_the_papers_rule() {
    // p0 at 90% is overloaded but carries all its clients want: a target above 80% is no gain.
    let clients = [
        client(0, 9.0 * MBIT),
        client(0, 5.0 * MBIT),
        client(0, 4.0 * MBIT),
        client(1, 13.0 * MBIT),
    ];
    let ports = ports_from(&[20.0 * MBIT, 20.0 * MBIT], &clients, &[true, false]);
    assert!(plan(&cfg(), &ports, &clients).is_empty());
}

#[test]
fn a_starved_client_on_a_saturated_port_is_moved_even_beside_an_elephant() {
    // What the kernel lab showed: TCP gave one client 28 of 30 Mbit/s and the other 1.4. The big
    // one counts as the single biggest flow; the starved one must go, or the port stays stuck.
    let clients = [client(0, 28.0 * MBIT), client(0, 1.4 * MBIT)];
    let ports = ports_from(&[30.0 * MBIT, 30.0 * MBIT], &clients, &[true, false]);
    let moves = plan(&cfg(), &ports, &clients);
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!((moves[0].client, moves[0].to), (1, 1));
}

#[test]
fn place_new_spreads_new_clients_and_counts_each_at_once() {
    let cfg = PolicyConfig::default();
    let mb = 1e6;
    // balance-tlb: every new client arrives on the active slave, port 0.
    let ports = vec![
        port(100.0 * mb, 60.0 * mb, false),
        port(100.0 * mb, 0.0, false),
        port(100.0 * mb, 0.0, false),
    ];
    let c = |rate: f64| ClientView {
        port: 0,
        rate_bps: rate,
        held: false,
        fixed: false,
        since_move: None,
        last_move: None,
    };
    let new = vec![c(10.0 * mb), c(30.0 * mb), c(20.0 * mb), c(1_000.0)];
    let moves = place_new(&cfg, &ports, &new);
    let got: Vec<(usize, usize)> = moves.iter().map(|m| (m.client, m.to)).collect();
    // 10 to port 1 (0 -> 10), 30 to port 2 (0 -> 30), 20 to port 1 (10 is now the least);
    // the one under the 5 KB/s floor is left alone.
    assert_eq!(got, vec![(0, 1), (1, 2), (2, 1)]);
    assert!(moves.iter().all(|m| m.reason == Reason::Placement));
    assert!((moves[2].to_util.1 - 0.30).abs() < 1e-9);
}

/// A simulator run that settled for good at 95.5% of the best placement: p0 saturated by three
/// clients drawing 6.5 each, rooms of 3.5, 5.0 and 4.5 Mbit/s under `max_fill` (18.6) on the
/// other ports, each too small for any of them; their clients were moved there long ago.
fn fragmented() -> Vec<ClientView> {
    let mut clients: Vec<ClientView> = [6.5, 6.5, 6.5]
        .iter()
        .map(|r| client(0, r * MBIT))
        .collect();
    for (p, rates) in [
        (1, &[6.3, 3.6, 5.2][..]),
        (2, &[4.6, 9.0]),
        (3, &[5.3, 2.8, 6.0]),
    ] {
        clients.extend(rates.iter().map(|r| client(p, r * MBIT)));
    }
    clients
}

const FOUR: [f64; 4] = [20.0 * MBIT; 4];
const P0_HOT: [bool; 4] = [true, false, false, false];

#[test]
fn room_split_in_pieces_too_small_is_gathered_into_one_then_used() {
    let mut clients = fragmented();
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    // The smallest client that does it: 2.8 Mbit/s from p3 (14.1 -> 11.3, room 7.3) to p2
    // (13.6 -> 16.4, under max_fill): what it draws there is its demand, so p2 ends as planned.
    assert_eq!(moves.len(), 1, "{moves:?}");
    let m = &moves[0];
    assert_eq!((m.client, m.from, m.to, m.reason), (9, 3, 2, Reason::Room));
    assert!((m.to_util.1 - 0.82).abs() < 1e-9, "{m:?}");
    // A clean second later, a client of p0 goes into the gathered room (p3: 11.3 + 6.5 = 17.8).
    clients[9].port = 2;
    clients[9].held = true;
    clients[9].since_move = Some(SETTLE_SECS);
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    let got: Vec<(PortIndex, PortIndex, Reason)> =
        moves.iter().map(|m| (m.from, m.to, m.reason)).collect();
    assert_eq!(got, vec![(0, 3, Reason::Overload)], "{moves:?}");
}

#[test]
fn room_is_not_gathered_with_held_clients_nor_when_one_move_cannot_make_enough() {
    // Held: the clients on the other ports were moved less than the hold-down ago, by a move
    // that is not corrected (no `last_move`: as if by failover or an earlier correction).
    let mut clients = fragmented();
    for c in clients.iter_mut().filter(|c| c.port != 0) {
        c.held = true;
    }
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    assert!(moves.iter().all(|m| m.reason != Reason::Room), "{moves:?}");
    // Two clients of 9.75 need rooms of 9.75: no single move of another port's client frees
    // that much and leaves its new port under max_fill. (One of them trades places instead.)
    let moves = plan(&cfg(), &ports_from(&FOUR, &two_big(), &P0_HOT), &two_big());
    assert!(moves.iter().all(|m| !m.gathers), "{moves:?}");
}

/// p0 saturated by two clients of 9.75 Mbit/s; the other ports as in `fragmented`, their rooms
/// under max_fill (18.6) 3.5, 5.0 and 4.5 Mbit/s.
fn two_big() -> Vec<ClientView> {
    let mut clients = fragmented();
    clients.remove(0);
    for c in clients.iter_mut().filter(|c| c.port == 0) {
        c.rate_bps = 9.75 * MBIT;
    }
    clients
}

#[test]
fn where_nothing_fits_whole_a_client_of_the_saturated_port_trades_places_with_a_smaller_one() {
    // The largest difference that fits: 9.75 for p3's 5.3 (4.45 into p3's room of 4.5). p2's
    // 4.6 would bring 5.15 into its 5.0; p1's 6.3 only 3.45.
    let clients = two_big();
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    let got: Vec<_> = moves
        .iter()
        .map(|m| (m.client, m.from, m.to, m.reason, m.exchange))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 0, 3, Reason::Overload, true),
            (7, 3, 0, Reason::Room, false)
        ],
        "{moves:?}"
    );
    // Both log lines show p0 and p3 before and after the whole exchange, never p3 holding
    // both clients between the halves.
    let p3 = ports_from(&FOUR, &clients, &P0_HOT)[3].utilization();
    let (p0, p3) = ((19.5 / 20.0, (19.5 - 4.45) / 20.0), (p3, p3 + 4.45 / 20.0));
    let near = |a: (f64, f64), b: (f64, f64)| (a.0 - b.0).abs() < 1e-9 && (a.1 - b.1).abs() < 1e-9;
    assert!(
        near(moves[0].from_util, p0) && near(moves[0].to_util, p3),
        "{moves:?}"
    );
    assert!(
        near(moves[1].from_util, p3) && near(moves[1].to_util, p0),
        "{moves:?}"
    );
    // A difference under min_gain of p0 (1 Mbit/s) is not worth the two clients' moves.
    let mut close = two_big();
    for c in close.iter_mut().filter(|c| c.port != 0) {
        c.rate_bps = c.rate_bps.max(9.0 * MBIT);
    }
    let ports = ports_from(
        &[20.0 * MBIT, 40.0 * MBIT, 40.0 * MBIT, 40.0 * MBIT],
        &close,
        &P0_HOT,
    );
    assert!(
        plan(&cfg(), &ports, &close).iter().all(|m| !m.exchange),
        "{close:?}"
    );
}

#[test]
fn a_held_client_trades_places_as_its_final_move_never_back_where_it_came_from() {
    // Every client of p1-p3 came there by one move off p0: none may go back in its place.
    let since = cfg().settle + 1;
    let mut clients = two_big();
    for c in clients.iter_mut().filter(|c| c.port != 0) {
        c.held = true;
        c.since_move = Some(since);
        c.last_move = Some((0, Reason::Overload));
    }
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    assert!(moves.iter().all(|m| !m.exchange), "{moves:?}");
    // Those of p3 came from p1: p3's 5.3 goes to p0 as its final move (settle).
    for c in clients.iter_mut().filter(|c| c.port == 3) {
        c.last_move = Some((1, Reason::Overload));
    }
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    let got: Vec<_> = moves.iter().map(|m| (m.client, m.to, m.reason)).collect();
    assert_eq!(got, vec![(0, 3, Reason::Overload), (7, 0, Reason::Settle)]);
    // A held client of p0 goes as its final move too, not back to the port it left.
    for c in clients.iter_mut().filter(|c| c.port == 0) {
        c.held = true;
        c.since_move = Some(since);
        c.last_move = Some((3, Reason::Overload));
    }
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    assert!(moves.iter().all(|m| m.to != 3 || m.from != 0), "{moves:?}");
    for c in clients.iter_mut().filter(|c| c.port == 0) {
        c.last_move = Some((2, Reason::Overload));
    }
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    let got: Vec<_> = moves.iter().map(|m| (m.client, m.to, m.reason)).collect();
    assert_eq!(got, vec![(0, 3, Reason::Settle), (7, 0, Reason::Settle)]);
}

#[test]
fn a_held_client_gathers_room_as_its_final_move_never_back_where_it_came_from() {
    // The clients on the other ports were moved there off p0 `since` seconds ago: one move each,
    // so one may still move once (issue 27), as `Settle`, and not back to the port it left.
    let since = cfg().settle + 1;
    let held_since = |clients: &mut [ClientView], left: PortIndex, why: Reason, since: u64| {
        for c in clients.iter_mut().filter(|c| c.port != 0) {
            c.held = true;
            c.since_move = Some(since);
            c.last_move = Some((left, why));
        }
    };
    let held = |clients: &mut [ClientView], left: PortIndex, why: Reason| {
        held_since(clients, left, why, since)
    };
    // While their moves are fresh they may still be growing: their ports' room is not known
    // yet, no gathering. Past that (5 s, still within the settling window), with none of their
    // ports over-full, waiting for the window's end would only delay the bond.
    let mut clients = fragmented();
    held_since(&mut clients, 0, Reason::Overload, SETTLE_SECS);
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    assert!(moves.iter().all(|m| !m.gathers), "{moves:?}");
    assert!(5 < cfg().settle);
    let mut clients = fragmented();
    held_since(&mut clients, 0, Reason::Overload, 5);
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    let got: Vec<_> = moves.iter().map(|m| (m.client, m.gathers)).collect();
    assert_eq!(got, vec![(9, true)], "{moves:?}");
    let mut clients = fragmented();
    held(&mut clients, 0, Reason::Overload);
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    let got: Vec<_> = moves
        .iter()
        .map(|m| (m.client, m.from, m.to, m.reason))
        .collect();
    assert_eq!(got, vec![(9, 3, 2, Reason::Settle)], "{moves:?}");
    assert!(moves[0].gathers, "its log line says why: {moves:?}");
    // Had it come from p2, it goes to p1 instead (15.1 -> 17.9, under max_fill).
    let mut clients = fragmented();
    held(&mut clients, 2, Reason::Overload);
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    let got: Vec<_> = moves
        .iter()
        .map(|m| (m.client, m.from, m.to, m.reason))
        .collect();
    assert_eq!(got, vec![(9, 3, 1, Reason::Settle)], "{moves:?}");
    // A client already corrected (or failed over) is final for its hold-down.
    for why in [Reason::Settle, Reason::Failover] {
        let mut clients = fragmented();
        held(&mut clients, 0, why);
        let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
        assert!(moves.iter().all(|m| m.client < 3), "{why:?}: {moves:?}");
    }
}

#[test]
fn two_saturated_ports_never_gather_with_the_same_client() {
    // p0 and p1 both saturated; the one client that can gather room (2.8 on p3) moves once.
    let mut clients: Vec<ClientView> = [6.5, 6.5, 6.5]
        .iter()
        .map(|r| client(0, r * MBIT))
        .collect();
    clients.extend([6.5, 6.5, 6.5].iter().map(|r| client(1, r * MBIT)));
    for (p, rates) in [
        (2, &[4.6, 9.0][..]),
        (3, &[5.3, 2.8, 6.0]),
        (4, &[6.3, 3.6, 5.2]),
    ] {
        clients.extend(rates.iter().map(|r| client(p, r * MBIT)));
    }
    let ports = ports_from(
        &[20.0 * MBIT; 5],
        &clients,
        &[true, true, false, false, false],
    );
    let moves = plan(&cfg(), &ports, &clients);
    let mut seen: Vec<usize> = moves.iter().map(|m| m.client).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), moves.len(), "{moves:?}");
    assert!(moves.iter().any(|m| m.reason == Reason::Room), "{moves:?}");
}

/// Issue 27's study, 95% load, seed 1: p0 saturated with four clients, every other port a few
/// Mbit/s short of p0's smallest, and no single move between them frees enough. Its clients
/// were moved off p0 and are held.
fn split_beyond_one_move(left: PortIndex) -> Vec<ClientView> {
    let mut clients: Vec<ClientView> = [6.0, 5.5, 4.1, 3.8]
        .iter()
        .map(|r| client(0, r * MBIT))
        .collect();
    for (port, rates) in [
        (1, &[9.1, 7.8][..]),
        (2, &[7.6, 8.4]),
        (3, &[5.4, 5.4, 5.9]),
    ] {
        for r in rates {
            let mut c = client(port, r * MBIT);
            c.held = true;
            c.since_move = Some(cfg().settle + 1);
            c.last_move = Some((left, Reason::Overload));
            clients.push(c);
        }
    }
    clients
}

#[test]
fn room_no_single_move_gathers_is_gathered_by_an_exchange_never_back_where_they_came_from() {
    // p2 (16.0) and p3 (16.7) trade 7.6 for 5.9: p2 ends at 14.3, room for p0's 3.8 under
    // max_fill, and p3 at 18.4, under it. Both clients are held: each is its final move.
    let clients = split_beyond_one_move(0);
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    let got: Vec<_> = moves
        .iter()
        .map(|m| (m.client, m.from, m.to, m.reason))
        .collect();
    assert_eq!(
        got,
        vec![(6, 2, 3, Reason::Settle), (10, 3, 2, Reason::Settle)],
        "{moves:?}"
    );
    assert!(
        moves[0].exchange && moves.iter().all(|m| m.gathers),
        "{moves:?}"
    );
    // Had they come from p2, p3's client may not go there within its hold-down: the other
    // exchanges leave no port room enough, so none is made.
    let clients = split_beyond_one_move(2);
    let moves = plan(&cfg(), &ports_from(&FOUR, &clients, &P0_HOT), &clients);
    assert!(moves.iter().all(|m| !m.gathers), "{moves:?}");
}
