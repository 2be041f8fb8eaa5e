//! The second's evaluation, as pure steps over the engine's parts: counters become rates and
//! rates feed the detectors; the clients as the steering core wants them; the words of a move's
//! reason; and, for an overloaded port nothing moved off, why, logged when the episode starts
//! (at debug when it changes) and kept for the status.

use log::Level;

use super::io::Topic;
use super::outbox::Outbox;
use super::EVAL_DELAY_MS;
use crate::capture::ClientTable;
use crate::host::{PortTable, Talk};
use crate::policy::{Move, PolicyConfig, PortView, Reason};
use crate::steer::explain::{self, Facts};
use crate::steer::ClientSnap;

/// What the second's evaluation builds, kept between seconds so that a second allocates
/// nothing once the buffers have grown to the LAN.
#[derive(Debug, Default)]
pub struct Buffers {
    /// The clients as the steering core wants them.
    pub snaps: Vec<ClientSnap>,
    /// The ports as the planner sees them.
    pub ports: Vec<PortView>,
}

/// Each usable port's rate from its counters, into its detector; no rate for the others.
pub fn feed_detectors(ports: &mut PortTable, now: u64, threshold: f64) {
    let fresh_ms = EVAL_DELAY_MS * 2;
    for p in ports.list.iter_mut() {
        if p.usable() {
            let util = p
                .compute_rate(now, fresh_ms)
                .filter(|_| p.capacity_bps > 0.0)
                .map(|r| r / p.capacity_bps);
            p.detector.push(util, threshold);
        } else {
            p.rx_bps = None;
        }
    }
}

/// Every client in the table as the steering core wants it, into `snaps`; with
/// `active_only`, only those that sent this second (or sit on a port that is not usable, so
/// failover still finds them).
pub fn fill_snaps(
    table: &ClientTable,
    ports: &PortTable,
    active_only: bool,
    snaps: &mut Vec<ClientSnap>,
) {
    let usable = |p: usize| ports.list.get(p).is_some_and(|p| p.usable());
    snaps.clear();
    snaps.extend(
        table
            .iter_unordered()
            .filter(|e| (e.port as usize) < ports.list.len())
            .filter(|e| !active_only || e.rate > 0 || !usable(e.port as usize))
            .map(|e| ClientSnap {
                key: e.key,
                port: e.port as usize,
                rate_bps: e.rate as f64 * 8.0,
                talk: Talk {
                    v4: (!e.ip.is_unspecified()).then_some(e.ip),
                    v6: e.ip6,
                    servers: e.servers,
                },
            }),
    );
}

/// The words of a move's reason: for an overload move, the source port's detector as this
/// second sees it.
pub fn move_reason(ports: &PortTable, policy: &PolicyConfig, m: &Move) -> String {
    let Some(p) = ports.list.get(m.from) else {
        return "overload".into();
    };
    if m.reason == Reason::Room && m.gathers {
        return format!(
            "room: {} keeps its room in one piece for a client of a saturated port",
            p.name
        );
    }
    if m.reason == Reason::Room {
        let to = ports.list.get(m.to).map_or("?", |t| t.name.as_str());
        return format!(
            "room: exchanged for a larger client of the saturated {to}, which sheds the difference"
        );
    }
    format!(
        "overload: {} of {} samples over {:.0}% ({})",
        p.detector.hit_count(),
        policy.window,
        policy.threshold * 100.0,
        p.detector.window_string()
    )
}

/// "Why did it not move?" is the first question an operator asks: for each overloaded port
/// nothing moved off (`made`: the ports moves were made off), the reason in words.
pub fn explain_no_move(
    ports: &mut PortTable,
    (views, clients, made): (&[PortView], &[ClientSnap], &[usize]),
    facts: &Facts,
    out: &mut Outbox,
) {
    for (i, v) in views.iter().enumerate() {
        let Some(p) = ports.list.get_mut(i) else {
            continue;
        };
        if !v.overloaded || made.contains(&i) {
            if p.no_move.take().is_some() && !v.overloaded {
                let text = format!("port {}: no longer overloaded", p.name);
                out.log(Level::Debug, Topic::NoMove, text);
            }
            continue;
        }
        let why = explain::no_move(i, views, clients, facts);
        let window = p.detector.window_string();
        match &p.no_move {
            None => out.log(
                Level::Info,
                Topic::NoMove,
                format!(
                    "port {} overloaded ({window}, {:.2} of capacity) and nothing moved: {why}",
                    p.name,
                    v.utilization()
                ),
            ),
            Some(old) if *old != why => {
                let text = format!("port {}: nothing moved: {why}", p.name);
                out.log(Level::Debug, Topic::NoMove, text);
            }
            Some(_) => {}
        }
        p.no_move = Some(why);
    }
}
