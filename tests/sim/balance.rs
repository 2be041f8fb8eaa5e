//! The balance rule, the point of rlbd: once the LAN is settled, no port stays over its
//! threshold while another port has room for one of its clients that rlbd may move.
//!
//! Only while the live ports' total load leaves the threshold room (`threshold - min_gain` of
//! their sum): a fuller bond is packed, not balanced under the threshold. "Settled": within a calm (no client arrives, leaves or changes its demand; no failure,
//! restart, reload or other chaos) after `WARMUP_MS`, so the detector (2 of 3 seconds) and the
//! planner have had their chance. "Room", as the paper's
//! rule 3 promises it: with the client's delivered rate (all rlbd can know of it) the least
//! loaded port stays at or under the threshold and ends at least `min_gain` below where the hot
//! port started. "May move": one of at least two clients over `min_rate` on the hot port, not
//! itself over the threshold's worth (an elephant moves its load, not the problem), not the
//! smallest when there is no elephant (the paper's walk leaves one client; on a saturated port,
//! packing's rules instead: up to `max_fill`, and no client TCP starved), confirmed
//! by the server's neighbour table (rlbd sends to no one else), not in a hold-down (as the
//! status says). Held that way for `PATIENCE_MS` on end, it is a failure.

use rlbd::status::StatusReport;

use rlbd::simulate::lan::World;

/// How long an imbalance rlbd could mend may last: the detector's 2 of 3 seconds, the
/// evaluation, the update's way to the client, and a second's counts of it on the new port,
/// many times over.
pub const PATIENCE_MS: u64 = 30_000;
/// How long a calm lasts, and how long of it the LAN is given before the rule applies.
pub const CALM_MS: u64 = 150_000;
pub const WARMUP_MS: u64 = 60_000;

pub struct Balance {
    pub threshold: f64,
    pub min_gain: f64,
    pub min_rate_bps: f64,
    pub saturated: f64,
    pub max_fill: f64,
    /// The current calm's start, if one is on.
    pub calm_since: Option<u64>,
    /// Since when the imbalance has held without a break, and the words for it.
    since: Option<u64>,
    /// The bits of a packet where the ports count (`counting.rs`): on a sampled port a client
    /// under the engine's resolution reads as nothing to it, and one near it now and then.
    pub packet_bits: f64,
}

impl Balance {
    pub fn new(policy: &rlbd::policy::PolicyConfig) -> Balance {
        Balance {
            threshold: policy.threshold,
            min_gain: policy.min_gain,
            min_rate_bps: policy.min_rate_bps(),
            saturated: policy.saturated,
            max_fill: policy.max_fill,
            calm_since: None,
            since: None,
            packet_bits: 0.0,
        }
    }

    pub fn calm(&mut self, since: Option<u64>) {
        self.calm_since = since;
        self.since = None;
    }

    /// After a second's traffic and the status of it.
    pub fn check(&mut self, now: u64, world: &World, st: &StatusReport) -> Result<(), String> {
        if self.calm_since.is_none_or(|t| now < t + WARMUP_MS) {
            self.since = None;
            return Ok(());
        }
        let Some(why) = self.mendable(world, st) else {
            self.since = None;
            return Ok(());
        };
        let since = *self.since.get_or_insert(now);
        if now >= since + PATIENCE_MS {
            return Err(format!(
                "unbalanced for {} ms on a settled LAN: {why}",
                now - since
            ));
        }
        Ok(())
    }

    /// A port over its threshold with a client rlbd may move to a port with room for it.
    fn mendable(&self, world: &World, st: &StatusReport) -> Option<String> {
        let n = world.ports.len();
        let mut load = vec![0.0; n];
        let mut on: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, c) in world.clients.iter().enumerate() {
            let Some(p) = c.target().and_then(|m| world.port_of_mac(m)) else {
                continue;
            };
            if c.present && c.delivered_bps > 0.0 {
                load[p] += c.delivered_bps;
                on[p].push(i);
            }
        }
        // The guests behind the bond load the slaves too; a port their load alone puts over
        // the threshold is the guests' rule's (guest_rules.rs): no client's move mends it.
        let mut guests = vec![0.0; n];
        world.guest_load(&mut guests);
        load.iter_mut().zip(&guests).for_each(|(l, g)| *l += g);
        let cap = |p: usize| world.ports[p].capacity_bps();
        let util = |p: usize| load[p] / cap(p);
        // Over `threshold - min_gain` of the live ports' sum, no placement keeps every port
        // under the threshold for long: the planner packs instead (packing.rs), as it should.
        let live = (0..n).filter(|p| world.ports[*p].up);
        let (total, capacity) = live.fold((0.0, 0.0), |(t, c), p| (t + load[p], c + cap(p)));
        if total > (self.threshold - self.min_gain) * capacity {
            return None;
        }
        let by_guests = |p: usize| guests[p] > self.threshold * cap(p);
        let hot =
            (0..n).find(|p| world.ports[*p].up && util(*p) > self.threshold && !by_guests(*p))?;
        let cold = (0..n)
            .filter(|p| *p != hot && world.ports[*p].up)
            .min_by(|a, b| util(*a).total_cmp(&util(*b)))?;
        let rate = |c: usize| world.clients[c].delivered_bps;
        // The engine walks the clients it tracks: one evicted from a table smaller than the
        // LAN is load it cannot see (it may then take the hot port's one known client for its
        // only one, and rightly leave it).
        let tracked = |c: usize| {
            let mac = world.clients[c].mac.to_string();
            st.clients.iter().any(|s| s.mac == mac)
        };
        // Sampled, the engine sees a client only over its resolution (twice it: the reading's
        // spread): the others are not ones it may move, nor count as such.
        let one_in = st
            .ports
            .iter()
            .find(|p| p.name == world.ports[hot].name)
            .map_or(1, |p| p.sampling);
        let seen = 2.0 * rlbd::policy::sampling_resolution_bps(one_in, self.packet_bits);
        let mut eligible: Vec<usize> = on[hot]
            .iter()
            .copied()
            .filter(|c| rate(*c) >= self.min_rate_bps.max(seen) && tracked(*c))
            .collect();
        if eligible.len() < 2 {
            return None;
        }
        eligible.sort_by(|a, b| rate(*b).total_cmp(&rate(*a)));
        let elephant_rate = self.threshold * cap(hot);
        let elephant = rate(eligible[0]) >= elephant_rate;
        let room = if util(hot) >= self.saturated {
            // A saturated port (packing.rs): a target may fill up to `max_fill` while it ends
            // below the hot port, and a client TCP starved (under a quarter of the mean share
            // of the others) waits, its rate saying nothing of its demand.
            let small: Vec<f64> = eligible
                .iter()
                .map(|c| rate(*c))
                .filter(|r| *r < elephant_rate)
                .collect();
            let starved = 0.25 * small.iter().sum::<f64>() / small.len().max(1) as f64;
            eligible.retain(|c| rate(*c) >= starved);
            self.max_fill.max(self.threshold).min(util(hot) - 1e-3) * cap(cold) - load[cold]
        } else {
            // The paper's walk: largest first, and without an elephant the smallest stays.
            if !elephant {
                eligible.pop();
            }
            self.threshold.min(util(hot) - self.min_gain) * cap(cold) - load[cold]
        };
        let free = |c: usize| {
            let cl = &world.clients[c];
            let mac = cl.mac.to_string();
            // Held by its hold-down, or by `[clients]`, as the status says.
            // A client the engine does not know (evicted from a table smaller than the LAN) is
            // not one it may move.
            let known = st.clients.iter().any(|s| s.mac == mac);
            let held = st.clients.iter().any(|s| {
                s.mac == mac
                    && (s.excluded
                        || s.pinned.is_some()
                        || s.moved.as_ref().is_some_and(|m| m.hold_down_left_secs > 0))
            });
            known && !held && world.claimable(cl) && rate(c) < self.threshold * cap(hot)
        };
        let c = eligible
            .into_iter()
            .filter(|c| free(*c) && rate(*c) <= room)
            .max_by(|a, b| rate(*a).total_cmp(&rate(*b)))?;
        let cl = &world.clients[c];
        let mac = cl.mac.to_string();
        let seen = st.clients.iter().find(|s| s.mac == mac);
        let hot_port = &st.ports[hot.min(st.ports.len() - 1)];
        let others: Vec<String> = on[hot]
            .iter()
            .map(|c| format!("{:.1}", rate(*c) / 1e6))
            .collect();
        Some(format!(
            "{}; the engine's view of the client: {seen:?}; of {}: {:?} overloaded {} no_move {:?}; \
             rates on it: {}",
            self.words(world, &load, hot, cold, c),
            hot_port.name,
            hot_port.utilization,
            hot_port.overloaded,
            hot_port.no_move,
            others.join(" ")
        ))
    }

    fn words(&self, world: &World, load: &[f64], hot: usize, cold: usize, c: usize) -> String {
        let cap = |p: usize| world.ports[p].capacity_bps();
        let cl = &world.clients[c];
        format!(
            "{} carries {:.1} Mbit/s (threshold {:.1}), {} only {:.1}; client {} ({}) gets {:.1} \
             Mbit/s on {} and is free to move",
            world.ports[hot].name,
            load[hot] / 1e6,
            self.threshold * cap(hot) / 1e6,
            world.ports[cold].name,
            load[cold] / 1e6,
            cl.mac,
            cl.ip,
            cl.delivered_bps / 1e6,
            world.ports[hot].name
        )
    }
}
