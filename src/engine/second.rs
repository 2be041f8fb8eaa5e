//! A second's end and its evaluation (the engine's `on_second` and `evaluate`), with their pure
//! steps: counters become rates and rates feed the detectors; the clients as the steering core
//! wants them; the words of a move's reason; and, for an overloaded port nothing moved off, why,
//! logged when the episode starts (at debug when it changes) and kept for the status.

use log::Level;

use super::io::Topic;
use super::outbox::Outbox;
use super::EVAL_DELAY_MS;
use super::{report, Delta, Output, PortId, PortSecond, Rule};
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
    tick: u64,
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
                quiet_secs: tick.saturating_sub(e.last_seen),
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

impl super::Engine {
    /// A second ended: the kernel's counts into the client table, the table rolled over, the
    /// ports' counters asked for (the evaluation follows when they are in), idle moves
    /// forgotten.
    pub(super) fn on_second(&mut self, now: u64, counts: &[(PortId, Delta)], facts: &[PortSecond]) {
        let (whole, drops) = self.capture_second(now, facts);
        for (port, d) in counts {
            if let Some(p) = self.lan.ports.list.get_mut(port.index()) {
                p.counted_bytes += d.bytes;
            }
        }
        let (lan, tick) = (&self.lan, self.schedule.tick);
        self.table
            .account_kernel_counts(counts, tick, |ip| lan.is_ours(ip));
        self.schedule.tick += 1;
        self.table.roll_over(self.schedule.tick);
        self.durable.started = true;
        // Only the ports' counters: a dump of every link costs in proportion to the host's links.
        for p in self.lan.ports.list.iter().filter(|p| p.present) {
            self.out
                .push(Output::RequestCounters { ifindex: p.ifindex });
        }
        self.schedule.eval_at = Some(now + EVAL_DELAY_MS);
        self.trouble.rates_unreliable = drops || !whole;
        let (table, before) = (&self.table, self.steer.moved_count());
        let ctx = self.lan.ctx();
        let active = |key: &_| table.get(key).is_some();
        self.steer.forget_idle(now, active, &ctx, &mut self.actions);
        // The state file also says the daemon that wrote it was alive lately: a restart takes
        // it over only while it is younger than the hold-down, so it is rewritten well within
        // one while it holds moves or answers (a sixth of it, at most every 10 s).
        let every = (self.settings.policy.hold_down / 6).clamp(1, 10);
        let moved = self.steer.moved_count();
        let kept = moved > 0 || self.steer.answered_count() > 0 || !self.guests.is_empty();
        self.durable.dirty |= moved != before || (self.schedule.tick % every == 0 && kept);
        self.durable.dirty |= self.steer.take_durable_changed();
        self.carry_out();
        let ports = self.lan.ports.list.iter().filter(|p| p.present);
        let sig = ports.fold(0u64, |h, p| {
            h.wrapping_mul(31)
                .wrapping_add(u64::from(p.ifindex) << 1 | u64::from(p.up))
        });
        if self.schedule.tick % 10 == 0 || sig != self.schedule.summary_ports {
            self.schedule.summary_ports = sig;
            let summary = report::status(self, now, Some(0)).summary();
            self.out.push(Output::Summary(summary));
        }
    }

    /// The evaluation: counters to rates, rates to the detectors, the snapshot to the steering
    /// core's planner, and why nothing moved off an overloaded port.
    pub(super) fn evaluate(&mut self, now: u64) {
        let policy = &self.settings.policy;
        feed_detectors(&mut self.lan.ports, now, policy.threshold);
        let b = &mut self.bufs;
        self.lan.ports.views_into(&mut b.ports);
        let unreliable = std::mem::take(&mut self.trouble.rates_unreliable);
        if unreliable && !self.rules_off.has(Rule::RingDropVeto) {
            // The rings dropped frames this second: the client rates miss an unknown share, so
            // the split among clients, which every move rests on, is not known. Port loads are
            // exact (kernel counters) and keep feeding the detectors; moves wait for a clean
            // second.
            self.trouble.unreliable_seconds += 1;
            let text =
                "capture ring drops this second: client rates incomplete, no move made on them";
            self.out.log(Level::Debug, Topic::NoMove, text.into());
            // The guests' counts are their own maps', whole: a busy host whose rings drop every
            // second must not stop their balancing (no client moved).
            self.rebalance_guests(now, false, false);
            return;
        }
        fill_snaps(
            &self.table,
            &self.lan.ports,
            true,
            self.schedule.tick,
            &mut b.snaps,
        );
        let (ctx, clients, out) = (self.lan.ctx(), &b.snaps, &mut self.actions);
        let ports = &self.lan.ports;
        let why = |m: &Move| move_reason(ports, policy, m);
        self.steer.refresh_claims(now, clients, &ctx, out);
        let views = &b.ports;
        let guests = if self.guest_path {
            self.guests.flows(now)
        } else {
            Vec::new()
        };
        self.steer
            .rebalance(now, (views, &guests), clients, &why, &ctx, out);
        if self.lan.ports.bond_mode == Some(crate::netlink::BondMode::BalanceTlb) {
            self.steer.place_new(now, views, clients, &ctx, out);
        }
        self.durable.dirty |= !out.is_empty();
        let steer = &self.steer;
        let held = |c: &ClientSnap| steer.held(&c.key, now);
        let facts = Facts {
            host: &self.lan.host,
            policy,
            held: &held,
        };
        let parts = (&b.ports[..], &b.snaps[..], steer.made());
        explain_no_move(&mut self.lan.ports, parts, &facts, &mut self.out);
        let client_moves = !steer.made().is_empty();
        self.carry_out();
        self.rebalance_guests(now, client_moves, true);
    }
}
