//! The moves' bound (the client table's size): a LAN larger than its table moves more clients
//! than the bound, and forgetting a move to keep within it must neither free a client from its
//! hold-down nor lose where it was put.

use std::net::Ipv4Addr;

use super::fixture::*;
use super::*;
use crate::client::ServerSet;
use crate::host::testing::*;
use crate::host::Talk;
use crate::policy::Reason;

/// Six clients the kernel confirms, each with its key and what it talks.
fn clients(w: &mut World) -> Vec<(ClientKey, Talk)> {
    (0..6u8)
        .map(|i| {
            let (mac, ip) = (
                Mac(2, 0, 0, 0, 0, 0x10 + i),
                Ipv4Addr::new(198, 18, 0, 20 + i),
            );
            w.host
                .apply(&neigh(BOND, ip.into(), mac, libc::NUD_REACHABLE));
            let mut servers = ServerSet::default();
            servers.note(SERVER.into(), 0, 0);
            let talk = Talk {
                v4: Some(ip),
                v6: None,
                servers,
            };
            (ClientKey::untagged(mac), talk)
        })
        .collect()
}

#[test]
fn the_bound_forgets_no_move_within_its_hold_down_and_a_forgotten_one_still_fails_over() {
    let mut w = World::new();
    let cs = clients(&mut w);
    let mut s = Steerer::new(SteerConfig {
        max_moved: 4,
        ..cfg()
    });
    let hold = s.config().policy.hold_down * 1000;
    let mut out = Vec::new();
    w.with(|ctx| {
        for (i, (key, talk)) in cs.iter().enumerate() {
            let at = i as u64 * 1000;
            let to_p1 = mv(0, 1, Reason::Overload);
            assert!(s.apply_move(at, *key, talk, &to_p1, "test", ctx, &mut out));
            s.on_timer(at + 999, ctx, &mut out);
        }
    });
    // Six moves within one hold-down, over a bound of four: every one still held.
    for (key, _) in &cs {
        assert!(
            s.held(key, 5000),
            "{key} freed from its hold-down by the bound"
        );
    }
    // Past the hold-down, a new move brings the moves back within the bound: the oldest go...
    let later = hold + 10_000;
    w.with(|ctx| {
        let (key, talk) = &cs[5];
        assert!(s.apply_move(
            later,
            *key,
            talk,
            &mv(1, 2, Reason::Overload),
            "",
            ctx,
            &mut out
        ));
    });
    assert!(s.moved(&cs[0].0).is_none(), "the oldest move is forgotten");
    // ...but where they were put is not: p1 fails, and the forgotten client is moved off it.
    w.usable[1] = false;
    let ports = w.port_views();
    w.with(|ctx| s.failover(later + 1000, &[1], &ports, &[], ctx, &mut out));
    let to = s.moved(&cs[0].0).map(|m| m.port);
    assert!(to.is_some_and(|p| p != 1), "left on the failed p1: {to:?}");
}
