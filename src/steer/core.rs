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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::IpAddr;

use log::Level;

use super::answered::Answered;
use super::arp::{steering_update, tagged};
use super::limiter::{Admit, Limiter};
use super::nd::neighbor_advertisement;
use super::watch::{at_risk, nd_at_risk, ArpSeen, NdSeen, ARP_REPLY, ARP_REQUEST};
use crate::capture::NdKind;
use crate::client::ClientKey;
use crate::host::{Claim, HostView, Talk};
use crate::policy::{PolicyConfig, Reason};
use crate::Mac;

pub type PortId = usize;

/// Queued sends per client at most; past it a re-assertion storm is shed, not buffered.
const MAX_PENDING_PER_CLIENT: usize = 8;

/// What the event loop does for the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send `frame` out of `port`: an update telling `client` to use that port. Its outcome,
    /// once known (sent, or refused for good), goes back with [`Steerer::on_send_result`]
    /// under `move_id`.
    Send {
        port: PortId,
        client: ClientKey,
        claim: Claim,
        frame: Vec<u8>,
        move_id: u64,
    },
    /// Write a line to the log.
    Log(Level, String),
}

/// The core's view of one port.
#[derive(Debug, Clone, Copy)]
pub struct PortInfo<'a> {
    pub name: &'a str,
    pub mac: Mac,
    pub usable: bool,
}

/// What every decision may look at: the kernel's view of the server, and the ports.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub host: &'a HostView,
    pub ports: &'a [PortInfo<'a>],
}

impl Ctx<'_> {
    fn port_name(&self, p: PortId) -> &str {
        self.ports.get(p).map_or("?", |i| i.name)
    }
}

/// One client as the daemon measured it this second.
#[derive(Debug, Clone, Copy)]
pub struct ClientSnap {
    pub key: ClientKey,
    /// The port its latest frames arrived on.
    pub port: PortId,
    pub rate_bps: f64,
    pub talk: Talk,
}

/// The core's settings: the policy's, and how updates are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct SteerConfig {
    pub policy: PolicyConfig,
    /// Times each update is sent (the first at once), `repeat_interval_ms` apart.
    pub repeats: u32,
    pub repeat_interval_ms: u64,
    /// Delay of a re-assertion, so it lands after the kernel's frame that it corrects.
    pub reassert_delay_ms: u64,
    pub per_client_per_sec: u32,
    pub total_per_sec: u32,
    /// A move is forgotten once its client has been out of the client table this long.
    pub idle_ms: u64,
    /// Decide and log, send nothing.
    pub dry_run: bool,
    /// Moves remembered at most (the client table's size); the oldest is forgotten first.
    pub max_moved: usize,
    /// Also fail over the clients the host's own ARP and ND frames placed on a port, not only
    /// those counted there: on plain ports, where nobody else would (see [`answered`]).
    pub follow_answers: bool,
}

/// What became of an update frame, as the event loop reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    /// The kernel took it.
    Sent,
    /// Refused, and not to be tried again (the port is down or gone, or the retries ran out).
    Refused,
}

/// A client rlbd moved, and keeps where it put it.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    pub port: PortId,
    /// The port this move took it off: it is not sent back there within the hold-down.
    pub left: PortId,
    /// The addresses claimed toward it, checked against the host view at every send.
    pub claims: Vec<Claim>,
    pub at_ms: u64,
    pub reason: Reason,
    pub reasserts: u64,
    /// Due times of its queued sends.
    pending: Vec<u64>,
    /// This move's number: outcomes of an earlier move's frames are not this one's.
    move_id: u64,
    /// Frames of this move handed out, and refused for good; whether one went out.
    issued: u32,
    refused: u32,
    confirmed: bool,
    /// What rlbd had put the client on before this move, while the move is not confirmed:
    /// where the client still is if every frame of the move is refused.
    prior: Option<Box<Moved>>,
}

impl Moved {
    /// The client's address for people: its IPv4 one if it has one.
    pub fn client_ip(&self) -> Option<IpAddr> {
        self.claims.first().map(Claim::client)
    }
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub moves_overload: u64,
    pub moves_failover: u64,
    pub moves_placement: u64,
    pub moves_room: u64,
    pub moves_settle: u64,
    pub reasserts: u64,
    pub sent: u64,
    pub suppressed: u64,
    /// A move's first frame held back by the total rate limit, to go in its turn.
    pub deferred: u64,
    /// Moves not made: the kernel refused every frame of them.
    pub moves_refused: u64,
}

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
    /// Where the host's own frames told clients rlbd did not move to send.
    answered: Answered,
    /// The next free turn for a move's first frame held back by the total rate limit.
    next_turn_ms: u64,
}

/// Keeps `map` within `bound` entries (at least 1) by forgetting those whose `age` is least:
/// the per-client records are bounded like the client table. Once over, it forgets the oldest
/// eighth of the bound in one pass, so a burst of new records (a port failing under thousands
/// of clients, the table full of moves) costs one pass per eighth, not a pass per record.
pub(super) fn forget_oldest<V, A: Ord>(
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

fn log(out: &mut Vec<Action>, level: Level, msg: String) {
    out.push(Action::Log(level, msg));
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
            answered: Answered::new(cfg.max_moved),
            next_turn_ms: 0,
            cfg,
        }
    }

    pub fn config(&self) -> &SteerConfig {
        &self.cfg
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
        if cfg.follow_answers {
            self.answered.set_bound(cfg.max_moved);
        } else {
            self.answered = Answered::new(cfg.max_moved);
        }
        self.cfg = cfg;
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
        let hold = self.cfg.policy.hold_down.saturating_mul(1000);
        self.moved
            .get(client)
            .is_some_and(|m| now.saturating_sub(m.at_ms) < hold)
            || self.refused.get(client).is_some_and(|r| now < r.until)
    }

    /// The port `client`'s last move took it off and why it moved, while the hold-down (not a
    /// refused move) holds it: the planner may correct such a move once (`Reason::Settle`),
    /// never back to that port.
    pub fn last_move(&self, client: &ClientKey, now: u64) -> Option<(PortId, Reason)> {
        if self.refused.get(client).is_some_and(|r| now < r.until) {
            return None;
        }
        let hold = self.cfg.policy.hold_down.saturating_mul(1000);
        self.moved
            .get(client)
            .filter(|m| now.saturating_sub(m.at_ms) < hold)
            .map(|m| (m.left, m.reason))
    }

    /// Whole seconds (rounded: decisions come a second apart, give or take a few ms) since rlbd
    /// moved `client`, if it did: the planner makes no overload move while a move of the last
    /// second still blurs the figures (`policy::SETTLE_SECS`).
    pub fn since_move_secs(&self, client: &ClientKey, now: u64) -> Option<u64> {
        self.moved
            .get(client)
            .map(|m| (now.saturating_sub(m.at_ms) + 500) / 1000)
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
                m.pending.len() < before
            });
            if live {
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
            return;
        };
        let Some(port) = ctx.ports.get(m.port).filter(|p| p.usable) else {
            return;
        };
        if self.cfg.dry_run {
            return;
        }
        let (port_id, move_id, claims) = (m.port, m.move_id, m.claims.clone());
        let first = m.issued == 0;
        let mut issued = 0;
        for claim in claims {
            if !ctx.host.allows(client, &claim) {
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
            match self.limiter.admit(client.mac, now) {
                Admit::Yes => {}
                Admit::Busy if first && issued == 0 => {
                    // A move's first frame waits its turn for the shared budget instead of being
                    // lost: when a port fails, every client on it must hear once, however many
                    // there are. Turns are handed out one spacing apart, so the wait is as long
                    // as the queue ahead, not a retry storm. Its repeats are dropped: while
                    // the budget is short, one frame to each client comes before a second to
                    // any (and their old times would take turns of their own).
                    let turn = self.next_turn_ms.max(now + 1);
                    self.next_turn_ms = turn + self.limiter.spacing_ms();
                    self.counters.deferred += 1;
                    log(
                        out,
                        Level::Debug,
                        format!(
                            "update to {} waits for the total rate limit ({} ms)",
                            claim.client(),
                            turn - now
                        ),
                    );
                    if let Some(m) = self.moved.get_mut(&client) {
                        m.pending.clear();
                    }
                    self.schedule(client, turn, 1, out);
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
            let frame = match claim {
                Claim::V4 { server, .. } => {
                    tagged(&steering_update(client.mac, port.mac, server), client.vlan)
                }
                Claim::V6 { client: c6, server } => tagged(
                    &neighbor_advertisement(client.mac, c6, port.mac, server),
                    client.vlan,
                ),
            };
            out.push(Action::Send {
                port: port_id,
                client,
                claim,
                frame,
                move_id,
            });
        }
        if let Some(m) = self.moved.get_mut(&client) {
            m.issued = m.issued.saturating_add(issued);
        }
    }

    /// Queues the update again for a moved client whose move something on the wire undid or is
    /// about to undo. Several frames in a burst share one re-assertion: a send already due as
    /// soon as this one would be covers them all.
    fn reassert(
        &mut self,
        now: u64,
        client: ClientKey,
        why: &str,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        let due = now + self.cfg.reassert_delay_ms;
        let Some(m) = self.moved.get_mut(&client) else {
            return;
        };
        if m.pending.iter().any(|t| *t <= due) {
            return;
        }
        m.reasserts += 1;
        self.counters.reasserts += 1;
        let what = m
            .client_ip()
            .map_or_else(|| client.to_string(), |ip| ip.to_string());
        log(
            out,
            Level::Debug,
            format!("re-asserting {what} on {}: {why}", ctx.port_name(m.port)),
        );
        // Once now, once a repeat later: the kernel or the driver may send more than one frame.
        self.schedule(client, due, 2, out);
    }

    /// The MAC of the port rlbd put `client` on; `None` for a client it did not move.
    fn assigned_mac(&self, client: &ClientKey, ctx: &Ctx) -> Option<Mac> {
        let m = self.moved.get(client)?;
        ctx.ports.get(m.port).map(|p| p.mac)
    }

    fn reassert_all(
        &mut self,
        now: u64,
        what: &str,
        risks: Vec<(ClientKey, &'static str)>,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        if risks.len() > 1 {
            log(
                out,
                Level::Debug,
                format!(
                    "one {what} frame puts {} moved clients at risk; re-asserting them",
                    risks.len()
                ),
            );
        }
        for (client, why) in risks {
            self.reassert(now, client, why, ctx, out);
        }
        self.on_timer(now, ctx, out);
    }

    /// ARP seen on a port: the host's own replies and requests would send a moved client back to
    /// where the kernel or the driver wants it; each is answered with a re-assertion.
    pub fn on_arp(&mut self, now: u64, seen: &ArpSeen, ctx: &Ctx, out: &mut Vec<Action>) {
        self.note_arp_answer(now, seen, ctx);
        let risks = at_risk(
            seen,
            |c| self.assigned_mac(c, ctx),
            self.moved.keys().copied(),
        );
        let risks = risks.into_iter().map(|(m, r)| (m, r.as_str())).collect();
        self.reassert_all(now, "ARP", risks, ctx, out);
    }

    /// Neighbor Discovery seen on a port: the IPv6 counterpart of [`on_arp`](Self::on_arp).
    pub fn on_nd(&mut self, now: u64, seen: &NdSeen, ctx: &Ctx, out: &mut Vec<Action>) {
        self.note_nd_answer(now, seen, ctx);
        let moved = &self.moved;
        let risks = nd_at_risk(
            seen,
            |ip| ctx.host.is_ours((*ip).into()),
            |ip, vlan| {
                moved
                    .iter()
                    .filter(|(k, _)| k.vlan == vlan)
                    .find(|(_, m)| {
                        m.claims
                            .iter()
                            .any(|c| matches!(c, Claim::V6 { client, .. } if client == ip))
                    })
                    .map(|(k, _)| *k)
            },
            |c| self.assigned_mac(c, ctx),
            moved.keys().copied(),
        );
        let risks = risks.into_iter().map(|(m, r)| (m, r.as_str())).collect();
        self.reassert_all(now, "Neighbor Discovery", risks, ctx, out);
    }

    /// Notes where the host's own ARP frame tells its hearers to send: a reply or a unicast
    /// request to one client, a broadcast request to every client on its VLAN. Clients rlbd
    /// moved are left to their move (it re-asserts them).
    fn note_arp_answer(&mut self, now: u64, seen: &ArpSeen, ctx: &Ctx) {
        if !self.cfg.follow_answers || !seen.outgoing {
            return;
        }
        let Some(port) = ctx.ports.iter().position(|p| p.mac == seen.sha) else {
            return;
        };
        if seen.eth_dst.is_multicast() {
            self.answered.broadcast(now, seen.vlan, port);
            return;
        }
        let key = ClientKey::new(seen.eth_dst, seen.vlan);
        // An update in the gratuitous form (rlbd's own) names no client address.
        let to_client = matches!(seen.op, ARP_REQUEST | ARP_REPLY) && seen.tpa != seen.spa;
        if to_client && !self.moved.contains_key(&key) {
            let claim = Claim::V4 {
                client: seen.tpa,
                server: seen.spa,
            };
            self.answered.note(now, key, port, claim);
        }
    }

    /// The IPv6 counterpart of [`note_arp_answer`](Self::note_arp_answer): the host's NA for
    /// one of its addresses, or its NS, tells the hearer the port's MAC.
    fn note_nd_answer(&mut self, now: u64, seen: &NdSeen, ctx: &Ctx) {
        if !self.cfg.follow_answers || !seen.outgoing {
            return;
        }
        let said = seen.lladdr.unwrap_or(seen.eth_src);
        let Some(port) = ctx.ports.iter().position(|p| p.mac == said) else {
            return;
        };
        // An NA advertises the server's target address to the client at the packet's
        // destination; an NS asks the client for the target from the server's source, and the
        // client learns the port's MAC for that source. A link-local one is the port's own
        // (each port has its own): no client reaches the server's other addresses through it.
        let (client, server) = match seen.kind {
            NdKind::Na => (seen.dst_ip, seen.target),
            NdKind::Ns => (seen.target, seen.src_ip),
        };
        if server.is_unicast_link_local() {
            return;
        }
        if seen.eth_dst.is_multicast() {
            self.answered.broadcast(now, seen.vlan, port);
            return;
        }
        let key = ClientKey::new(seen.eth_dst, seen.vlan);
        if self.moved.contains_key(&key) {
            return;
        }
        self.answered
            .note(now, key, port, Claim::V6 { client, server });
    }

    /// A port's MAC changed (balance-alb swaps MACs on failover): re-asserts every client rlbd
    /// put on it.
    pub fn on_port_mac_changed(
        &mut self,
        now: u64,
        port: PortId,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        let on: Vec<(ClientKey, &'static str)> = self
            .moved
            .iter()
            .filter(|(_, m)| m.port == port)
            .map(|(k, _)| (*k, "the port's MAC changed"))
            .collect();
        self.reassert_all(now, "port MAC change", on, ctx, out);
    }
}

#[path = "core_moves.rs"]
mod moves;

#[path = "core_outcome.rs"]
mod outcome;

#[cfg(test)]
#[path = "core_fixture.rs"]
mod fixture;

#[cfg(test)]
#[path = "core_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "core_refused_tests.rs"]
mod refused_tests;

#[cfg(test)]
#[path = "core_flap_tests.rs"]
mod flap_tests;

#[cfg(test)]
#[path = "core_answered_tests.rs"]
mod answered_tests;

#[cfg(test)]
mod forget_tests {
    use super::*;

    #[test]
    fn the_oldest_are_forgotten_an_eighth_at_a_time() {
        let mut m: HashMap<ClientKey, u64> = HashMap::new();
        let mut passes = 0;
        for i in 0..10_000u64 {
            let [.., a, b, c, d] = i.to_be_bytes();
            m.insert(ClientKey::untagged(Mac(2, 0, a, b, c, d)), i);
            let before = m.len();
            forget_oldest(&mut m, 64, |v| *v);
            passes += usize::from(m.len() < before);
            assert!(m.len() <= 64);
            // The newest always survive: everything kept is younger than everything dropped.
            let oldest_kept = m.values().min().copied().unwrap_or(0);
            assert!(i + 1 - oldest_kept <= 64, "{i}: kept {oldest_kept}");
        }
        assert!(passes <= 10_000 / 8 + 1, "{passes} passes");
        let mut one: HashMap<ClientKey, u64> = HashMap::new();
        for i in 0..3u8 {
            one.insert(ClientKey::untagged(Mac(2, 0, 0, 0, 0, i)), u64::from(i));
            forget_oldest(&mut one, 0, |v| *v);
            assert_eq!(
                one.values().copied().collect::<Vec<_>>(),
                vec![u64::from(i)]
            );
        }
    }
}

#[cfg(test)]
#[path = "core_props.rs"]
mod props;
