//! What the engine makes of the links' own messages beyond up and down.

use super::*;

/// Slave `i`'s link, up, with its counters as they stand and `IFLA_CARRIER_CHANGES` = `flips`.
fn flips(r: &Rig, i: usize, flips: u32) -> NlEvent {
    let NlEvent::Link(l) = slave(i, r.rx[i]) else {
        unreachable!()
    };
    NlEvent::Link(LinkInfo {
        carrier_changes: Some(flips),
        ..l
    })
}

/// A slave that says "up" as before but whose carrier count rose went down and came back
/// unseen (linkwatch folded the two, or an overrun lost them): it is just back, no target for
/// the stable time while another slave is stable, as if its flap had been told.
#[test]
fn a_flap_only_the_carrier_count_tells_makes_the_port_just_back() {
    let mut r = Rig::new();
    let ev: Vec<NlEvent> = (0..3).map(|i| flips(&r, i, 2)).collect();
    r.e.handle(r.now, Input::Netlink(&ev));
    r.drain();
    r.second(&[]);
    let ev = [flips(&r, 1, 4)];
    r.e.handle(r.now, Input::Netlink(&ev));
    r.drain();
    assert!(
        r.logs
            .iter()
            .any(|(t, s)| *t == Topic::Port
                && s.contains("sl1: its carrier went down and came back")),
        "{:?}",
        r.logs
    );
    for _ in 0..4 {
        r.second(&[(1, 0, 6.0), (2, 0, 6.0)]);
    }
    // One client moves (its update sent a few times), to the stable slave, not the one back.
    let moved: Vec<usize> = (1..=2).flat_map(|n| r.moves_of(n)).collect();
    assert!(
        !moved.is_empty() && moved.iter().all(|p| *p == 2),
        "{moved:?}: {:?}",
        r.logs
    );
    // The same count again is no flap.
    let before = r.logs.len();
    let ev = [flips(&r, 1, 4)];
    r.e.handle(r.now, Input::Netlink(&ev));
    r.drain();
    assert!(!r.logs[before..]
        .iter()
        .any(|(_, s)| s.contains("came back")));
}
