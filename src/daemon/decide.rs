//! The once-a-second decision and its two special cases: counters become rates, rates feed the
//! detectors, the snapshot goes to the planner; a port going down triggers failover at once; in
//! balance-tlb new clients get their first placement.

use std::time::Instant;

use log::debug;

use super::{Daemon, EVAL_DELAY};
use crate::netlink::BondMode;
use crate::netlink::Mac;
use crate::policy::{self, ClientView, PortView, Reason};

impl Daemon {
    /// The evaluation step: counters to rates, rates to the detector, snapshot to the planner.
    pub(super) fn evaluate(&mut self, now: Instant) {
        let threshold = self.settings.policy.threshold;
        let mut views = Vec::with_capacity(self.ports.list.len());
        for p in self.ports.list.iter_mut() {
            let rate = if p.usable() {
                p.compute_rate(now, EVAL_DELAY * 2)
            } else {
                None
            };
            let util = rate
                .filter(|_| p.capacity_bps > 0.0)
                .map(|r| r / p.capacity_bps);
            if p.usable() {
                p.detector.push(util, threshold);
            }
            views.push(PortView {
                capacity_bps: p.capacity_bps,
                up: p.usable(),
                rx_bps: rate.unwrap_or(0.0),
                overloaded: p.usable() && p.detector.overloaded(),
            });
        }
        let hold = self.settings.policy.hold_down;
        let mut macs = Vec::new();
        let mut clients = Vec::new();
        for e in self.table.iter() {
            let port = e.port as usize;
            if port >= views.len() || (e.rate == 0 && views[port].up) {
                continue;
            }
            macs.push(e.mac);
            clients.push(ClientView {
                port,
                rate_bps: e.rate as f64 * 8.0,
                held: self.steering.held(&e.mac, self.tick, hold),
            });
        }
        let moves = policy::plan(&self.settings.policy, &views, &clients);
        if moves.is_empty() && log::log_enabled!(log::Level::Debug) {
            // "Why did it not move?" is the first question an operator asks.
            for (i, (p, v)) in self.ports.list.iter().zip(&views).enumerate() {
                if v.overloaded {
                    let on: Vec<String> = clients
                        .iter()
                        .filter(|c| c.port == i)
                        .map(|c| {
                            format!(
                                "{:.1}{}",
                                c.rate_bps / 1e6,
                                if c.held { " (held)" } else { "" }
                            )
                        })
                        .collect();
                    debug!(
                        "port {} overloaded ({}, {:.2} of capacity) but no move fits; clients there, Mbit/s: [{}]",
                        p.name,
                        p.detector.window_string(),
                        v.utilization(),
                        on.join(", ")
                    );
                }
            }
        }
        for m in moves {
            self.apply_move(macs[m.client], &m);
        }
        if self.ports.bond_mode == Some(BondMode::BalanceTlb) {
            self.place_new_clients(&views);
        }
    }

    /// balance-tlb answers every ARP with the active slave's MAC: rlbd gives each new client its
    /// first placement, on the least-loaded slave, and counts it toward that slave at once.
    fn place_new_clients(&mut self, views: &[PortView]) {
        let floor = self.settings.policy.min_rate_bps();
        let mut views = views.to_vec();
        let new: Vec<(Mac, usize, f64)> = self
            .table
            .iter()
            .filter(|e| self.steering.moved(&e.mac).is_none() && (e.rate as f64 * 8.0) >= floor)
            .map(|e| (e.mac, e.port as usize, e.rate as f64 * 8.0))
            .collect();
        for (mac, from, rate) in new {
            let Some(to) = policy::place(&views) else {
                return;
            };
            if to == from || from >= views.len() {
                continue;
            }
            let util = |v: &PortView| v.rx_bps / v.capacity_bps;
            let before = (util(&views[from]), util(&views[to]));
            views[from].rx_bps = (views[from].rx_bps - rate).max(0.0);
            views[to].rx_bps += rate;
            let m = policy::Move {
                client: 0,
                from,
                to,
                rate_bps: rate,
                reason: Reason::Placement,
                from_util: (before.0, util(&views[from])),
                to_util: (before.1, util(&views[to])),
            };
            self.apply_move(mac, &m);
        }
    }

    /// Moves every client on a port that just went down (or was removed) to live ports, now.
    pub(super) fn failover(&mut self, down: &[usize]) {
        let views: Vec<PortView> = self
            .ports
            .list
            .iter()
            .map(|p| PortView {
                capacity_bps: p.capacity_bps,
                up: p.usable(),
                rx_bps: p.rx_bps.unwrap_or(0.0),
                overloaded: false,
            })
            .collect();
        let mut macs = Vec::new();
        let mut clients = Vec::new();
        for e in self.table.iter() {
            // On the port by its frames, or by where rlbd sent it.
            let port = match self.steering.assigned(&e.mac) {
                Some(a) if down.contains(&a) => a,
                _ => e.port as usize,
            };
            if down.contains(&port) {
                macs.push(e.mac);
                clients.push(ClientView {
                    port,
                    rate_bps: e.rate as f64 * 8.0,
                    held: true,
                });
            }
        }
        for m in policy::plan(&self.settings.policy, &views, &clients) {
            if m.reason == Reason::Failover {
                self.apply_move(macs[m.client], &m);
            }
        }
    }
}
