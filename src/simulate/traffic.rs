//! The scenario's traffic: each client's demand, how a slave shares its capacity among the
//! clients sending to it, how a flow grows into room and how late a move lands. Where each
//! client sends is the LAN's (its neighbour cache, `lan`), read through the [`Shell`] that
//! plays the daemon's shell for the engine.

use std::collections::BTreeMap;

use super::counting::SampledCounting;
use super::shell::{Flows, Shell};
use super::{generate, Scenario, SlaveOut, Tick, TickOut};

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
    /// Clients whose cache holds no MAC for the server (it gave up on a dead port and asks
    /// again): they send nothing.
    lost: Vec<bool>,
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
        // The flows: the clients', then the guests'.
        let flows = n + s.guests.len();
        let mut w = World {
            up: vec![true; s.slaves.len()],
            on: s
                .clients
                .iter()
                .map(|c| slave_ix[c.slave.as_str()])
                .collect(),
            slave_ix,
            demand: vec![0.0; flows],
            ceiling: vec![0.0; flows],
            growth: s.elastic.growth,
            weight: vec![1.0; flows],
            // A stream of its own: the same seed in `random_demands` must not tie the shares to
            // the demands.
            rng: generate::Rng::new(s.elastic.seed ^ 0xe1a5_71c5_ba5e_d5ee),
            unfairness: s.elastic.unfairness,
            efficiency: s.elastic.efficiency,
            lost: vec![false; n],
            counting: s.sampling.as_ref().map(SampledCounting::new),
        };
        for c in 0..flows {
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

    /// What each flow gets with the clients on `on` and each guest's frames reaching the
    /// slaves `arrives` lists: by flow (a guest's, the most any slave gave it), each slave's
    /// clients' total, and each guest's share on every slave it reaches (guest, slave, Mbit/s).
    fn rates(&self, s: &Scenario, on: &[usize], arrives: &[Vec<usize>]) -> Shares {
        let n = on.len();
        let mut out = Shares {
            rate: vec![0.0; n + arrives.len()],
            rx: vec![0.0; s.slaves.len()],
            guests: Vec::new(),
        };
        for (p, sl) in s.slaves.iter().enumerate() {
            if !self.up[p] {
                continue;
            }
            let mut members: Vec<usize> = (0..n).filter(|&c| on[c] == p && !self.lost[c]).collect();
            let guests = (0..arrives.len()).filter(|g| arrives[*g].contains(&p));
            members.extend(guests.map(|g| n + g));
            let d: Vec<f64> = members.iter().map(|&c| self.wants(c)).collect();
            let w: Vec<f64> = members.iter().map(|&c| self.weight[c]).collect();
            let usable = sl.capacity_mbps * self.efficiency;
            for (k, share) in weighted_share(usable, &d, &w).into_iter().enumerate() {
                let f = members[k];
                if f < n {
                    out.rate[f] = share;
                    out.rx[p] += share;
                } else {
                    out.rate[f] = out.rate[f].max(share);
                    out.guests.push((f - n, p, share));
                }
            }
        }
        out
    }

    /// Applies the tick's link events and demands and lands last tick's moves; returns the
    /// placement before they landed.
    fn begin_tick(&mut self, s: &Scenario, t: u64, tick: &Tick, shell: &mut Shell) -> Vec<usize> {
        for e in s.events.iter().filter(|e| e.t == t) {
            let p = self.slave_ix[e.slave.as_str()];
            self.up[p] = e.up;
            shell.carrier(t, p, e.up);
        }
        if let Some(d) = &tick.demand_mbps {
            let names = s.clients.iter().map(|c| &c.ip);
            let names = names.chain(s.guests.iter().map(|g| &g.name));
            for (i, name) in names.enumerate() {
                if let Some(v) = d.get(name) {
                    self.demand[i] = *v;
                }
            }
        }
        let before = self.on.clone();
        // The clients' caches as the last second left them: rlbd's updates, their own
        // questions. The ones the engine moved land in the order it moved them (each arrival
        // draws its share weight in turn), then the others.
        let (now_on, moved) = shell.landed();
        let rest = (0..now_on.len()).filter(|c| !moved.contains(c));
        for c in moved.iter().copied().chain(rest) {
            let Some(&to) = now_on.get(c) else { continue };
            self.lost[c] = to.is_none();
            // An update that tells a client the port it is on already (a re-assertion) is no
            // arrival.
            match to {
                Some(to) if to != self.on[c] => {
                    self.on[c] = to;
                    // A flow arriving on a slave ramps up against the ones already there.
                    self.weight[c] = self.new_weight();
                }
                _ => {}
            }
        }
        self.grow();
        before
    }

    /// What each flow and each slave delivers this second, Mbit/s: the new placement, and
    /// for the first `move_lag` of the second still the clients' old one (`before`).
    fn deliver(&self, s: &Scenario, before: &[usize], arrives: &[Vec<usize>]) -> Shares {
        let mut now = self.rates(s, &self.on, arrives);
        let lag = s.elastic.move_lag;
        if lag > 0.0 && before != self.on {
            let old = self.rates(s, before, arrives);
            for (r, o) in now.rx.iter_mut().zip(&old.rx) {
                *r = lag * o + (1.0 - lag) * *r;
            }
            for (r, o) in now.rate.iter_mut().zip(&old.rate).take(self.on.len()) {
                *r = lag * o + (1.0 - lag) * *r;
            }
        }
        now
    }
}

/// A second's traffic, Mbit/s.
struct Shares {
    /// By flow: the clients', then the guests'.
    rate: Vec<f64>,
    /// Each slave's, of the clients.
    rx: Vec<f64>,
    /// Each guest's share of each slave it reaches: (guest, slave, Mbit/s).
    guests: Vec<(usize, usize, f64)>,
}

/// Runs the scenario through the daemon's engine; one `TickOut` per tick goes to `emit`.
pub fn run(s: &Scenario, emit: impl FnMut(&TickOut)) {
    run_logged(s, log::LevelFilter::Off, emit, |_| {});
}

/// [`run`], with the engine's log records at `log` and above handed to `say` as lines, each
/// with its simulated time, before the tick they belong to.
pub fn run_logged(
    s: &Scenario,
    log: log::LevelFilter,
    mut emit: impl FnMut(&TickOut),
    mut say: impl FnMut(&str),
) {
    let mut w = World::new(s);
    let mut shell = Shell::new(s, log);
    for (t, tick) in s.ticks.iter().enumerate() {
        let t = t as u64;
        let before = w.begin_tick(s, t, tick, &mut shell);
        let n = s.clients.len();
        let arrives = shell.guest_paths(t, &w.demand[n..]);
        let Shares { rate, rx, guests } = w.deliver(s, &before, &arrives);
        w.shrink(&rate);
        // Counted under the ratio in force this second; the counter read at its end sets the
        // next second's.
        let counted: Vec<f64> = (0..n)
            .map(|c| {
                let p = w.on[c];
                match &mut w.counting {
                    _ if !w.up[p] => 0.0,
                    Some(k) => k.counted(rate[c], shell.one_in[p]),
                    None => rate[c],
                }
            })
            .collect();
        let on: Vec<Option<usize>> = (0..n).map(|c| (!w.lost[c]).then_some(w.on[c])).collect();
        let flows = Flows {
            demand: &w.demand[..n],
            rate: &rate[..n],
            on: &on,
            counted: &counted,
        };
        let decided = shell.second(t, &rx, flows, &guests);
        // What the slaves received: the clients' and every copy of the guests' frames.
        let mut rx = rx;
        for &(_, p, mbps) in &guests {
            rx[p] += mbps;
        }
        let delivered = rate[..n].iter().sum::<f64>() + decided.guests_got.iter().sum::<f64>();
        let slaves = s
            .slaves
            .iter()
            .enumerate()
            .map(|(i, sl)| {
                (
                    sl.name.clone(),
                    SlaveOut {
                        rx_mbps: round(rx[i]),
                        util: round(rx[i] / sl.capacity_mbps),
                        overloaded: decided.overloaded[i],
                        one_in: w
                            .counting
                            .as_ref()
                            .map(|_| shell.one_in[i])
                            .filter(|n| *n > 1),
                    },
                )
            })
            .collect();
        for line in shell.take_log() {
            say(&line);
        }
        emit(&TickOut {
            t,
            slaves,
            moves: decided.moves,
            delivered_mbps: round(delivered),
            demand_mbps: round(w.demand.iter().sum()),
            placement: w.on.clone(),
            demands: w.demand[..n].to_vec(),
        });
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
