//! A move is believed made only once one of its frames went out: the outcomes the event loop
//! reports ([`Steerer::on_send_result`]) undo a move whose every frame was refused.

use super::fixture::*;
use super::*;

const CLIENT: ClientKey = ClientKey::untagged(crate::host::testing::CLIENT);

/// Plays the event loop: carries out the core's sends with `outcome(round)` for every frame
/// (round 0 is the move's first send, 1 and 2 its repeats), and lets the repeats come due.
fn drive(
    s: &mut Steerer,
    w: &World,
    at: u64,
    to: PortIndex,
    reason: Reason,
    outcome: impl Fn(usize) -> SendOutcome,
) -> (bool, Vec<Action>) {
    let mut out = Vec::new();
    let mut log = Vec::new();
    let made =
        w.with(|ctx| s.apply_move(at, CLIENT, &talk(), &mv(0, to, reason), "t", ctx, &mut out));
    let mut round = 0;
    let mut now = at;
    loop {
        let sent: Vec<u64> = out
            .iter()
            .filter_map(|a| match a {
                Action::Send { move_id, .. } => Some(*move_id),
                _ => None,
            })
            .collect();
        log.append(&mut out);
        w.with(|ctx| {
            for id in sent {
                s.on_send_result(now, CLIENT, id, outcome(round), ctx, &mut out);
            }
        });
        log.append(&mut out);
        match s.next_due() {
            Some(due) if due < at + 2000 => {
                now = due;
                round += 1;
                w.with(|ctx| s.on_timer(now, ctx, &mut out));
            }
            _ => break,
        }
    }
    (made, log)
}

fn infos(out: &[Action]) -> Vec<&String> {
    out.iter()
        .filter_map(|a| match a {
            Action::Log(Level::Info, _, m, _) => Some(m),
            _ => None,
        })
        .collect()
}

#[test]
fn a_move_whose_every_frame_is_refused_is_not_made() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let (made, out) = drive(&mut s, &w, 0, 1, Reason::Overload, |_| SendOutcome::Refused);
    assert!(made, "the decision was made");
    assert!(s.moved(&CLIENT).is_none(), "but the move was not");
    assert_eq!(s.counters().moves_refused, 1);
    assert!(
        infos(&out)
            .iter()
            .any(|m| m.contains("not made: the kernel refused all 6 of its frames")),
        "{out:?}"
    );
    // The planner may try again, after a delay, not at once.
    assert!(s.held(&CLIENT, 600));
    assert!(!s.held(&CLIENT, 2500));
}

#[test]
fn one_frame_sent_makes_the_move() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    // The first round refused (the queue full), the repeats sent.
    drive(&mut s, &w, 0, 1, Reason::Overload, |r| {
        if r == 0 {
            SendOutcome::Refused
        } else {
            SendOutcome::Sent
        }
    });
    assert_eq!(s.moved(&CLIENT).map(|m| m.port), Some(1));
    assert_eq!(s.counters().moves_refused, 0);
    // Refusals after the move is confirmed (a port going down later) undo nothing.
    let id = s.moved(&CLIENT).unwrap().move_id;
    let mut out = Vec::new();
    w.with(|ctx| {
        for _ in 0..10 {
            s.on_send_result(5000, CLIENT, id, SendOutcome::Refused, ctx, &mut out);
        }
    });
    assert_eq!(s.moved(&CLIENT).map(|m| m.port), Some(1));
}

#[test]
fn a_refused_move_leaves_the_client_where_rlbd_had_put_it() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    drive(&mut s, &w, 0, 1, Reason::Overload, |_| SendOutcome::Sent);
    let before = s.moved(&CLIENT).unwrap().clone();
    // p1 fails; the failover to p2 is refused whole (p2 went down too, unannounced).
    drive(&mut s, &w, 40_000, 2, Reason::Failover, |_| {
        SendOutcome::Refused
    });
    let now = s.moved(&CLIENT).unwrap();
    assert_eq!(
        (now.port, now.at_ms, now.reason),
        (before.port, before.at_ms, before.reason)
    );
    assert_eq!(s.counters().moves_refused, 1);
}

#[test]
fn refused_moves_in_a_row_wait_longer_each_time_up_to_the_hold_down() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    let hold = cfg().policy.hold_down * 1000;
    let mut at = 0;
    let mut waits = Vec::new();
    for _ in 0..6 {
        let (made, _) = drive(&mut s, &w, at, 1, Reason::Overload, |_| {
            SendOutcome::Refused
        });
        assert!(made);
        let mut t = at;
        while s.held(&CLIENT, t) {
            t += 100;
        }
        waits.push(t - at);
        at = t;
    }
    assert_eq!(s.counters().moves_refused, 6);
    assert!(waits.windows(2).all(|w| w[1] >= w[0]), "{waits:?}");
    // Each delay runs from the last refusal, half a second (the repeats) after the move.
    assert!(
        waits[0] <= 2600 && *waits.last().unwrap() <= hold + 600,
        "{waits:?}"
    );
    // A move that goes out ends the streak.
    drive(&mut s, &w, at, 1, Reason::Overload, |_| SendOutcome::Sent);
    assert!(!s.held(&CLIENT, at + hold));
}

#[test]
fn the_outcome_of_an_earlier_moves_frame_is_not_this_moves() {
    let w = World::new();
    let mut s = Steerer::new(cfg());
    drive(&mut s, &w, 0, 1, Reason::Overload, |_| SendOutcome::Sent);
    let old = s.moved(&CLIENT).unwrap().move_id;
    let mut out = Vec::new();
    w.with(|ctx| {
        s.apply_move(
            40_000,
            CLIENT,
            &talk(),
            &mv(1, 2, Reason::Overload),
            "t",
            ctx,
            &mut out,
        );
        // Late outcomes of the first move's frames (retried, then given up).
        for _ in 0..20 {
            s.on_send_result(40_000, CLIENT, old, SendOutcome::Refused, ctx, &mut out);
        }
        s.on_timer(41_000, ctx, &mut out);
    });
    assert_eq!(s.moved(&CLIENT).map(|m| m.port), Some(2));
    assert_eq!(s.counters().moves_refused, 0);
}
