//! `rlbd check-config --bond NAME`: the live bond looked at as `rlbd run` would see it at start
//! (its mode, slaves and their speeds, the server's addresses on it, the shapes it cannot
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
    let mut guest_path = false;
    while let Some(o) = e.poll_output() {
        if let Output::GuestPath { on, .. } = o {
            guest_path = on;
        }
    }
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
    lines.push(format!("slaves: {}", slaves.join(", ")));
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
    lines.push(format!("the server's interfaces: {}", e.shape().join(", ")));
    lines.push(guests_line(settings, guest_path, learned));
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

fn guests_line(settings: &Settings, on: bool, learned: usize) -> String {
    match (settings.guests.enabled, on) {
        (true, true) => format!(
            "guests: balanced ([guests] enabled; {learned} MACs learned on the host's bridges now)"
        ),
        (true, false) => {
            "guests: [guests] enabled, but no bridge (of [guests] bridges) has the bond as a port: \
             nothing to balance"
                .into()
        }
        (false, _) => "guests: not balanced ([guests] enabled = false)".into(),
    }
}
