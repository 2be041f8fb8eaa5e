//! Relief of a saturated port: the paper's walk, changed for a bond that is nearly full.
//!
//! A port is saturated when it carries about all it can (`saturated`, 94% by default): its
//! clients want more than it delivers, and what each one gets is TCP's share, which says little
//! about what it would draw elsewhere (flows that ramped up late can be starved to a tenth of
//! their demand for seconds). Four changes to the paper's walk follow:
//!
//! - **Past the threshold.** The threshold stays the trigger, but a target may be filled up to
//!   `max_fill` (93%), not only up to the threshold: when the whole bond is over 80% busy no
//!   placement keeps every port under 80%, and the saturated port loses everything its clients
//!   want beyond its capacity. The target still ends below the saturated port: the peak does
//!   not rise.
//! - **One client of unknown demand per target per round.** A client's rate on a saturated port
//!   is only a lower bound of its demand, so each target takes at most one such client a round;
//!   the next clean second shows what the client really draws there (its demand, on a port with
//!   room) and how much room is left, before the target takes another.
//! - **The smallest client when nothing fits.** When the saturated port keeps clients that fit
//!   nowhere under `max_fill`, its least-served client (that TCP did not starve) goes to the port
//!   with the most room as long as what it draws now leaves that port no busier than the
//!   saturated one: the saturated port sheds that much for certain, and the target at worst ends
//!   as full as the saturated port is. The next round learns from what it then draws.
//!
//! - **Room gathered in one piece.** When the room left lies on several ports in pieces each too
//!   small for any client of the saturated port, a client of a port with room (its rate there is
//!   its demand) moves to another that stays under `max_fill`, so one port can take a client of
//!   the saturated port next round. Those are mostly clients moved off it before, still held:
//!   one of them may take this as its second and final move of the hold-down (`Settle`, never
//!   back to the port it left), so the room is gathered while the bond is packed, not only once
//!   the hold-down is over (issue 27). It waits while a moved client may still be growing into
//!   its port (the room there is not known yet) and while a settling correction is due (its
//!   port saturated), not for the whole settling window.
//! - **An exchange when nothing fits whole.** Where no room can be gathered either, a client of
//!   the saturated port trades places with a smaller client of a port with room
//!   (`exchange.rs`): the saturated port sheds their difference, the other takes it under
//!   `max_fill`. A held client takes part as its final move, never back to the port it left
//!   (most of the other ports' clients came off the saturated one and wait for their
//!   hold-down to end).
//!
//! As in the paper, a single biggest flow never moves, and without one at least one client stays.

use super::config::PolicyConfig;
use super::exchange::{emptiest_after, exchange_off_saturated};
use super::model::{utilization, ClientView, Move, PortIndex, Reason};
use super::planner::{Targets, Walk};
use super::settle::{reason_for, second_move_from, settling};

/// A client moved this many seconds ago or less may still be growing into its new port: the
/// lab's moved flows draw 90% of their demand within 2 s of their move in nine moves of ten;
/// this allows twice that.
const GROWING_SECS: u64 = 4;

/// Under this part of its port's mean share a client counts as starved by TCP.
const STARVED_SHARE: f64 = 0.25;

/// Walks the clients of the saturated port `h` (`on_h`, largest first) and moves each that fits
/// to the least-loaded port that has not taken one this round (`took`).
pub(super) fn relieve_saturated(
    cfg: &PolicyConfig,
    h: PortIndex,
    on_h: &[usize],
    clients: &[ClientView],
    targets: &mut Targets,
    took: &mut [bool],
    moves: &mut Vec<Move>,
) {
    // Every client is looked at (not only the first N-1 as in the paper's walk: the smallest
    // is often the one that fits), but at most N-1 leave unless an elephant stays.
    let Some(Walk {
        eligible,
        elephant_rate,
        leave: may_move,
    }) = Walk::of(cfg, h, on_h, clients, targets)
    else {
        return;
    };
    let starved = starved_under(clients, &eligible, elephant_rate);
    let movable = |c: usize| {
        let rate = clients[c].rate_bps;
        rate < elephant_rate && rate >= starved && !clients[c].held
    };
    let fill = cfg.max_fill.max(cfg.threshold);
    let mut moved = 0;
    for &c in eligible.iter().filter(|&&c| movable(c)) {
        if moved == may_move {
            return;
        }
        let Some(best) = emptiest_free(cfg, targets, took, h) else {
            return;
        };
        let rate = clients[c].rate_bps;
        let after = utilization(targets.load[best] + rate, targets.capacity[best]);
        // The saturated port counts down by what each client drew there: after a few moves the
        // rest of it may look no busier than this target would be, and the smaller clients left
        // to try are the ones TCP starved. Stop there; the next round shows where things stand.
        if after >= targets.util(h) && moved > 0 {
            break;
        }
        if after <= fill && after < targets.util(h) {
            shift(Reason::Overload, (h, best), c, rate, targets, took, moves);
            moved += 1;
        }
    }
    // With `max_fill` at the threshold, the paper's rule alone.
    if moved > 0 || cfg.max_fill <= cfg.threshold {
        return;
    }
    // Nothing fitted. Room may be there, split among ports in pieces each too small: gather it.
    let smallest = eligible.iter().rev().find(|&&c| movable(c)).copied();
    if let Some(c) = smallest {
        if gather_room(cfg, h, clients[c].rate_bps, clients, targets, took, moves) {
            return;
        }
    }
    // Nothing fits whole: a client of `h` traded for a smaller one of a port with room. Held
    // clients of `h` too, as their final move: most of `h`'s clients came there by a move.
    let may_trade = |c: usize| {
        let (rate, c) = (clients[c].rate_bps, &clients[c]);
        rate < elephant_rate && rate >= starved && (!c.held || second_move_from(c).is_some())
    };
    let xs: Vec<usize> = eligible.iter().copied().filter(|&c| may_trade(c)).collect();
    if exchange_off_saturated(cfg, h, &xs, clients, targets, took, moves) {
        return;
    }
    // Nothing fitted: the least-served client (the walk is largest first).
    if let Some(&c) = eligible.iter().rev().find(|&&c| movable(c)) {
        least_served(cfg, h, c, clients, targets, took, moves);
    }
}

/// The rate under which a client of the saturated port counts as starved by TCP: a small part
/// of the port's mean share. What such a client draws says nothing of its demand, and it may
/// stay starved for seconds on its new port, hiding what it will take there; it waits until it
/// draws more (or others have left). The mean is over the clients other than an elephant:
/// beside one, a small client is all there is.
fn starved_under(clients: &[ClientView], eligible: &[usize], elephant_rate: f64) -> f64 {
    let small: Vec<f64> = eligible
        .iter()
        .map(|&c| clients[c].rate_bps)
        .filter(|&r| r < elephant_rate)
        .collect();
    STARVED_SHARE * small.iter().sum::<f64>() / small.len().max(1) as f64
}

/// Moves client `c` off the saturated port `h` to the emptiest port, if what it draws now
/// leaves that port no busier than `h` reads (a full port reads about that much): `h` sheds
/// that much for certain, and the next round learns from what `c` then draws.
fn least_served(
    cfg: &PolicyConfig,
    h: PortIndex,
    c: usize,
    clients: &[ClientView],
    targets: &mut Targets,
    took: &mut [bool],
    moves: &mut Vec<Move>,
) {
    let Some(best) = emptiest_free(cfg, targets, took, h) else {
        return;
    };
    let rate = clients[c].rate_bps;
    if utilization(targets.load[best] + rate, targets.capacity[best]) <= targets.util(h) {
        shift(Reason::Overload, (h, best), c, rate, targets, took, moves);
    }
}

/// Moves one client between two ports other than `h`, both with room, so that the emptiest
/// port afterwards has room for `need` (what the smallest movable client of `h` draws) under
/// `max_fill`: room left in pieces each too small for any client of `h` is room `h` cannot
/// use. Only a client on a port with room moves (what it draws there is its demand, so its
/// new port ends exactly where it is planned, under `max_fill`), the smallest that does it; a
/// held one only as its second and final move of the hold-down (`Settle`), not back where it
/// came from.
/// Returns whether it moved one; the next round moves a client of `h` into the gathered room.
/// Each client is looked at once with a pass over the ports, O(n x p), and only in a round where
/// nothing else moved off `h`.
fn gather_room(
    cfg: &PolicyConfig,
    h: PortIndex,
    need: f64,
    clients: &[ClientView],
    targets: &mut Targets,
    took: &mut [bool],
    moves: &mut Vec<Move>,
) -> bool {
    if room_unknown(cfg, clients, targets) {
        return false;
    }
    let fill = cfg.max_fill.max(cfg.threshold);
    let open = |p: PortIndex| {
        p != h
            && !took[p]
            && targets.order.iter().any(|&(_, q)| q == p)
            && targets.util(p) < cfg.max_fill
    };
    let fits = |p: PortIndex, load: f64| utilization(load + need, targets.capacity[p]) <= fill;
    let mut best: Option<(f64, usize, PortIndex, PortIndex)> = None;
    for (x, cx) in clients.iter().enumerate() {
        let (a, r) = (cx.port, cx.rate_bps);
        let moved = moves.iter().any(|m| m.client == x);
        let left = if cx.held { second_move_from(cx) } else { None };
        if (cx.held && left.is_none())
            || moved
            || r.is_nan()
            || r <= 0.0
            || a >= targets.load.len()
            || !open(a)
        {
            continue;
        }
        if best.is_some_and(|b| b.0 <= r) || !fits(a, targets.load[a] - r) {
            continue;
        }
        // Where it goes keeps room under `max_fill` and is not the port it empties.
        let to = targets
            .order
            .iter()
            .map(|&(_, p)| p)
            .filter(|&p| p != a && open(p) && Some(p) != left)
            .find(|&p| utilization(targets.load[p] + r, targets.capacity[p]) <= fill);
        // The gathered room must be the walk's next target: the emptiest port after the move.
        if let Some(b) = to.filter(|&b| emptiest_after(targets, h, (a, b), r)) {
            best = Some((r, x, a, b));
        }
    }
    let Some((r, x, a, b)) = best else {
        // No single move does it: two clients of two ports with room may, by trading places.
        let ports: Vec<PortIndex> = targets
            .order
            .iter()
            .map(|&(_, p)| p)
            .filter(|&p| open(p))
            .collect();
        let args = (h, need);
        return super::exchange::gather_by_exchange(
            cfg, args, clients, &ports, targets, took, moves,
        );
    };
    let why = reason_for(&clients[x], Reason::Room);
    shift(why, (a, b), x, r, targets, took, moves);
    if let Some(m) = moves.last_mut() {
        m.gathers = true;
    }
    // The port the room was gathered on is the next round's, not this one's.
    took[a] = true;
    true
}

/// Whether a client's settling leaves the room unknown. A client moved a moment ago may still
/// be growing into its port's room: that room is not known yet. One whose move overfilled its
/// port is due a settling correction, which the room may be needed for. Past both, waiting out
/// the settling window only delays the bond (in the study at 95% load, 11 to 10 runs of 200
/// under 97% of the best; 24 to 23 of 400 on seeds 200-599).
fn room_unknown(cfg: &PolicyConfig, clients: &[ClientView], targets: &Targets) -> bool {
    clients.iter().any(|c| {
        settling(cfg, c).is_some()
            && (c.since_move.is_some_and(|s| s <= GROWING_SECS)
                || (c.port < targets.load.len() && targets.util(c.port) >= cfg.saturated))
    })
}

/// Records the move of client `c` for `reason` from `from` to `to`, what it draws now going
/// with it; `to` takes no other client this round.
pub(super) fn shift(
    reason: Reason,
    (from, to): (PortIndex, PortIndex),
    c: usize,
    rate: f64,
    targets: &mut Targets,
    took: &mut [bool],
    moves: &mut Vec<Move>,
) {
    let (from_before, to_before) = (targets.util(from), targets.util(to));
    targets.shift(from, to, rate);
    took[to] = true;
    moves.push(Move {
        client: c,
        from,
        to,
        rate_bps: rate,
        reason,
        from_util: (from_before, targets.util(from)),
        to_util: (to_before, targets.util(to)),
        exchange: false,
        gathers: false,
    });
}

/// Records an exchange: client `x` of `a` and client `y` of `b` trade places, each with its
/// reason, marked as the two halves of one exchange. Both log lines show each port before and
/// after the whole exchange, not the moment between its halves that no client sees (the first
/// half alone may overfill `b`; the pair never does).
pub(super) fn swap(
    (why_x, why_y): (Reason, Reason),
    (a, b): (PortIndex, PortIndex),
    (x, y): (usize, usize),
    clients: &[ClientView],
    targets: &mut Targets,
    took: &mut [bool],
    moves: &mut Vec<Move>,
) {
    let before = (targets.util(a), targets.util(b));
    shift(why_x, (a, b), x, clients[x].rate_bps, targets, took, moves);
    shift(why_y, (b, a), y, clients[y].rate_bps, targets, took, moves);
    let after = (targets.util(a), targets.util(b));
    let n = moves.len();
    let (first, second) = moves[n - 2..].split_at_mut(1);
    first[0].exchange = true;
    (first[0].from_util, first[0].to_util) = ((before.0, after.0), (before.1, after.1));
    (second[0].from_util, second[0].to_util) = ((before.1, after.1), (before.0, after.0));
}

/// The least-loaded port other than `h` that has room (is not saturated), is less loaded than
/// `h` (the paper's rule 4), and has not taken a client of unknown demand this round.
fn emptiest_free(
    cfg: &PolicyConfig,
    targets: &Targets,
    took: &[bool],
    h: PortIndex,
) -> Option<PortIndex> {
    targets
        .order
        .iter()
        .map(|&(_, p)| p)
        .find(|&p| p != h && !took[p] && targets.util(p) < cfg.saturated)
        .filter(|&p| targets.util(p) < targets.util(h))
}
