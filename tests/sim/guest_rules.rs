//! The guests' rules, checked as the run goes (issue 38): each move against the threshold
//! (2 of 3 seconds) and the hold-down, each second's delivery (no duplicate, only on the pinned
//! slave), the failover (no pin on a dead slave, every guest receiving again within 1 s), the
//! balance of two heavy guests on one slave. The announcement and the release are checked
//! where they happen (`guest_shell.rs`).

use std::collections::{HashMap, VecDeque};

use rlbd::client::ClientKey;

use super::balance::{PATIENCE_MS, WARMUP_MS};
use super::checks::Check;
use rlbd::simulate::lan::World;

/// A guest that is not received for this long (after the first second without) breaks the
/// failover rule: the "receiving within 1 s of a slave failing".
pub const RECEIVE_GRACE_MS: u64 = 1_000;
/// A heavy guest receives at least this share of its slave.
const HEAVY: f64 = 0.15;

pub type Broken = (Check, String);

#[derive(Debug, Default)]
pub struct GuestRules {
    /// Pins of the batch not announced yet: (guest, world port).
    pub unannounced: Vec<(ClientKey, usize)>,
    /// Each guest's last move with a reason: when, the hold-down then (ms), and the port an
    /// overload or room move took it off (one correction may follow within the hold-down).
    moved: HashMap<ClientKey, (u64, u64, Option<usize>)>,
    /// The world port each guest was pinned to before its last pin.
    pub from: HashMap<ClientKey, usize>,
    /// The ports' utilization and the threshold, the last 3 seconds.
    util: VecDeque<(Vec<f64>, f64)>,
    last_rx: Vec<u64>,
    /// Since when each guest has received nothing.
    starved: HashMap<ClientKey, u64>,
    /// Since when two heavy guests have shared an overloaded slave that could be mended.
    unbalanced: Option<u64>,
    /// Figures: moves by kind, announcements and releases checked.
    pub balancing_moves: u64,
    pub overload_moves: u64,
    pub failover_moves: u64,
    pub announced: u64,
    pub released: u64,
    pub duplicates_checked: u64,
}

impl GuestRules {
    /// A new engine (a restart): what the old one held is its own.
    pub fn forget(&mut self) {
        self.moved.clear();
        self.starved.clear();
        self.unannounced.clear();
    }

    pub fn released(&mut self, key: ClientKey) {
        self.moved.remove(&key);
        self.starved.remove(&key);
    }

    /// The second's port utilization (what the slaves' counters show) and the threshold.
    pub fn record(&mut self, world: &World, threshold: f64) {
        self.last_rx.resize(world.ports.len(), 0);
        let util = world
            .ports
            .iter()
            .zip(&mut self.last_rx)
            .map(|(p, last)| {
                let u = p.rx_bytes.saturating_sub(*last) as f64 * 8.0 / p.capacity_bps();
                *last = p.rx_bytes;
                u
            })
            .collect();
        self.util.push_back((util, threshold));
        if self.util.len() > 3 {
            self.util.pop_front();
        }
    }

    /// A guest's move to world port `to`, as its log record tells it (`reason`). Within the
    /// hold-down, as for clients (policy/settle): at most one correction (`settle`) of an
    /// overload or room move, not back to the port that move left.
    pub fn on_move(
        &mut self,
        now: u64,
        (key, to): (ClientKey, Option<usize>),
        reason: &str,
        hold_ms: u64,
    ) -> Result<(), Broken> {
        let from = self.from.get(&key).copied();
        let balancing = matches!(reason, "overload" | "room" | "settle");
        if reason == "failover" {
            self.failover_moves += 1;
        }
        if balancing {
            self.balancing_moves += 1;
            if let Some(&(at, then, left)) = self.moved.get(&key) {
                let hold = then.min(hold_ms);
                let correction = reason == "settle" && left.is_some_and(|l| Some(l) != to);
                if now < at + hold && !correction {
                    let why = format!(
                        "guest {key} moved again ({reason}, to {to:?}) {} ms after its last move \
                         (hold-down {hold} ms; a correction off {left:?} allowed)",
                        now - at
                    );
                    return Err((Check::GuestHoldDown, why));
                }
            }
        }
        let correctable = matches!(reason, "overload" | "room")
            .then_some(from)
            .flatten();
        self.moved.insert(key, (now, hold_ms, correctable));
        if reason != "overload" {
            return Ok(());
        }
        self.overload_moves += 1;
        let Some(from) = from else {
            return Ok(());
        };
        // The detector's 2 of 3 seconds over the threshold (a hair of slack for the counters'
        // rounding).
        let over = self
            .util
            .iter()
            .filter(|(u, thr)| u.get(from).is_some_and(|u| *u > thr - 0.005))
            .count();
        if over < 2 {
            let seen: Vec<String> = self
                .util
                .iter()
                .map(|(u, _)| format!("{:.3}", u.get(from).copied().unwrap_or(0.0)))
                .collect();
            let why = format!(
                "guest {key} left port {from} for overload with {over} of the last 3 seconds over \
                 the threshold ({})",
                seen.join(", ")
            );
            return Err((Check::GuestThreshold, why));
        }
        Ok(())
    }

    /// After a second's traffic: no guest delivered twice or off its pin; every guest pinned to
    /// a live slave and receiving within `RECEIVE_GRACE_MS` (`watching`: the daemon has been up
    /// for a while).
    pub fn after_second(&mut self, now: u64, world: &World, watching: bool) -> Result<(), Broken> {
        let Some(lan) = &world.guests else {
            return Ok(());
        };
        let any_live = world.ports.iter().any(|p| p.live());
        for g in lan.guests.iter().filter(|g| g.present) {
            self.duplicates_checked += 1;
            let pin = lan.pins.get(&g.key).copied().filter(|_| lan.path);
            if g.deliveries > 1 {
                let why = format!(
                    "guest {} was delivered the same frames on {} slaves (pinned to {pin:?})",
                    g.key, g.deliveries
                );
                return Err((Check::GuestDelivery, why));
            }
            if let (Some(p), Some(on)) = (pin, g.delivered_on) {
                if p != on {
                    let why = format!("guest {} pinned to port {p} was delivered on {on}", g.key);
                    return Err((Check::GuestDelivery, why));
                }
            }
            if let Some(p) = pin {
                let port = &world.ports[p];
                if !port.live() && now > port.down_since + RECEIVE_GRACE_MS {
                    let why = format!(
                        "guest {} pinned to {} {} ms after it went down",
                        g.key,
                        port.name,
                        now - port.down_since
                    );
                    return Err((Check::GuestFailover, why));
                }
            }
            let starving = watching && any_live && g.demand_bps > 0.0 && g.delivered_bps <= 0.0;
            if !starving {
                self.starved.remove(&g.key);
                continue;
            }
            let since = *self.starved.entry(g.key).or_insert(now);
            if now >= since + RECEIVE_GRACE_MS {
                let why = format!(
                    "guest {} (pinned to {pin:?}, the switch has it on {:?}) received nothing \
                     for {} ms",
                    g.key,
                    lan.switch.port_of(g.key),
                    now - since + 1000
                );
                return Err((Check::GuestFailover, why));
            }
        }
        Ok(())
    }

    /// In a calm, after the warm-up: two heavy guests that rlbd may move on one slave over its
    /// threshold, while another slave has room for the lighter one, for `PATIENCE_MS` on end.
    pub fn balance(
        &mut self,
        now: u64,
        world: &World,
        calm_since: Option<u64>,
        (threshold, min_gain, hold_ms): (f64, f64, u64),
    ) -> Result<(), Broken> {
        let settled = calm_since.is_some_and(|t| now >= t + WARMUP_MS);
        let why = settled
            .then(|| self.mendable(now, world, (threshold, min_gain, hold_ms)))
            .flatten();
        let Some(why) = why else {
            self.unbalanced = None;
            return Ok(());
        };
        let since = *self.unbalanced.get_or_insert(now);
        if now >= since + PATIENCE_MS {
            let why = format!("unbalanced for {} ms on a settled LAN: {why}", now - since);
            return Err((Check::GuestBalance, why));
        }
        Ok(())
    }

    fn mendable(
        &self,
        now: u64,
        world: &World,
        (threshold, min_gain, hold_ms): (f64, f64, u64),
    ) -> Option<String> {
        let lan = world.guests.as_ref().filter(|l| l.path)?;
        let (util, _) = self.util.back()?;
        let n = world.ports.len().min(util.len());
        let cap = |p: usize| world.ports[p].capacity_bps();
        let live = (0..n).filter(|p| world.ports[*p].live());
        let (load, capacity) =
            live.fold((0.0, 0.0), |(l, c), p| (l + util[p] * cap(p), c + cap(p)));
        if load > (threshold - min_gain) * capacity {
            return None;
        }
        let free = |g: &&rlbd::simulate::lan::guests::Guest| {
            let held = self
                .moved
                .get(&g.key)
                .is_some_and(|(t, _, _)| now < t + hold_ms);
            g.present && !held
        };
        for hot in (0..n).filter(|p| world.ports[*p].live() && util[*p] > threshold) {
            let mut heavy: Vec<f64> = lan
                .guests
                .iter()
                .filter(free)
                .filter(|g| lan.pins.get(&g.key) == Some(&hot))
                .map(|g| g.delivered_bps)
                .filter(|r| *r >= HEAVY * cap(hot) && *r < threshold * cap(hot))
                .collect();
            if heavy.len() < 2 {
                continue;
            }
            heavy.sort_by(|a, b| a.total_cmp(b));
            let lighter = heavy[0];
            let cold = (0..n)
                .filter(|p| *p != hot && world.ports[*p].live())
                .min_by(|a, b| util[*a].total_cmp(&util[*b]))?;
            let room = threshold.min(util[hot] - min_gain) * cap(cold) - util[cold] * cap(cold);
            if lighter <= room {
                return Some(format!(
                    "{} at {:.2} with heavy guests of {:?} Mbit/s, {} at {:.2} has room for {:.1}",
                    world.ports[hot].name,
                    util[hot],
                    heavy
                        .iter()
                        .map(|r| (r / 1e5).round() / 10.0)
                        .collect::<Vec<_>>(),
                    world.ports[cold].name,
                    util[cold],
                    lighter / 1e6
                ));
            }
        }
        None
    }
}
