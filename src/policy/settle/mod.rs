//! Settling: a second look at a move, a few seconds after it (issue 27).
//!
//! A client on a saturated port reads only the share TCP leaves it, so the walk moves it into a
//! gap without knowing its demand, and at 92-95% of a bond's capacity it may not fit there. The
//! next clean seconds tell: the port it went to is now over-full. Within `settle` seconds of
//! the move the planner may correct it once, to a port other than the one it left:
//!
//! - **Moved on** to a port whose room takes what it draws now (at least its demand's lower
//!   bound), or
//! - **exchanged** with a smaller client of such a port (that port has room, so its clients'
//!   rates are their demands): both go in one round, the two halves of one exchange.
//!
//! Both strictly lower the bond's unmet demand whatever the moved client's true demand is. Let
//! `r` be what it draws on the over-full port `b` and `R` the room on the port `d` it goes to.
//! Since `b`'s other clients draw no more than they want, the room `b` had for it is at most
//! `r`; a client of `d` with demand `y` goes the other way, `y < r <= y + R`. Then `b` sheds
//! more than it takes, and what `d` is left short is less than what `b` was: the unmet demand
//! falls. Each correction is a move of reason `Settle`, which is final within the hold-down: at
//! most two moves per client per hold-down, never back to the port it left.

use super::config::PolicyConfig;
use super::model::{ClientView, Move, PortIndex, PortView, Reason};
use super::packing::{shift, swap};
use super::planner::{Targets, SETTLE_SECS};

/// The port `c` left, if its last move may be corrected now: an overload or room move made
/// between `SETTLE_SECS` and `settle` seconds ago, still held.
pub(super) fn settling(cfg: &PolicyConfig, c: &ClientView) -> Option<PortIndex> {
    match (c.held, c.last_move, c.since_move) {
        (true, Some((left, Reason::Overload | Reason::Room)), Some(s))
            if (SETTLE_SECS..=cfg.settle).contains(&s) =>
        {
            Some(left)
        }
        _ => None,
    }
}

/// An exchange sheds at least this part of `min_gain` of the over-full port's capacity: one
/// that sheds less (two clients of about the same rate) is lost in the readings, yet it spends
/// both clients' last move of the hold-down, which a later move could have put to use.
const LEAST_SHED: f64 = 0.25;

/// Whether `c` may go to `to` as the other half of an exchange: free to move, or held after one
/// move (its second within the hold-down, then final) that did not take it off `to`.
pub(super) fn may_join(c: &ClientView, to: PortIndex) -> bool {
    !c.held || second_move_from(c).is_some_and(|left| left != to)
}

/// The port a held client left, if it may still move once more within its hold-down (then
/// finally, as `Settle`, and never back there): its one move was an overload or room move.
pub(super) fn second_move_from(c: &ClientView) -> Option<PortIndex> {
    match c.last_move {
        Some((left, Reason::Overload | Reason::Room)) => Some(left),
        _ => None,
    }
}

/// Why `c` moves in a step taken for `free`: a held client's move is its second and final one
/// of the hold-down, a correction (`Settle`), whatever the step.
pub(super) fn reason_for(c: &ClientView, free: Reason) -> Reason {
    if c.held {
        Reason::Settle
    } else {
        free
    }
}

/// Corrects the moves that overfilled their target: each settling client on a saturated port
/// moves on, or is exchanged, as the module says. Ports that take part take nothing else this
/// round (`took`).
pub(super) fn settle(
    cfg: &PolicyConfig,
    ports: &[PortView],
    clients: &[ClientView],
    targets: &mut Targets,
    took: &mut [bool],
    moves: &mut Vec<Move>,
) {
    if cfg.settle < SETTLE_SECS {
        return;
    }
    let live = |p: PortIndex| p < ports.len() && ports[p].up && ports[p].capacity_bps > 0.0;
    let mut due: Vec<(usize, PortIndex)> = (0..clients.len())
        .filter_map(|c| settling(cfg, &clients[c]).map(|left| (c, left)))
        .filter(|&(c, _)| live(clients[c].port) && clients[c].rate_bps.is_finite())
        .collect();
    // The largest first: it overfilled its port by the most.
    due.sort_by(|a, b| clients[b.0].rate_bps.total_cmp(&clients[a.0].rate_bps));
    let fill = cfg.max_fill.max(cfg.threshold);
    for (c, left) in due {
        let (b, r) = (clients[c].port, clients[c].rate_bps);
        if moves.iter().any(|m| m.client == c) {
            continue;
        }
        if targets.util(b) < cfg.saturated {
            continue;
        }
        let open = |d: PortIndex| {
            d != left && d != b && live(d) && !took[d] && targets.util(d) < cfg.saturated
        };
        let room = |d: PortIndex| fill * targets.capacity[d] - targets.load[d];
        // Moved on: to the port with the most room, if that takes what it draws now.
        let roomiest = (0..ports.len())
            .filter(|&d| open(d))
            .max_by(|&x, &y| room(x).total_cmp(&room(y)).then(y.cmp(&x)));
        if let Some(d) = roomiest.filter(|&d| room(d) >= r) {
            shift(Reason::Settle, (b, d), c, r, targets, took, moves);
            took[b] = true;
            continue;
        }
        let shed = LEAST_SHED * cfg.min_gain * targets.capacity[b];
        if let Some((y, d)) = partner(cfg, c, (b, shed), clients, &open, &room, moves) {
            let reasons = (Reason::Settle, Reason::Settle);
            swap(reasons, (b, d), (c, y), clients, targets, took, moves);
        }
    }
}

/// The exchange for settling client `c` on the over-full port `b`: the largest client `y` of an
/// open port `d` that draws less than `c` by at least `shed` (`b` sheds more than it takes, and
/// enough to matter) and whose leaving
/// makes room there for what `c` draws. The largest leaves `c` the most room: what `c` draws
/// on a saturated port is only a lower bound of its demand (measured when it was chosen: over
/// 200 seeded runs at 95% load, 33 under 97% of the best against 35 with the smallest).
fn partner(
    cfg: &PolicyConfig,
    c: usize,
    (b, shed): (PortIndex, f64),
    clients: &[ClientView],
    open: &dyn Fn(PortIndex) -> bool,
    room: &dyn Fn(PortIndex) -> f64,
    moves: &[Move],
) -> Option<(usize, PortIndex)> {
    let r = clients[c].rate_bps;
    let floor = cfg.min_rate_bps();
    (0..clients.len())
        .filter(|&y| {
            let cy = &clients[y];
            let ry = cy.rate_bps;
            y != c
                && open(cy.port)
                && ry >= floor
                && ry < r
                && r - ry >= shed
                && room(cy.port) + ry >= r
                && may_join(cy, b)
                && !moves.iter().any(|m| m.client == y)
        })
        .max_by(|&x, &y| {
            clients[x]
                .rate_bps
                .total_cmp(&clients[y].rate_bps)
                .then(x.cmp(&y))
        })
        .map(|y| (y, clients[y].port))
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests;
