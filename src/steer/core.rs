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
//! - a client rlbd moved onto a port that fails is moved to a live port in the same step;
//! - one frame seen several times (a broadcast on every port, a client's ARP retries) is answered
//!   with one re-assertion.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::IpAddr;

use log::Level;

use super::arp::steering_update;
use super::limiter::Limiter;
use super::nd::neighbor_advertisement;
use super::watch::{at_risk, nd_at_risk, ArpSeen, NdSeen};
use crate::host::{Claim, HostView, Talk};
use crate::policy::{self, ClientView, Move, PolicyConfig, PortView, Reason};
use crate::Mac;

pub type PortId = usize;

/// Queued sends per client at most; past it a re-assertion storm is shed, not buffered.
const MAX_PENDING_PER_CLIENT: usize = 8;

/// What the event loop does for the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send `frame` out of `port`: an update telling `client` to use that port.
    Send {
        port: PortId,
        client: Mac,
        claim: Claim,
        frame: Vec<u8>,
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
    pub mac: Mac,
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
}

/// A client rlbd moved, and keeps where it put it.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    pub port: PortId,
    /// The addresses claimed toward it, checked against the host view at every send.
    pub claims: Vec<Claim>,
    pub at_ms: u64,
    pub reason: Reason,
    pub reasserts: u64,
    /// Due times of its queued sends.
    pending: Vec<u64>,
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
    pub reasserts: u64,
    pub sent: u64,
    pub suppressed: u64,
}

pub struct Steerer {
    cfg: SteerConfig,
    moved: HashMap<Mac, Moved>,
    /// (due, client): a client's entry is live while its `pending` holds that due time.
    timers: BinaryHeap<Reverse<(u64, Mac)>>,
    limiter: Limiter,
    counters: Counters,
}

fn log(out: &mut Vec<Action>, level: Level, msg: String) {
    out.push(Action::Log(level, msg));
}

impl Steerer {
    pub fn new(cfg: SteerConfig) -> Self {
        let limiter = Limiter::new(cfg.per_client_per_sec, cfg.total_per_sec, cfg.max_moved);
        Steerer {
            cfg,
            moved: HashMap::new(),
            timers: BinaryHeap::new(),
            limiter,
            counters: Counters::default(),
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
        self.cfg = cfg;
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    pub fn moved(&self, client: &Mac) -> Option<&Moved> {
        self.moved.get(client)
    }

    pub fn moved_iter(&self) -> impl Iterator<Item = (&Mac, &Moved)> {
        self.moved.iter()
    }

    pub fn moved_count(&self) -> usize {
        self.moved.len()
    }

    /// Moved less than the hold-down ago: stays where it is, except for failover.
    pub fn held(&self, client: &Mac, now: u64) -> bool {
        let hold = self.cfg.policy.hold_down.saturating_mul(1000);
        self.moved
            .get(client)
            .is_some_and(|m| now.saturating_sub(m.at_ms) < hold)
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

    fn schedule(&mut self, client: Mac, first: u64, count: u32, out: &mut Vec<Action>) {
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
    fn send_update(&mut self, now: u64, client: Mac, ctx: &Ctx, out: &mut Vec<Action>) {
        let Some(m) = self.moved.get(&client) else {
            return;
        };
        let Some(port) = ctx.ports.get(m.port).filter(|p| p.usable) else {
            return;
        };
        if self.cfg.dry_run {
            return;
        }
        for claim in m.claims.clone() {
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
            if !self.limiter.allow(client, now) {
                self.counters.suppressed += 1;
                log(
                    out,
                    Level::Debug,
                    format!("update to {} suppressed by the rate limit", claim.client()),
                );
                continue;
            }
            self.counters.sent += 1;
            let frame = match claim {
                Claim::V4 { server, .. } => steering_update(client, port.mac, server).to_vec(),
                Claim::V6 { client: c6, server } => {
                    neighbor_advertisement(client, c6, port.mac, server).to_vec()
                }
            };
            out.push(Action::Send {
                port: m.port,
                client,
                claim,
                frame,
            });
        }
    }

    /// Puts `client` on `mv.to`: claims what the host view allows toward it, logs the move with
    /// `why`, and sends the first update now. Refused for a client the kernel does not confirm,
    /// a target that is not usable, and an overload move of a client still held.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_move(
        &mut self,
        now: u64,
        client: Mac,
        talk: &Talk,
        mv: &Move,
        why: &str,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) -> bool {
        if mv.reason == Reason::Overload && self.held(&client, now) {
            log(out, Level::Debug, format!("not moving {client}: held"));
            return false;
        }
        if !ctx.ports.get(mv.to).is_some_and(|p| p.usable) {
            log(
                out,
                Level::Debug,
                format!(
                    "not moving {client}: {} is not usable",
                    ctx.port_name(mv.to)
                ),
            );
            return false;
        }
        let claims = ctx.host.claims_for(client, talk);
        let Some(first) = claims.first() else {
            log(
                out,
                Level::Debug,
                format!("not moving {client}: no confirmed neighbour entry with a server address to claim"),
            );
            return false;
        };
        let also = claims
            .iter()
            .skip(1)
            .map(|c| format!(" and {} -> {}", c.client(), c.server()))
            .collect::<String>();
        log(
            out,
            Level::Info,
            format!(
                "{}move {} ({client}) {} -> {}: {:.1} Mbit/s; {} {:.2}->{:.2}, {} {:.2}->{:.2}; {why}{}",
                if self.cfg.dry_run { "dry run: would " } else { "" },
                first.client(),
                ctx.port_name(mv.from),
                ctx.port_name(mv.to),
                mv.rate_bps / 1e6,
                ctx.port_name(mv.from),
                mv.from_util.0,
                mv.from_util.1,
                ctx.port_name(mv.to),
                mv.to_util.0,
                mv.to_util.1,
                if also.is_empty() { String::new() } else { format!("; claims{also}") },
            ),
        );
        match mv.reason {
            Reason::Overload => self.counters.moves_overload += 1,
            Reason::Failover => self.counters.moves_failover += 1,
            Reason::Placement => self.counters.moves_placement += 1,
        }
        let reasserts = self.moved.get(&client).map_or(0, |m| m.reasserts);
        self.moved.insert(
            client,
            Moved {
                port: mv.to,
                claims,
                at_ms: now,
                reason: mv.reason,
                reasserts,
                pending: Vec::new(),
            },
        );
        if self.moved.len() > self.cfg.max_moved.max(1) {
            // Bounded like the client table: the oldest move is forgotten first.
            if let Some(oldest) = self
                .moved
                .iter()
                .min_by_key(|(_, m)| m.at_ms)
                .map(|(k, _)| *k)
            {
                self.moved.remove(&oldest);
            }
        }
        self.schedule(client, now, self.cfg.repeats, out);
        self.on_timer(now, ctx, out);
        true
    }

    /// Queues the update again for a moved client whose move something on the wire undid or is
    /// about to undo. Several frames in a burst share one re-assertion: a send already due as
    /// soon as this one would be covers them all.
    fn reassert(&mut self, now: u64, client: Mac, why: &str, ctx: &Ctx, out: &mut Vec<Action>) {
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
    fn assigned_mac(&self, client: &Mac, ctx: &Ctx) -> Option<Mac> {
        let m = self.moved.get(client)?;
        ctx.ports.get(m.port).map(|p| p.mac)
    }

    fn reassert_all(
        &mut self,
        now: u64,
        what: &str,
        risks: Vec<(Mac, &'static str)>,
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
        let moved = &self.moved;
        let risks = nd_at_risk(
            seen,
            |ip| ctx.host.is_ours((*ip).into()),
            |ip| {
                moved
                    .iter()
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

    /// A port's MAC changed (balance-alb swaps MACs on failover): re-asserts every client rlbd
    /// put on it.
    pub fn on_port_mac_changed(
        &mut self,
        now: u64,
        port: PortId,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        let on: Vec<(Mac, &'static str)> = self
            .moved
            .iter()
            .filter(|(_, m)| m.port == port)
            .map(|(k, _)| (*k, "the port's MAC changed"))
            .collect();
        self.reassert_all(now, "port MAC change", on, ctx, out);
    }

    /// Moves every client on a port that just went down or disappeared to live ports, now: those
    /// whose frames arrived there, and those rlbd put there (the driver re-steers only its own).
    /// Also called when a port comes back: clients rlbd moved onto a port that failed while no
    /// port was left are stranded there until one is.
    pub fn failover(
        &mut self,
        now: u64,
        down: &[PortId],
        ports: &[PortView],
        clients: &[ClientSnap],
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        let dead = |p: PortId| down.contains(&p) || !ports.get(p).is_some_and(|v| v.up);
        let mut snaps: Vec<ClientSnap> = Vec::new();
        for c in clients {
            let port = match self.moved.get(&c.mac) {
                Some(m) if dead(m.port) => m.port,
                _ => c.port,
            };
            if down.contains(&port) || self.moved.get(&c.mac).is_some_and(|m| dead(m.port)) {
                snaps.push(ClientSnap { port, ..*c });
            }
        }
        // Moved clients quiet this second are not in the client list, and still need a port.
        for (mac, m) in &self.moved {
            if dead(m.port) && !snaps.iter().any(|s| s.mac == *mac) {
                snaps.push(ClientSnap {
                    mac: *mac,
                    port: m.port,
                    rate_bps: 0.0,
                    talk: Talk::from_claims(&m.claims),
                });
            }
        }
        if snaps.is_empty() {
            return;
        }
        // The planner breaks ties by index: a stable order keeps the outcome deterministic.
        snaps.sort_by_key(|s| s.mac);
        let views = client_views(&snaps, |_| true);
        // The planner takes a port as down from its view: make sure the ones just lost are.
        let mut ports = ports.to_vec();
        for &p in down {
            if let Some(v) = ports.get_mut(p) {
                v.up = false;
            }
        }
        for mv in policy::plan(&self.cfg.policy, &ports, &views) {
            if mv.reason == Reason::Failover {
                let s = snaps[mv.client];
                let why = format!("failover: {} is down", ctx.port_name(mv.from));
                self.apply_move(now, s.mac, &s.talk, &mv, &why, ctx, out);
            }
        }
    }

    /// The once-a-second decision: the planner's moves for overloaded ports, with the clients
    /// rlbd moved less than the hold-down ago held where they are. `why(move)` says, for the log,
    /// why the source port counts as overloaded. Returns the number of moves made.
    #[allow(clippy::too_many_arguments)]
    pub fn rebalance(
        &mut self,
        now: u64,
        ports: &[PortView],
        clients: &[ClientSnap],
        why: &dyn Fn(&Move) -> String,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) -> usize {
        let views = client_views(clients, |mac| self.held(mac, now));
        let mut made = 0;
        for mv in policy::plan(&self.cfg.policy, ports, &views) {
            let c = clients[mv.client];
            made += usize::from(self.apply_move(now, c.mac, &c.talk, &mv, &why(&mv), ctx, out));
        }
        made
    }

    /// balance-tlb: the first placement of each new client (one rlbd has not moved), since the
    /// driver answers every ARP with the active slave's MAC.
    pub fn place_new(
        &mut self,
        now: u64,
        ports: &[PortView],
        clients: &[ClientSnap],
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        let new: Vec<ClientSnap> = clients
            .iter()
            .filter(|c| !self.moved.contains_key(&c.mac))
            .copied()
            .collect();
        let views = client_views(&new, |_| false);
        for mv in policy::place_new(&self.cfg.policy, ports, &views) {
            let c = new[mv.client];
            let why = "placement: a new client, balance-tlb places none itself";
            self.apply_move(now, c.mac, &c.talk, &mv, why, ctx, out);
        }
    }

    /// Forgets the moves of clients that have left: not `active` (in the client table) and moved
    /// longer than the idle timeout ago.
    pub fn forget_idle(&mut self, now: u64, active: impl Fn(&Mac) -> bool, out: &mut Vec<Action>) {
        let idle = self.cfg.idle_ms;
        self.moved.retain(|mac, m| {
            let keep = active(mac) || now.saturating_sub(m.at_ms) < idle;
            if !keep {
                let ip = m
                    .client_ip()
                    .map_or_else(String::new, |ip| format!("{ip} "));
                out.push(Action::Log(
                    Level::Debug,
                    format!("forgetting the move of {ip}({mac}): idle"),
                ));
            }
            keep
        });
    }
}

fn client_views(snaps: &[ClientSnap], held: impl Fn(&Mac) -> bool) -> Vec<ClientView> {
    snaps
        .iter()
        .map(|s| ClientView {
            port: s.port,
            rate_bps: s.rate_bps,
            held: held(&s.mac),
        })
        .collect()
}

#[cfg(test)]
#[path = "core_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "core_props.rs"]
mod props;
