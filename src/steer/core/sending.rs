//! The sends: updates queued on timers, each checked at its time against the host view
//! (confirm-before-send) and the rate limits, and the turns of the shared budget that a move's
//! first frame, a new MAC's or an undone move's re-assertion waits for rather than be shed.

use std::cmp::Reverse;
use std::net::IpAddr;

use log::Level;

use super::*;
use crate::steer::arp::{steering_update, tagged};
use crate::steer::nd::neighbor_advertisement;

impl Steerer {
    /// Whether the kernel's neighbour table allows an update of `claim` to `client`; weakened,
    /// only whether it knows the client's MAC at all.
    fn allowed(&self, ctx: &Ctx, client: ClientKey, claim: &Claim) -> bool {
        if self.cfg.rules_off.weakened(Weakening::ConfirmMacOnly) {
            return ctx.host.is_ours(claim.server()) && ctx.host.knows(client);
        }
        ctx.host.allows(client, claim)
    }

    /// The earliest time a send is due, for the loop's timeout.
    pub fn next_due(&self) -> Option<u64> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Sends what is due by `now`.
    pub fn on_timer(&mut self, now: u64, ctx: &Ctx, out: &mut Vec<Action>) {
        while let Some(&Reverse((due, client))) = self.timers.peek() {
            if due > now {
                break;
            }
            self.timers.pop();
            let live = self.moved.get_mut(&client).is_some_and(|m| {
                let before = m.pending.len();
                m.pending.retain(|t| *t != due);
                if m.turn == Some(due) {
                    m.turn = None;
                }
                m.pending.len() < before
            });
            if live && resyncing(ctx, now) {
                // Confirm-before-send cannot be checked against a view that may be stale.
                self.schedule(client, now + RESYNC_RETRY_MS, 1, out);
            } else if live {
                self.send_update(now, client, ctx, out);
                self.undo_if_refused(now, client, ctx, out);
            }
        }
        // Entries of forgotten clients and replaced sends linger in the heap until their time;
        // a storm of those must not grow it without bound.
        if self.timers.len() > MAX_PENDING_PER_CLIENT * (self.moved.len() + 64) {
            self.rebuild_timers();
        }
    }

    fn rebuild_timers(&mut self) {
        self.timers = self
            .moved
            .iter()
            .flat_map(|(c, m)| m.pending.iter().map(move |t| Reverse((*t, *c))))
            .collect();
    }

    pub(super) fn schedule(
        &mut self,
        client: ClientKey,
        first: u64,
        count: u32,
        out: &mut Vec<Action>,
    ) {
        let step = self.cfg.repeat_interval_ms;
        let Some(m) = self.moved.get_mut(&client) else {
            return;
        };
        for k in 0..u64::from(count) {
            if m.pending.len() >= MAX_PENDING_PER_CLIENT {
                log(
                    out,
                    Level::Debug,
                    format!("{client}: {MAX_PENDING_PER_CLIENT} updates queued; not queueing more"),
                );
                return;
            }
            let due = first + step * k;
            m.pending.push(due);
            self.timers.push(Reverse((due, client)));
        }
    }

    /// Sends the update that keeps `client` where rlbd put it: one frame per claim the host view
    /// still allows, each within the rate limits.
    fn send_update(&mut self, now: u64, client: ClientKey, ctx: &Ctx, out: &mut Vec<Action>) {
        let Some(m) = self.moved.get(&client) else {
            self.unheard.remove(&client);
            return;
        };
        let Some(port) = ctx.ports.get(m.port).filter(|p| p.usable) else {
            return;
        };
        if self.cfg.dry_run || self.move_excluded(&client, m) {
            return;
        }
        let (port_id, move_id, claims) = (m.port, m.move_id, m.claims.clone());
        let first = m.issued == 0;
        let undone = m.undone.is_some()
            && !self
                .cfg
                .rules_off
                .weakened(Weakening::ReassertionShedWhenBusy);
        let unheard = self.unheard.get(&client).copied();
        let (mut issued, mut waits) = (0, false);
        for (i, claim) in claims.into_iter().enumerate() {
            // The claims told already, on an earlier turn.
            if unheard.is_some_and(|k| i < k) {
                continue;
            }
            let confirm = !self.cfg.rules_off.has(Rule::ConfirmBeforeSend);
            if confirm && !self.allowed(ctx, client, &claim) {
                log(
                    out,
                    Level::Debug,
                    format!(
                        "not sending to {} ({client}): the kernel no longer confirms it, or {} is not ours",
                        claim.client(),
                        claim.server()
                    ),
                );
                continue;
            }
            let admit = if self.cfg.rules_off.has(Rule::RateLimits) {
                Admit::Yes
            } else {
                self.limiter.admit(client.mac, now)
            };
            match admit {
                Admit::Yes => {}
                // A move's first send, a new MAC's, or the re-assertion of a move a host frame
                // undid waits for its turn rather than be shed, for every claim: a dual-stack
                // client may hear only the last (its IPv6 one). A shed re-assertion would leave
                // the client where the host put it, after a re-announcement every client past
                // the budget.
                Admit::Busy if first || undone || unheard.is_some() => {
                    self.unheard.insert(client, i);
                    self.wait_for_turn(now, client, claim.client(), out);
                    waits = true;
                    break;
                }
                _ => {
                    self.counters.suppressed += 1;
                    log(
                        out,
                        Level::Debug,
                        format!("update to {} suppressed by the rate limit", claim.client()),
                    );
                    continue;
                }
            }
            self.counters.sent += 1;
            issued += 1;
            out.push(Action::Send {
                port: port_id,
                client,
                claim,
                frame: update_frame(client, port.mac, claim),
                move_id,
            });
        }
        if let Some(m) = self.moved.get_mut(&client) {
            m.issued = m.issued.saturating_add(issued);
            if issued > 0 {
                m.undone = None;
            }
            // Done without waiting: a turn it still held is given up (its heap entry no longer
            // counts once out of `pending`).
            if let Some(t) = m.turn.take_if(|_| !waits) {
                m.pending.retain(|x| *x != t);
            }
        }
        if !waits {
            self.unheard.remove(&client);
        }
    }

    /// A move's first frame waits its turn for the shared budget instead of being lost: when a
    /// port fails, every client on it must hear once, however many there are. Turns are handed
    /// out one spacing apart, so the wait is as long as the queue ahead, not a retry storm. Its
    /// repeats are dropped: while the budget is short, one frame to each client comes before a
    /// second to any (and their old times would take turns of their own).
    fn wait_for_turn(&mut self, now: u64, client: ClientKey, to: IpAddr, out: &mut Vec<Action>) {
        if let Some(m) = self.moved.get_mut(&client) {
            // Already holding a later turn: it keeps its place, and its other sends go.
            if let Some(held) = m.turn.filter(|t| *t > now) {
                m.pending.retain(|t| *t == held);
                return;
            }
        }
        let turn = self.next_turn_ms.max(now + 1);
        self.next_turn_ms = turn + self.limiter.spacing_ms();
        self.counters.deferred += 1;
        let text = format!(
            "update to {to} waits for the total rate limit ({} ms)",
            turn - now
        );
        log(out, Level::Debug, text);
        if let Some(m) = self.moved.get_mut(&client) {
            m.pending.clear();
            m.turn = Some(turn);
        }
        self.schedule(client, turn, 1, out);
    }
}

/// While the host view is being re-dumped after an overrun, a due send is tried again this much
/// later; past [`RESYNC_HOLD_MAX_MS`] it goes anyway (a re-dump lost or never asked for must not
/// silence rlbd).
const RESYNC_RETRY_MS: u64 = 50;
const RESYNC_HOLD_MAX_MS: u64 = 2000;

/// Whether sends wait for the host view's re-dump.
fn resyncing(ctx: &Ctx, now: u64) -> bool {
    ctx.resync_since
        .is_some_and(|since| now.saturating_sub(since) < RESYNC_HOLD_MAX_MS)
}

/// The frame that tells `client` the server's address of `claim` is at `port_mac`: a
/// gratuitous-form ARP reply or an unsolicited NA, tagged for the client's VLAN.
fn update_frame(client: ClientKey, port_mac: Mac, claim: Claim) -> Vec<u8> {
    match claim {
        Claim::V4 { server, .. } => {
            tagged(&steering_update(client.mac, port_mac, server), client.vlan)
        }
        Claim::V6 { client: c6, server } => tagged(
            &neighbor_advertisement(client.mac, c6, port_mac, server),
            client.vlan,
        ),
    }
}
