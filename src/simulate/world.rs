//! The simulated world: slaves that share their capacity among the clients sending to them,
//! the detector and planner deciding once a tick, moves that land a moment late.

use std::collections::BTreeMap;

use super::counting::SampledCounting;
use super::{generate, MoveOut, Scenario, SlaveOut, Tick, TickOut};
use crate::policy::{self, ClientView, Detector, Move, PortView, Reason};

/// Max-min fair shares of `capacity` among `demands` (water filling).
pub fn fair_share(capacity: f64, demands: &[f64]) -> Vec<f64> {
    weighted_share(capacity, demands, &vec![1.0; demands.len()])
}

/// Weighted max-min shares: the largest level L such that each client gets min(demand,
/// L x weight) and the shares fit in `capacity`. Weights must be positive.
pub fn weighted_share(capacity: f64, demands: &[f64], weights: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..demands.len()).collect();
    // Clients that are satisfied first (lowest demand per weight) leave room to the others.
    order.sort_by(|&a, &b| (demands[a] / weights[a]).total_cmp(&(demands[b] / weights[b])));
    let mut out = vec![0.0; demands.len()];
    let mut left = capacity.max(0.0);
    let mut weight_left: f64 = order.iter().map(|&i| weights[i]).sum();
    for &i in &order {
        let share = left * weights[i] / weight_left;
        out[i] = demands[i].max(0.0).min(share);
        left -= out[i];
        weight_left -= weights[i];
    }
    out
}

/// The simulated world between ticks.
struct World<'a> {
    slave_ix: BTreeMap<&'a str, usize>,
    up: Vec<bool>,
    on: Vec<usize>,
    demand: Vec<f64>,
    /// What each flow allows itself now (TCP's window, as a rate): it grows towards the demand
    /// when there is room and falls to the share it got when there is none.
    ceiling: Vec<f64>,
    growth: f64,
    weight: Vec<f64>,
    rng: generate::Rng,
    unfairness: f64,
    efficiency: f64,
    moved_at: Vec<Option<u64>>,
    /// The port each client's last move took it off, and why it moved.
    last_move: Vec<Option<(usize, Reason)>>,
    detectors: Vec<Detector>,
    /// Where a full port reads, as the daemon learns it.
    saturation: policy::Ceiling,
    /// Moves decided this tick, (client, to): they land on the next.
    pending: Vec<(usize, usize)>,
    /// With the scenario's `sampling`: how the clients' packets are counted.
    counting: Option<SampledCounting>,
}

impl<'a> World<'a> {
    fn new(s: &'a Scenario) -> Self {
        let slave_ix: BTreeMap<&str, usize> = s
            .slaves
            .iter()
            .enumerate()
            .map(|(i, sl)| (sl.name.as_str(), i))
            .collect();
        let n = s.clients.len();
        let mut w = World {
            up: vec![true; s.slaves.len()],
            on: s
                .clients
                .iter()
                .map(|c| slave_ix[c.slave.as_str()])
                .collect(),
            slave_ix,
            demand: vec![0.0; n],
            ceiling: vec![0.0; n],
            growth: s.elastic.growth,
            weight: vec![1.0; n],
            // A stream of its own: the same seed in `random_demands` must not tie the shares to
            // the demands.
            rng: generate::Rng::new(s.elastic.seed ^ 0xe1a5_71c5_ba5e_d5ee),
            unfairness: s.elastic.unfairness,
            efficiency: s.elastic.efficiency,
            moved_at: vec![None; n],
            last_move: vec![None; n],
            detectors: s
                .slaves
                .iter()
                .map(|_| Detector::new(s.config.window, s.config.hits))
                .collect(),
            saturation: policy::Ceiling::default(),
            pending: Vec::new(),
            counting: s
                .sampling
                .as_ref()
                .map(|spec| SampledCounting::new(spec, s.slaves.len())),
        };
        for c in 0..n {
            w.weight[c] = w.new_weight();
        }
        w
    }
    fn new_weight(&mut self) -> f64 {
        if self.unfairness > 1.0 {
            // Log-uniform: as many flows starved to a tenth as favoured tenfold.
            self.unfairness.powf(self.rng.unit())
        } else {
            1.0
        }
    }

    /// What a flow would send now if its slave had room.
    fn wants(&self, c: usize) -> f64 {
        if self.growth < 1.0 {
            self.demand[c].min(self.ceiling[c])
        } else {
            self.demand[c]
        }
    }

    /// Each flow's window grows by a random part (at least `growth`) of what it lacks to its
    /// demand: flows that got room after a move take seconds to use it, as the lab's TCP flows do.
    fn grow(&mut self) {
        if self.growth >= 1.0 {
            return;
        }
        for c in 0..self.demand.len() {
            let f = self.growth + (1.0 - self.growth) * self.rng.unit();
            if self.ceiling[c] < self.demand[c] {
                self.ceiling[c] += f * (self.demand[c] - self.ceiling[c]);
            } else {
                self.ceiling[c] = self.demand[c];
            }
        }
    }

    /// A flow held to less than it wanted (its slave full) shrinks its window to what it got.
    fn shrink(&mut self, rate: &[f64]) {
        if self.growth >= 1.0 {
            return;
        }
        for (c, &r) in rate.iter().enumerate() {
            if r < self.wants(c) - 1e-9 {
                self.ceiling[c] = r;
            }
        }
    }

    /// What each client gets with placement `on`.
    fn rates(&self, s: &Scenario, on: &[usize]) -> Vec<f64> {
        let mut rate = vec![0.0; on.len()];
        for (p, sl) in s.slaves.iter().enumerate() {
            if !self.up[p] {
                continue;
            }
            let members: Vec<usize> = (0..on.len()).filter(|&c| on[c] == p).collect();
            let d: Vec<f64> = members.iter().map(|&c| self.wants(c)).collect();
            let w: Vec<f64> = members.iter().map(|&c| self.weight[c]).collect();
            let usable = sl.capacity_mbps * self.efficiency;
            for (k, share) in weighted_share(usable, &d, &w).into_iter().enumerate() {
                rate[members[k]] = share;
            }
        }
        rate
    }

    /// Applies the tick's link events and demands and lands last tick's moves; returns the
    /// placement before they landed.
    fn begin_tick(&mut self, s: &Scenario, t: u64, tick: &Tick) -> Vec<usize> {
        for e in s.events.iter().filter(|e| e.t == t) {
            self.up[self.slave_ix[e.slave.as_str()]] = e.up;
        }
        if let Some(d) = &tick.demand_mbps {
            for (i, c) in s.clients.iter().enumerate() {
                if let Some(v) = d.get(&c.ip) {
                    self.demand[i] = *v;
                }
            }
        }
        let before = self.on.clone();
        for (c, to) in std::mem::take(&mut self.pending) {
            self.on[c] = to;
            // A flow arriving on a slave ramps up against the ones already there.
            self.weight[c] = self.new_weight();
        }
        self.grow();
        before
    }

    /// What each client and each slave delivers this second, Mbit/s: the new placement, and
    /// for the first `move_lag` of the second still the old one (`before`).
    fn deliver(&self, s: &Scenario, before: &[usize]) -> (Vec<f64>, Vec<f64>) {
        let mut rate = self.rates(s, &self.on);
        let lag = s.elastic.move_lag;
        let mut rx = vec![0.0; s.slaves.len()];
        if lag > 0.0 && before != self.on {
            let old = self.rates(s, before);
            for c in 0..self.on.len() {
                rx[before[c]] += lag * old[c];
                rx[self.on[c]] += (1.0 - lag) * rate[c];
                rate[c] = lag * old[c] + (1.0 - lag) * rate[c];
            }
        } else {
            for c in 0..self.on.len() {
                rx[self.on[c]] += rate[c];
            }
        }
        for (p, up) in self.up.iter().enumerate() {
            if !up {
                rx[p] = 0.0;
            }
        }
        (rate, rx)
    }

    /// The ports as the daemon sees them, each detector fed this second's utilization.
    fn port_views(&mut self, s: &Scenario, rx: &[f64]) -> Vec<PortView> {
        let mut ports = Vec::with_capacity(s.slaves.len());
        for (p, sl) in s.slaves.iter().enumerate() {
            let util = rx[p] / sl.capacity_mbps;
            if self.up[p] {
                self.detectors[p].push(Some(util), s.config.threshold);
            } else {
                self.detectors[p].reset();
            }
            ports.push(PortView {
                capacity_bps: sl.capacity_mbps * 1e6,
                up: self.up[p],
                rx_bps: rx[p] * 1e6,
                overloaded: self.detectors[p].overloaded(),
                resolution_bps: self.counting.as_ref().map_or(0.0, |k| k.resolution_bps(p)),
            });
        }
        ports
    }

    /// The clients as the daemon sees them. A down slave's clients demand as before; the daemon
    /// sees them there (their last frames).
    fn client_views(
        &mut self,
        s: &Scenario,
        t: u64,
        rate: &[f64],
        ports: &[PortView],
    ) -> Vec<ClientView> {
        (0..self.on.len())
            .map(|c| {
                let held =
                    self.moved_at[c].is_some_and(|m| t.saturating_sub(m) < s.config.hold_down);
                let port = self.on[c];
                ClientView {
                    port,
                    rate_bps: if self.up[port] {
                        let counted = self
                            .counting
                            .as_mut()
                            .map_or(rate[c], |k| k.counted(port, rate[c]));
                        ports[port].resolved(counted * 1e6)
                    } else {
                        self.demand[c] * 1e6
                    },
                    held,
                    since_move: self.moved_at[c].map(|m| t.saturating_sub(m)),
                    last_move: self.last_move[c].filter(|_| held),
                }
            })
            .collect()
    }

    /// Records the planner's moves (they land next tick) and returns them as output.
    fn decide(&mut self, s: &Scenario, t: u64, moves: &[Move]) -> Vec<MoveOut> {
        moves
            .iter()
            .map(|m| {
                self.moved_at[m.client] = Some(t);
                self.last_move[m.client] = Some((m.from, m.reason));
                self.pending.push((m.client, m.to));
                MoveOut {
                    client: s.clients[m.client].ip.clone(),
                    from: s.slaves[m.from].name.clone(),
                    to: s.slaves[m.to].name.clone(),
                    rate_mbps: round(m.rate_bps / 1e6),
                    reason: m.reason,
                }
            })
            .collect()
    }
}

/// Runs the scenario; one `TickOut` per tick goes to `emit`.
pub fn run(s: &Scenario, mut emit: impl FnMut(&TickOut)) {
    let mut w = World::new(s);
    for (t, tick) in s.ticks.iter().enumerate() {
        let t = t as u64;
        let before = w.begin_tick(s, t, tick);
        let (rate, rx) = w.deliver(s, &before);
        w.shrink(&rate);
        let ports = w.port_views(s, &rx);
        // Counted under the ratio in force this second; the counter read at its end sets the
        // next second's.
        let clients = w.client_views(s, t, &rate, &ports);
        if let Some(k) = &mut w.counting {
            k.on_second(t, &rx);
        }
        w.saturation.observe(&s.config, &ports);
        let cfg = w.saturation.tune(&s.config);
        let moves = w.decide(s, t, &policy::plan(&cfg, &ports, &clients));
        let slaves = s
            .slaves
            .iter()
            .zip(&ports)
            .enumerate()
            .map(|(i, (sl, p))| {
                let rx = p.rx_bps / 1e6;
                (
                    sl.name.clone(),
                    SlaveOut {
                        rx_mbps: round(rx),
                        util: round(rx / sl.capacity_mbps),
                        overloaded: p.overloaded,
                        one_in: w.counting.as_ref().map(|k| k.one_in(i)).filter(|n| *n > 1),
                    },
                )
            })
            .collect();
        emit(&TickOut {
            t,
            slaves,
            moves,
            delivered_mbps: round(rx.iter().sum()),
            demand_mbps: round(w.demand.iter().sum()),
            placement: w.on.clone(),
            demands: w.demand.clone(),
        });
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
