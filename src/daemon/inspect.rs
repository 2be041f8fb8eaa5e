//! `rlbd check-config --bond NAME`: the live bond looked at as `rlbd run` would see it at start
//! (its mode, `all_slaves_active` and `arp_validate`, slaves and their speeds, the server's addresses on it, the shapes it cannot
//! steer, the guests behind it), by the same checks and the same engine, and what `run` would
//! steer. Nothing is opened but the rtnetlink socket; nothing is changed.

use crate::config::{Settings, Target};
use crate::engine::{Engine, Input, Output};
use crate::exit::Failure;
use crate::netlink::{FdbKind, NlEvent, RouteSocket};

/// What `run` would do on the bond, line by line, or the first reason it would refuse to
/// (a configuration error: what to change).
pub fn check_live(settings: &Settings) -> Result<Vec<String>, Failure> {
    let Some(Target::Bond(name)) = settings.target.clone() else {
        return Ok(Vec::new());
    };
    let mut nl =
        RouteSocket::open().map_err(|e| Failure::io("cannot open the rtnetlink socket", e))?;
    let snap = nl
        .snapshot()
        .map_err(|e| Failure::io("cannot read links, addresses and neighbours", e))?;
    let mode = super::setup::check_bond(&name, &snap)?;
    let mut lines = vec![format!("bond {name}: mode {mode}")];
    let learned = snap
        .fdb
        .iter()
        .filter(|e| e.kind == FdbKind::Learned && !e.own)
        .count();
    let events: Vec<NlEvent> = snap
        .links
        .into_iter()
        .map(NlEvent::Link)
        .chain(snap.addrs.into_iter().map(NlEvent::Addr))
        .chain(snap.fdb.into_iter().map(NlEvent::Fdb))
        .collect();
    let mut e = Engine::new(settings.clone(), super::monotonic_ms());
    e.handle(super::monotonic_ms(), Input::Netlink(&events));
    let guest_path = settle(&mut e);
    refusals(&e, settings)?;
    let slaves = slaves(&e, &name)?;
    lines.push(format!("slaves: {}", slaves.join(", ")));
    lines.push(format!("the server's interfaces: {}", e.shape().join(", ")));
    lines.push(guests_line(
        settings,
        guest_path,
        (learned, e.macvlan_guests()),
    ));
    lines.push(format!(
        "rlbd run would steer the clients of these addresses among {} slaves{}",
        slaves.len(),
        if guest_path {
            ", and the guests behind the bond"
        } else {
            ""
        }
    ));
    Ok(lines)
}

/// The first reason `run` would refuse the bond as the engine sees it: a shape it cannot steer,
/// guests it cannot balance, a pin to a port that is not a slave.
fn refusals(e: &Engine, settings: &Settings) -> Result<(), Failure> {
    if let Some((ifname, why)) = e.unsupported().first() {
        return Err(Failure::config(format!(
            "interface {ifname} on the bond cannot be steered: {why}"
        )));
    }
    if let Some(why) = e.guests_refused() {
        return Err(Failure::config(format!("[guests] enabled: {why}")));
    }
    if let Some(err) = e.pins_refused(&settings.clients) {
        return Err(Failure::config(err.to_string()));
    }
    Ok(())
}

/// Each present slave as "NAME (SPEED, STATE)"; refused with fewer than two, or with one whose
/// capacity is not known.
fn slaves(e: &Engine, name: &str) -> Result<Vec<String>, Failure> {
    let slaves: Vec<String> = e
        .ports()
        .list
        .iter()
        .filter(|p| p.present)
        .map(|p| {
            let mbit = e
                .ports()
                .capacity_override(&p.name)
                .map(|b| b / 1e6)
                .or_else(|| crate::netlink::link_speed_mbps(&p.name).map(|m| m as f64));
            let speed = mbit.map_or_else(|| "no speed".into(), |m| format!("{m} Mbit/s"));
            let state = if p.up { "up" } else { "down" };
            format!("{} ({speed}, {state})", p.name)
        })
        .collect();
    if slaves.len() < 2 {
        return Err(Failure::config(format!(
            "bond {name} has {} slave{}: there is nothing to balance among; enslave at least two \
             ports (ip link set PORT master {name})",
            slaves.len(),
            if slaves.len() == 1 { "" } else { "s" }
        )));
    }
    if let Some(p) = e
        .ports()
        .list
        .iter()
        .find(|p| p.present && p.capacity_bps <= 0.0)
    {
        return Err(Failure::config(format!(
            "port {}: no usable link speed; give its capacity with [capacity] {} = MBIT",
            p.name, p.name
        )));
    }
    Ok(slaves)
}

/// Drains the engine's outputs as `run` would carry them, up to what a look needs: each port
/// whose capture `run` would open is told its link's speed (no socket is opened), so that its
/// capacity is the engine's own (`[capacity]`, else that speed). Returns whether the guests'
/// path would be set up.
fn settle(e: &mut Engine) -> bool {
    let mut guest_path = false;
    let mut opened = Vec::new();
    loop {
        while let Some(o) = e.poll_output() {
            match o {
                Output::GuestPath { on, .. } => guest_path = on,
                Output::OpenCapture { port } => opened.push(port),
                _ => {}
            }
        }
        let Some(port) = opened.pop() else {
            return guest_path;
        };
        let input = Input::CaptureOpened {
            port: port.id,
            speed_mbps: crate::netlink::link_speed_mbps(&port.name),
            error: None,
        };
        e.handle(super::monotonic_ms(), input);
    }
}

/// `learned`: MACs the host's bridges learned, and containers' macvlans on the bond.
fn guests_line(settings: &Settings, on: bool, (learned, macvlans): (usize, usize)) -> String {
    match (settings.guests.enabled, on) {
        (true, true) => format!(
            "guests: balanced ([guests] enabled; {learned} MACs learned on the host's bridges \
             and {macvlans} containers' macvlans on the bond now)"
        ),
        (true, false) => {
            "guests: [guests] enabled, but no bridge (of [guests] bridges) has the bond as a port \
             and no container's macvlan is on it: nothing to balance"
                .into()
        }
        (false, _) => "guests: not balanced ([guests] enabled = false)".into(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::host::testing::{link, BOND};
    use crate::netlink::LinkInfo;

    fn slave(index: u32, name: &str) -> NlEvent {
        let NlEvent::Link(l) = link(index, name, None) else {
            unreachable!()
        };
        NlEvent::Link(LinkInfo {
            master: Some(BOND),
            ..l
        })
    }

    fn settings(capacity: &[(&str, f64)]) -> Settings {
        let capacity_mbps: BTreeMap<String, f64> =
            capacity.iter().map(|(n, m)| (n.to_string(), *m)).collect();
        Settings {
            capacity_mbps,
            ..Settings::for_target(Target::Bond("bond0".into()))
        }
    }

    /// The ports get the capacity `run` would give them: `[capacity]` here (the test's ports have
    /// no link in sysfs, so no speed). Found by the system lab: without the captures' answer a
    /// port's capacity stayed 0, and every live bond was refused for "no usable link speed".
    #[test]
    fn a_port_has_the_capacity_run_would_give_it() {
        let events = [
            link(BOND, "bond0", Some("bond")),
            slave(21, "rlbd-nosuch-a"),
            slave(22, "rlbd-nosuch-b"),
        ];
        let given = settings(&[("rlbd-nosuch-a", 10.0), ("rlbd-nosuch-b", 25.0)]);
        let mut e = Engine::new(given, 1_000);
        e.handle(1_000, Input::Netlink(&events));
        assert!(!settle(&mut e));
        let caps: Vec<(String, f64)> = e
            .ports()
            .list
            .iter()
            .map(|p| (p.name.clone(), p.capacity_bps))
            .collect();
        assert_eq!(
            caps,
            [
                ("rlbd-nosuch-a".into(), 10e6),
                ("rlbd-nosuch-b".into(), 25e6)
            ]
        );
        // Without [capacity] and without a speed: none, which check_live refuses.
        let mut e = Engine::new(settings(&[]), 1_000);
        e.handle(1_000, Input::Netlink(&events));
        settle(&mut e);
        assert!(e.ports().list.iter().all(|p| p.capacity_bps == 0.0));
    }
}
