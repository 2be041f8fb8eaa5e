//! Exchanges (issue 27): two clients of two ports trade places in one round, both updates sent
//! together, where no single move serves.
//!
//! - **Room gathered** (`gather_by_exchange`): where no single move between two ports with room
//!   leaves one of them room for a client of the saturated port, two clients of two such ports
//!   trade places.
//! - **Off a saturated port** (`exchange_off_saturated`): where nothing of it fits anywhere and
//!   no room can be gathered, one of its clients trades places with a smaller client of a port
//!   with room.
//!
//! At 92-95% of a bond's capacity the walk leaves every port with room a few Mbit/s short of
//! the smallest client still on the saturated one, and the clients beside those rooms are too
//! large to move into any of them. Swapping a larger client of port `a` with a smaller one of
//! port `b` moves only their difference: `a` gains it as room, `b` takes it under `max_fill`.
//! Both ports have room, so what the two clients draw is their demand, and both ports end
//! exactly where they are planned: the exchange cannot overfill either. The moved clients are
//! mostly ones the walk moved off the saturated port before, still held: each may take the
//! exchange as its second and final move of the hold-down (`Settle`), never back to the port
//! it left, as for a single gathering move.
//!
//! Cost: one pass sorts the clients that may move by port, O(n p + n log n); then for each
//! ordered pair of ports each candidate of one is looked up among the other's by bisection,
//! O(p n log n) in all. Only in a round where nothing moved off the saturated port and no
//! single gathering move did it.

use super::config::PolicyConfig;
use super::model::{utilization, ClientView, Move, PortIndex, Reason};
use super::packing::swap;
use super::planner::Targets;
use super::settle::{may_join, reason_for, second_move_from};

/// A client of a port with room that may trade places: its rate, its index, and the port its
/// one move of the hold-down took it off (it may not go back there), if it is held.
type Candidate = (f64, usize, Option<PortIndex>);

/// Swaps two clients of two ports other than `h`, both with room (`ports`), so that the
/// emptiest port afterwards has room for `need` under `max_fill` and the other stays under
/// it; the smallest difference that does it. Returns whether it made one.
pub(super) fn gather_by_exchange(
    cfg: &PolicyConfig,
    (h, need): (PortIndex, f64),
    clients: &[ClientView],
    ports: &[PortIndex],
    targets: &mut Targets,
    took: &mut [bool],
    moves: &mut Vec<Move>,
) -> bool {
    let fill = cfg.max_fill.max(cfg.threshold);
    let room = |p: PortIndex| fill * targets.capacity[p] - targets.load[p];
    let on = candidates(ports, clients, moves);
    // (difference, x on a, z on b, a, b)
    let mut best: Option<(f64, usize, usize, PortIndex, PortIndex)> = None;
    for (&a, xs) in ports.iter().zip(&on) {
        let short = need - room(a);
        if short <= 0.0 {
            continue;
        }
        for (&b, zs) in ports.iter().zip(&on).filter(|(&b, _)| b != a) {
            // What `b` may send to `a`, smallest rate first; not back to the port it left.
            let zs: Vec<Candidate> = zs.iter().copied().filter(|z| z.2 != Some(a)).collect();
            for &(rx, x, _) in xs.iter().filter(|x| x.2 != Some(b)) {
                // The largest z with rx - rz >= short: the smallest difference that gathers.
                let i = zs.partition_point(|z| z.0 <= rx - short);
                let Some(&(rz, z, _)) = i.checked_sub(1).map(|i| &zs[i]) else {
                    continue;
                };
                let delta = rx - rz;
                if delta > room(b) || best.is_some_and(|c| c.0 <= delta) {
                    continue;
                }
                if emptiest_after(targets, h, (a, b), delta) {
                    best = Some((delta, x, z, a, b));
                }
            }
        }
    }
    let Some((_, x, z, a, b)) = best else {
        return false;
    };
    let why = |c: usize| reason_for(&clients[c], Reason::Room);
    let first = moves.len();
    swap(
        (why(x), why(z)),
        (a, b),
        (x, z),
        clients,
        targets,
        took,
        moves,
    );
    for m in &mut moves[first..] {
        m.gathers = true;
    }
    true
}

/// For each of `ports`, in its order, the clients that may trade places, smallest rate first:
/// drawing something, not moved this round, and free to move or held after one overload or
/// room move (their second, final one). One pass over the clients.
fn candidates(ports: &[PortIndex], clients: &[ClientView], moves: &[Move]) -> Vec<Vec<Candidate>> {
    let mut on = vec![Vec::new(); ports.len()];
    for (i, c) in clients.iter().enumerate() {
        let Some(k) = ports.iter().position(|&p| p == c.port) else {
            continue;
        };
        if !c.rate_bps.is_finite() || c.rate_bps <= 0.0 || moves.iter().any(|m| m.client == i) {
            continue;
        }
        match (c.held, second_move_from(c)) {
            (false, _) => on[k].push((c.rate_bps, i, None)),
            (true, Some(left)) => on[k].push((c.rate_bps, i, Some(left))),
            (true, None) => {}
        }
    }
    for v in &mut on {
        v.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    }
    on
}

/// Whether `a`, having sent `delta` more than it took to `b`, is then the least utilized port
/// other than `h`: the walk's next target, which the gathered room is for (a move, `packing.rs`,
/// or an exchange).
pub(super) fn emptiest_after(
    targets: &Targets,
    h: PortIndex,
    (a, b): (PortIndex, PortIndex),
    delta: f64,
) -> bool {
    let load = |q: PortIndex| match q {
        q if q == a => targets.load[a] - delta,
        q if q == b => targets.load[b] + delta,
        q => targets.load[q],
    };
    let u = utilization(load(a), targets.capacity[a]);
    targets
        .order
        .iter()
        .all(|&(_, q)| q == h || q == a || utilization(load(q), targets.capacity[q]) >= u)
}

/// Where nothing of a saturated port `h` fits anywhere, and no room can be gathered for it: a
/// client `x` of `h` and a smaller client `y` of a port `d` with room trade places, so that `h`
/// sheds their difference and `d` takes it under `max_fill`. The difference must be at least
/// `min_gain` of `h`'s capacity, as any move must gain that much. What `x` draws on `h` is a
/// lower bound of its demand, so `d` may end fuller than planned, as after a single move off
/// `h` (the settling look that follows corrects that); `y` is on a port with room, so what it
/// draws is its demand, and `h` sheds at least the difference whatever `x` wants. The largest
/// difference that fits.
///
/// `xs`: the clients of `h` that may leave it (smaller than an elephant, not starved by TCP),
/// free to move or held after one overload or room move; a held one goes as its final move of
/// the hold-down (`Settle`), never back to the port it left; `y` likewise, never to `h` if it
/// came from there. Returns whether it made one. O(n log n) to sort the partners by port, then
/// a bisection per client of `h` and port, only in a round where nothing else moved off `h`.
pub(super) fn exchange_off_saturated(
    cfg: &PolicyConfig,
    h: PortIndex,
    xs: &[usize],
    clients: &[ClientView],
    targets: &mut Targets,
    took: &mut [bool],
    moves: &mut Vec<Move>,
) -> bool {
    let fill = cfg.max_fill.max(cfg.threshold);
    let shed = cfg.min_gain * targets.capacity[h];
    let open = |d: PortIndex| {
        d != h
            && !took[d]
            && targets.order.iter().any(|&(_, q)| q == d)
            && targets.util(d) < cfg.saturated
    };
    // Who may take a client of `h`'s place, per port with room, smallest rate first.
    let mut on: Vec<Vec<(f64, usize)>> = vec![Vec::new(); targets.load.len()];
    for (y, cy) in clients.iter().enumerate() {
        let d = cy.port;
        let usable = cy.rate_bps.is_finite() && cy.rate_bps >= cfg.min_rate_bps();
        let free = !moves.iter().any(|m| m.client == y);
        if d < on.len() && usable && free && open(d) && may_join(cy, h) {
            on[d].push((cy.rate_bps, y));
        }
    }
    // (difference, x, y)
    let mut best: Option<(f64, usize, usize)> = None;
    for (d, ys) in on.iter_mut().enumerate().filter(|(_, ys)| !ys.is_empty()) {
        ys.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let room = fill * targets.capacity[d] - targets.load[d];
        for &x in xs.iter().filter(|&&x| may_join(&clients[x], d)) {
            let rx = clients[x].rate_bps;
            // The smallest partner whose difference fits: the largest difference that does.
            let i = ys.partition_point(|&(ry, _)| rx - ry > room);
            let Some(&(ry, y)) = ys.get(i) else {
                continue;
            };
            if rx - ry >= shed && best.is_none_or(|b| rx - ry > b.0) {
                best = Some((rx - ry, x, y));
            }
        }
    }
    let Some((_, x, y)) = best else {
        return false;
    };
    let d = clients[y].port;
    let reasons = (
        reason_for(&clients[x], Reason::Overload),
        reason_for(&clients[y], Reason::Room),
    );
    swap(reasons, (h, d), (x, y), clients, targets, took, moves);
    true
}
