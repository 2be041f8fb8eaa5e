//! Choosing moves: the paper's adjustment rules (section 4.3, as `algorithm.md` reads them) plus
//! failover, hold-down, a minimum gain, and (in `packing.rs`) relief of a saturated port beyond
//! the threshold when the bond as a whole still has room.
//!
//! Cost: one sort of the clients, O(n log n), then every client is looked at at most once per
//! pass, with O(log p) to find the least-loaded port, so a round is O(n log n + n log p) where the
//! paper's is O(n^2 log n).

use std::collections::BTreeSet;

use super::config::PolicyConfig;
use super::model::{utilization, ClientView, Move, PortIndex, PortView, Reason};

/// Ports that can take traffic, ordered by utilization (ties by index, for determinism).
pub(super) struct Targets {
    pub(super) load: Vec<f64>,
    pub(super) capacity: Vec<f64>,
    pub(super) order: BTreeSet<(u64, PortIndex)>,
}

/// Total order on utilizations. Everything not positive (including -0.0, which an empty float
/// sum yields, and NaN) maps to 0, so the bit pattern of a positive float orders as the float.
fn key(u: f64) -> u64 {
    if u > 0.0 {
        u.to_bits()
    } else {
        0
    }
}

/// A rate that is usable as a load: negative, -0.0 and NaN become 0.
pub(super) fn nonneg(x: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

impl Targets {
    fn new(ports: &[PortView]) -> Self {
        let load: Vec<f64> = ports.iter().map(|p| nonneg(p.rx_bps)).collect();
        let capacity: Vec<f64> = ports.iter().map(|p| p.capacity_bps).collect();
        let order = ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.up && p.capacity_bps > 0.0 && p.capacity_bps.is_finite())
            .map(|(i, _)| (key(utilization(load[i], capacity[i])), i))
            .collect();
        Self {
            load,
            capacity,
            order,
        }
    }

    pub(super) fn util(&self, p: PortIndex) -> f64 {
        utilization(self.load[p], self.capacity[p])
    }

    fn least_loaded(&self) -> Option<PortIndex> {
        self.order.first().map(|&(_, p)| p)
    }

    /// The least-loaded port that has not taken a client this round.
    fn least_loaded_free(&self, took: &[bool]) -> Option<PortIndex> {
        self.order.iter().map(|&(_, p)| p).find(|&p| !took[p])
    }

    /// Moves `rate` of load from `from` to `to`, keeping the ordering right. `from` may be a
    /// down port, which is not in the ordering.
    pub(super) fn shift(&mut self, from: PortIndex, to: PortIndex, rate: f64) {
        for (p, delta) in [(from, -rate), (to, rate)] {
            let was = self.order.remove(&(key(self.util(p)), p));
            self.load[p] = nonneg(self.load[p] + delta);
            if was {
                self.order.insert((key(self.util(p)), p));
            }
        }
    }
}

/// Returns the moves for this round: failover first, then overload relief, hottest port first.
pub fn plan(cfg: &PolicyConfig, ports: &[PortView], clients: &[ClientView]) -> Vec<Move> {
    if nothing_to_do(cfg, ports, clients) {
        // Most seconds: no work, and no allocation.
        return Vec::new();
    }
    let mut targets = Targets::new(ports);
    let mut moves = Vec::new();
    if targets.order.is_empty() {
        return moves;
    }

    // Clients grouped by port, largest first, index breaking ties so the output is
    // deterministic. One packed integer per client sorts several times faster than comparing
    // through the slice: port in the top bits, then the rate's bits inverted (descending; a
    // non-negative float's bits order as the float), then the index.
    let mut packed: Vec<u128> = clients
        .iter()
        .enumerate()
        .take(u32::MAX as usize) // the index has 32 bits; no client table comes near
        .filter(|(_, c)| c.port < ports.len())
        .map(|(i, c)| {
            ((c.port as u128) << 96) | ((!nonneg(c.rate_bps).to_bits() as u128) << 32) | i as u128
        })
        .collect();
    packed.sort_unstable();
    let by_port: Vec<usize> = packed.iter().map(|k| (*k as u32) as usize).collect();
    let groups = group_bounds(&by_port, clients);

    failover(ports, clients, &groups, &by_port, &mut targets, &mut moves);

    // A move decided last round took effect a moment after that round's figures were read,
    // so this round's still show part of the old placement: the target looks emptier and the
    // moved client smaller than they are. Decide on a clean second.
    if clients
        .iter()
        .any(|c| c.since_move.is_some_and(|s| s < SETTLE_SECS))
    {
        return moves;
    }

    // Each port takes at most one client of unknown demand per round (see `overload`); a
    // settling correction counts as one on both its ports.
    let mut took = vec![false; ports.len()];
    overload(
        cfg,
        ports,
        clients,
        (&groups, &by_port),
        &mut targets,
        &mut took,
        &mut moves,
    );
    super::settle::settle(cfg, ports, clients, &mut targets, &mut took, &mut moves);
    moves
}

/// True when no rule of the round can move anyone: no client on a port that is down, no
/// overloaded port with a client, no client settling (the same tests `failover`, `overload`
/// and `settle` start with).
fn nothing_to_do(cfg: &PolicyConfig, ports: &[PortView], clients: &[ClientView]) -> bool {
    let settling = cfg.settle >= SETTLE_SECS;
    clients.iter().all(|c| {
        let Some(p) = ports.get(c.port) else {
            return true;
        };
        p.up && !(p.overloaded && p.capacity_bps > 0.0)
            && !(settling && super::settle::settling(cfg, c).is_some())
    })
}

/// Seconds after a move before the figures show only the new placement: the move lands a
/// moment into a one-second sample, so the sample after it is mixed.
pub const SETTLE_SECS: u64 = 2;

/// Where a new client should go: the least-utilized live port (ties to the lowest index).
pub fn place(ports: &[PortView]) -> Option<PortIndex> {
    Targets::new(ports).least_loaded()
}

/// First placements for balance-tlb, where the driver answers every ARP with the active slave's
/// MAC and so places nobody: each client of `new` at or above the rate floor goes, in the order
/// given, to the least-utilized live port, counted there at once so the next one sees it. A
/// client already on that port stays.
pub fn place_new(cfg: &PolicyConfig, ports: &[PortView], new: &[ClientView]) -> Vec<Move> {
    let mut targets = Targets::new(ports);
    let floor = cfg.min_rate_bps();
    let mut moves = Vec::new();
    for c in (0..new.len()).filter(|&c| new[c].rate_bps >= floor && new[c].port < ports.len()) {
        let Some(to) = targets.least_loaded() else {
            break;
        };
        let (from, rate) = (new[c].port, nonneg(new[c].rate_bps));
        if to == from {
            continue;
        }
        let before = (targets.util(from), targets.util(to));
        targets.shift(from, to, rate);
        moves.push(Move {
            client: c,
            from,
            to,
            rate_bps: rate,
            reason: Reason::Placement,
            from_util: (before.0, targets.util(from)),
            to_util: (before.1, targets.util(to)),
            exchange: false,
            gathers: false,
        });
    }
    moves
}

/// Failover: a down port delivers nothing, so every client seen there goes, hold-down or not,
/// each to the port that is least loaded at that moment. Quiet clients weigh nothing, so that
/// rule would put them all on one port, to wake up there together (and held there by the
/// hold-down): they are dealt round the live ports instead, least loaded first.
fn failover(
    ports: &[PortView],
    clients: &[ClientView],
    groups: &[(PortIndex, usize, usize)],
    by_port: &[usize],
    targets: &mut Targets,
    moves: &mut Vec<Move>,
) {
    let mut quiet = Vec::new();
    for &(port, start, end) in groups {
        if ports[port].up {
            continue;
        }
        for &c in &by_port[start..end] {
            let rate = nonneg(clients[c].rate_bps);
            if rate == 0.0 {
                quiet.push((port, c));
                continue;
            }
            let Some(to) = targets.least_loaded() else {
                break;
            };
            let from_before = targets.util(port);
            let to_before = targets.util(to);
            targets.shift(port, to, rate);
            moves.push(Move {
                client: c,
                from: port,
                to,
                rate_bps: rate,
                reason: Reason::Failover,
                from_util: (from_before, targets.util(port)),
                to_util: (to_before, targets.util(to)),
                exchange: false,
                gathers: false,
            });
        }
    }
    let live: Vec<PortIndex> = targets.order.iter().map(|&(_, p)| p).collect();
    for (i, (port, c)) in quiet.into_iter().enumerate() {
        let Some(&to) = live.get(i % live.len().max(1)) else {
            break;
        };
        let (from_util, to_util) = (targets.util(port), targets.util(to));
        moves.push(Move {
            client: c,
            from: port,
            to,
            rate_bps: 0.0,
            reason: Reason::Failover,
            from_util: (from_util, from_util),
            to_util: (to_util, to_util),
            exchange: false,
            gathers: false,
        });
    }
}

/// Overload relief, hottest overloaded port first so the worst imbalance gets the free room.
fn overload(
    cfg: &PolicyConfig,
    ports: &[PortView],
    clients: &[ClientView],
    (groups, by_port): (&[(PortIndex, usize, usize)], &[usize]),
    targets: &mut Targets,
    took: &mut [bool],
    moves: &mut Vec<Move>,
) {
    let mut hot: Vec<&(PortIndex, usize, usize)> = groups
        .iter()
        .filter(|(p, _, _)| ports[*p].up && ports[*p].overloaded && ports[*p].capacity_bps > 0.0)
        .collect();
    hot.sort_by(|a, b| {
        targets
            .util(b.0)
            .total_cmp(&targets.util(a.0))
            .then(a.0.cmp(&b.0))
    });
    // Each port takes at most one client per round: a reading can be wrong (a port ramping up
    // reads under its saturation for a second, and then its clients' rates look like their
    // demands), and the next clean second shows what the client really draws there.
    for &&(h, start, end) in &hot {
        // A client may have been moved already this round, off another port's clients' way.
        let still: Vec<usize>;
        let mut on_h = &by_port[start..end];
        if on_h.iter().any(|&c| moves.iter().any(|m| m.client == c)) {
            still = on_h
                .iter()
                .copied()
                .filter(|&c| !moves.iter().any(|m| m.client == c))
                .collect();
            on_h = &still;
        }
        if ports[h].utilization() >= cfg.saturated {
            super::packing::relieve_saturated(cfg, h, on_h, clients, targets, took, moves);
        } else {
            relieve(cfg, h, on_h, clients, targets, took, moves);
        }
    }
}

/// (port, start, end) ranges of `sorted` (clients sorted by port).
fn group_bounds(sorted: &[usize], clients: &[ClientView]) -> Vec<(PortIndex, usize, usize)> {
    let mut groups = Vec::new();
    let mut start = 0;
    for i in 1..=sorted.len() {
        if i == sorted.len() || clients[sorted[i]].port != clients[sorted[start]].port {
            if start < i {
                groups.push((clients[sorted[start]].port, start, i));
            }
            start = i;
        }
    }
    groups
}

/// Who may leave an overloaded port `h`, as the paper counts them.
pub(super) struct Walk {
    /// Its clients over the floor, largest first.
    pub eligible: Vec<usize>,
    /// A client at this rate alone would overload any port it went to.
    pub elephant_rate: f64,
    /// How many may leave: N-1 so at least one stays, or all N when an elephant or a fixed
    /// flow stays anyway.
    pub leave: usize,
}

impl Walk {
    /// `None` when at most one client is over the floor: moving it would only move the load.
    pub(super) fn of(
        cfg: &PolicyConfig,
        h: PortIndex,
        on_h: &[usize],
        clients: &[ClientView],
        targets: &Targets,
    ) -> Option<Walk> {
        let floor = cfg.min_rate_bps();
        // The 5 KB/s floor: keep-alives and probes are not clients worth moving, nor counted in
        // N.
        let eligible: Vec<usize> = on_h
            .iter()
            .copied()
            .filter(|&c| clients[c].rate_bps >= floor)
            .collect();
        if eligible.len() <= 1 {
            return None;
        }
        let elephant_rate = cfg.threshold * targets.capacity[h];
        let has_elephant = eligible
            .iter()
            .any(|&c| clients[c].rate_bps >= elephant_rate);
        // A flow this planner may not move (a host client beside guests, a guest beside
        // clients) stays anyway: the others may all go. (A client held by its hold-down does
        // not count: it may go at the next round, and the walk's N-1 keeps the churn down.)
        let stays = has_elephant || eligible.iter().any(|&c| clients[c].fixed);
        let leave = eligible.len() - usize::from(!stays);
        Some(Walk {
            eligible,
            elephant_rate,
            leave,
        })
    }
}

/// The paper's walk over one overloaded port `h`; `on_h` is sorted largest first.
fn relieve(
    cfg: &PolicyConfig,
    h: PortIndex,
    on_h: &[usize],
    clients: &[ClientView],
    targets: &mut Targets,
    took: &mut [bool],
    moves: &mut Vec<Move>,
) {
    let Some(Walk {
        eligible,
        elephant_rate,
        leave: walk,
    }) = Walk::of(cfg, h, on_h, clients, targets)
    else {
        return;
    };

    for &c in &eligible[..walk] {
        let rate = clients[c].rate_bps;
        if rate >= elephant_rate || clients[c].held {
            continue;
        }
        // Rule 3(a): the best port is the currently least-loaded one. Rule 4: if that is the hot
        // port itself, the load is already as even as it gets.
        let Some(best) = targets.least_loaded_free(took) else {
            return;
        };
        if best == h {
            return;
        }
        let h_before = targets.util(h);
        let best_before = targets.util(best);
        let best_after = utilization(targets.load[best] + rate, targets.capacity[best]);
        let h_after = utilization(targets.load[h] - rate, targets.capacity[h]);
        // Rule 3(b): the target stays at or under the threshold.
        if best_after > cfg.threshold {
            continue;
        }
        // Rule 3(c), in utilization so mixed speeds compare fairly: the target ends below where
        // the hot port started, i.e. the rate is less than the load difference, and by at least
        // `min_gain`, so the target cannot become the next hot port and send the client back.
        // A small client is still worth moving: on a saturated port its measured rate is only
        // what TCP's unfair share left it, not what it would send on an idle port.
        if best_after >= h_before || best_after > h_before - cfg.min_gain {
            continue;
        }
        debug_assert!(h_after < h_before);
        targets.shift(h, best, rate);
        took[best] = true;
        moves.push(Move {
            client: c,
            from: h,
            to: best,
            rate_bps: rate,
            reason: Reason::Overload,
            from_util: (h_before, targets.util(h)),
            to_util: (best_before, targets.util(best)),
            exchange: false,
            gathers: false,
        });
    }
}

#[cfg(test)]
mod tests;
