//! Pinned and excluded clients through the door, a reload that pins to no port, and a retry
//! only to a client the kernel still confirms, with the port's MAC still the frame's.

use super::*;

fn pinned_and_excluded() -> Settings {
    let mut s = settings();
    s.clients.pin.insert(client(1).1.to_string(), "sl2".into());
    s.clients.exclude.push(client(2).1.to_string());
    s
}

#[test]
fn a_pinned_client_is_placed_an_excluded_one_never_sent_a_frame_and_status_marks_them() {
    let mut r = Rig::new();
    r.e.handle(
        r.now,
        Input::Reload {
            settings: Box::new(pinned_and_excluded()),
            why: "test",
        },
    );
    r.drain();
    for _ in 0..8 {
        r.second(&[(1, 0, 4.0), (2, 0, 5.0), (3, 1, 1.0)]);
    }
    let to_1 = r.moves_of(1);
    assert!(
        !to_1.is_empty() && to_1.iter().all(|p| *p == 2),
        "{:?}",
        r.sends
    );
    assert!(
        r.moves_of(2).is_empty(),
        "excluded, yet sent: {:?}",
        r.sends
    );
    let status = super::report::status(&r.e, r.now, None);
    let row = |n: u8| {
        let ip = client(n).1.to_string();
        status.clients.iter().find(|c| c.ip == ip).cloned().unwrap()
    };
    assert_eq!(row(1).pinned.as_deref(), Some("sl2"));
    assert!(row(2).excluded && row(2).pinned.is_none());
    assert!(!row(3).excluded && row(3).pinned.is_none());
}

#[test]
fn a_reload_pinning_to_a_port_that_is_not_a_slave_keeps_the_old_settings() {
    let mut r = Rig::new();
    let mut bad = pinned_and_excluded();
    bad.clients.pin.insert("198.18.0.99".into(), "eth9".into());
    bad.clients
        .places
        .insert("pin.198.18.0.99".into(), "/etc/rlbd/rlbd.toml:12".into());
    bad.policy.hold_down = 7;
    r.e.handle(
        r.now,
        Input::Reload {
            settings: Box::new(bad),
            why: "SIGHUP",
        },
    );
    r.drain();
    let i = r
        .logs
        .iter()
        .position(|(t, _)| *t == Topic::Config)
        .unwrap();
    let said = &r.logs[i];
    assert_eq!(r.fields[i], crate::logging::Fields::config_refused());
    assert!(
        said.1
            .contains("/etc/rlbd/rlbd.toml:12: clients.pin.\"198.18.0.99\": eth9 is not a port")
            && said.1.contains("not reloaded"),
        "{said:?}"
    );
    assert_eq!(r.e.settings().policy.hold_down, settings().policy.hold_down);
    assert!(r.e.settings().clients.pin.is_empty());
    let good = pinned_and_excluded();
    assert!(r.e.pins_refused(&good.clients).is_none());
}

/// A refused update is tried again only while the kernel still confirms its client (found by
/// the simulation, seed 4): here the client's neighbour entry fails between the two.
#[test]
fn a_retry_goes_only_to_a_client_still_confirmed() {
    for gone in [false, true] {
        let mut r = Rig::new();
        r.fail_refused = gone;
        let n = refused_overload_move(&mut r);
        r.deadlines(5000);
        let (mac, _) = client(n);
        let retries = r
            .sends
            .iter()
            .filter(|(_, t)| matches!(t, SendTag::Update { client, tries, .. } if client.mac == mac && *tries > 1))
            .count();
        if gone {
            assert_eq!(
                retries, 0,
                "a retry to an unconfirmed client: {:?}",
                r.sends
            );
        } else {
            assert!(
                retries > 0,
                "the control: the refused update is retried: {:?}",
                r.sends
            );
        }
    }
}

/// A refused update is not tried again once its port's MAC changed (balance-alb swapped it,
/// maybe to the slave that died): its bytes would send the client to the old MAC. The MAC
/// change's own re-assertion tells it the new one (found by the simulation, seed 11).
#[test]
fn a_retry_is_not_sent_with_a_mac_its_port_no_longer_has() {
    // A total budget of one a second: the MAC change's re-assertion waits its turn, as after
    // a failover that spent the budget, while the retry is due 50 ms after the refusal.
    let mut s = settings();
    s.steering.total_per_sec = 1;
    let mut r = Rig::with(s, &[]);
    r.swap_refused = true;
    let n = refused_overload_move(&mut r);
    r.deadlines(5000);
    let (mac, _) = client(n);
    let to = |retry: bool| {
        r.sends
            .iter()
            .filter(|(_, t)| matches!(t, SendTag::Update { client, tries, .. } if client.mac == mac && (*tries > 1) == retry))
            .count()
    };
    assert_eq!(to(true), 0, "a retry with the old MAC: {:?}", r.sends);
    assert!(
        to(false) > 1,
        "told again after the MAC change: {:?}",
        r.sends
    );
}

/// Clients 1 and 2 overload port 0 until one of them is moved, the move's first update refused
/// by the kernel; returns the moved client.
fn refused_overload_move(r: &mut Rig) -> u8 {
    let mut moved = None;
    for _ in 0..8 {
        r.refuse_next = moved.is_none();
        r.second(&[(1, 0, 6.0), (2, 0, 6.0)]);
        moved = moved.or_else(|| (1..=2).find(|n| !r.moves_of(*n).is_empty()));
    }
    moved.expect("an overload move")
}
