//! The once-a-second decision: counters become rates, rates feed the detectors, and the snapshot
//! of ports and clients goes to the steering core; in balance-tlb new clients get their first
//! placement.

use std::time::Instant;

use log::{debug, info};

use super::{with_ctx, Daemon, EVAL_DELAY};
use crate::host::Talk;
use crate::netlink::BondMode;
use crate::policy::{Move, Reason};
use crate::steer::explain::{self, Facts};
use crate::steer::ClientSnap;

impl Daemon {
    /// Every client in the table as the steering core wants it; with `active_only`, only those
    /// that sent this second (or sit on a port that is not usable, so failover still finds them).
    pub(super) fn client_snaps(&self, active_only: bool) -> Vec<ClientSnap> {
        let usable = |p: usize| self.ports.list.get(p).is_some_and(|p| p.usable());
        self.table
            .iter_unordered()
            .filter(|e| (e.port as usize) < self.ports.list.len())
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
            })
            .collect()
    }

    /// The evaluation step: counters to rates, rates to the detectors, snapshot to the core.
    pub(super) fn evaluate(&mut self) {
        let now_ms = self.clock.ms(Instant::now());
        let threshold = self.settings.policy.threshold;
        let fresh_ms = EVAL_DELAY.as_millis() as u64 * 2;
        for p in self.ports.list.iter_mut() {
            if p.usable() {
                let util = p
                    .compute_rate(now_ms, fresh_ms)
                    .filter(|_| p.capacity_bps > 0.0)
                    .map(|r| r / p.capacity_bps);
                p.detector.push(util, threshold);
            } else {
                p.rx_bps = None;
            }
        }
        let views = self.ports.views();
        if std::mem::take(&mut self.trouble.rates_unreliable) {
            // The rings dropped frames this second: the client rates miss an unknown share, so
            // the split among clients, which every move rests on, is not known. Port loads are
            // exact (kernel counters) and keep feeding the detectors; moves wait for a clean
            // second.
            self.trouble.unreliable_seconds += 1;
            debug!("capture ring drops this second: client rates incomplete, no move made on them");
            return;
        }
        let clients = self.client_snaps(true);
        let ports = &self.ports;
        let window = self.settings.policy.window;
        let why = |m: &Move| {
            if m.reason == Reason::Room {
                return format!(
                    "room: {} keeps its room in one piece for a client of a saturated port",
                    ports.list[m.from].name
                );
            }
            let d = &ports.list[m.from].detector;
            format!(
                "overload: {} of {window} samples over {:.0}% ({})",
                d.hit_count(),
                threshold * 100.0,
                d.window_string()
            )
        };
        let (steer, out) = (&mut self.steer, &mut self.actions);
        let made = with_ctx(&self.host, ports, |ctx| {
            steer.refresh_claims(now_ms, &clients, ctx, out);
            steer.rebalance(now_ms, &views, &clients, &why, ctx, out)
        });
        self.explain_no_move(now_ms, &views, &clients, &made);
        if self.ports.bond_mode == Some(BondMode::BalanceTlb) {
            let (steer, out) = (&mut self.steer, &mut self.actions);
            with_ctx(&self.host, &self.ports, |ctx| {
                steer.place_new(now_ms, &views, &clients, ctx, out)
            });
        }
        self.carry_out();
    }

    /// "Why did it not move?" is the first question an operator asks: for each overloaded port
    /// nothing moved off, the reason in words, logged when the episode starts (and at debug when
    /// it changes) and kept for the status.
    fn explain_no_move(
        &mut self,
        now_ms: u64,
        views: &[crate::policy::PortView],
        clients: &[ClientSnap],
        made: &[usize],
    ) {
        let steer = &self.steer;
        let held = |c: &ClientSnap| steer.held(&c.key, now_ms);
        let facts = Facts {
            host: &self.host,
            policy: &self.settings.policy,
            held: &held,
        };
        for (i, v) in views.iter().enumerate() {
            let Some(p) = self.ports.list.get_mut(i) else {
                continue;
            };
            if !v.overloaded || made.contains(&i) {
                if p.no_move.take().is_some() && !v.overloaded {
                    debug!("port {}: no longer overloaded", p.name);
                }
                continue;
            }
            let why = explain::no_move(i, views, clients, &facts);
            let window = p.detector.window_string();
            match &p.no_move {
                None => info!(
                    "port {} overloaded ({window}, {:.2} of capacity) and nothing moved: {why}",
                    p.name,
                    v.utilization()
                ),
                Some(old) if *old != why => debug!("port {}: nothing moved: {why}", p.name),
                Some(_) => {}
            }
            p.no_move = Some(why);
        }
    }
}
