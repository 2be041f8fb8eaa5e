//! The steering core: which clients rlbd moved and where, the sends that put and keep them
//! there, and the limits on those sends. Pure, in the style of ntpd-rs's protocol crate: every
//! method takes an event and the time (milliseconds on the daemon's monotonic clock) and pushes
//! [`Action`]s — send this frame on this port, log this — that the event loop carries out.
//!
//! The rules it keeps, whatever the events:
//! - a frame only ever goes to a client the kernel's neighbour table confirms at that moment, and
//!   only ever claims one of the server's own addresses (both asked of the [`HostView`] at send
//!   time, not at move time);
//! - updates are rate-limited per client and in total ([`Limiter`]);
//! - a client is not moved for overload again within the hold-down;
//! - a client rlbd moved onto a port that fails is moved to a live port in the same step, one
//!   that has been up a while if there is one ([`STABLE_MS`]); a port that just came back is
//!   no target of a chosen move either, so a flapping port does not pull clients to and fro;
//! - a move whose every frame the kernel refused was not made: the client is where it was, and
//!   the move may be tried again after a growing delay ([`Steerer::on_send_result`]);
//! - one frame seen several times (a broadcast on every port, a client's ARP retries) is answered
//!   with one re-assertion.
//!
//! [`HostView`]: crate::host::HostView

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::IpAddr;

use log::Level;

use super::answered::Answered;
use super::arp::{steering_update, tagged};
use super::nd::neighbor_advertisement;
use crate::client::ClientKey;
use crate::host::Claim;
use crate::logging::Fields;
use crate::policy::hold_down::HoldDown;
use crate::policy::limits::{Admit, Limiter};
use crate::policy::{Ceiling, PolicyConfig, PortView, Reason};
use crate::Mac;

pub use crate::policy::model::PortIndex;
pub use types::{
    Action, ClientSnap, Counters, Ctx, LogKind, Moved, PortInfo, Rule, RulesOff, SendOutcome,
    SteerConfig, Weakening,
};

/// Queued sends per client at most; past it a re-assertion storm is shed, not buffered.
const MAX_PENDING_PER_CLIENT: usize = 8;

/// A port that came back less than this long ago is a target only when no other port is up:
/// a link that flaps would otherwise take clients on and drop them again.
pub const STABLE_MS: u64 = 5000;

pub struct Steerer {
    cfg: SteerConfig,
    moved: HashMap<ClientKey, Moved>,
    /// (due, client): a client's entry is live while its `pending` holds that due time.
    timers: BinaryHeap<Reverse<(u64, ClientKey)>>,
    limiter: Limiter,
    counters: Counters,
    next_move_id: u64,
    refused: HashMap<ClientKey, outcome::Refused>,
    /// Per port, when the core saw it come up (0: up when first seen); `None` while down.
    up_since: Vec<Option<u64>>,
    /// Ports that came back unseen (a flap only the carrier count told) before the core first
    /// noted the ports: applied when it does.
    back_unseen: Vec<(PortIndex, u64)>,
    /// Where the host's own frames told clients rlbd did not move to send.
    answered: Answered,
    /// The next free turn for a move's first frame held back by the total rate limit.
    next_turn_ms: u64,
    /// Moved clients whose port's MAC changed since they last heard it (balance-alb swapped
    /// MACs), or whose move's first send the total rate limit cut short after some claims:
    /// their next update waits its turn instead of being shed by the total rate limit (a
    /// failover spends that budget at once). Each with the first of its claims not yet told.
    unheard: HashMap<ClientKey, usize>,
    /// MACs ports gave up that no port held yet, with when: balance-alb's swap can reach us in
    /// two batches, the port that takes the MAC in the second (`follow_port_macs`).
    macs_untaken: Vec<(PortIndex, Mac, u64)>,
    /// Ports whose old MAC another port took lately, within `SWAP_WINDOW_MS` (the port that
    /// gave it up, the one that holds it, when): a client counted on the first before then
    /// sends to the second. One a port, the latest.
    macs_moved: Vec<(PortIndex, PortIndex, u64)>,
    /// Clients a failover could not move off a dead port (the host view could not claim them
    /// yet: no confirmed neighbour entry), with that port and when, for `UNPLACED_MS`: a
    /// neighbour entry of theirs confirmed since retries them (`retry_unplaced`).
    unplaced: HashMap<ClientKey, (PortIndex, u64)>,
    /// The once-a-second rebalance's buffers, kept so that a second allocates nothing.
    scratch: Scratch,
    /// Where a full port reads, learned: `saturated` and `max_fill` follow it.
    saturation: Ceiling,
    /// The `saturated` in force the log last told.
    saturation_said: f64,
}

/// The rebalance's clients and ports as the planner sees them, and the ports it moved clients
/// off.
#[derive(Debug, Default)]
struct Scratch {
    clients: Vec<crate::policy::ClientView>,
    ports: Vec<crate::policy::PortView>,
    made: Vec<PortIndex>,
}

fn log(out: &mut Vec<Action>, level: Level, msg: String) {
    out.push(Action::Log(level, LogKind::Steer, msg, Fields::default()));
}

impl Steerer {
    pub fn new(cfg: SteerConfig) -> Self {
        let limiter = Limiter::new(cfg.per_client_per_sec, cfg.total_per_sec, cfg.max_moved);
        Steerer {
            moved: HashMap::new(),
            timers: BinaryHeap::new(),
            limiter,
            counters: Counters::default(),
            next_move_id: 1,
            refused: HashMap::new(),
            up_since: Vec::new(),
            back_unseen: Vec::new(),
            answered: Answered::new(cfg.max_moved),
            next_turn_ms: 0,
            unheard: HashMap::new(),
            macs_untaken: Vec::new(),
            macs_moved: Vec::new(),
            unplaced: HashMap::new(),
            scratch: Scratch::default(),
            saturation: Ceiling::default(),
            saturation_said: cfg.policy.saturated,
            cfg,
        }
    }

    pub fn config(&self) -> &SteerConfig {
        &self.cfg
    }

    /// The policy the planner uses: the configured one with `saturated` and `max_fill` raised
    /// to where full ports are seen to read (`policy::ceiling`).
    pub fn policy_in_force(&self) -> PolicyConfig {
        self.saturation.tune(&self.cfg.policy)
    }

    /// Where a full port reads, as a utilization, once a port has read `saturated` or more.
    pub fn saturation_ceiling(&self) -> Option<f64> {
        self.saturation.level()
    }

    /// Learns from this second's ports where a full one reads, and returns the policy in force
    /// after it; says when that moves the `saturated` in force by half a percent or more.
    fn learn_saturation(&mut self, ports: &[PortView], out: &mut Vec<Action>) -> PolicyConfig {
        self.saturation.observe(&self.cfg.policy, ports);
        let tuned = self.policy_in_force();
        let Some(level) = self.saturation.level() else {
            return tuned;
        };
        if (tuned.saturated - self.saturation_said).abs() >= 0.005 {
            self.saturation_said = tuned.saturated;
            let msg = format!(
                "full ports read {:.1}% of their capacity: a port counts as saturated from \
                 {:.1}%, and a move off one may fill its target up to {:.1}%",
                level * 100.0,
                tuned.saturated * 100.0,
                tuned.max_fill * 100.0
            );
            log(out, Level::Info, msg);
        }
        tuned
    }

    /// New settings (a reload); moves and counters are kept.
    pub fn reconfigure(&mut self, cfg: SteerConfig) {
        if (cfg.per_client_per_sec, cfg.total_per_sec, cfg.max_moved)
            != (
                self.cfg.per_client_per_sec,
                self.cfg.total_per_sec,
                self.cfg.max_moved,
            )
        {
            self.limiter = Limiter::new(cfg.per_client_per_sec, cfg.total_per_sec, cfg.max_moved);
        }
        self.answered.set_bound(cfg.max_moved);
        self.cfg = cfg;
        self.drop_excluded();
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    pub fn moved(&self, client: &ClientKey) -> Option<&Moved> {
        self.moved.get(client)
    }

    pub fn moved_iter(&self) -> impl Iterator<Item = (&ClientKey, &Moved)> {
        self.moved.iter()
    }

    pub fn moved_count(&self) -> usize {
        self.moved.len()
    }

    /// Moved less than the hold-down ago, or its last move refused whole a short while ago:
    /// stays where it is, except for failover.
    pub fn held(&self, client: &ClientKey, now: u64) -> bool {
        self.record(client).held(now)
    }

    /// The port `client`'s last move took it off and why it moved, while the hold-down (not a
    /// refused move) holds it: the planner may correct such a move once (`Reason::Settle`),
    /// never back to that port.
    pub fn last_move(&self, client: &ClientKey, now: u64) -> Option<(PortIndex, Reason)> {
        self.record(client).last_move(now)
    }

    /// Whole seconds (rounded: decisions come a second apart, give or take a few ms) since rlbd
    /// moved `client`, if it did: the planner makes no overload move while a move of the last
    /// second still blurs the figures (`policy::SETTLE_SECS`).
    pub fn since_move_secs(&self, client: &ClientKey, now: u64) -> Option<u64> {
        self.record(client).since_move_secs(now)
    }

    /// What the core holds of `client` (its move, its refusal), looked up once: the
    /// rebalance asks four questions of every client every second.
    pub(super) fn record(&self, client: &ClientKey) -> Record<'_> {
        Record {
            moved: self.moved.get(client),
            refused: self.refused.get(client),
            hold: HoldDown::from_ms(self.hold_ms()),
            hold_kept: !self.cfg.rules_off.has(Rule::HoldDown),
        }
    }

    /// The hold-down, ms (a second short when weakened, to prove the simulation sees it).
    fn hold_ms(&self) -> u64 {
        let ms = self.cfg.policy.hold_down.saturating_mul(1000);
        if self.cfg.rules_off.weakened(Weakening::HoldDownShort) {
            return ms.saturating_sub(1000);
        }
        ms
    }

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

    fn schedule(&mut self, client: ClientKey, first: u64, count: u32, out: &mut Vec<Action>) {
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
            // The claims told the new MAC already, on an earlier turn.
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

mod moves;

mod outcome;

#[cfg(test)]
mod fixture;

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod refused_tests;

#[cfg(test)]
mod failover_tests;

#[cfg(test)]
mod flap_tests;

#[cfg(test)]
mod answered_tests;

#[cfg(test)]
mod forget_tests;

#[cfg(test)]
mod pins_tests;

#[cfg(test)]
mod beside_tests;

#[cfg(test)]
mod mac_change_tests;

#[cfg(test)]
mod bound_tests;
#[cfg(test)]
mod reannounce_tests;

#[cfg(test)]
mod props;

#[cfg(test)]
mod props_harness;

#[cfg(test)]
mod props_ops;

mod durable;
mod lines;
mod pins;
mod ports;
mod records;
mod types;
mod watching;
pub use durable::{DurableMove, SteerState};
pub(crate) use records::forget_oldest;
use records::Record;
