//! What the core keeps of each client, and its bounds: a client's record (its move, its
//! refusal, the hold-down in force) as the rebalance asks it, and how the per-client maps stay
//! within the client table's size without forgetting a move that still holds.

use std::collections::HashMap;

use super::{outcome, ClientKey, Moved, PortIndex, Steerer};
use crate::policy::hold_down::{since_move_secs, HoldDown};
use crate::policy::Reason;

/// A client's move and refusal as the core holds them, with the hold-down in force.
pub(crate) struct Record<'a> {
    pub(super) moved: Option<&'a Moved>,
    pub(super) refused: Option<&'a outcome::Refused>,
    pub(super) hold: HoldDown,
    pub(super) hold_kept: bool,
}

impl Record<'_> {
    pub(super) fn refused_now(&self, now: u64) -> bool {
        self.refused.is_some_and(|r| now < r.until)
    }

    /// Within the hold-down of its move, or of a refused one.
    pub(super) fn held(&self, now: u64) -> bool {
        self.hold_kept && self.moved.is_some_and(|m| self.hold.holds(m.at_ms, now))
            || self.refused_now(now)
    }

    /// The port its move within the hold-down took it off, and why. None for a move taken over
    /// from a state file, whose origin is not kept (`left` is its own port): with no port to
    /// keep it from, it makes no second move within its hold-down.
    pub(super) fn last_move(&self, now: u64) -> Option<(PortIndex, Reason)> {
        if self.refused_now(now) {
            return None;
        }
        self.moved
            .filter(|m| self.hold.holds(m.at_ms, now) && m.left != m.port)
            .map(|m| (m.left, m.reason))
    }

    pub(super) fn since_move_secs(&self, now: u64) -> Option<u64> {
        self.moved.map(|m| since_move_secs(m.at_ms, now))
    }
}

/// Keeps `map` within `bound` entries (at least 1) by forgetting those whose `age` is least:
/// the per-client records are bounded like the client table. Once over, it forgets the oldest
/// eighth of the bound in one pass, so a burst of new records (a port failing under thousands
/// of clients, the table full of moves) costs one pass per eighth, not a pass per record.
pub(crate) fn forget_oldest<V, A: Ord>(
    map: &mut HashMap<ClientKey, V>,
    bound: usize,
    age: impl Fn(&V) -> A,
) {
    let bound = bound.max(1);
    if map.len() <= bound {
        return;
    }
    let keep = bound - bound / 8;
    let mut by_age: Vec<(A, ClientKey)> = map.iter().map(|(k, v)| (age(v), *k)).collect();
    let drop = by_age.len() - keep;
    by_age.select_nth_unstable(drop - 1);
    for (_, k) in &by_age[..drop] {
        map.remove(k);
    }
}

impl Steerer {
    /// Keeps the moves within their bound (the client table's size) as [`forget_oldest`] does,
    /// but never by forgetting a move within its hold-down or with updates still to send: a
    /// LAN larger than the table moves more clients than it tracks, and a move forgotten early
    /// let its client be moved again within the hold-down (the simulation's seed 634869, a move
    /// 44 s after the last under a 45 s hold-down). Past the bound for a while, the moves are
    /// bounded by the moves one hold-down makes. A move forgotten goes where an idle one goes:
    /// the client still sends to that port, and a failover must find it.
    pub(super) fn forget_oldest_moves(&mut self, now: u64) {
        let bound = self.cfg.max_moved.max(1);
        if self.moved.len() <= bound {
            return;
        }
        let hold = self.hold_ms();
        let mut done: Vec<(u64, ClientKey)> = self
            .moved
            .iter()
            .filter(|(_, m)| now.saturating_sub(m.at_ms) >= hold && m.pending.is_empty())
            .map(|(k, m)| (m.at_ms, *k))
            .collect();
        let drop = (self.moved.len() - (bound - bound / 8)).min(done.len());
        if drop == 0 {
            return;
        }
        done.select_nth_unstable(drop - 1);
        for (_, k) in &done[..drop] {
            if let Some(m) = self.moved.remove(k) {
                self.answered
                    .restore(now, *k, 1u64 << m.port.min(63), m.claims);
            }
        }
    }
}
