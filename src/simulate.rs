//! `rlbd simulate`: replays a scenario through the detector and planner, one tick a second.
//!
//! The switch model: each up slave delivers at most its capacity, shared max-min fairly among
//! the clients sending to it; a down slave delivers nothing; a move takes effect on the next tick.

use std::collections::BTreeMap;
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::policy::{self, ClientView, Detector, PolicyConfig, PortView};

pub mod generate;
pub mod ideal;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub slaves: Vec<SlaveSpec>,
    pub clients: Vec<ClientSpec>,
    pub ticks: Vec<Tick>,
    #[serde(default)]
    pub events: Vec<Event>,
    #[serde(default)]
    pub config: PolicyConfig,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlaveSpec {
    pub name: String,
    pub capacity_mbps: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    pub ip: String,
    pub slave: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tick {
    pub demand_mbps: Option<BTreeMap<String, f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub t: u64,
    pub slave: String,
    pub up: bool,
}

#[derive(Debug, Serialize)]
pub struct SlaveOut {
    pub rx_mbps: f64,
    pub util: f64,
    pub overloaded: bool,
}

#[derive(Debug, Serialize)]
pub struct MoveOut {
    pub client: String,
    pub from: String,
    pub to: String,
    pub rate_mbps: f64,
    pub reason: policy::Reason,
}

#[derive(Debug, Serialize)]
pub struct TickOut {
    pub t: u64,
    pub slaves: BTreeMap<String, SlaveOut>,
    pub moves: Vec<MoveOut>,
    pub delivered_mbps: f64,
}

/// Parses and checks a scenario; every error names the field at fault.
pub fn parse(text: &str) -> Result<Scenario, String> {
    let s: Scenario = serde_json::from_str(text).map_err(|e| format!("scenario: {e}"))?;
    s.config.validate().map_err(|e| format!("config.{e}"))?;
    if s.slaves.is_empty() {
        return Err("slaves: at least one slave is needed".into());
    }
    let mut names = std::collections::HashSet::new();
    for (i, sl) in s.slaves.iter().enumerate() {
        if !(sl.capacity_mbps.is_finite() && sl.capacity_mbps > 0.0) {
            return Err(format!(
                "slaves[{i}].capacity_mbps: {} is not a positive number",
                sl.capacity_mbps
            ));
        }
        if !names.insert(sl.name.as_str()) {
            return Err(format!("slaves[{i}].name: {:?} appears twice", sl.name));
        }
    }
    let mut ips = std::collections::HashSet::new();
    for (i, c) in s.clients.iter().enumerate() {
        if !names.contains(c.slave.as_str()) {
            return Err(format!("clients[{i}].slave: unknown slave {:?}", c.slave));
        }
        if !ips.insert(c.ip.as_str()) {
            return Err(format!("clients[{i}].ip: {:?} appears twice", c.ip));
        }
    }
    for (t, tick) in s.ticks.iter().enumerate() {
        for (ip, d) in tick.demand_mbps.iter().flatten() {
            if !ips.contains(ip.as_str()) {
                return Err(format!("ticks[{t}].demand_mbps: unknown client {ip:?}"));
            }
            if !(d.is_finite() && *d >= 0.0) {
                return Err(format!(
                    "ticks[{t}].demand_mbps.{ip}: {d} is not a rate >= 0"
                ));
            }
        }
    }
    for (i, e) in s.events.iter().enumerate() {
        if !names.contains(e.slave.as_str()) {
            return Err(format!("events[{i}].slave: unknown slave {:?}", e.slave));
        }
    }
    Ok(s)
}

/// Max-min fair shares of `capacity` among `demands` (water filling).
pub fn fair_share(capacity: f64, demands: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by(|&a, &b| demands[a].total_cmp(&demands[b]));
    let mut out = vec![0.0; demands.len()];
    let mut left = capacity.max(0.0);
    for (k, &i) in order.iter().enumerate() {
        let share = left / (order.len() - k) as f64;
        out[i] = demands[i].min(share);
        left -= out[i];
    }
    out
}

/// Runs the scenario; one `TickOut` per tick goes to `emit`.
pub fn run(s: &Scenario, mut emit: impl FnMut(&TickOut)) {
    let cfg = &s.config;
    let slave_ix: BTreeMap<&str, usize> = s
        .slaves
        .iter()
        .enumerate()
        .map(|(i, sl)| (sl.name.as_str(), i))
        .collect();
    let mut up = vec![true; s.slaves.len()];
    let mut on: Vec<usize> = s
        .clients
        .iter()
        .map(|c| slave_ix[c.slave.as_str()])
        .collect();
    let mut demand = vec![0.0; s.clients.len()];
    let mut moved_at: Vec<Option<u64>> = vec![None; s.clients.len()];
    let mut detectors: Vec<Detector> = s
        .slaves
        .iter()
        .map(|_| Detector::new(cfg.window, cfg.hits))
        .collect();
    let mut pending: Vec<(usize, usize)> = Vec::new();

    for (t, tick) in s.ticks.iter().enumerate() {
        let t = t as u64;
        for e in s.events.iter().filter(|e| e.t == t) {
            up[slave_ix[e.slave.as_str()]] = e.up;
        }
        for (c, to) in pending.drain(..) {
            on[c] = to;
        }
        if let Some(d) = &tick.demand_mbps {
            for (i, c) in s.clients.iter().enumerate() {
                if let Some(v) = d.get(&c.ip) {
                    demand[i] = *v;
                }
            }
        }
        // What each slave delivers this second.
        let mut rate = vec![0.0; s.clients.len()];
        for (p, sl) in s.slaves.iter().enumerate() {
            if !up[p] {
                continue;
            }
            let members: Vec<usize> = (0..s.clients.len()).filter(|&c| on[c] == p).collect();
            let d: Vec<f64> = members.iter().map(|&c| demand[c]).collect();
            for (k, share) in fair_share(sl.capacity_mbps, &d).into_iter().enumerate() {
                rate[members[k]] = share;
            }
        }
        let mut ports = Vec::with_capacity(s.slaves.len());
        for (p, sl) in s.slaves.iter().enumerate() {
            let rx: f64 = (0..s.clients.len())
                .filter(|&c| on[c] == p)
                .map(|c| rate[c])
                .sum();
            let util = rx / sl.capacity_mbps;
            if up[p] {
                detectors[p].push(Some(util), cfg.threshold);
            } else {
                detectors[p].reset();
            }
            ports.push(PortView {
                capacity_bps: sl.capacity_mbps * 1e6,
                up: up[p],
                rx_bps: rx * 1e6,
                overloaded: detectors[p].overloaded(),
            });
        }
        // A down slave's clients demand as before; the daemon sees them there (last frames).
        let clients: Vec<ClientView> = (0..s.clients.len())
            .map(|c| ClientView {
                port: on[c],
                rate_bps: if up[on[c]] {
                    rate[c] * 1e6
                } else {
                    demand[c] * 1e6
                },
                held: moved_at[c].is_some_and(|m| t.saturating_sub(m) < cfg.hold_down),
            })
            .collect();
        let moves = policy::plan(cfg, &ports, &clients);
        let mut out_moves = Vec::with_capacity(moves.len());
        for m in &moves {
            moved_at[m.client] = Some(t);
            pending.push((m.client, m.to));
            out_moves.push(MoveOut {
                client: s.clients[m.client].ip.clone(),
                from: s.slaves[m.from].name.clone(),
                to: s.slaves[m.to].name.clone(),
                rate_mbps: round(m.rate_bps / 1e6),
                reason: m.reason,
            });
        }
        let slaves = s
            .slaves
            .iter()
            .zip(&ports)
            .map(|(sl, p)| {
                let rx = p.rx_bps / 1e6;
                (
                    sl.name.clone(),
                    SlaveOut {
                        rx_mbps: round(rx),
                        util: round(rx / sl.capacity_mbps),
                        overloaded: p.overloaded,
                    },
                )
            })
            .collect();
        emit(&TickOut {
            t,
            slaves,
            moves: out_moves,
            delivered_mbps: round(rate.iter().sum()),
        });
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The subcommand: read FILE (or `-`), print JSON lines.
pub fn main(path: &std::path::Path) -> Result<(), String> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| format!("stdin: {e}"))?
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?
    };
    let scenario = parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = None;
    run(&scenario, |tick| {
        if err.is_none() {
            if let Err(e) = serde_json::to_writer(&mut out, tick)
                .map_err(std::io::Error::from)
                .and_then(|_| writeln!(out))
            {
                err = Some(e);
            }
        }
    });
    out.flush().map_err(|e| format!("stdout: {e}"))?;
    err.map_or(Ok(()), |e| Err(format!("stdout: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fair_share_is_max_min() {
        assert_eq!(fair_share(1000.0, &[900.0, 900.0]), vec![500.0, 500.0]);
        assert_eq!(fair_share(1000.0, &[100.0, 900.0]), vec![100.0, 900.0]);
        assert_eq!(
            fair_share(1000.0, &[100.0, 950.0, 950.0]),
            vec![100.0, 450.0, 450.0]
        );
        assert!(fair_share(1000.0, &[]).is_empty());
    }
}
