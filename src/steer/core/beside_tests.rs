//! The clients' planner weighs the guests beside the host's clients (their places are the
//! guests' planner's): a client beside a larger guest is not the one flow left alone, and no
//! client moves on the second after a guest moved.

use super::fixture::*;
use super::*;
use crate::policy::{ClientView, Move, PortView};

const CLIENT: ClientKey = ClientKey::untagged(crate::host::testing::CLIENT);

/// Port 0 saturated (98 of 100 Mbit/s), the host's one client on it drawing 20.
fn saturated_p0(w: &World) -> (Vec<PortView>, [ClientSnap; 1]) {
    let mut ports = w.port_views();
    ports[0].rx_bps = 98e6;
    ports[0].overloaded = true;
    let snap = ClientSnap {
        key: CLIENT,
        port: 0,
        rate_bps: 20e6,
        quiet_secs: 0,
        talk: talk(),
    };
    (ports, [snap])
}

fn rebalance(now: u64, beside: &[ClientView]) -> (Steerer, Vec<PortIndex>, Vec<Action>) {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let (ports, clients) = saturated_p0(&w);
    let mut out = Vec::new();
    let made = w.with(|ctx| {
        let why = |_: &Move| "overload".to_string();
        s.rebalance(now, (&ports, beside), &clients, &why, ctx, &mut out)
            .to_vec()
    });
    (s, made, out)
}

#[test]
fn a_client_alone_on_its_port_is_the_one_flow_left_alone() {
    let (s, made, _) = rebalance(0, &[]);
    assert!(made.is_empty());
    assert!(s.moved(&CLIENT).is_none());
}

#[test]
fn a_client_beside_a_larger_guest_moves_and_the_guest_stays() {
    let (s, made, out) = rebalance(0, &[ClientView::moved_flow(0, 70e6, None)]);
    assert_eq!(made, vec![0], "{out:?}");
    assert!(s.moved(&CLIENT).is_some_and(|m| m.port != 0));
    assert_eq!(s.flows().len(), 1, "the flows are the clients only");
}

#[test]
fn no_client_moves_on_the_second_after_a_guest_moved() {
    for since in 0..crate::policy::SETTLE_SECS {
        let (s, made, out) = rebalance(0, &[ClientView::moved_flow(0, 70e6, Some(since))]);
        assert!(made.is_empty(), "{since} s after a guest moved: {out:?}");
        assert!(s.moved(&CLIENT).is_none());
    }
    let (_, made, _) = rebalance(
        0,
        &[ClientView::moved_flow(
            0,
            70e6,
            Some(crate::policy::SETTLE_SECS),
        )],
    );
    assert_eq!(made, vec![0], "on a clean second the client moves");
}
