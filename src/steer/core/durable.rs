//! The part of the steering core that must outlive the process: the moves with their
//! hold-downs and claims, the refused moves' backoff, whom the host answered where, and the
//! per-client budgets. A restarted daemon that did not have it would move the same clients again
//! within seconds, breaking the hold-down it had promised (see `crate::engine::persist`).

use super::outcome::Refused;
use super::{Moved, PortIndex, Steerer};
use crate::client::ClientKey;
use crate::host::Claim;
use crate::policy::Reason;
use crate::Mac;

/// One move as it outlives the process.
#[derive(Debug, Clone, PartialEq)]
pub struct DurableMove {
    pub client: ClientKey,
    pub port: PortIndex,
    pub claims: Vec<Claim>,
    pub at_ms: u64,
    pub reason: Reason,
    pub reasserts: u64,
}

/// The steering core's durable state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SteerState {
    pub moves: Vec<DurableMove>,
    /// Clients whose last move the kernel refused whole: not moved before `until` (ms), and
    /// how many refusals in a row.
    pub refused: Vec<(ClientKey, u64, u32)>,
    /// Clients the host's own frames placed, with the ports (a bitmask) and their claims.
    pub answered: Vec<(ClientKey, u64, Vec<Claim>)>,
    /// Per-client budgets not full: (client, tokens left).
    pub budgets: Vec<(Mac, f64)>,
}

impl Steerer {
    /// Whether the record of whom the host answered where changed since the last call (moves
    /// are counted by the engine itself).
    pub fn take_durable_changed(&mut self) -> bool {
        self.answered.take_changed()
    }

    /// How many clients the record of the host's answers holds.
    pub fn answered_count(&self) -> usize {
        self.answered.len()
    }

    /// The durable state at `now`, in a stable order. Only confirmed moves count: a move none
    /// of whose frames has gone out yet may never reach its client.
    pub fn export(&self, now: u64) -> SteerState {
        let mut moves: Vec<DurableMove> = self
            .moved
            .iter()
            .filter_map(|(k, m)| {
                let m = if m.confirmed { m } else { m.prior.as_deref()? };
                Some(DurableMove {
                    client: *k,
                    port: m.port,
                    claims: m.claims.clone(),
                    at_ms: m.at_ms,
                    reason: m.reason,
                    reasserts: m.reasserts,
                })
            })
            .collect();
        moves.sort_by_key(|m| m.client);
        let mut refused: Vec<(ClientKey, u64, u32)> = self
            .refused
            .iter()
            .map(|(k, r)| (*k, r.until, r.in_a_row))
            .collect();
        refused.sort_by_key(|r| r.0);
        let mut budgets = self.limiter.spent(now);
        budgets.sort_by_key(|b| b.0);
        SteerState {
            moves,
            refused,
            answered: self.answered.export(),
            budgets,
        }
    }

    /// Takes over an earlier daemon's state: each move is kept (its hold-down runs from when it
    /// was made) and re-asserted now, since the client may have re-resolved the server while no
    /// daemon watched. Moves onto ports that are not usable are left to the failover. The
    /// update budgets start spent: the earlier daemon may have used them after it wrote the
    /// state, so the re-assertions go out at the budgets' rate.
    pub fn import(&mut self, now: u64, state: SteerState, usable: impl Fn(PortIndex) -> bool) {
        self.limiter.start_empty(now);
        for d in state.moves {
            let move_id = self.next_move_id;
            self.next_move_id += 1;
            self.moved.insert(
                d.client,
                Moved {
                    port: d.port,
                    // Where it came from is not kept: a restored move is not settled again
                    // (`last_move` has none for it).
                    left: d.port,
                    claims: d.claims,
                    at_ms: d.at_ms.min(now),
                    reason: d.reason,
                    reasserts: d.reasserts,
                    pending: Vec::new(),
                    move_id,
                    issued: 0,
                    refused: 0,
                    confirmed: true,
                    prior: None,
                    undone: None,
                    turn: None,
                },
            );
            if usable(d.port) {
                let repeats = self.cfg.repeats;
                self.schedule(d.client, now, repeats, &mut Vec::new());
            }
        }
        for (k, until, in_a_row) in state.refused {
            self.refused.insert(k, Refused { until, in_a_row });
        }
        if self.cfg.follow_answers {
            for (k, ports, claims) in state.answered {
                if !self.moved.contains_key(&k) {
                    self.answered.restore(now, k, ports, claims);
                }
            }
        }
        for (mac, tokens) in state.budgets {
            self.limiter.restore(mac, tokens, now);
        }
        super::forget_oldest(&mut self.moved, self.cfg.max_moved, |m| m.at_ms);
    }
}
