//! A scenario for `rlbd simulate`: its JSON form and its checks, every error naming the field
//! at fault; `random_demands` expanded into clients and ticks.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::counting::SamplingSpec;
use super::generate;
use crate::policy::PolicyConfig;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub slaves: Vec<SlaveSpec>,
    #[serde(default)]
    pub clients: Vec<ClientSpec>,
    #[serde(default)]
    pub ticks: Vec<Tick>,
    #[serde(default)]
    pub events: Vec<Event>,
    #[serde(default)]
    pub config: PolicyConfig,
    /// Clients and demands drawn from a seed, instead of `clients` and `ticks`.
    #[serde(default)]
    pub random_demands: Option<RandomDemands>,
    /// How a saturated slave shares its capacity, and how late moves take effect.
    #[serde(default)]
    pub elastic: Elastic,
    /// How the daemon counts the clients' packets: sampled on a busy port, as the kernel's
    /// program samples it; absent: every packet counted.
    #[serde(default)]
    pub sampling: Option<SamplingSpec>,
    /// The slaves are bond0's, in balance-alb: its driver answers the clients' ARP, deals the
    /// clients of a slave that fails or returns anew and tells them, and moves the bond's MAC
    /// when the active slave (the first) fails. Absent or false: plain ports.
    #[serde(default)]
    pub bond: bool,
    /// Guests (VMs, containers) behind a bridge over the bond, each behind its tap from the
    /// start; their demands are in `ticks` by name. rlbd balances them as the daemon does
    /// with `[guests] enabled`. Needs `bond`.
    #[serde(default)]
    pub guests: Vec<GuestSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestSpec {
    /// Its name in `ticks` and in the output.
    pub name: String,
    /// Its MAC, `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
    /// Its VLAN on the bond, 0 (the default) untagged.
    #[serde(default)]
    pub vlan: u16,
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

/// `clients` clients, all on `slave`, idle until tick `start`, then each sending a fixed demand
/// drawn from `seed`, the demands adding up to `load` x the capacity of all slaves.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomDemands {
    pub seed: u64,
    pub load: f64,
    pub clients: usize,
    pub slave: String,
    pub ticks: usize,
    #[serde(default = "default_start")]
    pub start: usize,
    /// Smallest demand relative to the largest, in (0, 1].
    #[serde(default = "default_spread")]
    pub spread: f64,
    /// No demand is more than this fraction of the smallest slave's capacity.
    #[serde(default = "default_max_share")]
    pub max_share: f64,
}

fn default_start() -> usize {
    1
}
fn default_spread() -> f64 {
    0.25
}
fn default_max_share() -> f64 {
    0.6
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Elastic {
    /// Seed of the share weights.
    pub seed: u64,
    /// Largest share weight (the smallest is 1, drawn log-uniformly between): 1 is max-min
    /// fair, 30 lets one flow get thirty times another's share on a saturated slave (the
    /// namespace lab's TCP flows through one tbf: some nearly starve for seconds).
    pub unfairness: f64,
    /// Fraction of the second after a decision during which the old placement still holds,
    /// in [0, 1).
    pub move_lag: f64,
    /// Share of its capacity a saturated slave delivers, in (0, 1]: a real port's receive
    /// counter tops out under its nominal speed (framing, gaps; the namespace lab's tbf ports
    /// read about 0.97), while a client that is not held back reads what it sends.
    pub efficiency: f64,
    /// How fast a flow takes up room it is given, in [0, 1]: each second it closes a random part
    /// of the gap between what it sends and its demand, drawn uniformly between this and 1; on a
    /// full slave it falls to its share. 1 (the default) means at once. In the namespace lab a
    /// client moved off a saturated port draws 90% of its demand within 1 s in about half the
    /// moves, within 2 s in nine of ten, within 4 s in all (0.6 models that).
    pub growth: f64,
}

impl Default for Elastic {
    fn default() -> Self {
        Self {
            seed: 0,
            unfairness: 1.0,
            move_lag: 0.0,
            efficiency: 1.0,
            growth: 1.0,
        }
    }
}

/// The most slaves a simulated bond has (their ifindexes stay below the bond's).
const MAX_BOND_SLAVES: usize = 16;

/// Parses and checks a scenario; every error names the field at fault.
pub fn parse(text: &str) -> Result<Scenario, String> {
    let mut s: Scenario = serde_json::from_str(text).map_err(|e| format!("scenario: {e}"))?;
    s.config.validate().map_err(|e| format!("config.{e}"))?;
    if s.slaves.is_empty() {
        return Err("slaves: at least one slave is needed".into());
    }
    if s.bond && s.slaves.len() > MAX_BOND_SLAVES {
        return Err(format!(
            "slaves: a bond of at most {MAX_BOND_SLAVES} slaves is simulated, not {}",
            s.slaves.len()
        ));
    }
    let mut names = std::collections::HashSet::new();
    for (i, sl) in s.slaves.iter().enumerate() {
        if !(sl.capacity_mbps.is_finite() && sl.capacity_mbps > 0.0) {
            return Err(format!(
                "slaves[{i}].capacity_mbps: {} is not a positive number",
                sl.capacity_mbps
            ));
        }
        if !names.insert(sl.name.clone()) {
            return Err(format!("slaves[{i}].name: {:?} appears twice", sl.name));
        }
    }
    let e = &s.elastic;
    if !(e.unfairness.is_finite() && e.unfairness >= 1.0) {
        return Err(format!(
            "elastic.unfairness: {} is not a number >= 1",
            e.unfairness
        ));
    }
    if !(e.move_lag >= 0.0 && e.move_lag < 1.0) {
        return Err(format!("elastic.move_lag: {} is not in [0, 1)", e.move_lag));
    }
    if !(e.efficiency > 0.0 && e.efficiency <= 1.0) {
        return Err(format!(
            "elastic.efficiency: {} is not in (0, 1]",
            e.efficiency
        ));
    }
    if !(e.growth >= 0.0 && e.growth <= 1.0) {
        return Err(format!("elastic.growth: {} is not in [0, 1]", e.growth));
    }
    if let Some(r) = s.random_demands.clone() {
        expand(&mut s, &r)?;
    }
    let mut ips = std::collections::HashSet::new();
    for (i, c) in s.clients.iter().enumerate() {
        if !names.contains(&c.slave) {
            return Err(format!("clients[{i}].slave: unknown slave {:?}", c.slave));
        }
        if !ips.insert(c.ip.as_str()) {
            return Err(format!("clients[{i}].ip: {:?} appears twice", c.ip));
        }
    }
    check_guests(&s, &mut ips)?;
    for (t, tick) in s.ticks.iter().enumerate() {
        for (ip, d) in tick.demand_mbps.iter().flatten() {
            if !ips.contains(ip.as_str()) {
                return Err(format!(
                    "ticks[{t}].demand_mbps: unknown client or guest {ip:?}"
                ));
            }
            if !(d.is_finite() && *d >= 0.0) {
                return Err(format!(
                    "ticks[{t}].demand_mbps.{ip}: {d} is not a rate >= 0"
                ));
            }
        }
    }
    for (i, e) in s.events.iter().enumerate() {
        if !names.contains(&e.slave) {
            return Err(format!("events[{i}].slave: unknown slave {:?}", e.slave));
        }
    }
    Ok(s)
}

/// The guests: behind a bond, each name new among the clients' and the guests', each MAC
/// (on its VLAN) once, VLANs 0-4094. Their names join `names`, the keys `ticks` may use.
fn check_guests<'a>(
    s: &'a Scenario,
    names: &mut std::collections::HashSet<&'a str>,
) -> Result<(), String> {
    if s.guests.is_empty() {
        return Ok(());
    }
    if !s.bond {
        return Err("guests: guests are behind a bridge over the bond: set \"bond\": true".into());
    }
    if s.random_demands.is_some() {
        return Err("guests: give their demands in ticks, not with random_demands".into());
    }
    let mut keys = std::collections::HashSet::new();
    for (i, g) in s.guests.iter().enumerate() {
        if !names.insert(g.name.as_str()) {
            return Err(format!("guests[{i}].name: {:?} appears twice", g.name));
        }
        let mac: crate::Mac = g
            .mac
            .parse()
            .map_err(|_| format!("guests[{i}].mac: {:?} is not a MAC address", g.mac))?;
        if g.vlan > 4094 {
            return Err(format!("guests[{i}].vlan: {} is not in 0-4094", g.vlan));
        }
        if !keys.insert((mac, g.vlan)) {
            return Err(format!("guests[{i}].mac: {} appears twice", g.mac));
        }
    }
    Ok(())
}

/// Replaces `random_demands` by the clients and ticks it stands for.
fn expand(s: &mut Scenario, r: &RandomDemands) -> Result<(), String> {
    if !s.clients.is_empty() || !s.ticks.is_empty() {
        return Err("random_demands: give either it or clients and ticks, not both".into());
    }
    if !s.slaves.iter().any(|sl| sl.name == r.slave) {
        return Err(format!("random_demands.slave: unknown slave {:?}", r.slave));
    }
    if !(r.load.is_finite() && r.load > 0.0) {
        return Err(format!("random_demands.load: {} is not positive", r.load));
    }
    if !(r.max_share > 0.0 && r.max_share.is_finite()) {
        return Err(format!(
            "random_demands.max_share: {} is not positive",
            r.max_share
        ));
    }
    if r.start >= r.ticks {
        return Err(format!(
            "random_demands.start: {} is not before the last tick ({})",
            r.start, r.ticks
        ));
    }
    let total_cap: f64 = s.slaves.iter().map(|sl| sl.capacity_mbps).sum();
    let smallest = s
        .slaves
        .iter()
        .map(|sl| sl.capacity_mbps)
        .fold(f64::INFINITY, f64::min);
    let d = generate::demands(&generate::DemandSpec {
        seed: r.seed,
        clients: r.clients,
        total: ((r.load * total_cap) * 10.0).round() / 10.0,
        max_each: r.max_share * smallest,
        spread: r.spread,
    })
    .map_err(|e| format!("random_demands.{e}"))?;
    s.clients = (0..r.clients)
        .map(|i| ClientSpec {
            ip: format!("198.18.{}.{}", 1 + i / 200, 11 + i % 200),
            slave: r.slave.clone(),
        })
        .collect();
    let zero: BTreeMap<String, f64> = s.clients.iter().map(|c| (c.ip.clone(), 0.0)).collect();
    let on: BTreeMap<String, f64> = s
        .clients
        .iter()
        .zip(&d)
        .map(|(c, x)| (c.ip.clone(), *x))
        .collect();
    s.ticks = (0..r.ticks)
        .map(|t| Tick {
            demand_mbps: match t {
                0 => Some(zero.clone()),
                t if t == r.start => Some(on.clone()),
                _ => None,
            },
        })
        .collect();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bond_of_more_slaves_than_simulated_is_refused() {
        let slaves: Vec<String> = (0..17)
            .map(|i| format!(r#"{{"name":"s{i}","capacity_mbps":1}}"#))
            .collect();
        let text = format!(r#"{{"bond":true,"slaves":[{}]}}"#, slaves.join(","));
        let e = parse(&text).unwrap_err();
        assert!(e.starts_with("slaves: a bond of at most 16"), "{e}");
        assert!(parse(&text.replace("true", "false")).is_ok());
    }

    #[test]
    fn guests_need_a_bond_names_of_their_own_and_macs() {
        let base = r#"{"slaves":[{"name":"a","capacity_mbps":1}],
            "clients":[{"ip":"10.0.0.1","slave":"a"}],"guests":GUESTS BOND}"#;
        let try_ =
            |guests: &str, bond: &str| parse(&base.replace("GUESTS", guests).replace("BOND", bond));
        let vm = r#"[{"name":"vm","mac":"52:54:00:00:00:01"}]"#;
        assert!(try_(vm, "")
            .unwrap_err()
            .starts_with("guests: guests are behind a bridge"));
        assert!(try_(vm, r#","bond":true"#).is_ok());
        let e = try_(
            r#"[{"name":"10.0.0.1","mac":"52:54:00:00:00:01"}]"#,
            r#","bond":true"#,
        );
        assert!(e.unwrap_err().starts_with("guests[0].name"));
        let e = try_(r#"[{"name":"vm","mac":"52:54"}]"#, r#","bond":true"#);
        assert!(e.unwrap_err().starts_with("guests[0].mac"));
        let two =
            r#"[{"name":"a1","mac":"52:54:00:00:00:01"},{"name":"a2","mac":"52:54:00:00:00:01"}]"#;
        assert!(try_(two, r#","bond":true"#)
            .unwrap_err()
            .starts_with("guests[1].mac"));
    }

    #[test]
    fn growth_out_of_range_is_refused() {
        let e = parse(r#"{"slaves":[{"name":"a","capacity_mbps":1}],"elastic":{"growth":1.5}}"#)
            .unwrap_err();
        assert!(e.starts_with("elastic.growth"), "{e}");
    }
}
