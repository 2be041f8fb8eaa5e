//! The steering core's decisions that move clients: a move itself, failover, the
//! once-a-second rebalance, balance-tlb's first placements, and forgetting idle moves.

use log::Level;

use super::lines::{move_fields, move_line, settle_line};
use super::ports::RATE_WINDOW_MS;
use super::{log, Action, ClientSnap, Ctx, LogKind, Moved, PortIndex, Scratch, Steerer};

use std::collections::HashSet;

use crate::client::ClientKey;
use crate::host::{Claim, Talk};
use crate::logging::Fields;
use crate::policy::{self, ClientView, Move, PortView, Reason};

impl Steerer {
    /// Puts `client` on `mv.to`: claims what the host view allows toward it, logs the move with
    /// `why`, and sends the first update now. Refused for a client the kernel does not confirm,
    /// a target that is not usable, and an overload move of a client still held.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_move(
        &mut self,
        now: u64,
        client: ClientKey,
        talk: &Talk,
        mv: &Move,
        why: &str,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(claims) = self.may_move(now, client, talk, mv, ctx, out) else {
            return false;
        };
        let line = move_line(self.cfg.dry_run, client, &claims, mv, why, ctx);
        let fields = move_fields(self.cfg.dry_run, client, &claims, mv, ctx);
        out.push(Action::Log(Level::Info, LogKind::Move, line, fields));
        match mv.reason {
            Reason::Overload => self.counters.moves_overload += 1,
            Reason::Failover => self.counters.moves_failover += 1,
            Reason::Placement => self.counters.moves_placement += 1,
            Reason::Room => self.counters.moves_room += 1,
            Reason::Settle => self.counters.moves_settle += 1,
        }
        self.remember_move(now, client, mv, claims);
        self.schedule(client, now, self.cfg.repeats, out);
        self.on_timer(now, ctx, out);
        true
    }

    /// What a move of `client` would claim, or `None` (why, logged at debug) for a client still
    /// held (overload moves), a target that is not usable, or a client the host view cannot
    /// claim toward.
    fn may_move(
        &self,
        now: u64,
        client: ClientKey,
        talk: &Talk,
        mv: &Move,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) -> Option<Vec<Claim>> {
        if self.is_excluded(&client, talk) {
            log(
                out,
                Level::Debug,
                format!("not moving {client}: excluded in [clients]"),
            );
            return None;
        }
        if self.held(&client, now) && !self.may_settle(now, client, mv) {
            log(out, Level::Debug, format!("not moving {client}: held"));
            return None;
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
            return None;
        }
        match ctx.host.claims_for(client, talk) {
            Ok(claims) => Some(claims),
            Err(why) => {
                log(out, Level::Debug, format!("not moving {client}: {why}"));
                None
            }
        }
    }

    /// Whether a held client may make `mv` all the same: a failover or placement, or the one
    /// correction (`Reason::Settle`) of an overload or room move, not back to the port it left.
    fn may_settle(&self, now: u64, client: ClientKey, mv: &Move) -> bool {
        match mv.reason {
            Reason::Failover | Reason::Placement => true,
            Reason::Overload | Reason::Room => false,
            Reason::Settle => matches!(
                self.last_move(&client, now),
                Some((left, Reason::Overload | Reason::Room)) if left != mv.to
            ),
        }
    }

    /// Records the move as the client's current one, bounded like the client table (the oldest
    /// move is forgotten first).
    fn remember_move(&mut self, now: u64, client: ClientKey, mv: &Move, claims: Vec<Claim>) {
        // Where the client is if this move's every frame is refused: the last confirmed move
        // (an unconfirmed one may never have reached it).
        self.answered.forget(&client);
        // A new move tells every claim, whatever an earlier one's turn had told already.
        self.unheard.remove(&client);
        let before = self.moved.remove(&client);
        let reasserts = before.as_ref().map_or(0, |p| p.reasserts);
        let prior = before.and_then(|mut p| {
            if p.confirmed {
                p.prior = None;
                Some(Box::new(p))
            } else {
                p.prior.take()
            }
        });
        let move_id = self.next_move_id;
        self.next_move_id += 1;
        self.moved.insert(
            client,
            Moved {
                port: mv.to,
                left: mv.from,
                claims,
                at_ms: now,
                reason: mv.reason,
                reasserts,
                pending: Vec::new(),
                move_id,
                issued: 0,
                refused: 0,
                confirmed: false,
                prior,
                undone: None,
                turn: None,
            },
        );
        self.forget_oldest_moves(now);
    }

    /// Moves every client on a port that just went down or disappeared to live ports, now: those
    /// whose frames arrived there, and those rlbd put there (the driver re-steers only its own).
    /// Also called when a port comes back: clients rlbd moved onto a port that failed while no
    /// port was left are stranded there until one is.
    pub fn failover(
        &mut self,
        now: u64,
        down: &[PortIndex],
        ports: &[PortView],
        clients: &[ClientSnap],
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        // The planner takes a port as down from its view: make sure the ones just lost are.
        let mut ports = ports.to_vec();
        for &p in down {
            if let Some(v) = ports.get_mut(p) {
                v.up = false;
            }
        }
        self.note_ports(now, &ports);
        let dead = |p: PortIndex| !ports.get(p).is_some_and(|v| v.up);
        let mut snaps: Vec<ClientSnap> = Vec::new();
        for c in clients {
            let moved = self.moved.get(&c.key);
            let port = match moved {
                Some(m) => self.moved_client_port(Some(c), m, now, ctx, dead),
                None => self.unmoved_client_port(c, now, dead),
            };
            if down.contains(&port) || moved.is_some_and(|m| dead(m.port)) {
                snaps.push(ClientSnap { port, ..*c });
            }
        }
        // Moved clients the table forgot still need a port.
        let counted: HashSet<ClientKey> = clients.iter().map(|c| c.key).collect();
        for (key, m) in &self.moved {
            if counted.contains(key) {
                continue;
            }
            let port = self.moved_client_port(None, m, now, ctx, dead);
            if (dead(m.port) || down.contains(&port)) && !snaps.iter().any(|s| s.key == *key) {
                snaps.push(ClientSnap {
                    key: *key,
                    port,
                    rate_bps: 0.0,
                    quiet_secs: u64::MAX,
                    talk: Talk::from_claims(&m.claims),
                });
            }
        }
        // The kernel alone places an excluded client, also off a failed port.
        snaps.retain(|s| !self.is_excluded(&s.key, &s.talk));
        let first_answered = snaps.len();
        let stranded = self.stranded_answers(down, &snaps);
        snaps.extend(
            stranded
                .into_iter()
                .filter(|s| !self.is_excluded(&s.key, &s.talk)),
        );
        if snaps.is_empty() {
            return;
        }
        let only_answered: HashSet<ClientKey> =
            snaps[first_answered..].iter().map(|s| s.key).collect();
        // The planner breaks ties by index: a stable order keeps the outcome deterministic.
        snaps.sort_by_key(|s| s.key);
        let views = client_views(&snaps, |_| true, |_| None);
        let ports = self.stable_targets(now, &ports);
        for mv in policy::plan(&self.policy_in_force(), &ports, &views) {
            if mv.reason == Reason::Failover {
                let s = snaps[mv.client];
                let mut why = format!("failover: {} is down", ctx.port_name(mv.from));
                if only_answered.contains(&s.key) {
                    why.push_str(" (the host or rlbd told it to use that port; no frame of it counted since)");
                }
                if self.apply_move(now, s.key, &s.talk, &mv, &why, ctx, out) {
                    self.unplaced.remove(&s.key);
                } else {
                    self.note_unplaced(now, s.key, mv.from);
                }
            }
        }
    }

    /// Clients the host answered on a failed port that rlbd never counted (resolved, not sent
    /// yet) or moved: their next frames go to the dead port. (A client counted since its answer
    /// is no longer in the record: it is where its frames arrive.) `already`: the clients being
    /// failed over anyway.
    fn stranded_answers(&self, down: &[PortIndex], already: &[ClientSnap]) -> Vec<ClientSnap> {
        // On plain ports the record also holds whom the host's own frames placed; on a bond (the
        // driver keeps its own answers) only the moves forgotten while their clients were idle.
        let on = !self.cfg.rules_off.has(super::Rule::AnsweredFailover);
        let mut answered = if on {
            self.answered.on_ports(down)
        } else {
            Vec::new()
        };
        if self
            .cfg
            .rules_off
            .weakened(super::Weakening::FailoverForgetsPort0)
        {
            answered.retain(|a| a.port != 0);
        }
        if answered.is_empty() {
            return Vec::new();
        }
        let known: HashSet<ClientKey> = already
            .iter()
            .map(|c| c.key)
            .chain(self.moved.keys().copied())
            .collect();
        answered
            .into_iter()
            .filter(|a| !known.contains(&a.key))
            .map(|a| ClientSnap {
                key: a.key,
                port: a.port,
                rate_bps: 0.0,
                quiet_secs: u64::MAX,
                talk: Talk::from_claims(&a.claims),
            })
            .collect()
    }

    /// The once-a-second decision: the planner's moves for overloaded ports, with the clients
    /// rlbd moved less than the hold-down ago held where they are. `beside`: flows on the same
    /// ports that this planner may not move (the guests, whose places are the guests'
    /// planner's), weighed as fixed load. `why(move)` says, for the log, why the source port
    /// counts as overloaded. Returns the ports moves were made off.
    #[allow(clippy::too_many_arguments)]
    pub fn rebalance(
        &mut self,
        now: u64,
        (ports, beside): (&[PortView], &[ClientView]),
        clients: &[ClientSnap],
        why: &dyn Fn(&Move) -> String,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) -> &[PortIndex] {
        // Clients counted this second send where their frames arrived: what the host told them
        // before is past.
        for c in clients.iter().filter(|c| c.rate_bps > 0.0) {
            self.answered
                .counted(&c.key, c.port, now.saturating_sub(RATE_WINDOW_MS));
        }
        // The buffers are the core's, reused every second (taken out while the core is used).
        let mut views = std::mem::take(&mut self.scratch.clients);
        self.views_into(now, (ports, beside), clients, ctx, &mut views);
        self.note_ports(now, ports);
        let in_force = self.learn_saturation(ports, out);
        let mut targets = std::mem::take(&mut self.scratch.ports);
        self.stable_targets_into(now, ports, &mut targets);
        let mut made = std::mem::take(&mut self.scratch.made);
        made.clear();
        let moves = if self.cfg.rules_off.has(super::Rule::Rebalance) {
            Vec::new()
        } else {
            policy::plan(&in_force, &targets, &views)
        };
        let mut skip = false;
        for (i, mv) in moves.iter().enumerate() {
            if std::mem::take(&mut skip) {
                continue;
            }
            // A flow beside the clients is not this planner's to move (failover of a guest is
            // the guests' planner's); an exchange with one is not made at all.
            let own = |m: &Move| m.client < clients.len();
            if !own(mv) || (mv.exchange && !moves.get(i + 1).is_some_and(own)) {
                skip = mv.exchange;
                continue;
            }
            // An exchange is made whole or not at all: one half alone fills a port further.
            let pair = [Some(mv), moves.get(i + 1)];
            if mv.exchange
                && !pair.iter().all(|m| {
                    m.is_some_and(|m| {
                        let c = clients[m.client];
                        self.may_move(now, c.key, &c.talk, m, ctx, out).is_some()
                    })
                })
            {
                skip = true;
                continue;
            }
            let c = clients[mv.client];
            let line = match mv.reason {
                Reason::Failover => format!("failover: {} is down", ctx.port_name(mv.from)),
                Reason::Settle => settle_line(mv, i > 0 && moves[i - 1].exchange, ctx),
                _ => why(mv),
            };
            if self.apply_move(now, c.key, &c.talk, mv, &line, ctx, out) {
                made.push(mv.from);
            }
        }
        self.place_pinned(now, ports, &targets, clients, ctx, out);
        views.truncate(clients.len());
        self.scratch = Scratch {
            clients: views,
            ports: targets,
            made,
        };
        &self.scratch.made
    }

    /// The planner's view of the second: each client where its frames arrive, held while rlbd's
    /// move of it holds, then the flows `beside` it as fixed load. A client that cannot be
    /// moved whole (or that `[clients]` names) is offered as held: the planner would pick it,
    /// the move would be refused, and a client that could have gone would stay.
    fn views_into(
        &self,
        now: u64,
        (ports, beside): (&[PortView], &[ClientView]),
        clients: &[ClientSnap],
        ctx: &Ctx,
        views: &mut Vec<ClientView>,
    ) {
        views.clear();
        views.extend(clients.iter().map(|c| {
            let claims = ctx.host.can_claim(c.key, &c.talk) && self.mark(&c.key, &c.talk).is_none();
            let r = self.record(&c.key);
            let port = Self::current_port(c, r.moved, ports);
            ClientView {
                port,
                // Under a sampled port's resolution a reading is noise: below every floor.
                rate_bps: ports
                    .get(port)
                    .map_or(c.rate_bps, |p| p.resolved(c.rate_bps)),
                held: r.held(now) || !claims,
                fixed: false,
                since_move: r.since_move_secs(now),
                last_move: r.last_move(now).filter(|_| claims),
            }
        }));
        // A guest beside a client is one of the port's flows: a client beside a larger guest is
        // not "the one flow" left alone, and a guest's move a moment ago still shows in the
        // second's figures. The planner may not move them (held, nothing to correct).
        views.extend(beside.iter().map(ClientView::fixed));
    }

    /// The clients as the last [`rebalance`](Self::rebalance) weighed them (where their frames
    /// arrive, their rates, how lately rlbd moved them): the flows the guests' planner weighs
    /// beside the guests.
    pub fn flows(&self) -> &[ClientView] {
        &self.scratch.clients
    }

    /// The ports the last [`rebalance`](Self::rebalance) moved clients off.
    pub fn made(&self) -> &[PortIndex] {
        &self.scratch.made
    }

    /// Claims the addresses a moved client started to talk to since its move (an NFS client
    /// that mounts a second export, a dual-stack client's first IPv6 frame), so that all of its
    /// traffic stays where rlbd put it. What can no longer be claimed stays as it was.
    pub fn refresh_claims(
        &mut self,
        now: u64,
        clients: &[ClientSnap],
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        for c in clients {
            let Some(m) = self.moved.get_mut(&c.key) else {
                continue;
            };
            if !ctx.host.claims_beyond(c.key, &c.talk, &m.claims) {
                continue;
            }
            let Ok(claims) = ctx.host.claims_for(c.key, &c.talk) else {
                continue;
            };
            let new: Vec<Claim> = claims
                .into_iter()
                .filter(|n| !m.claims.contains(n))
                .collect();
            if new.is_empty() {
                continue;
            }
            let list: Vec<String> = new.iter().map(|n| n.server().to_string()).collect();
            log(
                out,
                Level::Info,
                format!(
                    "{} ({}) now also talks to {}: claimed on {}",
                    new[0].client(),
                    c.key,
                    list.join(", "),
                    ctx.port_name(m.port)
                ),
            );
            m.claims.extend(new);
            let repeats = self.cfg.repeats;
            self.schedule(c.key, now, repeats, out);
        }
        self.on_timer(now, ctx, out);
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
            .filter(|c| !self.moved.contains_key(&c.key) && self.mark(&c.key, &c.talk).is_none())
            .copied()
            .collect();
        let views = client_views(&new, |_| false, |_| None);
        for mv in policy::place_new(&self.cfg.policy, ports, &views) {
            let c = new[mv.client];
            let why = "placement: a new client, balance-tlb places none itself";
            self.apply_move(now, c.key, &c.talk, &mv, why, ctx, out);
        }
    }

    /// Forgets the moves of clients that have left: not `active` (in the client table) and moved
    /// longer than the idle timeout ago.
    pub fn forget_idle(
        &mut self,
        now: u64,
        active: impl Fn(&ClientKey) -> bool,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        // A refusal streak ends a hold-down after its last delay.
        let hold = self.cfg.policy.hold_down.saturating_mul(1000);
        self.refused
            .retain(|_, r| now < r.until.saturating_add(hold));
        let idle = self.cfg.idle_ms;
        let answered = &mut self.answered;
        self.moved.retain(|mac, m| {
            // A move with an update still to send is not idle: a re-assertion queued for a frame
            // of the host's must go out first, or the client stays where that frame put it while
            // the record below says otherwise (found by the simulation, seed 4).
            let keep = active(mac) || now.saturating_sub(m.at_ms) < idle || !m.pending.is_empty();
            if !keep {
                let ip = m
                    .client_ip()
                    .map_or_else(String::new, |ip| format!("{ip} "));
                out.push(Action::Log(
                    Level::Debug,
                    LogKind::Steer,
                    format!("forgetting the move of {ip}({mac}): idle"),
                    Fields::default(),
                ));
                // The client still sends to that port's MAC when it wakes (or to the one a frame
                // of the host's told it since, with no update after): if that port fails
                // meanwhile, the failover must find it, as it finds a client the host placed.
                let undone = m
                    .undone
                    .and_then(|(mac, _)| ctx.ports.iter().position(|p| p.mac == mac));
                let ports = [Some(m.port), undone]
                    .into_iter()
                    .flatten()
                    .fold(0u64, |b, p| b | 1u64 << p.min(63));
                answered.restore(now, *mac, ports, m.claims.clone());
            }
            keep
        });
    }
}

fn client_views(
    snaps: &[ClientSnap],
    held: impl Fn(&ClientKey) -> bool,
    since_move: impl Fn(&ClientKey) -> Option<u64>,
) -> Vec<ClientView> {
    snaps
        .iter()
        .map(|s| ClientView {
            port: s.port,
            rate_bps: s.rate_bps,
            held: held(&s.key),
            fixed: false,
            since_move: since_move(&s.key),
            last_move: None,
        })
        .collect()
}
