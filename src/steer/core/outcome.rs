//! The outcome of the core's sends: a move is believed made once one of its frames went out;
//! a move whose every frame the kernel refused is undone.

use log::Level;

use super::{forget_oldest, log, Action, Ctx, SendOutcome, Steerer};
use crate::client::ClientKey;

/// Clients whose last move was refused whole: not moved for overload again before `until`;
/// the delay doubles with each refused move in a row, up to the hold-down.
#[derive(Debug, Clone, Copy)]
pub(super) struct Refused {
    pub(super) until: u64,
    pub(super) in_a_row: u32,
}

/// The first delay after a refused move, ms.
const REFUSED_BACKOFF_MS: u64 = 2000;

impl Steerer {
    /// What became of a frame the core asked for (`Action::Send`). A move is believed made once
    /// one of its frames is sent; when every frame of it is refused and none is left to send,
    /// it was not made: the client is where rlbd had it before (or nowhere rlbd put it), and
    /// the planner may try again after a delay that doubles with each refusal in a row.
    /// True when the durable state changed (a move confirmed, or refused).
    pub fn on_send_result(
        &mut self,
        now: u64,
        client: ClientKey,
        move_id: u64,
        outcome: SendOutcome,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(m) = self
            .moved
            .get_mut(&client)
            .filter(|m| m.move_id == move_id && !m.confirmed)
        else {
            return false;
        };
        match outcome {
            SendOutcome::Sent => {
                m.confirmed = true;
                m.prior = None;
                self.refused.remove(&client);
            }
            SendOutcome::Refused => {
                m.refused += 1;
                self.undo_if_refused(now, client, ctx, out);
            }
        }
        true
    }

    /// Undoes `client`'s move if every frame of it was refused and none is left to send.
    pub(super) fn undo_if_refused(
        &mut self,
        now: u64,
        client: ClientKey,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        let Some(m) = self.moved.get(&client) else {
            return;
        };
        if m.confirmed || m.issued == 0 || m.refused < m.issued || !m.pending.is_empty() {
            return;
        }
        let Some(mut m) = self.moved.remove(&client) else {
            return;
        };
        self.counters.moves_refused += 1;
        let hold = self.cfg.policy.hold_down.saturating_mul(1000).max(1);
        let r = self.refused.entry(client).or_insert(Refused {
            until: 0,
            in_a_row: 0,
        });
        r.in_a_row = r.in_a_row.saturating_add(1);
        let delay = REFUSED_BACKOFF_MS
            .saturating_mul(1 << (r.in_a_row - 1).min(16))
            .min(hold);
        r.until = now + delay;
        let what = m
            .client_ip()
            .map_or_else(|| client.to_string(), |ip| ip.to_string());
        log(
            out,
            Level::Info,
            format!(
                "move of {what} ({client}) to {} not made: the kernel refused all {} of its frames; not moved for overload for {} s",
                ctx.port_name(m.port),
                m.issued,
                delay / 1000
            ),
        );
        if let Some(mut prior) = m.prior.take() {
            prior.pending.clear();
            prior.reasserts = m.reasserts;
            self.moved.insert(client, *prior);
        }
        forget_oldest(&mut self.refused, self.cfg.max_moved, |r| r.until);
    }
}
